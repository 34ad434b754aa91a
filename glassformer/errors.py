"""The one error family of glassformer.

Every error a user can cause is a `GlassformerError` whose message says what was wrong and what to
do. The CLI prints it as one line and exits non-zero; library callers catch it like any exception.
"""


def install_hint(extra: str) -> str:
    """What to do when an optional dependency is missing: its extra, installed from the clone
    (glassformer is not on PyPI)."""
    return f"install the {extra} extra: pip install '.[{extra}]' in the glassformer folder"


INSTALL_TORCH = install_hint("torch")


class GlassformerError(Exception):
    """Bad input, bad configuration or a bad file: the message says what to do about it."""


class ConfigError(GlassformerError, ValueError):
    """A Config field has a value that is not allowed."""


class CheckpointError(GlassformerError):
    """A checkpoint directory is missing, incomplete or corrupt."""


class TokenizerError(GlassformerError):
    """Text that the tokenizer cannot encode, or a tokenizer file it cannot read."""


class InputError(GlassformerError, ValueError):
    """An argument a library function cannot take: token ids that are not integers or lie outside
    the vocabulary, a mask or an array of the wrong shape, a params dict lacking a tensor, a
    decoding value outside its range. Raised at the public entry point, before any work."""


class OutputExists(GlassformerError, FileExistsError):
    """A writer was asked to replace an existing file or folder without overwrite=True."""


def yes_or_no(overwrite) -> bool:
    """`overwrite` as the library's writers take it: True or False itself ('no' and 1 are not
    a yes, as any truthy value would be), else one InputError line."""
    if overwrite is not True and overwrite is not False:
        raise InputError(f"overwrite={overwrite!r}: must be True or False")
    return overwrite


class TraceError(GlassformerError, KeyError):
    """A step name that the trace did not record (a KeyError, so `in`-style code keeps working)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Interrupted(Exception):
    """Work stopped by a signal (Ctrl-C = SIGINT, SIGTERM) after its results were saved.

    Not a GlassformerError: nothing was wrong with the input. `signum` says which signal;
    `message` says what was kept and how to continue. The CLI exits 128 + signum."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
