"""Raschka, *Build a Large Language Model (From Scratch)*, chapter 3 (seed 000), every step.

"Your journey starts with one step" as six 3-d embeddings: attention without weights (3.3),
trainable attention (SelfAttention_v1, v2, 3.4), the causal mask and dropout (3.5.1-3.5.2), then
the batch of two sequences through CausalAttention (3.5.3), the wrapper of two heads (3.6.1), the
4-D batched product and MultiHeadAttention with the weight split and out_proj (3.6.2).

The seeded weights are the exact float32 values torch draws, shipped in `data/raschka_ch03.json`
(built by `tests/make_raschka_ch03_data.py`), so no torch is needed (nor imported: the
walkthrough starts fast); dropout's random mask is the one the book printed for
`torch.manual_seed(123)`, since torch's random draws are not portable. The batched steps are the
article's own products (Kᵀ as `transpose(1, 2)`, heads as `view` + `transpose`); the reference
engine is unbatched.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np

from glassformer import reference as R
from glassformer.trace import Trace, scope, tap, tracing
from glassformer.walkthrough.narrate import narrator


def _raschka_data() -> dict:
    text = resources.files("glassformer").joinpath("data/raschka_ch03.json").read_text()
    return json.loads(text)


def self_attention() -> Trace:
    """Seed 000 / Raschka ch. 3 on "Your journey starts with one step", every step."""
    data = _raschka_data()
    words = data["tokens"]
    X = np.array(data["inputs"], dtype=np.float64)  # (6, 3)
    with tracing(labels={"all": words, "v2": words, "causal": words}) as trace:
        t = narrator()
        t(
            "inputs",
            X,
            "x_1 ... x_6 (d = 3)",
            rows=words,
            note="Six tokens, each a 3-dimensional embedding.",
        )
        x2 = X[1]
        s2 = t(
            "simple.scores_2",
            X @ x2,
            "ω_2j = x_2·x_j",
            cols=words,
            note="Simplified attention (no weights): the query 'journey' scores every token.",
        )
        t(
            "simple.weights_2_sum",
            s2 / s2.sum(),
            "ω_2j / Σ ω_2j",
            cols=words,
            note="Normalising by the sum...",
        )
        a2 = t(
            "simple.weights_2",
            R.softmax(s2),
            "softmax(ω_2)",
            cols=words,
            note="...or, better, with softmax.",
        )
        t("simple.context_2", a2 @ X, "z_2 = Σ_j α_2j x_j", note="The context vector of 'journey'.")
        S = t(
            "simple.scores", X @ X.T, "Ω = X·Xᵀ", rows=words, cols=words, note="All tokens at once."
        )
        A = t("simple.A", R.softmax(S), "softmax(Ω) row by row", rows=words, cols=words)
        t("simple.C", A @ X, "C = A·X", rows=words)

        W = {
            k: np.array(v, dtype=np.float64)
            for k, v in data["seed123_torch_rand_d_in_by_d_out"].items()
        }
        Wq, Wk, Wv = W["W_query"], W["W_key"], W["W_value"]
        t(
            "trainable.W_query",
            Wq,
            "Wq (d x c = 3 x 2), torch.manual_seed(123), torch.rand",
            note="Trainable attention: three weight matrices project d = 3 to c = 2.",
        )
        t("trainable.W_key", Wk, "Wk (3 x 2)", note="The key matrix.")
        t("trainable.W_value", Wv, "Wv (3 x 2)", note="The value matrix.")
        q2 = t("trainable.query_2", x2 @ Wq, "q_2 = x_2·Wq", note="The query of 'journey'.")
        keys = t("trainable.keys", X @ Wk, "K = X·Wk", rows=words, note="All keys.")
        values = t("trainable.values", X @ Wv, "V = X·Wv", rows=words, note="All values.")
        t("trainable.score_22", q2 @ keys[1], "ω_22 = q_2·k_2", note="One attention score.")
        sc2 = t(
            "trainable.scores_2",
            q2 @ keys.T,
            "ω_2 = q_2·Kᵀ",
            cols=words,
            note="All scores of query 2.",
        )
        c = keys.shape[1]
        w2 = t(
            "trainable.weights_2",
            R.softmax(sc2 / math.sqrt(c)),
            "α_2 = softmax(ω_2 / √c)",
            cols=words,
            note="Scaled by √c = √2, then softmax.",
        )
        t(
            "trainable.context_2",
            w2 @ values,
            "z_2 = α_2·V",
            note="The context vector of 'journey'.",
        )
        # All tokens at once: 5 matrix products and a transpose.
        with scope("all"):
            Q = tap("Q", X @ Wq, note="All tokens at once: Q = X·Wq ...")
            K = tap("K", X @ Wk)
            V = tap("V", X @ Wv)
            R.attention(Q, K, V)
        trace.annotate(
            "all.C",
            "C = softmax(Ω / √c)·V, Ω = Q·Kᵀ: 5 matrix products and a transpose "
            "(SelfAttention_v1's output).",
        )

        lin = {
            k: np.array(v, dtype=np.float64) for k, v in data["seed789_nn_linear_out_by_in"].items()
        }
        t(
            "v2.W_query",
            lin["W_query"],
            "nn.Linear(3, 2).weight (out x in), torch.manual_seed(789)",
            note="SelfAttention_v2 uses nn.Linear: weights stored (out, in), applied as X·Wᵀ.",
        )
        t("v2.W_key", lin["W_key"], "nn.Linear(3, 2).weight")
        t("v2.W_value", lin["W_value"], "nn.Linear(3, 2).weight")
        Q2, K2, V2 = (R.linear(X, lin[k]) for k in ("W_query", "W_key", "W_value"))
        with scope("v2"):
            R.attention(Q2, K2, V2)
        trace.annotate("v2.C", "SelfAttention_v2's output.")
        # The causal mask, two ways.
        scores = Q2 @ K2.T
        A_full = R.softmax(scores / math.sqrt(c))
        tril = t(
            "causal.mask_simple",
            np.tril(np.ones((6, 6))),
            "tril(ones(6, 6))",
            rows=words,
            cols=words,
            note="Causal attention: token i may only look at tokens <= i.",
        )
        masked = t(
            "causal.masked_simple",
            A_full * tril,
            "A ⊙ mask",
            rows=words,
            cols=words,
            note="Zeroing the future weights of A...",
        )
        t(
            "causal.masked_simple_norm",
            masked / masked.sum(-1, keepdims=True),
            "renormalise each row to sum 1",
            rows=words,
            cols=words,
            note="...and renormalising.",
        )
        with scope("causal"):
            R.attention(Q2, K2, V2, mask=R.causal_mask(6))
        trace.annotate(
            "causal.A",
            "Or, equivalently and in one pass: scores above the diagonal set to -inf before "
            "the softmax.",
        )
        _dropout_part(t, trace["causal.A"], data["dropout"], words)
        batch = t(
            "batch.X",
            np.stack((X, X)),
            "stack(X, X)  (B × T × d = 2 × 6 × 3)",
            rows=words,
            note="Batching: two sequences (here the same sentence twice) stacked into a 3-D "
            "tensor (batch, tokens, d_in); every product below runs on both at once.",
        )
        _causal_attention_part(t, trace, batch, data, words)
        _batched_matmul_part(t, np.array(data["batched_matmul_a"], dtype=np.float64))
        _multi_head_part(t, trace, batch, data["multihead_seed123_out_by_in"], words)
    return trace


QKV = ("W_query", "W_key", "W_value")


def _weights(d: dict, keys=QKV) -> list[np.ndarray]:
    return [np.array(d[k], dtype=np.float64) for k in keys]


def _dropout_part(t, A: np.ndarray, cfg: dict, words: list[str]) -> None:
    """3.5.2: dropout(x) = x ⊙ m / (1 - p), on a matrix of ones, then on the causal weights,
    with the keep mask the book printed (no torch needed, and the book's numbers everywhere)."""
    p, seed = cfg["p"], cfg["seed"]
    m = np.array(cfg["keep_mask_printed_in_book"], dtype=np.float64)  # (T, T), 1 = kept
    origin = (
        f"This m is the one the book printed for nn.Dropout({p}) under "
        f"torch.manual_seed({seed}): torch's CPU random draws differ across platforms and "
        "versions (torch 2.4 on Linux drew another), so the walkthrough shows the book's."
    )
    t(
        "dropout.mask",
        m,
        f"m_ij ~ Bernoulli(1 - p), p = {p}  (1 = kept)",
        rows=words,
        cols=words,
        note=f"Dropout, in training only, keeps each entry with probability 1 - p. {origin}",
    )
    t(
        "dropout.ones",
        np.ones(A.shape) * m / (1 - p),
        "dropout(1) = 1 ⊙ m / (1 - p)",
        note=f"The book's first example, a {A.shape[0]}×{A.shape[1]} matrix of ones: kept "
        f"entries become 1/(1 - p) = {1 / (1 - p):g}, dropped ones 0, so the mean stays 1 in "
        "expectation.",
    )
    t(
        "dropout.A",
        A * m / (1 - p),
        "dropout(A) = A ⊙ m / (1 - p)",
        rows=words,
        cols=words,
        note="On the causal weights A (seed reset, so the same mask): about half are zeroed, "
        "the rest doubled, and a row no longer sums to 1. The classes below use dropout = 0.0.",
    )


def _causal_attention(X: np.ndarray, Wq, Wk, Wv, words) -> np.ndarray:
    """CausalAttention.forward on a batch (dropout 0.0), the article's batched products.
    X (B, T, d), W (c, d) as nn.Linear stores them."""
    T = X.shape[1]
    Q = tap("Q", R.linear(X, Wq), "Q = X·Wqᵀ  (B × T × c)", rows=words)  # (B, T, c)
    K = tap("K", R.linear(X, Wk), "K = X·Wkᵀ  (B × T × c)", rows=words)  # (B, T, c)
    V = tap("V", R.linear(X, Wv), "V = X·Wvᵀ  (B × T × c)", rows=words)  # (B, T, c)
    scores = tap(
        "scores",
        Q @ K.swapaxes(1, 2),
        "Ω = Q·Kᵀ, Kᵀ = K.transpose(1, 2)  (B × T × T)",
        rows=words,
        cols=words,
    )  # (B, T, T)
    masked = np.where(R.causal_mask(T), scores, -np.inf)  # (B, T, T)
    A = tap(
        "A",
        R.softmax(masked / math.sqrt(K.shape[-1])),
        "A = softmax(Ω / √c), Ω_ij = -inf for j > i  (B × T × T)",
        rows=words,
        cols=words,
    )  # (B, T, T)
    return tap("C", A @ V, "C = A·V  (B × T × c)", rows=words)  # (B, T, c)


def _causal_attention_part(t, trace: Trace, batch: np.ndarray, data: dict, words) -> None:
    """3.5.3 CausalAttention, then 3.6.1 MultiHeadAttentionWrapper: two of them side by side."""
    heads = [data["causal_attention_seed123_out_by_in"], data["wrapper_head1_seed123_out_by_in"]]
    Wq, Wk, Wv = _weights(heads[0])
    t(
        "causal_attention.W_query",
        Wq,
        "Wq: nn.Linear(3, 2, bias=False).weight (c × d), torch.manual_seed(123)",
        note="CausalAttention (dropout 0.0): new nn.Linear weights, seed 123, created in the "
        "order W_query, W_key, W_value.",
    )
    t("causal_attention.W_key", Wk, "Wk: nn.Linear(3, 2).weight")
    t("causal_attention.W_value", Wv, "Wv: nn.Linear(3, 2).weight")
    with scope("causal_attention"):
        _causal_attention(batch, Wq, Wk, Wv, words)
    trace.annotate(
        "causal_attention.Q",
        "Each nn.Linear acts on the last axis: the queries of both sequences in one product.",
    )
    trace.annotate(
        "causal_attention.scores",
        "Kᵀ of a batch swaps the last two axes (transpose(1, 2)), not the batch axis: one "
        "T × T score matrix per sequence.",
    )
    trace.annotate(
        "causal_attention.A",
        "The causal mask (a buffer of the module) sets the future to -inf, then softmax row by "
        "row in each sequence.",
    )
    trace.annotate(
        "causal_attention.C",
        "CausalAttention's output: a context vector per token per sequence (both sequences "
        "are the same sentence, so are their outputs).",
    )
    outputs = []
    for h, W in enumerate(heads):
        Wq, Wk, Wv = _weights(W)
        if h:
            t(
                f"wrapper.head{h}.W_query",
                Wq,
                "Wq of head 1: the next nn.Linear(3, 2) drawn after head 0's three",
                note="MultiHeadAttentionWrapper, 2 heads: head 0 is built first and draws "
                "exactly CausalAttention's weights (same seed); head 1 draws the next three.",
            )
            t(f"wrapper.head{h}.W_key", Wk, "Wk of head 1")
            t(f"wrapper.head{h}.W_value", Wv, "Wv of head 1")
        with scope(f"wrapper.head{h}"):
            outputs.append(_causal_attention(batch, Wq, Wk, Wv, words))
    trace.annotate("wrapper.head1.C", "Head 1's output: the same computation, its own weights.")
    t(
        "wrapper.C",
        np.concatenate(outputs, axis=-1),
        "C = [C_1 | C_2], concatenated on the last axis  (B × T × 2c)",
        rows=words,
        note="The wrapper concatenates its heads: the first two columns are CausalAttention's "
        "output (head 0), the last two head 1's.",
    )


def _batched_matmul_part(t, a: np.ndarray) -> None:
    """3.6.2's example: matmul of 4-D tensors multiplies the last two axes, (batch, head) by
    (batch, head)."""
    t(
        "batched_matmul.a",
        a,
        "a  (b × h × T × D = 1 × 2 × 3 × 4)",
        note="Before the weight split, the book's 4-D example: 1 sequence, 2 heads, 3 tokens, "
        "4 dimensions per head.",
    )
    t(
        "batched_matmul.a_aT",
        a @ a.swapaxes(2, 3),
        "a · a.transpose(2, 3)  (1 × 2 × 3 × 3)",
        note="A product of 4-D tensors multiplies the last two axes, for every (sequence, head) "
        "pair at once...",
    )
    for h in range(a.shape[1]):
        t(
            f"batched_matmul.head{h}",
            a[0, h] @ a[0, h].T,
            f"a[0, {h}] · a[0, {h}]ᵀ  (3 × 3)",
            note="...the same numbers as head 0 alone..." if h == 0 else "...and head 1 alone.",
        )


def _multi_head_part(t, trace: Trace, X: np.ndarray, w: dict, words, H: int = 2) -> None:
    """3.6.2 MultiHeadAttention (dropout 0.0): one projection per Q, K, V for all heads, split
    into H heads of D = d_out / H columns, causal attention per head, heads side by side again,
    out_proj."""
    Wq, Wk, Wv = _weights(w)
    Wo, bo = _weights(w, ("out_proj_weight", "out_proj_bias"))
    t(
        "mha.W_query",
        Wq,
        "Wq: nn.Linear(3, 2, bias=False).weight (d_out × d), torch.manual_seed(123)",
        note="MultiHeadAttention (2 heads, d_out = 2): one Wq, Wk, Wv for all heads together, "
        "drawn first with seed 123, so the same matrices as CausalAttention's.",
    )
    t("mha.W_key", Wk, "Wk: nn.Linear(3, 2).weight")
    t("mha.W_value", Wv, "Wv: nn.Linear(3, 2).weight")
    t(
        "mha.out_proj.weight",
        Wo,
        "W_o: nn.Linear(2, 2).weight (d_out × d_out)",
        note="The output projection out_proj, created fourth: a weight...",
    )
    t("mha.out_proj.bias", bo, "b_o: nn.Linear(2, 2).bias", note="...and a bias.")
    B, T, _ = X.shape
    D = Wq.shape[0] // H
    with scope("mha"):
        split = {}
        for name, W in zip("QKV", (Wq, Wk, Wv), strict=True):
            full = tap(name, R.linear(X, W), f"{name} = X·W{name.lower()}ᵀ  (B × T × d_out)")
            split[name] = tap(  # (B, H, T, D)
                f"{name}_split",
                full.reshape(B, T, H, D).swapaxes(1, 2),
                f"{name}.view(B, T, H, D).transpose(1, 2)  (B × H × T × D = {B} × {H} × {T} × {D})",
                rows=words,
            )
        Q, K, V = split["Q"], split["K"], split["V"]
        scores = tap(
            "scores",
            Q @ K.swapaxes(2, 3),
            "Ω_h = Q_h·K_hᵀ, Kᵀ = K.transpose(2, 3)  (B × H × T × T)",
            rows=words,
            cols=words,
        )  # (B, H, T, T)
        masked = np.where(R.causal_mask(T), scores, -np.inf)  # (B, H, T, T)
        A = tap(
            "A",
            R.softmax(masked / math.sqrt(D)),
            f"A_h = softmax(Ω_h / √c), Ω_ij = -inf for j > i, c = {D}  (B × H × T × T)",
            rows=words,
            cols=words,
        )  # (B, H, T, T)
        C = tap("C_heads", A @ V, "C_h = A_h·V_h  (B × H × T × D)", rows=words)  # (B, H, T, D)
        concat = tap(
            "concat",
            C.swapaxes(1, 2).reshape(B, T, H * D),
            "[C_1 | C_2] = C.transpose(1, 2).view(B, T, H·D)  (B × T × d_out)",
            rows=words,
        )  # (B, T, d_out)
        tap(
            "out",
            R.linear(concat, Wo, bo),
            "out = [C_1 | C_2]·W_oᵀ + b_o  (B × T × d_out)",
            rows=words,
        )  # (B, T, d_out)
    for name, note in (
        (
            "mha.Q_split",
            f"The weight split: the d_out = {H * D} columns of Q are cut into H = {H} heads of "
            f"D = {D}, and the head axis moves before the tokens (same for K and V).",
        ),
        ("mha.scores", "One product for every sequence and every head (the 4-D product above)."),
        (
            "mha.A",
            f"The causal mask and the softmax, per head; the scale is √c = √{D} here.",
        ),
        ("mha.concat", "The heads side by side again: the split undone."),
        (
            "mha.out",
            "MultiHeadAttention's output: the concatenated heads through out_proj, which mixes "
            "them (the wrapper had no such projection).",
        ),
    ):
        trace.annotate(name, note)
