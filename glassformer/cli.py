"""The `glassformer` command line: the only module that prints or exits.

    glassformer walkthrough hello-world|self-attention [--json FILE] [--all] [REPORT OPTIONS]
    glassformer config [--preset NAME] [--set key=value ...]
    glassformer init OUT [--preset NAME] [--set key=value ...] [--tokenizer ...] [--seed N]
    glassformer generate CKPT "text" [--strategy greedy|sample|beam] [--engine ...]
    glassformer explain CKPT "text" [--json FILE] [--only SUBSTRING] [REPORT OPTIONS]
    glassformer train lm|translate|classify --out DIR [--data ...] [--set key=value] [--resume]
    glassformer translate CKPT "text" ... | --input FILE [--beam N]
    glassformer eval CKPT --data FILE
    glassformer export CKPT OUT [--dtype float16]
    glassformer import-hf HF_DIR OUT           (GPT-2, BERT / MiniLM, Marian folders)
    glassformer export-hf CKPT OUT             (decoder -> GPT-2, encoder -> BERT)
    glassformer embed MODEL "text" ... [--engine torch|reference] [--json]

Wherever a checkpoint is taken, a Hugging Face model folder works too (read on the fly).

REPORT OPTIONS: --html FILE (one self-contained page), --png DIR (attention heatmaps),
--layers 0,1 and --heads 0 (only these blocks and heads of the model).

Every user error becomes one line on stderr and exit status 2; nothing here does math.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from glassformer import loading, weights
from glassformer import reference as R
from glassformer.config import PRESETS, preset
from glassformer.errors import GlassformerError
from glassformer.explain.text import render
from glassformer.trace import Trace, tracing

EXIT_USAGE = 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except GlassformerError as e:
        print(f"glassformer: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("glassformer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `glassformer ... | head`
        return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="glassformer",
        description="The transformer you can see through: every matrix of the articles' math.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    w = sub.add_parser(
        "walkthrough",
        help="an article's worked example, step by step",
        description="Print an article's worked example with its numbers.",
    )
    w.add_argument(
        "name",
        choices=["hello-world", "self-attention"],
        help="hello-world: The Random Transformer; self-attention: Raschka ch. 3",
    )
    w.add_argument(
        "--json",
        metavar="FILE",
        help="write every step (name, equation, shape, values) as JSON to FILE ('-' for stdout)",
    )
    w.add_argument(
        "--all", action="store_true", help="print every recorded step, not only the narrated ones"
    )
    w.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the random-weight parts (hello-world; default 0)",
    )
    _report_args(w)
    w.set_defaults(func=cmd_walkthrough)

    c = sub.add_parser(
        "config",
        help="print a preset's config as JSON",
        description="Print a config (a preset with --set overrides) as JSON.",
    )
    _config_args(c)
    c.set_defaults(func=cmd_config)

    i = sub.add_parser(
        "init",
        help="write a checkpoint with seeded random weights",
        description="Create a checkpoint directory (config.json, "
        "model.safetensors, tokenizer.json) with seeded random weights.",
    )
    i.add_argument("out", help="output checkpoint directory")
    _config_args(i)
    i.add_argument(
        "--tokenizer",
        choices=["article", "char", "word"],
        default="article",
        help="article: the Random Transformer's 10 words (default); char/word: built from --corpus",
    )
    i.add_argument("--corpus", metavar="FILE", help="UTF-8 text to build a char/word vocabulary")
    i.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    i.add_argument("--std", type=float, default=0.02, help="weight std (default 0.02)")
    i.set_defaults(func=cmd_init)

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
        type=int,
        default=None,
        help="stop after this many tokens (default: up to max_len)",
    )
    g.add_argument(
        "--engine",
        choices=["auto", "reference", "torch"],
        default="auto",
        help="reference: NumPy float64; torch: PyTorch with a KV cache; auto: torch "
        "if installed (default)",
    )
    _decoding_args(g)
    g.set_defaults(func=cmd_generate)

    e = sub.add_parser(
        "explain",
        help="trace every matrix of one forward pass",
        description="Run the reference engine on TEXT and print every intermediate as a "
        "labelled matrix (or write them as JSON, a self-contained HTML report, or PNG heatmaps).",
    )
    e.add_argument("checkpoint", help="checkpoint directory")
    e.add_argument("text", help="input text (the source, for an encoder-decoder)")
    e.add_argument(
        "--target", help="decoder text for an encoder-decoder (default: the greedy output)"
    )
    e.add_argument("--json", metavar="FILE", help="write the trace as JSON to FILE ('-' stdout)")
    e.add_argument("--only", metavar="SUBSTRING", help="print only steps whose name contains it")
    e.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="decoder: also generate this "
        "many tokens and explain each step (encoder-decoder: up to max_len)",
    )
    _decoding_args(e)
    _report_args(e)
    e.set_defaults(func=cmd_explain)

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
        help="a shipped corpus (tinyshakespeare, eng-spa) or a file path "
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
        help="tokenizer to build (default: char for lm, bpe otherwise); bpe is byte-level, "
        "sp-bpe SentencePiece-style (words kept whole behind a ▁)",
    )
    tr.add_argument("--vocab-size", type=int, default=8000, help="BPE/word vocabulary (8000)")
    tr.add_argument("--resume", action="store_true", help="continue the checkpoint in --out")
    tr.add_argument(
        "--init",
        metavar="CKPT",
        help="start from this checkpoint's weights (fine-tuning; its tokenizer is reused)",
    )
    tr.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=cmd_train)

    tl = sub.add_parser(
        "translate",
        help="translate sentences with an encoder-decoder",
        description="Translate TEXT arguments, or --input FILE (one sentence a "
        "line); translations go to stdout, one a line.",
    )
    tl.add_argument("checkpoint")
    tl.add_argument("text", nargs="*", help="sentences to translate")
    tl.add_argument("--input", metavar="FILE", help="a UTF-8 file, one sentence a line")
    tl.add_argument("--beam", type=int, default=4, help="beam width (default 4; 1 = greedy)")
    tl.set_defaults(func=cmd_translate)

    ex = sub.add_parser(
        "export",
        help="copy a checkpoint's model and tokenizer, e.g. to float16",
        description="Write CKPT's config, weights (in --dtype) and tokenizer to "
        "OUT, without the training state: a small checkpoint to ship.",
    )
    ex.add_argument("checkpoint")
    ex.add_argument("out")
    ex.add_argument("--dtype", choices=list(weights.STORABLE_DTYPES), default="float16")
    ex.set_defaults(func=cmd_export)

    ev = sub.add_parser(
        "eval",
        help="evaluate a checkpoint on data",
        description="Perplexity (lm, text file), BLEU + chrF on decoded text "
        "(translate, TSV), or accuracy (classify, TSV).",
    )
    ev.add_argument("checkpoint")
    ev.add_argument("--data", required=True, help="a shipped corpus name or a file path")
    ev.add_argument("--beam", type=int, default=4, help="beam width for translation (4)")
    ev.add_argument("--limit", type=int, default=0, help="evaluate only the first N examples")
    ev.set_defaults(func=cmd_eval)

    ih = sub.add_parser(
        "import-hf",
        help="convert a Hugging Face model folder (GPT-2, BERT/MiniLM, Marian) to a checkpoint",
        description="Read HF_DIR (config.json, model.safetensors or a weights-only "
        "pytorch_model.bin, tokenizer.json or vocab files) and write a glassformer checkpoint "
        "to OUT. Every command also reads HF_DIR directly; this makes the conversion explicit "
        "and reports what was left out.",
    )
    ih.add_argument("hf_dir")
    ih.add_argument("out")
    ih.add_argument("--dtype", choices=list(weights.STORABLE_DTYPES), default="float32")
    ih.set_defaults(func=cmd_import_hf)

    xh = sub.add_parser(
        "export-hf",
        help="write a checkpoint as a Hugging Face folder (decoder: GPT-2; encoder: BERT)",
        description="Write CKPT as a folder that transformers loads: a decoder-only model as "
        "GPT2LMHeadModel, an encoder without a classifier as BertModel (float32 weights).",
    )
    xh.add_argument("checkpoint")
    xh.add_argument("out")
    xh.set_defaults(func=cmd_export_hf)

    em = sub.add_parser(
        "embed",
        help="sentence embeddings from an encoder (e.g. all-MiniLM-L6-v2)",
        description="Mean of the encoder's outputs over the tokens, divided by its length "
        "(L2): one unit vector per TEXT, and the cosine similarity of every pair.",
    )
    em.add_argument("checkpoint", help="a glassformer checkpoint or a Hugging Face folder")
    em.add_argument("text", nargs="+")
    em.add_argument(
        "--engine",
        choices=["torch", "reference"],
        default="torch",
        help="torch (float32, batched; default) or reference (NumPy float64)",
    )
    em.add_argument("--json", action="store_true", help="print JSON for programs")
    em.set_defaults(func=cmd_embed)
    return p


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write one self-contained HTML page (no network needed) that follows the data "
        "through the model, instead of printing the steps",
    )
    p.add_argument(
        "--png",
        metavar="DIR",
        help="write one attention heatmap PNG per layer, head and kind to DIR (needs matplotlib)",
    )
    p.add_argument(
        "--layers",
        metavar="LIST",
        help="only these blocks of the model, counted from 0, e.g. 0,1 (every output)",
    )
    p.add_argument(
        "--heads", metavar="LIST", help="only these attention heads, counted from 0, e.g. 0"
    )


def _decoding_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--strategy",
        choices=["greedy", "sample", "beam"],
        default="greedy",
        help="greedy (default), sample (temperature/top-k/top-p) or beam search",
    )
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (1.0)")
    p.add_argument("--top-k", type=int, default=None, help="sample from the k most likely")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling threshold")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (same seed, same text)")
    p.add_argument("--beam-width", type=int, default=4, help="beam search width (4)")
    p.add_argument(
        "--length-penalty",
        type=float,
        default=1.0,
        help="beam score = log-prob / generated_tokens^penalty (1.0)",
    )


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preset",
        default="hello-world",
        choices=list(PRESETS),
        help="starting config (default hello-world)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set d_model=64 (repeatable)",
    )


# -- commands -----------------------------------------------------------------------------------


WALKTHROUGH_TITLES = {
    "hello-world": "The Random Transformer: “Hello World” → “Hola Mundo”, every step",
    "self-attention": "Self-attention (Raschka, ch. 3): “Your journey starts with one step”",
}


def cmd_walkthrough(args) -> int:
    from glassformer import walkthrough

    layers, heads = _indices(args.layers, "--layers"), _indices(args.heads, "--heads")
    trace = (
        walkthrough.hello_world(seed=args.seed)
        if args.name == "hello-world"
        else walkthrough.self_attention()
    )
    shown = _select(trace, layers, heads)
    written = _write_reports(
        trace,
        args,
        layers,
        heads,
        title=WALKTHROUGH_TITLES[args.name],
        meta={"walkthrough": args.name, "seed": str(args.seed)}
        if args.name == "hello-world"
        else {"walkthrough": args.name},
    )
    if args.json:
        _write_json(args.json, {"walkthrough": args.name, **shown.to_dict()})
        if args.json == "-":
            return 0
    if not written:
        print(render(shown, narrated=not args.all) + ("\n" if args.json else ""))
    if args.json:
        print(f"wrote {len(shown)} steps to {args.json}")
    print("\n".join(written), end="\n" if written else "")
    return 0


def cmd_config(args) -> int:
    cfg = preset(args.preset).override(*args.overrides)
    print(cfg.to_json(), end="")
    print(f"# {weights.n_params(cfg):,} parameters", file=sys.stderr)
    return 0


def cmd_init(args) -> int:
    from glassformer import tokenizer as tk

    cfg = preset(args.preset).override(*args.overrides)
    if args.tokenizer == "article":
        tok = tk.article_tokenizer()
    else:
        if not args.corpus:
            raise GlassformerError(
                f"--tokenizer {args.tokenizer} needs --corpus FILE to build its vocabulary"
            )
        text = _read_text(args.corpus)
        cls = tk.CharTokenizer if args.tokenizer == "char" else tk.WordTokenizer
        tok = cls.train([text])
    if cfg.vocab_size != tok.vocab_size:
        cfg = cfg.override(f"vocab_size={tok.vocab_size}")
    params = weights.init(cfg, seed=args.seed, std=args.std)
    weights.save(args.out, cfg, params, tokenizer=tok)
    print(
        f"wrote {args.out}: {cfg.arch}, {weights.n_params(cfg):,} parameters, "
        f"{args.tokenizer} tokenizer of {tok.vocab_size} tokens"
    )
    return 0


def cmd_generate(args) -> int:
    from glassformer import inference

    cfg, params, tok = _load(args.checkpoint)
    if cfg.arch == "encoder":
        raise GlassformerError("an encoder-only model does not generate; use `explain`")
    ids = _encode(tok, args.text, cfg)
    src, prompt = (ids, _bos(tok)) if cfg.arch == "encoder-decoder" else (None, ids)
    step = inference.step_function(args.engine, cfg, params, src)
    out = _run_decoding(args, step, prompt, tok, cfg).ids
    print(tok.decode(out[len(prompt) :] if cfg.arch == "encoder-decoder" else out))
    return 0


def _run_decoding(args, step, prompt: list[int], tok, cfg):
    """Greedy, sampling or beam search as the decoding options say: a Generation or BeamResult."""
    from glassformer import inference

    max_new = args.max_new_tokens if args.max_new_tokens is not None else cfg.max_len
    if max_new < 1:
        raise GlassformerError("--max-new-tokens must be at least 1")
    return inference.run_decoding(
        step,
        prompt,
        max_new_tokens=max_new,
        eos_id=tok.eos_id,
        max_len=cfg.max_len,
        strategy=args.strategy,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        beam_width=args.beam_width,
        length_penalty=args.length_penalty,
    )


def cmd_explain(args) -> int:
    layers, heads = _indices(args.layers, "--layers"), _indices(args.heads, "--heads")
    cfg, params, tok = _load(args.checkpoint)
    ids = _encode(tok, args.text, cfg)
    words = tok.tokens(ids)
    gen = None
    if cfg.arch == "encoder-decoder":
        if args.target is not None:
            tgt = _bos(tok) + _encode(tok, args.target, cfg, room=1)
        else:
            gen = _run_decoding(args, R.next_token_logits(params, cfg, ids), _bos(tok), tok, cfg)
            tgt = gen.ids
        with tracing(labels={"encoder": words, "decoder": tok.tokens(tgt)}) as trace:
            R.forward(params, cfg, tgt, src_ids=ids)
    elif cfg.arch == "decoder":
        if args.max_new_tokens:
            gen = _run_decoding(args, R.next_token_logits(params, cfg), ids, tok, cfg)
            ids = gen.ids
            words = tok.tokens(ids)
        with tracing(labels={"decoder": words}) as trace:
            R.forward(params, cfg, ids)
    else:
        with tracing(labels={"encoder": words}) as trace:
            R.classify(params, cfg, ids) if cfg.n_classes else R.encode(params, cfg, ids)
    n_layers = (
        f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}"
        if cfg.arch == "encoder-decoder"
        else max(cfg.n_encoder_layers, cfg.n_decoder_layers)
    )
    meta = {
        "checkpoint": args.checkpoint,
        "input": args.text,
        "model": f"{cfg.arch}, {n_layers} "
        f"layers, d_model {cfg.d_model}, {cfg.n_heads} heads of {cfg.head_dim}, d_ff {cfg.d_ff}, "
        f"vocabulary {cfg.vocab_size}, {cfg.norm}-LN, {cfg.positions} positions",
    }
    report = dict(
        title=f"glassformer explain: “{args.text}”",
        meta=meta,
        vocab=tok.vocab,
        params=params,
        generation=gen,
    )
    _show_trace(trace, args, layers, heads, report)
    return 0


# -- training and evaluation --------------------------------------------------------------------

TASK_PRESETS = {"lm": "char-lm", "translate": "translator", "classify": "encoder-classifier"}


def _split_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """--set items for the Config and for the TrainConfig; unknown keys are one clear error."""
    import dataclasses as dc

    from glassformer.config import Config
    from glassformer.train import TrainConfig

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
            raise GlassformerError(
                f"--set {item!r}: unknown field {key!r}; model fields: "
                f"{', '.join(sorted(model_keys))}; training fields: "
                f"{', '.join(sorted(train_keys))}"
            )
    return model, train


def cmd_train(args) -> int:
    from glassformer import train as T

    model_sets, train_sets = _split_overrides(args.overrides)
    cfg = preset(args.preset or TASK_PRESETS[args.task]).override(*model_sets)
    tcfg = T.TrainConfig(task=args.task).override(*train_sets)
    data = args.data or ("tinyshakespeare" if args.task == "lm" else "eng-spa")
    valid = args.valid or ("eng-spa-valid" if data == "eng-spa" else None)
    tokenizer, init_params = None, None
    if args.init:
        init_cfg, init_params, tokenizer = _load(args.init)
        cfg = init_cfg if args.task != "classify" else init_cfg.override(*model_sets)
    if args.resume:
        saved_cfg, _, tokenizer = _load(args.out)
        cfg = saved_cfg
    cfg, task = T.prepare_task(
        args.task,
        cfg,
        tcfg,
        data,
        valid,
        tokenizer=tokenizer,
        tokenizer_kind=args.tokenizer,
        vocab_size=args.vocab_size,
    )
    if init_params is not None:
        init_params = _fit_init(cfg, init_params)
    print(
        f"training {args.task}: {cfg.arch}, {weights.n_params(cfg):,} parameters, "
        f"{task.tokenizer.kind} tokenizer of {task.tokenizer.vocab_size} tokens, "
        f"{tcfg.max_steps} steps -> {args.out}",
        file=sys.stderr,
    )
    if tcfg.bf16 and not T.bf16_supported(args.device):
        print(
            f"glassformer: note: this {args.device} has no native bf16; training in fp32",
            file=sys.stderr,
        )
    progress = _Progress(tcfg.max_steps, disable=args.quiet)
    try:
        rows = T.train(
            cfg,
            tcfg,
            task,
            args.out,
            resume=args.resume,
            init_params=init_params,
            device=args.device,
            callback=progress,
        )
    finally:
        progress.close()
    last = rows[-1]
    print(" ".join(f"{k}={_fmt(v)}" for k, v in last.items() if k != "bleu_signature"))
    if "bleu_signature" in last:
        print(f"BLEU signature: {last['bleu_signature']}")
    return 0


def _fit_init(cfg, params: dict) -> dict:
    """Fine-tuning: keep the imported weights, add a fresh head where the new config has one."""
    fresh = weights.init(cfg, seed=0)

    def reusable(name: str) -> bool:
        return name in params and params[name].shape == fresh[name].shape

    return {n: params[n] if reusable(n) else fresh[n] for n in fresh}


class _Progress:
    """The training callback: a tqdm bar with loss, tokens/s and ETA; a line per evaluation."""

    def __init__(self, total: int, disable: bool = False):
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, disable=disable, unit="step", dynamic_ncols=True, file=sys.stderr
        )
        self.tqdm = tqdm

    def __call__(self, event) -> None:
        m = event.metrics
        if event.kind == "step":
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
        self.bar.close()


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def cmd_translate(args) -> int:
    import torch

    from glassformer.inference import translate
    from glassformer.torch_model import from_params

    cfg, params, tok = _load(args.checkpoint)
    if cfg.arch != "encoder-decoder":
        raise GlassformerError(
            f"{args.checkpoint} is a {cfg.arch} model; translate needs an encoder-decoder"
        )
    sentences = list(args.text)
    if args.input:
        sentences += [line for line in _read_text(args.input).splitlines() if line.strip()]
    if not sentences:
        raise GlassformerError("nothing to translate: give sentences or --input FILE")
    for s in sentences:
        _encode(tok, s, cfg)
    model = from_params(cfg, params, dtype=torch.float32).eval()
    for line in translate(model, tok, sentences, beam=args.beam):
        print(line)
    return 0


def cmd_export(args) -> int:
    cfg, params, tok = loading.load(args.checkpoint)
    weights.save(args.out, cfg, params, tokenizer=tok, dtype=args.dtype)
    size = (Path(args.out) / weights.WEIGHTS_FILE).stat().st_size
    print(
        f"wrote {args.out}: {weights.n_params(cfg):,} parameters as {args.dtype} "
        f"({size / 1e6:.1f} MB)"
    )
    return 0


def cmd_import_hf(args) -> int:
    from glassformer import hf_dir

    if not hf_dir.is_hf_folder(args.hf_dir):
        raise GlassformerError(
            f"{args.hf_dir} is not a Hugging Face model folder (no config.json with a "
            "model_type); give the folder save_pretrained wrote"
        )
    imp = hf_dir.load(args.hf_dir)
    weights.save(args.out, imp.cfg, imp.params, tokenizer=imp.tokenizer, dtype=args.dtype)
    print(
        f"imported {imp.family} from {args.hf_dir}: {imp.cfg.arch}, "
        f"{weights.n_params(imp.cfg):,} parameters -> {args.out}"
    )
    for name, reason in imp.skipped.items():
        print(f"  left out {name}: {reason}")
    for note in imp.notes:
        print(f"  {note}")
    return 0


def cmd_export_hf(args) -> int:
    from glassformer import hf_dir

    cfg, params, tok = loading.load(args.checkpoint)
    family, out = hf_dir.export(args.out, cfg, params, tok)
    print(f"wrote {out}: Hugging Face {family} ({weights.n_params(cfg):,} parameters, float32)")
    return 0


def cmd_embed(args) -> int:
    from glassformer import inference

    cfg, params, tok = _load(args.checkpoint)
    if not cfg.has_encoder:
        raise GlassformerError(f"embed needs an encoder; {args.checkpoint} is arch={cfg.arch!r}")
    ids = [_encode(tok, t, cfg) for t in args.text]
    E = inference.embed(cfg, params, ids, args.engine)  # (N, C)
    cosine = E @ E.T  # unit vectors: dot product = cosine similarity
    if args.json:
        items = [
            {"text": t, "tokens": tok.tokens(x), "ids": x, "embedding": e.tolist()}
            for t, x, e in zip(args.text, ids, E, strict=True)
        ]
        out = {"model": args.checkpoint, "engine": args.engine, "dim": int(E.shape[1])}
        print(json.dumps(out | {"embeddings": items, "cosine": cosine.tolist()}))
        return 0
    for k, (t, e) in enumerate(zip(args.text, E, strict=True)):
        head = ", ".join(f"{v:+.4f}" for v in e[:6])
        print(f"[{k}] {t!r}: {E.shape[1]} dims, |e| = {np.linalg.norm(e):.4f}  [{head}, ...]")
    if len(args.text) > 1:
        print("cosine similarity:")
        for k, row in enumerate(cosine):
            print(f"  [{k}] " + " ".join(f"{v:6.3f}" for v in row))
    return 0


def cmd_eval(args) -> int:
    import torch

    from glassformer import data as D
    from glassformer import metrics
    from glassformer.inference import classify, translate
    from glassformer.torch_model import from_params

    cfg, params, tok = _load(args.checkpoint)
    model = from_params(cfg, params, dtype=torch.float32).eval()
    if cfg.arch == "decoder":
        ids = torch.tensor(tok.encode(D.read_text(args.data)))
        if args.limit:
            ids = ids[: args.limit]
        T, total, n = cfg.max_len, 0.0, 0
        with torch.no_grad():
            for i in range(0, len(ids) - 1, T):
                x, y = ids[i : i + T][None], ids[i + 1 : i + T + 1][None]
                x = x[:, : y.shape[1]]
                loss = torch.nn.functional.cross_entropy(model(x)[0], y[0], reduction="sum")
                total, n = total + loss.item(), n + y.numel()
        print(
            f"loss {total / n:.4f} perplexity {metrics.perplexity(total / n):.3f} "
            f"({n} tokens, windows of {T})"
        )
        return 0
    pairs = D.read_pairs(args.data)
    if args.limit:
        pairs = pairs[: args.limit]
    if cfg.arch == "encoder-decoder":
        hyps = translate(model, tok, [s for s, _ in pairs], beam=args.beam)
        print(metrics.translation_scores(hyps, [t for _, t in pairs]).summary())
        return 0
    ex = D.language_id(pairs)
    pred = classify(model, tok, [s for s, _ in ex])
    print(f"accuracy {metrics.accuracy(pred, [y for _, y in ex]):.4f} ({len(ex)} sentences)")
    return 0


# -- helpers ------------------------------------------------------------------------------------


def _show_trace(trace: Trace, args, layers, heads, report: dict) -> None:
    shown = _select(trace, layers, heads)
    written = _write_reports(trace, args, layers, heads, **report)
    if args.json:
        _write_json(args.json, shown.to_dict())
        if args.json == "-":
            return
    if not written:
        print(render(shown, only=args.only) + ("\n" if args.json else ""))
    if args.json:
        print(f"wrote {len(shown)} steps to {args.json}")
    print("\n".join(written), end="\n" if written else "")


def _indices(text: str | None, flag: str) -> list[int] | None:
    """'0,2' -> [0, 2] for --layers / --heads; one clear error for anything else."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    if not all(t.isdecimal() for t in items):
        raise GlassformerError(
            f"{flag} {text!r}: give numbers counted from 0, separated by commas, e.g. {flag} 0,1"
        )
    return sorted({int(t) for t in items})


def _select(trace: Trace, layers, heads) -> Trace:
    """The trace with only the chosen layers and heads (an unknown one is an error)."""
    from glassformer.explain.select import select_steps

    if layers is None and heads is None:
        return trace
    return Trace(select_steps(trace, layers, heads), trace.labels)


def _write_reports(trace: Trace, args, layers, heads, **html_options) -> list[str]:
    """Write --html and --png; return what was written, as lines to print."""
    lines = []
    if args.html:
        from glassformer.explain.html import render_html

        page = render_html(trace, layers=layers, heads=heads, **html_options)
        _write_text(args.html, page)
        lines.append(f"wrote {args.html} ({len(page.encode('utf-8')) / 1e6:.2f} MB)")
    if args.png:
        from glassformer.explain.plots import write_attention_pngs

        paths = write_attention_pngs(trace, args.png, layers=layers, heads=heads)
        lines.append(f"wrote {len(paths)} attention heatmaps to {args.png}")
    return lines


def _load(path: str):
    cfg, params, tok = loading.load(path)
    if tok is None:
        raise GlassformerError(
            f"checkpoint {path} has no {weights.TOKENIZER_FILE}: text cannot "
            "be encoded; save it with its tokenizer"
        )
    return cfg, params, tok


def _bos(tok) -> list[int]:
    if tok.bos_id is None:
        raise GlassformerError("the tokenizer has no start token (SOS/BOS) to start decoding from")
    return [tok.bos_id]


def _encode(tok, text: str, cfg, room: int = 0) -> list[int]:
    """Token ids of user text, with the checks the engines expect (never empty, never too long)."""
    if not text.strip():
        raise GlassformerError("the text is empty: give at least one word")
    ids, unknown = tok.encode_for_model(text)
    if not ids:
        raise GlassformerError("the text has no tokens: give at least one word")
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        print(
            f"glassformer: note: {len(unknown)} unknown token(s) mapped to "
            f"{tok.specials.get('unk')}: {shown}",
            file=sys.stderr,
        )
    limit = cfg.max_len - room
    if len(ids) > limit:
        raise GlassformerError(
            f"the text has {len(ids)} tokens but the model takes at most "
            f"{limit} (max_len {cfg.max_len}); shorten it"
        )
    return ids


def _read_text(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise GlassformerError(f"cannot read {path}: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise GlassformerError(f"{path}, line {line}: not valid UTF-8 text") from None
    if not text.strip():
        raise GlassformerError(f"{path} is empty")
    return text


def _write_json(path: str, data: dict) -> None:
    text = json.dumps(data, ensure_ascii=False, default=_json_default)
    if path == "-":
        print(text)
        return
    _write_text(path, text + "\n")


def _write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise GlassformerError(f"cannot write {path}: {e.strerror}") from None


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


if __name__ == "__main__":
    sys.exit(main())
