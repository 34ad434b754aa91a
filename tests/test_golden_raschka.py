"""The self-attention walkthrough reproduces Raschka ch. 3 (golden raschka_01..04)."""

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
