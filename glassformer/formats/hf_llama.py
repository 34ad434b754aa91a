"""Llama and Qwen2 checkpoints <-> glassformer: LlamaForCausalLM and Qwen2ForCausalLM, today's
decoders (rotary positions, RMSNorm, the gated SiLU FFN, grouped-query attention).

The two families share their tensor names (Qwen2 is Llama with biases on Q, K and V), and the table
`LLAMA` maps them one module to one: every tensor is copied as it is. `nn.Linear` stores (out, in)
like us, and both engines turn Q and K in Hugging Face's "rotate_half" layout, so no row of Wq or
Wk is permuted (Meta's own checkpoints pair the dimensions (2i, 2i+1); Hugging Face's conversion
permuted the rows once, and its folders are what is read here). `spec(cfg)` says which tensors a
module has: an RMSNorm a gain and no bias, a linear layer a bias where the Config gives one.

How config.json maps to the Config:

- Llama: `bias` is attention_bias and mlp_bias, which must agree (glassformer's bias covers W_O
  and the FFN together); Llama's head never has a bias: an untied head of a bias=true Config gets
  a zero `lm_head.bias` on import (the same function) and must have a zero one on export.
- Qwen2: qkv_bias=true with bias=false (its W_O and MLP have none).
- tie_word_embeddings: the head is the embedding matrix (save_pretrained writes no lm_head).
- rope_parameters (transformers 5) or rope_theta and rope_scaling (4.x): plain RoPE only. As
  transformers 5 reads them: a non-empty rope_scaling stands for rope_parameters, and rope_theta
  is taken from it, else from the top level, else 10,000.
- a key left out takes transformers' default (`DEFAULTS`, its LlamaConfig / Qwen2Config): a
  folder written by any version reads as transformers reads it. The sizes (vocab_size,
  hidden_size, intermediate_size, num_hidden_layers, num_attention_heads) have no default here:
  every writer writes them, and a 7B default would only be a wrong shape further on.

Refused, in one line that names the field: scaled rotary positions (rope_type "linear",
"dynamic", "yarn", "llama3", ...), a partial_rotary_factor other than 1 (transformers' Llama and
Qwen2 ignore it and turn every dimension: which model is meant cannot be told), Qwen2's
sliding-window attention on any layer, K/V heads that do not divide the query heads.
Deliberately not here: reading files (hf_dir.py), generation settings.
"""

from __future__ import annotations

import json

import numpy as np

from glassformer.config import Config
from glassformer.errors import CheckpointError, ConfigError, TokenizerError
from glassformer.formats.hf import (
    _ACT_OUT,
    _activation,
    _as_dict,
    _copy,
    _like,
    _matches,
    _numpy64,
    _same,
    _shape_check,
)
from glassformer.weights import spec

# model_type -> (the class transformers builds, the name in messages)
FAMILIES = {"llama": ("LlamaForCausalLM", "Llama"), "qwen2": ("Qwen2ForCausalLM", "Qwen2")}

_D, _H = "decoder.layers.{i}.", "model.layers.{i}."
LLAMA = [
    ("decoder.tok_embed", "model.embed_tokens"),
    (_D + "norm1", _H + "input_layernorm"),
    *((_D + f"self_attn.{x}", _H + f"self_attn.{x}_proj") for x in "qkvo"),
    (_D + "norm2", _H + "post_attention_layernorm"),
    (_D + "ffn.w1", _H + "mlp.gate_proj"),  # the gate: act(x·W1)
    (_D + "ffn.w3", _H + "mlp.up_proj"),  # the up projection it gates
    (_D + "ffn.w2", _H + "mlp.down_proj"),
    ("decoder.norm", "model.norm"),
    ("lm_head", "lm_head"),  # absent when tied
]
EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"
# Buffers of transformers < 4.31 (the rotary frequencies, recomputed from rope_theta).
LLAMA_IGNORED = (_H + "self_attn.rotary_emb.inv_freq",)
LLAMA_FIXED = {
    "arch": "decoder",
    "positions": "rotary",
    "rope_fraction": 1.0,
    "norm": "pre",
    "norm_kind": "rmsnorm",
    "ffn_kind": "gated",
    "embed_scale": False,
    "type_vocab_size": 0,
    "embed_norm": False,
    "logits_bias": False,
}


def _pairs(cfg: Config):
    """(our name, their name) of every tensor both have, in table order (our untied head's bias,
    which Llama lacks, is not one)."""
    shapes = spec(cfg)
    for ours, theirs in LLAMA:
        for i in range(cfg.n_decoder_layers) if "{i}" in ours else [None]:
            for s in ("weight", "bias"):
                name = f"{ours.format(i=i)}.{s}"
                if name in shapes and name != "lm_head.bias":
                    yield name, f"{theirs.format(i=i)}.{s}"


def export_family(cfg: Config) -> str:
    """ "llama" or "qwen2": the family whose folder holds this Config; else a ConfigError naming
    the first field that neither can hold."""
    for field, value in LLAMA_FIXED.items():
        if getattr(cfg, field) != value:
            raise ConfigError(
                f"{field}: Llama and Qwen2 need {field}={value!r}, got {getattr(cfg, field)!r}"
            )
    if cfg.has_qkv_bias == cfg.bias:
        return "llama"
    if cfg.has_qkv_bias:
        return "qwen2"
    raise ConfigError(
        "qkv_bias: Llama's attention_bias gives Q, K, V and W_O biases together and Qwen2 gives "
        "Q, K and V biases alone; qkv_bias=false with bias=true is neither"
    )


# -- config.json -> Config ----------------------------------------------------------------------

# The value transformers gives a key config.json leaves out (its LlamaConfig / Qwen2Config
# defaults). num_key_value_heads None: as many as the query heads (also what null means).
_COMMON = {"hidden_act": "silu", "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
DEFAULTS = {
    "llama": _COMMON | {"max_position_embeddings": 2048, "num_key_value_heads": None},
    "qwen2": _COMMON | {"max_position_embeddings": 32768, "num_key_value_heads": 32},
}


def _size(d: dict, key: str, default: int) -> int:
    """An optional size of config.json (null: the default), a positive integer."""
    value = d.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{key} must be a positive integer, got {value!r}")
    return value


def _rope_theta(d: dict, name: str) -> float:
    """rope_theta of plain RoPE, from rope_parameters (transformers 5) or the top level (4.x)."""
    rope, scaling = d.get("rope_parameters"), d.get("rope_scaling")
    for key, x in (("rope_parameters", rope), ("rope_scaling", scaling)):
        if x is not None and not isinstance(x, dict):
            raise ConfigError(f"{key}: expected an object or null, got {x!r}")
    # transformers 5 takes a non-empty rope_scaling (4.x's name) in place of rope_parameters,
    # its rope_theta included
    key, rope = ("rope_scaling", scaling) if scaling else ("rope_parameters", rope or {})
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise ConfigError(
            f"{key}: {name}'s rope_type {kind!r} (scaled rotary positions) has no glassformer "
            "equivalent: glassformer turns Q and K by plain RoPE (rope_type 'default')"
        )
    partial = rope.get("partial_rotary_factor", d.get("partial_rotary_factor", 1.0))
    if partial != 1:
        raise ConfigError(
            f"partial_rotary_factor: {partial!r}, but transformers' {name} ignores it and turns "
            "every dimension of a head; remove it (full rotary) or convert the model as the "
            "family that reads it"
        )
    theta = rope.get("rope_theta", d.get("rope_theta", 10000.0))
    if not isinstance(theta, int | float) or isinstance(theta, bool):
        raise ConfigError(f"rope_theta must be a number, got {theta!r}")
    return float(theta)


def _no_sliding_window(d: dict) -> None:
    """Qwen2's sliding-window layers (those past max_window_layers) are refused."""
    n, window = d["num_hidden_layers"], d.get("sliding_window")
    types = d.get("layer_types")
    if isinstance(types, list):
        sliding = [i for i, t in enumerate(types) if t != "full_attention"]
    elif d.get("use_sliding_window") and window is not None:
        sliding = list(range(d.get("max_window_layers", 28), n))
    else:
        sliding = []
    if sliding:
        raise ConfigError(
            f"use_sliding_window: Qwen2's sliding-window attention (sliding_window={window}, on "
            f"layer {sliding[0]} and {len(sliding) - 1} more) has no glassformer equivalent: "
            "every layer attends to the whole context"
        )


def _biases(d: dict, family: str, name: str) -> tuple[bool, bool | None]:
    """(bias, qkv_bias) of the Config."""
    if family == "qwen2":
        return False, True
    attention, mlp = d.get("attention_bias", False), d.get("mlp_bias", False)
    if attention != mlp:
        raise ConfigError(
            f"attention_bias={attention} with mlp_bias={mlp}: {name} with biases on one of them "
            "has no glassformer equivalent (its bias gives W_O and the FFN biases together)"
        )
    return bool(attention), None


def llama_config(hf_config, family: str = "llama") -> Config:
    """A Config for a LlamaConfig or Qwen2Config (or its `to_dict()`; family its model_type);
    refuses what glassformer cannot represent, naming the field."""
    d = DEFAULTS[family] | _as_dict(hf_config)
    name = FAMILIES[family][1]
    heads = d["num_attention_heads"]
    kv = _size(d, "num_key_value_heads", heads)
    if heads % kv:
        raise ConfigError(
            f"num_key_value_heads: num_attention_heads={heads} is not divisible by "
            f"num_key_value_heads={kv}; each group of query heads shares one key/value head"
        )
    bias, qkv_bias = _biases(d, family, name)
    if family == "qwen2":
        _no_sliding_window(d)
    return Config(
        arch="decoder",
        vocab_size=d["vocab_size"],
        d_model=d["hidden_size"],
        n_heads=heads,
        head_dim=_size(d, "head_dim", d["hidden_size"] // heads),
        d_ff=d["intermediate_size"],
        n_decoder_layers=d["num_hidden_layers"],
        max_len=d["max_position_embeddings"],
        positions="rotary",
        norm="pre",
        activation=_activation(d, "hidden_act", name),
        bias=bias,
        tie_embeddings=d["tie_word_embeddings"],
        ln_eps=float(d["rms_norm_eps"]),
        rope_theta=_rope_theta(d, name),
        norm_kind="rmsnorm",
        ffn_kind="gated",
        n_kv_heads=None if kv == heads else kv,
        qkv_bias=qkv_bias,
    )


def config_specials(tok, d: dict):
    """The folder's tokenizer with BOS and EOS where config.json names them by id: the ids that
    transformers' generate starts from and stops at. A list of EOS ids keeps the tokenizer's own
    if it is one of them, else takes the first. An id that is no token of the tokenizer (the
    embedding table may be longer: Qwen2's is) is refused, never skipped (`hf_dir` has checked
    them against the vocabulary)."""
    specials = dict(tok.specials)
    for role in ("bos", "eos"):
        value = d.get(f"{role}_token_id")
        ids = [i for i in (value if isinstance(value, list) else [value]) if i is not None]
        for i in ids:
            if not (type(i) is int and 0 <= i < tok.vocab_size):
                raise TokenizerError(
                    f"config.json's {role}_token_id {json.dumps(value)}: {json.dumps(i)} is not "
                    f"a token of the folder's tokenizer ({tok.vocab_size} tokens, ids 0-"
                    f"{tok.vocab_size - 1}); correct {role}_token_id"
                )
        if ids and getattr(tok, f"{role}_id") not in ids:
            specials[role] = tok.vocab[ids[0]]
    return tok if specials == tok.specials else type(tok)(tok.hf_json, specials)


# -- the tensors, both ways ---------------------------------------------------------------------


def llama_to_glassformer(state: dict, cfg: Config, copy: bool = True) -> dict:
    """LlamaForCausalLM / Qwen2ForCausalLM tensors -> spec(cfg) tensors, copied. A tied model's
    `lm_head.weight` may be absent; if present it must equal the embedding. copy=False: the
    tensors of `state` themselves, for a caller that read them and drops `state` (`hf_dir.load`:
    a second copy of every weight would be made only to free the first)."""
    name = FAMILIES[export_family(cfg)][1]
    shapes, out, used = spec(cfg), {}, set()
    for ours, theirs in _pairs(cfg):
        if theirs not in state:
            why = " (tie_word_embeddings is false)" if theirs == HEAD else ""
            raise CheckpointError(f"{name} checkpoint has no tensor {theirs!r}{why}")
        _shape_check(ours, state[theirs], shapes, theirs)
        out[ours] = _copy(state[theirs]) if copy else state[theirs]
        used.add(theirs)
    if cfg.tie_embeddings and HEAD in state:
        if not _same(state[HEAD], state[EMBED]):
            raise CheckpointError(
                f"tensor {HEAD!r} differs from {EMBED!r} but tie_word_embeddings is true; set "
                "it false in config.json to use the separate head"
            )
        used.add(HEAD)
    if cfg.lm_bias:  # Llama's head has none: zero is the same function
        out["lm_head.bias"] = _like(np.zeros(cfg.vocab_size), out["decoder.tok_embed.weight"])
    for n in state:
        if n not in used and not _matches(n, LLAMA_IGNORED):
            raise CheckpointError(
                f"unexpected tensor {n!r} in a {name} checkpoint: no glassformer equivalent "
                "(more layers or biases than config.json says?)"
            )
    return {n: out[n] for n in shapes}


def glassformer_to_llama(params: dict, cfg: Config) -> dict:
    """spec(cfg) tensors -> the tensors of a LlamaForCausalLM / Qwen2ForCausalLM folder, as
    save_pretrained writes them (a tied head is not written)."""
    family = export_family(cfg)
    shapes, out = spec(cfg), {}
    for ours, theirs in _pairs(cfg):
        if ours not in params:
            raise CheckpointError(f"glassformer parameters have no tensor {ours!r}")
        _shape_check(ours, params[ours], shapes, ours)
        out[theirs] = _copy(params[ours])
    if extra := [n for n in params if n not in shapes]:
        raise CheckpointError(f"tensor {extra[0]!r} is not a tensor of this Config")
    if cfg.lm_bias and np.any(_numpy64(params["lm_head.bias"]) != 0):
        raise CheckpointError(
            f"lm_head.bias is not zero, and {FAMILIES[family][1]}'s output head has no bias; "
            "tie the embeddings or train with bias=false"
        )
    return out


def config_to_llama(cfg: Config) -> dict:
    """The config.json fields (without token ids) of a Llama- or Qwen2-shaped Config. rope_theta
    is written twice: in rope_parameters (transformers 5) and at the top (transformers 4.x)."""
    family = export_family(cfg)
    out = {
        "model_type": family,
        "architectures": [FAMILIES[family][0]],
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.n_decoder_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": _ACT_OUT[cfg.activation],
        "max_position_embeddings": cfg.max_len,
        "rms_norm_eps": cfg.ln_eps,
        "rope_parameters": {"rope_theta": cfg.rope_theta, "rope_type": "default"},
        "rope_theta": cfg.rope_theta,
        "tie_word_embeddings": cfg.tie_embeddings,
        "attention_dropout": 0.0,
    }
    if family == "llama":
        return out | {"attention_bias": cfg.bias, "mlp_bias": cfg.bias}
    return out | {"use_sliding_window": False, "sliding_window": None}
