"""Shared fixtures: the articles' golden numbers (a copy of shared/golden kept in tests/golden)."""

import json
import os
from pathlib import Path

# `make test` runs two xdist workers on two cores: one BLAS / torch thread each, or the workers'
# threads fight over the cores (small torch operations then run many times slower).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

import signal  # noqa: E402

import numpy as np  # noqa: E402 (after the thread settings)
import pytest  # noqa: E402

# Tests send Ctrl-C to the commands they start. A run started in the background or under nohup
# inherits SIGINT ignored, and an ignored signal stays ignored in every child: restore Python's
# own handler here, so that children start with the default one, as from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

GOLDEN = Path(__file__).parent / "golden"


def load_golden(name: str) -> dict:
    return json.loads((GOLDEN / name).read_text())


def arr(values) -> np.ndarray:
    """A golden list as a float array ("-inf" strings included)."""
    return np.array(values, dtype=np.float64)


@pytest.fixture
def golden():
    return load_golden


# -- no silent skips ------------------------------------------------------------------------------
# `make test` (and so CI) sets GLASSFORMER_REQUIRE_ALL=1: what the test target installs must be
# there, so `require` fails where a developer's hand-run pytest skips. Every skip that remains is
# counted by reason in one line before pytest's closing line, and GLASSFORMER_SUMMARY names a file
# that receives the run's closing lines (the skips by reason, then "glassformer: N passed, N failed,
# M skipped" alone on the last line, the plain form CI reads), which the Makefile prints last.

REQUIRE_ALL = os.environ.get("GLASSFORMER_REQUIRE_ALL") == "1"


def require(ok: bool, why: str) -> None:
    """Skip (loudly) unless `ok`; under GLASSFORMER_REQUIRE_ALL=1 (`make test`) fail instead."""
    if ok:
        return
    if REQUIRE_ALL:
        pytest.fail(f"{why} (GLASSFORMER_REQUIRE_ALL=1: `make test` installs it)", pytrace=False)
    pytest.skip(why, allow_module_level=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    return _required((yield))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    return _required((yield))


def _required(report):
    """Under GLASSFORMER_REQUIRE_ALL=1 a `pytest.importorskip` that skips is a failure: `make
    test` installs every test extra, so a missing one is a broken install, not a reason to skip."""
    why = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
    if REQUIRE_ALL and why.startswith("Skipped: could not import"):
        report.outcome = "failed"
        report.longrepr = f"{why[9:]} (GLASSFORMER_REQUIRE_ALL=1: `make test` installs it)"
    return report


def _skip_reasons(reports) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for r in reports:
        why = r.longrepr[2] if isinstance(r.longrepr, tuple) else str(r.longrepr)
        why = why.removeprefix("Skipped: ").strip() or "no reason given"
        reasons[why] = reasons.get(why, 0) + 1
    return dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def summary_line(stats: dict) -> str:
    """The run's closing lines: the skips grouped by reason (when there are any), then the counts
    as the plain closing line CI reads, alone on the last line: `glassformer: N passed, N failed`
    (`, N skipped` when some were; collection errors count as failed)."""
    n = {key: len(stats.get(key, [])) for key in ("passed", "failed", "error", "skipped")}
    last = f"glassformer: {n['passed']} passed, {n['failed'] + n['error']} failed"
    if n["skipped"]:
        last += f", {n['skipped']} skipped"
    reasons = _skip_reasons(stats.get("skipped", []))
    if not reasons:
        return last
    why = "; ".join(f"{reason}: {k}" for reason, k in reasons.items())
    return f"glassformer: skipped by reason: {why}\n{last}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller reports
        return
    stats = terminalreporter.stats
    reasons = _skip_reasons(stats.get("skipped", []))
    if reasons:
        total = sum(reasons.values())
        terminalreporter.write_line(
            f"skipped: {total} (" + "; ".join(f"{w}: {n}" for w, n in reasons.items()) + ")",
            yellow=True,
            bold=True,
        )
    if path := os.environ.get("GLASSFORMER_SUMMARY"):
        Path(path).write_text(summary_line(stats) + "\n")


@pytest.fixture(scope="session")
def seeded_classifier(tmp_path_factory) -> Path:
    """A small word-level encoder classifier, seeded, with the classes "yes" and "no" (its folder):
    the classifier the touch, explorer and serve tests ablate and patch."""
    from glassformer import weights
    from glassformer.cli import main

    d = tmp_path_factory.mktemp("clf")
    corpus = d / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 20)
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer",
                 "word", "--corpus", str(corpus), "--seed", "3", "--std", "0.3"]) == 0  # fmt: skip
    cfg, params, tok = weights.load(d / "enc")
    weights.save(d / "clf", cfg, params, tokenizer=tok, labels=["yes", "no"])
    return d / "clf"
