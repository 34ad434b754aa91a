"""The whole model, drawn: one SVG of a Config's stacks, blocks, heads and output head.

`overview_svg(cfg)` draws the model a Config describes, box by box, each box named as the trace
names its steps: the token and position embeddings; every block of each stack, one row per
block, with its attention (one square per head; the decoder's causal mask said), its FFN
(C -> F -> C and the activation) and its LayerNorms where the Config puts them (pre-LN: on the
branch, before each sublayer; post-LN: on the residual stream, after each add); today's decoders'
options as they change the picture: RMSNorm for every norm, rotary positions (no position table
added; a RoPE tag on each self-attention, whose Q and K it turns), grouped K/V heads (a bar under
the query heads that share it), the gated FFN (its gate, up and down projections), no FFN with
d_ff 0; the residual
adds (⊕) on the residual stream, the dark line a token's row travels along; the final LayerNorm
(pre-LN); the output head (the LM head, tied to the token embedding or not; a classifier; a
pooled sentence embedding). In an encoder-decoder the encoder output M runs to every
cross-attention. A stack of more than MAX_FULL blocks shows its first two and its last block
in full and, between them, a band of one cell per block (`expand=True`: every block in full).

Every box is a `<g data-step="PREFIX">`, PREFIX the trace-name prefix of the steps it stands for
(`decoder.0.self_attn`, `decoder.0.self_attn.head1`, `encoder.1.ffn`, `logits`), with a label
and a `<title>` tooltip; the residual stream of a stack is one `path.gf-ov-lane` (data-stack),
which the explorer highlights for the token the user selects. Colours are presentation
attributes, so the string is a whole picture alone (no stylesheet, no script, nothing fetched);
the pages' CSS adds hover and highlight (`.gf-ov .cur`, `.gf-ov .off`).

`config_of(trace, params)` reads the Config back from a model's trace and weights (the static
report has those, not the Config); `report_overview` is the report's section. Pure: values in,
strings out; nothing is run, printed or written.
"""

from __future__ import annotations

import re
import textwrap

from glassformer.config import Config
from glassformer.explain.html_pieces import esc

MAX_FULL = 6  # a stack of more blocks is drawn as its first two, a band, and its last
LABEL_W, MARGIN, GAP = 64, 10, 30  # the block labels' column; the picture's margin; between stacks
BOX_H, LN_W, ATT_W, FFN_W = 40, 26, 132, 118  # sublayer boxes; LayerNorm; attention; FFN
FILL = {
    "embed": "#eef2f7",
    "attn": "#dcebf8",
    "cross": "#ece3f7",
    "ffn": "#e3f2e1",
    "norm": "#fff3cd",
    "head": "#fde8d7",
    "block": "#fafbfc",
    "cell": "#eef2f7",
    "memory": "#ece3f7",
}
SVG_NS = "http://www.w3.org/2000/svg"
INK, STREAM, MEMORY, LINE = "#1d232b", "#5b6673", "#8e6bbf", "#9aa5b1"
ACTIVATION = {"relu": "ReLU", "gelu": "GELU (erf)", "gelu_tanh": "GELU (tanh)", "silu": "SiLU"}
GATED = {"relu": "ReGLU", "gelu": "GEGLU", "gelu_tanh": "GEGLU", "silu": "SwiGLU"}  # Shazeer 2020
ROPE = "#f6c28b"  # the RoPE tag's fill
POSITIONS = {"sinusoidal": "sinusoidal", "sinusoidal_split": "sinusoidal, split halves"}


class _Drawing:
    """SVG elements in layers: block backgrounds, the residual streams, wires, boxes on top."""

    def __init__(self):
        self.back: list[str] = []
        self.lane: list[str] = []
        self.wires: list[str] = []
        self.front: list[str] = []

    def box(self, kind: str, step: str, rect, lines: str, title: str, top=False) -> None:
        """A box standing for the steps under `step`: rect (x, y, w, h); lines "Label|sub|...",
        the label bold, centred in the box or from its top."""
        x, y, w, h = rect
        rows = lines.split("|")
        first = y + 13 if top else y + (h - 12 * len(rows)) / 2 + 9
        bold = ' font-weight="600"'
        texts = "".join(
            f'<text x="{x + w / 2:g}" y="{first + 12 * n:g}" font-size="{10 if n else 11}" '
            f'text-anchor="middle"{"" if n else bold}>{esc(t)}</text>'
            for n, t in enumerate(rows)
        )
        self.front.append(
            f'<g class="gf-ov-box gf-ov-{kind}" data-step="{esc(step)}"><title>{esc(title)}</title>'
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="4" fill="{FILL[kind]}" '
            f'stroke="{LINE}"/>{texts}</g>'
        )

    def add(self, step: str, x, y, title: str) -> None:
        """A residual add ⊕ on the stream at (x, y)."""
        self.front.append(
            f'<g class="gf-ov-box gf-ov-add" data-step="{esc(step)}"><title>{esc(title)}</title>'
            f'<circle cx="{x:g}" cy="{y:g}" r="7" fill="#fff" stroke="{STREAM}" '
            f'stroke-width="1.5"/><path d="M{x - 4:g},{y:g}H{x + 4:g}M{x:g},{y - 4:g}V{y + 4:g}" '
            f'stroke="{STREAM}" stroke-width="1.5"/></g>'
        )

    def wire(self, d: str, color: str = STREAM, dash: str = "") -> None:
        """A thin line; a dashed one is the memory M's (class gf-ov-mline)."""
        dashed = f' class="gf-ov-mline" stroke-dasharray="{dash}"' if dash else ""
        self.wires.append(
            f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.3"{dashed}/>'
        )

    def arrow(self, x, y, direction: str, color: str = STREAM) -> None:
        """A small arrowhead with its tip at (x, y), pointing "up" or "right"."""
        a = {"up": (x - 4, y + 6, x + 4, y + 6), "right": (x - 6, y - 4, x - 6, y + 4)}[direction]
        self.wires.append(
            f'<path d="M{x:g},{y:g}L{a[0]:g},{a[1]:g}L{a[2]:g},{a[3]:g}Z" fill="{color}"/>'
        )

    def text(self, x, y, text: str, size=11, color: str = INK, bold: bool = False) -> None:
        weight = ' font-weight="600"' if bold else ""
        self.front.append(
            f'<text x="{x:g}" y="{y:g}" font-size="{size}" fill="{color}"{weight}>'
            f"{esc(text)}</text>"
        )


def overview_svg(cfg: Config, *, expand: bool = False, classes: list[str] | None = None) -> str:
    """The model that `cfg` describes as one self-contained SVG string (see the module).

    expand: every block in full, however deep the stacks; classes: a classifier's class names,
    for its head's tooltip."""
    stacks = [s for s, has in (("encoder", cfg.has_encoder), ("decoder", cfg.has_decoder)) if has]
    width = 2 * MARGIN + sum(_column_width(cfg, s) for s in stacks) + GAP * (len(stacks) - 1)
    d = _Drawing()
    head, read = _caption(cfg, width - 2 * MARGIN)
    for n, line in enumerate(head + read):
        bold = n < len(head)
        d.text(MARGIN, 17 + 15 * n, line, 12 if bold else 11, INK if bold else STREAM, bold)
    top = 17 + 15 * len(head + read)
    x, bottom, anchors = MARGIN, top, {}
    for stack in stacks:
        anchors[stack] = _stack(d, cfg, stack, x, top, expand, classes)
        x += _column_width(cfg, stack) + GAP
        bottom = max(bottom, anchors[stack]["bottom"])
    if cfg.arch == "encoder-decoder":
        _memory(d, anchors["encoder"]["memory"], anchors["decoder"])
    height = bottom + MARGIN
    return (
        f'<svg xmlns="{SVG_NS}" class="gf-ov" width="{width:g}" '
        f'height="{height:g}" viewBox="0 0 {width:g} {height:g}" role="img" '
        f'data-arch="{cfg.arch}" data-norm="{cfg.norm}" data-norm-kind="{cfg.norm_kind}" '
        f'data-positions="{cfg.positions}" data-kv-heads="{cfg.kv_heads}" data-ffn="{cfg.d_ff}" '
        f'font-family="system-ui, sans-serif" '
        f'fill="{INK}"><title>{esc(" ".join(head))}</title>'
        f'<rect width="{width:g}" height="{height:g}" fill="#fff"/>'
        f"{''.join(d.back)}{''.join(d.lane)}{''.join(d.wires)}{''.join(d.front)}</svg>"
    )


def collapses(cfg: Config) -> bool:
    """Whether a stack is too deep to draw every block in full (`expand` changes the picture)."""
    return max(cfg.n_encoder_layers, cfg.n_decoder_layers) > MAX_FULL


def _caption(cfg: Config, width: float) -> tuple[list[str], list[str]]:
    """The picture's heading, and what to read in it, wrapped to its width."""
    kind = {"encoder": "encoder-only", "decoder": "decoder-only"}.get(cfg.arch, cfg.arch)
    blocks = (
        f"{cfg.n_encoder_layers} encoder + {cfg.n_decoder_layers} decoder blocks"
        if cfg.arch == "encoder-decoder"
        else f"{cfg.n_encoder_layers or cfg.n_decoder_layers} blocks"
    )
    where = (
        f"Pre-LN: each {_norm(cfg)} sits on a branch, before its sublayer, and the stream is "
        "normalised once more at the end."
        if cfg.norm == "pre"
        else f"Post-LN (as in the original Transformer): each {_norm(cfg)} sits on the stream, "
        "after the add ⊕."
    )
    read = (
        "The dark line is the residual stream: each token's row travels along it, and each ⊕ "
        f"adds a sublayer's output back to it. {where}{_modern_words(cfg)} Blocks and heads are "
        "counted from 0; click a box to open its steps."
    )
    heads = f"{cfg.n_heads} heads of {cfg.head_dim}"
    heads += f" sharing {cfg.kv_heads} K/V heads" * (cfg.kv_heads != cfg.n_heads)
    ffn = f"FFN {cfg.d_ff}" if cfg.d_ff else "no FFN (attention only)"
    ffn = f"gated FFN {cfg.d_ff} ({GATED[cfg.activation]})" if cfg.ffn_kind == "gated" else ffn
    modern = " with RMSNorm" * (cfg.norm_kind == "rmsnorm")
    modern += ", rotary positions (RoPE)" * (cfg.positions == "rotary")
    head = (
        f"The whole model: {kind}, {blocks}, d_model {cfg.d_model}, {heads}, {ffn}, "
        f"{cfg.norm}-LN{modern}"
    )
    return textwrap.wrap(head, max(40, int(width / 7.3))), textwrap.wrap(read, int(width / 6.1))


def _norm(cfg: Config) -> str:
    return "RMSNorm" if cfg.norm_kind == "rmsnorm" else "LayerNorm"


def _modern_words(cfg: Config) -> str:
    """What to read in the picture of today's decoders' options (rotary, shared K/V heads)."""
    out = ""
    if cfg.positions == "rotary":
        out += (
            " No position vector is added to the embeddings: RoPE turns Q and K inside each "
            "self-attention by angles proportional to the token's position."
        )
    if cfg.kv_heads != cfg.n_heads:
        out += (
            " Under the query heads of an attention box, each bar is a K/V head: its keys and "
            "values, shared by the query heads above it."
        )
    return out


def _ln_w(cfg: Config) -> int:
    """A block's norm box: "LN", or the wider "RMS"."""
    return LN_W + 6 * (cfg.norm_kind == "rmsnorm")


def _units(cfg: Config, stack: str) -> list[tuple[str, int]]:
    """The sublayers of a block of `stack`, in order: (kind, box width); no FFN with d_ff 0."""
    att = ATT_W + 24 * (cfg.kv_heads != cfg.n_heads or cfg.positions == "rotary")
    cross = [("cross", att)] if stack == "decoder" and cfg.arch == "encoder-decoder" else []
    ffn = [("ffn", FFN_W + 46 * (cfg.ffn_kind == "gated"))] if cfg.d_ff else []
    return [("attn", att), *cross, *ffn]


def _column_width(cfg: Config, stack: str) -> int:
    blocks = sum(w + _ln_w(cfg) + 45 for _, w in _units(cfg, stack))
    out = sum(w + 18 for _, _, w, _, _ in _outputs(cfg, stack, None))
    return LABEL_W + max(blocks, out) + 10


def _stack(d: _Drawing, cfg: Config, stack: str, x: float, top: float, expand, classes) -> dict:
    """One stack as a column from (x, top): its embeddings, blocks and output, on one stream.
    Returns where the memory line meets it (M's box; the cross-attentions) and its bottom."""
    right, x0 = x + _column_width(cfg, stack), x + LABEL_W
    n = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
    does = {"encoder": "reads the source", "decoder": "writes the target"}[stack]
    does = does if cfg.arch == "encoder-decoder" else "reads the tokens"
    d.text(x + 4, top + 14, f"{stack.capitalize()} · {does}", 12, bold=True)
    sy = top + 42
    below = _embedding_row(d, cfg, stack, x0, sy)
    points, found = [(x0, sy)], {"cross": [], "bus": x - GAP / 2}
    for i in [*(range(n) if expand or n <= MAX_FULL else [0, 1, "band", n - 1]), "out"]:
        turn = sy + below
        sy = turn + {"band": 16, "out": 26}.get(i, 22)
        points += [(right - 6, points[-1][1]), (right - 6, turn), (x0 - 4, turn), (x0 - 4, sy)]
        if i == "band":
            _band(d, stack, range(2, n - 1), x, x0, right, sy)
        elif i != "out":
            found["cross"] += _block(d, cfg, stack, i, x, x0, right, sy)
        below = 30 if i == "band" else 66
    end, found["memory"] = _output_row(d, cfg, stack, x0, sy, classes)
    path = "M" + " L".join(f"{px:g},{py:g}" for px, py in [*points, (end, sy)])
    d.lane.append(
        f'<path class="gf-ov-lane" data-stack="{stack}" d="{path}" fill="none" stroke="{STREAM}" '
        f'stroke-width="2.5" stroke-linejoin="round"><title>the residual stream of the {stack}: '
        f"each token's row travels along it, block by block</title></path>"
    )
    found["bottom"] = sy + 15
    return found


def _embedding_row(d: _Drawing, cfg: Config, stack: str, x0: float, sy: float) -> float:
    """Token embedding ⊕ positions (and token types), then the embedding LayerNorm, on the
    stream at height sy. Returns how far below sy the row reaches."""
    V, C = cfg.vocab_size, cfg.d_model
    shared = cfg.share_embeddings and stack == "encoder"
    scaled = f" · × √{C}" if cfg.embed_scale else ""
    title = f"X = the rows of the token embedding matrix E ({V} × {C}) for the input ids"
    title += (f", times √{C}" if cfg.embed_scale else "") + (", shared with the decoder" * shared)
    sub = f"{V} × {C}{scaled}{', shared' if shared else ''}"
    d.box("embed", f"{stack}.X", (x0, sy - 15, 150, 30), f"Token embedding|{sub}", title)
    added = []
    if cfg.positions not in ("none", "rotary"):
        kind = POSITIONS.get(cfg.positions, f"learned, {cfg.max_len} × {C}")
        added.append((f"{stack}.P", f"Positions|{kind}", f"P = the positional encoding: {kind}"))
    if cfg.type_vocab_size:
        types = f"Token types|{cfg.type_vocab_size} × {C}"
        added.append((f"{stack}.types", types, "the token-type (segment) embedding of each token"))
    x = x0 + 150
    if added:
        ax = x + 20
        sums = " + ".join(["X", *(lines.split("|")[0] for _, lines, _ in added)])
        total = f"{stack}.sum" if cfg.embed_norm else f"{stack}.input"
        d.add(total, ax, sy, f"{sums}: the first block's input" + " (normalised)" * cfg.embed_norm)
        for k, (step, lines, title) in enumerate(added):
            w = 136 if len(added) == 1 else 124
            bx = ax - w / 2 if len(added) == 1 else ax - 128 + 132 * k
            d.box("embed", step, (bx, sy + 22, w, 30), lines, title)
            d.wire(f"M{bx + w / 2:g},{sy + 22:g}V{sy + 15:g}H{ax:g}V{sy + 8:g}")
            d.arrow(ax, sy + 8, "up")
        x = ax + 7
    if cfg.embed_norm:
        ln = f"{_norm(cfg)} of the summed embeddings, before the first block"
        d.box("norm", f"{stack}.embed_norm", (x + 14, sy - 11, 70, 22), _norm(cfg), ln)
    if cfg.positions == "rotary":
        _rotary_note(d, cfg, x0 + 20, sy + 22)
        return 60
    return 60 if added else 24


def _rotary_note(d: _Drawing, cfg: Config, x: float, y: float) -> None:
    """Rotary positions, said where a position table would be: no step, nothing added."""
    title = (
        f"Rotary positions (RoPE): no position vector is added to the embeddings; each "
        f"self-attention turns its Q and K by angles proportional to the token's position "
        f"(θ base {cfg.rope_theta:g}, {cfg.rope_dim} of each head's {cfg.head_dim} dimensions)"
    )
    d.front.append(
        f'<g class="gf-ov-rope-note"><title>{esc(title)}</title><rect x="{x:g}" y="{y:g}" '
        f'width="232" height="30" rx="4" fill="#fff" stroke="{LINE}" stroke-dasharray="3 2"/>'
        f'<text x="{x + 116:g}" y="{y + 13:g}" font-size="11" font-weight="600" '
        f'text-anchor="middle">Rotary positions: no table added</text><text x="{x + 116:g}" '
        f'y="{y + 25:g}" font-size="10" text-anchor="middle">RoPE turns Q and K in attention'
        "</text></g>"
    )


def _block(d: _Drawing, cfg: Config, stack: str, i: int, x, x0, right, sy) -> list:
    """Block i of `stack` as one row on the stream at height sy: its sublayers, each with its
    LayerNorm and its residual add. Returns its cross-attention's anchor for the memory line."""
    parts = " → ".join(kind.replace("attn", "attention") for kind, _ in _units(cfg, stack))
    d.back.append(
        f'<g class="gf-ov-box gf-ov-block" data-step="{stack}.{i}"><title>{stack} block {i}: '
        f"{parts}, each added back to the residual stream</title>"
        f'<rect x="{x + 2:g}" y="{sy - 13:g}" width="{right - x - 2:g}" height="74" rx="6" '
        f'fill="{FILL["block"]}" stroke="#e3e7ec"/>'
        f'<text x="{x + 6:g}" y="{sy + 4:g}" font-size="11" font-weight="600">block {i}</text></g>'
    )
    ux, cross = x0 + 6, []
    for k, (kind, w) in enumerate(_units(cfg, stack), start=1):
        ux, box_x = _sublayer(d, cfg, f"{stack}.{i}", k, kind, w, ux, sy)
        if kind == "cross":
            cross.append((box_x + w / 2, sy + 14 + BOX_H))
    return cross


def _sublayer(d: _Drawing, cfg: Config, block: str, k: int, kind: str, w: int, x, sy):
    """One sublayer of a block at x on the stream sy: a branch through [LayerNorm and] the
    sublayer box, back into ⊕ (pre-LN); or through the box into ⊕, then LayerNorm on the
    stream (post-LN). Returns where the next one starts and where its box is."""
    by = sy + 14
    mid = by + BOX_H / 2
    pre, ln_w = cfg.norm == "pre", _ln_w(cfg)
    d.front.append(f'<circle cx="{x:g}" cy="{sy:g}" r="2.5" fill="{STREAM}"/>')
    box_x = x + 8 + (ln_w + 8 if pre else 0)
    d.wire(f"M{x:g},{sy:g}V{mid:g}H{box_x:g}")
    d.arrow(box_x, mid, "right")
    norm, rms = f"{block}.norm{k}", cfg.norm_kind == "rmsnorm"
    ln = f"LayerNorm norm{k}: (x − μ)/√(σ² + ε)·γ + β of each token's row"
    ln = f"RMSNorm norm{k}: x/√(mean(x²) + ε)·g of each token's row" if rms else ln
    label = "RMS" if rms else "LN"
    if pre:
        d.box("norm", norm, (x + 8, mid - 9, ln_w, 18), label, ln + ", before the sublayer")
    _sublayer_box(d, cfg, block, kind, (box_x, by, w, BOX_H))
    xa = box_x + w + 10
    d.wire(f"M{box_x + w:g},{mid:g}H{xa:g}V{sy + 8:g}")
    d.arrow(xa, sy + 8, "up")
    what = {"attn": "Self-attention", "cross": "Cross-attention", "ffn": "FFN"}[kind]
    inner = f"{what}(LN(x))" if pre else f"{what}(x)"
    d.add(f"{block}.add{k}", xa, sy, f"add{k}: x + {inner}, the residual connection")
    if pre:
        return xa + 19, box_x
    d.box("norm", norm, (xa + 12, sy - 9, ln_w, 18), label, ln + ", after the add")
    return xa + 12 + ln_w + 12, box_x


def _sublayer_box(d: _Drawing, cfg: Config, block: str, kind: str, rect) -> None:
    """The attention box (one square per head) or the FFN box of a block."""
    if kind == "ffn":
        _ffn_box(d, cfg, block, rect)
        return
    stack, layer = block.split(".")
    H, D, KV = cfg.n_heads, cfg.head_dim, cfg.kv_heads
    cross, causal = kind == "cross", stack == "decoder" and kind == "attn"
    rope = cfg.positions == "rotary" and not cross  # RoPE turns self-attention's Q and K only
    site, what = f"{block}.{'cross' if cross else 'self'}_attn", "cross" if cross else "self"
    shared = f" · {KV} K/V" if KV != H else ""
    sub = f"{H} heads{shared} · K, V from M" if cross else f"{H} heads × {D}{shared}"
    sub += " · causal" * causal
    title = (
        f"block {layer} {what}-attention, {H} heads of {D}: A = softmax(Ω/√c) per head, "
        f"Ω = Q·Kᵀ, c = {D}, "
        f"C = A·V, Z = concat(C_0 … C_{H - 1})·W_O"
    )
    title += "; queries from the decoder, keys and values from the encoder output M" * cross
    title += "; the causal mask: token t reads tokens 0 … t only" * causal
    if KV != H:
        title += (
            f"; grouped-query attention: {KV} K/V heads, each shared by {H // KV} consecutive "
            f"query heads (head h reads K/V head h // {H // KV})"
        )
    if rope:
        title += (
            f"; rotary positions: Q and K turned by RoPE at their positions before Q·Kᵀ "
            f"(θ base {cfg.rope_theta:g}, {cfg.rope_dim} of {D} dimensions)"
        )
    d.box(kind, site, rect, f"{what.capitalize()}-attention|{sub}", title, top=True)
    x, y, w, _ = rect
    if rope:
        tip = "RoPE: Q and K turned by their positions before the scores (no position table)"
        d.front.append(
            f'<g class="gf-ov-rope"><title>{esc(tip)}</title><rect x="{x + w - 31:g}" '
            f'y="{y + 3:g}" width="28" height="12" rx="3" fill="{ROPE}"/><text x="{x + w - 17:g}" '
            f'y="{y + 12:g}" font-size="8" text-anchor="middle">RoPE</text></g>'
        )
    _heads(d, cfg, site, f"block {layer}'s {what}-attention", cross, (x, y, w))


def _heads(d: _Drawing, cfg: Config, site: str, whose: str, cross: bool, at) -> None:
    """One square per query head at the bottom of an attention box; under them, with grouped
    K/V heads, one bar per K/V head spanning the query heads that share it."""
    x, y, w = at
    H, KV = cfg.n_heads, cfg.kv_heads
    G = H // KV
    side = min(14.0, (w - 8 - 2 * (H - 1)) / H)
    if side < 3:
        return  # too many heads for one square each: the label counts them
    left = x + (w - H * side - 2 * (H - 1)) / 2
    top, tall = (y + BOX_H - 12, 5) if G > 1 else (y + BOX_H - 11, 8)
    for h in range(H):
        hx = left + h * (side + 2)
        reads = f", reading K/V head {h // G}" if G > 1 else ""
        d.front.append(
            f'<g class="gf-ov-box gf-ov-headbox" data-step="{site}.head{h}"><title>head {h} of '
            f"{esc(whose)}{reads}</title>"
            f'<rect x="{hx:g}" y="{top:g}" width="{side:g}" height="{tall}" rx="1.5" '
            f'fill="{"#b9a3d9" if cross else "#8fb8e0"}"/></g>'
        )
    for g in range(KV if G > 1 else 0):
        gx, gw = left + g * G * (side + 2), G * (side + 2) - 2
        title = (
            f"K/V head {g} of {whose}: the keys and values that query heads {g * G}-"
            f"{g * G + G - 1} share, computed once"
        )
        d.front.append(
            f'<g class="gf-ov-box gf-ov-kvbox" data-step="{site}.kv_head{g}"><title>{esc(title)}'
            f'</title><rect x="{gx:g}" y="{y + BOX_H - 5:g}" width="{gw:g}" height="3.5" rx="1" '
            f'fill="{"#7a5aa8" if cross else "#3f7cb8"}"/></g>'
        )


def _ffn_box(d: _Drawing, cfg: Config, block: str, rect) -> None:
    """The FFN box: C -> F -> C and the activation; a gated FFN with its three projections,
    each a box of its own step (the gate through the activation ⊙ the up projection, then the
    down projection)."""
    layer = block.split(".")[1]
    C, F, act = cfg.d_model, cfg.d_ff, ACTIVATION[cfg.activation]
    if cfg.ffn_kind != "gated":
        title = f"block {layer} FFN(x) = {act}(x·W1 + b1)·W2 + b2, on each token's row alone"
        d.box("ffn", f"{block}.ffn", rect, f"Feed-forward|{C} → {F} → {C}|{act}", title)
        return
    name, short = GATED[cfg.activation], act.split(" ")[0]
    title = (
        f"block {layer} gated FFN ({name}): FFN(x) = ({act}(x·W1) ⊙ x·W3)·W2, the gate W1 and "
        f"the up projection W3 {C} → {F}, the down projection W2 {F} → {C}, on each token's row "
        "alone"
    )
    d.box("ffn", f"{block}.ffn", rect, f"{name} FFN · F {F}", title, top=True)
    x, y, _, _ = rect
    parts = [
        ("gate", 54, f"{short}(x·W1)", f"the gate x·W1 ({C} → {F}), through {act}"),
        ("hidden", 14, "⊙", "hidden = the activated gate ⊙ the up projection, unit by unit"),
        ("up", 34, "x·W3", f"the up projection x·W3 ({C} → {F})"),
        ("out", 38, "→ ·W2", f"the down projection W2 ({F} → {C}): the FFN's output"),
    ]
    cx = x + 6
    for step, w, text, tip in parts:
        d.front.append(
            f'<g class="gf-ov-box gf-ov-ffnpart" data-step="{block}.ffn.{step}"><title>'
            f'{esc(tip)}</title><rect x="{cx:g}" y="{y + 20:g}" width="{w}" height="15" rx="3" '
            f'fill="{"#fff" if step == "hidden" else "#cbe7c6"}" stroke="{LINE}"/>'
            f'<text x="{cx + w / 2:g}" y="{y + 31:g}" font-size="9" text-anchor="middle">'
            f"{esc(text)}</text></g>"
        )
        cx += w + 4


def _band(d: _Drawing, stack: str, blocks: range, x, x0, right, sy) -> None:
    """The middle blocks of a deep stack: one clickable cell per block, on the stream."""
    n = len(blocks)
    cell = min(26.0, (right - x0 - 14) / n)
    d.back.append(
        f'<rect x="{x + 2:g}" y="{sy - 13:g}" width="{right - x - 2:g}" height="40" rx="6" '
        f'fill="{FILL["block"]}" stroke="#c9d0d8" stroke-dasharray="3 2"/>'
    )
    d.text(x + 6, sy + 1, "blocks", 11, bold=True)
    d.text(x + 6, sy + 14, f"{blocks[0]}–{blocks[-1]}", 11, bold=True)
    for k, i in enumerate(blocks):
        cx = x0 + 4 + k * cell
        label = f'<text x="{cx + (cell - 2) / 2:g}" y="{sy + 3:g}" font-size="9" '
        label += f'text-anchor="middle">{i}</text>'
        d.front.append(
            f'<g class="gf-ov-box gf-ov-cell" data-step="{stack}.{i}"><title>block {i}: the same '
            f"sublayers as block 0, with its own weights</title>"
            f'<rect x="{cx:g}" y="{sy - 8:g}" width="{max(cell - 2, 1):g}" height="16" rx="2" '
            f'fill="{FILL["cell"]}" stroke="{LINE}"/>{label if cell >= 14 else ""}</g>'
        )
    more = f"× {n} more blocks, each like block 0, with its own weights: click one"
    d.text(x0 + 4, sy + 22, more, 10, STREAM)


def _outputs(cfg: Config, stack: str, classes) -> list[tuple]:
    """What follows the last block of `stack`, on its stream: (kind, step, width, lines, title)."""
    C, V, n = cfg.d_model, cfg.vocab_size, cfg.n_classes
    tied = "tied: W_out = Eᵀ" if cfg.tie_embeddings else "untied: its own W_out"
    named = f": {', '.join(classes)}" if classes else ""
    norm = _norm(cfg)
    out = [("norm", f"{stack}.norm", 74, f"{norm}|final", f"the stream's final {norm}")]
    out = out if cfg.norm == "pre" else []
    if stack == "encoder" and cfg.arch == "encoder-decoder":
        m = "M, the encoder's output: the keys and values of every cross-attention"
        return [*out, ("memory", "encoder.output", 150, f"Encoder output M|S × {C}: K, V", m)]
    if stack == "decoder":
        logits = f"logits = h·W_out + b over the {V} tokens; the head is {tied}"
        probs = "softmax(logits): the distribution of the next token at each position"
        return [
            *out,
            ("head", "logits", 172, f"Output head: logits|{C} → {V}, {tied}", logits),
            ("head", "probs", 140, "softmax|next-token probabilities", probs),
        ]
    pooled = [("head", "pooled", 104, f"Mean pool|tokens → {C}", "the mean of the output rows")]
    if not n:
        unit = "pooled / ‖pooled‖: the sentence embedding"
        return [*out, *pooled, ("head", "embedding", 124, "Unit length|sentence embedding", unit)]
    return [
        *out,
        *pooled,
        ("head", "logits", 104, f"Classifier|{C} → {n}", f"logits = pooled·W + b{named}"),
        ("head", "probs", 116, "softmax|class probabilities", "softmax(logits), one per class"),
    ]


def _output_row(d: _Drawing, cfg: Config, stack: str, x0, sy, classes):
    """The boxes after the last block, on the stream. Returns the stream's end and, for an
    encoder-decoder's encoder, where the memory line leaves M."""
    x, memory = x0 + 4, None
    for n, (kind, step, w, lines, title) in enumerate(_outputs(cfg, stack, classes)):
        if n:
            d.arrow(x, sy, "right")
        d.box(kind, step, (x, sy - 15, w, 30), lines, title)
        memory = (x + w, sy) if kind == "memory" else memory
        x += w + 18
    return x - 18, memory


def _memory(d: _Drawing, memory, decoder: dict) -> None:
    """The encoder output M, wired to every cross-attention box drawn (from below)."""
    mx, my = memory
    bus = decoder["bus"]
    ys = [my] + [bottom + 5 for _, bottom in decoder["cross"]]
    d.wire(f"M{mx:g},{my:g}H{bus:g}", MEMORY, "5 3")
    d.wire(f"M{bus:g},{min(ys):g}V{max(ys):g}", MEMORY, "5 3")
    for cx, bottom in decoder["cross"]:
        d.wire(f"M{bus:g},{bottom + 5:g}H{cx:g}V{bottom + 6:g}", MEMORY, "5 3")
        d.arrow(cx, bottom, "up", MEMORY)
    d.text(bus + 3, my - 4, "M", 11, MEMORY, bold=True)


# -- the static report: the Config read back from the trace and the weights ---------------------


def report_overview(cfg: Config | None, steps) -> str:
    """The report's section: the drawing of the model `cfg`, each box a link to the first card of
    its steps ('' without a Config: a walkthrough). Boxes whose steps the report leaves out
    (--layers, --heads, --only) are drawn faded."""
    if cfg is None:
        return ""
    shown = {
        ".".join(parts[:n])
        for s in steps
        for parts in [s.name.split(".")]
        for n in range(1, len(parts) + 1)
    }
    svg = overview_svg(cfg).replace(f' xmlns="{SVG_NS}"', "", 1)  # inline: the page's own SVG
    for step in set(re.findall(r'data-step="([^"]+)"', svg)) - shown:
        svg = svg.replace(f'data-step="{step}"', f'data-step="{step}" data-off="1"')
    return (
        "<p>The model that made this trace, drawn from its configuration: click a box to go to "
        f"its steps below.</p><div class='gf-ov-wrap'>{svg}</div>"
    )
