"""Sparse autoencoders and transcoders over stored activations, trained on the CPU.

An SAE reads a step's activation x (d_in,) and writes it back through d_sae features, few of
them non-zero (Bricken et al. 2023; the SAELens "standard" and "topk" architectures):

    f = ReLU((x - b_dec) · W_enc + b_enc)           (d_sae,)   features ("topk": the k largest
    x̂ = f · W_dec + b_dec                           (d_in,)    pre-activations, ReLU'd, others 0)

W_enc (d_in, d_sae), b_enc (d_sae,), W_dec (d_sae, d_out), b_dec (d_out,): SAELens's names and
shapes. A transcoder reads one step and writes another (`d_out`, `step_out`: an FFN's input to
its output), and does not subtract b_dec from its input (it has d_out numbers).

Training (`train`) follows SAELens's standard recipe: AdamW (no weight decay), the loss
||x̂ - x||² summed over d_out and averaged over the batch, plus l1 · Σ_i f_i ||W_dec[i]|| (the L1
of the features weighted by their decoder rows' norms, so a row cannot shrink to cheat it; l1
rises linearly over the first 5% of the steps), inputs scaled so that E||x|| = sqrt(d_in)
(normalize_activations "expected_average_only_in"), the scale folded into the weights when saved;
W_dec's rows start at norm 0.1 with W_enc = W_decᵀ, b_dec at the data's mean. TopK keeps W_dec's
rows at unit norm after each step and has no L1. Batches are a seeded permutation per epoch, so
the rows of step s depend on (seed, s) only and a resumed run equals an uninterrupted one. A
feature is dead when it has not fired for `dead_after` rows of training.

The folder is SAELens's (`saelens.py`: cfg.json + sae_weights.safetensors), plus
training_state.pt (the unfolded parameters, AdamW's state, the step, the log) while it trains:
every save replaces the whole folder atomically, under the folder's lock, and Ctrl-C saves at the
end of the step under way (`training.train.StopSignals`).

`encode` / `decode` / `forward` are the same maths in NumPy float64, for the reference engine.
Deliberately not here: reading the store (`corpus/store.py`), the folder's format
(`saelens.py`), splicing into a model and the report (`evaluate.py`), the command line.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from torch import nn

ARCHITECTURES = ("standard", "topk")


@dataclasses.dataclass(frozen=True)
class SAEConfig:
    """What an SAE is: its sizes, architecture, and the steps it reads (and writes)."""

    d_in: int
    d_sae: int
    step: str  # the glassformer step it reads, e.g. "decoder.1.out"
    architecture: str = "standard"  # "standard" (ReLU) or "topk"
    k: int | None = None  # topk: features kept per row
    d_out: int | None = None  # a transcoder's output width (None: an SAE, d_out = d_in)
    step_out: str | None = None  # a transcoder's target step
    apply_b_dec_to_input: bool = True
    center: bool = False  # the input is centered first (TransformerLens's centered stream)
    model_name: str = ""
    hook_name: str = ""  # SAELens's name for `step`, when known
    prepend_bos: bool = False  # it read texts that start with the tokenizer's BOS (SAELens's)

    @property
    def out(self) -> int:
        return self.d_out or self.d_in

    @property
    def transcoder(self) -> bool:
        return self.step_out is not None


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    batch_size: int = 1024
    lr: float = 4e-4
    l1: float = 1.0
    seed: int = 0
    dead_after: int = 100_000  # rows without firing before a feature counts as dead


class SparseAutoencoder(nn.Module):
    """The SAE (or transcoder) as a torch module: forward(x) -> (x̂, f)."""

    def __init__(self, cfg: SAEConfig, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self.W_enc = nn.Parameter(torch.zeros(cfg.d_in, cfg.d_sae, dtype=dtype))
        self.b_enc = nn.Parameter(torch.zeros(cfg.d_sae, dtype=dtype))
        self.W_dec = nn.Parameter(torch.zeros(cfg.d_sae, cfg.out, dtype=dtype))
        self.b_dec = nn.Parameter(torch.zeros(cfg.out, dtype=dtype))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.cfg
        if cfg.center:
            x = x - x.mean(dim=-1, keepdim=True)
        if cfg.apply_b_dec_to_input and not cfg.transcoder:
            x = x - self.b_dec
        pre = x @ self.W_enc + self.b_enc  # (N, F)
        if cfg.architecture == "topk":
            top = torch.topk(pre, k=cfg.k, dim=-1)
            f = torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
        else:
            f = torch.relu(pre)
        return f @ self.W_dec + self.b_dec, f


# -- the same maths in NumPy float64 (the reference engine's) ---------------------------------


def encode(cfg: SAEConfig, p: dict, x: np.ndarray) -> np.ndarray:
    """f (..., d_sae) of x (..., d_in), float64."""
    x = np.asarray(x, np.float64)
    if cfg.center:
        x = x - x.mean(axis=-1, keepdims=True)
    if cfg.apply_b_dec_to_input and not cfg.transcoder:
        x = x - p["b_dec"]
    pre = x @ p["W_enc"] + p["b_enc"]
    if cfg.architecture == "topk":
        keep = np.argpartition(-pre, cfg.k - 1, axis=-1)[..., : cfg.k]  # the k largest
        f = np.zeros_like(pre)
        np.put_along_axis(f, keep, np.maximum(np.take_along_axis(pre, keep, -1), 0.0), -1)
        return f
    return np.maximum(pre, 0.0)


def decode(cfg: SAEConfig, p: dict, f: np.ndarray, x: np.ndarray | None = None) -> np.ndarray:
    """x̂ (..., d_out) of features f; a centered SAE adds back the mean of its input x."""
    out = np.asarray(f, np.float64) @ p["W_dec"] + p["b_dec"]
    if cfg.center and x is not None and not cfg.transcoder:
        out = out + np.asarray(x, np.float64).mean(axis=-1, keepdims=True)
    return out


def forward(cfg: SAEConfig, p: dict, x: np.ndarray) -> np.ndarray:
    """x̂ of x, float64."""
    return decode(cfg, p, encode(cfg, p, x), x)


def params64(module: SparseAutoencoder) -> dict:
    return {k: v.detach().to(torch.float64).numpy().copy() for k, v in module.state_dict().items()}


# -- training -------------------------------------------------------------------------------------


def batch_rows(n: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """The rows of training step `step` (from 0): a seeded permutation of 0..n-1 per epoch,
    read in order, so that they depend on (seed, step) only."""
    start = step * batch_size
    out, got = [], 0
    while got < batch_size:
        epoch, at = divmod(start + got, n)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        take = perm[at : at + batch_size - got]
        out.append(take)
        got += len(take)
    return np.concatenate(out)


def scale_of(x: np.ndarray, rows: int = 8192) -> float:
    """sqrt(d) / mean ||x||: the factor that brings the rows' mean norm to sqrt(d)."""
    sample = np.asarray(x[: min(rows, len(x))], np.float64)
    mean = float(np.linalg.norm(sample, axis=-1).mean())
    return math.sqrt(sample.shape[-1]) / mean if mean > 0 else 1.0


def new_sae(cfg: SAEConfig, x: np.ndarray, y: np.ndarray, seed: int) -> SparseAutoencoder:
    """SAELens's initialisation: W_dec rows kaiming-uniform then norm 0.1 (1 for topk), W_enc =
    W_decᵀ (an SAE), b_dec the (scaled) data mean of what it writes."""
    torch.manual_seed(seed)
    sae = SparseAutoencoder(cfg)
    with torch.no_grad():
        w = torch.empty(cfg.d_sae, cfg.out)
        nn.init.kaiming_uniform_(w)
        w /= w.norm(dim=-1, keepdim=True)
        sae.W_dec.copy_(w * (1.0 if cfg.architecture == "topk" else 0.1))
        if cfg.transcoder:
            e = torch.empty(cfg.d_in, cfg.d_sae)
            nn.init.kaiming_uniform_(e)
            sae.W_enc.copy_(e * 0.1 / e.norm(dim=0, keepdim=True))
        else:
            sae.W_enc.copy_(sae.W_dec.T)
        sample = np.asarray(y[: min(8192, len(y))], np.float64)
        sae.b_dec.copy_(torch.as_tensor(sample.mean(axis=0), dtype=torch.float32))
    return sae


@dataclasses.dataclass
class Run:
    """A training run's state between steps."""

    sae: SparseAutoencoder
    opt: torch.optim.Optimizer
    step: int
    scale_in: float
    scale_out: float
    last_fired: np.ndarray  # (d_sae,) the row count when each feature last fired (-1: never)
    log: list[dict]


def optimizer(sae, lr: float) -> torch.optim.Optimizer:
    return torch.optim.AdamW(sae.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=0.0)


def step_once(run: Run, x: torch.Tensor, y: torch.Tensor, tcfg: TrainConfig) -> dict:
    """One AdamW step on scaled rows x -> y; returns the log row."""
    sae, cfg = run.sae, run.sae.cfg
    warm = max(1, tcfg.steps // 20)
    l1 = 0.0 if cfg.architecture == "topk" else tcfg.l1 * min(1.0, (run.step + 1) / warm)
    recon, f = sae(x)
    mse = (recon - y).pow(2).sum(dim=-1).mean()
    sparsity = (f * sae.W_dec.norm(dim=1)).sum(dim=-1).mean()
    loss = mse + l1 * sparsity
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    run.opt.step()
    if cfg.architecture == "topk":
        with torch.no_grad():
            sae.W_dec /= sae.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
    with torch.no_grad():
        fired = (f > 0).any(dim=0).numpy()
        l0 = float((f > 0).float().sum(dim=-1).mean())
        var = (y - y.mean(dim=0)).pow(2).sum()
        ev = 1.0 - float((recon - y).pow(2).sum() / var) if float(var) > 0 else float("nan")
    rows_seen = (run.step + 1) * len(x)
    run.last_fired[fired] = rows_seen
    run.step += 1
    dead = int(((rows_seen - np.maximum(run.last_fired, 0)) >= tcfg.dead_after).sum())
    dead = dead if rows_seen >= tcfg.dead_after else int((run.last_fired < 0).sum())
    return {
        "step": run.step,
        "loss": float(loss.detach()),
        "mse": float(mse.detach()),
        "l1": l1,
        "l0": l0,
        "explained_variance": ev,
        "dead": dead,
    }


def folded(run: Run) -> dict:
    """The parameters for unscaled activations, float64: W_enc·s_in, W_dec/s_out, b_dec/s_out
    (SAELens's fold_activation_norm_scaling_factor; an SAE's b_dec then fits its own input)."""
    p = params64(run.sae)
    return {
        "W_enc": p["W_enc"] * run.scale_in,
        "b_enc": p["b_enc"],
        "W_dec": p["W_dec"] / run.scale_out,
        "b_dec": p["b_dec"] / run.scale_out,
    }


class StoreRows:
    """One step of an activation store as rows (N, width) read on demand: `rows[idx]` gathers
    the rows idx (sorted) from the memory-mapped shards, float32; nothing else is read."""

    def __init__(self, store, step: str):
        self.store, self.step = store, store.check_step(step)
        self.shards = store.shards()
        self.starts = np.cumsum([0] + [s.rows for s in self.shards])
        self.shape = (int(self.starts[-1]), store.steps[step])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx) -> np.ndarray:
        if isinstance(idx, slice):
            idx = np.arange(*idx.indices(len(self)))
        idx = np.asarray(idx)
        out = np.empty((len(idx), self.shape[1]), np.float32)
        k = np.searchsorted(self.starts, idx, side="right") - 1
        for s in np.unique(k):
            sel = k == s
            out[sel] = self.shards[s].floats(self.step, idx[sel] - self.starts[s])
        return out
