"""Benchmark: one training step of the shipped translator's size, glassformer vs a plain
torch.nn.Transformer script (the peer the training issue names: 3+3 layers, d 256, 4 heads, FFN
1024, pre-LN, shared 8k vocabulary with learned positions and a tied output head).

Both do the same work per step: embed a padded batch of sentence pairs (B x S source, B x T
target, ragged lengths), run the encoder and the causal decoder with padding masks, cross-entropy
with label smoothing 0.1 over the real target tokens, backward, gradient clipping, AdamW, dropout
0.1, fp32. Printed: median step times and target tokens/s; the issue's target is >= 1.25x the
peer's tokens/s.

    .venv/bin/python benchmarks/train_translate_vs_nn_transformer.py
"""

import argparse

import torch
import torch.nn.functional as F
from _harness import alternate, report
from torch import nn

from glassformer.config import preset
from glassformer.torch_model import Transformer


class PeerTranslator(nn.Module):
    """What a plain PyTorch script writes: shared embeddings + learned positions + nn.Transformer
    + a tied output projection."""

    def __init__(self, V: int, C: int, L: int, max_len: int, dropout: float, activation: str):
        super().__init__()
        self.embed = nn.Embedding(V, C)
        self.pos = nn.Embedding(max_len, C)
        self.core = nn.Transformer(
            d_model=C,
            nhead=4,
            num_encoder_layers=L,
            num_decoder_layers=L,
            dim_feedforward=4 * C,
            dropout=dropout,
            activation=activation,  # the preset's "relu" or "gelu" (exact), as torch names them
            batch_first=True,
            norm_first=True,
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, src, src_valid, tgt, tgt_valid):
        pos_s = self.pos.weight[: src.shape[1]]
        pos_t = self.pos.weight[: tgt.shape[1]]
        T = tgt.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # True = may not attend
        h = self.core(
            self.drop(self.embed(src) + pos_s),
            self.drop(self.embed(tgt) + pos_t),
            tgt_mask=causal,
            tgt_is_causal=True,
            src_key_padding_mask=~src_valid,
            tgt_key_padding_mask=~tgt_valid,
            memory_key_padding_mask=~src_valid,
        )
        return h @ self.embed.weight.T  # (B, T, V)


def batch(B: int, S: int, T: int, V: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src_len = torch.randint(S // 2, S + 1, (B,), generator=g)
    tgt_len = torch.randint(T // 2, T + 1, (B,), generator=g)
    src_valid = torch.arange(S)[None] < src_len[:, None]
    tgt_valid = torch.arange(T)[None] < tgt_len[:, None]
    src = torch.randint(4, V, (B, S), generator=g) * src_valid
    tgt = torch.randint(4, V, (B, T), generator=g) * tgt_valid
    labels = torch.randint(4, V, (B, T), generator=g).masked_fill(~tgt_valid, -100)
    return src, src_valid, tgt, tgt_valid, labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128, help="sentence pairs per step")
    ap.add_argument("--length", type=int, default=24, help="longest sentence, in tokens")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = preset("translator")
    V, C, dropout = cfg.vocab_size, cfg.d_model, 0.1
    ours = Transformer(cfg, dropout=dropout).train()
    peer = PeerTranslator(V, C, cfg.n_encoder_layers, cfg.max_len, dropout, cfg.activation).train()
    src, src_valid, tgt, tgt_valid, labels = batch(args.batch, args.length, args.length, V)
    n_tokens = int(tgt_valid.sum())

    def step_fn(model, forward):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            logits = forward()
            loss = F.cross_entropy(
                logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100, label_smoothing=0.1
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    contenders = {
        "glassformer": step_fn(
            ours, lambda: ours(tgt, valid=tgt_valid, src_ids=src, src_valid=src_valid)
        ),
        "nn.Transformer script": step_fn(peer, lambda: peer(src, src_valid, tgt, tgt_valid)),
    }
    n_ours = sum(p.numel() for p in ours.parameters())
    n_peer = sum(p.numel() for p in peer.parameters())
    print(f"parameters: glassformer {n_ours:,} (separate encoder embedding), peer {n_peer:,}")
    times = alternate(contenders, repeats=args.repeats)
    ratio = report(
        f"translator training step, batch {args.batch} x <= {args.length} tokens "
        f"({n_tokens} target tokens), fp32, {args.threads} threads",
        times,
        "glassformer",
        "nn.Transformer script",
        unit=1e3,
        per=n_tokens,
        per_name="target tokens/s",
    )
    print(f"  tokens/s ratio glassformer / peer = {1 / ratio:.3f} (target >= 1.25)")


if __name__ == "__main__":
    main()
