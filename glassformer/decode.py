"""Decoding strategies over a step function, knowing nothing of engines or tokenizers.

A step function maps the token ids so far to the logits of the next token (V,). Greedy decoding
(seed 002): start from SOS or a prompt, append the argmax token, stop at EOS or at the length
limit. Sampling (temperature, top-k, top-p, seeded) and beam search use the same step function;
each records what it did at every step so that a generation can be explained afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from glassformer.errors import GlassformerError

StepFn = Callable[[list[int]], np.ndarray]


@dataclass
class Generation:
    """The generated ids (prompt included) and, per step, the chosen token's probability and the
    full next-token distribution."""

    ids: list[int]
    n_prompt: int
    chosen_probs: list[float] = field(default_factory=list)
    distributions: list[np.ndarray] = field(default_factory=list)
    stopped_at_eos: bool = False
    kept: list[np.ndarray] = field(default_factory=list)  # sampling: token ids left after filters

    @property
    def new_ids(self) -> list[int]:
        return self.ids[self.n_prompt :]


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def greedy(
    step: StepFn,
    prompt: list[int],
    max_new_tokens: int,
    eos_id: int | None = None,
    max_len: int | None = None,
) -> Generation:
    """Append argmax tokens until EOS, `max_new_tokens` new tokens, or `max_len` tokens in all."""
    out = Generation(ids=list(prompt), n_prompt=len(prompt))
    for _ in range(max_new_tokens):
        if max_len is not None and len(out.ids) >= max_len:
            break
        probs = _softmax(step(out.ids))
        token = int(np.argmax(probs))
        out.ids.append(token)
        out.chosen_probs.append(float(probs[token]))
        out.distributions.append(probs)
        if token == eos_id:
            out.stopped_at_eos = True
            break
    return out


def filter_probs(
    logits: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """The sampling distribution: softmax(logits / temperature), then keep the top_k most likely
    tokens, then the smallest set whose probability reaches top_p; renormalised. Temperature 0
    keeps only the argmax."""
    if temperature < 0:
        raise GlassformerError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise GlassformerError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise GlassformerError(f"top_p must be in (0, 1], got {top_p}")
    z = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        probs = np.zeros_like(z)
        probs[int(np.argmax(z))] = 1.0
        return probs
    probs = _softmax(z / temperature)
    order = np.argsort(-probs, kind="stable")  # most likely first
    keep = np.ones(len(z), dtype=bool)
    if top_k is not None:
        keep[order[top_k:]] = False
    if top_p is not None:
        cumulative = np.cumsum(probs[order])
        n = int(np.searchsorted(cumulative, top_p - 1e-12)) + 1  # first index reaching top_p
        keep[order[n:]] = False
    probs = np.where(keep, probs, 0.0)
    return probs / probs.sum()


def sample(
    step: StepFn,
    prompt: list[int],
    max_new_tokens: int,
    eos_id: int | None = None,
    max_len: int | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
) -> Generation:
    """Draw each next token from `filter_probs(...)`; the same seed gives the same tokens."""
    rng = np.random.default_rng(seed)
    out = Generation(ids=list(prompt), n_prompt=len(prompt))
    for _ in range(max_new_tokens):
        if max_len is not None and len(out.ids) >= max_len:
            break
        logits = step(out.ids)
        probs = filter_probs(logits, temperature, top_k, top_p)
        token = int(rng.choice(len(probs), p=probs))
        out.ids.append(token)
        out.chosen_probs.append(float(probs[token]))
        out.distributions.append(_softmax(logits))
        out.kept.append(np.flatnonzero(probs))
        if token == eos_id:
            out.stopped_at_eos = True
            break
    return out


@dataclass
class Hypothesis:
    ids: list[int]
    logprob: float  # sum of the generated tokens' log-probabilities
    n_generated: int
    finished: bool = False

    def score(self, length_penalty: float) -> float:
        """logprob / n_generated^length_penalty: only generated tokens count, not the prompt."""
        return self.logprob / max(self.n_generated, 1) ** length_penalty


@dataclass
class BeamResult:
    """The best hypothesis, every finished one, and the beam after each step (for explaining).
    `ranked`: the finished hypotheses and those still live at the end, best score first (the
    n-best list; `best` is its first)."""

    best: Hypothesis
    finished: list[Hypothesis]
    steps: list[list[Hypothesis]]
    ranked: list[Hypothesis] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return self.best.ids


def top_tokens(logp: np.ndarray, width: int) -> np.ndarray:
    """The `width` most likely tokens of one distribution, best first, ties to the lower id."""
    return np.argsort(-logp, kind="stable")[:width]


class Beam:
    """One beam search, a step at a time: the algorithm of `beam_search`, driven from outside.

    The caller scores every live hypothesis (`alive`, all of one length) and hands `advance` each
    one's `width` best next tokens (`top_tokens`: best first, ties to the lower id) with their
    log-probabilities. Each step ranks the candidates by summed log-probability and keeps the best
    `width`; those ending in EOS move to `finished` (the best `width` of them by score are kept).
    `parents[i]` is the index, in the previous `alive`, of the hypothesis that the i-th live one
    extends (a batched decoder reorders its KV cache by it). `done` turns True when no hypothesis
    is live, at the length limit (`max_new_tokens` steps, or `max_len` tokens), or when `width`
    hypotheses are finished and the worst of them already beats the best live one by score.
    """

    def __init__(
        self,
        prompt: list[int],
        max_new_tokens: int,
        eos_id: int | None,
        width: int = 4,
        length_penalty: float = 1.0,
        max_len: int | None = None,
    ):
        if width < 1:
            raise GlassformerError(f"beam width must be >= 1, got {width}")
        self.width, self.eos_id, self.length_penalty = width, eos_id, length_penalty
        self.max_new_tokens, self.max_len = max_new_tokens, max_len
        self.alive = [Hypothesis(list(prompt), 0.0, 0)]
        self.parents = [0]
        self.finished: list[Hypothesis] = []
        self.steps: list[list[Hypothesis]] = []
        self._stopped = False  # no live hypothesis, or the finished ones cannot be beaten

    @property
    def done(self) -> bool:
        if self._stopped or len(self.steps) >= self.max_new_tokens:
            return True
        return self.max_len is not None and len(self.alive[0].ids) >= self.max_len

    def advance(self, tokens, logps) -> None:
        """tokens, logps: per live hypothesis (in `alive` order), its next tokens and their
        log-probabilities, best first."""
        candidates = []  # (summed log-probability, index of the parent in alive, token)
        tokens, logps = np.asarray(tokens).tolist(), np.asarray(logps, dtype=np.float64).tolist()
        for p, (h, toks, lps) in enumerate(zip(self.alive, tokens, logps, strict=True)):
            base = h.logprob
            candidates += [(base + lp, p, t) for t, lp in zip(toks, lps, strict=True)]
        candidates.sort(key=lambda c: -c[0])  # stable: ties keep hypothesis order
        kept = []  # (hypothesis, index of its parent in alive): only the best `width` are built
        for logprob, p, token in candidates[: self.width]:
            h = self.alive[p]
            c = Hypothesis(h.ids + [token], logprob, h.n_generated + 1, token == self.eos_id)
            kept.append((c, p))
        self.alive = [c for c, _ in kept if not c.finished]
        self.parents = [p for c, p in kept if not c.finished]
        ended = [c for c, _ in kept if c.finished]
        self.steps.append([c for c, _ in kept])
        if ended:
            self.finished += ended
            self.finished.sort(key=lambda h: -h.score(self.length_penalty))
            del self.finished[self.width :]
        if not self.alive:
            self._stopped = True
            return
        best_alive = max(h.score(self.length_penalty) for h in self.alive)
        worst_finished = self.finished[-1].score(self.length_penalty) if self.finished else None
        if len(self.finished) >= self.width and worst_finished >= best_alive:
            self._stopped = True

    def result(self) -> BeamResult:
        # Hypotheses still live at the length limit compete with the finished ones (a stable
        # sort: the first of equal scores stays first, as max() would choose it).
        ranked = sorted(self.finished + self.alive, key=lambda h: -h.score(self.length_penalty))
        return BeamResult(ranked[0], self.finished, self.steps, ranked)


def beam_search(
    step: StepFn,
    prompt: list[int],
    max_new_tokens: int,
    eos_id: int | None,
    width: int = 4,
    length_penalty: float = 1.0,
    max_len: int | None = None,
    step_many: Callable[[list[list[int]]], np.ndarray] | None = None,
) -> BeamResult:
    """Keep the `width` most likely partial sequences; a candidate that ends in EOS is finished.

    Each step extends every live hypothesis by its `width` most likely tokens (float64
    log-softmax), and `Beam` keeps the best `width` candidates by summed log-probability. The
    search stops when no hypothesis is live, at the length limit, or when `width` hypotheses are
    finished and the worst of them already beats the best live one. Width 1 is greedy decoding.
    step_many, if given, scores all live hypotheses (equal lengths) in one call -> (n, V) logits.
    """
    beam = Beam(prompt, max_new_tokens, eos_id, width, length_penalty, max_len)
    while not beam.done:
        ids = [h.ids for h in beam.alive]
        scores = step_many(ids) if step_many is not None else [step(x) for x in ids]
        logps = [_log_softmax(logits) for logits in scores]
        tops = [top_tokens(logp, width) for logp in logps]
        beam.advance(tops, [logp[t] for logp, t in zip(logps, tops, strict=True)])
    return beam.result()
