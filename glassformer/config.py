"""`Config`: the architecture of a glassformer model, shared by both engines.

One frozen dataclass describes the three stacks of seed 002 (encoder-decoder for translation,
decoder-only for free generation, encoder-only for classification). It holds architecture only:
no training settings, no file paths. Every field is validated on construction with an error that
names the field and what is allowed. This module deliberately knows nothing about weights.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import typing
from dataclasses import dataclass, fields
from typing import Literal

from glassformer.errors import ConfigError, param

Arch = Literal["encoder-decoder", "decoder", "encoder"]
Positions = Literal["sinusoidal", "sinusoidal_split", "learned", "none", "rotary"]
Norm = Literal["post", "pre"]
NormKind = Literal["layernorm", "rmsnorm"]
FFNKind = Literal["plain", "gated"]
Activation = Literal["relu", "gelu", "gelu_tanh", "silu"]


@dataclass(frozen=True)
class Config:
    """Architecture of one model.

    arch: "encoder-decoder" (translation), "decoder" (GPT-style LM) or "encoder" (classifier).
    head_dim: the per-head width D of Q, K, V; None means d_model // n_heads. It may differ from
        d_model / n_heads: the Random Transformer uses d_model 4 with two 3-dim heads.
    positions: "sinusoidal" (Vaswani et al., base 10000: sin on even, cos on odd dimensions),
        "sinusoidal_split" (Marian: the same angles, sin in the first half of the dimensions and
        cos in the second), "learned" (GPT-2, BERT), "none", or "rotary" (RoPE, Su et al. 2021;
        Llama, Qwen2, Mistral): no table is added to the embeddings; Q and K of every
        self-attention (never cross-attention) are rotated by their absolute position, in Hugging
        Face's "rotate_half" layout: dimension i of a head's rotated part pairs with i + r/2 and
        turns by the angle pos · rope_theta^(-2i/r), r = rope_dim.
    rope_theta: the base of the rotary angles (> 0; Llama 10000, Llama 3 500000).
    rope_fraction: the fraction of each head's dimensions rotated, the first ones, in (0, 1]:
        rope_dim = int(head_dim · rope_fraction), as Hugging Face computes it, which must be even
        (GPT-NeoX, Phi: partial rotary). rope_theta and rope_fraction need positions="rotary".
    norm: "post" = LayerNorm(x + Sublayer(x)) as in the articles; "pre" = x + Sublayer(LN(x)) as in
        GPT-2, with a final LayerNorm after the stack.
    norm_kind: every norm of the model (blocks, final, embed_norm): "layernorm", or "rmsnorm"
        (Zhang & Sennrich 2019; Llama): x / √(mean(x²) + ε) · g, a weight and no bias. ε is ln_eps.
    activation: FFN non-linearity: "relu" (articles), "gelu" (exact, erf; BERT), "gelu_tanh"
        (GPT-2) or "silu" (x·sigmoid(x), Marian's "swish").
    ffn_kind: "plain" act(x·W1 + b1)·W2 + b2, or "gated" (act(x·W1) ⊙ x·W3)·W2 (Shazeer 2020;
        SwiGLU with silu: Llama): W1 the gate, W3 the up and W2 the down projection (Meta's names).
    d_ff: the FFN's width F; 0: no FFN sublayer (nor its norm) in any block: attention only.
    bias: whether every linear layer (Q, K, V, W_O, FFN, output head) has a bias.
    qkv_bias: whether Q, K and V have biases, whatever the other linear layers do (Qwen2: true,
        with bias false); None follows `bias`.
    n_kv_heads: the number of key/value heads (grouped-query attention, Ainslie et al. 2023), a
        divisor of n_heads: each group of n_heads / n_kv_heads consecutive query heads shares one
        key/value head, in self- and cross-attention, and the KV cache keeps only these (1: multi-
        query attention). None means n_heads.
    tie_embeddings: the output head reuses the decoder's token embedding matrix.
    share_embeddings: encoder-decoder only: the encoder reads its tokens through the decoder's
        embedding matrix (`decoder.tok_embed.weight`; there is no `encoder.tok_embed.weight`), so
        one matrix serves source, target and, with tie_embeddings, the output head (Vaswani et
        al. section 3.4 with a joint vocabulary; Marian's `shared`).
    n_classes: size of the classifier head on an encoder (0: the encoder returns hidden states).
    embed_scale: token embeddings are multiplied by √d_model before positions are added
        (Vaswani et al. section 3.4; Marian).
    type_vocab_size: number of token types (BERT's segment A/B): a third embedding table added to
        tokens and positions; 0 means none. Inputs without types use type 0.
    embed_norm: a LayerNorm on the summed embeddings, before the first block (BERT).
    logits_bias: the output head adds a bias even when it is the tied embedding matrix (Marian's
        final_logits_bias). An untied head has a bias whenever `bias` is true.
    n_encoder_layers, n_decoder_layers: None means 2 for a stack the arch has, 0 otherwise.
    """

    arch: Arch = "decoder"
    vocab_size: int = 256
    d_model: int = 64
    n_heads: int = 4
    head_dim: int | None = None
    d_ff: int = 256
    n_encoder_layers: int | None = None
    n_decoder_layers: int | None = None
    max_len: int = 128
    positions: Positions = "sinusoidal"
    norm: Norm = "post"
    activation: Activation = "relu"
    bias: bool = True
    tie_embeddings: bool = False
    share_embeddings: bool = False
    ln_eps: float = 1e-5
    n_classes: int = 0
    embed_scale: bool = False
    type_vocab_size: int = 0
    embed_norm: bool = False
    logits_bias: bool = False
    rope_theta: float = 10000.0
    rope_fraction: float = 1.0
    norm_kind: NormKind = "layernorm"
    ffn_kind: FFNKind = "plain"
    n_kv_heads: int | None = None
    qkv_bias: bool | None = None

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(Config)
        for f in fields(self):
            check_type(f.name, getattr(self, f.name), hints[f.name])
        if self.n_heads < 1:
            raise ConfigError(f"n_heads must be >= 1, got {self.n_heads}")
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ConfigError(
                    f"head_dim: d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                    "set head_dim explicitly or change n_heads"
                )
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        for name, has in (
            ("n_encoder_layers", self.has_encoder),
            ("n_decoder_layers", self.has_decoder),
        ):
            if getattr(self, name) is None:
                object.__setattr__(self, name, 2 if has else 0)
        for name in ("vocab_size", "d_model", "n_heads", "head_dim", "max_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("n_encoder_layers", "n_decoder_layers", "n_classes", "type_vocab_size"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.d_ff < 0:
            raise ConfigError(f"d_ff must be >= 0 (0: attention only, no FFN), got {self.d_ff}")
        if not 0.0 < self.ln_eps < 1.0:
            raise ConfigError(f"ln_eps must be in (0, 1), got {self.ln_eps}")
        self._check_stacks()
        self._check_modern()

    def _check_stacks(self) -> None:
        needs = {
            "encoder-decoder": ("n_encoder_layers", "n_decoder_layers"),
            "decoder": ("n_decoder_layers",),
            "encoder": ("n_encoder_layers",),
        }[self.arch]
        for name in ("n_encoder_layers", "n_decoder_layers"):
            value = getattr(self, name)
            if name in needs and value < 1:
                raise ConfigError(f"{name} must be >= 1 for arch={self.arch!r}, got {value}")
            if name not in needs and value != 0:
                raise ConfigError(
                    f"{name}={value} but arch={self.arch!r} has no such stack; set {name}=0"
                )
        if self.arch != "encoder" and self.n_classes:
            raise ConfigError(
                f"n_classes is for arch='encoder' only; set n_classes=0 for {self.arch!r}"
            )
        if self.logits_bias and not self.has_decoder:
            raise ConfigError(
                "logits_bias needs an output head over the vocabulary; "
                "arch='encoder' has none: set logits_bias=false"
            )
        if self.share_embeddings and self.arch != "encoder-decoder":
            raise ConfigError(
                "share_embeddings shares one token embedding between an encoder and a decoder; "
                f"arch={self.arch!r} has one stack: set share_embeddings=false"
            )
        if self.arch == "encoder" and self.tie_embeddings:
            raise ConfigError(
                "tie_embeddings needs an output head over the vocabulary; "
                "arch='encoder' has none: set tie_embeddings=false"
            )

    def _check_modern(self) -> None:
        """The options of today's decoders: rotary positions, grouped K/V heads, gated FFN."""
        if self.n_kv_heads is not None:
            if self.n_kv_heads < 1:
                raise ConfigError(
                    f"n_kv_heads must be >= 1 (or None: n_heads), got {self.n_kv_heads}"
                )
            if self.n_heads % self.n_kv_heads:
                raise ConfigError(
                    f"n_kv_heads: n_heads={self.n_heads} is not divisible by "
                    f"n_kv_heads={self.n_kv_heads}; each group of query heads shares one key/value "
                    "head: choose a divisor of n_heads"
                )
        if self.d_ff == 0 and self.ffn_kind != "plain":
            raise ConfigError(
                f"ffn_kind={self.ffn_kind!r} needs an FFN, and d_ff=0 has none (attention only): "
                "set d_ff > 0 or ffn_kind=plain"
            )
        if not (math.isfinite(self.rope_theta) and self.rope_theta > 0):
            raise ConfigError(f"rope_theta must be a finite number > 0, got {self.rope_theta}")
        if not 0.0 < self.rope_fraction <= 1.0:
            raise ConfigError(f"rope_fraction must be in (0, 1], got {self.rope_fraction}")
        if self.positions != "rotary":
            for name, default in (("rope_theta", 10000.0), ("rope_fraction", 1.0)):
                if getattr(self, name) != default:
                    raise ConfigError(
                        f"{name} is for positions='rotary' only (this is "
                        f"positions={self.positions!r}): set positions=rotary or leave {name} at "
                        f"{default}"
                    )
        elif self.rope_dim < 2 or self.rope_dim % 2:
            raise ConfigError(
                f"rope_fraction: int(head_dim={self.head_dim} × rope_fraction={self.rope_fraction})"
                f" = {self.rope_dim} dimensions to rotate, but rotary turns them in pairs: choose "
                "head_dim or rope_fraction so that it is even (>= 2)"
            )

    # -- derived sizes -------------------------------------------------------------------------

    @property
    def has_encoder(self) -> bool:
        return self.arch in ("encoder-decoder", "encoder")

    @property
    def has_decoder(self) -> bool:
        return self.arch in ("encoder-decoder", "decoder")

    @property
    def lm_bias(self) -> bool:
        """Whether the output head has a bias (`lm_head.bias`)."""
        return self.has_decoder and (self.logits_bias or (self.bias and not self.tie_embeddings))

    @property
    def attn_dim(self) -> int:
        """H * D: the width of the concatenated heads (6 in the Random Transformer)."""
        return self.n_heads * self.head_dim

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads: n_kv_heads, or n_heads when it is None."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def kv_dim(self) -> int:
        """kv_heads * D: the width of K and V (attn_dim without grouped-query attention)."""
        return self.kv_heads * self.head_dim

    @property
    def has_qkv_bias(self) -> bool:
        """Whether Q, K and V have biases: qkv_bias, or `bias` when it is None."""
        return self.bias if self.qkv_bias is None else self.qkv_bias

    @property
    def rope_dim(self) -> int:
        """The dimensions of each head that rotary positions turn, the first ones (0 without)."""
        if self.positions != "rotary":
            return 0
        return int(self.head_dim * self.rope_fraction)

    def modern_options(self) -> list[str]:
        """`field=value` for each option set away from the classic transformer's (the articles',
        GPT-2's, BERT's, Marian's): what a format of that family cannot hold, for an exporter to
        name when it refuses the model. Options equal to the classic in effect are not listed
        (n_kv_heads = n_heads, qkv_bias = bias)."""
        out = []
        if self.positions == "rotary":
            out.append("positions='rotary'")
        for name, classic in (("norm_kind", "layernorm"), ("ffn_kind", "plain")):
            if getattr(self, name) != classic:
                out.append(f"{name}={getattr(self, name)!r}")
        if self.kv_heads != self.n_heads:
            out.append(f"n_kv_heads={self.n_kv_heads}")
        if self.has_qkv_bias != self.bias:
            out.append(f"qkv_bias={self.qkv_bias}")
        if self.d_ff == 0:
            out.append("d_ff=0")
        return out

    # -- serialisation -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Config:
        if not isinstance(data, dict):
            raise ConfigError(f"a config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"unknown config field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}"
            )
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Config:
        from glassformer.files import FileError, parse_json

        try:
            data = parse_json(text, "config")
        except FileError as e:
            raise ConfigError(str(e)) from None
        return cls.from_dict(data)

    def override(self, *assignments: str) -> Config:
        """A copy with `key=value` assignments applied, each value parsed by the field's type."""
        changes = parse_assignments(Config, assignments)
        return dataclasses.replace(self, **(self._rederive(changes) | changes))

    def _rederive(self, changes: dict) -> dict:
        """Derived fields that follow a change unless set explicitly: head_dim follows d_model and
        n_heads when it was their quotient; layer counts follow arch (0 for a stack it lacks); the
        rotary settings return to their defaults when positions stop being rotary."""
        out = {}
        if {
            "d_model",
            "n_heads",
        } & changes.keys() and self.head_dim == self.d_model // self.n_heads:
            out["head_dim"] = None
        if "arch" in changes:
            new = changes["arch"]
            has = {
                "n_encoder_layers": new in ("encoder-decoder", "encoder"),
                "n_decoder_layers": new in ("encoder-decoder", "decoder"),
            }
            for name, wanted in has.items():
                if not wanted:
                    out[name] = 0
                elif getattr(self, name) == 0:
                    out[name] = None
            if new != "encoder":
                out["n_classes"] = 0
            if new != "encoder-decoder":
                out["share_embeddings"] = False
        if changes.get("positions", "rotary") != "rotary":
            out |= {"rope_theta": 10000.0, "rope_fraction": 1.0}
        return out


def parse_assignments(cls, assignments) -> dict:
    """`key=value` strings -> {field: typed value} for dataclass `cls` (errors name the field)."""
    hints = typing.get_type_hints(cls)
    changes = {}
    for item in assignments:
        if not isinstance(item, str):  # override("d_model", 128) or override({"d_model": 128})
            raise ConfigError(
                f"expected key=value strings, for example 'd_model=128', got {item!r:.60}"
            )
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(
                f"{param(f'{cls.__name__}.override', text=repr(item))}: expected key=value, for "
                "example d_model=128"
            )
        if key not in hints:
            near = difflib.get_close_matches(key, list(hints), n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}? " if near else ""
            raise ConfigError(
                f"{param(f'{cls.__name__}.override', text=repr(item))}: unknown field {key!r}; "
                f"{hint}allowed: {', '.join(sorted(hints))}"
            )
        changes[key] = parse_value(key, raw.strip(), hints[key], cls.__name__)
    return changes


def parse_value(name: str, raw: str, hint, of: str = "Config") -> object:
    """Parse the text of a `name=raw` assignment (`of`.override's) by the field's annotated
    type."""
    said = param(f"{of}.override", f"{name}={raw}")
    args = typing.get_args(hint)
    if type(None) in args and raw.lower() in ("none", "null", ""):
        return None
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if typing.get_origin(base) is Literal or typing.get_origin(hint) is Literal:
        choices = typing.get_args(base if typing.get_origin(base) is Literal else hint)
        if raw not in choices:
            raise ConfigError(f"{said}: {name} must be one of {', '.join(choices)}")
        return raw
    if base is bool:
        low = raw.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{said}: {name} must be true or false")
    try:
        return base(raw)
    except ValueError:
        kind = {int: "an integer", float: "a number"}.get(base, base.__name__)
        raise ConfigError(f"{said}: {name} must be {kind}") from None


def check_type(name: str, value: object, hint) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        if not isinstance(value, str | int | float | bool) or value not in args:  # (an array: no)
            raise ConfigError(f"{name} must be one of {', '.join(map(repr, args))}, got {value!r}")
        return
    allowed = tuple(a for a in args) if args else (hint,)
    if value is None and type(None) in allowed:
        return
    if bool in allowed:
        ok = isinstance(value, bool)
    elif int in allowed:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:  # float
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        kind = {bool: "true or false", int: "an integer", float: "a number"}[allowed[0]]
        raise ConfigError(f"{name} must be {kind}, got {value!r}")


# -- presets ------------------------------------------------------------------------------------

PRESETS: dict[str, Config] = {
    # The Random Transformer's sizes: "Hello World" -> "Hola Mundo".
    "hello-world": Config(
        arch="encoder-decoder",
        vocab_size=10,
        d_model=4,
        n_heads=2,
        head_dim=3,
        d_ff=8,
        n_encoder_layers=6,
        n_decoder_layers=6,
        max_len=8,
        positions="sinusoidal",
        norm="post",
        activation="relu",
        bias=True,
        tie_embeddings=False,
        ln_eps=1e-6,
    ),
    # Vaswani et al. 2017, "base" model (shared 37k BPE vocabulary, tied embeddings).
    "transformer-base": Config(
        arch="encoder-decoder",
        vocab_size=37000,
        d_model=512,
        n_heads=8,
        d_ff=2048,
        n_encoder_layers=6,
        n_decoder_layers=6,
        max_len=512,
        positions="sinusoidal",
        norm="post",
        activation="relu",
        tie_embeddings=True,
    ),
    # GPT-2 small (124M parameters).
    "gpt2-small": Config(
        arch="decoder",
        vocab_size=50257,
        d_model=768,
        n_heads=12,
        d_ff=3072,
        n_decoder_layers=12,
        max_len=1024,
        positions="learned",
        norm="pre",
        activation="gelu_tanh",
        tie_embeddings=True,
    ),
    # nanoGPT's CPU configuration for character-level Shakespeare.
    "char-lm": Config(
        arch="decoder",
        vocab_size=65,
        d_model=128,
        n_heads=4,
        d_ff=512,
        n_decoder_layers=4,
        max_len=64,
        positions="learned",
        norm="pre",
        activation="gelu",
        bias=False,
        tie_embeddings=True,
    ),
    # An English->Spanish translator (the size of the project's peer script: 3+3 layers, d 256,
    # 4 heads, FFN 1024, joint 8k vocabulary). One embedding for source, target and output,
    # scaled by √d so that its rows are not drowned by the sinusoids (~0.7 a dimension); GELU,
    # which lowered the validation loss after 600 steps by 2.3% against ReLU (the peer's) at
    # either learning rate measured: the recipe measured best per step (docs/benchmarks.md,
    # "Quality"; benchmarks/translate_quality_per_step.py).
    "translator": Config(
        arch="encoder-decoder",
        vocab_size=8000,
        d_model=256,
        n_heads=4,
        d_ff=1024,
        n_encoder_layers=3,
        n_decoder_layers=3,
        max_len=64,
        positions="sinusoidal",
        norm="pre",
        activation="gelu",
        tie_embeddings=True,
        share_embeddings=True,
        embed_scale=True,
    ),
    # A small BERT-style encoder classifier.
    "encoder-classifier": Config(
        arch="encoder",
        vocab_size=256,
        d_model=64,
        n_heads=4,
        d_ff=256,
        n_encoder_layers=2,
        n_decoder_layers=0,
        max_len=128,
        positions="learned",
        norm="post",
        activation="gelu",
        n_classes=2,
    ),
    # A few-KB model of each stack, for tests and quick experiments.
    "tiny": Config(
        arch="decoder",
        vocab_size=64,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_decoder_layers=2,
        max_len=32,
    ),
}


def preset(name: str) -> Config:
    """The named preset; an error lists the names that exist."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):  # TypeError: a list, a dict (unhashable)
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None
