"""int8 inference on the CPU: the PyTorch engine with its linear layers in int8.

`int8(model)` turns a float32 `torch_model.Transformer` into its int8 form: every `nn.Linear` (Wq,
Wk, Wv, W_O, W1, W2, a gated FFN's W3, an untied output head, a classifier) becomes an
`Int8Linear` in the slot the model declares for it (a self-attention's Wq, Wk and Wv one, in
`MultiHeadAttention.qkv_int8`: its input is quantized once), and a tied output head (the token
embedding used as the output projection) gets an int8 copy of its own in `Transformer.output_head`.
This is PyTorch's dynamic quantization, with PyTorch's own kernel (`quantized::linear_dynamic`,
the one behind `torch.ao.quantization.quantize_dynamic`): weights are stored as int8, one scale
per output row (symmetric, scale = max|row| / 127.5); each call quantizes its input to uint8
(one scale and zero point per call, from the input's range) and accumulates in int32. Embedding
lookups, LayerNorm and RMSNorm, rotary positions, attention and the KV cache stay float32.

Why: at batch 1 decoding reads every weight once per token, so it runs at the memory-bandwidth
floor; int8 weights are a quarter of float32's bytes. The tied head is a third of GPT-2-small's
weights, which is why it is quantized too (the embedding lookup keeps the float32 table).

Deliberately not here: choosing it from the command line (`cli`), CUDA (these kernels are CPU
only), the NumPy engine (float64 by design), saving int8 checkpoints (docs/build/pytorch-engine.md,
"No int8 checkpoints": the float16 checkpoint is smaller to ship, and quantizing at load is quick;
docs/benchmarks.md, "int8 decoding speed", has its time for GPT-2-small's 124M).
"""

from __future__ import annotations

import functools
import math
import warnings

import torch
from torch import Tensor, nn

from glassformer.errors import GlassformerError, param
from glassformer.torch_model import Transformer, self_attentions

# Symmetric int8 over [-128, 127]: the per-channel scale torch's PerChannelMinMaxObserver
# (qint8, per_channel_symmetric) computes, so that `int8` equals torch's own quantize_dynamic.
_HALF_RANGE = 127.5


def quantize_weight(weight: Tensor) -> Tensor:
    """A float (out, in) weight as a per-row symmetric qint8 tensor (torch's quantized tensor)."""
    w = weight.detach().to(torch.float32)
    eps = torch.finfo(torch.float32).eps
    scale = (w.abs().amax(dim=1) / _HALF_RANGE).clamp(min=eps)  # (out,)
    zero = torch.zeros(len(scale), dtype=torch.long)
    with warnings.catch_warnings():
        # PyTorch marks its quantized tensor type as deprecated (its replacement, torchao, is not
        # a dependency); the kernels are current. The warning is not the user's concern.
        warnings.simplefilter("ignore")
        return torch.quantize_per_channel(w, scale.double(), zero, 0, torch.qint8)


@functools.cache
def has_vnni() -> bool:
    """Whether the CPU multiplies int8 with int32 sums (AVX512-VNNI or AVX-VNNI), read from
    /proc/cpuinfo (Linux); False when unknown."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool({"avx512_vnni", "avx_vnni"} & flags)
    except OSError:
        pass
    return False


class Int8Linear(nn.Module):
    """y = x·Wᵀ + b with W in int8 (per-row scales) and x quantized per call (dynamic).

    reduce_range: quantize inputs to 7 bits, as torch's quantize_dynamic always does: without
    VNNI, the x86 kernel adds pairs of uint8 x int8 products in int16, which 8-bit inputs can
    overflow. With VNNI the sums are int32, so the default (None) uses all 8 bits there: on
    GPT-2-small it cut the logits' relative error from 5.5% to 3.3%. The packed weight is not a
    parameter or buffer, so `state_dict()` is empty: an int8 model is made from a float
    checkpoint, never saved."""

    def __init__(
        self, weight: Tensor, bias: Tensor | None = None, reduce_range: bool | None = None
    ):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        b = None if bias is None else bias.detach().to(torch.float32).contiguous()
        self._packed = torch.ops.quantized.linear_prepack(quantize_weight(weight), b)
        self.reduce_range = not has_vnni() if reduce_range is None else reduce_range

    def forward(self, x: Tensor) -> Tensor:
        # A NaN or an infinity in x has no quantization range: the kernel fails (no finite range)
        # or quietly reads it as a number, a finite wrong answer. One sum finds it (the kernel
        # runs on the CPU, where reading the sum costs nothing more), and `_nonfinite` gives NaN
        # in those rows, as a float layer would, for the check on the logits to find.
        if math.isfinite(float(x.sum())):
            return torch.ops.quantized.linear_dynamic(x, self._packed, self.reduce_range)
        return self._nonfinite(x)

    def _nonfinite(self, x: Tensor) -> Tensor:
        """NaN in the rows of x holding a NaN or an infinity; the others as usual (quantized
        by themselves: a non-finite row has no range to share)."""
        good = x.isfinite().all(-1)  # (...,) rows
        if bool(good.all()):  # finite, only its sum overflowed
            return torch.ops.quantized.linear_dynamic(x, self._packed, self.reduce_range)
        y = x.new_full((*x.shape[:-1], self.out_features), float("nan"))
        if bool(good.any()):
            y[good] = torch.ops.quantized.linear_dynamic(x[good], self._packed, self.reduce_range)
        return y

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def check_int8(device: str = "cpu") -> None:
    """One clear error where int8 inference cannot run: a CUDA device, or a PyTorch without the
    x86 quantized kernels."""
    if str(device) != "cpu":
        raise GlassformerError(
            f"{param('dtype', 'int8')} runs on the CPU only (PyTorch's int8 kernels), not on "
            f"{device}; use {param('dtype', 'float32')} there"
        )
    engines = torch.backends.quantized.supported_engines
    if not {"x86", "fbgemm"} & set(engines):
        raise GlassformerError(
            f"{param('dtype', 'int8')} needs PyTorch's x86 int8 kernels (fbgemm), which this "
            f"build lacks (it has {', '.join(engines) or 'none'}); use {param('dtype', 'float32')}"
        )


def int8(model: Transformer) -> Transformer:
    """The int8 form of the model (see the module docstring), for inference.

    model: a float32 Transformer on the CPU, in PyTorch's own layout (not `inference_layout`'s),
    changed in place and returned (in eval mode). Only slots the model declares are set: each
    linear layer's own attribute, and `output_head` for a tied head (which `Transformer.forward`
    then computes the logits with)."""
    param = next(model.parameters())
    check_int8(param.device)
    if param.dtype != torch.float32:
        raise GlassformerError(f"int8 quantization starts from float32 weights, not {param.dtype}")
    cfg = model.cfg
    for m in self_attentions(model).values():  # self-attention: Q, K and V from one int8 product
        parts = (m.q, m.k, m.v)
        b = None if m.q.bias is None else torch.cat([p.bias for p in parts])
        m.qkv_int8 = Int8Linear(torch.cat([p.weight for p in parts]), b)
        m.q = m.k = m.v = None  # held once, in qkv_int8
    if cfg.has_decoder and cfg.tie_embeddings:
        b = model.lm_head.bias if cfg.lm_bias else None
        model.output_head = Int8Linear(model.decoder.tok_embed.weight, b)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):  # an untied lm_head too: forward calls it
                setattr(parent, name, Int8Linear(child.weight, child.bias))
    return model.eval()
