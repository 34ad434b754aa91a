"""Generation you can watch: greedy, sampling and beam search, every step recorded for the page.

Greedy decoding and beam search are `glassformer.decoding`'s own. Sampling is `decoding.sample`'s
loop written out so that each draw can be shown, with decode's two pieces of it: the distribution
`decoding.filter_probs(logits, temperature, top_k, top_p)` and the draw `decoding.draw(q, rng)` (one
uniform number u from `numpy.random.default_rng(seed)`, the token the first whose cumulative
probability exceeds u), so the same seed gives the same tokens as `glassformer generate --seed`
(a test holds the two together). Steps use the PyTorch engine's KV cache when torch is installed.

Every step's logits are checked (`Model.step`, `Model.many_step`): NaN or infinity
stops generation with a `NonFiniteError` naming the token and the step where it starts.

Deliberately not here: traces (each step's trace is a run of its context, `runs.make_run`).
"""

from __future__ import annotations

import dataclasses
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
    """Decode from the typed prompt (a decoder) or from BOS over the typed source (an
    encoder-decoder) as `how` says; every step with its distribution, the draw or the beam."""
    cfg, tok = m.cfg, m.tok
    if not cfg.has_decoder:
        raise GlassformerError("this model has no decoder: it does not generate (an encoder)")
    if cfg.arch == "encoder-decoder":
        src, prompt = m.encode(text, unknown=[]), m.bos()
    else:
        src, prompt = None, m.encode(text, room=1, unknown=[])
    if how.strategy == "beam" and how.beam_width > cfg.vocab_size:
        raise GlassformerError(
            f"beam width {how.beam_width} is more than the vocabulary ({cfg.vocab_size} tokens)"
        )
    step = m.step(src, prompt_len=len(prompt))
    limits = dict(max_new_tokens=how.max_new_tokens, eos_id=tok.eos_id, max_len=cfg.max_len)
    out = {"strategy": how.strategy, "prompt": prompt, "src": src, "n_prompt": len(prompt)}
    with np.errstate(all="ignore"):
        if how.strategy == "beam":
            many = m.many_step(src, prompt_len=len(prompt))
            lp = how.length_penalty
            r = decoding.beam_search(
                step, prompt, width=how.beam_width, length_penalty=lp, step_many=many, **limits
            )
            out |= {"ids": r.best.ids, "beam": _tree(m, r, lp, len(prompt))}
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
    out["tokens"] = [display_token(piece(tok, i), m.token_kind) for i in ids]
    new = ids[len(prompt) :]
    out["text"] = tok.decode(new)
    out["stopped_at_eos"] = bool(new) and new[-1] == tok.eos_id
    return out


def _step_info(m: Model, context, probs, filtered, chosen: int) -> dict:
    """One step: the context length, the likeliest tokens (p, and q after the sampling
    filters), the chosen token."""
    p = np.asarray(probs, dtype=np.float64)
    ranked = [int(i) for i in np.argsort(-p, kind="stable")[:SHOWN]]
    if chosen not in ranked:
        ranked.append(chosen)

    def word(i):
        return display_token(piece(m.tok, i), m.token_kind)

    top = [{"id": i, "token": word(i), "p": float(p[i])} for i in ranked]
    info = {"context": len(context), "chosen": chosen, "chosen_token": word(chosen), "top": top}
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
                "token": display_token(piece(m.tok, i), m.token_kind),
                "start": start,
                "end": float(d.cdf[i]),
            }
        )
    return {"u": d.u, "token": d.token, "segments": segs, "kept": int(kept.size)}


def _tree(m: Model, r: decoding.BeamResult, length_penalty: float, n_prompt: int) -> dict:
    """The beam after each step as a tree: each hypothesis with its parent in the step before
    (-1: the prompt), its new token, summed log-probability and score."""
    steps = []
    previous: list[list[int]] = []
    for beam in r.steps:
        nodes = []
        for h in beam:
            parent = next((k for k, ids in enumerate(previous) if ids == h.ids[:-1]), -1)
            nodes.append(
                {
                    "parent": parent,
                    "token": display_token(piece(m.tok, h.ids[-1]), m.token_kind),
                    "id": h.ids[-1],
                    "logprob": h.logprob,
                    "score": h.score(length_penalty),
                    "finished": h.finished,
                    "ids": h.ids,
                    "text": m.tok.decode(h.ids[n_prompt:]),
                }
            )
        steps.append(nodes)
        previous = [h.ids for h in beam]  # a finished one is never a parent
    best = r.best
    return {
        "steps": steps,
        "best": {"ids": best.ids, "logprob": best.logprob, "score": best.score(length_penalty)},
        "text": m.tok.decode(best.ids[n_prompt:]),
    }
