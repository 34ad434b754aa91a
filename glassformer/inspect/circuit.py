"""Why did it predict that: an exact attribution graph of one logit (issue 40, point 1).

With this input's attention patterns A, norm scales and feed-forward gates frozen at their values
here (an activation written z·g(z), g taken at this z; SwiGLU's gate act(x·W1) likewise), every
component of a pre-LN model is linear in the residual stream it reads, and the logit is a sum over
the parts that wrote the stream. The nodes: the sources (each position's token embedding and
position, or the embeddings as one part where a norm mixes them; each W_O bias; one `bias` node for
the constants inside components: β, b_V, b1, b2), every head's output C_h·W_O,h at each position,
every FFN's output at each position (or, with `neurons=k`, its k hidden units of largest effect,
each W2[:, f]·hidden_f, and the rest), and the logit (or logit[token] - logit[versus]). A node's
value is its total effect on the logit in the frozen model, g_t·o_t with g_t = ∂logit/∂o_t; the
edge s -> t is the part of t's value that s writes into what t reads, g_t·L_t(o_s). So the edges
into a node add up to its value, the edges into the logit to the model's logit (`Graph.error`
checks both against the recorded run: a wrong map would break them), and the edges out of a node
to its value too.

    graph(trace, params, cfg, token, versus=None, position=-1, neurons=0) -> Graph
    Graph.pruned(threshold)  the nodes and edges of at least threshold·|logit|, the share kept

Decoders (their LM head), encoder-decoders (a cross-attention head reads the encoder's parts
through its frozen final norm, so source tokens have edges into the decoder) and classifiers (the
mean-pooled encoder output through the class head); RoPE and grouped K/V heads change nothing
here (Q and K only shape the frozen A). Deliberately not here: post-LN models (a norm after every
sublayer: refused, as in `lens` and `qk`), running a model, drawing, the command line.
NumPy float64; nothing here taps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from glassformer import reference as R
from glassformer.config import Config
from glassformer.errors import GlassformerError
from glassformer.inspect.lens import n_layers
from glassformer.trace import Trace

BIAS, LOGIT = "bias", "logit"


@dataclass
class Graph:
    """Nodes 0..n-1 (`names`, `kinds`, `stacks`, `layers`, `positions`, `values`), then the
    `bias` source (n) and the `logit` (n + 1); `edges[t, s]` the edge s -> t. `logit` is the
    model's, `error` the largest gap between a node's value (or the logit) and its incoming
    edges' sum."""

    names: list[str]
    kinds: list[str]
    stacks: list[str]
    layers: list[int]
    positions: list[int]
    values: np.ndarray
    edges: np.ndarray
    logit: float
    target: str
    error: float = 0.0
    kept: dict = field(default_factory=dict)

    def pruned(self, threshold: float) -> Graph:
        """The nodes whose value and the edges whose weight reach threshold·|logit| (the logit
        and bias always kept); `kept` says how many and the share of the logit their direct
        edges carry."""
        cut = threshold * abs(self.logit)
        n = len(self.names)
        keep = np.flatnonzero(np.abs(self.values[:n]) >= cut)
        idx = np.concatenate([keep, [n, n + 1]])
        E = self.edges[np.ix_(idx, idx)].copy()
        E[np.abs(E) < cut] = 0.0
        share = float(E[-1].sum() / self.logit) if self.logit else 1.0
        pick = lambda xs: [xs[i] for i in keep]  # noqa: E731
        kept = {"nodes": len(keep), "of": n, "edges": int((E != 0).sum()), "share": share}
        lists = (self.names, self.kinds, self.stacks, self.layers, self.positions)
        nodes = (pick(x) for x in lists)
        return Graph(*nodes, self.values[idx], E, self.logit, self.target, self.error, kept)

    def to_dict(self) -> dict:
        rows, cols = np.nonzero(self.edges)
        every = [*self.names, BIAS, LOGIT]
        return {
            "target": self.target,
            "logit": self.logit,
            "error": self.error,
            "kept": self.kept,
            "nodes": [
                {"name": n, "kind": k, "stack": s, "layer": layer, "position": p, "value": v}
                for n, k, s, layer, p, v in zip(
                    every,
                    [*self.kinds, "bias", "logit"],
                    [*self.stacks, "", ""],
                    [*self.layers, -1, -1],
                    [*self.positions, -1, -1],
                    self.values.tolist(),
                    strict=True,
                )
            ],
            "edges": [
                {"from": every[s], "to": every[t], "weight": float(self.edges[t, s])}
                for t, s in zip(rows.tolist(), cols.tolist(), strict=True)
            ],
        }


def graph(
    trace: Trace,
    params: dict,
    cfg: Config,
    token: int,
    versus: int | None = None,
    position: int = -1,
    neurons: int = 0,
) -> Graph:
    """The attribution graph of logit[token] (- logit[versus]) at `position` (a decoder's; a
    classifier's one row otherwise): see the module docstring. `neurons` > 0: each FFN node is
    split into its `neurons` hidden units of largest effect on the logit and the rest."""
    if cfg.norm != "pre":
        raise GlassformerError(
            "an exact attribution graph needs a pre-LN model: post-LN normalises after every "
            "sublayer, so what a part writes does not reach the logit as a sum"
        )
    b = _Builder(trace, params, cfg)
    if cfg.has_decoder:
        logits = np.asarray(trace["logits"], dtype=np.float64)  # (T, V)
        position %= logits.shape[0]
        W = params["decoder.tok_embed.weight"] if cfg.tie_embeddings else params["lm_head.weight"]
        w = W[token] - (0.0 if versus is None else W[versus])  # (C,)
        out_b = params.get("lm_head.bias")
        const = 0.0 if out_b is None else out_b[token] - (0.0 if versus is None else out_b[versus])
        head = {"decoder": {position: w}}
        logit = logits[position, token] - (0.0 if versus is None else logits[position, versus])
    elif cfg.n_classes:
        logits = np.asarray(trace["logits"], dtype=np.float64).reshape(-1)  # (n_classes,)
        Wc, bc = params["classifier.weight"], params.get("classifier.bias")
        w = Wc[token] - (0.0 if versus is None else Wc[versus])
        T = np.asarray(trace["encoder.output"]).shape[0]
        head = {"encoder": dict.fromkeys(range(T), w / T)}  # the mean over the tokens
        const = 0.0 if bc is None else bc[token] - (0.0 if versus is None else bc[versus])
        logit, position = logits[token] - (0.0 if versus is None else logits[versus]), 0
    else:
        raise GlassformerError("an attribution graph needs a logit: this encoder has no head")
    target = f"logit[{token}]" + ("" if versus is None else f" - logit[{versus}]")
    target = f"{target} at position {position}"
    out = b.build(head, float(const), float(logit), target)
    if neurons:  # the gradients do not change when a node is split: the first pass picks
        b = _Builder(trace, params, cfg, split=b.top_neurons(neurons))
        out = b.build(head, float(const), float(logit), target)
    return out


class _Builder:
    """The frozen model of one run: its nodes in the order they write, and the backward pass."""

    def __init__(self, trace: Trace, params: dict, cfg: Config, split: dict | None = None):
        self.trace, self.p, self.cfg = trace, params, cfg
        self.split = split or {}  # (stack, layer, position) -> the FFN's hidden units as nodes
        self.ffn_g: dict[tuple[str, int, int], np.ndarray] = {}  # ∂logit/∂ each FFN's output
        self.v = functools.cache(lambda name: np.asarray(trace[name], dtype=np.float64))
        self.stacks = [s for s in ("encoder", "decoder") if f"{s}.input" in trace]

    # -- the frozen norms: their linear part, transposed, and their constant -------------------

    def _norm(self, name: str, x: np.ndarray):
        """(scale (T, C) of the linear part, centring: bool, constant β (C,) or 0) of the norm
        `name` frozen at the stream x (T, C)."""
        g = self.p[f"{name}.weight"]
        if self.cfg.norm_kind == "rmsnorm":
            rho = np.sqrt((x * x).mean(-1, keepdims=True) + self.cfg.ln_eps)
            return g / rho, False, 0.0
        sigma = np.sqrt(x.var(-1, keepdims=True) + self.cfg.ln_eps)
        return g / sigma, True, self.p[f"{name}.bias"]

    @staticmethod
    def _t(norm, p: int, u: np.ndarray) -> np.ndarray:
        """The transpose of the frozen norm's linear part at position p, applied to u (C,)."""
        scale, centre, _ = norm
        y = u * scale[p]
        return y - y.mean() if centre else y

    # -- the graph ------------------------------------------------------------------------------

    def build(self, head: dict, const: float, logit: float, target: str) -> Graph:
        v = self.v
        nodes: list[tuple[str, str, str, int, int, np.ndarray]] = []  # name, kind, stack, l, p, o
        subs = []  # (stack, layer, kind, norm, first node, last node + 1) in writing order
        final = {}  # stack -> its frozen final norm
        for stack in self.stacks:
            x0 = v(f"{stack}.input")
            pieces = [n for n in ("X", "P", "types") if f"{stack}.{n}" in self.trace]
            if pieces and np.allclose(sum(v(f"{stack}.{n}") for n in pieces), x0, atol=1e-12):
                parts = [(n, v(f"{stack}.{n}")) for n in pieces]
            else:
                parts = [("embeddings", x0)]
            for n, val in parts:
                label = {"X": "token", "P": "position", "types": "type"}.get(n, n)
                for p in range(len(val)):
                    nodes.append((f"{stack}.{label}@{p}", "source", stack, -1, p, val[p]))
            for layer in range(n_layers(self.trace, stack)):
                for k_norm, kind in enumerate(self._kinds(stack, layer), 1):
                    before = v(f"{stack}.{layer - 1}.out") if layer else x0
                    x = before if k_norm == 1 else v(f"{stack}.{layer}.add{k_norm - 1}")
                    norm = self._norm(f"{stack}.layers.{layer}.norm{k_norm}", x)
                    first = len(nodes)
                    nodes += self._outputs(stack, layer, kind, len(x))
                    subs.append((stack, layer, kind, norm, first, len(nodes)))
            out = v(f"{stack}.{n_layers(self.trace, stack) - 1}.out")
            final[stack] = self._norm(f"{stack}.norm", out)
        n = len(nodes)
        O = np.stack([o for *_, o in nodes])  # (n, C)
        pos = np.array([p for *_, p, _ in nodes])
        where = np.array([self.stacks.index(s) for _, _, s, *_ in nodes])
        E = np.zeros((n + 2, n + 2))
        T = {s: len(v(f"{s}.input")) for s in self.stacks}
        grad = {s: np.zeros((T[s], O.shape[1])) for s in self.stacks}
        # The logit: the final norm's transpose at the positions the head reads.
        for stack, ws in head.items():
            for p, w in ws.items():
                back = self._t(final[stack], p, w)
                grad[stack][p] += back
                mine = (where == self.stacks.index(stack)) & (pos == p)
                E[n + 1, :n][mine] += O[mine] @ back
                beta = final[stack][2]
                const += float(np.dot(beta, w)) if np.ndim(beta) else 0.0
        E[n + 1, n] = const
        g = np.zeros((n, O.shape[1]))  # ∂logit/∂o for each node
        for stack, layer, kind, norm, first, last in reversed(subs):
            for t in range(first, last):
                g[t] = grad[stack][pos[t]]
            backs = [
                self._back(stack, layer, kind, norm, final, nodes[t], g[t])
                for t in range(first, last)
            ]
            for t, (reads, vecs, c) in zip(range(first, last), backs, strict=True):
                src = self.stacks.index(reads)
                before = (np.arange(n) < (first if reads == stack else n)) & (where == src)
                for p, u in vecs.items():
                    mine = before & (pos == p)
                    E[t, :n][mine] += O[mine] @ u
                    grad[reads][p] += u
                E[t, n] = c
        for t in range(n):
            if nodes[t][1] == "ffn":
                self.ffn_g[nodes[t][2], nodes[t][3], nodes[t][4]] = g[t]
        # the embeddings: their gradient is the stream's at their position, every reader in
        for t in range(n):
            if nodes[t][1] == "source":
                g[t] = grad[nodes[t][2]][pos[t]]
        values = np.concatenate([(g * O).sum(-1), [const_total(E, n)], [logit]])
        # the bias source's value: its edges; the error: incoming sums against the values
        incoming = E[:, : n + 1].sum(1)
        has_in = np.array([k not in ("source", "bias node") for _, k, *_ in nodes] + [False, True])
        err = float(np.max(np.abs(incoming - values)[has_in])) if has_in.any() else 0.0
        names, kinds, stacks, layers = (list(x) for x in zip(*(t[:4] for t in nodes), strict=True))
        return Graph(names, kinds, stacks, layers, pos.tolist(), values, E, logit, target, err)

    def _outputs(self, stack: str, layer: int, kind: str, T: int):
        """The nodes one sublayer writes: each head's C_h·W_O,h and the W_O bias, or the FFN's
        output, at each position."""
        v, cfg, D = self.v, self.cfg, self.cfg.head_dim
        out = []
        if kind == "ffn":
            o, name = v(f"{stack}.{layer}.ffn.out"), f"{stack}.{layer}.ffn"
            for p in range(T):
                units = self.split.get((stack, layer, p), [])
                W2 = self.p[f"{stack}.layers.{layer}.ffn.w2.weight"]  # (C, F)
                h = v(f"{stack}.{layer}.ffn.hidden")[p]  # (F,)
                parts = [W2[:, f] * h[f] for f in units]  # each unit's column, scaled
                whole = f"{name}@{p}" if not units else f"{name}.rest@{p}"
                out += [
                    (f"{name}.hidden:{f}@{p}", "neuron", stack, layer, p, o_f)
                    for f, o_f in zip(units, parts, strict=True)
                ]
                out.append((whole, "ffn", stack, layer, p, o[p] - sum(parts, np.zeros_like(o[p]))))
            return out
        Wo = self.p[f"{stack}.layers.{layer}.{kind}.o.weight"]  # (C, H*D)
        for h in range(cfg.n_heads):
            o = v(f"{stack}.{layer}.{kind}.head{h}.C") @ Wo[:, h * D : (h + 1) * D].T  # (T, C)
            name = f"{stack}.{layer}.{kind}.head{h}"
            out += [(f"{name}@{p}", "head", stack, layer, p, o[p]) for p in range(T)]
        bias = self.p.get(f"{stack}.layers.{layer}.{kind}.o.bias")
        if bias is not None:
            name = f"{stack}.{layer}.{kind}.bias"
            out += [(f"{name}@{p}", "bias node", stack, layer, p, bias) for p in range(T)]
        return out

    def _back(self, stack, layer, kind, norm, final, node, g):
        """What node t reads, as (stack read, {position: L_t transposed applied to g_t}, the
        constant's share g_t·const_t)."""
        name, what, _, _, p, _ = node
        cfg, D, v = self.cfg, self.cfg.head_dim, self.v
        pre = f"{stack}.layers.{layer}.{kind}"
        if what == "bias node":
            return stack, {}, 0.0
        if what in ("ffn", "neuron"):
            a, W_in, in_const = self._ffn_reads(stack, layer, kind, norm, p, g)
            units = self.split.get((stack, layer, p), [])
            if what == "neuron":  # one hidden unit f: its own coefficient only
                f = int(name.split(":")[1].split("@")[0])
                return stack, {p: self._t(norm, p, a[f] * W_in[f])}, float(a[f] * in_const[f])
            a = a.copy()
            a[units] = 0.0  # the rest: what the units split off do not carry
            b2 = self.p.get(f"{pre}.w2.bias")
            c = float(a @ in_const) + (0.0 if b2 is None else float(g @ b2))
            return stack, {p: self._t(norm, p, a @ W_in)}, c
        h = int(name.split(".head")[1].split("@")[0])
        G = cfg.n_heads // cfg.kv_heads
        Wv = self.p[f"{pre}.v.weight"][(h // G) * D : (h // G + 1) * D]  # (D, C)
        bv = self.p.get(f"{pre}.v.bias") if cfg.has_qkv_bias else None
        bv = None if bv is None else bv[(h // G) * D : (h // G + 1) * D]
        Wo = self.p[f"{pre}.o.weight"][:, h * D : (h + 1) * D]  # (C, D)
        A = v(f"{stack}.{layer}.{kind}.head{h}.A")[p]  # (S,)
        m = (g @ Wo) @ Wv  # (C,): g through W_O,h and W_V,h, transposed
        if kind == "cross_attn":
            reads, rnorm = "encoder", final["encoder"]  # M: the encoder's parts, its final norm
        else:
            reads, rnorm = stack, norm
        beta = rnorm[2]
        v_const = _const(beta, Wv, bv)  # (D,)
        c = float(A.sum() * ((g @ Wo) @ v_const))
        back = {j: A[j] * self._t(rnorm, j, m) for j in np.flatnonzero(A)}
        return reads, back, c

    def _ffn_reads(self, stack, layer, kind, norm, p, g):
        """The FFN at position p as the frozen model reads it, for ∂logit/∂output g (C,): the
        coefficient a_f of each hidden unit (g·W2[:, f] times the frozen gate, act(z)/z or
        SwiGLU's act(gate)), the matrix the units read the normed stream through (F, C) and its
        constant (F,), so that unit f writes a_f·(W_in[f]·x̂ + const_f) into g's direction."""
        pre = f"{stack}.layers.{layer}.{kind}"
        W1, W2 = self.p[f"{pre}.w1.weight"], self.p[f"{pre}.w2.weight"]  # (F, C), (C, F)
        u = g @ W2  # (F,)
        b1, beta = self.p.get(f"{pre}.w1.bias"), norm[2]
        if self.cfg.ffn_kind == "gated":
            gate = R.ACTIVATIONS[self.cfg.activation](self.v(f"{stack}.{layer}.ffn.gate")[p])
            W3, b3 = self.p[f"{pre}.w3.weight"], self.p.get(f"{pre}.w3.bias")
            return u * gate, W3, _const(beta, W3, b3)
        z = self.v(f"{stack}.{layer}.norm{self._k(stack, layer, kind)}.out")[p] @ W1.T
        z = z + (0.0 if b1 is None else b1)
        hidden = self.v(f"{stack}.{layer}.ffn.hidden")[p]
        slope = np.divide(hidden, z, out=np.zeros_like(z), where=z != 0)  # act(z) / z
        return u * slope, W1, _const(beta, W1, b1)

    def top_neurons(self, k: int) -> dict[tuple[str, int, int], list[int]]:
        """{(stack, layer, position): the k hidden units of largest |effect| on the logit, none of
        no effect} of each FFN node of the graph just built (unit f: g·W2[:, f]·hidden_f)."""
        out = {}
        for (stack, layer, p), g in self.ffn_g.items():
            W2 = self.p[f"{stack}.layers.{layer}.ffn.w2.weight"]
            effect = (g @ W2) * self.v(f"{stack}.{layer}.ffn.hidden")[p]  # (F,)
            top = np.argsort(-np.abs(effect), kind="stable")[:k]
            if top.size and effect[top[0]] != 0:  # units of no effect stay in the FFN's node
                out[stack, layer, p] = sorted(top[effect[top] != 0].tolist())
        return out

    def _kinds(self, stack: str, layer: int) -> list[str]:
        """The sublayers of a block in order, as its norms are numbered (norm1, norm2, ...)."""
        kinds = [k for k in ("self_attn", "cross_attn") if f"{stack}.{layer}.{k}.Z" in self.trace]
        return kinds + (["ffn"] if f"{stack}.{layer}.ffn.out" in self.trace else [])

    def _k(self, stack: str, layer: int, kind: str) -> int:
        return self._kinds(stack, layer).index(kind) + 1


def const_total(E: np.ndarray, n: int) -> float:
    """The bias source's value: the sum of its edges (constants have no parents)."""
    return float(E[:, n].sum())


def _const(beta, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """The constant a frozen norm (its β, or none) and a projection (W, b) give: β·Wᵀ + b."""
    out = beta @ W.T if np.ndim(beta) else np.zeros(len(W))
    return out if b is None else out + b
