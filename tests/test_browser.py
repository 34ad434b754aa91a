"""The HTML report in a real browser: headless Chromium, driven by selenium, opened from disk.

Needs the Debian packages chromium and chromium-driver (`make test` installs them) and selenium
(the `test` extra). Without them this file FAILS, saying so, unless GLASSFORMER_SKIP_BROWSER=1.
Each test saves a screenshot in its tmp dir and, if GLASSFORMER_SCREENSHOT_DIR is set, there too.
"""

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from glassformer import reference as R
from glassformer import walkthrough, weights
from glassformer.config import Config
from glassformer.explain.html import render_html
from glassformer.trace import tracing

HOW = "run `make test` (it installs chromium and chromium-driver) or set GLASSFORMER_SKIP_BROWSER=1"
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1600",
)
NETWORK = ("http:", "https:", "ws:", "wss:", "ftp:")


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            return f"{program} is not installed"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium, or None when it cannot run (each test then fails or skips)."""
    if _missing():
        yield None
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def need(driver):
    if driver is None:
        why = _missing()
        if os.environ.get("GLASSFORMER_SKIP_BROWSER") == "1":
            pytest.skip(f"{why} (GLASSFORMER_SKIP_BROWSER=1)")
        pytest.fail(f"{why}: the browser test needs it; {HOW}")
    return driver


def open_report(driver, path: Path) -> str:
    """Load a report from disk and wait for its script; return its file:// URL."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop what the browser logged before this page
    driver.get_log("performance")
    url = path.resolve().as_uri()
    driver.get(url)
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.querySelector('.gf').dataset.ready === '1'")
    )
    return url


def assert_offline_and_clean(driver, url: str) -> None:
    """No console errors; the only request of the page is the file:// document itself."""
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            p = message["params"]
            requests.append((p["request"]["url"], p.get("documentURL")))
    assert [u for u, _ in requests if u.startswith(NETWORK)] == []
    assert [u for u, doc in requests if doc == url] == [url]


def screenshot(driver, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    if out := os.environ.get("GLASSFORMER_SCREENSHOT_DIR"):
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / name)


def shown_map(driver) -> dict:
    return driver.execute_script(
        """const f = document.querySelector('figure.att:not([hidden])');
        const c = f.querySelector('canvas');
        return {name: f.dataset.name, caption: f.querySelector('figcaption').textContent,
                table: (f.querySelector('table') || {}).textContent || '',
                image: c ? c.toDataURL() : '', width: c ? c.width : 0,
                height: c ? c.height : 0,
                shown: document.querySelector('.picker .shown').textContent};"""
    )


def choose(driver, which: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.CSS_SELECTOR, f"select.pick-{which}")).select_by_value(value)


def test_hello_world_report_in_chromium(browser, tmp_path):
    driver = need(browser)
    from selenium.webdriver.common.by import By

    path = tmp_path / "hello-world.html"
    path.write_text(render_html(walkthrough.hello_world(), title="hello-world"), encoding="utf-8")
    url = open_report(driver, path)
    for section in ("story", "overflow", "scaling", "attention", "generation", "steps"):
        assert driver.find_element(By.ID, f"gf-{section}").is_displayed(), section
    text = driver.execute_script("return document.body.textContent")
    assert "74526.1" in text  # the overflow plot's value, in its tooltip
    for exact, shown in (("105.21", "105"), ("4.6769", "4.68e-10"), ("11.4639", "11.5"),
                         ("0.2243779", "0.224")):  # fmt: skip
        cells = driver.find_elements(By.CSS_SELECTOR, f'td[title^="{exact}"]')
        assert {c.get_attribute("textContent") for c in cells} == {shown}, exact  # exact on hover
    card = driver.find_element(By.ID, "step-head1.A")
    exact = card.find_elements(By.CSS_SELECTOR, 'td[title^="0.99999999953"]')
    assert len(exact) == 1  # the softmax weight 1 - 4.677e-10, in full on hover
    assert len(driver.find_elements(By.CSS_SELECTOR, "#gf-overflow svg g.nan")) == 5
    assert len(driver.find_elements(By.CSS_SELECTOR, "#gf-overflow svg path")) == 3

    # The picker: the encoder's self-attention, layer 2, head 0; then head 1 shows another map.
    choose(driver, "site", "model.encoder.self_attn")
    choose(driver, "layer", "2")
    choose(driver, "head", "0")
    first = shown_map(driver)
    assert first["name"] == "model.encoder.2.self_attn.head0.A" == first["shown"]
    assert "hello" in first["table"] and "world" in first["table"]
    choose(driver, "head", "1")
    second = shown_map(driver)
    assert second["name"] == "model.encoder.2.self_attn.head1.A"
    assert second["table"] != first["table"]
    choose(driver, "site", "model.step6.decoder.cross_attn")
    assert "cross-attention" in shown_map(driver)["caption"]

    driver.execute_script("window.scrollTo(0, 0)")
    screenshot(driver, tmp_path, "hello-world.png")
    driver.execute_script(
        "arguments[0].scrollIntoView()", driver.find_element(By.ID, "gf-attention")
    )
    screenshot(driver, tmp_path, "hello-world-attention.png")
    assert_offline_and_clean(driver, url)


def test_heatmaps_tooltips_and_picker_on_a_larger_model(browser, tmp_path):
    driver = need(browser)
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    cfg = Config(
        arch="encoder-decoder", vocab_size=40, d_model=32, n_heads=4, n_encoder_layers=2,
        n_decoder_layers=2, max_len=32,
    )  # fmt: skip
    params = weights.init(cfg, seed=0, std=0.5)
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(0, 40, 20), rng.integers(0, 40, 16)
    labels = {"encoder": [f"s{i}" for i in src], "decoder": [f"t{i}" for i in tgt]}
    with tracing(labels=labels) as trace:
        R.forward(params, cfg, tgt, src_ids=src)
    path = tmp_path / "random.html"
    page = render_html(trace, vocab=[f"v{i}" for i in range(40)], params=params)
    path.write_text(page, encoding="utf-8")
    url = open_report(driver, path)

    first = shown_map(driver)  # the picker draws the shown map at once
    assert first["name"] == "encoder.0.self_attn.head0.A"
    assert (first["width"], first["height"]) == (20, 20) and first["image"]
    inked = driver.execute_script(
        """const c = document.querySelector('figure.att:not([hidden]) canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 250) n++; return n;"""
    )
    # Coloured cells, not a blank canvas: as many as the 0..1 rule of attention weights tints
    # darker than the page's threshold (float16 on the way: a cell or two either side).
    from glassformer.explain.html_pieces import rgb

    A = trace["encoder.0.self_attn.head0.A"]
    want = sum(rgb(float(x), True)[0] < 250 for x in A.flat)
    assert want > 50 and abs(inked - want) <= 4, (inked, want)
    labels_shown = driver.execute_script(
        "return document.querySelector('figure.att:not([hidden]) .hm-cols').textContent"
    )
    assert "s" + str(src[0]) in labels_shown  # tokens on the axes

    canvas = driver.find_element(By.CSS_SELECTOR, "figure.att:not([hidden]) canvas")
    ActionChains(driver).move_to_element(canvas).perform()
    tip = driver.find_element(By.CSS_SELECTOR, ".gf-tip")
    assert tip.is_displayed()
    assert re.fullmatch(r"s\d+ × s\d+: [-0-9.e+]+", tip.text), tip.text

    choose(driver, "head", "2")
    second = shown_map(driver)
    assert second["name"] == "encoder.0.self_attn.head2.A"
    assert second["image"] and second["image"] != first["image"]
    choose(driver, "site", "decoder.cross_attn")
    choose(driver, "layer", "1")
    cross = shown_map(driver)
    assert cross["name"] == "decoder.1.cross_attn.head2.A"  # the head choice is kept
    assert (cross["width"], cross["height"]) == (20, 16)  # encoder keys x decoder queries

    # Heatmaps in the step list are drawn when they scroll into view.
    driver.find_element(By.CSS_SELECTOR, "button.open-all").click()
    card = driver.find_element(By.ID, "step-decoder.1.ffn.hidden")
    driver.execute_script("arguments[0].scrollIntoView()", card)
    WebDriverWait(driver, 10).until(
        lambda d: card.find_elements(By.CSS_SELECTOR, ".hm[data-drawn] canvas")
    )
    screenshot(driver, tmp_path, "random-model-steps.png")
    driver.execute_script(
        "arguments[0].scrollIntoView()", driver.find_element(By.ID, "gf-attention")
    )
    screenshot(driver, tmp_path, "random-model-attention.png")
    assert_offline_and_clean(driver, url)


# -- any size: readable cells, scrolling, sticky labels, masks, whitespace, injection -----------

SHAKESPEARE = (
    "To be,\nor not to be, that is the question:\nWhether 'tis nobler in the mind\tto suffer "
)


def char_report(path: Path, d_model: int, d_ff: int, n_tokens: int) -> tuple[Path, object]:
    """A 1-block character decoder with seeded random weights on `n_tokens` characters."""
    from glassformer.tokenizer import CharTokenizer

    text = (SHAKESPEARE * 3)[:n_tokens]
    tok = CharTokenizer.train([text])
    cfg = Config(
        arch="decoder", vocab_size=tok.vocab_size, d_model=d_model, n_heads=6, d_ff=d_ff,
        n_decoder_layers=1, max_len=128,
    )  # fmt: skip
    params = weights.init(cfg, seed=0)
    ids = tok.encode(text)
    with tracing(labels={"decoder": tok.tokens(ids)}) as trace:
        R.forward(params, cfg, ids)
    page = render_html(trace, vocab=tok.vocab, params=params, token_kind="char", title=path.name)
    assert "downsampled" not in page and "left out" not in page
    path.write_text(page, encoding="utf-8")
    return path, trace


def draw_card(driver, name: str) -> None:
    """Open every group, scroll the step's card into view and wait for its heatmap."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script(
        "document.querySelectorAll('details.group').forEach(d => { d.open = true; });"
        "document.getElementById(arguments[0]).scrollIntoView();",
        f"step-{name}",
    )
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script(
            "const card = document.getElementById(arguments[0]);"
            "return !!card.querySelector('.hm[data-drawn] canvas')",
            f"step-{name}",
        )
    )


GEOMETRY = """
const el = arguments[0].startsWith('step-') ? document.getElementById(arguments[0])
  : document.querySelector(arguments[0]);
const box = el.querySelector('.hm-box'), c = box.querySelector('canvas');
const row = box.querySelector('.hm-rows span'), col = box.querySelector('.hm-cols span');
const r = e => { if (!e) return null; const b = e.getBoundingClientRect();
  return {left: b.left, top: b.top, right: b.right, bottom: b.bottom, width: b.width,
          height: b.height}; };
return {cols: c.width, rows: c.height, canvas: r(c), box: r(box), row: r(row), col: r(col),
        rowText: row ? row.textContent : null, scrollW: box.scrollWidth, clientW: box.clientWidth,
        scrollH: box.scrollHeight, clientH: box.clientHeight};
"""


def geometry(driver, where: str, left: int = 0, top: int = 0) -> dict:
    driver.execute_script(
        "const el = arguments[0].startsWith('step-') ? document.getElementById(arguments[0])"
        "  : document.querySelector(arguments[0]);"
        "const box = el.querySelector('.hm-box'); box.scrollLeft = arguments[1];"
        "box.scrollTop = arguments[2];",
        where,
        left,
        top,
    )
    return driver.execute_script(GEOMETRY, where)


def hover(driver, where: str, i: int, j: int) -> str:
    """The tooltip over cell (i, j) of a heatmap."""
    return driver.execute_script(
        """const el = arguments[0].startsWith('step-') ? document.getElementById(arguments[0])
          : document.querySelector(arguments[0]);
        const c = el.querySelector('canvas'), b = c.getBoundingClientRect();
        const x = (arguments[2] + 0.5) * b.width / c.width;
        const y = (arguments[1] + 0.5) * b.height / c.height;
        c.dispatchEvent(new MouseEvent('mousemove', {clientX: b.left + x, clientY: b.top + y}));
        return document.querySelector('.gf-tip').textContent;""",
        where,
        i,
        j,
    )


MIN_CELL = 8  # px, as in report.js


def test_a_wide_input_is_drawn_with_readable_cells_and_sticky_token_labels(browser, tmp_path):
    """MiniLM's shape: 9 tokens x d_model 384, a strip one pixel high per cell before."""
    driver = need(browser)
    path, trace = char_report(tmp_path / "wide-9x384.html", 384, 1536, 9)
    url = open_report(driver, path)
    draw_card(driver, "decoder.X")
    g = geometry(driver, "step-decoder.X")
    assert (g["rows"], g["cols"]) == (9, 384)
    assert g["canvas"]["width"] / 384 >= MIN_CELL and g["canvas"]["height"] / 9 >= 14
    assert g["scrollW"] > g["clientW"]  # the box scrolls sideways, the page does not
    assert g["box"]["right"] <= driver.execute_script("return window.innerWidth")
    assert g["rowText"] == "T"
    moved = geometry(driver, "step-decoder.X", left=1500)
    assert moved["canvas"]["left"] == pytest.approx(g["canvas"]["left"] - 1500, abs=1)
    assert moved["row"]["left"] == pytest.approx(g["row"]["left"], abs=1)  # the label stays
    assert (
        moved["box"]["left"]
        <= moved["row"]["left"]
        < moved["row"]["right"]
        <= moved["canvas"]["right"]
    )
    X = trace["decoder.X"]
    tip = hover(driver, "step-decoder.X", 2, 300)
    assert tip.startswith("␣ × col 300: ") and float(tip.split(": ")[1]) == pytest.approx(
        X[2, 300], rel=2e-3, abs=1e-4
    )
    chips = driver.execute_script(
        "return Array.from(document.querySelectorAll('#gf-steps .tok'), e => e.textContent)"
    )
    assert chips[:9] == ["T", "o", "␣", "b", "e", ",", "⏎", "o", "r"]  # whitespace visible
    screenshot(driver, tmp_path, "wide-9x384.png")
    assert_offline_and_clean(driver, url)


def test_128_tokens_by_1536_scrolls_both_ways_and_shows_masked_scores(browser, tmp_path):
    driver = need(browser)
    path, trace = char_report(tmp_path / "wide-128x1536.html", 384, 1536, 128)
    url = open_report(driver, path)
    draw_card(driver, "decoder.0.ffn.hidden")
    g = geometry(driver, "step-decoder.0.ffn.hidden")
    assert (g["rows"], g["cols"]) == (128, 1536)
    assert g["canvas"]["width"] >= 1536 * MIN_CELL and g["canvas"]["height"] >= 128 * MIN_CELL
    assert g["scrollW"] > g["clientW"] and g["scrollH"] > g["clientH"]
    assert g["clientH"] <= 720  # a bounded box, not a 1800 px tall card
    moved = geometry(driver, "step-decoder.0.ffn.hidden", left=5000, top=600)
    assert moved["row"]["left"] == pytest.approx(g["row"]["left"], abs=1)
    labels = driver.execute_script(
        """const box = document.querySelector('#step-decoder\\\\.0\\\\.ffn\\\\.hidden .hm-box');
        const b = box.getBoundingClientRect();
        return Array.from(box.querySelectorAll('.hm-rows span')).filter(s => {
          const r = s.getBoundingClientRect();
          return r.top >= b.top && r.bottom <= b.bottom && r.left >= b.left; }).length;"""
    )
    assert labels > 20  # row labels of the rows scrolled to, in view
    H = trace["decoder.0.ffn.hidden"]
    tip = hover(driver, "step-decoder.0.ffn.hidden", 60, 1000)
    assert float(tip.split(": ")[1]) == pytest.approx(H[60, 1000], rel=2e-3, abs=1e-3)

    # The attention map: 128 x 128, the column header sticks to the top of its box.
    att = "figure.att:not([hidden])"
    a = geometry(driver, att)
    assert a["canvas"]["width"] / 128 >= MIN_CELL and a["col"] is not None
    down = geometry(driver, att, top=900)
    assert down["col"]["top"] == pytest.approx(a["col"]["top"], abs=1)
    assert down["canvas"]["top"] == pytest.approx(a["canvas"]["top"] - 900, abs=1)

    # Masked scores: hatched (transparent over the hatching), "masked" on hover.
    draw_card(driver, "decoder.0.self_attn.head0.scaled")
    where = "step-decoder.0.self_attn.head0.scaled"
    alpha = driver.execute_script(
        """const c = document.getElementById(arguments[0]).querySelector('canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let masked = 0, drawn = 0;
        for (let i = 3; i < d.length; i += 4) d[i] === 0 ? masked++ : drawn++;
        return {masked, drawn, cls: c.className,
                hatch: getComputedStyle(c).backgroundImage};""",
        where,
    )
    assert alpha["masked"] == 128 * 127 // 2 and alpha["drawn"] == 128 * 129 // 2
    assert alpha["cls"] == "masked" and "repeating-linear-gradient" in alpha["hatch"]
    assert hover(driver, where, 3, 90).endswith(": masked (−∞ before the softmax)")
    S = trace["decoder.0.self_attn.head0.scaled"]
    assert float(hover(driver, where, 90, 3).split(": ")[1]) == pytest.approx(S[90, 3], rel=2e-3)
    draw_card(driver, "decoder.0.self_attn.head0.A")  # A: the zeros are zeros, not masked
    assert hover(driver, "step-decoder.0.self_attn.head0.A", 3, 90).endswith(": 0")
    screenshot(driver, tmp_path, "wide-128x1536.png")
    assert_offline_and_clean(driver, url)


def test_masked_scores_in_tables_and_one_head_numbering_in_the_picker(browser, tmp_path):
    driver = need(browser)
    from selenium.webdriver.common.by import By

    path = tmp_path / "raschka.html"
    path.write_text(render_html(walkthrough.self_attention()), encoding="utf-8")
    url = open_report(driver, path)
    cells = driver.execute_script(
        """return Array.from(document.querySelectorAll('#step-causal\\\\.scaled td.masked'),
          td => [td.textContent, getComputedStyle(td).backgroundImage, td.title]);"""
    )
    assert len(cells) == 15 and all(t == "−∞" for t, _, _ in cells)
    assert all("repeating-linear-gradient" in bg and "masked" in title for _, bg, title in cells)
    assert_offline_and_clean(driver, url)

    path = tmp_path / "hello-world.html"
    path.write_text(render_html(walkthrough.hello_world()), encoding="utf-8")
    url = open_report(driver, path)
    note = driver.find_element(By.CSS_SELECTOR, ".heads-note")
    assert note.is_displayed() and "counted from 0" in note.text
    sites = driver.execute_script(
        "return Array.from(document.querySelectorAll('.pick-site option'), o => o.value)"
    )
    seen = set()
    for site in sites:
        choose(driver, "site", site)
        options = driver.execute_script(
            "return Array.from(document.querySelectorAll('.pick-head option'), o => o.text)"
        )
        assert options == ["head 0", "head 1"], (site, options)
        seen.add(site)
    assert {"", "div30", "model.encoder.self_attn"} <= seen
    choose(driver, "site", "")
    choose(driver, "head", "1")
    shown = shown_map(driver)
    assert shown["name"] == "head2.A" and "head 1 (the article's head 2)" in shown["caption"]
    assert_offline_and_clean(driver, url)


EVIL = [
    "</script><script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    '"><svg onload="window.__pwned = 3">',
    "<!--",
]


def test_markup_in_prompts_and_vocabularies_runs_nothing(browser, tmp_path):
    driver = need(browser)
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    cfg = Config(arch="decoder", vocab_size=8, d_model=16, n_heads=2, n_decoder_layers=1)
    params = weights.init(cfg, seed=0, std=0.5)
    ids = [0, 1, 2, 3] * 4  # 16 tokens: heatmaps, their labels in the JSON data
    words = [EVIL[i] for i in ids]
    with tracing(labels={"decoder": words}) as trace:
        R.forward(params, cfg, ids)
    vocab = EVIL + [f"v{i}" for i in range(4)]
    page = render_html(
        trace,
        title=EVIL[0],
        meta={"input": "".join(EVIL)},
        vocab=vocab,
        token_kind="bpe",
        tokens={"decoder": {"what": EVIL[1], "ids": ids, "pieces": words}},
        result={"summary": EVIL[2], "probabilities": {EVIL[3]: 0.25, EVIL[0]: 0.75}},
    )
    path = tmp_path / "evil.html"
    path.write_text(page, encoding="utf-8")
    url = open_report(driver, path)
    choose(driver, "site", "decoder.self_attn")
    canvas = driver.find_element(By.CSS_SELECTOR, "figure.att:not([hidden]) canvas")
    ActionChains(driver).move_to_element(canvas).perform()
    state = driver.execute_script(
        """return {pwned: window.__pwned === undefined ? null : window.__pwned,
          imgs: document.querySelectorAll('img, svg:not(.plot) *[onload]').length,
          scripts: document.scripts.length, text: document.body.textContent,
          tip: document.querySelector('.gf-tip').textContent};"""
    )
    assert state["pwned"] is None and state["imgs"] == 0 and state["scripts"] == 2
    for evil in EVIL:
        assert evil.replace(" ", "␣") in state["text"]  # shown as text, spaces visible
    assert "<" in state["tip"]
    screenshot(driver, tmp_path, "evil.png")
    assert_offline_and_clean(driver, url)


def test_an_explain_report_opens_with_its_tokens_and_closes_with_its_result(browser, tmp_path):
    """The shipped translator's report from the command line: the source read as text, token by
    token over its ids, first; the translation last; both reachable from the header."""
    driver = need(browser)
    from selenium.webdriver.common.by import By

    from glassformer.cli import main

    models = Path(__file__).resolve().parents[1] / "models"
    path = tmp_path / "en-es.html"
    argv = ["explain", str(models / "en-es"), "¿Dónde está?", "--html", str(path)]
    assert main([*argv, "--layers", "0", "--heads", "0"]) == 0
    url = open_report(driver, path)
    sections = driver.execute_script(
        "return [...document.querySelectorAll('section')].map(s => s.id)"
    )
    assert sections[0] == "gf-tokens" and sections[-1] == "gf-result"
    tokens = driver.find_element(By.ID, "gf-tokens")
    assert tokens.is_displayed()
    chips = [c.text for c in tokens.find_elements(By.CSS_SELECTOR, ".tokid .tok")]
    assert chips[:4] == ["␣¿", "Dónde", "␣está", "?"]  # the source, readable: no ▁
    ids = [c.text for c in tokens.find_elements(By.CSS_SELECTOR, ".tokid small")]
    assert len(ids) == len(chips) and all(i.isdecimal() for i in ids)
    driver.find_element(By.CSS_SELECTOR, 'nav a[href="#gf-result"]').click()
    result = driver.find_element(By.CSS_SELECTOR, "#gf-result .result")
    assert result.is_displayed() and "stopped at EOS" in result.text and "“" in result.text
    screenshot(driver, tmp_path, "en-es-result.png")
    driver.execute_script("window.scrollTo(0, 0)")
    screenshot(driver, tmp_path, "en-es-tokens.png")
    assert_offline_and_clean(driver, url)


def test_an_ablation_and_patching_report_shows_both_beside_the_run(browser, tmp_path):
    """`explain --ablate --patch-from --html`: the ablated run's rows, the changed ones tinted, and
    the patching heatmaps are on screen, reachable from the header."""
    driver = need(browser)
    from selenium.webdriver.common.by import By

    from glassformer.cli import main

    models = Path(__file__).resolve().parents[1] / "models"
    path, data = tmp_path / "touch.html", tmp_path / "touch.json"
    argv = ["explain", str(models / "en-es"), "Hello world.", "--patch-from", "Hello house.",
            "--ablate", "decoder.1.cross_attn", "--ablate", "decoder.2.cross_attn"]  # fmt: skip
    assert main([*argv, "--only", "logits", "--html", str(path), "--json", str(data)]) == 0
    told = json.loads(data.read_text())["interventions"]
    url = open_report(driver, path)
    driver.find_element(By.CSS_SELECTOR, 'nav a[href="#gf-ablation"]').click()
    rows = driver.find_elements(By.CSS_SELECTOR, "#gf-ablation table.touch tr")[1:]
    assert len(rows) == len(told["ablation"]["positions"]) and rows[0].is_displayed()
    changed = driver.find_elements(By.CSS_SELECTOR, "#gf-ablation tr.changed")
    assert len(changed) == sum(r["changed"] for r in told["ablation"]["positions"]) > 0
    red = changed[0].find_element(By.TAG_NAME, "td").value_of_css_property("background-color")
    assert red == "rgba(253, 232, 234, 1)"  # the tint of a changed prediction
    assert told["ablation"]["text_ablated"] in driver.find_element(By.ID, "gf-ablation").text
    heat = driver.find_elements(By.CSS_SELECTOR, "#gf-patching table.mat")
    assert len(heat) == 2 and all(t.is_displayed() for t in heat)  # self- and cross-attention
    screenshot(driver, tmp_path, "touch.png")
    assert_offline_and_clean(driver, url)


def test_a_why_report_draws_the_choice_the_graph_and_the_head(browser, tmp_path):
    """`explain --why --versus --html`: the section is reachable from the header, the graph's SVG
    is drawn with one shape per node of the JSON, each node's title its exact value, and the page
    stays offline and quiet."""
    driver = need(browser)
    from selenium.webdriver.common.by import By

    from glassformer.cli import main

    models = Path(__file__).resolve().parents[1] / "models"
    path, data = tmp_path / "why.html", tmp_path / "why.json"
    argv = ["explain", str(models / "en-es"), "Hello world.", "--why", "--versus", "Hola mundo."]
    assert main([*argv, "--only", "logits", "--html", str(path), "--json", str(data)]) == 0
    why = json.loads(data.read_text())["why"]
    url = open_report(driver, path)
    driver.find_element(By.CSS_SELECTOR, 'nav a[href="#gf-why"]').click()
    svg = driver.find_element(By.CSS_SELECTOR, "#gf-why svg.graph")
    assert svg.is_displayed() and svg.size["width"] > 400 and svg.size["height"] > 300
    nodes = why["circuit"]["graph"]["nodes"]
    shapes = driver.find_elements(By.CSS_SELECTOR, "#gf-why svg.graph g.node")
    assert len(shapes) == len(nodes)
    titles = driver.execute_script(
        "return [...document.querySelectorAll('#gf-why svg.graph g.node title')]"
        ".map(t => t.textContent)"
    )
    said = {t.split(" (")[0].split(":")[0]: float(t.rsplit(": ", 1)[1]) for t in titles}
    assert said == pytest.approx({n["name"]: n["value"] for n in nodes}, rel=1e-5, abs=1e-9)
    text = driver.find_element(By.ID, "gf-why").text
    assert "Kept “Hola el mundo.” over “Hola mundo.”" in text and why["qk"]["head"] in text
    screenshot(driver, tmp_path, "why.png")
    assert_offline_and_clean(driver, url)


def test_a_faithfulness_page_draws_each_curve_where_its_numbers_are(browser, tmp_path):
    """`faithfulness --html` (explain/html_faithfulness.py) in Chromium: per kind of unit, the
    table ranked by insertion − deletion, the sentence naming its first row, and two panels whose
    every polyline places each point's height linearly in its value (higher logit, higher up),
    one polyline per curve; the page loads nothing."""
    driver = need(browser)
    from selenium.webdriver.common.by import By
    from test_faithfulness import built

    from glassformer.explain import html_faithfulness as HF
    from glassformer.explain.html_touch import probe_page

    *_, tokens, parts = built("decoder", 3)
    d = {"input": list("abcdefg"), "token": "x", "position": 6, "seed": 3,
         "tokens": tokens.to_dict(), "components": parts.to_dict(), "notes": []}  # fmt: skip
    path = tmp_path / "faithfulness.html"
    path.write_text(
        probe_page("faithfulness", {}, [("f", "Faithfulness", HF.faithfulness_section(d))])
    )
    driver.get_log("browser")
    driver.get_log("performance")
    url = path.resolve().as_uri()
    driver.get(url)
    tables = driver.find_elements(By.CSS_SELECTOR, "table.faithfulness")
    assert len(tables) == 2
    for table, report in zip(tables, (d["tokens"], d["components"]), strict=True):
        rows = [r.text for r in table.find_elements(By.TAG_NAME, "tr")[1:]]
        gaps = {
            HF.said(c["method"]): c["insertion_area"] - c["deletion_area"] for c in report["curves"]
        }
        shown = [r.split(" ", 1)[1].rsplit(" ", 3)[0] for r in rows]
        assert sorted(shown) == sorted(gaps) and [gaps[m] for m in shown] == sorted(
            gaps.values(), reverse=True
        )
    panels = driver.find_elements(By.CSS_SELECTOR, ".faithfulness-curves svg")
    assert len(panels) == 4 and all(p.is_displayed() for p in panels)
    width = driver.execute_script("return window.innerWidth")
    assert all(p.rect["x"] + p.rect["width"] <= width for p in panels)
    for panel, (report, which) in zip(
        panels,
        [(d[k], w) for k in ("tokens", "components") for w in ("deletion", "insertion")],
        strict=True,
    ):
        lines = [
            p for p in panel.find_elements(By.TAG_NAME, "polyline")
            if p.get_attribute("stroke-width") == "2"
        ]  # fmt: skip
        assert len(lines) == len(report["curves"])
        for line, c in zip(lines, report["curves"], strict=True):
            ys = np.array([float(p.split(",")[1]) for p in line.get_attribute("points").split()])
            v = np.asarray(c[which])
            assert len(ys) == len(v)
            slope, at = np.polyfit(v, ys, 1) if np.ptp(v) else (-1.0, ys[0] + v[0])
            assert slope < 0 and np.abs(ys - (at + slope * v)).max() < 0.1  # drawn to 0.1 px
    best = max(d["components"]["curves"], key=lambda c: c["insertion_area"] - c["deletion_area"])
    assert (
        f"On this input {HF.said(best['method'])} is the most faithful"
        in driver.page_source.replace("<b>", "").replace("</b>", "")
    )
    screenshot(driver, tmp_path, "faithfulness.png")
    assert_offline_and_clean(driver, url)
