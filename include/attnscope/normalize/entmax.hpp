// attnscope/normalize/entmax.hpp — α-entmax (Peters, Niculae & Martins, ACL 2019): p_i = [(α−1)z_i − τ]₊^{1/(α−1)}
// with τ such that Σp = 1 (docs/theory/normalization-maps.md §1.2). Exact 1.5-entmax by sorting the candidates, general α by
// bisection on τ to machine precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/row_helpers.hpp"

namespace attnscope {
namespace detail {

/// Exact 1.5-entmax of one row (deep-spin `_entmax_threshold_and_support`, docs/theory/normalization-maps.md §1.2):
/// X = (z − max)/2; only X_i > −1 can be in the support (τ ≥ X_max − 1 since p_max ≤ 1) [derived]; sort those
/// descending; τ_k = mean_k − √max((1 − ss_k)/k, 0) with ss_k = Σ_{i≤k}(X_(i) − mean_k)² (accumulated by
/// Welford's update instead of k(mean_sq − mean²), [derived]); support = #{k : τ_k ≤ X_(k)}; p = [X − τ]₊².
template <class Scalar>
void entmax15_row(const Scalar* logits, Index n, Scalar* out) {
  Scalar max_value = logits[0];
  for (Index j = 1; j < n; ++j) max_value = logits[j] > max_value ? logits[j] : max_value;
  std::vector<Scalar> candidates(static_cast<std::size_t>(n));
  Index candidate_count = 0;
  for (Index j = 0; j < n; ++j) {
    const Scalar half = (logits[j] - max_value) / 2;
    candidates[static_cast<std::size_t>(candidate_count)] = half;
    candidate_count += half > Scalar(-1);
  }
  candidates.resize(static_cast<std::size_t>(candidate_count));
  std::sort(candidates.begin(), candidates.end(), std::greater<Scalar>());
  Scalar mean = 0, squared_deviations = 0, threshold = 0;
  Index support = 0;
  std::vector<Scalar> thresholds(candidates.size());
  for (Index k = 1; k <= candidate_count; ++k) {
    const Scalar value = candidates[static_cast<std::size_t>(k - 1)];
    const Scalar previous_mean = mean;
    mean += (value - previous_mean) / Scalar(k);
    squared_deviations += (value - previous_mean) * (value - mean);
    const Scalar delta = (1 - squared_deviations) / Scalar(k);
    const Scalar tau = mean - std::sqrt(std::max(delta, Scalar(0)));
    thresholds[static_cast<std::size_t>(k - 1)] = tau;
    support += tau <= value;
  }
  threshold = thresholds[static_cast<std::size_t>(support - 1)];
  for (Index j = 0; j < n; ++j) {
    const Scalar difference = std::max((logits[j] - max_value) / 2 - threshold, Scalar(0));
    out[j] = difference * difference;
  }
}

/// [x]₊^{1/(α−1)} with fast paths for α = 1.5 (square) and α = 2 (identity).
template <class Scalar>
Scalar entmax_power(Scalar x, Scalar exponent) {
  if (x <= 0) return 0;
  if (exponent == Scalar(2)) return x * x;
  if (exponent == Scalar(1)) return x;
  return std::pow(x, exponent);
}

/// α-entmax of one row by bisection on τ (deep-spin EntmaxBisectFunction, docs/theory/normalization-maps.md §1.3): with
/// X = (α−1)(z − max), the bracket is τ ∈ [−1, −(1/n)^{α−1}]; halve it until the midpoint equals an end
/// (machine precision; at most 256 steps), take τ = lower end (Σp ≥ 1) and renormalize p by Σp
/// (deep-spin's ensure_sum_one). Only X_i > −1 can be in the support [derived].
template <class Scalar>
void entmax_bisect_row(const Scalar* logits, Index n, Scalar alpha, Scalar* out) {
  const Scalar alpha_minus_one = alpha - 1, exponent = 1 / (alpha - 1);
  Scalar max_value = logits[0];
  for (Index j = 1; j < n; ++j) max_value = logits[j] > max_value ? logits[j] : max_value;
  std::vector<Scalar> candidates(static_cast<std::size_t>(n));
  Index candidate_count = 0;
  for (Index j = 0; j < n; ++j) {
    const Scalar scaled = alpha_minus_one * (logits[j] - max_value);
    candidates[static_cast<std::size_t>(candidate_count)] = scaled;
    candidate_count += scaled > Scalar(-1);
  }
  auto mass = [&](Scalar tau) {
    Scalar total = 0;
    for (Index k = 0; k < candidate_count; ++k)
      total += entmax_power(candidates[static_cast<std::size_t>(k)] - tau, exponent);
    return total;
  };
  Scalar low = -1, high = -std::pow(Scalar(1) / Scalar(n), alpha_minus_one);
  for (int step = 0; step < 256; ++step) {
    const Scalar middle = low + (high - low) / 2;
    if (!(middle > low && middle < high)) break;
    if (mass(middle) >= 1) low = middle;
    else high = middle;
  }
  Scalar total = 0;
  for (Index j = 0; j < n; ++j) {
    out[j] = entmax_power(alpha_minus_one * (logits[j] - max_value) - low, exponent);
    total += out[j];
  }
  for (Index j = 0; j < n; ++j) out[j] /= total;
}

/// α-entmax Jacobian from its output: J = diag(g) − g gᵀ/Σg, g_i = p_i^{2−α} on the support, 0 off it
/// (Peters et al. 2019; deep-spin root_finding.py backward).
template <class Scalar>
DiagonalPlusLowRank<Scalar> entmax_jacobian_from_output(const std::vector<Scalar>& output, Scalar alpha) {
  std::vector<Scalar> weights(output.size());
  Scalar weight_sum = 0;
  for (std::size_t i = 0; i < output.size(); ++i) {
    weights[i] = output[i] > 0 ? std::pow(output[i], 2 - alpha) : Scalar(0);
    weight_sum += weights[i];
  }
  return scaled_diagonal_minus_rank_one(weights, Scalar(1) / weight_sum, Scalar(1));
}

/// Linearization of exact 1.5-entmax (g = √p).
template <class Scalar>
RowLinearization<Scalar> linearize_entmax15(const Scalar* logits, Index n) {
  return linearize_with<Scalar>(
      n, [&](Scalar* out) { entmax15_row(logits, n, out); },
      [](const std::vector<Scalar>& p) { return entmax_jacobian_from_output(p, Scalar(1.5)); });
}

/// Linearization of α-entmax by bisection.
template <class Scalar>
RowLinearization<Scalar> linearize_entmax_bisect(const Scalar* logits, Index n, Scalar alpha) {
  return linearize_with<Scalar>(
      n, [&](Scalar* out) { entmax_bisect_row(logits, n, alpha, out); },
      [alpha](const std::vector<Scalar>& p) { return entmax_jacobian_from_output(p, alpha); });
}

/// Throws unless α is finite and > 1.
inline void require_entmax_alpha(const char* function, double alpha) {
  if (!(alpha > 1) || !std::isfinite(alpha))
    throw_invalid_argument(function, "alpha must be finite and > 1, got ", alpha);
}

}  // namespace detail

/// Exact 1.5-entmax of each row over its visible keys (Peters et al., ACL 2019; deep-spin sort algorithm):
/// p_i = [z_i/2 − τ]₊², Σp = 1, sparse. O(m log m) per row where m = #{i : z_i > max − 2} ≤ n.
/// Throws attnscope::invalid_argument on empty/non-finite input, mask mismatch or fully masked rows.
template <class Derived>
RowMatrix<typename Derived::Scalar> entmax15(const Eigen::MatrixBase<Derived>& logits,
                                             const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  return detail::map_rows("entmax15", logits, visibility,
                          [](const Scalar* z, Index n, Scalar* p) { detail::entmax15_row(z, n, p); });
}

/// α-entmax of each row (α > 1) by bisection on the threshold to machine precision (deep-spin bracket
/// [−1, −(1/n)^{α−1}] on (α−1)(z − max)), rows renormalized to sum 1. O(n · steps), steps ≤ 256 (≈ 25-60 in
/// practice). α = 2 is sparsemax, α → 1 tends to softmax. Throws attnscope::invalid_argument when α ≤ 1 or
/// not finite, and on bad logits as the other maps.
template <class Derived>
RowMatrix<typename Derived::Scalar> entmax_bisect(const Eigen::MatrixBase<Derived>& logits,
                                                  typename Derived::Scalar alpha,
                                                  const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  detail::require_entmax_alpha("entmax_bisect", static_cast<double>(alpha));
  return detail::map_rows("entmax_bisect", logits, visibility,
                          [alpha](const Scalar* z, Index n, Scalar* p) { detail::entmax_bisect_row(z, n, alpha, p); });
}

}  // namespace attnscope
