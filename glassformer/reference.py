"""The NumPy float64 reference engine: the math of the two articles, line by line.

Pure functions over a parameter dict named by `weights.spec`, one sequence at a time (no batch
axis), every intermediate `tap`-ped under a stable name. This module is the definition that the
PyTorch engine is tested against; it is deliberately slow, unbatched and stateless. Every tap's
returned value is the one computed on, so an `intervene` block (see `trace`) can replace any step.

Notation (Raschka ch. 3; Sanseviero, "The Random Transformer"): X input rows, Q = X·Wq,
K = X·Wk, V = X·Wv, scores Ω = Q·Kᵀ, A = softmax(Ω / √c) row by row, C = A·V. Weights are stored
(out, in) like nn.Linear, so X·Wq is written `X @ Wq.T` with Wq the stored matrix. Today's decoders'
options (Llama, Qwen2, Mistral) are here too: rotary positions (RoPE) on Q and K, RMSNorm, the
gated FFN, grouped-query attention (KV key/value heads shared by groups of query heads), and
attention-only blocks (d_ff 0).

Shapes: T tokens (decoder)  S tokens (encoder)  C d_model  H heads  KV key/value heads
        D head dim  r rotated dims  F d_ff  V vocab
Masks: True = may attend.
"""

from __future__ import annotations

import math

import numpy as np

from glassformer import inputs
from glassformer.config import Config
from glassformer.decoding import softmax as stable_softmax
from glassformer.errors import InputError
from glassformer.glossary import (
    INPUT_NO_P,
    RMSNORM_OUT,
    ROTARY_SCORES,
    config_equations,
)
from glassformer.trace import scope, tap

Params = dict[str, np.ndarray]

# -- elementary functions -----------------------------------------------------------------------


def softmax(x: np.ndarray, axis: int = -1, naive: bool = False) -> np.ndarray:
    """softmax(x)_i = exp(x_i) / Σ_j exp(x_j), row by row.

    The stable form subtracts the row max first (same result, no overflow); a row that is entirely
    -inf (every position masked) gives zeros, not NaN. It is `decoding.softmax`, the package's one
    softmax (decoding may import no engine, so the definition lives there). `naive=True` is the
    Random Transformer's exp(x) / Σ exp(x), which overflows to NaN for large scores: kept to show
    why.
    """
    if not naive:
        return stable_softmax(x, axis)
    # the naive form's overflow (inf / inf = NaN) is the lesson, not a fault to warn about
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float64))
        return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm(x) = (x - μ) / √(σ² + ε) · γ + β, μ and σ² (population) over each row."""
    mu = tap("mean", x.mean(axis=-1, keepdims=True))  # (T, 1)
    var = x.var(axis=-1, keepdims=True)  # (T, 1)
    std = tap("std", np.sqrt(var + eps))  # (T, 1)
    xhat = tap("normalized", (x - mu) / std)  # (T, C)
    return tap("out", xhat * gamma + beta)  # (T, C)


def rms_norm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm(x) = x / √(mean(x²) + ε) · g (Zhang & Sennrich 2019): LayerNorm without the
    centring and without β, the mean of the squares over each row."""
    rms = tap("rms", np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps))  # (T, 1)
    return tap("out", x / rms * g, equation=RMSNORM_OUT)  # (T, C)


def norm(p: Params, name: str, x: np.ndarray, cfg: Config) -> np.ndarray:
    """The model's norm `name` (its weights `name.weight`, `name.bias`) applied to x: LayerNorm,
    or RMSNorm with norm_kind="rmsnorm". (T, C) -> (T, C)"""
    if cfg.norm_kind == "rmsnorm":
        return rms_norm(x, p[f"{name}.weight"], cfg.ln_eps)
    return layer_norm(x, p[f"{name}.weight"], p[f"{name}.bias"], cfg.ln_eps)


def linear(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """x·Wᵀ + b with W stored (out, in)."""
    y = x @ W.T
    if b is not None:
        y += b  # y is new: add in place rather than allocate another
    return y


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def silu(x: np.ndarray) -> np.ndarray:
    """SiLU / swish: x · σ(x), with σ(x) = (1 + tanh(x/2)) / 2 (no overflow for large |x|)."""
    return x * 0.5 * (1.0 + np.tanh(0.5 * x))


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x · Φ(x), exact (erf) form: 0.5 x (1 + erf(x / √2))."""
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969):
# erf on |x| <= 0.46875, erfc on (0.46875, 4] and beyond 4 (the algorithm of many C libraries).
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)  # fmt: skip
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)  # fmt: skip
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
          2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
          2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)  # fmt: skip
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
          1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
          3.43936767414372164e03, 1.23033935480374942e03)  # fmt: skip
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)  # fmt: skip
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
          6.05183413124413191e-2, 2.33520497626869185e-3)  # fmt: skip


def erf(x) -> np.ndarray:
    """erf(x) = 2/√π ∫₀ˣ exp(-t²) dt, element by element, to within a few units in the last place
    of `math.erf` (tested) at NumPy speed."""
    x = np.asarray(x, dtype=np.float64)
    y = np.abs(x)
    out = np.empty_like(y)
    near = y <= 0.46875  # erf = x·R(x²)
    z = y[near] * y[near]
    out[near] = x[near] * _rational(z, _ERF_A, _ERF_B)
    mid = ~near & (y <= 4.0)  # erfc = exp(-y²)·R(y)
    far = ~near & ~mid  # erfc = exp(-y²)/y·(1/√π - R(1/y²)/y²)
    v, w = y[mid], y[far]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        z = 1.0 / (w * w)
        tail = (1.0 / math.sqrt(math.pi) - z * _rational(z, _ERF_P, _ERF_Q)) / w
        for mask, r, u in ((mid, _rational(v, _ERF_C, _ERF_D), v), (far, tail, w)):
            u16 = np.trunc(u * 16.0) / 16.0  # exp(-u²) in two parts, as Cody does, for accuracy
            erfc = np.exp(-u16 * u16) * np.exp(-(u - u16) * (u + u16)) * r
            erfc[np.isinf(u)] = 0.0
            out[mask] = np.copysign(1.0 - erfc, x[mask])
    return out


def _rational(z: np.ndarray, P, Q) -> np.ndarray:
    """Cody's (P[-1]·zⁿ + P[0]·zⁿ⁻¹ + ... + P[-2]) / (zⁿ + Q[0]·zⁿ⁻¹ + ... + Q[-1]), by Horner's
    rule in place (a fresh array per step costs more than the arithmetic at these sizes)."""
    num, den = P[-1] * z, z.copy()
    for p_, q in zip(P[:-2], Q[:-1], strict=True):
        num += p_
        num *= z
        den += q
        den *= z
    num += P[-2]
    den += Q[-1]
    num /= den
    return num


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GPT-2's GELU: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


ACTIVATIONS = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh, "silu": silu}


def sinusoidal_positions(T: int, C: int, base: float = 10000.0, split: bool = False) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / base^(2i/C)); PE(pos, 2i+1) = cos(pos / base^(2i/C)). (T, C)

    split=True puts the same sines in the first ceil(C/2) dimensions and the cosines after them
    (Marian's layout); the angles are the same.
    """
    pos = np.arange(T, dtype=np.float64)[:, None]  # (T, 1)
    two_i = np.arange(0, C, 2, dtype=np.float64)  # (ceil(C/2),)
    angle = pos / base ** (two_i / C)  # (T, ceil(C/2))
    sin, cos = np.sin(angle), np.cos(angle[:, : C // 2])
    if split:
        return np.concatenate([sin, cos], axis=1)  # (T, C)
    P = np.zeros((T, C))
    P[:, 0::2] = sin
    P[:, 1::2] = cos
    return P


def rotary_angles(positions, r: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the rotary angles m·θ_i, θ_i = base^(-2i/r) for i < r/2, at each position m
    (Su et al. 2021, eq. 34). positions (T,) -> cos, sin (T, r/2)."""
    theta = 1.0 / base ** (np.arange(0, r, 2, dtype=np.float64) / r)  # (r/2,)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * theta  # (T, r/2)
    return np.cos(angle), np.sin(angle)


def rotary(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """RoPE (Su et al. 2021) in Hugging Face's "rotate_half" layout: in the first r dimensions of
    each row, the pair (x_i, x_{i+r/2}) is turned by the row's angle i,
    (x_i, x_{i+r/2}) -> (x_i cos - x_{i+r/2} sin, x_{i+r/2} cos + x_i sin); the other dimensions
    pass unchanged (partial rotary). x (T, D), cos and sin (T, r/2) -> (T, D)."""
    h = cos.shape[-1]  # r/2
    x1, x2, rest = x[:, :h], x[:, h : 2 * h], x[:, 2 * h :]  # (T, r/2), (T, r/2), (T, D - r)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], axis=-1)  # (T, D)


def causal_mask(T: int) -> np.ndarray:
    """mask[i, j] = j <= i: token i may attend to itself and earlier tokens. (T, T)"""
    return np.tril(np.ones((T, T), dtype=bool))


# -- attention ----------------------------------------------------------------------------------


def attention(Q, K, V, mask=None, scale: float | None = None, naive: bool = False, rotated=False):
    """C = softmax(Q·Kᵀ / √c) · V, with masked scores set to -inf before the softmax.

    Q (T, D), K (S, D), V (S, D), mask (T, S) bool or None; scale defaults to √D; rotated: Q and
    K were turned by RoPE (the scores' equation says so).
    """
    c = math.sqrt(Q.shape[-1]) if scale is None else scale
    scores = tap("scores", Q @ K.T, equation=ROTARY_SCORES if rotated else "")  # Ω (T, S)
    scaled = tap("scaled", scores / c, derive=("scores", lambda s: s / c))  # (T, S)
    if mask is not None:
        mask = tap("mask", mask)

    def probabilities(scaled):  # the same steps recompute A from a recorded `scaled`
        masked = scaled if mask is None else np.where(mask, scaled, -np.inf)  # (T, S)
        return softmax(masked, naive=naive)

    A = tap("A", probabilities(scaled), derive=("scaled", probabilities))  # (T, S)
    return tap("C", A @ V)  # (T, D)


def multi_head_attention(p: Params, name: str, X, Xkv, mask, cfg: Config, positions=None):
    """Each head h: C_h = attention(X·Wq_h, Xkv·Wk_g, Xkv·Wv_g); Z = concat(C_1..C_H)·W_O.

    X (T, C) gives the queries; Xkv (S, C) the keys and values (X itself for self-attention,
    the encoder output for cross-attention). X·Wq_h is the columns h·D:(h+1)·D of X·Wq (Wq_h is
    rows h·D:(h+1)·D of the stored Wq), so each projection is one matmul for all heads.
    Grouped-query attention (Ainslie et al. 2023): the H query heads come in KV groups of
    G = H / KV consecutive heads, and head h reads key/value head g = h // G (G = 1: g = h); the
    K and V of a shared head are recorded once, under `kv_head{g}`.
    positions (T,): self-attention's rotary positions (positions="rotary"): Q_h and K_g are turned
    by RoPE at them before the scores, Q_rot·K_rotᵀ.
    """
    D, KV = cfg.head_dim, cfg.kv_heads
    G = cfg.n_heads // KV  # query heads per key/value head
    proj = {}
    for which, src in (("q", X), ("k", Xkv), ("v", Xkv)):
        W = p[f"{name}.{which}.weight"]  # (H*D, C) for q; (KV*D, C) for k and v
        b = p[f"{name}.{which}.bias"] if cfg.has_qkv_bias else None
        proj[which] = linear(src, W, b)  # (T, H*D) or (S, KV*D)
    rope = None if positions is None else rotary_angles(positions, cfg.rope_dim, cfg.rope_theta)

    def turned(which: str, x):  # RoPE on one head's Q or K, (T, D)
        return x if rope is None else tap(f"{which}_rot", rotary(x, *rope))

    def kv_head(g: int):  # K_g, V_g (S, D)
        cols = slice(g * D, (g + 1) * D)
        K, V = tap("K", proj["k"][:, cols]), tap("V", proj["v"][:, cols])
        return turned("K", K), V

    shared = []
    if G > 1:
        for g in range(KV):
            with scope(f"kv_head{g}"):
                shared.append(kv_head(g))
    heads = []
    for h in range(cfg.n_heads):
        with scope(f"head{h}"):
            Q = turned("Q", tap("Q", proj["q"][:, h * D : (h + 1) * D]))  # (T, D)
            K, V = shared[h // G] if G > 1 else kv_head(h)  # (S, D)
            heads.append(attention(Q, K, V, mask, rotated=rope is not None))  # (T, D)
    concat = tap("concat", np.concatenate(heads, axis=-1))  # (T, H*D)
    return tap("Z", linear(concat, p[f"{name}.o.weight"], p.get(f"{name}.o.bias")))  # (T, C)


def ffn(p: Params, name: str, x, cfg: Config):
    """FFN(x) = act(x·W1 + b1)·W2 + b2; gated (Shazeer 2020; SwiGLU with silu), with the gate W1,
    the up projection W3 and the down projection W2: (act(x·W1 + b1) ⊙ (x·W3 + b3))·W2 + b2."""
    act = ACTIVATIONS[cfg.activation]

    def lin(x, w: str):
        return linear(x, p[f"{name}.{w}.weight"], p.get(f"{name}.{w}.bias"))

    eq = config_equations(cfg)  # this model's: its activation, biases, gate
    if cfg.ffn_kind == "gated":
        gate = tap("gate", lin(x, "w1"))  # (T, F)
        up = tap("up", lin(x, "w3"))  # (T, F)
        hidden = tap("hidden", act(gate) * up, equation=eq["hidden"])  # (T, F)
    else:
        hidden = tap("hidden", act(lin(x, "w1")), equation=eq["hidden"])  # (T, F)
    return tap("out", lin(hidden, "w2"), equation=eq["ffn_out"])  # (T, C)


def sublayer(p: Params, prefix: str, k: int, x, f, cfg: Config):
    """Residual + norm around sublayer f: post-LN LN(x + f(x)), or pre-LN x + f(LN(x)) (LN the
    LayerNorm or RMSNorm `norm{k}`)."""
    name = f"{prefix}.norm{k}"
    if cfg.norm == "post":
        y = tap(f"add{k}", x + f(x))
        with scope(f"norm{k}"):
            return norm(p, name, y, cfg)
    with scope(f"norm{k}"):
        h = norm(p, name, x, cfg)
    return tap(f"add{k}", x + f(h))


# -- blocks and stacks --------------------------------------------------------------------------


def _rotary_positions(T: int, cfg: Config):
    """Self-attention's rotary positions 0 .. T-1, or None without rotary positions."""
    return np.arange(T) if cfg.positions == "rotary" else None


def encoder_block(p: Params, i: int, X, mask, cfg: Config):
    """Self-attention -> add & norm -> FFN -> add & norm (no FFN with d_ff 0). X (S, C) -> (S, C)"""
    pre = f"encoder.layers.{i}"
    positions = _rotary_positions(len(X), cfg)

    def attn(x):
        with scope("self_attn"):
            return multi_head_attention(p, f"{pre}.self_attn", x, x, mask, cfg, positions)

    def feed_forward(x):
        with scope("ffn"):
            return ffn(p, f"{pre}.ffn", x, cfg)

    X = sublayer(p, pre, 1, X, attn, cfg)
    if cfg.d_ff:
        X = sublayer(p, pre, 2, X, feed_forward, cfg)
    return tap("out", X)


def decoder_block(p: Params, i: int, Y, memory, self_mask, cross_mask, cfg: Config):
    """Masked self-attention, cross-attention on the encoder output (encoder-decoder only), FFN
    (when d_ff > 0); each with add & norm.

    In cross-attention the queries come from the decoder (Y) and the keys and values from the
    encoder output (memory); rotary positions turn only self-attention's Q and K. The norms are
    numbered by the sublayers there are (no FFN with d_ff 0). Y (T, C), memory (S, C) or None ->
    (T, C).
    """
    pre = f"decoder.layers.{i}"
    positions = _rotary_positions(len(Y), cfg)

    def self_attn(y):
        with scope("self_attn"):
            return multi_head_attention(p, f"{pre}.self_attn", y, y, self_mask, cfg, positions)

    def cross_attn(y):
        with scope("cross_attn"):
            return multi_head_attention(p, f"{pre}.cross_attn", y, memory, cross_mask, cfg)

    def feed_forward(y):
        with scope("ffn"):
            return ffn(p, f"{pre}.ffn", y, cfg)

    Y = sublayer(p, pre, 1, Y, self_attn, cfg)
    k = 2
    if memory is not None:
        Y = sublayer(p, pre, 2, Y, cross_attn, cfg)
        k = 3
    if cfg.d_ff:
        Y = sublayer(p, pre, k, Y, feed_forward, cfg)
    return tap("out", Y)


def embed(p: Params, stack: str, ids, cfg: Config, types=None):
    """Token embeddings plus positions: input = X + P. ids (T,) -> (T, C).

    Options: X is scaled by √C (embed_scale); token-type rows are added (type_vocab_size; types
    (T,) default to 0); the sum goes through a LayerNorm or RMSNorm (embed_norm). Rotary positions
    add nothing here: they turn Q and K inside self-attention.
    """
    ids = np.asarray(ids, dtype=np.int64)
    T = ids.shape[0]
    table = "decoder" if cfg.share_embeddings else stack  # one matrix for source and target
    X = p[f"{table}.tok_embed.weight"][ids]  # (T, C)
    eq = config_equations(cfg)
    X = tap("X", X * math.sqrt(cfg.d_model) if cfg.embed_scale else X, equation=eq["X"])  # (T, C)
    x = X
    if cfg.positions not in ("none", "rotary"):
        if cfg.positions == "learned":
            P = p[f"{stack}.pos_embed.weight"][:T]
        else:
            P = sinusoidal_positions(T, cfg.d_model, split=cfg.positions == "sinusoidal_split")
        x = x + tap("P", P, equation=eq["P"])  # (T, C)
    if cfg.type_vocab_size:
        types = np.zeros(T, np.int64) if types is None else np.asarray(types, dtype=np.int64)
        x = x + tap("types", p[f"{stack}.type_embed.weight"][types])  # (T, C)
    if cfg.embed_norm:
        x = tap("sum", x)
        with scope("embed_norm"):
            x = norm(p, f"{stack}.embed_norm", x, cfg)
    no_p = cfg.positions in ("none", "rotary") and not (cfg.type_vocab_size or cfg.embed_norm)
    return tap("input", x, equation=INPUT_NO_P if no_p else "")  # (T, C)


def _final_norm(p: Params, stack: str, x, cfg: Config):
    if cfg.norm != "pre":
        return x
    with scope("norm"):
        return norm(p, f"{stack}.norm", x, cfg)


# -- the public entry points: their inputs are checked first (glassformer.inputs), the math after


def _decoder_call(p: Params, cfg: Config, fn: str, src_ids) -> None:
    """forward() and next_token_logits(): a decoder, src_ids exactly when there is an encoder."""
    if not cfg.has_decoder:
        raise InputError(
            f"{fn}() is for decoder and encoder-decoder models (this one is arch={cfg.arch!r}); "
            "use classify() or sentence_embedding()"
        )
    if cfg.arch == "encoder-decoder" and src_ids is None:
        raise InputError("an encoder-decoder model needs src_ids: give the source token ids")
    if cfg.arch == "decoder" and src_ids is not None:
        raise InputError("src_ids given to a decoder-only model: drop them")
    inputs.params(p, cfg)


def encoder(p: Params, cfg: Config, ids, valid=None, types=None):
    """The encoder stack: embed, then n_encoder_layers blocks. ids (S,) -> memory (S, C).

    valid (S,) bool marks real tokens: padded keys are never attended to. types (S,): token
    types (with type_vocab_size; default 0).
    """
    inputs.params(p, cfg)
    ids = inputs.token_ids(ids, cfg, "encoder")
    valid = inputs.valid_flags(valid, len(ids))
    inputs.token_types(types, len(ids), cfg)
    mask = None if valid is None else np.broadcast_to(valid, (len(ids),) * 2)
    with scope("encoder"):
        X = embed(p, "encoder", ids, cfg, types)
        for i in range(cfg.n_encoder_layers):
            with scope(str(i)):
                X = encoder_block(p, i, X, mask, cfg)
        return tap("output", _final_norm(p, "encoder", X, cfg))


def decoder(p: Params, cfg: Config, ids, memory=None, memory_valid=None):
    """The decoder stack under a causal mask, attending to `memory` if given. ids (T,) -> (T, C)."""
    inputs.params(p, cfg)
    ids = inputs.token_ids(ids, cfg, "decoder")
    T = len(ids)
    self_mask = causal_mask(T)
    cross_mask = None
    if memory is not None and memory_valid is not None:
        memory_valid = inputs.valid_flags(memory_valid, memory.shape[0], "src_valid")
        cross_mask = np.broadcast_to(memory_valid, (T, memory.shape[0]))
    with scope("decoder"):
        Y = embed(p, "decoder", ids, cfg)
        for i in range(cfg.n_decoder_layers):
            with scope(str(i)):
                Y = decoder_block(p, i, Y, memory, self_mask, cross_mask, cfg)
        return tap("output", _final_norm(p, "decoder", Y, cfg))


def lm_logits(p: Params, cfg: Config, hidden):
    """logits = hidden·W_outᵀ + b (W_out is the decoder embedding when tied; b if cfg.lm_bias).
    (T, C) -> (T, V)."""
    W = p["decoder.tok_embed.weight"] if cfg.tie_embeddings else p["lm_head.weight"]
    return tap(
        "logits", linear(hidden, W, p.get("lm_head.bias")), equation=config_equations(cfg)["logits"]
    )


def forward(p: Params, cfg: Config, ids, src_ids=None, src_valid=None):
    """Next-token logits (T, V) of a decoder-only or encoder-decoder model.

    ids are the decoder tokens (from SOS); src_ids the encoder tokens (encoder-decoder only).
    """
    _decoder_call(p, cfg, "forward", src_ids)
    memory = None
    if cfg.arch == "encoder-decoder":
        memory = encoder(p, cfg, src_ids, src_valid)
    logits = lm_logits(p, cfg, decoder(p, cfg, ids, memory, src_valid))
    # Only looked at, never computed on: computed when asked for (a trace recomputes the
    # probabilities from the recorded logits when they are read).
    tap("probs", lambda: softmax(logits), derive=("logits", softmax))
    return logits


def classify(p: Params, cfg: Config, ids, valid=None):
    """Encoder-only classifier: mean of the encoder outputs over real tokens, then a linear head.

    ids (S,) -> logits (n_classes,).
    """
    if cfg.arch != "encoder" or not cfg.n_classes:
        raise InputError(
            f"classify() needs arch='encoder' with n_classes > 0 (this one is arch={cfg.arch!r}, "
            f"n_classes {cfg.n_classes}); use forward() or sentence_embedding()"
        )
    H = encoder(p, cfg, ids, valid)  # (S, C)
    keep = np.ones(len(ids), bool) if valid is None else np.asarray(valid, bool)
    pooled = tap("pooled", H[keep].sum(axis=0) / max(int(keep.sum()), 1))  # (C,); none: zeros
    logits = tap("logits", linear(pooled, p["classifier.weight"], p.get("classifier.bias")))
    tap("probs", softmax(logits))
    return logits


def sentence_embedding(p: Params, cfg: Config, ids, types=None):
    """Mean of the encoder outputs over the tokens, then divided by its L2 norm (the mean pooling
    of sentence-transformers, as all-MiniLM-L6-v2 is used). ids (S,) -> (C,)."""
    if not cfg.has_encoder:
        raise InputError(
            f"sentence_embedding() needs a model with an encoder (this one is arch={cfg.arch!r}); "
            "use forward() for a decoder's logits"
        )
    H = encoder(p, cfg, ids, types=types)  # (S, C)
    pooled = tap("pooled", H.mean(axis=0))  # (C,)
    return tap("embedding", pooled / max(np.linalg.norm(pooled), 1e-12))  # (C,)


def next_token_logits(p: Params, cfg: Config, src_ids=None, window: bool = False):
    """A step function for `decoding`: decoder ids so far -> logits of the next token (V,).

    The encoder runs once; the decoder is recomputed in full at every step (no cache here).
    window: past max_len ids, the decoder reads only the last max_len of them, at positions
    0 .. max_len-1 (a sliding window, as GPT-2-style models generate past their context).
    """
    _decoder_call(p, cfg, "next_token_logits", src_ids)
    memory = encoder(p, cfg, src_ids) if cfg.arch == "encoder-decoder" else None

    def step(ids):
        if window:
            ids = ids[-cfg.max_len :]
        return lm_logits(p, cfg, decoder(p, cfg, ids, memory))[-1]

    return step
