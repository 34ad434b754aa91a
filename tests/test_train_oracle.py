"""An oracle for the training step (issue 24, point 1).

For each task (lm, translate, classify) glassformer's trainer, run for real (`train.train`, its
loop, its optimizer and its checkpoint), equals a plain PyTorch training loop written here from
`torch.nn.functional` and `torch.optim`: cross-entropy with label smoothing, padding left out
through `ignore_index`, gradient accumulation as the mean of the micro-batches' mean losses,
`clip_grad_norm_`, AdamW with weight decay on the matrices of linear layers only (not biases,
LayerNorms or embeddings: the rule train.py documents, decided here by module type, not by name)
and the linear-warmup-then-cosine learning rate written from its formula. Everything runs in
float64, so loss, gradient norm, clipped gradients, learning rate and updated weights agree to
1e-12 at every step.

The trainer is observed, not changed: `make_optimizer` is wrapped to record the initial weights
and to hook the optimizer's step (the gradients it is given, its groups, the weights after it),
and the batch source records the batches, which the oracle replays.

Then each ingredient is shown to matter: the oracle with label smoothing off, clipping off,
padding counted, every parameter decayed, no accumulation or the schedule one step late differs
from glassformer's run by far more than the tolerance, so a trainer that lost any of them fails.
"""

import contextlib
import dataclasses
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from glassformer import data as D  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.tokenizer import CharTokenizer  # noqa: E402
from glassformer.torch_model import Transformer  # noqa: E402
from glassformer.training import train as train_module  # noqa: E402
from glassformer.training.tasks import Task, batch_loss  # noqa: E402
from glassformer.training.train import TrainConfig, train  # noqa: E402

TOL = 1e-12  # float64: glassformer's step and the oracle's differ only by rounding
SEEN = 1e-7  # a changed ingredient moves some compared number by more than this
TINY = dict(d_model=16, n_heads=2, d_ff=32, max_len=24)
TASKS = ("lm", "translate", "classify")


@contextlib.contextmanager
def float64():
    """train() builds its model in torch's default dtype: float64 here, float32 again after."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


class Recorded:
    """A batch source that keeps every batch it hands out, for the oracle to replay."""

    def __init__(self, source):
        self.source, self.batches = source, []

    def next(self):
        batch = self.source.next()
        self.batches.append(batch)
        return batch

    def state(self):
        return self.source.state()

    def set_state(self, state):
        self.source.set_state(state)


def _job(kind: str) -> tuple[Config, TrainConfig, Task]:
    """A tiny run of `kind` whose every ingredient is active: a schedule with warmup and cosine,
    accumulation over two micro-batches, clipping that bites, label smoothing, weight decay, and
    (translate, classify) batches with padding."""
    tok = CharTokenizer.train(["abcdefghijklmnopqrstuvwxyz"])
    V, first = tok.vocab_size, max(tok.pad_id, tok.bos_id, tok.eos_id) + 1
    rng = np.random.default_rng(7)

    def sentences(n, lo, hi):
        return [rng.integers(first, V, size=rng.integers(lo, hi + 1)).tolist() for _ in range(n)]

    if kind == "lm":  # learned positions, pre-LN, the head tied to the token embedding
        cfg = Config(
            arch="decoder",
            vocab_size=V,
            positions="learned",
            norm="pre",
            tie_embeddings=True,
            **TINY,
        )
        source = D.LMBatches(rng.integers(first, V, size=300), 10, 3, seed=1)
    elif kind == "translate":  # the articles' post-LN model with an untied (decayed) head
        cfg = Config(arch="encoder-decoder", vocab_size=V, **TINY)
        source = D.PairBatches(
            sentences(40, 2, 9),
            sentences(40, 1, 8),
            tok.pad_id,
            tok.bos_id,
            tok.eos_id,
            max_tokens=40,
            seed=1,
        )
    else:  # BERT-like: token types and an embedding LayerNorm (embeddings that must not decay)
        cfg = Config(
            arch="encoder",
            vocab_size=V,
            n_classes=3,
            positions="learned",
            type_vocab_size=2,
            embed_norm=True,
            **TINY,
        )
        source = D.ClassBatches(
            sentences(40, 2, 12),
            rng.integers(0, 3, size=40).tolist(),
            tok.pad_id,
            batch_size=5,
            seed=1,
        )
    tcfg = TrainConfig(
        task=kind,
        max_steps=5,
        warmup_steps=2,
        grad_accum=2,
        lr=3e-3,
        min_lr=3e-4,
        weight_decay=0.1,
        grad_clip=0.5,
        label_smoothing=0.1,
        init="xavier" if kind == "translate" else "gpt2",
        eval_interval=1000,
    )
    return cfg, tcfg, Task(kind, Recorded(source), None, tok)


def _params(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _run_glassformer(kind: str, out) -> dict:
    """glassformer's own training run, recorded step by step."""
    cfg, tcfg, task = _job(kind)
    seen: dict = {"steps": []}
    make_optimizer = train_module.make_optimizer

    def spy(model, tcfg_, device="cpu"):
        opt = make_optimizer(model, tcfg_, device)
        names = {id(p): n for n, p in model.named_parameters()}
        seen["init"] = _params(model)

        def before(opt, args, kwargs):
            groups = [(g, p) for g in opt.param_groups for p in g["params"]]
            seen["steps"].append(
                {
                    "lr": [g["lr"] for g in opt.param_groups],
                    "grads": {names[id(p)]: p.grad.detach().clone() for _, p in groups},
                    "decayed": {names[id(p)] for g, p in groups if g["weight_decay"] > 0},
                }
            )

        def after(opt, args, kwargs):
            seen["steps"][-1]["params"] = _params(model)

        opt.register_step_pre_hook(before)
        opt.register_step_post_hook(after)
        return opt

    with float64(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_module, "make_optimizer", spy)
        rows = train(cfg, tcfg, task, out, evaluate=lambda *a: {})
    for row, step in zip(rows, seen["steps"], strict=True):
        step |= {"loss": row["loss"], "grad_norm": row["grad_norm"], "logged_lr": row["lr"]}
    return {
        "cfg": cfg,
        "tcfg": tcfg,
        "pad_id": task.tokenizer.pad_id,
        "batches": task.train.batches,
        **seen,
    }


# -- the oracle: a plain PyTorch loop -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What the oracle trains with; `_recipe` reads it from a TrainConfig, a test changes one."""

    lr: float
    min_lr: float
    warmup: int
    max_steps: int
    accum: int
    clip: float
    label_smoothing: float
    betas: tuple[float, float]
    weight_decay: float
    ignore_padding: bool = True
    decay_all: bool = False  # every parameter decayed (what glassformer must not do)
    accumulate: str = "mean"  # "sum": micro-batch losses not divided; "last": grads reset each
    lr_shift: int = 0  # the schedule read at step + shift


def _recipe(t: TrainConfig) -> Recipe:
    return Recipe(
        t.lr,
        t.min_lr,
        t.warmup_steps,
        t.max_steps,
        t.grad_accum,
        t.grad_clip,
        t.label_smoothing,
        (t.beta1, t.beta2),
        t.weight_decay,
    )


def schedule(step: int, r: Recipe) -> float:
    """Linear warmup (the first update at lr / warmup, the warmup-th at lr), then half a cosine
    from lr down to min_lr at max_steps."""
    s = step + r.lr_shift
    if s < r.warmup:
        return r.lr * (s + 1) / r.warmup
    progress = (s - r.warmup) / (r.max_steps - r.warmup)
    return r.min_lr + (r.lr - r.min_lr) * (1 + math.cos(math.pi * progress)) / 2


def oracle_loss(model, batch, kind: str, r: Recipe, pad_id: int):
    """Mean cross-entropy with label smoothing over the counted positions of one micro-batch."""
    ignore = pad_id if r.ignore_padding else -100  # -100: no label is ignored
    ls = r.label_smoothing
    if kind == "lm":
        x, y = (torch.as_tensor(a) for a in batch)
        logits = model(x)  # (B, T, V)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1), label_smoothing=ls
        )
    b = {k: torch.as_tensor(v) for k, v in batch.items() if isinstance(v, np.ndarray)}
    if kind == "translate":
        logits = model(
            b["tgt_in"], valid=b["tgt_valid"], src_ids=b["src"], src_valid=b["src_valid"]
        )
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            b["tgt_out"].reshape(-1),
            ignore_index=ignore,
            label_smoothing=ls,
        )
    logits = model(b["x"], valid=b["valid"])  # (B, n_classes)
    return F.cross_entropy(logits, b["y"], label_smoothing=ls)


def oracle(run: dict, r: Recipe) -> list[dict]:
    """Train a fresh model from glassformer's initial weights on the same batches."""
    kind = run["tcfg"].task
    with float64():
        model = Transformer(run["cfg"])
        model.load_state_dict(run["init"])
        model.train()
        matrices = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
        if r.decay_all:
            matrices = list(model.parameters())
        rest = [p for p in model.parameters() if all(p is not q for q in matrices)]
        opt = torch.optim.AdamW(
            [
                {"params": matrices, "weight_decay": r.weight_decay},
                {"params": rest, "weight_decay": 0.0},
            ],
            lr=r.lr,
            betas=r.betas,
            eps=1e-8,
            foreach=False,
        )
        names = {id(p): n for n, p in model.named_parameters()}
        batches, steps = iter(run["batches"]), []
        for step in range(r.max_steps):
            lr = schedule(step, r)
            for group in opt.param_groups:
                group["lr"] = lr
            loss = 0.0
            for _ in range(r.accum):
                if r.accumulate == "last":
                    opt.zero_grad()
                micro = oracle_loss(model, next(batches), kind, r, run["pad_id"])
                (micro if r.accumulate == "sum" else micro / r.accum).backward()
                loss += micro.item() / r.accum
            norm = float(
                torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
            )
            if r.clip > 0:
                nn.utils.clip_grad_norm_(model.parameters(), r.clip)
            grads = {n: p.grad.clone() for n, p in model.named_parameters()}
            opt.step()
            opt.zero_grad()
            steps.append(
                {
                    "loss": loss,
                    "grad_norm": norm,
                    "lr": lr,
                    "grads": grads,
                    "decayed": {names[id(p)] for p in matrices},
                    "params": _params(model),
                }
            )
    return steps


def differences(run: dict, want: list[dict]) -> dict[str, float]:
    """The largest absolute difference of each compared quantity over all steps."""
    got, diff = run["steps"], {}
    assert len(got) == len(want), (len(got), len(want))

    def worst(key, value):
        value = float(value)  # NaN (e.g. a norm never computed) is the largest difference
        diff[key] = max(diff.get(key, 0.0), value if value == value else math.inf)

    for s, (g, w) in enumerate(zip(got, want, strict=True)):
        worst("loss", abs(g["loss"] - w["loss"]))
        if run["tcfg"].grad_clip > 0:  # the pre-clip norm is logged only when clipping
            worst("grad_norm", abs(g["grad_norm"] - w["grad_norm"]))
        worst("lr", max(abs(lr - w["lr"]) for lr in [*g["lr"], g["logged_lr"]]))
        worst("decay groups", len(g["decayed"] ^ w["decayed"]))
        for key in ("grads", "params"):
            assert g[key].keys() == w[key].keys(), f"step {s + 1}: other {key} names"
            worst(key, max((g[key][n] - w[key][n]).abs().max() for n in g[key]))
    return diff


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """glassformer's run of each task, made once (the oracle variants all compare with it)."""
    made: dict = {}

    def get(kind):
        if kind not in made:
            made[kind] = _run_glassformer(kind, tmp_path_factory.mktemp(kind) / "ck")
        return made[kind]

    return get


@pytest.mark.parametrize("kind", TASKS)
def test_trainer_step_equals_plain_pytorch(kind, runs):
    run = runs(kind)
    steps = run["steps"]
    assert {p.dtype for p in run["init"].values()} == {torch.float64}  # trained in float64
    # the run exercises what it claims: clipping bites, the schedule warms up then decays,
    # and (translate, classify) the batches have padding
    assert any(s["grad_norm"] > run["tcfg"].grad_clip for s in steps)
    lrs = [s["logged_lr"] for s in steps]
    assert lrs[0] < lrs[1] and lrs[-1] < lrs[2], lrs
    if kind != "lm":
        valid = "tgt_valid" if kind == "translate" else "valid"
        assert all(not b[valid].all() for b in run["batches"]), "a batch without padding"
    diff = differences(run, oracle(run, _recipe(run["tcfg"])))
    assert max(diff.values()) <= TOL, diff
    assert steps[-1]["params"].keys() == run["init"].keys()
    moved = max((steps[-1]["params"][n] - run["init"][n]).abs().max() for n in run["init"])
    assert moved > 1e-3  # the weights did change: equality is not two copies of the start


# Each ingredient, changed in the oracle alone, and the tasks where it must show.
CHANGES = {
    "label smoothing off": (dict(label_smoothing=0.0), TASKS),
    "clipping off": (dict(clip=0.0), TASKS),
    "padding counted": (dict(ignore_padding=False), ("translate",)),
    "every parameter decayed": (dict(decay_all=True), TASKS),
    "micro-batch losses summed, not averaged": (dict(accumulate="sum"), TASKS),
    "only the last micro-batch's gradient": (dict(accumulate="last"), TASKS),
    "schedule one step late": (dict(lr_shift=1), TASKS),
    "schedule one step early": (dict(lr_shift=-1), TASKS),
}


@pytest.mark.parametrize("change", CHANGES)
def test_oracle_sees_each_ingredient(change, runs):
    """The oracle is sharp: with one ingredient changed it no longer matches glassformer."""
    fields, kinds = CHANGES[change]
    for kind in kinds:
        run = runs(kind)
        r = dataclasses.replace(_recipe(run["tcfg"]), **fields)
        diff = differences(run, oracle(run, r))
        assert max(diff.values()) > SEEN, (kind, change, diff)


def test_translate_loss_counts_only_real_target_tokens():
    """Validation loss (and tokens/s) weight each translate batch by its number of real target
    tokens: len(target) + 1 (the EOS) for each pair of the batch, counted here from the pairs
    themselves; the weighted mean of `batch_loss` over batches of different padding equals one
    summed F.cross_entropy over every real token divided by their number."""
    with float64():
        cfg, _, task = _job("translate")
        torch.manual_seed(0)
        model = Transformer(cfg).eval()
        source = task.train.source
        total, count, weighted, weights = 0.0, 0, 0.0, 0
        for _ in range(4):
            batch = source.next()
            real = sum(len(source.tgt[i]) + 1 for i in batch["index"])
            loss, n = batch_loss(model, batch, "translate")
            assert n == real
            logits = model(
                torch.as_tensor(batch["tgt_in"]),
                valid=torch.as_tensor(batch["tgt_valid"]),
                src_ids=torch.as_tensor(batch["src"]),
                src_valid=torch.as_tensor(batch["src_valid"]),
            )
            labels = torch.as_tensor(batch["tgt_out"]).masked_fill(
                ~torch.as_tensor(batch["tgt_valid"]), -100
            )
            ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum")
            total, count = total + ce.item(), count + int((labels != -100).sum())
            weighted, weights = weighted + loss.item() * n, weights + n
        assert count == weights
        assert abs(weighted / weights - total / count) < TOL


def test_xavier_draws_q_k_v_as_nn_multihead_attention_draws_its_fused_projection():
    """init "xavier" draws Wq, Wk, Wv as torch's nn.MultiheadAttention draws its fused (3C, C)
    in_proj_weight: uniform within the Glorot bound torch computes for that fused matrix (the
    oracle: torch's own fan computation on a real nn.MultiheadAttention). Over all of the model's
    Q/K/V matrices the largest |w| reaches that bound (within 2%) and never passes it."""
    from glassformer.training.train import init_weights

    cfg = Config(arch="encoder-decoder", vocab_size=30, **TINY)
    torch.manual_seed(0)
    model = Transformer(cfg)
    init_weights(model, cfg, "xavier")
    mha = nn.MultiheadAttention(cfg.d_model, cfg.n_heads)
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(mha.in_proj_weight)
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    qkv = [
        p for n, p in model.named_parameters() if n.endswith(("q.weight", "k.weight", "v.weight"))
    ]
    largest = max(float(p.detach().abs().max()) for p in qkv)
    assert len(qkv) >= 9 and 0.98 * bound <= largest <= bound, (largest, bound)
