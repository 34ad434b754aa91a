"""The one error family of glassformer.

Every error a user can cause is a `GlassformerError` whose message says what was wrong and what to
do. The CLI prints it as one line and exits non-zero; library callers catch it like any exception.

A message names the parameters it is about as Python spells them (`position=99: ...`): it writes
each as `param("position", 99)`, a reference that the error (and `said`, for a note) renders as
`position=99`, and that the command line renders once, through its table of flags
(`glassformer/cli/flags.py`), as `--position 99`. A reference is the parameter's name and value
between private-use characters (U+E000..U+E002), so that it survives being put into f-strings
and is found again exactly, never guessed from the prose around it.
"""

import re
import shlex
import sys
from pathlib import Path


def checkout() -> Path | None:
    """The folder glassformer runs from when it is a clone (an editable install, or the source
    tree itself): the one holding the package, pyproject.toml and constraints.txt; else None."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "constraints.txt").is_file():
        return root
    return None


def install_hint(extra: str | None) -> str:
    """What to do when a dependency is missing, as a command that works as printed: this
    Python's pip, installing the clone glassformer runs from again in place (editable, so that
    edits keep taking effect) with `extra` ("serve"; "torch,hf" for two; None: the core
    dependencies) and the versions of its constraints.txt. Where glassformer was not installed
    from a clone (it is not on PyPI): the packages the extra names in the installed package's
    metadata. The command ends the line."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    what = (
        "reinstall glassformer's dependencies"
        if extra is None
        else (f"install the {' and '.join(extra.split(','))} extra{'s' * (',' in extra)}")
    )
    root = checkout()
    if root is None:
        needed = " ".join(shlex.quote(r) for r in _requirements(extra))
        if not needed:  # neither a clone nor installed: the clone's own command, run in it
            needed = "-c constraints.txt -e " + shlex.quote(f".[{extra}]" if extra else ".")
            return f"{what}, in a glassformer clone: {pip} {needed}"
        return f"{what}: {pip} {needed}"
    target = str(root) if extra is None else f"{root}[{extra}]"
    constraints = shlex.quote(str(root / "constraints.txt"))
    return f"{what}: {pip} -c {constraints} -e {shlex.quote(target)}"


def _requirements(extra: str | None) -> list[str]:
    """The requirements the installed glassformer's metadata gives `extra` (None: the core)."""
    from importlib import metadata

    try:
        declared = metadata.requires("glassformer") or []
    except metadata.PackageNotFoundError:
        return []
    wanted = set() if extra is None else set(extra.split(","))
    found = []
    for line in declared:
        requirement, _, marker = (part.strip() for part in line.partition(";"))
        named = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", marker)
        if (named.group(1) in wanted) if named else (extra is None and not marker):
            found.append(requirement)
    return found


INSTALL_TORCH = install_hint("torch")


# -- references to parameters ---------------------------------------------------------------------

_OPEN, _SEP, _CLOSE = "\ue000", "\ue001", "\ue002"
_PART = f"([^{_OPEN}-{_CLOSE}]*)"
_REF = re.compile(f"{_OPEN}{_PART}(?:{_SEP}{_PART}{_SEP}{_PART})?{_CLOSE}")
_NO_VALUE = object()


def param(name: str, value=_NO_VALUE, *, text: str | None = None, flag_alone=False) -> str:
    """A reference to the parameter `name` in a message: `name=value` in Python, the command
    line's flag and value there (`--position 99`). `value` is shown as Python writes it (a str
    quoted) and as the command line reads it (unquoted; a tuple comma-separated; True: the flag
    alone); `text`: one wording for both instead (a placeholder, TOKEN; a value already quoted);
    `flag_alone`: the command line names the flag without its value (the line the user typed
    shows it). `name` may be qualified by its method ("attribute.steps": `steps` in Python)
    where one name is two flags; a class's method ("Config.override") is written as a call
    (`Config.override('x')`)."""
    if text is None and value is _NO_VALUE:
        return f"{_OPEN}{name}{_CLOSE}"
    py = text if text is not None else repr(value) if isinstance(value, str | tuple) else str(value)
    cli = text if text is not None else str(value)
    if text is None and isinstance(value, tuple):  # the command line's lists: comma-separated
        cli = ",".join(map(str, value))
    if value is True or flag_alone:  # a switch; or a value only Python's words show
        cli = ""
    return f"{_OPEN}{name}{_SEP}{py}{_SEP}{cli}{_CLOSE}"


def verb(name: str, given: str | None = None) -> str:
    """A reference to the Model's method `name` in a message: `Model.record` in Python, what the
    command line does for it there (`--record`); `given`: a reference to what it is called with
    (`Model.generate(engine='reference')`, `generate --engine reference`)."""
    return param(f"Model.{name}") if given is None else param(f"Model.{name}", text=given)


def references(message: str) -> list[tuple[str, str | None, str | None]]:
    """The parameters a message refers to: (name, Python value, command-line value) each."""
    return [(m[1], m[2], m[3]) for m in _REF.finditer(message)]


def rendered(message: str, flag) -> str:
    """`message` with each reference written by `flag(name, python_value, cli_value)`, the
    innermost first (a reference in a method's `given`)."""
    while (done := _REF.sub(lambda m: flag(m[1], m[2], m[3]), message)) != message:
        message = done
    return message


def _python(name: str, py: str | None, cli: str | None) -> str:
    if name.startswith("glassformer."):  # a function of the package: `glassformer.models()`
        return f"{name}()"
    if name[:1].isupper():  # a method, "Model.record": `Model.record`, `Config.override('x')`
        return name if py is None else f"{name}({py})"
    name = name.rsplit(".", 1)[-1]  # "attribute.steps": the parameter `steps`
    return name if py is None else f"{name}={py}"


def python(message: str) -> str:
    """A message as Python says it: each reference as `name` or `name=value`."""
    return rendered(message, _python)


class Said(str):
    """A note or message as Python says it (the str itself), keeping the references it was
    written with (`template`) for the command line to write its flags in."""

    template: str

    def __new__(cls, message: str):
        template = getattr(message, "template", message)
        said = super().__new__(cls, python(template))
        said.template = template
        return said


class GlassformerError(Exception):
    """Bad input, bad configuration or a bad file: the message says what to do about it. Its
    str (and args) say the parameters as Python spells them; `template` keeps the references
    (`param`) for the command line, and for a message that puts this one inside it."""

    def __init__(self, *args):
        first = args[0] if args and isinstance(args[0], str) else None
        self.template = getattr(first, "template", first)
        if first is not None:
            args = (python(self.template), *args[1:])
        super().__init__(*args)


def template(e: BaseException) -> str:
    """The message of `e` with its references, to be put inside another message."""
    return getattr(e, "template", None) or str(e)


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
