"""Probing a model: `lens` (each layer's residual stream read through the output head, and each
head's direct share of a chosen logit), `circuit` (the exact attribution graph of one logit),
`qk` (one attention score split by what wrote the query and the key) and `attribute` (how much
each input token contributes to each predicted token, by integrated gradients or gradient x
input). The work is `glassformer.inspect`'s (lens, circuit, qk, attribution); here are the
options and the printing.
"""

from __future__ import annotations

import numpy as np

from glassformer.cli import faithfulness
from glassformer.cli.common import (
    check_report_outputs,
    load_model,
    option_type,
    overwrite_arg,
    threads_arg,
    write_outputs,
)
from glassformer.cli.flags import said
from glassformer.errors import GlassformerError
from glassformer.inspect.attribution import MAX_STEPS


def add_parsers(sub) -> None:
    _lens_parser(sub)
    _circuit_parser(sub)
    _qk_parser(sub)
    _attribute_parser(sub)


def _lens_parser(sub) -> None:
    lens = sub.add_parser(
        "lens",
        help="the logit lens: what each layer would predict, position by position",
        description="Run TEXT through the reference engine and read the decoder's residual "
        "stream after the embeddings and after every block through the final norm and the "
        "output head: the top tokens each layer would predict at each position. With --dla, "
        "each head's direct share of one token's logit (pre-LN models).",
    )
    _model_text_args(lens)
    lens.add_argument("--k", type=option_type("k"), default=3, help="top tokens shown (3)")
    lens.add_argument("--sublayers", action="store_true", help="also after each attention sublayer")
    lens.add_argument("--dla", metavar="TOKEN", help="direct logit attribution of this token")
    lens.add_argument("--versus", metavar="TOKEN", help="... minus this token's logit")
    lens.add_argument(
        "--position",
        type=int,
        default=None,
        help="the position --dla explains, counted from 0 (-1: the last, the default)",
    )
    lens.set_defaults(func=cmd_lens)


def _circuit_parser(sub) -> None:
    c = sub.add_parser(
        "circuit",
        help="why it predicted that: the exact attribution graph of one logit",
        description="Run TEXT through the reference engine and, with this input's attention "
        "patterns, norm scales and feed-forward gates frozen, split one logit into the paths "
        "from the token embeddings and positions through every head and FFN: nodes with their "
        "total effect, edges with what one node writes into what another reads; the edges add "
        "up to the logit exactly (pre-LN models).",
    )
    c.add_argument("checkpoint", help="a checkpoint or Hugging Face folder")
    c.add_argument("text", help="input text (the source, for an encoder-decoder)")
    c.add_argument(
        "--target",
        metavar="TOKEN",
        help="the token (a class) explained, or #ID: default the top one",
    )
    c.add_argument("--versus", metavar="TOKEN", help="... minus this token's logit (or #ID's)")
    c.add_argument(
        "--position", type=int, default=None, help="the position explained (default the last)"
    )
    c.add_argument(
        "--decoder", help="decoder text for an encoder-decoder (default: its greedy translation)"
    )
    c.add_argument(
        "--threshold",
        type=option_type("threshold"),
        default=0.02,
        help="leave out nodes and edges under this share of |logit| (0.02)",
    )
    c.add_argument(
        "--neurons",
        metavar="K",
        type=option_type("neurons"),
        default=0,
        help="split each FFN node into its K hidden units of largest effect (and the rest)",
    )
    _output_args(c, "the graph")
    c.set_defaults(func=cmd_circuit)


def _qk_parser(sub) -> None:
    q = sub.add_parser(
        "qk",
        help="why a head attends there: its score split by what wrote the query and the key",
        description="Run TEXT through the reference engine and split one attention score "
        "Ω[i, j] = q_i·k_j of HEAD into a table over the parts that wrote the query's and the "
        "key's residual streams (token embeddings, positions, each earlier head and FFN, the "
        "constants); the entries add up to Ω[i, j] exactly (pre-LN models).",
    )
    q.add_argument("checkpoint", help="a checkpoint or Hugging Face folder")
    q.add_argument("text", help="input text (the source, for an encoder-decoder)")
    q.add_argument("head", help="the head, as STACK.LAYER.KIND.headH: decoder.1.cross_attn.head0")
    q.add_argument("--query", type=int, default=None, help="the query's position (the last)")
    q.add_argument(
        "--key", type=int, default=None, help="the key's position (where the head looks most)"
    )
    q.add_argument(
        "--decoder", help="decoder text for an encoder-decoder (default: its greedy translation)"
    )
    _output_args(q, "the table")
    q.set_defaults(func=cmd_qk)


def _attribute_parser(sub) -> None:
    at = sub.add_parser(
        "attribute",
        help="which input tokens each predicted token comes from (integrated gradients)",
        description="Predict greedily from TEXT (a decoder continues it; an encoder-decoder "
        "translates it) and attribute each predicted token's logit to the input tokens, in the "
        "PyTorch engine (float64): integrated gradients with its completeness error, or "
        "gradient x input.",
    )
    _model_text_args(at)
    at.add_argument(
        "--method",
        choices=["integrated_gradients", "gradient_x_input"],
        default="integrated_gradients",
    )
    at.add_argument(
        "--steps",
        type=option_type("attribute.steps"),
        default=None,
        help=f"integrated gradients' nodes (default 64, at most {MAX_STEPS})",
    )
    at.add_argument(
        "--max-new-tokens",
        type=option_type("max_new_tokens"),
        default=None,
        help="a decoder's predicted tokens to explain (5)",
    )
    at.add_argument(
        "--baseline",
        metavar="TOKEN",
        default=None,
        help="integrated gradients' baseline: this token's embedding at every position (a piece "
        "as the vocabulary spells it, or #ID; default: every embedding zero, which a model "
        "with no position vectors cannot integrate from)",
    )
    faithfulness.add_to_attribute(at)
    at.set_defaults(func=cmd_attribute)


def _model_text_args(p) -> None:
    p.add_argument("checkpoint", help="a checkpoint or Hugging Face folder")
    p.add_argument("text", help="input text (the source, for an encoder-decoder)")
    p.add_argument(
        "--target", help="decoder text for an encoder-decoder (default: its greedy translation)"
    )
    _output_args(p, "the result")


def _output_args(p, what: str) -> None:
    """--json and --html (no PNG), --overwrite and --threads, as every probe takes them."""
    p.add_argument("--json", metavar="FILE", help=f"write {what} as JSON to FILE ('-' stdout)")
    p.add_argument(
        "--html", metavar="FILE", help=f"write {what} as a self-contained HTML page ('-' stdout)"
    )
    overwrite_arg(p)
    threads_arg(p)
    p.set_defaults(png=None)


def _meta(args, cfg) -> dict[str, str]:
    meta = {"checkpoint": args.checkpoint, "input": args.text}
    if args.target is not None:
        meta["target"] = args.target
    return meta | {"model": f"{cfg.arch}, d_model {cfg.d_model}, {cfg.n_heads} heads"}


def cmd_lens(args) -> int:
    check_report_outputs(args)
    m = load_model(args.checkpoint)
    options = dict(k=args.k, sublayers=args.sublayers, dla=args.dla, versus=args.versus)
    result = m.lens(args.text, target=args.target, position=args.position, **options)

    def page() -> str:
        from glassformer.explain import html_touch as H

        sections = [("lens", "The logit lens", H.lens_section(result.to_dict()))]
        if args.dla is not None:
            sections.append(("dla", "Direct logit attribution", H.dla_section(result.dla)))
        return H.probe_page(f"glassformer lens: “{args.text}”", _meta(args, m.cfg), sections)

    def text() -> str:
        parts = [_lens_text(result.lens, result.input)]
        return "\n".join(parts + ([_dla_text(result.dla)] if args.dla is not None else []))

    what = f"the logit lens of {len(result.lens['points'])} points"
    write_outputs(
        args, text, data=result, data_what=what, page=args.html and page(), page_what=what
    )
    return 0


def _lens_text(table: dict, words: list[str]) -> str:
    """One row per residual stream, one column per position: the top token and its probability
    (the next token predicted after that position)."""
    width = max(8, *(len(w) for w in words))
    label_w = max(len(label) for label in table["labels"])
    head = " " * label_w + "  " + " ".join(f"{w:>{width + 6}}" for w in words)
    lines = ["logit lens: the token each layer would predict after each position", head]
    for r, label in enumerate(table["labels"]):
        cells = [
            f"{table['top_tokens'][r][t][0]:>{width}} {table['top_probs'][r][t][0]:5.2f}"
            for t in range(len(words))
        ]
        lines.append(f"{label:<{label_w}}  " + " ".join(cells))
    return "\n".join(lines)


def _dla_text(d: dict) -> str:
    what = repr(d["token"]) + (f" minus {d['versus']!r}" if d["versus"] else "")
    lines = [
        f"direct logit attribution of {what} at position {d['position']} "
        f"(final {d['norm']} scale frozen at {d['scale']:.4g}):",
        "  " + " " * 16 + "".join(f"{c:>10}" for c in d["cols"]),
    ]
    for row, values in zip(d["rows"], d["heads"], strict=True):
        lines.append(f"  {row:<16}" + "".join(f"{v:>10.4f}" for v in values))
    for name, v in d["other"].items():
        lines.append(f"  {name:<16}{v:>10.4f}")
    lines.append(f"  sum of the parts {d['total']:.6f} = the model's logit {d['logit']:.6f}")
    return "\n".join(lines)


def cmd_circuit(args) -> int:
    check_report_outputs(args)
    m = load_model(args.checkpoint)
    options = dict(target=args.target, versus=args.versus, position=args.position)
    options |= dict(decoder=args.decoder, threshold=args.threshold, neurons=args.neurons)
    out = m.circuit(args.text, **options)

    def page() -> str:
        from glassformer.explain import html_touch as H

        meta = {"checkpoint": args.checkpoint, "input": args.text}
        body = H.circuit_section(out.to_dict())
        title = f"glassformer circuit: “{args.text}”"
        return H.probe_page(title, meta, [("circuit", "The attribution graph", body)])

    def text() -> str:
        return circuit_text(out.to_dict())

    what = f"the graph of {out.graph['kept']['nodes']} nodes"
    html = page() if args.html else None
    write_outputs(args, text, data=out, data_what=what, page=html, page_what=what)
    return 0


def circuit_text(d: dict, top: int = 12) -> str:
    g = d["graph"]
    what = repr(d["token"]) + (f" minus {d['versus']!r}" if d.get("versus") else "")
    kept = g["kept"]
    nodes = sorted(g["nodes"][:-2], key=lambda n: -abs(n["value"]))[:top]
    edges = sorted((e for e in g["edges"]), key=lambda e: -abs(e["weight"]))[:top]
    lines = [
        f"the attribution graph of {what}: {g['target']}",
        f"  the model's logit {g['logit']:.6f}; every node's incoming edges add up to its value "
        f"(largest gap {g['error']:.1e})",
        f"  kept {kept['nodes']} of {kept['of']} nodes and {kept['edges']} edges of at least "
        f"{d['threshold']:g}·|logit|: their direct edges carry {kept['share']:.1%} of the logit",
        "  nodes by their total effect on the logit:",
    ]
    lines += [f"    {_node(n):<40}{n['value']:>+12.4f}" for n in nodes]
    lines.append("  edges (what one writes into what another reads):")
    shown = {n["name"]: _node(n) for n in g["nodes"]}
    for e in edges:
        lines.append(f"    {shown[e['from']]:<36} -> {shown[e['to']]:<36}{e['weight']:>+11.4f}")
    return "\n".join(lines)


def _node(n: dict) -> str:
    """A node as the text says it: its name and, at a position, the token read there."""
    return n["name"] + (f" ({n['token']})" if "token" in n else "")


def cmd_attribute(args) -> int:
    import torch  # noqa: F401 (attribution runs in the PyTorch engine: say so before the work)

    if args.faithfulness:
        return faithfulness.from_attribute(args)
    if args.png:
        raise GlassformerError("--png draws --faithfulness's curves: give --faithfulness too")
    check_report_outputs(args)
    m = load_model(args.checkpoint)
    options = dict(
        method=args.method,
        steps=args.steps,
        max_new_tokens=args.max_new_tokens,
        baseline=args.baseline,
    )
    out = m.attribute(args.text, target=args.target, **options)
    if out.note:  # in the command line's words, printed or written
        out.note = said(out.note)

    def page() -> str:
        from glassformer.explain import html_touch as H

        title = f"glassformer attribute: “{args.text}”"
        body = H.attribution_section(out.to_dict())
        return H.probe_page(title, _meta(args, m.cfg), [("attribution", "Attribution", body)])

    def text() -> str:
        return _attribution_text(out.to_dict())

    what = f"the attributions of {len(out.predicted)} tokens"
    html = page() if args.html else None
    write_outputs(args, text, data=out, data_what=what, page=html, page_what=what)
    return 0


def _attribution_text(out: dict) -> str:
    inputs, predicted = out["input"], out["predicted"]
    width = max(7, *(len(w) for w in inputs))
    method = out["method"].replace("_", " ")
    lines = [f"{method}: each predicted token's logit, shared among the input tokens"]
    if out.get("baseline"):
        lines[0] += f" (baseline: the embedding of {out['baseline']} at every position)"
    lines.append(" " * 14 + " ".join(f"{w:>{width}}" for w in inputs))
    scores = np.asarray(out["scores"])[:, : len(inputs)]
    for i, word in enumerate(predicted):
        row = " ".join(f"{v:>{width}.3f}" for v in scores[i])
        extra = ""
        if out["completeness"] is not None:
            change = out["f"][i] - out["f_baseline"][i]
            base = "f(baseline)" if out.get("baseline") else "f(0)"
            extra = f"   sum {scores[i].sum():.4f} = f(x) - {base} {change:.4f}"
            extra += f" (error {out['completeness'][i]:.1e})"
        lines.append(f"-> {word:<10} {row}{extra}")
    if out.get("note"):
        lines.append(out["note"])
    return "\n".join(lines)


def cmd_qk(args) -> int:
    check_report_outputs(args)
    m = load_model(args.checkpoint)
    out = m.qk(args.text, args.head, query=args.query, key=args.key, decoder=args.decoder)
    d = out.to_dict()
    what = f"the table of {d['head']}'s score from query {d['i']} to key {d['j']}"

    def page() -> str:
        from glassformer.explain import html_touch as H

        meta = {"checkpoint": args.checkpoint, "input": args.text}
        title = f"glassformer qk: “{args.text}”"
        return H.probe_page(title, meta, [("qk", "Why this head attends there", H.qk_section(d))])

    html = page() if args.html else None
    write_outputs(args, lambda: qk_text(d), data=out, data_what=what, page=html, page_what=what)
    return 0


def qk_text(d: dict, top: int = 8) -> str:
    """`glassformer qk`'s printout: the pair, its score and weight, the largest entries."""
    lines = [
        f"{d['head']}: query {d['i']} ({d['query_token']}) -> key {d['j']} ({d['key_token']}): "
        f"Ω = {d['score']:.6f}, A = {d['weight']:.4f}",
        f"  the table over the parts of the query's (rows) and the key's (columns) streams adds "
        f"up to {d['total']:.6f} (error {abs(d['total'] - d['score']):.1e})",
        "  the largest entries (query part · key part, and A without the entry):",
    ]
    for e in d["top"][:top]:
        pair = f"{e['query']} · {e['key']}"
        lines.append(f"    {pair:<48}{e['value']:>+10.4f}   A -> {e['weight_without']:.4f}")
    return "\n".join(lines)
