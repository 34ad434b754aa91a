"""Probing a model: `lens` (each layer's residual stream read through the output head, and each
head's direct share of a chosen logit) and `attribute` (how much each input token contributes to
each predicted token, by integrated gradients or gradient x input). The work is
`glassformer.lens`'s and `glassformer.attribution`'s; here are the options and the printing.
"""

from __future__ import annotations

import numpy as np

from glassformer import numerics
from glassformer import reference as R
from glassformer.attribution import MAX_STEPS
from glassformer.cli.common import (
    bos,
    check_report_outputs,
    encode,
    integer,
    load_model,
    overwrite_arg,
    utf8,
    write_outputs,
)
from glassformer.errors import GlassformerError
from glassformer.tokenizer.display import display_kind, display_tokens
from glassformer.trace import tracing


def add_parsers(sub) -> None:
    lens = sub.add_parser(
        "lens",
        help="the logit lens: what each layer would predict, position by position",
        description="Run TEXT through the reference engine and read the decoder's residual "
        "stream after the embeddings and after every block through the final LayerNorm and the "
        "output head: the top tokens each layer would predict at each position. With --dla, "
        "each head's direct share of one token's logit (pre-LN models).",
    )
    _model_text_args(lens)
    lens.add_argument("--k", type=integer("--k", 1), default=3, help="top tokens shown (3)")
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
        type=integer("--steps", 1, MAX_STEPS + 1, says=f"in [1, {MAX_STEPS}]"),
        default=None,
        help=f"integrated gradients' nodes (default 64, at most {MAX_STEPS})",
    )
    at.add_argument(
        "--max-new-tokens",
        type=integer("--max-new-tokens", 1, says="at least 1"),
        default=None,
        help="a decoder's predicted tokens to explain (5)",
    )
    at.set_defaults(func=cmd_attribute)


def _model_text_args(p) -> None:
    p.add_argument("checkpoint", help="a checkpoint or Hugging Face folder")
    p.add_argument("text", help="input text (the source, for an encoder-decoder)")
    p.add_argument(
        "--target", help="decoder text for an encoder-decoder (default: its greedy translation)"
    )
    p.add_argument("--json", metavar="FILE", help="write the result as JSON to FILE ('-' stdout)")
    p.add_argument(
        "--html", metavar="FILE", help="write the result as a self-contained HTML page ('-' stdout)"
    )
    overwrite_arg(p)
    p.set_defaults(png=None)


def _meta(args, cfg) -> dict[str, str]:
    meta = {"checkpoint": args.checkpoint, "input": args.text}
    if args.target is not None:
        meta["target"] = args.target
    return meta | {"model": f"{cfg.arch}, d_model {cfg.d_model}, {cfg.n_heads} heads"}


def _check_options(args, cfg, idle: list[tuple[bool, str]]) -> None:
    """Before any work: an option that would do nothing here is refused in its own words
    (`idle`: (given and idle, why))."""
    if cfg.arch == "decoder" and args.target is not None:
        idle = [(True, "--target is the decoder text of an encoder-decoder; for a decoder, put it "
                 "in TEXT")] + idle  # fmt: skip
    for given, why in idle:
        if given:
            raise GlassformerError(why)


def _decoder_input(args, cfg, params, tok) -> tuple[list[int] | None, list[int]]:
    """(source ids or None, decoder ids) the probe runs on."""
    ids = encode(tok, args.text, cfg)
    if cfg.arch == "decoder":
        return None, ids
    if cfg.arch != "encoder-decoder":
        raise GlassformerError(
            f"{args.checkpoint} is an encoder: it predicts no tokens to probe; use a decoder or "
            "an encoder-decoder (explain shows an encoder's every step)"
        )
    if args.target is not None:
        return ids, bos(tok) + encode(tok, args.target, cfg, room=1, what="--target")
    from glassformer import decode

    step = numerics.checked(R.next_token_logits(params, cfg, ids), params, cfg, 1, ids)
    gen = decode.greedy(step, bos(tok), cfg.max_len - 1, tok.eos_id, cfg.max_len)
    out = gen.ids[:-1] if gen.stopped_at_eos else gen.ids
    return ids, out


def _token_id(tok, text: str, flag: str) -> int:
    if not utf8(text, flag):
        raise GlassformerError(f"{flag} is empty: give one token")
    ids = tok.encode(text)
    if len(ids) != 1:
        pieces = display_tokens(tok.tokens(ids), display_kind(tok))
        raise GlassformerError(
            f"{flag} {text!r} is {len(ids)} tokens ({' '.join(pieces)}); give one token"
        )
    return ids[0]


def cmd_lens(args) -> int:
    from glassformer import lens

    check_report_outputs(args)
    cfg, params, tok = load_model(args.checkpoint)
    no_dla = args.dla is None
    _check_options(args, cfg, [
        (args.versus is not None and no_dla, "--versus subtracts a token's logit in --dla's "
         "attribution: give --dla TOKEN too, or drop --versus"),
        (args.position is not None and no_dla, "--position chooses the position --dla explains: "
         "give --dla TOKEN too, or drop --position"),
    ])  # fmt: skip
    src, ids = _decoder_input(args, cfg, params, tok)
    position = -1 if args.position is None else args.position
    if not -len(ids) <= position < len(ids):
        raise GlassformerError(
            f"--position {position}: the decoder reads {len(ids)} tokens, so a position is in "
            f"0..{len(ids) - 1} (or -{len(ids)}..-1, counted from the end)"
        )
    with tracing() as trace:
        logits = R.forward(params, cfg, ids, src_ids=src)
    numerics.check(logits[None], lambda _: ("the logits", ids, src), params, cfg)
    table = lens.logit_lens(trace, params, cfg, k=args.k, sublayers=args.sublayers)
    kind = display_kind(tok)
    words = display_tokens(tok.tokens(ids), kind)
    result = {"input": words, "lens": table.to_dict(tokens=display_tokens(tok.vocab, kind))}
    if args.dla is not None:
        token = _token_id(tok, args.dla, "--dla")
        versus = _token_id(tok, args.versus, "--versus") if args.versus is not None else None
        dla = lens.direct_logit_attribution(trace, params, cfg, token, versus, position)
        result["dla"] = dla.to_dict() | {"token": args.dla, "versus": args.versus}
    vocab = display_tokens(tok.vocab, kind)

    def page() -> str:
        from glassformer.explain import html_touch as H

        sections = [("lens", "The logit lens", H.lens_section(result))]
        if args.dla is not None:
            sections.append(("dla", "Direct logit attribution", H.dla_section(result["dla"])))
        return H.probe_page(f"glassformer lens: “{args.text}”", _meta(args, cfg), sections)

    def text() -> str:
        parts = [_lens_text(table, words, vocab)]
        return "\n".join(parts + ([_dla_text(result["dla"])] if args.dla is not None else []))

    what = f"the logit lens of {len(table.points)} points"
    write_outputs(
        args, text, data=result, data_what=what, page=args.html and page(), page_what=what
    )
    return 0


def _lens_text(table, words: list[str], vocab: list[str]) -> str:
    """One row per residual stream, one column per position: the top token and its probability
    (the next token predicted after that position)."""
    width = max(8, *(len(w) for w in words))
    label_w = max(len(label) for label in table.labels)
    head = " " * label_w + "  " + " ".join(f"{w:>{width + 6}}" for w in words)
    lines = ["logit lens: the token each layer would predict after each position", head]
    for r, label in enumerate(table.labels):
        cells = [
            f"{vocab[table.top_ids[r, t, 0]]:>{width}} {table.top_probs[r, t, 0]:5.2f}"
            for t in range(len(words))
        ]
        lines.append(f"{label:<{label_w}}  " + " ".join(cells))
    return "\n".join(lines)


def _dla_text(d: dict) -> str:
    what = repr(d["token"]) + (f" minus {d['versus']!r}" if d["versus"] else "")
    lines = [
        f"direct logit attribution of {what} at position {d['position']} "
        f"(final LayerNorm scale frozen at {d['scale']:.4g}):",
        "  " + " " * 16 + "".join(f"{c:>10}" for c in d["cols"]),
    ]
    for row, values in zip(d["rows"], d["heads"], strict=True):
        lines.append(f"  {row:<16}" + "".join(f"{v:>10.4f}" for v in values))
    for name, v in d["other"].items():
        lines.append(f"  {name:<16}{v:>10.4f}")
    lines.append(f"  sum of the parts {d['total']:.6f} = the model's logit {d['logit']:.6f}")
    return "\n".join(lines)


def cmd_attribute(args) -> int:
    import torch

    from glassformer import attribution, decode
    from glassformer.torch_model import from_params
    from glassformer.torch_steps import step_fn

    check_report_outputs(args)
    cfg, params, tok = load_model(args.checkpoint)
    method = args.method.replace("_", " ")
    _check_options(args, cfg, [
        (args.steps is not None and args.method != "integrated_gradients", "--steps sets "
         f"integrated gradients' nodes, and {method} has none: drop --steps"),
        (args.max_new_tokens is not None and cfg.arch == "encoder-decoder", "--max-new-tokens "
         "sets how many tokens a decoder predicts; an encoder-decoder's are its translation "
         "(or --target): drop it"),
    ])  # fmt: skip
    steps = 64 if args.steps is None else args.steps
    if cfg.arch == "decoder":
        prompt = encode(tok, args.text, cfg, room=1)
        model = from_params(cfg, params, dtype=torch.float64).eval()
        room = min(args.max_new_tokens or 5, cfg.max_len - len(prompt))
        step = numerics.checked(step_fn(model), params, cfg, len(prompt))
        gen = decode.greedy(step, prompt, room, tok.eos_id, cfg.max_len)
        ids, src, stack, shown = gen.ids, None, "decoder", gen.ids  # a token explains later ones
        targets = list(range(len(prompt) - 1, len(ids) - 1))
    else:
        src, ids = _decoder_input(args, cfg, params, tok)
        model = from_params(cfg, params, dtype=torch.float64).eval()
        stack, shown = "encoder", src
        targets = list(range(len(ids) - 1))
    if not targets:
        raise GlassformerError("nothing was predicted to explain: give a shorter text")
    result = attribution.input_attribution(
        model, ids, targets, method=args.method, steps=steps, stack=stack, src_ids=src
    )
    numerics.check(result.scores[None], lambda _: ("the attributions", ids, src), params, cfg)
    kind = display_kind(tok)
    inputs = display_tokens(tok.tokens(shown), kind)
    predicted = display_tokens(tok.tokens(result.tokens), kind)
    out = {"input": inputs, "predicted": predicted} | result.to_dict()

    def page() -> str:
        from glassformer.explain import html_touch as H

        title = f"glassformer attribute: “{args.text}”"
        body = H.attribution_section(out)
        return H.probe_page(title, _meta(args, cfg), [("attribution", "Attribution", body)])

    def text() -> str:
        return _attribution_text(result, inputs, predicted)

    what = f"the attributions of {len(predicted)} tokens"
    html = page() if args.html else None
    write_outputs(args, text, data=out, data_what=what, page=html, page_what=what)
    return 0


def _attribution_text(result, inputs: list[str], predicted: list[str]) -> str:
    width = max(7, *(len(w) for w in inputs))
    method = result.method.replace("_", " ")
    lines = [f"{method}: each predicted token's logit, shared among the input tokens"]
    lines.append(" " * 14 + " ".join(f"{w:>{width}}" for w in inputs))
    scores = np.asarray(result.scores)[:, : len(inputs)]
    for i, word in enumerate(predicted):
        row = " ".join(f"{v:>{width}.3f}" for v in scores[i])
        extra = ""
        if result.completeness is not None:
            change = result.f[i] - result.f_baseline[i]
            extra = f"   sum {scores[i].sum():.4f} = f(x) - f(0) {change:.4f}"
            extra += f" (error {result.completeness[i]:.1e})"
        lines.append(f"-> {word:<10} {row}{extra}")
    return "\n".join(lines)
