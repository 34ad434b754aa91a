"""Today's decoders' options (Llama, Qwen2, Mistral, SmolLM): rotary positions, RMSNorm, the gated
FFN, grouped-query attention, separate Q/K/V biases, attention-only blocks.

Oracles beyond the parity suite (tests/test_parity.py): RoPE against two independent forms (Meta's
complex-number rotation of interleaved pairs, after the permutation Hugging Face's conversion
applies, and transformers' own apply_rotary_pos_emb, full and GPT-NeoX's partial); RMSNorm
against torch.nn.RMSNorm; whole Llama and Qwen2 models of transformers with random weights; a
grouped model against the full-head model whose K/V heads are copies. Invariants: rotary scores
depend only on the distance between the positions; cache == no cache, batch == single,
beam(1) == greedy; the int8 and inference forms.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import decoding, inference, translating, weights  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer import torch_layers as L  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.glossary import (  # noqa: E402
    INPUT_NO_P,
    RMSNORM_OUT,
    ROTARY_SCORES,
    config_equations,
)
from glassformer.torch_model import (  # noqa: E402
    KVCache,
    MultiHeadAttention,
    Transformer,
    from_params,
    inference_layout,
    set_explicit,
    to_params,
)
from glassformer.torch_steps import many_step_fn, step_fn  # noqa: E402
from glassformer.trace import intervene, tracing  # noqa: E402

TOL = 1e-10
SMALL = dict(vocab_size=19, d_model=16, d_ff=24, max_len=20)
LLAMA = Config(
    **SMALL,
    arch="decoder",
    n_decoder_layers=2,
    n_heads=4,
    n_kv_heads=2,
    head_dim=6,
    positions="rotary",
    norm="pre",
    norm_kind="rmsnorm",
    ffn_kind="gated",
    activation="silu",
    bias=False,
    tie_embeddings=False,
    rope_theta=500.0,
)
QWEN2 = Config(**(LLAMA.to_dict() | dict(qkv_bias=True, n_heads=8, head_dim=4)))
ENCDEC = Config(
    **SMALL,
    arch="encoder-decoder",
    n_encoder_layers=2,
    n_decoder_layers=2,
    n_heads=4,
    n_kv_heads=1,
    head_dim=8,
    positions="rotary",
    rope_fraction=0.5,
    norm="pre",
    norm_kind="rmsnorm",
    ffn_kind="gated",
    activation="gelu",
)
ATTN_ONLY = Config(
    **(SMALL | dict(d_ff=0)),
    arch="decoder",
    n_decoder_layers=2,
    n_heads=2,
    positions="rotary",
    norm="pre",
)
MODELS = {"llama": LLAMA, "qwen2": QWEN2, "encoder-decoder": ENCDEC, "attention-only": ATTN_ONLY}
EACH = pytest.mark.parametrize("cfg", list(MODELS.values()), ids=list(MODELS))


def model_of(cfg: Config, dtype=torch.float64, seed: int = 0):
    params = weights.init(cfg, seed=seed, std=0.4)
    return params, from_params(cfg, params, dtype=dtype).eval()


def src_of(cfg: Config):
    return [3, 4, 5, 6] if cfg.arch == "encoder-decoder" else None


# -- RoPE: two independent formulations and the relative-position property --------------------


def _angles(T: int, r: int, base: float, offset: int = 0):
    return R.rotary_angles(np.arange(offset, offset + T), r, base)


def test_rope_equals_metas_complex_rotation_of_interleaved_pairs():
    """Meta's Llama turns the pairs (x_2i, x_2i+1) as the complex numbers x_2i + i·x_2i+1 times
    e^{i·m·θ_j}; Hugging Face's checkpoints hold Wq, Wk with each head's rows permuted so that
    the pair is (x_i, x_{i+D/2}) instead ("rotate_half"). Through that permutation, they agree."""
    rng = np.random.default_rng(0)
    T, D, base = 7, 8, 10000.0
    x = rng.standard_normal((T, D))  # rows in the rotate_half layout
    meta = np.empty_like(x)
    meta[:, 0::2], meta[:, 1::2] = x[:, : D // 2], x[:, D // 2 :]  # the permutation, undone
    theta = base ** (-np.arange(0, D, 2) / D)  # (D/2,)
    z = (meta[:, 0::2] + 1j * meta[:, 1::2]) * np.exp(1j * np.arange(T)[:, None] * theta)
    back = np.concatenate([z.real, z.imag], axis=1)  # the turned pairs, in rotate_half layout
    np.testing.assert_allclose(R.rotary(x, *_angles(T, D, base)), back, atol=1e-12, rtol=0)


def test_rope_equals_transformers_apply_rotary_pos_emb():
    """transformers' own rotation (Llama's full, GPT-NeoX's partial), given the same float64
    angles, is ours to rounding; its LlamaRotaryEmbedding's float32 frequencies are ours too."""
    pytest.importorskip("transformers")
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama

    rng = np.random.default_rng(1)
    T, D = 6, 8
    q, k = (torch.tensor(rng.standard_normal((1, 2, T, D))) for _ in range(2))  # (B, H, T, D)
    for r, rotate in ((D, llama), (D // 2, neox)):
        cos, sin = _angles(T, r, 10000.0)  # (T, r/2)
        doubled = [torch.tensor(np.concatenate([a, a], axis=1))[None] for a in (cos, sin)]
        want_q, want_k = rotate(q, k, *doubled)  # cos, sin (1, T, r)
        for x, want in ((q, want_q), (k, want_k)):
            got = np.stack([R.rotary(x[0, h].numpy(), cos, sin) for h in range(2)])
            np.testing.assert_allclose(got, want[0].numpy(), atol=1e-12, rtol=0)
            ours = L.rotary(x, *(torch.tensor(a)[None, None] for a in (cos, sin)))
            np.testing.assert_allclose(ours.numpy(), want.numpy(), atol=1e-12, rtol=0)
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    hf = LlamaConfig(
        hidden_size=32,
        num_attention_heads=4,
        rope_parameters=dict(rope_type="default", rope_theta=500.0),
    )
    inv = LlamaRotaryEmbedding(hf).inv_freq.double().numpy()
    cos, _ = R.rotary_angles(np.array([1]), 8, 500.0)  # angle 1·θ_i = θ_i
    np.testing.assert_allclose(np.arccos(cos[0]), inv, rtol=1e-6)


def test_rotary_scores_depend_only_on_the_distance():
    """RoPE's point (Su et al. 2021, eq. 16): ⟨R_m q, R_n k⟩ = ⟨q, R_{n-m} k⟩, a function of
    n - m only; partial rotary too. Shifting every position shifts no score."""
    rng = np.random.default_rng(2)

    def score(q, k, r: int, m: int, n: int) -> float:
        qm = R.rotary(q[None], *_angles(1, r, 100.0, m))[0]
        kn = R.rotary(k[None], *_angles(1, r, 100.0, n))[0]
        return float(qm @ kn)

    for D, r in ((8, 8), (8, 4)):
        q, k = rng.standard_normal(D), rng.standard_normal(D)
        for d in (0, 1, 5):
            here = score(q, k, r, 3, 3 + d)
            assert all(abs(score(q, k, r, m, m + d) - here) < 1e-12 for m in (0, 7, 40))
        assert abs(score(q, k, r, 0, 1) - score(q, k, r, 0, 2)) > 1e-3  # the distance matters
    # the whole attention sublayer: positions shifted by 11 give the same output
    cfg = LLAMA
    p, X = weights.init(cfg, seed=3, std=0.4), rng.standard_normal((5, cfg.d_model))
    name, mask = "decoder.layers.0.self_attn", R.causal_mask(5)
    Z0 = R.multi_head_attention(p, name, X, X, mask, cfg, np.arange(5))
    Z11 = R.multi_head_attention(p, name, X, X, mask, cfg, np.arange(11, 16))
    np.testing.assert_allclose(Z11, Z0, atol=1e-12, rtol=0)


# -- RMSNorm, GQA, gated FFN: each against an independent form ---------------------------------


def test_rms_norm_equals_torch_nn_rmsnorm():
    if not hasattr(torch.nn, "RMSNorm"):
        pytest.skip("torch.nn.RMSNorm needs PyTorch >= 2.4")
    rng = np.random.default_rng(4)
    x, g = rng.standard_normal((5, 16)) * 3, rng.standard_normal(16)
    theirs = torch.nn.RMSNorm(16, eps=1e-5).double()
    ours = L.RMSNorm(16, eps=1e-5).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(g))
        ours.weight.copy_(torch.tensor(g))
        want = theirs(torch.tensor(x)).numpy()
        np.testing.assert_allclose(ours(torch.tensor(x)).numpy(), want, atol=1e-13, rtol=0)
        # in bfloat16 our norm computes in float32 (as Llama does), then rounds once
        low = ours.to(torch.bfloat16)(torch.tensor(x, dtype=torch.bfloat16)).double().numpy()
    np.testing.assert_allclose(R.rms_norm(x, g, 1e-5), want, atol=1e-13, rtol=0)
    assert np.abs(low - want).max() < 0.05 * np.abs(want).max()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_rms_norm_is_llamas_bit_for_bit(dtype):
    """In float16 and bfloat16 our RMSNorm is transformers' LlamaRMSNorm exactly (the squares
    summed in float32, one rounding back): inputs of a few hundred, whose squares overflow
    float16, give the same finite values."""
    transformers = pytest.importorskip("transformers")
    llama_rms_norm = transformers.models.llama.modeling_llama.LlamaRMSNorm
    rng = np.random.default_rng(5)
    x, g = rng.standard_normal((5, 16)) * 300, rng.standard_normal(16)
    theirs, ours = llama_rms_norm(16, eps=1e-5), L.RMSNorm(16, eps=1e-5)
    with torch.no_grad():
        for norm in (theirs, ours):
            norm.weight.copy_(torch.tensor(g))
            norm.to(dtype)
        xt = torch.tensor(x, dtype=dtype)
        got, want = ours(xt), theirs(xt)
    assert got.dtype == dtype and bool(got.isfinite().all()) and torch.equal(got, want)


def _full_heads(cfg: Config, p: dict) -> tuple[Config, dict]:
    """The same model without grouping: every query head gets its own copy of its group's K/V
    head (rows of Wk, Wv repeated head by head, repeat_interleave)."""
    full = Config(**(cfg.to_dict() | {"n_kv_heads": None}))
    G, D = cfg.n_heads // cfg.kv_heads, cfg.head_dim
    out = dict(p)
    for name, x in p.items():
        if name.endswith((".k.weight", ".k.bias", ".v.weight", ".v.bias")):
            heads = x.reshape(cfg.kv_heads, D, *x.shape[1:])
            out[name] = np.repeat(heads, G, axis=0).reshape(cfg.n_heads * D, *x.shape[1:])
    return full, out


@pytest.mark.parametrize("cfg", [LLAMA, QWEN2, ENCDEC], ids=["gqa2", "gqa4", "mqa-encdec"])
def test_grouped_query_attention_is_attention_with_shared_heads(cfg):
    """GQA = multi-head attention whose K/V heads are copies of the group's: both engines."""
    p = weights.init(cfg, seed=5, std=0.4)
    full, pf = _full_heads(cfg, p)
    ids, src = [1, 5, 2, 8, 3], src_of(cfg)
    want = R.forward(pf, full, ids, src_ids=src)
    np.testing.assert_allclose(R.forward(p, cfg, ids, src_ids=src), want, atol=TOL, rtol=0)
    with torch.no_grad():
        got = from_params(cfg, p)(
            torch.tensor([ids]), src_ids=None if src is None else torch.tensor([src])
        )
    np.testing.assert_allclose(got[0].numpy(), want, atol=TOL, rtol=0)


def test_gated_ffn_equals_transformers_llama_mlp():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaMLP

    hf = transformers.LlamaConfig(
        hidden_size=16, intermediate_size=24, num_attention_heads=2, hidden_act="silu"
    )
    mlp = LlamaMLP(hf).double()
    pairs = (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj"))
    p = {f"f.{ours}.weight": getattr(mlp, theirs).weight.detach().numpy() for ours, theirs in pairs}
    x = np.random.default_rng(6).standard_normal((5, 16))
    cfg = Config(d_model=16, d_ff=24, ffn_kind="gated", activation="silu", bias=False)
    want = mlp(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(R.ffn(p, "f", x, cfg), want, atol=1e-12, rtol=0)


# -- whole models of transformers: Llama and Qwen2 with random weights ---------------------------


def _hf_model(cfg: Config):
    transformers = pytest.importorskip("transformers")
    kwargs = dict(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_decoder_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.head_dim,
        hidden_act="silu",
        max_position_embeddings=cfg.max_len,
        rms_norm_eps=cfg.ln_eps,
        tie_word_embeddings=cfg.tie_embeddings,
        rope_parameters=dict(rope_type="default", rope_theta=cfg.rope_theta),
    )
    if cfg.has_qkv_bias:
        make = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kwargs))
    else:
        make = transformers.LlamaForCausalLM(transformers.LlamaConfig(**kwargs))
    torch.manual_seed(7)
    model = make.double().eval()
    with torch.no_grad():
        for _, t in model.named_parameters():  # biases and norm gains too, away from 0 and 1
            t.copy_(torch.randn_like(t) * 0.3 + (1.0 if t.ndim == 1 and t.shape[0] == 16 else 0))
    names = {
        "model.embed_tokens": "decoder.tok_embed",
        "model.norm": "decoder.norm",
        "lm_head": "lm_head",
    }
    for i in range(cfg.n_decoder_layers):
        ours, theirs = f"decoder.layers.{i}", f"model.layers.{i}"
        names |= {
            f"{theirs}.input_layernorm": f"{ours}.norm1",
            f"{theirs}.post_attention_layernorm": f"{ours}.norm2",
        }
        names |= {f"{theirs}.self_attn.{x}_proj": f"{ours}.self_attn.{x}" for x in "qkvo"}
        names |= {
            f"{theirs}.mlp.{a}_proj": f"{ours}.ffn.{b}"
            for a, b in (("gate", "w1"), ("up", "w3"), ("down", "w2"))
        }
    params = {}
    for name, t in model.state_dict().items():
        module, _, kind = name.rpartition(".")
        params[f"{names[module]}.{kind}"] = t.numpy()
    return model, params


@pytest.mark.parametrize("cfg", [LLAMA, QWEN2], ids=["llama", "qwen2"])
def test_equals_transformers_llama_and_qwen2(cfg):
    """Random-weight Llama (GQA, RMSNorm, SwiGLU, untied, rope_theta) and Qwen2 (with Q/K/V
    biases and no W_O bias) of transformers: their tensors copied by name, no permutation, give
    the same logits in both engines (to their float32 rotary angles)."""
    model, params = _hf_model(cfg)
    weights.check(cfg, params)
    ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(want).max() > 1.0
    np.testing.assert_allclose(R.forward(params, cfg, ids), want, atol=1e-5, rtol=0)
    with torch.no_grad():
        got = from_params(cfg, params)(torch.tensor([ids]))[0].numpy()
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


# -- decoding: cache == no cache, batch == single, beam(1) == greedy ----------------------------


@EACH
def test_kv_cache_equals_full_recomputation(cfg):
    """Each new token is turned at its own position: chunks of 3, 1, 2, ... through one cache
    give the full forward's logits; the cache holds the n_kv_heads heads only."""
    _, model = model_of(cfg)
    src = src_of(cfg)
    src_t = None if src is None else torch.tensor([src])
    ids = torch.tensor([[1, 7, 2, 9, 4, 4, 11, 3, 6, 2]])
    with torch.no_grad():
        full = model(ids, src_ids=src_t)
        cache, got, at = KVCache.empty(cfg.n_decoder_layers), [], 0
        for n in (3, 1, 2, 1, 3):
            got.append(model(ids[:, at : at + n], src_ids=src_t, cache=cache))
            at += n
    torch.testing.assert_close(torch.cat(got, dim=1), full, atol=TOL, rtol=0)
    assert cache.self_k[0].shape == (1, cfg.kv_heads, 10, cfg.head_dim)
    if cfg.arch == "encoder-decoder":
        assert cache.cross_k[0].shape == (1, cfg.kv_heads, 4, cfg.head_dim)


@EACH
def test_cached_decoding_equals_uncached_and_beam_1_is_greedy(cfg):
    _, model = model_of(cfg, torch.float32)
    src = src_of(cfg)
    cached, plain = step_fn(model, src, use_cache=True), step_fn(model, src, use_cache=False)
    assert decoding.greedy(cached, [1], 14).ids == decoding.greedy(plain, [1], 14).ids
    assert (
        decoding.sample(cached, [1], 14, seed=3).ids == decoding.sample(plain, [1], 14, seed=3).ids
    )
    b1 = decoding.beam_search(cached, [1], 10, eos_id=2, width=3)
    b2 = decoding.beam_search(plain, [1], 10, eos_id=2, width=3)
    many = decoding.beam_search(cached, [1], 10, 2, 3, step_many=many_step_fn(model, src))
    assert b1.ids == b2.ids == many.ids
    assert (
        decoding.beam_search(cached, [1], 10, 2, width=1).ids
        == decoding.greedy(plain, [1], 10, 2).ids
    )


@EACH
def test_torch_steps_equal_the_reference_engines_steps(cfg):
    """The torch engine's cached greedy is the reference engine's, logit for logit; past max_len
    the sliding window recomputes the positions from 0 in both."""
    params, model = model_of(cfg)
    src = src_of(cfg)
    for window in (False, True):
        n = 30 if window and cfg.arch == "decoder" else 12
        got = decoding.greedy(step_fn(model, src, window=window), [1, 5], n)
        want = decoding.greedy(R.next_token_logits(params, cfg, src, window=window), [1, 5], n)
        assert got.ids == want.ids
        np.testing.assert_allclose(got.chosen_probs, want.chosen_probs, atol=1e-9, rtol=0)


def test_left_padded_batched_prompts_equal_one_at_a_time():
    """greedy_prompts left-pads into one cache: each row's rotary positions count from its own
    first token, so every row continues as it would alone."""
    _, model = model_of(LLAMA)
    prompts = [[1, 5, 2, 9, 3, 3], [4], [7, 8, 2]]
    got = inference.greedy_prompts(model, prompts, 8, pad_id=0)
    for p, row in zip(prompts, got, strict=True):
        assert row == decoding.greedy(step_fn(model, window=True), p, 8).ids[len(p) :]


def test_right_padded_batch_equals_one_at_a_time_in_float64():
    params, model = model_of(ENCDEC)
    seqs, srcs = [[1, 5, 2, 9], [4, 6]], [[3, 4, 5], [6, 7, 8, 9, 10]]
    ids = torch.tensor([s + [0] * (4 - len(s)) for s in seqs])
    src = torch.tensor([s + [0] * (5 - len(s)) for s in srcs])
    with torch.no_grad():
        out = model(ids, valid=ids > 0, src_ids=src, src_valid=src > 0)
    for b, (s, x) in enumerate(zip(seqs, srcs, strict=True)):
        want = R.forward(params, ENCDEC, s, src_ids=x)
        np.testing.assert_allclose(out[b, : len(s)].numpy(), want, atol=TOL, rtol=0)


def test_batched_translation_equals_one_sentence_beam_search():
    _, model = model_of(ENCDEC)
    srcs = [[3, 4, 5], [6, 7], [8, 9, 10, 11, 12]]
    got = translating.beam_batch(model, srcs, 1, 2, 3, 10, 16, 1.0, 0)
    for s, r in zip(srcs, got, strict=True):
        want = decoding.beam_search(step_fn(model, s), [1], 10, 2, 3, 1.0, 16)
        assert r.ids == want.ids
    greedy = translating.greedy_batch(model, srcs, 0, 1, 2, 10)
    assert greedy == [
        [t for t in r.ids[1:] if t != 2]
        for r in translating.beam_batch(model, srcs, 1, 2, 1, 10, None, 1.0, 0)
    ]


# -- the engine's other paths: SDPA, training, gradients, interventions, forms -------------------


@EACH
def test_sdpa_explicit_and_training_paths_agree(cfg, monkeypatch):
    params, model = model_of(cfg)
    src = src_of(cfg)
    ids = torch.tensor([[1, 7, 2, 9, 4, 3]])
    src_t = None if src is None else torch.tensor([src])
    want = R.forward(params, cfg, ids[0].tolist(), src_ids=src)
    with torch.no_grad():
        fast = model(ids, src_ids=src_t)
        monkeypatch.setattr(L, "_SDPA_GQA", False)  # older PyTorch: K/V heads repeated
        repeated = model(ids, src_ids=src_t)
        set_explicit(model)
        explicit = model(ids, src_ids=src_t)
    trained = model(ids, src_ids=src_t)  # gradients on: the fused [Wq; Wk; Wv] matmul
    for got in (fast, repeated, explicit, trained):
        np.testing.assert_allclose(got[0].detach().numpy(), want, atol=TOL, rtol=0)


def test_gradcheck_rotary_grouped_attention_and_gated_block():
    cfg = Config(
        **(
            ENCDEC.to_dict()
            | dict(d_model=8, n_heads=4, n_kv_heads=2, head_dim=4, d_ff=6, rope_fraction=1.0)
        )
    )
    attn = MultiHeadAttention(cfg).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    rope = L.rotary_angles(torch.arange(5)[None], cfg.rope_dim, cfg.rope_theta, torch.float64)
    assert torch.autograd.gradcheck(lambda a: attn(a, a, causal=True, rope=rope)[0], (x,))
    from glassformer.torch_model import Block

    block = Block(cfg, cross=True).double()
    mem = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    f = lambda a, m: block(a, causal=True, memory=m, rope=rope)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x, mem))


def test_interventions_on_the_new_steps_agree_between_engines():
    """Inside `intervene`, a shared K head, a turned query and the gate are computed on in both
    engines alike."""
    params, model = model_of(LLAMA)
    ids = [1, 7, 2, 9, 4]
    fns = {
        "decoder.0.self_attn.kv_head1.K": lambda x: x * 0.0,
        "decoder.1.self_attn.head2.Q_rot": lambda x: -x,
        "decoder.0.ffn.gate": lambda x: x + 1.0,
    }
    with intervene(fns):
        want = R.forward(params, LLAMA, ids)
        with torch.no_grad():
            got = model(torch.tensor([ids]))[0].numpy()
    np.testing.assert_allclose(got, want, atol=TOL, rtol=0)
    assert np.abs(want - R.forward(params, LLAMA, ids)).max() > 1e-3


def test_steps_carry_their_variants_equations():
    params, model = model_of(LLAMA)
    with tracing() as ref:
        R.forward(params, LLAMA, [1, 2, 3])
    with tracing() as tor, torch.no_grad():
        model(torch.tensor([[1, 2, 3]]))
    for trace in (ref, tor):
        assert trace.step("decoder.0.norm1.out").equation == RMSNORM_OUT
        assert trace.step("decoder.norm.out").equation == RMSNORM_OUT
        assert trace.step("decoder.0.ffn.hidden").equation == "SiLU(x·W1) ⊙ (x·W3)"
        assert trace.step("decoder.0.ffn.out").equation == "FFN(x) = (SiLU(x·W1) ⊙ (x·W3))·W2"
        assert "RoPE" in trace.step("decoder.0.self_attn.head0.Q_rot").equation
        assert trace.step("decoder.0.self_attn.kv_head0.K").equation == "K = X·Wk"
        assert trace.step("decoder.0.self_attn.head0.scores").equation == ROTARY_SCORES
        assert trace.step("decoder.input").equation == INPUT_NO_P
    assert "decoder.P" not in ref and "decoder.0.norm1.rms" in ref
    classic = Config(arch="decoder", vocab_size=11, d_model=8, n_heads=2, d_ff=8, max_len=8)
    with tracing() as plain:
        R.forward(weights.init(classic, seed=0), classic, [1, 2, 3])
    assert plain.step("decoder.0.self_attn.head0.scores").equation == "Ω = Q·Kᵀ"
    assert plain.step("decoder.input").equation == "X + P: the first block's input"


@EACH
def test_inference_layout_and_int8(cfg):
    """The fused [Wq; Wk; Wv] of the inference form has the K/V heads' width and keeps the
    outputs; the int8 form runs (W3 quantized too) and stays within a few percent."""
    _, plain = model_of(cfg)
    fast = inference_layout(copy.deepcopy(plain))
    attn = fast.decoder.layers[0].self_attn
    HD, KVD = cfg.attn_dim, cfg.kv_dim
    assert attn.qkv_t.shape == (cfg.d_model, HD + 2 * KVD)
    assert attn.v.weight.data_ptr() == attn.qkv_t.data_ptr() + (HD + KVD) * 8
    ids = torch.tensor([[1, 7, 2, 9, 4]])
    src = src_of(cfg)
    src_t = None if src is None else torch.tensor([src])
    with torch.no_grad():
        torch.testing.assert_close(fast(ids, src_ids=src_t), plain(ids, src_ids=src_t))
    got = decoding.greedy(step_fn(fast, src), [1], 10)
    assert got.ids == decoding.greedy(step_fn(plain, src, use_cache=False), [1], 10).ids
    from glassformer.quantize import Int8Linear, int8

    torch.manual_seed(0)
    fp32 = Transformer(cfg).float().eval()  # GPT-2's init: int8's scales fit such weights
    q = int8(copy.deepcopy(fp32))
    assert not any(isinstance(m, torch.nn.Linear) for m in q.modules())
    if cfg.ffn_kind == "gated":
        assert isinstance(q.decoder.layers[0].ffn.w3, Int8Linear)
    with torch.no_grad():
        a, b = fp32(ids, src_ids=src_t), q(ids, src_ids=src_t)
    assert 0 < float((a - b).norm() / a.norm()) < 0.05
    assert decoding.greedy(step_fn(q, src), [1], 6).ids  # cached int8 decoding runs


def test_checkpoint_round_trip_and_init(tmp_path):
    params, model = model_of(QWEN2)
    weights.save(tmp_path / "m", QWEN2, to_params(model), dtype="float64")
    cfg, back, _ = weights.load(tmp_path / "m")
    assert cfg == QWEN2 and all(np.array_equal(back[n], params[n]) for n in params)
    fresh = weights.init(QWEN2, seed=0)
    assert np.all(fresh["decoder.layers.0.norm1.weight"] == 1.0)
    assert "decoder.layers.0.norm1.bias" not in fresh and "lm_head.bias" not in fresh
    assert fresh["decoder.layers.0.self_attn.k.weight"].shape == (2 * 4, 16)
    assert "decoder.layers.0.self_attn.o.bias" not in fresh
    assert np.all(fresh["decoder.layers.0.self_attn.q.bias"] == 0.0)
    for scheme in ("gpt2", "xavier"):
        shape = (QWEN2.d_ff, QWEN2.d_model)
        w1 = weights.init_rule(QWEN2, "decoder.layers.0.ffn.w1.weight", shape, scheme)
        assert weights.init_rule(QWEN2, "decoder.layers.0.ffn.w3.weight", shape, scheme) == w1
    # the norms of an attention-only block: norm1 (and norm2 after cross-attention), no FFN's
    spec = weights.spec(Config(**(ENCDEC.to_dict() | {"d_ff": 0, "ffn_kind": "plain"})))
    assert "decoder.layers.0.norm2.weight" in spec and "decoder.layers.0.norm3.weight" not in spec
    assert not any(".ffn." in n for n in spec)


@pytest.mark.parametrize(
    "fields, want",
    [  # issue 39, friction 4: the char-LM's cards spoke of embed_scale, sin/cos, biases
        (
            dict(activation="gelu", bias=False, positions="learned", tie_embeddings=True),
            {
                "X": "X = the token embeddings of the input ids",
                "P": "P = the learned row of each position",
                "hidden": "GELU(x·W1)",
                "ffn_out": "FFN(x) = GELU(x·W1)·W2",
                "logits": "logits = h·Eᵀ (the token embedding)",
            },
        ),
        (
            dict(activation="relu", bias=True, embed_scale=True, tie_embeddings=False),
            {
                "X": "X = the token embeddings of the input ids × √C",
                "P": "P = sin on even, cos on odd dimensions of each position",
                "hidden": "ReLU(x·W1 + b1)",
                "ffn_out": "FFN(x) = ReLU(x·W1 + b1)·W2 + b2",
                "logits": "logits = h·W_out + b",
            },
        ),
    ],
)
def test_equations_are_this_models_own_in_both_engines(fields, want):
    """Every equation a step shows says only what this Config has (its activation by name, its
    biases, its scale, its kind of positions and of head), in both engines' traces alike."""
    cfg = Config(arch="decoder", vocab_size=16, d_model=8, n_heads=2, d_ff=16, max_len=8,
                 n_decoder_layers=1, **fields)  # fmt: skip
    assert config_equations(cfg) == want
    params = weights.init(cfg, seed=0)
    model = from_params(cfg, params).eval()
    with tracing() as ref:
        R.forward(params, cfg, [1, 2, 3])
    with tracing() as tor, torch.no_grad():
        model(torch.tensor([[1, 2, 3]]))
    steps = {"X": "decoder.X", "P": "decoder.P", "hidden": "decoder.0.ffn.hidden",
             "ffn_out": "decoder.0.ffn.out", "logits": "logits"}  # fmt: skip
    for trace in (ref, tor):
        assert {k: trace.step(n).equation for k, n in steps.items()} == want
