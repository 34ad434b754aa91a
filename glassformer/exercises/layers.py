"""Exercises 8-11: sinusoidal positions (both layouts), layer norm (the textbook's formula and the
article's code), and the FFN.

Data like `attention.py`: the article's numbers first (the hello-world walkthrough's recorded
steps), then seeded random inputs whose values the reference engine's trace gives.
"""

from __future__ import annotations

import numpy as np

from glassformer import reference as R
from glassformer.config import Config
from glassformer.exercises.base import (
    RT,
    SEED_002,
    WALK_RT,
    Case,
    Exercise,
    Mistake,
    Part,
    case,
    from_ref,
    from_walk,
    hello_world,
    rng,
    step_of,
    traced,
)
from glassformer.walkthrough.random_transformer import article_layer_norm, article_positions

# T: tokens  C: d_model  F: d_ff

# -- 8. sinusoidal positions --------------------------------------------------------------------


def _positions_cases() -> list[Case]:
    hw = hello_world()
    out = [
        case(
            "the article's sizes: 2 tokens, d_model 4",
            (2, 4),
            "PE",
            step_of(hw, "positions.standard"),
            from_walk("positions.standard", WALK_RT),
        )
    ]
    for T, C, split in ((6, 4, False), (4, 8, False), (5, 5, False), (5, 6, True), (3, 8, True)):
        layout = "split" if split else "interleaved"
        PE = R.sinusoidal_positions(T, C, split=split)
        title = f"{T} positions, d_model {C}, {layout}"
        kw = {"split": True} if split else {}
        out.append(case(title, (T, C), "PE", PE, "reference.sinusoidal_positions", **kw))
    return out


def _swapped(T, C, split=False):
    P = R.sinusoidal_positions(T, C + C % 2, split=False)  # even width: cos beside every sin
    P = P.reshape(T, -1, 2)[:, :, ::-1].reshape(T, -1)[:, :C]  # cos on even, sin on odd
    return P


def _pair_index_halved(T, C, split=False):
    pos = np.arange(T, dtype=np.float64)[:, None]
    i = np.arange(0, C, 2, dtype=np.float64) / 2  # the pair index i, where 2i was meant
    angle = pos / 10000.0 ** (i / C)
    P = np.zeros((T, C))
    P[:, 0::2], P[:, 1::2] = np.sin(angle), np.cos(angle[:, : C // 2])
    return P


POSITIONS = Exercise(
    number=8,
    slug="positions",
    title="Sinusoidal positions, interleaved and split",
    article=RT,
    function="sinusoidal_positions",
    params="T, C, split=False",
    summary="The sinusoidal position table PE, in the interleaved or the split layout.",
    equation="PE(pos, 2i) = sin(pos / 10000^(2i/C)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/C))\n"
    "split=True: the same sines in the first ceil(C/2) columns, the cosines after them\n"
    "(Marian's layout; the angles are the same)",
    passage="« L’article original utilise un encodage positionnel fixe en sinus/cosinus, et\n"
    f"l’exemple suit la même approche » ; « World -> [0.84, 0.99, 0, 1] » ({SEED_002})\n"
    "(the article uses the original paper's sine/cosine positions; but its printed values for\n"
    "World put the dimension index j, not the pair index 2i, in the exponent: the standard\n"
    "formula gives [0.841, 0.540, 0.010, 1.000]; shared/golden README, pitfalls.)",
    shapes="T        int     the number of positions (0 .. T-1)\n"
    "C        int     d_model (may be odd: then one more sine than cosines)\n"
    "split    bool    False: sin on even columns, cos on odd; True: all sines, then all cosines\n"
    "returns  (T, C)  PE",
    parts=(Part("PE", "the position table PE"),),
    cases=_positions_cases,
    mistakes=(
        Mistake(
            "the dimension index j in the exponent, not the pair index 2i",
            "that is how the article's printed table was made (World -> [0.84, 0.99, 0, 1]): "
            "dimensions 2i and 2i+1 share one angle, pos / 10000^(2i/C)",
            lambda T, C, split=False: article_positions(T, C),
            "angle",
        ),
        Mistake(
            "sin/cos interleaved where split=True asks for them split",
            "split=True puts every sine first (columns 0 .. ceil(C/2)-1), then every cosine",
            lambda T, C, split=False: R.sinusoidal_positions(T, C),
            "layout",
        ),
        Mistake(
            "sin/cos split where they should be interleaved",
            "split=False interleaves them: sin in the even columns, cos in the odd ones",
            lambda T, C, split=False: R.sinusoidal_positions(T, C, split=True),
            "layout",
        ),
        Mistake(
            "sin and cos swapped",
            "the even dimensions (2i) take the sine, the odd ones (2i+1) the cosine",
            _swapped,
            "layout",
        ),
        Mistake(
            "10000^(i/C) instead of 10000^(2i/C)",
            "the exponent is 2i/C with i the pair index: 0, 2/C, 4/C ... for the columns 0, 2, 4",
            _pair_index_halved,
            "angle",
        ),
    ),
    fallback="compare with positions.standard of glassformer walkthrough hello-world and with "
    "glassformer.reference.sinusoidal_positions",
)

# -- 9, 10. layer norm: the textbook's formula and the article's code ---------------------------


def _norm_inputs(g) -> list[tuple[str, np.ndarray]]:
    return [
        ("random rows (3, 6)", 4 * g.standard_normal((3, 6)) + 1),
        ("rows of small spread (4, 5), where ε matters", 1e-3 * g.standard_normal((4, 5)) + 2),
        ("random (2, 3, 4): the norm runs over the last axis", g.standard_normal((2, 3, 4))),
        ("one token, d_model 8", g.standard_normal((1, 8))),
    ]


def _layer_norm_cases() -> list[Case]:
    hw, g = hello_world(), rng(9)
    EZ = step_of(hw, "residual.E_plus_Z")
    out = [
        case(
            "the article's E + Z, γ = 1, β = 0, ε = 1e-6",
            (EZ, np.ones(4), np.zeros(4)),
            "y",
            step_of(hw, "residual.layernorm.out"),
            from_walk("residual.layernorm.out", WALK_RT),
            eps=1e-6,
        )
    ]
    for title, x in _norm_inputs(g):
        C = x.shape[-1]
        gamma, beta = 1 + 0.5 * g.standard_normal(C), g.standard_normal(C)
        y = traced("out", R.layer_norm, x, gamma, beta, 1e-5)
        out.append(case(title, (x, gamma, beta), "y", y, from_ref("out", "layer_norm")))
    return out


def layer_norm_rows(x, gamma=None, beta=None, eps=1e-5, ddof=0, inside=True, axis=-1):
    mu = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True, ddof=ddof)
    y = (x - mu) / (np.sqrt(var + eps) if inside else np.sqrt(var) + eps)
    return y if gamma is None else y * gamma + beta


UNBIASED = (
    "LayerNorm uses the population variance, Σ(x - μ)² / C (np.var's default, ddof=0), not the "
    "unbiased Σ(x - μ)² / (C - 1) (torch.var's and torch.std's default)"
)
LAYER_NORM = Exercise(
    number=9,
    slug="layernorm",
    title="Layer norm, the textbook's formula",
    article=RT,
    function="layer_norm",
    params="x, gamma, beta, eps=1e-5",
    summary="Layer normalization of each row of x (the formula of the article's text).",
    equation="LayerNorm(x) = (x - μ) / √(σ² + ε) · γ + β\n"
    "μ and σ² over each row (the last axis); σ² the population variance",
    passage="The formula, LayerNorm(x) = (x - μ) / √(σ² + ε) × γ + β (its LaTeX, rewritten); ε\n"
    "« est une petite valeur utilisée pour éviter une division par 0 lorsque l’écart type vaut\n"
    "0 », γ and β « sont des paramètres appris qui contrôlent la mise à l’échelle et le\n"
    f"décalage » ({SEED_002})\n"
    "(ε is a small value that avoids dividing by 0 when the standard deviation is 0; γ and β\n"
    "are learned parameters for the scale and the shift.)",
    shapes="x        (..., C)  normalised over the last axis\n"
    "gamma    (C,)      the scale γ\nbeta     (C,)      the shift β\n"
    "eps      float     ε, inside the square root\nreturns  (..., C)",
    parts=(Part("y", "the normalised rows (x - μ) / √(σ² + ε)·γ + β"),),
    cases=_layer_norm_cases,
    mistakes=(
        Mistake(
            "the unbiased variance (C - 1)",
            UNBIASED,
            lambda x, g, b, eps=1e-5: layer_norm_rows(x, g, b, eps, ddof=1),
            "σ²",
        ),
        Mistake(
            "ε added to the standard deviation, not the variance",
            "that is the article's code, (x - μ) / (σ + ε) (exercise 10); the formula puts ε "
            "inside the square root: √(σ² + ε). They differ where a row's spread is small",
            lambda x, g, b, eps=1e-5: layer_norm_rows(x, g, b, eps, inside=False),
            "std",
        ),
        Mistake(
            "normalised over the wrong axis (over the tokens)",
            "μ and σ² are taken over each row, the d_model values of one token (axis=-1, "
            "keepdims=True)",
            lambda x, g, b, eps=1e-5: layer_norm_rows(x, g, b, eps, axis=0),
            "mean",
        ),
        Mistake(
            "γ and β left out",
            "scale by γ and shift by β after normalising: x̂·γ + β",
            lambda x, g, b, eps=1e-5: layer_norm_rows(x, eps=eps),
            "out",
        ),
        Mistake(
            "ε left out",
            "add ε to the variance under the square root: √(σ² + ε)",
            lambda x, g, b, eps=1e-5: layer_norm_rows(x, g, b, 0.0),
            "std",
        ),
        Mistake(
            "divided by the variance, not the standard deviation",
            "divide by √(σ² + ε), the square root of the variance",
            lambda x, g, b, eps=1e-5: (
                (x - x.mean(-1, keepdims=True)) / (x.var(-1, keepdims=True) + eps) * g + b
            ),
            "std",
        ),
    ),
    fallback="compare with residual.layernorm.mean, .std, .normalized and .out of glassformer "
    "walkthrough hello-world",
)


def _article_norm_cases() -> list[Case]:
    hw, g = hello_world(), rng(10)
    out = [
        case(
            "the article's E + Z",
            (step_of(hw, "residual.E_plus_Z"),),
            "y",
            step_of(hw, "residual.layernorm_article"),
            from_walk("residual.layernorm_article", WALK_RT),
        )
    ]
    flat = np.array([[3.0, 3.0, 3.0, 3.0], [1.0, -2.0, 0.5, 4.0]])
    inputs = _norm_inputs(g) + [("a constant row, σ = 0, beside a random one", flat)]
    for title, x in inputs:
        out.append(case(title, (x,), "y", article_layer_norm(x), "the article's layer_norm code"))
    return out


ARTICLE_LAYER_NORM = Exercise(
    number=10,
    slug="layernorm_article",
    title="Layer norm, the article's code",
    article=RT,
    function="article_layer_norm",
    params="x, eps=1e-6",
    summary="Layer normalization as the article's code computes it: (x - mean) / (std + eps).",
    equation="y = (x - μ) / (σ + ε)   σ the population standard deviation of each row, no γ, β\n"
    "(the text's formula puts ε under the square root: √(σ² + ε); exercise 9)",
    passage="« La layer normalization normalise chaque dimension d’embedding pour obtenir une\n"
    f"moyenne de 0 et un écart type de 1 » ({SEED_002})\n"
    "(each row to mean 0 and standard deviation 1. The article's code is\n"
    "(x - mean) / (std + 1e-6) with NumPy's population std; its text's formula differs by\n"
    "< 1e-7 on its example: shared/golden rt_05, layernorm_as_coded.)",
    shapes="x        (..., C)  normalised over the last axis\n"
    "eps      float     ε, added to the standard deviation\nreturns  (..., C)",
    parts=(Part("y", "the normalised rows (x - μ) / (σ + ε)"),),
    cases=_article_norm_cases,
    mistakes=(
        Mistake(
            "ε under the square root (the text's formula)",
            "that is the textbook LayerNorm of exercise 9, √(σ² + ε); the article's code adds ε "
            "to the standard deviation: (x - μ) / (σ + ε)",
            lambda x, eps=1e-6: layer_norm_rows(x, eps=eps),
            "std",
        ),
        Mistake(
            "the unbiased standard deviation (C - 1)",
            "the article's np.std is the population one (ddof=0); torch.std's default is "
            "unbiased (C - 1)",
            lambda x, eps=1e-6: layer_norm_rows(x, eps=eps, inside=False, ddof=1),
            "std",
        ),
        Mistake(
            "normalised over the wrong axis (over the tokens)",
            "the mean and std are over each row: axis=-1, keepdims=True",
            lambda x, eps=1e-6: layer_norm_rows(x, eps=eps, inside=False, axis=0),
            "mean",
        ),
        Mistake(
            "ε left out",
            "add ε to the standard deviation: a constant row has σ = 0",
            lambda x, eps=1e-6: layer_norm_rows(x, eps=0.0, inside=False),
            "std",
        ),
    ),
    fallback="compare with residual.mean, residual.std and residual.layernorm_article of "
    "glassformer walkthrough hello-world",
)

# -- 11. the FFN --------------------------------------------------------------------------------


def ffn_params(name: str, W1, b1, W2, b2) -> dict[str, np.ndarray]:
    """The article's x·W1 matrices in the engine's (out, in) layout."""
    return {
        f"{name}.w1.weight": np.asarray(W1).T,
        f"{name}.w1.bias": np.asarray(b1),
        f"{name}.w2.weight": np.asarray(W2).T,
        f"{name}.w2.bias": np.asarray(b2),
    }


def random_ffn(g, C: int, F: int) -> tuple[np.ndarray, ...]:
    W1, b1 = g.standard_normal((C, F)), g.standard_normal(F)
    return W1, b1, g.standard_normal((F, C)), g.standard_normal(C)


def _ffn_cases() -> list[Case]:
    hw, g = hello_world(), rng(11)
    out = []
    E = step_of(hw, "encoder_input.E")
    inputs = [("the article's E and sizes, 4 -> 8 -> 4, seeded weights", E, 8)]
    for T, C, F in ((3, 5, 7), (1, 4, 6), (6, 3, 12)):
        inputs.append((f"random x ({T}, {C}), d_ff {F}", g.standard_normal((T, C)), F))
    for title, x, F in inputs:
        W = random_ffn(g, x.shape[-1], F)
        cfg = Config(d_model=x.shape[-1], n_heads=1, d_ff=F)
        y = traced("out", R.ffn, ffn_params("ffn", *W), "ffn", x, cfg)
        out.append(case(title, (x, *W), "y", y, from_ref("out", "ffn")))
    return out


FFN = Exercise(
    number=11,
    slug="ffn",
    title="The feed-forward network",
    article=RT,
    function="ffn",
    params="x, W1, b1, W2, b2",
    summary="The position-wise feed-forward network: two linear maps with a ReLU between.",
    equation="FFN(x) = ReLU(x·W1 + b1)·W2 + b2,  ReLU(z) = max(z, 0)",
    passage="« Le FFN se compose de deux transformations linéaires avec une activation ReLU\n"
    "entre les deux » ; « La première couche linéaire augmente la dimension, et la seconde la\n"
    f"ramène à sa taille d’origine » ({SEED_002})\n"
    "(two linear maps with a ReLU between; the first widens d_model to d_ff, the second\n"
    "brings it back.)",
    shapes="x        (T, d_model)\nW1       (d_model, d_ff)   used as x·W1\nb1       (d_ff,)\n"
    "W2       (d_ff, d_model)\nb2       (d_model,)\nreturns  (T, d_model)",
    parts=(Part("y", "the FFN output ReLU(x·W1 + b1)·W2 + b2"),),
    cases=_ffn_cases,
    mistakes=(
        Mistake(
            "no ReLU",
            "the non-linearity between the two maps: max(x·W1 + b1, 0)",
            lambda x, W1, b1, W2, b2: (x @ W1 + b1) @ W2 + b2,
            "hidden",
        ),
        Mistake(
            "a ReLU after the second layer too",
            "only the hidden layer goes through the ReLU; the output x·W2 + b2 may be negative",
            lambda x, W1, b1, W2, b2: np.maximum(R.relu(x @ W1 + b1) @ W2 + b2, 0),
            "out",
        ),
        Mistake(
            "b1 added after the ReLU",
            "the bias comes before the non-linearity: ReLU(x·W1 + b1)",
            lambda x, W1, b1, W2, b2: (R.relu(x @ W1) + b1) @ W2 + b2,
            "hidden",
        ),
        Mistake(
            "b1 left out",
            "add the first bias: x·W1 + b1",
            lambda x, W1, b1, W2, b2: R.relu(x @ W1) @ W2 + b2,
            "hidden",
        ),
        Mistake(
            "b2 left out",
            "add the second bias: ... ·W2 + b2",
            lambda x, W1, b1, W2, b2: R.relu(x @ W1 + b1) @ W2,
            "out",
        ),
    ),
    fallback="compare your hidden layer ReLU(x·W1 + b1) (T, d_ff) before the second product",
)

EXERCISES = (POSITIONS, LAYER_NORM, ARTICLE_LAYER_NORM, FFN)
