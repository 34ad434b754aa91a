"""Benchmark: translation quality per training step, glassformer vs a plain nn.Transformer script.

Both models are trained on exactly the same batches (one `PairBatches` plan from the same seed,
the same tokenizer, the same number of steps), then scored on all 1,000 `eng-spa-valid` pairs:
validation loss per target token (plain cross-entropy, no smoothing), nats per target word (a
figure that compares across tokenizers), and greedy sacreBLEU / chrF on free-running output.
glassformer's runs are also scored on the validation sources typed in a hurry (lower case, no
closing punctuation: how people type into a translator), against the same sources as written,
with case and closing punctuation ignored on both sides (`hurried_scores`); the training noise
options `lowercase_prob` / `no_end_prob` are meant to close that gap.

The peer is what a plain PyTorch script writes (the recipe of the "MT baseline" in
shared/reference/performance.md): one embedding shared by source, target and the tied output
projection, inputs scaled by sqrt(d) plus sinusoidal positions, `nn.Transformer` (pre-LN, 3+3
layers, d 256, 4 heads, FFN 1024, dropout 0.1), label smoothing 0.1, AdamW betas (0.9, 0.98),
weight decay 0.01 on every parameter, peak lr 1e-3 (`--set lr=` changes it for both), warmup
then cosine to 2% of the peak lr, clipping 1.0.

glassformer runs its own training loop (`glassformer.training.train.train`) with the `translator`
preset and its translate recipe; `--variant NAME:key=value,...` adds more glassformer runs that
change Config / TrainConfig fields (or `tokenizer=bpe|sp-bpe`), to measure which recipe choices
matter.

    .venv/bin/python benchmarks/translate_quality_per_step.py --steps 600
    .venv/bin/python benchmarks/translate_quality_per_step.py --score models/en-es --threads 1
    python benchmarks/translate_quality_per_step.py --device cuda --bf16 --steps 600 \\
        --variant old:share_embeddings=false,embed_scale=false,positions=learned
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glassformer import data as D  # noqa: E402
from glassformer import inference, metrics, translating, weights  # noqa: E402
from glassformer.config import Config, preset  # noqa: E402
from glassformer.torch_model import sinusoidal_table  # noqa: E402
from glassformer.training import train as T  # noqa: E402
from glassformer.training.tasks import prepare_task  # noqa: E402

# -- the peer: a plain nn.Transformer script ----------------------------------------------------


class PlainTranslator(nn.Module):
    """Shared embedding * sqrt(d) + sinusoids, nn.Transformer, tied output projection."""

    def __init__(self, V: int, C: int, H: int, L: int, F_: int, max_len: int, dropout: float):
        super().__init__()
        self.C = C
        self.embed = nn.Embedding(V, C)
        nn.init.normal_(self.embed.weight, 0.0, C**-0.5)
        self.register_buffer("pe", sinusoidal_table(max_len + 1, C).float(), persistent=False)
        self.core = nn.Transformer(
            d_model=C,
            nhead=H,
            num_encoder_layers=L,
            num_decoder_layers=L,
            dim_feedforward=F_,
            dropout=dropout,
            batch_first=True,
            norm_first=True,
        )
        self.drop = nn.Dropout(dropout)

    def _in(self, ids):
        return self.drop(self.embed(ids) * math.sqrt(self.C) + self.pe[: ids.shape[1]])

    def encode(self, src, src_valid):
        return self.core.encoder(self._in(src), src_key_padding_mask=~src_valid)

    def decode(self, memory, src_valid, tgt, tgt_valid=None, last_only=False):
        T_ = tgt.shape[1]
        causal = torch.ones(T_, T_, dtype=torch.bool, device=tgt.device).triu(1)  # True: masked
        h = self.core.decoder(
            self._in(tgt),
            memory,
            tgt_mask=causal,
            tgt_is_causal=True,
            tgt_key_padding_mask=None if tgt_valid is None else ~tgt_valid,
            memory_key_padding_mask=~src_valid,
        )
        if last_only:
            h = h[:, -1:]
        return h @ self.embed.weight.T  # (B, T, V)

    def forward(self, src, src_valid, tgt, tgt_valid):
        return self.decode(self.encode(src, src_valid), src_valid, tgt, tgt_valid)


def plain_lr(step: int, peak: float, warmup: int, total: int, floor: float) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + 0.5 * (1 + math.cos(math.pi * progress)) * (peak - floor)


def _t(batch: dict, device: str) -> dict:
    return {k: torch.as_tensor(v).to(device) for k, v in batch.items() if hasattr(v, "shape")}


def train_plain(cfg: Config, tcfg, batches, device: str, bf16: bool) -> nn.Module:
    torch.manual_seed(tcfg.seed)
    model = PlainTranslator(
        cfg.vocab_size,
        cfg.d_model,
        cfg.n_heads,
        cfg.n_encoder_layers,
        cfg.d_ff,
        cfg.max_len,
        tcfg.dropout,
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=tcfg.lr, betas=(0.9, 0.98), weight_decay=0.01)
    model.train()
    for step in range(tcfg.max_steps):
        for g in opt.param_groups:
            g["lr"] = plain_lr(step, tcfg.lr, tcfg.warmup_steps, tcfg.max_steps, 0.02 * tcfg.lr)
        b = _t(batches.next(), device)
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
            logits = model(b["src"], b["src_valid"], b["tgt_in"], b["tgt_valid"])
        labels = b["tgt_out"].masked_fill(~b["tgt_valid"], -100)
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, label_smoothing=0.1
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model.eval()


@torch.no_grad()
def plain_scores(model, task, device: str) -> tuple[float, list[str]]:
    """Validation loss per target token, and greedy translations of the validation sources."""
    loss_sum, n_tok = 0.0, 0
    for batch in task.valid.epoch_batches():
        b = _t(batch, device)
        logits = model(b["src"], b["src_valid"], b["tgt_in"], b["tgt_valid"])
        labels = b["tgt_out"].masked_fill(~b["tgt_valid"], -100)
        loss_sum += F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="sum"
        ).item()
        n_tok += int(b["tgt_valid"].sum())
    tok, L = task.tokenizer, model.pe.shape[0] - 1
    srcs = [tok.encode(s)[:L] for s, _ in task.valid_pairs]
    hyps = []
    for i in range(0, len(srcs), 100):
        chunk = srcs[i : i + 100]
        S = max(map(len, chunk))
        src = torch.full((len(chunk), S), tok.pad_id, dtype=torch.long, device=device)
        for k, s in enumerate(chunk):
            src[k, : len(s)] = torch.as_tensor(s)
        valid = src != tok.pad_id
        memory = model.encode(src, valid)
        out = torch.full((len(chunk), 1), tok.bos_id, dtype=torch.long, device=device)
        done = torch.zeros(len(chunk), dtype=torch.bool, device=device)
        for _ in range(L - 1):
            nxt = model.decode(memory, valid, out, last_only=True)[:, -1].argmax(-1)
            nxt = nxt.masked_fill(done, tok.pad_id)
            out = torch.cat([out, nxt[:, None]], 1)
            done |= nxt == tok.eos_id
            if bool(done.all()):
                break
        for row in out[:, 1:].tolist():
            ids = row[: row.index(tok.eos_id)] if tok.eos_id in row else row
            hyps.append(tok.decode([i for i in ids if i != tok.pad_id]))
    return loss_sum / n_tok, hyps


# -- runs ---------------------------------------------------------------------------------------


def _split(overrides: list[str]) -> tuple[list[str], list[str], str | None]:
    model_keys = {f.name for f in dataclasses.fields(Config)}
    model, train, tokenizer = [], [], None
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "tokenizer":
            tokenizer = value
        elif key in model_keys:
            model.append(item)
        else:
            train.append(item)
    return model, train, tokenizer


_TASKS: dict = {}
LIMIT = [0]


def _task(cfg: Config, tcfg, tokenizer: str, vocab: int):
    """One tokenizer and one set of batches per (tokenizer, max_tokens, seed): runs share them."""
    key = (tokenizer, vocab, tcfg.max_tokens, tcfg.seed, cfg.max_len)
    key += (tcfg.lowercase_prob, tcfg.no_end_prob)  # the training noise: other forms of pairs
    if key not in _TASKS:
        t0 = time.perf_counter()
        _TASKS[key] = prepare_task(
            "translate",
            cfg,
            tcfg,
            "eng-spa",
            "eng-spa-valid",
            tokenizer_kind=tokenizer,
            vocab_size=vocab,
        )
        print(f"  [{tokenizer} tokenizer and batches: {time.perf_counter() - t0:.0f} s]")
    fitted, task = _TASKS[key]
    fitted = cfg.override(f"vocab_size={fitted.vocab_size}")  # this run's config, fitted
    if LIMIT[0]:  # a quick look: score only the first pairs of the validation set
        pairs = task.valid_pairs[: LIMIT[0]]
        v = task.valid
        valid = D.PairBatches(
            v.src[: LIMIT[0]], v.tgt[: LIMIT[0]], v.pad_id, v.bos_id, v.eos_id, v.max_tokens,
            shuffle=False,
        )  # fmt: skip
        task = dataclasses.replace(task, valid=valid, valid_pairs=pairs)
    batches = D.PairBatches(
        task.train.src,
        task.train.tgt,
        task.train.pad_id,
        task.train.bos_id,
        task.train.eos_id,
        tcfg.max_tokens,
        seed=tcfg.seed,
        alternates=task.train.forms[1:],
        weights=task.train.weights[1:],
    )
    return fitted, dataclasses.replace(task, train=batches)


def _words(pairs) -> int:
    return sum(len(t.split()) for _, t in pairs)


def run_glassformer(name, overrides, args, out_dir) -> dict:
    model_sets, train_sets, tokenizer = _split(args.set + overrides)
    cfg = preset("translator").override(*model_sets)
    tcfg = T.TrainConfig(task="translate", **T.TASK_DEFAULTS["translate"]).override(
        f"max_steps={args.steps}",
        f"eval_interval={args.steps}",
        f"bf16={args.bf16}",
        f"seed={args.seed}",
        *([f"threads={args.threads}"] if args.threads else []),
        *train_sets,
    )
    cfg, task = _task(cfg, tcfg, tokenizer or args.tokenizer, args.vocab)
    t0 = time.perf_counter()
    rows = T.train(cfg, tcfg, task, out_dir / name, device=args.device)
    wall = time.perf_counter() - t0
    last = rows[-1]
    words = _words(task.valid_pairs)
    n_tok = sum(int(b["tgt_valid"].sum()) for b in task.valid.epoch_batches())
    return {
        "name": name,
        "overrides": overrides,
        "val_loss": last["val_loss"],
        "nats_per_word": last["val_loss"] * n_tok / words,
        "bleu": last["bleu"],
        "chrf": last["chrf"],
        "wall_s": wall,
        "params": sum(p.size for p in weights.load(out_dir / name)[1].values()),
    } | hurried_scores(out_dir / name, task.valid_pairs, args.device)


def hurried(text: str) -> str:
    """A sentence as people type it in a hurry: lower case, no closing punctuation."""
    return D.strip_end(text.lower())


def hurried_scores(path, pairs, device: str) -> dict:
    """Greedy BLEU / chrF of the validation sources as typed (`clean_*`) and typed in a hurry
    (`hurried_*`), both scored after `hurried()` on hypothesis and reference alike, so that case
    and closing punctuation never count (a model that copies the typing style is not penalised,
    one that keeps proper case is not either); `*_cut`: translations that reached max_len."""
    cfg, params, tok = weights.load(path)
    model = inference.torch_engine(cfg, params, "float32").to(device)
    refs = [hurried(t) for _, t in pairs]
    out = {}
    for name, srcs in (
        ("clean", [s for s, _ in pairs]),
        ("hurried", [hurried(s) for s, _ in pairs]),
    ):
        cut: set[int] = set()
        hyps = list(translating.translate_iter(model, tok, srcs, beam=1, cut=cut))
        scores = metrics.translation_scores([hurried(h) for h in hyps], refs)
        out |= {f"{name}_bleu": scores.bleu, f"{name}_chrf": scores.chrf, f"{name}_cut": len(cut)}
    return out


# The plain script's own peak learning rate (its recipe in shared/reference/performance.md),
# kept whatever glassformer's translate recipe says; `--set lr=...` changes both.
PLAIN_LR = 1e-3


def run_plain(args) -> dict:
    cfg = preset("translator")
    tcfg = T.TrainConfig(task="translate", **T.TASK_DEFAULTS["translate"]).override(
        f"max_steps={args.steps}", f"seed={args.seed}", f"lr={PLAIN_LR}"
    )
    _, train_sets, _ = _split(args.set)
    tcfg = tcfg.override(*[s for s in train_sets if s.split("=")[0] in ("lr", "warmup_steps")])
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg, task = _task(cfg, tcfg, args.tokenizer, args.vocab)
    t0 = time.perf_counter()
    model = train_plain(cfg, tcfg, task.train, args.device, args.bf16)
    wall = time.perf_counter() - t0
    val_loss, hyps = plain_scores(model, task, args.device)
    scores = metrics.translation_scores(hyps, [t for _, t in task.valid_pairs])
    n_tok = sum(int(b["tgt_valid"].sum()) for b in task.valid.epoch_batches())
    return {
        "name": "plain nn.Transformer",
        "overrides": [],
        "val_loss": val_loss,
        "nats_per_word": val_loss * n_tok / _words(task.valid_pairs),
        "bleu": scores.bleu,
        "chrf": scores.chrf,
        "wall_s": wall,
        "params": sum(p.numel() for p in model.parameters()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast for both (GPU)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--tokenizer", default="sp-bpe", help="tokenizer of the peer and default runs")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--set", action="append", default=[], help="key=value for every run")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:k=v,...",
        help="another glassformer run with these Config/TrainConfig changes",
    )
    ap.add_argument("--no-plain", action="store_true", help="skip the peer")
    ap.add_argument("--no-default", action="store_true", help="only the --variant runs")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--valid-limit", type=int, default=0, help="score only the first N pairs")
    ap.add_argument(
        "--score",
        metavar="CKPT",
        help="train nothing: score this translator on the validation sources as typed and typed "
        "in a hurry (greedy, case and closing punctuation ignored)",
    )
    args = ap.parse_args()
    LIMIT[0] = args.valid_limit
    if args.score:
        pairs = D.read_pairs("eng-spa-valid")[: args.valid_limit or None]
        if args.threads:
            torch.set_num_threads(args.threads)
        r = hurried_scores(args.score, pairs, args.device)
        print(
            f"{args.score} on {len(pairs)} eng-spa-valid pairs, greedy, case and closing "
            f"punctuation ignored: BLEU / chrF as typed {r['clean_bleu']:5.2f} / "
            f"{r['clean_chrf']:5.2f} ({r['clean_cut']} ran to max_len), typed in a hurry "
            f"{r['hurried_bleu']:5.2f} / {r['hurried_chrf']:5.2f} ({r['hurried_cut']} ran to "
            "max_len)"
        )
        return
    print(
        f"quality per step: {args.steps} steps, device {args.device}, bf16 {args.bf16}, "
        f"tokenizer {args.tokenizer} {args.vocab}, seed {args.seed}"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = ([] if args.no_default else [("glassformer", [])]) + [
            (v.partition(":")[0], [x for x in v.partition(":")[2].split(",") if x])
            for v in args.variant
        ]
        jobs = [] if args.no_plain else [lambda: run_plain(args)]
        jobs += [lambda n=n, o=o: run_glassformer(n, o, args, Path(tmp)) for n, o in runs]
        for job in jobs:
            results.append(job())
            _print(results[-1], results[0])
            if args.json:  # after every run: a stopped benchmark keeps what it measured
                Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print("\nsummary (val loss: nats per target token; lower is better)")
    for r in results:
        _print(r, results[0])


def _print(r: dict, base: dict) -> None:
    delta = r["val_loss"] - base["val_loss"]
    print(
        f"  {r['name']:<22} val_loss {r['val_loss']:.4f} ({delta:+.4f} vs {base['name']})  "
        f"nats/word {r['nats_per_word']:.3f}  greedy BLEU {r['bleu']:5.2f}  chrF {r['chrf']:5.2f}"
        f"  {r['wall_s']:6.0f} s  {r['params']:,} params  {' '.join(r['overrides'])}",
        flush=True,
    )
    if "hurried_bleu" in r:
        print(
            f"  {'':<22} case and closing punctuation ignored: BLEU / chrF as typed "
            f"{r['clean_bleu']:5.2f} / {r['clean_chrf']:5.2f} ({r['clean_cut']} ran to max_len), "
            f"typed in a hurry {r['hurried_bleu']:5.2f} / {r['hurried_chrf']:5.2f} "
            f"({r['hurried_cut']} ran to max_len)",
            flush=True,
        )


if __name__ == "__main__":
    main()
