"""The trace: every intermediate of a run, recorded under a stable name; and interventions.

`tap(name, x)` returns `x` unchanged and records nothing unless a trace is active; inside
`with tracing() as tr:` it records `x` under the current `scope` prefix, read-only (the reference
engine's own new arrays are kept and made read-only, anything else is copied), so the math never
changes to be seen (like flax's `sow`). Names look like `encoder.0.self_attn.head1.A`.

What a trace holds: float values as float64 (exact, the default) or float32 (`tracing(dtype=
np.float32)`, half the memory, for a server that keeps many traces); one shared copy of a bool
mask that every head taps; and nothing at all for a step tapped with `derive=` (a cheap exact
function of an earlier step, such as the scaled scores or the output probabilities), which is
recomputed when read. `tracing(keep=...)` records only the steps a caller needs now (a view:
the attention maps and the logits) and every other step by name, equation and shape; such a
`Deferred` step's values come, when first read, from the trace's `fill`: a function that makes
the full trace of the same run (the explorer runs the same engine again, tracing everything).

The one sanctioned way the trace changes the math is an explicit intervention: inside
`with intervene({"decoder.1.self_attn.head0.C": fn}):` a tap whose full name matches a key
(an exact name or an `fnmatch` glob such as `decoder.*.ffn.out`) returns `fn(x)` instead of `x`,
and both engines compute on with the returned value (every tap site is `y = tap(name, y)`). The
contract is one for both engines: `fn` receives what that engine taps, a float64 NumPy array of
one sequence in the reference engine (`(T, D)` for a head's C) and the batched tensor in the
PyTorch engine (`(B, T, D)`, on its device, in its dtype, gradients flowing through `fn`), and
returns a value of the same shape and kind. The PyTorch engine leaves its SDPA fast path while
an intervention is active, as it does while tracing. A recorded trace shows the replaced values.
Several keys matching one name apply in the order given; nested blocks compose, the outer first.
Ready-made interventions (ablations, patching) live in `glassformer.inspect.interventions`; this
module only applies them. An intervention that reads positions (steering from a generation step
on) asks `first_position()` and `prompt_length()` where the rows it sees sit: the PyTorch engine's
KV cache computes only the new rows and says where they start (`positions`).

This module only records and replaces. A step that does not bring its own equation gets its name's
entry in `glossary` (data only). Rendering, the Jupyter HTML view included, lives in `explain`,
which installs `Trace._repr_html_`; this module imports nothing from it.
"""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

from glassformer.errors import InputError, TraceError
from glassformer.glossary import equation_for

_ACTIVE: ContextVar[Trace | None] = ContextVar("glassformer_trace", default=None)
_PREFIX: ContextVar[tuple[str, ...]] = ContextVar("glassformer_prefix", default=())
_INTERVENTION: ContextVar[Intervention | None] = ContextVar(
    "glassformer_intervention", default=None
)
# Where the rows a stack computes now sit in their sequence (`positions`): the first row's
# position (a KV cache's length) and the prompt a decoding started from (None: not said).
_START: ContextVar[int] = ContextVar("glassformer_start", default=0)
_PROMPT: ContextVar[int | None] = ContextVar("glassformer_prompt", default=None)


@dataclass(frozen=True)
class Derivation:
    """How a step that stores nothing is recomputed: `fn(source.values)`, as `dtype`."""

    source: Step
    fn: Callable[[np.ndarray], np.ndarray]
    shape: tuple[int, ...]
    dtype: type


@dataclass(frozen=True, eq=False)
class Deferred:
    """A step recorded by name and shape only (its trace's `keep` did not keep it): its values
    are read from the full trace that the trace's `fill` makes, once, when one is first read."""

    shape: tuple[int, ...]
    trace: Trace


@dataclass(eq=False)
class Step:
    """One recorded intermediate: `values` is the stored copy, or, for a step recorded with
    `tap(..., derive=...)`, recomputed from its source step at each read (nothing stored)."""

    name: str
    data: np.ndarray | None
    equation: str = ""
    note: str = ""
    rows: list[str] | None = None
    cols: list[str] | None = None
    derived: Derivation | Deferred | None = field(default=None, repr=False)

    @property
    def values(self) -> np.ndarray:
        if self.derived is None:
            return self.data
        d = self.derived
        if isinstance(d, Deferred):
            return d.trace.filled(self)
        return np.asarray(d.fn(d.source.values), dtype=d.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.derived.shape if self.derived is not None else tuple(self.data.shape)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "equation": self.equation,
            "shape": list(self.shape),
            "values": jsonable(self.values),
            "note": self.note,
            "rows": self.rows,
            "cols": self.cols,
        }


@dataclass(repr=False)
class Trace(Mapping):
    """The ordered steps of one run; `labels` names the tokens of each stack for display.

    A read-only mapping of step names to values, as a dict: `trace[name]` is the step's array,
    `trace["decoder.0.*.A"]` (a glob: *, ? or [...]) a dict {name: array} of every step it
    matches in order; `keys()`, `values()`, `items()`, `in`, `len` and iteration go over the
    distinct names in the order first recorded (`steps` holds every recorded `Step`, a name
    recorded twice included; `trace[name]` is its first). `model` and `text`, when the run
    set them, say in the repr what made it."""

    steps: list[Step] = field(default_factory=list)
    labels: dict[str, list[str]] = field(default_factory=dict)
    dtype: type = np.float64  # how recorded float values are stored
    model: str | None = None  # the name of the model that made it (for the repr)
    text: str | None = None  # the text it read (for the repr)
    _first: dict[str, Step] = field(default_factory=dict, repr=False)
    _indexed: int = field(default=0, repr=False)
    _last: dict[str, Step] = field(default_factory=dict, repr=False)  # name -> latest step
    _last_mask: np.ndarray | None = field(default=None, repr=False)
    keep: Callable[[str], bool] | None = field(default=None, repr=False)  # None: keep all
    fill: Callable[[], Trace] | None = field(default=None, repr=False)  # makes the full trace
    _full: Trace | None = field(default=None, repr=False)
    _filling: threading.Lock = field(default_factory=threading.Lock, repr=False)
    memo: dict = field(default_factory=dict, repr=False)  # readers' facts of its names (`of`)

    def of(self, key: str, make: Callable[[], object]):
        """`make()`, made once per key while the trace holds the same steps: what readers derive
        from the step names alone (the K/V groups), asked for by many of them on one trace."""
        k = (key, len(self.steps))
        if k not in self.memo:
            self.memo[k] = make()
        return self.memo[k]

    def __getitem__(self, name: str) -> np.ndarray | dict[str, np.ndarray]:
        """A step's values by its name; a glob gives {name: values} of the steps it matches."""
        index = self._index()
        s = index.get(name) if isinstance(name, str) else None
        if s is not None:
            return s.values
        if isinstance(name, str) and any(c in name for c in "*?["):
            found = {n: t.values for n, t in index.items() if fnmatch.fnmatchcase(n, name)}
            if not found:
                raise TraceError(f"no step name matches {name!r} in this trace; see tr.names()")
            return found
        return self.step(name).values  # the refusal, with the nearest names

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._index()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._index()))

    def __len__(self) -> int:
        return len(self._index())

    def __repr__(self) -> str:
        """A few lines: what made it, how many steps and bytes, its tokens, a few names."""
        made = f" of {clip(self.model, 80)}" if self.model else ""
        made += f" on {clip(repr(self.text), 80)}" if self.text is not None else ""
        lines = [f"<glassformer.Trace{made}: {len(self)} steps, {byte_size(self.nbytes)}"]
        for stack, pieces in list(self.labels.items())[:3]:
            shown = clip(" ".join(map(repr, pieces)), 100)
            lines.append(f"  {stack}: {len(pieces)} tokens: {shown}")
        return "\n".join([*lines, f"  {few_names(list(self))}>"])

    def _index(self) -> dict[str, Step]:
        """{name: its first step}, kept up to date as steps are appended."""
        if self._indexed > len(self.steps):  # the list was replaced: index it again
            self._first, self._indexed = {}, 0
        for s in self.steps[self._indexed :]:
            self._first.setdefault(s.name, s)
        self._indexed = len(self.steps)
        return self._first

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        self._last[step.name] = step

    def _store(self, arr: np.ndarray) -> np.ndarray:
        """A tapped array in the trace's dtype (bool stays bool), read-only. An array of that
        dtype that owns its memory (what the reference engine's steps return) is kept itself and
        made read-only, so a later in-place write into it raises instead of changing the record;
        anything else (a view, the PyTorch engine's tensors, another dtype) is copied. A bool
        mask equal to the last one recorded is shared: every head of a layer taps the same mask."""
        if arr.dtype != bool:
            if arr.dtype == self.dtype and arr.flags.owndata and arr.flags.writeable:
                arr.flags.writeable = False
                return arr
            out = np.array(arr, dtype=self.dtype, copy=True)
            out.flags.writeable = False
            return out
        last = self._last_mask
        if last is not None and last.shape == arr.shape and np.array_equal(last, arr):
            return last
        self._last_mask = np.array(arr, copy=True)
        self._last_mask.flags.writeable = False
        return self._last_mask

    def filled(self, step: Step) -> np.ndarray:
        """A deferred step's values, from the full trace (made by `fill` at the first read)."""
        with self._filling:
            if self._full is None:
                if self.fill is None:
                    raise TraceError(
                        f"{step.name} was recorded by name only (tracing(keep=...)) and this "
                        "trace has no fill to compute it: trace again without keep"
                    )
                self._full = self.fill()
        full = self._full._index().get(step.name)
        if full is None or full.shape != step.shape:
            found = "no such step" if full is None else f"shape {full.shape}"
            raise TraceError(
                f"the full trace does not match this one at {step.name} ({found}, here "
                f"{step.shape}): fill must run the same engine on the same input"
            )
        v = full.values
        return v if v.dtype == bool or v.dtype == self.dtype else v.astype(self.dtype)

    @property
    def full(self) -> Trace | None:
        """The full trace, once a deferred step's read made it (else None)."""
        return self._full

    def step(self, name: str) -> Step:
        s = self._index().get(name)
        if s is None:
            names = list(self._index())
            close = [n for n in names if n.lower() == str(name).lower()]  # head0.a -> head0.A
            close += difflib.get_close_matches(str(name), names, n=3 - len(close), cutoff=0.6)
            hint = f"did you mean {', '.join(map(repr, close))}?" if close else "see tr.names()"
            raise TraceError(f"no step named {name!r} in this trace; {hint}")
        return s

    def annotate(self, name: str, note: str) -> None:
        """Attach a narration to a recorded step (for steps the engine recorded)."""
        self.step(name).note = note

    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    @property
    def nbytes(self) -> int:
        """Bytes of the values this trace holds: each stored array once (the shared mask too),
        nothing for a derived step (it is recomputed when read, and not to count it), and the
        full trace that filled its deferred steps, once made."""
        stored = {id(s.data): s.data for s in self.steps if s.data is not None}
        own = sum(a.nbytes for a in stored.values())
        return own + (self._full.nbytes if self._full is not None else 0)

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


def tap(
    name: str,
    x,
    equation: str = "",
    note: str = "",
    rows=None,
    cols=None,
    record=None,
    derive: tuple[str, Callable] | None = None,
):
    """Record `x` under the current scope if a trace is active, and return it: unchanged, or
    replaced by the matching functions of an active `intervene` (then the replacement is what is
    recorded). `record(x)` gives the array to record (default: `x` itself; the PyTorch engine
    passes one that takes the first sequence of its batch).

    `derive=(source, fn)` says that `x` is `fn` of the step `source` just recorded in this scope,
    computed exactly so (the reference engine's `scaled = scores / √D`): the trace then stores no
    copy and recomputes `fn(source)` whenever the step is read, unless an intervention replaced
    this step (then its replacement is stored). With `derive`, `x` may be a function of no
    arguments that computes the value, called only when something needs it (a step that nothing
    computes on, such as the output probabilities; `fn` then keeps the source's shape)."""
    trace, swap = _ACTIVE.get(), _INTERVENTION.get()
    if trace is None and swap is None:
        return x
    full = ".".join((*_PREFIX.get(), name))
    replaced = swap is not None and swap.touches(full)
    source = None
    if trace is not None and derive is not None and not replaced:
        source = trace._last.get(".".join((*_PREFIX.get(), derive[0])))
    if source is not None:  # recorded as a recipe: x need not exist
        if not equation:
            equation = equation_for(full)
        shape = source.shape if callable(x) else tuple(np.shape(x))
        how = Derivation(source, derive[1], shape, trace.dtype)
        trace._record(Step(full, None, equation, note, rows, cols, how))
        return x
    if derive is not None and callable(x):
        x = x()
    if swap is not None:
        x = swap.apply(full, x)
    if trace is None:
        return x
    if not equation:
        equation = equation_for(full)
    if trace.keep is not None and not trace.keep(full):  # by name and shape: filled when read
        v = x if record is None else record(x)
        shape = tuple(v.shape) if hasattr(v, "shape") else np.shape(v)
        trace._record(Step(full, None, equation, note, rows, cols, Deferred(shape, trace)))
        return x
    values = trace._store(np.asarray(x if record is None else record(x)))
    trace._record(Step(full, values, equation, note, rows, cols))
    return x


class Intervention:
    """The replacements of one `intervene` block: {name or glob: fn}. `matched` lists the full
    names that were replaced (in order, once each), so a caller can tell a key that matched
    nothing (`unmatched()`), e.g. a LayerNorm internal the PyTorch engine does not tap."""

    def __init__(self, fns: Mapping[str, Callable], outer: Intervention | None = None):
        self.fns = dict(fns)
        self.outer = outer
        self.matched: list[str] = []
        self._cache: dict[str, list[Callable]] = {}

    def _matching(self, name: str) -> list[Callable]:
        fns = self._cache.get(name)
        if fns is None:
            fns = self._cache[name] = [
                f for key, f in self.fns.items() if key == name or fnmatch.fnmatchcase(name, key)
            ]
        return fns

    def apply(self, name: str, x):
        if self.outer is not None:
            x = self.outer.apply(name, x)
        fns = self._matching(name)
        if fns and name not in self.matched:
            self.matched.append(name)
        for f in fns:
            x = f(x)
        return x

    def touches(self, name: str) -> bool:
        """Whether this block (or an outer one) replaces the step `name`."""
        return bool(self._matching(name)) or (self.outer is not None and self.outer.touches(name))

    def unmatched(self) -> list[str]:
        """The keys that matched no tapped name (so far)."""
        return [k for k in self.fns if not any(fnmatch.fnmatchcase(n, k) for n in self.matched)]


@contextlib.contextmanager
def scope(prefix: str):
    """Prefix every name tapped inside with `prefix.`."""
    token = _PREFIX.set((*_PREFIX.get(), prefix))
    try:
        yield
    finally:
        _PREFIX.reset(token)


@contextlib.contextmanager
def tracing(
    labels: dict[str, list[str]] | None = None,
    dtype=np.float64,
    keep: Callable[[str], bool] | None = None,
    fill: Callable[[], Trace] | None = None,
):
    """Record every `tap` in this block into the yielded `Trace`.

    dtype: how float values are stored. The default float64 keeps every value exact (the parity
    and golden tests, `interventions.patch`, which replays recorded values); np.float32 halves a
    trace's memory (a server keeping many traces) at ~1e-7 relative error in what is shown.
    keep(full name): whether a step's values are stored now (default: all); the others are
    `Deferred`, their values read from `fill()`'s full trace of the same run when first read
    (`fill` may also be set on the trace afterwards)."""
    try:
        dtype = np.dtype(dtype).type
    except TypeError:
        dtype = None
    if dtype not in (np.float64, np.float32):
        shown = getattr(dtype, "__name__", repr(dtype))
        raise InputError(f"a trace stores float64 or float32 values, not {shown}")
    trace = Trace(labels=dict(labels or {}), dtype=dtype, keep=keep, fill=fill)
    token, ptoken = _ACTIVE.set(trace), _PREFIX.set(())
    try:
        yield trace
    finally:
        _ACTIVE.reset(token)
        _PREFIX.reset(ptoken)


@contextlib.contextmanager
def intervene(fns: Mapping[str, Callable]):
    """Inside this block a tap whose full name matches a key returns `fn(value)`: the explicit
    intervention of the module docstring. Yields the `Intervention` (its `matched` names). Blocks
    nest: an inner block's functions apply after the outer block's."""
    if not isinstance(fns, Mapping):
        raise InputError(f"intervene takes {{step name: function}}, got {type(fns).__name__}")
    for key, fn in fns.items():
        if not isinstance(key, str) or not callable(fn):
            raise InputError(
                f"intervene: {key!r} must map a step name (a string) to a function of its value, "
                f"got {type(fn).__name__}"
            )
    swap = Intervention(fns, outer=_INTERVENTION.get())
    token = _INTERVENTION.set(swap)
    try:
        yield swap
    finally:
        _INTERVENTION.reset(token)


@contextlib.contextmanager
def positions(start: int | None = None, prompt: int | None = None):
    """Say where the rows computed inside sit, for an intervention that reads positions
    (`inspect.steering`'s from_step): `start`, the sequence position of the first row a stack
    computes (the PyTorch engine sets its KV cache's length: only the new rows are computed; the
    reference engine computes every row, from 0); `prompt`, the length of the prompt a decoding
    started from (the step functions of `runtime.py` say it). None leaves a value as it is."""
    tokens = []
    if start is not None:
        tokens.append((_START, _START.set(int(start))))
    if prompt is not None:
        tokens.append((_PROMPT, _PROMPT.set(int(prompt))))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def first_position() -> int:
    """The sequence position of the first row being computed (`positions`; 0 unless said)."""
    return _START.get()


def prompt_length() -> int | None:
    """The length of the prompt the decoding under way started from, or None (`positions`)."""
    return _PROMPT.get()


def current() -> Trace | None:
    """The trace being recorded, or None."""
    return _ACTIVE.get()


def intervening() -> bool:
    """Whether an intervention is active (a tap may then return another value than its own)."""
    return _INTERVENTION.get() is not None


def watching() -> bool:
    """Whether a trace or an intervention is active (an engine then runs its explicit path)."""
    return _ACTIVE.get() is not None or _INTERVENTION.get() is not None


def few_names(names: list[str], head: int = 3, tail: int = 2) -> str:
    """A few of many step names, for a repr: the first ones, "...", the last ones."""
    if len(names) > head + tail + 1:
        names = [*names[:head], "...", *names[-tail:]]
    return f"steps: {', '.join(names)} (keys() lists every name)" if names else "no steps"


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def byte_size(n: int) -> str:
    """Bytes as a person reads them: 812 B, 406.1 kB, 2.2 MB, 1.3 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def jsonable(x):
    """x as data that strict JSON can hold (`json.dumps(allow_nan=False)`): NumPy arrays as
    nested lists and NumPy scalars as Python ones, tuples as lists, dict keys as strings, and
    NaN and ±inf as the strings "nan", "inf", "-inf". What `Step.to_dict` and the explorer's
    answers write; other values (bools, ints, text, None) go through as they are."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "biu" or (x.dtype.kind == "f" and np.isfinite(x).all()):
            return x.tolist()  # nothing to replace: no walk over every element
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x
