"""What this run's values show: one sentence per kind of step, computed from the values.

    SHOWS[kind](values, say, step, trace)   the sentence for a step of that kind (`words.kind`)
    rounded(x), percent(p)                  numbers for reading: 3 significant digits

`words.shows` picks the kind and the labels and calls these; the sentences name rows and columns
through `Say` (the labels the card shows). Pure functions over values: no HTML, no printing.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from glassformer.explain.select import head_of, layer_of
from glassformer.trace import Step, Trace


def rounded(x) -> str:
    """A number for reading: 3 significant digits, an exponent only outside [1e-4, 1e6), as
    numbers.js's `fmt` writes it (the exact value goes in a title, on hover and in exports). The
    double's exact value is rounded, a tie away from zero as JavaScript's toPrecision does
    (100.5 -> "101"; Python's own format would round it to even, "100")."""
    v = float(x)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "-inf" if v < 0 else "inf"
    if v == 0:
        return "0"
    d = Decimal(v)  # exact
    d = d.quantize(Decimal(1).scaleb(d.adjusted() - 2), rounding=ROUND_HALF_UP)  # 3 digits
    if abs(v) >= 1e6 or abs(v) < 1e-4:
        mantissa, exponent = f"{d:.2e}".split("e")
        return f"{mantissa}e{int(exponent):+d}"
    r = float(d)
    return str(int(r)) if r.is_integer() else repr(r)


def percent(p: float) -> str:
    return f"{rounded(100 * float(p))}%"


# -- naming: what the model is, so that a title says just enough --------------------------------


class Say:
    """Labels of a step's rows and columns, and how a sentence names a row or a column.
    ended: the rows are the decoder's positions and the last reads the end token the output
    ended with (its prediction unused)."""

    def __init__(self, rows, cols, ended: bool = False):
        self.rows, self.cols, self.ended = rows, cols, ended

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


def _attention(v, say: Say, step, trace) -> str:
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


def _scores(v, say: Say, step, trace) -> str:
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


def mask_sentence(v, k: str) -> str:
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


def _norms(v, say: Say, what: str = "row") -> str:
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


def _head_output(v, say: Say, step, trace) -> str:
    in_head = head_of(step.name) is not None or layer_of(step.name) is not None
    return _norms(v, say, "head output" if in_head else "context vector")


def _positions(v, say: Say, step, trace) -> str:
    return _norms(v, Say(None, None), "position vector")


def _residual(v, say: Say, step, trace) -> str:
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


def _row_stat(v, say: Say, what: str) -> str:
    x = v.reshape(-1)
    if x.size == 1:
        return f"The {what} is {rounded(x[0])}."
    i, j = int(np.argmin(x)), int(np.argmax(x))
    return f"The {what}s run from {rounded(x[i])} ({say.row(i)}) to {rounded(x[j])} ({say.row(j)})."


def _layer_norm(v, say: Say, step, trace) -> str:
    name = step.name.rpartition(".")[2]
    rms = _sibling(trace, step, "rms")
    if name == "rms":
        return _row_stat(v, say, "root mean square") + " RMSNorm divides each row by its own."
    if rms is not None and name == "out":  # RMSNorm: no centring, no β
        after = np.sqrt((v.reshape(-1, v.shape[-1]) ** 2).mean(-1))
        was = _span(rms.min(), rms.max(), ("ran", "was"))
        now = _span(after.min(), after.max(), ("runs", "is"))
        return (
            f"After dividing by it and scaling by g, the rows' root mean square {now} (it {was})."
        )
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


def _hidden(v, say: Say, step, trace) -> str:
    m = v.reshape(-1, v.shape[-1])
    zeros, negative = float(np.mean(m == 0)), float(np.mean(m < 0))
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    units = f"({m.shape[1]} units × {m.shape[0]} token{'s' * (m.shape[0] != 1)})"
    if zeros > 0:
        cut = f"{percent(zeros)} of the hidden values {units} are exactly 0, cut by the activation"
    else:
        cut = f"{percent(negative)} of the hidden values {units} are below 0"
    return f"{cut}; the largest is unit {j} for {say.row(int(i))}: {rounded(m[i, j])}."


def _gate(v, say: Say, step, trace) -> str:
    """The gated FFN's gate, before its activation: how much of it the activation closes."""
    m = v.reshape(-1, v.shape[-1])
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    units = f"({m.shape[1]} units × {m.shape[0]} token{'s' * (m.shape[0] != 1)})"
    return (
        f"{percent(float(np.mean(m < 0)))} of the gate's values {units} are below 0, where the "
        f"activation lets little or nothing through; the most open is unit {j} for "
        f"{say.row(int(i))}: {rounded(m[i, j])}."
    )


def _rotated(v, say: Say, step, trace) -> str:
    """Q_rot or K_rot beside the Q or K it turned: the lengths kept, the angle of each row."""
    before = _sibling(trace, step, step.name.rpartition(".")[2][0])  # Q or K
    if before is None or before.shape != v.shape or v.ndim != 2:
        return _norms(v, say, "row")
    lengths = np.linalg.norm(v, axis=-1) * np.linalg.norm(before, axis=-1)
    cos = np.sum(v * before, axis=-1) / np.maximum(lengths, 1e-300)  # (T,)
    if cos.size == 1:
        return "At position 0 nothing turns: this row is the one before the rotation."
    i = int(np.argmin(cos))
    return (
        f"Each row keeps its length and is turned by angles proportional to its position: row "
        f"{say.row(i)} ends farthest from where it was (cos = {rounded(cos[i])} with the row "
        f"before the rotation); row {say.row(0)}, at position 0, is not turned."
    )


def _outputs(v, say: Say, step, trace) -> str:
    """Logits and probabilities: the top entry at the last position (or of the one row); after
    an output that ended with the end token, at the position before (the last one it used)."""
    probs = step.name.endswith("probs")
    last = v.shape[0] - 1 - (say.ended and v.ndim == 2 and v.shape[0] > 1)
    row = v if v.ndim == 1 else v.reshape(-1, v.shape[-1])[last]
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
        used = "the last position"
        used += " the translation used" * (last < v.shape[0] - 1)
        where = f"after {say.row(last)} ({used}), " if v.ndim == 2 else ""
        text = f"{where}{what} {show(top)}"
    text = text[0].upper() + text[1:] + (f" at {val(row[top])}" if probs else f", {val(row[top])}")
    if row.size > 1:
        text += f", then {show(nxt)}{' at ' if probs else ', '}{val(row[nxt])}"
    return text + "."


def _vector(v, say: Say, step=None, trace=None) -> str:
    x = v.reshape(-1)
    j = int(np.argmax(np.abs(x)))
    unit = " (unit length)" if step is not None and step.name.endswith("embedding") else ""
    return (
        f"Its length is ‖·‖ = {rounded(np.linalg.norm(x))}{unit}; its largest component is "
        f"{say.col(j, 'dimension')}: {rounded(x[j])}."
    )


def max_abs(v, say: Say) -> str:
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


def _ids(v, say: Say, step, trace) -> str:
    words = say.cols or [f"#{int(i)}" for i in v.reshape(-1)]
    return f"After {words[0]} the decoding chose {len(words) - 1}: {' '.join(words[1:])}."


def generic(v, say: Say) -> str:
    x = v.reshape(-1)
    text = f"The values {_span(x.min(), x.max())}"
    if v.ndim == 1 and x.size > 1:
        j = int(np.argmax(x))
        text += f"; the largest is {say.col(j, 'entry')}"
    return text + "."


SHOWS = {
    "A": _attention, "weights_2": _attention, "masked_simple_norm": _attention,
    "scores": _scores, "scaled": _scores, "X": _noun("embedding"), "P": _positions,
    "Q": _noun("query"), "K": _noun("key"), "V": _noun("value"), "cross.Q": _noun("query"),
    "cross.K": _noun("key"), "cross.V": _noun("value"), "C": _head_output,
    "concat": _noun("row"), "Z": _noun("row"), "add": _residual, "mean": _layer_norm,
    "std": _layer_norm, "normalized": _layer_norm, "norm.out": _layer_norm, "hidden": _hidden,
    "ffn.out": _noun("output"), "block.out": _noun("output"), "output": _noun("output"),
    "input": _noun("input"), "sum": _noun("row"), "types": _noun("row"), "logits": _outputs,
    "probs": _outputs, "class.logits": _outputs, "class.probs": _outputs, "pooled": _vector,
    "embedding": _vector, "output_ids": _ids, "rms": _layer_norm, "gate": _gate,
    "up": _noun("row"), "Q_rot": _rotated, "K_rot": _rotated,
}  # fmt: skip
