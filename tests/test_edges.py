"""Rounds two and three of the bad-input and fault tables (issues 23 and 35): the count per family.

Each family's rows live beside the code they guard, one file per part: test_edges_reading.py
(reads outside the folder, input files), test_edges_runs.py (locked output folders, training
state on --resume), test_edges_nonfinite.py (non-finite numbers never pass silently),
test_edges_values.py (values the CLI accepts), test_edges_server.py (the server's own guards),
test_edges_api.py (typed errors in the Python API). Each file lists its rows in `CASES`, every
row with its family; this test holds the table to the size the issue asked for and names the
families it must cover.

Round three (issue 35), one file per family of what did not hold: test_edges_signals.py (a Ctrl-C
or SIGTERM at any moment of start-up), test_edges_writes.py (what the program writes never follows
a link; outputs never land on inputs), test_edges_python.py (the Python API refuses what the CLI
refuses), test_edges_learner.py (learner code in a sandbox process), test_edges_special.py
(regular files only; the server's half-open bodies), test_edges_say.py (silent where it should
speak).
"""

from __future__ import annotations

import importlib
from collections import Counter

import pytest

PARTS = ("reading", "runs", "nonfinite", "values", "server", "api")
FAMILIES = {"outside", "input", "lock", "resume", "nonfinite", "values", "server", "api", "newuser"}


def _family(row) -> str:
    return row.family if hasattr(row, "family") else row[0]


ROUND_THREE = ("signals", "writes", "python", "learner", "special", "say")
FAMILIES_THREE = {
    "signal", "write", "onto-input", "python-api", "learner", "special-file", "server-body", "say"
}  # fmt: skip


def counts(parts=PARTS) -> Counter:
    found = Counter()
    for part in parts:
        module = importlib.import_module(f"test_edges_{part}")
        found.update(_family(row) for row in module.CASES)
    return found


def test_round_two_covers_every_family_with_150_cases():
    pytest.importorskip("torch")
    found = counts()
    assert set(found) == FAMILIES, found
    assert sum(found.values()) >= 150, found


def test_round_three_covers_every_family_with_ten_cases_each():
    pytest.importorskip("torch")
    found = counts(ROUND_THREE)
    assert set(found) == FAMILIES_THREE, found
    assert min(found.values()) >= 10, found
