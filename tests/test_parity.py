"""The contract between the engines: the PyTorch engine computes what the reference engine
computes, for every value of every Config option, in float64 to 1e-10 — final logits and every
intermediate the reference engine traces."""

import dataclasses
import typing

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import reference as R  # noqa: E402
from glassformer import weights  # noqa: E402
from glassformer.config import Config, ConfigError  # noqa: E402
from glassformer.torch_model import Transformer, from_params, set_explicit, to_params  # noqa: E402
from glassformer.trace import tracing  # noqa: E402

TOL = 1e-10
BASE = dict(vocab_size=13, d_model=8, n_heads=2, head_dim=5, d_ff=12, max_len=12)
ARCH_BASE = {
    "decoder": dict(arch="decoder", n_decoder_layers=2),
    "encoder-decoder": dict(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2),
    "encoder": dict(arch="encoder", n_encoder_layers=2, n_classes=3),
}
# Every option value each arch is run with (one change at a time from the arch's base).
VARIANTS = [
    ("positions", "sinusoidal"),
    ("positions", "learned"),
    ("positions", "none"),
    ("positions", "sinusoidal_split"),
    ("norm", "post"),
    ("norm", "pre"),
    ("activation", "relu"),
    ("activation", "gelu"),
    ("activation", "gelu_tanh"),
    ("activation", "silu"),
    ("bias", True),
    ("bias", False),
    ("tie_embeddings", True),
    ("tie_embeddings", False),
    ("share_embeddings", True),
    ("share_embeddings", False),
    ("n_classes", 0),
    ("ln_eps", 1e-6),
    ("embed_scale", True),
    ("embed_scale", False),
    ("type_vocab_size", 3),
    ("embed_norm", True),
    ("embed_norm", False),
    ("logits_bias", True),
    ("logits_bias", False),
    ("norm_kind", "layernorm"),
    ("norm_kind", "rmsnorm"),
    ("ffn_kind", "plain"),
    ("ffn_kind", "gated"),
    ("n_kv_heads", 1),  # multi-query attention: both query heads share one K/V head
    ("qkv_bias", False),  # with bias=True: Q, K, V without, W_O and the FFN with
    ("d_ff", 0),  # attention only
]
# Today's decoders (Llama, Qwen2, Mistral, SmolLM): several options at once, each arch. Rotary
# positions need an even number of rotated dimensions (BASE's head_dim 5 has none).
LLAMA = dict(positions="rotary", norm="pre", norm_kind="rmsnorm", ffn_kind="gated",
             activation="silu", bias=False, tie_embeddings=False)  # fmt: skip
COMBOS = {
    "rotary": dict(positions="rotary", head_dim=6),
    "rotary-partial": dict(positions="rotary", head_dim=8, rope_fraction=0.5, rope_theta=500.0),
    "llama-gqa2": LLAMA | dict(n_heads=4, n_kv_heads=2, head_dim=4),
    "llama-gqa4": LLAMA | dict(n_heads=8, n_kv_heads=2, head_dim=2, embed_norm=True),
    "qwen2": LLAMA | dict(n_heads=4, n_kv_heads=2, head_dim=4, qkv_bias=True, rope_theta=1e6),
    "mqa-rotary-post": dict(positions="rotary", n_heads=4, n_kv_heads=1, head_dim=4),
    "attention-only-pre": dict(d_ff=0, norm="pre", positions="rotary", head_dim=4),
    "attention-only-post": dict(d_ff=0, norm="post", norm_kind="rmsnorm"),
}


def _cases():
    out = []
    for arch in ARCH_BASE:
        changes = [({f: v}, f"{f}={v}") for f, v in VARIANTS] + [(c, k) for k, c in COMBOS.items()]
        for change, name in changes:
            try:
                cfg = Config(**(BASE | ARCH_BASE[arch] | change))
            except ConfigError:
                continue  # e.g. tie_embeddings on an encoder
            out.append(pytest.param(cfg, id=f"{arch}-{name}"))
    return out


CASES = _cases()


def test_every_option_value_is_exercised():
    """Adding a Literal value or a bool option without a parity case fails here."""
    seen = {}
    for case in CASES:
        cfg = case.values[0]
        for f in dataclasses.fields(cfg):
            seen.setdefault(f.name, set()).add(getattr(cfg, f.name))
    hints = typing.get_type_hints(Config)
    for name, hint in hints.items():
        if typing.get_origin(hint) is typing.Literal:
            assert seen[name] == set(typing.get_args(hint)), name
        elif hint is bool:
            assert seen[name] == {True, False}, name
        elif hint == bool | None:
            assert seen[name] == {True, False, None}, name
    cfgs = [c.values[0] for c in CASES]
    assert any(c.head_dim * c.n_heads != c.d_model for c in cfgs)
    for arch in ARCH_BASE:  # each new option, in each arch
        mine = [c for c in cfgs if c.arch == arch]
        assert {c.n_heads // c.kv_heads for c in mine} >= {1, 2, 4}, arch  # MHA, GQA 2, 4
        assert any(c.kv_heads == 1 < c.n_heads for c in mine), arch  # MQA
        assert any(c.d_ff == 0 and c.norm == n for c in mine for n in ("pre", "post")), arch
        assert any(0 < c.rope_dim < c.head_dim for c in mine), arch  # partial rotary
        assert any(c.rope_theta != 10000.0 for c in mine), arch
        assert any(c.has_qkv_bias and not c.bias for c in mine), arch  # Qwen2
        assert any(c.rope_dim and c.kv_heads < c.n_heads for c in mine), arch
    assert any(c.has_decoder and not c.tie_embeddings and not c.lm_bias for c in cfgs)


def _inputs(cfg, rng):
    ids = rng.integers(0, cfg.vocab_size, size=6).tolist()
    src = rng.integers(0, cfg.vocab_size, size=5).tolist()
    return ids, src


def _run_reference(p, cfg, ids, src):
    if cfg.arch == "encoder":
        return R.classify(p, cfg, ids) if cfg.n_classes else R.encoder(p, cfg, ids)
    return R.forward(p, cfg, ids, src_ids=src if cfg.arch == "encoder-decoder" else None)


def _run_torch(model, cfg, ids, src):
    with torch.no_grad():
        out = model(
            torch.tensor([ids]),
            src_ids=torch.tensor([src]) if cfg.arch == "encoder-decoder" else None,
        )
    return out[0].numpy()


@pytest.mark.parametrize("cfg", CASES)
def test_logits_and_every_traced_matrix_agree(cfg):
    rng = np.random.default_rng(0)
    p = weights.init(cfg, seed=1, std=0.4)
    model = from_params(cfg, p)
    ids, src = _inputs(cfg, rng)
    np.testing.assert_allclose(
        _run_torch(model, cfg, ids, src), _run_reference(p, cfg, ids, src), atol=TOL, rtol=0
    )
    with tracing() as ref:
        _run_reference(p, cfg, ids, src)
    with tracing() as tor:
        _run_torch(model, cfg, ids, src)
    shared = [n for n in ref.names() if n in tor]
    # Every matrix except the LayerNorm (RMSNorm) internals the torch norms do not expose.
    missing = [
        n
        for n in ref.names()
        if n not in tor and n.rsplit(".", 1)[-1] not in ("mean", "std", "normalized", "rms")
    ]
    assert not missing, missing[:5]
    assert len(shared) > 20
    for name in shared:
        np.testing.assert_allclose(tor[name], ref[name], atol=TOL, rtol=0, err_msg=name)


@pytest.mark.parametrize("cfg", CASES[::3])
def test_sdpa_path_equals_explicit_path(cfg):
    rng = np.random.default_rng(2)
    p = weights.init(cfg, seed=2, std=0.4)
    ids, src = _inputs(cfg, rng)
    model = from_params(cfg, p)
    fast = _run_torch(model, cfg, ids, src)
    set_explicit(model)
    np.testing.assert_allclose(_run_torch(model, cfg, ids, src), fast, atol=TOL, rtol=0)


def test_state_dict_is_the_spec():
    for case in CASES:
        cfg = case.values[0]
        sd = Transformer(cfg).state_dict()
        assert {n: tuple(t.shape) for n, t in sd.items()} == weights.spec(cfg)
        assert list(sd) == list(weights.spec(cfg))


def test_checkpoints_cross_engines(tmp_path):
    cfg = Config(**(BASE | ARCH_BASE["encoder-decoder"]))
    model = Transformer(cfg).double()
    weights.save(tmp_path / "ck", cfg, to_params(model), dtype="float64")
    cfg2, p, _ = weights.load(tmp_path / "ck")
    ids, src = [1, 2, 3], [4, 5]
    np.testing.assert_allclose(
        R.forward(p, cfg2, ids, src_ids=src), _run_torch(model, cfg, ids, src), atol=TOL
    )
    back = from_params(cfg2, p)
    for (n, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items(), strict=True):
        assert torch.equal(a, b), n


def _pad(seqs, pad=0):
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad] * (T - len(s)) for s in seqs])
    valid = torch.tensor([[True] * len(s) + [False] * (T - len(s)) for s in seqs])
    return ids, valid


@pytest.mark.parametrize(
    "changes",
    [{"norm": "post"}, {"norm": "pre"}, COMBOS["llama-gqa2"], COMBOS["attention-only-post"]],
    ids=["post", "pre", "llama-gqa2", "attention-only"],
)
def test_batched_with_padding_equals_one_at_a_time(changes):
    rng = np.random.default_rng(3)
    lengths = [6, 3, 1, 4]
    seqs = [rng.integers(1, 13, size=n).tolist() for n in lengths]
    srcs = [rng.integers(1, 13, size=n).tolist() for n in (2, 5, 3, 4)]
    for arch in ARCH_BASE:
        cfg = Config(**(BASE | ARCH_BASE[arch] | changes))
        p = weights.init(cfg, seed=4, std=0.4)
        model = from_params(cfg, p)
        ids, valid = _pad(seqs)
        src, src_valid = _pad(srcs)
        with torch.no_grad():
            if arch == "encoder":
                out = model(ids, valid=valid)
            elif arch == "decoder":
                out = model(ids, valid=valid)
            else:
                out = model(ids, valid=valid, src_ids=src, src_valid=src_valid)
        for b, s in enumerate(seqs):
            want = _run_reference(p, cfg, s, srcs[b])
            got = out[b].numpy() if arch == "encoder" else out[b, : len(s)].numpy()
            np.testing.assert_allclose(got, want, atol=TOL, rtol=0, err_msg=f"{arch} row {b}")


@pytest.mark.parametrize("cfg", CASES[::4])
def test_training_path_agrees(cfg):
    """With gradients on, self-attention projects Q, K, V with one fused matmul: same numbers."""
    rng = np.random.default_rng(5)
    p = weights.init(cfg, seed=5, std=0.4)
    model = from_params(cfg, p)
    ids, src = _inputs(cfg, rng)
    with torch.enable_grad():
        out = model(
            torch.tensor([ids]),
            src_ids=torch.tensor([src]) if cfg.arch == "encoder-decoder" else None,
        )
    assert out.requires_grad
    np.testing.assert_allclose(
        out[0].detach().numpy(), _run_reference(p, cfg, ids, src), atol=TOL, rtol=0
    )


def test_token_types_agree():
    """BERT's segment ids: given types select rows of the type table in both engines."""
    cfg = Config(**(BASE | ARCH_BASE["encoder"] | {"type_vocab_size": 3, "embed_norm": True}))
    p = weights.init(cfg, seed=6, std=0.4)
    ids, types = [1, 4, 2, 7, 3], [0, 0, 1, 2, 1]
    model = from_params(cfg, p)
    with torch.no_grad():
        got = model(torch.tensor([ids]), types=torch.tensor([types]))[0].numpy()
    want = R.classify(p, cfg, ids)  # all type 0: must differ
    assert np.abs(got - want).max() > 1e-3
    with tracing() as ref:
        R.encoder(p, cfg, ids, types=types)
    with tracing() as tor:
        model(torch.tensor([ids]), types=torch.tensor([types]))
    for name in ("encoder.types", "encoder.input", "encoder.output"):
        np.testing.assert_allclose(tor[name], ref[name], atol=TOL, rtol=0, err_msg=name)
