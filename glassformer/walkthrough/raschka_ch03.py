"""Raschka, *Build a Large Language Model (From Scratch)*, chapter 3 (seed 000), every step.

"Your journey starts with one step" as six 3-d embeddings: attention without weights, then
trainable attention (SelfAttention_v1, v2), the causal mask.
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
        t("trainable.W_key", Wk, "Wk (3 x 2)")
        t("trainable.W_value", Wv, "Wv (3 x 2)")
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
            "C = softmax(Q·Kᵀ / √c)·V: 5 matrix products and a transpose "
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
    return trace
