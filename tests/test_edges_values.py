"""Round two, values the command line accepts (issue 23, point 4) and what a new user met.

Families: values (every value is handled or refused before work: text that is not UTF-8, a
closed stdout, positions and step counts out of range, options that would do nothing, Ctrl-C
while the program is still importing), newuser (the HTML report's chosen token, the sliding
window's note, --ablate's misspelt names). The table rows run through tests/table.py's
`check_case`; the rows that need a real process (closed stdout, SIGINT) or a shipped model are
tuples `(family, ...)` below, and `CASES` holds them all.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from table import ROOT, Case, build_models, case_id, check_case  # noqa: E402

CASES: list = []


def add(family, argv, message, **kw):
    CASES.append(Case(family, argv, message, **kw))


BAD = "\udcff"  # what Python makes of the byte 0xFF in an argument (PEP 383)
E9 = "caf\udce9"  # Latin-1 "café"

# -- text that is not UTF-8: refused at the edge, naming the argument ------------------------------
for argv, what in [
    (["explain", "{tr}", BAD], "the text"),
    (["explain", "{tr}", E9], "the text"),
    (["explain", "{dec}", E9], "the text"),
    (["explain", "{hello}", BAD], "the text"),
    (["explain", "{enc}", BAD], "the text"),
    (["explain", "{tr}", "Hello.", "--target", E9], "--target"),
    (["explain", "{lm}", "to be", "--patch-from", "to " + BAD], "--patch-from"),
    (["lens", "{tr}", BAD], "the text"),
    (["lens", "{lm}", "to " + BAD], "the text"),
    (["lens", "{tr}", "Hello.", "--target", BAD], "--target"),
    (["lens", "{lm}", "to be", "--dla", BAD], "--dla"),
    (["lens", "{lm}", "to be", "--dla", "e", "--versus", BAD], "--versus"),
    (["attribute", "{tr}", E9], "the text"),
    (["attribute", "{lm}", BAD], "the text"),
    (["attribute", "{tr}", "Hello.", "--target", "x" + BAD], "--target"),
    (["generate", "{lm}", BAD], "the text"),
    (["generate", "{tr}", E9], "the text"),
    (["translate", "{tr}", BAD], "the text"),
    (["translate", "{tr}", "Hello.", E9], "the text"),
    (["classify", "{enc}", BAD], "the text"),
    (["embed", "{enc}", E9], "the text"),
]:
    add("values", argv, f"{what} is not valid UTF-8")
add("values", ["lens", "{lm}", BAD], "byte 0xFF at character 0")
add("values", ["explain", "{tr}", E9], "byte 0xE9 at character 3")

# -- lens: positions and options ------------------------------------------------------------------
LENS = ["lens", "{lm}", "to be"]  # 5 characters
for value in ["99", "5", "-6", "-99", str(10**30)]:
    add("values", [*LENS, "--dla", "e", "--position", value], "a position is in 0..4 (or -5..-1")
for value in ["4", "-5", "0", "-1"]:
    add("values", [*LENS, "--dla", "e", "--position", value], "sum of the parts", code=0)
add("values", [*LENS, "--position", "abc"], "invalid int value")
add("values", [*LENS, "--position", "2"], "--position chooses the position --dla explains")
add("values", [*LENS, "--versus", "e"], "--versus subtracts a token's logit")
add("values", [*LENS, "--dla", ""], "--dla is empty")
add("values", [*LENS, "--dla", "e", "--versus", ""], "--versus is empty")
add("values", [*LENS, "--target", "x"], "--target is the decoder text of an encoder-decoder")
add("values", ["lens", "{tr}", "Hello.", "--target", ""], "--target is empty")
add("values", ["lens", "{tr}", "Hello.", "--target", "Hola " * 12], "--target has")
add("values", [*LENS, "--k", "0"], "--k must be >= 1")
add("values", [*LENS, "--k", str(10**12)], "logit lens", code=0)  # k is cut to the vocabulary

# -- attribute: step counts, and options that would do nothing ------------------------------------
ATT = ["attribute", "{lm}", "to be"]
for value in [str(10**12), "1025", "100000", str(2**63)]:
    add("values", [*ATT, "--steps", value], "--steps must be in [1, 1024]")
for value in ["0", "-1"]:
    add("values", [*ATT, "--steps", value], "--steps must be in [1, 1024]")
add("values", [*ATT, "--steps", "nan"], "invalid int value")
add("values", [*ATT, "--steps", "1024", "--max-new-tokens", "1"], "error", code=0)
add("values", [*ATT, "--steps", "4", "--method", "gradient_x_input"], "--steps sets integrated")
add("values", ["attribute", "{tr}", "Hello.", "--max-new-tokens", "3"], "--max-new-tokens sets")
add("values", [*ATT, "--target", "x"], "--target is the decoder text of an encoder-decoder")
add("values", [*ATT, "--max-new-tokens", str(10**20)], "gradients", code=0)
add("values", [*ATT, "--max-new-tokens", "0"], "at least 1")

# -- explain: empty and extreme values ------------------------------------------------------------
EXPL = ["explain", "{lm}", "to be"]
add("values", [*EXPL, "--only", ""], "--only '' keeps every step")
add("values", [*EXPL, "--patch-from", ""], "--patch-from is empty")
add("values", [*EXPL, "--patch-from", "   "], "--patch-from is empty")
add("values", [*EXPL, "--find-nan", "--ablate", "decoder.0.ffn"], "--ablate does nothing")
add("values", [*EXPL, "--find-nan", "--patch-from", "to bx"], "--patch-from does nothing")
add("values", [*EXPL, "--max-new-tokens", str(10**24)], "max_len 16", code=0)
add("values", [*EXPL, "--heads", str(10**26)], "no head")
add("values", [*EXPL, "--layers", "-1"], "give numbers counted from 0")
add("values", [*EXPL, "--ablate", "decoder.99999999999999999999.ffn"], "the decoder has 4 layers")
add("values", [*EXPL, "--ablate", "decoder.0.self_attn.head" + "9" * 24], "2 heads per layer")

# -- newuser: --ablate with a misspelt name gets the nearest names, in the CLI's words -----------
for name, near in [
    ("decoder.0.self_atn", "did you mean decoder.0.self_attn"),
    ("decoder.0.self_attn.hed1", "did you mean decoder.0.self_attn.head1"),
    ("decoder.1.fn", "did you mean decoder.1.ffn"),
    ("Decoder.0.ffn", "did you mean decoder.0.ffn"),
    ("zzz", "a head is like decoder.3.self_attn.head1"),
    ("encoder.0.ffn", "this decoder model has no encoder"),
    ("encoder.0.self_attn.head0", "this decoder model has no encoder"),
]:
    add("newuser", [*EXPL, "--ablate", name], near)
add("newuser", ["explain", "{tr}", "Hello.", "--ablate", "decoder.0.cros_attn"], "cross_attn")
add("newuser", ["explain", "{tr}", "Hello.", "--ablate", "encoder.0.ffx"], "encoder.0.ffn")
for argv in ([*EXPL, "--ablate", "decoder.0.self_atn"], [*EXPL, "--ablate", "zzz"]):
    CASES.append(Case("newuser", argv, "Trace.names()", code=-1))  # the Python hint is gone

# -- newuser: the sliding window's note says what happened ---------------------------------------
GEN = ["generate", "{lm}"]
add(
    "newuser",
    [*GEN, "to", "--max-new-tokens", "30"],
    "the prompt (2 tokens) + 30 new tokens",
    code=0,
)
add("newuser", [*GEN, "to", "--max-new-tokens", "30"], "--max-new-tokens 14 or less", code=0)
add("newuser", [*GEN, "to be or not to be, that is", "--max-new-tokens", "2"],
    "the text has 27 tokens, more than the model's context (max_len 16)", code=0)  # fmt: skip
add("newuser", [*GEN, "to be", "--strategy", "beam", "--max-new-tokens", "40"],
    "the prompt (5 tokens) + ", code=0)  # fmt: skip

TABLE = [c for c in CASES if isinstance(c, Case)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory)


@pytest.mark.parametrize("case", TABLE, ids=case_id)
def test_value_case(case, models, tmp_path, capsys):
    if case.code == -1:  # a message that must NOT appear
        from table import fill

        from glassformer.cli import main

        assert main(fill(case.argv, tmp_path, models)) == 2
        err = capsys.readouterr().err
        assert case.message not in err and "Traceback" not in err
        return
    check_case(case, models, tmp_path, capsys)


# -- a closed stdout: one line, exit 2, before any work -------------------------------------------

CLOSED = [
    ("values", ["walkthrough", "hello-world"]),
    ("values", ["explain", "{hello}", "Hello world"]),
    ("values", ["explain", "{hello}", "Hello world", "--html", "{tmp}/r.html"]),
    ("values", ["lens", "{lm}", "to be"]),
    ("values", ["init", "{tmp}/new"]),
    ("values", ["--version"]),
    ("values", []),
]
CASES += CLOSED

RUN = [sys.executable, "-m", "glassformer.cli"]


def _fill(argv, tmp, models):
    from table import fill

    return fill(argv, tmp, models)


@pytest.mark.parametrize("row", CLOSED, ids=lambda r: " ".join(r[1])[:40] or "bare")
def test_closed_stdout_is_one_line_and_exit_2(row, models, tmp_path):
    argv = _fill(row[1], tmp_path, models)
    r = subprocess.run([*RUN, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, cwd=ROOT, preexec_fn=lambda: os.close(1))  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith("glassformer: error: stdout is closed")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing was written


def test_stdout_open_for_reading_only_is_one_line(tmp_path):
    with open(os.devnull) as read_only:
        r = subprocess.run([*RUN, "walkthrough", "hello-world"], stdout=read_only,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "glassformer: error: cannot write to stdout (Bad file descriptor)"
    ]


PATHS = [("values", "walkthrough"), ("values", "lens")]
CASES += PATHS


@pytest.mark.parametrize("row", PATHS, ids=lambda r: r[1])
def test_a_path_in_bytes_that_are_not_utf8_prints_back_as_given(row, models, tmp_path):
    """A file name is bytes: one that is not UTF-8 is written and named back byte for byte,
    even where stdout is strict UTF-8."""
    name = os.fsdecode(b"r\xfe.json")
    where = tmp_path / name
    first = ["walkthrough", "hello-world"] if row[1] == "walkthrough" else [
        "lens", str(models / "lm"), "to be"]  # fmt: skip
    argv = [*first, "--json", str(where)]
    env = dict(os.environ, PYTHONIOENCODING="utf-8:strict")
    r = subprocess.run([*RUN, *argv], capture_output=True, cwd=ROOT, env=env)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    assert os.fsencode(str(where)) in r.stdout
    assert json.loads(where.read_text())


# -- Ctrl-C while the program is still importing --------------------------------------------------

# The child is the console script (`from glassformer.cli import main; sys.exit(main())`), with a
# finder that sends SIGINT to the process when MODULE starts importing (or, with a delay, from a
# thread, so that it lands while a C extension initialises).
CHILD = """
import os, signal, sys, threading, time
module, delay = sys.argv[1], float(sys.argv[2])

class Trigger:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            if delay:
                threading.Thread(target=lambda: (time.sleep(delay),
                                 os.kill(os.getpid(), signal.SIGINT))).start()
            else:
                os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Trigger())
sys.argv = ["glassformer", *sys.argv[3:]]
from glassformer.cli import main
sys.exit(main())
"""

INTERRUPTS = [
    ("values", "numpy", 0.0),  # glassformer/__init__'s imports
    ("values", "glassformer.cli.common", 0.0),  # the command line's own imports
    ("values", "torch", 0.0),  # inside the command, before run()'s work
    ("values", "torch._C", 0.05),  # while PyTorch's C++ initialises
    ("values", "torch.nn", 0.0),
]
CASES += INTERRUPTS


def _interrupted(r) -> None:
    assert "Traceback" not in r.stderr and "terminate called" not in r.stderr, r.stderr[-3000:]
    # 130, or the end by SIGINT that Python gives an uncaught Ctrl-C (130 in a shell)
    assert r.returncode in (130, -signal.SIGINT), (r.returncode, r.stderr[-2000:])
    assert r.stderr.strip().splitlines() == ["glassformer: interrupted"], r.stderr


@pytest.mark.parametrize("row", INTERRUPTS, ids=lambda r: f"{r[1]}-{r[2]}")
def test_ctrl_c_while_importing_is_one_line(row, models):
    _, module, delay = row
    argv = ["attribute", str(models / "lm"), "to be", "--max-new-tokens", "1"]
    r = subprocess.run([sys.executable, "-c", CHILD, module, str(delay), *argv],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    _interrupted(r)


SWEEP = [("values", d) for d in (0.02, 0.1, 0.4, 1.0)]
# the console script's code, after a line that says the interpreter's own start-up is over
READY = "import sys; print('ready', file=sys.stderr, flush=True); " + (
    "from glassformer.cli import main; sys.exit(main())"
)
CASES += SWEEP


def test_ctrl_c_at_several_delays_after_start(models):
    """The console script's code, SIGINT at several delays after the interpreter's own start-up
    (the `site` module, before any glassformer code: a Ctrl-C there is Python's alone): one
    line and 130, or, if the command had finished, its normal output and 0."""
    argv = [sys.executable, "-c", READY, "attribute", str(models / "lm"), "to be",
            "--max-new-tokens", "1"]  # fmt: skip
    for _, delay in SWEEP:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT)  # fmt: skip
        assert p.stderr.readline() == "ready\n"
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        r = subprocess.CompletedProcess(argv, p.returncode, out, err)
        assert "Traceback" not in err, (delay, err[-3000:])
        if p.returncode == 0:
            assert "gradients" in out and "Traceback" not in err
        else:
            _interrupted(r)


def test_a_held_ctrl_c_is_raised_when_the_import_is_done():
    """The mechanism on its own, in a fresh interpreter: SIGINT inside an import is held until
    the import finishes (the module whole, in sys.modules), then raised as KeyboardInterrupt by
    the import statement itself, before any more work (interrupts.py; outside imports, at
    once)."""
    code = """
import os, signal, sys, types
from glassformer.interrupts import hold_during_imports
done = []
class Slow:
    def find_spec(self, name, path=None, target=None):
        if name == "slowmod":
            import importlib.util
            return importlib.util.spec_from_loader(name, self)
    def create_module(self, spec): return None
    def exec_module(self, module):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10000): pass
        done.append(1)
sys.meta_path.insert(0, Slow())
try:
    with hold_during_imports():
        try:
            import slowmod
        finally:
            print("imported", done, "slowmod" in sys.modules, flush=True)
        for _ in range(10**8): pass
        print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.split() == ["imported", "[1]", "True", "interrupted", "True"], (
        r.stdout + r.stderr
    )


# -- newuser: the HTML report's chosen token is the argmax id of its step -------------------------

HTML = [("newuser", "models/en-es", "Hello world."), ("newuser", "models/en-es", "Thank you.")]
CASES += HTML


@pytest.mark.parametrize("row", HTML, ids=lambda r: r[2])
def test_html_chosen_token_is_the_greedy_argmax(row, tmp_path):
    """README's own command: greedy picks the argmax, so every step's marked row must be rank 1
    (the byte-fallback `<0x2E>` reads "." too and comes first in the vocabulary)."""
    from glassformer import reference as R
    from glassformer.cli import main
    from glassformer.formats.loading import load

    out = tmp_path / "r.html"
    assert main(["explain", str(ROOT / row[1]), row[2], "--html", str(out)]) == 0
    page = out.read_text()
    marked = re.findall(r"<tr class=chosen><td>(\d+)</td>", page)
    cfg, params, tok = load(str(ROOT / row[1]))
    src = tok.encode(row[2])
    ids = [tok.bos_id]
    probs = []
    step = R.next_token_logits(params, cfg, src)
    while len(ids) < cfg.max_len:
        p = R.softmax(step(ids))
        probs.append(p)
        ids.append(int(np.argmax(p)))
        if ids[-1] == tok.eos_id:
            break
    assert marked == ["1"] * len(probs)
    assert any(tok.tokens([i])[0] == "." for i in ids)  # the case that went wrong


def test_decode_step_marks_by_id_not_by_text():
    from glassformer.explain.html_pieces import decode_step

    labels = ["a", ".", "b", "."]  # two tokens read "."
    probs = np.array([0.1, 0.0, 0.2, 0.7])
    by_id = decode_step("s", [], probs, labels, 3)
    assert re.findall(r"<tr class=chosen><td>(\d+)</td>", by_id) == ["1"]
    by_text = decode_step("s", [], probs, labels, ".")  # ambiguous text: no mark
    assert "class=chosen" not in by_text
    assert re.findall(r"<tr class=chosen><td>(\d+)</td>", decode_step("s", [], probs, labels,
                                                                      "b")) == ["2"]  # fmt: skip


CASES += [("newuser", "decode_step")]


# -- the library's own limits (the command line's are the table's) --------------------------------

LIB = [("values", 0), ("values", 1025), ("values", 10**12), ("values", 2.5), ("values", True)]
CASES += LIB


@pytest.mark.parametrize("row", LIB, ids=lambda r: repr(r[1]))
def test_input_attribution_refuses_step_counts_before_work(row, models):
    from glassformer.errors import GlassformerError
    from glassformer.formats import loading
    from glassformer.inspect import attribution
    from glassformer.torch_model import from_params

    cfg, params, _ = loading.load(str(models / "lm"))
    model = from_params(cfg, params, dtype=torch.float64).eval()
    with pytest.raises(GlassformerError, match=r"steps must be an integer in \[1, 1024\]"):
        attribution.input_attribution(model, [1, 2, 3], steps=row[1])


def test_input_attribution_refuses_a_batch_that_would_not_fit(models, monkeypatch):
    from glassformer.errors import GlassformerError
    from glassformer.formats import loading
    from glassformer.inspect import attribution
    from glassformer.torch_model import from_params

    cfg, params, _ = loading.load(str(models / "lm"))
    model = from_params(cfg, params, dtype=torch.float64).eval()
    monkeypatch.setattr(attribution, "MAX_BYTES", 10_000)
    with pytest.raises(GlassformerError, match="would hold about .* GiB; give at most"):
        attribution.input_attribution(model, [1, 2, 3], steps=64)


CASES += [("values", "memory")]
assert all(getattr(c, "family", None) or c[0] for c in CASES)
