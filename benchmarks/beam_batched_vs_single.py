"""Benchmark: beam search translation, batched (`translating.translate`: many sentences, each with
its beams, in one KV cache) against one sentence at a time (`decoding.beam_search` over the torch
engine's step functions, as `translate` did before), sentences per second, measured alternately
in one process. The shipped `models/en-es` (float32), beam 4, the 1,000 `eng-spa-valid` sources.
Target: the batched path translates >= 5x the sentences per second.

The one-at-a-time path takes minutes per pass here, so `--limit N` times it on N of the sentences
(every k-th: the file is sorted by length, so the subset spans all lengths); the batched path
always translates all 1,000. Both paths' translations of the subset are compared token for token.

    .venv/bin/python benchmarks/beam_batched_vs_single.py --limit 200
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch
from _harness import alternate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # time this checkout's glassformer, not an installed one

from glassformer import decoding, weights  # noqa: E402
from glassformer.data import read_pairs  # noqa: E402
from glassformer.inference import torch_engine  # noqa: E402
from glassformer.torch_steps import many_step_fn, step_fn  # noqa: E402
from glassformer.translating import translate  # noqa: E402

MODEL = ROOT / "models" / "en-es"


def one_at_a_time(model, tok, sentences: list[str], beam: int) -> list[str]:
    """Translate as `translating.translate(beam > 1)` did before batching: one sentence at a time,
    its live hypotheses scored in one forward without a cache (`many_step_fn`)."""
    cfg, out = model.cfg, []
    with torch.no_grad():
        for s in sentences:
            src = tok.encode(s)[: cfg.max_len] or [tok.unk_id or 0]
            r = decoding.beam_search(
                step_fn(model, src),
                [tok.bos_id],
                cfg.max_len - 1,
                tok.eos_id,
                width=beam,
                max_len=cfg.max_len,
                step_many=many_step_fn(model, src),
            )
            out.append(tok.decode(r.ids[1:]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64, help="sentences per batch (64)")
    ap.add_argument(
        "--limit",
        type=int,
        default=None,
        help="time the one-at-a-time path on this many sentences (default: all 1,000)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg, params, tok = weights.load(MODEL)
    model = torch_engine(cfg, params, "float32")
    sentences = [s for s, _ in read_pairs("eng-spa-valid")]
    n = len(sentences)
    k = max(1, n // args.limit) if args.limit else 1
    subset = list(range(0, n, k))[: args.limit or n]
    results: dict[str, list[str]] = {}

    def batched():
        results["batched"] = translate(
            model, tok, sentences, beam=args.beam, batch_size=args.batch_size
        )

    def single():
        results["single"] = one_at_a_time(model, tok, [sentences[i] for i in subset], args.beam)

    names = {"batched": f"batched, {n} sentences", "single": f"one at a time, {len(subset)}"}
    times = alternate({names["batched"]: batched, names["single"]: single}, args.repeats)
    print(
        f"\nbeam {args.beam} translation, models/en-es float32, eng-spa-valid, "
        f"{args.threads} threads, batches of {args.batch_size} sentences"
    )
    if len(subset) < n:
        print(
            f"  (the one-at-a-time path is timed on {len(subset)} of the {n} sentences, "
            f"every {k}th; the batched path on all {n})"
        )
    rate, best = {}, {}
    for key, count in (("batched", n), ("single", len(subset))):
        t = times[names[key]]
        med = statistics.median(t)
        rate[key], best[key] = count / med, count / min(t)
        print(
            f"  {names[key]:<28} median {med:8.2f} s  (min {min(t):.2f}, max {max(t):.2f}, "
            f"n={len(t)})  {rate[key]:8.1f} sentences/s"
        )
    print(f"  sentences/s ratio batched / one at a time = {rate['batched'] / rate['single']:.2f}")
    print(f"  (target >= 5; fastest passes: {best['batched'] / best['single']:.2f})")
    mine = [results["batched"][i] for i in subset]
    differ = [i for i, a, b in zip(subset, mine, results["single"], strict=True) if a != b]
    print(f"  same translations on the {len(subset)} timed by both: {not differ}")
    for i in differ:
        print(f"    {sentences[i]!r}: batched {mine[subset.index(i)]!r}")


if __name__ == "__main__":
    main()
