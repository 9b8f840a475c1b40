"""attnscope.io round trips with numpy's own writer and reader (np.save / np.load / np.savez)."""
import numpy as np
import pytest

import attnscope

io = attnscope.io

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.float16]


@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_round_trips_with_numpy(tmp_path, rng, dtype):
    for shape in [(), (5,), (3, 4), (2, 3, 4)]:
        a = (rng.standard_normal(shape) * 10).astype(dtype)
        np.save(tmp_path / "numpy.npy", a)
        ours = io.read_npy(str(tmp_path / "numpy.npy"))
        assert ours.dtype == a.dtype and ours.shape == a.shape
        np.testing.assert_array_equal(ours, a)
        io.write_npy(str(tmp_path / "ours.npy"), a)
        np.testing.assert_array_equal(np.load(tmp_path / "ours.npy"), a)
        assert (tmp_path / "ours.npy").read_bytes() == (tmp_path / "numpy.npy").read_bytes()  # np.save's bytes
    fortran = np.asfortranarray(rng.standard_normal((3, 5)))
    np.save(tmp_path / "f.npy", fortran)
    np.testing.assert_array_equal(io.read_npy(str(tmp_path / "f.npy")), fortran)


def test_npz_and_safetensors_round_trips(tmp_path, rng):
    arrays = {"layer0.attention": rng.random((2, 4, 4)).astype(np.float32), "ids": np.arange(7), "flag": np.array(True)}
    np.savez_compressed(tmp_path / "numpy.npz", **arrays)
    ours = io.read_npz(str(tmp_path / "numpy.npz"))
    assert list(ours) == list(arrays)
    for name in arrays:
        np.testing.assert_array_equal(ours[name], arrays[name])
    for compressed in (True, False):
        io.write_npz(str(tmp_path / "ours.npz"), arrays, compressed)
        with np.load(tmp_path / "ours.npz") as loaded:
            for name in arrays:
                np.testing.assert_array_equal(loaded[name], arrays[name])
    io.write_safetensors(str(tmp_path / "t.safetensors"), arrays, {"origin": "test"})
    tensors, metadata = io.read_safetensors(str(tmp_path / "t.safetensors"))
    assert metadata == {"origin": "test"}
    for name in arrays:
        np.testing.assert_array_equal(tensors[name], arrays[name])


def test_io_errors(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(100.0))
    data = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "truncated.npy").write_bytes(data[:-8])
    with pytest.raises(OSError, match="truncated.npy"):
        io.read_npy(str(tmp_path / "truncated.npy"))
    with pytest.raises(OSError, match="missing.npz"):
        io.read_npz(str(tmp_path / "missing.npz"))
    (tmp_path / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    with pytest.raises(OSError, match="bad.safetensors"):
        io.read_safetensors(str(tmp_path / "bad.safetensors"))
    with pytest.raises(ValueError, match="unsupported dtype"):
        io.write_npy(str(tmp_path / "u.npy"), np.arange(3, dtype=np.uint8))
