"""The checks at the public entry points of the engines: token ids, masks and the tensors of a
params dict, each refused with one `InputError` that says what was wrong and what to do; and
`utf8`, the refusal of user text that is not valid UTF-8, which every text a `Model` encodes
passes.

Both engines call these before any work (the reference engine on NumPy arrays; the PyTorch
engine on its batched tensors, with one min/max reduction per tensor of ids and no other read of
the values, so that the batched fast path stays fast), so the math itself trusts its inputs and
stays as the articles write it. Decoding's own numbers are checked in `decoding.py`.

Deliberately not here: the math, and file formats (`weights.check` checks a checkpoint's tensors,
values included).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from glassformer.config import Config
from glassformer.errors import InputError


@lru_cache(maxsize=64)
def _spec(cfg: Config) -> dict[str, tuple[int, ...]]:
    from glassformer.weights import spec

    return spec(cfg)


def params(p, cfg: Config) -> None:
    """Every tensor spec(cfg) names is in `p` with its shape (names first, then shapes; values
    are not read: that is the checkpoint loader's work)."""
    if not isinstance(p, Mapping):
        raise InputError(
            f"params must be a dict {{name: array}}, got {type(p).__name__}; build it with "
            "weights.init(cfg) or weights.load(folder)"
        )
    expected = _spec(cfg)
    missing = [n for n in expected if n not in p]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise InputError(
            f"params lack the tensor {missing[0]!r}{more} that this config needs; build them "
            "with weights.init(cfg) or weights.load(folder) for the same config"
        )
    for name, shape in expected.items():
        got = tuple(np.shape(p[name]))
        if got != shape:
            raise InputError(
                f"params tensor {name!r} has shape {got} but this config needs {shape}; the "
                "weights belong to another config"
            )


def ids_array(ids, what: str) -> np.ndarray:
    """One sequence of token ids as int64: 1-D, integers (not floats, not bools)."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InputError(
            f"{what} must be one sequence of token ids (1-D), got shape {arr.shape}; the "
            "reference engine takes one sequence at a time"
        )
    if arr.size and arr.dtype.kind not in "iu":
        raise InputError(
            f"{what} must be integers, got {arr.dtype} values; give token ids such as "
            "tok.encode(text) returns"
        )
    return arr.astype(np.int64, copy=False)


def id_range(lo: int, hi: int, n: int, what: str) -> None:
    """Ids from lo to hi index a table of n rows (the vocabulary, the token types)."""
    if lo < 0 or hi >= n:
        bad = lo if lo < 0 else hi
        raise InputError(
            f"{what}: id {bad} is out of range; this model has {n} (ids 0 to {n - 1}); "
            "encode the text with the model's own tokenizer"
        )


def length(n: int, cfg: Config, stack: str) -> None:
    if n == 0:
        raise InputError(f"{stack} input is empty: give at least one token")
    if n > cfg.max_len:
        raise InputError(
            f"{stack} input has {n} tokens but max_len is {cfg.max_len}; shorten the text"
        )


def token_ids(ids, cfg: Config, stack: str) -> np.ndarray:
    """A stack's input ids, checked: 1-D integers in [0, vocab_size), 1 to max_len of them."""
    arr = ids_array(ids, f"{stack} ids")
    length(arr.size, cfg, stack)
    id_range(int(arr.min()), int(arr.max()), cfg.vocab_size, f"{stack} ids")
    return arr


def token_types(types, n: int, cfg: Config) -> None:
    if types is None:
        return
    if not cfg.type_vocab_size:
        raise InputError("types given, but this model has no token types (type_vocab_size 0)")
    arr = ids_array(types, "types")
    if arr.size != n:
        raise InputError(f"types must be one per token: {n}, got {arr.size}")
    id_range(int(arr.min()), int(arr.max()), cfg.type_vocab_size, "types")


def valid_flags(valid, n: int, what: str = "valid") -> np.ndarray | None:
    """A real-token mask: n flags, bool (or 0/1 integers)."""
    if valid is None:
        return None
    arr = np.asarray(valid)
    if arr.shape != (n,):
        raise InputError(
            f"{what} must be {n} flags, one per token (True = real token), got shape {arr.shape}"
        )
    ok = arr.dtype == bool or (arr.dtype.kind in "iu" and bool(np.isin(arr, (0, 1)).all()))
    if not ok:
        raise InputError(
            f"{what} must be True/False flags (True = real token), got {arr.dtype} values"
        )
    return arr.astype(bool)  # no True at all is allowed: it pools to zeros (docs/design.md)


# -- the PyTorch engine's batches (torch is imported only when a tensor is checked) --------------


def tensor_ids(x, n: int, what: str, cfg: Config | None = None, start: int = 0) -> None:
    """A (B, T) integer tensor of ids in [0, n); with cfg, start + T within max_len (the
    positions a stack has)."""
    import torch

    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise InputError(f"{what} must be a (B, T) tensor of token ids, got {got}")
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise InputError(f"{what} must be integers, got {x.dtype}; give a torch.long tensor")
    if x.numel() == 0:
        raise InputError(f"{what} are empty: give at least one token")
    if cfg is not None:
        length(start + x.shape[1], cfg, what.split()[0])
    lo, hi = torch.stack(x.aminmax()).tolist()  # one reduction, one read
    id_range(lo, hi, n, what)


def tensor_flags(m, like, what: str) -> None:
    """A (B, T) mask of real tokens beside the ids `like`: bool (or integer 0/1) flags."""
    if m is None:
        return
    import torch

    if not isinstance(m, torch.Tensor) or tuple(m.shape) != tuple(like.shape):
        got = f"shape {tuple(m.shape)}" if isinstance(m, torch.Tensor) else type(m).__name__
        raise InputError(
            f"{what} must be one flag per token, shape {tuple(like.shape)} like its ids "
            f"(True = real token), got {got}"
        )
    if m.is_floating_point() or m.is_complex():
        raise InputError(f"{what} must be True/False flags (True = real token), got {m.dtype}")


def check_forward(cfg: Config, ids, valid, src_ids, src_valid, cache, types) -> None:
    """Transformer.forward's entry checks: shapes and dtypes, one min/max per tensor of ids."""
    stack = "encoder" if cfg.arch == "encoder" else "decoder"
    past = cache.length if cache is not None and cfg.positions != "none" else 0  # a KVCache
    tensor_ids(ids, cfg.vocab_size, f"{stack} ids", cfg, past)
    tensor_flags(valid, ids, "valid")
    if types is not None:
        tensor_ids(types, cfg.type_vocab_size, "types")
        tensor_flags(types, ids, "types")
    if src_ids is not None:
        if cfg.arch != "encoder-decoder":
            raise InputError(f"src_ids given to a model of arch={cfg.arch!r}; drop them")
        tensor_ids(src_ids, cfg.vocab_size, "encoder ids", cfg)
        tensor_flags(src_valid, src_ids, "src_valid")


def utf8(text: str, what: str = "the text") -> str:
    """User text as the system gave it, refused unless it is valid UTF-8: Python hands an
    argument's undecodable bytes over as lone surrogates (PEP 383), which no tokenizer can
    take (and no output can print)."""
    if not isinstance(text, str):
        raise InputError(f"{what} must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        ch = ord(text[e.start])
        byte = f"byte 0x{ch - 0xDC00:02X}" if 0xDC80 <= ch <= 0xDCFF else f"U+{ch:04X}"
        raise InputError(
            f"{what} is not valid UTF-8 ({byte} at character {e.start}): give UTF-8 text "
            "(set the terminal's encoding, or the locale, e.g. LANG=C.UTF-8, to UTF-8)"
        ) from None
    return text
