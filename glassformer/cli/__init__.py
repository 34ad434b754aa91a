"""The `glassformer` command line: the only package that prints or exits.

    glassformer walkthrough hello-world|self-attention [--json FILE] [--all] [REPORT OPTIONS]
    glassformer explain CKPT "text" [--json FILE] [--only SUBSTRING] [REPORT OPTIONS]
    glassformer generate CKPT "text" [--strategy greedy|sample|beam] [--engine ...]
    glassformer translate CKPT "text" ... | --input FILE [--beam N]
    glassformer train lm|translate|classify --out DIR [--data ...] [--set key=value] [--resume]
    glassformer eval CKPT --data FILE
    glassformer config [--preset NAME] [--set key=value ...]
    glassformer init OUT [--preset NAME] [--set key=value ...] [--tokenizer ...] [--seed N]
    glassformer export CKPT OUT [--dtype float16]
    glassformer import-hf HF_DIR OUT           (GPT-2, BERT / MiniLM, Marian folders)
    glassformer export-hf CKPT OUT             (decoder -> GPT-2, encoder -> BERT)
    glassformer embed MODEL "text" ... [--engine torch|reference] [--json]

Wherever a checkpoint is taken, a Hugging Face model folder works too (read on the fly).

REPORT OPTIONS: --html FILE (one self-contained page), --png DIR (attention heatmaps),
--layers 0,1 and --heads 0 (only these blocks and heads of the model).

Every user error becomes one line on stderr and exit status 2; nothing here does math.

One module per command family, each adding its subcommands with `add_parsers(sub)`: `reports`
(walkthrough, explain), `generate` (generate, translate), `training` (train, eval) and
`checkpoints` (config, init, export, import-hf, export-hf, embed); `common` holds what they share.
"""

from __future__ import annotations

from glassformer.cli import checkpoints, generate, reports, serve, training
from glassformer.cli.common import EXIT_USAGE, Parser, run

__all__ = ["EXIT_USAGE", "build_parser", "main"]

FAMILIES = (reports, generate, training, checkpoints, serve)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0), or a usage error already printed as one line (2)
        return e.code if isinstance(e.code, int) else 0
    return run(args)


def build_parser() -> Parser:
    p = Parser(
        prog="glassformer",
        description="The transformer you can see through: every matrix of the articles' math.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for family in FAMILIES:
        family.add_parsers(sub)
    return p
