"""The two articles' worked examples, step by step, as traces.

`hello_world()` follows Sanseviero's "The Random Transformer" ("Hello World" -> "Hola Mundo",
`random_transformer.py`); `self_attention()` follows Raschka's chapter 3 ("Your journey starts
with one step", `raschka_ch03.py`). Each returns a `Trace` whose narrated steps (those with a
note) tell the story and whose values are the articles' numbers; tests compare them with
`shared/golden`. The math is the reference engine's; these modules only supply the articles'
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

WALKTHROUGHS = {"hello-world": hello_world, "self-attention": self_attention}

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
    "self_attention",
]
