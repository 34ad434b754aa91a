"""Build glassformer/data/raschka_ch03.json: the inputs, literals and seeded weights of Raschka's
chapter 3 (rasbt/LLMs-from-scratch, ch03/01_main-chapter-code/ch03.ipynb), so that the
`self-attention` walkthrough needs no torch at run time.

    python tests/make_raschka_ch03_data.py            # rewrite the file
    python tests/make_raschka_ch03_data.py --check    # exit 1 if the file differs

Every weight is drawn here the way the notebook draws it (same seed, same creation order, same
shapes), with plain torch calls rather than glassformer's modules, and stored as the exact
float32 values. `tests/test_raschka_modules.py` checks that the shipped file is what this script
builds; `tests/test_golden_raschka.py` checks its weights against the golden files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import nn

OUT = Path(__file__).resolve().parents[1] / "glassformer" / "data" / "raschka_ch03.json"

SOURCE = (
    "Sebastian Raschka, Build a Large Language Model (From Scratch), Manning 2024, chapter 3; "
    "repository rasbt/LLMs-from-scratch, ch03/01_main-chapter-code/ch03.ipynb (Apache-2.0). "
    "Values are the exact float32 numbers that torch.manual_seed + torch.rand / nn.Linear produce."
)
TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
INPUTS = [  # the notebook's literal `inputs`
    [0.43, 0.15, 0.89],
    [0.55, 0.87, 0.66],
    [0.57, 0.85, 0.64],
    [0.22, 0.58, 0.33],
    [0.77, 0.25, 0.10],
    [0.05, 0.80, 0.55],
]
# Section 3.6.2's batched-matmul example, the notebook's literal tensor `a` (b, h, T, D).
BATCHED_A = [
    [
        [
            [0.2745, 0.6584, 0.2775, 0.8573],
            [0.8993, 0.0390, 0.9268, 0.7388],
            [0.7179, 0.7058, 0.9156, 0.4340],
        ],
        [
            [0.0772, 0.3565, 0.1479, 0.5331],
            [0.4066, 0.2318, 0.4545, 0.9737],
            [0.4606, 0.5159, 0.4220, 0.5786],
        ],
    ]
]
# Section 3.5.2: the keep mask of `torch.manual_seed(123); nn.Dropout(0.5)(torch.ones(6, 6))` as
# the notebook printed it (its 2s as 1s). Torch's CPU Bernoulli draws depend on the platform and
# version (golden raschka_05), so this is the book's, not necessarily the reader's; the
# walkthrough draws its own with torch and only says whether it is the book's.
DROPOUT_MASK_PRINTED = [
    [1, 1, 0, 1, 1, 0],
    [0, 0, 0, 1, 0, 1],
    [1, 1, 1, 1, 0, 1],
    [0, 1, 1, 0, 0, 1],
    [0, 1, 0, 1, 0, 1],
    [0, 1, 1, 1, 1, 0],
]
QKV = ("W_query", "W_key", "W_value")


def f32(values) -> list:
    """The exact float32 values, as JSON floats."""
    return torch.tensor(values, dtype=torch.float32).tolist()


def linears(n: int, d_in: int, d_out: int, bias: bool = False) -> list[nn.Linear]:
    return [nn.Linear(d_in, d_out, bias=bias) for _ in range(n)]


def build() -> dict:
    torch.manual_seed(123)  # 3.4.1: SelfAttention_v1's matrices, torch.rand(d_in, d_out) each
    rand = {k: torch.rand(3, 2).tolist() for k in QKV}
    torch.manual_seed(789)  # 3.4.2: SelfAttention_v2's nn.Linear(3, 2, bias=False) layers
    v2 = {k: lin.weight.tolist() for k, lin in zip(QKV, linears(3, 3, 2), strict=True)}
    torch.manual_seed(123)  # 3.5.3 / 3.6.1: CausalAttention = the wrapper's head 0, then head 1
    heads = linears(6, 3, 2)
    head0 = {k: lin.weight.tolist() for k, lin in zip(QKV, heads[:3], strict=True)}
    head1 = {k: lin.weight.tolist() for k, lin in zip(QKV, heads[3:], strict=True)}
    torch.manual_seed(123)  # 3.6.2: MultiHeadAttention: W_query, W_key, W_value, then out_proj
    qkv = linears(3, 3, 2)
    out_proj = nn.Linear(2, 2)
    mha = {k: lin.weight.tolist() for k, lin in zip(QKV, qkv, strict=True)}
    return {
        "source": SOURCE,
        "tokens": TOKENS,
        "inputs": f32(INPUTS),
        "seed123_torch_rand_d_in_by_d_out": rand,
        "seed789_nn_linear_out_by_in": v2,
        "dropout": {"p": 0.5, "seed": 123, "keep_mask_printed_in_book": DROPOUT_MASK_PRINTED},
        "causal_attention_seed123_out_by_in": head0,
        "wrapper_head1_seed123_out_by_in": head1,
        "multihead_seed123_out_by_in": {
            **mha,
            "out_proj_weight": out_proj.weight.tolist(),
            "out_proj_bias": out_proj.bias.tolist(),
        },
        "batched_matmul_a": f32(BATCHED_A),
    }


def text() -> str:
    return json.dumps(build(), indent=1, ensure_ascii=False)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        same = OUT.read_text(encoding="utf-8") == text()
        print(f"{OUT}: {'up to date' if same else 'DIFFERS from what torch draws'}")
        sys.exit(0 if same else 1)
    OUT.write_text(text(), encoding="utf-8")
    print(f"wrote {OUT}")
