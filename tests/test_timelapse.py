"""The training time-lapse shown (explain/timelapse.py, assets/timelapse.js, GET /api/views).

Oracles: the file. The page (`explain RUN --over-training --html`), its JSON (--json) and the
explorer's endpoint carry exactly what views.safetensors holds: each map decoded here from its
base64 float16 (little-endian) equals, bit for bit, the tensor safetensors reads from the file,
and every step, row, token and metric equals `views.load`'s. The text table's numbers are the
frames' metrics, rounded; its best head is the argmax of the file's prefix scores. The command's
refusals are one line and exit 2. In headless Chromium (as tests/test_browser.py runs it; the
same rule when it is missing): moving the slider draws another map, whose hovered value is the
recorded one of that frame, and moves the marker on every curve; the explorer's Training tab
shows only for a model with views.

The views of most tests are made by hand (frames whose maps differ visibly, known values); one
tiny real training run checks the table against what `train --snapshot-views` recorded.
"""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from test_browser import assert_offline_and_clean, browser, need, open_report  # noqa: E402, F401
from test_serve import Client  # noqa: E402

from glassformer import weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.explain import timelapse  # noqa: E402
from glassformer.explain.words import rounded  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402
from glassformer.tokenizer import CharTokenizer  # noqa: E402
from glassformer.training import views  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAR_LM = ROOT / "models" / "char-lm"
PROBE = "abcdabcd"
STEPS = [0, 10, 20, 30, 40]
LAYERS, HEADS = 2, 2


def hand_made_frames() -> list[views.Frame]:
    """Frames whose maps move from uniform towards an induction pattern (layer 1, head 1) and a
    previous-token pattern (layer 0, head 0), with noise so that every frame differs."""
    rng = np.random.default_rng(7)
    ids = [0, 1, 2, 3, 0, 1, 2, 3]
    T = len(ids)
    causal = np.tril(np.ones((T, T)))
    targets = views.prefix_targets(ids)
    frames = []
    for k, step in enumerate(STEPS):
        t = k / (len(STEPS) - 1)
        maps = {}
        for layer in range(LAYERS):
            heads = []
            for h in range(HEADS):
                w = causal * rng.uniform(0.5, 1.5, (T, T))
                for i in range(T):
                    if layer == 1 and h == 1 and targets[i]:
                        w[i, targets[i]] += 30 * t
                    if layer == 0 and h == 0 and i:
                        w[i, i - 1] += 20 * t
                heads.append(w / w.sum(axis=1, keepdims=True))
            maps[f"decoder.{layer}.self_attn"] = np.stack(heads)  # (H, T, T)
        logits = rng.normal(size=(T, 4)) * (1 + 3 * t)
        metrics = views.frame_metrics(maps, {"decoder": ids}, logits, True)
        row = {} if step == 0 else {"loss": 1.4 - 0.02 * step, "lr": 1e-3}
        if step in (20, 40):
            row["val_loss"] = 1.5 - 0.02 * step
        f16 = {name: a.astype(np.float16) for name, a in maps.items()}
        frames.append(views.Frame(step, row, {"decoder": list(PROBE)}, metrics, f16))
    return frames


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A loadable model folder (random weights, a character tokenizer) with hand-made views."""
    folder = tmp_path_factory.mktemp("timelapse") / "timelapse-run"
    tok = CharTokenizer.train([PROBE + " xyz"])
    cfg = Config(arch="decoder", vocab_size=tok.vocab_size, d_model=16, n_heads=HEADS,
                 n_decoder_layers=LAYERS, max_len=32)  # fmt: skip
    weights.save(folder, cfg, weights.init(cfg, seed=1, std=0.3), tokenizer=tok)
    data = views.encode(views.Views(PROBE, 10, hand_made_frames()))
    (folder / views.VIEWS_FILE).write_bytes(data)
    return folder


def file_tensors(folder: Path) -> dict[str, np.ndarray]:
    """The maps as safetensors itself reads them from the file: {"f{k}.{site}": (H, T, T)}."""
    from safetensors.numpy import load_file

    return load_file(str(folder / views.VIEWS_FILE))


def f16(m: dict) -> np.ndarray:
    """A page's map: base64 of float16, little-endian, with its shape."""
    return np.frombuffer(base64.b64decode(m["f16"]), dtype="<f2").reshape(m["shape"])


def assert_carries_the_file(data: dict, folder: Path) -> None:
    """Every map bit for bit, every step, row, token and metric as recorded."""
    recorded, tensors = views.load(folder), file_tensors(folder)
    assert data["text"] == recorded.text and data["every"] == recorded.every
    assert [f["step"] for f in data["frames"]] == [f.step for f in recorded.frames]
    for k, (got, want) in enumerate(zip(data["frames"], recorded.frames, strict=True)):
        assert got["row"] == want.row and got["tokens"] == want.tokens
        assert got["metrics"] == want.metrics
        assert set(got["maps"]) == set(want.maps)
        for name, m in got["maps"].items():
            a, b = f16(m), tensors[f"f{k}.{name}"]
            assert a.shape == b.shape and np.array_equal(a.view(np.uint16), b.view(np.uint16))


def page_json(html: str) -> dict:
    block = re.search(
        r'<script type="application/json" class="gf-views">(.*?)</script>', html, re.S
    )
    return json.loads(block.group(1))


def explain(capsys, *argv) -> tuple[int, str, str]:
    code = main(["explain", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


# -- the page and the JSON carry the file -------------------------------------------------------


def test_the_page_carries_exactly_the_recorded_values(capsys, run_dir, tmp_path):
    page = tmp_path / "timelapse.html"
    code, out, err = explain(capsys, run_dir, "--over-training", "--html", page)
    assert code == 0 and err == "" and out.startswith(f"wrote {page} (")
    html = page.read_text(encoding="utf-8")
    assert_carries_the_file(page_json(html), run_dir)
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)  # loads nothing
    data = page_json(html)
    assert data["words"]["headline"] == expected_headline(run_dir)
    assert "Olsson et al. 2022" in data["words"]["prefix"]


def test_the_json_export_carries_exactly_the_recorded_values(capsys, run_dir, tmp_path):
    out_file = tmp_path / "views.json"
    code, out, _ = explain(capsys, run_dir, "--over-training", "--json", out_file)
    assert code == 0 and out == f"wrote {len(STEPS)} frames to {out_file}\n"
    data = json.loads(out_file.read_text())
    assert_carries_the_file(data, run_dir)
    assert [s["name"] for s in data["sites"]] == ["decoder.0.self_attn", "decoder.1.self_attn"]


def expected_headline(folder: Path) -> str:
    """The hand-made run's headline written here from the file's metrics: the best head of the
    last frame (the argmax of its prefix scores), that head's score at the first frame, uniform
    attention's score on "abcdabcd" and the probe's losses."""
    recorded = views.load(folder)
    first, last = recorded.frames[0].metrics, recorded.frames[-1].metrics
    prefix = last["prefix"]
    site, head = max(
        ((s, h) for s in prefix for h in range(HEADS)), key=lambda x: prefix[x[0]][x[1]]
    )
    assert (site, head) == ("decoder.1.self_attn", 1)  # made so
    uniform = np.mean([1 / 5, 1 / 6, 1 / 7, 1 / 8])  # rows 4..7 of "abcdabcd": one target each
    before = first["prefix"][site][head]
    return (
        f"At step 40, layer 1 · head 1 puts {rounded(prefix[site][head])} of its attention on the "
        f"token after the earlier copy (the highest prefix-matching score of any head; "
        f"{rounded(before)} at step 0), where uniform attention would put {rounded(uniform)}. "
        f"The probe's loss went from {rounded(first['probe_loss'])} at step 0 to "
        f"{rounded(last['probe_loss'])} at step 40: {rounded(last['repeat_loss'])} on the tokens "
        f"an earlier copy gives away, {rounded(last['first_loss'])} on the others."
    )


def test_the_headline_names_the_best_head_of_the_last_frame(run_dir):
    assert timelapse.headline(views.load(run_dir)) == expected_headline(run_dir)


def encoder_decoder_views() -> views.Views:
    """An encoder-decoder's frames: its translation of the probe grows from frame to frame, so
    the decoder's maps change shape; cross-attention has no prefix score."""
    rng = np.random.default_rng(3)
    src, frames = list("hello"), []
    for k, step in enumerate([0, 5, 10]):
        tgt = list("hola!")[: 2 + k]
        S, T = len(src), len(tgt)
        shapes = {"encoder.0.self_attn": (S, S), "decoder.0.self_attn": (T, T)}
        shapes["decoder.0.cross_attn"] = (T, S)
        maps = {}
        for name, (r, c) in shapes.items():
            w = rng.uniform(0.1, 1, (2, r, c)) * (np.tril(np.ones((r, c))) if r == c else 1)
            maps[name] = w / w.sum(-1, keepdims=True)  # (H, r, c)
        ids = {"encoder": [1, 2, 3, 3, 4], "decoder": list(range(T))}
        metrics = views.frame_metrics(maps, ids, None, False)
        f16 = {n: a.astype(np.float16) for n, a in maps.items()}
        frames.append(views.Frame(step, {"loss": 2 - k / 10}, {"encoder": src, "decoder": tgt},
                                  metrics, f16))  # fmt: skip
    return views.Views("hello", 5, frames)


def test_an_encoder_decoders_sites_and_words():
    v = encoder_decoder_views()
    data = timelapse.page_data(v)
    assert [(s["group_title"], s["scored"]) for s in data["sites"]] == [
        ("encoder self-attention", True),
        ("decoder self-attention", True),
        ("decoder cross-attention", False),
    ]
    assert data["sites"][2]["heads"][1]["title"] == "Decoder layer 0 · cross-attention · head 1"
    assert "probe's loss" not in data["words"]["headline"]  # a decoder-only measure
    assert data["chance"]["encoder"] == pytest.approx(1 / 5)  # "hello": one l after an l


# -- the text table -----------------------------------------------------------------------------


def table_rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.split()[:2] == ["step", "loss"])
    rows = []
    for x in lines[start + 1 :]:
        if not x.strip():
            break
        rows.append(re.split(r"\s{2,}", x.strip()))
    return rows


def check_table(out: str, folder: Path) -> None:
    recorded = views.load(folder)
    rows = table_rows(out)
    assert len(rows) == len(recorded.frames)
    val = any("val_loss" in f.row for f in recorded.frames)
    shown = lambda x: "—" if x is None else rounded(x)  # noqa: E731
    for cells, f in zip(rows, recorded.frames, strict=True):
        m = f.metrics
        scores = [(s, h, x) for s, per in m["prefix"].items() for h, x in enumerate(per)]
        site, head, top = max(scores, key=lambda t: t[2])  # the file's argmax
        want = [f"{f.step:,}", shown(f.row.get("loss"))]
        want += [shown(f.row.get("val_loss"))] if val else []
        want += [shown(m[k]) for k in ("probe_loss", "repeat_loss", "first_loss")]
        want += [rounded(top), f"Layer {site.split('.')[1]} · head {head}"]
        assert cells == want, f.step


def test_the_text_table_is_the_frames_metrics(capsys, run_dir):
    code, out, err = explain(capsys, run_dir, "--over-training")
    assert code == 0 and err == ""
    check_table(out, run_dir)
    assert out.strip().endswith("\n" + expected_headline(run_dir))


def test_the_table_of_a_real_training_run(capsys, tmp_path):
    out = tmp_path / "run"
    args = ["train", "lm", "--out", str(out), "--data", "repeats", "--quiet"]
    args += ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=16", "--set", "max_len=16"]
    args += ["--set", "max_steps=40", "--set", "eval_interval=20", "--set", "eval_iters=1"]
    assert main([*args, "--snapshot-views", "xyzwxyzw", "--view-every", "10"]) == 0
    capsys.readouterr()
    code, text, _ = explain(capsys, out, "--over-training")
    assert code == 0
    check_table(text, out)
    assert [f.step for f in views.load(out).frames] == [0, 10, 20, 30, 40]


# -- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, message",
    [
        (["some text"], "--over-training shows the probe text recorded while training, not"),
        (["--only", "A"], "--only does nothing with --over-training"),
        (["--layers", "0"], "--layers does nothing with --over-training"),
        (["--strategy", "greedy"], "--strategy does nothing with --over-training"),
        (["--max-new-tokens", "3"], "--max-new-tokens does nothing with --over-training"),
    ],
)
def test_options_that_do_nothing_are_refused(capsys, run_dir, tmp_path, extra, message):
    page = tmp_path / "p.html"
    code, out, err = explain(capsys, run_dir, "--over-training", "--html", page, *extra)
    assert code == 2 and out == "" and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not page.exists()


def test_a_folder_without_views_says_how_to_record_them(capsys, tmp_path):
    page = tmp_path / "p.html"
    code, out, err = explain(capsys, CHAR_LM, "--over-training", "--html", page)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip() == (
        f"glassformer: error: {CHAR_LM} has no recorded views (views.safetensors): record them "
        "while training, with glassformer train ... --snapshot-views TEXT --view-every N"
    )
    assert not page.exists()
    code, _, err = explain(capsys, tmp_path / "nowhere", "--over-training")
    assert code == 2 and "is not a folder" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / views.VIEWS_FILE).write_bytes(b"not safetensors")
    code, _, err = explain(capsys, tmp_path / "bad", "--over-training")
    assert code == 2 and "not a glassformer views file" in err and "Traceback" not in err
    code, _, err = explain(capsys, CHAR_LM)  # no text and no --over-training
    assert code == 2 and "required: text" in err and "--over-training" in err


# -- the explorer's endpoint --------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(run_dir):
    registry = Registry([run_dir, CHAR_LM], walkthroughs=False)
    with serving(Explorer(registry)) as url:
        yield url


def get(client: Client, path: str, headers=None) -> tuple[int, dict]:
    status, _, payload = client.request("GET", path, headers=headers)
    text = payload.decode("utf-8")
    assert "Traceback" not in text
    return status, json.loads(text)


def test_the_endpoint_carries_exactly_the_recorded_values(server, run_dir):
    c = Client(server)
    status, data = get(c, "/api/views?model=timelapse-run")
    assert status == 200
    assert_carries_the_file(data, run_dir)
    assert data == json.loads(json.dumps(timelapse.page_data(views.load(run_dir))))
    assert c.post("load", {"model": "timelapse-run"})["views"] is True
    assert c.post("load", {"model": "char-lm"})["views"] is False
    status, _, js = c.request("GET", "/assets/timelapse.js")
    assert status == 200 and b"export function mount(" in js


@pytest.mark.parametrize(
    "path, status, message",
    [
        ("/api/views?model=char-lm", 404, "char-lm has no recorded views (views.safetensors)"),
        ("/api/views?model=nope", 404, "no model 'nope' here"),
        ("/api/views", 400, "the request needs the field 'model'"),
        ("/api/views?model=timelapse-run&step=3", 400, "views takes no field 'step'"),
        ("/api/views?model=char-lm&model=char-lm", 400, "the field 'model' is given twice"),
    ],
)
def test_the_endpoint_refuses_with_json(server, path, status, message):
    got, data = get(Client(server), path)
    assert got == status and message in data["error"], data


def test_the_endpoint_keeps_the_servers_rules(server):
    c = Client(server)
    status, data = get(c, "/api/views?model=timelapse-run", headers={"Host": "evil.example"})
    assert status == 400 and "does not name this machine" in data["error"]
    status, _, payload = c.request("POST", "/api/views", {"model": "timelapse-run"})
    assert status == 405 and "GET /api/views?model=ID" in json.loads(payload)["error"]


# -- in a browser -------------------------------------------------------------------------------

SHOWN = """const r = document.querySelector(arguments[0]), c = r.querySelector('.tl-hm canvas');
return {frame: r.dataset.frame, step: r.dataset.step, image: c.toDataURL(),
  label: r.querySelector('.tl-step').textContent, title: r.querySelector('.tl-title').textContent,
  markers: Array.from(r.querySelectorAll('.tl-marker')).map(m => Number(m.getAttribute('x1')))};"""
SLIDE = """const s = document.querySelector(arguments[0]).querySelector('.tl-slider');
s.value = String(arguments[1]); s.dispatchEvent(new Event('input'));"""
HOVER = """const c = document.querySelector(arguments[0]).querySelector('.tl-hm canvas');
const b = c.getBoundingClientRect();
c.dispatchEvent(new MouseEvent('mousemove', {bubbles: true,
  clientX: b.left + (arguments[2] + 0.5) * b.width / c.width,
  clientY: b.top + (arguments[1] + 0.5) * b.height / c.height}));
return document.querySelector('.gf-tip').textContent;"""


def hovered(driver, root: str, i: int, j: int) -> float:
    """The exact recorded value the tooltip gives for cell (i, j) of the shown map."""
    text = driver.execute_script(HOVER, root, i, j)
    return float(text.rsplit("exact (recorded float16): ", 1)[1])


def check_scrubbing(driver, root: str, run_dir: Path) -> None:
    """The last frame first (layer 1, head 1: the best); the slider to frame 1 and then 3: each
    time another map, the recorded values of that frame under the mouse, every marker moved."""
    tensors = file_tensors(run_dir)
    last = len(STEPS) - 1
    before = driver.execute_script(SHOWN, root)
    assert before["frame"] == str(last) and before["step"] == "40"
    assert before["title"] == "Layer 1 · head 1 · attention weights at step 40"
    assert len(before["markers"]) == 4  # loss, probe loss, prefix, previous
    best = tensors[f"f{last}.decoder.1.self_attn"][1]
    for i, j in ((5, 1), (7, 3), (6, 6)):
        assert hovered(driver, root, i, j) == float(best[i, j])
    for k in (1, 3):
        driver.execute_script(SLIDE, root, k)
        now = driver.execute_script(SHOWN, root)
        assert now["frame"] == str(k) and now["label"] == f"step {STEPS[k]} · frame {k + 1} of 5"
        assert now["image"] != before["image"]  # another map drawn
        assert all(a != b for a, b in zip(now["markers"], before["markers"], strict=True))
        for i, j in ((5, 1), (4, 0), (7, 3)):
            want = float(tensors[f"f{k}.decoder.1.self_attn"][1, i, j])
            assert hovered(driver, root, i, j) == want, (k, i, j)
        before = now
    x = driver.execute_script(SHOWN, root)["markers"]
    driver.execute_script(SLIDE, root, 0)
    assert all(a < b for a, b in zip(driver.execute_script(SHOWN, root)["markers"], x, strict=True))


def test_the_page_scrubs_through_training_in_chromium(browser, capsys, run_dir, tmp_path):  # noqa: F811
    driver = need(browser)
    page = tmp_path / "timelapse.html"
    assert explain(capsys, run_dir, "--over-training", "--html", page)[0] == 0
    url = open_report(driver, page)
    check_scrubbing(driver, ".gf-tl", run_dir)
    # A head picked from the grid: its map, and the curves redrawn with it in blue.
    driver.execute_script(
        'document.querySelector(\'.tl-thumb[data-site="decoder.0.self_attn"][data-head="0"]\')'
        ".click()"
    )
    shown = driver.execute_script(SHOWN, ".gf-tl")
    assert shown["title"] == "Layer 0 · head 0 · attention weights at step 0"
    tensors = file_tensors(run_dir)
    assert hovered(driver, ".gf-tl", 3, 2) == float(tensors["f0.decoder.0.self_attn"][0, 3, 2])
    # Play runs through the frames to the last and stops.
    driver.execute_script("document.querySelector('.tl-play').click()")
    end = time.time() + 20
    while driver.execute_script("return document.querySelector('.gf-tl').dataset.frame") != "4":
        assert time.time() < end, "play did not reach the last frame"
        time.sleep(0.05)
    assert driver.execute_script("return document.querySelector('.tl-play').textContent") == (
        "▶ play"
    )
    assert_offline_and_clean(driver, url)


def test_an_encoder_decoders_cross_attention_in_chromium(browser, tmp_path):  # noqa: F811
    driver = need(browser)
    v = encoder_decoder_views()
    page = tmp_path / "encdec.html"
    page.write_text(timelapse.render_page(v), encoding="utf-8")
    url = open_report(driver, page)
    driver.execute_script(
        "const g = document.querySelector('.tl-group'); g.value = 'decoder.cross_attn';"
        "g.dispatchEvent(new Event('change'));"
    )
    for k in (2, 0):
        driver.execute_script(SLIDE, ".gf-tl", k)
        shown = driver.execute_script(SHOWN, ".gf-tl")
        assert shown["title"].startswith("Decoder layer 0 · cross-attention · head 0 ·")
        want = v.frames[k].maps["decoder.0.cross_attn"][0]  # (T, S): T grows with k
        assert hovered(driver, ".gf-tl", want.shape[0] - 1, 4) == float(want[-1, 4])
    now = driver.execute_script("return document.querySelector('.tl-now').textContent")
    assert "translating the probe: “ho”" in now
    assert_offline_and_clean(driver, url)


def test_the_explorers_training_tab_in_chromium(browser, server, run_dir):  # noqa: F811
    driver = need(browser)
    driver.get_log("browser")
    driver.get(server + "#model=timelapse-run&text=" + PROBE)
    ready = "return document.getElementById('app').dataset.ready"
    end = time.time() + 60
    while not driver.execute_script(ready):
        assert time.time() < end
        time.sleep(0.05)
    tab = "document.querySelector('.tabs [data-tab=training]')"
    assert driver.execute_script(f"return !{tab}.hidden")
    driver.execute_script(f"{tab}.click()")
    end = time.time() + 60
    while driver.execute_script("return document.getElementById('tab-training').dataset.ready") != (
        "timelapse-run"
    ):
        assert time.time() < end
        time.sleep(0.05)
    check_scrubbing(driver, "#tab-training .gf-tl", run_dir)
    # A model without views: no Training tab, and the page goes back to the Attention tab.
    driver.execute_script(
        "const s = document.getElementById('model'); s.value = 'char-lm';"
        "s.dispatchEvent(new Event('change'));"
    )
    end = time.time() + 60
    while not driver.execute_script(f"return {tab}.hidden"):
        assert time.time() < end
        time.sleep(0.05)
    assert driver.execute_script("return document.getElementById('tab-training').hidden")
    assert not driver.execute_script("return document.getElementById('tab-attention').hidden")
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_a_model_with_views_opens_on_its_probe_and_its_best_head_in_chromium(
    browser,  # noqa: F811
    server,
):
    """Issue 39, friction 8: a model trained with a time-lapse opens on its probe text (not the
    decoders' default line) and on the head with the highest prefix-matching score of the last
    frame (here layer 1, head 1: `hand_made_frames`), not on layer 0, head 0; and "read the
    probe" opens the Attention tab on the head the time-lapse shows, at first that one."""
    driver = need(browser)
    driver.get_log("browser")
    driver.get("about:blank")  # a fresh page (only the hash changing would not reload it)
    driver.get(server + "#model=timelapse-run")
    ready = "return document.getElementById('app').dataset.ready"
    end = time.time() + 60
    while not driver.execute_script(ready):
        assert time.time() < end
        time.sleep(0.05)
    picked = (
        "const v = id => document.getElementById(id).value;"
        "return [v('site'), v('layer'), v('head')]"
    )
    assert driver.execute_script("return document.getElementById('text').value") == PROBE
    assert driver.execute_script(picked) == ["decoder.self_attn", "1", "1"]
    for pick in ("layer", "head"):  # a learner looks at another head
        driver.execute_script(
            f"const s = document.getElementById('{pick}'); s.value = '0';"
            "s.dispatchEvent(new Event('change'))"
        )
    assert driver.execute_script(picked)[1:] == ["0", "0"]
    driver.execute_script("document.querySelector('.tabs [data-tab=training]').click()")
    end = time.time() + 60
    while driver.execute_script("return document.getElementById('tab-training').dataset.ready") != (
        "timelapse-run"
    ):
        assert time.time() < end
        time.sleep(0.05)
    driver.execute_script("document.getElementById('text').value = 'dcba'")  # moved away
    driver.execute_script("document.querySelector('#tab-training .tl-probe').click()")
    shown = (
        "const v = id => document.getElementById(id).value;"
        "return !document.getElementById('tab-attention').hidden && v('text') === arguments[0]"
        " && document.getElementById('app').dataset.ready && [v('site'), v('layer'), v('head')]"
    )
    end = time.time() + 60
    while not (picked := driver.execute_script(shown, PROBE)) or picked[1:] != ["1", "1"]:
        assert time.time() < end, picked
        time.sleep(0.05)
    assert picked == ["decoder.self_attn", "1", "1"]
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
