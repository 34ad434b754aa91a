"""Step functions: the PyTorch engine seen by `decoding`'s loops.

`step_fn(model)` turns a `torch_model.Transformer` into what `decoding.greedy`, `sample` and
`beam_search` call: ids so far -> next-token logits (V,) in float64, through the KV cache (each
hypothesis grows a copy of its parent's cache; cached tensors are never modified in place), or
over a sliding window past max_len. `many_step_fn(model)` scores equal-length hypotheses in one
forward, for beam search. Nothing here knows tokenizers or the reference engine.
"""

from __future__ import annotations

import torch

from glassformer.torch_model import KVCache, Transformer


def step_fn(model: Transformer, src_ids=None, use_cache: bool = True, window: bool = False):
    """A `decoding` step function over one sequence: ids so far -> next-token logits (V,) float64.

    With the cache, a call whose ids extend a sequence seen at the previous length runs only the
    new token on a copy of that sequence's cache (beam hypotheses share their parents' caches;
    cached tensors are never modified in place). Otherwise the whole prefix is computed.
    window: past max_len ids, only the last max_len are read, at positions 0 .. max_len-1 (a
    sliding window); as every position then moves at each step, no cached key or value holds:
    the window is computed afresh (the stale caches dropped).
    """
    device = next(model.parameters()).device
    src = None if src_ids is None else torch.as_tensor([list(src_ids)], device=device)
    caches: dict[tuple[int, ...], KVCache] = {}
    L = model.cfg.max_len

    @torch.no_grad()
    def step(ids: list[int]):
        ids = [int(i) for i in ids]
        slid = window and len(ids) > L
        if slid:
            caches.clear()
            ids = ids[-L:]
        if not use_cache or slid:
            logits = model(torch.as_tensor([ids], device=device), src_ids=src, last_only=True)
            return logits[0, -1].to(torch.float64).cpu().numpy()
        parent = caches.get(tuple(ids[:-1]))
        if parent is not None:
            cache, new = parent.copy(), ids[-1:]
        else:
            cache, new = KVCache.empty(model.cfg.n_decoder_layers), ids
        logits = model(
            torch.as_tensor([new], device=device), src_ids=src, cache=cache, last_only=True
        )
        for key in [k for k in caches if len(k) < len(ids) - 1]:
            del caches[key]
        caches[tuple(ids)] = cache
        return logits[0, -1].to(torch.float64).cpu().numpy()

    return step


def many_step_fn(model: Transformer, src_ids=None):
    """A batched step function for beam search: equal-length id lists -> (n, V) float64 logits,
    one forward for all hypotheses (the encoder output is computed once and reused)."""
    device = next(model.parameters()).device
    src = None if src_ids is None else torch.as_tensor([list(src_ids)], device=device)
    memory: dict = {}

    @torch.no_grad()
    def step_many(batch: list[list[int]]):
        ids = torch.as_tensor(batch, device=device)  # (n, T)
        cache = None
        if src is not None:
            if "cache" not in memory:  # run the encoder once
                memory["cache"] = KVCache.empty(model.cfg.n_decoder_layers)
                model(ids[:1, :1], src_ids=src, cache=memory["cache"])
            enc = memory["cache"]
            cache = KVCache.empty(model.cfg.n_decoder_layers)
            cache.memory = enc.memory.expand(len(batch), -1, -1)
        logits = model(
            ids,
            src_ids=None if src is None else src.expand(len(batch), -1),
            cache=cache,
            last_only=True,
        )
        return logits[:, -1].to(torch.float64).cpu().numpy()

    return step_many
