// attnscope/stream/detail/reduce_row.hpp — the per-row work of the attention kernel: softmax of one contiguous row of
// scaled logits with its log-partition, and the requested statistics from the same exponentials (entropy, sink mass,
// max weight, exact ‖J‖₂ by the secular solver, top-k masses), all with the vectorized row kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/exp_sum.hpp"
#include "attnscope/kernels/row_reductions.hpp"
#include "attnscope/kernels/select_at_least.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "attnscope/stream/statistics_types.hpp"

namespace attnscope::stream::detail {

using attnscope::detail::throw_invalid_argument;

/// Rows per GEMM call: a destination of at most this many rows at compile time keeps Eigen from opening its own
/// OpenMP team inside the kernel's (its parallel GEMM spins badly when nested).
inline constexpr int gemm_rows = 32;

/// Throws naming `which`, the row and the column of the first non-finite entry of a row-major view.
template <class Scalar>
void require_finite_rows(const char* function, const char* which, const RowMatrixView<Scalar>& matrix) {
  for (Index i = 0; i < matrix.rows(); ++i) {
    const Scalar* row = matrix.data() + i * matrix.outerStride();
    if (kernels::row_max(row, matrix.cols()).finite) continue;
    for (Index j = 0; j < matrix.cols(); ++j)
      if (!std::isfinite(static_cast<double>(row[j])))
        throw_invalid_argument(function, "non-finite value ", row[j], " in ", which, " at row ", i, ", column ", j);
  }
}

/// The `kept` largest of p[0..n) in descending order (1 ≤ kept ≤ n), in `candidates` (or in p, reordered).
/// Few of many (kept ≤ n/16): the minimum t of the maxima of `kept` disjoint chunks is a value with at least `kept`
/// entries ≥ t, so the top `kept` are among the entries ≥ t — typically a few times `kept` — which one pass of
/// kernels::select_at_least collects and nth_element orders [derived]. Otherwise nth_element on the whole row.
template <class Scalar>
const Scalar* largest_descending(Scalar* p, Index n, Index kept, std::vector<Scalar>& candidates) {
  Scalar* values = p;
  Index count = n;
  if (kept * 16 <= n) {
    const Index chunk = n / kept;
    Scalar threshold = kernels::row_max(p + (kept - 1) * chunk, n - (kept - 1) * chunk).max;
    for (Index c = 0; c + 1 < kept; ++c) threshold = std::min(threshold, kernels::row_max(p + c * chunk, chunk).max);
    candidates.resize(static_cast<std::size_t>(n));
    count = kernels::select_at_least(p, n, threshold, candidates.data());
    values = candidates.data();
  }
  std::nth_element(values, values + (kept - 1), values + count, std::greater<Scalar>());
  std::sort(values, values + kept, std::greater<Scalar>());
  return values;
}

/// The shares of a learned sink logit s in a row whose visible keys have log-partition log Z = log Σ_k e^{z_k}:
/// σ = e^s/(Z + e^s) = 1/(1 + e^{log Z − s}) and 1 − σ = 1/(1 + e^{s − log Z}), each formed without cancellation.
struct LearnedSinkShares {
  double sink = 0, content = 1;
};
inline LearnedSinkShares learned_sink_shares(double log_partition, double sink_logit) {
  return {1.0 / (1.0 + std::exp(log_partition - sink_logit)), 1.0 / (1.0 + std::exp(sink_logit - log_partition))};
}

/// The factor that turns a row's exponentials e_j = exp(s_j − m) (sum `sum`) into its weights: 1/S for softmax, and
/// (1 − σ)/S with a learned sink logit (σ then stored in `sink_share`; 0 without one).
template <class Scalar>
Scalar weight_factor(Scalar maximum, Scalar sum, const RowStatisticsOptions& options, double& sink_share) {
  sink_share = 0;
  if (!options.sink_logit) return Scalar(1) / sum;
  const LearnedSinkShares shares = learned_sink_shares(
      static_cast<double>(maximum) + std::log(static_cast<double>(sum)), *options.sink_logit);
  sink_share = shares.sink;
  return static_cast<Scalar>(shares.content / static_cast<double>(sum));
}

/// p = softmax(s) of one row of n scaled logits (p may alias s), or the sink softmax with options.sink_logit (its
/// share σ into `sink_share`); returns the maximum of s. Throws naming the row if a logit is not finite (a q·k
/// overflow).
template <class Scalar>
Scalar softmax_row_checked(const char* function, const Scalar* s, Index n, Scalar* p, Index row,
                           const RowStatisticsOptions& options, double& sink_share) {
  const auto maximum = kernels::row_max(s, n);
  if (!maximum.finite) throw_invalid_argument(function, "a logit of row ", row, " overflows (q·k not finite)");
  const Scalar sum = kernels::exp_shifted_sum(s, n, maximum.max, Scalar(1), p);  // Σ exp(s_j − m) ≥ 1
  kernels::scale_row(p, n, weight_factor(maximum.max, sum, options, sink_share));
  return maximum.max;
}

/// The statistics of one row (index `row` of `out`) from its n contiguous scaled logits s: p = softmax(s) is written
/// to `p` (≥ n entries; may alias s: then the row's probabilities replace its logits). `work` (n entries, not
/// aliasing s or p) is scratch for the top-k; it may be null when max_top_k is 0. `sink_positions` are sorted
/// positions in [0, n) of the sink keys; `top_buffer` is scratch for the top-k.
template <class Scalar>
void reduce_row(const char* function, const Scalar* s, Index n, const std::vector<Index>& sink_positions,
                const RowStatisticsOptions& options, Index max_top_k, Scalar* p, Scalar* work,
                std::vector<Scalar>& top_buffer, Index row, RowStatistics& out) {
  // −Σ p log p with log p_j = (s_j − m) − log S: H = log S + Σ p_j (m − s_j), two non-negative terms [derived]; the
  // second is Σ e_j (m − s_j) / S with e_j = exp(s_j − m), summed with the exponentials
  const auto extremum = kernels::row_max(s, n);
  if (!extremum.finite) throw_invalid_argument(function, "a logit of row ", row, " overflows (q·k not finite)");
  const Scalar maximum = extremum.max;
  Scalar weighted = 0;  // Σ e_j (m − s_j)
  // the exponentials and sum of softmax_row_checked, bit for bit (the same kernel pass), with the spread beside them
  const Scalar sum = kernels::exp_shifted_sum_and_spread(s, n, maximum, Scalar(1), p, weighted);
  double sink_share = 0;
  const Scalar factor = weight_factor(maximum, sum, options, sink_share);
  kernels::scale_row(p, n, factor);  // as softmax_row_checked
  const double spread = static_cast<double>(weighted) / static_cast<double>(sum);
  const double log_sum = std::log(static_cast<double>(sum));
  out.max_scaled_logit(row) = static_cast<double>(maximum);
  out.log_partition(row) = static_cast<double>(maximum) + log_sum;  // log Σ exp s_j = m + log Σ exp(s_j − m)
  out.visible_keys(row) = n;
  out.entropy(row) = log_sum + spread;
  if (options.sink_logit) {
    // H(p, σ) = h(σ) + (1 − σ)·H(p/(1 − σ)) with h the binary entropy (the grouping rule of entropy) [derived]
    const double content = 1.0 - sink_share;
    const double binary = (sink_share > 0 ? -sink_share * std::log(sink_share) : 0.0) +
                          (content > 0 ? -content * std::log(content) : 0.0);
    out.learned_sink(row) = sink_share;
    out.entropy_with_sink(row) = binary + content * out.entropy(row);
  }
  double sink = 0;
  for (const Index position : sink_positions) sink += static_cast<double>(p[position]);
  out.sink_mass(row) = sink;
  if (options.max_weight_excludes_sinks && !sink_positions.empty()) {
    Scalar best = 0;
    Index start = 0;
    for (const Index position : sink_positions) {
      if (position > start) best = std::max(best, kernels::row_max(p + start, position - start).max);
      start = position + 1;
    }
    if (n > start) best = std::max(best, kernels::row_max(p + start, n - start).max);
    out.max_weight(row) = static_cast<double>(best);
  } else {
    // the largest logit's weight, exp(0)·factor = factor exactly (1/S, or (1 − σ)/S with a learned sink), is the
    // largest: every other e_j = exp(s_j − m) ≤ 1 and p_j = e_j·factor rounds monotonically [derived]; no pass over p
    out.max_weight(row) = static_cast<double>(factor);
  }
  // exact ‖diag p − ppᵀ‖₂ by the secular method of normalize/spectral_norm.hpp (docs/theory/normalization-maps.md §5)
  // (with a learned sink: Σp = 1 − σ, the sink form of §5.4 with r₀ = σ)
  if (!options.jacobian_norm) out.jacobian_norm(row) = 0.0;
  else if (options.sink_logit)
    out.jacobian_norm(row) = static_cast<double>(
        attnscope::detail::sink_softmax_jacobian_norm_row(p, n, static_cast<Scalar>(sink_share)));
  else
    out.jacobian_norm(row) = static_cast<double>(attnscope::detail::softmax_jacobian_norm_row(p, n, Scalar(1)));
  if (max_top_k > 0) {  // on a copy: the search reorders its input
    std::copy(p, p + n, work);
    const Index kept = std::min(max_top_k, n);
    const Scalar* largest = largest_descending(work, n, kept, top_buffer);
    for (std::size_t c = 0; c < options.top_k.size(); ++c) {
      const Index k = std::min(options.top_k[c], n);
      double mass = 0;
      for (Index t = 0; t < k; ++t) mass += static_cast<double>(largest[t]);
      out.top_k_mass(row, static_cast<Index>(c)) = mass;
    }
  }
}

}  // namespace attnscope::stream::detail
