// attnscope/composition/attribution.hpp — entropy-collapse attribution: how much of an entropy change between two
// conditions is sink growth and how much is content sharpening (docs/theory/composition.md §2, [derived]).
// With H = H_b(s) + s·H_S + (1 − s)·H_C (H_S = entropy inside the sink set, 0 for one sink column), the midpoint
// (symmetric Shapley-type) rule Δ(xy) = x̄·Δy + ȳ·Δx splits ΔH exactly into
//   sink part    = ΔH_b(s) + s̄·ΔH_S + (H̄_S − H̄_C)·Δs     (= ΔH_b(s) − H̄c·Δs for one sink column, §2)
//   content part = (1 − s̄)·ΔH_C.
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "attnscope/composition/channels.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::composition {

/// Order of averaging when attributing an entropy change over many rows (§2; the paper's order is not published).
enum class AttributionOrder {
  per_row_then_mean,  // split every matched row exactly, then average the parts (exact; default)
  mean_then_split,    // average s, H_S and H(c) over rows per condition, then split once (not exact: residual)
};

/// Per-row attribution of ΔH = H(after) − H(before): delta = sink_part + content_part exactly.
struct EntropyAttributionRows {
  Vector<double> delta_entropy, sink_part, content_part;
};

/// Aggregated attribution.
struct EntropyAttribution {
  double delta_entropy = 0;  // mean over rows of H(after) − H(before) (measured)
  double sink_part = 0;      // sink growth's part of the change
  double content_part = 0;   // content sharpening's part of the change
  double sink_share = 0;     // sink_part / (sink_part + content_part); 0 when both parts are 0
  double residual = 0;       // delta_entropy − sink_part − content_part (0 up to rounding for per_row_then_mean)
};

namespace detail {

/// One condition's channel state: sink mass s, H_b(s), entropy inside the sink set H_S, content entropy H_C.
struct ChannelState {
  double sink_mass, binary, within_sink, content_entropy;
};

/// Midpoint split of the change between two channel states: {sink part, content part}, summing to ΔH exactly.
inline std::pair<double, double> midpoint_entropy_split(const ChannelState& before, const ChannelState& after) {
  const double mean_s = (before.sink_mass + after.sink_mass) / 2, delta_s = after.sink_mass - before.sink_mass;
  const double mean_within = (before.within_sink + after.within_sink) / 2;
  const double mean_content = (before.content_entropy + after.content_entropy) / 2;
  const double sink = (after.binary - before.binary) + mean_s * (after.within_sink - before.within_sink) +
                      (mean_within - mean_content) * delta_s;
  const double content = (1 - mean_s) * (after.content_entropy - before.content_entropy);
  return {sink, content};
}

template <class DerivedBefore, class DerivedAfter>
void validate_matched(const char* function, const Eigen::MatrixBase<DerivedBefore>& before,
                      const Eigen::MatrixBase<DerivedAfter>& after) {
  if (before.rows() != after.rows())
    attnscope::detail::throw_invalid_argument(function, "conditions must have matched rows: ", before.rows(), " vs ",
                                              after.rows());
}

}  // namespace detail

/// Exact per-row attribution between two conditions with matched rows (same queries; key sets and column counts may
/// differ, e.g. short vs long context). Uses the per-row entropy split of each condition (binary term computed from
/// the content mass, so the parts add to ΔH to rounding).
template <class DerivedBefore, class DerivedAfter>
EntropyAttributionRows entropy_attribution_rows(const Eigen::MatrixBase<DerivedBefore>& before,
                                                const Visibility& visibility_before,
                                                const Eigen::MatrixBase<DerivedAfter>& after,
                                                const Visibility& visibility_after, const SinkSet& sinks = {},
                                                double tolerance = detail::default_row_sum_tolerance) {
  detail::validate_matched("entropy_attribution_rows", before, after);
  const auto split_before = entropy_split(before, visibility_before, sinks, tolerance);
  const auto split_after = entropy_split(after, visibility_after, sinks, tolerance);
  const Index rows = before.rows();
  EntropyAttributionRows out{Vector<double>(rows), Vector<double>(rows), Vector<double>(rows)};
  for (Index i = 0; i < rows; ++i) {
    auto state = [i](const auto& split) {
      return detail::ChannelState{static_cast<double>(split.sink_mass(i)), static_cast<double>(split.binary(i)),
                                  static_cast<double>(split.within_sink(i)), static_cast<double>(split.content_entropy(i))};
    };
    const auto parts = detail::midpoint_entropy_split(state(split_before), state(split_after));
    out.sink_part(i) = parts.first;
    out.content_part(i) = parts.second;
    out.delta_entropy(i) = static_cast<double>(split_after.entropy(i)) - static_cast<double>(split_before.entropy(i));
  }
  return out;
}

/// Aggregated attribution of the mean entropy change between two conditions, in the given averaging order.
/// per_row_then_mean: the mean of the exact per-row parts. mean_then_split: the midpoint split applied to the
/// row-averaged s, H_S and H(c) of each condition (mean H ≠ H of means, hence a non-zero residual).
template <class DerivedBefore, class DerivedAfter>
EntropyAttribution entropy_attribution(const Eigen::MatrixBase<DerivedBefore>& before,
                                       const Visibility& visibility_before, const Eigen::MatrixBase<DerivedAfter>& after,
                                       const Visibility& visibility_after,
                                       AttributionOrder order = AttributionOrder::per_row_then_mean,
                                       const SinkSet& sinks = {},
                                       double tolerance = detail::default_row_sum_tolerance) {
  detail::validate_matched("entropy_attribution", before, after);
  EntropyAttribution out;
  if (order == AttributionOrder::per_row_then_mean) {
    const auto rows = entropy_attribution_rows(before, visibility_before, after, visibility_after, sinks, tolerance);
    out.delta_entropy = rows.delta_entropy.mean();
    out.sink_part = rows.sink_part.mean();
    out.content_part = rows.content_part.mean();
  } else {
    const auto split_before = entropy_split(before, visibility_before, sinks, tolerance);
    const auto split_after = entropy_split(after, visibility_after, sinks, tolerance);
    auto mean_state = [](const auto& split) {
      const double s = static_cast<double>(split.sink_mass.mean());
      return detail::ChannelState{s, detail::binary_entropy(s, 1 - s), static_cast<double>(split.within_sink.mean()),
                                  static_cast<double>(split.content_entropy.mean())};
    };
    const auto parts = detail::midpoint_entropy_split(mean_state(split_before), mean_state(split_after));
    out.delta_entropy = static_cast<double>(split_after.entropy.mean()) - static_cast<double>(split_before.entropy.mean());
    out.sink_part = parts.first;
    out.content_part = parts.second;
  }
  const double total = out.sink_part + out.content_part;
  out.sink_share = total != 0 ? out.sink_part / total : 0.0;
  out.residual = out.delta_entropy - total;
  return out;
}

}  // namespace attnscope::composition
