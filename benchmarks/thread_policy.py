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
(beam 4, PyTorch float32, 200 `eng-spa-valid` sentences from a file), the same with
`--alignments` (recording on the fast path), `generate --engine reference` (NumPy: OpenBLAS's
threads), 15 steps of `train lm` (the char-lm preset on Tiny Shakespeare, into a temporary
folder) and `serve models/char-lm` (the explorer: 12 runs of a growing prefix, one after the other
as a person types, timed from the first request to the last answer; the server's start is not
timed). Each load runs the candidates alternately (A B C D A B C D ...), `--repeats`
times after a warm-up; load is `benchmarks/_harness.py`'s spinning processes (0, then
`--busy` of them). Printed: the median wall time of each, its ratio to the best candidate at that
load and to `one` (the rule asked for: idle, within ~1.1x of the best; busy, within ~1.3x of one
thread).

    .venv/bin/python benchmarks/thread_policy.py [--repeats 5] [--busy 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import busy, run_queue
from serve_load import _get, _post, start_server

from glassformer.data import read_pairs
from glassformer.devices import others_runnable

ROOT = Path(__file__).resolve().parents[1]
GLASSFORMER = [sys.executable, "-c", "from glassformer.cli import main; raise SystemExit(main())"]
TMP = Path(tempfile.gettempdir())
SOURCES = TMP / "thread-policy-sources.txt"  # 200 of the 1,000 sentences, every fifth
GENERATE = ["generate", "models/char-lm", "To be", "--max-new-tokens", "300"]
TRANSLATE = ["translate", "models/en-es", "--input", str(SOURCES)]
SERVE = "serve (torch)"  # not a command that ends: `timed_serve`
TYPED = "ROMEO: But soft, what light through yonder"
COMMANDS = {
    "generate (torch)": GENERATE,
    "translate (torch)": TRANSLATE,
    "translate --alignments (torch)": [*TRANSLATE, "--overwrite", "--alignments"]
    + [str(TMP / "thread-policy-alignments.jsonl")],
    "generate (reference)": [*GENERATE, "--engine", "reference"],
    "train (torch)": ["train", "lm", "--out", str(TMP / "thread-policy")]
    + "--overwrite --quiet --set max_steps=15 --set eval_interval=1000".split(),
    SERVE: ["models/char-lm"],
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
    if command is COMMANDS[SERVE]:
        return timed_serve(command[0], extra, env)
    t0 = time.perf_counter()
    subprocess.run([*GLASSFORMER, *command, *extra], cwd=ROOT, env={**os.environ, **env},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)  # fmt: skip
    return time.perf_counter() - t0


def timed_serve(model: str, extra: list[str], env: dict[str, str]) -> float:
    """Seconds from the first of 12 runs of a growing prefix of TYPED to the last answer, one
    after the other, against a server started with `extra` and `env` (a warm-up run first)."""
    server, host, port = start_server(model, extra, env)
    try:
        model_id = json.loads(_get(host, port, "/api/models"))["models"][0]["id"]
        _post(host, port, "/api/run", json.dumps({"model": model_id, "text": "warm up"}))
        t0 = time.perf_counter()
        for n in range(len(TYPED) - 12, len(TYPED)):
            _post(host, port, "/api/run", json.dumps({"model": model_id, "text": TYPED[:n]}))
        return time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--busy", type=int, default=1, help="spinning processes for the busy run")
    ap.add_argument("--only", choices=list(COMMANDS), action="append", help="some commands")
    args = ap.parse_args()
    pairs = read_pairs("eng-spa-valid")
    SOURCES.write_text("".join(f"{s}\n" for s, _ in pairs[::5][:200]), encoding="utf-8")
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
