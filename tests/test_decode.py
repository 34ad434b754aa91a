"""Decoding strategies: greedy, sampling filters, seeded sampling, beam search (oracles: hand
computed distributions, exhaustive search, and the invariants beam(1) == greedy, top-k(1) ==
greedy)."""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from glassformer import reference as R
from glassformer import weights
from glassformer.config import Config
from glassformer.decoding import beam_search, draw, filter_probs, greedy, sample
from glassformer.errors import GlassformerError


def table_step(table: dict[tuple, list[float]], V: int):
    """A step function from a table: ids so far -> next-token probabilities (as log logits)."""

    def step(ids):
        probs = np.asarray(table.get(tuple(ids), [1.0 / V] * V), dtype=float)
        return np.log(np.maximum(probs, 1e-300))

    return step


@pytest.fixture(scope="module")
def model_step():
    cfg = Config(arch="decoder", vocab_size=12, d_model=8, n_heads=2, d_ff=16, max_len=20)
    p = weights.init(cfg, seed=11, std=0.5)
    return R.next_token_logits(p, cfg)


def test_filter_probs_by_hand():
    logits = np.log(np.array([0.1, 0.4, 0.2, 0.3]))
    np.testing.assert_allclose(filter_probs(logits), [0.1, 0.4, 0.2, 0.3])
    np.testing.assert_allclose(filter_probs(logits, top_k=2), [0, 4 / 7, 0, 3 / 7])
    np.testing.assert_allclose(filter_probs(logits, top_p=0.7), [0, 4 / 7, 0, 3 / 7])
    np.testing.assert_allclose(filter_probs(logits, top_p=0.71), [0, 4 / 9, 2 / 9, 3 / 9])
    np.testing.assert_allclose(filter_probs(logits, top_p=0.05), [0, 1, 0, 0])
    np.testing.assert_allclose(filter_probs(logits, temperature=1e-300), [0, 1, 0, 0])
    hot = filter_probs(logits, temperature=2.0)
    np.testing.assert_allclose(
        hot, np.sqrt([0.1, 0.4, 0.2, 0.3]) / np.sqrt([0.1, 0.4, 0.2, 0.3]).sum()
    )
    cold = filter_probs(logits, temperature=0.5)
    assert cold.max() > 0.4 and hot.max() < 0.4  # temperature sharpens or flattens
    for bad in (dict(temperature=-1), dict(temperature=0), dict(top_k=0), dict(top_p=0),
                dict(top_p=1.5)):  # fmt: skip
        with pytest.raises(GlassformerError):
            filter_probs(logits, **bad)


def test_top_k_1_and_a_tiny_temperature_equal_greedy(model_step):
    g = greedy(model_step, [1], max_new_tokens=8)
    for kw in (dict(top_k=1), dict(temperature=1e-300), dict(top_p=1e-9)):
        assert sample(model_step, [1], 8, seed=5, **kw).ids == g.ids


def test_same_seed_same_sample(model_step):
    a = sample(model_step, [1], 10, temperature=1.5, seed=42)
    b = sample(model_step, [1], 10, temperature=1.5, seed=42)
    assert a.ids == b.ids
    others = {tuple(sample(model_step, [1], 10, temperature=1.5, seed=s).ids) for s in range(5)}
    assert len(others) > 1


def test_a_draw_takes_the_token_generator_choice_takes():
    """decoding.draw (what sample and the explorer draw with) takes, from the same generator, the
    token numpy's Generator.choice(len(p), p=p) takes: a seed samples what it always sampled,
    and the u it reports lies in the chosen token's segment of the cumulative distribution."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        V = int(rng.integers(1, 40))
        p = rng.dirichlet(np.full(V, 0.3)) * (rng.random(V) < 0.6)  # filtered tokens at 0
        p[int(rng.integers(V))] += 0.1
        p /= p.sum()
        seed = int(rng.integers(2**32))
        mine, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(4):
            d = draw(p, mine)
            assert d.token == numpys.choice(V, p=p)
            assert p[d.token] > 0
            assert (d.cdf[d.token - 1] if d.token else 0.0) <= d.u < d.cdf[d.token]


def test_a_draw_on_a_segment_boundary_takes_the_next_kept_token():
    """u equal to a cumulative probability goes to the next token with probability (choice's
    side="right"), never to a filtered token with probability 0."""

    def fixed(u):  # a generator whose every uniform number is u
        return SimpleNamespace(random=lambda: u)

    assert draw(np.array([0.0, 0.5, 0.5]), fixed(0.0)).token == 1
    assert draw(np.array([0.5, 0.0, 0.5]), fixed(0.5)).token == 2


def test_sampling_frequencies_follow_the_filtered_distribution():
    step = table_step({(0,): [0.5, 0.3, 0.15, 0.05]}, 4)
    counts = np.zeros(4)
    for seed in range(2000):
        counts[sample(step, [0], 1, top_k=3, seed=seed).ids[-1]] += 1
    expected = np.array([0.5, 0.3, 0.15, 0]) / 0.95
    assert counts[3] == 0
    np.testing.assert_allclose(counts / counts.sum(), expected, atol=0.04)


def test_beam_width_1_equals_greedy(model_step):
    for eos in (None, 3):
        g = greedy(model_step, [1], max_new_tokens=9, eos_id=eos)
        b = beam_search(model_step, [1], max_new_tokens=9, eos_id=eos, width=1)
        assert b.ids == g.ids


def test_beam_finds_what_greedy_misses():
    # Greedy takes 1 (0.6) then faces a flat distribution; 2 (0.4) leads to a sure EOS (3).
    table = {
        (0,): [0, 0.6, 0.4, 0],
        (0, 1): [0.34, 0.33, 0.33, 0],
        (0, 2): [0, 0, 0, 1.0],
        (0, 1, 0): [0, 0, 0, 1.0],
        (0, 1, 1): [0, 0, 0, 1.0],
        (0, 1, 2): [0, 0, 0, 1.0],
    }
    step = table_step(table, 4)
    g = greedy(step, [0], max_new_tokens=3, eos_id=3)
    assert g.ids == [0, 1, 0, 3]
    b = beam_search(step, [0], max_new_tokens=3, eos_id=3, width=2, length_penalty=0.0)
    assert b.ids == [0, 2, 3]
    assert b.best.finished and b.best.logprob == pytest.approx(np.log(0.4))


def test_beam_search_matches_exhaustive_search():
    """With a width as large as the vocabulary, beam search finds the most likely sequence."""
    rng = np.random.default_rng(0)
    V, eos, n = 4, 3, 3
    table = {}
    for length in range(1, n + 1):
        for seq in itertools.product(range(V), repeat=length - 1):
            table[(0, *seq)] = list(rng.dirichlet(np.ones(V)))
    step = table_step(table, V)

    def logprob(seq):
        return sum(np.log(table[tuple(seq[:i])][seq[i]]) for i in range(1, len(seq)))

    complete = []
    for length in range(1, n + 1):
        for seq in itertools.product(range(V), repeat=length):
            ids = [0, *seq]
            if eos in seq[:-1]:
                continue
            if seq[-1] == eos or length == n:
                complete.append((logprob(ids), ids))
    best = max(complete)[1]
    b = beam_search(step, [0], max_new_tokens=n, eos_id=eos, width=V * V, length_penalty=0.0)
    assert b.ids == best


def test_length_penalty_counts_generated_tokens_only():
    from glassformer.decoding import Hypothesis

    h = Hypothesis(ids=[9, 9, 9, 1, 2], logprob=-4.0, n_generated=2)
    assert h.score(1.0) == pytest.approx(-2.0)  # the 3 prompt tokens do not count
    assert h.score(0.0) == pytest.approx(-4.0)
    # A higher penalty favours longer finished hypotheses.
    short, long_ = Hypothesis([0, 3], -1.0, 1), Hypothesis([0, 1, 2, 3], -2.5, 3)
    assert short.score(0.0) > long_.score(0.0) and long_.score(1.0) > short.score(1.0)


def test_beam_stops_at_eos_and_length():
    step = table_step({}, 5)  # uniform: nothing finishes early
    b = beam_search(step, [0], max_new_tokens=4, eos_id=None, width=3)
    assert len(b.ids) == 5 and not b.finished
    b = beam_search(step, [0], max_new_tokens=10, eos_id=None, width=3, max_len=3)
    assert len(b.ids) == 3
    with pytest.raises(GlassformerError):
        beam_search(step, [0], 3, None, width=0)


def test_beam_steps_one_at_a_time(model_step):
    """Driving `Beam` by hand is `beam_search`; `parents` names each live hypothesis's prefix."""
    from glassformer.decoding import Beam, _log_softmax, top_tokens

    for eos, penalty in ((None, 1.0), (3, 0.6), (5, 1.0)):
        beam = Beam([1], 9, eos, width=3, length_penalty=penalty, max_len=12)
        while not beam.done:
            before = [h.ids for h in beam.alive]
            logps = [_log_softmax(model_step(ids)) for ids in before]
            tops = [top_tokens(lp, 3) for lp in logps]
            beam.advance(tops, [lp[t] for lp, t in zip(logps, tops, strict=True)])
            assert [h.ids[:-1] for h in beam.alive] == [before[p] for p in beam.parents]
        want = beam_search(model_step, [1], 9, eos, width=3, length_penalty=penalty, max_len=12)
        assert beam.result().ids == want.ids and len(beam.steps) == len(want.steps)
