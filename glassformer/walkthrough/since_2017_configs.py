"""The ground both halves of `glassformer walkthrough modern` stand on (`since_2017.py`, parts 1
and 2; `since_2017_layers.py`, parts 3 and 4): the toy decoder every part runs (`toy`), the names
of the weights each part reads, the two real configs the byte and parameter counts are for (Llama
2 7B, Llama 3 8B, with their sources), and the counts in closed form (`n_weights`,
`kv_cache_bytes`, which the tests hold against the PyTorch engine's `KVCache`).

Deliberately not here: the parts themselves, the math (the reference engine's).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from glassformer import weights
from glassformer.config import Config

STD = 0.5  # the seeded weights' N(0, STD²): numbers of a readable size on the article's X
ATTN = "decoder.layers.0.self_attn"  # the weights each part reads (block 0 of the toy decoder)
NORM = "decoder.layers.0.norm1"
FFN = "decoder.layers.0.ffn"
FP16 = 2  # bytes per number in fp16 / bf16, as Llama's weights and KV caches are kept

# Where the real configs' numbers come from: in full, and as the notes cite them.
SOURCES = {
    "Llama 2 7B": "Touvron et al. 2023, “Llama 2: Open Foundation and Fine-Tuned Chat Models” "
    "(arXiv:2307.09288), Table 1 (4k context; GQA only for 34B and 70B), and "
    "huggingface.co/meta-llama/Llama-2-7b-hf config.json: hidden_size 4096, 32 layers, 32 "
    "attention heads, 32 key/value heads, intermediate_size 11008",
    "Llama 3 8B": "Meta, Llama 3 model card (github.com/meta-llama/llama3, MODEL_CARD.md: 8B, "
    "GQA, 8k context) and huggingface.co/meta-llama/Meta-Llama-3-8B config.json: hidden_size "
    "4096, 32 layers, 32 attention heads, 8 key/value heads, intermediate_size 14336, "
    "rope_theta 500000",
}
CITED = {
    "Llama 2 7B": "Touvron et al. 2023 (arXiv:2307.09288) and Llama-2-7b-hf's config.json",
    "Llama 3 8B": "Meta's Llama 3 model card and Meta-Llama-3-8B's config.json",
}
# The two real configs the byte and parameter counts are for (architecture only: no weights).
LLAMA2_7B = Config(
    arch="decoder",
    vocab_size=32000,
    d_model=4096,
    n_heads=32,
    d_ff=11008,
    n_decoder_layers=32,
    max_len=4096,
    positions="rotary",
    norm="pre",
    norm_kind="rmsnorm",
    ffn_kind="gated",
    activation="silu",
    bias=False,
)
LLAMA3_8B = dataclasses.replace(
    LLAMA2_7B, vocab_size=128256, n_kv_heads=8, d_ff=14336, max_len=8192, rope_theta=500000.0
)


def toy(**changes) -> Config:
    """The walkthrough's tiny decoder: the Random Transformer's d_model 4, FFN 8 and 10 words,
    one head of 4, two pre-norm blocks, no biases; `changes` (Config fields) on top."""
    base = dict(arch="decoder", vocab_size=10, d_model=4, n_heads=1, head_dim=4, d_ff=8,
                n_decoder_layers=2, max_len=16, norm="pre", bias=False)  # fmt: skip
    return Config(**(base | changes))


def n_weights(cfg: Config, prefix: str) -> int:
    """How many numbers the tensors of `weights.spec(cfg)` whose names start with `prefix` hold."""
    return sum(int(np.prod(s)) for n, s in weights.spec(cfg).items() if n.startswith(prefix))


def kv_cache_bytes(cfg: Config, itemsize: int = FP16) -> int:
    """Bytes the KV cache keeps per token per layer: K and V, each kv_heads × D numbers of
    `itemsize` bytes, 2 · KV · D · itemsize (fewer key/value heads, fewer bytes)."""
    return 2 * cfg.kv_dim * itemsize
