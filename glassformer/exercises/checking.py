"""Checking a learner's function: run it on every case of its exercise, compare each part with the
reference's values, and say where it first goes wrong and why.

The answer is a `Result`: passed, or the first wrong element (the case, the index, expected and
got, the part and the trace step it was read from) with a hint. The hint comes from trying the
exercise's typical mistakes on the same case: when the learner's output equals one of them, that
mistake is named. However the learner's code ends (an exception, sys.exit, a KeyboardInterrupt or
another BaseException it raises, an exception whose message cannot be shown) the answer is one
line naming their file and line, never a traceback of glassformer and never "passed"; an answer
that is not numbers (complex, text, booleans, Python objects) fails with its dtype named.

`judge` gives the verdict from each case's parts, however they were computed. `check` computes
them here, in this process: the path of the Python API, which takes a function object (a function
typed in a notebook cannot always be sent to another process). This path cannot stop a function
that never returns, and the learner's code shares this process's state; a learner's *file* is
checked in a process of its own instead, with a time limit (`sandbox.py`, `runner.py`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glassformer.exercises.base import AnswerError, Case, Exercise, ExerciseError, kind_of, shown
from glassformer.exercises.catalogue import exercise
from glassformer.interrupts import Stopped

RTOL, ATOL = 1e-6, 1e-8  # float64 implementations agree far closer; mistakes differ far more
PACKAGE = str(Path(__file__).resolve().parents[1])
MESSAGE_WIDTH = 300  # an exception's message is cut here: the answer is one line, not a page


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
    `difference` or the one-line `error` (an exception in the learner's code, a syntax error).
    `output`: what the learner's code printed, cut to a few lines (a file's check only: in this
    process, their prints go where they are printed)."""

    number: int
    passed: bool
    cases: int
    message: str
    difference: Difference | None = None
    error: str | None = None
    output: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message


# -- the check -----------------------------------------------------------------------------------


def check(number, fn: Callable, filename: str | None = None) -> Result:
    """Run `fn` (the learner's function of exercise `number`) on every case, in this process, and
    compare (see the package's docstring for what this path guards and what it cannot)."""
    ex = exercise(number)
    if not callable(fn):
        raise ExerciseError(
            f"exercise {ex.number} checks a function {ex.function}({ex.params}); got {kind_of(fn)}"
        )
    where = filename or getattr(getattr(fn, "__code__", None), "co_filename", None)
    cases = ex.cases()
    with _real_interrupts() as real:
        return judge(ex, cases, InProcess(ex, cases, fn, where, real, filename))


def judge(ex: Exercise, cases: list[Case], outcomes) -> Result:
    """The verdict: each case's parts (`outcomes.get(k)`, asked in order, k from 1) against the
    reference's, stopping at the first case that is wrong or has no answer (a one-line error)."""
    head = f"exercise {ex.number}, {ex.title}"
    for k in range(1, len(cases) + 1):
        got = outcomes.get(k)
        if isinstance(got, str):
            return Result(ex.number, False, k - 1, got, error=got)
        diff = first_difference(ex, cases, k, outcomes, got)
        if diff is not None:
            message = _wrong(head, k, len(cases), diff)
            return Result(ex.number, False, k - 1, message, difference=diff)
    return Result(ex.number, True, len(cases), f"{head}: passed ({len(cases)} cases)")


class InProcess:
    """The learner's function run here, one case when the verdict asks for it."""

    def __init__(self, ex: Exercise, cases: list[Case], fn: Callable, where, real, file=None):
        self.ex, self.cases, self.fn, self.where, self.real = ex, cases, fn, where, real
        self.file, self.done = file, {}

    def get(self, k: int) -> dict | str:
        if k not in self.done:
            ex, fn, cases = self.ex, self.fn, self.cases
            self.done[k] = run_case(ex, fn, cases, k, self.where, self.real, file=self.file)
        return self.done[k]


def run_case(ex: Exercise, fn, cases: list[Case], k: int, where, real=None, **said):
    """Case k (from 1) of the learner's function: its parts, or the one line saying why there
    are none. Every way the learner's code can end is caught here (BaseException: sys.exit, a
    KeyboardInterrupt it raises), except a real Ctrl-C, which `real(e)` recognises. `said`:
    file= names the learner's file before an answer that is not one (with the function's line),
    memory_hint= follows a MemoryError."""
    at = case_words(ex, cases, k)
    try:
        with quiet():
            return ex.run(fn, cases[k - 1], ex.parts)
    except AnswerError as e:
        return f"{_defined(fn, said.get('file'))}{ex.function} {e} ({at})"
    except BaseException as e:
        if real is not None and real(e):
            raise
        hint = said.get("memory_hint", "") if isinstance(e, MemoryError) else ""
        return raised_line(e, where, at, ex, hint)


def case_words(ex: Exercise, cases: list[Case], k: int) -> str:
    """Where a line says it happened: `exercise N, case k of n: the case's title`."""
    return f"exercise {ex.number}, case {k} of {len(cases)}: {cases[k - 1].title}"


def _defined(fn, file: str | None) -> str:
    """`FILE, line N: ` of the learner's function (N: its def), `FILE: `, or '' without a file."""
    try:
        code = getattr(fn, "__code__", None)
        line = _same_file(code.co_filename, file) and code.co_firstlineno
    except Exception:  # not a plain function: a callable object of theirs
        line = None
    if file and line:
        return f"{file}, line {line}: "
    return f"{file}: " if file else ""


@contextlib.contextmanager
def _real_interrupts():
    """Tell a Ctrl-C (SIGINT) that lands while the learner's function runs from a
    KeyboardInterrupt their code raises: yields real(e), true for the former, which must stop the
    check. Where SIGINT has no Python handler (ignored, or the default action) or this is not the
    main thread, no Ctrl-C can become a KeyboardInterrupt here: every one is the learner's."""
    seen = []
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        seen.append(signum)
        previous(signum, frame)  # Python's default raises; a program's own handler decides

    def real(e: BaseException) -> bool:  # Stopped: the command line's gate took the signal
        return isinstance(e, Stopped) or (bool(seen) and isinstance(e, KeyboardInterrupt))

    installed = False
    if callable(previous):
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGINT, handler)
            installed = True
    try:
        yield real
    finally:
        if installed:
            signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def quiet():
    """A learner's overflow is found by the comparison, not warned of."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def first_difference(ex: Exercise, cases: list[Case], k: int, outcomes, got: dict):
    """The first part (in data-flow order) and element where `got`, the learner's output on case
    k (from 1), differs from the reference (a `Difference`), or None."""
    c = cases[k - 1]
    for part in ex.parts:
        want, have = np.asarray(c.expected[part.name], dtype=np.float64), got[part.name]
        found = _compare(want, have)
        if found is None:
            continue
        index, e, g = found
        mistake, hint = diagnose(ex, cases, k, outcomes, got, part.name)
        shapes = None if index is not None else (want.shape, have.shape)
        return Difference(
            c.title,
            k,
            part.name,
            part.means,
            c.sources[part.name],
            index,
            e,
            g,
            shapes,
            mistake,
            hint,
        )
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
            with quiet():
                theirs = ex.run(m.fn, c, ex.parts)
        except Exception:  # this mistake cannot run on this case (its shapes do not fit)
            continue
        if same(theirs, got, names):
            found.append(m)
    return found


def diagnose(ex: Exercise, cases: list[Case], k: int, outcomes, got: dict, part: str):
    """(name, hint) of the typical mistake whose output on case k equals the learner's; where
    several do, the one that also equals the learner's on the later cases (`outcomes.get(j)`:
    a case that has no answer ends the search)."""
    c = cases[k - 1]
    found = _matching(ex, c, got, ex.mistakes)
    for j in range(k + 1, len(cases) + 1) if len(found) > 1 else ():
        theirs = outcomes.get(j)
        if isinstance(theirs, str):
            break
        still = _matching(ex, cases[j - 1], theirs, found)
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


def raised_line(e: BaseException, filename: str | None, at: str, ex, hint: str = "") -> str:
    """`FILE, line N: Error: message (where)`: the deepest frame in the learner's file (else the
    deepest frame outside glassformer). Any BaseException (sys.exit, a KeyboardInterrupt or a
    class of their own) and a message that cannot be shown (its __str__ raises) make one line."""
    frame = learner_frame(traceback.extract_tb(e.__traceback__), filename)
    where = f"{_shown(frame.filename, filename)}, line {frame.lineno}: " if frame else ""
    text = message_of(e)
    line = f"{where}{kind_of(e)}: {text}" if text else f"{where}{kind_of(e)}"
    if isinstance(e, NotImplementedError) and ex.function:
        line += " - the stub is not filled in yet"
    elif isinstance(e, ValueError) and ex.error_hint:
        line += f"; hint: {ex.error_hint}"
    elif isinstance(e, SystemExit):
        line += " - return the answer instead of ending the program"
    elif isinstance(e, KeyboardInterrupt):
        line += " - raised by your code (a Ctrl-C stops the whole check instead)"
    elif hint:
        line += f" - {hint}"
    return f"{line} ({at})"


def learner_frame(frames, filename: str | None):
    """Of `frames` (outermost first, each with .filename and .lineno), the deepest in the
    learner's file, else the deepest outside glassformer; None if there is none."""
    mine = [f for f in frames if filename and _same_file(f.filename, filename)]
    outside = [f for f in frames if not os.path.abspath(f.filename).startswith(PACKAGE)]
    return (mine or outside or [None])[-1]


def message_of(e: BaseException) -> str:
    """An exception's message on one line, cut at MESSAGE_WIDTH; what sys.exit was given; or, when
    its __str__ fails, that it could not be shown."""
    if isinstance(e, SystemExit):
        return f"exit({shown(e.code)})"
    try:
        text = str(e)
    except BaseException as inner:  # the learner's __str__; nothing of theirs may escape here
        return f"(its message cannot be shown: its __str__ raised {kind_of(inner)})"
    text = " ".join(str.split(text))
    return text if len(text) <= MESSAGE_WIDTH else text[: MESSAGE_WIDTH - 3] + "..."


def _same_file(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _shown(name: str, given: str | None) -> str:
    """A frame's file as the learner named it."""
    return given if given and _same_file(name, given) else name
