"""Steering: a run pushed along one direction of its residual stream, in both engines.

Activation addition (Turner et al. 2023, "ActAdd"; TransformerLens's steering hooks): a vector v
of d_model numbers is added, times a scale s, to the residual stream entering block `layer` of the
decoder (`interventions.resid_pre`: the embeddings' sum `decoder.input` for layer 0, block L-1's
output `decoder.{L-1}.out` after it; `layer = n_layers` is the stream after the last block, before
a pre-LN model's final norm), at every position or only from a generation step on:

    x_p  <-  x_p + s · v                       for every position p >= start

The direction of a contrast pair "TEXT_A|TEXT_B" is the difference of the two texts' mean streams
at that point (`direction`): v = mean_p x_p(A) - mean_p x_p(B), each the reference engine's
float64 stream of one text, averaged over its positions. A decoder reads each text as a prompt
(its tokens as the tokenizer encodes them); an encoder-decoder reads it as decoder text,
teacher-forced after BOS, with the same text as its source (`pair_inputs`), so that v is the
decoder's stream, the one a translation is steered in.

`Steering` is the intervention: a context manager over `trace.intervene` whose one function adds
s·v at that step name, so every verb run inside it (generate, translate, run, trace, lens, ...)
and both engines are steered alike. With `from_step` T only the positions p >= prompt - 1 + T are
steered: position prompt - 1 + t predicts new token t, so the first T new tokens are chosen from
unsteered logits and every later one from steered ones, in both engines: the reference engine
computes every row at each step, the PyTorch engine's KV cache only the new ones, and it says
where they sit (`trace.positions`: the cache's length; the step functions say where the prompt
ends). A decoder whose text outgrows max_len slides, and positions then count in the window. An
encoder-decoder's prompt is its BOS (prompt 1); a forward pass outside a decoding counts its whole
input as the prompt; a decoder's cached rows whose decoding did not say where its prompt ends (a
batched path) are refused rather than steered from a guess.

`compare` is the per-step report: the same text decoded without and with the steering, and along
the steered output, at each new token, the top tokens of the next-token distribution before
(unsteered, on the same prefix) and after, and the token chosen.

Deliberately not here: the Model's face (`looking.py`), reading a vector's file and flags
(`cli/steering.py`), rendering the report (`explain/html_steering.py`).
"""

from __future__ import annotations

import contextlib
import numbers

import numpy as np

from glassformer import reference as R
from glassformer.decoding import Decoding, softmax
from glassformer.errors import GlassformerError, InputError, param
from glassformer.inspect.interventions import resid_pre
from glassformer.trace import first_position, intervene, intervening, prompt_length, tracing

TOP = 5  # tokens shown per distribution in the report


# -- the pair and the direction -------------------------------------------------------------------


def split_pair(pair) -> tuple[str, str]:
    """ "TEXT_A|TEXT_B" (or a pair of str) -> (TEXT_A, TEXT_B), each side stripped and not empty."""
    if isinstance(pair, str):
        parts = pair.split("|")
        if len(parts) != 2:
            raise InputError(
                f"{param('pair', pair)}: write the contrast pair as 'TEXT_A|TEXT_B', one '|' "
                f"between the two texts (found {len(parts) - 1})"
            )
    elif isinstance(pair, tuple | list) and len(pair) == 2 and all(map(_is_str, pair)):
        parts = list(pair)
    else:
        raise InputError(f"{param('pair')} must be 'TEXT_A|TEXT_B' or two str, got {pair!r}")
    a, b = (p.strip() for p in parts)
    for side, text in (("first", a), ("second", b)):
        if not text:
            raise InputError(
                f"{param('pair', pair)}: the {side} text is empty; give a text on each side of '|'"
            )
    return a, b


def _is_str(x) -> bool:
    return isinstance(x, str)


def check_layer(layer, cfg) -> int:
    """The layer whose entering stream is steered: 0 .. n_layers of the decoder."""
    n = cfg.n_decoder_layers
    ok = isinstance(layer, numbers.Integral) and not isinstance(layer, bool)
    if not ok or not 0 <= layer <= n:
        raise InputError(
            f"{param('layer', layer)}: the decoder has {n} blocks; steer the stream entering "
            f"block 0 .. {n - 1}, or {n} (after the last), counted from 0"
        )
    return int(layer)


def check_vector(vector, d_model: int) -> np.ndarray:
    """A steering vector as float64 (d_model,), finite, or one refusal."""
    try:
        v = np.asarray(vector)
    except Exception:  # noqa: BLE001 - anything that is not an array of numbers
        v = None
    if v is None or v.dtype.kind not in "fiu" or v.dtype == bool:
        kind = type(vector).__name__ if v is None else f"dtype {v.dtype}"
        raise InputError(f"{param('vector')} must be an array of numbers, got {kind}")
    if v.shape != (d_model,):
        raise InputError(
            f"{param('vector')} has shape {v.shape}; this model's stream has d_model "
            f"{d_model}: give a ({d_model},) vector"
        )
    v = v.astype(np.float64)
    if not np.isfinite(v).all():
        raise InputError(f"{param('vector')} holds NaN or infinite numbers; give finite ones")
    return v


def pair_inputs(cfg, ids: list[int], bos: int | None) -> tuple[list[int] | None, list[int]]:
    """(src, decoder ids) one side of a pair is read as (see the module): a decoder's prompt, or
    an encoder-decoder's decoder text after BOS with the same text as its source."""
    if cfg.arch == "encoder-decoder":
        return list(ids), [bos, *ids][: cfg.max_len]
    return None, list(ids)[-cfg.max_len :]


def mean_stream(params: dict, cfg, ids: list[int], layer: int, src=None) -> np.ndarray:
    """The reference engine's residual stream entering decoder block `layer`, averaged over the
    positions of `ids` (C,) float64: one traced forward pass that keeps that step only."""
    name = resid_pre(layer)
    with tracing(keep=lambda n: n == name) as tr:
        R.forward(params, cfg, list(ids), src_ids=None if src is None else list(src))
    return np.asarray(tr[name], dtype=np.float64).mean(axis=0)


def direction(params: dict, cfg, a, b, layer: int) -> np.ndarray:
    """v = mean stream of `a` - mean stream of `b` entering decoder block `layer` (C,): `a` and
    `b` are (src, decoder ids) as `pair_inputs` gives them (src None for a decoder)."""
    check_layer(layer, cfg)
    (src_a, ids_a), (src_b, ids_b) = a, b
    return mean_stream(params, cfg, ids_a, layer, src_a) - mean_stream(
        params, cfg, ids_b, layer, src_b
    )


# -- the intervention ------------------------------------------------------------------------------


def _steered_rows(x, from_step: int, enc_dec: bool):
    """Which rows of x (the second-from-last axis) get the vector: positions p >= prompt - 1 +
    from_step, p counted from where the engine says the rows start (`trace.positions`)."""
    start, rows = first_position(), x.shape[-2]
    prompt = prompt_length()
    if prompt is None and not enc_dec and start:  # cached rows, and no decoding said where
        raise GlassformerError(  # its prompt ends: from_step would count from a guess
            f"{param('from_step')} needs to know where the prompt ends, and this decoding "
            "does not say (a batched path): steer without it, or decode one text at a time"
        )
    if prompt is None:  # no decoding said: BOS, or the whole input of a forward pass
        prompt = 1 if enc_dec else start + rows
    first = prompt - 1 + from_step
    return np.arange(start, start + rows) >= first


def add(vector: np.ndarray, scale: float, from_step: int | None = None, enc_dec=False):
    """x -> x + scale·vector at the steered rows (every row when from_step is None), for either
    engine's tapped value (an array (T, C) or a tensor (B, T, C)). scale·vector is formed once in
    float64, so both engines add the same numbers."""
    delta = float(scale) * np.asarray(vector, dtype=np.float64)  # (C,)

    def fn(x):
        if from_step is None:
            sel = None
        else:
            sel = _steered_rows(x, from_step, enc_dec)
            if not sel.any():
                return x
        if type(x).__module__.startswith("torch"):
            import torch

            d = torch.as_tensor(delta, dtype=x.dtype, device=x.device)  # (C,)
            if sel is not None:
                d = torch.as_tensor(sel[:, None], device=x.device) * d  # (T, C)
            return x + d
        return x + (delta if sel is None else np.where(sel[:, None], delta, 0.0))

    return fn


class Steering:
    """A steering intervention: `with steering:` adds scale·vector to the decoder's stream
    entering block `layer` (from generation step `from_step` on, or everywhere) in whatever runs
    inside, in both engines. `name` is the step steered; `pair` the contrast pair the vector came
    from (None for a given vector)."""

    def __init__(self, vector, layer: int, scale: float, from_step=None, pair=None, arch=""):
        self.vector, self.layer, self.scale = np.asarray(vector, np.float64), layer, float(scale)
        self.from_step, self.pair, self.arch = from_step, pair, arch
        self.name = resid_pre(layer)
        self._stack: list[contextlib.ExitStack] = []

    def fns(self) -> dict:
        """The intervention as `trace.intervene` takes it: {step name: function}."""
        enc_dec = self.arch == "encoder-decoder"
        return {self.name: add(self.vector, self.scale, self.from_step, enc_dec)}

    def __enter__(self) -> Steering:
        stack = contextlib.ExitStack()
        stack.enter_context(intervene(self.fns()))
        self._stack.append(stack)
        return self

    def __exit__(self, *exc) -> None:
        self._stack.pop().close()

    def to_dict(self) -> dict:
        return {
            "pair": list(self.pair) if self.pair else None,
            "layer": self.layer,
            "step": self.name,
            "scale": self.scale,
            "from_step": self.from_step,
            "norm": float(np.linalg.norm(self.vector)),
        }

    def __repr__(self) -> str:
        what = f"{self.pair[0]!r} - {self.pair[1]!r}" if self.pair else "a given vector"
        since = f", from new token {self.from_step}" if self.from_step is not None else ""
        return (
            f"<glassformer.Steering: {self.scale:g} x ({what}, |v| "
            f"{np.linalg.norm(self.vector):.4g}) added to {self.name}{since}>"
        )


# -- the report ------------------------------------------------------------------------------------


def _top(m, probs: np.ndarray, k: int = TOP) -> list[dict]:
    order = np.argsort(-probs, kind="stable")[:k]
    pieces = m.readable([int(i) for i in order])
    return [
        {"id": int(i), "token": t, "p": float(probs[i])} for i, t in zip(order, pieces, strict=True)
    ]


def _text(m, ids: list[int], prompt: list[int], enc_dec: bool) -> str:
    return m.decode(ids[len(prompt) :] if enc_dec else ids)


def compare(m, text: str, steering: Steering, decoding: Decoding | None = None) -> dict:
    """The report of `Model.steered` (m: the model's Runtime): the text decoded without and with
    the steering (the same decoding, the same seed), and per new token of the steered output its
    token, and the top tokens of the next-token distribution (softmax of the logits) before
    (without the steering, on the same prefix) and after. Called outside the steering."""
    if intervening():  # "before" would be steered too, and the report would compare nothing
        raise GlassformerError(
            "Model.steered decodes without and with the steering it is given, so it is called "
            "outside any steering or intervention: move it out of the `with` block"
        )
    decoding = decoding or Decoding()
    enc_dec = m.cfg.arch == "encoder-decoder"
    window = not enc_dec
    ids = m.encode(text, window=window)
    src, prompt = (ids, m.bos()) if enc_dec else (None, ids)
    how = dict(window=window, quiet=True)
    plain = m.decoded(prompt, src, decoding, **how).ids
    with steering:
        steered = m.decoded(prompt, src, decoding, **how).ids
    before = m.step(src, prompt_len=len(prompt), window=window)
    after = m.step(src, prompt_len=len(prompt), window=window)
    steps = []
    for t in range(len(steered) - len(prompt)):
        prefix = steered[: len(prompt) + t]
        p_before = softmax(before(prefix))
        with steering:
            p_after = softmax(after(prefix))
        token = steered[len(prompt) + t]
        steps.append(
            {
                "step": t,
                "id": token,
                "token": m.readable([token])[0],
                "steered": steering.from_step is None or t >= steering.from_step,
                "p_before": float(p_before[token]),
                "p_after": float(p_after[token]),
                "before": _top(m, p_before),
                "after": _top(m, p_after),
            }
        )
    return {
        "input": text,
        "steering": steering.to_dict(),
        "strategy": decoding.strategy,
        "text": _text(m, plain, prompt, enc_dec),
        "steered": _text(m, steered, prompt, enc_dec),
        "steps": steps,
    }
