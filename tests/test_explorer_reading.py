"""The explorer read as a learner reads it (issue 26, points 3 to 6), in headless Chromium against a
real server with the shipped char-lm and en-es (and a small classifier).

Decoder rows say the token read and the one predicted; tooltips name query and key with their
positions; numbers are rounded to 3 significant digits, exact on hover; cross-attention weights sit
on the source chips. en-es's beam search on "Hello world." keeps its finished winner in view,
marked, says why it won, shows the score formula and a readable end token, and a node shows the
distribution its token came from; generation says why it stopped and slides past a decoder's
context as `glassformer generate` does. An error clears what it invalidates; a control that does not
apply says why; ablating on the Attention tab shows its effect there, at the position chosen. Every
number is checked against the engine (the reference trace, `decoding`, `interventions`). Needs what
tests/test_browser.py needs; screenshots go to the tmp dir and GLASSFORMER_SCREENSHOT_DIR.
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
pytest.importorskip("torch")

from test_browser import browser, need  # noqa: E402, F401 (the Chromium fixture)
from test_serve_browser import choose, until  # noqa: E402

from glassformer import decoding, load  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.decoding import Decoding  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.inspect import interventions as I  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402
from glassformer.tokenizer.display import display_token  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.torch_steps import many_step_fn, step_fn  # noqa: E402
from glassformer.trace import tracing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAR_LM, EN_ES = ROOT / "models" / "char-lm", ROOT / "models" / "en-es"
PROMPT = "ROMEO: But soft"


@pytest.fixture(scope="module")
def classifier(seeded_classifier):
    return seeded_classifier


@pytest.fixture(scope="module")
def server(classifier):
    shown = [os.path.relpath(CHAR_LM), os.path.relpath(EN_ES), classifier]
    explorer = Explorer(Registry(shown))
    with serving(explorer) as url:
        yield url


@pytest.fixture
def page(browser, server):  # noqa: F811
    """The page at `#model=...&text=...`, the tour dismissed, the logs emptied."""
    driver = need(browser)
    driver.set_window_size(1280, 1000)

    def open_(fragment: str):
        driver.get(server + "#model=none")  # the origin, to dismiss the tour there
        driver.execute_script("localStorage.setItem('glassformer-tour-done', '1')")
        driver.get("about:blank")
        driver.get_log("browser")
        driver.get(server + "#" + fragment)
        until(driver, "return document.getElementById('app').dataset.ready")
        return driver

    return open_


def js(driver, script: str, *args):
    return driver.execute_script("return " + script, *args)


def type_text(driver, text: str) -> None:
    before = js(driver, "document.getElementById('app').dataset.ready")
    driver.execute_script("const t = document.getElementById('text'); t.value = arguments[0];"
                          "t.dispatchEvent(new Event('input'));", text)  # fmt: skip
    until(driver, "return document.getElementById('app').dataset.ready !== arguments[0]", before)


def shot(driver, tmp_path: Path, name: str, element_id=None, above: int = 8, then=None):
    """A screenshot with `element_id` near the top (`then`: done after scrolling, e.g. a hover)."""
    driver.execute_script("document.querySelector('.gf-tip').hidden = true;"
                          "const e = arguments[0] && document.getElementById(arguments[0]);"
                          "if (e) window.scrollTo(0, e.getBoundingClientRect().top"
                          " + window.scrollY - arguments[1]);", element_id, above)  # fmt: skip
    time.sleep(0.2)
    if then:
        then()
    path = tmp_path / name
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    if out := os.environ.get("GLASSFORMER_SCREENSHOT_DIR"):
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / name)


def no_errors(driver, allowed: tuple[str, ...] = ()) -> None:
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    errors = [e for e in errors if not any(a in e["message"] for a in allowed)]
    assert errors == [], errors


def sig3(x: float) -> str:
    """A number as the page writes it for reading: 3 significant digits, a true minus sign."""
    r = float(f"{x:.3g}")  # as heatmap.js's fmt and the report round (tiny values aside)
    return (str(int(r)) if r.is_integer() else repr(r)).replace("-", "−")


def hover(driver, i: int, j: int) -> str:
    """The tooltip over cell (i, j) of the attention heatmap."""
    return driver.execute_script(
        """const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('mousemove', {
          clientX: b.left + (arguments[1] + 0.5) * b.width / c.width,
          clientY: b.top + (arguments[0] + 0.5) * b.height / c.height}));
        return document.querySelector('.gf-tip').textContent;""",
        i,
        j,
    )


def readable(tok, ids) -> list[str]:
    return [display_token(tok.vocab[i], "char") for i in ids]


# -- 3. attention you can read ------------------------------------------------------------------


def test_a_decoder_row_reads_one_token_and_predicts_the_next(page, tmp_path):
    driver = page("model=char-lm&text=" + PROMPT)
    cfg, params, tok = loading.load(CHAR_LM)
    ids = tok.encode(PROMPT)
    with tracing() as trace:
        logits = R.forward(params, cfg, ids)
    shown = readable(tok, ids)
    guess = display_token(tok.vocab[int(np.argmax(logits[-1]))], "char")
    rows = js(
        driver, "Array.from(document.querySelectorAll('#map .hm-rows span'), s => s.textContent)"
    )
    want = [f"reads {a} → predicts {b}" for a, b in zip(shown, shown[1:], strict=False)]
    assert rows == [*want, f"reads {shown[-1]} → predicts {guess} (guess)"]

    # The tooltip: the query (row) and the key (column) named with their positions and tokens,
    # the weight to 3 significant digits and exactly.
    A = trace["decoder.0.self_attn.head0.A"]
    text = hover(driver, 9, 5)
    query, key, value = text.split("\n")
    assert query == f"query (row) 9: reads “{shown[9]}” → predicts “{shown[10]}”"
    assert key == f"key (column) 5: “{shown[5]}”"
    assert value.startswith(f"A[9, 5] ≈ {sig3(A[9, 5])} · exact: ")
    assert float(value.rsplit("exact: ", 1)[1]) == pytest.approx(A[9, 5], rel=1e-6)
    later = hover(driver, 2, 9).split("\n")[1]
    assert later.endswith("later than the query: hidden by the causal mask")
    shot(
        driver,
        tmp_path,
        "reading-attention-decoder.png",
        "tab-attention",
        60,
        lambda: hover(driver, 9, 5),
    )

    # The neuron view of a cell: its numbers rounded, blue = positive and red = negative as in
    # the maps (the exact values in the titles).
    driver.execute_script(
        """const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: b.left + 5.5 * b.width
          / c.width, clientY: b.top + 9.5 * b.height / c.height}));"""
    )
    cells = until(driver, "const t = document.querySelectorAll('#neuron table.mat td[title]');"
                  "return t.length && Array.from(t, td => [+td.title, td.textContent,"
                  " getComputedStyle(td).backgroundColor])")  # fmt: skip
    Q, K = trace["decoder.0.self_attn.head0.Q"], trace["decoder.0.self_attn.head0.K"]
    want = np.concatenate([Q[9], K[5], Q[9] * K[5]])
    assert [x for x, _, _ in cells] == pytest.approx(want, rel=1e-11, abs=1e-15)
    assert [t for _, t, _ in cells] == [sig3(x) for x in want]
    top = np.argmax(want), np.argmin(want)
    r, g, b = map(int, cells[top[1]][2][4:-1].split(","))
    assert cells[top[0]][2] == "rgb(33, 102, 172)" and r > g and r > b  # blue: the largest
    assert "blue = positive, red = negative" in js(
        driver, "document.getElementById('neuron').textContent"
    )
    shot(driver, tmp_path, "reading-neuron.png", "neuron", above=80)

    # Ids set apart from probabilities: "#id" muted, the probability a percentage.
    assert js(driver, "getComputedStyle(document.querySelector('#tokens .tok small.id'),"
              " '::before').content") == '"#"'  # fmt: skip
    p = js(driver, "document.querySelector('#output .next-inline span.p').textContent")
    probs = R.softmax(logits[-1])
    assert p == sig3(100 * probs.max()) + "%"
    no_errors(driver)


def test_cross_attention_is_rounded_named_and_on_the_source_chips(page, tmp_path):
    driver = page("model=en-es&text=Hello world.")
    choose(driver, "site", "decoder.cross_attn")
    until(driver, "return document.getElementById('map').dataset.name === arguments[0]",
          "decoder.0.cross_attn.head0.A")  # fmt: skip
    cfg, params, tok = loading.load(EN_ES)
    src = tok.encode("Hello world.")
    target = js(driver, "Array.from(document.querySelectorAll('#tokens .stack-decoder .tok small'),"
                " e => +e.textContent)")  # fmt: skip
    with tracing() as trace:
        R.forward(params, cfg, target, src_ids=src)
    A = trace["decoder.0.cross_attn.head0.A"]  # (7, 4): a table
    cells = js(driver, "Array.from(document.querySelectorAll('#map table.mat tr'))"
               ".filter(r => r.querySelector('td')).map(r => Array.from(r.querySelectorAll('td'),"
               " td => [td.textContent, td.title]))")  # fmt: skip
    assert len(cells) == A.shape[0] and len(cells[0]) == A.shape[1]
    for i, row in enumerate(cells):
        for j, (text, title) in enumerate(row):
            assert text == sig3(A[i, j])  # 3 significant digits for reading
            assert float(title.rsplit("exact: ", 1)[1]) == pytest.approx(A[i, j], rel=1e-10)
    src_shown = [display_token(tok.vocab[i], "sp-bpe") for i in src]
    dec_shown = [display_token(tok.vocab[i], "sp-bpe") for i in target]
    title = cells[1][2][1].split("\n")
    assert title[0] == f"query (row) 1: reads “{dec_shown[1]}” → predicts “{dec_shown[2]}”"
    assert title[1] == f"key (column) 2: “{src_shown[2]}” (source token)"
    heads = js(driver, "Array.from(document.querySelectorAll('#map table.mat tr th:first-child'),"
               " t => t.textContent)")  # fmt: skip
    assert heads[-1] == f"reads {dec_shown[-1]} (unused: the translation ended)"  # issue 39

    # The weights of one decoder row on the source chips: the last row that predicts a token,
    # then the row under the mouse.
    def chips():
        return js(driver, "[+document.querySelector('#map .src-weights').dataset.row,"
                  " Array.from(document.querySelectorAll('#map .src-weights .tok'),"
                  " c => [+c.dataset.w, c.querySelector('.wp').textContent])]")  # fmt: skip

    row, weights = chips()
    assert row == len(target) - 2
    assert [w for w, _ in weights] == pytest.approx(A[row], abs=1e-12)
    assert [p for _, p in weights] == [sig3(100 * w) + "%" for w in A[row]]
    driver.execute_script("document.querySelectorAll('#map table.mat tr')[2]"
                          ".dispatchEvent(new MouseEvent('mouseenter'))")  # fmt: skip
    row, weights = chips()
    assert row == 1 and [w for w, _ in weights] == pytest.approx(A[1], abs=1e-12)
    shot(driver, tmp_path, "reading-attention-cross.png", "tab-attention", above=60)
    no_errors(driver)


# -- 4. decoding explained ----------------------------------------------------------------------


def test_the_beam_search_of_the_translator_says_who_won_and_why(page, tmp_path):
    driver = page("model=en-es&text=Hello world")
    driver.find_element("id", "text").send_keys(".")  # a key press: the latency is told
    until(driver, "return document.getElementById('latency').textContent.includes('ms')")
    cfg, params, tok = loading.load(EN_ES)
    src = tok.encode("Hello world.")
    model = from_params(cfg, params)
    want = decoding.beam_search(step_fn(model, src), [tok.bos_id], cfg.max_len, tok.eos_id,
                                width=4, max_len=cfg.max_len,
                                step_many=many_step_fn(model, src))  # fmt: skip
    best = want.best
    assert tok.decode(best.ids[1:]) == "Hola el mundo."
    won_at = next(k for k, beam in enumerate(want.steps) if any(h.ids == best.ids for h in beam))
    runner = want.ranked[1]

    driver.find_element("css selector", "[data-tab=generate]").click()
    driver.execute_script("document.getElementById('beam-width').value = '4'")
    choose(driver, "strategy", "beam")
    until(driver, "return document.querySelector('#beam svg .node')")
    formula = js(driver, "document.querySelector('#gen-step-view .formula').textContent")
    assert "score = log P(y) / |y|α" in formula and "α = 1 (the length penalty)" in formula
    driver.find_element("id", "gen-first").click()
    for k in range(len(want.steps)):  # the finished winner stays in view, marked, once it is
        until(driver, "return document.getElementById('gen-step-label').textContent"
              ".startsWith('step ' + arguments[0] + ' ')", k)  # fmt: skip
        finished = js(driver, "Array.from(document.querySelectorAll('#gen-step-view"
                      " table.beam.finished tr.wins td.hyp'), td => td.textContent)")  # fmt: skip
        why = js(driver, "document.querySelector('#gen-step-view .why').textContent")
        if k < won_at:
            assert finished == [] and why.startswith("No winner yet")
        else:
            assert finished == ['"Hola el mundo."']
            assert why == (
                f"“Hola el mundo.” finished at step {won_at} with score {sig3(best.score(1.0))} "
                f"(log p {sig3(best.logprob)} / {best.n_generated}), higher than any other "
                "hypothesis, open or finished (the next best: "
                f"“{tok.decode(runner.ids[1:])}”, {sig3(runner.score(1.0))}): it wins."
            )
        driver.find_element("id", "gen-forward").click()
    assert best.score(1.0) > runner.score(1.0) and runner.ids != best.ids

    # The end token is readable; the winning node is marked.
    nodes = js(driver, "Array.from(document.querySelectorAll('#beam .node'), g =>"
               " [g.querySelector('text').textContent, g.classList.contains('wins')])")  # fmt: skip
    ended = [text for text, _ in nodes if "end" in text]
    assert ended and all(t.endswith("</s> · end") for t in ended)
    assert [text for text, wins in nodes if wins] == ["★ </s> · end"]
    assert "⏹" not in js(driver, "document.getElementById('beam').textContent")
    shot(driver, tmp_path, "reading-beam.png", "gen-out", above=60)

    # A node: the distribution its token was chosen from, the model's own numbers.
    driver.execute_script("document.querySelector('#beam .node[data-step=\"2\"][data-rank=\"1\"]')"
                          ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")  # fmt: skip
    rows = until(driver, "const r = document.querySelectorAll('#beam-node svg.dist g.row');"
                 "return r.length && Array.from(r, g => [+g.dataset.id, +g.dataset.p,"
                 " g.classList.contains('chosen')])")  # fmt: skip
    node = want.steps[2][1]
    context = node.ids[:-1]
    p = R.softmax(R.forward(params, cfg, context, src_ids=src)[-1])
    assert len(rows) >= 10
    for i, pi, _ in rows:
        assert pi == pytest.approx(p[i], abs=1e-9)
    assert [i for i, _, chosen in rows if chosen] == [node.ids[-1]]
    shot(driver, tmp_path, "reading-beam-node.png", "beam-node", above=120)

    # Its trace: the prefix's run, with no latency left over from the key press long ago.
    before = js(driver, "document.getElementById('app').dataset.ready")
    driver.find_element("css selector", "#beam-node button.node-trace").click()
    until(driver, "return document.getElementById('app').dataset.ready !== arguments[0]", before)
    assert js(driver, "document.getElementById('latency').textContent") == ""
    ids = js(driver, "Array.from(document.querySelectorAll('#tokens .stack-decoder .tok small'),"
             " e => +e.textContent)")  # fmt: skip
    assert ids == context
    no_errors(driver)


def test_generation_says_why_it_stopped_and_slides_past_the_context(page, tmp_path):
    driver = page("model=char-lm&text=ROMEO: But soft, what light")
    m = load(CHAR_LM)
    prompt = m.encode("ROMEO: But soft, what light")
    driver.find_element("css selector", "[data-tab=generate]").click()
    until(driver, "return document.querySelector('#gen-step-view .dist')")
    driver.execute_script("document.getElementById('max-new').value = '60'")
    choose(driver, "strategy", "sample")  # seed 1, temperature 0.8 (the page's defaults)
    until(driver, "return document.querySelectorAll('#gen-out .text .new').length === 60")
    how = Decoding(strategy="sample", max_new_tokens=60, seed=1, temperature=0.8)
    want = m.runtime.decoded(prompt, None, how, window=True, quiet=True)  # what `generate` prints
    text = json.dumps(m.decode(want.ids[len(prompt) :]), ensure_ascii=False)
    assert ("output: " + text) in js(driver, "document.querySelector('#gen-out .sub').textContent")
    stop = js(driver, "[document.querySelector('#gen-out .stop').dataset.kind,"
              " document.querySelector('#gen-out .stop').textContent,"
              " document.querySelector('#gen-out .slid').textContent]")  # fmt: skip
    assert (
        stop[0] == "budget" and stop[1] == "Stopped after 60 new tokens: as many as were asked for."
    )
    assert stop[2] == (
        "Past the context: the prompt (27 tokens) + 60 new tokens is more than the model's context"
        " (max_len 64): each token after token 64 was predicted from the last 64 only (a sliding"
        " window); ask for 37 new tokens or fewer to stay within it."
    )
    driver.find_element("id", "gen-last").click()
    until(driver, "return document.getElementById('gen-step-view').textContent.includes("
          "'reads 64 tokens (the last 64: a sliding window)')")  # fmt: skip
    shot(driver, tmp_path, "reading-sampling.png", "gen-out", above=160)

    # Plurals: a top-k of 1 keeps one token.
    driver.execute_script("const s = document.getElementById('top-k'); s.value = '1';"
                          " s.dispatchEvent(new Event('input'))")  # fmt: skip
    until(driver, "return document.getElementById('gen-step-view').textContent"
          ".includes('(kept 1 token after the filters)')")  # fmt: skip

    # A translation that ends with the end token says so.
    choose(driver, "model", "en-es")
    until(driver, "return document.querySelector('#tokens .stack-encoder')", timeout=120)
    choose(driver, "strategy", "greedy")
    stop = until(driver, "const s = document.querySelector('#gen-out .stop');"
                 "return s && s.dataset.kind === 'eos' && s.textContent")  # fmt: skip
    assert stop.startswith("Stopped at the end token </s> after ")
    no_errors(driver)


# -- 6. never stale, never misleading -------------------------------------------------------------


def test_an_error_clears_the_results_it_invalidates(page, tmp_path):
    driver = page("model=char-lm&text=" + PROMPT)
    driver.execute_script(
        """const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: b.left + 2,
          clientY: b.top + b.height - 2}));"""
    )
    until(driver, "return !document.getElementById('neuron').hidden")
    type_text(driver, "x" * 80)  # more tokens than the context
    assert "at most 64" in js(driver, "document.getElementById('problem').textContent")
    gone = js(driver, "['tokens', 'output'].map(id => document.getElementById(id).textContent)"
              ".concat([document.querySelectorAll('#map canvas, #map table').length,"
              " document.getElementById('neuron').hidden])")  # fmt: skip
    assert gone == ["", "", 0, True]
    assert "could not run" in js(driver, "document.getElementById('map').textContent")
    shot(driver, tmp_path, "reading-error.png")
    type_text(driver, PROMPT)  # a good input again: everything back, the message gone
    assert js(driver, "document.getElementById('problem').hidden")
    assert js(driver, "document.querySelectorAll('#tokens .tok').length") == 15

    # A failed generation leaves no tree, step or stepper of the one before.
    driver.find_element("css selector", "[data-tab=generate]").click()
    driver.execute_script("document.getElementById('beam-width').value = '3'")
    choose(driver, "strategy", "beam")
    until(driver, "return document.querySelector('#beam svg .node')")
    driver.execute_script("document.getElementById('beam-width').value = '65'")
    driver.execute_script(
        "document.getElementById('beam-width').dispatchEvent(new Event('change'))"
    )
    message = until(driver, "const p = document.querySelector('#gen-out .problem');"
                    "return p && p.textContent")  # fmt: skip
    assert "64" in message
    left = js(driver, "[document.getElementById('beam').children.length,"
              " document.getElementById('gen-step-view').children.length,"
              " document.getElementById('stepper').hidden]")  # fmt: skip
    assert left == [0, 0, True]
    no_errors(driver, allowed=("/api/run", "/api/generate"))  # the refusals asked for


def test_a_control_that_does_not_apply_is_disabled_and_says_why(page):
    driver = page("model=char-lm&text=" + PROMPT)
    option = js(driver, "(o => [o.disabled, o.title])(document.querySelector("
                "'#site option[value=\"decoder.cross_attn\"]'))")  # fmt: skip
    assert option == [True, "none: a decoder-only model has no encoder to read from"]
    driver.find_element("css selector", "[data-tab=generate]").click()
    choose(driver, "strategy", "greedy")

    def control(element_id):  # the control, its tooltip and its label's
        return js(driver, "(e => [e.disabled, e.title, (e.closest('label') || e).title])"
                  "(document.getElementById(arguments[0]))", element_id)  # fmt: skip

    sampling = "a sampling option: only for strategy “sample” (greedy chooses without drawing)"
    for element_id in ("temperature", "top-k", "top-p", "seed"):
        assert control(element_id) == [True, sampling, sampling]
    beam = "a beam search option: only for strategy “beam search”"
    assert control("beam-width") == [True, beam, beam]
    choose(driver, "strategy", "beam")
    assert control("beam-width")[0] is False and control("seed")[0] is True
    choose(driver, "strategy", "sample")
    assert control("temperature")[0] is False and control("beam-width")[0] is True
    driver.find_element("css selector", "[data-tab=intervene]").click()
    patch = control("patch-text")
    assert patch[0] is True and patch[2].startswith("only for patching")
    driver.find_element("css selector", "input[name=how][value=patch]").click()
    assert control("patch-text")[0] is False
    no_errors(driver)


# -- 5. touch where you look ----------------------------------------------------------------------


def test_ablating_on_the_attention_tab_shows_its_effect_there_at_a_chosen_position(page, tmp_path):
    driver = page("model=char-lm&text=" + PROMPT)
    cfg, params, tok = loading.load(CHAR_LM)
    ids = tok.encode(PROMPT)
    shown = readable(tok, ids)
    choose(driver, "layer", "2")
    choose(driver, "head", "1")
    until(driver, "return document.getElementById('map').dataset.name === arguments[0]",
          "decoder.2.self_attn.head1.A")  # fmt: skip
    driver.find_element("id", "ablate-head").click()
    until(
        driver,
        "const e = document.getElementById('att-effect'); return !e.hidden && e.dataset.done",
    )
    changed = I.run_with(I.reference_run(params, cfg), ids, I.ablate_head(2, 1))

    def logits():
        return js(driver, "Array.from(document.querySelectorAll("
                  "'#att-effect .changed tr[data-id]'),"
                  " tr => [+tr.dataset.id, +tr.children[2].title])")  # fmt: skip

    def where():
        return js(driver, "document.querySelector('#att-effect .changed p.sub').textContent")

    assert where() == f"the next token after position 14 (reads {shown[14]} → predicts " + (
        display_token(tok.vocab[int(np.argmax(R.forward(params, cfg, ids)[-1]))], "char")
        + " (guess))"
    )
    rows = logits()
    assert len(rows) == 5
    for i, logit in rows:
        assert logit == pytest.approx(changed[-1][i], abs=1e-9)

    # Another position: measured there, here and on the Ablate & patch tab.
    done = js(driver, "document.getElementById('att-effect').dataset.done")
    driver.execute_script("const s = document.querySelector('#att-effect select.att-position');"
                          " s.value = '5'; s.dispatchEvent(new Event('change'))")  # fmt: skip
    until(
        driver, "return document.getElementById('att-effect').dataset.done !== arguments[0]", done
    )
    assert where() == f"the next token after position 5 (reads {shown[5]} → predicts {shown[6]})"
    for i, logit in logits():
        assert logit == pytest.approx(changed[5][i], abs=1e-9)
    assert js(driver, "document.getElementById('position').value") == "5"
    shot(driver, tmp_path, "reading-ablate.png", "att-effect", above=120)
    driver.find_element("id", "ablate-head").click()  # off again: the effect goes
    until(driver, "return document.getElementById('att-effect').hidden")
    no_errors(driver)


def test_a_classifier_shows_its_classes_and_what_an_ablation_does_to_them(
    page, classifier, tmp_path
):
    driver = page("model=clf&text=to be or not")
    m = load(classifier)
    ids = m.encode("to be or not")
    forward = m.runtime.reference_run()
    before = decoding.softmax(forward(ids))
    after = decoding.softmax(
        I.run_with(forward, ids, I.ablate_head(0, 1, stack="encoder", kind="self_attn"))
    )
    said = js(driver, "document.querySelector('#output .class').textContent")
    top = ["yes", "no"][int(before.argmax())]
    assert said.startswith(f"Class: {top} {sig3(100 * before.max())}%")
    assert f"yes {sig3(100 * before[0])}%" in said and f"no {sig3(100 * before[1])}%" in said
    option = js(driver, "(o => [o.disabled, o.title])(document.querySelector("
                "'#site option[value=\"decoder.cross_attn\"]'))")  # fmt: skip
    assert option == [True, "none: an encoder has no decoder"]
    choose(driver, "head", "1")
    until(driver, "return document.getElementById('map').dataset.name === arguments[0]",
          "encoder.0.self_attn.head1.A")  # fmt: skip
    driver.find_element("id", "ablate-head").click()
    rows = until(driver, "const e = document.getElementById('att-effect');"
                 "return !e.hidden && e.dataset.done && Array.from(e.querySelectorAll("
                 "'table.classes tr[data-label]'), tr => [tr.dataset.label,"
                 " +tr.children[1].title, +tr.children[2].title])")  # fmt: skip
    assert [r[0] for r in rows] == ["yes", "no"]
    assert [r[1] for r in rows] == pytest.approx(before, abs=1e-12)
    assert [r[2] for r in rows] == pytest.approx(after, abs=1e-12)
    position = js(driver, "(e => [e.disabled, e.title])(document.getElementById('position'))")
    assert position[0] is True and position[1].startswith("a classifier or an encoder gives one")
    shot(driver, tmp_path, "reading-classifier.png", "att-effect", above=260)
    no_errors(driver)


# -- the decoding data the page shows (serve/generation.py), without a browser --------------------


CLI_SAYS = {"budget": "stopped after --max-new-tokens", "eos": "stopped at EOS",
            "context": "stopped at the decoder's max_len"}  # fmt: skip


def test_generation_tells_why_it_stopped_as_the_command_line_does(tmp_path):
    from glassformer.cli import flags
    from glassformer.serve import generation

    assert main(["init", str(tmp_path / "short"), "--preset", "hello-world", "--set",
                 "max_len=5", "--seed", "0", "--std", "0.5"]) == 0  # fmt: skip
    cases = [(CHAR_LM, PROMPT, 5, "budget"), (EN_ES, "Hello world.", 64, "eos"),
             (tmp_path / "short", "hello world", 5, "context")]  # fmt: skip
    for path, text, new, kind in cases:
        m = load(path)
        how = Decoding(strategy="greedy", max_new_tokens=new)
        g = generation.generate(m, text, how)
        window = m.cfg.arch == "decoder"
        src, prompt = (None, m.encode(text)) if window else (m.encode(text), m.runtime.bos())
        want = m.runtime.decoded(prompt, src, how, window=window, quiet=True)
        assert g["ids"] == want.ids and g["stop"]["kind"] == kind
        said = decoding.stop_reason(want, len(prompt), how, m.cfg)  # the command line's note
        assert flags.said(said).startswith(CLI_SAYS[kind])


def test_each_beam_node_has_the_distribution_its_token_came_from_and_the_winner_is_told():
    from glassformer.serve import generation

    m = load(EN_ES)
    src = m.encode("Hello world.")
    g = generation.generate(m, "Hello world.", Decoding(strategy="beam", beam_width=4,
                                                         max_new_tokens=64))  # fmt: skip
    beam = g["beam"]
    for k in (0, 2, 5):
        for n in beam["steps"][k]:
            d = beam["distributions"][n["dist"]]
            p = R.softmax(R.forward(m.params, m.cfg, n["ids"][:-1], src_ids=src)[-1])
            top = [t["id"] for t in d["top"]]
            assert top[:10] == list(np.argsort(-p, kind="stable")[:10]) and n["id"] in top
            assert [t["p"] for t in d["top"]] == pytest.approx(p[top], abs=1e-9)
    why = beam["why"]
    assert (why["text"], why["step"], why["finished"]) == ("Hola el mundo.", 5, True)
    assert why["score"] == pytest.approx(why["logprob"] / why["n_generated"])
    assert (
        why["runner_up"]["text"] == "Hola a todo el mundo."
        and why["runner_up"]["score"] < why["score"]
    )


def test_one_new_token_is_said_in_the_singular(page):
    """Issue 39, friction 9: "1 new tokens". A 63-character prompt to the char-LM (max_len 64)
    with 2 new tokens: the page says to ask for "1 new token or fewer"."""
    text = ("ROMEO: But soft, what light through yonder window breaks? It is t")[:63]
    driver = page("model=char-lm&text=" + text)
    driver.find_element("css selector", "[data-tab=generate]").click()
    until(driver, "return document.querySelector('#gen-step-view .dist')")
    driver.execute_script("document.getElementById('max-new').value = '2'")
    choose(driver, "strategy", "sample")
    until(driver, "return document.querySelectorAll('#gen-out .text .new').length === 2")
    slid = js(driver, "document.querySelector('#gen-out .slid').textContent")
    assert "+ 2 new tokens is more" in slid and "ask for 1 new token or fewer" in slid, slid


def _click_cell(driver, i: int, j: int, rows: int, cols: int) -> None:
    """A click on cell (i, j) of the attention map (rows x cols): on its table's cell, or at the
    cell's place on its canvas (as test_serve_browser clicks one)."""
    if js(driver, "!!document.querySelector('#map table.mat')"):
        driver.execute_script(
            "const rows = Array.from(document.querySelectorAll('#map table.mat tr'))"
            ".filter(r => r.querySelector('td'));"
            "rows[arguments[0]].querySelectorAll('td')[arguments[1]].click()",
            i,
            j,
        )
        return
    # Found and clicked in one script: the map may be drawn anew between two calls.
    driver.execute_script(
        "const c = document.querySelector('#map canvas'), b = c.getBoundingClientRect();"
        "c.dispatchEvent(new MouseEvent('click', {bubbles: true,"
        " clientX: b.left + (arguments[1] + 0.5) * b.width / arguments[3],"
        " clientY: b.top + (arguments[0] + 0.5) * b.height / arguments[2]}))",
        i,
        j,
        rows,
        cols,
    )


@pytest.mark.parametrize(
    "model, text, site, row",
    [
        ("char-lm", PROMPT, "decoder.self_attn", 5),
        ("en-es", "Hello world.", "decoder.cross_attn", 2),
    ],
)
def test_ablation_is_measured_at_the_row_clicked(page, model, text, site, row):
    """Issue 39, friction 1: clicking a decoder row of the attention map, then "ablate this
    head", measures the prediction of that row's position: the translator was measured at its
    first changed position (0) and the char-LM at its last, whatever row was clicked."""
    driver = page(f"model={model}&text={text}")
    choose(driver, "site", site)
    stack, kind = site.split(".")
    until(driver, "const n = document.getElementById('map').dataset.name || '';"
          "return n.startsWith(arguments[0]) && n.includes(arguments[1])", stack, kind)  # fmt: skip
    rows = len(js(driver, "Array.from(document.getElementById('position').options)")) - 1
    keys = "#tokens .stack-encoder .tok" if kind == "cross_attn" else "#tokens .tok"
    cols = js(driver, "document.querySelectorAll(arguments[0]).length", keys)
    _click_cell(driver, row, 0, rows, cols)
    driver.find_element("id", "ablate-head").click()
    until(
        driver,
        "const e = document.getElementById('att-effect'); return !e.hidden && e.dataset.done",
    )
    where = js(driver, "document.querySelector('#att-effect .changed p.sub').textContent")
    assert where.startswith(f"the next token after position {row} ("), where
    assert js(driver, "document.getElementById('position').value") == str(row)
    no_errors(driver)
