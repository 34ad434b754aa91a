"""What the command families share: running a command (its errors become one line and exit
status 2), options that several commands take, loading a model with its tokenizer, turning user
text into token ids with the checks the engines expect, decoding as the options say, and reading
and writing the user's files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from glassformer import files, inference, loading, weights
from glassformer.config import PRESETS
from glassformer.errors import GlassformerError, Interrupted

EXIT_USAGE = 2


def run(args) -> int:
    """Run the parsed command: a user error is one line on stderr and exit status 2, never a
    traceback; an interrupted run says what it kept (exit 128 + signal); Ctrl-C elsewhere is one
    line and 130; a closed pipe (`glassformer ... | head`) is success; a full stdout is one line."""
    try:
        with np.errstate(all="ignore"):  # non-finite values are found and named, not warned of
            code = args.func(args) or 0
        sys.stdout.flush()
        return code
    except GlassformerError as e:
        print(f"glassformer: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as e:  # the work so far was saved; the message says how to continue
        print(f"glassformer: {e}", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("glassformer: interrupted", file=sys.stderr)
        return 130
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


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `glassformer: error: ...` and exit 2, no usage block."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"glassformer: error: {message} (see {self.prog} --help)\n")


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


SEED = integer("seed", 0, SEED_LIMIT, says="an integer in [0, 2**32)")


# -- options shared by several commands ---------------------------------------------------------


def report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write one self-contained HTML page (no network needed) that follows the data "
        "through the model, instead of printing the steps",
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
    """Before any work: --html, --json and --png may be written (nothing replaced unasked)."""
    output_file(args.html, args.overwrite)
    output_file(args.json, args.overwrite)
    if args.png:
        output_folder(args.png, args.overwrite)


def decoding_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--strategy",
        choices=["greedy", "sample", "beam"],
        default="greedy",
        help="greedy (default), sample (temperature/top-k/top-p) or beam search",
    )
    p.add_argument(
        "--temperature",
        type=real("temperature", 0.0, says="a finite number > 0"),
        default=1.0,
        help="sampling temperature (1.0)",
    )
    p.add_argument(
        "--top-k",
        type=integer("top-k", 1),
        default=None,
        help="sample from the k most likely",
    )
    p.add_argument(
        "--top-p",
        type=real("top-p", 0.0, 1.0, says="in (0, 1]"),
        default=None,
        help="nucleus sampling threshold",
    )
    p.add_argument("--seed", type=SEED, default=None, help="sampling seed (same seed, same text)")
    p.add_argument(
        "--beam-width",
        type=integer("beam width", 1),
        default=4,
        help="beam search width (4)",
    )
    p.add_argument(
        "--length-penalty",
        type=real("length-penalty", says="a finite number"),
        default=1.0,
        help="beam score = log-prob / generated_tokens^penalty (1.0)",
    )


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


def load_model(path: str):
    """A checkpoint or Hugging Face folder that can take text: (cfg, params, tokenizer)."""
    cfg, params, tok = loading.load(path)
    if tok is None:
        raise GlassformerError(
            f"checkpoint {path} has no {weights.TOKENIZER_FILE}: text cannot "
            "be encoded; save it with its tokenizer"
        )
    return cfg, params, tok


def bos(tok) -> list[int]:
    if tok.bos_id is None:
        raise GlassformerError("the tokenizer has no start token (SOS/BOS) to start decoding from")
    return [tok.bos_id]


def encode(tok, text: str, cfg, room: int = 0) -> list[int]:
    """Token ids of user text, with the checks the engines expect (never empty, never too long)."""
    if not text.strip():
        raise GlassformerError("the text is empty: give at least one word")
    ids, unknown = tok.encode_for_model(text)
    if not ids:
        raise GlassformerError("the text has no tokens: give at least one word")
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        print(
            f"glassformer: note: {len(unknown)} unknown token(s) mapped to "
            f"{tok.specials.get('unk')}: {shown}",
            file=sys.stderr,
        )
    limit = cfg.max_len - room
    if len(ids) > limit:
        raise GlassformerError(
            f"the text has {len(ids)} tokens but the model takes at most "
            f"{limit} (max_len {cfg.max_len}); shorten it"
        )
    return ids


def run_decoding(args, step, prompt: list[int], tok, cfg, params, src=None):
    """Greedy, sampling or beam search as the decoding options say: a Generation or BeamResult.
    Non-finite logits stop it with one line naming where they start."""
    from glassformer import numerics

    max_new = args.max_new_tokens if args.max_new_tokens is not None else cfg.max_len
    if max_new < 1:
        raise GlassformerError("--max-new-tokens must be at least 1")
    if args.strategy == "beam" and args.beam_width > cfg.vocab_size:
        raise GlassformerError(
            f"--beam-width {args.beam_width} is more than the vocabulary ({cfg.vocab_size} "
            "tokens); use at most the vocabulary size"
        )
    step = numerics.checked(step, params, cfg, len(prompt), src)
    return inference.run_decoding(
        step,
        prompt,
        max_new_tokens=max_new,
        eos_id=tok.eos_id,
        max_len=cfg.max_len,
        strategy=args.strategy,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        beam_width=args.beam_width,
        length_penalty=args.length_penalty,
    )


# -- files --------------------------------------------------------------------------------------


def read_text(path: str) -> str:
    """A user's UTF-8 text file: BOM dropped, CRLF read as LF; binary, non-UTF-8 or empty files
    are one clear error naming the line."""
    from glassformer.data import read_file

    return read_file(path)


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
        last = log.read_text(encoding="utf-8").strip().splitlines()[-1]
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    step = last.split(",")[0]
    return step if step.isdecimal() else None


def output_folder(path: str, overwrite: bool, what: str = "") -> Path:
    """Check before any work that folder `path` may be written: nothing existing is replaced
    unless --overwrite is given (an empty folder is free)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise GlassformerError(f"{p} is a file, not a directory; choose another output folder")
    if p.is_dir() and any(p.iterdir()) and not overwrite:
        raise GlassformerError(
            f"{p} already holds {describe(p)}; give --overwrite to replace it{what}, or choose "
            "another output folder"
        )
    return p


def not_onto_itself(source: str, out: str) -> None:
    """Refuse to write a model onto the folder it is read from (or into it)."""
    a, b = Path(source).resolve(), Path(out).resolve()
    if a == b or b.is_relative_to(a):
        raise GlassformerError(
            f"{out} is {source} itself (or inside it): writing there would replace what is read; "
            "cannot export onto itself, choose another output folder"
        )


def output_file(path: str | None, overwrite: bool) -> None:
    """Check before any work that the report file `path` may be written ('-' is stdout)."""
    if path is None or path == "-":
        return
    p = Path(path)
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


def write_json(path: str, data: dict) -> None:
    text = json.dumps(data, ensure_ascii=False, default=json_default)
    if path == "-":
        print(text)
        return
    write_text(path, text + "\n")


def write_text(path: str, text: str) -> None:
    """Write a report file atomically (a full disk leaves the old file as it was)."""
    files.write_file(path, text.encode("utf-8"))


def json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)
