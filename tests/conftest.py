"""Shared fixtures: the articles' golden numbers (a copy of shared/golden kept in tests/golden)."""

import json
import os
from pathlib import Path

# `make test` runs two xdist workers on two cores: one BLAS / torch thread each, or the workers'
# threads fight over the cores (small torch operations then run many times slower).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402 (after the thread settings)
import pytest  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"


def load_golden(name: str) -> dict:
    return json.loads((GOLDEN / name).read_text())


def arr(values) -> np.ndarray:
    """A golden list as a float array ("-inf" strings included)."""
    return np.array(values, dtype=np.float64)


@pytest.fixture
def golden():
    return load_golden
