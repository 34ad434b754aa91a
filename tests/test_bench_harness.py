"""The benchmarks' busy-machine mode (benchmarks/_harness.py): GLASSFORMER_BENCH_BUSY=N starts N
processes that each spin one core for as long as the measurement lasts, and the report says so.
Oracle: the kernel's own view (/proc: the spinning processes exist and use CPU time while the
harness measures, and are gone after)."""

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _harness  # noqa: E402

SPIN = b"while True: pass"


def spinners() -> dict[int, float]:
    """{pid: CPU seconds used} of the harness's spinning processes alive now."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and SPIN in (proc / "cmdline").read_bytes():
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] not in "ZX":  # a zombie or a dead one no longer spins
                    found[int(proc.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf(
                        "SC_CLK_TCK"
                    )
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the processes in /proc")
def test_busy_spins_while_measuring_and_stops_after(monkeypatch, capsys):
    before = set(spinners())
    monkeypatch.setenv(_harness.BUSY, "2")
    seen = {}

    def work():
        time.sleep(0.05)
        seen.update({p: s for p, s in spinners().items() if p not in before})

    times = _harness.alternate({"a": work, "b": work}, repeats=3, warmup=0)
    assert len(seen) == 2 and all(cpu > 0.2 for cpu in seen.values()), seen
    assert not set(spinners()) & set(seen)  # killed and reaped
    _harness.report("t", times, "a", "b")
    assert "[2 busy processes (" in capsys.readouterr().out


def test_no_load_unless_asked_and_a_bad_count_is_one_line(monkeypatch, capsys):
    monkeypatch.delenv(_harness.BUSY, raising=False)
    monkeypatch.setattr(_harness, "_seen_load", [])
    before = set(spinners())
    _harness.alternate({"a": lambda: None, "b": lambda: None}, repeats=2, warmup=0)
    assert set(spinners()) == before
    _harness.report("t", {"a": [1.0], "b": [2.0]}, "a", "b")
    assert "[no load added]" in capsys.readouterr().out
    monkeypatch.setenv(_harness.BUSY, "two")
    with pytest.raises(SystemExit, match="give a number of busy processes"):
        _harness.alternate({"a": lambda: None}, repeats=1)
