"""Pieces of the HTML report, each a pure function from values to an HTML string (or to a
heatmap's embedded data): escaped text, labelled numeric tables tinted by value (masked scores
hatched, as −∞), heatmap data (float16, base64; a masked score is −∞ there too) and its
downsampling, token chips, the input's tokens with their ids, one decoding step's top tokens,
the result, the overflow plot as SVG. The page that puts them together is `html.py`; `rgb` here
and `rgb` in `assets/report.js` are the same colour scale.
"""

from __future__ import annotations

import base64
import functools
import html
from importlib import resources

import numpy as np

from glassformer.explain.text import format_number
from glassformer.explain.words import rounded
from glassformer.trace import Step

TOP_K = 5  # tokens shown per decoding step
SHRUNK_SIDE = 64  # a downsampled heatmap has at most this many rows and columns

# Symbolic shapes of the engine's steps (legend in `LEGEND`); cross-attention swaps in S.
SYMBOLS = {
    **dict.fromkeys(("X", "P", "input", "Z", "normalized", "out", "output"), "T×C"),
    **dict.fromkeys(("add1", "add2", "add3"), "T×C"),
    **dict.fromkeys(("Q", "K", "V", "C"), "T×D"),
    **dict.fromkeys(("scores", "scaled", "mask", "A"), "T×T"),
    **dict.fromkeys(("mean", "std"), "T×1"),
    **{"concat": "T×H·D", "hidden": "T×F", "logits": "T×V", "probs": "T×V", "pooled": "C"},
}
LEGEND = (
    "T tokens, S encoder tokens, C d_model, H heads, D head dim (the c of Ω/√c), F d_ff, "
    "V vocabulary"
)


@functools.cache
def asset(name: str) -> str:
    """The text of a front-end file shipped in the package (`explain/assets/NAME`), read once:
    the static report's style and scripts, and the explorer's page and files (`serve/app.py`
    serves them from here)."""
    return (resources.files("glassformer.explain") / "assets" / name).read_text(encoding="utf-8")


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def reduced_note(text: str) -> str:
    return f'<p class="note reduced">{esc(text)}</p>'


def dims(shape) -> str:
    return " × ".join(map(str, shape)) if len(shape) else "scalar"


def shape_text(s: Step) -> str:
    parts = s.name.split(".")
    symbols = SYMBOLS.get(parts[-1], "")
    if "cross_attn" in parts:
        symbols = {"K": "S×D", "V": "S×D"}.get(parts[-1], symbols.replace("T×T", "T×S"))
    n = len(symbols.split("×")) if symbols else -1
    sym = f" ({symbols.replace('×', ' × ')})" if n == len(s.shape) else ""
    return f"shape {dims(s.shape)}{sym}"


def rgb(t: float, seq: bool) -> tuple[int, int, int]:
    """White to blue for weights in [0, 1]; red (-1) to white (0) to blue (+1) otherwise: blue is
    high and positive in every view (the explorer's legend says so)."""
    if np.isnan(t):
        return (190, 190, 190)
    t = max(-1.0, min(1.0, t))
    end = (33, 102, 172) if seq or t > 0 else (178, 24, 43)
    a = abs(t)
    return tuple(round(255 + (c - 255) * a) for c in end)


def tint(t: float, seq: bool) -> tuple[str, bool]:
    """`rgb(t, seq)` as "#rrggbb", and whether text on it is written white (a dark tint)."""
    r, g, b = rgb(t, seq)
    return f"#{r:02x}{g:02x}{b:02x}", abs(t) > 0.55


def table(values, rows=None, cols=None, masked=None, signed: bool = False, scale=None) -> str:
    """A labelled numeric table; cells tinted by value, each rounded to 3 significant digits
    (`words.rounded`), its value to 15 digits (float64 precision) in its title. `masked`
    (bool, the shape of `values`) marks scores that the mask set to −∞ before the softmax;
    `signed`: blue above 0 and red below even when no value is negative; `scale`: the |value|
    of the darkest tint (default: the table's largest), to compare tables by colour."""
    v = np.asarray(values)
    if v.ndim == 0:
        v, rows, cols = v.reshape(1, 1), None, None
    elif v.ndim == 1:
        v, rows = v[None, :], None
    f = v.astype(np.float64)
    hidden = (
        np.zeros(f.shape, bool) if masked is None else np.asarray(masked, bool).reshape(f.shape)
    )
    shown = f[~hidden]
    finite = np.abs(shown[np.isfinite(shown)])
    if scale is None:
        scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    seq = bool(finite.size) and bool(np.nanmin(np.where(np.isinf(shown), 0, shown)) >= 0)
    seq = seq and not signed
    head = ""
    if cols is not None:
        corner = "<th></th>" if rows is not None else ""
        head = "<tr>" + corner + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>"
    body = []
    for i, row in enumerate(v):
        cells = []
        for j, (x, fx) in enumerate(zip(row, f[i], strict=True)):
            if hidden[i, j]:
                cells.append(
                    f'<td class="masked" title="masked: set to −∞ before the softmax '
                    f'(computed {fx:.15g})">−∞</td>'
                )
                continue
            t = fx / scale if np.isfinite(fx) else (np.nan if np.isnan(fx) else np.sign(fx))
            colour, dark = tint(t, seq)
            dark = " class='dark'" if dark else ""
            shown = format_number(x.item()) if v.dtype == bool else rounded(fx)
            cells.append(
                f'<td style="background:{colour}"{dark} title="{fx:.15g}">{esc(shown)}</td>'
            )
        label = f"<th>{esc(rows[i])}</th>" if rows is not None and i < len(rows) else ""
        body.append(f"<tr>{label}{''.join(cells)}</tr>")
    return f'<table class="mat">{head}{"".join(body)}</table>'


def as_matrix(v, masked=None) -> tuple[np.ndarray, np.ndarray | None]:
    """A heatmap's values as a float64 matrix (a vector is one row, more axes are stacked rows)
    and its masked cells (or None) in the same shape."""
    v = np.asarray(v, dtype=np.float64)
    v = v[None, :] if v.ndim <= 1 else v.reshape(-1, v.shape[-1])
    hidden = None if masked is None else np.asarray(masked, bool).reshape(v.shape)
    return v, hidden


def color_scale(v: np.ndarray) -> tuple[float, bool]:
    """(scale, seq): the largest |finite value| (1 if none), and whether the values are all >= 0
    (drawn white to blue) rather than signed (blue to white to red)."""
    finite = v[np.isfinite(v)]
    scale = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
    return scale, bool(finite.size) and bool(finite.min() >= 0)


WEIGHTS_SCALE = 1.0  # attention weights: coloured on the fixed 0..1
WEIGHTS_LEGEND = "Colour: the weight, white 0 to dark blue 1, alike on every attention map."


def is_weights(name: str | None) -> bool:
    """Whether a step holds attention weights (A, each row sums to 1), which every view colours
    on the same fixed 0..1 (`WEIGHTS_SCALE`) rather than against the map's own largest value (a
    uniform row of 0.143 looked as dark as a row of 1s)."""
    return name is not None and name.rsplit(".", 1)[-1] == "A"


def heatmap_data(
    v: np.ndarray, rows, cols, shrunk: bool, masked=None, f32: bool = False, scale=None
) -> dict:
    """A heatmap's data: float16 of values / scale (scale = max |finite value|, or the one
    given), base64, or with `f32` the values themselves as float32 (exact to 7 digits on
    hover). A masked score (`masked` True) is −∞, drawn hatched; "masked" says the map has
    them."""
    v, hidden = as_matrix(v, masked)
    if shrunk:
        v, rows, cols, hidden = downsample(v, rows, cols, hidden)
    if hidden is not None:
        v = np.where(hidden, -np.inf, v)
    own, seq = color_scale(v)
    scale = scale or own
    data = {"shape": list(v.shape), "scale": scale, "seq": seq, "rows": rows, "cols": cols}
    with np.errstate(over="ignore", invalid="ignore"):
        if f32:
            data["f32"] = base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
        else:
            half = (v / scale).astype("<f2")
            data["f16"] = base64.b64encode(half.tobytes()).decode("ascii")
    if hidden is not None and hidden.any():
        data["masked"] = True
    return data


def downsample(v: np.ndarray, rows, cols, hidden=None):
    """Block means down to at most SHRUNK_SIDE rows and columns; labels become ranges. With
    `hidden` (masked cells), a block is the mean of its unmasked cells, masked if it has none."""

    def bins(n: int, labels):
        starts = np.unique(np.linspace(0, n, min(n, SHRUNK_SIDE) + 1).astype(int)[:-1])
        ends = [*starts[1:], n]
        names = [
            f"{labels[a] if labels else a}…{labels[b - 1] if labels else b - 1}"
            if b - a > 1
            else str(labels[a] if labels else a)
            for a, b in zip(starts, ends, strict=True)
        ]
        return starts, names

    rs, rows = bins(v.shape[0], rows)
    cs, cols = bins(v.shape[1], cols)
    keep = np.ones(v.shape) if hidden is None else (~hidden).astype(float)

    def block_sums(x):
        return np.add.reduceat(np.add.reduceat(x, rs, axis=0), cs, axis=1)

    with np.errstate(invalid="ignore", divide="ignore"):
        means = block_sums(np.where(keep > 0, v, 0.0)) / block_sums(keep)
    if hidden is None:
        return means, rows, cols, None
    empty = block_sums(keep) == 0
    return np.where(empty, 0.0, means), rows, cols, empty


def token_chips(words) -> str:
    return "".join(f'<span class="tok">{esc(w)}</span>' for w in words)


def tokens_table(what: str, words, ids) -> str:
    """How the input was split: each readable token over its id, in a row that wraps."""
    cells = "".join(
        f"<span class='tokid'>{token_chips([w])}<small>{i}</small></span>"
        for w, i in zip(words, ids, strict=True)
    )
    n = len(ids)
    return f"<p>{esc(what)}: {n} token{'s' * (n != 1)}</p><div class='tokens'>{cells}</div>"


def result_html(result: dict) -> str:
    """The report's last words: the summary, a classifier's probability of every class, an
    embedding's values."""
    out = f"<p class='result'>{esc(result['summary'])}</p>"
    probs = result.get("probabilities")
    if probs:
        out += table(np.array([list(probs.values())]), ["p"], list(probs))
    vector = result.get("embedding")
    if vector is not None:
        shown = min(len(vector), 16)
        out += f"<p class='shape'>its first {shown} of {len(vector)} values</p>"
        out += table(np.asarray(vector, dtype=np.float64)[None, :shown], ["embedding"])
    return out


def decode_step(title: str, read, probs, labels, chosen, verb: str = "chose") -> str:
    """One decoding step: the tokens read so far, the TOP_K most likely next tokens, and the
    token that came next (`chosen`: its id, marked, with its rank even when it is not in the
    top). The mark goes by id, since two tokens can read the same (SentencePiece's byte
    fallback `<0x2E>` and `.` both read "."); a `chosen` given as text (no ids known) is marked
    only when no other token reads the same."""
    p = np.asarray(probs, dtype=np.float64)
    labels = list(labels) if labels and len(labels) == len(p) else None  # a classifier's: none

    def name(i: int) -> str:
        return labels[i] if labels else f"#{i}"

    ranked = np.argsort(-p, kind="stable")
    rank = {int(i): r for r, i in enumerate(ranked)}
    order = [int(i) for i in ranked[:TOP_K]]
    if isinstance(chosen, str):
        hit = labels.index(chosen) if labels and labels.count(chosen) == 1 else None
    else:
        hit = None if chosen is None or not 0 <= chosen < len(p) else int(chosen)
        chosen = None if chosen is None else name(int(chosen))
    if hit is not None and hit not in order:
        order.append(hit)
    rows = "".join(
        f"<tr{' class=chosen' if i == hit else ''}><td>{rank[i] + 1}</td>"
        f"<td>{token_chips([name(i)])}</td><td class='bar'><div style='width:{100 * p[i]:.1f}%'>"
        f"</div></td><td title='{p[i]:.12g}'>{p[i]:.4f}</td></tr>"
        for i in order
    )
    shown = read[-8:]  # the last tokens of the context are enough to place the step
    reads = f" reads {'… ' if len(read) > 8 else ''}{token_chips(shown)}" if read else ""
    then = f" → {verb} {token_chips([chosen])}" if chosen is not None else ""
    return (
        f"<div class='gen'><h4>{esc(title)}</h4><p>{reads}{then}</p>"
        f"<table class='top'><tr><th>rank</th><th>token</th><th></th><th>p</th></tr>"
        f"{rows}</table></div>"
    )


def decoding_html(g, vocab) -> str:
    """A decoding.Generation (greedy / sampling) or decoding.BeamResult, step by step."""

    def word(i: int) -> str:
        return vocab[i] if vocab and 0 <= i < len(vocab) else f"#{i}"

    if hasattr(g, "distributions"):
        out = []
        for k, probs in enumerate(g.distributions):
            at = g.n_prompt + k
            kept = f" (sampling kept {len(g.kept[k])} tokens)" if k < len(g.kept) else ""
            read, chosen = [word(i) for i in g.ids[:at]], g.ids[at] if at < len(g.ids) else None
            out.append(decode_step(f"step {k}{kept}", read, probs, vocab, chosen))
        return "".join(out)
    out = []
    for k, beam in enumerate(g.steps):
        rows = "".join(
            f"<tr><td>{r}</td><td>{token_chips([word(i) for i in h.ids])}</td>"
            f"<td>{h.logprob:.4f}</td><td>{'EOS' if h.finished else ''}</td></tr>"
            for r, h in enumerate(beam)
        )
        out.append(
            f"<div class='gen'><h4>beam after step {k}</h4><table class='beam'><tr><th>#</th>"
            f"<th>hypothesis</th><th>log p</th><th></th></tr>{rows}</table></div>"
        )
    best = " ".join(word(i) for i in g.best.ids)
    return f"<p>Best hypothesis: <b>{esc(best)}</b></p>" + "".join(out)


def overflow_section(steps) -> str:
    """Naive vs stable softmax vs residual + LayerNorm, the largest |value| after each block
    (the steps `overflow.*.max_abs`): a plot and a table; "" when the trace has none."""
    names = {s.name: s for s in steps}
    runs = {r: names.get(f"overflow.{r}.max_abs") for r in ("naive", "stable", "residual_ln")}
    if not all(runs.values()):
        return ""
    labels = {
        "naive": "naive softmax exp(x)/Σexp(x)",
        "stable": "stable softmax (max subtracted)",
        "residual_ln": "stable + residual + LayerNorm",
    }
    series = {labels[r]: s.values for r, s in runs.items()}
    notes = "".join(f"<li>{esc(s.note)}</li>" for s in runs.values() if s.note)
    values = table(np.array(list(series.values())), list(series), runs["naive"].cols or None)
    return (
        "<p>The same six randomly drawn encoder blocks, stacked, three ways: the largest "
        "|value| after each block (log scale). A missing point is NaN: the naive softmax "
        "overflowed.</p>"
        f"{overflow_svg(series)}<ul>{notes}</ul>{values}"
    )


def overflow_svg(series: dict[str, np.ndarray]) -> str:
    """Max |x| per block on a log scale, one line per run; NaN (or 0, off a log scale) is a
    break in the line and a red ✕ above it."""
    W, H, left, right, top, bottom = 640, 300, 64, 16, 40, 40
    colors = ["#c0392b", "#2e86c1", "#239b56"]
    finite = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in series.values()])
    lo = np.floor(np.log10(finite.min())) if finite.size else 0.0
    hi = max(np.ceil(np.log10(finite.max())) if finite.size else 1.0, lo + 1)
    n = max(len(v) for v in series.values())

    def x(k):
        return left + (W - left - right) * (k + 0.5) / n

    def y(val):
        return top + (H - top - bottom) * (hi - np.log10(val)) / (hi - lo)

    out = [f'<svg class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">']
    out.append("<title>max |x| after each block, log scale</title>")
    for e in range(int(lo), int(hi) + 1):
        yy = y(10.0**e)
        out.append(
            f'<line x1="{left}" x2="{W - right}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">1e{e}</text>'
        )
    for k in range(n):
        out.append(
            f'<text x="{x(k):.1f}" y="{H - bottom + 18}" text-anchor="middle">block {k + 1}</text>'
        )
    for j, (label, v) in enumerate(series.items()):
        c = colors[j % len(colors)]
        path, pen = [], "M"
        for k, val in enumerate(v):
            if np.isfinite(val) and val > 0:
                path.append(f"{pen}{x(k):.1f},{y(val):.1f}")
                pen = "L"
            else:
                pen = "M"  # a NaN breaks the line
        out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{c}" stroke-width="2"/>')
        for k, val in enumerate(v):
            tip = f"{esc(label)}, block {k + 1}: {format_number(float(val))}"
            if np.isfinite(val) and val > 0:
                out.append(
                    f'<circle cx="{x(k):.1f}" cy="{y(val):.1f}" r="4" fill="{c}">'
                    f"<title>{tip}</title></circle>"
                )
            else:
                out.append(
                    f'<g class="nan"><title>{tip}</title><text x="{x(k):.1f}" y="{top - 10}" '
                    f'text-anchor="middle" fill="#c0392b">✕ {format_number(float(val))}</text></g>'
                )
        out.append(
            f'<rect x="{left + 10}" y="{top + 8 + 18 * j}" width="12" height="4" fill="{c}"/>'
            f'<text x="{left + 28}" y="{top + 14 + 18 * j}">{esc(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)
