"""`explain --why [--versus TEXT]`: the explain report with why the model predicted what it did,
in three exact parts (issue 40, point 6): for a translator, why beam search kept its translation
over the runner-up (or over `--versus`) at the step where they parted (`Model.explain_choice`);
the attribution graph of that step's logit difference, or of a decoder's or classifier's top
prediction (`Model.circuit`); and why the head that wrote most of it attends where it does
(`Model.qk`). Each adds up to the model's own number; the report's page draws them offline.

The work is the Model's; here are the options, which parts a model gets, and the text printed.
"""

from __future__ import annotations

from glassformer.errors import GlassformerError


def add_arguments(p) -> None:
    p.add_argument(
        "--why",
        action="store_true",
        help="add why it predicted that: a translator's choice over the runner-up translation "
        "(at the step they parted), the exact attribution graph of that logit difference (a "
        "decoder's or classifier's top prediction), and why its strongest head attends there",
    )
    p.add_argument(
        "--versus",
        metavar="TEXT",
        help="with --why, a translator: the translation the kept one is compared with (default: "
        "the beam's runner-up)",
    )


def check(args, cfg) -> None:
    """Refused before any work: --versus without --why, or on a model that does not translate,
    and --why with a decoder text of the user's (it explains the model's own translation)."""
    if args.versus is not None and not args.why:
        raise GlassformerError("--versus is --why's other translation: add --why, or drop it")
    if not args.why:
        return
    if args.versus is not None and cfg.arch != "encoder-decoder":
        raise GlassformerError(
            f"--versus compares two translations; this model is a {cfg.arch}: drop it"
        )
    if cfg.arch == "encoder-decoder" and args.target is not None:
        raise GlassformerError(
            "--why explains the model's own translation, so --target does nothing with it: drop "
            "--target (or use glassformer circuit MODEL TEXT --decoder TEXT)"
        )


def why(args, m) -> dict:
    """{"choice" (a translator's), "circuit", "qk"} as their commands' JSON."""
    out, how = {}, {}
    if m.cfg.arch == "encoder-decoder":
        choice = m.explain_choice(args.text, versus=args.versus).to_dict()
        out["choice"] = choice
        how["decoder"] = choice["kept"]["text"]
        part = choice.get("parting")
        if part is not None:  # the step they parted: its logit difference
            how |= dict(position=part["position"], target=f"#{part['token_id']}")
            how["versus"] = f"#{part['versus_id']}"
    elif m.cfg.arch == "decoder":
        how["position"] = -1
    out["circuit"] = m.circuit(args.text, threshold=0.05, **how).to_dict()  # a readable drawing
    head = _strongest_head(out["circuit"]["graph"])
    if head is not None:
        name, position = head
        at = dict(query=position, decoder=how.get("decoder"))
        out["qk"] = m.qk(args.text, name, **at).to_dict()
    return out


def _strongest_head(graph: dict) -> tuple[str, int] | None:
    """(head, position) of the head node with the largest direct edge into the logit (of the
    largest total effect where no head's direct edge was kept)."""
    direct = {e["from"]: abs(e["weight"]) for e in graph["edges"] if e["to"] == "logit"}
    heads = [n for n in graph["nodes"] if n["kind"] == "head"]
    if not heads:
        return None
    best = max(heads, key=lambda n: (direct.get(n["name"], 0.0), abs(n["value"])))
    return best["name"].split("@")[0], best["position"]


def render(d: dict) -> str:
    """The text of --why: each part as its own command prints it."""
    from glassformer.cli.choice import choice_text
    from glassformer.cli.probe import circuit_text, qk_text

    parts = [choice_text(d["choice"])] if "choice" in d else []
    parts.append(circuit_text(d["circuit"]))
    if "qk" in d:
        parts.append(qk_text(d["qk"]))
    return "\n\n".join(parts)
