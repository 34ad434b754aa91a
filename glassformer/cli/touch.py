"""`explain --ablate` and `explain --patch-from`: the explain report of a run beside the same run
with steps switched off, or with each head patched in from another input (activation patching).

The work is `Model.ablate` / `Model.patch`'s (`glassformer/touch.py`); here are the options and
the printed outcome: per position, the token the model predicts with and without the ablation
and how far the logits moved; for patching, a layers x heads table per attention kind of how
much of the clean run's logit difference each head restores.
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
        for r in a["positions"]:
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
        lines.append(
            f"patching each head from “{p['clean']}” (clean) into this run, after "
            f"{p['after_token']} (position {p['position']}), metric {p['metric']}: "
            "0 = no effect, 1 = the clean value restored"
        )
        for kind, table in p["tables"].items():
            lines.append(f"  {kind}" + "".join(f"{c:>9}" for c in table["cols"]))
            for row, values in zip(table["rows"], table["values"], strict=True):
                lines.append(f"  {row:<9}" + "".join(f"{v:>9.3f}" for v in values))
    return "\n".join(lines)
