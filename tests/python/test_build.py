"""How the module was built: with OpenMP (the CMake build and `pip install .` both enable it), so that threads= is
honoured; a module without OpenMP refuses threads > 1 instead of ignoring it."""
import os

import numpy as np
import pytest

import attnscope


def test_the_module_is_built_with_openmp():
    if os.environ.get("ATTNSCOPE_PYTHON_WITHOUT_OPENMP") == "1":
        pytest.skip("ATTNSCOPE_PYTHON_WITHOUT_OPENMP=1: a build without OpenMP on purpose")
    assert attnscope.openmp >= 200805, f"attnscope.openmp = {attnscope.openmp}: the module was built without OpenMP"


def test_threads_give_the_statistics_of_one_thread(rng):
    q, k = rng.standard_normal((300, 16)), rng.standard_normal((300, 16))
    one = attnscope.stream.row_statistics(q, k, attnscope.stream.RowStatisticsOptions(threads=1, block_rows=16))
    if attnscope.openmp == 0:
        with pytest.raises(ValueError, match="threads=2 needs OpenMP"):
            attnscope.stream.RowStatisticsOptions(threads=2)
        return
    two = attnscope.stream.row_statistics(q, k, attnscope.stream.RowStatisticsOptions(threads=2, block_rows=16))
    for name in ("entropy", "sink_mass", "max_weight", "jacobian_norm", "log_partition"):
        np.testing.assert_array_equal(getattr(two, name), getattr(one, name), err_msg=name)
    with pytest.raises(ValueError, match="threads must be >= 0"):
        attnscope.stream.RowStatisticsOptions(threads=-1)
