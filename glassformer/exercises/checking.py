"""Checking a learner's function: run it on every case of its exercise, compare each part with the
reference's values, and say where it first goes wrong and why.

The answer is a `Result`: passed, or the first wrong element (the case, the index, expected and
got, the part and the trace step it was read from) with a hint. The hint comes from trying the
exercise's typical mistakes on the same case: when the learner's output equals one of them, that
mistake is named. An exception in the learner's code, or a syntax error in their file, is one
line naming their file and line (never a traceback of glassformer). A learner's file is run as a
module from its path with importlib (its source compiled here, nothing cached beside it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glassformer.exercises.base import AnswerError, Case, Exercise, ExerciseError
from glassformer.exercises.catalogue import exercise

RTOL, ATOL = 1e-6, 1e-8  # float64 implementations agree far closer; mistakes differ far more
PACKAGE = str(Path(__file__).resolve().parents[1])
_names = itertools.count()


@dataclass(frozen=True)
class Difference:
    """The first wrong element: in which case and part, at which index, and what it should be."""

    case: str  # the case's title
    case_number: int
    part: str  # the article's name of the value ("C", "A", "ids")
    means: str  # what that value is
    source: str  # where the expected value was read: the trace step and its run
    index: tuple[int, ...] | None  # None: the shapes differ
    expected: float | None
    got: float | None
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None  # (expected, got) when they differ
    mistake: str | None  # the typical mistake the output equals, if any
    hint: str


@dataclass(frozen=True, repr=False)
class Result:
    """The answer of a check: `passed`, `message` (what the command line prints), `cases` (how
    many cases passed: all of them when it passed), and for a wrong answer the first
    `difference` or the one-line `error` (an exception in the learner's code, a syntax error)."""

    number: int
    passed: bool
    cases: int
    message: str
    difference: Difference | None = None
    error: str | None = None

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message


# -- the check ----------------------------------------------------------------------------------


def check(number, fn: Callable, filename: str | None = None) -> Result:
    """Run `fn` (the learner's function of exercise `number`) on every case and compare."""
    ex = exercise(number)
    if not callable(fn):
        raise ExerciseError(
            f"exercise {ex.number} checks a function {ex.function}({ex.params}); "
            f"got {type(fn).__name__}"
        )
    where = filename or getattr(getattr(fn, "__code__", None), "co_filename", None)
    cases = ex.cases()
    head = f"exercise {ex.number}, {ex.title}"
    for k, c in enumerate(cases, 1):
        at = f"exercise {ex.number}, case {k} of {len(cases)}: {c.title}"
        try:
            with _quiet():
                got = ex.run(fn, c, ex.parts)
        except AnswerError as e:
            line = f"{ex.function} {e} ({at})"
            return Result(ex.number, False, k - 1, line, error=line)
        except (Exception, SystemExit) as e:
            line = raised_line(e, where, at, ex)
            return Result(ex.number, False, k - 1, line, error=line)
        diff = first_difference(ex, cases, k, fn, got)
        if diff is not None:
            message = _wrong(head, k, len(cases), diff)
            return Result(ex.number, False, k - 1, message, difference=diff)
    return Result(ex.number, True, len(cases), f"{head}: passed ({len(cases)} cases)")


@contextlib.contextmanager
def _quiet():
    """A learner's overflow is found by the comparison, not warned of."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def first_difference(ex: Exercise, cases: list[Case], k: int, fn, got: dict) -> Difference | None:
    """The first part (in data-flow order) and element where `got`, the output of `fn` on case
    k (from 1), differs from the reference."""
    c = cases[k - 1]
    for part in ex.parts:
        want, have = np.asarray(c.expected[part.name], dtype=np.float64), got[part.name]
        found = _compare(want, have)
        if found is None:
            continue
        index, e, g = found
        mistake, hint = diagnose(ex, cases, k, fn, got, part.name)
        shapes = None if index is not None else (want.shape, have.shape)
        return Difference(
            c.title, k, part.name, part.means, c.sources[part.name], index, e, g, shapes,
            mistake, hint,
        )  # fmt: skip
    return None


def _compare(want: np.ndarray, have: np.ndarray):
    """None if equal within the tolerance; else (index, expected, got), index None for shapes
    that differ (a 1-D length that differs gives its first differing element)."""
    if want.shape != have.shape:
        if want.ndim == have.ndim == 1:
            n = min(len(want), len(have))
            bad = np.flatnonzero(~_close(want[:n], have[:n]))
            i = int(bad[0]) if bad.size else n
            e = float(want[i]) if i < len(want) else None
            g = float(have[i]) if i < len(have) else None
            return (i,), e, g
        return None, None, None
    bad = np.argwhere(~_close(want, have))
    if not len(bad):
        return None
    i = tuple(int(j) for j in bad[0])
    return i, float(want[i]), float(have[i])


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.isclose(b, a, rtol=RTOL, atol=ATOL, equal_nan=True)


def same(a: dict, b: dict, names) -> bool:
    """Whether two runs' parts are equal (shapes and values) for every name."""
    for name in names:
        x, y = np.asarray(a[name], dtype=np.float64), np.asarray(b[name], dtype=np.float64)
        if x.shape != y.shape or not _close(x, y).all():
            return False
    return True


def _matching(ex: Exercise, c: Case, got: dict, mistakes) -> list:
    """The mistakes whose output on case c equals `got`."""
    names, found = [p.name for p in ex.parts], []
    for m in mistakes:
        try:
            with _quiet():
                theirs = ex.run(m.fn, c, ex.parts)
        except Exception:  # this mistake cannot run on this case (its shapes do not fit)
            continue
        if same(theirs, got, names):
            found.append(m)
    return found


def diagnose(ex: Exercise, cases: list[Case], k: int, fn, got: dict, part: str):
    """(name, hint) of the typical mistake whose output on case k equals the learner's; where
    several do, the one that also equals the learner's on the later cases."""
    c = cases[k - 1]
    found = _matching(ex, c, got, ex.mistakes)
    for later in cases[k:] if len(found) > 1 else ():
        try:
            with _quiet():
                theirs = ex.run(fn, later, ex.parts)
        except (Exception, SystemExit):
            break
        still = _matching(ex, later, theirs, found)
        if not still:
            break
        found = still
    if found:
        return found[0].name, found[0].hint
    want, have = np.asarray(c.expected[part]), got[part]
    if want.ndim == 2 and have.shape == want.T.shape and _close(want.T, have).all():
        return "the transpose", "your result is the transpose of the expected one: rows are tokens"
    if np.isnan(have).any() and not np.isnan(want).any():
        return None, "your output has NaN where the reference has numbers: " + ex.fallback
    return None, ex.fallback


def _number(x: float | None) -> str:
    if x is None:
        return "nothing (the sequence ended)"
    return f"{x:.8g}"


def _wrong(head: str, k: int, n: int, d: Difference) -> str:
    lines = [f"{head}: wrong in case {k} of {n} ({d.case})"]
    if d.index is None:
        lines.append(f"  wrong shape: {d.part} is {d.shapes[1]}, expected {d.shapes[0]}")
    else:
        at = ", ".join(map(str, d.index))
        lines.append(
            f"  first wrong element: {d.part}[{at}]: expected {_number(d.expected)}, "
            f"got {_number(d.got)}"
        )
    lines.append(f"  it comes from: {d.part}, {d.means} ({d.source})")
    if d.mistake:
        lines.append(f"  typical mistake: {d.mistake}")
    lines.append(f"  hint: {d.hint}")
    return "\n".join(lines)


# -- the learner's code: its errors as one line -------------------------------------------------


def raised_line(e: BaseException, filename: str | None, at: str, ex: Exercise) -> str:
    """`FILE, line N: Error: message (where)`: the deepest frame in the learner's file (else the
    deepest frame outside glassformer)."""
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if filename and _same_file(f.filename, filename)]
    outside = [f for f in frames if not os.path.abspath(f.filename).startswith(PACKAGE)]
    frame = (mine or outside or [None])[-1]
    where = f"{_shown(frame.filename, filename)}, line {frame.lineno}: " if frame else ""
    text = " ".join(str(e).split()) if not isinstance(e, SystemExit) else f"exit({e.code})"
    line = f"{where}{type(e).__name__}: {text}" if text else f"{where}{type(e).__name__}"
    if isinstance(e, NotImplementedError) and ex.function:
        line += " - the stub is not filled in yet"
    elif isinstance(e, ValueError) and ex.error_hint:
        line += f"; hint: {ex.error_hint}"
    return f"{line} ({at})"


def _same_file(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _shown(name: str, given: str | None) -> str:
    """A frame's file as the learner named it."""
    return given if given and _same_file(name, given) else name


@contextlib.contextmanager
def learner_module(path: Path):
    """Run the learner's file as a module from its path: (module, None), or (None, the one line
    of its syntax error or exception). Its folder is first on sys.path meanwhile (their own
    helper modules import), and no bytecode is written beside it."""
    name = f"glassformer_exercise_{next(_names)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    sys.modules[name] = module  # dataclasses and the like look their module up
    try:
        yield _execute(spec, module, str(path))
    finally:
        sys.modules.pop(name, None)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(path.parent.resolve()))


def _execute(spec, module, shown: str):
    try:
        source = spec.loader.get_data(shown)
        code = compile(source, shown, "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"{shown}, line {e.lineno}" if e.lineno else shown
        return None, f"{where}: {type(e).__name__}: {e.msg}"
    except (ValueError, OSError) as e:  # null bytes; unreadable
        return None, f"{shown}: cannot be read as Python: {e}"
    try:
        with _quiet():
            exec(code, module.__dict__)
    except (Exception, SystemExit) as e:
        return None, raised_line(e, shown, "while importing it", _NO_EXERCISE)
    return module, None


class _Blank:
    function, error_hint = "", ""


_NO_EXERCISE = _Blank()


def check_file(number, path) -> Result:
    """Import the learner's file and check its function of exercise `number`."""
    ex = exercise(number)
    path = Path(path)
    if not path.is_file():
        what = "a folder" if path.is_dir() else "no such file"
        raise ExerciseError(
            f"{path}: {what}; give the exercise's file (glassformer exercises start "
            f"{ex.number} writes {ex.filename})"
        )
    with learner_module(path) as (module, error):
        if error:
            return Result(ex.number, False, 0, error, error=error)
        fn = getattr(module, ex.function, None)
        if not callable(fn):
            line = (
                f"{path}: defines no function {ex.function}: exercise {ex.number} checks "
                f"{ex.function}({ex.params}) (keep the stub's name)"
            )
            return Result(ex.number, False, 0, line, error=line)
        return check(ex, fn, filename=str(path))
