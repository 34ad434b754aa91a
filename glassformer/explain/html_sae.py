"""The SAE report's HTML: the evaluation table and a card per feature (its top contexts with the
token marked and its activation, and its logit effect: the tokens its decoder row pushes up and
down through the unembedding), sections of one self-contained page (`html_touch.probe_page`).

Deliberately not here: computing any of it (`corpus/evaluate.py`).
"""

from __future__ import annotations

from glassformer.explain.html_pieces import esc


def _n(v, digits: int = 4) -> str:
    return f'<span title="{v!r}">{v:.{digits}g}</span>' if isinstance(v, float) else esc(str(v))


def report_section(r: dict) -> str:
    """The evaluation: reconstruction and the model's loss with the SAE spliced in."""
    loss = r["loss"]
    rows = [
        ("rows (token positions)", r["rows"]),
        ("reconstruction MSE (per number)", r["mse"]),
        ("explained variance", r["explained_variance"]),
        ("L0 (features active per row)", r["l0"]),
        ("dead features (never fired here)", f"{r['dead']} of {r['sae']['d_sae']}"),
        ("next-token loss, original (nats)", loss["clean"]),
        ("... with the SAE spliced in", loss["spliced"]),
        ("... with the step zeroed", loss["zero"]),
        ("loss recovered (zero - spliced) / (zero - original)", r["loss_recovered"]),
    ]
    body = "".join(f"<tr><th>{esc(k)}</th><td>{_n(v)}</td></tr>" for k, v in rows)
    return (
        "<p>Computed in the reference engine (float64): each window of the text run as it is, "
        "with the SAE's reconstruction in place of its step, and with that step zeroed.</p>"
        f'<table class="gf-sae-report">{body}</table>'
    )


def card(c: dict) -> str:
    """One feature: how often and how strongly it fires, its top contexts, its logit effect."""
    ex = "".join(
        f"<tr><td>{_n(e['value'], 3)}</td><td><code>{esc(e['before'])}"
        f'<mark class="gf-tok">{esc(e["token"])}</mark>{esc(e["after"])}</code></td></tr>'
        for e in c["examples"]
    )
    effect = ""
    if c.get("up"):
        up = ", ".join(f"<code>{esc(t)}</code> {_n(v, 3)}" for t, v in c["up"])
        down = ", ".join(f"<code>{esc(t)}</code> {_n(v, 3)}" for t, v in c["down"])
        effect = f"<p>Pushes up: {up}<br>Pushes down: {down}</p>"
    return (
        f'<div class="gf-card" id="gf-feature-{c["feature"]}"><h3>Feature {c["feature"]}</h3>'
        f"<p>fires on {100 * c['fires']:.2f}% of rows, at most {c['max']:.3g}</p>"
        f"<table><tr><th>activation</th><th>context (the token marked)</th></tr>{ex}</table>"
        f"{effect}</div>"
    )


def cards_section(cards: list[dict]) -> str:
    return (
        "<p>Each feature's strongest contexts, and its logit effect: its decoder row through the "
        "final norm's centring and gain (its division by the stream's scale left out) and the "
        "unembedding.</p>" + "".join(card(c) for c in cards)
    )
