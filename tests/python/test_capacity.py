"""attnscope.capacity against scipy and brute-force numpy."""
import numpy as np
import pytest
import scipy.stats

import attnscope
from conftest import numpy_softmax

capacity = attnscope.capacity


def test_ks_and_wilcoxon_match_scipy(rng):
    for m, n in ((7, 9), (30, 45), (100, 80)):
        a, b = rng.standard_normal(m), rng.standard_normal(n) + 0.3
        ours = capacity.ks_2samp(a, b, "exact")
        theirs = scipy.stats.ks_2samp(a, b, method="exact")
        assert ours.statistic == pytest.approx(theirs.statistic, abs=1e-15)
        assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9, abs=1e-14)
    a, b = rng.standard_normal(30), rng.standard_normal(30)
    ours = capacity.wilcoxon_signed_rank(a, b)
    theirs = scipy.stats.wilcoxon(a, b, zero_method="wilcox", correction=False)
    assert ours.statistic == theirs.statistic and ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)
    assert capacity.kolmogorov_critical_value(0.05) == pytest.approx(1.3581, abs=1e-4)
    assert capacity.kolmogorov_survival(1.3581) == pytest.approx(scipy.stats.kstwobign.sf(1.3581), rel=1e-10)


def test_power_law_matches_polyfit(rng):
    x = np.arange(1, 30, dtype=float)
    y = 3 * x ** -0.7 * np.exp(rng.normal(0, 0.05, x.size))
    fit = capacity.fit_power_law(x, y)
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    assert fit.exponent == pytest.approx(slope, rel=1e-12) and fit.prefactor == pytest.approx(np.exp(intercept), rel=1e-12)


def test_selection_distance_and_separability_by_brute_force(rng):
    L, d, N = 40, 8, 5
    x = capacity.project_to_sphere(rng.standard_normal((L, d)))
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1, rtol=1e-14)
    alpha = numpy_softmax(4 * x @ x[0])
    top = capacity.top_n(alpha, N)
    assert top == list(np.argsort(-alpha, kind="stable")[:N])
    s = (alpha[top, None] * x[top]).sum(0)
    np.testing.assert_allclose(capacity.context_vector(alpha, x, top), s, rtol=1e-13)
    rest = [i for i in range(L) if i not in top]
    distance = sum(np.linalg.norm(alpha[i] * x[i] - s) for i in rest)
    assert capacity.representation_distance(alpha, x, top) == pytest.approx(distance, rel=1e-12)
    assert capacity.top_n_distance(alpha, x, N) == pytest.approx(distance, rel=1e-12)
    radius = min(np.linalg.norm(s - alpha[i] * x[i]) for i in rest)
    distinguishable = sum(np.linalg.norm(s - alpha[i] * x[i]) < radius for i in top)
    sep = capacity.separability(alpha, x, top)
    assert sep.radius == pytest.approx(radius, rel=1e-12)
    assert sep.distinguishable == distinguishable and sep.fraction == pytest.approx(distinguishable / N)
    assert capacity.distance_upper_bound(alpha, x, top) >= distance
    pairwise = np.linalg.norm(x[:, None] - x[None], axis=-1) + np.eye(L) * 10
    assert capacity.min_pairwise_distance(x) == pytest.approx(pairwise.min(), rel=1e-12)


def test_jacobian_temperature_tools(rng):
    for gap, temperature in ((0.0, 1.0), (0.3, 0.5), (2.0, 0.1)):
        p = numpy_softmax(np.array([gap, 0.0]), temperature)
        jac = (np.diag(p) - np.outer(p, p)) / temperature
        assert capacity.two_logit_jacobian_norm(gap, temperature) == pytest.approx(np.linalg.eigvalsh(jac).max(), rel=1e-12)
    heads = rng.standard_normal((3, 6, 6))
    exact = capacity.exact_jacobian_norm(heads, 0.5)
    means = []
    for h in heads:
        p = numpy_softmax(h, 0.5)
        means.append(np.mean([np.linalg.eigvalsh((np.diag(r) - np.outer(r, r)) / 0.5).max() for r in p]))
    np.testing.assert_allclose(exact.per_head_mean, means, rtol=1e-12)
    g = capacity.gradient_sensitivity(heads, 0.5, 1e-6, 3)
    assert g.value == pytest.approx(max(g.per_head)) and g.value <= exact.max_over_rows * (1 + 1e-4)
    gaps = capacity.top_two_gaps(heads[0], causal=True)
    assert gaps[0] == np.inf
    row = heads[0, 3, :4]
    assert gaps[3] == pytest.approx(np.sort(row)[-1] - np.sort(row)[-2])


def test_separability_rows_curve(rng):
    L = 32
    v = rng.standard_normal((L, 8))
    attention = numpy_softmax(rng.standard_normal((L, L)) * 3)
    curve = capacity.separability_rows(attention, v, [1, 2, 4])
    assert len(curve) == 3
    for entry in curve:
        assert 0 <= entry.mean_fraction <= 1 and len(entry.fraction) == len(entry.rows) == L
