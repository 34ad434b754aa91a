"""The verbs of a `Model` that look inside: one traced forward pass (`run`, `trace`, `result`),
touching it (`ablate`, `patch`, `intervene`; steering: `steer`, `steered`), reading it
(`lens`, `circuit`, `attribute`, and `faithfulness`: how far to trust each explanation), why beam
search kept its hypothesis (`explain_choice`), a batch's chosen steps (`run_with_cache`) and a
whole corpus's, stored on disk (`record_corpus`).
`LookingInside` is a base class of `Model` (model.py), which checks every argument of these
methods against `glassformer.arguments`' table as it checks its own; a user calls them on the
Model, and `help(glassformer.Model)` shows them there.

Each method is the face of a command's work and holds none of it: the traced run, ablation and
patching are `inspect/touch.py`'s, the lens, graph and attribution `inspect/probes.py`'s, the
choice `inspect/choice.py`'s, the batch `activations.py`'s, the corpus `corpus/record.py`'s, all
reached through `self.runtime` (`runtime.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from glassformer import activations, results
from glassformer.decoding import Decoding
from glassformer.errors import InputError
from glassformer.inspect.touch import Run
from glassformer.runtime import Runtime
from glassformer.trace import Trace
from glassformer.trace import intervene as trace_intervene


class LookingInside:
    """A Model's verbs that look inside a run (a base class of `Model`; see the module)."""

    runtime: Runtime

    def run(
        self,
        text: str | None = None,
        *,
        ids: list[int] | None = None,
        target: str | list[int] | None = None,
        decoding: Decoding | None = None,
        quiet: bool = False,
    ) -> Run:
        """One traced forward pass of the reference engine (float64, every step), as `explain`
        runs it.

        Parameters
        ----------
        text : str, optional
            The input (an encoder-decoder's source).
        ids : list of int, optional
            A decoder's token ids instead of text.
        target : str or list of int, optional
            An encoder-decoder's decoder text, or ids from BOS (default: what `decoding`
            generates).
        decoding : Decoding, optional
            An encoder-decoder's decoding (greedy by default); a decoder generates too when
            its max_new_tokens is given.
        quiet : bool
            No notes.

        Returns
        -------
        Run
            The trace (`run.trace[name]`) and what the pass read and returned.
        """
        from glassformer.inspect import touch

        return touch.traced_run(self.runtime, text, ids, target, decoding, quiet)

    def trace(
        self,
        text: str | None = None,
        *,
        ids: list[int] | None = None,
        target: str | list[int] | None = None,
        decoding: Decoding | None = None,
        quiet: bool = False,
    ) -> Trace:
        """The trace of `run`: every intermediate, by name.

        Parameters
        ----------
        text, ids, target, decoding, quiet : optional
            As `run`'s.

        Returns
        -------
        Trace
        """
        return self.run(text, ids=ids, target=target, decoding=decoding, quiet=quiet).trace

    def result(self, run: Run) -> results.Outcome:
        """What the model made of the run's input (the end of an explain report): the decoded
        text, the next token, the class with its probability, or the pooled embedding.

        Parameters
        ----------
        run : Run
            A run `run` made.

        Returns
        -------
        Outcome
            A `results.GeneratedText`, `NextToken`, `PredictedClass` or `PooledEmbedding`
            (`to_dict()`: the report's "result").
        """
        from glassformer.inspect import touch

        return touch.result(self.runtime, run)

    def ablate(
        self,
        text: str | Run,
        names: str | list[str],
        *,
        ids: list[int] | None = None,
        target: str | list[int] | None = None,
        decoding: Decoding | None = None,
        quiet: bool = False,
    ) -> results.Ablation:
        """`explain --ablate`: per position the prediction with and without the named heads,
        sublayers or steps zeroed (and the output generated again under the ablation); for a
        classifier, each class's probability before and after, by name.

        Parameters
        ----------
        text : str or Run
            The input, or a run already made (then the options below are not read).
        names : str or list of str
            Heads, sublayers or steps (`touch.names`; step names may hold *).
        ids, target, decoding, quiet : optional
            As `run`'s.

        Returns
        -------
        Ablation
            ablated, steps, positions (per position the prediction before and after; None for a
            classifier), classes (a classifier's: label, before, after, change), notes, and
            text / text_ablated when the run generated; `to_dict()` is `explain --json`'s.
        """
        from glassformer.inspect import touch

        if not isinstance(text, Run):
            text = self.run(text, ids=ids, target=target, decoding=decoding, quiet=quiet)
        return touch.ablation(
            self.runtime, text, [names] if isinstance(names, str) else list(names)
        )

    def patch(
        self,
        text: str | Run,
        clean: str,
        *,
        ids: list[int] | None = None,
        target: str | list[int] | None = None,
        decoding: Decoding | None = None,
        quiet: bool = False,
    ) -> results.Patching:
        """`explain --patch-from CLEAN`: how much of the clean run's logit difference each head
        restores when patched into the run on `text`. A classifier's metric is logit[the clean
        run's class] - logit[this run's class].

        Parameters
        ----------
        text : str or Run
            The corrupted input, or a run already made (then the options below are not read).
        clean : str
            The clean input, of as many tokens.
        ids, target, decoding, quiet : optional
            As `run`'s.

        Returns
        -------
        Patching
            clean, metric, tables (per attention kind, each head's share of the logit difference
            restored), position and after_token (None for a classifier), classes (a
            classifier's probabilities in this run, before, and the clean run, after).
        """
        from glassformer.inspect import touch

        if not isinstance(text, Run):
            text = self.run(text, ids=ids, target=target, decoding=decoding, quiet=quiet)
        return touch.patching(self.runtime, text, clean)

    def intervene(self, fns: dict):
        """A context in which both engines' taps apply `fns`.

        Parameters
        ----------
        fns : dict
            {step name (may hold *): function of its value -> the value used instead}.

        Returns
        -------
        context manager
        """
        return trace_intervene(fns)

    def steer(
        self,
        pair: str | tuple[str, str] | None = None,
        *,
        layer: int,
        scale: float = 1.0,
        vector=None,
        from_step: int | None = None,
    ):
        """A context in which every verb (generate, translate, run, trace, ...) is steered, in
        both engines: scale·v added to the decoder's residual stream entering block `layer`
        (`glassformer.inspect.steering`), v the direction of a contrast pair or a given vector.

        Parameters
        ----------
        pair : str or (str, str), optional
            "TEXT_A|TEXT_B": v = the mean stream of TEXT_A minus that of TEXT_B at that point
            (the reference engine's, averaged over each text's positions; an encoder-decoder
            reads each as decoder text after BOS, with itself as the source).
        layer : int
            The block whose entering stream is steered, from 0 (n_layers: after the last).
        scale : float
            The multiple of v added (0: no change; negative: towards TEXT_B).
        vector : array, optional
            A (d_model,) direction instead of a pair.
        from_step : int, optional
            Steer only from this new token on (positions >= prompt length - 1 + from_step);
            default every position, the prompt's included.

        Returns
        -------
        Steering
            A context manager (`with m.steer(...):`); `.vector`, `.name` (the step steered),
            `.to_dict()`.
        """
        from glassformer.inspect import steering as S

        rt, cfg = self.runtime, self.runtime.cfg
        rt.need_generator()
        layer = S.check_layer(layer, cfg)
        if (pair is None) == (vector is None):
            raise InputError("steer takes a contrast pair or a vector: give one of them")
        if vector is not None:
            v = S.check_vector(vector, cfg.d_model)
        else:
            pair = S.split_pair(pair)
            bos = rt.bos()[0] if cfg.arch == "encoder-decoder" else None
            sides = []
            for n, side in zip(("first", "second"), pair, strict=True):
                ids = rt.encode(side, window=True, what=f"the pair's {n} text")
                sides.append(S.pair_inputs(cfg, ids, bos))
            v = S.direction(rt.params, cfg, *sides, layer)
        return S.Steering(v, layer, scale, from_step, pair, cfg.arch)

    def steered(
        self,
        text: str,
        steering,
        *,
        decoding: Decoding | None = None,
    ) -> results.Steered:
        """`generate --steer ... --json`: the text decoded without and with `steering` (the same
        decoding), and per new token of the steered output the top tokens of the next-token
        distribution before (unsteered, same prefix) and after, and the token chosen. Call it
        outside the steering.

        Parameters
        ----------
        text : str
            A decoder's prompt, or an encoder-decoder's source.
        steering : Steering
            What `steer` made.
        decoding : Decoding, optional
            Greedy by default; sampling (seeded) or beam search (the best hypothesis is shown).

        Returns
        -------
        Steered
            input, steering, strategy, text, steered, steps; `to_dict()` is `--json`'s.
        """
        from glassformer.inspect import steering as S

        self.runtime.need_generator()
        return results.Steered(**S.compare(self.runtime, text, steering, decoding))

    def circuit(
        self,
        text: str,
        *,
        target: str | None = None,
        versus: str | None = None,
        position: int | None = None,
        decoder: str | None = None,
        threshold: float = 0.02,
        neurons: int = 0,
    ) -> results.Circuit:
        """`glassformer circuit --json`: the exact attribution graph of one logit (pre-LN models;
        `glassformer.inspect.circuit`), its nodes and edges of at least threshold·|logit|.

        Parameters
        ----------
        text : str
            The input (an encoder-decoder's source).
        target, versus : str, optional
            The token (a classifier's class) explained, default the model's top prediction;
            and one whose logit is subtracted.
        position : int, optional
            The position explained (default the last; negative counts from the end).
        decoder : str, optional
            An encoder-decoder's decoder text (default its greedy translation).
        threshold : float
            Nodes and edges below threshold·|logit| are left out (their share is said).
        neurons : int
            Each FFN node (a layer at a position) split into this many hidden units of largest
            effect on the logit, each a node ("decoder.1.ffn.hidden:123@4"), and the rest.

        Returns
        -------
        Circuit
            input, token, versus, threshold, graph (target, logit, error, kept, nodes, edges).
        """
        from glassformer.inspect import probes

        options = dict(target=target, versus=versus, position=position, decoder=decoder)
        return probes.circuit(self.runtime, text, threshold=threshold, neurons=neurons, **options)

    def faithfulness(
        self,
        text: str,
        *,
        target: str | None = None,
        versus: str | None = None,
        position: int | None = None,
        decoder: str | None = None,
        baseline: str | int | None = None,
        steps: int | None = None,
        seed: int = 0,
    ) -> results.Faithfulness:
        """`glassformer faithfulness --json`: which explanation of one logit is trustworthy on
        this input. Each explanation's units (input tokens: integrated gradients, gradient ×
        input, attention weights and their rollout, the attribution graph's token nodes;
        components, heads and FFNs: direct logit attribution, the attribution graph) are removed
        in the order of their scores, and the logit is read from exact ablations of the
        reference engine (float64): deletion and insertion curves with their areas, beside a
        seeded random order (`glassformer.inspect.faithfulness`).

        Parameters
        ----------
        text : str
            The input (an encoder-decoder's source).
        target, versus : str, optional
            The token (a classifier's class) explained, default the model's top prediction;
            and one whose logit is subtracted.
        position : int, optional
            The position explained (default the last; negative counts from the end).
        decoder : str, optional
            An encoder-decoder's decoder text (default its greedy translation).
        baseline : str or int, optional
            What a removed token's embedding becomes, integrated gradients' baseline too: a
            token (a piece, #id or an id); default zero.
        steps : int, optional
            Integrated gradients' nodes (default 64).
        seed : int
            The seed of the random order, the floor.

        Returns
        -------
        Faithfulness
            input, source, token, versus, position, seed, tokens and components (each: units,
            removal, names, clean, empty, curves with deletion, insertion and their areas),
            notes; `to_dict()` is `faithfulness --json`'s.
        """
        from glassformer.inspect import probes

        options = dict(target=target, versus=versus, position=position, decoder=decoder)
        return probes.faithfulness(
            self.runtime, text, baseline=baseline, steps=steps, seed=seed, **options
        )

    def qk(
        self,
        text: str,
        head: str,
        *,
        query: int | None = None,
        key: int | None = None,
        decoder: str | None = None,
    ) -> results.QK:
        """Why a head attends there: its score Ω[i, j] = q_i·k_j split into a table over the parts
        that wrote the query's and the key's residual streams (token embeddings, positions, each
        earlier head, each FFN, the constants), its entries adding up to Ω[i, j] within 1e-10
        (pre-LN models; `glassformer.inspect.qk`), each with the weight A[i, j] would have
        without it.

        Parameters
        ----------
        text : str
            The input (an encoder-decoder's source).
        head : str
            The head, as STACK.LAYER.KIND.headH ("decoder.1.cross_attn.head0").
        query : int, optional
            The query's position (default the last; negative counts from the end).
        key : int, optional
            The key's position (a source position for cross-attention; default where the head
            attends most from `query`).
        decoder : str, optional
            An encoder-decoder's decoder text (default its greedy translation).

        Returns
        -------
        QK
            input, source, query_token, key_token and the table (head, i, j, rows, cols, table,
            score, total, weight, top).
        """
        from glassformer.inspect import probes

        return probes.qk(self.runtime, text, head, query=query, key=key, decoder=decoder)

    def lens(
        self,
        text: str,
        *,
        target: str | None = None,
        k: int = 3,
        sublayers: bool = False,
        dla: str | None = None,
        versus: str | None = None,
        position: int | None = None,
    ) -> results.Lens:
        """`glassformer lens --json`: the logit lens, and direct logit attribution with `dla`.

        Parameters
        ----------
        text : str
            The input (an encoder-decoder's source).
        target : str, optional
            An encoder-decoder's decoder text (default its greedy translation).
        k : int
            The top tokens shown per layer and position.
        sublayers : bool
            Read the stream after each sublayer, not only after each block.
        dla : str, optional
            A token whose logit is shared among heads and sublayers.
        versus : str, optional
            A token whose logit is subtracted in `dla`'s attribution.
        position : int, optional
            The position `dla` explains (default the last; negative counts from the end).

        Returns
        -------
        Lens
            input (tokens), lens (the table), dla (with `dla`); `to_dict()` is `lens --json`'s.
        """
        from glassformer.inspect import probes

        return probes.lens(
            self.runtime,
            text,
            target=target,
            k=k,
            sublayers=sublayers,
            dla=dla,
            versus=versus,
            position=position,
        )

    def attribute(
        self,
        text: str,
        *,
        target: str | None = None,
        method: str = "integrated_gradients",
        steps: int | None = None,
        max_new_tokens: int | None = None,
        baseline: str | int | None = None,
    ) -> results.Attribution:
        """`glassformer attribute --json`: each predicted token's logit shared among the inputs.

        Parameters
        ----------
        text : str
            The input (a decoder's prompt, an encoder-decoder's source).
        target : str, optional
            An encoder-decoder's decoder text (default its greedy translation).
        method : {"integrated_gradients", "gradient_x_input"}
            The attribution.
        steps : int, optional
            Integrated gradients' nodes (default 64).
        max_new_tokens : int, optional
            A decoder's tokens predicted and explained (default 5).
        baseline : str or int, optional
            Integrated gradients' baseline token (a piece, #id or an id; default zeros).

        Returns
        -------
        Attribution
            input, predicted, and the attribution's method, targets, scores, ...; `to_dict()` is
            `attribute --json`'s.
        """
        from glassformer.inspect import probes

        return probes.attribute(
            self.runtime,
            text,
            target=target,
            method=method,
            steps=steps,
            max_new_tokens=max_new_tokens,
            baseline=baseline,
        )

    def explain_choice(
        self,
        text: str,
        *,
        versus: str | None = None,
        beam: int = 4,
        length_penalty: float = 1.0,
        max_new_tokens: int | None = None,
    ) -> results.Choice:
        """`glassformer translate --explain-choice --json`: why beam search kept its best
        hypothesis (pre-LN models; `glassformer.inspect.choice`). Each step of it, its token
        against the runner-up token: the log-probability gap (the logit difference) split
        exactly into heads and FFNs (direct effects) and into source and target tokens (total
        effects); against a dropped hypothesis, the step where their tokens first differ, the
        gap there and its split, and the final score gap with the length penalty. Beam search
        runs on the reference engine (float64).

        Parameters
        ----------
        text : str
            The source (an encoder-decoder's) or the prompt (a decoder's).
        versus : str, optional
            The dropped hypothesis's text (an encoder-decoder's translation, a decoder's
            continuation), decoded by force (ending with the end token when the kept one does);
            default the n-best list's runner-up.
        beam : int
            The beam width (1: greedy, then only each step is explained unless `versus` is
            given).
        length_penalty : float
            The score is log P / n^length_penalty over the n generated tokens.
        max_new_tokens : int, optional
            The most new tokens (default: up to max_len for an encoder-decoder, 20 for a
            decoder; never past max_len).

        Returns
        -------
        Choice
            input, kept, dropped, dropped_by, length_penalty, beam, parting (step, tokens, gap,
            parts, tokens, sum, error), score_gap, logprob_gap, beam_ranks, steps, error;
            `to_dict()` is `translate --explain-choice --json`'s.
        """
        from glassformer.inspect import choice

        how = dict(beam=beam, length_penalty=length_penalty, max_new_tokens=max_new_tokens)
        return choice.choice_for(self.runtime, text, versus=versus, **how)

    def run_with_cache(
        self,
        texts: str | list[str] | list[list[int]],
        *,
        names: str | list[str] | None = None,
        targets: str | list[str] | list[list[int]] | None = None,
        engine: str | None = None,
        dtype: str | None = None,
        batch_size: int = 32,
    ) -> activations.ActivationCache:
        """A batch through the model, steps kept by name, stacked (batch, ...) and padded on the
        right (with 0) to the longest text: TransformerLens's `run_with_cache` (`activations.py`).

        Parameters
        ----------
        texts : the texts (an encoder-decoder's sources), or lists of token ids
        names : step names or globs to keep, e.g. "decoder.0.*.A" (`trace(...).names()`); None: all
        targets : an encoder-decoder's decoder input, teacher-forced: text, ids from BOS; None: BOS
        engine : "torch" (batched) or "reference" (float64, a text at a time); None: the model's
        dtype : the PyTorch engine's float32 (None: the model's dtype, else float32), float64, int8
        batch_size : texts per forward pass of the PyTorch engine

        Returns
        -------
        ActivationCache
            a Mapping name -> array (a glob -> dict), .mask (batch, T; True: a real token), .tokens
        """
        how = (names, targets, engine, dtype, batch_size)
        return activations.run_with_cache(self.runtime, texts, *how)

    def record_corpus(
        self,
        corpus: str | os.PathLike,
        *,
        steps: str | list[str],
        out: str | os.PathLike,
        engine: str | None = None,
        dtype: str = "float32",
        side: str | None = None,
        batch_size: int = 32,
        max_tokens: int | None = None,
        shard_rows: int | None = None,
        check_rows: int = 8,
        compare: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ):
        """The model over a whole corpus, the steps asked for stored on disk, one row per token
        position: SAELens's and TransformerLens's activations on disk (`corpus/record.py`; the
        format and its reader, `glassformer.corpus.store.open_store`, in `corpus/store.py`).

        Parameters
        ----------
        corpus : a text file, one document per line (gzip read too), or a shipped corpus's name
            ("tinyshakespeare"); a translator's TSV (source<TAB>target) with `side`
        steps : step names or globs with one row per token position ("decoder.1.ffn.hidden",
            "decoder.*.out", a head's "...head1.C"); attention weights (T, T) are refused
        out : the store's folder (new, or a killed recording's: it is continued)
        engine : "torch" (batched, the default where PyTorch is installed) or "reference"
        dtype : how values are stored: "float32", "float64" (computed in float64) or "int8"
            (each row scaled by its absmax / 127)
        side : a translator's "source" (default) or "target" (teacher-forced after BOS)
        batch_size : documents per forward pass of the PyTorch engine
        max_tokens : at most this many rows (the documents after are left out)
        shard_rows : rows per shard (whole documents; default 64 MiB of values a shard)
        check_rows : rows recomputed by the float64 reference engine and compared with the store
        compare : also time a plain forward pass over the first documents (up to 4096 rows), for
            the cost beside it (plain_rows_per_second)
        progress : called with (documents done, documents) after each shard

        Returns
        -------
        Recorded
            out, rows, documents, shards, steps, dtype, resumed, check (rows, max_error,
            tolerance, ok), seconds, rows_per_second, plain_rows_per_second, slowdown
        """
        from glassformer.corpus import record

        how = dict(engine=engine, dtype=dtype, side=side, batch_size=batch_size)
        how |= dict(max_tokens=max_tokens, shard_rows=shard_rows, check_rows=check_rows)
        how |= dict(compare=compare)
        return record.record_corpus(self.runtime, corpus, steps, out, progress=progress, **how)
