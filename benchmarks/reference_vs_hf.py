"""Benchmark: the NumPy reference engine's forward pass (float64, plain and traced) against Hugging
Face's GPT2LMHeadModel (fp32, SDPA), GPT-2-small size (124M parameters, random weights, nothing
downloaded), batch 1, at 64 and 256 tokens, run alternately in one process; medians and ratios to
HF. Also the memory a full trace holds (distinct arrays, MB), as recorded by default (float64,
exact) and with `tracing(dtype=np.float32)` (what a server keeping many traces would use).

Target (issue 16.3): traced reference <= 1.5x HF's time. The reference engine computes in float64,
whose GEMMs run at about half the fp32 rate on this CPU, so ~2x HF is its physical floor unless the
work differs.

    .venv/bin/python benchmarks/reference_vs_hf.py [--tokens 64 256] [--repeats 5] [--threads 2]

The "before" figures: the same script with PYTHONPATH pointing at an older glassformer (e.g. `git
archive <commit> glassformer | tar -x -C /tmp/old`); a trace without float32 storage is then
measured as float64 only.

--threads sets both torch's threads and OpenBLAS's (OPENBLAS_NUM_THREADS, before NumPy loads). On a
busy machine (load above the core count) run --threads 1: waiting BLAS threads dominate otherwise.
"""

import argparse
import os
import statistics
import sys
import time


def trace_mb(trace) -> float:
    """MB held by a trace: its distinct stored arrays (a shared mask counted once; a step derived
    from another stores nothing)."""
    if hasattr(trace, "nbytes"):
        return trace.nbytes / 1e6
    arrays = {id(s.values): s.values for s in trace.steps}  # an older trace stores every step
    return sum(v.nbytes for v in arrays.values()) / 1e6


def has_float32_traces() -> bool:
    import inspect

    from glassformer.trace import tracing

    return "dtype" in inspect.signature(tracing).parameters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    if "numpy" in sys.modules:
        raise RuntimeError("NumPy was imported before OPENBLAS_NUM_THREADS could be set")
    import warnings

    import numpy as np
    import torch
    from _harness import alternate, report

    from glassformer import weights
    from glassformer.config import preset

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = preset("gpt2-small")
    params = weights.init(cfg, seed=0)  # float64
    torch.manual_seed(0)
    peer = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa")).eval()  # fp32, random
    print(
        f"GPT-2-small size ({weights.n_params(cfg) / 1e6:.0f}M parameters), batch 1; "
        f"threads {args.threads} (torch and OpenBLAS); medians of {args.repeats}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    for T in args.tokens:
        ids = np.random.default_rng(1).integers(0, cfg.vocab_size, size=T).tolist()
        runs = contenders(peer, params, cfg, ids)
        times = alternate(runs, repeats=args.repeats)
        med = {k: statistics.median(v) for k, v in times.items()}
        report(f"{T} tokens", times, "reference traced", "HF GPT-2 fp32", unit=1e3)
        for name in runs:
            if name.startswith("reference"):
                print(f"  {name} / HF = {med[name] / med['HF GPT-2 fp32']:.2f}x", end="")
                print("  (target <= 1.5x)" if name == "reference traced" else "")
        print(f"  float64 / float32 GEMM time, NumPy, ({T} x 768) @ (768 x 3072): {floor(T):.2f}x")
        kinds = [("float64 (default)", {}), ("float32", {"dtype": np.float32})]
        for name, kw in kinds[: 2 if has_float32_traces() else 1]:
            trace = runs["reference traced"].record(**kw)
            print(f"  trace memory, {name}: {trace_mb(trace):.1f} MB in {len(trace)} steps")


def contenders(peer, params, cfg, ids) -> dict:
    import numpy as np
    import torch

    from glassformer import reference as R
    from glassformer.trace import tracing

    batch = torch.tensor([ids])

    def hf_fp32():
        with torch.inference_mode():
            return peer(batch).logits

    def plain():
        return R.forward(params, cfg, ids)

    def traced(**kw):
        def record(**more):
            with tracing(**(kw | more)) as trace:
                R.forward(params, cfg, ids)
            return trace

        def go():
            return record()

        go.record = record
        return go

    runs = {"HF GPT-2 fp32": hf_fp32, "reference": plain, "reference traced": traced()}
    if has_float32_traces():
        runs["reference traced float32"] = traced(dtype=np.float32)
    return runs


def floor(T: int, repeats: int = 7) -> float:
    """Median time ratio of a float64 to a float32 NumPy matmul of a GPT-2 FFN's shape."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((T, 768)), rng.standard_normal((768, 3072))
    pairs = {"64": (a, b), "32": (a.astype(np.float32), b.astype(np.float32))}
    times = {k: [] for k in pairs}
    for _ in range(repeats):
        for k, (x, y) in pairs.items():
            t0 = time.perf_counter()
            x @ y
            times[k].append(time.perf_counter() - t0)
    return statistics.median(times["64"]) / statistics.median(times["32"])


if __name__ == "__main__":
    main()
