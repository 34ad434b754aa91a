"""Every step explained (issue 26, point 2): a title in words, the equation, what the step does,
what this run shows, the internal name small; the card tables' numbers read to 3 digits.

The titles and sentences of every step of every architecture (a small random model of each, and
the two walkthroughs) are checked for what a learner must never see (internal names) and for one
numbering of layers and heads, from 0, as in the trace names. The "shows" sentences are oracles
over values built by hand: the sentence names the row, the column and the percentage that the
values hold, and changes when they change. The report's cards and the explorer's step list are
checked for the words; a table cell's text is `rounded` of the exact value in its title, and
numbers.js's `fmt` writes numbers as `rounded` does (tests/test_js.py, under node).
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import numpy as np
import pytest
from test_browser import browser, need, screenshot  # noqa: F401 (the Chromium fixture)

import glassformer
from glassformer import reference as R
from glassformer import walkthrough, weights
from glassformer.config import Config
from glassformer.explain.html import render_html
from glassformer.explain.select import Group, HeadNumbers, group_steps
from glassformer.explain.words import FALLBACK, kind, naming, rounded, shows, title, what
from glassformer.trace import Trace, scope, tap, tracing

ROOT = Path(__file__).resolve().parents[1]
JARGON = re.compile(r"self_attn|cross_attn|embed_norm|\bffn\b|head\d|norm\d|add\d|\.")


def _encoder_decoder():
    cfg = Config(arch="encoder-decoder", vocab_size=20, d_model=8, n_heads=2, d_ff=16,
                 n_encoder_layers=2, n_decoder_layers=2, norm="pre", max_len=16)  # fmt: skip
    params = weights.init(cfg, seed=1, std=0.3)
    labels = {"encoder": ["▁Hello", "▁world", "."], "decoder": ["<s>", "Hola", "▁el", "."]}
    with tracing(labels=labels) as trace:
        R.forward(params, cfg, [1, 5, 6, 7], src_ids=[3, 4, 2])
    return cfg, trace


def _classifier():
    cfg = Config(arch="encoder", vocab_size=20, d_model=8, n_heads=2, d_ff=16,
                 n_encoder_layers=2, n_classes=3, type_vocab_size=2, embed_norm=True,
                 positions="learned", activation="gelu", max_len=16)  # fmt: skip
    params = weights.init(cfg, seed=2, std=0.3)
    with tracing(labels={"encoder": ["to", "be", "or"]}) as trace:
        R.classify(params, cfg, [3, 4, 5])
    return cfg, trace


def _embedder():
    cfg = Config(arch="encoder", vocab_size=20, d_model=8, n_heads=2, d_ff=16,
                 n_encoder_layers=1, max_len=16)  # fmt: skip
    params = weights.init(cfg, seed=3, std=0.3)
    with tracing(labels={"encoder": ["to", "be"]}) as trace:
        R.sentence_embedding(params, cfg, [3, 4])
    return cfg, trace


def _decoder():
    m = glassformer.load("tiny", engine="reference")  # a preset's random weights, a Model
    return m.cfg, m.trace(ids=[1, 2, 3, 2, 4])


@pytest.fixture(scope="module")
def traces() -> dict[str, tuple[Config | None, Trace]]:
    return {
        "encoder-decoder": _encoder_decoder(),
        "decoder": _decoder(),
        "classifier": _classifier(),
        "embedder": _embedder(),
        "hello-world": (None, walkthrough.hello_world()),
        "self-attention": (None, walkthrough.self_attention()),
    }


def _group_keys(items) -> list[str]:
    return [k for x in items if isinstance(x, Group) for k in (x.key, *_group_keys(x.items))]


# -- titles and sentences for every step ---------------------------------------------------------


def test_every_step_of_every_model_has_a_title_a_sentence_and_what_this_run_shows(traces):
    for arch, (cfg, trace) in traces.items():
        named = naming(trace)
        names = trace.names() + _group_keys(group_steps(trace.steps))
        for name in names:
            t = title(name, named)
            assert t and not t[0].islower() and not JARGON.search(t.replace("nn.Linear", "")), (
                arch, name, t,
            )  # fmt: skip
        for s in trace.steps:
            said = what(s.name, named)
            assert said != FALLBACK and said.endswith("."), (arch, s.name)
            told = shows(s, trace)
            assert told and told.endswith(".") and not told[0].islower(), (arch, s.name, told)
            if cfg is not None:  # a model's Config names its steps as its trace does
                assert title(s.name, cfg) == title(s.name, named), (arch, s.name)


def test_the_titles_read_as_the_issue_says(traces):
    cfg, trace = traces["encoder-decoder"]
    assert title("decoder.1.cross_attn.head0.A", cfg) == (
        "Decoder layer 1 · cross-attention · head 0 · attention weights"
    )
    assert (
        title("encoder.0.ffn.hidden", cfg) == "Encoder layer 0 · feed-forward · hidden activations"
    )
    assert title("decoder.0.self_attn.head1.A", cfg) == (
        "Decoder layer 0 · self-attention · head 1 · attention weights"
    )
    assert (
        title("decoder.1.norm2.mean", cfg)
        == "Decoder layer 1 · cross-attention · LayerNorm · mean μ"
    )
    assert title("decoder.1.add3", cfg) == "Decoder layer 1 · feed-forward · residual add"
    assert title("probs", cfg) == "Output · next-token probabilities"
    assert title("decoder.0", cfg) == "Decoder layer 0" and title("encoder", cfg) == "Encoder"
    dec, _ = traces["decoder"]
    assert title("decoder.0.self_attn.head3.A", dec) == "Layer 0 · head 3 · attention weights"
    assert title("decoder.1.norm2.out", dec) == "Layer 1 · feed-forward · LayerNorm · output"
    assert title("decoder.0.self_attn.Z", dec) == "Layer 0 · attention · output projection Z"
    clf, _ = traces["classifier"]
    assert title("probs", clf) == "Output · class probabilities"
    assert title("encoder.embed_norm.out", clf) == "Embedding LayerNorm · output"
    assert "class" in what("logits", clf) and "vocabulary" in what("logits", dec)


def test_layers_and_heads_are_numbered_from_0_as_the_trace_names_them(traces):
    for arch, (_, trace) in traces.items():
        heads = HeadNumbers(trace.steps)
        for s in trace.steps:
            t = title(s.name, trace).lower()
            layer = re.search(r"(?:^|\.)(?:encoder|decoder)\.(\d+)\.", s.name)
            if layer:
                assert f"layer {layer.group(1)} " in t, (arch, s.name, t)
            head = re.search(r"(?:^|\.)head(\d+)\.", s.name)
            if head:
                assert f"head {heads.shown(s.name)}" in t, (arch, s.name, t)
                if heads.article(s.name) is None:  # the model's heads: the number in the name
                    assert f"head {head.group(1)}" in t, (arch, s.name, t)
    _, hello = traces["hello-world"]
    assert title("head1.A", hello) == "Head 0 (the article's head 1) · attention weights"
    assert title("model.encoder.1.self_attn.head1.A", hello).startswith(
        "Encoder layer 1 · self-attention · head 1 ·"
    )
    assert title("model.step3.decoder.0.cross_attn.head0.A", hello).startswith(
        "Decoding step 3 · Decoder layer 0 · cross-attention · head 0"
    )


# -- what this run shows: computed from the values ----------------------------------------------


def _attention_trace(A: np.ndarray, words: list[str]) -> Trace:
    with tracing(labels={"encoder": words}) as trace, scope("encoder.0.self_attn.head0"):
        tap("A", A)
    return trace


def test_the_attention_sentence_names_the_most_focused_row_its_key_and_percentage():
    words = ["▁Hello", "▁el", "▁world"]
    A = np.array([[0.5, 0.3, 0.2], [0.05, 0.07, 0.88], [0.4, 0.3, 0.3]])
    trace = _attention_trace(A, words)
    told = shows(trace.steps[0], trace, (words, words))
    assert "“▁el”: 88% of its attention goes to “▁world”" in told, told
    assert "on average a row gives its top key 59.3%" in told  # (0.5 + 0.88 + 0.4) / 3
    B = np.array([[0.05, 0.94, 0.01], [0.3, 0.3, 0.4], [0.4, 0.3, 0.3]])
    trace = _attention_trace(B, words)
    told = shows(trace.steps[0], trace, (words, words))
    assert "“▁Hello”: 94% of its attention goes to “▁el”" in told, told


def test_a_row_that_sees_only_itself_is_not_the_most_focused(traces):
    """A causal row 0 always puts 100% on itself: the sentence looks past it (the mask beside)."""
    _, trace = traces["decoder"]
    s = trace.step("decoder.0.self_attn.head0.A")
    told = shows(s, trace)
    A = s.values
    top = A[1:].max(-1)
    i = 1 + int(np.argmax(top))
    assert f"{rounded(100 * top.max())}% of its attention" in told, told
    words = trace.labels.get("decoder")
    assert (f"“{words[i]}”" if words else f"position {i}") in told, told


def test_scores_logits_probs_layernorm_ffn_and_embeddings_say_their_values():
    words = ["a", "b", "c"]
    with tracing(labels={"decoder": words}) as trace:
        with scope("decoder.0.self_attn.head0"):
            tap("scores", np.array([[1.0, 2.0, 9.0], [3.0, 4.0, 5.0], [0.5, 7.25, 1.0]]))
            tap("mask", np.tril(np.ones((3, 3), bool)))
        with scope("decoder.0.norm1"):
            x = np.array([[1.0, 3.0, 5.0, 7.0], [0.0, 0.5, 0.0, 0.5], [2.0, 2.0, 2.0, 6.0]])
            mu = tap("mean", x.mean(-1, keepdims=True))
            std = tap("std", np.sqrt(x.var(-1, keepdims=True) + 1e-5))
            tap("out", (x - mu) / std * 2.0)
        with scope("decoder.0.ffn"):
            tap("hidden", np.array([[0.0, 1.5, 0.0, 0.0], [0.0, 0.0, 4.5, 0.25], [0.0] * 4]))
        with scope("decoder"):
            tap("X", np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]]))
        tap("probs", np.array([[0.2, 0.8], [0.1, 0.9], [0.7, 0.3]]), cols=["yes", "no"])
    say = {s.name: shows(s, trace) for s in trace.steps}
    assert say["decoder.0.self_attn.head0.scores"] == (  # 9 is hidden by the mask: 7.25 is seen
        "The scores run from 0.5 to 7.25 where the mask allows; the largest is row “c” with "
        "column “b”."
    )
    assert "causal" in say["decoder.0.self_attn.head0.mask"] and "6 of 9" in say[
        "decoder.0.self_attn.head0.mask"
    ]  # fmt: skip
    spread = x.std(-1)
    assert say["decoder.0.norm1.std"].startswith(
        f"The spreads run from {rounded(spread.min())} (“b”) to {rounded(spread.max())} (“a”)"
    )
    assert "the rows' spread is 2 (before LayerNorm it ran from 0.25 to 2.24)" in say[
        "decoder.0.norm1.out"
    ]  # fmt: skip
    assert say["decoder.0.ffn.hidden"] == (
        "75% of the hidden values (4 units × 3 tokens) are exactly 0, cut by the activation; "
        "the largest is unit 2 for “b”: 4.5."
    )
    assert say["decoder.X"] == "The longest embedding is “a” (‖·‖ = 5), the shortest “b” (1)."
    assert say["probs"] == (
        "After “c” (the last position), the most likely next token is “yes” at 70%, then “no” "
        "at 30%."
    )


def test_changing_the_values_changes_the_sentence():
    words = ["x", "y"]
    for p, shown in ((0.25, "75%"), (0.9, "90%")):
        with tracing(labels={"decoder": words}) as trace:
            tap("probs", np.array([[0.5, 0.5], [p, 1 - p]]), cols=["up", "down"])
        top = "up" if p > 0.5 else "down"
        assert f"is “{top}” at {shown}" in shows(trace.steps[0], trace)


def test_a_classifier_names_its_classes_and_an_embedding_its_length(traces):
    _, trace = traces["classifier"]
    p = trace["probs"]
    k = int(np.argmax(p))
    assert shows(trace.step("probs"), trace).startswith(
        f"The most likely class is class {k} at {rounded(100 * p[k])}%"
    )
    assert kind("probs", trace) == "class.probs"
    _, trace = traces["embedder"]
    assert "(unit length)" in shows(trace.step("embedding"), trace)


def test_rounded_reads_3_significant_digits():
    cases = {
        105.21: "105", 4.677e-10: "4.68e-10", 0.99999999953: "1", 74526.1: "74500",
        -0.000123456: "-0.000123", 1.5e6: "1.50e+6", 0.0: "0", 11.4639: "11.5", 0.224378: "0.224",
        float("nan"): "nan", -float("inf"): "-inf",
    }  # fmt: skip
    assert {x: rounded(x) for x in cases} == cases


# -- the cards ----------------------------------------------------------------------------------


def _cards(page: str) -> dict[str, str]:
    found = re.findall(r'<article class="step" id="step-([^"]+)">(.*?)</article>', page, re.S)
    return {html.unescape(name): body for name, body in found}


def test_the_report_cards_hold_title_equation_both_sentences_and_the_name_in_order(traces):
    for arch in ("encoder-decoder", "classifier", "self-attention"):
        _, trace = traces[arch]
        cards = _cards(render_html(trace))
        assert list(cards) == trace.names()
        named = naming(trace)
        for s in trace.steps:
            card = cards[s.name]
            parts = [
                f'<h3 class="step-title">{html.escape(title(s.name, named))}</h3>',
                f'<span class="eq">{html.escape(s.equation)}</span>',
                f'<p class="what">{html.escape(what(s.name, named))}</p>',
                '<p class="shows">',
                f'<code class="name">{html.escape(s.name)}</code>',
            ]
            at = [card.find(p) for p in parts]
            assert -1 not in at and at == sorted(at), (arch, s.name, at)


def test_walkthrough_cards_keep_their_narration(traces):
    _, trace = traces["hello-world"]
    cards = _cards(render_html(trace))
    for s in trace.steps:
        if s.note:
            card = cards[s.name]
            assert f'<p class="note">{html.escape(s.note)}</p>' in card
            assert card.find('<p class="shows">') < card.find('<p class="note">')


def test_card_tables_round_to_3_digits_and_keep_the_exact_value_in_the_title():
    values = np.array([[3.14159265358979, 0.000123456], [123456.7, -2.5e-7]])
    with tracing() as trace:
        tap("x", values)
    card = _cards(render_html(trace))["x"]
    cells = re.findall(r'<td style="[^"]*"(?: class=\'dark\')? title="([^"]+)">([^<]+)</td>', card)
    assert [c[1] for c in cells] == ["3.14", "0.000123", "123000", "-2.50e-7"]
    np.testing.assert_allclose([float(c[0]) for c in cells], values.ravel(), rtol=1e-14)
    # Every number cell of the hello-world report: its text is its title's value, rounded.
    page = render_html(walkthrough.hello_world())
    cells = re.findall(r'<td style="[^"]*"(?: class=\'dark\')? title="([^"]+)">([^<]+)</td>', page)
    numbers = [(t, shown) for t, shown in cells if shown not in ("T", ".")]
    assert len(numbers) > 1000
    assert all(rounded(float(t)) == shown for t, shown in numbers)


def test_the_explorer_step_list_carries_the_titles():
    pytest.importorskip("starlette")
    from glassformer.serve import Explorer, Registry

    explorer = Explorer(Registry([ROOT / "models" / "en-es"]))
    body = {"model": "en-es", "text": "Hello world."}
    run = explorer.summary(body)

    def items(tree):
        for x in tree:
            yield x
            yield from items(x.get("items", []))

    found = list(items(run["steps"]))
    assert all("title" in x for x in found)
    by_name = {x.get("step") or x["group"]: x["title"] for x in found}
    assert by_name["decoder.1.cross_attn.head0.A"] == (
        "Decoder layer 1 · cross-attention · head 0 · attention weights"
    )
    assert by_name["decoder.1"] == "Decoder layer 1" and by_name["encoder"] == "Encoder"
    card = explorer.step(body | {"name": "decoder.1.cross_attn.head0.A"})["html"]
    assert "Decoder layer 1 · cross-attention · head 0 · attention weights</h3>" in card
    assert '<p class="shows">The most focused row is' in card


# -- in the browser: the report's cards, drawn by its bundled script ------------------------------
# (numbers.js's `fmt` against `rounded` on the same values: tests/test_js.py, under node)


def test_the_report_draws_its_cards_in_the_browser(browser, tmp_path, traces):  # noqa: F811
    driver = need(browser)
    _, trace = traces["encoder-decoder"]
    path = tmp_path / "words.html"
    path.write_text(render_html(trace), encoding="utf-8")
    driver.get(path.as_uri())
    driver.execute_script(
        "document.getElementById('step-decoder.1.cross_attn.head0.A').scrollIntoView()"
    )
    card = "document.getElementById('step-decoder.1.cross_attn.head0.A')"
    drawn = f"return {card}.querySelectorAll('.hm canvas, table.mat').length"
    for _ in range(100):  # its map is drawn as it scrolls into view
        if driver.execute_script(drawn):
            break
        time.sleep(0.05)
    assert driver.execute_script(drawn) > 0
    screenshot(driver, tmp_path, "steps-cards.png")
