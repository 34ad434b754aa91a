"""The exact attribution graph (issue 40, point 1). Oracles: the model's own logit, recorded by each
engine (the edges into the logit add up to it within 1e-10), the recorded output of every head and
FFN (the edges into a node add up to its value g·o, o from the trace: a wrong frozen map breaks
this), and the chain rule (the edges out of a node add up to its value too); for decoders,
encoder-decoders (source tokens reach the logit through cross-attention), classifiers, the Llama
family (RoPE, GQA, RMSNorm, SwiGLU) and the shipped models. Post-LN is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_qk import CONFIGS, SMALL, reference_trace, torch_trace

from glassformer import load, weights
from glassformer.config import Config
from glassformer.errors import GlassformerError
from glassformer.inspect.circuit import graph

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-10
MODELS = CONFIGS | {"encoder classifier": CONFIGS["encoder"] | dict(n_classes=3)}
MODELS.pop("encoder")


def check(G, want: float) -> None:
    n = len(G.names)
    scale = max(1.0, abs(want))
    assert abs(G.logit - want) <= TOL * scale
    assert abs(G.edges[n + 1, : n + 1].sum() - want) <= TOL * scale  # completeness
    assert G.error <= TOL * scale  # every node's incoming edges: its value
    outgoing = G.edges[:, :n].sum(0)
    assert np.max(np.abs(outgoing - G.values[:n])) <= TOL * scale  # and its outgoing edges


@pytest.mark.parametrize("engine", [reference_trace, torch_trace], ids=["reference", "torch"])
@pytest.mark.parametrize("name", MODELS)
def test_the_graph_adds_up_to_the_logit(name, engine):
    cfg = Config(**(SMALL | MODELS[name]))
    p = weights.init(cfg, seed=5, std=0.4)
    trace = engine(cfg, p)
    logits = np.asarray(trace["logits"], dtype=np.float64)
    if cfg.n_classes:
        logits = logits.reshape(-1)
        G = graph(trace, p, cfg, 2, versus=0)
        check(G, logits[2] - logits[0])
        assert any(s == "encoder" and k == "source" for s, k in zip(G.stacks, G.kinds, strict=True))
        return
    for position, token, versus in [(-1, 3, None), (2, 7, 1), (0, 11, None)]:
        G = graph(trace, p, cfg, token, versus=versus, position=position)
        row = logits[position]
        check(G, row[token] - (0.0 if versus is None else row[versus]))
    if cfg.arch == "encoder-decoder":  # a source token's edge into a cross-attention head
        n = len(G.names)
        src = [i for i in range(n) if G.stacks[i] == "encoder" and G.kinds[i] == "source"]
        cross = [i for i in range(n) if ".cross_attn.head" in G.names[i]]
        assert np.abs(G.edges[np.ix_(cross, src)]).max() > 0


@pytest.mark.parametrize("name", MODELS)
def test_ffn_neurons_as_nodes_keep_the_graph_exact(name):
    """`neurons=k`: each FFN node splits into its k units of largest effect and the rest; still
    exact (the incoming edges of each unit add up to g·W2[:, f]·hidden_f), the units and the rest
    add up to the FFN's value, and the k chosen are the largest of all F units' effects."""
    cfg = Config(**(SMALL | MODELS[name]))
    p = weights.init(cfg, seed=5, std=0.4)
    trace = reference_trace(cfg, p)
    token, versus = (2, 0) if cfg.n_classes else (3, 1)
    whole = graph(trace, p, cfg, token, versus=versus)
    split = graph(trace, p, cfg, token, versus=versus, neurons=2)
    check(split, whole.logit)
    every = graph(trace, p, cfg, token, versus=versus, neurons=cfg.d_ff)
    check(every, whole.logit)
    value = dict(zip(whole.names, whole.values[: len(whole.names)], strict=True))
    units = [i for i, k in enumerate(split.kinds) if k == "neuron"]
    assert units and all(split.values[i] != 0 for i in units)
    for i, n in enumerate(split.names):
        if ".ffn.rest@" not in n:
            continue
        ffn, at = n.replace(".ffn.rest@", ".ffn@"), split.positions[i]
        unit = n.split(".rest@")[0] + ".hidden:"
        mine = [j for j in units if split.names[j].startswith(unit) and split.positions[j] == at]
        assert 1 <= len(mine) <= 2
        total = split.values[i] + sum(split.values[j] for j in mine)
        assert total == pytest.approx(value[ffn], abs=1e-12)
        others = [
            abs(every.values[j])
            for j, m in enumerate(every.names)
            if m.startswith(unit) and every.positions[j] == at and m not in split.names
        ]
        assert min(abs(split.values[j]) for j in mine) >= max(others, default=0.0)
        assert abs(every.values[every.names.index(n)]) < 1e-12  # all F units: nothing rests


def test_pruning_keeps_the_large_nodes_and_says_the_share():
    m = load(ROOT / "models" / "en-es")
    run = m.run("Hello world.", quiet=True)
    logits = np.asarray(run.trace["logits"])
    token = int(np.argmax(logits[2]))
    G = graph(run.trace, m.params, m.cfg, token, position=2)
    check(G, logits[2, token])
    P = G.pruned(0.05)
    assert P.kept["of"] == len(G.names) and 0 < P.kept["nodes"] < len(G.names)
    assert all(abs(v) >= 0.05 * abs(G.logit) for v in P.values[: len(P.names)])
    direct = P.edges[-1].sum() / G.logit
    assert P.kept["share"] == pytest.approx(direct)
    full = G.pruned(0.0)
    assert full.kept["share"] == pytest.approx(1.0, abs=1e-12)
    d = P.to_dict()
    assert d["nodes"][-1]["name"] == "logit" and d["edges"]


def test_the_shipped_char_lm():
    m = load(ROOT / "models" / "char-lm")
    run = m.run("ROMEO: But soft", quiet=True)
    logits = np.asarray(run.trace["logits"])
    token = int(np.argmax(logits[-1]))
    check(graph(run.trace, m.params, m.cfg, token), logits[-1, token])


def test_what_has_no_exact_graph_is_refused():
    cfg = Config(**(SMALL | MODELS["decoder"] | dict(norm="post")))
    p = weights.init(cfg, seed=5, std=0.4)
    with pytest.raises(GlassformerError, match="needs a pre-LN model"):
        graph(reference_trace(cfg, p), p, cfg, 1)
    cfg = Config(**(SMALL | CONFIGS["encoder"]))
    p = weights.init(cfg, seed=5, std=0.4)
    with pytest.raises(GlassformerError, match="this encoder has no head"):
        graph(reference_trace(cfg, p), p, cfg, 1)


# -- Model.circuit and `glassformer circuit` ---------------------------------------------------


def test_model_circuit_explains_the_top_prediction_with_tokens_named():
    m = load(ROOT / "models" / "en-es")
    c = m.circuit("Hello world.", position=2, threshold=0.02)
    g = c.graph
    assert c.token == "␣el" and g["target"] == "logit[445] at position 2"
    assert g["error"] < TOL and 0 < g["kept"]["nodes"] < g["kept"]["of"]
    named = {n["name"]: n.get("token") for n in g["nodes"]}
    assert named["encoder.token@2"] == "␣world" and named["decoder.token@2"] == "ola"
    d = m.circuit("Hello world.", position=2, target="la", versus="el").graph
    run = m.run("Hello world.", quiet=True)
    logits = np.asarray(run.trace["logits"])[2]
    la, el = m.tokenizer.encode("la")[0], m.tokenizer.encode("el")[0]
    assert d["logit"] == pytest.approx(logits[la] - logits[el], abs=1e-12)
    by_id = m.circuit("Hello world.", position=2, target=f"#{la}", versus=f"#{el}").graph
    assert by_id["logit"] == d["logit"]  # a token by its id: #437


def test_a_classifier_explains_a_class_by_name(seeded_classifier, tmp_path):
    m = load(seeded_classifier)  # post-LN: refused, with why
    with pytest.raises(GlassformerError, match="needs a pre-LN model"):
        m.circuit("to be or not")
    cfg, _, tok = weights.load(seeded_classifier)
    cfg = Config(**(cfg.to_dict() | dict(norm="pre")))
    params = weights.init(cfg, seed=1)
    weights.save(tmp_path / "pre", cfg, params, tokenizer=tok, labels=["yes", "no"])
    m = load(tmp_path / "pre")
    c = m.circuit("to be or not", target="no", versus="yes", threshold=0.0)
    assert c.token == "no" and c.versus == "yes"
    assert c.graph["kept"]["share"] == pytest.approx(1.0, abs=1e-12)
    logits = m.run("to be or not", quiet=True).output  # the reference's class logits
    assert c.graph["logit"] == pytest.approx(logits[1] - logits[0], abs=1e-12)
    from glassformer.explain.graph_svg import graph_svg  # the mean's logit is drawn centred

    assert graph_svg(c.graph).count("<circle") + graph_svg(c.graph).count("<rect") > 3
    with pytest.raises(GlassformerError, match="'maybe' is not a class: choose one of yes, no"):
        m.circuit("to be or not", target="maybe")


def test_the_command_prints_the_graph_and_writes_json(capsys, tmp_path):
    from glassformer.cli import main

    out = tmp_path / "graph.json"
    char_lm = str(ROOT / "models" / "char-lm")
    assert main(["circuit", char_lm, "ROMEO: But", "--json", str(out)]) == 0
    said = capsys.readouterr()
    assert "wrote the graph of" in said.out + said.err
    import json

    d = json.loads(out.read_text())
    assert d["graph"]["nodes"][-1]["name"] == "logit" and d["graph"]["error"] < TOL
    assert main(["circuit", str(ROOT / "models" / "char-lm"), "ROMEO: But"]) == 0
    text = capsys.readouterr().out
    assert "every node's incoming edges add up to its value" in text
    assert "nodes by their total effect on the logit:" in text
    assert main(["circuit", char_lm, "ROMEO: But", "--neurons", "3", "--threshold", "0"]) == 0
    text = capsys.readouterr().out
    assert ".ffn.hidden:" in text and ".ffn.rest@" in text and "carry 100.0% of the logit" in text


@pytest.mark.parametrize(
    "args, says",
    [
        (["--threshold", "2"], "--threshold must be a share of |logit| in [0, 1], got 2"),
        (["--threshold", "-1"], "--threshold -1.0: a share of the logit in 0..1"),
        (["--decoder", "x"], "--decoder is the decoder text of an encoder-decoder"),
        (["--position", "99"], "--position 99: the model reads"),
        (["--target", "ab"], "--target 'ab' is 2 tokens"),
        (["--neurons", "-1"], "--neurons must be at least 0, got -1"),
        (["--target", "#999"], "--target '#999': the vocabulary has 69 tokens, #0..#68"),
    ],
)
def test_bad_input_gets_one_line(capsys, args, says):
    from glassformer.cli import main

    assert main(["circuit", str(ROOT / "models" / "char-lm"), "ROMEO", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_the_page_names_each_node_with_its_token(capsys):
    from glassformer.cli import main

    char_lm = str(ROOT / "models" / "char-lm")
    assert main(["circuit", char_lm, "ROMEO: But", "--html", "-"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and "every node's incoming edges add up" in page
    assert "decoder.token@0 (R)" in page and "http" not in page.split("</style>", 1)[1]


def test_the_page_draws_every_kept_node_and_edge_where_it_belongs():
    """The drawn graph (explain/graph_svg.py), read back as XML: one shape per kept node and one
    path per edge, each titled with its exact value; a node stands in the column of its position's
    token and above the sources' row, the logit above all."""
    import xml.etree.ElementTree as ET

    from glassformer.explain.graph_svg import graph_svg

    m = load(ROOT / "models" / "en-es")
    g = m.circuit("Hello world.", position=2, threshold=0.05).graph
    svg = ET.fromstring(graph_svg(g))
    ns = "{http://www.w3.org/2000/svg}" if svg.tag.startswith("{") else ""
    shapes = [
        e
        for e in svg.iter()
        if e.tag in (ns + "circle", ns + "rect") and e.find(ns + "title") is not None
    ]
    titles = {e.find(ns + "title").text.split(":")[0].split(" (")[0]: e for e in shapes}
    assert set(titles) == {n["name"] for n in g["nodes"]}
    paths = [e for e in svg.iter(ns + "path")]
    assert len(paths) == len(g["edges"])
    said = sorted(float(p.find(ns + "title").text.rsplit(": ", 1)[1]) for p in paths)
    assert said == pytest.approx(sorted(e["weight"] for e in g["edges"]), rel=1e-5)
    x = lambda e: float(e.get("cx") or float(e.get("x")) + float(e.get("width")) / 2)  # noqa: E731
    y = lambda e: float(e.get("cy") or float(e.get("y")) + float(e.get("height")) / 2)  # noqa: E731
    labels = {}
    for t in svg.iter(ns + "text"):
        if t.get("class") == "tok":
            stack, _, p = t.find(ns + "title").text.split()
            labels[stack, int(p)] = float(t.get("x"))
    assert [p for s, p in labels if s == "decoder"] == [0, 1, 2]  # later ones cannot reach it
    floor = max(y(titles[n["name"]]) for n in g["nodes"] if n["kind"] == "source")
    for n in g["nodes"]:
        if n["position"] >= 0:
            assert abs(x(titles[n["name"]]) - labels[n["stack"], n["position"]]) <= 40, n
            assert n["kind"] == "source" or y(titles[n["name"]]) < floor
    assert y(titles["logit"]) < min(y(e) for k, e in titles.items() if k != "logit")
