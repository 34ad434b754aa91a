"""The exercise checker's verdict on answers made wrong on purpose by a known amount and in a
known place (`glassformer.exercises.check`): the reference solutions of tests/exercise_solutions.py
nudged, reordered or lengthened, so that the expected verdict (passed or not, the part, the index)
is known without the checker. tests/test_exercises.py holds the catalogue and the typical
mistakes; tests/test_edges_learner.py the ways a learner's code can end."""

from __future__ import annotations

import exercise_solutions as S
import numpy as np

from glassformer import exercises as E


def test_an_answer_off_by_one_part_in_ten_thousand_fails_and_rounding_passes():
    """The tolerance is float64 rounding, not a percent: C scaled by 1 + 1e-4 is wrong at its
    first non-zero element, by 1 + 1e-10 it is right."""
    wrong = E.check(2, lambda Q, K, V: S.attention(Q, K, V) * (1 + 1e-4))
    assert not wrong.passed and wrong.cases == 0 and wrong.difference.part == "C"
    d = wrong.difference
    assert d.got == d.expected * (1 + 1e-4) and d.expected != 0
    assert E.check(2, lambda Q, K, V: S.attention(Q, K, V) * (1 + 1e-10)).passed


def test_the_first_wrong_part_in_data_flow_order_is_named():
    """beam_step gives ids, then their log-probabilities: the best hypotheses last makes both
    wrong, and the one named is ids."""
    ex = E.exercise(15)
    assert [p.name for p in ex.parts] == ["ids", "logprob"]
    r = E.check(15, lambda h, lp, width: S.beam_step(h, lp, width)[::-1])
    assert not r.passed and r.difference.part == "ids"


def test_a_sequence_of_another_length_is_wrong_at_its_first_wrong_element():
    """greedy_decode one token too long with every token after BOS off by one: the first wrong
    element is index 1, what it should be the reference's second id."""
    seen = []

    def longer(step, bos_id, eos_id, max_len):
        ids = S.greedy_decode(step, bos_id, eos_id, max_len)
        seen.append(ids)
        return [ids[0], *(t + 1 for t in ids[1:]), 0]

    r = E.check(14, longer)
    assert len(seen[0]) > 2 and not r.passed
    assert r.difference.index == (1,) and r.difference.expected == seen[0][1]
    assert r.difference.got == seen[0][1] + 1 and r.difference.shapes is None
    assert np.isfinite(r.difference.expected)
