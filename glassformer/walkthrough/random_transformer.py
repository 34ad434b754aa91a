"""The Random Transformer (Sanseviero, seed 002): "Hello World" -> "Hola Mundo", every step.

The article's hand-written embeddings, heads and printed W_O first (its numbers exactly), then its
seeded random blocks with its own code and drawing order (the overflow experiment), then
glassformer's own `hello-world` model with seeded weights, decoding greedily from SOS.
"""

from __future__ import annotations

import math

import numpy as np

from glassformer import reference as R
from glassformer import weights
from glassformer.config import preset
from glassformer.decoding import greedy
from glassformer.tokenizer import article_tokenizer
from glassformer.trace import Trace, current, scope, tap, tracing
from glassformer.walkthrough.narrate import narrator

# -- The Random Transformer: the article's hand-written numbers ---------------------------------

TOKENS = ["Hello", "World"]
EMBEDDINGS = np.array([[1, 2, 3, 4], [2, 3, 4, 5]], dtype=np.float64)  # (2, 4)
E_PRINTED = np.array([[1, 3, 3, 5], [2.84, 3.99, 4, 6]])  # the article's encoder input
# The article's code matrices (its LaTeX differs for WQ1 and WK2; the printed outputs use these).
HEADS = {
    "head1": {
        "WQ": [[0, 0, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0]],
        "WK": [[1, 0, 1], [0, 1, 0], [1, 0, 1], [0, 1, 0]],
        "WV": [[0, 1, 1], [1, 0, 0], [1, 0, 1], [0, 1, 0]],
    },
    "head2": {
        "WQ": [[1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 1, 1]],
        "WK": [[0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 0]],
        "WV": [[1, 0, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0]],
    },
}
# W_O as the article printed it (drawn with np.random.randn, no seed). (6, 4)
W_O = np.array(
    [
        [0.79445237, 0.1081456, 0.27411536, 0.78394531],
        [0.29081936, -0.36187258, -0.32312791, -0.48530339],
        [-0.36702934, -0.76471963, -0.88058366, -1.73713022],
        [-0.02305587, -0.64315981, -0.68306653, -1.25393866],
        [0.29077448, -0.04121674, 0.01509932, 0.13149906],
        [0.57451867, -0.08895355, 0.02190485, 0.24535932],
    ]
)
SOS_EMBEDDING = np.array([[1.0, 0, 0, 0]])
# The article's decoder cells, as printed (their weights were drawn with np.random.randn and no
# seed, so only what follows from printed numbers can be recomputed; shared/golden rt_07).
DECODER_SELF_ATTN_PRINTED = np.array([[2.19334924, 10.61851198, -4.50089666, -2.76366551]])
DECODER_SELF_LN_PRINTED = np.array([[0.17236212, 1.54684892, -1.0828824, -0.63632864]])
DECODER_CROSS_ATTN_PRINTED = np.array([[1.57651431, 4.92489307, -0.08644448, -0.46776051]])
DECODER_CROSS_LN_PRINTED = np.array([[-0.44406723, 1.6552893, -0.19984632, -1.01137575]])
VOCABULARY = ["hello", "mundo", "world", "how", "?", "EOS", "SOS", "a", "hola", "c"]
# The logits whose softmax the article prints (its first version of the cell; the logits it
# prints now belong to a later run: rt_07 linear_head).
LOGITS_PRINTED_PROBS = np.array(
    [-0.39929948, 0.96345013, 2.77090264, 0.25651866, -0.84738762, -1.67834992, -0.29583529,
     -3.55515281, 2.97453801, -1.10682376]
)  # fmt: skip


def article_positions(T: int, C: int) -> np.ndarray:
    """The article's evaluated variant: dimension index j (not the pair index) in the exponent,
    sin(pos / 10000^(2j/C)) on even j, cos on odd j. It gives its printed [0.84, 0.99, 0, 1]."""
    pos = np.arange(T, dtype=np.float64)[:, None]
    j = np.arange(C, dtype=np.float64)[None, :]
    angle = pos / 10000.0 ** (2 * j / C)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def article_layer_norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The article's code: (x - mean) / (std + eps), population std, no γ or β."""
    return (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps)


def _article_part(t) -> np.ndarray:
    """Embeddings, positions, both heads (÷√3 and ÷30), concat, W_O, residual + LayerNorm."""
    t(
        "embeddings",
        EMBEDDINGS,
        "Hello -> [1,2,3,4], World -> [2,3,4,5]",
        rows=TOKENS,
        note="Each token becomes a vector of d_model = 4 numbers (the article picks them by hand).",
    )
    t(
        "positions.standard",
        R.sinusoidal_positions(2, 4),
        "PE(pos,2i) = sin(pos/10000^(2i/d)), PE(pos,2i+1) = cos(pos/10000^(2i/d))",
        rows=TOKENS,
        note="Sinusoidal positions by the standard formula (what glassformer uses).",
    )
    t(
        "positions.article",
        article_positions(2, 4),
        "sin/cos(pos / 10000^(2j/d)), j = dimension",
        rows=TOKENS,
        note="The article's printed positions [0,1,0,1] and [0.84,0.99,0,1] come from a "
        "variant that puts the dimension index j in the exponent; they differ from the standard "
        "formula in dimensions 1-3 of World.",
    )
    t(
        "encoder_input.standard",
        EMBEDDINGS + R.sinusoidal_positions(2, 4),
        "E = X + PE",
        rows=TOKENS,
        note="The encoder input with the standard positions.",
    )
    E = t(
        "encoder_input.E",
        E_PRINTED,
        "E = X + PE (as printed, rounded)",
        rows=TOKENS,
        note="From here on we use the article's literal E = [[1,3,3,5],[2.84,3.99,4,6]] so that "
        "every number matches the article.",
    )
    heads, heads30 = [], []
    for h, W in HEADS.items():
        WQ, WK, WV = (np.array(W[k], dtype=np.float64) for k in ("WQ", "WK", "WV"))
        t(
            f"{h}.WQ",
            WQ,
            "Wq (d x c = 4 x 3), the article's hand-written matrix",
            note="Each head has its own query, key and value matrices; this is its query matrix.",
        )
        t(f"{h}.WK", WK, "Wk (4 x 3)", note="Its key matrix.")
        t(f"{h}.WV", WV, "Wv (4 x 3)", note="Its value matrix.")
        # The engine stores weights (out, in): X·Wq is linear(X, Wq.T).
        Q = t(f"{h}.Q", R.linear(E, WQ.T), "Q = E·Wq", rows=TOKENS, note="Queries.")
        K = t(f"{h}.K", R.linear(E, WK.T), "K = E·Wk", rows=TOKENS, note="Keys.")
        V = t(f"{h}.V", R.linear(E, WV.T), "V = E·Wv", rows=TOKENS, note="Values.")
        with scope(h):
            heads.append(R.attention(Q, K, V))
        with scope(f"div30.{h}"):
            heads30.append(R.attention(Q, K, V, scale=30.0))
        trace = current()
        trace.annotate(f"{h}.scores", "Scores: every query against every key.")
        trace.annotate(f"{h}.scaled", "Divided by √3 (the key dimension).")
        trace.annotate(
            f"{h}.A",
            "Softmax row by row: almost all weight on World (the scores "
            "are far apart, so the softmax is nearly one-hot).",
        )
        trace.annotate(f"{h}.C", f"{h}'s output: the weighted sum of the value rows.")
        trace.annotate(
            f"div30.{h}.A", "The article's temporary ÷30 instead of ÷√3: softer weights."
        )
    concat = t(
        "div30.concat",
        np.concatenate(heads30, axis=1),
        "concat(C_1, C_2)  (2 x 6)",
        rows=TOKENS,
        note="With ÷30 instead of ÷√3 the softmax is less extreme; the two "
        "head outputs side by side.",
    )
    t(
        "W_O",
        W_O,
        "W_O (6 x 4), as printed by the article",
        note="The output projection brings 2 heads x 3 dims back to d_model = 4.",
    )
    Z = t(
        "div30.Z",
        concat @ W_O,
        "Z = concat(C_1, C_2)·W_O",
        rows=TOKENS,
        note="The multi-head attention output.",
    )
    EZ = t(
        "residual.E_plus_Z",
        E + Z,
        "E + Z",
        rows=TOKENS,
        note="Residual connection: add the block's input to its output.",
    )
    t("residual.mean", EZ.mean(-1), "μ = mean of each row", cols=TOKENS, note="Row means.")
    t(
        "residual.std",
        EZ.std(-1),
        "σ = population std of each row",
        cols=TOKENS,
        note="Row standard deviations (population, as NumPy's std).",
    )
    t(
        "residual.layernorm_article",
        article_layer_norm(EZ),
        "(x - μ) / (σ + 1e-6)",
        rows=TOKENS,
        note="LayerNorm as the article's code computes it.",
    )
    with scope("residual.layernorm"):
        formula = R.layer_norm(EZ, np.ones(4), np.zeros(4), eps=1e-6)
    t(
        "residual.layernorm_formula",
        formula,
        "(x - μ) / √(σ² + ε)·γ + β, ε = 1e-6",
        rows=TOKENS,
        note="LayerNorm by the formula in the article's text (and glassformer's); the "
        "two agree to < 1e-7 here.",
    )
    t(
        "softmax.example",
        R.softmax(np.array([1.0, 2.0, 3.0])),
        "softmax([1, 2, 3])",
        note="Softmax turns any row into positive weights that sum to 1.",
    )
    return E


# -- The Random Transformer: seeded random weights, the article's code --------------------------


def article_random_block(x, residual: bool, naive: bool, rng=np.random):
    """One encoder block exactly as the article's code draws and applies it (np.random order:
    WQ x2, WK x2, WV x2, W1, b1, W2, b2, then W_O inside multi-head attention)."""
    WQs = [rng.randn(4, 3) for _ in range(2)]
    WKs = [rng.randn(4, 3) for _ in range(2)]
    WVs = [rng.randn(4, 3) for _ in range(2)]
    W1, b1, W2, b2 = rng.randn(4, 8), rng.randn(8), rng.randn(8, 4), rng.randn(4)
    heads = []
    for h in range(2):
        with scope(f"head{h}"):
            heads.append(R.attention(x @ WQs[h], x @ WKs[h], x @ WVs[h], naive=naive))
    Z = tap("Z", np.concatenate(heads, axis=1) @ rng.randn(6, 4))
    if residual:
        Z = tap("norm1", article_layer_norm(Z + x))
    out = tap("ffn", R.relu(Z @ W1 + b1) @ W2 + b2)
    return tap("out", article_layer_norm(out + Z) if residual else out)


def _overflow_part(t, E: np.ndarray, seed: int) -> None:
    np.random.seed(seed)
    with scope("seeded.block"):
        one = article_random_block(E, residual=False, naive=True)
    t(
        "seeded.one_block",
        one,
        "FFN(MultiHead(E)) with np.random.seed(0) weights",
        rows=TOKENS,
        note="Random weights (np.random.seed(0), the article's code and drawing order): one "
        "encoder "
        "block without residual connections or LayerNorm. Values already grow.",
    )
    np.random.seed(seed)
    with scope("seeded.block_residual_ln"):
        one = article_random_block(E, residual=True, naive=True)
    t(
        "seeded.one_block_residual_ln",
        one,
        "LN(FFN(LN(Z + E)) + LN(Z + E))",
        rows=TOKENS,
        note="The same block with residual + LayerNorm (same seed).",
    )
    runs = {"naive": (False, True), "stable": (False, False), "residual_ln": (True, False)}
    notes = {
        "naive": "6 blocks, no residual/LayerNorm, the article's naive softmax exp(x)/Σexp(x): "
        "exp overflows and the output is NaN, as in the article.",
        "stable": "6 blocks, no residual/LayerNorm, max-subtracted softmax: no NaN, but the values "
        "are huge.",
        "residual_ln": "6 blocks with residual + LayerNorm: finite, normalised, and the two rows "
        "become nearly identical.",
    }
    for run, (residual, naive) in runs.items():
        np.random.seed(seed)
        x, peaks = E, []
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(6):
                with scope(f"overflow.{run}.block{k + 1}"):
                    x = article_random_block(x, residual, naive)
                peaks.append(float(np.nanmax(np.abs(x))) if np.isfinite(x).any() else math.nan)
        t(
            f"overflow.{run}.max_abs",
            np.array(peaks),
            "max |x| after each block",
            cols=[f"block{i + 1}" for i in range(6)],
            note=notes[run],
        )
        t(f"overflow.{run}.output", x, "encoder output after 6 blocks", rows=TOKENS)


# -- The Random Transformer: glassformer's own model, decoder and generation --------------------


def _article_decoder(t) -> None:
    """The article's own decoder step as far as its printed numbers carry it: the masked
    self-attention output of SOS (printed; its weights were never seeded), its residual +
    LayerNorm (recomputed: equal to the printed row), the encoder-decoder attention (where the
    article's printed numbers stop following from each other), and the output head's softmax
    (recomputed from the logits it came from)."""
    x0 = SOS_EMBEDDING + R.sinusoidal_positions(1, 4)  # (1, 4)
    a = t(
        "decoder.article.self_attn",
        DECODER_SELF_ATTN_PRINTED,
        "masked self-attention of SOS + PE(0), as the article printed it",
        rows=["SOS"],
        note="The article's first decoder sublayer, printed. Its Wq, Wk, Wv and W_O were drawn "
        "with np.random.randn and no seed, so no one can recompute this row: it is taken as "
        "printed (with one token, the mask hides nothing and the attention weight is 1).",
    )
    y = t(
        "decoder.article.self_ln",
        article_layer_norm(x0 + a),
        "LayerNorm(SOS + PE(0) + self-attention), the article's (x - mean)/(std + 1e-6)",
        rows=["SOS"],
        note="Computed here from the two rows above: the residual, then the article's "
        "LayerNorm. It equals the article's printed [0.172, 1.547, -1.083, -0.636] to 8 "
        "decimals: the article's numbers, carried one sublayer further.",
    )
    c = t(
        "decoder.article.cross_attn",
        DECODER_CROSS_ATTN_PRINTED,
        "encoder-decoder attention: Q from the decoder, K and V from the encoder output",
        rows=["SOS"],
        note="The article's encoder-decoder attention output, printed (unseeded weights again, "
        "and an encoder output it assumes rather than computes).",
    )
    t(
        "decoder.article.cross_ln",
        article_layer_norm(y + c),
        "LayerNorm(previous + encoder-decoder attention)",
        rows=["SOS"],
        note="Here the article stops giving numbers that follow from each other: this residual "
        "+ LayerNorm of its two printed rows is [0.084, 1.603, -0.854, -0.833], while it prints "
        "[-0.444, 1.655, -0.200, -1.011] (a cell left from an earlier run), and its FFN output "
        "after it is not even layer-normalised. From here on the walkthrough uses glassformer's "
        "own model with seeded weights.",
    )
    t(
        "decoder.article.probs",
        R.softmax(LOGITS_PRINTED_PROBS),
        "softmax(logits): the next token's probabilities",
        cols=VOCABULARY,
        note="The article's output head, recomputed: the softmax of the logits its printed "
        "probabilities came from equals them to 8 decimals. 'hola' is the most likely "
        "(0.468), so greedy decoding writes 'hola' first, as the article says.",
    )


def _model_part(t, seed: int, std: float) -> None:
    cfg = preset("hello-world")
    tok = article_tokenizer()
    t(
        "decoder.sos_input_article",
        SOS_EMBEDDING + R.sinusoidal_positions(1, 4),
        "SOS + PE(0)",
        rows=["SOS"],
        note="The article's decoder starts from SOS = [1,0,0,0] plus position 0: [1,1,0,1].",
    )
    _article_decoder(t)
    p = weights.init(cfg, seed=seed, std=std)
    src = tok.encode("hello world")
    with scope("model"):
        memory = R.encoder(p, cfg, src)
    t(
        "model.encoder_output",
        memory,
        "M = Encoder(hello world)",
        rows=["hello", "world"],
        note=f"Now glassformer's own model with the article's sizes (preset hello-world: "
        f"d_model 4, "
        f"2 heads of 3, FFN 8, 6+6 blocks, 10-word vocabulary), seeded random weights "
        f"N(0, {std}²) (seed {seed}), standard positions, post-LN. With the article's N(0, 1) "
        "weights the 6 post-LN blocks make every row identical (the convergence seen above), so "
        "every step would predict the same word. The encoder output M feeds every decoder "
        "block's cross-attention.",
    )

    def step(ids: list[int]) -> np.ndarray:
        with scope(f"model.step{len(ids) - 1}"):
            logits = R.lm_logits(p, cfg, R.decoder(p, cfg, ids, memory))[-1]
        n = len(ids) - 1
        t(
            f"generate.step{n}.probs",
            R.softmax(logits),
            "softmax(h_last·W_out + b)",
            cols=tok.vocab,
            note=f"Step {n}: the decoder reads {' '.join(tok.tokens(ids))}; linear "
            "+ softmax over the 10-word vocabulary gives the next-token probabilities.",
        )
        return logits

    gen = greedy(
        step, [tok.bos_id], max_new_tokens=cfg.max_len - 1, eos_id=tok.eos_id, max_len=cfg.max_len
    )
    words = tok.tokens(gen.ids)
    last = f"model.step{len(gen.ids) - 2}.decoder.0"
    for name, note in (
        (
            f"{last}.self_attn.head0.scaled",
            "Inside the decoder at the last step, block 0, head 0: "
            "masked self-attention scores; the mask sets every future position to -inf...",
        ),
        (
            f"{last}.self_attn.head0.A",
            "...so after the softmax each token attends only to itself "
            "and the tokens before it (zeros above the diagonal).",
        ),
        (
            f"{last}.cross_attn.head0.A",
            "Cross-attention: queries from the decoder, keys and values "
            "from the encoder output M; each decoder token weighs 'hello' and 'world'.",
        ),
    ):
        current().annotate(name, note)
    why = "EOS" if gen.stopped_at_eos else f"max_len {cfg.max_len}"
    t(
        "generate.output_ids",
        np.array(gen.ids, dtype=float),
        "greedy: argmax at every step",
        cols=words,
        note=f"Greedy decoding from SOS stops at {why}: '{' '.join(words)}'. The "
        "weights are random, so this is no translation yet (as the article says).",
    )


def hello_world(seed: int = 0, std: float = 0.3) -> Trace:
    """The Random Transformer, every step, as a trace (labels: encoder = hello world)."""
    labels = {"encoder": ["hello", "world"], "seeded": TOKENS, "overflow": TOKENS}
    labels |= {"head1": TOKENS, "head2": TOKENS, "div30": TOKENS}
    with tracing(labels=labels) as trace:
        t = narrator()
        E = _article_part(t)
        _overflow_part(t, E, seed)
        _model_part(t, seed, std)
    _decoder_labels(trace)
    return trace


def _decoder_labels(trace: Trace) -> None:
    if "generate.output_ids" in trace:
        trace.labels["decoder"] = trace.step("generate.output_ids").cols
