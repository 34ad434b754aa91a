"""The live explorer in a real browser: headless Chromium, driven by selenium, against a real
server on a free port of 127.0.0.1.

Typing, the attention map and its head picker, the neuron view, the temperature slider, a beam
search stepped through, a head ablated, a translation step by step: each time the numbers the
page shows are compared with the engine's own (the reference trace, `decoding`, `interventions`)
on the same input. No console errors; no request leaves the server. Needs what
tests/test_browser.py needs (chromium, chromedriver, selenium); GLASSFORMER_SKIP_BROWSER=1
skips. Screenshots go to the tmp dir and, if GLASSFORMER_SCREENSHOT_DIR is set, there too (the
README's are these: GLASSFORMER_SCREENSHOT_DIR=docs).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch")

from test_browser import browser, need  # noqa: E402, F401 (the Chromium fixture)

from glassformer import decoding  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.inspect import interventions as I  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.torch_steps import many_step_fn, step_fn  # noqa: E402
from glassformer.trace import tracing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAR_LM, EN_ES = ROOT / "models" / "char-lm", ROOT / "models" / "en-es"
PROMPT = "ROMEO: But soft"


@pytest.fixture(scope="module")
def wide_dir(tmp_path_factory):
    from test_serve import wide_checkpoint

    return wide_checkpoint(tmp_path_factory.mktemp("wide") / "wide")


@pytest.fixture(scope="module")
def server(wide_dir):
    shown = [os.path.relpath(CHAR_LM), os.path.relpath(EN_ES)]  # as a user types them
    explorer = Explorer(Registry([*shown, wide_dir]))
    with serving(explorer) as url:
        yield url


def until(driver, script: str, *args, timeout: float = 60):
    """Wait until the script returns something truthy; return it."""
    end = time.time() + timeout
    while True:
        value = driver.execute_script(script, *args)
        if value:
            return value
        if time.time() > end:
            raise AssertionError(f"timed out waiting for: {script}")
        time.sleep(0.05)


def shot(driver, tmp_path: Path, name: str, element_id: str | None = None, above: int = 8):
    if element_id:
        driver.execute_script(
            "const e = document.getElementById(arguments[0]);"
            "window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - arguments[1]);",
            element_id,
            above,
        )
    else:
        driver.execute_script("window.scrollTo(0, 0)")
    driver.execute_script("document.querySelector('.gf-tip').hidden = true")
    time.sleep(0.2)
    path = tmp_path / name
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    if out := os.environ.get("GLASSFORMER_SCREENSHOT_DIR"):
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / name)


def ready(driver) -> str:
    return driver.execute_script("return document.getElementById('app').dataset.ready || ''")


def shown_map(driver) -> dict:
    return driver.execute_script("return {name: document.getElementById('map').dataset.name}")


def hover(driver, i: int, j: int) -> float:
    """The value the tooltip shows over cell (i, j) of the attention heatmap."""
    text = driver.execute_script(
        """const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('mousemove', {
          clientX: b.left + (arguments[1] + 0.5) * b.width / c.width,
          clientY: b.top + (arguments[0] + 0.5) * b.height / c.height}));
        return document.querySelector('.gf-tip').textContent;""",
        i,
        j,
    )
    return float(text.rsplit(": ", 1)[1])


def click_cell(driver, i: int, j: int) -> None:
    """A click on cell (i, j) of the attention heatmap, in one script (the map may be drawn
    anew between two calls)."""
    driver.execute_script(
        """const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('click', {bubbles: true,
          clientX: b.left + (arguments[1] + 0.5) * b.width / c.width,
          clientY: b.top + (arguments[0] + 0.5) * b.height / c.height}));""",
        i,
        j,
    )


def choose(driver, element_id: str, value: str) -> None:
    driver.execute_script(
        "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
        "s.dispatchEvent(new Event('change'));",
        element_id,
        value,
    )


def no_errors_and_nothing_leaves(driver, url: str) -> None:
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    assert requests and all(u.startswith((url, "data:", "blob:")) for u in requests), [
        u for u in requests if not u.startswith((url, "data:", "blob:"))
    ]


def test_the_explorer_in_chromium(browser, server, tmp_path):  # noqa: F811
    driver = need(browser)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    cfg, params, tok = loading.load(CHAR_LM)
    driver.set_window_size(1280, 1000)
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(server + "#model=char-lm&text=ROMEO: Bu")
    until(driver, "return document.getElementById('app').dataset.ready")

    # Type: the tokens, the next token and the attention map follow.
    before = ready(driver)
    driver.find_element(By.ID, "text").send_keys("t soft")
    until(driver, "return document.getElementById('app').dataset.ready !== arguments[0] && "
          "document.querySelectorAll('#tokens .tok').length === 15", before)  # fmt: skip
    ids = tok.encode(PROMPT)
    chips = driver.execute_script(
        "return Array.from(document.querySelectorAll('#tokens .tok small'), e => +e.textContent)"
    )
    assert chips == ids
    latencies = driver.execute_script(
        "return performance.getEntriesByName('gf-keystroke-to-map').map(e => e.duration)"
    )
    assert latencies and all(0 < ms < 30_000 for ms in latencies)
    with tracing() as trace:
        logits = R.forward(params, cfg, ids)
    shown_next = driver.execute_script(
        "return Array.from(document.querySelectorAll('#output .next-inline .tok small'),"
        " e => +e.textContent)"
    )
    assert shown_next == list(np.argsort(-R.softmax(logits[-1]), kind="stable")[:6])
    assert shown_map(driver)["name"] == "decoder.0.self_attn.head0.A"
    A = trace["decoder.0.self_attn.head0.A"]
    for i, j in ((3, 1), (14, 14), (9, 0)):
        assert hover(driver, i, j) == pytest.approx(A[i, j], rel=1e-6, abs=1e-7)
    assert hover(driver, 2, 9) == 0  # above the diagonal: a future token

    # Switch heads and layers: another map, the engine's numbers again.
    choose(driver, "layer", "2")
    choose(driver, "head", "3")
    until(driver, "return document.getElementById('map').dataset.name === arguments[0]",
          "decoder.2.self_attn.head3.A")  # fmt: skip
    A = trace["decoder.2.self_attn.head3.A"]
    assert hover(driver, 11, 6) == pytest.approx(A[11, 6], rel=1e-6, abs=1e-7)

    # Click a cell: the neuron view takes the score apart.
    driver.execute_script(
        """const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: b.left + 4.5 * b.width
          / c.width, clientY: b.top + 12.5 * b.height / c.height}));"""
    )
    total = float(until(driver, "const e = document.querySelector('#neuron .sum[data-sum]');"
                        "return e && e.dataset.sum"))  # fmt: skip
    Q, K = trace["decoder.2.self_attn.head3.Q"], trace["decoder.2.self_attn.head3.K"]
    assert total == pytest.approx(float(Q[12] @ K[4]), abs=1e-12)
    weight = float(
        driver.execute_script("return document.querySelector('#neuron [data-a]').dataset.a")
    )
    assert weight == pytest.approx(A[12, 4], abs=1e-15)

    # Export the map as SVG and PNG (the page's gf-download event: a listener takes the files).
    driver.execute_script(
        "window.__files = []; document.addEventListener('gf-download', e => { e.preventDefault();"
        " const {name, blob} = e.detail; blob.text().then(t => window.__files.push([name,"
        " blob.type, blob.size, t.slice(0, 300), (t.match(/<rect /g) || []).length])); });"
    )
    driver.find_element(By.CSS_SELECTOR, "#tab-attention .picker .export-svg").click()
    driver.find_element(By.CSS_SELECTOR, "#tab-attention .picker .export-png").click()
    files = until(driver, "return window.__files.length === 2 && window.__files")
    svg = next(f for f in files if f[0].endswith(".svg"))
    png = next(f for f in files if f[0].endswith(".png"))
    assert svg[0] == "decoder.2.self_attn.head3.A.svg" and svg[4] == 15 * 15 + 1
    assert png[1] == "image/png" and png[2] > 2000

    # All heads at once; ablate head 1 of this layer from its thumbnail.
    driver.find_element(By.ID, "all-heads").click()
    until(driver, "return document.querySelectorAll('#heads-grid .thumb canvas').length === 4")
    driver.execute_script("document.querySelectorAll('#heads-grid .thumb input.ablate')[1].click()")
    driver.find_element(By.CSS_SELECTOR, "[data-tab=intervene]").click()
    until(driver, "return document.getElementById('intervention').dataset.done")
    changed = driver.execute_script(
        "return Array.from(document.querySelectorAll('#intervention .changed tr[data-id]'),"
        " tr => [+tr.dataset.id, +tr.children[2].title])"
    )
    # Measured at the row clicked above, 12 (issue 39: where you look), not the last position.
    want = I.run_with(I.reference_run(params, cfg), ids, I.ablate_head(2, 1))[12]
    assert len(changed) >= 10
    for i, logit in changed:
        assert logit == pytest.approx(want[i], abs=1e-9)
    assert (
        driver.execute_script("return document.querySelector('.head-toggle.on').dataset.head")
        == "1"
    )
    shot(driver, tmp_path, "explorer-ablate.png", "tab-intervene")

    driver.find_element(By.CSS_SELECTOR, "[data-tab=attention]").click()
    shot(driver, tmp_path, "explorer-attention.png")
    shot(driver, tmp_path, "explorer-neuron.png", "neuron", above=420)

    # Generation: sampling with seed 1; the temperature slider moved with the keyboard.
    driver.find_element(By.CSS_SELECTOR, "[data-tab=generate]").click()
    until(driver, "return document.querySelector('#gen-step-view .dist')")
    slider = driver.find_element(By.ID, "temperature")
    slider.send_keys(Keys.ARROW_LEFT, Keys.ARROW_LEFT, Keys.ARROW_LEFT, Keys.ARROW_LEFT)
    until(
        driver, "return document.getElementById('gen-out').textContent.includes('temperature 0.6')"
    )
    model = from_params(cfg, params)
    want = decoding.sample(step_fn(model), ids, 20, tok.eos_id, cfg.max_len, 0.6, None, None, 1)
    driver.find_element(By.ID, "gen-forward").click()
    driver.find_element(By.ID, "gen-forward").click()
    until(
        driver, "return document.getElementById('gen-step-label').textContent.startsWith('step 2 ')"
    )
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#gen-step-view g.row'),"
        " g => [+g.dataset.id, +g.dataset.p, +g.dataset.q])"
    )
    p = want.distributions[2]
    q = decoding.filter_probs(np.log(p), 0.6)
    for i, pi, qi in rows:
        assert pi == pytest.approx(p[i], abs=1e-12) and qi == pytest.approx(q[i], abs=1e-12)
    rng = np.random.default_rng(1)
    u = [rng.random() for _ in range(3)][2]
    assert float(driver.execute_script("return document.querySelector('.draw').dataset.u")) == u
    chosen = driver.execute_script("return +document.querySelector('g.row.chosen').dataset.id")
    assert chosen == want.ids[len(ids) + 2]
    shot(driver, tmp_path, "explorer-sampling.png", "tab-generate")

    # Beam search, stepped through: each step's beam is decoding.beam_search's.
    driver.execute_script("document.getElementById('beam-width').value = '3'")
    choose(driver, "strategy", "beam")
    until(driver, "return document.querySelector('#beam svg .node')")
    beam = decoding.beam_search(step_fn(model), ids, 20, tok.eos_id, width=3, max_len=cfg.max_len,
                              step_many=many_step_fn(model))  # fmt: skip
    driver.find_element(By.ID, "gen-first").click()
    for k in range(4):
        until(driver, "return document.getElementById('gen-step-label').textContent"
              ".startsWith('step ' + arguments[0] + ' ')", k)  # fmt: skip
        logps = driver.execute_script(
            "return Array.from(document.querySelectorAll('#gen-step-view td[data-logprob]'),"
            " td => +td.dataset.logprob)"
        )
        assert logps == pytest.approx([h.logprob for h in beam.steps[k]], abs=1e-12)
        nodes = driver.execute_script("return document.querySelectorAll('#beam .node').length")
        assert nodes == sum(len(s) for s in beam.steps[: k + 1])  # the tree grows step by step
        driver.find_element(By.ID, "gen-forward").click()
    shot(driver, tmp_path, "explorer-beam.png", "tab-generate")

    # A translation step by step: the next word's cross-attention over the source tokens.
    choose(driver, "model", "en-es")
    until(driver, "return document.querySelector('#tokens .stack-encoder')", timeout=120)
    choose(driver, "strategy", "greedy")
    until(driver, "return document.getElementById('gen-out').textContent"
          ".includes('greedy · output: \"¿Dónde está la estación?\"')")  # fmt: skip
    driver.find_element(By.ID, "gen-first").click()
    for _ in range(3):
        driver.find_element(By.ID, "gen-forward").click()
    until(
        driver,
        "return document.getElementById('gen-step-label').textContent"
        ".startsWith('step 3 ') && document.querySelectorAll('.src-attn .tok').length === 5",
    )
    weights = driver.execute_script(
        "return Array.from(document.querySelectorAll('.src-attn .tok'), e => +e.dataset.w)"
    )
    cfg2, params2, tok2 = loading.load(EN_ES)
    src = tok2.encode("Where is the station?")
    translator = step_fn(from_params(cfg2, params2), src)
    greedy = decoding.greedy(translator, [tok2.bos_id], 63, tok2.eos_id, cfg2.max_len)
    with tracing() as step3:
        R.forward(params2, cfg2, greedy.ids[:4], src_ids=src)  # BOS and the first 3 words
    mean = np.mean([step3[f"decoder.2.cross_attn.head{h}.A"][-1] for h in range(4)], axis=0)
    np.testing.assert_allclose(weights, mean, atol=1e-12)
    shot(driver, tmp_path, "explorer-translate.png", "tab-generate")
    no_errors_and_nothing_leaves(driver, server)


def test_a_large_matrix_is_drawn_tile_by_tile_as_it_scrolls(browser, server, wide_dir, tmp_path):  # noqa: F811
    """Logits of 16 x 20,000: the page holds only their size and fetches the window in view."""
    driver = need(browser)
    text = "abcdefgh ijklmno"
    cfg, params, tok = loading.load(wide_dir)
    with tracing() as trace:
        R.forward(params, cfg, tok.encode(text))
    logits = trace["logits"]
    driver.set_window_size(1280, 1000)
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get("about:blank")  # a new page, not only a new #fragment of the same one
    driver.get(server + "#model=wide&text=" + text)
    until(driver, "return document.getElementById('app').dataset.ready")
    driver.find_element("css selector", "[data-tab=steps]").click()
    until(driver, "return document.querySelector('#steps article[data-name=logits]')")
    driver.execute_script(
        "document.querySelector('#steps article[data-name=logits]').scrollIntoView()"
    )
    until(driver, "const c = document.getElementById('step-logits');"
          "return c && c.querySelector('.hm[data-tile]')")  # fmt: skip
    geometry = """const box = document.querySelector('#step-logits .hm-box');
        const sizer = box.querySelector('.hm-sizer'), c = sizer.querySelector('canvas');
        return {sizer: sizer.getBoundingClientRect().width, columns: c.width, rows: c.height,
                tile: box.parentElement.dataset.tile};"""
    first = driver.execute_script(geometry)
    assert first["sizer"] == 20_000 * 8  # every column has its place, 8 px each
    assert first["columns"] < 400 and first["rows"] == 16  # only the columns in view are drawn

    def hover(i: int, j: int) -> float:
        text = driver.execute_script(
            """const s = document.querySelector('#step-logits .hm-sizer');
            const b = s.getBoundingClientRect(), w = b.width / 20000, h = b.height / 16;
            s.dispatchEvent(new MouseEvent('mousemove', {clientX: b.left + (arguments[1] + 0.5)
              * w, clientY: b.top + (arguments[0] + 0.5) * h}));
            return document.querySelector('.gf-tip').textContent;""",
            i,
            j,
        )
        return float(text.rsplit(": ", 1)[1])

    assert hover(3, 10) == pytest.approx(logits[3, 10], rel=1e-6, abs=1e-7)
    driver.execute_script("document.querySelector('#step-logits .hm-box').scrollLeft = 152000")
    until(driver, "return document.querySelector('#step-logits .hm').dataset.tile"
          " !== arguments[0]", first["tile"])  # fmt: skip
    moved = driver.execute_script(geometry)
    c0 = int(moved["tile"].split(",")[2])
    assert 18_000 < c0 < 19_000 and moved["columns"] < 400
    driver.execute_script(
        "document.querySelector('#step-logits').scrollIntoView();"
        "document.querySelector('#step-logits .hm-box').scrollLeft = 152000"
    )
    assert hover(11, 19_050) == pytest.approx(logits[11, 19_050], rel=1e-6, abs=1e-7)
    shot(driver, tmp_path, "explorer-steps.png", "step-logits")
    no_errors_and_nothing_leaves(driver, server)


# Every /api/run request the page makes: when it was sent, its text, and how many were under way
# at once; each answer is held back 300 ms, so that keys typed together fall during a run.
COUNT_RUNS = """
window.gfRuns = {sent: [], texts: [], live: 0, most: 0, typed: null};
document.getElementById('text').addEventListener('input',
  () => { if (window.gfRuns.typed === null) window.gfRuns.typed = performance.now(); });
const f = window.fetch;
window.fetch = async (url, options) => {
  if (!String(url).endsWith('/api/run')) return f(url, options);
  const r = window.gfRuns;
  r.sent.push(performance.now()); r.texts.push(JSON.parse(options.body).text);
  r.most = Math.max(r.most, ++r.live);
  try {
    const answer = await f(url, options);
    await new Promise(ok => setTimeout(ok, 300));
    return answer;
  } finally { r.live--; }
};
"""


def test_a_key_press_runs_at_once_and_keys_typed_during_a_run_wait_for_it(browser, server):  # noqa: F811
    """The first key press sends its run without a fixed delay (the page used to wait 120 ms
    after the last key); keys pressed while a run is under way do not start runs of their own:
    one typing run at a time, then the newest text, whose tokens the page ends on."""
    from selenium.webdriver.common.by import By

    driver = browser
    driver.get("about:blank")  # a page of its own: only the hash differing would not reload it
    driver.get(server + "#model=char-lm&text=ROMEO: Bu")
    until(driver, "return document.getElementById('app').dataset.ready")
    driver.execute_script(COUNT_RUNS)
    before = ready(driver)
    driver.find_element(By.ID, "text").send_keys("t soft")
    until(driver, "return document.getElementById('app').dataset.ready !== arguments[0] && "
          "document.querySelectorAll('#tokens .tok').length === 15", before)  # fmt: skip
    runs = driver.execute_script("return window.gfRuns")
    assert runs["sent"][0] - runs["typed"] < 100, runs  # sent at once, not after a delay
    assert runs["most"] == 1, runs  # never two typing runs at once
    assert 2 <= len(runs["sent"]) <= 6 and runs["texts"][-1] == PROMPT, runs
    assert runs["texts"][0] == "ROMEO: But", runs  # the first key's own text
    shown = driver.execute_script(
        "return Array.from(document.querySelectorAll('#tokens .tok small'), e => +e.textContent)"
    )
    cfg, params, tok = loading.load(CHAR_LM)
    assert shown == tok.encode(PROMPT)


def test_the_badge_counts_from_the_runs_own_steps(browser, server):  # noqa: F811
    """Issue 39, friction 9: the fidelity badge's count of compared steps is given out of the
    run's own count, the number beside the tokens ("N steps recorded"), for a decoder and an
    encoder-decoder; the badge used to say "over 171 steps" beside "198 steps recorded"."""
    import re

    driver = need(browser)
    for model in ("char-lm", "en-es"):
        driver.get("about:blank")
        driver.get(server + f"#model={model}&text=Where is the station?")
        until(driver, "return document.getElementById('app').dataset.ready")
        badge = until(
            driver,
            "const t = document.getElementById('badge').textContent;"
            "return !t.includes('checking') && t",
        )
        status = driver.execute_script("return document.getElementById('status').textContent")
        recorded = int(re.search(r"(\d+) steps? recorded", status).group(1))
        found = re.search(r"over (\d+) of the (\d+) steps", badge)
        assert found, badge
        assert int(found.group(2)) == recorded and 0 < int(found.group(1)) <= recorded, badge


def test_a_traced_prefix_is_not_called_the_greedy_translation(browser, server):  # noqa: F811
    """Issue 39, friction 9: the trace of a generation step of a translator (its decoder read
    a prefix chosen on the Generate tab) is headed as that prefix, not "Translation (greedy)",
    which the page says of its own greedy translation."""
    from selenium.webdriver.common.by import By

    driver = need(browser)
    driver.get("about:blank")
    driver.get(server + "#model=en-es&text=Where is the station?")
    until(driver, "return document.getElementById('app').dataset.ready")
    heading = "return document.querySelector('#output b').textContent"
    assert driver.execute_script(heading) == "Translation (greedy): "
    driver.execute_script("document.querySelector('.tabs [data-tab=generate]').click()")
    choose(driver, "strategy", "greedy")
    until(driver, "return document.getElementById('gen-out').textContent.includes('output')")
    driver.find_element(By.ID, "gen-first").click()
    driver.find_element(By.ID, "gen-forward").click()
    until(driver, "return document.getElementById('gen-step-label').textContent"
          ".startsWith('step 1 ')")  # fmt: skip
    before = ready(driver)
    driver.find_element(By.ID, "gen-trace").click()
    until(driver, "return document.getElementById('app').dataset.ready !== arguments[0]", before)
    shown = driver.execute_script("return document.getElementById('output').textContent")
    assert "greedy" not in shown and shown.startswith("Decoder input, chosen"), shown


def test_the_position_after_the_end_token_is_marked_unused(browser, server):  # noqa: F811
    """Issue 39, friction 6: a translation that ended with </s> has one more decoder position,
    which reads </s>; the translation never used its prediction. The page marks that row unused
    (and it cannot be chosen as the position an intervention measures), instead of "reads </s>
    → predicts ?"."""
    driver = need(browser)
    driver.get("about:blank")
    driver.get(server + "#model=en-es&text=Where is the station?")
    until(driver, "return document.getElementById('app').dataset.ready")
    options = driver.execute_script(
        "return Array.from(document.getElementById('position').options,"
        " o => [o.textContent, o.disabled])"
    )
    last, *_ = options[-1:]
    assert "</s>" in last[0] and "unused" in last[0] and last[1], options
    assert not any(disabled for _, disabled in options[:-1]), options  # the others: as before


def test_compares_second_text_follows_the_first_until_typed(browser, server):  # noqa: F811
    """Issue 39, friction 7: the Compare tab's second text was pre-filled with the model's
    default text and stayed so: typing there gave "Where is the station?Hello, world!". Now it
    is empty (its placeholder says B reads A's text) and B follows what is typed in A, until
    a text of its own is typed."""
    from selenium.webdriver.common.by import By

    driver = need(browser)
    driver.get("about:blank")
    driver.get(server + "#model=char-lm")
    until(driver, "return document.getElementById('app').dataset.ready")
    driver.execute_script("document.querySelector('.tabs [data-tab=compare]').click()")
    assert driver.execute_script("return document.getElementById('text-b').value") == ""
    before = ready(driver)
    box = driver.find_element(By.ID, "text")
    box.clear()
    box.send_keys("To be")
    until(driver, "return document.getElementById('app').dataset.ready !== arguments[0]", before)
    titles = (
        "return Array.from(document.querySelectorAll('#compare .pane h3'), h => h.textContent)"
        ".join('|').includes(arguments[0])"
    )
    until(driver, titles, 'B: char-lm · "To be"')
    driver.find_element(By.ID, "text-b").send_keys("Hello")
    until(driver, titles, 'B: char-lm · "Hello"')


def test_the_scale_is_written_one_way_on_the_page(browser, server):  # noqa: F811
    """Issue 39, friction 5: the page wrote the attention scale four ways (Ω/√c in the steps,
    QKᵀ/√d in the tour, ÷√D in the neuron view, Q·Kᵀ/√64 on the diagram). Every text and
    tooltip of the page, with the neuron view and the overview open, now writes Ω/√c, with the
    head width given as c = D, as the shape legend defines it."""
    from test_notation import offences

    driver = need(browser)
    driver.get("about:blank")
    driver.get(server + "#model=char-lm")
    until(driver, "return document.querySelector('#map canvas')")
    click_cell(driver, 3, 0)
    neuron = until(driver, "const e = document.getElementById('neuron');"
                   "return !e.hidden && e.querySelector('[data-a]') && e.innerText")  # fmt: skip
    assert "÷ √c = √" in neuron, neuron
    text = driver.execute_script(
        "return document.body.innerText + '\\n' + Array.from(document.querySelectorAll("
        "'[title]'), e => e.title).join('\\n') + '\\n' + Array.from(document.querySelectorAll("
        "'.tab'), e => e.textContent).join('\\n')"
    )
    assert "Ω/√c" in text and offences(text) == [], offences(text)


def test_the_neuron_view_says_why_the_score(browser, server):  # noqa: F811
    """Issue 40, point 2, in the explorer: a click on a cell of an attention map shows its score
    split by the parts that wrote the query's and the key's residual streams, adding up to the
    trace's Ω[i, j] (the float64 reference: glassformer.inspect.qk)."""
    from glassformer import load
    from glassformer.inspect.qk import decompose

    driver = need(browser)
    driver.get("about:blank")
    driver.get(server + "#model=char-lm")
    until(driver, "return document.querySelector('#map canvas')")
    click_cell(driver, 9, 2)
    total = float(until(driver, "const e = document.querySelector('#neuron .qk-sum');"
                        " return e && e.dataset.total"))  # fmt: skip
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#neuron .qk-parts tr'), r =>"
        " Array.from(r.children, c => c.textContent))"
    )
    m = load(CHAR_LM)
    trace = m.trace(PROMPT, quiet=True)
    want = decompose(trace, m.params, m.cfg, "decoder.0.self_attn.head0", 9, 2)
    assert total == pytest.approx(want.total, abs=1e-12)
    assert total == pytest.approx(trace["decoder.0.self_attn.head0.scores"][9, 2], abs=1e-10)
    (a, b, _, _), *_ = want.top(1)
    assert rows[0] == ["query part", "key part", "share of Ω", "A without it"]
    assert rows[1][:2] == [a, b] and len(rows) == 9  # the 8 largest entries


def test_the_beam_view_says_why_the_winner_beat_a_picked_hypothesis(browser, server, tmp_path):  # noqa: F811
    """Issue 40, point 3: a node of the beam tree off the winner's path gets a panel, "kept X over
    Y: +gap at step k, of which ...", its gap the two hypotheses' own log-probabilities there
    (the PyTorch engine in float64, each on its own) and its parts adding up to it."""
    driver = need(browser)
    driver.get("about:blank")
    driver.get(server + "#model=en-es&text=Hello world.")
    until(driver, "return document.getElementById('app').dataset.ready")
    driver.execute_script("document.querySelector('.tabs [data-tab=generate]').click()")
    driver.execute_script("document.getElementById('beam-width').value = '4'")
    choose(driver, "strategy", "beam")
    until(driver, "return document.querySelector('#beam svg .node')")
    driver.execute_script("document.getElementById('gen-last').click()")
    until(driver, "return document.querySelector('#beam .node[data-step=\"2\"]')")
    for rank in range(4):
        node = f'#beam .node[data-step="2"][data-rank="{rank}"]'
        driver.execute_script(
            "document.querySelector(arguments[0])"
            ".dispatchEvent(new MouseEvent('click', {bubbles: true}))",
            node,
        )
        box = "return document.querySelector('#beam-node .choice')"
        until(driver, box + " && (document.querySelector('#beam-node .choice-why') || "
              "document.querySelector('#beam-node .choice-on-path'))")  # fmt: skip
        if driver.execute_script("return document.querySelector('#beam-node .choice-why')"):
            break
    else:
        raise AssertionError("every hypothesis of step 2 is on the winner's path")
    said = driver.execute_script(
        "const b = document.querySelector('#beam-node .choice');"
        "const w = b.querySelector('.choice-why');"
        "return [JSON.parse(b.dataset.kept), JSON.parse(b.dataset.dropped), +w.dataset.gap,"
        " w.textContent]"
    )
    kept, dropped, gap, sentence = said
    cfg, params, tok = loading.load(EN_ES)
    model = from_params(cfg, params, dtype=torch.float64).eval()
    src = torch.tensor([tok.encode("Hello world.")])
    k = next(i for i, (a, b) in enumerate(zip(kept, dropped, strict=False)) if a != b)
    with torch.no_grad():
        logp = [torch.log_softmax(model(torch.tensor([ids[:k]]), src_ids=src)[0, -1], -1)
                for ids in (kept, dropped)]  # fmt: skip
    want = float(logp[0][kept[k]] - logp[1][dropped[k]])
    assert gap == pytest.approx(want, abs=1e-10)
    assert sentence.startswith(f"kept “{tok.decode(kept[1:]).strip()}” over “")
    assert f"at step {k - 1} (" in sentence and ", of which decoder." in sentence
    shot(driver, tmp_path, "explorer-choice.png", "beam-node")


def test_the_generate_tab_steers_and_shows_each_step_before_and_after(browser, server, tmp_path):  # noqa: F811
    """Issue 40, point 4: a contrast pair, a block and a scale on the Generate tab steer the
    generation (the shipped translator's dog becomes a cat), and each new token's row shows its
    probability before and after steering, the numbers of the reference engine's steered run."""
    import glassformer

    driver = need(browser)
    driver.get("about:blank")
    driver.get(server + "#model=en-es&text=The dog eats.")
    until(driver, "return document.getElementById('app').dataset.ready")
    driver.execute_script("document.querySelector('.tabs [data-tab=generate]').click()")
    driver.execute_script(
        "document.getElementById('steer-pair').value = 'gato|perro';"
        "document.getElementById('steer-layer').value = '1';"
        "document.getElementById('steer-scale').value = '2';"
    )
    choose(driver, "strategy", "greedy")
    rows = until(
        driver,
        "const t = document.querySelectorAll('#steer-view .steer-steps tr');"
        "return t.length > 1 && [...document.querySelectorAll('#steer-view .steer-text')]"
        ".map(p => p.textContent).concat([...t].slice(1).map(r =>"
        " [r.cells[1].textContent, r.querySelector('.chosen') ? 1 : 0]))",
    )
    assert rows[:2] == ['without: "El perro come."', 'with: "El gato come."']
    m = glassformer.load(EN_ES, engine="reference")
    want = m.steered("The dog eats.", m.steer("gato|perro", layer=1, scale=2.0))
    assert [r[0] for r in rows[2:]] == [s["token"] for s in want.steps]
    exact = driver.execute_script(
        "return [...document.querySelectorAll('#steer-view .steer-steps tr')].slice(1)"
        ".map(r => [r.cells[3].querySelector('.chosen'), r.cells[4].querySelector('.chosen')]"
        ".map(c => c ? +c.title.split('p = ')[1] : null))"
    )
    for (before, after), s in zip(exact, want.steps, strict=True):
        assert after == pytest.approx(s["p_after"], abs=1e-9)  # the chosen: among the top after
        if before is not None:
            assert before == pytest.approx(s["p_before"], abs=1e-9)
    assert exact[1][0] is None  # 'gato' is not among the top tokens before steering
    shot(driver, tmp_path, "explorer-steering.png", "steer-view")
