"""Reports: `walkthrough` (an article's worked example) and `explain` (every matrix of one
forward pass of a model), printed as text or written as JSON, one HTML page or PNG heatmaps.
"""

from __future__ import annotations

from glassformer import files
from glassformer.cli import touch, why
from glassformer.cli.common import (
    SEED,
    check_report_outputs,
    integer,
    load_model,
    report_args,
    threads_arg,
    write_outputs,
)
from glassformer.cli.decoding import decoding, decoding_args, given_decoding_options
from glassformer.cli.flags import said
from glassformer.errors import GlassformerError
from glassformer.explain.text import render, render_result, render_tokens
from glassformer.inputs import utf8
from glassformer.numerics import NonFiniteError, first_nonfinite
from glassformer.tokenizer.display import display_tokens
from glassformer.trace import Trace


def add_parsers(sub) -> None:
    w = sub.add_parser(
        "walkthrough",
        help="an article's worked example, step by step",
        description="Print an article's worked example with its numbers.",
    )
    w.add_argument(
        "name",
        choices=["hello-world", "self-attention", "modern"],
        help="hello-world: The Random Transformer; self-attention: Raschka ch. 3; modern: from "
        "2017 to today (rotary positions, RMSNorm, SwiGLU, grouped-query attention)",
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
        help="seed of the random-weight parts (hello-world and modern; default 0)",
    )
    report_args(w)
    threads_arg(w)
    w.set_defaults(func=cmd_walkthrough)

    e = sub.add_parser(
        "explain",
        help="trace every matrix of one forward pass",
        description="Run the reference engine on TEXT and print every intermediate as a "
        "labelled matrix (or write them as JSON, a self-contained HTML report, or PNG heatmaps). "
        "With --over-training, show instead how a training run read its recorded probe text "
        "at every recorded step (train --snapshot-views).",
    )
    e.add_argument("checkpoint", help="checkpoint directory")
    e.add_argument(
        "text",
        nargs="?",
        help="input text (the source, for an encoder-decoder); none with --over-training",
    )
    e.add_argument(
        "--over-training",
        action="store_true",
        help="the training time-lapse recorded in a training checkpoint (train --snapshot-views "
        "TEXT): a table of the steps, or with --html one page with a time slider, the attention "
        "maps at each step and the curves (--json: the recorded values)",
    )
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
    why.add_arguments(e)
    threads_arg(e)
    e.set_defaults(func=cmd_explain)


WALKTHROUGH_TITLES = {
    "hello-world": "The Random Transformer: “Hello World” → “Hola Mundo”, every step",
    "self-attention": "Self-attention (Raschka, ch. 3): “Your journey starts with one step”",
    "modern": "From 2017 to today: rotary positions, RMSNorm, SwiGLU, grouped-query attention",
}
SEEDED_WALKTHROUGHS = ("hello-world", "modern")


def cmd_walkthrough(args) -> int:
    from glassformer import walkthrough

    if args.name not in SEEDED_WALKTHROUGHS and args.seed is not None:
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
    make = walkthrough.WALKTHROUGHS[args.name]
    trace = make(seed=seed) if args.name in SEEDED_WALKTHROUGHS else make()
    shown = _select(trace, layers, heads)
    meta = {"walkthrough": args.name}
    if args.name in SEEDED_WALKTHROUGHS:
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
    if args.over_training:
        return _over_training(args)
    if args.text is None:
        raise GlassformerError(
            "the following arguments are required: text (see glassformer explain --help); "
            "or --over-training, for a training run's recorded views"
        )
    _check_explain_flags(args)
    check_report_outputs(args)
    layers, heads = _indices(args.layers, "--layers"), _indices(args.heads, "--heads")
    m = load_model(args.checkpoint, engine="reference")
    why.check(args, m.cfg)
    how = _check_explain_options(args, m.cfg)
    run = m.run(args.text, target=args.target, decoding=how)
    trace = run.trace
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
    meta = {"checkpoint": args.checkpoint, "input": args.text, "model": m.summary()}
    told = {
        "tokens": {
            k: {"what": w, "ids": x, "pieces": m.runtime.pieces(x)}
            for k, (w, x) in run.stacks.items()
        },
        "result": m.result(run).to_dict(),
    }
    told["result"]["summary"] = said(told["result"]["summary"])  # in the command line's words
    if args.ablate or args.patch_from is not None:
        told["interventions"] = _touch(args, m, run)
    if args.why:
        told["why"] = why.why(args, m)
    kind = m.runtime.token_kind
    html = dict(
        title=f"glassformer explain: “{args.text}”",
        meta=meta,
        vocab=m.tokenizer.vocab,
        params=m.params,
        generation=run.generation,
        token_kind=kind,
        tokens=told["tokens"],
        result=told["result"],
        touched=told.get("interventions", {}) | ({"why": told["why"]} if args.why else {}),
        cfg=m.cfg,
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
        if "why" in told:
            parts.append(why.render(told["why"]))
        return "\n\n".join(parts)

    def data() -> dict:  # made only for --json: every value as text (seconds at 135M)
        return {**told, **shown.to_dict(), "labels_readable": readable}

    _write_reports(_only(trace, args.only), args, layers, heads, data=data, text=text, html=html)
    return 0


# Options of `explain` that do nothing with --over-training (which shows recorded frames).
NOT_OVER_TRAINING = ("target", "only", "find_nan", "max_new_tokens", "png", "layers", "heads",
                     "ablate", "patch_from", "why", "versus")  # fmt: skip


def _over_training(args) -> int:
    """explain RUN_DIR --over-training: the time-lapse `train --snapshot-views` recorded (the
    probe text is the recorded one), as a table, one HTML page (--html) or JSON (--json)."""
    from pathlib import Path

    from glassformer.explain import timelapse
    from glassformer.training import views

    if args.text is not None:
        raise GlassformerError(
            f"--over-training shows the probe text recorded while training, not {args.text!r}: "
            "drop the text (or drop --over-training to explain this text)"
        )
    given = [f for f in NOT_OVER_TRAINING if getattr(args, f) not in (None, [], False)]
    given = [f"--{f.replace('_', '-')}" for f in given] + given_decoding_options(args)
    if given:
        raise GlassformerError(
            f"{given[0]} does nothing with --over-training (it shows the frames recorded while "
            "training): drop it"
        )
    if not Path(args.checkpoint).is_dir():
        raise GlassformerError(f"{args.checkpoint} is not a folder; give a training checkpoint")
    check_report_outputs(args)
    recorded = views.load(args.checkpoint)
    if recorded is None or not recorded.frames:
        raise GlassformerError(
            f"{args.checkpoint} has no recorded views ({views.VIEWS_FILE}): record them while "
            "training, with glassformer train ... --snapshot-views TEXT --view-every N"
        )
    page = None
    if args.html:
        meta = {"run": args.checkpoint, "probe text": recorded.text}
        first, last = recorded.frames[0].step, recorded.frames[-1].step
        meta["frames"] = (
            f"{len(recorded.frames)}, every {recorded.every:,} steps ({first:,} … {last:,})"
        )
        page = timelapse.render_page(recorded, meta=meta)
    data = timelapse.page_data(recorded) if args.json else None
    frames = f"{len(recorded.frames)} frames"
    write_outputs(
        args,
        lambda: timelapse.table(recorded, args.checkpoint),
        data=data,
        data_what=frames,
        page=page,
    )
    return 0


def _check_explain_flags(args) -> None:
    """Options that contradict each other or say nothing, refused before the model is read."""
    if args.find_nan:
        shown = ("json", "html", "png", "only", "layers", "heads", "ablate", "patch_from", "why")
        given = [f for f in shown if getattr(args, f) not in (None, [], False)]
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


def _touch(args, m, run) -> dict:
    """--ablate and --patch-from: the run beside the same run intervened on."""
    out = {}
    if args.ablate:
        out["ablation"] = m.ablate(run, args.ablate).to_dict()
    if args.patch_from is not None:
        out["patching"] = m.patch(run, args.patch_from).to_dict()
    return out


def _check_explain_options(args, cfg):
    """Refuse an option that would do nothing for this model (before any work); the
    Decoding the options ask for."""
    given = given_decoding_options(args)
    if args.max_new_tokens is not None:
        given.insert(0, "--max-new-tokens")
    if cfg.arch == "encoder":
        for flag, on in (("--target", args.target is not None), *((d, True) for d in given)):
            if on:
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
        if given and args.max_new_tokens is None:
            raise GlassformerError(
                f"{given[0]} chooses how to generate, and explain generates from a decoder "
                "only with --max-new-tokens N; give it, or drop the option"
            )
    elif args.target is not None and given:
        raise GlassformerError(
            f"{given[0]} chooses how to generate the output, but --target gives it; drop one "
            "of them"
        )
    return decoding(args)


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
    from glassformer.explain.select import containing

    if only is None:
        return trace
    return Trace(containing(trace, only, f"--only {only!r}"), trace.labels)


def _write_reports(trace: Trace, args, layers, heads, *, data, text, html: dict) -> None:
    """--json FILE, --html FILE ('-': stdout) and --png DIR, each followed by one 'wrote ...' line
    (`common.write_outputs`); the text report `text()` only when none of them is asked for.
    data: the JSON's dict, or a function that makes it (called only for --json)."""
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
    data = data() if args.json and callable(data) else data
    steps = f"{len(data['steps'])} steps" if args.json else ""
    write_outputs(args, text, data=data, data_what=steps, page=page, done=done)
