"""Hugging Face model folders <-> glassformer: read a GPT-2, BERT-family or Marian folder into a
Config, weights and tokenizer; write a glassformer model as a GPT-2 or BERT folder.

A Hugging Face folder is recognised by its config.json naming a `model_type`. Weights are read
from model.safetensors (or the shards a model.safetensors.index.json lists) and only if there is
none from pytorch_model.bin, through `torch.load(weights_only=True)`: no other unpickling.
The tensor names are translated by `hf.py`'s tables; the tokenizer is the folder's own
(`tokenizer.HFTokenizer`). Tensors glassformer has no use for (BERT's pooler) are skipped and
reported. Deliberately not here: downloading (nothing leaves the machine), generation settings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassformer import files, hf
from glassformer.config import Config
from glassformer.errors import CheckpointError, GlassformerError, TokenizerError

CONFIG_FILE = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt")


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
        data = files.read_json(files.inside(folder, folder / CONFIG_FILE))
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


def is_hf_folder(path: str | Path) -> bool:
    """A directory whose config.json names a Hugging Face `model_type`."""
    path = Path(path)
    if not (path / CONFIG_FILE).is_file():
        return False
    try:
        return "model_type" in _read_config(path)
    except CheckpointError:
        return False


# model_type -> (HF config -> Config, HF tensors -> ours, tensors left out with their reasons)
FAMILIES = {
    "gpt2": (hf.gpt2_config, hf.gpt2_to_glassformer, lambda state: {}),
    "bert": (
        hf.bert_config,
        lambda state, cfg: hf.bert_to_glassformer(state, cfg, skip_unmapped=True),
        hf.bert_unmapped,
    ),
    "marian": (hf.marian_config, hf.marian_to_glassformer, lambda state: {}),
}


def _numpy(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.detach().cpu().float().numpy()


def read_state(folder: Path) -> dict[str, np.ndarray]:
    """{name: NumPy array} of a folder's weights (safetensors, shards, or a weights-only .bin)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    weight_files = [folder / "model.safetensors"]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(files.read_json(index)["weight_map"].values()))
        except GlassformerError as e:
            raise CheckpointError(str(e)) from None
        except (KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index} is unreadable ({e})") from None
        for s in shards:
            if not isinstance(s, str) or Path(s).is_absolute() or ".." in Path(s).parts:
                raise CheckpointError(
                    f"{index} names the shard {s!r}: shards must be file names inside the folder"
                )
        weight_files = [folder / s for s in shards]
    if all(f.is_file() for f in weight_files):
        state = {}
        for f in weight_files:
            try:
                files.inside(folder, f)
            except GlassformerError as e:
                raise CheckpointError(f"{e}: shards must lie inside the folder") from None
            try:
                state |= load_file(str(f))
            except (SafetensorError, OSError, ValueError, TypeError) as e:
                if "bf16" in str(e).lower() or "bfloat16" in str(e).lower():
                    state |= _torch_safetensors(f)
                    continue
                raise CheckpointError(f"{f} is truncated or corrupt ({e})") from None
        return state
    if (folder / "pytorch_model.bin").is_file():
        return _torch_bin(folder / "pytorch_model.bin")
    raise CheckpointError(
        f"{folder} has no model.safetensors (or shards) and no pytorch_model.bin; "
        "save the model there with save_pretrained"
    )


def _torch_safetensors(f: Path) -> dict[str, np.ndarray]:
    """bfloat16 safetensors (NumPy has no bf16): read with torch, widened to float32."""
    try:
        from safetensors.torch import load_file
    except ImportError:
        raise CheckpointError(f"{f} stores bfloat16; reading it needs torch") from None
    return {k: _numpy(v) for k, v in load_file(str(f)).items()}


def _torch_bin(f: Path) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise CheckpointError(
            f"{f} is a PyTorch pickle: reading it needs torch (pip install torch), "
            "or convert it to model.safetensors"
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


def load(folder: str | Path, dtype=np.float64) -> Imported:
    """Read a Hugging Face folder: Config, {name: array} in spec order, tokenizer, skipped."""
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
    try:
        cfg = make_config(d)
    except KeyError as e:
        raise CheckpointError(f"{folder / CONFIG_FILE} lacks the field {e.args[0]!r}") from None
    except GlassformerError as e:
        raise CheckpointError(f"{folder / CONFIG_FILE}: {e}") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(
            f"{folder / CONFIG_FILE} has a field of the wrong type ({e})"
        ) from None
    from glassformer.weights import check_fits

    check_fits(cfg, where=str(folder))
    state = read_state(folder)
    skipped = left_out(state)
    params = convert(state, cfg)
    params = {n: np.asarray(params[n], dtype=dtype) for n in spec(cfg)}
    check(cfg, params, where=str(folder))
    notes = []
    try:
        tok = HFTokenizer.from_files(folder)
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


def export(path: str | Path, cfg: Config, params: dict, tokenizer=None) -> tuple[str, Path]:
    """Write a Hugging Face folder (config.json, model.safetensors in float32, tokenizer.json
    when the tokenizer is a Hugging Face one) that `transformers` loads: a decoder-only model as
    GPT-2 (GPT2LMHeadModel), an encoder without classifier as BERT (BertModel)."""
    from glassformer.weights import write_directory

    if cfg.arch == "decoder":
        family, config = "gpt2", hf.config_to_gpt2(cfg)
        tensors = hf.glassformer_to_gpt2(params, cfg)
        del tensors["lm_head.weight"]  # tied to transformer.wte.weight, as transformers saves it
    elif cfg.arch == "encoder" and not cfg.n_classes:
        family, config = "bert", hf.config_to_bert(cfg)
        tensors = hf.glassformer_to_bert(params, cfg)
    else:
        raise GlassformerError(
            f"export-hf writes decoder-only models (GPT-2) and encoders without a classifier "
            f"(BERT); this is arch={cfg.arch!r}"
            + (f" with n_classes={cfg.n_classes}" if cfg.n_classes else "")
        )
    files = {}
    if tokenizer is not None:
        for role in ("pad", "bos", "eos"):
            token_id = getattr(tokenizer, f"{role}_id")
            if token_id is not None:
                config[f"{role}_token_id"] = token_id
        if hasattr(tokenizer, "hf_json"):
            files["tokenizer.json"] = tokenizer.hf_json.encode()
        else:
            files["glassformer-tokenizer.json"] = tokenizer.to_json().encode()
    config["torch_dtype"] = "float32"
    files[CONFIG_FILE] = (json.dumps(config, indent=2) + "\n").encode()
    arrays = {n: np.ascontiguousarray(x, dtype=np.float32) for n, x in tensors.items()}
    out = write_directory(path, files, {"model.safetensors": arrays}, metadata={"format": "pt"})
    return family, out
