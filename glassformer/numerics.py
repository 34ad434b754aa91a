"""Non-finite numbers never pass silently: find where a NaN or an infinity first appears.

`first_nonfinite(trace)` is the first recorded step, in data-flow order, that holds a NaN or an
infinity. `origin(params, cfg, ids, src_ids)` reruns the reference engine (float64) under a trace
to name that step for a model and an input. `checked(step, ...)` wraps a decoding step function so
that the first non-finite next-token logits stop generation with a `NonFiniteError` naming the
token and the origin, instead of an argmax over NaN that would quietly pick token 0.

Deliberately not here: clamping or repairing values (a model that overflows is reported, never
patched), and the engines themselves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from glassformer import reference as R
from glassformer.errors import GlassformerError
from glassformer.trace import Trace, tracing


class NonFiniteError(GlassformerError):
    """A forward pass produced NaN or infinite values."""


def first_nonfinite(trace: Trace) -> tuple[str, str] | None:
    """(step name, what was found, e.g. "inf at [0, 3]") of the first step holding a non-finite
    value, or None when every recorded value is finite."""
    for step in trace.steps:
        v = np.asarray(step.values)
        if v.dtype.kind not in "fc" or np.isfinite(v).all():
            continue
        if step.name.endswith(".scaled") or step.name.endswith(".mask"):
            if not np.isnan(v).any() and not np.isposinf(v).any():
                continue  # -inf is how masked scores are written
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(v))[0])
        kind = "NaN" if np.isnan(v[where]) else "inf"
        return step.name, f"{kind} at {list(where)}"
    return None


def origin(params: dict, cfg, ids: list[int], src_ids: list[int] | None = None) -> str:
    """Where the reference engine's forward pass on these ids first goes non-finite, in words."""
    with np.errstate(all="ignore"), tracing() as trace:
        if cfg.arch == "encoder":
            R.classify(params, cfg, ids) if cfg.n_classes else R.encode(params, cfg, ids)
        else:
            R.forward(params, cfg, ids, src_ids=src_ids)
    found = first_nonfinite(trace)
    if found is None:
        return (
            "the float64 reference engine stays finite on this input, so the overflow is in a "
            "lower precision: try --engine reference"
        )
    return f"they first appear at {found[0]} ({found[1]}, reference engine)"


def checked(step: Callable, params: dict, cfg, prompt_len: int, src_ids=None) -> Callable:
    """`step` that raises NonFiniteError at the first non-finite logits it returns."""

    def wrapped(ids):
        logits = step(ids)
        if not np.all(np.isfinite(logits)):
            n = len(ids) - prompt_len + 1  # the origin is sought in what the model read (window)
            raise NonFiniteError(
                f"generation stopped at new token {n}: the next-token logits are non-finite "
                f"(NaN or inf); {origin(params, cfg, list(ids)[-cfg.max_len :], src_ids)}"
            )
        return logits

    return wrapped
