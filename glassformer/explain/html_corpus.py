"""The top examples of a unit (`glassformer top --html`, `corpus/top.py`) as HTML: one row per
context, its tokens in a line, the token that fired marked and tinted by its value, the value in
words beside it and exact on hover.

Deliberately not here: ranking (`corpus/top.py`), reading the store, the explorer's card (its
front end draws the same rows from the JSON).
"""

from __future__ import annotations

from glassformer.explain.html_pieces import esc, tint


def top_section(d: dict) -> str:
    """The table of `Top.to_dict()`'s examples, best first."""
    best = max((abs(e["value"]) for e in d["examples"]), default=0.0) or 1.0
    rows = []
    for i, e in enumerate(d["examples"], 1):
        colour, white = tint(e["value"] / best, True)
        cells = []
        for j, p in enumerate(e["pieces"]):
            if j == e["at"]:
                style = f"background:{colour};color:{'#fff' if white else '#000'}"
                cells.append(f'<mark style="{style}" title="{e["value"]!r}">{esc(p)}</mark>')
            else:
                cells.append(f"<span>{esc(p)}</span>")
        rows.append(
            f'<tr><td>{i}</td><td title="{e["value"]!r}">{e["value"]:.4g}</td>'
            f"<td>doc {e['document']} · pos {e['position']}</td>"
            f'<td class="gf-context">{"".join(cells)}</td></tr>'
        )
    head = "<tr><th>#</th><th>value</th><th>where</th><th>context (the token marked)</th></tr>"
    return (
        f"<p>{esc(d['says'])}, over {d['rows']:,} rows (mean {d['mean']:.4g}).</p>"
        f'<table class="gf-top">{head}{"".join(rows)}</table>'
    )


def top_page(d: dict) -> str:
    """A self-contained page of `top_section`."""
    from glassformer.explain.html_touch import probe_page

    meta = {"store": d["store"], "unit": d["unit"], "rows": f"{d['rows']:,}"}
    title = f"glassformer top: {d['unit']}"
    return probe_page(title, meta, [("top", f"Top {len(d['examples'])} contexts", top_section(d))])
