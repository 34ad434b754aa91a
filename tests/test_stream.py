"""Streaming (issue 36, point 6): `Model.stream` gives what `generate` gives, a token at a time,
and `glassformer generate` prints it as it is made.

Oracles, all invariants against the whole generation: stream == generate (the stream's prompt
and pieces spell `generate`'s output, its token ids are `Runtime.decoded`'s, its notes the same)
for greedy, sampling with a seed and beam search, on the shipped models (char-lm: a character
decoder; en-es: an encoder-decoder with SentencePiece-style BPE, "▁" and byte fallback) and on
random decoders whose pieces depend on their neighbours (the byte-level BPE of tests/data, where
a token may end inside a character, and a word tokenizer, which spaces words but not
punctuation); after each token, what was given is decode(ids so far) less the prompt's text
whenever that is whole text, and the pieces come as the tokens are chosen (k pieces: k model
calls); and a real process of the command line, interrupted while it prints: its output is
`generate`'s for the number of tokens its one stderr line names.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from table import ENV, ROOT

import glassformer
from glassformer import preset, weights
from glassformer.cli import main
from glassformer.cli.flags import said
from glassformer.decoding import Decoding
from glassformer.model import Model
from glassformer.tokenizer import WordTokenizer, from_json

pytest.importorskip("torch")

WORDS = "the cat sat on the mat ( and the dog , the bird ) sat . who sat ? the cat !"
TEXTS = {"char": "To be", "en-es": "Tokyo 東京 is big.", "bpe": "Hello wörld", "word": "the cat"}
STRATEGIES = {
    "greedy": {},
    "sample": {"temperature": 1.5, "seed": 3},
    "beam": {"beam_width": 3},
}


@pytest.fixture(scope="module")
def models() -> dict[str, Model]:
    bpe_json = gzip.decompress((ROOT / "tests/data/bpe-tokenizer-2026-11-29.json.gz").read_bytes())
    bpe = from_json(bpe_json.decode("utf-8"))
    word = WordTokenizer.train([WORDS])
    return {
        "char": glassformer.load(ROOT / "models" / "char-lm"),
        "en-es": glassformer.load(ROOT / "models" / "en-es"),
        "bpe": _random(bpe, "bpe"),
        "word": _random(word, "word"),
    }


def _random(tok, name: str) -> Model:
    cfg = preset("tiny").override(f"vocab_size={tok.vocab_size}", "max_len=32")
    return Model(cfg, weights.init(cfg, seed=0), tok, name=name)


def _decoded(m: Model, text: str, options: dict):
    """`Runtime.decoded` on the text as `generate` reads it: the whole generation's ids."""
    how, rt = (
        Decoding.settle(None, options.get("max_new_tokens"), **_sans_limit(options)),
        m.runtime,
    )
    if m.cfg.arch == "encoder-decoder":
        return rt.decoded(rt.bos(), rt.encode(text), how, quiet=True), 1
    return rt.decoded(rt.encode(text, window=True), None, how, window=True, quiet=True), 0


def _sans_limit(options: dict) -> dict:
    return {k: v for k, v in options.items() if k != "max_new_tokens"}


def _whole_so_far(m: Model, start: list[int], new: list[int]) -> list[str]:
    """After each new token, the text a stream has given: the decoding of start + new[:j+1] for
    the latest j whose decoding is whole text (a character cut at its end decodes to U+FFFD; a
    byte-fallback run with one cut turns every byte of it into U+FFFD), else of start."""
    shown, out = m.decode(start), []
    for k in range(len(new)):
        text = m.decode(start + new[: k + 1])
        shown = shown if text.endswith("\ufffd") else text
        out.append(shown)
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kind", TEXTS)
def test_the_stream_is_generate_a_token_at_a_time(models, kind, strategy):
    m, text = models[kind], TEXTS[kind]
    options = {"max_new_tokens": 24, **STRATEGIES[strategy]}
    m.notes.clear()
    s = m.stream(text, **options)
    assert s.result is None and m.notes == []
    pieces = list(s)
    notes, m.notes[:] = list(m.notes), []
    want = m.generate(text, **options)
    assert s.prompt + "".join(pieces) == want
    assert notes == m.notes and notes[-1].startswith("stopped")  # the notes once, the same
    whole, n_bos = _decoded(m, text, options)
    n_prompt = len(whole.ids) - len(s.ids) - n_bos
    assert s.result.ids == whole.ids and s.ids == whole.ids[n_prompt + n_bos :]
    assert s.n_shown == len(s.ids)
    if strategy == "beam":  # its tokens are known at its end: one piece, the whole output
        assert pieces == ([want[len(s.prompt) :]] if want[len(s.prompt) :] else [])
        return
    # one piece per token, and one more only for text still held at the end
    assert len(pieces) in (len(s.ids), len(s.ids) + 1)
    start = s.result.ids[n_bos : n_prompt + n_bos]  # a decoder's prompt; nothing after BOS
    for k, shown in enumerate(_whole_so_far(m, start, s.ids)):
        assert "".join(pieces[: k + 1]) == shown[len(s.prompt) :], (k, pieces[: k + 1], shown)
    if kind == "char":  # a character a token: each piece is its token's character
        assert pieces[: len(s.ids)] == [m.decode([t]) for t in s.ids]


def _gpt2_bytes() -> dict[int, str]:
    """GPT-2's bytes_to_unicode: each byte's printable character in a byte-level vocabulary
    (printable Latin-1 bytes stand for themselves, the other 68 from U+0100 on)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    shifted = iter(range(256, 512))
    return {b: chr(b) if b in kept else chr(next(shifted)) for b in range(256)}


def _scripted(m: Model, script: list[int]):
    """A step maker for `Runtime.step` whose decoding chooses `script`, token by token (greedy)."""

    def make(src=None, *, prompt_len=1, **_):
        def step(ids):
            z = np.full(m.cfg.vocab_size, -10.0)
            z[script[len(ids) - prompt_len]] = 10.0
            return z

        return step

    return make


def test_pieces_wait_for_a_whole_character(models):
    """A character cut across tokens gives "" until its last byte, then comes whole: the
    byte-level decoder made to write "wörld 東京 🙂!" one byte a token gives, per byte, "" or
    the character it completes; en-es made to write its own tokens of "東京 🙂" (byte fallback)
    gives, after each token, the text decoded so far less a character still cut."""
    bpe, es = models["bpe"], models["en-es"]
    word = " wörld 東京 🙂!"
    table = _gpt2_bytes()
    script = [bpe.tokenizer.vocab.index(table[b]) for b in word.encode()] + [bpe.tokenizer.eos_id]
    want = [p for ch in word for p in [""] * (len(ch.encode()) - 1) + [ch]] + [""]
    es_script = es.tokenizer.encode("Tokyo 東京 🙂") + [es.tokenizer.eos_id]
    for m, text, script_ in ((bpe, "Hello", script), (es, "Tokyo", es_script)):
        m.runtime.step = _scripted(m, script_)
        try:
            s = m.stream(text, max_new_tokens=len(script_))
            pieces = list(s)
            out = m.generate(text, max_new_tokens=len(script_))
        finally:
            del m.runtime.step
        assert s.ids == script_ and s.prompt + "".join(pieces) == out
        if m is bpe:
            assert pieces == want and out == "Hello" + word
            continue
        assert out == "Tokyo 東京 🙂"
        shown = _whole_so_far(m, [], script_)
        assert all("".join(pieces[: k + 1]) == t for k, t in enumerate(shown)), (pieces, shown)
        assert sum(p == "" for p in pieces[:-1]) >= 4  # the cut characters of 東, 京 and 🙂


def test_the_pieces_come_as_the_tokens_are_chosen(models):
    """k pieces taken: k model calls made, k tokens chosen, no note yet (the stream is lazy);
    the notes come once, at the end."""
    m = models["char"]
    calls = []
    step = m.runtime.step

    def counted(*args, **kwargs):
        fn = step(*args, **kwargs)

        def one(ids):
            calls.append(len(ids))
            return fn(ids)

        return one

    m.runtime.step = counted
    try:
        m.notes.clear()
        s = m.stream("To be", max_new_tokens=12)
        assert calls == []
        for k in range(1, 6):
            next(s)
            assert len(calls) == k and len(s.ids) == k and m.notes == []
        rest = list(s)
    finally:
        del m.runtime.step
    assert len(rest) == 7 and len(calls) == 12
    assert m.notes == ["stopped after max_new_tokens=12"]  # Python's words


@pytest.mark.parametrize(
    "kind, argv, options",
    [
        ("char", ["--max-new-tokens", "30"], {"max_new_tokens": 30}),
        ("char", ["--max-new-tokens", "20", "--temperature", "0.9", "--seed", "4"],
         {"max_new_tokens": 20, "temperature": 0.9, "seed": 4}),
        ("char", ["--max-new-tokens", "6", "--strategy", "beam"],
         {"max_new_tokens": 6, "strategy": "beam"}),
        ("en-es", ["--temperature", "1.5", "--seed", "1", "--max-new-tokens", "20"],
         {"max_new_tokens": 20, "temperature": 1.5, "seed": 1}),
    ],
)  # fmt: skip
def test_the_command_prints_what_generate_returns(models, kind, argv, options, capsys):
    """The streamed bytes are `print(m.generate(...))`'s, the notes after them."""
    m, text = models[kind], TEXTS[kind]
    path = ROOT / "models" / ("char-lm" if kind == "char" else "en-es")
    assert main(["generate", str(path), text, *argv]) == 0
    out, err = capsys.readouterr()
    m.notes.clear()
    assert out == m.generate(text, **options) + "\n"
    assert err == "".join(f"glassformer: note: {said(n)}\n" for n in m.notes)  # the CLI's words


# -- the command line, interrupted while it prints ----------------------------------------------


class Reading:
    """A process's stdout and stderr, read as they come (bytes)."""

    def __init__(self, proc: subprocess.Popen):
        self.out, self.err = bytearray(), bytearray()
        self.readers = [
            threading.Thread(target=self._read, args=(f, buf), daemon=True)
            for f, buf in ((proc.stdout, self.out), (proc.stderr, self.err))
        ]
        for t in self.readers:
            t.start()

    @staticmethod
    def _read(f, buf: bytearray) -> None:
        while chunk := os.read(f.fileno(), 4096):
            buf += chunk

    def join(self) -> None:
        for t in self.readers:
            t.join(30)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_keeps_what_was_printed_and_says_how_many_tokens(models, signum):
    """`generate ... --max-new-tokens 100000` prints as it goes (flushed: the first characters
    arrive long before a pipe's buffer would fill); a stop keeps them, ends the line, and the
    one stderr line names the number of new tokens: generate's output for that many tokens is
    exactly what was printed."""
    argv = ["generate", str(ROOT / "models" / "char-lm"), "To be", "--max-new-tokens", "100000"]
    env = {k: v for k, v in ENV.items() if k != "PYTHONUNBUFFERED"}  # a pipe buffers, as usual
    proc = subprocess.Popen([sys.executable, "-m", "glassformer.cli", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    got = Reading(proc)
    try:
        end = time.monotonic() + 240
        while len(got.out) < len("To be") + 3 and time.monotonic() < end:
            assert proc.poll() is None, f"ended early: {bytes(got.err)!r}"
            time.sleep(0.01)
        assert len(got.out) >= len("To be") + 3, f"nothing printed in 240 s: {bytes(got.out)!r}"
        proc.send_signal(signum)
        code = proc.wait(60)
    finally:
        proc.kill()
    got.join()
    out, err = got.out.decode("utf-8"), got.err.decode("utf-8")
    assert code == 128 + signum, err
    assert out.startswith("To be") and out.endswith("\n"), out
    new = out[len("To be") : -1]
    assert len(new) > 0
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("glassformer: interrupted after "), err
    n = int(lines[0].split()[3])
    assert lines[0] == f"glassformer: interrupted after {n} new token{'s' * (n != 1)}"
    assert models["char"].generate("To be", max_new_tokens=n) == "To be" + new
