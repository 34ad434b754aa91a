"""Benchmark: char-LM training throughput at nanoGPT's CPU configuration (4 layers, 4 heads, 128
dims, context 64, batch 12, dropout 0, real Tiny Shakespeare), glassformer's own training loop
(`train.train`, every per-step cost included: batches, schedule, clipping, AdamW, logging) against
a plain GPT-2-style peer written the way nanoGPT is (`gpt_peer.py`), alternately in one process:
tokens/s of each, their ratio, and model-FLOPs utilisation (MFU) of a fp32 GEMM peak measured in
the same run.

FLOPs per token: 6N + 12·L·H·Q·T (nanoGPT's estimate; N all parameters, Q the head dimension).
Targets (issue 16.4): glassformer / peer tokens/s >= 1.1, MFU >= 55%.

    .venv/bin/python benchmarks/train_lm_throughput.py [--rounds 5] [--steps 30] [--threads 2]

On a busy machine (load above the core count) two threads wait on each other at every operation
and the times measure the load; compare --threads 1 runs then.
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import torch
from gpt_peer import Trainer

from glassformer.config import preset
from glassformer.tasks import prepare_task
from glassformer.torch_model import Transformer
from glassformer.train import TrainConfig, bf16_supported, train


def gemm_peak(n: int = 2048, repeats: int = 5) -> float:
    """Median fp32 GFLOP/s of an n x n x n matmul."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(times) / 1e9


def glassformer_steps(cfg, tcfg, task, warmup: int, steps: int) -> list[float]:
    """Seconds per step of `train` (a new model each call), from the loop's own step events."""
    ends = []

    def on_event(event):
        if event.kind == "step":
            ends.append(time.perf_counter())

    tcfg = tcfg.override(f"max_steps={warmup + steps}", f"eval_interval={10**6}")
    with tempfile.TemporaryDirectory() as out:
        train(cfg, tcfg, task, out, callback=on_event, evaluate=lambda *args: {})
    return list(np.diff(ends)[warmup - 1 :])


def peer_steps(peer: Trainer, warmup: int, steps: int) -> list[float]:
    times = []
    for _ in range(warmup + steps):
        t0 = time.perf_counter()
        peer.step()
        times.append(time.perf_counter() - t0)
    return times[warmup:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="also glassformer with bf16 autocast")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tcfg = TrainConfig(threads=args.threads)
    cfg, task = prepare_task("lm", preset("char-lm"), tcfg, "tinyshakespeare")
    B, T = tcfg.batch_size, tcfg.block_size
    peer = Trainer(np.asarray(task.train.ids), cfg.vocab_size, T, B)
    n_params = sum(p.numel() for p in Transformer(cfg).parameters())
    n_peer = sum(p.numel() for p in peer.model.parameters())
    head_dim = cfg.d_model // cfg.n_heads
    flops_per_token = 6 * n_params + 12 * cfg.n_decoder_layers * cfg.n_heads * head_dim * T
    runs = {
        "glassformer": lambda: glassformer_steps(cfg, tcfg, task, 5, args.steps),
        "peer (nanoGPT-style)": lambda: peer_steps(peer, 5, args.steps),
    }
    if args.bf16 and bf16_supported("cpu"):
        bf16 = tcfg.override("bf16=true")
        runs["glassformer bf16"] = lambda: glassformer_steps(cfg, bf16, task, 5, args.steps)
    per = {name: [] for name in runs}
    peaks = []
    for _ in range(args.rounds):  # alternate: GEMM peak, then each contender
        peaks.append(gemm_peak())
        for name, run in runs.items():
            per[name].append(statistics.median(run()))
    peak = statistics.median(peaks)
    print(
        f"\nchar-LM training step, nanoGPT CPU config ({n_params:,} parameters, the peer "
        f"{n_peer:,} without LayerNorm biases; batch {B} x {T}, fp32), "
        f"{args.threads} threads, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"  fp32 GEMM peak (2048^3, median of {args.rounds} rounds): {peak:.0f} GFLOP/s")
    tok = {}
    for name, ts in per.items():
        t = statistics.median(ts)
        tok[name] = B * T / t
        mfu = tok[name] * flops_per_token / (peak * 1e9)
        print(
            f"  {name:<22} {t * 1e3:7.1f} ms/step (rounds {min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f})"
            f" {tok[name]:8.0f} tokens/s  MFU {mfu * 100:5.1f}%"
        )
    ratio = tok["glassformer"] / tok["peer (nanoGPT-style)"]
    print(f"  tokens/s glassformer / peer = {ratio:.3f}  (target >= 1.1; MFU target >= 55%)")


if __name__ == "__main__":
    main()
