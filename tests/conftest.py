"""Shared fixtures: the articles' golden numbers (a copy of shared/golden kept in tests/golden)."""

import json
from pathlib import Path

import numpy as np
import pytest

GOLDEN = Path(__file__).parent / "golden"


def load_golden(name: str) -> dict:
    return json.loads((GOLDEN / name).read_text())


def arr(values) -> np.ndarray:
    """A golden list as a float array ("-inf" strings included)."""
    return np.array(values, dtype=np.float64)


@pytest.fixture
def golden():
    return load_golden
