"""Round two, the Python API (issue 23, point 4) and extreme but finite decoding values.

Family "api": every public function the README teaches refuses a bad argument with a typed
`GlassformerError` (one line, nothing written), never a raw IndexError/KeyError/RuntimeError or a
silent result; where the command line refuses the same mistake, the library's line is the CLI's
(the flag spelled as the parameter). Family "values": decoding values the CLI accepts however
extreme (temperature 1e-310, top-p 1e-300, length penalty ±1e300) give an answer, exit 0, and
the library computes them in log space: oracles in decimal arithmetic check the sampling
distribution softmax(z / T) and the beam ranking logprob / n^p.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from table import Case, case_id, check_case, snapshot

from glassformer import decoding, errors, preset, weights
from glassformer import reference as R
from glassformer.cli import main
from glassformer.config import Config
from glassformer.errors import (
    CheckpointError,
    ConfigError,
    GlassformerError,
    InputError,
    OutputExists,
    TraceError,
)
from glassformer.formats import loading
from glassformer.trace import intervene, tracing

HELLO = preset("hello-world")
DEC = preset("tiny").override("n_decoder_layers=1", "max_len=8", "vocab_size=12")
ENC = preset("encoder-classifier").override(
    "d_model=8", "n_heads=2", "d_ff=16", "n_encoder_layers=1", "vocab_size=20", "max_len=8"
)
BERT = ENC.override("n_classes=0", "type_vocab_size=2")
P = {
    name: weights.init(cfg, seed=0, std=0.3)
    for name, cfg in (("hello", HELLO), ("dec", DEC), ("enc", ENC), ("bert", BERT))
}


@dataclass
class ApiCase:
    family: str
    name: str
    call: object  # call(tmp_path) -> anything; it must raise `error`
    error: type
    match: str
    cli: list[str] | None = None  # the same mistake on the command line: its line holds ours
    names: tuple = ()  # (parameter, flag) spellings that differ between the two lines
    cli_says: str | None = None  # when the two messages differ by design: what the CLI says
    setup: object = None  # setup(tmp_path): the files there before the call
    id: str = field(default="")


API: list[ApiCase] = []


def api(name, call, error, match, **kw):
    API.append(ApiCase("api", name, call, error, match, **kw))


def without(params, name):
    return {k: v for k, v in params.items() if k != name}


def step_of(logits):
    return lambda ids: np.asarray(logits, dtype=np.float64)


GOOD_STEP = step_of(np.arange(12.0))
GEN = ["generate", "{hello}", "hello world"]
SAMPLE = [*GEN, "--strategy", "sample"]
BEAM = [*GEN, "--strategy", "beam"]

# -- the reference engine: ids, masks, params
for ids, match in [
    ([-1], "id -1 is out of range; this model has 12"),  # read the last row, silently
    ([12], "id 12 is out of range"),
    ([3, 99], "id 99 is out of range"),
    ([1.5, 2.0], "must be integers, got float64"),  # truncated to 1, silently
    (np.array([1.0, 2.0], np.float32), "must be integers, got float32"),
    ([True, False], "must be integers, got bool"),
    (["a"], "must be integers"),
    ([[1, 2]], r"must be one sequence of token ids \(1-D\), got shape \(1, 2\)"),
    ([], "decoder input is empty: give at least one token"),
    (list(range(9)), "decoder input has 9 tokens but max_len is 8"),
]:
    api(
        f"forward ids {ids!r:.20}",
        lambda t, ids=ids: R.forward(P["dec"], DEC, ids),
        InputError,
        match,
    )
api(
    "forward src_ids to a decoder",
    lambda t: R.forward(P["dec"], DEC, [1], src_ids=[1]),
    InputError,
    "src_ids given to a decoder-only model",
)
api(
    "forward without src_ids",
    lambda t: R.forward(P["hello"], HELLO, [6]),
    InputError,
    "an encoder-decoder model needs src_ids",
)
api(
    "forward src id -1",
    lambda t: R.forward(P["hello"], HELLO, [6], src_ids=[0, -1]),
    InputError,
    "encoder ids: id -1 is out of range",
)
api(
    "forward src float",
    lambda t: R.forward(P["hello"], HELLO, [6], src_ids=[0.0, 2.0]),
    InputError,
    "encoder ids must be integers",
)
for valid, match in [
    ([True], r"src_valid|valid must be 2 flags"),
    ([[True, True]], r"valid must be 2 flags, one per token .* got shape \(1, 2\)"),
    ([0.5, 1.0], "must be True/False flags"),
    ([2, 1], "must be True/False flags"),
]:
    api(
        f"forward src_valid {valid!r}",
        lambda t, v=valid: R.forward(P["hello"], HELLO, [6], src_ids=[0, 2], src_valid=v),
        InputError,
        match,
    )
api(
    "forward params lack a tensor",
    lambda t: R.forward(without(P["dec"], "decoder.layers.0.ffn.w1.weight"), DEC, [1]),
    InputError,
    "params lack the tensor 'decoder.layers.0.ffn.w1.weight'",
)
api(
    "forward params of another config",
    lambda t: R.forward(P["dec"], DEC.override("d_ff=8"), [1]),
    InputError,
    r"params tensor 'decoder.layers.0.ffn.w1.weight' has shape \(32, 16\)",
)
api(
    "forward params a list",
    lambda t: R.forward(list(P["dec"].values()), DEC, [1]),
    InputError,
    r"params must be a dict",
)
api(
    "forward an encoder",
    lambda t: R.forward(P["enc"], ENC, [1]),
    InputError,
    "forward.. is for decoder and encoder-decoder models .*use classify",
)
api(
    "encode id -1",
    lambda t: R.encoder(P["enc"], ENC, [1, -1]),
    InputError,
    "encoder ids: id -1 is out of range; this model has 20",
)
api(
    "encode valid of 3 for 2",
    lambda t: R.encoder(P["enc"], ENC, [1, 2], valid=[1, 1, 0]),
    InputError,
    "valid must be 2 flags",
)
api(
    "encode types without types",
    lambda t: R.encoder(P["enc"], ENC, [1, 2], types=[0, 1]),
    InputError,
    "no token types",
)
api(
    "encode type 2 of 2",
    lambda t: R.encoder(P["bert"], BERT, [1, 2], types=[0, 2]),
    InputError,
    "types: id 2 is out of range",
)
api(
    "encode types of 1 for 2",
    lambda t: R.encoder(P["bert"], BERT, [1, 2], types=[0]),
    InputError,
    "types must be one per token",
)
api(
    "classify a decoder",
    lambda t: R.classify(P["dec"], DEC, [1]),
    InputError,
    "classify.. needs arch='encoder'",
)
api(
    "classify id 20", lambda t: R.classify(P["enc"], ENC, [20]), InputError, "id 20 is out of range"
)
api(
    "classify float valid",
    lambda t: R.classify(P["enc"], ENC, [1, 2], valid=[1.0, 0.0]),
    InputError,
    "True/False flags",
)
api(
    "classify lacks the classifier",
    lambda t: R.classify(without(P["enc"], "classifier.weight"), ENC, [1]),
    InputError,
    "params lack the tensor 'classifier.weight'",
)
api(
    "sentence_embedding of a decoder",
    lambda t: R.sentence_embedding(P["dec"], DEC, [1]),
    InputError,
    "needs a model with an encoder",
)
api(
    "sentence_embedding type -1",
    lambda t: R.sentence_embedding(P["bert"], BERT, [1], [-1]),
    InputError,
    "types: id -1 is out of range",
)
api(
    "next_token_logits src to a decoder",
    lambda t: R.next_token_logits(P["dec"], DEC, [1]),
    InputError,
    "src_ids given to a decoder-only model",
)
api(
    "next_token_logits without src",
    lambda t: R.next_token_logits(P["hello"], HELLO),
    InputError,
    "needs src_ids",
)
api(
    "next_token_logits step id -1",
    lambda t: R.next_token_logits(P["dec"], DEC)([1, -1]),
    InputError,
    "id -1 is out of range",
)
api(
    "next_token_logits lacks lm_head",
    lambda t: R.next_token_logits(without(P["dec"], "lm_head.weight"), DEC),
    InputError,
    "lack the tensor 'lm_head.weight'",
)

# -- weights.init / save, loading.load, tokenizer.save
for std in (0.0, float("nan"), -1.0, float("inf")):
    api(
        f"init std {std}",
        lambda t, s=std: weights.init(DEC, std=s),
        InputError,
        f"std must be a finite number > 0, got {std}",
        cli=["init", "{tmp}/x", "--std", str(std)],
    )
api("init std text", lambda t: weights.init(DEC, std="0.1"), InputError, "std must be a finite")
for seed in (-3, 2**32):
    api(
        f"init seed {seed}",
        lambda t, s=seed: weights.init(DEC, seed=s),
        InputError,
        r"seed must be an integer in \[0, 2\*\*32\)",
        cli=["init", "{tmp}/x", "--seed", str(seed)],
    )
api("init seed 1.5", lambda t: weights.init(DEC, seed=1.5), InputError, "seed must be an integer")
api("init dtype int", lambda t: weights.init(DEC, dtype=np.int64), InputError, "float dtype")
api(
    "init a dict config",
    lambda t: weights.init({"arch": "decoder"}),
    InputError,
    "cfg must be a Config",
)


def saved(t: Path):
    weights.save(t / "ck", DEC, P["dec"])
    (t / "ck" / "mine.txt").write_text("keep me")


def notes(t: Path):
    (t / "ck").mkdir()
    (t / "ck" / "notes.txt").write_text("keep me")


def a_file(t: Path):
    (t / "f").write_text("{}")


api(
    "save replaces a checkpoint",
    lambda t: weights.save(t / "ck", DEC, weights.init(DEC, seed=5)),
    OutputExists,
    "already holds files; pass overwrite=True",
    setup=saved,
)
api(
    "save onto a folder of files",
    lambda t: weights.save(t / "ck", DEC, P["dec"]),
    OutputExists,
    "pass overwrite=True",
    cli=["init", "{hello}"],
    cli_says="give --overwrite",
    setup=notes,
)
api(
    "save over a file",
    lambda t: weights.save(t / "f", DEC, P["dec"], overwrite=True),
    CheckpointError,
    "not a directory",
    setup=a_file,
)
api(
    "save lacks a tensor",
    lambda t: weights.save(t / "ck", DEC, without(P["dec"], "lm_head.weight")),
    CheckpointError,
    "missing tensor 'lm_head.weight'",
)
api(
    "save as int8",
    lambda t: weights.save(t / "ck", DEC, P["dec"], dtype="int8"),
    GlassformerError,
    "cannot store weights as int8",
)


def hf_export(t):
    from glassformer.formats import hf_dir

    hf_dir.export(t / "ck", DEC, P["dec"])


def tok_save(t):
    from glassformer import tokenizer

    tokenizer.save(tokenizer.article_tokenizer(), t / "f")


api("hf export onto a folder of files", hf_export, OutputExists, "overwrite=True", setup=notes)
api("tokenizer.save over a file", tok_save, OutputExists, "overwrite=True", setup=a_file)
api("load a missing folder", lambda t: loading.load(t / "nope"), CheckpointError, "not found")
api(
    "load a file",
    lambda t: loading.load(t / "f"),
    CheckpointError,
    "is a file, not a directory",
    setup=a_file,
)

# -- decode: the CLI's numbers, the prompt, the step function
for n in (-5, 0):
    api(
        f"greedy max_new_tokens {n}",
        lambda t, n=n: decoding.greedy(GOOD_STEP, [1], n),
        InputError,
        f"max_new_tokens must be at least 1, got {n}",
        cli=[*GEN, "--max-new-tokens", str(n)],
        names=(("max_new_tokens", "--max-new-tokens"),),
    )
for n in (2.5, True, "3"):
    api(
        f"greedy max_new_tokens {n!r}",
        lambda t, n=n: decoding.greedy(GOOD_STEP, [1], n),
        InputError,
        "max_new_tokens must be at least 1",
    )
for prompt, match in [
    ([], "prompt is empty"),
    ("ab", "not a list of token ids"),
    ([1.5], "integer token ids"),
    (None, "prompt is empty"),
]:
    api(
        f"greedy prompt {prompt!r}",
        lambda t, p=prompt: decoding.greedy(GOOD_STEP, p, 3),
        InputError,
        match,
    )
api(
    "greedy step not a function",
    lambda t: decoding.greedy(np.zeros(3), [1], 3),
    InputError,
    "step must be a function",
)
api(
    "greedy over forward's (T, V)",
    lambda t: decoding.greedy(lambda ids: R.forward(P["dec"], DEC, ids), [1, 2], 3),
    InputError,
    r"returned logits of shape \(2, 12\); it must return the next token's logits",
)
api(
    "greedy NaN logits",
    lambda t: decoding.greedy(step_of([0.0, np.nan, 1.0]), [1], 3),
    InputError,
    "non-finite logits",
)
api(
    "sample all -inf logits",
    lambda t: decoding.sample(step_of([-np.inf] * 3), [1], 3, seed=0),
    InputError,
    "all -inf",
)
api(
    "greedy eos -1",
    lambda t: decoding.greedy(GOOD_STEP, [1], 3, eos_id=-1),
    InputError,
    "eos_id must be",
)
api(
    "greedy max_len 0",
    lambda t: decoding.greedy(GOOD_STEP, [1], 3, max_len=0),
    InputError,
    "max_len must be an integer >= 1",
)
for value in (0.0, -1.0, float("nan"), float("inf")):
    api(
        f"sample temperature {value}",
        lambda t, v=value: decoding.sample(GOOD_STEP, [1], 3, temperature=v),
        InputError,
        f"temperature must be a finite number > 0, got {value}",
        cli=[*SAMPLE, "--temperature", str(value)],
    )
api(
    "filter_probs temperature 0",
    lambda t: decoding.filter_probs(np.zeros(3), 0),
    InputError,
    "temperature must be a finite number > 0",
)
api(
    "sample temperature text",
    lambda t: decoding.sample(GOOD_STEP, [1], 3, temperature="hot"),
    InputError,
    "temperature must be",
)
for value in (0, -5):
    api(
        f"sample top_k {value}",
        lambda t, v=value: decoding.sample(GOOD_STEP, [1], 3, top_k=v),
        InputError,
        f"top_k must be >= 1, got {value}",
        cli=[*SAMPLE, "--top-k", str(value)],
        names=(("top_k", "top-k"),),
    )
for value in (0.0, 1.5, float("nan")):
    api(
        f"sample top_p {value}",
        lambda t, v=value: decoding.sample(GOOD_STEP, [1], 3, top_p=v),
        InputError,
        r"top_p must be in \(0, 1\]",
        cli=[*SAMPLE, "--top-p", str(value)],
        names=(("top_p", "top-p"),),
    )
for value in (-1, 2**32):
    api(
        f"sample seed {value}",
        lambda t, v=value: decoding.sample(GOOD_STEP, [1], 3, seed=v),
        InputError,
        r"seed must be an integer in \[0, 2\*\*32\)",
        cli=[*SAMPLE, "--seed", str(value)],
    )
api(
    "beam width 0",
    lambda t: decoding.beam_search(GOOD_STEP, [1], 3, None, width=0),
    InputError,
    "beam width must be >= 1, got 0",
    cli=[*BEAM, "--beam-width", "0"],
)
for value in (float("nan"), float("inf"), -float("inf")):
    api(
        f"beam length_penalty {value}",
        lambda t, v=value: decoding.beam_search(GOOD_STEP, [1], 3, None, length_penalty=v),
        InputError,
        f"length_penalty must be a finite number, got {value}",
        cli=[*BEAM, f"--length-penalty={value}"],
        names=(("length_penalty", "length-penalty"),),
    )
api(
    "beam max_new_tokens -1",
    lambda t: decoding.beam_search(GOOD_STEP, [1], -1, None),
    InputError,
    "max_new_tokens must be at least 1",
)
api("Beam width 0", lambda t: decoding.Beam([1], 3, None, width=0), InputError, "beam width")

# -- the trace, interventions, Config


def read_trace(name):
    with tracing() as tr:
        R.forward(P["dec"], DEC, [1, 2])
    return tr[name]


api(
    "trace a misspelt step",
    lambda t: read_trace("decoder.0.self_attn.head0.a"),
    TraceError,
    r"no step named .*; did you mean 'decoder.0.self_attn.head0.A'",
)
api("trace no such step", lambda t: read_trace("zzz"), TraceError, r"see tr.names\(\)")
api(
    "tracing int dtype",
    lambda t: tracing(dtype=np.int32).__enter__(),
    InputError,
    "float64 or float32",
)
api(
    "intervene with a number",
    lambda t: intervene({"decoder.*.ffn.out": 5}).__enter__(),
    InputError,
    "to a function of its value, got int",
)
api(
    "intervene with a list",
    lambda t: intervene([lambda x: x]).__enter__(),
    InputError,
    "intervene takes",
)
api("override not key=value", lambda t: DEC.override(5), ConfigError, "expected key=value")
api(
    "Config d_model 0",
    lambda t: Config(d_model=0),
    ConfigError,
    "d_model must be >= 1",
    cli=["config", "--set", "d_model=0"],
)
api("preset unknown", lambda t: preset("nosuch"), ConfigError, "unknown preset 'nosuch'")

# -- the PyTorch engine's forward


TORCH_MODELS: dict = {}


def torch_call(fn):
    def call(t):
        torch = pytest.importorskip("torch")
        from glassformer.torch_model import from_params

        if not TORCH_MODELS:
            TORCH_MODELS.update(
                {"dec": from_params(DEC, P["dec"]), "hello": from_params(HELLO, P["hello"])}
            )
        return fn(torch, TORCH_MODELS)

    return call


for name, fn, match in [
    ("float ids", lambda th, m: m["dec"](th.tensor([[1.0, 2.0]])), "integers, got torch.float32"),
    ("bool ids", lambda th, m: m["dec"](th.tensor([[True]])), "integers, got torch.bool"),
    ("1-D ids", lambda th, m: m["dec"](th.tensor([1, 2])), r"\(B, T\) tensor .* shape \(2,\)"),
    ("list ids", lambda th, m: m["dec"]([[1, 2]]), r"\(B, T\) tensor of token ids, got list"),
    ("id -1", lambda th, m: m["dec"](th.tensor([[1, -1]])), "decoder ids: id -1 is out of range"),
    ("id 12", lambda th, m: m["dec"](th.tensor([[12]])), "id 12 is out of range"),
    ("empty", lambda th, m: m["dec"](th.zeros(1, 0, dtype=th.long)), "are empty"),
    ("too long", lambda th, m: m["dec"](th.ones(1, 9, dtype=th.long)), "9 tokens but max_len"),
    (
        "valid shape",
        lambda th, m: m["dec"](th.tensor([[1, 2]]), valid=th.tensor([[True]])),
        r"valid must be one flag per token, shape \(1, 2\)",
    ),
    (
        "valid float",
        lambda th, m: m["dec"](th.tensor([[1, 2]]), valid=th.ones(1, 2)),
        "True/False flags",
    ),
    (
        "src to a decoder",
        lambda th, m: m["dec"](th.tensor([[1]]), src_ids=th.tensor([[1]])),
        "src_ids given to a model of arch='decoder'",
    ),
    (
        "src id 10",
        lambda th, m: m["hello"](th.tensor([[6]]), src_ids=th.tensor([[0, 10]])),
        "encoder ids: id 10 is out of range",
    ),
    (
        "src_valid shape",
        lambda th, m: m["hello"](
            th.tensor([[6]]), src_ids=th.tensor([[0, 2]]), src_valid=th.tensor([[True]])
        ),
        "src_valid must be one flag per token",
    ),
    ("no src", lambda th, m: m["hello"](th.tensor([[6]])), "needs src_ids"),
]:
    api(f"torch {name}", torch_call(fn), GlassformerError, match)


def cache_past_max_len(th, m):
    from glassformer.torch_model import KVCache

    cache = KVCache.empty(DEC.n_decoder_layers)
    m["dec"](th.ones(1, 8, dtype=th.long), cache=cache)
    m["dec"](th.ones(1, 1, dtype=th.long), cache=cache)


api(
    "torch cache past max_len",
    torch_call(cache_past_max_len),
    InputError,
    "decoder input has 9 tokens but max_len is 8",
)


# -- running the api rows


@pytest.fixture(scope="module")
def hello_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("m")
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    return d


def cli_line(argv, folder: Path, tmp: Path, capsys) -> str:
    capsys.readouterr()
    try:
        code = main([a.format(tmp=tmp, hello=folder / "hello") for a in argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("glassformer: error: "), err
    return lines[0]


@pytest.mark.parametrize("case", API, ids=lambda c: f"{c.family}-{c.name}")
def test_api_refuses_with_a_typed_error(case, hello_dir, tmp_path, capsys):
    if case.setup:
        case.setup(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(case.error, match=case.match) as info:
        case.call(tmp_path)
    message = str(info.value)
    assert isinstance(info.value, GlassformerError) and "\n" not in message
    assert snapshot(tmp_path) == before, "a refusal wrote files"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in before_names(tmp_path, before)
    )
    if case.cli:
        line = cli_line(case.cli, hello_dir, tmp_path, capsys)
        expected = message
        for lib, flag in case.names:
            expected = expected.replace(lib, flag)
        assert (case.cli_says or expected) in line, (expected, line)


def before_names(tmp_path, before):
    """The top-level entries of tmp_path that held the files of `before` (plus empty ones)."""
    tops = {tmp_path / f.relative_to(tmp_path).parts[0] for f in before}
    return tops | {p for p in tmp_path.iterdir() if p.is_dir() and not any(p.iterdir())}


def test_save_with_overwrite_replaces_and_an_empty_folder_is_free(tmp_path):
    (tmp_path / "empty").mkdir()
    weights.save(tmp_path / "empty", DEC, P["dec"])  # nothing there to lose
    saved(tmp_path)
    weights.save(tmp_path / "ck", DEC, weights.init(DEC, seed=5), overwrite=True)
    assert not (tmp_path / "ck" / "mine.txt").exists()  # the whole folder was replaced
    _, back, _ = weights.load(tmp_path / "ck")
    np.testing.assert_allclose(
        back["lm_head.weight"], weights.init(DEC, seed=5)["lm_head.weight"], rtol=1e-6
    )


def test_the_errors_are_the_old_exception_types_too():
    """Callers that caught ValueError / KeyError / FileExistsError keep working."""
    assert issubclass(InputError, ValueError) and issubclass(TraceError, KeyError)
    assert issubclass(OutputExists, FileExistsError)
    assert str(TraceError("no step named 'x'")) == "no step named 'x'"  # no KeyError quotes
    assert errors.InputError is InputError


# -- values: extreme but finite decoding values

VALUES: list[Case] = []
for value in ("1e-300", "1e-310", "5e-324", "1e-45", "1e300"):
    for engine in ("reference", "torch"):
        VALUES.append(
            Case(
                "values",
                [*SAMPLE, "--temperature", value, "--seed", "1", "--engine", engine],
                "stopped",
            )
        )
for extra in (
    ["--top-p", "1e-300"],
    ["--top-p", "5e-324", "--temperature", "1e-310"],
    ["--top-k", "1", "--temperature", "5e-324"],
    ["--temperature", "1e-310", "--dtype", "float32"],
    ["--temperature", "1e-310", "--dtype", "int8"],
):
    VALUES.append(Case("values", [*SAMPLE, *extra, "--seed", "3"], "stopped"))
for value in (
    "1e300",
    "-1e300",
    "1.7976931348623157e308",
    "-1.7976931348623157e308",
    "5e-324",
    "16",
    "17",
    "-17",
    "1e20",
):
    VALUES.append(
        Case("values", [*BEAM, f"--length-penalty={value}", "--max-new-tokens", "4"], "stopped")
    )
VALUES.append(
    Case("values", [*BEAM, "--length-penalty=-1e300", "--engine", "reference"], "stopped")
)
VALUES.append(Case("values", [*BEAM, "--length-penalty=1e300", "--dtype", "float32"], "stopped"))
VALUES.append(
    Case(
        "values",
        [
            "explain",
            "{hello}",
            "hello world",
            "--strategy",
            "sample",
            "--temperature",
            "1e-310",
            "--max-new-tokens",
            "3",
        ],
        "",
    )
)
VALUES.append(
    Case(
        "values",
        [
            "explain",
            "{hello}",
            "hello world",
            "--strategy",
            "beam",
            "--length-penalty=-1e300",
            "--max-new-tokens",
            "3",
        ],
        "",
    )
)
# Values that are not finite once parsed are still refused, in the CLI's words.
VALUES.append(Case("values", [*SAMPLE, "--temperature", "1e-400"], "a finite number > 0, got 0.0"))
VALUES.append(Case("values", [*SAMPLE, "--top-p", "1e-400"], "top-p must be in (0, 1], got 0.0"))
VALUES.append(Case("values", [*BEAM, "--length-penalty=1e400"], "finite number, got inf"))
VALUES.append(Case("values", [*BEAM, "--length-penalty=-1e999"], "finite number, got -inf"))
for c in VALUES:
    c.code = 2 if "got" in c.message else 0


@pytest.fixture(scope="module")
def models(hello_dir):
    return hello_dir


@pytest.mark.parametrize("case", VALUES, ids=case_id)
def test_values_the_cli_accepts(case, models, tmp_path, capsys):
    if "torch" in case.argv or "--dtype" in case.argv:
        pytest.importorskip("torch")
    check_case(case, models, tmp_path, capsys)


def _stdout(argv, folder, capsys):
    capsys.readouterr()
    assert main([a.format(hello=folder / "hello") for a in argv]) == 0
    return capsys.readouterr().out


def test_a_tiny_temperature_samples_what_greedy_chooses(models, capsys):
    greedy = _stdout(GEN, models, capsys)
    for value in ("1e-300", "5e-324"):
        assert _stdout([*SAMPLE, "--temperature", value, "--seed", "7"], models, capsys) == greedy


def _decimal_softmax(z, T):
    """softmax(z / T) in 60-digit decimal arithmetic, with an exponent range no float has."""
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.Emin, ctx.Emax = 60, -(10**17), 10**17
        ctx.traps[decimal.Underflow] = ctx.traps[decimal.Subnormal] = False
        ctx.traps[decimal.Inexact] = ctx.traps[decimal.Rounded] = False
        scaled = [decimal.Decimal(float(v)) / decimal.Decimal(T) for v in z]
        top = max(scaled)
        e = [(s - top).exp() for s in scaled]
        total = sum(e)
        return np.array([float(x / total) for x in e])


@pytest.mark.parametrize("T", [5e-324, 1e-310, 1e-300, 1e-45, 1e-3, 0.37, 1.0, 2.5, 1e3, 1e300])
def test_filter_probs_is_softmax_of_logits_over_T(T):
    rng = np.random.default_rng(0)
    for z in (
        rng.normal(0, 3, 7),
        np.array([0.0, 1e-290, -1e-290, 5.0 - 1e-15, 5.0]),
        np.array([1e8, -1e8, 3e7, 1e8 - 1.0]),
    ):
        got = decoding.filter_probs(z, T)
        np.testing.assert_allclose(got, _decimal_softmax(z, T), rtol=1e-12, atol=1e-300)
        assert np.isfinite(got).all() and abs(got.sum() - 1) < 1e-12


def test_a_tiny_temperature_splits_ties_as_its_limit_does():
    np.testing.assert_allclose(
        decoding.filter_probs([1.0, 3.0, 3.0, 2.0], 1e-300), [0, 0.5, 0.5, 0]
    )


def test_sampled_tokens_carry_the_probability_filter_probs_gives():
    z = np.array([0.3, 2.0, -1.0, 1.5])
    g = decoding.sample(step_of(z), [0], 5, temperature=0.7, top_k=3, seed=4)
    q = decoding.filter_probs(z, 0.7, 3)
    assert g.chosen_probs == [q[t] for t in g.new_ids]


def _decimal_order(hyps, p):
    """The hypotheses ranked by logprob / n^p, best first, compared exactly: log |score| =
    ln(-logprob) - p·ln(n) with 400 digits (p·ln n of 1e300 keeps ln(-logprob)'s digits)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 400
        D = decimal.Decimal

        def key(h):
            return (D(-h.logprob).ln() - D(p) * D(max(h.n_generated, 1)).ln(), -h.logprob)

        return sorted(hyps, key=key)


@pytest.mark.parametrize(
    "p",
    [
        1e300,
        -1e300,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        1e20,
        -17.0,
        17.0,
        16.0,
        1.0,
        -0.5,
        5e-324,
    ],
)
def test_beam_ranking_under_any_finite_length_penalty_is_the_exact_one(p):
    rng = np.random.default_rng(1)
    hyps = [
        decoding.Hypothesis([0] * n, float(-rng.uniform(0.1, 20)), n)
        for n in (1, 2, 2, 3, 5, 5, 8, 13, 40)
    ]
    ranked = sorted(hyps, key=lambda h: h.rank(p))
    assert [id(h) for h in ranked] == [id(h) for h in _decimal_order(hyps, p)]
    assert all(math.isfinite(h.score(p)) for h in hyps)


@pytest.mark.parametrize("p", [1e300, -1e300])
def test_beam_search_with_a_huge_length_penalty_prefers_long_or_short(p):
    """A table model where EOS (0) is possible at every step: a huge positive penalty ranks the
    longest hypothesis first, a huge negative one the shortest."""
    logits = np.log([0.3, 0.4, 0.3])
    r = decoding.beam_search(step_of(logits), [1], 6, eos_id=0, width=3, length_penalty=p)
    lengths = [h.n_generated for h in r.ranked]
    assert lengths[0] == (max(lengths) if p > 0 else min(lengths))
    assert all(math.isfinite(h.score(p)) for h in r.ranked)


CASES = [*API, *VALUES]
