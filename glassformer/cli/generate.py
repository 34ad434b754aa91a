"""Using a model on text: `generate` (greedy, sampling or beam search from either engine) and
`translate` (sentences through an encoder-decoder). The work is `glassformer.inference`'s; here
are the options, the checks on user text, and the printing.
"""

from __future__ import annotations

import sys

from glassformer import inference
from glassformer.cli.common import (
    bos,
    choose_strategy,
    decoding_args,
    encode,
    integer,
    load_model,
    read_text,
    run_decoding,
)
from glassformer.errors import GlassformerError


def add_parsers(sub) -> None:
    g = sub.add_parser(
        "generate",
        help="generate text: greedy, sampling or beam search",
        description="Decode from a checkpoint (greedy by default). Encoder-decoder: TEXT is "
        "the source and the output starts from SOS. Decoder: TEXT is the prompt.",
    )
    g.add_argument("checkpoint", help="checkpoint directory")
    g.add_argument("text", help="source text or prompt")
    g.add_argument(
        "--max-new-tokens",
        type=integer("--max-new-tokens", 1, says="at least 1"),
        default=None,
        help="stop after this many new tokens (default: the model's max_len); a decoder "
        "slides over its context (the last max_len tokens), an encoder-decoder stops at max_len",
    )
    g.add_argument(
        "--engine",
        choices=["auto", "reference", "torch"],
        default="auto",
        help="reference: NumPy float64; torch: PyTorch with a KV cache; auto: torch "
        "if installed (default)",
    )
    decoding_args(g)
    g.set_defaults(func=cmd_generate)

    tl = sub.add_parser(
        "translate",
        help="translate sentences with an encoder-decoder",
        description="Translate TEXT arguments, or --input FILE (one sentence a "
        "line); translations go to stdout, one a line.",
    )
    tl.add_argument("checkpoint")
    tl.add_argument("text", nargs="*", help="sentences to translate")
    tl.add_argument("--input", metavar="FILE", help="a UTF-8 file, one sentence a line")
    tl.add_argument(
        "--beam",
        type=integer("--beam", 1, says="at least 1"),
        default=4,
        help="beam width (default 4; 1 = greedy)",
    )
    tl.add_argument(
        "--progress",
        action="store_true",
        help="show a progress bar on stderr even when it is not a terminal (it is shown "
        "whenever stderr is one)",
    )
    tl.set_defaults(func=cmd_translate)


def cmd_generate(args) -> int:
    choose_strategy(args)
    cfg, params, tok = load_model(args.checkpoint)
    if cfg.arch == "encoder":
        raise GlassformerError("an encoder-only model does not generate; use `explain`")
    window = cfg.arch == "decoder"  # a decoder slides over its context; a target cannot
    ids = encode(tok, args.text, cfg, window=window)
    src, prompt = (ids, bos(tok)) if cfg.arch == "encoder-decoder" else (None, ids)
    step = inference.step_function(args.engine, cfg, params, src, window=window)
    out = run_decoding(args, step, prompt, tok, cfg, params, src, window=window).ids
    print(tok.decode(out[len(prompt) :] if cfg.arch == "encoder-decoder" else out))
    return 0


def cmd_translate(args) -> int:
    import torch
    from tqdm import tqdm

    from glassformer.torch_model import from_params

    cfg, params, tok = load_model(args.checkpoint)
    if cfg.arch != "encoder-decoder":
        raise GlassformerError(
            f"{args.checkpoint} is a {cfg.arch} model; translate needs an encoder-decoder"
        )
    if args.beam > cfg.vocab_size:
        raise GlassformerError(
            f"--beam {args.beam} is more than the vocabulary ({cfg.vocab_size} tokens); use at "
            "most the vocabulary size"
        )
    lines = list(args.text)
    if args.input:
        lines += read_text(args.input).split("\n")
        if lines[-1] == "":
            lines.pop()  # the file's final newline ends the last line
    sentences = [s for s in lines if s.strip()]
    if not sentences:
        raise GlassformerError("nothing to translate: give sentences or --input FILE")
    for s in sentences:
        encode(tok, s, cfg)
    model = from_params(cfg, params, dtype=torch.float32).eval()
    show = args.progress or sys.stderr.isatty()
    # Each translation is printed as soon as it and those before it are known; a blank input
    # line gives a blank output line, so that outputs stay aligned with inputs.
    translations = inference.translate_iter(model, tok, sentences, beam=args.beam)
    with tqdm(total=len(sentences), unit="sentence", disable=not show, file=sys.stderr) as bar:
        for line in lines:
            text = next(translations) if line.strip() else ""
            with bar.external_write_mode():
                print(text, flush=True)
            bar.update(bool(line.strip()))
    return 0
