"""Name -> equation, in the articles' notation, for every step the reference engine records.

The last component of a step name (`encoder.0.self_attn.head1.A` -> `A`) selects the entry;
`self_attn` / `cross_attn` in the name say where Q and K, V come from. Data only: it sits below
the trace (which fills in a recorded step's equation from it) and imports nothing.
"""

from __future__ import annotations

EQUATIONS: dict[str, str] = {
    "X": "X = token embeddings of the input ids (× √C with embed_scale)",
    "P": "P = positional encoding (sin on even, cos on odd dimensions, or learned rows)",
    "types": "token-type (segment) embeddings, type 0 unless given",
    "sum": "X + P (+ token types), before the embedding LayerNorm",
    "input": "X + P: the first block's input",
    "Q": "Q = X·Wq",
    "K": "K = X·Wk",
    "V": "V = X·Wv",
    "scores": "Ω = Q·Kᵀ",
    "scaled": "Ω / √c",
    "mask": "mask (True = may attend; masked scores become -inf)",
    "A": "A = softmax(Ω / √c) row by row",
    "C": "C = A·V",
    "concat": "concat(C_1, ..., C_H)",
    "Z": "Z = concat(C_1, ..., C_H)·W_O",
    "add1": "x + Sublayer(x)  (residual)",
    "add2": "x + Sublayer(x)  (residual)",
    "add3": "x + Sublayer(x)  (residual)",
    "mean": "μ = mean of each row",
    "std": "√(σ² + ε) of each row",
    "normalized": "(x - μ) / √(σ² + ε)",
    "out": "LayerNorm(x) = (x - μ) / √(σ² + ε) · γ + β",
    "hidden": "act(x·W1 + b1)",
    "output": "the stack's output",
    "logits": "logits = h·W_out + b",
    "probs": "softmax(logits)",
    "pooled": "mean of the encoder outputs over the real tokens",
    "embedding": "pooled / ‖pooled‖₂: the sentence embedding (unit length)",
}

_CROSS = {
    "Q": "Q = Y·Wq  (queries from the decoder)",
    "K": "K = M·Wk  (keys from the encoder output M)",
    "V": "V = M·Wv  (values from the encoder output M)",
}

_BLOCK_OUT = "block output"
_FFN_OUT = "FFN(x) = act(x·W1 + b1)·W2 + b2"


def equation_for(name: str) -> str:
    """The equation of a step name, or "" if the name is not one of the engine's."""
    parts = name.split(".")
    last = parts[-1]
    if ".cross_attn." in name and last in _CROSS:
        return _CROSS[last]
    if last == "out" and len(parts) >= 2:
        if parts[-2] == "ffn":
            return _FFN_OUT
        if parts[-2].isdigit():
            return _BLOCK_OUT
    return EQUATIONS.get(last, "")
