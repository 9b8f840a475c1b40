// attnscope/composition/scores.hpp — channel-specific head scores (docs/theory/composition.md §10, [derived]):
// the sink score (mean sink mass, Sok et al. 2026's S_h = mean_t a_{t,0}), the content score (mean content entropy,
// content redundancy) and the raw score (mean entropy of the full row, which mixes both channels), plus a per-head
// channel summary for reports.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/channels.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/composition/verdicts.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::composition {

/// One head's channel summary over its rows.
struct ChannelSummary {
  double mean_sink_mass = 0;         // mean_i s_i
  double mean_entropy = 0;           // mean_i H(a_i)             (keep convention)
  double mean_content_entropy = 0;   // mean_i H(c_i)             (drop convention)
  double sink_share_of_entropy = 0;  // Σ_i [H_b(s_i) + s_i·H_S,i] / Σ_i H(a_i); 0 when Σ_i H(a_i) = 0
};

/// Channel summary of one head's attention rows (rows need a content key: s < 1; skip causal row 0).
/// The columns "sink mass", "content entropy", "sink share of entropy" of a per-head report.
template <class Derived>
ChannelSummary channel_summary(const Eigen::MatrixBase<Derived>& attention, const Visibility& visibility = {},
                               const SinkSet& sinks = {}, double tolerance = detail::default_row_sum_tolerance) {
  const auto split = entropy_split(attention, visibility, sinks, tolerance);
  ChannelSummary out;
  out.mean_sink_mass = static_cast<double>(split.sink_mass.mean());
  out.mean_entropy = static_cast<double>(split.entropy.mean());
  out.mean_content_entropy = static_cast<double>(split.content_entropy.mean());
  const double total = static_cast<double>(split.entropy.sum());
  out.sink_share_of_entropy = total > 0 ? static_cast<double>(split.sink_term().sum()) / total : 0.0;
  return out;
}

/// Per-row sink share of entropy, (H_b(s) + s·H_S)/H(a); rows with H(a) = 0 get 0.
template <class Derived>
Vector<detail::ScalarOf<Derived>> sink_share_of_entropy(const Eigen::MatrixBase<Derived>& attention,
                                                        const Visibility& visibility = {}, const SinkSet& sinks = {},
                                                        double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<Derived>;
  const auto split = entropy_split(attention, visibility, sinks, tolerance);
  const Vector<Scalar> sink = split.sink_term();
  Vector<Scalar> out(sink.size());
  for (Index i = 0; i < sink.size(); ++i) out(i) = split.entropy(i) > 0 ? sink(i) / split.entropy(i) : Scalar(0);
  return out;
}

/// Channel scores of a set of heads (one entry per head).
struct HeadScores {
  Vector<double> sink_mass;           // sink channel: mean sink mass
  Vector<double> content_entropy;     // content channel: mean H(c)
  Vector<double> raw_entropy;         // raw (mixed) score: mean H(a)
  Vector<double> content_redundancy;  // content channel: 1 − min_{h′≠h} mean_i JS(c_{h,i}, c_{h′,i}) / ln 2 ∈ [0, 1]
};

/// Scores of every head on matched rows (same shape and visibility). Content redundancy [derived]: a head whose
/// content compositions are nearly those of another head (small drop-convention JS) is redundant; JS ≤ ln 2.
template <class Scalar>
HeadScores head_scores(const std::vector<RowMatrix<Scalar>>& heads, const Visibility& visibility = {},
                       const SinkSet& sinks = {}, double tolerance = detail::default_row_sum_tolerance) {
  if (heads.size() < 2)
    attnscope::detail::throw_invalid_argument("head_scores", "need at least 2 heads, got ", heads.size());
  const Index count = static_cast<Index>(heads.size());
  HeadScores out{Vector<double>(count), Vector<double>(count), Vector<double>(count), Vector<double>(count)};
  for (Index h = 0; h < count; ++h) {
    const ChannelSummary summary = channel_summary(heads[static_cast<std::size_t>(h)], visibility, sinks, tolerance);
    out.sink_mass(h) = summary.mean_sink_mass;
    out.content_entropy(h) = summary.mean_content_entropy;
    out.raw_entropy(h) = summary.mean_entropy;
  }
  const RowMatrix<double> content_js =
      mean_pair_metric_matrix(heads, Metric::jensen_shannon, Convention::drop, visibility, sinks, tolerance);
  for (Index h = 0; h < count; ++h) {
    double nearest = std::numeric_limits<double>::infinity();
    for (Index g = 0; g < count; ++g)
      if (g != h) nearest = std::min(nearest, content_js(h, g));
    out.content_redundancy(h) = 1.0 - nearest / std::log(2.0);
  }
  return out;
}

}  // namespace attnscope::composition
