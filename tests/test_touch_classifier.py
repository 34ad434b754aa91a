"""`ablate` and `patch` on an encoder classifier (issue 36, point 8), in the Model, the command
line and the explorer: each class's probability before and after, by class name. Oracles: the
reference engine run directly (`reference.classify`) under a hand-made `trace.intervene`; the
explorer's own intervention (`Explorer.intervene`), which must give the same numbers; and
invariants (ablating nothing changes nothing, probabilities sum to 1, patching a run into itself
restores all of it)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import glassformer
from glassformer import reference as R
from glassformer.cli import main
from glassformer.trace import intervene, tracing

TEXT, OTHER = "to be or not", "to is be is"  # 4 words each, classified "no" and "yes"
HEAD = "encoder.0.self_attn.head1"


@pytest.fixture(scope="module")
def folder(seeded_classifier):
    return seeded_classifier


@pytest.fixture(scope="module")
def m(folder):
    return glassformer.load(folder)


def probs(m, text, fns=None):
    """The oracle: the reference engine's class probabilities, under `fns` when given."""
    with intervene(fns or {}):
        return R.softmax(R.classify(m.params, m.cfg, m.encode(text)))


def column(rows, key):
    return np.array([r[key] for r in rows])


def test_the_two_texts_are_classified_differently(m):
    """What the patching tests below stand on."""
    assert probs(m, TEXT).argmax() != probs(m, OTHER).argmax()


def test_ablating_nothing_leaves_every_probability_as_it_was(m):
    a = m.ablate(TEXT, [])
    assert [r["label"] for r in a.classes] == ["yes", "no"] == m.class_names
    np.testing.assert_allclose(column(a.classes, "before"), probs(m, TEXT), atol=1e-12)
    assert column(a.classes, "after").tolist() == column(a.classes, "before").tolist()
    assert not column(a.classes, "change").any()


def test_ablating_a_head_equals_zeroing_its_output_by_hand(m):
    a = m.ablate(TEXT, [HEAD])
    want = probs(m, TEXT, {f"{HEAD}.C": lambda x: np.zeros_like(x)})
    np.testing.assert_allclose(column(a.classes, "after"), want, atol=1e-12)
    np.testing.assert_allclose(column(a.classes, "before"), probs(m, TEXT), atol=1e-12)
    assert abs(want - probs(m, TEXT)).max() > 1e-5  # the head matters, so the test can fail
    np.testing.assert_allclose(column(a.classes, "change"), want - probs(m, TEXT), atol=1e-12)
    for key in ("before", "after"):
        assert column(a.classes, key).sum() == pytest.approx(1, abs=1e-12)
    assert a.ablated == [HEAD] and a.steps == [f"{HEAD}.C"]
    assert a.positions is None and "text" not in a.to_dict()  # a classifier predicts once


def test_the_explorer_reports_the_same_numbers(m, folder):
    pytest.importorskip("starlette")
    from glassformer.serve import Explorer, Registry

    explorer = Explorer(Registry([folder], walkthroughs=False))
    head = {"stack": "encoder", "kind": "self_attn", "layer": 0, "head": 1}
    r = explorer.intervene({"model": folder.name, "text": TEXT, "heads": [head]})
    assert r["classes"] == m.ablate(TEXT, [HEAD]).classes  # one computation, equal numbers
    same = explorer.intervene(
        {"model": folder.name, "text": TEXT, "heads": [head], "how": "patch", "patch_text": TEXT}
    )  # the run patched from itself: all of it restored, nothing moved
    assert column(same["classes"], "after").tolist() == column(same["classes"], "before").tolist()


def test_patching_measures_the_clean_class_minus_this_runs_class(m):
    p = m.patch(TEXT, OTHER)
    clean, corrupted = probs(m, OTHER), probs(m, TEXT)
    g, b = int(clean.argmax()), int(corrupted.argmax())
    assert p.metric.startswith(f"logit[{m.class_names[g]}] - logit[{m.class_names[b]}]")
    np.testing.assert_allclose(column(p.classes, "before"), corrupted, atol=1e-12)
    np.testing.assert_allclose(column(p.classes, "after"), clean, atol=1e-12)
    table = p.tables["self_attn"]
    assert list(p.tables) == ["self_attn"] and table["rows"] == ["layer 0", "layer 1"]

    def diff(fns=None):  # the metric, by hand: logits of the clean run's class minus this run's
        with intervene(fns or {}):
            z = R.classify(m.params, m.cfg, m.encode(TEXT))
        return z[g] - z[b]

    with tracing() as clean_trace:
        R.classify(m.params, m.cfg, m.encode(OTHER))
    z_clean = R.classify(m.params, m.cfg, m.encode(OTHER))
    assert table["clean"] == pytest.approx(z_clean[g] - z_clean[b], abs=1e-12)
    assert table["corrupted"] == pytest.approx(diff(), abs=1e-12)
    for layer in range(2):
        for h in range(m.cfg.n_heads):
            name = f"encoder.{layer}.self_attn.head{h}.C"
            raw = diff({name: lambda x, v=clean_trace[name]: v})
            assert table["raw"][layer][h] == pytest.approx(raw, abs=1e-10)
            share = (raw - table["corrupted"]) / (table["clean"] - table["corrupted"])
            assert table["values"][layer][h] == pytest.approx(share, abs=1e-10)
    assert max(map(max, table["values"])) > 0.1  # some head restores part of it


def test_the_command_line_prints_and_writes_what_the_model_returns(m, folder, tmp_path, capsys):
    argv = ["explain", str(folder), TEXT, "--ablate", HEAD, "--patch-from", OTHER]
    code = main([*argv, "--only", "logits"])
    out, err = capsys.readouterr()
    assert code == 0, err
    a, p = m.ablate(TEXT, [HEAD]), m.patch(TEXT, OTHER)
    for rows in (a.classes, p.classes):
        lines = [f"  {'class':<12}  {'before':>8}  {'after':>8}  {'change':>8}"] + [
            f"  {r['label']:<12}  {r['before']:>8.4f}  {r['after']:>8.4f}  {r['change']:>+8.4f}"
            for r in rows
        ]
        assert "\n".join(lines) in out
    assert "  predicts no -> no (unchanged)" in out and "  predicts no -> yes (changed)" in out
    assert f"metric {p.metric}: 0 = no effect" in out
    assert main([*argv, "--json", str(tmp_path / "r.json")]) == 0
    told = json.loads((tmp_path / "r.json").read_text())["interventions"]
    assert told == {"ablation": a.to_dict(), "patching": p.to_dict()}


def test_a_decoders_ablation_keeps_its_keys(tmp_path):
    """Nothing new for models that predict tokens: no "classes", the keys of before."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat.\n" * 5)
    assert main(["init", str(tmp_path / "dec"), "--preset", "tiny", "--tokenizer", "char",
                 "--corpus", str(corpus), "--seed", "2"]) == 0  # fmt: skip
    dec = glassformer.load(tmp_path / "dec")
    assert list(dec.ablate("the cat", ["decoder.0.ffn"]).to_dict()) == [
        "ablated",
        "steps",
        "positions",
    ]
    assert "classes" not in dec.patch("the cat", "a dog s").to_dict()


def test_the_html_report_shows_each_class_before_and_after(m, folder, tmp_path, capsys):
    argv = ["explain", str(folder), TEXT, "--ablate", HEAD, "--patch-from", OTHER]
    assert main([*argv, "--html", str(tmp_path / "r.html")]) == 0, capsys.readouterr().err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    for name, told in (("ablation", m.ablate(TEXT, [HEAD])), ("patching", m.patch(TEXT, OTHER))):
        start = page.index(f'<section id="gf-{name}">')
        section = page[start : page.index("</section>", start)]
        exact = re.findall(r"<td title='([^']+)'>", section)  # every number, to 15 digits
        keys = ("before", "after", "change")
        assert exact == [f"{r[k]:.15g}" for r in told.classes for k in keys]
        assert all(f"<td>{r['label']}</td>" in section for r in told.classes)
