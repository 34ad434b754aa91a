"""weights: the naming scheme (spec), seeded init, check, and checkpoint directories."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from glassformer import files, weights
from glassformer.config import Config, preset
from glassformer.errors import CheckpointError, GlassformerError
from glassformer.tokenizer import CharTokenizer, WordTokenizer, article_tokenizer

# Distinct sizes so that a swapped axis shows up: V=11 C=8 H=2 D=3 (H*D=6) F=16 T=5 classes=3.
V, C, HD, F, T, K = 11, 8, 6, 16, 5, 3
SIZES = dict(vocab_size=V, d_model=C, n_heads=2, head_dim=3, d_ff=F, max_len=T)


def _cfg(arch, **kw):
    layers = {
        "decoder": {"n_decoder_layers": 1},
        "encoder": {"n_encoder_layers": 1},
        "encoder-decoder": {"n_encoder_layers": 1, "n_decoder_layers": 1},
    }[arch]
    return Config(arch=arch, **SIZES, **layers, **kw)


def _attn(prefix, bias=True):
    out = []
    for proj, shape in (("q", (HD, C)), ("k", (HD, C)), ("v", (HD, C)), ("o", (C, HD))):
        out.append((f"{prefix}.{proj}.weight", shape))
        if bias:
            out.append((f"{prefix}.{proj}.bias", (shape[0],)))
    return out


def _ln(prefix):
    return [(f"{prefix}.weight", (C,)), (f"{prefix}.bias", (C,))]


# -- spec: expected names written out by hand -----------------------------------------------------

DECODER_LEARNED_PRE_BIAS_UNTIED = [
    ("decoder.tok_embed.weight", (V, C)),
    ("decoder.pos_embed.weight", (T, C)),
    ("decoder.layers.0.self_attn.q.weight", (HD, C)),
    ("decoder.layers.0.self_attn.q.bias", (HD,)),
    ("decoder.layers.0.self_attn.k.weight", (HD, C)),
    ("decoder.layers.0.self_attn.k.bias", (HD,)),
    ("decoder.layers.0.self_attn.v.weight", (HD, C)),
    ("decoder.layers.0.self_attn.v.bias", (HD,)),
    ("decoder.layers.0.self_attn.o.weight", (C, HD)),
    ("decoder.layers.0.self_attn.o.bias", (C,)),
    ("decoder.layers.0.norm1.weight", (C,)),
    ("decoder.layers.0.norm1.bias", (C,)),
    ("decoder.layers.0.ffn.w1.weight", (F, C)),
    ("decoder.layers.0.ffn.w1.bias", (F,)),
    ("decoder.layers.0.ffn.w2.weight", (C, F)),
    ("decoder.layers.0.ffn.w2.bias", (C,)),
    ("decoder.layers.0.norm2.weight", (C,)),
    ("decoder.layers.0.norm2.bias", (C,)),
    ("decoder.norm.weight", (C,)),
    ("decoder.norm.bias", (C,)),
    ("lm_head.weight", (V, C)),
    ("lm_head.bias", (V,)),
]

DECODER_SINUSOIDAL_POST_NOBIAS_TIED = [
    ("decoder.tok_embed.weight", (V, C)),
    ("decoder.layers.0.self_attn.q.weight", (HD, C)),
    ("decoder.layers.0.self_attn.k.weight", (HD, C)),
    ("decoder.layers.0.self_attn.v.weight", (HD, C)),
    ("decoder.layers.0.self_attn.o.weight", (C, HD)),
    ("decoder.layers.0.norm1.weight", (C,)),
    ("decoder.layers.0.norm1.bias", (C,)),
    ("decoder.layers.0.ffn.w1.weight", (F, C)),
    ("decoder.layers.0.ffn.w2.weight", (C, F)),
    ("decoder.layers.0.norm2.weight", (C,)),
    ("decoder.layers.0.norm2.bias", (C,)),
]

ENCDEC_SINUSOIDAL_POST_BIAS_UNTIED = [
    ("encoder.tok_embed.weight", (V, C)),
    *_attn("encoder.layers.0.self_attn"),
    *_ln("encoder.layers.0.norm1"),
    ("encoder.layers.0.ffn.w1.weight", (F, C)),
    ("encoder.layers.0.ffn.w1.bias", (F,)),
    ("encoder.layers.0.ffn.w2.weight", (C, F)),
    ("encoder.layers.0.ffn.w2.bias", (C,)),
    *_ln("encoder.layers.0.norm2"),
    ("decoder.tok_embed.weight", (V, C)),
    *_attn("decoder.layers.0.self_attn"),
    *_ln("decoder.layers.0.norm1"),
    ("decoder.layers.0.cross_attn.q.weight", (HD, C)),
    ("decoder.layers.0.cross_attn.q.bias", (HD,)),
    ("decoder.layers.0.cross_attn.k.weight", (HD, C)),
    ("decoder.layers.0.cross_attn.k.bias", (HD,)),
    ("decoder.layers.0.cross_attn.v.weight", (HD, C)),
    ("decoder.layers.0.cross_attn.v.bias", (HD,)),
    ("decoder.layers.0.cross_attn.o.weight", (C, HD)),
    ("decoder.layers.0.cross_attn.o.bias", (C,)),
    *_ln("decoder.layers.0.norm2"),
    ("decoder.layers.0.ffn.w1.weight", (F, C)),
    ("decoder.layers.0.ffn.w1.bias", (F,)),
    ("decoder.layers.0.ffn.w2.weight", (C, F)),
    ("decoder.layers.0.ffn.w2.bias", (C,)),
    *_ln("decoder.layers.0.norm3"),
    ("lm_head.weight", (V, C)),
    ("lm_head.bias", (V,)),
]

ENCDEC_LEARNED_PRE_NOBIAS_TIED = [
    ("encoder.tok_embed.weight", (V, C)),
    ("encoder.pos_embed.weight", (T, C)),
    *_attn("encoder.layers.0.self_attn", bias=False),
    *_ln("encoder.layers.0.norm1"),
    ("encoder.layers.0.ffn.w1.weight", (F, C)),
    ("encoder.layers.0.ffn.w2.weight", (C, F)),
    *_ln("encoder.layers.0.norm2"),
    *_ln("encoder.norm"),
    ("decoder.tok_embed.weight", (V, C)),
    ("decoder.pos_embed.weight", (T, C)),
    *_attn("decoder.layers.0.self_attn", bias=False),
    *_ln("decoder.layers.0.norm1"),
    *_attn("decoder.layers.0.cross_attn", bias=False),
    *_ln("decoder.layers.0.norm2"),
    ("decoder.layers.0.ffn.w1.weight", (F, C)),
    ("decoder.layers.0.ffn.w2.weight", (C, F)),
    *_ln("decoder.layers.0.norm3"),
    *_ln("decoder.norm"),
]

ENCODER_CLASSIFIER_LEARNED_PRE_BIAS = [
    ("encoder.tok_embed.weight", (V, C)),
    ("encoder.pos_embed.weight", (T, C)),
    *_attn("encoder.layers.0.self_attn"),
    *_ln("encoder.layers.0.norm1"),
    ("encoder.layers.0.ffn.w1.weight", (F, C)),
    ("encoder.layers.0.ffn.w1.bias", (F,)),
    ("encoder.layers.0.ffn.w2.weight", (C, F)),
    ("encoder.layers.0.ffn.w2.bias", (C,)),
    *_ln("encoder.layers.0.norm2"),
    *_ln("encoder.norm"),
    ("classifier.weight", (K, C)),
    ("classifier.bias", (K,)),
]

ENCODER_NO_HEAD_NOBIAS = [
    ("encoder.tok_embed.weight", (V, C)),
    *_attn("encoder.layers.0.self_attn", bias=False),
    *_ln("encoder.layers.0.norm1"),
    ("encoder.layers.0.ffn.w1.weight", (F, C)),
    ("encoder.layers.0.ffn.w2.weight", (C, F)),
    *_ln("encoder.layers.0.norm2"),
]

# Today's decoders: Q (H·D = 8) and 1 K/V head (D = 4) with their own biases (Qwen2), RMSNorm's
# weight only, the gated FFN's W3 after W2, an untied head without bias.
LLAMA_LIKE = [
    ("decoder.tok_embed.weight", (V, C)),
    ("decoder.layers.0.self_attn.q.weight", (8, C)),
    ("decoder.layers.0.self_attn.q.bias", (8,)),
    ("decoder.layers.0.self_attn.k.weight", (4, C)),
    ("decoder.layers.0.self_attn.k.bias", (4,)),
    ("decoder.layers.0.self_attn.v.weight", (4, C)),
    ("decoder.layers.0.self_attn.v.bias", (4,)),
    ("decoder.layers.0.self_attn.o.weight", (C, 8)),
    ("decoder.layers.0.norm1.weight", (C,)),
    ("decoder.layers.0.ffn.w1.weight", (F, C)),
    ("decoder.layers.0.ffn.w2.weight", (C, F)),
    ("decoder.layers.0.ffn.w3.weight", (F, C)),
    ("decoder.layers.0.norm2.weight", (C,)),
    ("decoder.norm.weight", (C,)),
    ("lm_head.weight", (V, C)),
]

# Attention only (d_ff 0): no FFN and no norm for it; cross-attention's norm is still norm2.
ENCDEC_ATTENTION_ONLY = [
    ("encoder.tok_embed.weight", (V, C)),
    *_attn("encoder.layers.0.self_attn", bias=False),
    *_ln("encoder.layers.0.norm1"),
    ("decoder.tok_embed.weight", (V, C)),
    *_attn("decoder.layers.0.self_attn", bias=False),
    *_ln("decoder.layers.0.norm1"),
    *_attn("decoder.layers.0.cross_attn", bias=False),
    *_ln("decoder.layers.0.norm2"),
]

SPEC_CASES = {
    "decoder-llama-like": (
        Config(
            arch="decoder",
            **(SIZES | dict(head_dim=4)),
            n_decoder_layers=1,
            n_kv_heads=1,
            positions="rotary",
            norm="pre",
            norm_kind="rmsnorm",
            ffn_kind="gated",
            bias=False,
            qkv_bias=True,
        ),
        LLAMA_LIKE,
    ),
    "encdec-attention-only": (
        Config(
            arch="encoder-decoder",
            **(SIZES | dict(d_ff=0)),
            n_encoder_layers=1,
            n_decoder_layers=1,
            bias=False,
            tie_embeddings=True,
        ),
        ENCDEC_ATTENTION_ONLY,
    ),
    "decoder-learned-pre-bias-untied": (
        _cfg("decoder", positions="learned", norm="pre", bias=True, tie_embeddings=False),
        DECODER_LEARNED_PRE_BIAS_UNTIED,
    ),
    "decoder-sinusoidal-post-nobias-tied": (
        _cfg("decoder", positions="sinusoidal", norm="post", bias=False, tie_embeddings=True),
        DECODER_SINUSOIDAL_POST_NOBIAS_TIED,
    ),
    "decoder-nopos-post-nobias-tied": (
        _cfg("decoder", positions="none", norm="post", bias=False, tie_embeddings=True),
        DECODER_SINUSOIDAL_POST_NOBIAS_TIED,
    ),
    "encdec-sinusoidal-post-bias-untied": (
        _cfg("encoder-decoder", positions="sinusoidal", norm="post", bias=True),
        ENCDEC_SINUSOIDAL_POST_BIAS_UNTIED,
    ),
    "encdec-learned-pre-nobias-tied": (
        _cfg("encoder-decoder", positions="learned", norm="pre", bias=False, tie_embeddings=True),
        ENCDEC_LEARNED_PRE_NOBIAS_TIED,
    ),
    "encoder-classifier-learned-pre-bias": (
        _cfg("encoder", positions="learned", norm="pre", bias=True, n_classes=K),
        ENCODER_CLASSIFIER_LEARNED_PRE_BIAS,
    ),
    "encoder-nohead-nobias": (
        _cfg("encoder", positions="sinusoidal", norm="post", bias=False),
        ENCODER_NO_HEAD_NOBIAS,
    ),
}


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
def test_spec_names_shapes_and_order(case):
    cfg, expected = SPEC_CASES[case]
    got = weights.spec(cfg)
    assert len(expected) == len(dict(expected))  # the hand-written list has no duplicates
    assert set(got) == set(dict(expected)), (
        f"missing {sorted(set(dict(expected)) - set(got))}, "
        f"extra {sorted(set(got) - set(dict(expected)))}"
    )
    assert got == dict(expected)
    assert list(got.items()) == expected
    assert all(type(s) is tuple and all(type(n) is int for n in s) for s in got.values())


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
def test_spec_n_params_matches_hand_count(case):
    cfg, expected = SPEC_CASES[case]
    assert weights.n_params(cfg) == sum(int(np.prod(s)) for _, s in expected)


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
def test_spec_order_is_deterministic(case):
    cfg, _ = SPEC_CASES[case]
    first = list(weights.spec(cfg))
    assert list(weights.spec(cfg)) == first
    assert list(weights.spec(Config.from_json(cfg.to_json()))) == first


def test_spec_layers_are_numbered_in_order():
    cfg = Config(arch="encoder-decoder", n_encoder_layers=3, n_decoder_layers=2, **SIZES)
    names = list(weights.spec(cfg))
    for stack, n in (("encoder", 3), ("decoder", 2)):
        layers = [int(x.split(".")[2]) for x in names if x.startswith(f"{stack}.layers.")]
        assert sorted(set(layers)) == list(range(n))
        assert layers == sorted(layers)
    assert "encoder.layers.3.norm1.weight" not in names
    assert "decoder.layers.1.norm3.weight" in names
    assert "decoder.layers.2.norm1.weight" not in names
    # Encoder before decoder before the head.
    assert names.index("encoder.layers.2.norm2.bias") < names.index("decoder.tok_embed.weight")
    assert names[-2:] == ["lm_head.weight", "lm_head.bias"]


def test_spec_attention_width_follows_head_dim_not_d_model():
    cfg = preset("hello-world")
    s = weights.spec(cfg)
    assert s["encoder.layers.5.self_attn.q.weight"] == (6, 4)
    assert s["decoder.layers.5.cross_attn.o.weight"] == (4, 6)
    assert s["decoder.layers.0.ffn.w1.weight"] == (8, 4)
    assert "encoder.layers.6.norm1.weight" not in s


# -- init ---------------------------------------------------------------------------------------

INIT_CFG = _cfg("encoder-decoder", positions="learned", norm="pre", bias=True)


def test_init_keys_follow_spec():
    params = weights.init(INIT_CFG)
    assert list(params) == list(weights.spec(INIT_CFG))
    for name, shape in weights.spec(INIT_CFG).items():
        assert params[name].shape == shape
    weights.check(INIT_CFG, params)


def test_init_is_deterministic_per_seed():
    a = weights.init(INIT_CFG, seed=7)
    b = weights.init(INIT_CFG, seed=7)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_init_differs_across_seeds():
    a = weights.init(INIT_CFG, seed=0)
    b = weights.init(INIT_CFG, seed=1)
    matrices = [n for n in a if n.endswith(".weight") and len(a[n].shape) == 2]
    assert matrices
    for name in matrices:
        assert not np.array_equal(a[name], b[name]), name


def test_init_biases_zero_and_layernorm_identity():
    params = weights.init(INIT_CFG, seed=3, std=0.5)
    norms = [n for n in params if ".norm" in n]
    assert "encoder.norm.weight" in norms and "decoder.layers.0.norm3.bias" in norms
    for name, value in params.items():
        if ".norm" in name and name.endswith(".weight"):
            np.testing.assert_array_equal(value, np.ones(value.shape), err_msg=name)
        elif name.endswith(".bias"):
            np.testing.assert_array_equal(value, np.zeros(value.shape), err_msg=name)
        else:
            assert value.ndim == 2
            assert np.count_nonzero(value) == value.size, name


@pytest.mark.parametrize("std", [0.02, 0.5])
def test_init_std_is_honoured(std):
    cfg = Config(arch="decoder", vocab_size=4096, d_model=256, n_heads=4, d_ff=8, max_len=4)
    big = weights.init(cfg, seed=11, std=std)["decoder.tok_embed.weight"]
    assert big.size == 4096 * 256
    assert abs(big.std() / std - 1) < 0.01
    assert abs(big.mean()) < 0.01 * std


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_init_dtype_is_honoured(dtype):
    params = weights.init(INIT_CFG, seed=2, dtype=dtype)
    for name, value in params.items():
        assert value.dtype == np.dtype(dtype), name
    ref = weights.init(INIT_CFG, seed=2)
    name = "decoder.layers.0.ffn.w1.weight"
    np.testing.assert_array_equal(params[name], ref[name].astype(dtype))


# -- check --------------------------------------------------------------------------------------


def test_check_refuses_missing_tensor():
    params = weights.init(INIT_CFG)
    del params["decoder.layers.0.cross_attn.v.bias"]
    with pytest.raises(CheckpointError, match=r"missing tensor 'decoder\.layers\.0\.cross_attn"):
        weights.check(INIT_CFG, params, where="mine")


def test_check_counts_more_missing_tensors():
    params = weights.init(INIT_CFG)
    del params["encoder.norm.weight"], params["encoder.norm.bias"], params["lm_head.bias"]
    with pytest.raises(CheckpointError) as e:
        weights.check(INIT_CFG, params)
    assert "encoder.norm.weight" in str(e.value)
    assert "2 more" in str(e.value)


def test_check_refuses_unexpected_tensor():
    params = weights.init(INIT_CFG)
    params["decoder.layers.0.extra.weight"] = np.zeros((2, 2))
    with pytest.raises(CheckpointError, match=r"unexpected tensor 'decoder\.layers\.0\.extra"):
        weights.check(INIT_CFG, params)


def test_check_refuses_wrong_shape_naming_both_shapes():
    params = weights.init(INIT_CFG)
    params["encoder.layers.0.self_attn.q.weight"] = np.zeros((C, HD))
    with pytest.raises(CheckpointError) as e:
        weights.check(INIT_CFG, params, where="here")
    msg = str(e.value)
    assert "encoder.layers.0.self_attn.q.weight" in msg
    assert str((C, HD)) in msg and str((HD, C)) in msg
    assert "here" in msg


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_refuses_non_finite(bad):
    params = weights.init(INIT_CFG)
    params["decoder.layers.0.ffn.w2.weight"][3, 1] = bad
    with pytest.raises(CheckpointError, match=r"decoder\.layers\.0\.ffn\.w2\.weight.*NaN"):
        weights.check(INIT_CFG, params)


def test_check_refuses_params_of_another_config():
    other = _cfg("encoder-decoder", positions="learned", norm="pre", bias=True, tie_embeddings=True)
    with pytest.raises(CheckpointError, match="lm_head.weight"):
        weights.check(other, weights.init(INIT_CFG))
    with pytest.raises(CheckpointError, match="lm_head.weight"):
        weights.check(INIT_CFG, weights.init(other))


# -- checkpoints --------------------------------------------------------------------------------

CKPT_CFG = _cfg("decoder", positions="learned", norm="pre", bias=True)


def _listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


def _assert_params_equal(a, b):
    assert list(a) == list(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize(
    "cfg",
    [CKPT_CFG, INIT_CFG, SPEC_CASES["encoder-classifier-learned-pre-bias"][0]],
    ids=["decoder", "encoder-decoder", "encoder"],
)
def test_round_trip_float64_is_exact(tmp_path, cfg):
    params = weights.init(cfg, seed=5, std=0.3)
    out = weights.save(tmp_path / "ck", cfg, params, dtype="float64")
    assert out == tmp_path / "ck"
    assert _listing(out) == ["config.json", "model.safetensors"]
    assert Config.from_json((out / "config.json").read_text()) == cfg
    cfg2, params2, tok = weights.load(out)
    assert cfg2 == cfg
    assert tok is None
    _assert_params_equal(params2, params)
    assert all(v.dtype == np.float64 for v in params2.values())


def test_round_trip_float32_storage(tmp_path):
    params = weights.init(CKPT_CFG, seed=5, std=0.3)
    weights.save(tmp_path / "ck", CKPT_CFG, params)  # float32 by default
    stored = safetensors.numpy.load_file(str(tmp_path / "ck" / "model.safetensors"))
    assert all(v.dtype == np.float32 for v in stored.values())
    _, back, _ = weights.load(tmp_path / "ck")
    expected = {n: v.astype(np.float32).astype(np.float64) for n, v in params.items()}
    _assert_params_equal(back, expected)
    name = "decoder.tok_embed.weight"
    err = np.abs(back[name] - params[name]).max()
    assert 0 < err <= np.abs(params[name]).max() * 2.0**-24
    _, back32, _ = weights.load(tmp_path / "ck", dtype=np.float32)
    assert all(v.dtype == np.float32 for v in back32.values())
    _assert_params_equal(back32, {n: v.astype(np.float32) for n, v in params.items()})


def test_round_trip_float16_storage(tmp_path):
    params = weights.init(CKPT_CFG, seed=5)
    weights.save(tmp_path / "ck", CKPT_CFG, params, dtype="float16")
    _, back, _ = weights.load(tmp_path / "ck")
    _assert_params_equal(
        back, {n: v.astype(np.float16).astype(np.float64) for n, v in params.items()}
    )


@pytest.mark.parametrize("dtype", ["int8", "bfloat16", "float128", "f4"])
def test_save_refuses_unstorable_dtype(tmp_path, dtype):
    with pytest.raises(GlassformerError, match="float32"):
        weights.save(tmp_path / "ck", CKPT_CFG, weights.init(CKPT_CFG), dtype=dtype)
    assert _listing(tmp_path) == []


def test_save_refuses_params_that_do_not_match(tmp_path):
    params = weights.init(CKPT_CFG)
    del params["decoder.norm.bias"]
    with pytest.raises(CheckpointError, match=r"decoder\.norm\.bias"):
        weights.save(tmp_path / "ck", CKPT_CFG, params)
    assert _listing(tmp_path) == []


def _same_tokenizer(a, b, texts):
    assert type(a) is type(b)
    assert a.kind == b.kind
    assert a.vocab == b.vocab
    assert a.specials == b.specials
    assert a.lowercase == b.lowercase
    for text in texts:
        assert a.encode(text) == b.encode(text)
        ids = a.encode(text)
        assert a.decode(ids) == b.decode(ids)


TOKENIZERS = {
    "word": (
        lambda: WordTokenizer.train(["Hola, mundo!", "¿Cómo estás, mundo?", "hola hola"]),
        ["hola, mundo!", "¿Cómo estás? unknownword"],
    ),
    "char": (
        lambda: CharTokenizer.train(["ñandú", "abc xyz"]),
        ["ñandú abc", "zyx"],
    ),
    "article": (article_tokenizer, ["Hello World", "hola mundo", "SOS how a c ?"]),
}


@pytest.mark.parametrize("kind", sorted(TOKENIZERS))
def test_tokenizer_round_trip(tmp_path, kind):
    make, texts = TOKENIZERS[kind]
    tok = make()
    cfg = CKPT_CFG.override(f"vocab_size={max(tok.vocab_size, CKPT_CFG.vocab_size)}")
    weights.save(tmp_path / "ck", cfg, weights.init(cfg), tokenizer=tok)
    assert _listing(tmp_path / "ck") == ["config.json", "model.safetensors", "tokenizer.json"]
    _, _, back = weights.load(tmp_path / "ck")
    assert back is not None
    _same_tokenizer(back, tok, texts)


def test_article_tokenizer_round_trip_keeps_article_ids(tmp_path):
    weights.save(tmp_path / "ck", CKPT_CFG, weights.init(CKPT_CFG), tokenizer=article_tokenizer())
    _, _, back = weights.load(tmp_path / "ck")
    assert back.encode("Hello World") == [0, 2]
    assert (back.bos_id, back.eos_id) == (6, 5)


def test_save_twice_replaces_atomically(tmp_path):
    first = weights.init(CKPT_CFG, seed=1)
    second = weights.init(CKPT_CFG, seed=2)
    path = tmp_path / "ck"
    weights.save(path, CKPT_CFG, first, tokenizer=article_tokenizer(), dtype="float64")
    weights.save(path, CKPT_CFG, second, dtype="float64", overwrite=True)
    assert _listing(tmp_path) == ["ck"]
    # The whole directory was replaced: the first save's tokenizer.json is gone.
    assert _listing(path) == ["config.json", "model.safetensors"]
    _, back, tok = weights.load(path)
    assert tok is None
    _assert_params_equal(back, second)


def test_save_over_a_different_config_replaces_it(tmp_path):
    path = tmp_path / "ck"
    weights.save(path, INIT_CFG, weights.init(INIT_CFG))
    params = weights.init(CKPT_CFG, seed=9)
    weights.save(path, CKPT_CFG, params, dtype="float64", overwrite=True)
    cfg, back, _ = weights.load(path)
    assert cfg == CKPT_CFG
    _assert_params_equal(back, params)
    assert _listing(tmp_path) == ["ck"]


def test_save_creates_missing_parents(tmp_path):
    path = tmp_path / "a" / "b" / "ck"
    weights.save(path, CKPT_CFG, weights.init(CKPT_CFG))
    assert _listing(tmp_path / "a" / "b") == ["ck"]
    assert weights.load(path)[0] == CKPT_CFG


def test_save_over_a_file_is_refused_and_leaves_it(tmp_path):
    path = tmp_path / "ck"
    path.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="not a directory"):
        weights.save(path, CKPT_CFG, weights.init(CKPT_CFG))
    assert path.read_text() == "not a checkpoint"
    assert _listing(tmp_path) == ["ck"]


# -- corrupt checkpoints ------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    params = weights.init(CKPT_CFG, seed=4)
    path = weights.save(tmp_path / "ck", CKPT_CFG, params, dtype="float64")
    return path, params


def _resave(path, tensors):
    safetensors.numpy.save_file(tensors, str(path / "model.safetensors"))


def _refused(path, *needles):
    with pytest.raises(CheckpointError) as e:
        weights.load(path)
    msg = str(e.value)
    for needle in needles:
        assert needle in msg, msg
    return msg


def test_missing_directory(tmp_path):
    _refused(tmp_path / "nope", "nope", "not found")


def test_path_is_a_file(tmp_path):
    (tmp_path / "ck").write_text("x")
    _refused(tmp_path / "ck", "not found")


def test_missing_config(saved):
    path, _ = saved
    (path / "config.json").unlink()
    _refused(path, "config.json")


def test_missing_weights(saved):
    path, _ = saved
    (path / "model.safetensors").unlink()
    _refused(path, "model.safetensors")


def test_config_invalid_json(saved):
    path, _ = saved
    (path / "config.json").write_text('{"arch": "decoder",')
    _refused(path, "config.json", "JSON")


def test_config_not_utf8(saved):
    path, _ = saved
    (path / "config.json").write_bytes(b'{"arch": "\xff\xfe"}')
    _refused(path, "config.json", "UTF-8")


@pytest.mark.parametrize(
    "field,value",
    [("norm", "middle"), ("d_model", "8"), ("ln_eps", 5.0), ("n_classes", 2), ("head_dim", 0)],
)
def test_config_invalid_field_value(saved, field, value):
    path, _ = saved
    data = json.loads((path / "config.json").read_text())
    data[field] = value
    (path / "config.json").write_text(json.dumps(data))
    _refused(path, "config.json", field)


def test_a_config_json_from_before_the_modern_options_loads_with_their_defaults(saved):
    """A checkpoint written before rotary, RMSNorm, gated FFN, n_kv_heads and qkv_bias existed
    has none of those fields: it loads as the model it was (the defaults are the classic one)."""
    path, params = saved
    data = json.loads((path / "config.json").read_text())
    new = ("rope_theta", "rope_fraction", "norm_kind", "ffn_kind", "n_kv_heads", "qkv_bias")
    (path / "config.json").write_text(json.dumps({k: v for k, v in data.items() if k not in new}))
    cfg, back, _ = weights.load(path)
    assert cfg == CKPT_CFG and all(np.array_equal(back[n], params[n]) for n in params)


@pytest.mark.parametrize(
    "field,value",
    [("n_kv_heads", 1), ("norm_kind", "rmsnorm"), ("ffn_kind", "gated"), ("qkv_bias", False)],
)
def test_weights_of_a_classic_model_are_refused_for_a_modern_config(saved, field, value):
    """The same tensors under a config.json that says K/V heads are shared, norms have no bias,
    the FFN has a W3 or Q/K/V no bias: the first tensor that does not fit is named."""
    path, _ = saved
    data = json.loads((path / "config.json").read_text()) | {field: value}
    (path / "config.json").write_text(json.dumps(data))
    _refused(path, "model.safetensors", "tensor")


def test_config_unknown_field(saved):
    path, _ = saved
    data = json.loads((path / "config.json").read_text()) | {"dropout": 0.1}
    (path / "config.json").write_text(json.dumps(data))
    _refused(path, "config.json", "dropout")


def test_config_zero_heads(saved):
    path, _ = saved
    data = json.loads((path / "config.json").read_text()) | {"n_heads": 0, "head_dim": None}
    (path / "config.json").write_text(json.dumps(data))
    _refused(path, "config.json", "n_heads")


def test_config_of_another_model(saved):
    path, _ = saved
    data = json.loads((path / "config.json").read_text()) | {"vocab_size": V + 1}
    (path / "config.json").write_text(json.dumps(data))
    _refused(path, "decoder.tok_embed.weight", str((V, C)), str((V + 1, C)))


def test_missing_tensor(saved):
    path, _ = saved
    tensors = safetensors.numpy.load_file(str(path / "model.safetensors"))
    del tensors["decoder.layers.0.ffn.w1.bias"]
    _resave(path, tensors)
    _refused(path, "missing", "decoder.layers.0.ffn.w1.bias", "model.safetensors")


def test_unexpected_tensor(saved):
    path, _ = saved
    tensors = safetensors.numpy.load_file(str(path / "model.safetensors"))
    tensors["decoder.layers.0.adapter.weight"] = np.zeros((2, 2))
    _resave(path, tensors)
    _refused(path, "unexpected", "decoder.layers.0.adapter.weight")


def test_misshaped_tensor(saved):
    path, _ = saved
    tensors = safetensors.numpy.load_file(str(path / "model.safetensors"))
    name = "decoder.layers.0.self_attn.o.weight"
    tensors[name] = np.ascontiguousarray(tensors[name].T)
    _resave(path, tensors)
    _refused(path, name, str((HD, C)), str((C, HD)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_tensor(saved, bad):
    path, _ = saved
    tensors = safetensors.numpy.load_file(str(path / "model.safetensors"))
    name = "decoder.pos_embed.weight"
    tensors[name][2, 3] = bad
    _resave(path, tensors)
    _refused(path, name, "NaN")


def test_truncated_weights(saved):
    path, _ = saved
    f = path / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    msg = _refused(path, "model.safetensors")
    assert "truncated" in msg or "corrupt" in msg


def test_weights_cut_just_short(saved):
    path, _ = saved
    f = path / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-1])
    _refused(path, "model.safetensors", "corrupt")


@pytest.mark.parametrize("size", [0, 7, 100, 4096])
def test_garbage_weights(saved, size):
    path, _ = saved
    (path / "model.safetensors").write_bytes(np.random.default_rng(size).bytes(size))
    msg = _refused(path, "model.safetensors")
    assert "truncated" in msg or "corrupt" in msg


def test_garbage_weights_same_length(saved):
    path, _ = saved
    f = path / "model.safetensors"
    f.write_bytes(np.random.default_rng(0).bytes(f.stat().st_size))
    _refused(path, "model.safetensors", "corrupt")


def test_unreadable_dtype_in_weights(saved):
    path, _ = saved
    header = json.dumps(
        {"decoder.norm.bias": {"dtype": "BF16", "shape": [C], "data_offsets": [0, 2 * C]}}
    ).encode()
    (path / "model.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + bytes(2 * C)
    )
    _refused(path, "model.safetensors")


# -- saves that fail midway ---------------------------------------------------------------------


def _failing_save_file(seen):
    def fake(tensors, filename, metadata=None):
        tmp = Path(filename).parent
        assert tmp.is_dir()
        seen.append(tmp)
        Path(filename).write_bytes(b"half a file")
        raise OSError("disk full")

    return fake


def test_failed_save_keeps_previous_checkpoint(saved, monkeypatch):
    path, params = saved
    seen = []
    monkeypatch.setattr(safetensors.numpy, "save_file", _failing_save_file(seen))
    with pytest.raises(CheckpointError, match="disk full"):  # one clear error, not an OSError
        weights.save(path, CKPT_CFG, weights.init(CKPT_CFG, seed=99), dtype="float64",
                     overwrite=True)  # fmt: skip
    monkeypatch.undo()
    assert len(seen) == 1
    tmp = seen[0]
    assert tmp.parent == path.parent and tmp != path  # the write went to a temp dir beside it
    assert not tmp.exists()
    assert _listing(path.parent) == ["ck"]
    cfg, back, _ = weights.load(path)
    assert cfg == CKPT_CFG
    _assert_params_equal(back, params)


def test_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(safetensors.numpy, "save_file", _failing_save_file(seen))
    with pytest.raises(CheckpointError, match="disk full"):
        weights.save(tmp_path / "ck", CKPT_CFG, weights.init(CKPT_CFG))
    assert len(seen) == 1
    assert _listing(tmp_path) == []


class _BrokenTokenizer:
    vocab_size = 1  # fits the model: the failure is in writing it

    def to_json(self):
        raise RuntimeError("tokenizer exploded")


def test_failure_after_weights_written_keeps_previous_checkpoint(saved):
    path, params = saved
    with pytest.raises(RuntimeError, match="exploded"):
        weights.save(path, CKPT_CFG, weights.init(CKPT_CFG, seed=99), tokenizer=_BrokenTokenizer(),
                     overwrite=True)  # fmt: skip
    assert _listing(path.parent) == ["ck"]
    assert _listing(path) == ["config.json", "model.safetensors"]
    _, back, _ = weights.load(path)
    _assert_params_equal(back, params)


def test_failure_while_swapping_keeps_previous_checkpoint(saved, monkeypatch):
    """Without an atomic exchange, a failed move-in restores the old checkpoint."""
    path, params = saved
    real_replace = os.replace

    def fake_replace(src, dst):
        if Path(dst) == path and not str(src).endswith(".old"):
            raise OSError("interrupted")
        return real_replace(src, dst)

    monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    monkeypatch.setattr(files.os, "replace", fake_replace)
    with pytest.raises(CheckpointError, match="interrupted"):
        weights.save(path, CKPT_CFG, weights.init(CKPT_CFG, seed=99), dtype="float64",
                     overwrite=True)  # fmt: skip
    monkeypatch.undo()
    assert _listing(path.parent) == ["ck"]
    _, back, _ = weights.load(path)
    _assert_params_equal(back, params)


def test_overwrite_uses_atomic_exchange(saved):
    """On Linux the old and new directories are swapped in one renameat2 call."""
    path, _ = saved
    new = weights.init(CKPT_CFG, seed=98)
    weights.save(path, CKPT_CFG, new, dtype="float64", overwrite=True)
    assert _listing(path.parent) == ["ck"]
    _, back, _ = weights.load(path)
    _assert_params_equal(back, new)
    scratch = path.parent / "a"
    scratch.mkdir()
    (scratch / "marker").write_text("a")
    assert files._exchange(scratch, path)  # the real syscall works here
    assert (path / "marker").is_file() and (scratch / "model.safetensors").is_file()


def test_n_params_and_memory_in_closed_form_match_spec():
    """n_params (closed form, instant for any size) equals the sum over spec(cfg) for every
    option of the parity test, and a billion-layer config is sized without building anything."""
    import sys
    import time
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_parity import CASES

    from glassformer.config import PRESETS

    for cfg in [c.values[0] for c in CASES] + list(PRESETS.values()):
        assert weights.n_params(cfg) == sum(int(np.prod(s)) for s in weights.spec(cfg).values())
    huge = Config(arch="decoder", n_decoder_layers=10**9, d_model=64, n_heads=4)
    t0 = time.perf_counter()
    assert weights.memory_bytes(huge) > 10**9 * 8 * 64 * 64
    with pytest.raises(CheckpointError, match="GiB"):
        weights.check_fits(huge)
    assert time.perf_counter() - t0 < 1
