"""Translating sentences in batches: source sentences in, translations (or n-best lists) out,
in input order, many sentences in one PyTorch forward pass with one KV cache.

`translate_iter` takes the sentences a window at a time, sorts each window by source length so
that a batch pads little, and decodes a batch at once: batched greedy (`greedy_batch`), or
batched beam search (`beam_batch`: every sentence's hypotheses in one shared KV cache, each
sentence searched by its own `decoding.Beam`, the best tokens found by a block search,
`_topk_blocks`); `translate_nbest_iter` keeps each sentence's n-best list. Non-finite logits
raise `numerics.NonFiniteError` naming the sentence.

PyTorch is imported only inside the functions. Deliberately not here: building the engine and
decoding one text (`inference.py`), decoder prompts in batches (`inference.greedy_prompts`),
the strategies themselves (`decoding.py`), reading user text or files, printing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from glassformer import decoding, numerics
from glassformer.errors import GlassformerError, template
from glassformer.inference import padded
from glassformer.recording import NOT_RECORDING


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
        src, src_valid = padded(srcs, pad_id, device)
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
        src, src_valid = padded([srcs[i] for i in live], pad_id, device)
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
