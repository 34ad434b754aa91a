"""`glassformer lens` and `glassformer attribute` from the command line, checked against the
engines: the lens's last row is the model's own prediction, DLA adds up to the logit, and the
attributions explain the tokens `generate` predicts, with integrated gradients complete."""

import html
import json
import re

import numpy as np
import pytest

from glassformer import reference as R
from glassformer.cli import main
from glassformer.formats import loading


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("probe")
    corpus = d / "c.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 5)
    common = ["--tokenizer", "char", "--corpus", str(corpus), "--std", "0.3", "--seed", "4"]
    gelu = ["--set", "norm=pre", "--set", "activation=gelu", "--set", "positions=learned"]
    assert main(["init", str(d / "dec"), "--preset", "tiny", *common, *gelu]) == 0
    assert main(["init", str(d / "seq"), "--preset", "tiny", "--set", "arch=encoder-decoder",
                 *common, *gelu]) == 0  # fmt: skip
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", *common]) == 0
    return d


def test_lens_last_row_is_the_models_prediction(capsys, models, tmp_path):
    code, out, err = run(capsys, "lens", models / "dec", "the cat", "--json", tmp_path / "l.json")
    assert code == 0, err
    lens = json.loads((tmp_path / "l.json").read_text())
    cfg, params, tok = loading.load(models / "dec")
    logits = R.forward(params, cfg, tok.encode("the cat"))
    assert [row[0] for row in lens["lens"]["top_ids"][-1]] == logits.argmax(-1).tolist()
    assert lens["lens"]["labels"][0] == "embeddings" and len(lens["lens"]["points"]) == 3
    code, out, _ = run(capsys, "lens", models / "dec", "the cat")
    assert code == 0 and out.splitlines()[-1].startswith("block 1 out")


def test_lens_dla_adds_up_to_the_logit(capsys, models):
    code, out, err = run(capsys, "lens", models / "dec", "the cat", "--dla", "s", "--versus", "m")
    assert code == 0 and "head 1" in out and "sum of the parts" in out, err
    code, out, _ = run(capsys, "lens", models / "dec", "the cat", "--dla", "s", "--json", "-")
    dla = json.loads(out)["dla"]
    cfg, params, tok = loading.load(models / "dec")
    logits = R.forward(params, cfg, tok.encode("the cat"))
    assert abs(dla["logit"] - logits[-1, tok.encode("s")[0]]) < 1e-12  # the model's own logit
    assert abs(dla["total"] - dla["logit"]) < 1e-9


def test_attribute_explains_what_generate_predicts(capsys, models, tmp_path):
    code, out, err = run(capsys, "generate", models / "dec", "the", "--max-new-tokens", "3",
                         "--engine", "reference")  # fmt: skip
    assert code == 0, err
    code, _, err = run(capsys, "attribute", models / "dec", "the", "--max-new-tokens", "3",
                       "--json", tmp_path / "a.json")  # fmt: skip
    assert code == 0, err
    a = json.loads((tmp_path / "a.json").read_text())
    cfg, params, tok = loading.load(models / "dec")
    assert tok.decode(a["tokens"]) == out.rstrip("\n")[len("the") :]
    assert max(a["completeness"]) < 1e-6  # GELU: Gauss-Legendre converges fast
    assert np.allclose(np.sum(a["scores"], axis=1), np.subtract(a["f"], a["f_baseline"]), atol=1e-6)


def test_a_rotary_model_integrates_from_a_token_baseline(capsys, models, tmp_path):
    """No position vectors: the zero baseline's note points to --baseline, and from the pad
    token's embedding integrated gradients are complete."""
    # (a smooth activation: the quadrature converges fast)
    sets = ("positions=rotary", "norm_kind=rmsnorm", "norm=pre", "activation=gelu")
    rotary = [x for kv in sets for x in ("--set", kv)]
    corpus = models / "c.txt"
    assert main(["init", str(tmp_path / "rot"), "--preset", "tiny", "--tokenizer", "char",
                 "--corpus", str(corpus), "--seed", "4", *rotary]) == 0  # fmt: skip
    capsys.readouterr()
    code, out, err = run(capsys, "attribute", tmp_path / "rot", "the", "--max-new-tokens", "2")
    assert code == 0, err
    assert "--baseline TOKEN, e.g. '<pad>'" in out
    code, out, err = run(capsys, "attribute", tmp_path / "rot", "the", "--max-new-tokens", "2",
                         "--baseline", "<pad>", "--steps", "256",
                         "--json", tmp_path / "b.json")  # fmt: skip
    assert code == 0, err
    a = json.loads((tmp_path / "b.json").read_text())
    assert a["baseline"] == "<pad>" and "note" not in a
    assert max(a["completeness"]) < 1e-6, a["completeness"]
    code, out, _ = run(capsys, "attribute", tmp_path / "rot", "the", "--max-new-tokens", "2",
                       "--baseline", "<pad>")  # fmt: skip
    assert "baseline: the embedding of <pad> at every position" in out and "f(baseline)" in out


def test_encoder_decoder_attribution_is_over_the_source(capsys, models, tmp_path):
    code, _, err = run(capsys, "attribute", models / "seq", "the cat", "--target", "sat",
                       "--json", tmp_path / "a.json", "--steps", "16")  # fmt: skip
    assert code == 0, err
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["stack"] == "encoder" and len(a["input"]) == len("the cat")
    assert len(a["scores"][0]) == len("the cat") and len(a["predicted"]) == len("sat")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lens", "{enc}", "the"], "is an encoder"),
        (["attribute", "{enc}", "the"], "is an encoder"),
        (["lens", "{dec}", "the", "--dla", "the"], "3 tokens"),
        (["lens", "{dec}", "the", "--k", "0"], "--k must be >= 1"),
        (["attribute", "{dec}", "the", "--steps", "0"], "--steps must be in [1, 1024]"),
        (["attribute", "{dec}", "the", "--baseline", "zz"], "not a piece of the vocabulary"),
        (["attribute", "{dec}", "the", "--baseline", "#999"], "token id in [0, "),
        (
            ["attribute", "{dec}", "the", "--method", "gradient_x_input", "--baseline", "<pad>"],
            "gradient_x_input has none",
        ),
    ],
)
def test_probe_refusals_are_one_line(capsys, models, argv, message):
    code, _, err = run(capsys, *[a.format(enc=models / "enc", dec=models / "dec") for a in argv])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], err


# -- the HTML pages -------------------------------------------------------------------------------


def test_lens_page_shows_each_layers_top_token(capsys, models, tmp_path):
    """The page's cells are the JSON's top tokens, row by row; its last row the model's argmax."""
    code, _, err = run(capsys, "lens", models / "dec", "the cat", "--dla", "s", "--json",
                       tmp_path / "l.json", "--html", tmp_path / "l.html")  # fmt: skip
    assert code == 0, err
    lens = json.loads((tmp_path / "l.json").read_text())["lens"]
    page = (tmp_path / "l.html").read_text(encoding="utf-8")
    cells = re.findall(r"title='[^']*'>(.*?)<small>", page)
    top = [html.escape(t[0]) for row in lens["top_tokens"] for t in row]
    assert cells == top
    cfg, params, tok = loading.load(models / "dec")
    logits = R.forward(params, cfg, tok.encode("the cat"))
    last = [html.escape(tok.vocab[i].replace(" ", "␣")) for i in logits.argmax(-1)]
    assert cells[-len(last) :] == last
    assert 'id="gf-dla"' in page and "<script" not in page  # static, nothing to load


def test_attribution_page_tints_each_input_token_by_its_score(capsys, models, tmp_path):
    code, _, err = run(capsys, "attribute", models / "dec", "the", "--max-new-tokens", "2",
                       "--json", tmp_path / "a.json", "--html", tmp_path / "a.html")  # fmt: skip
    assert code == 0, err
    a = json.loads((tmp_path / "a.json").read_text())
    page = (tmp_path / "a.html").read_text(encoding="utf-8")
    chip = r"<span class='tok[^']*' style='[^']*' title='([^']+)'"
    titles = re.findall(chip, page)  # each score to 12 digits
    assert titles == [f"{s:.12g}" for row in a["scores"] for s in row[: len(a["input"])]]
    assert page.count("class='attr'") == len(a["predicted"]) and "f(x) − f(0)" in page


def test_probe_pages_are_not_written_over_unasked(capsys, models, tmp_path):
    page = tmp_path / "l.html"
    page.write_text("mine")
    code, _, err = run(capsys, "lens", models / "dec", "the", "--html", page)
    assert code == 2 and "--overwrite" in err and page.read_text() == "mine"
    code, _, err = run(capsys, "lens", models / "dec", "the", "--html", "-", "--json", "-")
    assert code == 2 and "both write to stdout" in err
