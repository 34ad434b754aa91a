"""Words for every step of a trace: a title to read, what the step does, what this run shows.

    title(name, of)      "Decoder layer 1 · cross-attention · head 0 · attention weights"
    what(name, of)       one plain sentence of what the step computes, by its kind
    shows(step, trace)   one sentence of what this run's values show, computed from them
                         ("The most focused row is “␣el”: 88.2% of its attention goes to ...")
    rounded(x)           a number for reading: 3 significant digits (as numbers.js's fmt)

`of` is what tells how to name a step: a model's `Config`, a `Trace`, or a `Naming` made once from
either (`naming`). Layers and heads are counted from 0, as in the trace names and --layers /
--heads; a family of heads the article counts from 1 reads "head 0 (the article's head 1)"
(`select.HeadNumbers`). The stack is named ("Encoder layer 0") only when the model has two.
The equations are the trace's own (`glossary.py`); these words sit beside them and use the same
symbols (X, P, Q, K, V, Ω, A, C, Z, μ, σ, γ, β). Pure functions over names and values: no HTML,
no printing; the cards of `html.py` escape and place them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from glassformer.explain.select import HeadNumbers, KVGroups, head_of, kv_groups
from glassformer.explain.values import SHOWS, Say, generic, mask_sentence, max_abs, rounded
from glassformer.glossary import MEANINGS, PLACES, TITLES
from glassformer.tokenizer.display import display_token
from glassformer.trace import Step, Trace

SEP = " · "


@dataclass(frozen=True)
class Naming:
    """stacks: name the stack (the model has an encoder and a decoder); cross: the decoder's
    blocks have cross-attention (their sublayer 2 is it); classifier: logits and probabilities
    are one per class; heads: the one head numbering (None: every head as named, from 0);
    norm: the model's norm ("LayerNorm" or "RMSNorm"); groups: the query heads that share each
    key/value head (grouped-query attention; 1: none shared); rotary: Q and K of self-attention
    are turned by rotary positions (RoPE), and no positions are added to the embeddings."""

    stacks: bool = False
    cross: bool = False
    classifier: bool = False
    heads: HeadNumbers | None = None
    norm: str = "LayerNorm"
    groups: int = 1
    rotary: bool = False


def naming(of=None, heads: HeadNumbers | None = None) -> Naming:
    """The Naming of a Config, a Trace (its step names), a Naming (itself) or None (plain)."""
    if of is None or isinstance(of, Naming):
        return of or Naming()
    if isinstance(of, Trace):
        parts = {p for s in of.steps for p in s.name.split(".")}
        classifier = any(s.name.endswith("logits") and len(s.shape) == 1 for s in of.steps)
        heads = heads if heads is not None else HeadNumbers(of.steps)
        both = {"encoder", "decoder"} <= parts
        kv = kv_groups(of)
        modern = {
            "norm": "RMSNorm" if "rms" in parts and "std" not in parts else "LayerNorm",
            "groups": max([kv.size(site) for site in kv.kv] or [1]),
            "rotary": "Q_rot" in parts,
        }
        return Naming(both, "cross_attn" in parts, classifier, heads, **modern)
    arch = getattr(of, "arch", None)  # a Config
    classifier = arch == "encoder" and bool(getattr(of, "n_classes", 0))
    modern = {
        "norm": "RMSNorm" if getattr(of, "norm_kind", "") == "rmsnorm" else "LayerNorm",
        "groups": of.n_heads // of.kv_heads if hasattr(of, "kv_heads") else 1,
        "rotary": getattr(of, "positions", None) == "rotary",
    }
    return Naming(arch == "encoder-decoder", arch == "encoder-decoder", classifier, heads, **modern)


# -- titles -------------------------------------------------------------------------------------

_INDEXED = re.compile(r"(head|step|block|norm|add)(\d+)$")


@dataclass
class _Parts:
    """A step name read part by part: where it is and what it is (its kind)."""

    places: list[str]
    stack: str | None = None
    stack_at: int = 0  # where among the places the stack is named
    layer: int | None = None
    sub: str | None = None  # "self", "cross", "ffn"
    norm: str | None = None  # "block" (a block's k-th), "final", "embed", "plain"
    head: str | None = None
    kv: int | None = None  # a shared key/value head (`kv_head{g}`): g
    leaf: str | None = None
    ends: bool = False  # the name ends at its sublayer (the walkthroughs' `ffn`): its output


def _parse(name: str) -> _Parts:
    parts, p, k = name.split("."), _Parts([]), None
    i = 0
    while i < len(parts):
        c, m = parts[i], _INDEXED.match(parts[i])
        last = i == len(parts) - 1
        if c in ("encoder", "decoder"):
            p.stack, p.stack_at = c, len(p.places)
            if i + 1 < len(parts) and parts[i + 1].isdigit():
                p.layer, i = int(parts[i + 1]), i + 1
        elif c in ("self_attn", "cross_attn", "ffn"):
            p.sub, p.ends = {"self_attn": "self", "cross_attn": "cross", "ffn": "ffn"}[c], last
        elif c in ("norm", "embed_norm", "layernorm"):
            p.norm = {"norm": "final", "embed_norm": "embed", "layernorm": "plain"}[c]
        elif m and m.group(1) == "norm":
            p.norm, k = ("block" if p.layer is not None else "plain"), int(m.group(2))
        elif m and m.group(1) == "add" and last:
            p.leaf, k = "add", int(m.group(2))
        elif m and m.group(1) == "head":
            p.head = c
        elif c.startswith("kv_head") and c[len("kv_head") :].isdigit():
            p.kv = int(c[len("kv_head") :])
        elif m and m.group(1) in ("step", "block"):
            what = "decoding step" if m.group(1) == "step" else "block"
            p.places.append(f"{what} {m.group(2)}")
        elif last:
            p.leaf = c
        elif c not in ("model", "generate"):
            p.places.append(PLACES.get(c, c.replace("_", " ")))
        i += 1
    if k is not None and p.layer is not None and p.sub is None:
        p.sub = "self" if k == 1 else "ffn" if k == 3 or p.stack != "decoder" else "k2"
    return p


def _sub_word(p: _Parts, n: Naming) -> str | None:
    if p.sub == "k2":  # a decoder block's second sublayer: cross-attention when it has one
        return "cross-attention" if n.cross else "feed-forward"
    if p.sub == "self":
        return "self-attention" if n.stacks else None if p.head or p.kv is not None else "attention"
    return {"cross": "cross-attention", "ffn": "feed-forward", None: None}[p.sub]


def _leaf_word(p: _Parts, n: Naming) -> str | None:
    leaf = p.leaf
    if leaf is None:
        return "output" if p.ends else None
    if leaf == "add":
        return "residual add"
    if leaf == "out":
        if p.norm or p.sub == "ffn":
            return "output"
        return "block output" if p.layer is not None or "block" in " ".join(p.places) else "output"
    if leaf in ("logits", "probs"):
        what = "class" if n.classifier else "next-token"
        return f"{what} {'logits' if leaf == 'logits' else 'probabilities'}"
    if leaf == "C":
        return "head output C" if p.head or p.layer is not None else "context vectors C"
    if leaf == "mask" and "dropout" in p.places:
        return "dropout mask"
    return TITLES.get(leaf, leaf.replace("_", " "))


def title(name: str, of=None) -> str:
    """A step's (or a group's) title in words: "Layer 0 · head 3 · attention weights"."""
    n = naming(of)
    p = _parse(name)
    out = list(p.places[: p.stack_at])
    if p.stack is not None:
        where = p.stack.capitalize() if n.stacks else ""
        if p.layer is not None:
            out.append(f"{where} layer {p.layer}".strip().capitalize())
        elif where:
            out.append(where)
    out += p.places[p.stack_at :]
    sub = _sub_word(p, n)
    if sub:
        out.append(sub)
    if p.norm:
        out.append({"final": "final ", "embed": "embedding "}.get(p.norm, "") + n.norm)
    if p.head:
        heads, probe = n.heads or HeadNumbers([]), name + "."  # a group's key ends at its head
        shown = heads.label(probe) or f"head {heads.shown(probe)}"
        h = heads.shown(probe)
        if n.groups > 1 and p.leaf is None and not p.ends and h is not None:
            shown += f" (K and V from K/V head {h // n.groups})"  # a head's group of steps
        out.append(shown)
    if p.kv is not None:
        out.append(f"K/V head {p.kv}" + (f" ({_sharing(p.kv, n.groups)})" if n.groups > 1 else ""))
    leaf = _leaf_word(p, n)
    if leaf:
        if not out and p.leaf in ("logits", "probs", "pooled", "embedding"):
            out.append("Output")
        out.append(leaf)
    text = SEP.join(out) or name
    return text[0].upper() + text[1:]


# -- what a step does ---------------------------------------------------------------------------

_WEIGHTS = {"WQ", "WK", "WV", "W_query", "W_key", "W_value", "W_O", "weight"}
_GIVEN = {"embeddings", "E", "sos_input_article", "E_plus_Z", "encoder_output"}
_FORMULA = {"standard", "article", "layernorm_article", "layernorm_formula"}
_BLOCKS = {"one_block", "one_block_residual_ln"}
_SAME = {"keys": "K", "values": "V", "C_heads": "C", "Q_split": "split", "K_split": "split",
         "V_split": "split", "self_ln": "norm.out", "cross_ln": "norm.out"}  # fmt: skip
FALLBACK = "A value recorded under this name by the trace."


def kind(name: str, of=None) -> str:
    """The kind of step a name is (the key of glossary.MEANINGS and of what `shows` computes)."""
    p, n = _parse(name), naming(of)
    leaf = p.leaf
    if leaf is None:
        if p.ends:
            return "ffn.out" if p.sub == "ffn" else "Z"
        return "norm.out" if p.norm else "head.alone" if p.head else ""
    if p.sub == "cross" and leaf in ("Q", "K", "V"):
        return f"cross.{leaf}"
    if leaf == "out":
        return "norm.out" if p.norm else "ffn.out" if p.sub == "ffn" else "block.out"
    if leaf in ("logits", "probs") and n.classifier:
        return f"class.{leaf}"
    if leaf in ("mask", "A") and "dropout" in p.places:
        return f"dropout.{leaf}"
    for names, key in ((_WEIGHTS, "weights"), (_GIVEN, "given"), (_FORMULA, "formula")):
        if leaf in names:
            return key
    return "block" if leaf in _BLOCKS else _SAME.get(leaf, leaf)


def _sharing(g: int, G: int) -> str:
    """Who reads K/V head g when G query heads share each: "shared by query heads 2-3"."""
    return f"shared by query heads {g * G}-{(g + 1) * G - 1}"


_ROTARY_INPUT = (
    "What the first layer reads: each token's embedding alone; rotary positions add no vector "
    "here, they turn Q and K inside each self-attention."
)


_RMS_OUT = (
    "Each token's vector divided by its root mean square and scaled by g, a learned vector of C "
    "numbers: RMSNorm neither centres the vector nor shifts it."
)


def what(name: str, of=None) -> str:
    """One plain sentence of what a step does, by its kind (FALLBACK for a name the engine and
    the walkthroughs never record); a second one where today's decoders' options change it (a
    shared K/V head, scores of rotated queries and keys)."""
    n, p, k = naming(of), _parse(name), kind(name, of)
    if k == "input" and n.rotary:
        return _ROTARY_INPUT
    said = MEANINGS.get(k, FALLBACK)
    if n.norm == "RMSNorm":
        said = _RMS_OUT if k == "norm.out" else said.replace("LayerNorm", "RMSNorm")
    if p.kv is not None:
        G = max(n.groups, 1)
        said += (
            f" This K/V head is {_sharing(p.kv, G) if G > 1 else 'shared'}: grouped-query "
            "attention computes it once for the whole group."
        )
    if k == "scores" and n.rotary and p.sub != "cross":
        said += (
            " With rotary positions these are the turned queries and keys, Ω = Q_rot·K_rotᵀ: a "
            "score depends on how far apart the two tokens are."
        )
    return said


# -- what this run shows ------------------------------------------------------------------------


def shows(
    step: Step,
    trace: Trace,
    labels=None,
    kind_of: str | None = None,
    *,
    token_kind=None,
    ended: bool = False,
):
    """One sentence of what this run's values of `step` show, or None (no values to speak of).

    labels: (rows, cols) as the card shows them (readable); None: the trace's axis labels,
    made readable for `token_kind` (`tokenizer.display`). kind_of: the step's kind (`kind`).
    ended: the decoder's output ended with the end token, which its last position reads."""
    v = np.asarray(step.values)
    if v.size == 0:
        return None
    if labels is None:
        labels = [
            None if x is None else [display_token(str(t), token_kind) for t in x]
            for x in trace.axis_labels(step)
        ]
    rows, cols = labels
    words = trace.labels.get("decoder")
    if rows is None and v.ndim == 2 and words and len(words) == v.shape[0]:
        rows = [display_token(str(t), token_kind) for t in words]  # logits, probs: the tokens
    if v.ndim == 1 and cols is None:
        rows, cols = None, rows  # a vector's labels belong to its entries
    decoder_rows = v.ndim == 2 and words is not None and len(words) == v.shape[0]
    say = Say(rows, cols, ended=ended and decoder_rows)
    classes = Naming(classifier=v.ndim == 1 and "pooled" in trace)  # a classifier's outputs
    k = kind_of if kind_of is not None else kind(step.name, classes)
    if v.dtype == bool or k in ("mask", "mask_simple", "dropout.mask"):
        return mask_sentence(v, k)
    f = v.astype(np.float64)
    if v.ndim == 0:
        return f"Its value is {rounded(f)}."
    if k == "max_abs":
        return max_abs(f, say)
    bad = ~np.isfinite(f)
    if bad.any():
        return f"{int(bad.sum())} of {f.size} values are not finite (NaN or ±∞)."
    fn = SHOWS.get(k)
    return fn(f, say, step, trace) if fn else generic(f, say)


# -- what a head shares and reads: today's decoders' attention ----------------------------------


def sharing(name: str, groups: KVGroups) -> str:
    """What a query head shares under grouped-query attention: "Head 3 shares K and V with head
    2: both read K/V head 1 (grouped-query attention)." ('' when its K and V are its own)."""
    found = groups.kv_of(name)
    head = head_of(name)
    if found is None or head is None:
        return ""
    _, g, readers = found
    rest = [str(h) for h in readers if h != head]
    if len(readers) == len(groups.heads.get(name[: name.index(f".head{head}")], ())):
        others, kind = "every other head of this layer", "multi-query attention"
    else:
        kind = "grouped-query attention"
        others = (
            f"head {rest[0]}" if len(rest) == 1 else f"heads {', '.join(rest[:-1])} and {rest[-1]}"
        )
    every = "both" if len(readers) == 2 else f"all {len(readers)}"
    return f"Head {head} shares K and V with {others}: {every} read K/V head {g} ({kind})."


def rotated(trace: Trace, prefix: str) -> str:
    """'' or the sentence that a head's scores are those of its rotated Q and K (RoPE)."""
    if f"{prefix}.Q_rot" not in trace:
        return ""
    return "The scores use the rotated queries and keys, Ω = Q_rot·K_rotᵀ (rotary positions)."
