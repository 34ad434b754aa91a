"""`glassformer diff`'s result for reading: the printed table (`to_text`) and one self-contained
page (`to_html`), each step's differences from the first engine's, the first step beyond the
tolerance marked, then what was found per engine.

Each function takes the `engine_diff.DiffResult` that `engine_diff.diff` returns (its rows,
cells, tolerance and findings) and returns text. Display only: every number was computed by
`glassformer.engine_diff`; this module imports nothing of it (explain/ renders results, it never
makes them).
"""

from __future__ import annotations

import math

from glassformer.explain.html_pieces import asset, dims, esc


def _num(x: float) -> str:
    """A difference for reading: 0, inf, or three significant digits."""
    return "0" if x == 0 else ("inf" if math.isinf(x) else f"{x:.2e}")


def _header(r) -> list[str]:
    lines = [f"glassformer diff: {r.model} ({r.summary})"]
    for what, toks in r.inputs.items():
        lines.append(f"{what}: {' '.join(toks)} ({len(toks)} tokens)")
    lines += [f"  {e}: {r.kinds[e]}" for e in r.engines]
    lines.append(f"each step against {r.engines[0]}: max|Δ| the largest absolute difference,")
    lines.append(f"rel the same over the step's largest |value|; * beyond the tolerance {r.tol:g}")
    return lines


def to_text(r) -> str:
    """The printed table: one line per step in data-flow order, each other engine's max|Δ| and
    rel, the first step beyond the tolerance marked, then what was found per engine."""
    others = r.engines[1:]
    name_w = max(4, *(len(row.name) for row in r.rows))
    shape_w = max(5, *(len(dims(row.shape)) for row in r.rows))
    col = max(21, *(len(e) + 2 for e in others))
    lines = _header(r) + [""]
    lines.append(
        f"{'step':<{name_w}}  {'shape':>{shape_w}}" + "".join(f"{e:>{col}}" for e in others)
    )
    sub = f"{'max|Δ|':>10} {'rel':>9} "
    lines.append(" " * (name_w + shape_w + 2) + "".join(f"{sub:>{col}}" for _ in others))
    for row in r.rows:
        cells = []
        for e in others:
            c = row.cells[e]
            if c is None:
                cells.append(f"{'not in ' + e:>{col - 1}} ")
            else:
                flag = "*" if c.max_abs > r.tol else " "
                cells.append(f"{_num(c.max_abs):>{col - 11}} {_num(c.max_rel):>9}{flag}")
        firsts = [e for e in others if r.first_beyond[e] == row.name]
        mark = f"  <- first beyond: {', '.join(firsts)}" if firsts else ""
        lines.append(f"{row.name:<{name_w}}  {dims(row.shape):>{shape_w}}{''.join(cells)}{mark}")
    return "\n".join(line.rstrip() for line in lines + [""] + _findings(r))


def _findings(r) -> list[str]:
    """Per engine: its first step beyond the tolerance (or none, and its largest difference)
    and how many steps it does not record."""
    lines = []
    for e in r.engines[1:]:
        first = r.first_beyond[e]
        if first is None:
            worst, where = r.largest(e)
            at = f" at {where}" if where else ""
            lines.append(f"{e}: no step beyond {r.tol:g} (largest max|Δ| {_num(worst)}{at})")
        else:
            c = r.row(first).cells[e]
            lines.append(
                f"{e}: first step beyond {r.tol:g}: {first} (max|Δ| {_num(c.max_abs)}, rel "
                f"{_num(c.max_rel)}{'; ' + c.note if c.note else ''})"
            )
        missing = r.missing(e)
        if missing:
            lines.append(f"  {len(missing)} of {len(r.rows)} steps are not in {e}")
    return lines


# On the report's `table.touch` (its rows' lines, `tr.changed` tinting a first step beyond).
_CSS = """.gf table.diff td{text-align:right;font:12px ui-monospace,Menlo,Consolas,monospace}
.gf table.diff td.name,.gf table.diff td.mark{text-align:left}.gf td.absent{color:#8a939e}
.gf table.diff td.beyond{color:#a3162a;font-weight:600}.gf td.mark{color:#a3162a}
"""


def _html_cell(c, e: str, tol: float) -> str:
    if c is None:
        return f'<td class="absent" colspan="2">not in {esc(e)}</td>'
    cls = ' class="beyond"' if c.max_abs > tol else ""
    exact = [f"{c.max_abs!r}", f"{c.max_rel!r}"]  # exact on hover
    if c.note:
        exact = [f"{x} ({c.note})" for x in exact]
    return (
        f'<td{cls} title="{esc(exact[0])}">{_num(c.max_abs)}</td>'
        f'<td{cls} title="{esc(exact[1])}">{_num(c.max_rel)}</td>'
    )


def to_html(r) -> str:
    """One self-contained page: the header, the findings, and the table (the cells beyond the
    tolerance tinted, each engine's first such step outlined and named)."""
    others = r.engines[1:]
    title = f"glassformer diff: {r.model}"
    head = "".join(f'<th colspan="2">{esc(e)}</th>' for e in others)
    sub = "<th>max |Δ|</th><th>relative</th>" * len(others)
    body = []
    for row in r.rows:
        firsts = [e for e in others if r.first_beyond[e] == row.name]
        cls = ' class="changed first"' if firsts else ""
        mark = f"← first beyond the tolerance: {', '.join(firsts)}" if firsts else ""
        cells = "".join(_html_cell(row.cells[e], e, r.tol) for e in others)
        body.append(
            f'<tr{cls}><td class="name">{esc(row.name)}</td><td>{esc(dims(row.shape))}</td>'
            f'{cells}<td class="mark">{esc(mark)}</td></tr>'
        )
    *info, how, how_more = _header(r)[1:]
    header = "".join(
        f"<p class='sub'>{esc(line.strip())}</p>"
        for line in [*info, f"{how} {how_more.replace('* beyond', 'in red: beyond')}"]
    )
    findings = "".join(f"<li>{esc(line.strip())}</li>" for line in _findings(r))
    table = (
        f'<table class="touch diff"><thead><tr><th class="name" rowspan="2">step</th>'
        f'<th rowspan="2">shape</th>{head}<th rowspan="2"></th></tr><tr>{sub}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>\n{asset('report.css')}{_CSS}</style></head>\n"
        f'<body><div class="gf"><header><h1>{esc(title)}</h1><p class="sub">{esc(r.summary)}'
        f"</p>{header}</header><section><h2>What was found</h2><ul>{findings}</ul></section>"
        f"<section><h2>Every step</h2>{table}</section></div></body></html>\n"
    )
