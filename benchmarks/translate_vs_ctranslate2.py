"""Benchmark: sentences per second of the shipped translator (`models/en-es`), beam 4, glassformer
(`inference.translate`: batches of 64 sentences, all hypotheses in one KV cache) in fp32 and int8
against CTranslate2 in fp32 and int8 on the same weights (the Marian export of `glassformer
export-hf`, converted by `ctranslate2.converters.TransformersConverter`), the four measured
alternately in one process. Goal: glassformer within 1.5x of CTranslate2 at the same precision.

Both sides start from text and end with text (tokenizing and detokenizing included), beam 4,
length penalty 1, at most max_len - 1 target tokens, batches of 64 sentences, 2 threads.
CTranslate2's int8 is its own weight quantization (`compute_type="int8"`: int8 weights, per-row
scales, int8 GEMMs); glassformer's is PyTorch's dynamic int8 (`glassformer.quantize`). Also
printed: each contender's sacreBLEU on the translated sentences.

`--limit N` times N of the 1,000 `eng-spa-valid` sentences (every k-th: the file is sorted by
length, so the subset spans all lengths).

    .venv/bin/python benchmarks/translate_vs_ctranslate2.py --limit 250
"""

import argparse
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from _harness import alternate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's glassformer

from glassformer import loading  # noqa: E402
from glassformer.cli import main as cli  # noqa: E402
from glassformer.data import read_pairs  # noqa: E402
from glassformer.inference import torch_engine, translate  # noqa: E402
from glassformer.metrics import translation_scores  # noqa: E402

MODEL = ROOT / "models" / "en-es"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--limit", type=int, default=None, help="N of the 1,000 sentences (all)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    cfg, params, tok = loading.load(MODEL)
    pairs = read_pairs("eng-spa-valid")
    if args.limit:
        pairs = pairs[:: max(1, len(pairs) // args.limit)][: args.limit]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    tmp = Path(tempfile.mkdtemp())
    assert cli(["export-hf", str(MODEL), str(tmp / "hf")]) == 0
    TransformersConverter(str(tmp / "hf")).convert(str(tmp / "ct2"), force=True)
    outputs: dict[str, list[str]] = {}

    def ours(dtype):
        model = torch_engine(cfg, params, dtype)

        def run():
            outputs[f"glassformer {dtype}"] = translate(
                model, tok, sources, beam=args.beam, batch_size=args.batch_size
            )

        return run

    def ct2(compute_type):
        translator = ctranslate2.Translator(
            str(tmp / "ct2"),
            device="cpu",
            compute_type=compute_type,
            intra_threads=args.threads,
            inter_threads=1,
        )

        def run():
            tokens = [
                tok.tokens(tok.encode(s)[: cfg.max_len] or [tok.unk_id or 0]) for s in sources
            ]
            results = translator.translate_batch(
                tokens,
                beam_size=args.beam,
                max_batch_size=args.batch_size,
                max_decoding_length=cfg.max_len - 1,
                max_input_length=0,
                length_penalty=1.0,
            )
            outputs[f"CTranslate2 {compute_type}"] = [
                tok.decode([tok.id_of(t) for t in r.hypotheses[0]]) for r in results
            ]

        return run

    contenders = {
        "glassformer float32": ours("float32"),
        "CTranslate2 float32": ct2("float32"),
        "glassformer int8": ours("int8"),
        "CTranslate2 int8": ct2("int8"),
    }
    times = alternate(contenders, repeats=args.repeats)
    n = len(sources)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmodels/en-es, beam {args.beam}, {n} eng-spa-valid sentences, {args.threads} threads")
    for k, t in times.items():
        bleu = translation_scores(outputs[k], refs).bleu
        print(
            f"  {k:<22} median {med[k]:7.2f} s  (min {min(t):.2f}, max {max(t):.2f}, n={len(t)})"
            f"  {n / med[k]:7.1f} sentences/s  BLEU {bleu:.2f}"
        )
    for p in ("float32", "int8"):
        r = med[f"glassformer {p}"] / med[f"CTranslate2 {p}"]
        print(f"  {p}: glassformer time / CTranslate2 time = {r:.2f}x  (goal <= 1.5)")
    r = med["glassformer float32"] / med["glassformer int8"]
    print(f"  glassformer int8 speed-up over its fp32: {r:.2f}x")
    a, b = outputs["glassformer float32"], outputs["CTranslate2 float32"]
    same = sum(x == y for x, y in zip(a, b, strict=True))
    print(f"  fp32 translations identical to CTranslate2's: {same}/{n}")


if __name__ == "__main__":
    main()
