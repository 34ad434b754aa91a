"""An SAE's feature card in the explorer (issue 41, point 4), in headless Chromium with the
fixtures of tests/test_serve_browser.py: `serve MODEL --store DIR --sae SAE` puts a "Feature of
the SAE" box on the card of the step the SAE reads; a feature's top examples are the ones
`corpus.top.top_examples` ranks with that SAE, its logit effect `corpus.evaluate.effect`'s.
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
from glassformer.corpus import saelens  # noqa: E402
from glassformer.corpus.evaluate import effect  # noqa: E402
from glassformer.corpus.sae import SAEConfig, StoreRows, TrainConfig  # noqa: E402
from glassformer.corpus.store import open_store  # noqa: E402
from glassformer.corpus.top import top_examples  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402
from glassformer.training.autoencoder import train  # noqa: E402

STEP = "decoder.1.out"


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """The char-LM's stream after block 1 over a few lines, and an SAE of 32 features on it."""
    d = tmp_path_factory.mktemp("sae-store")
    (d / "lines.txt").write_text("\n".join(LINES) + "\n")
    m = glassformer.load(CHAR_LM)
    m.record_corpus(d / "lines.txt", steps=STEP, out=d / "s")
    store = open_store(d / "s")
    cfg = SAEConfig(d_in=128, d_sae=32, step=STEP)
    train(StoreRows(store, STEP), cfg, TrainConfig(steps=20, batch_size=64, lr=3e-3), d / "sae")
    return store, (str(d / "sae"), *saelens.read(d / "sae")), m


@pytest.fixture(scope="module")
def server(stored):
    store, sae, _ = stored
    registry = Registry([CHAR_LM], walkthroughs=False)
    with serving(Explorer(registry, stores=[store], saes=[sae])) as url:
        yield url


SHOW = """
const a = document.querySelector(`#steps article[data-name="${arguments[0]}"]`);
if (!a) return false;
for (let d = a.parentElement; d; d = d.parentElement) if (d.tagName === 'DETAILS') d.open = true;
a.scrollIntoView();
return !a.classList.contains('pending') && a.querySelector('.feature-box') !== null;
"""
SHOWN = """
const box = document.querySelector(`#steps article[data-name="${arguments[0]}"] .feature-box`);
const rows = [...box.querySelectorAll('.top-example')];
return rows.length === arguments[1] && [rows.map((r) => [Number(r.dataset.row),
  Number(r.querySelector('.top-value').title)]), box.querySelector('.feature-effect').textContent];
"""


def test_a_feature_card_in_chromium(browser, server, stored):  # noqa: F811
    driver = need(browser)
    from selenium.webdriver.common.by import By

    store, (folder, cfg, p), m = stored
    feature = next(i for i in range(cfg.d_sae) if top_examples(store, f"feature:{i}", k=3,
                   sae=folder).examples)  # fmt: skip
    want = top_examples(store, f"feature:{feature}", k=10, sae=folder).examples
    up = effect(m, cfg, p, feature)["up"]
    driver.get("about:blank")
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(server + "#model=char-lm&text=ROMEO: But soft")
    until(driver, "return document.getElementById('app').dataset.ready")
    driver.find_element(By.CSS_SELECTOR, "[data-tab='steps']").click()
    until(driver, SHOW, STEP)
    card = driver.find_element(By.CSS_SELECTOR, f'#steps article[data-name="{STEP}"]')
    box = card.find_element(By.CSS_SELECTOR, ".feature-unit")
    box.clear()
    box.send_keys(str(feature))
    card.find_element(By.CSS_SELECTOR, ".feature-go").click()
    rows, said = until(driver, SHOWN, STEP, len(want))
    assert [r for r, _ in rows] == [e["row"] for e in want]
    assert [v for _, v in rows] == pytest.approx([e["value"] for e in want], rel=1e-12)
    assert said.startswith(f"pushes up: {up[0][0]} ")
    no_errors_and_nothing_leaves(driver, server)


def test_the_top_action_with_an_sae(stored):
    """The action behind the box: top with `sae` answers top_examples with that SAE plus the
    feature's logit effect; no SAE given, or a unit that is not a feature, is refused."""
    from glassformer.serve.fields import RequestError
    from glassformer.serve.sessions import NotFound

    store, sae, m = stored
    registry = Registry([CHAR_LM], walkthroughs=False)
    ex = Explorer(registry, stores=[store], saes=[sae])
    assert ex.store({"model": "char-lm"})["features"] == {STEP: {"sae": 0, "d_sae": 32}}
    got = ex.top({"model": "char-lm", "unit": "feature:3", "k": 4, "sae": 0})
    want = top_examples(store, "feature:3", k=4, sae=sae[0])
    assert [e["row"] for e in got["examples"]] == [e["row"] for e in want.examples]
    assert got["up"] == effect(m, sae[1], sae[2], 3)["up"]
    with pytest.raises(RequestError, match="must be feature:N"):
        ex.top({"model": "char-lm", "unit": f"{STEP}:3", "sae": 0})
    with pytest.raises(NotFound, match="no SAE was given"):
        Explorer(registry, stores=[store]).top({"model": "char-lm", "unit": "feature:3", "sae": 0})
