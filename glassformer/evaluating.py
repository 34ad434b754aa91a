"""A Model scored on data (`Model.evaluate`, what `glassformer eval` prints): a decoder's loss and
perplexity over a text in windows of its context, an encoder-decoder's BLEU and chrF on
translation pairs (batched beam search), a classifier's accuracy at telling the pairs' languages
apart. The PyTorch engine in float32 on the model's device, as training's evaluation runs.

Deliberately not here: training (`train.py`), reading options, printing.
"""

from __future__ import annotations

from glassformer import data as D
from glassformer import metrics, numerics
from glassformer.errors import InputError, param, verb


def evaluate(m, data: str, beam: int | None = None, limit: int | None = None) -> str:
    """The one-line summary of the model whose `Runtime` is `m` on `data` (a shipped corpus name
    or a file); limit: only the first N tokens or pairs."""
    import torch

    from glassformer.torch_model import from_params

    cfg = m.cfg
    if beam is not None and cfg.arch != "encoder-decoder":
        raise InputError(
            f"{param('beam')} is for translation; {m.name} is arch={cfg.arch!r}: drop it"
        )
    model = from_params(cfg, m.params, dtype=torch.float32).to(m.device).eval()
    exact = {"decoder": "generate", "encoder": "classify"}.get(cfg.arch)
    if exact:
        exact = verb(exact, param("engine", "reference"))
    else:
        exact = verb("translate", param("dtype", "float64"))
    fix = f"{verb('evaluate')} runs in float32 only; {exact} computes in float64"
    checks = dict(params=m.params, fix=fix)
    if cfg.arch == "decoder":
        return _perplexity(m, model, data, limit, checks)
    pairs = D.read_pairs(data)
    if limit is not None:  # (0 is refused at the entry: Model.evaluate)
        pairs = pairs[:limit]
    if cfg.arch == "encoder-decoder":
        return _translation(m, model, pairs, beam or 4, checks)
    from glassformer.inference import classify

    ex = D.language_id(pairs)
    if not ex:
        raise InputError(
            f"{data} has no sentence to score: language_id leaves out a sentence found on both "
            "sides of a pair ('No.'), and these pairs hold only such; give at least one pair "
            "whose sides differ"
        )
    try:
        pred = classify(model, m.tok, [s for s, _ in ex], **checks)
    except numerics.NonFiniteError as e:
        raise e.at(f"sentence {ex[e.row][0][:60]!r}") from None
    return f"accuracy {metrics.accuracy(pred, [y for _, y in ex]):.4f} ({len(ex)} sentences)"


def _perplexity(m, model, data: str, limit, checks: dict) -> str:
    """Summed cross-entropy over windows of max_len tokens of the text."""
    import torch

    cfg = m.cfg
    ids = torch.tensor(m.tok.encode(D.read_text(data)), device=m.device)
    if limit is not None:  # (0 is refused at the entry: Model.evaluate)
        ids = ids[:limit]
    if len(ids) < 2:  # every predicted token needs one before it
        kept = f" (the first {limit} kept by {param('limit')})" if limit is not None else ""
        raise InputError(
            f"{data} gives {len(ids)} token{kept}; a loss needs at least 2, one read and the "
            "next predicted: give more text" + (f" or a larger {param('limit')}" if kept else "")
        )
    T, total, n = cfg.max_len, 0.0, 0
    with torch.no_grad():
        for i in range(0, len(ids) - 1, T):
            x, y = ids[i : i + T][None], ids[i + 1 : i + T + 1][None]
            x = x[:, : y.shape[1]]
            logits = model(x)  # (1, T, V)
            what = f"the logits of tokens {i + 1}-{i + x.shape[1]}"
            describe = lambda _, w=what, x=x: (w, x[0].tolist(), None)  # noqa: E731
            numerics.check(logits, describe, cfg=cfg, **checks)
            loss = torch.nn.functional.cross_entropy(logits[0], y[0], reduction="sum")
            total, n = total + loss.item(), n + y.numel()
    return (
        f"loss {total / n:.4f} perplexity {metrics.perplexity(total / n):.3f} "
        f"({n} tokens, windows of {T})"
    )


def _translation(m, model, pairs, beam: int, checks: dict) -> str:
    """BLEU and chrF of the translations of the pairs' sources against their targets."""
    from glassformer.generating import cut_note
    from glassformer.translating import translate_iter

    cut: set[int] = set()  # pairs whose translation reached max_len before an end token
    try:
        srcs = [s for s, _ in pairs]
        hyps = list(translate_iter(model, m.tok, srcs, beam, cut=cut, **checks))
    except numerics.NonFiniteError as e:
        raise e.at(f"pair {e.row + 1}") from None
    if cut:
        m.note(cut_note(cut, [f"pair {k}" for k in range(1, len(pairs) + 1)], m.cfg.max_len))
    return metrics.translation_scores(hyps, [t for _, t in pairs]).summary()
