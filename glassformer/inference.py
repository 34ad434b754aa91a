"""Using a model: token ids and sentences in, tokens, sentences, vectors or labels out.

The sentence-level layer between the engines and the programs that use them (the CLI, training's
evaluation, the explorer): choose an engine's step function, run a decoding strategy over it,
translate sentences (batched greedy with one shared KV cache, or beam search), embed and classify.
`decode.py` below it knows nothing of engines; this module joins the two.

PyTorch is imported only by the functions that need it, so the reference engine's paths
(`step_function(..., engine="reference")`, `run_decoding`) work without it. Deliberately not here:
reading user text or files, checks that name command-line flags beyond these, printing.
"""

from __future__ import annotations

import numpy as np

from glassformer import decode
from glassformer import reference as R
from glassformer.errors import GlassformerError


def step_function(engine: str, cfg, params, src, window: bool = False):
    """Next-token logits from the chosen engine (torch with its KV cache when available).

    engine: "auto" (torch if installed, else the reference engine), "torch" or "reference".
    window: a decoder reads only the last max_len ids (a sliding window past its context).
    """
    if engine in ("auto", "torch"):
        try:
            from glassformer import torch_model
        except ImportError:
            if engine == "torch":
                raise GlassformerError(
                    "--engine torch needs PyTorch: pip install 'glassformer[torch]'"
                ) from None
        else:
            return torch_model.step_fn(torch_model.from_params(cfg, params), src, window=window)
    return R.next_token_logits(params, cfg, src, window=window)


def run_decoding(
    step,
    prompt: list[int],
    *,
    max_new_tokens: int,
    eos_id: int | None,
    max_len: int | None,
    strategy: str = "greedy",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    beam_width: int = 4,
    length_penalty: float = 1.0,
):
    """Greedy, sampling or beam search (`strategy`): a `decode.Generation` or `BeamResult`."""
    limits = dict(max_new_tokens=max_new_tokens, eos_id=eos_id, max_len=max_len)
    if strategy == "beam":
        return decode.beam_search(
            step, prompt, width=beam_width, length_penalty=length_penalty, **limits
        )
    if strategy == "sample":
        return decode.sample(
            step,
            prompt,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            **limits,
        )
    return decode.greedy(step, prompt, **limits)


def translate(
    model,
    tok,
    sentences: list[str],
    beam: int = 1,
    batch_size: int = 64,
    max_len: int | None = None,
) -> list[str]:
    """Decode each sentence free-running from BOS: batched greedy with a KV cache, or beam search
    (one sentence at a time) when beam > 1."""
    import torch

    from glassformer.torch_model import many_step_fn, step_fn

    cfg = model.cfg
    limit = max_len or cfg.max_len
    srcs = [tok.encode(s)[: cfg.max_len] or [tok.unk_id or 0] for s in sentences]
    outs: list[list[int]] = []
    with torch.no_grad():
        if beam > 1:
            for src in srcs:
                r = decode.beam_search(
                    step_fn(model, src),
                    [tok.bos_id],
                    limit - 1,
                    tok.eos_id,
                    width=beam,
                    max_len=limit,
                    step_many=many_step_fn(model, src),
                )
                outs.append(r.ids[1:])
        else:
            for i in range(0, len(srcs), batch_size):
                outs += greedy_batch(
                    model,
                    srcs[i : i + batch_size],
                    tok.pad_id or 0,
                    tok.bos_id,
                    tok.eos_id,
                    limit - 1,
                )
    return [tok.decode(ids) for ids in outs]


def greedy_batch(
    model,
    srcs: list[list[int]],
    pad_id: int,
    bos_id: int,
    eos_id: int | None,
    max_new_tokens: int,
) -> list[list[int]]:
    """Greedy translation of a batch of source sequences with one shared KV cache.

    Returns each sentence's generated ids (BOS and EOS excluded). Sentences that reached EOS keep
    being fed (their outputs are ignored) until all are done or the limit is hit.
    """
    import torch

    from glassformer.torch_model import KVCache

    device = next(model.parameters()).device
    S = max(len(s) for s in srcs)
    with torch.no_grad():
        src = torch.full((len(srcs), S), pad_id, dtype=torch.long, device=device)
        for b, s in enumerate(srcs):
            src[b, : len(s)] = torch.as_tensor(s)
        src_valid = (
            torch.arange(S, device=device)[None, :]
            < torch.tensor([len(s) for s in srcs], device=device)[:, None]
        )
        cache = KVCache.empty(model.cfg.n_decoder_layers)
        new = torch.full((len(srcs), 1), bos_id, dtype=torch.long, device=device)
        out: list[list[int]] = [[] for _ in srcs]
        done = torch.zeros(len(srcs), dtype=torch.bool, device=device)
        for _ in range(max_new_tokens):
            logits = model(new, src_ids=src, src_valid=src_valid, cache=cache, last_only=True)
            nxt = logits[:, -1].argmax(-1)  # (B,)
            for b in torch.nonzero(~done).flatten().tolist():
                token = int(nxt[b])
                if token == eos_id:
                    done[b] = True
                else:
                    out[b].append(token)
            if bool(done.all()):
                break
            new = nxt[:, None]
    return out


def embed(cfg, params, ids: list[list[int]], engine: str = "torch") -> np.ndarray:
    """Sentence embeddings (N, C), unit vectors: the reference engine in float64, or the torch
    engine in float32, batched with padding."""
    if engine == "reference":
        return np.stack([R.sentence_embedding(params, cfg, x) for x in ids])  # (N, C)
    try:
        import torch
    except ImportError:
        raise GlassformerError(
            "--engine torch needs PyTorch: pip install 'glassformer[torch]', "
            "or use --engine reference"
        ) from None

    from glassformer.torch_model import from_params, sentence_embeddings

    model = from_params(cfg, params, dtype=torch.float32).eval()
    T = max(len(x) for x in ids)
    batch = torch.tensor([x + [0] * (T - len(x)) for x in ids])
    valid = torch.tensor([[True] * len(x) + [False] * (T - len(x)) for x in ids])
    with torch.no_grad():
        return sentence_embeddings(model, batch, valid).double().numpy()


def class_probabilities(cfg, params, ids: list[list[int]], engine: str = "auto", batch_size=64):
    """Each sequence's probability of every class (N, n_classes) from an encoder classifier: the
    reference engine in float64, or the torch engine in float32, batched with padding (its
    logits softmaxed in float64). engine "auto": torch if installed, else the reference."""
    if engine == "auto":
        try:
            import torch  # noqa: F401
        except ImportError:
            engine = "reference"
    if engine == "reference":
        return np.stack([R.softmax(R.classify(params, cfg, x)) for x in ids])  # (N, n_classes)
    try:
        import torch
    except ImportError:
        raise GlassformerError(
            "--engine torch needs PyTorch: pip install 'glassformer[torch]', "
            "or use --engine reference"
        ) from None
    from glassformer.torch_model import from_params

    model = from_params(cfg, params, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(ids), batch_size):
            part = ids[i : i + batch_size]
            T = max(len(x) for x in part)
            batch = torch.tensor([x + [0] * (T - len(x)) for x in part])
            valid = torch.tensor([[True] * len(x) + [False] * (T - len(x)) for x in part])
            out.append(model(batch, valid=valid).double().numpy())  # (B, n_classes) logits
    return R.softmax(np.concatenate(out))


def classify(model, tok, sentences: list[str]) -> list[int]:
    """The predicted class of each sentence, one at a time (cut to max_len, never empty)."""
    import torch

    pred = []
    with torch.no_grad():
        for s in sentences:
            ids = tok.encode(s)[: model.cfg.max_len] or [tok.pad_id]
            pred.append(int(model(torch.tensor([ids])).argmax(-1)))
    return pred
