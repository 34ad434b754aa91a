"""Hugging Face folders in and out, against `transformers` itself: models built from configs
with random weights are saved with save_pretrained, read by glassformer (import-hf, or directly
as a checkpoint), written back (export-hf) and loaded by transformers; outputs are compared.
Nothing is downloaded."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from glassformer import reference, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.errors import CheckpointError  # noqa: E402
from glassformer.formats import hf_dir, loading  # noqa: E402
from glassformer.tokenizer import BPETokenizer, HFTokenizer  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402

WORDS = "the a man woman eats food bread hola mundo el la come pan hello world is".split()
LETTERS = [c for c in "abcdefghijklmnopqrstuvwxyz" if c not in WORDS]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *LETTERS]


def randomize(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue  # Marian's fixed sinusoidal table
            noise = torch.randn(p.shape, generator=g) * 0.3
            p.copy_(1.0 + noise / 3 if p.ndim == 1 and name.endswith("weight") else noise)


def write_wordpiece(folder) -> None:
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    config = transformers.GPT2Config(vocab_size=300, n_positions=24, n_embd=24, n_layer=2, n_head=3)
    model = transformers.GPT2LMHeadModel(config).eval()
    randomize(model, 0)
    model.save_pretrained(folder)
    bpe = BPETokenizer.train([" ".join(WORDS) * 3], vocab_size=300)
    (folder / "tokenizer.json").write_text(bpe.hf_json)
    return folder, model


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=24,
        num_attention_heads=3,
        num_hidden_layers=2,
        intermediate_size=40,
        max_position_embeddings=32,
    )
    model = transformers.BertModel(config).eval()
    randomize(model, 1)
    model.save_pretrained(folder)
    write_wordpiece(folder)
    return folder, model


def ids_tensor(*rows):
    return torch.tensor([list(r) for r in rows])


def test_gpt2_folder_in_and_out(gpt2_dir, tmp_path, capsys):
    folder, model = gpt2_dir
    assert main(["import-hf", str(folder), str(tmp_path / "ck")]) == 0
    cfg, params, _ = weights.load(tmp_path / "ck")
    direct = loading.load(folder)  # a Hugging Face folder is a checkpoint too
    assert all(np.array_equal(direct[1][n], params[n]) for n in params)
    ids = ids_tensor([3, 7, 9, 1, 4, 12])
    with torch.no_grad():
        want = model(ids).logits
        got = from_params(cfg, params, torch.float32).eval()(ids)
    assert float((got - want).abs().max()) < 1e-5
    ref = reference.forward(params, cfg, ids[0].tolist())
    assert float(np.abs(ref - want[0].double().numpy()).max()) < 1e-5
    assert main(["export-hf", str(tmp_path / "ck"), str(tmp_path / "hf")]) == 0
    back = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    sd, want_sd = back.state_dict(), model.state_dict()
    assert all(torch.equal(sd[k], v) for k, v in want_sd.items() if k in sd)  # bit-exact
    with torch.no_grad():
        assert torch.equal(back(ids).logits, want)
    assert "imported gpt2" in capsys.readouterr().out


@pytest.mark.parametrize("engine", ["torch", "reference"])
def test_generate_reads_a_gpt2_folder_like_transformers(gpt2_dir, engine, capsys):
    folder, model = gpt2_dir
    tok = HFTokenizer.from_files(folder)
    prompt = "hello world"
    ids = tok.encode_for_model(prompt)[0]
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=8, do_sample=False, eos_token_id=tok.eos_id
        )
    want = tok.decode(out[0].tolist())
    argv = ["generate", str(folder), prompt, "--max-new-tokens", "8", "--engine", engine]
    assert main(argv) == 0
    assert capsys.readouterr().out == want + "\n"


def test_a_trained_glassformer_decoder_exports_to_gpt2(tmp_path):
    """A bias-free, exact-GELU char model (like models/char-lm) becomes a GPT-2 with zero biases:
    transformers computes the same logits as both engines."""
    from glassformer.config import preset
    from glassformer.tokenizer import CharTokenizer

    tok = CharTokenizer.train(["abcdefghijklmnop"])
    cfg = preset("char-lm").override(
        "d_model=32", "n_decoder_layers=2", f"vocab_size={tok.vocab_size}"
    )
    params = weights.init(cfg, seed=3, std=0.3)
    weights.save(tmp_path / "ck", cfg, params, tokenizer=tok, dtype="float32")
    assert main(["export-hf", str(tmp_path / "ck"), str(tmp_path / "hf")]) == 0
    model = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    ids = tok.encode("abcab")
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].double().numpy()
    _, p32, _ = weights.load(tmp_path / "ck")
    assert float(np.abs(reference.forward(p32, cfg, ids) - want).max()) < 1e-5
    saved = json.loads((tmp_path / "hf" / "glassformer-tokenizer.json").read_text())
    assert saved["kind"] == "char"


def test_bert_folder_in_and_out(bert_dir, tmp_path):
    folder, model = bert_dir
    imp = hf_dir.load(folder)
    assert set(imp.skipped) == {"pooler.dense.weight", "pooler.dense.bias"}
    cfg, params, tok = imp.cfg, imp.params, imp.tokenizer
    text = "The man eats bread"
    ids = tok.encode_for_model(text)[0]
    hf_tok = transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    assert ids == hf_tok(text)["input_ids"]
    with torch.no_grad():
        want = model(torch.tensor([ids])).last_hidden_state[0].double().numpy()
    ours = from_params(cfg, params, torch.float32).eval()
    with torch.no_grad():
        got = ours(torch.tensor([ids]))[0].double().numpy()
    assert float(np.abs(got - want).max()) < 1e-5
    assert float(np.abs(reference.encoder(params, cfg, ids) - want).max()) < 1e-5
    assert main(["export-hf", str(folder), str(tmp_path / "hf")]) == 0  # folder in, folder out
    back = transformers.BertModel.from_pretrained(tmp_path / "hf", add_pooling_layer=False)
    sd = back.state_dict()
    assert all(torch.equal(sd[k], v) for k, v in model.state_dict().items() if k in sd)


def test_marian_folder_in(tmp_path):
    config = transformers.MarianConfig(
        vocab_size=len(VOCAB),
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=24,
        decoder_ffn_dim=24,
        max_position_embeddings=20,
        activation_function="swish",
        scale_embedding=True,
        pad_token_id=0,
        decoder_start_token_id=0,
        eos_token_id=3,
    )
    model = transformers.MarianMTModel(config).eval()
    randomize(model, 2)
    model.save_pretrained(tmp_path)
    cfg, params, tok = loading.load(tmp_path)
    assert tok is None  # no tokenizer files: the weights alone
    assert (cfg.embed_scale, cfg.positions, cfg.activation) == (True, "sinusoidal_split", "silu")
    src, tgt = ids_tensor([5, 6, 7, 3]), ids_tensor([0, 8, 9])
    with torch.no_grad():
        want = model(input_ids=src, decoder_input_ids=tgt).logits[0].double().numpy()
    ref = reference.forward(params, cfg, tgt[0].tolist(), src_ids=src[0].tolist())
    assert float(np.abs(ref - want).max()) < 1e-5


def test_weights_only_bin_is_read_and_a_pickle_is_refused(bert_dir, tmp_path):
    folder, model = bert_dir
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    cfg, params, _ = loading.load(tmp_path)
    np.testing.assert_array_equal(
        params["encoder.type_embed.weight"],
        model.embeddings.token_type_embeddings.weight.detach().numpy(),
    )

    class Evil:  # unpickling this would run code
        def __reduce__(self):
            return (print, ("pwned",))

    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps({"x": Evil()}, protocol=2))
    with pytest.raises(CheckpointError, match="not a weights-only PyTorch file"):
        loading.load(tmp_path)


def test_bfloat16_and_prefixed_folders(bert_dir, tmp_path):
    """A bf16 safetensors file (NumPy has no bf16: read through torch) of a `bert.`-prefixed
    model with a masked-LM head: imported, the head and pooler reported as left out."""
    from safetensors.torch import save_file

    folder, model = bert_dir
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    state = {f"bert.{k}": v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    state["cls.predictions.bias"] = torch.zeros(len(VOCAB), dtype=torch.bfloat16)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    imp = hf_dir.load(tmp_path)
    assert set(imp.skipped) == {"pooler.dense.weight", "pooler.dense.bias", "cls.predictions.bias"}
    want = model.embeddings.word_embeddings.weight.detach().to(torch.bfloat16).double().numpy()
    np.testing.assert_array_equal(imp.params["encoder.tok_embed.weight"], want)


def test_refusals_name_the_problem(bert_dir, tmp_path, capsys):
    folder, model = bert_dir
    bad = tmp_path / "t5"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "t5"}))
    assert main(["embed", str(bad), "hello"]) == 2
    assert "model_type 't5' is not supported" in capsys.readouterr().err
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    drop = "encoder.layer.1.output.dense.bias"
    cases = {
        "missing": (
            {k: v for k, v in state.items() if k != drop},
            r"no tensor 'encoder\.layer\.1\.output\.dense\.bias'",
        ),
        "unexpected": (
            state | {"encoder.layer.5.output.dense.bias": torch.zeros(24)},
            r"unexpected tensor 'encoder\.layer\.5",
        ),
        "shape": (
            state | {"embeddings.word_embeddings.weight": torch.zeros(7, 24)},
            r"embeddings\.word_embeddings\.weight.*shape \(7, 24\)",
        ),
    }
    for name, (tensors, message) in cases.items():
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text((folder / "config.json").read_text())
        save_file(tensors, str(d / "model.safetensors"))
        with pytest.raises(CheckpointError, match=message):
            hf_dir.load(d)
        assert main(["import-hf", str(d), str(tmp_path / f"{name}-out")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("glassformer: error:") and err.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        hf_dir.load(empty)
    assert main(["import-hf", str(tmp_path / "nowhere"), str(tmp_path / "x")]) == 2
    assert "not a Hugging Face model folder" in capsys.readouterr().err


def test_vocab_txt_gives_the_libraries_ids(bert_dir):
    folder, _ = bert_dir
    tok = HFTokenizer.from_files(folder)
    hf_tok = transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    for text in ["Hello World", "la mujer come pan", "zzz ☃ qq"]:
        ids, unknown = tok.encode_for_model(text)
        assert ids == hf_tok(text)["input_ids"]
    assert tok.encode_for_model("hello ☃")[1] == ["☃"]
    assert tok.specials == {"pad": "[PAD]", "unk": "[UNK]", "bos": "[CLS]", "eos": "[SEP]"}


def test_train_classify_fine_tunes_an_imported_encoder(bert_dir, tmp_path):
    folder, model = bert_dir
    out = tmp_path / "langid"
    rc = main(
        ["train", "classify", "--init", str(folder), "--out", str(out), "--quiet"]
        + ["--set", "max_steps=3", "--set", "eval_interval=3", "--set", "eval_iters=1"]
        + ["--set", "batch_size=4", "--set", "threads=1"]
    )
    assert rc == 0
    cfg, params, tok = weights.load(out)
    assert cfg.n_classes == 2 and cfg.type_vocab_size == 2 and cfg.embed_norm
    assert tok.kind == "hf" and tok.vocab_size == len(VOCAB)
    moved = (
        params["encoder.layers.0.ffn.w1.weight"]
        - model.encoder.layer[0].intermediate.dense.weight.detach().double().numpy()
    )
    assert 0 < float(np.abs(moved).max()) < 0.1  # started from the imported weights, then trained


def test_export_hf_refuses_what_it_cannot_write(tmp_path, capsys):
    """A classifier has no Hugging Face form here (encoder-decoders: tests/test_hf_pegasus.py)."""
    from glassformer.config import preset

    cfg = preset("encoder-classifier").override("n_classes=2")
    weights.save(tmp_path / "classifier", cfg, weights.init(cfg))
    assert main(["export-hf", str(tmp_path / "classifier"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert "export-hf writes decoder-only models" in err and "n_classes=2" in err
    assert err.count("\n") == 1 and not (tmp_path / "hf").exists()
