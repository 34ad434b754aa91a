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
    for value in ("105.21", "4.6770e-10", "11.4639", "0.224378", "74526.1"):
        assert value in text, value
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
    assert inked > 100  # coloured cells, not a blank canvas
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
