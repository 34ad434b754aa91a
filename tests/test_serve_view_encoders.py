"""The explorer's float32 view of encoder-decoders and encoders (issue 39 point 4), as of decoders
(tests/test_serve_view.py): a translator (a small random one made here, and the shipped en-es),
a classifier and a sentence embedder (small random encoders made here).

Oracles: the float64 reference engine's own trace of the same input, served with `--view
reference` (every attention map within 1e-5, every other step within FLOAT32_REL of its largest
value: float32 rounding; the translation's words, the classes and the tokens equal), and what a
server without the view answers (interventions, patching and the exports are the reference's
own numbers: equal). What the page draws first is recorded by the first pass, every other step
by name and shape only until read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")

from glassformer import weights  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.model import Model  # noqa: E402
from glassformer.serve import Explorer, Registry  # noqa: E402
from glassformer.serve import runs as serve_runs  # noqa: E402
from glassformer.serve.fidelity import FLOAT32_REL  # noqa: E402
from glassformer.tokenizer import CharTokenizer  # noqa: E402
from glassformer.trace import Deferred  # noqa: E402

EN_ES = Path(__file__).resolve().parents[1] / "models" / "en-es"
VIEWS = ("float32", "reference")
MAP_ATOL = 1e-5  # an attention weight (in 0..1) of the view against the reference's
TEXT, OTHER = "the cat sat on the mat", "the dog ran to the log"  # (as many tokens)
TEXTS = {"en-es": ("Where is the station?", "Where is the airport?")}  # (as many tokens)
SMALL = dict(d_model=32, n_heads=4, d_ff=64, max_len=40)
KINDS = {  # a small random model of each kind (BERT's options for the classifier)
    "translator": dict(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2),
    "classifier": dict(arch="encoder", n_encoder_layers=2, n_classes=3, type_vocab_size=2,
                       embed_norm=True, norm="post", activation="gelu"),
    "embedder": dict(arch="encoder", n_encoder_layers=2),
}  # fmt: skip


def small(folder, kind: str):
    tok = CharTokenizer.train(["abcdefghijklmnopqrstuvwxyz ."])
    cfg = Config(vocab_size=tok.vocab_size, **SMALL, **KINDS[kind])
    labels = ["sad", "calm", "glad"] if cfg.n_classes else None
    weights.save(folder, cfg, weights.init(cfg, seed=1, std=0.3), tokenizer=tok, labels=labels)
    return folder


@pytest.fixture(scope="module", params=["translator", "en-es", "classifier", "embedder"])
def served(request, tmp_path_factory):
    """(float32 view's Explorer, the reference's, model id, text, another text of as many
    tokens) of one model."""
    kind = request.param
    folder = EN_ES if kind == "en-es" else small(tmp_path_factory.mktemp(kind) / kind, kind)
    ex, ref = (Explorer(Registry([folder], walkthroughs=False), view=v) for v in VIEWS)
    return ex, ref, next(iter(ex.registry.entries)), *TEXTS.get(kind, (TEXT, OTHER))


def both(served, action: str, **more):
    ex, ref, mid, text, _ = served
    body = {"model": mid, "text": text} | more
    return getattr(ex, action)(body), getattr(ref, action)(body)


def test_the_view_records_what_the_page_draws_first_and_the_rest_by_name(served):
    """Every attention map (a translator's encoder self-, decoder self- and cross-attention),
    the logits or the embedding: stored by the first pass; every other step deferred (no values
    until read); the same step names as the PyTorch engine traced in full."""
    ex, ref, mid, text, _ = served
    s, r = both(served, "summary")
    assert s["engine"] == serve_runs.FLOAT32_VIEW and r["engine"] == serve_runs.REFERENCE
    assert s["view"] and not r["view"]
    maps = [a["name"] for a in s["attention"]]
    assert maps == [a["name"] for a in r["attention"]]
    want_sites = {"encoder.self_attn"}
    if s["arch"] == "encoder-decoder":
        want_sites |= {"decoder.self_attn", "decoder.cross_attn"}
    assert {a["site"] for a in s["attention"]} == want_sites
    _, run = ex.run({"model": mid, "text": text})
    out = "embedding" if s["output"]["kind"] == "embedding" else "logits"
    for name in [*maps, out]:
        assert run.trace.step(name).data is not None, f"{name}: not recorded by the first pass"
    deferred = [x for x in run.trace.steps if isinstance(x.derived, Deferred)]
    assert len(deferred) > 2 * len(maps) and run.trace.full is None
    _, ref_run = ref.run({"model": mid, "text": text})
    assert run.trace.nbytes < ref_run.trace.nbytes / 3  # what it stores until a step is read
    assert run.trace.labels == ref_run.trace.labels


def test_every_map_and_step_is_the_references_within_float32(served):
    """The maps within MAP_ATOL of the float64 reference's, the logits (or the embedding) and
    every deferred step, once read, within FLOAT32_REL of the step's largest |value|; the
    LayerNorm internals, which the fused op does not expose, are the only steps the view lacks."""
    ex, ref, mid, text, _ = served
    s, _ = both(served, "summary")
    _, run = ex.run({"model": mid, "text": text})
    _, ref_run = ref.run({"model": mid, "text": text})
    want = ref_run.trace
    for a in s["attention"]:
        got = run.trace[a["name"]]
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want[a["name"]], rtol=0, atol=MAP_ATOL, err_msg=a["name"])
    for step in run.trace.steps:
        v, w = np.asarray(step.values, np.float64), np.asarray(want[step.name], np.float64)
        assert v.shape == w.shape, step.name
        scale = max(float(np.abs(w[np.isfinite(w)]).max(initial=0)), 1e-30)
        np.testing.assert_allclose(v, w, rtol=0, atol=FLOAT32_REL * scale, err_msg=step.name)
    lacks = [n for n in want.names() if n not in run.trace]
    assert all(n.rsplit(".", 1)[1] in ("mean", "std", "var", "normalized", "rms") for n in lacks)


def test_the_output_and_tokens_are_the_references(served):
    """The same tokens; a translation's words (en-es's own), how it stopped and its first
    word's top tokens; a classifier's class by name; an embedding's first values within float32
    rounding."""
    s, r = both(served, "summary")
    assert s["tokens"] == r["tokens"] and s["unknown"] == r["unknown"]
    o, w = s["output"], r["output"]
    assert o.keys() == w.keys() and o["kind"] == w["kind"]
    if o["kind"] == "translation":
        assert (o["text"], o["greedy"], o["stopped_at_eos"]) == (
            w["text"],
            True,
            w["stopped_at_eos"],
        )
        assert [t["id"] for t in o["top"]] == [t["id"] for t in w["top"]]
        assert [t["p"] for t in o["top"]] == pytest.approx([t["p"] for t in w["top"]], abs=1e-6)
        if served[2] == "en-es":  # the shipped translator says what it always said
            assert o["text"] == "¿Dónde está la estación?" and o["stopped_at_eos"]
    elif o["kind"] == "class":
        assert (o["label"], o["class"]) == (w["label"], w["class"])
        assert o["probabilities"].keys() == w["probabilities"].keys() == {"sad", "calm", "glad"}
        assert o["probs"] == pytest.approx(w["probs"], abs=1e-6)
    else:
        assert o["dims"] == w["dims"] and o["first"] == pytest.approx(w["first"], abs=1e-6)


def test_the_pages_answers_on_a_view_run(served):
    """A step card (its values made when asked), an attention figure, the all-heads grid, the
    neuron view of a score, a translator's cross-attention over the source and a decoder input
    chosen on the Generate tab (its export too): answered from the view, equal to the
    reference's within float32 rounding."""
    ex, ref, mid, text, _ = served
    s, _ = both(served, "summary")
    _, run = ex.run({"model": mid, "text": text})
    card = next(n for n in run.trace.names() if n.endswith("ffn.out"))
    assert run.trace.step(card).data is None
    got, _ = both(served, "step", name=card)
    assert got["name"] == card and card in got["html"]
    last = s["attention"][-1]
    fig, fig_ref = both(served, "attention", name=last["name"])
    assert fig["shape"] == fig_ref["shape"] and fig["neuron"] == fig_ref["neuron"]
    grid, grid_ref = both(served, "heads", site=last["site"], layer=last["layer"])
    assert [h["name"] for h in grid["heads"]] == [h["name"] for h in grid_ref["heads"]]
    n, n_ref = both(served, "neuron", name=last["name"], i=1, j=2)
    assert n["A"] == pytest.approx(n_ref["A"], abs=MAP_ATOL)
    assert n["sum"] == pytest.approx(n_ref["sum"], rel=FLOAT32_REL, abs=FLOAT32_REL)
    assert n["q"] == pytest.approx(n_ref["q"], rel=FLOAT32_REL, abs=FLOAT32_REL)
    if s["arch"] != "encoder-decoder":
        return
    cross, cross_ref = both(served, "cross")
    assert cross["source"] == cross_ref["source"]
    np.testing.assert_allclose(cross["layers"], cross_ref["layers"], atol=MAP_ATOL)
    prefix = [t["id"] for t in s["tokens"]["decoder"][:3]]
    g, g_ref = both(served, "summary", target=prefix)
    assert g["engine"] == serve_runs.FLOAT32_VIEW and g["tokens"] == g_ref["tokens"]
    assert g["output"]["greedy"] is False and g["output"]["text"] == g_ref["output"]["text"]
    assert [a["shape"] for a in g["attention"]] == [a["shape"] for a in g_ref["attention"]]
    t, t_ref = both(served, "trace_json", target=prefix)  # the reference of that input
    assert "".join(t) == "".join(t_ref)


def heads_of(arch: str) -> list[dict]:
    head = {"stack": "encoder", "kind": "self_attn", "layer": 1, "head": 2}
    if arch != "encoder-decoder":
        return [head]
    return [head, {"stack": "decoder", "kind": "cross_attn", "layer": 0, "head": 1}]


def test_interventions_patching_and_exports_are_the_references(served):
    """An ablation and a patch (the second text's float64 values) answer as on a server
    without the view; the trace export and the report hold the float64 reference, byte for
    byte; the badge compares what is shown with it and finds it within float32 rounding."""
    ex, _, mid, text, other = served
    arch = ex.summary({"model": mid, "text": text})["arch"]
    heads = heads_of(arch)
    zero, zero_ref = both(served, "intervene", heads=heads)
    assert zero == zero_ref and zero["max_abs_change"] > 0
    patch, patch_ref = both(served, "intervene", heads=heads, how="patch", patch_text=other)
    assert patch == patch_ref
    t, t_ref = both(served, "trace_json")
    assert "".join(t) == "".join(t_ref)
    report, report_ref = both(served, "report")
    assert report == report_ref
    f = ex.fidelity({"model": mid, "text": text})["torch"]
    assert f["engine"] == "PyTorch float32 (shown) vs NumPy float64"
    assert 1e-9 < f["max_rel_diff"] <= FLOAT32_REL and f["compared"] > 40


def test_which_runs_are_views(tmp_path):
    """auto: small models stay with the reference, models of VIEW_PARAMS parameters get the
    view; --view float32 makes every model's runs views, --view reference none."""
    for kind in ("translator", "classifier"):
        m = Model.load(small(tmp_path / kind, kind))
        assert serve_runs.view_of(m, "auto") == "reference"
        assert serve_runs.view_of(m, "float32") == "float32"
        assert serve_runs.view_of(m, "reference") == "reference"
        m.runtime._made["n_params"] = serve_runs.VIEW_PARAMS  # (counted once, then cached)
        assert serve_runs.view_of(m, "auto") == "float32"


def test_a_bert_folders_badge_is_transformers_own(tmp_path):
    """A BERT folder (made by transformers) is compared with BertModel itself, on the float64
    reference's encoder output, also when the page shows the float32 view."""
    transformers = pytest.importorskip("transformers")
    from test_hf_dir import VOCAB, randomize, write_wordpiece

    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=24,
        num_attention_heads=3,
        num_hidden_layers=2,
        intermediate_size=40,
        max_position_embeddings=32,
    )
    model = transformers.BertModel(config).eval()
    randomize(model, 1)
    model.save_pretrained(tmp_path)
    write_wordpiece(tmp_path)
    badges = {}
    for view in VIEWS:
        ex = Explorer(Registry([tmp_path], walkthroughs=False), view=view)
        mid = next(iter(ex.registry.entries))
        badges[view] = ex.fidelity({"model": mid, "text": "the man eats bread"})
        hf = badges[view]["hf"]
        assert hf["available"] and hf["engine"] == "transformers BertModel", hf
    assert badges["reference"]["hf"]["max_abs_diff"] < 1e-9
    assert badges["float32"]["hf"] == badges["reference"]["hf"]  # the reference's, not the view's
    assert badges["float32"]["torch"]["engine"] == "PyTorch float32 (shown) vs NumPy float64"
