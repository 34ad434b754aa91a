"""Benchmark (b): glassformer's attention forward+backward vs calling
F.scaled_dot_product_attention directly (B 8, H 12, D 64, causal, fp32). Target <= 1.05x.

    .venv/bin/python benchmarks/attention_vs_sdpa.py
"""

import argparse

import torch
import torch.nn.functional as F
from _harness import alternate, report

from glassformer.config import Config
from glassformer.torch_model import MultiHeadAttention


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B, H, D = 8, 12, 64
    cfg = Config(arch="decoder", vocab_size=8, d_model=H * D, n_heads=H, d_ff=8)
    attn = MultiHeadAttention(cfg)
    for T in (256, 1024):
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(B, H, T, D, generator=g, requires_grad=True) for _ in range(3))

        def ours(q=q, k=k, v=v):
            attn._attend(q, k, v, None, True).sum().backward()

        def sdpa(q=q, k=k, v=v):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

        times = alternate(
            {"glassformer attention": ours, "F.sdpa direct": sdpa}, repeats=args.repeats
        )
        report(
            f"attention forward+backward, B{B} H{H} T{T} D{D} causal fp32",
            times,
            "glassformer attention",
            "F.sdpa direct",
            unit=1e3,
        )


if __name__ == "__main__":
    main()
