"""The PyTorch engine: the same model as `reference.py`, batched, fast and trainable.

`Transformer(cfg)` builds the three stacks of seed 002 from one `Config`; its `state_dict()`
names and shapes are exactly `weights.spec(cfg)`, so either engine loads the other's checkpoints.
Tensors are batched `(B, T, C)` and any float dtype works (float64 for parity with the reference
engine, float32 or bf16 for speed). Attention runs through `F.scaled_dot_product_attention`
unless a trace is active or `explicit` is set: then the explicit softmax(QKᵀ/√D)·V path runs and
records Q, K, V, scores, A and C per head under the reference engine's names (for the first
sequence of the batch); inside `trace.intervene` each tap's returned tensor is computed on.

Its forms, all declared here: training, `Transformer(cfg, dropout=p)` (weights drawn once, by
`init_weights`); inference, `inference_layout(model)` (the weights laid out for speed, Q/K/V fused
in `MultiHeadAttention.qkv_t`); int8, `quantize.int8(model)` (`Int8Linear` in the linear slots
and, for a tied head, in `Transformer.output_head`).

Deliberately not here: decoding loops (`decoding.py`; the step functions that bind this engine to
them, `torch_steps.py`; batched greedy translation in `inference.py`), checkpoint files
(`weights.py`), training. It never imports the reference engine; their contract is the parity test.

Shapes: B batch  T tokens (decoder)  S tokens (encoder)  C d_model  H heads  D head dim
        F d_ff  V vocab.  Masks: True = may attend.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from glassformer import inputs, weights
from glassformer.config import Config
from glassformer.trace import scope, tap
from glassformer.trace import watching as _watching
from glassformer.weights import InitScheme

# -- tracing helpers: free when no trace or intervention is active ------------------------------


def _scope(name: str):
    return scope(name) if _watching() else contextlib.nullcontext()


def _first(x: Tensor):
    return x[0].detach().to(torch.float64).cpu().numpy()


def _tap(name: str, x: Tensor) -> Tensor:
    """Record the first sequence of the batch under `name` (the reference engine is unbatched);
    return `x`, or its replacement inside `intervene` (the intervention sees the whole batch)."""
    return tap(name, x, record=_first) if _watching() else x


# -- the KV cache -------------------------------------------------------------------------------


@dataclass
class KVCache:
    """Keys and values kept between decoding steps: self-attention's grow by the new tokens at
    every step; cross-attention's are computed once from the encoder output (`memory`), reused."""

    self_k: list[Tensor | None] = field(default_factory=list)
    self_v: list[Tensor | None] = field(default_factory=list)
    cross_k: list[Tensor | None] = field(default_factory=list)
    cross_v: list[Tensor | None] = field(default_factory=list)
    memory: Tensor | None = None
    memory_valid: Tensor | None = None
    self_valid: Tensor | None = None  # (B, length) real tokens among the cached ones, if padded
    length: int = 0  # tokens already in the self-attention cache
    pad_left: Tensor | None = None  # (B,) left padding: row b's position 0 is column pad_left[b]

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls(*([None] * n_layers for _ in range(4)))

    def copy(self) -> KVCache:
        """A cache that can grow independently: its own per-layer lists, the tensors shared."""
        k, v, ck, cv = (list(x) for x in (self.self_k, self.self_v, self.cross_k, self.cross_v))
        return dataclasses.replace(self, self_k=k, self_v=v, cross_k=ck, cross_v=cv)

    def select_rows(self, index: Tensor, cross: bool = True) -> None:
        """Keep (and repeat) the rows `index`, in that order, of every cached tensor, in place;
        cross False: of the self-attention ones only (the encoder's rows stay as they are)."""

        def rows(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.index_select(0, index)

        self.self_k, self.self_v = [rows(t) for t in self.self_k], [rows(t) for t in self.self_v]
        self.self_valid, self.pad_left = rows(self.self_valid), rows(self.pad_left)
        if cross:
            self.cross_k = [rows(t) for t in self.cross_k]
            self.cross_v = [rows(t) for t in self.cross_v]
            self.memory, self.memory_valid = rows(self.memory), rows(self.memory_valid)


# -- building blocks ----------------------------------------------------------------------------


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


class MultiHeadAttention(nn.Module):
    """Z = concat(C_1..C_H)·W_O with C_h = softmax(Q_h K_hᵀ / √D) V_h.

    Q comes from x; K and V from `kv` (x itself for self-attention, the encoder output for
    cross-attention). The per-head Wq of the articles are the rows h*D:(h+1)*D of `q.weight`.
    """

    def __init__(self, cfg: Config, dropout: float = 0.0):
        super().__init__()
        C, HD = cfg.d_model, cfg.attn_dim
        self.H, self.D = cfg.n_heads, cfg.head_dim
        self.q = nn.Linear(C, HD, bias=cfg.bias)
        self.k = nn.Linear(C, HD, bias=cfg.bias)
        self.v = nn.Linear(C, HD, bias=cfg.bias)
        self.o = nn.Linear(HD, C, bias=cfg.bias)
        self.dropout = dropout
        self.explicit = False  # force the explicit path (it is also used whenever tracing)
        self.qkv_t: Tensor | None = None  # the inference form's [Wq; Wk; Wv] (C, 3*H*D) ...
        self.qkv_b: Tensor | None = None  # ... and its bias, both set by `inference_layout`

    def _heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.H, self.D).transpose(1, 2)  # (B, H, T, D)

    def _project_self(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Q, K, V (B, H, T, D) of self-attention, x (B, T, C). With gradients on: one matmul with
        [Wq; Wk; Wv] concatenated per call (training: one GEMM instead of three). In inference,
        one matmul with the concatenation `inference_layout` stored once (Wq, Wk, Wv are views
        into it), else three (the copy per call would cost more memory traffic than it saves)."""
        if torch.is_grad_enabled():
            W = torch.cat([self.q.weight, self.k.weight, self.v.weight])  # (3*H*D, C)
            b = None if self.q.bias is None else torch.cat([self.q.bias, self.k.bias, self.v.bias])
            qkv = F.linear(x, W, b)  # (B, T, 3*H*D)
        elif self.qkv_t is not None:
            qkv = F.linear(x, self.qkv_t.t(), self.qkv_b)  # (B, T, 3*H*D)
        else:
            return self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        q, k, v = qkv.split(self.H * self.D, dim=-1)  # 3 x (B, T, H*D)
        return self._heads(q), self._heads(k), self._heads(v)

    def forward(
        self,
        x: Tensor,
        kv: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        cache_kv: tuple[Tensor, Tensor] | None = None,
        past: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, C), kv (B, S, C) -> (Z (B, T, C), K, V (B, H, S', D)).

        mask (B or 1, 1 or H, T, S') bool; causal: the usual lower-triangular mask (used only with
        mask None; with a cache the T queries are the last T of the S' positions). cache_kv: the
        cached cross-attention keys/values (B, H, S, D) to attend to instead of projecting kv.
        past: self-attention's cached keys/values (B, H, S'-T, D), the new ones appended to them.
        """
        if kv is x and cache_kv is None:
            q, k, v = self._project_self(x)  # (B, H, T, D) each
            if past is not None:
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        else:
            q = self._heads(self.q(x))  # (B, H, T, D)
            if cache_kv is None:
                k, v = self._heads(self.k(kv)), self._heads(self.v(kv))  # (B, H, S, D)
            else:
                k, v = cache_kv
        out = self._attend(q, k, v, mask, causal)  # (B, H, T, D)
        B, _, T, _ = out.shape
        concat = _tap("concat", out.transpose(1, 2).reshape(B, T, self.H * self.D))  # (B, T, H*D)
        return _tap("Z", self.o(concat)), k, v

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool):
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
            out = self._explicit(q, k, v, mask, p, empty_rows)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal and mask is None
            )
        if empty_rows is not None:
            out = out.masked_fill(empty_rows, 0.0)
        return out

    def _explicit(self, q, k, v, mask, p, empty_rows):
        """softmax(Q·Kᵀ / √D)·V written out, all heads at once; traced or intervened, head by head
        under the reference engine's names, computing on with what each tap returns."""
        if not _watching():
            return self._softmax_v(q, k, v, mask, p, empty_rows)
        full = [None if t is None else t.expand(len(q), self.H, -1, -1) for t in (mask, empty_rows)]
        heads = []
        for h in range(self.H):
            with scope(f"head{h}"):
                m, e = (None if t is None else t[:, h] for t in full)
                heads.append(self._softmax_v(q[:, h], k[:, h], v[:, h], m, p, e, _tap))
        return torch.stack(heads, dim=1)  # (B, H, T, D)

    def _softmax_v(self, q, k, v, mask, p, empty_rows, tap_fn=lambda name, t: t):
        """q (..., T, D), k and v (..., S, D): all heads (B, H, ...) or one head (B, ...)."""
        q, k, v = tap_fn("Q", q), tap_fn("K", k), tap_fn("V", v)
        scores = tap_fn("scores", q @ k.transpose(-2, -1))  # Ω (..., T, S)
        scaled = tap_fn("scaled", scores / math.sqrt(self.D))
        if mask is not None:
            mask = tap_fn("mask", mask)
            scaled = scaled.masked_fill(~mask, float("-inf"))
        A = torch.softmax(scaled, dim=-1)  # (..., T, S)
        if empty_rows is not None:
            A = A.masked_fill(empty_rows, 0.0)
        A = F.dropout(A, p) if p else A
        return tap_fn("C", tap_fn("A", A) @ v)  # (..., T, D)


class FeedForward(nn.Module):
    """FFN(x) = act(x·W1 + b1)·W2 + b2."""

    def __init__(self, cfg: Config, dropout: float = 0.0):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        acts = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}
        self.act = nn.GELU("tanh") if cfg.activation == "gelu_tanh" else acts[cfg.activation]()
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = _tap("hidden", self.act(self.w1(x)))  # (B, T, F)
        return _tap("out", self.w2(self.drop(hidden)))  # (B, T, C)


class Block(nn.Module):
    """An encoder block (self-attention, FFN) or a decoder block (masked self-attention,
    cross-attention on the encoder output, FFN); each sublayer wrapped in residual + LayerNorm,
    post-LN LN(x + f(x)) or pre-LN x + f(LN(x))."""

    def __init__(self, cfg: Config, cross: bool, dropout: float = 0.0):
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg, dropout)
        self.norm1 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.cross_attn = MultiHeadAttention(cfg, dropout) if cross else None
        self.norm2 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps) if cross else None
        self.ffn = FeedForward(cfg, dropout)
        ffn_norm = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)  # registered after ffn (spec order)
        self.norm2, self.norm3 = (self.norm2, ffn_norm) if cross else (ffn_norm, None)
        self.drop = nn.Dropout(dropout)

    def _sublayer(self, k: int, x: Tensor, norm: nn.LayerNorm, name: str, f) -> Tensor:
        """Sublayer k, f traced as `name`: pre-LN x + f(LN(x)), post-LN LN(x + f(x))."""
        if self.pre:
            with _scope(f"norm{k}"):
                h = _tap("out", norm(x))
            with _scope(name):
                z = f(h)
            return _tap(f"add{k}", x + self.drop(z))
        with _scope(name):
            z = f(x)
        y = _tap(f"add{k}", x + self.drop(z))
        with _scope(f"norm{k}"):
            return _tap("out", norm(y))

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> Tensor:
        def self_attn(h):
            past = None
            if cache is not None and cache.self_k[layer] is not None:
                past = (cache.self_k[layer], cache.self_v[layer])
            z, k, v = self.self_attn(h, h, mask, causal, past=past)
            if cache is not None:
                cache.self_k[layer], cache.self_v[layer] = k, v
            return z

        def cross_attn(h):
            reuse = None
            if cache is not None and cache.cross_k[layer] is not None:
                reuse = (cache.cross_k[layer], cache.cross_v[layer])
            z, k, v = self.cross_attn(h, memory, memory_mask, cache_kv=reuse)
            if cache is not None:
                cache.cross_k[layer], cache.cross_v[layer] = k, v
            return z

        x = self._sublayer(1, x, self.norm1, "self_attn", self_attn)
        if self.cross_attn is None:
            return _tap("out", self._sublayer(2, x, self.norm2, "ffn", self.ffn))
        x = self._sublayer(2, x, self.norm2, "cross_attn", cross_attn)
        return _tap("out", self._sublayer(3, x, self.norm3, "ffn", self.ffn))


class Stack(nn.Module):
    """Token embedding + positions, then n blocks, then (pre-LN) a final LayerNorm."""

    def __init__(
        self, cfg: Config, n_layers: int, cross: bool, dropout: float = 0.0, own_embed: bool = True
    ):
        super().__init__()
        self.positions = cfg.positions
        self.scale = math.sqrt(cfg.d_model) if cfg.embed_scale else None
        # tok_embed None: forward() is given the shared table (Config.share_embeddings)
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.d_model) if own_embed else None
        learned = cfg.positions == "learned"
        self.pos_embed = nn.Embedding(cfg.max_len, cfg.d_model) if learned else None
        if cfg.positions not in ("learned", "none"):
            split = cfg.positions == "sinusoidal_split"
            pe = sinusoidal_table(cfg.max_len, cfg.d_model, split=split)
            self.register_buffer("pe", pe, persistent=False)
        types, norm = cfg.type_vocab_size, cfg.embed_norm  # BERT's token types, embedding norm
        self.type_embed = nn.Embedding(types, cfg.d_model) if types else None
        self.embed_norm = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps) if norm else None
        self.layers = nn.ModuleList(Block(cfg, cross, dropout) for _ in range(n_layers))
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps) if cfg.norm == "pre" else None
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        ids: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        types: Tensor | None = None,
        tok_embed: nn.Embedding | None = None,
    ) -> Tensor:
        """ids (B, T) -> (B, T, C). types (B, T): token types (type_vocab_size; default 0).
        tok_embed: the embedding table of a stack that has none of its own (shared)."""
        start = cache.length if cache is not None else 0
        T = ids.shape[1]
        X = (tok_embed or self.tok_embed)(ids)  # (B, T, C)
        x = X = _tap("X", X * self.scale if self.scale is not None else X)
        if self.positions != "none":
            table = self.pe if self.pos_embed is None else self.pos_embed.weight
            P = table[start : start + T][None]  # (1, T, C)
            if cache is not None and cache.pad_left is not None:  # left padding: each row's
                cols = torch.arange(start, start + T, device=ids.device)  # positions from 0
                P = table[(cols - cache.pad_left[:, None]).clamp(min=0)]  # (B, T, C)
            x = x + _tap("P", P.to(X.dtype))  # (B, T, C)
        if self.type_embed is not None:
            types = torch.zeros_like(ids) if types is None else types
            x = x + _tap("types", self.type_embed(types))  # (B, T, C)
        if self.embed_norm is not None:
            x = _tap("sum", x)
            with _scope("embed_norm"):
                x = _tap("out", self.embed_norm(x))
        x = self.drop(_tap("input", x))
        for i, block in enumerate(self.layers):
            with _scope(str(i)):
                x = block(x, mask, causal, memory, memory_mask, cache, i)
        if self.norm is not None:
            with _scope("norm"):
                x = _tap("out", self.norm(x))
        return _tap("output", x)


class Transformer(nn.Module):
    """The three stacks of seed 002 over one Config.

    forward(ids, valid, src_ids, src_valid, cache, last_only, types):
      - "decoder": ids (B, T) -> next-token logits (B, T, V)
      - "encoder-decoder": decoder ids (B, T) from SOS and encoder src_ids (B, S) -> (B, T, V)
      - "encoder": ids (B, S) -> class logits (B, n_classes), or hidden states (B, S, C) if
        n_classes is 0
    valid / src_valid (B, T|S) bool mark real tokens (False = padding, never attended to).
    cache: a KVCache for incremental decoding (ids are then only the new tokens).
    last_only: compute logits for the last position only (generation).
    types: (B, S) token types of an encoder's input (Config.type_vocab_size; default all 0).

    init: the scheme `init_weights` draws the weights with, once; None leaves PyTorch's layer
    defaults, for weights loaded next (`from_params`). Parts the config lacks are None.
    """

    def __init__(self, cfg: Config, dropout: float = 0.0, init: InitScheme | None = "gpt2"):
        super().__init__()
        self.cfg = cfg
        self.encoder = self.decoder = self.lm_head = self.classifier = None
        if cfg.has_encoder:
            own = not cfg.share_embeddings
            self.encoder = Stack(cfg, cfg.n_encoder_layers, False, dropout, own_embed=own)
        if cfg.has_decoder:
            cross = cfg.arch == "encoder-decoder"
            self.decoder = Stack(cfg, cfg.n_decoder_layers, cross=cross, dropout=dropout)
            if not cfg.tie_embeddings:
                self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.lm_bias)
            elif cfg.lm_bias:  # a bias over the tied head, named like an untied head's
                self.lm_head = nn.Module()
                self.lm_head.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        if cfg.arch == "encoder" and cfg.n_classes:
            self.classifier = nn.Linear(cfg.d_model, cfg.n_classes, bias=cfg.bias)
        # The int8 form's tied head (`quantize.int8`; an untied lm_head is quantized in place)
        self.output_head: nn.Module | None = None
        if init is not None:
            init_weights(self, cfg, init)

    def forward(
        self,
        ids: Tensor,
        valid: Tensor | None = None,
        src_ids: Tensor | None = None,
        src_valid: Tensor | None = None,
        cache: KVCache | None = None,
        last_only: bool = False,
        types: Tensor | None = None,
    ) -> Tensor:
        cfg = self.cfg
        inputs.check_forward(cfg, ids, valid, src_ids, src_valid, cache, types)
        if cfg.arch == "encoder":
            with _scope("encoder"):
                H = self.encoder(ids, _key_mask(valid), types=types)  # (B, S, C)
            if not cfg.n_classes:
                return H
            keep = torch.ones_like(ids, dtype=H.dtype) if valid is None else valid.to(H.dtype)
            count = keep.sum(1, keepdim=True).clamp(min=1)  # no real token: pooled is zeros
            pooled = _tap("pooled", (H * keep[..., None]).sum(1) / count)
            logits = _tap("logits", self.classifier(pooled))  # (B, n_classes)
            _tap("probs", torch.softmax(logits, -1))
            return logits
        memory = memory_mask = None
        if cfg.arch == "encoder-decoder":
            if cache is not None and cache.memory is not None:
                memory, src_valid = cache.memory, cache.memory_valid
            else:
                if src_ids is None:
                    raise inputs.InputError("an encoder-decoder model needs src_ids: give them")
                shared = self.decoder.tok_embed if cfg.share_embeddings else None
                with _scope("encoder"):  # memory: (B, S, C)
                    memory = self.encoder(src_ids, _key_mask(src_valid), tok_embed=shared)
                if cache is not None:
                    cache.memory, cache.memory_valid = memory, src_valid
            memory_mask = _key_mask(src_valid)
        key_valid = valid  # (B, T) real decoder tokens; with a cache, all tokens so far
        if cache is not None and (valid is not None or cache.self_valid is not None):
            B, T = ids.shape
            past = cache.self_valid
            if past is None:
                past = torch.ones(B, cache.length, dtype=torch.bool, device=ids.device)
            new = torch.ones(B, T, dtype=torch.bool, device=ids.device) if valid is None else valid
            key_valid = cache.self_valid = torch.cat([past, new.bool()], dim=1)
        mask = _key_mask(key_valid)  # causal masking is added inside attention
        with _scope("decoder"):
            h = self.decoder(ids, mask, True, memory, memory_mask, cache)  # (B, T, C)
        if cache is not None:
            cache.length += ids.shape[1]
        if last_only:
            h = h[:, -1:]
        if self.output_head is not None:  # the int8 form's tied head
            logits = _tap("logits", self.output_head(h))  # (B, T, V)
        elif cfg.tie_embeddings:  # the token embedding as the output projection
            b = self.lm_head.bias if cfg.lm_bias else None
            logits = _tap("logits", F.linear(h, self.decoder.tok_embed.weight, b))  # (B, T, V)
        else:
            logits = _tap("logits", self.lm_head(h))  # (B, T, V)
        if _watching():
            _tap("probs", torch.softmax(logits, -1))
        return logits


def init_weights(
    model: Transformer, cfg: Config, scheme: InitScheme = "gpt2", embed_std: float = 0.0
) -> None:
    """The torch engine's one initialisation: every parameter drawn once, in `named_parameters`
    order from torch's global generator, by the rule `weights.init_rule` gives its name (that of
    `weights.init` too): "gpt2" or "xavier"; embed_std > 0: the token embeddings' std."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            kind, x = weights.init_rule(cfg, name, tuple(p.shape), scheme, embed_std=embed_std)
            if kind == "normal":
                p.normal_(0.0, x)
            elif kind == "uniform":
                p.uniform_(-x, x)
            else:
                p.fill_(x)


def _key_mask(valid: Tensor | None) -> Tensor | None:
    """(B, S) real-token flags -> (B, 1, 1, S) attention mask over keys."""
    return None if valid is None else valid[:, None, None, :].bool()


# -- functions around the model -----------------------------------------------------------------


def sentence_embeddings(model: Transformer, ids: Tensor, valid: Tensor | None = None) -> Tensor:
    """Mean of the encoder outputs over the real tokens, L2-normalised. ids (B, S) -> (B, C)."""
    shared = model.decoder.tok_embed if model.cfg.share_embeddings else None
    H = model.encoder(ids, _key_mask(valid), tok_embed=shared)  # (B, S, C)
    keep = torch.ones_like(ids, dtype=H.dtype) if valid is None else valid.to(H.dtype)
    pooled = (H * keep[..., None]).sum(1) / keep.sum(1, keepdim=True).clamp(min=1e-9)  # (B, C)
    return F.normalize(pooled, p=2.0, dim=-1, eps=1e-12)


def from_params(cfg: Config, params: dict, dtype=torch.float64, dropout: float = 0.0):
    """A Transformer holding the given {name: array} weights (NumPy or torch), strictly matched."""
    model = Transformer(cfg, dropout=dropout, init=None).to(dtype)
    state = {n: torch.as_tensor(v).to(dtype) for n, v in params.items()}
    model.load_state_dict(state, strict=True)
    return model


def inference_layout(model: Transformer) -> Transformer:
    """The inference form, in place: every linear weight, and the embedding a tied head reads,
    stored as the transpose of a contiguous (in, out) array, self-attention's Wq, Wk, Wv as views
    into one (`MultiHeadAttention.qkv_t`): the same values, shapes and `state_dict()` names, but a
    matrix-vector product over it ran 1.6-1.8x faster on the 2-core AVX-512 VM measured (batch-1
    decoding reads every weight once per token; `benchmarks/int8_decode_vs_hf.py`). Training
    keeps PyTorch's own layout; `.to()` after it would copy the views apart. A float model's (not
    quantize.int8's: one form or the other)."""
    with torch.no_grad():
        for block in (m for m in model.modules() if isinstance(m, Block)):
            m = block.self_attn  # its Wq, Wk, Wv become views into one (C, 3*H*D) array
            parts = (m.q, m.k, m.v)
            m.qkv_t = torch.cat([p.weight.t() for p in parts], dim=1)  # (C, 3*H*D)
            m.qkv_b = None if m.q.bias is None else torch.cat([p.bias for p in parts])
            HD = m.H * m.D
            for i, p in enumerate(parts):
                view = m.qkv_t[:, i * HD : (i + 1) * HD].t()  # (H*D, C), shares storage
                p.weight = nn.Parameter(view, requires_grad=p.weight.requires_grad)
        mats = [m for m in model.modules() if isinstance(m, nn.Linear)]
        if model.cfg.tie_embeddings and model.decoder is not None:
            mats.append(model.decoder.tok_embed)  # row lookups in it get slower, by microseconds
        for m in mats:  # every other weight: (in, out) in memory (Wq, Wk, Wv already are)
            w = m.weight
            if w.is_contiguous():
                m.weight = nn.Parameter(w.t().contiguous().t(), requires_grad=w.requires_grad)
    return model


def to_params(model: Transformer) -> dict:
    """{name: float64 NumPy array} in spec order, for `weights.save` and the reference engine."""
    return {n: t.detach().to(torch.float64).cpu().numpy() for n, t in model.state_dict().items()}


def set_explicit(model: nn.Module, explicit: bool = True) -> None:
    """Use the explicit attention path (it returns the attention weights) instead of SDPA."""
    for m in model.modules():
        if isinstance(m, MultiHeadAttention):
            m.explicit = explicit
