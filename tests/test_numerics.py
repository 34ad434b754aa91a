"""Where non-finite numbers are found and how they are named (`glassformer.numerics`), on
examples whose answer is known by construction: a trace tapped by hand, batches with bad rows
placed on purpose, sums that overflow on finite values, and a decoder's window.

The commands' and the server's refusals of non-finite values are tests/test_edges_nonfinite.py;
here each rule of the search is held against the value it must give."""

from __future__ import annotations

import numpy as np
import pytest

from glassformer import numerics, weights
from glassformer.config import Config
from glassformer.numerics import NonFiniteError, all_finite, check, first_nonfinite
from glassformer.trace import tap, tracing

torch = pytest.importorskip("torch")


def _trace(**steps):
    with tracing() as tr:
        for name, x in steps.items():
            tap(name.replace("__", "."), np.asarray(x, dtype=float))
    return tr


def test_the_first_step_holding_nan_or_inf_is_named_with_its_place_and_kind():
    ok = np.ones((2, 3))
    nan, inf = ok.copy(), ok.copy()
    nan[1, 2], inf[0, 1] = np.nan, -np.inf
    assert first_nonfinite(_trace(a=ok, b=nan, c=inf)) == ("b", "NaN at [1, 2]")
    assert first_nonfinite(_trace(a=ok, c=inf, b=nan)) == ("c", "inf at [0, 1]")
    assert first_nonfinite(_trace(a=ok, b=ok)) is None


def test_masked_scores_pass_only_as_minus_infinity():
    """-inf is how a masked score is written (steps named .scaled / .mask): it passes there, and
    only there; a NaN or a +inf in such a step is found."""
    masked = np.array([[0.5, -np.inf], [0.1, 0.2]])
    assert first_nonfinite(_trace(h__scaled=masked, h__mask=masked)) is None
    assert first_nonfinite(_trace(h__scores=masked)) == ("h.scores", "inf at [0, 1]")
    for bad, kind in ((np.nan, "NaN"), (np.inf, "inf")):
        for at in ([0, 0], [1, 1]):  # before the masked -inf, and after it
            x = masked.copy()
            x[tuple(at)] = bad  # the place named is the NaN or +inf, never the masked -inf
            assert first_nonfinite(_trace(h__scaled=masked, g__scaled=x)) == (
                "g.scaled",
                f"{kind} at {at}",
            )


def test_a_finite_batch_whose_sum_overflows_is_finite():
    """all_finite reads one sum first; a sum that overflows on finite values is settled by the
    exact test, never reported as non-finite."""
    big = np.full((2, 4), 1e308)
    assert all_finite(big) and all_finite(torch.tensor([[3e38, 3e38]], dtype=torch.float32))
    check(big, lambda r: pytest.fail("called for a finite batch"), None, None)
    big[1, 3] = np.nan
    assert not all_finite(big)


def test_the_error_names_the_first_input_of_a_reordered_batch():
    """rows: the input each row of the batch is. Rows 0 and 2 hold NaN; row 2 is input 1 and row
    0 input 4: the error is input 1's, described from row 2."""
    x = np.zeros((3, 5))
    x[0, 1] = x[2, 3] = np.nan
    seen = []

    def describe(r):
        seen.append(r)
        return f"row {r}", [1, 2], None

    with pytest.raises(NonFiniteError) as e:
        check(x, describe, None, None, rows=[4, 3, 1])
    assert seen == [2] and e.value.row == 1 and str(e.value).startswith("row 2 are non-finite")
    seen.clear()
    with pytest.raises(NonFiniteError) as e:
        check(x, describe, None, None)
    assert seen == [0] and e.value.row == 0


def test_a_decoding_step_names_the_new_token_and_seeks_the_origin_in_the_window():
    """A step past max_len tokens: the new token counted from the prompt, and the origin sought
    in the last max_len ids (what the decoder read), where the reference engine stays finite."""
    cfg = Config(arch="decoder", vocab_size=11, d_model=8, n_heads=2, d_ff=16,
                 n_decoder_layers=1, max_len=8)  # fmt: skip
    params = weights.init(cfg, seed=0, std=0.3)
    step = numerics.checked(lambda ids: np.full(11, np.nan), params, cfg, prompt_len=9)
    with pytest.raises(NonFiniteError) as e:
        step(list(range(1, 11)) + [3, 4])  # 12 ids: prompt 9, 3 new
    assert str(e.value).startswith(
        "generation stopped at new token 4: the next-token logits are non-finite (NaN or inf); "
        "the float64 reference engine stays finite on this input"
    )
