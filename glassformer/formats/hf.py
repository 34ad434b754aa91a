"""Hugging Face checkpoints <-> glassformer: with hf_pegasus.py and hf_llama.py, the only modules
that know foreign tensor names.

Each family is a table of plain data, one row per module: (our name, their name, kind). `{i}`
stands for the layer index, counted over our encoder or decoder stack as our name says. The kind
says how the tensors move; the only transforms there are:

- "linear", "norm": copied as they are (`nn.Linear` stores (out, in) like us).
- "conv1d": GPT-2's `Conv1D` stores its weight (in, out): transposed. Its bias is copied.
- a row with several of our names (GPT-2's `c_attn`) is one fused tensor along the output axis
  (q | k | v): split in equal parts after the transpose, concatenated before it going back.
- "embed": the weight only, copied.

The functions work on {name: array} dicts of NumPy arrays or torch tensors and return the same
kind; they copy, never modify their input, and are bit-exact both ways. transformers is never
imported here and torch only to return a torch tensor: pass the foreign model's `state_dict()`.
Marian's embeddings do not fit a table row: `marian_to_glassformer` handles them by name.
A tensor the table does not expect, a missing one or one of the wrong shape raises a
`CheckpointError` naming it. Tensors a family has and glassformer cannot represent yet are listed
in `*_UNMAPPED` with the reason; they are refused unless `skip_unmapped=True`.
Deliberately not here: downloading, tokenizers, generation settings.
"""

from __future__ import annotations

import dataclasses
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
GPT2_FIXED = {
    "arch": "decoder",
    "norm": "pre",
    "positions": "learned",
    "embed_scale": False,
    "type_vocab_size": 0,
    "embed_norm": False,
    "logits_bias": False,
}

_BE = "encoder.layers.{i}."
_BH = "encoder.layer.{i}."
BERT = [
    ("encoder.tok_embed", "embeddings.word_embeddings", "embed"),
    ("encoder.pos_embed", "embeddings.position_embeddings", "embed"),
    ("encoder.type_embed", "embeddings.token_type_embeddings", "embed"),
    ("encoder.embed_norm", "embeddings.LayerNorm", "norm"),
    (_BE + "self_attn.q", _BH + "attention.self.query", "linear"),
    (_BE + "self_attn.k", _BH + "attention.self.key", "linear"),
    (_BE + "self_attn.v", _BH + "attention.self.value", "linear"),
    (_BE + "self_attn.o", _BH + "attention.output.dense", "linear"),
    (_BE + "norm1", _BH + "attention.output.LayerNorm", "norm"),
    (_BE + "ffn.w1", _BH + "intermediate.dense", "linear"),
    (_BE + "ffn.w2", _BH + "output.dense", "linear"),
    (_BE + "norm2", _BH + "output.LayerNorm", "norm"),
]
# Heads around the encoder that glassformer has no use for. A key ending in "*" is a prefix.
BERT_UNMAPPED = {
    "pooler.*": "the [CLS] pooler (glassformer mean-pools: sentence embeddings, its classifier)",
    "cls.*": "a pre-training head (masked LM / next sentence)",
    "classifier.*": "a task head of another model (fine-tune with `train classify --init`)",
}
BERT_IGNORED = ("embeddings.position_ids", "embeddings.token_type_ids")  # index buffers
BERT_FIXED = {
    "arch": "encoder",
    "norm": "post",
    "positions": "learned",
    "bias": True,
    "embed_norm": True,
    "embed_scale": False,
}


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
# Marian's embeddings do not fit a row-per-module table: one `shared` matrix is the encoder's and
# the decoder's token embedding and the output head; the sinusoidal positions are stored tables
# that must equal the formula; the logits bias is (1, V). `marian_to_glassformer` handles them.
MARIAN_SHARED = "model.shared.weight"
MARIAN_EMBED = {
    "encoder": "model.encoder.embed_tokens.weight",
    "decoder": "model.decoder.embed_tokens.weight",
}
MARIAN_POSITIONS = {
    "encoder": "model.encoder.embed_positions.weight",
    "decoder": "model.decoder.embed_positions.weight",
}
MARIAN_HEAD, MARIAN_BIAS = "lm_head.weight", "final_logits_bias"
MARIAN_FIXED = {
    "arch": "encoder-decoder",
    "norm": "post",
    "bias": True,
    "positions": "sinusoidal_split",
    "tie_embeddings": True,
    "logits_bias": True,
    "type_vocab_size": 0,
    "embed_norm": False,
}


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


def unmapped_in(state: dict, unmapped: dict) -> dict[str, str]:
    """{tensor name: reason} for the tensors of `state` that a family's `*_UNMAPPED` lists."""
    out = {}
    for name in state:
        for key, reason in unmapped.items():
            if name == key or (key.endswith("*") and name.startswith(key[:-1])):
                out[name] = reason
                break
    return out


def _to_ours(state: dict, table, cfg, family, unmapped=None, ignored=(), skip_unmapped=False):
    skipped = unmapped_in(state, unmapped or {})
    out, used, shapes = {}, set(), spec(cfg)
    for names, theirs, kind, suffix in _rows(table, cfg):
        if theirs not in state:
            raise CheckpointError(f"{family} checkpoint has no tensor {theirs!r}")
        parts = _theirs_to_ours(state[theirs], kind, suffix, len(names), theirs)
        for name, x in zip(names, parts, strict=True):
            _shape_check(name, x, shapes, theirs)
            out[name] = x
        used.add(theirs)
    if skipped and not skip_unmapped:
        reasons = "; ".join(f"{n}: {r}" for n, r in skipped.items())
        raise CheckpointError(
            f"{family} tensors glassformer cannot represent: {reasons}. "
            "Pass skip_unmapped=True to convert the rest (then it is not the same model)"
        )
    for name in state:
        if name not in used and name not in skipped and not _matches(name, ignored):
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
    if modern := cfg.modern_options():  # rotary, RMSNorm, gated FFN, GQA: hf_llama.py's forms
        raise ConfigError(
            f"{modern[0].split('=')[0]}: {family} has no {', '.join(modern)}; "
            f"export-hf cannot write this model as {family}"
        )


# -- GPT-2 --------------------------------------------------------------------------------------

_ACT_IN = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
    "swish": "silu",
    "silu": "silu",
}
_ACT_OUT = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu", "silu": "silu"}


def _as_dict(hf_config) -> dict:
    return hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(hf_config)


def _activation(d: dict, key: str, family: str) -> str:
    act = d.get(key)
    if act not in _ACT_IN:
        raise ConfigError(f"{key}: {family} activation {act!r} unsupported; use {sorted(_ACT_IN)}")
    return _ACT_IN[act]


# config.json entry of a GPT-2 export: the Config field GPT-2 cannot express. GPT-2 always has
# biases; a bias=False model is written with zero biases (the same function) and this entry, so
# that import-hf gives back the same Config and weights.
GPT2_RECORD = "glassformer"


def _gpt2_bias(d: dict) -> bool:
    record = d.get(GPT2_RECORD, {})
    if record not in ({}, {"bias": False}):
        raise ConfigError(
            f'{GPT2_RECORD}: expected {{"bias": false}} (as glassformer export-hf writes it), '
            f"got {record!r}; fix or remove the entry"
        )
    return record.get("bias", True)


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
        bias=_gpt2_bias(d),
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
        **({} if cfg.bias else {GPT2_RECORD: {"bias": False}}),
    }


def gpt2_to_glassformer(state: dict, cfg: Config) -> dict:
    """GPT-2 (GPT2LMHeadModel or GPT2Model with `transformer.` names) -> spec(cfg) tensors.

    `lm_head.weight` may be absent; if present it must equal the tied `transformer.wte.weight`.
    With bias=False (a glassformer export, GPT2_RECORD) the file's biases must be zero: dropped.
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
    if cfg.bias:
        return _to_ours(state, GPT2, cfg, "GPT-2", ignored=GPT2_IGNORED)
    cfg_b = dataclasses.replace(cfg, bias=True)
    out = _to_ours(state, GPT2, cfg_b, "GPT-2", ignored=GPT2_IGNORED)
    for name in spec(cfg_b).keys() - spec(cfg).keys():
        if np.any(np.asarray(out[name]) != 0):
            raise CheckpointError(
                f"the bias {name!r} is not zero, but config.json's {GPT2_RECORD!r} entry says "
                f"bias=false; remove the entry to import the model with its biases"
            )
    return {n: out[n] for n in spec(cfg)}


def glassformer_to_gpt2(params: dict, cfg: Config) -> dict:
    """spec(cfg) tensors -> a GPT2LMHeadModel state dict (with the tied `lm_head.weight`).

    GPT-2 always has biases: a bias=False model gets zero biases (the same function)."""
    _require(cfg, "GPT-2", GPT2_FIXED | {"tie_embeddings": True})
    if not cfg.bias:
        cfg_b = dataclasses.replace(cfg, bias=True)
        like = next(iter(params.values()))
        zeros = {n: _like(np.zeros(s), like) for n, s in spec(cfg_b).items() if n not in params}
        params, cfg = {**params, **zeros}, cfg_b
    out = _to_theirs(params, GPT2, cfg, "GPT-2")
    out["lm_head.weight"] = _copy(out["transformer.wte.weight"])
    return out


# -- BERT family --------------------------------------------------------------------------------


def bert_config(hf_config) -> Config:
    """A Config for a BertConfig (or its `to_dict()`): embeddings (words + positions + token
    types, then LayerNorm) and the encoder layers; n_classes 0: the model gives hidden states."""
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
        type_vocab_size=d.get("type_vocab_size", 2),
        embed_norm=True,
    )


def _strip_prefix(state: dict, prefix: str) -> dict:
    """BertForMaskedLM & co. keep the encoder under `bert.`: the same names without it."""
    if not any(n.startswith(prefix) for n in state):
        return dict(state)
    return {n.removeprefix(prefix): x for n, x in state.items()}


def bert_to_glassformer(state: dict, cfg: Config, skip_unmapped: bool = False) -> dict:
    """BertModel tensors (or `bert.`-prefixed ones) -> spec(cfg) tensors.

    The pooler and task/pre-training heads (BERT_UNMAPPED) are refused unless skip_unmapped.
    """
    _require(cfg, "BERT", BERT_FIXED | {"n_classes": 0})
    state = _strip_prefix(state, "bert.")
    return _to_ours(state, BERT, cfg, "BERT", BERT_UNMAPPED, BERT_IGNORED, skip_unmapped)


def glassformer_to_bert(params: dict, cfg: Config) -> dict:
    """A BertModel state dict without the pooler (BERT_UNMAPPED) from spec(cfg) tensors."""
    _require(cfg, "BERT", BERT_FIXED | {"n_classes": 0})
    return _to_theirs(params, BERT, cfg, "BERT")


def config_to_bert(cfg: Config) -> dict:
    """The BertConfig fields of a BERT-shaped Config."""
    _require(cfg, "BERT", BERT_FIXED | {"n_classes": 0})
    if cfg.type_vocab_size < 1:
        raise ConfigError("type_vocab_size: BERT needs token-type embeddings (>= 1)")
    return {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "num_attention_heads": cfg.n_heads,
        "num_hidden_layers": cfg.n_encoder_layers,
        "intermediate_size": cfg.d_ff,
        "hidden_act": _ACT_OUT[cfg.activation],
        "max_position_embeddings": cfg.max_len,
        "type_vocab_size": cfg.type_vocab_size,
        "layer_norm_eps": cfg.ln_eps,
    }


# -- Marian -------------------------------------------------------------------------------------


def marian_config(hf_config) -> Config:
    """A Config for a MarianConfig (or its `to_dict()`): shared, optionally √C-scaled token
    embeddings, half-sin | half-cos positions, post-LN layers, tied head with a logits bias."""
    d = _as_dict(hf_config)
    for a, b in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if d[a] != d[b]:
            raise ConfigError(f"{a}={d[a]} != {b}={d[b]}: glassformer's stacks share one size")
    vocab = d["vocab_size"]
    if d.get("decoder_vocab_size") not in (None, vocab):
        raise ConfigError(
            f"decoder_vocab_size={d['decoder_vocab_size']} != vocab_size={vocab}: "
            "glassformer needs one vocabulary for both sides"
        )
    if d.get("tie_word_embeddings") is False:
        raise ConfigError("tie_word_embeddings=False: an untied Marian head is not supported")
    return Config(
        arch="encoder-decoder",
        vocab_size=vocab,
        d_model=d["d_model"],
        n_heads=d["encoder_attention_heads"],
        d_ff=d["encoder_ffn_dim"],
        n_encoder_layers=d["encoder_layers"],
        n_decoder_layers=d["decoder_layers"],
        max_len=d["max_position_embeddings"],
        positions="sinusoidal_split",
        norm="post",
        activation=_activation(d, "activation_function", "Marian"),
        tie_embeddings=True,
        logits_bias=True,
        embed_scale=bool(d.get("scale_embedding", False)),
        ln_eps=1e-5,  # Marian's nn.LayerNorm default
    )


def _numpy64(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.astype(np.float64)
    return x.detach().cpu().double().numpy()


def _same(a, b) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool(np.array_equal(_numpy64(a), _numpy64(b)))


def _like(table: np.ndarray, x):
    """A float64 NumPy table in the dtype and kind (NumPy / torch) of tensor x."""
    if isinstance(x, np.ndarray):
        return table.astype(x.dtype)
    import torch

    return torch.from_numpy(table).to(x.dtype)


def marian_to_glassformer(state: dict, cfg: Config) -> dict:
    """MarianMTModel (or MarianModel) tensors -> spec(cfg) tensors.

    The shared embedding becomes both stacks' `tok_embed`; `lm_head.weight` must equal the decoder
    embedding (tied) and the stored positions the half-sin | half-cos formula (to 1e-6), else
    the tensor is named and refused; `final_logits_bias` (1, V) becomes `lm_head.bias` (V,).
    """
    _require(cfg, "Marian", MARIAN_FIXED)
    state = dict(state)
    shared = state.pop(MARIAN_SHARED, None)
    embeds = {k: state.pop(name, shared) for k, name in MARIAN_EMBED.items()}
    for stack, x in embeds.items():
        if x is None:
            raise CheckpointError(f"Marian checkpoint has no tensor {MARIAN_EMBED[stack]!r}")
    if shared is not None and not _same(shared, embeds["encoder"]):
        raise CheckpointError(f"tensor {MARIAN_SHARED!r} differs from {MARIAN_EMBED['encoder']!r}")
    head = state.pop(MARIAN_HEAD, None)
    if head is not None and not _same(head, embeds["decoder"]):
        raise CheckpointError(
            f"tensor {MARIAN_HEAD!r} differs from {MARIAN_EMBED['decoder']!r}; glassformer's "
            "Marian ties them (an untied head is not supported)"
        )
    from glassformer.reference import sinusoidal_positions

    for name in MARIAN_POSITIONS.values():
        stored = state.pop(name, None)
        if stored is None:
            continue
        want = sinusoidal_positions(cfg.max_len, cfg.d_model, split=True)
        if stored.shape != want.shape or np.abs(_numpy64(stored) - want).max() > 1e-6:
            raise CheckpointError(
                f"tensor {name!r} is not Marian's sinusoidal table (trained positions?); "
                "glassformer computes these positions and cannot load other values"
            )
    if MARIAN_BIAS not in state:
        raise CheckpointError(f"Marian checkpoint has no tensor {MARIAN_BIAS!r}")
    bias = state.pop(MARIAN_BIAS)
    if tuple(bias.shape) != (1, cfg.vocab_size):
        raise CheckpointError(
            f"tensor {MARIAN_BIAS!r} has shape {tuple(bias.shape)}, expected (1, {cfg.vocab_size})"
        )
    out = _to_ours(state, MARIAN, cfg, "Marian")
    out["encoder.tok_embed.weight"] = _copy(embeds["encoder"])
    out["decoder.tok_embed.weight"] = _copy(embeds["decoder"])
    out["lm_head.bias"] = _copy(bias[0])
    shapes = spec(cfg)
    for name in ("encoder.tok_embed.weight", "decoder.tok_embed.weight", "lm_head.bias"):
        _shape_check(name, out[name], shapes, name)
    return {n: out[n] for n in shapes}


def glassformer_to_marian(params: dict, cfg: Config) -> dict:
    """A MarianMTModel state dict from spec(cfg) tensors (both stacks' token embeddings equal)."""
    _require(cfg, "Marian", MARIAN_FIXED)
    layers = {n: x for n, x in params.items() if ".layers." in n}
    out = _to_theirs(layers, MARIAN, cfg, "Marian")
    enc, dec = params["encoder.tok_embed.weight"], params["decoder.tok_embed.weight"]
    if not _same(enc, dec):
        raise CheckpointError(
            "encoder.tok_embed.weight differs from decoder.tok_embed.weight; Marian shares one "
            "embedding matrix"
        )
    from glassformer.reference import sinusoidal_positions

    table = sinusoidal_positions(cfg.max_len, cfg.d_model, split=True)
    for stack in ("encoder", "decoder"):
        out[MARIAN_EMBED[stack]] = _copy(dec)
        out[MARIAN_POSITIONS[stack]] = _like(table, dec)
    out[MARIAN_SHARED] = _copy(dec)
    out[MARIAN_HEAD] = _copy(dec)
    out[MARIAN_BIAS] = _copy(params["lm_head.bias"][None])
    return out
