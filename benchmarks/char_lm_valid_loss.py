"""Validation loss of a character LM over every window of the last 10% of Tiny Shakespeare: the
steady estimate that issue 16.4 compares with nanoGPT's (1.8982 for nanoGPT's own model at its CPU
configuration after 2000 iterations; glassformer's shipped char-lm before issue 16: 1.9106).

Every window: x = ids[i : i+T], y = ids[i+1 : i+T+1] for i = 0, T, 2T, ... (T = 64, the 1,742
non-overlapping windows; the way both figures above were measured), the mean cross-entropy over all
of their positions. `--stride 1` takes every start instead (each character predicted from contexts
of every length 1..T). The model runs in float32 (the PyTorch engine), the sums in float64.

    .venv/bin/python benchmarks/char_lm_valid_loss.py models/char-lm [runs/other ...]
"""

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from glassformer import weights
from glassformer.data import read_text, split_text
from glassformer.torch_model import from_params


def window_loss(model, ids: np.ndarray, T: int, stride: int = 1, batch: int = 512) -> float:
    starts = np.arange(0, len(ids) - T, stride)
    total, count = 0.0, 0
    offsets = np.arange(T)
    with torch.inference_mode():
        for k in range(0, len(starts), batch):
            idx = starts[k : k + batch, None] + offsets  # (B, T)
            x, y = torch.from_numpy(ids[idx]), torch.from_numpy(ids[idx + 1])
            logits = model(x)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), reduction="sum")
            total += float(loss.double())
            count += y.numel()
    return total / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("models", nargs="+", help="model folders (a checkpoint or an export)")
    ap.add_argument("--data", default="tinyshakespeare")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--stride", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    _, valid_text = split_text(read_text(args.data), 0.9)
    for folder in args.models:
        cfg, params, tok = weights.load(folder, dtype=np.float32)
        model = from_params(cfg, params, dtype=torch.float32).eval()
        ids = np.array(tok.encode(valid_text), dtype=np.int64)
        loss = window_loss(model, ids, args.block, args.stride)
        n = len(range(0, len(ids) - args.block, args.stride))
        print(f"{folder}: {loss:.4f} over {n:,} windows of {args.block} (stride {args.stride})")


if __name__ == "__main__":
    main()
