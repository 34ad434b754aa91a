"""The verbs of a `Model` that write text: `generate` (greedy, sampling or beam search),
`stream` (its tokens as they come), `record` (what the fast path computed per new token),
`translate` and `alignments`. `GeneratingVerbs` is a base class of `Model` (model.py), which
checks every argument of these methods against `glassformer.arguments`' table as it checks its
own; a user calls them on the Model, and `help(glassformer.Model)` shows them there.

Each method is the face of a command's work and holds none of it: decoding is
`generating.py`'s, `decoding.py`'s and `inference.py`'s, reached through `self.runtime`
(`runtime.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

from glassformer import generating, results
from glassformer.decoding import Decoding
from glassformer.runtime import Runtime


class GeneratingVerbs:
    """A Model's verbs that write text (a base class of `Model`; see the module)."""

    runtime: Runtime

    def generate(
        self,
        text: str | list[str],
        *,
        max_new_tokens: int | None = None,
        strategy: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        beam_width: int | None = None,
        length_penalty: float | None = None,
        decoding: Decoding | None = None,
        batch_size: int = 32,
        places: list[str] | None = None,
    ) -> str | list[str]:
        """What `glassformer generate` prints: a decoder continues the text (the output includes
        it), an encoder-decoder decodes from BOS with the text as its source. A sampling option
        without `strategy` means "sample", a beam option "beam" (a note says so); an option of
        another strategy than the one given is refused.

        Parameters
        ----------
        text : str or list of str
            One text, or a list (one output each; greedy on the torch engine: batched, the same
            tokens as one at a time).
        max_new_tokens : int, optional
            At most this many new tokens (default: the decoder's max_len).
        strategy : {"greedy", "sample", "beam"}, optional
            Default: greedy, or what the options given imply.
        temperature : float, optional
            Sampling: divides the logits (default 1.0).
        top_k : int, optional
            Sampling: only the k likeliest tokens.
        top_p : float, optional
            Sampling: only the likeliest tokens whose probabilities sum to p (nucleus).
        seed : int, optional
            Sampling: the random generator's seed (default: unseeded).
        beam_width : int, optional
            Beam search: hypotheses kept (default 4).
        length_penalty : float, optional
            Beam search: scores divided by length ** length_penalty (default 1.0).
        decoding : Decoding, optional
            All of the above as one `glassformer.Decoding` (the options are then not read).
        batch_size : int
            Texts decoded together on the batched path.
        places : list of str, optional
            Each text's name in refusals ("FILE, line 3").

        Returns
        -------
        str or list of str
        """
        self.runtime.need_generator()
        if decoding is None:
            decoding = Decoding.settle(
                strategy,
                max_new_tokens,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                seed=seed,
                beam_width=beam_width,
                length_penalty=length_penalty,
            )
        if isinstance(text, str):
            return generating.one(self.runtime, text, decoding)
        return generating.many(self.runtime, list(text), decoding, batch_size, places)

    def stream(
        self,
        text: str,
        *,
        max_new_tokens: int | None = None,
        strategy: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        beam_width: int | None = None,
        length_penalty: float | None = None,
        decoding: Decoding | None = None,
    ) -> Iterator[str]:
        """Generate from one text, its output given as each token is chosen: a
        `generating.Stream` of str pieces, one per new token (beam search: one at its end), with
        ``s.prompt + "".join(s) == m.generate(text, ...)``; the notes come once, at the end.

        Parameters
        ----------
        text : str
            A decoder's prompt, or an encoder-decoder's source.
        max_new_tokens : int, optional
            Stop after this many new tokens (default: the model's max_len).
        strategy : {"greedy", "sample", "beam"}, optional
            Implied by the options below when not given (greedy without any).
        temperature, top_k, top_p, seed : optional
            Sampling: the temperature (1.0), the k most likely, the nucleus, the seed.
        beam_width, length_penalty : optional
            Beam search: the width (4) and the length penalty (1.0).
        decoding : Decoding, optional
            All of the above at once (`Decoding.settle`), instead of them.

        Returns
        -------
        Stream
            An iterator of str pieces; `.prompt`, `.ids`, `.result` once it ended.
        """
        sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        given = sampling | dict(beam_width=beam_width, length_penalty=length_penalty)
        return generating.Stream(self.runtime, text, decoding, strategy, max_new_tokens, given)

    def record(
        self,
        text: str | list[str],
        *,
        steps: str | list[str] | None = None,
        top_tokens: int = 5,
        max_new_tokens: int | None = None,
        strategy: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        beam_width: int | None = None,
        length_penalty: float | None = None,
        decoding: Decoding | None = None,
        batch_size: int = 32,
        places: list[str] | None = None,
    ) -> tuple[str, results.Record] | list[tuple[str, results.Record | None]]:
        """`glassformer generate --record`: `generate`'s output with what each new token was
        made from, read on the PyTorch engine's KV cache.

        Parameters
        ----------
        text : str or list of str
            As `generate`'s (a blank text in a list gives ("", None)).
        steps : str or list of str, optional
            Trace names recorded per new token (* for any part; a list or one string "a,b";
            `recording.recordable`).
        top_tokens : int
            The next tokens recorded per new token, with log-probabilities.
        max_new_tokens, strategy, temperature, top_k, top_p, seed : optional
            As `generate`'s.
        beam_width, length_penalty, decoding, batch_size, places : optional
            As `generate`'s.

        Returns
        -------
        (output, Record), or a list of them
            The `results.Record` is the line `--record` writes less its "place": the input's
            pieces, the new ids and tokens and, per new token, the steps and top tokens.
        """
        self.runtime.need_generator()
        if decoding is None:
            decoding = Decoding.settle(
                strategy,
                max_new_tokens,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                seed=seed,
                beam_width=beam_width,
                length_penalty=length_penalty,
            )
        texts = [text] if isinstance(text, str) else list(text)
        args = (decoding, batch_size, places, steps, top_tokens)
        out = generating.recorded(self.runtime, texts, *args)
        return out[0] if isinstance(text, str) else out

    def translate(
        self,
        text: str | list[str],
        *,
        beam: int = 4,
        n_best: int | None = None,
        dtype: str | None = None,
        places: list[str] | None = None,
    ):
        """What `glassformer translate` prints (batched; beam search when beam > 1).

        Parameters
        ----------
        text : str or list of str
            One sentence, or a list (one translation each).
        beam : int
            Beam width (1: greedy).
        n_best : int, optional
            Give each sentence's n best `translating.Candidate`s (best first) instead.
        dtype : {"float64", "float32", "int8"}, optional
            The PyTorch engine's precision (default float32).
        places : list of str, optional
            Each sentence's name in refusals.

        Returns
        -------
        str, list of Candidate, or a list of them
        """
        one = isinstance(text, str)
        rt = self.runtime
        out = list(rt.translations([text] if one else list(text), beam, n_best, dtype, places))
        return out[0] if one else out

    def alignments(
        self,
        sentences: str | list[str],
        *,
        layers: str | list[int] | None = None,
        heads: str | list[int] | None = None,
        beam: int = 4,
        n_best: int | None = None,
        dtype: str | None = None,
        places: list[str] | None = None,
    ) -> Iterator[tuple]:
        """`glassformer translate --alignments`: each translation with the chosen translation's
        cross-attention averaged over the decoder's `layers` x `heads` (read on the fast path)
        and the word alignment it gives. Checked before any work.

        Parameters
        ----------
        sentences : str or list of str
            The sentences.
        layers : str or list of int, optional
            Decoder layers from 0 (a list or one string "0,2"; default all).
        heads : str or list of int, optional
            Heads from 0 (default all).
        beam, n_best, dtype, places : optional
            As `translate`'s.

        Returns
        -------
        iterator of (translation, alignment)
            In input order, as soon as each is known; the alignment is the line `--alignments`
            writes less its "place".
        """
        from glassformer import recording

        pairs = recording.alignment_heads(self.runtime.cfg, layers, heads)
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        return generating.translations(self.runtime, texts, beam, n_best, dtype, places, pairs)
