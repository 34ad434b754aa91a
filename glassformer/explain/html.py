"""A trace as one self-contained HTML page that follows the data through the model.

`render_html(trace)` returns a complete HTML document: inline CSS, a small inline script, and the
data of the large matrices as JSON in a `<script type="application/json">` block. It opens from
disk and loads nothing from anywhere. Its sections, each present when the trace has what it shows:

    story       the narrated steps (those with a note), in order
    overflow    naive vs stable softmax vs residual + LayerNorm, per block (`overflow.*.max_abs`)
    scaling     ÷√c vs ÷30 (`head1.A` vs `div30.head1.A`)
    attention   every attention map, tokens on both axes, a picker for site / layer / head
    generation  each decoding step's most likely next tokens
    steps       every step in order: name, equation, shape with its sizes, values

Matrices up to SMALL x SMALL are numeric tables written here (the exact value in each cell's
title); larger ones are heatmaps that the script draws from the embedded data (float16, base64)
when they scroll into view, with the value under the mouse in a tooltip. The page stays under
`max_bytes`: the largest heatmaps are downsampled, then dropped, each with a visible note.

This module computes nothing about the model (ranking the top tokens and downsampling for display
aside), prints nothing and writes no files.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from dataclasses import dataclass

import numpy as np

from glassformer.errors import GlassformerError
from glassformer.explain.text import format_number
from glassformer.trace import Step, Trace

MAX_BYTES = 20_000_000  # the bound on a report's size
SMALL = 12  # matrices up to SMALL x SMALL are tables, larger ones heatmaps
TOP_K = 5  # tokens shown per decoding step
SHRUNK_SIDE = 64  # a downsampled heatmap has at most this many rows and columns

# Symbolic shapes of the engine's steps (legend in `_LEGEND`); cross-attention swaps in S.
_SYMBOLS = {
    **dict.fromkeys(("X", "P", "input", "Z", "normalized", "out", "output"), "T×C"),
    **dict.fromkeys(("add1", "add2", "add3"), "T×C"),
    **dict.fromkeys(("Q", "K", "V", "C"), "T×D"),
    **dict.fromkeys(("scores", "scaled", "mask", "A"), "T×T"),
    **dict.fromkeys(("mean", "std"), "T×1"),
    **{"concat": "T×H·D", "hidden": "T×F", "logits": "T×V", "probs": "T×V", "pooled": "C"},
}
_LEGEND = "T tokens, S encoder tokens, C d_model, H heads, D head dim, F d_ff, V vocabulary"


# -- choosing steps: layers, heads, attention maps ----------------------------------------------

# Steps shown with the weights that made them: Z with W_O, LayerNorm's output with γ and β.
_WEIGHTED = re.compile(r"(encoder|decoder)\.(?:(\d+)\.)?(self_attn\.Z|cross_attn\.Z|norm\d*\.out)$")
_LAYER = re.compile(r"(?:^|\.)(?:encoder|decoder)\.(\d+)(?=\.)")
_HEAD = re.compile(r"(?:^|\.)head(\d+)(?=\.)")


def layer_of(name: str) -> int | None:
    """The block index of an engine step (`decoder.3.ffn.out` -> 3), or None outside the blocks."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def head_of(name: str) -> int | None:
    m = _HEAD.search(name)
    return int(m.group(1)) if m else None


def select_steps(
    trace: Trace, layers: list[int] | None = None, heads: list[int] | None = None
) -> list[Step]:
    """The steps of the chosen blocks and heads of the model (None = all). Steps outside the
    blocks (embeddings, logits, the articles' hand-made steps) always stay."""
    in_blocks = [s for s in trace.steps if layer_of(s.name) is not None]
    _check_choice("layer", layers, {layer_of(s.name) for s in in_blocks})
    _check_choice("head", heads, {head_of(s.name) for s in in_blocks} - {None})

    def keep(s: Step) -> bool:
        layer, head = layer_of(s.name), head_of(s.name)
        if layer is None:
            return True
        return (layers is None or layer in layers) and (
            heads is None or head is None or head in heads
        )

    return [s for s in trace.steps if keep(s)]


def _check_choice(what: str, chosen: list[int] | None, available: set) -> None:
    if chosen is None:
        return
    if not available:
        raise GlassformerError(
            f"--{what}s: this trace has no model {what}s to choose from "
            f"(only engine blocks such as encoder.0 have them); leave out --{what}s"
        )
    missing = sorted(set(chosen) - available)
    if missing:
        raise GlassformerError(
            f"--{what}s: no {what} {', '.join(map(str, missing))} in this trace; "
            f"choose from {_span(sorted(available))}"
        )


def _span(xs: list[int]) -> str:
    return f"{xs[0]}-{xs[-1]}" if xs == list(range(xs[0], xs[-1] + 1)) else ", ".join(map(str, xs))


@dataclass
class AttentionMap:
    """One attention matrix A and where it is: `site` is its name without layer and head."""

    step: Step
    site: str
    layer: int | None
    head: int | None
    kind: str


def attention_maps(steps: list[Step]) -> list[AttentionMap]:
    """Every 2-d step named `...A`: encoder self-, decoder masked self- and cross-attention."""
    maps = []
    for s in steps:
        parts = s.name.split(".")
        if parts[-1] != "A" or s.values.ndim != 2:
            continue
        site = [
            p
            for i, p in enumerate(parts[:-1])
            if not re.fullmatch(r"head\d+", p)
            and not (p.isdigit() and i > 0 and parts[i - 1] in ("encoder", "decoder"))
        ]
        maps.append(
            AttentionMap(s, ".".join(site), layer_of(s.name), head_of(s.name), _kind(parts))
        )
    return maps


def _kind(parts: list[str]) -> str:
    if "cross_attn" in parts:
        return "cross-attention: decoder queries, encoder keys"
    if "decoder" in parts and "self_attn" in parts:
        return "masked self-attention (decoder)"
    if "encoder" in parts:
        return "self-attention (encoder)"
    return "causal self-attention" if "causal" in parts else "self-attention"


# -- the report ---------------------------------------------------------------------------------


def render_html(
    trace: Trace,
    *,
    title: str = "glassformer trace",
    meta: dict[str, str] | None = None,
    vocab: list[str] | None = None,
    params: dict[str, np.ndarray] | None = None,
    generation=None,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    max_bytes: int = MAX_BYTES,
) -> str:
    """The trace as one self-contained HTML document of at most `max_bytes` bytes.

    meta: lines for the header (checkpoint, input, model); vocab: token names for `probs` and
    `generation`; params: the model's weights, to show W_O beside Z and γ, β beside LayerNorm;
    generation: a `decode.Generation` or `decode.BeamResult` to explain step by step;
    layers, heads: show only these blocks and heads of the model.
    """
    steps = select_steps(trace, layers, heads)
    shrink: dict[str, str] = {}
    for _ in range(3):
        page = _Page(trace, vocab, params, shrink, max_bytes)
        doc = page.document(steps, title, meta or {}, generation, _selection(layers, heads))
        size = len(doc.encode("utf-8"))
        if size <= max_bytes:
            return doc
        fixed = size - page.data_bytes
        shrink = page.plan(max_bytes - fixed - 300 * len(page.maps))
    raise GlassformerError(
        f"the report would be {size / 1e6:.1f} MB, over its {max_bytes / 1e6:g} MB bound even "
        "with its heatmaps reduced; choose fewer blocks and heads, e.g. --layers 0 --heads 0"
    )


def _selection(layers, heads) -> str:
    chosen = [
        f"{what} {', '.join(map(str, x))}"
        for what, x in (("layers", layers), ("heads", heads))
        if x is not None
    ]
    return f"Showing only {' and '.join(chosen)} of the model's blocks." if chosen else ""


class _Page:
    """One rendering pass: sections are HTML strings; heatmap data collects in `maps`."""

    def __init__(self, trace: Trace, vocab, params, shrink: dict[str, str], max_bytes: int):
        self.trace, self.vocab, self.params = trace, vocab, params or {}
        self.shrink, self.max_bytes = shrink, max_bytes
        self.key = {id(s): f"s{i}" for i, s in enumerate(trace.steps)}
        self.maps: dict[str, dict] = {}  # key -> encoded heatmap
        self.sources: dict[str, tuple] = {}  # key -> (values, rows, cols), for `plan`
        self.attention: set[str] = set()
        self.data_bytes = 0

    def document(self, steps, title, meta, generation, selection) -> str:
        sections = [
            ("story", "The story", self.story(steps)),
            ("overflow", "Why softmax needs care: overflow", self.overflow(steps)),
            ("scaling", "÷√c or ÷30: how scaling shapes attention", self.scaling(steps)),
            ("attention", "Attention maps", self.attention_section(steps)),
            ("generation", "Generation, step by step", self.generation(steps, generation)),
            ("steps", "Every step, following the data", self.every_step(steps)),
        ]
        sections = [(i, h, body) for i, h, body in sections if body]
        nav = " ".join(f'<a href="#gf-{i}">{_e(h)}</a>' for i, h, _ in sections)
        lines = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in meta.items())
        header = (
            f"<header><h1>{_e(title)}</h1><dl class='meta'>{lines}</dl>"
            f"<p class='sub'>{len(steps)} steps recorded by glassformer's trace"
            f"{' · ' + _e(selection) if selection else ''}</p><nav>{nav}</nav></header>"
        )
        body = header + "".join(
            f'<section id="gf-{i}"><h2>{_e(h)}</h2>{b}</section>' for i, h, b in sections
        )
        data = json.dumps({"maps": self.maps}, ensure_ascii=False, separators=(",", ":"))
        data = data.replace("<", "\\u003c")  # no `</script>` (or `<!--`) can end the block early
        self.data_bytes = len(data.encode("utf-8"))
        root = "gf-" + hashlib.sha1((body + data).encode("utf-8")).hexdigest()[:10]
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n"
            f'<body><div class="gf" id="{root}">{body}<div class="gf-tip" hidden></div>\n'
            f'<script type="application/json" class="gf-data">{data}</script>\n'
            f"<script>{_JS.replace('ROOT_ID', root)}</script></div></body></html>\n"
        )

    # -- matrices: a table when small, a heatmap drawn by the script when large -----------------

    def matrix(self, key: str, values, rows=None, cols=None, attention=False) -> str:
        v = np.asarray(values)
        if v.ndim == 1 and cols is None:
            rows, cols = None, rows  # a vector's labels belong to its entries
        if v.ndim <= 1 and v.size <= SMALL or v.ndim == 2 and max(v.shape) <= SMALL:
            return _table(v, rows, cols)
        if attention:
            self.attention.add(key)
        self.sources[key] = (v, rows, cols)
        how = self.shrink.get(key)
        if how == "drop":
            return _note(
                f"Values of this {_dims(v.shape)} matrix are left out to keep the file under "
                f"{self.max_bytes / 1e6:g} MB; choose fewer blocks or heads (--layers, --heads)."
            )
        self.maps[key] = _encode(v, rows, cols, shrunk=how == "down")
        note = ""
        if how == "down":
            shown = _dims(self.maps[key]["shape"])
            note = _note(
                f"Shown downsampled from {_dims(v.shape)} to {shown} (block means) to keep "
                f"the file under {self.max_bytes / 1e6:g} MB."
            )
        return f'{note}<div class="hm" data-key="{key}"></div>'

    def plan(self, budget: int) -> dict[str, str]:
        """Heatmaps to downsample, then to drop, largest first and attention maps last, so that
        the embedded data fits in `budget` bytes."""
        plan = dict(self.shrink)
        size = {k: len(json.dumps(m)) for k, m in self.maps.items()}  # bytes each, as planned
        order = sorted(self.maps, key=lambda k: (k in self.attention, -size[k]))
        for k in order:
            if sum(size.values()) <= budget:
                return plan
            v, rows, cols = self.sources[k]
            if k not in plan and max(v.shape) > SHRUNK_SIDE:
                plan[k] = "down"
                size[k] = len(json.dumps(_encode(v, rows, cols, shrunk=True)))
        for k in order:
            if sum(size.values()) <= budget:
                return plan
            plan[k] = "drop"
            size[k] = 0
        return plan

    def labels(self, s: Step) -> tuple[list[str] | None, list[str] | None]:
        """The trace's axis labels; top-level logits and probs get the decoder's tokens as rows
        and the vocabulary as columns."""
        rows, cols = self.trace.axis_labels(s)
        if s.name.rsplit(".", 1)[-1] in ("logits", "probs") and s.values.ndim == 2:
            words = self.trace.labels.get("decoder")
            rows = rows or (words if words and len(words) == s.shape[0] else None)
            cols = cols or (self.vocab if self.vocab and len(self.vocab) == s.shape[1] else None)
        return rows, cols

    def card(self, s: Step, anchor: bool = True) -> str:
        rows, cols = self.labels(s)
        key = self.key[id(s)]
        attrs = f' id="step-{_e(s.name)}"' if anchor else ""
        note = f'<p class="note">{_e(s.note)}</p>' if s.note else ""
        return (
            f'<article class="step"{attrs}><header><code class="name">{_e(s.name)}</code>'
            f'<span class="eq">{_e(s.equation)}</span></header>'
            f'<p class="shape">{_shape_text(s)}</p>{note}'
            f"{self.matrix(key, s.values, rows, cols, s.name.endswith('.A'))}"
            f"{self.weights_beside(s, key)}</article>"
        )

    def weights_beside(self, s: Step, key: str) -> str:
        """W_O beside Z, γ and β beside LayerNorm, when the model's weights were given."""
        m = _WEIGHTED.search(s.name)
        if not m or not self.params:
            return ""
        stack, i, what = m.groups()
        base = f"{stack}.layers.{i}" if i is not None else stack  # weights.spec's names
        if what.endswith(".Z"):
            shown = [("W_O (H·D × C), Z = concat·W_O", f"{base}.{what[:-2]}.o.weight", True)]
        else:
            norm = what[: -len(".out")]
            shown = [("γ (gain)", f"{base}.{norm}.weight", False)]
            shown.append(("β (bias)", f"{base}.{norm}.bias", False))
        parts = []
        for j, (label, name, transpose) in enumerate(shown):
            if name in self.params:
                w = np.asarray(self.params[name], dtype=np.float64)
                w = w.T if transpose else w
                parts.append(
                    f'<div class="param"><span class="eq">{_e(label)}</span> '
                    f"<code>{_e(name)}</code> {_dims(w.shape)}"
                    f"{self.matrix(f'{key}.w{j}', w)}</div>"
                )
        return "".join(parts)

    # -- sections ------------------------------------------------------------------------------

    def story(self, steps) -> str:
        told = [s for s in steps if s.note]
        if not told:
            return ""
        intro = "<p>The narrated steps, in the order the data flows.</p>"
        return intro + "".join(self.card(s, anchor=False) for s in told)

    def overflow(self, steps) -> str:
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
        notes = "".join(f"<li>{_e(s.note)}</li>" for s in runs.values() if s.note)
        table = _table(np.array(list(series.values())), list(series), runs["naive"].cols or None)
        return (
            "<p>The same six randomly drawn encoder blocks, stacked, three ways: the largest "
            "|value| after each block (log scale). A missing point is NaN: the naive softmax "
            "overflowed.</p>"
            f"{_overflow_svg(series)}<ul>{notes}</ul>{table}"
        )

    def scaling(self, steps) -> str:
        names = {s.name: s for s in steps}
        pairs = [
            (s, names[s.name[len("div30.") :]])
            for s in steps
            if s.name.startswith("div30.")
            and s.name.endswith(".A")
            and s.name[len("div30.") :] in names
        ]
        if not pairs:
            return ""
        out = [
            "<p>The article first divides the scores by 30 instead of √c. Dividing by the "
            "smaller √c leaves the scores far apart, so the softmax is nearly one-hot; ÷30 "
            "squeezes them together and the weights soften.</p>"
        ]
        for div30, sqrt in pairs:
            head = sqrt.name[: -len(".A")]
            q = names.get(f"{head}.Q")
            c = f"√{q.values.shape[-1]}" if q is not None else "√c"
            cols = []
            for label, a in ((f"÷{c}", sqrt), ("÷30", div30)):
                scaled = names.get(a.name[: -len(".A")] + ".scaled")
                rows, cl = self.trace.axis_labels(a)
                parts = [f"<h4>{_e(label)}: <code>{_e(a.name)}</code></h4>"]
                if scaled is not None:
                    parts.append(f"<p class='shape'>scores {_e(label)}</p>")
                    parts.append(_table(scaled.values, *self.trace.axis_labels(scaled)))
                parts.append("<p class='shape'>A = softmax(row)</p>" + _table(a.values, rows, cl))
                cols.append(f"<div>{''.join(parts)}</div>")
            out.append(f"<h3>{_e(head)}</h3><div class='pair'>{''.join(cols)}</div>")
        return "".join(out)

    def attention_section(self, steps) -> str:
        maps = attention_maps(steps)
        if not maps:
            return ""
        sites = list(dict.fromkeys((m.site, m.kind) for m in maps))
        options = "".join(
            f'<option value="{_e(site)}">{_e(site or "article heads")} · {_e(kind)}</option>'
            for site, kind in sites
        )
        figures = []
        for n, m in enumerate(maps):
            rows, cols = self.labels(m.step)
            body = self.matrix(self.key[id(m.step)], m.step.values, rows, cols, attention=True)
            figures.append(
                f'<figure class="att" data-site="{_e(m.site)}" '
                f'data-layer="{"" if m.layer is None else m.layer}" '
                f'data-head="{"" if m.head is None else m.head}" data-name="{_e(m.step.name)}"'
                f"{'' if n == 0 else ' hidden'}><figcaption><code>{_e(m.step.name)}</code> "
                f"{_e(m.kind)} · {_dims(m.step.shape)}</figcaption>{body}</figure>"
            )
        return (
            "<p>Row i shows how much token i (the query) takes from each token j (the key); "
            "every row sums to 1. Choose a map:</p>"
            '<div class="picker"><label>attention <select class="pick-site">'
            f"{options}</select></label>"
            '<label>layer <select class="pick-layer"></select></label>'
            '<label>head <select class="pick-head"></select></label>'
            f'<span class="shown">{_e(maps[0].step.name)}</span></div>'
            f"<p class='shape'>{len(maps)} maps.</p>{''.join(figures)}"
        )

    def generation(self, steps, generation) -> str:
        names = {s.name: s for s in steps}
        stepwise = [s for s in steps if re.fullmatch(r"generate\.step\d+\.probs", s.name)]
        if stepwise:
            ids = names.get("generate.output_ids")
            words = ids.cols if ids is not None else None
            out = []
            for s in stepwise:
                n = int(s.name.split(".")[1][len("step") :])
                read = words[: n + 1] if words else []
                chosen = words[n + 1] if words and n + 1 < len(words) else None
                out.append(_decode_step(f"step {n}", read, s.values, s.cols or self.vocab, chosen))
            told = f"<p class='note'>{_e(ids.note)}</p>" if ids is not None and ids.note else ""
            return told + "".join(out)
        if generation is not None:
            return self.decoding(generation)
        probs = [s for s in steps if s.name == "probs" or s.name.endswith(".probs")]
        if not probs:
            return ""
        s = probs[-1]
        labels = self.vocab or s.cols
        if s.values.ndim == 1:
            return _decode_step("prediction", [], s.values, labels, None)
        rows, _ = self.labels(s)
        out = [
            "<p>Each row of <code>probs</code> is the model's distribution over the next token "
            "after that position; the token that actually follows is marked.</p>"
        ]
        for t, p in enumerate(s.values):
            read = rows[: t + 1] if rows else []
            nxt = rows[t + 1] if rows and t + 1 < len(rows) else None
            out.append(_decode_step(f"position {t}", read, p, labels, nxt, "next in the text:"))
        if len(out) <= 17:
            return "".join(out)
        return (
            f"{out[0]}<details><summary>all {len(out) - 2} positions</summary>"
            f"{''.join(out[1:-1])}</details>{out[-1]}"
        )

    def decoding(self, g) -> str:
        """A decode.Generation (greedy / sampling) or decode.BeamResult, step by step."""

        def word(i: int) -> str:
            return self.vocab[i] if self.vocab and 0 <= i < len(self.vocab) else f"#{i}"

        if hasattr(g, "distributions"):
            out = []
            for k, probs in enumerate(g.distributions):
                at = g.n_prompt + k
                kept = f" (sampling kept {len(g.kept[k])} tokens)" if k < len(g.kept) else ""
                out.append(
                    _decode_step(
                        f"step {k}{kept}",
                        [word(i) for i in g.ids[:at]],
                        probs,
                        self.vocab,
                        word(g.ids[at]) if at < len(g.ids) else None,
                    )
                )
            return "".join(out)
        out = []
        for k, beam in enumerate(g.steps):
            rows = "".join(
                f"<tr><td>{r}</td><td>{_tokens([word(i) for i in h.ids])}</td>"
                f"<td>{h.logprob:.4f}</td><td>{'EOS' if h.finished else ''}</td></tr>"
                for r, h in enumerate(beam)
            )
            out.append(
                f"<div class='gen'><h4>beam after step {k}</h4><table class='beam'><tr><th>#</th>"
                f"<th>hypothesis</th><th>log p</th><th></th></tr>{rows}</table></div>"
            )
        best = " ".join(word(i) for i in g.best.ids)
        return f"<p>Best hypothesis: <b>{_e(best)}</b></p>" + "".join(out)

    def every_step(self, steps) -> str:
        labels = self.trace.labels
        stacks = [k for k in ("encoder", "decoder") if k in labels] or list(labels)[:1]
        chips = "".join(f"<p><b>{_e(k)}</b> tokens: {_tokens(labels[k])}</p>" for k in stacks)
        groups: list[tuple[str, list[Step]]] = []
        for s in steps:
            g = _group_of(s.name)
            if groups and groups[-1][0] == g:
                groups[-1][1].append(s)
            else:
                groups.append((g, [s]))
        open_all = len(steps) <= 150
        body = "".join(
            f"<details class='group'{' open' if open_all or n == 0 else ''}><summary>"
            f"<code>{_e(g)}</code> <span class='shape'>{len(ss)} step{'s' * (len(ss) > 1)}"
            "</span></summary>"
            f"{''.join(self.card(s) for s in ss)}</details>"
            for n, (g, ss) in enumerate(groups)
        )
        return (
            f"{chips}<p class='shape'>Shapes: {_LEGEND}.</p>"
            "<p><button type='button' class='open-all'>expand all</button> "
            "<button type='button' class='close-all'>collapse all</button></p>"
            f"{body}"
        )


# -- pieces of HTML -----------------------------------------------------------------------------


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _note(text: str) -> str:
    return f'<p class="note reduced">{_e(text)}</p>'


def _dims(shape) -> str:
    return " × ".join(map(str, shape)) if len(shape) else "scalar"


def _shape_text(s: Step) -> str:
    parts = s.name.split(".")
    symbols = _SYMBOLS.get(parts[-1], "")
    if "cross_attn" in parts:
        symbols = {"K": "S×D", "V": "S×D"}.get(parts[-1], symbols.replace("T×T", "T×S"))
    n = len(symbols.split("×")) if symbols else -1
    sym = f" ({symbols.replace('×', ' × ')})" if n == s.values.ndim else ""
    return f"shape {_dims(s.shape)}{sym}"


def _group_of(name: str) -> str:
    """The block a step belongs to (`encoder.0`, `model.step3.decoder.1`) or its name's start."""
    parts = name.split(".")
    for i, p in enumerate(parts[:-1]):
        if p.isdigit() and i > 0 and parts[i - 1] in ("encoder", "decoder"):
            return ".".join(parts[: i + 1])
    return ".".join(parts[:2]) if len(parts) >= 3 else parts[0]


def _rgb(t: float, seq: bool) -> tuple[int, int, int]:
    """White to blue for weights in [0, 1]; blue (-1) to white (0) to red (+1) otherwise."""
    if np.isnan(t):
        return (190, 190, 190)
    t = max(-1.0, min(1.0, t))
    end = (33, 102, 172) if seq or t < 0 else (178, 24, 43)
    a = abs(t)
    return tuple(round(255 + (c - 255) * a) for c in end)


def _table(values, rows=None, cols=None) -> str:
    """A labelled numeric table; cells tinted by value, the exact value in each title."""
    v = np.asarray(values)
    if v.ndim == 0:
        v, rows, cols = v.reshape(1, 1), None, None
    elif v.ndim == 1:
        v, rows = v[None, :], None
    f = v.astype(np.float64)
    finite = np.abs(f[np.isfinite(f)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    seq = bool(finite.size) and bool(np.nanmin(np.where(np.isinf(f), 0, f)) >= 0)
    head = ""
    if cols is not None:
        corner = "<th></th>" if rows is not None else ""
        head = "<tr>" + corner + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr>"
    body = []
    for i, row in enumerate(v):
        cells = []
        for x, fx in zip(row, f[i], strict=True):
            t = fx / scale if np.isfinite(fx) else (np.nan if np.isnan(fx) else np.sign(fx))
            r, g, b = _rgb(t, seq)
            dark = " class='dark'" if abs(t) > 0.55 else ""
            cells.append(
                f'<td style="background:#{r:02x}{g:02x}{b:02x}"{dark} title="{fx:.12g}">'
                f"{_e(format_number(x.item() if v.dtype == bool else fx))}</td>"
            )
        label = f"<th>{_e(rows[i])}</th>" if rows is not None and i < len(rows) else ""
        body.append(f"<tr>{label}{''.join(cells)}</tr>")
    return f'<table class="mat">{head}{"".join(body)}</table>'


def _encode(v: np.ndarray, rows, cols, shrunk: bool) -> dict:
    """A heatmap's data: float16 of values / scale (scale = max |finite value|), base64."""
    v = np.asarray(v, dtype=np.float64)
    v = v[None, :] if v.ndim == 1 else v.reshape(-1, v.shape[-1])
    if shrunk:
        v, rows, cols = _downsample(v, rows, cols)
    finite = np.abs(v[np.isfinite(v)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    seq = bool(finite.size) and bool(v[np.isfinite(v)].min() >= 0)
    with np.errstate(over="ignore", invalid="ignore"):
        half = (v / scale).astype("<f2")
    return {
        "shape": list(v.shape),
        "scale": scale,
        "seq": seq,
        "rows": rows,
        "cols": cols,
        "f16": base64.b64encode(half.tobytes()).decode("ascii"),
    }


def _downsample(v: np.ndarray, rows, cols):
    """Block means down to at most SHRUNK_SIDE rows and columns; labels become ranges."""

    def bins(n: int, labels):
        starts = np.unique(np.linspace(0, n, min(n, SHRUNK_SIDE) + 1).astype(int)[:-1])
        ends = [*starts[1:], n]
        names = [
            f"{labels[a] if labels else a}…{labels[b - 1] if labels else b - 1}"
            if b - a > 1
            else str(labels[a] if labels else a)
            for a, b in zip(starts, ends, strict=True)
        ]
        return starts, np.diff([*starts, n]), names

    rs, rn, rows = bins(v.shape[0], rows)
    cs, cn, cols = bins(v.shape[1], cols)
    with np.errstate(invalid="ignore"):
        sums = np.add.reduceat(np.add.reduceat(v, rs, axis=0), cs, axis=1)
    return sums / np.outer(rn, cn), rows, cols


def _tokens(words) -> str:
    return "".join(f'<span class="tok">{_e(w)}</span>' for w in words)


def _decode_step(title: str, read, probs, labels, chosen, verb: str = "chose") -> str:
    """One decoding step: the tokens read so far, the TOP_K most likely next tokens, and the
    token that came next (`chosen`, marked, with its rank even when it is not in the top)."""
    p = np.asarray(probs, dtype=np.float64)
    labels = list(labels) if labels and len(labels) == len(p) else None  # a classifier's: none

    def name(i: int) -> str:
        return labels[i] if labels else f"#{i}"

    ranked = np.argsort(-p, kind="stable")
    rank = {int(i): r for r, i in enumerate(ranked)}
    order = [int(i) for i in ranked[:TOP_K]]
    hit = labels.index(chosen) if labels and chosen in labels else None
    if hit is not None and hit not in order:
        order.append(hit)
    rows = "".join(
        f"<tr{' class=chosen' if i == hit else ''}><td>{rank[i] + 1}</td>"
        f"<td>{_tokens([name(i)])}</td><td class='bar'><div style='width:{100 * p[i]:.1f}%'>"
        f"</div></td><td title='{p[i]:.12g}'>{p[i]:.4f}</td></tr>"
        for i in order
    )
    shown = read[-8:]  # the last tokens of the context are enough to place the step
    reads = f" reads {'… ' if len(read) > 8 else ''}{_tokens(shown)}" if read else ""
    then = f" → {verb} {_tokens([chosen])}" if chosen is not None else ""
    return (
        f"<div class='gen'><h4>{_e(title)}</h4><p>{reads}{then}</p>"
        f"<table class='top'><tr><th>rank</th><th>token</th><th></th><th>p</th></tr>"
        f"{rows}</table></div>"
    )


def _overflow_svg(series: dict[str, np.ndarray]) -> str:
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
            tip = f"{_e(label)}, block {k + 1}: {format_number(float(val))}"
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
            f'<text x="{left + 28}" y="{top + 14 + 18 * j}">{_e(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


# -- the inline style and script ----------------------------------------------------------------

_CSS = """
.gf{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d232b;max-width:1120px;
margin:0 auto;padding:0 16px 64px}
.gf [hidden]{display:none!important}
.gf h1{font-size:1.55em;margin:.7em 0 .2em}
.gf h2{font-size:1.25em;border-bottom:2px solid #dfe3e8;padding-bottom:.2em;margin-top:2.2em}
.gf h3{font-size:1.05em;margin:1.2em 0 .3em}.gf h4{margin:.6em 0 .2em;font-size:.95em}
.gf nav a{margin-right:1.1em}.gf .meta div{display:flex;gap:.6em}.gf .meta dt{color:#5b6673}
.gf .meta dd{margin:0}.gf .sub{color:#5b6673;margin:.2em 0}
.gf code{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.gf .step{border:1px solid #e3e7ec;border-radius:6px;padding:8px 12px;margin:10px 0}
.gf .step header{display:flex;flex-wrap:wrap;gap:.3em 1.4em;align-items:baseline}
.gf .name{font-weight:600}
.gf .eq{font-family:"Cambria Math","STIX Two Math","Latin Modern Math",Georgia,serif}
.gf .shape{color:#5b6673;font-size:.85em;margin:.2em 0}
.gf .note{background:#f4f7fb;border-left:3px solid #7aa2d6;padding:.3em .6em;margin:.4em 0}
.gf .note.reduced{border-color:#d68a2e;background:#fdf6ec}
.gf table.mat{border-collapse:collapse;font:12px ui-monospace,Menlo,Consolas,monospace;
margin:.4em 0}
.gf table.mat td{padding:2px 7px;text-align:right;border:1px solid #fff;min-width:3.2em}
.gf table.mat th{font-weight:400;color:#3a4450;padding:2px 7px;text-align:right}
.gf td.dark{color:#fff}
.gf .param{margin:.5em 0 0 1em}
.gf .hm{overflow:auto;margin:.4em 0;max-width:100%}
.gf .hm-grid{display:inline-grid;grid-template-columns:auto auto;align-items:end}
.gf .hm canvas{image-rendering:pixelated;display:block;outline:1px solid #ccd3db}
.gf .hm-rows{display:grid;text-align:right;padding-right:4px;color:#3a4450}
.gf .hm-rows span,.gf .hm-cols span{overflow:hidden;white-space:nowrap;line-height:1}
.gf .hm-rows span{max-width:9em;display:flex;align-items:center;justify-content:flex-end}
.gf .hm-cols{display:grid;padding-bottom:4px;color:#3a4450}
.gf .hm-cols span{writing-mode:vertical-rl;transform:rotate(180deg);max-height:7em;
display:flex;align-items:center}
.gf .legend{font-size:11px;color:#5b6673}
.gf .gf-tip{position:fixed;pointer-events:none;background:#1d232b;color:#fff;z-index:10;
font:12px ui-monospace,Menlo,monospace;padding:3px 6px;border-radius:4px;white-space:pre}
.gf details.group{border-left:3px solid #dfe3e8;padding-left:10px;margin:6px 0}
.gf summary{cursor:pointer}
.gf .tok{display:inline-block;background:#eef2f7;border-radius:4px;padding:0 5px;margin:1px;
font:13px ui-monospace,Menlo,monospace}
.gf .picker{display:flex;flex-wrap:wrap;gap:.6em 1.4em;align-items:center;margin:.6em 0}
.gf .picker select{font:inherit;max-width:34em}
.gf .shown{font:12px ui-monospace,monospace;color:#5b6673}
.gf figure{margin:.6em 0}.gf figcaption{font-size:.9em;margin-bottom:.3em}
.gf .gen{display:inline-block;vertical-align:top;margin:0 18px 12px 0;min-width:17em}
.gf .gen p{margin:.1em 0 .3em}
.gf table.top,.gf table.beam{border-collapse:collapse;font-size:.9em}
.gf table.top td,.gf table.beam td,.gf table.beam th{padding:1px 6px}
.gf td.bar{width:9em}.gf td.bar div{background:#5b8fc7;height:10px;min-width:1px}
.gf tr.chosen td{font-weight:700;background:#fff3cd}
.gf .pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:18px}
.gf svg.plot{max-width:100%;height:auto;font:12px system-ui,sans-serif}
.gf svg .grid{stroke:#e3e7ec}
"""

# Draws heatmaps from the embedded data, shows the value under the mouse, drives the picker.
_JS = """
(function () {
  "use strict";
  const root = document.getElementById("ROOT_ID");
  const data = JSON.parse(root.querySelector("script.gf-data").textContent);
  const tip = root.querySelector(".gf-tip");

  function half(h) {  // IEEE float16 -> number
    const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, f = h & 1023;
    if (e === 0) return s * f * Math.pow(2, -24);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }
  function values(m) {
    if (!m.v) {
      const bin = atob(m.f16), v = new Float64Array(bin.length / 2);
      for (let i = 0; i < v.length; i++)
        v[i] = half(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) * m.scale;
      m.v = v;
    }
    return m.v;
  }
  function rgb(t, seq) {  // as _rgb in html.py
    if (Number.isNaN(t)) return [190, 190, 190];
    t = Math.max(-1, Math.min(1, t));
    const end = seq || t < 0 ? [33, 102, 172] : [178, 24, 43], a = Math.abs(t);
    return end.map(c => Math.round(255 + (c - 255) * a));
  }
  function fmt(v) {
    if (Number.isNaN(v)) return "nan";
    if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-4)) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  }
  function strip(cls, labels, cell, font) {
    const el = document.createElement("div");
    el.className = cls;
    el.style[cls === "hm-rows" ? "gridTemplateRows" : "gridTemplateColumns"] =
      "repeat(" + labels.length + ", " + cell + "px)";
    el.style.fontSize = font + "px";
    for (const text of labels) {
      const s = document.createElement("span");
      s.textContent = text;
      s.title = text;
      el.append(s);
    }
    return el;
  }
  function draw(el) {
    const m = data.maps[el.dataset.key];
    if (!m || el.dataset.drawn) return;
    el.dataset.drawn = "1";
    const [R, C] = m.shape, v = values(m);
    const side = el.closest("figure") ? 800 : 640;  // attention maps: room for token labels
    const cell = Math.max(1, Math.min(32, Math.floor(side / C), Math.floor(side / R)));
    const canvas = document.createElement("canvas");
    canvas.width = C;
    canvas.height = R;
    canvas.style.width = C * cell + "px";
    canvas.style.height = R * cell + "px";
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(C, R);
    for (let i = 0; i < R * C; i++) {
      const [r, g, b] = rgb(v[i] / m.scale, m.seq);
      img.data[4 * i] = r; img.data[4 * i + 1] = g; img.data[4 * i + 2] = b;
      img.data[4 * i + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    canvas.addEventListener("mousemove", e => {
      const i = Math.min(R - 1, Math.floor(e.offsetY / cell));
      const j = Math.min(C - 1, Math.floor(e.offsetX / cell));
      const row = m.rows ? m.rows[i] : "row " + i, col = m.cols ? m.cols[j] : "col " + j;
      tip.textContent = row + " × " + col + ": " + fmt(v[i * C + j]);
      tip.style.left = e.clientX + 14 + "px";
      tip.style.top = e.clientY + 14 + "px";
      tip.hidden = false;
    });
    canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
    const grid = document.createElement("div"), font = Math.min(12, cell - 1);
    grid.className = "hm-grid";
    const blank = () => document.createElement("div"), labelled = cell >= 7;
    grid.append(blank(), labelled && m.cols ? strip("hm-cols", m.cols, cell, font) : blank());
    grid.append(labelled && m.rows ? strip("hm-rows", m.rows, cell, font) : blank(), canvas);
    const legend = document.createElement("div");
    legend.className = "legend";
    legend.textContent = R + " × " + C + " · colour scale " + (m.seq ? "0" : fmt(-m.scale)) +
      " … " + fmt(m.scale) + " · hover for values";
    el.append(grid, legend);
  }

  const maps = root.querySelectorAll(".hm");
  if ("IntersectionObserver" in window) {
    const io = new IntersectionObserver(entries => {
      for (const e of entries) if (e.isIntersecting) { io.unobserve(e.target); draw(e.target); }
    }, { rootMargin: "300px" });
    maps.forEach(el => io.observe(el));
  } else {
    maps.forEach(draw);
  }

  const figs = Array.from(root.querySelectorAll("figure.att"));
  const site = root.querySelector(".pick-site"), layer = root.querySelector(".pick-layer");
  const head = root.querySelector(".pick-head"), shown = root.querySelector(".picker .shown");
  function fill(select, options, label) {
    const keep = select.value;
    select.replaceChildren(...options.map(o => new Option(o === "" ? "—" : label + " " + o, o)));
    select.value = options.includes(keep) ? keep : options[0];
    select.disabled = options.length < 2;
  }
  const unique = xs => Array.from(new Set(xs));
  function pick() {
    const here = figs.filter(f => f.dataset.site === site.value);
    fill(layer, unique(here.map(f => f.dataset.layer)), "layer");
    const inLayer = here.filter(f => f.dataset.layer === layer.value);
    fill(head, unique(inLayer.map(f => f.dataset.head)), "head");
    const chosen = inLayer.find(f => f.dataset.head === head.value) || here[0];
    figs.forEach(f => { f.hidden = f !== chosen; });
    chosen.querySelectorAll(".hm").forEach(draw);
    shown.textContent = chosen.dataset.name;
  }
  if (site && figs.length) {
    [site, layer, head].forEach(s => s.addEventListener("change", pick));
    pick();
  }

  root.querySelectorAll(".open-all, .close-all").forEach(b => b.addEventListener("click", () => {
    root.querySelectorAll("details.group").forEach(d => { d.open = b.className === "open-all"; });
  }));
  root.dataset.ready = "1";
})();
"""
