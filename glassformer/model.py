"""One loaded model and everything a user does with it: the Python API, and the one layer the
command line (`cli/`) and the explorer (`serve/`) call.

    import glassformer
    m = glassformer.load("models/en-es")          # a checkpoint, a Hugging Face folder, a preset
    m.translate("Hello world.")                   # what `glassformer translate` prints
    run = m.run("Hello world.")                   # one traced forward pass (float64 reference)
    run.trace["decoder.0.cross_attn.head0.A"]     # any intermediate, by name

A `Model` is the public face: how it is made (`Model.load`, `with_params`), what it is made of
(`cfg`, `params`, `tokenizer`, `class_names`), text to ids and back, and the verbs, each giving
what its command prints, with its defaults and refusals (a `GlassformerError` of one line, naming
parameters as Python does: `position=99`, where the command line says `--position 99`). Its
plumbing (engines made once, step functions, checks, caches, where notes go) is `Model.runtime`
(`runtime.py`), which the helper modules, serve/ and the command line share. The verbs that
write text (`generate`, `stream`, `record`, `translate`, `alignments`) are its base class
`GeneratingVerbs` (`generating_verbs.py`), those that look inside a run `LookingInside`
(`looking.py`); the encoders' verbs and writing are here.

Deliberately not here: argument parsing, HTTP, printing; reading a folder or preset
(`opening.py`); the plumbing (`runtime.py`); the math (the engines), decoding (`decoding.py`,
`inference.py`, `generating.py`), recording (`recording.py`), touching (`touch.py`), rendering
(`explain/`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from glassformer import (
    devices,
    inference,
    numerics,
    opening,
    results,
    weights,
)
from glassformer.arguments import checked
from glassformer.config import Config
from glassformer.errors import GlassformerError, InputError
from glassformer.generating_verbs import GeneratingVerbs
from glassformer.looking import LookingInside
from glassformer.runtime import Runtime

DTYPES, check_dtype = inference.DTYPES, inference.check_dtype  # the PyTorch engine's precisions


@checked  # every argument of every public method, against glassformer.arguments' table
class Model(GeneratingVerbs, LookingInside):
    """A transformer you can see through: a glassformer checkpoint, a Hugging Face or nanoGPT
    folder, or a preset, with both engines (NumPy float64 reference, PyTorch) behind one API.

    Make one with `Model.load(path_or_preset)` (`glassformer.load`), or from a `Config` and
    weights. Each verb does what its command prints: `generate`, `record`, `translate`,
    `alignments`, `embed`, `classify`, `evaluate`; looking inside: `run` / `trace` (every
    intermediate by name), `result`, `ablate`, `patch`, `intervene`, `lens`, `attribute`;
    writing: `save`, `export_hf`. Notes the commands print on stderr (an implied strategy, why a
    generation stopped, unknown tokens) go to `on_note`, else to `notes`.

    Parameters
    ----------
    cfg : Config
        The architecture.
    params : dict
        float64 weights by `weights.spec` name.
    tokenizer : Tokenizer, optional
        Text <-> ids; None: a model that reads ids only.
    labels : list of str, optional
        A classifier's class names, one per class.
    path : path, optional
        The folder it was read from (never written to).
    family : str, optional
        The Hugging Face model_type of a folder imported on the fly.
    name : str, optional
        How reports and refusals name it (default the path, else "model").
    engine : {"auto", "torch", "reference"}
        "auto": PyTorch where the command line uses it, if installed; "reference": NumPy float64.
    dtype : {"float64", "float32", "int8"}, optional
        The PyTorch engine's precision for decoding (None: each verb's command-line default).
    on_note : callable, optional
        Called with each note (default: kept in `notes`).
    device : str
        Where the PyTorch engine runs: "cpu", or a GPU PyTorch sees ("cuda", "cuda:N").
    threads : int, optional
        PyTorch's and NumPy BLAS's threads, for the whole process (None: the cores less the
        other runnable tasks at load, at least 1; a count OMP_NUM_THREADS sets is kept).

    Attributes
    ----------
    runtime : Runtime
        The plumbing serve/, the command line and the helper modules share (`runtime.py`):
        engines made once, step functions, checks, caches, where notes go.
    """

    def __init__(
        self,
        cfg: Config,
        params: dict,
        tokenizer=None,
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
        name = name or (str(path) if path is not None else "model")
        self._path, self._family = path, family
        self.runtime = Runtime(
            cfg,
            params,
            tokenizer,
            labels=labels,
            name=name,
            engine=engine,
            dtype=dtype,
            on_note=on_note,
            device=device,
            threads=threads,
        )

    @classmethod
    def load(
        cls,
        path_or_preset: str | Path,
        *,
        engine: str = "auto",
        dtype: str | None = None,
        seed: int | None = None,
        on_note: Callable[[str], None] | None = None,
        device: str = "cpu",
        threads: int | None = None,
    ) -> Model:
        """A glassformer checkpoint folder, a Hugging Face model folder (imported on the fly) or a
        preset's name, as a `Model` (`glassformer.load`).

        Parameters
        ----------
        path_or_preset : str or path
            A folder, or a preset's name (`glassformer.PRESETS`).
        engine : {"auto", "torch", "reference"}
            "auto": PyTorch where the command line uses it, if installed; "reference": NumPy
            float64 everywhere.
        dtype : {"float64", "float32", "int8"}, optional
            The PyTorch engine's precision for generate, translate and the explorer's decoding
            (None: each verb's command-line default).
        seed : int, optional
            A preset's random weights (default 0); refused for a folder.
        on_note : callable, optional
            Called with each note (default: kept in `Model.notes`).
        device : str
            Where the PyTorch engine runs: "cpu", or a GPU PyTorch sees ("cuda", "cuda:N"; not
            with engine="reference", nor with int8).
        threads : int, optional
            PyTorch's and NumPy BLAS's threads, for the whole process (None: the cores less the
            other runnable tasks now, at least 1; a count OMP_NUM_THREADS sets is kept;
            `devices.default_threads`).

        Returns
        -------
        Model
        """
        if dtype is not None:
            check_dtype(dtype, engine)
        devices.check_device(device, engine, dtype)  # before any work, as dtype
        p = opening.read(path_or_preset, seed)
        m = cls(
            p.cfg,
            p.params,
            p.tokenizer,
            labels=p.labels,
            path=p.path,
            family=p.family,
            name=p.name,
            engine=engine,
            dtype=dtype,
            on_note=on_note,
            device=device,
            threads=threads,
        )
        m.runtime.preset = p.path is None  # refusals call it a preset, not a checkpoint
        return m

    def with_params(self, params: dict) -> Model:
        """The same model (tokenizer, class names, engine, source folder) on other weights.

        Parameters
        ----------
        params : dict
            Weights that fit `cfg` (e.g. snapshots averaged).

        Returns
        -------
        Model
        """
        rt = self.runtime
        other = type(self)(
            self.cfg,
            params,
            rt.tok,
            labels=rt.labels,
            path=self.path,
            family=self.family,
            name=rt.name,
            engine=rt.engine,
            dtype=rt.dtype,
            on_note=rt.on_note,
            device=rt.device,
        )
        other.runtime.fix, other.runtime.preset = rt.fix, rt.preset
        return other

    # -- what it is ------------------------------------------------------------------------------

    @property
    def cfg(self) -> Config:
        """The architecture (`glassformer.Config`)."""
        return self.runtime.cfg

    @property
    def params(self) -> dict:
        """The float64 weights, by `weights.spec` name: the dict given, or for a model read from a
        folder a `runtime.Float64Weights` mapping over the weights as stored (float32 unless the
        file holds float64), each widened to float64 when first read."""
        return self.runtime.params

    @property
    def tokenizer(self):
        """The tokenizer (text <-> ids), or None."""
        return self.runtime.tok

    @property
    def labels(self) -> list[str] | None:
        """A classifier's class names as saved with it, or None."""
        return self.runtime.labels

    @property
    def class_names(self) -> list[str]:
        """A classifier's class names, else its class numbers ("0", "1", ...)."""
        return self.runtime.class_names

    @property
    def notes(self) -> list[str]:
        """The notes the commands print on stderr, when no `on_note` was given."""
        return self.runtime.notes

    @property
    def name(self) -> str:
        """How reports and refusals name the model."""
        return self.runtime.name

    @property
    def device(self) -> str:
        """Where the PyTorch engine runs ("cpu", "cuda", "cuda:N")."""
        return self.runtime.device

    @property
    def threads(self) -> int | None:
        """The threads `load` set for the process, or None (left as they were)."""
        return self.runtime.threads

    @property
    def path(self) -> Path | None:
        """The folder it was read from (absolute), or None."""
        return self._path

    @property
    def family(self) -> str | None:
        """The Hugging Face model_type of a folder imported on the fly, or None."""
        return self._family

    def __repr__(self) -> str:
        where = f"Hugging Face {self.family} " if self.family else ""
        return f"<glassformer.Model {where}{self.name}: {self.summary()}>"

    def _repr_html_(self) -> str:
        from html import escape

        name, what = escape(self.name), escape(self.summary())
        return f"<div><b>glassformer.Model</b> <code>{name}</code><br>{what}</div>"

    def summary(self) -> str:
        """The model in one line (a report's header).

        Returns
        -------
        str
            "arch, layers, d_model, heads, d_ff, vocabulary, norm, positions".
        """
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

    # -- text and tokens -------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, as the model reads it (refused when empty, not valid UTF-8 or
        longer than max_len; unknown pieces in a note).

        Parameters
        ----------
        text : str
            The text.

        Returns
        -------
        list of int
        """
        return self.runtime.encode(text)

    def decode(self, ids: list[int]) -> str:
        """Token ids -> text, as the tokenizer joins them.

        Parameters
        ----------
        ids : list of int
            Ids of this model's vocabulary.

        Returns
        -------
        str
        """
        return self.runtime.decode(ids)

    def tokens(self, text: str | None = None, *, ids: list[int] | None = None) -> list[str]:
        """The tokens of `text` (any length), or of token `ids`, as a person reads them (a space
        shown as ␣, a byte as <0x0A>).

        Parameters
        ----------
        text : str, optional
            The text.
        ids : list of int, optional
            Token ids instead (a run's `ids` or `src`).

        Returns
        -------
        list of str
        """
        if text is None and ids is None:
            raise InputError("text=None: must be a str, or give the token ids (ids=[...])")
        if text is not None and ids is not None:
            raise InputError("tokens() reads text or ids: give one, not both")
        rt = self.runtime
        return rt.readable(rt.encode(text, window=True) if ids is None else ids)

    # -- encoders --------------------------------------------------------------------------------

    def embed(self, text: str | list[str], *, engine: str | None = None) -> np.ndarray:
        """Sentence embeddings, as `glassformer embed` computes them.

        Parameters
        ----------
        text : str or list of str
            One text, or a list.
        engine : {"torch", "reference"}, optional
            Default torch float32 (reference, float64, when the model's engine is).

        Returns
        -------
        ndarray
            Unit vectors: (C,) for a text, (N, C) for a list.
        """
        if not self.cfg.has_encoder:
            raise GlassformerError(f"embed needs an encoder; {self.name} is arch={self.cfg.arch!r}")
        texts = [text] if isinstance(text, str) else list(text)
        ids = [self.runtime.encode(t) for t in texts]
        engine = engine or ("reference" if self.runtime.engine == "reference" else "torch")
        try:
            E = inference.embed(self.cfg, self.params, ids, engine, numerics.REFERENCE, self.device)
        except numerics.NonFiniteError as e:
            raise e.at(f"text {e.row + 1}") from None
        return E[0] if isinstance(text, str) else E

    def classify(
        self,
        text: str | list[str],
        *,
        engine: str | None = None,
        places: list[str] | None = None,
    ) -> results.Classification | list[results.Classification]:
        """What `glassformer classify --json` gives per text.

        Parameters
        ----------
        text : str or list of str
            One text, or a list.
        engine : {"auto", "torch", "reference"}, optional
            Default the model's.
        places : list of str, optional
            Each text's name in a refusal of non-finite values.

        Returns
        -------
        Classification, or a list of them
            label, index (the class number), probability, probabilities by class name;
            `to_dict()` is the command's JSON.
        """
        rt = self.runtime
        rt.need_classifier()
        texts = [text] if isinstance(text, str) else list(text)
        ids = [rt.encode(t) for t in texts]
        places = places or [f"text {n + 1}" for n in range(len(texts))]
        try:
            probs = rt.class_probabilities(ids, engine=engine)
        except numerics.NonFiniteError as e:
            raise e.at(places[e.row]) from None
        out = [results.Classification.of(rt.class_names, p) for p in probs]
        return out[0] if isinstance(text, str) else out

    def evaluate(self, data: str, *, beam: int | None = None, limit: int | None = None) -> str:
        """What `glassformer eval` prints: loss and perplexity (a decoder), BLEU and chrF (an
        encoder-decoder) or accuracy (a classifier).

        Parameters
        ----------
        data : str or path
            A shipped corpus's name or a file.
        beam : int, optional
            An encoder-decoder's beam width (default 4).
        limit : int, optional
            Only the first N tokens or pairs.

        Returns
        -------
        str
            The line `glassformer eval` prints.
        """
        from glassformer.evaluating import evaluate

        return evaluate(self.runtime, data, beam, limit)

    # -- writing ---------------------------------------------------------------------------------

    def save(self, path: str | Path, *, dtype: str = "float32", overwrite: bool = False) -> Path:
        """A glassformer checkpoint folder (config.json, model.safetensors, tokenizer.json,
        labels.json).

        Parameters
        ----------
        path : str or path
            The folder (never the one the model was read from).
        dtype : {"float32", "float64", "float16"}
            The weights' precision on disk.
        overwrite : bool
            Replace an existing folder.

        Returns
        -------
        Path
            The folder written.
        """
        weights.save(
            path,
            self.cfg,
            self.params,
            tokenizer=self.tokenizer,
            dtype=dtype,
            labels=self.labels,
            overwrite=overwrite,
        )
        return Path(path)

    def export_hf(self, path: str | Path, *, overwrite: bool = False) -> tuple[str, Path]:
        """A Hugging Face folder of the matching family: (family, folder).

        Parameters
        ----------
        path : str or path
            The folder (never the one the model was read from).
        overwrite : bool
            Replace an existing folder.

        Returns
        -------
        (str, Path)
            The family and the folder written.
        """
        from glassformer.formats import hf_dir

        return hf_dir.export(path, self.cfg, self.params, self.tokenizer, overwrite=overwrite)
