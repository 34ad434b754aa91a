"""Training and evaluation: `train` (lm, translate or classify, with a progress bar) and `eval`
(perplexity, BLEU + chrF, or accuracy on data).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from glassformer import weights
from glassformer.cli.checkpoints import writes_out
from glassformer.cli.common import (
    apart,
    device_arg,
    integer,
    last_step,
    load_model,
    need_torch,
    option_type,
    output_folder,
    overwrite_arg,
    threads_arg,
)
from glassformer.config import PRESETS, preset
from glassformer.devices import check_device, default_threads, use_threads
from glassformer.errors import GlassformerError, Interrupted
from glassformer.inputs import utf8
from glassformer.training import views


def add_parsers(sub) -> None:
    """The `train` and `eval` subcommands."""
    _add_train_parser(sub)
    _add_eval_parser(sub)


def _add_train_parser(sub) -> None:
    """`glassformer train TASK --out DIR ...`: its arguments, run by cmd_train."""
    tr = sub.add_parser(
        "train",
        help="train a model (lm, translate or classify)",
        description="Train a model and write checkpoints to --out. --set takes "
        "any Config field (d_model=128) or training field (lr=3e-4, bf16=true).",
    )
    tr.add_argument(
        "task",
        choices=["lm", "translate", "classify"],
        help="lm: decoder LM on text; translate: encoder-decoder on TSV pairs; "
        "classify: encoder language identification on TSV pairs",
    )
    tr.add_argument("--out", required=True, help="checkpoint directory (written atomically)")
    tr.add_argument(
        "--data",
        help="a shipped corpus (tinyshakespeare, eng-spa), the generated 'repeats' (random "
        "segments written twice: the induction-head demo) or a file path "
        "(default: tinyshakespeare for lm, eng-spa otherwise)",
    )
    tr.add_argument(
        "--valid",
        help="validation TSV (default: eng-spa-valid for the shipped "
        "pairs, else the last 500 pairs)",
    )
    tr.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="model config (default: char-lm, translator or encoder-classifier by task)",
    )
    tr.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a Config or TrainConfig field (repeatable)",
    )
    tr.add_argument(
        "--tokenizer",
        choices=["char", "word", "bpe", "sp-bpe"],
        help="tokenizer to build (default: char for lm, sp-bpe for translate, bpe for classify); "
        "bpe is byte-level, "
        "sp-bpe SentencePiece-style (words kept whole behind a ▁)",
    )
    tr.add_argument(
        "--vocab-size",
        type=integer("vocab-size", 1),
        default=None,
        help="BPE/word vocabulary (8000)",
    )
    tr.add_argument("--resume", action="store_true", help="continue the checkpoint in --out")
    tr.add_argument(
        "--new-data",
        action="store_true",
        help="with --resume: continue the run on --data (or --valid) other than the data it was "
        "trained on (train_config.json records that; other data is refused without this flag)",
    )
    overwrite_arg(tr)
    tr.add_argument(
        "--init",
        metavar="CKPT",
        help="start from this checkpoint's weights (fine-tuning; its tokenizer is reused)",
    )
    tr.add_argument(
        "--snapshot-views",
        metavar="TEXT",
        help="record a time-lapse: this probe text's attention maps, loss and head scores, "
        "into every checkpoint (views.safetensors; `serve` and `explain --over-training` "
        "show it)",
    )
    tr.add_argument(
        "--view-every",
        type=integer("view-every", 1),
        metavar="N",
        help="steps between recorded views (default: max_steps / 100)",
    )
    device_arg(tr, "training runs")
    threads_arg(
        tr,
        says="run PyTorch and NumPy's BLAS on N threads; the run keeps it, as --set threads=N "
        "(default: the cores less the other runnable tasks when the run starts, at least 1, "
        "kept by the run for --resume; OMP_NUM_THREADS, when set, is kept)",
    )
    tr.set_defaults(resumable=True)  # `run` leaves the threads to cmd_train
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=cmd_train)


def _add_eval_parser(sub) -> None:
    """`glassformer eval CHECKPOINT --data DATA ...`: its arguments, run by cmd_eval."""
    ev = sub.add_parser(
        "eval",
        help="evaluate a checkpoint on data",
        description="Perplexity (lm, text file), BLEU + chrF on decoded text "
        "(translate, TSV), or accuracy (classify, TSV).",
    )
    ev.add_argument("checkpoint")
    ev.add_argument("--data", required=True, help="a shipped corpus name or a file path")
    ev.add_argument(
        "--beam",
        type=option_type("beam"),
        default=None,
        help="beam width for translation (4; an encoder-decoder only)",
    )
    ev.add_argument(
        "--limit",
        type=option_type("limit"),
        default=None,
        help="evaluate only the first N examples",
    )
    device_arg(ev)
    threads_arg(ev)
    ev.set_defaults(func=cmd_eval)


TASK_PRESETS = {"lm": "char-lm", "translate": "translator", "classify": "encoder-classifier"}


@writes_out
def cmd_train(args) -> int:
    need_torch("train")
    _check_train_options(args)
    apart({"--out": args.out}, {"--data": args.data, "--valid": args.valid, "--init": args.init})
    from glassformer.training import train as T
    from glassformer.training.tasks import prepare_task

    model_sets, train_sets = _split_overrides(args.overrides)
    device = check_device(args.device)
    if args.threads is not None and "threads" in map(_key, train_sets):
        raise GlassformerError("--threads and --set threads both set the threads: give one")
    tokenizer, init_params, notes = None, None, []
    if args.resume:
        cfg, tcfg, tokenizer, note = _resume_settings(args, model_sets, train_sets)
        notes.append(note)
    else:
        output_folder(args.out, args.overwrite, " (or --resume to continue it)")
        cfg = preset(args.preset or TASK_PRESETS[args.task]).override(*model_sets)
        base = T.TrainConfig(task=args.task, **T.TASK_DEFAULTS[args.task], **_views_text(args))
        tcfg = base.override(*train_sets)
        weights.check_fits(cfg)
    tcfg = _with_view_every(args, tcfg)
    if args.threads is not None:  # (`run` set them already; the run keeps them, as --set does)
        tcfg = dataclasses.replace(tcfg, threads=args.threads)
    elif not args.resume and not tcfg.threads and (n := default_threads()) is not None:
        use_threads(n)  # a new run's default, kept: --resume computes on the same count
        tcfg = dataclasses.replace(tcfg, threads=n)
    was = T.saved_source(args.out) if args.resume else None  # the data it was trained on
    data = args.data or _recorded(was, "data", args.out)
    data = data or ("tinyshakespeare" if args.task == "lm" else "eng-spa")
    valid = args.valid or _recorded(was, "valid", args.out)
    valid = valid or ("eng-spa-valid" if data == "eng-spa" and not was else None)
    if args.init and not args.resume:  # resuming, the weights come from --out
        cfg, init_params, tokenizer = _init_model(args, model_sets)
    if args.task == "lm" and not args.resume and "block_size" not in map(_key, train_sets):
        if tcfg.block_size > cfg.max_len:  # the default context fits the model's (tiny: 32)
            tcfg = dataclasses.replace(tcfg, block_size=cfg.max_len)
            notes.append(
                f"glassformer: note: block_size {cfg.max_len}, the model's max_len (the default "
                f"{T.TrainConfig.block_size} is longer); --set block_size=N chooses another"
            )
    cfg, task = prepare_task(
        args.task,
        cfg,
        tcfg,
        data,
        valid,
        tokenizer=tokenizer,
        tokenizer_kind=args.tokenizer,
        vocab_size=args.vocab_size or 8000,
    )
    if init_params is not None:
        init_params = _fit_init(cfg, init_params)
    if args.resume:
        notes += _same_data(args, was, task.source)
    if tcfg.snapshot_views and (said := views.unknown_note(task.tokenizer, tcfg.snapshot_views)):
        notes.append(f"glassformer: note: --snapshot-views: {said}")
    notes.append(
        f"training {args.task}: {cfg.arch}, {weights.n_params(cfg):,} parameters, "
        f"{task.tokenizer.kind} tokenizer of {task.tokenizer.vocab_size} tokens, "
        f"{tcfg.max_steps} steps -> {args.out}"
    )
    if tcfg.bf16 and not T.bf16_supported(device):
        notes.append(f"glassformer: note: this {device} has no native bf16; training in fp32")
    progress = _Progress(tcfg.max_steps, disable=args.quiet, notes=notes)
    try:
        rows = T.train(
            cfg,
            tcfg,
            task,
            args.out,
            resume=args.resume,
            init_params=init_params,
            device=device,
            callback=progress,
        )
    except Interrupted as e:
        raise Interrupted(
            e.signum, f"{e}; continue with: glassformer train {args.task} --out {args.out} --resume"
        ) from None
    finally:
        progress.close()
    last = rows[-1]
    print(" ".join(f"{k}={_fmt(v)}" for k, v in last.items() if k != "bleu_signature"))
    if "bleu_signature" in last:
        print(f"BLEU signature: {last['bleu_signature']}")
    return 0


def _check_train_options(args) -> None:
    """Refuse an option that would do nothing in this run (before any work)."""
    if args.new_data and not args.resume:
        raise GlassformerError(
            "--new-data is for --resume (continuing a run on other data); a new run trains on "
            "the --data it is given: drop --new-data"
        )
    if args.task == "lm" and args.valid:
        raise GlassformerError(
            "--valid is for translate and classify; lm validates on the last 10% of --data"
        )
    if args.init:
        for flag, value in (("--tokenizer", args.tokenizer), ("--vocab-size", args.vocab_size)):
            if value is not None:
                raise GlassformerError(
                    f"{flag} does nothing with --init (the checkpoint's tokenizer is reused); "
                    f"drop {flag}"
                )
    kind = args.tokenizer or {"lm": "char"}.get(args.task)
    if kind == "char" and args.vocab_size is not None:
        raise GlassformerError(
            "--vocab-size does nothing with the char tokenizer (every character seen is one "
            "token); drop it, or choose --tokenizer word, bpe or sp-bpe"
        )


def _views_text(args) -> dict:
    """--snapshot-views as TrainConfig fields, checked ({} when not given): set before --set's
    fields, so that `--set view_every=N` goes with it."""
    if args.snapshot_views is None:
        return {}
    text = utf8(args.snapshot_views, "--snapshot-views")
    if not text.strip():
        raise GlassformerError(
            "--snapshot-views is empty: give the probe text whose views are recorded"
        )
    return {"snapshot_views": text}


def _with_view_every(args, tcfg):
    """The TrainConfig with --view-every applied (refused without a probe text)."""
    if args.view_every is None:
        return tcfg
    if not tcfg.snapshot_views:
        raise GlassformerError(
            "--view-every needs --snapshot-views TEXT, the probe text whose views are recorded"
        )
    return dataclasses.replace(tcfg, view_every=args.view_every)


def _resume_settings(args, model_sets: list[str], train_sets: list[str]):
    """(Config, TrainConfig, tokenizer) of the run in --out, with the --set training fields
    applied and said; anything that would change the model or its data is refused."""
    from glassformer.training import train as T

    out = Path(args.out)
    if args.overwrite:
        raise GlassformerError("give --resume (continue) or --overwrite (start again), not both")
    if not out.is_dir() or not any(out.iterdir()):
        raise GlassformerError(
            f"nothing to resume: {out} not found or empty; start without --resume"
        )
    saved = T.saved_train_config(out)
    if saved.task != args.task:
        raise GlassformerError(f"{out} was trained with `train {saved.task}`; resume it so")
    m = load_model(str(out))
    cfg, tokenizer = m.cfg, m.tokenizer
    for item in model_sets:
        changed = cfg.override(item)
        if changed != cfg:
            key = item.partition("=")[0].strip()
            raise GlassformerError(
                f"--set {item} changes the model ({key} is {getattr(cfg, key)} in {out}); a "
                "resumed run keeps its architecture: drop it, or start a new --out"
            )
    _same_as_started(args, out, cfg, tokenizer, model_sets)
    tcfg = dataclasses.replace(saved, **_views_text(args)).override(*train_sets)
    step = last_step(out / "log.csv")
    if step:  # said before the data is read; train() checks the step of the state itself
        T.check_steps_left(out, int(step), tcfg.max_steps)
    changes = [
        f"{f} {getattr(saved, f)} -> {getattr(tcfg, f)}"
        for f in saved.__dataclass_fields__
        if getattr(saved, f) != getattr(tcfg, f)
    ]
    note = f"resuming {out}{f' from step {step}' if step else ''}"
    return cfg, tcfg, tokenizer, note + (f"; {', '.join(changes)}" if changes else "")


# -- a resumed run's data: its own, or other data with --new-data ------------------------------


def _recorded(was: dict | None, part: str, out: str) -> str | None:
    """The corpus the run in `out` was trained on as its --data or --valid (`part`), which a
    resumed run reads when it is not given one; None when none is recorded. Gone: refused."""
    from glassformer import data as D

    if not was or not was[part]:
        return None
    name = was[part]["name"]
    if name not in D.SHIPPED and name not in D.GENERATED and not Path(name).exists():
        raise GlassformerError(
            f"the run in {out} was trained on --{part} {name}, which is gone: give --{part} "
            "with the same text (train_config.json records its sha256), or other data with "
            "--new-data"
        )
    return name


def _same_data(args, was: dict | None, now: dict) -> list[str]:
    """--resume continues a run on the data it was trained on (the sha256 of each corpus,
    recorded in train_config.json; a file moved is still itself): other data, or a file changed
    since, is refused unless --new-data consents, and then said in a note."""
    sha = {p: [x[p] and x[p]["sha256"] for x in (was, now)] for p in ("data", "valid") if was}
    changed = [p for p, (a, b) in sha.items() if a != b]
    if not changed and args.new_data:
        why = "does not record its data" if not was else "is given the data it was trained on"
        raise GlassformerError(
            f"--new-data does nothing here: the run in {args.out} {why}; drop --new-data"
        )
    notes = []
    for part in changed:
        old, new = (_corpus(x, part) for x in (was[part], now[part]))
        if args.new_data:
            notes.append(
                f"glassformer: note: --new-data: the run in {args.out} continues on --{part} "
                f"{new}; it was trained on {old} until now"
            )
        elif old == new:
            raise GlassformerError(
                f"{new} has changed since the run in {args.out} was trained on it (its sha256 is "
                "not the one train_config.json records): a resumed run continues on its own "
                "data; restore the file, or add --new-data to continue on it as it is now"
            )
        else:
            raise GlassformerError(
                f"--{part} {new} is not the data the run in {args.out} was trained on ({old}; "
                "train_config.json records its sha256): a resumed run continues on its own data; "
                f"give --{part} {old}, or add --new-data to continue on {new}"
            )
    return notes


def _corpus(x: dict | None, part: str) -> str:
    return x["name"] if x else "the last 500 pairs of --data"


def _init_model(args, model_sets: list[str]):
    """(Config, params, tokenizer) of the --init checkpoint, as a run started from it has them."""
    m = load_model(args.init)
    cfg, params, tokenizer = m.cfg, m.params, m.tokenizer
    return (cfg.override(*model_sets) if args.task == "classify" else cfg), params, tokenizer


def _key(item: str) -> str:
    return item.partition("=")[0].strip()


def _same_as_started(args, out: Path, cfg, tokenizer, model_sets: list[str]) -> None:
    """Re-running a run's own command with --resume is fine: --preset, --init, --tokenizer and
    --vocab-size may repeat what the run in `out` was started with; a value that would give
    another model or tokenizer is refused (a resumed run keeps both)."""
    fitted = {"vocab_size", "n_classes"}  # set from the data and tokenizer when a run starts
    given = []
    if args.preset:
        given.append((f"--preset {args.preset}", preset(args.preset).override(*model_sets)))
    if args.init:
        init_cfg, _, init_tok = _init_model(args, model_sets)
        given.append((f"--init {args.init}", init_cfg))
        if init_tok.to_json() != tokenizer.to_json():
            raise GlassformerError(
                f"--init {args.init} has another tokenizer than the run in {out}, which keeps its "
                "own when resumed: drop --init, or give the checkpoint the run was started from"
            )
    for flag, other in given:
        for f in dataclasses.fields(cfg):
            if f.name not in fitted and getattr(other, f.name) != getattr(cfg, f.name):
                raise GlassformerError(
                    f"{flag} gives {f.name} {getattr(other, f.name)}, but the run in {out} has "
                    f"{f.name} {getattr(cfg, f.name)}: a resumed run keeps its model; give the "
                    f"options it was started with, or drop {flag.split()[0]}"
                )
    for flag, value, saved in (
        ("--tokenizer", args.tokenizer, tokenizer.kind),
        ("--vocab-size", args.vocab_size, tokenizer.vocab_size),
    ):
        if value is not None and value != saved:
            raise GlassformerError(
                f"{flag} {value}: the run in {out} was started with {flag} {saved}, which a "
                f"resumed run keeps; drop {flag}, or start a new --out"
            )


def _split_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """--set items for the Config and for the TrainConfig; unknown keys are one clear error."""
    import dataclasses as dc

    from glassformer.config import Config
    from glassformer.training.train import TrainConfig

    model_keys = {f.name for f in dc.fields(Config)}
    train_keys = {f.name for f in dc.fields(TrainConfig)}
    model, train = [], []
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key in model_keys:
            model.append(item)
        elif key in train_keys:
            train.append(item)
        else:
            import difflib

            near = difflib.get_close_matches(key, model_keys | train_keys, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}? " if near else ""
            raise GlassformerError(
                f"--set {item!r}: unknown field {key!r}; {hint}model fields: "
                f"{', '.join(sorted(model_keys))}; training fields: "
                f"{', '.join(sorted(train_keys))}"
            )
    return model, train


def _fit_init(cfg, params: dict) -> dict:
    """Fine-tuning: keep the imported weights, add a fresh head where the new config has one."""
    fresh = weights.init(cfg, seed=0)

    def reusable(name: str) -> bool:
        return name in params and params[name].shape == fresh[name].shape

    return {n: params[n] if reusable(n) else fresh[n] for n in fresh}


class _Progress:
    """The training callback: a tqdm bar with loss, tokens/s and ETA; a line per evaluation."""

    def __init__(self, total: int, disable: bool = False, notes: list[str] | None = None):
        from tqdm import tqdm  # here, not at the start: a stop while it imports is said alone

        self.total, self.disable, self.notes = total, disable, notes or []
        self.bar, self.tqdm = None, tqdm

    def __call__(self, event) -> None:
        m = event.metrics
        if event.kind == "start":  # the run is set up (and resumed): say what it is, then draw
            for note in self.notes:
                print(note, file=sys.stderr, flush=True)
            self.bar = self.tqdm(
                total=self.total,
                initial=event.step,
                disable=self.disable,
                unit="step",
                dynamic_ncols=True,
                file=sys.stderr,
            )
        elif event.kind == "step":
            self.bar.n = event.step
            self.bar.set_postfix(
                loss=f"{m['loss']:.4f}",
                tok_s=f"{m['tokens_per_s']:.0f}",
                lr=f"{m['lr']:.2e}",
                refresh=False,
            )
            self.bar.update(0)
        elif event.kind == "eval":
            shown = {
                k: v
                for k, v in m.items()
                if k.startswith(("val", "bleu", "chrf")) and k != "bleu_signature"
            }
            self.tqdm.write(
                f"step {event.step}: " + " ".join(f"{k}={_fmt(v)}" for k, v in shown.items()),
                file=sys.stderr,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def cmd_eval(args) -> int:
    need_torch("eval")
    m = load_model(args.checkpoint, device=args.device)
    print(m.evaluate(args.data, beam=args.beam, limit=args.limit))
    return 0
