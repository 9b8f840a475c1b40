// attnscope/normalize/sa_softmax.hpp — Self-Adjust Softmax (Zheng et al., arXiv:2502.18277), docs/theory/normalization-maps.md §3:
// basic SA(z) = z ⊙ softmax(z); normalized SA_n(z) = [(z − a)/(b − a)] ⊙ softmax(z), a = min(z_min, 0),
// b = max(0, z_max). Neither variant returns a distribution: basic rows can be negative and need not sum to 1;
// normalized rows are non-negative with sum ≤ 1.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/row_helpers.hpp"

namespace attnscope {

/// Which Self-Adjust Softmax: `basic` z ⊙ softmax(z), or `normalized` with the factor (z − a)/(b − a) ∈ [0, 1].
enum class SelfAdjustVariant { basic, normalized };

namespace detail {

/// Range of the normalized variant: a = min(z_min, 0), b = max(0, z_max), and the first argmin/argmax.
template <class Scalar>
struct SelfAdjustRange {
  Scalar low, high;
  Index argmin, argmax;
};

template <class Scalar>
SelfAdjustRange<Scalar> self_adjust_range(const Scalar* logits, Index n) {
  const Index argmin = std::min_element(logits, logits + n) - logits;
  const Index argmax = std::max_element(logits, logits + n) - logits;
  return {std::min(logits[argmin], Scalar(0)), std::max(Scalar(0), logits[argmax]), argmin, argmax};
}

/// One row of SA-Softmax (Zheng et al. 2025, basic and normalized definitions). The normalized variant needs
/// b > a, i.e. a row that is not all zeros (checked by the callers).
template <class Scalar>
void sa_softmax_row(const Scalar* logits, Index n, SelfAdjustVariant variant, Scalar* out) {
  scaled_softmax_row(logits, n, Scalar(1), out);
  if (variant == SelfAdjustVariant::basic) {
    for (Index j = 0; j < n; ++j) out[j] *= logits[j];
    return;
  }
  const SelfAdjustRange<Scalar> range = self_adjust_range(logits, n);
  const Scalar inverse_width = Scalar(1) / (range.high - range.low);
  for (Index j = 0; j < n; ++j) out[j] *= (logits[j] - range.low) * inverse_width;
}

/// Linearization of SA-Softmax [derived, docs/theory/normalization-maps.md §3], p = softmax(z), J_sm = diag p − ppᵀ:
/// basic J = diag(p + z⊙p) − (z⊙p)pᵀ; normalized, g = (z − a)/(b − a):
/// J = diag(p/(b−a) + g⊙p) − (g⊙p)pᵀ + [z_min<0]·p⊙(z−b)/(b−a)²·e_argminᵀ − [z_max>0]·p⊙(z−a)/(b−a)²·e_argmaxᵀ
/// (almost everywhere: at ties of the min or max the first index is used). Non-symmetric.
template <class Scalar>
RowLinearization<Scalar> linearize_sa_softmax(const Scalar* logits, Index n, SelfAdjustVariant variant) {
  const auto size = static_cast<std::size_t>(n);
  std::vector<Scalar> probabilities(size);
  scaled_softmax_row(logits, n, Scalar(1), probabilities.data());
  RowLinearization<Scalar> result;
  result.output.resize(size);
  result.jacobian.diagonal.resize(size);
  typename DiagonalPlusLowRank<Scalar>::Term coupling{std::vector<Scalar>(size), probabilities};
  if (variant == SelfAdjustVariant::basic) {
    for (std::size_t i = 0; i < size; ++i) {
      result.output[i] = logits[i] * probabilities[i];
      result.jacobian.diagonal[i] = probabilities[i] + result.output[i];
      coupling.left[i] = result.output[i];
    }
    result.jacobian.terms.push_back(std::move(coupling));
    return result;
  }
  const SelfAdjustRange<Scalar> range = self_adjust_range(logits, n);
  const Scalar width = range.high - range.low;
  for (std::size_t i = 0; i < size; ++i) {
    result.output[i] = (logits[i] - range.low) / width * probabilities[i];
    result.jacobian.diagonal[i] = probabilities[i] / width + result.output[i];
    coupling.left[i] = result.output[i];
  }
  result.jacobian.terms.push_back(std::move(coupling));
  const Scalar inverse_square = Scalar(1) / (width * width);
  if (logits[range.argmin] < 0) {  // a = z_min moves with z_argmin
    typename DiagonalPlusLowRank<Scalar>::Term term{std::vector<Scalar>(size), std::vector<Scalar>(size, Scalar(0))};
    for (std::size_t i = 0; i < size; ++i) term.left[i] = -probabilities[i] * (logits[i] - range.high) * inverse_square;
    term.right[static_cast<std::size_t>(range.argmin)] = 1;
    result.jacobian.terms.push_back(std::move(term));
  }
  if (logits[range.argmax] > 0) {  // b = z_max moves with z_argmax
    typename DiagonalPlusLowRank<Scalar>::Term term{std::vector<Scalar>(size), std::vector<Scalar>(size, Scalar(0))};
    for (std::size_t i = 0; i < size; ++i) term.left[i] = probabilities[i] * (logits[i] - range.low) * inverse_square;
    term.right[static_cast<std::size_t>(range.argmax)] = 1;
    result.jacobian.terms.push_back(std::move(term));
  }
  return result;
}

/// The normalized variant is 0/0 on a row whose visible logits are all exactly 0: throw, naming the row.
template <class Scalar>
void require_sa_softmax_defined(const char* function, const RowMatrixView<Scalar>& logits, const Visibility& visibility,
                                SelfAdjustVariant variant) {
  if (variant != SelfAdjustVariant::normalized) return;
  for (Index i = 0; i < logits.rows(); ++i) {
    bool all_zero = true;
    for (Index j = 0; j < logits.cols() && all_zero; ++j)
      all_zero = !visibility.visible(i, j, logits.cols()) || logits(i, j) == 0;
    if (all_zero)
      throw_invalid_argument(function, "normalized SA-Softmax is undefined (0/0) on row ", i,
                             ": every visible logit is 0");
  }
}

}  // namespace detail

/// Self-Adjust Softmax of each row over its visible keys (Zheng et al. 2025). The rows are NOT probability
/// distributions: `basic` (z ⊙ softmax(z)) can be negative and does not sum to 1; `normalized` is in [0, 1] with
/// row sums ≤ 1. Not shift-invariant. O(n) per row. Throws attnscope::invalid_argument on bad logits (as the other
/// maps) and, for `normalized`, on a row whose visible logits are all 0 (where the map is 0/0).
template <class Derived>
RowMatrix<typename Derived::Scalar> sa_softmax(const Eigen::MatrixBase<Derived>& logits,
                                               SelfAdjustVariant variant = SelfAdjustVariant::basic,
                                               const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::sa_softmax: logits must be float or double");
  const RowMatrixView<Scalar> z(logits.derived());
  detail::validate_logits("sa_softmax", z, visibility);
  detail::require_sa_softmax_defined("sa_softmax", z, visibility, variant);
  RowMatrix<Scalar> out;
  detail::apply_rowwise_indexed(z.data(), z.rows(), z.cols(), z.outerStride(), visibility,
                                [variant](Index, const Scalar* row, Index n, Scalar* result) {
    detail::sa_softmax_row(row, n, variant, result);
  }, out);
  return out;
}

}  // namespace attnscope
