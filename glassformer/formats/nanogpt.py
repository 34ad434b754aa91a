"""nanoGPT checkpoints -> glassformer: the `ckpt.pt` that nanoGPT's train.py writes, and the
`meta.pkl` of its character data preparation, read into a Config, weights and tokenizer.

With hf.py, hf_dir.py and hf_pegasus.py, the only module that knows foreign tensor names: the
table `NANOGPT` below, one row per module (our name, theirs, kind), `{i}` the layer index.
nanoGPT stores every projection as `nn.Linear` (out, in), as we do, so nothing is transposed;
its `c_attn` is q | k | v fused along the output axis: split in three equal parts. The model is
GPT-2's shape (decoder, pre-LN, learned positions, a final LayerNorm) with nanoGPT's own choices:
exact GELU (`nn.GELU()`, erf), LayerNorm eps 1e-5, d_ff = 4 n_embd, and the head tied to the token
embedding (`lm_head.weight` is `transformer.wte.weight`). `model_args['bias']=False` drops the
biases of the linear layers and of the LayerNorms: ours always have a beta, written as zeros,
which is the same function. `torch.compile` prefixes every name with `_orig_mod.`: dropped.
A vocabulary of 50304 (GPT-2's 50257 padded to a multiple of 64) is kept as it is.

Reading is safe by construction: ckpt.pt only through `torch.load(weights_only=True)` (tensors
and plain containers; a checkpoint that names any other global is refused, never unpickled),
meta.pkl only through `_PlainUnpickler`, which refuses every global, so that nothing but dicts,
ints and strings can be built, and the result is checked to be nanoGPT's vocabulary. A tensor the
safe loader builds but that is not dense, in memory and real (sparse, quantized, nested, on the
meta device, complex) is refused by name. Every file of a folder is opened through `files.member`,
every file the user names (meta, vocab_from, tokenizer) through `files.open_regular`: a FIFO or a
device is refused before it is opened, and vocab_from's text is streamed.

Deliberately not here: nanoGPT's training state (the optimizer, iter_num, the run's config are
reported as left out), writing nanoGPT files, and downloading a GPT-2 tokenizer (one is read from
a tokenizer.json the user gives).
"""

from __future__ import annotations

import io
import os
import pickle
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassformer import files
from glassformer.config import Config
from glassformer.errors import (
    INSTALL_TORCH,
    CheckpointError,
    GlassformerError,
    Said,
    TokenizerError,
    param,
)
from glassformer.weights import stored_dtype

CKPT_FILE = "ckpt.pt"  # nanoGPT's out_dir/ckpt.pt
META_FILE = "meta.pkl"  # nanoGPT's data/<dataset>/meta.pkl, read beside ckpt.pt
PREFIX = "_orig_mod."  # what torch.compile adds to every name of the state dict
GPT2_VOCABS = (50257, 50304)  # GPT-2's BPE, and nanoGPT's default padding of it
META_LIMIT = 16 * 2**20  # bytes: a character vocabulary is a few kilobytes
_CHUNK = 2**20  # characters of --vocab-from's text read at a time

# -- the table ----------------------------------------------------------------------------------

_D = "decoder.layers.{i}."
_H = "transformer.h.{i}."
NANOGPT = [
    ("decoder.tok_embed", "transformer.wte", "embed"),
    ("decoder.pos_embed", "transformer.wpe", "embed"),
    (_D + "norm1", _H + "ln_1", "norm"),
    ((_D + "self_attn.q", _D + "self_attn.k", _D + "self_attn.v"), _H + "attn.c_attn", "linear"),
    (_D + "self_attn.o", _H + "attn.c_proj", "linear"),
    (_D + "norm2", _H + "ln_2", "norm"),
    (_D + "ffn.w1", _H + "mlp.c_fc", "linear"),
    (_D + "ffn.w2", _H + "mlp.c_proj", "linear"),
    ("decoder.norm", "transformer.ln_f", "norm"),
]
HEAD = "lm_head.weight"  # nanoGPT's head: no bias, tied to transformer.wte.weight
IGNORED = re.compile(r"transformer\.h\.\d+\.attn\.bias")  # the causal mask of PyTorch < 2.0
# GPTConfig's fields (model_args); one more is a modified model that glassformer cannot check.
MODEL_ARGS = ("n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias", "dropout")
# What train.py saves beside the model, left out of an import: {key: why}.
LEFT_OUT = {
    "optimizer": "nanoGPT's AdamW state (training only; resume in nanoGPT)",
    "iter_num": "the training step reached",
    "best_val_loss": "the run's best validation loss",
    "config": "the run's training settings (train.py's globals)",
}


@dataclass
class Imported:
    """What a nanoGPT checkpoint gave: the model, its tokenizer (or None), what was left out."""

    cfg: Config
    params: dict
    tokenizer: object | None
    source: Path  # the ckpt.pt read
    skipped: dict[str, str] = field(default_factory=dict)  # entry -> reason
    notes: list[str] = field(default_factory=list)


# -- where the checkpoint is --------------------------------------------------------------------


def is_nanogpt(path: str | Path) -> bool:
    """A nanoGPT out_dir (a folder with ckpt.pt and no config.json) or a .pt file."""
    path = Path(path)
    if path.is_dir():
        return os.path.lexists(path / CKPT_FILE) and not (path / "config.json").exists()
    return path.is_file() and path.suffix == ".pt"


def checkpoint_file(path: str | Path) -> tuple[Path, str]:
    """(folder, file name) of the ckpt.pt that `path` names: the file itself, or the ckpt.pt of
    an out_dir. The folder is the one every read stays inside."""
    path = Path(path)
    if path.is_file():
        return path.parent, path.name
    if os.path.exists(path) and not path.is_dir():  # a FIFO, a socket, a device
        _regular(path)
    if not path.is_dir():
        raise CheckpointError(
            f"nanoGPT checkpoint {path} not found: give the ckpt.pt that train.py wrote, or its "
            "out_dir"
        )
    if not os.path.lexists(path / CKPT_FILE):
        kind = "a glassformer or Hugging Face folder, " if (path / "config.json").exists() else ""
        raise CheckpointError(
            f"{path} has no {CKPT_FILE}: it is {kind}not a nanoGPT out_dir; give the folder "
            f"where nanoGPT's train.py saves {CKPT_FILE}, or the file itself"
        )
    return path, CKPT_FILE


def read_checkpoint(folder: Path, name: str) -> dict:
    """The dict in `folder / name`, read with `torch.load(weights_only=True)` only: a file that
    names any global beyond tensors and plain containers is refused, never unpickled."""
    try:
        import torch
    except ImportError:
        raise CheckpointError(f"reading nanoGPT's {name} needs PyTorch: {INSTALL_TORCH}") from None
    try:
        path = files.member(folder, name)
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None
    try:
        fh = files.open_regular(path)  # `member` checked it; what is opened is checked again
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None
    try:
        with fh, warnings.catch_warnings():  # (an old pickle protocol): the CLI prints one line
            warnings.simplefilter("ignore")
            data = torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, EOFError...
        raise CheckpointError(_unreadable(path, e)) from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        if isinstance(data, dict):
            got = f"a dict of {', '.join(map(repr, list(data)[:4]))}"
        else:
            got = f"a {type(data).__name__}"
        raise CheckpointError(
            f"{path} is not a nanoGPT checkpoint: it holds {got}, not train.py's dict of model "
            "(the state dict), model_args, optimizer, ...; save it as train.py does"
        )
    return data


def _unreadable(path: Path, e: Exception) -> str:
    text = str(e).strip()
    refused = re.search(r"GLOBAL ([\w.]+)", text)
    if refused or "Weights only load failed" in text:
        what = f"the global {refused[1]}" if refused else "an object beyond tensors and plain data"
        return (
            f"{path} holds {what}, which the safe loader (torch.load weights_only=True) refuses: "
            "glassformer never runs a pickle's code; load the file once where you trust it and "
            "save only tensors and plain values (as nanoGPT's train.py does)"
        )
    first = f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__
    return f"{path} is truncated or not a PyTorch file ({first}); restore it or save it again"


# -- the model ----------------------------------------------------------------------------------


def model_config(model_args, state: dict, where: str) -> Config:
    """The Config of nanoGPT's GPT from its model_args (the GPTConfig fields) and its tensors
    (a head that is not the token embedding makes an untied model)."""
    if not isinstance(model_args, dict):
        raise CheckpointError(
            f"{where} has no model_args (the GPTConfig fields train.py saves): the architecture "
            "is unknown; save the checkpoint as nanoGPT's train.py does"
        )
    if extra := sorted(str(k) for k in model_args if k not in MODEL_ARGS):
        raise CheckpointError(
            f"{where}: model_args has {extra[0]!r}, which nanoGPT's GPTConfig has not: a modified "
            "model that glassformer cannot read as nanoGPT's GPT"
        )
    sizes = {}
    for key in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"):
        value = model_args.get(key)
        if type(value) is not int or value < 1:
            raise CheckpointError(
                f"{where}: model_args[{key!r}] must be a positive integer, got {value!r}"
            )
        sizes[key] = value
    bias = model_args.get("bias", True)  # GPTConfig's default; older checkpoints lack the field
    if type(bias) is not bool:
        raise CheckpointError(f"{where}: model_args['bias'] must be true or false, got {bias!r}")
    try:
        return Config(
            arch="decoder",
            vocab_size=sizes["vocab_size"],
            d_model=sizes["n_embd"],
            n_heads=sizes["n_head"],
            d_ff=4 * sizes["n_embd"],
            n_decoder_layers=sizes["n_layer"],
            max_len=sizes["block_size"],
            positions="learned",
            norm="pre",
            activation="gelu",  # nn.GELU(): the exact, erf form
            bias=bias,
            tie_embeddings=_tied(state),
            ln_eps=1e-5,
        )
    except GlassformerError as e:
        raise CheckpointError(f"{where}: model_args give no valid model ({e})") from None


def _tied(state: dict) -> bool:
    head, wte = state.get(HEAD), state.get("transformer.wte.weight")
    if head is None or wte is None:
        return True
    return tuple(head.shape) == tuple(wte.shape) and bool((head == wte).all())


def _rows(cfg: Config):
    """Every tensor of the table for this config: (our names, their name, kind)."""
    for ours, theirs, kind in NANOGPT:
        ours = (ours,) if isinstance(ours, str) else ours
        for i in range(cfg.n_decoder_layers) if "{i}" in theirs else [None]:
            for s in ("weight",) if kind == "embed" else ("weight", "bias"):
                yield tuple(f"{o.format(i=i)}.{s}" for o in ours), f"{theirs.format(i=i)}.{s}", kind


def _array(x, name: str) -> np.ndarray:
    if not x.is_floating_point():
        raise CheckpointError(f"nanoGPT tensor {name!r} has dtype {x.dtype}; weights are floats")
    return x.detach().to("cpu").double().numpy()


def to_glassformer(state: dict, cfg: Config) -> dict[str, np.ndarray]:
    """nanoGPT's state dict (`_orig_mod.` prefixes dropped) -> spec(cfg) float64 arrays.

    A missing bias of a bias-free model is a LayerNorm's zero beta or no tensor at all; a tensor
    the table does not expect, a missing one or one of the wrong shape is named and refused."""
    from glassformer.weights import spec

    shapes, out, used = spec(cfg), {}, set()
    for names, theirs, kind in _rows(cfg):
        if not cfg.bias and theirs.endswith(".bias"):  # a bias-free model's are refused below
            if kind == "norm":  # LayerNorm(bias=False): beta = 0 is the same function
                out[names[0]] = np.zeros(shapes[names[0]])
            continue
        if theirs not in state:
            raise CheckpointError(f"nanoGPT checkpoint has no tensor {theirs!r}")
        x, n = _array(state[theirs], theirs), len(names)
        want = (shapes[names[0]][0] * n, *shapes[names[0]][1:])  # c_attn: q | k | v fused
        if x.shape != want:
            raise CheckpointError(
                f"nanoGPT tensor {theirs!r} has shape {tuple(x.shape)}, expected {want} from "
                "model_args; the checkpoint and its model_args disagree"
            )
        rows = want[0] // n
        for j, name in enumerate(names):
            out[name] = x[j * rows : (j + 1) * rows]
        used.add(theirs)
    if not cfg.tie_embeddings:  # a modified nanoGPT whose head is not the embedding
        out[HEAD] = _array(state[HEAD], HEAD)
        if cfg.lm_bias:  # nanoGPT's head has no bias
            out["lm_head.bias"] = np.zeros(shapes["lm_head.bias"])
    used.add(HEAD)
    for name in state:
        if name not in used and not IGNORED.fullmatch(name):
            bias_free = not cfg.bias and name.endswith(".bias")
            why = "model_args say bias=False" if bias_free else "more layers than model_args say"
            raise CheckpointError(
                f"unexpected tensor {name!r} in a nanoGPT checkpoint: nanoGPT's GPT has no such "
                f"tensor ({why}, or a modified model?)"
            )
    return {n: out[n] for n in shapes}


def _regular(path: Path) -> Path:
    try:
        return files.regular(path)
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None


def _state(ckpt: dict, where: str) -> dict:
    """The model's state dict, names without the `_orig_mod.` of torch.compile."""
    import torch

    state = {}
    for name, x in ckpt["model"].items():
        if not isinstance(name, str) or not isinstance(x, torch.Tensor):
            raise CheckpointError(
                f"{where}: 'model' is not a state dict (entry {name!r} of type "
                f"{type(x).__name__}); save model.state_dict() as train.py does"
            )
        if unusual := _unusual(x):
            what, fix = unusual
            raise CheckpointError(
                f"{where}: tensor {name!r} is {what}, not the dense tensor nanoGPT saves; {fix} "
                "and save the checkpoint again"
            )
        state[name.removeprefix(PREFIX)] = x
    return state


def _unusual(x) -> tuple[str, str] | None:
    """(what, what to do) when tensor `x` is other than a dense tensor with its data in memory
    (the safe loader builds these too): sparse (COO, CSR, CSC, BSR, BSC), quantized, nested, on
    the meta device (a shape without data); None for a dense one (strided views and shared
    storage included)."""
    import torch

    if x.is_nested:  # before the layout: a jagged nested tensor has a layout of its own
        return "a nested tensor", "save the model's own state_dict()"
    if x.layout != torch.strided:
        layout = str(x.layout).removeprefix("torch.")
        return f"a sparse tensor ({layout})", "make it dense (tensor.to_dense())"
    if x.is_quantized:
        dtype = str(x.dtype).removeprefix("torch.")
        return f"a quantized tensor ({dtype})", "dequantize it (tensor.dequantize())"
    if x.device.type != "cpu":
        return (
            f"a tensor on the {x.device.type} device, without data",
            "load the model's weights before saving it",
        )
    return None


# -- the tokenizer ------------------------------------------------------------------------------


class _Refused(pickle.UnpicklingError):
    """A pickle that names a global: refused before anything of it is called."""


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global: only dicts, lists, tuples, ints, floats, strings
    and bytes can be built, so no pickle's code can run (`persistent_load` is refused too)."""

    def find_class(self, module: str, name: str):
        raise _Refused(f"the global {module}.{name}")


def read_meta(path: Path, vocab_size: int):
    """The character tokenizer of a nanoGPT meta.pkl ({vocab_size, itos, stoi}, as its char
    data preparation writes it), read by `_PlainUnpickler` and checked to be exactly that dict:
    itos the ids 0..vocab_size-1 to one character each, stoi its inverse, vocab_size the
    model's. Specials: none (ids are the characters')."""
    from glassformer.tokenizer import CharTokenizer

    try:
        raw = files.read_limited(
            path, META_LIMIT, "a nanoGPT meta.pkl (a vocabulary of characters)"
        )
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None
    try:
        data = _PlainUnpickler(io.BytesIO(raw)).load()
    except OSError as e:
        raise CheckpointError(f"cannot read {path} ({e.strerror or e})") from None
    except _Refused as e:
        raise CheckpointError(
            f"{path} is not nanoGPT's plain meta.pkl ({e}): glassformer builds only dicts of "
            "ints and strings from a pickle and never runs its code; give the meta.pkl that "
            "prepare.py wrote"
        ) from None
    except Exception as e:  # noqa: BLE001 - a damaged pickle raises EOFError, ValueError, ...
        raise CheckpointError(f"{path} is truncated or not a pickle ({e}); restore it") from None
    itos = _check_meta(data, str(path), vocab_size)
    return CharTokenizer([itos[i] for i in range(vocab_size)], {})


def _check_meta(data, where: str, vocab_size: int) -> dict:
    """meta's itos once the dict is nanoGPT's: {vocab_size, itos, stoi}, consistent."""
    if not isinstance(data, dict) or set(data) != {"vocab_size", "itos", "stoi"}:
        got = sorted(map(repr, data)) if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(
            f"{where} is not a nanoGPT meta.pkl: expected a dict of vocab_size, itos and stoi, "
            f"got {got}"
        )
    n, itos, stoi = data["vocab_size"], data["itos"], data["stoi"]
    ok = type(n) is int and isinstance(itos, dict) and isinstance(stoi, dict)
    ok = ok and len(itos) == n  # before range(n): a vocab_size of 10**12 builds nothing
    ok = ok and all(type(i) is int and type(c) is str and len(c) == 1 for i, c in itos.items())
    if not ok or set(itos) != set(range(n)) or stoi != {c: i for i, c in itos.items()}:
        raise CheckpointError(
            f"{where}: itos and stoi are not one character for each id 0..vocab_size-1 and its "
            "inverse; give the meta.pkl that nanoGPT's prepare.py wrote"
        )
    if n != vocab_size:
        raise CheckpointError(
            f"{where} has {n} characters but the model {vocab_size} embeddings: it is the "
            "vocabulary of other data; give the meta.pkl the model was trained with"
        )
    return itos


def vocab_from_text(path: str | Path, vocab_size: int):
    """The character tokenizer nanoGPT's prepare.py builds from its training text: the sorted
    set of its characters (the file read as prepare.py reads it: text mode, UTF-8)."""
    from glassformer.tokenizer import CharTokenizer

    seen: set[str] = set()
    try:
        with io.TextIOWrapper(files.open_regular(path), encoding="utf-8") as f:
            while chunk := f.read(_CHUNK):  # streamed: a training text of gigabytes is fine
                seen.update(chunk)
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"cannot read {path} as UTF-8 text ({e})") from None
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None
    chars = sorted(seen)
    if len(chars) != vocab_size:
        raise CheckpointError(
            f"{path} has {len(chars)} distinct characters but the model {vocab_size} embeddings: "
            "it is not the text the model was trained on; give that text (or its meta.pkl)"
        )
    return CharTokenizer(chars, {})


def gpt2_tokenizer(path: str | Path):
    """A Hugging Face tokenizer.json (GPT-2's for a GPT-2 BPE model), or a folder that holds
    one; <|endoftext|> as BOS and EOS where the vocabulary has it, as import-hf reads GPT-2."""
    from glassformer.tokenizer import HFTokenizer
    from glassformer.tokenizer.base import FILE_LIMIT

    path = Path(path)
    if path.is_dir():
        return HFTokenizer.from_files(path)
    try:
        text = files.read_limited(path, FILE_LIMIT, "a tokenizer.json").decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TokenizerError(f"cannot read the tokenizer {path} as UTF-8 ({e})") from None
    except GlassformerError as e:
        raise TokenizerError(str(e)) from None
    tok = HFTokenizer(text)
    if "<|endoftext|>" not in tok.vocab:
        return tok
    return HFTokenizer(text, {"bos": "<|endoftext|>", "eos": "<|endoftext|>"})


def _tokenizer(ckpt: dict, folder: Path, cfg: Config, meta, vocab_from, tokenizer, notes):
    """The tokenizer the options name, else the meta.pkl beside ckpt.pt, else None (noted)."""
    if sum(x is not None for x in (meta, vocab_from, tokenizer)) > 1:
        raise GlassformerError("give one of meta, vocab_from and tokenizer")
    V = cfg.vocab_size
    if meta is not None:
        return read_meta(Path(meta), V)
    if vocab_from is not None:
        return vocab_from_text(vocab_from, V)
    if tokenizer is not None:
        return gpt2_tokenizer(tokenizer)
    try:
        beside = files.member(folder, META_FILE, required=False)
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None
    if beside is not None:
        return read_meta(beside, V)
    if V in GPT2_VOCABS:
        notes.append(
            Said(
                f"no tokenizer: a vocabulary of {V} is GPT-2's BPE (nanoGPT's default), and "
                "glassformer bundles no GPT-2 tokenizer; give the tokenizer.json of a Hugging "
                f"Face gpt2 folder ({param('nanogpt.tokenizer', text='FILE')})"
            )
        )
        return None
    config = ckpt.get("config")
    dataset = config.get("dataset") if isinstance(config, dict) else None
    named = isinstance(dataset, str) and re.fullmatch(r"[\w.-]+", dataset) is not None
    where = f"data/{dataset}/{META_FILE}" if named else f"data/DATASET/{META_FILE}"
    notes.append(
        Said(
            f"no tokenizer: no {META_FILE} beside {CKPT_FILE}; nanoGPT keeps it in {where}: copy "
            f"it there, or give {param('nanogpt.meta', text='FILE')} (or "
            f"{param('nanogpt.vocab_from')} the training text)"
        )
    )
    return None


def no_tokenizer(path: str | Path, vocab_size: int) -> str:
    """Why a nanoGPT checkpoint read without a tokenizer cannot encode text, and the import
    that gives it one: its meta.pkl (a character model), or GPT-2's tokenizer.json."""
    if vocab_size in GPT2_VOCABS:
        return (
            f"nanoGPT checkpoint {path} has GPT-2's BPE vocabulary ({vocab_size}) and no "
            "tokenizer: text cannot be encoded, and glassformer bundles no GPT-2 tokenizer; "
            "import it with the tokenizer.json of a Hugging Face gpt2 folder: "
            f"glassformer import-nanogpt {path} OUT --tokenizer tokenizer.json"
        )
    return (
        f"nanoGPT checkpoint {path} needs its meta.pkl to encode text: there is none beside "
        f"{CKPT_FILE} (nanoGPT's prepare.py writes it to data/DATASET/{META_FILE}); copy it "
        f"there, or import the model with it: glassformer import-nanogpt {path} OUT --meta "
        "meta.pkl"
    )


# -- the whole checkpoint -----------------------------------------------------------------------


def load(
    path: str | Path,
    dtype=np.float64,
    meta: str | Path | None = None,
    vocab_from: str | Path | None = None,
    tokenizer: str | Path | None = None,
) -> Imported:
    """Read a nanoGPT checkpoint (ckpt.pt, or the out_dir holding it): Config, {name: array} in
    spec order, tokenizer (from `meta` (a meta.pkl), `vocab_from` (the training text),
    `tokenizer` (a tokenizer.json), else a meta.pkl beside ckpt.pt, else None), and what was
    left out. Every file of the folder is read through `files.member`."""
    from glassformer.weights import check, check_fits

    folder, name = checkpoint_file(path)
    for given in (meta, vocab_from, tokenizer):  # refused before the checkpoint is read
        if given is not None and not (given is tokenizer and Path(given).is_dir()):
            _regular(Path(given))
    where = str(folder / name)
    ckpt = read_checkpoint(folder, name)
    state = _state(ckpt, where)
    cfg = model_config(ckpt.get("model_args"), state, where)
    check_fits(cfg, where=where)
    params = to_glassformer(state, cfg)
    params = {n: np.asarray(x, dtype=dtype or stored_dtype(x)) for n, x in params.items()}
    check(cfg, params, where=where)
    notes: list[str] = []
    if cfg.vocab_size == 50304:
        notes.append(
            "vocab_size 50304: GPT-2's 50257 tokens padded to a multiple of 64 (nanoGPT's "
            "default), kept as it is"
        )
    if not cfg.tie_embeddings:
        notes.append(f"{HEAD} is not transformer.wte.weight (nanoGPT ties them): imported untied")
    tok = _tokenizer(ckpt, folder, cfg, meta, vocab_from, tokenizer, notes)
    if tok is not None and tok.vocab_size > cfg.vocab_size:
        raise CheckpointError(
            f"the tokenizer has {tok.vocab_size} tokens but the model only {cfg.vocab_size} "
            "embeddings: they are not one model's"
        )
    skipped = {k: why + _value(ckpt[k]) for k, why in LEFT_OUT.items() if k in ckpt}
    return Imported(cfg, params, tok, folder / name, skipped, notes)


def _value(x) -> str:
    """' (value)' of a number train.py saved (iter_num, best_val_loss: a 0-d tensor), else ''."""
    if getattr(x, "ndim", None) == 0 and getattr(x, "is_floating_point", lambda: False)():
        if _unusual(x):  # a value without data, or sparse: not shown
            return ""
        x = float(x)
    if type(x) is int:
        return f" ({x:,})"
    return f" ({x:.4f})" if type(x) is float else ""
