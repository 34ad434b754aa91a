"""Mutation testing: plant small bugs one at a time and see whether the tests catch them.

Each mutation in tools/mutations.py (an operator flipped, a constant nudged, a guard removed) is
applied to a COPY of the working tree (never to the checkout itself: others' test runs read it),
the module's relevant tests run with `pytest -x -q`, and the mutant is killed when they fail (or
time out) and survives when they pass. The report gives the kill rate per module and names every
survivor. First each module's tests run once unmutated: a module whose tests fail already is
reported and its mutants are not run (a kill there would mean nothing). A mutation whose snippet
no longer occurs exactly once is reported as stale (exit status 1).

    .venv/bin/python tools/mutate.py                  # everything, 2 jobs (~3 min on 2 cores)
    .venv/bin/python tools/mutate.py --module decoding  # one module's mutants
    .venv/bin/python tools/mutate.py --list           # the mutations and tests, nothing run
    .venv/bin/python tools/mutate.py --wave 35        # the mutants issue 35 added

This is a tool for maintainers, not part of the library: it prints, and it is not imported.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutations import MUTATIONS, TESTS, Mutation  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Outcome:
    mutation: Mutation | None  # None: the module's unmutated baseline
    module: str
    status: str  # "killed", "survived", "timeout", "error" (pytest rc >= 2), "invalid" (no
    # longer Python: not run, not counted)
    seconds: float
    caught_by: str  # the first failing test, or pytest's last line


def stale(mutation: Mutation, root: Path = ROOT) -> str | None:
    """Why the mutation cannot be applied (a snippet not there exactly once), or None."""
    for file, find, _ in mutation.edits:
        path = root / file
        if not path.is_file():
            return f"{file} does not exist"
        n = path.read_text().count(find)
        if n != 1:
            return f"{file}: the snippet occurs {n} times, not once: {find.strip()[:60]!r}"
    return None


def tree_files(root: Path) -> list[str]:
    """The working tree as git sees it: tracked files and untracked ones not ignored."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout  # fmt: skip
    return [f for f in out.decode().split("\0") if f and (root / f).is_file()]


def copy_tree(root: Path, dest: Path) -> None:
    for f in tree_files(root):
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, target)


def pytest_argv(module: str) -> list[str]:
    tests = [f"tests/{t}" for t in TESTS[module]]
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]


def _env(copy: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(copy), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    for var in ("GLASSFORMER_REQUIRE_ALL", "GLASSFORMER_SUMMARY", "PYTEST_XDIST_WORKER"):
        env.pop(var, None)
    return env


def check_copy(copy: Path) -> None:
    """The copy's tests must import the copy's glassformer (not the checkout's editable one)."""
    code = "import glassformer; print(glassformer.__file__)"
    where = subprocess.run([sys.executable, "-c", code], cwd=copy, env=_env(copy),
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    if not Path(where).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"mutate: the copy imports glassformer from {where}, not {copy}")


def run_tests(copy: Path, module: str, timeout: float) -> tuple[str, float, str]:
    env = _env(copy)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        pytest_argv(module), cwd=copy, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # pytest and whatever it started (its own group)
        proc.communicate()
        return "timeout", time.perf_counter() - t0, f"no result within {timeout:.0f} s"
    seconds = time.perf_counter() - t0
    lines = out.strip().splitlines()
    first = next(
        (x for x in lines if x.startswith(("FAILED ", "ERROR "))), lines[-1] if lines else ""
    )
    status = {0: "survived", 1: "killed"}.get(proc.returncode, "error")
    return status, seconds, first[:160]


def apply(copy: Path, mutation: Mutation) -> dict[Path, str]:
    """Edit the copy; return the original texts to restore."""
    originals: dict[Path, str] = {}
    for file, find, replace in mutation.edits:
        path = copy / file
        text = path.read_text()
        originals.setdefault(path, text)
        path.write_text(text.replace(find, replace, 1))
    return originals


def not_python(edited: dict[Path, str]) -> str | None:
    """Why an edited file no longer compiles (a mutant that tests nothing), or None."""
    for path in edited:
        try:
            compile(path.read_text(), str(path), "exec")
        except SyntaxError as e:
            return f"the mutant does not compile: {e.msg} ({path.name}:{e.lineno})"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", choices=sorted(TESTS), help="only these modules")
    ap.add_argument("--only", action="append", help="only these mutation ids")
    ap.add_argument("--wave", type=int, help="only the mutants added by this issue's work (35)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per pytest run")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated runs")
    ap.add_argument("--list", action="store_true", help="print the mutations and tests, run none")
    args = ap.parse_args(argv)

    chosen = [m for m in MUTATIONS if (not args.module or m.module in args.module)]
    chosen = [m for m in chosen if not args.only or m.id in args.only]
    chosen = [m for m in chosen if args.wave is None or m.wave == args.wave]
    problems = {m.id: why for m in chosen if (why := stale(m))}
    for mid, why in problems.items():
        print(f"STALE {mid}: {why}")
    missing = sorted({t for m in chosen for t in TESTS[m.module]
                      if not (ROOT / "tests" / t.split("::")[0]).is_file()})  # fmt: skip
    for t in missing:
        print(f"MISSING test file tests/{t}")
    runnable = [m for m in chosen if m.id not in problems]
    modules = sorted({m.module for m in runnable}, key=list(TESTS).index)
    if args.list:
        for mod in modules:
            print(f"\n{mod}: {' '.join(TESTS[mod])}")
            for m in (x for x in runnable if x.module == mod):
                print(f"  {m.id:36} {m.what}{f'  [issue {m.issue}]' if m.issue else ''}")
        return 1 if problems else 0

    t_start = time.perf_counter()
    # (no "glassformer" in the path: tests check that a message names no glassformer file)
    work = Path(tempfile.mkdtemp(prefix="mutants-"))
    slots: queue.Queue[Path] = queue.Queue()
    try:
        for j in range(max(1, args.jobs)):
            copy = work / f"tree{j}"
            copy_tree(ROOT, copy)
            check_copy(copy)
            slots.put(copy)
        print(f"{len(runnable)} mutants over {len(modules)} modules, {args.jobs} at a time, "
              f"copies under {work}", flush=True)  # fmt: skip

        def job(item: tuple[str, Mutation | None]) -> Outcome:
            module, mutation = item
            copy = slots.get()
            originals = apply(copy, mutation) if mutation else {}
            try:
                if invalid := not_python(originals):
                    status, seconds, caught = "invalid", 0.0, invalid
                else:
                    status, seconds, caught = run_tests(copy, module, args.timeout)
            finally:
                for path, text in originals.items():
                    path.write_text(text)
                slots.put(copy)
            label = mutation.id if mutation else f"(baseline {module})"
            print(f"  {status:8} {seconds:6.1f}s  {label:36} {caught}", flush=True)
            return Outcome(mutation, module, status, seconds, caught)

        broken: set[str] = set()
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            if not args.no_baseline:
                for o in pool.map(job, [(mod, None) for mod in modules]):
                    if o.status != "survived":  # unmutated, the tests must pass
                        broken.add(o.module)
            todo = [(m.module, m) for m in runnable if m.module not in broken]
            outcomes = list(pool.map(job, todo))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nkill rate per module ({time.perf_counter() - t_start:.0f} s):")
    total_killed = total = 0
    for mod in modules:
        if mod in broken:
            print(f"  {mod:12} its tests fail unmutated: mutants not run")
            continue
        mine = [o for o in outcomes if o.module == mod and o.status != "invalid"]
        if not mine:
            print(f"  {mod:12} no valid mutant")
            continue
        killed = sum(o.status != "survived" for o in mine)
        total_killed, total = total_killed + killed, total + len(mine)
        print(f"  {mod:12} {killed:3}/{len(mine):<3} killed  {100 * killed / len(mine):5.1f}%")
    if total:
        print(
            f"  {'all':12} {total_killed:3}/{total:<3} killed  {100 * total_killed / total:5.1f}%"
        )
    survivors = [o for o in outcomes if o.status == "survived"]
    print(f"\nsurvivors ({len(survivors)}):")
    for o in survivors:
        print(f"  {o.mutation.id:36} {o.mutation.module}: {o.mutation.what}")
    invalid = [o for o in outcomes if o.status == "invalid"]
    for o in invalid:
        print(f"INVALID {o.mutation.id}: {o.caught_by} (not counted; fix the mutation)")
    errors = [o for o in outcomes if o.status in ("error", "timeout")]
    if errors:
        print("\nkilled by an error or a timeout (not by an assertion):")
        for o in errors:
            print(f"  {o.mutation.id:36} {o.status}: {o.caught_by}")
    return 1 if problems or broken or invalid else 0


if __name__ == "__main__":
    sys.exit(main())
