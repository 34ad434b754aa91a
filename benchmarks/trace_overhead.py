"""What seeing and changing cost: one forward pass plain, traced (every step recorded) and
intervened (one head zero-ablated through `trace.intervene`), in both engines, measured
alternately in one process; medians of --repeats runs and their ratios to the plain pass.

Models: GPT-2-small-sized random weights (124M parameters, 12 layers, d 768, 12 heads, vocab
50257) and the char-lm preset (4 layers, d 128, 4 heads), batch 1, 64 tokens; the reference
engine in float64 (its only dtype), the PyTorch engine in float32. A traced or intervened torch
pass leaves SDPA for the explicit path, head by head, and a trace copies every step to float64.

    .venv/bin/python benchmarks/trace_overhead.py [--small-only] [--repeats 5] [--threads 2]

On a busy machine, run single-threaded (`OPENBLAS_NUM_THREADS=1 ... --threads 1`): with more
runnable processes than cores, two OpenMP or OpenBLAS threads wait on each other at every op (a
char-lm forward took 1 s with 2 torch threads against 3 ms with 1, under a load of 12 on 2 cores).
"""

import argparse
import os
import statistics

import numpy as np
import torch
from _harness import alternate

from glassformer import reference as R
from glassformer.config import preset
from glassformer.torch_model import Transformer, to_params
from glassformer.trace import intervene, tracing

T = 64


def contenders(cfg, params, model, ids):
    layer = cfg.n_decoder_layers // 2
    ablate = {f"decoder.{layer}.self_attn.head0.C": lambda x: x * 0}
    batch = torch.tensor([ids])

    def ref():
        return R.forward(params, cfg, ids)

    def tor():
        with torch.no_grad():
            return model(batch)

    def traced(run):
        def go():
            with tracing() as tr:
                run()
            return tr

        return go

    def intervened(run):
        def go():
            with intervene(ablate):
                return run()

        return go

    return {
        "reference": {"plain": ref, "traced": traced(ref), "intervened": intervened(ref)},
        "torch": {"plain": tor, "traced": traced(tor), "intervened": intervened(tor)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--small-only", action="store_true", help="only the char-lm-sized model")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"torch threads {args.threads}, OPENBLAS_NUM_THREADS {blas}; medians of {args.repeats}")
    sizes = ["char-lm"] if args.small_only else ["char-lm", "gpt2-small"]
    for name in sizes:
        cfg = preset(name)
        torch.manual_seed(0)
        model = Transformer(cfg).eval()  # float32
        params = to_params(model)  # float64 NumPy for the reference engine
        ids = np.random.default_rng(1).integers(0, cfg.vocab_size, size=T).tolist()
        with tracing() as tr:
            R.forward(params, cfg, ids)
        mb = sum(s.values.nbytes for s in tr.steps) / 1e6
        print(
            f"\n{name}: {cfg.n_decoder_layers} layers, d {cfg.d_model}, {cfg.n_heads} heads, "
            f"vocab {cfg.vocab_size}, {T} tokens; a reference trace: {len(tr)} steps, {mb:.1f} MB"
        )
        del tr
        for engine, runs in contenders(cfg, params, model, ids).items():
            times = alternate(runs, repeats=args.repeats)
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"  {engine:<9}", end="")
            for k, t in med.items():
                ratio = "" if k == "plain" else f" ({t / med['plain']:.2f}x)"
                print(f"  {k} {t * 1e3:8.1f} ms{ratio:<9}", end="")
            print(f"  n={args.repeats}")


if __name__ == "__main__":
    main()
