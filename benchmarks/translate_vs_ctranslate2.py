"""Benchmark: sentences per second of the shipped translator (`models/en-es`), beam 4, glassformer
(`translating.translate`: batches of 64 sentences, all hypotheses in one KV cache) in fp32 and int8
against CTranslate2 in fp32 and int8 on the same weights (the Pegasus export of `glassformer
export-hf`, converted by `ctranslate2.converters.TransformersConverter`), the four measured
alternately in one process. Goals (issue 38): glassformer within 1.3x of CTranslate2's time in fp32,
1.2x in int8, each in a process of its own (`--mode apart`), idle, at 1 and 2 threads; busy
(GLASSFORMER_BENCH_BUSY=1, `_harness.busy`) with `--threads default`, glassformer's own count.

Shared OpenMP runtimes. CTranslate2's wheel ships its own GNU OpenMP (ctranslate2.libs/libgomp-
*.so), but imported after torch, libctranslate2 binds torch's libgomp instead (torch's is already
in the global symbol scope; `LD_DEBUG=bindings` shows GOMP_barrier, omp_get_max_threads, ...
bound to torch/lib/libgomp.so.1). One runtime then serves two masters: PyTorch's thread and
CTranslate2's worker, each with its team, more threads than the 2 CPUs; by libgomp's rule
(gomp_throttled_spin_count_var, read from its source, not traced here) it then spins ~100 times
instead of 300,000 before sleeping, so PyTorch's worker sleeps between kernels and every parallel
region wakes it by futex. That fits what was measured: glassformer int8 ran
1.6x its time alone beside CTranslate2 (2026-12-02: 1.30 vs 1.04 s for 250 sentences; its
worker thread busy 30-45% of the run instead of ~100%), and GOMP_SPINCOUNT did not help (the
throttled count caps it). So the contenders are run three ways (`--mode`):

- `shared` (the default, as before): one process, `import ctranslate2` as a user would write it:
  CTranslate2 on torch's runtime.
- `own-runtime`: one process, ctranslate2 imported with RTLD_DEEPBIND, so that its library binds
  the libgomp it ships: two runtimes, each team within the CPUs, nobody throttled.
- `apart` (or `--apart`): each contender in a process of its own, still alternated.

Both sides start from text and end with text (tokenizing and detokenizing included), beam 4,
length penalty 1, at most max_len - 1 target tokens, batches of 64 sentences, 2 threads.
CTranslate2's int8 is its own weight quantization (`compute_type="int8"`: int8 weights, per-row
scales, int8 GEMMs); glassformer's is PyTorch's dynamic int8 (`glassformer.quantize`). Also
printed: each contender's sacreBLEU on the translated sentences.

`--limit N` times N of the 1,000 `eng-spa-valid` sentences (every k-th: the file is sorted by
length, so the subset spans all lengths).

    .venv/bin/python benchmarks/translate_vs_ctranslate2.py --limit 250 [--mode own-runtime]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import torch
from _harness import alternate, alternate_apart, load_seen

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's glassformer

from glassformer.cli import main as cli  # noqa: E402
from glassformer.data import read_pairs  # noqa: E402
from glassformer.devices import default_threads, use_threads  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.inference import torch_engine  # noqa: E402
from glassformer.metrics import translation_scores  # noqa: E402
from glassformer.translating import translate  # noqa: E402

MODEL = ROOT / "models" / "en-es"
MODES = ("shared", "own-runtime", "apart")


def import_ctranslate2(own_runtime: bool):
    """The ctranslate2 module; own_runtime: its library bound to the OpenMP runtime it ships
    (RTLD_DEEPBIND: its own dependencies before the global scope), not to torch's (see above)."""
    if not own_runtime:
        import ctranslate2

        return ctranslate2
    flags = sys.getdlopenflags()
    sys.setdlopenflags(os.RTLD_NOW | os.RTLD_DEEPBIND)
    try:
        import ctranslate2
    finally:
        sys.setdlopenflags(flags)
    return ctranslate2


def sources_and_refs(limit: int | None) -> tuple[list[str], list[str]]:
    pairs = read_pairs("eng-spa-valid")
    if limit:
        pairs = pairs[:: max(1, len(pairs) // limit)][:limit]
    return [s for s, _ in pairs], [t for _, t in pairs]


def contender(name: str, args: argparse.Namespace, ct2_dir: Path):
    """The call that translates every source with `name` ("glassformer float32", "CTranslate2
    int8", ...) and returns the translations; it loads what it needs first."""
    default = args.threads == "default"
    torch.set_num_threads(os.cpu_count() if default else args.threads)
    warnings.filterwarnings("ignore")
    cfg, params, tok = loading.load(MODEL)
    sources, _ = sources_and_refs(args.limit)
    kind, precision = name.split()
    if kind == "glassformer":
        model = torch_engine(cfg, params, precision)
        call = partial(translate, model, tok, sources, beam=args.beam, batch_size=args.batch_size)
        if not default:
            return call

        def as_started():
            """The translation, on the count `glassformer translate` would choose if started
            now. Chosen for the next call after this one ends, 0.1 s later, as a command starts
            (its imports alone take longer): right at the end of a call, the OpenMP threads of
            the contender timed just before may still be spinning, runnable for a moment."""
            out = call()
            time.sleep(0.1)
            use_threads(default_threads())
            return out

        use_threads(default_threads())
        return as_started
    ctranslate2 = import_ctranslate2(args.mode == "own-runtime")
    translator = ctranslate2.Translator(
        str(ct2_dir),
        device="cpu",
        compute_type=precision,
        intra_threads=0 if default else args.threads,  # 0: CTranslate2's own default
        inter_threads=1,
    )

    def run():
        tokens = [tok.tokens(tok.encode(s)[: cfg.max_len] or [tok.unk_id or 0]) for s in sources]
        results = translator.translate_batch(
            tokens,
            beam_size=args.beam,
            max_batch_size=args.batch_size,
            max_decoding_length=cfg.max_len - 1,
            max_input_length=0,
            length_penalty=1.0,
        )
        return [tok.decode([tok.id_of(t) for t in r.hypotheses[0]]) for r in results]

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--threads",
        type=lambda v: v if v == "default" else int(v),
        default=2,
        help="N, or default: glassformer's rule at every call (devices.default_threads, as a "
        "command started then would choose), CTranslate2's own default (intra_threads=0)",
    )
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--limit", type=int, default=None, help="N of the 1,000 sentences (all)")
    ap.add_argument("--mode", choices=MODES, default="shared", help="see above")
    ap.add_argument("--apart", action="store_true", help="the same as --mode apart")
    args = ap.parse_args()
    if args.apart:
        args.mode = "apart"
    args.apart = args.mode == "apart"
    warnings.filterwarnings("ignore")
    import_ctranslate2(args.mode == "own-runtime")
    from ctranslate2.converters import TransformersConverter

    sources, refs = sources_and_refs(args.limit)
    tmp = Path(tempfile.mkdtemp())
    assert cli(["export-hf", str(MODEL), str(tmp / "hf")]) == 0
    TransformersConverter(str(tmp / "hf")).convert(str(tmp / "ct2"), force=True)
    names = [f"{k} {p}" for p in ("float32", "int8") for k in ("glassformer", "CTranslate2")]
    factory = partial(contender, args=args, ct2_dir=tmp / "ct2")
    if args.apart:
        times, outputs = alternate_apart(factory, names, repeats=args.repeats)
    else:
        calls = {name: factory(name) for name in names}
        outputs = {name: call() for name, call in calls.items()}  # also the warm-up
        times = alternate(calls, repeats=args.repeats, warmup=0)
    n = len(sources)
    med = {k: statistics.median(v) for k, v in times.items()}
    where = {
        "shared": "all in one process, CTranslate2 on torch's OpenMP runtime",
        "own-runtime": "all in one process, CTranslate2 on its own OpenMP runtime",
        "apart": "each in a process of its own",
    }[args.mode]
    print(
        f"\nmodels/en-es, beam {args.beam}, {n} eng-spa-valid sentences, {args.threads} threads,"
        f" {where} [{load_seen()}]"
    )
    for k, t in times.items():
        bleu = translation_scores(outputs[k], refs).bleu
        print(
            f"  {k:<22} median {med[k]:7.2f} s  (min {min(t):.2f}, max {max(t):.2f}, n={len(t)})"
            f"  {n / med[k]:7.1f} sentences/s  BLEU {bleu:.2f}"
        )
    for p in ("float32", "int8"):
        r = med[f"glassformer {p}"] / med[f"CTranslate2 {p}"]
        goal = 1.3 if p == "float32" else 1.2  # issue 38, idle
        print(f"  {p}: glassformer time / CTranslate2 time = {r:.2f}x  (goal <= {goal})")
    r = med["glassformer float32"] / med["glassformer int8"]
    print(f"  glassformer int8 speed-up over its fp32: {r:.2f}x")
    a, b = outputs["glassformer float32"], outputs["CTranslate2 float32"]
    same = sum(x == y for x, y in zip(a, b, strict=True))
    print(f"  fp32 translations identical to CTranslate2's: {same}/{n}")


if __name__ == "__main__":
    main()
