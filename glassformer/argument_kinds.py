"""What an argument of the Python API may be: the kinds of the rows of `glassformer.arguments`'
table. An integer in a range, a finite number, True or False itself, one of some names, a text or
a non-empty list of them, token ids of this model's vocabulary, a folder a Model may write, a
`Decoding` in range, weights that fit a config: each kind checks one value (`Arg.check`) against
the call it is part of (`Call`: its other arguments and the Model it is made on) and refuses it in
one `InputError` line that names the parameter as Python spells it (`beam=0: must be at least 1`).

Deliberately not here: which parameter is which kind (the table, `arguments.py`), what a value
means for a model beyond its vocabulary and classes (the methods' own refusals).
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassformer.config import Config
from glassformer.errors import InputError, TokenizerError, param
from glassformer.tokenizer.base import Tokenizer
from glassformer.trace import Trace


@dataclass
class Call:
    """One call being checked: its arguments by name, and the Model it is made on (or None)."""

    arguments: dict
    model: object = None


def shown(value) -> str:
    """A value as a message shows it: short and on one line."""
    if isinstance(value, np.generic):
        return repr(value)  # np.True_ is not True: say which it is
    if isinstance(value, bool | numbers.Number | type(None)):
        return str(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "..."
    text = repr(value)
    if isinstance(value, bytes | os.PathLike) and len(text) <= 60 and "\n" not in text:
        return text
    if isinstance(value, list | tuple) and len(text) <= 40 and "\n" not in text:
        return text
    return f"<{type(value).__name__}>"


@dataclass(frozen=True)
class Arg:
    """A row: what a value must be. `says`: the words after "must be". (The command line's flag
    for the parameter is `cli/flags.py`'s.)"""

    says: str = ""

    def check(self, value, name: str, at: Call) -> None:
        if not self.ok(value, at):
            raise InputError(f"{name}={shown(value)}: must be {self.says}")

    def ok(self, value, at: Call) -> bool:
        raise NotImplementedError


def _bounds(*bounds) -> None:
    if not all(b is None or isinstance(b, int | float) for b in bounds):
        raise TypeError(f"a bound must be a number or None, got {bounds!r}")


def _integral(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


@dataclass(frozen=True)
class Int(Arg):
    """An integer (not a bool) >= low and < below."""

    low: int | None = 0  # None: any integer
    below: int | None = None

    def __post_init__(self):  # a row written with a flag in a bound's place fails at import
        _bounds(self.low, self.below)

    def check(self, value, name: str, at: Call) -> None:
        if not _integral(value):
            within = "" if self.low is None else f" ({self.wording})"
            raise InputError(f"{name}={shown(value)}: must be an integer{within}")
        low, below = self.low, self.below
        if (low is not None and value < low) or (below is not None and value >= below):
            raise InputError(f"{name}={shown(value)}: must be {self.wording}")

    @property
    def wording(self) -> str:
        """The range in the command line's words (`cli/common.integer`'s)."""
        if self.says:
            return self.says
        return f">= {self.low}" if self.below is None else f"in [{self.low}, {self.below})"


@dataclass(frozen=True)
class Real(Arg):
    """A finite number (not a bool) with low < value <= high (either bound optional)."""

    low: float | None = None
    high: float | None = None

    def __post_init__(self):
        _bounds(self.low, self.high)

    def ok(self, value, at: Call) -> bool:
        if not isinstance(value, numbers.Real) or isinstance(value, bool | np.bool_):
            return False
        v = float(value)
        return (
            math.isfinite(v)
            and (self.low is None or v > self.low)
            and (self.high is None or v <= self.high)
        )


@dataclass(frozen=True)
class Bool(Arg):
    """True or False itself: 'no', 0 or an array does not mean no (or yes)."""

    says: str = "True or False"

    def ok(self, value, at: Call) -> bool:
        return value is True or value is False


@dataclass(frozen=True)
class Choice(Arg):
    options: tuple = ()

    def check(self, value, name: str, at: Call) -> None:
        if isinstance(value, str) and value in self.options:
            return
        import difflib

        close = (
            difflib.get_close_matches(value, self.options, n=1) if isinstance(value, str) else []
        )
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise InputError(
            f"{name}={shown(value)}: must be one of {', '.join(map(repr, self.options))}{hint}"
        )


@dataclass(frozen=True)
class Of(Arg):
    """An instance of `kinds`: a tuple of types, or a test of the value (`named`)."""

    kinds: object = ()

    def ok(self, value, at: Call) -> bool:
        return self.kinds(value) if callable(self.kinds) else isinstance(value, self.kinds)


@dataclass(frozen=True)
class Function(Arg):
    says: str = "a function"

    def ok(self, value, at: Call) -> bool:
        return callable(value)


@dataclass(frozen=True)
class Fix(Arg):
    """A refusal's advice: a str, None (none) or ... (the model's own)."""

    says: str = "a str, None or ..."

    def ok(self, value, at: Call) -> bool:
        return value is ... or value is None or isinstance(value, str)


@dataclass(frozen=True)
class Text(Arg):
    """One str (one=True); else a str or a non-empty list (or tuple) of str, one output each;
    list_only: the list form alone, which may be empty (the method says "nothing to ...")."""

    one: bool = False
    list_only: bool = False

    def check(self, value, name: str, at: Call) -> None:
        if isinstance(value, str) and not self.list_only:
            return
        many = "" if self.one else ("a list of str" if self.list_only else "a str or a list of str")
        if self.one or not isinstance(value, list | tuple):
            raise InputError(f"{name}={shown(value)}: must be {many or 'a str'}")
        if not value and not self.list_only:
            raise InputError(f"{name}=[]: give at least one text")
        for k, t in enumerate(value):
            if not isinstance(t, str):
                raise InputError(f"{name}[{k}]={shown(t)}: must be a str")


@dataclass(frozen=True)
class Strs(Arg):
    """A list (or tuple) of str, or one str where `one` says so."""

    one: bool = True
    says: str = "a str or a list of str"

    def ok(self, value, at: Call) -> bool:
        if isinstance(value, str):
            return self.one
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class Places(Strs):
    """Where each text is, in refusals ("FILE, line 3"): one str per text."""

    one: bool = False
    of: str = "text"
    says: str = "a list of str, one per text"

    def check(self, value, name: str, at: Call) -> None:
        super().check(value, name, at)
        texts = at.arguments.get(self.of)
        n = 1 if isinstance(texts, str) else len(texts or ())
        if len(value) != n:
            raise InputError(f"{name}: {len(value)} places for {n} texts; give one per text")


@dataclass(frozen=True)
class Numbers(Arg):
    """Numbers counted from 0: a list of them, one, or one str '0,2' (read by the method)."""

    says: str = "a list of integers, an integer or a str such as '0,2'"

    def ok(self, value, at: Call) -> bool:
        if isinstance(value, str) or _integral(value):
            return True
        return isinstance(value, list | tuple) and all(_integral(v) for v in value)


@dataclass(frozen=True)
class Ids(Arg):
    """Token ids of this model's vocabulary: a list, tuple, range or 1-D integer array; nested:
    a non-empty list of such sequences (several texts); empty: an empty sequence allowed."""

    nested: bool = False
    empty: bool = True
    pieces: bool = False  # ids read back as tokenizer pieces: out of range is a TokenizerError

    def check(self, value, name: str, at: Call) -> None:
        if self.nested:
            if not isinstance(value, list | tuple) or not value:
                raise InputError(f"{name}={shown(value)}: must be a list of token-id lists")
            for k, ids in enumerate(value):
                Ids(empty=False).check(ids, f"{name}[{k}]", at)
            return
        if isinstance(value, range):  # (the whole vocabulary, read without a list of it)
            lo, hi, n = (value[0], value[-1], len(value)) if len(value) else (0, 0, 0)
        else:
            ok = isinstance(value, list | tuple) or getattr(value, "ndim", None) == 1
            if not (ok and isinstance(value, list | tuple | np.ndarray)):
                raise InputError(f"{name}={shown(value)}: must be a list of token ids (integers)")
            if not all(_integral(v) for v in value):
                raise InputError(f"{name}={shown(value)}: must be token ids (integers)")
            n = len(value)
            lo, hi = (min(value), max(value)) if n else (0, 0)
        if not n and not self.empty:
            raise InputError(f"{name}={shown(value)}: give at least one token id")
        size = at.model.cfg.vocab_size
        if n and (lo < 0 or hi >= size):
            bad = lo if lo < 0 else hi
            raise (TokenizerError if self.pieces else InputError)(
                f"{name}: id {bad} is out of range; this model has {size} (ids 0 to {size - 1})"
            )


@dataclass(frozen=True)
class TextsOrIds(Arg):
    """Texts (a str, or a non-empty list of str) or token ids of this model (a non-empty list of
    id lists): what a batch reads."""

    says: str = "a str, a list of str or a list of token-id lists"

    def check(self, value, name: str, at: Call) -> None:
        if isinstance(value, list | tuple) and value and not isinstance(value[0], str):
            if isinstance(value[0], list | tuple | range | np.ndarray):
                return Ids(nested=True).check(value, name, at)
        elif isinstance(value, str | list | tuple):
            return Text().check(value, name, at)
        raise InputError(f"{name}={shown(value)}: must be {self.says}")


@dataclass(frozen=True)
class Probabilities(Arg):
    """One probability per class of this classifier."""

    def check(self, value, name: str, at: Call) -> None:
        n = len(at.model.class_names)
        if not n:
            raise InputError(f"{name}: {at.model.name} is not a classifier (n_classes is 0)")
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.shape != (n,) or not np.isfinite(arr).all():
            raise InputError(f"{name}={shown(value)}: must be {n} finite numbers, one per class")


@dataclass(frozen=True)
class PathArg(Arg):
    says: str = "a path (a str or a pathlib.Path)"

    def ok(self, value, at: Call) -> bool:
        if not isinstance(value, str | os.PathLike):
            return False
        text = os.fspath(value)
        return isinstance(text, str) and text != "" and "\0" not in text


@dataclass(frozen=True)
class Target(PathArg):
    """A folder a Model writes: never the folder it was read from, one inside it or one holding
    it (however spelt), nor a training run (its training_state.pt), overwrite or not."""

    def check(self, value, name: str, at: Call) -> None:
        super().check(value, name, at)
        out, source = Path(value).resolve(), at.model.path
        if source is not None:
            src = Path(source).resolve()
            if out == src or out.is_relative_to(src) or src.is_relative_to(out):
                raise InputError(
                    f"{name}={shown(value)}: this model was read from {source}; writing there "
                    "would replace what it was read from (even with overwrite=True): choose "
                    "another folder"
                )
        if (out / "training_state.pt").exists():
            raise InputError(
                f"{name}={shown(value)}: {out} is a training run (training_state.pt): writing "
                "there would delete its training state and snapshots: choose another folder"
            )


@dataclass(frozen=True)
class Settled(Arg):
    """A `Decoding` whose every field is in the table's range (`settle` checks none)."""

    says: str = "a glassformer.Decoding (Decoding.settle(...) makes one) or None"

    fields: dict = field(default_factory=dict)  # the decoding options' rows, by field name

    def check(self, value, name: str, at: Call) -> None:
        from glassformer.decoding import Decoding

        if not isinstance(value, Decoding):
            raise InputError(f"{name}={shown(value)}: must be {self.says}")
        Choice(options=("greedy", "sample", "beam")).check(value.strategy, f"{name}.strategy", at)
        for f, r in self.fields.items():
            given = getattr(value, f)
            if not (given is None and f in ("max_new_tokens", "top_k", "top_p", "seed")):
                r.check(given, f"{name}.{f}", at)
        if value.implied is not None and not isinstance(value.implied, str):
            raise InputError(f"{name}.implied={shown(value.implied)}: must be a str or None")
        V = getattr(getattr(at.model, "cfg", None), "vocab_size", None)
        if value.strategy == "beam" and V is not None and value.beam_width > V:
            raise InputError(  # the command line's words: it checks this against the model too
                f"{param('beam_width', value.beam_width)} is more than the vocabulary ({V} "
                "tokens); use at most the vocabulary size"
            )


@dataclass(frozen=True)
class Params(Arg):
    """Weights for this config: every tensor it needs, each of its shape, floating point."""

    def check(self, value, name: str, at: Call) -> None:
        from glassformer import inputs

        cfg = at.arguments.get("cfg") or at.model.cfg  # `Model(...)`, or `m.with_params(...)`
        inputs.params(value, cfg)
        for k, v in value.items():
            if not isinstance(k, str):
                raise InputError(f"{name}: tensor names must be str, got {shown(k)}")
            kind = getattr(getattr(v, "dtype", None), "kind", None)
            if kind != "f" and "float" not in str(getattr(v, "dtype", "")):
                raise InputError(f"{name}[{k!r}]: must be an array of floats, got {shown(v)}")


@dataclass(frozen=True)
class Labels(Arg):
    """A classifier's class names: one str per class."""

    def check(self, value, name: str, at: Call) -> None:
        n = at.arguments["cfg"].n_classes if isinstance(at.arguments.get("cfg"), Config) else 0
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise InputError(f"{name}={shown(value)}: must be a list of str, one per class")
        if len(value) != n:
            raise InputError(f"{name}: {len(value)} names for {n} classes; give one per class")


def _mapping_of_functions(value) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and callable(v) for k, v in value.items()
    )


@dataclass(frozen=True)
class Interventions(Arg):
    says: str = "a dict {step name (may hold *): function of its value}"

    def ok(self, value, at: Call) -> bool:
        return _mapping_of_functions(value)


def named(*classes: str):
    """A test of a value: an instance of one of `classes`, given by qualified name
    ("glassformer.model.Model"). The classes above this layer (the Model, a Run, an Engine use the
    table) are named, not imported, so that no import runs back up."""

    def test(value) -> bool:
        return any(f"{c.__module__}.{c.__qualname__}" in classes for c in type(value).__mro__)

    return test


run_type = named("glassformer.inspect.touch.Run")
engine_type = named("glassformer.engine_diff.Engine")


def text_or_run(value) -> bool:
    return isinstance(value, str) or run_type(value)


@dataclass(frozen=True)
class EngineList(Arg):
    says: str = "a list of engine names (or engine_diff.Engine), e.g. ('reference', 'torch')"

    def ok(self, value, at: Call) -> bool:
        return isinstance(value, list | tuple) and all(
            isinstance(e, str) or engine_type(e) for e in value
        )


trace_type = (Trace,)
tokenizer_type = (Tokenizer,)
