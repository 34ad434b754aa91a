"""From 2017 to today (`glassformer walkthrough modern`): four changes between the 2017
Transformer and today's decoders, each shown as the same matrices before and after.

Vaswani et al. 2017 ("Attention Is All You Need") add sinusoidal positions to the embeddings,
normalise with LayerNorm, use a ReLU feed-forward network and give every attention head its own
keys and values. Today's decoders (Llama 2 and 3, Qwen2, Mistral) turn Q and K by rotary
positions instead (Su et al. 2021, RoFormer), normalise with RMSNorm (Zhang & Sennrich 2019), gate
the feed-forward network (SwiGLU: Shazeer 2020, "GLU Variants Improve Transformer") and share each
key/value head among a group of query heads (grouped-query attention: Ainslie et al. 2023; one
shared head is multi-query attention: Shazeer 2019). The input is the Random Transformer's
"Hello World" (its hand-picked embeddings, d_model 4) with seeded weights, no biases (as Llama).

Every number is the reference engine's: `reference.rotary` and `rotary_angles`,
`multi_head_attention`, `layer_norm` and `rms_norm`, `ffn`; parameter counts are `weights.spec`'s.
This module chooses the inputs and lays matrices side by side (parts 1 and 2); the feed-forward
and attention parts are in `since_2017_layers.py`, and what both stand on (the toy decoder, the
real configs, the KV cache's bytes in closed form) in `since_2017_configs.py`. No torch is
imported: the walkthrough starts fast.
"""

from __future__ import annotations

import numpy as np

from glassformer import reference as R
from glassformer import weights
from glassformer.config import Config
from glassformer.trace import Trace, scope, tracing
from glassformer.walkthrough import since_2017_layers
from glassformer.walkthrough.narrate import narrator
from glassformer.walkthrough.random_transformer import EMBEDDINGS, TOKENS
from glassformer.walkthrough.since_2017_configs import ATTN, NORM, STD, n_weights, toy

# Shapes: T tokens (2)  C d_model (4)  H heads  KV key/value heads  D head dim  r rotated dims

SHIFT = 5  # the rotary invariance check moves both tokens this many positions on
GRID = 4  # the score grid puts a query and a key at positions 0 .. GRID-1


def rotation_matrix(m: int, cfg: Config) -> np.ndarray:
    """RoPE at position m as a (D, D) matrix R(m): `reference.rotary` applied to each unit vector
    (column j is e_j turned), so that a row x turned is x·R(m)ᵀ."""
    D = cfg.head_dim
    cos, sin = R.rotary_angles(np.full(D, m), cfg.rope_dim, cfg.rope_theta)  # (D, r/2)
    return R.rotary(np.eye(D), cos, sin).T  # (D, D)


def modern(seed: int = 0) -> Trace:
    """From 2017 to today, every step, as a trace: rotary positions, RMSNorm, SwiGLU and
    grouped-query attention, each beside what it replaced, on "Hello World"."""
    parts = ("positions", "norms", "ffn", "relu", "swiglu", "gqa", "mha_copied")
    with tracing(labels={p: list(TOKENS) for p in parts}) as trace:
        t = narrator()
        _positions(t, trace, seed)
        x = _norms(t, trace)
        since_2017_layers.feed_forward(t, trace, x, seed)
        since_2017_layers.grouped_query(t, trace, x, seed)
    return trace


# -- 1. sinusoidal positions added to X -> rotary positions turning Q and K ----------------------


def _positions(t, trace: Trace, seed: int) -> None:
    rot = toy(positions="rotary")
    p = weights.init(rot, seed=seed, std=STD)  # one head's Wq, Wk, Wv, W_O: before and after
    X = t(
        "positions.X",
        EMBEDDINGS,
        "X: Hello -> [1,2,3,4], World -> [2,3,4,5]",
        rows=TOKENS,
        note="The same input for every change below: the Random Transformer's two tokens, "
        f"d_model 4, with seeded weights N(0, {STD}²) (seed {seed}) and no biases. Here one "
        "attention head of D = 4 reads them, first as in 2017, then as today.",
    )
    t(
        "positions.WQ",
        p[f"{ATTN}.q.weight"].T,
        f"Wq (C x D = 4 x 4), seeded N(0, {STD}²)",
        note="The head's query matrix, the same before and after (used as X·Wq).",
    )
    t("positions.WK", p[f"{ATTN}.k.weight"].T, "Wk (4 x 4)", note="Its key matrix.")
    T = len(TOKENS)
    P = t(
        "positions.sinusoidal.P",
        R.sinusoidal_positions(T, X.shape[1]),
        "PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(pos / 10000^(2i/C))",
        rows=TOKENS,
        note="2017 (Vaswani et al. §3.5): one vector per position, added to the embeddings "
        "before the first layer. Position 0 is [0, 1, 0, 1], position 1 [0.84, 0.54, 0.01, 1].",
    )
    E = t(
        "positions.sinusoidal.input",
        X + P,
        "X + P",
        rows=TOKENS,
        note="What the 2017 attention reads: content and position mixed in one vector.",
    )
    mask = R.causal_mask(T)
    with scope("positions.sinusoidal"):
        R.multi_head_attention(p, ATTN, E, E, mask, toy())
    P5 = R.sinusoidal_positions(T + SHIFT, X.shape[1])[SHIFT:]  # (T, C): positions 5 and 6
    with scope("positions.sinusoidal_shifted"):
        R.multi_head_attention(p, ATTN, X + P5, X + P5, mask, toy())
    trace.annotate(
        "positions.sinusoidal.head0.scores",
        "Ω = (X + P)·Wq·((X + P)·Wk)ᵀ: every score mixes content with both absolute positions.",
    )
    trace.annotate(
        "positions.sinusoidal_shifted.head0.scores",
        f"The same two tokens moved {SHIFT} positions on (P of positions {SHIFT} and "
        f"{SHIFT + 1}): the scores change, although the tokens are as far apart as before.",
    )
    _rotary(t, trace, p, rot, X, mask)
    _grids(t, trace, p, rot, X)


def _rotary(t, trace: Trace, p, rot: Config, X, mask) -> None:
    T, r = X.shape[0], rot.rope_dim
    cos, sin = R.rotary_angles(np.arange(T), r, rot.rope_theta)  # (T, r/2)
    at = [f"m={m}" for m in range(T)]
    pairs = [f"i={i}" for i in range(r // 2)]
    t(
        "positions.rotary.cos",
        cos,
        f"cos(m·θ_i), θ_i = {rot.rope_theta:g}^(-2i/r), r = {r}",
        rows=at,
        cols=pairs,
        note="Today (Su et al. 2021, RoFormer; Llama): nothing is added to X. Instead each "
        "query and key is turned, pair of dimensions by pair, by an angle m·θ_i proportional to "
        "its position m. Pair 0 turns 1 radian per position, pair 1 only 0.01.",
    )
    t("positions.rotary.sin", sin, "sin(m·θ_i)", rows=at, cols=pairs, note="And the sines.")
    dims = [f"d{j}" for j in range(rot.head_dim)]
    t(
        "positions.rotary.R_1",
        rotation_matrix(1, rot),
        "R(m) at m = 1: q_rot = R(m)·q  (D x D)",
        rows=dims,
        cols=dims,
        note="The turn at position 1 as a matrix (reference.rotary applied to each unit vector). "
        f"In Hugging Face's rotate_half layout dimension i pairs with i + {r // 2}: d0 and d2 "
        "turn by cos 1 = 0.54, sin 1 = 0.84; d1 and d3 barely move. R(0) is the identity.",
    )
    with scope("positions.rotary"):
        R.multi_head_attention(p, ATTN, X, X, mask, rot, positions=np.arange(T))
    with scope("positions.rotary_shifted"):
        R.multi_head_attention(p, ATTN, X, X, mask, rot, positions=np.arange(T) + SHIFT)
    for name, note in (
        ("head0.Q", "Q = X·Wq, from X alone: no position in it yet."),
        ("head0.Q_rot", "Q turned: Hello (m = 0) is unchanged, World's row turned by R(1)."),
        ("head0.K", "K = X·Wk, from X alone."),
        ("head0.K_rot", "K turned by the same angles at the same positions."),
        (
            "head0.scores",
            "Ω = Q_rot·K_rotᵀ: q_m·R(m)ᵀR(n)·k_n = q_m·R(n − m)·k_n, so a score depends on "
            "the two contents and on n − m only.",
        ),
    ):
        trace.annotate(f"positions.rotary.{name}", note)
    trace.annotate(
        "positions.rotary_shifted.head0.Q_rot",
        f"Both tokens moved {SHIFT} positions on (m = {SHIFT}, {SHIFT + 1}): the turned queries "
        "change...",
    )
    trace.annotate(
        "positions.rotary_shifted.head0.scores",
        "...but the scores are the same, to every printed digit: only the distance counts.",
    )


def _grids(t, trace: Trace, p, rot: Config, X) -> None:
    """One query (Hello's) and one key (World's) placed at every pair of positions (m, n)."""
    m = np.arange(GRID)
    at_m, at_n = [f"Hello@{i}" for i in m], [f"World@{j}" for j in m]
    PE = R.sinusoidal_positions(GRID, X.shape[1])  # (GRID, C)
    Qm = R.linear(X[0] + PE, p[f"{ATTN}.q.weight"])  # (GRID, D)
    Kn = R.linear(X[1] + PE, p[f"{ATTN}.k.weight"])  # (GRID, D)
    t(
        "positions.sinusoidal.grid",
        Qm @ Kn.T,
        "Ω[m, n] = (x_Hello + P_m)·Wq·((x_World + P_n)·Wk)ᵀ",
        rows=at_m,
        cols=at_n,
        note="2017: Hello's query at position m against World's key at position n. Along a "
        "diagonal (the same distance n − m) the scores differ: they depend on where the tokens "
        "are, not only on how far apart.",
    )
    angles = R.rotary_angles(m, rot.rope_dim, rot.rope_theta)  # cos, sin (GRID, r/2)
    q, k = trace["positions.rotary.head0.Q"][0], trace["positions.rotary.head0.K"][1]  # (D,)
    q_at = R.rotary(np.tile(q, (GRID, 1)), *angles)  # (GRID, D) Hello's query at each position
    k_at = R.rotary(np.tile(k, (GRID, 1)), *angles)  # (GRID, D)
    t(
        "positions.rotary.grid",
        q_at @ k_at.T,
        "Ω[m, n] = RoPE(q_Hello, m)·RoPE(k_World, n)",
        rows=at_m,
        cols=at_n,
        note="Today: the same query and key, turned. Every diagonal is constant (n − m = 1 reads "
        f"{grid_value(q_at, k_at, 0, 1)} wherever it stands): the score depends only on m − n.",
    )
    shifted = [
        np.abs(trace[f"positions.{k}_shifted.head0.scores"] - trace[f"positions.{k}.head0.scores"])
        for k in ("sinusoidal", "rotary")
    ]
    t(
        "positions.shift_change",
        np.array([d.max() for d in shifted]),
        f"max |Ω(m + {SHIFT}, n + {SHIFT}) − Ω(m, n)|",
        cols=["sinusoidal", "rotary"],
        note=f"Moving both tokens {SHIFT} positions on changes the 2017 scores by up to "
        f"{shifted[0].max():.3g} and the rotary ones by rounding only (float64): relative "
        "positions, for free, with no table and no parameters.",
    )


def grid_value(q_at: np.ndarray, k_at: np.ndarray, m: int, n: int) -> str:
    """One score of the rotary grid, as the note reads it (6 significant digits)."""
    return f"{float(q_at[m] @ k_at[n]):.6g}"


# -- 2. LayerNorm -> RMSNorm ---------------------------------------------------------------------


def _norms(t, trace: Trace) -> np.ndarray:
    """The same X through LayerNorm and RMSNorm (γ = 1, β = 0, g = 1: their initial values)."""
    ln, rms = toy(), toy(norm_kind="rmsnorm")
    X = t(
        "norms.X",
        EMBEDDINGS,
        "x: Hello and World, as above",
        rows=TOKENS,
        note="The same x for both norms. World = Hello + 1 in every dimension.",
    )
    with scope("norms.layernorm"):
        R.norm(weights.init(ln), NORM, X, ln)
    with scope("norms.rmsnorm"):
        out = R.norm(weights.init(rms), NORM, X, rms)
    mu = trace["norms.layernorm.mean"]
    g = weights.init(rms)[f"{NORM}.weight"]
    with scope("norms.centred"):
        R.rms_norm(X - mu, g, rms.ln_eps)
    ln_out = trace["norms.layernorm.out"]
    for name, note in (
        (
            "layernorm.mean",
            f"2017: LayerNorm first subtracts each row's mean μ ({mu[0, 0]:g} and {mu[1, 0]:g})...",
        ),
        ("layernorm.std", "...then divides by the spread √(σ² + ε)..."),
        (
            "layernorm.out",
            "...then scales by γ and shifts by β (1 and 0 here). Hello and World come out the same "
            f"row {np.round(ln_out[0], 3).tolist()}: subtracting the mean removed the +1.",
        ),
        (
            "rmsnorm.rms",
            "Today (Zhang & Sennrich 2019; Llama): RMSNorm skips the mean and divides by the root "
            "mean square √(mean(x²) + ε) alone.",
        ),
        (
            "rmsnorm.out",
            "x / rms · g, no β: the rows keep their mean and stay apart (Hello "
            f"{np.round(out[0], 3).tolist()}, World {np.round(out[1], 3).tolist()}).",
        ),
        (
            "centred.out",
            "RMSNorm of the centred x, x − μ, is LayerNorm exactly (with γ = 1, β = 0): the one "
            "thing RMSNorm drops is the centring (and β). Zhang & Sennrich report it as good, "
            "and 7%-64% faster to run.",
        ),
    ):
        trace.annotate(f"norms.{name}", note)
    t(
        "norms.out_means",
        np.stack([ln_out.mean(-1), out.mean(-1)], axis=1),
        "mean of each output row",
        rows=TOKENS,
        cols=["LayerNorm", "RMSNorm"],
        note="The mean RMSNorm does not subtract: LayerNorm's rows have mean 0, RMSNorm's keep "
        "μ / rms.",
    )
    t(
        "norms.params",
        np.array([n_weights(ln, NORM), n_weights(rms, NORM)], dtype=float),
        "weights per norm: γ, β (2C) vs g (C)",
        cols=["LayerNorm", "RMSNorm"],
        note="The parameters it drops: no β, so C fewer per norm (weights.spec). The next two "
        "parts read this RMSNorm output, as a Llama block does.",
    )
    return out
