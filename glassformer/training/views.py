"""A training time-lapse: what a model does with one fixed probe text, recorded while it trains.

`train --snapshot-views TEXT --view-every N` makes a `Recorder`: every N optimizer steps (and at
step 0) it runs the probe text through the float64 reference engine and keeps one frame:

- the step and the training log's numbers at that step (loss, lr, the evaluation's if one ran);
- every attention map A = softmax(Ω/√c + mask) of every head, as float16;
- probe metrics: `probe_loss` (a decoder's next-token cross-entropy over the probe text), and
  `repeat_loss` / `first_loss`, the same over the positions whose next token an earlier
  occurrence of the same two tokens gives away (what an induction head can copy) and over the
  others; per head of every self-attention, the `prefix` score (Olsson et al. 2022, "In-context
  Learning and Induction Heads": the attention a query puts on the tokens that followed earlier
  occurrences of its own token, averaged over the queries that have one) and the `previous`
  score (the attention on the token just before).

An encoder-decoder's frame holds the greedy translation the model made of the probe at that
step, so its target tokens change from frame to frame.

The frames are bounded: at most MAX_FRAMES and MAX_BYTES of maps (when either is passed, every
other frame is dropped and the interval doubles), and a probe text whose one frame would take
more than an eighth of MAX_BYTES is refused before training starts. They are saved as
`views.safetensors` inside every checkpoint (atomically with it), so that the views on disk
always end at the checkpoint's step and `--resume` continues them.

Deliberately not here: the training loop (`train.py` calls `record`), drawing (`explain/` and
the explorer read `load` / `to_json`).
"""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassformer import files
from glassformer.decoding import Decoding
from glassformer.errors import CheckpointError, ConfigError, GlassformerError, param

VIEWS_FILE = "views.safetensors"
MAX_FRAMES = 128
MAX_BYTES = 32 * 2**20  # of float16 attention maps, all frames together
VERSION = 1
_HEAD_A = re.compile(r"^((?:encoder|decoder)\.\d+\.(?:self_attn|cross_attn))\.head(\d+)\.A$")


@dataclass
class Frame:
    """One recorded moment of training: the step, its numbers, the tokens the probe read per
    stack ({stack: [piece, ...]}), the metrics and the attention maps {"decoder.0.self_attn":
    (H, Tq, Tk) float16}."""

    step: int
    row: dict
    tokens: dict
    metrics: dict
    maps: dict = field(repr=False)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.maps.values())


@dataclass
class Views:
    """The time-lapse of one run: the probe text, the interval between frames, the frames."""

    text: str
    every: int
    frames: list[Frame]


# -- the metrics ---------------------------------------------------------------------------------


def prefix_targets(ids: list[int]) -> list[list[int]]:
    """For each query position i, the key positions j <= i whose previous token ids[j-1] is an
    earlier occurrence of ids[i] (i.e. j-1 < i): where an induction head looks."""
    return [[j for j in range(1, i + 1) if ids[j - 1] == ids[i]] for i in range(len(ids))]


def prefix_score(A: np.ndarray, ids: list[int]) -> float | None:
    """Prefix-matching score of one head's attention A (T, T) over the tokens `ids`: the
    attention on `prefix_targets`, summed per query, averaged over the queries that have a
    target; None when no token of the text repeats."""
    per_query = [float(A[i, js].sum()) for i, js in enumerate(prefix_targets(ids)) if js]
    return float(np.mean(per_query)) if per_query else None


def previous_score(A: np.ndarray) -> float | None:
    """Previous-token score of one head's attention A (T, T): the mean over queries i >= 1 of
    A[i, i-1]; None for a one-token text."""
    T = A.shape[0]
    return float(np.mean([A[i, i - 1] for i in range(1, T)])) if T > 1 else None


def position_losses(logits: np.ndarray, ids: list[int]) -> np.ndarray:
    """Cross-entropy of each next token: -log softmax(logits[i])[ids[i+1]], (T-1,)."""
    z = logits[:-1] - logits[:-1].max(axis=-1, keepdims=True)  # (T-1, V)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -log_p[np.arange(len(ids) - 1), ids[1:]]


def repeated(ids: list[int]) -> np.ndarray:
    """For each position i < T-1: True when the pair (ids[i], ids[i+1]) occurred earlier in the
    text, so that copying what followed ids[i] last time predicts ids[i+1]."""
    seen, out = set(), []
    for i in range(len(ids) - 1):
        pair = (ids[i], ids[i + 1])
        out.append(pair in seen)
        seen.add(pair)
    return np.array(out, dtype=bool)


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def frame_metrics(maps: dict, stacks: dict, logits: np.ndarray | None, decoder_only: bool) -> dict:
    """The probe metrics of one frame (see the module docstring)."""
    out: dict = {"prefix": {}, "previous": {}}
    for name, A in maps.items():  # A: (H, Tq, Tk)
        if ".self_attn" not in name:
            continue
        ids = stacks[name.split(".")[0]]
        out["prefix"][name] = [prefix_score(a, ids) for a in A]
        out["previous"][name] = [previous_score(a) for a in A]
    if decoder_only and logits is not None and len(stacks["decoder"]) > 1:
        ids = stacks["decoder"]
        losses, again = position_losses(logits, ids), repeated(ids)
        out["probe_loss"] = float(losses.mean())
        out["repeat_loss"] = _mean(losses[again])
        out["first_loss"] = _mean(losses[~again])
        out["position_loss"] = [float(x) for x in losses]
    scores = [s for per in out["prefix"].values() for s in per if s is not None]
    out["best_prefix"] = max(scores) if scores else None
    return out


# -- recording -----------------------------------------------------------------------------------


class Recorder:
    """Records the frames of one run (see the module docstring): `due(step)`, `record(...)`,
    `file_bytes()` for the checkpoint. `views` are the frames of the run being resumed."""

    def __init__(self, cfg, tok, text: str, every: int, labels=None, views: Views | None = None):
        if not text.strip():
            raise ConfigError("snapshot_views is empty: give the probe text to record views of")
        if every < 1:
            raise ConfigError(f"view_every must be >= 1 to record views, got {every}")
        self.cfg, self.tok, self.labels, self.text = cfg, tok, labels, text
        self.every = views.every if views else every
        self.frames: list[Frame] = list(views.frames) if views else []

    def due(self, step: int) -> bool:
        return step % self.every == 0 and not (self.frames and self.frames[-1].step >= step)

    def record(self, step: int, params: dict, row: dict) -> Frame:
        """Run the probe through `params` (float64, the reference engine) and keep its frame."""
        frame = probe_frame(self.cfg, params, self.tok, self.text, self.labels, step, row)
        if frame.nbytes > MAX_BYTES // 8:
            raise ConfigError(
                f"the probe text's attention maps take {_size(frame.nbytes)} a frame, more than "
                f"{_size(MAX_BYTES // 8)} (an eighth of the views' bound): give a shorter "
                f"{param('snapshot_views')} text"
            )
        self.frames.append(frame)
        while len(self.frames) > MAX_FRAMES or sum(f.nbytes for f in self.frames) > MAX_BYTES:
            self.every *= 2
            self.frames = [f for f in self.frames if f.step % self.every == 0]
        return frame

    def file_bytes(self) -> bytes:
        return encode(Views(self.text, self.every, self.frames))


def unknown_note(tok, text: str) -> str | None:
    """What a probe text loses to the tokenizer, in words: the pieces it does not know (each
    once, in order), which every frame reads as its unknown token; None when it knows them all."""
    unknown = list(dict.fromkeys(tok.encode_for_model(text)[1]))
    if not unknown:
        return None
    shown = ", ".join(map(repr, unknown[:8])) + (
        f" and {len(unknown) - 8} more" * (len(unknown) > 8)
    )
    unk = tok.specials.get("unk", "<unk>")
    return (
        f"{shown} {'is' if len(unknown) == 1 else 'are'} not in the {tok.kind} tokenizer's "
        f"vocabulary, so every frame reads {'it' if len(unknown) == 1 else 'them'} as {unk}; a "
        "probe in the words of the training data shows what the model learns of them"
    )


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def probe_frame(cfg, params: dict, tok, text: str, labels, step: int, row: dict) -> Frame:
    """One frame: the probe text through the reference engine with these weights."""
    from glassformer.model import Model

    m = Model(cfg, params, tok, labels=labels, engine="reference")
    decoding = None
    if cfg.arch == "encoder-decoder":  # a translation of bounded length, however untrained
        decoding = Decoding(max_new_tokens=min(cfg.max_len, 2 * len(m.encode(text)) + 8))
    run = m.run(text, decoding=decoding, quiet=True)
    stacks = {stack: list(ids) for stack, (_, ids) in run.stacks.items()}
    heads: dict[str, dict[int, np.ndarray]] = {}
    for name in run.trace.names():
        hit = _HEAD_A.match(name)
        if hit:
            heads.setdefault(hit.group(1), {})[int(hit.group(2))] = run.trace[name]
    maps = {k: np.stack([v[h] for h in sorted(v)]) for k, v in heads.items()}  # float64
    metrics = frame_metrics(maps, stacks, run.logits, cfg.arch == "decoder")
    maps = {k: a.astype(np.float16) for k, a in maps.items()}  # kept at 2 bytes a value
    numbers = {k: float(v) for k, v in row.items() if _plain_number(v)}
    tokens = {stack: m.runtime.readable(ids) for stack, ids in stacks.items()}
    return Frame(step, numbers, tokens, metrics, maps)


def _plain_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# -- the file ------------------------------------------------------------------------------------


def encode(views: Views) -> bytes:
    """views.safetensors: the maps as tensors `f{k}.{map name}`, the rest as JSON metadata."""
    from safetensors.numpy import save

    tensors = {f"f{k}.{name}": a for k, f in enumerate(views.frames) for name, a in f.maps.items()}
    meta = {
        "version": VERSION,
        "text": views.text,
        "every": views.every,
        "frames": [
            dict(step=f.step, row=f.row, tokens=f.tokens, metrics=f.metrics, maps=list(f.maps))
            for f in views.frames
        ],
    }
    return save(tensors, metadata={"glassformer.views": json.dumps(meta)})


def load(folder: str | Path) -> Views | None:
    """The views recorded in a training checkpoint `folder`, or None when it has none."""
    path = files.member(folder, VIEWS_FILE, required=False)
    if path is None:
        return None
    try:
        return decode(path.read_bytes())
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path} is not a glassformer views file ({e}); delete it") from None


def decode(data: bytes) -> Views:
    """The inverse of `encode`; ValueError, KeyError or TypeError on anything else."""
    from safetensors import SafetensorError
    from safetensors.numpy import load as load_tensors

    try:
        tensors = load_tensors(data)
    except SafetensorError as e:
        raise ValueError(str(e)) from None
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_len])
    meta = json.loads(header["__metadata__"]["glassformer.views"])
    if meta.get("version") != VERSION:
        raise ValueError(f"version {meta.get('version')!r}, this glassformer reads {VERSION}")
    frames = []
    for k, f in enumerate(meta["frames"]):
        maps = {name: tensors[f"f{k}.{name}"] for name in f["maps"]}
        frames.append(Frame(int(f["step"]), f["row"], f["tokens"], f["metrics"], maps))
    return Views(str(meta["text"]), int(meta["every"]), frames)


def resumed(folder: str | Path, text: str) -> Views | None:
    """The views of the checkpoint being resumed (they end at its step: they are saved with
    it); refused when they were recorded for another probe text."""
    views = load(folder)
    if views is not None and views.text != text:
        raise GlassformerError(
            f"{Path(folder) / VIEWS_FILE} holds views of {views.text!r}, not of {text!r}: "
            f"resume with the same {param('snapshot_views')} text (or start a new {param('out')})"
        )
    return views


def to_json(views: Views) -> dict:
    """The views for a page: each map as base64 of its float16 bytes (little-endian) with its
    shape, so that a page holds the exact recorded values at 2 bytes each."""
    frames = []
    for f in views.frames:
        maps = {
            name: {
                "shape": list(a.shape),
                "f16": base64.b64encode(a.astype("<f2").tobytes()).decode("ascii"),
            }
            for name, a in f.maps.items()
        }
        frames.append(dict(step=f.step, row=f.row, tokens=f.tokens, metrics=f.metrics, maps=maps))
    return {"text": views.text, "every": views.every, "frames": frames}
