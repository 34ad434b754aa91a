"""Faithfulness, shown (issue 40, point 5). Oracles: every point of every curve is the metric of a
run made independently (a component removed by zeroing its weights, W_O's columns or W2, not through
the interventions the report uses; a token by its own replacement of the embedding X); k = 0 is
the clean run, full deletion the run whose tokens are all the baseline token; the attribution
graph's node value is exactly what removing that component takes from the logit in the model
frozen at this input (A, norm scales and gates patched from the clean run); integrated gradients
(PyTorch) add up to what removing every token changes in the reference engine. Decoders,
encoder-decoders, classifiers, the Llama family; the command line's files and its one-line
refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_qk import LLAMA, SMALL

from glassformer import load, weights
from glassformer import reference as R
from glassformer.config import Config
from glassformer.inspect import circuit as C
from glassformer.inspect import faithfulness as F
from glassformer.inspect import interventions as I
from glassformer.inspect import lens as L
from glassformer.trace import intervene

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-10
IDS, SRC = [1, 5, 3, 7, 2, 9, 4], [4, 2, 8, 11, 6]
MODELS = {
    "decoder": dict(arch="decoder", n_decoder_layers=2, bias=True, activation="gelu_tanh"),
    "encoder-decoder": dict(arch="encoder-decoder", n_encoder_layers=1, n_decoder_layers=2),
    "classifier": dict(arch="encoder", n_encoder_layers=2, bias=True, n_classes=3),
    "llama": LLAMA | dict(n_decoder_layers=2),
    "attention only": dict(arch="decoder", n_decoder_layers=2, bias=True, d_ff=0),
}


def setting(name: str):
    cfg = Config(**(SMALL | MODELS[name]))
    p = weights.init(cfg, seed=7, std=0.4)
    inp = IDS if cfg.arch != "encoder-decoder" else (SRC, IDS)
    return cfg, p, inp


def forward(p, cfg, inp):
    if cfg.arch == "encoder":
        return R.classify(p, cfg, list(inp))[None]
    src, ids = inp if isinstance(inp, tuple) else (None, inp)
    return R.forward(p, cfg, list(ids), src_ids=src)


def built(name: str, baseline: int | None, position: int = -1):
    """(cfg, params, input, metric, token report, component report) of a random model."""
    cfg, p, inp = setting(name)
    run = F.reference_run(p, cfg)
    logits, trace = I.record(run, inp)
    at = 0 if cfg.arch == "encoder" else position
    token, versus = int(logits[at].argmax()), 1
    metric = I.logit_diff(token, versus, at)
    stack = "decoder" if cfg.arch == "decoder" else "encoder"
    n = len(IDS) if cfg.arch != "encoder-decoder" else len(SRC)
    if cfg.arch == "decoder":
        n = position % len(IDS) + 1
    names = [str(i) for i in range(n)]
    tokens = F.token_units(run, inp, stack, n, names, baseline)
    parts = F.component_units(trace, cfg)
    G = C.graph(trace, p, cfg, token, versus, at)
    said = {"attention": F.attention_scores(trace, cfg, stack, at, n)}
    rollout = F.rollout_scores(trace, cfg, at, n)
    if rollout is not None:
        said["attention_rollout"] = rollout
    said["attribution_graph"] = F.graph_scores(G, tokens)
    scores = {"attribution_graph": F.graph_scores(G, parts)}
    if cfg.has_decoder:
        d = L.direct_logit_attribution(trace, p, cfg, token, versus, at)
        scores["direct_logit_attribution"] = F.dla_scores(d, parts)
    by_tokens = F.report(F.Runner(run, inp, metric, tokens), said, seed=3)
    by_parts = F.report(F.Runner(run, inp, metric, parts), scores, 3, ("attribution_graph",))
    return cfg, p, inp, metric, by_tokens, by_parts


def without_components(p: dict, cfg: Config, names: list[str]) -> dict:
    """The weights with these heads (W_O's columns of the head) and FFNs (W2 and its bias)
    zeroed: the same as zeroing their outputs, made without any intervention."""
    q = dict(p)
    D = cfg.head_dim
    for name in names:
        stack, layer, kind, *head = name.split(".")
        pre = f"{stack}.layers.{layer}.{kind}"
        if kind == "ffn":
            q[f"{pre}.w2.weight"] = np.zeros_like(p[f"{pre}.w2.weight"])
            if f"{pre}.w2.bias" in p:
                q[f"{pre}.w2.bias"] = np.zeros_like(p[f"{pre}.w2.bias"])
        else:
            h = int(head[0].removeprefix("head"))
            W = q[f"{pre}.o.weight"].copy()
            W[:, h * D : (h + 1) * D] = 0.0
            q[f"{pre}.o.weight"] = W
    return q


def with_tokens_replaced(p, cfg, inp, stack: str, positions, baseline: int | None):
    """The logits with the token embeddings X at `positions` set to the baseline's row (zero, or
    that token's embedding, × √C where the model scales it)."""
    row = np.zeros(cfg.d_model)
    if baseline is not None:
        key = "decoder.tok_embed.weight" if f"{stack}.tok_embed.weight" not in p else None
        row = p[key or f"{stack}.tok_embed.weight"][baseline] * (
            np.sqrt(cfg.d_model) if cfg.embed_scale else 1.0
        )

    def put(X):
        X = np.array(X)
        X[list(positions)] = row
        return X

    with intervene({f"{stack}.X": put}):
        return forward(p, cfg, inp)


@pytest.mark.parametrize("name", ["decoder", "encoder-decoder", "classifier"])
def test_every_point_is_a_run_with_those_units_removed(name):
    baseline = 3 if name != "classifier" else None
    cfg, p, inp, metric, tokens, parts = built(name, baseline, position=-1)
    clean = metric(forward(p, cfg, inp))
    assert tokens.clean == parts.clean == clean  # k = 0: the clean run
    stack = tokens.units.stack
    for report in (tokens, parts):
        assert [c.method for c in report.curves][-1] == F.RANDOM
        for c in report.curves:
            n = len(c.order)
            assert sorted(c.order) == list(range(n)) and len(c.deletion) == n + 1
            for k in sorted({0, 1, n // 2, n - 1, n}):
                for removed, got in ((c.order[:k], c.deletion[k]), (c.order[k:], c.insertion[k])):
                    if report is parts:
                        names = [report.units.names[i] for i in removed]
                        want = metric(forward(without_components(p, cfg, names), cfg, inp))
                    else:
                        want = metric(with_tokens_replaced(p, cfg, inp, stack, removed, baseline))
                    assert abs(got - want) <= TOL * max(1.0, abs(want)), (c.method, k)
    # full deletion of the tokens: every token the baseline token, run as such
    if baseline is not None:
        if cfg.arch == "decoder":
            alone = [baseline] * len(IDS)
        else:
            alone = ([baseline] * len(SRC), IDS)
        assert abs(tokens.empty - metric(forward(p, cfg, alone))) <= TOL
    # the order is the scores', the most supporting first; the areas are the normalised curves'
    for c in tokens.curves[:-1] + parts.curves[:-1]:
        assert np.all(np.diff(np.asarray(c.scores)[c.order]) <= 0)
    if cfg.has_decoder:  # the last FFN has no reader but the final norm: DLA's share is its value
        graph, dla = (c.scores for c in parts.curves[:2])
        last = parts.units.names.index(f"decoder.{cfg.n_decoder_layers - 1}.ffn")
        assert dla[last] != 0 and abs(dla[last] - graph[last]) <= TOL
    c = parts.curves[0]
    y = (np.asarray(c.deletion) - parts.empty) / (parts.clean - parts.empty)
    assert c.deletion_area == pytest.approx(np.trapezoid(y, dx=1 / (len(y) - 1)), abs=1e-12)


def test_attention_rollout_is_the_product_of_the_layers_averaged_maps():
    """Rollout by its definition, layer by layer from the trace: row `position` of
    (Ā_2 + I)/2 · (Ā_1 + I)/2; each row sums to 1 (every factor is a stochastic matrix); a
    classifier's the mean of the rows; none for an encoder-decoder."""
    for name, position in (("decoder", 4), ("classifier", 0)):
        cfg, p, inp = setting(name)
        _, trace = I.record(F.reference_run(p, cfg), inp)
        stack = "decoder" if cfg.has_decoder else "encoder"
        maps = [
            np.mean([trace[f"{stack}.{i}.self_attn.head{h}.A"] for h in range(4)], axis=0)
            for i in range(2)
        ]
        eye = np.eye(len(IDS))
        whole = 0.25 * (maps[1] + eye) @ (maps[0] + eye)
        want = whole[position] if cfg.has_decoder else whole.mean(0)
        got = F.rollout_scores(trace, cfg, position, len(IDS))
        assert np.abs(got - want).max() <= 1e-15 and abs(got.sum() - 1) <= 1e-12
    cfg, p, inp = setting("encoder-decoder")
    assert F.rollout_scores(I.record(F.reference_run(p, cfg), inp)[1], cfg, 0, 5) is None


@pytest.mark.parametrize("name", ["llama", "attention only"])
def test_the_graph_is_exact_where_the_model_is_frozen(name):
    """A component's graph value is what removing it takes from the logit in the model frozen at
    this input: A, the norms' scales (RMSNorm's rms, LayerNorm's std; LayerNorm's mean stays
    live, it is linear) and SwiGLU's gates patched from the clean run. Its `predicted` deletion
    curve's first step is that run."""
    cfg, p, inp, metric, _, parts = built(name, None)
    _, clean_trace = I.record(F.reference_run(p, cfg), inp)
    frozen = I.patch(clean_trace, ["*.A", "*.rms" if cfg.norm_kind == "rmsnorm" else "*.std"])
    if cfg.ffn_kind == "gated":
        frozen |= I.patch(clean_trace, "*.gate")
    graph = parts.curves[[c.method for c in parts.curves].index("attribution_graph")]
    for i in graph.order[:3]:
        zeroed = without_components(p, cfg, [parts.units.names[i]])
        with intervene(frozen):
            got = metric(forward(zeroed, cfg, inp))
        want = parts.clean - graph.scores[i]
        assert abs(got - want) <= TOL * max(1.0, abs(want)), parts.units.names[i]
    first = without_components(p, cfg, [parts.units.names[graph.order[0]]])
    with intervene(frozen):
        got = metric(forward(first, cfg, inp))
    assert graph.predicted[1] == pytest.approx(got, abs=TOL)


# -- the Model and the command line ----------------------------------------------------------------


@pytest.fixture(scope="module")
def char_lm():
    return load(ROOT / "models" / "char-lm")


@pytest.fixture(scope="module")
def told(char_lm):
    return char_lm.faithfulness("ROMEO: B", target="u", versus="a", steps=32)


def test_a_decoder_s_report_and_integrated_gradients_completeness(char_lm, told):
    d = told.to_dict()
    tokens, parts = d["tokens"], d["components"]
    logits = R.forward(char_lm.params, char_lm.cfg, char_lm.encode("ROMEO: B"))[-1]
    ids = char_lm.encode("ua")
    assert tokens["clean"] == pytest.approx(logits[ids[0]] - logits[ids[1]], abs=TOL)
    methods = [c["method"] for c in tokens["curves"]]
    assert methods == [
        "integrated_gradients",
        "gradient_x_input",
        "attention",
        "attention_rollout",
        "attribution_graph",
        "random",
    ]
    assert [c["method"] for c in parts["curves"]] == [
        "direct_logit_attribution",
        "attribution_graph",
        "random",
    ]
    assert len(parts["names"]) == 4 * (4 + 1)  # every head and FFN of char-lm's 4 blocks
    ig = np.asarray(tokens["curves"][0]["scores"])
    change = tokens["clean"] - tokens["empty"]  # the reference engine's, every token at zero
    # the PyTorch engine's integral over 32 nodes (exact GELU): 2e-3 of the change, measured
    assert abs(ig.sum() - change) < 5e-3 * abs(change)
    assert json.loads(told.to_json()) == json.loads(json.dumps(d))
    assert "integrated gradients" in repr(told) and "deletion" in repr(told)


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    """A tiny pre-LN encoder-decoder with a character tokenizer, seeded."""
    from glassformer.cli import main

    d = tmp_path_factory.mktemp("encdec")
    corpus = d / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 5)
    sets = ["arch=encoder-decoder", "norm=pre", "n_encoder_layers=1", "n_decoder_layers=1"]
    args = ["init", str(d / "m"), "--preset", "tiny", "--tokenizer", "char", "--seed", "2"]
    assert main([*args, "--corpus", str(corpus), *[x for s in sets for x in ("--set", s)]]) == 0
    return load(d / "m")


def test_an_encoder_decoder_is_measured_by_its_source_tokens(translator):
    """The tokens are the source's, removed in the encoder; integrated gradients (PyTorch, over
    the source) add up to what removing them all changes in the reference engine."""
    m = translator
    f = m.faithfulness("to be", decoder="or no", position=3, steps=128)
    src, ids = m.encode("to be"), m.runtime.bos() + m.encode("or no")
    logits = R.forward(m.params, m.cfg, ids, src_ids=src)[3]
    assert f.tokens["clean"] == pytest.approx(logits.max(), abs=TOL)  # the top token's logit
    assert f.tokens["stack"] == "encoder" and len(f.tokens["names"]) == len(src)
    with intervene({"encoder.X": lambda X: np.zeros_like(X)}):  # every source embedding zero
        empty = R.forward(m.params, m.cfg, ids, src_ids=src)[3, logits.argmax()]
    assert f.tokens["empty"] == pytest.approx(empty, abs=TOL)
    ig = sum(f.tokens["curves"][0]["scores"])
    assert ig == pytest.approx(f.tokens["clean"] - empty, rel=1e-2)  # ReLU: a slow quadrature
    assert any(n.startswith("encoder.") for n in f.components["names"])


def test_a_post_ln_classifier_is_measured_by_its_tokens(seeded_classifier):
    m = load(seeded_classifier)
    f = m.faithfulness("to be or not", target="no", versus="yes")
    logits = m.run("to be or not", quiet=True).output
    assert f.tokens["clean"] == pytest.approx(logits[1] - logits[0], abs=TOL)
    assert [c["method"] for c in f.tokens["curves"]] == ["attention", "attention_rollout", "random"]
    assert f.components is None and any("post-LN" in n for n in f.notes)


def test_the_command_writes_json_html_and_png(capsys, tmp_path, told):
    from glassformer.cli import main

    char_lm = str(ROOT / "models" / "char-lm")
    out, page, png = tmp_path / "f.json", tmp_path / "f.html", tmp_path / "f.png"
    args = ["faithfulness", char_lm, "ROMEO: B", "--target", "u", "--versus", "a", "--steps", "32"]
    assert main([*args, "--json", str(out), "--html", str(page), "--png", str(png)]) == 0
    assert json.loads(out.read_text()) == json.loads(told.to_json())  # the Model's result
    html = page.read_text()
    assert html.count("<polyline") >= 2 * (6 + 3) and "is the most faithful" in html
    assert "http" not in html.split("</style>", 1)[1].replace("http://www.w3.org/2000/svg", "")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["attribute", char_lm, "ROM", "--faithfulness", "--steps", "8"]) == 0
    text = capsys.readouterr().out
    assert "input tokens (3), each removed as a token" in text
    assert "direct logit attribution" in text and "logit " in text


@pytest.mark.parametrize(
    "args, says",
    [
        (["--position", "99"], "--position 99: the model reads"),
        (["--target", "ab"], "--target 'ab' is 2 tokens"),
        (["--decoder", "x"], "--decoder is the decoder text of an encoder-decoder"),
        (["--steps", "0"], "--steps must be in [1, 1024], got 0"),
        (["--baseline", "zzz"], "--baseline 'zzz' is not a piece of the vocabulary"),
        (["--png", "-"], "--png writes a PNG file: give a file name, not '-'"),
        (["--seed", "-1"], "seed"),
    ],
)
def test_bad_input_gets_one_line(capsys, args, says):
    from glassformer.cli import main

    assert main(["faithfulness", str(ROOT / "models" / "char-lm"), "ROMEO", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_attribute_faithfulness_refuses_what_it_does_not_read(capsys):
    from glassformer.cli import main

    char_lm = str(ROOT / "models" / "char-lm")
    for args, says in [
        (["--faithfulness", "--max-new-tokens", "3"], "drop --max-new-tokens"),
        (["--png", "x.png"], "--png draws --faithfulness's curves"),
    ]:
        assert main(["attribute", char_lm, "ROMEO", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
