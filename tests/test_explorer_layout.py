"""The explorer's model view, the map that stays and its layout (issue 39: point 2 and friction
10), in headless Chromium against a real server with the shipped char-lm (decoder) and en-es
(encoder-decoder) and a small classifier (encoder).

The Every head tab lays out every attention map of the run (oracle: the trace's own maps, by
site, layer and head) and a click opens that head on the Attention tab; the minimap in the
sticky tab bar stays on screen as the page scrolls and marks the sublayer the open view sits in
(oracle: the map shown, or the step card at the top of the screen); at 1280 and 1920 px wide no
element leaves the screen sideways, no label is cut, the model picture has no scroll box of its
own, and every step of the tour puts its box on the screen. Needs what tests/test_browser.py
needs; screenshots go to the tmp dir and GLASSFORMER_SCREENSHOT_DIR."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("torch")

from test_browser import browser, need  # noqa: E402, F401 (the Chromium fixture)
from test_explorer_reading import shot  # noqa: E402
from test_serve_browser import until  # noqa: E402

from glassformer import load  # noqa: E402
from glassformer.explain.select import attention_maps  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAR_LM, EN_ES = ROOT / "models" / "char-lm", ROOT / "models" / "en-es"
TEXTS = {"char-lm": "ROMEO: But soft", "en-es": "Where is the station?", "clf": "to be or not"}


# What leaves the screen sideways, or is cut: the page wider than the window; a label, button,
# heading or picker past an edge; text clipped by its box; a select narrower than its longest
# choice (the closed box cuts it: the cross-attention picker's "…encoder ke").
OFF_SCREEN = """
const W = document.documentElement.clientWidth, out = [];
const page = document.documentElement.scrollWidth;
if (page > W) out.push('page ' + page);
const name = e => e.id || e.className || e.tagName;
for (const e of document.querySelectorAll('label, select, button, h3, summary, .tabs, .picker')) {
  const r = e.getBoundingClientRect();
  if (!r.width || e.closest('[hidden]')) continue;
  if (r.right > W + 1 || r.left < -1) out.push('off: ' + name(e));
  const clips = getComputedStyle(e).overflowX !== 'visible';
  if (e.tagName !== 'SELECT' && clips && e.scrollWidth > e.clientWidth + 1)
    out.push('cut: ' + name(e) + ' ' + e.textContent.slice(0, 40));
  if (e.tagName === 'SELECT') {
    const shown = e.offsetWidth, style = e.getAttribute('style');
    e.style.maxWidth = 'none'; e.style.width = 'auto';
    const natural = e.offsetWidth;
    if (style === null) e.removeAttribute('style'); else e.setAttribute('style', style);
    if (natural > shown + 1) out.push('cut: ' + e.id + ' ' + shown + ' < ' + natural);
  }
}
return out;
"""


@pytest.fixture(scope="module")
def server(seeded_classifier):
    shown = [os.path.relpath(CHAR_LM), os.path.relpath(EN_ES), seeded_classifier]
    with serving(Explorer(Registry(shown))) as url:
        yield url


@pytest.fixture(scope="module")
def folders(seeded_classifier):
    return {"char-lm": CHAR_LM, "en-es": EN_ES, "clf": seeded_classifier}


def open_page(driver, server: str, model: str, width: int = 1280) -> None:
    driver.set_window_size(width, 1000)
    driver.get(server + "#model=none")
    driver.execute_script("localStorage.setItem('glassformer-tour-done', '1')")
    driver.get("about:blank")
    driver.get(server + f"#model={model}&text={TEXTS[model]}")
    until(driver, "return document.getElementById('app').dataset.ready")


@pytest.mark.parametrize("model", ["char-lm", "en-es", "clf"])
def test_the_model_view_shows_every_head_and_opens_one(browser, server, folders, model, tmp_path):  # noqa: F811
    driver = need(browser)
    open_page(driver, server, model)
    driver.execute_script("document.querySelector('.tabs [data-tab=heads]').click()")
    trace = load(folders[model]).trace(TEXTS[model], quiet=True)
    names = {(a.site, a.layer, a.head): a.step.name for a in attention_maps(trace.steps)}
    want = set(names)
    drawn = "return document.querySelectorAll('#model-view .mv-thumb canvas').length"
    until(driver, drawn + f" === {len(want)}")
    shown = driver.execute_script(
        "return Array.from(document.querySelectorAll('#model-view .mv-thumb'),"
        " t => [t.dataset.site, +t.dataset.layer, +t.dataset.head])"
    )
    assert sorted(map(tuple, shown)) == sorted(want)
    shot(driver, tmp_path, f"model-view-{model}.png", "tab-heads")
    site, layer, head = max(want)  # the last site's last layer and head
    driver.execute_script(
        "document.querySelector(`#model-view .mv-thumb[data-site='${arguments[0]}']"
        "[data-layer='${arguments[1]}'][data-head='${arguments[2]}']`).click()",
        site,
        layer,
        head,
    )
    shown = (
        "return !document.getElementById('tab-attention').hidden &&"
        " document.getElementById('map').dataset.name === arguments[0]"
    )
    assert until(driver, shown, names[site, layer, head])  # that head's map, drawn


def test_the_minimap_stays_in_view_and_marks_the_open_view(browser, server, tmp_path):  # noqa: F811
    driver = need(browser)
    open_page(driver, server, "en-es")
    mark = "return document.getElementById('minimap').dataset.current"
    assert until(driver, mark) == "encoder.0.self_attn"  # the map the page opens on
    driver.execute_script(
        "document.querySelector('#minimap [data-step=\"decoder.2.cross_attn\"]').click()"
    )
    until(driver, "return document.getElementById('map').dataset.name"
          " === 'decoder.2.cross_attn.head0.A'")  # fmt: skip
    assert until(driver, mark) == "decoder.2.cross_attn"
    # The Every step tab: scrolled far down, the bar is still on screen and marks the card at
    # its bottom edge.
    driver.execute_script("document.querySelector('.tabs [data-tab=steps]').click()")
    driver.execute_script("document.getElementById('open-layers').click()")
    card = "document.querySelector('article.step[data-name=\"decoder.1.ffn.hidden\"]')"
    until(driver, f"return {card}")
    gap = (
        f"{card}.getBoundingClientRect().top - document.querySelector('.tabs')"
        ".getBoundingClientRect().bottom"
    )
    for _ in range(40):  # the card right below the bar, once the cards above it have loaded
        driver.execute_script(f"window.scrollBy(0, {gap} + 2)")
        time.sleep(0.25)
        if abs(driver.execute_script(f"return {gap}") + 2) < 3:
            break
    top = until(driver, "const r = document.getElementById('minimap').getBoundingClientRect();"
                " return r.height > 0 && [r.top, r.bottom]")  # fmt: skip
    assert 0 <= top[0] and top[1] < 120  # stuck at the top of the screen
    current = until(driver, "const m = document.getElementById('minimap').dataset.current;"
                    " return m && m.startsWith('decoder.1') && m")  # fmt: skip
    assert current == "decoder.1.ffn"
    shot(driver, tmp_path, "minimap-steps.png")


@pytest.mark.parametrize("width", [1280, 1920])
@pytest.mark.parametrize("model", ["char-lm", "en-es"])
def test_nothing_leaves_the_screen_at_common_widths(browser, server, model, width, tmp_path):  # noqa: F811
    driver = need(browser)
    open_page(driver, server, model, width)
    assert driver.execute_script(  # the model picture: no scroll box of its own
        "const s = document.querySelector('.gf-ov-scroll');"
        "return s && s.scrollHeight <= s.clientHeight + 1 && s.scrollWidth <= s.clientWidth + 1"
    )
    for tab in ("attention", "heads", "steps", "generate", "intervene", "compare"):
        driver.execute_script(f"document.querySelector('.tabs [data-tab={tab}]').click()")
        driver.execute_script("return new Promise(r => setTimeout(r, 400))")
        over = driver.execute_script(OFF_SCREEN)
        assert over == [], (tab, over)
    shot(driver, tmp_path, f"layout-{model}-{width}.png")


@pytest.mark.parametrize("width", [1280, 1920])
@pytest.mark.parametrize("model", ["char-lm", "en-es"])
def test_every_step_of_the_tour_is_on_the_screen(browser, server, model, width):  # noqa: F811
    """The box of the step on char-lm's map sat at -11 px (above the screen): the map is
    taller than the room below it, and the box went above it whatever room was there."""
    driver = need(browser)
    open_page(driver, server, model, width)
    driver.execute_script("document.getElementById('tour').click()")
    while True:
        box = until(driver, "const b = document.querySelector('.gf-tour');"
                    " if (!b) return null; const r = b.getBoundingClientRect();"
                    " return [b.dataset.step, r.top, r.bottom, r.left, r.right]")  # fmt: skip
        h, w = driver.execute_script("return [innerHeight, innerWidth]")
        assert 0 <= box[1] and box[2] <= h and 0 <= box[3] and box[4] <= w, (box, h, w)
        if not driver.execute_script("return !!document.querySelector('.gf-tour-next')"):
            break
        driver.execute_script("document.querySelector('.gf-tour-next').click()")
        until(driver, f"return document.querySelector('.gf-tour').dataset.step !== '{box[0]}'")
