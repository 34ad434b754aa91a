"""Start-up time: wall time of whole `glassformer` processes, as a person waits for them.

Each command runs as a fresh subprocess (`python -m glassformer.cli ...`), alternately with the
others (A B C A B C ...), after one warm-up round that fills the OS file cache; medians of
--repeats runs. Beside each command: the bare interpreter (`python -c pass`) and `import numpy`,
the floor that any NumPy program pays, and `import torch`, what a command that needs PyTorch pays
before its first line of work.

    .venv/bin/python benchmarks/startup_time.py [--repeats 7]

Commands: `glassformer --help` (no model, no torch), `glassformer walkthrough hello-world` (the
article's worked example, NumPy only), and translating one sentence with the shipped models/en-es
(loads torch and a 19 MB checkpoint, greedy through the KV cache: `translate --beam 1`) and with
the default beam of 4.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "glassformer.cli"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "glassformer --help": [*CLI, "--help"],
    "glassformer walkthrough hello-world": [*CLI, "walkthrough", "hello-world"],
    "glassformer translate en-es (1 sentence, --beam 1)": [
        *CLI,
        "translate",
        str(ROOT / "models" / "en-es"),
        "Where is the station?",
        "--beam",
        "1",
    ],  # fmt: skip
    "glassformer translate en-es (1 sentence, beam 4)": [
        *CLI,
        "translate",
        str(ROOT / "models" / "en-es"),
        "Where is the station?",
    ],  # fmt: skip
}


def wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{r.stderr}")
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7, help="runs per command (>= 5; default 7)")
    args = p.parse_args()
    if args.repeats < 5:
        p.error("--repeats must be at least 5")
    for argv in COMMANDS.values():  # warm-up: the OS file cache, .pyc files
        wall(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, argv in COMMANDS.items():
            times[name].append(wall(argv))
    print(f"start-up wall time, medians of {args.repeats} subprocess runs each (alternated)")
    for name, t in times.items():
        med = statistics.median(t)
        print(f"  {name:<52} {med * 1000:8.0f} ms  (min {min(t) * 1000:.0f}, max "
              f"{max(t) * 1000:.0f})")  # fmt: skip


if __name__ == "__main__":
    main()
