"""What a `Model` is made from: `read` turns a glassformer checkpoint folder, a Hugging Face or
nanoGPT folder, or a preset's name into its `Parts` (config, weights, tokenizer, class names, where
it was read from). `Model.load` (`glassformer.load`) makes a Model of them.

Deliberately not here: reading the folders themselves (`weights.py`, `loading.py`, `hf_dir.py`),
the Model and its checks of the arguments (`model.py`: this module never imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from glassformer import weights
from glassformer.config import PRESETS, Config
from glassformer.errors import CheckpointError, InputError, param


@dataclass
class Parts:
    """A model's parts as read: tokenizer None when it has none, labels a classifier's class
    names as saved (or None), path the folder (absolute; None for a preset), family the Hugging
    Face model_type of a folder imported on the fly (or None), name how it is shown."""

    cfg: Config
    params: dict
    tokenizer: object
    name: str
    labels: list[str] | None = None
    path: Path | None = None
    family: str | None = None


def read(path_or_preset: str | Path, seed: int | None = None) -> Parts:
    """A glassformer checkpoint folder, a Hugging Face model folder (imported on the fly) or a
    preset's name (seeded random weights, `seed` default 0; the article's tokenizer for
    hello-world, none for the others)."""
    from glassformer.formats import loading
    from glassformer.tokenizer import article_tokenizer

    p = Path(path_or_preset)
    if str(path_or_preset) in PRESETS and not p.exists():
        cfg = PRESETS[str(path_or_preset)]
        tok = article_tokenizer() if str(path_or_preset) == "hello-world" else None
        params = weights.init(cfg, seed=0 if seed is None else seed)
        return Parts(cfg, params, tok, name=str(path_or_preset))
    if not p.exists() and not p.is_symlink():
        raise CheckpointError(nowhere(str(path_or_preset)))
    if seed is not None:
        raise InputError(f"seed draws a preset's random weights; {p} is a folder: drop seed")
    # The weights as stored (float32 unless the file holds float64; `runtime.Float64Weights`
    # widens them when the reference engine asks), matrices laid out for the float32 engine.
    if (imported := loading.foreign(p, None, "F")) is not None:  # a Hugging Face or nanoGPT
        cfg, params, tok, family = imported
        return Parts(cfg, params, tok, name=str(p), path=p.absolute(), family=family)
    cfg, params, tok = weights.load(p, None)
    labels = weights.load_labels(p, cfg)
    # The folder it was read from, absolute (a later chdir changes nothing): never written to.
    return Parts(cfg, params, tok, name=str(p), labels=labels, path=p.absolute())


def nowhere(name: str) -> str:
    """The refusal of a name that is neither a folder nor a preset: the nearest presets and
    folders beside it (difflib), every preset, that nothing is ever downloaded, and the list of
    every name (`glassformer.models()`, the command line's `glassformer models`)."""
    import difflib

    where = Path(name).parent
    beside = [str(where / d.name) if str(where) != "." else d.name for d in _folders(where)]
    names = [*PRESETS, *beside]
    close = [n for n in names if n.startswith(name)]  # gpt2 -> gpt2-small
    close += [n for n in difflib.get_close_matches(name, names, n=3, cutoff=0.6) if n not in close]
    close = close[:3]
    guess = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return (
        f"{name} not found: it is neither a folder nor a preset{guess}; glassformer never "
        "downloads a model: give a checkpoint folder (such as models/en-es), a Hugging Face or "
        f"nanoGPT folder already on disk, or a preset ({', '.join(PRESETS)}); "
        f"{param('glassformer.models')} lists them all"
    )


def _folders(where: Path) -> list[Path]:
    """The folders in `where` (none when it cannot be read)."""
    try:
        return sorted(d for d in where.iterdir() if d.is_dir())[:1000]
    except OSError:
        return []
