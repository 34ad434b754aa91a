"""The models under models/ load, fit the size budget, and still do what their cards say."""

from __future__ import annotations

from pathlib import Path

import pytest

from glassformer import weights
from glassformer.cli import main

MODELS = Path(__file__).resolve().parents[1] / "models"
BUDGET = 25e6  # bytes of weights per shipped model


@pytest.mark.parametrize("name,arch", [("char-lm", "decoder"), ("en-es", "encoder-decoder")])
def test_shipped_model_loads_within_budget(name, arch):
    folder = MODELS / name
    cfg, params, tok = weights.load(folder)
    assert cfg.arch == arch and tok is not None
    assert (folder / weights.WEIGHTS_FILE).stat().st_size <= BUDGET
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "glassformer train" in card and "wall time" in card


def test_shipped_translator_says_what_its_card_says(capsys):
    pytest.importorskip("torch")
    card = (MODELS / "en-es" / "README.md").read_text(encoding="utf-8")
    assert main(["translate", str(MODELS / "en-es"), "Hello world."]) == 0
    out = capsys.readouterr().out.strip()
    assert f'"Hello world." -> "{out}"' in card
