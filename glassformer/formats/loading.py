"""One way in for a model on disk: a glassformer checkpoint, a Hugging Face model folder or a
nanoGPT out_dir.

`load(path)` returns (Config, {name: array}, tokenizer or None) for any kind; `foreign(path)`
the same and the Hugging Face model_type (`Model.family`) of a model imported on the fly, None for
a glassformer checkpoint. It sits above `weights.py` (the naming scheme and glassformer's own
checkpoint directories), `hf_dir.py` (foreign folders, translated through `hf.py`'s tables) and
`nanogpt.py` (nanoGPT's ckpt.pt, with the meta.pkl beside it), so that the core never knows a
foreign folder. Every command that takes a model (and `train --init`) reads it through here.

`class_names(path, cfg)` reads a classifier's class names where it has them.

Deliberately not here: writing (`weights.save`, `hf_dir.export`) and the report of what an import
left out (`hf_dir.load` and `nanogpt.load` return it, for `import-hf` and `import-nanogpt`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from glassformer import weights
from glassformer.formats import hf_dir, nanogpt


def load(path: str | Path, dtype=np.float64, order: str = "K"):
    """(Config, {name: array}, tokenizer or None) of a checkpoint directory, fully checked; a
    Hugging Face model folder (its config.json names a `model_type`) or a nanoGPT out_dir (a
    folder with ckpt.pt, or the file itself) is imported on the fly.

    order "F": every matrix an F-ordered array (the same shapes and values), the memory layout
    of the PyTorch engine's inference form (`torch_model.inference_arrays`, then `from_params`
    shares the arrays instead of copying them); a Hugging Face folder's are read so, the others
    are copied so one at a time. "K", the default: as read."""
    if (imported := foreign(path, dtype, order)) is not None:
        return imported[:3]
    cfg, params, tok = weights.load(path, dtype)
    return cfg, _in_order(params, order), tok


def foreign(path: str | Path, dtype=np.float64, order: str = "K") -> tuple | None:
    """(Config, {name: array}, tokenizer or None, Hugging Face model_type or None) of a model
    imported on the fly: a Hugging Face model folder, a nanoGPT checkpoint (model_type None);
    None for anything else (a glassformer checkpoint, or nothing). order: as `load`'s."""
    if hf_dir.is_hf_folder(path):
        imported = hf_dir.load(path, dtype, order)
        return imported.cfg, imported.params, imported.tokenizer, imported.family
    if nanogpt.is_nanogpt(path):
        found = nanogpt.load(path, dtype)
        return found.cfg, _in_order(found.params, order), found.tokenizer, None
    return None


def _in_order(params: dict, order: str) -> dict:
    """params, in place, every array in `order` (each replaced as its copy is made)."""
    for name, x in params.items():
        params[name] = np.asarray(x, order=order)
    return params


def class_names(path: str | Path, cfg) -> list[str] | None:
    """A classifier's class names saved beside it (labels.json), or None (a Hugging Face folder,
    a nanoGPT checkpoint, or a checkpoint trained without them)."""
    if hf_dir.is_hf_folder(path) or nanogpt.is_nanogpt(path):
        return None
    return weights.load_labels(path, cfg)
