// attnscope/logits/bounds.hpp — the derived closed forms of docs/theory/logits.md §4.3 (all [derived]): band energy and
// stable-rank bound (F4), Eckart–Young bound (F4), causal completion rank (F3), logit-gap bound (F2).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/logits/masks.hpp"
#include "attnscope/logits/targets.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::logits {

/// ‖B‖_F² of the causal band indicator (w ones per full row): n·w − w(w−1)/2 with w clamped to n (F4).
inline double band_frobenius_norm_squared(Index n, Index w) {
  detail::require_sequence_length("band_frobenius_norm_squared", n);
  detail::require_band_width("band_frobenius_norm_squared", w);
  const double width = static_cast<double>(std::min(w, n));
  return static_cast<double>(n) * width - width * (width - 1) / 2;
}

/// Stable-rank lower bound of the causal band indicator: srank(B) ≥ n/w − (w − 1)/(2w), from ‖B‖₂ ≤ √(‖B‖₁‖B‖_∞) = w
/// (F4; w clamped to n).
inline double band_stable_rank_lower_bound(Index n, Index w) {
  const double width = static_cast<double>(std::min(w, n));
  return band_frobenius_norm_squared(n, w) / (width * width);
}

/// ‖B‖_F² of the symmetric band indicator |i − j| ≤ k: n(2k + 1) − k(k + 1) with k clamped to n − 1 (F4 symmetric).
inline double symmetric_band_frobenius_norm_squared(Index n, Index k) {
  detail::require_sequence_length("symmetric_band_frobenius_norm_squared", n);
  if (k < 0)
    attnscope::detail::throw_invalid_argument("symmetric_band_frobenius_norm_squared",
                                              "half-width k must be >= 0, got ", k);
  const double half = static_cast<double>(std::min(k, n - 1));
  return static_cast<double>(n) * (2 * half + 1) - half * (half + 1);
}

/// Stable-rank lower bound of the symmetric band indicator: ‖B‖_F² / c², c = min(2k + 1, n) the largest row count
/// (F4 with w → 2k + 1; exact Frobenius energy, so at least as tight as substituting w = 2k + 1).
inline double symmetric_band_stable_rank_lower_bound(Index n, Index k) {
  const double energy = symmetric_band_frobenius_norm_squared(n, k);
  const double widest = static_cast<double>(std::min(2 * k + 1, n));
  return energy / (widest * widest);
}

/// Eckart–Young lower bound for the causal band: min_{rank X ≤ r} ‖B − X‖_F² ≥ max(0, n·w − w(w−1)/2 − r·w²) (F4).
inline double band_eckart_young_lower_bound(Index n, Index w, Index rank) {
  if (rank < 0)
    attnscope::detail::throw_invalid_argument("band_eckart_young_lower_bound", "rank must be >= 0, got ", rank);
  const double width = static_cast<double>(std::min(std::max<Index>(w, 1), std::max<Index>(n, 1)));
  return std::max(0.0, band_frobenius_norm_squared(n, w) - static_cast<double>(rank) * width * width);
}

/// Causal completion rank bound (F3): every completion of the masked entries of log(ε-floored causal band target)
/// plus row constants has rank ≥ w·⌊n/(2w)⌋ − 1 (returned clamped at 0). An exact rank-d fit needs d ≥ this.
inline Index completion_rank_lower_bound(Index n, Index w) {
  detail::require_sequence_length("completion_rank_lower_bound", n);
  detail::require_band_width("completion_rank_lower_bound", w);
  return std::max<Index>(0, w * (n / (2 * w)) - 1);
}

/// Rank-free logit-gap bound (F2): a row with w in-band and m out-of-band keys and out-of-band mass ε ∈ (0, 1)
/// has max_{band} S − min_{out of band} S ≥ log((1 − ε)·m / (ε·w)).
inline double logit_gap_lower_bound(Index out_of_band_keys, Index in_band_keys, double out_of_band_mass) {
  if (out_of_band_keys < 1)
    attnscope::detail::throw_invalid_argument("logit_gap_lower_bound", "out_of_band_keys must be >= 1, got ",
                                              out_of_band_keys);
  if (in_band_keys < 1)
    attnscope::detail::throw_invalid_argument("logit_gap_lower_bound", "in_band_keys must be >= 1, got ", in_band_keys);
  if (!(out_of_band_mass > 0.0 && out_of_band_mass < 1.0))
    attnscope::detail::throw_invalid_argument("logit_gap_lower_bound", "out_of_band_mass must lie in (0, 1), got ",
                                   out_of_band_mass);
  return std::log((1.0 - out_of_band_mass) * static_cast<double>(out_of_band_keys) /
                  (out_of_band_mass * static_cast<double>(in_band_keys)));
}

/// One row's measured logit gap next to its F2 bound.
struct LogitGapRow {
  Index row = 0;
  double gap = 0;               // max_{j in band} S_ij − min_{visible j not in band} S_ij
  double out_of_band_mass = 0;  // Σ_{visible j not in band} softmax(S)_ij
  double lower_bound = 0;       // logit_gap_lower_bound(m_i, w_i, out_of_band_mass)
};

/// Measured gaps and F2 bounds of every row that has both in-band (target > 0) and out-of-band visible keys and
/// an out-of-band mass strictly inside (0, 1). O(rows·cols).
template <class LogitsDerived, class TargetDerived>
std::vector<LogitGapRow> logit_gap_rows(const Eigen::MatrixBase<LogitsDerived>& logits,
                                        const Eigen::MatrixBase<TargetDerived>& band_target,
                                        const Visibility& visibility = {}) {
  attnscope::detail::require_nonempty("logit_gap_rows", logits);
  attnscope::detail::require_same_shape("logit_gap_rows", "logits/target", logits.rows(), logits.cols(),
                                        band_target.rows(), band_target.cols());
  visibility.validate("logit_gap_rows", logits.rows(), logits.cols());
  std::vector<LogitGapRow> rows;
  const Index cols = logits.cols();
  for (Index i = 0; i < logits.rows(); ++i) {
    double band_max = -HUGE_VAL, outside_min = HUGE_VAL;
    Index in_band = 0, outside = 0;
    for (Index j = 0; j < cols; ++j) {
      if (!visibility.visible(i, j, cols)) continue;
      const double s = static_cast<double>(logits(i, j));
      if (!std::isfinite(s))
        attnscope::detail::throw_invalid_argument("logit_gap_rows", "non-finite logit ", s, " at row ", i, ", column ",
                                                  j);
      if (band_target(i, j) > 0) ++in_band, band_max = std::max(band_max, s);
      else ++outside, outside_min = std::min(outside_min, s);
    }
    if (in_band == 0 || outside == 0) continue;
    // ε = the softmax mass of the row's visible out-of-band keys (the normalize module's softmax row kernel).
    std::vector<double> visible_logits, weights;
    std::vector<bool> out_of_band;
    for (Index j = 0; j < cols; ++j) {
      if (!visibility.visible(i, j, cols)) continue;
      visible_logits.push_back(static_cast<double>(logits(i, j)));
      out_of_band.push_back(!(band_target(i, j) > 0));
    }
    weights.resize(visible_logits.size());
    attnscope::detail::softmax_row(visible_logits.data(), static_cast<Index>(visible_logits.size()), 1.0,
                                   weights.data());
    double epsilon = 0;
    for (std::size_t k = 0; k < weights.size(); ++k)
      if (out_of_band[k]) epsilon += weights[k];
    if (!(epsilon > 0.0 && epsilon < 1.0)) continue;
    rows.push_back({i, band_max - outside_min, epsilon, logit_gap_lower_bound(outside, in_band, epsilon)});
  }
  return rows;
}

}  // namespace attnscope::logits
