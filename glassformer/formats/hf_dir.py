"""Hugging Face model folders <-> glassformer: read a GPT-2, BERT-family, Marian, Pegasus, Llama or
Qwen2 folder into a Config, weights and tokenizer; write a glassformer model as a GPT-2, BERT,
Pegasus, Llama or Qwen2 folder.

A Hugging Face folder is recognised by its config.json naming a `model_type`. Weights are read
from model.safetensors (or the shards a model.safetensors.index.json lists) and only if there is
none from pytorch_model.bin, through `torch.load(weights_only=True)`: no other unpickling.
The tensor names are translated by the tables of `hf.py`, `hf_pegasus.py` and `hf_llama.py`; the
tokenizer is the folder's own (`tokenizer.HFTokenizer`; a Llama or Qwen2 one with the BOS and EOS
ids of config.json), or the exact glassformer tokenizer when an export of ours left one
(glassformer-tokenizer.json). Tensors glassformer has no use for (BERT's pooler) are
skipped and reported. Deliberately not here: downloading (nothing leaves the machine).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassformer import files
from glassformer.config import Config
from glassformer.errors import (
    INSTALL_TORCH,
    CheckpointError,
    ConfigError,
    GlassformerError,
    TokenizerError,
)
from glassformer.formats import hf, hf_llama, hf_pegasus
from glassformer.weights import stored_dtype

CONFIG_FILE = "config.json"
OUR_TOKENIZER = "glassformer-tokenizer.json"  # the exact glassformer tokenizer of an export
TOKENIZER_FILES = (OUR_TOKENIZER, "tokenizer.json", "vocab.txt", "vocab.json", "merges.txt")


@dataclass
class Imported:
    """What a Hugging Face folder gave: the model, its tokenizer (or None) and what was left out."""

    family: str
    cfg: Config
    params: dict
    tokenizer: object | None
    skipped: dict[str, str] = field(default_factory=dict)  # tensor name -> reason
    notes: list[str] = field(default_factory=list)


def _read_config(folder: Path) -> dict:
    try:
        data = files.read_json(files.member(folder, CONFIG_FILE))
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{folder / CONFIG_FILE} is not a JSON object")
    return data


# Hugging Face config fields that must be positive integers where a family uses them.
_SIZES = (
    "vocab_size n_embd n_head n_layer n_positions hidden_size num_attention_heads "
    "num_hidden_layers intermediate_size max_position_embeddings d_model encoder_layers "
    "decoder_layers encoder_attention_heads decoder_attention_heads encoder_ffn_dim "
    "decoder_ffn_dim"
).split()


def _check_sizes(folder: Path, d: dict) -> None:
    """Sizes in config.json are positive integers, named as the folder names them."""
    for key in _SIZES:
        value = d.get(key)
        if key in d and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise CheckpointError(
                f"{folder / CONFIG_FILE}: {key} must be a positive integer, got {value!r}"
            )


def _check_token_ids(folder: Path, d: dict, vocab_size: int) -> None:
    """The token ids that a Llama or Qwen2 import reads from config.json (bos_token_id and
    eos_token_id, `hf_llama.config_specials`) are null or ids of the model's vocabulary (0 to
    vocab_size - 1), and so is each of a list: an id past it would name no token. (The other
    families' ids are not read: their specials come from the tokenizer files, and transformers
    writes GPT-2's default 50256 into configs of any vocabulary size.)"""
    for key in ("bos_token_id", "eos_token_id"):
        value = d.get(key)
        for i in value if isinstance(value, list) else [] if value is None else [value]:
            if not (type(i) is int and 0 <= i < vocab_size):
                what = f"{key} {json.dumps(value)}"
                what += f": {json.dumps(i)}" if isinstance(value, list) else ""
                raise CheckpointError(
                    f"{folder / CONFIG_FILE}: {what} is not a token id of this model, whose "
                    f"vocabulary has {vocab_size} tokens (vocab_size; ids 0-{vocab_size - 1}): "
                    f"correct {key}"
                )


def is_hf_folder(path: str | Path) -> bool:
    """A directory whose config.json names a Hugging Face `model_type`."""
    path = Path(path)
    try:
        if not (path / CONFIG_FILE).is_file():
            return False
    except OSError as e:  # a folder that may not be looked into (is_file raises EACCES)
        raise CheckpointError(
            f"cannot read {path} ({e.strerror or e}): give a folder you may read"
        ) from None
    try:
        files.member(path, CONFIG_FILE)  # a config.json that links out is refused, not skipped
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None
    try:
        return "model_type" in _read_config(path)
    except CheckpointError:
        return False


# model_type -> ((HF config, HF tensors) -> Config, HF tensors -> ours, tensors left out with
# their reasons). Pegasus's tensors say part of its Config (shared embeddings, positions).
FAMILIES = {
    "gpt2": (lambda d, state: hf.gpt2_config(d), hf.gpt2_to_glassformer, lambda state: {}),
    "bert": (
        lambda d, state: hf.bert_config(d),
        lambda state, cfg: hf.bert_to_glassformer(state, cfg, skip_unmapped=True),
        lambda state: hf.unmapped_in(hf._strip_prefix(state, "bert."), hf.BERT_UNMAPPED),
    ),
    "marian": (lambda d, state: hf.marian_config(d), hf.marian_to_glassformer, lambda state: {}),
    "pegasus": (hf_pegasus.pegasus_config, hf_pegasus.pegasus_to_glassformer, lambda state: {}),
    "llama": (
        lambda d, state: hf_llama.llama_config(d, "llama"),
        lambda state, cfg: hf_llama.llama_to_glassformer(state, cfg, copy=False),
        lambda state: {},
    ),
    "qwen2": (
        lambda d, state: hf_llama.llama_config(d, "qwen2"),
        lambda state, cfg: hf_llama.llama_to_glassformer(state, cfg, copy=False),
        lambda state: {},
    ),
}  # Llama and Qwen2 tensors are taken as read (no copy): `load` drops the state it read


def _numpy(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.detach().cpu().float().numpy()


def read_state(folder: Path, order: str = "K") -> dict[str, np.ndarray]:
    """{name: NumPy array} of a folder's weights (safetensors, shards, or a weights-only .bin).
    A safetensors file is read tensor by tensor into arrays of its own (`_safetensors`): one copy
    of the weights in memory, where a mapped file would be a second while it is read. order "F":
    every matrix F-ordered (read so, a few rows at a time, from safetensors); "K": as stored."""
    names = ["model.safetensors"]
    index = _member(folder, "model.safetensors.index.json")
    if index is not None:
        try:
            names = sorted(set(files.read_json(index)["weight_map"].values()))
        except GlassformerError as e:
            raise CheckpointError(str(e)) from None
        except (KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index} is unreadable ({e})") from None
        for s in names:
            if not isinstance(s, str) or not Path(s).parts:
                raise CheckpointError(
                    f"{index} names the shard {s!r}: shards must be file names inside the folder"
                )
    try:
        weight_files = [files.member(folder, s, required=False) for s in names]
    except GlassformerError as e:
        where = f"{index} names a shard that is refused: " if index is not None else ""
        raise CheckpointError(f"{where}{e}") from None
    if all(f is not None for f in weight_files):
        state = {}
        for f in weight_files:
            try:
                with open(f, "rb") as handle:
                    tensors = _safetensors(handle, f, order)
            except OSError as e:
                raise CheckpointError(f"{f} is unreadable ({e})") from None
            state |= _in_order(_torch_safetensors(f), order) if tensors is None else tensors
        return state
    if (f := _member(folder, "pytorch_model.bin")) is not None:
        return _in_order(_torch_bin(f), order)
    if index is not None:
        gone = [s for s, f in zip(names, weight_files, strict=True) if f is None]
        more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
        raise CheckpointError(
            f"{index} names the shard {gone[0]!r}{more}, which is not in {folder}; copy every "
            "shard of the model there"
        )
    raise CheckpointError(
        f"{folder} has no model.safetensors (or shards) and no pytorch_model.bin; "
        "save the model there with save_pretrained"
    )


# safetensors dtype -> NumPy (little-endian, as the format stores them); BF16 is read by torch.
_ST_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "U64": "<u8", "I32": "<i4",
    "U32": "<u4", "I16": "<i2", "U16": "<u2", "I8": "i1", "U8": "u1", "BOOL": "?", "C64": "<c8",
}  # fmt: skip
_MAX_HEADER = 100_000_000  # bytes of JSON, the limit of the safetensors library
_ROWS_BYTES = 1 << 22  # an F-ordered matrix is read through a buffer of this many bytes of rows


def _safetensors(handle, f: Path, order: str = "K") -> dict[str, np.ndarray] | None:
    """{name: array} of an open safetensors file, each tensor read (`readinto`) straight into a
    new array (order "F": every matrix F-ordered, its rows read a few at a time into it); None
    when it stores bfloat16 (NumPy has none: `_torch_safetensors`). The header is checked as the
    safetensors library checks it: known dtypes, offsets that match the shapes and cover the data
    without gaps or overlaps."""
    header = _safetensors_header(handle, f)
    if header is None:
        return None
    start = handle.tell()
    state = {}
    for name, (dtype, shape, begin, end) in header.items():
        x = np.empty(shape, dtype=dtype, order="F" if order == "F" and len(shape) == 2 else "C")
        handle.seek(start + begin)
        if end > begin and not _read_into(handle, x):
            raise CheckpointError(f"{f} is truncated or corrupt (tensor {name!r} is cut short)")
        state[name] = x
    return state


def _read_into(handle, x: np.ndarray) -> bool:
    """Fill x with the next x.nbytes bytes of handle, stored row-major (C order) there; False
    when the file ends first. An F-ordered matrix is filled a few rows at a time (no second copy
    of it is ever whole)."""
    if x.flags.c_contiguous:
        return handle.readinto(memoryview(x.reshape(-1).view(np.uint8))) == x.nbytes
    rows = np.empty((max(1, _ROWS_BYTES // (x.strides[1] * x.shape[1])), x.shape[1]), x.dtype)
    for r in range(0, len(x), len(rows)):
        part = rows[: len(x) - r]
        if handle.readinto(memoryview(part.reshape(-1).view(np.uint8))) != part.nbytes:
            return False
        x[r : r + len(part)] = part
    return True


def _in_order(state: dict[str, np.ndarray], order: str) -> dict[str, np.ndarray]:
    """state, in place, every array in `order` (each replaced as its copy is made)."""
    for name, x in state.items():
        state[name] = np.asarray(x, order=order)
    return state


def _safetensors_header(handle, f: Path) -> dict | None:
    """{name: (NumPy dtype, shape, begin, end)} in file order, handle left at the data."""
    size = os.fstat(handle.fileno()).st_size

    def bad(why: str):
        return CheckpointError(f"{f} is truncated or corrupt ({why})")

    raw = handle.read(8)
    n = int.from_bytes(raw, "little") if len(raw) == 8 else -1
    if not 0 < n <= min(size - 8, _MAX_HEADER):
        raise bad("no safetensors header")
    try:
        meta = json.loads(handle.read(n).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise bad(f"the header is not JSON: {e}") from None
    if not isinstance(meta, dict):
        raise bad("the header is not a JSON object")
    meta.pop("__metadata__", None)
    out, at = {}, 0
    for name, t in sorted(meta.items(), key=lambda kv: _offsets(kv[1])):
        kind = t.get("dtype") if isinstance(t, dict) else None
        if kind == "BF16":
            return None
        shape = t.get("shape") if isinstance(t, dict) else None
        if (
            kind not in _ST_DTYPES
            or not isinstance(shape, list)
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise bad(f"tensor {name!r} has no readable dtype and shape")
        begin, end = _offsets(t)
        dtype = np.dtype(_ST_DTYPES[kind])
        if begin != at or end - begin != math.prod(shape) * dtype.itemsize:
            raise bad(f"the offsets of tensor {name!r} do not match its shape")
        out[name], at = (dtype, tuple(shape), begin, end), end
    if 8 + n + at != size:
        raise bad(f"{size - 8 - n} bytes of data, the header describes {at}")
    return out


def _offsets(t) -> tuple[int, int]:
    """A header entry's (begin, end), (-1, -1) when it has none (refused in file order)."""
    d = t.get("data_offsets") if isinstance(t, dict) else None
    ok = isinstance(d, list) and len(d) == 2 and all(type(x) is int for x in d)
    return (d[0], d[1]) if ok else (-1, -1)


def _member(folder: Path, name: str) -> Path | None:
    """`files.member` of a Hugging Face folder (None when absent), as a CheckpointError."""
    try:
        return files.member(folder, name, required=False)
    except GlassformerError as e:
        raise CheckpointError(str(e)) from None


def _torch_safetensors(f: Path) -> dict[str, np.ndarray]:
    """bfloat16 safetensors (NumPy has no bf16): read with torch, widened to float32."""
    try:
        from safetensors.torch import load_file
    except ImportError:
        raise CheckpointError(
            f"{f} stores bfloat16; reading it needs PyTorch: {INSTALL_TORCH}"
        ) from None
    return {k: _numpy(v) for k, v in load_file(str(f)).items()}


def _torch_bin(f: Path) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise CheckpointError(
            f"{f} is a PyTorch pickle: convert it to model.safetensors, or read it with "
            f"PyTorch: {INSTALL_TORCH}"
        ) from None
    try:
        state = torch.load(str(f), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{f} is not a weights-only PyTorch file ({first}); glassformer never unpickles "
            "arbitrary objects: convert it to model.safetensors"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{f} does not hold a {{name: tensor}} state dict")
    return {k: _numpy(v) for k, v in state.items()}


def _as_dtype(params: dict, names: list[str], dtype, order: str = "K") -> dict:
    """{name: array in dtype and order} in `names` order, each converted as it is taken out of
    `params`: one at a time, so that a float32 file read as float64 holds the float64 weights and
    one float32 tensor at most, never both sets. dtype None: as stored (`weights.stored_dtype`)."""
    out = {}
    for n in names:
        x = params.pop(n)
        out[n] = np.asarray(x, dtype=dtype or stored_dtype(x), order=order)
    return out


def load(folder: str | Path, dtype=np.float64, order: str = "K") -> Imported:
    """Read a Hugging Face folder: Config, {name: array} in spec order, tokenizer, skipped.
    order "F": every matrix an F-ordered array; "K", the default: as read (`loading.load`)."""
    from glassformer import tokenizer
    from glassformer.tokenizer import HFTokenizer
    from glassformer.weights import check, spec

    folder = Path(folder)
    d = _read_config(folder)
    family = d.get("model_type")
    if not isinstance(family, str) or family not in FAMILIES:
        raise CheckpointError(
            f"{folder}: model_type {family!r} is not supported; glassformer imports "
            f"{', '.join(FAMILIES)} (BERT-family encoders such as MiniLM are 'bert')"
        )
    make_config, convert, left_out = FAMILIES[family]
    _check_sizes(folder, d)
    state = read_state(folder, order)
    try:
        cfg = make_config(d, state)
    except KeyError as e:
        raise CheckpointError(f"{folder / CONFIG_FILE} lacks the field {e.args[0]!r}") from None
    except GlassformerError as e:
        raise CheckpointError(f"{folder / CONFIG_FILE}: {e}") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(
            f"{folder / CONFIG_FILE} has a field of the wrong type ({e})"
        ) from None
    if family in hf_llama.FAMILIES:
        _check_token_ids(folder, d, cfg.vocab_size)
    skipped = left_out(state)
    params = convert(state, cfg)
    del state  # each tensor read is now held by `params` alone, or by nothing
    params = _as_dtype(params, list(spec(cfg)), dtype, order)
    check(cfg, params, where=str(folder))
    notes = []
    for name in (*TOKENIZER_FILES, "tokenizer_config.json", "special_tokens_map.json"):
        _member(folder, name)  # a tokenizer file that links out is refused, never left out
    try:
        if (ours := _member(folder, OUR_TOKENIZER)) is not None:
            tok = tokenizer.load(ours)
        else:
            tok = HFTokenizer.from_files(folder)
            if family in hf_llama.FAMILIES:
                tok = hf_llama.config_specials(tok, d)
    except TokenizerError as e:
        if any((folder / f).exists() for f in TOKENIZER_FILES):
            raise CheckpointError(str(e)) from None  # a tokenizer is there but unusable
        tok = None
        notes.append(f"no tokenizer: {e}")
    if tok is not None and tok.vocab_size > cfg.vocab_size:
        raise CheckpointError(
            f"{folder}: the tokenizer has {tok.vocab_size} tokens but the model only "
            f"{cfg.vocab_size} embeddings; the folder mixes two models"
        )
    return Imported(family, cfg, params, tok, skipped, notes)


# -- export -------------------------------------------------------------------------------------


def _family(cfg: Config, params: dict) -> tuple[str, dict, dict]:
    """(model_type, config.json fields, tensors) of the Hugging Face model that is `cfg`."""
    if cfg.arch == "decoder" and cfg.modern_options():
        return _modern_decoder(cfg, params)
    if cfg.arch == "decoder":
        tensors = hf.glassformer_to_gpt2(params, cfg)
        del tensors["lm_head.weight"]  # tied to transformer.wte.weight, as transformers saves it
        return "gpt2", hf.config_to_gpt2(cfg), tensors
    if cfg.arch == "encoder" and not cfg.n_classes:
        return "bert", hf.config_to_bert(cfg), hf.glassformer_to_bert(params, cfg)
    if cfg.arch == "encoder-decoder":
        try:
            config = hf_pegasus.config_to_pegasus(cfg)
        except GlassformerError as e:
            raise GlassformerError(
                "export-hf writes an encoder-decoder as a Pegasus folder (pre-LN, which "
                f"transformers and CTranslate2 load); {e}"
            ) from None
        return "pegasus", config, hf_pegasus.glassformer_to_pegasus(params, cfg)
    raise GlassformerError(
        "export-hf writes decoder-only models (GPT-2, Llama, Qwen2), encoders without a classifier "
        f"(BERT) and pre-LN encoder-decoders (Pegasus); this is arch={cfg.arch!r} with "
        f"n_classes={cfg.n_classes}"
    )


def _modern_decoder(cfg: Config, params: dict) -> tuple[str, dict, dict]:
    """A decoder with today's options (rotary, RMSNorm, gated FFN, grouped K/V heads) as a Llama
    or Qwen2 folder; one line naming what keeps it from both that and GPT-2 otherwise."""
    try:
        family = hf_llama.export_family(cfg)
    except ConfigError as e:
        try:
            hf.config_to_gpt2(cfg)  # refuses: GPT-2 has none of these options
        except ConfigError as g:
            raise GlassformerError(
                "export-hf writes a decoder-only model as GPT-2 or as Llama / Qwen2, and this one "
                f"is neither: as GPT-2, {g}; as Llama / Qwen2, {e}"
            ) from None
        raise
    return family, hf_llama.config_to_llama(cfg), hf_llama.glassformer_to_llama(params, cfg)


def _token_ids(family: str, cfg: Config, tokenizer) -> dict[str, int]:
    """{role}_token_id of config.json. A Pegasus decoder starts from its pad token (CTranslate2
    reads the start from the tokenizer's pad_token): ours starts from BOS, so BOS is named pad."""
    ids = {}
    for role in ("pad", "bos", "eos"):
        token_id = getattr(tokenizer, f"{role}_id") if tokenizer is not None else None
        if token_id is not None:
            ids[f"{role}_token_id"] = token_id
    if family != "pegasus":
        return ids
    if "bos_token_id" not in ids or "eos_token_id" not in ids:
        raise GlassformerError(
            "export-hf of an encoder-decoder needs the checkpoint's tokenizer with bos and eos "
            "tokens: the decoder starts from BOS and stops at EOS"
        )
    bos = ids["bos_token_id"]
    return ids | {"pad_token_id": bos, "decoder_start_token_id": bos}


def _tokenizer_files(family: str, cfg: Config, tokenizer) -> dict[str, bytes]:
    """glassformer's own tokenizer, and tokenizer.json (a Hugging Face one's own; a word or
    character tokenizer's `hf_form`, which encodes to the same ids) with the
    tokenizer_config.json that `AutoTokenizer` reads (no template: the encoder sees the text's
    own tokens, as glassformer encodes a source)."""
    from glassformer.tokenizer.hf_form import hf_form

    files = {OUR_TOKENIZER: tokenizer.to_json().encode()}
    hf_json = getattr(tokenizer, "hf_json", None) or hf_form(tokenizer)
    if hf_json is None:
        return files
    named = {f"{role}_token": token for role, token in tokenizer.specials.items()}
    if family == "pegasus":
        named["pad_token"] = tokenizer.specials["bos"]
    if tokenizer.kind == "char":  # "<s>" in a text is three characters: AutoTokenizer would
        named = {}  # match a special it is told of (config.json still names their ids)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **named,
        "model_max_length": cfg.max_len,
        "clean_up_tokenization_spaces": False,
    }
    files["tokenizer.json"] = hf_json.encode()
    files["tokenizer_config.json"] = _json(config)
    return files


def _json(data: dict) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def export(
    path: str | Path, cfg: Config, params: dict, tokenizer=None, overwrite: bool = False
) -> tuple[str, Path]:
    """Write a Hugging Face folder that `transformers` loads (config.json, model.safetensors in
    float32, the tokenizer): a decoder-only model as GPT-2 (GPT2LMHeadModel), or with rotary
    positions, RMSNorm and the gated FFN as Llama (LlamaForCausalLM; Qwen2ForCausalLM with Q, K, V
    biases alone), an encoder without classifier as BERT (BertModel), a pre-LN encoder-decoder as
    Pegasus
    (PegasusForConditionalGeneration, with generation_config.json: greedy from BOS to EOS or
    max_len tokens, as `glassformer translate`), which CTranslate2's converter also reads.
    A tokenizer built on Hugging Face `tokenizers` is written as tokenizer.json +
    tokenizer_config.json for `AutoTokenizer`; every tokenizer also as glassformer-tokenizer.json,
    which `load` prefers. Nothing is written when the model has no such form, nor over an
    existing folder without overwrite=True."""
    from glassformer.files import write_directory
    from glassformer.weights import refuse_existing

    refuse_existing(path, overwrite)

    family, config, tensors = _family(cfg, params)
    config |= _token_ids(family, cfg, tokenizer)
    files = {}
    if family == "pegasus":
        keys = ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id")
        generation = {k: config[k] for k in keys}
        generation |= {"forced_eos_token_id": None, "max_length": cfg.max_len, "num_beams": 1}
        files["generation_config.json"] = _json(generation | {"do_sample": False})
    if tokenizer is not None:
        files |= _tokenizer_files(family, cfg, tokenizer)
    config["torch_dtype"] = "float32"
    files[CONFIG_FILE] = _json(config)
    arrays = {n: np.ascontiguousarray(x, dtype=np.float32) for n, x in tensors.items()}
    out = write_directory(path, files, {"model.safetensors": arrays}, metadata={"format": "pt"})
    return family, out
