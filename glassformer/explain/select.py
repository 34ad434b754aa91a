"""Choosing what a report shows: the steps of some blocks and heads, and the attention maps.

`select_steps(trace, layers, heads)` keeps the chosen blocks and heads of the model (an unknown
one is an error that names what there is); `attention_maps(steps)` finds every attention matrix A
with its site, layer, head and kind; `HeadNumbers` counts every head from 0, as the model does
(the article's head1 and head2 are heads 0 and 1); `KVGroups` reads grouped-query attention off
the names (the key/value head `kv_head{g}` that a group of query heads shares); `group_steps`
nests the steps into groups (a block, a head, a decoding step) so that no group's header appears
twice. Used by the HTML
report, the PNG heatmaps and the CLI's `--layers` / `--heads`. Pure selection over step names:
no HTML, no drawing, no printing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from glassformer.errors import GlassformerError
from glassformer.trace import Step, Trace

_LAYER = re.compile(r"(?:^|\.)(?:encoder|decoder)\.(\d+)(?=\.)")
_HEAD = re.compile(r"(?:^|\.)head(\d+)(?=\.)")
_KV = re.compile(r"(?:^|\.)kv_head(\d+)(?=\.)")


def layer_of(name: str) -> int | None:
    """The block index of an engine step (`decoder.3.ffn.out` -> 3), or None outside the blocks."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def head_of(name: str) -> int | None:
    """The head number written in a step name (`...head1.A` -> 1), as written."""
    m = _HEAD.search(name)
    return int(m.group(1)) if m else None


class HeadNumbers:
    """One numbering of heads for everything shown: from 0, as the model and `--heads` count.

    The model's heads (inside engine blocks) are named from 0. A family of heads outside the
    blocks (steps sharing the name before `headN`) whose numbers start at 1 is counted from 1,
    as the Random Transformer article names its head1 and head2: it is shown one lower.
    """

    def __init__(self, steps: list[Step]):
        found: dict[str, set[int]] = {}
        for s in steps:
            head = head_of(s.name)
            if head is not None and layer_of(s.name) is None:
                found.setdefault(_family(s.name), set()).add(head)
        self.from_one = {f for f, heads in found.items() if min(heads) == 1}

    def shown(self, name: str) -> int | None:
        """The head's number counted from 0 (None outside a head)."""
        head = head_of(name)
        if head is None:
            return None
        return head - 1 if _family(name) in self.from_one else head

    def article(self, name: str) -> int | None:
        """The number in the name when it is counted from 1 (the article's), else None."""
        head = head_of(name)
        return head if head is not None and _family(name) in self.from_one else None

    def label(self, name: str) -> str:
        """'head 0 (the article's head 1)' for a head counted from 1, else ''."""
        n = self.article(name)
        return f"head {n - 1} (the article's head {n})" if n is not None else ""


class KVGroups:
    """Grouped-query attention as the step names record it: per attention site (the name before
    `head{h}`, e.g. `decoder.0.self_attn`) its query heads and the key/value heads `kv_head{g}`
    they share, G = heads / kv heads consecutive query heads to each (query head h reads K/V
    head h // G). A site without `kv_head` steps has one K and V per head (G = 1)."""

    def __init__(self, names):
        self.heads: dict[str, set[int]] = {}
        self.kv: dict[str, set[int]] = {}
        for name in names:
            for pattern, found in ((_HEAD, self.heads), (_KV, self.kv)):
                m = pattern.search(name)
                if m and layer_of(name) is not None:
                    found.setdefault(name[: m.start()], set()).add(int(m.group(1)))

    def size(self, site: str) -> int:
        """G: the query heads per key/value head at `site` (1: none shared)."""
        kv = self.kv.get(site)
        return max(len(self.heads.get(site, ())) // len(kv), 1) if kv else 1

    def kv_of(self, name: str) -> tuple[str, int, range] | None:
        """For a query head's step: (the prefix of its shared K/V head, that head's number g,
        the query heads sharing it); None when its K and V are its own."""
        m = _HEAD.search(name)
        if not m:  # (a `kv_head` is no match: `head` must follow a dot)
            return None
        site, G = name[: m.start()], self.size(name[: m.start()])
        if G == 1:
            return None
        g = int(m.group(1)) // G
        return f"{site}.kv_head{g}", g, range(g * G, (g + 1) * G)

    def queries(self, name: str) -> range | None:
        """For a step of a shared K/V head (`...kv_head{g}...`): the query heads that read it."""
        m = _KV.search(name)
        if not m:
            return None
        G, g = self.size(name[: m.start()]), int(m.group(1))
        return range(g * G, (g + 1) * G)


def kv_groups(trace) -> KVGroups:
    """The trace's KVGroups, made once per trace (`Trace.of`)."""
    return trace.of("kv_groups", lambda: KVGroups(trace.names()))


def kv_head_of(name: str) -> int | None:
    """The K/V head number in a step name (`...kv_head1.K` -> 1), or None."""
    m = _KV.search(name)
    return int(m.group(1)) if m else None


def _family(name: str) -> str:
    m = _HEAD.search(name)
    return name[: m.start()] if m else name


def containing(trace: Trace, only: str | None, said: str) -> list[Step]:
    """The steps whose name contains `only` (every step for None); none, or an empty `only`
    (which would keep every step), is refused in one line naming the closest parts of names.
    said: how the caller spells the option ("--only 'x'" on the command line, "only='x'")."""
    if only is None:
        return list(trace.steps)
    if only == "":
        raise GlassformerError(f"{said} keeps every step; give part of a step name, e.g. A")
    steps = [s for s in trace.steps if only in s.name]
    if not steps:
        import difflib

        names = [s.name for s in trace.steps] or ["(none: the trace is empty)"]
        parts = {".".join(p[i:]) for n in names for p in [n.split(".")] for i in range(len(p))}
        parts |= {part for n in names for part in n.split(".")}
        close = difflib.get_close_matches(only, sorted(parts), n=5, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else f"names look like {names[-1]}"
        raise GlassformerError(f"{said}: no step name contains it; {hint}")
    return steps


def select_steps(
    trace: Trace, layers: list[int] | None = None, heads: list[int] | None = None
) -> list[Step]:
    """The steps of the chosen blocks and heads of the model (None = all). Steps outside the
    blocks (embeddings, logits, the articles' hand-made steps) always stay; a shared K/V head
    (`kv_head{g}`) stays with any of the query heads that read it."""
    in_blocks = [s for s in trace.steps if layer_of(s.name) is not None]
    _check_choice("layer", layers, {layer_of(s.name) for s in in_blocks})
    _check_choice("head", heads, {head_of(s.name) for s in in_blocks} - {None})
    groups = KVGroups(s.name for s in in_blocks)

    def keep(s: Step) -> bool:
        layer, head = layer_of(s.name), head_of(s.name)
        if layer is None:
            return True
        readers = groups.queries(s.name)
        if heads is not None and readers is not None:
            return (layers is None or layer in layers) and bool(set(readers) & set(heads))
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
    """Every 2-d step named `...A`: encoder self-, decoder masked self- and cross-attention.
    `head` is counted from 0 (`HeadNumbers`)."""
    heads = HeadNumbers(steps)
    maps = []
    for s in steps:
        parts = s.name.split(".")
        if parts[-1] != "A" or len(s.shape) != 2:
            continue
        site = [
            p
            for i, p in enumerate(parts[:-1])
            if not re.fullmatch(r"head\d+", p)
            and not (p.isdigit() and i > 0 and parts[i - 1] in ("encoder", "decoder"))
        ]
        maps.append(
            AttentionMap(s, ".".join(site), layer_of(s.name), heads.shown(s.name), _kind(parts))
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


# -- groups of steps for the report's step list --------------------------------------------------


@dataclass
class Group:
    """Consecutive steps under one name prefix (`key`); items are steps and nested groups."""

    key: str
    items: list

    def count(self) -> int:
        return sum(x.count() if isinstance(x, Group) else 1 for x in self.items)


def group_steps(steps: list[Step], prefix: tuple[str, ...] = ()) -> list:
    """Steps nested by name prefix, in order: each run of steps under one prefix is a `Group`
    (inside it, runs under longer prefixes), down to an engine block or a head, whose steps are
    listed flat. A lone step between two runs of one prefix joins them (`W_O` between the
    `div30` steps, `generate.step0.probs` between the decoding steps of `model`), so no header
    appears twice in a row of groups; a group holding only one group is that group."""
    runs: list[tuple[str | None, list[Step]]] = []
    for s in steps:
        parts = s.name.split(".")
        inside = tuple(parts[: len(prefix)]) == prefix and len(parts) > len(prefix) + 1
        key = ".".join(parts[: len(prefix) + 1]) if inside else None
        if runs and key is not None and runs[-1][0] == key:
            runs[-1][1].append(s)
        else:
            runs.append((key, [s]))
    merged: list[tuple[str | None, list[Step]]] = []
    for key, run in runs:
        if (
            len(merged) >= 2
            and key is not None
            and merged[-2][0] == key
            and len(merged[-1][1]) == 1
            and merged[-1][0] != key
        ):
            lone = merged.pop()[1]
            merged[-1][1].extend(lone + run)
        else:
            merged.append((key, run))
    out: list = []
    for key, run in merged:
        if key is None or len(run) == 1:
            out.extend(run)
            continue
        parts = tuple(key.split("."))
        if _is_block(parts) or re.fullmatch(r"(kv_)?head\d+", parts[-1]):
            out.append(Group(key, list(run)))
            continue
        items = group_steps(run, parts)
        out.append(
            items[0] if len(items) == 1 and isinstance(items[0], Group) else Group(key, items)
        )
    return out


def _is_block(parts: tuple[str, ...]) -> bool:
    return len(parts) >= 2 and parts[-1].isdigit() and parts[-2] in ("encoder", "decoder")
