"""The explorer's actions: a request's fields read, the run found or made, the answer shaped
as strict JSON.

Every action takes a dict (the request body) and returns a dict (or, for the exports, text and
chunks). A field that is missing, of the wrong type or out of range is a `RequestError` with the
HTTP status and a message that names the field (`fields.py`); an input the model cannot take
(too many tokens, an unknown word) is the library's `GlassformerError`, a 400 as well. Numbers go
out as JSON numbers, NaN and infinities as the strings "nan", "inf", "-inf" (as `Trace.to_dict`
writes them), so that every answer parses with a strict JSON parser.

Step cards and attention maps are the static report's own (`explain.html.step_renderer`): the
same HTML and heatmap data, drawn in the page by the same `assets/heatmap.js`. A map of more
than TILE_CELLS cells is sent as its size and fetched tile by tile as it scrolls (`tile`).

Deliberately not here: HTTP (`app.py`), a field's type and range (`fields.py`), running the
engines (`runs.py`, `generation.py`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np

from glassformer.decoding import Decoding, ended_at_eos
from glassformer.explain import timelapse
from glassformer.explain.html import SMALL, render_html, step_renderer
from glassformer.explain.html_pieces import (
    SHRUNK_SIDE,
    WEIGHTS_LEGEND,
    WEIGHTS_SCALE,
    as_matrix,
    dims,
    esc,
    heatmap_data,
    is_weights,
)
from glassformer.explain.overview import collapses, overview_svg
from glassformer.explain.select import Group, HeadNumbers, attention_maps, group_steps, kv_groups
from glassformer.explain.words import Naming, naming, title
from glassformer.inspect import choice, qk
from glassformer.serve import fidelity, fields, generation, neuron, runs
from glassformer.serve.fields import RequestError
from glassformer.serve.sessions import Fixed, NotFound, Registry, RunCache
from glassformer.serve.stores import Stores
from glassformer.tokenizer.display import display_tokens
from glassformer.trace import jsonable
from glassformer.training import views

TILE_CELLS = 250_000  # a step's map of more cells is fetched tile by tile
MAX_TILE = 200_000  # cells in one tile (a screenful is ~15,000)
LAYOUTS = 32  # step lists kept (`Explorer._layout`)


# -- strict JSON ----------------------------------------------------------------------------------


def dumps(x) -> str:
    """Strict JSON (`trace.jsonable`: NaN and infinities as strings), ASCII only (\\u escapes:
    any text, even a lone surrogate, goes out)."""
    return json.dumps(jsonable(x), ensure_ascii=True, allow_nan=False, separators=(",", ":"))


# -- the actions ----------------------------------------------------------------------------------


class Explorer:
    """The registry, the run cache and the actions over them."""

    def __init__(
        self,
        registry: Registry,
        cache_bytes: int = 512 * 2**20,
        view: str = "auto",
        stores=(),
        saes=(),
    ):
        if view not in runs.VIEWS:
            raise ValueError(f"view is one of {', '.join(runs.VIEWS)}, not {view!r}")
        self.registry = registry
        self.stores = Stores(stores, saes)  # `serve --store DIR [--sae SAE]`: activations
        self.cache = RunCache(cache_bytes)
        self.view = view  # which runs are float32 views (`runs.view_of`)
        self._layouts: OrderedDict = OrderedDict()  # see `_layout`
        self._layouts_lock = threading.Lock()

    def check(self, action: str, body: dict) -> None:
        """What a request may hold at all, before anything is loaded or run: the fields of its
        action, and (cheap) the types and ranges that need no model."""
        fields.check_fields(action, body)
        if "text" in body and body["text"] is not None:
            fields.text(body, "text")
        if action == "generate":
            fields.decoding(body, vocab=None)
            fields.steering(body)
        elif action == "intervene":
            fields.heads(body)

    # A run: found by (model, text, ids, target), made on a miss.
    def run(self, body: dict):
        model_id = fields.get(body, "model")
        m = self.registry.load(model_id)
        if isinstance(m, Fixed):
            for name in ("ids", "target"):
                if body.get(name) is not None:
                    raise RequestError(400, f"a walkthrough has fixed inputs: drop {name!r}")
            if body.get("text") is not None:
                fields.text(body, "text")  # typed or not, a walkthrough runs its own text
            key = (model_id,)
            return m, self.cache.get(key, lambda: runs.make_run(model_id, m, m.text))
        typed = fields.text(body, "text")
        cfg = m.cfg
        for name, arch in (("ids", "decoder"), ("target", "encoder-decoder")):
            if body.get(name) is not None and cfg.arch != arch:
                raise RequestError(
                    400,
                    f"{name!r} is the input of a{'n' * (arch[0] == 'e')} {arch}; this model "
                    f"is a{'n' * (cfg.arch[0] == 'e')} {cfg.arch}: drop it",
                )
        ids = (
            fields.id_list(body, "ids", cfg.vocab_size, cfg.max_len)
            if cfg.arch == "decoder"
            else None
        )
        target = None
        if cfg.arch == "encoder-decoder":
            target = fields.id_list(body, "target", cfg.vocab_size, cfg.max_len)
        key = (model_id, typed if ids is None else None, _tuple(ids), _tuple(target))
        view = runs.view_of(m, self.view)
        return m, self.cache.get(key, lambda: runs.make_run(model_id, m, typed, ids, target, view))

    def models(self) -> dict:
        return {"models": self.registry.listing()}

    def store(self, body: dict) -> dict:
        """The steps the model's store of activations holds (none without one)."""
        model_id = fields.get(body, "model")
        return self.stores.steps(model_id, self.registry.load(model_id))

    def top(self, body: dict) -> dict:
        """A unit's top examples over the model's store (`serve/stores.py`)."""
        model_id = fields.get(body, "model")
        return self.stores.top(model_id, self.registry.load(model_id), body)

    def load(self, body: dict) -> dict:
        """Load a model now (if not yet): its line of the list, with its sizes, or why not."""
        model_id = fields.get(body, "model")
        self.registry.load(model_id)
        return self.registry.entry(model_id).listing()

    def overview(self, body: dict) -> dict:
        """The whole model drawn from its Config (`explain.overview`): "svg", and "svg_all" with
        every block in full when a stack is deep enough to be drawn with a band; a walkthrough
        has no Config to draw ("svg" empty, "note" says why)."""
        m = self.registry.load(fields.get(body, "model"))
        if isinstance(m, Fixed):
            return {"svg": "", "svg_all": "", "note": "a walkthrough follows an article's steps"}
        names = m.class_names if m.cfg.n_classes else None
        full = overview_svg(m.cfg, expand=True, classes=names) if collapses(m.cfg) else ""
        return {"svg": overview_svg(m.cfg, classes=names), "svg_all": full}

    def views(self, body: dict) -> dict:
        """The training time-lapse recorded in a model's folder (`train --snapshot-views`), as
        `explain.timelapse.page_data` gives it to a page (the maps exactly as recorded); read
        from the file at each request, so that a run still training shows its newest frames."""
        e = self.registry.entry(fields.get(body, "model"))
        recorded = views.load(e.folder) if e.folder is not None else None
        if recorded is None or not recorded.frames:
            raise NotFound(
                f"{e.name} has no recorded views ({views.VIEWS_FILE}): record them while "
                "training, with glassformer train ... --snapshot-views TEXT --view-every N"
            )
        return timelapse.page_data(recorded)

    def summary(self, body: dict) -> dict:
        """A run: its tokens, what the model says, its steps (names only) and attention maps."""
        m, run = self.run(body)
        if "summary" not in run.extra:  # the same for every request of this run: made once
            run.extra["summary"] = jsonable(self._summary(m, run))
        cache = {"runs": len(self.cache), "mb": round(self.cache.bytes() / 2**20, 1)}
        return run.extra["summary"] | {"cache": cache}

    def _summary(self, m, run) -> dict:
        steps, attention = self._layout(run)
        return {
            "model": run.model_id,
            "arch": run.arch,
            "engine": run.engine,
            "view": run.engine != runs.REFERENCE,  # a float32 view: its badge waits for a pause
            "tokens": runs.tokens(m, run),
            "unknown": run.unknown,
            "output": runs.output(m, run),
            "elapsed_ms": run.elapsed_ms,
            "n_steps": len(run.trace),
            "steps": steps,
            "attention": attention,
        }

    def _layout(self, run) -> tuple[list, list]:
        """The step list and the attention maps' list of a run: made from its steps' names,
        shapes and equations only, so made once for every run of the same layout (a model's
        texts of one length; 25 ms of GPT-2-small's 1,267 steps, 60 of SmolLM2-135M's 2,496)."""
        key = (run.model_id, tuple((s.name, s.shape, s.equation) for s in run.trace.steps))
        with self._layouts_lock:
            if key in self._layouts:
                self._layouts.move_to_end(key)
                return self._layouts[key]
        maps = attention_maps(run.trace.steps)
        heads = HeadNumbers(run.trace.steps)
        groups = kv_groups(run.trace)  # once: every head's sentence reads it
        steps = jsonable(_tree(group_steps(run.trace.steps), heads, naming(run.trace, heads)))
        attention = [
            {
                "name": a.step.name,
                "site": a.site,
                "layer": a.layer,
                "head": a.head,
                "kind": a.kind,
                "shape": list(a.step.shape),
                "label": heads.label(a.step.name),
                "about": neuron.about(run.trace, a.step.name.rpartition(".")[0], groups),
            }
            for a in maps
        ]
        with self._layouts_lock:
            self._layouts[key] = steps, attention
            while len(self._layouts) > LAYOUTS:
                self._layouts.popitem(last=False)
        return steps, attention

    def _renderer(self, m, run):
        if isinstance(m, Fixed):
            return step_renderer(run.trace, tile_cells=TILE_CELLS)
        rt = m.runtime
        return step_renderer(
            run.trace,
            params=m.params,
            token_kind=rt.token_kind,
            tile_cells=TILE_CELLS,
            readable_vocab=rt.cached("vocab", lambda: display_tokens(rt.tok.vocab, rt.token_kind)),
            ended=run.generation is not None and ended_at_eos(run.generation),
        )

    def _step(self, run, name: str):
        if name not in run.trace:
            raise NotFound(f"this run has no step {name[:80]!r}")
        return run.trace.step(name)

    def step(self, body: dict) -> dict:
        """One step's card, as in the report: name, equation, shape, values (table or map)."""
        name = fields.text(body, "name")
        m, run = self.run(body)
        s = self._step(run, name)
        page = self._renderer(m, run)
        out = {"name": s.name, "html": page.card(s), "maps": page.maps}
        return out | _small_values(page, s)

    def attention(self, body: dict) -> dict:
        """One attention map as a figure (tokens on both axes), with what clicking a cell needs."""
        name = fields.text(body, "name")
        m, run = self.run(body)
        s = self._step(run, name)
        if len(s.shape) != 2:
            raise RequestError(400, f"{s.name} is not a matrix")
        page = self._renderer(m, run)
        rows, cols = page.labels(s)
        key = page.key[id(s)]
        body_html = page.matrix(key, s.values, rows, cols, True, page.masked(s), s.name)
        prefix = s.name.rpartition(".")[0]
        label = " ".join(
            x for x in (page.heads.label(s.name), neuron.about(run.trace, prefix)) if x
        )
        caption = f"<code>{esc(s.name)}</code> {esc(s.equation)} · {dims(s.shape)}"
        caption += f" · {esc(label)}" if label else ""
        if is_weights(s.name):  # the one colour rule, said where the map is
            caption += f" · {WEIGHTS_LEGEND}"
        return {
            "name": s.name,
            "html": f'<figure class="att"><figcaption>{caption}</figcaption>{body_html}</figure>',
            "maps": page.maps,
            "shape": list(s.shape),
            "neuron": neuron.sources(run.trace, prefix) is not None,
        } | _small_values(page, s)

    def heads(self, body: dict) -> dict:
        """Every head's map of one site and layer: the all-heads grid (thumbnails)."""
        site = fields.text(body, "site")
        layer = fields.integer(body, "layer", 0, None, None, says="a block number >= 0 (or null)")
        _, run = self.run(body)
        maps = [a for a in attention_maps(run.trace.steps) if a.site == site and a.layer == layer]
        if not maps:
            raise NotFound(f"no attention maps at site {site[:60]!r}, layer {layer}")
        return {"heads": [_thumb(a) for a in maps]}

    def model_view(self, body: dict) -> dict:
        """Every attention map of the run, by site, layer and head (bertviz's model view): the
        maps as thumbnails, on the attention weights' fixed 0..1, a side over SHRUNK_SIDE cells
        reduced by block means (`downsample`) as the report reduces a large map."""
        _, run = self.run(body)
        sites: dict[str, dict] = {}
        for a in attention_maps(run.trace.steps):
            if a.layer is None or a.head is None:
                continue  # a walkthrough's article heads: no layers to lay out
            site = sites.setdefault(a.site, {"site": a.site, "kind": a.kind, "layers": {}})
            site["layers"].setdefault(a.layer, []).append(_thumb(a, shrink=True))
        for site in sites.values():
            site["layers"] = [{"layer": k, "heads": v} for k, v in sorted(site["layers"].items())]
        return {"sites": list(sites.values())}

    def neuron(self, body: dict) -> dict:
        """One attention score taken apart: q_i and k_j per dimension, their product, the sum,
        the scaling and the softmax weight (bertviz's neuron view; `neuron.take_apart`)."""
        name = fields.text(body, "name")
        for k in ("i", "j"):  # a number before the run; its range (the run's tokens) after
            fields.integer(body, k, 0, None, says="a token position >= 0")
        m, run = self.run(body)
        s = self._step(run, name)
        prefix = s.name.rpartition(".")[0]
        if neuron.sources(run.trace, prefix) is None:
            raise NotFound(f"{prefix} has no Q and K matrices recorded to take apart")
        n_q, n_k = neuron.extent(run.trace, prefix)
        i, j = fields.integer(body, "i", 0, n_q - 1), fields.integer(body, "j", 0, n_k - 1)
        rows, cols = self._renderer(m, run).labels(s) if len(s.shape) == 2 else (None, None)
        out = neuron.take_apart(run.trace, s, i, j, rows, cols)
        if not isinstance(m, Fixed) and m.cfg.norm == "pre" and qk.HEAD.match(prefix):
            # why: the score split by the parts of the residual streams (the float64 reference)
            parts = qk.decompose(runs.reference(m, run), m.params, m.cfg, prefix, i, j)
            out["parts"] = parts.to_dict(k=8, table=False)
        return out

    def cross(self, body: dict) -> dict:
        """The last decoder token's cross-attention over the source tokens, every layer and head
        (a translation step: which source tokens the next word is read from)."""
        m, run = self.run(body)
        if run.arch != "encoder-decoder":
            raise RequestError(400, "cross-attention needs an encoder-decoder model")
        rows = {}
        for a in attention_maps(run.trace.steps):
            if a.site == "decoder.cross_attn":
                rows.setdefault(a.layer, {})[a.head] = a.step.values[-1]
        return {
            "source": runs.tokens(m, run)["encoder"],
            "layers": [[rows[layer][h] for h in sorted(rows[layer])] for layer in sorted(rows)],
        }

    def tile(self, body: dict) -> dict:
        """A window [r0, r1) x [c0, c1) of a large step's values (float32, row-major)."""
        name = fields.text(body, "name")
        for k in ("r0", "r1", "c0", "c1"):  # a number before the run; its range after
            fields.integer(body, k, 0, None, says="a row or column >= 0")
        _, run = self.run(body)
        s = self._step(run, name)
        page = step_renderer(run.trace)
        v, hidden = as_matrix(s.values, page.masked(s))
        R, C = v.shape
        r0, c0 = fields.integer(body, "r0", 0, R - 1), fields.integer(body, "c0", 0, C - 1)
        r1, c1 = fields.integer(body, "r1", r0 + 1, R), fields.integer(body, "c1", c0 + 1, C)
        if (r1 - r0) * (c1 - c0) > MAX_TILE:
            raise RequestError(400, f"a tile has at most {MAX_TILE:,} cells; ask for a smaller one")
        w = v[r0:r1, c0:c1]
        if hidden is not None:
            w = np.where(hidden[r0:r1, c0:c1], -np.inf, w)
        data = base64.b64encode(np.ascontiguousarray(w, dtype="<f4").tobytes()).decode("ascii")
        return {"shape": [r1 - r0, c1 - c0], "f32": data}

    def generate(self, body: dict) -> dict:
        model_id = fields.get(body, "model")
        m = self.registry.load(model_id)
        if isinstance(m, Fixed):
            raise RequestError(400, "a walkthrough has fixed steps; choose a model to generate")
        cfg = m.cfg
        options = fields.decoding(body, cfg.vocab_size)
        default_new = cfg.max_len if cfg.arch == "encoder-decoder" else 20
        new = options.pop("max_new_tokens") or default_new
        # max_len bounds a generation anyway: a larger count means the same (and stays small)
        how = Decoding(max_new_tokens=min(new, cfg.max_len), **options)
        text, steer = fields.text(body, "text"), fields.steering(body)
        if steer is None:
            return generation.generate(m, text, how)
        steering = m.steer(steer["pair"], layer=steer["layer"], scale=steer["scale"])
        with steering:  # the generation shown is the steered one
            out = generation.generate(m, text, how)
        seeded = dataclasses.replace(how, seed=out.get("seed", how.seed))  # the same draws
        out["steering"] = m.steered(text, steering, decoding=seeded).to_dict()
        return out

    def choice(self, body: dict) -> dict:
        """Why the beam's winner beat a hypothesis the page picked, at the step where they parted
        (`inspect.choice.between`): the gap and its split by component and by token."""
        m = self.registry.load(fields.get(body, "model"))
        if isinstance(m, Fixed):
            raise RequestError(400, "a walkthrough has fixed steps; choose a model to generate")
        cfg = m.cfg
        ids = [fields.id_list(body, k, cfg.vocab_size, cfg.max_len) for k in ("kept", "dropped")]
        if None in ids:
            raise RequestError(400, "the request needs the fields 'kept' and 'dropped' (token ids)")
        src = fields.id_list(body, "src", cfg.vocab_size, cfg.max_len)
        n_prompt = fields.integer(body, "n_prompt", 1, cfg.max_len)
        lp = fields.real(body, "length_penalty", default=1.0)
        return choice.between(m.runtime, src, n_prompt, *ids, length_penalty=lp).to_dict()

    def intervene(self, body: dict) -> dict:
        fields.heads(body)  # before the run
        m, run = self.run(body)
        if isinstance(m, Fixed):
            raise RequestError(400, "a walkthrough has fixed steps; choose a model to intervene on")
        how, checked = fields.heads(body)
        source = None
        if how == "patch":
            second = dict(body, text=fields.text(body, "patch_text"), ids=None)
            if run.arch == "encoder-decoder":
                second["target"] = run.ids  # the same decoder input: positions line up
            elif run.arch == "decoder":
                second.pop("ids")
            _, source = self.run(second)
        position = fields.integer(body, "position", 0, None, None)
        return runs.intervene(m, run, checked, how, source, position)

    def fidelity(self, body: dict) -> dict:
        m, run = self.run(body)
        return fidelity.badge(m, run)

    # -- exports ------------------------------------------------------------------------------

    def report(self, body: dict) -> str:
        """The run as the static report: one self-contained HTML file."""
        m, run = self.run(body)
        if isinstance(m, Fixed):
            return render_html(run.trace, title=m.title, meta={"walkthrough": run.model_id})
        meta = {"model": self.registry.entry(run.model_id).description}
        meta["input"] = body.get("text", "")
        return render_html(
            runs.reference(m, run),  # a float32 view's run: the float64 reference, made now
            title=f"glassformer: “{str(body.get('text', ''))[:80]}”",
            meta=meta,
            vocab=m.tokenizer.vocab,
            params=m.params,
            generation=run.generation,
            token_kind=m.runtime.token_kind,
            cfg=m.cfg,
        )

    def trace_json(self, body: dict) -> Iterator[str]:
        """The run's trace as JSON (as `explain --json` writes it), one step at a time."""
        m, run = self.run(body)
        kind = None if isinstance(m, Fixed) else m.runtime.token_kind
        trace = runs.reference(m, run)  # a float32 view's run: the float64 reference, made now
        labels = trace.labels
        readable = {k: display_tokens(v, kind) for k, v in labels.items()}
        head = {"model": run.model_id, "labels": labels, "labels_readable": readable}
        yield dumps(head)[:-1] + ',"steps":['
        for n, s in enumerate(trace.steps):
            d = s.to_dict()
            d["rows"], d["cols"] = trace.axis_labels(s)
            yield ("," if n else "") + dumps(d)
        yield "]}\n"


def _small_values(page, s) -> dict:
    """The values and labels of a step the report shows as a table (for PNG / SVG export; a
    heatmap's values are in its map data)."""
    v = np.asarray(s.values)
    if v.size > SMALL * SMALL:
        return {}
    rows, cols = page.labels(s)
    if v.ndim <= 1:
        rows, cols = None, cols or rows  # a vector is one row
    m = as_matrix(v)[0]
    return {
        "values": m,
        "rows": rows if rows and len(rows) == m.shape[0] else None,
        "cols": cols if cols and len(cols) == m.shape[1] else None,
    }


def _tuple(x):
    return None if x is None else tuple(x)


def _tree(items, heads: HeadNumbers, named: Naming) -> list[dict]:
    """The step list: groups and steps, each with its title in words (`explain.words.title`)."""
    out = []
    for x in items:
        if isinstance(x, Group):
            label = heads.label(x.key + ".")
            out.append(
                {
                    "group": x.key,
                    "count": x.count(),
                    "label": label,
                    "items": _tree(x.items, heads, named),
                    "title": title(x.key, named),
                }
            )
        else:
            out.append(
                {
                    "step": x.name,
                    "equation": x.equation,
                    "shape": list(x.shape),
                    "title": title(x.name, named),
                }
            )
    return out


def _thumb(a, shrink: bool = False) -> dict:
    """One head's map as a thumbnail: on the weights' fixed 0..1 (the one colour rule), with
    `shrink` reduced to at most SHRUNK_SIDE cells a side."""
    small = shrink and max(a.step.shape) > SHRUNK_SIDE
    data = heatmap_data(a.step.values, None, None, small, scale=WEIGHTS_SCALE)
    return {"name": a.step.name, "layer": a.layer, "head": a.head, "map": data}
