"""Generation you can watch: greedy, sampling and beam search, every step recorded for the page.

Greedy decoding and beam search are `glassformer.decoding`'s own. Sampling is `decoding.sample`'s
loop written out so that each draw can be shown, with decode's two pieces of it: the distribution
`decoding.filter_probs(logits, temperature, top_k, top_p)` and the draw `decoding.draw(q, rng)` (one
uniform number u from `numpy.random.default_rng(seed)`, the token the first whose cumulative
probability exceeds u), so the same seed gives the same tokens as `glassformer generate --seed`
(a test holds the two together). Steps use the PyTorch engine's KV cache when torch is installed.

A decoder slides over its context as the command line does (`Runtime.step(window=True)`, no
max_len bound): past max_len tokens, each next token is predicted from the last max_len, and the
answer says so (`slid`). An encoder-decoder's target stops at max_len. Every answer says why
generation stopped (`stop`: the end token, the number of new tokens asked for, or the context);
a beam search also gives each node the distribution its token was chosen from, and why the best
hypothesis won (`beam.why`).

Every step's logits are checked (`Runtime.step`, `Runtime.many_step`): NaN or infinity
stops generation with a `NonFiniteError` naming the token and the step where it starts.

Deliberately not here: traces (each step's trace is a run of its context, `runs.make_run`).
"""

from __future__ import annotations

import dataclasses
import math
import secrets

import numpy as np

from glassformer import decoding
from glassformer.errors import GlassformerError
from glassformer.model import Model
from glassformer.serve.runs import piece
from glassformer.tokenizer.display import display_token

SHOWN = 10  # tokens listed per step
SEGMENTS = 120  # cumulative-distribution segments sent per sampling step (the likeliest kept)


def generate(m: Model, text: str, how: decoding.Decoding) -> dict:
    """Decode from the typed prompt (a decoder, sliding over its context) or from BOS over the
    typed source (an encoder-decoder) as `how` says; every step with its distribution, the draw
    or the beam, and why it stopped."""
    cfg, tok = m.cfg, m.tokenizer
    if not cfg.has_decoder:
        raise GlassformerError("this model has no decoder: it does not generate (an encoder)")
    window = cfg.arch == "decoder"  # a decoder slides over its context; a target cannot
    if window:
        src, prompt = None, m.runtime.encode(text, window=True, unknown=[])
    else:
        src, prompt = m.runtime.encode(text, unknown=[]), m.runtime.bos()
    if how.strategy == "beam" and how.beam_width > cfg.vocab_size:
        raise GlassformerError(
            f"beam width {how.beam_width} is more than the vocabulary ({cfg.vocab_size} tokens)"
        )
    step = m.runtime.step(src, prompt_len=len(prompt), window=window)
    limits = dict(
        max_new_tokens=how.max_new_tokens,
        eos_id=tok.eos_id,
        max_len=None if window else cfg.max_len,
    )
    out = {"strategy": how.strategy, "prompt": prompt, "src": src, "n_prompt": len(prompt)}
    out |= {"max_new_tokens": how.max_new_tokens, "max_len": cfg.max_len}
    with np.errstate(all="ignore"):
        if how.strategy == "beam":
            out |= _beam(m, step, src, prompt, how, limits)
        elif how.strategy == "sample":
            if how.seed is None:  # a fresh seed, sent back: the same draw can be asked again
                how = dataclasses.replace(how, seed=secrets.randbelow(2**32))
            out |= _sample(m, step, prompt, how, **limits)
            out |= {"seed": how.seed, "temperature": how.temperature}
            out |= {"top_k": how.top_k, "top_p": how.top_p}
        else:
            g = decoding.greedy(step, prompt, **limits)
            out["ids"] = g.ids
            out["steps"] = [
                _step_info(m, g.ids[: len(prompt) + k], probs, None, g.ids[len(prompt) + k])
                for k, probs in enumerate(g.distributions)
            ]
    ids = out["ids"]
    out["tokens"] = [display_token(piece(tok, i), m.runtime.token_kind) for i in ids]
    new = ids[len(prompt) :]
    out["text"] = tok.decode(new)
    out["stopped_at_eos"] = bool(new) and new[-1] == tok.eos_id
    out["stop"] = _stop(m, len(prompt), len(new), out["stopped_at_eos"], how.max_new_tokens)
    if window and len(ids) > cfg.max_len:
        out["slid"] = _slid(len(prompt), len(new), cfg.max_len)
    return out


def _stop(m: Model, n_prompt: int, n_new: int, eos: bool, max_new: int) -> dict:
    """Why generation ended (`decoding.stop_reason`'s three cases, in the page's words): kind
    "eos", "budget" (the new tokens asked for) or "context" (max_len reached)."""
    tokens = _new_tokens(n_new)
    if eos:
        end = display_token(piece(m.tokenizer, m.tokenizer.eos_id), m.runtime.token_kind)
        return {"kind": "eos", "text": f"stopped at the end token {end} after {tokens}"}
    if n_new >= max_new:
        return {"kind": "budget", "text": f"stopped after {tokens}: as many as were asked for"}
    L = m.cfg.max_len
    return {
        "kind": "context",
        "text": f"stopped after {tokens}: the decoder's context is full (max_len {L}: "
        f"{n_prompt} + {n_new} tokens; it has no position for token {L + 1})",
    }


def _slid(n_prompt: int, n_new: int, L: int) -> str:
    """What happened past max_len (as `decoding.context_slid` tells the command line)."""
    slid = f"each token after token {L} was predicted from the last {L} only (a sliding window)"
    if n_prompt > L:
        return (
            f"the text has {n_prompt} tokens, more than the model's context (max_len {L}): {slid}"
        )
    return (
        f"the prompt ({n_prompt} tokens) + {_new_tokens(n_new)} is more than the model's context "
        f"(max_len {L}): {slid}; ask for {_new_tokens(L - n_prompt)} or fewer to stay within it"
    )


def _new_tokens(n: int) -> str:
    """ "1 new token", "2 new tokens" (issue 39: the page said "1 new tokens")."""
    return f"{n} new token{'s' * (n != 1)}"


def _step_info(m: Model, context, probs, filtered, chosen: int) -> dict:
    """One step: the context length (what the model reads: at most max_len), the likeliest
    tokens (p, and q after the sampling filters), the chosen token."""
    p = np.asarray(probs, dtype=np.float64)
    ranked = [int(i) for i in np.argsort(-p, kind="stable")[:SHOWN]]
    if chosen not in ranked:
        ranked.append(chosen)

    def word(i):
        return display_token(piece(m.tokenizer, i), m.runtime.token_kind)

    top = [{"id": i, "token": word(i), "p": float(p[i])} for i in ranked]
    n = len(context)
    info = {"context": min(n, m.cfg.max_len), "chosen": chosen, "chosen_token": word(chosen)}
    info |= {"top": top, "slid": n > m.cfg.max_len}
    if filtered is not None:
        for t in top:
            t["q"] = float(filtered[t["id"]])
        info["kept"] = int(np.count_nonzero(filtered))
    return info


def _sample(m, step, prompt, how: decoding.Decoding, max_new_tokens, eos_id, max_len):
    """decoding.sample with each draw recorded: u, and the cumulative distribution around it."""
    rng = np.random.default_rng(how.seed)
    ids, steps = list(prompt), []
    for _ in range(max_new_tokens):
        if max_len is not None and len(ids) >= max_len:
            break
        logits = np.asarray(step(ids), dtype=np.float64)
        q = decoding.filter_probs(logits, how.temperature, how.top_k, how.top_p)
        d = decoding.draw(q, rng)
        info = _step_info(m, ids, decoding.softmax(logits), q, d.token)
        info["draw"] = _draw(m, q, d)
        steps.append(info)
        ids.append(d.token)
        if d.token == eos_id:
            break
    return {"ids": ids, "steps": steps}


def _draw(m: Model, q: np.ndarray, d: decoding.Draw) -> dict:
    """Where u fell: the kept tokens' segments [start, end) of [0, 1), in vocabulary order (the
    order the draw accumulates in); the likeliest SEGMENTS of them, the chosen always."""
    kept = np.flatnonzero(q)
    shown = kept[np.argsort(-q[kept], kind="stable")[:SEGMENTS]]
    shown = sorted({*map(int, shown), d.token})
    segs = []
    for i in shown:
        start = float(d.cdf[i - 1]) if i > 0 else 0.0
        segs.append(
            {
                "id": i,
                "token": display_token(piece(m.tokenizer, i), m.runtime.token_kind),
                "start": start,
                "end": float(d.cdf[i]),
            }
        )
    return {"u": d.u, "token": d.token, "segments": segs, "kept": int(kept.size)}


def _beam(m: Model, step, src, prompt, how: decoding.Decoding, limits: dict) -> dict:
    """decoding.beam_search, with the distribution of every context it scored kept (its
    likeliest tokens: those the beam can take are among them)."""
    seen: dict[tuple, list[tuple[int, float]]] = {}
    keep = max(SHOWN, how.beam_width)

    def record(ids, logits):
        p = decoding.softmax(np.asarray(logits, dtype=np.float64))
        seen[tuple(ids)] = [(int(i), float(p[i])) for i in np.argsort(-p, kind="stable")[:keep]]

    def scored(ids):
        z = step(ids)
        record(ids, z)
        return z

    # Batched (the KV cache) while every hypothesis fits the context; a decoder that would slide
    # past max_len is stepped one hypothesis at a time, as the command line steps it.
    fits = limits["max_len"] is not None or len(prompt) + how.max_new_tokens <= m.cfg.max_len
    many = m.runtime.many_step(src, prompt_len=len(prompt)) if fits else None
    scored_many = None
    if many is not None:

        def scored_many(batch):
            z = many(batch)
            for ids, row in zip(batch, np.asarray(z), strict=True):
                record(ids, row)
            return z

    lp = how.length_penalty
    r = decoding.beam_search(
        scored, prompt, width=how.beam_width, length_penalty=lp, step_many=scored_many, **limits
    )
    return {"ids": r.best.ids, "beam": _tree(m, r, lp, len(prompt), seen)}


def _tree(m: Model, r: decoding.BeamResult, length_penalty: float, n_prompt: int, seen) -> dict:
    """The beam after each step as a tree: each hypothesis with its parent in the step before
    (-1: the prompt), its new token, summed log-probability, score, and the distribution its
    token was chosen from (an index into `distributions`); the winner and why it won."""
    steps, dists, where = [], [], {}
    previous: list[list[int]] = []
    for beam in r.steps:
        nodes = []
        for h in beam:
            parent = next((k for k, ids in enumerate(previous) if ids == h.ids[:-1]), -1)
            base = steps[-1][parent]["logprob"] if parent >= 0 else 0.0  # the parent's log p
            nodes.append(
                {
                    "parent": parent,
                    "token": _word(m, h.ids[-1]),
                    "id": h.ids[-1],
                    "logprob": h.logprob,
                    "score": h.score(length_penalty),
                    "n_generated": h.n_generated,
                    "finished": h.finished,
                    "ids": h.ids,
                    "text": m.tokenizer.decode(h.ids[n_prompt:]),
                    "dist": _dist_index(m, h, base, seen, dists, where),
                }
            )
        steps.append(nodes)
        previous = [h.ids for h in beam]  # a finished one is never a parent
    best = r.best
    return {
        "steps": steps,
        "distributions": dists,
        "length_penalty": length_penalty,
        "best": {"ids": best.ids, "logprob": best.logprob, "score": best.score(length_penalty)},
        "text": m.tokenizer.decode(best.ids[n_prompt:]),
        "why": _why(m, r, length_penalty, n_prompt, steps),
    }


def _word(m: Model, i: int) -> str:
    return display_token(piece(m.tokenizer, i), m.runtime.token_kind)


def _dist_index(m: Model, h, parent_logprob: float, seen, dists: list, where: dict) -> int | None:
    """The index in `dists` of the distribution after h's context (made on first use); the
    token h took is always among its tokens (its p from the log-probabilities if it was not
    among the likeliest kept)."""
    context = tuple(h.ids[:-1])
    if context not in seen:
        return None
    if context not in where:
        top = [{"id": i, "token": _word(m, i), "p": p} for i, p in seen[context]]
        where[context] = len(dists)
        dists.append({"context": min(len(context), m.cfg.max_len), "top": top})
    d = dists[where[context]]
    if all(t["id"] != h.ids[-1] for t in d["top"]):  # beyond the likeliest shown
        p = math.exp(h.logprob - parent_logprob)
        d["top"].append({"id": h.ids[-1], "token": _word(m, h.ids[-1]), "p": p})
    return where[context]


def _why(m: Model, r: decoding.BeamResult, lp: float, n_prompt: int, steps) -> dict:
    """The winner (the best score among the finished hypotheses and those still open at the
    end), the step it appeared at, and the best score of any other hypothesis."""
    best = r.best
    step = next(
        (k for k, nodes in enumerate(steps) for n in nodes if n["ids"] == best.ids), len(steps) - 1
    )
    others = [h for h in r.ranked if h is not best]
    runner = others[0] if others else None
    out = {
        "text": m.tokenizer.decode(best.ids[n_prompt:]),
        "step": step,
        "score": best.score(lp),
        "logprob": best.logprob,
        "n_generated": best.n_generated,
        "finished": best.finished,
    }
    if runner is not None:
        out["runner_up"] = {
            "text": m.tokenizer.decode(runner.ids[n_prompt:]),
            "score": runner.score(lp),
            "finished": runner.finished,
        }
    return out
