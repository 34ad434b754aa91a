"""One way in for a model on disk: a glassformer checkpoint or a Hugging Face model folder.

`load(path)` returns (Config, {name: array}, tokenizer or None) for either kind. It sits above
`weights.py` (the naming scheme and glassformer's own checkpoint directories) and `hf_dir.py`
(foreign folders, translated through `hf.py`'s tables), so that the core never knows a foreign
folder. Every command that takes a model (and `train --init`) reads it through here.

`class_names(path, cfg)` reads a classifier's class names where it has them.

Deliberately not here: writing (`weights.save`, `hf_dir.export`) and the report of what an import
left out (`hf_dir.load` returns it, for `import-hf`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from glassformer import hf_dir, weights


def load(path: str | Path, dtype=np.float64):
    """(Config, {name: array}, tokenizer or None) of a checkpoint directory, fully checked; a
    Hugging Face model folder (its config.json names a `model_type`) is imported on the fly."""
    if hf_dir.is_hf_folder(path):
        imported = hf_dir.load(path, dtype)
        return imported.cfg, imported.params, imported.tokenizer
    return weights.load(path, dtype)


def class_names(path: str | Path, cfg) -> list[str] | None:
    """A classifier's class names saved beside it (labels.json), or None (a Hugging Face folder
    or a checkpoint trained without them)."""
    if hf_dir.is_hf_folder(path):
        return None
    return weights.load_labels(path, cfg)
