"""Attention maps as PNG files: one heatmap per layer, head and kind, tokens on both axes.

Drawn with matplotlib's Agg renderer on a `Figure` of its own (no pyplot, no display, no global
backend switch). The maps and the layer/head choice are the HTML report's (`explain.html`), so
the PNGs and the report always show the same matrices, with the same readable token labels
(`tokenizer.display`). Returns the paths; printing is the CLI's.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from glassformer.errors import GlassformerError, install_hint, param
from glassformer.explain.html import SMALL
from glassformer.explain.html_pieces import WEIGHTS_SCALE
from glassformer.explain.select import KVGroups, attention_maps, head_of, select_steps
from glassformer.explain.values import rounded
from glassformer.tokenizer.display import display_tokens
from glassformer.trace import Trace

MAX_TICKS = 40  # more tokens than this: label every k-th


def write_attention_pngs(
    trace: Trace,
    out_dir: str | Path,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    token_kind: str | None = None,
) -> list[Path]:
    """Write `<step name>.png` for every attention map of the chosen layers and heads; token
    labels readable for a tokenizer of `token_kind` (`tokenizer.display_kind`)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise GlassformerError(
            f"{param('write_attention_pngs')} needs matplotlib: {install_hint('torch')}"
        ) from None
    maps = attention_maps(select_steps(trace, layers, heads))
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GlassformerError(f"cannot create {out}: {e.strerror}") from None
    paths, groups = [], KVGroups(trace.names())
    for m in maps:
        rows, cols = (
            None if x is None else display_tokens(x, token_kind) for x in trace.axis_labels(m.step)
        )
        A = np.asarray(m.step.values, dtype=np.float64)  # (queries, keys)
        n_rows, n_cols = (min(n, MAX_TICKS) for n in A.shape)
        size = (max(6.5, 2.5 + 0.3 * n_cols), max(4.0, 2.0 + 0.3 * n_rows))  # inches
        fig = Figure(figsize=size, dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        # The one colour rule of attention weights: the fixed 0..1 (as the report and explorer)
        image = ax.imshow(A, cmap="Blues", vmin=0.0, vmax=WEIGHTS_SCALE, aspect="auto")
        if max(A.shape) <= SMALL:  # small maps: the weights themselves, as in the HTML tables
            for (i, j), a in np.ndenumerate(A):
                ink = "white" if a > 0.55 * WEIGHTS_SCALE else "black"
                ax.text(j, i, rounded(a), ha="center", va="center", fontsize=8, color=ink)
        _ticks(ax.set_xticks, ax.set_xticklabels, cols, A.shape[1], rotation=90)
        _ticks(ax.set_yticks, ax.set_yticklabels, rows, A.shape[0])
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query (attending)")
        named = head_of(m.step.name)
        head = f" · head {m.head} (the article's head {named})" if named != m.head else ""
        shared = groups.kv_of(m.step.name)
        head += f" · reads K/V head {shared[1]}" if shared else ""
        head += " · Q and K turned by RoPE" * (m.step.name.replace(".A", ".Q_rot") in trace)
        fig.suptitle(f"{m.step.name}\n{m.kind}{head}", fontsize=10)
        fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
        path = out / (re.sub(r"[^A-Za-z0-9._-]", "_", m.step.name) + ".png")
        try:
            fig.savefig(path)
        except OSError as e:
            raise GlassformerError(f"cannot write {path}: {e.strerror}") from None
        paths.append(path)
    return paths


def _ticks(set_ticks, set_labels, labels, n: int, rotation: float = 0) -> None:
    step = max(1, -(-n // MAX_TICKS))
    where = list(range(0, n, step))
    set_ticks(where)
    names = [labels[i] if labels and i < len(labels) else str(i) for i in where]
    set_labels(names, rotation=rotation, fontsize=8)
