// attnscope/capacity/gradient.hpp — gradient sensitivity of the normalizer (arXiv:2508.17821 Lemma 2, Alg. 5,
// Fig. 4; arXiv:2508.17821): Lemma 2's general Jacobian bound ([derived] form) and the finite-difference estimator
// g(T, ε) = max over heads of the mean over query rows of ‖softmax((l + εv)/T) − softmax(l/T)‖₂/ε, v a random unit vector.
// The exact ‖J‖₂ beside it comes from normalize/spectral_norm.hpp (docs/theory/normalization-maps.md §5), as do Corollary 3's
// min{1/(4T), √2} (corollary3_bound) and the true supremum 1/(2T) (softmax_jacobian_norm_supremum).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/capacity/selection.hpp"
#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"

namespace attnscope::capacity {

/// Lemma 2 bounds on ‖∇_l α‖₂ for α_i = F(l_i)/S, S = Σ_j F(l_j) ([derived]; the paper's displays are not published).
struct Lemma2Bound {
  double tight = 0;  // (max_k |F'_k| + ‖F'‖₂) / S
  double loose = 0;  // (max_k |F'_k| + ‖F'‖₂) / (L · min_j F_j)
};

/// Lemma 2 [derived]: ∇_l α = (1/S)(diag(F') − α F'ᵀ), so ‖∇_l α‖₂ <= (max|F'| + ‖F'‖₂)/S <= (max|F'| + ‖F'‖₂)/(L min F).
/// Inputs: F(l_j) (> 0) and F'(l_j) for one row. O(L). Throws on empty/non-finite input, size mismatch, F <= 0.
template <class DerivedValues, class DerivedDerivatives>
Lemma2Bound lemma2_jacobian_bound(const Eigen::MatrixBase<DerivedValues>& map_values,
                                  const Eigen::MatrixBase<DerivedDerivatives>& map_derivatives) {
  const char* function = "lemma2_jacobian_bound";
  attnscope::detail::require_nonempty(function, map_values);
  attnscope::detail::require_finite(function, map_values);
  attnscope::detail::require_finite(function, map_derivatives);
  if (map_values.size() != map_derivatives.size())
    attnscope::detail::throw_invalid_argument(function, "F has ", map_values.size(), " values but F' has ",
                                   map_derivatives.size());
  // one row converted to double: S = ΣF accumulates over L and min F may be tiny next to it
  using Array = Eigen::Array<typename detail::dependent_double<DerivedValues>::type, Eigen::Dynamic, 1>;  // ArrayXd
  const Array values = map_values.template cast<double>().reshaped().array();
  const Array derivatives = map_derivatives.template cast<double>().reshaped().array();
  if (!(values.minCoeff() > 0))
    attnscope::detail::throw_invalid_argument(function, "F must be positive (Eq. 3), got min F = ", values.minCoeff());
  const double numerator = derivatives.abs().maxCoeff() + derivatives.matrix().norm();
  return {numerator / values.sum(), numerator / (static_cast<double>(values.size()) * values.minCoeff())};
}

namespace detail {

/// ‖softmax((l + εv)/T) − softmax(l/T)‖₂ / ε for one contiguous row (no validation); `scratch` holds 3n values.
/// Used with Scalar = double: the difference of two softmax rows at ε ~ 1e-3 cancels about half the digits.
template <class Scalar>
Scalar finite_difference_ratio(const Scalar* logits, const Scalar* direction, Index n, Scalar temperature, Scalar step,
                               std::vector<Scalar>& scratch) {
  scratch.resize(static_cast<std::size_t>(3 * n));
  Scalar* shifted = scratch.data();
  Scalar* base = shifted + n;
  Scalar* moved = base + n;
  for (Index j = 0; j < n; ++j) shifted[j] = logits[j] + step * direction[j];  // l' = l + εv (Alg. 5)
  attnscope::detail::softmax_row_reference(logits, n, 1 / temperature, base);
  attnscope::detail::softmax_row_reference(shifted, n, 1 / temperature, moved);
  Scalar squares = 0;
  for (Index j = 0; j < n; ++j) squares += (moved[j] - base[j]) * (moved[j] - base[j]);
  return std::sqrt(squares) / step;
}

inline void require_temperature_and_step(const char* function, double temperature, double step) {
  attnscope::detail::require_positive(function, "temperature T", temperature);
  attnscope::detail::require_positive(function, "step epsilon", step);
}

}  // namespace detail

/// Finite-difference Jacobian norm along one direction (Alg. 5): ‖softmax((l + εv)/T) − softmax(l/T)‖₂/ε with v
/// normalized to unit length; → ‖J v‖₂ as ε → 0, J = (1/T)(diag α − ααᵀ). O(L). Throws on empty/non-finite input,
/// size mismatch, zero direction, T or ε not finite and > 0.
template <class DerivedLogits, class DerivedDirection>
double finite_difference_jacobian_norm(const Eigen::MatrixBase<DerivedLogits>& logits,
                                       const Eigen::MatrixBase<DerivedDirection>& direction, double temperature,
                                       double step) {
  const char* function = "finite_difference_jacobian_norm";
  attnscope::detail::require_nonempty(function, logits);
  attnscope::detail::require_finite(function, logits);
  attnscope::detail::require_finite(function, direction);
  detail::require_temperature_and_step(function, temperature, step);
  if (logits.size() != direction.size())
    attnscope::detail::throw_invalid_argument(function, "logits have ", logits.size(),
                                              " entries but the direction has ", direction.size());
  // one row in double: the finite difference cancels about half the digits (see finite_difference_ratio)
  using Column = Vector<typename detail::dependent_double<DerivedLogits>::type>;  // VectorXd
  const Column row = logits.template cast<double>().reshaped();
  Column unit = direction.template cast<double>().reshaped();
  const double norm = unit.norm();
  if (!(norm > 0)) attnscope::detail::throw_invalid_argument(function, "the direction is zero");
  unit /= norm;
  std::vector<double> scratch;
  return detail::finite_difference_ratio(row.data(), unit.data(), row.size(), temperature, step, scratch);
}

/// One head's Alg. 5 value: mean over query rows of the finite-difference ratio, each row with a fresh random unit
/// direction on its visible keys (Gaussian vector normalized; attnscope::Random(seed), rows in order). Logits: the
/// head's L_q × L_k pre-softmax scores. O(L_q · L_k). Throws on empty input, non-finite visible logits, mask
/// mismatch, a fully masked row, T or ε not finite and > 0.
template <class Derived>
double finite_difference_jacobian_norm_mean(const Eigen::MatrixBase<Derived>& logits, double temperature, double step,
                                            std::uint64_t seed, const Visibility& visibility = {}) {
  const char* function = "finite_difference_jacobian_norm_mean";
  detail::require_temperature_and_step(function, temperature, step);
  using Scalar = typename Derived::Scalar;
  const RowMatrixView<Scalar> scores(logits.derived());  // read in place; each row is converted to double below
  attnscope::detail::validate_logit_rows(function, scores.data(), scores.rows(), scores.cols(), scores.outerStride(),
                                         visibility);
  Random random(seed);
  std::vector<double> row, direction, scratch;  // double: the finite difference cancels (finite_difference_ratio)
  double total = 0;
  for (Index i = 0; i < scores.rows(); ++i) {
    row.clear();
    for (Index j = 0; j < scores.cols(); ++j)
      if (visibility.visible(i, j, scores.cols())) row.push_back(static_cast<double>(scores(i, j)));
    direction.resize(row.size());
    double squares = 0;
    for (double& value : direction) {
      value = random.normal();
      squares += value * value;
    }
    const double norm = std::sqrt(squares);
    for (double& value : direction) value /= norm;
    total += detail::finite_difference_ratio(row.data(), direction.data(), static_cast<Index>(row.size()),
                                             temperature, step, scratch);
  }
  return total / static_cast<double>(scores.rows());
}

/// g(T, ε) of Alg. 5 over several heads.
struct GradientSensitivity {
  double value = 0;             // g(T, ε) = max over heads of the per-head mean
  Index head = 0;               // the head attaining the maximum
  std::vector<double> per_head;  // each head's mean over its query rows
};

/// g(T, ε) = max_{heads} mean_{rows} ‖softmax((l + εv)/T) − softmax(l/T)‖₂/ε (Alg. 5, [derived] formula); head h
/// uses attnscope::Random(seed + h). O(heads · L_q · L_k). Throws on no heads and as
/// finite_difference_jacobian_norm_mean (naming the head).
template <class Matrix>
GradientSensitivity gradient_sensitivity(const std::vector<Matrix>& head_logits, double temperature, double step,
                                         std::uint64_t seed, const Visibility& visibility = {}) {
  if (head_logits.empty()) attnscope::detail::throw_invalid_argument("gradient_sensitivity", "no heads given");
  GradientSensitivity result;
  for (std::size_t h = 0; h < head_logits.size(); ++h) {
    double mean = 0;
    try {
      mean = finite_difference_jacobian_norm_mean(head_logits[h], temperature, step, seed + h, visibility);
    } catch (const invalid_argument& error) {
      attnscope::detail::throw_invalid_argument("gradient_sensitivity", "head ", h, ": ", error.what());
    }
    result.per_head.push_back(mean);
    if (h == 0 || mean > result.value) {
      result.value = mean;
      result.head = static_cast<Index>(h);
    }
  }
  return result;
}

/// Exact softmax Jacobian norms of several heads, aggregated like g(T, ε).
struct ExactJacobianNorm {
  double max_of_head_means = 0;   // max over heads of the mean over rows of ‖J‖₂ (same aggregation as g)
  double max_over_rows = 0;       // max over heads and rows of ‖J‖₂ (<= 1/(2T))
  std::vector<double> per_head_mean;
};

namespace detail {

/// Exact ‖J‖₂ of every query row of one head, in the logits' own scalar when it is float or double (the secular method
/// is exact to a few ulps of that scalar, docs/theory/normalization-maps.md §5), otherwise in double; returned in double.
template <class Derived>
Vector<double> exact_jacobian_norms_of_head(const Eigen::MatrixBase<Derived>& logits, double temperature,
                                            const Visibility& visibility) {
  using Input = typename Derived::Scalar;
  using Scalar = std::conditional_t<std::is_floating_point<Input>::value, Input, double>;
  const Scalar t = static_cast<Scalar>(temperature);
  const auto& scores = logits.template cast<Scalar>();  // no copy for float or double input
  return softmax_jacobian_spectral_norm(softmax(scores, t, visibility), Scalar(1) / t, visibility)
      .template cast<double>();
}

}  // namespace detail

/// Exact ‖J‖₂ = ‖(1/T)(diag α − ααᵀ)‖₂ of every query row, α = softmax(l/T) over the visible keys, by
/// softmax_jacobian_spectral_norm (O(n) secular equation, docs/theory/normalization-maps.md §5) in the logits' scalar (float logits
/// are analysed in float, to its precision); aggregated over rows and heads in double.
/// O(heads · L_q · L_k). Throws on no heads, T not finite and > 0, and as softmax (naming the head).
template <class Matrix>
ExactJacobianNorm exact_jacobian_norm(const std::vector<Matrix>& head_logits, double temperature,
                                      const Visibility& visibility = {}) {
  if (head_logits.empty()) attnscope::detail::throw_invalid_argument("exact_jacobian_norm", "no heads given");
  attnscope::detail::require_positive("exact_jacobian_norm", "temperature T", temperature);
  ExactJacobianNorm result;
  for (std::size_t h = 0; h < head_logits.size(); ++h) {
    Vector<double> norms;
    try {
      norms = detail::exact_jacobian_norms_of_head(head_logits[h], temperature, visibility);
    } catch (const invalid_argument& error) {
      attnscope::detail::throw_invalid_argument("exact_jacobian_norm", "head ", h, ": ", error.what());
    }
    result.per_head_mean.push_back(norms.mean());
    result.max_of_head_means = std::max(result.max_of_head_means, norms.mean());
    result.max_over_rows = std::max(result.max_over_rows, norms.maxCoeff());
  }
  return result;
}

/// Two-logit closed form of the softmax Jacobian norm from the top-2 gap g = l_(1) − l_(2) ≥ 0 ([derived]): for two
/// logits, α = (σ(g/T), σ(−g/T)) and J = (1/T)(diag α − ααᵀ) has eigenvalues {0, 2α₁α₂/T}, so
/// ‖J‖₂ = 2σ(g/T)σ(−g/T)/T = 1/(2T·cosh²(g/(2T))). Its supremum, 1/(2T) at g = 0 (two tied logits), is the supremum of
/// ‖J‖₂ over all logit vectors; Corollary 3's 1/(4T) is the largest diagonal entry, not a bound on ‖J‖₂. For a row
/// with more keys it approximates ‖J‖₂ by the top two logits only (exact when the others carry no weight).
/// g = +∞ (a row with one visible key) gives 0. O(1). Throws on g NaN or < 0, T not finite and > 0.
inline double two_logit_jacobian_norm(double gap, double temperature) {
  if (!(gap >= 0))
    attnscope::detail::throw_invalid_argument("two_logit_jacobian_norm", "top-2 gap must be >= 0, got ", gap);
  attnscope::detail::require_positive("two_logit_jacobian_norm", "temperature T", temperature);
  const double decay = std::exp(-gap / temperature);  // e^{−2x} with x = g/(2T): 1/cosh²(x) = 4e^{−2x}/(1 + e^{−2x})²
  return 2 * decay / ((1 + decay) * (1 + decay) * temperature);
}

/// Top-2 gap l_(1) − l_(2) of every query row over its visible keys (+∞ for a row with a single visible key), the
/// quantity that decides whether a row is near-tied at temperature T (gap < T) and so near the 1/(2T) supremum.
/// O(L_q · L_k). Throws on empty input, non-finite visible logits, mask mismatch, a fully masked row.
template <class Derived>
std::vector<double> top_two_gaps(const Eigen::MatrixBase<Derived>& logits, const Visibility& visibility = {}) {
  const char* function = "top_two_gaps";
  using Scalar = typename Derived::Scalar;
  const RowMatrixView<Scalar> scores(logits.derived());  // read in place
  attnscope::detail::validate_logit_rows(function, scores.data(), scores.rows(), scores.cols(), scores.outerStride(),
                                         visibility);
  std::vector<double> gaps;
  gaps.reserve(static_cast<std::size_t>(scores.rows()));
  for (Index i = 0; i < scores.rows(); ++i) {
    double first = -std::numeric_limits<double>::infinity(), second = first;
    for (Index j = 0; j < scores.cols(); ++j) {
      if (!visibility.visible(i, j, scores.cols())) continue;
      const double value = static_cast<double>(scores(i, j));
      if (value > first) {
        second = first;
        first = value;
      } else if (value > second) {
        second = value;
      }
    }
    gaps.push_back(std::isinf(second) ? std::numeric_limits<double>::infinity() : first - second);
  }
  return gaps;
}

}  // namespace attnscope::capacity
