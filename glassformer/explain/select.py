"""Choosing what a report shows: the steps of some blocks and heads, and the attention maps.

`select_steps(trace, layers, heads)` keeps the chosen blocks and heads of the model (an unknown
one is an error that names what there is); `attention_maps(steps)` finds every attention matrix A
with its site, layer, head and kind. Used by the HTML report, the PNG heatmaps and the CLI's
`--layers` / `--heads`. Pure selection over step names: no HTML, no drawing, no printing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from glassformer.errors import GlassformerError
from glassformer.trace import Step, Trace

_LAYER = re.compile(r"(?:^|\.)(?:encoder|decoder)\.(\d+)(?=\.)")
_HEAD = re.compile(r"(?:^|\.)head(\d+)(?=\.)")


def layer_of(name: str) -> int | None:
    """The block index of an engine step (`decoder.3.ffn.out` -> 3), or None outside the blocks."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def head_of(name: str) -> int | None:
    m = _HEAD.search(name)
    return int(m.group(1)) if m else None


def select_steps(
    trace: Trace, layers: list[int] | None = None, heads: list[int] | None = None
) -> list[Step]:
    """The steps of the chosen blocks and heads of the model (None = all). Steps outside the
    blocks (embeddings, logits, the articles' hand-made steps) always stay."""
    in_blocks = [s for s in trace.steps if layer_of(s.name) is not None]
    _check_choice("layer", layers, {layer_of(s.name) for s in in_blocks})
    _check_choice("head", heads, {head_of(s.name) for s in in_blocks} - {None})

    def keep(s: Step) -> bool:
        layer, head = layer_of(s.name), head_of(s.name)
        if layer is None:
            return True
        return (layers is None or layer in layers) and (
            heads is None or head is None or head in heads
        )

    return [s for s in trace.steps if keep(s)]


def _check_choice(what: str, chosen: list[int] | None, available: set) -> None:
    if chosen is None:
        return
    if not available:
        raise GlassformerError(
            f"--{what}s: this trace has no model {what}s to choose from "
            f"(only engine blocks such as encoder.0 have them); leave out --{what}s"
        )
    missing = sorted(set(chosen) - available)
    if missing:
        raise GlassformerError(
            f"--{what}s: no {what} {', '.join(map(str, missing))} in this trace; "
            f"choose from {_span(sorted(available))}"
        )


def _span(xs: list[int]) -> str:
    return f"{xs[0]}-{xs[-1]}" if xs == list(range(xs[0], xs[-1] + 1)) else ", ".join(map(str, xs))


@dataclass
class AttentionMap:
    """One attention matrix A and where it is: `site` is its name without layer and head."""

    step: Step
    site: str
    layer: int | None
    head: int | None
    kind: str


def attention_maps(steps: list[Step]) -> list[AttentionMap]:
    """Every 2-d step named `...A`: encoder self-, decoder masked self- and cross-attention."""
    maps = []
    for s in steps:
        parts = s.name.split(".")
        if parts[-1] != "A" or s.values.ndim != 2:
            continue
        site = [
            p
            for i, p in enumerate(parts[:-1])
            if not re.fullmatch(r"head\d+", p)
            and not (p.isdigit() and i > 0 and parts[i - 1] in ("encoder", "decoder"))
        ]
        maps.append(
            AttentionMap(s, ".".join(site), layer_of(s.name), head_of(s.name), _kind(parts))
        )
    return maps


def _kind(parts: list[str]) -> str:
    if "cross_attn" in parts:
        return "cross-attention: decoder queries, encoder keys"
    if "decoder" in parts and "self_attn" in parts:
        return "masked self-attention (decoder)"
    if "encoder" in parts:
        return "self-attention (encoder)"
    return "causal self-attention" if "causal" in parts else "self-attention"
