"""Stop signals at any moment: Ctrl-C (SIGINT) and SIGTERM, from the first import of the package
to the end of a command, each raised as soon as it is safe, never lost, said in one line.

Python's own handling is not enough here. It raises KeyboardInterrupt for SIGINT wherever the main
thread is, and an exception raised under C code that calls back into Python is lost or fatal:
`torch._C`'s initialiser imports NumPy and drops that import's error (5 of 40 Ctrl-C sent in the
first second of `import torch` had no effect at all), and one raised under
`torch._C._c10d_init()` is thrown through C++ and aborts the process ("terminate called after
throwing an instance of 'pybind11::error_already_set'", exit -6). It leaves SIGTERM to the
operating system: the process ends with no word. Holding a signal until the import under way
had ended, as this module did, was safe but slow (a Ctrl-C waited for the whole of `import
torch`, 3-4 s on a loaded machine, and a poll could miss the gap before the next import), and
training's save-on-signal handler, installed later, replaced the hold and trained through it.

So one handler, the gate, takes both signals: while the package imports (`hold_during_imports`)
and, for the command line, from there on (kept by `import glassformer.cli`, `install`) to the end
of `main` (`command`). A signal is raised at once as `Stopped` (a KeyboardInterrupt, so that every
cleanup meant for a Ctrl-C runs, that says which signal), except while a module is being imported
(C code may be on the stack, unseen) or inside a `whole()` block: there it is held, and raised when
the next import started by Python code ends (an import statement, importlib or runpy; not one a C
initialiser started, and none inside one), which is milliseconds during start-up (0.75 s at most,
measured in `import torch`), or at the end of the block (argparse's parsing; the taking and the
removal of an output folder's lock file, which a stop must not leave behind). The gate wraps
importlib's `_find_and_load` to see those ends. A library that takes the signals itself for a while
(the explorer's server) is handed one that arrives as it starts (`handed_over`). Inside a command,
a stop that something swallowed anyway (a C API that drops errors, a `__del__`) is raised again
every `AGAIN_S` until the command acts on it (`acted_on`); training takes over a stop that came
before its first step (`take`) and stops without training or writing. A Stopped that nothing
catches (the package's import interrupted) is one line, `glassformer: interrupted`, and the program
then ends by the signal itself, as Python ends on an uncaught Ctrl-C (130 or 143 in a shell).

The gate is installed only in the main thread, and only for a signal that still has Python's
default handling (a program that set its own keeps it). Light on purpose: it runs before NumPy is
imported, so it uses built-in modules only (and `opcode`'s table, once the signals are its own).
The first millisecond of `import glassformer`, reading this module, is Python's, as the
interpreter's own start-up is. Not here: what a command prints and returns on a stop
(`cli.common.run`, `cli.main`), what training saves on a signal (`train.StopSignals`).
"""

from __future__ import annotations

import _frozen_importlib  # importlib's bootstrap, which every import goes through
import _signal  # the built-in modules only: `signal` and `threading` take milliseconds to import
import _thread
import sys
import time
import warnings  # imported by the interpreter at its start-up

SIGNALS = (_signal.SIGINT, _signal.SIGTERM)
DEFAULTS = {_signal.SIGINT: _signal.default_int_handler, _signal.SIGTERM: _signal.SIG_DFL}
AGAIN_S = 1.0  # a command still running this long after a stop was raised has lost it: again
LOOK_S = 0.05  # how often the watcher of a raised stop looks whether the command acted on it
LINE = "glassformer: interrupted"
IMPORT_NAME = -1  # the `import` statement's instruction, read from `opcode` once signals are ours
_FIND_AND_LOAD = _frozen_importlib._find_and_load


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised where the main thread was: a KeyboardInterrupt, so that every
    cleanup meant for a Ctrl-C runs; `signum` says which signal (the CLI exits 128 + signum)."""

    def __init__(self, signum: int):
        super().__init__()
        self.signum = signum


class Gate:
    """The handler of SIGINT and SIGTERM while installed (see the module's docstring)."""

    def __init__(self) -> None:
        self.received: int | None = None  # the stop signal not yet acted on
        self.raised_at: float | None = None  # when it was last raised (None: held)
        self.done = False  # acted on: the command is ending with its line; later signals ignored
        self.blocks = 0  # whole() blocks under way
        self.imports = 0  # imports under way in the main thread
        self.foreign = 0  # of which started by C code (an extension's initialiser, C++)
        self.command = False  # inside a command: a stop still not acted on is raised again
        self.kept = False  # installed by `install()`, for the next `command()` to adopt
        self.installed = False
        self.knock = False  # the watcher's own signal is on its way
        self.waiting = False  # for a library's own handler (handed_over)
        self.previous: dict = {}
        self.main = _thread.get_ident()

    def __call__(self, signum, frame) -> None:
        knock, self.knock = self.knock, False
        if self.done or (knock and self.received is None):  # acted on, or taken (take())
            return
        if self.received is None:
            self.received = signum
        self.raised_at = None  # (again: a second signal, or the watcher's) at the first safe moment
        if not self.imports:
            self.deliver()

    def deliver(self) -> None:
        """Raise the stop received and not raised yet, unless raising here could lose it: the end
        of the whole() block or of the next import started by Python code calls this again."""
        if self.received is None or self.raised_at is not None or self.done:
            return
        if self.blocks or self.foreign:
            return
        self.raised_at = time.monotonic()
        if self.command:  # the command is ending: watch that it does
            _thread.start_new_thread(self._watch, ())
            # what the stop cuts off before it started (the explorer's server coroutine, when it
            # lands as the URL is said) is freed on the way out: not a defect to warn of there
            warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
        _said_if_uncaught()
        raise Stopped(self.received)

    def _watch(self) -> None:
        """While the command has not acted on the stop raised: raise it again after AGAIN_S. The
        knock is the signal itself, sent to the main thread, so that a blocking call wakes."""
        raised = self.raised_at
        while True:
            time.sleep(LOOK_S)
            if _gate is not self or self.done or self.received is None:
                return
            if self.raised_at != raised:  # raised again since: that raise has its own watcher
                return
            if time.monotonic() - raised >= AGAIN_S:
                signum = self.received
                if _signal.getsignal(signum) is self:
                    self.knock = True
                    _signal.pthread_kill(self.main, signum)
                return

    def whole(self) -> _Whole:
        """A block that a stop must not cut in two (argparse's intermixed parsing leaves a broken
        parser behind): a signal is held to its end, then raised there."""
        return _Whole(self)

    def install(self) -> Gate:
        """Take SIGINT and SIGTERM where each still has Python's default handling (main thread
        only) and wrap importlib's loading; the gate is then the one in force."""
        global _gate, IMPORT_NAME
        if _gate is not None:
            return self
        for s in SIGNALS:
            if _signal.getsignal(s) == DEFAULTS[s]:
                try:
                    self.previous[s] = _signal.signal(s, self)
                except ValueError:  # not the main thread: Python delivers signals there only
                    return self
        if self.previous:
            if IMPORT_NAME < 0:
                from opcode import opmap

                IMPORT_NAME = opmap["IMPORT_NAME"]
            self.installed, _gate = True, self
            _frozen_importlib._find_and_load = _find_and_load
        return self

    def uninstall(self, then=None) -> None:
        """Give the signals back (`then`: this handler for both instead, e.g. SIG_IGN) and
        unwrap importlib."""
        global _gate
        if not self.installed:
            return
        self.installed, _gate = False, None
        _frozen_importlib._find_and_load = _FIND_AND_LOAD
        for s, handler in self.previous.items():
            if _signal.getsignal(s) is self:  # a handler set since (and not given back) stays
                _signal.signal(s, handler if then is None else then)


class _Whole:
    def __init__(self, gate: Gate):
        self.gate = gate

    def __enter__(self):
        self.gate.blocks += 1

    def __exit__(self, *exc) -> None:
        self.gate.blocks -= 1
        self.gate.deliver()  # an error on its way out too: a stop still comes first, as Ctrl-C's


_gate: Gate | None = None  # the gate in force, if any
_NOBODY = Gate()  # never installed: no signal reaches it


def _find_and_load(name, import_):
    """importlib's `_find_and_load` (called for every module not yet imported, from C as from
    Python), counting the main thread's imports; the end of one that Python code started is a
    safe place to raise a held stop."""
    gate = _gate
    if gate is None or _thread.get_ident() != gate.main:
        return _FIND_AND_LOAD(name, import_)
    foreign = not _from_python(sys._getframe(1))
    gate.imports += 1
    gate.foreign += foreign
    try:
        return _FIND_AND_LOAD(name, import_)
    finally:
        gate.imports -= 1
        gate.foreign -= foreign
        if not foreign:  # back in the Python code that asked for it (C code: raise nothing)
            gate.deliver()


def _from_python(frame) -> bool:
    """Whether the import that `frame` (the caller of `_find_and_load`) asks for was started by
    Python code: an import statement, importlib's Python functions, runpy; not C code calling
    into Python (an extension's initialiser, a C++ function), which an exception cannot cross."""
    code = frame.f_code
    if code.co_filename.startswith("<frozen "):
        if code.co_name == "_call_with_frames_removed":  # _handle_fromlist's import_, or C
            f = frame.f_locals.get("f")
            return getattr(f, "__name__", "") in ("__import__", "_gcd_import")
        return code.co_filename in ("<frozen importlib._bootstrap>", "<frozen runpy>")
    return code.co_code[frame.f_lasti] == IMPORT_NAME


# -- the API -------------------------------------------------------------------------------------


class hold_during_imports:  # noqa: N801 (used as a function: `with hold_during_imports():`)
    """The gate for this block (the package's own imports), given back at its end unless one was
    already in force, or unless the package is being imported on the way to its command line:
    then the gate stays for `glassformer.cli` to keep (given back, a signal in between, as the
    command line's package starts to import, was Python's: SIGTERM ended it with no word).
    `as` gives the gate."""

    def __enter__(self) -> Gate:
        self.mine = _gate is None
        self.gate = _gate or Gate().install()
        return self.gate

    def __exit__(self, *exc) -> None:
        if self.mine and exc[0] is None and _for_the_command_line(sys._getframe(1)):
            self.gate.kept = self.gate.installed
        elif self.mine:
            self.gate.uninstall()


def _for_the_command_line(frame) -> bool:
    """Whether an import of `glassformer.cli` for the program's command line is under way below
    `frame`: the console script's `from glassformer.cli import main` (an import by the `__main__`
    module), or runpy's `python -m glassformer.cli` (torchrun's too). An import by other code (a
    test module, a library that calls `main([...])` later) is not: it keeps Python's handling of
    the signals, and each `main()` takes them for its own command (`command`)."""
    importing = False
    while frame is not None:
        where = frame.f_code.co_filename
        if where == "<frozen runpy>":
            name = frame.f_locals.get("mod_name")
            if name == "glassformer.cli" or str(name).startswith("glassformer.cli."):
                return True
        elif where.startswith("<frozen importlib"):
            name = frame.f_locals.get("name")
            importing |= name == "glassformer.cli" or str(name).startswith("glassformer.cli.")
        elif importing:  # the code whose import statement asked for glassformer.cli
            return frame.f_globals.get("__name__") == "__main__"
        frame = frame.f_back
    return False


def install() -> Gate | None:
    """The gate, in force from here until a `command()` adopts it and gives it back at its end,
    when the command line's package is being imported to run the program (`_for_the_command_line`:
    it installs the gate, or keeps the package's, as it starts to import); else None, nothing
    taken."""
    if _gate is not None:
        return _gate
    if not _for_the_command_line(sys._getframe(1)):
        return None
    gate = Gate().install()
    gate.kept = gate.installed
    return gate


class command:  # noqa: N801 (used as a function: `with command(program) as gate:`)
    """The gate for one command, adopting the one `install()` put in force: a stop not acted on
    is raised again until it is. At the end the signals are given back, or, for the program
    (`program`: nothing runs after but Python's shutdown), ignored: a signal then would only end
    a finished command silently."""

    def __init__(self, program: bool = False):
        self.program = program

    def __enter__(self) -> Gate:
        self.mine = _gate is None or _gate.kept
        self.gate = _gate or Gate().install()
        if self.mine:
            self.gate.kept, self.gate.command = False, True
        return self.gate

    def __exit__(self, *exc) -> None:
        if self.mine:
            self.gate.uninstall(then=_signal.SIG_IGN if self.program else None)


class handed_over:  # noqa: N801 (used as a function: `with handed_over():`)
    """A block that runs a library which takes SIGINT and SIGTERM itself and gives them back at
    its end, raising the one it caught again (uvicorn's server: it stops gracefully). A stop
    that arrives before the library's handler is in is held (raised then, it would cut the
    library's start-up in two: a half-made event loop's __del__ fails, a coroutine is never
    awaited), then sent to that handler once it is; one that never gets there is raised at the
    end of the block, as is the one the library raises again."""

    def __enter__(self) -> None:
        self.gate = _gate
        if self.gate is not None:
            self.gate.blocks += 1
            self.gate.waiting = True
            _thread.start_new_thread(self._hand, ())

    def _hand(self) -> None:
        gate = self.gate
        while gate.waiting:
            if any(_signal.getsignal(s) is not gate for s in gate.previous):  # the library's
                gate.waiting = False
                if gate.received is not None and gate.raised_at is None:
                    _signal.pthread_kill(gate.main, gate.received)
                return
            time.sleep(0.005)

    def __exit__(self, *exc) -> None:
        gate = self.gate
        if gate is not None:
            gate.waiting = False
            gate.blocks -= 1
            if exc[0] is None:
                gate.deliver()


def whole() -> _Whole:
    """A block that a stop must not cut in two (a lock file made but not yet due for removal):
    a signal waits for its end, then is raised there. Nothing is held without a gate."""
    return (_gate or _NOBODY).whole()


def take() -> int | None:
    """The stop signal that arrived and has not been acted on (or None), now the caller's to act
    on: training takes over one that came before its first step."""
    gate = _gate
    if gate is None or gate.done or gate.received is None:
        return None
    signum, gate.received = gate.received, None
    return signum


def acted_on(e: BaseException | None = None) -> int:
    """The signal of stop `e` (a Ctrl-C for a plain KeyboardInterrupt; the gate's own for None),
    now acted on: it is not raised again, and later signals are not raised while the command
    ends."""
    gate = _gate
    signum = getattr(e, "signum", None)
    if gate is not None:
        signum = signum or gate.received
        gate.done, gate.received = True, None
    return signum or _signal.SIGINT


def unacted() -> int | None:
    """The stop signal that arrived and was never acted on (something swallowed every raise)."""
    gate = _gate
    return None if gate is None or gate.done else gate.received


_hooked = False


def _said_if_uncaught() -> None:
    """Say an uncaught Stopped in one line instead of a traceback; the program then ends by the
    signal itself, its default action restored (Python ends an uncaught KeyboardInterrupt so,
    but not a subclass of it, which would exit 1)."""
    global _hooked
    if _hooked:
        return
    _hooked, previous = True, sys.excepthook

    def hook(kind, value, tb):
        if not isinstance(value, Stopped):
            return previous(kind, value, tb)
        print(LINE, file=sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        _signal.signal(value.signum, _signal.SIG_DFL)
        _signal.raise_signal(value.signum)

    sys.excepthook = hook
