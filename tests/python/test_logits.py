"""attnscope.logits against numpy: targets, masks, rank tools, closed forms, the fitting lab, rounding."""
import numpy as np
import pytest

import attnscope

logits = attnscope.logits


def test_targets_masks_and_closed_forms():
    target = logits.causal_band_target(16, 4)
    np.testing.assert_allclose(target.sum(-1), 1, rtol=1e-15)
    assert np.all(target[np.triu_indices(16, 1)] == 0)
    np.testing.assert_array_equal(logits.causal_mask(5), np.tril(np.ones((5, 5), bool)))
    window = logits.sliding_window_mask(6, 2)
    i, j = np.indices((6, 6))
    np.testing.assert_array_equal(window, (j <= i) & (j >= i - 2))
    band = logits.band_indicator(20, 3)
    assert logits.band_frobenius_norm_squared(20, 3) == (band ** 2).sum()
    sigma = np.linalg.svd(band, compute_uv=False)
    np.testing.assert_allclose(logits.singular_values(band), sigma, rtol=1e-12)
    assert logits.stable_rank(band) == pytest.approx((sigma ** 2).sum() / sigma[0] ** 2, rel=1e-12)
    assert logits.stable_rank(band) >= logits.band_stable_rank_lower_bound(20, 3)
    assert logits.numerical_rank(band) == np.linalg.matrix_rank(band)
    assert logits.eckart_young_residual(band, 5) == pytest.approx((sigma[5:] ** 2).sum(), rel=1e-12)
    p = sigma / sigma.sum()
    assert logits.entropy_effective_rank(band) == pytest.approx(np.exp(-(p * np.log(p)).sum()), rel=1e-12)
    assert logits.head_layout(3, 1, 6, 2).shape == (3, 6, 6)


def test_scaled_logits_and_attention_backward(rng):
    q, k = rng.standard_normal((5, 4)), rng.standard_normal((6, 4))
    np.testing.assert_allclose(logits.scaled_logits(q, k, 0.5), 0.5 * q @ k.T, rtol=1e-14)
    a = attnscope.softmax(rng.standard_normal((5, 6)))
    da = rng.standard_normal((5, 6))
    np.testing.assert_allclose(logits.attention_backward(a, da), attnscope.vector_jacobian_product(np.log(a), "softmax", da),
                               atol=1e-14)


def test_fit_reduces_the_loss():
    options = logits.FitOptions()
    options.steps = 60
    options.head_dim = 4
    fit = logits.fit_qk(logits.causal_band_target(24, 3), options=options)
    loss = fit.log["loss"]
    assert loss.shape == (61,) and loss[-1] < loss[0] and not fit.diverged
    assert fit.queries.shape == (1, 24, 4) and fit.model_attention.shape == (24, 24)


def test_rounding_matches_numpy_bit_patterns(rng):
    x = (rng.standard_normal((8, 8)) * 1000).astype(np.float32)
    np.testing.assert_array_equal(logits.round_to_fp16(x), x.astype(np.float16).astype(np.float32))
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)  # RNE to bf16
    np.testing.assert_array_equal(logits.round_to_bf16(x), rounded)
    assert logits.fp16_overflow_count(np.array([[7e4, 1.0, -7e4]], np.float32)) == 2
