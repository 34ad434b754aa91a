"""Benchmark: what int8 inference costs in quality, on the shipped models.

- `models/char-lm`: validation loss (mean cross-entropy, nats per character) over every
  64-character window of the last 10% of Tiny Shakespeare (nanoGPT's validation split), every
  position of every window, fp32 against int8 (`glassformer.quantize.int8`). Goal: int8 within 1%.
- `models/en-es`: sacreBLEU of beam-4 translations (`translating.translate`, batched) of the 1,000
  `eng-spa-valid` pairs, fp32 against int8. Goal: int8 within 0.5 BLEU. Also: how many
  translations are identical.

Not a timing: one pass each. `--stride K` takes every K-th window, `--limit N` N sentences (every
k-th), for a quick run.

    .venv/bin/python benchmarks/int8_quality.py
"""

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's glassformer

from glassformer.data import read_pairs, read_text  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.inference import torch_engine  # noqa: E402
from glassformer.metrics import translation_scores  # noqa: E402
from glassformer.translating import translate  # noqa: E402


def char_lm_loss(model, ids: torch.Tensor, T: int, stride: int, batch: int) -> float:
    """Mean next-character cross-entropy over windows x = ids[i:i+T], y = ids[i+1:i+T+1]."""
    starts = torch.arange(0, len(ids) - T, stride)
    total, count = 0.0, 0
    with torch.no_grad():
        for b0 in range(0, len(starts), batch):
            s = starts[b0 : b0 + batch, None] + torch.arange(T + 1)[None]  # (B, T+1)
            w = ids[s]
            logits = model(w[:, :-1])  # (B, T, V)
            loss = torch.nn.functional.cross_entropy(
                logits.flatten(0, 1).double(), w[:, 1:].flatten(), reduction="sum"
            )
            total, count = total + float(loss), count + w[:, 1:].numel()
    return total / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stride", type=int, default=1, help="every K-th window (1: all)")
    ap.add_argument("--limit", type=int, default=None, help="translate N sentences (all 1,000)")
    ap.add_argument("--beam", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    cfg, params, tok = loading.load(ROOT / "models" / "char-lm")
    text = read_text("tinyshakespeare")
    ids = torch.tensor(tok.encode(text[int(0.9 * len(text)) :]))
    loss = {
        d: char_lm_loss(torch_engine(cfg, params, d), ids, cfg.max_len, args.stride, 256)
        for d in ("float32", "int8")
    }
    n_windows = len(range(0, len(ids) - cfg.max_len, args.stride))
    print(f"\nmodels/char-lm, validation loss over {n_windows:,} windows of {cfg.max_len} chars")
    for d, v in loss.items():
        print(f"  {d:<8} {v:.4f}")
    change = loss["int8"] / loss["float32"] - 1
    print(f"  int8 / fp32 - 1 = {change:+.2%}  (goal: within 1%)")

    cfg, params, tok = loading.load(ROOT / "models" / "en-es")
    pairs = read_pairs("eng-spa-valid")
    if args.limit:
        pairs = pairs[:: max(1, len(pairs) // args.limit)][: args.limit]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    out = {d: translate(torch_engine(cfg, params, d), tok, sources, beam=args.beam) for d in loss}
    bleu = {d: translation_scores(hyp, refs) for d, hyp in out.items()}
    print(f"\nmodels/en-es, beam {args.beam}, {len(sources)} eng-spa-valid sentences")
    for d, s in bleu.items():
        print(f"  {d:<8} BLEU {s.bleu:.2f}  chrF {s.chrf:.2f}")
    print(f"  ({bleu['float32'].bleu_signature})")
    same = sum(a == b for a, b in zip(out["float32"], out["int8"], strict=True))
    diff = bleu["int8"].bleu - bleu["float32"].bleu
    print(f"  BLEU int8 - fp32 = {diff:+.2f}  (goal: within 0.5); identical: {same}/{len(refs)}")


if __name__ == "__main__":
    main()
