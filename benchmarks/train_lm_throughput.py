"""Benchmark: char-LM training throughput with nanoGPT's CPU configuration (4 layers, 4 heads,
128 dims, context 64, batch 12, dropout 0), fp32 and bf16 autocast, as tokens/s and as model-FLOPs
utilisation (MFU) of a fp32 GEMM peak measured in the same run.

FLOPs per token: 6N + 12·L·H·D·T (nanoGPT's estimate; N = non-embedding... here all parameters,
as nanoGPT counts them). Targets (issue 4): >= 1.25x nanoGPT's 27,500 tokens/s measured on this
machine, i.e. >= 50% MFU.

    .venv/bin/python benchmarks/train_lm_throughput.py
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from glassformer.config import preset
from glassformer.torch_model import Transformer
from glassformer.train import bf16_supported, param_groups


def gemm_peak(n: int = 2048, repeats: int = 7) -> float:
    """Median fp32 GFLOP/s of an n x n x n matmul."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(times) / 1e9


def step_time(model, opt, x, y, bf16: bool) -> float:
    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--force-bf16",
        action="store_true",
        help="time bf16 autocast even without native bf16 (emulated: very slow)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = preset("char-lm")
    B, T = 12, cfg.max_len
    model = Transformer(cfg)
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-3)
    n_params = sum(p.numel() for p in model.parameters())
    flops_per_token = 6 * n_params + 12 * cfg.n_decoder_layers * cfg.n_heads * cfg.head_dim * T
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
    y = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
    modes = [("fp32", False)]
    if bf16_supported("cpu") or args.force_bf16:
        modes.append(("bf16", True))
    for _, bf16 in modes:
        for _ in range(5):
            step_time(model, opt, x, y, bf16)  # warm up
    per = {name: [] for name, _ in modes}
    peaks = []
    for _ in range(args.rounds):  # alternate: GEMM peak, fp32 steps, bf16 steps
        peaks.append(gemm_peak())
        for name, bf16 in modes:
            times = [step_time(model, opt, x, y, bf16) for _ in range(args.steps)]
            per[name].append(statistics.median(times))
    peak = statistics.median(peaks)
    print(f"\nchar-LM training, nanoGPT CPU config ({n_params:,} parameters, batch {B} x {T})")
    print(f"  fp32 GEMM peak (2048^3, median of {args.rounds}): {peak:.0f} GFLOP/s")
    for name, ts in per.items():
        t = statistics.median(ts)
        tok_s = B * T / t
        mfu = tok_s * flops_per_token / (peak * 1e9)
        print(
            f"  {name}: {t * 1e3:6.1f} ms/iter  {tok_s:8.0f} tokens/s  MFU {mfu * 100:5.1f}% "
            f"of the fp32 GEMM peak"
        )
    if len(modes) == 1:
        print(
            f"  bf16: not timed: this CPU ({torch.backends.cpu.get_cpu_capability()}) has no "
            "native bf16 (emulated bf16 measured ~1 s/iter here); --force-bf16 to time it"
        )
    nanogpt = 27_500
    fp32 = B * T / statistics.median(per["fp32"])
    print(
        f"  fp32 tokens/s vs nanoGPT's 27,500 (measured on a quiet machine): {fp32 / nanogpt:.2f}x"
        "  (target >= 1.25x, i.e. >= 50% MFU)"
    )


if __name__ == "__main__":
    main()
