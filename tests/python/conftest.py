"""Shared fixtures of the Python tests: the attnscope module (PYTHONPATH = <build>/python) and the data folder.

The data (stories260K, gpt2-wp-mini, War and Peace tokens) is read from $ATTNSCOPE_DATA, by default
<repository>/../shared/data; tests that need it are skipped when it is absent.
"""
import os
import pathlib

import numpy as np
import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def data_dir():
    path = pathlib.Path(os.environ.get("ATTNSCOPE_DATA", REPOSITORY.parent / "shared" / "data"))
    if not (path / "stories260K.bin").exists():
        pytest.skip(f"shared data not found in {path} (set ATTNSCOPE_DATA)")
    return path


@pytest.fixture
def rng():
    return np.random.default_rng(20261201)


def numpy_softmax(z, temperature=1.0, axis=-1):
    """Closed form softmax(z / T) with max subtraction, in float64."""
    z = np.asarray(z, dtype=np.float64) / temperature
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
