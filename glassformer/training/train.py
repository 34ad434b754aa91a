"""Training: `TrainConfig`, the loop for the three stacks, checkpoints that never lose work.

One loop trains a decoder LM (next-token cross-entropy), an encoder-decoder translator
(cross-entropy with label smoothing over the target tokens) or an encoder classifier. AdamW with
no decay on biases, norms and embeddings; linear warmup then cosine decay; gradient clipping and
accumulation; optional bf16 autocast; periodic evaluation; DistributedDataParallel when launched
by torchrun. Every checkpoint (model, tokenizer, optimizer, schedule step, RNG and data position,
logs) is one directory written atomically by `weights.save`; `resume` continues so that the loss
curve equals an uninterrupted run's.

This module reports through a callback and never prints; the CLI draws the progress bar.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import signal
import threading
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from glassformer import files, interrupts, weights
from glassformer.config import Config, check_type, parse_assignments
from glassformer.errors import CheckpointError, ConfigError, Interrupted, param
from glassformer.torch_model import Transformer, from_params, init_weights, to_params
from glassformer.training import views as views_
from glassformer.training.checkpoint import TRAIN_CONFIG_FILE, restore, save_checkpoint
from glassformer.training.tasks import Task, _next_batch, batch_loss, default_evaluate


@dataclass(frozen=True)
class TrainConfig:
    """How to train (the architecture lives in Config). Steps count optimizer updates."""

    task: Literal["lm", "translate", "classify"] = "lm"
    max_steps: int = 2000
    batch_size: int = 12  # sequences per micro-batch (lm, classify)
    block_size: int = 64  # lm context length
    max_tokens: int = 4096  # translate: padded tokens per micro-batch
    grad_accum: int = 1
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # 0 disables clipping
    dropout: float = 0.0
    label_smoothing: float = 0.0
    bf16: bool = False
    eval_interval: int = 250
    eval_iters: int = 20  # lm: validation batches per evaluation
    eval_sentences: int = 200  # translate: validation sentences decoded per periodic evaluation
    # translate, training noise: the chance that a pair is shown lower-cased on both sides, and
    # without its closing punctuation on both sides, drawn anew each epoch (data.pair_forms)
    lowercase_prob: float = 0.0
    no_end_prob: float = 0.0
    max_minutes: float = 0.0  # > 0: a wall-clock budget; the schedule decays by time or steps
    keep_snapshots: int = 0  # keep the weights of the last k evaluations (export --average k)
    init: Literal["gpt2", "xavier"] = "gpt2"  # how a new model's weights are drawn (init_weights)
    embed_std: float = 0.0  # std of new token embeddings; 0: the init scheme's own
    seed: int = 1337
    threads: int = 0  # torch threads (0, a run saved before the default: torch's own count)
    # a training time-lapse (views.py): this probe text's attention maps and metrics, recorded
    # every view_every steps (0: max_steps / 100) into each checkpoint's views.safetensors;
    # "" records none
    snapshot_views: str = ""
    view_every: int = 0

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(TrainConfig)
        for f in dataclasses.fields(self):
            if hints[f.name] is str:  # the probe text
                if not isinstance(getattr(self, f.name), str):
                    raise ConfigError(f"{f.name} must be text, got {getattr(self, f.name)!r}")
                continue
            check_type(f.name, getattr(self, f.name), hints[f.name])
        positive = ("max_steps", "batch_size", "block_size", "max_tokens", "grad_accum")
        for name in (*positive, "eval_interval", "eval_iters", "eval_sentences"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "keep_snapshots", "threads", "view_every"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed must be an integer in [0, 2**32), got {self.seed}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"lr must be a finite number > 0, got {self.lr}")
        if not 0 <= self.min_lr <= self.lr:  # NaN fails too
            raise ConfigError(f"min_lr must be in [0, lr={self.lr}], got {self.min_lr}")
        for name in ("weight_decay", "grad_clip", "max_minutes"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value}")
        for name in ("beta1", "beta2", "dropout", "label_smoothing"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        for name in ("lowercase_prob", "no_end_prob"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0 <= self.embed_std < 10:
            raise ConfigError(f"embed_std must be in [0, 10), got {self.embed_std}")
        if self.snapshot_views and not self.snapshot_views.strip():
            raise ConfigError("snapshot_views is blank: give the probe text to record views of")
        if self.view_every and not self.snapshot_views:
            raise ConfigError(
                "view_every is the interval between recorded views and needs snapshot_views, "
                f"the probe text: give {param('snapshot_views', text='TEXT')}"
            )

    @property
    def views_interval(self) -> int:
        """Steps between recorded views: view_every, or about 100 views over the run."""
        return self.view_every or max(1, self.max_steps // 100)

    def override(self, *assignments: str) -> TrainConfig:
        return dataclasses.replace(self, **parse_assignments(TrainConfig, assignments))


def saved_train_config(out: str | Path) -> TrainConfig:
    """The TrainConfig a training checkpoint was made with (its train_config.json), checked."""
    return _saved(out)[0]


def saved_source(out: str | Path) -> dict | None:
    """The data a run in `out` trains on, as train_config.json records it under "source"
    ({"data": {"name", "sha256"}, "valid": the same or null}; `tasks.source`), checked; None for
    a run started before glassformer recorded it."""
    _, source = _saved(out)

    def corpus(x) -> bool:
        return (
            isinstance(x, dict)
            and set(x) == {"name", "sha256"}
            and all(isinstance(v, str) for v in x.values())
        )

    if source is not None and not (
        isinstance(source, dict)
        and set(source) == {"data", "valid"}
        and corpus(source["data"])
        and (source["valid"] is None or corpus(source["valid"]))
    ):
        raise CheckpointError(
            f"{Path(out) / TRAIN_CONFIG_FILE}: 'source' is not the record of a run's data "
            "({'data': {'name', 'sha256'}, 'valid'}); restore the file"
        )
    return source


def _saved(out: str | Path) -> tuple[TrainConfig, object]:
    """(TrainConfig, the "source" entry as it is) of a training checkpoint's train_config.json,
    read once; the TrainConfig checked."""
    out = Path(out)
    path = out / TRAIN_CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{out} has no {TRAIN_CONFIG_FILE}: it is not a training checkpoint")
    data = files.read_json(files.member(out, TRAIN_CONFIG_FILE))
    known = {f.name for f in dataclasses.fields(TrainConfig)} | {"source"}
    if not isinstance(data, dict) or set(data) - known:
        extra = sorted(set(data) - known) if isinstance(data, dict) else "not a JSON object"
        raise CheckpointError(f"{path}: unexpected content ({extra}); restore the file")
    source = data.pop("source", None)
    try:
        return TrainConfig(**data), source
    except ConfigError as e:
        raise CheckpointError(f"{path}: {e}") from None


def check_steps_left(out: str | Path, step: int, max_steps: int) -> None:
    """A resumed run must have steps to train: the saved `step` below `max_steps`."""
    if step >= max_steps:
        raise CheckpointError(
            f"the run in {out} is at step {step} and max_steps is {max_steps}: nothing to train; "
            f"give {param('TrainConfig.override', 'max_steps=N')} with N > {step} to continue "
            f"it, or start a new {param('out')}"
        )


# Each task's training recipe: TrainConfig values that `glassformer train TASK` starts from
# (--set changes any of them). translate: the recipe measured best per step by
# benchmarks/translate_quality_per_step.py (docs/benchmarks.md, "Quality"); its peak lr 2e-3
# (the peer script's is 1e-3) lowered the validation loss after 600 steps by 17%, and stays below
# the 2.8e-3 peak of Vaswani et al.'s schedule (d^-0.5 · warmup^-0.5 for d 256, 500 warmup steps).
# lm: the char-lm preset's peak learning rate, the best of 1e-3 (nanoGPT's), 2e-3 and 3e-3
# after 2000 steps (validation loss over every 64-character window 1.911, 1.810, 1.781;
# benchmarks/char_lm_valid_loss.py), with min_lr a tenth of it as nanoGPT sets it.
TASK_DEFAULTS: dict[str, dict] = {
    "lm": dict(lr=3e-3, min_lr=3e-4),
    "translate": dict(
        max_tokens=5000,
        lr=2e-3,
        min_lr=2e-5,
        warmup_steps=500,
        beta2=0.98,
        weight_decay=0.01,
        dropout=0.1,
        label_smoothing=0.1,
        init="xavier",
    ),
    "classify": {},
}


def lr_at(step: int, t: TrainConfig, time_fraction: float = 0.0) -> float:
    """Linear warmup to lr over warmup_steps, then cosine decay to min_lr at max_steps, or at the
    end of the time budget (`time_fraction` of max_minutes used), whichever comes first."""
    if step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    progress = min(
        1.0, max((step - t.warmup_steps) / max(1, t.max_steps - t.warmup_steps), time_fraction)
    )
    return t.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (t.lr - t.min_lr)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay only the matrices of linear layers: not biases, LayerNorms or embeddings."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        is_embedding = name.endswith("_embed.weight")  # tok_, pos_ and (BERT) type_embed
        (decay if p.ndim >= 2 and not is_embedding else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def make_optimizer(model: torch.nn.Module, tcfg: TrainConfig, device: str = "cpu"):
    """AdamW over `param_groups`. Fused (one kernel over every tensor) on CPU and CUDA: the same
    update as the per-tensor loop torch otherwise runs on CPU, in ~1/4 of its time, which at this
    project's model sizes is several percent of a training step."""
    fused = device.split(":")[0] in ("cpu", "cuda")
    groups = param_groups(model, tcfg.weight_decay)
    return torch.optim.AdamW(
        groups, lr=tcfg.lr, betas=(tcfg.beta1, tcfg.beta2), fused=fused or None
    )


def bf16_supported(device: str) -> bool:
    """bf16 autocast only where the hardware computes in bf16 natively (CUDA, or a CPU with
    AVX-512 BF16 / AMX); elsewhere it is emulated and many times slower than fp32."""
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


# -- distributed --------------------------------------------------------------------------------


def dist_info() -> tuple[int, int]:
    """(rank, world size) under torchrun, (0, 1) otherwise."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def _setup_distributed(device: str) -> tuple[int, int]:
    rank, world = dist_info()
    if world > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        torch.distributed.init_process_group(backend)
    return rank, world


def _all_mean(x: float, world: int) -> float:
    if world == 1:
        return x
    t = torch.tensor([x], dtype=torch.float64)
    torch.distributed.all_reduce(t)
    return float(t.item()) / world


# -- the loop -----------------------------------------------------------------------------------


@dataclass
class Event:
    """What the loop reports to its callback."""

    kind: str  # "start" (after any resume), "step", "eval" or "save"
    step: int
    max_steps: int
    metrics: dict


def train(
    cfg: Config,
    tcfg: TrainConfig,
    task: Task,
    out: str | Path,
    resume: bool = False,
    init_params: dict | None = None,
    device: str = "cpu",
    callback: Callable[[Event], None] | None = None,
    evaluate: Callable | None = None,
    stop_at: int | None = None,
) -> list[dict]:
    """Train `cfg` on `task`, writing checkpoints to directory `out`; return the log rows.

    resume: continue from the checkpoint in `out` (model, optimizer, step, RNG, data position).
    init_params: start from these weights (fine-tuning) instead of a seeded initialisation.
    evaluate(model, task, tcfg, final) -> dict of metrics; defaults to `default_evaluate`.
    stop_at: stop (with a checkpoint) after this step, as if interrupted; the schedule still runs
        to max_steps, so a later `resume` continues the same run.
    The output folder's lock is held for the whole run (files.locked; under torchrun by rank 0,
    the one that writes): a second writer of `out` is refused, naming this one.
    """
    out = Path(out)
    lock = files.locked(out, "glassformer train") if dist_info()[0] == 0 else None
    with lock or contextlib.nullcontext():
        return _train(
            cfg, tcfg, task, out, resume, init_params, device, callback, evaluate, stop_at
        )


def _train(cfg, tcfg, task, out, resume, init_params, device, callback, evaluate, stop_at):
    """The run `train` describes, inside its lock: set up, resume, then step until done."""
    callback = callback or (lambda event: None)
    evaluate = evaluate or default_evaluate
    files.check_writable(out)  # before the first step, not at the first save
    rank, world = _setup_distributed(device)
    model = _new_model(cfg, tcfg, init_params, device)
    opt = make_optimizer(model, tcfg, device)
    step, rows, snapshots = 0, [], {}
    if resume:
        step, rows, snapshots = _resumed(out, cfg, tcfg, model, opt, task)
    elapsed = rows[-1].get("elapsed_s", 0.0) if rows else 0.0  # wall time of earlier runs
    recorder = _recorder(out, cfg, tcfg, task, resume) if rank == 0 else None
    if recorder and recorder.due(step):  # step 0: the untrained model
        recorder.record(step, to_params(model), {"step": step})
    ddp = model
    if world > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    use_bf16 = tcfg.bf16 and bf16_supported(device)
    t_last = time.perf_counter()
    t_start, budget = t_last, tcfg.max_minutes * 60.0
    callback(Event("start", step, tcfg.max_steps, {}))
    signals = StopSignals()
    with signals:
        while step < tcfg.max_steps:
            used = (elapsed + time.perf_counter() - t_start) / budget if budget else 0.0
            lr = lr_at(step, tcfg, used)
            total, norm, tokens = _update(
                model, ddp, opt, task, tcfg, lr, device, use_bf16, rank, world
            )
            step += 1
            now = time.perf_counter()
            row = {
                "step": step,
                "loss": _all_mean(total, world),
                "lr": lr,
                "grad_norm": norm,
                "clipped": int(tcfg.grad_clip > 0 and norm > tcfg.grad_clip),
                "tokens_per_s": tokens / max(now - t_last, 1e-9),
                "elapsed_s": elapsed + now - t_start,
            }
            t_last = now
            callback(Event("step", step, tcfg.max_steps, row))
            out_of_time = budget > 0 and elapsed + now - t_start >= budget
            final = step == tcfg.max_steps or out_of_time
            evaluating = step % tcfg.eval_interval == 0 or final
            if evaluating:
                model.eval()
                with torch.no_grad():
                    row |= evaluate(model, task, tcfg, final)
                callback(Event("eval", step, tcfg.max_steps, row))
            if recorder and recorder.due(step):
                recorder.record(step, to_params(model), row)
            rows.append(row)
            stopping = stop_at is not None and step >= stop_at
            stopping = stopping or _any(signals.received is not None, world)
            if (evaluating or stopping) and rank == 0:
                if tcfg.keep_snapshots and evaluating:
                    snapshots = _kept_snapshots(snapshots, step, model, tcfg.keep_snapshots)
                views = recorder.file_bytes() if recorder else None
                save_checkpoint(out, cfg, tcfg, model, opt, task, step, rows, snapshots, views)
                callback(Event("save", step, tcfg.max_steps, {"path": str(out)}))
            if world > 1:
                torch.distributed.barrier()
            if stopping or out_of_time:
                break
    if signals.received is not None:
        raise Interrupted(
            signals.received,
            f"interrupted at step {step}; the checkpoint in {out} holds every step so far",
        )
    return rows


def _new_model(cfg, tcfg, init_params, device) -> Transformer:
    """The model to train, seeded: drawn once by the chosen scheme, or init_params (fine-tuning)."""
    if tcfg.threads:
        torch.set_num_threads(tcfg.threads)
    torch.manual_seed(tcfg.seed)
    random.seed(tcfg.seed)
    if init_params is None:  # a new model, its weights drawn once, by the chosen scheme
        model = Transformer(cfg, dropout=tcfg.dropout, init=None)
        init_weights(model, cfg, tcfg.init, tcfg.embed_std)
    else:  # fine-tuning
        # copy: training must not write into the caller's arrays (from_params shares them)
        model = from_params(cfg, init_params, dtype=torch.float32, dropout=tcfg.dropout, copy=True)
    model.to(device)
    return model


def _resumed(out, cfg, tcfg, model, opt, task) -> tuple[int, list[dict], dict]:
    """(step, log rows, kept snapshots) of the checkpoint in `out`, restored into model and opt."""
    started = saved_train_config(out)  # the max_steps the state's step must be within
    step, rows = restore(out, cfg, model, opt, task, max_step=started.max_steps)
    check_steps_left(out, step, tcfg.max_steps)
    kept = weights.snapshot_steps(out)[-tcfg.keep_snapshots :] if tcfg.keep_snapshots else []
    snapshots = {s: weights.load_snapshot(out, cfg, s) for s in kept}
    return step, rows, snapshots


def _recorder(out, cfg, tcfg, task, resume: bool) -> views_.Recorder | None:
    """The time-lapse recorder the run asks for (continuing a resumed run's views), or None."""
    if not tcfg.snapshot_views:
        return None
    earlier = views_.resumed(out, tcfg.snapshot_views) if resume else None
    return views_.Recorder(
        cfg, task.tokenizer, tcfg.snapshot_views, tcfg.views_interval, task.labels, earlier
    )


def _update(model, ddp, opt, task, tcfg, lr, device, use_bf16, rank, world):
    """One optimizer update at `lr` over grad_accum micro-batches: (loss, grad norm, tokens)."""
    model.train()
    for group in opt.param_groups:
        group["lr"] = lr
    total, tokens = 0.0, 0
    for micro in range(tcfg.grad_accum):
        batch = _next_batch(task.train, task.kind)
        shard = _shard(batch, rank, world)
        sync = micro == tcfg.grad_accum - 1 or world == 1
        ctx = ddp.no_sync() if (world > 1 and not sync) else contextlib.nullcontext()
        with (
            ctx,
            torch.autocast(
                "cuda" if device.startswith("cuda") else "cpu",
                dtype=torch.bfloat16,
                enabled=use_bf16,
            ),
        ):
            loss, n = batch_loss(ddp, batch, task.kind, tcfg.label_smoothing, shard)
            (loss / tcfg.grad_accum).backward()
        total += loss.item() / tcfg.grad_accum
        tokens += n * world
    norm = float("nan")
    if tcfg.grad_clip > 0:
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_clip))
    opt.step()
    opt.zero_grad(set_to_none=True)
    return total, norm, tokens


def _kept_snapshots(snapshots: dict, step: int, model, keep: int) -> dict:
    """The snapshots with this step's weights added, only the last `keep` of them kept."""
    snapshots[step] = to_params(model)
    return {s: snapshots[s] for s in sorted(snapshots)[-keep:]}


class StopSignals:
    """While active, the first SIGINT or SIGTERM only sets `received` (the loop then saves a
    checkpoint at the end of the current step and stops); a second one aborts at once. Handlers
    are installed only in the main thread and restored on exit. A stop that arrived earlier and
    was not acted on (the command line's gate, `interrupts`, held it, or its raise was swallowed)
    is taken over on entry: raised there, before any step is trained or anything written."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._old: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.received is not None:  # the second signal: stop now, the last save stands
            raise interrupts.Stopped(signum)
        self.received = signum

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
            earlier = interrupts.take()  # after ours are in: no signal falls between the two
            if earlier is not None:
                self.__exit__()
                raise interrupts.Stopped(earlier)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)
        self._old = {}


def _any(flag: bool, world: int) -> bool:
    """True on every process when it is True on one (a stop signal reaches each differently)."""
    if world == 1:
        return flag
    t = torch.tensor([float(flag)])
    torch.distributed.all_reduce(t)
    return bool(t.item() > 0)


def _shard(batch: dict, rank: int, world: int):
    """This process's rows of the global batch (contiguous equal slices)."""
    if world == 1:
        return slice(None)
    n = next(v for v in batch.values() if isinstance(v, np.ndarray)).shape[0]
    if n % world:
        raise ConfigError(f"the global batch of {n} rows does not split over {world} processes")
    per = n // world
    return slice(rank * per, (rank + 1) * per)
