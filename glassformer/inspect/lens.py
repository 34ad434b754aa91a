"""Reading the residual stream through the output head: the logit lens and direct logit
attribution, computed from a recorded trace and the weights (either engine's trace).

- `logit_lens(trace, params, cfg)`: the residual stream entering each block and after the last
  (`decoder.input`, `decoder.{i}.out`; with `sublayers=True` also after each sublayer), passed
  through the final norm (pre-LN models: the model's own, LayerNorm or RMSNorm; a post-LN block's
  output is already normalised) and the output head, per position: a `LensTable` (points x
  positions x top-k). Its last row is the model's logits. For decoders and for the decoder of
  encoder-decoders (the encoder has no head).
- `direct_logit_attribution(trace, params, cfg, token, versus)`: in a pre-LN model the final
  residual is a sum of what each part wrote (embeddings, each head's C_h·W_O,h, the W_O bias,
  each FFN), and the logit is LN(sum)·w + β·w + b with w the token's unembedding row (minus
  `versus`'s). Freezing the final LayerNorm's scale σ at this run's value (standard DLA), each
  part's share is (part - mean(part)) / σ · γ · w; the shares plus β·w + b add up to the logit
  exactly (`DLATable.total` against `logit`). With RMSNorm the frozen scale is the root mean
  square ρ = √(mean(x²) + ε), a share is part / ρ · g · w (no centring) and there is no β. With
  grouped K/V heads each query head still writes its own C_h·W_O,h; an attention-only model
  (d_ff 0) has no FFN parts. A post-LN model renormalises after every sublayer, so no part
  reaches the logits linearly: refused.

Deliberately not here: running a model (the caller records the trace; `interventions.record`),
gradients (`attribution.py`), token strings (the CLI maps ids through its tokenizer). NumPy only,
float64; nothing here taps, so a lens computed inside a trace leaves no steps in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from glassformer.config import Config
from glassformer.errors import GlassformerError
from glassformer.trace import Trace


def _final_norm(x: np.ndarray, params: dict, cfg: Config) -> np.ndarray:
    """The decoder's final norm as the reference engine computes it, operation for operation,
    without its taps: LayerNorm (x - μ) / √(σ² + ε) · γ + β, or RMSNorm x / √(mean(x²) + ε) · g."""
    g = params["decoder.norm.weight"]
    if cfg.norm_kind == "rmsnorm":
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + cfg.ln_eps) * g
    mu = x.mean(axis=-1, keepdims=True)
    std = np.sqrt(x.var(axis=-1, keepdims=True) + cfg.ln_eps)
    return (x - mu) / std * g + params["decoder.norm.bias"]


def norm_name(cfg: Config) -> str:
    """The model's norm in words: "LayerNorm" or "RMSNorm"."""
    return "RMSNorm" if cfg.norm_kind == "rmsnorm" else "LayerNorm"


def _unembed(params: dict, cfg: Config) -> tuple[np.ndarray, np.ndarray | None]:
    W = params["decoder.tok_embed.weight"] if cfg.tie_embeddings else params["lm_head.weight"]
    return W, params.get("lm_head.bias")


def n_layers(trace: Trace, stack: str) -> int:
    """How many blocks of `stack` the trace recorded (its `{stack}.{i}.out` steps)."""
    found = [re.fullmatch(rf"{stack}\.(\d+)\.out", n) for n in trace.names()]
    layers = [int(m[1]) for m in found if m]
    if not layers:
        raise GlassformerError(f"the trace has no {stack} blocks: record a run of this model")
    return max(layers) + 1


def _check(trace: Trace, cfg: Config) -> None:
    if not cfg.has_decoder:
        raise GlassformerError(
            "the logit lens reads the residual stream through the output head: this encoder "
            "model has none; use a decoder or an encoder-decoder model"
        )
    if "decoder.input" not in trace:
        raise GlassformerError("the trace has no decoder steps: record a forward pass first")


# -- the logit lens -------------------------------------------------------------------------------


@dataclass
class LensTable:
    """Row r of every array is `points[r]` (a trace name; `labels[r]` says it in words), then
    positions, then the k best tokens by logit. `logits` (points, T, V) is the whole lens;
    `norm` the final norm it reads through ("LayerNorm", "RMSNorm"; none in a post-LN model)."""

    points: list[str]
    labels: list[str]
    top_ids: np.ndarray  # (points, T, k) int
    top_logits: np.ndarray  # (points, T, k)
    top_probs: np.ndarray  # (points, T, k): softmax over the whole vocabulary
    logits: np.ndarray  # (points, T, V)
    norm: str | None = None

    def to_dict(self, tokens: list[str] | None = None) -> dict:
        """Plain data; `tokens` (the vocabulary's strings) adds the top tokens as text."""
        d = {
            "points": self.points,
            "labels": self.labels,
            "top_ids": self.top_ids.tolist(),
            "top_logits": self.top_logits.tolist(),
            "top_probs": self.top_probs.tolist(),
            "norm": self.norm,
        }
        if tokens is not None:
            d["top_tokens"] = [[[tokens[i] for i in row] for row in p] for p in self.top_ids]
        return d


def lens_points(trace: Trace, cfg: Config, sublayers: bool = False) -> list[tuple[str, str]]:
    """(trace name, label) of each residual stream the lens reads, in order."""
    L = n_layers(trace, "decoder")
    points = [("decoder.input", "embeddings")]
    k_last = (3 if cfg.arch == "encoder-decoder" else 2) - (cfg.d_ff == 0)  # the last: block out
    parts = {1: "self-attention", 2: "cross-attention" if k_last == 3 else "FFN", 3: "FFN"}
    for i in range(L):
        if sublayers:
            for k in range(1, k_last):
                name = f"decoder.{i}.add{k}" if cfg.norm == "pre" else f"decoder.{i}.norm{k}.out"
                points.append((name, f"block {i} after {parts[k]}"))
        points.append((f"decoder.{i}.out", f"block {i} out"))
    return points


def logit_lens(
    trace: Trace, params: dict, cfg: Config, k: int = 5, sublayers: bool = False
) -> LensTable:
    """Each residual stream of the decoder through the final norm (pre-LN; LayerNorm or RMSNorm)
    and the output head: logits = LN(x)·W_outᵀ + b, per position, with the k best tokens of
    each."""
    _check(trace, cfg)
    W, b = _unembed(params, cfg)
    points = lens_points(trace, cfg, sublayers)
    rows = []
    for name, _ in points:
        x = np.asarray(trace[name], dtype=np.float64)  # (T, C)
        if cfg.norm == "pre":
            x = _final_norm(x, params, cfg)
        y = x @ W.T
        rows.append(y if b is None else y + b)  # (T, V)
    logits = np.stack(rows)  # (points, T, V)
    k = min(k, logits.shape[-1])
    top = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    m = logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits - m)
    probs /= probs.sum(axis=-1, keepdims=True)
    return LensTable(
        [n for n, _ in points],
        [label for _, label in points],
        top,
        np.take_along_axis(logits, top, -1),
        np.take_along_axis(probs, top, -1),
        logits,
        norm_name(cfg) if cfg.norm == "pre" else None,
    )


# -- direct logit attribution ---------------------------------------------------------------------


@dataclass
class DLATable:
    """Each part's direct contribution to `logit` (token, or token minus versus, at `position`).

    `heads` (rows, H): row r is `rows[r]` (e.g. "0.self_attn"), column h head h's C_h·W_O,h;
    `other`: {"embeddings", "{i}.{kind}.bias", "{i}.ffn", "final norm bias", "output bias"}
    (no FFN with d_ff 0, no final norm bias with RMSNorm);
    `total` = the sum of everything, equal to `logit` (the model's) up to float rounding;
    `scale` the frozen scale of the final norm at that position (LayerNorm's σ, RMSNorm's root
    mean square), `norm` which norm it is."""

    rows: list[str]
    cols: list[str]
    heads: np.ndarray
    other: dict[str, float]
    total: float
    logit: float
    scale: float
    position: int
    norm: str = "LayerNorm"

    def to_dict(self) -> dict:
        return {
            "rows": self.rows,
            "cols": self.cols,
            "heads": self.heads.tolist(),
            "other": self.other,
            "total": self.total,
            "logit": self.logit,
            "scale": self.scale,
            "position": self.position,
            "norm": self.norm,
        }


def direct_logit_attribution(
    trace: Trace,
    params: dict,
    cfg: Config,
    token: int,
    versus: int | None = None,
    position: int = -1,
) -> DLATable:
    """Each head's (and every other part's) direct share of logit[token] - logit[versus] at one
    position of a pre-LN decoder, through the final norm with its scale frozen."""
    _check(trace, cfg)
    if cfg.norm != "pre":
        raise GlassformerError(
            "direct logit attribution needs a pre-LN model: post-LN normalises after every "
            "sublayer, so a head's output does not reach the logits as a sum; use the logit "
            "lens or activation patching instead"
        )
    W, b = _unembed(params, cfg)
    w = W[token] - (0.0 if versus is None else W[versus])  # (C,)
    gamma, beta = params["decoder.norm.weight"], params.get("decoder.norm.bias")
    L = n_layers(trace, "decoder")
    final = np.asarray(trace[f"decoder.{L - 1}.out"])[position]  # (C,)
    rms = cfg.norm_kind == "rmsnorm"
    spread = (final * final).mean() if rms else final.var()
    sigma = float(np.sqrt(spread + cfg.ln_eps))  # LayerNorm's σ, or RMSNorm's root mean square

    def share(part: np.ndarray) -> float:  # (C,) -> its direct effect on the logit
        centred = part if rms else part - part.mean()  # RMSNorm does not centre
        return float((centred / sigma * gamma) @ w)

    kinds = ["self_attn", "cross_attn"] if cfg.arch == "encoder-decoder" else ["self_attn"]
    D = cfg.head_dim
    rows, heads = [], []
    other = {"embeddings": share(np.asarray(trace["decoder.input"])[position])}
    for i in range(L):
        for kind in kinds:
            Wo = params[f"decoder.layers.{i}.{kind}.o.weight"]  # (C, H*D)
            row = []
            for h in range(cfg.n_heads):
                C = np.asarray(trace[f"decoder.{i}.{kind}.head{h}.C"])[position]  # (D,)
                row.append(share(Wo[:, h * D : (h + 1) * D] @ C))
            rows.append(f"{i}.{kind}")
            heads.append(row)
            bias = params.get(f"decoder.layers.{i}.{kind}.o.bias")
            if bias is not None:
                other[f"{i}.{kind}.bias"] = share(bias)
        if cfg.d_ff:
            other[f"{i}.ffn"] = share(np.asarray(trace[f"decoder.{i}.ffn.out"])[position])
    if beta is not None:
        other["final norm bias"] = float(beta @ w)
    if b is not None:
        other["output bias"] = float(b[token] - (0.0 if versus is None else b[versus]))
    heads = np.array(heads)
    logits = np.asarray(trace["logits"])[position]
    logit = float(logits[token] - (0.0 if versus is None else logits[versus]))
    total = float(heads.sum() + sum(other.values()))
    cols = [f"head {h}" for h in range(cfg.n_heads)]
    T = np.asarray(trace["logits"]).shape[0]
    return DLATable(rows, cols, heads, other, total, logit, sigma, position % T, norm_name(cfg))
