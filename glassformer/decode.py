"""Decoding strategies over a step function, knowing nothing of engines or tokenizers.

A step function maps the token ids so far to the logits of the next token (V,). Greedy decoding
(seed 002): start from SOS or a prompt, append the argmax token, stop at EOS or at the length limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

StepFn = Callable[[list[int]], np.ndarray]


@dataclass
class Generation:
    """The generated ids (prompt included) and, per step, the chosen token's probability and the
    full next-token distribution."""

    ids: list[int]
    n_prompt: int
    chosen_probs: list[float] = field(default_factory=list)
    distributions: list[np.ndarray] = field(default_factory=list)
    stopped_at_eos: bool = False

    @property
    def new_ids(self) -> list[int]:
        return self.ids[self.n_prompt :]


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def greedy(
    step: StepFn,
    prompt: list[int],
    max_new_tokens: int,
    eos_id: int | None = None,
    max_len: int | None = None,
) -> Generation:
    """Append argmax tokens until EOS, `max_new_tokens` new tokens, or `max_len` tokens in all."""
    out = Generation(ids=list(prompt), n_prompt=len(prompt))
    for _ in range(max_new_tokens):
        if max_len is not None and len(out.ids) >= max_len:
            break
        probs = _softmax(step(out.ids))
        token = int(np.argmax(probs))
        out.ids.append(token)
        out.chosen_probs.append(float(probs[token]))
        out.distributions.append(probs)
        if token == eos_id:
            out.stopped_at_eos = True
            break
    return out
