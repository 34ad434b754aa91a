"""Ctrl-C while modules are being imported: held until the import is done, then delivered.

A SIGINT that lands while a C extension initialises (PyTorch's, during `import torch`) throws
through C++ and aborts the process ("terminate called after throwing an instance of ...
KeyboardInterrupt", exit -6); one that lands in a pure-Python import leaves a traceback before
the command line's handler is in place. So the package's own imports and the command line run
inside `hold_during_imports()`: while it is active, a Ctrl-C inside an import is held until the
import finishes and is then raised as the usual KeyboardInterrupt (outside imports it is raised
at once, as Python does). A KeyboardInterrupt that ends the program out of an interrupted
`import glassformer` is said in one line, `glassformer: interrupted`, instead of a traceback.

It does nothing outside the main thread, or where SIGINT is not Python's default handler (a
program that set its own keeps it). Light on purpose: it runs before NumPy is imported.
Deliberately not here: what a command does on Ctrl-C (`cli.common.run`), training's save on
SIGINT and SIGTERM (`train.py`).
"""

from __future__ import annotations

import _signal  # the built-in modules only: `signal` and `threading` take milliseconds to import
import _thread
import sys
import time

RETRY_S = 0.05  # how often a held Ctrl-C looks again whether the import is done


def _importing(frame) -> bool:
    """Whether the main thread, stopped at `frame`, is inside an import."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class _Hold:
    """The SIGINT handler: hold inside an import or a `whole()` block (and look again soon),
    else raise."""

    def __init__(self, active: bool = True):
        self.active, self.pending, self.depth = active, False, 0

    def __call__(self, signum, frame):
        if self.active and (self.depth or _importing(frame)):
            self.pending = True
            _thread.start_new_thread(self._again, ())
            return
        self.pending = False
        raise KeyboardInterrupt

    def _again(self) -> None:
        time.sleep(RETRY_S)
        if self.active and self.pending:
            _thread.interrupt_main(_signal.SIGINT)  # runs the handler again in the main thread

    def whole(self) -> _Whole:
        """A block that a Ctrl-C must not cut in two (argparse's intermixed parsing leaves a
        broken parser behind): held to its end, then raised."""
        return _Whole(self)


class _Whole:
    def __init__(self, hold: _Hold):
        self.hold = hold

    def __enter__(self):
        self.hold.depth += 1

    def __exit__(self, *exc) -> None:
        hold = self.hold
        hold.depth -= 1
        if exc[0] is None and hold.pending and hold.active and not hold.depth:
            hold.pending = False
            raise KeyboardInterrupt


class hold_during_imports:  # noqa: N801 (used as a function: `with hold_during_imports():`)
    """While active, a Ctrl-C during an import waits for the import to finish; one still held
    when the block ends is raised there as KeyboardInterrupt. `as` gives the handler, whose
    `whole()` holds a Ctrl-C to the end of a block."""

    def __enter__(self) -> _Hold:
        self.hold = _Hold(active=False)
        if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
            try:
                _signal.signal(_signal.SIGINT, _Hold())
            except ValueError:  # not the main thread: Python delivers signals there only
                return self.hold
            self.hold = _signal.getsignal(_signal.SIGINT)
        return self.hold

    def __exit__(self, *exc) -> None:
        if not self.hold.active:
            return
        self.hold.active = False
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        if exc[0] is None and self.hold.pending:
            raise _said_if_uncaught(KeyboardInterrupt())


def _said_if_uncaught(exc: BaseException) -> BaseException:
    """`exc`, which the interpreter reports as one line instead of a traceback if nothing
    catches it (the program then ends by SIGINT, exit status 130 in a shell)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        if value is exc:
            print("glassformer: interrupted", file=sys.stderr)
        else:
            previous(kind, value, tb)

    sys.excepthook = hook
    return exc
