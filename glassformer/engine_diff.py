"""Where engines part: one input through several engines, compared step by step by name.

    from glassformer import engine_diff
    from glassformer.explain.diff import to_text
    r = engine_diff.diff(m, "To be", ("reference", "torch", "float32", "int8"), tol=1e-6)
    r.first_beyond["int8"]        # 'decoder.0.self_attn.head0.Q': the first linear layer
    print(to_text(r))

`diff(m, text, engines, tol)` runs one input with the trace on through each engine and compares
every step the first engine records (in its data-flow order) with the same step of each other
engine: the largest absolute difference max|a - b| and the same relative to the step's size,
max|a - b| / max|b| (an element-wise ratio would blow up wherever a value is near zero), and for
each engine the first step whose largest absolute difference is over `tol`. The input: a
decoder's text; an encoder-decoder's source with its decoder tokens (`target`, by default its
greedy translation); an encoder's text.

The engines (ENGINES):
  reference  NumPy float64, `reference.py`: the articles' math
  torch      the PyTorch engine in float64 (its explicit attention path while tracing)
  float32    the PyTorch engine in float32
  int8       float32 with its linear layers in int8 (`quantize.int8`; CPUs with x86 kernels)
  hf         transformers itself on a Hugging Face folder (GPT-2, BERT, Llama, Qwen2), float64,
             tapped by forward hooks on the modules `hf.py`'s and `hf_llama.py`'s tables name; a
             step no module's input or output is (the scores, the norms' internals, the rotated
             Q and K, which transformers computes inside its attention) is "not in hf"
Steps one engine does not record (RMSNorm's root mean square `norm.rms` in the PyTorch engine's
fused norm) are "not in" it; grouped K/V heads (`kv_head{g}`), rotated Q and K (`Q_rot`,
`K_rot`) and the gated FFN's `gate` and `up` are compared like any other step.
An `Engine(kind, model)` runs a kind on another model of the same shape (perturbed weights).

A step where an engine's values turn NaN or infinite stops the diff (`numerics.NonFiniteError`,
as `explain` stops without --find-nan): past it every row would read inf and the first step
beyond the tolerance would point at a step before the overflow. The one line names the engine,
the step and what to do (a float32 or int8 overflow: whether the float64 reference stays finite).

Deliberately not here: the table and the page (`explain/diff.py`), argument parsing and printing
(`cli/diff.py`), the engines' math, foreign module names (the tables of `hf.py` and
`hf_llama.py`), the hf engine's hooks (`hf_hooks.py`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from glassformer.errors import INSTALL_TORCH, GlassformerError, InputError, param
from glassformer.explain.html_pieces import dims
from glassformer.formats.hf_hooks import hf_engine
from glassformer.model import Model
from glassformer.numerics import NonFiniteError, first_nonfinite, origin
from glassformer.results import Result
from glassformer.trace import Step, Trace, jsonable, tracing

WHAT = {
    "reference": "NumPy float64, the reference engine",
    "torch": "the PyTorch engine in float64",
    "float32": "the PyTorch engine in float32",
    "int8": "the PyTorch engine with its linear layers in int8",
    "hf": "transformers in float64, tapped by hooks",
}
ENGINES = tuple(WHAT)
_DTYPE = {"torch": "float64", "float32": "float32", "int8": "int8"}  # the PyTorch engine's
Steps = dict[str, np.ndarray]  # one engine's recorded steps, by name, in the order recorded


@dataclass(frozen=True)
class Engine:
    """One engine to compare: a kind of ENGINES, run on `model` (None: the model diffed), shown
    as `label` (default: the kind)."""

    kind: str
    model: Model | None = None
    label: str | None = None


@dataclass(frozen=True)
class Inputs:
    """What every engine reads: the text, the decoder's (or an encoder's) token ids, an
    encoder-decoder's source ids, and the reference run that settled them."""

    text: str
    ids: list[int]
    src: list[int] | None
    run: object  # touch.Run


@dataclass(frozen=True)
class Cell:
    """One step of one engine against the first engine's: max|a - b|, that over max|b|, and
    a note when they cannot be compared element by element (shapes differ)."""

    max_abs: float
    max_rel: float
    note: str = ""

    def to_dict(self, tol: float) -> dict:
        d = {"max_abs": self.max_abs, "max_rel": self.max_rel, "beyond": self.max_abs > tol}
        return d | ({"note": self.note} if self.note else {})


@dataclass(frozen=True)
class Row:
    """One step of the first engine: its name, shape and each other engine's `Cell` (None:
    that engine has no step of this name)."""

    name: str
    shape: tuple[int, ...]
    cells: dict[str, Cell | None]


@dataclass(repr=False)
class DiffResult(Result):
    """What `diff` found: the engines' labels (the first is the one compared against) with what
    each is (`kinds`), the tolerance, one `Row` per step, and per other engine the first step
    beyond the tolerance (None: none is). Its repr: one line per engine, the largest difference
    and the first step beyond; `to_json()` what `glassformer diff --json` writes."""

    model: str
    summary: str
    inputs: dict[str, list[str]]
    engines: list[str]
    kinds: dict[str, str]
    tol: float
    rows: list[Row]
    first_beyond: dict[str, str | None] = field(default_factory=dict)

    def row(self, name: str) -> Row:
        for r in self.rows:
            if r.name == name:
                return r
        raise InputError(f"no step named {name!r} in this diff")

    def largest(self, label: str) -> tuple[float, str | None]:
        """An engine's largest max|a - b| over every step it shares, and where."""
        worst, where = 0.0, None
        for r in self.rows:
            c = r.cells.get(label)
            if c is not None and (where is None or c.max_abs > worst):
                worst, where = c.max_abs, r.name
        return worst, where

    def missing(self, label: str) -> list[str]:
        """The steps of the first engine that `label` does not record."""
        return [r.name for r in self.rows if r.cells.get(label) is None]

    def _title(self) -> str:
        return (
            f"of {self.model}: {len(self.rows)} steps against {self.engines[0]}, tol {self.tol:g}"
        )

    def _lines(self) -> list[tuple[str, str]]:
        out = []
        for e in self.engines[1:]:
            worst, where = self.largest(e)
            first = self.first_beyond.get(e)
            beyond = f"first beyond tol at {first}" if first else "none beyond tol"
            out.append((e, f"largest max|a - b| {worst:.3g} at {where}; {beyond}"))
        return out

    def to_dict(self) -> dict:
        """Strict-JSON data: every row with each engine's numbers, and the findings."""
        others = self.engines[1:]
        rows = [
            {
                "name": r.name,
                "shape": list(r.shape),
                "engines": {e: c and c.to_dict(self.tol) for e, c in r.cells.items()},
            }
            for r in self.rows
        ]
        largest = {e: dict(zip(("max_abs", "where"), self.largest(e), strict=True)) for e in others}
        about = {"model": self.model, "summary": self.summary, "input": self.inputs}
        found = {"first_beyond": self.first_beyond, "largest": largest, "rows": rows}
        engines = {"against": self.engines[0], "engines": self.engines, "kinds": self.kinds}
        return jsonable(about | engines | {"tol": self.tol} | found)


# -- choosing the engines -----------------------------------------------------------------------


def check_kind(kind: str) -> None:
    """An engine kind of ENGINES, or one InputError with the nearest."""
    if kind not in ENGINES:
        close = difflib.get_close_matches(str(kind), ENGINES, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise InputError(f"unknown engine {kind!r}; use some of {', '.join(ENGINES)}{hint}")


def _engines(engines: Sequence[str | Engine], m: Model) -> tuple[list[Engine], list[str]]:
    """The engines as `Engine`s on their models, and unique labels ("reference", "reference#2")."""
    chosen = [e if isinstance(e, Engine) else Engine(e) for e in engines]
    if len(chosen) < 2:
        raise InputError("diff needs at least two engines to compare, e.g. reference,torch")
    labels: list[str] = []
    for e in chosen:
        check_kind(e.kind)
        label, k = e.label or e.kind, 2
        while label in labels:
            label, k = f"{e.label or e.kind}#{k}", k + 1
        labels.append(label)
    return [
        Engine(e.kind, e.model or m, lab) for e, lab in zip(chosen, labels, strict=True)
    ], labels


# -- the engines, each as a function of the inputs to its steps --------------------------------


def _steps(trace: Trace) -> Steps:
    """A trace's steps, each name once (its first record: an encoder's sentence embedding runs
    the encoder again), as float64 (bool masks stay bool)."""
    out: Steps = {}
    for s in trace.steps:
        if s.name not in out:
            out[s.name] = np.asarray(s.values)
    return out


def _reference(model: Model, base: Model) -> Callable[[Inputs], Steps]:
    if model is base:  # the run that settled the inputs is this engine's run
        return lambda x: _steps(x.run.trace)

    def run(x: Inputs) -> Steps:
        if model.cfg.arch == "decoder":
            return _steps(model.run(ids=x.ids, quiet=True).trace)
        target = list(x.ids) if model.cfg.arch == "encoder-decoder" else None
        return _steps(model.run(x.text, target=target, quiet=True).trace)

    return run


def _torch(model: Model, kind: str) -> Callable[[Inputs], Steps]:
    try:
        import torch
    except ImportError:
        raise GlassformerError(f"the {kind} engine needs PyTorch: {INSTALL_TORCH}") from None
    engine = model.runtime.torch(
        _DTYPE[kind]
    )  # int8 without x86 kernels: refused here, before work
    if engine is None:
        raise GlassformerError(
            f"{model.name} was loaded with engine='reference': load it with engine='auto' to "
            f"compare the {kind} engine"
        )

    def run(x: Inputs) -> Steps:
        on = next(engine.parameters()).device  # the model's device (`load(device=...)`)
        src = {} if x.src is None else {"src_ids": torch.tensor([x.src], device=on)}
        with torch.no_grad(), np.errstate(all="ignore"), tracing() as tr:
            engine(torch.tensor([x.ids], device=on), **src)
        return _steps(tr)

    return run


def _runner(e: Engine, base: Model) -> Callable[[Inputs], Steps]:
    """The function from the inputs to engine `e`'s steps, made before any work (so that an
    engine that cannot run here is refused first)."""
    if e.kind == "reference":
        return _reference(e.model, base)
    if e.kind == "hf":
        return hf_engine(e.model)
    return _torch(e.model, e.kind)


# -- comparing ----------------------------------------------------------------------------------


def compare(a: np.ndarray, b: np.ndarray) -> Cell:
    """Engine values `a` against the first engine's `b`: max|a - b| (equal infinities and NaN
    against NaN differ by 0; a non-finite value against another value, by inf) and that over
    max|b| (its finite values)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return Cell(math.inf, math.inf, f"shape {dims(a.shape)} here, {dims(b.shape)} there")
    with np.errstate(all="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        d = np.where(same, 0.0, np.abs(a - b))  # (shape)
    d = np.where(np.isnan(d), math.inf, d)
    max_abs = float(d.max()) if d.size else 0.0
    finite = np.abs(b[np.isfinite(b)])
    scale = float(finite.max()) if finite.size else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    return Cell(max_abs, max_rel)


def diff(
    m: Model,
    text: str,
    engines: Sequence[str | Engine] = ("reference", "torch"),
    tol: float = 1e-6,
    *,
    target: str | None = None,
) -> DiffResult:
    """`text` through every engine (see the module docstring), compared with the first: a
    `DiffResult`. target: an encoder-decoder's decoder text (default: its greedy translation).
    Every engine is checked before any work (an unknown one, int8 without its kernels, hf on a
    folder transformers cannot read)."""
    if not (isinstance(tol, int | float) and math.isfinite(tol) and tol >= 0):
        raise InputError(f"the tolerance must be a finite number >= 0, got {tol!r}")
    if target is not None and m.cfg.arch != "encoder-decoder":
        what = "a decoder" if m.cfg.arch == "decoder" else "an encoder"
        raise InputError(
            f"{param('target')} is for an encoder-decoder; {m.name} is {what}: drop it"
        )
    chosen, labels = _engines(engines, m)
    runners = [_runner(e, m) for e in chosen]
    run = m.run(text, target=target, quiet=True)
    src = list(run.src) if m.cfg.arch == "encoder-decoder" else None
    x = Inputs(text, list(run.ids), src, run)
    base, *others = [r(x) for r in runners]
    found = _first_nonfinite(base, dict(zip(labels, [base, *others], strict=True)))
    if found is not None:  # a table of inf past it would point at nothing: stop, name it
        raise _nonfinite(*found, chosen[labels.index(found[0])], x)
    rows = [_row(name, b, dict(zip(labels[1:], others, strict=True))) for name, b in base.items()]
    first = {e: next((r.name for r in rows if _beyond(r.cells[e], tol)), None) for e in labels[1:]}
    inputs = {"tokens": m.runtime.readable(x.ids)}
    if src is not None:
        inputs = {"source": m.runtime.readable(src), "target": m.runtime.readable(x.ids)}
    kinds = {lab: _kind_text(e, m) for e, lab in zip(chosen, labels, strict=True)}
    return DiffResult(m.name, m.summary(), inputs, labels, kinds, float(tol), rows, first)


def _first_nonfinite(order: Steps, runs: dict[str, Steps]) -> tuple[str, str, str] | None:
    """(engine, step, what was found) of the first step, in the first engine's data-flow order,
    that an engine records with a NaN or an infinity (`numerics.first_nonfinite`'s rule, so the
    -inf of masked scores is not one); at one step, the first engine given."""
    for name in order:
        for label, steps in runs.items():
            if name in steps:
                found = first_nonfinite(Trace([Step(name, steps[name])]))
                if found is not None:
                    return label, name, found[1]
    return None


def _nonfinite(label: str, step: str, what: str, e: Engine, x: Inputs) -> NonFiniteError:
    """The one line for an engine gone non-finite: which engine, from which step, and what to
    do: a float32 or int8 engine is checked against the float64 reference (`numerics.origin`);
    a float64 engine's overflow is the model's on this input."""
    said = f"the {label} engine's values are non-finite (NaN or inf) from {step} on ({what})"
    if e.kind in ("float32", "int8"):
        fix = f"diff the float64 engines instead ({param('engines', ('reference', 'torch'))})"
        m = e.model
        return NonFiniteError(f"{said}; {origin(m.params, m.cfg, x.ids, x.src, fix)}")
    return NonFiniteError(
        f"{said}: the model passes float64's range on this input, so no engine can be compared "
        f"from there; look at the weights that feed {step}"
    )


def _row(name: str, b: np.ndarray, others: dict[str, Steps]) -> Row:
    cells = {e: compare(t[name], b) if name in t else None for e, t in others.items()}
    return Row(name, tuple(b.shape), cells)


def _beyond(c: Cell | None, tol: float) -> bool:
    return c is not None and c.max_abs > tol


def _kind_text(e: Engine, m: Model) -> str:
    return WHAT[e.kind] + ("" if e.model is m else f", on the weights of {e.model.name}")
