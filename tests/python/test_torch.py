"""Side by side with PyTorch (skipped when torch is not importable)."""
import numpy as np
import pytest

import attnscope

torch = pytest.importorskip("torch")


def test_softmax_matches_torch(rng):
    for dtype, tol in ((np.float32, 2e-6), (np.float64, 1e-14)):
        z = rng.standard_normal((4, 8, 33)).astype(dtype) * 3
        expected = torch.softmax(torch.from_numpy(z), dim=-1).numpy()
        np.testing.assert_allclose(attnscope.softmax(z), expected, rtol=tol * 10, atol=tol)
        # torch tensors are accepted directly (through __array__, no copy for CPU tensors)
        np.testing.assert_allclose(attnscope.softmax(torch.from_numpy(z)), expected, rtol=tol * 10, atol=tol)


def test_exact_spectral_norm_matches_autograd_jacobian(rng):
    z = rng.standard_normal((10, 24)) * 2
    for temperature in (1.0, 0.3):
        ours = attnscope.jacobian_spectral_norm(z, attnscope.SoftmaxMap(temperature))
        for i in range(z.shape[0]):
            row = torch.from_numpy(z[i])
            jac = torch.autograd.functional.jacobian(lambda x: torch.softmax(x / temperature, dim=-1), row)
            expected = torch.linalg.matrix_norm(jac, ord=2).item()
            assert ours[i] == pytest.approx(expected, rel=1e-10)
