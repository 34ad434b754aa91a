"""What loading a model holds in memory: the weights once, not once per step on the way in.

A Llama folder (written by `hf_dir.export`, glassformer's own arrays the oracle) is read under
tracemalloc, which counts the bytes of every NumPy array: as float32 the read peaks at one copy of
the weights (the file is read into the arrays, never mapped beside them, and the Llama table takes
them without copying); as float64 at the float64 weights and a float32 tensor or two, never both
sets; F-ordered (`loading.load(order="F")`) still at one copy, a matrix's rows read a few at a
time into it. The PyTorch engine built from those arrays (`inference_arrays`, `torch_engine`) holds
no copy of its own (every parameter a view of them) and gives bit for bit the logits of the engine
built from the arrays as read. The safetensors reader is checked against the safetensors library
on every dtype NumPy has, and refuses a broken file in one line.
"""

from __future__ import annotations

import gc
import json
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from safetensors.numpy import load_file, save_file  # noqa: E402

from glassformer import weights  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import CheckpointError  # noqa: E402
from glassformer.formats import hf_dir, loading  # noqa: E402
from glassformer.inference import torch_engine  # noqa: E402
from glassformer.torch_model import from_params, inference_arrays  # noqa: E402

# Tied like SmolLM2 (the embedding is the head), grouped K/V heads; the embedding is large
# beside the layers, as at real size, so that one extra copy of it shows.
CFG = Config(
    arch="decoder", vocab_size=8192, d_model=64, n_heads=4, n_kv_heads=2, d_ff=96, max_len=64,
    n_decoder_layers=2, positions="rotary", norm="pre", norm_kind="rmsnorm", ffn_kind="gated",
    activation="silu", bias=False, tie_embeddings=True,
)  # fmt: skip
EMBED = "decoder.tok_embed.weight"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama") / "m"
    params = weights.init(CFG, seed=3, std=0.3, dtype=np.float32)
    hf_dir.export(path, CFG, params)
    loading.load(path, np.float32)  # imports and first-call caches, before anything is counted
    return path, params


def peak_bytes(fn):
    """(fn(), the peak of traced bytes while it ran above those held when it started)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def nbytes(params) -> int:
    return sum(x.nbytes for x in params.values())


def test_float32_load_holds_the_weights_once(folder):
    path, want = folder
    (cfg, params, _), peak = peak_bytes(lambda: loading.load(path, np.float32))
    assert all(np.array_equal(params[n], want[n]) for n in want)
    size = nbytes(params)
    assert peak < 1.1 * size, f"peak {peak / size:.2f}x the weights (2x: a copy was made)"


def _status_kib(key: str) -> int:
    line = next(x for x in open("/proc/self/status") if x.startswith(key + ":"))  # noqa: SIM115
    return int(line.split()[1])


def test_the_file_is_not_mapped_beside_the_arrays(tmp_path):
    """tracemalloc counts arrays, not a file's pages mapped into memory: the peak resident set
    (VmHWM, reset through /proc/self/clear_refs) sees both. 34 MiB of weights read as float32 add
    one copy of them to it, not two."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("SKIPPED LOUDLY: the peak resident set is reset through Linux's /proc")
    cfg = Config(**(CFG.to_dict() | dict(vocab_size=65536, d_model=128, n_decoder_layers=1)))
    hf_dir.export(tmp_path / "m", cfg, weights.init(cfg, seed=5, dtype=np.float32))
    loading.load(tmp_path / "m", np.float32)  # imports and first-call caches, not counted
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status_kib("VmRSS")
    _, params, _ = loading.load(tmp_path / "m", np.float32)
    grown = (_status_kib("VmHWM") - before) * 1024
    size = nbytes(params)
    assert grown < 1.3 * size, f"the peak grew by {grown / size:.2f}x the weights"


def test_float64_load_converts_one_tensor_at_a_time(tmp_path):
    cfg = Config(**(CFG.to_dict() | dict(vocab_size=256, d_ff=256, n_decoder_layers=4)))
    want = weights.init(cfg, seed=4, std=0.3, dtype=np.float32)  # many tensors, none large
    hf_dir.export(tmp_path / "m", cfg, want)
    loading.load(tmp_path / "m", np.float64)  # imports and first-call caches, not counted
    (_, params, _), peak = peak_bytes(lambda: loading.load(tmp_path / "m", np.float64))
    assert all(params[n].dtype == np.float64 and np.array_equal(params[n], want[n]) for n in want)
    size32 = nbytes(want)  # the float64 weights are 2x, and both sets at once 3x
    assert peak < 2.25 * size32, f"peak {peak / size32:.2f}x the float32 weights"


def test_an_f_ordered_load_reads_matrices_a_few_rows_at_a_time(folder, monkeypatch):
    path, want = folder
    monkeypatch.setattr(hf_dir, "_ROWS_BYTES", 1 << 14)  # a buffer smaller than the embedding
    (_, params, _), peak = peak_bytes(lambda: loading.load(path, np.float32, order="F"))
    for n, x in want.items():
        assert np.array_equal(params[n], x)
        assert params[n].flags.f_contiguous, n
    size = nbytes(params)
    assert peak < 1.1 * size, f"peak {peak / size:.2f}x the weights (a whole second embedding?)"


def test_the_engine_shares_the_arrays_and_gives_the_same_logits(folder):
    path, _ = folder
    ids = torch.tensor([[5, 900, 17, 8000, 3, 3, 42]])
    _, plain, _ = loading.load(path, np.float32)
    with torch.no_grad():
        want = torch_engine(CFG, plain, "float32")(ids)
    _, params, _ = loading.load(path, np.float32, order="F")
    inference_arrays(CFG, params)
    model = torch_engine(CFG, params, "float32")
    with torch.no_grad():
        got = model(ids)
    assert torch.equal(got, want)
    spans = [(x.ctypes.data, x.ctypes.data + x.nbytes) for x in _bases(params)]
    for name, p in model.named_parameters():
        assert any(lo <= p.data_ptr() < hi for lo, hi in spans), f"{name} is a copy"
    for layer in model.decoder.layers:  # the fused Wq, Wk, Wv: a view, not a concatenation
        attn = layer.self_attn
        assert attn.q.weight.data_ptr() == attn.qkv_t.data_ptr()
        assert attn.qkv_t.data_ptr() in [lo for lo, _ in spans]


def test_a_loaded_model_holds_its_float32_weights_once_until_float64_is_asked(folder):
    """`glassformer.load` reads the folder's float32 weights as stored and makes its float32
    engine over them (a view of each, but self-attention's Wq, Wk, Wv, fused by a copy): the
    peak stays near one float32 copy (it held float64 weights beside a float32 engine before:
    3x). The float64 weights the reference engine reads are widened when first asked for,
    exactly, and kept; the engine's logits are those of the engine made from the arrays."""
    import glassformer

    path, want = folder
    ids = torch.tensor([[5, 900, 17, 8000, 3, 3, 42]])
    _, plain, _ = loading.load(path, np.float32)
    with torch.no_grad():
        expected = torch_engine(CFG, plain, "float32")(ids)
    del plain
    glassformer.load(path, engine="torch").runtime.torch("float32")  # imports: not counted
    m, peak = peak_bytes(lambda: glassformer.load(path, engine="torch"))
    model, more = peak_bytes(lambda: m.runtime.torch("float32"))
    stored = m.runtime.params.stored
    size = nbytes(stored)
    assert all(x.dtype == np.float32 for x in stored.values())
    assert max(peak, size + more) < 1.2 * size, f"{max(peak, size + more) / size:.2f}x the weights"
    with torch.no_grad():
        assert torch.equal(model(ids), expected)
    wide = m.params[EMBED]
    assert wide.dtype == np.float64 and np.array_equal(wide, want[EMBED])
    assert m.params[EMBED] is wide  # widened once, kept


def _bases(params) -> list[np.ndarray]:
    out = []
    for x in params.values():
        while isinstance(x.base, np.ndarray):
            x = x.base
        out.append(x)
    return out


def test_from_params_shares_unless_asked_to_copy():
    params = weights.init(CFG, seed=1, dtype=np.float32)
    shared = from_params(CFG, params, torch.float32)
    own = from_params(CFG, params, torch.float32, copy=True)
    widened = from_params(CFG, params, torch.float64)
    w = shared.decoder.layers[0].ffn.w1.weight
    assert w.data_ptr() == params["decoder.layers.0.ffn.w1.weight"].ctypes.data
    with torch.no_grad():
        w.mul_(2.0)  # written through the shared memory ...
    assert np.array_equal(params["decoder.layers.0.ffn.w1.weight"], w.detach().numpy())
    other = own.decoder.layers[0].ffn.w1.weight  # ... which the copies do not see
    assert torch.equal(other * 2, w)
    assert torch.equal(widened.decoder.layers[0].ffn.w1.weight, other.double())
    params[EMBED].flags.writeable = False  # NumPy's read-only memory is never shared
    assert from_params(CFG, params, torch.float32).decoder.tok_embed.weight.data_ptr() != (
        params[EMBED].ctypes.data
    )


def test_the_reader_equals_the_safetensors_library_on_every_dtype(tmp_path):
    g = np.random.default_rng(0)
    tensors = {
        f"t.{dt}": (g.standard_normal((3, 5)) * 50).astype(dt)
        for dt in ("float64", "float32", "float16", "int64", "uint64", "int32", "uint32",
                   "int16", "uint16", "int8", "uint8", "bool", "complex64")
    }  # fmt: skip
    tensors |= {"empty": np.zeros((0, 4), np.float32), "scalar": np.array(2.5, np.float32)}
    tensors |= {"row": np.arange(7, dtype=np.float32)[None], "cube": g.random((2, 3, 4))}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    want = load_file(str(tmp_path / "model.safetensors"))
    for order in ("K", "F"):
        got = hf_dir.read_state(tmp_path, order)
        assert got.keys() == want.keys()
        for n, x in want.items():
            assert got[n].dtype == x.dtype and got[n].shape == x.shape and np.array_equal(got[n], x)
            layout = "f_contiguous" if order == "F" and x.ndim == 2 else "c_contiguous"
            assert getattr(got[n].flags, layout), (n, order)


def _header_file(path, header: dict, data: bytes, length: int | None = None) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)


F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
BROKEN = {
    "empty file": (None, b"", None),
    "header longer than the file": ({"a": F32}, bytes(8), 10**6),
    "header not JSON": ("{oops", b"", None),
    "header a list": ([1], b"", None),
    "cut short": ({"a": F32}, bytes(4), None),
    "bytes left over": ({"a": F32}, bytes(12), None),
    "a gap": ({"a": F32, "b": {**F32, "data_offsets": [12, 20]}}, bytes(20), None),
    "an overlap": ({"a": F32, "b": {**F32, "data_offsets": [4, 12]}}, bytes(12), None),
    "shape and bytes differ": ({"a": {**F32, "shape": [3]}}, bytes(8), None),
    "unknown dtype": ({"a": {**F32, "dtype": "F8_E4M3"}}, bytes(8), None),
    "no offsets": ({"a": {"dtype": "F32", "shape": [2]}}, bytes(8), None),
    "a negative size": ({"a": {**F32, "shape": [-2]}}, bytes(8), None),
}


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_a_broken_safetensors_file_is_one_line(case, tmp_path):
    header, data, length = BROKEN[case]
    f = tmp_path / "model.safetensors"
    if header is None:
        f.write_bytes(data)
    elif isinstance(header, str):
        f.write_bytes(struct.pack("<Q", len(header)) + header.encode())
    else:
        _header_file(f, header, data, length)
    with pytest.raises(CheckpointError, match="is truncated or corrupt") as e:
        hf_dir.read_state(tmp_path)
    assert len(str(e.value).splitlines()) == 1


def test_fine_tuning_does_not_write_into_the_callers_arrays():
    """from_params shares arrays already in float32; the trainer asks for weights of its own,
    so that training leaves the arrays it was given (a checkpoint read as float32) as they were."""
    from glassformer.training.train import _new_model

    rng = np.random.default_rng(0)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in weights.spec(CFG).items()}
    before = {k: v.copy() for k, v in params.items()}
    tcfg = type("T", (), {"threads": None, "seed": 0, "dropout": 0.0})()
    model = _new_model(CFG, tcfg, params, "cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # what an optimiser step does, in place
    assert all(np.array_equal(params[k], before[k]) for k in params)
