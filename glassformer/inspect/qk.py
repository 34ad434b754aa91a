"""Why a head attends there: one attention score Ω[i, j] = q_i·k_j split by what wrote the query's
and the key's residual streams (issue 40, point 2).

In a pre-LN model the residual stream entering a sublayer is a sum of parts, each recorded by the
trace: the token embeddings and positions (or the embeddings as one part, where a norm or token
types mix them), each earlier head's output C_h·W_O,h, each W_O bias, each FFN's output (and, for
cross-attention, this block's own self-attention). The sublayer's norm, its scale frozen at this
run's value (LayerNorm: x ↦ (x - mean x) / σ · γ, RMSNorm: x ↦ x / ρ · g), is linear in the parts,
with β left over; the projection q = x̂·W_q + b_q is too (then RoPE, a rotation at the query's
position). So q_i = Σ_a q_i(a) over the query's parts a, plus a constant (β·W_q + b_q), k_j alike
over the key's parts b (cross-attention: the encoder's parts, through its final norm, frozen), and

    Ω[i, j] = Σ_a Σ_b q_i(a)·k_j(b)

a table whose entries add up to the trace's Ω[i, j] (`QKTable.total` against `.score`). Each
entry's `effect` is what A[i, j] would be without it (the row's softmax recomputed with Ω[i, j]
less that entry): which pair moved the weight most.

    decompose(trace, params, cfg, "decoder.1.self_attn.head2", i, j) -> QKTable

Deliberately not here: post-LN models (a norm after every sublayer rescales the whole stream, so
a part does not reach the next sublayer as a sum: refused, as direct logit attribution refuses
them), running a model (the caller records the trace), drawing (the explorer's neuron view).
NumPy float64; nothing here taps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from glassformer import reference as R
from glassformer.config import Config
from glassformer.errors import GlassformerError
from glassformer.inspect.lens import n_layers
from glassformer.trace import Trace

HEAD = re.compile(r"^(encoder|decoder)\.(\d+)\.(self_attn|cross_attn)\.head(\d+)$")
BIAS = "bias"  # the constant row and column: β·W + b through the frozen norm and the projection


@dataclass
class QKTable:
    """Ω[i, j] of `head` split by query part (rows) and key part (cols), `table[a, b]` =
    q_i(a)·k_j(b); `score` the trace's Ω[i, j], `total` the table's sum; `effect[a, b]` the
    weight A[i, j] without that entry, `weight` A[i, j] itself."""

    head: str
    i: int
    j: int
    rows: list[str]
    cols: list[str]
    table: np.ndarray
    effect: np.ndarray
    score: float
    total: float
    weight: float

    def top(self, k: int = 5) -> list[tuple[str, str, float, float]]:
        """The k largest entries by size: (query part, key part, entry, A[i, j] without it)."""
        flat = np.argsort(-np.abs(self.table), axis=None, kind="stable")[:k]
        pairs = (np.unravel_index(f, self.table.shape) for f in flat)
        return [
            (self.rows[a], self.cols[b], float(self.table[a, b]), float(self.effect[a, b]))
            for a, b in pairs
        ]

    def to_dict(self, k: int = 10, table: bool = True) -> dict:
        """The table as JSON; `table` False leaves the full table out (its `top(k)` stays)."""
        return {
            "head": self.head,
            "i": self.i,
            "j": self.j,
            "rows": self.rows,
            "cols": self.cols,
            **({"table": self.table.tolist()} if table else {}),
            "score": self.score,
            "total": self.total,
            "weight": self.weight,
            "top": [
                {"query": a, "key": b, "value": v, "weight_without": w}
                for a, b, v, w in self.top(k)
            ],
        }


def decompose(trace: Trace, params: dict, cfg: Config, head: str, i: int, j: int) -> QKTable:
    """Ω[i, j] of `head` ("decoder.1.self_attn.head2") as a table over the parts of the query's
    and the key's residual streams: see the module docstring."""
    m = HEAD.match(head)
    if not m:
        raise GlassformerError(
            f"{head!r} is not a head: name one as STACK.LAYER.KIND.headH, e.g. "
            "decoder.0.self_attn.head1"
        )
    if cfg.norm != "pre":
        raise GlassformerError(
            "splitting a score by the parts of the residual stream needs a pre-LN model: "
            "post-LN normalises after every sublayer, so the parts do not reach a sublayer as a sum"
        )
    stack, layer, kind, h = m[1], int(m[2]), m[3], int(m[4])
    if f"{head}.scores" not in trace:
        raise GlassformerError(f"the trace has no {head}.scores: record a run of this model")
    scores = np.asarray(trace[f"{head}.scores"], dtype=np.float64)  # (T, S)
    T, S = scores.shape
    if not (0 <= i < T and 0 <= j < S):
        raise GlassformerError(f"query {i}, key {j}: {head} has {T} queries and {S} keys")
    pre = f"{stack}.layers.{layer}.{kind}"
    D, G = cfg.head_dim, cfg.n_heads // cfg.kv_heads
    k_norm = 2 if kind == "cross_attn" else 1
    q_names, q_parts = _parts(trace, params, cfg, stack, layer, kind)  # (n, T, C)
    q_parts, q_const = _frozen_norm(q_parts, params, f"{stack}.layers.{layer}.norm{k_norm}", cfg)
    if kind == "cross_attn":
        L = n_layers(trace, "encoder")
        k_names, k_parts = _parts(trace, params, cfg, "encoder", L, None)
        k_parts, k_const = _frozen_norm(k_parts, params, "encoder.norm", cfg)  # M, frozen
    else:
        k_names, k_parts, k_const = q_names, q_parts, q_const
    q = _project(q_parts[:, i], q_const[i], params, f"{pre}.q", h, D, cfg)  # (n + 1, D)
    k = _project(k_parts[:, j], k_const[j], params, f"{pre}.k", h // G, D, cfg)
    if kind == "self_attn" and cfg.positions == "rotary":  # RoPE: a rotation at each position
        cos, sin = R.rotary_angles(np.arange(max(T, S)), cfg.rope_dim, cfg.rope_theta)
        q = R.rotary(q, np.repeat(cos[i : i + 1], len(q), 0), np.repeat(sin[i : i + 1], len(q), 0))
        k = R.rotary(k, np.repeat(cos[j : j + 1], len(k), 0), np.repeat(sin[j : j + 1], len(k), 0))
    table = q @ k.T  # (n_q + 1, n_k + 1)
    row = scores[i] / np.sqrt(D)
    masked = np.asarray(trace[f"{head}.mask"]) if f"{head}.mask" in trace else None
    if masked is not None:
        row = np.where(np.asarray(masked, dtype=bool)[i], row, -np.inf)
    weight = float(R.softmax(row)[j])
    effect = _without(row, j, table / np.sqrt(D))
    rows, cols = [*q_names, BIAS], [*k_names, BIAS]
    total = float(table.sum())
    return QKTable(head, i, j, rows, cols, table, effect, float(scores[i, j]), total, weight)


def _without(row: np.ndarray, j: int, shares: np.ndarray) -> np.ndarray:
    """softmax(row)[j] with row[j] less each of `shares` (any shape), all at once: only the
    exponential of entry j changes, so the row's other terms are summed once. A masked key
    (row[j] = -inf) keeps its weight 0."""
    if not np.isfinite(row[j]):
        return np.zeros_like(shares)
    e = np.exp(row - np.max(row))  # (S,), the largest 1
    rest = e.sum() - e[j]
    moved = np.exp(row[j] - np.max(row) - shares)
    return moved / (rest + moved)


def _parts(trace: Trace, params: dict, cfg: Config, stack: str, layer: int, kind: str | None):
    """The names and values (n, T, C) of what wrote the residual stream of `stack` entering block
    `layer`'s sublayer `kind` (None: the stack's output, before its final norm); checked against
    the recorded stream."""
    v = lambda name: np.asarray(trace[name], dtype=np.float64)  # noqa: E731
    names, parts = [], []
    embedded = v(f"{stack}.input")  # (T, C)
    pieces = [(n, f"{stack}.{n}") for n in ("X", "P", "types") if f"{stack}.{n}" in trace]
    if pieces and np.allclose(sum(v(x) for _, x in pieces), embedded, rtol=0, atol=1e-12):
        for n, x in pieces:
            names.append({"X": "tokens", "P": "positions", "types": "token types"}[n])
            parts.append(v(x))
    else:  # an embedding norm (or scale) mixes them: one part
        names.append("embeddings")
        parts.append(embedded)
    D = cfg.head_dim
    for k in range(layer + (kind == "cross_attn")):
        kinds = [x for x in ("self_attn", "cross_attn") if f"{stack}.{k}.{x}.Z" in trace]
        if k == layer:
            kinds = ["self_attn"]  # cross-attention reads this block's self-attention too
        for x in kinds:
            Wo = params[f"{stack}.layers.{k}.{x}.o.weight"]  # (C, H*D)
            for h in range(cfg.n_heads):
                C = v(f"{stack}.{k}.{x}.head{h}.C")  # (T, D)
                names.append(f"{stack}.{k}.{x}.head{h}")
                parts.append(C @ Wo[:, h * D : (h + 1) * D].T)
            b = params.get(f"{stack}.layers.{k}.{x}.o.bias")
            if b is not None:
                names.append(f"{stack}.{k}.{x}.bias")
                parts.append(np.broadcast_to(b, embedded.shape))
        if k < layer and f"{stack}.{k}.ffn.out" in trace:
            names.append(f"{stack}.{k}.ffn")
            parts.append(v(f"{stack}.{k}.ffn.out"))
    stream = (
        v(f"{stack}.{layer}.add1")
        if kind == "cross_attn"
        else v(f"{stack}.{layer - 1}.out")
        if layer
        else embedded
    )
    parts = np.stack(parts)  # (n, T, C)
    if not np.allclose(parts.sum(0), stream, rtol=1e-10, atol=1e-10):
        raise GlassformerError(
            f"the parts of {stack}'s residual stream do not add up to it at block {layer}: "
            "this model's blocks are not the pre-LN sums the split reads"
        )
    return names, parts


def _frozen_norm(parts: np.ndarray, params: dict, name: str, cfg: Config):
    """The norm `name` with its scale frozen at the parts' sum: (linear image of each part
    (n, T, C), the constant β (T, C))."""
    x = parts.sum(0)  # (T, C)
    g = params[f"{name}.weight"]
    if cfg.norm_kind == "rmsnorm":
        rho = np.sqrt((x * x).mean(-1, keepdims=True) + cfg.ln_eps)  # (T, 1)
        return parts / rho * g, np.zeros_like(x)
    sigma = np.sqrt(x.var(-1, keepdims=True) + cfg.ln_eps)  # (T, 1)
    centred = parts - parts.mean(-1, keepdims=True)
    return centred / sigma * g, np.broadcast_to(params[f"{name}.bias"], x.shape)


def _project(parts: np.ndarray, const: np.ndarray, params: dict, name: str, h: int, D: int, cfg):
    """One head's projection of each part (n, C) -> (n, D), and of the constant with the
    projection's bias, as the last row (n + 1, D)."""
    W = params[f"{name}.weight"][h * D : (h + 1) * D]  # (D, C)
    b = params.get(f"{name}.bias") if cfg.has_qkv_bias else None
    c = const @ W.T + (0.0 if b is None else b[h * D : (h + 1) * D])
    return np.concatenate([parts @ W.T, c[None]], axis=0)
