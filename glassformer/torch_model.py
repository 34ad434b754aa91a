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
in `MultiHeadAttention.qkv_t`; `inference_arrays` lays out NumPy arrays so beforehand, which
`from_params` then shares instead of copying); int8, `quantize.int8(model)` (`Int8Linear` in the
linear slots and, for a tied head, in `Transformer.output_head`).

The layers below a block (attention, FFN, norms, positions) are in `torch_layers.py`, which
declares their slots (`qkv_t`), and are re-exported here.

Deliberately not here: decoding loops (`decoding.py`; the step functions that bind this engine to
them, `torch_steps.py`; batched translation in `translating.py`), checkpoint files
(`weights.py`), training. It never imports the reference engine; their contract is the parity test.

Shapes: B batch  T tokens (decoder)  S tokens (encoder)  C d_model  H heads  KV key/value heads
        D head dim  F d_ff  V vocab.  Masks: True = may attend.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from glassformer import inputs, weights
from glassformer.config import Config
from glassformer.errors import InputError
from glassformer.glossary import INPUT_NO_P, config_equations
from glassformer.torch_layers import (
    FeedForward,
    MultiHeadAttention,
    RMSNorm,
    _scope,
    _tap,
    make_norm,
    norm_equation,
    rotary_angles,
    sinusoidal_table,
)
from glassformer.trace import intervening as _intervening
from glassformer.trace import positions as _positions
from glassformer.trace import watching as _watching
from glassformer.weights import InitScheme

__all__ = ["FeedForward", "MultiHeadAttention", "RMSNorm", "sinusoidal_table"]  # re-exported

# -- the KV cache -------------------------------------------------------------------------------


@dataclass
class KVCache:
    """Keys and values kept between decoding steps: self-attention's grow by the new tokens at
    every step; cross-attention's are computed once from the encoder output (`memory`), reused.
    Each is (B, KV, S, D): the key/value heads only (grouped-query attention keeps fewer), the
    keys already turned by rotary positions, each at its own position."""

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


# -- blocks and stacks ------------------------------------------------------------------------


class Block(nn.Module):
    """An encoder block (self-attention, FFN) or a decoder block (masked self-attention,
    cross-attention on the encoder output, FFN); each sublayer wrapped in residual + norm,
    post-LN LN(x + f(x)) or pre-LN x + f(LN(x)), LN a LayerNorm or an RMSNorm. With d_ff 0 there
    is no FFN (nor its norm): attention only. The norms are numbered by the sublayers there are."""

    def __init__(self, cfg: Config, cross: bool, dropout: float = 0.0):
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.norm_eq = norm_equation(cfg)
        self.self_attn = MultiHeadAttention(cfg, dropout)
        self.norm1 = make_norm(cfg)
        self.cross_attn = MultiHeadAttention(cfg, dropout) if cross else None
        self.norm2 = make_norm(cfg) if cross else None
        self.ffn = FeedForward(cfg, dropout) if cfg.d_ff else None
        ffn_norm = make_norm(cfg) if cfg.d_ff else None  # registered after ffn (spec order)
        self.norm2, self.norm3 = (self.norm2, ffn_norm) if cross else (ffn_norm, None)
        self.drop = nn.Dropout(dropout)

    def _sublayer(self, k: int, x: Tensor, norm: nn.Module, name: str, f) -> Tensor:
        """Sublayer k, f traced as `name`: pre-LN x + f(LN(x)), post-LN LN(x + f(x))."""
        if self.pre:
            with _scope(f"norm{k}"):
                h = _tap("out", norm(x), self.norm_eq)
            with _scope(name):
                z = f(h)
            return _tap(f"add{k}", x + self.drop(z))
        with _scope(name):
            z = f(x)
        y = _tap(f"add{k}", x + self.drop(z))
        with _scope(f"norm{k}"):
            return _tap("out", norm(y), self.norm_eq)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        layer: int = 0,
        rope: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """x (B, T, C) -> (B, T, C). rope: self-attention's rotary (cos, sin) at x's positions."""

        def self_attn(h):
            past = None
            if cache is not None and cache.self_k[layer] is not None:
                past = (cache.self_k[layer], cache.self_v[layer])
            z, k, v = self.self_attn(h, h, mask, causal, past=past, rope=rope)
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
        k, ffn_norm = 2, self.norm2
        if self.cross_attn is not None:
            x = self._sublayer(2, x, self.norm2, "cross_attn", cross_attn)
            k, ffn_norm = 3, self.norm3
        if self.ffn is not None:
            x = self._sublayer(k, x, ffn_norm, "ffn", self.ffn)
        return _tap("out", x)


def _embedding(n: int, C: int) -> nn.Embedding:
    """nn.Embedding(n, C), with PyTorch's default N(0, 1) draw (`init_weights` draws after the
    defaults, from the same generator). On the meta device (`from_params`) without it: normal_
    has no meta kernel there but a Python one, whose import (torch's decompositions) would stay
    resident, ~70 MiB, for a draw that is never used."""
    if torch.empty(0).is_meta:
        return nn.Embedding(n, C, _weight=torch.empty(n, C))
    return nn.Embedding(n, C)


class Stack(nn.Module):
    """Token embedding + positions, then n blocks, then (pre-LN) a final norm. Rotary positions
    add no table: each block's self-attention turns Q and K by them."""

    def __init__(
        self, cfg: Config, n_layers: int, cross: bool, dropout: float = 0.0, own_embed: bool = True
    ):
        super().__init__()
        self.additive = cfg.positions not in ("none", "rotary")  # a table added to X
        self.rope_dim, self.rope_theta = cfg.rope_dim, cfg.rope_theta
        self.norm_eq = norm_equation(cfg)
        self.eq = config_equations(cfg)  # this model's equations of X and P
        self.scale = math.sqrt(cfg.d_model) if cfg.embed_scale else None
        # tok_embed None: forward() is given the shared table (Config.share_embeddings)
        self.tok_embed = _embedding(cfg.vocab_size, cfg.d_model) if own_embed else None
        learned = cfg.positions == "learned"
        self.pos_embed = _embedding(cfg.max_len, cfg.d_model) if learned else None
        if self.additive and not learned:
            split = cfg.positions == "sinusoidal_split"
            with torch.device("cpu"):  # computed, never loaded: real even on meta (from_params)
                pe = sinusoidal_table(cfg.max_len, cfg.d_model, split=split)
            self.register_buffer("pe", pe, persistent=False)
        types, norm = cfg.type_vocab_size, cfg.embed_norm  # BERT's token types, embedding norm
        self.type_embed = _embedding(types, cfg.d_model) if types else None
        self.embed_norm = make_norm(cfg) if norm else None
        self.layers = nn.ModuleList(Block(cfg, cross, dropout) for _ in range(n_layers))
        self.norm = make_norm(cfg) if cfg.norm == "pre" else None
        no_p = not self.additive and not (types or norm)  # the input is X itself
        self.input_eq = INPUT_NO_P if no_p else ""
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
        x = X = _tap("X", X * self.scale if self.scale is not None else X, self.eq["X"])
        rope = None
        if self.additive or self.rope_dim:
            positions = torch.arange(start, start + T, device=ids.device)[None]  # (1, T)
            if cache is not None and cache.pad_left is not None:  # left padding: each row's
                positions = (positions - cache.pad_left[:, None]).clamp(min=0)  # from 0 (B, T)
            if self.rope_dim:  # angles for every block's self-attention
                rope = rotary_angles(positions, self.rope_dim, self.rope_theta, X.dtype)
            else:
                table = self.pe if self.pos_embed is None else self.pos_embed.weight
                x = x + _tap("P", table[positions].to(X.dtype), self.eq["P"])  # (1 or B, T, C)
        if self.type_embed is not None:
            types = torch.zeros_like(ids) if types is None else types
            x = x + _tap("types", self.type_embed(types))  # (B, T, C)
        if self.embed_norm is not None:
            x = _tap("sum", x)
            with _scope("embed_norm"):
                x = _tap("out", self.embed_norm(x), self.norm_eq)
        # With a KV cache only the new rows are computed: an intervention that reads positions
        # is told where they sit (`trace.positions`; the reference engine computes every row).
        with _positions(start=start if start and _intervening() else None):
            x = self.drop(_tap("input", x, self.input_eq))
            for i, block in enumerate(self.layers):
                with _scope(str(i)):
                    x = block(x, mask, causal, memory, memory_mask, cache, i, rope)
        if self.norm is not None:
            with _scope("norm"):
                x = _tap("out", self.norm(x), self.norm_eq)
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
                    raise InputError("an encoder-decoder model needs src_ids: give them")
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
            logits = self.output_head(h)  # (B, T, V)
        elif cfg.tie_embeddings:  # the token embedding as the output projection
            b = self.lm_head.bias if cfg.lm_bias else None
            logits = F.linear(h, self.decoder.tok_embed.weight, b)  # (B, T, V)
        else:
            logits = self.lm_head(h)  # (B, T, V)
        logits = _tap("logits", logits, self.decoder.eq["logits"])
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
    """Mean of the encoder outputs over the real tokens, L2-normalised. ids (B, S) -> (B, C).
    Traced, its steps have the names of the reference's `sentence_embedding`."""
    shared = model.decoder.tok_embed if model.cfg.share_embeddings else None
    with _scope("encoder"):
        H = model.encoder(ids, _key_mask(valid), tok_embed=shared)  # (B, S, C)
    keep = torch.ones_like(ids, dtype=H.dtype) if valid is None else valid.to(H.dtype)
    pooled = (H * keep[..., None]).sum(1) / keep.sum(1, keepdim=True).clamp(min=1e-9)  # (B, C)
    pooled = _tap("pooled", pooled)
    return _tap("embedding", F.normalize(pooled, p=2.0, dim=-1, eps=1e-12))  # (B, C)


def from_params(
    cfg: Config, params: dict, dtype=torch.float64, dropout: float = 0.0, copy: bool = False
):
    """A Transformer holding the given {name: array} weights (NumPy or torch), strictly matched.

    An array already in `dtype` (and writable) is not copied: the model's parameter is a tensor
    over its memory, with its strides (an F-ordered matrix of `inference_arrays` stays one), so
    that building a model does not hold the weights twice. A change to one is a change to the
    other: copy=True gives the model weights of its own (to train without touching the arrays).
    The model is built on the meta device, so no weight is drawn only to be replaced. Weights
    that do not fit the config are refused in one line, as the reference engine refuses them."""
    _check_params(cfg, params)
    with torch.device("meta"):
        model = Transformer(cfg, dropout=dropout, init=None)
    state = {n: _tensor(v, dtype, copy) for n, v in params.items()}
    model.load_state_dict(state, strict=True, assign=True)
    return model.to(dtype)  # the computed tables (Stack.pe); every parameter already is


def _check_params(cfg: Config, params) -> None:
    """Every tensor the config names, of its shape, a numeric array, and no other (what
    load_state_dict would refuse with a RuntimeError of many lines)."""
    if not isinstance(cfg, Config):
        raise InputError(f"cfg must be a glassformer Config, got {type(cfg).__name__}")
    inputs.params(params, cfg)  # the reference engine's check: names, then shapes
    for name, x in params.items():
        if isinstance(x, np.ndarray):
            numeric = x.dtype.kind in "fiu"
        else:
            numeric = isinstance(x, Tensor) and not (x.is_complex() or x.is_sparse)
            numeric = numeric and x.dtype != torch.bool
        if not numeric:
            raise InputError(
                f"params tensor {name!r} must be an array of numbers, got {type(x).__name__}"
                f"{f' of {x.dtype}' if isinstance(x, np.ndarray | Tensor) else ''}"
            )
    unexpected = [n for n in params if n not in weights.spec(cfg)]
    if unexpected:
        raise InputError(
            f"params hold the tensor {unexpected[0]!r}, which this config does not have; give "
            "the weights of this config (weights.spec(cfg) names them)"
        )


def _tensor(x, dtype: torch.dtype, copy: bool) -> Tensor:
    """x as a tensor in dtype: over x's own memory where it can be, unless copy."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:  # memory NumPy keeps read-only:
        x, copy = np.array(x), False  # the model's parameter may not write it
    t = _over_base(x) if isinstance(x, np.ndarray) else torch.as_tensor(x)
    out = t.to(dtype)
    return out.clone() if copy and out.data_ptr() == t.data_ptr() else out


def _over_base(x: np.ndarray) -> Tensor:
    """A tensor over x's memory, and a view of a tensor over all of the C-contiguous array x is a
    view of, if any: views of one array (`inference_arrays`' Wq, Wk, Wv) stay views of one
    storage, as `inference_layout` finds them (torch.from_numpy gives each its own storage)."""
    base = x
    while isinstance(base.base, np.ndarray):
        base = base.base
    size = x.itemsize
    offset, rest = divmod(x.ctypes.data - base.ctypes.data, size)
    plain = base is x or not base.flags.c_contiguous or base.dtype != x.dtype or rest
    if plain or any(s % size or s < 0 for s in x.strides):
        return torch.from_numpy(x)
    strides = tuple(s // size for s in x.strides)
    return torch.from_numpy(base.reshape(-1)).as_strided(x.shape, strides, offset)


def inference_layout(model: Transformer) -> Transformer:
    """The inference form, in place: every linear weight, and the embedding a tied head reads,
    stored as the transpose of a contiguous (in, out) array, self-attention's Wq, Wk, Wv as views
    into one (`MultiHeadAttention.qkv_t`): the same values, shapes and `state_dict()` names, but a
    faster matrix-vector product over it (batch-1 decoding reads every weight once per token;
    docs/benchmarks.md, "One sequence against Hugging Face"). Training
    keeps PyTorch's own layout; `.to()` after it would copy the views apart. A float model's (not
    quantize.int8's: one form or the other)."""
    with torch.no_grad():
        for m in self_attentions(model).values():  # Wq, Wk, Wv: views into one (C, H*D + 2*KV*D)
            parts = (m.q, m.k, m.v)
            ws = [p.weight.t() for p in parts]  # (C, H*D), (C, KV*D), (C, KV*D)
            m.qkv_t = _columns_of_one(ws)  # laid out so already (`inference_arrays`): no copy
            if m.qkv_t is None:
                m.qkv_t = torch.cat(ws, dim=1)  # (C, H*D + 2*KV*D)
            m.qkv_b = None if m.q.bias is None else torch.cat([p.bias for p in parts])
            at = 0
            for p, n in zip(parts, m.sizes, strict=True):
                view = m.qkv_t[:, at : at + n].t()  # (n, C), shares storage
                p.weight = nn.Parameter(view, requires_grad=p.weight.requires_grad)
                at += n
        for m in _transposed(model).values():  # every other weight: (in, out) in memory
            w = m.weight
            if w.is_contiguous():
                m.weight = nn.Parameter(w.t().contiguous().t(), requires_grad=w.requires_grad)
    return model


def self_attentions(model: Transformer) -> dict[str, MultiHeadAttention]:
    """{name: module} of every block's self-attention, whose Wq, Wk, Wv the inference form fuses."""
    blocks = ((n, m) for n, m in model.named_modules() if isinstance(m, Block))
    return {f"{n}.self_attn": m.self_attn for n, m in blocks}


def _transposed(model: Transformer) -> dict[str, nn.Module]:
    """{name: module} of the other weights the inference form stores (in, out): every linear layer
    but the fused ones, and the embedding a tied head reads (row lookups in it get slower, by
    microseconds)."""
    fused = {f"{n}.{x}" for n in self_attentions(model) for x in "qkv"}
    out = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear) and n not in fused}
    if model.cfg.tie_embeddings and model.decoder is not None:
        out["decoder.tok_embed"] = model.decoder.tok_embed
    return out


def _columns_of_one(ws: list[Tensor]) -> Tensor | None:
    """The (C, n1 + n2 + ...) tensor whose consecutive column blocks the (C, n_i) tensors ws are,
    or None when they are not such views of one array."""
    total, first = sum(w.shape[1] for w in ws), ws[0]
    at = first.data_ptr()
    for w in ws:
        same = w.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
        if not same or w.stride() != (total, 1) or w.data_ptr() != at or w.dtype != first.dtype:
            return None
        at += w.shape[1] * w.element_size()
    return first.as_strided((first.shape[0], total), (total, 1))


def inference_arrays(cfg: Config, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`params` (NumPy arrays), in place, laid out as `inference_layout` lays out the weights, the
    same values and shapes: every matrix it stores (in, out) an F-ordered array, a block's
    self-attention Wq, Wk, Wv views into one C-ordered (C, H*D + 2*KV*D) array. `from_params`
    then shares them with the model and `inference_layout` keeps them, where from arrays of
    `weights.spec`'s (out, in) layout it makes a copy of each matrix while the arrays are held.
    Each array is replaced as its copy is made, so that the weights are held once and one matrix
    (when nothing else holds the old arrays)."""
    with torch.device("meta"):
        model = Transformer(cfg, init=None)  # for the names only: the same walk as the layout's
    for name in self_attentions(model):
        names = [f"{name}.{x}.weight" for x in "qkv"]
        parts = [params[n] for n in names]  # (H*D, C), (KV*D, C), (KV*D, C)
        fused = np.empty((cfg.d_model, sum(len(w) for w in parts)), np.result_type(*parts))
        at = 0
        for n, w in zip(names, parts, strict=True):
            fused[:, at : at + len(w)] = w.T
            params[n], at = fused[:, at : at + len(w)].T, at + len(w)  # (n, C), a view
        del parts
    for name in _transposed(model):
        params[f"{name}.weight"] = np.asfortranarray(params[f"{name}.weight"])
    return params


def to_params(model: Transformer) -> dict:
    """{name: float64 NumPy array} in spec order, for `weights.save` and the reference engine."""
    return {n: t.detach().to(torch.float64).cpu().numpy() for n, t in model.state_dict().items()}


def set_explicit(model: nn.Module, explicit: bool = True) -> None:
    """Use the explicit attention path (it returns the attention weights) instead of SDPA."""
    for m in model.modules():
        if isinstance(m, MultiHeadAttention):
            m.explicit = explicit
