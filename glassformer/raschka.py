"""The article's progression as real modules: Raschka, *Build a Large Language Model (From
Scratch)*, chapter 3 (seed 000), from `SelfAttention_v1` to the weight-split `MultiHeadAttention`.

Each class is one step of the chapter, in the chapter's order, with the chapter's parameter names
and the same parameter creation order, so that `torch.manual_seed(s)` followed by the constructor
gives the book's weights and its printed outputs (checked against `tests/golden/raschka_*.json`).
The math is the article's: Q = X·Wq, K = X·Wk, V = X·Wv, Ω = Q·Kᵀ, A = softmax(Ω / √c) row by
row, C = A·V; the causal steps set Ω to -inf above the diagonal before the softmax.

What this module is not: the production engine. It has no Config, no weight-naming scheme, no
KV cache and no trace taps; it exists to show the teaching steps as runnable, tested code. The
engine that the library uses lives in `torch_model.py` (and its definition in `reference.py`).
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.errors import ConfigError

# B: batch  T: tokens  H: heads  D: head dim


class SelfAttention_v1(nn.Module):
    """Scaled dot-product self-attention with raw weight matrices (section 3.4.2).

    C = softmax(Q·Kᵀ / √c) · V with Q = X·Wq, K = X·Wk, V = X·Wv, c = d_out. The three matrices
    are (d_in, d_out) and drawn from U[0, 1) in the order Wq, Wk, Wv, as in the chapter.
    """

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        Q = x @ self.W_query  # (T, d_out)
        K = x @ self.W_key  # (T, d_out)
        V = x @ self.W_value  # (T, d_out)
        scores = Q @ K.T  # (T, T)   Ω = Q·Kᵀ
        A = torch.softmax(scores / K.shape[-1] ** 0.5, dim=-1)  # (T, T)   A = softmax(Ω / √c)
        return A @ V  # (T, d_out)   C = A·V


class SelfAttention_v2(nn.Module):
    """The same attention with `nn.Linear` projections (section 3.4.2, second version).

    Q = X·Wqᵀ with Wq stored (d_out, d_in) as `nn.Linear` stores it; then as `SelfAttention_v1`.
    The Linear layers are created in the order W_query, W_key, W_value.
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        Q = self.W_query(x)  # (T, d_out)
        K = self.W_key(x)  # (T, d_out)
        V = self.W_value(x)  # (T, d_out)
        scores = Q @ K.T  # (T, T)   Ω = Q·Kᵀ
        A = torch.softmax(scores / K.shape[-1] ** 0.5, dim=-1)  # (T, T)   A = softmax(Ω / √c)
        return A @ V  # (T, d_out)   C = A·V


def _causal_mask(context_length: int) -> torch.Tensor:
    """1 above the diagonal (a later token, may not be attended), 0 on and below it."""
    return torch.triu(torch.ones(context_length, context_length), diagonal=1)


class CausalAttention(nn.Module):
    """Batched causal self-attention with dropout on the weights (section 3.5.3).

    Ω = Q·Kᵀ with Ω[i, j] = -inf for j > i, A = dropout(softmax(Ω / √c)), C = A·V. The mask is a
    buffer (moves with the module, is not trained) sized for `context_length` tokens.
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False
    ):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", _causal_mask(context_length))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        Q = self.W_query(x)  # (B, T, d_out)
        K = self.W_key(x)  # (B, T, d_out)
        V = self.W_value(x)  # (B, T, d_out)
        scores = Q @ K.transpose(1, 2)  # (B, T, T)   Ω = Q·Kᵀ
        scores = scores.masked_fill(self.mask.bool()[:T, :T], -torch.inf)  # (B, T, T)
        A = torch.softmax(scores / K.shape[-1] ** 0.5, dim=-1)  # (B, T, T)
        A = self.dropout(A)  # (B, T, T)   kept weights scaled by 1 / (1 - p)
        return A @ V  # (B, T, d_out)   C = A·V


class MultiHeadAttentionWrapper(nn.Module):
    """`num_heads` independent `CausalAttention` heads, concatenated (section 3.6.1).

    C = [C_1 | C_2 | ... | C_H] on the last axis: the output has num_heads * d_out columns. The
    heads are built one after the other, each drawing its W_query, W_key, W_value in turn.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ):
        super().__init__()
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            for _ in range(num_heads)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([head(x) for head in self.heads], dim=-1)  # (B, T, H * d_out)


class MultiHeadAttention(nn.Module):
    """Multi-head causal attention with the weight split and an output projection (3.6.2).

    One (d_out, d_in) projection each for Q, K, V, split into H heads of D = d_out / H columns;
    per head A_h = dropout(softmax(mask(Q_h·K_hᵀ) / √D)), C_h = A_h·V_h; then
    out = [C_1 | ... | C_H]·W_oᵀ + b_o. Created in the order W_query, W_key, W_value, out_proj.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ):
        super().__init__()
        if num_heads < 1 or d_out % num_heads != 0:
            raise ConfigError(
                f"d_out={d_out} must be divisible by num_heads={num_heads}: choose num_heads "
                f"among the divisors of d_out"
            )
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", _causal_mask(context_length))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        H, D = self.num_heads, self.head_dim
        Q = self.W_query(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        K = self.W_key(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        V = self.W_value(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        scores = Q @ K.transpose(2, 3)  # (B, H, T, T)   Ω_h = Q_h·K_hᵀ
        scores = scores.masked_fill(self.mask.bool()[:T, :T], -torch.inf)  # (B, H, T, T)
        A = torch.softmax(scores / D**0.5, dim=-1)  # (B, H, T, T)   A_h = softmax(Ω_h / √D)
        A = self.dropout(A)  # (B, H, T, T)
        C = (A @ V).transpose(1, 2).contiguous().view(B, T, self.d_out)  # (B, T, H * D)
        return self.out_proj(C)  # (B, T, d_out)


def load_v2_into_v1(v1: SelfAttention_v1, v2: SelfAttention_v2) -> SelfAttention_v1:
    """Exercise 3.1: give `v1` the weights of `v2`, so that both compute the same output.

    `nn.Linear` stores W as (d_out, d_in) and computes x·Wᵀ; `SelfAttention_v1` computes x·W with
    W (d_in, d_out): the same matrix, transposed. Copies in place and returns `v1`.
    """
    if v2.W_query.bias is not None:
        raise ConfigError(
            "SelfAttention_v1 has no bias: build the SelfAttention_v2 with qkv_bias=False"
        )
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(v1, name).copy_(getattr(v2, name).weight.T)
    return v1
