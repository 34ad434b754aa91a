"""The steering report as HTML: per text, the output without and with the steering, and per new
token of the steered output the next-token distribution before and after (its top tokens with
their probabilities, the token chosen marked), from `Model.steered`'s dict
(`inspect.steering.compare`). Fragments in the report's style, no script; `html_touch.probe_page`
wraps them into one self-contained page.
"""

from __future__ import annotations

from glassformer.explain.html_pieces import esc

EQUATION = "x_p ← x_p + s·v  (v = mean x(A) − mean x(B), at the stream entering block L)"


def _dist(top: list[dict], chosen: int) -> str:
    cells = []
    for t in top:
        mark = " style='font-weight:bold'" if t["id"] == chosen else ""
        cells.append(f"<span{mark}>{esc(t['token'])} <small>{t['p']:.3f}</small></span>")
    return ", ".join(cells)


def steering_section(r: dict) -> str:
    """One text's report: both outputs, then one row per new token."""
    rows = []
    for s in r["steps"]:
        moved = round(s["p_after"] - s["p_before"], 3) + 0.0  # no "-0.000"
        rows.append(
            f"<tr><td>{s['step']}{'' if s['steered'] else ' <small>(not steered)</small>'}</td>"
            f"<td><b>{esc(s['token'])}</b></td>"
            f"<td>{s['p_before']:.3f} → {s['p_after']:.3f} <small>({moved:+.3f})</small></td>"
            f"<td>{_dist(s['before'], s['id'])}</td><td>{_dist(s['after'], s['id'])}</td></tr>"
        )
    head = (
        "<tr><th>new token</th><th>chosen</th><th>its p before → after</th>"
        "<th>before (top tokens)</th><th>after (top tokens)</th></tr>"
    )
    changed = sum(s["before"][0]["id"] != s["after"][0]["id"] for s in r["steps"])
    return (
        "<p class='sub'>Steering adds a multiple of one direction to the residual stream while "
        "the text is generated. Each row is one new token of the steered output: the token "
        "chosen, its probability without the steering (on the same prefix) and with it, and the "
        f"most likely tokens of both distributions. Here the top token moved at {changed} of "
        f"{len(r['steps'])} steps.</p>"
        f"<p>Input: <b>{esc(r['input'])}</b> ({esc(r['strategy'])})</p>"
        f"<p>Without steering: <b>{esc(r['text'])}</b><br>"
        f"With steering: <b>{esc(r['steered'])}</b></p>"
        f"<table class='steps'>{head}{''.join(rows)}</table>"
    )


def steering_meta(steering: dict) -> dict[str, str]:
    """The page's header lines: what was added where."""
    pair = steering.get("pair")
    what = f"“{pair[0]}” − “{pair[1]}”" if pair else "a given vector"
    since = steering.get("from_step")
    return {
        "direction": f"{what}, |v| = {steering['norm']:.4g}",
        "added to": f"{steering['step']} (the stream entering block {steering['layer']})",
        "scale": f"{steering['scale']:g}",
        "positions": "every position" if since is None else f"from new token {since} on",
        "equation": EQUATION,
    }
