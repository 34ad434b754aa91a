"""Name -> equation, in the articles' notation, for every step the reference engine records;
and the words beside the equations: each step's name and what it does, in plain language.

The last component of a step name (`encoder.0.self_attn.head1.A` -> `A`) selects the entry;
`self_attn` / `cross_attn` in the name say where Q and K, V come from. `TITLES` and `PLACES` are
the words of a name's parts (the engine's and the two walkthroughs'), `MEANINGS` one sentence per
kind of step (`explain.words.kind`), in the symbols of the equations. Data only: it sits below
the trace (which fills in a recorded step's equation from it) and imports nothing; the titles
and sentences are put together in `explain/words.py`.
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
    "Q_rot": "Q_rot = RoPE(Q): row m turned by m·θ_i in each pair (i, i + r/2), θ_i = base^(-2i/r)",
    "K_rot": "K_rot = RoPE(K): row n turned by n·θ_i in each pair (i, i + r/2), θ_i = base^(-2i/r)",
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
    "rms": "√(mean(x²) + ε) of each row",
    "out": "LayerNorm(x) = (x - μ) / √(σ² + ε) · γ + β",
    "hidden": "act(x·W1 + b1)",
    "gate": "x·W1 + b1  (the gate, before the activation)",
    "up": "x·W3 + b3  (the up projection)",
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

# Steps whose name is the same in each variant of an option but whose equation is not: the engines
# pass these with the tap (`trace.tap(..., equation=...)`); the name alone gives the default's.
RMSNORM_OUT = "RMSNorm(x) = x / √(mean(x²) + ε) · g"
ROTARY_SCORES = "Ω = Q_rot·K_rotᵀ"  # RoPE turns Q and K before the product
INPUT_NO_P = "X: no position vector added"  # positions rotary (turned inside attention) or none


ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh)", "silu": "SiLU"}
POSITIONS = {
    "sinusoidal": "P = sin on even, cos on odd dimensions of each position",
    "sinusoidal_split": "P = sin in the first half, cos in the second half of each position's row",
    "learned": "P = the learned row of each position",
}


def config_equations(cfg) -> dict[str, str]:
    """The equations of the steps whose form this model's Config decides, as the engines tap
    them (`X`, `P`, the FFN's `hidden` and `out`, the output head's `logits`): only what the
    model has, a scale, a bias, a gate, its activation by name; the generic entries of
    `EQUATIONS` cover every model at once (a learner read `embed_scale`, learned rows and
    biases on a model that has none of them)."""

    def b(name: str) -> str:
        return f" + {name}" if cfg.bias else ""

    act = ACTIVATION_NAMES.get(cfg.activation, cfg.activation)
    if cfg.ffn_kind == "gated":
        hidden = f"{act}(x·W1{b('b1')}) ⊙ (x·W3{b('b3')})"
        ffn = f"FFN(x) = ({hidden})·W2{b('b2')}"
    else:
        hidden = f"{act}(x·W1{b('b1')})"
        ffn = f"FFN(x) = {hidden}·W2{b('b2')}"
    head = "Eᵀ (the token embedding)" if cfg.tie_embeddings else "W_out"
    bias = " + b" if cfg.lm_bias else ""
    out = {
        "X": "X = the token embeddings of the input ids" + (" × √C" * bool(cfg.embed_scale)),
        "hidden": hidden,
        "ffn_out": ffn,
        "logits": f"logits = h·{head}{bias}",
    }
    if cfg.positions in POSITIONS:
        out["P"] = POSITIONS[cfg.positions]
    return out


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


# A step's own name (the last part of it) in words, for its title.
TITLES: dict[str, str] = {
    "X": "token embeddings X",
    "P": "positional encodings P",
    "types": "token-type embeddings",
    "sum": "embeddings summed",
    "input": "input to the first layer",
    "Q": "queries Q",
    "K": "keys K",
    "V": "values V",
    "Q_rot": "queries turned by position",
    "K_rot": "keys turned by position",
    "rms": "root mean square √(mean(x²) + ε)",
    "gate": "gate x·W1",
    "up": "up projection x·W3",
    "scores": "scores Ω",
    "scaled": "scaled scores Ω / √c",
    "mask": "attention mask",
    "A": "attention weights",
    "concat": "heads concatenated",
    "Z": "output projection Z",
    "mean": "mean μ",
    "std": "spread √(σ² + ε)",
    "normalized": "normalised",
    "hidden": "hidden activations",
    "output": "final hidden states",
    "pooled": "pooled embedding",
    "embedding": "sentence embedding",
    "embeddings": "token embeddings",
    "standard": "the standard formula",
    "article": "the article's formula",
    "E": "as printed",
    "WQ": "query weights Wq",
    "WK": "key weights Wk",
    "WV": "value weights Wv",
    "W_query": "query weights Wq",
    "W_key": "key weights Wk",
    "W_value": "value weights Wv",
    "W_O": "output weights W_O",
    "E_plus_Z": "E + Z",
    "layernorm_article": "the article's LayerNorm",
    "layernorm_formula": "LayerNorm, the textbook formula",
    "example": "a worked example",
    "one_block": "one block, without residual or LayerNorm",
    "one_block_residual_ln": "one block with residual + LayerNorm",
    "max_abs": "largest |value| after each block",
    "sos_input_article": "the SOS token's input",
    "encoder_output": "encoder output M",
    "output_ids": "generated token ids",
    "inputs": "input embeddings x",
    "scores_2": "scores of query 2",
    "weights_2_sum": "weights of query 2, divided by their sum",
    "weights_2": "weights of query 2",
    "context_2": "context vector of query 2",
    "query_2": "query of token 2",
    "keys": "keys K",
    "values": "values V",
    "score_22": "score of query 2 with key 2",
    "mask_simple": "causal mask",
    "masked_simple": "weights with the mask applied",
    "masked_simple_norm": "masked weights, renormalised",
    "ones": "dropout applied to ones",
    "a": "a 4-d tensor a",
    "a_aT": "a · aᵀ, head by head",
    "weight": "weight",
    "bias": "bias",
    "Q_split": "queries split into heads",
    "K_split": "keys split into heads",
    "V_split": "values split into heads",
    "C_heads": "head outputs C_h",
    "self_ln": "LayerNorm after self-attention",
    "cross_ln": "LayerNorm after cross-attention",
    # walkthrough modern (`walkthrough/since_2017*.py`)
    "cos": "cosines cos(m·θ_i)",
    "sin": "sines sin(m·θ_i)",
    "R_1": "the turn at position 1 as a matrix R(1)",
    "grid": "scores of one query and one key at every pair of positions",
    "shift_change": "how much the scores move when both tokens move 5 on",
    "out_means": "mean of each output row",
    "params": "weights per norm",
    "W1": "W1 (the gate, today)",
    "W2": "W2 (down)",
    "W3": "W3 (the up projection SwiGLU adds)",
    "silu_gate": "the gate through SiLU",
    "params_llama2_7b": "weights per layer at Llama 2 7B's size",
    "sharing": "which key/value head each query head reads",
    "copy_difference": "GQA against MHA with copied K and V",
    "kv_cache_toy": "KV cache bytes per token, toy size",
    "kv_cache_real": "KV cache bytes per token, real sizes",
}

# The walkthroughs' groups of steps in words (any other part: its name, "_" read as a space).
PLACES: dict[str, str] = {
    "div30": "÷30 variant",
    "seeded": "seeded run",
    "block_residual_ln": "block with residual + LayerNorm",
    "overflow": "overflow test",
    "naive": "naive softmax",
    "stable": "stable softmax",
    "residual_ln": "stable softmax + residual + LayerNorm",
    "residual": "residual + LayerNorm",
    "positions": "positional encodings",
    "encoder_input": "encoder input",
    "softmax": "softmax",
    "simple": "attention without weights",
    "trainable": "trainable attention, query 2",
    "all": "all queries at once",
    "v2": "the nn.Linear version",
    "causal": "causal attention",
    "dropout": "dropout",
    "batch": "a batch",
    "causal_attention": "CausalAttention",
    "wrapper": "multi-head wrapper",
    "batched_matmul": "batched matmul",
    "mha": "MultiHeadAttention",
    "out_proj": "output projection W_o",
    "article": "the article's printed step",
    # walkthrough modern: each change since 2017, before and after
    "norms": "norms",
    "layernorm": "LayerNorm",
    "rmsnorm": "RMSNorm",
    "centred": "RMSNorm of the centred x (LayerNorm exactly)",
    "sinusoidal": "sinusoidal (2017)",
    "sinusoidal_shifted": "sinusoidal, both tokens 5 positions on",
    "rotary": "rotary (today)",
    "rotary_shifted": "rotary, both tokens 5 positions on",
    "relu": "ReLU FFN (2017)",
    "swiglu": "SwiGLU (today)",
    "gqa": "grouped-query attention",
    "mha_copied": "multi-head attention with K and V copied per head",
}

# What a step does, one plain sentence per kind of step (`explain.words.kind`).
MEANINGS: dict[str, str] = {
    "X": "Each token id picks its row of the embedding matrix: one vector of C numbers per token.",
    "P": (
        "One vector per position, added to the token embeddings so that the model can tell the "
        "order of the tokens."
    ),
    "types": "One vector per token type (segment A or B), added to the embeddings.",
    "sum": "Token embeddings plus positions (plus token types), before the embedding LayerNorm.",
    "input": "What the first layer reads: each token's embedding plus its position.",
    "Q": "Each token's query: what it looks for among the tokens it may attend to.",
    "K": "Each token's key: what the queries are compared with to find it.",
    "V": "Each token's value: what it hands on to the tokens that attend to it.",
    "Q_rot": (
        "The queries turned by rotary positions: each pair of dimensions rotated by an angle "
        "proportional to the token's position, so that a query·key score depends on how far apart "
        "the two tokens are."
    ),
    "K_rot": (
        "The keys turned by rotary positions, by the same angles as the queries at the same "
        "position: a score then depends on the distance between the tokens, not where they are."
    ),
    "rms": "RMSNorm's divisor: the root mean square of each token's vector, √(mean(x²) + ε).",
    "gate": (
        "The gated feed-forward network's gate: x·W1 + b1, F units per token, put through the "
        "activation and multiplied into the up projection."
    ),
    "up": (
        "The gated feed-forward network's up projection: x·W3 + b3, F units per token, which the "
        "activated gate scales element by element."
    ),
    "cross.Q": "Each decoder token's query, compared with the keys of the source tokens.",
    "cross.K": "The keys of the source tokens, made from the encoder's output M.",
    "cross.V": (
        "The values of the source tokens, made from the encoder's output M: what "
        "cross-attention brings into the decoder."
    ),
    "scores": (
        "Every query dotted with every key: row i, column j says how well token i's query "
        "matches token j's key."
    ),
    "scaled": (
        "The scores divided by a scale (the engine's √c, c: the head's width) so that the "
        "softmax does not saturate."
    ),
    "mask": (
        "Which keys each query may see (True = may); the others' scores become −∞, so their "
        "weight is 0."
    ),
    "dropout.A": (
        "The attention weights after dropout: the dropped ones are 0, the kept ones scaled up by "
        "1 / (1 − p), so a row no longer sums to 1."
    ),
    "dropout.mask": "The dropout draw: 1 keeps a weight (scaled up by 1 / (1 − p)), 0 drops it.",
    "A": (
        "The softmax of each row of the scaled scores: how much of each token's value row i "
        "takes; every row sums to 1."
    ),
    "C": "The head's output: for each token, the attention-weighted mix of the value vectors.",
    "concat": "The outputs of all heads side by side, one row per token.",
    "Z": (
        "The concatenated heads times W_O: the attention sublayer's output, back in the model's"
        " width C."
    ),
    "add": (
        "The residual connection: the sublayer's input plus its output, so information can flow"
        " past the sublayer."
    ),
    "mean": "LayerNorm's first step: the mean μ of each token's vector.",
    "std": "The spread of each token's vector, √(σ² + ε), that LayerNorm divides by.",
    "normalized": "Each token's vector minus its mean, divided by its spread: mean 0, spread 1.",
    "norm.out": (
        "The normalised vectors scaled by γ and shifted by β, two learned vectors of C numbers "
        "(RMSNorm: divided by their root mean square and scaled by g, with no shift)."
    ),
    "hidden": (
        "The feed-forward network's wide layer: x·W1 + b1 through the activation, F units per "
        "token (gated: times the up projection x·W3 + b3)."
    ),
    "ffn.out": (
        "The hidden units mapped back to the model's width C: the feed-forward sublayer's output."
    ),
    "block.out": "What this layer hands to the next: the result of its last sublayer.",
    "output": (
        "The stack's final vectors, one per token (after a final LayerNorm in a pre-LN model)."
    ),
    "logits": (
        "One score per vocabulary token at each position: the final vectors times the output "
        "matrix."
    ),
    "probs": "The logits through a softmax: the probability of each token coming next.",
    "class.logits": "One score per class, from the pooled vector times the classifier matrix.",
    "class.probs": "The class logits through a softmax: the probability of each class.",
    "pooled": "The mean of the encoder's output vectors: one vector for the whole input.",
    "embedding": "The pooled vector divided by its length: the sentence embedding, of length 1.",
    "weights": (
        "A weight matrix that the inputs are multiplied by: learned in a model, drawn at random "
        "or written by hand in the walkthroughs."
    ),
    "head.alone": "One head's matrix times its own transpose, computed alone to check the batch.",
    "max_abs": "The largest |value| after each block, to see whether the numbers blow up.",
    "output_ids": "The token ids the decoding chose, one per step, after the start token.",
    "scores_2": "Token 2 (journey) as the query: its dot product with every input.",
    "weights_2_sum": "Those scores divided by their sum: a first, crude normalisation.",
    "weights_2": "The softmax of token 2's scores: its attention weights, summing to 1.",
    "context_2": "Token 2's context vector: the inputs mixed by its attention weights.",
    "query_2": "Token 2's query, x_2·Wq.",
    "score_22": "One score: token 2's query dotted with token 2's key.",
    "mask_simple": "The causal mask: ones on and below the diagonal.",
    "masked_simple": "The attention weights with the weights above the diagonal zeroed.",
    "masked_simple_norm": "The zeroed weights renormalised so that each row sums to 1 again.",
    "ones": "Dropout on a matrix of ones: the kept entries are scaled by 1 / (1 − p).",
    "a": "A small 4-d tensor (batch × heads × tokens × width) to show a batched product.",
    "a_aT": "Each head's matrix times its own transpose, all in one batched product.",
    "split": "The projection's columns split into H heads of D columns each.",
    "inputs": "The six input vectors x_1 ... x_6, one per word.",
    "example": "A small softmax worked by hand.",
    "given": "The article's hand-written numbers.",
    "formula": "The article's variant of the formula, computed beside the textbook one.",
    "block": "One whole block, as the article's code computes it.",
    "bias": "A learned bias vector, added after the projection.",
}
