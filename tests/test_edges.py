"""Round two of the bad-input and fault tables (issue 23): the count per family.

Each family's rows live beside the code they guard, one file per part: test_edges_reading.py
(reads outside the folder, input files), test_edges_runs.py (locked output folders, training
state on --resume), test_edges_nonfinite.py (non-finite numbers never pass silently),
test_edges_values.py (values the CLI accepts), test_edges_server.py (the server's own guards),
test_edges_api.py (typed errors in the Python API). Each file lists its rows in `CASES`, every
row with its family; this test holds the table to the size the issue asked for and names the
families it must cover.
"""

from __future__ import annotations

import importlib
from collections import Counter

import pytest

PARTS = ("reading", "runs", "nonfinite", "values", "server", "api")
FAMILIES = {"outside", "input", "lock", "resume", "nonfinite", "values", "server", "api", "newuser"}


def _family(row) -> str:
    return row.family if hasattr(row, "family") else row[0]


def counts() -> Counter:
    found = Counter()
    for part in PARTS:
        module = importlib.import_module(f"test_edges_{part}")
        found.update(_family(row) for row in module.CASES)
    return found


def test_round_two_covers_every_family_with_150_cases():
    pytest.importorskip("torch")
    found = counts()
    assert set(found) == FAMILIES, found
    assert sum(found.values()) >= 150, found
