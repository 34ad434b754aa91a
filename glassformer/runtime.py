"""The plumbing of one loaded model: what `Model`'s verbs, the command line (`cli/`), the explorer
(`serve/`) and the modules that do the work (`generating.py`, `touch.py`, `evaluating.py`) share.

A `Runtime` holds the config, float64 weights (`Float64Weights`: widened from the
stored ones when first asked for), tokenizer and class names, the engine choice and
its precision, and makes each PyTorch engine once (`torch(dtype)`, under a lock: the explorer
asks from many threads). It gives the next-token step functions decoding runs on (`step`,
`many_step`), the reference engine's forward (`reference_run`), the pass `Model.run` traces on the
PyTorch engine (`torch_pass`: the explorer's float32 view), one decoding with the notes that
tell how it went (`decoded`), user text checked into token ids (`encode`) and ids back into
pieces (`pieces`, `readable`), the refusals of a model that cannot do what it is asked
(`need_tokenizer`, `need_generator`, `need_classifier`) and where notes go (`note`: `on_note`, or
`notes`). `Model.runtime` is this object; a user calls the Model's verbs instead.

Deliberately not here: the verbs themselves and their documentation (`model.py`), opening a folder
or preset (`opening.py`), the math (the engines), decoding's strategies (`decoding.py`,
`inference.py`), the batched paths (`generating.py`), looking inside (`touch.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping

import numpy as np

from glassformer import devices, generating, inference, numerics, results, weights
from glassformer import reference as R
from glassformer.arguments import checked
from glassformer.config import Config
from glassformer.decoding import Decoding, finish
from glassformer.errors import INSTALL_TORCH, GlassformerError, InputError, Said, param
from glassformer.inputs import utf8
from glassformer.trace import positions

# What to do when only the PyTorch engine's float32 or int8 overflows (the float64 one is exact).
FIX = f"try {param('dtype', 'float64')} or {param('engine', 'reference')}"


class Float64Weights(MutableMapping):
    """{name: float64 array} over weights held as read (`stored`): each is widened to float64
    (exactly) the first time it is asked for, then kept; a float64 one is itself. A float32
    engine is made from `stored` instead (sharing its arrays), so a model that is only decoded
    in float32 never holds float64 weights. Setting a name sets the stored array."""

    def __init__(self, stored: Mapping):
        self.stored = dict(stored)
        self._wide: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._wide:
            x = self.stored[name]
            wide = isinstance(x, np.ndarray) and x.dtype == np.float64
            self._wide[name] = x if wide else np.asarray(x, dtype=np.float64)
        return self._wide[name]

    def __setitem__(self, name: str, value) -> None:
        self.stored[name] = value
        self._wide.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self.stored[name]
        self._wide.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.stored)

    def __len__(self) -> int:
        return len(self.stored)


@checked  # every argument of every public method, against glassformer.arguments' table
class Runtime:
    """The engines, step functions, checks and caches of one model (see the module docstring).

    cfg, params, tok, labels: what the model is made of (tok: its tokenizer, or None; labels:
    a classifier's class names as saved with it, or None); name: how refusals name it; engine:
    "auto", "torch" or "reference"; dtype: the PyTorch engine's precision for decoding (None:
    each caller's default); on_note: where notes go (None: `notes`); device: where the PyTorch
    engine runs ("cpu", "cuda", "cuda:N"; `devices.check_device`); threads: PyTorch's and BLAS's
    threads for the whole process (None: `devices.default_threads`, the cores less the other
    runnable tasks, unless OMP_NUM_THREADS or the like is set); fix: what a
    refusal of non-finite values from float32 or int8 suggests (the explorer sets its own)."""

    def __init__(
        self,
        cfg: Config,
        params: dict,
        tok=None,
        *,
        labels: list[str] | None = None,
        name: str = "model",
        engine: str = "auto",
        dtype: str | None = None,
        on_note: Callable[[str], None] | None = None,
        device: str = "cpu",
        threads: int | None = None,
    ):
        if not all(isinstance(x, np.ndarray) and x.dtype == np.float64 for x in params.values()):
            params = Float64Weights(params)  # float64 when asked (a dict of it: itself)
        self.cfg, self.params, self.tok, self.labels = cfg, params, tok, labels
        self.name, self.engine, self.dtype = name, engine, dtype
        self.on_note = on_note
        self.notes: list[str] = []
        self.fix = FIX
        self._engines: dict = {}
        self._made: dict = {}
        self._lock = threading.Lock()
        self._gates: dict = {}
        self.device, self.threads = device, threads
        self.preset = False  # a preset's random weights, not a folder's (`Model.load` says)
        if threads is None:
            threads = devices.default_threads()  # the cores less the other runnable tasks
        if threads is not None and (told := devices.use_threads(threads)) is not None:
            self.note(told)  # BLAS's threads could not be set

    # -- notes and names -------------------------------------------------------------------------

    def note(self, message: str) -> None:
        """Tell `on_note`, or keep the note in `notes` (once), in Python's words (`Said`: the
        command line's `on_note` writes its flags)."""
        message = Said(message)
        if self.on_note is not None:
            self.on_note(message)
        elif message not in self.notes:
            self.notes.append(message)

    def unknown_note(self, unknown: list[str], quiet: bool = False) -> None:
        """Note unknown pieces; not when quiet (the explorer shows them, notes would pile up)."""
        if unknown and not quiet:
            shown = ", ".join(repr(u) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            self.note(
                f"{len(unknown)} unknown token(s) mapped to {self.tok.specials.get('unk')}: {shown}"
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

    # -- what a model must have ------------------------------------------------------------------

    def need_tokenizer(self):
        if self.tok is None and self.preset:
            raise GlassformerError(
                f"preset {self.name} has random weights and no tokenizer: text cannot be encoded; "
                "use a checkpoint with its tokenizer, or the preset hello-world (the article's); "
                "from Python a run also reads token ids (ids=[...])"
            )
        if self.tok is None and _nanogpt(self.name):
            from glassformer.formats import nanogpt

            raise GlassformerError(nanogpt.no_tokenizer(self.name, self.cfg.vocab_size))
        if self.tok is None:
            raise GlassformerError(
                f"checkpoint {self.name} has no {weights.TOKENIZER_FILE}: text cannot "
                "be encoded; save it with its tokenizer"
            )
        return self.tok

    def need_generator(self) -> None:
        if self.cfg.arch == "encoder":
            raise GlassformerError("an encoder-only model does not generate; use `explain`")

    def need_classifier(self) -> None:
        cfg = self.cfg
        if cfg.arch != "encoder" or not cfg.n_classes:
            what = f"an {cfg.arch}" if cfg.arch != "decoder" else "a decoder"
            hint = "; for an encoder without one use `embed`" if cfg.arch == "encoder" else ""
            raise GlassformerError(
                f"classify needs an encoder with a classifier (n_classes > 0); {self.name} is "
                f"{what}{' without a classifier' if cfg.arch == 'encoder' else ''}{hint}"
            )

    # -- text and tokens -------------------------------------------------------------------------

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
            self.unknown_note(missing)
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
                    # float32 and int8 from the weights as stored: a float32 array is shared
                    stored = getattr(self.params, "stored", self.params)
                    given = self.params if dtype == "float64" else stored
                    self._engines[key] = inference.torch_engine(self.cfg, given, *key)
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
        return _from_prompt(
            numerics.checked(step, self.params, self.cfg, prompt_len, src, fix), prompt_len
        )

    def many_step(self, src: list[int] | None = None, *, prompt_len: int = 1):
        """Batched next-token logits (hypotheses -> (n, V)) for beam search on the PyTorch
        engine's KV cache, checked as `step` is; None without the PyTorch engine."""
        model = self.torch(self.dtype or "float64")
        if model is None:
            return None
        from glassformer.torch_steps import many_step_fn

        step = many_step_fn(model, src)
        checked = numerics.checked_many(step, self.params, self.cfg, prompt_len, src, self.fix)
        return _from_prompt(checked, prompt_len)

    def reference_run(self) -> Callable:
        """The reference engine's forward as an `interventions.Run`: input (ids, or (src,
        ids)) -> logits (T, V); for a classifier, ids -> class logits (n_classes,); for another
        encoder, ids -> the encoder output (S, C)."""
        from glassformer.inspect import interventions as I

        if self.cfg.arch != "encoder":
            return I.reference_run(self.params, self.cfg)
        if self.cfg.n_classes:
            return lambda ids: R.classify(self.params, self.cfg, list(ids))
        return lambda ids: R.encoder(self.params, self.cfg, list(ids))

    def torch_pass(self, dtype: str = "float32") -> Callable | None:
        """The pass `Model.run` traces in the reference engine, on the PyTorch engine in `dtype`
        instead (the explorer's float32 view traces it): input (ids, or (src, ids)) -> a
        decoder's or translator's logits (T, V), a classifier's class logits (n_classes,),
        another encoder's sentence embedding (C,), as NumPy in `dtype`; traced, its steps have
        the reference's names (LayerNorm internals aside: the fused op has none). None without
        PyTorch."""
        model = self.torch(dtype)
        if model is None:
            return None
        import torch

        from glassformer.torch_model import sentence_embeddings

        cfg, device = self.cfg, next(model.parameters()).device
        pooled = cfg.arch == "encoder" and not cfg.n_classes

        def run(inp):
            src, ids = inp if cfg.arch == "encoder-decoder" else (None, inp)
            x = torch.as_tensor([list(ids)], device=device)  # (1, T)
            with torch.no_grad():
                if pooled:
                    out = sentence_embeddings(model, x)  # (1, C)
                else:
                    s = None if src is None else torch.as_tensor([list(src)], device=device)
                    out = model(x, src_ids=s)  # (1, T, V) or (1, n_classes)
            return out[0].cpu().numpy()

        return run

    # -- decoding and classes --------------------------------------------------------------------

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
        return generating.translations(self, sentences, beam, n_best, dtype, places)

    def class_probabilities(self, ids: list[list[int]], *, engine: str | None = None):
        """(N, n_classes) class probabilities of encoded texts (`classify`'s numbers)."""
        self.need_classifier()
        engine = engine or self.engine
        fix = numerics.REFERENCE
        return inference.class_probabilities(
            self.cfg, self.params, ids, engine, fix=fix, device=self.device
        )

    def class_result(self, probs: np.ndarray) -> dict:
        """One text's class: {label, class, probability, probabilities by class name}."""
        return results.Classification.of(self.class_names, probs).to_dict()


def _from_prompt(step: Callable, prompt_len: int) -> Callable:
    """`step` telling the engines where its decoding's prompt ends (`trace.positions`: an
    intervention that reads positions, steering's from_step, counts the new tokens from it)."""

    def told(ids):
        with positions(prompt=prompt_len):
            return step(ids)

    return told


def _nanogpt(name: str) -> bool:
    """A model read from a nanoGPT checkpoint (its out_dir, or the ckpt.pt itself)."""
    from glassformer.formats import nanogpt

    return nanogpt.is_nanogpt(name)
