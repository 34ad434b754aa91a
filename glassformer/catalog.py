"""Every name a command or `glassformer.load` takes, listed: the models shipped in the clone's
models/ (each with its card's first line), the presets (seeded random weights), and the folders
in a working folder (one level down, and in its runs/) that are models: glassformer checkpoints
(config.json + model.safetensors), Hugging Face folders (a config.json naming a model_type) and
nanoGPT out_dirs (ckpt.pt). `glassformer models` prints it; `glassformer.models()` returns it.

Nothing is read beyond a config.json and a card: a folder is recognised by its files, not loaded,
so that listing stays instant however large the models are. Nothing is ever downloaded.

Deliberately not here: reading the models (`opening.py`, `formats/loading.py`), printing (`cli/`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from glassformer import files, weights
from glassformer.config import PRESETS, Config
from glassformer.errors import GlassformerError, InputError, checkout
from glassformer.results import Result
from glassformer.trace import clip

# What each preset is, in a few words (a test checks every preset has its line).
ABOUT = {
    "hello-world": "the Random Transformer article's sizes and its 10-word tokenizer",
    "transformer-base": "Vaswani et al. 2017's base model",
    "gpt2-small": "GPT-2 small's shape (no tokenizer)",
    "char-lm": "nanoGPT's CPU configuration for character-level Shakespeare",
    "translator": "the shape of the shipped en-es translator",
    "encoder-classifier": "a small BERT-style encoder classifier",
    "tiny": "a few-KB decoder for tests and quick experiments",
}
NEVER = "glassformer never downloads a model: give one of these names, or any such folder on disk"
_MOST = 1000  # folders looked at in one place


@dataclass(repr=False)
class Models(Result):
    """`glassformer.models()`: `shipped`, `presets` and `folders` (those in the folder looked
    into), each a list of {name, kind, arch, parameters, about}; `name` is what to pass to
    `glassformer.load` or a command. A field the files do not say is None."""

    shipped: list[dict]
    presets: list[dict]
    folders: list[dict]

    def to_dict(self) -> dict:
        return {"shipped": self.shipped, "presets": self.presets, "folders": self.folders}

    def _title(self) -> str:
        n = len(self.folders)
        return f"{len(self.shipped)} shipped, {len(self.presets)} presets, {n} folders here"

    def _lines(self) -> list[tuple[str, str]]:
        return [
            (what, clip(", ".join(m["name"] for m in rows), 70) or "none")
            for what, rows in (
                ("shipped", self.shipped),
                ("presets", self.presets),
                ("folders", self.folders),
            )
        ]

    def to_text(self, where: str = ".") -> str:
        """The listing as `glassformer models` prints it: a table per kind, and that nothing is
        downloaded."""
        rows = self.shipped + self.presets + self.folders
        wide = max(len(m["name"]) for m in rows)
        arch = max(len(m["arch"] or "") for m in rows)
        here = "this folder" if where == "." else where
        lines = []
        for title, group in (
            ("shipped models (the clone's models/):", self.shipped),
            ("presets (seeded random weights):", self.presets),
            (f"models in {here} and its runs/:", self.folders),
        ):
            lines.append(title)
            for m in group:
                n = "" if m["parameters"] is None else f"{m['parameters']:,}"
                lines.append(
                    f"  {m['name']:<{wide}}  {m['arch'] or '':<{arch}}  {n:>11}  "
                    f"{m['about']}".rstrip()
                )
            if not group:
                lines.append("  none")
        return "\n".join([*lines, NEVER])


def models(where: str | Path = ".") -> Models:
    """The shipped models, the presets, and the models in the folder `where` (default: the
    working folder) and in its runs/."""
    if not Path(where).is_dir():
        raise InputError(f"{where} is not a folder: give the folder to look into")
    root = checkout()
    shipped = _shipped(root / "models") if root is not None else []
    presets = [_row(name, "preset", cfg, ABOUT.get(name, "")) for name, cfg in PRESETS.items()]
    seen = {os.path.realpath(root / "models" / Path(m["name"]).name) for m in shipped}
    found = []
    for place in (Path(where), Path(where) / "runs"):
        for d in _folders(place):  # named as given: runs/lm, or DIR/runs/lm
            if os.path.realpath(d) not in seen and (row := _folder(d, str(d))) is not None:
                found.append(row)
    return Models(shipped, presets, found)


def _row(name, kind, cfg: Config | None, about: str) -> dict:
    arch = None if cfg is None else cfg.arch
    n = None if cfg is None else weights.n_params(cfg)
    return {"name": name, "kind": kind, "arch": arch, "parameters": n, "about": about}


def _shipped(folder: Path) -> list[dict]:
    """Each model of the clone's models/, named as the working folder reaches it."""
    rows = []
    for d in _folders(folder):
        if not (d / weights.CONFIG_FILE).is_file():
            continue
        local = Path("models") / d.name
        name = str(local) if os.path.realpath(local) == os.path.realpath(d) else str(d)
        rows.append(_row(name, "shipped", _config(d), _card(d)))
    return rows


def _card(folder: Path) -> str:
    """The first line of a model's card (its README.md), less the '# name: ' it opens with; read
    only from inside the folder (`files.member`), as every file of a folder is."""
    try:
        with files.open_regular(files.member(folder, "README.md")) as fh:
            first = fh.readline(1000).decode("utf-8", "replace").strip()
    except (OSError, GlassformerError):
        return ""
    return first.lstrip("#").strip().removeprefix(f"{folder.name}:").strip()


def _config(folder: Path) -> Config | None:
    try:
        return Config.from_dict(files.read_json(files.member(folder, weights.CONFIG_FILE)))
    except (GlassformerError, TypeError, AttributeError):
        return None


def _folder(d: Path, name: str) -> dict | None:
    """The row of a folder that is a model, else None."""
    from glassformer.formats import hf_dir, nanogpt

    try:
        if nanogpt.is_nanogpt(d):
            has = (d / nanogpt.META_FILE).is_file()
            about = "nanoGPT out_dir, " + (
                "meta.pkl beside ckpt.pt" if has else "no meta.pkl beside ckpt.pt (no tokenizer)"
            )
            return _row(name, "nanogpt", None, about)
        if hf_dir.is_hf_folder(d):
            family = files.read_json(files.member(d, weights.CONFIG_FILE)).get("model_type")
            return _row(name, "hugging face", None, f"Hugging Face {family} folder")
    except (GlassformerError, OSError, AttributeError):
        return None
    if (d / weights.CONFIG_FILE).is_file() and (d / weights.WEIGHTS_FILE).is_file():
        cfg = _config(d)
        about = "glassformer checkpoint" if cfg else "glassformer checkpoint, config.json not valid"
        return _row(name, "glassformer", cfg, about)
    return None


def _folders(where: Path) -> list[Path]:
    """The folders in `where`, sorted (none when it cannot be read)."""
    try:
        return sorted(d for d in where.iterdir() if d.is_dir())[:_MOST]
    except OSError:
        return []
