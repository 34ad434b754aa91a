"""The report section of `translate --explain-choice --html`: why beam search kept its best
hypothesis, from the dict the command line also writes as JSON (`results.Choice.to_dict()`).

    the headline   kept X over Y at step k: the gap, its largest parts, the sum and the error
    the split      the components (direct effects; a head with the tokens it read) and the source
                   and target tokens (total effects), tinted blue for the kept token, red against
    the beam       each hypothesis's rank after every step
    each step      the kept hypothesis's token over the runner-up token, its largest parts

Display only: every number was computed by `glassformer.inspect.choice`; the page is the
report's style, no script (`html_touch.probe_page` wraps it).
"""

from __future__ import annotations

from glassformer.explain.html_pieces import esc, tint

TOP = 12  # rows of a split's table; the rest summed in one


def choice_section(d: dict) -> str:
    out = []
    if "parting" in d:
        p, kept, dropped = d["parting"], d["kept"], d["dropped"]
        by = "the n-best list's runner-up" if d["dropped_by"] == "runner-up" else "the text given"
        out.append(
            f"<p class='choice-headline'>Kept <b>“{esc(kept['text'])}”</b> over "
            f"<b>“{esc(dropped['text'])}”</b> ({by}): they part at step {p['step']}, where "
            f"{_tok(p['token'])} was chosen over {_tok(p['versus'])} by "
            f"<b title='{p['gap']!r}'>{p['gap']:+.4f}</b> in log-probability (the logit "
            "difference: both read the same context, so the softmax's normaliser cancels). "
            f"Its parts add up to {p['sum']:.6f} (error {p['error']:.1e}); the two hypotheses' "
            f"own log-probabilities give {p['logprob_gap']:+.6f}.</p>"
        )
        alpha = d["length_penalty"]
        out.append(
            f"<p>Final scores, log P / n<sup>{alpha:g}</sup>: {kept['score']:.4f} over "
            f"{dropped['score']:.4f}, a lead of {d['score_gap']:+.4f} (log P "
            f"{kept['logprob']:.4f} over {dropped['logprob']:.4f}).</p>"
        )
        out.append(_split(p))
        out.append(_beam(d))
    if d.get("note"):
        out.append(f"<p class='sub'>Note: {esc(d['note'])}.</p>")
    rows = "".join(
        f"<tr><td>{s['step']}</td><td>{_tok(s['token'])}</td><td>{_tok(s['versus'])}</td>"
        f"<td title='{s['gap']!r}'>{s['gap']:+.4f}</td><td>{_named(s['parts'][:3])}</td>"
        f"<td style='white-space:nowrap'>{s['error']:.0e}</td></tr>"
        for s in d["steps"]
    )
    out.append(
        f"<h3>Each step of “{esc(d['kept']['text'])}”</h3><p class='sub'>Its token over the "
        "runner-up token (the likeliest other one) at that step: the log-probability gap and its "
        "largest parts (direct effects).</p><table class='next choice-steps'><tr><th>step</th>"
        "<th>token</th><th>over</th><th>gap</th><th>largest parts</th><th>error</th></tr>"
        f"{rows}</table>"
    )
    return "".join(out)


def _tok(t: str) -> str:
    return f"<span class='tok'>{esc(t)}</span>"


def _named(parts: list[dict]) -> str:
    return ", ".join(f"{esc(_part(p))} {p['value']:+.3f}" for p in parts)


def _part(p: dict) -> str:
    return p["name"] + (f" reading {p['reads'][0]['token']}" if p.get("reads") else "")


def _rows(items: list[tuple[str, float]], scale: float) -> str:
    cells = []
    for label, v in items:
        colour, dark = tint(v / scale if scale else 0.0, False)
        style = f"background:{colour}" + (";color:#fff" if dark else "")
        cells.append(
            f"<tr><td>{esc(label)}</td><td style='{style}' title='{v!r}'>{v:+.4f}</td></tr>"
        )
    return "".join(cells)


def _split(p: dict) -> str:
    parts = [(_part(q), q["value"]) for q in p["parts"]]
    side = {"encoder": "source", "decoder": "target"}
    tokens = [
        (f"{side[t['stack']]} {t['token']} @{t['position']}", t["value"]) for t in p["tokens"]
    ]
    tokens.append(("constants (biases, β)", p["constants"]))
    scale = max(abs(v) for _, v in parts + tokens) or 1.0
    tables = []
    named = (("By component (direct effects)", parts), ("By token (total effects)", tokens))
    for title, items in named:
        shown, rest = items[:TOP], items[TOP:]
        if rest:
            shown.append((f"{len(rest)} more", sum(v for _, v in rest)))
        tables.append(
            f"<div><h3>{title}</h3><table class='next choice-split'><tr><th>part</th><th>"
            f"share of the gap</th></tr>{_rows(shown, scale)}</table></div>"
        )
    return "<div class='choice-tables'>" + "".join(tables) + "</div>"


def _beam(d: dict) -> str:
    said = {None: "–", "finished": "end"}
    head = "".join(f"<th>{k}</th>" for k in range(len(d["beam_ranks"])))
    rows = "".join(
        f"<tr><th>{who}</th>"
        + "".join(f"<td>{said.get(r[who], r[who])}</td>" for r in d["beam_ranks"])
        + "</tr>"
        for who in ("kept", "dropped")
    )
    return (
        "<h3>Through the beam</h3><p class='sub'>Each hypothesis's rank in the beam after every "
        "step (0: the likeliest; – not in it; end: finished).</p>"
        f"<table class='next choice-beam'><tr><th>step</th>{head}</tr>{rows}</table>"
    )
