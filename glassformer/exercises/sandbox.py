"""A learner's file checked in a process of its own: `check_file` and `glassformer exercises
check N FILE`.

The learner's file runs in a child process (`runner.py`), which makes the exercise's cases itself,
calls the learner's function on each and sends each case's answer back as float64 bytes (no
pickle). The verdict is given here, in the parent, which holds the reference values: nothing the
learner's code does (NumPy's settings, glassformer's modules patched, the cases' values edited)
reaches the comparison. The child has a time limit (`timeout`, 5 s by default, counted from when
the learner's file starts to run), a memory limit (MEMORY, where the system allows one), and its
output is read here: shown up to SHOWN_LINES lines, and the check stops when it passes
OUTPUT_LIMIT. However the child ends, the answer is one line naming the learner's file (and line,
where it is known), never "passed": sys.exit, os._exit, a KeyboardInterrupt or another
BaseException their code raises, a loop stopped at the time limit (the line it was on), a crash or
a kill by a signal (the fault handler's line), a flood of output. A Ctrl-C or SIGTERM to this
process (the child is in a session of its own, so a terminal's Ctrl-C reaches only this one) stops
the check at once: the child is killed on the way out, and it ends itself if this process dies.

Why `subprocess` running `runner.py` and not multiprocessing: 'spawn' and 'forkserver' import the
parent's `__main__`, which for `python -m glassformer.cli` runs the command again, and their
results come back as pickles; a plain process with its own pipes reads only bytes and JSON.
'fork' would be fastest but copies a process whose threads (BLAS) may hold locks. The cost is the
child's start: Python, NumPy (one BLAS thread: its start is cheaper) and glassformer.exercises,
then the cases, made while this process makes its own: a fraction of a second of CPU time per
check (measured on docs/benchmarks.md).

What this is not: a jail. The learner's code runs as the user, with the user's files and network;
the process fences off the checker's state, time and output, not the machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import numbers
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

from glassformer.exercises.base import ExerciseError, kind_of, shown
from glassformer.exercises.catalogue import exercise
from glassformer.exercises.checking import Result, case_words, judge
from glassformer.exercises.runner import ELEMENT_LIMIT, EXIT_CHANNEL, HEADER

TIMEOUT = 5.0  # seconds for the learner's file and every case: a right answer takes milliseconds
START_LIMIT = 60.0  # seconds for the child to start (Python, NumPy, the cases) before their code
MEMORY = 4 * 2**30  # bytes of address space for the child
OUTPUT_LIMIT = 2**20  # bytes the learner's code may print before the check stops it
SHOWN_LINES, SHOWN_BYTES = 100, 16_384  # of the learner's output, shown
WHERE_WAIT = 0.5  # seconds the child has to say where its code was, at the time limit
HEADER_LIMIT = 2**20  # bytes of a frame's JSON header
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
BOOT = (
    "import json, sys; r = json.loads(sys.stdin.readline()); sys.path[:] = r['sys_path']; "
    "from glassformer.exercises.runner import boot; boot(r)"
)
SIGNALS = {
    "SIGKILL": "was killed (SIGKILL): out of memory, or stopped from outside",
    "SIGSEGV": "crashed (SIGSEGV, a segmentation fault)",
    "SIGBUS": "crashed (SIGBUS, a bus error)",
    "SIGFPE": "crashed (SIGFPE, an arithmetic fault)",
    "SIGILL": "crashed (SIGILL, an illegal instruction)",
    "SIGABRT": "aborted (SIGABRT)",
}


def check_file(number, path, timeout: float = TIMEOUT) -> Result:
    """Check the function of exercise `number` in the learner's file `path`, run in a process of
    its own with a time limit of `timeout` seconds; `Result.output` holds what it printed."""
    return check_in_child(number, path, timeout, more="timeout=SECONDS")


def check_in_child(number, path, timeout, more: str) -> Result:
    """`check_file`; `more` says how to allow more time (the command line: --timeout SECONDS)."""
    ex = exercise(number)
    seconds = time_limit(timeout)
    path = learner_file(ex, path)
    with Child(ex, path) as child:
        cases = ex.cases()  # made here while the child starts and makes its own
        outcomes = FromChild(child, ex, cases, seconds, more)
        result = judge(ex, cases, outcomes)
        child.stop()
        return dataclasses.replace(result, output=child.output.text())


def time_limit(value) -> float:
    """A positive, finite number of seconds, or one clear error (the command line's --timeout
    is checked as it is parsed)."""
    seconds = math.nan
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an int past float's range
            seconds = float(value)
    if not (math.isfinite(seconds) and seconds > 0):
        raise ExerciseError(
            f"timeout={shown(value)}: give the time limit as a positive number of seconds "
            f"(default {TIMEOUT:g})"
        )
    return seconds


def learner_file(ex, path) -> Path:
    """The learner's file as a Path, or one clear error: a regular file that exists."""
    if not isinstance(path, str | os.PathLike):
        raise ExerciseError(f"give the file to check as a path, not a {kind_of(path)}")
    path = Path(path)
    if not path.is_file():
        what = "a folder" if path.is_dir() else "no such file"
        what = "not a regular file" if path.exists() and not path.is_dir() else what
        raise ExerciseError(
            f"{path}: {what}; give the exercise's file (glassformer exercises start "
            f"{ex.number} writes {ex.filename})"
        )
    return path


# -- the child and what it sends ----------------------------------------------------------------


class Child:
    """The learner's file running in `runner.py`'s process: frames read as they come, the output
    read beside them (so that a child printing never blocks), the fault handler's dump."""

    def __init__(self, ex, path: Path):
        if not sys.executable:
            raise ExerciseError(
                "checking a file needs the Python interpreter's path (sys.executable)"
            )
        self.path, self.buffer, self.frames = str(path), bytearray(), deque()
        self.output, self.faults, self.flooded, self.open = Output(), bytearray(), False, True
        results, self.results_w = os.pipe()
        faults, self.faults_w = os.pipe()
        self.fds = [results, faults]
        self.selector = selectors.DefaultSelector()
        self.proc = None
        try:
            self._start(ex)
        except BaseException:
            self.stop()
            raise
        self.selector.register(results, selectors.EVENT_READ, "results")
        self.selector.register(faults, selectors.EVENT_READ, "faults")
        self.selector.register(self.proc.stdout.fileno(), selectors.EVENT_READ, "output")

    def _start(self, ex) -> None:
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", "-c", BOOT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(self.results_w, self.faults_w),
                start_new_session=True,  # a terminal's Ctrl-C reaches the parent only
                env={**os.environ, **ONE_THREAD},  # tiny matrices: one BLAS thread starts faster
            )
        except OSError as e:
            raise ExerciseError(f"cannot start the check's process: {e.strerror or e}") from None
        finally:
            os.close(self.results_w)
            os.close(self.faults_w)
        request = {
            "sys_path": sys.path,
            "path": self.path,
            "number": ex.number,
            "results": self.results_w,
            "faults": self.faults_w,
            "memory": MEMORY,
        }
        with contextlib.suppress(OSError):  # a child that died at once is reported by the reads
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()

    def next_frame(self, deadline: float) -> dict | None:
        """The next frame, or None once the deadline passes, the channel closes (the child ended
        or closed it) or the output floods."""
        while not self.frames:
            left = deadline - time.monotonic()
            if not self.open or self.flooded or left <= 0:
                return None
            for key, _ in self.selector.select(min(left, 1.0)):
                self._read(key)
        return self.frames.popleft()

    def _read(self, key) -> None:
        data = os.read(key.fd, 65536)
        if not data:
            self.selector.unregister(key.fd)
            self.open = self.open and key.data != "results"
        elif key.data == "output":
            self.output.add(data)
            self.flooded = self.output.total > OUTPUT_LIMIT
        elif key.data == "faults":
            self.faults += data[: max(0, 65536 - len(self.faults))]
        else:
            self.buffer += data
            self._frames()

    def _frames(self) -> None:
        """Every whole frame in the buffer, decoded; a frame that cannot be read ends the
        channel (the learner's code wrote into it, or the child broke)."""
        while self.open and len(self.buffer) >= HEADER.size:
            (n,) = HEADER.unpack_from(self.buffer)
            try:
                if n > HEADER_LIMIT:
                    raise ValueError(f"a header of {n} bytes")
                if len(self.buffer) < HEADER.size + n:
                    return
                header = json.loads(bytes(self.buffer[HEADER.size : HEADER.size + n]))
                size = _data_size(header)
                end = HEADER.size + n + size
                if len(self.buffer) < end:
                    return
                data = bytes(self.buffer[HEADER.size + n : end])
                del self.buffer[:end]
                self.frames.append(_decoded(header, data))
            except Exception as e:  # bytes from the learner's process: whatever they hold
                self.frames.append({"kind": "garbled", "why": str(e)[:200]})
                self.open = False

    def ask_where(self) -> str:
        """At the time limit: where the learner's code is, as the child says it (SIGUSR1), if it
        can within WHERE_WAIT."""
        with contextlib.suppress(OSError):
            os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + WHERE_WAIT
        while (frame := self.next_frame(deadline)) is not None:
            if frame.get("kind") == "where":
                return frame["line"] if isinstance(frame["line"], str) else ""
        return ""

    def returncode(self, grace: float = 1.0) -> int | None:
        """The child's exit status (negative: the signal), waiting `grace` seconds; None if it
        is still running (it closed the channel but did not end)."""
        try:
            return self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """Kill the child and what it started (its process group), collect the last of its
        output, close everything. Safe to call twice."""
        if self.proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):  # had it left its group
                self.proc.kill()
            self.proc.wait()
            self._drain()
            for stream in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
        self.selector.close()
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []

    def _drain(self, wait: float = 0.2) -> None:
        """What the child wrote before it was killed (a process it started and moved out of the
        group may hold the pipes open: not waited for past `wait`)."""
        deadline = time.monotonic() + wait
        while self.selector.get_map() and (left := deadline - time.monotonic()) > 0:
            ready = self.selector.select(left)
            if not ready:
                return
            for key, _ in ready:
                if key.data == "results":
                    self.selector.unregister(key.fd)
                else:
                    self._read(key)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _data_size(header) -> int:
    """The bytes that follow a header: a case's parts, float64 each."""
    if not isinstance(header, dict):
        raise ValueError("a frame that is not a JSON object")
    if header.get("kind") != "case":
        return 0
    total = 0
    for name, shape in header["parts"]:
        if not isinstance(name, str) or not all(type(n) is int and n >= 0 for n in shape):
            raise ValueError("a part that is not (name, shape)")
        total += math.prod(shape)
    if total > ELEMENT_LIMIT:
        raise ValueError(f"an answer of {total} numbers")
    return 8 * total


def _decoded(header: dict, data: bytes) -> dict:
    if header.get("kind") != "case":
        return header
    parts, at = {}, 0
    for name, shape in header["parts"]:
        size = 8 * math.prod(shape)
        parts[name] = np.frombuffer(data[at : at + size], dtype="<f8").reshape(shape).copy()
        at += size
    return {"kind": "case", "k": header["k"], "parts": parts}


class Output:
    """What the learner's code printed: the first SHOWN_BYTES kept, all of it counted."""

    def __init__(self):
        self.head, self.total = bytearray(), 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.head += data[: max(0, SHOWN_BYTES - len(self.head))]

    def text(self) -> str:
        """The output to show, cut at SHOWN_LINES lines or SHOWN_BYTES (a line cut in two is
        left out), a last line saying how much there was."""
        cut = len(self.head) < self.total
        lines = self.head.decode("utf-8", "replace").splitlines(keepends=True)
        if cut and len(lines) > 1 and not lines[-1].endswith(("\n", "\r")):
            lines.pop()
        if not cut and len(lines) <= SHOWN_LINES:
            return "".join(lines)
        lines = lines[:SHOWN_LINES]
        said = (
            f"... (your code printed {self.total:,} bytes; the first {len(lines)} lines are shown)"
        )
        return "".join(lines) + ("" if lines[-1].endswith("\n") else "\n") + said + "\n"


# -- the answers, case by case --------------------------------------------------------------------


class FromChild:
    """Each case's parts as the child sends them (`get(k)`, as `checking.judge` asks), or the one
    line that says why no more will come."""

    def __init__(self, child: Child, ex, cases, seconds: float, more: str):
        self.child, self.ex, self.cases, self.seconds, self.more = child, ex, cases, seconds, more
        self.got: dict[int, dict] = {}
        self.end: str | None = None
        self.started = self.imported = False
        self.exit: dict | None = None
        self.deadline = time.monotonic() + START_LIMIT

    def get(self, k: int) -> dict | str:
        while k not in self.got and self.end is None:
            self._next()
        return self.got.get(k, self.end)

    def _next(self) -> None:
        frame = self.child.next_frame(self.deadline)
        kind = frame.get("kind") if frame else None
        if frame is None:
            self.end = self._ended()
        elif kind == "ready":
            self.started, self.deadline = True, time.monotonic() + self.seconds
        elif kind == "imported":
            self.imported = True
        elif kind == "case" and frame["k"] == len(self.got) + 1 and self._whole(frame["parts"]):
            self.got[frame["k"]] = frame["parts"]
        elif kind == "error" and isinstance(frame.get("line"), str):
            self.end = frame["line"]
        elif kind == "exit" and type(frame.get("code")) is int:
            self.exit = frame
        elif kind != "where":  # a late answer to the time limit's question
            self.end = self._line("the check could not read what your code's process sent")

    def _whole(self, parts: dict) -> bool:
        return all(p.name in parts for p in self.ex.parts)

    def _at(self) -> str:
        k = len(self.got) + 1
        if not self.imported:
            return "while importing it"
        return case_words(self.ex, self.cases, k)

    def _line(self, what: str, where: str = "") -> str:
        return f"{where or self.child.path}: {what} ({self._at()})"

    def _ended(self) -> str:
        """Why the child sends no more: the one line."""
        child = self.child
        if not self.started:
            child.stop()
            said = child.output.text().strip().splitlines()
            raise ExerciseError(
                f"the check's own process ended or hung before it ran {child.path} "
                f"({said[-1] if said else 'it said nothing'}); check the installation"
            )
        if child.flooded:
            mib = OUTPUT_LIMIT / 2**20
            return self._line(
                f"stopped: your code printed more than {mib:g} MiB (a print in a loop?)"
            )
        if child.open:  # the time limit
            where = child.ask_where()
            return self._line(
                f"stopped after {self.seconds:g} s, the check's time limit: a loop that never "
                f"ends? ({self.more} allows more)",
                where,
            )
        code = child.returncode()
        if self.exit is not None:
            return self._line(
                f"os._exit({self.exit['code']}) ended the check's process - return the answer "
                "instead",
                self.exit["line"] if isinstance(self.exit.get("line"), str) else "",
            )
        if code is None or code == EXIT_CHANNEL:
            return self._line("your code closed the check's channel to its process")
        if code < 0:
            name = _signal_name(-code)
            return self._line(
                f"your code's process {SIGNALS.get(name, f'was ended by {name}')}",
                self._fault_line(),
            )
        return self._line(
            f"your code ended the check's process (exit status {code}) - return the answer instead"
        )

    def _fault_line(self) -> str:
        """`FILE, line N` of the learner's deepest frame in the fault handler's dump, or ''."""
        text = self.child.faults.decode("utf-8", "replace")
        for name, line in re.findall(r'File "(.*)", line (\d+)', text):  # innermost first
            if os.path.abspath(name) == os.path.abspath(self.child.path):
                return f"{self.child.path}, line {line}"
        return ""


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"
