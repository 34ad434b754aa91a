"""What a `Model` is made from: `load` (a glassformer checkpoint folder, a Hugging Face or
nanoGPT folder, a preset's name -> a `Model`) and `with_params` (the same model on other
weights). `glassformer.load` is this `load`.

Deliberately not here: reading the folders themselves (`weights.py`, `loading.py`, `hf_dir.py`),
the model's work (`model.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from glassformer import devices, inference, weights
from glassformer.arguments import entry
from glassformer.config import PRESETS
from glassformer.errors import InputError

if TYPE_CHECKING:
    from glassformer.model import Model


@entry  # every argument against glassformer.arguments' table, before any work
def load(
    path_or_preset: str | Path,
    *,
    engine: str = "auto",
    dtype: str | None = None,
    seed: int | None = None,
    on_note: Callable[[str], None] | None = None,
    device: str = "cpu",
    threads: int | None = None,
) -> Model:
    """A glassformer checkpoint folder, a Hugging Face model folder (imported on the fly) or a
    preset's name (seeded random weights, `seed` default 0; the article's tokenizer for
    hello-world, none for the others) as a `Model`.

    engine: "auto" (PyTorch where the command line uses it, if installed), "torch" or
    "reference" (NumPy float64 everywhere). dtype: the PyTorch engine's precision for
    generate, translate and the explorer's decoding (None: each method's command-line
    default); on_note: where notes go (default: `Model.notes`). device: where the PyTorch engine
    runs, "cpu" or a GPU that PyTorch sees ("cuda", "cuda:N"; not with engine="reference", nor
    with int8). threads: PyTorch's and NumPy BLAS's threads, for the whole process (None: as
    they are; `devices.use_threads`)."""
    from glassformer import loading
    from glassformer.model import Model  # (model.py imports this module)
    from glassformer.tokenizer import article_tokenizer

    if dtype is not None:
        inference.check_dtype(dtype, engine)
    devices.check_device(device, engine, dtype)  # before any work, as dtype
    p = Path(path_or_preset)
    options = dict(engine=engine, dtype=dtype, on_note=on_note, device=device, threads=threads)
    if str(path_or_preset) in PRESETS and not p.exists():
        cfg = PRESETS[str(path_or_preset)]
        tok = article_tokenizer() if str(path_or_preset) == "hello-world" else None
        params = weights.init(cfg, seed=0 if seed is None else seed)
        return Model(cfg, params, tok, name=str(path_or_preset), **options)
    if seed is not None:
        raise InputError(f"seed draws a preset's random weights; {p} is a folder: drop seed")
    if (imported := loading.foreign(p)) is not None:  # a Hugging Face or nanoGPT folder
        cfg, params, tok, family = imported
        return Model(cfg, params, tok, path=p.absolute(), family=family, name=str(p), **options)
    cfg, params, tok = weights.load(p)
    labels = weights.load_labels(p, cfg)
    # The folder it was read from, absolute (a later chdir changes nothing): never written to.
    return Model(cfg, params, tok, labels=labels, path=p.absolute(), name=str(p), **options)


@entry
def with_params(m: Model, params: dict) -> Model:
    """The same model with other weights (e.g. snapshots averaged)."""
    other = type(m).__new__(type(m))
    other.__dict__ = dict(m.__dict__, params=params, _engines={}, _made={})
    return other
