"""Using a model on text: `generate` (greedy, sampling or beam search from either engine) and
`translate` (sentences through an encoder-decoder). The work is `glassformer.inference`'s; here
are the options, the checks on user text, and the printing.
"""

from __future__ import annotations

import sys

from glassformer import inference
from glassformer.cli.common import (
    bos,
    dtype_arg,
    encode,
    engine_dtype,
    input_lines,
    integer,
    load_model,
    note,
    read_text,
)
from glassformer.cli.decoding import (
    FIX,
    choose_strategy,
    decoding_args,
    max_new_tokens,
    note_cut,
    run_decoding,
)
from glassformer.errors import GlassformerError
from glassformer.numerics import NonFiniteError


def add_parsers(sub) -> None:
    g = sub.add_parser(
        "generate",
        help="generate text: greedy, sampling or beam search",
        description="Decode from a checkpoint (greedy by default). Encoder-decoder: TEXT is "
        "the source and the output starts from SOS. Decoder: TEXT is the prompt.",
    )
    g.add_argument("checkpoint", help="checkpoint directory")
    g.add_argument("text", nargs="?", help="source text or prompt (or --input FILE)")
    g.add_argument(
        "--input",
        metavar="FILE",
        help="a UTF-8 file, one prompt (or source) a line: one output line each, in order (a "
        "newline inside an output is written as \\n, a backslash as \\\\); greedy decoding "
        "with the torch engine runs --batch-size prompts at once, the same tokens as one at a "
        "time (except in int8, where a batch's rows share each layer's input scale)",
    )
    g.add_argument(
        "--batch-size",
        type=integer("--batch-size", 1, says="at least 1"),
        default=32,
        help="prompts decoded together with --input (default 32)",
    )
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
    dtype_arg(g, "float64")
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
        "--n-best",
        type=integer("--n-best", 1, says="at least 1"),
        metavar="K",
        help="print each sentence's K best translations (K <= --beam), one a line as "
        "N<TAB>score<TAB>log-probability<TAB>translation: N is the input line (the TEXT "
        "arguments first, then the file's lines), score what beam search ranks by (the "
        "log-probability over the number of tokens)",
    )
    dtype_arg(tl, "float32")
    tl.add_argument(
        "--progress",
        action="store_true",
        help="show a progress bar on stderr even when it is not a terminal (it is shown "
        "whenever stderr is one)",
    )
    tl.set_defaults(func=cmd_translate)


def cmd_generate(args) -> int:
    choose_strategy(args)
    if (args.text is None) == (args.input is None):
        raise GlassformerError(
            "give TEXT or --input FILE (one prompt a line)"
            if args.text is None
            else "give TEXT or --input FILE, not both"
        )
    dtype = engine_dtype(args, "float64")
    cfg, params, tok = load_model(args.checkpoint)
    if cfg.arch == "encoder":
        raise GlassformerError("an encoder-only model does not generate; use `explain`")
    if args.input is not None:
        return _generate_lines(args, cfg, params, tok, dtype)
    window = cfg.arch == "decoder"  # a decoder slides over its context; a target cannot
    ids = encode(tok, args.text, cfg, window=window)
    src, prompt = (ids, bos(tok)) if cfg.arch == "encoder-decoder" else (None, ids)
    step = inference.step_function(args.engine, cfg, params, src, window=window, dtype=dtype)
    out = run_decoding(args, step, prompt, tok, cfg, params, src, window=window).ids
    print(tok.decode(out[len(prompt) :] if cfg.arch == "encoder-decoder" else out))
    return 0


def _generate_lines(args, cfg, params, tok, dtype: str) -> int:
    """generate --input: every non-blank line decoded, one output line each (blank for blank).
    Greedy on the torch engine: batches of prompts in one KV cache (`inference.greedy_prompts`,
    `inference.greedy_batch`), the same tokens as one prompt at a time; otherwise one at a time."""
    window = cfg.arch == "decoder"
    lines = input_lines([], args.input)
    inputs = {}
    for n, line in enumerate(lines, start=1):
        if line.strip():
            try:
                inputs[n - 1] = encode(tok, line, cfg, window=window)
            except GlassformerError as e:
                raise GlassformerError(f"{args.input}, line {n}: {e}") from None
    if not inputs:
        raise GlassformerError(f"nothing to generate: {args.input} has no non-blank line")
    model = None
    if args.engine != "reference":
        try:
            model = inference.torch_engine(cfg, params, dtype)
        except ImportError:
            if args.engine == "torch":
                raise
    try:
        if model is not None and args.strategy == "greedy":
            outs = _greedy_lines(args, model, cfg, params, tok, inputs)
        else:
            outs = _lines_one_by_one(args, model, cfg, params, tok, inputs)
    except NonFiniteError as e:  # its row: the index of the line
        raise e.at(f"{args.input}, line {e.row + 1}") from None
    escaped = False
    for i in range(len(lines)):
        text = outs.get(i, "")
        line = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        escaped |= line != text
        print(line)
    if escaped:
        note("newlines in the outputs are written as \\n (a backslash as \\\\), one output a line")
    return 0


def _greedy_lines(args, model, cfg, params, tok, inputs: dict) -> dict:
    """Greedy outputs of many prompts, batched; shortest first, so that a batch pads little.
    Non-finite logits: a NonFiniteError whose row is the line's index."""
    order = sorted(inputs, key=lambda i: len(inputs[i]))
    max_new, outs = max_new_tokens(args, cfg), {}
    checks = dict(params=params, fix=FIX)
    for b0 in range(0, len(order), args.batch_size):
        chunk = order[b0 : b0 + args.batch_size]
        batch = [inputs[i] for i in chunk]
        try:
            if cfg.arch == "decoder":
                pad = tok.pad_id or 0
                new = inference.greedy_prompts(model, batch, max_new, tok.eos_id, pad, **checks)
                texts = [tok.decode(p + n) for p, n in zip(batch, new, strict=True)]
            else:
                limit = min(max_new, cfg.max_len - 1)  # the target's positions, BOS included
                args_ = (tok.pad_id or 0, bos(tok)[0], tok.eos_id, limit)
                new = inference.greedy_batch(model, batch, *args_, **checks)
                texts = [tok.decode(n) for n in new]
        except NonFiniteError as e:
            raise NonFiniteError(str(e), chunk[e.row]) from None
        outs.update(zip(chunk, texts, strict=True))
    return outs


def _lines_one_by_one(args, model, cfg, params, tok, inputs: dict) -> dict:
    from glassformer import reference as R

    window, outs = cfg.arch == "decoder", {}
    for i, ids in inputs.items():
        src, prompt = (ids, bos(tok)) if cfg.arch == "encoder-decoder" else (None, ids)
        if model is not None:
            from glassformer.torch_steps import step_fn

            step = step_fn(model, src, window=window)
        else:
            step = R.next_token_logits(params, cfg, src, window=window)
        try:
            out = run_decoding(args, step, prompt, tok, cfg, params, src, window, quiet=True)
        except NonFiniteError as e:
            raise NonFiniteError(str(e), i) from None
        outs[i] = tok.decode(out.ids[len(prompt) :] if src is not None else out.ids)
    return outs


def cmd_translate(args) -> int:
    dtype = engine_dtype(args, "float32")
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
    if args.n_best is not None and args.n_best > args.beam:
        raise GlassformerError(
            f"--n-best {args.n_best} is more than the beam width {args.beam}: a beam keeps at "
            f"most {args.beam} candidates; add --beam {args.n_best}"
        )
    lines = list(args.text)
    if args.input:
        lines += read_text(args.input).split("\n")
        if lines[-1] == "":
            lines.pop()  # the file's final newline ends the last line
    # each sentence's place in the input, as errors and notes name it
    where = [
        f"sentence {n + 1}"
        if n < len(args.text)
        else f"{args.input}, line {n - len(args.text) + 1}"
        for n, line in enumerate(lines)
        if line.strip()
    ]
    sentences = [s for s in lines if s.strip()]
    if not sentences:
        raise GlassformerError("nothing to translate: give sentences or --input FILE")
    for s, place in zip(sentences, where, strict=True):
        try:
            encode(tok, s, cfg)
        except GlassformerError as e:
            raise GlassformerError(f"{place}: {e}") from None
    model = inference.torch_engine(cfg, params, dtype)
    # Each translation is printed as soon as it and those before it are known; a blank input
    # line gives a blank output line, so that outputs stay aligned with inputs (with --n-best,
    # each line starts with its input line's number instead, and blank lines give nothing).
    cut: set[int] = set()  # sentences that reached max_len before an end token
    checks = dict(cut=cut, params=params, fix="try --dtype float64")
    if args.n_best:
        results = inference.translate_nbest_iter(
            model, tok, sentences, args.n_best, args.beam, **checks
        )
    else:
        results = inference.translate_iter(model, tok, sentences, beam=args.beam, **checks)
    try:
        _print_translations(args, lines, results, len(sentences))
    except NonFiniteError as e:  # its row: the sentence's index
        raise e.at(where[e.row]) from None
    note_cut(cut, where, cfg.max_len)
    return 0


def _print_translations(args, lines: list[str], results, n_sentences: int) -> None:
    """Each translation (or n-best list) as soon as it is known, in input order."""
    from tqdm import tqdm

    show = args.progress or sys.stderr.isatty()
    with tqdm(total=n_sentences, unit="sentence", disable=not show, file=sys.stderr) as bar:
        for n, line in enumerate(lines, 1):
            if args.n_best:
                if not line.strip():
                    continue
                text = "\n".join(
                    f"{n}\t{c.score:.4f}\t{c.logprob:.4f}\t{c.text}" for c in next(results)
                )
            else:
                text = next(results) if line.strip() else ""
            with bar.external_write_mode():
                print(text, flush=True)
            bar.update(bool(line.strip()))
