"""`translate --explain-choice` and `generate --explain-choice`: why beam search kept its best
hypothesis (`Model.explain_choice`), printed, or written with --json / --html. The options join
the two commands' parsers (`add_args`); the work is `glassformer.inspect.choice`'s.

Deliberately not here: the beam search, the splits (`inspect/choice.py`), the HTML
(`explain/html_choice.py`).
"""

from __future__ import annotations

import json

from glassformer.cli.common import check_report_outputs, load_model, write_outputs
from glassformer.cli.flags import said
from glassformer.errors import GlassformerError

TOP = 4  # parts named per line; the rest summed


def add_args(p) -> None:
    """--explain-choice and its options, on translate's or generate's parser."""
    g = p.add_argument_group(
        "why this choice",
        "With --explain-choice: beam search on the reference engine (float64), then why it kept "
        "its best hypothesis: each step's token against the runner-up token, and against a "
        "dropped hypothesis (the n-best runner-up, or --versus) the step where they parted; "
        "each log-probability gap split exactly into heads and FFNs and into source and target "
        "tokens (pre-LN models).",
    )
    g.add_argument(
        "--explain-choice", action="store_true", help="explain the choice instead of printing"
    )
    g.add_argument(
        "--versus",
        metavar="TEXT",
        help="with --explain-choice: the dropped hypothesis's text, decoded by force (default: "
        "the n-best list's runner-up)",
    )
    g.add_argument("--json", metavar="FILE", help="write the explanation as JSON ('-': stdout)")
    g.add_argument("--html", metavar="FILE", help="write it as a self-contained HTML page")


def given(args) -> bool:
    """Whether --explain-choice was asked for; its options are refused without it, and steering
    with it (the choice explained is the model's own)."""
    if args.explain_choice:
        steer = [f for f in ("steer", "steer_vector") if getattr(args, f, None) is not None]
        if steer:
            flag = "--" + steer[0].replace("_", "-")
            raise GlassformerError(
                f"{flag} does not go with --explain-choice (it explains the model's own choice): "
                "drop one"
            )
        return True
    extra = [f for f, v in (("--versus", args.versus), ("--json", args.json)) if v is not None]
    extra += ["--html"] if args.html is not None else []
    if extra:
        raise GlassformerError(f"{extra[0]} goes with --explain-choice: add it, or drop {extra[0]}")
    return False


def cmd_translate(args) -> int:
    """translate --explain-choice: one sentence, the beam of --beam."""
    if args.input is not None or len(args.text) != 1:
        raise GlassformerError("--explain-choice explains one sentence: give one TEXT")
    for flag, v in (("--n-best", args.n_best), ("--alignments", args.alignments)):
        if v is not None:
            raise GlassformerError(f"{flag} does not go with --explain-choice: drop it")
    args.png = None
    check_report_outputs(args)
    m = load_model(args.checkpoint)
    if m.cfg.arch != "encoder-decoder":
        raise GlassformerError(
            f"translate needs an encoder-decoder; {args.checkpoint} is "
            f"{'a decoder' if m.cfg.arch == 'decoder' else 'an encoder'} (a decoder's choices: "
            "generate --explain-choice)"
        )
    out = m.explain_choice(args.text[0], versus=args.versus, beam=args.beam)
    return _write(args, args.text[0], out)


def cmd_generate(args, how) -> int:
    """generate --explain-choice: greedy (a beam of 1) or --strategy beam."""
    if args.input is not None or args.text is None:
        raise GlassformerError("--explain-choice explains one text: give TEXT, not --input")
    if how.strategy == "sample":
        raise GlassformerError(
            "--explain-choice explains beam search (or greedy decoding): sampling draws its "
            "tokens, so drop the sampling options"
        )
    if args.record is not None:
        raise GlassformerError("--record does not go with --explain-choice: drop it")
    args.png = None
    check_report_outputs(args)
    m = load_model(args.checkpoint)
    width = how.beam_width if how.strategy == "beam" else 1
    options = dict(beam=width, length_penalty=how.length_penalty)
    out = m.explain_choice(
        args.text, versus=args.versus, max_new_tokens=how.max_new_tokens, **options
    )
    return _write(args, args.text, out)


def _write(args, text: str, out) -> int:
    if out.note:  # in the command line's words, printed or written
        out.note = said(out.note)
    d = out.to_dict()

    def page() -> str:
        from glassformer.explain import html_choice, html_touch

        meta = {"checkpoint": args.checkpoint, "input": text}
        sections = [("choice", "Why this choice", html_choice.choice_section(d))]
        return html_touch.probe_page(f"glassformer: why “{d['kept']['text']}”", meta, sections)

    what = f"the explanation of {len(d['steps'])} steps"
    html = page() if args.html else None
    write_outputs(args, lambda: choice_text(d), data=out, data_what=what, page=html)
    return 0


# -- the printed form --------------------------------------------------------------------------


def choice_text(d: dict) -> str:
    lines = []
    if "parting" in d:
        p = d["parting"]
        by = "the n-best runner-up" if d["dropped_by"] == "runner-up" else "--versus"
        kept, dropped = d["kept"], d["dropped"]
        lines.append(
            f"kept {_q(kept['text'])} over {_q(dropped['text'])} ({by}) at step {p['step']}: "
            f"{_split(p)}"
        )
        before = p["context"]
        lp = (kept["logprobs"][p["step"]], dropped["logprobs"][p["step"]])
        lines.append(
            f"  after {_q(before) if before else 'the start'}: {p['token']} (log p {lp[0]:.4f}) "
            f"over {p['versus']} (log p {lp[1]:.4f}); the same gap from the two hypotheses' own "
            f"log-probabilities: {p['logprob_gap']:+.4f}"
        )
        lines.append("  by token: " + _tokens(p))
        alpha = d["length_penalty"]
        lines.append(
            f"  final scores (log p / n^{alpha:g}): {kept['score']:.4f} over {dropped['score']:.4f}"
            f", {d['score_gap']:+.4f} (log p {kept['logprob']:.4f} over {dropped['logprob']:.4f})"
        )
        ranks = d["beam_ranks"]
        lines.append(
            "  rank in the beam after each step (0: the likeliest; - not in it; end: finished): "
            f"kept {_ranks(ranks, 'kept')}; dropped {_ranks(ranks, 'dropped')}"
        )
    if d.get("note"):
        lines.append(f"note: {d['note']}")
    lines.append(f"each step of {_q(d['kept']['text'])}: its token over the runner-up token")
    for s in d["steps"]:
        lines.append(f"  step {s['step']}: {s['token']} over {s['versus']} {_split(s)}")
    lines.append(f"largest gap between a sum of parts and the model's number: {d['error']:.1e}")
    return "\n".join(lines)


def _q(text: str) -> str:
    """A text in quotes, a newline inside it as \\n."""
    return json.dumps(text, ensure_ascii=False)


def _split(s: dict, top: int = TOP) -> str:
    """+gap = the largest parts, the rest summed (sum of parts, error)."""
    parts = s["parts"]
    named = [f"{_part(p)} {p['value']:+.4f}" for p in parts[:top]]
    rest = parts[top:]
    if rest:
        others = "other" if len(rest) == 1 else "others"
        named.append(f"{len(rest)} {others} {sum(p['value'] for p in rest):+.4f}")
    return (
        f"{s['gap']:+.4f} = " + ", ".join(named) + f" (sum of parts {s['sum']:.4f}, error "
        f"{s['error']:.0e})"
    )


def _part(p: dict) -> str:
    """A component as the text says it: a head with the token it read most."""
    if p.get("reads"):
        r = p["reads"][0]
        return f"{p['name']} reading {r['token']}"
    return p["name"]


def _tokens(s: dict, top: int = 6) -> str:
    words = [
        f"{'source' if t['stack'] == 'encoder' else 'target'} {t['token']} {t['value']:+.4f}"
        for t in s["tokens"][:top]
    ]
    rest = s["tokens"][top:]
    if rest:
        words.append(f"{len(rest)} more {sum(t['value'] for t in rest):+.4f}")
    return ", ".join(words) + f", constants {s['constants']:+.4f}"


def _ranks(ranks: list[dict], who: str) -> str:
    said = {None: "-", "finished": "end"}
    return " ".join(said.get(r[who], str(r[who])) for r in ranks)
