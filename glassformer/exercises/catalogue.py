"""The graded path: every exercise in order, as data (`base.Exercise`), and finding one by number.

From softmax to a KV cache, through both articles: Raschka's chapter 3 (seed 000) for trainable
self-attention, its causal mask and dropout; The Random Transformer (seed 002) for the rest of
the encoder-decoder, from multi-head attention to decoding. The exercises themselves live in
`attention.py` (1-5), `heads.py` (6, 7), `layers.py` (8-11), `blocks.py` (12, 13) and
`generation.py` (14-16).
"""

from __future__ import annotations

from glassformer.exercises import attention, blocks, generation, heads, layers
from glassformer.exercises.base import Exercise, ExerciseError

MODULES = (attention, heads, layers, blocks, generation)
EXERCISES: tuple[Exercise, ...] = tuple(e for m in MODULES for e in m.EXERCISES)
assert [e.number for e in EXERCISES] == list(range(1, len(EXERCISES) + 1))


def exercise(number) -> Exercise:
    """Exercise `number` (1 .. len(EXERCISES)), or one clear error."""
    if isinstance(number, Exercise):
        return number
    try:
        n = int(number)
        ok = n == number or str(n) == str(number).strip()
    except (TypeError, ValueError):
        ok = False
    if not ok or not 1 <= n <= len(EXERCISES):
        raise ExerciseError(
            f"no exercise {number!r}: they are numbered 1 to {len(EXERCISES)} "
            "(glassformer exercises lists them)"
        )
    return EXERCISES[n - 1]
