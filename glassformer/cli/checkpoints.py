"""Checkpoints and their configs: `models` (every name a command takes), `config`, `init`,
`export`, `import-hf`, `import-nanogpt`, `export-hf`, and the encoders' commands: `embed`
(sentence embeddings of a checkpoint or a Hugging Face folder) and `classify` (a classifier's
class of each text, with its probability).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import numpy as np

from glassformer import files, weights
from glassformer.cli.common import (
    SEED,
    apart,
    config_args,
    device_arg,
    input_lines,
    integer,
    load_model,
    need_torch,
    note,
    output_folder,
    overwrite_arg,
    read_text,
    real,
    threads_arg,
)
from glassformer.cli.flags import said
from glassformer.config import preset
from glassformer.errors import GlassformerError
from glassformer.model import Model


def add_parsers(sub) -> None:
    _add_config_and_init(sub)
    _add_conversions(sub)
    _add_encoder_uses(sub)


def _add_config_and_init(sub) -> None:
    """models, config and init: the names there are, a config, a checkpoint of random weights."""
    ls = sub.add_parser(
        "models",
        help="list the shipped models, the presets and the models in this folder",
        description="List every model name a command takes: the models shipped in the clone's "
        "models/ (with their cards' first line), the presets (seeded random weights), and the "
        "folders in FOLDER and FOLDER/runs that are models (glassformer checkpoints, Hugging "
        "Face folders, nanoGPT out_dirs). Nothing is read but config.json and the cards; "
        "nothing is downloaded, ever.",
    )
    ls.add_argument("folder", nargs="?", default=".", help="where to look (default: here)")
    ls.add_argument("--json", action="store_true", help="print JSON for programs")
    ls.set_defaults(func=cmd_models)

    c = sub.add_parser(
        "config",
        help="print a preset's config as JSON",
        description="Print a config (a preset with --set overrides) as JSON.",
    )
    config_args(c)
    c.set_defaults(func=cmd_config)

    i = sub.add_parser(
        "init",
        help="write a checkpoint with seeded random weights",
        description="Create a checkpoint directory (config.json, "
        "model.safetensors, tokenizer.json) with seeded random weights.",
    )
    i.add_argument("out", help="output checkpoint directory")
    config_args(i)
    i.add_argument(
        "--tokenizer",
        choices=["article", "char", "word"],
        default="article",
        help="article: the Random Transformer's 10 words (default); char/word: built from --corpus",
    )
    i.add_argument("--corpus", metavar="FILE", help="UTF-8 text to build a char/word vocabulary")
    i.add_argument("--seed", type=SEED, default=0, help="weight seed (default 0)")
    i.add_argument(
        "--std",
        type=real("std", 0.0, says="a finite number > 0"),
        default=0.02,
        help="weight std (default 0.02)",
    )
    overwrite_arg(i)
    i.set_defaults(func=cmd_init)


def _add_conversions(sub) -> None:
    """export, import-hf, import-nanogpt and export-hf: a model written in another form."""
    ex = sub.add_parser(
        "export",
        help="copy a checkpoint's model and tokenizer, e.g. to float16",
        description="Write CKPT's config, weights (in --dtype) and tokenizer to "
        "OUT, without the training state: a small checkpoint to ship.",
    )
    ex.add_argument("checkpoint")
    ex.add_argument("out")
    ex.add_argument("--dtype", choices=list(weights.STORABLE_DTYPES), default="float16")
    ex.add_argument(
        "--average",
        type=integer("--average", 1, says="at least 1"),
        metavar="K",
        help="export the mean of the last K weight snapshots (train with keep_snapshots=K)",
    )
    overwrite_arg(ex)
    ex.set_defaults(func=cmd_export)

    ih = sub.add_parser(
        "import-hf",
        help="convert a Hugging Face model folder (GPT-2, BERT/MiniLM, Marian, Pegasus, Llama, "
        "Qwen2) to a checkpoint",
        description="Read HF_DIR (config.json, model.safetensors or a weights-only "
        "pytorch_model.bin, tokenizer.json or vocab files) and write a glassformer checkpoint "
        "to OUT. Every command also reads HF_DIR directly; this makes the conversion explicit "
        "and reports what was left out.",
    )
    ih.add_argument("hf_dir")
    ih.add_argument("out")
    ih.add_argument("--dtype", choices=list(weights.STORABLE_DTYPES), default="float32")
    overwrite_arg(ih)
    ih.set_defaults(func=cmd_import_hf)

    ing = sub.add_parser(
        "import-nanogpt",
        help="convert a nanoGPT checkpoint (ckpt.pt) to a checkpoint",
        description="Read CKPT (the ckpt.pt that nanoGPT's train.py wrote, or its out_dir) and "
        "write a glassformer checkpoint to OUT. ckpt.pt is read with torch.load(weights_only="
        "True) and meta.pkl as plain data only: no pickled code runs. The tokenizer: --meta, "
        "--vocab-from or --tokenizer, else a meta.pkl beside ckpt.pt. Every command also reads "
        "an out_dir directly (with the meta.pkl beside its ckpt.pt).",
    )
    ing.add_argument("ckpt", help="nanoGPT's ckpt.pt, or the out_dir holding it")
    ing.add_argument("out")
    vocab = ing.add_mutually_exclusive_group()
    vocab.add_argument(
        "--meta",
        metavar="FILE",
        help="the meta.pkl of a character model (nanoGPT keeps it in data/DATASET/meta.pkl)",
    )
    vocab.add_argument(
        "--vocab-from",
        metavar="TEXT_FILE",
        help="rebuild a character vocabulary from the training text, as nanoGPT's prepare.py "
        "does (its sorted set of characters)",
    )
    vocab.add_argument(
        "--tokenizer",
        metavar="FILE",
        help="a Hugging Face tokenizer.json (GPT-2's, for a GPT-2 BPE model)",
    )
    ing.add_argument("--dtype", choices=list(weights.STORABLE_DTYPES), default="float32")
    overwrite_arg(ing)
    ing.set_defaults(func=cmd_import_nanogpt)

    xh = sub.add_parser(
        "export-hf",
        help="write a checkpoint as a Hugging Face folder (decoder: GPT-2, Llama or Qwen2; "
        "encoder: BERT; encoder-decoder: Pegasus)",
        description="Write CKPT as a folder that transformers loads: a decoder-only model as "
        "GPT2LMHeadModel (with rotary positions, RMSNorm and the gated FFN as LlamaForCausalLM, "
        "or Qwen2ForCausalLM with Q, K, V biases alone), an encoder without a classifier as "
        "BertModel, a pre-LN "
        "encoder-decoder as PegasusForConditionalGeneration with its generation settings "
        "(greedy from BOS, as `translate`), which CTranslate2 also converts (float32 weights; "
        "a BPE tokenizer as tokenizer.json for AutoTokenizer).",
    )
    xh.add_argument("checkpoint")
    xh.add_argument("out")
    overwrite_arg(xh)
    xh.set_defaults(func=cmd_export_hf)


def _add_encoder_uses(sub) -> None:
    """embed and classify: what an encoder gives."""
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
    device_arg(em)
    threads_arg(em)
    em.set_defaults(func=cmd_embed)

    cl = sub.add_parser(
        "classify",
        help="the class of each text from an encoder classifier (e.g. train classify)",
        description="Print the most likely class of each TEXT and of each line of --input FILE, "
        "with its probability: one line per input (a blank input line gives a blank line). "
        "Class names are those saved with the model (labels.json), else class numbers.",
    )
    cl.add_argument("checkpoint", help="an encoder checkpoint with a classifier (n_classes > 0)")
    cl.add_argument("text", nargs="*", help="texts to classify")
    cl.add_argument("--input", metavar="FILE", help="a UTF-8 file, one text a line")
    cl.add_argument(
        "--engine",
        choices=["auto", "reference", "torch"],
        default="auto",
        help="reference: NumPy float64; torch: PyTorch float32, batched; auto: torch if "
        "installed (default)",
    )
    cl.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object a line: text, tokens, label, class, probability and the "
        "probability of every class",
    )
    device_arg(cl)
    threads_arg(cl)
    cl.set_defaults(func=cmd_classify)


def cmd_models(args) -> int:
    from glassformer.catalog import models

    found = models(args.folder)
    print(found.to_json() if args.json else found.to_text(args.folder))
    return 0


def cmd_config(args) -> int:
    cfg = preset(args.preset).override(*args.overrides)
    print(cfg.to_json(), end="")
    print(f"# {weights.n_params(cfg):,} parameters", file=sys.stderr)
    return 0


def writes_out(cmd):
    """Run the command holding the lock of its output folder `args.out` from start to end
    (files.locked): a second writer is refused in one line naming the holder, and what is in the
    folder is looked at only once the lock is held. Under torchrun only rank 0 writes, and locks."""

    @functools.wraps(cmd)
    def run_locked(args) -> int:
        if os.environ.get("RANK", "0") != "0":
            return cmd(args)
        what = " ".join(["glassformer", args.command, getattr(args, "task", "")]).strip()
        with files.locked(args.out, what) as previous:
            if previous is not None:
                note(
                    f"took over the lock of {args.out} left by process {previous['pid']} "
                    f"({previous.get('command', '?')}, since {previous.get('since', '?')}), "
                    "which no longer runs"
                )
            return cmd(args)

    return run_locked


@writes_out
def cmd_init(args) -> int:
    from glassformer import tokenizer as tk

    apart({"OUT": args.out}, {"--corpus": args.corpus})
    output_folder(args.out, args.overwrite)
    cfg = preset(args.preset).override(*args.overrides)
    weights.check_fits(cfg)
    if args.tokenizer == "article":
        if args.corpus:
            raise GlassformerError(
                "--corpus does nothing with the article tokenizer (its 10 words are fixed); "
                "give --tokenizer char or word to build one from it"
            )
        tok = tk.article_tokenizer()
    else:
        if not args.corpus:
            raise GlassformerError(
                f"--tokenizer {args.tokenizer} needs --corpus FILE to build its vocabulary"
            )
        text = read_text(args.corpus)
        cls = tk.CharTokenizer if args.tokenizer == "char" else tk.WordTokenizer
        tok = cls.train([text])
    if cfg.vocab_size != tok.vocab_size:
        cfg = cfg.override(f"vocab_size={tok.vocab_size}")
    need = weights.memory_bytes(cfg) * 3 // 2  # the float64 draw and the float32 copy written
    gib = f"{need / 2**30:,.1f} GiB ({weights.n_params(cfg):,} parameters drawn in float64 and "
    gib += "written in float32)"
    if need > (have := weights.available_memory()):
        raise GlassformerError(
            f"init would need about {gib}, but {have / 2**30:,.1f} GiB of memory is available: "
            "choose smaller sizes"
        )
    try:
        params = weights.init(cfg, seed=args.seed, std=args.std)
        weights.save(args.out, cfg, params, tokenizer=tok, overwrite=args.overwrite)
    except MemoryError:  # a limit the estimate did not see; the atomic save left nothing
        raise GlassformerError(
            f"ran out of memory drawing the weights, about {gib}: choose smaller sizes"
        ) from None
    print(
        f"wrote {args.out}: {cfg.arch}, {weights.n_params(cfg):,} parameters, "
        f"{args.tokenizer} tokenizer of {tok.vocab_size} tokens"
    )
    return 0


@writes_out
def cmd_export(args) -> int:
    apart({"OUT": args.out}, {"CHECKPOINT": args.checkpoint})
    output_folder(args.out, args.overwrite)
    m = Model.load(args.checkpoint)
    if args.average is not None:
        params, steps = weights.average_snapshots(args.checkpoint, m.cfg, args.average)
        m = m.with_params(params)
        print(f"averaged the weights of steps {', '.join(map(str, steps))}")
    m.save(args.out, dtype=args.dtype, overwrite=args.overwrite)
    size = (Path(args.out) / weights.WEIGHTS_FILE).stat().st_size
    print(
        f"wrote {args.out}: {weights.n_params(m.cfg):,} parameters as {args.dtype} "
        f"({size / 1e6:.1f} MB)"
    )
    return 0


@writes_out
def cmd_import_hf(args) -> int:
    from glassformer.formats import hf_dir

    if not hf_dir.is_hf_folder(args.hf_dir):
        raise GlassformerError(
            f"{args.hf_dir} is not a Hugging Face model folder (no config.json with a "
            "model_type); give the folder save_pretrained wrote"
        )
    apart({"OUT": args.out}, {"HF_DIR": args.hf_dir})
    output_folder(args.out, args.overwrite)
    imp = hf_dir.load(args.hf_dir)
    return _write_import(args, imp, f"{imp.family} from {args.hf_dir}")


def _write_import(args, imp, what: str) -> int:
    """Save an import (import-hf, import-nanogpt) to --out and say what it took and left out."""
    weights.save(
        args.out,
        imp.cfg,
        imp.params,
        tokenizer=imp.tokenizer,
        dtype=args.dtype,
        overwrite=args.overwrite,
    )
    n = weights.n_params(imp.cfg)
    print(f"imported {what}: {imp.cfg.arch}, {n:,} parameters -> {args.out}")
    for name, reason in imp.skipped.items():
        print(f"  left out {name}: {reason}")
    for line in imp.notes:
        print(f"  {said(line)}")
    return 0


@writes_out
def cmd_import_nanogpt(args) -> int:
    from glassformer.formats import nanogpt

    folder, _ = nanogpt.checkpoint_file(args.ckpt)
    inputs = {"--meta": args.meta, "--vocab-from": args.vocab_from, "--tokenizer": args.tokenizer}
    apart({"OUT": args.out}, {"CKPT": str(folder), **inputs})
    output_folder(args.out, args.overwrite)
    imp = nanogpt.load(
        args.ckpt, meta=args.meta, vocab_from=args.vocab_from, tokenizer=args.tokenizer
    )
    return _write_import(args, imp, f"nanoGPT from {imp.source}")


@writes_out
def cmd_export_hf(args) -> int:
    apart({"OUT": args.out}, {"CHECKPOINT": args.checkpoint})
    output_folder(args.out, args.overwrite)
    m = Model.load(args.checkpoint)
    family, out = m.export_hf(args.out, overwrite=args.overwrite)
    print(f"wrote {out}: Hugging Face {family} ({weights.n_params(m.cfg):,} parameters, float32)")
    return 0


def cmd_embed(args) -> int:
    if args.engine == "torch":
        need_torch("--engine torch (the default)", "use --engine reference")
    m = load_model(args.checkpoint, engine=args.engine, device=args.device)
    E = m.embed(list(args.text))  # (N, C)
    cosine = E @ E.T  # unit vectors: dot product = cosine similarity
    if args.json:
        items = [
            {"text": t, **_tokens(m, t), "embedding": e.tolist()}
            for t, e in zip(args.text, E, strict=True)
        ]
        out = {"model": args.checkpoint, "engine": args.engine, "dim": int(E.shape[1])}
        print(
            json.dumps(out | {"embeddings": items, "cosine": cosine.tolist()}, ensure_ascii=False)
        )
        return 0
    for k, (t, e) in enumerate(zip(args.text, E, strict=True)):
        head = ", ".join(f"{v:+.4f}" for v in e[:6])
        print(f"[{k}] {t!r}: {E.shape[1]} dims, |e| = {np.linalg.norm(e):.4f}  [{head}, ...]")
    if len(args.text) > 1:
        print("cosine similarity:")
        for k, row in enumerate(cosine):
            print(f"  [{k}] " + " ".join(f"{v:6.3f}" for v in row))
    return 0


def _tokens(m, text: str) -> dict:
    """A text's tokens for --json: raw pieces, readable pieces, ids."""
    ids = m.encode(text)
    return {"tokens": m.runtime.pieces(ids), "tokens_readable": m.runtime.readable(ids), "ids": ids}


def cmd_classify(args) -> int:
    if args.engine == "torch":
        need_torch("--engine torch", "use --engine reference")
    m = load_model(args.checkpoint, engine=args.engine, device=args.device)
    lines = input_lines(args.text, args.input)
    texts = [t for t in lines if t.strip()]
    m.runtime.need_classifier()
    if not texts:
        raise GlassformerError("nothing to classify: give texts or --input FILE")
    places = [
        f"text {n + 1}" if n < len(args.text) else f"{args.input}, line {n - len(args.text) + 1}"
        for n, line in enumerate(lines)
        if line.strip()
    ]
    results = iter(m.classify(texts, places=places))
    for line in lines:  # a blank input line gives a blank output line: outputs stay aligned
        if not line.strip():
            print("null" if args.json else "")
            continue
        r = next(results)
        if args.json:
            print(json.dumps({"text": line, **_tokens(m, line), **r.to_dict()}, ensure_ascii=False))
        else:
            print(f"{r.label}\t{r.probability:.4f}")
    return 0
