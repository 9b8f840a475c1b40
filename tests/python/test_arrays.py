"""Array handling of the bindings: zero-copy input, dtypes, batch dimensions, non-contiguous input, errors."""
import threading
import time

import numpy as np
import pytest

import attnscope
from conftest import numpy_softmax


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_c_contiguous_input_is_read_in_place(rng, dtype):
    z = rng.standard_normal((4, 8)).astype(dtype)
    assert attnscope._input_address(z) == z.ctypes.data
    block = z[1:3]  # a C-contiguous view into z
    assert attnscope._input_address(block) == block.ctypes.data


def test_other_layouts_and_dtypes_are_converted(rng):
    z = rng.standard_normal((6, 8))
    strided = z[:, ::2]
    transposed = z.T
    assert attnscope._input_address(strided) != strided.ctypes.data
    assert attnscope._input_address(transposed) != transposed.ctypes.data
    np.testing.assert_array_equal(attnscope.softmax(strided), attnscope.softmax(np.ascontiguousarray(strided)))
    np.testing.assert_array_equal(attnscope.softmax(transposed), attnscope.softmax(np.ascontiguousarray(transposed)))
    ints = np.arange(12).reshape(3, 4)
    out = attnscope.softmax(ints)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, numpy_softmax(ints), rtol=1e-14)
    assert attnscope.softmax([[1.0, 2.0]]).dtype == np.float64  # lists work
    assert attnscope.softmax(np.ones(3, np.float16)).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_results_are_new_arrays_of_the_input_dtype(rng, dtype):
    z = rng.standard_normal((3, 5)).astype(dtype)
    before = z.copy()
    for f in (attnscope.softmax, attnscope.sparsemax, attnscope.entmax15):
        out = f(z)
        assert out.dtype == dtype and out.flags.c_contiguous and out.flags.writeable
        assert not np.shares_memory(out, z)
        out[...] = 7  # writable, and writing does not touch the input
    np.testing.assert_array_equal(z, before)
    norms = attnscope.jacobian_spectral_norm(z)
    assert norms.dtype == dtype and not np.shares_memory(norms, z)


def test_batch_dimensions_are_row_wise(rng):
    z = rng.standard_normal((2, 3, 4, 5))
    p = attnscope.softmax(z, causal=True, causal_offset=0)  # 4 queries x 5 keys: top-left alignment
    norms = attnscope.jacobian_spectral_norm(z, "sparsemax", causal=True, causal_offset=0)
    assert p.shape == z.shape and norms.shape == (2, 3, 4)
    for a in range(2):
        for b in range(3):
            np.testing.assert_array_equal(p[a, b], attnscope.softmax(z[a, b], causal=True, causal_offset=0))
            np.testing.assert_array_equal(norms[a, b], attnscope.jacobian_spectral_norm(z[a, b], "sparsemax", causal=True,
                                                                                        causal_offset=0))
    one_row = attnscope.jacobian_spectral_norm(z[0, 0, 0])
    assert one_row.shape == () and one_row == attnscope.jacobian_spectral_norm(z[0, 0, :1])[0]
    assert attnscope.softmax(z.reshape(-1, 5)).reshape(z.shape).tolist() == attnscope.softmax(z).tolist()


def test_errors_are_value_error_and_os_error_with_the_cpp_messages(tmp_path):
    with pytest.raises(ValueError, match=r"^attnscope::softmax: non-finite logit nan at row 1, column 0"):
        attnscope.softmax([[0.0, 1.0], [np.nan, 1.0]])
    with pytest.raises(ValueError, match="attnscope::softmax: .*empty input"):
        attnscope.softmax(np.zeros((2, 0)))
    with pytest.raises(ValueError, match="temperature"):
        attnscope.softmax([1.0, 2.0], temperature=0)
    with pytest.raises(ValueError, match="every key masked"):
        attnscope.softmax(np.zeros((2, 2)), mask=np.array([[True, True], [False, False]]))
    with pytest.raises(ValueError, match="mask has shape"):
        attnscope.softmax(np.zeros((2, 3)), mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="either causal or mask"):
        attnscope.softmax(np.zeros((2, 2)), causal=True, mask=np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="tangent has shape"):
        attnscope.jacobian_vector_product(np.zeros((2, 2)), "softmax", np.zeros((2, 3)))
    with pytest.raises(ValueError, match="at least one axis"):
        attnscope.softmax(np.float64(1.0))
    with pytest.raises(ValueError, match="parse_normalization_map"):
        attnscope.jacobian_spectral_norm([1.0, 2.0], "nonsense")
    with pytest.raises(ValueError, match="^attnscope::composition::entropy_split|^attnscope::entropy_split|rows must sum|sum"):
        attnscope.composition.entropy_split([[0.5, 0.6]])
    with pytest.raises(OSError, match=r"^attnscope::read_file: .*missing.npy: cannot open"):
        attnscope.io.read_npy(str(tmp_path / "missing.npy"))
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    with pytest.raises(OSError, match="bad.npy"):
        attnscope.io.read_npy(str(tmp_path / "bad.npy"))
    with pytest.raises(OSError):
        attnscope.model.load_model(str(tmp_path / "no-model.bin"))
    with pytest.raises(TypeError):
        attnscope.softmax(np.zeros(3), temperature="hot")


def test_gil_is_released_during_computation(rng):
    """While one thread is inside a long C++ call, the main thread keeps running Python code: its time stamps cover
    most of the call's window (with the GIL held they could only fall in its first switch interval, 5 ms)."""
    z = rng.standard_normal((2000, 4000))
    expected = attnscope.jacobian_spectral_norm(z[:10], "entmax:1.3")
    result = {}

    def work():
        result["start"] = time.perf_counter()
        result["norms"] = attnscope.jacobian_spectral_norm(z, "entmax:1.3")
        result["end"] = time.perf_counter()

    thread = threading.Thread(target=work)
    stamps = []
    thread.start()
    while thread.is_alive():
        stamps.append(time.perf_counter())
    thread.join()
    np.testing.assert_array_equal(result["norms"][:10], expected)
    window = result["end"] - result["start"]
    inside = [t for t in stamps if result["start"] < t < result["end"]]
    assert window > 0.05, f"the call took only {window:.3f} s: too short to tell"
    assert inside and (inside[-1] - inside[0]) > 0.5 * window
