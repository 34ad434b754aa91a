"""Learn by doing: a graded path of exercises through both articles, checked against the
reference engine's recorded steps.

    from glassformer import exercises

    exercises.catalogue()          # the exercises, in order (softmax ... a KV cache)
    print(exercises.stub(3))       # exercise 3's stub: signature, equation, the article's words
    exercises.start(3, "work")     # ... written to work/ex03_selfattention_v1.py
    exercises.check(3, my_fn)      # a Result: passed, or the first wrong element and a hint
    exercises.check_file(3, "work/ex03_selfattention_v1.py", timeout=5)  # in its own process

The command line is `glassformer exercises [start N [DIR] | check N FILE]`. A check runs the
learner's function on the article's own numbers (the walkthroughs' recorded steps) and on seeded
random inputs of several shapes, compares every value with the reference engine's, and names a
typical mistake when the learner's output equals it (e.g. √d_model instead of √d_head, softmax
over the wrong axis, the mask after the softmax).

Two paths, on purpose. A learner's *file* (`check_file`, and the command line) is run in a process
of its own (`sandbox.py` starts `runner.py`): a time limit (`timeout`), a memory limit, its output
read and capped, and however their code ends (sys.exit, os._exit, a crash, a KeyboardInterrupt it
raises) one line naming their file, never "passed"; the reference values and the comparison stay
in this process, out of their code's reach. A *function object* (`check`, the notebook's path) is
run here: a function typed in a notebook cannot always be sent to another process (it may close
over the notebook's state, or not pickle), so this path keeps the one-line answers (BaseException,
a message that cannot be shown, an answer that is not numbers) but has no time limit, and their
code shares this process (a Ctrl-C stops it, as any cell).

What this package deliberately is not: a store of solutions. Stubs hold no solution; the
reference solutions live in the test suite (tests/exercise_solutions.py).
"""

from glassformer.exercises.base import Exercise, ExerciseError
from glassformer.exercises.catalogue import EXERCISES, exercise
from glassformer.exercises.checking import Difference, Result, check
from glassformer.exercises.sandbox import check_file
from glassformer.exercises.stubs import start, started, stub

__all__ = [
    "Difference",
    "Exercise",
    "ExerciseError",
    "Result",
    "catalogue",
    "check",
    "check_file",
    "exercise",
    "start",
    "started",
    "stub",
]


def catalogue() -> list[Exercise]:
    """Every exercise of the graded path, in order: number, title, article, file name."""
    return list(EXERCISES)
