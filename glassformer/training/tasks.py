"""Training jobs: the data of a task, how a batch becomes a loss, and how a model is evaluated.

`prepare_task` reads the corpora, builds (or reuses) a tokenizer and makes the batch sources of
one of the three tasks (lm, translate, classify); `batch_loss` is the cross-entropy of one batch
for each task; `default_evaluate` the validation metrics the training loop logs (loss, perplexity,
BLEU and chrF on free-running translations, accuracy).

Deliberately not here: the optimisation loop and checkpoints (`train.py`), decoding (`translating`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from glassformer.config import Config
from glassformer.errors import ConfigError, param
from glassformer.translating import translate

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
    labels: list[str] | None = None  # classify: the class names, saved with the checkpoint
    source: dict | None = None  # what data it was made from, recorded for --resume (train.py)


def batch_loss(model, batch, kind: str, label_smoothing: float = 0.0, rows=slice(None)):
    """Mean cross-entropy of one micro-batch (with `label_smoothing`, every task) and its number
    of counted tokens (or examples). The loss is computed in at least float32: bf16 logits are
    upcast, float64 ones kept (tests/test_train_oracle.py compares a step in float64)."""
    t = _tensors(model, batch, rows)
    if kind == "lm":
        logits = _upcast(model(t["x"]))  # (B, T, V)
        loss = F.cross_entropy(
            logits.flatten(0, 1), t["y"].flatten(), label_smoothing=label_smoothing
        )
        return loss, t["y"].numel()
    if kind == "translate":
        logits = model(
            t["tgt_in"], valid=t["tgt_valid"], src_ids=t["src"], src_valid=t["src_valid"]
        )  # (B, T, V)
        labels = t["tgt_out"].masked_fill(~t["tgt_valid"], -100)
        loss = F.cross_entropy(
            _upcast(logits).flatten(0, 1),
            labels.flatten(),
            ignore_index=-100,
            label_smoothing=label_smoothing,
        )
        return loss, int(t["tgt_valid"].sum())
    logits = _upcast(model(t["x"], valid=t["valid"]))  # (B, n_classes)
    return F.cross_entropy(logits, t["y"], label_smoothing=label_smoothing), t["x"].numel()


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


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


# -- evaluation ---------------------------------------------------------------------------------


def default_evaluate(model, task: Task, tcfg, final: bool) -> dict:
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


# -- preparing a job from corpora ---------------------------------------------------------------


def prepare_task(
    kind: str,
    cfg: Config,
    tcfg,  # a train.TrainConfig (batch sizes, max_tokens, seed)
    data: str,
    valid: str | None = None,
    tokenizer=None,
    tokenizer_kind: str | None = None,
    vocab_size: int = 8000,
) -> tuple[Config, Task]:
    """Read the corpora, build (or reuse) a tokenizer, and make the batch sources.

    lm: a text file (first 90% train, last 10% validation), char tokenizer by default.
    translate: TSV pairs source<TAB>target (+ a validation TSV), joint sp-bpe by default.
    classify: language identification from TSV pairs (column 1 = class 0, column 2 = class 1).
    tokenizer_kind overrides the default: char, word, bpe (byte-level) or sp-bpe
    (SentencePiece-style); vocab_size is its size (char: every character seen).
    Returns the config with vocab_size (and max_len for lm) fitted to the data.
    """
    makers = {"lm": _lm_task, "translate": _translate_task, "classify": _classify_task}
    if kind not in makers:
        raise ConfigError(f"unknown task {kind!r}; choose lm, translate or classify")

    def tokenizer_for(texts, default):
        return tokenizer or _train_tokenizer(texts, tokenizer_kind or default, vocab_size)

    cfg, task = makers[kind](cfg, tcfg, data, valid, tokenizer_for)
    if cfg.vocab_size != task.tokenizer.vocab_size:
        cfg = cfg.override(f"vocab_size={task.tokenizer.vocab_size}")
    return cfg, task


def source(name, content) -> dict:
    """One corpus as a run records it (Task.source, in train_config.json) for --resume to compare:
    its name (a shipped or generated corpus's, else the file's absolute path) and the sha256 of
    what was read (the text, or the pairs one a line): a file moved is still itself, a file
    edited in place is not."""
    from glassformer import data as D

    named = isinstance(name, str) and (name in D.SHIPPED or name in D.GENERATED)
    text = content if isinstance(content, str) else "".join(f"{a}\t{b}\n" for a, b in content)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return {"name": name if named else str(Path(name).resolve()), "sha256": digest}


def _train_tokenizer(texts, kind: str, vocab_size: int):
    from glassformer import tokenizer as T

    if kind == "char":
        return T.CharTokenizer.train(texts)
    if kind == "word":
        return T.WordTokenizer.train(texts, max_size=vocab_size)
    if kind == "sp-bpe":
        return T.MetaspaceBPETokenizer.train(texts, vocab_size=vocab_size)
    return T.BPETokenizer.train(texts, vocab_size=vocab_size)


def _lm_task(cfg: Config, tcfg, data: str, valid, tokenizer_for) -> tuple[Config, Task]:
    from glassformer import data as D

    text = D.read_text(data)
    train_text, valid_text = D.split_text(text, 0.9)
    tok = tokenizer_for([text], "char")
    train_ids = np.array(tok.encode(train_text), dtype=np.int64)
    valid_ids = np.array(tok.encode(valid_text), dtype=np.int64)
    if tcfg.block_size > cfg.max_len:
        raise ConfigError(
            f"block_size {tcfg.block_size} exceeds the model's max_len "
            f"{cfg.max_len}; lower block_size or raise max_len"
        )
    need = tcfg.block_size + 1  # one window and the token after it
    for part, ids, tenths in (("training", train_ids, 9), ("validation", valid_ids, 1)):
        if len(ids) < need:  # (the split is by characters: tokens are about in proportion)
            raise D.DataError(
                f"the {part} part of {param('data')} (its "
                f"{'first 90%' if tenths == 9 else 'last 10%'}) "
                f"gives {len(ids)} tokens, and one batch needs a window of block_size + 1 = "
                f"{need}: give {param('data')} of at least about {math.ceil(need * 10 / tenths)} "
                f"tokens ({len(train_ids) + len(valid_ids)} now), or a smaller "
                f"{param('TrainConfig.override', text='block_size')}"
            )
    task = Task(
        "lm",
        D.LMBatches(train_ids, tcfg.block_size, tcfg.batch_size, tcfg.seed),
        D.LMBatches(valid_ids, tcfg.block_size, tcfg.batch_size, 0),
        tok,
        valid_ids=valid_ids,
        source={"data": source(data, text), "valid": None},
    )
    return cfg, task


def _translate_task(cfg: Config, tcfg, data: str, valid, tokenizer_for) -> tuple[Config, Task]:
    from glassformer import data as D

    pairs = D.read_pairs(data)
    valid_pairs = D.read_pairs(valid) if valid else pairs[-500:]
    tok = tokenizer_for([t for p in pairs for t in p], "sp-bpe")
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
    noise = {}  # other forms of the training pairs, shown at random (TrainConfig)
    if tcfg.lowercase_prob or tcfg.no_end_prob:
        forms, weights = D.pair_forms(pairs, tcfg.lowercase_prob, tcfg.no_end_prob)
        alternates = [(ids([s for s, _ in f]), tids([t for _, t in f])) for f in forms]
        noise = dict(alternates=alternates, weights=weights)
    task = Task(
        "translate",
        D.PairBatches(src, tgt, seed=tcfg.seed, **common, **noise),
        D.PairBatches(vsrc, vtgt, seed=0, shuffle=False, **common),
        tok,
        valid_pairs=valid_pairs,
        source={"data": source(data, pairs), "valid": valid and source(valid, valid_pairs)},
    )
    return cfg, task


def _classify_task(cfg: Config, tcfg, data: str, valid, tokenizer_for) -> tuple[Config, Task]:
    from glassformer import data as D

    pairs = D.read_pairs(data)
    valid_pairs = D.read_pairs(valid) if valid else pairs[-500:]
    train_ex, valid_ex = D.language_id(pairs), D.language_id(valid_pairs)
    for flag, ex in (
        (param("data"), train_ex),
        (param("valid") if valid else f"the last 500 pairs of {param('data')}", valid_ex),
    ):
        if not ex:
            raise D.DataError(
                f"{flag} gives no sentence to classify: a sentence found on both sides of a pair "
                "('No.') has no one language and is left out, and these pairs hold only such; "
                "give at least one pair whose sides differ"
            )
    tok = tokenizer_for([s for s, _ in train_ex], "bpe")
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
        "classify",
        batches(train_ex, tcfg.seed, True),
        batches(valid_ex, 0, False),
        tok,
        labels=list(D.LANGUAGES),
        source={"data": source(data, pairs), "valid": valid and source(valid, valid_pairs)},
    )
    return (cfg if cfg.n_classes else cfg.override("n_classes=2")), task
