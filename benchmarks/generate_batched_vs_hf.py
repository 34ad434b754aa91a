"""Benchmark: batched greedy generation (`generate --input FILE`: `inference.greedy_prompts`, the
prompts left-padded into one KV cache) against Hugging Face `generate` on the same batches (left
padding, attention mask), tokens per second at batch 1, 8 and 32, on the same GPT-2-small-sized
random weights (124M parameters), fp32, prompts of 8 to 24 tokens, 32 new tokens each (no EOS),
measured alternately in one process. `--int8` adds glassformer in int8.

Also printed: the share of rows whose tokens equal Hugging Face's (fp32 rounding differs between
the two, and random weights give flat distributions, so a near-tie can flip).

    .venv/bin/python benchmarks/generate_batched_vs_hf.py
"""

import argparse
import statistics
import sys
import warnings
from pathlib import Path

import torch
from _harness import alternate, hf_greedy, random_gpt2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's glassformer

from glassformer.inference import greedy_prompts, torch_engine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--int8", action="store_true", help="also glassformer int8")
    ap.add_argument("--small", action="store_true", help="a 2-layer model, to try the script")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    peer, cfg, params = random_gpt2(args.small)
    models = {"glassformer fp32": torch_engine(cfg, params, "float32")}
    if args.int8:
        models["glassformer int8"] = torch_engine(cfg, params, "int8")
    n = args.new_tokens
    gen = torch.Generator().manual_seed(1)
    for B in [int(b) for b in args.batches.split(",")]:
        lengths = torch.randint(8, 25, (B,), generator=gen).tolist()
        prompts = [torch.randint(0, cfg.vocab_size, (k,), generator=gen).tolist() for k in lengths]
        one_batch(models, peer, prompts, n, args.repeats)


def one_batch(models: dict, peer, prompts: list[list[int]], n: int, repeats: int) -> None:
    B, T = len(prompts), max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (T - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p in prompts])
    out: dict[str, list[list[int]]] = {}

    def ours(model, name):
        def run():
            out[name] = greedy_prompts(model, prompts, n, eos_id=None)

        return run

    def run_peer():
        out["HF generate fp32"] = [row[T:] for row in hf_greedy(peer, ids, n, mask)]

    contenders = {name: ours(m, name) for name, m in models.items()}
    contenders["HF generate fp32"] = run_peer
    times = alternate(contenders, repeats=repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    shortest = min(len(p) for p in prompts)
    print(f"\nbatch {B}, prompts of {shortest}-{T} tokens, {n} new tokens each")
    for k, t in times.items():
        print(
            f"  {k:<18} median {med[k] * 1e3:9.1f} ms  (min {min(t) * 1e3:.1f}, max "
            f"{max(t) * 1e3:.1f}, n={len(t)})  {B * n / med[k]:8.1f} tokens/s"
        )
    for name in models:
        same = sum(a == b for a, b in zip(out[name], out["HF generate fp32"], strict=True))
        ratio = med["HF generate fp32"] / med[name]
        print(f"  tokens/s {name} / HF = {ratio:.3f}; rows equal to HF's: {same}/{B}")


if __name__ == "__main__":
    main()
