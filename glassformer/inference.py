"""Using a model: token ids and sentences in, tokens, sentences, vectors or labels out.

The sentence-level layer between the engines and the programs that use them (the CLI, training's
evaluation, the explorer): build the PyTorch engine in a dtype (float64, float32, or int8 through
`quantize.py`), choose an engine's step function, run a decoding strategy over it, continue many
decoder prompts at once (batched greedy, left-padded into one KV cache), translate sentences
(batched greedy, or batched beam search: many sentences' hypotheses in one shared KV cache, each
sentence searched by its own `decoding.Beam`; its n-best list if asked), embed and classify.
`decoding.py` below it knows nothing of engines; this module joins the two.

Every function here that returns numbers checks them (`numerics.check`: one isfinite per step
or batch) and raises a `NonFiniteError` naming the input and the step where NaN or infinity
starts, never a silent answer made of them. `params` (the float weights) lets it name that step
with the reference engine, `fix` says what to do when only the lower precision overflows.

Not here: reading user text or files, printing. PyTorch is imported only where it is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from glassformer import decoding, numerics
from glassformer import reference as R
from glassformer.errors import INSTALL_TORCH, GlassformerError, InputError, param, template
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


def torch_engine(cfg, params, dtype: str = "float32"):
    """The PyTorch engine on these weights, for inference (eval mode): float64, float32, or int8
    (float32 with its linear layers quantized: `quantize.int8`)."""
    import torch

    from glassformer.torch_model import from_params, inference_layout

    if dtype not in DTYPES:
        raise GlassformerError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    if dtype == "int8":
        from glassformer.quantize import check_int8, int8

        check_int8()  # before the float32 model is built
        return int8(from_params(cfg, params, dtype=torch.float32).eval())
    return inference_layout(from_params(cfg, params, dtype=getattr(torch, dtype)).eval())


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
    """Greedy, sampling or beam search (`strategy`): a `decoding.Generation` or `BeamResult`."""
    limits = dict(max_new_tokens=max_new_tokens, eos_id=eos_id, max_len=max_len)
    if strategy == "beam":
        return decoding.beam_search(
            step, prompt, width=beam_width, length_penalty=length_penalty, **limits
        )
    if strategy == "sample":
        return decoding.sample(
            step,
            prompt,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            **limits,
        )
    return decoding.greedy(step, prompt, **limits)


def translate(
    model,
    tok,
    sentences: list[str],
    beam: int = 1,
    batch_size: int = 64,
    max_len: int | None = None,
    length_penalty: float = 1.0,
    *,
    params: dict | None = None,
    fix: str | None = None,
) -> list[str]:
    """Decode each sentence free-running from BOS: batched greedy with a KV cache, or batched
    beam search when beam > 1 (`translate_iter`, collected)."""
    args = (beam, batch_size, max_len, length_penalty)
    return list(translate_iter(model, tok, sentences, *args, params=params, fix=fix))


def translate_iter(
    model,
    tok,
    sentences: list[str],
    beam: int = 1,
    batch_size: int = 64,
    max_len: int | None = None,
    length_penalty: float = 1.0,
    window: int | None = None,
    cut: set[int] | None = None,
    *,
    params: dict | None = None,
    fix: str | None = None,
    recorder=NOT_RECORDING,
) -> Iterator[str]:
    """The translations of `sentences`, yielded in input order as soon as they are known.

    The sentences are taken `window` at a time (default 8 batches), sorted by source length
    inside the window so that a batch pads little, and decoded `batch_size` sentences at a time
    (`greedy_batch`, or `beam_batch` with `beam` hypotheses each); a window's translations come
    out in input order as its batches finish. `cut`, if given, receives the index of every
    sentence whose translation reached the length limit before an end token (cut short, or
    repeating itself), by the time that translation is yielded. Non-finite logits raise
    `numerics.NonFiniteError`, its `row` the sentence's index. `recorder`, a
    `recording.Recorder` hooked on `model`, receives each translation's values in its `done`
    by the time it is yielded (the translations are the same with or without it).
    """
    args = (beam, batch_size, max_len, length_penalty, window, cut)
    for ids in _decoded(model, tok, sentences, *args, params=params, fix=fix, recorder=recorder):
        yield tok.decode(ids)


@dataclass(frozen=True)
class Candidate:
    """One translation of an n-best list: the text, the score beam search ranks by (logprob /
    tokens^length_penalty), the summed log-probability of its tokens (the end token included
    when it has one), and whether it ended with the end token."""

    text: str
    score: float
    logprob: float
    n_tokens: int
    finished: bool


def translate_nbest_iter(
    model,
    tok,
    sentences: list[str],
    n_best: int,
    beam: int = 4,
    batch_size: int = 64,
    max_len: int | None = None,
    length_penalty: float = 1.0,
    window: int | None = None,
    cut: set[int] | None = None,
    *,
    params: dict | None = None,
    fix: str | None = None,
    recorder=NOT_RECORDING,
) -> Iterator[list[Candidate]]:
    """Each sentence's `n_best` best translations from a beam of `beam` (best first, the first
    being `translate_iter`'s translation), yielded in input order as `translate_iter` yields;
    `cut` as there, for the first candidate.

    A beam keeps at most `beam` finished hypotheses, so `n_best` may not exceed it; a sentence
    yields fewer when its beam ended with fewer candidates. `recorder` as in `translate_iter`
    (the first candidate's values)."""
    if not 1 <= n_best <= beam:
        raise GlassformerError(
            f"n_best must be between 1 and the beam width ({beam}), got {n_best}; "
            "widen the beam to see more candidates"
        )
    args = (beam, batch_size, max_len, length_penalty, window, cut, True)
    for result in _decoded(model, tok, sentences, *args, params=params, fix=fix, recorder=recorder):
        yield [
            Candidate(
                tok.decode(h.ids[1:]),
                h.score(length_penalty),
                h.logprob,
                h.n_generated,
                h.finished,
            )
            for h in result.ranked[:n_best]
        ]


def _decoded(
    model,
    tok,
    sentences,
    beam,
    batch_size,
    max_len,
    length_penalty,
    window,
    cut,
    keep_beams=False,
    *,
    params=None,
    fix=None,
    recorder=NOT_RECORDING,
):
    """translate_iter's work: each sentence's generated ids (or, with keep_beams, its whole
    `decoding.BeamResult`, by beam search even at width 1), in input order."""
    cfg = model.cfg
    limit = max_len or cfg.max_len
    window = window or 8 * batch_size
    srcs = [tok.encode(s)[: cfg.max_len] or [tok.unk_id or 0] for s in sentences]
    pad = tok.pad_id or 0
    for w0 in range(0, len(srcs), window):
        order = sorted(range(w0, min(w0 + window, len(srcs))), key=lambda i: len(srcs[i]))
        done: dict[int, object] = {}
        next_out = w0
        for b0 in range(0, len(order), batch_size):
            chunk = order[b0 : b0 + batch_size]
            batch = [srcs[i] for i in chunk]
            checks = dict(params=params, fix=fix, recorder=recorder)
            try:
                if beam > 1 or keep_beams:
                    args = (tok.bos_id, tok.eos_id, beam, limit - 1, limit, length_penalty, pad)
                    results = beam_batch(model, batch, *args, **checks)
                    outs = results if keep_beams else [r.ids[1:] for r in results]
                    ended = [r.best.finished for r in results]
                else:
                    outs = greedy_batch(
                        model, batch, pad, tok.bos_id, tok.eos_id, limit - 1, **checks
                    )
                    ended = [len(o) < limit - 1 for o in outs]  # fewer tokens: it stopped at EOS
            except numerics.NonFiniteError as e:  # its row: the batch's; the sentence's here
                raise numerics.NonFiniteError(template(e), chunk[e.row]) from None
            recorder.finish(chunk, batch, results if beam > 1 or keep_beams else outs)
            done.update(zip(chunk, outs, strict=True))
            if cut is not None:
                cut.update(i for i, e in zip(chunk, ended, strict=True) if not e)
            while next_out in done:
                yield done.pop(next_out)
                next_out += 1


def _padded(srcs: list[list[int]], pad_id: int, device):
    """Source id lists -> (B, S) ids padded with pad_id, and (B, S) real-token flags."""
    import torch

    S = max(len(s) for s in srcs)
    src = torch.full((len(srcs), S), pad_id, dtype=torch.long, device=device)
    for b, s in enumerate(srcs):
        src[b, : len(s)] = torch.as_tensor(s)
    lengths = torch.tensor([len(s) for s in srcs], device=device)
    return src, torch.arange(S, device=device)[None, :] < lengths[:, None]


def greedy_batch(
    model,
    srcs: list[list[int]],
    pad_id: int,
    bos_id: int,
    eos_id: int | None,
    max_new_tokens: int,
    *,
    params: dict | None = None,
    fix: str | None = None,
    recorder=NOT_RECORDING,
) -> list[list[int]]:
    """Greedy translation of a batch of source sequences with one shared KV cache.

    Returns each sentence's generated ids (BOS and EOS excluded). Sentences that reached EOS keep
    being fed (their outputs are ignored) until all are done or the limit is hit. Non-finite
    logits of a sentence not yet done raise `numerics.NonFiniteError` (row: its index in srcs).
    `recorder` (`recording.Recorder` on `model`) files each step's values (`Recorder.rows`).
    """
    import torch

    from glassformer.torch_model import KVCache

    device = next(model.parameters()).device
    with torch.no_grad():
        src, src_valid = _padded(srcs, pad_id, device)
        cache = KVCache.empty(model.cfg.n_decoder_layers)
        new = torch.full((len(srcs), 1), bos_id, dtype=torch.long, device=device)
        out: list[list[int]] = [[] for _ in srcs]
        done = torch.zeros(len(srcs), dtype=torch.bool, device=device)
        for _ in range(max_new_tokens):
            logits = model(new, src_ids=src, src_valid=src_valid, cache=cache, last_only=True)
            recorder.step()
            live = torch.nonzero(~done).flatten().tolist()

            def describe(r, live=live):
                b = live[r]
                what = f"translation stopped at new token {len(out[b]) + 1}: the next-token logits"
                return what, [bos_id, *out[b]], srcs[b]

            shown = logits[:, -1] if len(live) == len(srcs) else logits[live, -1]  # (B live, V)
            numerics.check(shown, describe, params, model.cfg, fix, rows=live)
            nxt = logits[:, -1].argmax(-1)  # (B,)
            for b in live:
                token = int(nxt[b])
                if token == eos_id:
                    done[b] = True
                else:
                    out[b].append(token)
            if bool(done.all()):
                break
            new = nxt[:, None]
    return out


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


def beam_batch(
    model,
    srcs: list[list[int]],
    bos_id: int,
    eos_id: int | None,
    width: int,
    max_new_tokens: int,
    max_len: int | None = None,
    length_penalty: float = 1.0,
    pad_id: int = 0,
    *,
    params: dict | None = None,
    fix: str | None = None,
    recorder=NOT_RECORDING,
) -> list[decoding.BeamResult]:
    """Beam search for many source sequences at once, each a `decoding.Beam` of its own.

    The KV cache holds one row per live hypothesis of every unfinished sentence. Each step runs
    the decoder once on the rows' last tokens, takes each row's `width` best tokens (`_top`),
    lets every sentence's Beam keep its best candidates, then reorders the cache rows to follow
    the surviving hypotheses (finished sentences drop out). Per sentence the result is
    `decoding.beam_search` over the same model, up to floating-point rounding. Non-finite logits
    of a hypothesis raise `numerics.NonFiniteError` (row: its sentence's index in srcs).
    `recorder` files each step's values with the rows' hypotheses (`Recorder.path`).
    """
    import torch

    from glassformer.torch_model import KVCache

    device = next(model.parameters()).device
    beams = [
        decoding.Beam([bos_id], max_new_tokens, eos_id, width, length_penalty, max_len)
        for _ in srcs
    ]
    live = [i for i, b in enumerate(beams) if not b.done]  # sentences with rows in the cache
    if not live:
        return [b.result() for b in beams]
    with torch.no_grad():
        src, src_valid = _padded([srcs[i] for i in live], pad_id, device)
        cache = KVCache.empty(model.cfg.n_decoder_layers)
        new = torch.full((len(live), 1), bos_id, dtype=torch.long, device=device)
        layout = list(live)  # the sentence of each cache row
        while True:
            logits = model(new, src_ids=src, src_valid=src_valid, cache=cache, last_only=True)
            src = src_valid = None  # the encoder ran once; its output is in the cache
            recorder.step([(i, beams[i].alive) for i in live])

            def describe(r, layout=layout, live=live):
                h = [h for i in live for h in beams[i].alive][r]
                what = f"translation stopped at new token {len(h.ids)}: the next-token logits"
                return what, h.ids, srcs[layout[r]]

            numerics.check(logits[:, -1], describe, params, model.cfg, fix, rows=layout)
            tokens, logps = _top(logits[:, -1], width)
            row, still, index = 0, [], []
            for i in live:
                b, n = beams[i], len(beams[i].alive)
                b.advance(tokens[row : row + n], logps[row : row + n])
                if not b.done:
                    still.append(i)
                    index += [row + p for p in b.parents]
                row += n
            live = still
            if not live:
                break
            # A sentence's rows share its encoder output and cross-attention keys and values:
            # those move only when the sentence of some row changes.
            rows = [i for i in live for _ in beams[i].alive]
            cache.select_rows(torch.tensor(index, device=device), cross=rows != layout)
            layout = rows
            last = [h.ids[-1] for i in live for h in beams[i].alive]
            new = torch.tensor(last, dtype=torch.long, device=device)[:, None]
    return [b.result() for b in beams]


def _top(logits, width: int):
    """Each row's `width` best tokens and their log-probabilities, best first with ties to the
    lower id (as `decoding.top_tokens`): (n, width) NumPy arrays, float64.

    The choice is made on the logits themselves (the log-softmax keeps their order), by
    `_topk_blocks`; topk does not promise an order among equal values, so a row with a tie among
    its width+1 best is sorted stably instead. Only the chosen get a log-probability, logit -
    logsumexp, the row's logsumexp read off its best token (logit - log-softmax in the logits'
    precision, where the best token's log-probability is small and exact to a few ulps): a
    float64 log-softmax of every row cost more than the float32 output projection that made it.
    """
    import torch

    k = min(width + 1, logits.shape[-1])
    values, tokens = _topk_blocks(logits, k)  # (n, k), best first
    tied = (values[:, 1:] == values[:, :-1]).any(-1)
    if bool(tied.any()):
        rows = torch.nonzero(tied).flatten()
        v, t = logits[rows].sort(dim=-1, descending=True, stable=True)
        values[rows], tokens[rows] = v[:, :k], t[:, :k]
    best_logp = logits.log_softmax(-1).gather(1, tokens[:, :1]).to(torch.float64)  # (n, 1)
    lse = values[:, :1].to(torch.float64) - best_logp  # (n, 1)
    logps = values[:, :width].to(torch.float64) - lse  # (n, width)
    return tokens[:, :width].cpu().numpy(), logps.cpu().numpy()


def _topk_blocks(x, k: int, block: int = 64):
    """x.topk(k) of each row of x (n, V), 2-3x faster for small k and large V: the k best values
    lie in the k blocks (of `block` columns) with the largest maxima, so only those are searched.
    The values are exact; among equal values the order is unspecified, as with topk."""
    import torch

    n, V = x.shape
    G = -(-V // block)  # blocks per row
    if G <= k:
        return x.topk(k, dim=-1)
    if V < G * block:
        x = torch.nn.functional.pad(x, (0, G * block - V), value=float("-inf"))
    blocks = x.view(n, G, block)
    chosen = blocks.amax(-1).topk(k, dim=-1).indices  # (n, k) block numbers
    cand = blocks.gather(1, chosen[..., None].expand(n, k, block)).view(n, k * block)
    values, pos = cand.topk(k, dim=-1)  # (n, k)
    return values, chosen.gather(1, pos // block) * block + pos % block


def embed(
    cfg, params, ids: list[list[int]], engine: str = "torch", fix: str | None = None
) -> np.ndarray:
    """Sentence embeddings (N, C), unit vectors: the reference engine in float64, or the torch
    engine in float32, batched with padding. Non-finite values raise `numerics.NonFiniteError`
    (row: the sequence's index)."""
    if engine == "reference":
        E = np.stack([R.sentence_embedding(params, cfg, x) for x in ids])  # (N, C)
    else:
        torch = _torch_or_reference()
        from glassformer.torch_model import from_params, sentence_embeddings

        model = from_params(cfg, params, dtype=torch.float32).eval()
        with torch.no_grad():
            E = sentence_embeddings(model, *_padded(ids, 0, "cpu")).double().numpy()
    numerics.check(E, lambda b: ("the sentence embedding's values", ids[b], None), params, cfg, fix)
    return E


def _torch_or_reference():
    """torch, or one line saying how to get it or to use the reference engine instead."""
    try:
        import torch
    except ImportError:
        raise GlassformerError(
            f"{param('engine', 'torch')} needs PyTorch: {INSTALL_TORCH}, or use "
            f"{param('engine', 'reference')}"
        ) from None
    return torch


def class_probabilities(
    cfg, params, ids: list[list[int]], engine: str = "auto", batch_size=64, fix: str | None = None
):
    """Each sequence's probability of every class (N, n_classes) from an encoder classifier: the
    reference engine in float64, or the torch engine in float32, batched with padding (its
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

        model = from_params(cfg, params, dtype=torch.float32).eval()
        out = []
        with torch.no_grad():
            for i in range(0, len(ids), batch_size):
                batch, valid = _padded(ids[i : i + batch_size], 0, "cpu")
                out.append(model(batch, valid=valid).double().numpy())  # (B, n_classes) logits
        logits = np.concatenate(out)
    numerics.check(logits, lambda b: ("the class logits", ids[b], None), params, cfg, fix)
    return R.softmax(logits)


def classify(
    model, tok, sentences: list[str], *, params: dict | None = None, fix: str | None = None
) -> list[int]:
    """The predicted class of each sentence, one at a time (cut to max_len, never empty).
    Non-finite logits raise `numerics.NonFiniteError` (row: the sentence's index)."""
    import torch

    pred = []
    with torch.no_grad():
        for k, s in enumerate(sentences):
            ids = tok.encode(s)[: model.cfg.max_len] or [tok.pad_id]
            logits = model(torch.tensor([ids]))  # (1, n_classes)
            numerics.check(
                logits,
                lambda _, x=ids: ("the class logits", x, None),
                params,
                model.cfg,
                fix,
                rows=[k],
            )
            pred.append(int(logits.argmax(-1)))
    return pred
