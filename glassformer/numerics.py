"""Non-finite numbers never pass silently: find where a NaN or an infinity first appears.

`first_nonfinite(trace)` is the first recorded step, in data-flow order, that holds a NaN or an
infinity. `origin(params, cfg, ids, src_ids)` reruns the reference engine (float64) under a trace
to name that step for a model and an input. `check(x, describe, params, cfg)` is the one check
every path that hands numbers to a user makes on them (logits, probabilities, embeddings, a
loss): one isfinite over a whole step or batch, and only after a failure the search for the row
and the step where it started, raised as a `NonFiniteError`. `checked(step, ...)` wraps a
decoding step function in that check, so that the first non-finite next-token logits stop
generation naming the token and the origin, instead of an argmax over NaN that would quietly pick
token 0.

Deliberately not here: clamping or repairing values (a model that overflows is reported, never
patched), and the engines themselves.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from glassformer import reference as R
from glassformer.errors import GlassformerError, param
from glassformer.trace import Trace, tracing


class NonFiniteError(GlassformerError):
    """A forward pass produced NaN or infinite values. row: which input of a batch (its index in
    the list the function was given), or None."""

    def __init__(self, message: str, row: int | None = None):
        super().__init__(message)
        self.row = row

    def at(self, place: str) -> NonFiniteError:
        """The same error with the input's place as the user knows it ("sentence 2") in front."""
        return NonFiniteError(f"{place}: {self.template}", self.row)


# What to do when only a lower precision overflows (the float64 reference engine is exact).
REFERENCE = f"try {param('engine', 'reference')}"

# Where the origin cannot be sought: the caller had no float weights for the reference engine.
NO_WEIGHTS = "(give the float weights, params=, to find where they start)"


def first_nonfinite(trace: Trace) -> tuple[str, str] | None:
    """(step name, what was found, e.g. "inf at [0, 3]") of the first step holding a non-finite
    value, or None when every recorded value is finite."""
    for step in trace.steps:
        v = np.asarray(step.values)
        if v.dtype.kind not in "fc" or np.isfinite(v).all():
            continue
        bad = ~np.isfinite(v)
        if step.name.endswith(".scaled") or step.name.endswith(".mask"):
            bad = np.isnan(v) | np.isposinf(v)  # -inf is how masked scores are written
            if not bad.any():
                continue
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        kind = "NaN" if np.isnan(v[where]) else "inf"
        return step.name, f"{kind} at {list(where)}"
    return None


def origin(
    params: dict,
    cfg,
    ids: list[int],
    src_ids: list[int] | None = None,
    fix: str | None = None,
) -> str:
    """Where the reference engine's forward pass on these ids first goes non-finite, in words.
    fix: what to do when it stays finite (the overflow is in a lower precision than float64)."""
    with np.errstate(all="ignore"), tracing() as trace:
        if cfg.arch == "encoder":
            R.classify(params, cfg, ids) if cfg.n_classes else R.encoder(params, cfg, ids)
        else:
            R.forward(params, cfg, ids, src_ids=src_ids)
    found = first_nonfinite(trace)
    if found is None:
        return (
            "the float64 reference engine stays finite on this input, so the overflow is in a "
            f"lower precision: {fix or REFERENCE}"
        )
    return f"they first appear at {found[0]} ({found[1]}, reference engine)"


def all_finite(x) -> bool:
    """Whether every value of x (a NumPy array or a torch tensor) is finite: one sum, the fast
    path's whole cost (a torch isfinite is 40x slower on the CPU). A NaN or an infinity makes
    the sum non-finite; so, rarely, does a sum of finite values that overflows, which the exact
    test then settles."""
    if isinstance(x, np.ndarray):
        with np.errstate(over="ignore", invalid="ignore"):
            return math.isfinite(x.sum()) or bool(np.isfinite(x).all())
    return math.isfinite(float(x.sum())) or bool(x.isfinite().all())  # a tensor, any device


def nonfinite(what: str, params, cfg, ids, src_ids=None, fix=None, row=None) -> NonFiniteError:
    """The error for `what` (e.g. "the class logits") gone non-finite on this input, naming the
    step where it starts (`origin`; without params, only that it happened)."""
    where = NO_WEIGHTS if params is None else origin(params, cfg, list(ids), src_ids, fix)
    return NonFiniteError(f"{what} are non-finite (NaN or inf); {where}", row)


def check(x, describe: Callable, params, cfg, fix: str | None = None, rows=None) -> None:
    """Nothing when every value of x is finite. Else a NonFiniteError for its first row holding
    a NaN or an infinity.

    x: (B, ...) NumPy array or torch tensor, one row per input of a batch.
    describe(b) -> (what, ids, src_ids): row b's numbers in words ("generation stopped at new
    token 3: the next-token logits") and the input that the reference engine reruns to name the
    step where they start (`origin`); called only after a failure.
    rows: the input each row of x is (the error's `row`), when not 0, 1, 2, ...
    """
    if all_finite(x):
        return
    v = np.asarray(x if isinstance(x, np.ndarray) else x.detach().cpu().double())
    bad = np.flatnonzero(~np.isfinite(v.reshape(len(v), -1)).all(axis=1))
    row = int(bad[0] if rows is None else min(bad, key=lambda r: rows[r]))  # the first input
    what, ids, src_ids = describe(row)
    raise nonfinite(what, params, cfg, ids, src_ids, fix, row if rows is None else rows[row])


def checked(
    step: Callable, params: dict, cfg, prompt_len: int, src_ids=None, fix: str | None = None
) -> Callable:
    """`step` that raises NonFiniteError at the first non-finite logits it returns."""

    def wrapped(ids):
        logits = step(ids)
        describe = lambda _: _stopped(ids, prompt_len, cfg, src_ids)  # noqa: E731
        check(np.asarray(logits)[None], describe, params, cfg, fix)
        return logits

    return wrapped


def checked_many(
    step_many: Callable, params: dict, cfg, prompt_len: int, src_ids=None, fix: str | None = None
) -> Callable:
    """A batched step function (hypotheses -> (n, V) logits, for beam search) that raises
    NonFiniteError at the first non-finite logits it returns."""

    def wrapped(batch):
        logits = step_many(batch)
        check(logits, lambda r: _stopped(batch[r], prompt_len, cfg, src_ids), params, cfg, fix)
        return logits

    return wrapped


def _stopped(ids, prompt_len: int, cfg, src_ids):
    """`check`'s words for a decoding step, and the input the origin is sought in: what the
    model read (a decoder's window of max_len)."""
    n = len(ids) - prompt_len + 1
    what = f"generation stopped at new token {n}: the next-token logits"
    return what, list(ids)[-cfg.max_len :], src_ids
