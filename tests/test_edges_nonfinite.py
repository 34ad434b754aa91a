"""Non-finite numbers never pass silently (issue 23, point 3), family "nonfinite".

Every path that hands numbers to a user, run on damaged copies of the tiny models whose FFN
weights overflow: `overflow(1e30)` overflows float32 only (products near 1e61 pass float32's
3.4e38, while float64 stays finite), `overflow(1e200)` overflows float64 too. Every command x
engine x dtype the command line accepts, as rows of the bad-input table (tests/table.py): a
float32 or int8 run of the first must say that the overflow is in a lower precision and what to
do, a run of the second must name the step where it starts (`numerics.origin`), one line, exit 2,
nothing written; the float64 runs of the first still answer (no false alarm). The explorer's
endpoints over real HTTP (as tests/test_serve.py serves them): a JSON error, status 400, with
the same one line. And the pieces under them: int8 layers turn a non-finite input into NaN
instead of failing or reading it as a number, and the batched functions say which input failed.
"""

from __future__ import annotations

import http.client
import json
import shutil
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from table import (  # noqa: E402
    Case,
    build_models,
    case_id,
    check_case,
    damaged,
    edit,
    make_file,
    overflow,
)

FAMILY = "nonfinite"
F32 = "lower precision"  # the float64 reference engine stays finite: a float32 / int8 overflow


def tokenoverflow(name: str, word: str):
    """One token's embedding set to +-1e30 (its model's first stack): an input holding it
    overflows float32 (its attention scores pass 3.4e38), the others stay finite."""

    def change(path):
        from safetensors.numpy import load_file, save_file

        from glassformer.formats import loading

        _, _, tok = loading.load(path.parent)
        t = load_file(str(path))
        key = (
            "encoder.tok_embed.weight"
            if "encoder.tok_embed.weight" in t
            else "decoder.tok_embed.weight"
        )
        w = t[key].astype(np.float64)
        w[tok.encode(word)[0]] = 1e30 * np.random.default_rng(0).choice([-1.0, 1.0], w.shape[1])
        t[key] = w
        save_file(t, str(path))

    return edit(name, "model.safetensors", change)


CASES: list = []


def add(argv, message, name, scale, code=2, setup=None):
    CASES.append(Case(FAMILY, argv, message, code, setup or damaged(name, scale)))


ENGINES = {  # the (engine, dtype) pairs the command line accepts for generate
    "reference": ["--engine", "reference"],
    "float64": ["--engine", "torch", "--dtype", "float64"],
    "float32": ["--engine", "torch", "--dtype", "float32"],
    "int8": ["--dtype", "int8"],  # --engine auto: torch
}
STRATEGIES = {
    "greedy": [],
    "sample": ["--strategy", "sample", "--seed", "1"],
    "beam": ["--strategy", "beam", "--beam-width", "2"],
}
# (model, its text, the step named when float64 overflows too): a decoder and an
# encoder-decoder (whose encoder runs first)
GENERATORS = [("dec", "to be", "decoder.0.ffn"), ("hello", "hello world", "encoder.0.ffn")]

# generate: every engine x dtype x strategy, both archs, both damages
for name, text, step in GENERATORS:
    for engine, flags in ENGINES.items():
        for more in STRATEGIES.values():
            argv = ["generate", "{bad}", text, "--max-new-tokens", "3", *flags, *more]
            add(argv, step, name, 1e200)
            if engine in ("float32", "int8"):
                add(argv, f"{F32}: try --dtype float64 or --engine reference", name, 1e30)
            elif more == STRATEGIES["greedy"]:  # float64 stays finite: an answer, no false alarm
                add(argv, "stopped", name, 1e30, code=0)

# generate --input: greedy batched (torch) or one at a time (reference, sampling); the line named
LINES = {"dec": "to be\n\nor not\n", "hello": "world\n\nhello world\n"}  # shortest first


def lines_of(name, scale):
    def setup(tmp, models):
        damaged(name, scale)(tmp, models)
        make_file("in.txt", LINES[name])(tmp, models)

    return setup


for name, _, step in GENERATORS:
    for engine, flags in ENGINES.items():
        argv = ["generate", "{bad}", "--input", "{tmp}/in.txt", "--max-new-tokens", "2", *flags]
        add(
            argv,
            "in.txt, line 1: ",
            name,
            1e200,
            setup=lines_of(name, 1e200),
        )
        if engine in ("float32", "int8"):
            add(argv, F32, name, 1e30, setup=lines_of(name, 1e30))
    argv = ["generate", "{bad}", "--input", "{tmp}/in.txt", "--strategy", "sample"]
    add(argv, step, name, 1e200, setup=lines_of(name, 1e200))

# translate: every dtype x beam / greedy / n-best / batched lines, the sentence named
TRANSLATE_MODES = {
    "beam": [],
    "greedy": ["--beam", "1"],
    "n-best": ["--n-best", "2"],
}
for dtype in ("float32", "float64", "int8"):
    for more in TRANSLATE_MODES.values():
        argv = ["translate", "{bad}", "Hello.", *more, "--dtype", dtype]
        add(argv, "sentence 1: translation stopped at new token 1", "tr", 1e200)
        if dtype != "float64":
            add(argv, f"{F32}: try --dtype float64", "tr", 1e30)
    argv = ["translate", "{bad}", "--input", "{tmp}/in.txt", "--dtype", dtype]

    def tr_lines(scale):
        def setup(tmp, models):
            damaged("tr", scale)(tmp, models)
            make_file("in.txt", "\nHello.\n")(tmp, models)

        return setup

    add(argv, "in.txt, line 2: translation stopped", "tr", 1e200, setup=tr_lines(1e200))
add(["translate", "{bad}", "Hello.", "--dtype", "float64"], "translation(s)", "tr", 1e30, code=0)

# eval: float32 only, every task
EVALS = [
    (
        "tr",
        ["--data", "{models}/pairs.tsv", "--limit", "2"],
        "pair 2: translation stopped",
        "translate --dtype float64",
    ),
    (
        "tr",
        ["--data", "{models}/pairs.tsv", "--limit", "2", "--beam", "1"],
        "pair 2: translation stopped",  # the shorter source, decoded first
        "translate --dtype float64",
    ),
    (
        "lm",
        ["--data", "{models}/corpus.txt", "--limit", "40"],
        "the logits of tokens 1-16",
        "generate --engine reference",
    ),
    (
        "enc",
        ["--data", "{models}/pairs.tsv", "--limit", "3"],
        'sentence "It\'s useless.": the class logits',  # the first pair's English side
        "classify --engine reference",
    ),
]
for name, more, where, exact in EVALS:
    add(["eval", "{bad}", *more], where, name, 1e200)
    add(["eval", "{bad}", *more], f"{F32}: eval runs in float32 only; {exact}", name, 1e30)

# classify and embed: every engine; the text (or line) named
for engine in ("auto", "torch", "reference"):
    argv = ["classify", "{bad}", "to be", "or not", "--engine", engine]
    add(argv, "text 1: the class logits are non-finite", "enc", 1e200)
    if engine == "reference":
        add(argv, "\t", "enc", 1e30, code=0)
    else:
        add(argv, f"{F32}: try --engine reference", "enc", 1e30)
add(
    ["classify", "{bad}", "--input", "{tmp}/in.txt"],
    "in.txt, line 2: the class logits",
    "enc",
    1e200,
    setup=lambda tmp, models: (
        damaged("enc", 1e200)(tmp, models),
        make_file("in.txt", "\nto be\n")(tmp, models),
    ),
)
for engine in ("torch", "reference"):
    argv = ["embed", "{bad}", "to be", "or not", "--engine", engine]
    add(argv, "text 1: the sentence embedding's values are non-finite", "enc", 1e200)
    add([*argv, "--json"], "encoder.0.ffn", "enc", 1e200)
    if engine == "reference":
        add(argv, "cosine similarity", "enc", 1e30, code=0)
    else:
        add(argv, f"{F32}: try --engine reference", "enc", 1e30)

# the reference engine's reports: explain, lens, attribute (float64; attribute's torch float64)
for name, text, step in [*GENERATORS, ("enc", "to be", "encoder.0.ffn")]:
    add(["explain", "{bad}", text], step, name, 1e200)
    add(["explain", "{bad}", text, "--json", "{tmp}/r.json"], step, name, 1e200)
add(["explain", "{bad}", "to be", "--max-new-tokens", "2"], "generation stopped", "dec", 1e200)
add(["explain", "{bad}", "to be", "--find-nan"], "decoder.0.ffn", "dec", 1e200, code=0)
add(["explain", "{bad}", "to be"], "Result", "dec", 1e30, code=0)
for name, more, step in [
    ("lm", [], "the logits are non-finite"),
    ("tr", [], "generation stopped at new token 1"),
    ("tr", ["--target", "Hola"], "encoder.0.ffn"),
]:
    add(["lens", "{bad}", "Hello." if name == "tr" else "to be", *more], step, name, 1e200)
add(["attribute", "{bad}", "to be", "--max-new-tokens", "2"], "decoder.0.ffn", "lm", 1e200)
add(
    ["attribute", "{bad}", "Hello.", "--target", "Hola", "--steps", "2"],
    "the attributions are non-finite",
    "tr",
    1e200,
)
add(["attribute", "{bad}", "Hello.", "--steps", "2"], "encoder.0.ffn", "tr", 1e200)


# which input: one overflows float32, the others do not; batches sort by length, so the place
# named must be the input's own, not its place in a batch
def with_file(setup, content):
    def both(tmp, models):
        setup(tmp, models)
        make_file("in.txt", content)(tmp, models)

    return both


HOW, Z, NOT = (
    tokenoverflow("hello", "how"),
    tokenoverflow("dec", "z"),
    tokenoverflow("enc", "not"),
)
for argv, message, setup in [
    (["translate", "{bad}", "how world", "world"], "sentence 1: translation", HOW),
    (["translate", "{bad}", "world", "world how"], "sentence 2: translation", HOW),
    (["translate", "{bad}", "world", "world how", "--beam", "1"], "sentence 2: translation", HOW),
    (["translate", "{bad}", "world", "world how", "--n-best", "2"], "sentence 2: translation", HOW),
    (
        ["translate", "{bad}", "world", "--input", "{tmp}/in.txt"],
        "in.txt, line 3: translation",
        with_file(HOW, "world\n\nhow world\n"),
    ),
    (
        ["generate", "{bad}", "--input", "{tmp}/in.txt", "--dtype", "float32"],
        "in.txt, line 3: translation stopped",
        with_file(HOW, "world\n\nhow world\n"),
    ),
    (
        [
            "generate",
            "{bad}",
            "--input",
            "{tmp}/in.txt",
            "--dtype",
            "int8",
            "--max-new-tokens",
            "1",
        ],
        "in.txt, line 3: generation stopped",
        with_file(Z, "to be\n\nto be z\n"),
    ),
    (
        [
            "generate",
            "{bad}",
            "--input",
            "{tmp}/in.txt",
            "--dtype",
            "float32",
            "--max-new-tokens",
            "1",
        ],
        "in.txt, line 1: generation stopped",
        with_file(Z, "z to\nto\n"),
    ),
    (["classify", "{bad}", "to be", "not"], "text 2: the class logits", NOT),
    (
        ["classify", "{bad}", "to be", "--input", "{tmp}/in.txt"],
        "in.txt, line 2: the class",
        with_file(NOT, "\nnot\n"),
    ),
    (["embed", "{bad}", "to be", "not"], "text 2: the sentence embedding", NOT),
    (
        ["eval", "{bad}", "--data", "{tmp}/in.txt"],
        "sentence 'not': the class logits",
        with_file(NOT, "to be\tx\nnot\ty\n"),
    ),
    (["translate", "{bad}", "world", "--dtype", "float64"], "hola", HOW),
]:
    CASES.append(Case(FAMILY, argv, message, 0 if "float64" in argv else 2, setup))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory)


TABLE = [c for c in CASES if isinstance(c, Case)]


@pytest.mark.parametrize("case", TABLE, ids=[case_id(c) for c in TABLE])
def test_nonfinite_cli(case, models, tmp_path, capsys):
    check_case(case, models, tmp_path, capsys)


# -- the explorer's endpoints, over HTTP ------------------------------------------------------


@dataclass
class Served:
    family: str
    model: str  # a damaged copy: {name}{32|64}
    dtype: str  # serve --dtype
    action: str
    body: dict
    message: str


SERVED: list[Served] = []
for model, text, step in [
    ("dec64", "to be", "decoder.0.ffn"),
    ("hello64", "hello", "encoder.0"),
    ("enc64", "to be", "encoder.0.ffn"),
]:
    SERVED.append(Served(FAMILY, model, "float64", "run", {"text": text}, step))
    if not model.startswith("enc"):
        for strategy in ("greedy", "sample", "beam"):
            body = {"text": text, "strategy": strategy, "max_new_tokens": 3, "seed": 1}
            SERVED.append(Served(FAMILY, model, "float64", "generate", body, step))
for model, text in [("dec32", "to be"), ("hello32", "hello")]:
    for strategy in ("greedy", "sample", "beam"):
        body = {"text": text, "strategy": strategy, "max_new_tokens": 3, "seed": 1}
        SERVED.append(
            Served(FAMILY, model, "float32", "generate", body, f"{F32}: start serve with --dtype")
        )
SERVED.append(Served(FAMILY, "hello32", "float32", "run", {"text": "hello"}, F32))
SERVED.append(
    Served(
        FAMILY,
        "dec64",
        "float64",
        "intervene",
        {
            "text": "to be",
            "heads": [{"stack": "decoder", "kind": "self_attn", "layer": 0, "head": 0}],
        },
        "decoder.0.ffn",
    )
)
CASES += SERVED


@pytest.fixture(scope="module")
def servers(models, tmp_path_factory):
    from glassformer.serve import Explorer, Registry, make_server

    tmp = tmp_path_factory.mktemp("served")
    folders = []
    for name in ("dec", "hello", "enc"):
        for tag, scale in (("32", 1e30), ("64", 1e200)):
            shutil.copytree(models / name, tmp / f"{name}{tag}")
            overflow(scale)(tmp / f"{name}{tag}" / "model.safetensors")
            folders.append(tmp / f"{name}{tag}")
    running = {}
    for dtype in ("float64", "float32"):
        server, sock, url = make_server(Explorer(Registry(folders, dtype=dtype)), "127.0.0.1", 0)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.time() + 30
        while not server.started and time.time() < deadline:
            time.sleep(0.02)
        assert server.started
        running[dtype] = (server, thread, sock.getsockname()[1])
    yield {dtype: port for dtype, (_, _, port) in running.items()}
    for server, thread, _ in running.values():
        server.should_exit = True
        thread.join(10)


def post(port: int, action: str, body: dict) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", f"/api/{action}", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    text = r.read().decode("utf-8")
    conn.close()
    return r.status, text


@pytest.mark.parametrize(
    "case", SERVED, ids=[f"{FAMILY}-serve-{c.model}-{c.dtype}-{c.action}-{c.body}" for c in SERVED]
)
def test_nonfinite_served(case, servers):
    status, text = post(servers[case.dtype], case.action, {"model": case.model, **case.body})
    assert "Traceback" not in text
    assert status == 400, (status, text)
    message = json.loads(text)["error"]  # strict JSON: an error, not numbers
    assert "\n" not in message and "non-finite" in message, message
    assert case.message in message, message


def test_float64_serve_answers_a_float32overflow(servers):
    """The float64 explorer shows the model that only float32 overflows: no false alarm."""
    for model, text in (("dec32", "to be"), ("hello32", "hello")):
        status, body = post(
            servers["float64"], "generate", {"model": model, "text": text, "max_new_tokens": 2}
        )
        assert status == 200, body
        status, body = post(servers["float64"], "run", {"model": model, "text": text})
        assert status == 200, body


# -- the pieces under the commands -------------------------------------------------------------


def test_int8_layers_give_nan_for_a_non_finite_input():
    """torch's dynamic int8 kernel fails on an input without a finite range and reads a NaN
    among numbers as a number (a finite wrong answer); Int8Linear gives NaN in the rows that
    hold one, the other rows as they would be alone, and a finite input exactly the kernel's."""
    from glassformer.quantize import Int8Linear

    layer = Int8Linear(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)))
    fine = torch.tensor([[1.0, 2.0, 3.0]])
    kernel = torch.ops.quantized.linear_dynamic
    alone = kernel(fine, layer._packed, layer.reduce_range)
    for bad in (float("nan"), float("inf"), -float("inf")):
        for x in (torch.tensor([[1.0, bad, 2.0]]), torch.full((1, 3), bad)):
            y = layer(torch.cat([x, fine]))
            assert torch.isnan(y[0]).all() and torch.equal(y[1], alone[0]), (bad, y)
    big = torch.full((2, 3), 3e38)  # finite, though its sum overflows
    assert torch.equal(layer(big), kernel(big, layer._packed, layer.reduce_range))
    assert torch.equal(layer(fine), alone)


ROWS = [
    (FAMILY, fn, order)
    for fn in ("greedy_batch", "beam_batch", "greedy_prompts")
    for order in (0, 1)
]
CASES += ROWS


@pytest.mark.parametrize("row", ROWS, ids=[f"{f}-{fn}-bad-{k}" for f, fn, k in ROWS])
def test_batched_functions_name_the_failing_input(row, models, tmp_path):
    """A batch where one input overflows float32 (it holds the damaged token) and the other does
    not: the error's row is that input's index whichever place it has, the origin said; without
    params, only that it happened."""
    from glassformer import inference, translating
    from glassformer.formats import loading
    from glassformer.numerics import NO_WEIGHTS, NonFiniteError

    _, fn, order = row
    name, word, good, bad = (
        ("dec", "z", "to be", "to be z")
        if fn == "greedy_prompts"
        else ("hello", "how", "world", "how world")
    )
    tokenoverflow(name, word)(tmp_path, models)
    cfg, params, tok = loading.load(tmp_path / "bad")
    model = inference.torch_engine(cfg, params, "float32")
    batch = [tok.encode(good), tok.encode(bad)][:: 1 if order else -1]  # the bad one at `order`
    call = {
        "greedy_batch": lambda **kw: translating.greedy_batch(
            model, batch, 0, tok.bos_id, None, 1, **kw
        ),
        "beam_batch": lambda **kw: translating.beam_batch(
            model, batch, tok.bos_id, None, 2, 1, **kw
        ),
        "greedy_prompts": lambda **kw: inference.greedy_prompts(model, batch, 1, **kw),
    }[fn]
    with pytest.raises(NonFiniteError, match=F32) as e:
        call(params=params)
    assert e.value.row == order, (e.value.row, str(e.value))
    with pytest.raises(NonFiniteError) as e:
        call()
    assert e.value.row == order and NO_WEIGHTS in str(e.value)
