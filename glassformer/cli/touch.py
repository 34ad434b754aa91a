"""`explain --ablate` and `explain --patch-from`: the explain report of a run beside the same run
with steps switched off, or with each head patched in from another input (activation patching).

The work is `glassformer.interventions`'s; here is how command-line names become interventions
and how the outcome is told: per position, the token the model predicts with and without the
ablation and how far the logits moved; for patching, a layers x heads table per attention kind of
how much of the clean run's logit difference each head restores.
"""

from __future__ import annotations

import re

import numpy as np

from glassformer import interventions as I
from glassformer import reference as R
from glassformer.errors import GlassformerError
from glassformer.tokenizer.display import display_kind, display_tokens
from glassformer.trace import intervene

_HEAD = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn)\.head(\d+)")
_SUBLAYER = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn|ffn)")


def add_arguments(p) -> None:
    p.add_argument(
        "--ablate",
        action="append",
        default=[],
        metavar="NAME",
        help="zero-ablate a head (decoder.1.self_attn.head0), a whole attention or FFN sublayer "
        "(decoder.1.cross_attn, encoder.0.ffn) or any trace step or glob, and show the run beside "
        "the original (repeatable)",
    )
    p.add_argument(
        "--patch-from",
        metavar="TEXT",
        help="activation patching: patch each head's output from a run on TEXT (the clean run) "
        "into this one, and show how much of the clean run's prediction each head restores",
    )


def interventions(names: list[str], cfg) -> dict:
    """The zero-ablations that --ablate NAME... asks for, checked against the model's sizes."""
    fns = {}
    for name in names:
        head, sub = _HEAD.fullmatch(name), _SUBLAYER.fullmatch(name)
        m = head or sub
        if m:
            stack, layer = m[1], int(m[2])
            layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
            if not (cfg.has_encoder if stack == "encoder" else cfg.has_decoder):
                raise GlassformerError(
                    f"--ablate {name}: this {cfg.arch} model has no {stack}; names start with "
                    f"{'decoder' if stack == 'encoder' else 'encoder'}."
                )
            if layer >= layers:
                raise GlassformerError(
                    f"--ablate {name}: the {stack} has {layers} layers (0..{layers - 1})"
                )
            if m[3] == "cross_attn" and cfg.arch != "encoder-decoder":
                raise GlassformerError(f"--ablate {name}: only an encoder-decoder has cross_attn")
        if head:
            h = int(head[4])
            if h >= cfg.n_heads:
                raise GlassformerError(f"--ablate {name}: there are {cfg.n_heads} heads per layer")
            fns |= I.ablate_head(int(head[2]), h, stack=head[1], kind=head[3])
        elif sub and sub[3] == "ffn":
            fns |= I.ablate_ffn(int(sub[2]), stack=sub[1])
        elif sub:
            fns |= I.ablate_attention(int(sub[2]), stack=sub[1], kind=sub[3])
        else:
            fns[name] = I.zero()
    return fns


def names(cfg) -> list[str]:
    """What --ablate takes by name: every head and sublayer of the model."""
    out = []
    for stack in ("encoder", "decoder"):
        layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
        if not (cfg.has_encoder if stack == "encoder" else cfg.has_decoder):
            continue
        kinds = ["self_attn"] + ["cross_attn"] * (stack == "decoder" and cfg.has_encoder)
        for i in range(layers):
            for kind in kinds:
                out += [f"{stack}.{i}.{kind}"] + [
                    f"{stack}.{i}.{kind}.head{h}" for h in range(cfg.n_heads)
                ]
            out.append(f"{stack}.{i}.ffn")
    return out


def unknown_name(name: str, cfg, trace) -> str:
    """The refusal of an --ablate NAME that is no head, sublayer or step of the model: the
    nearest valid names, and how names are made."""
    import difflib

    close = difflib.get_close_matches(name, names(cfg) + trace.names(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    example = names(cfg)[-2] if names(cfg) else "decoder.0.ffn"
    return (
        f"--ablate {name}: no head, sublayer or step of this model has that name{hint} (a head "
        f"is like {example}, a sublayer STACK.LAYER.self_attn, cross_attn or ffn, counted from "
        "0; any step name of `explain --json`, or a glob of them, works too)"
    )


def ablation(args, cfg, params, tok, src, ids, regenerate) -> dict:
    """The run on the same tokens with --ablate's steps zeroed: per position, the predicted token
    with and without, the largest logit change, and (when the output was generated) the output
    generated under the ablation by `regenerate()`."""
    fns = interventions(args.ablate, cfg)
    run = I.reference_run(params, cfg)
    inp = (src, ids) if src is not None else ids
    before, trace = I.record(run, inp)
    missing = I.unmatched(fns, trace)
    if missing:
        raise GlassformerError(unknown_name(missing[0], cfg, trace))
    after = I.run_with(run, inp, fns)
    kind = display_kind(tok)
    rows = []
    for t in range(len(ids)):
        a, b = int(before[t].argmax()), int(after[t].argmax())
        rows.append(
            {
                "position": t,
                "after_token": display_tokens(tok.tokens([ids[t]]), kind)[0],
                "predicted": display_tokens(tok.tokens([a]), kind)[0],
                "predicted_ablated": display_tokens(tok.tokens([b]), kind)[0],
                "changed": a != b,
                "max_logit_change": float(np.abs(after[t] - before[t]).max()),
            }
        )
    out = {"ablated": args.ablate, "steps": sorted(fns), "positions": rows}
    if regenerate is not None:
        out["text"] = regenerate()
        with intervene(fns):
            out["text_ablated"] = regenerate()
    return out


def patching(args, cfg, params, tok, src, ids, encode) -> dict:
    """Heads patched one at a time from the run on --patch-from (clean) into this run
    (corrupted), per attention kind: (patched - corrupted) / (clean - corrupted) of the logit
    difference between the two runs' predictions at the first position where they differ."""
    run = I.reference_run(params, cfg)
    other = encode(args.patch_from)
    if cfg.arch == "encoder-decoder":
        clean, corrupted = (other, ids), (src, ids)
    else:
        if len(other) != len(ids):
            raise GlassformerError(
                f"--patch-from has {len(other)} tokens but the text has {len(ids)}: patching a "
                "decoder's heads position by position needs the same number of tokens"
            )
        clean, corrupted = other, ids
    good, bad = run(clean), run(corrupted)
    differs = [t for t in range(len(ids)) if good[t].argmax() != bad[t].argmax()]
    if not differs:
        raise GlassformerError(
            "the two inputs predict the same token at every position: nothing to restore; "
            "choose a --patch-from text that changes the prediction"
        )
    t = differs[0]
    g, b = int(good[t].argmax()), int(bad[t].argmax())
    metric = I.logit_diff(g, b, position=t)
    kinds = ["self_attn", "cross_attn"] if cfg.arch == "encoder-decoder" else ["self_attn"]
    tables = {k: I.patch_heads(run, clean, corrupted, metric, kind=k).to_dict() for k in kinds}
    kind = display_kind(tok)
    pieces = display_tokens(tok.tokens([g, b]), kind)
    return {
        "clean": args.patch_from,
        "position": t,
        "after_token": display_tokens(tok.tokens([ids[t]]), kind)[0],
        "metric": f"logit[{pieces[0]}] - logit[{pieces[1]}]",
        "tables": tables,
    }


def render(result: dict) -> str:
    """The text report of --ablate and --patch-from."""
    lines = []
    if "ablation" in result:
        a = result["ablation"]
        lines.append(f"with {', '.join(a['ablated'])} ablated ({len(a['steps'])} steps zeroed):")
        for r in a["positions"]:
            mark = "  <- changed" if r["changed"] else ""
            lines.append(
                f"  after {r['after_token']!s:>10}: predicts {r['predicted']!s:>10} -> "
                f"{r['predicted_ablated']!s:<10} (logits move by up to "
                f"{r['max_logit_change']:.3f}){mark}"
            )
        if "text_ablated" in a:
            lines.append(f"  output with the ablation: “{a['text_ablated']}”")
    if "patching" in result:
        p = result["patching"]
        lines.append(
            f"patching each head from “{p['clean']}” (clean) into this run, after "
            f"{p['after_token']} (position {p['position']}), metric {p['metric']}: "
            "0 = no effect, 1 = the clean value restored"
        )
        for kind, table in p["tables"].items():
            lines.append(f"  {kind}" + "".join(f"{c:>9}" for c in table["cols"]))
            for row, values in zip(table["rows"], table["values"], strict=True):
                lines.append(f"  {row:<9}" + "".join(f"{v:>9.3f}" for v in values))
    return "\n".join(lines)


def regenerator(cfg, params, tok, src, prompt: list[int], decode_fn):
    """A function that generates again (under whatever intervention is active) as explain did."""

    def again() -> str:
        gen = decode_fn(R.next_token_logits(params, cfg, src))  # the encoder reruns here too
        ids = gen.ids[len(prompt) :] if src is not None else gen.ids
        return tok.decode(ids)

    return again
