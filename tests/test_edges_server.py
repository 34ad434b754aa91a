"""The explorer server's own guards (issue 23, family "server"), as tables of rows.

Oracles: loopback is decided by parsing the address, so every spelling of it (127.1, LOCALHOST,
[::1], ::ffff:127.0.0.1, ...) keeps the Host-header check on and prints no "other machines"
note, and every other address gets it; a client that goes away mid-body leaves no traceback in
a real server's log (a real uvicorn process, raw sockets); every field of every JSON endpoint,
given a wrong type, NaN, a huge number, an empty or huge string, deep nesting, a repeated or
unknown key, or a body that is not UTF-8 JSON, is a 4xx JSON error of one line (never a 500,
never an ERROR in the log), the decoding values with the command line's own message for the
same value (the CLI run beside it is the oracle); and hypothesis sends every endpoint arbitrary
JSON and mutations of a valid request: 200 with strict JSON, or a 4xx JSON error.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from glassformer.cli import main  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.serve import Explorer, Registry, create_app, is_loopback, make_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAMILY = "server"
CASES: list = []


# -- the models -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """hello (the article's encoder-decoder, 10 words), dec (char decoder, 20 tokens, max_len
    32), enc (word encoder): seeded random weights, made in a second."""
    d = tmp_path_factory.mktemp("models")
    (d / "corpus.txt").write_text("to be or not to be, that is the question.\n" * 40)
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    assert main(["init", str(d / "dec"), "--preset", "tiny", "--tokenizer", "char",
                 "--corpus", str(d / "corpus.txt")]) == 0  # fmt: skip
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer",
                 "word", "--corpus", str(d / "corpus.txt")]) == 0  # fmt: skip
    return d


class Errors(logging.Handler):
    """The records at ERROR and above of the server's logger (where a 500 is logged)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def client(models):
    errors = Errors()
    log = logging.getLogger("uvicorn.error")
    log.addHandler(errors)
    registry = Registry([models / "hello", models / "dec", models / "enc"])
    app = create_app(Explorer(registry, cache_bytes=64 * 2**20))
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:  # a 500 raises here
        c.errors = errors
        yield c
    log.removeHandler(errors)


def strict_json(text: str):
    def no_constant(name):
        raise AssertionError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=no_constant)


def refusal(r) -> str:
    """The one-line error of a 4xx answer (asserted), never a traceback."""
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    message = strict_json(r.text)["error"]
    assert isinstance(message, str) and message and "\n" not in message
    assert "Traceback" not in message
    return message


# -- 1. loopback, however it is spelt -------------------------------------------------------------

LOOPBACK = ["127.0.0.1", "127.1", "LOCALHOST", "localhost", "localhost.", "LocalHost.",
            "127.0.0.2", "127.255.255.254", "0x7f.1", "0x7f000001", "2130706433", "::1", "[::1]",
            "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "0:0:0:0:0:0:0:1", "0000::0001"]  # fmt: skip
ELSEWHERE = ["0.0.0.0", "0", "", "::", "[::]", "192.168.1.5", "10.0.0.1", "128.0.0.1", "::2",
             "fe80::1", "::ffff:192.168.1.5", "evil.example", "localhost.evil.example",
             "127.0.0.1.evil.example", "127.0.0.1 evil", "localhostx"]  # fmt: skip


@dataclass(frozen=True)
class Spelling:
    family: str
    host: str
    loopback: bool


SPELLINGS = [Spelling(FAMILY, h, True) for h in LOOPBACK]
SPELLINGS += [Spelling(FAMILY, h, False) for h in ELSEWHERE]
CASES += SPELLINGS


@pytest.mark.parametrize("sp", SPELLINGS, ids=lambda s: f"{s.family}-loopback-{s.host!r}")
def test_loopback_is_decided_by_parsing_the_address(sp):
    assert is_loopback(sp.host) is sp.loopback


def _serve_on(host: str, models):
    """make_server on host (port 0), or skip where this machine cannot bind it (no IPv6)."""
    try:
        return make_server(Explorer(Registry([models / "dec"])), host, 0)
    except GlassformerError as e:
        pytest.skip(f"cannot bind {host} here: {e}")


@dataclass(frozen=True)
class HostHeader:
    family: str
    bound: str  # the --host the server was started with
    header: str  # the Host header sent ({port}: the port)
    allowed: bool


BOUND = ["127.0.0.1", "127.1", "LOCALHOST", "localhost.", "127.0.0.2", "0x7f.1", "::1", "[::1]",
         "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1"]  # fmt: skip
HEADERS = [("evil.example", False), ("evil.example:{port}", False), ("", False),
           ("127.0.0.1.evil.example:{port}", False), ("localhost.evil.example", False),
           ("127.1:{port}", True), ("LOCALHOST:{port}", True), ("[::1]:{port}", True),
           ("127.0.0.1", True), ("localhost.:{port}", True)]  # fmt: skip
HOST_HEADERS = [HostHeader(FAMILY, b, h, ok) for b in BOUND for h, ok in HEADERS[:2]]
HOST_HEADERS += [HostHeader(FAMILY, "127.1", h, ok) for h, ok in HEADERS[2:]]
HOST_HEADERS += [HostHeader(FAMILY, "0.0.0.0", "evil.example", True)]  # every network: any name
CASES += HOST_HEADERS


@pytest.mark.parametrize("case", HOST_HEADERS, ids=lambda c: f"{c.family}-{c.bound}-{c.header}")
def test_bound_to_any_loopback_spelling_the_host_header_is_checked(case, models):
    server, sock, url = _serve_on(case.bound, models)
    try:
        port = sock.getsockname()[1]
        assert url.startswith("http://") and "[[" not in url and url.endswith(f":{port}/")
        with TestClient(server.config.app, base_url=url) as c:
            r = c.get("/api/models", headers={"Host": case.header.format(port=port)})
        if case.allowed:
            assert r.status_code == 200, r.text
        else:
            assert "does not name this machine" in refusal(r)
    finally:
        sock.close()


NOTE = "other machines can reach it"
SERVE_HOSTS = [Spelling(FAMILY, h, True) for h in BOUND + ["localhost", "[::ffff:127.0.0.1]"]]
SERVE_HOSTS += [Spelling(FAMILY, h, False) for h in ("0.0.0.0", "::", "[::]")]
CASES += SERVE_HOSTS


@pytest.mark.parametrize("sp", SERVE_HOSTS, ids=lambda s: f"{s.family}-serve-note-{s.host}")
def test_serve_notes_other_machines_only_off_loopback(sp, models, monkeypatch, capsys):
    import uvicorn

    served = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: served.append(sockets))
    code = main(["serve", str(models / "dec"), "--host", sp.host, "--port", "0"])
    out, err = capsys.readouterr()
    if code == 2 and "cannot listen" in err:
        pytest.skip(f"cannot bind {sp.host} here")
    assert code == 0 and served and out.startswith("glassformer explorer: http://"), (out, err)
    assert (NOTE in err) is not sp.loopback, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1


# -- 2. a client that goes away mid-body ----------------------------------------------------------

GONE = [  # (what the client sends before it closes)
    b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000\r\n\r\n0123456789",
    b"POST /api/report HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Content-Length: 1000\r\n\r\n{"model": ',
    b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"mod\r\n',
    b"POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl",
]
CASES += [(FAMILY, "disconnect", raw[:30]) for raw in GONE]


def test_a_client_gone_mid_body_leaves_no_traceback_in_the_log(models):
    """A real `glassformer serve` process; each raw request is cut off, then a whole one is
    answered, then Ctrl-C: the log (stderr) holds no traceback, at most one line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(
        [sys.executable, "-m", "glassformer.cli", "serve", str(models / "dec"), "--port", "0",
         "--no-walkthroughs"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        line = p.stdout.readline()
        assert line.startswith("glassformer explorer: http://127.0.0.1:"), line
        port = int(line.split()[2].rstrip("/").rsplit(":", 1)[1])
        for raw in GONE * 2:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(raw)
                time.sleep(0.05)
        time.sleep(0.3)
        body = b'{"model": "dec", "text": "to be"}'
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))  # fmt: skip
            answer = b""
            while chunk := c.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert "Traceback" not in err and "ClientDisconnect" not in err, err[-2000:]
    assert len(err.strip().splitlines()) <= 1, err


# -- 3. every field of every endpoint: handled or refused before work -----------------------------


@dataclass
class Req:
    family: str
    action: str
    body: object  # a dict (sent as JSON) or bytes (sent as they are)
    status: int  # 200: handled; else the 4xx refusal
    message: str = ""  # a substring of the one error line
    content_type: str = "application/json"
    id: str = field(default="")


REQS: list[Req] = []
DEC = {"model": "dec", "text": "to be"}
HELLO = {"model": "hello", "text": "hello world"}
ENC = {"model": "enc", "text": "to be"}
A = "decoder.0.self_attn.head0.A"
HEAD = {"stack": "decoder", "kind": "self_attn", "layer": 0, "head": 0}


def req(action, body, status, message="", **kw):
    REQS.append(Req(FAMILY, action, body, status, message, **kw))


def with_(base, **fields):
    return {**base, **fields}


def without(base, name):
    return {k: v for k, v in base.items() if k != name}


# The body itself.
for raw, message in [
    (b"", "JSON"), (b"{not json", "JSON"), (b"[1, 2]", "JSON object"), (b'"to be"', "JSON object"),
    (b"null", "JSON object"), (b"3", "JSON object"),
    (b'{"model": "dec", "text": NaN}', "NaN"), (b'{"model": "dec", "text": Infinity}', "Infinity"),
    (b'{"model": "dec", "text": "a", "top": -Infinity}', "Infinity"),
    (b'{"model": "dec", "text": "a", "x": 1e400}', "largest float64"),
    (b'{"model": "dec", "text": "a", "x": -1e999}', "largest float64"),
    (b'{"model": "dec", "text": "a", "x": ' + b"9" * 5000 + b"}", "JSON"),
    (b'{"model": "dec", "text": "to be", "model": "enc"}', "given twice"),
    (b'{"model": "dec", "text": "to be", "text": "to be"}', "given twice"),
    (b"\xff\xfe", "JSON"), ('{"model": "dec", "text": "é"}'.encode("latin-1"), "JSON"),
    ('{"model": "dec", "text": "to be"}'.encode("utf-16"), "JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON"),
    (b'{"model": "dec", "text": "a", "ids": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "JSON"),
    (b'{"model": "dec", "text": "a\\ud800"}', "Unicode"),
]:  # fmt: skip
    req("run", raw, 400, message)
req(
    "intervene",
    b'{"model": "dec", "text": "to be", "heads": [{"stack": "decoder", '
    b'"stack": "encoder", "kind": "self_attn", "layer": 0, "head": 0}]}',
    400,
    "given twice",
)
nested = {"model": "dec", "text": "to be", "ids": 1}
for _ in range(400):
    nested["ids"] = [nested["ids"]]
req("run", nested, 400, "token id")  # deep but parsed: refused as what it is
for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "",
             "application/jsonx", "text/json"):  # fmt: skip
    req("run", DEC, 415, "Content-Type: application/json", content_type=kind)
for kind in ("application/json; charset=utf-8", "Application/JSON"):
    req("run", DEC, 200, content_type=kind)

# Unknown fields: a misspelt one is never ignored.
for action, body, name in [
    ("run", with_(DEC, Text="to be"), "Text"), ("run", with_(DEC, temperature=1), "temperature"),
    ("load", {"model": "dec", "text": "x"}, "text"), ("generate", with_(DEC, ids=[1]), "ids"),
    ("generate", with_(DEC, top_K=3), "top_K"), ("step", with_(DEC, name=A, i=0), "i"),
    ("fidelity", with_(DEC, name=A), "name"), ("report", with_(DEC, strategy="beam"), "strategy"),
    ("trace", with_(DEC, x=None), "x"), ("tile", with_(DEC, name="logits", r0=0, r1=1, c0=0,
                                                  c1=1, r2=3), "r2"),
    ("intervene", with_(DEC, heads=[with_(HEAD, layers=[0])]), "layers"),
    ("run", with_(DEC, **{"": 1}), ""), ("run", with_(DEC, **{"x" * 5000: 1}), "x" * 40),
]:  # fmt: skip
    req(action, body, 400, f"takes no field {name!r}"[:40])

# run: model, text, ids, target.
for body, status, message in [
    ({"text": "to be"}, 400, "needs the field 'model'"),
    (with_(DEC, model=3), 404, "no model"), (with_(DEC, model=None), 404, "no model"),
    (with_(DEC, model=[]), 404, "no model"), (with_(DEC, model={}), 404, "no model"),
    (with_(DEC, model="../dec"), 404, "only the folders given"),
    (with_(DEC, model=""), 404, "no model"), (with_(DEC, model="x" * 100_000), 404, "no model"),
    ({"model": "dec"}, 400, "needs the field 'text'"), (with_(DEC, text=None), 400, "a string"),
    (with_(DEC, text=5), 400, "must be a string, got 5"), (with_(DEC, text=[]), 400, "a list"),
    (with_(DEC, text=True), 400, "got true"), (with_(DEC, text=""), 400, "empty"),
    (with_(DEC, text="   \n\t"), 400, "empty"), (with_(DEC, text="x" * 300_000), 413, "at most"),
    (with_(DEC, text="to be " * 10), 400, "at most 32"), (with_(DEC, text="\x00"), 200, ""),
    (with_(DEC, text="日本"), 200, ""), (with_(DEC, text="to be\r\nor"), 200, ""),
    (with_(DEC, ids=[]), 400, "list of 1 to 32"), (with_(DEC, ids=[1] * 33), 400, "1 to 32"),
    (with_(DEC, ids=[99]), 400, "not a token id in [0, 20)"), (with_(DEC, ids=[-1]), 400, "-1"),
    (with_(DEC, ids=[1.0]), 400, "1.0"), (with_(DEC, ids=[True]), 400, "true"),
    (with_(DEC, ids=["1"]), 400, "'1'"), (with_(DEC, ids="abc"), 400, "list"),
    (with_(DEC, ids=[2**64]), 400, "not a token id"), (with_(DEC, ids=[3, 4]), 200, ""),
    (with_(DEC, ids=None), 200, ""), (with_(ENC, ids=[1]), 400, "input of a decoder"),
    (with_(HELLO, ids=[1]), 400, "input of a decoder"),
    (with_(DEC, target=[1]), 400, "input of an encoder-decoder"),
    (with_(HELLO, target=[6, 99]), 400, "not a token id"),
    ({"model": "hello-world"}, 200, ""), ({"model": "hello-world", "text": ""}, 200, ""),
    ({"model": "hello-world", "text": 5}, 400, "a string"),
    ({"model": "hello-world", "ids": [1]}, 400, "fixed inputs"),
]:  # fmt: skip
    req("run", body, status, message)
req("load", {}, 400, "needs the field 'model'")
req("load", {"model": "nope"}, 404, "no model")
req("load", {"model": "enc"}, 200)

# step, attention, heads, neuron, tile, cross.
for action, body, status, message in [
    ("step", DEC, 400, "needs the field 'name'"), ("step", with_(DEC, name=5), 400, "a string"),
    ("step", with_(DEC, name=None), 400, "a string"), ("step", with_(DEC, name="nope"), 404,
                                                              "no step"),
    ("step", with_(DEC, name=""), 404, "no step"), ("step", with_(DEC, name=A), 200, ""),
    ("attention", {"model": "hello-world", "name": "overflow.naive.max_abs"}, 400,
     "not a matrix"),
    ("attention", with_(DEC, name=["x"]), 400, "a string"), ("attention", with_(DEC, name=A), 200,
                                                                  ""),
    ("heads", with_(DEC, site=5, layer=0), 400, "'site' must be a string"),
    ("heads", with_(DEC, site="decoder.self_attn", layer="0"), 400, "'layer' must be a block"),
    ("heads", with_(DEC, site="decoder.self_attn", layer=-1), 400, "'layer'"),
    ("heads", with_(DEC, site="decoder.self_attn", layer=1.5), 400, "'layer'"),
    ("heads", with_(DEC, site="decoder.self_attn", layer=True), 400, "'layer'"),
    ("heads", with_(DEC, site="decoder.self_attn", layer=99), 404, "no attention maps"),
    ("heads", with_(DEC, site="decoder.self_attn", layer=None), 404, "no attention maps"),
    ("heads", with_(DEC, site="decoder.self_attn", layer=1), 200, ""),
    ("neuron", with_(DEC, name=A, j=0), 400, "needs the field 'i'"),
    ("neuron", with_(DEC, name=A, i=-1, j=0), 400, "'i' must be a token position"),
    ("neuron", with_(DEC, name=A, i=5, j=0), 400, "'i' must be an integer in [0, 4]"),
    ("neuron", with_(DEC, name=A, i=0, j=2**70), 400, "'j'"),
    ("neuron", with_(DEC, name=A, i="1", j=0), 400, "'i'"),
    ("neuron", with_(DEC, name=A, i=1.0, j=0), 400, "'i'"),
    ("neuron", with_(DEC, name=A, i=0, j=False), 400, "'j'"),
    ("neuron", with_(DEC, name="logits", i=0, j=0), 404, "no Q and K"),
    ("neuron", with_(DEC, name=A, i=4, j=1), 200, ""),
    ("tile", with_(DEC, name="logits", r0=-1, r1=1, c0=0, c1=1), 400, "'r0'"),
    ("tile", with_(DEC, name="logits", r0=1, r1=1, c0=0, c1=1), 400, "'r1'"),
    ("tile", with_(DEC, name="logits", r0=0, r1=1, c0=0, c1=10**30), 400, "'c1'"),
    ("tile", with_(DEC, name="logits", r0="a", r1=1, c0=0, c1=1), 400, "'r0'"),
    ("tile", with_(DEC, name="logits", r0=0, r1=1, c0=0), 400, "needs the field 'c1'"),
    ("tile", with_(DEC, name="logits", r0=0, r1=5, c0=0, c1=20), 200, ""),
    ("cross", DEC, 400, "encoder-decoder"), ("cross", with_(HELLO, target=[6, 2]), 200, ""),
    ("cross", with_(HELLO, target=[]), 400, "list of 1 to"),
]:  # fmt: skip
    req(action, body, status, message)

# generate: the command line's values, refused as it refuses them.
GEN = with_(DEC, strategy="sample", seed=1, max_new_tokens=3)
for body, status, message in [
    (with_(GEN, strategy="best"), 400, "'strategy' must be one of"),
    (with_(GEN, strategy=5), 400, "'strategy'"), (with_(GEN, strategy=["beam"]), 400, "a list"),
    (with_(GEN, strategy=None), 200, ""),
    (with_(GEN, temperature=0), 400, "'temperature' must be a finite number > 0, got 0.0"),
    (with_(GEN, temperature=-1), 400, "got -1.0"), (with_(GEN, temperature="hot"), 400, "'hot'"),
    (with_(GEN, temperature=True), 400, "got true"), (with_(GEN, temperature=[]), 400, "a list"),
    (with_(GEN, temperature=1e-300), 200, ""), (with_(GEN, temperature=5e-324), 200, ""),
    (with_(GEN, temperature=1e300), 200, ""), (with_(GEN, temperature=None), 200, ""),
    (with_(GEN, top_k=0), 400, "'top_k' must be >= 1, got 0"), (with_(GEN, top_k=-5), 400, "-5"),
    (with_(GEN, top_k=1.5), 400, "'top_k'"), (with_(GEN, top_k="3"), 400, "'top_k'"),
    (with_(GEN, top_k=10**30), 200, ""), (with_(GEN, top_k=None), 200, ""),
    (with_(GEN, top_p=0), 400, "'top_p' must be in (0, 1], got 0.0"),
    (with_(GEN, top_p=1.5), 400, "got 1.5"), (with_(GEN, top_p=-0.1), 400, "'top_p'"),
    (with_(GEN, top_p=1e-300), 200, ""), (with_(GEN, top_p=1), 200, ""),
    (with_(GEN, seed=-1), 400, "'seed' must be an integer in [0, 2**32), got -1"),
    (with_(GEN, seed=2**32), 400, "'seed'"), (with_(GEN, seed=1.5), 400, "'seed'"),
    (with_(GEN, seed="7"), 400, "'seed'"), (with_(GEN, seed=2**32 - 1), 200, ""),
    (with_(GEN, seed=None), 200, ""),
    (with_(GEN, max_new_tokens=0), 400, "'max_new_tokens' must be at least 1, got 0"),
    (with_(GEN, max_new_tokens=-1), 400, "at least 1"),
    (with_(GEN, max_new_tokens=2.0), 400, "'max_new_tokens'"),
    (with_(GEN, max_new_tokens=10**30), 200, ""),
    (with_(GEN, strategy="beam", beam_width=0), 400, "'beam_width' must be >= 1, got 0"),
    (with_(GEN, strategy="beam", beam_width=21), 400, "more than the vocabulary (20 tokens)"),
    (with_(GEN, strategy="beam", beam_width=65), 400, "explorer's 64"),
    (with_(GEN, strategy="beam", beam_width=1.5), 400, "'beam_width'"),
    (with_(GEN, strategy="beam", beam_width=20), 200, ""),
    (with_(GEN, strategy="beam", length_penalty="x"), 400, "'length_penalty'"),
    (with_(GEN, strategy="beam", length_penalty=1e300), 200, ""),  # the command line's too
    (with_(GEN, strategy="beam", length_penalty=-1e300), 200, ""),
    (with_(GEN, strategy="beam", length_penalty=[1]), 400, "'length_penalty' must be a finite"),
    (with_(GEN, strategy="beam", length_penalty=-10), 200, ""),
    (with_(GEN, strategy="greedy", temperature=0.5, beam_width=3), 200, ""),
    (without(GEN, "text"), 400, "needs the field 'text'"),
    (with_(ENC, strategy="greedy"), 400, "does not generate"),
    ({"model": "hello-world", "text": "x"}, 400, "walkthrough"),
    (with_(HELLO, strategy="beam", beam_width=3), 200, ""),
]:  # fmt: skip
    req("generate", body, status, message)

# intervene.
IV = with_(DEC, heads=[HEAD])
for body, status, message in [
    (DEC, 400, "needs the field 'heads'"), (with_(DEC, heads=[]), 400, "list of heads"),
    (with_(DEC, heads="x"), 400, "list of heads"), (with_(DEC, heads=[5]), 400, "each of"),
    (with_(DEC, heads=[HEAD] * 5000), 400, "list of heads"),
    (with_(DEC, heads=[with_(HEAD, stack="middle")]), 400, "'stack'"),
    (with_(DEC, heads=[with_(HEAD, layer=-1)]), 400, "'layer'"),
    (with_(DEC, heads=[with_(HEAD, head=True)]), 400, "'head'"),
    (with_(DEC, heads=[without(HEAD, "kind")]), 400, "needs the field 'kind'"),
    (with_(DEC, heads=[with_(HEAD, head=9)]), 400, "no head"),
    (with_(IV, how="half"), 400, "'how'"), (with_(IV, how="patch"), 400, "'patch_text'"),
    (with_(IV, how="patch", patch_text=5), 400, "'patch_text' must be a string"),
    (with_(IV, patch_text="or no"), 400, "is for how 'patch'"),
    (with_(IV, how="patch", patch_text="x"), 400, "same number of tokens"),
    (with_(IV, how="patch", patch_text="or no"), 200, ""), (with_(IV, how="mean"), 200, ""),
    ({"model": "hello-world", "heads": [HEAD]}, 400, "walkthrough"),
]:  # fmt: skip
    req("intervene", body, status, message)
for action in ("fidelity", "report", "trace"):
    req(action, {"text": "to be"}, 400, "needs the field 'model'")
    req(action, with_(DEC, text=7), 400, "a string")
    req(action, DEC, 200)
req("fidelity", {"model": "hello-world"}, 200)
CASES += REQS


def post(client, r: Req):
    data = r.body if isinstance(r.body, bytes) else json.dumps(r.body).encode()
    headers = {"Content-Type": r.content_type} if r.content_type else {}
    return client.post(f"/api/{r.action}", content=data, headers=headers)


def _req_id(r: Req) -> str:
    shown = r.body[:30] if isinstance(r.body, bytes) else json.dumps(r.body)[:60]
    return f"{r.family}-{r.action}-{r.status}-{r.content_type[:12]}-{shown}"


@pytest.mark.parametrize("r", REQS, ids=_req_id)
def test_every_field_is_handled_or_refused_in_one_line(r, client):
    before = len(client.errors.records)
    answer = post(client, r)
    if r.status == 200:
        assert answer.status_code == 200, answer.text[:300]
        if r.action != "report":
            strict_json(answer.text)
    else:
        message = refusal(answer)
        assert answer.status_code == r.status and r.message in message, (answer.status_code,
                                                                         message)  # fmt: skip
    assert client.errors.records[before:] == []


# The command line is the oracle of each decoding value's message.
@dataclass(frozen=True)
class Agree:
    family: str
    flag: str  # the command line's option
    says: str  # how the command line names it in its message
    name: str  # the request's field
    value: object
    strategy: str = "sample"


AGREE = [Agree(FAMILY, f, s, n, v, k) for f, s, n, v, k in [
    ("--temperature", "temperature", "temperature", 0, "sample"),
    ("--temperature", "temperature", "temperature", -1, "sample"),
    ("--temperature", "temperature", "temperature", -0.5, "sample"),
    ("--top-k", "top-k", "top_k", 0, "sample"), ("--top-k", "top-k", "top_k", -5, "sample"),
    ("--top-p", "top-p", "top_p", 0, "sample"), ("--top-p", "top-p", "top_p", 1.5, "sample"),
    ("--top-p", "top-p", "top_p", -1, "sample"),
    ("--seed", "seed", "seed", -1, "sample"), ("--seed", "seed", "seed", 2**32, "sample"),
    ("--max-new-tokens", "--max-new-tokens", "max_new_tokens", 0, "sample"),
    ("--max-new-tokens", "--max-new-tokens", "max_new_tokens", -3, "sample"),
    ("--beam-width", "beam width", "beam_width", 0, "beam"),
    ("--beam-width", "beam width", "beam_width", -2, "beam"),
    ("--beam-width", "--beam-width", "beam_width", 21, "beam"),  # over the vocabulary (20)
]]  # fmt: skip
CASES += AGREE


@pytest.mark.parametrize("a", AGREE, ids=lambda a: f"{a.family}-agree-{a.flag}-{a.value}")
def test_the_server_refuses_a_decoding_value_as_the_command_line_does(a, client, models, capsys):
    code = main(["generate", str(models / "dec"), "to be", "--strategy", a.strategy, a.flag,
                 str(a.value)])  # fmt: skip
    assert code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    said = line.removeprefix("glassformer: error: ").removeprefix(f"argument {a.flag}: ")
    said = said.split(" (see glassformer")[0]
    body = with_(DEC, strategy=a.strategy, **{a.name: a.value})
    message = refusal(post(client, Req(FAMILY, "generate", body, 400)))
    assert message == said.replace(a.says, repr(a.name), 1), (message, said)


# -- 4. hypothesis: arbitrary JSON and mutations of valid requests --------------------------------

VALID = {
    "load": {"model": "dec"},
    "run": DEC,
    "step": with_(DEC, name=A),
    "attention": with_(DEC, name=A),
    "heads": with_(DEC, site="decoder.self_attn", layer=0),
    "neuron": with_(DEC, name=A, i=2, j=1),
    "cross": with_(HELLO, target=[6, 2]),
    "tile": with_(DEC, name="logits", r0=0, r1=2, c0=0, c1=3),
    "generate": GEN,
    "intervene": IV,
    "fidelity": DEC,
    "report": DEC,
    "trace": HELLO,
}
FUZZ = [(FAMILY, "fuzz", action, kind) for action in VALID for kind in ("any", "mutate")]
CASES += FUZZ

scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40)
    | st.sampled_from(["dec", "hello", "enc", "hello-world", "", "to be", A, "logits", "beam",
                       "sample", "decoder", "self_attn", "patch", "decoder.self_attn"])
)  # fmt: skip
documents = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                          max_size=4),
    max_leaves=12,
)  # fmt: skip
FIELD_NAMES = sorted({k for body in VALID.values() for k in body} | {"x", "ids", "how", "top_k"})


@st.composite
def mutated(draw, action):
    body = json.loads(json.dumps(VALID[action]))
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(set(body) | set(FIELD_NAMES))))
        if draw(st.integers(0, 5)) == 0:
            body.pop(name, None)
        elif name == "heads" and draw(st.booleans()):
            head = dict(HEAD)
            head[draw(st.sampled_from([*HEAD, "x"]))] = draw(documents)
            body["heads"] = [head]
        else:
            body[name] = draw(documents)
    return body


def _answered(client, action, body):
    data = json.dumps(body, allow_nan=True).encode()  # NaN / Infinity as Python writes them
    before = len(client.errors.records)
    r = client.post(f"/api/{action}", content=data, headers={"Content-Type": "application/json"})
    assert r.status_code == 200 or 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    if r.status_code == 200:
        if action != "report":
            strict_json(r.text)
    else:
        refusal(r)
    assert client.errors.records[before:] == []


FUZZ_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                         suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])  # fmt: skip


@pytest.mark.parametrize("action", list(VALID), ids=lambda a: f"{FAMILY}-fuzz-any-{a}")
def test_fuzz_arbitrary_json_is_answered_or_refused(action, client):
    @FUZZ_SETTINGS
    @given(documents)
    def check(body):
        _answered(client, action, body)

    check()


@pytest.mark.parametrize("action", list(VALID), ids=lambda a: f"{FAMILY}-fuzz-mutate-{a}")
def test_fuzz_mutated_requests_are_answered_or_refused(action, client):
    @FUZZ_SETTINGS
    @given(mutated(action))
    def check(body):
        _answered(client, action, body)

    check()


def test_the_valid_requests_of_the_fuzzing_are_answered(client):
    """The mutations start from requests that work (else the fuzzing would test refusals only)."""
    for action, body in VALID.items():
        r = client.post(f"/api/{action}", json=body)
        assert r.status_code == 200, (action, r.text[:300])
