"""One notation for the attention scale (issue 39, friction 5): the scores are Ω = Q·Kᵀ and the
weights A = softmax(Ω/√c), c the width of one head's queries and keys, in the explorer, the
report, the walkthroughs and the docs; the shape legend says once that its D is that c, and C is
d_model (×√C: the embedding scale). The pages used to say QKᵀ/√d, ÷√D, Ω/√c and √d_model side by
side. The exercises and their page (docs/learn/exercises.md) keep the paper's d_k and d_head
(they quote "Attention Is All You Need") and are not scanned; the browser side is in
tests/test_serve_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

from glassformer.explain.html_pieces import LEGEND, asset

ROOT = Path(__file__).resolve().parents[1]
SURFACES = [
    ROOT / "README.md",
    *(p for p in sorted((ROOT / "docs").rglob("*.md")) if p.name != "exercises.md"),
    *sorted((ROOT / "glassformer" / "explain").rglob("*.*")),
    *sorted((ROOT / "glassformer" / "walkthrough").rglob("*.py")),
    *sorted((ROOT / "glassformer" / "serve").rglob("*.py")),
    ROOT / "glassformer" / "glossary.py",
    ROOT / "glassformer" / "training" / "views.py",
]
# A square root of a letter other than the article's c (head width) or C (d_model): √d, √D,
# √d_k, √d_model; and the scores written as QKᵀ in a scale rather than by their name Ω.
OTHER_ROOT = re.compile(r"√\(?(?![cC]\b)[A-Za-z]\w*")
RAW_SCORES = re.compile(r"QKᵀ\s*/|Q·Kᵀ\s*/")
ALLOWED = re.compile(r"√\(?(σ|mean)")  # the norms' √(σ² + ε), √(mean(x²) + ε)


def offences(text: str) -> list[str]:
    found = [m.group(0) for m in OTHER_ROOT.finditer(text) if not ALLOWED.match(m.group(0))]
    return found + [m.group(0) for m in RAW_SCORES.finditer(text)]


def test_every_page_writes_the_scale_as_omega_over_root_c():
    bad = {}
    for path in SURFACES:
        if path.suffix not in (".md", ".py", ".js", ".html"):
            continue
        if found := offences(path.read_text(encoding="utf-8")):
            bad[str(path.relative_to(ROOT))] = found
    assert bad == {}


def test_the_scan_finds_the_notations_it_forbids():
    assert offences("A = softmax(QKᵀ/√d)") == ["√d", "QKᵀ/"]
    assert offences("÷ √D → 0.5; softmax(Q·Kᵀ/√64)") == ["√D", "Q·Kᵀ/"]
    assert offences("scaled by √d_model") == ["√d_model"]
    assert offences("A = softmax(Ω/√c) · X × √C · (x − μ)/√(σ² + ε) · √(mean(x²) + ε)") == []


def test_the_legend_defines_c_once_and_the_explorer_shows_the_same_legend():
    assert "D head dim (the c of Ω/√c)" in LEGEND and "C d_model" in LEGEND
    page = " ".join(asset("explorer.html").split())
    assert LEGEND in page
