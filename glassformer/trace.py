"""The trace: every intermediate of a run, recorded under a stable name.

`tap(name, x)` returns `x` unchanged and records nothing unless a trace is active; inside
`with tracing() as tr:` it records a copy of `x` under the current `scope` prefix, so the math
never changes to be seen (like flax's `sow`). Names look like `encoder.0.self_attn.head1.A`.

This module only records. A step that does not bring its own equation gets its name's entry in
`glossary` (data only). Rendering, the Jupyter HTML view included, lives in `explain`, which
installs `Trace._repr_html_`; this module imports nothing from it.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

from glassformer.glossary import equation_for

_ACTIVE: ContextVar[Trace | None] = ContextVar("glassformer_trace", default=None)
_PREFIX: ContextVar[tuple[str, ...]] = ContextVar("glassformer_prefix", default=())


@dataclass
class Step:
    """One recorded intermediate."""

    name: str
    values: np.ndarray
    equation: str = ""
    note: str = ""
    rows: list[str] | None = None
    cols: list[str] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "equation": self.equation,
            "shape": list(self.shape),
            "values": _jsonable(self.values),
            "note": self.note,
            "rows": self.rows,
            "cols": self.cols,
        }


@dataclass
class Trace:
    """The ordered steps of one run; `labels` names the tokens of each stack for display."""

    steps: list[Step] = field(default_factory=list)
    labels: dict[str, list[str]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.step(name).values

    def __contains__(self, name: str) -> bool:
        return any(s.name == name for s in self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step named {name!r} in this trace")

    def annotate(self, name: str, note: str) -> None:
        """Attach a narration to a recorded step (for steps the engine recorded)."""
        self.step(name).note = note

    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def axis_labels(self, step: Step) -> tuple[list[str] | None, list[str] | None]:
        """Token names for a step's rows and columns: its own, or those of its stack's tokens.

        A decoder's labels may be longer than a step's rows: its earlier generation steps see a
        prefix of the final sequence.
        """
        if step.rows is not None or step.cols is not None:
            return step.rows, step.cols
        shape = step.shape
        stack = next((s for s in step.name.split(".") if s in self.labels), None)
        last = step.name.rsplit(".", 1)[-1]
        if ".cross_attn." in step.name and last in ("K", "V"):
            stack = "encoder"  # cross-attention keys and values are the encoder's tokens
        if stack is None or stack not in self.labels or not shape:
            return None, None
        n = len(self.labels[stack])
        if shape[0] != n and not (stack == "decoder" and shape[0] < n):
            return None, None
        rows = list(self.labels[stack][: shape[0]])
        cols = None
        if len(shape) == 2 and last in ("scores", "scaled", "A", "mask"):
            source = self.labels.get("encoder") if ".cross_attn." in step.name else rows
            cols = list(source[: shape[1]]) if source and shape[1] <= len(source) else None
        return rows, cols

    def to_dict(self) -> dict:
        steps = []
        for s in self.steps:
            d = s.to_dict()
            d["rows"], d["cols"] = self.axis_labels(s)
            steps.append(d)
        return {"labels": self.labels, "steps": steps}


def tap(name: str, x, equation: str = "", note: str = "", rows=None, cols=None):
    """Record `x` under the current scope if a trace is active; always return `x` unchanged."""
    trace = _ACTIVE.get()
    if trace is None:
        return x
    full = ".".join((*_PREFIX.get(), name))
    arr = np.asarray(x)
    values = np.array(arr, dtype=bool if arr.dtype == bool else float, copy=True)
    if not equation:
        equation = equation_for(full)
    trace.steps.append(Step(full, values, equation, note, rows, cols))
    return x


@contextlib.contextmanager
def scope(prefix: str):
    """Prefix every name tapped inside with `prefix.`."""
    token = _PREFIX.set((*_PREFIX.get(), prefix))
    try:
        yield
    finally:
        _PREFIX.reset(token)


@contextlib.contextmanager
def tracing(labels: dict[str, list[str]] | None = None):
    """Record every `tap` in this block into the yielded `Trace`."""
    trace = Trace(labels=dict(labels or {}))
    token, ptoken = _ACTIVE.set(trace), _PREFIX.set(())
    try:
        yield trace
    finally:
        _ACTIVE.reset(token)
        _PREFIX.reset(ptoken)


def current() -> Trace | None:
    """The trace being recorded, or None."""
    return _ACTIVE.get()


def _jsonable(values: np.ndarray):
    """Nested lists with NaN/inf written as strings, so the JSON stays strict."""
    if values.dtype == bool:
        return values.tolist()

    def conv(v):
        if isinstance(v, list):
            return [conv(x) for x in v]
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        return float(v)

    return conv(values.tolist())
