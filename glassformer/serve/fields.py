"""The explorer's request fields checked: which fields each action takes, their types and
ranges, and the `RequestError` (an HTTP status and a message naming the field) that refuses one.

Each check reads one field of a request body (a dict parsed from JSON) and returns its value,
or raises before any model is loaded or run; generate's decoding options and intervene's heads
are checked here as a whole, in the words the command line uses for the same options.

Deliberately not here: the actions themselves and the answers' JSON (`api.py`), HTTP
(`app.py`), a field's range that needs the run (the actions check it once they have it).
"""

from __future__ import annotations

import json
import math

MAX_TEXT = 200_000  # characters of typed text (the request body is bounded before this)
MAX_BEAM = 64  # hypotheses of a beam (each a forward pass per step)


class RequestError(Exception):
    """A request the explorer cannot answer: the HTTP status and a message for the page."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# The fields each action takes; any other is refused (a misspelt field is never ignored).
INPUT = ("model", "text", "ids", "target")  # what picks the run
DECODING = ("strategy", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "beam_width",
            "length_penalty")  # fmt: skip
STEERING = ("steer", "steer_layer", "steer_scale")  # generate's steering (`steering`)
FIELDS = {
    "load": ("model",),
    "run": INPUT, "cross": INPUT, "fidelity": INPUT, "report": INPUT, "trace": INPUT,
    "model_view": INPUT,
    "step": (*INPUT, "name"), "attention": (*INPUT, "name"), "heads": (*INPUT, "site", "layer"),
    "neuron": (*INPUT, "name", "i", "j"), "tile": (*INPUT, "name", "r0", "r1", "c0", "c1"),
    "intervene": (*INPUT, "heads", "how", "patch_text", "position"),
    "generate": ("model", "text", *DECODING, *STEERING),
    "choice": ("model", "src", "n_prompt", "kept", "dropped", "length_penalty"),
    "overview": ("model",), "views": ("model",),
    "store": ("model",), "top": ("model", "unit", "k", "sae"),
}  # fmt: skip
HEAD_FIELDS = ("stack", "kind", "layer", "head")


def check_fields(action: str, body: dict, fields: tuple[str, ...] | None = None) -> None:
    """Refuse a field the action does not take (before any work)."""
    fields = FIELDS[action] if fields is None else fields
    for k in body:
        if k not in fields:
            raise RequestError(
                400, f"{action} takes no field {shown(k)}; its fields are {', '.join(fields)}"
            )


def shown(v) -> str:
    """A value of a request as a message shows it: short, and never the whole of a big one."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, list | dict):
        return "a list" if isinstance(v, list) else "an object"
    r = repr(v) if isinstance(v, str | float) else str(v) if len(str(v)) < 60 else "a huge integer"
    return r if len(r) <= 60 else r[:57] + "..."


def get(body: dict, name: str, default=..., nullable: bool = False):
    if name not in body or (body[name] is None and (nullable or default is not ...)):
        if default is ...:
            raise RequestError(400, f"the request needs the field {name!r}")
        return default
    return body[name]


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def integer(body: dict, name: str, lo: int, hi: int | None = None, default=..., says="") -> int:
    """An int in [lo, hi] (hi None: no bound; bool is not an int here). `says` words the range
    as the command line does for the same option."""
    v = get(body, name, default)
    if v is default and default is not ...:
        return v
    if not _is_int(v) or v < lo or (hi is not None and v > hi):
        says = says or (f">= {lo}" if hi is None else f"an integer in [{lo}, {hi}]")
        raise RequestError(400, f"{name!r} must be {says}, got {shown(v)}")
    return v


def real(body: dict, name: str, lo=None, hi=None, default=..., open_lo=False, says="") -> float:
    """A finite number in [lo, hi] ((lo, hi] with open_lo; a None bound: none). `says` words
    the range as the command line does for the same option."""
    v = get(body, name, default)
    if v is default and default is not ...:
        return v
    number = isinstance(v, int | float) and not isinstance(v, bool)
    ok = number and math.isfinite(v)
    ok = ok and (lo is None or (lo < v if open_lo else lo <= v)) and (hi is None or v <= hi)
    if not ok:
        bound = f"({lo}, {hi}]" if open_lo else f"[{lo}, {hi}]"
        says = says or f"a number in {bound}"
        raise RequestError(400, f"{name!r} must be {says}, got {shown(float(v) if number else v)}")
    return float(v)


def text(body: dict, name: str, default=...) -> str:
    v = get(body, name, default)
    if not isinstance(v, str):
        raise RequestError(400, f"{name!r} must be a string, got {shown(v)}")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON allows it, no tokenizer reads it
        raise RequestError(400, f"{name!r} is not valid Unicode (a lone surrogate)") from None
    if len(v) > MAX_TEXT:
        raise RequestError(
            413,
            f"{name!r} has {len(v):,} characters; the explorer takes at most "
            f"{MAX_TEXT:,} (a model's context is far shorter)",
        )
    return v


def choice(body: dict, name: str, options: tuple[str, ...], default=...) -> str:
    v = get(body, name, default)
    if not isinstance(v, str) or v not in options:
        raise RequestError(400, f"{name!r} must be one of {', '.join(options)}, got {shown(v)}")
    return v


def id_list(body: dict, name: str, vocab: int, max_len: int) -> list[int] | None:
    v = body.get(name)
    if v is None:
        return None
    if not isinstance(v, list) or not 1 <= len(v) <= max_len:
        raise RequestError(400, f"{name!r} must be a list of 1 to {max_len} token ids")
    for i in v:
        if not _is_int(i) or not 0 <= i < vocab:
            raise RequestError(400, f"{name!r}: {shown(i)} is not a token id in [0, {vocab})")
    return v


def decoding(body: dict, vocab: int | None) -> dict:
    """generate's options, refused as the command line refuses the same values (its messages,
    with the field's name); vocab None: the checks that need no model. Every strategy's options
    may come in every request (the page sends them all); each strategy reads its own."""
    out = {
        "strategy": choice(body, "strategy", ("greedy", "sample", "beam"), "greedy"),
        "max_new_tokens": integer(body, "max_new_tokens", 1, None, None, says="at least 1"),
        "temperature": real(
            body, "temperature", 0.0, None, 1.0, open_lo=True, says="a finite number > 0"
        ),
        "top_k": integer(body, "top_k", 1, None, None),
        "top_p": real(body, "top_p", 0.0, 1.0, None, open_lo=True, says="in (0, 1]"),
        "seed": integer(body, "seed", 0, 2**32 - 1, None, says="an integer in [0, 2**32)"),
        "beam_width": integer(body, "beam_width", 1, None, 4),
        "length_penalty": real(body, "length_penalty", None, None, 1.0, says="a finite number"),
    }
    if out["beam_width"] > MAX_BEAM:
        raise RequestError(
            400,
            f"'beam_width' {out['beam_width']} is more than the explorer's "
            f"{MAX_BEAM} (the command line takes wider beams)",
        )
    if vocab is not None:
        if out["strategy"] == "beam" and out["beam_width"] > vocab:
            raise RequestError(
                400,
                f"'beam_width' {out['beam_width']} is more than the vocabulary ({vocab} "
                "tokens); use at most the vocabulary size",
            )
        if out["top_k"] is not None:
            out["top_k"] = min(out["top_k"], vocab)  # all of them: the same distribution
    return out


def heads(body: dict) -> tuple[str, list[dict]]:
    """intervene's how and heads, checked (their ranges in the model: `runs.intervene`)."""
    how = choice(body, "how", ("zero", "mean", "patch"), "zero")
    heads = get(body, "heads")
    if not isinstance(heads, list) or not 1 <= len(heads) <= 4096:
        raise RequestError(400, "'heads' must be a list of heads ({stack, kind, layer, head})")
    checked = []
    for h in heads:
        if not isinstance(h, dict):
            raise RequestError(400, "each of 'heads' must be {stack, kind, layer, head}")
        check_fields("each of 'heads'", h, HEAD_FIELDS)
        checked.append(
            {
                "stack": choice(h, "stack", ("encoder", "decoder")),
                "kind": choice(h, "kind", ("self_attn", "cross_attn")),
                "layer": integer(h, "layer", 0, 10_000),
                "head": integer(h, "head", 0, 10_000),
            }
        )
    if how == "patch":
        text(body, "patch_text")
    elif body.get("patch_text") is not None:
        raise RequestError(400, f"'patch_text' is for how 'patch' (how is {how!r}): drop it")
    return how, checked


def steering(body: dict) -> dict | None:
    """generate's steering: the contrast pair "TEXT_A|TEXT_B" (`steer`), the block whose
    entering stream moves (`steer_layer`) and the scale (`steer_scale`); None without a pair
    (the model checks the pair and the layer: `Model.steer`)."""
    pair = get(body, "steer", None, nullable=True)
    if pair is None or (isinstance(pair, str) and not pair.strip()):
        return None
    if not isinstance(pair, str):
        raise RequestError(400, f"'steer' must be a str 'TEXT_A|TEXT_B', got {shown(pair)}")
    layer = integer(body, "steer_layer", 0, None, 0, says="at least 0")
    scale = real(body, "steer_scale", None, None, 1.0, says="a finite number")
    return {"pair": pair, "layer": layer, "scale": scale}
