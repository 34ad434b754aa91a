"""The `glassformer` command line: the only package that prints or exits.

    glassformer walkthrough hello-world|self-attention [--json FILE] [--all] [REPORT OPTIONS]
    glassformer explain CKPT "text" [--json FILE] [--only SUBSTRING] [REPORT OPTIONS]
                        [--ablate NAME ...] [--patch-from "other text"] [--find-nan]
    glassformer explain RUN_DIR --over-training [--html FILE] [--json FILE]   (a training
                        time-lapse, recorded by train --snapshot-views TEXT --view-every N)
    glassformer lens CKPT "text" [--dla TOKEN [--versus TOKEN]]   (the logit lens)
    glassformer attribute CKPT "text" [--method integrated_gradients|gradient_x_input]
    glassformer faithfulness CKPT "text" [--target TOKEN] [--versus TOKEN] [--position P]
                             [--json FILE] [--html FILE] [--png FILE]   (which explanation to trust)
    glassformer generate CKPT "text" | --input FILE [--strategy greedy|sample|beam] [--engine ...]
                         [--dtype float64|float32|int8]
    glassformer translate CKPT "text" ... | --input FILE [--beam N] [--dtype float32|int8]
    glassformer train lm|translate|classify --out DIR [--data ...] [--set key=value] [--resume]
                      [--snapshot-views TEXT [--view-every N]]
    glassformer eval CKPT --data FILE
    glassformer models [FOLDER] [--json]   (shipped models, presets, and the models in FOLDER)
    glassformer config [--preset NAME] [--set key=value ...]
    glassformer init OUT [--preset NAME] [--set key=value ...] [--tokenizer ...] [--seed N]
    glassformer export CKPT OUT [--dtype float16] [--average K]
    glassformer import-hf HF_DIR OUT           (GPT-2, BERT / MiniLM, Marian, Pegasus folders)
    glassformer import-nanogpt CKPT OUT [--meta FILE | --vocab-from TEXT | --tokenizer FILE]
    glassformer export-hf CKPT OUT             (decoder -> GPT-2, encoder -> BERT,
                                                pre-LN encoder-decoder -> Pegasus)
    glassformer embed MODEL "text" ... [--engine torch|reference] [--json]
    glassformer classify CKPT "text" ... | --input FILE [--engine ...] [--json]
    glassformer serve [MODEL_DIR ...] [--port 8000] [--dtype ...]   (the live explorer)
    glassformer exercises [start N [DIR] | check N FILE]   (the graded path, checked)
    glassformer diff MODEL "text" [--engines reference,torch,float32,int8,hf] [--tol 1e-6]
                     [--json FILE] [--html FILE]   (where engines part, step by step)
    glassformer sae train DIR --step NAME --features F (--l1 L | --topk K) --out SAE [--resume]
    glassformer sae eval SAE MODEL FILE [--html F]   (sparse autoencoders on a store's step)
    glassformer record-corpus MODEL FILE --steps GLOBS --out DIR [--engine torch|reference]
                     [--dtype float32|float64|int8] [--side source|target] [--max-tokens N]
                     (activations over a corpus, on disk; resumable; under torchrun too)
    glassformer top DIR --unit UNIT [--k 20] [--sae SAE] [--html FILE] [--json FILE]
                     (the contexts of a store that activate a unit most)

Wherever a checkpoint is taken, a Hugging Face model folder or a nanoGPT out_dir works too (read
on the fly).

REPORT OPTIONS: --html FILE (one self-contained page), --png DIR (attention heatmaps),
--layers 0,1 and --heads 0 (only these blocks and heads of the model).

Every user error becomes one line on stderr and exit status 2; what a command decided for the
user (an implied strategy, a sliding window, why generation stopped) is one `glassformer: note:`
line each on stderr after its output; nothing here does math. Bare `glassformer` prints the help
to stdout and exits 0; `glassformer --version` says the installed version. Options may come
anywhere among a command's positional arguments.

One module per command family, each adding its subcommands with `add_parsers(sub)`: `reports`
(walkthrough, explain; `touch` holds explain's --ablate and --patch-from), `probe` (lens,
circuit, attribute), `faithfulness`, `generate` (generate, translate), `training` (train, eval),
`checkpoints` (config, init, export, import-hf, export-hf, embed, classify), `corpus`
(record-corpus, top), `serve`, `exercises`
and `diff`; `common` holds what they share, `decoding` the decoding options.
"""

from __future__ import annotations

from glassformer import interrupts

interrupts.install()  # Ctrl-C or SIGTERM from here to the end of main(): one line, never lost
import argparse  # noqa: E402 (after the signals are taken)
import contextlib  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402

from glassformer.cli import (  # noqa: E402
    checkpoints,
    corpus,
    diff,
    exercises,
    faithfulness,
    generate,
    probe,
    reports,
    sae,
    serve,
    training,
)
from glassformer.cli.common import EXIT_USAGE, CommandParser, Parser, run  # noqa: E402

__all__ = ["EXIT_USAGE", "build_parser", "main"]

FAMILIES = (
    reports,
    probe,
    faithfulness,
    generate,
    training,
    checkpoints,
    corpus,
    serve,
    exercises,
    diff,
    sae,
)


def main(argv: list[str] | None = None) -> int:
    """Run one command line: its exit status. A Ctrl-C or SIGTERM is one line and 128 + the
    signal wherever it lands, from the first import on (`interrupts`: raised at once, or, while
    a module is being imported, when the next import ends); a closed stdout is refused before any
    work; a path given in bytes that are not UTF-8 prints back as those bytes."""
    program = argv is None  # the console script (not a call from Python)
    argv = sys.argv[1:] if argv is None else list(argv)
    if sys.stdout is None:  # started with stdout closed (`glassformer ... >&-`)
        print(
            "glassformer: error: stdout is closed, and glassformer writes its results there; "
            "give it somewhere to write (e.g. >/dev/null to discard them)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    # the program: once the work is done, a signal while Python shuts down (torch's teardown
    # takes a moment) would only end a finished command silently, so the gate ignores it then
    with interrupts.command(program) as gate:
        try:
            code = _command(argv, gate)
            lost = interrupts.unacted()  # a stop the command swallowed, finished or not: said
            if lost is not None:
                raise interrupts.Stopped(lost)
        except KeyboardInterrupt as e:  # outside run(): while parsing, or a stop run() lost
            signum = interrupts.acted_on(e)
            print(interrupts.LINE, file=sys.stderr)
            code = 128 + signum
    if program:  # Python's shutdown collects every object left, walking all that torch made:
        gc.freeze()  # 3.5 s after `import torch._dynamo` on the 2-core VM, 0.9 s with none to walk
    return code


def _command(argv: list[str], gate) -> int:
    """Parse `argv` (held whole: a stop waits for its end) and run the command."""
    with _paths_print_as_given():
        with gate.whole():
            parser = build_parser()
            if not argv:  # bare `glassformer`: what it can do, to stdout, and success
                parser.print_help()
                return 0
            try:
                args = parser.parse_args(argv)
            except SystemExit as e:  # --help (0), or a usage error printed as one line
                return e.code if isinstance(e.code, int) else 0
        return run(args)


@contextlib.contextmanager
def _paths_print_as_given():
    """stdout with surrogateescape: a path argument in bytes that are not UTF-8 (PEP 383) is
    printed back as those bytes (text arguments are refused: `common.utf8`)."""
    out = sys.stdout
    errors = getattr(out, "errors", None)
    if errors != "strict" or not hasattr(out, "reconfigure"):
        yield
        return
    out.reconfigure(errors="surrogateescape")
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):  # a stdout that is gone stays gone
            out.reconfigure(errors=errors)


class _Version(argparse.Action):
    """--version: the installed package's version, read only when asked (start-up stays fast)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib import metadata

        try:
            version = metadata.version("glassformer")
        except metadata.PackageNotFoundError:  # run from a source tree that is not installed
            from glassformer import __version__ as version
        print(f"glassformer {version}")
        parser.exit(0)


def build_parser() -> Parser:
    p = Parser(
        prog="glassformer",
        description="The transformer you can see through: every matrix of the articles' math.",
    )
    p.add_argument("--version", action=_Version, help="print the version and exit")
    sub = p.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )
    for family in FAMILIES:
        family.add_parsers(sub)
    return p
