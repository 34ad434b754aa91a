"""A Model looked inside and touched: its traced run (`Model.run`), what the run says
(`Model.result`), ablation and activation patching by name (`Model.ablate`, `Model.patch`), the
logit lens (`Model.lens`) and input attribution (`Model.attribute`).

The work is `interventions.py`'s, `lens.py`'s and `attribution.py`'s; here is how a Model's text
(read through its `Runtime`, `m` below) becomes their inputs and how their outcomes are told
(JSON-ready dicts, the same the command line prints and writes). Every run is the float64 reference
engine's unless a method says so.

Deliberately not here: argument parsing, printing, HTML.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import numpy as np

from glassformer import interventions as I
from glassformer import numerics
from glassformer import reference as R
from glassformer.decoding import Decoding
from glassformer.errors import InputError
from glassformer.trace import Trace, intervene, tracing


@dataclass
class Run:
    """One traced forward pass of the reference engine (float64, every step) and what it
    read: src (an encoder-decoder's source, an encoder's text), ids (the decoder's tokens, else
    the encoder's), what the pass returned, the generation it decoded (or None) and where that
    started, and per stack what it read ({stack: (what, ids)})."""

    trace: Trace
    src: list[int] | None
    ids: list[int]
    output: np.ndarray  # logits (T, V) / class logits (n_classes,) / encoder output (S, C)
    logits: np.ndarray | None  # the logits, None for an encoder without a classifier
    generation: object = None
    n_prompt: int = 0
    unknown: list[str] = field(default_factory=list)
    stacks: dict = field(default_factory=dict)
    decoding: Decoding = field(default_factory=Decoding)


_HEAD = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn)\.head(\d+)")
_KV = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn)\.kv_head(\d+)")
_SUBLAYER = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn|ffn)")


# -- the traced run -------------------------------------------------------------------------------


def traced_run(m, text, ids, target, decoding, quiet):
    """See `Model.run`. The run's `stacks` says what each stack read: {stack: (what, ids)}."""
    cfg = m.cfg
    decoding = decoding or Decoding()
    unknown: list[str] = []
    gen = None
    if cfg.arch == "encoder-decoder":
        src = m.encode(text, unknown=unknown)
        m.unknown_note(unknown, quiet)
        if target is None:
            gen = m.decoded(m.bos(), src, decoding, quiet=quiet)
            tgt = gen.ids
        elif isinstance(target, str):
            tgt = m.bos() + m.encode(target, room=1, what="--target")
        else:
            tgt = list(target)
        stacks = {"encoder": ("the source text", src), "decoder": ("the decoder's tokens", tgt)}
        labels = {k: m.pieces(x) for k, (_, x) in stacks.items()}
        with np.errstate(all="ignore"), tracing(labels) as trace:
            out = R.forward(m.params, cfg, tgt, src_ids=src)
        return Run(trace, src, tgt, out, out, gen, 1, unknown, stacks, decoding)
    if cfg.arch == "decoder":
        if ids is None:
            ids = m.encode(text, unknown=unknown)
            m.unknown_note(unknown, quiet)
        stacks = {"decoder": ("the text", list(ids))}
        if decoding.max_new_tokens:
            step = m.step(prompt_len=len(ids), reference=True)
            gen = m.decoded(list(ids), None, decoding, step=step, quiet=quiet)
            stacks["decoder"] = ("the text and what was generated", gen.ids)
        seq = stacks["decoder"][1]
        with np.errstate(all="ignore"), tracing({"decoder": m.pieces(seq)}) as trace:
            out = R.forward(m.params, cfg, seq)
        return Run(trace, None, seq, out, out, gen, len(ids), unknown, stacks, decoding)
    ids = m.encode(text, unknown=unknown)
    m.unknown_note(unknown, quiet)
    stacks = {"encoder": ("the text", ids)}
    with np.errstate(all="ignore"), tracing({"encoder": m.pieces(ids)}) as trace:
        if cfg.n_classes:
            out = logits = R.classify(m.params, cfg, ids)
        else:  # one pass: the encoder's steps, then the pooling (recorded as "embedding")
            R.sentence_embedding(m.params, cfg, ids)
    if not cfg.n_classes:
        out, logits = trace["encoder.output"], None  # (S, C)
    return Run(trace, ids, ids, out, logits, None, len(ids), unknown, stacks, decoding)


def check_finite(m, run) -> None:
    """A run's output (logits, or an embedding) is finite, or a NonFiniteError naming where."""
    embedding = m.cfg.arch == "encoder" and not m.cfg.n_classes
    what = "the values of the embedding" if embedding else "the model's outputs"
    out = run.trace["embedding"] if embedding else run.output
    src = run.src if m.cfg.arch == "encoder-decoder" else None
    numerics.check(np.asarray(out)[None], lambda _: (what, run.ids, src), m.params, m.cfg, m.fix)


def result(m, run) -> dict:
    """See `Model.result`."""
    from glassformer.decoding import stop_reason

    cfg = m.cfg
    if cfg.arch == "encoder":
        if cfg.n_classes:
            told = m.class_result(R.softmax(run.output))
            summary = f"class {told['label']} with probability {told['probability']:.4f}"
            return {"kind": "class", **told, "summary": summary}
        e = run.trace["embedding"]  # (C,), recorded by the run
        head = ", ".join(f"{v:+.4f}" for v in e[:6])
        return {
            "kind": "embedding",
            "embedding": e.tolist(),
            "summary": f"the pooled embedding (mean over the tokens, unit length): {len(e)} "
            f"dims [{head}, ...]",
        }
    ids, n_prompt = run.ids, run.n_prompt
    if run.generation is not None:
        text = m.decode(ids[n_prompt:] if cfg.arch == "encoder-decoder" else ids)
        why = stop_reason(run.generation, n_prompt, run.decoding, cfg)
        return {
            "kind": "text",
            "ids": ids[n_prompt:],
            "text": text,
            "summary": f"“{text}” ({run.decoding.strategy}; {why})",
        }
    probs = R.softmax(run.output[-1])
    k = int(probs.argmax())
    word = m.readable([k])[0]
    given = f"the target “{m.decode(ids[1:])}” given; " if cfg.arch == "encoder-decoder" else ""
    return {
        "kind": "next token",
        "id": k,
        "token": m.pieces([k])[0],
        "probability": float(probs[k]),
        "summary": f"{given}the most likely next token is “{word}” (id {k}) with probability "
        f"{probs[k]:.4f}",
    }


# -- ablation and patching -----------------------------------------------------------------------


def interventions(names: list[str], cfg) -> dict:
    """The zero-ablations that --ablate NAME... asks for, checked against the model's sizes."""
    fns = {}
    for name in names:
        head, sub, kv = _HEAD.fullmatch(name), _SUBLAYER.fullmatch(name), _KV.fullmatch(name)
        match = head or sub or kv
        if match:
            _check_layer(name, match, cfg)
        if kv:
            fns |= I.ablate_kv_head(int(kv[2]), _kv_head(name, kv, cfg), _group(cfg), "zero",
                                    kv[1], kv[3])  # fmt: skip
        elif head:
            h = int(head[4])
            if h >= cfg.n_heads:
                raise InputError(f"--ablate {name}: there are {cfg.n_heads} heads per layer")
            fns |= I.ablate_head(int(head[2]), h, stack=head[1], kind=head[3])
        elif sub and sub[3] == "ffn":
            fns |= I.ablate_ffn(int(sub[2]), stack=sub[1])
        elif sub:
            fns |= I.ablate_attention(int(sub[2]), stack=sub[1], kind=sub[3])
        else:
            fns[name] = I.zero()
    return fns


def _group(cfg) -> int:
    """The query heads that share each key/value head (1: none shared)."""
    return cfg.n_heads // cfg.kv_heads


def _kv_head(name: str, kv, cfg) -> int:
    """The K/V head of an --ablate STACK.L.KIND.kv_head{g}, checked: the model shares them."""
    g = int(kv[4])
    if _group(cfg) == 1:
        raise InputError(
            f"--ablate {name}: this model's heads have their own K and V (n_kv_heads = n_heads): "
            f"ablate a head, {kv[1]}.{kv[2]}.{kv[3]}.head{g}"
        )
    if g >= cfg.kv_heads:
        raise InputError(
            f"--ablate {name}: there are {cfg.kv_heads} K/V heads per layer (0..{cfg.kv_heads - 1})"
        )
    return g


def notes(names: list[str], cfg) -> list[str]:
    """What an ablation of heads means when K/V heads are shared (grouped-query attention)."""
    G, out = _group(cfg), []
    for name in names:
        head, kv = _HEAD.fullmatch(name), _KV.fullmatch(name)
        if G == 1 or not (head or kv):
            continue
        if kv:
            q = I.kv_group(int(kv[4]), G)
            out.append(
                f"{name} is the key/value head that query heads {q[0]}-{q[-1]} share: ablating "
                f"it zeroes the outputs C of all {G} (the same as zeroing its V)"
            )
        else:
            h = int(head[4])
            q = I.kv_group(h // G, G)
            rest = [str(i) for i in q if i != h]
            others = f"head {rest[0]}" if G == 2 else f"heads {', '.join(rest[:-1])} and {rest[-1]}"
            out.append(
                f"{name} shares K/V head {h // G} with {others}: ablating it zeroes its own output "
                f"C only, and {others} still read{'s' * (G == 2)} the same K and V"
            )
    return out


def _check_layer(name: str, match, cfg) -> None:
    stack, layer = match[1], int(match[2])
    layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
    if not (cfg.has_encoder if stack == "encoder" else cfg.has_decoder):
        raise InputError(
            f"--ablate {name}: this {cfg.arch} model has no {stack}; names start with "
            f"{'decoder' if stack == 'encoder' else 'encoder'}."
        )
    if layer >= layers:
        raise InputError(f"--ablate {name}: the {stack} has {layers} layers (0..{layers - 1})")
    if match[3] == "cross_attn" and cfg.arch != "encoder-decoder":
        raise InputError(f"--ablate {name}: only an encoder-decoder has cross_attn")


def names(cfg) -> list[str]:
    """What --ablate takes by name: every head and sublayer of the model."""
    out = []
    for stack in ("encoder", "decoder"):
        layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
        if not (cfg.has_encoder if stack == "encoder" else cfg.has_decoder):
            continue
        kinds = ["self_attn"] + ["cross_attn"] * (stack == "decoder" and cfg.has_encoder)
        shared = cfg.kv_heads if _group(cfg) > 1 else 0
        for i in range(layers):
            for kind in kinds:
                out += [f"{stack}.{i}.{kind}"] + [
                    f"{stack}.{i}.{kind}.head{h}" for h in range(cfg.n_heads)
                ]
                out += [f"{stack}.{i}.{kind}.kv_head{g}" for g in range(shared)]
            out.append(f"{stack}.{i}.ffn")
    return out


def unknown_name(name: str, cfg, trace) -> str:
    """The refusal of an --ablate NAME that is no head, sublayer or step of the model: the
    nearest valid names, and how names are made."""
    import difflib

    close = difflib.get_close_matches(name, names(cfg) + trace.names(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    example = next((n for n in reversed(names(cfg)) if _HEAD.fullmatch(n)), "decoder.0.ffn")
    return (
        f"--ablate {name}: no head, sublayer or step of this model has that name{hint} (a head "
        f"is like {example}, a sublayer STACK.LAYER.self_attn, cross_attn or ffn, counted from "
        "0; any step name of `explain --json`, or a glob of them, works too)"
    )


def _predicting(m, what: str) -> None:
    if m.cfg.arch == "encoder":
        raise InputError(
            f"{what} compare predicted tokens: this encoder predicts none; use a decoder or an "
            "encoder-decoder model"
        )


def ablation(m, run, ablate: list[str]) -> dict:
    """See `Model.ablate`: per position, the predicted token with and without the ablation, the
    largest logit change, and (when the run generated its output) the output generated again
    with and without it."""
    _predicting(m, "--ablate and --patch-from")
    fns = interventions(ablate, m.cfg)
    forward = I.reference_run(m.params, m.cfg)
    src = run.src if m.cfg.arch == "encoder-decoder" else None
    ids = run.ids
    inp = (src, ids) if src is not None else ids
    before, trace = I.record(forward, inp)
    missing = I.unmatched(fns, trace)
    if missing:
        raise InputError(unknown_name(missing[0], m.cfg, trace))
    after = I.run_with(forward, inp, fns)
    rows = []
    for t in range(len(ids)):
        a, b = int(before[t].argmax()), int(after[t].argmax())
        rows.append(
            {
                "position": t,
                "after_token": m.readable([ids[t]])[0],
                "predicted": m.readable([a])[0],
                "predicted_ablated": m.readable([b])[0],
                "changed": a != b,
                "max_logit_change": float(np.abs(after[t] - before[t]).max()),
            }
        )
    out = {"ablated": list(ablate), "steps": sorted(fns), "positions": rows}
    if notes(ablate, m.cfg):
        out["notes"] = notes(ablate, m.cfg)
    if run.generation is not None:
        out["text"] = _regenerate(m, run)
        with intervene(fns):
            out["text_ablated"] = _regenerate(m, run)
    return out


def _regenerate(m, run) -> str:
    """The run's output generated again as it was (under whatever intervention is active)."""
    src = run.src if m.cfg.arch == "encoder-decoder" else None
    prompt = run.ids[: run.n_prompt]
    step = m.step(src, prompt_len=len(prompt), reference=True)
    gen = m.decoded(prompt, src, run.decoding, step=step, quiet=True)
    return m.decode(gen.ids[len(prompt) :] if src is not None else gen.ids)


def patching(m, run, clean_text: str) -> dict:
    """See `Model.patch`: heads patched one at a time from the run on `clean_text` (clean) into
    this run (corrupted), per attention kind: (patched - corrupted) / (clean - corrupted) of the
    logit difference between the two runs' predictions at the first position where they
    differ."""
    _predicting(m, "--ablate and --patch-from")
    forward = I.reference_run(m.params, m.cfg)
    ids = run.ids
    room = 1 if m.cfg.arch == "encoder-decoder" else 0
    other = m.encode(clean_text, room=room, what="--patch-from")
    if m.cfg.arch == "encoder-decoder":
        clean, corrupted = (other, ids), (run.src, ids)
    else:
        if len(other) != len(ids):
            raise InputError(
                f"--patch-from has {len(other)} tokens but the text has {len(ids)}: patching a "
                "decoder's heads position by position needs the same number of tokens"
            )
        clean, corrupted = other, ids
    good, bad = forward(clean), forward(corrupted)
    differs = [t for t in range(len(ids)) if good[t].argmax() != bad[t].argmax()]
    if not differs:
        raise InputError(
            "the two inputs predict the same token at every position: nothing to restore; "
            "choose a --patch-from text that changes the prediction"
        )
    t = differs[0]
    g, b = int(good[t].argmax()), int(bad[t].argmax())
    metric = I.logit_diff(g, b, position=t)
    kinds = ["self_attn", "cross_attn"] if m.cfg.arch == "encoder-decoder" else ["self_attn"]
    tables = {k: I.patch_heads(forward, clean, corrupted, metric, kind=k).to_dict() for k in kinds}
    pieces = m.readable([g, b])
    return {
        "clean": clean_text,
        "position": t,
        "after_token": m.readable([ids[t]])[0],
        "metric": f"logit[{pieces[0]}] - logit[{pieces[1]}]",
        "tables": tables,
    }


# -- the lens and attribution ----------------------------------------------------------------------


def decoder_input(m, text: str, target: str | None) -> tuple[list[int] | None, list[int]]:
    """(source ids or None, decoder ids) a probe runs on: a decoder's text; an encoder-decoder's
    source and --target, or its greedy translation (the end token left out)."""
    ids = m.encode(text)
    if m.cfg.arch == "decoder":
        return None, ids
    if m.cfg.arch != "encoder-decoder":
        raise InputError(
            f"{m.name} is an encoder: it predicts no tokens to probe; use a decoder or "
            "an encoder-decoder (explain shows an encoder's every step)"
        )
    if target is not None:
        return ids, m.bos() + m.encode(target, room=1, what="--target")
    from glassformer.decoding import greedy

    step = m.step(ids, reference=True, fix=None)
    gen = greedy(step, m.bos(), m.cfg.max_len - 1, m.tok.eos_id, m.cfg.max_len)
    return ids, gen.ids[:-1] if gen.stopped_at_eos else gen.ids


def token_id(m, text: str, flag: str) -> int:
    """The one token `text` is (--dla, --versus)."""
    if not isinstance(text, str) or not m.utf8(text, flag):
        raise InputError(f"{flag} is empty: give one token")
    ids = m.need_tokenizer().encode(text)
    if len(ids) != 1:
        pieces = m.readable(ids)
        raise InputError(
            f"{flag} {text!r} is {len(ids)} tokens ({' '.join(pieces)}); give one token"
        )
    return ids[0]


def lens(m, text: str, *, target=None, k=3, sublayers=False, dla=None, versus=None, position=None):
    """See `Model.lens`: {"input": readable tokens, "lens": the logit lens table, "dla": ...}."""
    from glassformer import lens as L

    if target is not None and m.cfg.arch == "decoder":
        raise InputError(
            "--target is the decoder text of an encoder-decoder; for a decoder, put it in TEXT"
        )
    if dla is None and versus is not None:
        raise InputError(
            "--versus subtracts a token's logit in --dla's attribution: give --dla TOKEN too, "
            "or drop --versus"
        )
    if dla is None and position is not None:
        raise InputError(
            "--position chooses the position --dla explains: give --dla TOKEN too, or drop "
            "--position"
        )
    src, ids = decoder_input(m, text, target)
    position = -1 if position is None else position
    if not -len(ids) <= position < len(ids):
        raise InputError(
            f"--position {position}: the decoder reads {len(ids)} tokens, so a position is in "
            f"0..{len(ids) - 1} (or -{len(ids)}..-1, counted from the end)"
        )
    with tracing() as trace:
        logits = R.forward(m.params, m.cfg, ids, src_ids=src)
    numerics.check(logits[None], lambda _: ("the logits", ids, src), m.params, m.cfg)
    table = L.logit_lens(trace, m.params, m.cfg, k=k, sublayers=sublayers)
    result = {
        "input": m.readable(ids),
        "lens": table.to_dict(tokens=m.readable(range(m.cfg.vocab_size))),
    }
    if dla is not None:
        token = token_id(m, dla, "--dla")
        other = token_id(m, versus, "--versus") if versus is not None else None
        d = L.direct_logit_attribution(trace, m.params, m.cfg, token, other, position)
        result["dla"] = d.to_dict() | {"token": dla, "versus": versus}
    return result


def attribute(
    m,
    text: str,
    *,
    target=None,
    method="integrated_gradients",
    steps=None,
    max_new_tokens=None,
    baseline=None,
):
    """See `Model.attribute`: {"input", "predicted", and the attribution's fields}."""
    import torch

    from glassformer import attribution
    from glassformer.decoding import greedy
    from glassformer.torch_model import from_params
    from glassformer.torch_steps import step_fn

    cfg = m.cfg
    if target is not None and cfg.arch == "decoder":
        raise InputError(
            "--target is the decoder text of an encoder-decoder; for a decoder, put it in TEXT"
        )
    if steps is not None and method != "integrated_gradients":
        raise InputError(
            f"--steps sets integrated gradients' nodes, and {method.replace('_', ' ')} has none: "
            "drop --steps"
        )
    if max_new_tokens is not None and cfg.arch == "encoder-decoder":
        raise InputError(
            "--max-new-tokens sets how many tokens a decoder predicts; an encoder-decoder's are "
            "its translation (or --target): drop it"
        )
    steps = 64 if steps is None else steps
    base = None if baseline is None else baseline_id(m, baseline, method)
    if cfg.arch == "decoder":
        prompt = m.encode(text, room=1)
        model = from_params(cfg, m.params, dtype=torch.float64).eval()
        room = min(max_new_tokens or 5, cfg.max_len - len(prompt))
        step = numerics.checked(step_fn(model), m.params, cfg, len(prompt))
        gen = greedy(step, prompt, room, m.tok.eos_id, cfg.max_len)
        ids, src, stack, shown = gen.ids, None, "decoder", gen.ids  # a token explains later ones
        targets = list(range(len(prompt) - 1, len(ids) - 1))
    else:
        src, ids = decoder_input(m, text, target)
        model = from_params(cfg, m.params, dtype=torch.float64).eval()
        stack, shown = "encoder", src
        targets = list(range(len(ids) - 1))
    if not targets:
        raise InputError("nothing was predicted to explain: give a shorter text")
    res = attribution.input_attribution(
        model, ids, targets, method=method, steps=steps, stack=stack, src_ids=src, baseline=base
    )
    numerics.check(res.scores[None], lambda _: ("the attributions", ids, src), m.params, cfg)
    out = {"input": m.readable(shown), "predicted": m.readable(res.tokens)} | res.to_dict()
    if base is not None:
        out["baseline"] = m.readable([base])[0]
    elif method == "integrated_gradients" and cfg.positions in ("rotary", "none"):
        out["note"] = (
            "this model adds no position vectors, so the baseline (every token embedding 0) is an "
            "all-zero input, where its norms jump (each scales a vanishing row by up to 1/√ε): "
            "the integral cannot be resolved and the completeness error stays large at any "
            "--steps; give a token's embedding as the baseline instead (--baseline TOKEN, e.g. "
            f"{m.tok.specials.get('pad') or m.tok.vocab[0]!r}), or use gradient_x_input"
        )
    return out


def baseline_id(m, token, method: str) -> int:
    """Integrated gradients' baseline token: an id, a vocabulary piece, or `#id`."""
    if method != "integrated_gradients":
        raise InputError(f"--baseline is integrated gradients'; {method} has none: drop it")
    vocab = m.tok.vocab
    if isinstance(token, int) and not isinstance(token, bool):
        return token  # (the range is checked by attribution)
    if token in vocab:
        return vocab.index(token)
    if isinstance(token, str) and token.startswith("#") and token[1:].isdigit():
        return int(token[1:])
    close = difflib.get_close_matches(str(token), vocab, n=3)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    raise InputError(
        f"--baseline {token!r} is not a piece of the vocabulary{hint}: give a token as the "
        "vocabulary spells it, or #ID"
    )
