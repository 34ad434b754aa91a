"""Benchmark: `Model.record_corpus` (record-corpus) against a plain forward pass over the same
text (issue 41 point 1: goal <= 1.3x), alternated in one process: the shipped `models/char-lm`
on the first `--tokens` rows of tinyshakespeare (one line a document), the PyTorch engine in
float32, `--batch-size` lines per forward pass. Contenders:

  - record-corpus: the whole command's work into a fresh folder each time (tokenize, forward with
    the steps read, shards written, fsynced and swapped in, the index), no rows re-checked
    (check_rows=0: the check is the reference engine's, timed apart by the command);
  - plain forward: the same lines tokenized and run through the same engine in the same
    batches, nothing read or written.

Medians of `--repeats` (>= 5) alternated runs; the ratio is record / plain.

    flock /tmp/bench.lock .venv/bin/python benchmarks/record_corpus.py [--steps 'decoder.*.out']
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from _harness import alternate, report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's glassformer

from glassformer import activations, load  # noqa: E402
from glassformer.corpus import record  # noqa: E402
from glassformer.data import read_text  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", default="decoder.1.ffn.hidden")
    args = ap.parse_args()
    if args.repeats < 5:
        ap.error("--repeats: give at least 5 (medians of fewer mean little on a shared machine)")
    torch.set_num_threads(args.threads)
    m = load(ROOT / "models" / "char-lm")
    rt = m.runtime
    where = Path(tempfile.mkdtemp(prefix="bench-record-"))
    text = read_text("tinyshakespeare")
    n = [0]
    how = dict(steps=args.steps, check_rows=0, compare=False, max_tokens=args.tokens,
               batch_size=args.batch_size)  # fmt: skip

    def recorded():
        n[0] += 1
        out = where / f"s{n[0]}"
        m.record_corpus("tinyshakespeare", out=out, **how)
        shutil.rmtree(out)

    def plain():
        docs = record._documents(text, "text", "tinyshakespeare")
        ids, _, _ = record._tokenize(rt, docs, "text", args.tokens)
        forward = activations.torch_forward(rt.torch("float32"), rt.cfg, rt.params)
        kept = [list(map(int, x)) for x in ids if len(x)]
        for at in range(0, len(kept), args.batch_size):
            forward({"decoder": kept[at : at + args.batch_size]})

    r = m.record_corpus("tinyshakespeare", out=where / "first", **how)
    print(f"{r.rows} rows of {args.steps} ({', '.join(f'{k} {w}' for k, w in r.steps.items())}),"
          f" {r.shards} shards; float32, {args.threads} threads")  # fmt: skip
    times = alternate({"record-corpus": recorded, "plain forward": plain}, repeats=args.repeats)
    ratio = report("record-corpus", times, "record-corpus", "plain forward", 1e3, "ms",
                   per=r.rows, per_name="rows/s")  # fmt: skip
    print(f"  recording costs {ratio:.2f}x a plain forward pass over the same text")
    shutil.rmtree(where)


if __name__ == "__main__":
    main()
