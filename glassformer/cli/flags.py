"""The one place where the library's parameter names become the command line's flags.

The library writes its messages in Python's words: every parameter it refers to is a reference
(`glassformer.errors.param`: `position=99` in Python), every method one too (`errors.verb`:
`Model.record`). What the command line prints of them (its error line and notes, `common.run`
and `common.note`; the strategy rule in --help; explain's summary, attribute's note, an import's
notes) passes through `said`, which writes each reference as `FLAGS` says (`--position 99`,
`--record`), so that the command line keeps its words while the library names its parameters.
A key is the parameter's name, "method.parameter" where one name is two flags (`steps`:
`record`'s --record-steps, `attribute`'s --steps), or a method ("Model.record",
"Config.override"). The argparse types of the numbers are named by it too
(`common.option_type`, `ARGPARSE_NAMES`).

Deliberately not here: the options themselves (each command family's `add_parsers`), the
library's checks (`glassformer.arguments`).
"""

from __future__ import annotations

from glassformer.errors import param, python, rendered

# {parameter (or "method.parameter", or "Model.method"): how the command line spells it}
FLAGS = {
    # decoding (cli/decoding.py)
    "max_new_tokens": "--max-new-tokens",
    "temperature": "--temperature",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "seed": "--seed",
    "beam_width": "--beam-width",
    "length_penalty": "--length-penalty",
    "strategy": "--strategy",
    # generate, translate (cli/generate.py)
    "batch_size": "--batch-size",
    "threads": "--threads",
    "device": "--device",
    "top_tokens": "--record-top-k",
    "record.steps": "--record-steps",
    "alignments.layers": "--align-layers",
    "alignments.heads": "--align-heads",
    "beam": "--beam",
    "n_best": "--n-best",
    "sentences": "sentences or --input FILE",  # translate's TEXT arguments, or the file's lines
    "Model.record": "--record",
    # steering (cli/steering.py)
    "pair": "--steer",
    "vector": "--steer-vector",
    "layer": "--layer",
    "scale": "--scale",
    "from_step": "--from-step",
    "Model.steered": "--steer-report",
    # eval (cli/training.py)
    "Model.evaluate": "eval",
    "Model.generate": "generate",
    "Model.translate": "translate",
    "Model.classify": "classify",
    "limit": "--limit",
    "data": "--data",
    # lens, attribute (cli/probe.py)
    "k": "--k",
    "sublayers": "--sublayers",
    "dla": "--dla",
    "versus": "--versus",
    "position": "--position",
    "method": "--method",
    "attribute.steps": "--steps",
    "baseline": "--baseline",
    "target": "--target",
    "text": "TEXT",
    # circuit (cli/probe.py)
    "decoder": "--decoder",
    "threshold": "--threshold",
    # faithfulness (cli/faithfulness.py)
    "faithfulness.steps": "--steps",
    "neurons": "--neurons",
    # qk (cli/probe.py)
    "head": "HEAD",
    "query": "--query",
    "key": "--key",
    # explain (cli/reports.py, cli/touch.py)
    "names": "--ablate",
    "clean": "--patch-from",
    "only": "--only",
    "report.layers": "--layers",
    "report.heads": "--heads",
    "write_attention_pngs": "--png",
    "Model.ablate": "--ablate",
    "Model.patch": "--patch-from",
    "Model.explain_choice": "--explain-choice",
    "Model.trace": "glassformer explain --json",
    # config, init, train (cli/checkpoints.py, cli/training.py)
    "Config.override": "--set",
    "TrainConfig.override": "--set",
    "snapshot_views": "--snapshot-views",
    "out": "--out",
    "preset": "--preset",
    "valid": "--valid",
    "average_snapshots.k": "--average",
    "nanogpt.meta": "import-nanogpt --meta",  # said in a note after the import, as its command
    "nanogpt.tokenizer": "import-nanogpt --tokenizer",
    "nanogpt.vocab_from": "--vocab-from",
    # models (cli/checkpoints.py): the list of every model name, named where a name is unknown
    "glassformer.models": "glassformer models",
    # serve (cli/serve.py)
    "port": "--port",
    # diff (cli/diff.py)
    "tol": "--tol",
    "engines": "--engines",
    # record-corpus, top (cli/corpus.py)
    "record_corpus.steps": "--steps",
    "side": "--side",
    "max_tokens": "--max-tokens",
    "shard_rows": "--shard-rows",
    "check_rows": "--check-rows",
    "Model.record_corpus": "record-corpus",
    "top_examples.sae": "--sae",
    # every command that loads a model
    "engine": "--engine",
    "dtype": "--dtype",
    "overwrite": "--overwrite",
    # sae train, generate --steer-feature (cli/sae.py, cli/steering.py)
    "sae.step": "--step",
    "sae.steps": "--steps",
    "features": "--features",
    "transcoder_to": "--transcoder-to",
    "resume": "--resume",
    "steer_feature": "--steer-feature",
}

# How an argparse type names its option in a refusal, where not by its flag (`option_type`).
ARGPARSE_NAMES = {
    "temperature": "temperature",
    "top_k": "top-k",
    "top_p": "top-p",
    "seed": "seed",
    "beam_width": "beam width",
    "length_penalty": "length-penalty",
}


def flag(name: str) -> str:
    """The command line's spelling of the parameter (or method) `name` (tests/test_python_names.py
    finds every name the library refers to in the table; one missing reads as Python's)."""
    return FLAGS.get(name) or python(param(name))


def _cli(name: str, py: str | None, cli: str | None) -> str:
    return f"{flag(name)} {cli}" if cli else flag(name)


def said(message) -> str:
    """A library message (an error, a note: anything with a `template`, or a str) in the command
    line's words: each parameter it refers to as its flag, with the value as typed."""
    return rendered(getattr(message, "template", None) or str(message), _cli)
