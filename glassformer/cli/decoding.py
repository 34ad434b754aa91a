"""The decoding options of generate, explain and the reports (--strategy and its sampling and
beam options) and how they become a `glassformer.decoding.Decoding` (the rule that settles the
strategy is the Model's: `Decoding.settle`).
"""

from __future__ import annotations

import argparse

from glassformer.cli.common import SEED, option_type
from glassformer.cli.flags import flag, said
from glassformer.decoding import BEAM_OPTIONS, SAMPLING_OPTIONS, STRATEGY_RULE, Decoding


def decoding_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding", said(STRATEGY_RULE))
    g.add_argument(
        "--strategy",
        choices=["greedy", "sample", "beam"],
        default=None,
        help="greedy (default), sample (temperature/top-k/top-p) or beam search",
    )
    g.add_argument(
        "--temperature",
        type=option_type("temperature"),
        help="sampling temperature (1.0)",
    )
    g.add_argument("--top-k", type=option_type("top_k"), help="sample from the k most likely")
    g.add_argument("--top-p", type=option_type("top_p"), help="nucleus sampling threshold")
    g.add_argument("--seed", type=SEED, help="sampling seed (same seed, same text)")
    g.add_argument("--beam-width", type=option_type("beam_width"), help="beam search width (4)")
    g.add_argument(
        "--length-penalty",
        type=option_type("length_penalty"),
        help="beam score = log-prob / generated_tokens^penalty (1.0)",
    )


def given_decoding_options(args) -> list[str]:
    """The decoding options the user gave (as flags), --strategy included."""
    names = ["strategy", *SAMPLING_OPTIONS, *BEAM_OPTIONS]
    return [flag(n) for n in names if getattr(args, n) is not None]


def decoding(args) -> Decoding:
    """The options given as a Decoding (STRATEGY_RULE); before any work."""
    given = {n: getattr(args, n) for n in (*SAMPLING_OPTIONS, *BEAM_OPTIONS)}
    return Decoding.settle(args.strategy, getattr(args, "max_new_tokens", None), **given)
