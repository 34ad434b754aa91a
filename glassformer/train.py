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
import csv
import dataclasses
import io
import json
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from glassformer import weights
from glassformer.config import Config, parse_assignments
from glassformer.errors import CheckpointError, ConfigError
from glassformer.inference import translate
from glassformer.torch_model import Transformer, from_params, to_params

STATE_FILE = "training_state.pt"
TRAIN_CONFIG_FILE = "train_config.json"
LOG_FILE = "log.csv"
PLOT_FILE = "loss.png"


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
    max_minutes: float = 0.0  # > 0: a wall-clock budget; the schedule decays by time or steps
    seed: int = 1337
    threads: int = 0  # torch threads (0: torch's default)

    def __post_init__(self) -> None:
        for name in (
            "max_steps",
            "batch_size",
            "block_size",
            "max_tokens",
            "grad_accum",
            "eval_interval",
            "eval_iters",
            "eval_sentences",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.dropout < 1 or not 0 <= self.label_smoothing < 1:
            raise ConfigError("dropout and label_smoothing must be in [0, 1)")
        if self.lr <= 0 or self.min_lr < 0 or self.min_lr > self.lr:
            raise ConfigError(
                f"need 0 <= min_lr <= lr and lr > 0, got lr={self.lr}, min_lr={self.min_lr}"
            )

    def override(self, *assignments: str) -> TrainConfig:
        return dataclasses.replace(self, **parse_assignments(TrainConfig, assignments))


# Each task's training recipe: TrainConfig values that `glassformer train TASK` starts from
# (--set changes any of them). translate: the recipe measured best per step by
# benchmarks/translate_quality_per_step.py (README, "Training").
TASK_DEFAULTS: dict[str, dict] = {
    "lm": {},
    "translate": dict(
        max_tokens=5000,
        lr=1e-3,
        min_lr=2e-5,
        warmup_steps=500,
        beta2=0.98,
        weight_decay=0.01,
        dropout=0.1,
        label_smoothing=0.1,
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
        is_embedding = "tok_embed" in name or "pos_embed" in name
        (decay if p.ndim >= 2 and not is_embedding else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


# -- tasks: how a batch becomes a loss ----------------------------------------------------------


@dataclass
class Task:
    """The data of one training job: `train` and `valid` batch sources plus what evaluation
    needs (validation pairs for BLEU; the tokenizer)."""

    kind: str
    train: object  # LMBatches | PairBatches | ClassBatches (glassformer.data)
    valid: object
    tokenizer: object
    valid_pairs: list[tuple[str, str]] | None = None
    valid_ids: np.ndarray | None = None  # lm: the validation token stream


def batch_loss(model, batch, kind: str, label_smoothing: float = 0.0, rows=slice(None)):
    """Mean cross-entropy of one micro-batch and its number of counted tokens (or examples)."""
    t = _tensors(model, batch, rows)
    if kind == "lm":
        logits = model(t["x"])  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), t["y"].flatten()), t["y"].numel()
    if kind == "translate":
        logits = model(
            t["tgt_in"], valid=t["tgt_valid"], src_ids=t["src"], src_valid=t["src_valid"]
        )  # (B, T, V)
        labels = t["tgt_out"].masked_fill(~t["tgt_valid"], -100)
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(),
            labels.flatten(),
            ignore_index=-100,
            label_smoothing=label_smoothing,
        )
        return loss, int(t["tgt_valid"].sum())
    logits = model(t["x"], valid=t["valid"])  # (B, n_classes)
    return F.cross_entropy(logits.float(), t["y"]), t["x"].numel()


def _tensors(model, batch: dict, rows=slice(None)) -> dict:
    """The batch's arrays as tensors on the model's device."""
    device = next(model.parameters()).device
    return {
        k: torch.as_tensor(v[rows]).to(device, non_blocking=True)
        for k, v in batch.items()
        if isinstance(v, np.ndarray)
    }


def _next_batch(source, kind: str) -> dict:
    """A batch as a dict of arrays (LMBatches yields an (x, y) pair)."""
    batch = source.next()
    return {"x": batch[0], "y": batch[1]} if isinstance(batch, tuple) else batch


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

    kind: str  # "step", "eval" or "save"
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
    """
    callback = callback or (lambda event: None)
    evaluate = evaluate or default_evaluate
    out = Path(out)
    rank, world = _setup_distributed(device)
    if tcfg.threads:
        torch.set_num_threads(tcfg.threads)
    torch.manual_seed(tcfg.seed)
    random.seed(tcfg.seed)
    model = Transformer(cfg, dropout=tcfg.dropout)
    if init_params is not None:
        model = from_params(cfg, init_params, dtype=torch.float32, dropout=tcfg.dropout)
    model.to(device)
    opt = torch.optim.AdamW(
        param_groups(model, tcfg.weight_decay), lr=tcfg.lr, betas=(tcfg.beta1, tcfg.beta2)
    )
    step, rows = 0, []
    if resume:
        step, rows = _restore(out, cfg, model, opt, task)
    elapsed = rows[-1].get("elapsed_s", 0.0) if rows else 0.0  # wall time of earlier runs
    ddp = model
    if world > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    use_bf16 = tcfg.bf16 and bf16_supported(device)
    t_last, tokens = time.perf_counter(), 0
    t_start, budget = t_last, tcfg.max_minutes * 60.0
    while step < tcfg.max_steps:
        model.train()
        used = (elapsed + time.perf_counter() - t_start) / budget if budget else 0.0
        lr = lr_at(step, tcfg, used)
        for group in opt.param_groups:
            group["lr"] = lr
        total = 0.0
        for micro in range(tcfg.grad_accum):
            batch = _next_batch(task.train, task.kind)
            rows_ = _shard(batch, rank, world)
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
                loss, n = batch_loss(ddp, batch, task.kind, tcfg.label_smoothing, rows_)
                (loss / tcfg.grad_accum).backward()
            total += loss.item() / tcfg.grad_accum
            tokens += n * world
        norm = float("nan")
        if tcfg.grad_clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_clip))
        opt.step()
        opt.zero_grad(set_to_none=True)
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
        t_last, tokens = now, 0
        callback(Event("step", step, tcfg.max_steps, row))
        out_of_time = budget > 0 and elapsed + now - t_start >= budget
        final = step == tcfg.max_steps or out_of_time
        if step % tcfg.eval_interval == 0 or final:
            model.eval()
            with torch.no_grad():
                row |= evaluate(model, task, tcfg, final)
            callback(Event("eval", step, tcfg.max_steps, row))
        rows.append(row)
        stopping = stop_at is not None and step >= stop_at
        if (step % tcfg.eval_interval == 0 or final or stopping) and rank == 0:
            save_checkpoint(out, cfg, tcfg, model, opt, task, step, rows)
            callback(Event("save", step, tcfg.max_steps, {"path": str(out)}))
        if world > 1:
            torch.distributed.barrier()
        if stopping or out_of_time:
            break
    return rows


def _shard(batch: dict, rank: int, world: int):
    """This process's rows of the global batch (contiguous equal slices)."""
    if world == 1:
        return slice(None)
    n = next(v for v in batch.values() if isinstance(v, np.ndarray)).shape[0]
    if n % world:
        raise ConfigError(f"the global batch of {n} rows does not split over {world} processes")
    per = n // world
    return slice(rank * per, (rank + 1) * per)


# -- evaluation ---------------------------------------------------------------------------------


def default_evaluate(model, task: Task, tcfg: TrainConfig, final: bool) -> dict:
    """Validation metrics: loss and perplexity (lm); loss, BLEU and chrF on greedily decoded
    sentences (translate); loss and accuracy (classify)."""
    from glassformer import metrics

    if task.kind == "lm":
        from glassformer.data import LMBatches

        src = task.valid
        val = LMBatches(task.valid_ids, src.block_size, src.batch_size, seed=0)
        losses = [
            batch_loss(model, _next_batch(val, "lm"), "lm")[0].item()
            for _ in range(tcfg.eval_iters)
        ]
        loss = float(np.mean(losses))
        return {"val_loss": loss, "val_ppl": metrics.perplexity(loss)}
    if task.kind == "classify":
        losses, pred, gold = [], [], []
        for batch in task.valid.epoch_batches():
            t = _tensors(model, batch)
            logits = model(t["x"], valid=t["valid"])
            losses.append(F.cross_entropy(logits.float(), t["y"]).item())
            pred += logits.argmax(-1).tolist()
            gold += t["y"].tolist()
        return {"val_loss": float(np.mean(losses)), "val_acc": metrics.accuracy(pred, gold)}
    loss_sum, n_tok = 0.0, 0
    for batch in task.valid.epoch_batches():
        loss, n = batch_loss(model, batch, "translate")
        loss_sum, n_tok = loss_sum + loss.item() * n, n_tok + n
    out = {"val_loss": loss_sum / max(n_tok, 1)}
    pairs = task.valid_pairs if final else task.valid_pairs[: tcfg.eval_sentences]
    hyps = translate(model, task.tokenizer, [s for s, _ in pairs])
    scores = metrics.translation_scores(hyps, [t for _, t in pairs])
    return out | {"bleu": scores.bleu, "chrf": scores.chrf, "bleu_signature": scores.bleu_signature}


# -- checkpoints --------------------------------------------------------------------------------


def save_checkpoint(
    out: Path, cfg: Config, tcfg: TrainConfig, model, opt, task: Task, step: int, rows: list[dict]
) -> None:
    """Model + tokenizer + training state + logs, as one atomically replaced directory."""
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
    weights.save(out, cfg, to_params(model), tokenizer=task.tokenizer, dtype="float32", extra=extra)


def _restore(out: Path, cfg: Config, model, opt, task: Task) -> tuple[int, list[dict]]:
    saved_cfg, params, _ = weights.load(out)
    if saved_cfg != cfg:
        raise CheckpointError(
            f"{out} was trained with a different config; resume with the same "
            "--preset/--set, or start a new output directory"
        )
    path = out / STATE_FILE
    if not path.is_file():
        raise CheckpointError(f"{out} has no {STATE_FILE}: it is not a training checkpoint")
    try:
        state = torch.load(path, weights_only=True)  # never unpickle arbitrary objects
    except Exception as e:  # noqa: BLE001 - any unreadable state is one clear error
        raise CheckpointError(f"{path} is unreadable ({type(e).__name__}); restore it") from None
    with torch.no_grad():
        for name, p in model.state_dict().items():
            p.copy_(torch.as_tensor(params[name]))
    opt.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    py = random.getstate()
    random.setstate((py[0], tuple(state["python_rng"]), py[2]))
    task.train.set_state(json.loads(state["data"]))
    return int(state["step"]), json.loads(state["log"])


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


# -- preparing a job from corpora ---------------------------------------------------------------


def prepare_task(
    kind: str,
    cfg: Config,
    tcfg: TrainConfig,
    data: str,
    valid: str | None = None,
    tokenizer=None,
    tokenizer_kind: str | None = None,
    vocab_size: int = 8000,
) -> tuple[Config, Task]:
    """Read the corpora, build (or reuse) a tokenizer, and make the batch sources.

    lm: a text file (first 90% train, last 10% validation), char tokenizer by default.
    translate: TSV pairs source<TAB>target (+ a validation TSV), joint BPE by default.
    classify: language identification from TSV pairs (column 1 = class 0, column 2 = class 1).
    tokenizer_kind overrides the default: char, word, bpe (byte-level) or sp-bpe
    (SentencePiece-style); vocab_size is its size (char: every character seen).
    Returns the config with vocab_size (and max_len for lm) fitted to the data.
    """
    from glassformer import data as D
    from glassformer import tokenizer as T

    def make_tokenizer(texts, default):
        kind_ = tokenizer_kind or default
        if kind_ == "char":
            return T.CharTokenizer.train(texts)
        if kind_ == "word":
            return T.WordTokenizer.train(texts, max_size=vocab_size)
        if kind_ == "sp-bpe":
            return T.MetaspaceBPETokenizer.train(texts, vocab_size=vocab_size)
        return T.BPETokenizer.train(texts, vocab_size=vocab_size)

    if kind == "lm":
        text = D.read_text(data)
        train_text, valid_text = D.split_text(text, 0.9)
        tok = tokenizer or make_tokenizer([text], "char")
        train_ids = np.array(tok.encode(train_text), dtype=np.int64)
        valid_ids = np.array(tok.encode(valid_text), dtype=np.int64)
        if tcfg.block_size > cfg.max_len:
            raise ConfigError(
                f"block_size {tcfg.block_size} exceeds the model's max_len "
                f"{cfg.max_len}; lower block_size or raise max_len"
            )
        task = Task(
            "lm",
            D.LMBatches(train_ids, tcfg.block_size, tcfg.batch_size, tcfg.seed),
            D.LMBatches(valid_ids, tcfg.block_size, tcfg.batch_size, 0),
            tok,
            valid_ids=valid_ids,
        )
    elif kind == "translate":
        pairs = D.read_pairs(data)
        valid_pairs = D.read_pairs(valid) if valid else pairs[-500:]
        tok = tokenizer or make_tokenizer([t for p in pairs for t in p], "bpe")
        L = cfg.max_len

        def ids(side):
            return [tok.encode(s)[:L] for s in side]

        def tids(side):
            return [tok.encode(s)[: L - 1] for s in side]

        src, tgt = ids([s for s, _ in pairs]), tids([t for _, t in pairs])
        vsrc, vtgt = ids([s for s, _ in valid_pairs]), tids([t for _, t in valid_pairs])
        common = dict(
            pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id, max_tokens=tcfg.max_tokens
        )
        task = Task(
            "translate",
            D.PairBatches(src, tgt, seed=tcfg.seed, **common),
            D.PairBatches(vsrc, vtgt, seed=0, shuffle=False, **common),
            tok,
            valid_pairs=valid_pairs,
        )
    elif kind == "classify":
        pairs = D.read_pairs(data)
        valid_pairs = D.read_pairs(valid) if valid else pairs[-500:]
        train_ex, valid_ex = D.language_id(pairs), D.language_id(valid_pairs)
        tok = tokenizer or make_tokenizer([s for s, _ in train_ex], "bpe")
        L = cfg.max_len

        def batches(ex, seed, shuffle):
            return D.ClassBatches(
                [tok.encode_for_model(s)[0][:L] or [tok.pad_id] for s, _ in ex],
                [y for _, y in ex],
                tok.pad_id,
                tcfg.batch_size,
                seed,
                shuffle=shuffle,
            )

        task = Task(
            "classify", batches(train_ex, tcfg.seed, True), batches(valid_ex, 0, False), tok
        )
        if not cfg.n_classes:
            cfg = cfg.override("n_classes=2")
    else:
        raise ConfigError(f"unknown task {kind!r}; choose lm, translate or classify")
    if cfg.vocab_size != tok.vocab_size:
        cfg = cfg.override(f"vocab_size={tok.vocab_size}")
    return cfg, task
