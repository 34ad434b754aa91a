"""Today's decoders shown (issue 28 point 2): every command and explorer view that shows a model
works on Llama-like, Qwen2-like, multi-query, attention-only and rotary + GQA encoder-decoder
models, and says what those models do in words a learner reads.

Oracles: the model's own logits and the engine's recorded norm scale (the logit lens's last row,
direct logit attribution's parts summing to the logit), the engine's scores (the neuron view's
q·k), `interventions.run_with` on the reference engine with steps replaced by hand (ablating a
shared K/V head is zeroing its V), the other engine (`diff`), the Config (the overview's boxes:
one RMSNorm per norm, a RoPE tag per self-attention, a bar per K/V head, the gated FFN's parts,
no FFN with d_ff 0) and the trace (every box names steps that exist).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")

from test_browser import NETWORK, browser, need  # noqa: E402, F401 (the Chromium fixture)

import glassformer  # noqa: E402
from glassformer import engine_diff, weights  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import InputError  # noqa: E402
from glassformer.explain.overview import overview_svg  # noqa: E402
from glassformer.explain.select import KVGroups, select_steps  # noqa: E402
from glassformer.explain.words import naming, shows, title, what  # noqa: E402
from glassformer.inspect import interventions as I  # noqa: E402
from glassformer.inspect import lens  # noqa: E402
from glassformer.inspect.touch import interventions  # noqa: E402
from glassformer.serve import Explorer, Registry  # noqa: E402
from glassformer.tokenizer import CharTokenizer  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.trace import intervene, tracing  # noqa: E402

CORPUS = "the quick brown fox jumps over the lazy dog. To be or not to be, that is the question."
TEXT = "the fox"
LLAMA = dict(arch="decoder", d_model=16, n_heads=4, n_kv_heads=2, d_ff=24, n_decoder_layers=2,
             max_len=24, positions="rotary", norm="pre", norm_kind="rmsnorm", ffn_kind="gated",
             activation="silu", bias=False, tie_embeddings=False)  # fmt: skip
CONFIGS = {
    "llama": LLAMA,
    "qwen": LLAMA | dict(qkv_bias=True),
    "mqa": LLAMA | dict(n_kv_heads=1),
    "attention-only": LLAMA | dict(d_ff=0, ffn_kind="plain"),
    "seq2seq": LLAMA | dict(arch="encoder-decoder", n_encoder_layers=2),
}
NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    """One checkpoint per config: random weights (std 0.3), non-zero Q, K, V biases for Qwen2."""
    tok = CharTokenizer.train([CORPUS])
    root, out = tmp_path_factory.mktemp("modern"), {}
    for name, kw in CONFIGS.items():
        cfg = Config(vocab_size=len(tok.vocab), **kw)
        params = weights.init(cfg, seed=1, std=0.3)
        rng = np.random.default_rng(5)
        for k in params:
            if re.search(r"\.(q|k|v)\.bias$", k):
                params[k] = rng.normal(0, 0.3, params[k].shape)
        out[name] = weights.save(root / name, cfg, params, tokenizer=tok, dtype="float64")
    return out


@pytest.fixture(scope="module")
def models(folders) -> dict:
    return {name: glassformer.load(str(path)) for name, path in folders.items()}


def inputs(m):
    """(source or None, decoder ids) of TEXT: a decoder's text; a translation's source, with its
    own tokens after BOS as the decoder's."""
    ids = m.encode(TEXT)
    return (ids, m.runtime.bos() + ids) if m.cfg.arch == "encoder-decoder" else (None, ids)


def traced(m):
    src, ids = inputs(m)
    with tracing() as trace:
        logits = R.forward(m.params, m.cfg, ids, src_ids=src)
    return trace, logits, src, ids


# -- the logit lens and direct logit attribution through the model's own norm ----------------------


@pytest.mark.parametrize("name", CONFIGS)
def test_the_lens_reads_through_rmsnorm_and_its_last_row_is_the_logits(models, name):
    m = models[name]
    cfg = m.cfg
    trace, logits, src, ids = traced(m)
    table = lens.logit_lens(trace, m.params, cfg, k=3, sublayers=True)
    sublayers = (2 if cfg.arch == "encoder-decoder" else 1) + (cfg.d_ff > 0)
    assert len(table.points) == 1 + cfg.n_decoder_layers * sublayers
    assert all(p in trace for p in table.points) and table.norm == "RMSNorm"
    np.testing.assert_allclose(table.logits[-1], logits, atol=1e-12, rtol=0)
    model = from_params(cfg, m.params, dtype=torch.float64)  # the other engine's trace
    run = I.torch_run(model)
    _, other = I.record(run, (src, ids) if src is not None else ids)
    again = lens.logit_lens(other, m.params, cfg, k=3, sublayers=True)
    np.testing.assert_allclose(again.logits, table.logits, atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("position", [-1, 2])
def test_dla_parts_sum_to_the_logit_with_the_engines_own_rms_frozen(models, name, position):
    m = models[name]
    trace, logits, _, _ = traced(m)
    d = lens.direct_logit_attribution(trace, m.params, m.cfg, token=4, versus=7, position=position)
    want = logits[position, 4] - logits[position, 7]
    assert d.logit == pytest.approx(want, abs=1e-12)
    assert d.total == pytest.approx(want, abs=1e-10)  # every part, exactly
    assert d.scale == pytest.approx(trace["decoder.norm.rms"][position, 0], abs=1e-12)
    assert "final norm bias" not in d.other and d.norm == "RMSNorm"  # RMSNorm has no β
    assert any(k.endswith(".ffn") for k in d.other) == (m.cfg.d_ff > 0)
    assert np.asarray(d.heads).shape[1] == m.cfg.n_heads  # every query head, shared K/V or not


def test_the_layernorm_decomposition_is_unchanged(models):
    """A classic pre-LN model beside: the same parts, β·w included, still sum to the logit."""
    cfg = Config(**(LLAMA | dict(norm_kind="layernorm", vocab_size=20, bias=True)))
    p = weights.init(cfg, seed=3, std=0.4)
    p["decoder.norm.bias"] = np.linspace(-1, 1, cfg.d_model)
    with tracing() as trace:
        logits = R.forward(p, cfg, [1, 4, 2, 9, 3])
    d = lens.direct_logit_attribution(trace, p, cfg, token=5)
    assert d.total == pytest.approx(logits[-1, 5], abs=1e-10) and "final norm bias" in d.other
    assert d.scale == pytest.approx(trace["decoder.norm.std"][-1, 0], abs=1e-12)


# -- every command, end to end -------------------------------------------------------------------


def titles(page: str) -> list[str]:
    return re.findall(r'<h3 class="step-title">([^<]*)</h3>', page)


@pytest.mark.parametrize("name", CONFIGS)
def test_every_command_that_shows_a_model_works_and_reads(folders, models, name, tmp_path,
                                                          capsys):  # fmt: skip
    path, m = str(folders[name]), models[name]
    out = tmp_path / "out"
    commands = [
        ["explain", path, TEXT],
        ["explain", path, TEXT, "--json", str(out / "trace.json")],
        ["explain", path, TEXT, "--html", str(out / "report.html")],
        ["explain", path, TEXT, "--heads", "3", "--html", str(out / "head3.html")],
        ["lens", path, TEXT, "--sublayers", "--dla", "e", "--html", str(out / "lens.html")],
        ["lens", path, TEXT, "--dla", "e", "--versus", "o", "--json", str(out / "dla.json")],
        ["attribute", path, TEXT, "--html", str(out / "attribute.html")],
        ["explain", path, TEXT, "--ablate", "decoder.1.self_attn.head3",
         "--ablate", "decoder.0.self_attn.kv_head0", "--json", str(out / "ablate.json")],
        ["diff", path, TEXT, "--engines", "reference,torch,float32"],
    ]  # fmt: skip
    for argv in commands:
        assert main(argv) == 0, argv
        said = capsys.readouterr()
        assert "Traceback" not in said.out + said.err, argv
    report = (out / "report.html").read_text()
    shown = titles(report)
    assert not [t for t in shown if "LayerNorm" in t or "kv head" in t or "kv_head" in t]
    layer = "Decoder layer 1 · self-attention" if name == "seq2seq" else "Layer 1"
    readers = "0-3" if name == "mqa" else "0-1"
    assert f"{layer} · K/V head 0 (shared by query heads {readers}) · keys K" in shown
    assert any("RMSNorm" in t for t in shown) and "RoPE" in report
    steps = {s["name"] for s in json.loads((out / "trace.json").read_text())["steps"]}
    head3 = set(re.findall(r'id="step-([^"]+)"', (out / "head3.html").read_text()))
    G = m.cfg.n_heads // m.cfg.kv_heads
    assert {n for n in head3 if "kv_head" in n} == {
        n for n in steps if f"kv_head{3 // G}." in n
    }  # head 3 keeps the K/V head it reads, and only that one
    dla = json.loads((out / "dla.json").read_text())["dla"]
    assert dla["total"] == pytest.approx(dla["logit"], abs=1e-9)
    assert "final RMSNorm" in (out / "lens.html").read_text()
    ablation = json.loads((out / "ablate.json").read_text())["interventions"]["ablation"]
    assert ablation["steps"] == sorted(
        {"decoder.1.self_attn.head3.C"} | {f"decoder.0.self_attn.head{h}.C" for h in range(G)}
    )
    assert "query heads 0-" in ablation["notes"][1] and "own output C only" in ablation["notes"][0]


def test_a_kv_head_ablation_is_zeroing_its_values(models):
    """Oracle: the reference engine with the shared head's V replaced by zeros (every query head
    of its group then outputs A·0 = 0)."""
    m = models["llama"]
    ids = m.encode(TEXT)
    r = m.ablate(TEXT, ["decoder.1.self_attn.kv_head1"])
    with intervene({"decoder.1.self_attn.kv_head1.V": lambda v: np.zeros_like(v)}):
        want = R.forward(m.params, m.cfg, ids)
    got = I.run_with(I.reference_run(m.params, m.cfg), ids, I.ablate_kv_head(1, 1, 2))
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert r.steps == ["decoder.1.self_attn.head2.C", "decoder.1.self_attn.head3.C"]
    assert [p["predicted_ablated"] for p in r.positions] == m.runtime.readable(
        list(want.argmax(-1))
    )


def test_kv_head_names_are_refused_where_they_mean_nothing(models):
    m = models["llama"]
    with pytest.raises(InputError, match=r"there are 2 K/V heads per layer \(0\.\.1\)"):
        m.ablate(TEXT, ["decoder.0.self_attn.kv_head2"])
    with pytest.raises(InputError, match=r"their own K and V .* ablate a head, decoder\.0\.self"):
        interventions(["decoder.0.self_attn.kv_head0"], Config(arch="decoder"))


@pytest.mark.parametrize("name", ["llama", "seq2seq"])
def test_the_engines_agree_step_by_step_in_data_flow_order(models, name):
    m = models[name]
    r = engine_diff.diff(m, TEXT, ("reference", "torch", "float32"), tol=1e-9)
    assert r.first_beyond["torch"] is None
    order = [row.name for row in r.rows]
    kv, q = order.index("decoder.0.self_attn.kv_head0.K_rot"), "decoder.0.self_attn.head0.scores"
    assert kv < order.index(q)  # the shared keys before the heads that read them
    assert set(r.missing("torch")) == {n for n in order if n.endswith(".rms")}
    assert r.row("decoder.0.self_attn.kv_head1.V").cells["float32"].max_abs < 1e-5


# -- the explorer -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def explorer(folders):
    return Explorer(Registry(list(folders.values()), walkthroughs=False))


@pytest.mark.parametrize("name", CONFIGS)
def test_every_explorer_view_of_the_model(explorer, models, name):
    m = models[name]
    body = {"model": name, "text": TEXT}
    s = explorer.summary(body)
    trace = explorer.run(body)[1].trace
    groups = KVGroups(trace.names())
    for step in trace.names():
        assert explorer.step(body | {"name": step})["html"]
    for a in s["attention"]:
        shown = explorer.attention(body | {"name": a["name"]})
        assert shown["neuron"], a["name"]
        i, j = a["shape"][0] - 1, min(1, a["shape"][1] - 1)
        n = explorer.neuron(body | {"name": a["name"], "i": i, "j": j})
        assert n["sum"] == pytest.approx(trace[a["name"][:-1] + "scores"][i, j], abs=1e-12)
        shared = groups.kv_of(a["name"])
        if "self_attn" in a["name"]:
            assert n["q_step"].endswith("Q_rot") and n["k_step"].endswith("K_rot")
            assert "rotated queries and keys" in a["about"]
        assert n["k_step"].startswith(shared[0] + ".") and f"K/V head {shared[1]}" in n["says"]
        assert f"read K/V head {shared[1]}" in shown["html"]
    head = {"stack": "decoder", "kind": "self_attn", "layer": 1, "head": 3}
    r = explorer.intervene(body | {"heads": [head]})
    run = explorer.run(body)[1]
    read = (run.src, run.ids) if m.cfg.arch == "encoder-decoder" else run.ids
    want = I.run_with(I.reference_run(m.params, m.cfg), read, I.ablate_head(1, 3))
    for t in r["changed"]:
        assert t["logit"] == pytest.approx(want[r["position"], t["id"]], abs=1e-9)
    assert "Only head 3's own output C changes" in r["notes"][0]
    svg = explorer.overview({"model": body["model"]})["svg"]
    assert 'data-norm-kind="rmsnorm"' in svg and "RoPE" in svg
    assert "Traceback" not in explorer.report(body)


# -- the overview: the boxes a Config implies ------------------------------------------------------


def boxes(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("data-step"): g for g in root.iter() if g.get("data-step")}


def text(g: ET.Element) -> str:
    return " ".join(t.text or "" for t in g.iter(f"{NS}text"))


@pytest.mark.parametrize("name", CONFIGS)
def test_the_overview_draws_rmsnorm_rotary_gated_ffn_and_kv_groups(models, name):
    m = models[name]
    cfg = m.cfg
    svg = overview_svg(cfg)
    found = boxes(svg)
    stacks = {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers}
    attentions = {"encoder": 1, "decoder": 2 if cfg.arch == "encoder-decoder" else 1}
    norms = [k for k, g in found.items() if re.search(r"\.norm\d*$", k)]
    per_block = {s: attentions[s] + (cfg.d_ff > 0) for s in stacks}
    assert len(norms) == sum(n * per_block[s] + 1 for s, n in stacks.items() if n)
    assert all(text(found[k]).startswith("RMS") for k in norms)
    assert not [k for k in found if k.endswith(".P")] and "LayerNorm" not in svg
    self_attentions = sum(n for n in stacks.values())
    assert svg.count('class="gf-ov-rope"') == self_attentions  # never on cross-attention
    G = cfg.n_heads // cfg.kv_heads
    for site in [k for k in found if k.endswith("_attn")]:
        kv = sorted(k for k in found if k.startswith(site + ".kv_head"))
        assert kv == [f"{site}.kv_head{g}" for g in range(cfg.kv_heads)]
        assert f"shared by {G} consecutive query heads" in found[site].find(f"{NS}title").text
    ffn = sorted(k.rpartition(".")[2] for k in found if ".ffn." in k and k.startswith("decoder.0"))
    assert ffn == (["gate", "hidden", "out", "up"] if cfg.d_ff else [])
    assert ("decoder.0.ffn" in found) == (cfg.d_ff > 0)
    assert "untied: its own W_out" in text(found["logits"])
    trace, *_ = traced(m)
    names = trace.names()
    for step in found:  # every box names steps the engine records
        assert any(n == step or n.startswith(step + ".") for n in names), step


# -- words ----------------------------------------------------------------------------------------


def test_titles_and_sentences_of_the_new_steps(models):
    cfg = models["llama"].cfg
    assert title("decoder.1.self_attn.kv_head0.K_rot", cfg) == (
        "Layer 1 · K/V head 0 (shared by query heads 0-1) · keys turned by position"
    )
    assert title("decoder.0.norm1.out", cfg) == "Layer 0 · attention · RMSNorm · output"
    assert title("decoder.norm.rms", cfg).startswith("Final RMSNorm · root mean square")
    assert title("decoder.0.ffn.gate", cfg) == "Layer 0 · feed-forward · gate x·W1"
    assert title("decoder.0.self_attn.head3", cfg) == "Layer 0 · head 3 (K and V from K/V head 1)"
    seq = models["seq2seq"].cfg
    assert title("decoder.0.cross_attn.kv_head1.V", seq) == (
        "Decoder layer 0 · cross-attention · K/V head 1 (shared by query heads 2-3) · values V"
    )
    assert title("encoder.1.self_attn.kv_head0", seq).endswith("(shared by query heads 0-1)")
    assert "shared by query heads 2-3" in what("decoder.0.self_attn.kv_head1.V", cfg)
    assert "Q_rot·K_rotᵀ" in what("decoder.0.self_attn.head0.scores", cfg)
    assert "Q_rot" not in what("decoder.0.cross_attn.head0.scores", seq)  # never rotated
    assert "rotary positions add no vector" in what("decoder.input", cfg)
    said = what("decoder.0.norm1.out", cfg)
    assert "root mean square" in said and "β" not in said and "γ" not in said


@pytest.mark.parametrize("name", CONFIGS)
def test_a_config_and_its_trace_name_every_step_alike(models, name):
    m = models[name]
    trace, *_ = traced(m)
    named = naming(trace)
    assert (named.norm, named.groups, named.rotary) == ("RMSNorm", 4 // m.cfg.kv_heads, True)
    for s in trace.steps:
        assert title(s.name, m.cfg) == title(s.name, named), s.name
        assert what(s.name, m.cfg) == what(s.name, named), s.name
        said = shows(s, trace)
        assert said and said.endswith("."), s.name


def test_what_the_rotated_keys_and_the_rmsnorm_show_is_their_values(models):
    m = models["llama"]
    trace, *_ = traced(m)
    K, K_rot = (trace[f"decoder.0.self_attn.kv_head1.{k}"] for k in ("K", "K_rot"))
    cos = np.sum(K * K_rot, -1) / (np.linalg.norm(K, axis=-1) * np.linalg.norm(K_rot, axis=-1))
    said = shows(trace.step("decoder.0.self_attn.kv_head1.K_rot"), trace)
    assert f"cos = {cos.min():.3g}" in said and cos[0] == pytest.approx(1.0)
    rms = trace["decoder.0.norm2.rms"][:, 0]
    said = shows(trace.step("decoder.0.norm2.rms"), trace)
    assert f"{rms.min():.3g}" in said and f"{rms.max():.3g}" in said


def test_choosing_heads_keeps_the_kv_head_they_read(models):
    trace, *_ = traced(models["llama"])
    kept = {s.name for s in select_steps(trace, heads=[2])}
    assert "decoder.0.self_attn.kv_head1.K" in kept and "decoder.0.self_attn.head2.A" in kept
    assert not {n for n in kept if "kv_head0" in n or ".head3." in n}


# -- in Chromium: the attention view, the neuron view and the overview's K/V boxes ----------------


@pytest.fixture(scope="module")
def server(explorer):

    from glassformer.serve import serving

    with serving(explorer) as url:
        yield url


def test_the_explorer_says_what_a_shared_rotated_head_reads(browser, server, models):  # noqa: F811
    from test_serve_browser import choose, until

    driver = need(browser)
    m = models["llama"]
    driver.get_log("browser")
    driver.get_log("performance")
    long = "to be or not to be"  # more than 12 tokens: a map drawn on a canvas
    driver.get(server + "#model=llama&text=" + long)
    until(driver, "return document.getElementById('app').dataset.ready")
    choose(driver, "layer", "1")
    choose(driver, "head", "3")
    until(driver, "return document.getElementById('map').dataset.name === arguments[0]",
          "decoder.1.self_attn.head3.A")  # fmt: skip
    caption = driver.execute_script("return document.querySelector('#map figcaption').textContent")
    assert "Head 3 shares K and V with head 2: both read K/V head 1" in caption
    assert "rotated queries and keys" in caption
    driver.execute_script(
        """const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: b.left + 1.5 * b.width
          / c.width, clientY: b.top + 5.5 * b.height / c.height}));"""
    )
    total = float(until(driver, "const e = document.querySelector('#neuron .sum[data-sum]');"
                        "return e && e.dataset.sum"))  # fmt: skip
    with tracing() as trace:
        R.forward(m.params, m.cfg, m.encode(long))
    assert total == pytest.approx(trace["decoder.1.self_attn.head3.scores"][5, 1], abs=1e-12)
    said = driver.execute_script("return document.getElementById('neuron').textContent")
    assert "q is row 5 of Q_rot, k is row 1 of K_rot of K/V head 1" in said
    driver.execute_script(  # a K/V head's box opens its steps (it has no map of its own)
        "document.querySelector('#overview [data-step=\"decoder.0.self_attn.kv_head1\"]')"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    )
    until(driver, "return document.querySelector('.tabs button.on').dataset.tab === 'steps'")
    card = "#steps article[data-name='decoder.0.self_attn.kv_head1.K'] .step-title"
    until(driver, f'const a = document.querySelector("{card}"); return a && a.textContent')
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    sent = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    urls = [
        x["params"]["request"]["url"] for x in sent if x["method"] == "Network.requestWillBeSent"
    ]
    assert [u for u in urls if u.startswith(NETWORK) and not u.startswith(server)] == []
