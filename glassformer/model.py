"""One loaded model and everything a user does with it: the Python API, and the one layer the
command line (`cli/`) and the explorer (`serve/`) call.

    import glassformer
    m = glassformer.load("models/en-es")          # a checkpoint, a Hugging Face folder, a preset
    m.translate("Hello world.")                   # what `glassformer translate` prints
    run = m.run("Hello world.")                   # one traced forward pass (float64 reference)
    run.trace["decoder.0.cross_attn.head0.A"]     # any intermediate, by name

A `Model` holds the config, float64 weights, tokenizer, class names and its engines (made once).
Its methods give what the commands print, with their defaults and refusals (a `GlassformerError`
whose message is the command line's one line, naming parameters as Python does: `position=99`,
where the command line says `--position 99`). Notes the commands print on stderr (an implied
strategy, why a generation stopped, unknown tokens) go to `on_note` (the CLI's `note`), or to
`Model.notes` when none was given.

Deliberately not here: argument parsing, HTTP, printing; opening a folder or preset (`load`,
`opening.py`); the math (the engines), decoding (`decoding.py`, `inference.py`, `generating.py`),
recording (`recording.py`), touching (`touch.py`), rendering (`explain/`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from glassformer import activations, devices, generating, inference, numerics, results, weights
from glassformer import reference as R
from glassformer.arguments import checked
from glassformer.config import Config
from glassformer.decoding import Decoding, finish
from glassformer.errors import INSTALL_TORCH, GlassformerError, InputError, Said, param
from glassformer.inputs import utf8
from glassformer.touch import Run
from glassformer.trace import Trace
from glassformer.trace import intervene as trace_intervene

# What to do when only the PyTorch engine's float32 or int8 overflows (the float64 one is exact).
FIX = f"try {param('dtype', 'float64')} or {param('engine', 'reference')}"
DTYPES, check_dtype = inference.DTYPES, inference.check_dtype  # the PyTorch engine's precisions


@checked  # every argument of every public method, against glassformer.arguments' table
class Model:
    """A loaded model: see the module docstring. `load(...)` (`opening.py`) makes one."""

    def __init__(
        self,
        cfg: Config,
        params: dict,
        tok=None,
        *,
        labels: list[str] | None = None,
        path: Path | None = None,
        family: str | None = None,
        name: str | None = None,
        engine: str = "auto",
        dtype: str | None = None,
        on_note: Callable[[str], None] | None = None,
        device: str = "cpu",
        threads: int | None = None,
    ):
        self.cfg, self.params, self.tok = cfg, params, tok
        self.labels = labels  # a classifier's class names as saved with it, or None
        self.path, self.family = path, family  # family: the Hugging Face model_type, or None
        self.name = name or (str(path) if path is not None else "model")
        self.engine, self.dtype = engine, dtype
        self.notes: list[str] = []
        self.fix = FIX  # what a refusal of non-finite values from float32 or int8 suggests
        self._on_note = on_note
        self._engines: dict = {}
        self._made: dict = {}
        self._lock = threading.Lock()
        self._gates: dict = {}
        self.device, self.threads = device, threads  # `load`'s; threads are the process's
        if threads is not None and (said := devices.use_threads(threads)) is not None:
            self.note(said)

    # -- what it is ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        where = f"Hugging Face {self.family} " if self.family else ""
        return f"<glassformer.Model {where}{self.name}: {self.summary()}>"

    def _repr_html_(self) -> str:
        from html import escape

        name, what = escape(self.name), escape(self.summary())
        return f"<div><b>glassformer.Model</b> <code>{name}</code><br>{what}</div>"

    def summary(self) -> str:
        """The model in one line (a report's header)."""
        cfg = self.cfg
        n_layers = (
            f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}"
            if cfg.arch == "encoder-decoder"
            else max(cfg.n_encoder_layers, cfg.n_decoder_layers)
        )
        return (
            f"{cfg.arch}, {n_layers} layers, d_model {cfg.d_model}, {cfg.n_heads} heads of "
            f"{cfg.head_dim}, d_ff {cfg.d_ff}, vocabulary {cfg.vocab_size}, {cfg.norm}-LN, "
            f"{cfg.positions} positions"
        )

    @property
    def class_names(self) -> list[str]:
        """A classifier's class names, else its class numbers ("0", "1", ...)."""
        return self.labels or [str(k) for k in range(self.cfg.n_classes)]

    @property
    def token_kind(self) -> str:
        """How this tokenizer's pieces read (`tokenizer.display.display_kind`)."""
        from glassformer.tokenizer.display import display_kind

        return self.cached("token_kind", lambda: display_kind(self.need_tokenizer()))

    def _unknown_note(self, unknown: list[str], quiet: bool = False) -> None:
        """Note unknown pieces; not when quiet (the explorer shows them, notes would pile up)."""
        if unknown and not quiet:
            shown = ", ".join(repr(u) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            self.note(
                f"{len(unknown)} unknown token(s) mapped to {self.tok.specials.get('unk')}: {shown}"
            )

    def note(self, message: str) -> None:
        message = Said(message)  # Python's words; the CLI's `on_note` writes its flags
        if self._on_note is not None:
            self._on_note(message)
        elif message not in self.notes:
            self.notes.append(message)

    utf8 = staticmethod(utf8)  # user text refused unless valid UTF-8 (for touch.py's flags)

    # -- text and tokens -------------------------------------------------------------------------

    def need_tokenizer(self):
        if self.tok is None:
            raise GlassformerError(
                f"checkpoint {self.name} has no {weights.TOKENIZER_FILE}: text cannot "
                "be encoded; save it with its tokenizer"
            )
        return self.tok

    def encode(
        self,
        text: str,
        *,
        room: int = 0,
        window: bool = False,
        what: str = "the text",
        unknown: list | None = None,
    ) -> list[int]:
        """Token ids of user text (`what` names it in a refusal), with the checks the engines
        expect: valid UTF-8, never empty, never longer than max_len - room (with `window`, a
        decoder that slides over its context, any length). Unknown pieces go to `unknown`
        when given, else into a note."""
        tok = self.need_tokenizer()
        if not isinstance(text, str):
            raise InputError(f"{what} must be a str, got {type(text).__name__}")
        utf8(text, what)
        if not text.strip():
            raise InputError(f"{what} is empty: give at least one word")
        ids, missing = tok.encode_for_model(text)
        if not ids:
            raise InputError(f"{what} has no tokens: give at least one word")
        if unknown is not None:
            unknown.extend(missing)
        else:
            self._unknown_note(missing)
        limit = self.cfg.max_len - room
        if len(ids) > limit and not window:
            raise InputError(
                f"{what} has {len(ids)} tokens but the model takes at most "
                f"{limit} (max_len {self.cfg.max_len}); shorten it"
            )
        return ids

    def decode(self, ids: list[int]) -> str:
        """Token ids -> text, as the tokenizer joins them."""
        return self.need_tokenizer().decode(list(ids))

    def pieces(self, ids: list[int]) -> list[str]:
        """Each id's raw vocabulary piece (`#id` without a tokenizer: a preset's model; and for
        an id of an output layer wider than the tokenizer's vocabulary, as Qwen2's is padded)."""
        if self.tok is None:
            return [f"#{i}" for i in ids]
        past = range(len(self.tok.vocab), self.cfg.vocab_size)  # (empty when they agree)
        return [f"#{i}" if i in past else self.tok.tokens([i])[0] for i in ids]

    def readable(self, ids: list[int]) -> list[str]:
        """Each id's piece as a person reads it (a space shown as ␣, a byte as <0x0A>)."""
        from glassformer.tokenizer.display import display_tokens

        if self.tok is None:
            return self.pieces(ids)
        return display_tokens(self.pieces(ids), self.token_kind)

    def tokens(self, text: str) -> list[str]:
        """The readable tokens of `text`."""
        return self.readable(self.encode(text, window=True))

    def bos(self) -> list[int]:
        """The start token a decoding begins from, as a one-token prompt."""
        if self.need_tokenizer().bos_id is None:
            raise GlassformerError(
                "the tokenizer has no start token (SOS/BOS) to start decoding from"
            )
        return [self.tok.bos_id]

    # -- engines ---------------------------------------------------------------------------------

    def torch(self, dtype: str = "float64"):
        """The PyTorch engine on these weights in `dtype` on `device`, for inference (made once
        per dtype and device), or None when torch is not installed and the engine is "auto"."""
        if self.engine == "reference":
            return None
        key = (dtype, self.device)
        with self._lock:
            if key not in self._engines:
                try:
                    import torch  # noqa: F401
                except ImportError:
                    if self.engine == "torch":
                        raise GlassformerError(
                            f"{param('engine', 'torch')} needs PyTorch: {INSTALL_TORCH}"
                        ) from None
                    self._engines[key] = None
                else:
                    self._engines[key] = inference.torch_engine(self.cfg, self.params, *key)
            return self._engines[key]

    def cached(self, name: str, make: Callable):
        """A per-model object made once, however many threads ask at the same time (the
        explorer's Hugging Face model of the fidelity badge, the readable vocabulary)."""
        with self._lock:
            gate = self._gates.setdefault(name, threading.Lock())
        with gate:  # making one (a slow load) holds up nothing else
            if name not in self._made:
                self._made[name] = make()
            return self._made[name]

    def step(
        self,
        src: list[int] | None = None,
        *,
        prompt_len: int = 1,
        window: bool = False,
        dtype: str | None = None,
        reference: bool = False,
        fix=...,
    ):
        """Next-token logits for decoding (ids -> (V,)): the PyTorch engine with its KV cache
        when this model's engine allows (and not `reference`), else the reference engine;
        non-finite logits raise a `NonFiniteError` naming where they start (prompt_len: where
        the new tokens start)."""
        model = None if reference else self.torch(dtype or self.dtype or "float64")
        if model is not None:
            from glassformer.torch_steps import step_fn

            step = step_fn(model, src, window=window)
        else:
            step = R.next_token_logits(self.params, self.cfg, src, window=window)
        fix = self.fix if fix is ... else fix  # None: no advice (the float64 engine is exact)
        return numerics.checked(step, self.params, self.cfg, prompt_len, src, fix)

    def forward(self):
        """The reference engine's forward as an `interventions.Run`: input (ids, or (src,
        ids)) -> logits (T, V); for a classifier, ids -> class logits (n_classes,); for another
        encoder, ids -> the encoder output (S, C)."""
        from glassformer import interventions as I

        if self.cfg.arch != "encoder":
            return I.reference_run(self.params, self.cfg)
        if self.cfg.n_classes:
            return lambda ids: R.classify(self.params, self.cfg, list(ids))
        return lambda ids: R.encoder(self.params, self.cfg, list(ids))

    def many_step(self, src: list[int] | None = None, *, prompt_len: int = 1):
        """Batched next-token logits (hypotheses -> (n, V)) for beam search on the PyTorch
        engine's KV cache, checked as `step` is; None without the PyTorch engine."""
        model = self.torch(self.dtype or "float64")
        if model is None:
            return None
        from glassformer.torch_steps import many_step_fn

        return numerics.checked_many(
            many_step_fn(model, src), self.params, self.cfg, prompt_len, src, self.fix
        )

    # -- decoding --------------------------------------------------------------------------------

    def decoded(
        self,
        prompt: list[int],
        src: list[int] | None = None,
        decoding: Decoding | None = None,
        *,
        window: bool = False,
        step=None,
        quiet: bool = False,
    ):
        """Greedy, sampling or beam search from `prompt` as `decoding` says: a
        `decoding.Generation` or `BeamResult`. window: the step slides over a decoder's
        context (only max_new_tokens bounds the length); step: the step function (default
        `self.step`); a note says why it stopped (unless quiet)."""
        how = dict(window=window, step=step, quiet=quiet)
        return finish(generating.decoded_tokens(self, prompt, src, decoding, **how))

    def generate(
        self,
        text: str | list[str],
        *,
        max_new_tokens: int | None = None,
        strategy: str | None = None,
        decoding: Decoding | None = None,
        batch_size: int = 32,
        places: list[str] | None = None,
        **options,
    ) -> str | list[str]:
        """What `glassformer generate` prints: a decoder continues the text (the output
        includes it), an encoder-decoder decodes from BOS with the text as its source. A list
        gives one output each (greedy on the torch engine: batched, the same tokens as one at a
        time); `places` names each in errors ("FILE, line 3"). options: temperature, top_k,
        top_p, seed, beam_width, length_penalty (STRATEGY_RULE), or all of them as `decoding`."""
        from glassformer import generating

        self.need_generator()
        if decoding is None:
            decoding = Decoding.settle(strategy, max_new_tokens, **options)
        if isinstance(text, str):
            return generating.one(self, text, decoding)
        return generating.many(self, list(text), decoding, batch_size, places)

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
        """
        sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        given = sampling | dict(beam_width=beam_width, length_penalty=length_penalty)
        return generating.Stream(self, text, decoding, strategy, max_new_tokens, given)

    def record(
        self,
        text: str | list[str],
        *,
        steps: str | list[str] | None = None,
        top_tokens: int = 5,
        max_new_tokens: int | None = None,
        strategy: str | None = None,
        decoding: Decoding | None = None,
        batch_size: int = 32,
        places: list[str] | None = None,
        **options,
    ) -> tuple[str, results.Record] | list[tuple[str, results.Record | None]]:
        """`glassformer generate --record`: (output, record) for a text, a list of them for a
        list (a blank text's: ("", None)); the outputs are `generate`'s, the record the line
        `--record` writes less its "place": the input's pieces, the new ids and tokens and, per
        new token, the `steps` named (trace names, * for any part, as a list or one string
        "a,b"; `recording.recordable`) and the `top_tokens` next tokens with log-probabilities,
        read on the PyTorch engine's KV cache. The other arguments are `generate`'s."""
        from glassformer import generating

        self.need_generator()
        if decoding is None:
            decoding = Decoding.settle(strategy, max_new_tokens, **options)
        texts = [text] if isinstance(text, str) else list(text)
        out = generating.recorded(self, texts, decoding, batch_size, places, steps, top_tokens)
        return out[0] if isinstance(text, str) else out

    def need_generator(self) -> None:
        if self.cfg.arch == "encoder":
            raise GlassformerError("an encoder-only model does not generate; use `explain`")

    def translate(
        self,
        text: str | list[str],
        *,
        beam: int = 4,
        n_best: int | None = None,
        dtype: str | None = None,
        places: list[str] | None = None,
    ):
        """What `glassformer translate` prints: one sentence -> its translation; a list ->
        one each; with n_best, each sentence's list of `translating.Candidate`s (best first)."""
        one = isinstance(text, str)
        out = list(self.translations([text] if one else list(text), beam, n_best, dtype, places))
        return out[0] if one else out

    def translations(
        self,
        sentences: list[str],
        beam: int = 4,
        n_best: int | None = None,
        dtype: str | None = None,
        places: list[str] | None = None,
    ) -> Iterator:
        """The translations of `sentences`, yielded in input order as soon as each is known
        (batched; beam search when beam > 1). Every sentence is checked before any work."""
        from glassformer import generating

        return generating.translations(self, sentences, beam, n_best, dtype, places)

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
        """`glassformer translate --alignments`: per sentence, (its translation, or n-best list,
        as `translations` yields it; the line `--alignments` writes less its "place"), in input
        order as soon as each is known: the chosen translation's cross-attention averaged over
        the decoder `layers` x `heads` (numbers from 0, a list or one string "0,2"; default
        all), read on the fast path, with the word alignment it gives. Checked before any work."""
        from glassformer import generating, recording

        pairs = recording.alignment_heads(self.cfg, layers, heads)
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        return generating.translations(self, texts, beam, n_best, dtype, places, pairs)

    # -- encoders --------------------------------------------------------------------------------

    def embed(self, text: str | list[str], *, engine: str | None = None) -> np.ndarray:
        """Sentence embeddings: unit vectors (C,) for one text, (N, C) for a list, as `glassformer
        embed` computes them (torch float32 by default, the reference engine in float64)."""
        if not self.cfg.has_encoder:
            raise GlassformerError(f"embed needs an encoder; {self.name} is arch={self.cfg.arch!r}")
        texts = [text] if isinstance(text, str) else list(text)
        ids = [self.encode(t) for t in texts]
        engine = engine or ("reference" if self.engine == "reference" else "torch")
        try:
            E = inference.embed(self.cfg, self.params, ids, engine, numerics.REFERENCE, self.device)
        except numerics.NonFiniteError as e:
            raise e.at(f"text {e.row + 1}") from None
        return E[0] if isinstance(text, str) else E

    def class_probabilities(self, ids: list[list[int]], *, engine: str | None = None):
        """(N, n_classes) class probabilities of encoded texts (`classify`'s numbers)."""
        self.need_classifier()
        engine = engine or self.engine
        fix = numerics.REFERENCE
        return inference.class_probabilities(
            self.cfg, self.params, ids, engine, fix=fix, device=self.device
        )

    def classify(
        self, text: str | list[str], *, engine: str | None = None, places=None
    ) -> results.Classification | list[results.Classification]:
        """What `glassformer classify --json` gives per text: a `Classification` (label, class
        index, probability, probabilities by class name); a list of them for a list (`places`
        names each text in a refusal of non-finite values)."""
        self.need_classifier()
        texts = [text] if isinstance(text, str) else list(text)
        ids = [self.encode(t) for t in texts]
        places = places or [f"text {n + 1}" for n in range(len(texts))]
        try:
            probs = self.class_probabilities(ids, engine=engine)
        except numerics.NonFiniteError as e:
            raise e.at(places[e.row]) from None
        out = [results.Classification.of(self.class_names, p) for p in probs]
        return out[0] if isinstance(text, str) else out

    def class_result(self, probs: np.ndarray) -> dict:
        return results.Classification.of(self.class_names, probs).to_dict()

    def need_classifier(self) -> None:
        cfg = self.cfg
        if cfg.arch != "encoder" or not cfg.n_classes:
            what = f"an {cfg.arch}" if cfg.arch != "decoder" else "a decoder"
            hint = "; for an encoder without one use `embed`" if cfg.arch == "encoder" else ""
            raise GlassformerError(
                f"classify needs an encoder with a classifier (n_classes > 0); {self.name} is "
                f"{what}{' without a classifier' if cfg.arch == 'encoder' else ''}{hint}"
            )

    def evaluate(self, data: str, *, beam: int | None = None, limit: int | None = None) -> str:
        """What `glassformer eval` prints: loss and perplexity (a decoder), BLEU and chrF (an
        encoder-decoder) or accuracy (a classifier) on `data` (`evaluating.py`)."""
        from glassformer.evaluating import evaluate

        return evaluate(self, data, beam, limit)

    # -- looking inside --------------------------------------------------------------------------

    def run(
        self,
        text: str | None = None,
        *,
        ids: list[int] | None = None,
        target: str | list[int] | None = None,
        decoding: Decoding | None = None,
        quiet: bool = False,
    ) -> Run:
        """One traced forward pass of the reference engine (float64, every step) on `text`
        (or on decoder `ids`), as `explain` runs it. An encoder-decoder reads the text as its
        source and the decoder `target` (text, or ids from BOS), or by default what `decoding`
        generates (greedy); a decoder also generates when decoding.max_new_tokens is given."""
        from glassformer import touch

        return touch.traced_run(self, text, ids, target, decoding, quiet)

    def trace(self, text: str | None = None, **kwargs) -> Trace:
        """The trace of `run(text, ...)`: every intermediate, by name."""
        return self.run(text, **kwargs).trace

    def result(self, run: Run) -> results.Outcome:
        """What the model made of the run's input (the end of an explain report): the decoded
        text, the next token, the class with its probability, or the pooled embedding."""
        from glassformer import touch

        return touch.result(self, run)

    def ablate(self, text: str | Run, names: list[str], **kwargs) -> results.Ablation:
        """`explain --ablate`: per position the prediction with and without the named heads,
        sublayers or steps zeroed (and the output generated again under the ablation); for a
        classifier, each class's probability before and after by name ("classes"). text: the
        input, or a Run already made (kwargs: `run`'s)."""
        from glassformer import touch

        run = text if isinstance(text, Run) else self.run(text, **kwargs)
        return touch.ablation(self, run, [names] if isinstance(names, str) else list(names))

    def patch(self, text: str | Run, clean: str, **kwargs) -> results.Patching:
        """`explain --patch-from CLEAN`: how much of the clean run's logit difference each
        head restores when patched into the run on `text` (or a Run already made). A
        classifier's metric is logit[the clean run's class] - logit[this run's class], and
        "classes" gives each class's probability in this run (before) and the clean run (after)."""
        from glassformer import touch

        return touch.patching(
            self, text if isinstance(text, Run) else self.run(text, **kwargs), clean
        )

    def intervene(self, fns: dict):
        """A context in which both engines' taps apply `fns` ({name: fn}, `interventions`)."""
        return trace_intervene(fns)

    def lens(self, text: str, **kwargs) -> results.Lens:
        """`glassformer lens --json`: the logit lens (and direct logit attribution with dla=)."""
        from glassformer import touch

        return touch.lens(self, text, **kwargs)

    def attribute(self, text: str, **kwargs) -> results.Attribution:
        """`glassformer attribute --json`: each predicted token's logit shared among inputs."""
        from glassformer import touch

        return touch.attribute(self, text, **kwargs)

    def diff(self, text: str, engines=("reference", "torch"), tol: float = 1e-6):
        """`glassformer diff`: the same input through each engine, step by step in data-flow
        order, the largest difference of every step and the first beyond `tol`."""
        from glassformer.engine_diff import diff

        return diff(self, text, engines, tol)

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
        return activations.run_with_cache(self, texts, names, targets, engine, dtype, batch_size)

    # -- writing ---------------------------------------------------------------------------------

    def save(self, path: str | Path, *, dtype: str = "float32", overwrite: bool = False) -> Path:
        """A glassformer checkpoint folder (config.json, model.safetensors, tokenizer.json,
        labels.json); an existing folder is replaced only with overwrite=True."""
        weights.save(
            path,
            self.cfg,
            self.params,
            tokenizer=self.tok,
            dtype=dtype,
            labels=self.labels,
            overwrite=overwrite,
        )
        return Path(path)

    def export_hf(self, path: str | Path, *, overwrite: bool = False) -> tuple[str, Path]:
        """A Hugging Face folder of the matching family: (family, folder)."""
        from glassformer import hf_dir

        return hf_dir.export(path, self.cfg, self.params, self.tok, overwrite=overwrite)
