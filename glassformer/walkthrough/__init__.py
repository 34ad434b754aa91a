"""The two articles' worked examples, step by step, as traces.

`hello_world()` follows Sanseviero's "The Random Transformer" ("Hello World" -> "Hola Mundo",
`random_transformer.py`); `self_attention()` follows Raschka's chapter 3 ("Your journey starts
with one step", `raschka_ch03.py`). Each returns a `Trace` whose narrated steps (those with a
note) tell the story and whose values are the articles' numbers; tests compare them with
`shared/golden`. `modern()` goes from 2017 to today (`since_2017.py`): rotary positions, RMSNorm,
SwiGLU and grouped-query attention, each beside what it replaced, checked against the engines.
The math is the reference engine's; these modules only supply the articles'
inputs and, where the article's code differs from the textbook formula, the article's variant
beside it, named as such.
"""

from glassformer.walkthrough.random_transformer import (
    E_PRINTED,
    EMBEDDINGS,
    HEADS,
    SOS_EMBEDDING,
    TOKENS,
    W_O,
    article_layer_norm,
    article_positions,
    article_random_block,
    hello_world,
)
from glassformer.walkthrough.raschka_ch03 import self_attention
from glassformer.walkthrough.since_2017 import modern

WALKTHROUGHS = {"hello-world": hello_world, "self-attention": self_attention, "modern": modern}

__all__ = [
    "E_PRINTED",
    "EMBEDDINGS",
    "HEADS",
    "SOS_EMBEDDING",
    "TOKENS",
    "WALKTHROUGHS",
    "W_O",
    "article_layer_norm",
    "article_positions",
    "article_random_block",
    "hello_world",
    "modern",
    "self_attention",
]
