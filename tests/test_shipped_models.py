"""The models under models/ load, fit the size budget, and still do what their cards say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
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


def _reference(folder: Path, sentence: str, beam: int):
    """The NumPy float64 reference engine's decoding (no torch, no cache), from BOS, as many
    tokens as max_len allows: greedy's text at beam 1, else decoding.beam_search's result."""
    from glassformer import decoding
    from glassformer import reference as R

    cfg, params, tok = weights.load(folder)
    step = R.next_token_logits(params, cfg, tok.encode(sentence)[: cfg.max_len])
    limits = dict(max_new_tokens=cfg.max_len - 1, eos_id=tok.eos_id, max_len=cfg.max_len)
    if beam == 1:
        return tok.decode(decoding.greedy(step, [tok.bos_id], **limits).ids[1:])
    return tok, decoding.beam_search(step, [tok.bos_id], width=beam, **limits)


def test_shipped_translator_translates_as_the_reference_engine(capsys):
    """`glassformer translate --n-best 4` (torch, float32, KV cache, batched beam search) ranks
    the candidates the reference engine's beam search (float64, no cache) ranks for the same
    weights, with the same log-probabilities, and the library's greedy decoding gives the
    reference's greedy text; the card's example ("Hello world." at the default beam 4) is the
    reference's best candidate, not a string copied from an earlier output."""
    torch = pytest.importorskip("torch")
    from glassformer.torch_model import from_params
    from glassformer.translating import translate

    folder, sentence = MODELS / "en-es", "Hello world."
    assert main(["translate", str(folder), sentence, "--n-best", "4"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    tok, result = _reference(folder, sentence, 4)
    ranked = result.ranked[:4]
    assert [r[3] for r in rows] == [tok.decode(h.ids[1:]) for h in ranked]
    got = np.array([[float(r[1]), float(r[2])] for r in rows])
    want = np.array([[h.score(1.0), h.logprob] for h in ranked])
    np.testing.assert_allclose(got, want, atol=5e-4)  # printed to 4 decimals, float32
    cfg, params, tok = weights.load(folder)
    model = from_params(cfg, params, dtype=torch.float32).eval()
    assert translate(model, tok, [sentence], beam=1) == [_reference(folder, sentence, 1)]
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert f'"{sentence}" -> "{rows[0][3]}"' in card


def test_translate_input_streams_in_input_order_with_a_progress_bar(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    from glassformer.data import read_pairs
    from glassformer.torch_model import from_params
    from glassformer.translating import translate

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
