"""Side-by-side timing: run the contenders alternately (A B A B ...) in one process and report
medians and their ratio. The machine is shared and noisy, so only ratios measured in the same run
mean anything (see README, "Benchmarks")."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def alternate(
    contenders: dict[str, Callable[[], object]], repeats: int = 7, warmup: int = 1
) -> dict[str, list[float]]:
    """Seconds per call of each contender, measured alternately `repeats` times after warmup."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def alternate_apart(
    factory: Callable[[str], Callable[[], object]],
    names: list[str],
    repeats: int = 7,
    warmup: int = 1,
) -> tuple[dict[str, list[float]], dict[str, object]]:
    """`alternate`, with each contender in a process of its own (spawned, started together, then
    driven in turn A B A B ... so that machine load still hits all alike). For peers whose native
    runtime slows the other's kernels when both are loaded in one process (two OpenMP runtimes
    on the same cores). factory(name) -> the contender's call: a picklable top-level function,
    run in the child. Returns the seconds per call and each contender's warm-up result."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    conns, procs = {}, []
    for name in names:
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(factory, name, theirs, warmup), daemon=True)
        proc.start()
        conns[name] = mine
        procs.append(proc)
    results = {name: conns[name].recv() for name in names}  # each is loaded and warm
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            conns[name].send("run")
            times[name].append(conns[name].recv())
    for name in names:
        conns[name].send("stop")
    for proc in procs:
        proc.join()
    return times, results


def _worker(factory, name: str, conn, warmup: int) -> None:
    fn = factory(name)
    result = None
    for _ in range(warmup):
        result = fn()
    conn.send(result)
    while conn.recv() == "run":
        t0 = time.perf_counter()
        fn()
        conn.send(time.perf_counter() - t0)


def report(
    title: str,
    times: dict[str, list[float]],
    ours: str,
    peer: str,
    unit: float = 1.0,
    unit_name: str = "ms",
    per: float | None = None,
    per_name: str = "",
) -> float:
    """Print medians (and throughput if `per` items per call); return median(ours)/median(peer)."""
    print(f"\n{title}")
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        line = f"  {name:<28} median {med[name] * unit:9.2f} {unit_name}"
        line += f"  (min {min(t) * unit:.2f}, max {max(t) * unit:.2f}, n={len(t)})"
        if per:
            line += f"  {per / med[name]:10.1f} {per_name}"
        print(line)
    ratio = med[ours] / med[peer]
    print(f"  time ratio {ours} / {peer} = {ratio:.3f}")
    return ratio


def hf_greedy(peer, ids, n: int, attention_mask=None) -> list[list[int]]:
    """Hugging Face `generate`, greedy with its KV cache, exactly `n` new tokens for every row of
    ids (B, T) (left-padded rows with their attention_mask; default all ones): prompt + new ids."""
    import torch

    mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    with torch.inference_mode():
        out = peer.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            use_cache=True,
            pad_token_id=0,
        )
    return out.tolist()


def random_gpt2(small: bool = False):
    """(peer, cfg, params): Hugging Face GPT-2 with random weights (seed 0; GPT-2-small's size,
    124M, or 2 layers if `small`) in fp32, eval mode, and the same weights as glassformer's."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from glassformer.formats import hf

    hf_cfg = GPT2Config(n_layer=2) if small else GPT2Config()
    torch.manual_seed(0)
    peer = GPT2LMHeadModel(hf_cfg).eval()
    cfg = hf.gpt2_config(hf_cfg)
    return peer, cfg, hf.gpt2_to_glassformer(dict(peer.state_dict()), cfg)


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two generations share (int8 against fp32, say)."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
