"""The live explorer's server (`glassformer serve`), over real HTTP on a free port.

Oracles: every number the server sends is checked against the engine's own trace (the reference
engine run here on the same input), `decoding.sample` / `beam_search` / `greedy` for generation,
and `interventions.run_with` for ablations and patching. Then what it must refuse: paths, big
bodies, malformed requests (each a 4xx with a message, never a traceback), a folder that cannot
be loaded. A short load test (50 clients) and the command line close it.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch")

from glassformer import decoding, weights  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.inspect import interventions as I  # noqa: E402
from glassformer.serve import Explorer, Registry, make_server  # noqa: E402
from glassformer.serve.api import dumps  # noqa: E402
from glassformer.serve.app import MODULES  # noqa: E402
from glassformer.serve.sessions import RunCache  # noqa: E402
from glassformer.tokenizer import CharTokenizer  # noqa: E402
from glassformer.tokenizer.display import display_token  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.torch_steps import many_step_fn, step_fn  # noqa: E402
from glassformer.trace import tracing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAR_LM, EN_ES = ROOT / "models" / "char-lm", ROOT / "models" / "en-es"
PROMPT = "ROMEO: But soft"


def wide_checkpoint(folder: Path) -> Path:
    """A 1-block character decoder with a 20,000-token output layer: its logits (16 x 20,000)
    are too large to send whole, so the page fetches them tile by tile."""
    tok = CharTokenizer.train(["abcdefgh ijklmnop"])
    cfg = Config(arch="decoder", vocab_size=20_000, d_model=16, n_heads=2, n_decoder_layers=1,
                 max_len=32)  # fmt: skip
    weights.save(folder, cfg, weights.init(cfg, seed=3, std=0.5), tokenizer=tok)
    return folder


def gpt2_folder(folder: Path) -> Path:
    """A tiny Hugging Face GPT-2 folder (random weights, a BPE tokenizer.json)."""
    import transformers

    from glassformer.tokenizer import BPETokenizer

    config = transformers.GPT2Config(vocab_size=300, n_positions=32, n_embd=24, n_layer=2, n_head=3)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    bpe = BPETokenizer.train(["the cat sat on the mat and the dog ran " * 5], vocab_size=300)
    (folder / "tokenizer.json").write_text(bpe.hf_json)
    return folder


class Client:
    """JSON over HTTP to the server (http.client: what a browser sends, nothing mocked)."""

    def __init__(self, url: str):
        self.url = url
        self.host, self.port = url.split("//")[1].rstrip("/").rsplit(":", 1)

    def request(self, method, path, body=None, headers=None, raw=None):
        conn = http.client.HTTPConnection(self.host, int(self.port), timeout=120)
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        conn.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        return r.status, dict(r.getheaders()), payload

    def post(self, action, body, expect=200):
        status, headers, payload = self.request("POST", f"/api/{action}", body)
        text = payload.decode("utf-8")
        data = json.loads(text, parse_constant=_strict)  # strict JSON: no NaN or Infinity
        assert status == expect, (status, data)
        assert "Traceback" not in text
        return data


def _strict(name):
    raise AssertionError(f"non-strict JSON constant {name}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    broken = tmp / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"arch": "decoder", "d_model": "wide"}')
    wide = wide_checkpoint(tmp / "wide")
    folders = [CHAR_LM, EN_ES, wide, broken]
    try:
        folders.append(gpt2_folder(tmp / "gpt2"))
    except ImportError:  # transformers is optional: the badge then says so
        pass
    registry = Registry(folders)
    explorer = Explorer(registry)
    server, sock, url = make_server(explorer, "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    assert server.started
    yield Client(url), explorer
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def char_lm():
    return loading.load(CHAR_LM)


def reference_trace(cfg, params, ids, src=None):
    with tracing() as trace:
        logits = R.forward(params, cfg, ids, src_ids=src)
    return logits, trace


def f32(data: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(data), dtype="<f4").astype(np.float64)


# -- what it shows equals the engine's trace ------------------------------------------------------


def test_the_model_list_has_ids_not_paths(served):
    client, _ = served
    status, headers, payload = client.request("GET", "/api/models")
    models = json.loads(payload)["models"]
    ids = [m["id"] for m in models]
    assert ids[:8] == ["hello-world", "self-attention", "modern", "hello-world-model", "char-lm",
                       "en-es", "wide", "broken"]  # fmt: skip
    assert status == 200 and headers["content-type"].startswith("application/json")


def test_a_run_shows_the_tokens_the_next_token_and_every_attention_map(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    run = client.post("run", {"model": "char-lm", "text": PROMPT})
    ids = tok.encode(PROMPT)
    assert [t["id"] for t in run["tokens"]["decoder"]] == ids
    assert run["tokens"]["decoder"][6]["shown"] == "␣"  # whitespace made visible
    logits, trace = reference_trace(cfg, params, ids)
    probs = R.softmax(logits[-1])
    top = run["output"]["top"]
    assert [t["id"] for t in top] == list(np.argsort(-probs, kind="stable")[:10])
    assert [t["p"] for t in top] == pytest.approx(probs[[t["id"] for t in top]], abs=1e-12)
    assert run["n_steps"] == len(trace)
    names = [a["name"] for a in run["attention"]]
    assert names == [n for n in trace.names() if n.endswith(".A")]
    assert len(names) == cfg.n_decoder_layers * cfg.n_heads

    a = client.post("attention", {"model": "char-lm", "text": PROMPT, "name": names[5]})
    (m,) = a["maps"].values()  # 15 x 15: a heatmap, its values in float32
    np.testing.assert_allclose(f32(m["f32"]).reshape(15, 15), trace[names[5]], rtol=1e-6, atol=1e-9)
    assert (
        a["neuron"]
        and 'class="att"' in a["html"]
        and m["rows"] == m["cols"] == list("ROMEO:␣But␣soft")
    )
    short = "ROMEO: Bu"  # 9 tokens: a table, every value exact in its cell's title
    a = client.post("attention", {"model": "char-lm", "text": short, "name": names[5]})
    _, trace = reference_trace(cfg, params, tok.encode(short))
    np.testing.assert_allclose(a["values"], trace[names[5]], atol=1e-15)
    titles = [float(t) for t in re.findall(r'title="([-0-9.e]+)"', a["html"])]
    np.testing.assert_allclose(titles, trace[names[5]].ravel(), rtol=1e-11)


def test_every_step_card_is_the_reports_and_its_heatmap_holds_the_trace(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    _, trace = reference_trace(cfg, params, tok.encode(PROMPT))
    card = client.post("step", {"model": "char-lm", "text": PROMPT, "name": "decoder.0.ffn.hidden"})
    assert (
        'id="step-decoder.0.ffn.hidden"' in card["html"] and "GELU(x·W1)" in card["html"]
    )  # this model's
    (m,) = card["maps"].values()
    assert m["shape"] == [15, 512] and m["rows"][:2] == ["R", "O"]
    np.testing.assert_allclose(f32(m["f32"]).reshape(15, 512), trace["decoder.0.ffn.hidden"],
                               rtol=1e-6, atol=1e-7)  # fmt: skip
    small = client.post(
        "step", {"model": "char-lm", "text": PROMPT, "name": "decoder.0.norm1.mean"}
    )
    np.testing.assert_allclose(np.ravel(small["values"]), trace["decoder.0.norm1.mean"].ravel())


def test_a_large_map_is_fetched_tile_by_tile(served):
    client, explorer = served
    wide = explorer.registry.load("wide")
    cfg, params, tok = wide.cfg, wide.params, wide.tokenizer
    text = "abcdefgh ijklmno"
    _, trace = reference_trace(cfg, params, tok.encode(text))
    card = client.post("step", {"model": "wide", "text": text, "name": "logits"})
    (m,) = card["maps"].values()
    assert m["tiled"] == "logits" and m["shape"] == [16, 20_000] and "f32" not in m
    assert m["rows"] == list("abcdefgh␣ijklmno") and m["cols"] is None  # 20 of 20,000 named
    tile = client.post(
        "tile", {"model": "wide", "text": text, "name": "logits", "r0": 3, "r1": 9, "c0": 19_000,
                 "c1": 19_500},
    )  # fmt: skip
    np.testing.assert_allclose(
        f32(tile["f32"]).reshape(6, 500), trace["logits"][3:9, 19_000:19_500], rtol=1e-6
    )
    too_big = {"model": "wide", "text": text, "name": "logits", "r0": 0, "r1": 16, "c0": 0,
               "c1": 20_000}  # fmt: skip
    assert "at most" in client.post("tile", too_big, expect=400)["error"]


def test_the_neuron_view_takes_a_score_apart(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    _, trace = reference_trace(cfg, params, tok.encode(PROMPT))
    name = "decoder.2.self_attn.head1.A"
    n = client.post("neuron", {"model": "char-lm", "text": PROMPT, "name": name, "i": 9, "j": 4})
    Q, K = trace["decoder.2.self_attn.head1.Q"], trace["decoder.2.self_attn.head1.K"]
    np.testing.assert_allclose(n["product"], Q[9] * K[4])
    assert n["sum"] == pytest.approx(float(Q[9] @ K[4]), abs=1e-12)
    assert n["scores"] == pytest.approx(trace["decoder.2.self_attn.head1.scores"][9, 4], abs=1e-12)
    assert n["scaled"] == pytest.approx(n["scores"] / np.sqrt(cfg.head_dim), abs=1e-12)
    assert n["A"] == pytest.approx(trace[name][9, 4], abs=1e-15) and not n["masked"]
    above = client.post(
        "neuron", {"model": "char-lm", "text": PROMPT, "name": name, "i": 2, "j": 7}
    )
    assert above["masked"] and above["A"] == 0.0  # a future key: masked before the softmax


def test_translation_runs_with_its_greedy_output_and_cross_attention(served):
    client, _ = served
    cfg, params, tok = loading.load(EN_ES)
    run = client.post("run", {"model": "en-es", "text": "Where is the station?"})
    assert run["output"]["text"] == "¿Dónde está la estación?"
    src = [t["id"] for t in run["tokens"]["encoder"]]
    tgt = [t["id"] for t in run["tokens"]["decoder"]]
    assert tgt[0] == tok.bos_id and tgt[-1] == tok.eos_id
    _, trace = reference_trace(cfg, params, tgt, src)
    sites = {a["site"] for a in run["attention"]}
    assert sites == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    cross = client.post("cross", {"model": "en-es", "text": "Where is the station?",
                                  "target": tgt[:3]})  # fmt: skip
    _, step = reference_trace(cfg, params, tgt[:3], src)
    assert len(cross["layers"]) == 3 and len(cross["layers"][0]) == 4
    np.testing.assert_allclose(cross["layers"][2][1], step["decoder.2.cross_attn.head1.A"][-1])


# -- generation -----------------------------------------------------------------------------------


def test_sampling_shows_its_draws_and_equals_decode_sample(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    body = {"model": "char-lm", "text": PROMPT, "strategy": "sample", "seed": 7,
            "temperature": 0.7, "top_k": 12, "top_p": 0.9, "max_new_tokens": 15}  # fmt: skip
    g = client.post("generate", body)
    step = step_fn(from_params(cfg, params), None)
    want = decoding.sample(step, tok.encode(PROMPT), 15, tok.eos_id, cfg.max_len, 0.7, 12, 0.9, 7)
    assert g["ids"] == want.ids and g["seed"] == 7
    rng = np.random.default_rng(7)
    for k, s in enumerate(g["steps"]):
        d = s["draw"]
        assert d["u"] == rng.random()  # the uniform numbers Generator.choice draws
        chosen = next(x for x in d["segments"] if x["id"] == s["chosen"])
        assert chosen["start"] <= d["u"] < chosen["end"]
        assert s["kept"] == len(want.kept[k]) <= 12
        probs = want.distributions[k]
        assert [t["p"] for t in s["top"]] == pytest.approx(probs[[t["id"] for t in s["top"]]])
        q = decoding.filter_probs(np.log(probs), 0.7, 12, 0.9)
        assert [t["q"] for t in s["top"]] == pytest.approx(q[[t["id"] for t in s["top"]]])


def test_greedy_and_beam_search_equal_decode_and_the_beam_is_a_tree(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    prompt = tok.encode(PROMPT)
    model = from_params(cfg, params)
    g = client.post("generate", {"model": "char-lm", "text": PROMPT, "strategy": "greedy",
                                 "max_new_tokens": 8})  # fmt: skip
    assert g["ids"] == decoding.greedy(step_fn(model), prompt, 8, tok.eos_id, cfg.max_len).ids
    b = client.post("generate", {"model": "char-lm", "text": PROMPT, "strategy": "beam",
                                 "beam_width": 3, "max_new_tokens": 6})  # fmt: skip
    want = decoding.beam_search(step_fn(model), prompt, 6, tok.eos_id, width=3,
                              max_len=cfg.max_len, step_many=many_step_fn(model))  # fmt: skip
    assert b["ids"] == want.best.ids
    steps = b["beam"]["steps"]
    assert len(steps) == len(want.steps)
    for k, (nodes, beam) in enumerate(zip(steps, want.steps, strict=True)):
        assert [n["ids"] for n in nodes] == [h.ids for h in beam]
        assert [n["logprob"] for n in nodes] == pytest.approx([h.logprob for h in beam])
        for n in nodes:  # each hypothesis extends its parent in the step before
            parent = steps[k - 1][n["parent"]]["ids"] if k else prompt
            assert n["ids"][:-1] == parent


def test_translation_sampling_starts_from_bos(served):
    client, _ = served
    g = client.post("generate", {"model": "en-es", "text": "I love you.", "strategy": "greedy"})
    assert g["text"] == "Te amo." and g["n_prompt"] == 1 and g["stopped_at_eos"]


# -- interventions ----------------------------------------------------------------------------


def test_ablating_a_head_equals_run_with(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    ids = tok.encode(PROMPT)
    head = {"stack": "decoder", "kind": "self_attn", "layer": 1, "head": 2}
    r = client.post("intervene", {"model": "char-lm", "text": PROMPT, "heads": [head]})
    run = I.reference_run(params, cfg)
    want = I.run_with(run, ids, I.ablate_head(1, 2))[-1]
    got = {t["id"]: t["logit"] for t in r["changed"]}
    assert [got[i] for i in got] == pytest.approx(want[list(got)], abs=1e-10)
    clean = run(ids)[-1]
    assert [t["logit"] for t in r["clean"]] == pytest.approx(clean[[t["id"] for t in r["clean"]]])
    assert r["max_abs_change"] == pytest.approx(
        np.abs(I.run_with(run, ids, I.ablate_head(1, 2)) - run(ids)).max()
    )
    assert set(r["continuation"]) == {"clean", "changed"}


def test_patching_from_a_second_prompt_equals_interventions_patch(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    second = "JULIET: O Romeo"
    assert len(tok.encode(second)) == len(tok.encode(PROMPT))
    head = {"stack": "decoder", "kind": "self_attn", "layer": 3, "head": 0}
    body = {"model": "char-lm", "text": PROMPT, "heads": [head], "how": "patch",
            "patch_text": second}  # fmt: skip
    r = client.post("intervene", body)
    run = I.reference_run(params, cfg)
    _, source = I.record(run, tok.encode(second))
    want = I.run_with(run, tok.encode(PROMPT), I.patch(source, "decoder.3.self_attn.head0.C"))
    got = {t["id"]: t["logit"] for t in r["changed"]}
    assert list(got.values()) == pytest.approx(want[-1][list(got)], abs=1e-10)
    assert "source" in r and "continuation" not in r
    body["patch_text"] = "JULIET"
    assert "same number of tokens" in client.post("intervene", body, expect=400)["error"]


# -- fidelity and exports -------------------------------------------------------------------------


def test_the_fidelity_badge_measures_both_engines_on_this_input(served):
    client, _ = served
    f = client.post("fidelity", {"model": "char-lm", "text": PROMPT})
    t = f["torch"]
    assert t["available"] and t["compared"] > 150 and 0 <= t["max_abs_diff"] < 1e-9
    assert f["hf"] is None  # a glassformer checkpoint, not a Hugging Face folder
    fixed = client.post("fidelity", {"model": "hello-world"})
    assert fixed["torch"] is None and "walkthrough" in fixed["note"]


def test_a_hugging_face_folder_is_also_compared_with_transformers(served):
    client, explorer = served
    if "gpt2" not in explorer.registry.entries:
        pytest.skip("transformers is not installed")
    f = client.post("fidelity", {"model": "gpt2", "text": "the cat sat on the mat"})
    assert f["torch"]["available"] and f["torch"]["max_abs_diff"] < 1e-9
    hf = f["hf"]
    assert hf["available"] and hf["engine"] == "transformers GPT2LMHeadModel"
    assert hf["step"] == "logits" and hf["max_abs_diff"] < 1e-9


def test_exports_the_static_report_and_the_trace(served, char_lm):
    client, _ = served
    cfg, params, tok = char_lm
    status, headers, page = client.request("POST", "/api/report", {"model": "char-lm",
                                                                   "text": PROMPT})  # fmt: skip
    page = page.decode()
    assert status == 200 and "attachment" in headers["content-disposition"]
    assert page.count("<script") == 2 and "decoder.0.self_attn.head0.A" in page
    assert "default-src 'none'" in headers["content-security-policy"]
    status, headers, raw = client.request("POST", "/api/trace", {"model": "char-lm",
                                                                "text": PROMPT})  # fmt: skip
    data = json.loads(raw, parse_constant=_strict)
    _, trace = reference_trace(cfg, params, tok.encode(PROMPT))
    assert [s["name"] for s in data["steps"]] == trace.names()
    np.testing.assert_allclose(data["steps"][-1]["values"], trace.steps[-1].values)
    assert data["labels_readable"]["decoder"][6] == "␣"


def test_walkthroughs_are_fixed_traces(served):
    client, _ = served
    run = client.post("run", {"model": "hello-world"})
    assert run["arch"] == "walkthrough" and run["n_steps"] > 1000
    assert any(a["name"] == "head1.A" for a in run["attention"])
    n = client.post("neuron", {"model": "hello-world", "name": "head1.A", "i": 0, "j": 0})
    assert n["A"] == pytest.approx(4.6770e-10, rel=1e-4)  # the article's printed weight
    modern = client.post("run", {"model": "modern"})  # the walkthrough's own recorded steps
    from glassformer.walkthrough import WALKTHROUGHS

    assert modern["arch"] == "walkthrough"
    assert modern["n_steps"] == len(WALKTHROUGHS["modern"]().names())
    msg = client.post("generate", {"model": "self-attention", "text": "x"}, expect=400)["error"]
    assert "walkthrough" in msg


# -- what it refuses ------------------------------------------------------------------------------


def test_no_path_from_the_browser_reaches_the_file_system(served):
    client, _ = served
    for model in ("../../etc/passwd", str(CHAR_LM), "/etc", "char-lm/../en-es", 3, None):
        body = {"model": model, "text": "x"}
        status, _, payload = client.request("POST", "/api/run", body)
        assert status in (400, 404), (model, status)
        assert "only the folders given" in payload.decode() or "needs the field" in payload.decode()
    status, _, _ = client.request("GET", "/assets/..%2F..%2Fserve%2Fapp.py")
    assert status == 404
    assert client.request("GET", "/assets/explorer.py")[0] == 404


def test_bad_requests_get_a_4xx_with_a_message(served):
    client, _ = served
    big = {"model": "char-lm", "text": "x" * 1_000_000}
    status, _, payload = client.request("POST", "/api/run", big)
    assert status == 413 and "at most 512 KB" in json.loads(payload)["error"]
    cases = [
        (b"{not json", 400, "JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (b'{"model": "char-lm", "text": NaN}', 400, "NaN"),
        (b"\xff\xfe", 400, "JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "JSON"),
        (json.dumps({"model": "char-lm"}).encode(), 400, "'text'"),
        (json.dumps({"model": "char-lm", "text": 5}).encode(), 400, "string"),
        (json.dumps({"model": "char-lm", "text": "x" * 70}).encode(), 400, "at most 64"),
        (json.dumps({"model": "char-lm", "text": "   "}).encode(), 400, "empty"),
        (json.dumps({"model": "char-lm", "text": "a", "ids": [1, 99999]}).encode(), 400, "token"),
        (json.dumps({"model": "broken", "text": "a"}).encode(), 422, "cannot be loaded"),
        (b'{"model": "char-lm", "text": "a\\ud800"}', 400, "Unicode"),
    ]
    for raw, want, words in cases:
        status, _, payload = client.request("POST", "/api/run", raw=raw)
        error = json.loads(payload)["error"]
        assert status == want and words in error, (raw[:40], status, error)
    for action, body, want in [
        ("generate", {"model": "char-lm", "text": "a", "temperature": -1}, "temperature"),
        ("generate", {"model": "char-lm", "text": "a", "top_p": 0}, "top_p"),
        ("generate", {"model": "char-lm", "text": "a", "strategy": "best"}, "strategy"),
        ("generate", {"model": "char-lm", "text": "a", "seed": True}, "seed"),
        (
            "neuron",
            {
                "model": "char-lm",
                "text": "ab",
                "name": "decoder.0.self_attn.head0.A",
                "i": 5,
                "j": 0,
            },
            "'i'",
        ),  # fmt: skip
        ("step", {"model": "char-lm", "text": "ab", "name": "nope"}, "no step"),
        (
            "intervene",
            {
                "model": "char-lm",
                "text": "ab",
                "heads": [{"stack": "decoder", "kind": "self_attn", "layer": 9, "head": 0}],
            },
            "no head",
        ),  # fmt: skip
        ("heads", {"model": "char-lm", "text": "ab", "site": "x", "layer": 0}, "no attention"),
        ("cross", {"model": "char-lm", "text": "ab"}, "encoder-decoder"),
    ]:
        status, _, payload = client.request("POST", f"/api/{action}", body)
        error = json.loads(payload)["error"]
        assert 400 <= status < 500 and want in error, (action, status, error)
    assert client.request("POST", "/api/nothing", {})[0] == 404
    status, _, payload = client.request("GET", "/api/run")
    assert status == 405 and "error" in json.loads(payload)
    status, _, payload = client.request("GET", "/", headers={"Host": "evil.example"})
    assert status == 400  # DNS rebinding: only this machine's names are served


def test_the_page_and_its_assets_come_from_the_package(served):
    client, _ = served
    status, headers, page = client.request("GET", "/")
    page = page.decode()
    assert status == 200 and "default-src 'none'" in headers["content-security-policy"]
    assert '<script type="module" src="/assets/explorer.js">' in page
    assets = ROOT / "glassformer" / "explain" / "assets"
    # explorer.js and every module it imports, at any depth: each served as shipped, and the
    # server's list (app.MODULES) is exactly that set (a module left off it would be a 404).
    wanted, todo = set(), ["explorer.js"]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += re.findall(r'^import[^"]*"\./([\w.-]+\.js)"', (assets / name).read_text(), re.M)
    assert wanted == set(MODULES)
    for asset in ("report.css", "explorer.css", *sorted(wanted)):
        status, headers, body = client.request("GET", f"/assets/{asset}")
        assert status == 200 and body == (assets / asset).read_bytes(), asset
        kind = "text/css" if asset.endswith(".css") else "text/javascript"
        assert headers["content-type"].startswith(kind), asset
    for forbidden in ("http://", "https://", "//cdn", "@import", "fonts.g"):
        for asset in ("explorer.html", "explorer.css", *sorted(wanted)):
            assert forbidden not in (assets / asset).read_text(), (forbidden, asset)


def test_json_is_strict():
    text = dumps({"a": np.array([np.nan, np.inf, -np.inf, 1.5]), "b": np.float32(2.0)})
    assert json.loads(text, parse_constant=_strict) == {"a": ["nan", "inf", "-inf", 1.5], "b": 2.0}


def test_a_run_counts_the_bytes_its_trace_holds():
    """The cache bounds what runs hold: each stored array once, and no recomputed step (the
    scaled scores and probabilities a trace derives when read are neither counted nor made)."""
    from glassformer.serve.runs import make_run

    m = Registry([CHAR_LM]).load("char-lm")
    run = make_run("char-lm", m, PROMPT)
    stored = {id(s.data): s.data for s in run.trace.steps if s.data is not None}
    assert run.nbytes == sum(a.nbytes for a in stored.values())
    assert any(s.data is None for s in run.trace.steps)
    assert run.nbytes < sum(run.trace[n].nbytes for n in run.trace.names())


def test_the_run_cache_is_bounded_and_makes_a_run_once():
    class Sized:
        def __init__(self, n):
            self.nbytes = n

    cache = RunCache(max_bytes=100)
    for k in range(5):
        cache.get(k, lambda: Sized(40))
    assert len(cache) == 2 and cache.bytes() == 80  # the least recently used went first
    made = []

    def slow():
        made.append(1)
        time.sleep(0.2)
        return Sized(1)

    threads = [threading.Thread(target=cache.get, args=("same", slow)) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert made == [1]

    # Its size is read while other threads add and evict runs (this raised once, under load).
    failures, end = [], time.time() + 1.0

    def add(k):
        n = 0
        while time.time() < end:
            cache.get((k, n), lambda: Sized(30))
            n += 1

    def read():
        while time.time() < end:
            try:
                assert cache.bytes() >= 0 and len(cache) >= 0
            except Exception as e:  # noqa: BLE001
                failures.append(e)

    workers = [threading.Thread(target=add, args=(k,)) for k in range(3)]
    workers += [threading.Thread(target=read) for _ in range(2)]
    [t.start() for t in workers]
    [t.join() for t in workers]
    assert failures == [] and cache.bytes() <= 100 and len(cache) <= 3


# -- load: many clients at once -------------------------------------------------------------------


def test_fifty_clients_at_once_get_answers(served):
    """50 clients for a few seconds, each typing: runs (new and cached) and attention maps."""
    client, _ = served
    seconds = float(os.environ.get("GLASSFORMER_LOAD_SECONDS", "4"))
    latencies, errors = [], []
    end = time.time() + seconds

    def one(k: int):
        n = 0
        while time.time() < end:
            text = PROMPT[: 5 + (k + n) % 10]
            for action, body in (
                ("run", {}),
                ("attention", {"name": "decoder.1.self_attn.head2.A"}),
            ):
                t0 = time.perf_counter()
                status, _, payload = client.request(
                    "POST", f"/api/{action}", {"model": "char-lm", "text": text, **body}
                )
                latencies.append(time.perf_counter() - t0)
                if status != 200:
                    errors.append((status, payload[:100]))
            n += 1

    threads = [threading.Thread(target=one, args=(k,)) for k in range(50)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    p95 = float(np.percentile(latencies, 95))
    print(f"\n50 clients, {seconds:g} s: {len(latencies)} requests, p95 {p95 * 1000:.0f} ms")
    assert len(latencies) > 100 and p95 < 30


# -- the command line -----------------------------------------------------------------------------


def test_serve_command_prints_the_url_and_stops_on_ctrl_c():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(
        [sys.executable, "-m", "glassformer.cli", "serve", str(CHAR_LM), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        line = p.stdout.readline()
        assert line.startswith("glassformer explorer: http://127.0.0.1:"), line
        url = line.split()[2]
        status, _, payload = Client(url).request("GET", "/api/models")
        assert status == 200 and b"char-lm" in payload
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert p.returncode in (0, 130) and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 1


def test_serve_command_refuses_what_is_not_a_folder(tmp_path):
    from glassformer.cli import main

    assert main(["serve", str(tmp_path / "missing")]) == 2
    assert main(["serve", "--port", "70000"]) == 2


def test_the_output_cards_speak_of_the_last_position_the_translation_used(served):
    """Issue 39, friction 6: a translation that ended with </s> has one more decoder position,
    reading </s>, whose prediction the translation never used; the probs and logits cards said
    "After “</s>” (the last position), the most likely next token is “</s>” at 93.5%". They now
    speak of the position before it (the one that predicted </s>), with the numbers of its row."""
    import html as html_lib

    client, explorer = served
    m = explorer.registry.load("en-es")
    text = "Where is the station?"
    run = m.run(text, quiet=True)
    assert run.generation.stopped_at_eos  # the case in question
    probs = run.trace["probs"]  # (T, V): the last row reads </s>
    used = probs.shape[0] - 2
    end = display_token(m.tokenizer.vocab[m.tokenizer.eos_id], m.runtime.token_kind)
    reads = display_token(m.tokenizer.vocab[run.ids[used]], m.runtime.token_kind)
    for name in ("probs", "logits"):
        card = client.post("step", {"model": "en-es", "text": text, "name": name})
        said = html_lib.unescape(re.search(r'<p class="shows">(.*?)</p>', card["html"]).group(1))
        assert said.startswith(f"After “{reads}”"), said  # not after “</s>”
        assert "the last position the translation used" in said, said
        top = int(np.argmax(probs[used]))
        assert top == m.tokenizer.eos_id and f"“{end}”" in said.split(",")[1], said


def f16(m: dict) -> np.ndarray:
    """A heatmap's float16 data (value / scale) as the values, in its shape."""
    half = np.frombuffer(base64.b64decode(m["f16"]), dtype="<f2").astype(np.float64)
    return (half * m["scale"]).reshape(m["shape"])


def test_the_model_view_holds_every_head_of_every_layer(served):
    """Issue 39, point 2: the model view (bertviz's) lays out every attention map of the run by
    site, layer and head, on the weights' fixed 0..1: for the translator, encoder self-, decoder
    self- and cross-attention, each layer's every head, equal to the reference trace's A (to
    float16), and nothing else."""
    client, explorer = served
    m = explorer.registry.load("en-es")
    text = "Where is the station?"
    trace = m.run(text, quiet=True).trace
    view = client.post("model_view", {"model": "en-es", "text": text})
    sites = {s["site"]: s for s in view["sites"]}
    assert set(sites) == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    cfg, seen = m.cfg, set()
    for name, site in sites.items():
        stack = name.split(".")[0]
        layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
        assert [x["layer"] for x in site["layers"]] == list(range(layers))
        for x in site["layers"]:
            assert [h["head"] for h in x["heads"]] == list(range(cfg.n_heads))
            for h in x["heads"]:
                assert h["map"]["scale"] == 1.0  # the weights' fixed 0..1
                A = trace[h["name"]]
                assert h["name"].startswith(f"{stack}.{x['layer']}.") and h["name"].endswith(
                    f"head{h['head']}.A"
                )
                np.testing.assert_allclose(f16(h["map"]), A, atol=1e-3)  # float16 of A / 1
                seen.add(h["name"])
    assert seen == {s for s in trace.names() if s.endswith(".A")}


def test_answers_are_not_held_back_by_delayed_acknowledgements():
    """The listening socket names IPPROTO_TCP, so asyncio sets TCP_NODELAY on each connection: a
    small answer (a map) left at once instead of ~40 ms later, waiting for the browser's delayed
    acknowledgement (measured: the body 43 ms after the headers without, 0.1 ms with). The
    oracle: the socket asyncio accepts from it has TCP_NODELAY set."""
    import asyncio
    import socket

    from glassformer.serve.app import bind

    listening = bind("127.0.0.1", 0)
    port = listening.getsockname()[1]

    async def accept_one() -> int:
        seen = asyncio.get_running_loop().create_future()

        def on_client(reader, writer):
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_client, sock=listening)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        value = await asyncio.wait_for(seen, 10)
        writer.close()
        server.close()
        return value

    assert asyncio.run(accept_one()) != 0
