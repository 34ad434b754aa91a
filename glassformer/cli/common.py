"""What the command families share: running a command (its errors become one line and exit
status 2), options that several commands take, loading a model with its tokenizer, turning user
text into token ids with the checks the engines expect, and reading and writing the user's
files (decoding as the options say is in `decoding`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from glassformer import files, interrupts, weights
from glassformer.cli.flags import ARGPARSE_NAMES, flag, said
from glassformer.config import PRESETS
from glassformer.devices import default_threads, use_threads
from glassformer.errors import INSTALL_TORCH, GlassformerError, Interrupted, install_hint
from glassformer.model import DTYPES, Model, check_dtype
from glassformer.results import Result, to_json

EXIT_USAGE = 2
# The optional dependencies, each with the extra that installs it (pyproject.toml).
EXTRAS = dict.fromkeys(("torch", "tqdm", "matplotlib", "sacrebleu"), "torch")


def run(args) -> int:
    """Run the parsed command: a user error is one line on stderr and exit status 2, never a
    traceback; an interrupted run says what it kept (exit 128 + signal); a Ctrl-C or SIGTERM
    elsewhere is one line and 128 + the signal; a closed pipe (`glassformer ... | head`) is
    success; a full stdout is one line; a missing optional dependency names the extra that
    installs it. The command's notes follow its output."""
    NOTES.clear()
    try:
        threads = getattr(args, "threads", None)  # the process's, before any work
        if threads is None and hasattr(args, "threads") and not getattr(args, "resumable", False):
            threads = default_threads()  # (train chooses its own: the run keeps it)
        if threads is not None:
            told = use_threads(threads)  # (a note when BLAS's threads cannot be set)
            if told is not None:
                note(told)
        with np.errstate(all="ignore"):  # non-finite values are found and named, not warned of
            code = args.func(args) or 0
        sys.stdout.flush()
        for line in NOTES:
            print(f"glassformer: note: {line}", file=sys.stderr)
        return code
    except GlassformerError as e:
        print(f"glassformer: error: {said(e)}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as e:  # an optional dependency, imported where it is needed
        extra = EXTRAS.get((e.name or "").split(".")[0])
        if extra is None:
            raise
        print(
            f"glassformer: error: {args.command} needs {e.name.split('.')[0]}, which is not "
            f"installed: {install_hint(extra)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except Interrupted as e:  # the work so far was saved; the message says how to continue
        print(f"glassformer: {said(e)}", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (interrupts.Stopped), anywhere in it
        signum = interrupts.acted_on(e)
        print(interrupts.LINE, file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:  # `glassformer ... | head`: the reader has all it wanted
        _drop_stdout()
        return 0
    except OSError as e:  # stdout on a full device; files are written through glassformer.files
        _drop_stdout()
        where = "stdout" if e.filename is None else e.filename
        print(f"glassformer: error: cannot write to {where} ({e.strerror or e})", file=sys.stderr)
        return EXIT_USAGE


def _drop_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


NOTES: list[str] = []


def note(message: str) -> None:
    """A one-line note for stderr: what the command decided for the user, said once, after its
    output (and not at all when it is refused: a refusal is its one error line), in the command
    line's words (`flags.said`)."""
    message = said(message)
    if message not in NOTES:
        NOTES.append(message)


def did_you_mean(word: str, choices) -> str:
    """'; did you mean X?' for the choice closest to a mistyped `word` (difflib), or ''."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {found[0]}?" if found else ""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `glassformer: error: ...` and exit 2, no usage block; a
    mistyped command, choice or option gets the nearest valid one suggested."""

    def error(self, message: str):
        message += self._suggestion(message)
        self.exit(EXIT_USAGE, f"glassformer: error: {message} (see {self.prog} --help)\n")

    def _suggestion(self, message: str) -> str:
        import re

        choice = re.search(r"invalid choice: '(.*)' \(choose from (.*)\)$", message)
        if choice:
            return did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]))
        unknown = re.match(r"unrecognized arguments: (.*)$", message)
        if unknown:
            options = [o for a in self._actions for o in a.option_strings]
            for arg in unknown[1].split():
                if arg.split("=")[0] in options:
                    return f"; {arg} came after '--', which makes everything after it text"
                if arg.startswith("-") and (hint := did_you_mean(arg.split("=")[0], options)):
                    return hint
        return ""


class CommandParser(Parser):
    """A subcommand's parser: options may come anywhere among its positional arguments
    (`translate CKPT --beam 1 "text"`), and what it does not know is refused here, where the
    command's own options can be suggested."""

    _mixing = False

    def parse_known_args(self, args=None, namespace=None):
        if self._mixing:  # the inner passes of parse_known_intermixed_args
            return super().parse_known_args(args, namespace)
        self._mixing = True
        try:
            namespace, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


# -- argument types: every number is checked where it enters -----------------------------------

SEED_LIMIT = 2**32


def integer(name: str, minimum: int, below: int | None = None, says: str = ""):
    """An argparse type: an int >= minimum (and < below); `says` replaces the range's wording."""

    def convert(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {raw!r}") from None
        if value < minimum or (below is not None and value >= below):
            wording = says or (f">= {minimum}" if below is None else f"in [{minimum}, {below})")
            raise argparse.ArgumentTypeError(f"{name} must be {wording}, got {value}")
        return value

    return convert


def real(name: str, low: float | None = None, high: float | None = None, says: str = ""):
    """An argparse type: a finite float with low < value <= high (either bound optional)."""

    def convert(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid float value: {raw!r}") from None
        ok = math.isfinite(value)
        ok = ok and (low is None or value > low) and (high is None or value <= high)
        if not ok:
            raise argparse.ArgumentTypeError(f"{name} must be {says}, got {value}")
        return value

    return convert


def option_type(name: str):
    """The argparse type of the library's parameter `name`, made from its row of
    `glassformer.arguments.ARGS` (one range for both, in the command line's words)."""
    from glassformer.arguments import ARGS, Int

    r, called = ARGS[name], ARGPARSE_NAMES.get(name) or flag(name)
    if isinstance(r, Int):
        return integer(called, r.low, r.below, says=r.says)
    return real(called, r.low, r.high, says=r.says)


SEED = option_type("seed")


# -- options shared by several commands ---------------------------------------------------------


def report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write one self-contained HTML page (no network needed) that follows the data "
        "through the model, instead of printing the steps ('-': stdout)",
    )
    p.add_argument(
        "--png",
        metavar="DIR",
        help="write one attention heatmap PNG per layer, head and kind to DIR (needs matplotlib)",
    )
    p.add_argument(
        "--layers",
        metavar="LIST",
        help="only these blocks of the model, counted from 0, e.g. 0,1 (every output)",
    )
    p.add_argument(
        "--heads", metavar="LIST", help="only these attention heads, counted from 0, e.g. 0"
    )
    overwrite_arg(p)


def check_report_outputs(args) -> None:
    """Before any work: --html, --json and --png may be written (nothing replaced unasked, none
    onto the model read nor onto another: `apart`); '-' (stdout) is for one of --json and
    --html."""
    if args.json == "-" and args.html == "-":
        raise GlassformerError("--json - and --html - would both write to stdout; give one a file")
    if args.png == "-":
        raise GlassformerError("--png writes one file per map: give a folder, not '-'")
    apart(
        {"--json": args.json, "--html": args.html, "--png": args.png},
        {"CHECKPOINT": getattr(args, "checkpoint", None)},  # walkthrough reads no model
    )
    output_file(args.html, args.overwrite)
    output_file(args.json, args.overwrite)
    if args.png:
        output_folder(args.png, args.overwrite)


def config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preset",
        default="hello-world",
        choices=list(PRESETS),
        help="starting config (default hello-world)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set d_model=64 (repeatable)",
    )


# -- models and user text -----------------------------------------------------------------------


def load_model(path: str, engine: str = "auto", dtype: str | None = None, device: str = "cpu"):
    """A checkpoint or Hugging Face folder that can take text, as a `glassformer.model.Model`
    whose notes are the command's (its threads: `run`'s, from --threads)."""
    m = Model.load(path, engine=engine, dtype=dtype, on_note=note, device=device)
    m.runtime.need_tokenizer()
    return m


def need_torch(what: str, instead: str = "") -> None:
    """One clear line, before any work, where `what` needs PyTorch and it is not installed (the
    `torch` extra); `instead`: what works without it."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise GlassformerError(
            f"{what} needs PyTorch, which is not installed: "
            + (f"{instead}, or " if instead else "")
            + INSTALL_TORCH
        ) from None


def dtype_arg(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default=None,
        help=f"the PyTorch engine's precision (default {default}); int8: its linear layers "
        "quantized to int8 (CPU only; fastest, logits within a few percent)",
    )


def threads_arg(p: argparse.ArgumentParser, default: int | None = None, says: str = "") -> None:
    """--threads N: PyTorch's and NumPy BLAS's threads for the command (`run` sets them before
    any work; `devices.use_threads`); None: `devices.default_threads`, the cores less the other
    runnable tasks at start."""
    p.add_argument(
        "--threads",
        type=option_type("threads"),
        default=default,
        metavar="N",
        help=says
        or "run PyTorch and NumPy's BLAS on N threads (default: the cores less the other "
        "runnable tasks at start, at least 1; OMP_NUM_THREADS, when set, is kept)",
    )


def device_arg(p: argparse.ArgumentParser, what: str = "the PyTorch engine runs") -> None:
    p.add_argument(
        "--device",
        default="cpu",
        help=f"where {what}: cpu (default), cuda or cuda:N (a GPU that PyTorch sees)",
    )


def engine_dtype(args, default: str) -> str:
    """The PyTorch engine's dtype from --dtype (default `default`), checked before any work:
    --dtype with --engine reference (NumPy float64) is refused; int8 needs PyTorch's x86
    kernels."""
    if args.dtype is None:
        return default
    check_dtype(args.dtype, getattr(args, "engine", "torch"))
    return args.dtype


# -- files --------------------------------------------------------------------------------------


def read_text(path: str) -> str:
    """A user's UTF-8 text file: BOM dropped, CRLF read as LF; binary, non-UTF-8 or empty files
    are one clear error naming the line."""
    from glassformer.data import read_file

    return read_file(path)


def input_lines(texts: list[str], path: str | None) -> list[str]:
    """TEXT arguments, then the lines of --input FILE (its final newline ends its last line);
    blank lines are kept, so that outputs line up with inputs."""
    lines = list(texts)
    if path:
        lines += read_text(path).split("\n")
        if lines[-1] == "":
            lines.pop()
    return lines


def describe(path: Path) -> str:
    """What is at `path`, for a refusal: a checkpoint with its step and date, a folder, a file."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
    if path.is_file():
        return f"a file ({path.stat().st_size:,} bytes, modified {when})"
    if (path / weights.CONFIG_FILE).is_file():
        step = last_step(path / "log.csv")
        return f"a checkpoint ({f'step {step}, ' if step else ''}saved {when})"
    n = sum(1 for _ in path.iterdir())
    return f"a folder with {n} entr{'y' if n == 1 else 'ies'} (modified {when})"


def last_step(log: Path) -> str | None:
    try:
        last = files.member(log.parent, log.name).read_text(encoding="utf-8")
        last = last.strip().splitlines()[-1]
    except (OSError, UnicodeDecodeError, IndexError, GlassformerError):  # a log linking out too
        return None
    step = last.split(",")[0]
    return step if step.isdecimal() else None


def output_folder(path: str, overwrite: bool, what: str = "") -> Path:
    """Check before any work that folder `path` may be written: nothing existing is replaced
    unless --overwrite is given (an empty folder is free), and a link there is never written
    through (files.refuse_link)."""
    p = Path(path)
    files.refuse_link(p)
    if p.exists() and not p.is_dir():
        raise GlassformerError(f"{p} is a file, not a directory; choose another output folder")
    if p.is_dir() and any(p.iterdir()) and not overwrite:
        raise GlassformerError(
            f"{p} already holds {describe(p)}; give --overwrite to replace it{what}, or choose "
            "another output folder"
        )
    return p


FOLDER_INPUTS = ("CHECKPOINT", "HF_DIR", "CKPT", "--init", "DIR", "SAE", "--store")  # folders


def apart(outputs: dict[str, str | None], inputs: dict[str, str | None]) -> None:
    """The one rule between what a command writes and what it reads, checked before any work,
    --overwrite or not: an output (`{label: path}`, e.g. {"--record": ...}) may not be one of the
    command's inputs (the --input file, --data, the model folder, ...), lie inside one (a file in
    the model folder read) or hold one (an output folder whose swap would remove it), every link
    and `..` resolved; nor may two outputs be one place. None and '-' (stdout) are skipped, and an
    input only counts when something is there (a shipped corpus is a name, not a path) and, for a
    file's option, when it is not a folder (its reader refuses a folder in its own words)."""
    outs = [(label, path) for label, path in outputs.items() if path not in (None, "-")]
    ins = [
        (label, path)
        for label, path in inputs.items()
        if path and os.path.lexists(path) and (label in FOLDER_INPUTS or not os.path.isdir(path))
    ]
    for n, (label, path) in enumerate(outs):
        for other, input_path in ins:
            relation = _overlap(path, input_path)
            if relation:
                raise GlassformerError(
                    f"{label} {path} {relation} {other} {input_path}, which this command reads: "
                    "a command never writes onto itself, even with --overwrite; choose an output "
                    "apart from it"
                )
        for other, other_path in outs[n + 1 :]:
            relation = _overlap(path, other_path)
            if relation:
                raise GlassformerError(
                    f"{label} {path} {relation} {other} {other_path}: one output would replace "
                    "the other; give each its own path"
                )


def _overlap(a: str, b: str) -> str | None:
    """How path `a` meets path `b` ('is', 'lies inside', 'holds'), links resolved, or None."""
    ra, rb = Path(a).resolve(), Path(b).resolve()
    same = ra == rb
    if not same and os.path.exists(a) and os.path.exists(b):
        same = os.path.samefile(a, b)  # a hard link, a bind mount: one file by two names
    if same:
        return "is"
    if ra.is_relative_to(rb):
        return "lies inside"
    return "holds" if rb.is_relative_to(ra) else None


def output_file(path: str | None, overwrite: bool) -> None:
    """Check before any work that the report file `path` may be written ('-' is stdout): not a
    folder, not a link (files.refuse_link), nothing replaced unless --overwrite is given."""
    if path is None or path == "-":
        return
    p = Path(path)
    files.refuse_link(p)
    if p.is_dir():
        raise GlassformerError(f"{p} is a folder; give a file name")
    if p.exists() and not overwrite:
        raise GlassformerError(
            f"{p} already exists ({describe(p)}); give --overwrite to replace it, or choose "
            "another file name"
        )


def overwrite_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--overwrite", action="store_true", help="replace what already exists at the output path"
    )


def write_outputs(args, text, *, data=None, data_what="", page=None, page_what=None, done=()):
    """What the options ask for: `data` to --json FILE and `page` (an HTML document, made before
    anything is written) to --html FILE, '-' for stdout; each file followed by one 'wrote ...'
    line (`data_what` names the data; `page_what`, else the page's size), then the lines of
    `done` (work already written), all on stderr when a report goes to stdout. `text()`, the
    printed report, only when no output was asked for."""
    lines = []
    if args.json:
        write_json(args.json, data)
        if args.json != "-":
            lines.append(f"wrote {data_what} to {args.json}")
    if page is not None:
        if args.html == "-":
            sys.stdout.write(page)
        else:
            write_text(args.html, page)
            size = f"{args.html} ({len(page.encode('utf-8')) / 1e6:.2f} MB)"
            lines.append(f"wrote {page_what} to {args.html}" if page_what else f"wrote {size}")
    lines += list(done)
    if not (args.json or page is not None or done):
        print(text())
        return
    stream = sys.stderr if "-" in (args.json, args.html) else sys.stdout
    for line in lines:
        print(line, file=stream)


def write_json(path: str, data: dict | Result) -> None:
    """A result's JSON (`to_json()`), or a dict's as the results write theirs."""
    text = data.to_json() if isinstance(data, Result) else to_json(data)
    if path == "-":
        print(text)
        return
    write_text(path, text + "\n")


def write_text(path: str, text: str) -> None:
    """Write a report file atomically (a full disk leaves the old file as it was)."""
    files.write_file(path, text.encode("utf-8"))
