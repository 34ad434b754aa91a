"""`glassformer sae train|eval|features`: sparse autoencoders and transcoders on stored activations.

    sae train DIR --step NAME --features F --l1 L [--transcoder-to NAME] [--topk K] --out SAE
              [--steps N] [--batch-size B] [--lr LR] [--seed S] [--resume] [--overwrite]
    sae eval SAE MODEL FILE [--max-tokens N] [--cards N] [--json F] [--html F]
    sae features SAE MODEL --store DIR [--feature N ...] [--k K] [--json F] [--html F]

The work is the library's: `corpus/sae.py` (the SAE), `training/autoencoder.py` (its loop: lock,
atomic saves, Ctrl-C keeps the work, --resume), `corpus/saelens.py` (the folder, SAELens's
format), `corpus/evaluate.py` (spliced loss in the reference engine, feature cards); here are the
options, the progress bar and the printed report.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from glassformer.cli.common import (
    CommandParser,
    Parser,
    apart,
    integer,
    load_model,
    note,
    output_file,
    output_folder,
    overwrite_arg,
    read_text,
    real,
    threads_arg,
    write_outputs,
)
from glassformer.errors import GlassformerError


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "sae",
        help="sparse autoencoders and transcoders: train on a store, evaluate, feature cards",
        description="Sparse autoencoders (and transcoders) trained on the CPU on stored "
        "activations (glassformer record-corpus), in SAELens's folder format (cfg.json + "
        "sae_weights.safetensors).",
    )
    # A group of subcommands: its own parser reads plainly (the intermixed reading of a
    # command's options cannot hold subcommands); each subcommand reads as every command does.
    s.__class__ = Parser
    ss = s.add_subparsers(
        dest="sae_command", required=True, metavar="train|eval|features", parser_class=CommandParser
    )
    t = ss.add_parser("train", help="train an SAE (or transcoder) on a store's step")
    t.add_argument("store", metavar="DIR", help="an activation store (record-corpus --out)")
    t.add_argument("--step", required=True, help="the step it reads, e.g. decoder.1.out")
    t.add_argument(
        "--features", required=True, type=integer("--features", 1), help="d_sae, the features"
    )
    t.add_argument(
        "--l1",
        type=real("--l1", low=None, says="a finite number >= 0"),
        default=None,
        help="the L1 coefficient (features weighted by their decoder norms; default 1.0, none "
        "with --topk)",
    )
    t.add_argument("--topk", type=integer("--topk", 1), help="a TopK SAE keeping K features")
    t.add_argument("--transcoder-to", metavar="NAME", help="train a transcoder: step -> NAME")
    t.add_argument("--out", required=True, metavar="SAE", help="the SAE's folder")
    t.add_argument("--steps", type=integer("--steps", 1), default=2000, help="steps (2000)")
    t.add_argument(
        "--batch-size", type=integer("--batch-size", 1), default=1024, help="rows a step (1024)"
    )
    t.add_argument("--lr", type=real("--lr", 0.0, says="> 0"), default=4e-4, help="4e-4")
    t.add_argument("--seed", type=integer("--seed", 0, 2**32), default=0, help="seed (0)")
    t.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    overwrite_arg(t)
    threads_arg(t)
    t.set_defaults(func=cmd_train)

    e = ss.add_parser("eval", help="reconstruction and the model's loss with the SAE spliced in")
    e.add_argument("sae", metavar="SAE", help="an SAE folder (ours or SAELens's)")
    e.add_argument("checkpoint", metavar="MODEL", help="the model it was made for")
    e.add_argument(
        "file", metavar="FILE", help="a text file, one document a line (as record-corpus reads)"
    )
    e.add_argument(
        "--max-tokens", type=integer("--max-tokens", 2), default=2048, help="tokens (2048)"
    )
    e.add_argument(
        "--cards", type=integer("--cards", 0), default=6, help="feature cards in --html (6)"
    )
    _outputs(e)
    e.set_defaults(func=cmd_eval)

    f = ss.add_parser("features", help="feature cards: top contexts in a store, logit effect")
    f.add_argument("sae", metavar="SAE", help="an SAE folder")
    f.add_argument("checkpoint", metavar="MODEL", help="the model it was made for")
    f.add_argument("--store", required=True, metavar="DIR", help="the store to search")
    f.add_argument(
        "--feature", type=integer("--feature", 0), action="append", help="a feature (repeat)"
    )
    f.add_argument("--k", type=integer("--k", 1), default=8, help="contexts per feature (8)")
    _outputs(f)
    f.set_defaults(func=cmd_features)


def _outputs(p) -> None:
    p.add_argument("--json", metavar="FILE", help="the report as JSON ('-': stdout)")
    p.add_argument("--html", metavar="FILE", help="a self-contained page ('-': stdout)")
    overwrite_arg(p)
    threads_arg(p)


# -- train -------------------------------------------------------------------------------------


def cmd_train(args) -> int:
    from glassformer.corpus.sae import SAEConfig, StoreRows, TrainConfig
    from glassformer.corpus.store import open_store

    if args.topk is not None and args.l1:
        raise GlassformerError("--topk trains without an L1 penalty; leave --l1 out")
    if args.topk is not None and args.topk > args.features:
        raise GlassformerError(f"--topk {args.topk} is more than --features {args.features}")
    apart({"--out": args.out}, {"DIR": args.store})
    if not args.resume:
        output_folder(args.out, args.overwrite)
    elif not Path(args.out).is_dir():
        raise GlassformerError(
            f"--resume: {args.out} holds no SAE run; leave --resume out to start"
        )
    store = open_store(args.store)
    x = StoreRows(store, args.step)
    y = StoreRows(store, args.transcoder_to) if args.transcoder_to else None
    cfg = SAEConfig(
        d_in=x.shape[1],
        d_sae=args.features,
        step=args.step,
        architecture="topk" if args.topk else "standard",
        k=args.topk,
        d_out=y.shape[1] if y is not None else None,
        step_out=args.transcoder_to,
        apply_b_dec_to_input=not args.transcoder_to,  # a transcoder's b_dec is of its output
        model_name=store.index["model"]["name"],
    )
    l1 = 0.0 if args.topk else (1.0 if args.l1 is None else args.l1)
    tcfg = TrainConfig(
        steps=args.steps, batch_size=args.batch_size, lr=args.lr, l1=l1, seed=args.seed
    )
    from glassformer.training.autoencoder import train

    bar = _bar(args.steps, args.quiet)
    try:
        log = train(x, cfg, tcfg, args.out, y=y, resume=args.resume, callback=bar)
    finally:
        bar.close()
    if log:
        r = log[-1]
        print(
            f"step {r['step']}: mse {r['mse']:.4g}, explained variance "
            f"{r['explained_variance']:.4f} (training batch), L0 {r['l0']:.1f}, "
            f"dead {r['dead']} of {cfg.d_sae}; {r['elapsed_s']:.1f} s"
        )
    print(f"wrote {args.out} (SAELens format: cfg.json, sae_weights.safetensors)")
    return 0


class _bar:  # noqa: N801 (a callback)
    """The progress bar, drawn from the first step trained (a refusal before it draws none)."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.quiet, self.bar = total, quiet, None

    def __call__(self, row: dict) -> None:
        if self.bar is None and not self.quiet:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, initial=row["step"] - 1, unit="step", file=sys.stderr)
        if self.bar is not None:
            self.bar.n = row["step"]
            self.bar.set_postfix(
                mse=f"{row['mse']:.4g}", l0=f"{row['l0']:.1f}", dead=row["dead"], refresh=False
            )
            self.bar.update(0)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- eval and features -------------------------------------------------------------------------


def _checked_outputs(args, inputs: dict) -> None:
    apart({"--json": args.json, "--html": args.html}, inputs)
    for path in (args.json, args.html):
        if path != "-":
            output_file(path, args.overwrite)


def _sae_and_model(args):
    from glassformer.corpus import saelens
    from glassformer.corpus.evaluate import check_fits, step_widths

    cfg, p = saelens.read(args.sae)
    m = load_model(args.checkpoint)
    if m.cfg.arch != "decoder":
        raise GlassformerError(
            f"{args.checkpoint} is an {m.cfg.arch} model; sae eval and sae features read a "
            "decoder's stream (a language model) for now"
        )
    check_fits(cfg, step_widths(m.params, m.cfg, [0, 0]))
    return cfg, p, m


def cmd_eval(args) -> int:
    from glassformer.corpus.evaluate import cards, documents, evaluate

    _checked_outputs(args, {"SAE": args.sae, "CHECKPOINT": args.checkpoint, "FILE": args.file})
    cfg, p, m = _sae_and_model(args)
    bos = [m.tokenizer.bos_id] if cfg.prepend_bos and m.tokenizer.bos_id is not None else []
    if cfg.prepend_bos and not bos:
        note("the SAE was made on texts that start with BOS, and this tokenizer has none")
    lines = (bos + m.tokenizer.encode(t) for t in read_text(args.file).split("\n") if t.strip())
    docs = documents(lines, m.cfg.max_len, args.max_tokens)  # one a line, as a store reads them
    report, f = evaluate(m.params, m.cfg, cfg, p, docs)
    page = None
    if args.html:
        alive = np.flatnonzero((f > 0).any(axis=0))
        chosen = alive[np.argsort(-f[:, alive].max(axis=0), kind="stable")][: args.cards]
        page = _page(args, report, cards(m, cfg, p, docs, f, chosen))
    write_outputs(args, lambda: _text(report), data=report, data_what="the report", page=page)
    return 0


def _text(r: dict) -> str:
    loss = r["loss"]
    return "\n".join(
        [
            f"SAE of {r['sae']['step']}"
            + (f" -> {r['sae']['step_out']}" if r["sae"]["step_out"] else "")
            + f": {r['sae']['d_sae']} features ({r['sae']['architecture']}), "
            f"{r['rows']} rows",
            f"reconstruction MSE {r['mse']:.6g}   explained variance {r['explained_variance']:.4f}"
            f"   L0 {r['l0']:.2f}   dead {r['dead']} of {r['sae']['d_sae']}",
            f"next-token loss (nats, reference engine, float64): original {loss['clean']:.4f}  "
            f"SAE spliced in {loss['spliced']:.4f}  step zeroed {loss['zero']:.4f}  "
            f"(recovered {r['loss_recovered']:.1%})",
        ]
    )


def _page(args, report: dict | None, cs: list[dict]) -> str:
    from glassformer.explain import html_sae as H
    from glassformer.explain.html_touch import probe_page

    sections = [("report", "Evaluation", H.report_section(report))] if report else []
    sections.append(("cards", "Features", H.cards_section(cs)))
    return probe_page(f"SAE {args.sae}", {"model": args.checkpoint, "SAE": args.sae}, sections)


def cmd_features(args) -> int:
    from glassformer.corpus.evaluate import store_cards
    from glassformer.corpus.store import open_store

    _checked_outputs(args, {"SAE": args.sae, "CHECKPOINT": args.checkpoint, "--store": args.store})
    cfg, p, m = _sae_and_model(args)
    store = open_store(args.store)
    features = args.feature or list(range(min(8, cfg.d_sae)))
    for i in features:
        if i >= cfg.d_sae:
            raise GlassformerError(f"--feature {i}: the SAE has features 0..{cfg.d_sae - 1}")
    cs = store_cards(m, store, cfg, p, features, args.k)
    page = _page(args, None, cs) if args.html else None

    def text() -> str:
        lines = []
        for c in cs:
            lines.append(f"feature {c['feature']}: fires on {100 * c['fires']:.2f}% of rows")
            for e in c["examples"]:
                lines.append(f"  {e['value']:8.3f}  {e['before']}[{e['token']}]{e['after']}")
            if c["up"]:
                lines.append("  pushes up: " + " ".join(repr(t) for t, _ in c["up"]))
        return "\n".join(lines)

    write_outputs(args, text, data={"cards": cs}, data_what="the cards", page=page)
    return 0
