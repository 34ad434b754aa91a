"""What an exercise is made of, as data: the `Exercise` (its text for the stub, how its function is
called, its cases and its typical mistakes), a `Case` (inputs and the reference's values, with
the trace step each value was read from) and a `Mistake` (a known wrong variant and its hint).

Also the few helpers the exercise modules share: seeded random inputs, the articles' recorded
walkthroughs (read once), a reference step read from a trace, and turning what a learner's
function returned into arrays (`answer`). No checking happens here (`checking.py`), and no
solution is written here: the expected values come from the reference engine's recorded steps.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from glassformer.errors import GlassformerError
from glassformer.trace import tracing

RASCHKA = "Raschka ch. 3, seed 000"
RT = "The Random Transformer, seed 002"
SEED_000 = (
    "seed 000, the French summary of Giles Thomas's « La self-attention entraînable » "
    "(Writing an LLM from scratch, part 8) on Raschka's Build a Large Language Model (From "
    "Scratch), ch. 3"
)
SEED_002 = (
    "seed 002, the French summary of O. Sanseviero's « Comprendre le fonctionnement des "
    "transformeurs » (The Random Transformer)"
)
WALK_RT = "glassformer walkthrough hello-world"
WALK_R = "glassformer walkthrough self-attention"


class ExerciseError(GlassformerError):
    """An exercise that does not exist, or a file or function the check cannot use."""


class AnswerError(Exception):
    """What a learner's function returned cannot be read as the answer (None, a wrong type):
    the message says what was expected."""


class LengthLimit(Exception):
    """Raised by an exercise's step function when a learner's decoding loop runs past max_len."""


@dataclass(frozen=True)
class Part:
    """One value the check compares: its name in the article and what it is."""

    name: str
    means: str


@dataclass(frozen=True)
class Case:
    """One run of the learner's function: `args` / `kwargs` as passed, `expected` the reference's
    value of each part, `sources` where each was read (the trace step and its run)."""

    title: str
    args: tuple
    expected: dict[str, np.ndarray]
    sources: dict[str, str]
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Mistake:
    """A typical wrong answer: `fn` has the learner's signature and computes that mistake; if the
    learner's output equals it, `hint` says what went wrong; `step` is where it enters."""

    name: str
    hint: str
    fn: Callable
    step: str = ""


def call_once(fn: Callable, case: Case, parts: tuple[Part, ...]) -> dict[str, np.ndarray]:
    """The usual run: one call, its result is the one part."""
    out = fn(*fresh(case.args), **fresh(case.kwargs))
    return {parts[0].name: answer(out, parts[0].name)}


@dataclass(frozen=True, repr=False)
class Exercise:
    """One exercise of the graded path: its stub's text, its cases and its typical mistakes."""

    number: int
    slug: str
    title: str
    article: str
    function: str
    params: str  # the signature's parameters, as the stub writes them
    summary: str  # the docstring's first line
    equation: str
    passage: str  # the article's words (quoted from the seed, cited) and their gloss
    shapes: str
    parts: tuple[Part, ...]
    cases: Callable[[], list[Case]]
    mistakes: tuple[Mistake, ...]
    fallback: str  # the hint when no typical mistake matches
    notes: str = ""
    run: Callable[[Callable, Case, tuple[Part, ...]], dict[str, np.ndarray]] = call_once
    error_hint: str = ""  # added to a ValueError raised in the learner's code (shapes)

    @property
    def filename(self) -> str:
        return f"ex{self.number:02d}_{self.slug}.py"

    def __repr__(self) -> str:
        return f"<exercise {self.number}: {self.title} ({self.article})>"


# -- helpers for the exercise modules -----------------------------------------------------------


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def fresh(value):
    """A copy of the inputs for each call: a learner's in-place change never reaches the next."""
    return copy.deepcopy(value)


def traced(step: str, fn: Callable, *args, **kwargs) -> np.ndarray:
    """The value of `step` recorded while the reference engine runs fn(*args, **kwargs)."""
    with tracing() as tr:
        fn(*args, **kwargs)
    return np.array(tr[step])


@functools.cache
def hello_world():
    """The Random Transformer's walkthrough trace (its recorded steps are the article's numbers)."""
    from glassformer.walkthrough import hello_world as walk

    return walk()


@functools.cache
def chapter3():
    """Raschka ch. 3's walkthrough trace."""
    from glassformer.walkthrough import self_attention

    return self_attention()


def step_of(trace, name: str) -> np.ndarray:
    return np.array(trace[name])


def from_walk(step: str, walk: str) -> str:
    return f'step "{step}" of {walk}'


def from_ref(step: str, fn: str) -> str:
    return f'step "{step}" of reference.{fn}'


def case(title: str, args: tuple, part: str, values, source: str, **kwargs) -> Case:
    """A case with one compared part."""
    return Case(title, args, {part: np.asarray(values)}, {part: source}, kwargs)


def answer(out, what: str) -> np.ndarray:
    """What a learner's function returned, as a float64 array (a list or a torch tensor too).
    Numbers only: floats and integers are read as float64; complex numbers, text, booleans and
    Python objects are refused with their dtype named (float64 would drop an imaginary part or
    read '0.5' and True as numbers)."""
    if out is None:
        raise AnswerError(f"returned None: return {what} (did the function end without return?)")
    if isinstance(out, tuple) and len(out) > 1 and not _all_numbers(out):
        raise AnswerError(f"returned a tuple of {len(out)} values: return {what} alone")
    if hasattr(out, "detach"):  # a torch tensor
        out = out.detach().cpu().numpy()
    try:
        arr = np.asarray(out)
    except Exception:  # a ragged list; an object whose __array__ or __len__ fails
        raise AnswerError(f"returned a {kind_of(out)}: return {what} as an array") from None
    if arr.dtype.kind not in NUMBERS:
        what_it_is = DTYPE_KINDS.get(arr.dtype.kind, "values that are not numbers")
        raise AnswerError(
            f"returned {what_it_is} (dtype {arr.dtype}): return {what} as real numbers (float64)"
        )
    return arr.astype(np.float64)


NUMBERS = "fiu"  # the dtype kinds read as float64: floating point, signed and unsigned integers
DTYPE_KINDS = {
    "c": "complex numbers",
    "b": "booleans, not numbers",
    "U": "text",
    "S": "bytes",
    "O": "Python objects",
    "M": "dates",
    "m": "time spans",
    "V": "records",
}


def kind_of(value) -> str:
    """The name of a value's type, safe whatever the learner's class does."""
    return getattr(type(value), "__name__", "object")


def shown(value, width: int = 60) -> str:
    """A learner's value for a message, cut to `width`: its repr, or its type's name when the
    repr fails."""
    try:
        text = repr(value)
    except Exception:
        return f"a {kind_of(value)} (its repr failed)"
    text = text if isinstance(text, str) else kind_of(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _all_numbers(t: tuple) -> bool:
    return all(isinstance(x, int | float | np.number) for x in t)
