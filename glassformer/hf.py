"""Hugging Face checkpoints <-> glassformer: the ONLY module that knows foreign tensor names.

Each family is a table of plain data, one row per module: (our name, their name, kind). `{i}`
stands for the layer index, counted over our encoder or decoder stack as our name says. The kind
says how the tensors move; the only transforms there are:

- "linear", "norm": copied as they are (`nn.Linear` stores (out, in) like us).
- "conv1d": GPT-2's `Conv1D` stores its weight (in, out): transposed. Its bias is copied.
- a row with several of our names (GPT-2's `c_attn`) is one fused tensor along the output axis
  (q | k | v): split in equal parts after the transpose, concatenated before it going back.
- "embed": the weight only, copied.

The functions work on {name: array} dicts of NumPy arrays or torch tensors and return the same
kind; they copy, never modify their input, and are bit-exact both ways. Neither torch nor
transformers is imported here: build the foreign model and pass its `state_dict()`.
A tensor the table does not expect, a missing one or one of the wrong shape raises a
`CheckpointError` naming it. Tensors a family has and glassformer cannot represent yet are listed
in `*_UNMAPPED` with the reason; they are refused unless `skip_unmapped=True`.
Deliberately not here: downloading, tokenizers, generation settings.
"""

from __future__ import annotations

import re

import numpy as np

from glassformer.config import Config
from glassformer.errors import CheckpointError, ConfigError
from glassformer.weights import spec

# -- the tables ---------------------------------------------------------------------------------

_QKV = ("self_attn.q", "self_attn.k", "self_attn.v")
_GD = "decoder.layers.{i}."

GPT2 = [
    ("decoder.tok_embed", "transformer.wte", "embed"),
    ("decoder.pos_embed", "transformer.wpe", "embed"),
    (_GD + "norm1", "transformer.h.{i}.ln_1", "norm"),
    (tuple(_GD + n for n in _QKV), "transformer.h.{i}.attn.c_attn", "conv1d"),
    (_GD + "self_attn.o", "transformer.h.{i}.attn.c_proj", "conv1d"),
    (_GD + "norm2", "transformer.h.{i}.ln_2", "norm"),
    (_GD + "ffn.w1", "transformer.h.{i}.mlp.c_fc", "conv1d"),
    (_GD + "ffn.w2", "transformer.h.{i}.mlp.c_proj", "conv1d"),
    ("decoder.norm", "transformer.ln_f", "norm"),
]
# Non-parameter buffers of older transformers versions (the causal mask and its fill value).
GPT2_IGNORED = ("transformer.h.{i}.attn.bias", "transformer.h.{i}.attn.masked_bias")
GPT2_FIXED = {"arch": "decoder", "norm": "pre", "positions": "learned", "bias": True}

_BE = "encoder.layers.{i}."
_BH = "encoder.layer.{i}."
BERT = [
    ("encoder.tok_embed", "embeddings.word_embeddings", "embed"),
    ("encoder.pos_embed", "embeddings.position_embeddings", "embed"),
    (_BE + "self_attn.q", _BH + "attention.self.query", "linear"),
    (_BE + "self_attn.k", _BH + "attention.self.key", "linear"),
    (_BE + "self_attn.v", _BH + "attention.self.value", "linear"),
    (_BE + "self_attn.o", _BH + "attention.output.dense", "linear"),
    (_BE + "norm1", _BH + "attention.output.LayerNorm", "norm"),
    (_BE + "ffn.w1", _BH + "intermediate.dense", "linear"),
    (_BE + "ffn.w2", _BH + "output.dense", "linear"),
    (_BE + "norm2", _BH + "output.LayerNorm", "norm"),
]
BERT_UNMAPPED = {
    "embeddings.token_type_embeddings.weight": "glassformer has no token-type embeddings yet",
    "embeddings.LayerNorm.weight": "glassformer has no LayerNorm on the embeddings yet",
    "embeddings.LayerNorm.bias": "glassformer has no LayerNorm on the embeddings yet",
    "pooler.dense.weight": "glassformer has no [CLS] pooler (its classifier mean-pools)",
    "pooler.dense.bias": "glassformer has no [CLS] pooler (its classifier mean-pools)",
}
BERT_IGNORED = ("embeddings.position_ids", "embeddings.token_type_ids")  # index buffers
BERT_FIXED = {"arch": "encoder", "norm": "post", "positions": "learned", "bias": True}


_QKVO = (("q", "q"), ("k", "k"), ("v", "v"), ("o", "out"))


def _marian_layer(ours: str, theirs: str, cross: bool) -> list[tuple]:
    """One Marian layer's rows; our sublayer norms are numbered in order (self, cross, FFN)."""
    attns = [("self_attn", "self_attn")] + ([("cross_attn", "encoder_attn")] if cross else [])
    rows = []
    for k, (a, b) in enumerate(attns, start=1):
        rows += [(f"{ours}.{a}.{x}", f"{theirs}.{b}.{y}_proj", "linear") for x, y in _QKVO]
        rows.append((f"{ours}.norm{k}", f"{theirs}.{b}_layer_norm", "norm"))
    rows.append((f"{ours}.ffn.w1", f"{theirs}.fc1", "linear"))
    rows.append((f"{ours}.ffn.w2", f"{theirs}.fc2", "linear"))
    rows.append((f"{ours}.norm{len(attns) + 1}", f"{theirs}.final_layer_norm", "norm"))
    return rows


MARIAN = _marian_layer("encoder.layers.{i}", "model.encoder.layers.{i}", cross=False)
MARIAN += _marian_layer("decoder.layers.{i}", "model.decoder.layers.{i}", cross=True)
_MARIAN_EMBED = "glassformer has no Marian embeddings yet (scaled, shared, half-sin|half-cos PE)"
MARIAN_UNMAPPED = {
    "model.shared.weight": _MARIAN_EMBED,
    "model.encoder.embed_tokens.weight": _MARIAN_EMBED,
    "model.decoder.embed_tokens.weight": _MARIAN_EMBED,
    "model.encoder.embed_positions.weight": _MARIAN_EMBED,
    "model.decoder.embed_positions.weight": _MARIAN_EMBED,
    "lm_head.weight": "the output head is the shared embedding, not mapped yet",
    "final_logits_bias": "glassformer's tied output head has no bias yet",
}
MARIAN_FIXED = {"arch": "encoder-decoder", "norm": "post", "bias": True}


# -- the transforms -----------------------------------------------------------------------------


def _suffixes(kind: str) -> tuple[str, ...]:
    return ("weight",) if kind == "embed" else ("weight", "bias")


def _copy(x):
    """A C-contiguous copy of a NumPy array or a torch tensor (never a view of the input)."""
    return np.array(x, order="C") if isinstance(x, np.ndarray) else x.contiguous().clone()


def _cat(parts: list):
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=0)
    import torch

    return torch.cat(parts, dim=0)


def _theirs_to_ours(x, kind: str, suffix: str, n: int, name: str) -> list:
    if kind == "conv1d" and suffix == "weight":
        x = x.T  # Conv1D (in, out) -> (out, in)
    rows = x.shape[0] // n  # fused q | k | v along the output axis
    if rows * n != x.shape[0]:
        raise CheckpointError(f"tensor {name!r} of shape {tuple(x.shape)} does not split in {n}")
    return [_copy(x[j * rows : (j + 1) * rows]) for j in range(n)]


def _ours_to_theirs(parts: list, kind: str, suffix: str):
    x = _cat(parts) if len(parts) > 1 else parts[0]
    return _copy(x.T if kind == "conv1d" and suffix == "weight" else x)


def _rows(table: list, cfg: Config):
    """Every tensor of a table for this config: (our names, their name, kind, suffix)."""
    for ours, theirs, kind in table:
        ours = (ours,) if isinstance(ours, str) else ours
        stack = ours[0].split(".")[0]
        n = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
        for i in range(n) if "{i}" in theirs else [None]:
            for s in _suffixes(kind):
                names = tuple(f"{o.format(i=i)}.{s}" for o in ours)
                yield names, f"{theirs.format(i=i)}.{s}", kind, s


def _matches(name: str, patterns) -> bool:
    return any(re.fullmatch(re.escape(p).replace(r"\{i\}", r"\d+"), name) for p in patterns)


def _shape_check(name: str, x, shapes: dict, source: str) -> None:
    want = shapes.get(name)
    if want is None:
        raise CheckpointError(f"{name!r} (from {source!r}) is not a tensor of this Config")
    if tuple(x.shape) != want:
        raise CheckpointError(
            f"tensor {source!r} gives {name!r} of shape {tuple(x.shape)}, expected {want}; "
            "does the Config match the checkpoint's config?"
        )


def _to_ours(state: dict, table, cfg, family, unmapped=None, ignored=(), skip_unmapped=False):
    unmapped = unmapped or {}
    out, used, shapes = {}, set(), spec(cfg)
    for names, theirs, kind, suffix in _rows(table, cfg):
        if theirs not in state:
            raise CheckpointError(f"{family} checkpoint has no tensor {theirs!r}")
        parts = _theirs_to_ours(state[theirs], kind, suffix, len(names), theirs)
        for name, x in zip(names, parts, strict=True):
            _shape_check(name, x, shapes, theirs)
            out[name] = x
        used.add(theirs)
    blocked = [n for n in state if n in unmapped and not skip_unmapped]
    if blocked:
        reasons = "; ".join(f"{n}: {unmapped[n]}" for n in blocked)
        raise CheckpointError(
            f"{family} tensors glassformer cannot represent: {reasons}. "
            "Pass skip_unmapped=True to convert the rest (then it is not the same model)"
        )
    for name in state:
        if name not in used and name not in unmapped and not _matches(name, ignored):
            raise CheckpointError(
                f"unexpected tensor {name!r} in a {family} checkpoint: no glassformer equivalent "
                "(more layers than the Config says?)"
            )
    return {n: out[n] for n in shapes if n in out}  # in spec order


def _to_theirs(params: dict, table, cfg, family) -> dict:
    out, used, shapes = {}, set(), spec(cfg)
    for names, theirs, kind, suffix in _rows(table, cfg):
        for name in names:
            if name not in params:
                raise CheckpointError(f"glassformer parameters have no tensor {name!r}")
            _shape_check(name, params[name], shapes, name)
        out[theirs] = _ours_to_theirs([params[n] for n in names], kind, suffix)
        used.update(names)
    extra = [n for n in params if n not in used]
    if extra:
        raise CheckpointError(f"tensor {extra[0]!r} has no {family} equivalent")
    return out


def _require(cfg: Config, family: str, fixed: dict) -> None:
    for field, value in fixed.items():
        if getattr(cfg, field) != value:
            raise ConfigError(
                f"{field}: {family} needs {field}={value!r}, got {getattr(cfg, field)!r}"
            )
    if cfg.head_dim * cfg.n_heads != cfg.d_model:
        raise ConfigError(f"head_dim: {family} needs head_dim = d_model / n_heads")


# -- GPT-2 --------------------------------------------------------------------------------------

_ACT_IN = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
_ACT_OUT = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


def _as_dict(hf_config) -> dict:
    return hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(hf_config)


def _activation(d: dict, key: str, family: str) -> str:
    act = d.get(key)
    if act not in _ACT_IN:
        raise ConfigError(f"{key}: {family} activation {act!r} unsupported; use {sorted(_ACT_IN)}")
    return _ACT_IN[act]


def gpt2_config(hf_config) -> Config:
    """A Config from a GPT2Config (or its `to_dict()`); refuses options glassformer lacks."""
    d = _as_dict(hf_config)
    for key, refused in (
        ("scale_attn_weights", False),
        ("scale_attn_by_inverse_layer_idx", True),
        ("add_cross_attention", True),
        ("tie_word_embeddings", False),
    ):
        if d.get(key, not refused) == refused:
            raise ConfigError(f"{key}={refused} in the GPT-2 config has no glassformer equivalent")
    return Config(
        arch="decoder",
        vocab_size=d["vocab_size"],
        d_model=d["n_embd"],
        n_heads=d["n_head"],
        d_ff=d.get("n_inner") or 4 * d["n_embd"],
        n_decoder_layers=d["n_layer"],
        max_len=d["n_positions"],
        positions="learned",
        norm="pre",
        activation=_activation(d, "activation_function", "GPT-2"),
        bias=True,
        tie_embeddings=True,
        ln_eps=d.get("layer_norm_epsilon", 1e-5),
    )


def config_to_gpt2(cfg: Config) -> dict:
    """The GPT2Config fields (as a dict, for `GPT2Config(**d)`) of a GPT-2-shaped Config."""
    _require(cfg, "GPT-2", GPT2_FIXED | {"tie_embeddings": True})
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": cfg.vocab_size,
        "n_positions": cfg.max_len,
        "n_embd": cfg.d_model,
        "n_layer": cfg.n_decoder_layers,
        "n_head": cfg.n_heads,
        "n_inner": cfg.d_ff,
        "activation_function": _ACT_OUT[cfg.activation],
        "layer_norm_epsilon": cfg.ln_eps,
        "tie_word_embeddings": True,
    }


def gpt2_to_glassformer(state: dict, cfg: Config) -> dict:
    """GPT-2 (GPT2LMHeadModel or GPT2Model with `transformer.` names) -> spec(cfg) tensors.

    `lm_head.weight` may be absent; if present it must equal the tied `transformer.wte.weight`.
    """
    _require(cfg, "GPT-2", GPT2_FIXED | {"tie_embeddings": True})
    state = dict(state)
    head = state.pop("lm_head.weight", None)
    wte = state.get("transformer.wte.weight")
    if head is not None and wte is not None:
        if tuple(head.shape) != tuple(wte.shape) or not bool((head == wte).all()):
            raise CheckpointError(
                "tensor 'lm_head.weight' differs from 'transformer.wte.weight'; glassformer's "
                "GPT-2 ties them (an untied head is not supported)"
            )
    return _to_ours(state, GPT2, cfg, "GPT-2", ignored=GPT2_IGNORED)


def glassformer_to_gpt2(params: dict, cfg: Config) -> dict:
    """spec(cfg) tensors -> a GPT2LMHeadModel state dict (with the tied `lm_head.weight`)."""
    _require(cfg, "GPT-2", GPT2_FIXED | {"tie_embeddings": True})
    out = _to_theirs(params, GPT2, cfg, "GPT-2")
    out["lm_head.weight"] = _copy(out["transformer.wte.weight"])
    return out


# -- BERT family --------------------------------------------------------------------------------


def bert_config(hf_config) -> Config:
    """A Config for the embeddings + encoder layers of a BertConfig (or its `to_dict()`)."""
    d = _as_dict(hf_config)
    if d.get("is_decoder") or d.get("add_cross_attention"):
        raise ConfigError("is_decoder: a decoder BERT has no glassformer equivalent")
    if d.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError("position_embedding_type: only 'absolute' BERT positions are supported")
    return Config(
        arch="encoder",
        vocab_size=d["vocab_size"],
        d_model=d["hidden_size"],
        n_heads=d["num_attention_heads"],
        d_ff=d["intermediate_size"],
        n_encoder_layers=d["num_hidden_layers"],
        max_len=d["max_position_embeddings"],
        positions="learned",
        norm="post",
        activation=_activation(d, "hidden_act", "BERT"),
        ln_eps=d.get("layer_norm_eps", 1e-12),
    )


def bert_to_glassformer(state: dict, cfg: Config, skip_unmapped: bool = False) -> dict:
    """BertModel tensors -> spec(cfg) tensors: word and position embeddings and every layer.

    Not mapped (see BERT_UNMAPPED): token-type embeddings, the embedding LayerNorm, the pooler.
    The encoder layers are then the same function; the embedding step is not, yet.
    """
    _require(cfg, "BERT", BERT_FIXED | {"n_classes": 0})
    return _to_ours(state, BERT, cfg, "BERT", BERT_UNMAPPED, BERT_IGNORED, skip_unmapped)


def glassformer_to_bert(params: dict, cfg: Config) -> dict:
    """The mapped BertModel tensors (everything but BERT_UNMAPPED) from spec(cfg) tensors."""
    _require(cfg, "BERT", BERT_FIXED | {"n_classes": 0})
    return _to_theirs(params, BERT, cfg, "BERT")


# -- Marian -------------------------------------------------------------------------------------


def marian_config(hf_config) -> Config:
    """A Config for the encoder and decoder layers of a MarianConfig (or its `to_dict()`).

    Marian's embeddings are not mapped yet (MARIAN_UNMAPPED): positions and tying here describe
    glassformer's own embeddings, not Marian's.
    """
    d = _as_dict(hf_config)
    for a, b in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if d[a] != d[b]:
            raise ConfigError(f"{a}={d[a]} != {b}={d[b]}: glassformer's stacks share one size")
    return Config(
        arch="encoder-decoder",
        vocab_size=d["vocab_size"],
        d_model=d["d_model"],
        n_heads=d["encoder_attention_heads"],
        d_ff=d["encoder_ffn_dim"],
        n_encoder_layers=d["encoder_layers"],
        n_decoder_layers=d["decoder_layers"],
        max_len=d["max_position_embeddings"],
        positions="sinusoidal",
        norm="post",
        activation=_activation(d, "activation_function", "Marian"),
        tie_embeddings=True,
        ln_eps=1e-5,  # Marian's nn.LayerNorm default
    )


def marian_to_glassformer(state: dict, cfg: Config, skip_unmapped: bool = False) -> dict:
    """MarianMTModel tensors -> the encoder and decoder LAYER tensors of spec(cfg) only.

    Not mapped (see MARIAN_UNMAPPED): token and position embeddings, lm_head, final_logits_bias;
    the result lacks `*.tok_embed.weight`, so load it with `strict=False` or into the blocks.
    """
    _require(cfg, "Marian", MARIAN_FIXED)
    return _to_ours(state, MARIAN, cfg, "Marian", MARIAN_UNMAPPED, (), skip_unmapped)


def glassformer_to_marian(params: dict, cfg: Config) -> dict:
    """The mapped MarianMTModel layer tensors from our layer tensors (embeddings excluded)."""
    _require(cfg, "Marian", MARIAN_FIXED)
    layers = {n: x for n, x in params.items() if ".layers." in n}
    return _to_theirs(layers, MARIAN, cfg, "Marian")
