"""Words for every step of a trace: a title to read, what the step does, what this run shows.

    title(name, of)      "Decoder layer 1 · cross-attention · head 0 · attention weights"
    what(name, of)       one plain sentence of what the step computes, by its kind
    shows(step, trace)   one sentence of what this run's values show, computed from them
                         ("The most focused row is “␣el”: 88.2% of its attention goes to ...")
    rounded(x)           a number for reading: 3 significant digits (the tables' and heatmap.js's)

`of` is what tells how to name a step: a model's `Config`, a `Trace`, or a `Naming` made once from
either (`naming`). Layers and heads are counted from 0, as in the trace names and --layers /
--heads; a family of heads the article counts from 1 reads "head 0 (the article's head 1)"
(`select.HeadNumbers`). The stack is named ("Encoder layer 0") only when the model has two.
The equations are the trace's own (`glossary.py`); these words sit beside them and use the same
symbols (X, P, Q, K, V, Ω, A, C, Z, μ, σ, γ, β). Pure functions over names and values: no HTML,
no printing; the cards of `html.py` escape and place them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from glassformer.explain.select import HeadNumbers
from glassformer.glossary import MEANINGS, PLACES, TITLES
from glassformer.tokenizer.display import display_token
from glassformer.trace import Step, Trace

SEP = " · "


def rounded(x) -> str:
    """A number for reading: 3 significant digits, an exponent only outside [1e-4, 1e6), as
    heatmap.js's `fmt` writes it (the exact value goes in a title, on hover and in exports)."""
    v = float(x)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "-inf" if v < 0 else "inf"
    if v == 0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-4:
        mantissa, exponent = f"{v:.2e}".split("e")
        return f"{mantissa}e{int(exponent):+d}"
    r = float(f"{v:.3g}")
    return str(int(r)) if r.is_integer() else repr(r)


def percent(p: float) -> str:
    return f"{rounded(100 * float(p))}%"


# -- naming: what the model is, so that a title says just enough --------------------------------


@dataclass(frozen=True)
class Naming:
    """stacks: name the stack (the model has an encoder and a decoder); cross: the decoder's
    blocks have cross-attention (their sublayer 2 is it); classifier: logits and probabilities
    are one per class; heads: the one head numbering (None: every head as named, from 0)."""

    stacks: bool = False
    cross: bool = False
    classifier: bool = False
    heads: HeadNumbers | None = None


def naming(of=None, heads: HeadNumbers | None = None) -> Naming:
    """The Naming of a Config, a Trace (its step names), a Naming (itself) or None (plain)."""
    if of is None or isinstance(of, Naming):
        return of or Naming()
    if isinstance(of, Trace):
        parts = {p for s in of.steps for p in s.name.split(".")}
        classifier = any(s.name.endswith("logits") and len(s.shape) == 1 for s in of.steps)
        heads = heads if heads is not None else HeadNumbers(of.steps)
        both = {"encoder", "decoder"} <= parts
        return Naming(both, "cross_attn" in parts, classifier, heads)
    arch = getattr(of, "arch", None)  # a Config
    classifier = arch == "encoder" and bool(getattr(of, "n_classes", 0))
    return Naming(arch == "encoder-decoder", arch == "encoder-decoder", classifier, heads)


# -- titles -------------------------------------------------------------------------------------

_INDEXED = re.compile(r"(head|step|block|norm|add)(\d+)$")


@dataclass
class _Parts:
    """A step name read part by part: where it is and what it is (its kind)."""

    places: list[str]
    stack: str | None = None
    stack_at: int = 0  # where among the places the stack is named
    layer: int | None = None
    sub: str | None = None  # "self", "cross", "ffn"
    norm: str | None = None  # "block" (a block's k-th), "final", "embed", "plain"
    head: str | None = None
    leaf: str | None = None
    ends: bool = False  # the name ends at its sublayer (the walkthroughs' `ffn`): its output


def _parse(name: str) -> _Parts:
    parts, p, k = name.split("."), _Parts([]), None
    i = 0
    while i < len(parts):
        c, m = parts[i], _INDEXED.match(parts[i])
        last = i == len(parts) - 1
        if c in ("encoder", "decoder"):
            p.stack, p.stack_at = c, len(p.places)
            if i + 1 < len(parts) and parts[i + 1].isdigit():
                p.layer, i = int(parts[i + 1]), i + 1
        elif c in ("self_attn", "cross_attn", "ffn"):
            p.sub, p.ends = {"self_attn": "self", "cross_attn": "cross", "ffn": "ffn"}[c], last
        elif c in ("norm", "embed_norm", "layernorm"):
            p.norm = {"norm": "final", "embed_norm": "embed", "layernorm": "plain"}[c]
        elif m and m.group(1) == "norm":
            p.norm, k = ("block" if p.layer is not None else "plain"), int(m.group(2))
        elif m and m.group(1) == "add" and last:
            p.leaf, k = "add", int(m.group(2))
        elif m and m.group(1) == "head":
            p.head = c
        elif m and m.group(1) in ("step", "block"):
            what = "decoding step" if m.group(1) == "step" else "block"
            p.places.append(f"{what} {m.group(2)}")
        elif last:
            p.leaf = c
        elif c not in ("model", "generate"):
            p.places.append(PLACES.get(c, c.replace("_", " ")))
        i += 1
    if k is not None and p.layer is not None and p.sub is None:
        p.sub = "self" if k == 1 else "ffn" if k == 3 or p.stack != "decoder" else "k2"
    return p


def _sub_word(p: _Parts, n: Naming) -> str | None:
    if p.sub == "k2":  # a decoder block's second sublayer: cross-attention when it has one
        return "cross-attention" if n.cross else "feed-forward"
    if p.sub == "self":
        return "self-attention" if n.stacks else None if p.head else "attention"
    return {"cross": "cross-attention", "ffn": "feed-forward", None: None}[p.sub]


def _leaf_word(p: _Parts, n: Naming) -> str | None:
    leaf = p.leaf
    if leaf is None:
        return "output" if p.ends else None
    if leaf == "add":
        return "residual add"
    if leaf == "out":
        if p.norm or p.sub == "ffn":
            return "output"
        return "block output" if p.layer is not None or "block" in " ".join(p.places) else "output"
    if leaf in ("logits", "probs"):
        what = "class" if n.classifier else "next-token"
        return f"{what} {'logits' if leaf == 'logits' else 'probabilities'}"
    if leaf == "C":
        return "head output C" if p.head or p.layer is not None else "context vectors C"
    if leaf == "mask" and "dropout" in p.places:
        return "dropout mask"
    return TITLES.get(leaf, leaf.replace("_", " "))


def title(name: str, of=None) -> str:
    """A step's (or a group's) title in words: "Layer 0 · head 3 · attention weights"."""
    n = naming(of)
    p = _parse(name)
    out = list(p.places[: p.stack_at])
    if p.stack is not None:
        where = p.stack.capitalize() if n.stacks else ""
        if p.layer is not None:
            out.append(f"{where} layer {p.layer}".strip().capitalize())
        elif where:
            out.append(where)
    out += p.places[p.stack_at :]
    sub = _sub_word(p, n)
    if sub:
        out.append(sub)
    if p.norm:
        norm = {"final": "final LayerNorm", "embed": "embedding LayerNorm"}.get(p.norm)
        out.append(norm or "LayerNorm")
    if p.head:
        heads, probe = n.heads or HeadNumbers([]), name + "."  # a group's key ends at its head
        out.append(heads.label(probe) or f"head {heads.shown(probe)}")
    leaf = _leaf_word(p, n)
    if leaf:
        if not out and p.leaf in ("logits", "probs", "pooled", "embedding"):
            out.append("Output")
        out.append(leaf)
    text = SEP.join(out) or name
    return text[0].upper() + text[1:]


# -- what a step does ---------------------------------------------------------------------------

_WEIGHTS = {"WQ", "WK", "WV", "W_query", "W_key", "W_value", "W_O", "weight"}
_GIVEN = {"embeddings", "E", "sos_input_article", "E_plus_Z", "encoder_output"}
_FORMULA = {"standard", "article", "layernorm_article", "layernorm_formula"}
_BLOCKS = {"one_block", "one_block_residual_ln"}
_SAME = {"keys": "K", "values": "V", "C_heads": "C", "Q_split": "split", "K_split": "split",
         "V_split": "split", "self_ln": "norm.out", "cross_ln": "norm.out"}  # fmt: skip
FALLBACK = "A value recorded under this name by the trace."


def kind(name: str, of=None) -> str:
    """The kind of step a name is (the key of glossary.MEANINGS and of what `shows` computes)."""
    p, n = _parse(name), naming(of)
    leaf = p.leaf
    if leaf is None:
        if p.ends:
            return "ffn.out" if p.sub == "ffn" else "Z"
        return "norm.out" if p.norm else "head.alone" if p.head else ""
    if p.sub == "cross" and leaf in ("Q", "K", "V"):
        return f"cross.{leaf}"
    if leaf == "out":
        return "norm.out" if p.norm else "ffn.out" if p.sub == "ffn" else "block.out"
    if leaf in ("logits", "probs") and n.classifier:
        return f"class.{leaf}"
    if leaf in ("mask", "A") and "dropout" in p.places:
        return f"dropout.{leaf}"
    for names, key in ((_WEIGHTS, "weights"), (_GIVEN, "given"), (_FORMULA, "formula")):
        if leaf in names:
            return key
    return "block" if leaf in _BLOCKS else _SAME.get(leaf, leaf)


def what(name: str, of=None) -> str:
    """One plain sentence of what a step does, by its kind (FALLBACK for a name the engine and
    the walkthroughs never record)."""
    return MEANINGS.get(kind(name, of), FALLBACK)


# -- what this run shows ------------------------------------------------------------------------


class _Say:
    """Labels of a step's rows and columns, and how a sentence names a row or a column."""

    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols

    @staticmethod
    def _one(labels, i: int, what: str) -> str:
        if labels is None or i >= len(labels):
            return f"#{i}" if what == "#" else f"{what} {i}"
        label = str(labels[i])
        twice = sum(1 for x in labels if str(x) == label) > 1
        if not twice:
            return f"“{label}”"
        return f"“{label}” (#{i})" if what == "#" else f"“{label}” at {what} {i}"

    def row(self, i: int, what: str = "position") -> str:
        return self._one(self.rows, i, what)

    def col(self, j: int, what: str = "position") -> str:
        return self._one(self.cols, j, what)


def shows(step: Step, trace: Trace, labels=None, kind_of: str | None = None, *, token_kind=None):
    """One sentence of what this run's values of `step` show, or None (no values to speak of).

    labels: (rows, cols) as the card shows them (readable); None: the trace's axis labels,
    made readable for `token_kind` (`tokenizer.display`). kind_of: the step's kind (`kind`)."""
    v = np.asarray(step.values)
    if v.size == 0:
        return None
    if labels is None:
        labels = [
            None if x is None else [display_token(str(t), token_kind) for t in x]
            for x in trace.axis_labels(step)
        ]
    rows, cols = labels
    words = trace.labels.get("decoder")
    if rows is None and v.ndim == 2 and words and len(words) == v.shape[0]:
        rows = [display_token(str(t), token_kind) for t in words]  # logits, probs: the tokens
    if v.ndim == 1 and cols is None:
        rows, cols = None, rows  # a vector's labels belong to its entries
    say = _Say(rows, cols)
    classes = Naming(classifier=v.ndim == 1 and "pooled" in trace)  # a classifier's outputs
    k = kind_of if kind_of is not None else kind(step.name, classes)
    if v.dtype == bool or k in ("mask", "mask_simple", "dropout.mask"):
        return _mask(v, k)
    f = v.astype(np.float64)
    if v.ndim == 0:
        return f"Its value is {rounded(f)}."
    if k == "max_abs":
        return _max_abs(f, say)
    bad = ~np.isfinite(f)
    if bad.any():
        return f"{int(bad.sum())} of {f.size} values are not finite (NaN or ±∞)."
    fn = _SHOWS.get(k)
    return fn(f, say, step, trace) if fn else _generic(f, say)


def _matrices(v: np.ndarray):
    """(index text, matrix) for each matrix over the last two axes of v."""
    if v.ndim <= 2:
        return [("", v.reshape(-1, v.shape[-1]))]
    return [(f"In [{', '.join(map(str, i))}], ", v[i]) for i in np.ndindex(*v.shape[:-2])]


def _sibling(trace: Trace, step: Step, *names: str) -> np.ndarray | None:
    """The values of the first of `names` recorded beside `step` (same prefix)."""
    prefix = step.name.rpartition(".")[0]
    for n in names:
        full = f"{prefix}.{n}" if prefix else n
        if n and full in trace:
            return np.asarray(trace[full])
    return None


def _allowed(step: Step, trace: Trace, v: np.ndarray) -> np.ndarray:
    """Where a query may attend: the mask beside the step, else where its weight is > 0."""
    mask = _sibling(trace, step, "mask")
    if mask is not None and mask.shape == v.shape[-2:]:
        return np.broadcast_to(mask.astype(bool), v.shape)
    return v > 0


def _span(lo: float, hi: float, verbs: tuple[str, str] = ("run", "are all")) -> str:
    """'run from a to b', or 'are all a' when the two read the same (with the verbs given)."""
    a, b = rounded(lo), rounded(hi)
    return f"{verbs[1]} {a}" if a == b else f"{verbs[0]} from {a} to {b}"


def _attention(v, say: _Say, step, trace) -> str:
    if v.ndim == 1:
        j = int(np.argmax(v))
        return f"The largest weight, {percent(v[j])}, goes to {say.col(j)}."
    allowed = _allowed(step, trace, v)
    best = None
    for (where, a), (_, ok) in zip(_matrices(v), _matrices(allowed), strict=True):
        top, seen = a.max(-1), ok.sum(-1)
        rows = np.where(seen >= 2)[0]
        rows = rows if rows.size else np.arange(a.shape[0])
        i = int(rows[np.argmax(top[rows])])
        if best is None or top[i] > best[0]:
            best = (top[i], where, i, int(np.argmax(a[i])), seen[i], top[rows].mean(), rows.size)
    p, where, i, j, seen, mean, n = best
    alone = " (the only key it may see)" if seen < 2 else ""
    if v.shape[-2] == 1:
        text = f"{where}row {say.row(i)} gives {percent(p)} of its attention to {say.col(j)}"
    else:
        text = f"{where}the most focused row is {say.row(i)}: {percent(p)} of its attention "
        text += f"goes to {say.col(j)}"
    text += alone
    if n > 1:
        text += f"; on average a row gives its top key {percent(mean)}"
    return text[0].upper() + text[1:] + "."


def _scores(v, say: _Say, step, trace) -> str:
    mask = _sibling(trace, step, "mask")
    ok = np.ones(v.shape, bool)
    if mask is not None and mask.shape == v.shape[-2:]:
        ok = np.broadcast_to(mask.astype(bool), v.shape)
    idx = np.unravel_index(int(np.argmax(np.where(ok, v, -np.inf))), v.shape)
    where = f"in [{', '.join(map(str, idx[:-2]))}] " if v.ndim > 2 else ""
    cell = f"{where}row {say.row(int(idx[-2]))} with column {say.col(int(idx[-1]))}"
    lead = "The scores"
    scores = _sibling(trace, step, "scores") if step.name.endswith("scaled") else None
    if scores is not None and scores.shape == v.shape:
        nz = np.abs(v) > 1e-12
        if nz.any():
            lead = f"Divided by {rounded(np.median(scores[nz] / v[nz]))}, the scores"
    if ok.sum() == 1:
        return f"{lead[: -len('scores')]}one score is {rounded(v[idx])}: {cell}."
    allow = " where the mask allows" if not ok.all() else ""
    return f"{lead} {_span(v[ok].min(), v[ok].max())}{allow}; the largest is {cell}."


def _mask(v, k: str) -> str:
    b = np.asarray(v) != 0
    if k == "dropout.mask":
        return f"{int(b.sum())} of {b.size} weights are kept ({percent(b.mean())})."
    m = b.reshape(-1, *b.shape[-2:])[0] if b.ndim >= 2 else b
    pairs = f"{int(b.sum())} of {b.size} query–key pair{'s' * (b.size != 1)} may attend"
    if b.size == 1:
        return f"{pairs}: the one token sees itself."
    if m.ndim == 2 and m.shape[0] == m.shape[1] and np.array_equal(m, np.tril(np.ones_like(m))):
        return f"{pairs}: causal, each position sees itself and the positions before it."
    if b.all():
        return f"{pairs}: all of them, nothing is hidden."
    hidden = np.where(~m.any(0))[0] if m.ndim == 2 else np.where(~m)[0]
    if hidden.size:
        listed = ", ".join(map(str, hidden[:8])) + (" ..." if hidden.size > 8 else "")
        return f"{pairs}; no query sees position{'s' * (hidden.size > 1)} {listed}."
    return f"{pairs}."


def _norms(v, say: _Say, what: str = "row") -> str:
    if v.ndim == 1:
        return _vector(v, say)
    n = np.linalg.norm(v.reshape(-1, v.shape[-1]), axis=-1)
    if n.size == 1:
        return f"Its length is ‖·‖ = {rounded(n[0])}."
    i, j = int(np.argmax(n)), int(np.argmin(n))
    if rounded(n[i]) == rounded(n[j]):
        return f"Every {what} has the same length, ‖·‖ = {rounded(n[0])}."
    if v.ndim > 2:
        return (
            f"The lengths ‖·‖ of the {n.size} {PLURALS.get(what, what + 's')} {_span(n[j], n[i])}."
        )
    return (
        f"The longest {what} is {say.row(i)} (‖·‖ = {rounded(n[i])}), the shortest "
        f"{say.row(j)} ({rounded(n[j])})."
    )


PLURALS = {"query": "queries"}


def _noun(what: str):
    return lambda v, say, step, trace: _norms(v, say, what)


def _head_output(v, say: _Say, step, trace) -> str:
    p = _parse(step.name)
    return _norms(v, say, "head output" if p.head or p.layer is not None else "context vector")


def _positions(v, say: _Say, step, trace) -> str:
    return _norms(v, _Say(None, None), "position vector")


def _residual(v, say: _Say, step, trace) -> str:
    """How long the sublayer's output is beside the residual stream it is added to."""
    k = step.name.rpartition(".")[2][len("add") :]
    names = {"1": ("self_attn.Z",), "2": ("cross_attn.Z", "ffn.out"), "3": ("ffn.out",)}
    prefix = step.name.rpartition(".")[0]
    for n in names.get(k, ()):
        full = f"{prefix}.{n}"
        if full in trace and np.shape(trace[full]) == v.shape and v.ndim == 2:
            f = np.asarray(trace[full], dtype=np.float64)
            x = np.maximum(np.linalg.norm(v - f, axis=-1), 1e-300)
            ratio = np.linalg.norm(f, axis=-1) / x
            i = int(np.argmax(ratio))
            text = (
                f"The sublayer adds a vector {rounded(ratio.mean())} times as long as its input x"
            )
            if ratio.size == 1:
                return text + "."
            return text + f" on average (the most for {say.row(i)}: {rounded(ratio[i])} times)."
    return _norms(v, say)


def _row_stat(v, say: _Say, what: str) -> str:
    x = v.reshape(-1)
    if x.size == 1:
        return f"The {what} is {rounded(x[0])}."
    i, j = int(np.argmin(x)), int(np.argmax(x))
    return f"The {what}s run from {rounded(x[i])} ({say.row(i)}) to {rounded(x[j])} ({say.row(j)})."


def _layer_norm(v, say: _Say, step, trace) -> str:
    name = step.name.rpartition(".")[2]
    if name == "mean":
        return _row_stat(v, say, "row mean")
    if name == "std":
        return _row_stat(v, say, "spread") + " LayerNorm divides each row by its own."
    after = v.reshape(-1, v.shape[-1]).std(-1)
    before = _sibling(trace, step, "std")
    was = ""
    if before is not None:
        was = f" (before LayerNorm it {_span(before.min(), before.max(), ('ran', 'was'))})"
    if name == "normalized":
        return f"Every row now has mean 0 and spread {rounded(after.max())}{was}."
    spread = _span(after.min(), after.max(), ("runs", "is"))
    return f"After γ and β the rows' spread {spread}{was}."


def _hidden(v, say: _Say, step, trace) -> str:
    m = v.reshape(-1, v.shape[-1])
    zeros, negative = float(np.mean(m == 0)), float(np.mean(m < 0))
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    units = f"({m.shape[1]} units × {m.shape[0]} token{'s' * (m.shape[0] != 1)})"
    if zeros > 0:
        cut = f"{percent(zeros)} of the hidden values {units} are exactly 0, cut by the activation"
    else:
        cut = f"{percent(negative)} of the hidden values {units} are below 0"
    return f"{cut}; the largest is unit {j} for {say.row(int(i))}: {rounded(m[i, j])}."


def _outputs(v, say: _Say, step, trace) -> str:
    """Logits and probabilities: the top entry at the last position (or of the one row)."""
    probs = step.name.endswith("probs")
    row = v if v.ndim == 1 else v.reshape(-1, v.shape[-1])[-1]
    order = np.argsort(-row, kind="stable")
    top, nxt = int(order[0]), int(order[min(1, row.size - 1)])
    classes = v.ndim == 1 and "pooled" in trace

    def show(j: int) -> str:
        return say.col(j, "class" if classes else "#")

    val = percent if probs else rounded
    if classes:
        text = (
            f"the most likely class is {show(top)}" if probs else f"{show(top)} has the top logit"
        )
    else:
        what = "the most likely next token is" if probs else "the highest logit is"
        where = f"after {say.row(v.shape[0] - 1)} (the last position), " if v.ndim == 2 else ""
        text = f"{where}{what} {show(top)}"
    text = text[0].upper() + text[1:] + (f" at {val(row[top])}" if probs else f", {val(row[top])}")
    if row.size > 1:
        text += f", then {show(nxt)}{' at ' if probs else ', '}{val(row[nxt])}"
    return text + "."


def _vector(v, say: _Say, step=None, trace=None) -> str:
    x = v.reshape(-1)
    j = int(np.argmax(np.abs(x)))
    unit = " (unit length)" if step is not None and step.name.endswith("embedding") else ""
    return (
        f"Its length is ‖·‖ = {rounded(np.linalg.norm(x))}{unit}; its largest component is "
        f"{say.col(j, 'dimension')}: {rounded(x[j])}."
    )


def _max_abs(v, say: _Say) -> str:
    bad = np.where(~np.isfinite(v))[0]
    if bad.size:
        return (
            f"NaN from {say.col(int(bad[0]), 'block')} on: the numbers overflowed "
            f"({bad.size} of {v.size} blocks)."
        )
    return (
        f"The largest |value| goes from {rounded(v[0])} after the first block to "
        f"{rounded(v[-1])} after the last."
    )


def _ids(v, say: _Say, step, trace) -> str:
    words = say.cols or [f"#{int(i)}" for i in v.reshape(-1)]
    return f"After {words[0]} the decoding chose {len(words) - 1}: {' '.join(words[1:])}."


def _generic(v, say: _Say) -> str:
    x = v.reshape(-1)
    text = f"The values {_span(x.min(), x.max())}"
    if v.ndim == 1 and x.size > 1:
        j = int(np.argmax(x))
        text += f"; the largest is {say.col(j, 'entry')}"
    return text + "."


_SHOWS = {
    "A": _attention, "weights_2": _attention, "masked_simple_norm": _attention,
    "scores": _scores, "scaled": _scores, "X": _noun("embedding"), "P": _positions,
    "Q": _noun("query"), "K": _noun("key"), "V": _noun("value"), "cross.Q": _noun("query"),
    "cross.K": _noun("key"), "cross.V": _noun("value"), "C": _head_output,
    "concat": _noun("row"), "Z": _noun("row"), "add": _residual, "mean": _layer_norm,
    "std": _layer_norm, "normalized": _layer_norm, "norm.out": _layer_norm, "hidden": _hidden,
    "ffn.out": _noun("output"), "block.out": _noun("output"), "output": _noun("output"),
    "input": _noun("input"), "sum": _noun("row"), "types": _noun("row"), "logits": _outputs,
    "probs": _outputs, "class.logits": _outputs, "class.probs": _outputs, "pooled": _vector,
    "embedding": _vector, "output_ids": _ids,
}  # fmt: skip
