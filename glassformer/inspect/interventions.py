"""Interventions over trace names: ablations, and activation patching between two runs.

An intervention is a `{name or glob: fn}` dict for `trace.intervene`: inside it, the step of that
name is replaced by `fn(value)` and the engine computes on with the replacement. The functions here
build such dicts and run them:

- value functions that work on what either engine taps (a float64 NumPy array of one sequence in
  the reference engine, the batched tensor `(B, ...)` in the PyTorch engine; the position axis is
  the second from last in both, e.g. `(T, D)` / `(B, T, D)` for a head's C): `zero`, `scale`,
  `mean`, `replace`, and `at_positions` to restrict any of them to some token positions;
- ready-made interventions, dicts to merge with `|`: `ablate_head` (its output C_h before the
  concat, so zeroing it is zeroing that head's slice of concat·W_O's input; with grouped-query
  attention the K/V head it shares is left as it is, so the other heads of its group are too),
  `ablate_kv_head` (a shared key/value head: the outputs C_h of every query head that reads it),
  `ablate_attention`
  (a sublayer's output Z), `ablate_ffn` (the FFN's output), `ablate_position` (the residual stream
  entering a block, at some positions), `scale_attention` (a head's map A), `set_embedding` (one
  token's embedding row X);
- running: a `Run` is one engine's forward as a function of one input (`reference_run`,
  `torch_run`), `run_with(run, input, fns)` runs it under an intervention and refuses keys that
  matched nothing, `record` keeps the trace;
- activation patching: `patch(clean_trace, names)` replaces steps by their values in a clean run;
  `patch_heads` and `patch_residual` sweep layers x heads (or x positions) and return a
  `PatchTable` of the normalised effect (patched - corrupted) / (clean - corrupted) on a metric
  such as `logit_diff(good, bad)`.

An input is a decoder's ids, or `(src_ids, ids)` for an encoder-decoder. Ablating by "mean"
without given values means the mean over this run's positions (so it mixes later positions into
earlier ones in a decoder); `mean_of(traces, name)` gives a mean over the runs of a data set.
The `probs` step is computed after the logits: replacing it changes only the trace. Intervene
on full forward passes: with the PyTorch engine's KV cache (`torch_steps.step_fn`) a function
sees only the new positions, and replaced K or V are not what the cache keeps.

Deliberately not here: the logit lens and direct logit attribution (`lens.py`), gradients
(`attribution.py`), printing and reading user text (the CLI). Only the engines' public forward
functions are used; torch is imported only inside `torch_run`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from glassformer import reference as R
from glassformer.errors import GlassformerError
from glassformer.trace import Trace, intervene, tracing

Fn = Callable
Run = Callable[[object], np.ndarray]  # one input -> logits (T, V) float64 of its sequence
Metric = Callable[[np.ndarray], float]  # logits (T, V) -> a number

# -- values of either engine ----------------------------------------------------------------------


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _broadcast(x, values):
    """`values` (NumPy) as the kind of `x`, broadcast to its shape: a tensor on x's device in x's
    dtype (a constant: no gradient flows to x), or an array."""
    if _is_torch(x):
        import torch

        values = torch.tensor(np.asarray(values), dtype=x.dtype, device=x.device)  # a copy: a
        return values.expand_as(x)  # trace's recorded arrays are read-only
    return np.broadcast_to(np.asarray(values, dtype=x.dtype), x.shape).copy()


def _where(x, positions, new):
    """`new` at the given positions of the second-from-last axis, `x` elsewhere (both kinds)."""
    T = x.shape[-2]
    sel = np.zeros((T, 1), bool)
    try:
        sel[np.asarray(positions, dtype=np.int64)] = True
    except IndexError:
        raise GlassformerError(
            f"position {positions} is outside this sequence of {T} tokens"
        ) from None
    if _is_torch(x):
        import torch

        return torch.where(torch.as_tensor(sel, device=x.device), new, x)
    return np.where(sel, new, x)


def zero() -> Fn:
    """x -> zeros of x's shape (zero-ablation)."""
    return lambda x: x.new_zeros(x.shape) if _is_torch(x) else np.zeros_like(x)


def scale(factor: float) -> Fn:
    """x -> factor·x."""
    return lambda x: x * factor


def mean(values=None) -> Fn:
    """x -> the mean of x over its positions, at every position; or the given mean `values` (from
    `mean_of`), broadcast to x's shape (mean-ablation)."""
    if values is None:
        return _positions_mean
    return replace(values)


def _positions_mean(x):
    if _is_torch(x):
        return x.mean(-2, keepdim=True).expand_as(x)  # gradients flow through the mean
    return np.broadcast_to(x.mean(-2, keepdims=True), x.shape).copy()


def replace(values, what: str = "") -> Fn:
    """x -> `values` (one sequence's array, as a trace records it), broadcast over a batch."""
    values = np.asarray(values)

    def fn(x):
        if tuple(x.shape[x.ndim - values.ndim :]) != values.shape and values.ndim > 1:
            raise GlassformerError(
                f"cannot put a {values.shape} value into {what or 'a step'} of shape "
                f"{tuple(x.shape)}: patched runs must have the same length as the clean run"
            )
        return _broadcast(x, values)

    return fn


def at_positions(fn: Fn, positions: int | Sequence[int]) -> Fn:
    """fn restricted to some token positions (the second-from-last axis); others unchanged."""
    return lambda x: _where(x, positions, fn(x))


def _how(how: str, values=None) -> Fn:
    if how == "zero":
        return zero()
    if how == "mean":
        return mean(values)
    raise GlassformerError(f"unknown ablation {how!r}: use 'zero' or 'mean'")


def _maybe_at(fn: Fn, positions) -> Fn:
    return fn if positions is None else at_positions(fn, positions)


# -- ready-made interventions ---------------------------------------------------------------------


def head_name(layer: int, head: int, stack: str = "decoder", kind: str = "self_attn") -> str:
    """The name of head `head`'s output C_h in block `layer` (kind: self_attn or cross_attn)."""
    return f"{stack}.{layer}.{kind}.head{head}.C"


def resid_pre(layer: int, stack: str = "decoder") -> str:
    """The residual stream entering block `layer` (0: the embeddings; n_layers: after the last)."""
    return f"{stack}.input" if layer == 0 else f"{stack}.{layer - 1}.out"


def ablate_head(
    layer: int,
    head: int,
    how: str = "zero",
    stack: str = "decoder",
    kind: str = "self_attn",
    values=None,
    positions=None,
) -> dict[str, Fn]:
    """Zero- or mean-ablate one head's output C_h (T, D): equal to zeroing (or replacing) its
    slice of the concatenation that W_O reads."""
    return {head_name(layer, head, stack, kind): _maybe_at(_how(how, values), positions)}


def kv_group(kv_head: int, group: int) -> range:
    """The query heads that read K/V head `kv_head` when `group` (n_heads / n_kv_heads)
    consecutive query heads share each."""
    return range(kv_head * group, (kv_head + 1) * group)


def ablate_kv_head(
    layer: int,
    kv_head: int,
    group: int,
    how: str = "zero",
    stack: str = "decoder",
    kind: str = "self_attn",
    values=None,
) -> dict[str, Fn]:
    """Zero- or mean-ablate a shared key/value head (grouped-query attention): the outputs C_h
    of the `group` query heads that read it (zeroing its V gives the same zeros: C_h = A_h·V)."""
    return {head_name(layer, h, stack, kind): _how(how, values) for h in kv_group(kv_head, group)}


def ablate_attention(
    layer: int, how: str = "zero", stack: str = "decoder", kind: str = "self_attn", values=None
) -> dict[str, Fn]:
    """Zero- or mean-ablate an attention sublayer's output Z = concat·W_O (+ b_O)."""
    return {f"{stack}.{layer}.{kind}.Z": _how(how, values)}


def ablate_ffn(layer: int, how: str = "zero", stack: str = "decoder", values=None) -> dict[str, Fn]:
    """Zero- or mean-ablate a block's feed-forward output FFN(x)."""
    return {f"{stack}.{layer}.ffn.out": _how(how, values)}


def ablate_position(
    layer: int,
    positions: int | Sequence[int],
    how: str = "zero",
    stack: str = "decoder",
    values=None,
) -> dict[str, Fn]:
    """Zero- or mean-ablate the residual stream entering block `layer` at some positions."""
    return {resid_pre(layer, stack): at_positions(_how(how, values), positions)}


def scale_attention(
    layer: int, head: int, factor: float, stack: str = "decoder", kind: str = "self_attn"
) -> dict[str, Fn]:
    """Multiply one head's attention map A by `factor` (rows then sum to `factor`)."""
    return {f"{stack}.{layer}.{kind}.head{head}.A": scale(factor)}


def set_embedding(position: int, vector, stack: str = "decoder") -> dict[str, Fn]:
    """Put `vector` (C,) as the token embedding X of one position (positions are added after).
    For another token's embedding: params[f"{stack}.tok_embed.weight"][id] (× √C with
    embed_scale)."""
    vector = np.asarray(vector, dtype=np.float64)
    return {f"{stack}.X": at_positions(lambda x: _broadcast(x, vector), position)}


def mean_of(traces: Iterable[Trace], name: str) -> np.ndarray:
    """The mean of step `name` over every position of every trace: shape of one position."""
    rows = [np.asarray(t[name]).reshape(-1, *np.shape(t[name])[-1:]) for t in traces]
    if not rows:
        raise GlassformerError("mean_of needs at least one trace")
    return np.concatenate(rows).mean(axis=0)


# -- running an engine ----------------------------------------------------------------------------


def _split(inp):
    if isinstance(inp, tuple):
        src, ids = inp
        return list(src), list(ids)
    return None, list(inp)


def reference_run(params: dict, cfg) -> Run:
    """The reference engine's forward: input -> logits (T, V)."""

    def run(inp):
        src, ids = _split(inp)
        return R.forward(params, cfg, ids, src_ids=src)

    return run


def torch_run(model) -> Run:
    """The PyTorch engine's forward over one sequence, without gradients: input -> logits
    (T, V) as float64 NumPy."""
    import torch

    device = next(model.parameters()).device

    def run(inp):
        src, ids = _split(inp)
        with torch.no_grad():
            out = model(
                torch.as_tensor([ids], device=device),
                src_ids=None if src is None else torch.as_tensor([src], device=device),
            )
        return out[0].to(torch.float64).cpu().numpy()

    return run


def record(run: Run, inp, labels: dict | None = None) -> tuple[np.ndarray, Trace]:
    """Logits and the trace of one run."""
    with tracing(labels) as trace:
        logits = run(inp)
    return logits, trace


def run_with(run: Run, inp, fns: dict[str, Fn]) -> np.ndarray:
    """Logits of a run under `intervene(fns)`; a key that matched no step is an error (a wrong
    layer, or a LayerNorm internal that the PyTorch engine does not tap)."""
    with intervene(fns) as swap:
        logits = run(inp)
    missing = swap.unmatched()
    if missing:
        raise GlassformerError(
            f"no step of this model matched {', '.join(map(repr, missing))}: the names are "
            "those of a trace, `Trace.names()` (layers and heads count from 0)"
        )
    return logits


def patch(clean: Trace, names: str | Iterable[str], positions=None) -> dict[str, Fn]:
    """Replace steps by their values in the clean run: names or globs over the clean trace's
    names, at every position or only at `positions`."""
    names = [names] if isinstance(names, str) else list(names)
    keys = [n for n in clean.names() if any(_matches(n, k) for k in names)]
    missing = [k for k in names if not any(_matches(n, k) for n in keys)]
    if missing:
        raise GlassformerError(f"the clean trace has no step {', '.join(map(repr, missing))}")
    return {n: _maybe_at(replace(clean[n], n), positions) for n in keys if n != "probs"}


def _matches(name: str, key: str) -> bool:
    return name == key or fnmatch.fnmatchcase(name, key)


def unmatched(keys: Iterable[str], trace: Trace) -> list[str]:
    """The names or globs of `keys` that match no step of `trace` (to refuse before a run)."""
    names = trace.names()
    return [k for k in keys if not any(_matches(n, k) for n in names)]


# -- metrics and sweeps ---------------------------------------------------------------------------


def logit_diff(good: int, bad: int | None = None, position: int = -1) -> Metric:
    """logits[position, good] - logits[position, bad] (or the good logit alone)."""

    def metric(logits):
        row = np.asarray(logits)[position]
        return float(row[good] - (0.0 if bad is None else row[bad]))

    return metric


@dataclass
class PatchTable:
    """The effect of patching each cell: `values` (rows, cols[, positions]) is
    (patched - corrupted) / (clean - corrupted) of the metric, 1 = fully restored, 0 = no effect;
    `raw` the metric itself; `names` the patched step of each row and column."""

    rows: list[str]
    cols: list[str]
    values: np.ndarray
    raw: np.ndarray
    clean: float
    corrupted: float
    names: list[list[str]] = field(default_factory=list)
    positions: list[int] | None = None

    def to_dict(self) -> dict:
        return {
            "rows": self.rows,
            "cols": self.cols,
            "positions": self.positions,
            "values": self.values.tolist(),
            "raw": self.raw.tolist(),
            "clean": self.clean,
            "corrupted": self.corrupted,
            "names": self.names,
        }


def patch_sweep(
    run: Run,
    clean_input,
    corrupted_input,
    metric: Metric,
    names: Sequence[Sequence[str]],
    rows: list[str],
    cols: list[str],
    per_position: bool = False,
    recorded: tuple[np.ndarray, Trace] | None = None,
) -> PatchTable:
    """Patch each step of the grid `names` (rows x cols) from the clean run into the corrupted
    one, one at a time (at each position separately with `per_position`). `recorded`: the clean
    run's (logits, trace), if already recorded."""
    clean_logits, clean = recorded or record(run, clean_input)
    m_clean, m_bad = metric(clean_logits), metric(run(corrupted_input))
    if m_clean == m_bad:
        raise GlassformerError(
            f"the clean and corrupted inputs give the same metric ({m_clean:g}): nothing to "
            "restore; choose tokens whose logit difference changes"
        )
    T = clean[names[0][0]].shape[-2] if per_position else 0
    shape = (len(rows), len(cols)) + ((T,) if per_position else ())
    raw = np.zeros(shape)
    for i, row in enumerate(names):
        for j, name in enumerate(row):
            for t in range(T) if per_position else [None]:
                fns = patch(clean, name, positions=t)
                got = metric(run_with(run, corrupted_input, fns))
                raw[(i, j) if t is None else (i, j, t)] = got
    return PatchTable(
        rows,
        cols,
        (raw - m_bad) / (m_clean - m_bad),
        raw,
        m_clean,
        m_bad,
        [list(r) for r in names],
        list(range(T)) if per_position else None,
    )


def _layers_heads(trace: Trace, stack: str, kind: str) -> tuple[int, int]:
    found = [re.fullmatch(rf"{stack}\.(\d+)\.{kind}\.head(\d+)\.C", n) for n in trace.names()]
    pairs = [(int(m[1]), int(m[2])) for m in found if m]
    if not pairs:
        raise GlassformerError(f"this model has no {stack} {kind} heads")
    return max(p[0] for p in pairs) + 1, max(p[1] for p in pairs) + 1


def patch_heads(
    run: Run,
    clean_input,
    corrupted_input,
    metric: Metric,
    stack: str = "decoder",
    kind: str = "self_attn",
    per_position: bool = False,
) -> PatchTable:
    """Patch each head's output C_h from the clean run: a layers x heads table (x positions)."""
    clean = record(run, clean_input)
    L, H = _layers_heads(clean[1], stack, kind)
    names = [[head_name(i, h, stack, kind) for h in range(H)] for i in range(L)]
    rows, cols = [f"layer {i}" for i in range(L)], [f"head {h}" for h in range(H)]
    return patch_sweep(
        run, clean_input, corrupted_input, metric, names, rows, cols, per_position, clean
    )


def patch_residual(
    run: Run, clean_input, corrupted_input, metric: Metric, stack: str = "decoder"
) -> PatchTable:
    """Patch the residual stream entering each block (and after the last), one position at a
    time: a (layers + 1) x 1 x positions table (`values[:, 0, t]`)."""
    clean = record(run, clean_input)
    found = [re.fullmatch(rf"{stack}\.(\d+)\.out", n) for n in clean[1].names()]
    L = 1 + max(int(m[1]) for m in found if m)
    names = [[resid_pre(i, stack)] for i in range(L + 1)]
    rows = [f"before block {i}" if i < L else "after the last block" for i in range(L + 1)]
    return patch_sweep(
        run, clean_input, corrupted_input, metric, names, rows, ["resid"], True, clean
    )
