"""The learner's side of a file's check: the program that runs in the check's own process.

`sandbox.py` starts it (`python -u -c BOOT`) and sends one line of JSON on its stdin: the file,
the exercise, the parent's sys.path, the numbers of the pipes to write to and the memory limit.
This program makes the exercise's cases itself (the same seeded inputs as the parent's), runs the
learner's file as a module, calls their function on each case and sends each case's parts back as
frames: a 4-byte big-endian length, a JSON header, then the parts' float64 bytes. No pickle, so
the parent reads nothing that could run code. The parent holds the reference values and compares
them; nothing here knows them, and nothing the learner's code changes here reaches the parent.

Also here: what says where the learner's code was when the parent stopped it (SIGUSR1 at the time
limit) or when it called os._exit; the fault handler's dump (a crash) on a pipe of its own; the
memory limit; and a thread that ends this process when the parent is gone (its stdin closes).

Not here: the time limit, the verdict and the messages of a process that ended early
(`sandbox.py`); the comparison (`checking.py`). Nothing here prints: stdout and stderr belong to
the learner's code.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib.util
import json
import os
import signal
import struct
import sys
import threading
import traceback
from pathlib import Path

import numpy as np

from glassformer.exercises.base import Exercise
from glassformer.exercises.catalogue import exercise
from glassformer.exercises.checking import (
    case_words,
    learner_frame,
    quiet,
    raised_line,
    run_case,
)

HEADER = struct.Struct(">I")  # a frame's header length
EXIT_ORPHANED = 70  # the parent is gone: nobody reads this status
EXIT_CHANNEL = 71  # the channel to the parent failed: the learner's code closed or broke it
ELEMENT_LIMIT = 2**22  # numbers in one case's answer (the largest case holds a few hundred)
_exit = os._exit  # the real one: the learner's os._exit is wrapped to say where it was called
_kept = []  # the fault handler's file must outlive main()


class Channel:
    """The pipe of frames to the parent."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, header: dict, data: bytes = b"") -> None:
        head = json.dumps(header).encode()
        message = HEADER.pack(len(head)) + head + data
        while message:
            message = message[os.write(self.fd, message) :]


def main(request: dict) -> None:
    """Run the learner's file and send what it gives; end without the learner's atexit hooks
    or threads (the parent has all it needs)."""
    channel = Channel(request["results"])
    _watch_parent(request["watch"])
    faults = os.fdopen(request["faults"], "w")
    _kept.append(faults)
    faulthandler.enable(file=faults)
    ex = exercise(request["number"])
    cases = ex.cases()  # before the learner's code runs: nothing of theirs changes the inputs
    path = request["path"]
    _limit_memory(request["memory"])
    _say_where_on(signal.SIGUSR1, channel, path)
    os._exit = _reporting_exit(channel, path)
    sys.argv = [path]
    channel.send({"kind": "ready"})
    try:
        _run(ex, cases, Path(path), channel, request["memory"])
    except OSError:  # the channel is gone: the learner's code closed it (the parent says so)
        _exit(EXIT_CHANNEL)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    _exit(0)


def _run(ex: Exercise, cases, path: Path, channel: Channel, memory: int) -> None:
    with learner_module(path) as (module, error):
        if error:
            channel.send({"kind": "error", "k": 0, "line": error})
            return
        channel.send({"kind": "imported"})
        try:
            fn = getattr(module, ex.function, None)  # a module __getattr__ of theirs may fail
        except BaseException as e:
            line = raised_line(e, str(path), f"looking up {ex.function}", ex)
            channel.send({"kind": "error", "k": 0, "line": line})
            return
        if not callable(fn):
            line = (
                f"{path}: defines no function {ex.function}: exercise {ex.number} checks "
                f"{ex.function}({ex.params}) (keep the stub's name)"
            )
            channel.send({"kind": "error", "k": 0, "line": line})
            return
        memory_hint = f"the check gives your code {memory / 2**30:g} GiB"
        for k in range(1, len(cases) + 1):
            got = run_case(ex, fn, cases, k, str(path), file=str(path), memory_hint=memory_hint)
            if not isinstance(got, str) and sum(np.size(v) for v in got.values()) > ELEMENT_LIMIT:
                shapes = ", ".join(f"{name} {np.shape(v)}" for name, v in got.items())
                got = (
                    f"{path}: {ex.function} returned {shapes}: far more numbers than any case's "
                    f"answer ({case_words(ex, cases, k)})"
                )
            if isinstance(got, str):
                channel.send({"kind": "error", "k": k, "line": got})
                return
            _send_case(channel, k, got)


def _send_case(channel: Channel, k: int, got: dict) -> None:
    parts, data = [], []
    for name, value in got.items():
        arr = np.ascontiguousarray(value, dtype="<f8")
        parts.append([name, list(arr.shape)])
        data.append(arr.tobytes())
    channel.send({"kind": "case", "k": k, "parts": parts}, b"".join(data))


# -- running the learner's file -------------------------------------------------------------------


@contextlib.contextmanager
def learner_module(path: Path):
    """Run the learner's file as a module from its path: (module, None), or (None, the one line
    of its syntax error or exception). Its folder is first on sys.path (their own helper modules
    import), and no bytecode is written beside it."""
    name = f"glassformer_exercise_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    sys.modules[name] = module  # dataclasses and the like look their module up
    yield _execute(spec, module, str(path))


def _execute(spec, module, shown: str):
    try:
        source = spec.loader.get_data(shown)
        code = compile(source, shown, "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"{shown}, line {e.lineno}" if e.lineno else shown
        return None, f"{where}: {type(e).__name__}: {e.msg}"
    except (ValueError, OSError) as e:  # null bytes; unreadable
        return None, f"{shown}: cannot be read as Python: {e}"
    try:
        with quiet():
            exec(code, module.__dict__)
    except BaseException as e:  # whatever their code raises, KeyboardInterrupt included
        return None, raised_line(e, shown, "while importing it", _NO_EXERCISE)
    return module, None


class _Blank:
    function, error_hint = "", ""


_NO_EXERCISE = _Blank()


# -- where the learner's code was -----------------------------------------------------------------


def where(frame, path: str) -> str:
    """`FILE, line N` of the deepest frame of the learner's file on the stack from `frame`
    (else the deepest outside glassformer), or ''."""
    found = learner_frame(traceback.extract_stack(frame), path) if frame else None
    if found is None:
        return ""
    name = path if os.path.abspath(found.filename) == os.path.abspath(path) else found.filename
    return f"{name}, line {found.lineno}"


def _say_where_on(signum: int, channel: Channel, path: str) -> None:
    """At the time limit the parent sends `signum` before it kills: the handler says where the
    learner's code is (a loop's line). Nothing else happens: the parent kills this process."""

    def handler(signum, frame):
        with contextlib.suppress(OSError):
            channel.send({"kind": "where", "line": where(frame, path)})

    signal.signal(signum, handler)


def _reporting_exit(channel: Channel, path: str):
    """os._exit as the learner's code sees it: says where it was called, then exits."""

    def _reported_exit(code):
        if isinstance(code, int):
            with contextlib.suppress(OSError):
                line = where(sys._getframe(1), path)
                channel.send({"kind": "exit", "code": code, "line": line})
        _exit(code)

    return _reported_exit


# -- the process's limits -------------------------------------------------------------------------


def _limit_memory(limit: int) -> None:
    """An allocation past `limit` bytes is a MemoryError on the learner's line, not the system's
    out-of-memory killer (where the system allows the limit; the parent reports a kill too)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY or soft > limit:
            top = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (top, hard))
    except (ImportError, ValueError, OSError):
        pass


def _watch_parent(fd: int) -> None:
    """End this process when the parent is gone: its end of `fd` (our stdin, moved) closes. (If
    the learner's code closes `fd`, the watch ends; the parent's time limit still holds.)"""

    def watch():
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            return
        _exit(EXIT_ORPHANED)

    threading.Thread(target=watch, daemon=True, name="glassformer-parent-watch").start()


def boot(request: dict) -> None:
    """The child's entry, once BOOT has read the request and taken the parent's sys.path: stdin
    moves aside for the watch (the learner's input() reads /dev/null), and the check runs."""
    request["watch"] = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    main(request)
