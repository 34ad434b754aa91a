"""Pegasus checkpoints <-> glassformer: the pre-LN encoder-decoder that both `transformers`
(PegasusForConditionalGeneration) and CTranslate2 (its Pegasus converter) load.

Why Pegasus and not Marian: glassformer's translator is pre-LN with a final LayerNorm after each
stack; Marian (and BART, FSMT) are post-LN, MBart adds a LayerNorm on the embeddings, and M2M100 /
NLLB compute fairseq's sinusoids (another frequency formula, offset by the padding id) in a buffer
that is never read from the file. Pegasus is x + Sublayer(LN(x)) with `encoder.layer_norm` and
`decoder.layer_norm` at the end, optional √d embedding scale, ReLU/GELU/SiLU, biases everywhere,
and its position tables are ordinary tensors of the checkpoint: transformers and CTranslate2 use
the stored values, so a learned table, the interleaved sin/cos table ("sinusoidal"), Pegasus's own
half-sin | half-cos one ("sinusoidal_split") or zeros ("none") are all expressed exactly.

The layers have Marian's names (`hf._marian_layer`); the embeddings, positions and logits bias do
not fit a table row and are handled by name here:

- `tie_word_embeddings` true: one `model.shared.weight` is the encoder's and the decoder's token
  embedding and the output head (share_embeddings and tie_embeddings). False: the three are
  separate tensors, compared on import (bitwise equal encoder and decoder embeddings are shared,
  a bitwise equal head is tied).
- `final_logits_bias` (1, V) is `lm_head.bias`: present in the file exactly when the Config has one
  (a tied head with logits_bias, or any untied head, which has a bias because bias=True).
- the stored position tables say `positions` (computed tables are recognised to 1e-6).

Refused, naming the Config field: post-LN, bias=False, an embedding LayerNorm, token types,
ln_eps other than 1e-5 (Pegasus's LayerNorm), head_dim other than d_model / n_heads.
Deliberately not here: token ids and generation settings (hf_dir.py writes those).
"""

from __future__ import annotations

import numpy as np

from glassformer.config import Config
from glassformer.errors import CheckpointError, ConfigError
from glassformer.formats import hf
from glassformer.formats.hf import (
    _ACT_OUT,
    _activation,
    _as_dict,
    _copy,
    _like,
    _marian_layer,
    _numpy64,
    _require,
    _same,
    _shape_check,
    _to_ours,
    _to_theirs,
)
from glassformer.weights import spec

PEGASUS = _marian_layer("encoder.layers.{i}", "model.encoder.layers.{i}", cross=False)
PEGASUS += _marian_layer("decoder.layers.{i}", "model.decoder.layers.{i}", cross=True)
PEGASUS += [
    ("encoder.norm", "model.encoder.layer_norm", "norm"),
    ("decoder.norm", "model.decoder.layer_norm", "norm"),
]
# Pegasus names its embeddings, positions, head and logits bias as Marian does (both are BART's).
PEGASUS_SHARED, PEGASUS_EMBED = hf.MARIAN_SHARED, hf.MARIAN_EMBED
PEGASUS_POSITIONS = hf.MARIAN_POSITIONS
PEGASUS_HEAD, PEGASUS_BIAS = hf.MARIAN_HEAD, hf.MARIAN_BIAS
PEGASUS_FIXED = {
    "arch": "encoder-decoder",
    "norm": "pre",
    "bias": True,
    "type_vocab_size": 0,
    "embed_norm": False,
    "ln_eps": 1e-5,
}
# Computed position tables that a stored one is recognised as (to this tolerance).
_TABLE_TOL = 1e-6


def _tables(max_len: int, C: int) -> dict[str, np.ndarray]:
    from glassformer.reference import sinusoidal_positions

    return {
        "sinusoidal_split": sinusoidal_positions(max_len, C, split=True),
        "sinusoidal": sinusoidal_positions(max_len, C),
        "none": np.zeros((max_len, C)),
    }


def _tied(cfg: Config) -> bool:
    """Pegasus ties all or nothing: one matrix for both stacks and the head, or three."""
    return cfg.share_embeddings and cfg.tie_embeddings


def _check(cfg: Config) -> None:
    _require(cfg, "Pegasus", PEGASUS_FIXED)


def config_to_pegasus(cfg: Config) -> dict:
    """The PegasusConfig fields of a Pegasus-shaped Config (without token ids)."""
    _check(cfg)
    return {
        "model_type": "pegasus",
        "architectures": ["PegasusForConditionalGeneration"],
        "is_encoder_decoder": True,
        "vocab_size": cfg.vocab_size,
        "d_model": cfg.d_model,
        "encoder_layers": cfg.n_encoder_layers,
        "decoder_layers": cfg.n_decoder_layers,
        "encoder_attention_heads": cfg.n_heads,
        "decoder_attention_heads": cfg.n_heads,
        "encoder_ffn_dim": cfg.d_ff,
        "decoder_ffn_dim": cfg.d_ff,
        "max_position_embeddings": cfg.max_len,
        "activation_function": _ACT_OUT[cfg.activation],
        "scale_embedding": cfg.embed_scale,
        "tie_word_embeddings": _tied(cfg),
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        # PegasusConfig forces EOS at max_length by default; glassformer's greedy does not.
        "forced_eos_token_id": None,
        # What google/pegasus-* configs say, and what CTranslate2's converter reads.
        "normalize_before": True,
        "normalize_embedding": False,
    }


def _positions(state: dict, max_len: int, C: int) -> str:
    """The `positions` value that the stored tables (absent: Pegasus computes its own) are."""
    kinds = set()
    tables = _tables(max_len, C)
    for name in PEGASUS_POSITIONS.values():
        stored = state.get(name)
        if stored is None:
            kinds.add("sinusoidal_split")
            continue
        if tuple(stored.shape) != (max_len, C):
            raise CheckpointError(
                f"tensor {name!r} has shape {tuple(stored.shape)}, expected {(max_len, C)}"
            )
        x = _numpy64(stored)
        found = [k for k, t in tables.items() if np.abs(x - t).max() <= _TABLE_TOL]
        kinds.add(found[0] if found else "learned")
    return kinds.pop() if len(kinds) == 1 else "learned"


def pegasus_config(hf_config, state: dict) -> Config:
    """A Config for a PegasusConfig (or its `to_dict()`) and the checkpoint's tensors, which say
    how the embeddings are shared, whether the head has a bias and what the positions are."""
    d = _as_dict(hf_config)
    for a, b in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if d[a] != d[b]:
            raise ConfigError(f"{a}={d[a]} != {b}={d[b]}: glassformer's stacks share one size")
    C, max_len = d["d_model"], d["max_position_embeddings"]
    if d.get("tie_word_embeddings", True):
        share = tie = True
    else:
        for name in (*PEGASUS_EMBED.values(), PEGASUS_HEAD):
            if name not in state:
                raise CheckpointError(
                    f"tie_word_embeddings=false but the Pegasus checkpoint has no tensor {name!r}"
                )
        dec = state[PEGASUS_EMBED["decoder"]]
        share = _same(state[PEGASUS_EMBED["encoder"]], dec)
        tie = _same(state[PEGASUS_HEAD], dec)
    return Config(
        arch="encoder-decoder",
        vocab_size=d["vocab_size"],
        d_model=C,
        n_heads=d["encoder_attention_heads"],
        d_ff=d["encoder_ffn_dim"],
        n_encoder_layers=d["encoder_layers"],
        n_decoder_layers=d["decoder_layers"],
        max_len=max_len,
        positions=_positions(state, max_len, C),
        norm="pre",
        activation=_activation(d, "activation_function", "Pegasus"),
        bias=True,
        tie_embeddings=tie,
        share_embeddings=share,
        logits_bias=tie and PEGASUS_BIAS in state,
        embed_scale=bool(d.get("scale_embedding", False)),
        ln_eps=1e-5,  # Pegasus's nn.LayerNorm default
    )


def pegasus_to_glassformer(state: dict, cfg: Config) -> dict:
    """PegasusForConditionalGeneration (or PegasusModel) tensors -> spec(cfg) tensors.

    Embeddings the Config shares or ties must be bitwise equal in the checkpoint; stored position
    tables must be the Config's computed table (to 1e-6) unless positions="learned"."""
    _check(cfg)
    state = dict(state)
    shared = state.pop(PEGASUS_SHARED, None)
    embeds = {k: state.pop(name, shared) for k, name in PEGASUS_EMBED.items()}
    head = state.pop(PEGASUS_HEAD, embeds["decoder"])
    for stack, x in embeds.items():
        if x is None:
            raise CheckpointError(f"Pegasus checkpoint has no tensor {PEGASUS_EMBED[stack]!r}")
    if cfg.share_embeddings and not _same(embeds["encoder"], embeds["decoder"]):
        raise CheckpointError(
            f"tensor {PEGASUS_EMBED['encoder']!r} differs from {PEGASUS_EMBED['decoder']!r}; "
            "this Config shares them (share_embeddings=true)"
        )
    if cfg.tie_embeddings and not _same(head, embeds["decoder"]):
        raise CheckpointError(
            f"tensor {PEGASUS_HEAD!r} differs from {PEGASUS_EMBED['decoder']!r}; "
            "this Config ties them (tie_embeddings=true)"
        )
    out = {"decoder.tok_embed.weight": _copy(embeds["decoder"])}
    if not cfg.share_embeddings:
        out["encoder.tok_embed.weight"] = _copy(embeds["encoder"])
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = _copy(head)
    want = _tables(cfg.max_len, cfg.d_model).get(cfg.positions)
    for stack, name in PEGASUS_POSITIONS.items():
        stored = state.pop(name, None)
        if cfg.positions == "learned":
            if stored is None:  # what transformers computes for a table the file lacks
                stored = _like(_tables(cfg.max_len, cfg.d_model)["sinusoidal_split"], head)
            out[f"{stack}.pos_embed.weight"] = _copy(stored)
        elif stored is not None and (
            tuple(stored.shape) != want.shape or np.abs(_numpy64(stored) - want).max() > _TABLE_TOL
        ):
            raise CheckpointError(
                f"tensor {name!r} is not the positions={cfg.positions!r} table; "
                "import with positions='learned' to keep the stored values"
            )
    bias = state.pop(PEGASUS_BIAS, None)
    if cfg.lm_bias:
        if bias is None:  # transformers reads a missing final_logits_bias as zeros
            bias = _like(np.zeros((1, cfg.vocab_size)), embeds["decoder"])
        if tuple(bias.shape) != (1, cfg.vocab_size):
            raise CheckpointError(
                f"tensor {PEGASUS_BIAS!r} has shape {tuple(bias.shape)}, "
                f"expected (1, {cfg.vocab_size})"
            )
        out["lm_head.bias"] = _copy(bias[0])
    elif bias is not None and np.any(_numpy64(bias) != 0):
        raise CheckpointError(
            f"tensor {PEGASUS_BIAS!r} is not zero but this Config has no logits bias; "
            "set logits_bias=true"
        )
    out |= _to_ours(state, PEGASUS, cfg, "Pegasus")
    shapes = spec(cfg)
    for name, x in out.items():
        _shape_check(name, x, shapes, name)
    return {n: out[n] for n in shapes}


def glassformer_to_pegasus(params: dict, cfg: Config) -> dict:
    """The tensors of a Pegasus folder from spec(cfg) tensors, as save_pretrained writes them: a
    tied model has only `model.shared.weight`; `final_logits_bias` only when the head has a bias;
    the position tables always (computed ones in the dtype of the other tensors)."""
    _check(cfg)
    by_name = ("tok_embed.weight", "pos_embed.weight", "lm_head.weight", "lm_head.bias")
    body = {n: x for n, x in params.items() if not n.endswith(by_name)}
    out = _to_theirs(body, PEGASUS, cfg, "Pegasus")
    dec = params["decoder.tok_embed.weight"]
    out[PEGASUS_SHARED] = _copy(dec)
    if not _tied(cfg):
        enc = dec if cfg.share_embeddings else params["encoder.tok_embed.weight"]
        out[PEGASUS_EMBED["encoder"]] = _copy(enc)
        out[PEGASUS_EMBED["decoder"]] = _copy(dec)
        out[PEGASUS_HEAD] = _copy(dec if cfg.tie_embeddings else params["lm_head.weight"])
    for stack, name in PEGASUS_POSITIONS.items():
        if cfg.positions == "learned":
            out[name] = _copy(params[f"{stack}.pos_embed.weight"])
        else:
            out[name] = _like(_tables(cfg.max_len, cfg.d_model)[cfg.positions], dec)
    if cfg.lm_bias:
        out[PEGASUS_BIAS] = _copy(params["lm_head.bias"][None])
    return out
