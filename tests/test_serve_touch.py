"""The explorer's interventions measured where the learner looks (issue 26, point 5): the
position whose prediction is told can be chosen (a translator's default is the first position the
intervention changes, not always 0), and a classifier's ablation reports each class's probability
before and after, by class name. Oracles: the reference engine under `interventions.run_with`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")

from glassformer import decoding  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.inspect import interventions as I  # noqa: E402
from glassformer.serve import Explorer, Registry  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAR, ENES = ROOT / "models" / "char-lm", ROOT / "models" / "en-es"


@pytest.fixture(scope="module")
def classifier(seeded_classifier):
    return seeded_classifier


@pytest.fixture(scope="module")
def explorer(classifier):
    return Explorer(Registry([CHAR, ENES, classifier], walkthroughs=False))


def head(stack="decoder", kind="self_attn", layer=1, h=2):
    return {"stack": stack, "kind": kind, "layer": layer, "head": h}


def test_a_decoder_is_measured_at_the_position_asked_for(explorer):
    m = explorer.registry.load("char-lm")
    ids = m.encode("ROMEO: But")
    run = I.reference_run(m.params, m.cfg)
    after = I.run_with(run, ids, I.ablate_head(1, 2))
    for position, want in ((None, len(ids) - 1), (3, 3)):
        body = {"model": "char-lm", "text": "ROMEO: But", "heads": [head()]}
        if position is not None:
            body["position"] = position
        r = explorer.intervene(body)
        assert r["position"] == want
        got = {t["id"]: t["logit"] for t in r["changed"]}
        np.testing.assert_allclose(list(got.values()), after[want][list(got)], atol=1e-10)
        assert r["reads"] == m.runtime.readable([ids[want]])[0]
    assert r["changed_positions"] == list(np.flatnonzero(run(ids).argmax(1) != after.argmax(1)))
    with pytest.raises(GlassformerError, match=r"position 99: the decoder reads 10 tokens"):
        explorer.intervene({"model": "char-lm", "text": "ROMEO: But", "heads": [head()],
                            "position": 99})  # fmt: skip


def test_a_translator_is_measured_where_the_ablation_changes_its_prediction(explorer):
    r = explorer.intervene(
        {"model": "en-es", "text": "Hello world.", "heads": [head("decoder", "cross_attn", 0, 0)]}
    )
    assert r["changed_positions"], "this head changes the translation"
    assert r["position"] == r["changed_positions"][0] != 0
    clean = max(r["clean"], key=lambda t: t["logit"])
    changed = max(r["changed"], key=lambda t: t["logit"])
    assert clean["id"] != changed["id"]


def test_a_classifiers_ablation_is_its_class_probabilities(explorer, classifier):
    m = explorer.registry.load("clf")
    ids = m.encode("to be or not")

    def forward(x):  # the reference engine itself, not the Model's own forward
        return R.classify(m.params, m.cfg, list(x))

    fns = I.ablate_head(0, 1, stack="encoder", kind="self_attn")
    before = decoding.softmax(forward(ids))
    after = decoding.softmax(I.run_with(forward, ids, fns))
    r = explorer.intervene({"model": "clf", "text": "to be or not",
                            "heads": [head("encoder", "self_attn", 0, 1)]})  # fmt: skip
    assert r["kind"] == "class"
    assert [c["label"] for c in r["classes"]] == ["yes", "no"]
    np.testing.assert_allclose([c["before"] for c in r["classes"]], before, atol=1e-12)
    np.testing.assert_allclose([c["after"] for c in r["classes"]], after, atol=1e-12)
    assert abs(after - before).max() > 1e-6  # the head matters, so the test can fail
    assert r["clean_label"] == ["yes", "no"][int(before.argmax())]


def test_the_explorers_runs_leave_no_notes_behind(explorer):
    """A long-running server: its runs show unknown pieces on the page, and keep no notes (a
    list that would grow with every new text)."""
    from glassformer.serve import runs

    m = explorer.registry.load("char-lm")
    for text in ("to be ☃", "or not ☂", "€ that is"):
        run = runs.make_run("char-lm", m, text)
        assert run.unknown  # told on the page
    assert m.notes == []
