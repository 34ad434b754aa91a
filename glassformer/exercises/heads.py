"""Exercises 6 and 7: dropout on the attention weights, and multi-head attention with W_O; and
the multi-head helpers that the encoder block and cross-attention (`blocks.py`) reuse: the
per-head matrices in the engine's layout, the reference's Z, and the heads' typical changes.

Data like `attention.py`: the article's numbers first, then seeded random inputs.
"""

from __future__ import annotations

import math

import numpy as np

from glassformer import reference as R
from glassformer.config import Config
from glassformer.exercises.base import (
    RASCHKA,
    RT,
    SEED_002,
    WALK_R,
    WALK_RT,
    Case,
    Exercise,
    Mistake,
    Part,
    case,
    chapter3,
    from_ref,
    from_walk,
    hello_world,
    rng,
    step_of,
    traced,
)

# T: tokens (queries)  S: tokens (keys)  D: head dim  C: d_model  H: heads


# -- 6. dropout on the attention weights --------------------------------------------------------


def _dropout_cases() -> list[Case]:
    tr, g = chapter3(), rng(6)
    keep = step_of(tr, "dropout.mask")
    out = [
        case(
            "the book's 6 × 6 matrix of ones, p = 0.5",
            (np.ones((6, 6)), keep, 0.5),
            "A",
            step_of(tr, "dropout.ones"),
            from_walk("dropout.ones", WALK_R),
        ),
        case(
            "the book's causal weights, p = 0.5",
            (step_of(tr, "causal.A"), keep, 0.5),
            "A",
            step_of(tr, "dropout.A"),
            from_walk("dropout.A", WALK_R),
        ),
    ]
    for shape, p in (((5, 5), 0.1), ((3, 5), 0.25), ((4, 4), 0.8), ((2, 3), 0.0)):
        A = R.softmax(g.standard_normal(shape))
        m = (g.random(shape) >= p).astype(np.float64)
        m.flat[0] = 1.0  # at least one weight kept
        title = f"random weights {shape}, p = {p}"
        # the book's dropout, as the walkthrough records it (step dropout.A)
        out.append(case(title, (A, m, p), "A", A * m / (1 - p), "the book's x ⊙ m / (1 - p)"))
    return out


DROPOUT = Exercise(
    number=6,
    slug="dropout",
    title="Dropout on the attention weights",
    article=RASCHKA,
    function="dropout",
    params="A, keep, p",
    summary="Dropout on the attention weights, with the keep mask given (training only).",
    equation="dropout(A) = A ⊙ m / (1 - p)   (m_ij = 1 kept, 0 dropped; P(dropped) = p)",
    passage="Not in the seed's summary: the book, section 3.5.2, applies nn.Dropout(0.5) to the\n"
    "causal weights; kept weights are scaled by 1 / (1 - p) = 2 and dropped ones become 0, so\n"
    "that the expected value of each weight is unchanged (shared/golden raschka_05_dropout).",
    shapes="A        (T, S)  the attention weights\n"
    "keep     (T, S)  the mask m: 1.0 where a weight is kept, 0.0 where it is dropped\n"
    "p        float   the dropout probability, 0 <= p < 1\n"
    "returns  (T, S)  the weights after dropout",
    notes="The mask is given so that the result is exact: torch's random draws differ across\n"
    "platforms, so the book's printed mask is used (dropout.mask in the walkthrough).",
    parts=(Part("A", "the weights after dropout, A ⊙ m / (1 - p)"),),
    cases=_dropout_cases,
    mistakes=(
        Mistake(
            "dropout not rescaled by 1/(1-p)",
            "the kept weights must grow by 1 / (1 - p) so that each weight keeps its expected "
            "value (the book's ones become 2 at p = 0.5)",
            lambda A, m, p: A * m,
            "dropout",
        ),
        Mistake(
            "scaled by 1/p instead of 1/(1-p)",
            "p is the probability of dropping; the kept fraction is 1 - p: divide by 1 - p "
            "(the two agree only at p = 0.5)",
            lambda A, m, p: A * m / p,
            "dropout",
        ),
        Mistake(
            "multiplied by (1-p) instead of dividing",
            "divide the kept weights by 1 - p: they grow, to make up for the dropped ones",
            lambda A, m, p: A * m * (1 - p),
            "dropout",
        ),
        Mistake(
            "the mask inverted",
            "keep = 1 marks a weight that is kept: multiply by keep, not by 1 - keep",
            lambda A, m, p: A * (1 - m) / (1 - p),
            "mask",
        ),
        Mistake(
            "rows renormalised after dropout",
            "dropout does not renormalise: after it a row no longer sums to 1, as the book shows",
            lambda A, m, p: (A * m) / np.maximum((A * m).sum(-1, keepdims=True), 1e-300),
            "dropout",
        ),
    ),
    fallback="compare with the steps dropout.mask, dropout.ones and dropout.A of glassformer "
    "walkthrough self-attention",
)

# -- 7. multi-head attention with W_O -----------------------------------------------------------


def heads_params(name: str, heads, W_O) -> dict[str, np.ndarray]:
    """The per-head (C, D) matrices used as X·W, in the engine's layout: (H·D, C) stored (out,
    in), head h in rows h·D:(h+1)·D; W_O (H·D, C) stored as its transpose."""
    p = {f"{name}.{w}.weight": np.concatenate([h[i].T for h in heads]) for i, w in enumerate("qkv")}
    p[f"{name}.o.weight"] = np.asarray(W_O).T
    return p


def heads_config(heads, **kw) -> Config:
    C, D = np.asarray(heads[0][0]).shape
    return Config(d_model=C, n_heads=len(heads), head_dim=D, bias=False, **kw)


def reference_heads(X, Xkv, heads, W_O) -> np.ndarray:
    """Z of the reference engine's multi-head attention, from its trace."""
    p, cfg = heads_params("mha", heads, W_O), heads_config(heads)
    return traced("Z", R.multi_head_attention, p, "mha", X, Xkv, None, cfg)


def article_heads() -> list[tuple[np.ndarray, ...]]:
    hw = hello_world()
    return [tuple(step_of(hw, f"{h}.W{w}") for w in "QKV") for h in ("head1", "head2")]


def random_heads(g, C: int, H: int, D: int) -> list[tuple[np.ndarray, ...]]:
    return [tuple(g.standard_normal((C, D)) for _ in range(3)) for _ in range(H)]


def _mha_cases() -> list[Case]:
    hw, g = hello_world(), rng(7)
    E, heads, W_O = step_of(hw, "encoder_input.E"), article_heads(), step_of(hw, "W_O")
    out = [
        case(
            "the article's 'Hello World' with its ÷30, scale=30",
            (E, heads, W_O),
            "Z",
            step_of(hw, "div30.Z"),
            from_walk("div30.Z", WALK_RT),
            scale=30.0,
        ),
        case(
            "the article's 'Hello World', scaled by √3",
            (E, heads, W_O),
            "Z",
            reference_heads(E, E, heads, W_O),
            from_ref("Z", "multi_head_attention"),
        ),
    ]
    for T, C, H, D in ((3, 4, 2, 3), (5, 6, 3, 2), (4, 8, 4, 2), (2, 5, 1, 4)):
        X, hs = g.standard_normal((T, C)), random_heads(g, C, H, D)
        W_O = g.standard_normal((H * D, C))
        title = f"random X ({T}, {C}), {H} head{'s' * (H > 1)} of {D}"
        Z = reference_heads(X, X, hs, W_O)
        out.append(case(title, (X, hs, W_O), "Z", Z, from_ref("Z", "multi_head_attention")))
    return out


def heads_attention(X, Xkv, heads, scale=None, change: str = "", mask=None) -> np.ndarray:
    """concat(C_1..C_H) with one of the typical changes (the mistakes of exercises 7, 12, 13)."""
    order = list(reversed(heads)) if change == "reversed" else list(heads)
    if change == "first_only":
        order = [heads[0]] * len(heads)
    outs = []
    for WQ, WK, WV in order:
        Q, K, V = X @ WQ, Xkv @ WK, Xkv @ WV
        if change == "swap":
            Q, K, V = Xkv @ WQ, X @ WK, X @ WV
        if change == "values_from_queries":
            V = X @ WV
        c = scale or math.sqrt(X.shape[-1] if change == "d_model" else K.shape[-1])
        if change == "ignore_scale":
            c = math.sqrt(K.shape[-1])
        outs.append(R.attention(Q, K, V, mask=mask, scale=c))
    return np.concatenate(outs, axis=-1)


def _mha(change: str):
    def fn(X, heads, W_O, scale=None):
        concat = heads_attention(X, X, heads, scale, change)
        return concat if change == "no_W_O" else concat @ W_O

    return fn


D_MODEL = Mistake(
    "scaled by √d_model instead of √d_head",
    "each head divides its scores by √d_head, the dimension of its own keys (3 in the "
    "article), not by √d_model (4)",
    _mha("d_model"),
    "head.scaled",
)
MULTI_HEAD = Exercise(
    number=7,
    slug="multihead",
    title="Multi-head attention with W_O",
    article=RT,
    function="multi_head_attention",
    params="X, heads, W_O, scale=None",
    summary="Multi-head self-attention: every head's attention, concatenated, times W_O.",
    equation="C_h = softmax(Q_h·K_hᵀ / √d_head)·V_h,  Q_h = X·WQ_h, K_h = X·WK_h, V_h = X·WV_h\n"
    "Z = concat(C_1, ..., C_H)·W_O",
    passage="« Les résultats d’attention de chaque tête sont concaténés, puis multipliés par une\n"
    "matrice de poids apprise pour revenir à la dimension d’embedding »\n"
    f"({SEED_002})\n"
    "(each head's output is concatenated, then multiplied by a learned matrix W_O back to\n"
    "d_model: in the article, two heads of 3 give 6 columns, and W_O (6 x 4) gives 4.)",
    shapes="X        (T, d_model)\n"
    "heads    a list of H (WQ, WK, WV), each (d_model, d_head), used as X·W\n"
    "W_O      (H·d_head, d_model)\n"
    "scale    None: divide the scores by √d_head; a number (the article's 30): divide by it\n"
    "returns  (T, d_model)  Z",
    parts=(Part("Z", "the multi-head output Z = concat(C_1..C_H)·W_O"),),
    cases=_mha_cases,
    mistakes=(
        D_MODEL,
        Mistake(
            "the output projection W_O left out",
            "the heads' concatenation (T, H·d_head) goes through W_O back to d_model: "
            "Z = concat·W_O",
            _mha("no_W_O"),
            "Z",
        ),
        Mistake(
            "the heads concatenated in the wrong order",
            "concat(C_1, C_2, ...): head 1's columns first, in the order of `heads`",
            _mha("reversed"),
            "concat",
        ),
        Mistake(
            "every head used the first head's weights",
            "each head h has its own WQ_h, WK_h, WV_h",
            _mha("first_only"),
            "head.Q",
        ),
        Mistake(
            "the scale argument ignored",
            "scale=30 is the article's ÷30 step: when scale is given, divide the scores by it",
            _mha("ignore_scale"),
            "head.scaled",
        ),
    ),
    fallback="compare with the steps head1.C, head2.C, div30.concat and div30.Z of glassformer "
    "walkthrough hello-world",
)

EXERCISES = (DROPOUT, MULTI_HEAD)
