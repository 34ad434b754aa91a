"""Benchmark (a): greedy decoding tokens/s, glassformer vs Hugging Face `generate`, on the same
GPT-2-small-sized random weights (124M parameters), batch 1, 16-token prompt, 128 new tokens, KV
cache on, fp32, measured alternately in one process. Target: >= 1.3x Hugging Face's tokens/s.

Decoding one token reads every weight once (~498 MB in fp32), so memory bandwidth sets the pace;
glassformer's model is the inference engine users get (`inference.torch_engine`: its weights in
the inference layout, `torch_model.inference_layout`).

    .venv/bin/python benchmarks/decode_vs_hf.py
"""

import argparse
import warnings

import torch
from _harness import alternate, hf_greedy, random_gpt2, report

from glassformer.decoding import greedy
from glassformer.inference import torch_engine
from glassformer.torch_steps import step_fn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--small", action="store_true", help="a 2-layer model, to try the script")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    peer, cfg, params = random_gpt2(args.small)
    ours = torch_engine(cfg, params, "float32")
    prompt = torch.randint(0, cfg.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1))
    n = args.new_tokens
    results = {}

    def run_ours():
        g = greedy(step_fn(ours), prompt[0].tolist(), max_new_tokens=n)
        results["ours"] = g.ids

    def run_peer():
        results["peer"] = hf_greedy(peer, prompt, n)[0]

    times = alternate(
        {"glassformer greedy + cache": run_ours, "HF generate": run_peer}, repeats=args.repeats
    )
    ratio = report(
        f"greedy decode, {sum(p.numel() for p in ours.parameters()) / 1e6:.0f}M "
        f"params, batch 1, prompt 16, {n} new tokens, fp32",
        times,
        "glassformer greedy + cache",
        "HF generate",
        unit=1e3,
        per=n,
        per_name="tokens/s",
    )
    print(f"  tokens/s ratio glassformer / HF = {1 / ratio:.3f}  (target >= 1.3)")
    same = results["ours"] == results["peer"]
    print(f"  same tokens as HF: {same}")


if __name__ == "__main__":
    main()
