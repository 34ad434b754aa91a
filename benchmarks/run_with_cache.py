"""Benchmark: `Model.run_with_cache` over a batch against a loop of one text at a time (issue 36
point 5), alternated in one process: the shipped `models/char-lm` on the first N non-empty lines
of tinyshakespeare (cut to its 64-token context), the PyTorch engine in float32, every step kept
(or `--names`). Contenders:

  - batched: `m.run_with_cache(lines)`, `--batch-size` lines per forward pass;
  - one at a time: `[m.run_with_cache([line]) for line in lines]`, the loop a user writes
    without a batch (the same engine, the same steps, no padding);
  - trace loop (`--with-trace`): `[m.trace(line) for line in lines]`, the reference engine's
    float64 trace of every step, what Python offered before run_with_cache.

Medians of `--repeats` (>= 5) alternated runs; the ratio is one at a time / batched.
transformer_lens is not installed here, so it is not a contender.

    flock /tmp/bench.lock .venv/bin/python benchmarks/run_with_cache.py [--names 'decoder.*.A']
"""

import argparse
import sys
from pathlib import Path

import torch
from _harness import alternate, report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's glassformer

from glassformer.data import resolve  # noqa: E402
from glassformer.opening import load  # noqa: E402


def lines(n: int) -> list[str]:
    import gzip

    with gzip.open(resolve("tinyshakespeare"), "rt", encoding="utf-8") as f:
        found = [line.strip()[:64] for line in f if line.strip()]
    return found[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--dtype", default="float32", choices=["float64", "float32", "int8"])
    ap.add_argument("--names", default=None, help="globs to keep, comma-separated (default all)")
    ap.add_argument("--with-trace", action="store_true", help="also time m.trace per text")
    args = ap.parse_args()
    if args.repeats < 5:
        ap.error("--repeats: give at least 5 (medians of fewer mean little on a shared machine)")
    torch.set_num_threads(args.threads)
    m = load(ROOT / "models" / "char-lm")
    texts = lines(args.texts)
    options = dict(names=args.names, dtype=args.dtype)
    contenders = {
        "batched": lambda: m.run_with_cache(texts, batch_size=args.batch_size, **options),
        "one at a time": lambda: [m.run_with_cache([t], **options) for t in texts],
    }
    if args.with_trace:
        contenders["trace loop (reference)"] = lambda: [m.trace(t) for t in texts]
    cache = contenders["batched"]()
    print(f"{len(texts)} texts, {int(cache.mask.sum())} tokens, {len(cache)} steps kept, "
          f"{cache.nbytes / 2**20:.1f} MiB; {args.dtype}, {args.threads} threads")  # fmt: skip
    times = alternate(contenders, repeats=args.repeats)
    ratio = report("run_with_cache", times, "one at a time", "batched", 1e3, "ms")
    print(f"  batched is {ratio:.2f}x as fast as one text at a time")


if __name__ == "__main__":
    main()
