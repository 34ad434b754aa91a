"""The attribution graph drawn: one inline SVG of a pruned `circuit` graph (its `to_dict()`).

    graph_svg(graph) -> str     <svg class="graph">...</svg>, self-contained, no script

The drawing is circuit-tracer's: a column per token position (the token written under it), a row
per sublayer from the sources at the bottom (token, position) through each layer's attention and
FFN to the logit at the top; an encoder-decoder's encoder is a panel on the left, so an edge from a
source word into a decoder's cross-attention head crosses between them. A node's area grows with
its total effect on the logit, an edge's width with its weight; blue pushes the logit up, red
down, and every node and edge says its exact value under the mouse. The `bias` source (the
constants inside components) is a node at the bottom left.

Display only: every number is `glassformer.inspect.circuit`'s.
"""

from __future__ import annotations

import math

from glassformer.explain.html_pieces import esc

UP, DOWN = "#2b6cb0", "#c53030"  # blue: raises the logit, red: lowers it
ROW, TOP, BOTTOM, LEFT, GAP, SPREAD = 46, 34, 52, 100, 104, 15
SUBLAYERS = ("self_attn", "cross_attn", "ffn")


def _row_key(node: dict) -> tuple[str, int, int]:
    """(stack, layer, sublayer index) of a node; sources are layer -1."""
    if node["kind"] == "source":
        return node["stack"], -1, 0
    part = node["name"].split("@")[0].split(".")[2]
    return node["stack"], node["layer"], SUBLAYERS.index(part)


def _said(node: dict) -> str:
    token = f" ({node['token']})" if "token" in node else ""
    return f"{node['name']}{token}: {node['value']:+.6g}"


def graph_svg(graph: dict) -> str:
    """The graph of `circuit`'s JSON ("graph": nodes with name, kind, stack, layer, position,
    value, token; edges from, to, weight; each stack's tokens, a column each) as an SVG
    element."""
    nodes = [n for n in graph["nodes"] if n["name"] not in ("bias", "logit")]
    stacks = [s for s in ("encoder", "decoder") if any(n["stack"] == s for n in nodes)]
    if not stacks:
        return "<p class='sub'>No node reaches the threshold: lower it to draw the graph.</p>"
    # rows per stack: the sublayers that appear, bottom (sources) to top
    rows = {s: sorted({_row_key(n) for n in nodes if n["stack"] == s}) for s in stacks}
    height = max(len(r) for r in rows.values())
    explained = _explained(graph, stacks[-1])
    tokens = {s: dict(enumerate(graph.get("tokens", {}).get(s, []))) for s in stacks}
    if explained is not None:  # a decoder's later positions cannot reach the logit
        tokens["decoder"] = {p: t for p, t in tokens["decoder"].items() if p <= explained}
    cells: dict[tuple, list[dict]] = {}
    for n in nodes:
        tokens[n["stack"]].setdefault(n["position"], n.get("token", ""))
        cells.setdefault((_row_key(n), n["position"]), []).append(n)
    widest = max(len(c) for c in cells.values())
    col = max(60, SPREAD * widest + 14)
    # the panels side by side: each position of each stack gets a column
    xs, x0 = {}, LEFT
    panels = []
    for s in stacks:
        positions = sorted(tokens[s])
        span = range(min(positions), max(positions) + 1)
        panels.append((s, x0, len(span)))
        for i, p in enumerate(span):
            xs[s, p] = x0 + col * (i + 0.5)
        x0 += col * len(span) + GAP
    width = x0 - GAP + 130  # room for the logit's label
    top_y = TOP + 24  # the logit's row
    y_of = {}
    for s in stacks:
        for i, key in enumerate(rows[s]):
            y_of[key] = top_y + ROW * (height - i)
    H = top_y + ROW * height + BOTTOM
    biggest = max(abs(n["value"]) for n in graph["nodes"]) or 1.0
    at = {}
    for (key, p), group in cells.items():
        group.sort(key=lambda n: n["name"])
        for i, n in enumerate(group):
            at[n["name"]] = (xs[key[0], p] + SPREAD * (i - (len(group) - 1) / 2), y_of[key])
    at["bias"] = (LEFT / 2 - 12, H - 14)
    at["logit"] = (xs.get((stacks[-1], explained), width / 2), TOP + 6)
    everything = {n["name"]: n for n in graph["nodes"]}
    return _draw(graph, everything, at, panels, tokens, xs, rows, y_of, col, width, H, biggest)


def _explained(graph: dict, stack: str) -> int | None:
    """The position the logit is read at ("... at position P"), None for a classifier's mean."""
    target = graph.get("target", "")
    if " at position " not in target or stack != "decoder":
        return None
    return int(target.rsplit(" ", 1)[1])


def _draw(graph, everything, at, panels, tokens, xs, rows, y_of, col, width, H, biggest) -> str:
    out = [
        f'<svg class="graph" viewBox="0 0 {width:.0f} {H:.0f}" width="{width:.0f}" '
        f'height="{H:.0f}" role="img" aria-label="the attribution graph">'
    ]
    for s, x, n in panels:  # the panels' frames, names and tokens
        out.append(
            f'<rect x="{x:.1f}" y="{TOP + 30}" width="{col * n:.1f}" height="{H - TOP - 30 - 26}" '
            'rx="6" fill="#f7f9fb" stroke="#e3e7ec"/>'
            f'<text x="{x + 6:.1f}" y="{TOP + 44}" class="panel">{esc(s)}</text>'
        )
        for p, token in tokens[s].items():
            out.append(
                f'<text x="{xs[s, p]:.1f}" y="{H - 10:.1f}" class="tok" text-anchor="middle">'
                f"<title>{esc(s)} position {p}</title>{esc(token)}</text>"
            )
    for s in rows:  # the rows' names, at the left of the first panel
        for key in rows[s]:
            _, layer, k = key
            name = "sources" if layer < 0 else f"{layer}.{SUBLAYERS[k]}"
            x = next(x for t, x, _ in panels if t == s)
            out.append(
                f'<text x="{x - 4:.1f}" y="{y_of[key] + 4:.1f}" class="row" '
                f'text-anchor="end">{esc(name)}</text>'
            )
    heaviest = max((abs(e["weight"]) for e in graph["edges"]), default=1.0) or 1.0
    for e in sorted(graph["edges"], key=lambda e: abs(e["weight"])):
        if e["from"] not in at or e["to"] not in at:
            continue
        (x1, y1), (x2, y2) = at[e["from"]], at[e["to"]]
        w = 0.6 + 4.4 * abs(e["weight"]) / heaviest
        bend = (y1 - y2) * 0.35
        colour = UP if e["weight"] >= 0 else DOWN
        out.append(
            f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 - bend:.1f} {x2:.1f},{y2 + bend:.1f} '
            f'{x2:.1f},{y2:.1f}" stroke="{colour}" stroke-width="{w:.2f}" fill="none" '
            f'opacity="0.5"><title>{esc(e["from"])} → {esc(e["to"])}: '
            f"{e['weight']:+.6g}</title></path>"
        )
    for name, (x, y) in at.items():
        n = everything[name]
        r = 3.0 + 9.0 * math.sqrt(abs(n["value"]) / biggest)
        colour = UP if n["value"] >= 0 else DOWN
        shape = (
            f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}"'
            if n["kind"] in ("source", "bias")
            else f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}"'
        )
        out.append(
            f'<g class="node">{shape} fill="{colour}" fill-opacity="0.85" stroke="#fff">'
            f"<title>{esc(_said(n))}</title></{'rect' if '<rect' in shape else 'circle'}></g>"
        )
    lx, ly = at["logit"]
    out.append(
        f'<text x="{lx + 16:.1f}" y="{ly + 4:.1f}" class="row">logit {graph["logit"]:+.4f}</text>'
        f'<text x="{at["bias"][0] + 12:.1f}" y="{at["bias"][1] + 4:.1f}" class="row">bias</text>'
    )
    out.append("</svg>")
    return "".join(out)
