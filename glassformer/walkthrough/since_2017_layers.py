"""From 2017 to today, parts 3 and 4: the ReLU FFN -> SwiGLU, and multi-head -> grouped-query
attention with the KV cache it saves, at the toy size and at Llama 2 7B's and Llama 3 8B's.

The steps of `since_2017.modern()` that these two functions record; every number is the
reference engine's (`reference.ffn`, `reference.multi_head_attention`) or `weights.spec`'s, and the
cache's bytes are `since_2017_configs.kv_cache_bytes` of the configs (`LLAMA2_7B`, `LLAMA3_8B`,
cited in `since_2017_configs.SOURCES`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from glassformer import reference as R
from glassformer import weights
from glassformer.config import Config
from glassformer.trace import Trace, scope
from glassformer.walkthrough.random_transformer import TOKENS
from glassformer.walkthrough.since_2017_configs import (
    ATTN,
    CITED,
    FFN,
    LLAMA2_7B,
    LLAMA3_8B,
    STD,
    kv_cache_bytes,
    n_weights,
    toy,
)

# Shapes: T tokens (2)  C d_model (4)  H heads (4)  KV key/value heads  D head dim (2)  F d_ff (8)

GIB = 2**30
CONTEXT = 4096  # Llama 2's context: the cache of one sequence this long


# -- 3. the ReLU FFN -> SwiGLU --------------------------------------------------------------------


def feed_forward(t, trace: Trace, x: np.ndarray, seed: int) -> None:
    """One x (the RMSNorm output) through ReLU(x·W1)·W2 and (SiLU(x·W1) ⊙ x·W3)·W2, the same W1
    and W2 in both; then the weights each holds, at equal width and at 2/3 of it."""
    relu, glu = toy(), toy(ffn_kind="gated", activation="silu")
    p = weights.init(glu, seed=seed, std=STD)  # W1, W2 and W3; the ReLU FFN reads W1 and W2
    F = glu.d_ff
    t(
        "ffn.W1",
        p[f"{FFN}.w1.weight"].T,
        f"W1 (C x F = 4 x {F}), seeded",
        note="The first matrix of both FFNs (used as x·W1): 2017's W1, today's gate.",
    )
    t("ffn.W2", p[f"{FFN}.w2.weight"].T, f"W2 (F x C = {F} x 4)", note="The second: W2, down.")
    t(
        "ffn.W3",
        p[f"{FFN}.w3.weight"].T,
        f"W3 (C x F = 4 x {F})",
        note="The one matrix SwiGLU adds: the up projection W3 (Shazeer's V).",
    )
    with scope("relu.ffn"):  # named as the engine names a block's FFN steps (`….ffn.hidden`)
        R.ffn(p, FFN, x, relu)
    with scope("swiglu.ffn"):
        R.ffn(p, FFN, x, glu)
    hidden = trace["relu.ffn.hidden"]
    gate = t(
        "swiglu.ffn.silu_gate",
        R.silu(trace["swiglu.ffn.gate"]),
        "SiLU(x·W1) = x·W1·σ(x·W1)",
        rows=TOKENS,
        note="The gate above through SiLU (swish), as the hidden units saw it: near 0 for a "
        "negative x·W1, near x·W1 for a large one.",
    )
    for name, note in (
        (
            "relu.hidden",
            "2017 (Vaswani et al. eq. 2): max(0, x·W1). A unit is on or off by the sign of one "
            f"number: {int((hidden == 0).sum())} of these {hidden.size} are exactly 0, the rest "
            "positive.",
        ),
        ("relu.out", "FFN(x) = max(0, x·W1)·W2."),
        (
            "swiglu.gate",
            "Today (Shazeer 2020; Llama): the same x·W1, now a gate...",
        ),
        ("swiglu.up", "...and a second linear view of x, x·W3..."),
        (
            "swiglu.hidden",
            "...multiplied: SiLU(x·W1) ⊙ x·W3. A multiplicative gate: one projection decides how "
            "much of the other passes, so a unit can be negative and is near 0 only where "
            f"SiLU(x·W1) is ({int((np.abs(gate) < 0.1).sum())} of {gate.size} gates under 0.1 "
            "here). Shazeer found such GLU variants (SwiGLU, GEGLU) gave lower perplexity at the "
            "same parameters and compute.",
        ),
        ("swiglu.out", "FFN(x) = (SiLU(x·W1) ⊙ x·W3)·W2: the same W2 as 2017's."),
    ):
        trace.annotate(f"{name.replace('.', '.ffn.', 1)}", note)
    _ffn_counts(t, F)


def _ffn_counts(t, F: int) -> None:
    """Weights per FFN (weights.spec): ReLU and SwiGLU at the same F, SwiGLU at 2/3 of it."""
    narrow = int(2 * F / 3)
    rows = [f"ReLU,F={F}", f"SwiGLU,F={F}", f"SwiGLU,F={narrow}"]
    toys = [toy(d_ff=F), toy(d_ff=F, ffn_kind="gated"), toy(d_ff=narrow, ffn_kind="gated")]
    t(
        "ffn.params",
        np.array([[c.d_ff, n_weights(c, FFN)] for c in toys], dtype=float),
        "weights: 2·C·F (ReLU: W1, W2) vs 3·C·F (SwiGLU: W1, W3, W2)",
        rows=rows,
        cols=["F", "weights"],
        note="A third matrix is 3/2 the weights at the same width, so Shazeer shrinks F to 2/3 "
        f"of it: 2/3 of {F} is {2 * F / 3:.3g}, and F = {narrow} holds about the 2017 count.",
    )
    C, wide = LLAMA2_7B.d_model, 4 * LLAMA2_7B.d_model
    real = [
        dataclasses.replace(LLAMA2_7B, ffn_kind="plain", activation="relu", d_ff=wide),
        dataclasses.replace(LLAMA2_7B, d_ff=wide),
        LLAMA2_7B,
    ]
    block = "decoder.layers.0.ffn"
    t(
        "ffn.params_llama2_7b",
        np.array([[c.d_ff, n_weights(c, block) / 1e6] for c in real]),
        "weights per layer at C = 4096",
        rows=[f"ReLU,F={wide}", f"SwiGLU,F={wide}", f"SwiGLU,F={LLAMA2_7B.d_ff}"],
        cols=["F", "millions"],
        note=f"At Llama 2 7B's size ({CITED['Llama 2 7B']}): 2/3 of 4C is {2 * wide / 3:.1f}, "
        f"rounded up to a multiple of 256: F = {LLAMA2_7B.d_ff}, whose SwiGLU holds as many "
        f"weights as 2017's ReLU FFN with F = 4C (C = {C}), to within 1%.",
    )


# -- 4. multi-head -> grouped-query attention, and the KV cache ----------------------------------


def copy_kv_heads(p: dict, cfg: Config) -> dict:
    """The multi-head attention weights that compute what grouped-query attention `cfg` computes:
    each key/value head's rows of Wk and Wv repeated for each of its G = H / KV query heads."""
    G, D, C = cfg.n_heads // cfg.kv_heads, cfg.head_dim, cfg.d_model
    out = dict(p)
    for w in ("k", "v"):
        W = p[f"{ATTN}.{w}.weight"].reshape(cfg.kv_heads, D, C)  # (KV, D, C)
        out[f"{ATTN}.{w}.weight"] = np.repeat(W, G, axis=0).reshape(cfg.n_heads * D, C)  # (H·D, C)
    return out


def grouped_query(t, trace: Trace, x: np.ndarray, seed: int) -> None:
    """Four query heads over two key/value heads, beside multi-head attention with the key/value
    heads copied (the same output), then the KV cache's bytes per token."""
    mha, gqa = toy(n_heads=4, head_dim=2), toy(n_heads=4, head_dim=2, n_kv_heads=2)
    H, KV = gqa.n_heads, gqa.kv_heads
    G = H // KV
    p = weights.init(gqa, seed=seed, std=STD)
    t(
        "gqa.sharing",
        np.eye(KV)[np.arange(H) // G],
        f"query head h reads key/value head g = h // G, G = H / KV = {H} / {KV}",
        rows=[f"head{h}" for h in range(H)],
        cols=[f"kv_head{g}" for g in range(KV)],
        note=f"2017: each of the H heads has its own K and V. Today (Ainslie et al. 2023; Llama 2 "
        f"70B, Llama 3): grouped-query attention, {H} query heads of D = {gqa.head_dim} sharing "
        f"{KV} key/value heads. Heads 0 and 1 read kv_head0, heads 2 and 3 kv_head1.",
    )
    mask = R.causal_mask(x.shape[0])
    with scope("gqa"):
        R.multi_head_attention(p, ATTN, x, x, mask, gqa)
    with scope("mha_copied"):
        R.multi_head_attention(copy_kv_heads(p, gqa), ATTN, x, x, mask, mha)
    for name, note in (
        (
            "gqa.kv_head0.K",
            f"Wk has KV·D = {gqa.kv_dim} rows (MHA's: H·D = {mha.kv_dim}): two key heads, each "
            "computed once for its group.",
        ),
        ("gqa.kv_head1.K", "The second key head."),
        ("gqa.head0.scores", "Head 0: its own queries against kv_head0's keys."),
        ("gqa.head1.scores", "Head 1: other queries, the same keys (kv_head0)."),
        ("gqa.head2.scores", "Head 2: kv_head1's keys."),
        ("gqa.Z", "The attention output of grouped-query attention."),
        (
            "mha_copied.Z",
            "Multi-head attention with 4 key/value heads, each a copy of its group's: "
            "the same output.",
        ),
    ):
        trace.annotate(name, note)
    t(
        "gqa.copy_difference",
        np.abs(trace["gqa.Z"] - trace["mha_copied.Z"]).max(),
        "max |Z_GQA − Z_MHA with copied K, V|",
        note="Grouped-query attention is multi-head attention whose key/value heads are tied in "
        "groups: it computes the same thing with fewer K and V to keep.",
    )
    _kv_cache(t, mha, gqa)


def _kv_cache(t, mha: Config, gqa: Config) -> None:
    """Bytes per token of the KV cache for MHA, GQA and MQA, at the toy size and Llama's."""
    toys = [mha, gqa, dataclasses.replace(gqa, n_kv_heads=1)]
    L = gqa.n_decoder_layers
    t(
        "gqa.kv_cache_toy",
        np.array([[c.kv_heads, kv_cache_bytes(c), L * kv_cache_bytes(c)] for c in toys], float),
        f"2 (K and V) · KV · D · 2 bytes (fp16) per token per layer, × {L} layers",
        rows=["MHA", "GQA", "MQA"],
        cols=["KV_heads", "bytes/token/layer", "bytes/token"],
        note="What decoding keeps for every token already read: its K and V in every layer, "
        f"for each key/value head only. At the toy size (D = {gqa.head_dim}, fp16) GQA keeps "
        "half of MHA's bytes, MQA (one shared head, Shazeer 2019) a quarter.",
    )
    real = [LLAMA2_7B, LLAMA3_8B, dataclasses.replace(LLAMA3_8B, n_kv_heads=1)]
    per_token = [c.n_decoder_layers * kv_cache_bytes(c) for c in real]
    values = [
        [c.kv_heads, kv_cache_bytes(c), n, CONTEXT * n / GIB]
        for c, n in zip(real, per_token, strict=True)
    ]
    t(
        "gqa.kv_cache_real",
        np.array(values, dtype=float),
        "2 · KV · 128 · 2 bytes per token per layer, × 32 layers",
        rows=["Llama-2-7B", "Llama-3-8B", "MQA"],
        cols=["KV_heads", "bytes/token/layer", "bytes/token", f"GiB@{CONTEXT}"],
        note=f"At a real size: 32 layers of 32 query heads of D = 128, fp16. Llama 2 7B (MHA) "
        f"keeps all 32 key/value heads: {per_token[0] // 1024} KiB per token, "
        f"{CONTEXT * per_token[0] / GIB:g} GiB for one {CONTEXT}-token sequence; Llama 3 8B "
        f"(GQA) shares 8: {per_token[1] // 1024} KiB, 4 times less; one shared head (MQA) at "
        f"the same shape would keep {per_token[2] // 1024} KiB. Sources: "
        f"{CITED['Llama 2 7B']}; {CITED['Llama 3 8B']}.",
    )
