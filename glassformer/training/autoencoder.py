"""The training loop of a sparse autoencoder or transcoder (`corpus/sae.py`), with the training
machinery's promises: the output folder's lock for the whole run (`files.locked`), every save the
whole folder replaced atomically (`saelens.write` through `files.write_directory`), Ctrl-C or
SIGTERM saving at the end of the step under way (`train.StopSignals`), and `resume` continuing
exactly: the parameters, AdamW's moments, the step, the scales and the features' last firing are
in training_state.pt (read with `torch.load(weights_only=True)`), and a step's rows depend on
(seed, step) only (`sae.batch_rows`), so a resumed run ends equal to an uninterrupted one.

Deliberately not here: the SAE's maths, initialisation and one step (`corpus/sae.py`), its folder's
format (`corpus/saelens.py`), the progress bar (the command line's callback).
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from glassformer import files
from glassformer.corpus import saelens
from glassformer.corpus.sae import (
    Run,
    SAEConfig,
    SparseAutoencoder,
    TrainConfig,
    batch_rows,
    folded,
    new_sae,
    optimizer,
    scale_of,
    step_once,
)
from glassformer.errors import GlassformerError, Interrupted, param
from glassformer.training.train import StopSignals

STATE_FILE = "training_state.pt"


def train(
    x: np.ndarray,
    cfg: SAEConfig,
    tcfg: TrainConfig,
    out: str | Path,
    *,
    y: np.ndarray | None = None,
    resume: bool = False,
    callback: Callable[[dict], None] | None = None,
    stop_at: int | None = None,
    save_every: int = 500,
) -> list[dict]:
    """Train an SAE (or a transcoder, x -> y) on rows x (N, d_in) (a memory map is read a batch
    at a time), saving the folder `out` every `save_every` steps, at the end, and when stopped
    (Ctrl-C, SIGTERM, or `stop_at`); resume: continue the run saved in `out` exactly."""
    out = Path(out)
    y = x if y is None else y
    if len(x) == 0:
        raise GlassformerError("there are no rows to train on: record more text")
    if len(y) != len(x):
        raise GlassformerError(f"the input has {len(x)} rows and the target {len(y)}")
    callback = callback or (lambda row: None)
    with files.locked(out, "glassformer sae train"):
        files.check_writable(out)
        run = _resumed(out, cfg, tcfg) if resume else _fresh(x, y, cfg, tcfg)
        signals = StopSignals()
        t0 = time.perf_counter()
        with signals:
            while run.step < tcfg.steps:
                rows = np.sort(batch_rows(len(x), tcfg.batch_size, tcfg.seed, run.step))
                xb = torch.as_tensor(np.asarray(x[rows], np.float32) * run.scale_in)
                yb = xb if y is x else torch.as_tensor(np.asarray(y[rows], np.float32))
                if y is not x:
                    yb = yb * run.scale_out
                row = step_once(run, xb, yb, tcfg)
                row["elapsed_s"] = time.perf_counter() - t0
                run.log.append(row)
                callback(row)
                stopping = signals.received is not None or (
                    stop_at is not None and run.step >= stop_at
                )
                if stopping or run.step % save_every == 0 or run.step == tcfg.steps:
                    save_run(out, run, tcfg)
                if stopping:
                    break
        if signals.received is not None:
            raise Interrupted(
                signals.received, f"interrupted at step {run.step}; {out} holds every step so far"
            )
    return run.log


def _fresh(x, y, cfg: SAEConfig, tcfg: TrainConfig) -> Run:
    scale_in = scale_of(x)
    scale_out = scale_in if y is x else scale_of(y)
    sae = new_sae(cfg, x, _Scaled(y, scale_out), tcfg.seed)
    return Run(
        sae, optimizer(sae, tcfg.lr), 0, scale_in, scale_out, np.full(cfg.d_sae, -1, np.int64), []
    )


class _Scaled:
    """Rows times a factor, read lazily (for the mean b_dec starts at)."""

    def __init__(self, a, s: float):
        self.a, self.s = a, s

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, sl):
        return np.asarray(self.a[sl], np.float64) * self.s


def save_run(out: Path, run: Run, tcfg: TrainConfig) -> None:
    """The folder: SAELens's two files (folded weights) + training_state.pt, swapped in whole."""
    state = {
        "step": run.step,
        "params": {k: v.detach().clone() for k, v in run.sae.state_dict().items()},
        "optimizer": run.opt.state_dict(),
        "scale_in": run.scale_in,
        "scale_out": run.scale_out,
        "last_fired": torch.as_tensor(run.last_fired),
        "train_config": json.dumps(dataclasses.asdict(tcfg)),
        "log": json.dumps(run.log),
    }
    buf = io.BytesIO()
    torch.save(state, buf)
    saelens.write(out, run.sae.cfg, folded(run), extra={STATE_FILE: buf.getvalue()}, overwrite=True)


def _resumed(out: Path, cfg: SAEConfig, tcfg: TrainConfig) -> Run:
    saved_cfg, _ = saelens.read(out)
    same = (saved_cfg.d_in, saved_cfg.d_sae, saved_cfg.step, saved_cfg.step_out)
    if same != (cfg.d_in, cfg.d_sae, cfg.step, cfg.step_out):
        raise GlassformerError(
            f"{out} holds an SAE of {saved_cfg.step} with {saved_cfg.d_sae} features; resume "
            f"with the same {param('sae.step')}, {param('features')} and {param('transcoder_to')}, "
            f"or choose another {param('out')}"
        )
    path = files.member(out, STATE_FILE, required=False)
    if path is None:
        raise GlassformerError(f"{out} has no {STATE_FILE}: it is not an SAE run to resume")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(path, weights_only=True)  # never unpickle arbitrary objects
        sae = SparseAutoencoder(cfg)
        sae.load_state_dict(state["params"])
        opt = optimizer(sae, tcfg.lr)
        opt.load_state_dict(state["optimizer"])
        saved_tcfg = json.loads(state["train_config"])
        run = Run(
            sae,
            opt,
            int(state["step"]),
            float(state["scale_in"]),
            float(state["scale_out"]),
            state["last_fired"].numpy().copy(),
            json.loads(state["log"]),
        )
    except Exception as e:  # noqa: BLE001 - a damaged state is one line
        raise GlassformerError(
            f"{path} is damaged ({type(e).__name__}); restore it or start again without "
            f"{param('resume')}"
        ) from None
    for key in ("batch_size", "seed", "l1", "lr"):
        if saved_tcfg.get(key) != getattr(tcfg, key):
            raise GlassformerError(
                f"{out} was trained with {key} {saved_tcfg.get(key)}, not {getattr(tcfg, key)}; "
                "resume with the same settings"
            )
    if run.step > tcfg.steps:
        raise GlassformerError(
            f"{out} is at step {run.step}, beyond {param('sae.steps', tcfg.steps)}"
        )
    return run
