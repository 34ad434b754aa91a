"""Benchmark: char-LM training throughput at nanoGPT's CPU configuration (4 layers, 4 heads, 128
dims, context 64, batch 12, dropout 0, real Tiny Shakespeare), glassformer's own training loop
(`train.train`, every per-step cost included: batches, schedule, clipping, AdamW, logging) against
a plain GPT-2-style peer written the way nanoGPT is (`gpt_peer.py`), in one process: tokens/s of
each, their ratio, and model-FLOPs utilisation (MFU) of a fp32 GEMM peak measured in the same run.

The two alternate step by step (G P G P ...): glassformer's loop calls back after each of its
steps and the callback runs one peer step, so load that comes and goes on a shared machine falls
on both alike. A glassformer step is timed from the end of the peer's step to its next callback
(the rest of its loop included); medians over every timed step of every round.

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
from glassformer.torch_model import Transformer
from glassformer.training.tasks import prepare_task
from glassformer.training.train import TrainConfig, bf16_supported, train


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


def side_by_side(cfg, tcfg, task, peer: Trainer, warmup: int, steps: int):
    """Seconds per step of `train` (a new model) and of the peer, one step of each in turn."""
    ours, theirs, since = [], [], [None]

    def on_event(event):
        if event.kind != "step":
            return
        now = time.perf_counter()
        if since[0] is not None:
            ours.append(now - since[0])
        peer.step()
        since[0] = time.perf_counter()
        theirs.append(since[0] - now)

    tcfg = tcfg.override(f"max_steps={warmup + steps + 1}", f"eval_interval={10**6}")
    with tempfile.TemporaryDirectory() as out:
        train(cfg, tcfg, task, out, callback=on_event, evaluate=lambda *args: {})
    return ours[warmup:], theirs[warmup + 1 :]


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
    modes = {"glassformer": tcfg}
    if args.bf16 and bf16_supported("cpu"):
        modes["glassformer bf16"] = tcfg.override("bf16=true")
    steps = {name: [] for name in modes} | {"peer (nanoGPT-style)": []}
    rounds = {name: [] for name in steps}
    peaks = []
    for _ in range(args.rounds):
        peaks.append(gemm_peak())
        for name, t in modes.items():
            ours, theirs = side_by_side(cfg, t, task, peer, 5, args.steps)
            for key, ts in ((name, ours), ("peer (nanoGPT-style)", theirs)):
                steps[key] += ts
                rounds[key].append(statistics.median(ts))
    peak = statistics.median(peaks)
    print(
        f"\nchar-LM training step, nanoGPT CPU config ({n_params:,} parameters, the peer "
        f"{n_peer:,} without LayerNorm biases; batch {B} x {T}, fp32 unless marked), "
        f"{args.threads} thread(s), load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
        f"cores, CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"  fp32 GEMM peak (2048^3, median of {args.rounds} rounds): {peak:.0f} GFLOP/s")
    tok = {}
    for name, ts in steps.items():
        t = statistics.median(ts)
        tok[name] = B * T / t
        mfu = tok[name] * flops_per_token / (peak * 1e9)
        lo, hi = min(rounds[name]), max(rounds[name])
        print(
            f"  {name:<22} {t * 1e3:7.1f} ms/step (round medians {lo * 1e3:.1f}-{hi * 1e3:.1f}, "
            f"{len(ts)} steps) {tok[name]:8.0f} tokens/s  MFU {mfu * 100:5.1f}%"
        )
    peer_tok = tok["peer (nanoGPT-style)"]
    print(f"  tokens/s glassformer / peer = {tok['glassformer'] / peer_tok:.3f}  (target >= 1.1)")
    if "glassformer bf16" in tok:
        print(f"  tokens/s glassformer bf16 / peer fp32 = {tok['glassformer bf16'] / peer_tok:.3f}")
    print("  MFU target >= 55% (fp32)")


if __name__ == "__main__":
    main()
