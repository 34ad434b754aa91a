"""The explorer's models and runs: a registry of what may be opened, and a bounded cache of runs.

`Registry(paths)` lists the walkthroughs and the model folders the command line named, each
under an id the server made (`char-lm`, `en-es`, ...). The browser only ever sends such an id:
no path from a request reaches the file system. A model is loaded on first use (glassformer
checkpoint or Hugging Face folder, as a `glassformer.model.Model`); a folder that cannot be
loaded keeps its error, which the page shows; a folder that holds a training time-lapse
(views.safetensors, `train --snapshot-views`) says so in its listing ("views": true), for the
page's Training tab. `RunCache` keeps recent runs (their traces) under a bound on the bytes of
their recorded values, least recently used out first, and computes a run once however many
requests ask for it at the same time.

Deliberately not here: running the engines (`runs.py`), HTTP (`app.py`), printing.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from glassformer.errors import CheckpointError, GlassformerError
from glassformer.model import Model
from glassformer.trace import Trace
from glassformer.training import views
from glassformer.training.views import VIEWS_FILE


class NotFound(GlassformerError):
    """A model id, step or map that this server does not have."""


class Unavailable(GlassformerError):
    """A model the command line named that cannot be loaded; the message says why."""


@dataclass
class Fixed:
    """A walkthrough: one recorded trace with fixed inputs (nothing to type)."""

    trace: Trace
    title: str
    text: str


@dataclass
class Entry:
    """One line of the model list."""

    id: str
    name: str
    kind: str  # "walkthrough" or "model"
    description: str
    load: Callable[[], Model | Fixed]
    loaded: Model | Fixed | None = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    folder: Path | None = None  # a model folder given to `serve` (None: a walkthrough)
    _probe: dict | None = None  # the time-lapse's probe text and best head, read once (`probe`)

    def has_views(self) -> bool:
        """Whether the folder holds a training time-lapse (`train --snapshot-views`)."""
        return self.folder is not None and os.path.lexists(self.folder / VIEWS_FILE)

    def probe(self) -> dict | None:
        """What the page opens on for a folder with a time-lapse: {"text": its probe text,
        "head": {"site", "layer", "head"} of the highest prefix-matching score in the last
        frame, or None}; None without a time-lapse."""
        if self._probe is None and self.has_views():
            try:
                recorded = views.load(self.folder)
            except CheckpointError:  # the Training tab says why; the page opens as usual
                recorded = None
            self._probe = {} if recorded is None else {"text": recorded.text, "head": None}
            if recorded is not None and recorded.frames:
                self._probe["head"] = _best_head(recorded.frames[-1].metrics)
        return self._probe or None

    def listing(self) -> dict:
        item = {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "status": "error" if self.error else "ready" if self.loaded else "not loaded yet",
        }
        if self.error:
            item["error"] = self.error
        if isinstance(self.loaded, Model):
            item |= describe(self.loaded) | {"views": self.has_views()}
            if item["views"] and (probe := self.probe()) is not None:
                item["probe"], item["probe_head"] = probe["text"], probe["head"]
        elif isinstance(self.loaded, Fixed):
            item |= {"arch": "walkthrough", "text": self.loaded.text, "typing": False}
        return item


def _best_head(metrics: dict) -> dict | None:
    """{"site": "decoder.self_attn", "layer": 1, "head": 1}: the head with the highest
    prefix-matching score in a frame's metrics (`views.frame_metrics`), or None."""
    scored = [
        (score, name, h)
        for name, per in metrics.get("prefix", {}).items()
        for h, score in enumerate(per)
        if score is not None
    ]
    if not scored:
        return None
    _, name, h = max(scored, key=lambda x: x[0])  # the first of equal scores
    stack, layer, kind = name.split(".")  # "decoder.1.self_attn"
    return {"site": f"{stack}.{kind}", "layer": int(layer), "head": h}


def describe(m: Model) -> dict:
    cfg = m.cfg
    return {
        "arch": cfg.arch,
        "typing": True,
        "max_len": cfg.max_len,
        "vocab_size": cfg.vocab_size,
        "generates": cfg.has_decoder,
        "summary": f"{m.summary()}, context {cfg.max_len}",
        "source": f"Hugging Face {m.family}" if m.family else "glassformer checkpoint",
    }


def _walkthroughs() -> list[Entry]:
    from glassformer import walkthrough

    def fixed(name: str, title: str, text: str):
        return lambda: Fixed(walkthrough.WALKTHROUGHS[name](), title, text)

    def hello_model() -> Model:
        from glassformer import weights
        from glassformer.config import preset
        from glassformer.tokenizer import article_tokenizer

        cfg = preset("hello-world")
        params = weights.init(cfg, seed=0, std=0.3)
        return _explored(Model(cfg, params, article_tokenizer(), name="hello-world-model"))

    return [
        Entry(
            "hello-world",
            "The Random Transformer (walkthrough)",
            "walkthrough",
            "Sanseviero's “Hello World” → “Hola Mundo”, every step, the article's numbers",
            fixed("hello-world", "The Random Transformer", "Hello World"),
        ),
        Entry(
            "self-attention",
            "Self-attention, Raschka ch. 3 (walkthrough)",
            "walkthrough",
            "“Your journey starts with one step”: trainable self-attention, the book's numbers",
            fixed("self-attention", "Self-attention", "Your journey starts with one step"),
        ),
        Entry(
            "modern",
            "From 2017 to today (walkthrough)",
            "walkthrough",
            "The same matrices before and after: rotary positions, RMSNorm, SwiGLU, "
            "grouped-query attention and the KV cache it saves",
            fixed("modern", "From 2017 to today", "Hello World"),
        ),
        Entry(
            "hello-world-model",
            "hello-world model (the walkthrough's, seeded random weights)",
            "model",
            "The article's sizes (d_model 4, 2 heads, 6+6 blocks), its 10-word vocabulary: "
            "type words from it (hello, world, ...)",
            hello_model,
        ),
    ]


GENERIC = {"model", "models", "hf", "checkpoint", "ckpt", "export"}  # named with their parent


class Registry:
    """The models this server may open, by id, in the order given (walkthroughs first)."""

    def __init__(self, paths: list[str | Path], walkthroughs: bool = True, dtype: str = "float64"):
        entries = _walkthroughs() if walkthroughs else []
        taken = {e.id for e in entries}
        for raw in paths:
            path = Path(raw)
            full = path.resolve()
            name = full.name if full.name not in GENERIC else f"{full.parent.name}-{full.name}"
            base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "model"
            ident, n = base, 2
            while ident in taken:
                ident, n = f"{base}-{n}", n + 1
            taken.add(ident)
            load = _folder_loader(path, dtype)
            entries.append(Entry(ident, name, "model", str(raw), load, folder=path))
        self.entries: dict[str, Entry] = {e.id: e for e in entries}

    def listing(self) -> list[dict]:
        return [e.listing() for e in self.entries.values()]

    def entry(self, model_id) -> Entry:
        if not isinstance(model_id, str) or model_id not in self.entries:
            shown = str(model_id)[:60]
            raise NotFound(
                f"no model {shown!r} here; the models are {', '.join(self.entries)} "
                "(only the folders given to `glassformer serve` can be opened)"
            )
        return self.entries[model_id]

    def load(self, model_id) -> Model | Fixed:
        """The loaded model (loading it now if needed), or Unavailable saying why it cannot be."""
        e = self.entry(model_id)
        with e.lock:
            if e.loaded is None and e.error is None:
                try:
                    e.loaded = e.load()
                except GlassformerError as err:
                    e.error = str(err)
                except (OSError, ValueError) as err:  # anything a damaged folder raises
                    e.error = f"{type(err).__name__}: {err}"
            if e.error:
                raise Unavailable(f"{e.name} cannot be loaded: {e.error}")
            return e.loaded


# What to do when only the decoding engine's lower precision overflows (`serve --dtype`).
FIX = "start serve with --dtype float64"


def _explored(m: Model) -> Model:
    """A Model as the explorer uses it: its refusals of non-finite values say what `serve`
    can change."""
    m.runtime.fix = FIX
    return m


def _folder_loader(path: Path, dtype: str = "float64") -> Callable[[], Model]:
    def load() -> Model:
        if not path.is_dir():
            raise GlassformerError(f"{path} is not a folder (give a checkpoint or model folder)")
        m = Model.load(path, dtype=dtype)
        if m.tokenizer is None:
            raise GlassformerError(
                f"{path} has no tokenizer: text cannot be encoded; save the model with its "
                "tokenizer"
            )
        return _explored(m)

    return load


# -- runs ---------------------------------------------------------------------------------------


class RunCache:
    """Runs by key, least recently used evicted first once their values pass `max_bytes` (the
    newest run always stays). A run asked for by several requests at once is made once. Safe
    to use from many threads: `bytes()` and `len()` read a total kept under the lock (summing
    the runs while another thread adds one raised "mutated during iteration": a 500 under load).
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._runs: OrderedDict = OrderedDict()
        self._making: dict = {}
        self._lock = threading.Lock()
        self._total = 0
        self._sizes: dict = {}  # key -> the bytes counted for it
        self.hits = self.misses = 0

    def get(self, key, make: Callable):
        with self._lock:
            if key in self._runs:
                self._runs.move_to_end(key)
                self.hits += 1
                run = self._runs[key]
                self._remeasure(key, run)
                return run
            gate = self._making.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if key in self._runs:
                    self.hits += 1
                    return self._runs[key]
            try:
                run = make()
            except BaseException:
                with self._lock:
                    self._making.pop(key, None)
                raise
            with self._lock:  # in the cache before the gate goes: no one makes it twice
                self.misses += 1
                self._runs[key] = run
                self._sizes[key] = _size(run)
                self._total += self._sizes[key]
                self._evict()
                self._making.pop(key, None)
            return run

    def _remeasure(self, key, run) -> None:
        """A run grows after it is made (a float32 view's full trace and float64 reference are
        made when first read): count what it holds now, and evict for it. Under the lock."""
        now = _size(run)
        self._total += now - self._sizes.get(key, 0)
        self._sizes[key] = now
        self._evict()

    def _evict(self) -> None:
        while len(self._runs) > 1 and self._total > self.max_bytes:
            old, _ = self._runs.popitem(last=False)
            self._total -= self._sizes.pop(old, 0)

    def bytes(self) -> int:
        return self._total

    def __len__(self) -> int:
        return len(self._runs)


def _size(run) -> int:
    """What a run holds: its trace (with a view's full trace once made) and its reference."""
    trace, ref = getattr(run, "trace", None), getattr(run, "reference", None)
    if trace is None:
        return getattr(run, "nbytes", 0)
    return trace.nbytes + (ref.nbytes if ref is not None else 0)
