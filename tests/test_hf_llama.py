"""Llama and Qwen2 folders in and out, against `transformers` itself: LlamaForCausalLM and
Qwen2ForCausalLM built from configs with random weights (grouped-query ratios 1, 2 and 4, tied and
untied heads, rope_theta 10,000 and 1,000,000, a head_dim apart from hidden_size / heads, Qwen2's
Q/K/V biases, Llama's attention and MLP biases, a sharded save) are saved with save_pretrained,
with a tokenizer.json that `tokenizers` builds (SentencePiece-style for Llama, byte-level for
Qwen2), and read by glassformer. Oracles: logits and greedy ids of transformers, its tokenizer's
ids, the folder back from export-hf bit for bit (tensors, config.json, tokenizer.json) and loaded
by transformers. config.json in each form its writers produce (rope_theta nested or at the top,
rope_scaling standing for rope_parameters, optional keys left out or null) reads as transformers
reads it (AutoConfig of the same file: its attributes and its logits). Bad folders and configs no
Hugging Face form holds: one line, exit 2. Nothing is downloaded."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file  # noqa: E402

from glassformer import decoding, reference, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import CheckpointError, ConfigError  # noqa: E402
from glassformer.formats import hf, hf_dir, hf_llama, hf_pegasus  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.torch_steps import step_fn  # noqa: E402

TEXTS = [
    "the cat sat on the mat",
    "a man eats bread and the woman eats food",
    "hello world, the world is round",
    "hola mundo, el gato come pan",
] * 4
PROMPT = "the cat eats bread"
BASE = dict(hidden_size=32, intermediate_size=40, num_hidden_layers=2, max_position_embeddings=48)
CASES = {  # name: (model_type, config fields, sharded)
    "llama-gqa2": ("llama", dict(num_attention_heads=4, num_key_value_heads=2), False),
    "llama-mha-tied-1e6": (
        "llama",
        dict(num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True, theta=1e6),
        False,
    ),
    "llama-mqa-head6": (
        "llama",
        dict(num_attention_heads=4, num_key_value_heads=1, head_dim=6),
        False,
    ),
    "llama-biases": (
        "llama",
        dict(num_attention_heads=4, num_key_value_heads=2, attention_bias=True, mlp_bias=True),
        False,
    ),
    "qwen2-gqa4-1e6": (
        "qwen2",
        dict(num_attention_heads=8, num_key_value_heads=2, theta=1e6),
        False,
    ),
    "qwen2-tied-sharded": (
        "qwen2",
        dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
        True,
    ),
}
# config.json fields that say the architecture: export-hf must write them as transformers did.
ARCH_KEYS = (
    "model_type architectures vocab_size hidden_size intermediate_size num_hidden_layers "
    "num_attention_heads num_key_value_heads head_dim hidden_act max_position_embeddings "
    "rms_norm_eps rope_parameters tie_word_embeddings attention_bias mlp_bias use_sliding_window "
    "bos_token_id eos_token_id"
).split()


def llama_tokenizer() -> str:
    """Llama 2's tokenizer.json form: SentencePiece BPE with byte fallback over "▁"-joined text,
    <unk> <s> </s> as ids 0, 1, 2, and a template that puts <s> first."""
    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers

    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tk.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    specials = ["<unk>", "<s>", "</s>"]
    tk.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=64, special_tokens=specials))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tk.to_str()


def qwen2_tokenizer() -> str:
    """Qwen2's form: byte-level BPE, no BOS in the template, <|endoftext|> <|im_start|> <|im_end|>
    as ids 0, 1, 2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=290, special_tokens=specials, initial_alphabet=alphabet
    )
    tk.train_from_iterator(TEXTS, trainer)
    return tk.to_str()


def hf_config(family: str, fields: dict):
    fields = dict(fields)
    theta = fields.pop("theta", 10000.0)
    rope = dict(rope_theta=theta, rope_parameters=dict(rope_type="default", rope_theta=theta))
    if family == "llama":
        return transformers.LlamaConfig(**BASE, **rope, **fields, vocab_size=64, rms_norm_eps=1e-5)
    # Qwen2: a vocabulary past the tokenizer's (as Qwen2's own), no BOS, EOS <|im_end|>
    ids = dict(bos_token_id=0, eos_token_id=2)
    return transformers.Qwen2Config(**BASE, **rope, **fields, **ids, vocab_size=300)


def randomize(model, seed: int) -> None:
    """Every parameter redrawn: norm gains about 1, the rest (biases too) N(0, 0.3²)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1.0 + noise / 4 if "norm" in name else noise * 0.3)


def build(name: str, out):
    """The folder of case `name` written to `out`: (name, folder, the float32 model)."""
    family, fields, sharded = CASES[name]
    config = hf_config(family, fields)
    cls = transformers.LlamaForCausalLM if family == "llama" else transformers.Qwen2ForCausalLM
    model = cls(config).eval()
    randomize(model, seed=len(name))
    model.save_pretrained(out, max_shard_size="20KB" if sharded else "5GB")
    tok = llama_tokenizer() if family == "llama" else qwen2_tokenizer()
    (out / "tokenizer.json").write_text(tok, encoding="utf-8")
    return name, out, model


@pytest.fixture(scope="module", params=list(CASES))
def folder(request, tmp_path_factory):
    return build(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    return build("llama-gqa2", tmp_path_factory.mktemp("cli"))


def folder_tensors(path) -> dict[str, np.ndarray]:
    return hf_dir.read_state(path)


def test_logits_equal_transformers_in_both_engines(folder):
    """The tokenizer gives transformers' ids; the torch engine in float32 and the reference engine
    in float64 give transformers' logits in float32 and float64, to 1e-5 (its rotary angles are
    float32 in both)."""
    name, path, model = folder
    imp = hf_dir.load(path)
    cfg, params, tok = imp.cfg, imp.params, imp.tokenizer
    family, fields, sharded = CASES[name]
    assert imp.family == family and (cfg.positions, cfg.norm_kind) == ("rotary", "rmsnorm")
    assert cfg.kv_heads == fields["num_key_value_heads"] and cfg.rope_theta == fields.get(
        "theta", 10000.0
    )
    assert cfg.tie_embeddings == fields.get("tie_word_embeddings", False)
    assert (path / "model.safetensors.index.json").is_file() == sharded
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"))
    ids = tok.encode_for_model(PROMPT)[0]
    assert ids == fast(PROMPT)["input_ids"] and len(ids) > 3
    assert (ids[0] == 1) == (family == "llama")  # Llama's template puts <s> first, Qwen2's none
    with torch.no_grad():
        want32 = model(torch.tensor([ids])).logits[0]
        want64 = copy.deepcopy(model).double()(torch.tensor([ids])).logits[0].numpy()
        got32 = from_params(cfg, params, torch.float32).eval()(torch.tensor([ids]))[0]
    assert np.abs(want64).max() > 1.0
    assert float((got32 - want32).abs().max()) < 1e-5
    assert float(np.abs(reference.forward(params, cfg, ids) - want64).max()) < 1e-5


def test_greedy_ids_equal_transformers_generate(folder):
    """20 greedy tokens from transformers' generate(do_sample=False), float64, are the reference
    engine's and the cached torch engine's."""
    name, path, model = folder
    imp = hf_dir.load(path)
    cfg, params, tok = imp.cfg, imp.params, imp.tokenizer
    assert tok.eos_id == 2  # config.json's eos_token_id (Qwen2's tokenizer alone: <|endoftext|>)
    ids = tok.encode_for_model(PROMPT)[0]
    m64 = copy.deepcopy(model).double()
    with torch.no_grad():
        out = m64.generate(
            torch.tensor([ids]), max_new_tokens=20, do_sample=False, eos_token_id=tok.eos_id,
            pad_token_id=tok.eos_id, attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        )[0].tolist()  # fmt: skip
    assert len(out) > len(ids) + 3
    ref = decoding.greedy(reference.next_token_logits(params, cfg), ids, 20, tok.eos_id)
    cached = decoding.greedy(step_fn(from_params(cfg, params).eval()), ids, 20, tok.eos_id)
    assert ref.ids == out and cached.ids == out


def test_import_then_export_is_the_same_folder_bit_for_bit(folder, tmp_path, capsys):
    """import-hf then export-hf: the same tensors (float32, bitwise; a tied head not written), the
    same architecture fields of config.json and the same tokenizer.json; transformers loads the
    folder as the same class with equal logits, and import-hf of it gives the same model."""
    name, path, model = folder
    assert main(["import-hf", str(path), str(tmp_path / "ck")]) == 0
    assert f"imported {CASES[name][0]} from" in capsys.readouterr().out
    assert main(["export-hf", str(tmp_path / "ck"), str(tmp_path / "hf")]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'hf'}: Hugging Face")
    want, got = folder_tensors(path), load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert sorted(got) == sorted(want)
    for n, x in want.items():
        assert got[n].dtype == np.float32 and np.array_equal(got[n], x), n
    theirs = json.loads((path / "config.json").read_text())
    ours = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert {k: ours.get(k) for k in ARCH_KEYS if k in theirs} == {
        k: theirs[k] for k in ARCH_KEYS if k in theirs
    }
    same = (path / "tokenizer.json").read_text() == (tmp_path / "hf" / "tokenizer.json").read_text()
    assert same
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(back) is type(model)
    ids = torch.tensor([[1, 5, 9, 2, 7, 3, 11, 4]])
    with torch.no_grad():
        assert torch.equal(back(ids).logits, model(ids).logits)
    cfg, params, _ = weights.load(tmp_path / "ck")
    again = hf_dir.load(tmp_path / "hf")
    assert again.cfg == cfg and all(np.array_equal(again.params[n], params[n]) for n in params)


@pytest.mark.parametrize("engine", ["torch", "reference"])
def test_generate_and_explain_read_the_folder(llama_folder, engine, capsys):
    """`generate` prints transformers' greedy text; `explain` runs on the folder itself."""
    _, path, model = llama_folder
    imp = hf_dir.load(path)
    ids = imp.tokenizer.encode_for_model(PROMPT)[0]
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=12, do_sample=False, eos_token_id=2,
            pad_token_id=2, attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        )[0].tolist()  # fmt: skip
    argv = ["generate", str(path), PROMPT, "--max-new-tokens", "12", "--engine", engine]
    assert main(argv) == 0
    assert capsys.readouterr().out == imp.tokenizer.decode(out) + "\n"
    assert main(["explain", str(path), PROMPT]) == 0
    assert "self_attn" in capsys.readouterr().out


# -- a glassformer model out, and what no folder holds ---------------------------------------------

SMALL = dict(vocab_size=40, d_model=16, d_ff=24, max_len=24, arch="decoder", n_decoder_layers=2)
MODERN = dict(positions="rotary", norm="pre", norm_kind="rmsnorm", ffn_kind="gated")
LLAMA_CFG = Config(**SMALL, **MODERN, n_heads=4, n_kv_heads=2, activation="silu", bias=False)
QWEN2_CFG = Config(
    **(LLAMA_CFG.to_dict() | dict(qkv_bias=True, rope_theta=1e6, tie_embeddings=True))
)


@pytest.mark.parametrize("cfg", [LLAMA_CFG, QWEN2_CFG], ids=["llama", "qwen2"])
def test_a_glassformer_model_exports_as_llama_or_qwen2(cfg, tmp_path):
    params = {
        n: x.astype(np.float32).astype(np.float64)
        for n, x in weights.init(cfg, seed=4, std=0.3).items()
    }
    weights.save(tmp_path / "ck", cfg, params, dtype="float32")
    assert main(["export-hf", str(tmp_path / "ck"), str(tmp_path / "hf")]) == 0
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(model).__name__ == ("Qwen2ForCausalLM" if cfg.qkv_bias else "LlamaForCausalLM")
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    with torch.no_grad():
        want = model.double()(torch.tensor([ids])).logits[0].numpy()
    assert float(np.abs(reference.forward(params, cfg, ids) - want).max()) < 1e-5
    back = hf_dir.load(tmp_path / "hf")
    assert back.cfg == cfg and all(np.array_equal(back.params[n], params[n]) for n in params)


def _gpt2_like(**more) -> Config:
    return Config(
        **SMALL, n_heads=4, positions="learned", norm="pre", activation="gelu_tanh",
        tie_embeddings=True, **more,
    )  # fmt: skip


def test_every_classic_exporter_refuses_the_modern_options(tmp_path, capsys):
    """GPT-2 export of n_kv_heads=1 used to write a c_attn of the wrong width without a word;
    every classic family now refuses a Config with an option it cannot hold, naming it."""
    gqa = _gpt2_like(n_kv_heads=1)
    for make in (hf.config_to_gpt2, hf.glassformer_to_gpt2):
        args = (gqa,) if make is hf.config_to_gpt2 else (weights.init(gqa), gqa)
        with pytest.raises(ConfigError, match=r"^n_kv_heads: GPT-2 has no n_kv_heads=1; export"):
            make(*args)
    enc = dict(vocab_size=40, d_model=16, n_heads=4, d_ff=24, max_len=24, positions="learned")
    bert = Config(**enc, arch="encoder", norm="post", embed_norm=True, type_vocab_size=2)
    with pytest.raises(ConfigError, match="norm_kind: BERT has no norm_kind='rmsnorm'"):
        hf.config_to_bert(bert.override("norm_kind=rmsnorm"))
    marian = Config(**(enc | dict(positions="sinusoidal_split")), arch="encoder-decoder",
                    norm="post", tie_embeddings=True, logits_bias=True)  # fmt: skip
    gated = marian.override("ffn_kind=gated")
    with pytest.raises(ConfigError, match="ffn_kind: Marian has no ffn_kind='gated'"):
        hf.glassformer_to_marian(weights.init(gated), gated)
    pegasus = marian.override("norm=pre", "logits_bias=false", "n_kv_heads=2")
    with pytest.raises(ConfigError, match="n_kv_heads: Pegasus has no n_kv_heads=2"):
        hf_pegasus.config_to_pegasus(pegasus)
    weights.save(tmp_path / "gqa", gqa, weights.init(gqa))
    assert main(["export-hf", str(tmp_path / "gqa"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert "as GPT-2, n_kv_heads: GPT-2 has no n_kv_heads=1" in err
    assert "as Llama / Qwen2, positions: Llama and Qwen2 need positions='rotary'" in err
    assert err.count("\n") == 1 and not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(norm_kind="layernorm"), "norm_kind: Llama and Qwen2 need norm_kind='rmsnorm'"),
        (dict(rope_fraction=0.5), "rope_fraction: Llama and Qwen2 need rope_fraction=1.0"),
        (dict(bias=True, qkv_bias=False), "qkv_bias=false with bias=true is neither"),
        (dict(norm="post"), "norm: Llama and Qwen2 need norm='pre'"),
    ],
)
def test_a_decoder_neither_family_holds_gets_one_line(change, message, tmp_path, capsys):
    cfg = Config(**(LLAMA_CFG.to_dict() | change))
    weights.save(tmp_path / "ck", cfg, weights.init(cfg))
    assert main(["export-hf", str(tmp_path / "ck"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("glassformer: error: export-hf writes a decoder-only model as GPT-2")
    assert message in err and err.count("\n") == 1 and not (tmp_path / "hf").exists()


def test_a_llama_head_has_no_bias(tmp_path):
    """bias=true, untied: Llama's head has no bias, so a zero one is dropped and any other
    refused."""
    cfg = Config(**(LLAMA_CFG.to_dict() | dict(bias=True)))
    params = weights.init(cfg, seed=1)
    assert hf_llama.export_family(cfg) == "llama" and "lm_head.bias" in params
    assert "lm_head.bias" not in hf_llama.glassformer_to_llama(params, cfg)
    params["lm_head.bias"] = params["lm_head.bias"] + 0.5
    with pytest.raises(CheckpointError, match="lm_head.bias is not zero"):
        hf_llama.glassformer_to_llama(params, cfg)


# -- bad folders: one line each, exit 2 ------------------------------------------------------------


BAD_CONFIGS = {
    "rope_scaling": (
        dict(rope_scaling={"type": "linear", "factor": 2.0}),
        "rope_scaling: Llama's rope_type 'linear' (scaled rotary positions)",
    ),
    "rope_parameters llama3": (
        dict(rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}),
        "rope_parameters: Llama's rope_type 'llama3'",
    ),
    "partial rotary": (dict(partial_rotary_factor=0.5), "partial_rotary_factor: 0.5"),
    "kv heads": (dict(num_key_value_heads=3), "num_attention_heads=4 is not divisible by"),
    "hidden_act": (dict(hidden_act="mish"), "hidden_act: Llama activation 'mish' unsupported"),
    "biases": (dict(attention_bias=True), "attention_bias=True with mlp_bias=False"),
    "sizes": (dict(head_dim=0), "head_dim must be a positive integer"),
    "field": (dict(hidden_size=None), "hidden_size must be a positive integer"),
}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A small Llama folder and a small sharded Qwen2 one, untied."""
    out = {}
    for family in ("llama", "qwen2"):
        config = hf_config(family, dict(num_attention_heads=4, num_key_value_heads=2))
        cls = transformers.LlamaForCausalLM if family == "llama" else transformers.Qwen2ForCausalLM
        out[family] = tmp_path_factory.mktemp(family)
        cls(config).save_pretrained(out[family], max_shard_size="20KB")
    return out


def _copy_folder(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _one_line_refusal(bad, tmp_path, capsys, message):
    with pytest.raises(CheckpointError):
        hf_dir.load(bad)
    assert main(["import-hf", str(bad), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("glassformer: error:") and err.count("\n") == 1, err
    assert message in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_json_is_one_line(case, good, tmp_path, capsys):
    fields, message = BAD_CONFIGS[case]
    bad = _copy_folder(good["llama"], tmp_path / "bad")
    config = json.loads((bad / "config.json").read_text()) | fields
    (bad / "config.json").write_text(json.dumps(config))
    _one_line_refusal(bad, tmp_path, capsys, message)


def test_sliding_window_missing_shard_and_tensors_are_one_line(good, tmp_path, capsys):
    qwen = good["qwen2"]
    config = json.loads((qwen / "config.json").read_text())
    window = config | dict(use_sliding_window=True, sliding_window=4, max_window_layers=1)
    window["layer_types"] = ["full_attention", "sliding_attention"]
    bad = _copy_folder(qwen, tmp_path / "window")
    (bad / "config.json").write_text(json.dumps(window))
    _one_line_refusal(bad, tmp_path, capsys, "use_sliding_window: Qwen2's sliding-window attention")
    bad = _copy_folder(qwen, tmp_path / "shard")
    index = json.loads((bad / "model.safetensors.index.json").read_text())
    gone = sorted(set(index["weight_map"].values()))[-1]
    (bad / gone).unlink()
    _one_line_refusal(bad, tmp_path, capsys, f"names the shard {gone!r}")
    bad = _copy_folder(good["llama"], tmp_path / "tied")
    config = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps(config | dict(tie_word_embeddings=True)))
    _one_line_refusal(bad, tmp_path, capsys, "differs from 'model.embed_tokens.weight' but tie")
    bad = _copy_folder(good["llama"], tmp_path / "layers")
    config = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps(config | dict(num_hidden_layers=3)))
    _one_line_refusal(bad, tmp_path, capsys, "no tensor 'model.layers.2.input_layernorm.weight'")


# -- config.json in every form its writers produce ----------------------------------------------

# The sizes every writer writes; each form adds, nests or leaves out the rest. The oracle is
# transformers reading the same config.json (AutoConfig.from_pretrained) and building the model
# from it: its attributes, and its logits over random weights.
SIZES = dict(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=2)
WRITTEN = dict(  # what transformers 5's save_pretrained writes beside the rotary fields
    num_attention_heads=4, num_key_value_heads=2, head_dim=8, hidden_act="silu",
    max_position_embeddings=48, rms_norm_eps=1e-5, tie_word_embeddings=False,
)  # fmt: skip
NESTED = dict(rope_parameters={"rope_type": "default", "rope_theta": 50.0})
FORMS = {  # name: (model_type, config.json less model_type and SIZES)
    # transformers 5: rope_theta nested under rope_parameters only
    "llama-nested": ("llama", WRITTEN | NESTED | dict(attention_bias=False, mlp_bias=False)),
    # transformers 4.x and many published folders: rope_theta at the top, rope_scaling null
    "llama-top-level": ("llama", WRITTEN | dict(rope_theta=50.0, rope_scaling=None)),
    # 4.x with a rope_scaling of the plain kind, its theta at the top
    "llama-scaling-type": (
        "llama",
        WRITTEN | dict(rope_scaling={"type": "default"}, rope_theta=50),
    ),
    # rope_scaling stands for rope_parameters in transformers 5, its theta before the top one
    "llama-scaling-theta": (
        "llama",
        WRITTEN | dict(rope_scaling={"rope_type": "default", "rope_theta": 50.0}, rope_theta=1e4),
    ),
    # every optional key left out: transformers' defaults (theta 1e4, eps 1e-6, K/V heads = heads,
    # head_dim hidden / heads, 2048 positions, untied, silu, no biases)
    "llama-bare": ("llama", dict(num_attention_heads=4)),
    # null where transformers reads null as its default
    "llama-nulls": (
        "llama",
        dict(
            num_attention_heads=4,
            num_key_value_heads=None,
            head_dim=None,
            rope_scaling=None,
            rope_parameters=None,
            rope_theta=50.0,
        ),
    ),  # fmt: skip
    "llama-tied-only": ("llama", dict(num_attention_heads=4, tie_word_embeddings=True)),
    "qwen2-nested": ("qwen2", WRITTEN | NESTED | dict(use_sliding_window=False)),
    "qwen2-top-level": ("qwen2", WRITTEN | dict(rope_theta=50.0)),
    # Qwen2's K/V heads default to 32, not to the query heads: 64 heads of 2 dimensions
    "qwen2-bare": ("qwen2", dict(hidden_size=128, num_attention_heads=64)),
    "qwen2-nulls": ("qwen2", dict(num_attention_heads=4, num_key_value_heads=None)),
}


def _form_folder(name: str, out):
    """config.json of form `name` as written, the weights of the model transformers builds from it
    (randomized; the embeddings drawn small, so that RMSNorm's eps moves the logits)."""
    family, fields = FORMS[name]
    out.mkdir()
    vocab = 64 if family == "llama" else 300  # Qwen2's tokenizer has 290 ids
    config = dict(SIZES, model_type=family, vocab_size=vocab) | fields
    (out / "config.json").write_text(json.dumps(config))
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.from_pretrained(out)
    ).eval()
    randomize(model, seed=len(name))
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(3e-3)
    model.save_pretrained(out / "saved")
    for f in (out / "saved").iterdir():
        if f.suffix == ".safetensors":
            f.rename(out / f.name)
    tok = llama_tokenizer() if family == "llama" else qwen2_tokenizer()
    (out / "tokenizer.json").write_text(tok, encoding="utf-8")
    return model


@pytest.mark.parametrize("name", list(FORMS))
def test_every_form_of_config_json_reads_as_transformers_reads_it(name, tmp_path, capsys):
    """Each form, read by glassformer, is the model transformers builds from the same file: its
    rope_theta, eps, K/V heads, head size, positions and tying, and its logits in float64 (1e-5
    of their largest: transformers' rotary angles stay float32). export-hf of it is a folder
    transformers loads as the same model."""
    model = _form_folder(name, tmp_path / "hf")
    tc, attn = model.config, model.model.layers[0].self_attn
    imp = hf_dir.load(tmp_path / "hf")
    cfg, params = imp.cfg, imp.params
    assert cfg.rope_theta == tc.rope_parameters["rope_theta"]
    assert cfg.ln_eps == model.model.norm.variance_epsilon
    assert cfg.kv_heads == tc.num_key_value_heads and cfg.head_dim == attn.head_dim
    assert cfg.max_len == tc.max_position_embeddings
    assert cfg.tie_embeddings == tc.tie_word_embeddings
    assert cfg.bias == (attn.o_proj.bias is not None)
    ids = [1, 5, 9, 2, 7, 3, 11, 4, 8, 6, 10, 12]
    with torch.no_grad():
        want = copy.deepcopy(model).double()(torch.tensor([ids])).logits[0].numpy()
    scale = np.abs(want).max()  # small where the tied head is the small embedding
    assert scale > 1e-3 and np.abs(want).std() > scale / 10
    assert float(np.abs(reference.forward(params, cfg, ids) - want).max()) < 1e-5 * scale
    assert main(["export-hf", str(tmp_path / "hf"), str(tmp_path / "back")]) == 0
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "back").eval()
    with torch.no_grad():
        assert torch.equal(back(torch.tensor([ids])).logits, model(torch.tensor([ids])).logits)
