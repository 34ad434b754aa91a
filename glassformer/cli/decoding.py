"""Decoding as the options say, for generate, translate and the reports: the decoding options
(--strategy and its sampling and beam options) and the rule that settles the strategy, running
greedy, sampling or beam search with one-line notes on why it stopped, and the note naming the
translations that ran to the decoder's max_len.
"""

from __future__ import annotations

import argparse

from glassformer import inference
from glassformer.cli.common import SEED, integer, note, real
from glassformer.errors import GlassformerError

SAMPLING_OPTIONS = {"temperature": 1.0, "top_k": None, "top_p": None, "seed": None}
BEAM_OPTIONS = {"beam_width": 4, "length_penalty": 1.0}
# What to do when only the PyTorch engine's float32 or int8 overflows (the float64 one is exact).
FIX = "try --dtype float64 or --engine reference"
STRATEGY_RULE = (
    "A sampling option (--temperature, --top-k, --top-p, --seed) without --strategy means "
    "--strategy sample, a beam option (--beam-width, --length-penalty) --strategy beam, and the "
    "command says so in a note; an option of another strategy than the one given is refused."
)


def decoding_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding", STRATEGY_RULE)
    g.add_argument(
        "--strategy",
        choices=["greedy", "sample", "beam"],
        default=None,
        help="greedy (default), sample (temperature/top-k/top-p) or beam search",
    )
    g.add_argument(
        "--temperature",
        type=real("temperature", 0.0, says="a finite number > 0"),
        help="sampling temperature (1.0)",
    )
    g.add_argument("--top-k", type=integer("top-k", 1), help="sample from the k most likely")
    g.add_argument(
        "--top-p", type=real("top-p", 0.0, 1.0, says="in (0, 1]"), help="nucleus sampling threshold"
    )
    g.add_argument("--seed", type=SEED, help="sampling seed (same seed, same text)")
    g.add_argument("--beam-width", type=integer("beam width", 1), help="beam search width (4)")
    g.add_argument(
        "--length-penalty",
        type=real("length-penalty", says="a finite number"),
        help="beam score = log-prob / generated_tokens^penalty (1.0)",
    )


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def given_decoding_options(args) -> list[str]:
    """The decoding options the user gave (as flags), --strategy included."""
    names = ["strategy", *SAMPLING_OPTIONS, *BEAM_OPTIONS]
    return [_flag(n) for n in names if getattr(args, n) is not None]


def choose_strategy(args) -> None:
    """Settle args.strategy by the rule in STRATEGY_RULE and fill in the defaults; a note says
    an implied strategy, an option that would do nothing is one clear error. Before any work."""
    sampling = [n for n in SAMPLING_OPTIONS if getattr(args, n) is not None]
    beam = [n for n in BEAM_OPTIONS if getattr(args, n) is not None]
    if args.strategy is None:
        if sampling and beam:
            raise GlassformerError(
                f"{_flag(sampling[0])} is a sampling option and {_flag(beam[0])} a beam search "
                "option; choose one --strategy"
            )
        if sampling or beam:
            args.strategy = "sample" if sampling else "beam"
            used = " and ".join(_flag(n) for n in sampling or beam)
            note(f"{used} given: decoding with --strategy {args.strategy}")
        else:
            args.strategy = "greedy"
    for strategy, options in (("sample", sampling), ("beam", beam)):
        if options and args.strategy != strategy:
            raise GlassformerError(
                f"{_flag(options[0])} does nothing with --strategy {args.strategy}; drop it, or "
                f"use --strategy {strategy}"
            )
    for name, default in (SAMPLING_OPTIONS | BEAM_OPTIONS).items():
        if getattr(args, name) is None:
            setattr(args, name, default)


def run_decoding(
    args, step, prompt: list[int], tok, cfg, params, src=None, window=False, quiet=False
):
    """Greedy, sampling or beam search as the decoding options say (`choose_strategy` first): a
    Generation or BeamResult. Non-finite logits stop it with one line naming where they start.
    window: the step function slides over a decoder's context, so only --max-new-tokens bounds
    the length; otherwise the decoder's max_len does too. A note says why generation stopped
    (unless quiet: a second generation of the same report)."""
    from glassformer import numerics

    max_new = max_new_tokens(args, cfg)
    if args.strategy == "beam" and args.beam_width > cfg.vocab_size:
        raise GlassformerError(
            f"--beam-width {args.beam_width} is more than the vocabulary ({cfg.vocab_size} "
            "tokens); use at most the vocabulary size"
        )
    step = numerics.checked(step, params, cfg, len(prompt), src, FIX)
    result = inference.run_decoding(
        step,
        prompt,
        max_new_tokens=max_new,
        eos_id=tok.eos_id,
        max_len=None if window else cfg.max_len,
        strategy=args.strategy,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        beam_width=args.beam_width,
        length_penalty=args.length_penalty,
    )
    ids = result.ids
    if quiet:
        return result
    if window and len(ids) > cfg.max_len:
        note(context_slid(len(prompt), len(ids) - len(prompt), args.max_new_tokens, cfg))
    note(stop_reason(result, len(prompt), max_new, args.max_new_tokens is None, cfg))
    return result


def context_slid(n_prompt: int, n_new: int, asked: int | None, cfg) -> str:
    """What happened when a decoder's sequence outgrew its max_len: the text itself was longer,
    or the prompt plus what was generated, with what to do to stay within the context."""
    L = cfg.max_len
    slid = f"each token after token {L} was predicted from the last {L} only (a sliding window)"
    if n_prompt > L:
        return (
            f"the text has {n_prompt} tokens, more than the model's context (max_len {L}): " + slid
        )
    flag = f"--max-new-tokens {asked}" if asked is not None else "the default --max-new-tokens"
    return (
        f"the prompt ({n_prompt} tokens) + {n_new} new tokens ({flag}) is more than the model's "
        f"context (max_len {L}): {slid}; give --max-new-tokens {L - n_prompt} or less to stay "
        "within it"
    )


def max_new_tokens(args, cfg) -> int:
    """--max-new-tokens, or by default the model's max_len."""
    return args.max_new_tokens if args.max_new_tokens is not None else cfg.max_len


def stop_reason(result, n_prompt: int, max_new: int, default_max: bool, cfg) -> str:
    """Why a generation ended, in words: EOS, the --max-new-tokens bound, or the decoder's
    max_len (the longest sequence it has positions for)."""
    best = getattr(result, "best", None)  # a BeamResult's best hypothesis
    eos = best.finished if best is not None else result.stopped_at_eos
    n_new = len(result.ids) - n_prompt
    if eos:
        return f"stopped at EOS after {n_new} new token{'s' * (n_new != 1)}"
    if n_new >= max_new:
        if default_max:
            return f"stopped after {n_new} new tokens (--max-new-tokens, default max_len)"
        return f"stopped after --max-new-tokens {max_new}"
    return (
        f"stopped at the decoder's max_len {cfg.max_len}: it has no position for token "
        f"{cfg.max_len + 1}"
    )


def note_cut(cut: set[int], where: list[str], max_len: int) -> None:
    """Note the translations that reached the decoder's max_len before an end token (`cut`:
    their indices into `where`, which names each translated sentence's place in the input)."""
    if cut:
        named = "; ".join(where[i] for i in sorted(cut)[:5]) + ("; ..." if len(cut) > 5 else "")
        note(
            f"{len(cut)} of {len(where)} translation(s) reached the decoder's max_len {max_len} "
            f"before an end token, so they may be cut short or repeat themselves ({named})"
        )
