"""Terminal rendering of a trace: each step as a titled, labelled matrix.

    encoder.0.self_attn.head0.A   A = softmax(Ω / √c) row by row   (2, 2)
                Hello        World
    Hello   4.677e-10            1
    World   1.114e-12            1

Returns strings; printing is the CLI's job. Big matrices are cut to `max_rows` x `max_cols`; a
tensor of 3 or more axes is shown as its matrices over the last two axes, each under its index.
Token labels are shown readable (`tokenizer.display`: a space is ␣, a newline ⏎). An explain
report opens with how its input was split into tokens (`render_tokens`) and closes with what the
model made of it (`render_result`).
"""

from __future__ import annotations

import numpy as np

from glassformer.arguments import entry
from glassformer.explain.select import containing
from glassformer.tokenizer.display import display_tokens
from glassformer.trace import Step, Trace


def format_number(v: float, digits: int = 6) -> str:
    if isinstance(v, bool | np.bool_):
        return "T" if v else "."
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "-inf" if v < 0 else "inf"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-4:
        return f"{v:.{max(digits - 2, 1)}e}"
    return f"{v:.{digits}g}"


def render_matrix(
    values: np.ndarray,
    rows=None,
    cols=None,
    max_rows: int = 12,
    max_cols: int = 10,
    digits: int = 6,
) -> str:
    """A vector or matrix as aligned text with optional row and column labels."""
    v = np.asarray(values)
    if v.ndim == 0:
        return format_number(v.item(), digits)
    if v.ndim == 1:
        v, rows = v[None, :], None
    if v.ndim > 2:
        return _render_slices(v, rows, cols, max_rows, max_cols, digits)
    n_r, n_c = v.shape
    show_r, show_c = min(n_r, max_rows), min(n_c, max_cols)
    cells = [[format_number(x, digits) for x in row[:show_c]] for row in v[:show_r]]
    if show_c < n_c:
        for row in cells:
            row.append("…")
    head = [str(c) for c in cols[:show_c]] + (["…"] if show_c < n_c else []) if cols else None
    labels = [str(r) for r in rows[:show_r]] if rows else [""] * show_r
    width = max([len(c) for row in cells for c in row] + [len(h) for h in head or []] + [1])
    lw = max((len(x) for x in labels), default=0)
    lines = []
    if head:
        lines.append(" " * lw + "  " + "  ".join(h[:width].rjust(width) for h in head))
    for label, row in zip(labels, cells, strict=True):
        lines.append(label.ljust(lw) + "  " + "  ".join(c.rjust(width) for c in row))
    if show_r < n_r:
        lines.append(f"… {n_r - show_r} more rows")
    return "\n".join(lines)


def _render_slices(v: np.ndarray, rows, cols, max_rows, max_cols, digits, max_slices=8) -> str:
    """A batched tensor (B, T, D), (B, H, T, T), ... as its last-two-axes matrices, each under
    its index ([0], [0, 1], ...); the labels are those of the last two axes."""
    out = []
    for k, idx in enumerate(np.ndindex(*v.shape[:-2])):
        if k == max_slices:
            out.append(f"… {int(np.prod(v.shape[:-2])) - k} more matrices")
            break
        body = render_matrix(v[idx], rows, cols, max_rows, max_cols, digits)
        out.append(f"[{', '.join(map(str, idx))}]\n{_indent(body, '  ')}")
    return "\n".join(out)


def render_step(step: Step, rows=None, cols=None, **kw) -> str:
    title = f"{step.name}   {step.equation}   {step.shape}".rstrip()
    body = render_matrix(step.values, rows, cols, **kw)
    note = f"\n  {step.note}" if step.note else ""
    return f"{title}{note}\n{_indent(body)}"


@entry  # every argument against glassformer.arguments' table (`render.*` rows)
def render(
    trace: Trace,
    only: str | None = None,
    narrated: bool = False,
    token_kind: str | None = None,
    **kw,
) -> str:
    """Every step (or those whose name contains `only`, or only the narrated steps: those with a
    note), separated by blank lines; token labels readable for a tokenizer of `token_kind`. An
    `only` that no step name contains is refused, naming the closest (as `explain --only`)."""
    steps = [s for s in containing(trace, only, f"only={only!r}") if not narrated or s.note]

    def labels(s: Step):
        return [None if x is None else display_tokens(x, token_kind) for x in trace.axis_labels(s)]

    return "\n\n".join(render_step(s, *labels(s), **kw) for s in steps)


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def render_tokens(tokens: dict[str, dict], token_kind: str | None = None, width: int = 100) -> str:
    """How the input was split: per stack, {"what": words, "ids": [...], "pieces": [...]} as
    each readable token over its id, in rows of at most `width` characters."""
    out = []
    for stack, t in tokens.items():
        words = display_tokens(t["pieces"], token_kind)
        n = len(words)
        out.append(f"{t['what']}: {n} token{'s' * (n != 1)} ({stack})")
        cells = [(w, str(i)) for w, i in zip(words, t["ids"], strict=True)]
        while cells:  # rows of cells that fit in `width`
            k, used = 0, 8
            while k < len(cells) and (k == 0 or used + max(map(len, cells[k])) + 2 <= width):
                used += max(map(len, cells[k])) + 2
                k += 1
            row, cells = cells[:k], cells[k:]
            sizes = [max(len(w), len(i)) for w, i in row]
            for name, n in (("token", 0), ("id", 1)):
                shown = "  ".join(c[n].rjust(size) for c, size in zip(row, sizes, strict=True))
                out.append(f"  {name:<6}{shown}")
    return "\n".join(out)


def render_result(result: dict) -> str:
    """The report's last words: what the model made of the input (`result["summary"]`), with a
    classifier's probability of every class."""
    lines = [f"Result: {result['summary']}"]
    for label, p in (result.get("probabilities") or {}).items():
        lines.append(f"  {label:<12} {p:.4f}")
    return "\n".join(lines)
