"""Round three (issue 35): regular files only, and a server that closes a body that never comes.

Family "special-file": every path option a user gives a file with (train --data / --valid, eval
--data, init --corpus, generate / translate / classify --input, import-nanogpt's CKPT, --meta,
--vocab-from and --tokenizer, exercises check FILE) is given a FIFO, /dev/zero, /dev/null, a UNIX
socket or a folder. Each must be refused in one line naming the path and what it is, exit 2,
nothing written, and at once: the rows run in a child process with a time limit and a memory cap,
so that a read that blocks on a FIFO or drinks /dev/zero fails its row instead of hanging the
suite or filling the machine. Then the tensors the safe loader builds but nanoGPT never saves
(sparse COO / CSR / CSC / BSR, quantized, nested, on the meta device, complex, integer) in a
ckpt.pt: refused in one line naming the tensor; a strided view and tied storage still import,
to the same weights as the dense tensors (the oracle). Below the rows, the reading functions
themselves: a FIFO swapped in after the check is refused without blocking, the size limit, and
--vocab-from streamed (nanoGPT's prepare.py is the oracle of the vocabulary, its peak memory a
bound).

Family "server-body": raw sockets against a real uvicorn server started by the test with the
body deadline set to BOUND (1 s): a half body, a Content-Length with no body, a body trickled too
slowly, chunks without end, an Expect: 100-continue left unanswered: each is answered 408 and
closed within BOUND + MARGIN, with one line in the log; a slow but steady body inside the bound is
answered 200; other clients are answered meanwhile; the deadline covers the body only (a slow
model, a streamed trace are not cut). One last test runs `glassformer serve` itself with the
default bound (BODY_TIMEOUT) and reads its log line.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from table import ENV, Case, case_id, check_case, fill, one_error_line, snapshot  # noqa: E402

from glassformer import files  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.errors import CheckpointError, GlassformerError  # noqa: E402
from glassformer.formats import nanogpt  # noqa: E402
from glassformer.serve import Explorer, Registry, serving  # noqa: E402
from glassformer.serve.deadlines import BODY_TIMEOUT  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASES: list = []
SPECIAL = "special-file"
TEXT = "to be or not to be, that is the question.\n" * 20
CHARS = sorted(set(TEXT))


# -- the models -----------------------------------------------------------------------------------


def nanogpt_state(V: int, seed: int = 0) -> dict:
    """nanoGPT's GPT state dict for n_layer=1, n_head=2, n_embd=8, block_size=8, bias=True:
    random weights, the head tied to the token embedding (one tensor, as train.py saves it)."""
    g = torch.Generator().manual_seed(seed)
    C = 8
    shapes = {
        "transformer.wte.weight": (V, C), "transformer.wpe.weight": (8, C),
        "transformer.h.0.ln_1.weight": (C,), "transformer.h.0.ln_1.bias": (C,),
        "transformer.h.0.attn.c_attn.weight": (3 * C, C),
        "transformer.h.0.attn.c_attn.bias": (3 * C,),
        "transformer.h.0.attn.c_proj.weight": (C, C), "transformer.h.0.attn.c_proj.bias": (C,),
        "transformer.h.0.ln_2.weight": (C,), "transformer.h.0.ln_2.bias": (C,),
        "transformer.h.0.mlp.c_fc.weight": (4 * C, C), "transformer.h.0.mlp.c_fc.bias": (4 * C,),
        "transformer.h.0.mlp.c_proj.weight": (C, 4 * C), "transformer.h.0.mlp.c_proj.bias": (C,),
        "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,),
    }  # fmt: skip
    state = {k: torch.randn(s, generator=g) * 0.3 for k, s in shapes.items()}
    state["lm_head.weight"] = state["transformer.wte.weight"]
    return state


def save_nanogpt(folder: Path, state: dict, **extra) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    args = dict(n_layer=1, n_head=2, n_embd=8, block_size=8, vocab_size=len(CHARS), bias=True)
    ckpt = {"model": state, "model_args": args, "iter_num": 3, "best_val_loss": torch.tensor(2.5)}
    torch.save({**ckpt, **extra}, folder / "ckpt.pt")
    return folder / "ckpt.pt"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """hello (the article's encoder-decoder), dec (char decoder), enc (word classifier), made by
    init in a second; ng: a nanoGPT out_dir (ckpt.pt, meta.pkl as prepare.py writes it, its
    training text); corpus.txt and pairs.tsv."""
    d = tmp_path_factory.mktemp("models")
    (d / "corpus.txt").write_text(TEXT)
    (d / "pairs.tsv").write_text("hello world\thola mundo\nhow are you\tcomo estas\n" * 20)
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    assert main(["init", str(d / "dec"), "--preset", "tiny", "--tokenizer", "char",
                 "--corpus", str(d / "corpus.txt")]) == 0  # fmt: skip
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer",
                 "word", "--corpus", str(d / "corpus.txt")]) == 0  # fmt: skip
    save_nanogpt(d / "ng", nanogpt_state(len(CHARS)))
    meta = {"vocab_size": len(CHARS), "itos": dict(enumerate(CHARS)),
            "stoi": {c: i for i, c in enumerate(CHARS)}}  # fmt: skip
    (d / "ng" / "meta.pkl").write_bytes(pickle.dumps(meta))
    (d / "ng" / "input.txt").write_text(TEXT)
    return d


# -- special files as inputs ----------------------------------------------------------------------


def specials(tmp: Path, models: Path) -> None:
    """{tmp}/fifo (a named pipe nobody writes), {tmp}/sock (a bound UNIX socket) and
    {tmp}/folder beside the case's files."""
    os.mkfifo(tmp / "fifo")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp / "sock"))  # the socket file stays after the close
    (tmp / "folder").mkdir()


FIFO, SOCK, FOLDER = "{tmp}/fifo", "{tmp}/sock", "{tmp}/folder"
ZERO, NULL = "/dev/zero", "/dev/null"
KINDS = {
    FIFO: "is a FIFO (named pipe), not a regular file",
    ZERO: "/dev/zero is a character device, not a regular file",
    NULL: "/dev/null is a character device, not a regular file",
    SOCK: "is a socket, not a regular file",
    FOLDER: "is a folder, not a regular file",
}
NG, OUT = "{models}/ng", "{tmp}/out"
OPTIONS = [  # (argv with X for the path, the kinds of path given to it)
    (["import-nanogpt", NG, OUT, "--meta", "X"], [FIFO, ZERO, NULL, SOCK, FOLDER]),
    (["import-nanogpt", NG, OUT, "--vocab-from", "X"], [FIFO, ZERO, NULL, SOCK, FOLDER]),
    (["import-nanogpt", NG, OUT, "--tokenizer", "X"], [FIFO, ZERO, SOCK]),
    (["import-nanogpt", "X", OUT], [FIFO, ZERO, SOCK]),
    (["generate", "{models}/dec", "--input", "X"], [FIFO, ZERO]),
    (["translate", "{models}/hello", "--input", "X"], [FIFO, SOCK]),
    (["classify", "{models}/enc", "--input", "X"], [FIFO, ZERO]),
    (["init", OUT, "--preset", "tiny", "--tokenizer", "char", "--corpus", "X"], [FIFO, ZERO, SOCK]),
    (["train", "lm", "--out", OUT, "--data", "X"], [FIFO, ZERO]),
    (["train", "translate", "--out", OUT, "--data", "{models}/pairs.tsv", "--valid", "X"], [FIFO]),
    (["eval", "{models}/hello", "--data", "X"], [FIFO]),
]
for argv, kinds in OPTIONS:
    for k in kinds:
        CASES.append(Case(SPECIAL, [k if a == "X" else a for a in argv], KINDS[k], setup=specials))
# a checkpoint folder that is a special file: said as what it is (it read "a file")
for k, what in ((FIFO, "a FIFO (named pipe)"), (ZERO, "a character device"), (SOCK, "a socket")):
    says = f"it is {what}, not a directory"
    CASES.append(Case(SPECIAL, ["generate", k, "to be"], says, setup=specials))
# exercises check refuses with its own words (exercises/sandbox.py), a FIFO never opened.
for k in ("{tmp}/fifo", "/dev/zero"):
    CASES.append(
        Case(SPECIAL, ["exercises", "check", "1", k], "not a regular file", setup=specials)
    )

LIMIT_S = 90  # seconds a row may take in its child (a start-up with torch, on a busy machine)
MEMORY = 6 * 2**30  # the child's address space: /dev/zero read whole fails here, not the machine


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def check_in_child(case: Case, models: Path, tmp: Path) -> None:
    """`check_case` in a child process (`python -m glassformer.cli`) with a time limit and a
    memory cap: exit 2, one error line holding the message, nothing written or changed."""
    if case.setup:
        case.setup(tmp, models)
    before = snapshot(tmp, models)
    argv = fill(case.argv, tmp, models)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "glassformer.cli", *argv], capture_output=True, text=True,
            env=ENV, timeout=LIMIT_S, preexec_fn=_capped, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"glassformer {' '.join(argv)}: no answer in {LIMIT_S} s (it hangs)")
    assert "Traceback" not in p.stdout + p.stderr, p.stderr[-2000:]
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    line = one_error_line(p.stderr)
    assert case.message in line, line
    assert snapshot(tmp, models) == before, "a refusal wrote or changed files"


PATH_CASES = [c for c in CASES if c.setup is specials]


@pytest.mark.parametrize("case", PATH_CASES, ids=[case_id(c) for c in PATH_CASES])
def test_a_special_file_is_refused_at_once_in_one_line(case, models, tmp_path):
    check_in_child(case, models, tmp_path)


# -- unusual tensors in ckpt.pt -------------------------------------------------------------------

C_PROJ = "transformer.h.0.attn.c_proj.weight"
TENSORS = {  # what C_PROJ becomes: (change, the words of the refusal)
    "sparse COO": (lambda x: x.to_sparse(), "is a sparse tensor (sparse_coo)"),
    "sparse CSR": (lambda x: x.to_sparse_csr(), "is a sparse tensor (sparse_csr)"),
    "sparse CSC": (lambda x: x.to_sparse_csc(), "is a sparse tensor (sparse_csc)"),
    "sparse BSR": (lambda x: x.to_sparse_bsr((2, 2)), "is a sparse tensor (sparse_bsr)"),
    "quantized": (
        lambda x: torch.quantize_per_tensor(x, 0.01, 0, torch.qint8),
        "is a quantized tensor (qint8)",
    ),
    "nested": (lambda x: torch.nested.nested_tensor([x[0], x[1, :3]]), "is a nested tensor"),
    "nested, jagged": (
        lambda x: torch.nested.nested_tensor([x[0], x[1, :3]], layout=torch.jagged),
        "is a nested tensor",
    ),
    "meta device": (lambda x: torch.empty_like(x, device="meta"), "on the meta device"),
    "complex": (lambda x: x.to(torch.complex64), "has dtype torch.complex64"),
    "integer": (lambda x: x.round().long(), "has dtype torch.int64"),
}


def unusual_tensor(change, name=C_PROJ):
    def setup(tmp, models):
        state = nanogpt_state(len(CHARS))
        with torch.no_grad():
            state[name] = change(state[name])
        save_nanogpt(tmp / "bad", state)

    return setup


for what, (change, words) in TENSORS.items():
    CASES.append(
        Case(
            SPECIAL,
            ["import-nanogpt", "{bad}", "{tmp}/out", "--meta", f"{NG}/meta.pkl"],
            words,
            setup=unusual_tensor(change),
            id=what,
        )  # fmt: skip
    )
TENSOR_CASES = [c for c in CASES if c.family == SPECIAL and c.setup is not specials]


@pytest.mark.parametrize("case", TENSOR_CASES, ids=[c.id for c in TENSOR_CASES])
def test_an_unusual_tensor_in_ckpt_pt_is_refused_by_name(case, models, tmp_path, capsys):
    check_case(case, models, tmp_path, capsys)


def test_an_unusual_tensor_is_named_with_its_file(models, tmp_path):
    unusual_tensor(lambda x: x.to_sparse())(tmp_path, models)
    with pytest.raises(CheckpointError) as e:
        nanogpt.load(tmp_path / "bad", meta=models / "ng" / "meta.pkl")
    assert str(e.value).startswith(f"{tmp_path / 'bad' / 'ckpt.pt'}: tensor {C_PROJ!r} is a sparse")
    assert "\n" not in str(e.value)


def test_a_value_without_data_beside_the_model_is_not_shown(models, tmp_path):
    """best_val_loss on the meta device (a 0-d tensor without data): left out without a value."""
    save_nanogpt(tmp_path / "ng", nanogpt_state(len(CHARS)),
                 best_val_loss=torch.empty((), device="meta"))  # fmt: skip
    imp = nanogpt.load(tmp_path / "ng", meta=models / "ng" / "meta.pkl")
    assert imp.skipped["best_val_loss"] == nanogpt.LEFT_OUT["best_val_loss"]
    assert imp.skipped["iter_num"].endswith("(3)")


def test_strided_views_and_shared_storage_import_as_the_dense_tensors(models, tmp_path):
    """Oracle: the same weights saved dense. c_attn saved as every other column of a wider
    tensor (a strided view of a storage twice its size), c_fc as the transpose of a stored
    matrix, lm_head sharing wte's storage: each read as its values."""
    dense = nanogpt_state(len(CHARS), seed=3)
    odd = dict(dense)
    wide = torch.stack([dense["transformer.h.0.attn.c_attn.weight"]] * 2, dim=2).flatten(1)
    odd["transformer.h.0.attn.c_attn.weight"] = wide[:, ::2]
    odd["transformer.h.0.mlp.c_fc.weight"] = (
        dense["transformer.h.0.mlp.c_fc.weight"].T.contiguous().T
    )
    assert not odd["transformer.h.0.attn.c_attn.weight"].is_contiguous()
    assert not odd["transformer.h.0.mlp.c_fc.weight"].is_contiguous()
    save_nanogpt(tmp_path / "dense", dense)
    save_nanogpt(tmp_path / "odd", odd)
    meta = models / "ng" / "meta.pkl"
    a = nanogpt.load(tmp_path / "dense", meta=meta)
    b = nanogpt.load(tmp_path / "odd", meta=meta)
    assert a.params.keys() == b.params.keys()
    for name in a.params:
        np.testing.assert_array_equal(a.params[name], b.params[name], err_msg=name)
    q = dense["transformer.h.0.attn.c_attn.weight"].double().numpy()[:8]
    np.testing.assert_array_equal(b.params["decoder.layers.0.self_attn.q.weight"], q)


# -- the reading functions ------------------------------------------------------------------------


def _unblocked(fifo: Path, call, timeout=5.0):
    """Run call() in a thread; if it has not returned after `timeout` seconds (blocked opening
    the FIFO), open the FIFO for writing so that it returns, and fail."""
    result = {}

    def run():
        try:
            result["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(5)
        pytest.fail(f"blocked on {fifo} for {timeout} s")
    return result


def test_a_fifo_swapped_in_after_the_check_is_refused_without_blocking(tmp_path, monkeypatch):
    """The time-of-check gap: `regular` saw a file, a FIFO is there when the file is opened.
    open_regular opens without blocking and refuses what the descriptor shows."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(files, "regular", lambda path: Path(path))  # the check saw a file
    result = _unblocked(fifo, lambda: files.open_regular(fifo))
    assert isinstance(result.get("error"), files.FileError), result
    assert str(result["error"]) == f"{fifo} is a FIFO (named pipe), not a regular file; give a file"


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: os.mkfifo(p), "a FIFO (named pipe)"),
        (lambda p: p.mkdir(), "a folder"),
        (lambda p: p.symlink_to("/dev/zero"), "a character device"),
        (lambda p: None, "cannot read"),
    ],
    ids=["fifo", "folder", "link to a device", "nothing"],
)
def test_regular_names_what_the_path_is(tmp_path, make, words):
    path = tmp_path / "x"
    make(path)
    with pytest.raises(files.FileError) as e:
        files.regular(path)
    assert words in str(e.value) and str(path) in str(e.value)
    (tmp_path / "f").write_text("ok")
    assert files.regular(tmp_path / "f") == tmp_path / "f"


def test_read_limited_reads_up_to_its_limit_and_refuses_one_byte_more(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 1000)
    assert files.read_limited(f, 1000) == b"x" * 1000
    with pytest.raises(files.FileError, match="larger than"):
        files.read_limited(f, 999)


def test_a_tokenizer_file_past_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A sparse file of 300 MB named as --tokenizer: refused by its size (nothing read)."""
    big = tmp_path / "tokenizer.json"
    with open(big, "wb") as fh:
        fh.truncate(300 * 2**20)
    from glassformer.tokenizer import base

    monkeypatch.setattr(base, "FILE_LIMIT", 256 * 2**20)
    tracemalloc.start()
    try:
        with pytest.raises(GlassformerError, match="larger than 256 MB"):
            nanogpt.gpt2_tokenizer(big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak


def _prepare_py_chars(path: Path) -> list[str]:
    """nanoGPT's data/shakespeare_char/prepare.py: the sorted set of the text read whole."""
    with open(path) as f:
        data = f.read()
    return sorted(list(set(data)))


def test_vocab_from_is_streamed_and_is_prepare_pys_vocabulary(tmp_path, monkeypatch):
    """Oracle: prepare.py's reading (text mode: CRLF and lone CR read as LF). Read 7 characters
    at a time, so that a CRLF and multi-byte characters fall across the reads."""
    text = "héllo\r\nwörld\r\n€ 𝄞 tab\there\rend\r\n" * 3 + "ünïcode\r"
    f = tmp_path / "input.txt"
    f.write_bytes(text.encode("utf-8"))
    chars = _prepare_py_chars(f)
    assert "\r" not in chars and "\n" in chars and "𝄞" in chars
    monkeypatch.setattr(nanogpt, "_CHUNK", 7)
    tok = nanogpt.vocab_from_text(f, len(chars))
    assert tok.vocab == chars
    with pytest.raises(CheckpointError, match=f"has {len(chars)} distinct characters"):
        nanogpt.vocab_from_text(f, len(chars) + 1)


def test_vocab_from_a_text_of_hundreds_of_megabytes_holds_one_chunk(tmp_path):
    """A 300 MB text (a sparse file: NUL characters) is read in chunks: the peak of memory
    allocated stays a few chunks, not the file (the old whole read held 300 MB, then its str)."""
    big = tmp_path / "input.txt"
    with open(big, "wb") as fh:
        fh.truncate(300 * 2**20)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="has 1 distinct characters"):
            nanogpt.vocab_from_text(big, 65)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak


# -- the server: a body that does not come --------------------------------------------------------

BOUND = 1.0  # the body deadline of the test's server, in seconds
MARGIN = 2.0  # what a busy machine may add to it before the connection is seen closed
BODY = b'{"model": "dec", "text": "to be"}'


def head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
             *headers]  # fmt: skip
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Body:
    family: str
    name: str
    parts: list  # bytes sent one after another, `gap` seconds apart
    status: int  # 408: closed at the deadline; 200: answered
    gap: float = 0.0
    id: str = field(default="")


SLOW = [BODY[i : i + 1] for i in range(len(BODY))]  # one byte at a time
STEADY = [BODY[i : i + 9] for i in range(0, len(BODY), 9)]  # 4 pieces
BODIES = [
    Body("server-body", "half a body", [head("/api/run", "Content-Length: 1000") + BODY[:10]], 408),
    Body("server-body", "a Content-Length and no body",
         [head("/api/run", "Content-Length: 50")], 408),
    Body("server-body", "all but the last byte",
         [head("/api/run", f"Content-Length: {len(BODY)}") + BODY[:-1]], 408),
    Body("server-body", "half a report", [head("/api/report", "Content-Length: 999") + b"{"], 408),
    Body("server-body", "half a trace", [head("/api/trace", "Content-Length: 999") + b'{"m'], 408),
    Body("server-body", "half a generation",
         [head("/api/generate", "Content-Length: 999") + b'{"model"'], 408),
    Body("server-body", "trickled too slowly",
         [head("/api/run", f"Content-Length: {len(BODY)}"), *SLOW], 408, gap=0.15),
    Body("server-body", "chunks without end",
         [head("/api/run", "Transfer-Encoding: chunked") + b"3\r\n{\"m\r\n"], 408),
    Body("server-body", "chunks that keep coming", [head("/api/run", "Transfer-Encoding: chunked"),
         *[b"1\r\n \r\n"] * 20], 408, gap=0.15),
    Body("server-body", "Expect: 100-continue, then nothing",
         [head("/api/run", "Content-Length: 40", "Expect: 100-continue")], 408),
    Body("server-body", "a slow but steady body inside the bound",
         [head("/api/run", f"Content-Length: {len(BODY)}"), *STEADY], 200, gap=0.12),
    Body("server-body", "chunks inside the bound",
         [head("/api/run", "Transfer-Encoding: chunked"), *[b"%x\r\n%s\r\n" % (len(p), p)
          for p in STEADY], b"0\r\n\r\n"], 200, gap=0.12),
]  # fmt: skip
CASES += BODIES


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def server(models):
    """A real uvicorn server on a free port (the explorer over dec), its deadlines BOUND;
    the log's warnings collected (attached once uvicorn has configured its loggers)."""
    explorer = Explorer(Registry([models / "dec"], walkthroughs=False))
    with serving(explorer, body_timeout=BOUND, header_timeout=BOUND) as url:
        warnings = Warnings()
        log = logging.getLogger("uvicorn.error")
        log.addHandler(warnings)
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        try:
            yield port, explorer, warnings
        finally:
            log.removeHandler(warnings)


def exchange(port: int, parts, gap: float = 0.0, limit: float = BOUND + MARGIN + 5):
    """Send `parts` (`gap` seconds apart, from a thread) and read until the server closes:
    (seconds from the first byte sent to the close, everything read). A connection still open
    after `limit` seconds fails the test."""
    c = socket.create_connection(("127.0.0.1", port), timeout=limit)
    start = time.monotonic()

    def send():
        for n, part in enumerate(parts):
            if n and gap:
                time.sleep(gap)
            try:
                c.sendall(part)
            except OSError:  # closed by the server meanwhile: the point of the test
                return

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    answer = b""
    try:
        while chunk := c.recv(65536):
            answer += chunk
            if answer.startswith(b"HTTP/1.1 200") and _complete(answer):
                break
    except TimeoutError:
        pytest.fail(f"the connection is still open after {limit} s; read {answer[:200]!r}")
    except ConnectionResetError:
        pass
    finally:
        elapsed = time.monotonic() - start
        c.close()
        sender.join(5)
    return elapsed, answer


def _complete(answer: bytes) -> bool:
    header, _, body = answer.partition(b"\r\n\r\n")
    for line in header.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status_of(answer: bytes) -> int:
    """The status of the final answer (after an interim 100 Continue)."""
    answer = answer.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n")
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.parametrize("row", BODIES, ids=[b.name for b in BODIES])
def test_a_body_that_does_not_come_is_closed_at_the_deadline(server, row):
    port, _, warnings = server
    before = len(warnings.lines)
    elapsed, answer = exchange(port, row.parts, row.gap)
    assert status_of(answer) == row.status, answer[:300]
    answer = answer.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    if row.status == 200:
        assert elapsed < BOUND + MARGIN and body["model"] == "dec", (elapsed, body)
        assert warnings.lines[before:] == []
        return
    assert BOUND * 0.9 <= elapsed <= BOUND + MARGIN, elapsed
    assert b"\r\nconnection: close\r\n" in answer.lower()
    assert body == {"error": f"the request's body did not arrive within {BOUND:g} s of its "
                             "headers; send the whole body at once"}  # fmt: skip
    time.sleep(0.05)
    new = warnings.lines[before:]
    path = row.parts[0].split(b" ")[1].decode()
    assert len(new) == 1 and f"POST {path} from 127.0.0.1:" in new[0], new
    assert f"did not arrive within {BOUND:g} s; closed with 408 Request Timeout" in new[0]


GET = b"GET /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
HEAD = head("/api/run", f"Content-Length: {len(BODY)}")


@dataclass
class Head:
    family: str
    name: str
    parts: list  # bytes sent one after another, `gap` seconds apart
    answers: list  # the statuses answered, in order (408 last: closed at the header deadline)
    said: bool  # one line in the log (a connection that sent nothing is closed without a word)
    gap: float = 0.0
    late: int = 0  # the part that begins the request left unfinished (its deadline's start)
    id: str = field(default="")


HEADS = [
    Head("server-body", "headers cut off", [HEAD[:40]], [408], True),
    Head("server-body", "a request line only", [b"GET /api/models HTTP/1.1\r\n"], [408], True),
    Head("server-body", "headers trickled too slowly", [HEAD[i : i + 4] for i in range(0, 80, 4)],
         [408], True, gap=0.15),
    Head("server-body", "a connection that sends nothing", [], [], False),
    Head("server-body", "a second request's headers cut off", [GET, GET[:30]], [200, 408], True,
         gap=0.3, late=1),
    Head("server-body", "headers sent in pieces inside the bound",
         [HEAD[:30], HEAD[30:60], HEAD[60:] + BODY], [200], False, gap=0.12),
]  # fmt: skip
CASES += HEADS


def statuses(answer: bytes) -> list[int]:
    """The status of every answer read on one connection, in order."""
    return [int(s) for s in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


@pytest.mark.parametrize("row", HEADS, ids=[h.name for h in HEADS])
def test_headers_that_do_not_come_are_closed_at_the_deadline(server, row):
    """Raw bytes on one connection (sent from a thread), read until the server closes it: the
    answers expected; closed within [BOUND, BOUND + MARGIN] of the first byte of the request left
    unfinished (or of the opening); one log line, or none."""
    port, _, warnings = server
    before = len(warnings.lines)
    c = socket.create_connection(("127.0.0.1", port), timeout=BOUND + MARGIN + 5)
    sent = [time.monotonic()]  # the opening, then each part

    def send():
        for n, part in enumerate(row.parts):
            if n and row.gap:
                time.sleep(row.gap)
            try:
                c.sendall(part)
            except OSError:  # closed by the server meanwhile: the point of the test
                return
            sent.append(time.monotonic())

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    answer = b""
    try:
        if row.answers == [200]:  # answered in full: the server keeps the connection (keep-alive)
            while not (answer.startswith(b"HTTP/1.1 200") and _complete(answer)):
                answer += c.recv(65536)
        else:
            while chunk := c.recv(65536):
                answer += chunk
    except TimeoutError:
        pytest.fail(f"the connection is still open after {BOUND + MARGIN + 5} s: {answer[:200]!r}")
    finally:
        closed = time.monotonic()
        c.close()
        sender.join(5)
    assert statuses(answer) == row.answers, answer[:300]
    if row.answers[-1:] == [408] or not row.answers:
        elapsed = closed - sent[row.late + 1 if row.parts else 0]
        assert BOUND * 0.9 <= elapsed <= BOUND + MARGIN, elapsed
    if 408 in row.answers:
        assert b"\r\nconnection: close\r\n" in answer.lower()
        said = f"the request's headers did not arrive within {BOUND:g} s"
        assert json.loads(answer.rpartition(b"\r\n\r\n")[2]) == {"error": said}
    time.sleep(0.05)
    new = warnings.lines[before:]
    assert len(new) == row.said, new
    if row.said:
        assert "from 127.0.0.1:" in new[0], new
        assert f"its headers did not arrive within {BOUND:g} s; closed with 408" in new[0], new


def test_other_clients_are_answered_while_bodies_hang(server):
    """Twenty half-open bodies: a GET and a whole POST are answered meanwhile, well inside the
    bound; then every one of the twenty is answered 408 and closed."""
    port, _, _ = server
    hanging = []
    for _ in range(20):
        c = socket.create_connection(("127.0.0.1", port), timeout=BOUND + MARGIN + 5)
        c.sendall(head("/api/run", "Content-Length: 500") + b'{"model": ')
        hanging.append(c)
    start = time.monotonic()
    elapsed, answer = exchange(port, [head("/api/run", f"Content-Length: {len(BODY)}") + BODY])
    assert status_of(answer) == 200 and time.monotonic() - start < BOUND, answer[:200]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(b"GET /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        got = b""
        while chunk := c.recv(65536):
            got += chunk
    assert status_of(got) == 200 and time.monotonic() - start < BOUND, got[:200]
    for c in hanging:
        got = b""
        while chunk := c.recv(65536):
            got += chunk
        c.close()
        assert status_of(got) == 408, got[:200]
    assert time.monotonic() - start <= BOUND + MARGIN


def test_the_deadline_covers_the_body_not_the_work(server, monkeypatch):
    """A run that takes longer than the bound once its body is in: answered 200, not cut."""
    port, explorer, warnings = server
    summary = explorer.summary

    def slow(body):
        time.sleep(BOUND * 1.5)
        return summary(body)

    monkeypatch.setattr(explorer, "summary", slow)
    before = len(warnings.lines)
    elapsed, answer = exchange(port, [head("/api/run", f"Content-Length: {len(BODY)}") + BODY])
    assert status_of(answer) == 200 and elapsed >= BOUND * 1.5, answer[:300]
    assert warnings.lines[before:] == []


def test_a_streamed_trace_slower_than_the_bound_arrives_whole(server, monkeypatch):
    """The trace is streamed while Starlette listens for a disconnect on the same `receive`:
    past the body, the deadline must not cut it. Oracle: the whole JSON parses and has the
    steps of the trace made without delay."""
    port, explorer, warnings = server
    trace_json = explorer.trace_json
    whole = json.loads("".join(trace_json(json.loads(BODY))))

    def slow(body):
        chunks = trace_json(body)
        yield next(chunks)
        time.sleep(BOUND * 1.5)
        yield from chunks

    monkeypatch.setattr(explorer, "trace_json", slow)
    before = len(warnings.lines)
    request = head("/api/trace", "Connection: close", f"Content-Length: {len(BODY)}") + BODY
    elapsed, answer = exchange(port, [request])
    assert status_of(answer) == 200 and elapsed >= BOUND * 1.5, answer[:300]
    header, _, body = answer.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in header.lower()
    got = json.loads(_dechunk(body))
    assert len(got["steps"]) == len(whole["steps"]) and got["labels"] == whole["labels"]
    assert warnings.lines[before:] == []


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, body = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out, body = out + body[:n], body[n + 2 :]
    return out


def test_glassformer_serve_closes_a_half_body_at_its_default_bound_and_logs_one_line(models):
    """`glassformer serve` itself, BODY_TIMEOUT (10 s): one half body is answered 408 and closed
    between BODY_TIMEOUT and BODY_TIMEOUT + MARGIN; a whole request meanwhile is answered; the
    log (stderr) holds exactly the one line about it, no error, no traceback."""
    p = subprocess.Popen(
        [sys.executable, "-m", "glassformer.cli", "serve", str(models / "dec"), "--port", "0",
         "--no-walkthroughs"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
    )  # fmt: skip
    try:
        line = p.stdout.readline()
        assert line.startswith("glassformer explorer: http://127.0.0.1:"), line
        port = int(line.split()[2].rstrip("/").rsplit(":", 1)[1])
        done = {}
        half = threading.Thread(target=lambda: done.update(r=exchange(
            port, [head("/api/run", "Content-Length: 100") + b'{"mo'],
            limit=BODY_TIMEOUT + MARGIN + 5)), daemon=True)  # fmt: skip
        half.start()
        time.sleep(0.5)
        elapsed, answer = exchange(port, [head("/api/run", "Connection: close",
                                               f"Content-Length: {len(BODY)}") + BODY])  # fmt: skip
        assert status_of(answer) == 200, answer[:200]
        half.join(BODY_TIMEOUT + MARGIN + 10)
        elapsed, answer = done["r"]
        assert status_of(answer) == 408, answer[:200]
        assert BODY_TIMEOUT * 0.9 <= elapsed <= BODY_TIMEOUT + MARGIN, elapsed
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert "Traceback" not in err, err[-2000:]
    logged = [line for line in err.splitlines() if "glassformer explorer:" in line]
    assert len(logged) == 1 and "POST /api/run from 127.0.0.1:" in logged[0], err
    assert f"within {BODY_TIMEOUT:g} s; closed with 408 Request Timeout" in logged[0]
    assert "ERROR" not in err, err


def test_the_table_has_its_families():
    families = {c.family for c in CASES}
    assert families == {SPECIAL, "server-body"}
    assert sum(c.family == SPECIAL for c in CASES) >= 10
    assert sum(c.family == "server-body" for c in CASES) >= 10
