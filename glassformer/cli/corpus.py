"""`glassformer record-corpus` and `glassformer top`: a model over a whole corpus into a store of
activations on disk, and the contexts that activate a unit most. The work is the corpus wing's
(`Model.record_corpus`, `glassformer.corpus.top`); here are the options, the progress bar, the
printed summary and the files.

    glassformer record-corpus MODEL FILE --steps GLOBS --out DIR [--engine torch|reference]
                              [--dtype float32|float64|int8] [--side source|target]
                              [--batch-size B] [--max-tokens N] [--shard-rows R]
    glassformer top DIR --unit UNIT [--k 20] [--before 20] [--sae SAE] [--html F] [--json F]

Under torchrun (`torchrun --nproc_per_node 2 -m glassformer record-corpus ...`) every rank runs
the command on its block of documents; rank 0 writes the index and prints the summary.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from glassformer.cli.common import (
    apart,
    load_model,
    option_type,
    output_file,
    overwrite_arg,
    threads_arg,
    write_outputs,
)


def add_parsers(sub) -> None:
    r = sub.add_parser(
        "record-corpus",
        help="run a model over a corpus and store the chosen steps on disk (memory-mapped)",
        description="Run the fast engine over a text file (one document per line; a "
        "translator's TSV with --side) and store the chosen steps, one row per token position, "
        "in shards of memory-mappable .npy arrays with an index. Resumable: a killed run, run "
        "again, continues from its last complete shard. Under torchrun each rank records its "
        "block of documents and rank 0 writes the index.",
    )
    r.add_argument("checkpoint", help="a checkpoint or Hugging Face folder")
    r.add_argument("corpus", help="a text file, one document per line, or a shipped corpus's name")
    r.add_argument(
        "--steps",
        required=True,
        help="step names or globs with one row per token position, comma-separated "
        "(decoder.1.ffn.hidden, 'decoder.*.out', decoder.0.self_attn.head1.C)",
    )
    r.add_argument("--out", required=True, metavar="DIR", help="the store's folder")
    r.add_argument(
        "--engine",
        choices=["torch", "reference"],
        default=None,
        help="torch (batched; the default) or reference (float64, a document at a time)",
    )
    r.add_argument(
        "--dtype",
        choices=["float32", "float64", "int8"],
        default="float32",
        help="how values are stored (float64: computed in float64 too; int8: each row scaled "
        "by its absmax / 127)",
    )
    r.add_argument(
        "--side",
        choices=["source", "target"],
        default=None,
        help="a translator's TSV side: the source (default) or the target, teacher-forced",
    )
    r.add_argument("--batch-size", type=option_type("batch_size"), default=32)
    r.add_argument(
        "--max-tokens", type=option_type("max_tokens"), default=None, help="at most N rows"
    )
    r.add_argument(
        "--shard-rows",
        type=option_type("shard_rows"),
        default=None,
        help="rows per shard (default: 64 MiB of values)",
    )
    r.add_argument(
        "--check-rows",
        type=option_type("check_rows"),
        default=8,
        help="rows recomputed by the float64 reference engine and compared (default 8)",
    )
    r.add_argument("--progress", action="store_true", help="show the progress bar off a terminal")
    threads_arg(r)
    r.set_defaults(func=cmd_record_corpus)

    t = sub.add_parser(
        "top",
        help="the contexts of a store that activate a unit most",
        description="Read a store of activations (record-corpus) shard by shard, memory-mapped, "
        "and print the K contexts where UNIT is largest, the token marked and its value. UNIT: "
        "STEP:N (a column, e.g. decoder.0.ffn.hidden:123), a head (decoder.1.self_attn.head1: "
        "the norm of its output row C), STEP (the norm of its row), feature:N (with --sae).",
    )
    t.add_argument("store", help="a store's folder (record-corpus --out)")
    t.add_argument("--unit", required=True, help="the unit ranked")
    t.add_argument("--k", type=option_type("k"), default=20, help="how many contexts (20)")
    t.add_argument(
        "--before", type=option_type("max_tokens"), default=20, help="tokens of context (20)"
    )
    t.add_argument("--sae", metavar="SAE", help="a sparse autoencoder's folder, for feature:N")
    t.add_argument("--json", metavar="FILE", help="write the examples as JSON ('-' stdout)")
    t.add_argument("--html", metavar="FILE", help="write a self-contained HTML page ('-' stdout)")
    overwrite_arg(t)
    t.set_defaults(func=cmd_top)


def _rank0() -> bool:
    return os.environ.get("RANK", "0") in ("", "0")


def cmd_record_corpus(args) -> int:
    from tqdm import tqdm

    apart({"--out": args.out}, {"CHECKPOINT": args.checkpoint, "CORPUS": args.corpus})
    m = load_model(args.checkpoint)
    show = _rank0() and (args.progress or sys.stderr.isatty())
    with tqdm(total=None, unit="doc", disable=not show, file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            r = m.record_corpus(
                args.corpus,
                steps=args.steps,
                out=args.out,
                engine=args.engine,
                dtype=args.dtype,
                side=args.side,
                batch_size=args.batch_size,
                max_tokens=args.max_tokens,
                shard_rows=args.shard_rows,
                check_rows=args.check_rows,
                progress=progress,
            )
        except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: the complete shards stay
            from glassformer import interrupts
            from glassformer.errors import Interrupted

            signum = interrupts.acted_on(e)
            kept = len(list(Path(args.out).glob("shard-*"))) if Path(args.out).is_dir() else 0
            raise Interrupted(
                signum,
                f"interrupted: {kept} complete shard{'s' * (kept != 1)} kept in {args.out}; run "
                "the same command again to continue",
            ) from None
    if _rank0():
        print(summary(r))
    return 0 if r.check["ok"] else 1


def summary(r) -> str:
    """The printed report of a recording: what, where, the check and the cost."""
    c = r.check
    lines = [
        f"recorded {r.rows:,} rows of {r.documents:,} documents into {r.out} ({r.shards} "
        f"shards, {r.dtype}, the {r.engine} engine"
        + (f"; {r.resumed} shards kept from a killed run" if r.resumed else "")
        + ")",
        "  steps: " + ", ".join(f"{k} ({w})" for k, w in r.steps.items()),
        f"  checked {c['rows']} rows against the float64 reference engine: max error "
        f"{c['max_error']:.1e} x the row's scale (tolerance {c['tolerance']:.0e}"
        + (" + half an int8 step" if r.dtype == "int8" else "")
        + f"): {'ok' if c['ok'] else 'FAILED'}",
        f"  cost: {r.seconds:.2f} s, {r.rows_per_second:,.0f} rows/s",
    ]
    if r.truncated:
        lines.append(f"  {r.truncated} documents were longer than max_len and cut to it")
    if r.slowdown is not None:
        lines[-1] += (
            f"; a plain forward pass of the same batches: {r.plain_rows_per_second:,.0f} rows/s "
            f"({r.slowdown:.2f}x)"
        )
    return "\n".join(lines)


def cmd_top(args) -> int:
    from glassformer.corpus.store import open_store
    from glassformer.corpus.top import top_examples
    from glassformer.errors import GlassformerError

    if args.json == "-" and args.html == "-":
        raise GlassformerError("--json - and --html - would both write to stdout; give one a file")
    outs = {"--json": args.json, "--html": args.html}
    apart(outs, {"STORE": args.store, "--sae": args.sae})
    for path in outs.values():
        output_file(path, args.overwrite)
    store = open_store(args.store)
    top = top_examples(store, args.unit, k=args.k, before=args.before, sae=args.sae)
    page = None
    if args.html:
        from glassformer.explain.html_corpus import top_page

        page = top_page(top.to_dict())
    write_outputs(args, lambda: text(top.to_dict()), data=top, data_what="the examples", page=page)
    return 0


def text(d: dict) -> str:
    from glassformer.corpus.top import context_text

    lines = [
        f"top {len(d['examples'])} of {d['unit']} over {d['rows']:,} rows of {d['store']}",
        f"  value: {d['says']}; mean {d['mean']:.4g}",
    ]
    for i, e in enumerate(d["examples"], 1):
        where = f"doc {e['document']} pos {e['position']}"
        lines.append(f"{i:>4} {e['value']:>10.4f}  {where:<18} {context_text(e)}")
    return "\n".join(lines)
