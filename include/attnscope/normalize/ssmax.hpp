// attnscope/normalize/ssmax.hpp — Scalable-Softmax (Nakanishi, arXiv:2501.19399): SSMax(z)_i = n^{s z_i}/Σ_j n^{s z_j}
// = softmax((s·log n)·z)_i with n the number of visible keys of the row (docs/theory/normalization-maps.md §2).
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/row_helpers.hpp"

namespace attnscope {
namespace detail {

/// The logit scale of SSMax for a row of n visible keys: s·log n (Nakanishi 2025, eq. of SSMax; 0 when n = 1).
template <class Scalar>
Scalar ssmax_scale(Scalar s, Index n) {
  return s * std::log(Scalar(n));
}

/// Linearization of SSMax on one row: J = (s·log n)(diag p − ppᵀ) [derived, docs/theory/normalization-maps.md §2].
template <class Scalar>
RowLinearization<Scalar> linearize_ssmax(const Scalar* logits, Index n, Scalar s) {
  return linearize_scaled_softmax(logits, n, ssmax_scale(s, n));
}

}  // namespace detail

/// Scalable-Softmax of each row: softmax of (s·log n)·z over the n visible keys of the row (Nakanishi 2025).
/// Equals softmax with temperature T = 1/(s·log n); a row with one visible key gives weight 1. O(n) per row.
/// Throws attnscope::invalid_argument when s ≤ 0 or not finite, and on bad logits as the other maps.
template <class Derived>
RowMatrix<typename Derived::Scalar> ssmax(const Eigen::MatrixBase<Derived>& logits, typename Derived::Scalar s,
                                          const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  detail::require_positive("ssmax", "s", s);
  return detail::map_rows("ssmax", logits, visibility, [s](const Scalar* z, Index n, Scalar* p) {
    detail::scaled_softmax_row(z, n, detail::ssmax_scale(s, n), p);
  });
}

}  // namespace attnscope
