"""A trace as one self-contained HTML page that follows the data through the model.

`render_html(trace)` returns a complete HTML document: inline CSS, a small inline script, and the
data of the large matrices as JSON in a `<script type="application/json">` block. It opens from
disk and loads nothing from anywhere. Its sections, each present when the trace has what it shows:

    tokens      how the input was split into tokens (each readable, over its id)
    story       the narrated steps (those with a note), in order
    overflow    naive vs stable softmax vs residual + LayerNorm, per block (`overflow.*.max_abs`)
    scaling     ÷√c vs ÷30 (`head1.A` vs `div30.head1.A`)
    attention   every attention map, tokens on both axes, a picker for site / layer / head
    generation  each decoding step's most likely next tokens
    ablation    the run beside the same run with steps zeroed (`explain --ablate`)
    patching    each head patched in from another run, as a layers x heads heatmap (--patch-from)
    why         a translator's choice, the attribution graph drawn, a head's score (--why)
    steps       every step in order: name, equation, shape with its sizes, values
    result      what the model made of the input: the output text, a class, an embedding

Matrices up to SMALL x SMALL are numeric tables written here (the exact value in each cell's
title), and so are small tensors of 3 or more axes, as up to SMALL such matrices each under its
index ([0], [0, 1], ...); larger ones are heatmaps that the script draws from the embedded data
(float16, base64) when they scroll into view: cells of at least 8 px in a scrolling box whose
token labels stay in view, the value under the mouse in a tooltip. Scores that a mask sets to −∞
are shown masked. Heads are counted from 0 everywhere (`select.HeadNumbers`). Token labels are
shown readable (`tokenizer.display`: whitespace visible, byte-level pieces decoded). The page
stays under `max_bytes`: the largest heatmaps are downsampled, then dropped, each with a note.

This module assembles the page. The style and the script are real files, `assets/report.css`,
`assets/heatmap.js` (the drawing, shared with the live explorer) and `assets/report.js`, read as
package data and inlined; the steps come from `select.py`; tables, heatmap data, plots and
decoding steps are `html_pieces.py`'s, the ablation and patching sections `html_touch.py`'s. The
live explorer (`glassformer.serve`) serves the same files and renders its step cards and
attention maps with `step_renderer` (this page's cards, one at a time). It computes nothing about
the model (but ranking top tokens and downsampling for display), prints nothing, writes no files.
"""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np

from glassformer.decoding import ended_at_eos
from glassformer.errors import GlassformerError, param
from glassformer.explain.bundle import bundle
from glassformer.explain.html_pieces import (
    LEGEND,
    SHRUNK_SIDE,
    WEIGHTS_LEGEND,
    WEIGHTS_SCALE,
    as_matrix,
    asset,
    color_scale,
    decode_step,
    decoding_html,
    dims,
    esc,
    heatmap_data,
    is_weights,
    overflow_section,
    reduced_note,
    result_html,
    shape_text,
    table,
    token_chips,
    tokens_table,
)
from glassformer.explain.html_touch import ablation_section, patching_section, why_section
from glassformer.explain.overview import report_overview
from glassformer.explain.select import (
    Group,
    HeadNumbers,
    attention_maps,
    group_steps,
    kv_groups,
    select_steps,
)
from glassformer.explain.words import naming, rotated, sharing, shows, title, what
from glassformer.tokenizer.display import display_token
from glassformer.trace import Step, Trace

MAX_BYTES = 20_000_000  # the bound on a report's size
SMALL = 12  # matrices up to SMALL x SMALL are tables, larger ones heatmaps
ARTICLE_HEADS = "the article's heads"  # the picker's name for the heads outside any site
DRAW_TOUCHED = {"ablation": ablation_section, "patching": patching_section, "why": why_section}

# Steps shown with the weights that made them: Z with W_O, LayerNorm's output with γ and β.
_WEIGHTED = re.compile(r"(encoder|decoder)\.(?:(\d+)\.)?(self_attn\.Z|cross_attn\.Z|norm\d*\.out)$")
# The story shows these side by side, three to a row: Wq Wk Wv over Q K V.
_PROJECTIONS = ("WQ", "WK", "WV", "Q", "K", "V", "W_query", "W_key", "W_value")


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
    token_kind: str | None = None,
    tokens: dict[str, dict] | None = None,
    result: dict | None = None,
    touched: dict | None = None,
    cfg=None,
) -> str:
    """The trace as one self-contained HTML document of at most `max_bytes` bytes.

    meta: lines for the header (checkpoint, input, model); vocab: token names for `probs` and
    `generation`; params: the model's weights, to show W_O beside Z and γ, β beside LayerNorm;
    generation: a `decoding.Generation` or `decoding.BeamResult` to explain step by step;
    layers, heads: show only these blocks and heads of the model; token_kind: the tokenizer's
    kind (`tokenizer.display_kind`), so that token labels read as text (None: whitespace made
    visible only); tokens: {stack: {"what", "ids", "pieces"}}, how the input was split, shown
    first; result: {"summary", ...}, what the model made of it, shown last; touched:
    {"ablation", "patching"} as `cli/touch.py` makes them (`html_touch.py` draws them); cfg: the
    model's Config, drawn as "The whole model" (`overview.py`; none for a walkthrough).
    """
    steps = select_steps(trace, layers, heads)
    shrink: dict[str, str] = {}
    for _ in range(3):
        page = _Page(trace, vocab, params, shrink, max_bytes, token_kind)
        page.ended = generation is not None and ended_at_eos(generation)
        told = {"tokens": tokens, "result": result, "touched": touched or {}, "cfg": cfg}
        doc = page.document(steps, title, meta or {}, generation, _selection(layers, heads), told)
        size = len(doc.encode("utf-8"))
        if size <= max_bytes:
            return doc
        fixed = size - page.data_bytes
        shrink = page.plan(max_bytes - fixed - 300 * len(page.maps))
    raise GlassformerError(
        f"the report would be {size / 1e6:.1f} MB, over its {max_bytes / 1e6:g} MB bound even "
        "with its heatmaps reduced; choose fewer blocks and heads, e.g. "
        f"{param('report.layers', 0)} {param('report.heads', 0)}"
    )


def step_renderer(
    trace: Trace,
    *,
    vocab: list[str] | None = None,
    params: dict[str, np.ndarray] | None = None,
    token_kind: str | None = None,
    exact: bool = True,
    tile_cells: int | None = None,
    readable_vocab: list[str] | None = None,
    ended: bool = False,
):
    """The report's cards one at a time, for the live explorer: `.card(step)` is a step's HTML
    (as in the report), `.maps` collects the heatmap data its `<div class="hm">` elements name;
    `.labels(step)` its axis labels; `.masked(step)` its masked scores. exact: float32 heatmaps;
    tile_cells: a step's map of more cells is sent as its size only (`"tiled": step name`);
    readable_vocab: `vocab` already made readable (a big vocabulary is made so once); ended:
    the decoder's input is an output that ended with the end token (its last position unused)."""
    page = _Page(trace, None, params, {}, MAX_BYTES, token_kind, exact, tile_cells)
    page.ended = ended
    page.vocab = readable_vocab if readable_vocab is not None else page.readable(vocab)
    return page


def _selection(layers, heads) -> str:
    chosen = [
        f"{what} {', '.join(map(str, x))}"
        for what, x in (("layers", layers), ("heads", heads))
        if x is not None
    ]
    return f"Showing only {' and '.join(chosen)} of the model's blocks." if chosen else ""


class _Page:
    """One rendering pass: sections are HTML strings; heatmap data collects in `maps`."""

    def __init__(
        self,
        trace: Trace,
        vocab,
        params,
        shrink: dict[str, str],
        max_bytes,
        kind=None,
        exact: bool = False,
        tile_cells: int | None = None,
    ):
        self.trace, self.params = trace, params or {}
        self.kind = kind
        # The explorer's options: heatmaps in float32 (exact hover values), and a step's map of
        # more than tile_cells cells sent as its size only, its values fetched as it scrolls.
        self.exact, self.tile_cells = exact, tile_cells
        self.ended = False  # the decoder read an output that ended with the end token
        self.vocab = self.readable(vocab)
        self.shrink, self.max_bytes = shrink, max_bytes
        self.key = {id(s): f"s{i}" for i, s in enumerate(trace.steps)}
        self.maps: dict[str, dict] = {}  # key -> encoded heatmap
        self.sources: dict[str, tuple] = {}  # key -> (values, rows, cols, masked), for `plan`
        self.attention: set[str] = set()
        self.data_bytes = 0
        self.heads = HeadNumbers(trace.steps)
        self.kv_groups = kv_groups(trace)
        self.naming = naming(trace, self.heads)  # how titles name stacks, sublayers and heads
        # prefix -> the mask recorded beside its scores (True = may attend)
        self.masks = {
            s.name[: -len(".mask")]: np.asarray(s.values, bool)
            for s in trace.steps
            if s.name.endswith(".mask") and len(s.shape) == 2
        }

    def readable(self, pieces):
        """Token pieces as text a person reads (`tokenizer.display.display_token`)."""
        return None if pieces is None else [display_token(str(p), self.kind) for p in pieces]

    def masked(self, s: Step):
        """The scores of `s` that its mask sets to −∞ (for `...scores` and `...scaled`)."""
        prefix, _, last = s.name.rpartition(".")
        mask = self.masks.get(prefix)
        if last in ("scores", "scaled") and mask is not None and mask.shape == s.shape:
            return ~mask
        return None

    def document(self, steps, title, meta, generation, selection, told) -> str:
        tokens = told.get("tokens") or {}
        result = told.get("result")
        touch = {k: DRAW_TOUCHED[k](v) for k, v in told["touched"].items()}
        sections = [
            ("tokens", "The input, as tokens", self.tokens(tokens)),
            ("model", "The whole model", report_overview(told.get("cfg"), steps)),
            ("story", "The story", self.story(steps)),
            ("overflow", "Why softmax needs care: overflow", self.overflow(steps)),
            ("scaling", "÷√c or ÷30: how scaling shapes attention", self.scaling(steps)),
            ("attention", "Attention maps", self.attention_section(steps)),
            ("generation", "Generation, step by step", self.generation(steps, generation, tokens)),
            ("ablation", "Switched off: the ablated run", touch.get("ablation", "")),
            ("patching", "Activation patching, head by head", touch.get("patching", "")),
            ("why", "Why did it predict that", touch.get("why", "")),
            ("steps", "Every step, following the data", self.every_step(steps)),
            ("result", "The result", result_html(result) if result else ""),
        ]
        sections = [(i, h, body) for i, h, body in sections if body]
        nav = " ".join(f'<a href="#gf-{i}">{esc(h)}</a>' for i, h, _ in sections)
        lines = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in meta.items())
        header = (
            f"<header><h1>{esc(title)}</h1><dl class='meta'>{lines}</dl>"
            f"<p class='sub'>{len(steps)} steps recorded by glassformer's trace"
            f"{' · ' + esc(selection) if selection else ''}</p>{self.head_convention(steps)}"
            f"<nav>{nav}</nav></header>"
        )
        body = header + "".join(
            f'<section id="gf-{i}"><h2>{esc(h)}</h2>{b}</section>' for i, h, b in sections
        )
        data = json.dumps({"maps": self.maps}, ensure_ascii=False, separators=(",", ":"))
        data = data.replace("<", "\\u003c")  # no `</script>` (or `<!--`) can end the block early
        self.data_bytes = len(data.encode("utf-8"))
        root = "gf-" + hashlib.sha1((body + data).encode("utf-8")).hexdigest()[:10]
        script = bundle("report.js", asset).replace("ROOT_ID", root)
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>\n{asset('report.css')}</style></head>\n"
            f'<body><div class="gf" id="{root}">{body}<div class="gf-tip" hidden></div>\n'
            f'<script type="application/json" class="gf-data">{data}</script>\n'
            f"<script>\n{script}</script></div></body></html>\n"
        )

    def about(self, name: str) -> str:
        """What a head's map cannot show: the K/V head it shares, its rotated Q and K."""
        prefix = name.rpartition(".")[0]
        return " ".join(
            x for x in (sharing(name, self.kv_groups), rotated(self.trace, prefix)) if x
        )

    def head_convention(self, steps) -> str:
        """The one numbering of heads, said once at the top."""
        if all(self.heads.shown(s.name) is None for s in steps):
            return ""
        text = "Heads are counted from 0 everywhere in this report, as the model and --heads count."
        article = sorted({n for s in steps if (n := self.heads.article(s.name)) is not None})
        if article:
            names = " and ".join(f"head {n}" for n in article)
            ours = " and ".join(f"head {n - 1}" for n in article)
            text += (
                f" The article counts from 1: its {names} (steps "
                f"{', '.join(f'head{n}.*' for n in article)}) are {ours} here."
            )
        return f"<p class='sub heads-note'>{esc(text)}</p>"

    # -- matrices: a table when small, a heatmap drawn by the script when large -----------------

    def matrix(
        self, key: str, values, rows=None, cols=None, attention=False, masked=None, step=None
    ) -> str:
        v = np.asarray(values)
        if v.ndim == 1 and cols is None:
            rows, cols = None, rows  # a vector's labels belong to its entries
        # One colour rule: weights (A, probabilities) on the fixed 0..1, as a table or a map;
        # any other matrix against its own largest |value|.
        scale = WEIGHTS_SCALE if is_weights(step) else None
        if v.ndim <= 1 and v.size <= SMALL or v.ndim == 2 and max(v.shape) <= SMALL:
            return table(v, rows, cols, masked, scale=scale)
        if v.ndim > 2 and max(v.shape[-2:]) <= SMALL and v[..., 0, 0].size <= SMALL:
            return "".join(  # a small batched tensor: its matrices over the last two axes
                f"<p class='shape'>[{', '.join(map(str, i))}]</p>"
                f"{table(v[i], rows, cols, scale=scale)}"
                for i in np.ndindex(*v.shape[:-2])
            )
        if attention:
            self.attention.add(key)
        self.sources[key] = (v, rows, cols, masked)
        if self.tile_cells is not None and step is not None and v.size > self.tile_cells:
            own, seq = color_scale(as_matrix(v, masked)[0])
            scale = scale or own
            shape = list(as_matrix(v)[0].shape)
            tiled = {"shape": shape, "scale": scale, "seq": seq, "rows": rows, "cols": cols}
            self.maps[key] = tiled | {"tiled": step, "masked": masked is not None and masked.any()}
            return f'<div class="hm" data-key="{key}"></div>'
        how = self.shrink.get(key)
        if how == "drop":
            return reduced_note(
                f"Values of this {dims(v.shape)} matrix are left out to keep the file under "
                f"{self.max_bytes / 1e6:g} MB; choose fewer blocks or heads (--layers, --heads)."
            )
        self.maps[key] = heatmap_data(
            v, rows, cols, how == "down", masked, f32=self.exact, scale=scale
        )
        note = ""
        if how == "down":
            shown = dims(self.maps[key]["shape"])
            note = reduced_note(
                f"Shown downsampled from {dims(v.shape)} to {shown} (block means) to keep "
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
            v, rows, cols, masked = self.sources[k]
            if k not in plan and max(v.shape) > SHRUNK_SIDE:
                plan[k] = "down"
                size[k] = len(json.dumps(heatmap_data(v, rows, cols, True, masked)))
        for k in order:
            if sum(size.values()) <= budget:
                return plan
            plan[k] = "drop"
            size[k] = 0
        return plan

    def labels(self, s: Step) -> tuple[list[str] | None, list[str] | None]:
        """The trace's axis labels; top-level logits and probs get the decoder's tokens as rows
        and the vocabulary as columns."""
        rows, cols = map(self.readable, self.trace.axis_labels(s))
        if s.name.rsplit(".", 1)[-1] in ("logits", "probs") and len(s.shape) == 2:
            words = self.readable(self.trace.labels.get("decoder"))
            rows = rows or (words if words and len(words) == s.shape[0] else None)
            cols = cols or (self.vocab if self.vocab and len(self.vocab) == s.shape[1] else None)
        return rows, cols

    def card(self, s: Step, anchor: bool = True) -> str:
        """A step's card: its title, its equation, what it does and what this run shows, then
        its internal name and shape, its narration, its values (and the weights beside)."""
        rows, cols = self.labels(s)
        key = self.key[id(s)]
        attrs = f' id="step-{esc(s.name)}"' if anchor else ""
        note = f'<p class="note">{esc(s.note)}</p>' if s.note else ""
        masked = self.masked(s)
        if masked is not None and masked.any():
            note += '<p class="shape">Hatched −∞: scores the mask hides from the softmax.</p>'
        if is_weights(s.name):  # the one colour rule of attention weights, said on the card
            note += f'<p class="shape">{WEIGHTS_LEGEND}</p>'
        told = shows(s, self.trace, (rows, cols), ended=self.ended)
        told = f'<p class="shows">{esc(told)}</p>' if told else ""
        return (
            f'<article class="step"{attrs}><header><h3 class="step-title">'
            f'{esc(title(s.name, self.naming))}</h3><span class="eq">{esc(s.equation)}</span>'
            f'</header><p class="what">{esc(what(s.name, self.naming))}</p>{told}'
            f'<p class="shape"><code class="name">{esc(s.name)}</code> · {shape_text(s)}</p>'
            f"{note}{self.matrix(key, s.values, rows, cols, s.name.endswith('.A'), masked, s.name)}"
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
            rms = s.name.replace(".out", ".rms") in self.trace  # RMSNorm: g, no β
            shown = [("g (gain)" if rms else "γ (gain)", f"{base}.{norm}.weight", False)]
            shown.append(("β (bias)", f"{base}.{norm}.bias", False))
        parts = []
        for j, (label, name, transpose) in enumerate(shown):
            if name in self.params:
                w = np.asarray(self.params[name], dtype=np.float64)
                w = w.T if transpose else w
                parts.append(
                    f'<div class="param"><span class="eq">{esc(label)}</span> '
                    f"<code>{esc(name)}</code> {dims(w.shape)}"
                    f"{self.matrix(f'{key}.w{j}', w)}</div>"
                )
        return "".join(parts)

    # -- sections ------------------------------------------------------------------------------

    def tokens(self, tokens: dict[str, dict]) -> str:
        return "".join(
            tokens_table(t["what"], self.readable(t["pieces"]), t["ids"]) for t in tokens.values()
        )

    def story(self, steps) -> str:
        told = [s for s in steps if s.note]
        if not told:
            return ""
        out, row = ["<p>The narrated steps, in the order the data flows.</p>"], []

        def flush():
            if len(row) > 1:  # Wq Wk Wv over Q K V, each product under its matrix
                out.append(f"<div class='trio'>{''.join(self.card(x, False) for x in row)}</div>")
            else:
                out.extend(self.card(x, False) for x in row)
            row.clear()

        for s in told:
            prefix, _, last = s.name.rpartition(".")
            if row and (last not in _PROJECTIONS or row[0].name.rpartition(".")[0] != prefix):
                flush()
            if last in _PROJECTIONS:
                row.append(s)
            else:
                out.append(self.card(s, anchor=False))
        flush()
        return "".join(out)

    def overflow(self, steps) -> str:
        return overflow_section(steps)

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
                rows, cl = map(self.readable, self.trace.axis_labels(a))
                parts = [f"<h4>{esc(label)}: <code>{esc(a.name)}</code></h4>"]
                if scaled is not None:
                    parts.append(f"<p class='shape'>scores {esc(label)}</p>")
                    labels = map(self.readable, self.trace.axis_labels(scaled))
                    parts.append(table(scaled.values, *labels, self.masked(scaled)))
                parts.append("<p class='shape'>A = softmax(row)</p>" + table(a.values, rows, cl))
                cols.append(f"<div>{''.join(parts)}</div>")
            shown = self.heads.label(sqrt.name) or head
            out.append(
                f"<h3>{esc(shown)}: <code>{esc(head)}</code></h3>"
                f"<div class='pair'>{''.join(cols)}</div>"
            )
        return "".join(out)

    def attention_section(self, steps) -> str:
        maps = attention_maps(steps)
        if not maps:
            return ""
        sites = list(dict.fromkeys((m.site, m.kind) for m in maps))
        options = "".join(
            f'<option value="{esc(site)}">{esc(site or ARTICLE_HEADS)} · {esc(kind)}</option>'
            for site, kind in sites
        )
        counted = " Heads are counted from 0." if any(m.head is not None for m in maps) else ""
        figures = []
        for n, m in enumerate(maps):
            rows, cols = self.labels(m.step)
            key = self.key[id(m.step)]
            body = self.matrix(key, m.step.values, rows, cols, True, None, m.step.name)
            named = self.heads.label(m.step.name)
            named = " ".join(x for x in (named, self.about(m.step.name)) if x)
            figures.append(
                f'<figure class="att" data-site="{esc(m.site)}" '
                f'data-layer="{"" if m.layer is None else m.layer}" '
                f'data-head="{"" if m.head is None else m.head}" data-name="{esc(m.step.name)}"'
                f"{'' if n == 0 else ' hidden'}><figcaption><b>"
                f"{esc(title(m.step.name, self.naming))}</b> <code>{esc(m.step.name)}</code> "
                f"{esc(m.kind)} · {dims(m.step.shape)}{' · ' + esc(named) if named else ''}"
                f"</figcaption>{body}</figure>"
            )
        return (
            "<p>Row i shows how much token i (the query) takes from each token j (the key); "
            f"every row sums to 1.{counted} Choose a map:</p>"
            '<div class="picker"><label>attention <select class="pick-site">'
            f"{options}</select></label>"
            '<label>layer <select class="pick-layer"></select></label>'
            '<label>head <select class="pick-head"></select></label>'
            f'<span class="shown">{esc(maps[0].step.name)}</span></div>'
            f"<p class='shape'>{len(maps)} maps.</p>{''.join(figures)}"
        )

    def generation(self, steps, generation, tokens=None) -> str:
        """The decoding steps, each marking the token that came next by its id."""
        names = {s.name: s for s in steps}
        stepwise = [s for s in steps if re.fullmatch(r"generate\.step\d+\.probs", s.name)]
        if stepwise:
            ids = names.get("generate.output_ids")
            words = self.readable(ids.cols) if ids is not None else None
            out = []
            for s in stepwise:
                n = int(s.name.split(".")[1][len("step") :])
                read = words[: n + 1] if words else []
                chosen = int(ids.values[n + 1]) if words and n + 1 < len(words) else None
                labels = self.readable(s.cols) or self.vocab
                out.append(decode_step(f"step {n}", read, s.values, labels, chosen))
            told = f"<p class='note'>{esc(ids.note)}</p>" if ids is not None and ids.note else ""
            return told + "".join(out)
        if generation is not None:
            return decoding_html(generation, self.vocab)
        probs = [s for s in steps if s.name == "probs" or s.name.endswith(".probs")]
        if not probs:
            return ""
        s = probs[-1]
        labels = self.vocab or self.readable(s.cols)
        if s.values.ndim == 1:
            return decode_step("prediction", [], s.values, labels, None)
        rows, _ = self.labels(s)
        ids = ((tokens or {}).get("decoder") or {}).get("ids") or []
        ids = ids if len(ids) == len(s.values) else rows  # ids, else (only) labels
        out = [
            "<p>Each row of <code>probs</code> is the model's distribution over the next token "
            "after that position; the token that actually follows is marked.</p>"
        ]
        for t, p in enumerate(s.values):
            read = rows[: t + 1] if rows else []
            nxt = ids[t + 1] if ids and t + 1 < len(ids) else None
            out.append(decode_step(f"position {t}", read, p, labels, nxt, "next in the text:"))
        if len(out) <= 17:
            return "".join(out)
        return (
            f"{out[0]}<details><summary>all {len(out) - 2} positions</summary>"
            f"{''.join(out[1:-1])}</details>{out[-1]}"
        )

    def every_step(self, steps) -> str:
        labels = self.trace.labels
        stacks = [k for k in ("encoder", "decoder") if k in labels] or list(labels)[:1]
        chips = "".join(
            f"<p><b>{esc(k)}</b> tokens: {token_chips(self.readable(labels[k]))}</p>"
            for k in stacks
        )
        open_all = len(steps) <= 150
        return (
            f"{chips}<p class='shape'>Shapes: {LEGEND}.</p>"
            "<p><button type='button' class='open-all'>expand all</button> "
            "<button type='button' class='close-all'>collapse all</button></p>"
            f"{self.groups(group_steps(steps), open_all, top=True)}"
        )

    def groups(self, items, open_all: bool, top: bool = False) -> str:
        """Steps and nested groups: each group's header once, its step count beside it; all
        open in a small trace, only the outermost in a big one."""
        out = []
        for x in items:
            if not isinstance(x, Group):
                out.append(self.card(x))
                continue
            n, named = x.count(), esc(title(x.key, self.naming))
            out.append(
                f"<details class='group'{' open' if open_all or top else ''}><summary>"
                f"<b class='group-title'>{named}</b> <code>{esc(x.key)}</code> <span "
                f"class='shape'>{n} step{'s' * (n > 1)}</span></summary>"
                f"{self.groups(x.items, open_all)}</details>"
            )
        return "".join(out)
