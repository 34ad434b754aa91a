"""The faithfulness report drawn: for each kind of unit (input tokens, components), a table of each
explanation's normalised areas and the deletion and insertion curves as inline SVG (one
self-contained page, nothing loaded), or the same curves as one PNG (matplotlib, `curves_png`).

Each function takes the dict `glassformer faithfulness --json` writes (`results.Faithfulness`).
Display only: every number was computed by `glassformer.inspect.faithfulness`.
"""

from __future__ import annotations

from glassformer.explain.html_pieces import esc

# One colour per explanation, the same in the SVG and the PNG.
COLOURS = {
    "integrated_gradients": "#1f77b4",
    "gradient_x_input": "#17becf",
    "attention": "#ff7f0e",
    "attention_rollout": "#d62728",
    "attribution_graph": "#2ca02c",
    "direct_logit_attribution": "#9467bd",
    "random": "#888888",
}
UNITS = {"tokens": "input tokens", "components": "components (heads and FFNs)"}
W, H, PAD, TOP = 380, 250, 44, 26  # one panel, the room for its axes and its title


def said(method: str) -> str:
    """A method's name in words: "integrated gradients", "gradient × input"."""
    return method.replace("_x_", " × ").replace("_", " ")


def ranked(report: dict) -> list[dict]:
    """The curves with areas, by insertion − deletion, the most faithful first."""
    rows = [c for c in report["curves"] if c["deletion_area"] is not None]
    return sorted(rows, key=lambda c: -(c["insertion_area"] - c["deletion_area"]))


def faithfulness_section(d: dict) -> str:
    """What the report measures, then per kind of unit its sentence, table and curves."""
    what = esc(repr(d["token"]) + (f" minus {d['versus']!r}" if d.get("versus") else ""))
    out = [
        f"<p>How far to trust each explanation of the logit of <b>{what}</b> at position "
        f"{d['position']}. Each explanation ranks its units; they are removed in that order, the "
        "most supporting first, and the logit is read from a real run of the reference engine "
        "(float64) after each step. <b>Deletion</b>: the top k removed, k = 0..n; a faithful "
        "explanation makes it fall fast (a small area). <b>Insertion</b>: every unit removed, "
        "then the top k put back; it rises fast (a large area). Areas are normalised: the "
        "clean run is 1, the run with every unit removed 0. A seeded random order "
        f"(seed {d['seed']}) is the floor.</p>"
    ]
    out += [f"<p class='sub'>Note: {esc(n)}.</p>" for n in d.get("notes", ())]
    for key in ("tokens", "components"):
        report = d.get(key)
        if report is not None:
            out.append(f"<h3>By {esc(UNITS[key])}</h3>" + _report(report, _metric(d)))
    return "".join(out)


def _report(r: dict, metric: str = "logit") -> str:
    best = ranked(r)
    floor = next((c for c in r["curves"] if c["method"] == "random"), None)
    lead = ""
    if best and best[0]["method"] != "random" and floor and floor["deletion_area"] is not None:
        gap = best[0]["insertion_area"] - best[0]["deletion_area"]
        rand = floor["insertion_area"] - floor["deletion_area"]
        lead = (
            f" On this input <b>{esc(said(best[0]['method']))}</b> is the most faithful "
            f"(insertion − deletion {gap:.3f}; the random order's {rand:.3f})."
        )
    head = (
        f"<p>{len(r['names'])} units, each removed as {esc(r['removal'])}. The {metric} is "
        f"{r['clean']:.4f} in the clean run and {r['empty']:.4f} with every unit removed.{lead}"
        "</p>"
    )
    rows = "".join(
        f"<tr><td><span style='color:{COLOURS.get(c['method'], '#000')}'>■</span> "
        f"{esc(said(c['method']))}</td>"
        f"<td title='{c['deletion_area']!r}'>{c['deletion_area']:.3f}</td>"
        f"<td title='{c['insertion_area']!r}'>{c['insertion_area']:.3f}</td>"
        f"<td>{c['insertion_area'] - c['deletion_area']:+.3f}</td></tr>"
        for c in best
    )
    table = (
        "<table class='touch faithfulness'><tr><th>explanation</th><th>deletion area (low: "
        "faithful)</th><th>insertion area (high: faithful)</th><th>insertion − deletion</th>"
        f"</tr>{rows}</table>"
    )
    notes = "".join(f"<p class='sub'>Note: {esc(n)}.</p>" for n in r.get("notes", ()))
    svgs = _panel(r, "deletion", metric) + _panel(r, "insertion", metric)
    return head + table + notes + f"<div class='faithfulness-curves'>{svgs}</div>" + _legend(r)


def _metric(d: dict) -> str:
    return "logit difference" if d.get("versus") else "logit"


def _panel(r: dict, which: str, metric: str = "logit") -> str:
    """One panel: the metric after each step of `which` for every explanation (the scores' own
    prediction dotted, clipped to the panel: it may run far past the real curves)."""
    n = len(r["names"])
    ys = [y for c in r["curves"] for y in c[which]]
    lo, hi = min(ys + [r["clean"], r["empty"]]), max(ys + [r["clean"], r["empty"]])
    hi = hi if hi > lo else lo + 1.0
    top, bottom = TOP, TOP + H - PAD
    x = lambda k: PAD + (W - PAD - 10) * k / max(n, 1)  # noqa: E731
    y = lambda v: top + (bottom - top) * (hi - v) / (hi - lo)  # noqa: E731
    clip = f"gf-clip-{r['units']}-{which}"
    parts = [
        f"<clipPath id='{clip}'><rect x='{PAD}' y='{top}' width='{W - PAD - 10}' "
        f"height='{bottom - top}'/></clipPath>",
        f"<line x1='{PAD}' y1='{bottom}' x2='{W - 10}' y2='{bottom}' stroke='#444'/>",
        f"<line x1='{PAD}' y1='{top}' x2='{PAD}' y2='{bottom}' stroke='#444'/>",
    ]
    for v, label in ((r["clean"], "clean"), (r["empty"], "all removed")):
        parts.append(
            f"<line x1='{PAD}' y1='{y(v):.1f}' x2='{W - 10}' y2='{y(v):.1f}' stroke='#bbb' "
            f"stroke-dasharray='2 3'/><text x='{PAD + 4}' y='{y(v) - 3:.1f}' font-size='10' "
            f"fill='#666'>{label}</text>"
        )
    for v in (lo, hi):
        parts.append(
            f"<text x='{PAD - 4}' y='{y(v) + 4:.1f}' font-size='10' text-anchor='end'>"
            f"{v:.2f}</text>"
        )
    parts.append(
        f"<text x='{PAD}' y='{bottom + 14}' font-size='10'>0</text><text x='{W - 10}' "
        f"y='{bottom + 14}' font-size='10' text-anchor='end'>{n}</text>"
        f"<text x='{(W + PAD) / 2}' y='{bottom + 28}' font-size='11' text-anchor='middle'>units "
        f"{'removed' if which == 'deletion' else 'put back'} (k)</text>"
        f"<text x='12' y='{(top + bottom) / 2}' font-size='11' text-anchor='middle' "
        f"transform='rotate(-90 12 {(top + bottom) / 2})'>{metric}</text>"
    )
    for c in r["curves"]:
        colour = COLOURS.get(c["method"], "#000")
        dash = " stroke-dasharray='5 4'" if c["method"] == "random" else ""
        points = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in enumerate(c[which]))
        tip = f"{said(c['method'])}: " + ", ".join(f"{v:.4g}" for v in c[which])
        parts.append(
            f"<polyline points='{points}' fill='none' stroke='{colour}' stroke-width='2'{dash}>"
            f"<title>{esc(tip)}</title></polyline>"
        )
        if which == "deletion" and c.get("predicted"):
            points = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in enumerate(c["predicted"]))
            parts.append(
                f"<polyline points='{points}' fill='none' stroke='{colour}' stroke-width='1.5' "
                f"stroke-dasharray='1 3' clip-path='url(#{clip})'><title>{esc(said(c['method']))}"
                ": its scores' own prediction (the clean logit less the scores removed)</title>"
                "</polyline>"
            )
    title = "Deletion: the top k removed" if which == "deletion" else "Insertion: the top k back"
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H + TOP}' "
        f"viewBox='0 0 {W} {H + TOP}' role='img' aria-label='{esc(title)}' "
        "style='margin:0 12px 4px 0'>"
        f"<text x='{PAD}' y='14' font-size='12' font-weight='bold'>{esc(title)}</text>"
        f"{''.join(parts)}</svg>"
    )


def _legend(r: dict) -> str:
    """The colours, and what the line styles mean."""
    keys = " ".join(
        f"<span style='color:{COLOURS.get(c['method'], '#000')}'>■</span> {esc(said(c['method']))}"
        for c in r["curves"]
    )
    styles = (
        "solid: a real run of the reference engine (two explanations that rank the units alike "
        "draw one line); dashed: the random order"
    )
    if any(c.get("predicted") for c in r["curves"]):
        styles += "; dotted: the scores' own prediction (the clean logit less the scores removed)"
    return f"<p class='sub'>{keys}<br>{styles}.</p>"


def curves_png(d: dict) -> bytes:
    """The same curves as one PNG: a row per kind of unit, deletion beside insertion."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    reports = [(k, d[k]) for k in ("tokens", "components") if d.get(k) is not None]
    fig = Figure(figsize=(11, 3.6 * len(reports)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(reports), 2, squeeze=False)
    for (key, r), row in zip(reports, axes, strict=True):
        for ax, which in zip(row, ("deletion", "insertion"), strict=True):
            for c in r["curves"]:
                area = c[f"{which}_area"]
                label = said(c["method"]) + ("" if area is None else f" ({area:.3f})")
                style = "--" if c["method"] == "random" else "-"
                colour = COLOURS.get(c["method"], "#000000")
                ax.plot(c[which], style, color=colour, label=label, marker=".")
            for v in (r["clean"], r["empty"]):
                ax.axhline(v, color="#bbbbbb", linestyle=":", linewidth=1)
            verb = "removed" if which == "deletion" else "put back"
            ax.set_title(f"{UNITS[key]}: {which}", fontsize=10)
            ax.set_xlabel(f"units {verb} (k), by each explanation's ranking")
            ax.set_ylabel(_metric(d))
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.legend(fontsize=7, title="explanation (area)", title_fontsize=7)
    what = repr(d["token"]) + (f" minus {d['versus']!r}" if d.get("versus") else "")
    fig.suptitle(f"Faithfulness of the explanations of {what} at position {d['position']}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
