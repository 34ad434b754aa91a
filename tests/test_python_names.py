"""Python speaks Python: a refusal (or a note) reached from the Model names the parameter as
Python spells it (`position=99`), the same refusal on the command line names its flag
(`--position 99`), and no library message outside cli/ writes a flag itself: the mapping is
`glassformer/cli/flags.py`'s table, applied where the command line prints (`flags.said`).

Oracles: the same bad value given to the Model and to the command, each message read for its
own words; an ast scan of the library's string constants; the table against every reference the
library makes.
"""

from __future__ import annotations

import ast
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import glassformer
from glassformer.cli import main
from glassformer.cli.flags import FLAGS, said
from glassformer.config import Config
from glassformer.decoding import BEAM_OPTIONS, SAMPLING_OPTIONS
from glassformer.errors import GlassformerError, InputError, Said, param, python, verb

ROOT = Path(__file__).resolve().parents[1]
CHAR, ENES = str(ROOT / "models" / "char-lm"), str(ROOT / "models" / "en-es")
PACKAGE = ROOT / "glassformer"


@pytest.fixture(scope="module")
def models():
    return {
        "char": glassformer.load(CHAR),
        "enes": glassformer.load(ENES),
        "ref": glassformer.load(CHAR, engine="reference"),
    }


@dataclass(frozen=True)
class Row:
    """One refusal: the Model's call, the command line's argv ({corpus}: a text file; {out}: a
    file to write), what the Python message says and what the command line's says."""

    name: str
    call: object  # (models, corpus) -> None, raising
    argv: list
    python: str
    cli: str


ROWS = [
    Row("lens position without dla", lambda m, c: m["char"].lens("To be", position=99),
        ["lens", CHAR, "To be", "--position", "99"],
        "position=99 chooses the position dla explains: give dla=TOKEN too, or drop position",
        "--position chooses the position --dla explains: give --dla TOKEN too, or drop "
        "--position"),
    Row("lens versus without dla", lambda m, c: m["char"].lens("To be", versus="t"),
        ["lens", CHAR, "To be", "--versus", "t"],
        "versus='t' subtracts a token's logit in dla's attribution: give dla=TOKEN too",
        "--versus subtracts a token's logit in --dla's attribution: give --dla TOKEN too"),
    Row("lens target of a decoder", lambda m, c: m["char"].lens("To be", target="x"),
        ["lens", CHAR, "To be", "--target", "x"],
        "target is the decoder text of an encoder-decoder; for a decoder, put it in text",
        "--target is the decoder text of an encoder-decoder; for a decoder, put it in TEXT"),
    Row("lens dla of two tokens", lambda m, c: m["char"].lens("To be", dla="be"),
        ["lens", CHAR, "To be", "--dla", "be"], "dla='be' is 2 tokens", "--dla 'be' is 2 tokens"),
    Row("lens position past the text", lambda m, c: m["char"].lens("To", dla="t", position=9),
        ["lens", CHAR, "To", "--dla", "t", "--position", "9"],
        "position=9: the decoder reads 2 tokens", "--position 9: the decoder reads 2 tokens"),
    Row("attribute steps of a gradient", lambda m, c: m["char"].attribute(
        "To be", method="gradient_x_input", steps=8),
        ["attribute", CHAR, "To be", "--method", "gradient_x_input", "--steps", "8"],
        "steps=8 sets integrated gradients' nodes, and gradient x input has none: drop steps",
        "--steps sets integrated gradients' nodes, and gradient x input has none: drop "
        "--steps"),
    Row("attribute baseline of a gradient", lambda m, c: m["char"].attribute(
        "To be", method="gradient_x_input", baseline="t"),
        ["attribute", CHAR, "To be", "--method", "gradient_x_input", "--baseline", "t"],
        "baseline is integrated gradients'", "--baseline is integrated gradients'"),
    Row("attribute baseline not in the vocabulary", lambda m, c: m["char"].attribute(
        "To be", baseline="zz"), ["attribute", CHAR, "To be", "--baseline", "zz"],
        "baseline='zz' is not a piece of the vocabulary", "--baseline 'zz' is not a piece"),
    Row("attribute new tokens of a translator", lambda m, c: m["enes"].attribute(
        "Hello.", max_new_tokens=2), ["attribute", ENES, "Hello.", "--max-new-tokens", "2"],
        "max_new_tokens=2 sets how many tokens a decoder predicts; an encoder-decoder's are its "
        "translation (or target)", "--max-new-tokens sets how many tokens a decoder predicts; "
        "an encoder-decoder's are its translation (or --target)"),
    Row("generate sampling and beam", lambda m, c: m["char"].generate(
        "To be", temperature=0.5, beam_width=2),
        ["generate", CHAR, "To be", "--temperature", "0.5", "--beam-width", "2"],
        "temperature is a sampling option and beam_width a beam search option; choose one "
        "strategy", "--temperature is a sampling option and --beam-width a beam search option; "
        "choose one --strategy"),
    Row("generate greedy with top_k", lambda m, c: m["char"].generate(
        "To be", strategy="greedy", top_k=2),
        ["generate", CHAR, "To be", "--strategy", "greedy", "--top-k", "2"],
        "top_k does nothing with strategy='greedy'; drop it, or use strategy='sample'",
        "--top-k does nothing with --strategy greedy; drop it, or use --strategy sample"),
    Row("generate a beam wider than the vocabulary", lambda m, c: m["char"].generate(
        "To be", strategy="beam", beam_width=10**6),
        ["generate", CHAR, "To be", "--strategy", "beam", "--beam-width", 10**6],
        "beam_width=1000000 is more than the vocabulary", "--beam-width 1000000 is more than"),
    Row("generate a batch of 0", lambda m, c: m["char"].generate(["To be"], batch_size=0),
        ["generate", CHAR, "To be", "--batch-size", "0"], "batch_size=0: must be at least 1",
        "--batch-size must be at least 1"),
    Row("generate a seed out of range", lambda m, c: m["char"].generate("To be", seed=2**32),
        ["generate", CHAR, "To be", "--seed", 2**32], "seed=4294967296: must be",
        "argument --seed: seed must be"),
    Row("record top tokens below 0", lambda m, c: m["char"].record("To be", top_tokens=-1),
        ["generate", CHAR, "To be", "--record", "{out}", "--record-top-k", "-1"],
        "top_tokens=-1: must be an integer >= 0", "--record-top-k must be an integer >= 0"),
    Row("record an unknown step", lambda m, c: m["char"].record("To be", steps="decoder.9.out"),
        ["generate", CHAR, "To be", "--record", "{out}", "--record-steps", "decoder.9.out"],
        "steps: 'decoder.9.out' names no step", "--record-steps: 'decoder.9.out' names no step"),
    Row("record on the reference engine", lambda m, c: m["ref"].record("To be"),
        ["generate", CHAR, "To be", "--engine", "reference", "--record", "{out}"],
        "Model.record reads the PyTorch engine's decoding: drop engine='reference' (the "
        "reference engine's every step: Model.trace)", "--record reads the PyTorch engine's "
        "decoding: drop --engine reference (the reference engine's every step: glassformer "
        "explain --json)"),
    Row("alignments of an unknown layer", lambda m, c: m["enes"].alignments(
        ["Hello."], layers="0,7"),
        ["translate", ENES, "Hello.", "--alignments", "{out}", "--align-layers", "0,7"],
        "layers: '7' is not one of this model's decoder layers", "--align-layers: '7' is not"),
    Row("alignments of an unknown head", lambda m, c: m["enes"].alignments(["Hello."], heads=9),
        ["translate", ENES, "Hello.", "--alignments", "{out}", "--align-heads", "9"],
        "e.g. heads='0,", "e.g. --align-heads 0,"),
    Row("translate n_best over the beam", lambda m, c: m["enes"].translate(
        "Hello.", beam=2, n_best=3), ["translate", ENES, "Hello.", "--beam", "2", "--n-best", "3"],
        "n_best=3 is more than the beam width 2: a beam keeps at most 2 candidates; add beam=3",
        "--n-best 3 is more than the beam width 2: a beam keeps at most 2 candidates; add "
        "--beam 3"),
    Row("translate a beam wider than the vocabulary", lambda m, c: m["enes"].translate(
        "Hello.", beam=10**6), ["translate", ENES, "Hello.", "--beam", 10**6],
        "beam=1000000 is more than the vocabulary", "--beam 1000000 is more than the vocabulary"),
    Row("evaluate a decoder with a beam", lambda m, c: m["char"].evaluate(c, beam=2),
        ["eval", CHAR, "--data", "{corpus}", "--beam", "2"], "beam is for translation",
        "--beam is for translation"),
    Row("ablate a head past the heads", lambda m, c: m["char"].ablate(
        "To be", ["decoder.0.self_attn.head9"]),
        ["explain", CHAR, "To be", "--ablate", "decoder.0.self_attn.head9"],
        "names='decoder.0.self_attn.head9': there are 4 heads per layer",
        "--ablate decoder.0.self_attn.head9: there are 4 heads per layer"),
    Row("ablate a layer past the layers", lambda m, c: m["char"].ablate(
        "To be", ["decoder.9.ffn"]), ["explain", CHAR, "To be", "--ablate", "decoder.9.ffn"],
        "names='decoder.9.ffn': the decoder has 4 layers", "--ablate decoder.9.ffn: the decoder"),
    Row("patch from a text of another length", lambda m, c: m["char"].patch(
        "To be", "To be or not"), ["explain", CHAR, "To be", "--patch-from", "To be or not"],
        "clean has 12 tokens but the text has 5", "--patch-from has 12 tokens but the text has 5"),
    Row("a config override of the wrong type", lambda m, c: Config().override("d_model=x"),
        ["config", "--set", "d_model=x"], "Config.override('d_model=x'): d_model must be an "
        "integer", "--set d_model=x: d_model must be an integer"),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_python_names_the_parameter_and_the_command_line_its_flag(row, models, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 4)
    with pytest.raises(GlassformerError) as e:
        row.call(models, str(corpus))
    message = str(e.value)
    assert row.python in message and "--" not in message, message
    spelt = {"{corpus}": str(corpus), "{out}": str(tmp_path / "out.jsonl")}
    capsys.readouterr()
    assert main([spelt.get(str(a), str(a)) for a in row.argv]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and row.cli in line, line


def test_the_table_has_twenty_refusals_and_a_python_message_for_each():
    assert len(ROWS) >= 20
    assert all("--" not in r.python and "--" in r.cli for r in ROWS)


def test_notes_speak_python_in_the_model_and_flags_on_the_command_line(models, capsys):
    m = glassformer.load(CHAR)
    m.generate("To be", temperature=0.8, seed=1, max_new_tokens=3)
    assert m.notes == [
        "temperature and seed given: decoding with strategy='sample'",
        "stopped after max_new_tokens=3",
    ]
    capsys.readouterr()
    argv = ["generate", CHAR, "To be", "--temperature", "0.8", "--seed", "1"]
    assert main([*argv, "--max-new-tokens", "3"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "glassformer: note: --temperature and --seed given: decoding with --strategy sample",
        "glassformer: note: stopped after --max-new-tokens 3",
    ]
    heard = []  # a Python on_note hears Python's words too
    glassformer.load(CHAR, on_note=heard.append).generate("To be", max_new_tokens=2)
    assert heard == ["stopped after max_new_tokens=2"]


# -- the mechanism --------------------------------------------------------------------------------


def test_a_reference_reads_as_python_and_as_the_flag_and_survives_composition():
    inner = f"{param('position', 99)} and {param('dla', text='TOKEN')}"
    e = InputError(f"outer: {inner}; {param('engines', ('reference', 'torch'))}")
    assert str(e) == "outer: position=99 and dla=TOKEN; engines=('reference', 'torch')"
    assert e.args == (str(e),)  # no marker in what Python shows
    assert said(e) == "outer: --position 99 and --dla TOKEN; --engines reference,torch"
    again = InputError(f"text 2: {e.template}")  # a message put inside another keeps its flags
    assert said(again) == "text 2: " + said(e)
    copy = pickle.loads(pickle.dumps(e))
    assert str(copy) == str(e) and said(copy) == said(e)
    note = Said(f"{param('overwrite', True)} and {verb('generate', param('dtype', 'int8'))}")
    assert note == "overwrite=True and Model.generate(dtype='int8')"
    assert said(note) == "--overwrite and generate --dtype int8"
    assert python(param("attribute.steps", 8)) == "steps=8"
    assert said(param("attribute.steps", 8)) == "--steps 8"
    assert said(param("position", 9, flag_alone=True)) == "--position"  # typed on its line


def _strings(path: Path):
    """(line, text) of every str constant of a module that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

# Strings outside cli/ that may name a flag: none is a message about a parameter.
ALLOWED = {
    # page text of a report, the same page from Python and the command line (the options that
    # narrow it are named as the report's own documentation says them)
    ("explain/html.py", "--heads count."),
    ("explain/html.py", "(--layers, --heads)."),
    ("explain/timelapse.py", "RUN_DIR --over-training"),
    # what to do with a weight an import leaves out: a command (training has no Model verb)
    ("formats/hf.py", "train classify --init"),
    # a nanoGPT out_dir read without its tokenizer: the import that takes it, a command in
    # Python too (the library has no verb that writes a checkpoint from an out_dir)
    ("formats/nanogpt.py", " OUT --meta meta.pkl"),
    ("formats/nanogpt.py", " OUT --tokenizer tokenizer.json"),
    # the explorer's page, served to whoever started `glassformer serve` (cli/serve.py): how to
    # record a time-lapse (a training command) and how to start the server again
    ("serve/api.py", "--snapshot-views TEXT --view-every N"),
    ("serve/sessions.py", "start serve with --dtype float64"),
    ("serve/stores.py", "start it with --sae SAE"),
}


def test_no_library_message_names_a_flag():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("cli/"):
            continue
        for line, text in _strings(path):
            if FLAG.search(text) and not any(w == where and a in text for w, a in ALLOWED):
                found.append(f"{where}:{line}: {text!r}")
    assert not found, "write param(NAME) (glassformer.errors), not a flag:\n" + "\n".join(found)


def test_every_allowed_string_is_still_there():
    """An entry of ALLOWED whose string is gone is dropped, so the list stays what it excuses."""
    for where, text in ALLOWED:
        assert any(text in s for _, s in _strings(PACKAGE / where)), (where, text)


def _referenced() -> set[str]:
    """The names the library passes to param() and verb() as constants (verb's as Model.NAME)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
                continue
            first = node.args[0]
            if node.func.id in ("param", "verb") and isinstance(first, ast.Constant):
                names.add(("Model." if node.func.id == "verb" else "") + first.value)
            if node.func.id == "param" and isinstance(first, ast.JoinedStr):  # f"{cls}.override"
                names |= {"Config.override", "TrainConfig.override"}
            if node.func.id == "token_id" and isinstance(node.args[-1], ast.Constant):
                names.add(node.args[-1].value)  # probes.token_id(m, text, "dla")
            if node.func.id == "_numbers" and isinstance(node.args[1], ast.Constant):
                names.add(node.args[1].value)  # recording._numbers(given, "alignments.layers", ...)
    return names | set(SAMPLING_OPTIONS) | set(BEAM_OPTIONS)  # decoding's param(option)


def test_the_command_line_has_a_flag_for_every_name_the_library_refers_to():
    names = _referenced()
    assert {"position", "dla", "top_tokens", "batch_size", "strategy", "Model.record"} <= names
    assert not names - set(FLAGS), sorted(names - set(FLAGS))
