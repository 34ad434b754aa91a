"""The whole model, drawn (explain/overview.py): the boxes a Config implies, named as the trace
names its steps; the same picture read back from a trace and its weights; the report's section;
the explorer's endpoint; and, in Chromium, the explorer's picture that opens a block's layer and
highlights the current view.

Oracles: the Config (blocks per stack, heads, cross-attention only in an encoder-decoder's
decoder, LayerNorm before or after the add, tied head, classifier); the reference engine's own
trace (every box names steps that exist, every sublayer of the trace has its box); the geometry
of the picture (where LayerNorm sits relative to ⊕ and the branch).
"""

from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from test_browser import browser, need  # noqa: F401 (the Chromium fixture)

from glassformer import reference as R
from glassformer import walkthrough, weights
from glassformer.config import Config
from glassformer.explain.html import render_html
from glassformer.explain.overview import MAX_FULL, collapses, overview_svg
from glassformer.trace import tracing

ROOT = Path(__file__).resolve().parents[1]
CHAR_LM, EN_ES = ROOT / "models" / "char-lm", ROOT / "models" / "en-es"
NS = "{http://www.w3.org/2000/svg}"


def boxes(svg: str) -> dict[str, ET.Element]:
    """data-step -> its element (every prefix is drawn once)."""
    root = ET.fromstring(svg)
    found = [g for g in root.iter() if g.get("data-step")]
    steps = [g.get("data-step") for g in found]
    assert len(steps) == len(set(steps)), [s for s in steps if steps.count(s) > 1]
    return dict(zip(steps, found, strict=True))


def text(g: ET.Element) -> str:
    return " ".join(t.text or "" for t in g.iter(f"{NS}text"))


def kind(g: ET.Element) -> str:
    return g.get("class").split()[-1].removeprefix("gf-ov-")


CONFIGS = {
    "decoder-2-pre": Config(arch="decoder", n_decoder_layers=2, norm="pre", positions="learned",
                            tie_embeddings=True, activation="gelu_tanh"),
    "decoder-12-post": Config(arch="decoder", n_decoder_layers=12, n_heads=12, d_model=48),
    "decoder-24-pre": Config(arch="decoder", n_decoder_layers=24, norm="pre", n_heads=16,
                             d_model=64, positions="none"),
    "seq2seq-3+3-pre": Config(arch="encoder-decoder", n_encoder_layers=3, n_decoder_layers=3,
                              norm="pre", share_embeddings=True, tie_embeddings=True,
                              embed_scale=True, activation="silu"),
    "seq2seq-2+9-post": Config(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=9,
                               positions="sinusoidal_split"),
    "classifier-12-post": Config(arch="encoder", n_encoder_layers=12, n_classes=3, n_heads=2,
                                 d_model=16, positions="learned", type_vocab_size=2,
                                 embed_norm=True, activation="gelu"),
    "embedding-2-pre": Config(arch="encoder", n_encoder_layers=2, norm="pre"),
}  # fmt: skip


def layers(cfg: Config) -> dict[str, int]:
    return {s: n for s, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers))
            if n}  # fmt: skip


# -- the boxes a Config implies -----------------------------------------------------------------


@pytest.mark.parametrize("expand", [False, True])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_picture_has_the_boxes_its_config_implies(name, expand):
    cfg = CONFIGS[name]
    found = boxes(overview_svg(cfg, expand=expand))
    H, C, F = cfg.n_heads, cfg.d_model, cfg.d_ff
    for stack, n in layers(cfg).items():
        # Every block once: in full, or (a deep stack, folded) as a cell of the band.
        full = sorted(int(s.split(".")[1]) for s, g in found.items()
                      if kind(g) == "block" and s.startswith(stack + "."))  # fmt: skip
        cells = sorted(int(s.split(".")[1]) for s, g in found.items()
                       if kind(g) == "cell" and s.startswith(stack + "."))  # fmt: skip
        assert sorted(full + cells) == list(range(n))
        assert full == (list(range(n)) if expand or n <= MAX_FULL else [0, 1, n - 1])
        for i in full:
            block = f"{stack}.{i}"
            heads = sorted(s for s in found if s.startswith(f"{block}.self_attn.head"))
            assert heads == sorted(f"{block}.self_attn.head{h}" for h in range(H))
            attn = text(found[f"{block}.self_attn"])
            assert f"{H} heads" in attn and ("causal" in attn) == (stack == "decoder")
            ffn = text(found[f"{block}.ffn"])
            assert f"{C} → {F} → {C}" in ffn
            assert {"relu": "ReLU", "gelu": "GELU (erf)", "gelu_tanh": "GELU (tanh)",
                    "silu": "SiLU"}[cfg.activation] in ffn  # fmt: skip
            # Cross-attention: in an encoder-decoder's decoder blocks, and nowhere else.
            cross = stack == "decoder" and cfg.arch == "encoder-decoder"
            assert (f"{block}.cross_attn" in found) == cross
            if cross:
                assert sorted(
                    s for s in found if s.startswith(f"{block}.cross_attn.head")
                ) == sorted(f"{block}.cross_attn.head{h}" for h in range(H))
            k = 3 if cross else 2
            assert {f"{block}.norm{j}" for j in range(1, k + 1)} <= set(found)
            assert {f"{block}.add{j}" for j in range(1, k + 1)} <= set(found)
            assert f"{block}.norm{k + 1}" not in found and f"{block}.add{k + 1}" not in found
        assert (f"{stack}.P" in found) == (cfg.positions != "none")
        assert (f"{stack}.types" in found) == bool(cfg.type_vocab_size)
        assert (f"{stack}.embed_norm" in found) == cfg.embed_norm
        assert (f"{stack}.norm" in found) == (cfg.norm == "pre")  # the final LayerNorm
    assert not any(".cross_attn" in s for s in found if s.startswith("encoder."))
    assert ("encoder.output" in found) == (cfg.arch == "encoder-decoder")


def test_the_output_head_is_named_as_the_config_says():
    lm = boxes(overview_svg(CONFIGS["decoder-2-pre"]))
    assert "tied" in text(lm["logits"]) and "untied" not in text(lm["logits"])
    assert "untied" in text(boxes(overview_svg(CONFIGS["decoder-12-post"]))["logits"])
    assert "probs" in lm and "pooled" not in lm
    cls = boxes(overview_svg(CONFIGS["classifier-12-post"], classes=["neg", "neu", "pos"]))
    assert "Classifier" in text(cls["logits"]) and "16 → 3" in text(cls["logits"])
    assert "neg, neu, pos" in cls["logits"].find(f"{NS}title").text
    assert {"pooled", "logits", "probs"} <= set(cls) and "embedding" not in cls
    emb = boxes(overview_svg(CONFIGS["embedding-2-pre"]))
    assert {"pooled", "embedding"} <= set(emb) and "logits" not in emb


def _rect(g: ET.Element) -> tuple[float, float, float, float]:
    r = g.find(f"{NS}rect") if g.find(f"{NS}rect") is not None else g.find(f"{NS}circle")
    if r.tag.endswith("circle"):
        x, y, rr = (float(r.get(k)) for k in ("cx", "cy", "r"))
        return x - rr, y - rr, 2 * rr, 2 * rr
    return tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_layernorm_sits_where_the_config_puts_it(norm):
    """Pre-LN: LayerNorm before the sublayer, on its branch (below the stream), the add after;
    post-LN: the add first, then LayerNorm on the stream itself."""
    cfg = Config(arch="encoder-decoder", n_encoder_layers=1, n_decoder_layers=1, norm=norm)
    found = boxes(overview_svg(cfg))
    for block, subs in (("encoder.0", ["self_attn", "ffn"]),
                        ("decoder.0", ["self_attn", "cross_attn", "ffn"])):  # fmt: skip
        for k, sub in enumerate(subs, start=1):
            ln, box, add = (_rect(found[f"{block}.{s}"]) for s in (f"norm{k}", sub, f"add{k}"))
            stream = add[1] + add[3] / 2  # the stream's height: the centre of ⊕
            centre = ln[1] + ln[3] / 2
            if norm == "pre":
                assert ln[0] + ln[2] <= box[0] < box[0] + box[2] < add[0]
                assert centre > stream + 10  # on the branch
            else:
                assert box[0] + box[2] < add[0] < add[0] + add[2] < ln[0]
                assert centre == pytest.approx(stream)  # on the stream


def test_deep_stacks_fold_and_unfold():
    cfg = CONFIGS["decoder-24-pre"]
    assert collapses(cfg) and not collapses(CONFIGS["decoder-2-pre"])
    folded, full = overview_svg(cfg), overview_svg(cfg, expand=True)
    height = lambda svg: float(ET.fromstring(svg).get("height"))  # noqa: E731
    assert height(folded) < 900 < height(full)  # 24 blocks readable: 3 in full and a band
    assert "× 21 more blocks" in folded and "more blocks" not in full


def test_the_picture_stands_alone():
    svg = overview_svg(CONFIGS["seq2seq-3+3-pre"])
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg" and root.get("viewBox")
    for bad in ("<script", "href", "url(", "<style", "<image", "<foreignObject"):
        assert bad not in svg
    evil = Config(arch="encoder", n_encoder_layers=1, n_classes=2)
    assert "&lt;b&gt;" in overview_svg(evil, classes=["<b>", "x"])  # text is escaped


# -- every box names steps of the model's own trace, and every sublayer has a box ----------------


def traced(cfg: Config, seed: int = 0):
    params = weights.init(cfg, seed=seed, std=0.4)
    with tracing() as trace:
        if cfg.arch == "encoder":
            (R.classify if cfg.n_classes else R.sentence_embedding)(params, cfg, [1, 2, 3])
        else:
            src = [4, 5, 6] if cfg.arch == "encoder-decoder" else None
            R.forward(params, cfg, [1, 2, 3, 7], src_ids=src)
    return trace, params


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_box_names_real_trace_steps(name):
    cfg = CONFIGS[name]
    trace, _ = traced(cfg)
    names = trace.names()
    prefixes = {".".join(n.split(".")[:k]) for n in names for k in range(1, n.count(".") + 2)}
    drawn = set(boxes(overview_svg(cfg, expand=True)))
    assert drawn <= prefixes, sorted(drawn - prefixes)
    # ... and the other way: every block, sublayer, head, norm and add of the trace is drawn.
    parts = re.compile(r"(encoder|decoder)\.\d+(\.(self_attn|cross_attn)(\.head\d+)?|\.ffn|"
                       r"\.norm\d|\.add\d)?$")  # fmt: skip
    wanted = {p for p in prefixes if parts.fullmatch(p)}
    wanted |= {p for p in ("logits", "probs", "pooled", "embedding") if p in names}
    assert wanted <= drawn, sorted(wanted - drawn)


# -- the same picture read back from a trace and its weights (the report's way) -----------------

# -- the report's section -----------------------------------------------------------------------


def test_the_report_opens_with_the_whole_model():
    cfg = CONFIGS["seq2seq-3+3-pre"]
    trace, params = traced(cfg)
    page = render_html(trace, params=params, cfg=cfg)
    assert re.findall(r'<section id="gf-([a-z]+)">', page)[0] == "model"  # at the top
    told = {"decoder": {"what": "decoder input", "ids": [1, 2, 3, 7], "pieces": list("abcd")}}
    sections = re.findall(r'<section id="gf-([a-z]+)">', render_html(trace, params=params, cfg=cfg,
                                                                    tokens=told))  # fmt: skip
    assert sections[:2] == ["tokens", "model"]  # after the input's tokens, before the rest
    assert '<a href="#gf-model">The whole model</a>' in page.split("</nav>")[0]
    body = re.search(r'<section id="gf-model">(.*?)</section>', page, re.S).group(1)
    svg = re.search(r"<svg.*</svg>", body, re.S).group(0)
    assert "http://" not in page  # inline in the page: no namespace URL, nothing fetched
    found = boxes(svg.replace("<svg ", f'<svg xmlns="{NS[1:-1]}" ', 1))
    assert found.keys() == boxes(overview_svg(cfg)).keys()
    anchors = set(re.findall(r'id="step-([^"]+)"', page))
    for step in found:  # every box has a step card to go to (report.js scrolls to the first)
        assert any(a == step or a.startswith(step + ".") for a in anchors), step
    # Blocks the report leaves out are drawn faded.
    chosen = render_html(trace, params=params, layers=[0], cfg=cfg)
    assert 'data-step="decoder.1" data-off="1"' in chosen
    assert 'data-step="decoder.0" data-off' not in chosen
    # A walkthrough (no weights, the article's own steps) has no picture.
    assert 'id="gf-model"' not in render_html(walkthrough.hello_world())


# -- the explorer ---------------------------------------------------------------------------------


DEEP = Config(arch="decoder", n_decoder_layers=8, d_model=16, n_heads=2, max_len=32)


@pytest.fixture(scope="module")
def deep_dir(tmp_path_factory) -> Path:
    """A character decoder of 8 blocks: drawn with a band, and in full on request."""
    from glassformer.tokenizer import CharTokenizer

    folder = tmp_path_factory.mktemp("deep") / "deep"
    tok = CharTokenizer.train(["abcdefgh ijklmnop"])
    cfg = Config(**{**DEEP.to_dict(), "vocab_size": tok.vocab_size})
    weights.save(folder, cfg, weights.init(cfg, seed=0), tokenizer=tok)
    return folder


@pytest.fixture(scope="module")
def server(deep_dir):
    pytest.importorskip("uvicorn")
    from glassformer.serve import Explorer, Registry, serving

    explorer = Explorer(Registry([os.path.relpath(CHAR_LM), os.path.relpath(EN_ES), deep_dir]))
    with serving(explorer) as url:
        yield url, explorer


def post(url: str, action: str, body: dict) -> tuple[int, dict]:
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url + "api/" + action, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_explorer_serves_the_picture_of_each_model(server):
    import glassformer

    url, _ = server
    for model, path in (("en-es", EN_ES), ("char-lm", CHAR_LM)):
        status, r = post(url, "overview", {"model": model})
        assert status == 200
        assert r["svg"] == overview_svg(glassformer.load(path).cfg) and r["svg_all"] == ""
    status, r = post(url, "overview", {"model": "hello-world"})
    assert status == 200 and r["svg"] == "" and "walkthrough" in r["note"]
    status, r = post(url, "overview", {"model": "char-lm", "text": "x"})
    assert status == 400 and "overview takes no field 'text'" in r["error"]
    status, r = post(url, "overview", {"model": "nope"})
    assert status == 404
    import urllib.request

    with urllib.request.urlopen(url + "assets/overview.js") as r:
        assert r.status == 200 and b"/api/overview" in r.read()
    with urllib.request.urlopen(url) as r:
        page = r.read().decode()
    assert '<div id="overview"></div>' in page  # drawn by overview.js, which explorer.js loads
    with urllib.request.urlopen(url + "assets/explorer.js") as r:
        assert b'import "./overview.js";' in r.read()


def test_a_deep_model_sends_every_block_too(server):
    import glassformer

    url, explorer = server
    status, r = post(url, "overview", {"model": "deep"})
    cfg = glassformer.load(explorer.registry.entry("deep").description).cfg
    assert status == 200 and collapses(cfg)
    assert r["svg"] == overview_svg(cfg) and r["svg_all"] == overview_svg(cfg, expand=True)


# -- the explorer in Chromium ---------------------------------------------------------------------


def _until(driver, script: str, *args, timeout: float = 60):
    end = time.time() + timeout
    while not (value := driver.execute_script(script, *args)):
        if time.time() > end:
            raise AssertionError(f"timed out waiting for: {script}")
        time.sleep(0.05)
    return value


def _shot(driver, tmp_path: Path, name: str) -> None:
    import shutil

    path = tmp_path / name
    assert driver.save_screenshot(str(path))
    if out := os.environ.get("GLASSFORMER_SCREENSHOT_DIR"):
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / name)


CURRENT = "return Array.from(document.querySelectorAll('#overview .cur'), g => g.dataset.step)"


def test_the_explorer_shows_the_model_and_opens_a_block(browser, server, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    driver = need(browser)
    url, _ = server
    driver.set_window_size(1280, 1100)
    driver.get_log("browser")
    driver.get(url + "#model=char-lm&text=ROMEO: But soft")
    _until(driver, "return document.querySelector('#overview svg [data-step=\"decoder.3\"]')")
    _until(driver, "return document.getElementById('map').dataset.name")
    cur = driver.execute_script(CURRENT)
    shown = driver.execute_script("return document.getElementById('map').dataset.name")
    assert shown == "decoder.0.self_attn.head0.A"
    assert set(cur) == {"decoder.0", "decoder.0.self_attn", "decoder.0.self_attn.head0"}

    # A block box: the Attention tab switches to that block's layer, and the block is current.
    driver.find_element(By.CSS_SELECTOR, '#overview [data-step="decoder.2"] text').click()
    _until(driver, "return document.getElementById('map').dataset.name === "
           "'decoder.2.self_attn.head0.A'")  # fmt: skip
    assert driver.execute_script("return document.getElementById('layer').value") == "2"
    _until(driver, CURRENT + ".includes('decoder.2')")
    cur = driver.execute_script(CURRENT)
    assert {"decoder.2", "decoder.2.self_attn", "decoder.2.self_attn.head0"} == set(cur)
    # A head: that head's map.
    driver.find_element(
        By.CSS_SELECTOR, '#overview [data-step="decoder.1.self_attn.head3"]'
    ).click()
    _until(driver, "return document.getElementById('map').dataset.name === "
           "'decoder.1.self_attn.head3.A'")  # fmt: skip
    _until(driver, CURRENT + ".includes('decoder.1.self_attn.head3')")
    # A token: its stack's residual stream is highlighted, and the sentence says what it reads.
    driver.find_elements(By.CSS_SELECTOR, "#tokens p.stack-decoder .tok")[4].click()
    assert driver.execute_script(
        "return document.querySelector('#overview .gf-ov-lane[data-stack=decoder]').classList"
        ".contains('on')"
    )
    note = driver.find_element(By.CSS_SELECTOR, "#overview .gf-ov-note").text
    assert note.startswith("Token 4 ") and "tokens 0–4 only" in note
    _shot(driver, tmp_path, "overview-char-lm.png")
    # Another box: the Every step tab, opened at that box's first step.
    driver.find_element(By.CSS_SELECTOR, '#overview [data-step="decoder.3.ffn"]').click()
    _until(driver, "return !document.getElementById('tab-steps').hidden")
    in_view = (  # the card (replaced by its loaded self as it comes into view) is on screen
        "const c = document.querySelector('#steps article[data-name=\"decoder.3.ffn.hidden\"]');"
        "const b = c.getBoundingClientRect(); return b.height > 0 && b.top >= -2 && "
        "b.top < innerHeight && c.closest('details').open"
    )
    _until(driver, in_view)
    assert "decoder.3.ffn" in driver.execute_script(CURRENT)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_the_translator_picture_wires_the_encoder_to_each_cross_attention(
    browser,  # noqa: F811
    server,
    tmp_path,
):
    from selenium.webdriver.common.by import By

    driver = need(browser)
    url, _ = server
    driver.set_window_size(1280, 1100)
    driver.get("about:blank")  # a new page: only the #hash would change
    driver.get(url + "#model=en-es&text=Hello world.")
    _until(driver, "return document.querySelector('#overview svg[data-arch=\"encoder-decoder\"]')")
    _until(driver, "return document.getElementById('map').dataset.name")
    driver.find_element(
        By.CSS_SELECTOR, '#overview [data-step="decoder.1.cross_attn"] text'
    ).click()
    _until(driver, "return (document.getElementById('map').dataset.name || '')"
           ".startsWith('decoder.1.cross_attn.head')")  # fmt: skip
    assert (
        driver.execute_script("return document.getElementById('site').value")
        == "decoder.cross_attn"
    )
    driver.find_elements(By.CSS_SELECTOR, "#tokens p.stack-encoder .tok")[1].click()
    note = driver.find_element(By.CSS_SELECTOR, "#overview .gf-ov-note").text
    assert "(encoder)" in note and "every decoder token reads its row" in note
    driver.execute_script("window.scrollTo(0, 0)")
    _shot(driver, tmp_path, "overview-en-es.png")


def test_a_deep_model_folds_its_middle_blocks_and_unfolds_them(browser, server, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    driver = need(browser)
    url, _ = server
    driver.get("about:blank")
    driver.get(url + "#model=deep&text=abc def")
    _until(
        driver, "return document.querySelector('#overview .gf-ov-cell[data-step=\"decoder.4\"]')"
    )
    _until(driver, "return document.getElementById('map').dataset.name")
    driver.find_element(By.CSS_SELECTOR, '#overview [data-step="decoder.4"]').click()
    _until(driver, "return document.getElementById('map').dataset.name === "
           "'decoder.4.self_attn.head0.A'")  # fmt: skip
    _until(driver, CURRENT + ".includes('decoder.4')")  # the band's cell is the current block
    full = "return document.querySelectorAll('#overview .gf-ov-block').length"
    assert driver.execute_script(full) == 3
    _shot(driver, tmp_path, "overview-deep-folded.png")
    driver.find_element(By.CSS_SELECTOR, "#overview .gf-ov-expand").click()
    _until(driver, full + " === 8")
    _shot(driver, tmp_path, "overview-deep-every-block.png")
    assert driver.execute_script(CURRENT) == ["decoder.4", "decoder.4.self_attn",
                                               "decoder.4.self_attn.head0"]  # fmt: skip


def test_the_report_top_in_chromium(browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    import glassformer

    driver = need(browser)
    m = glassformer.load(EN_ES)
    run = m.run("Hello world.")
    page = render_html(
        run.trace,
        title="glassformer explain: “Hello world.”",
        params=m.params,
        vocab=m.tokenizer.vocab,
        token_kind=m.runtime.token_kind,
        cfg=m.cfg,
    )
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    driver.set_window_size(1280, 1000)
    driver.get(path.as_uri())
    _until(driver, "return document.querySelector('.gf').dataset.ready")
    _shot(driver, tmp_path, "overview-report.png")
    driver.find_element(By.CSS_SELECTOR, '.gf-ov [data-step="decoder.2.ffn"]').click()
    card = driver.find_element(By.ID, "step-decoder.2.ffn.hidden")
    _until(driver, "const b = arguments[0].getBoundingClientRect(); "
           "return b.top >= -2 && b.top < innerHeight", card)  # fmt: skip
    assert driver.execute_script("return document.querySelector('.gf-ov .cur').dataset.step") == (
        "decoder.2.ffn"
    )


def test_numbers_are_the_configs():
    """The sizes written in the boxes are the Config's, for the shipped models."""
    import glassformer

    for path in (EN_ES, CHAR_LM):
        cfg = glassformer.load(path).cfg
        svg = overview_svg(cfg)
        assert f"{cfg.vocab_size} × {cfg.d_model}" in svg
        assert f"{cfg.n_heads} heads × {cfg.head_dim}" in svg
        assert np.isfinite(float(ET.fromstring(svg).get("width")))
