"""Using a model on text: `generate` (greedy, sampling or beam search from either engine) and
`translate` (sentences through an encoder-decoder): argparse -> `Model.generate` / `Model.record`
/ `Runtime.translations` / `Model.alignments` -> print (and the records' JSON lines).
"""

from __future__ import annotations

import contextlib
import json
import sys

from glassformer import interrupts
from glassformer.cli import choice
from glassformer.cli.common import (
    apart,
    device_arg,
    dtype_arg,
    engine_dtype,
    input_lines,
    load_model,
    note,
    option_type,
    output_file,
    overwrite_arg,
    threads_arg,
    write_text,
)
from glassformer.cli.decoding import decoding, decoding_args
from glassformer.cli.steering import check_steering, steering, steering_args, write_report
from glassformer.decoding import Decoding
from glassformer.errors import GlassformerError, Interrupted


def add_parsers(sub) -> None:
    _generate_parser(sub)
    _translate_parser(sub)


def _generate_parser(sub) -> None:
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
        type=option_type("batch_size"),
        default=32,
        help="prompts decoded together with --input (default 32)",
    )
    g.add_argument(
        "--max-new-tokens",
        type=option_type("max_new_tokens"),
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
    device_arg(g)
    threads_arg(g)
    decoding_args(g)
    steering_args(g)
    r = g.add_argument_group(
        "recording",
        "What the PyTorch engine computed for each new token, read on its fast path (the KV "
        "cache), one JSON line per input line; the outputs printed are unchanged.",
    )
    r.add_argument(
        "--record",
        metavar="OUT.jsonl",
        help="write per input line: its pieces, the new tokens (EOS included when reached) "
        "and, per new token, the --record-steps values and the --record-top-k tokens",
    )
    r.add_argument(
        "--record-steps",
        metavar="LIST",
        help="comma-separated step names as the trace names them, * matching any part: "
        "decoder.L.self_attn.headH.A and decoder.L.cross_attn.headH.A (the new token's "
        "attention row over the tokens so far / the source), decoder.L.out (block L's "
        "output), decoder.output (after the final norm), logits (all V of them); e.g. "
        "'decoder.*.self_attn.head0.A,decoder.1.out' (default: none)",
    )
    r.add_argument(
        "--record-top-k",
        type=option_type("top_tokens"),
        metavar="K",
        help="the K most likely next tokens at each new token, with their log-probabilities "
        "(default 5 with --record; 0: none)",
    )
    overwrite_arg(r)
    choice.add_args(g)
    g.set_defaults(func=cmd_generate)


def _translate_parser(sub) -> None:
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
        type=option_type("beam"),
        default=4,
        help="beam width (default 4; 1 = greedy)",
    )
    tl.add_argument(
        "--n-best",
        type=option_type("n_best"),
        metavar="K",
        help="print each sentence's K best translations (K <= --beam), one a line as "
        "N<TAB>score<TAB>log-probability<TAB>translation: N is the input line (the TEXT "
        "arguments first, then the file's lines), score what beam search ranks by (the "
        "log-probability over the number of tokens)",
    )
    dtype_arg(tl, "float32")
    device_arg(tl)
    threads_arg(tl)
    tl.add_argument(
        "--alignments",
        metavar="OUT.jsonl",
        help="also write, per sentence, one JSON line: its source and target pieces, the "
        "cross-attention of the printed translation (the chosen hypothesis; each target piece's "
        "row over the source pieces, averaged over the heads chosen), each target piece's most "
        "attended source piece and the word alignment 'i-j' (source word i, target word j) it "
        "gives; recorded on the fast path, the translations unchanged",
    )
    tl.add_argument(
        "--align-layers",
        metavar="LIST",
        help="with --alignments: average these decoder layers only, counted from 0, e.g. 0,1 "
        "(default: all)",
    )
    tl.add_argument(
        "--align-heads",
        metavar="LIST",
        help="with --alignments: these heads of each chosen layer, counted from 0, e.g. 0,3 "
        "(default: all)",
    )
    overwrite_arg(tl)
    steering_args(tl)
    tl.add_argument(
        "--progress",
        action="store_true",
        help="show a progress bar on stderr even when it is not a terminal (it is shown "
        "whenever stderr is one)",
    )
    choice.add_args(tl)
    tl.set_defaults(func=cmd_translate)


def cmd_generate(args) -> int:
    how = decoding(args)
    if choice.given(args):
        return choice.cmd_generate(args, how)
    if (args.text is None) == (args.input is None):
        raise GlassformerError(
            "give TEXT or --input FILE (one prompt a line)"
            if args.text is None
            else "give TEXT or --input FILE, not both"
        )
    engine_dtype(args, "float64")  # checked before the model is read
    _check_record(args)
    check_steering(args, {"CHECKPOINT": args.checkpoint, "--input": args.input})
    m = load_model(args.checkpoint, args.engine, args.dtype, args.device)
    steer = steering(args, m)
    with steer or contextlib.nullcontext():
        _generate(args, m, how)
    if steer is not None:
        texts = [args.text] if args.input is None else input_lines([], args.input)
        write_report(args, m, texts, steer, how)
    return 0


def _generate(args, m, how) -> int:
    if args.record is not None:
        return _generate_recorded(args, m, how)
    if args.input is None:
        return _stream(m, args.text, how)
    lines = input_lines([], args.input)
    if not any(line.strip() for line in lines):
        raise GlassformerError(f"nothing to generate: {args.input} has no non-blank line")
    places = [f"{args.input}, line {n}" for n in range(1, len(lines) + 1)]
    outs = m.generate(lines, decoding=how, batch_size=args.batch_size, places=places)
    _print_outputs(outs)
    return 0


def _stream(m, text: str, how) -> int:
    """One text's output printed as it is made: its start with the first new token's piece, then
    each token's, flushed, then a newline (the bytes `print(m.generate(...))` writes). A stop
    (Ctrl-C, SIGTERM) keeps what was printed, ends its line, and says how many new tokens it
    holds (a token is written and counted as one: `interrupts.whole`; one whose text waits for
    the next, a byte inside a character, is counted once its text is out); a refusal after the
    first token (non-finite logits) ends the line too. Before the first token: nothing printed,
    as before streaming."""
    stream = m.stream(text, decoding=how)
    out, printed, started = sys.stdout, 0, False
    try:
        for piece in stream:
            with interrupts.whole():
                out.write(piece if started else stream.prompt + piece)
                started, printed = True, stream.n_shown
            out.flush()
    except KeyboardInterrupt as e:
        if not started:
            raise
        signum = interrupts.acted_on(e)
        print(flush=True)
        tokens = f"{printed} new token{'s' * (printed != 1)}"
        raise Interrupted(signum, f"interrupted after {tokens}") from None
    except GlassformerError:
        if started:
            print(flush=True)
        raise
    print("" if started else stream.prompt)
    return 0


def _print_outputs(outs: list[str]) -> None:
    escaped = False
    for text in outs:
        line = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        escaped |= line != text
        print(line)
    if escaped:
        note("newlines in the outputs are written as \\n (a backslash as \\\\), one output a line")


def _check_record(args) -> None:
    """Before the model is read: --record's file may be written, its options come with it."""
    if args.record is None:
        given = [
            f
            for f, v in (
                ("--record-steps", args.record_steps),
                ("--record-top-k", args.record_top_k),
            )
            if v is not None
        ]
        if given:
            raise GlassformerError(f"{given[0]} says what --record writes; add --record OUT.jsonl")
        return
    if args.engine == "reference":
        raise GlassformerError(
            "--record reads the PyTorch engine's decoding: drop --engine reference (the "
            "reference engine's every step: glassformer explain --json)"
        )
    _check_output(args.record, "--record", args)


def _generate_recorded(args, m, how) -> int:
    m.runtime.need_generator()  # before the input file is read, as the other refusals
    if args.input is None:
        lines, places = [args.text], ["TEXT"]
    else:
        lines = input_lines([], args.input)
        places = [f"{args.input}, line {n}" for n in range(1, len(lines) + 1)]
    top = {} if args.record_top_k is None else {"top_tokens": args.record_top_k}
    results = m.record(
        lines,
        steps=args.record_steps,
        decoding=how,
        batch_size=args.batch_size,
        places=places,
        **top,
    )
    _print_outputs([text for text, _ in results])
    records = [
        json.dumps({"place": place, **record.to_dict()}, ensure_ascii=False)
        for place, (_, record) in zip(places, results, strict=True)
        if record is not None
    ]
    write_text(args.record, "\n".join(records) + "\n")
    note(f"wrote the records of {len(records)} generation(s) to {args.record}")
    return 0


def cmd_translate(args) -> int:
    if choice.given(args):
        return choice.cmd_translate(args)
    engine_dtype(args, "float32")  # checked before the model is read
    _check_output(args.alignments, "--alignments", args)
    if args.alignments is None:
        given = [
            f
            for f, v in (("--align-layers", args.align_layers), ("--align-heads", args.align_heads))
            if v
        ]
        if given:
            raise GlassformerError(
                f"{given[0]} chooses the heads of --alignments; add --alignments OUT.jsonl"
            )
    check_steering(args, {"CHECKPOINT": args.checkpoint, "--input": args.input})
    m = load_model(args.checkpoint, dtype=args.dtype, device=args.device)
    steer = steering(args, m)
    with steer or contextlib.nullcontext():
        _translate(args, m)
    if steer is not None:
        how = Decoding("beam", beam_width=args.beam) if args.beam > 1 else Decoding()
        write_report(args, m, input_lines(args.text, args.input), steer, how)
    return 0


def _translate(args, m) -> int:
    lines = input_lines(args.text, args.input)
    # each sentence's place in the input, as errors and notes name it
    where = [
        f"sentence {n + 1}"
        if n < len(args.text)
        else f"{args.input}, line {n - len(args.text) + 1}"
        for n, line in enumerate(lines)
        if line.strip()
    ]
    sentences = [s for s in lines if s.strip()]
    if args.alignments is None:
        results = m.runtime.translations(
            sentences, beam=args.beam, n_best=args.n_best, places=where
        )
        _print_translations(args, lines, results, len(sentences))
        return 0
    heads = dict(layers=args.align_layers, heads=args.align_heads)
    aligned = m.alignments(sentences, **heads, beam=args.beam, n_best=args.n_best, places=where)
    records = []

    def translations():
        for (out, record), place in zip(aligned, where, strict=True):
            records.append(json.dumps({"place": place, **record}, ensure_ascii=False))
            yield out

    _print_translations(args, lines, translations(), len(sentences))
    write_text(args.alignments, "\n".join(records) + "\n")
    note(f"wrote the alignments of {len(records)} translation(s) to {args.alignments}")
    return 0


def _check_output(path: str | None, flag: str, args) -> None:
    """Before any work: OUT may be written (a file name, not '-'; nothing replaced unasked; not
    the --input file nor inside the model folder, even with --overwrite)."""
    if path == "-":
        raise GlassformerError(f"{flag} writes a file; give a file name, not '-'")
    apart({flag: path}, {"CHECKPOINT": args.checkpoint, "--input": args.input})
    output_file(path, args.overwrite)


def _print_translations(args, lines: list[str], results, n_sentences: int) -> None:
    """Each translation (or n-best list) as soon as it is known, in input order: a blank input
    line gives a blank output line, so that outputs stay aligned with inputs (with --n-best,
    each line starts with its input line's number instead, and blank lines give nothing)."""
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
        for _ in results:  # the generator's end: its note on sentences cut at max_len
            pass
