"""nanoGPT checkpoints in glassformer, against nanoGPT itself: tests/peers/nanogpt_model.py is its
model.py byte for byte. Each model is nanoGPT's GPT built from its GPTConfig with random weights
(LayerNorms and biases included, so a misplaced tensor shows), one AdamW step taken as train.py
takes it, and saved as train.py saves ckpt.pt (the same keys; `_orig_mod.` names when compiled),
with the meta.pkl that data/shakespeare_char/prepare.py writes. Oracles: nanoGPT's logits at
every position (float64, both engines, 1e-10; float32 1e-5), its greedy generation (top_k=1),
past block_size included (its context crop is our sliding window). Bad files, each refused in
one line with exit 2 and nothing written: a planted `os.system` in meta.pkl or ckpt.pt must not
run (the file its command would create stays absent; a control shows the payload is live).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import os
import pickle
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import reference, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.errors import CheckpointError  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402

PEERS = Path(__file__).parent / "peers"
TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n"
)
CHARS = sorted(set(TEXT))


def _peer():
    spec = importlib.util.spec_from_file_location("nanogpt_model", PEERS / "nanogpt_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NG = _peer()

# model_args as train.py makes them (dict(n_layer=..., ..., dropout=...)), and how each is saved.
MODELS = {
    "char": (dict(n_layer=2, n_head=2, n_embd=16, block_size=16, bias=True), {}),
    "char-nobias-compiled": (
        dict(n_layer=3, n_head=4, n_embd=32, block_size=24, bias=False, dropout=0.2),
        {"compiled": True},
    ),
    "char-one-layer": (dict(n_layer=1, n_head=1, n_embd=8, block_size=8, bias=True), {}),
    "gpt2-vocab": (
        dict(n_layer=1, n_head=2, n_embd=16, block_size=16, bias=False, vocab_size=50304),
        {"meta": False},
    ),
    "untied": (dict(n_layer=2, n_head=2, n_embd=16, block_size=16, bias=True), {"untie": True}),
    # model_args of a nanoGPT from before GPTConfig had `bias`: its default, biases everywhere
    "char-no-bias-key": (dict(n_layer=2, n_head=2, n_embd=16, block_size=16), {}),
}


def prepare(data_dir: Path, text: str = TEXT) -> Path:
    """nanoGPT's data/shakespeare_char/prepare.py, its vocabulary and meta.pkl exactly."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "input.txt").write_text(text)
    with open(data_dir / "input.txt") as f:
        data = f.read()
    chars = sorted(list(set(data)))
    vocab_size = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    meta = {"vocab_size": vocab_size, "itos": itos, "stoi": stoi}
    with open(os.path.join(data_dir, "meta.pkl"), "wb") as f:
        pickle.dump(meta, f)
    return data_dir / "meta.pkl"


def randomize(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():  # the tied wte / lm_head once
            noise = torch.randn(p.shape, generator=g) * 0.3
            p.copy_(1.0 + noise / 3 if p.ndim == 1 and p.shape[0] == model.config.n_embd else noise)


def train_and_save(out_dir: Path, model_args: dict, seed: int, compiled=False, untie=False):
    """nanoGPT's GPT with random weights after one AdamW step, saved as train.py saves it."""
    out_dir.mkdir(parents=True)
    torch.manual_seed(seed)
    with contextlib.redirect_stdout(io.StringIO()):  # GPT and its optimizer print
        model = NG.GPT(NG.GPTConfig(**model_args))
        randomize(model, seed)
        if untie:  # a modified nanoGPT whose head is its own matrix
            head = model.transformer.wte.weight.detach().clone() + 0.1
            model.lm_head.weight = torch.nn.Parameter(head)
        optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    block, V = model_args["block_size"], model_args["vocab_size"]
    X = torch.randint(V, (2, block))
    _, loss = model(X, torch.roll(X, -1, 1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    raw_model = torch.compile(model) if compiled else model
    config = {"out_dir": str(out_dir), "eval_interval": 250, "dataset": "shakespeare_char",
              "batch_size": 2, "block_size": block, "compile": compiled}  # fmt: skip
    checkpoint = {
        "model": raw_model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "model_args": model_args,
        "iter_num": 1,
        "best_val_loss": torch.zeros(2).mean() + loss.detach(),
        "config": config,
    }
    torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    return model.eval()


@pytest.fixture(scope="module")
def nano(tmp_path_factory):
    """name -> (out_dir, nanoGPT's model in eval mode, data folder or None), built once each."""
    root = tmp_path_factory.mktemp("nanogpt")
    built = {}
    meta = prepare(root / "data" / "shakespeare_char")

    def get(name: str):
        if name not in built:
            model_args, how = MODELS[name]
            model_args = {"dropout": 0.0, "vocab_size": len(CHARS)} | model_args
            out = root / f"out-{name}"
            seed = list(MODELS).index(name)
            model = train_and_save(out, model_args, seed, how.get("compiled", False),
                                   how.get("untie", False))  # fmt: skip
            if how.get("meta", True):
                shutil.copy(meta, out / "meta.pkl")
            built[name] = out, model, meta.parent
        return built[name]

    return get


def ids_of(V: int, T: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(V, (1, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(MODELS))
def test_logits_are_nanogpts_at_every_position_in_both_engines(nano, name):
    out, model, _ = nano(name)
    cfg, params, tok = loading.load(out)
    ids = ids_of(cfg.vocab_size, cfg.max_len)
    with torch.no_grad():
        want64 = copy.deepcopy(model).double()(ids, ids)[0][0].numpy()  # targets: every position
        want32 = model(ids, ids)[0]
        last = model(ids)[0]  # nanoGPT's inference path: the last position only
        got64 = from_params(cfg, params, torch.float64).eval()(ids)[0].numpy()
        got32 = from_params(cfg, params, torch.float32).eval()(ids)
    ref = reference.forward(params, cfg, ids[0].tolist())
    assert np.abs(ref - want64).max() < 1e-10
    assert np.abs(got64 - want64).max() < 1e-10
    assert float((got32 - want32).abs().max()) < 1e-5
    assert float((got32[:, -1:] - last).abs().max()) < 1e-5


@pytest.mark.parametrize("name", list(MODELS))
def test_the_config_is_nanogpts(nano, name):
    out, model, _ = nano(name)
    cfg, params, tok = loading.load(out)
    c = model.config
    assert (cfg.arch, cfg.norm, cfg.positions, cfg.activation) == (
        "decoder",
        "pre",
        "learned",
        "gelu",
    )
    sizes = (cfg.n_decoder_layers, cfg.n_heads, cfg.d_model, cfg.d_ff, cfg.max_len, cfg.vocab_size)
    assert sizes == (c.n_layer, c.n_head, c.n_embd, 4 * c.n_embd, c.block_size, c.vocab_size)
    assert cfg.bias == c.bias and cfg.ln_eps == 1e-5
    assert cfg.tie_embeddings == (name != "untied")
    assert ("lm_head.weight" in params) == (name == "untied")
    wte = model.transformer.wte.weight.detach().double().numpy()
    assert np.array_equal(params["decoder.tok_embed.weight"], wte)
    if not c.bias:  # nanoGPT's LayerNorm(bias=False): our beta is zero
        assert not np.any(params["decoder.layers.0.norm1.bias"])
    if name != "gpt2-vocab":
        assert tok.vocab == CHARS and tok.specials == {}
    else:
        assert tok is None


@pytest.mark.parametrize("engine", ["torch", "reference"])
def test_greedy_generation_is_nanogpts_past_block_size(nano, tmp_path, capsys, engine):
    out, model, _ = nano("char")
    prompt, n = "First Cit", 20  # 29 characters: past block_size 16, nanoGPT crops its context
    stoi = {c: i for i, c in enumerate(CHARS)}
    torch.manual_seed(0)
    with torch.no_grad():
        idx = torch.tensor([[stoi[c] for c in prompt]])
        ids = copy.deepcopy(model).double().generate(idx, n, temperature=1.0, top_k=1)
    want = "".join(CHARS[i] for i in ids[0].tolist())
    assert main(["import-nanogpt", str(out), str(tmp_path / "ck")]) == 0
    capsys.readouterr()
    argv = [str(tmp_path / "ck"), prompt, "--max-new-tokens", str(n), "--engine", engine]
    assert main(["generate", *argv]) == 0
    assert capsys.readouterr().out == want + "\n"


def test_generate_reads_a_nanogpt_out_dir_directly(nano, capsys):
    out, model, _ = nano("char-nobias-compiled")
    prompt, n = "Speak", 12
    stoi = {c: i for i, c in enumerate(CHARS)}
    with torch.no_grad():
        idx = torch.tensor([[stoi[c] for c in prompt]])
        ids = copy.deepcopy(model).double().generate(idx, n, top_k=1)
    want = "".join(CHARS[i] for i in ids[0].tolist())
    assert main(["generate", str(out), prompt, "--max-new-tokens", str(n)]) == 0
    assert capsys.readouterr().out == want + "\n"


def test_import_nanogpt_writes_the_same_model_and_says_what_it_did(nano, tmp_path, capsys):
    out, _, _ = nano("char-nobias-compiled")
    assert main(["import-nanogpt", str(out), str(tmp_path / "ck")]) == 0
    printed = capsys.readouterr().out.splitlines()
    cfg, params, tok = weights.load(tmp_path / "ck")
    assert printed[0] == (
        f"imported nanoGPT from {out / 'ckpt.pt'}: decoder, {weights.n_params(cfg):,} "
        f"parameters -> {tmp_path / 'ck'}"
    )
    assert [line.split(":")[0] for line in printed[1:]] == [
        f"  left out {k}" for k in ("optimizer", "iter_num", "best_val_loss", "config")
    ]
    direct = loading.load(out)
    assert direct[0] == cfg and tok.vocab == direct[2].vocab == CHARS
    assert all(np.array_equal(direct[1][n], params[n]) for n in params)  # float32 both ways
    # the ckpt.pt itself names the same checkpoint
    assert main(["import-nanogpt", str(out / "ckpt.pt"), str(tmp_path / "ck2")]) == 0
    again = weights.load(tmp_path / "ck2")[1]
    assert all(np.array_equal(again[n], params[n]) for n in params)


def test_the_vocabulary_from_meta_or_the_training_text(nano, tmp_path, capsys):
    """nanoGPT keeps meta.pkl in data/<dataset>/, not in out_dir: --meta names it, --vocab-from
    rebuilds it from the text as prepare.py does; without either an out_dir has no tokenizer."""
    out, _, data = nano("char")
    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    (bare / "meta.pkl").unlink()
    assert loading.load(bare)[2] is None
    assert main(["import-nanogpt", str(bare), str(tmp_path / "none")]) == 0
    assert "no meta.pkl beside ckpt.pt; nanoGPT keeps it in data/shakespeare_char/meta.pkl" in (
        capsys.readouterr().out
    )
    for option, value in (("--meta", data / "meta.pkl"), ("--vocab-from", data / "input.txt")):
        ck = tmp_path / option.strip("-")
        assert main(["import-nanogpt", str(bare), str(ck), option, str(value)]) == 0
        tok = weights.load(ck)[2]
        assert tok.vocab == CHARS and tok.encode("Speak") == [CHARS.index(c) for c in "Speak"]


def test_a_gpt2_bpe_model_takes_a_tokenizer_json(nano, tmp_path, capsys):
    from glassformer.tokenizer import BPETokenizer

    out, _, _ = nano("gpt2-vocab")
    assert main(["import-nanogpt", str(out), str(tmp_path / "weights-only")]) == 0
    said = capsys.readouterr().out
    assert "vocab_size 50304: GPT-2's 50257 tokens padded" in said
    assert "no tokenizer: a vocabulary of 50304 is GPT-2's BPE" in said
    assert weights.load(tmp_path / "weights-only")[2] is None
    bpe = BPETokenizer.train([TEXT * 3], vocab_size=300, specials={"eos": "<|endoftext|>"})
    (tmp_path / "tokenizer.json").write_text(bpe.hf_json)
    argv = ["import-nanogpt", str(out), str(tmp_path / "ck"), "--tokenizer"]
    assert main([*argv, str(tmp_path / "tokenizer.json")]) == 0
    tok = weights.load(tmp_path / "ck")[2]
    assert tok.encode("Speak, speak.") == bpe.encode("Speak, speak.")
    assert tok.eos_id == tok.bos_id == bpe.eos_id


# -- bad inputs: one line, exit 2, nothing written, no pickled code run ------------------------


class Payload:
    """Unpickled by an ordinary unpickler, this runs a shell command: the file it makes says so."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


def refused(argv: list[str], capsys, *expected: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("glassformer: error: "), err
    for e in expected:
        assert e in err[0], err[0]
    return err[0]


def edited(nano, tmp_path, edit, name="char") -> Path:
    """A copy of a saved out_dir with its checkpoint dict changed by `edit(ckpt, folder)`."""
    src, _, _ = nano(name)
    folder = tmp_path / "bad"
    shutil.copytree(src, folder)
    ckpt = torch.load(folder / "ckpt.pt", weights_only=True)
    if (changed := edit(ckpt, folder)) is not None:  # a new checkpoint object to save
        torch.save(changed, folder / "ckpt.pt")
    return folder


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def test_the_payloads_are_live(tmp_path):
    """The control: an ordinary unpickler runs them (so the refusals below are real)."""
    pickle.loads(pickle.dumps({"vocab_size": Payload(tmp_path / "ran")}))
    assert (tmp_path / "ran").exists()
    torch.save({"config": Payload(tmp_path / "ran2")}, tmp_path / "x.pt")
    torch.load(tmp_path / "x.pt", weights_only=False)
    assert (tmp_path / "ran2").exists()


def _put(ckpt, **changes):
    return {**ckpt, **changes}


def _without(ckpt, key):
    return {k: v for k, v in ckpt.items() if k != key}


def _meta(folder: Path, data) -> None:
    (folder / "meta.pkl").write_bytes(pickle.dumps(data))


META = {"vocab_size": len(CHARS), "itos": dict(enumerate(CHARS)),
        "stoi": {c: i for i, c in enumerate(CHARS)}}  # fmt: skip
BAD = {
    "a-plain-state-dict": (lambda c, f: c["model"], "is not a nanoGPT checkpoint: it holds a dict"),
    "a-list": (lambda c, f: [1, 2], "is not a nanoGPT checkpoint: it holds a list"),
    "no-model-args": (lambda c, f: _without(c, "model_args"), "has no model_args"),
    "a-foreign-model-arg": (
        lambda c, f: _put(c, model_args=c["model_args"] | {"n_kv_head": 1}),
        "model_args has 'n_kv_head', which nanoGPT's GPTConfig has not",
    ),
    "more-layers-than-tensors": (
        lambda c, f: _put(c, model_args=c["model_args"] | {"n_layer": 3}),
        "nanoGPT checkpoint has no tensor 'transformer.h.2.ln_1.weight'",
    ),
    "fewer-layers-than-tensors": (
        lambda c, f: _put(c, model_args=c["model_args"] | {"n_layer": 1}),
        "unexpected tensor 'transformer.h.1.ln_1.weight'",
    ),
    "a-bias-free-model-with-biases": (
        lambda c, f: _put(c, model_args=c["model_args"] | {"bias": False}),
        "unexpected tensor 'transformer.h.0.ln_1.bias'",
    ),
    "a-wider-model": (
        lambda c, f: _put(c, model_args=c["model_args"] | {"n_embd": 32}),
        "'transformer.wte.weight' has shape",
    ),
    "a-bool-size": (
        lambda c, f: _put(c, model_args=c["model_args"] | {"n_head": True}),
        "model_args['n_head'] must be a positive integer",
    ),
    "truncated": (
        lambda c, f: _write(f / "ckpt.pt", (f / "ckpt.pt").read_bytes()[:5000]),
        "is truncated or not a PyTorch file",
    ),
    "not-a-pytorch-file": (
        lambda c, f: _write(f / "ckpt.pt", b"hello"),
        "is truncated or not a PyTorch file",
    ),
    "meta-of-other-data": (
        lambda c, f: _meta(
            f,
            {
                "vocab_size": 3,
                "itos": dict(enumerate("abc")),
                "stoi": {c: i for i, c in enumerate("abc")},
            },
        ),  # fmt: skip
        f"meta.pkl has 3 characters but the model {len(CHARS)} embeddings",
    ),
    "meta-stoi-not-the-inverse": (
        lambda c, f: _meta(f, META | {"stoi": META["stoi"] | {"a": 0}}),
        "itos and stoi are not one character for each id",
    ),
    "meta-with-a-long-token": (
        lambda c, f: _meta(f, META | {"itos": META["itos"] | {0: "ab"}}),
        "itos and stoi are not one character",
    ),
    "meta-with-a-huge-vocab-size": (
        lambda c, f: _meta(f, META | {"vocab_size": 10**12}),
        "itos and stoi are not one character for each id",
    ),
    "meta-not-a-dict": (lambda c, f: _meta(f, [1, 2]), "is not a nanoGPT meta.pkl"),
    "meta-with-more-keys": (lambda c, f: _meta(f, META | {"x": 1}), "is not a nanoGPT meta.pkl"),
    "meta-truncated": (
        lambda c, f: _write(f / "meta.pkl", pickle.dumps(META)[:40]),
        "is truncated or not a pickle",
    ),
    "meta-with-an-ordered-dict": (
        lambda c, f: _meta(f, META | {"itos": __import__("collections").OrderedDict(META["itos"])}),
        "the global collections.OrderedDict",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_checkpoint_is_one_line_and_writes_nothing(nano, tmp_path, capsys, case):
    edit, message = BAD[case]
    folder = edited(nano, tmp_path, edit)
    refused(["import-nanogpt", str(folder), str(tmp_path / "ck")], capsys, message)
    assert not (tmp_path / "ck").exists()
    with pytest.raises(CheckpointError, match="nanoGPT|meta|ckpt"):
        loading.load(folder)  # every command reads the folder through here


@pytest.mark.parametrize("where", ["beside", "--meta"])
def test_a_meta_pkl_with_a_planted_global_never_runs_it(nano, tmp_path, capsys, where):
    marker = tmp_path / "pwned"
    folder = edited(nano, tmp_path, lambda c, f: None)
    _meta(folder if where == "beside" else tmp_path, META | {"vocab_size": Payload(marker)})
    extra = [] if where == "beside" else ["--meta", str(tmp_path / "meta.pkl")]
    argv = ["import-nanogpt", str(folder), str(tmp_path / "ck"), *extra]
    refused(argv, capsys, "(the global posix.system)", "never runs its code")
    assert not marker.exists() and not (tmp_path / "ck").exists()


def test_a_ckpt_pt_with_a_planted_global_never_runs_it(nano, tmp_path, capsys):
    marker = tmp_path / "pwned"
    folder = edited(nano, tmp_path, lambda c, f: _put(c, config=Payload(marker)))
    refused(["import-nanogpt", str(folder), str(tmp_path / "ck")], capsys,
            "holds the global posix.system, which the safe loader", "never runs")  # fmt: skip
    assert not marker.exists() and not (tmp_path / "ck").exists()
    with pytest.raises(CheckpointError, match="safe loader"):
        loading.load(folder)
    assert not marker.exists()


def test_a_legacy_pickle_with_a_planted_global_never_runs_it(nano, tmp_path, capsys):
    """A plain pickle (torch.save's pre-1.6 form): torch.load's weights-only unpickler too."""
    marker = tmp_path / "pwned"
    folder = edited(nano, tmp_path, lambda c, f: None)
    (folder / "ckpt.pt").write_bytes(pickle.dumps({"model": Payload(marker)}))
    refused(["import-nanogpt", str(folder), str(tmp_path / "ck")], capsys, "safe loader")
    assert not marker.exists()


@pytest.mark.parametrize("name", ["ckpt.pt", "meta.pkl"])
def test_a_file_linked_out_of_the_folder_is_refused(nano, tmp_path, capsys, name):
    folder = edited(nano, tmp_path, lambda c, f: None)
    (tmp_path / "elsewhere").mkdir()
    shutil.move(folder / name, tmp_path / "elsewhere" / name)
    (folder / name).symlink_to(tmp_path / "elsewhere" / name)
    refused(["import-nanogpt", str(folder), str(tmp_path / "ck")], capsys, "points outside")
    with pytest.raises(CheckpointError, match="points outside"):
        loading.load(folder)


def test_the_other_refusals(nano, tmp_path, capsys):
    out, _, data = nano("char")
    ck = str(tmp_path / "ck")
    refused(["import-nanogpt", str(tmp_path / "nowhere"), ck], capsys, "not found")
    (tmp_path / "empty").mkdir()
    refused(["import-nanogpt", str(tmp_path / "empty"), ck], capsys, "has no ckpt.pt")
    (tmp_path / "other.txt").write_text("Zebra quartz!")
    refused(["import-nanogpt", str(out), ck, "--vocab-from", str(tmp_path / "other.txt")],
            capsys, f"has 11 distinct characters but the model {len(CHARS)}")  # fmt: skip
    refused(["import-nanogpt", str(out), ck, "--meta", "m", "--vocab-from", "t"], capsys,
            "not allowed with argument")  # fmt: skip
    refused(["import-nanogpt", str(out), str(out)], capsys, "itself")
    assert main(["import-nanogpt", str(out), ck]) == 0
    refused(["import-nanogpt", str(out), ck], capsys, "already holds", "--overwrite")
    assert main(["import-nanogpt", str(out), ck, "--overwrite"]) == 0
    assert weights.load(ck)[2].vocab == CHARS


def test_an_out_dir_without_its_tokenizer_names_meta_pkl_and_the_import(nano, tmp_path, capsys):
    """An out_dir read directly without meta.pkl beside ckpt.pt cannot encode text: the refusal
    names meta.pkl and the import that takes it (a GPT-2 BPE model: a tokenizer.json), in Python
    and on the command line (one line, exit 2), not a missing tokenizer.json."""
    import glassformer
    from glassformer.errors import GlassformerError

    out, _, _ = nano("char")
    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    (bare / "meta.pkl").unlink()
    fix = f"glassformer import-nanogpt {bare} OUT --meta meta.pkl"
    with pytest.raises(GlassformerError) as e:
        glassformer.load(bare).generate("Speak")
    assert "needs its meta.pkl" in str(e.value) and fix in str(e.value)
    assert "tokenizer.json" not in str(e.value)
    assert main(["generate", str(bare), "Speak"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs its meta.pkl" in err[0] and fix in err[0], err
    gpt2, _, _ = nano("gpt2-vocab")
    assert main(["generate", str(gpt2), "Speak"]) == 2
    err = capsys.readouterr().err
    assert f"glassformer import-nanogpt {gpt2} OUT --tokenizer tokenizer.json" in err, err
