"""The explorer's top examples (issue 41, point 3) in a real browser (headless Chromium, the
fixtures of tests/test_serve_browser.py): `serve MODEL --store DIR` puts a "Top examples" box on
the card of each step the store holds; a neuron of an FFN's hidden layer and a head (the norm of
its output rows) list the contexts that `corpus.top.top_examples` ranks, the token marked with
its value. No console error, nothing fetched from elsewhere.
"""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("torch")

from test_browser import browser, need  # noqa: E402, F401 (the Chromium fixture)
from test_corpus import LINES  # noqa: E402
from test_serve_browser import CHAR_LM, no_errors_and_nothing_leaves, until  # noqa: E402

import glassformer  # noqa: E402
from glassformer.corpus.store import open_store  # noqa: E402
from glassformer.corpus.top import top_examples  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402

STEPS = "decoder.1.ffn.hidden,decoder.0.self_attn.head1.C"


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    d = tmp_path_factory.mktemp("store")
    (d / "lines.txt").write_text("\n".join(LINES) + "\n")
    glassformer.load(CHAR_LM).record_corpus(d / "lines.txt", steps=STEPS, out=d / "s")
    return open_store(d / "s")


@pytest.fixture(scope="module")
def server(stored):
    with serving(Explorer(Registry([CHAR_LM], walkthroughs=False), stores=[stored])) as url:
        yield url


SHOW = """
const a = document.querySelector(`#steps article[data-name="${arguments[0]}"]`);
if (!a) return false;
for (let d = a.parentElement; d; d = d.parentElement) if (d.tagName === 'DETAILS') d.open = true;
a.scrollIntoView();
return !a.classList.contains('pending') && a.querySelector('.top-box') !== null;
"""
SHOWN = """
const a = document.querySelector(`#steps article[data-name="${arguments[0]}"]`);
const rows = [...a.querySelectorAll('.top-example')];
return rows.length === arguments[1] && rows.map((r) => [Number(r.dataset.row),
  Number(r.querySelector('.top-value').title), r.querySelector('.top-token').textContent]);
"""


def test_a_cards_top_examples_in_chromium(browser, server, stored):  # noqa: F811
    driver = need(browser)
    from selenium.webdriver.common.by import By

    driver.get("about:blank")
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(server + "#model=char-lm&text=ROMEO: But soft")
    until(driver, "return document.getElementById('app').dataset.ready")
    driver.find_element(By.CSS_SELECTOR, "[data-tab='steps']").click()
    for name, unit in (("decoder.1.ffn.hidden", "decoder.1.ffn.hidden:7"),
                       ("decoder.0.self_attn.head1.C", "decoder.0.self_attn.head1")):  # fmt: skip
        until(driver, SHOW, name)
        card = driver.find_element(By.CSS_SELECTOR, f'#steps article[data-name="{name}"]')
        if unit.endswith(":7"):
            box = card.find_element(By.CSS_SELECTOR, ".top-unit")
            box.clear()
            box.send_keys("7")
        card.find_element(By.CSS_SELECTOR, ".top-go").click()
        want = top_examples(stored, unit, k=10).examples
        got = until(driver, SHOWN, name, len(want))
        assert [r for r, _, _ in got] == [e["row"] for e in want]
        assert [v for _, v, _ in got] == pytest.approx([e["value"] for e in want], rel=1e-12)
        assert [t for _, _, t in got] == [e["token"] for e in want]
    # a step the store does not hold has no box
    assert not driver.execute_script(
        'return document.querySelector(\'#steps article[data-name="decoder.0.ffn.hidden"] '
        ".top-box')"
    )
    no_errors_and_nothing_leaves(driver, server)


def test_the_store_and_top_actions(stored):
    """The actions behind the box: a model with its store lists the store's steps and answers
    top as top_examples does; a model without one lists none and refuses top (404)."""
    from glassformer.serve.sessions import NotFound

    with_store = Explorer(Registry([CHAR_LM], walkthroughs=False), stores=[stored])
    assert with_store.store({"model": "char-lm"})["steps"] == list(stored.steps)
    got = with_store.top({"model": "char-lm", "unit": "decoder.1.ffn.hidden:7", "k": 3})
    want = top_examples(stored, "decoder.1.ffn.hidden:7", k=3)
    assert [e["row"] for e in got["examples"]] == [e["row"] for e in want.examples]
    without = Explorer(Registry([CHAR_LM], walkthroughs=False))
    assert without.store({"model": "char-lm"}) == {"store": None, "steps": [], "rows": 0}
    with pytest.raises(NotFound, match="no store of activations"):
        without.top({"model": "char-lm", "unit": "decoder.1.ffn.hidden:7"})
