"""THE weight-naming scheme, seeded initialisation, and checkpoint directories.

`spec(cfg)` is the contract between the two engines: the name and shape of every tensor of a
model. Linear weights are stored `(out, in)` like `nn.Linear`, so a projection is `x @ W.T`; the
articles' `Wq` (d x c, used as X·Wq) is `W.T` of one head's rows. The per-head Q/K/V matrices of a
layer are stacked along the output axis: rows `h*D:(h+1)*D` of `q.weight` are head h.

A checkpoint is a directory: `config.json` + `model.safetensors` (+ `tokenizer.json`), read and
written with NumPy only (no torch, no pickle). Writes are atomic: the directory is built beside the
target and swapped in, so an interrupted save never leaves a half-written checkpoint.
This module does not compute anything with the weights.

Read "as stored" (`dtype=None`: float64 stays float64, any narrower float becomes float32,
`stored_dtype`), a loaded model's weights are held by its Runtime as they were read
(`runtime.Float64Weights` widens each when the reference engine asks).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import stat
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from glassformer.config import Config
from glassformer.errors import (
    CheckpointError,
    GlassformerError,
    InputError,
    OutputExists,
    param,
    yes_or_no,
)
from glassformer.files import FileError, kind, member, read_json, write_directory

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
LABELS_FILE = "labels.json"  # a classifier's class names, in class order (["English", ...])
STORABLE_DTYPES = ("float64", "float32", "float16")


def _linear(name: str, n_out: int, n_in: int, bias: bool) -> dict[str, tuple[int, ...]]:
    out = {f"{name}.weight": (n_out, n_in)}
    if bias:
        out[f"{name}.bias"] = (n_out,)
    return out


def _norm(name: str, cfg: Config) -> dict[str, tuple[int, ...]]:
    """A LayerNorm's γ and β, or an RMSNorm's g alone (norm_kind)."""
    C = cfg.d_model
    if cfg.norm_kind == "rmsnorm":
        return {f"{name}.weight": (C,)}
    return {f"{name}.weight": (C,), f"{name}.bias": (C,)}


def _attention(name: str, cfg: Config) -> dict[str, tuple[int, ...]]:
    """Wq (H·D, C); Wk, Wv (KV·D, C): fewer rows with grouped-query attention; W_O (C, H·D)."""
    C, HD, KVD = cfg.d_model, cfg.attn_dim, cfg.kv_dim
    out = _linear(f"{name}.q", HD, C, cfg.has_qkv_bias)
    out |= _linear(f"{name}.k", KVD, C, cfg.has_qkv_bias)
    out |= _linear(f"{name}.v", KVD, C, cfg.has_qkv_bias)
    return out | _linear(f"{name}.o", C, HD, cfg.bias)


def _ffn(name: str, cfg: Config) -> dict[str, tuple[int, ...]]:
    """W1 (F, C) and W2 (C, F); a gated FFN's W3 (F, C) after them; none with d_ff 0."""
    C, F = cfg.d_model, cfg.d_ff
    if not F:
        return {}
    out = _linear(f"{name}.w1", F, C, cfg.bias) | _linear(f"{name}.w2", C, F, cfg.bias)
    if cfg.ffn_kind == "gated":
        out |= _linear(f"{name}.w3", F, C, cfg.bias)
    return out


def _stack(stack: str, n_layers: int, cfg: Config, cross: bool) -> dict[str, tuple[int, ...]]:
    C = cfg.d_model
    out = {}
    if not (stack == "encoder" and cfg.share_embeddings):  # shared: the decoder's is used
        out[f"{stack}.tok_embed.weight"] = (cfg.vocab_size, C)
    if cfg.positions == "learned":
        out[f"{stack}.pos_embed.weight"] = (cfg.max_len, C)
    if cfg.type_vocab_size:
        out[f"{stack}.type_embed.weight"] = (cfg.type_vocab_size, C)
    if cfg.embed_norm:
        out |= _norm(f"{stack}.embed_norm", cfg)
    for i in range(n_layers):
        p = f"{stack}.layers.{i}"
        # the norms are numbered by the sublayers there are: self_attn, [cross_attn,] [ffn]
        out |= _attention(f"{p}.self_attn", cfg) | _norm(f"{p}.norm1", cfg)
        k = 1
        if cross:
            out |= _attention(f"{p}.cross_attn", cfg) | _norm(f"{p}.norm2", cfg)
            k = 2
        if cfg.d_ff:
            out |= _ffn(f"{p}.ffn", cfg) | _norm(f"{p}.norm{k + 1}", cfg)
    if cfg.norm == "pre":
        out |= _norm(f"{stack}.norm", cfg)
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
    """The number of weights of spec(cfg), in closed form: instant for any config, however large
    (a test checks it against the sum over spec)."""
    return memory_bytes(cfg, itemsize=1) - _tables(cfg)


def _tables(cfg: Config) -> int:
    """Entries of the sinusoidal position tables the PyTorch engine keeps (one per stack)."""
    if not cfg.positions.startswith("sinusoidal"):
        return 0
    return cfg.max_len * cfg.d_model * (int(cfg.has_encoder) + int(cfg.has_decoder))


def memory_bytes(cfg: Config, itemsize: int = 8) -> int:
    """Bytes that the weights of `cfg` take as float64 (itemsize 8), plus the sinusoidal table the
    PyTorch engine keeps (rotary positions keep none): the sizes of spec(cfg) in closed form, so
    that nothing is built or allocated, however large the config."""
    C, HD, KVD, F = cfg.d_model, cfg.attn_dim, cfg.kv_dim, cfg.d_ff
    V, L = cfg.vocab_size, cfg.max_len
    norm = C if cfg.norm_kind == "rmsnorm" else 2 * C  # g; or γ and β
    # an attention sublayer and its norm: Wq, W_O (C x H·D); Wk, Wv (C x KV·D)
    attn = 2 * C * HD + 2 * C * KVD + (HD + 2 * KVD if cfg.has_qkv_bias else 0)
    attn += (C if cfg.bias else 0) + norm
    # the FFN sublayer and its norm, if any: W1, W2 (and a gated FFN's W3), C x F each
    n_in = 2 if cfg.ffn_kind == "gated" else 1  # matrices C -> F
    ffn = (n_in + 1) * C * F + (n_in * F + C if cfg.bias else 0) + norm if F else 0
    # a learned table or a sinusoid buffer; rotary positions keep no table
    positions = L * C if cfg.positions not in ("none", "rotary") else 0
    stack = positions + cfg.type_vocab_size * C + (norm if cfg.embed_norm else 0)
    stack += norm if cfg.norm == "pre" else 0
    total = 0
    if cfg.has_encoder:
        own_embed = 0 if cfg.share_embeddings else V * C
        total += own_embed + stack + cfg.n_encoder_layers * (attn + ffn)
    if cfg.has_decoder:
        cross = attn if cfg.arch == "encoder-decoder" else 0
        total += V * C + stack + cfg.n_decoder_layers * (attn + cross + ffn)
        total += (0 if cfg.tie_embeddings else V * C) + (V if cfg.lm_bias else 0)
    if cfg.arch == "encoder" and cfg.n_classes:
        total += cfg.n_classes * C + (cfg.n_classes if cfg.bias else 0)
    return total * itemsize


def available_memory() -> int:
    """Bytes of memory this process can still be given: the machine's (MemAvailable, or its
    total), or less where a limit says so: a control group's memory limit less its usage (a
    container's MemAvailable is the host's), the address-space limit (ulimit -v) less what is
    mapped."""
    have = 2**63
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                have = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if have == 2**63:
        try:
            have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            pass
    groups = [("memory.max", "memory.current")]  # cgroup v2, then v1
    groups.append(("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"))
    for limit, usage in groups:
        try:
            cap = Path("/sys/fs/cgroup", limit).read_text().strip()
            if cap != "max":
                have = min(have, int(cap) - int(Path("/sys/fs/cgroup", usage).read_text()))
            break
        except (OSError, ValueError):
            continue
    try:
        import resource

        cap = resource.getrlimit(resource.RLIMIT_AS)[0]
        if cap != resource.RLIM_INFINITY:
            status = Path("/proc/self/status").read_text().splitlines()
            mapped = [int(x.split()[1]) * 1024 for x in status if x.startswith("VmSize:")]
            have = min(have, cap - sum(mapped))
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return max(have, 0)


def check_fits(cfg: Config, where: str = "the model") -> None:
    """Refuse, before anything is allocated, a model whose weights cannot fit in memory."""
    need, have = memory_bytes(cfg), available_memory()
    if need > have:
        raise CheckpointError(
            f"{where} would need {need / 2**30:,.1f} GiB for its weights (float64) but "
            f"{have / 2**30:,.1f} GiB of memory is available; choose smaller sizes"
        )


# How a new model's weights are drawn (`init_rule`): "normal", N(0, std) for every matrix (`init`,
# the seeded NumPy weights); "gpt2" and "xavier", the torch engine's (`torch_model.init_weights`).
InitScheme = Literal["normal", "gpt2", "xavier"]


def init_rule(
    cfg: Config,
    name: str,
    shape: tuple[int, ...],
    scheme: InitScheme = "normal",
    std: float = 0.02,
    embed_std: float = 0.0,
) -> tuple[str, float]:
    """How the tensor `name` (of `shape`) of a new model is drawn: the one rule of both engines'
    initialisations. ("fill", 1.0) for a LayerNorm's gamma (an RMSNorm's g), ("fill", 0.0) for
    its beta and every bias; a matrix ("normal", σ) for N(0, σ²) or ("uniform", b) for U(-b, b),
    by `scheme`:
      - "normal": N(0, std²);
      - "gpt2": N(0, 0.02²), N(0, (0.02/√(2L))²) for the projections that write into the residual
        stream (W_O, W2), L the number of layers;
      - "xavier" (torch.nn.Transformer, fairseq): Glorot-uniform linear weights, with Q, K, V
        counted as one fused (3·H·D, C) matrix as nn.MultiheadAttention stores them; token
        embeddings N(0, 1/C), which √C embed scaling brings to unit variance; the rest (positions,
        token types, an untied lm_head) as "gpt2".
    A gated FFN's W3 is drawn as W1 is; grouped-query attention's fused width is H·D + 2·KV·D.
    embed_std > 0: the token embeddings' std, whatever the scheme."""
    if scheme not in get_args(InitScheme):
        raise InputError(f"unknown init {scheme!r}; use one of {', '.join(get_args(InitScheme))}")
    if ".norm" in name or ".embed_norm." in name:
        return "fill", 1.0 if name.endswith(".weight") else 0.0
    if name.endswith(".bias"):
        return "fill", 0.0
    if name.endswith("tok_embed.weight") and (embed_std or scheme == "xavier"):
        return "normal", embed_std or cfg.d_model**-0.5
    if scheme == "normal":
        return "normal", std
    if scheme == "xavier" and "embed" not in name and name != "lm_head.weight":
        fan_out, fan_in = shape
        if name.endswith(("q.weight", "k.weight", "v.weight")):
            fan_out = cfg.attn_dim + 2 * cfg.kv_dim  # the fused [Wq; Wk; Wv]
        return "uniform", math.sqrt(6.0 / (fan_in + fan_out))
    n_layers = max(cfg.n_encoder_layers + cfg.n_decoder_layers, 1)
    residual = name.endswith(("o.weight", "w2.weight"))
    return "normal", 0.02 / math.sqrt(2 * n_layers) if residual else 0.02


def stored_dtype(x) -> type:
    """The dtype a weight read as stored is held in: float64 if it is float64, else float32 (a
    float16 or bfloat16 file widened: exact)."""
    return np.float64 if getattr(x, "dtype", None) == np.float64 else np.float32


def init(cfg: Config, seed: int = 0, std: float = 0.02, dtype=np.float64) -> dict[str, np.ndarray]:
    """Seeded random weights: N(0, std^2) matrices, zero biases, LayerNorm gamma=1, beta=0
    (`init_rule`'s "normal").

    The same (cfg, seed, std) always gives the same values (NumPy PCG64), in spec order.
    std must be a finite number > 0 and seed an integer in [0, 2**32), as `glassformer init`
    says; dtype a float dtype.
    """
    _check_init(cfg, seed, std, dtype)
    check_fits(cfg)
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in spec(cfg).items():
        kind, value = init_rule(cfg, name, shape, "normal", std)
        drawn = rng.normal(0.0, value, size=shape) if kind == "normal" else np.full(shape, value)
        params[name] = drawn.astype(dtype)
    return params


def _check_init(cfg, seed, std, dtype) -> None:
    if not isinstance(cfg, Config):
        raise InputError(f"cfg must be a Config (preset(...) or Config(...)), got {cfg!r:.60}")
    real = isinstance(std, numbers.Real) and not isinstance(std, bool)
    if not (real and math.isfinite(std) and std > 0):
        raise InputError(f"std must be a finite number > 0, got {std}")
    whole = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
    if not (whole and 0 <= seed < 2**32):
        raise InputError(f"seed must be an integer in [0, 2**32), got {seed}")
    try:
        floating = np.dtype(dtype).kind == "f"
    except TypeError:
        floating = False
    if not floating:
        raise InputError(f"dtype must be a float dtype (np.float64, np.float32), got {dtype!r}")


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
        if params[name].dtype.kind != "f":
            raise CheckpointError(
                f"{where}: tensor {name!r} has dtype {params[name].dtype}; weights must be "
                "floating point"
            )
        got = tuple(params[name].shape)
        if got != shape:
            raise CheckpointError(f"{where}: tensor {name!r} has shape {got}, expected {shape}")
        if not _finite(params[name]):
            raise CheckpointError(f"{where}: tensor {name!r} contains NaN or infinite values")


def _finite(x: np.ndarray) -> bool:
    """Every value finite: its min and max are (NaN propagates through both), without the array
    of flags np.isfinite would make (a byte per weight: 27 MiB for SmolLM2-135M's embedding)."""
    return x.size == 0 or bool(np.isfinite(x.min()) and np.isfinite(x.max()))


# -- checkpoint directories ---------------------------------------------------------------------


def save(
    path: str | Path,
    cfg: Config,
    params: dict[str, np.ndarray],
    tokenizer=None,
    dtype: str = "float32",
    extra: dict[str, bytes] | None = None,
    snapshots: dict[int, dict[str, np.ndarray]] | None = None,
    labels: list[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write config.json + model.safetensors (+ tokenizer.json, + labels.json: a classifier's
    class names, + `extra` files such as the training state, + earlier weights `snapshots`
    {step: params}) atomically into `path`. A folder that is there and not empty (or a file)
    is replaced only with overwrite=True, as the command line asks for --overwrite."""
    refuse_existing(path, overwrite)
    if dtype not in STORABLE_DTYPES:
        raise GlassformerError(f"cannot store weights as {dtype}; use one of {STORABLE_DTYPES}")
    check(cfg, params, where="save")
    tensors = {WEIGHTS_FILE: _tensors(cfg, params, dtype)}
    for step, snap in (snapshots or {}).items():
        tensors[snapshot_file(step)] = _tensors(cfg, snap, dtype)
    files = {CONFIG_FILE: cfg.to_json().encode()}
    if tokenizer is not None:
        files[TOKENIZER_FILE] = tokenizer.to_json().encode()
        if tokenizer.vocab_size > cfg.vocab_size:
            raise CheckpointError(
                f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is "
                f"{cfg.vocab_size}; save the model with a tokenizer it can embed"
            )
    if labels is not None:
        _check_labels(labels, cfg, "the class names")
        files[LABELS_FILE] = json.dumps(list(labels), ensure_ascii=False).encode()
    try:
        return write_directory(path, files | (extra or {}), tensors)
    except FileError as e:
        raise CheckpointError(str(e)) from None


def refuse_existing(path: str | Path, overwrite: bool) -> None:
    """The library's rule for every folder it writes: nothing there is replaced unless
    overwrite=True (an empty folder is free). overwrite is True or False itself: 'no' is not."""
    p = Path(path)
    if yes_or_no(overwrite) or not p.is_dir() or not any(p.iterdir()):
        return  # a file there is never replaced, overwrite or not: files.building refuses it
    raise OutputExists(
        f"{p} already holds files; pass overwrite=True to replace it, or choose another folder"
    )


def _tensors(cfg: Config, params: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """The tensors in `dtype`; a value beyond the dtype's range is refused, never stored as inf."""
    limit = float(np.finfo(dtype).max)
    for name in spec(cfg):
        largest = float(np.max(np.abs(params[name]))) if params[name].size else 0.0
        if largest > limit:
            raise GlassformerError(
                f"cannot store {name!r} as {dtype}: its largest value {largest:.4g} is beyond "
                f"{dtype}'s {limit:.6g}; save it as float32 (or float64)"
            )
    return {n: np.ascontiguousarray(params[n], dtype=dtype) for n in spec(cfg)}


def load_labels(path: str | Path, cfg: Config) -> list[str] | None:
    """A classifier checkpoint's class names (labels.json), or None when it has none."""
    path = Path(path)
    try:
        file = member(path, LABELS_FILE, required=False)
        if file is None:
            return None
        labels = read_json(file)
    except FileError as e:
        raise CheckpointError(str(e)) from None
    _check_labels(labels, cfg, str(path / LABELS_FILE))
    return labels


def _check_labels(labels, cfg: Config, where: str) -> None:
    if not (isinstance(labels, list) and all(isinstance(x, str) and x for x in labels)):
        raise CheckpointError(f"{where}: expected a list of class names (non-empty strings)")
    if len(labels) != cfg.n_classes or len(set(labels)) != len(labels):
        raise CheckpointError(
            f"{where}: {len(labels)} class names ({len(set(labels))} distinct) for a model of "
            f"n_classes {cfg.n_classes}; give one distinct name per class"
        )


# -- weight snapshots and checkpoint averaging ---------------------------------------------------

SNAPSHOT_PREFIX = "snapshot-step"


def snapshot_file(step: int) -> str:
    """The file of the weights at `step` kept beside a training checkpoint's model."""
    return f"{SNAPSHOT_PREFIX}{step:08d}.safetensors"


def snapshot_steps(path: str | Path) -> list[int]:
    """Steps of the weight snapshots a checkpoint directory keeps, oldest first: only files named
    exactly as `snapshot_file` writes them (a stray `snapshot-step0042.safetensors` is not one),
    each a file inside the folder (`files.member`), and none past the run's max_steps (its
    train_config.json), which no snapshot of the run can be: such a name is refused, never taken
    as the newest step."""
    path = Path(path)
    steps = []
    for f in path.glob(f"{SNAPSHOT_PREFIX}*.safetensors"):
        digits = f.name[len(SNAPSHOT_PREFIX) : -len(".safetensors")]
        if digits.isascii() and digits.isdigit() and snapshot_file(int(digits)) == f.name:
            try:
                member(path, f.name)
            except FileError as e:
                raise CheckpointError(str(e)) from None
            steps.append(int(digits))
    if steps and (last := _max_steps(path)) is not None and max(steps) > last:
        raise CheckpointError(
            f"{path / snapshot_file(max(steps))} names step {max(steps)}, past the run's "
            f"max_steps {last}: no snapshot of this run can be; delete the file"
        )
    return sorted(steps)


def _max_steps(path: Path) -> int | None:
    """max_steps of a training checkpoint's train_config.json (None without one)."""
    try:
        file = member(path, "train_config.json", required=False)
        value = read_json(file).get("max_steps") if file is not None else None
    except (FileError, AttributeError) as e:
        raise CheckpointError(f"{path / 'train_config.json'} is unreadable ({e})") from None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def load_snapshot(path: str | Path, cfg: Config, step: int) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        file = member(path, snapshot_file(step))
    except FileError as e:
        raise CheckpointError(str(e)) from None
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
        raise GlassformerError(f"{param('average_snapshots.k')} must be >= 1, got {k}")
    if len(steps) < k:
        raise CheckpointError(
            f"{path} keeps {len(steps)} weight snapshot(s), fewer than the {k} to average; "
            f"train with {param('TrainConfig.override', 'keep_snapshots=K')} (one is kept at every "
            "evaluation) or average fewer"
        )
    chosen = steps[-k:]
    total = None
    for step in chosen:
        snap = load_snapshot(path, cfg, step)
        total = snap if total is None else {n: total[n] + snap[n] for n in total}
    return {n: v / k for n, v in total.items()}, chosen


def models_in(folder: Path) -> list[str]:
    """The names of the subfolders of `folder` that are models (hold a config.json), sorted."""
    try:
        return sorted(f.name for f in folder.iterdir() if (f / CONFIG_FILE).is_file())
    except OSError:
        return []


def load(path: str | Path, dtype=np.float64):
    """Read a checkpoint directory: (Config, {name: array}, tokenizer or None), fully checked:
    every file must lie inside the folder, the config must be valid and fit in memory before the
    weights are read, and the tokenizer must match the config's vocabulary.

    Only glassformer's own directories: `loading.load` also takes a Hugging Face model folder.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from glassformer import tokenizer as tok

    path = Path(path)
    if path.exists() and not path.is_dir():  # a file, a FIFO, a device: said as what it is
        mode = path.stat().st_mode
        what = "a file" if stat.S_ISREG(mode) else kind(mode)
        raise CheckpointError(
            f"checkpoint {path} not found: it is {what}, not a directory; give a checkpoint folder"
        )
    if not path.is_dir():
        raise CheckpointError(
            f"checkpoint {path} not found: expected a directory with "
            f"{CONFIG_FILE} and {WEIGHTS_FILE}"
        )
    found = {}
    for name in (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE):
        try:
            found[name] = member(path, name, required=False)
        except FileError as e:
            raise CheckpointError(str(e)) from None
        if found[name] is None and name != TOKENIZER_FILE:
            if name == CONFIG_FILE and (held := models_in(path)):
                shown = ", ".join(held[:8]) + (" ..." if len(held) > 8 else "")
                raise CheckpointError(
                    f"{path} is a folder of models, not a model: it holds {shown}; give one of "
                    f"them: {path / held[0]}"
                )
            raise CheckpointError(f"checkpoint {path} has no {name}; it is incomplete")
    try:
        cfg = Config.from_dict(read_json(found[CONFIG_FILE]))
    except GlassformerError as e:
        message = str(e)
        where = str(path / CONFIG_FILE)
        raise CheckpointError(message if where in message else f"{where}: {message}") from None
    check_fits(cfg, where=str(path))
    try:
        raw = load_file(str(found[WEIGHTS_FILE]))
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"{path / WEIGHTS_FILE} is truncated or corrupt ({e}); "
            "restore it or save the model again"
        ) from None
    check(cfg, raw, where=str(path / WEIGHTS_FILE))
    params = {n: np.asarray(raw[n], dtype=dtype or stored_dtype(raw[n])) for n in spec(cfg)}
    tokenizer = None
    if found[TOKENIZER_FILE] is not None:
        tokenizer = tok.load(found[TOKENIZER_FILE])
        if tokenizer.vocab_size > cfg.vocab_size:
            raise CheckpointError(
                f"{path / TOKENIZER_FILE} has {tokenizer.vocab_size} tokens but "
                f"{CONFIG_FILE} says vocab_size {cfg.vocab_size}: ids past the embedding table; "
                "save the model with its own tokenizer"
            )
    return cfg, params, tokenizer
