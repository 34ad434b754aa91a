"""The output folder's lock names its holder after a takeover (`files.locked`): a killed writer's
record, longer than the new one, must not leave its tail in the file, or the next process told
the folder is in use could not say who holds it. Oracle: the file read as JSON, and another
process's refusal, which must name this process and its command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from glassformer import files

ROOT = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True, check=True)  # fmt: skip
    return int(p.stdout)


def test_a_taken_over_lock_holds_only_its_new_holders_record(tmp_path):
    out = tmp_path / "run"
    lock = files.lock_file(out)
    old = {"pid": _dead_pid(), "command": "train lm --data " + "x" * 300, "since": "earlier"}
    lock.write_text(json.dumps(old))
    with files.locked(out, "init") as previous:
        assert previous == old  # the killed holder, taken over
        record = json.loads(lock.read_text())
        assert (record["pid"], record["command"]) == (os.getpid(), "init")
        code = f"from glassformer import files\nwith files.locked({str(out)!r}, 'other'): pass"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=ROOT, timeout=120)  # fmt: skip
    assert r.returncode != 0
    assert f"is in use: process {os.getpid()} (init, since" in r.stderr, r.stderr[-500:]
    assert not lock.exists()
