"""Faithfulness, shown (issue 40, point 5): deletion and insertion curves of an explanation against
exact ablations of the float64 reference engine, so a reader sees which explanation of one logit
is trustworthy on this input.

An explanation gives each unit a score; the units are removed in the order of their scores, the
largest (most supporting) first, and the metric (the logit of the token explained at one position,
or logit[token] - logit[versus]) is read from a real run of the reference engine after each step:

- deletion: the metric with the top k units removed, k = 0..n (0: the clean run; n: every unit
  removed). A faithful explanation makes it fall fast.
- insertion: every unit removed, then the top k put back, k = 0..n. It rises fast.
- area: each curve normalised so that the clean run is 1 and the run with every unit removed is 0,
  its area over k/n in [0, 1] by the trapezoid rule: low for deletion, high for insertion. A
  seeded random order (`random`) is the floor any explanation should beat.

Two kinds of units, each removed through `interventions` (the one sanctioned way to change a step):

- tokens (`token_units`): the input tokens of one stack (a decoder's positions 0..position, the
  later ones cannot change it; an encoder-decoder's source; a classifier's text). A token is
  removed by replacing its embedding X (before positions are added) with the baseline integrated
  gradients uses: zero, or the embedding of a baseline token (`attribution.py`).
- components (`component_units`): every attention head (its output C_h, before W_O: zeroing it
  zeroes its slice of concat·W_O, the W_O bias stays) and every FFN (its output), of every stack,
  removed at every position (zero-ablation of the whole component, not per position).

The explanations scored here (`attention_scores`, `rollout_scores`, `dla_scores`,
`graph_scores`, and the gradients the caller brings: `probes.faithfulness`):

- attention: the explained position's attention weights averaged over every head of every layer
  (a decoder's self-attention; an encoder-decoder's cross-attention over the source; a
  classifier's self-attention averaged over every query too, as its pooling averages the
  positions); and attention rollout (`rollout_scores`), for decoders and classifiers.
- the attribution graph's node values (`circuit.graph`): a component's value summed over its
  positions, a token's its token node (g·X, in the model frozen at this input). In that frozen
  model (A, norm scales and gates patched from the clean run) removing one component lowers the
  metric by exactly its value (tests/test_faithfulness.py), so the graph's `predicted` deletion
  curve, the clean metric less the running sum of the values removed, is its own claim to check.
- direct logit attribution (`lens.direct_logit_attribution`): a decoder component's direct share;
  components with no direct path to the logit (the encoder's) score 0.

Deliberately not here: running a model from text or gradients (`probes.py`, `attribution.py`),
drawing (`explain/html_faithfulness.py`), the command line. NumPy float64; torch is not imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from glassformer import reference as R
from glassformer.config import Config
from glassformer.inspect import interventions as I
from glassformer.inspect.lens import DLATable, n_layers
from glassformer.trace import Trace, tracing

RANDOM = "random"


@dataclass
class Units:
    """What can be removed: `names` (one per unit), `kind` ("tokens" or "components"), the
    `stack` the tokens are read from, `removal` in words, and `remove(indices)`: the intervention
    that removes those units together."""

    kind: str
    names: list[str]
    removal: str
    remove: Callable[[Sequence[int]], dict]
    stack: str = ""


@dataclass
class Curves:
    """One explanation's curves over `units`: `scores` (None for the random order), `order` (unit
    indices, removed first to last), the metric after each step of `deletion` and `insertion`
    (n + 1 points each), their normalised areas, and for the attribution graph and DLA
    `predicted`: the clean metric less the running sum of the scores removed."""

    method: str
    scores: list[float] | None
    order: list[int]
    deletion: list[float]
    insertion: list[float]
    deletion_area: float | None
    insertion_area: float | None
    predicted: list[float] | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Report:
    """The curves of every explanation over one kind of units, with the clean metric and the
    metric with every unit removed (`empty`)."""

    units: Units
    clean: float
    empty: float
    curves: list[Curves] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        u = self.units
        return {
            "units": u.kind,
            "stack": u.stack,
            "removal": u.removal,
            "names": u.names,
            "clean": self.clean,
            "empty": self.empty,
            "curves": [c.to_dict() for c in self.curves],
            "notes": self.notes,
        }


# -- running ---------------------------------------------------------------------------------------


def reference_run(params: dict, cfg: Config) -> I.Run:
    """The reference engine's forward: logits (T, V); a classifier's (1, n_classes)."""
    if cfg.arch == "encoder":
        return lambda inp: R.classify(params, cfg, list(inp))[None]
    return I.reference_run(params, cfg)


class Runner:
    """The metric of runs with some units removed, each set of units run once."""

    def __init__(self, run: I.Run, inp, metric: I.Metric, units: Units):
        self.run, self.inp, self.metric, self.units = run, inp, metric, units
        self.seen: dict[frozenset, float] = {}

    def __call__(self, removed: Sequence[int]) -> float:
        key = frozenset(int(i) for i in removed)
        if key not in self.seen:
            fns = self.units.remove(sorted(key)) if key else {}
            self.seen[key] = self.metric(I.run_with(self.run, self.inp, fns))
        return self.seen[key]


def curves(runner: Runner, method: str, scores: np.ndarray | None, seed: int = 0) -> Curves:
    """Deletion and insertion curves of one explanation (`scores`, one per unit; None: the
    seeded random order)."""
    n = len(runner.units.names)
    if scores is None:
        order = np.random.default_rng(seed).permutation(n)
    else:
        scores = np.asarray(scores, dtype=np.float64)
        order = np.argsort(-scores, kind="stable")  # the most supporting first; ties by index
    order = [int(i) for i in order]
    deletion = [runner(order[:k]) for k in range(n + 1)]
    insertion = [runner(order[k:]) for k in range(n + 1)]
    clean, empty = deletion[0], deletion[-1]
    return Curves(
        method,
        None if scores is None else scores.tolist(),
        order,
        deletion,
        insertion,
        area(deletion, clean, empty),
        area(insertion, clean, empty),
    )


def area(ys: Sequence[float], clean: float, empty: float) -> float | None:
    """The area under a curve normalised to clean = 1, empty = 0, over k/n in [0, 1] (None when
    removing every unit does not change the metric: nothing to normalise by)."""
    if clean == empty:
        return None
    y = (np.asarray(ys) - empty) / (clean - empty)
    return float((y[:-1] + y[1:]).sum() / (2 * (len(y) - 1))) if len(y) > 1 else float(y[0])


def report(
    runner: Runner, explanations: dict[str, np.ndarray], seed: int = 0, predicts=()
) -> Report:
    """Every explanation's curves over the runner's units, then the random floor; `predicts`:
    the methods whose scores are additive claims on the metric (their `predicted` curve)."""
    rows = [curves(runner, name, s) for name, s in explanations.items()]
    rows.append(curves(runner, RANDOM, None, seed))
    out = Report(runner.units, rows[-1].deletion[0], rows[-1].deletion[-1], rows)
    for c in rows:
        if c.method in predicts:
            removed = np.cumsum([0.0] + [c.scores[i] for i in c.order])
            c.predicted = (out.clean - removed).tolist()
    return out


# -- the units -------------------------------------------------------------------------------------


def token_units(
    run: I.Run, inp, stack: str, n: int, names: list[str], baseline: int | None
) -> Units:
    """The first n tokens of `stack`, removed by their embedding X set to the baseline's: zero,
    or the embedding of the token `baseline` (as integrated gradients' `baseline=`)."""
    if baseline is None:
        fn, says = I.zero(), "its token embedding set to zero (integrated gradients' baseline)"
    else:
        with tracing() as trace:
            run(_all_one(inp, stack, baseline))
        fn = I.replace(np.asarray(trace[f"{stack}.X"]), f"{stack}.X")
        says = (
            f"its token embedding replaced by token {baseline}'s (integrated gradients' baseline)"
        )

    def remove(indices):
        return {f"{stack}.X": I.at_positions(fn, list(indices))} if len(indices) else {}

    return Units("tokens", names[:n], f"a token: {says}; positions stay", remove, stack)


def _all_one(inp, stack: str, token: int):
    """The input with every token of `stack` replaced by `token`."""
    if isinstance(inp, tuple):
        src, ids = inp
        if stack == "encoder":
            return [token] * len(src), list(ids)
        return list(src), [token] * len(ids)
    return [token] * len(inp)


def component_units(trace: Trace, cfg: Config) -> Units:
    """Every head and FFN of every stack, in the order they write; zero-ablated at every
    position."""
    names, fns = [], []
    for stack in ("encoder", "decoder"):
        if f"{stack}.input" not in trace:
            continue
        for layer in range(n_layers(trace, stack)):
            for kind in ("self_attn", "cross_attn"):
                if f"{stack}.{layer}.{kind}.Z" not in trace:
                    continue
                for h in range(cfg.n_heads):
                    names.append(f"{stack}.{layer}.{kind}.head{h}")
                    fns.append(I.ablate_head(layer, h, stack=stack, kind=kind))
            if f"{stack}.{layer}.ffn.out" in trace:
                names.append(f"{stack}.{layer}.ffn")
                fns.append(I.ablate_ffn(layer, stack=stack))

    def remove(indices):
        out = {}
        for i in indices:
            out |= fns[i]
        return out

    says = "a head: its output C_h zeroed; an FFN: its output zeroed; at every position"
    return Units("components", names, says, remove)


# -- the explanations' scores ----------------------------------------------------------------------


def attention_scores(trace: Trace, cfg: Config, stack: str, position: int, n: int) -> np.ndarray:
    """The explained position's attention weights over the first n tokens of `stack`, averaged
    over every head and layer (see the module docstring)."""
    if cfg.arch == "encoder":
        kind, rows = "self_attn", slice(None)  # the pooling reads every position alike
    else:
        kind = "cross_attn" if stack == "encoder" else "self_attn"
    reader = "decoder" if cfg.arch != "encoder" else "encoder"
    if cfg.arch != "encoder":
        position %= np.asarray(trace[f"{reader}.input"]).shape[0]
        rows = slice(position, position + 1)
    maps = [
        np.asarray(trace[f"{reader}.{layer}.{kind}.head{h}.A"])[rows, :n].mean(0)
        for layer in range(n_layers(trace, reader))
        for h in range(cfg.n_heads)
    ]
    return np.mean(maps, axis=0)


def rollout_scores(trace: Trace, cfg: Config, position: int, n: int) -> np.ndarray | None:
    """Attention rollout (Abnar and Zuidema 2020) over the first n tokens: per layer the
    self-attention averaged over heads with the residual stream as the other half,
    Â_l = (Ā_l + I) / 2, multiplied through the layers, R = Â_L ⋯ Â_1; the explained position's
    row (a classifier's rows averaged, as its pooling averages the positions). None for an
    encoder-decoder: its source reaches the decoder through cross-attention, which rollout does
    not define."""
    if cfg.arch == "encoder-decoder":
        return None
    reader = "encoder" if cfg.arch == "encoder" else "decoder"
    T = np.asarray(trace[f"{reader}.input"]).shape[0]
    rolled = np.eye(T)
    for layer in range(n_layers(trace, reader)):
        heads = [trace[f"{reader}.{layer}.self_attn.head{h}.A"] for h in range(cfg.n_heads)]
        mean = np.mean(np.asarray(heads, dtype=np.float64), axis=0)  # (T, T)
        rolled = (mean + np.eye(T)) / 2 @ rolled
    row = rolled.mean(0) if cfg.arch == "encoder" else rolled[position % T]
    return row[:n]


def graph_scores(G, units: Units) -> np.ndarray:
    """The attribution graph's node values, summed over positions, for each unit (a token: its
    token node, or its embeddings node where the graph could not split them)."""
    total: dict[str, float] = {}
    for name, kind, v in zip(G.names, G.kinds, G.values[: len(G.names)], strict=True):
        if kind not in ("head", "ffn", "source"):
            continue
        base, at = name.rsplit("@", 1)
        if kind == "source":  # "{stack}.token@p" or "{stack}.embeddings@p"
            if base.endswith(".position") or base.endswith(".type"):
                continue
            base = f"{base.split('.')[0]}.token@{at}"
        total[base] = total.get(base, 0.0) + float(v)
    if units.kind == "tokens":
        return np.array(
            [total.get(f"{units.stack}.token@{i}", 0.0) for i in range(len(units.names))]
        )
    return np.array([total.get(n, 0.0) for n in units.names])


def dla_scores(table: DLATable, units: Units) -> np.ndarray:
    """Direct logit attribution's share of each component (0 where it has no direct path)."""
    share: dict[str, float] = {}
    for row, values in zip(table.rows, table.heads, strict=True):
        layer, kind = row.split(".")
        for h, v in enumerate(values):
            share[f"decoder.{layer}.{kind}.head{h}"] = float(v)
    for name, v in table.other.items():
        if name.endswith(".ffn"):
            share[f"decoder.{name}"] = float(v)
    return np.array([share.get(n, 0.0) for n in units.names])
