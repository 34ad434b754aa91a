"""Exercises 12 and 13: one encoder block with residuals, and cross-attention.

Data like `attention.py`: the article's numbers first (its E, hand-written heads and printed W_O;
its decoder row and the encoder output it assumes), then seeded random inputs whose values the
reference engine's trace gives.
"""

from __future__ import annotations

import numpy as np

from glassformer import reference as R
from glassformer.config import Config
from glassformer.exercises.base import (
    RT,
    SEED_002,
    Case,
    Exercise,
    Mistake,
    Part,
    case,
    from_ref,
    hello_world,
    rng,
    step_of,
    traced,
)
from glassformer.exercises.heads import (
    article_heads,
    heads_attention,
    heads_params,
    random_heads,
    reference_heads,
)
from glassformer.exercises.layers import UNBIASED, ffn_params, layer_norm_rows, random_ffn

# T: tokens  S: encoder tokens  C: d_model  H: heads  D: head dim  F: d_ff

# The encoder output the article assumes for its encoder-decoder attention (shared/golden rt_07,
# decoder.assumed_encoder_output): it does not compute it.
ASSUMED_ENCODER_OUTPUT = np.array([[-1.5, 1.0, -0.8, 1.5], [1.0, -1.0, -0.5, 1.0]])


# -- 12. one encoder block with residuals -------------------------------------------------------


def _block_reference(X, heads, W_O, W1, b1, W2, b2, eps) -> np.ndarray:
    """The reference encoder block (post-LN, γ = 1, β = 0, no attention biases), from its trace."""
    H, (C, D), F = len(heads), np.asarray(heads[0][0]).shape, np.asarray(W1).shape[1]
    cfg = Config(arch="encoder", d_model=C, n_heads=H, head_dim=D, d_ff=F, ln_eps=eps)
    pre = "encoder.layers.0"
    p = heads_params(f"{pre}.self_attn", heads, W_O) | ffn_params(f"{pre}.ffn", W1, b1, W2, b2)
    for w in "qkvo":
        p[f"{pre}.self_attn.{w}.bias"] = np.zeros(C if w == "o" else H * D)
    for k in (1, 2):
        p[f"{pre}.norm{k}.weight"], p[f"{pre}.norm{k}.bias"] = np.ones(C), np.zeros(C)
    return traced("out", R.encoder_block, p, 0, X, None, cfg)


def _block_cases() -> list[Case]:
    hw, g = hello_world(), rng(12)
    E = step_of(hw, "encoder_input.E")
    ffn = random_ffn(g, 4, 8)
    args = (E, article_heads(), step_of(hw, "W_O"), *ffn)
    out = [
        case(
            "the article's E, heads and W_O, seeded FFN weights, ε = 1e-6",
            args,
            "out",
            _block_reference(*args, 1e-6),
            from_ref("out", "encoder_block"),
            eps=1e-6,
        )
    ]
    for T, C, H, D, F in ((3, 4, 2, 3, 8), (5, 6, 3, 2, 12), (2, 8, 2, 4, 16)):
        args = (g.standard_normal((T, C)), random_heads(g, C, H, D), g.standard_normal((H * D, C)))
        args += random_ffn(g, C, F)
        title = f"random X ({T}, {C}), {H} heads of {D}, d_ff {F}"
        Y = _block_reference(*args, 1e-5)
        out.append(case(title, args, "out", Y, from_ref("out", "encoder_block")))
    return out


def _block(change: str):
    def fn(X, heads, W_O, W1, b1, W2, b2, eps=1e-5):
        ddof = 1 if change == "unbiased" else 0

        def norm(x):
            return x if change == "one_norm" else layer_norm_rows(x, eps=eps, ddof=ddof)

        def attn(x):
            return (
                heads_attention(x, x, heads, None, "d_model" if change == "d_model" else "") @ W_O
            )

        def ff(x):
            return R.relu(x @ W1 + b1) @ W2 + b2

        if change == "pre":
            Y = X + attn(layer_norm_rows(X, eps=eps))
            return Y + ff(layer_norm_rows(Y, eps=eps))
        if change == "no_residual":
            Y = layer_norm_rows(attn(X), eps=eps)
            return layer_norm_rows(ff(Y), eps=eps)
        if change == "after_norm":
            Y = layer_norm_rows(attn(X), eps=eps) + X
            return layer_norm_rows(ff(Y), eps=eps) + Y
        Y = layer_norm_rows(X + attn(X), eps=eps, ddof=ddof)
        return norm(Y + ff(Y))

    return fn


ENCODER_BLOCK = Exercise(
    number=12,
    slug="encoder_block",
    title="One encoder block with residuals",
    article=RT,
    function="encoder_block",
    params="X, heads, W_O, W1, b1, W2, b2, eps=1e-5",
    summary="One encoder block of the article: attention and FFN, each with residual + LayerNorm.",
    equation="Y   = LayerNorm(X + MultiHead(X))      (exercise 7, scores ÷ √d_head)\n"
    "out = LayerNorm(Y + FFN(Y))            (exercise 11)\n"
    "LayerNorm: exercise 9 with γ = 1, β = 0 (post-LN: the norm after each residual sum)",
    passage="« Une connexion résiduelle consiste à ajouter l’entrée d’une couche à sa sortie » ;\n"
    "« Après ajout des connexions résiduelles et de la layer normalization, les 6 encodeurs\n"
    f"produisent des valeurs normales sans nan » ({SEED_002})\n"
    "(a residual connection adds a layer's input to its output; with residuals and layer\n"
    "norm, six encoder blocks give normal values, without NaN.)",
    shapes="X        (T, d_model)\n"
    "heads    a list of H (WQ, WK, WV), each (d_model, d_head); W_O (H·d_head, d_model)\n"
    "W1, b1, W2, b2  the FFN's, as in exercise 11\n"
    "eps      float  LayerNorm's ε\nreturns  (T, d_model)",
    parts=(Part("out", "the block's output LayerNorm(Y + FFN(Y))"),),
    cases=_block_cases,
    mistakes=(
        Mistake(
            "no residual connections",
            "add each sublayer's input to its output before the norm: LayerNorm(x + f(x))",
            _block("no_residual"),
            "add1",
        ),
        Mistake(
            "pre-LN instead of the article's post-LN",
            "x + f(LayerNorm(x)) is GPT-2's order; the article normalises after the residual "
            "sum: LayerNorm(x + f(x))",
            _block("pre"),
            "norm1",
        ),
        Mistake(
            "the residual added after the norm",
            "the sum comes first, then the norm: LayerNorm(x + f(x)), not LayerNorm(f(x)) + x",
            _block("after_norm"),
            "add1",
        ),
        Mistake(
            "the second LayerNorm left out",
            "the FFN sublayer has its own residual + LayerNorm: out = LayerNorm(Y + FFN(Y))",
            _block("one_norm"),
            "norm2",
        ),
        Mistake("LayerNorm with the unbiased variance", UNBIASED, _block("unbiased"), "norm1"),
        Mistake(
            "scaled by √d_model instead of √d_head",
            "each head divides its scores by √d_head, its keys' dimension",
            _block("d_model"),
            "head.scaled",
        ),
    ),
    fallback="compare each sublayer: the attention Z, X + Z, its LayerNorm Y, FFN(Y), Y + FFN(Y)",
)

# -- 13. cross-attention ------------------------------------------------------------------------


def _cross_cases() -> list[Case]:
    hw, g = hello_world(), rng(13)
    Y, M = step_of(hw, "decoder.article.self_ln"), ASSUMED_ENCODER_OUTPUT
    heads, W_O = article_heads(), step_of(hw, "W_O")
    out = [
        case(
            "the article's decoder row of SOS and the encoder output it assumes",
            (Y, M, heads, W_O),
            "Z",
            reference_heads(Y, M, heads, W_O),
            from_ref("Z", "multi_head_attention"),
        )
    ]
    for T, S, C, H, D in ((3, 5, 4, 2, 3), (4, 4, 6, 3, 2), (1, 6, 8, 2, 4)):
        Y, M = g.standard_normal((T, C)), g.standard_normal((S, C))
        hs, W_O = random_heads(g, C, H, D), g.standard_normal((H * D, C))
        title = f"random Y ({T}, {C}), M ({S}, {C}), {H} heads of {D}"
        Z = reference_heads(Y, M, hs, W_O)
        out.append(case(title, (Y, M, hs, W_O), "Z", Z, from_ref("Z", "multi_head_attention")))
    return out


def _cross(change: str):
    def fn(Y, M, heads, W_O):
        if change == "self":
            return heads_attention(Y, Y, heads) @ W_O
        mask = np.tri(len(Y), len(M), dtype=bool) if change == "causal" else None
        return heads_attention(Y, M, heads, None, change, mask=mask) @ W_O

    return fn


CROSS_ATTENTION = Exercise(
    number=13,
    slug="cross_attention",
    title="Cross-attention, the encoder-decoder attention",
    article=RT,
    function="cross_attention",
    params="Y, M, heads, W_O",
    summary="Encoder-decoder attention: the decoder's queries against the encoder's keys and "
    "values.",
    equation="C_h = softmax(Q_h·K_hᵀ / √d_head)·V_h,  Q_h = Y·WQ_h,  K_h = M·WK_h,  V_h = M·WV_h\n"
    "Z = concat(C_1, ..., C_H)·W_O   (no mask: every decoder token sees every source token)",
    passage="« les query sont calculées à partir de la sortie de la couche précédente du\n"
    "décodeur », « les key et value sont calculées à partir de la sortie de l’encodeur »\n"
    f"({SEED_002})\n"
    "(queries from the decoder's previous sublayer, keys and values from the encoder output.)",
    shapes="Y        (T, d_model)  the decoder's tokens (the previous sublayer's output)\n"
    "M        (S, d_model)  the encoder output (the memory)\n"
    "heads    a list of H (WQ, WK, WV), each (d_model, d_head); W_O (H·d_head, d_model)\n"
    "returns  (T, d_model)  Z, one row per decoder token",
    parts=(Part("Z", "the cross-attention output Z"),),
    cases=_cross_cases,
    mistakes=(
        Mistake(
            "queries from the encoder, keys and values from the decoder",
            "the decoder asks (Q = Y·WQ) and the encoder answers (K = M·WK, V = M·WV)",
            _cross("swap"),
            "head.Q",
        ),
        Mistake(
            "self-attention on Y: the encoder output M is not used",
            "keys and values come from the encoder output M, not from Y",
            _cross("self"),
            "head.K",
        ),
        Mistake(
            "values from the decoder",
            "both keys and values come from M: V = M·WV",
            _cross("values_from_queries"),
            "head.V",
        ),
        Mistake(
            "a causal mask on cross-attention",
            "cross-attention is not masked: every decoder position may see every encoder position",
            _cross("causal"),
            "head.A",
        ),
        Mistake(
            "scaled by √d_model instead of √d_head",
            "each head divides its scores by √d_head, its keys' dimension",
            _cross("d_model"),
            "head.scaled",
        ),
    ),
    error_hint="K = M·WK and V = M·WV come from the encoder output (S rows), Q = Y·WQ from "
    "the decoder (T rows)",
    fallback="compare with the steps decoder.0.cross_attn.head0.Q, .K, .V, .A and "
    "decoder.0.cross_attn.Z of glassformer explain on an encoder-decoder model",
)

EXERCISES = (ENCODER_BLOCK, CROSS_ATTENTION)
