"""The explorer's guided tour (issue 26, point 7), in headless Chromium: offered on a first visit,
its steps follow one prediction from the text to the output and outline parts that are on the
page, their words read from the page (the model's own token count and output), and once taken or
declined it is remembered across reloads; the "tour" button starts it again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("selenium")

from test_browser import browser, need  # noqa: E402, F401

from glassformer.serve import Explorer, Registry, serving  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server():
    explorer = Explorer(Registry([os.path.relpath(ROOT / "models" / "char-lm")]))
    with serving(explorer) as url:
        yield url


def until(driver, script: str, timeout: float = 60):
    end = time.time() + timeout
    while not (value := driver.execute_script(script)):
        if time.time() > end:
            raise AssertionError(f"timed out waiting for: {script}")
        time.sleep(0.05)
    return value


def test_the_tour_is_offered_once_and_walks_one_prediction(browser, server):  # noqa: F811
    driver = need(browser)
    driver.set_window_size(1280, 1000)
    driver.get(server + "#model=char-lm&text=ROMEO: But")
    until(driver, "return document.getElementById('app').dataset.ready")
    until(driver, "return document.getElementById('tour-offer')")
    driver.execute_script("document.querySelector('#tour-offer button').click()")
    seen = []
    while True:
        step = until(driver, "const b = document.querySelector('.gf-tour');"
                     "return b && [b.dataset.step, b.innerText]")  # fmt: skip
        outlined = driver.execute_script(
            "return Array.from(document.querySelectorAll('.gf-tour-target'), e => e.id || "
            "e.dataset.tab)"
        )
        assert len(outlined) == 1, outlined  # one part of the page at a time
        seen.append((step[1], outlined[0]))
        nxt = driver.execute_script("return !!document.querySelector('.gf-tour-next')")
        if not nxt:
            break
        driver.execute_script("document.querySelector('.gf-tour-next').click()")
        until(driver, f"return document.querySelector('.gf-tour').dataset.step !== '{step[0]}'")
    assert 5 <= len(seen) <= 8
    where = [w for _, w in seen]
    assert where[0] == "text" and "tokens" in where and "map" in where and "output" in where
    n = driver.execute_script("return document.querySelectorAll('#tokens .tok').length")
    words = dict((w, t) for t, w in seen)
    assert f"{n} tokens" in words["tokens"]  # read from the page, for this model and text
    # The output quoted as the page shows it (issue 39, friction 3: the tour read innerText,
    # which loses the "#" the stylesheet prints before a token's id and the gaps between parts:
    # "␣554.4%,1012.5%" where the page shows "␣ #5 54.4%").
    piece, tid, p = driver.execute_script(
        "const c = document.querySelector('#output .tok');"
        "return [c.firstChild.textContent, c.querySelector('small.id').textContent,"
        " c.nextElementSibling.textContent]"
    )
    assert f"Next token: {piece} #{tid} {p}" in words["output"], words["output"]
    driver.execute_script("document.querySelector('.gf-tour-done').click()")
    assert driver.execute_script("return document.querySelector('.gf-tour')") is None
    driver.refresh()
    until(driver, "return document.getElementById('app').dataset.ready")
    time.sleep(0.5)
    assert driver.execute_script("return document.getElementById('tour-offer')") is None
    driver.execute_script("document.getElementById('tour').click()")  # asked for again
    assert until(driver, "return document.querySelector('.gf-tour')")
    driver.execute_script("document.querySelector('.gf-tour-close').click()")
    assert driver.execute_script("return document.querySelector('.gf-tour')") is None
