"""A training time-lapse shown: the frames that `train --snapshot-views` recorded (`views.py`)
as a text table of the steps, as the data a page draws, and as one self-contained HTML page.

`table(views)` is the printed report: one line per frame (the training loss, the probe's loss
on the tokens an earlier copy gives away and on the others, the best prefix-matching score and
its head). `page_data(views)` is what a page draws: `views.to_json` (the maps as base64 float16,
exactly as recorded) with the heads' titles and the words (what a prefix-matching score is, what
this run shows); the explorer's GET /api/views sends it. `render_page(views)` writes it into one
HTML document, inline CSS and scripts, that opens from disk and loads nothing: a time slider
(with play), the chosen head's map at that step, every head's thumbnail coloured by its score,
and the curves over the steps with a marker at the slider's step (`assets/timelapse.js`).

Deliberately not here: recording the frames or computing their metrics (`views.py` did, while
training), drawing (`assets/timelapse.js` over `assets/heatmap.js`), printing or writing files.
"""

from __future__ import annotations

import json

import numpy as np

from glassformer.explain.bundle import bundle
from glassformer.explain.html_pieces import asset, esc
from glassformer.explain.words import Naming, rounded, title
from glassformer.trace import jsonable
from glassformer.training import views as V

EQUATION = "A = softmax(Ω/√c + mask), Ω = Q·Kᵀ"
PREFIX_WORDS = (
    "A head's prefix-matching score (Olsson et al. 2022, “In-context Learning and Induction "
    "Heads”) is the attention a token puts on the token that followed an earlier occurrence of "
    "itself, averaged over the tokens that occurred before: near 1 for an induction head, which "
    "looks back to what came next last time and copies it."
)
PREVIOUS_WORDS = (
    "Its previous-token score is the attention a token puts on the token just before it: an "
    "induction head needs such a head in an earlier layer to know what preceded each token."
)
GROUPS = {"self_attn": "self-attention", "cross_attn": "cross-attention"}


# -- the heads ----------------------------------------------------------------------------------


def sites(views: V.Views) -> list[dict]:
    """Every attention the frames hold, in order: {"name": "decoder.1.self_attn", "group":
    "decoder.self_attn", "group_title", "layer", "scored" (it has prefix scores), "heads": [{
    "head", "title": "Layer 1 · head 3", "map_title": "... · attention weights"}]}."""
    names = list(dict.fromkeys(n for f in views.frames for n in f.maps))
    stacks = {n.split(".")[0] for n in names}
    named = Naming(stacks=len(stacks) > 1, cross=any(".cross_attn" in n for n in names))
    out = []
    for name in names:
        stack, layer, kind = name.split(".")
        n_heads = next(f.maps[name].shape[0] for f in views.frames if name in f.maps)
        group_title = f"{stack} {GROUPS[kind]}" if named.stacks else GROUPS[kind]
        heads = [
            {
                "head": h,
                "title": title(f"{name}.head{h}", named),
                "map_title": title(f"{name}.head{h}.A", named),
            }
            for h in range(n_heads)
        ]
        out.append(
            dict(
                name=name,
                group=f"{stack}.{kind}",
                group_title=group_title,
                layer=int(layer),
                scored=kind == "self_attn",
                heads=heads,
            )
        )
    return out


def best(frame: V.Frame) -> tuple[str, int, float] | None:
    """The head with the highest prefix-matching score at this frame: (site, head, score), the
    first of equals; None when no head has a score (nothing in the probe repeats)."""
    found = None
    for site, scores in frame.metrics.get("prefix", {}).items():
        for h, s in enumerate(scores):
            if s is not None and (found is None or s > found[2]):
                found = (site, h, s)
    return found


def chance(views: V.Views, stack: str) -> float | None:
    """The prefix-matching score of uniform attention (causal in a decoder) over the last
    frame's tokens of `stack`: what a head that has learnt nothing scores (None: nothing
    repeats). Computed on the tokens as shown, which stand for their ids."""
    pieces = views.frames[-1].tokens.get(stack) or []
    T = len(pieces)
    if T == 0:
        return None
    seen = np.tril(np.ones((T, T))) if stack == "decoder" else np.ones((T, T))  # (T, T)
    return V.prefix_score(seen / seen.sum(axis=1, keepdims=True), pieces)


def _head_title(views: V.Views, site: str, head: int, in_text: bool = False) -> str:
    """A head's title ("Layer 1 · head 3"); in_text: as a sentence writes it ("layer 1 · ...")."""
    found = next((s["heads"][head]["title"] for s in sites(views) if s["name"] == site), None)
    said = found or f"{site} head {head}"
    return said[0].lower() + said[1:] if in_text else said


# -- the words ------------------------------------------------------------------------------------


def headline(views: V.Views) -> str:
    """What this run shows, in plain words: the best prefix-matching head at the last frame
    against the first, and the probe's loss on the repeated tokens against the others."""
    first, last = views.frames[0], views.frames[-1]
    b = best(last)
    if b is None:
        said = (
            "No token of the probe text repeats, so no head has a prefix-matching score: record "
            "a probe that repeats itself (a random string written twice) to watch induction heads."
        )
    else:
        site, head, score = b
        before = first.metrics.get("prefix", {}).get(site, [None] * (head + 1))[head]
        was = f"; {rounded(before)} at step {first.step:,}" if before is not None else ""
        base = chance(views, site.split(".")[0])
        uniform = f", where uniform attention would put {rounded(base)}" if base else ""
        who = _head_title(views, site, head, True)
        said = (
            f"At step {last.step:,}, {who} puts {rounded(score)} of "
            f"its attention on the token after the earlier copy (the highest prefix-matching "
            f"score of any head{was}){uniform}."
        )
    m0, m1 = first.metrics, last.metrics
    if "probe_loss" in m1:
        said += (
            f" The probe's loss went from {rounded(m0['probe_loss'])} at step {first.step:,} to "
            f"{rounded(m1['probe_loss'])} at step {last.step:,}"
        )
        if m1.get("repeat_loss") is not None and m1.get("first_loss") is not None:
            said += (
                f": {rounded(m1['repeat_loss'])} on the tokens an earlier copy gives away, "
                f"{rounded(m1['first_loss'])} on the others"
            )
        said += "."
    return said


def page_data(views: V.Views) -> dict:
    """What a page draws: `views.to_json(views)` (exact recorded values) with "sites" (`sites`),
    "chance" ({stack: `chance`}) and "words": title, equation, prefix, previous, headline;
    strict JSON."""
    data = V.to_json(views)
    data["sites"] = sites(views)
    data["chance"] = {stack: chance(views, stack) for stack in views.frames[-1].tokens}
    data["words"] = {
        "title": "Training time-lapse: one probe text, read by the model as it trains",
        "equation": EQUATION,
        "prefix": PREFIX_WORDS,
        "previous": PREVIOUS_WORDS,
        "headline": headline(views),
    }
    return jsonable(data)  # strict JSON: a NaN loss is the string "nan"


# -- the text report ------------------------------------------------------------------------------


def _cell(x) -> str:
    return "—" if x is None else rounded(x)


def table(views: V.Views, source: str = "") -> str:
    """The printed report: a line per frame (step, training loss, evaluation loss where one ran,
    the probe's loss, on the repeated tokens and on the others, the best prefix-matching score
    and its head), numbers to 3 significant digits, then what the run shows."""
    frames = views.frames
    val = any("val_loss" in f.row for f in frames)
    heads = ["step", "loss", *(["val_loss"] if val else []), "probe_loss", "repeat", "first"]
    heads += ["best prefix", "head"]
    rows = []
    for f in frames:
        m, b = f.metrics, best(f)
        cells = [f"{f.step:,}", _cell(f.row.get("loss"))]
        cells += [_cell(f.row.get("val_loss"))] if val else []
        cells += [_cell(m.get(k)) for k in ("probe_loss", "repeat_loss", "first_loss")]
        cells += [_cell(b[2]), _head_title(views, b[0], b[1])] if b else ["—", "—"]
        rows.append(cells)
    widths = [max(len(r[k]) for r in [heads, *rows]) for k in range(len(heads))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) for c, w in zip(cells[:-1], widths, strict=False)]
        return "  ".join([*padded, cells[-1]]).rstrip()

    where = f" of {source}" if source else ""
    top = (
        f"training time-lapse{where}: {len(frames)} frame{'s' * (len(frames) != 1)}, "
        f"every {views.every:,} steps, probe {views.text!r}"
    )
    legend = (
        "repeat / first: the probe's loss on the tokens an earlier copy gives away / on the "
        "others; best prefix: the highest prefix-matching score of any head (Olsson et al. 2022)"
    )
    return "\n".join([top, "", line(heads), *map(line, rows), "", legend, headline(views)])


# -- the page -------------------------------------------------------------------------------------


def render_page(views: V.Views, *, title_text: str | None = None, meta: dict | None = None) -> str:
    """The time-lapse as one self-contained HTML document: inline CSS and scripts, the data
    (`page_data`) in a JSON block, nothing loaded from anywhere."""
    data = page_data(views)
    heading = title_text or data["words"]["title"]
    lines = "".join(
        f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in (meta or {}).items()
    )
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("<", "\\u003c")  # no `</script>` (or `<!--`) can end the block early
    style = asset("report.css") + asset("timelapse.css")
    script = bundle("timelapse-page.js", asset)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(heading)}</title><style>\n{style}</style></head>\n"
        f'<body><div class="gf" id="gf-timelapse"><header><h1>{esc(heading)}</h1>'
        f"<dl class='meta'>{lines}</dl></header>"
        '<noscript><p class="note">The time-lapse is drawn by the page\'s script: allow '
        "scripts to see it (the printed table: glassformer explain RUN_DIR --over-training)."
        '</p></noscript><div class="gf-tl"></div><div class="gf-tip" hidden></div>\n'
        f'<script type="application/json" class="gf-views">{blob}</script>\n'
        f"<script>\n{script}</script></div></body></html>\n"
    )
