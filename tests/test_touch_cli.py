"""`explain --ablate` and `--patch-from` against an independent oracle: zero-ablating a head is
the same as zeroing that head's rows of Wv (and bias), and zero-ablating an FFN the same as
zeroing its W2 (and bias): the weights are edited, the reference engine rerun, and the predicted
tokens compared with what the command reports."""

import html
import json
import re

import numpy as np
import pytest

from glassformer import reference as R
from glassformer.cli import main
from glassformer.formats import loading
from glassformer.tokenizer.display import display_kind, display_tokens


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("touch")
    corpus = d / "c.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 5)
    common = ["--tokenizer", "char", "--corpus", str(corpus), "--std", "0.5", "--seed", "2"]
    assert main(["init", str(d / "dec"), "--preset", "tiny", *common]) == 0
    assert main(["init", str(d / "seq"), "--preset", "tiny", "--set", "arch=encoder-decoder",
                 *common]) == 0  # fmt: skip
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", *common]) == 0
    assert main(["init", str(d / "emb"), "--preset", "encoder-classifier", "--set",
                 "n_classes=0", *common]) == 0  # fmt: skip
    return d


def _edited_prediction(folder, text, edit):
    cfg, params, tok = loading.load(folder)
    params = {k: v.copy() for k, v in params.items()}
    edit(params, cfg)
    return R.forward(params, cfg, tok.encode(text)).argmax(-1), tok


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        ("decoder.1.self_attn.head1", lambda p, c: _zero_head(p, c, 1, 1)),
        ("decoder.0.ffn", lambda p, c: _zero_ffn(p, 0)),
    ],
)
def test_ablation_equals_zeroed_weights(capsys, models, tmp_path, name, edit):
    text = "the cat sat"
    code, _, err = run(capsys, "explain", models / "dec", text, "--ablate", name,
                       "--json", tmp_path / "r.json")  # fmt: skip
    assert code == 0, err
    rows = json.loads((tmp_path / "r.json").read_text())["interventions"]["ablation"]["positions"]
    want, tok = _edited_prediction(models / "dec", text, edit)
    got = [r["predicted_ablated"] for r in rows]
    assert got == display_tokens(tok.tokens(want), display_kind(tok))
    assert max(r["max_logit_change"] for r in rows) > 0.01  # the ablation did something


def _zero_head(p, cfg, layer, head):
    D = cfg.head_dim
    v = f"decoder.layers.{layer}.self_attn.v"
    p[f"{v}.weight"][head * D : (head + 1) * D] = 0.0
    p[f"{v}.bias"][head * D : (head + 1) * D] = 0.0


def _zero_ffn(p, layer):
    p[f"decoder.layers.{layer}.ffn.w2.weight"][:] = 0.0
    p[f"decoder.layers.{layer}.ffn.w2.bias"][:] = 0.0


def test_ablating_cross_attention_regenerates_the_output(capsys, models, tmp_path):
    code, out, err = run(capsys, "explain", models / "seq", "the cat", "--ablate",
                         "decoder.0.cross_attn", "--ablate", "decoder.1.cross_attn")  # fmt: skip
    assert code == 0 and "output with the ablation" in out, err
    # without cross-attention the decoder cannot see the source: every source gives one output
    outs = set()
    for text in ("the cat", "a dog", "mat"):
        code, _, err = run(capsys, "explain", models / "seq", text, "--ablate",
                           "decoder.*.cross_attn.head*.C", "--json", tmp_path / f"{len(outs)}.json",
                           "--overwrite")  # fmt: skip
        data = json.loads((tmp_path / f"{len(outs)}.json").read_text())
        outs.add(data["interventions"]["ablation"]["text_ablated"])
    assert len(outs) == 1


def test_patching_table_has_one_row_per_layer(capsys, models, tmp_path):
    code, _, err = run(capsys, "explain", models / "dec", "the cat", "--patch-from", "a dog s",
                       "--json", tmp_path / "p.json")  # fmt: skip
    assert code == 0, err
    p = json.loads((tmp_path / "p.json").read_text())["interventions"]["patching"]
    table = p["tables"]["self_attn"]
    assert table["rows"] == ["layer 0", "layer 1"] and len(table["values"][0]) == 2
    cfg, params, tok = loading.load(models / "dec")
    a = R.forward(params, cfg, tok.encode("the cat")).argmax(-1)
    b = R.forward(params, cfg, tok.encode("a dog s")).argmax(-1)
    assert p["position"] == int(np.flatnonzero(a != b)[0])  # the first position they differ


@pytest.mark.parametrize(
    ("model", "argv", "message"),
    [
        ("dec", ["--ablate", "decoder.7.self_attn.head0"], "has 2 layers"),
        ("dec", ["--ablate", "decoder.0.self_attn.head9"], "2 heads per layer"),
        ("dec", ["--ablate", "decoder.0.cross_attn"], "only an encoder-decoder"),
        ("dec", ["--ablate", "decoder.0.nothing"], "no head, sublayer or step of this model"),
        ("dec", ["--patch-from", "the"], "same number of tokens"),
        ("dec", ["--patch-from", "the cat"], "same token at every position"),
        ("emb", ["--ablate", "encoder.0.ffn"], "this encoder has no classifier"),
        ("emb", ["--patch-from", "the dog"], "use a classifier, a decoder or an encoder-decoder"),
        ("enc", ["--ablate", "decoder.0.ffn"], "this encoder model has no decoder"),
        ("enc", ["--patch-from", "the"], "patching an encoder's heads position by position"),
        ("enc", ["--patch-from", "the cat"], "both inputs are classified"),
    ],
)
def test_touch_refusals_are_one_line(capsys, models, model, argv, message):
    code, _, err = run(capsys, "explain", models / model, "the cat", *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], err


# -- the HTML report ------------------------------------------------------------------------------


def _section(page: str, name: str) -> str:
    start = page.index(f'<section id="gf-{name}">')
    return page[start : page.index("</section>", start)]


def test_html_report_shows_the_ablated_run_beside_the_original(capsys, models, tmp_path):
    """The page tells what the JSON tells: the same rows, the changed ones marked, both outputs."""
    argv = ["explain", models / "seq", "the cat", "--ablate", "decoder.0.cross_attn",
            "--ablate", "decoder.1.cross_attn"]  # fmt: skip
    code, _, err = run(capsys, *argv, "--json", tmp_path / "a.json", "--html", tmp_path / "a.html")
    assert code == 0, err
    a = json.loads((tmp_path / "a.json").read_text())["interventions"]["ablation"]
    page = _section((tmp_path / "a.html").read_text(encoding="utf-8"), "ablation")
    rows = re.findall(r"<tr( class='changed')?><td>(\d+)</td>", page)
    assert [int(p) for _, p in rows] == [r["position"] for r in a["positions"]]
    assert [bool(c) for c, _ in rows] == [r["changed"] for r in a["positions"]]
    changes = re.findall(r"<td title='([^']+)'>", page)  # each to 12 digits
    assert changes == [f"{r['max_logit_change']:.12g}" for r in a["positions"]]
    assert html.escape(a["text_ablated"]) in page and html.escape(a["text"]) in page
    code, out, _ = run(capsys, "explain", models / "seq", "the cat", "--only", "logits")
    assert a["text"] in out  # the original output is the one explain reports without ablation


def test_html_report_draws_the_patching_table_as_a_heatmap(capsys, models, tmp_path):
    argv = ["explain", models / "dec", "the cat", "--patch-from", "a dog s"]
    code, _, err = run(capsys, *argv, "--json", tmp_path / "p.json", "--html", tmp_path / "p.html")
    assert code == 0, err
    table = json.loads((tmp_path / "p.json").read_text())["interventions"]["patching"]["tables"]
    page = _section((tmp_path / "p.html").read_text(encoding="utf-8"), "patching")
    cells = re.findall(r'<td style="background:#[0-9a-f]{6}"[^>]* title="([^"]+)"', page)
    assert cells == [f"{v:.15g}" for row in table["self_attn"]["values"] for v in row]  # exact
    assert all(f"<th>{r}</th>" in page for r in table["self_attn"]["rows"])
