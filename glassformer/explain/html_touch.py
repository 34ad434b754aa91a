"""The report sections of touching a model, and the page of a probe.

    ablation     the run beside the same run with steps zeroed: per position the token predicted
                 with and without, how far the logits moved, the output generated again (a
                 classifier: each class's probability before and after)
    patching     the activation-patching sweep: a layers x heads heatmap per attention kind
    lens         the logit lens: the top tokens each layer would predict, per position
    dla          each head's direct share of one logit
    attribution  the input tokens coloured by their share of each predicted token's logit

Each function takes the dict that the command line also writes as JSON (`cli/touch.py`,
`cli/probe.py`) and returns an HTML fragment; `probe_page` wraps fragments into one
self-contained page (the report's style, no script, nothing loaded from anywhere) for `lens` and
`attribute`. Display only: every number was computed by `glassformer.inspect.interventions`, `.lens`
or `.attribution`.
"""

from __future__ import annotations

import numpy as np

from glassformer.explain.graph_svg import graph_svg
from glassformer.explain.html_pieces import asset, esc, table, tint


def ablation_section(a: dict) -> str:
    """Per position: the token after which the model predicts, its prediction without and with
    the ablation, and the largest change of any logit; changed predictions stand out. A
    classifier's: each class's probability without and with it (`classes_table`)."""
    steps = ", ".join(a["ablated"])
    if "classes" in a:
        intro = (
            f"<p>The same tokens again with <b>{esc(steps)}</b> zeroed ({len(a['steps'])} steps "
            "of the trace): each class's probability before and after.</p>"
        )
        notes = "".join(f"<p class='sub'>{esc(note)}.</p>" for note in a.get("notes", ()))
        return intro + classes_table(a["classes"]) + notes
    out = [
        f"<p>The same tokens again with <b>{esc(steps)}</b> zeroed ({len(a['steps'])} steps of "
        "the trace), beside the original run. A row in red predicts another token.</p>"
    ]
    rows = [
        "<tr><th>position</th><th>after</th><th>predicts</th><th>with the ablation</th>"
        "<th>logits move by up to</th></tr>"
    ]
    for r in a["positions"]:
        cls = " class='changed'" if r["changed"] else ""
        rows.append(
            f"<tr{cls}><td>{r['position']}</td><td><span class='tok'>{esc(r['after_token'])}"
            f"</span></td><td><span class='tok'>{esc(r['predicted'])}</span></td>"
            f"<td><span class='tok'>{esc(r['predicted_ablated'])}</span></td>"
            f"<td title='{r['max_logit_change']:.12g}'>{r['max_logit_change']:.3f}</td></tr>"
        )
    out.append(f"<table class='touch'>{''.join(rows)}</table>")
    out += [f"<p class='sub'>{esc(note)}.</p>" for note in a.get("notes", ())]
    if "text_ablated" in a:
        before = f"<dd>{esc(a['text'])}</dd>" if "text" in a else ""
        out.append(
            "<dl class='outputs'>"
            + (f"<div><dt>output</dt>{before}</div>" if before else "")
            + f"<div><dt>with the ablation</dt><dd>{esc(a['text_ablated'])}</dd></div></dl>"
        )
    return "".join(out)


def patching_section(p: dict) -> str:
    """Each head patched from the clean run into this one: the share of the logit difference it
    restores, as a layers x heads heatmap per attention kind (0: no effect, 1: all of it)."""
    where = "The metric"
    if "position" in p:
        after = f"<span class='tok'>{esc(p['after_token'])}</span>"
        where = f"At position {p['position']} (after {after}) the metric"
    out = [
        f"<p>Each head's output patched in from the run on <b>“{esc(p['clean'])}”</b> (clean) "
        f"into this run, one head at a time. {where} is {esc(p['metric'])}; "
        "a cell is (patched − this run) / (clean − this run): 0 = no effect, 1 = the clean "
        "value restored; blue above 0, red below, one tint for one value in every table.</p>"
    ]
    values = {kind: np.asarray(t["values"], dtype=np.float64) for kind, t in p["tables"].items()}
    top = max(float(np.abs(v).max()) for v in values.values()) or 1.0  # one scale for all kinds
    for kind, t in p["tables"].items():
        grid = table(values[kind], t["rows"], t["cols"], signed=True, scale=top)
        out.append(f"<h3>{esc(kind)}</h3>{grid}")
    if "classes" in p:
        out.append(
            "<p>Each class's probability in this run (before) and the clean run (after).</p>"
        )
        out.append(classes_table(p["classes"]))
    return "".join(out)


def classes_table(rows: list[dict]) -> str:
    """A classifier's classes: probability before and after, and the change (exact in titles);
    the class predicted before and after marked."""
    top = [max(rows, key=lambda r: r[k])["label"] for k in ("before", "after")]
    out = ["<tr><th>class</th><th>before</th><th>after</th><th>change</th></tr>"]
    for r in rows:
        mark = " class='changed'" if r["label"] in top and top[0] != top[1] else ""
        cells = "".join(
            f"<td title='{r[k]:.15g}'>{r[k]:{'+' if k == 'change' else ''}.4f}</td>"
            for k in ("before", "after", "change")
        )
        out.append(f"<tr{mark}><td>{esc(r['label'])}</td>{cells}</tr>")
    said = "unchanged" if top[0] == top[1] else "changed"
    return (
        f"<table class='touch'>{''.join(out)}</table><p>Class: <b>{esc(top[0])}</b> → "
        f"<b>{esc(top[1])}</b> ({said}).</p>"
    )


def lens_section(result: dict) -> str:
    """Rows: the residual streams from the embeddings up; columns: positions. A cell: the token
    that stream would predict next there, tinted by its probability, the top k in its title."""
    lens, words = result["lens"], result["input"]
    probs, tops = np.asarray(lens["top_probs"]), lens["top_tokens"]
    head = "<tr><th></th>" + "".join(f"<th>{esc(w)}</th>" for w in words) + "</tr>"
    rows = []
    for r, label in enumerate(lens["labels"]):
        cells = []
        for t in range(len(words)):
            p = float(probs[r, t, 0])
            colour, dark = tint(p, True)
            dark = " class='dark'" if dark else ""
            title = ", ".join(f"{w} {q:.3f}" for w, q in zip(tops[r][t], probs[r, t], strict=True))
            cells.append(
                f"<td style='background:{colour}'{dark} "
                f"title='{esc(title)}'>{esc(tops[r][t][0])}<small> {p:.2f}</small></td>"
            )
        rows.append(f"<tr><th>{esc(label)}</th>{''.join(cells)}</tr>")
    through = f"the final {lens.get('norm') or 'LayerNorm'} and "
    intro = (
        f"<p>Each layer's residual stream read through {through}the output head: "
        "the token it would predict after each input token, with its probability (the top "
        f"{probs.shape[2]} under the mouse). The last row is the model's own prediction.</p>"
    )
    return intro + f"<table class='mat lens'>{head}{''.join(rows)}</table>"


def dla_section(d: dict) -> str:
    what = esc(d["token"]) + (f" minus {esc(d['versus'])}" if d.get("versus") else "")
    parts = table(np.asarray(d["heads"]), d["rows"], d["cols"], signed=True)
    other = [[v] for v in d["other"].values()]
    other = table(np.asarray(other), list(d["other"]), ["share"], signed=True)
    norm = esc(d.get("norm", "LayerNorm"))
    return (
        f"<p>Direct logit attribution of <b>{what}</b> at position {d['position']}: each head's "
        f"output (and every other part of the residual stream) through the final {norm} with "
        f"its scale frozen at {d['scale']:.4g}. The parts sum to {d['total']:.6f}; the model's "
        f"logit is {d['logit']:.6f}.</p><h3>The heads</h3>{parts}<h3>Every other part</h3>{other}"
    )


def circuit_section(d: dict, top: int = 30) -> str:
    """The attribution graph of one logit: what it explains, its completeness, the nodes by
    total effect and the largest edges, as tables."""
    g, kept = d["graph"], d["graph"]["kept"]
    what = esc(repr(d["token"]) + (f" minus {d['versus']!r}" if d.get("versus") else ""))
    head = (
        f"<p>The logit of {what} ({esc(g['target'])}) is {g['logit']:.6f}. With this input's "
        "attention patterns, norm scales and feed-forward gates frozen, it is an exact sum of "
        "paths: every node's incoming edges add up to its value (largest gap "
        f"{g['error']:.1e}). Kept: {kept['nodes']} of {kept['of']} nodes, {kept['edges']} edges "
        f"of at least {d['threshold']:g}·|logit|; their direct edges into the logit carry "
        f"{kept['share']:.1%} of it.</p>"
    )
    said = {n["name"]: n["name"] + (f" ({n['token']})" if "token" in n else "") for n in g["nodes"]}
    nodes = sorted(g["nodes"][:-2], key=lambda n: -abs(n["value"]))[:top]
    rows = "".join(
        f"<tr><td>{esc(said[n['name']])}</td><td>{esc(n['kind'])}</td>"
        f"<td>{n['value']:+.4f}</td></tr>"
        for n in nodes
    )
    edges = sorted(g["edges"], key=lambda e: -abs(e["weight"]))[:top]
    erows = "".join(
        f"<tr><td>{esc(said[e['from']])}</td><td>{esc(said[e['to']])}</td>"
        f"<td>{e['weight']:+.4f}</td></tr>"
        for e in edges
    )
    drawn = (
        "<h3>The graph</h3><p class='sub'>A column per position, a row per sublayer (the sources "
        "at the bottom, the logit at the top); blue raises the logit, red lowers it; a node's "
        "area is its total effect, an edge's width its weight (the values under the mouse).</p>"
        f"<div class='graph-box'>{graph_svg(g)}</div>"
    )
    return (
        head
        + drawn
        + "<h3>Nodes, by total effect on the logit</h3><table class='next'><tr><th>node"
        f"</th><th>kind</th><th>effect</th></tr>{rows}</table><h3>Edges</h3><table class='next'>"
        f"<tr><th>from</th><th>to</th><th>weight</th></tr>{erows}</table>"
    )


def qk_section(d: dict, top: int = 8) -> str:
    """Why a head attends there: the score's table over the query's parts (rows) and the key's
    (columns), tinted by sign and size, and its largest entries with the weight without each."""
    pair = (
        f"<b>{esc(d['head'])}</b> from query {d['i']} (<span class='tok'>"
        f"{esc(d['query_token'])}</span>) to key {d['j']} (<span class='tok'>"
        f"{esc(d['key_token'])}</span>)"
    )
    intro = (
        f"<p>Why {pair} attends there, weight A = {d['weight']:.4f}: its score Ω = "
        f"{d['score']:.6f} is q·k, and q and k are sums of what wrote the two residual streams, "
        "so Ω is a table of their products, q(row)·k(column), which adds up to "
        f"{d['total']:.6f} (error {abs(d['total'] - d['score']):.1e}).</p>"
    )
    rows = "".join(
        f"<tr><td>{esc(e['query'])}</td><td>{esc(e['key'])}</td><td>{e['value']:+.4f}</td>"
        f"<td>{e['weight_without']:.4f}</td></tr>"
        for e in d["top"][:top]
    )
    entries = (
        "<h3>The largest entries</h3><table class='next'><tr><th>query part</th><th>key part"
        f"</th><th>q·k</th><th>A without it</th></tr>{rows}</table>"
    )
    whole = ""
    if "table" in d:
        grid = table(np.asarray(d["table"]), d["rows"], d["cols"], signed=True)
        whole = f"<h3>The whole table</h3><div class='graph-box'>{grid}</div>"
    return intro + entries + whole


def why_section(d: dict) -> str:
    """`explain --why`: a translator's choice over the runner-up (or --versus), the attribution
    graph of that step's logit difference (a decoder's or classifier's top prediction), and why
    its strongest head attends where it does."""
    from glassformer.explain.html_choice import choice_section

    parts = []
    if "choice" in d:
        parts.append(f"<h3>Why this translation won</h3>{choice_section(d['choice'])}")
    parts.append(f"<h3>The attribution graph</h3>{circuit_section(d['circuit'])}")
    if "qk" in d:
        parts.append(f"<h3>Why its strongest head attends there</h3>{qk_section(d['qk'])}")
    return "".join(parts)


def attribution_section(result: dict) -> str:
    """One row per predicted token: the input tokens tinted by their share of its logit (blue
    for, red against, each row on its own scale), the exact value in each title."""
    words, scores = result["input"], np.asarray(result["scores"])[:, : len(result["input"])]
    method = result["method"].replace("_", " ")
    rows = []
    for i, word in enumerate(result["predicted"]):
        scale = float(np.abs(scores[i]).max()) or 1.0
        chips = []
        for w, s in zip(words, scores[i], strict=True):
            colour, dark = tint(float(s) / scale, False)
            dark = " dark" if dark else ""
            chips.append(
                f"<span class='tok{dark}' style='background:{colour}' "
                f"title='{s:.12g}'>{esc(w)}</span>"
            )
        check = ""
        if result.get("completeness") is not None:
            change = result["f"][i] - result["f_baseline"][i]
            check = (
                f"<small>sum {scores[i].sum():.4f} = f(x) − f(0) {change:.4f} "
                f"(error {result['completeness'][i]:.1e})</small>"
            )
        rows.append(
            f"<div class='attr'><span class='to'>→ <span class='tok'>{esc(word)}</span></span>"
            f"<span class='tokens'>{''.join(chips)}</span>{check}</div>"
        )
    intro = (
        f"<p>{esc(method)}: how much each input token contributes to each predicted token's "
        "logit (blue for, red against; each row on its own scale, the value under the mouse)."
        "</p>"
    )
    if result.get("note"):
        intro += f"<p class='sub'>Note: {esc(result['note'])}.</p>"
    return intro + "".join(rows)


def probe_page(title: str, meta: dict[str, str], sections: list[tuple[str, str, str]]) -> str:
    """A self-contained page of (id, heading, html) sections with the report's style."""
    lines = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in meta.items())
    nav = " ".join(f'<a href="#gf-{i}">{esc(h)}</a>' for i, h, _ in sections)
    body = "".join(f'<section id="gf-{i}"><h2>{esc(h)}</h2>{b}</section>' for i, h, b in sections)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>\n{asset('report.css')}</style></head>\n"
        f'<body><div class="gf"><header><h1>{esc(title)}</h1><dl class="meta">{lines}</dl>'
        f"<nav>{nav}</nav></header>{body}</div></body></html>\n"
    )
