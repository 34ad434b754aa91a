"""`glassformer faithfulness` (and `attribute --faithfulness`): which explanation of one logit is
trustworthy on this input. Deletion and insertion curves of integrated gradients, gradient × input,
attention weights, the attribution graph and direct logit attribution against exact ablations of
the reference engine; the work is `glassformer.inspect.faithfulness`'s (through
`Model.faithfulness`), here are the options, the printed table and the files.
"""

from __future__ import annotations

from glassformer import files
from glassformer.cli.common import (
    apart,
    load_model,
    option_type,
    output_file,
    overwrite_arg,
    threads_arg,
    write_outputs,
)
from glassformer.errors import GlassformerError
from glassformer.inspect.attribution import MAX_STEPS


def add_parsers(sub) -> None:
    f = sub.add_parser(
        "faithfulness",
        help="which explanation to trust: deletion and insertion curves against exact ablations",
        description="Explain one logit with every method glassformer offers (integrated "
        "gradients, gradient x input, attention weights and the attribution graph over the "
        "input tokens; direct logit attribution and the attribution graph over the heads and "
        "FFNs), then remove the units in each method's order and read the logit from real runs "
        "of the reference engine (float64): deletion and insertion curves, their normalised "
        "areas, and a seeded random order as the floor.",
    )
    f.add_argument("checkpoint", help="a checkpoint or Hugging Face folder")
    f.add_argument("text", help="input text (the source, for an encoder-decoder)")
    f.add_argument(
        "--target", metavar="TOKEN", help="the token (a class) explained: default the top one"
    )
    f.add_argument("--versus", metavar="TOKEN", help="... minus this token's logit")
    f.add_argument(
        "--position", type=int, default=None, help="the position explained (default the last)"
    )
    f.add_argument(
        "--decoder", help="decoder text for an encoder-decoder (default: its greedy translation)"
    )
    _shared(f)
    f.add_argument(
        "--steps",
        type=option_type("faithfulness.steps"),
        default=None,
        help=f"integrated gradients' nodes (default 64, at most {MAX_STEPS})",
    )
    f.add_argument(
        "--seed", type=option_type("seed"), default=0, help="the random order's seed (0)"
    )
    f.add_argument("--json", metavar="FILE", help="write the report as JSON to FILE ('-' stdout)")
    f.add_argument(
        "--html",
        metavar="FILE",
        help="write the table and the curves as a self-contained HTML page ('-' stdout)",
    )
    overwrite_arg(f)
    threads_arg(f)
    f.set_defaults(func=cmd_faithfulness)


def _shared(p) -> None:
    p.add_argument(
        "--baseline",
        metavar="TOKEN",
        default=None,
        help="a removed token's embedding becomes this token's (integrated gradients' baseline "
        "too; a piece as the vocabulary spells it, or #ID; default zero)",
    )
    p.add_argument("--png", metavar="FILE", help="draw the curves to one PNG file (matplotlib)")


def add_to_attribute(at) -> None:
    """`attribute --faithfulness` (attribute has --baseline, --steps, --json and --html)."""
    at.add_argument(
        "--faithfulness",
        action="store_true",
        help="instead, how far to trust each explanation of one prediction (a decoder's next "
        "token after TEXT; an encoder-decoder's at the last position of its translation, or of "
        "--target): the faithfulness command's report",
    )
    at.add_argument("--png", metavar="FILE", help="with --faithfulness: its curves as a PNG")


def cmd_faithfulness(args) -> int:
    _check_outputs(args)
    m = load_model(args.checkpoint)
    options = dict(target=args.target, versus=args.versus, position=args.position)
    out = m.faithfulness(
        args.text,
        decoder=args.decoder,
        baseline=args.baseline,
        steps=args.steps,
        seed=args.seed,
        **options,
    )
    return _write(args, out)


def from_attribute(args) -> int:
    """`attribute --faithfulness`: the faithfulness report of the first token `attribute` would
    explain (a decoder's next token after TEXT; an encoder-decoder's last, with --target as the
    decoder text)."""
    if args.max_new_tokens is not None:
        raise GlassformerError(
            "--max-new-tokens sets how many tokens attribute explains; --faithfulness measures "
            "one, the next: drop --max-new-tokens"
        )
    _check_outputs(args)
    m = load_model(args.checkpoint)
    out = m.faithfulness(args.text, decoder=args.target, baseline=args.baseline, steps=args.steps)
    return _write(args, out)


def _check_outputs(args) -> None:
    """Before any work: --json, --html and --png may be written, apart from the model and from
    each other; '-' (stdout) for one of --json and --html."""
    if args.json == "-" and args.html == "-":
        raise GlassformerError("--json - and --html - would both write to stdout; give one a file")
    if args.png == "-":
        raise GlassformerError("--png writes a PNG file: give a file name, not '-'")
    outs = {"--json": args.json, "--html": args.html, "--png": args.png}
    apart(outs, {"CHECKPOINT": args.checkpoint})
    for path in outs.values():
        output_file(path, args.overwrite)


def _write(args, out) -> int:
    from glassformer.explain import html_faithfulness as HF

    d = out.to_dict()

    def page() -> str:
        from glassformer.explain import html_touch as H

        meta = {"checkpoint": args.checkpoint, "input": args.text}
        body = HF.faithfulness_section(d)
        title = f"glassformer faithfulness: “{args.text}”"
        return H.probe_page(title, meta, [("faithfulness", "Faithfulness, shown", body)])

    done = []
    if args.png:
        files.write_file(args.png, HF.curves_png(d))
        done.append(f"wrote the curves to {args.png}")
    what = "the faithfulness report"
    html = page() if args.html else None
    write_outputs(args, lambda: text(d), data=out, data_what=what, page=html, done=done)
    return 0


def text(d: dict) -> str:
    """The printed report: per kind of unit, each explanation's areas, the most faithful first."""
    from glassformer.explain.html_faithfulness import UNITS, ranked, said

    what = repr(d["token"]) + (f" minus {d['versus']!r}" if d.get("versus") else "")
    lines = [
        f"faithfulness of the explanations of {what} at position {d['position']}: units removed "
        "in each explanation's order, the logit read from exact runs (float64)",
        "  areas normalised (clean run 1, every unit removed 0): deletion low and insertion "
        f"high is faithful; random: seed {d['seed']}",
    ]
    lines += [f"  note: {n}" for n in d["notes"]]
    for key in ("tokens", "components"):
        r = d.get(key)
        if r is None:
            continue
        metric = "logit difference" if d.get("versus") else "logit"
        lines.append(f"{UNITS[key]} ({len(r['names'])}), each removed as {r['removal']}")
        lines.append(
            f"  {metric} {r['clean']:.4f} in the clean run, {r['empty']:.4f} with every unit "
            "removed"
        )
        lines.append(f"  {'explanation':<28}{'deletion':>10}{'insertion':>11}{'ins - del':>11}")
        for c in ranked(r):
            dl, ins = c["deletion_area"], c["insertion_area"]
            lines.append(f"  {said(c['method']):<28}{dl:>10.3f}{ins:>11.3f}{ins - dl:>+11.3f}")
        lines += [f"  note: {n}" for n in r["notes"]]
    return "\n".join(lines)
