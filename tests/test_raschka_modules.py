"""The chapter-3 modules of `glassformer.raschka` reproduce the book's numbers (raschka_02..10).

Same seeds, same creation order, so the same float32 weights; outputs are checked against the
full-precision golden values (atol 1e-6) and the printed 4-decimal ones (atol 1e-4). Dropout is
platform dependent (raschka_05), so it is checked by its properties only.
"""

import numpy as np
import pytest
from conftest import arr, load_golden

torch = pytest.importorskip("torch")

from glassformer.errors import ConfigError  # noqa: E402
from glassformer.raschka import (  # noqa: E402
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
    load_v2_into_v1,
)

QKV = ("W_query", "W_key", "W_value")


def inputs() -> torch.Tensor:
    """ "Your journey starts with one step" as the chapter's 6x3 float32 embeddings."""
    return torch.tensor(load_golden("raschka_01_inputs_simple_attention.json")["inputs_6x3"])


def batch() -> torch.Tensor:
    x = inputs()
    return torch.stack((x, x))  # (2, 6, 3)


def close(got: torch.Tensor, g: dict, key: str) -> None:
    """`got` against expected[key + "_full"] and, where present, expected[key + "_printed"]."""
    tol, ex = g["tolerance"], g["expected"]
    got = got.detach().numpy()
    np.testing.assert_allclose(got, arr(ex[f"{key}_full"]), rtol=0, atol=tol["atol_vs_full"])
    if f"{key}_printed" in ex:
        np.testing.assert_allclose(
            got, arr(ex[f"{key}_printed"]), rtol=0, atol=tol["atol_vs_printed"]
        )


def exact(param: torch.Tensor, values) -> None:
    np.testing.assert_array_equal(param.detach().numpy(), np.array(values, dtype=np.float32))


# -- golden numbers ------------------------------------------------------------------------------


def test_self_attention_v1_seed123():
    g = load_golden("raschka_02_selfattention_v1.json")
    torch.manual_seed(123)
    sa = SelfAttention_v1(3, 2)
    for name in QKV:
        exact(getattr(sa, name), g["weights_seed123"][name])
    np.testing.assert_array_equal(inputs().numpy(), np.array(g["inputs_6x3"], dtype=np.float32))
    close(sa(inputs()), g, "SelfAttention_v1_output")


def test_self_attention_v2_seed789_and_exercise_3_1():
    g = load_golden("raschka_03_selfattention_v2.json")
    tol = g["tolerance"]["atol_vs_full"]
    torch.manual_seed(789)
    v2 = SelfAttention_v2(3, 2)
    for name in QKV:
        exact(getattr(v2, name).weight, g["linear_weights_seed789_shape_out_by_in"][name])
    out_v2 = v2(inputs())
    close(out_v2, g, "output")

    v1 = load_v2_into_v1(SelfAttention_v1(3, 2), v2)
    for name in QKV:
        torch.testing.assert_close(getattr(v1, name), getattr(v2, name).weight.T, rtol=0, atol=0)
    out_v1 = v1(inputs()).detach().numpy()
    expected = arr(g["expected"]["v1_with_transposed_v2_weights_output_full"])
    np.testing.assert_allclose(out_v1, expected, rtol=0, atol=tol)
    np.testing.assert_allclose(out_v1, out_v2.detach().numpy(), rtol=0, atol=1e-7)


def test_exercise_3_1_seed123():
    g = load_golden("raschka_10_exercises.json")["ex3_1"]
    torch.manual_seed(123)
    v2 = SelfAttention_v2(3, 2)
    v1 = load_v2_into_v1(SelfAttention_v1(3, 2), v2)
    for out in (v1(inputs()), v2(inputs())):
        out = out.detach().numpy()
        np.testing.assert_allclose(out, arr(g["output_full_recomputed"]), rtol=0, atol=1e-6)
        np.testing.assert_allclose(out, arr(g["output_printed"]), rtol=0, atol=1e-4)


def test_load_v2_into_v1_refuses_a_bias():
    with pytest.raises(ConfigError, match="qkv_bias=False"):
        load_v2_into_v1(SelfAttention_v1(3, 2), SelfAttention_v2(3, 2, qkv_bias=True))


def test_causal_attention_seed123():
    g = load_golden("raschka_06_causal_attention_class.json")
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 6, 0.0)
    for name in QKV:
        exact(getattr(ca, name).weight, g["linear_weights_seed123_shape_out_by_in"][name])
    out = ca(batch())
    assert list(out.shape) == g["expected"]["output_shape"]
    close(out, g, "output")
    assert "mask" in dict(ca.named_buffers()) and "mask" not in dict(ca.named_parameters())


def test_multihead_wrapper_seed123():
    g = load_golden("raschka_07_multihead_wrapper.json")
    torch.manual_seed(123)
    mha = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    for h, head in enumerate(mha.heads):
        for name in QKV:
            exact(getattr(head, name).weight, g["head_weights_shape_out_by_in"][f"head{h}"][name])
    out = mha(batch())
    assert list(out.shape) == g["expected"]["output_shape"]
    close(out, g, "output")


def test_exercise_3_2_one_column_per_head():
    g = load_golden("raschka_10_exercises.json")["ex3_2"]
    torch.manual_seed(123)
    out = MultiHeadAttentionWrapper(3, 1, 6, 0.0, num_heads=2)(batch()).detach().numpy()
    assert out.shape == (2, 6, 2)
    expected = arr(g["output_recomputed_with_current_chapter_code"])
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-6)


def test_multihead_attention_seed123():
    g = load_golden("raschka_08_multihead_attention.json")
    w = g["weights_shape_out_by_in"]
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    assert mha.head_dim == g["head_dim"]
    for name in QKV:
        exact(getattr(mha, name).weight, w[name])
    exact(mha.out_proj.weight, w["out_proj_weight"])
    exact(mha.out_proj.bias, w["out_proj_bias"])
    out = mha(batch())
    assert list(out.shape) == g["expected"]["output_shape"]
    close(out, g, "output")


def test_batched_matmul_example():
    g = load_golden("raschka_09_batched_matmul.json")
    a = torch.tensor(g["a"])
    assert list(a.shape) == g["a_shape"]
    np.testing.assert_allclose(a.numpy(), arr(g["a_printed_literal"]), rtol=0, atol=1e-7)
    close(a @ a.transpose(2, 3), g, "a_at_a_T")
    # the same products, head by head, as MultiHeadAttention's Q @ K.transpose(2, 3) computes them
    per_head = torch.stack([a[0, h] @ a[0, h].T for h in range(a.shape[1])])[None]
    torch.testing.assert_close(a @ a.transpose(2, 3), per_head)


def test_exercise_3_3_gpt2_small_parameter_count():
    g = load_golden("raschka_10_exercises.json")["ex3_3"]
    mha = MultiHeadAttention(768, 768, 1024, 0.0, 12)
    n = sum(p.numel() for p in mha.parameters() if p.requires_grad)
    assert n == g["trainable_param_count"] == 3 * 768 * 768 + 768 * 768 + 768


def test_multihead_attention_rejects_indivisible_heads():
    with pytest.raises(ConfigError, match="divisible by num_heads"):
        MultiHeadAttention(3, 5, 6, 0.0, num_heads=2)


# -- invariants ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: CausalAttention(8, 4, 10, 0.0),
        lambda: MultiHeadAttentionWrapper(8, 4, 10, 0.0, num_heads=2),
        lambda: MultiHeadAttention(8, 8, 10, 0.0, num_heads=4),
    ],
    ids=["CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention"],
)
def test_causality_later_tokens_never_change_earlier_outputs(make):
    torch.manual_seed(0)
    module = make().eval()
    x = torch.randn(3, 10, 8)
    base = module(x)
    for t in range(10):
        y = x.clone()
        y[:, t:] = torch.randn(3, 10 - t, 8) * 5
        out = module(y)
        torch.testing.assert_close(out[:, :t], base[:, :t], rtol=0, atol=0)
        if t < 9:
            assert not torch.allclose(out[:, t:], base[:, t:])


def test_shorter_input_than_context_length():
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 6, 0.0)
    full = ca(batch())
    torch.testing.assert_close(ca(batch()[:, :4]), full[:, :4], rtol=0, atol=0)


# -- dropout, by properties (masks are platform dependent: raschka_05) ---------------------------


def test_dropout_on_ones_keeps_twos():
    g = load_golden("raschka_05_dropout.json")
    assert g["portable_checks"]["values_are_0_or_2_for_ones_input"]
    torch.manual_seed(123)
    out = torch.nn.Dropout(0.5).train()(torch.ones(6, 6))
    assert set(out.unique().tolist()) <= {0.0, 2.0}


def weights_seen_by_dropout(module: torch.nn.Module, x: torch.Tensor):
    """(A before dropout, A after dropout), observed by a forward hook on `module.dropout`."""
    seen = {}

    def hook(_mod, args, output):
        seen["before"], seen["after"] = args[0].detach(), output.detach()

    handle = module.dropout.register_forward_hook(hook)
    try:
        module(x)
    finally:
        handle.remove()
    return seen["before"], seen["after"]


@pytest.mark.parametrize(
    "cls, extra", [(CausalAttention, {}), (MultiHeadAttention, {"num_heads": 2})]
)
def test_attention_dropout_scales_kept_weights_by_two(cls, extra):
    torch.manual_seed(123)
    module = cls(3, 2, 6, 0.5, **extra)
    x = batch()

    module.eval()
    A_eval, A_eval_after = weights_seen_by_dropout(module, x)
    torch.testing.assert_close(A_eval_after, A_eval, rtol=0, atol=0)

    module.train()
    zeros = total = 0
    for _ in range(200):
        A_before, A_after = weights_seen_by_dropout(module, x)
        torch.testing.assert_close(A_before, A_eval, rtol=0, atol=0)
        kept = A_after != 0
        torch.testing.assert_close(A_after[kept], 2 * A_eval[kept], rtol=0, atol=0)
        allowed = A_eval != 0  # dropout only acts on the weights the causal mask lets through
        zeros += int((~kept & allowed).sum())
        total += int(allowed.sum())
    assert 0.45 < zeros / total < 0.55


@pytest.mark.parametrize(
    "cls, extra",
    [
        (CausalAttention, {}),
        (MultiHeadAttentionWrapper, {"num_heads": 2}),
        (MultiHeadAttention, {"num_heads": 2}),
    ],
)
def test_eval_mode_equals_no_dropout(cls, extra):
    torch.manual_seed(123)
    with_dropout = cls(3, 2, 6, 0.5, **extra).eval()
    torch.manual_seed(123)
    without = cls(3, 2, 6, 0.0, **extra)
    torch.testing.assert_close(with_dropout(batch()), without(batch()), rtol=0, atol=0)


def test_train_mode_dropout_changes_the_output():
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 6, 0.5).train()
    outs = [ca(batch()) for _ in range(5)]
    assert any(not torch.equal(outs[0], o) for o in outs[1:])


# -- the walkthrough's shipped data --------------------------------------------------------------


def test_shipped_chapter_data_is_what_torch_draws():
    """glassformer/data/raschka_ch03.json (the walkthrough's weights, no torch needed at run time)
    is exactly what tests/make_raschka_ch03_data.py draws with torch, seed by seed."""
    import make_raschka_ch03_data as make

    assert make.OUT.read_text(encoding="utf-8") == make.text()
