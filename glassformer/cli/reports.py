"""Reports: `walkthrough` (an article's worked example) and `explain` (every matrix of one
forward pass of a model), printed as text or written as JSON, one HTML page or PNG heatmaps.
"""

from __future__ import annotations

import sys

from glassformer import files
from glassformer import reference as R
from glassformer.cli.common import (
    SEED,
    bos,
    check_report_outputs,
    decoding_args,
    encode,
    integer,
    load_model,
    report_args,
    run_decoding,
    write_json,
    write_text,
)
from glassformer.errors import GlassformerError
from glassformer.explain.text import render
from glassformer.numerics import first_nonfinite
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
        "--all", action="store_true", help="print every recorded step, not only the narrated ones"
    )
    w.add_argument(
        "--seed",
        type=SEED,
        default=0,
        help="seed of the random-weight parts (hello-world; default 0)",
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
        "--target", help="decoder text for an encoder-decoder (default: the greedy output)"
    )
    e.add_argument("--json", metavar="FILE", help="write the trace as JSON to FILE ('-' stdout)")
    e.add_argument("--only", metavar="SUBSTRING", help="print only steps whose name contains it")
    e.add_argument(
        "--find-nan",
        action="store_true",
        help="say only where the first NaN or infinity appears in the forward pass (if any)",
    )
    e.add_argument(
        "--max-new-tokens",
        type=integer("--max-new-tokens", 1, says="at least 1"),
        default=None,
        help="decoder: also generate this "
        "many tokens and explain each step (encoder-decoder: up to max_len)",
    )
    decoding_args(e)
    report_args(e)
    e.set_defaults(func=cmd_explain)


WALKTHROUGH_TITLES = {
    "hello-world": "The Random Transformer: “Hello World” → “Hola Mundo”, every step",
    "self-attention": "Self-attention (Raschka, ch. 3): “Your journey starts with one step”",
}


def cmd_walkthrough(args) -> int:
    from glassformer import walkthrough

    check_report_outputs(args)
    layers, heads = _indices(args.layers, "--layers"), _indices(args.heads, "--heads")
    trace = (
        walkthrough.hello_world(seed=args.seed)
        if args.name == "hello-world"
        else walkthrough.self_attention()
    )
    shown = _select(trace, layers, heads)
    written = _write_reports(
        trace,
        args,
        layers,
        heads,
        title=WALKTHROUGH_TITLES[args.name],
        meta={"walkthrough": args.name, "seed": str(args.seed)}
        if args.name == "hello-world"
        else {"walkthrough": args.name},
    )
    if args.json:
        write_json(args.json, {"walkthrough": args.name, **shown.to_dict()})
        if args.json == "-":
            return 0
    if not written:
        print(render(shown, narrated=not args.all) + ("\n" if args.json else ""))
    if args.json:
        print(f"wrote {len(shown)} steps to {args.json}")
    print("\n".join(written), end="\n" if written else "")
    return 0


def cmd_explain(args) -> int:
    check_report_outputs(args)
    layers, heads = _indices(args.layers, "--layers"), _indices(args.heads, "--heads")
    cfg, params, tok = load_model(args.checkpoint)
    ids = encode(tok, args.text, cfg)
    words = tok.tokens(ids)
    gen = None
    if cfg.arch == "encoder-decoder":
        if args.target is not None:
            tgt = bos(tok) + encode(tok, args.target, cfg, room=1)
        else:
            step = R.next_token_logits(params, cfg, ids)
            gen = run_decoding(args, step, bos(tok), tok, cfg, params, ids)
            tgt = gen.ids
        with tracing(labels={"encoder": words, "decoder": tok.tokens(tgt)}) as trace:
            R.forward(params, cfg, tgt, src_ids=ids)
    elif cfg.arch == "decoder":
        if args.max_new_tokens:
            gen = run_decoding(args, R.next_token_logits(params, cfg), ids, tok, cfg, params)
            ids = gen.ids
            words = tok.tokens(ids)
        with tracing(labels={"decoder": words}) as trace:
            R.forward(params, cfg, ids)
    else:
        with tracing(labels={"encoder": words}) as trace:
            R.classify(params, cfg, ids) if cfg.n_classes else R.encode(params, cfg, ids)
    n_layers = (
        f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}"
        if cfg.arch == "encoder-decoder"
        else max(cfg.n_encoder_layers, cfg.n_decoder_layers)
    )
    meta = {
        "checkpoint": args.checkpoint,
        "input": args.text,
        "model": f"{cfg.arch}, {n_layers} "
        f"layers, d_model {cfg.d_model}, {cfg.n_heads} heads of {cfg.head_dim}, d_ff {cfg.d_ff}, "
        f"vocabulary {cfg.vocab_size}, {cfg.norm}-LN, {cfg.positions} positions",
    }
    report = dict(
        title=f"glassformer explain: “{args.text}”",
        meta=meta,
        vocab=tok.vocab,
        params=params,
        generation=gen,
        token_kind=display_kind(tok),
    )
    found = first_nonfinite(trace)
    if args.find_nan:
        if found:
            print(f"first non-finite value: {found[0]} ({found[1]})")
        else:
            print(f"no non-finite value in the {len(trace)} recorded steps")
        return 0
    if found:
        print(
            f"glassformer: note: non-finite values first appear at {found[0]} ({found[1]})",
            file=sys.stderr,
        )
    _show_trace(trace, args, layers, heads, report)
    return 0


def _show_trace(trace: Trace, args, layers, heads, report: dict) -> None:
    shown = _select(trace, layers, heads)
    written = _write_reports(trace, args, layers, heads, **report)
    kind = report["token_kind"]
    if args.json:
        readable = {k: display_tokens(v, kind) for k, v in shown.labels.items()}
        write_json(args.json, {**shown.to_dict(), "labels_readable": readable})
        if args.json == "-":
            return
    if not written:
        print(render(shown, only=args.only, token_kind=kind) + ("\n" if args.json else ""))
    if args.json:
        print(f"wrote {len(shown)} steps to {args.json}")
    print("\n".join(written), end="\n" if written else "")


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


def _write_reports(trace: Trace, args, layers, heads, **html_options) -> list[str]:
    """Write --html and --png; return what was written, as lines to print."""
    lines = []
    if args.html:
        from glassformer.explain.html import render_html

        page = render_html(trace, layers=layers, heads=heads, **html_options)
        write_text(args.html, page)
        lines.append(f"wrote {args.html} ({len(page.encode('utf-8')) / 1e6:.2f} MB)")
    if args.png:
        from glassformer.explain.plots import write_attention_pngs

        kind = html_options.get("token_kind")
        with files.building(args.png) as folder:  # all heatmaps appear at once, or none
            paths = write_attention_pngs(trace, folder, layers=layers, heads=heads, token_kind=kind)
        lines.append(f"wrote {len(paths)} attention heatmaps to {args.png}")
    return lines
