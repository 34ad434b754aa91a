"""Round three, learner code in a process of its own (issue 35, point 4): family "learner".

Each row is a learner's file for exercise 6 (dropout: its cases cost milliseconds, so a row costs
what the check's process costs to start), checked by `glassformer exercises check` in this process
(`main`, as the console script runs it); the check's child process is real. A row asserts the exit
status (0 passed, 1 not passed: a wrong answer, or one line for however the learner's code ended;
2 a usage error), the exact verdict (the last lines of stdout), what the learner's code printed
(shown before it, cut), nothing on stderr, no traceback, and that nothing the learner's code did
reached this process (NumPy's settings, glassformer's modules, the reference values, sys.path).
The usage rows go through tests/table.py's `check_case`. Beside the table: a real Ctrl-C and
SIGTERM to the command stop it at once and take the child with it, a process the learner's code
starts is killed with it, and `--timeout` gives more time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import pytest
from table import ENV, Case, case_id, check_case

from glassformer import exercises as E
from glassformer.cli import main
from glassformer.exercises import checking, sandbox

TITLES = [c.title for c in E.exercise(6).cases()]
HEAD = "exercise 6, Dropout on the attention weights"
PASSED = f"{HEAD}: passed (6 cases)"
RIGHT = "    return A * keep / (1 - p)\n"
DEF = "def dropout(A, keep, p):\n"
LIMIT = "the check's time limit: a loop that never ends? (--timeout SECONDS allows more)"
WRONG = (
    f"{HEAD}: wrong in case 1 of 6 (the book's 6 × 6 matrix of ones, p = 0.5)\n"
    "  first wrong element: A[0, 0]: expected 2, got {got}"
)


@dataclass
class Learner:
    family: str
    id: str
    source: str  # the learner's file, ex06_dropout.py
    verdict: str  # the exact last line(s) of stdout: {file} the file, {at3} case 3's words
    code: int = 1
    argv: tuple = ()
    output: object = ""  # what their code printed, shown before the verdict (exact, or a test)
    whole: bool = True  # the verdict is all that follows the output (False: its first lines)


def at(k: int) -> str:
    return f"exercise 6, case {k} of 6: {TITLES[k - 1]}"


FILES: list[Learner] = []


def row(id, source, verdict, **kw):
    FILES.append(Learner("learner", id, source, verdict, **kw))


# -- ended abnormally: one line, never "passed" ---------------------------------------------------
row(
    "a loop that never ends",
    DEF + "    while True:\n        pass\n",
    f"{{file}}, line 2: stopped after 1 s, {LIMIT} ({{at1}})",
    argv=("--timeout", "1"),
)
row(
    "a loop at import",
    "import numpy as np\n\nwhile True:\n    pass\n",
    f"{{file}}, line 3: stopped after 0.5 s, {LIMIT} (while importing it)",
    argv=("--timeout", "0.5"),
)
row(
    "a sleep in case 3: all cases share the limit",
    "import time\n\n\n" + DEF + "    if A.shape == (5, 5):\n        time.sleep(30)\n" + RIGHT,
    f"{{file}}, line 6: stopped after 1 s, {LIMIT} ({{at3}})",
    argv=("--timeout", "1"),
)
row(
    "os._exit(0)",
    "import os\n\n\n" + DEF + "    os._exit(0)\n",
    "{file}, line 5: os._exit(0) ended the check's process - return the answer instead ({at1})",
)
row(
    "os._exit(0) in case 4, after three right answers",
    "import os\n\n\n" + DEF + "    if A.shape == (3, 5):\n        os._exit(0)\n" + RIGHT,
    "{file}, line 6: os._exit(0) ended the check's process - return the answer instead ({at4})",
)
row(
    "posix._exit(0): exit status 0 without the answers",
    "import posix\n\n\n" + DEF + "    posix._exit(0)\n",
    "{file}: your code ended the check's process (exit status 0) - return the answer instead "
    "({at1})",
)
row(
    "sys.exit(3)",
    "import sys\n\n\n" + DEF + "    sys.exit(3)\n",
    "{file}, line 5: SystemExit: exit(3) - return the answer instead of ending the program ({at1})",
)
row(
    "sys.exit(0) at import",
    "import sys\n\nsys.exit(0)\n",
    "{file}, line 3: SystemExit: exit(0) - return the answer instead of ending the program "
    "(while importing it)",
)
row(
    "stdout closed, then a print",
    "import sys\n\n\n" + DEF + "    sys.stdout.close()\n    print(A)\n",
    "{file}, line 6: ValueError: I/O operation on closed file. ({at1})",
)
row(
    "KeyboardInterrupt raised by the learner's code",
    DEF + "    raise KeyboardInterrupt\n",
    "{file}, line 2: KeyboardInterrupt - raised by your code (a Ctrl-C stops the whole check "
    "instead) ({at1})",
)
row(
    "a BaseException subclass",
    "class Halt(BaseException):\n    pass\n\n\n" + DEF + "    raise Halt('stop here')\n",
    "{file}, line 6: Halt: stop here ({at1})",
)
row(
    "__str__ and __repr__ raise",
    "class Odd(Exception):\n"
    "    def __str__(self):\n        raise RuntimeError('no')\n\n"
    "    def __repr__(self):\n        raise RuntimeError('no')\n\n\n" + DEF + "    raise Odd()\n",
    "{file}, line 10: Odd: (its message cannot be shown: its __str__ raised RuntimeError) ({at1})",
)
row(
    "a message of a million characters",
    DEF + "    raise RuntimeError('x' * 10**6)\n",
    "{file}, line 2: RuntimeError: " + "x" * 297 + "... ({at1})",
)
row(
    "endless recursion",
    DEF + "    return dropout(A, keep, p)\n",
    "{file}, line 2: RecursionError: maximum recursion depth exceeded ({at1})",
)
row(
    "input() reads nothing, never waits",
    DEF + "    input('p? ')\n",
    "{file}, line 2: EOFError: EOF when reading a line ({at1})",
    output="p? ",
)
row(
    "a crash (SIGSEGV)",
    "import ctypes\n\n\n" + DEF + "    ctypes.string_at(0)\n",
    "{file}, line 5: your code's process crashed (SIGSEGV, a segmentation fault) ({at1})",
)
row(
    "killed (SIGKILL)",
    "import os\nimport signal\n\n\n" + DEF + "    os.kill(os.getpid(), signal.SIGKILL)\n",
    "{file}: your code's process was killed (SIGKILL): out of memory, or stopped from outside "
    "({at1})",
)
row(
    "6 GiB asked for",
    "import numpy as np\n\n\n"
    + DEF
    + "    big = np.empty(6 * 2**30, dtype=np.uint8)\n    raise ValueError(f'got {big.nbytes}')\n",
    "{file}, line 5: MemoryError: Unable to allocate 6.00 GiB for an array with shape "
    "(6442450944,) and data type uint8 - the check gives your code 4 GiB ({at1})",
)
row(
    "a print in a loop floods the output",
    DEF + "    while True:\n        print('spam ' * 20)\n",
    "{file}: stopped: your code printed more than 1 MiB (a print in a loop?) ({at1})",
    output=lambda lines: (
        lines[:100] == ["spam " * 20] * 100
        and len(lines) == 101
        and lines[100].startswith("... (your code printed ")
        and lines[100].endswith(" bytes; the first 100 lines are shown)")
    ),
)
row(
    "junk written into the check's channel",
    "import os\n\n\n"
    + DEF
    + "    for fd in range(3, 64):\n        try:\n            os.write(fd, b'junk' * 8)\n"
    "        except OSError:\n            pass\n" + RIGHT,
    "{file}: the check could not read what your code's process sent ({at1})",
)
row(
    "a frame of JSON nested 100,000 deep written into every pipe",
    "import os\nimport struct\n\n\n" + DEF + "    deep = b'[' * 100_000 + b']' * 100_000\n"
    "    for fd in range(3, 64):\n        try:\n"
    "            os.write(fd, struct.pack('>I', len(deep)) + deep)\n"
    "        except OSError:\n            pass\n" + RIGHT,
    "{file}: the check could not read what your code's process sent ({at1})",
)
row(
    "an answer of nine million numbers",
    "import numpy as np\n\n\n" + DEF + "    return np.zeros((3000, 3000))\n",
    "{file}: dropout returned A (3000, 3000): far more numbers than any case's answer ({at1})",
)
row(
    "the check's channel closed",
    "import os\n\n\n" + DEF + "    os.closerange(3, 4096)\n" + RIGHT,
    "{file}: your code closed the check's channel to its process ({at1})",
)

row(
    "a module __getattr__ that raises",
    "def __getattr__(name):\n    raise LookupError(name)\n",
    "{file}, line 2: LookupError: dropout (looking up dropout)",
)

# -- answers that are not numbers: the dtype named ----------------------------------------------
NOT_NUMBERS = "return A as real numbers (float64) ({at1})"
row(
    "complex numbers",
    "import numpy as np\n\n\n" + DEF + "    return (A * keep / (1 - p)).astype(complex)\n",
    f"{{file}}, line 4: dropout returned complex numbers (dtype complex128): {NOT_NUMBERS}",
)
row(
    "text",
    "import numpy as np\n\n\n" + DEF + "    return (A * keep / (1 - p)).astype(str)\n",
    f"{{file}}, line 4: dropout returned text (dtype <U32): {NOT_NUMBERS}",
)
row(
    "Python objects",
    "from fractions import Fraction\n\n\n"
    + DEF
    + "    return [[Fraction(1)] * A.shape[1]] * A.shape[0]\n",
    f"{{file}}, line 4: dropout returned Python objects (dtype object): {NOT_NUMBERS}",
)
row(
    "booleans where floats are expected",
    DEF + "    return keep > 0\n",
    f"{{file}}, line 1: dropout returned booleans, not numbers (dtype bool): {NOT_NUMBERS}",
)

# -- the checker's state is its own ------------------------------------------------------------
row(
    "NumPy's global state changed and np.isclose patched",
    "import numpy as np\n\n"
    "np.seterr(all='raise')\nnp.set_printoptions(precision=1)\n"
    "np.isclose = lambda *a, **k: np.True_\nnp.allclose = lambda *a, **k: True\n\n\n"
    + DEF
    + "    return A * keep\n",
    WRONG.format(got=1),
    whole=False,
)
row(
    "glassformer's checker patched",
    "import glassformer.exercises.checking as C\n"
    "import glassformer.exercises.sandbox as S\n\n"
    "C.RTOL = C.ATOL = 1e300\nC._compare = lambda want, have: None\n"
    "S.judge = C.judge = lambda *a: None\n\n\n" + DEF + "    return A * 0.0\n",
    WRONG.format(got=0),
    whole=False,
)
row(
    "the reference values edited",
    "from glassformer.exercises.catalogue import exercise\n\n"
    "ex = exercise(6)\ncases = ex.cases()\nfor c in cases:\n"
    "    c.expected['A'][...] = 0.0\nobject.__setattr__(ex, 'cases', lambda: cases)\n\n\n"
    + DEF
    + "    return A * 0.0\n",
    WRONG.format(got=0),
    whole=False,
)

# -- what does not end the check ----------------------------------------------------------------
row(
    "stdout and stderr closed, the answer right",
    "import contextlib\nimport os\nimport sys\n\n\n"
    + DEF
    + "    sys.stdout.close()\n    with contextlib.suppress(OSError):\n"
    "        os.close(1)\n        os.close(2)\n" + RIGHT,
    PASSED,
    code=0,
)
row("a few prints, shown before the verdict", DEF + "    print('A is', A.shape)\n" + RIGHT,
    PASSED, code=0, output="".join(f"A is {s}\n" for s in
                                  ((6, 6), (6, 6), (5, 5), (3, 5), (4, 4), (2, 3))))  # fmt: skip
PRINTED = sum(len(str(i)) + 1 for i in range(150))  # bytes of 0..149, a line each
row(
    "150 lines printed: the first 100 shown",
    "for i in range(150):\n    print(i)\n\n\n" + DEF + RIGHT,
    PASSED,
    code=0,
    output="".join(f"{i}\n" for i in range(100))
    + f"... (your code printed {PRINTED} bytes; the first 100 lines are shown)\n",
)
row(
    "an atexit hook and a thread that never end",
    "import atexit\nimport threading\nimport time\n"
    "\natexit.register(time.sleep, 60)\nthreading.Thread(target=time.sleep, args=(60,)).start()"
    "\n\n\n" + DEF + RIGHT,
    PASSED,
    code=0,
)

# -- usage: one error line, exit 2 --------------------------------------------------------------
USAGE = [
    Case("learner", ["exercises", "check", "6", "{tmp}/x.py", "--timeout", t], says)
    for t, says in (
        ("0", "--timeout must be a positive number of seconds, got 0.0"),
        ("-1", "--timeout must be a positive number of seconds, got -1.0"),
        ("nan", "--timeout must be a positive number of seconds, got nan"),
        ("inf", "--timeout must be a positive number of seconds, got inf"),
        ("soon", "invalid float value: 'soon'"),
    )
]
USAGE += [
    Case("learner", ["exercises", "--timeout", "3"], "--timeout is a limit of exercises check"),
    Case("learner", ["exercises", "start", "6", "{tmp}", "--timeout", "3"], "not of start"),
    Case(
        "learner",
        ["exercises", "check", "6", "{tmp}/fifo"],
        "fifo: not a regular file",
        setup=lambda tmp, models: os.mkfifo(tmp / "fifo"),
    ),  # fmt: skip
]

CASES = [*FILES, *USAGE]


def state():
    """What the learner's code must not change in the checker's process."""
    ex = E.exercise(6)
    return (
        np.geterr(), np.get_printoptions()["precision"], np.isclose, np.allclose,
        checking.RTOL, checking.ATOL, checking._compare, checking.judge, sandbox.judge,
        ex.cases, float(ex.cases()[0].expected["A"].sum()), list(sys.path), os.getcwd(),
    )  # fmt: skip


@contextlib.contextmanager
def within(seconds: int):
    """A check that does not end fails the test instead of hanging the suite."""

    def late(signum, frame):
        raise AssertionError(f"the check did not end within {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("r", FILES, ids=[r.id for r in FILES])
def test_a_learners_file(r, tmp_path, capsys):
    path = tmp_path / "ex06_dropout.py"
    path.write_text(r.source)
    before = state()
    with within(60):
        code = main(["exercises", "check", "6", str(path), *r.argv])
    out, err = capsys.readouterr()
    assert state() == before
    assert err == "" and "Traceback" not in out, err
    assert code == r.code, out
    words = {f"at{k}": at(k) for k in range(1, 7)}
    verdict = r.verdict.format(file=path, **words).splitlines()
    lines = out.splitlines()
    n = len(lines) - 1 if callable(r.output) else len(r.output.splitlines())
    shown, rest = lines[:n], lines[n:]
    assert (rest if r.whole else rest[: len(verdict)]) == verdict
    if callable(r.output):
        assert r.output(shown), shown[-3:]
    else:
        assert shown == r.output.splitlines()
    assert (code == 0) == out.endswith(f"{PASSED}\n")


@pytest.mark.parametrize("case", USAGE, ids=case_id)
def test_usage(case, tmp_path, capsys):
    check_case(case, tmp_path / "none", tmp_path, capsys)


# -- signals, processes, time --------------------------------------------------------------------


def _started(tmp_path, source: str, *argv) -> tuple[subprocess.Popen, int]:
    """The command line checking `source` in a process of its own, once the learner's file has
    written the check's process id to `pid`."""
    (tmp_path / "ex06_dropout.py").write_text(
        "import os\n\nwith open('pid.tmp', 'w') as f:\n    f.write(str(os.getpid()))\n"
        "os.rename('pid.tmp', 'pid')\n\n" + source
    )
    argv = [sys.executable, "-m", "glassformer.cli", "exercises", "check", "6", "ex06_dropout.py"]
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, as a shell's foreground job
    )
    for _ in range(300):
        if (tmp_path / "pid").exists():
            return proc, int((tmp_path / "pid").read_text())
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the learner's file never ran: {proc.communicate()}")


def _gone(pid: int, within: float = 3.0) -> bool:
    """Whether process `pid` has ended (a zombie counts as ended), looking for `within` seconds."""
    end = time.monotonic() + within
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_the_command_stops_the_check_and_its_process_at_once(tmp_path, signum, code):
    """Ctrl-C (to the command's process group, as a terminal sends it) and SIGTERM (to the
    command): the child killed, one line, 130 / 143, at once."""
    proc, child = _started(tmp_path, DEF + "    while True:\n        pass\n")
    sent = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 2.0
    assert _gone(child), "the learner's process outlived the check"
    assert out == b"" and b"Traceback" not in err
    assert (proc.returncode, err.decode()) == (code, "glassformer: interrupted\n")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_the_child_ends_when_the_command_is_killed(tmp_path):
    proc, child = _started(tmp_path, DEF + "    while True:\n        pass\n")
    proc.kill()
    proc.wait()
    assert _gone(child), "the learner's process outlived a killed check"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_process_the_learners_code_starts_ends_with_the_check(tmp_path, capsys):
    """It holds the output pipe open: the verdict still comes at once, and the process is
    killed with the check's process group."""
    path = tmp_path / "ex06_dropout.py"
    path.write_text(
        "import subprocess\n\nkid = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(tmp_path / 'kid')!r}, 'w').write(str(kid.pid))\n\n\n" + DEF + RIGHT
    )
    began = time.monotonic()
    with within(60):
        assert main(["exercises", "check", "6", str(path)]) == 0
    assert time.monotonic() - began < 10
    assert capsys.readouterr().out == f"{PASSED}\n"
    assert _gone(int((tmp_path / "kid").read_text()))


def test_timeout_gives_more_time(tmp_path, capsys):
    """The same slow file: stopped at 0.5 s, passed with --timeout 5 (and from Python)."""
    path = tmp_path / "ex06_dropout.py"
    path.write_text("import time\n\n\n" + DEF + "    time.sleep(0.2)\n" + RIGHT)
    with within(60):
        assert main(["exercises", "check", "6", str(path), "--timeout", "0.5"]) == 1
        assert "stopped after 0.5 s" in capsys.readouterr().out
        assert main(["exercises", "check", "6", str(path), "--timeout", "5"]) == 0
        result = E.check_file(6, path, timeout=0.5)
    assert not result.passed and "(timeout=SECONDS allows more)" in result.error


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_an_interrupted_check_kills_its_process_on_the_way_out(tmp_path):
    """This process stays alive (so the child's own watch of its parent plays no part): the
    KeyboardInterrupt leaves check_file with the child already gone."""
    path = tmp_path / "ex06_dropout.py"
    path.write_text(
        f"import os\n\nopen({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n\n\n"
        + DEF
        + "    while True:\n        pass\n"
    )

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            E.check_file(6, path, timeout=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _gone(int((tmp_path / "pid").read_text()), within=0)


@pytest.mark.parametrize(
    ("boot", "says"),
    [
        ("import sys; print('no glassformer here'); sys.exit(3)", "(no glassformer here)"),
        ("import time; time.sleep(60)", "(it said nothing)"),
    ],
)
def test_a_check_whose_process_cannot_start_is_an_error_not_a_verdict(
    boot, says, tmp_path, capsys, monkeypatch
):
    """Not the learner's doing (their file has not run): one error line and exit 2, as a check
    that cannot be made; a child that hangs while starting is given up at START_LIMIT."""
    monkeypatch.setattr(sandbox, "BOOT", boot)
    monkeypatch.setattr(sandbox, "START_LIMIT", 1.0)
    path = tmp_path / "ex06_dropout.py"
    path.write_text(DEF + RIGHT)
    with within(30):
        code = main(["exercises", "check", "6", str(path)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (
        f"glassformer: error: the check's own process ended or hung before it ran {path} {says}; "
        "check the installation\n"
    )
