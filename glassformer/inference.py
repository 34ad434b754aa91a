"""Using a model: token ids and sentences in, tokens, sentences, vectors or labels out.

The sentence-level layer between the engines and the programs that use them (the CLI, training's
evaluation, the explorer): build the PyTorch engine in a dtype (float64, float32, or int8 through
`quantize.py`), continue many decoder prompts at once (batched greedy, left-padded into one KV
cache), embed and classify. `decoding.py` below it knows nothing of engines (one prompt's
strategies run there, `decoding.strategy_tokens`); this module joins the two. Translating many
sentences in batches is `translating.py`'s.

Every function here that returns numbers checks them (`numerics.check`: one isfinite per step
or batch) and raises a `NonFiniteError` naming the input and the step where NaN or infinity
starts, never a silent answer made of them. `params` (the float weights) lets it name that step
with the reference engine, `fix` says what to do when only the lower precision overflows.

PyTorch is imported only by the functions that need it, so the reference engine's paths work
without it. Deliberately not here: reading user text or files, printing.
"""

from __future__ import annotations

import numpy as np

from glassformer import numerics
from glassformer import reference as R
from glassformer.devices import check_device
from glassformer.errors import INSTALL_TORCH, GlassformerError, InputError, param
from glassformer.recording import NOT_RECORDING

DTYPES = ("float64", "float32", "int8")  # what the PyTorch engine runs inference in


def check_dtype(dtype: str, engine: str = "auto") -> None:
    """A dtype the PyTorch engine can run on this machine, with an engine that has one."""
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    if engine == "reference":
        raise InputError(
            f"{param('dtype', dtype)} sets the PyTorch engine's precision, and "
            f"{param('engine', 'reference')} is NumPy float64: drop {param('dtype')}, or use "
            f"{param('engine', 'torch')}"
        )
    try:
        import torch  # noqa: F401
    except ImportError:
        raise GlassformerError(f"{param('dtype', dtype)} needs PyTorch: {INSTALL_TORCH}") from None
    if dtype == "int8":
        from glassformer.quantize import check_int8

        check_int8()


def torch_engine(cfg, params, dtype: str = "float32", device: str = "cpu"):
    """The PyTorch engine on these weights, for inference (eval mode) on `device` (`devices.
    check_device`): float64, float32, or int8 (float32 with its linear layers quantized:
    `quantize.int8`, on the CPU)."""
    import torch

    from glassformer.torch_model import from_params, inference_layout

    if dtype not in DTYPES:
        raise GlassformerError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    check_device(device, dtype=dtype)  # int8: the CPU only
    if dtype == "int8":
        from glassformer.quantize import check_int8, int8

        check_int8()  # before the float32 model is built
        return int8(from_params(cfg, params, dtype=torch.float32).eval())
    # on the device before the inference layout: `.to` after it would copy its views apart
    model = from_params(cfg, params, dtype=getattr(torch, dtype)).to(device)
    return inference_layout(model.eval())


def padded(srcs: list[list[int]], pad_id: int, device):
    """Source id lists -> (B, S) ids padded with pad_id, and (B, S) real-token flags."""
    import torch

    S = max(len(s) for s in srcs)
    src = torch.full((len(srcs), S), pad_id, dtype=torch.long, device=device)
    for b, s in enumerate(srcs):
        src[b, : len(s)] = torch.as_tensor(s)
    lengths = torch.tensor([len(s) for s in srcs], device=device)
    return src, torch.arange(S, device=device)[None, :] < lengths[:, None]


def greedy_prompts(
    model,
    prompts: list[list[int]],
    max_new_tokens: int,
    eos_id: int | None = None,
    pad_id: int = 0,
    window: bool = True,
    *,
    params: dict | None = None,
    fix: str | None = None,
    recorder=NOT_RECORDING,
) -> list[list[int]]:
    """Greedy continuations of many decoder prompts at once: each row's new ids, as
    `decoding.greedy(step_fn(model, window=window), prompt, ...)` gives them one prompt at a time
    (EOS included when reached; with window False, no row grows past max_len).

    The prompts are left-padded into one batch with one KV cache: padding is never attended to,
    and each row's positions count from its own first token (`KVCache.pad_left`), so every row
    computes what it would alone. Each step feeds every row its last token; a finished row's
    outputs are ignored until all are done. Past max_len (window True) each row reads only its
    last max_len ids, recomputed every step as `torch_steps.step_fn` does. Non-finite logits of
    a live row raise `numerics.NonFiniteError` (row: its index in prompts). `recorder`: as
    greedy_batch's."""
    import torch

    from glassformer.torch_model import KVCache

    device = next(model.parameters()).device
    L, n_layers = model.cfg.max_len, model.cfg.n_decoder_layers
    seqs = [list(p) for p in prompts]
    new: list[list[int]] = [[] for _ in prompts]
    live = [window or len(s) < L for s in seqs]
    cache = None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if not any(live):
                break
            longest = max(len(s) for s in seqs)
            if cache is not None and longest <= L:  # the cache holds all but the last token
                last = torch.tensor([[s[-1]] for s in seqs], device=device)
                logits = model(last, cache=cache, last_only=True)
            else:  # the first step, or past max_len: every row's window afresh
                rows = [s[-L:] for s in seqs]
                width = max(len(r) for r in rows)
                pad = torch.tensor([width - len(r) for r in rows], device=device)
                ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], device=device)
                cache = KVCache.empty(n_layers)
                cache.pad_left = pad
                valid = torch.arange(width, device=device)[None, :] >= pad[:, None]
                logits = model(ids, valid=valid, cache=cache, last_only=True)
            recorder.step()
            rows = [b for b, alive in enumerate(live) if alive]

            def describe(r, rows=rows):
                b = rows[r]
                what = f"generation stopped at new token {len(new[b]) + 1}: the next-token logits"
                return what, seqs[b][-L:], None

            shown = logits[:, -1] if len(rows) == len(seqs) else logits[rows, -1]  # (B live, V)
            numerics.check(shown, describe, params, model.cfg, fix, rows=rows)
            nxt = logits[:, -1].argmax(-1).tolist()  # (B,)
            for b, token in enumerate(nxt):
                seqs[b].append(token)
                if live[b]:
                    new[b].append(token)
                    live[b] = token != eos_id and (window or len(seqs[b]) < L)
    return new


def embed(
    cfg, params, ids: list[list[int]], engine: str = "torch", fix: str | None = None, device="cpu"
) -> np.ndarray:
    """Sentence embeddings (N, C), unit vectors: the reference engine in float64, or the torch
    engine in float32 on `device`, batched with padding. Non-finite values raise
    `numerics.NonFiniteError` (row: the sequence's index)."""
    if engine == "reference":
        E = np.stack([R.sentence_embedding(params, cfg, x) for x in ids])  # (N, C)
    else:
        torch = _torch_or_reference()
        from glassformer.torch_model import from_params, sentence_embeddings

        model = from_params(cfg, params, dtype=torch.float32).to(device).eval()
        with torch.no_grad():
            E = sentence_embeddings(model, *padded(ids, 0, device)).double().cpu().numpy()
    numerics.check(E, lambda b: ("the sentence embedding's values", ids[b], None), params, cfg, fix)
    return E


def _torch_or_reference():
    """torch, or one line saying how to get it or to use the reference engine instead."""
    try:
        import torch
    except ImportError:
        raise GlassformerError(
            f"{param('engine', 'torch')} needs PyTorch: use {param('engine', 'reference')}, "
            f"or {INSTALL_TORCH}"
        ) from None
    return torch


def class_probabilities(
    cfg, params, ids: list[list[int]], engine="auto", batch_size=64, fix=None, device="cpu"
):
    """Each sequence's probability of every class (N, n_classes) from an encoder classifier: the
    reference engine in float64, or the torch engine in float32 on `device`, padded batches (its
    logits softmaxed in float64). engine "auto": torch if installed, else the reference.
    Non-finite logits raise `numerics.NonFiniteError` (row: the sequence's index)."""
    if engine == "auto":
        try:
            import torch  # noqa: F401
        except ImportError:
            engine = "reference"
    if engine == "reference":
        logits = np.stack([R.classify(params, cfg, x) for x in ids])  # (N, n_classes)
    else:
        torch = _torch_or_reference()
        from glassformer.torch_model import from_params

        model = from_params(cfg, params, dtype=torch.float32).to(device).eval()
        out = []
        with torch.no_grad():
            for i in range(0, len(ids), batch_size):
                batch, valid = padded(ids[i : i + batch_size], 0, device)
                out.append(model(batch, valid=valid).double().cpu().numpy())  # (B, n_classes)
        logits = np.concatenate(out)
    numerics.check(logits, lambda b: ("the class logits", ids[b], None), params, cfg, fix)
    return R.softmax(logits)


def classify(
    model, tok, sentences: list[str], *, params: dict | None = None, fix: str | None = None
) -> list[int]:
    """The predicted class of each sentence, one at a time (cut to max_len, never empty).
    Non-finite logits raise `numerics.NonFiniteError` (row: the sentence's index)."""
    import torch

    pred, device = [], next(model.parameters()).device
    with torch.no_grad():
        for k, s in enumerate(sentences):
            ids = tok.encode(s)[: model.cfg.max_len] or [tok.pad_id]
            logits = model(torch.tensor([ids], device=device))  # (1, n_classes)
            describe = lambda _, x=ids: ("the class logits", x, None)  # noqa: E731
            numerics.check(logits, describe, params, model.cfg, fix, rows=[k])
            pred.append(int(logits.argmax(-1)))
    return pred
