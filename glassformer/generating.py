"""A Model's text in, text out: `generate` (one text, or many: batched greedy on the PyTorch
engine), `stream` (one text's output as its tokens are chosen) and `translate` (sentences through
an encoder-decoder, batched, yielded in input order). `Model.generate` / `Model.stream` /
`Model.translate` call these with the model's `Runtime` (`m` below: engines, step functions,
checks); the work below them is `inference.py`'s, `translating.py`'s and `decoding.py`'s. One
prompt's decoding is one loop (`decoded_tokens`, over `decoding.strategy_tokens`): a generation
runs it to its end, a stream shows each token as it comes.

Deliberately not here: reading files, printing, progress bars (the command line's), the
decoding strategies themselves (`decoding.py`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import numpy as np

from glassformer import inference, translating
from glassformer.decoding import Decoding, context_slid, stop_reason, strategy_tokens
from glassformer.errors import INSTALL_TORCH, GlassformerError, InputError, param, template, verb
from glassformer.numerics import NonFiniteError
from glassformer.results import Record
from glassformer.trace import intervening


def one(m, text: str, decoding) -> str:
    """One text: a decoder's continuation (the prompt included), an encoder-decoder's output."""
    src, prompt, window = _inputs(m, text)
    out = m.decoded(prompt, src, decoding, window=window).ids
    return m.decode(out[len(prompt) :] if src is not None else out)


def _inputs(m, text: str) -> tuple[list[int] | None, list[int], bool]:
    """(src, prompt, window) of one text: a decoder's prompt is the text, sliding over its
    context (window); an encoder-decoder's source is the text and its prompt the start token."""
    window = m.cfg.arch == "decoder"  # a decoder slides over its context; a target cannot
    ids = m.encode(text, window=window)
    src, prompt = (ids, m.bos()) if m.cfg.arch == "encoder-decoder" else (None, ids)
    return src, prompt, window


def decoded_tokens(
    m, prompt: list[int], src, decoding=None, *, window=False, step=None, quiet=False
) -> Generator[int, None, object]:
    """`Model.decoded` a token at a time: yields each new token id as it is chosen (none for
    beam search), returns the `decoding.Generation` or `BeamResult`; the notes (the strategy
    implied, the window slid, why it stopped) come once, at the end, unless quiet."""
    cfg, decoding = m.cfg, decoding or Decoding()
    if step is None:
        step = m.step(src, prompt_len=len(prompt), window=window)
    limits = (decoding.max_new_tokens or cfg.max_len, m.need_tokenizer().eos_id)
    tokens = strategy_tokens(step, prompt, decoding, *limits, None if window else cfg.max_len)
    result = yield from tokens
    if not quiet:
        if decoding.implied:
            m.note(decoding.implied)
        n_new = len(result.ids) - len(prompt)
        if window and len(result.ids) > cfg.max_len:
            m.note(context_slid(len(prompt), n_new, decoding.max_new_tokens, cfg))
        m.note(stop_reason(result, len(prompt), decoding, cfg))
    return result


class Stream:
    """`Model.stream`: one generation's text as its tokens are chosen, an iterator of str.

    Greedy and sampling give one piece per new token, as soon as it is chosen; beam search gives
    one piece at its end, the best hypothesis's text (which hypothesis wins is known only then).
    A piece is what the token adds to the decoded text, decode(ids[:n]) less decode(ids[:n-1]),
    read over a few tokens before it (`CONTEXT`) so that a piece that depends on its neighbours
    reads right (a word tokenizer's spaces, a SentencePiece "▁"), and that each costs the same
    however long the text: a token that ends inside a character (a byte of UTF-8) gives "" and
    the character comes whole with the token that completes it; text still held at the end is
    one last piece. So `prompt + "".join(pieces)` is `Model.generate`'s output, the same tokens
    for the same options (the same loop: `decoded_tokens`), and the notes come once, at the end.

    prompt: the start of the output that the pieces continue (a decoder's text as its tokens
    decode; "" for an encoder-decoder). ids: the new token ids chosen so far. n_shown: how many
    of them the pieces given so far spell whole. result: the `decoding.Generation` or
    `BeamResult` once the stream has ended, else None.
    """

    CONTEXT = 4  # tokens read before a new one: what a piece's reading may depend on

    def __init__(self, m, text: str, decoding, strategy=None, max_new_tokens=None, given=None):
        """Checked before any work, as `Model.generate` checks: the options (STRATEGY_RULE),
        the beam within the vocabulary, the text (encoded now: its notes come first)."""
        from glassformer.argument_kinds import Call
        from glassformer.arguments import ARGS

        m.need_generator()
        if decoding is None:
            decoding = Decoding.settle(strategy, max_new_tokens, **(given or {}))
        ARGS["decoding"].check(decoding, "decoding", Call({}, m))
        src, prompt, window = _inputs(m, text)
        self.m, self.ids, self.n_shown, self.result = m, [], 0, None
        start = [] if src is not None else list(prompt)  # what the output decodes, BOS aside
        self.prompt = m.decode(start)
        tokens = decoded_tokens(m, prompt, src, decoding, window=window)
        self._pieces = self._read(tokens, start, 0 if src is None else len(prompt))

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> str:
        return next(self._pieces)

    def __repr__(self) -> str:
        state = "ended" if self.result is not None else "running"
        return f"<Stream of {self.m.name}: {len(self.ids)} new tokens, {state}>"

    def _read(self, tokens, ids: list[int], n_bos: int) -> Iterator[str]:
        """The pieces (see the class): `ids` the output's ids so far, grown token by token;
        the text of ids[:read] is given, ids[start:read] the context a piece is read after."""
        n_prompt = read = len(ids)
        start = max(0, read - self.CONTEXT)
        while True:
            try:
                token = next(tokens)
            except StopIteration as end:
                self.result = end.value
                break
            ids.append(token)
            self.ids.append(token)
            piece = self._piece(ids[start:read], ids[start:])
            if piece is not None:
                read = len(ids)
                start, self.n_shown = max(0, read - self.CONTEXT), read - n_prompt
            yield piece or ""
        if not self.ids:  # beam search: its best hypothesis, whole
            self.ids = self.result.ids[len(ids) + n_bos :]
            ids += self.ids
        rest = self._piece(ids[start:read], ids[start:], whole=True)
        self.n_shown = len(self.ids)
        if rest:
            yield rest

    def _piece(self, before: list[int], after: list[int], whole: bool = False) -> str | None:
        """What `after` adds to the text of `before` (its start); None while it ends inside a
        character (unless `whole`: the end of the text), or does not extend that text."""
        decode = self.m.tok.decode  # not `Model.decode`: its checks, twice a token, cost 5%
        a, b = decode(before), decode(after)
        if not b.startswith(a) or (b.endswith("\ufffd") and not whole):
            return None
        return b[len(a) :]


def _encoded(m, texts: list[str], places: list[str]) -> dict[int, list[int]]:
    """{line: ids} of the texts that are not blank (a decoder slides over a long one); a refusal
    names the text's place; all blank is refused."""
    inputs = {}
    for i, line in enumerate(texts):
        if line.strip():
            try:
                inputs[i] = m.encode(line, window=m.cfg.arch == "decoder")
            except GlassformerError as e:
                raise type(e)(f"{places[i]}: {template(e)}") from None
    if not inputs:
        raise InputError("nothing to generate: every text is blank")
    return inputs


def many(m, texts: list[str], decoding, batch_size: int, places: list[str] | None) -> list[str]:
    """Every text decoded, one output each ("" for a blank one). Greedy on the torch engine:
    batches of prompts in one KV cache, the same tokens as one prompt at a time; otherwise, and
    inside an intervention (whose functions may read one sequence's positions), one at a time.
    A refusal or non-finite logits name the text's place (`places`)."""
    _check_batch_size(batch_size)
    places = places or [f"text {n + 1}" for n in range(len(texts))]
    inputs = _encoded(m, texts, places)
    model = m.torch(m.dtype or "float64")
    try:
        if model is not None and decoding.strategy == "greedy" and not intervening():
            outs = _greedy(m, model, inputs, decoding, batch_size)
        else:
            outs = _one_by_one(m, inputs, decoding)
    except NonFiniteError as e:  # its row: the text's index
        raise e.at(places[e.row]) from None
    if decoding.implied:
        m.note(decoding.implied)
    return [outs.get(i, "") for i in range(len(texts))]


def _check_batch_size(batch_size) -> None:
    if type(batch_size) is not int or batch_size < 1:
        raise InputError(f"{param('batch_size', batch_size)}: must be at least 1")


def _greedy(m, model, inputs: dict, decoding, batch_size: int) -> dict:
    """Greedy outputs of many prompts, batched (`_greedy_batches`)."""
    outs = {}
    for chunk, batch, news in _greedy_batches(m, model, inputs, decoding, batch_size):
        if m.cfg.arch == "decoder":
            texts = [m.decode(p + n) for p, n in zip(batch, news, strict=True)]
        else:
            texts = [m.decode(n) for n in news]
        outs.update(zip(chunk, texts, strict=True))
    return outs


def _greedy_batches(m, model, inputs: dict, decoding, batch_size: int, recorder=None):
    """(the texts' indices, their ids, the new ids) of each batch of greedy decoding, shortest
    first, so that a batch pads little. Non-finite logits: a NonFiniteError whose row is the
    text's index. recorder: what the decoding loops file their steps with (`recording`)."""
    cfg, tok = m.cfg, m.tok
    order = sorted(inputs, key=lambda i: len(inputs[i]))
    max_new = decoding.max_new_tokens or cfg.max_len
    limit = min(max_new, cfg.max_len - 1)  # an encoder-decoder's target positions, BOS included
    checks = dict(params=m.params, fix=m.fix) | ({} if recorder is None else {"recorder": recorder})
    for b0 in range(0, len(order), batch_size):
        chunk = order[b0 : b0 + batch_size]
        batch = [inputs[i] for i in chunk]
        try:
            if cfg.arch == "decoder":
                pad = tok.pad_id or 0
                news = inference.greedy_prompts(model, batch, max_new, tok.eos_id, pad, **checks)
            else:
                args = (tok.pad_id or 0, m.bos()[0], tok.eos_id, limit)
                news = translating.greedy_batch(model, batch, *args, **checks)
        except NonFiniteError as e:
            raise NonFiniteError(template(e), chunk[e.row]) from None
        yield chunk, batch, news


def _one_by_one(m, inputs: dict, decoding) -> dict:
    window, outs = m.cfg.arch == "decoder", {}
    for i, ids in inputs.items():
        src, prompt = (ids, m.bos()) if m.cfg.arch == "encoder-decoder" else (None, ids)
        try:
            out = m.decoded(prompt, src, decoding, window=window, quiet=True)
        except NonFiniteError as e:
            raise NonFiniteError(template(e), i) from None
        outs[i] = m.decode(out.ids[len(prompt) :] if src is not None else out.ids)
    return outs


def translations(
    m, sentences: list[str], beam: int, n_best: int | None, dtype, places, align=None
) -> Iterator:
    """See `Runtime.translations`. Checked before any work: an encoder-decoder, the beam within
    the vocabulary, n_best within the beam, every sentence encodable. A sentence whose
    translation reached the decoder's max_len before an end token is named in a note.

    align: (layer, head) pairs (`recording.alignment_heads`): each item is then (translation or
    n-best list, its best translation's `alignment` record), the translations unchanged."""
    cfg = m.cfg
    if cfg.arch != "encoder-decoder":
        raise GlassformerError(
            f"{m.name} is a {cfg.arch} model; translate needs an encoder-decoder"
        )
    if beam > cfg.vocab_size:
        raise InputError(
            f"{param('beam', beam)} is more than the vocabulary ({cfg.vocab_size} tokens); use at "
            "most the vocabulary size"
        )
    if n_best is not None and n_best > beam:
        raise InputError(
            f"{param('n_best', n_best)} is more than the beam width {beam}: a beam keeps at "
            f"most {beam} candidates; add {param('beam', n_best)}"
        )
    if not sentences:
        raise InputError(f"nothing to translate: give {param('sentences')}")
    places = places or [f"sentence {n + 1}" for n in range(len(sentences))]
    for s, place in zip(sentences, places, strict=True):
        try:
            m.encode(s)
        except GlassformerError as e:
            raise type(e)(f"{place}: {template(e)}") from None
    model = m.torch(dtype or m.dtype or "float32")
    if model is None and m.engine == "reference":
        raise GlassformerError(
            f"translate runs on the PyTorch engine and this model was loaded with "
            f"{param('engine', 'reference')}: decode in float64 with {verb('generate')} "
            f"(greedy or beam), or load it with {param('engine', 'auto')}"
        )
    if model is None:
        raise GlassformerError(f"translate needs PyTorch, which is not installed: {INSTALL_TORCH}")
    if align is None:
        return _translated(m, model, sentences, beam, n_best, places)
    return _aligned(m, model, sentences, beam, n_best, places, align)


def _translated(m, model, sentences, beam, n_best, places, recorder=None) -> Iterator:
    cut: set[int] = set()  # sentences that reached max_len before an end token
    checks = dict(cut=cut, params=m.params, fix=f"try {param('dtype', 'float64')}")
    if recorder is not None:
        checks["recorder"] = recorder
    if n_best:
        results = translating.translate_nbest_iter(model, m.tok, sentences, n_best, beam, **checks)
    else:
        results = translating.translate_iter(model, m.tok, sentences, beam=beam, **checks)
    try:
        yield from results
    except NonFiniteError as e:  # its row: the sentence's index
        raise e.at(places[e.row]) from None
    if cut:
        m.note(cut_note(cut, places, m.cfg.max_len))


def cut_note(cut: set[int], places: list[str], max_len: int) -> str:
    """The note naming the translations that reached the decoder's max_len before an end token
    (`cut`: their indices into `places`, which name each sentence's place in the input)."""
    named = "; ".join(places[i] for i in sorted(cut)[:5]) + ("; ..." if len(cut) > 5 else "")
    return (
        f"{len(cut)} of {len(places)} translation(s) reached the decoder's max_len {max_len} "
        f"before an end token, so they may be cut short or repeat themselves ({named})"
    )


def _aligned(m, model, sentences, beam, n_best, places, pairs) -> Iterator:
    """(translation, alignment record) per sentence, recorded on the fast path (`Recorder`)."""
    from glassformer.recording import Recorder

    recorder = Recorder(model, mean_of=pairs)
    with recorder:
        for n, out in enumerate(_translated(m, model, sentences, beam, n_best, places, recorder)):
            ids, values = recorder.done.pop(n)
            yield out, alignment(m, sentences[n], ids, values["mean"], pairs)


def alignment(m, source: str, ids: list[int], rows: list, pairs) -> dict:
    """One line of `translate --alignments`: the source and target pieces (the target without
    its end token), the cross-attention rows of the target pieces averaged over `pairs`, each
    target piece's most attended source piece, and the word alignment (`recording.
    word_alignment`: "i-j", source word i, target word j)."""
    from glassformer import recording

    src = m.tok.encode(source)[: m.cfg.max_len] or [m.tok.unk_id or 0]  # as `_decoded` reads it
    A = np.array(rows, dtype=np.float64).reshape(len(ids), len(src))  # (T, S)
    kind = m.token_kind
    src_words = recording.words_of(m.readable(src), kind)
    tgt_words = recording.words_of(m.readable(ids), kind)
    argmax, words = recording.word_alignment(A, src_words, tgt_words)
    return {
        "source": m.pieces(src),
        "target": m.pieces(ids),
        "heads": recording.heads_named(pairs) if len(pairs) < _all_pairs(m.cfg) else "all",
        "attention": A.tolist(),
        "source_words": src_words,
        "target_words": tgt_words,
        "argmax": argmax,
        "alignment": " ".join(words),
    }


def _all_pairs(cfg) -> int:
    return cfg.n_decoder_layers * cfg.n_heads


# -- generate --record ---------------------------------------------------------------------------


def recorded(m, texts: list[str], decoding, batch_size: int, places, steps, top_k: int) -> list:
    """`generate --record` (`Model.record`): per text, (its output, its record): the steps
    named (`recording.select_steps`) and the top_k next tokens at every new token, read on the
    PyTorch engine's KV cache (`recording.Recorder`). Greedy is batched
    (`inference.greedy_prompts` / `translating.greedy_batch`; one text at a time inside an
    intervention, as `many`); sampling and beam search go one
    text at a time, each model call filed by the ids it continued, so the record follows the
    chosen sequence. The outputs are those of `many`. A blank text gives ("", None)."""
    from glassformer.recording import Recorder, select_steps

    if type(top_k) is not int or top_k < 0:
        raise InputError(f"{param('top_tokens', top_k)}: must be an integer >= 0")
    _check_batch_size(batch_size)
    steps = select_steps(m.cfg, steps)
    if m.engine == "reference":
        raise GlassformerError(
            f"{verb('record')} reads the PyTorch engine's decoding: drop "
            f"{param('engine', 'reference')} (the reference engine's every step: {verb('trace')})"
        )
    model = m.torch(m.dtype or "float64")
    if model is None:
        raise GlassformerError(
            f"{verb('record')} reads the PyTorch engine's decoding: {INSTALL_TORCH}"
        )
    places = places or [f"text {n + 1}" for n in range(len(texts))]
    inputs = _encoded(m, texts, places)
    recorder = Recorder(model, steps=steps, top_k=top_k)
    try:
        with recorder:
            if decoding.strategy == "greedy" and not intervening():  # as `many`
                news = _greedy_recorded(m, model, inputs, decoding, batch_size, recorder)
            else:
                news = {i: _one_recorded(m, ids, decoding, recorder) for i, ids in inputs.items()}
    except NonFiniteError as e:  # its row: the text's index
        raise e.at(places[e.row]) from None
    if decoding.implied:
        m.note(decoding.implied)
    out = []
    for i in range(len(texts)):
        if i not in inputs:
            out.append(("", None))
            continue
        new, per = news[i]
        ids = inputs[i]
        text = m.decode(ids + new) if m.cfg.arch == "decoder" else m.decode(new)
        out.append((text, _record(m, ids, new, per, top_k)))
    return out


def _queries(m, n_prompt: int, n: int) -> list[int]:
    """The keys of each new token's self-attention row: the tokens so far (a decoder's prompt
    and what it generated, within its max_len window; an encoder-decoder's BOS and output)."""
    if m.cfg.arch == "decoder":
        return [min(m.cfg.max_len, n_prompt + t) for t in range(n)]
    return [t + 1 for t in range(n)]


def _greedy_recorded(m, model, inputs: dict, decoding, batch_size: int, recorder) -> dict:
    from glassformer import recording

    cfg = m.cfg
    limit = min(decoding.max_new_tokens or cfg.max_len, cfg.max_len - 1)
    outs = {}
    for chunk, batch, news in _greedy_batches(m, model, inputs, decoding, batch_size, recorder):
        if cfg.arch == "encoder-decoder":  # EOS's step, when it ended there
            news = [n + [m.tok.eos_id] if len(n) < limit else n for n in news]
        for b, (i, ids, new) in enumerate(zip(chunk, batch, news, strict=True)):
            per = recorder.rows(b, len(new))
            n_keys = len(ids) if cfg.arch == "encoder-decoder" else None
            outs[i] = (new, recording.as_lists(per, n_keys, _queries(m, len(ids), len(new))))
        recorder.clear()
    return outs


def _one_recorded(m, ids: list[int], decoding, recorder) -> tuple:
    """Sampling or beam search of one text, each step filed under the ids it continued."""
    from glassformer import recording

    enc_dec = m.cfg.arch == "encoder-decoder"
    src, prompt = (ids, m.bos()) if enc_dec else (None, ids)
    base = m.step(src, prompt_len=len(prompt), window=not enc_dec)
    filed: dict[tuple, object] = {}

    def step(seq):
        z = base(seq)
        recorder.step()
        filed[tuple(seq)] = recorder.recorded.pop()
        return z

    result = m.decoded(prompt, src, decoding, window=not enc_dec, step=step, quiet=True)
    new = result.ids[len(prompt) :]
    per = [
        {k: v[0] for k, v in filed[tuple(result.ids[: len(prompt) + t])].values.items()}
        for t in range(len(new))
    ]
    n_keys = len(ids) if enc_dec else None
    return new, recording.as_lists(per, n_keys, _queries(m, len(prompt), len(new)))


def _record(m, ids: list[int], new: list[int], values: dict, top_k: int) -> Record:
    """One line of `generate --record`: the input's pieces (a decoder's prompt, an encoder-
    decoder's source), the new tokens (EOS included when reached) and, per new token, each
    recorded step's values and the top_k tokens by log-probability."""
    steps = {
        k: [a.tolist() for a in v] for k, v in values.items() if k not in ("top_k", "top_logp")
    }
    record = Record(m.pieces(ids), new, m.pieces(new), steps)
    if top_k:
        record.top_k = [
            {"ids": t.tolist(), "tokens": m.pieces(t.tolist()), "logprobs": lp.tolist()}
            for t, lp in zip(values["top_k"], values["top_logp"], strict=True)
        ]
    return record
