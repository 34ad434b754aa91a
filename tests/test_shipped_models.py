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


def test_translate_input_streams_in_input_order_with_a_progress_bar(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    from glassformer.data import read_pairs
    from glassformer.inference import translate
    from glassformer.torch_model import from_params

    sentences = [s for s, _ in read_pairs("eng-spa-valid")[::80][::-1]]  # longest first
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    folder = str(MODELS / "en-es")
    assert main(["translate", folder, "--input", str(tmp_path / "in.txt"), "--progress"]) == 0
    out, err = capsys.readouterr()
    cfg, params, tok = weights.load(folder)
    model = from_params(cfg, params, dtype=torch.float32).eval()
    alone = [translate(model, tok, [s], beam=4)[0] for s in sentences]
    assert out.splitlines() == alone
    assert "13/13" in err  # the bar, on stderr only
    assert main(["translate", folder, "--input", str(tmp_path / "in.txt"), "--beam", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 13 and "13/13" not in err  # stderr is no terminal here
