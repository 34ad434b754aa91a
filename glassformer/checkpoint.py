"""Training checkpoints: one directory that holds everything a run needs to continue.

`save_checkpoint` writes the model, its tokenizer, the training state (optimizer, schedule step,
RNG states, data position, log), the training config, log.csv, loss.png and the kept weight
snapshots as one atomically replaced directory (`weights.save`); `restore` reads it back into a
fresh run, checking every entry of the state first, so that a resumed run continues exactly as an
uninterrupted one would and a damaged file is one clear error, never a traceback.

The training state is read with `torch.load(weights_only=True)`: no pickle can run code.
Deliberately not here: the loop (`train.py`) and the model files themselves (`weights.py`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import random
import warnings
from pathlib import Path

import torch

from glassformer import files, weights
from glassformer.config import Config
from glassformer.errors import CheckpointError
from glassformer.torch_model import to_params

STATE_FILE = "training_state.pt"
TRAIN_CONFIG_FILE = "train_config.json"
LOG_FILE = "log.csv"
PLOT_FILE = "loss.png"


def save_checkpoint(
    out: Path,
    cfg: Config,
    tcfg,
    model,
    opt,
    task,
    step: int,
    rows: list[dict],
    snapshots: dict[int, dict] | None = None,
) -> None:
    """Model + tokenizer + training state + logs (+ the kept weight snapshots), as one
    atomically replaced directory."""
    state = {
        "step": step,
        "optimizer": opt.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "python_rng": list(random.getstate()[1]),
        "data": json.dumps(task.train.state()),
        "log": json.dumps(rows),
    }
    buf = io.BytesIO()
    torch.save(state, buf)
    extra = {
        STATE_FILE: buf.getvalue(),
        TRAIN_CONFIG_FILE: json.dumps(dataclasses.asdict(tcfg), indent=2).encode(),
        LOG_FILE: _csv(rows),
    }
    png = _plot(rows)
    if png:
        extra[PLOT_FILE] = png
    weights.save(
        out,
        cfg,
        to_params(model),
        tokenizer=task.tokenizer,
        dtype="float32",
        extra=extra,
        snapshots=snapshots,
        labels=task.labels,
    )


def restore(out: Path, cfg: Config, model, opt, task) -> tuple[int, list[dict]]:
    """Load the model, optimizer, RNG, data position and log of the training checkpoint `out`
    into a fresh run; every entry of the training state is checked before use."""
    saved_cfg, params, _ = weights.load(out)
    if saved_cfg != cfg:
        raise CheckpointError(
            f"{out} was trained with a different config; resume with the same "
            "--preset/--set, or start a new output directory"
        )
    path = files.inside(out, out / STATE_FILE)
    if not path.is_file():
        raise CheckpointError(f"{out} has no {STATE_FILE}: it is not a training checkpoint")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols: the error says it
            warnings.simplefilter("ignore")
            state = torch.load(path, weights_only=True)  # never unpickle arbitrary objects
    except Exception as e:  # noqa: BLE001 - any unreadable state is one clear error
        raise CheckpointError(f"{path} is unreadable ({type(e).__name__}); restore it") from None
    step, log, data, python_rng = _checked_state(path, state, opt)
    with torch.no_grad():
        for name, p in model.state_dict().items():
            p.copy_(torch.as_tensor(params[name]))
    try:
        opt.load_state_dict(state["optimizer"])
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"{path}: 'optimizer' does not fit this model ({e})") from None
    torch.set_rng_state(state["torch_rng"])
    py = random.getstate()
    random.setstate((py[0], python_rng, py[2]))
    task.train.set_state(data)
    return step, log


def _checked_state(path: Path, state, opt) -> tuple[int, list[dict], dict, tuple]:
    """The entries of a training state, each checked: (step, log rows, data state, python RNG)."""

    def bad(key: str, why: str) -> CheckpointError:
        return CheckpointError(f"{path}: {key!r} {why}; restore the file or start again")

    if not isinstance(state, dict):
        raise bad("state", "is not a dictionary")
    for key in ("step", "optimizer", "torch_rng", "python_rng", "data", "log"):
        if key not in state:
            raise bad(key, "is missing")
    step = state["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise bad("step", f"must be a non-negative integer, got {step!r}")
    groups = state["optimizer"].get("param_groups") if isinstance(state["optimizer"], dict) else 0
    if not isinstance(groups, list) or len(groups) != len(opt.param_groups):
        raise bad("optimizer", f"does not have this model's {len(opt.param_groups)} groups")
    for saved, live in zip(groups, opt.param_groups, strict=True):
        if not isinstance(saved, dict) or len(saved.get("params", ())) != len(live["params"]):
            raise bad("optimizer", "does not list this model's parameters")
    rng, expected = state["torch_rng"], torch.get_rng_state()
    if not (
        isinstance(rng, torch.Tensor)
        and rng.dtype == expected.dtype
        and rng.shape == expected.shape
    ):
        raise bad("torch_rng", f"must be a {tuple(expected.shape)} uint8 tensor")
    py = state["python_rng"]
    if not (
        isinstance(py, list | tuple) and len(py) == 625 and all(isinstance(v, int) for v in py)
    ):
        raise bad("python_rng", "must be the 625 integers of Python's random state")
    try:
        data = files.parse_json(state["data"], "'data'") if isinstance(state["data"], str) else None
        log = files.parse_json(state["log"], "'log'") if isinstance(state["log"], str) else None
    except files.FileError as e:
        raise bad("data" if "'data'" in str(e) else "log", "is not valid JSON") from None
    if not isinstance(data, dict):
        raise bad("data", "must be a JSON object (the batch position)")
    if not isinstance(log, list) or not all(isinstance(r, dict) for r in log):
        raise bad("log", "must be a JSON list of rows")
    return step, log, data, tuple(py)


def _csv(rows: list[dict]) -> bytes:
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k != "step", k))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def _plot(rows: list[dict]) -> bytes | None:
    """Training and validation loss against step, as PNG bytes (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot([r["step"] for r in rows], [r["loss"] for r in rows], lw=0.8, label="train loss")
    ev = [r for r in rows if "val_loss" in r]
    if ev:
        ax.plot([r["step"] for r in ev], [r["val_loss"] for r in ev], "o-", label="val loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.grid(alpha=0.3)
    ax.legend()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
