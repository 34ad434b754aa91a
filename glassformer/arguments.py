"""The arguments of the Python API, checked where they enter: `ARGS`, one table of every parameter
that a public method of `Model` (`Model.load` = `glassformer.load` included) or of its `Runtime`
takes (its kind and its range), and `checked` / `entry`, which check a call against it before any
work. A bad argument is one `InputError` line naming the parameter as Python spells it (`beam=0:
must be at least 1`), so that only a `GlassformerError` leaves for bad input, and what the command
line refuses the library refuses too: the command line's argparse types are made from the same rows
(`cli/common.option_type`, named by its flags in `cli/flags.py`), with the wording its messages
always had.

A row is found as "method.parameter" first, then "parameter"; a function's **keyword arguments are
those of the function it hands them to (`KEYWORDS`), None allowed where that default is None (the
Model's methods spell theirs out). tests/test_python_arguments.py fails when a public method has a
parameter without a row.

Deliberately not here: the kinds themselves (`argument_kinds.py`), what an argument means for
one model beyond its vocabulary, classes and source folder (a step name, a text the tokenizer
cannot encode: the methods' own refusals), argparse itself (cli/), writing (`weights.save`).
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable

import numpy as np

from glassformer.argument_kinds import (
    Arg,
    Bool,
    Call,
    Choice,
    EngineList,
    Fix,
    Function,
    Ids,
    Int,
    Interventions,
    Labels,
    Numbers,
    Of,
    Params,
    PathArg,
    Places,
    Probabilities,
    Real,
    Settled,
    Strs,
    Target,
    Text,
    TextsOrIds,
    run_type,
    text_or_run,
    tokenizer_type,
    trace_type,
)
from glassformer.config import Config
from glassformer.devices import DEVICE_NAMES, is_device_name
from glassformer.errors import InputError
from glassformer.inference import DTYPES
from glassformer.inspect.attribution import MAX_STEPS
from glassformer.inspect.steering import Steering
from glassformer.weights import STORABLE_DTYPES

ENGINES = ("auto", "reference", "torch")  # a Model's engines (`load`, --engine)
SEED_LIMIT = 2**32


# -- the table: every parameter -----------------------------------------------------------------

# The decoding options (cli/decoding.py): `generate(**options)`, a `Decoding`'s fields.
DECODING = {
    "max_new_tokens": Int("at least 1", 1),
    "temperature": Real("a finite number > 0", 0.0),
    "top_k": Int("", 1),
    "top_p": Real("in (0, 1]", 0.0, 1.0),
    "seed": Int("an integer in [0, 2**32)", 0, SEED_LIMIT),
    "beam_width": Int("", 1),
    "length_penalty": Real("a finite number"),
}

ARGS: dict[str, Arg] = {
    **DECODING,
    "strategy": Choice(options=("greedy", "sample", "beam")),
    "decoding": Settled(fields=DECODING),
    "batch_size": Int("at least 1", 1),
    "top_tokens": Int("an integer >= 0", 0),
    "steps": Strs(),  # record's names; attribute's are a number, below
    "layers": Numbers(),
    "heads": Numbers(),
    "beam": Int("at least 1", 1),
    "n_best": Int("at least 1", 1),
    "limit": Int("at least 1", 1),
    "data": PathArg(),
    "k": Int("", 1),
    "sublayers": Bool(),
    "dla": Text(one=True),
    "versus": Text(one=True),
    "position": Int("", None),
    "method": Choice(options=("integrated_gradients", "gradient_x_input")),
    "attribute.steps": Int(f"in [1, {MAX_STEPS}]", 1, MAX_STEPS + 1),
    "baseline": Of("a token (a str, or an id)", kinds=(str, numbers.Integral)),
    "tol": Real("a number > 0", 0.0),
    "engines": EngineList(),
    "engine": Choice(options=ENGINES),
    "device": Of(DEVICE_NAMES, kinds=is_device_name),  # (`devices.check_device`)
    "threads": Int("at least 1", 1),
    "embed.engine": Choice(options=("torch", "reference")),
    "dtype": Choice(options=DTYPES),
    "save.dtype": Choice(options=STORABLE_DTYPES),
    "overwrite": Bool(),
    "path": Target(),
    # texts: a str or a list of them, one output each
    "text": Text(),
    "sentences": Text(),
    "translations.sentences": Text(list_only=True),
    "places": Places(),
    "alignments.places": Places(of="sentences"),
    "translations.places": Places(of="sentences"),
    "classify.places": Places(),
    "encode.text": Text(one=True),
    "stream.text": Text(one=True),
    "tokens.text": Text(one=True),
    "lens.text": Text(one=True),
    "attribute.text": Text(one=True),
    "diff.text": Text(one=True),
    "run.text": Text(one=True),
    "trace.text": Text(one=True),
    "utf8.text": Text(one=True),
    "ablate.text": Of("a str or a Run (Model.run makes one)", kinds=text_or_run),
    "patch.text": Of("a str or a Run (Model.run makes one)", kinds=text_or_run),
    "clean": Text(one=True),
    "target": Of("a str (the decoder's text)", kinds=(str,)),
    "circuit.target": Text(one=True),  # the token (a class) explained
    "circuit.text": Text(one=True),
    "explain_choice.text": Text(one=True),  # the source or prompt
    "explain_choice.versus": Text(one=True),  # a whole hypothesis, not one token
    "faithfulness.target": Text(one=True),  # the token (a class) explained
    "faithfulness.text": Text(one=True),
    "faithfulness.steps": Int(f"in [1, {MAX_STEPS}]", 1, MAX_STEPS + 1),
    "decoder": Of("a str (the decoder's text)", kinds=(str,)),
    "threshold": Real("a share of |logit| in [0, 1]", None, 1.0),
    "neurons": Int("at least 0", 0),  # circuit: each FFN's units as nodes
    "qk.text": Text(one=True),
    "head": Text(one=True),  # qk: STACK.LAYER.KIND.headH
    "query": Int("", None),  # qk: a position (checked against the head's queries)
    "key": Int("at least 0", 0),  # qk: a key position
    "run.target": Of("a str or a list of token ids", kinds=(str, list, tuple)),
    "trace.target": Of("a str or a list of token ids", kinds=(str, list, tuple)),
    "ablate.target": Of("a str or a list of token ids", kinds=(str, list, tuple)),
    "patch.target": Of("a str or a list of token ids", kinds=(str, list, tuple)),
    "run_with_cache.texts": TextsOrIds(),
    "run_with_cache.targets": TextsOrIds(),
    "run_with_cache.names": Strs(),
    # record_corpus (corpus/record.py)
    "corpus": PathArg(),
    "record_corpus.out": Target(),
    "record_corpus.engine": Choice(options=("torch", "reference")),
    "record_corpus.dtype": Choice(options=("float32", "float64", "int8")),
    "side": Choice(options=("text", "source", "target")),
    "max_tokens": Int("at least 1", 1),
    "shard_rows": Int("at least 1", 1),
    "check_rows": Int("an integer >= 0", 0),
    "compare": Bool(),
    "progress": Function("a function of (done, total), or None"),
    "names": Strs(),
    "run": Of("a Run (Model.run makes one)", kinds=run_type),
    "fns": Interventions(),
    # steering (Model.steer, Model.steered; inspect/steering.py checks what a model decides)
    "pair": Of("'TEXT_A|TEXT_B' or two str", kinds=(str, tuple, list)),
    "layer": Int("at least 0", 0),
    "scale": Real("a finite number"),
    "vector": Of("an array of d_model numbers", kinds=(np.ndarray, list, tuple)),
    "from_step": Int("at least 0", 0),
    "steering": Of("a Steering (Model.steer makes one)", kinds=(Steering,)),
    # what the engines and decoding read: token ids of this model
    "ids": Ids(),
    "decode.ids": Ids(pieces=True),
    "pieces.ids": Ids(pieces=True),
    "readable.ids": Ids(pieces=True),
    "tokens.ids": Ids(pieces=True),
    "run.ids": Ids(empty=False),
    "trace.ids": Ids(empty=False),
    "ablate.ids": Ids(empty=False),
    "patch.ids": Ids(empty=False),
    "class_probabilities.ids": Ids(nested=True),
    "prompt": Ids(empty=False),
    "src": Ids(empty=False),
    "prompt_len": Int("at least 1", 1),
    "room": Int("", 0),
    "window": Bool(),
    "quiet": Bool(),
    "reference": Bool(),
    "narrated": Bool(),
    "step": Function(),
    "fix": Fix(),
    "what": Text(one=True),
    "unknown": Of("a list (the unknown pieces are added to it)", kinds=(list,)),
    "probs": Probabilities(),
    "name": Text(one=True),
    "make": Function(),
    "message": Text(one=True),
    # what a Model is made of (`Model(...)`, `Model.load`, `Model.with_params`, `Runtime(...)`)
    "path_or_preset": PathArg(),
    "on_note": Function("a function of one str, or None"),
    "cfg": Of("a glassformer.Config", kinds=(Config,)),
    "params": Params(),
    "tok": Of("a glassformer tokenizer", kinds=tokenizer_type),
    "tokenizer": Of("a glassformer tokenizer", kinds=tokenizer_type),
    "labels": Labels(),
    "__init__.path": PathArg(),
    "family": Text(one=True),
    # explain.text.render
    "render.trace": Of("a glassformer.trace.Trace", kinds=trace_type),
    "only": Text(one=True),
    "token_kind": Text(one=True),
    "max_rows": Int("", 1),
    "max_cols": Int("", 1),
    # a float64 has 17 significant digits; a precision of 10**8 made each cell a 100 MB string
    "digits": Int("in [1, 17]", 1, 18),
}

# Where a function's **keyword arguments go: (the rows' method, {name: default}) of the function
# it hands them to.
KEYWORDS = {
    "render": lambda: ("render", {"max_rows": 12, "max_cols": 10, "digits": 6}),
}


def row(method: str, name: str) -> Arg | None:
    """The row of `method`'s parameter `name` ("__init__" for a Model's)."""
    return ARGS.get(f"{method}.{name}") or ARGS.get(name)


# -- checking a call ------------------------------------------------------------------------------


def check_call(key: str, where: str, sig: inspect.Signature, args, kwargs) -> None:
    """Every argument of one call against its row; None passes where the default is None."""
    ps = sig.parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in ps):
        for name in kwargs:
            if name not in sig.parameters:
                takes = ", ".join(p.name for p in ps if p.name not in ("self", "cls")) or "none"
                raise InputError(f"{where}() has no parameter {name!r}; it takes {takes}")
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise InputError(f"{where}(): {e}") from None
    given = bound.arguments
    at = Call(given, given.get("self"))
    for name, value in list(given.items()):
        p = sig.parameters[name]
        if name in ("self", "cls") or p.kind is p.VAR_POSITIONAL:
            continue
        if value is None and p.default is None:
            continue
        if p.kind is p.VAR_KEYWORD:
            _check_keywords(key, where, value, at)
        elif (r := row(key, name)) is not None:
            r.check(value, name, at)


def _check_keywords(key: str, where: str, given: dict, at: Call) -> None:
    method, accepted = KEYWORDS[key]() if key in KEYWORDS else (key, {})
    for name, value in given.items():
        if name not in accepted:
            takes = ", ".join(accepted) or "none"
            raise InputError(f"{where}() has no parameter {name!r}; it takes {takes}")
        at.arguments.setdefault(name, value)
        if not (value is None and accepted[name] is None) and (r := row(method, name)):
            r.check(value, name, at)


def _checking(fn: Callable, key: str, where: str) -> Callable:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def checked_call(*args, **kwargs):
        check_call(key, where, sig, args, kwargs)
        return fn(*args, **kwargs)

    return checked_call


def entry(fn: Callable) -> Callable:
    """A public function whose arguments are checked against the table on every call."""
    return _checking(fn, fn.__name__, fn.__name__)


def checked(cls: type) -> type:
    """The class with every public method (and __init__) checking its arguments on entry."""
    for name, member in public_methods(cls).items():
        where = f"{cls.__name__}.{name}" if name != "__init__" else cls.__name__
        if isinstance(member, staticmethod | classmethod):
            setattr(cls, name, type(member)(_checking(member.__func__, name, where)))
        else:
            setattr(cls, name, _checking(member, name, where))
    return cls


def public_methods(cls: type) -> dict[str, Callable]:
    """{name: member} of the methods `checked` wraps (properties take no arguments): what the table
    covers. Those of the package's own base classes count (`Model`'s `LookingInside`), each under
    the name of the class a user holds."""
    found: dict[str, Callable] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's are not ours; a subclass's win
        for n, v in vars(klass).items():
            if (not n.startswith("_") or n == "__init__") and (
                inspect.isfunction(v) or isinstance(v, staticmethod | classmethod)
            ):
                found[n] = v
    return found
