"""Typed results, and the trace and the run as mappings of step names (issue 36, points 2 and 4).

Oracles: the command line (a result's `to_json()` is the text its `--json` writes, byte for
byte; `to_dict()` the dict it holds), the trace's own step list and `fnmatch` (keys, values, len
and globs of the mapping against `Trace.steps`), and bounds (a repr fits one screen: under 2,000
characters in a few lines, on the shipped models, never an array).
"""

from __future__ import annotations

import fnmatch
import json

import numpy as np
import pytest
from test_model import CHAR, ENES, classifier, cli  # noqa: F401 (classifier: a fixture)

import glassformer
from glassformer import engine_diff
from glassformer import results as Rs
from glassformer.errors import TraceError
from glassformer.trace import byte_size, tap, tracing

TEXTS = {CHAR: "To be", ENES: "Hello world."}


@pytest.fixture(scope="module")
def runs():
    return {p: glassformer.load(p).run(t) for p, t in TEXTS.items()}


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind == "f")


# -- the trace and the run as mappings -------------------------------------------------------------


@pytest.mark.parametrize("path", list(TEXTS))
def test_a_trace_is_a_mapping_of_its_step_names(runs, path):
    run = runs[path]
    trace = run.trace
    names = [s.name for s in trace.steps]
    assert len(names) > 100
    assert list(trace) == list(trace.keys()) == list(dict.fromkeys(names))
    assert len(trace) == len(set(names)) == len(list(trace.values())) == len(trace.items())
    assert set(trace.keys()) == set(names)
    assert all(n in trace for n in names) and "decoder.99.ffn.out" not in trace and 0 not in trace
    for name, values in trace.items():
        assert _same(values, trace.step(name).values), name
    for glob in ("decoder.0.*.A", "*.head1.?", "decoder.[01].ffn.*", "*norm?.out"):
        got = trace[glob]
        want = {k: trace.step(k).values for k in names if fnmatch.fnmatchcase(k, glob)}
        assert want and list(got) == list(want), glob  # every match, in the trace's order
        assert all(_same(got[k], want[k]) for k in want), glob
    assert isinstance(trace["logits"], np.ndarray)  # an exact name: its array, as before
    # the run is the same mapping
    assert list(run) == list(trace) and len(run) == len(trace) and "logits" in run
    assert list(run["decoder.0.*.A"]) == list(trace["decoder.0.*.A"])
    assert _same(run["logits"], trace["logits"]) and dict(run.items()).keys() == trace.keys()


def test_an_unknown_name_or_a_glob_that_matches_nothing_is_one_line(runs):
    trace = runs[CHAR].trace
    with pytest.raises(TraceError) as e:
        trace["decoder.0.self_attn.head0.a"]
    assert str(e.value).startswith("no step named 'decoder.0.self_attn.head0.a' in this trace")
    with pytest.raises(TraceError) as e:
        runs[CHAR]["encoder.*.A"]
    assert str(e.value) == "no step name matches 'encoder.*.A' in this trace; see tr.names()"
    assert trace.get("nope") is None and "\n" not in str(e.value)


def test_a_name_recorded_twice_is_one_key_its_first_values():
    with tracing() as trace:
        tap("x", np.zeros(2))
        tap("y", np.ones(3))
        tap("x", np.ones(2))
    assert len(trace.steps) == 3 and len(trace) == 2 and list(trace) == ["x", "y"]
    assert _same(trace["x"], np.zeros(2)) and list(trace["?"]) == ["x", "y"]


@pytest.mark.parametrize("path", list(TEXTS))
def test_the_repr_of_a_trace_and_a_run_fits_one_screen(runs, path):
    run = runs[path]
    for shown in (repr(run.trace), repr(run)):
        lines = shown.splitlines()
        assert len(shown) < 2000 and len(lines) <= 12 and max(map(len, lines)) <= 200, shown
        assert path in lines[0] and repr(TEXTS[path]) in lines[0]
        assert f"{len(run.trace)} steps, {byte_size(run.trace.nbytes)}" in lines[0]
        assert run.trace.steps[0].name in shown and "array" not in shown


def test_the_repr_stays_short_for_the_longest_text():
    m = glassformer.load(CHAR)
    text = "x" * (m.cfg.max_len - 1)
    run = m.run(text)
    for shown in (repr(run.trace), repr(run)):
        assert len(shown) < 2000 and len(shown.splitlines()) <= 12, shown


# -- each result is the JSON its command writes -------------------------------------------------


def test_diff_s_json_is_the_result_s(capsys):
    m = glassformer.load(CHAR)
    out, _ = cli(capsys, "diff", CHAR, "To be", "--engines", "reference,reference", "--json", "-")
    r = engine_diff.diff(m, "To be", ("reference", "reference"))
    assert out == r.to_json() + "\n"  # byte for byte
    assert json.loads(out) == r.to_dict()


def _results(classifier):  # noqa: F811 (the fixture's value)
    char, enes, clf = glassformer.load(CHAR), glassformer.load(ENES), glassformer.load(classifier)
    generated = char.run("To be", decoding=glassformer.Decoding.settle(max_new_tokens=3))
    _, record = char.record("The cat ", steps="decoder.0.out", top_tokens=2, max_new_tokens=3)
    return [
        char.lens("To be or", dla="t", versus="e"),
        char.attribute("To be", max_new_tokens=2),
        char.ablate(generated, ["decoder.0.self_attn.head0", "decoder.1.ffn"]),
        enes.patch("Hello world.", "Good night."),
        clf.classify("to be or not"),
        record,
        char.result(char.run("To be")),
        char.result(generated),
        clf.result(clf.run("to be or not")),
        engine_diff.diff(char, "To be", ("reference", "torch")),
    ]


def test_a_result_shows_a_few_lines_and_a_small_table(classifier):  # noqa: F811
    kinds = set()
    for r in _results(classifier):
        kinds.add(type(r).__name__)
        shown = repr(r)
        lines = shown.splitlines()
        assert lines[0].startswith(f"<glassformer.{type(r).__name__} ") and shown.endswith(">")
        assert len(shown) < 1000 and len(lines) <= 8, shown
        html = r._repr_html_()
        assert html.count("<tr>") == len(lines) - 1 and "<table>" in html
        # what the command line wrote before results were typed: json.dumps(the dict, UTF-8 as is)
        assert r.to_json() == json.dumps(r.to_dict(), ensure_ascii=False)
    assert kinds == {
        *("Lens", "Attribution", "Ablation", "Patching", "Classification", "Record"),
        *("NextToken", "GeneratedText", "PredictedClass", "DiffResult"),
    }


def test_an_optional_field_that_is_none_has_no_key():
    row = dict(position=0, after_token="a", predicted="b", predicted_ablated="b", changed=False)
    rows = [row | {"max_logit_change": 0.5}]
    a = Rs.Ablation(["decoder.0.ffn"], ["decoder.0.ffn.out"], rows)
    assert list(a.to_dict()) == ["ablated", "steps", "positions"]
    a.text, a.text_ablated = "ab", "ac"
    assert list(a.to_dict()) == ["ablated", "steps", "positions", "text", "text_ablated"]
    p = Rs.Patching("clean", "logit[a] - logit[b]", {}, 1, "a")
    assert list(p.to_dict()) == ["clean", "position", "after_token", "metric", "tables"]
    # a classifier's (the keys in the order `explain --json` writes them): no positions
    classes = [{"label": "yes", "before": 0.75, "after": 0.5, "change": -0.25}]
    a = Rs.Ablation(["encoder.0.ffn"], ["encoder.0.ffn.out"], classes=classes, notes=["n"])
    assert list(a.to_dict()) == ["ablated", "steps", "classes", "notes"]
    p = Rs.Patching("clean", "logit[yes] - logit[no]", {}, classes=classes)
    assert list(p.to_dict()) == ["clean", "metric", "tables", "classes"]
    assert "class yes: 0.7500 -> 0.5000" in repr(a) and "class yes" in repr(p)
    c = Rs.Classification.of(["yes", "no"], np.array([0.25, 0.75]))
    every = '"probabilities": {"yes": 0.25, "no": 0.75}'
    assert c.to_json() == '{"label": "no", "class": 1, "probability": 0.75, ' + every + "}"
