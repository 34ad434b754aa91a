"""The contexts that activate a unit most, over a whole store (`glassformer top`): Neuronpedia's
and SAELens's "top activating examples", read from disk without loading the store.

    top = top_examples(open_store("runs/acts"), "decoder.1.ffn.hidden:123", k=20)
    top.examples[0]       # {"row", "value", "document", "position", "pieces", "at", ...}

A unit is one number per row, read from a stored step:

    STEP:N                       the N-th column of a stored step (decoder.0.ffn.hidden:123 is
                                 neuron 123 of the first FFN's hidden layer)
    STACK.L.KIND.headH           a head: the norm ||C[t]|| of its output row C = A·V at each token
                                 (the head's step STACK.L.KIND.headH.C must be stored); how much
                                 the head wrote there, whatever its direction
    STEP                         any stored step: the norm of its row
    feature:N                    feature N of a sparse autoencoder (`sae=`: an SAE folder,
                                 SAELens's format, read by `corpus/saelens.py`) on the step it reads

The store is read shard by shard, a chunk of rows at a time (`Store.chunks`: memory-mapped), and
the best `k` rows kept as it goes, so memory is one chunk and k rows, whatever the store's size.
Ties are broken by the earlier row. Each example carries its context from the stored tokens
(`Store.context`): `before` tokens of its document before it, the token itself at `at`.

Deliberately not here: the store's format (`store.py`), rendering (the command line prints and
writes HTML; the explorer's card), running a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glassformer.corpus.store import Store, StoreError
from glassformer.errors import param
from glassformer.results import Result

HEAD = re.compile(r"(encoder|decoder)\.\d+\.(self_attn|cross_attn)\.head\d+")
SAE_CHUNK = 4096  # rows encoded by an SAE at once: (rows, d_sae) floats in memory


@dataclass(frozen=True)
class Unit:
    """What is ranked: `step` (a stored step), `column` (None: the norm of the row), `feature`
    (an SAE's feature number, read on `step`), and the words for it."""

    name: str
    step: str
    column: int | None
    feature: int | None
    says: str


def unit_of(store: Store, unit: str, sae_cfg=None) -> Unit:
    """The unit that the text `unit` names in `store`, or one StoreError line saying what is
    stored."""
    name = unit.strip()
    if name.startswith("feature:"):
        n = _number(name.split(":", 1)[1], name)
        if sae_cfg is None:
            raise StoreError(
                f"{name}: a feature is a sparse autoencoder's; give its folder "
                f"({param('top_examples.sae', text='SAE')})"
            )
        if not 0 <= n < sae_cfg.d_sae:
            raise StoreError(f"{name}: the SAE has features 0..{sae_cfg.d_sae - 1}")
        store.check_step(sae_cfg.step)
        says = f"feature {n} of the SAE on {sae_cfg.step}"
        return Unit(name, sae_cfg.step, None, n, says)
    if HEAD.fullmatch(name):
        step = f"{name}.C"
        if step not in store.steps:
            raise StoreError(
                f"{name} is a head; ranking it reads its output {step}, which {store.path} does "
                f"not hold: record it ({param('record_corpus.steps', step)})"
            )
        return Unit(name, step, None, None, f"the norm of {name}'s output row ||C[t]||")
    step, _, col = name.rpartition(":") if ":" in name else (name, "", "")
    store.check_step(step)
    if not col:
        return Unit(name, step, None, None, f"the norm of {step}'s row")
    n, width = _number(col, name), store.steps[step]
    if not 0 <= n < width:
        raise StoreError(f"{name}: {step} has units 0..{width - 1}")
    return Unit(name, step, n, None, f"unit {n} of {step}")


def _number(text: str, name: str) -> int:
    if not text.isdigit():
        raise StoreError(f"{name}: after ':' comes a unit's number (0, 1, ...), not {text!r}")
    return int(text)


@dataclass(repr=False)
class Top(Result):
    """`top_examples`: the `k` rows of `store` where `unit` is largest, best first, each
    {"row", "value", "document", "position", "token", "pieces", "at"}, `says` what the value is;
    `rows` read, and the value's `mean` and `max` over them."""

    store: str
    unit: str
    says: str
    k: int
    rows: int
    mean: float
    examples: list

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def _title(self) -> str:
        return f"of {self.unit} over {self.rows} rows of {self.store}"

    def _lines(self) -> list[tuple[str, str]]:
        lines = [("value", f"{self.says}; mean {self.mean:.4g}")]
        for i, e in enumerate(self.examples[:5]):
            lines.append((f"#{i + 1} {e['value']:.4g}", context_text(e)))
        return lines


def context_text(e: dict) -> str:
    """An example's context on one line, the token marked [like this]."""
    pieces = list(e["pieces"])
    pieces[e["at"]] = f"[{pieces[e['at']]}]"
    return (
        "".join(pieces)
        if all(len(p) == 1 or p.startswith("[") for p in pieces)
        else " ".join(pieces)
    )


def top_examples(
    store: Store,
    unit: str,
    *,
    k: int = 20,
    before: int = 20,
    after: int = 4,
    sae: str | Path | None = None,
    chunk_rows: int | None = None,
) -> Top:
    """The `k` contexts of `store` where `unit` is largest (see the module docstring)."""
    if k < 1:
        raise StoreError(f"k={k}: give at least 1")
    sae_cfg = sae_params = None
    if sae is not None:
        from glassformer.corpus import saelens

        sae_cfg, sae_params = saelens.read(sae)
    u = unit_of(store, unit, sae_cfg)
    rows = chunk_rows or (SAE_CHUNK if u.feature is not None else None)
    best_v, best_r = np.zeros(0), np.zeros(0, np.int64)
    total, count = 0.0, 0
    chunks = store.chunks(u.step, rows) if rows else store.chunks(u.step)
    for c in chunks:
        v = _values(u, c.values, sae_cfg, sae_params)
        total, count = total + float(v.sum(dtype=np.float64)), count + len(v)
        r = np.arange(c.start, c.start + len(v), dtype=np.int64)
        best_v, best_r = _keep(np.concatenate([best_v, v]), np.concatenate([best_r, r]), k)
    examples = []
    for value, row in zip(best_v, best_r, strict=True):
        ctx = store.context(int(row), before=before, after=after)
        token = ctx["pieces"][ctx["at"]]
        examples.append({"row": int(row), "value": float(value), "token": token, **ctx})
    mean = total / count if count else 0.0
    return Top(str(store.path), u.name, u.says, k, count, mean, examples)


def _values(u: Unit, x: np.ndarray, sae_cfg, sae_params) -> np.ndarray:
    """The unit's value at each row of one chunk (float64)."""
    if u.feature is not None:
        from glassformer.corpus import sae

        return sae.encode(sae_cfg, sae_params, x.astype(np.float64))[:, u.feature]
    if u.column is not None:
        return x[:, u.column].astype(np.float64)
    return np.sqrt(np.square(x, dtype=np.float64).sum(axis=1))


def _keep(v: np.ndarray, r: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest values, best first; ties to the earlier row (rows are distinct)."""
    order = np.lexsort((r, -v))[:k]
    return v[order], r[order]
