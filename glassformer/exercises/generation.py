"""Exercises 14-16: greedy decoding to EOS, one step of beam search, and a KV cache that equals
the uncached run.

The expected values come from glassformer's own decoders (`decoding.greedy`, `decoding.Beam`)
and the reference engine's causal attention, on the article's model first (the hello-world
preset with the walkthrough's seeded weights) and then on small random step functions.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from glassformer import reference as R
from glassformer import weights
from glassformer.config import preset
from glassformer.decoding import Beam, Hypothesis, greedy, top_tokens
from glassformer.exercises.base import (
    RASCHKA,
    RT,
    SEED_002,
    WALK_R,
    WALK_RT,
    AnswerError,
    Case,
    Exercise,
    LengthLimit,
    Mistake,
    Part,
    answer,
    case,
    chapter3,
    fresh,
    from_ref,
    from_walk,
    hello_world,
    kind_of,
    rng,
    shown,
    step_of,
    traced,
)
from glassformer.tokenizer import article_tokenizer
from glassformer.walkthrough.random_transformer import LOGITS_PRINTED_PROBS

# T: tokens  V: vocabulary  d: d_in  c: d_out (the keys' dimension)


@functools.cache
def _article_model():
    """The walkthrough's hello-world model (seed 0, std 0.3) reading "hello world": its step
    function (decoder ids -> next-token logits), its tokenizer and config."""
    cfg, tok = preset("hello-world"), article_tokenizer()
    p = weights.init(cfg, seed=0, std=0.3)
    return R.next_token_logits(p, cfg, tok.encode("hello world")), tok, cfg


def _limited(step, max_len: int):
    """The step function a learner calls: refuses to run past max_len ids, returns a copy."""

    def step_fn(ids):
        ids = [int(t) for t in ids]
        if len(ids) > max_len:
            raise LengthLimit(
                f"step() was given {len(ids)} ids, more than max_len = {max_len}: stop when the "
                "sequence holds max_len ids"
            )
        return np.array(step(ids), dtype=np.float64)

    return step_fn


def _bigram(g, V: int, eos: int, bos: int, eos_bias: float):
    """A step function whose logits depend on the last id only (a bigram table)."""
    table = g.standard_normal((V, V))
    table[:, bos] = -5.0  # SOS is never predicted
    table[:, eos] += eos_bias
    return lambda ids: table[ids[-1]]


# -- 14. greedy decoding to EOS -----------------------------------------------------------------


def _greedy_cases() -> list[Case]:
    step, tok, cfg = _article_model()
    ids = step_of(hello_world(), "generate.output_ids")
    out = [
        case(
            "the article's model reading 'hello world', seeded weights, from SOS",
            (_limited(step, cfg.max_len), tok.bos_id, tok.eos_id, cfg.max_len),
            "ids",
            ids,
            from_walk("generate.output_ids", WALK_RT),
        )
    ]
    g = rng(14)
    for title, V, max_len, eos_bias in (
        ("a random bigram model that reaches EOS", 8, 10, 0.8),
        ("a random bigram model that never says EOS: stop at max_len", 6, 6, -9.0),
        ("a random bigram model whose first token is EOS", 5, 5, 9.0),
        ("max_len 2: one new token", 7, 2, 0.0),
    ):
        bos, eos = 0, V - 1
        step = _bigram(g, V, eos, bos, eos_bias)
        want = greedy(step, [bos], max_len - 1, eos_id=eos, max_len=max_len).ids
        args = (_limited(step, max_len), bos, eos, max_len)
        out.append(case(title, args, "ids", want, "decoding.greedy"))
    return out


def _run_ids(fn, c: Case, parts) -> dict[str, np.ndarray]:
    out = fn(*fresh(c.args))
    if not isinstance(out, list | tuple | np.ndarray):
        raise AnswerError(f"returned a {kind_of(out)}: return the list of ids, SOS first")
    ids = answer(list(out), "the list of ids")
    if ids.ndim != 1 or not np.all(ids == np.round(ids)):
        raise AnswerError("return a flat list of integer token ids, SOS first")
    return {"ids": ids}


def _greedy(change: str):
    def fn(step, bos, eos, max_len):
        if change == "no_eos":
            return greedy(step, [bos], max_len - 1, eos_id=None, max_len=max_len).ids
        if change == "new_tokens":
            return greedy(step, [bos], max_len, eos_id=eos).ids
        if change == "short":
            return greedy(step, [bos], max(max_len - 2, 1), eos_id=eos, max_len=max_len - 1).ids
        gen = greedy(step, [bos], max_len - 1, eos_id=eos, max_len=max_len)
        if change == "eos_dropped":
            return gen.ids[:-1] if gen.stopped_at_eos else gen.ids
        return gen.ids[1:]  # "no_sos"

    return fn


GREEDY = Exercise(
    number=14,
    slug="greedy",
    title="Greedy decoding to EOS",
    article=RT,
    function="greedy_decode",
    params="step, bos_id, eos_id, max_len",
    summary="Greedy decoding: from SOS, append the most likely next token until EOS or max_len.",
    equation="ids = [SOS];  repeat: next = argmax step(ids);  ids.append(next)\n"
    "until next == EOS (EOS is kept) or len(ids) == max_len",
    passage="« Choisir systématiquement le token à la probabilité la plus élevée correspond au\n"
    "greedy decoding » ; « répéter jusqu’à obtenir EOS ou atteindre la longueur maximale »\n"
    f"({SEED_002})\n"
    "(always choosing the most probable token is greedy decoding; repeat until EOS or the\n"
    "maximum length.)",
    shapes="step     a function: the ids so far (a list of ints) -> the next token's logits (V,)\n"
    "bos_id   int   the start token SOS (the first id of the result)\n"
    "eos_id   int   the end token EOS\n"
    "max_len  int   the most ids the result may hold, SOS included\n"
    "returns  list[int]  the ids, SOS first (EOS last if it was generated)",
    notes="The argmax of the logits is the argmax of the probabilities (softmax keeps the order).",
    parts=(Part("ids", "the generated ids, SOS first"),),
    cases=_greedy_cases,
    run=_run_ids,
    mistakes=(
        Mistake(
            "did not stop at EOS",
            "stop as soon as the token appended is EOS (keep it, as the last id)",
            _greedy("no_eos"),
            "the loop's end",
        ),
        Mistake(
            "EOS left out of the result",
            "append EOS, then stop: the article's output ends with EOS",
            _greedy("eos_dropped"),
            "the loop's end",
        ),
        Mistake(
            "max_len counted as new tokens",
            "max_len bounds the whole sequence, SOS included: stop when len(ids) == max_len",
            _greedy("new_tokens"),
            "the loop's end",
        ),
        Mistake(
            "stopped one token early",
            "stop when the sequence holds max_len ids, not max_len - 1",
            _greedy("short"),
            "the loop's end",
        ),
        Mistake(
            "SOS left out of the result",
            "return the whole sequence, SOS first, as the article writes 'SOS hola mundo ...'",
            _greedy("no_sos"),
            "ids",
        ),
    ),
    fallback="print step(ids).argmax() at each step and compare with generate.step0.probs, "
    "generate.step1.probs ... of glassformer walkthrough hello-world",
)

# -- 15. one step of beam search ----------------------------------------------------------------


def _beam_reference(hyps, logprobs, width: int) -> tuple[np.ndarray, np.ndarray]:
    """decoding.Beam's candidates kept by one `advance` (no EOS: none finishes)."""
    beam = Beam(list(hyps[0][0]), max_new_tokens=1, eos_id=None, width=width)
    beam.alive = [Hypothesis(list(ids), float(lp), 1) for ids, lp in hyps]
    tops = [top_tokens(row, width) for row in logprobs]
    beam.advance(tops, [row[t] for row, t in zip(logprobs, tops, strict=True)])
    kept = beam.steps[-1]
    return np.array([h.ids for h in kept], dtype=np.float64), np.array([h.logprob for h in kept])


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _beam_case(title: str, hyps, logprobs, width: int, source: str) -> Case:
    ids, lp = _beam_reference(hyps, logprobs, width)
    sources = {"ids": source, "logprob": source}
    return Case(title, (hyps, logprobs, width), {"ids": ids, "logprob": lp}, sources)


def _beam_cases() -> list[Case]:
    step, tok, _ = _article_model()
    first = [([tok.bos_id], 0.0)]
    lp = _log_softmax(np.array(LOGITS_PRINTED_PROBS))[None]  # (1, V)
    source = "decoding.Beam.advance"
    title = "the article's SOS and its printed probabilities, width 3"
    out = [_beam_case(title, first, lp, 3, source)]
    ids, lps = _beam_reference(first, lp, 3)
    second = [([int(t) for t in row], float(s)) for row, s in zip(ids, lps, strict=True)]
    lp2 = np.stack([_log_softmax(step(h)) for h, _ in second])
    title = "the article's model, its second step from those 3"
    out.append(_beam_case(title, second, lp2, 3, source))
    g = rng(15)
    for n, V, width, L in ((2, 6, 2, 2), (3, 5, 3, 3), (1, 4, 4, 1), (4, 7, 4, 2)):
        hyps = [(g.integers(0, V, L).tolist(), float(-3 * g.random())) for _ in range(n)]
        logprobs = _log_softmax(2 * g.standard_normal((n, V)))
        title = f"random: {n} hypotheses, vocabulary {V}, width {width}"
        out.append(_beam_case(title, hyps, logprobs, width, source))
    return out


def _run_beam(fn, c: Case, parts) -> dict[str, np.ndarray]:
    out = fn(*fresh(c.args))
    if not isinstance(out, list | tuple):
        raise AnswerError(f"returned a {kind_of(out)}: return a list of (ids, logprob) pairs")
    rows = []
    for item in out:
        if not (isinstance(item, list | tuple) and len(item) == 2):
            raise AnswerError(f"each hypothesis must be a pair (ids, logprob), got {shown(item)}")
        logprob = answer(item[1], "each hypothesis's logprob")
        if logprob.size != 1:
            raise AnswerError(f"each hypothesis's logprob must be one number, got {shown(item[1])}")
        rows.append((answer(item[0], "each hypothesis's ids").ravel(), float(logprob.ravel()[0])))
    if len({len(ids) for ids, _ in rows}) > 1:
        raise AnswerError("the hypotheses returned have different lengths: each is one longer")
    ids = np.array([r[0] for r in rows]).reshape(len(rows), -1)
    return {"ids": ids, "logprob": np.array([r[1] for r in rows])}


def _candidates(hyps, logprobs, score, per_hyp: int | None = None):
    """Every (score, ids + [t], logprob + lp, lp) ranked by score(logprob, lp); per_hyp: only
    each hypothesis's best."""
    out = []
    for (ids, base), row in zip(hyps, logprobs, strict=True):
        mine = [(score(base, lp), ids + [t], base + lp, lp) for t, lp in enumerate(row)]
        mine.sort(key=lambda c: -c[0])
        out += mine[:per_hyp] if per_hyp else mine
    out.sort(key=lambda c: -c[0])
    return out


def _beam(change: str):
    def fn(hyps, logprobs, width):
        hyps = [(list(ids), lp) for ids, lp in hyps]
        if change == "token_alone":
            ranked = _candidates(hyps, logprobs, lambda base, lp: lp)
        elif change == "per_hypothesis":
            ranked = _candidates(hyps, logprobs, lambda b, lp: b + lp, width)
            return [(ids, s) for _, ids, s, _ in ranked]
        elif change == "best_only":
            ranked = _candidates(hyps[:1], logprobs[:1], lambda base, lp: base + lp)
        else:
            ranked = _candidates(hyps, logprobs, lambda base, lp: base + lp)
        if change == "not_summed":
            return [(ids, lp) for _, ids, _, lp in ranked[:width]]
        kept = [(ids, s) for _, ids, s, _ in ranked[:width]]
        return kept[::-1] if change == "worst_first" else kept

    return fn


BEAM_STEP = Exercise(
    number=15,
    slug="beam_step",
    title="One step of beam search",
    article=RT,
    function="beam_step",
    params="hypotheses, logprobs, width",
    summary="One step of beam search: the `width` best one-token extensions of the hypotheses.",
    equation="score(ids + [t]) = logprob(ids) + log p(t | ids)   (log-probabilities add up)\n"
    "keep the `width` best of all n·V candidates, best first",
    passage="« Choisir systématiquement le token à la probabilité la plus élevée correspond au\n"
    f"greedy decoding, qui n’est pas toujours la meilleure stratégie » ({SEED_002})\n"
    "(greedy is not always the best strategy: beam search keeps several hypotheses and\n"
    "extends each, ranking them by the log-probability of the whole sequence.)",
    shapes="hypotheses  a list of n pairs (ids: list[int], logprob: float), all of one length\n"
    "logprobs    (n, V)  row i: the log-probabilities of the next token after hypothesis i\n"
    "width       int     how many hypotheses to keep\n"
    "returns     a list of `width` pairs (ids + [token], logprob + log p), best first\n"
    "            (ties: the earlier hypothesis first, then the lower token id)",
    notes="No EOS here: glassformer's Beam moves hypotheses ending in EOS to a finished list;\n"
    "this exercise is the ranking step alone (decoding.Beam.advance).",
    parts=(Part("ids", "the kept hypotheses' ids"), Part("logprob", "their summed log-probs")),
    cases=_beam_cases,
    run=_run_beam,
    mistakes=(
        Mistake(
            "ranked by the new token's log-probability alone",
            "a hypothesis's score is the sum over all its tokens: logprob(ids) + log p(t | ids)",
            _beam("token_alone"),
            "score",
        ),
        Mistake(
            "kept `width` candidates per hypothesis instead of `width` in all",
            "rank all n·V candidates together and keep the best `width` of them",
            _beam("per_hypothesis"),
            "kept",
        ),
        Mistake(
            "only the best hypothesis extended",
            "extend every live hypothesis, not only the first: that would be greedy with a list",
            _beam("best_only"),
            "candidates",
        ),
        Mistake(
            "sorted worst first",
            "return the kept hypotheses best first (the largest summed log-probability first)",
            _beam("worst_first"),
            "kept",
        ),
        Mistake(
            "the log-probabilities not added up",
            "the new hypothesis's logprob is the old one plus the token's: logprob + log p",
            _beam("not_summed"),
            "score",
        ),
    ),
    fallback="compare with glassformer.decoding.Beam: its advance() ranks the candidates",
)

# -- 16. a KV cache that equals the uncached run ------------------------------------------------


def _cache_cases() -> list[Case]:
    tr, g = chapter3(), rng(16)
    X = step_of(tr, "inputs")
    W = tuple(step_of(tr, f"v2.{w}").T for w in ("W_query", "W_key", "W_value"))  # (d, c)
    title = "the article's 'Your journey starts with one step', one token at a time"
    inputs = [(title, X, W, "causal.C")]
    for T, d, c in ((5, 3, 2), (1, 4, 3), (7, 4, 4), (3, 2, 5)):
        W = tuple(g.standard_normal((d, c)) for _ in range(3))
        X = g.standard_normal((T, d))
        inputs.append((f"random X ({T}, {d}), weights ({d}, {c})", X, W, ""))
    out = []
    for title, X, (Wq, Wk, Wv), walk in inputs:
        K, V = X @ Wk, X @ Wv
        if walk:
            C, src = step_of(tr, walk), from_walk(walk, WALK_R)
        else:
            C = traced("C", R.attention, X @ Wq, K, V, mask=R.causal_mask(len(X)))
            src = from_ref("C", "attention") + " with the causal mask (no cache)"
        sources = {"K": "K = X·Wk of the uncached run", "V": "V = X·Wv of the uncached run"}
        out.append(Case(title, (X, Wq, Wk, Wv), {"K": K, "V": V, "C": C}, sources | {"C": src}))
    return out


def _run_cache(fn, c: Case, parts) -> dict[str, np.ndarray]:
    X, Wq, Wk, Wv = c.args
    width = Wk.shape[1]
    cache = (np.zeros((0, width)), np.zeros((0, width)))
    zs = []
    for t in range(len(X)):
        out = fn(X[t].copy(), Wq.copy(), Wk.copy(), Wv.copy(), cache)
        if not (isinstance(out, list | tuple) and len(out) == 2):
            raise AnswerError(f"token {t}: return a pair (z, (K, V)), got {kind_of(out)}")
        z, cache = out
        if not (isinstance(cache, list | tuple) and len(cache) == 2):
            raise AnswerError(f"token {t}: the cache returned must be a pair (K, V) of arrays")
        z = answer(z, "z, the new token's context vector")
        if z.shape != (width,):
            raise AnswerError(f"token {t}: z has shape {z.shape}, expected ({width},)")
        zs.append(z)
    K, V = (answer(a, "the cache (K, V)") for a in cache)
    return {"K": K, "V": V, "C": np.stack(zs)}


def _cached(change: str):
    def fn(x, Wq, Wk, Wv, cache):
        K, V = cache
        q, k, v = x @ Wq, x @ Wk, x @ Wv
        if change == "no_growth":
            return v, cache
        grown = (np.vstack([K, q if change == "queries" else k]), np.vstack([V, v]))
        if change == "self_only":
            return v, grown
        if change == "before_append":
            if len(K) == 0:
                return np.zeros_like(v), grown
            return R.attention(q[None], K, V)[0], grown
        scale = 1.0 if change == "unscaled" else math.sqrt(len(k))
        return R.attention(q[None], grown[0], grown[1], scale=scale)[0], grown

    return fn


KV_CACHE = Exercise(
    number=16,
    slug="kv_cache",
    title="A KV cache that equals the uncached run",
    article=RASCHKA,
    function="attend_with_cache",
    params="x, W_query, W_key, W_value, cache",
    summary="Causal self-attention for one new token, keeping the keys and values of the past.",
    equation="q = x·Wq,  k = x·Wk,  v = x·Wv\n"
    "K = [K_past; k],  V = [V_past; v]     (append the new row to the cache)\n"
    "z = softmax(q·Kᵀ / √c)·V              (the new token attends to the past and itself)\n"
    "Run over the tokens one at a time, the z's are the rows of the causal attention C.",
    passage="« Le décodeur génère les tokens de manière autorégressive, un par un » ;\n"
    "« le décodeur doit en effectuer plusieurs [forward pass], ce qui le rend plus lent »\n"
    f"({SEED_002})\n"
    "(the decoder generates one token at a time, one pass per token: a cache of the past\n"
    "keys and values saves recomputing them. Raschka ch. 3's causal attention, section 3.5,\n"
    "is the uncached run it must equal.)",
    shapes="x        (d,)      the new token's input row\n"
    "W_query  (d, c)    W_key and W_value the same: used as x·W (SelfAttention_v1's layout)\n"
    "cache    (K, V)    the past tokens' keys and values, each (t, c); (0, c) at first\n"
    "returns  (z, (K, V))  z (c,) the new token's context vector, and the cache with its row",
    parts=(
        Part("K", "the cache's keys after the last token"),
        Part("V", "the cache's values after the last token"),
        Part("C", "every token's context vector, one row per step"),
    ),
    cases=_cache_cases,
    run=_run_cache,
    mistakes=(
        Mistake(
            "the cache does not grow",
            "append the new token's k and v to the cache and return it: the next token attends "
            "to this one too",
            _cached("no_growth"),
            "cache",
        ),
        Mistake(
            "the cache grows but is not read: each token sees only itself",
            "attend over the whole cache [K_past; k], not over k alone",
            _cached("self_only"),
            "K",
        ),
        Mistake(
            "attended before appending: a token does not see itself",
            "append k and v first, then attend: token i may attend to itself (j <= i)",
            _cached("before_append"),
            "K",
        ),
        Mistake(
            "queries cached instead of keys",
            "the cache holds the keys k = x·Wk (and values), not the queries",
            _cached("queries"),
            "cache",
        ),
        Mistake(
            "not scaled",
            "divide the scores by √c (the keys' dimension), as the uncached attention does",
            _cached("unscaled"),
            "scaled",
        ),
    ),
    fallback="run the uncached causal attention of exercise 5 (then ·V) and compare row by row",
)

EXERCISES = (GREEDY, BEAM_STEP, KV_CACHE)
