"""Invariants of the reference engine: what must hold for any weights."""

import math

import numpy as np
import pytest

from glassformer import reference as R
from glassformer import weights
from glassformer.config import Config
from glassformer.decoding import greedy
from glassformer.trace import intervene, tracing

ARCHS = {
    "decoder": dict(arch="decoder", n_decoder_layers=2),
    "encoder-decoder": dict(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2),
    "encoder": dict(arch="encoder", n_encoder_layers=2, n_classes=3),
}


def small(arch="decoder", **kw) -> Config:
    base = dict(vocab_size=11, d_model=8, n_heads=2, head_dim=3, d_ff=12, max_len=10)
    return Config(**(base | ARCHS[arch] | kw))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_softmax_rows_sum_to_one_and_handle_extremes(rng):
    x = rng.normal(size=(5, 7)) * 50
    s = R.softmax(x)
    np.testing.assert_allclose(s.sum(-1), 1.0, atol=1e-12)
    assert (s >= 0).all()
    big = np.array([[1000.0, 1001.0, 999.0]])
    assert np.isfinite(R.softmax(big)).all()
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(R.softmax(big, naive=True)).all()  # why the stable form exists
    np.testing.assert_allclose(R.softmax(big), R.softmax(big - 1000.0), atol=1e-15)


def test_fully_masked_row_gives_zeros_not_nan():
    scores = np.array([[1.0, 2.0], [-np.inf, -np.inf]])
    np.testing.assert_array_equal(R.softmax(scores)[1], [0.0, 0.0])
    Q = K = V = np.ones((2, 3))
    mask = np.array([[True, True], [False, False]])
    C = R.attention(Q, K, V, mask)
    assert np.isfinite(C).all()
    np.testing.assert_array_equal(C[1], 0.0)


def test_layer_norm_rows_mean_zero_std_one_before_gamma_beta(rng):
    x = rng.normal(3.0, 5.0, size=(4, 16))
    with tracing() as tr:
        y = R.layer_norm(x, gamma=np.full(16, 2.0), beta=np.full(16, 0.5), eps=1e-5)
    xhat = tr["normalized"]
    np.testing.assert_allclose(xhat.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(xhat.std(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(y, 2.0 * xhat + 0.5, atol=1e-12)


def test_activations_match_their_definitions():
    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.5])
    np.testing.assert_array_equal(R.relu(x), [0, 0, 0, 0.7, 2.5])
    phi = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(R.gelu(x), x * phi, atol=1e-15)
    assert np.abs(R.gelu_tanh(x) - R.gelu(x)).max() < 1e-3  # an approximation, not equal
    assert np.abs(R.gelu_tanh(x) - R.gelu(x)).max() > 1e-6


def test_erf_is_math_erf_to_a_few_ulp():
    """The vectorised erf against the C library's, across Cody's three ranges and their edges."""
    edges = [0.0, -0.0, 0.46875, np.nextafter(0.46875, 1), 4.0, np.nextafter(4.0, 5), 5e-324, 1e300]
    x = np.concatenate([np.linspace(-30, 30, 200_001), edges, np.negative(edges)])
    want = np.array([math.erf(v) for v in x])
    got = R.erf(x)
    assert (np.abs(got - want) <= 4 * np.spacing(np.abs(want))).all()
    np.testing.assert_array_equal(R.erf([np.inf, -np.inf]), [1.0, -1.0])
    assert np.isnan(R.erf([np.nan])).all()


def test_causal_mask_is_lower_triangular():
    m = R.causal_mask(4)
    assert m.dtype == bool and m[3, 0] and not m[0, 3]
    np.testing.assert_array_equal(m, np.tril(np.ones((4, 4), bool)))


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_later_tokens_never_change_earlier_outputs(arch, norm, rng):
    cfg = small(arch, norm=norm, positions="learned")
    p = weights.init(cfg, seed=3, std=0.5)
    src = [1, 2, 3]
    ids = list(rng.integers(0, cfg.vocab_size, size=7))
    base = R.forward(p, cfg, ids, src_ids=src if cfg.arch == "encoder-decoder" else None)
    for t in range(1, 7):
        changed = ids[:t] + [(ids[t] + 1) % cfg.vocab_size] + ids[t + 1 :]
        out = R.forward(p, cfg, changed, src_ids=src if cfg.arch == "encoder-decoder" else None)
        np.testing.assert_allclose(out[:t], base[:t], atol=1e-12)
        assert not np.allclose(out[t], base[t])


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_without_positions_is_permutation_equivariant(norm, rng):
    cfg = small("encoder", positions="none", norm=norm, n_classes=0)
    p = weights.init(cfg, seed=5, std=0.5)
    ids = np.array([1, 4, 2, 9, 7])
    perm = rng.permutation(5)
    H = R.encoder(p, cfg, ids)
    np.testing.assert_allclose(R.encoder(p, cfg, ids[perm]), H[perm], atol=1e-12)
    cfg_pos = small("encoder", positions="sinusoidal", norm=norm, n_classes=0)
    Hp = R.encoder(p, cfg_pos, ids)
    assert not np.allclose(R.encoder(p, cfg_pos, ids[perm]), Hp[perm])


def test_padding_mask_hides_padded_keys():
    cfg = small("encoder", n_classes=3)
    p = weights.init(cfg, seed=7, std=0.5)
    ids, pad = [3, 5, 8], 0
    H = R.encoder(p, cfg, ids)
    Hp = R.encoder(p, cfg, ids + [pad, pad], valid=[True] * 3 + [False] * 2)
    np.testing.assert_allclose(Hp[:3], H, atol=1e-12)
    np.testing.assert_allclose(
        R.classify(p, cfg, ids + [pad, pad], valid=[1, 1, 1, 0, 0]),
        R.classify(p, cfg, ids),
        atol=1e-12,
    )


def test_cross_attention_memory_padding():
    cfg = small("encoder-decoder")
    p = weights.init(cfg, seed=8, std=0.5)
    memory = R.encoder(p, cfg, [1, 2, 3])
    padded = R.encoder(p, cfg, [1, 2, 3, 0], valid=[1, 1, 1, 0])
    out = R.decoder(p, cfg, [4, 5], memory)
    out_p = R.decoder(p, cfg, [4, 5], padded, memory_valid=[1, 1, 1, 0])
    np.testing.assert_allclose(out_p, out, atol=1e-12)


def test_tied_embeddings_use_the_embedding_matrix():
    cfg = small("decoder", tie_embeddings=True, bias=False)
    p = weights.init(cfg, seed=2, std=0.5)
    assert "lm_head.weight" not in p
    with tracing() as tr:
        R.forward(p, cfg, [1, 2])
    np.testing.assert_allclose(tr["logits"], tr["decoder.output"] @ p["decoder.tok_embed.weight"].T)


def test_tracing_changes_nothing_and_off_records_nothing():
    cfg = small("encoder-decoder")
    p = weights.init(cfg, seed=9, std=0.5)
    plain = R.forward(p, cfg, [1, 2, 3], src_ids=[4, 5])
    with tracing() as tr:
        traced = R.forward(p, cfg, [1, 2, 3], src_ids=[4, 5])
    np.testing.assert_array_equal(plain, traced)
    assert len(tr) > 100
    names = tr.names()
    assert len(names) == len(set(names)), "every step name is unique within one run"
    for name in (
        "encoder.0.self_attn.head1.A",
        "decoder.1.cross_attn.head0.K",
        "decoder.0.norm3.out",
        "logits",
        "probs",
    ):
        assert name in tr
    assert tr.step("encoder.0.self_attn.head1.A").equation.startswith("A = softmax")
    with tracing() as outer:
        pass
    R.forward(p, cfg, [1], src_ids=[2])
    assert len(outer) == 0


def _stored_bytes(trace) -> int:
    arrays = {id(s.data): s.data for s in trace.steps if s.data is not None}
    return sum(a.nbytes for a in arrays.values())


def test_a_trace_stores_derived_steps_as_recipes_and_shares_masks():
    """`scaled` and `probs` are recomputed from `scores` and `logits` when read, bit for bit what
    the engine computed; the causal mask is stored once for every head and layer."""
    cfg = small("encoder-decoder")
    p = weights.init(cfg, seed=9, std=0.5)
    with tracing() as tr:
        R.forward(p, cfg, [1, 2, 3], src_ids=[4, 5])
    scaled = tr.step("decoder.1.self_attn.head0.scaled")
    assert scaled.data is None and scaled.shape == (3, 3)
    np.testing.assert_array_equal(
        scaled.values, tr["decoder.1.self_attn.head0.scores"] / math.sqrt(cfg.head_dim)
    )
    assert tr.step("probs").data is None
    np.testing.assert_array_equal(tr["probs"], R.softmax(tr["logits"]))
    masks = [s.data for s in tr.steps if s.name.startswith("decoder.") and s.name.endswith("mask")]
    assert len(masks) == 2 * cfg.n_heads and all(m is masks[0] for m in masks)
    assert not masks[0].flags.writeable
    computed = {}  # every head's A as the engine computed it (an intervention sees it)
    with intervene({"*.A": lambda x: computed.setdefault(len(computed), x.copy())}):
        R.forward(p, cfg, [1, 2, 3], src_ids=[4, 5])
    A_steps = [s for s in tr.steps if s.name.endswith(".A")]
    assert len(A_steps) == len(computed) > 2 * cfg.n_heads  # encoder, decoder and cross heads
    for s, want in zip(A_steps, computed.values(), strict=True):
        assert s.data is None  # recomputed from the recorded scaled scores (and mask) when read
        np.testing.assert_array_equal(s.values, want)
    everything = sum(tr[name].nbytes for name in tr.names())  # what reading every step makes
    assert tr.nbytes == _stored_bytes(tr) < everything
    with intervene({"decoder.1.self_attn.head0.scaled": lambda x: x * 2}), tracing() as tr2:
        R.forward(p, cfg, [1, 2, 3], src_ids=[4, 5])
    replaced = tr2.step("decoder.1.self_attn.head0.scaled")
    assert replaced.data is not None  # a replacement is stored, not recomputed
    np.testing.assert_array_equal(replaced.values, 2 * scaled.values)
    seen = []
    with intervene({"probs": lambda x: seen.append(x) or x}) as swap:  # computed when asked for
        R.forward(p, cfg, [1, 2, 3], src_ids=[4, 5])
    assert swap.matched == ["probs"]
    np.testing.assert_array_equal(seen[0], tr["probs"])


def test_a_trace_keeps_the_engines_arrays_read_only_and_equal_to_an_untraced_run():
    """The trace keeps the reference engine's own arrays (no copy) and makes them read-only: a
    write into a recorded step raises instead of changing the record; the run's result is the
    untraced one bit for bit, and every stored float step is read-only."""
    cfg = small("decoder", d_model=16, d_ff=32)
    p = weights.init(cfg, seed=3, std=0.5)
    with tracing() as tr:
        logits = R.forward(p, cfg, [1, 2, 3, 4])
    np.testing.assert_array_equal(logits, R.forward(p, cfg, [1, 2, 3, 4]))
    assert tr.step("logits").data is logits  # kept, not copied
    stored = [s.data for s in tr.steps if s.data is not None]
    assert stored and not any(a.flags.writeable for a in stored)
    with pytest.raises(ValueError, match="read-only"):
        tr["decoder.0.ffn.out"][0, 0] = 1.0


def test_a_float32_trace_holds_half_the_memory():
    cfg = small("decoder", d_model=16, d_ff=32)
    p = weights.init(cfg, seed=3, std=0.5)
    with tracing() as exact:
        R.forward(p, cfg, [1, 2, 3, 4])
    with tracing(dtype=np.float32) as small_trace:
        R.forward(p, cfg, [1, 2, 3, 4])
    assert exact.names() == small_trace.names()
    for name in exact.names():
        want, got = exact[name], small_trace[name]
        assert got.dtype == (bool if want.dtype == bool else np.float32), name
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)
    assert small_trace.nbytes == _stored_bytes(small_trace) < 0.55 * exact.nbytes
    with pytest.raises(ValueError, match="float64 or float32"):
        with tracing(dtype=np.float16):
            pass


def test_head_dim_independent_of_d_model():
    cfg = small("decoder", d_model=4, n_heads=2, head_dim=3)
    p = weights.init(cfg, seed=0)
    assert p["decoder.layers.0.self_attn.q.weight"].shape == (6, 4)
    assert p["decoder.layers.0.self_attn.o.weight"].shape == (4, 6)
    with tracing() as tr:
        R.forward(p, cfg, [1, 2])
    assert tr["decoder.0.self_attn.head1.Q"].shape == (2, 3)
    assert tr["decoder.0.self_attn.concat"].shape == (2, 6)


def test_greedy_appends_argmax_and_stops_at_eos():
    table = {0: 2, 2: 3, 3: 1}  # last token -> next token; 1 is EOS

    def step(ids):
        logits = np.zeros(5)
        logits[table[ids[-1]]] = 5.0
        return logits

    g = greedy(step, [0], max_new_tokens=10, eos_id=1)
    assert g.ids == [0, 2, 3, 1] and g.stopped_at_eos and g.new_ids == [2, 3, 1]
    assert all(p > 0.9 for p in g.chosen_probs)
    g = greedy(step, [0], max_new_tokens=10, eos_id=1, max_len=2)
    assert g.ids == [0, 2] and not g.stopped_at_eos


def test_reference_greedy_equals_manual_argmax_loop():
    cfg = small("encoder-decoder")
    p = weights.init(cfg, seed=4, std=0.5)
    g = greedy(R.next_token_logits(p, cfg, [1, 2, 3]), [0], max_new_tokens=5, eos_id=None)
    ids = [0]
    for _ in range(5):
        ids.append(int(np.argmax(R.forward(p, cfg, ids, src_ids=[1, 2, 3])[-1])))
    assert g.ids == ids


def test_input_length_errors():
    from glassformer.errors import GlassformerError

    cfg = small("decoder")
    p = weights.init(cfg)
    with pytest.raises(GlassformerError, match="empty"):
        R.forward(p, cfg, [])
    with pytest.raises(GlassformerError, match="max_len is 10"):
        R.forward(p, cfg, list(range(11)))
