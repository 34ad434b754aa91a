"""Benchmark: greedy decoding at the size of today's smallest open models (issue 28 point 4).

The model has SmolLM2-135M's configuration with random weights: hidden 576, intermediate 1536
(SwiGLU), 30 layers, 9 query heads and 3 key/value heads (grouped-query attention, head dim 64),
vocabulary 49,152, rope_theta 100,000, RMSNorm eps 1e-5, tied embeddings, SiLU; the values of
https://huggingface.co/HuggingFaceTB/SmolLM2-135M/blob/main/config.json (max_position_embeddings
8192 there; `--max-len`, default 8192, changes nothing here: rotary positions keep no table).
transformers builds it (`LlamaConfig`, `LlamaForCausalLM`, seed 0, its own initialisation) and
writes it with `save_pretrained` to a temporary folder, which glassformer reads through its Llama
import (`loading.load` -> `hf_dir` -> `hf_llama`), as `glassformer generate FOLDER` would.

Measured alternately in one process (`_harness.alternate`), batch 1, a 16-token prompt, 128 new
tokens, greedy, KV cache on, 2 threads: glassformer fp32 and int8 (`quantize.int8`: every linear
layer and the tied head in PyTorch's dynamic int8), transformers `generate` in fp32, and
transformers with torch's own `torch.ao.quantization.quantize_dynamic` (every `nn.Linear`, the
tied `lm_head` included, in qint8) as the int8 peer. Printed: medians and tokens/s, the ratios,
whether glassformer fp32's tokens equal transformers fp32's, how many new tokens int8 keeps equal
to fp32 before the first difference (random weights give flat distributions, where quantization
flips near-ties early), and a correctness check: glassformer fp32's logits against transformers'
fp32 logits at every position of the generated sequence (the script fails if they differ by more
than `--tol` relative to the logits' scale).

Then each contender's load time and peak RSS, each in a fresh process of its own (spawned: the
peak of one process is the largest it ever held, so one process cannot measure four): from the
folder on disk to a model ready to decode (glassformer: read, convert, build, lay out or
quantize; transformers: `from_pretrained`, and `quantize_dynamic` for its int8), then one
128-token greedy decode, then the peak RSS (VmHWM). The Python, torch and transformers imports
are in it.

    .venv/bin/python benchmarks/decode_real_size.py
    .venv/bin/python benchmarks/decode_real_size.py --layers 2 --repeats 2   # to try it quickly
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from _harness import alternate, common_prefix, hf_greedy, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's glassformer

import glassformer  # noqa: E402
from glassformer.decoding import greedy  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.inference import torch_engine  # noqa: E402
from glassformer.torch_steps import step_fn  # noqa: E402

# HuggingFaceTB/SmolLM2-135M config.json (the fields that shape the model)
SMOLLM2_135M = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    hidden_act="silu",
    max_position_embeddings=8192,
    rms_norm_eps=1e-5,
    rope_theta=100000.0,
    tie_word_embeddings=True,
    initializer_range=0.041666666666666664,
)
CONTENDERS = ("glassformer int8", "glassformer fp32", "HF generate fp32", "HF generate int8")


def quiet() -> None:
    """No warnings or progress bars from transformers in the printed report."""
    from transformers.utils import logging

    warnings.filterwarnings("ignore")
    logging.disable_progress_bar()
    logging.set_verbosity_error()


def write_folder(folder: Path, layers: int, max_len: int) -> None:
    """A random-weight LlamaForCausalLM of SmolLM2-135M's config, saved by transformers."""
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = dict(SMOLLM2_135M, num_hidden_layers=layers, max_position_embeddings=max_len)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**fields)).eval().save_pretrained(folder)


def load_ours(folder: Path, dtype: str):
    """The PyTorch engine as a program that only decodes builds it: the weights read in float32
    straight into the inference form's layout (order "F"), which the engine then shares instead
    of copying (`loading.load`); `glassformer.load` keeps float64 weights for the reference engine
    besides (its peak is printed too, "glassformer.load fp32")."""
    cfg, params, _ = loading.load(folder, np.float32, order="F")
    return torch_engine(cfg, params, dtype)


def load_peer(folder: Path, dtype: str):
    from transformers import LlamaForCausalLM

    peer = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    if dtype == "int8":
        peer = torch.ao.quantization.quantize_dynamic(peer, {torch.nn.Linear}, dtype=torch.qint8)
    return peer


def decoder(name: str, model, prompt: torch.Tensor, n: int):
    """A call that decodes n new tokens greedily with `name`'s model and returns every id."""
    if name.startswith("glassformer"):
        return lambda: greedy(step_fn(model), prompt[0].tolist(), max_new_tokens=n).ids
    return lambda: hf_greedy(model, prompt, n)[0]


def load_and_decode(folder: str, name: str, threads: int, prompt: list[int], n: int):
    """In a fresh process: (load seconds, peak RSS in MiB after one decode)."""
    torch.set_num_threads(threads)
    quiet()
    kind, precision = name.split()[0], name.split()[-1].replace("fp32", "float32")
    t0 = time.perf_counter()
    if kind == "glassformer.load":  # the Model's path: float64 weights kept besides
        model = glassformer.load(folder, engine="torch", threads=threads).runtime.torch(precision)
    else:
        model = (load_ours if kind == "glassformer" else load_peer)(Path(folder), precision)
    seconds = time.perf_counter() - t0
    decoder(name, model, torch.tensor([prompt]), n)()
    return seconds, peak_rss_mib()


def peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM, Linux), in MiB. Not `ru_maxrss`: a spawned child
    starts as a fork of its parent, and ru_maxrss keeps the parent's pages across the exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # elsewhere: an upper bound


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=30, help="fewer, to try the script quickly")
    ap.add_argument("--max-len", type=int, default=8192)
    ap.add_argument("--tol", type=float, default=1e-4, help="fp32 logits vs HF, relative")
    ap.add_argument("--no-memory", action="store_true", help="skip the load time and RSS runs")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    quiet()
    n = args.new_tokens
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "smollm2-135m-random"
        write_folder(folder, args.layers, args.max_len)
        models = {
            "glassformer int8": load_ours(folder, "int8"),
            "glassformer fp32": load_ours(folder, "float32"),
            "HF generate fp32": load_peer(folder, "float32"),
            "HF generate int8": load_peer(folder, "int8"),
        }
        vocab = SMOLLM2_135M["vocab_size"]
        prompt = torch.randint(0, vocab, (1, 16), generator=torch.Generator().manual_seed(1))
        ids: dict[str, list[int]] = {}

        def timed(name):
            run = decoder(name, models[name], prompt, n)
            return lambda: ids.__setitem__(name, run())

        times = alternate({name: timed(name) for name in CONTENDERS}, repeats=args.repeats)
        size = sum(p.numel() for p in models["HF generate fp32"].parameters()) / 1e6
        title = (
            f"greedy decode, SmolLM2-135M config ({args.layers} layers, {size:.0f}M params, "
            f"random weights), batch 1, prompt 16, {n} new tokens, KV cache, "
            f"{args.threads} threads"
        )
        report(title, times, "glassformer int8", "HF generate fp32", 1e3, per=n, per_name="tok/s")
        med = {name: statistics.median(t) for name, t in times.items()}
        for ours, peer in [
            ("glassformer fp32", "HF generate fp32"),
            ("glassformer int8", "HF generate int8"),
            ("glassformer int8", "HF generate fp32"),
            ("HF generate int8", "HF generate fp32"),
            ("glassformer int8", "glassformer fp32"),
        ]:
            print(f"  tokens/s ratio {ours} / {peer} = {med[peer] / med[ours]:.3f}")
        equal = ids["glassformer fp32"] == ids["HF generate fp32"]
        print(f"  glassformer fp32 tokens equal HF fp32's: {equal}")
        for a, b in [("glassformer", "glassformer"), ("HF generate", "HF generate")]:
            same = common_prefix(ids[f"{a} int8"], ids[f"{b} fp32"]) - prompt.shape[1]
            print(f"  {a} int8 tokens equal its fp32's for the first {same} of {n} new tokens")
        seq = torch.tensor([ids["glassformer fp32"]])
        with torch.no_grad():
            ours_logits = models["glassformer fp32"](seq)[0]  # (T, V)
            hf_logits = models["HF generate fp32"](seq).logits[0]
            int8_logits = models["glassformer int8"](seq)[0]
            hf_int8_logits = models["HF generate int8"](seq).logits[0]
        diff = float((ours_logits - hf_logits).abs().max())
        scale = float(hf_logits.abs().max())
        print(
            f"  logits on the generated sequence ({seq.shape[1]} positions), glassformer fp32 vs "
            f"HF fp32: max abs diff {diff:.2e} (max |logit| {scale:.2f}, relative "
            f"{diff / scale:.1e})"
        )
        rel8 = float((int8_logits - ours_logits).norm() / ours_logits.norm())
        hf_rel8 = float((hf_int8_logits - hf_logits).norm() / hf_logits.norm())
        print(f"  logits relative error int8 vs fp32: glassformer {rel8:.4f}, HF {hf_rel8:.4f}")
        if diff > args.tol * scale:
            sys.exit(f"glassformer fp32's logits differ from transformers' by {diff:.2e}")
        if args.no_memory:
            return
        models.clear()
        print(f"\nload (folder -> ready) and peak RSS after one {n}-token decode, each alone")
        ctx = mp.get_context("spawn")
        with ctx.Pool(1, maxtasksperchild=1) as pool:
            for name in [*CONTENDERS, "glassformer.load fp32"]:
                job = (str(folder), name, args.threads, prompt[0].tolist(), n)
                seconds, rss = pool.apply(load_and_decode, job)
                print(f"  {name:<28} load {seconds:6.2f} s   peak RSS {rss:7.0f} MiB")


if __name__ == "__main__":
    main()
