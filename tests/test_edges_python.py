"""Round three, the Python surface (issue 35, point 3): family "python-api".

Every row calls a public function or Model method as a careless or hostile user would (a value of
the wrong type, a number the command line refuses, a writer pointed at the model's own source, an
`overwrite` that is not True or False, a render of steps that do not exist, weights that do not
fit) and holds the promise of `glassformer.arguments`: one `GlassformerError` line that names what
is wrong, never a TypeError / ValueError / AttributeError / RuntimeError, never a silent answer,
and nothing written (every file of the work folder and of the model's source byte-identical).
Where the command line refuses the same value, the row names its argv: the command's line must
be the one the library's row says (`cli`), so that the two cannot drift apart.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from table import snapshot

import glassformer
from glassformer import engine_diff, weights
from glassformer.cli import main
from glassformer.decoding import Decoding
from glassformer.errors import GlassformerError, InputError, TokenizerError
from glassformer.model import Model
from glassformer.tokenizer import CharTokenizer, WordTokenizer, article_tokenizer

TEXT = "to be or not to be, that is the question."


@dataclass
class PyCase:
    family: str
    name: str
    call: object  # call(models: Models) -> anything; it must raise `error` matching `match`
    error: type
    match: str
    cli: list[str] | None = None  # the same value on the command line: its refusal says `cli_says`
    cli_says: str = ""
    id: str = field(default="")


@dataclass
class Models:
    """The tiny models every row may use, and the work folder (the current directory)."""

    dec: Model  # a character decoder, loaded from `run`, a folder with a training run's files
    s2s: Model  # the article's encoder-decoder (hello-world)
    clf: Model  # a word classifier with two classes
    run: Path
    tmp: Path


def build(tmp: Path) -> Models:
    from glassformer import preset

    ct, wt = CharTokenizer.train([TEXT]), WordTokenizer.train([TEXT])
    dec = preset("tiny").override("n_decoder_layers=1", "max_len=16", f"vocab_size={ct.vocab_size}")
    clf = preset("encoder-classifier").override(
        "d_model=8", "n_heads=2", "d_ff=16", "n_encoder_layers=1", f"vocab_size={wt.vocab_size}",
        "max_len=16",
    )  # fmt: skip
    run = tmp / "run"
    weights.save(run, dec, weights.init(dec, seed=1), tokenizer=ct)
    (run / "training_state.pt").write_bytes(b"the optimiser's state: must survive")
    (run / "log.csv").write_text("step,loss\n2,4.1\n")
    (run / "snapshot-step2.safetensors").write_bytes(b"a snapshot")
    (tmp / "corpus.txt").write_text(TEXT * 20)
    hello = preset("hello-world")
    return Models(
        dec=glassformer.load(run),
        s2s=Model(hello, weights.init(hello, seed=0), article_tokenizer(), name="hello"),
        clf=Model(clf, weights.init(clf, seed=0), wt, name="clf", labels=["yes", "no"]),
        run=run,
        tmp=tmp,
    )


CASES: list[PyCase] = []


def case(name, call, match, error=InputError, **kw):
    CASES.append(PyCase("python-api", name, call, error, match, **kw))


# -- wrong types: what raised TypeError / ValueError / AttributeError -----------------------------

for value in (None, 123, b"run", ["tiny"], 1.5):
    case(
        f"load({value!r})",
        lambda m, v=value: glassformer.load(v),
        r"path_or_preset=.*: must be a path \(a str or a pathlib.Path\)",
    )
case("load('a\\0b')", lambda m: glassformer.load("a\0b"), "must be a path")
case(
    "load engine an array",
    lambda m: glassformer.load("tiny", engine=np.array(["torch"])),
    "engine=<ndarray>: must be one of 'auto', 'reference', 'torch'",
)
case("load on_note a number", lambda m: glassformer.load("tiny", on_note=5), "on_note=5")
case("load seed a str", lambda m: glassformer.load("tiny", seed="3"), "seed='3': must be an int")
case("load no path", lambda m: glassformer.load(), r"load\(\): missing a required argument")
case("preset of a list", lambda m: glassformer.preset([]), "unknown preset", error=GlassformerError)
case(
    "Config arch an array",
    lambda m: glassformer.Config(arch=np.array([1, 2])),
    "arch must be one of",
    error=GlassformerError,
)
for value, match in [
    (123, r"text=123: must be a str or a list of str"),
    (None, r"generate\(\): missing a required argument: 'text'"),
    ([1, 2], r"text\[0\]=1: must be a str"),
    (b"to be", r"text=b'to be': must be a str"),
    ({"a": 1}, "text=<dict>: must be a str or a list of str"),
    (np.array(["to be"]), "text=<ndarray>"),
]:
    call = (lambda m: m.dec.generate()) if value is None else (lambda m, v=value: m.dec.generate(v))
    case(f"generate({value!r:.20})", call, match)
case("translate(None)", lambda m: m.s2s.translate(None), "text=None: must be a str or a list")
case("translate({})", lambda m: m.s2s.translate({}), "text=<dict>")
case(  # it said PyTorch was not installed
    "translate on the reference engine",
    lambda m: Model(m.s2s.cfg, m.s2s.params, m.s2s.tokenizer, engine="reference").translate(
        "Hello"
    ),
    "translate runs on the PyTorch engine and this model was loaded with engine='reference'",
    error=GlassformerError,
)
case(
    "translations('a str')", lambda m: m.s2s.runtime.translations("Hello"), "must be a list of str"
)
case("classify([])", lambda m: m.clf.classify([]), r"text=\[\]: give at least one text")
case("classify(5)", lambda m: m.clf.classify(5), "text=5: must be a str or a list of str")
case("embed(array)", lambda m: m.s2s.embed(np.zeros(3)), "text=<ndarray>")
case("tokens(None)", lambda m: m.dec.tokens(None), "text=None: must be a str")
case("encode(5)", lambda m: m.dec.encode(5), "text=5: must be a str")
case("lens(None)", lambda m: m.dec.lens(None), "text=None: must be a str")
case("attribute(123)", lambda m: m.dec.attribute(123), "text=123: must be a str")
case("run(5)", lambda m: m.dec.run(5), "text=5: must be a str")
case("trace(object())", lambda m: m.dec.trace(object()), "text=<object>: must be a str")
case("diff(None)", lambda m: engine_diff.diff(m.dec, None), "text=None: must be a str")
case("ablate names 5", lambda m: m.dec.ablate("to be", 5), "names=5: must be a str or a list")
case("patch clean None", lambda m: m.dec.patch("to be", None), "clean=None: must be a str")
case("decode(['a'])", lambda m: m.dec.decode(["a"]), r"ids=\['a'\]: must be token ids")
case("decode([-1])", lambda m: m.dec.decode([-1]), "ids: id -1 is out of range", TokenizerError)
case(
    "pieces past the vocabulary",
    lambda m: m.dec.runtime.pieces([0, 19]),
    "^ids: id 19 is out of range",
    TokenizerError,
)
case("pieces(None)", lambda m: m.dec.runtime.pieces(None), "ids=None: must be a list of token ids")
case(
    "readable(object())", lambda m: m.dec.runtime.readable(object()), "must be a list of token ids"
)
case("evaluate(None)", lambda m: m.dec.evaluate(None), "data=None: must be a path")
case("evaluate(5)", lambda m: m.dec.evaluate(5), "data=5: must be a path")
case("record(None)", lambda m: m.dec.record(None), "text=None: must be a str or a list")
case("alignments(None)", lambda m: m.s2s.alignments(None), "sentences=None")
case("with_params(m, None)", lambda m: m.dec.with_params(None), "params must be a dict")
case(
    "with_params lacks a tensor",
    lambda m: m.dec.with_params({}),
    r"params lack the tensor 'decoder.tok_embed.weight' \(and 18 more\)",
)
case("Model(None, {})", lambda m: Model(None, {}), "cfg=None: must be a glassformer.Config")
case("Model tokenizer a str", lambda m: Model(m.dec.cfg, m.dec.params, "char"), "tokenizer='char'")
case("result(None)", lambda m: m.dec.result(None), "run=None: must be a Run")
case("class_result([])", lambda m: m.clf.runtime.class_result([]), "must be 2 finite numbers")
case(
    "class_result of a decoder", lambda m: m.dec.runtime.class_result([1.0]), "is not a classifier"
)
case("intervene(5)", lambda m: m.dec.intervene(5), "fns=5: must be a dict")
case("step src a str", lambda m: m.s2s.runtime.step("ab"), "src='ab': must be a list of token ids")
case("generate 2 args", lambda m: m.dec.generate("a", 5), "too many positional arguments")
case("lens unknown keyword", lambda m: m.dec.lens("to be", kk=3), "has no parameter 'kk'")
case("generate unknown option", lambda m: m.dec.generate("to", topk=3), "has no parameter 'topk'")
case("places of 1 for 2", lambda m: m.dec.generate(["a", "b"], places=["x"]), "1 places for 2")

# -- values the command line refuses, and the library accepted -----------------------------------

GEN = ["generate", "{run}", "to be"]
for name, kwargs, match, argv, says in [
    ("beam=0", dict(beam=0), "beam=0: must be at least 1", ["translate", "{run}", "x", "--beam",
     "0"], "--beam must be at least 1, got 0"),
    ("n_best=0", dict(n_best=0), "n_best=0: must be at least 1", ["translate", "{run}", "x",
     "--n-best", "0"], "--n-best must be at least 1, got 0"),
    ("beam=True", dict(beam=True), "beam=True: must be an integer", None, ""),
    ("dtype='float16'", dict(dtype="float16"), "dtype='float16': must be one of", None, ""),
]:  # fmt: skip
    case(f"translate {name}", lambda m, k=kwargs: m.s2s.translate("Hello", **k), match,
         cli=argv, cli_says=says)  # fmt: skip
for name, kwargs, match, argv, says in [
    ("max_new_tokens=0", dict(max_new_tokens=0), "max_new_tokens=0: must be at least 1",
     [*GEN, "--max-new-tokens", "0"], "--max-new-tokens must be at least 1, got 0"),
    ("max_new_tokens=-3", dict(max_new_tokens=-3), "max_new_tokens=-3: must be at least 1", None,
     ""),
    ("max_new_tokens=2.0", dict(max_new_tokens=2.0), "max_new_tokens=2.0: must be an integer",
     None, ""),
    ("batch_size=0", dict(batch_size=0), "batch_size=0: must be at least 1", None, ""),
    ("top_k=0", dict(top_k=0), "top_k=0: must be >= 1", [*GEN, "--top-k", "0"],
     "top-k must be >= 1, got 0"),
    ("temperature=0", dict(temperature=0), "temperature=0: must be a finite number > 0",
     [*GEN, "--temperature", "0"], "temperature must be a finite number > 0, got 0.0"),
    ("top_p=1.5", dict(top_p=1.5), r"top_p=1.5: must be in \(0, 1\]", [*GEN, "--top-p", "1.5"],
     "top-p must be in (0, 1], got 1.5"),
    ("seed=-1", dict(seed=-1), r"seed=-1: must be an integer in \[0, 2\*\*32\)",
     [*GEN, "--seed", "-1"], "seed must be an integer in [0, 2**32), got -1"),
    ("length_penalty=nan", dict(length_penalty=float("nan")), "length_penalty=nan: must be a "
     "finite number", [*GEN, "--length-penalty", "nan"], "length-penalty must be a finite number"),
    ("beam_width=0", dict(beam_width=0), "beam_width=0: must be >= 1",
     [*GEN, "--beam-width", "0"], "beam width must be >= 1, got 0"),
    ("strategy='gready'", dict(strategy="gready"), "strategy='gready': .*did you mean 'greedy'",
     [*GEN, "--strategy", "gready"], "invalid choice: 'gready'"),
    ("decoding max_new_tokens 0", dict(decoding=Decoding(max_new_tokens=0)),
     "decoding.max_new_tokens=0: must be at least 1", None, ""),
    ("decoding top_k 0", dict(decoding=Decoding("sample", top_k=0)), "decoding.top_k=0", None, ""),
    ("decoding a dict", dict(decoding={"strategy": "beam"}), "decoding=<dict>: must be a "
     "glassformer.Decoding", None, ""),
]:  # fmt: skip
    case(f"generate {name}", lambda m, k=kwargs: m.dec.generate("to be", **k), match,
         cli=argv, cli_says=says)  # fmt: skip
for name, kwargs, match, argv, says in [
    ("max_new_tokens=0", dict(max_new_tokens=0), "max_new_tokens=0: must be at least 1",
     [*GEN, "--max-new-tokens", "0"], "--max-new-tokens must be at least 1, got 0"),
    ("temperature=0", dict(temperature=0), "temperature=0: must be a finite number > 0",
     [*GEN, "--temperature", "0"], "temperature must be a finite number > 0, got 0.0"),
    ("beam_width past the vocabulary", dict(beam_width=1000), "beam_width=1000 is more than the "
     "vocabulary", [*GEN, "--beam-width", "1000"], "--beam-width 1000 is more than the vocabulary"),
    ("greedy with a temperature", dict(strategy="greedy", temperature=0.5), "does nothing with "
     "strategy='greedy'", [*GEN, "--strategy", "greedy", "--temperature", "0.5"], "does nothing"),
    ("unknown option", dict(topk=3), "has no parameter 'topk'", None, ""),
    ("decoding a dict", dict(decoding={"strategy": "beam"}), "decoding=<dict>: must be a "
     "glassformer.Decoding", None, ""),
]:  # fmt: skip
    case(f"stream {name}", lambda m, k=kwargs: m.dec.stream("to be", **k), match,
         cli=argv, cli_says=says)  # fmt: skip
case("stream(['to be'])", lambda m: m.dec.stream(["to be"]), r"text=\['to be'\]: must be a str")
case("stream(None)", lambda m: m.dec.stream(None), "text=None: must be a str")
case("stream of a classifier", lambda m: m.clf.stream("to be"), "does not generate",
     error=GlassformerError)  # fmt: skip
case("record max_new_tokens=0", lambda m: m.dec.record("to", max_new_tokens=0), "at least 1")
case("record top_tokens=-1", lambda m: m.dec.record("to", top_tokens=-1), "top_tokens=-1")
case(
    "evaluate limit=0",
    lambda m: m.dec.evaluate(str(m.tmp / "corpus.txt"), limit=0),
    "limit=0: must be at least 1",
    cli=["eval", "{run}", "--data", "{tmp}/corpus.txt", "--limit", "0"],
    cli_says="--limit must be at least 1, got 0",
)
case("evaluate beam=0", lambda m: m.s2s.evaluate("eng-spa", beam=0), "beam=0: must be at least 1")
for method in ("embed", "classify"):
    case(
        f"{method} engine='gpu'",
        lambda m, f=method: getattr(m.clf, f)("to be", engine="gpu"),
        "engine='gpu': must be one of",
    )
case("load engine='gpu'", lambda m: glassformer.load("tiny", engine="gpu"), "engine='gpu'")
case(
    "load threads=0",
    lambda m: glassformer.load("tiny", threads=0),
    r"^threads=0: must be at least 1$",
    cli=["generate", "{run}", "to be", "--threads", "0"],
    cli_says="--threads must be at least 1, got 0",
)
case(  # refused before PyTorch's and BLAS's C int overflows (Hypothesis found 2**31, 2**64)
    "load threads=2**31",
    lambda m: glassformer.load("tiny", threads=2**31),
    r"^threads=2147483648: must be at most 4096$",
    cli=["generate", "{run}", "to be", "--threads", str(2**64)],
    cli_says="--threads 18446744073709551616: must be at most 4096",
)
case(
    "load device='tpu'",
    lambda m: glassformer.load("tiny", device="tpu"),
    r"^device='tpu': must be 'cpu', 'cuda' or 'cuda:N'$",
    cli=["generate", "{run}", "to be", "--device", "tpu"],
    cli_says="must be 'cpu', 'cuda' or 'cuda:N'",
)
case(
    "load device='cuda' engine='reference'",
    lambda m: glassformer.load("tiny", device="cuda", engine="reference"),
    r"^device='cuda' is where the PyTorch engine runs, and engine='reference' is NumPy",
    cli=["generate", "{run}", "to be", "--device", "cuda", "--engine", "reference"],
    cli_says="is NumPy float64 on the CPU",
)
case(
    "class_probabilities engine",
    lambda m: m.clf.runtime.class_probabilities([[1]], engine=""),
    "engine",
)
case("lens k=0", lambda m: m.dec.lens("to be", k=0), "k=0: must be >= 1",
     cli=["lens", "{run}", "to be", "--k", "0"], cli_says="--k must be >= 1, got 0")  # fmt: skip
case(
    "attribute steps=0",
    lambda m: m.dec.attribute("to be", steps=0),
    r"steps=0: must be in \[1, 1024\]",
    cli=["attribute", "{run}", "to be", "--steps", "0"],
    cli_says="--steps must be in [1, 1024], got 0",
)
case("attribute method", lambda m: m.dec.attribute("to", method="ig"), "method='ig'")
case("lens position a str", lambda m: m.dec.lens("to", dla="t", position="3"), "position='3'")
case("run quiet='yes'", lambda m: m.dec.run("to be", quiet="yes"), "quiet='yes': must be True")
case("run ids for no text", lambda m: m.dec.run(ids=[]), r"ids=\[\]: give at least one token id")
case("torch dtype", lambda m: m.dec.runtime.torch("float16"), "dtype='float16': must be one of")

# -- render(only=...) and weights that do not fit -------------------------------------------------


def render(m, **kw):
    from glassformer.explain.text import render

    return render(m.s2s.trace("Hello World"), **kw)


case(
    "render only='zzz'",
    lambda m: render(m, only="zzz"),
    "only='zzz': no step name contains it",
    error=GlassformerError,
    cli=["explain", "{run}", "to be", "--only", "zzz"],
    cli_says="--only 'zzz': no step name contains it",
)
case("render only=''", lambda m: render(m, only=""), "keeps every step", error=GlassformerError)
case("render only=5", lambda m: render(m, only=5), "only=5: must be a str")
case("render max_rows=0", lambda m: render(m, max_rows=0), "max_rows=0: must be >= 1")
# a precision of 10**8 wrote each number as a 100 MB string: the drive's worker ran out of memory
case(
    "render digits=10**8",
    lambda m: render(m, digits=10**8),
    r"digits=100000000: must be in \[1, 17\]",
)
case("render digits=18", lambda m: render(m, digits=18), r"digits=18: must be in \[1, 17\]")
case("render a dict", lambda m: __import__("glassformer.explain.text").explain.text.render({}),
     "trace=<dict>: must be a glassformer.trace.Trace")  # fmt: skip


def from_params(m, params):
    pytest.importorskip("torch")
    from glassformer.torch_model import from_params

    return from_params(m.dec.cfg, params)


case(
    "from_params lacks a tensor",
    lambda m: from_params(m, {k: v for k, v in m.dec.params.items() if k != "lm_head.weight"}),
    "params lack the tensor 'lm_head.weight'",
)
case(
    "from_params an extra tensor",
    lambda m: from_params(m, dict(m.dec.params, extra=np.zeros(2))),
    "params hold the tensor 'extra'",
)
case(
    "from_params a tensor of text",
    lambda m: from_params(m, dict(m.dec.params, **{"lm_head.weight": np.full((19, 16), "a")})),
    "must be an array of numbers",
)
case(
    "from_params a wrong shape",
    lambda m: from_params(m, dict(m.dec.params, **{"lm_head.weight": np.zeros((2, 2))})),
    r"has shape \(2, 2\)",
)

# -- writers onto their own source, and overwrite that is not True or False ----------------------

for name, target in [
    ("the folder itself", lambda m: m.run),
    ("another spelling", lambda m: m.run / ".." / "run" / "."),
    ("a folder inside it", lambda m: m.run / "sub"),
    ("the folder holding it", lambda m: m.tmp),
    ("a link to it", lambda m: m.tmp / "link"),
]:
    for writer in ("save", "export_hf"):
        case(
            f"{writer} onto {name} with overwrite",
            lambda m, t=target, w=writer: getattr(m.dec, w)(t(m), overwrite=True),
            "this model was read from .*run; writing there would replace",
        )
case(
    "save a copy onto the training run",
    lambda m: m.dec.with_params(m.dec.params).save(m.run, overwrite=True),
    "this model was read from",
)
case(
    "a preset saved onto a training run",
    lambda m: glassformer.load("tiny").save(m.run, overwrite=True),
    r"is a training run \(training_state.pt\)",
)
for value in ("no", 1, 0, None, np.bool_(True), "False"):
    case(
        f"save overwrite={value!r}",
        lambda m, v=value: m.dec.save(m.tmp / "out", overwrite=v),
        f"overwrite={value!r}: must be True or False" if value is not None else "overwrite=None",
    )
case(
    "export_hf overwrite='no'",
    lambda m: m.dec.export_hf(m.tmp / "hf", overwrite="no"),
    "overwrite='no': must be True or False",
)
case(
    "weights.save overwrite='no'",
    lambda m: weights.save(m.run, m.dec.cfg, m.dec.params, overwrite="no"),
    "overwrite='no': must be True or False",
)
case(
    "tokenizer.save overwrite='no'",
    lambda m: __import__("glassformer.tokenizer").tokenizer.save(
        m.dec.tokenizer, m.run / "tokenizer.json", overwrite="no"
    ),
    "overwrite='no': must be True or False",
)


def start_again(value):
    """exercises.start over a learner's own file with overwrite=value (in a folder of its own)."""
    from glassformer import exercises

    folder = Path(tempfile.mkdtemp())
    path = exercises.start(1, folder)
    path.write_text("my work")
    try:
        exercises.start(1, folder, overwrite=value)
    finally:
        assert path.read_text() == "my work"
        shutil.rmtree(folder)


for value in ("no", 1):
    case(
        f"exercises.start overwrite={value!r}",
        lambda m, v=value: start_again(v),
        f"overwrite={value!r}: must be True or False",
    )
case("save dtype int8", lambda m: m.dec.save(m.tmp / "out", dtype="int8"), "dtype='int8'")
case("save path None", lambda m: m.dec.save(None), "path=None: must be a path")


# -- running the rows ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    m = build(tmp_path_factory.mktemp("python"))
    (m.tmp / "link").symlink_to(m.run)
    return m


@pytest.mark.parametrize("row", CASES, ids=lambda c: c.name)
def test_python_api_refuses_in_one_line_and_writes_nothing(row, models, capsys):
    before = snapshot(models.tmp)
    listed = sorted(p.name for p in models.tmp.iterdir())
    with pytest.raises(row.error, match=row.match) as info:
        row.call(models)
    message = str(info.value)
    assert isinstance(info.value, GlassformerError) and "\n" not in message, message
    assert snapshot(models.tmp) == before, "a refusal changed a file"
    assert sorted(p.name for p in models.tmp.iterdir()) == listed, "a refusal made a file"
    if row.cli:
        argv = [a.format(run=models.run, tmp=models.tmp) for a in row.cli]
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and row.cli_says in err[0], err


def test_the_rows_cover_the_issue_s_list():
    """At least the failures issue 35 names, and ten rows in all (tests/test_edges.py)."""
    names = " ".join(c.name for c in CASES)
    for needed in ("load(None)", "generate(123)", "classify([])", "translate beam=0",
                   "translate n_best=0", "generate max_new_tokens=0", "evaluate limit=0",
                   "engine='gpu'", "render only='zzz'", "from_params lacks a tensor",
                   "save onto the folder itself", "export_hf onto the folder itself",
                   "overwrite='no'"):  # fmt: skip
        assert needed in names, needed
    assert len({c.name for c in CASES}) == len(CASES)
