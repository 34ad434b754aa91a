"""No silent skips (issue 24 point 5) and a mutation list that still applies (point 6).

The summary hook of tests/conftest.py runs here on a small suite whose outcome is known by
construction (passes, skips under two reasons, a `require` met and one not, a missing import): the
line written for `make test` must count them exactly, pytest's own closing line must stay the last
line pytest prints, and under GLASSFORMER_REQUIRE_ALL=1 (`make test`) a missing requirement or a
missing import fails the run instead of skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SUITE = """
import pytest
from conftest import require

def test_one(): pass
def test_two(): pass
@pytest.mark.parametrize("i", [1, 2])
def test_root(i): pytest.skip("needs root")
def test_other(): pytest.skip("no network")
def test_met():
    require(True, "never said")
def test_unmet():
    require(False, "the wheel is missing")
def test_not_installed():
    pytest.importorskip("glassformer_has_no_such_module")
"""


def _run(tmp_path: Path, **env) -> tuple[subprocess.CompletedProcess, str]:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(SUITE)
    summary = tmp_path / "summary.txt"
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("GLASSFORMER_", "PYTEST"))}
    run_env |= {"GLASSFORMER_SUMMARY": str(summary), **env}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "test_inner.py"],
        cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return r, summary.read_text() if summary.exists() else ""


def test_every_skip_is_counted_by_reason_and_pytest_closes_the_run(tmp_path):
    r, line = _run(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    reasons = (
        "needs root: 2; could not import 'glassformer_has_no_such_module': No module named"
        " 'glassformer_has_no_such_module': 1; no network: 1; the wheel is missing: 1"
    )
    assert line == (
        f"glassformer: skipped by reason: {reasons}\nglassformer: 3 passed, 0 failed, 5 skipped\n"
    )
    out = r.stdout.strip().splitlines()
    assert out[-1].startswith("3 passed, 5 skipped in "), out[-1]  # pytest's line, intact, last
    assert f"skipped: 5 ({reasons})" in out


def test_under_make_test_a_missing_requirement_fails(tmp_path):
    r, line = _run(tmp_path, GLASSFORMER_REQUIRE_ALL="1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert line == (
        "glassformer: skipped by reason: needs root: 2; no network: 1\n"
        "glassformer: 3 passed, 2 failed, 3 skipped\n"
    )
    assert "the wheel is missing (GLASSFORMER_REQUIRE_ALL=1" in r.stdout
    assert "could not import 'glassformer_has_no_such_module'" in r.stdout


def test_make_test_requires_everything_and_prints_the_summary_last():
    make = shutil.which("make")
    if make is None:
        pytest.fail("make is not installed; `make test` is how CI runs this suite")
    argv = [make, "-n", "-W", ".venv/.test-installed", "test"]  # print the recipe, run nothing
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, MAKEFLAGS=""))  # fmt: skip
    lines = [x for x in r.stdout.splitlines() if "pytest" in x]
    assert lines and "GLASSFORMER_REQUIRE_ALL=1" in lines[0] and "GLASSFORMER_SUMMARY=" in lines[0]
    assert "cat .venv/.test-summary" in r.stdout


def test_every_mutation_still_applies():
    """tools/mutations.py: each snippet occurs exactly once in the source it mutates (a stale
    mutation would silently test nothing), and each module's tests exist."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mutate
        from mutations import MUTATIONS, TESTS
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert len({m.id for m in MUTATIONS}) == len(MUTATIONS)
    assert {m.module for m in MUTATIONS} == set(TESTS)
    stale = {m.id: why for m in MUTATIONS if (why := mutate.stale(m, ROOT))}
    assert not stale, stale
    for module, tests in TESTS.items():
        for t in tests:
            assert (ROOT / "tests" / t.split("::")[0]).is_file(), (module, t)
