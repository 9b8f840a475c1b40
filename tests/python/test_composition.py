"""attnscope.composition against numpy/scipy: CoDA transforms and the exact sink/content splits."""
import numpy as np
import scipy.spatial.distance
import scipy.stats

import attnscope
from conftest import numpy_softmax

composition = attnscope.composition


def test_clr_ilr_and_basis(rng):
    x = numpy_softmax(rng.standard_normal((5, 6)))
    log = np.log(x)
    clr = composition.clr(x)
    np.testing.assert_allclose(clr, log - log.mean(-1, keepdims=True), atol=1e-13)
    z = rng.standard_normal((5, 6))
    np.testing.assert_allclose(composition.clr_from_logits(z), composition.clr(numpy_softmax(z)), atol=1e-12)
    basis = composition.ilr_basis(6)
    np.testing.assert_allclose(basis @ basis.T, np.eye(5), atol=1e-14)  # orthonormal
    np.testing.assert_allclose(basis.sum(-1), 0, atol=1e-14)
    ilr = composition.ilr(x)
    np.testing.assert_allclose(ilr, clr @ basis.T, atol=1e-12)
    np.testing.assert_allclose(composition.ilr(x, sign="r_compositions"), -ilr, atol=1e-15)
    np.testing.assert_allclose(composition.ilr_inv(ilr), x, rtol=1e-12)
    np.testing.assert_allclose(composition.closure(3 * x), x, rtol=1e-15)
    y = numpy_softmax(rng.standard_normal((5, 6)))
    np.testing.assert_allclose(composition.aitchison_distance(x, y), np.linalg.norm(clr - composition.clr(y), axis=-1),
                               rtol=1e-12)
    np.testing.assert_allclose(composition.inner(x, y), (clr * composition.clr(y)).sum(-1), rtol=1e-12)
    np.testing.assert_allclose(composition.perturb(x, y), composition.closure(x * y), rtol=1e-14)


def test_entropy_split_is_exact_and_matches_scipy(rng):
    z = rng.standard_normal((3, 7, 9)) * 2
    z[..., 0] += 3  # a sink at key 0
    a = numpy_softmax(z)
    split = composition.entropy_split(a)
    assert split.entropy.shape == (3, 7)
    np.testing.assert_allclose(split.entropy, scipy.stats.entropy(a, axis=-1), rtol=1e-12)
    s = a[..., 0]
    np.testing.assert_allclose(split.sink_mass, s, rtol=1e-14)
    np.testing.assert_allclose(split.binary, -s * np.log(s) - (1 - s) * np.log(1 - s), rtol=1e-12)
    content = a[..., 1:] / (1 - s)[..., None]
    np.testing.assert_allclose(split.content_entropy, scipy.stats.entropy(content, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(split.entropy, split.sink_term + split.content_term, rtol=1e-12)
    channels = composition.split_sink(a)
    np.testing.assert_allclose(channels.content[..., 1:], content, rtol=1e-13)
    assert np.all(channels.content[..., 0] == 0)


def test_pair_splits(rng):
    a = numpy_softmax(rng.standard_normal((8, 10)) + np.r_[3, np.zeros(9)])
    b = numpy_softmax(rng.standard_normal((8, 10)))
    aitchison = composition.aitchison_split(a, b)
    np.testing.assert_allclose(aitchison.distance_squared, composition.aitchison_distance(a, b) ** 2, rtol=1e-12)
    np.testing.assert_allclose(aitchison.distance_squared,
                               aitchison.sink_term + aitchison.within_sink_term + aitchison.content_term, rtol=1e-12)
    js = composition.js_split(a, b)
    expected = scipy.spatial.distance.jensenshannon(a, b, axis=-1) ** 2  # natural log
    np.testing.assert_allclose(js.divergence, expected, rtol=1e-10)
    np.testing.assert_allclose(composition.jensen_shannon(a, b), expected, rtol=1e-10)
    np.testing.assert_allclose(js.divergence, js.sink_term + js.within_sink_term + js.content_term, rtol=1e-11)
    cos = composition.cosine_conventions(a, b)
    np.testing.assert_allclose(cos.keep, (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1),
                               rtol=1e-13)
    ca, cb = a[:, 1:], b[:, 1:]
    np.testing.assert_allclose(cos.drop, (ca * cb).sum(-1) / np.linalg.norm(ca, axis=-1) / np.linalg.norm(cb, axis=-1),
                               rtol=1e-12)


def test_head_level_functions(rng):
    heads = numpy_softmax(rng.standard_normal((4, 6, 6)) + 3 * (np.arange(6) == 0))
    scores = composition.head_scores(heads)
    np.testing.assert_allclose(scores.sink_mass, heads[..., 0].mean(-1), rtol=1e-12)
    np.testing.assert_allclose(scores.raw_entropy, scipy.stats.entropy(heads, axis=-1).mean(-1), rtol=1e-12)
    summary = composition.channel_summary(heads[0])
    np.testing.assert_allclose(summary.mean_sink_mass, heads[0, :, 0].mean(), rtol=1e-12)
    assert composition.argmax_mass_sink(heads[0]) == [0]
    flips = composition.flip_rate(heads, "cosine")
    assert flips.units == 4 * 3 * 2 // 2 and 0 <= flips.rate <= 1
    matrices = composition.pair_metric_matrices(heads, "js")
    np.testing.assert_allclose(np.diag(matrices.keep), 0, atol=1e-15)
