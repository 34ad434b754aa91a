"""Why this beam won (issue 40, point 3): a decoding's choices split exactly, by the attribution
graph of `circuit.py`.

At one step of a decoding, two continuations of the same context differ by one token each, a and
b; they share the context and the softmax's normaliser, so their log-probability gap is the logit
difference logit[a] - logit[b] at the position that predicts the step. `split` takes that
difference's attribution graph (`circuit.graph(..., token=a, versus=b)`) and reads it twice:

- by component, the edges into the logit: each head (summed over its positions; with the key
  positions it read, each one's share A[p, j]·(V_h[j]·W_O,h)·back), each FFN, each W_O bias, the
  embeddings at the predicting position and the constants. They add up to the gap.
- by token, the sources' total effects: each source (encoder) and target (decoder) position's
  token embedding and position vector, and the constants (every bias and β, their effects
  through the frozen model). They add up to the gap too.

`explain` applies it to a decoding: every step of the kept hypothesis, its token against the
runner-up token at that step (the likeliest other one; a beam may keep a token that is not the
likeliest, and then the gap is negative), and, against a dropped hypothesis, the step where their
tokens first differ, with the gap there, its split, and the final scores with the length penalty
(`decoding.Hypothesis.score`). With a beam search's steps it also follows both hypotheses through
the beam's reorderings: each one's rank in the beam after every step (None once it fell out,
"finished" once it ended).

    explain(params, cfg, src, prompt, kept, dropped=None, length_penalty=1.0, beam=None) -> dict
    parting(kept, dropped, n_prompt) -> the step where two hypotheses' tokens first differ
    choice_for(runtime, text, versus=..., beam=...) -> results.Choice   `Model.explain_choice`
    between(runtime, src, n_prompt, kept, dropped) -> results.Choice     the explorer's beam view

Pre-LN models only (`circuit.graph` refuses post-LN, where a norm after every sublayer keeps the
parts from adding up). NumPy float64, the reference engine's trace and beam search (`decoding`);
`explain` takes token ids and gives numbers, `choice_for` and `between` add the Model's words
(through its `Runtime`, never model.py). Deliberately not here: printing, HTML, the command line.
"""

from __future__ import annotations

import numpy as np

from glassformer import reference as R
from glassformer import results
from glassformer.config import Config
from glassformer.decoding import Hypothesis, beam_search
from glassformer.errors import GlassformerError, InputError, Said, param
from glassformer.inspect import circuit as C
from glassformer.inspect.lens import n_layers
from glassformer.trace import Trace, tracing


def parting(kept: list[int], dropped: list[int], n_prompt: int, what: str | None = None) -> int:
    """The step (0: the first new token) where two hypotheses' tokens first differ; refused when
    they do not (equal, or one continues the other), the dropped one named `what`."""
    what = what or param("versus")
    for k, (a, b) in enumerate(zip(kept[n_prompt:], dropped[n_prompt:], strict=False)):
        if a != b:
            return k
    if list(kept) == list(dropped):
        raise InputError(f"{what} is the hypothesis kept: give another text to compare")
    raise InputError(
        f"{what}: one hypothesis continues the other, so they never chose between two "
        "tokens at one step; give a text that differs in a token"
    )


def pre_ln(cfg: Config) -> None:
    """Refuse a post-LN model, as the attribution graph does (`circuit.graph`)."""
    if cfg.norm != "pre":
        raise GlassformerError(
            "explaining a choice needs a pre-LN model, as the attribution graph does (circuit): "
            "post-LN normalises after every sublayer, so what a part writes does not reach the "
            "logit as a sum"
        )


def split(trace: Trace, params: dict, cfg: Config, token: int, versus: int, position: int) -> dict:
    """logit[token] - logit[versus] at the decoder's `position`, split by component (direct
    effects, with each head's key positions) and by source/target position (total effects):
    see the module docstring. `error`: the largest of the graph's completeness error and the two
    splits' gaps from the model's logit difference."""
    g = C.graph(trace, params, cfg, token, versus, position)
    n, position = len(g.names), position % len(trace["logits"])
    direct = g.edges[n + 1, :n]
    back = _final_back(trace, params, cfg, token, versus, position)
    parts: dict[str, dict] = {}
    for i, name in enumerate(g.names):
        group = name.split("@")[0]
        if direct[i] == 0.0 and group not in parts:
            continue
        part = parts.setdefault(group, {"name": group, "kind": g.kinds[i], "value": 0.0})
        part["value"] += float(direct[i])
        if g.kinds[i] == "head" and g.positions[i] == position:
            part["reads"] = _reads(trace, params, cfg, group, g.positions[i], back)
    parts["constants"] = {"name": "constants", "kind": "bias", "value": float(g.edges[n + 1, n])}
    tokens: dict[tuple[str, int], float] = {}
    constants = float(g.values[n])
    for i, kind in enumerate(g.kinds):
        if g.stacks[i] == "decoder" and g.positions[i] > position:
            continue  # a later position: the causal mask keeps it out (its effects are 0)
        if kind == "source":
            key = (g.stacks[i], g.positions[i])
            tokens[key] = tokens.get(key, 0.0) + float(g.values[i])
        elif kind == "bias node":
            constants += float(g.values[i])
    by_part = sorted(parts.values(), key=lambda p: -abs(p["value"]))
    by_token = [{"stack": s, "position": p, "value": v} for (s, p), v in tokens.items()]
    by_token.sort(key=lambda t: -abs(t["value"]))
    gap = g.logit
    sums = (sum(p["value"] for p in by_part), sum(tokens.values()) + constants)
    error = max(g.error, *(abs(s - gap) for s in sums))
    return {
        "gap": gap,
        "parts": by_part,
        "tokens": by_token,
        "constants": constants,
        "sum": sums[0],
        "error": error,
    }


def _final_back(trace, params, cfg, token, versus, position) -> np.ndarray:
    """∂(logit[token] - logit[versus])/∂(the decoder's stream at `position`) through its final
    norm frozen there (the same map as `circuit`'s edges into the logit)."""
    W = params["decoder.tok_embed.weight"] if cfg.tie_embeddings else params["lm_head.weight"]
    w = W[token] - W[versus]  # (C,)
    x = np.asarray(trace[f"decoder.{n_layers(trace, 'decoder') - 1}.out"], dtype=np.float64)
    x = x[position]  # (C,)
    g = params["decoder.norm.weight"]
    if cfg.norm_kind == "rmsnorm":
        return w * g / np.sqrt((x * x).mean() + cfg.ln_eps)
    y = w * g / np.sqrt(x.var() + cfg.ln_eps)
    return y - y.mean()


def _reads(trace, params, cfg, group: str, p: int, back: np.ndarray) -> dict:
    """A head's direct effect at position p by the key position it read:
    A[p, j]·(V_h[j]·W_O,hᵀ)·back, adding up to the head's edge into the logit."""
    stack, layer, kind, head = group.split(".")
    h, D = int(head.removeprefix("head")), cfg.head_dim
    Wo = params[f"{stack}.layers.{layer}.{kind}.o.weight"][:, h * D : (h + 1) * D]  # (C, D)
    A = np.asarray(trace[f"{group}.A"], dtype=np.float64)[p]  # (S,)
    G = cfg.n_heads // cfg.kv_heads  # a shared V is recorded once, under kv_head{h // G}
    kv = f"{group}.V" if G == 1 else f"{stack}.{layer}.{kind}.kv_head{h // G}.V"
    V = np.asarray(trace[kv], dtype=np.float64)  # (S, D)
    shares = (A * (V @ (Wo.T @ back)))[: p + 1 if kind == "self_attn" else None]  # (S,)
    return {"stack": "encoder" if kind == "cross_attn" else stack, "values": shares.tolist()}


def log_probs(params: dict, cfg: Config, src: list[int] | None, ids: list[int], n_prompt: int):
    """Each new token's log-probability under the reference engine (float64), one forward pass
    over the hypothesis, and that pass's trace."""
    with tracing() as trace:
        logits = R.forward(params, cfg, ids[:-1], src_ids=src)  # (T - 1, V)
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(-1, keepdims=True)
    logp = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    rows = np.arange(n_prompt - 1, len(ids) - 1)
    return logp[rows, np.asarray(ids[n_prompt:])], logits, trace


def _score(logprob: float, n: int, length_penalty: float) -> float:
    return Hypothesis([], logprob, n).score(length_penalty)


def explain(
    params: dict,
    cfg: Config,
    src: list[int] | None,
    prompt: list[int],
    kept: list[int],
    dropped: list[int] | None = None,
    length_penalty: float = 1.0,
    beam: list[list] | None = None,
    each_step: bool = True,
) -> dict:
    """The kept hypothesis's every step against its runner-up token, and against `dropped` (ids
    from the prompt on, as `kept`) the step they parted at, its split and the final scores;
    `beam`: a beam search's steps (`BeamResult.steps`), to follow both through it; without
    `each_step`, the parting only. Ids only: see the module docstring."""
    pre_ln(cfg)
    n = len(prompt)
    if len(kept) <= n:
        raise GlassformerError("the decoding made no new token: there is no choice to explain")
    lp, logits, trace = log_probs(params, cfg, src, kept, n)
    steps = []
    for k in range(len(kept) - n if each_step else 0):
        p, chosen = n + k - 1, kept[n + k]
        row = logits[p].copy()
        row[chosen] = -np.inf
        other = int(np.argmax(row))
        s = split(trace, params, cfg, chosen, other, p)
        steps.append({"step": k, "position": p, "token": chosen, "versus": other} | s)
    out = {
        "kept": _hypothesis(kept, lp, n, length_penalty),
        "steps": steps,
        "length_penalty": length_penalty,
    }
    if dropped is None:
        return out
    k = parting(kept, dropped, n)
    dlp, _, _ = log_probs(params, cfg, src, dropped, n)
    p = n + k - 1
    part = split(trace, params, cfg, kept[n + k], dropped[n + k], p)
    part |= {"step": k, "position": p, "token": kept[n + k], "versus": dropped[n + k]}
    out |= {"dropped": _hypothesis(dropped, dlp, n, length_penalty), "parting": part}
    out["score_gap"] = out["kept"]["score"] - out["dropped"]["score"]
    out["logprob_gap"] = out["kept"]["logprob"] - out["dropped"]["logprob"]
    # the oracle the split is held to: the two hypotheses' summed log-probabilities after the
    # parting step, each from its own forward pass (equal before it: the same tokens)
    part["logprob_gap"] = float(lp[: k + 1].sum() - dlp[: k + 1].sum())
    if beam is not None:
        out["beam"] = [
            {"kept": _rank(step, kept, n + j + 1), "dropped": _rank(step, dropped, n + j + 1)}
            for j, step in enumerate(beam)
        ]
    return out


def _hypothesis(ids: list[int], lp: np.ndarray, n: int, length_penalty: float) -> dict:
    logprob = float(lp.sum())
    return {
        "ids": list(ids),
        "logprobs": lp.tolist(),
        "logprob": logprob,
        "n_generated": len(ids) - n,
        "score": _score(logprob, len(ids) - n, length_penalty),
    }


def _rank(step: list, ids: list[int], length: int) -> int | str | None:
    """Where a hypothesis's first `length` tokens stood in the beam after a step (0: the
    likeliest), None when they were not in it, "finished" once the hypothesis had ended."""
    if len(ids) < length:
        return "finished"
    return next((r for r, h in enumerate(step) if h.ids == ids[:length]), None)


# -- a Model's text in, words out (`Model.explain_choice`) -----------------------------------------


def choice_for(m, text: str, *, versus=None, beam=4, length_penalty=1.0, max_new_tokens=None):
    """See `Model.explain_choice`: `m` is the Model's `Runtime`. Beam search on the reference
    engine (float64), its best hypothesis kept; the dropped one is `versus` decoded by force, or
    the n-best list's runner-up."""
    cfg = m.cfg
    if cfg.arch == "encoder":
        raise InputError(
            f"{m.name} is an encoder: it decodes nothing, so it has no choice to explain; use a "
            "decoder or an encoder-decoder"
        )
    pre_ln(cfg)  # before the beam search
    if cfg.arch == "encoder-decoder":
        src, prompt = m.encode(text), m.bos()
    else:
        src, prompt = None, m.encode(text, room=1)
    room = cfg.max_len - len(prompt)
    default = room if cfg.arch == "encoder-decoder" else min(20, room)
    new = default if max_new_tokens is None else min(max_new_tokens, room)
    step = m.step(src, prompt_len=len(prompt), reference=True, fix=None)
    eos = m.need_tokenizer().eos_id
    r = beam_search(step, prompt, new, eos, beam, length_penalty, cfg.max_len)
    kept, by, note = r.best.ids, None, None
    dropped = None
    if versus is not None:
        what = param("versus")
        if not versus.strip():
            raise InputError(f"{what} is empty: give the text of another hypothesis")
        ids = m.encode(versus, room=len(prompt), what=what)
        dropped, by = prompt + ids + ([eos] if r.best.finished else []), "versus"
        parting(kept, dropped, len(prompt), param("versus", text=repr(versus)))
    elif len(r.ranked) > 1:
        dropped, by = r.ranked[1].ids, "runner-up"
    else:
        note = Said(
            f"a beam of {beam} kept no other hypothesis: each step's token is compared with the "
            f"runner-up token; give {param('versus')} (or a wider {param('beam')}) to compare "
            "two hypotheses"
        )
    out = explain(m.params, cfg, src, prompt, kept, dropped, length_penalty, r.steps)
    return results.Choice(**worded(m, out, src, prompt, by), beam=beam, note=note)


def worded(m, out: dict, src, prompt: list[int], by: str | None) -> dict:
    """`explain`'s answer in words (a `results.Choice`'s fields, less beam and note): each
    hypothesis's text and tokens, each token compared and each position's token as the reader
    sees them; `error` the largest of every split's."""
    n, kept = len(prompt), out["kept"]["ids"]
    words = {"encoder": m.readable(src) if src else [], "decoder": m.readable(kept)}
    steps = [_worded(m, s, words) for s in out["steps"]]
    errors = [s["error"] for s in steps]
    fields = dict(input=m.readable(src if src else prompt), kept=_said(m, out["kept"], n))
    fields |= dict(steps=steps, length_penalty=out["length_penalty"])
    if "dropped" in out:
        part = _worded(m, out["parting"], words)
        part["context"] = m.tok.decode(kept[n : n + part["step"]])
        errors += [part["error"], abs(part["gap"] - part["logprob_gap"])]
        fields |= dict(dropped=_said(m, out["dropped"], n), dropped_by=by, parting=part)
        fields |= dict(score_gap=out["score_gap"], logprob_gap=out["logprob_gap"])
        fields["beam_ranks"] = out.get("beam")
    return fields | {"error": max(errors, default=0.0)}


def _said(m, h: dict, n: int) -> dict:
    """A hypothesis in words: its text and readable new tokens with its numbers."""
    return {"text": m.tok.decode(h["ids"][n:]), "tokens": m.readable(h["ids"][n:])} | h


def _worded(m, s: dict, words: dict) -> dict:
    """A split with its tokens as the reader sees them: the two tokens compared, each source or
    target position's token, and each head's key positions (largest share first)."""
    out = dict(s)
    out["token_id"], out["versus_id"] = s["token"], s["versus"]
    out["token"], out["versus"] = m.readable([s["token"], s["versus"]])
    out["tokens"] = [t | {"token": words[t["stack"]][t["position"]]} for t in s["tokens"]]
    parts = []
    for p in s["parts"]:
        if "reads" in p:
            stack, values = p["reads"]["stack"], p["reads"]["values"]
            reads = [
                {"stack": stack, "position": j, "token": words[stack][j], "value": v}
                for j, v in enumerate(values)
            ]
            p = p | {"reads": sorted(reads, key=lambda r: -abs(r["value"]))}
        parts.append(p)
    out["parts"] = parts
    return out


def between(m, src, n_prompt: int, kept: list[int], dropped: list[int], length_penalty=1.0):
    """Why `kept` beat `dropped` (token ids from the prompt on, as a beam search's hypotheses hold
    them: the explorer's beam view) at the step where they parted: `m` is the Model's `Runtime`,
    `src` an encoder-decoder's source ids (None for a decoder), the first `n_prompt` ids the
    prompt (an encoder-decoder's start token)."""
    cfg = m.cfg
    pre_ln(cfg)
    if cfg.arch == "encoder":
        raise InputError(f"{m.name} is an encoder: it decodes nothing, so it has no choice")
    prompt = list(kept[:n_prompt])
    fits = len(dropped) <= cfg.max_len and list(dropped[:n_prompt]) == prompt
    if (src is None) != (cfg.arch == "decoder") or not 1 <= n_prompt < len(kept) or not fits:
        raise InputError(
            "kept and dropped are not two hypotheses of one decoding: give two that start with "
            "the same prompt (an encoder-decoder's start token, with its source ids) and fit in "
            f"max_len ({cfg.max_len} tokens)"
        )
    parting(kept, dropped, n_prompt, "the hypothesis picked")
    out = explain(m.params, cfg, src, prompt, kept, dropped, length_penalty, each_step=False)
    return results.Choice(**worded(m, out, src, prompt, "picked"), beam=0)
