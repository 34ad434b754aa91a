"""The float32 view in a real browser (headless Chromium, as tests/test_serve_browser.py): the
shipped char-LM served with `--view float32` shows the reference's attention within float32
rounding, says whose numbers they are, checks its badge against the float64 reference once
typing pauses, and a step card opened later gets the values made then. No console error.
"""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch")

from test_browser import browser, need  # noqa: E402, F401 (the Chromium fixture)
from test_serve_browser import CHAR_LM, PROMPT, hover, no_errors_and_nothing_leaves, until  # noqa: E402

from glassformer import load as load_model  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402


@pytest.fixture(scope="module")
def server():
    with serving(Explorer(Registry([CHAR_LM], walkthroughs=False), view="float32")) as url:
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
