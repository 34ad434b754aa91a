"""The HTML report and the PNG heatmaps, without a browser: self-contained, complete, bounded.

(tests/test_browser.py opens the same reports in headless Chromium.)
"""

import base64
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from glassformer import reference as R
from glassformer import walkthrough, weights
from glassformer.cli import main
from glassformer.config import Config, preset
from glassformer.decoding import beam_search, greedy
from glassformer.errors import GlassformerError
from glassformer.explain.bundle import bundle
from glassformer.explain.html import MAX_BYTES, asset, render_html
from glassformer.explain.html_pieces import heatmap_data
from glassformer.explain.select import Group, HeadNumbers, attention_maps, group_steps
from glassformer.explain.text import render
from glassformer.trace import scope, tap, tracing

FORBIDDEN = ("http://", "https://", "//cdn", "<link", 'src="http', "src=", "url(", "@import")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def data_of(page: str) -> dict:
    block = re.search(r'<script type="application/json" class="gf-data">(.*?)</script>', page, re.S)
    assert block, "no embedded data block"
    assert "</" not in block.group(1)
    return json.loads(block.group(1))


def cards(page: str) -> dict[str, str]:
    """Step name -> the HTML of its card in the 'every step' section."""
    found = re.findall(r'<article class="step" id="step-([^"]+)">(.*?)</article>', page, re.S)
    return {html.unescape(name): body for name, body in found}


def section(page: str, name: str) -> str:
    m = re.search(rf'<section id="gf-{name}">(.*?)</section>', page, re.S)
    assert m, f"no {name} section"
    return m.group(1)


def assert_self_contained(page: str) -> None:
    for text in FORBIDDEN:
        assert text not in page, f"{text!r} in the report"
    assert page.count("<script") == 2  # the data block and the inline script, nothing fetched


@pytest.fixture(scope="module")
def hello():
    trace = walkthrough.hello_world()
    return trace, render_html(trace, title="The Random Transformer")


@pytest.fixture(scope="module")
def big():
    """The issue's biggish random model: decoder, d_model 256, 8 heads, 6 layers, 100 tokens."""
    cfg = Config(arch="decoder", d_model=256, n_heads=8, n_decoder_layers=6, max_len=128)
    params = weights.init(cfg, seed=0)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, 100)
    with tracing(labels={"decoder": [f"t{i}" for i in ids]}) as trace:
        R.forward(params, cfg, ids)
    return trace, params


@pytest.fixture(scope="module")
def seq2seq():
    """The hello-world preset's encoder-decoder, traced like `explain` does."""
    cfg = preset("hello-world")
    params = weights.init(cfg, seed=1, std=0.3)
    words = ["hello", "world", "how", "are"]
    with tracing(labels={"encoder": words[:2], "decoder": ["SOS", *words]}) as trace:
        R.forward(params, cfg, [6, 0, 2, 3, 1], src_ids=[0, 2])
    return trace, params


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "hello"
    assert main(["init", str(path), "--preset", "hello-world", "--seed", "1"]) == 0
    return path


# -- the hello-world report: the article's story and every step ---------------------------------


def test_hello_world_report_is_self_contained_and_has_every_step(hello):
    trace, page = hello
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert_self_contained(page)
    shown = cards(page)
    assert list(shown) == trace.names()  # every step, once, in the order the data flows
    for s in trace.steps:
        card = shown[s.name]
        assert html.escape(s.equation) in card, s.name
        dims = " × ".join(map(str, s.shape)) if s.shape else "scalar"
        assert f"shape {dims}" in card, s.name
    assert "(T × D)" in shown["head1.Q"] and "(T × T)" in shown["head1.A"]
    assert "(S × D)" in shown["model.step3.decoder.0.cross_attn.head0.K"]
    assert "(T × S)" in shown["model.step3.decoder.0.cross_attn.head0.A"]


def test_hello_world_report_shows_the_articles_numbers(hello):
    trace, page = hello
    shown = cards(page)
    assert ">105<" in shown["head1.scores"]  # 105.21, read to 3 significant digits
    assert ">4.68e-10<" in shown["head1.A"]
    assert 'title="0.99999999953' in shown["head1.A"]  # 1 - 4.677e-10, exact on hover
    assert ">11.5<" in shown["div30.Z"] and 'title="11.4639' in shown["div30.Z"]
    assert ">0.224<" in shown["div30.head1.A"]
    assert ">nan<" in shown["overflow.naive.max_abs"]
    assert "Hello" in shown["head1.A"] and "World" in shown["head1.A"]  # labelled axes
    for s in trace.steps:
        if s.note:
            assert html.escape(s.note) in page, s.name


def test_hello_world_report_tells_the_story(hello):
    trace, page = hello
    story = section(page, "story")
    assert story.count('<article class="step"') == sum(1 for s in trace.steps if s.note)

    overflow = section(page, "overflow")
    assert overflow.count("<svg") == 1 and overflow.count("<path") == 3
    naive = trace["overflow.naive.max_abs"]
    assert overflow.count('class="nan"') == int(np.isnan(naive).sum()) == 5
    assert "74526.1" in overflow  # the stable softmax's huge values, block 6

    scaling = section(page, "scaling")
    for name in ("head1.A", "div30.head1.A", "head2.A", "div30.head2.A"):
        assert f"<code>{name}</code>" in scaling
    assert "÷√3" in scaling and "÷30" in scaling and ">0.224<" in scaling

    attention = section(page, "attention")
    maps = attention_maps(trace.steps)
    assert attention.count('<figure class="att"') == len(maps)
    assert attention.count(" hidden>") == len(maps) - 1  # one map shown at a time
    for cls in ("pick-site", "pick-layer", "pick-head"):
        assert f'<select class="{cls}"' in attention
    assert 'value="model.step6.decoder.cross_attn"' in attention

    generation = section(page, "generation")
    words = trace.step("generate.output_ids").cols
    assert generation.count("<div class='gen'>") == len(words) - 1
    assert generation.count("class=chosen") == len(words) - 1
    for n in range(len(words) - 1):
        assert f"<h4>step {n}</h4>" in generation


def test_the_story_shows_wq_wk_wv_over_q_k_v(hello):
    _, page = hello
    story = section(page, "story")
    rows = re.findall(
        r"<div class='trio'>(.*?)</div>(?=<article|<div class='trio'>|$)", story, re.S
    )
    names = [re.findall(r'<code class="name">([^<]+)</code>', r) for r in rows]
    for h in ("head1", "head2"):
        assert [f"{h}.{m}" for m in ("WQ", "WK", "WV", "Q", "K", "V")] in names
    raschka = section(render_html(walkthrough.self_attention()), "story")
    assert "trainable.W_key" in raschka and "trainable.W_value" in raschka


def test_one_head_numbering_from_0_said_once(hello):
    trace, page = hello
    numbers = HeadNumbers(trace.steps)
    assert numbers.from_one == {"", "div30"}  # the article's head1 and head2, with and ÷30
    assert [numbers.shown(n) for n in ("head1.A", "div30.head2.A")] == [0, 1]
    assert numbers.shown("model.encoder.2.self_attn.head1.A") == 1  # the model's: as named
    assert numbers.shown("seeded.block.head0.A") == 0  # the article's code counts from 0
    assert page.count("Heads are counted from 0 everywhere") == 1
    assert "its head 1 and head 2 (steps head1.*, head2.*) are head 0 and head 1 here" in page
    attention = section(page, "attention")
    found = re.findall(r'data-head="(\d*)" data-name="([^"]+)"', attention)
    heads = {name: h for h, name in found}
    assert heads["head1.A"] == "0" and heads["head2.A"] == "1" and heads["div30.head2.A"] == "1"
    assert heads["model.encoder.2.self_attn.head1.A"] == "1"
    assert {int(h) for h in heads.values()} == {0, 1}  # 2 heads everywhere, one numbering
    assert html.escape("Head 0 (the article's head 1) · queries Q") in cards(page)["head1.Q"]
    h3 = "<h3>" + html.escape("head 1 (the article's head 2)") + ": <code>head2</code></h3>"
    assert h3 in section(page, "scaling")
    raschka = walkthrough.self_attention()  # the book's heads count from 0 already
    assert HeadNumbers(raschka.steps).from_one == set()
    assert "the article's head" not in render_html(raschka)


def test_no_group_header_appears_twice(hello, big, seq2seq):
    pages = [hello[1], render_html(big[0]), render_html(seq2seq[0])]
    pages.append(render_html(walkthrough.self_attention()))
    for page in pages:
        headers = re.findall(
            r"<summary><b[^>]*>[^<]*</b> <code>([^<]+)</code>", section(page, "steps")
        )
        assert headers
        assert len(headers) == len(set(headers)), [h for h in headers if headers.count(h) > 1]
    tree = group_steps(hello[0].steps)

    def keys(items):
        return [k for x in items if isinstance(x, Group) for k in (x.key, *keys(x.items))]

    def count(items):
        return sum(x.count() if isinstance(x, Group) else 1 for x in items)

    assert count(tree) == len(hello[0].steps)
    top = [x.key if isinstance(x, Group) else x.name for x in tree]
    assert top[:4] == ["embeddings", "positions", "encoder_input", "head1"]
    assert "model.step0" in keys(tree) and "model.step0.decoder.0" in keys(tree)
    div30 = next(x for x in tree if isinstance(x, Group) and x.key == "div30")
    assert [getattr(x, "name", None) for x in div30.items[1:]] == [
        "div30.concat",
        "W_O",
        "div30.Z",
    ]  # fmt: skip  W_O, a lone step between two div30 steps, joins them


def test_masked_scores_are_shown_masked():
    trace = walkthrough.self_attention()
    shown = cards(render_html(trace))
    for name in ("causal.scores", "causal.scaled"):
        assert shown[name].count('class="masked"') == 15, name  # above the diagonal of 6 x 6
        assert shown[name].count(">−∞<") == 15
    assert 'title="masked: set to −∞ before the softmax (computed 0.0' in shown["causal.scaled"]
    assert "masked" not in shown["causal.A"] and shown["causal.A"].count(">0<") == 15
    assert "masked" not in shown["v2.scaled"]  # no mask beside it


def test_masked_scores_in_a_heatmap_are_minus_infinity(big):
    trace, _ = big
    page = render_html(trace)
    key = re.search(
        r'id="step-decoder\.2\.self_attn\.head3\.scaled">.*?data-key="(s\d+)"', page, re.S
    ).group(1)
    m = data_of(page)["maps"][key]
    values = np.frombuffer(base64.b64decode(m["f16"]), "<f2").astype(float).reshape(100, 100)
    above = np.triu(np.ones((100, 100), bool), k=1)
    assert m["masked"] is True and np.all(values[above] == -np.inf)
    S = trace["decoder.2.self_attn.head3.scaled"]
    np.testing.assert_allclose(values[~above] * m["scale"], S[~above], atol=1e-3 * m["scale"])
    assert "masked" not in data_of(page)["maps"][key.replace(key, "s0")]
    # Downsampled, a block is the mean of its unmasked scores, masked when it has none.
    S = np.random.default_rng(0).normal(size=(128, 128))
    small = heatmap_data(S, None, None, shrunk=True, masked=np.triu(S < np.inf, k=1))
    v = np.frombuffer(base64.b64decode(small["f16"]), "<f2").astype(float).reshape(64, 64)
    assert np.all(v[np.triu_indices(64, 1)] == -np.inf) and np.isfinite(np.tril(v)).all()
    mean = (S[0, 0] + S[1, 0] + S[1, 1]) / 3  # the diagonal block's three unmasked scores
    assert v[0, 0] * small["scale"] == pytest.approx(mean, rel=1e-3)


def test_style_and_script_are_the_package_asset_files_inlined():
    page = render_html(walkthrough.self_attention())
    root = re.search(r'<div class="gf" id="(gf-[0-9a-f]{10})">', page).group(1)
    assert f"<style>\n{asset('report.css')}</style>" in page
    script = bundle("report.js", asset).replace("ROOT_ID", root)
    assert f"<script>\n{script}</script>" in page
    modules = re.findall(r"^// -- ([\w-]+\.js)$", script, flags=re.M)
    assert modules == ["dom.js", "numbers.js", "heatmap.js", "report.js"]  # the drawing first
    assert "ROOT_ID" in asset("report.js") and "ROOT_ID" not in page


def test_repr_html_needs_only_the_trace_import():
    """In Jupyter `from glassformer.trace import tracing` alone gives the HTML view: the package
    installs it (the trace itself imports nothing from explain), and renders only when asked."""
    code = (
        "import sys\n"
        "from glassformer.trace import tap, tracing\n"
        "assert 'glassformer.explain.html' not in sys.modules\n"
        "with tracing() as tr:\n"
        "    tap('x', [[1.0, 2.0]])\n"
        "print(tr._repr_html_())\n"
    )
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    page = r.stdout
    assert page.startswith("<!DOCTYPE html>")
    assert list(cards(page)) == ["x"]  # the report of this trace: its one step
    assert_self_contained(page)


# -- large traces: heatmaps, data, the size bound -----------------------------------------------


def test_big_model_report_stays_under_the_bound_with_every_step(big):
    trace, params = big
    page = render_html(trace, params=params, vocab=[f"v{i}" for i in range(256)])
    size = len(page.encode())
    assert size < MAX_BYTES, f"{size / 1e6:.1f} MB"
    assert_self_contained(page)
    assert list(cards(page)) == trace.names()
    data = data_of(page)["maps"]
    # A step's heatmap decodes to its values (float16 of value / scale).
    key = re.search(
        r'id="step-decoder\.3\.self_attn\.head5\.A">.*?data-key="(s\d+)"', page, re.S
    ).group(1)
    m = data[key]
    values = np.frombuffer(base64.b64decode(m["f16"]), "<f2").astype(float) * m["scale"]
    A = trace["decoder.3.self_attn.head5.A"]
    assert m["shape"] == [100, 100] and m["rows"] == trace.labels["decoder"]
    np.testing.assert_allclose(values.reshape(100, 100), A, atol=1e-3 * A.max())
    assert "γ (gain)" in page and "W_O (H·D × C)" in page


def test_a_tight_bound_downsamples_then_drops_with_a_note(big):
    trace, _ = big
    page = render_html(trace, max_bytes=6_000_000)
    assert len(page.encode()) <= 6_000_000
    assert "Shown downsampled from 100 × 256 to 64 × 64 (block means)" in page
    assert "left out" not in page
    page = render_html(trace, max_bytes=2_000_000)
    assert len(page.encode()) <= 2_000_000
    assert "Shown downsampled from 100 × 32 to 64 × 32" in page
    assert "left out to keep the file under 2 MB" in page
    assert list(cards(page)) == trace.names()
    with pytest.raises(GlassformerError, match="over its 0.1 MB bound"):
        render_html(trace, max_bytes=100_000)


def test_layers_and_heads_choose_what_is_shown(seq2seq):
    trace, _ = seq2seq
    page = render_html(trace, layers=[1], heads=[0])
    shown = cards(page)
    assert "encoder.1.self_attn.head0.A" in shown and "decoder.1.cross_attn.head0.A" in shown
    assert "encoder.1.ffn.hidden" in shown and "encoder.X" in shown and "logits" in shown
    assert not [n for n in shown if n.startswith(("encoder.0.", "decoder.0."))]
    assert not [n for n in shown if ".head1." in n]
    assert "Showing only layers 1 and heads 0" in page


def test_labels_cannot_break_out_of_the_page():
    evil = ["</script><b>x", "a&b", '"q"', "<!--"] * 4  # 16 tokens: a heatmap, data in JSON
    X = np.random.default_rng(0).normal(size=(16, 4))
    with tracing(labels={"encoder": evil}) as trace:
        with scope("encoder.0.self_attn.head0"):
            R.attention(X, X, X)
    page = render_html(trace)
    assert page.count("</script>") == 2
    assert data_of(page)["maps"]  # parses, holds the labels escaped
    assert "&lt;/script&gt;&lt;b&gt;x" in page


def test_generation_and_beam_search_are_explained(seq2seq):
    trace, _ = seq2seq
    vocab = ["a", "b", "c", "EOS"]

    def step(ids):
        return np.log(np.array([0.1, 0.6, 0.2, 0.1]) if len(ids) < 3 else [0.1, 0.1, 0.1, 0.7])

    gen = greedy(step, [0], max_new_tokens=5, eos_id=3)
    page = render_html(trace, vocab=vocab, generation=gen)
    part = section(page, "generation")
    assert part.count("<div class='gen'>") == 3 and part.count("class=chosen") == 3
    assert "<h4>step 2</h4>" in part and ">0.7000<" in part
    beam = beam_search(step, [0], max_new_tokens=4, eos_id=3, width=2)
    part = section(render_html(trace, vocab=vocab, generation=beam), "generation")
    assert "beam after step 0" in part and "Best hypothesis" in part


def test_probs_rows_explain_the_next_token(seq2seq):
    trace, _ = seq2seq
    part = section(render_html(trace, vocab=preset_vocab()), "generation")
    assert part.count("<div class='gen'>") == 5  # one per decoder position
    assert "position 4" in part


def preset_vocab():
    from glassformer.tokenizer import article_tokenizer

    return article_tokenizer().vocab


# -- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hello-world", "self-attention"])
def test_walkthrough_html(capsys, tmp_path, name):
    f = tmp_path / "report.html"
    code, out, err = run(capsys, "walkthrough", name, "--html", f)
    assert code == 0 and err == ""
    assert out.startswith(f"wrote {f} (") and out.count("\n") == 1
    page = f.read_text(encoding="utf-8")
    assert_self_contained(page)
    assert len(page.encode()) < MAX_BYTES
    trace = walkthrough.hello_world() if name == "hello-world" else walkthrough.self_attention()
    assert list(cards(page)) == trace.names()


def test_explain_html_and_png(capsys, tmp_path, ckpt):
    pytest.importorskip("matplotlib")
    f, d = tmp_path / "x.html", tmp_path / "png"
    code, out, _ = run(
        capsys, "explain", ckpt, "Hello World", "--html", f, "--png", d, "--layers", "0,1",
        "--heads", "0",
    )  # fmt: skip
    assert code == 0 and "wrote 6 attention heatmaps" in out
    pngs = sorted(p.name for p in d.iterdir())
    assert len(pngs) == 6 and all(p.endswith(".png") for p in pngs)
    assert "decoder.1.cross_attn.head0.A.png" in pngs and "encoder.0.self_attn.head0.A.png" in pngs
    assert all((d / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    page = f.read_text(encoding="utf-8")
    assert_self_contained(page)
    shown = cards(page)
    assert "decoder.1.cross_attn.head0.A" in shown and "probs" in shown
    assert not [n for n in shown if n.startswith("encoder.2.") or ".head1." in n]
    assert "hello" in page and "“Hello World”" in page


def test_a_small_batched_tensor_is_shown_matrix_by_matrix():
    x = np.arange(2 * 3 * 2 * 2, dtype=float).reshape(2, 3, 2, 2)
    with tracing() as trace:
        tap("x", x, equation="x (B × H × T × T)", rows=["a", "b"], cols=["a", "b"], note="n")
    text = render(trace)
    for i in np.ndindex(2, 3):
        block = text.split(f"[{i[0]}, {i[1]}]\n")[1].splitlines()
        assert block[0].split() == ["a", "b"] and block[2].split()[0] == "b"
        assert block[1].split() == ["a", *(f"{v:g}" for v in x[i][0])]
    page = render_html(trace)
    body = cards(page)["x"]
    assert body.count('<table class="mat">') == 6 and 'class="hm"' not in body
    assert "<p class='shape'>[1, 2]</p>" in body


def test_batched_steps_are_tables_matrix_by_matrix(capsys, tmp_path):
    f = tmp_path / "sa.html"
    assert run(capsys, "walkthrough", "self-attention", "--html", f)[0] == 0
    shown = cards(f.read_text(encoding="utf-8"))
    for name, index in (
        ("batch.X", ["[0]", "[1]"]),
        ("mha.A", ["[0, 0]", "[0, 1]", "[1, 0]", "[1, 1]"]),
    ):
        body = shown[name]
        assert re.findall(r"<p class='shape'>(\[[0-9, ]+\])</p>", body) == index
        assert body.count('<table class="mat">') == len(index) and 'class="hm"' not in body
        assert "<th>journey</th>" in body
    assert "0.319018" in shown["mha.out"]  # MultiHeadAttention's first output, raschka_08


def test_walkthrough_png_writes_one_file_per_map(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    code, out, _ = run(capsys, "walkthrough", "self-attention", "--png", tmp_path)
    n = len(attention_maps(walkthrough.self_attention().steps))
    assert code == 0 and f"wrote {n} attention heatmaps" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "all.A.png",
        "causal.A.png",
        "dropout.A.png",
        "simple.A.png",
        "v2.A.png",
    ]


def test_explain_html_on_a_decoder(capsys, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("to be or not to be\n")
    dec = tmp_path / "dec"
    assert (
        run(capsys, "init", dec, "--preset", "tiny", "--tokenizer", "char", "--corpus", corpus)[0]
        == 0
    )
    f = tmp_path / "d.html"
    code, _, _ = run(capsys, "explain", dec, "to be", "--html", f)
    assert code == 0
    page = f.read_text(encoding="utf-8")
    assert_self_contained(page)
    assert "position 4" in section(page, "generation")
    assert "masked self-attention (decoder)" in section(page, "attention")
    # Token labels read as text: the space is ␣ (in the chips, the tables, the heatmap data).
    assert '<span class="tok">␣</span>' in section(page, "steps")
    assert "<th>␣</th>" in page and '"␣"' in page
    assert '<span class="tok"> </span>' not in page

    code, out, _ = run(capsys, "explain", dec, "to be", "--only", "head0.A")
    assert code == 0 and "␣" in out
    j = tmp_path / "d.json"
    assert run(capsys, "explain", dec, "to be", "--json", j)[0] == 0
    data = json.loads(j.read_text(encoding="utf-8"))
    assert data["labels"] == {"decoder": list("to be")}  # the raw pieces, as before
    assert data["labels_readable"] == {"decoder": ["t", "o", "␣", "b", "e"]}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--layers", "x"], "--layers 'x': give numbers counted from 0"),
        (["--layers", "0,,1"], "--layers '0,,1': give numbers"),
        (["--layers", "-1"], "--layers '-1': give numbers"),
        (["--layers", "1.5"], "--layers '1.5': give numbers"),
        (["--layers", "9"], "--layers: no layer 9 in this trace; choose from 0-5"),
        (["--heads", "2"], "--heads: no head 2 in this trace; choose from 0-1"),
    ],
)
def test_bad_layers_and_heads_are_one_line_and_exit_2(capsys, tmp_path, ckpt, argv, message):
    f = tmp_path / "x.html"
    code, out, err = run(capsys, "explain", ckpt, "Hello World", "--html", f, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("glassformer: error: ") and message in err
    assert not f.exists()


def test_layers_on_a_walkthrough_without_layers(capsys):
    code, out, err = run(capsys, "walkthrough", "self-attention", "--layers", "0")
    assert code == 2 and out == "" and "no model layers" in err and err.count("\n") == 1


def test_attention_weights_are_coloured_on_0_to_1_and_other_matrices_on_their_own_range():
    """Issue 39, friction 2: one colour rule. An attention map's cells (A, rows summing to 1)
    are tinted by their value on the fixed 0..1, as a table or a heatmap: a near-uniform row of
    an encoder with small weights (every weight near 1/T) is pale, not the darkest blue because
    it is the map's own largest value. Any other matrix keeps its own largest |value|."""
    from glassformer.explain.html_pieces import WEIGHTS_SCALE, tint

    cfg = Config(arch="encoder", vocab_size=16, d_model=8, n_heads=2, d_ff=16, max_len=8,
                 n_encoder_layers=1)  # fmt: skip
    params = weights.init(cfg, seed=0, std=0.02)
    with tracing() as trace:
        R.encoder(params, cfg, [1, 2, 3, 4, 5, 6, 7])
    page = render_html(trace)
    card = page.split('id="step-encoder.0.self_attn.head0.A"', 1)[1].split("</article>", 1)[0]
    cells = re.findall(r'<td style="background:(#[0-9a-f]{6})"[^>]*title="([^"]+)"', card)
    A = trace["encoder.0.self_attn.head0.A"]
    assert len(cells) == A.size and A.max() < 0.2  # near uniform: 1/7 each
    for colour, value in cells:
        assert colour == tint(float(value) / WEIGHTS_SCALE, True)[0]
    map_of_A = heatmap_data(A, None, None, False, scale=WEIGHTS_SCALE)
    assert map_of_A["scale"] == 1.0
    scores = heatmap_data(trace["encoder.0.self_attn.head0.scores"], None, None, False)
    assert scores["scale"] == np.abs(trace["encoder.0.self_attn.head0.scores"]).max()


def test_the_png_of_a_uniform_map_is_pale_as_on_the_page(tmp_path):
    """The one colour rule (issue 39, friction 2) in the --png pictures too: attention weights on
    the fixed 0..1. A head spreading 1/7 over seven keys drew as solid dark blue (coloured
    against its own largest weight, 0.143); now its cells are the colour of 1/7 on 0..1."""
    matplotlib = pytest.importorskip("matplotlib")
    from glassformer.explain.plots import write_attention_pngs

    with tracing() as trace:
        with scope("decoder.0.self_attn.head0"):
            tap("A", np.full((7, 7), 1 / 7))
    (path,) = write_attention_pngs(trace, tmp_path)
    image = matplotlib.image.imread(path)[..., :3]  # (H, W, 3) in 0..1
    blues = matplotlib.colormaps["Blues"]
    pale, dark = np.array(blues(1 / 7)[:3]), np.array(blues(1.0)[:3])
    # The map's cells: the pixels nearest to either colour, counted.
    near = lambda c: (np.abs(image - c).max(-1) < 0.02).sum()  # noqa: E731
    assert near(pale) > 5000 and near(dark) < near(pale) / 20
