// attnscope/capacity/vanishing.hpp — vanishing attention: weights of order 1/L for bounded logits
// (arXiv:2508.17821 Lemma 1 and Corollary 1) and the empirical weight summary of a matrix.
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::capacity {

/// Lower and upper constants of Lemma 1: C1/L <= α_i <= C2/L.
struct WeightConstants {
  double lower = 0;  // C1
  double upper = 0;  // C2
};

/// Lemma 1 [derived constants]: for α_i = F(l_i)/Σ_j F(l_j) with 0 < min F <= F <= max F on the logit range,
/// C1 = min F / max F and C2 = max F / min F. O(1). Throws unless 0 < minimum <= maximum, both finite.
inline WeightConstants lemma1_constants(double minimum_of_map, double maximum_of_map) {
  if (!(minimum_of_map > 0) || !std::isfinite(maximum_of_map) || !(maximum_of_map >= minimum_of_map))
    attnscope::detail::throw_invalid_argument("lemma1_constants",
                                              "need 0 < min F <= max F < inf, got min F = ", minimum_of_map,
                                              ", max F = ", maximum_of_map);
  return {minimum_of_map / maximum_of_map, maximum_of_map / minimum_of_map};
}

/// Bounds on one softmax weight for a row of L keys.
struct WeightBounds {
  double lower = 0;
  double upper = 0;
};

/// Corollary 1 (softmax, [secondary] form): (1/L)·e^{−2Δ/T} <= α_i <= (1/L)·e^{2Δ/T}, Δ = ‖q‖₂·max‖k‖₂.
/// O(1). Throws on negative/non-finite norms, T <= 0 or L < 1.
inline WeightBounds softmax_weight_bounds(double norm_query, double norm_key, double temperature, Index length) {
  if (!std::isfinite(norm_query) || norm_query < 0)
    attnscope::detail::throw_invalid_argument("softmax_weight_bounds", "query norm must be finite and >= 0, got ",
                                              norm_query);
  if (!std::isfinite(norm_key) || norm_key < 0)
    attnscope::detail::throw_invalid_argument("softmax_weight_bounds", "key norm must be finite and >= 0, got ",
                                              norm_key);
  attnscope::detail::require_positive("softmax_weight_bounds", "temperature", temperature);
  if (length < 1) attnscope::detail::throw_invalid_argument("softmax_weight_bounds", "L must be >= 1, got ", length);
  const double spread = norm_query * norm_key;  // Δ = ‖q‖‖k‖ bounds |q^T k_i| (Cauchy–Schwarz)
  const double factor = std::exp(2 * spread / temperature);
  return {1.0 / (static_cast<double>(length) * factor), factor / static_cast<double>(length)};
}

/// Empirical size of attention weights over the visible keys of every row.
struct WeightSummary {
  double max_weight = 0;       // largest weight anywhere
  double mean_row_max = 0;     // mean over rows of the row's largest weight
  double mean_weight = 0;      // mean visible weight (= mean of 1/n_row for normalized rows)
  double mean_row_max_times_length = 0;  // mean over rows of n_row · max weight (Θ(1) under Lemma 1)
};

/// Summary of the weights' size against the number of visible keys (Lemma 1: max weight → 0 like 1/L).
/// O(rows·cols). Throws on empty, non-finite, negative weights, mask shape mismatch or a row with no visible key.
template <class Derived>
WeightSummary weight_summary(const Eigen::MatrixBase<Derived>& weights, const Visibility& visibility = {}) {
  attnscope::detail::require_nonempty("weight_summary", weights);
  visibility.validate("weight_summary", weights.rows(), weights.cols());
  WeightSummary summary;
  Index visible_total = 0;
  double weight_total = 0;
  for (Index i = 0; i < weights.rows(); ++i) {
    double row_max = 0;
    const Index n = visibility.visible_count(i, weights.cols());
    for (Index j = 0; j < weights.cols(); ++j) {
      if (!visibility.visible(i, j, weights.cols())) continue;
      const double value = static_cast<double>(weights(i, j));
      if (!std::isfinite(value) || value < 0)
        attnscope::detail::throw_invalid_argument("weight_summary", "weight ", value, " at row ", i, ", column ", j,
                                       " is not finite and >= 0");
      row_max = value > row_max ? value : row_max;
      weight_total += value;
    }
    visible_total += n;
    summary.max_weight = row_max > summary.max_weight ? row_max : summary.max_weight;
    summary.mean_row_max += row_max;
    summary.mean_row_max_times_length += row_max * static_cast<double>(n);
  }
  const double rows = static_cast<double>(weights.rows());
  summary.mean_row_max /= rows;
  summary.mean_row_max_times_length /= rows;
  summary.mean_weight = weight_total / static_cast<double>(visible_total);
  return summary;
}

}  // namespace attnscope::capacity
