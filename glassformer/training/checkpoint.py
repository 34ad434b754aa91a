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
import math
import random
import warnings
from pathlib import Path

import torch

from glassformer import files, weights
from glassformer.config import Config
from glassformer.errors import CheckpointError, GlassformerError, param
from glassformer.torch_model import to_params
from glassformer.training.views import VIEWS_FILE

STATE_FILE = "training_state.pt"
TRAIN_CONFIG_FILE = "train_config.json"
LOG_FILE = "log.csv"
PLOT_FILE = "loss.png"


def _train_config(tcfg, task) -> dict:
    """train_config.json: the TrainConfig and, under "source", the data the run trains on (the
    task's record of it, which --resume compares with the data it is given)."""
    source = getattr(task, "source", None)
    return dataclasses.asdict(tcfg) | ({"source": source} if source else {})


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
    views: bytes | None = None,
) -> None:
    """Model + tokenizer + training state + logs (+ the kept weight snapshots, + the training
    time-lapse's views file), as one atomically replaced directory."""
    state = {
        "step": step,
        "config": cfg.to_json(),  # what config.json must still say on --resume
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
        TRAIN_CONFIG_FILE: json.dumps(_train_config(tcfg, task), indent=2).encode(),
        LOG_FILE: _csv(rows),
    }
    if views is not None:
        extra[VIEWS_FILE] = views
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
        overwrite=True,  # a run replaces its own checkpoint (the CLI checked --out before it)
    )


def restore(
    out: Path, cfg: Config, model, opt, task, max_step: int | None = None
) -> tuple[int, list[dict]]:
    """Load the model, optimizer, RNG, data position and log of the training checkpoint `out`
    into a fresh run; every entry of the training state is checked against the model (and the
    step against `max_step`, the run's max_steps) before any is used."""
    saved_cfg, params, _ = weights.load(out)
    if saved_cfg != cfg:
        raise CheckpointError(
            f"{out} was trained with a different config; resume with the same "
            f"{param('preset')}/{param('Config.override')}, or start a new output directory"
        )
    path = files.member(out, STATE_FILE, required=False)
    if path is None:
        raise CheckpointError(f"{out} has no {STATE_FILE}: it is not a training checkpoint")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols: the error says it
            warnings.simplefilter("ignore")
            state = torch.load(path, weights_only=True)  # never unpickle arbitrary objects
    except Exception as e:  # noqa: BLE001 - any unreadable state is one clear error
        raise CheckpointError(f"{path} is unreadable ({type(e).__name__}); restore it") from None
    step, log, data, python_rng = _checked_state(path, state, opt, saved_cfg, max_step)
    optimizer = _checked_optimizer(path, state["optimizer"], opt, step)
    try:  # checks the batch position against this data before using it
        task.train.set_state(data)
    except GlassformerError as e:
        raise _bad(path, "data", f"does not fit this data ({e})") from None
    with torch.no_grad():
        for name, p in model.state_dict().items():
            p.copy_(torch.as_tensor(params[name]))
    try:
        opt.load_state_dict(optimizer)
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"{path}: 'optimizer' does not fit this model ({e})") from None
    torch.set_rng_state(state["torch_rng"].clone())
    py = random.getstate()
    random.setstate((py[0], python_rng, py[2]))
    return step, log


# The numbers a log row holds (others may be numbers, strings or null: a custom evaluate's).
_NUMERIC = ("loss", "lr", "grad_norm", "clipped", "tokens_per_s", "elapsed_s", "val_loss",
            "val_ppl", "val_acc", "bleu", "chrf")  # fmt: skip


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _finite(v) -> bool:
    """A finite number (an int too large for a float is not)."""
    try:
        return _number(v) and math.isfinite(v)
    except OverflowError:
        return False


def _bad(path: Path, key: str, why: str) -> CheckpointError:
    return CheckpointError(f"{path}: {key!r} {why}; restore the file or start again")


def _checked_state(
    path: Path, state, opt, cfg: Config, max_step: int | None
) -> tuple[int, list[dict], dict, tuple]:
    """The entries of a training state, each checked against the model and the run before any is
    used: (step, log rows, data state, python RNG state)."""

    def bad(key: str, why: str) -> CheckpointError:
        return _bad(path, key, why)

    if not isinstance(state, dict):
        raise bad("state", "is not a dictionary")
    for key in ("step", "optimizer", "torch_rng", "python_rng", "data", "log"):
        if key not in state:
            raise bad(key, "is missing")
    step = state["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise bad("step", f"must be a non-negative integer, got {step!r}")
    if max_step is not None and step > max_step:
        raise bad("step", f"is {step}, beyond the run's max_steps {max_step} ({TRAIN_CONFIG_FILE})")
    if "config" in state:  # the model the run was started with (states before it lack it)
        _check_config(path, state["config"], cfg)
    _check_torch_rng(bad, state["torch_rng"])
    py = _checked_python_rng(bad, state["python_rng"])
    try:
        data = files.parse_json(state["data"], "'data'") if isinstance(state["data"], str) else None
        log = files.parse_json(state["log"], "'log'") if isinstance(state["log"], str) else None
    except files.FileError as e:
        raise bad("data" if "'data'" in str(e) else "log", "is not valid JSON") from None
    if not isinstance(data, dict):
        raise bad("data", "must be a JSON object (the batch position)")
    if not isinstance(log, list) or not all(isinstance(r, dict) for r in log):
        raise bad("log", "must be a JSON list of rows")
    for k, row in enumerate(log, 1):
        if type(row.get("step")) is not int or row["step"] != k:
            raise bad("log", f"row {k} must have step {k}, got {row.get('step')!r}")
        if "loss" not in row:
            raise bad("log", f"row {k} has no loss")
        for name, v in row.items():
            scalar = _number(v) or isinstance(v, str) or v is None
            if not (_number(v) if name in _NUMERIC else scalar):
                raise bad("log", f"row {k}: {name} must be a number, got {v!r}")
        if not (_finite(row.get("elapsed_s", 0.0)) and row.get("elapsed_s", 0.0) >= 0):
            raise bad("log", f"row {k}: elapsed_s must be a finite number >= 0")
    if len(log) != step:
        raise bad("log", f"has {len(log)} rows for step {step}: one row a step")
    return step, log, data, py


def _check_config(path: Path, text, cfg: Config) -> None:
    """config.json must still say what the run was started with: a resumed run keeps its model."""
    try:
        started = Config.from_json(text) if isinstance(text, str) else None
    except GlassformerError:
        started = None
    if started is None:
        raise _bad(path, "config", "is not a model config")
    for f in dataclasses.fields(Config):
        now, then = getattr(cfg, f.name), getattr(started, f.name)
        if now != then:
            raise CheckpointError(
                f"{path.parent / weights.CONFIG_FILE} was changed since the run was saved: "
                f"{f.name} is {now!r}, the run was started with {then!r}; restore it (a resumed "
                f"run keeps its model), or start a new {param('out')}"
            )


def _check_torch_rng(bad, rng) -> None:
    """A torch CPU generator state: the right uint8 tensor, and one torch accepts (tried, then
    the current state is put back)."""
    expected = torch.get_rng_state()
    if not (
        isinstance(rng, torch.Tensor)
        and rng.layout == torch.strided
        and rng.dtype == expected.dtype
        and rng.shape == expected.shape
    ):
        raise bad("torch_rng", f"must be a {tuple(expected.shape)} uint8 tensor")
    try:
        torch.set_rng_state(rng.clone())
    except (RuntimeError, ValueError, TypeError):
        raise bad("torch_rng", "is not a valid generator state") from None
    finally:
        torch.set_rng_state(expected)


def _checked_python_rng(bad, py) -> tuple:
    """Python's Mersenne Twister state: 624 words in [0, 2**32) and a position in [0, 624]."""
    why = "must be the 625 integers of Python's random state"
    if not (isinstance(py, list | tuple) and len(py) == 625):
        raise bad("python_rng", why)
    if not all(type(v) is int and 0 <= v < 2**32 for v in py) or py[-1] > 624:
        raise bad("python_rng", why + " (624 words in [0, 2**32), then a position <= 624)")
    if not any(py[:-1]):
        raise bad("python_rng", "is all zeros, a state that never changes")
    try:
        random.Random().setstate((3, tuple(py), None))
    except (ValueError, TypeError, OverflowError):
        raise bad("python_rng", why) from None
    return tuple(py)


def _checked_optimizer(path: Path, saved, opt, step: int) -> dict:
    """The optimizer state to load, checked against the live AdamW: the same groups over the same
    parameter ids (hyper-parameters numbers; the live ones, from this run's TrainConfig, are
    kept), and for each parameter a step count and moments of its shape and dtype, finite.
    Every tensor is copied, so that none aliases another."""

    def bad(why: str) -> CheckpointError:
        return _bad(path, "optimizer", why)

    live = opt.state_dict()
    if not isinstance(saved, dict) or not {"state", "param_groups"} <= set(saved):
        raise bad("must hold 'state' and 'param_groups'")
    groups = saved["param_groups"]
    if not isinstance(groups, list) or len(groups) != len(live["param_groups"]):
        raise bad(f"does not have this model's {len(live['param_groups'])} groups")
    for k, (g, lg) in enumerate(zip(groups, live["param_groups"], strict=True)):
        if not isinstance(g, dict):
            raise bad(f"group {k} is not a dictionary")
        ids = g.get("params")
        if not (isinstance(ids, list) and all(type(i) is int for i in ids) and ids == lg["params"]):
            raise bad(f"group {k} does not list this model's parameters {lg['params'][:3]}...")
        for key in ("lr", "betas", "eps", "weight_decay"):
            if key not in g:
                raise bad(f"group {k} has no {key!r}")
        for key, value in g.items():
            if key in lg and key != "params" and not _like(value, lg[key]):
                raise bad(f"group {k}: {key!r} is {value!r}, not like {lg[key]!r}")
    params = [p for group in opt.param_groups for p in group["params"]]
    ids = [i for group in live["param_groups"] for i in group["params"]]
    by_id = dict(zip(ids, params, strict=True))
    moments = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if _amsgrad(opt) else [])
    state = saved["state"]
    if not isinstance(state, dict):
        raise bad("'state' is not a dictionary")
    loaded = {}
    for i, entry in state.items():
        if type(i) is not int or i not in by_id:
            raise bad(f"has a state for parameter {i!r}, which this model does not have")
        if not isinstance(entry, dict) or set(entry) != {"step", *moments}:
            keys = sorted(map(str, entry)) if isinstance(entry, dict) else type(entry).__name__
            raise bad(f"parameter {i}: state {keys} must be {sorted({'step', *moments})}")
        p, n = by_id[i], entry["step"]
        if not (_plain(n) and n.ndim == 0 and n.dtype in (torch.float32, torch.float64)):
            raise bad(f"parameter {i}: 'step' must be a scalar float tensor")
        if not (math.isfinite(float(n)) and 0 <= float(n) <= step and float(n).is_integer()):
            raise bad(f"parameter {i}: 'step' {float(n)} must be a whole number in [0, {step}]")
        loaded[i] = {"step": torch.tensor(float(n), dtype=torch.float32)}
        for name in moments:
            t = entry[name]
            if not (_plain(t) and t.shape == p.shape and t.dtype == p.dtype):
                what = f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else repr(t)
                raise bad(f"parameter {i}: {name!r} must be {tuple(p.shape)} {p.dtype}, got {what}")
            if not bool(torch.isfinite(t).all()) or (name != "exp_avg" and bool((t < 0).any())):
                raise bad(f"parameter {i}: {name!r} has values that are not finite (or < 0)")
            loaded[i][name] = t.detach().clone(memory_format=torch.contiguous_format)
    return {"state": loaded, "param_groups": live["param_groups"]}


def _plain(t) -> bool:
    """A dense tensor of plain numbers (not sparse, quantized, complex or a meta tensor)."""
    return (
        isinstance(t, torch.Tensor)
        and t.layout == torch.strided
        and not t.is_quantized
        and not t.is_complex()
        and t.device.type == "cpu"
    )


def _like(value, live) -> bool:
    """A saved hyper-parameter of the kind the live one is (number, bool, pair of numbers)."""
    if isinstance(live, bool) or live is None:
        return value is None or isinstance(value, bool)
    if _number(live):
        return _finite(value)
    if isinstance(live, tuple | list):
        return (
            isinstance(value, tuple | list)
            and len(value) == len(live)
            and all(_finite(v) for v in value)
        )
    return type(value) is type(live)


def _amsgrad(opt) -> bool:
    return any(g.get("amsgrad") for g in opt.param_groups)


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
