"""Reports: `walkthrough` (an article's worked example) and `explain` (every matrix of one
forward pass of a model), printed as text or written as JSON, one HTML page or PNG heatmaps.
"""

from __future__ import annotations

from glassformer import files
from glassformer import reference as R
from glassformer.cli import touch
from glassformer.cli.common import (
    SEED,
    bos,
    check_report_outputs,
    class_names,
    encode,
    integer,
    load_model,
    report_args,
    utf8,
    write_outputs,
)
from glassformer.cli.decoding import (
    choose_strategy,
    decoding_args,
    given_decoding_options,
    max_new_tokens,
    run_decoding,
    stop_reason,
)
from glassformer.errors import GlassformerError
from glassformer.explain.text import render, render_result, render_tokens
from glassformer.numerics import NonFiniteError, first_nonfinite
from glassformer.tokenizer.display import display_kind, display_tokens
from glassformer.trace import Trace, tracing


def add_parsers(sub) -> None:
    w = sub.add_parser(
        "walkthrough",
        help="an article's worked example, step by step",
        description="Print an article's worked example with its numbers.",
    )
    w.add_argument(
        "name",
        choices=["hello-world", "self-attention"],
        help="hello-world: The Random Transformer; self-attention: Raschka ch. 3",
    )
    w.add_argument(
        "--json",
        metavar="FILE",
        help="write every step (name, equation, shape, values) as JSON to FILE ('-' for stdout)",
    )
    w.add_argument(
        "--all",
        action="store_true",
        help="print every recorded step, not only the narrated ones (the text report)",
    )
    w.add_argument(
        "--seed",
        type=SEED,
        default=None,
        help="seed of the random-weight parts (hello-world only; default 0)",
    )
    report_args(w)
    w.set_defaults(func=cmd_walkthrough)

    e = sub.add_parser(
        "explain",
        help="trace every matrix of one forward pass",
        description="Run the reference engine on TEXT and print every intermediate as a "
        "labelled matrix (or write them as JSON, a self-contained HTML report, or PNG heatmaps).",
    )
    e.add_argument("checkpoint", help="checkpoint directory")
    e.add_argument("text", help="input text (the source, for an encoder-decoder)")
    e.add_argument(
        "--target",
        help="decoder text for an encoder-decoder (default: its output, generated as the "
        "decoding options say)",
    )
    e.add_argument("--json", metavar="FILE", help="write the trace as JSON to FILE ('-' stdout)")
    e.add_argument(
        "--only",
        metavar="SUBSTRING",
        help="show only the steps whose name contains it (text, JSON, HTML and PNG alike)",
    )
    e.add_argument(
        "--find-nan",
        action="store_true",
        help="say only where the first NaN or infinity appears in the forward pass (if any)",
    )
    e.add_argument(
        "--max-new-tokens",
        type=integer("--max-new-tokens", 1, says="at least 1"),
        default=None,
        help="decoder: also generate this many tokens (within its context) and explain each "
        "step; encoder-decoder: generate at most this many (default: up to max_len)",
    )
    decoding_args(e)
    report_args(e)
    touch.add_arguments(e)
    e.set_defaults(func=cmd_explain)


WALKTHROUGH_TITLES = {
    "hello-world": "The Random Transformer: “Hello World” → “Hola Mundo”, every step",
    "self-attention": "Self-attention (Raschka, ch. 3): “Your journey starts with one step”",
}


def cmd_walkthrough(args) -> int:
    from glassformer import walkthrough

    if args.name != "hello-world" and args.seed is not None:
        raise GlassformerError(
            f"--seed does nothing in the {args.name} walkthrough (it has no random parts); drop it"
        )
    if args.all and (args.json or args.html or args.png):
        raise GlassformerError(
            "--all chooses the printed steps; --json, --html and --png hold every step already"
        )
    check_report_outputs(args)
    layers, heads = _indices(args.layers, "--layers"), _indices(args.heads, "--heads")
    seed = 0 if args.seed is None else args.seed
    trace = (
        walkthrough.hello_world(seed=seed)
        if args.name == "hello-world"
        else walkthrough.self_attention()
    )
    shown = _select(trace, layers, heads)
    meta = {"walkthrough": args.name}
    if args.name == "hello-world":
        meta["seed"] = str(seed)
    _write_reports(
        trace,
        args,
        layers,
        heads,
        data={"walkthrough": args.name, **shown.to_dict()},
        text=lambda: render(shown, narrated=not args.all),
        html={"title": WALKTHROUGH_TITLES[args.name], "meta": meta},
    )
    return 0


def cmd_explain(args) -> int:
    _check_explain_flags(args)
    check_report_outputs(args)
    layers, heads = _indices(args.layers, "--layers"), _indices(args.heads, "--heads")
    cfg, params, tok = load_model(args.checkpoint)
    _check_explain_options(args, cfg)
    ids = encode(tok, args.text, cfg)
    trace, out, tokens, gen, n_prompt = _traced_run(args, cfg, params, tok, ids)
    found = first_nonfinite(trace)
    if args.find_nan:
        if found:
            print(f"first non-finite value: {found[0]} ({found[1]})")
        else:
            print(f"no non-finite value in the {len(trace)} recorded steps")
        return 0
    if found:  # a report of NaN would be a silent wrong answer: --find-nan says only where
        raise NonFiniteError(
            f"the model's values are non-finite (NaN or inf): they first appear at {found[0]} "
            f"({found[1]}, reference engine); explain --find-nan names only that step"
        )
    meta = {"checkpoint": args.checkpoint, "input": args.text, "model": _model_line(cfg)}
    told = {
        "tokens": {
            k: {"what": w, "ids": x, "pieces": tok.tokens(x)} for k, (w, x) in tokens.items()
        },
        "result": explain_result(args, cfg, params, tok, out, tokens, gen, n_prompt),
    }
    if args.ablate or args.patch_from is not None:
        told["interventions"] = _touch(args, cfg, params, tok, ids, tokens, gen, n_prompt)
    kind = display_kind(tok)
    html = dict(
        title=f"glassformer explain: “{args.text}”",
        meta=meta,
        vocab=tok.vocab,
        params=params,
        generation=gen,
        token_kind=kind,
        tokens=told["tokens"],
        result=told["result"],
        touched=told.get("interventions"),
    )
    shown = _only(_select(trace, layers, heads), args.only)
    readable = {k: display_tokens(v, kind) for k, v in shown.labels.items()}
    for t in told["tokens"].values():
        t["readable"] = display_tokens(t["pieces"], kind)

    def text() -> str:
        steps = render(shown, token_kind=kind)
        parts = [render_tokens(told["tokens"], kind), steps, render_result(told["result"])]
        if "interventions" in told:
            parts.append(touch.render(told["interventions"]))
        return "\n\n".join(parts)

    data = {**told, **shown.to_dict(), "labels_readable": readable}
    _write_reports(_only(trace, args.only), args, layers, heads, data=data, text=text, html=html)
    return 0


def _check_explain_flags(args) -> None:
    """Options that contradict each other or say nothing, refused before the model is read."""
    if args.find_nan:
        shown = ("json", "html", "png", "only", "layers", "heads", "ablate", "patch_from")
        given = [f for f in shown if getattr(args, f) not in (None, [])]
        if given:
            flag = given[0].replace("_", "-")
            raise GlassformerError(
                f"--find-nan says only where the first NaN or infinity appears; --{flag} "
                "does nothing with it: drop one of them"
            )
    if args.only == "":
        raise GlassformerError("--only '' keeps every step; give part of a step name, e.g. A")
    if args.patch_from is not None and not utf8(args.patch_from, "--patch-from").strip():
        raise GlassformerError("--patch-from is empty: give the text of the clean run")


def _traced_run(args, cfg, params, tok, ids):
    """The reference engine's run on the text (and the decoding the options ask for), traced:
    (trace, output, {stack: (what, ids)}, the generation or None, tokens a generation starts
    from)."""
    gen, tokens = None, {}
    n_prompt = 1 if cfg.arch == "encoder-decoder" else len(ids)  # what a generation starts from
    if cfg.arch == "encoder-decoder":
        if args.target is not None:
            tgt = bos(tok) + encode(tok, args.target, cfg, room=1, what="--target")
        else:
            step = R.next_token_logits(params, cfg, ids)
            gen = run_decoding(args, step, bos(tok), tok, cfg, params, ids)
            tgt = gen.ids
        tokens = {"encoder": ("the source text", ids), "decoder": ("the decoder's tokens", tgt)}
        with tracing(labels={k: tok.tokens(x) for k, (_, x) in tokens.items()}) as trace:
            out = R.forward(params, cfg, tgt, src_ids=ids)
    elif cfg.arch == "decoder":
        tokens = {"decoder": ("the text", ids)}
        if args.max_new_tokens:
            gen = run_decoding(args, R.next_token_logits(params, cfg), ids, tok, cfg, params)
            tokens["decoder"] = ("the text and what was generated", gen.ids)
        with tracing(labels={"decoder": tok.tokens(tokens["decoder"][1])}) as trace:
            out = R.forward(params, cfg, tokens["decoder"][1])
    else:
        tokens = {"encoder": ("the text", ids)}
        with tracing(labels={"encoder": tok.tokens(ids)}) as trace:
            out = R.classify(params, cfg, ids) if cfg.n_classes else R.encode(params, cfg, ids)
    return trace, out, tokens, gen, n_prompt


def _model_line(cfg) -> str:
    """The model in one line, for a report's header."""
    n_layers = (
        f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}"
        if cfg.arch == "encoder-decoder"
        else max(cfg.n_encoder_layers, cfg.n_decoder_layers)
    )
    return (
        f"{cfg.arch}, {n_layers} layers, d_model {cfg.d_model}, {cfg.n_heads} heads of "
        f"{cfg.head_dim}, d_ff {cfg.d_ff}, vocabulary {cfg.vocab_size}, {cfg.norm}-LN, "
        f"{cfg.positions} positions"
    )


def _touch(args, cfg, params, tok, ids, tokens, gen, n_prompt) -> dict:
    """--ablate and --patch-from: the run beside the same run intervened on."""
    if cfg.arch == "encoder":
        raise GlassformerError(
            "--ablate and --patch-from compare predicted tokens: this encoder predicts none; use "
            "a decoder or an encoder-decoder model"
        )
    src = ids if cfg.arch == "encoder-decoder" else None
    dec = tokens["decoder"][1]
    out = {}
    if args.ablate:
        again = None
        if gen is not None:
            prompt = dec[:n_prompt]

            def redo(step):
                return run_decoding(args, step, prompt, tok, cfg, params, src, quiet=True)

            again = touch.regenerator(cfg, params, tok, src, prompt, redo)
        out["ablation"] = touch.ablation(args, cfg, params, tok, src, dec, again)
    if args.patch_from is not None:
        room = 1 if cfg.arch == "encoder-decoder" else 0
        out["patching"] = touch.patching(
            args,
            cfg,
            params,
            tok,
            src,
            dec,
            lambda t: encode(tok, t, cfg, room, what="--patch-from"),
        )
    return out


def _check_explain_options(args, cfg) -> None:
    """Refuse an option that would do nothing for this model (before any work)."""
    decoding = given_decoding_options(args)
    if args.max_new_tokens is not None:
        decoding.insert(0, "--max-new-tokens")
    if cfg.arch == "encoder":
        for flag, given in (("--target", args.target is not None), *((d, True) for d in decoding)):
            if given:
                raise GlassformerError(
                    f"{flag} does nothing for an encoder ({args.checkpoint} generates nothing); "
                    "drop it"
                )
    elif cfg.arch == "decoder":
        if args.target is not None:
            raise GlassformerError(
                "--target is the decoder text of an encoder-decoder; for a decoder, put it in "
                "TEXT (or generate it with --max-new-tokens N)"
            )
        if decoding and args.max_new_tokens is None:
            raise GlassformerError(
                f"{decoding[0]} chooses how to generate, and explain generates from a decoder "
                "only with --max-new-tokens N; give it, or drop the option"
            )
    elif args.target is not None and decoding:
        raise GlassformerError(
            f"{decoding[0]} chooses how to generate the output, but --target gives it; drop one "
            "of them"
        )
    choose_strategy(args)


def explain_result(args, cfg, params, tok, out, tokens: dict, gen, n_prompt: int) -> dict:
    """What the model made of the input, for the end of an explain report: the decoded output
    text, the next token, the class with its probability, or the pooled embedding."""
    kind = display_kind(tok)
    if cfg.arch == "encoder":
        if cfg.n_classes:
            names = class_names(args.checkpoint, cfg)
            probs = R.softmax(out)
            k = int(probs.argmax())
            return {
                "kind": "class",
                "class": k,
                "label": names[k],
                "probability": float(probs[k]),
                "probabilities": dict(zip(names, map(float, probs), strict=True)),
                "summary": f"class {names[k]} with probability {probs[k]:.4f}",
            }
        e = R.sentence_embedding(params, cfg, tokens["encoder"][1])
        head = ", ".join(f"{v:+.4f}" for v in e[:6])
        return {
            "kind": "embedding",
            "embedding": e.tolist(),
            "summary": f"the pooled embedding (mean over the tokens, unit length): {len(e)} "
            f"dims [{head}, ...]",
        }
    ids = tokens["decoder"][1]
    if gen is not None:
        text = tok.decode(ids[n_prompt:] if cfg.arch == "encoder-decoder" else ids)
        why = stop_reason(
            gen, n_prompt, max_new_tokens(args, cfg), args.max_new_tokens is None, cfg
        )
        return {
            "kind": "text",
            "ids": ids[n_prompt:],
            "text": text,
            "summary": f"“{text}” ({args.strategy}; {why})",
        }
    probs = R.softmax(out[-1])
    k = int(probs.argmax())
    word = display_tokens(tok.tokens([k]), kind)[0]
    given = f"the target “{tok.decode(ids[1:])}” given; " if cfg.arch == "encoder-decoder" else ""
    return {
        "kind": "next token",
        "id": k,
        "token": tok.tokens([k])[0],
        "probability": float(probs[k]),
        "summary": f"{given}the most likely next token is “{word}” (id {k}) with probability "
        f"{probs[k]:.4f}",
    }


def _indices(text: str | None, flag: str) -> list[int] | None:
    """'0,2' -> [0, 2] for --layers / --heads; one clear error for anything else."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    if not all(t.isdecimal() for t in items):
        raise GlassformerError(
            f"{flag} {text!r}: give numbers counted from 0, separated by commas, e.g. {flag} 0,1"
        )
    return sorted({int(t) for t in items})


def _select(trace: Trace, layers, heads) -> Trace:
    """The trace with only the chosen layers and heads (an unknown one is an error)."""
    from glassformer.explain.select import select_steps

    if layers is None and heads is None:
        return trace
    return Trace(select_steps(trace, layers, heads), trace.labels)


def _only(trace: Trace, only: str | None) -> Trace:
    """The steps whose name contains `only` (--only); none is an error naming the closest."""
    if only is None:
        return trace
    steps = [s for s in trace.steps if only in s.name]
    if not steps:
        import difflib

        names = [s.name for s in trace.steps]
        parts = {".".join(p[i:]) for n in names for p in [n.split(".")] for i in range(len(p))}
        parts |= {part for n in names for part in n.split(".")}
        close = difflib.get_close_matches(only, sorted(parts), n=5, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else f"names look like {names[-1]}"
        raise GlassformerError(f"--only {only!r}: no step name contains it; {hint}")
    return Trace(steps, trace.labels)


def _write_reports(trace: Trace, args, layers, heads, *, data: dict, text, html: dict) -> None:
    """--json FILE, --html FILE ('-': stdout) and --png DIR, each followed by one 'wrote ...' line
    (`common.write_outputs`); the text report `text()` only when none of them is asked for."""
    page, done = None, []
    if args.html:  # made first: a page over its size bound is refused before anything is written
        from glassformer.explain.html import render_html

        page = render_html(trace, layers=layers, heads=heads, **html)
    if args.png:
        from glassformer.explain.plots import write_attention_pngs

        kind = html.get("token_kind")
        with files.building(args.png) as folder:  # all heatmaps appear at once, or none
            paths = write_attention_pngs(trace, folder, layers=layers, heads=heads, token_kind=kind)
        done.append(f"wrote {len(paths)} attention heatmaps to {args.png}")
    steps = f"{len(data['steps'])} steps"
    write_outputs(args, text, data=data, data_what=steps, page=page, done=done)
