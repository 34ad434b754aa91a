"""The self-attention walkthrough reproduces Raschka ch. 3 (golden raschka_01..09).

The oracle is the golden copy in tests/golden, never the code under test. Dropout's mask is
platform dependent (raschka_05): the walkthrough shows the book's, checked by its properties,
against the book's printed numbers, and against torch where this machine's torch draws it.
"""

import sys

import numpy as np
import pytest
from conftest import arr, load_golden

from glassformer import walkthrough as W


@pytest.fixture(scope="module")
def trace():
    return W.self_attention()


def close(got, golden: dict, key: str, tol: dict):
    """Check against the full-precision value and, where printed, the 4-decimal value."""
    if f"{key}_full" in golden:
        np.testing.assert_allclose(got, arr(golden[f"{key}_full"]), atol=tol["atol_vs_full"])
    if f"{key}_printed" in golden:
        np.testing.assert_allclose(got, arr(golden[f"{key}_printed"]), atol=tol["atol_vs_printed"])


def test_inputs_and_simple_attention(trace):
    g = load_golden("raschka_01_inputs_simple_attention.json")
    tol, ex = g["tolerance"], g["expected"]
    np.testing.assert_array_equal(trace["inputs"], g["inputs_6x3"])
    close(trace["simple.scores_2"], ex, "attn_scores_2", tol)
    np.testing.assert_allclose(
        trace["simple.weights_2_sum"], ex["attn_weights_2_sum_normalized_printed"], atol=1e-4
    )
    np.testing.assert_allclose(
        trace["simple.weights_2"], ex["attn_weights_2_softmax_printed"], atol=1e-4
    )
    np.testing.assert_allclose(trace["simple.weights_2"], ex["attn_weights_2_full"], atol=1e-6)
    close(trace["simple.context_2"], ex, "context_vec_2", tol)
    np.testing.assert_allclose(trace["simple.scores"], ex["attn_scores_full"], atol=1e-6)
    np.testing.assert_allclose(trace["simple.scores"], ex["attn_scores_6x6_printed"], atol=1e-4)
    np.testing.assert_allclose(trace["simple.A"], ex["attn_weights_full"], atol=1e-6)
    np.testing.assert_allclose(trace["simple.A"], ex["attn_weights_6x6_printed"], atol=1e-4)
    close(trace["simple.C"], ex, "all_context_vecs", tol)


def test_trainable_self_attention_v1(trace):
    g = load_golden("raschka_02_selfattention_v1.json")
    tol, ex = g["tolerance"], g["expected"]
    for k in ("W_query", "W_key", "W_value"):
        np.testing.assert_array_equal(trace[f"trainable.{k}"], g["weights_seed123"][k])
    close(trace["trainable.query_2"], ex, "query_2", tol)
    np.testing.assert_allclose(trace["trainable.keys"], ex["keys_full"], atol=1e-6)
    np.testing.assert_allclose(trace["trainable.values"], ex["values_full"], atol=1e-6)
    assert trace["trainable.keys"].shape == tuple(ex["keys_shape"])
    close(trace["trainable.score_22"], ex, "attn_score_22", tol)
    close(trace["trainable.scores_2"], ex, "attn_scores_2", tol)
    close(trace["trainable.weights_2"], ex, "attn_weights_2", tol)
    close(trace["trainable.context_2"], ex, "context_vec_2", tol)
    np.testing.assert_allclose(trace["all.Q"], ex["queries_full"], atol=1e-6)
    np.testing.assert_allclose(trace["all.scores"], ex["full_attn_scores_6x6"], atol=1e-6)
    np.testing.assert_allclose(trace["all.A"], ex["full_attn_weights_6x6"], atol=1e-6)
    close(trace["all.C"], ex, "SelfAttention_v1_output", tol)


def test_self_attention_v2(trace):
    g = load_golden("raschka_03_selfattention_v2.json")
    for k in ("W_query", "W_key", "W_value"):
        np.testing.assert_array_equal(
            trace[f"v2.{k}"], g["linear_weights_seed789_shape_out_by_in"][k]
        )
    close(trace["v2.C"], g["expected"], "output", g["tolerance"])
    np.testing.assert_allclose(
        trace["v2.C"], g["expected"]["v1_with_transposed_v2_weights_output_full"], atol=1e-6
    )


def test_causal_mask(trace):
    g = load_golden("raschka_04_causal_mask.json")
    tol, ex = g["tolerance"], g["expected"]
    np.testing.assert_allclose(trace["v2.scores"], ex["attn_scores_full"], atol=1e-6)
    close(trace["v2.A"], ex, "attn_weights_unmasked", tol)
    np.testing.assert_array_equal(trace["causal.mask_simple"], ex["mask_simple_tril"])
    np.testing.assert_allclose(
        trace["causal.masked_simple"], ex["masked_simple_printed"], atol=1e-4
    )
    close(trace["causal.masked_simple_norm"], ex, "masked_simple_norm", tol)
    masked = np.where(trace["causal.mask"], trace["causal.scores"], -np.inf)
    np.testing.assert_allclose(masked, arr(ex["masked_scores_full"]), atol=1e-6)
    np.testing.assert_allclose(masked, arr(ex["masked_scores_neg_inf_printed"]), atol=1e-4)
    close(trace["causal.A"], ex, "attn_weights_masked_softmax", tol)
    diff = np.abs(trace["causal.A"] - trace["causal.masked_simple_norm"]).max()
    assert diff <= ex["max_abs_diff_renormalize_vs_neginf_softmax"] + 1e-12


# -- 3.5.2 dropout (raschka_05) -----------------------------------------------------------------


def assert_dropout_properties(trace, p: float = 0.5) -> None:
    """What holds for any mask: m in {0, 1}; dropout(1) = m / (1 - p); dropout(A) keeps A's
    entries × 1/(1 - p) where m = 1 and is 0 elsewhere."""
    g = load_golden("raschka_05_dropout.json")
    assert g["portable_checks"]["values_are_0_or_2_for_ones_input"]
    assert g["portable_checks"]["kept_entries_equal_2x_input"]
    m = trace["dropout.mask"]
    assert set(np.unique(m)) <= {0.0, 1.0}
    np.testing.assert_array_equal(trace["dropout.ones"], m / (1 - p))
    assert set(np.unique(trace["dropout.ones"])) <= {0.0, 2.0}
    np.testing.assert_array_equal(trace["dropout.A"], trace["causal.A"] * m * 2)
    assert trace.step("dropout.mask").shape == trace.step("dropout.A").shape == (6, 6)


def test_dropout_properties(trace):
    assert_dropout_properties(trace)
    assert "the book printed" in trace.step("dropout.mask").note


def test_dropout_is_the_books_with_or_without_torch(monkeypatch):
    """The mask is the one the book printed, so the numbers are the book's, and no torch is
    imported to draw it."""
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    trace = W.self_attention()
    assert_dropout_properties(trace)
    g = load_golden("raschka_05_dropout.json")
    ex, checks = g["expected"], g["portable_checks"]
    np.testing.assert_array_equal(trace["dropout.ones"], arr(ex["ones_6x6_printed_notebook_macOS"]))
    assert int((trace["dropout.mask"] == 0).sum()) == checks["ones_6x6_zeros_count_macOS"]
    np.testing.assert_allclose(
        trace["dropout.A"], ex["attn_weights_printed_notebook_macOS"], rtol=0, atol=1e-4
    )


def test_dropout_with_torch_where_it_draws_the_books_mask(trace):
    """torch itself, float32 as in the book, against the walkthrough's NumPy A ⊙ m / (1 - p),
    where this torch draws the mask the book printed (torch 2.4 on Linux did not)."""
    torch = pytest.importorskip("torch")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        ones = torch.nn.Dropout(0.5)(torch.ones(6, 6)).numpy()
        torch.manual_seed(123)
        A = torch.nn.Dropout(0.5)(torch.tensor(trace["causal.A"], dtype=torch.float32)).numpy()
    if not np.array_equal(trace["dropout.ones"], ones):
        pytest.skip(f"torch {torch.__version__} here draws another mask than the book's")
    np.testing.assert_allclose(trace["dropout.A"], A, rtol=0, atol=1e-6)


# -- 3.5.3 CausalAttention on a batch (raschka_06) ----------------------------------------------


def test_batch_is_the_input_twice(trace):
    x = load_golden("raschka_01_inputs_simple_attention.json")["inputs_6x3"]
    np.testing.assert_array_equal(trace["batch.X"], [x, x])


def test_causal_attention_class(trace):
    g = load_golden("raschka_06_causal_attention_class.json")
    for k in ("W_query", "W_key", "W_value"):
        np.testing.assert_array_equal(
            trace[f"causal_attention.{k}"], g["linear_weights_seed123_shape_out_by_in"][k]
        )
    assert list(trace["causal_attention.C"].shape) == g["expected"]["output_shape"]
    close(trace["causal_attention.C"], g["expected"], "output", g["tolerance"])
    A = trace["causal_attention.A"]
    assert A.shape == (2, 6, 6)
    np.testing.assert_array_equal(np.triu(A, k=1), 0)  # nothing from the future
    np.testing.assert_allclose(A.sum(-1), 1, atol=1e-12)


# -- 3.6.1 MultiHeadAttentionWrapper (raschka_07) -----------------------------------------------


def test_multihead_wrapper(trace):
    g = load_golden("raschka_07_multihead_wrapper.json")
    w = g["head_weights_shape_out_by_in"]
    for k in ("W_query", "W_key", "W_value"):
        np.testing.assert_array_equal(trace[f"causal_attention.{k}"], w["head0"][k])
        np.testing.assert_array_equal(trace[f"wrapper.head1.{k}"], w["head1"][k])
    assert list(trace["wrapper.C"].shape) == g["expected"]["output_shape"]
    close(trace["wrapper.C"], g["expected"], "output", g["tolerance"])
    full, atol = arr(g["expected"]["output_full"]), g["tolerance"]["atol_vs_full"]
    np.testing.assert_allclose(trace["wrapper.head0.C"], full[..., :2], rtol=0, atol=atol)
    np.testing.assert_allclose(trace["wrapper.head1.C"], full[..., 2:], rtol=0, atol=atol)


# -- 3.6.2 the 4-D batched product (raschka_09) and MultiHeadAttention (raschka_08) -------------


def test_batched_matmul(trace):
    g = load_golden("raschka_09_batched_matmul.json")
    np.testing.assert_array_equal(trace["batched_matmul.a"], g["a"])
    assert list(trace["batched_matmul.a"].shape) == g["a_shape"]
    close(trace["batched_matmul.a_aT"], g["expected"], "a_at_a_T", g["tolerance"])
    full, atol = arr(g["expected"]["a_at_a_T_full"]), g["tolerance"]["atol_vs_full"]
    for h in (0, 1):  # the 4-D product equals the per-head products
        np.testing.assert_allclose(trace[f"batched_matmul.head{h}"], full[0, h], rtol=0, atol=atol)


def test_multihead_attention(trace):
    g = load_golden("raschka_08_multihead_attention.json")
    w = g["weights_shape_out_by_in"]
    for k in ("W_query", "W_key", "W_value"):
        np.testing.assert_array_equal(trace[f"mha.{k}"], w[k])
    np.testing.assert_array_equal(trace["mha.out_proj.weight"], w["out_proj_weight"])
    np.testing.assert_array_equal(trace["mha.out_proj.bias"], w["out_proj_bias"])
    B, T, _ = trace["batch.X"].shape
    H, D = g["num_heads"], g["head_dim"]
    for k in ("Q", "K", "V"):
        assert trace[f"mha.{k}_split"].shape == (B, H, T, D)
    assert trace["mha.A"].shape == (B, H, T, T)
    np.testing.assert_array_equal(trace["mha.concat"][..., 0], trace["mha.C_heads"][:, 0, :, 0])
    assert list(trace["mha.out"].shape) == g["expected"]["output_shape"]
    close(trace["mha.out"], g["expected"], "output", g["tolerance"])


def test_reference_engine_attention_gives_the_books_multihead_output():
    """The reference engine's multi_head_attention (the one the models run), fed the book's
    MultiHeadAttention weights (d_in 3, 2 heads of dimension 1, causal), gives the book's output.
    Its weights are far from saturated, so the scale is pinned: dividing by sqrt(d_model) = √3
    instead of sqrt(head dim) = 1 moves the output by ~1e-3 (the tolerance is 1e-6). The book's
    out_proj maps 2 -> 2; glassformer's W_O maps H·D -> d_model (3): W_O gets a third, zero
    row."""
    from glassformer import reference as R
    from glassformer.config import Config
    from glassformer.trace import tracing

    g = load_golden("raschka_08_multihead_attention.json")
    w = {k: np.array(v, dtype=np.float64) for k, v in g["weights_shape_out_by_in"].items()}
    x = np.array(load_golden("raschka_01_inputs_simple_attention.json")["inputs_6x3"], float)
    H, D, d_in, d_out = g["num_heads"], g["head_dim"], g["d_in"], g["d_out"]
    cfg = Config(arch="encoder", vocab_size=2, d_model=d_in, n_heads=H, head_dim=D, d_ff=4,
                 n_encoder_layers=1, n_decoder_layers=0, bias=True)  # fmt: skip
    p = {f"l.{k}.weight": w[f"W_{n}"] for k, n in (("q", "query"), ("k", "key"), ("v", "value"))}
    p |= {f"l.{k}.bias": np.zeros(H * D) for k in "qkv"}  # qkv_bias=False in the book
    p["l.o.weight"] = np.vstack([w["out_proj_weight"], np.zeros((d_in - d_out, d_out))])
    p["l.o.bias"] = np.concatenate([w["out_proj_bias"], np.zeros(d_in - d_out)])
    with tracing() as tr:
        Z = R.multi_head_attention(p, "l", x, x, R.causal_mask(len(x)), cfg)
    tol = g["tolerance"]
    np.testing.assert_allclose(Z[:, :d_out], arr(g["expected"]["output_full"])[0],
                               atol=tol["atol_vs_full"])  # fmt: skip
    np.testing.assert_allclose(Z[:, :d_out], arr(g["expected"]["output_printed"])[0],
                               atol=tol["atol_vs_printed"])  # fmt: skip
    np.testing.assert_array_equal(Z[:, d_out:], 0)
    assert 0.05 < tr["head0.A"][1:].max() < 0.95  # unsaturated: the scale shows in the output


def test_new_steps_are_narrated_with_equations_and_shapes(trace):
    narrated = [s for s in trace.steps if s.note]
    names = [s.name for s in narrated]
    order = [
        *("causal.A", "dropout.mask", "dropout.ones", "dropout.A", "batch.X"),
        *("causal_attention.Q", "causal_attention.scores", "causal_attention.C", "wrapper.C"),
        *("batched_matmul.a_aT", "mha.Q_split", "mha.A", "mha.concat", "mha.out"),
    ]
    assert [names.index(n) for n in order] == sorted(names.index(n) for n in order)
    for s in narrated:
        assert s.equation and s.shape == np.shape(s.values)
        assert "\n" not in s.note  # one line
