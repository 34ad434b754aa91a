"""THE weight-naming scheme, seeded initialisation, and checkpoint directories.

`spec(cfg)` is the contract between the two engines: the name and shape of every tensor of a
model. Linear weights are stored `(out, in)` like `nn.Linear`, so a projection is `x @ W.T`; the
articles' `Wq` (d x c, used as X·Wq) is `W.T` of one head's rows. The per-head Q/K/V matrices of a
layer are stacked along the output axis: rows `h*D:(h+1)*D` of `q.weight` are head h.

A checkpoint is a directory: `config.json` + `model.safetensors` (+ `tokenizer.json`), read and
written with NumPy only (no torch, no pickle). Writes are atomic: the directory is built beside the
target and swapped in, so an interrupted save never leaves a half-written checkpoint.
This module does not compute anything with the weights.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from glassformer.config import Config
from glassformer.errors import CheckpointError, GlassformerError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
STORABLE_DTYPES = ("float64", "float32", "float16")


def _linear(name: str, n_out: int, n_in: int, bias: bool) -> dict[str, tuple[int, ...]]:
    out = {f"{name}.weight": (n_out, n_in)}
    if bias:
        out[f"{name}.bias"] = (n_out,)
    return out


def _norm(name: str, C: int) -> dict[str, tuple[int, ...]]:
    return {f"{name}.weight": (C,), f"{name}.bias": (C,)}


def _attention(name: str, cfg: Config) -> dict[str, tuple[int, ...]]:
    C, HD = cfg.d_model, cfg.attn_dim
    out = {}
    for proj in ("q", "k", "v"):
        out |= _linear(f"{name}.{proj}", HD, C, cfg.bias)
    return out | _linear(f"{name}.o", C, HD, cfg.bias)


def _stack(stack: str, n_layers: int, cfg: Config, cross: bool) -> dict[str, tuple[int, ...]]:
    C, F = cfg.d_model, cfg.d_ff
    out = {}
    if not (stack == "encoder" and cfg.share_embeddings):  # shared: the decoder's is used
        out[f"{stack}.tok_embed.weight"] = (cfg.vocab_size, C)
    if cfg.positions == "learned":
        out[f"{stack}.pos_embed.weight"] = (cfg.max_len, C)
    if cfg.type_vocab_size:
        out[f"{stack}.type_embed.weight"] = (cfg.type_vocab_size, C)
    if cfg.embed_norm:
        out |= _norm(f"{stack}.embed_norm", C)
    for i in range(n_layers):
        p = f"{stack}.layers.{i}"
        out |= _attention(f"{p}.self_attn", cfg) | _norm(f"{p}.norm1", C)
        sublayers = ["self_attn"]
        if cross:
            out |= _attention(f"{p}.cross_attn", cfg) | _norm(f"{p}.norm2", C)
            sublayers.append("cross_attn")
        out |= _linear(f"{p}.ffn.w1", F, C, cfg.bias) | _linear(f"{p}.ffn.w2", C, F, cfg.bias)
        out |= _norm(f"{p}.norm{len(sublayers) + 1}", C)
    if cfg.norm == "pre":
        out |= _norm(f"{stack}.norm", C)
    return out


def spec(cfg: Config) -> dict[str, tuple[int, ...]]:
    """Every tensor of a model: {name: shape}, in a fixed order."""
    out: dict[str, tuple[int, ...]] = {}
    if cfg.has_encoder:
        out |= _stack("encoder", cfg.n_encoder_layers, cfg, cross=False)
    if cfg.has_decoder:
        out |= _stack("decoder", cfg.n_decoder_layers, cfg, cross=cfg.arch == "encoder-decoder")
        if not cfg.tie_embeddings:
            out["lm_head.weight"] = (cfg.vocab_size, cfg.d_model)
        if cfg.lm_bias:
            out["lm_head.bias"] = (cfg.vocab_size,)
    if cfg.arch == "encoder" and cfg.n_classes:
        out |= _linear("classifier", cfg.n_classes, cfg.d_model, cfg.bias)
    return out


def n_params(cfg: Config) -> int:
    return sum(int(np.prod(s)) for s in spec(cfg).values())


def init(cfg: Config, seed: int = 0, std: float = 0.02, dtype=np.float64) -> dict[str, np.ndarray]:
    """Seeded random weights: N(0, std^2) matrices, zero biases, LayerNorm gamma=1, beta=0.

    The same (cfg, seed, std) always gives the same values (NumPy PCG64), in spec order.
    """
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in spec(cfg).items():
        if ".norm" in name or ".embed_norm." in name:
            value = np.ones(shape) if name.endswith(".weight") else np.zeros(shape)
        elif name.endswith(".bias"):
            value = np.zeros(shape)
        else:
            value = rng.normal(0.0, std, size=shape)
        params[name] = value.astype(dtype)
    return params


def check(cfg: Config, params: dict[str, np.ndarray], where: str = "checkpoint") -> None:
    """Refuse tensors that do not match spec(cfg), naming the first offending tensor."""
    expected = spec(cfg)
    missing = [n for n in expected if n not in params]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(
            f"{where}: missing tensor {missing[0]!r}{more}; it does not match its config.json"
        )
    unexpected = [n for n in params if n not in expected]
    if unexpected:
        more = f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else ""
        raise CheckpointError(
            f"{where}: unexpected tensor {unexpected[0]!r}{more}; it does not match its config.json"
        )
    for name, shape in expected.items():
        got = tuple(params[name].shape)
        if got != shape:
            raise CheckpointError(f"{where}: tensor {name!r} has shape {got}, expected {shape}")
        if not np.all(np.isfinite(params[name])):
            raise CheckpointError(f"{where}: tensor {name!r} contains NaN or infinite values")


# -- checkpoint directories ---------------------------------------------------------------------


def save(
    path: str | Path,
    cfg: Config,
    params: dict[str, np.ndarray],
    tokenizer=None,
    dtype: str = "float32",
    extra: dict[str, bytes] | None = None,
    snapshots: dict[int, dict[str, np.ndarray]] | None = None,
) -> Path:
    """Write config.json + model.safetensors (+ tokenizer.json, + `extra` files such as the
    training state, + earlier weights `snapshots` {step: params}) atomically into `path`."""
    if dtype not in STORABLE_DTYPES:
        raise GlassformerError(f"cannot store weights as {dtype}; use one of {STORABLE_DTYPES}")
    check(cfg, params, where="save")
    tensors = {WEIGHTS_FILE: _tensors(cfg, params, dtype)}
    for step, snap in (snapshots or {}).items():
        tensors[snapshot_file(step)] = _tensors(cfg, snap, dtype)
    files = {CONFIG_FILE: cfg.to_json().encode()}
    if tokenizer is not None:
        files[TOKENIZER_FILE] = tokenizer.to_json().encode()
    return write_directory(path, files | (extra or {}), tensors)


def _tensors(cfg: Config, params: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    return {n: np.ascontiguousarray(params[n], dtype=dtype) for n in spec(cfg)}


# -- weight snapshots and checkpoint averaging ---------------------------------------------------

SNAPSHOT_PREFIX = "snapshot-step"


def snapshot_file(step: int) -> str:
    """The file of the weights at `step` kept beside a training checkpoint's model."""
    return f"{SNAPSHOT_PREFIX}{step:08d}.safetensors"


def snapshot_steps(path: str | Path) -> list[int]:
    """Steps of the weight snapshots a checkpoint directory keeps, oldest first."""
    steps = []
    for f in Path(path).glob(f"{SNAPSHOT_PREFIX}*.safetensors"):
        digits = f.name[len(SNAPSHOT_PREFIX) : -len(".safetensors")]
        if digits.isdecimal():
            steps.append(int(digits))
    return sorted(steps)


def load_snapshot(path: str | Path, cfg: Config, step: int) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    file = Path(path) / snapshot_file(step)
    try:
        raw = load_file(str(file))
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise CheckpointError(f"{file} is truncated or corrupt ({e}); delete it") from None
    check(cfg, raw, where=str(file))
    return {n: raw[n].astype(np.float64) for n in spec(cfg)}


def average_snapshots(path: str | Path, cfg: Config, k: int) -> tuple[dict, list[int]]:
    """The element-wise mean of the last `k` weight snapshots of a training checkpoint
    (Vaswani et al. 2017 average the last 5 checkpoints): (params, the steps averaged)."""
    steps = snapshot_steps(path)
    if k < 1:
        raise GlassformerError(f"--average must be >= 1, got {k}")
    if len(steps) < k:
        raise CheckpointError(
            f"{path} keeps {len(steps)} weight snapshot(s), fewer than the {k} to average; "
            "train with --set keep_snapshots=K (one is kept at every evaluation) or average fewer"
        )
    chosen = steps[-k:]
    total = None
    for step in chosen:
        snap = load_snapshot(path, cfg, step)
        total = snap if total is None else {n: total[n] + snap[n] for n in total}
    return {n: v / k for n, v in total.items()}, chosen


def write_directory(
    path: str | Path,
    files: dict[str, bytes],
    tensors: dict[str, dict[str, np.ndarray]],
    metadata: dict[str, str] | None = None,
) -> Path:
    """Write a directory of plain files and safetensors files ({file name: {name: array}})
    atomically: it is built beside `path`, synced, then swapped in."""
    from safetensors.numpy import save_file

    path = Path(path)
    check_writable(path)
    _remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", dir=path.parent))
    try:
        for name, arrays in tensors.items():
            save_file(arrays, str(tmp / name), metadata=metadata or {"format": "glassformer"})
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        umask = os.umask(0)
        os.umask(umask)
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
            os.chmod(f, 0o666 & ~umask)  # as a plain open() would create it
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def check_writable(path: str | Path) -> None:
    """Make the parent folder of `path` and prove a file can be created there, or raise one
    clear error (read-only disk, no permission, a file where a folder should be)."""
    parent = Path(path).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".glassformer-probe.", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CheckpointError(
            f"cannot write to {parent} ({e.strerror}); choose a writable output folder"
        ) from None


def _remove_stale_temporaries(path: Path) -> None:
    """Delete the half-built `.{name}.{pid}.*` folders that a killed writer of `path` left
    beside it (their pid no longer runs)."""
    for tmp in path.parent.glob(f".{path.name}.*"):
        pid = tmp.name[len(path.name) + 2 :].split(".")[0]
        if tmp.is_dir() and pid.isdecimal() and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _swap_in(tmp: Path, path: Path) -> None:
    """Replace `path` by the finished directory `tmp`; at every instant one complete copy exists.

    On Linux the two directories are exchanged in one atomic renameat2(RENAME_EXCHANGE) call, so
    even a kill -9 leaves either the old or the new checkpoint at `path`. Elsewhere the old copy
    is moved aside and restored if moving the new one in fails.
    """
    if not path.exists():
        os.replace(tmp, path)
        return
    if not path.is_dir():
        raise CheckpointError(f"{path} exists and is not a directory; choose another output path")
    if _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old checkpoint
        return
    old = tmp.with_name(tmp.name + ".old")
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with Linux renameat2(RENAME_EXCHANGE); False if unsupported."""
    if sys.platform != "linux":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    rc = renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    return rc == 0


def load(path: str | Path, dtype=np.float64):
    """Read a checkpoint directory: (Config, {name: array}, tokenizer or None), fully checked.

    Only glassformer's own directories: `loading.load` also takes a Hugging Face model folder.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from glassformer import tokenizer as tok

    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(
            f"checkpoint {path} not found: expected a directory with "
            f"{CONFIG_FILE} and {WEIGHTS_FILE}"
        )
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if not (path / name).is_file():
            raise CheckpointError(f"checkpoint {path} has no {name}; it is incomplete")
    try:
        cfg = Config.from_json((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{path / CONFIG_FILE} is not UTF-8 text") from None
    except GlassformerError as e:
        raise CheckpointError(f"{path / CONFIG_FILE}: {e}") from None
    try:
        raw = load_file(str(path / WEIGHTS_FILE))
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"{path / WEIGHTS_FILE} is truncated or corrupt ({e}); "
            "restore it or save the model again"
        ) from None
    check(cfg, raw, where=str(path / WEIGHTS_FILE))
    params = {n: raw[n].astype(dtype) for n in spec(cfg)}
    tokenizer = None
    if (path / TOKENIZER_FILE).is_file():
        tokenizer = tok.load(path / TOKENIZER_FILE)
    return cfg, params, tokenizer
