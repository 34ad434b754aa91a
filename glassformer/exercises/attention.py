"""Exercises 1-5: softmax, one head of attention, Raschka's SelfAttention_v1 and v2, and the
causal mask.

Each exercise is data (`base.Exercise`): its text, its cases (the article's numbers first, read
from the walkthroughs' recorded steps, then seeded random inputs of several shapes, their
values read from the reference engine's trace) and its typical mistakes, each a wrong variant
of the reference's computation with the hint that names it.
"""

from __future__ import annotations

import math

import numpy as np

from glassformer import reference as R
from glassformer.exercises.base import (
    RASCHKA,
    RT,
    SEED_000,
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

# -- 1. softmax ---------------------------------------------------------------------------------


def _softmax_cases() -> list[Case]:
    hw, g = hello_world(), rng(1)
    big = np.array([1000.0, 1001.0, 1002.0])
    masked = np.array([[0.5, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    out = [
        case(
            "the article's example, softmax([1, 2, 3])",
            (np.array([1.0, 2.0, 3.0]),),
            "probs",
            step_of(hw, "softmax.example"),
            from_walk("softmax.example", WALK_RT),
        ),
        case(
            "the article's scaled scores of head 1, Ω / √3",
            (step_of(hw, "head1.scaled"),),
            "probs",
            step_of(hw, "head1.A"),
            from_walk("head1.A", WALK_RT),
        ),
    ]
    for title, x in (
        ("large scores, as after six blocks without LayerNorm", big),
        ("random scores, shape (4, 7)", 3 * g.standard_normal((4, 7))),
        ("random scores, shape (2, 3, 5)", 3 * g.standard_normal((2, 3, 5))),
        ("a masked row and a row entirely masked, -inf", masked),
    ):
        out.append(case(title, (x,), "probs", R.softmax(x), "reference.softmax"))
    return out


def _no_guard(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


SOFTMAX = Exercise(
    number=1,
    slug="softmax",
    title="Stable softmax",
    article=RT,
    function="softmax",
    params="x",
    summary="The softmax of each row of x (over the last axis), without overflow.",
    equation="softmax(x)_i = exp(x_i) / Σ_j exp(x_j)\n"
    "= exp(x_i - max x) / Σ_j exp(x_j - max x)   (the same numbers; no exp overflows)",
    passage=f"« transformer le résultat avec softmax en poids positifs dont la somme vaut 1 »;\n"
    "« après passage dans 6 encodeurs, des avertissements overflow encountered in exp et\n"
    "invalid value encountered in divide apparaissent, et la sortie devient nan »\n"
    f"({SEED_002})\n"
    "(softmax turns the scores into positive weights that sum to 1; computed naively, it\n"
    "overflows after six blocks and the output becomes NaN.)",
    shapes="x        (..., N)  any number of leading axes; the softmax runs over the last\n"
    "returns  (..., N)  each row positive and summing to 1",
    notes="A row that is entirely -inf (every position masked) gives zeros, not NaN: that is\n"
    "glassformer's convention (docs/design.md), as its reference engine does it\n"
    "(glassformer.reference.softmax).",
    parts=(Part("probs", "the softmax of each row"),),
    cases=_softmax_cases,
    mistakes=(
        Mistake(
            "NaN on a row that is entirely -inf",
            "every position of that row is masked: its max is -inf and -inf - (-inf) is NaN; "
            "subtract the max only where it is finite, and give such a row zeros",
            _no_guard,
            "max x",
        ),
        Mistake(
            "the naive softmax exp(x) / Σ exp(x)",
            "exp overflows to inf for large scores and inf / inf is NaN (the article's NaN after "
            "six blocks): subtract each row's maximum before exp; the result is the same",
            lambda x: R.softmax(x, naive=True),
            "exp(x)",
        ),
        Mistake(
            "softmax over the wrong axis (down the columns)",
            "normalise each row, over the last axis (axis=-1): every row's weights sum to 1",
            lambda x: R.softmax(x, axis=0),
            "Σ_j exp(x_j)",
        ),
        Mistake(
            "divided by the sum of the scores, with no exp",
            "that is Raschka's first, sum-normalised weights (3.3.1); softmax divides exp(x_i) by "
            "Σ_j exp(x_j)",
            lambda x: x / x.sum(axis=-1, keepdims=True),
            "exp(x)",
        ),
        Mistake(
            "normalised over the whole array, not each row",
            "sum over the last axis only (axis=-1, keepdims=True)",
            lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum(),
            "Σ_j exp(x_j)",
        ),
    ),
    fallback="compare with softmax.example and head1.A of glassformer walkthrough hello-world",
)

# -- 2. one head of scaled dot-product attention ------------------------------------------------


def _attention_cases() -> list[Case]:
    hw, g = hello_world(), rng(2)
    out = []
    for h in ("head1", "head2"):
        QKV = tuple(step_of(hw, f"{h}.{w}") for w in "QKV")
        out.append(
            case(
                f"the article's {h} on 'Hello World'",
                QKV,
                "C",
                step_of(hw, f"{h}.C"),
                from_walk(f"{h}.C", WALK_RT),
            )
        )
    for T, S, D in ((5, 5, 3), (4, 6, 2), (1, 1, 4), (3, 3, 8)):
        Q, K, V = g.standard_normal((T, D)), g.standard_normal((S, D)), g.standard_normal((S, D))
        Q *= 2
        title = f"random Q ({T}, {D}), K and V ({S}, {D})"
        C = traced("C", R.attention, Q, K, V)
        out.append(case(title, (Q, K, V), "C", C, from_ref("C", "attention")))
    return out


def _by_columns(Q, K, V):
    return R.softmax(Q @ K.T / math.sqrt(K.shape[-1]), axis=0) @ V


def _keys_first(Q, K, V):
    return R.softmax(K @ Q.T / math.sqrt(K.shape[-1])) @ V


def _scaled_by(f):
    return lambda Q, K, V: R.attention(Q, K, V, scale=f(K.shape[-1]))


SCALE_MISTAKES = (
    Mistake(
        "not scaled: softmax(Q·Kᵀ)·V",
        "divide the scores by √d_k, the square root of the keys' dimension (K.shape[-1]), "
        "before the softmax",
        _scaled_by(lambda D: 1.0),
        "scaled",
    ),
    Mistake(
        "divided by d_k instead of √d_k",
        "the scale is the square root of the keys' dimension: Ω / √d_k",
        _scaled_by(float),
        "scaled",
    ),
    Mistake(
        "multiplied by √d_k instead of dividing",
        "divide the scores by √d_k: large dot products must be shrunk before the softmax",
        _scaled_by(lambda D: 1 / math.sqrt(D)),
        "scaled",
    ),
    Mistake(
        "divided by 30, the article's temporary hack",
        "the article divides by 30 for a moment only, to soften the weights; the formula "
        "divides by √d_k",
        _scaled_by(lambda D: 30.0),
        "scaled",
    ),
)

ATTENTION = Exercise(
    number=2,
    slug="attention",
    title="Scaled dot-product attention, one head",
    article=RT,
    function="attention",
    params="Q, K, V",
    summary="One head of scaled dot-product attention: the context vectors of the queries.",
    equation="Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k)·V   (softmax row by row)",
    passage="« calculer le produit scalaire entre la query et chaque key », « diviser par la\n"
    "racine carrée de la dimension des key », « transformer le résultat avec softmax en poids\n"
    "positifs dont la somme vaut 1 », « produire une somme pondérée des vecteurs value »\n"
    f"({SEED_002})\n"
    "(dot every query with every key, divide by the square root of the keys' dimension,\n"
    "softmax into weights that sum to 1, then a weighted sum of the value vectors.)",
    shapes="Q        (T, d_k)  one row per query\n"
    "K        (S, d_k)  one row per key\n"
    "V        (S, d_v)  one row per value\n"
    "returns  (T, d_v)  C, one context vector per query",
    notes="The steps, as glassformer records them: scores = Q·Kᵀ (T, S), scaled = scores / √d_k,\n"
    "A = softmax(scaled) row by row, C = A·V.",
    parts=(Part("C", "the context vectors, C = A·V"),),
    cases=_attention_cases,
    mistakes=SCALE_MISTAKES
    + (
        Mistake(
            "softmax over the wrong axis (each key's column)",
            "softmax each row of the scores: the weights of one query over all keys sum to 1",
            _by_columns,
            "A",
        ),
        Mistake(
            "K·Qᵀ instead of Q·Kᵀ",
            "row i of the scores is query i against every key: Ω = Q·Kᵀ",
            _keys_first,
            "scores",
        ),
    ),
    fallback="compare your scores, scaled scores, weights and C with the steps head1.scores, "
    "head1.scaled, head1.A and head1.C of glassformer walkthrough hello-world",
)

# -- 3, 4. Raschka's SelfAttention_v1 and v2 ----------------------------------------------------


def _self_attention_cases(linear: bool) -> list[Case]:
    tr, g = chapter3(), rng(3 + linear)
    prefix = "v2" if linear else "trainable"
    X = step_of(tr, "inputs")
    W = tuple(step_of(tr, f"{prefix}.{w}") for w in ("W_query", "W_key", "W_value"))
    done = "v2.C" if linear else "all.C"
    out = [
        case(
            "the article's 'Your journey starts with one step', seed "
            + ("789 nn.Linear weights" if linear else "123 weights"),
            (X, *W),
            "C",
            step_of(tr, done),
            from_walk(done, WALK_R),
        )
    ]
    for T, d_in, d_out in ((4, 3, 3), (5, 4, 2), (3, 2, 5), (1, 3, 2)):
        X = g.standard_normal((T, d_in))
        shape = (d_out, d_in) if linear else (d_in, d_out)
        W = tuple(g.standard_normal(shape) for _ in range(3))
        Q, K, V = (R.linear(X, w) if linear else X @ w for w in W)
        title = f"random X ({T}, {d_in}), weights {shape}"
        C = traced("C", R.attention, Q, K, V)
        out.append(case(title, (X, *W), "C", C, from_ref("C", "attention")))
    return out


def _v(linear: bool, change: str):
    """SelfAttention_v1 (X·W) or v2 (X·Wᵀ) with one change."""

    def fn(X, Wq, Wk, Wv):
        flip = linear != (change == "transposed")
        Q, K, V = (X @ w.T if flip else X @ w for w in (Wq, Wk, Wv))
        c = K.shape[-1]
        if change == "sqrt_d_in":
            return R.attention(Q, K, V, scale=math.sqrt(X.shape[-1]))
        if change == "unscaled":
            return R.attention(Q, K, V, scale=1.0)
        if change == "axis":
            return _by_columns(Q, K, V)
        if change == "no_values":
            return R.softmax(Q @ K.T / math.sqrt(c)) @ X
        if change == "keys_first":
            return _keys_first(Q, K, V)
        return R.attention(Q, K, V)

    return fn


def _raschka_mistakes(linear: bool) -> tuple[Mistake, ...]:
    transposed = (
        "multiplied X·W: nn.Linear stores W as (d_out, d_in) and computes X·Wᵀ"
        if linear
        else "multiplied X·Wᵀ (as nn.Linear does); SelfAttention_v1's W is (d_in, d_out): X·W"
    )
    return (
        Mistake(
            "scaled by √d_in (the input dimension) instead of √c",
            "the article divides Ω by √c, c the dimension of the projection (d_out, "
            "keys.shape[-1]), not d, the dimension of the input embeddings",
            _v(linear, "sqrt_d_in"),
            "scaled",
        ),
        Mistake(
            "not scaled",
            "A = softmax(Ω / √c, axis=1): divide the scores by √c before the softmax",
            _v(linear, "unscaled"),
            "scaled",
        ),
        Mistake(
            "softmax over the wrong axis",
            "axis=1 in the article means row by row: dim=-1 in torch, axis=-1 in NumPy",
            _v(linear, "axis"),
            "A",
        ),
        Mistake("weights used transposed", transposed, _v(linear, "transposed"), "Q, K, V"),
        Mistake(
            "C = A·X: the value projection left out",
            "that is the simplified attention of section 3.3; the trainable one weighs the values "
            "V = X·Wv",
            _v(linear, "no_values"),
            "C",
        ),
        Mistake(
            "K·Qᵀ instead of Q·Kᵀ",
            "row m of Ω is query m against every key: Ω = Q·Kᵀ",
            _v(linear, "keys_first"),
            "scores",
        ),
    )


_RASCHKA_PASSAGE = (
    "« La matrice d’entrée X est transformée en Q=XWq, K=XWk, V=XWv, puis Ω=QKᵀ est divisé\n"
    "par √c avant d’appliquer une softmax par ligne pour obtenir les poids d’attention A »;\n"
)
_RASCHKA_GLOSS = (
    "(X becomes Q = X·Wq, K = X·Wk, V = X·Wv; Ω = Q·Kᵀ is divided by √c before a row-wise\n"
    "softmax gives the attention weights A; then C = A·V.)"
)
SELF_ATTENTION_V1 = Exercise(
    number=3,
    slug="selfattention_v1",
    title="Raschka's SelfAttention_v1",
    article=RASCHKA,
    function="self_attention_v1",
    params="X, W_query, W_key, W_value",
    summary="SelfAttention_v1.forward: trainable self-attention with raw weight matrices.",
    equation="Q = X·Wq,  K = X·Wk,  V = X·Wv\nΩ = Q·Kᵀ\n"
    "A = softmax(Ω / √c, axis=1)   (row by row; c = d_out, the keys' dimension)\nC = A·V",
    passage=_RASCHKA_PASSAGE + "« La première version utilise de simples objets nn.Parameter pour "
    f"les trois\nmatrices de poids » ({SEED_000})\n" + _RASCHKA_GLOSS,
    shapes="X        (T, d_in)      the input embeddings, one row per token\n"
    "W_query  (d_in, d_out)  W_key and W_value the same: used as X·W\n"
    "returns  (T, d_out)     C, the context vectors",
    parts=(Part("C", "the context vectors, C = A·V"),),
    cases=lambda: _self_attention_cases(False),
    mistakes=_raschka_mistakes(False),
    fallback="compare your Q, K, V, scores, weights and C with the steps all.Q, all.K, all.V, "
    "all.scores, all.A and all.C of glassformer walkthrough self-attention",
    error_hint="W_query is (d_in, d_out): Q = X·W_query is (T, d_out)",
)

SELF_ATTENTION_V2 = Exercise(
    number=4,
    slug="selfattention_v2",
    title="Raschka's SelfAttention_v2, nn.Linear weights",
    article=RASCHKA,
    function="self_attention_v2",
    params="X, W_query, W_key, W_value",
    summary="SelfAttention_v2.forward: the same attention with weights stored as nn.Linear "
    "stores them.",
    equation="Q = X·Wqᵀ,  K = X·Wkᵀ,  V = X·Wvᵀ  (nn.Linear(d_in, d_out).weight is (d_out, d_in))\n"
    "A = softmax(Q·Kᵀ / √c, axis=1),  C = A·V",
    passage="« La deuxième version utilise nn.Linear pour un entraînement plus efficace »\n"
    f"({SEED_000})\n"
    "(the second version uses nn.Linear: its weight is stored (out, in) and applied as x·Wᵀ.)",
    shapes="X        (T, d_in)\n"
    "W_query  (d_out, d_in)  W_key and W_value the same: nn.Linear's .weight\n"
    "returns  (T, d_out)     C, the context vectors",
    parts=(Part("C", "the context vectors, C = A·V"),),
    cases=lambda: _self_attention_cases(True),
    mistakes=_raschka_mistakes(True),
    fallback="compare with the steps v2.scores, v2.scaled, v2.A and v2.C of glassformer "
    "walkthrough self-attention",
    error_hint="nn.Linear's weight is (d_out, d_in): Q = X·W_queryᵀ",
)

# -- 5. the causal mask -------------------------------------------------------------------------


def _causal_cases() -> list[Case]:
    tr, g = chapter3(), rng(5)
    X = step_of(tr, "inputs")
    Q, K = (R.linear(X, step_of(tr, f"v2.{w}")) for w in ("W_query", "W_key"))
    out = [
        case(
            "the article's SelfAttention_v2 queries and keys, section 3.5.1",
            (Q, K),
            "A",
            step_of(tr, "causal.A"),
            from_walk("causal.A", WALK_R),
        )
    ]
    for T, D in ((5, 3), (1, 2), (7, 4), (3, 6)):
        Q, K = 2 * g.standard_normal((T, D)), g.standard_normal((T, D))
        A = traced("A", R.attention, Q, K, np.zeros((T, 1)), mask=R.causal_mask(T))
        out.append(case(f"random Q and K ({T}, {D})", (Q, K), "A", A, from_ref("A", "attention")))
    return out


def _causal(change: str):
    def fn(Q, K):
        T = Q.shape[0]
        scaled = Q @ K.T / math.sqrt(K.shape[-1])
        keep = {"diagonal": np.tri(T, k=-1, dtype=bool), "past": np.triu(np.ones((T, T), bool))}
        mask = keep.get(change, R.causal_mask(T))
        if change == "after":
            return R.softmax(scaled) * mask
        if change == "zero":
            return R.softmax(np.where(mask, scaled, 0.0))
        if change == "unscaled":
            scaled = Q @ K.T
        return R.softmax(np.where(mask, scaled, -np.inf))

    return fn


CAUSAL = Exercise(
    number=5,
    slug="causal_mask",
    title="The causal mask",
    article=RASCHKA,
    function="causal_attention_weights",
    params="Q, K",
    summary="Causal attention weights: each token attends to itself and the tokens before it.",
    equation="Ω = Q·Kᵀ,  Ω_ij = -inf for j > i   (the future)\n"
    "A = softmax(Ω / √c) row by row   (so A_ij = 0 for j > i and every row sums to 1)",
    passage="« causal self-attention : une méthode où, lorsqu’on traite un token donné, on ne\n"
    f"prête pas attention aux tokens suivants » ({SEED_000});\n"
    "« une masked self-attention qui masque les scores d’attention avec -inf pour empêcher de\n"
    f"voir les tokens futurs » ({SEED_002})\n"
    "(a token does not attend to the tokens after it: their scores are set to -inf.)",
    shapes="Q        (T, c)  the queries\nK        (T, c)  the keys\n"
    "returns  (T, T)  A, the causal attention weights (zeros above the diagonal)",
    notes="The book shows two ways: zero A above the diagonal after the softmax and renormalise\n"
    "each row, or set the scores to -inf before it. Both give the same A.",
    parts=(Part("A", "the causal attention weights"),),
    cases=_causal_cases,
    mistakes=(
        Mistake(
            "the mask applied after the softmax, without renormalising",
            "zeroing the future weights after the softmax leaves rows that no longer sum to 1: "
            "set the scores to -inf before the softmax (or divide each row by its new sum)",
            _causal("after"),
            "A",
        ),
        Mistake(
            "masked scores set to 0, not -inf",
            "exp(0) = 1: a score of 0 still gets weight; -inf gives exp(-inf) = 0",
            _causal("zero"),
            "masked scores",
        ),
        Mistake(
            "the diagonal masked too",
            "a token may attend to itself: mask j > i only (np.triu(..., k=1) is the future)",
            _causal("diagonal"),
            "mask",
        ),
        Mistake(
            "the past masked instead of the future",
            "token i may look at tokens j <= i: the mask hides the upper triangle (j > i)",
            _causal("past"),
            "mask",
        ),
        Mistake(
            "not scaled",
            "divide the scores by √c (K.shape[-1]) as in the unmasked attention",
            _causal("unscaled"),
            "scaled",
        ),
    ),
    fallback="compare with the steps causal.scores, causal.scaled, causal.mask and causal.A of "
    "glassformer walkthrough self-attention",
)

EXERCISES = (SOFTMAX, ATTENTION, SELF_ATTENTION_V1, SELF_ATTENTION_V2, CAUSAL)
