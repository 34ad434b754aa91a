"""Benchmark: the cost of `translate --alignments` (issue 29 point 1): the shipped translator
(`models/en-es`) on all 1,000 `eng-spa-valid` sentences, beam 4, batches of 64, with and without
recording its cross-attention, alternated in one process. Goal: at most 1.3x the time.

"without": `Runtime.translations` as `glassformer translate` runs it. "with": the same call with
`align=` every (layer, head) pair, as `translate --alignments` runs it: `recording.Recorder`'s
forward hooks on the fast path (the KV cache, SDPA) recompute each new token's cross-attention
row, follow the chosen hypothesis through the beam, and each sentence's JSON line is built
(pieces, rows, argmax, word alignment, `json.dumps`); only the file write is left out. Both end
with text. The translations are checked identical.

    flock /tmp/bench.lock .venv/bin/python benchmarks/record_alignments.py [--dtype int8]
"""

import argparse
import json
import sys
import warnings
from pathlib import Path

import torch
from _harness import alternate, report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's glassformer

from glassformer import recording  # noqa: E402
from glassformer.data import read_pairs  # noqa: E402
from glassformer.model import Model  # noqa: E402

MODEL = ROOT / "models" / "en-es"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--dtype", default="float32", choices=["float64", "float32", "int8"])
    ap.add_argument("--limit", type=int, default=None, help="the first N sentences (all 1,000)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    m = Model.load(MODEL, dtype=args.dtype, on_note=lambda _: None)
    sources = [s for s, _ in read_pairs("eng-spa-valid")][: args.limit]
    pairs = recording.alignment_heads(m.cfg, None, None)

    def plain():
        return list(m.runtime.translations(sources, beam=args.beam, dtype=args.dtype))

    def aligned():
        from glassformer import generating

        out = generating.translations(m.runtime, sources, args.beam, None, args.dtype, None, pairs)
        return [(t, json.dumps(a, ensure_ascii=False)) for t, a in out]

    a, b = plain(), aligned()  # the warm-up, and the check that recording changes nothing
    same = sum(x == y for x, (y, _) in zip(a, b, strict=True))
    times = alternate({"with --alignments": aligned, "without": plain}, args.repeats, warmup=0)
    title = (
        f"models/en-es, {len(sources)} eng-spa-valid sentences, beam {args.beam}, {args.dtype}, "
        f"{args.threads} threads, one process, alternated"
    )
    ratio = report(title, times, "with --alignments", "without", unit=1.0, unit_name="s")
    size = sum(len(line) + 1 for _, line in b)
    print(f"  translations identical with and without recording: {same}/{len(a)}")
    print(f"  alignments: {size / 1e6:.1f} MB of JSON lines ({len(pairs)} heads averaged)")
    print(f"  goal: <= 1.3x  ->  {'met' if ratio <= 1.3 else 'NOT met'} ({ratio:.3f}x)")


if __name__ == "__main__":
    main()
