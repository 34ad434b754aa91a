"""The learner's pages (docs/learn/) show commands' output as "real output": each shown block is
read back and found in what the command prints today. tests/test_docs.py runs the pages' commands
and checks what their Python examples print; a block shown after a bash command is only shown
there, so it is checked here. (`walkthrough modern`'s excerpt: tests/test_walkthrough_modern.py.)
"""

from pathlib import Path

from glassformer.cli import main
from tests.docblocks import blocks

ROOT = Path(__file__).resolve().parents[1]
LEARN = ROOT / "docs" / "learn"


def shown_after_commands(page: str) -> list[str]:
    """The page's plain and text blocks that are not a Python example's output."""
    found = blocks((LEARN / page).read_text(encoding="utf-8"))
    outputs = {b.shown for b in found if b.lang == "python" and b.shown is not None}
    return [b.code for b in found if b.lang in ("", "text") and b.code not in outputs]


def printed(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_the_walkthrough_excerpts_are_real_output(capsys):
    out = "\n".join(
        printed(capsys, "walkthrough", name) for name in ("hello-world", "self-attention", "modern")
    )
    excerpts = shown_after_commands("walkthroughs.md")
    assert len(excerpts) >= 4  # hello-world, the article's decoder, self-attention, modern
    for excerpt in excerpts:
        for step in excerpt.strip().split("\n\n"):
            assert step in out, step[:80]


def test_the_time_lapse_table_is_real_output(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    lines = printed(capsys, "explain", "models/induction", "--over-training").splitlines()
    table = shown_after_commands("time-lapse.md")[0]
    at = 0
    for line in table.splitlines():
        if line.strip() == "...":
            continue
        assert line in lines[at:], line  # in the order the command prints them
        at = lines.index(line, at) + 1


def test_the_exercises_listing_is_real_output(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a folder without exercise files, as the page's first run
    listing = printed(capsys, "exercises")
    out = listing + printed(capsys, "exercises", "start", "3", "runs/exercises")
    assert shown_after_commands("exercises.md")[0] == out
