"""Only a `GlassformerError` leaves the Python API for bad input (issue 35, point 3).

The oracle is the promise itself, driven by hypothesis: every public method of `Model` and of its
`Runtime` (found by introspection, so that a new method is driven as soon as it exists; `Model.load`
is `glassformer.load`), `Model(...)`, `Runtime(...)`, `explain.text.render` and
`torch_model.from_params` is called with
one or more arguments drawn from values of the wrong type (None, numbers, bools, str, bytes,
lists, dicts, NumPy arrays and scalars, plain objects, paths) and numbers out of range, the others
good; the call may succeed (a value of the wrong type that happens to mean something) or raise,
and what it raises must be a `GlassformerError` of one line, with nothing written in the work
folder or the model's source. Beside it, the table is complete: every parameter of every public
method has a row of `glassformer.arguments.ARGS`.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from table import snapshot
from test_edges_python import build as build_models

from glassformer import arguments
from glassformer.decoding import Decoding
from glassformer.errors import GlassformerError
from glassformer.model import Model
from glassformer.runtime import Runtime

METHODS = [n for n in arguments.public_methods(Model) if n != "__init__"]
RUNTIME_METHODS = [n for n in arguments.public_methods(Runtime) if n != "__init__"]


def test_the_introspection_finds_the_methods_a_user_calls():
    assert {
        "load",
        "generate",
        "translate",
        "classify",
        "evaluate",
        "save",
        "export_hf",
        "run",
    } <= set(METHODS)
    assert {"step", "decoded", "encode", "pieces", "class_result"} <= set(RUNTIME_METHODS)
    assert not any(n.startswith("_") for n in METHODS + RUNTIME_METHODS)


# -- the table is complete ------------------------------------------------------------------------


def _parameters(fn, key: str) -> list[str]:
    sig = inspect.signature(inspect.unwrap(fn))
    names = [
        p.name
        for p in sig.parameters.values()
        if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        assert key in arguments.KEYWORDS, f"{key}(**...): say where its keywords go (KEYWORDS)"
        names += list(arguments.KEYWORDS[key]()[1])
    return names


def _entries():
    from glassformer.explain.text import render

    yield from ((name, getattr(Model, name)) for name in arguments.public_methods(Model))
    yield from ((name, getattr(Runtime, name)) for name in arguments.public_methods(Runtime))
    yield ("render", render)


@pytest.mark.parametrize("key, fn", list(_entries()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_parameter_has_a_row(key, fn):
    method = arguments.KEYWORDS[key]()[0] if key in arguments.KEYWORDS else key
    for name in _parameters(fn, key):
        assert arguments.row(key, name) or arguments.row(method, name), f"{key}({name}=): no row"
    assert hasattr(fn, "__wrapped__"), f"{key} is not checked on entry"


def test_the_command_line_types_are_the_table_s():
    """Each number option's argparse type refuses what the library refuses, at both sides of its
    bound, in the command line's words (its `ARGPARSE_NAMES` name, else its flag)."""
    import argparse

    from glassformer.argument_kinds import Call, Int, Real
    from glassformer.cli.common import option_type
    from glassformer.cli.flags import ARGPARSE_NAMES, FLAGS

    names = [
        n
        for n, r in arguments.ARGS.items()
        if isinstance(r, Int | Real) and n in FLAGS and (r.low is not None or isinstance(r, Real))
    ]
    assert {"beam", "n_best", "max_new_tokens", "limit", "top_k", "seed"} <= set(names)
    for name in names:
        r, convert = arguments.ARGS[name], option_type(name)
        edges = [r.low, r.low - 1] if isinstance(r, Int) else [r.low, (r.high or 0) + 1, 1e308]
        edges += [r.below, r.below - 1] if isinstance(r, Int) and r.below else []
        for value in [v for v in edges if v is not None]:
            try:
                r.check(value, name, Call({}))
                library = True
            except GlassformerError:
                library = False
            try:
                convert(str(value))
                cli = True
            except argparse.ArgumentTypeError as e:
                cli = False
                assert (ARGPARSE_NAMES.get(name) or FLAGS[name]) in str(e), (name, str(e))
            assert library == cli, (name, value)


# -- the hypothesis drive -------------------------------------------------------------------------


def build(tmp: Path) -> dict:
    """test_edges_python's tiny models ({kind: Model}), and the pairs a translator evaluates."""
    models = build_models(tmp)
    (tmp / "pairs.tsv").write_text("Hello World\tHola Mundo\nthe cat\tel gato\n" * 4)
    return {"dec": models.dec, "s2s": models.s2s, "clf": models.clf}


def good_values(kind: str, m: Model, tmp: Path) -> dict:
    """A value each parameter takes on this model (what the drive leaves good)."""
    stack = {"dec": "decoder", "s2s": "decoder", "clf": "encoder"}[kind]
    text = "Hello World" if kind == "s2s" else "to be"
    return {
        "text": text, "texts": [text], "sentences": [text], "clean": text, "ids": [1, 2],
        "prompt": [1], "src": [1, 2], "names": [f"{stack}.0.self_attn.head0"], "decoding": Decoding(
            max_new_tokens=2), "max_new_tokens": 2, "strategy": "greedy", "batch_size": 2,
        "places": None, "steps": ["logits"], "top_tokens": 2, "beam": 2, "n_best": 1,
        "dtype": "float32", "layers": [0], "heads": [0], "engine": "reference",
        "engines": ("reference", "torch"), "tol": 1e-3, "probs": [0.5, 0.5], "name": "x",
        "make": lambda: 1, "message": "a note", "fns": {}, "path": tmp / "out",
        "overwrite": False, "k": 2, "position": -1, "method": "gradient_x_input", "limit": 8,
        "window": False, "quiet": True, "reference": True, "fix": None, "room": 0,
        "what": "the text", "unknown": [], "prompt_len": 1, "step": None, "sublayers": False,
        "data": str(tmp / ("corpus.txt" if kind == "dec" else "pairs.tsv")),
        "temperature": 0.7, "top_k": 2, "top_p": 0.9, "seed": 3, "path_or_preset": "tiny",
        "params": m.params,
    }  # fmt: skip


class Thing:
    """A plain object: no method a glassformer parameter needs."""


WRONG = [
    None, True, False, 0, -1, 1.5, 0.0, float("nan"), float("inf"), -float("inf"), "", "zzz",
    "a\0b", "\udcff", b"bytes", [], [None], [1.5], ["x"], [-1], [[1]], [10**9], {}, {"a": 1}, (),
    set(), np.zeros(3), np.zeros((2, 2)), np.array(["a"]), np.int64(-3), np.float64("nan"),
    np.bool_(True), Thing(), Path("/nonexistent/x"), 1j, range(-2, 2), Decoding(max_new_tokens=0),
    Decoding("beam", beam_width=10**6),
]  # fmt: skip
BAD = st.one_of(
    st.sampled_from(WRONG),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.integers(min_value=-3, max_value=10**6), max_size=3),
)
# Values that are valid but would make a call run for minutes (a decoder slides over its context
# until max_new_tokens): the drive keeps these few parameters small.
SMALL = {"max_new_tokens": 64, "decoding": None}


@contextlib.contextmanager
def inside(folder: Path):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


class Drive(tuple):
    """(work folder, models, a run of each): shown short when hypothesis reports a failure."""

    def __repr__(self) -> str:
        return "<the drive's models>"


@pytest.fixture(scope="module")
def drive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drive")
    models = build(tmp)
    runs = {k: m.run(good_values(k, m, tmp)["text"], quiet=True) for k, m in models.items()}
    return Drive((tmp, models, runs))


def _call(tmp: Path, fn, args, kwargs) -> None:
    """Call; a refusal must be one GlassformerError line and leave every file as it was (a
    success may write: what it wrote is removed for the next example)."""
    before = snapshot(tmp)
    names = set(os.listdir(tmp))
    try:
        with inside(tmp):
            out = fn(*args, **kwargs)
            if inspect.isgenerator(out) or (hasattr(out, "__next__") and hasattr(out, "__iter__")):
                list(out)
    except GlassformerError as e:
        assert "\n" not in str(e), f"a message of several lines: {e}"
        assert snapshot(tmp) == before, f"a refusal changed a file: {e}"
        assert set(os.listdir(tmp)) == names, f"a refusal made a file: {e}"
    else:
        for extra in set(os.listdir(tmp)) - names:
            shutil.rmtree(tmp / extra, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (tmp / extra).unlink()


def _draw_call(data, fn, key: str, goods: dict, unknown: bool = True):
    """(args, kwargs) for `fn`: one or more parameters bad, the rest good or left out."""
    sig = inspect.signature(inspect.unwrap(fn))
    params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
    slots = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    keywords = {}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        keywords = arguments.KEYWORDS[key]()[1]
    names = [p.name for p in slots] + list(keywords)
    if not names:
        return data.draw(st.lists(BAD, min_size=1, max_size=2), label="extra"), {}
    bad = set(data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3), label="bad"))
    args, kwargs = [], {}
    for p in slots:
        if p.name in bad:
            value = data.draw(BAD, label=p.name)
            if p.name in SMALL and isinstance(value, int) and value > (SMALL[p.name] or 0):
                value = 2
        elif p.name in goods and (p.default is p.empty or data.draw(st.booleans(), label="give")):
            value = goods[p.name]
        elif p.default is p.empty:
            value = data.draw(BAD, label=p.name)
        else:
            continue
        if p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    for name in bad & set(keywords):
        kwargs[name] = data.draw(BAD, label=name)
    if unknown and data.draw(st.integers(0, 9), label="unknown keyword") == 0:
        kwargs["no_such_parameter"] = 1
    return args, kwargs


SETTINGS = settings(  # a longer search: GLASSFORMER_DRIVE_EXAMPLES=200
    max_examples=int(os.environ.get("GLASSFORMER_DRIVE_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@pytest.mark.parametrize("kind", ["dec", "s2s", "clf"])
@pytest.mark.parametrize("method", METHODS)
@SETTINGS
@given(data=st.data())
def test_only_a_glassformer_error_leaves_a_model_method(drive, method, kind, data):
    tmp, models, runs = drive
    m = models[kind]
    goods = good_values(kind, m, tmp) | {"run": runs[kind]}
    args, kwargs = _draw_call(data, getattr(m, method), method, goods)
    _call(tmp, getattr(m, method), args, kwargs)


@pytest.mark.parametrize("kind", ["dec", "s2s", "clf"])
@pytest.mark.parametrize("method", RUNTIME_METHODS)
@SETTINGS
@given(data=st.data())
def test_only_a_glassformer_error_leaves_a_runtime_method(drive, method, kind, data):
    tmp, models, runs = drive
    rt = models[kind].runtime
    goods = good_values(kind, models[kind], tmp) | {"run": runs[kind]}
    args, kwargs = _draw_call(data, getattr(rt, method), method, goods)
    _call(tmp, getattr(rt, method), args, kwargs)


def _render(*args, **kwargs):
    from glassformer.explain.text import render

    return render(*args, **kwargs)


def _from_params(cfg, params):
    """from_params's weights (its dtype, dropout and copy are the engine's own business)."""
    pytest.importorskip("torch")
    from glassformer.torch_model import from_params

    return from_params(cfg, params)


def _render_signature(trace, only=None, narrated=False, token_kind=None, **kw):
    """explain.text.render's (imported late: the drive's table is made at collection)."""


# name: (what is called, whose signature is drawn from, the good values)
FUNCTIONS = {
    "__init__": (
        Model,
        Model.__init__,
        lambda ms, rs, tmp: {
            "cfg": ms["clf"].cfg, "params": ms["clf"].params, "tokenizer": ms["clf"].tokenizer,
            "labels": ["a", "b"], "name": "m", "engine": "reference",
        },
    ),
    "Runtime": (
        Runtime,
        Runtime.__init__,
        lambda ms, rs, tmp: {
            "cfg": ms["clf"].cfg, "params": ms["clf"].params, "tok": ms["clf"].tokenizer,
            "labels": ["a", "b"], "name": "m", "engine": "reference",
        },
    ),
    "render": (_render, _render_signature, lambda ms, rs, tmp: {"trace": rs["s2s"].trace}),
    "from_params": (
        _from_params, _from_params,
        lambda ms, rs, tmp: {"cfg": ms["dec"].cfg, "params": ms["dec"].params},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(FUNCTIONS))
@SETTINGS
@given(data=st.data())
def test_only_a_glassformer_error_leaves_a_function(drive, name, data):
    tmp, models, runs = drive
    fn, signature, goods = FUNCTIONS[name]
    goods = goods(models, runs, tmp)
    args, kwargs = _draw_call(data, signature, name, goods, unknown=name != "from_params")
    _call(tmp, fn, args, kwargs)
