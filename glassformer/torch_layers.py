"""The PyTorch engine's layers: multi-head attention (grouped-query, rotary), the FFN (plain or
gated), RMSNorm, and the position tables and angles.

The parts of `torch_model.py`'s engine below a block, split off by responsibility: the blocks,
stacks, KV cache and the model's forms stay there (and re-export these names). Every layer here
computes what its function in `reference.py` computes, batched, and taps the same names; it never
imports the reference engine (their contract is the parity test).

Shapes: B batch  T tokens (queries)  S tokens (keys)  C d_model  H heads  KV key/value heads
        D head dim  r rotated dims  F d_ff.  Masks: True = may attend.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from glassformer.config import Config
from glassformer.glossary import RMSNORM_OUT, ROTARY_SCORES, config_equations
from glassformer.trace import intervening, scope, tap
from glassformer.trace import watching as _watching

# SDPA reads grouped K/V heads itself from PyTorch 2.5 (`enable_gqa`); before, they are repeated.
_SDPA_GQA = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)

# -- tracing helpers: free when no trace or intervention is active ------------------------------


def _scope(name: str):
    return scope(name) if _watching() else contextlib.nullcontext()


def _first(x: Tensor):
    """The first sequence as NumPy, in the tensor's own precision (the trace stores it as its
    dtype: a float32 engine's values are not widened to float64 only to be narrowed again, and a
    step a trace keeps by shape only costs no copy); bfloat16, which NumPy lacks, as float32."""
    t = x[0].detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).cpu().numpy()


def _tap(name: str, x: Tensor, equation: str = "") -> Tensor:
    """Record the first sequence of the batch under `name` (the reference engine is unbatched);
    return `x`, or its replacement inside `intervene` (the intervention sees the whole batch).
    equation: the step's own, where its name's (glossary) is another variant's."""
    return tap(name, x, equation, record=_first) if _watching() else x


def _tap_heads(name: str, x: Tensor, prefix: str = "head") -> Tensor:
    """Tap each head of x (B, n, T, D) as `{prefix}{h}.{name}`; the heads as the taps give them."""
    parts = []
    for h in range(x.shape[1]):
        with scope(f"{prefix}{h}"):
            parts.append(_tap(name, x[:, h]))
    return torch.stack(parts, dim=1)  # (B, n, T, D)


# -- positions ----------------------------------------------------------------------------------


def sinusoidal_table(T: int, C: int, base: float = 10000.0, split: bool = False) -> Tensor:
    """PE(pos, 2i) = sin(pos / base^(2i/C)), PE(pos, 2i+1) = cos(...), in float64. (T, C)

    split=True: the sines in the first ceil(C/2) dimensions, the cosines after (Marian)."""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, C, 2, dtype=torch.float64)
    angle = pos / base ** (two_i / C)  # (T, ceil(C/2))
    if split:
        return torch.cat([torch.sin(angle), torch.cos(angle[:, : C // 2])], dim=1)
    P = torch.zeros(T, C, dtype=torch.float64)
    P[:, 0::2] = torch.sin(angle)
    P[:, 1::2] = torch.cos(angle[:, : C // 2])
    return P


def rotary_angles(positions: Tensor, r: int, base: float, dtype: torch.dtype):
    """cos and sin of the rotary angles m·θ_i, θ_i = base^(-2i/r) for i < r/2, at each position m
    (Su et al. 2021), computed in float64 and given in `dtype`.
    positions (B|1, T) -> cos, sin (B|1, 1, T, r/2): one per row, shared by the heads."""
    two_i = torch.arange(0, r, 2, dtype=torch.float64, device=positions.device)
    theta = 1.0 / base ** (two_i / r)  # (r/2,)
    angle = positions.to(torch.float64)[..., None] * theta  # (B|1, T, r/2)
    return angle.cos().to(dtype)[:, None], angle.sin().to(dtype)[:, None]


def rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """RoPE in the "rotate_half" layout: in the first r dimensions of each head's row, the pair
    (x_i, x_{i+r/2}) -> (x_i cos - x_{i+r/2} sin, x_{i+r/2} cos + x_i sin); the rest unchanged.
    x (B, n, T, D), cos and sin (B|1, 1, T, r/2) -> (B, n, T, D)."""
    h = cos.shape[-1]  # r/2
    x1, x2, rest = x[..., :h], x[..., h : 2 * h], x[..., 2 * h :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


# -- norms --------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / √(mean(x²) + ε) · g (Zhang & Sennrich 2019): a weight g, no bias. Half
    precision inputs are normalised in float32 (as Llama computes it), then cast back."""

    def __init__(self, C: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., C)
        return h.to(x.dtype) * self.weight


def make_norm(cfg: Config) -> nn.Module:
    """One norm of the model: nn.LayerNorm, or RMSNorm with norm_kind="rmsnorm"."""
    if cfg.norm_kind == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.ln_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)


def norm_equation(cfg: Config) -> str:
    """The equation a norm's `out` is recorded with ("": its name's, LayerNorm's)."""
    return RMSNORM_OUT if cfg.norm_kind == "rmsnorm" else ""


# -- attention ----------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Z = concat(C_1..C_H)·W_O with C_h = softmax(Q_h K_gᵀ / √D) V_g, g = h // (H / KV).

    Q comes from x; K and V from `kv` (x itself for self-attention, the encoder output for
    cross-attention). The per-head Wq of the articles are the rows h*D:(h+1)*D of `q.weight`;
    K and V have KV heads (grouped-query attention when KV < H), each read by H / KV consecutive
    query heads. Given `rope`, self-attention's Q and K are turned by rotary positions first.
    """

    def __init__(self, cfg: Config, dropout: float = 0.0):
        super().__init__()
        C, HD, KVD = cfg.d_model, cfg.attn_dim, cfg.kv_dim
        self.H, self.KV, self.D = cfg.n_heads, cfg.kv_heads, cfg.head_dim
        self.q = nn.Linear(C, HD, bias=cfg.has_qkv_bias)
        self.k = nn.Linear(C, KVD, bias=cfg.has_qkv_bias)
        self.v = nn.Linear(C, KVD, bias=cfg.has_qkv_bias)
        self.o = nn.Linear(HD, C, bias=cfg.bias)
        self.dropout = dropout
        self.explicit = False  # force the explicit path (it is also used whenever tracing)
        self.qkv_t: Tensor | None = None  # the inference form's [Wq; Wk; Wv] (C, H*D + 2*KV*D) ...
        self.qkv_b: Tensor | None = None  # ... and its bias, both set by `inference_layout`
        self.qkv_int8: nn.Module | None = None  # the int8 form's [Wq; Wk; Wv] (`quantize.int8`)

    @property
    def sizes(self) -> tuple[int, int, int]:
        """The widths of Q, K and V: H*D, KV*D, KV*D."""
        return self.H * self.D, self.KV * self.D, self.KV * self.D

    def _heads(self, x: Tensor, n: int) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, n, self.D).transpose(1, 2)  # (B, n, T, D)

    def _project_self(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Q (B, H, T, D), K, V (B, KV, T, D) of self-attention, x (B, T, C). With gradients on:
        one matmul with [Wq; Wk; Wv] concatenated per call (training: one GEMM instead of three).
        In inference, one matmul with the concatenation `inference_layout` stored once (Wq, Wk,
        Wv are views into it), or the int8 form's one int8 product, else three (the copy per call
        would cost more memory traffic than it saves)."""
        if torch.is_grad_enabled():
            W = torch.cat([self.q.weight, self.k.weight, self.v.weight])  # (H*D + 2*KV*D, C)
            b = None if self.q.bias is None else torch.cat([self.q.bias, self.k.bias, self.v.bias])
            qkv = F.linear(x, W, b)  # (B, T, H*D + 2*KV*D)
        elif self.qkv_t is not None:
            qkv = F.linear(x, self.qkv_t.t(), self.qkv_b)  # (B, T, H*D + 2*KV*D)
        elif self.qkv_int8 is not None:  # one quantization of x instead of three
            qkv = self.qkv_int8(x)  # (B, T, H*D + 2*KV*D)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
            return self._heads(q, self.H), self._heads(k, self.KV), self._heads(v, self.KV)
        q, k, v = qkv.split(self.sizes, dim=-1)  # (B, T, H*D), (B, T, KV*D), (B, T, KV*D)
        return self._heads(q, self.H), self._heads(k, self.KV), self._heads(v, self.KV)

    def forward(
        self,
        x: Tensor,
        kv: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        cache_kv: tuple[Tensor, Tensor] | None = None,
        past: tuple[Tensor, Tensor] | None = None,
        rope: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, C), kv (B, S, C) -> (Z (B, T, C), K, V (B, KV, S', D)).

        mask (B or 1, 1 or H, T, S') bool; causal: the usual lower-triangular mask (used only with
        mask None; with a cache the T queries are the last T of the S' positions). cache_kv: the
        cached cross-attention keys/values (B, KV, S, D) to attend to instead of projecting kv.
        past: self-attention's cached keys/values (B, KV, S'-T, D), the new ones appended to them
        (cached keys are already turned). rope: self-attention's rotary (cos, sin) at the T new
        positions (`rotary_angles`), which turn the new Q and K (traced with a cache, K before it
        turns is the new positions' only: the cache keeps the turned keys, K_rot).
        """
        if kv is x and cache_kv is None:
            q, k, v = self._project_self(x)  # (B, H, T, D), (B, KV, T, D) x 2
            if rope is not None:
                if _watching():  # the heads before they turn, under the reference's names
                    q, k = _tap_heads("Q", q), _tap_heads("K", k, self._kv_prefix)
                q, k = rotary(q, *rope), rotary(k, *rope)
            if past is not None:
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        else:
            q = self._heads(self.q(x), self.H)  # (B, H, T, D)
            if cache_kv is None:
                k, v = self._heads(self.k(kv), self.KV), self._heads(self.v(kv), self.KV)
            else:
                k, v = cache_kv  # (B, KV, S, D)
        out = self._attend(q, k, v, mask, causal, rope is not None)  # (B, H, T, D)
        B, _, T, _ = out.shape
        concat = _tap("concat", out.transpose(1, 2).reshape(B, T, self.H * self.D))  # (B, T, H*D)
        return _tap("Z", self.o(concat)), k, v

    @property
    def _kv_prefix(self) -> str:
        """The scope of a K/V head's taps: its own (`kv_head{g}`) when query heads share it."""
        return "kv_head" if self.KV < self.H else "head"

    def _attend(self, q, k, v, mask: Tensor | None, causal: bool, rotated: bool = False):
        T, S = q.shape[-2], k.shape[-2]
        explicit = _watching() or self.explicit
        if causal and T == 1 and mask is None and not explicit:
            causal = False  # one query, the last position: it sees every key, nothing to mask
        if causal and (mask is not None or T != S or explicit):
            # Queries are the last T of S positions (S > T with a KV cache); combine with any
            # padding mask. Otherwise SDPA's own is_causal path runs (its flash kernel).
            tri = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
            mask = tri if mask is None else mask & tri
            causal = False
        empty_rows = None
        if mask is not None:
            # A query row with nothing to attend to gives zeros: let it attend everywhere (finite
            # softmax, finite gradients), then zero its output.
            empty_rows = ~mask.any(-1, keepdim=True)  # (B|1, H|1, T, 1)
            if bool(empty_rows.any()):
                mask = mask | empty_rows
            else:
                empty_rows = None
        p = self.dropout if self.training else 0.0
        if explicit:
            out = self._explicit(q, k, v, mask, p, empty_rows, rotated)
        else:
            grouped = {}
            if self.KV < self.H:  # each key/value head serves H / KV consecutive query heads
                if _SDPA_GQA:
                    grouped = {"enable_gqa": True}
                else:
                    k, v = (t.repeat_interleave(self.H // self.KV, dim=1) for t in (k, v))
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal and mask is None, **grouped
            )
        if empty_rows is not None:
            out = out.masked_fill(empty_rows, 0.0)
        return out

    def _explicit(self, q, k, v, mask, p, empty_rows, rotated: bool = False):
        """softmax(Q·Kᵀ / √D)·V written out, all heads at once; traced or intervened, head by head
        under the reference engine's names, computing on with what each tap returns (a shared
        K/V head once, under `kv_head{g}`; turned Q and K as Q_rot and K_rot)."""
        G = self.H // self.KV  # query heads per key/value head
        if not _watching():
            if G > 1:
                k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)  # (B, H, S, D)
            return self._softmax_v(q, k, v, mask, p, empty_rows)
        qn, kn = ("Q_rot", "K_rot") if rotated else ("Q", "K")
        if G > 1:
            k, v = _tap_heads(kn, k, "kv_head"), _tap_heads("V", v, "kv_head")
        full = [None if t is None else t.expand(len(q), self.H, -1, -1) for t in (mask, empty_rows)]
        if not intervening():  # traced only: no tap replaces a value, so all heads at once
            return self._traced_heads(q, k, v, mask, p, empty_rows, full[0], qn, kn, rotated)
        heads = []
        for h in range(self.H):
            with scope(f"head{h}"):
                m, e = (None if t is None else t[:, h] for t in full)
                qh = _tap(qn, q[:, h])
                if G > 1:
                    kh, vh = k[:, h // G], v[:, h // G]
                else:
                    kh, vh = _tap(kn, k[:, h]), _tap("V", v[:, h])
                heads.append(self._softmax_v(qh, kh, vh, m, p, e, _tap, rotated))
        return torch.stack(heads, dim=1)  # (B, H, T, D)

    def _traced_heads(self, q, k, v, mask, p, empty_rows, mask_h, qn, kn, rotated):
        """The head-by-head path's steps, in its order and under its names, from one batched
        computation (the same arithmetic per head; a trace without an intervention)."""
        G = self.H // self.KV
        kk, vv = (k, v) if G == 1 else (t.repeat_interleave(G, dim=1) for t in (k, v))
        scores = q @ kk.transpose(-2, -1)  # Ω (B, H, T, S)
        scaled = scores / math.sqrt(self.D)
        masked = scaled if mask is None else scaled.masked_fill(~mask, float("-inf"))
        A = torch.softmax(masked, dim=-1)  # (B, H, T, S)
        if empty_rows is not None:
            A = A.masked_fill(empty_rows, 0.0)
        A = F.dropout(A, p) if p else A
        C = A @ vv  # (B, H, T, D)
        eq = ROTARY_SCORES if rotated else ""
        for h in range(self.H):
            with scope(f"head{h}"):
                _tap(qn, q[:, h])
                if G == 1:
                    _tap(kn, k[:, h]), _tap("V", v[:, h])
                _tap("scores", scores[:, h], eq), _tap("scaled", scaled[:, h])
                if mask_h is not None:
                    _tap("mask", mask_h[:, h])
                _tap("A", A[:, h]), _tap("C", C[:, h])
        return C

    def _softmax_v(
        self, q, k, v, mask, p, empty_rows, tap_fn=lambda name, t, eq="": t, rotated=False
    ):
        """q (..., T, D), k and v (..., S, D): all heads (B, H, ...) or one head (B, ...)."""
        eq = ROTARY_SCORES if rotated else ""
        scores = tap_fn("scores", q @ k.transpose(-2, -1), eq)  # Ω (..., T, S)
        scaled = tap_fn("scaled", scores / math.sqrt(self.D))
        if mask is not None:
            mask = tap_fn("mask", mask)
            scaled = scaled.masked_fill(~mask, float("-inf"))
        A = torch.softmax(scaled, dim=-1)  # (..., T, S)
        if empty_rows is not None:
            A = A.masked_fill(empty_rows, 0.0)
        A = F.dropout(A, p) if p else A
        return tap_fn("C", tap_fn("A", A) @ v)  # (..., T, D)


# -- the feed-forward network -------------------------------------------------------------------


class FeedForward(nn.Module):
    """FFN(x) = act(x·W1 + b1)·W2 + b2; gated (ffn_kind="gated", SwiGLU with silu):
    (act(x·W1 + b1) ⊙ (x·W3 + b3))·W2 + b2, W1 the gate, W3 the up and W2 the down projection."""

    def __init__(self, cfg: Config, dropout: float = 0.0):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        gated = cfg.ffn_kind == "gated"
        self.w3 = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias) if gated else None
        acts = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}
        self.act = nn.GELU("tanh") if cfg.activation == "gelu_tanh" else acts[cfg.activation]()
        self.drop = nn.Dropout(dropout)
        self.eq = config_equations(cfg)  # this model's equations, as the reference taps them

    def forward(self, x: Tensor) -> Tensor:
        eq = self.eq
        if self.w3 is None:
            hidden = _tap("hidden", self.act(self.w1(x)), eq["hidden"])  # (B, T, F)
        else:
            gate, up = _tap("gate", self.w1(x)), _tap("up", self.w3(x))  # (B, T, F) each
            hidden = _tap("hidden", self.act(gate) * up, eq["hidden"])  # (B, T, F)
        return _tap("out", self.w2(self.drop(hidden)), eq["ffn_out"])  # (B, T, C)
