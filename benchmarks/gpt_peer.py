"""A plain GPT-2-style character model and its training step: the peer that the training benchmark
times glassformer against. It is the architecture and loop nanoGPT uses (written here, not copied):
one fused qkv Linear, `F.scaled_dot_product_attention(is_causal=True)`, an exact-GELU MLP, pre-LN
with bias-free LayerNorms and Linears, learned positions, the token embedding tied to the output
head, GPT-2 initialisation; AdamW with weight decay on the matrices only (fused on CUDA only, as
nanoGPT chooses), linear warmup then cosine decay, gradient clipping at 1.0, and random windows of
a NumPy token array turned into tensors at every step.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd, bias=False)
        self.attn = Attention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd, bias=False)
        self.fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.out = nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class PeerGPT(nn.Module):
    def __init__(self, vocab: int, block_size: int, n_layer: int, n_head: int, n_embd: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, bias=False)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():
            if p.ndim == 2:
                residual = name.endswith(("attn.proj.weight", "out.weight"))
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer) if residual else 0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def optimizer(model: nn.Module, lr: float, weight_decay: float, betas, device: str):
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=device == "cuda" or None)


def lr_at(it: int, lr=1e-3, min_lr=1e-4, warmup=100, decay_iters=2000) -> float:
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    ratio = min(1.0, (it - warmup) / (decay_iters - warmup))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


class Trainer:
    """The peer's training loop, one `step()` at a time over a NumPy token array."""

    def __init__(self, data: np.ndarray, vocab: int, block_size=64, batch_size=12, n_layer=4,
                 n_head=4, n_embd=128, seed=1337):  # fmt: skip
        torch.manual_seed(seed)
        self.data, self.T, self.B = data, block_size, batch_size
        self.model = PeerGPT(vocab, block_size, n_layer, n_head, n_embd)
        self.opt = optimizer(self.model, 1e-3, 0.1, (0.9, 0.99), "cpu")
        self.it = 0

    def batch(self):
        ix = torch.randint(len(self.data) - self.T, (self.B,))
        x = torch.stack([torch.from_numpy(self.data[i : i + self.T].astype(np.int64)) for i in ix])
        y = torch.stack(
            [torch.from_numpy(self.data[i + 1 : i + 1 + self.T].astype(np.int64)) for i in ix]
        )
        return x, y

    def step(self) -> float:
        for group in self.opt.param_groups:
            group["lr"] = lr_at(self.it)
        x, y = self.batch()
        loss = self.model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.it += 1
        return loss.item()
