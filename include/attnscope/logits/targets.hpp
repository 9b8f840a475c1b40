// attnscope/logits/targets.hpp — dense local-dependency targets and band indicators of the logit-explosion lab
// (docs/theory/logits.md §2 reproduction formulation [derived], §4.3 F3/F4).
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/logits/masks.hpp"

namespace attnscope::logits {
namespace detail {

/// Throws unless a band width is ≥ 1.
inline void require_band_width(const char* function, Index w) {
  if (w < 1) attnscope::detail::throw_invalid_argument(function, "band width w must be >= 1, got ", w);
}

}  // namespace detail

/// ε-floored target: P^ε_ij = (1 − ε)·P_ij + ε/|visible(i)| on visible keys, 0 elsewhere (docs/theory/logits.md §2,
/// [derived]; for a causal band |visible(i)| = i + 1). Rows of P must be distributions over the visible keys.
/// ε ∈ [0, 1]. O(rows·cols).
template <class Derived>
RowMatrix<typename Derived::Scalar> floored_target(const Eigen::MatrixBase<Derived>& target, double epsilon,
                                                   const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  attnscope::detail::require_nonempty("floored_target", target);
  attnscope::detail::require_finite("floored_target", target);
  detail::require_fraction("floored_target", "epsilon", epsilon);
  visibility.validate("floored_target", target.rows(), target.cols());
  RowMatrix<Scalar> floored = RowMatrix<Scalar>::Zero(target.rows(), target.cols());
  for (Index i = 0; i < target.rows(); ++i) {
    const double floor = epsilon / static_cast<double>(visibility.visible_count(i, target.cols()));
    for (Index j = 0; j < target.cols(); ++j)
      if (visibility.visible(i, j, target.cols()))
        floored(i, j) = static_cast<Scalar>((1.0 - epsilon) * static_cast<double>(target(i, j)) + floor);
  }
  return floored;
}

/// Causal band target, window w including self: P_ij = 1/w_i for i − w < j ≤ i, w_i = min(w, i + 1); with ε > 0
/// the floored P^ε_ij = (1 − ε)·P_ij + ε/(i + 1) for j ≤ i (docs/theory/logits.md §2, [derived]). O(n²).
inline RowMatrix<double> causal_band_target(Index n, Index w, double epsilon = 0.0) {
  detail::require_sequence_length("causal_band_target", n);
  detail::require_band_width("causal_band_target", w);
  detail::require_fraction("causal_band_target", "epsilon", epsilon);
  RowMatrix<double> target = RowMatrix<double>::Zero(n, n);
  for (Index i = 0; i < n; ++i) {
    const Index width = w < i + 1 ? w : i + 1;
    for (Index j = i - width + 1; j <= i; ++j) target(i, j) = 1.0 / static_cast<double>(width);
  }
  return epsilon > 0 ? floored_target(target, epsilon, causal) : target;
}

/// Symmetric (bidirectional) band target: P_ij uniform over |i − j| ≤ k, no causal mask (docs/theory/logits.md §4.3
/// F4 with w → 2k + 1, [derived]). k ≥ 0. O(n²).
inline RowMatrix<double> bidirectional_band_target(Index n, Index k) {
  detail::require_sequence_length("bidirectional_band_target", n);
  if (k < 0)
    attnscope::detail::throw_invalid_argument("bidirectional_band_target", "half-width k must be >= 0, got ", k);
  RowMatrix<double> target = RowMatrix<double>::Zero(n, n);
  for (Index i = 0; i < n; ++i) {
    const Index first = i - k < 0 ? 0 : i - k, last = i + k > n - 1 ? n - 1 : i + k;
    for (Index j = first; j <= last; ++j) target(i, j) = 1.0 / static_cast<double>(last - first + 1);
  }
  return target;
}

/// Column-sparse ("sparse dependencies") causal band target: with the columns kept by
/// kept_key_columns(n, keep_fraction, seed) — the visible keys of column_drop_mask(n, 1 − keep_fraction, seed) —
/// row i is uniform over its w nearest kept keys j ≤ i (fewer if fewer exist) (docs/theory/logits.md §2, [derived]).
/// keep_fraction ∈ (0, 1]. O(n²).
inline RowMatrix<double> column_sparse_target(Index n, Index w, double keep_fraction, std::uint64_t seed) {
  detail::require_sequence_length("column_sparse_target", n);
  detail::require_band_width("column_sparse_target", w);
  if (!(keep_fraction > 0.0 && keep_fraction <= 1.0))
    attnscope::detail::throw_invalid_argument("column_sparse_target", "keep_fraction must lie in (0, 1], got ",
                                              keep_fraction);
  const std::vector<bool> keep = kept_key_columns(n, keep_fraction, seed);
  RowMatrix<double> target = RowMatrix<double>::Zero(n, n);
  std::vector<Index> band;
  for (Index i = 0; i < n; ++i) {
    band.clear();
    for (Index j = i; j >= 0 && static_cast<Index>(band.size()) < w; --j)
      if (keep[static_cast<std::size_t>(j)]) band.push_back(j);
    for (const Index j : band) target(i, j) = 1.0 / static_cast<double>(band.size());
  }
  return target;
}

/// Causal band indicator B_ij = 1[0 ≤ i − j < w] (causal Toeplitz, w ones per full row; docs/theory/logits.md §4.3 F4).
inline RowMatrix<double> band_indicator(Index n, Index w) {
  detail::require_sequence_length("band_indicator", n);
  detail::require_band_width("band_indicator", w);
  RowMatrix<double> band = RowMatrix<double>::Zero(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = i - w + 1 < 0 ? 0 : i - w + 1; j <= i; ++j) band(i, j) = 1.0;
  return band;
}

/// Symmetric band indicator B_ij = 1[|i − j| ≤ k] (docs/theory/logits.md §4.3 F4, symmetric case).
inline RowMatrix<double> symmetric_band_indicator(Index n, Index k) {
  detail::require_sequence_length("symmetric_band_indicator", n);
  if (k < 0)
    attnscope::detail::throw_invalid_argument("symmetric_band_indicator", "half-width k must be >= 0, got ", k);
  RowMatrix<double> band = RowMatrix<double>::Zero(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) band(i, j) = (i - j <= k && j - i <= k) ? 1.0 : 0.0;
  return band;
}

}  // namespace attnscope::logits
