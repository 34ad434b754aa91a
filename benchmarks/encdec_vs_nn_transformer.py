"""Benchmark (c): glassformer's encoder-decoder forward vs torch.nn.Transformer, 6+6 layers,
d_model 512, 8 heads, d_ff 2048, post-LN ReLU, batch 8 x 64, fp32, eval, no grad. Both compute
the two stacks on embedded inputs (no vocabulary projection). Target <= 1.0x.

    .venv/bin/python benchmarks/encdec_vs_nn_transformer.py
"""

import argparse

import torch
from _harness import alternate, report

from glassformer.config import Config
from glassformer.torch_model import Transformer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B, S, T, C = 8, 64, 64, 512
    cfg = Config(
        arch="encoder-decoder",
        vocab_size=8,
        d_model=C,
        n_heads=8,
        d_ff=2048,
        n_encoder_layers=6,
        n_decoder_layers=6,
        max_len=T,
        positions="none",
    )
    ours = Transformer(cfg).eval()
    peer = torch.nn.Transformer(
        d_model=C,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.0,
        batch_first=True,
    ).eval()
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randn(B, S, C, generator=g), torch.randn(B, T, C, generator=g)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T)

    @torch.inference_mode()
    def run_ours():
        x = src
        for block in ours.encoder.layers:
            x = block(x)
        y = tgt
        for block in ours.decoder.layers:
            y = block(y, causal=True, memory=x)
        return y

    @torch.inference_mode()
    def run_peer():
        return peer(src, tgt, tgt_mask=causal, tgt_is_causal=True)

    times = alternate(
        {"glassformer stacks": run_ours, "torch.nn.Transformer": run_peer}, repeats=args.repeats
    )
    report(
        f"encoder-decoder forward, 6+6 layers, d {C}, batch {B} x {T}, fp32",
        times,
        "glassformer stacks",
        "torch.nn.Transformer",
        unit=1e3,
    )


if __name__ == "__main__":
    main()
