"""The normalization maps, their Jacobians and exact spectral norms against independent numpy/scipy references."""
import numpy as np
import pytest
import scipy.stats

import attnscope
from conftest import numpy_softmax


def sparsemax_reference(z):
    """Sort-based closed form (Martins & Astudillo 2016, Alg. 1), one row."""
    z = np.asarray(z, dtype=np.float64)
    s = np.sort(z)[::-1]
    cumulative = np.cumsum(s)
    k = np.arange(1, z.size + 1)
    support = 1 + k * s > cumulative
    k_z = k[support][-1]
    tau = (cumulative[k_z - 1] - 1) / k_z
    return np.maximum(z - tau, 0)


def entmax15_reference(z):
    """Sort-based exact 1.5-entmax (Peters et al. 2019; the entmax package's Entmax15Function), one row."""
    x = np.asarray(z, dtype=np.float64) / 2
    x = x - x.max()
    s = np.sort(x)[::-1]
    k = np.arange(1, x.size + 1)
    mean = np.cumsum(s) / k
    mean_sq = np.cumsum(s * s) / k
    ss = k * (mean_sq - mean ** 2)
    delta = np.maximum((1 - ss) / k, 0)
    tau = mean - np.sqrt(delta)
    support = (tau <= s).sum()
    return np.maximum(x - tau[support - 1], 0) ** 2


def dense_jacobian_fd(f, z, step=1e-6):
    """Central finite differences of a row map f at z (float64)."""
    n = z.size
    jac = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = step
        jac[:, j] = (f(z + e) - f(z - e)) / (2 * step)
    return jac


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-14), (np.float32, 2e-6)])
def test_softmax_matches_closed_form(rng, dtype, tol):
    z = (rng.standard_normal((3, 5, 17)) * 4).astype(dtype)
    for temperature in (0.3, 1.0, 7.0):
        p = attnscope.softmax(z, temperature)
        assert p.dtype == dtype and p.shape == z.shape
        np.testing.assert_allclose(p, numpy_softmax(z, temperature), rtol=tol * 10, atol=tol)


def test_softmax_causal_and_mask(rng):
    z = rng.standard_normal((2, 6, 6))
    p = attnscope.softmax(z, causal=True)
    for b in range(2):
        for i in range(6):
            np.testing.assert_allclose(p[b, i, : i + 1], numpy_softmax(z[b, i, : i + 1]), rtol=1e-13)
            assert np.all(p[b, i, i + 1 :] == 0)
    mask = rng.random((6, 6)) < 0.6
    mask[:, 0] = True
    q = attnscope.softmax(z, mask=mask)
    for b in range(2):
        for i in range(6):
            np.testing.assert_allclose(q[b, i, mask[i]], numpy_softmax(z[b, i, mask[i]]), rtol=1e-13)
            assert np.all(q[b, i, ~mask[i]] == 0)
    per_matrix = np.stack([mask, ~mask | (np.arange(6) == 3)])
    r = attnscope.softmax(z, mask=per_matrix)
    np.testing.assert_array_equal(r[0], q[0])
    np.testing.assert_allclose(r[1], attnscope.softmax(z[1], mask=per_matrix[1]), rtol=0)
    shifted = attnscope.softmax(z, causal=True, causal_offset=2)  # row i sees keys 0..i+2
    assert np.all(shifted[:, 0, 3:] == 0) and np.all(shifted[:, 0, :3] > 0)


def test_sparsemax_and_entmax_match_sort_references(rng):
    for scale in (0.1, 1.0, 5.0):
        z = rng.standard_normal((40, 33)) * scale
        sp = attnscope.sparsemax(z)
        en = attnscope.entmax15(z)
        for i in range(z.shape[0]):
            np.testing.assert_allclose(sp[i], sparsemax_reference(z[i]), atol=1e-13)
            np.testing.assert_allclose(en[i], entmax15_reference(z[i]), atol=1e-12)
        np.testing.assert_allclose(attnscope.entmax_bisect(z, 1.5), en, atol=1e-9)
        np.testing.assert_allclose(attnscope.entmax_bisect(z, 2.0), sp, atol=1e-9)
    # the golden row of the deep-spin README
    np.testing.assert_allclose(attnscope.sparsemax([-2.0, 0.0, 0.5]), [0, 0.25, 0.75], atol=1e-15)
    np.testing.assert_allclose(attnscope.entmax15([-2.0, 0.0, 0.5]), [0, 0.3260, 0.6740], atol=1e-4)


def test_other_maps_match_closed_forms(rng):
    z = rng.standard_normal((4, 9))
    n = z.shape[1]
    np.testing.assert_allclose(attnscope.ssmax(z, 0.43), numpy_softmax(0.43 * np.log(n) * z), rtol=1e-13)
    for k in (0.0, 1.5):
        e = np.exp(z)
        np.testing.assert_allclose(attnscope.softmax_with_sink(z, k), e / (np.exp(k) + e.sum(-1, keepdims=True)),
                                   rtol=1e-13)
    np.testing.assert_allclose(attnscope.sa_softmax(z), z * numpy_softmax(z), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(attnscope.normalize(z, lambda x: np.exp(x / 2), lambda x: np.exp(x / 2) / 2),
                               numpy_softmax(z, 2.0), rtol=1e-13)
    np.testing.assert_array_equal(attnscope.apply_map("temperature:0.5", z), attnscope.softmax(z, 0.5))
    np.testing.assert_array_equal(attnscope.apply_map(attnscope.EntmaxBisectMap(1.3), z), attnscope.entmax_bisect(z, 1.3))
    m = attnscope.parse_normalization_map("ssmax:0.43")
    assert isinstance(m, attnscope.ScalableSoftmaxMap) and m.s == 0.43
    assert attnscope.to_string(m) == "ssmax:0.43"


MAPS = {
    "softmax": lambda z: numpy_softmax(z),
    "temperature:0.7": lambda z: numpy_softmax(z, 0.7),
    "sparsemax": sparsemax_reference,
    "entmax15": entmax15_reference,
}


@pytest.mark.parametrize("name", sorted(MAPS))
def test_jvp_vjp_and_dense_jacobian_against_numpy(rng, name):
    reference = MAPS[name]
    z = rng.standard_normal((6, 7)) * 2
    v = rng.standard_normal(z.shape)
    jvp = attnscope.jacobian_vector_product(z, name, v)
    vjp = attnscope.vector_jacobian_product(z, name, v)
    for i in range(z.shape[0]):
        jac = dense_jacobian_fd(reference, z[i])
        np.testing.assert_allclose(attnscope.jacobian(z[i], name), jac, atol=1e-7)
        np.testing.assert_allclose(attnscope.jacobian(z, i, name), jac, atol=1e-7)
        np.testing.assert_allclose(jvp[i], jac @ v[i], atol=1e-7)
        np.testing.assert_allclose(vjp[i], jac.T @ v[i], atol=1e-7)


@pytest.mark.parametrize("name", ["softmax", "temperature:0.25", "sparsemax", "entmax15", "entmax:1.3", "ssmax:0.5",
                                  "sink:0.5", "sa_softmax"])
def test_exact_spectral_norm_against_eigvalsh(rng, name):
    z = rng.standard_normal((12, 16)) * 3
    norms = attnscope.jacobian_spectral_norm(z, name)
    assert norms.shape == (12,)
    for i in range(z.shape[0]):
        jac = attnscope.jacobian(z[i], name)
        if name == "sa_softmax":  # not symmetric: singular values
            expected = np.linalg.svd(jac, compute_uv=False)[0]
        else:
            np.testing.assert_allclose(jac, jac.T, atol=1e-15)
            expected = np.abs(np.linalg.eigvalsh(jac)).max()
        np.testing.assert_allclose(norms[i], expected, rtol=1e-10, atol=1e-15)


def test_spectral_norms_from_probabilities_and_bounds(rng):
    z = rng.standard_normal((20, 30)) * 2
    p = numpy_softmax(z)
    exact = attnscope.softmax_jacobian_spectral_norm(p, 2.0)
    for i in range(20):
        jac = 2.0 * (np.diag(p[i]) - np.outer(p[i], p[i]))
        np.testing.assert_allclose(exact[i], np.linalg.eigvalsh(jac).max(), rtol=1e-12)
    bounds = attnscope.softmax_jacobian_norm_bounds(p, 2.0)
    assert np.all(bounds.lower <= exact * (1 + 1e-12)) and np.all(exact <= bounds.upper * (1 + 1e-12))
    assert np.all(bounds.upper <= 2 * bounds.lower * (1 + 1e-12))
    assert attnscope.softmax_jacobian_norm_supremum(0.5) == 1.0
    assert attnscope.corollary3_bound(0.5) == 0.5
    sp = attnscope.sparsemax(z)
    np.testing.assert_array_equal(attnscope.sparsemax_jacobian_spectral_norm(sp), ((sp > 0).sum(-1) >= 2) * 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_entropy_matches_scipy(rng, dtype):
    p = numpy_softmax(rng.standard_normal((3, 4, 25)) * 3).astype(dtype)
    h = attnscope.row_entropy(p)
    assert h.dtype == dtype and h.shape == (3, 4)
    np.testing.assert_allclose(h, scipy.stats.entropy(p.astype(np.float64), axis=-1), rtol=1e-5 if dtype == np.float32 else 1e-13)
    np.testing.assert_allclose(attnscope.row_entropy(np.eye(4) * 0 + 0.25), np.full(4, np.log(4)), rtol=1e-15)
