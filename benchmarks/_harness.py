"""Side-by-side timing: run the contenders alternately (A B A B ...) in one process and report
medians and their ratio. The machine is shared and noisy, so only ratios measured in the same run
mean anything (docs/benchmarks.md, "How a benchmark runs").

A busy machine on demand: with GLASSFORMER_BENCH_BUSY=N in the environment, every benchmark built
on `alternate` / `alternate_apart` measures while N background processes each keep one core busy
(a Python spin loop the harness starts before the warm-up and kills after the last call), and
`report` says so in its title, with the run queue it saw. Run a benchmark twice, with and
without it, to report its ratios idle and busy:

    .venv/bin/python benchmarks/decode_vs_hf.py
    GLASSFORMER_BENCH_BUSY=1 .venv/bin/python benchmarks/decode_vs_hf.py
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

BUSY = "GLASSFORMER_BENCH_BUSY"
_seen_load: list[str] = []  # what `busy` saw, for `report`'s title


def busy_processes() -> int:
    """How many spinning processes the environment asks for (GLASSFORMER_BENCH_BUSY, default 0)."""
    value = os.environ.get(BUSY, "0")
    if not value.isdigit():
        raise SystemExit(f"{BUSY}={value!r}: give a number of busy processes, such as 1 or 2")
    return int(value)


def run_queue() -> str:
    """The kernel's runnable / total tasks right now (/proc/loadavg's 4th field), and the
    1-minute load average."""
    try:
        fields = open("/proc/loadavg").read().split()
        return f"runnable/total tasks {fields[3]}, load average {fields[0]}"
    except OSError:
        return f"load average {os.getloadavg()[0]:.2f}"


@contextlib.contextmanager
def busy(n: int | None = None):
    """While inside, `n` (default: GLASSFORMER_BENCH_BUSY) processes each spin one core at 100%:
    the background load of a shared machine (a browser, a test run, another job), controlled."""
    n = busy_processes() if n is None else n
    spin = [sys.executable, "-c", "while True: pass"]
    procs = [subprocess.Popen(spin, stdin=subprocess.DEVNULL) for _ in range(n)]
    try:
        if n:
            time.sleep(0.5)  # scheduled and spinning before the first timed call
            _seen_load.append(f"{n} busy process{'es' * (n > 1)} ({run_queue()})")
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def alternate(
    contenders: dict[str, Callable[[], object]], repeats: int = 7, warmup: int = 1
) -> dict[str, list[float]]:
    """Seconds per call of each contender, measured alternately `repeats` times after warmup
    (under `busy()`: idle unless GLASSFORMER_BENCH_BUSY asks for load)."""
    with busy():
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
    with busy():
        return _apart(ctx, factory, names, repeats, warmup)


def _apart(ctx, factory, names: list[str], repeats: int, warmup: int):
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


def load_seen() -> str:
    """What `busy` added to the machine last ("no load added" when nothing), for a title."""
    return _seen_load[-1] if _seen_load else "no load added"


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
    """Print medians (and throughput if `per` items per call); return median(ours)/median(peer).
    The title says whether the machine was made busy (`busy`) while they were measured."""
    print(f"\n{title} [{load_seen()}]")
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
