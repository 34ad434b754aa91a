"""`glassformer diff MODEL TEXT`: where engines part. One input through several engines
(reference, torch, float32, int8, hf), every named step compared with the first engine's, in
data-flow order, and the first step beyond a tolerance named. The work and the rendering are
`glassformer.engine_diff`'s and `glassformer.explain.diff`'s; here are the options and the
writing.
"""

from __future__ import annotations

from glassformer import engine_diff
from glassformer.cli.common import (
    check_report_outputs,
    load_model,
    overwrite_arg,
    real,
    threads_arg,
    write_outputs,
)
from glassformer.errors import InputError
from glassformer.explain.diff import to_html, to_text

DEFAULT_ENGINES = "reference,torch"


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "diff",
        help="run one input through several engines and show where they start to differ",
        description="Run TEXT through each engine with every step recorded and print, step by "
        "step in data-flow order, the largest absolute difference of each named step from the "
        "first engine's (and the same relative to the step's largest value), then the first "
        "step beyond the tolerance. Engines: reference (NumPy float64), torch (PyTorch "
        "float64), float32, int8 (linear layers quantized; x86 CPUs), hf (transformers itself, "
        "on a GPT-2, BERT, Llama or Qwen2 Hugging Face folder). An engine whose values turn NaN "
        "or infinite stops the diff at that step: one line names the engine, the step and what "
        "to do, exit status 2 (as explain without --find-nan).",
    )
    p.add_argument("checkpoint", help="a checkpoint or Hugging Face folder")
    p.add_argument("text", help="input text (the source, for an encoder-decoder)")
    p.add_argument(
        "--engines",
        default=DEFAULT_ENGINES,
        metavar="LIST",
        help=f"engines to run, comma-separated, the first compared against ({DEFAULT_ENGINES}); "
        f"any of {', '.join(engine_diff.ENGINES)}",
    )
    p.add_argument(
        "--tol",
        type=real("--tol", 0.0, says="a number > 0"),
        default=1e-6,
        help="a step is beyond it when its largest absolute difference is larger (1e-6)",
    )
    p.add_argument(
        "--target", help="decoder text for an encoder-decoder (default: its greedy translation)"
    )
    p.add_argument("--json", metavar="FILE", help="write every row as JSON to FILE ('-' stdout)")
    p.add_argument(
        "--html", metavar="FILE", help="write the table as a self-contained HTML page ('-' stdout)"
    )
    overwrite_arg(p)
    threads_arg(p)
    p.set_defaults(func=cmd_diff, png=None)


def cmd_diff(args) -> int:
    engines = parse_engines(args.engines)  # unknown or empty names: before any work
    check_report_outputs(args)
    m = load_model(args.checkpoint)
    result = engine_diff.diff(m, args.text, engines, tol=args.tol, target=args.target)
    what = f"the differences at {len(result.rows)} steps"
    page = to_html(result) if args.html else None
    write_outputs(
        args,
        lambda: to_text(result),
        data=result,
        data_what=what,
        page=page,
        page_what=what,
    )
    return 0


def parse_engines(text: str) -> list[str]:
    """A comma-separated list of ENGINES ("reference,torch,int8"), checked: at least two, and
    no empty name (a doubled or trailing comma is a slip, never skipped: "reference,,torch"
    may have lost an engine)."""
    names = [n.strip() for n in str(text).split(",")]
    if any(names) and not all(names):
        k = names.index("")
        raise InputError(
            f"--engines {text!r} has an empty engine name (name {k + 1} of {len(names)}); "
            "give the names separated by single commas, from "
            f"{', '.join(engine_diff.ENGINES)}, e.g. --engines reference,torch"
        )
    names = [n for n in names if n]
    for n in names:
        engine_diff.check_kind(n)
    if len(names) < 2:
        raise InputError(
            f"--engines needs at least two engines to compare, got {','.join(names) or 'none'}; "
            "e.g. --engines reference,torch"
        )
    return names
