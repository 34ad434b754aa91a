"""Decoding strategies over a step function, knowing nothing of engines or tokenizers.

A step function maps the token ids so far to the logits of the next token (V,). Greedy decoding
(seed 002): start from SOS or a prompt, append the argmax token, stop at EOS or at the length
limit. Sampling (temperature, top-k, top-p, seeded) and beam search use the same step function;
each records what it did at every step so that a generation can be explained afterwards. Greedy
and sampling are generators underneath (`greedy_tokens`, `sample_tokens`, `strategy_tokens`:
each new token as it is chosen, the Generation at the end): a stream and a whole generation run
the same loop.

`softmax` here is the package's one softmax: the reference engine's `softmax` is this one (plus
the article's naive form), since decoding may import no engine and the engine may import this.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from glassformer.errors import InputError, Said, param

StepFn = Callable[[list[int]], np.ndarray]
SEED_LIMIT = 2**32  # the command line's --seed range: [0, 2**32)


# -- the checks at the entry points: the command line's wording, before any step is run ---------


def _shown(value) -> str:
    return str(value) if isinstance(value, numbers.Number) else repr(value)


def _integer(value, name: str, low: int, says: str) -> None:
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low
    if not ok:
        raise InputError(f"{name} must be {says}, got {_shown(value)}")


def _real(value, name: str, says: str, ok) -> None:
    good = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (good and math.isfinite(value) and ok(value)):
        raise InputError(f"{name} must be {says}, got {_shown(value)}")


def check_limits(step, prompt, max_new_tokens, eos_id, max_len) -> list[int]:
    """What every strategy takes: a step function, a prompt of token ids, the length bounds."""
    if not callable(step):
        raise InputError(
            f"step must be a function (ids so far -> next-token logits), got {type(step).__name__}"
        )
    ids = list(prompt) if isinstance(prompt, list | tuple | np.ndarray) else None
    if not ids:
        raise InputError(
            "the prompt is empty or not a list of token ids: give at least one token (an "
            "encoder-decoder's start token)"
        )
    if not all(isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in ids):
        raise InputError(f"the prompt must be integer token ids, got {ids[:8]!r}")
    _integer(max_new_tokens, "max_new_tokens", 1, "at least 1")
    if eos_id is not None:
        _integer(eos_id, "eos_id", 0, "a token id (an integer >= 0) or None")
    if max_len is not None:
        _integer(max_len, "max_len", 1, "an integer >= 1 or None")
    return [int(t) for t in ids]


def check_sampling(temperature, top_k, top_p, seed=None) -> None:
    """The sampling values, in the command line's words. Temperature 0 is refused, as the
    command line and the explorer refuse it: the most likely token is `greedy`'s (and a tiny
    temperature tends to it, see `filter_probs`)."""
    _real(temperature, "temperature", "a finite number > 0", lambda t: t > 0)
    if top_k is not None:
        _integer(top_k, "top_k", 1, ">= 1")
    if top_p is not None:
        _real(top_p, "top_p", "in (0, 1]", lambda p: 0 < p <= 1)
    if seed is not None:
        ok = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
        if not (ok and 0 <= seed < SEED_LIMIT):
            raise InputError(f"seed must be an integer in [0, 2**32), got {_shown(seed)}")


def check_beam(width, length_penalty) -> None:
    _integer(width, "beam width", 1, ">= 1")
    _real(length_penalty, "length_penalty", "a finite number", lambda _: True)


def _logits(step: StepFn, ids: list[int]) -> np.ndarray:
    """The next-token logits (V,) of `step`, refused when they cannot be decoded from."""
    z = np.asarray(step(ids), dtype=np.float64)
    if z.ndim != 1 or z.size == 0:
        raise InputError(
            f"the step function returned logits of shape {z.shape}; it must return the next "
            "token's logits (V,), e.g. reference.next_token_logits(params, cfg)"
        )
    if not (z < np.inf).all() or z.max() == -np.inf:  # NaN, +inf, or no token possible
        raise InputError(
            f"the step function returned non-finite logits after {len(ids)} tokens (NaN, +inf or "
            "all -inf); the weights or the input overflow: check them with glassformer.numerics"
        )
    return z


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


def softmax(x: np.ndarray, axis: int = -1, temperature: float = 1.0) -> np.ndarray:
    """softmax(x / T)_i = exp(x_i / T) / Σ_j exp(x_j / T) along `axis`: the one softmax of the
    package (the reference engine's, the decoders', the explorer's).

    Computed as exp((x_i - max x) / T) / Σ_j exp((x_j - max x) / T): the same numbers, but the
    shifted values are <= 0, so that no exp and no finite temperature overflows (a tiny T sends
    every value below the maximum to 0, as the limit T -> 0 does). A row that is entirely -inf
    (every position masked) gives zeros, not NaN (docs/design.md)."""
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    shifted = x - np.where(np.isfinite(m), m, 0.0)  # <= 0, the largest at 0
    if temperature != 1.0:
        with np.errstate(over="ignore", under="ignore"):  # a tiny T: -inf below the max
            shifted /= temperature
    e = np.exp(shifted)
    s = e.sum(axis=axis, keepdims=True)
    if np.all(s > 0):  # the usual case: divide in place, no second array
        e /= s
        return e
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


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
    return finish(greedy_tokens(step, prompt, max_new_tokens, eos_id, max_len))


def greedy_tokens(
    step: StepFn,
    prompt: list[int],
    max_new_tokens: int,
    eos_id: int | None = None,
    max_len: int | None = None,
) -> Generator[int, None, Generation]:
    """`greedy` a token at a time: yields each new token id as it is chosen (the Generation so
    far already holds it), returns the Generation (`finish` runs it to its end)."""
    prompt = check_limits(step, prompt, max_new_tokens, eos_id, max_len)
    out = Generation(ids=list(prompt), n_prompt=len(prompt))
    for _ in range(max_new_tokens):
        if max_len is not None and len(out.ids) >= max_len:
            break
        probs = softmax(_logits(step, out.ids))
        token = int(np.argmax(probs))
        out.ids.append(token)
        out.chosen_probs.append(float(probs[token]))
        out.distributions.append(probs)
        out.stopped_at_eos = token == eos_id
        yield token
        if out.stopped_at_eos:
            break
    return out


def finish(tokens: Generator):
    """Run a decoding that yields its tokens as it chooses them (`greedy_tokens`,
    `sample_tokens`, `strategy_tokens`) to its end: what it returns (a Generation or
    BeamResult)."""
    while True:
        try:
            next(tokens)
        except StopIteration as end:
            return end.value


def filter_probs(
    logits: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """The sampling distribution: softmax(logits / temperature), then keep the top_k most likely
    tokens, then the smallest set whose probability reaches top_p; renormalised.

    Temperature must be a finite number > 0 (`check_sampling`); a tiny one (1e-300) sends every
    token below the maximum to probability 0, as the limit T -> 0 does (the most likely tokens
    share it if tied): `softmax` shifts by the maximum before it divides by T."""
    check_sampling(temperature, top_k, top_p)
    z = np.asarray(logits, dtype=np.float64)  # (V,)
    probs = softmax(z, temperature=temperature)  # (V,)
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


class Draw(NamedTuple):
    """One sampling draw: the token, the uniform number u in [0, 1) it came from, and the
    cumulative distribution (V,) that u fell in (vocabulary order, renormalised to end at 1)."""

    token: int
    u: float
    cdf: np.ndarray


def draw(probs: np.ndarray, rng: np.random.Generator) -> Draw:
    """One token drawn from `probs` (V,): u = rng.random(), and the token is the first whose
    cumulative probability exceeds u. That is what `rng.choice(len(probs), p=probs)` does, step
    for step, so a seed gives the same tokens either way (a test holds the two together)."""
    cdf = np.cumsum(np.asarray(probs, dtype=np.float64))  # (V,)
    cdf /= cdf[-1]
    u = float(rng.random())
    return Draw(int(np.searchsorted(cdf, u, side="right")), u, cdf)


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
    """Draw each next token (`draw`) from `filter_probs(...)`; the same seed gives the same
    tokens."""
    limits = (max_new_tokens, eos_id, max_len)
    return finish(sample_tokens(step, prompt, *limits, temperature, top_k, top_p, seed))


def sample_tokens(
    step: StepFn,
    prompt: list[int],
    max_new_tokens: int,
    eos_id: int | None = None,
    max_len: int | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
) -> Generator[int, None, Generation]:
    """`sample` a token at a time: yields each new token id as it is drawn, returns the
    Generation."""
    prompt = check_limits(step, prompt, max_new_tokens, eos_id, max_len)
    check_sampling(temperature, top_k, top_p, seed)
    rng = np.random.default_rng(seed)
    out = Generation(ids=list(prompt), n_prompt=len(prompt))
    for _ in range(max_new_tokens):
        if max_len is not None and len(out.ids) >= max_len:
            break
        logits = _logits(step, out.ids)
        probs = filter_probs(logits, temperature, top_k, top_p)
        token = draw(probs, rng).token
        out.ids.append(token)
        out.chosen_probs.append(float(probs[token]))
        out.distributions.append(softmax(logits))
        out.kept.append(np.flatnonzero(probs))
        out.stopped_at_eos = token == eos_id
        yield token
        if out.stopped_at_eos:
            break
    return out


@dataclass
class Hypothesis:
    ids: list[int]
    logprob: float  # sum of the generated tokens' log-probabilities
    n_generated: int
    finished: bool = False

    def score(self, length_penalty: float) -> float:
        """logprob / n_generated^length_penalty: only generated tokens count, not the prompt.

        A penalty beyond ±16 is computed through logs, so that any finite penalty gives a
        number: a score beyond the float range is the most negative float (beam search ranks by
        `rank`, which stays exact)."""
        n = max(self.n_generated, 1)
        if abs(length_penalty) <= _DIRECT:
            return self.logprob / n**length_penalty
        if self.logprob == 0 or n == 1:
            return self.logprob
        log_size = math.log(-self.logprob) - length_penalty * math.log(n)  # log |score|
        return -_MAX if log_size > _LOG_MAX else -math.exp(log_size)

    def rank(self, length_penalty: float) -> tuple[float, float]:
        """A sort key, smaller first, in the order of `score`, larger first. Up to a penalty of
        ±16 it is -score itself (n^16 stays in range for any length); beyond, log |score| =
        log(-logprob) - p·log(n) divided by |p| (the same order, no overflow however large p),
        with equal keys ordered by logprob."""
        if abs(length_penalty) <= _DIRECT:
            return -self.score(length_penalty), 0.0
        with np.errstate(divide="ignore"):
            magnitude = float(np.log(-self.logprob)) if self.logprob < 0 else -math.inf
        p = abs(length_penalty)
        return magnitude / p - math.copysign(1.0, length_penalty) * math.log(
            max(self.n_generated, 1)
        ), -self.logprob


_DIRECT = 16.0  # |length_penalty| up to which a score is computed as written
_MAX = float(np.finfo(np.float64).max)
_LOG_MAX = math.log(_MAX)


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
        check_beam(width, length_penalty)
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
            self.finished.sort(key=lambda h: h.rank(self.length_penalty))
            del self.finished[self.width :]
        if not self.alive:
            self._stopped = True
            return
        best_alive = min(h.rank(self.length_penalty) for h in self.alive)
        if len(self.finished) >= self.width:
            worst_finished = self.finished[-1].rank(self.length_penalty)
            if worst_finished[0] <= best_alive[0]:  # its score at least as good
                self._stopped = True

    def result(self) -> BeamResult:
        # Hypotheses still live at the length limit compete with the finished ones (a stable
        # sort: the first of equal scores stays first, as max() would choose it).
        ranked = sorted(self.finished + self.alive, key=lambda h: h.rank(self.length_penalty))
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
    prompt = check_limits(step, prompt, max_new_tokens, eos_id, max_len)
    beam = Beam(prompt, max_new_tokens, eos_id, width, length_penalty, max_len)
    while not beam.done:
        ids = [h.ids for h in beam.alive]
        if step_many is not None:
            scores = np.asarray(step_many(ids), dtype=np.float64)
        else:
            scores = [_logits(step, x) for x in ids]
        logps = [_log_softmax(logits) for logits in scores]
        tops = [top_tokens(logp, width) for logp in logps]
        beam.advance(tops, [logp[t] for logp, t in zip(logps, tops, strict=True)])
    return beam.result()


# -- the options of a generation, as a user gives them ----------------------------------------

SAMPLING_OPTIONS = {"temperature": 1.0, "top_k": None, "top_p": None, "seed": None}
BEAM_OPTIONS = {"beam_width": 4, "length_penalty": 1.0}
STRATEGY_RULE = Said(
    f"A sampling option ({', '.join(map(param, SAMPLING_OPTIONS))}) without {param('strategy')} "
    f"means {param('strategy', 'sample')}, a beam option "
    f"({', '.join(map(param, BEAM_OPTIONS))}) {param('strategy', 'beam')}, and the command says "
    "so in a note; an option of another strategy than the one given is refused."
)


@dataclass(frozen=True)
class Decoding:
    """How to generate: the strategy, its options, and the bound on new tokens (None: the
    model's max_len). `Decoding.settle(...)` makes one from what a user gave."""

    strategy: str = "greedy"
    max_new_tokens: int | None = None
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    beam_width: int = 4
    length_penalty: float = 1.0
    implied: str | None = None  # the note saying a strategy the options implied (`settle`)

    @classmethod
    def settle(cls, strategy: str | None = None, max_new_tokens=None, **given) -> Decoding:
        """The strategy by STRATEGY_RULE from the options given (None: not given), defaults
        filled in, `implied` saying a strategy the options implied; an option that would do
        nothing is one clear error. Nothing is checked against a model here (`Runtime.decoded`
        does: the beam within the vocabulary)."""
        unknown = set(given) - set(SAMPLING_OPTIONS) - set(BEAM_OPTIONS)
        if unknown:
            raise InputError(f"unknown decoding option {sorted(unknown)[0]!r}")
        sampling = [n for n in SAMPLING_OPTIONS if given.get(n) is not None]
        beam = [n for n in BEAM_OPTIONS if given.get(n) is not None]
        implied = None
        if strategy is None:
            if sampling and beam:
                raise InputError(
                    f"{param(sampling[0])} is a sampling option and {param(beam[0])} a beam "
                    f"search option; choose one {param('strategy')}"
                )
            strategy = "sample" if sampling else "beam" if beam else "greedy"
            if sampling or beam:
                used = " and ".join(param(n) for n in sampling or beam)
                implied = Said(f"{used} given: decoding with {param('strategy', strategy)}")
        if strategy not in ("greedy", "sample", "beam"):
            raise InputError(f"unknown strategy {strategy!r}; use greedy, sample or beam")
        for kind, options in (("sample", sampling), ("beam", beam)):
            if options and strategy != kind:
                raise InputError(
                    f"{param(options[0])} does nothing with {param('strategy', strategy)}; drop "
                    f"it, or use {param('strategy', kind)}"
                )
        filled = {n: given[n] if given.get(n) is not None else d for n, d in _DEFAULTS.items()}
        return cls(strategy, max_new_tokens, **filled, implied=implied)


_DEFAULTS = SAMPLING_OPTIONS | BEAM_OPTIONS


def strategy_tokens(
    step: StepFn,
    prompt: list[int],
    how: Decoding,
    max_new_tokens: int,
    eos_id: int | None,
    max_len: int | None,
) -> Generator[int, None, Generation | BeamResult]:
    """Greedy, sampling or beam search as `how` says, yielding each new token id as it is
    chosen (beam search yields none: which hypothesis wins is known only at its end); returns
    the `Generation` or `BeamResult` (`finish` runs it to its end). The bounds are given apart:
    `how.max_new_tokens` may be None, the model's max_len."""
    limits = dict(max_new_tokens=max_new_tokens, eos_id=eos_id, max_len=max_len)
    if how.strategy == "beam":
        width, penalty = how.beam_width, how.length_penalty
        return beam_search(step, prompt, width=width, length_penalty=penalty, **limits)
    if how.strategy == "sample":
        sampling = dict(temperature=how.temperature, top_k=how.top_k, top_p=how.top_p)
        return (yield from sample_tokens(step, prompt, **limits, **sampling, seed=how.seed))
    return (yield from greedy_tokens(step, prompt, **limits))


def ended_at_eos(result) -> bool:
    """Whether a Generation or a BeamResult's best hypothesis ended with the end token (then the
    position reading it predicted nothing the output used)."""
    best = getattr(result, "best", None)  # a BeamResult's best hypothesis
    return bool(best.finished if best is not None else result.stopped_at_eos)


def stop_reason(result, n_prompt: int, decoding: Decoding, cfg) -> str:
    """Why a generation ended, in words: EOS, the max_new_tokens bound, or the decoder's
    max_len (the longest sequence it has positions for)."""
    eos = ended_at_eos(result)
    n_new = len(result.ids) - n_prompt
    max_new = decoding.max_new_tokens or cfg.max_len
    if eos:
        return Said(f"stopped at EOS after {n_new} new token{'s' * (n_new != 1)}")
    if n_new >= max_new:
        if decoding.max_new_tokens is None:
            return Said(
                f"stopped after {n_new} new tokens ({param('max_new_tokens')}, default max_len)"
            )
        return Said(f"stopped after {param('max_new_tokens', max_new)}")
    return Said(
        f"stopped at the decoder's max_len {cfg.max_len}: it has no position for token "
        f"{cfg.max_len + 1}"
    )


def context_slid(n_prompt: int, n_new: int, asked: int | None, cfg) -> str:
    """What happened when a decoder's sequence outgrew its max_len: the text itself was longer,
    or the prompt plus what was generated, with what to do to stay within the context."""
    L = cfg.max_len
    slid = f"each token after token {L} was predicted from the last {L} only (a sliding window)"
    if n_prompt > L:
        return Said(
            f"the text has {n_prompt} tokens, more than the model's context (max_len {L}): " + slid
        )
    flag = param("max_new_tokens")
    asked = param("max_new_tokens", asked) if asked is not None else f"the default {flag}"
    return Said(
        f"the prompt ({n_prompt} tokens) + {n_new} new tokens ({asked}) is more than the model's "
        f"context (max_len {L}): {slid}; give {param('max_new_tokens', L - n_prompt)} or less "
        "to stay within it"
    )
