// attnscope/normalize/entropy.hpp — Shannon entropy of attention rows over their visible keys, the one
// implementation of −Σ p log p used by the paper modules (entropy collapse monitors, sink/content entropy split)
// and the per-head report.
#pragma once

#include <cmath>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope {
namespace detail {

/// −p ln p with 0 ln 0 = 0 (the limit), for p ≥ 0.
template <class Accumulator, class Scalar>
Accumulator entropy_term(Scalar p) {
  const auto value = static_cast<Accumulator>(p);
  return value > 0 ? -value * std::log(value) : Accumulator(0);
}

/// H(p) = −Σ_k p_k ln p_k of n contiguous entries (Shannon 1948, nats; 0 ln 0 = 0), accumulated in at least double.
/// No checks: entries must be finite and ≥ 0. O(n).
template <class Scalar>
Scalar entropy_of(const Scalar* p, Index n) {
  using Accumulator = decltype(Scalar() + double());
  Accumulator h = 0;
  for (Index k = 0; k < n; ++k) h += entropy_term<Accumulator>(p[k]);
  return static_cast<Scalar>(h);
}

}  // namespace detail

/// Shannon entropy (nats) of every row over its visible keys: H_i = −Σ_{j visible} A_ij ln A_ij with 0 ln 0 = 0
/// (Shannon 1948; the attention entropy of Zhai et al. 2023, "entropy collapse"). Rows are taken as given (not
/// closed: a row summing to t ≠ 1 is not divided by t). Masked entries are ignored and may hold anything.
/// Row-major input is read in place. O(rows·cols), rows in parallel with OpenMP.
/// Throws attnscope::invalid_argument for empty input, a mask of another shape, a row with every key masked, and a
/// visible entry that is NaN, ±inf or negative (naming the row, column and value).
template <class Derived>
Vector<typename Derived::Scalar> row_entropy(const Eigen::MatrixBase<Derived>& attention,
                                             const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::row_entropy: attention must be float or double");
  const char* function = "row_entropy";
  const RowMatrixView<Scalar> a(attention.derived());
  detail::require_nonempty(function, a);
  visibility.validate(function, a.rows(), a.cols());
  const Index cols = a.cols();
  Vector<Scalar> entropy(a.rows());
  detail::for_each_row_rethrowing(a.rows(), cols, [&](Index i) {
    const Scalar* row = a.data() + i * a.outerStride();
    for (Index j = 0; j < cols; ++j) {
      if (!visibility.visible(i, j, cols)) continue;
      if (!std::isfinite(static_cast<double>(row[j])))
        detail::throw_invalid_argument(function, "non-finite attention weight ", row[j], " at row ", i, ", column ", j);
      if (row[j] < 0)
        detail::throw_invalid_argument(function, "negative attention weight ", row[j], " at row ", i, ", column ", j);
    }
    if (visibility.is_prefix()) {
      entropy(i) = detail::entropy_of(row, visibility.prefix_length(i, cols));
      return;
    }
    using Accumulator = decltype(Scalar() + double());
    Accumulator h = 0;
    for (Index j = 0; j < cols; ++j)
      if (visibility.visible(i, j, cols)) h += detail::entropy_term<Accumulator>(row[j]);
    entropy(i) = static_cast<Scalar>(h);
  });
  return entropy;
}

}  // namespace attnscope
