"""Which thread policy survives a busy machine (issue 38 point 1): whole `glassformer` commands,
as a person waits for them, under each candidate policy, idle and with background load.

Candidates (each a fresh process, since OpenMP reads its settings when torch loads):
- `default`: what glassformer does today (each library's own count: one thread per core, and
  OpenMP's default wait policy, which spins a while before sleeping);
- `one`: one thread (`--threads 1`);
- `passive`: one thread per core, with `OMP_WAIT_POLICY=PASSIVE` (a waiting thread sleeps at
  once instead of spinning: it yields the core to whoever else is runnable);
- `cores-minus-load`: `--threads` = the cores less the other runnable tasks at start (at least 1).

The commands: `generate models/char-lm` (greedy, PyTorch float64), `translate models/en-es`
(beam 4, PyTorch float32, a batch of sentences), `generate --engine reference` (NumPy:
OpenBLAS's threads) and 15 steps of `train lm` (the char-lm preset on Tiny Shakespeare, into a
temporary folder). Each load runs the candidates alternately (A B C D A B C D ...), `--repeats`
times after a warm-up; load is `benchmarks/_harness.py`'s spinning processes (0, then
`--busy` of them). Printed: the median wall time of each, its ratio to the best candidate at that
load and to `one` (the rule asked for: idle, within ~1.1x of the best; busy, within ~1.3x of one
thread).

    .venv/bin/python benchmarks/thread_policy.py [--repeats 5] [--busy 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import busy, run_queue

from glassformer.devices import others_runnable

ROOT = Path(__file__).resolve().parents[1]
GLASSFORMER = [sys.executable, "-c", "from glassformer.cli import main; raise SystemExit(main())"]
SENTENCES = ["Where is the station?", "The cat is black.", "I would like a cup of coffee.",
             "We went to the beach yesterday.", "Can you help me, please?",
             "She reads a book every week.", "The train leaves at nine.",
             "My brother lives in Madrid."]  # fmt: skip
GENERATE = ["generate", "models/char-lm", "To be", "--max-new-tokens", "300"]
COMMANDS = {
    "generate (torch)": GENERATE,
    "translate (torch)": ["translate", "models/en-es", *SENTENCES],
    "generate (reference)": [*GENERATE, "--engine", "reference"],
    "train (torch)": ["train", "lm", "--out", str(Path(tempfile.gettempdir()) / "thread-policy")]
    + "--overwrite --quiet --set max_steps=15 --set eval_interval=1000".split(),
}


def candidate(name: str) -> tuple[list[str], dict[str, str]]:
    """The extra arguments and environment of a candidate policy."""
    cores = os.cpu_count() or 1
    if name == "one":
        return ["--threads", "1"], {}
    if name == "passive":
        return [], {"OMP_WAIT_POLICY": "PASSIVE"}
    if name == "cores-minus-load":
        return ["--threads", str(max(1, cores - others_runnable()))], {}
    return [], {}


def timed(command: list[str], name: str) -> float:
    extra, env = candidate(name)
    t0 = time.perf_counter()
    subprocess.run([*GLASSFORMER, *command, *extra], cwd=ROOT, env={**os.environ, **env},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)  # fmt: skip
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--busy", type=int, default=1, help="spinning processes for the busy run")
    ap.add_argument("--only", choices=list(COMMANDS), action="append", help="some commands")
    args = ap.parse_args()
    names = ["default", "one", "passive", "cores-minus-load"]
    print(f"{os.cpu_count()} cores; candidates: {', '.join(names)}")
    for label, command in COMMANDS.items():
        if args.only and label not in args.only:
            continue
        for load in (0, args.busy):
            with busy(load):
                seen = run_queue()
                for name in names:  # warm-up: the OS file cache, the first compile
                    timed(command, name)
                times = {name: [] for name in names}
                for _ in range(args.repeats):
                    for name in names:
                        times[name].append(timed(command, name))
            med = {name: statistics.median(t) for name, t in times.items()}
            best = min(med.values())
            print(f"\n{label}, {load} busy process(es) ({seen}), medians of {args.repeats}:")
            for name in names:
                print(f"  {name:<18} {med[name]:7.2f} s   x{med[name] / best:5.2f} of the best"
                      f"   x{med[name] / med['one']:5.2f} of one thread")  # fmt: skip


if __name__ == "__main__":
    main()
