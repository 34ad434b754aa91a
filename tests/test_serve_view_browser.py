"""The float32 view in a real browser (headless Chromium, as tests/test_serve_browser.py): the
shipped char-LM served with `--view float32` shows the reference's attention within float32
rounding, says whose numbers they are, checks its badge against the float64 reference once
typing pauses, and a step card opened later gets the values made then; the shipped translator
so served says its own translation and draws its cross-attention as the reference does. No
console error.
"""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch")

from test_browser import browser, need  # noqa: E402, F401 (the Chromium fixture)
from test_serve_browser import (  # noqa: E402
    CHAR_LM,
    EN_ES,
    PROMPT,
    choose,
    hover,
    no_errors_and_nothing_leaves,
    until,
)

from glassformer import load as load_model  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402


@pytest.fixture(scope="module")
def server():
    with serving(Explorer(Registry([CHAR_LM, EN_ES], walkthroughs=False), view="float32")) as url:
        yield url


def test_the_float32_view_in_chromium(browser, server):  # noqa: F811
    driver = need(browser)
    from selenium.webdriver.common.by import By

    trace = load_model(CHAR_LM).trace(PROMPT)
    driver.set_window_size(1280, 1000)
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(server + "#model=char-lm&text=ROMEO: Bu")
    until(driver, "return document.getElementById('app').dataset.ready")
    before = driver.execute_script("return document.getElementById('app').dataset.ready")
    driver.find_element(By.ID, "text").send_keys("t soft")
    until(driver, "return document.getElementById('app').dataset.ready !== arguments[0] && "
          "document.querySelectorAll('#tokens .tok').length === 15", before)  # fmt: skip
    status = driver.find_element(By.ID, "status").text
    assert "values: PyTorch float32 (a view; the float64 reference on demand)" in status
    A = trace["decoder.0.self_attn.head0.A"]
    for i, j in ((3, 1), (14, 14), (9, 0)):
        assert hover(driver, i, j) == pytest.approx(A[i, j], abs=1e-5)
    badge = until(driver, "const b = document.getElementById('badge');"
                  "return b.className.includes('ok') && b.textContent", timeout=60)  # fmt: skip
    assert "float32 view vs NumPy float64" in badge

    # Every step: the first card is a step the view kept by name only (the token embeddings):
    # its values are made when the card loads, and it loads.
    driver.find_element(By.CSS_SELECTOR, "[data-tab='steps']").click()
    name = until(driver, "const a = document.querySelector('#steps article.step');"
                 "return a && !a.classList.contains('pending') && a.dataset.name")  # fmt: skip
    assert not name.endswith((".A", ".mask")) and name != "logits"
    card = driver.find_element(By.CSS_SELECTOR, f"#steps article.step[data-name='{name}']")
    assert "loading" not in card.text and trace.step(name).equation in card.text
    no_errors_and_nothing_leaves(driver, server)


def test_a_translators_float32_view_in_chromium(browser, server):  # noqa: F811
    """en-es under the view: the translation it always gave, the cross-attention map of its
    decoder's last layer within float32 rounding of the reference's, the badge checked, a step
    card (recorded by name only) loaded. No console error."""
    driver = need(browser)
    from selenium.webdriver.common.by import By

    text = "Where is the station?"
    m = load_model(EN_ES)
    trace = m.trace(text)
    driver.get("about:blank")
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(server + f"#model=en-es&text={text}")
    until(driver, "return document.getElementById('app').dataset.ready")
    status = driver.execute_script("return document.getElementById('status').textContent")
    assert "values: PyTorch float32 (a view; the float64 reference on demand)" in status
    shown = driver.execute_script(
        "return document.querySelector('#output .translation').textContent"
    )
    assert shown == "¿Dónde está la estación?"
    choose(driver, "site", "decoder.cross_attn")
    choose(driver, "layer", "2")
    name = "decoder.2.cross_attn.head0.A"
    drawn = "document.getElementById('map').dataset.name === arguments[0]"
    until(driver, f"return {drawn} && document.querySelector('#map table.mat')", name)
    A = trace[name]  # (decoder tokens, source tokens): a small map, drawn as a table
    cell = "return document.querySelector(`#map table.mat tbody tr:nth-child(${arguments[0] + 2})"
    cell += " td:nth-child(${arguments[1] + 2})`).title.split('exact: ')[1]"
    for i, j in ((1, 0), (4, 3), (A.shape[0] - 1, A.shape[1] - 1)):
        assert float(driver.execute_script(cell, i, j)) == pytest.approx(A[i, j], abs=1e-5)
    badge = until(driver, "const b = document.getElementById('badge');"
                  "return b.className.includes('ok') && b.textContent", timeout=60)  # fmt: skip
    assert "float32 view vs NumPy float64" in badge
    driver.find_element(By.CSS_SELECTOR, "[data-tab='steps']").click()
    card = until(driver, "const a = document.querySelector('#steps article.step');"
                 "return a && !a.classList.contains('pending') && a.dataset.name")  # fmt: skip
    assert card.startswith("encoder.") and trace.step(card).equation
    no_errors_and_nothing_leaves(driver, server)
