"""`explain --ablate` and `explain --patch-from`: the explain report of a run beside the same run
with steps switched off, or with each head patched in from another input (activation patching).

The work is `Model.ablate` / `Model.patch`'s (`glassformer/inspect/touch.py`); here are the options
and the printed outcome: per position, the token the model predicts with and without the ablation
and how far the logits moved; for patching, a layers x heads table per attention kind of how
much of the clean run's logit difference each head restores. A classifier's are its classes'
probabilities before and after, by name, and its patching metric is the logit of the clean run's
class minus that of this run's.
"""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument(
        "--ablate",
        action="append",
        default=[],
        metavar="NAME",
        help="zero-ablate a head (decoder.1.self_attn.head0), a whole attention or FFN sublayer "
        "(decoder.1.cross_attn, encoder.0.ffn) or any trace step or glob, and show the run beside "
        "the original (repeatable)",
    )
    p.add_argument(
        "--patch-from",
        metavar="TEXT",
        help="activation patching: patch each head's output from a run on TEXT (the clean run) "
        "into this one, and show how much of the clean run's prediction each head restores",
    )


def render(result: dict) -> str:
    """The text report of --ablate and --patch-from."""
    lines = []
    if "ablation" in result:
        a = result["ablation"]
        lines.append(f"with {', '.join(a['ablated'])} ablated ({len(a['steps'])} steps zeroed):")
        lines += [f"  {note}" for note in a.get("notes", [])]
        if "classes" in a:  # a classifier: its one prediction, each class's probability
            lines += classes(a["classes"])
        for r in a.get("positions", []):
            mark = "  <- changed" if r["changed"] else ""
            lines.append(
                f"  after {r['after_token']!s:>10}: predicts {r['predicted']!s:>10} -> "
                f"{r['predicted_ablated']!s:<10} (logits move by up to "
                f"{r['max_logit_change']:.3f}){mark}"
            )
        if "text_ablated" in a:
            lines.append(f"  output with the ablation: “{a['text_ablated']}”")
    if "patching" in result:
        p = result["patching"]
        where = f"after {p['after_token']} (position {p['position']}), " if "position" in p else ""
        lines.append(
            f"patching each head from “{p['clean']}” (clean) into this run, {where}"
            f"metric {p['metric']}: 0 = no effect, 1 = the clean value restored"
        )
        for kind, table in p["tables"].items():
            lines.append(f"  {kind}" + "".join(f"{c:>9}" for c in table["cols"]))
            for row, values in zip(table["rows"], table["values"], strict=True):
                lines.append(f"  {row:<9}" + "".join(f"{v:>9.3f}" for v in values))
        if "classes" in p:
            lines.append(
                "  each class's probability in this run (before) and the clean run (after):"
            )
            lines += classes(p["classes"])
    return "\n".join(lines)


def classes(rows: list[dict]) -> list[str]:
    """A classifier's class probabilities before and after, one row per class, and the class
    it predicts before and after."""
    width = max(12, *(len(r["label"]) for r in rows))
    out = [f"  {'class':<{width}}  {'before':>8}  {'after':>8}  {'change':>8}"]
    for r in rows:
        p, q, d = r["before"], r["after"], r["change"]
        out.append(f"  {r['label']:<{width}}  {p:>8.4f}  {q:>8.4f}  {d:>+8.4f}")
    top = [max(rows, key=lambda r: r[k])["label"] for k in ("before", "after")]
    said = "unchanged" if top[0] == top[1] else "changed"
    out.append(f"  predicts {top[0]} -> {top[1]} ({said})")
    return out
