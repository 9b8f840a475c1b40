// attnscope/composition/controls.hpp — the sink-injection control of the keep/drop flip rate
// (docs/theory/composition.md §7, [derived]).
// A model without an attention sink (mean weight on key 0 near 0 in every head) has keep rows that are almost their
// own content compositions, so keep and drop verdicts barely differ and a low flip rate says nothing about the
// convention. The control keeps every real content composition c_i and gives each head h one sink weight w_h:
// a_i ← (w_h, (1 − w_h)·c_i) (docs/theory/composition.md §1: a = (s, (1 − s)·c)). Drop metrics are unchanged, keep
// metrics now see a sink channel that varies between heads as in trained models with a sink.
#pragma once

#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/rows.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::composition {

/// `count` sink weights w_h ~ U(low, high), drawn in head order from `random` (deterministic for a seed).
/// Requires 0 ≤ low ≤ high < 1 and count ≥ 0.
inline Vector<double> draw_sink_weights(Index count, Random& random, double low = 0.3, double high = 0.9) {
  if (count < 0) attnscope::detail::throw_invalid_argument("draw_sink_weights", "negative head count ", count);
  if (!(low >= 0) || !(high >= low) || !(high < 1))
    attnscope::detail::throw_invalid_argument("draw_sink_weights", "need 0 <= low <= high < 1, got low ", low,
                                              ", high ", high);
  Vector<double> weights(count);
  for (Index h = 0; h < count; ++h) weights(h) = random.uniform(low, high);
  return weights;
}

/// One head's rows with the sink mass set to `sink_weight` in every row and the content composition kept:
/// a_i ← (w·σ_i, (1 − w)·c_i), c_i = closure of the visible content parts, σ_i = closure of the sink parts
/// (1/|S| each when the row's sink mass is 0). Masked entries stay 0. Rows must be distributions over their
/// visible keys (within `tolerance`) with a positive content mass; `sink_weight` in [0, 1).
template <class Derived>
RowMatrix<double> with_sink_weight(const Eigen::MatrixBase<Derived>& attention, double sink_weight,
                                   const Visibility& visibility = {}, const SinkSet& sinks = {},
                                   double tolerance = detail::default_row_sum_tolerance) {
  constexpr const char* function = "with_sink_weight";
  if (!(sink_weight >= 0) || !(sink_weight < 1))
    attnscope::detail::throw_invalid_argument(function, "sink weight must be in [0, 1), got ", sink_weight);
  const RowMatrix<double> rows = attention.template cast<double>();
  const RowMatrixView<double> view(rows);
  detail::validate_distributions(function, view, visibility, tolerance);
  const Index cols = rows.cols();
  const std::vector<char> is_sink = detail::sink_flags(function, sinks, cols);
  RowMatrix<double> out = RowMatrix<double>::Zero(rows.rows(), cols);
  const double share = 1.0 / static_cast<double>(sinks.size());
  for (Index i = 0; i < rows.rows(); ++i) {
    double sink_mass = 0, content_mass = 0;
    for (Index c : sinks.columns())
      if (!visibility.visible(i, c, cols))
        attnscope::detail::throw_invalid_argument(function, "sink column ", c, " is masked in row ", i);
    for (Index j = 0; j < cols; ++j)
      if (visibility.visible(i, j, cols))
        (is_sink[static_cast<std::size_t>(j)] ? sink_mass : content_mass) += rows(i, j);
    if (!(content_mass > 0))
      attnscope::detail::throw_invalid_argument(function, "row ", i, " has no content mass (sink mass ", sink_mass,
                                     "): its content composition is undefined");
    for (Index j = 0; j < cols; ++j) {
      if (!visibility.visible(i, j, cols)) continue;
      out(i, j) = is_sink[static_cast<std::size_t>(j)]
                      ? sink_weight * (sink_mass > 0 ? rows(i, j) / sink_mass : share)
                      : (1 - sink_weight) * rows(i, j) / content_mass;
    }
  }
  return out;
}

/// Heads after sink injection, with the weight each head received.
struct SinkInjection {
  std::vector<RowMatrix<double>> heads;
  Vector<double> sink_weights;  // w_h, one per head
};

/// with_sink_weight for every head with its own weight `sink_weights(h)` (e.g. from draw_sink_weights, shared by
/// every sequence of an experiment so that a head keeps its sink level across inputs).
template <class Scalar>
SinkInjection with_sink_weights(const std::vector<RowMatrix<Scalar>>& heads, const Vector<double>& sink_weights,
                                const Visibility& visibility = {}, const SinkSet& sinks = {},
                                double tolerance = detail::default_row_sum_tolerance) {
  if (static_cast<Index>(heads.size()) != sink_weights.size())
    attnscope::detail::throw_invalid_argument("with_sink_weights", heads.size(), " heads but ", sink_weights.size(),
                                   " sink weights");
  SinkInjection out;
  out.sink_weights = sink_weights;
  out.heads.reserve(heads.size());
  for (std::size_t h = 0; h < heads.size(); ++h)
    out.heads.push_back(with_sink_weight(heads[h], sink_weights(static_cast<Index>(h)), visibility, sinks, tolerance));
  return out;
}

/// The sink-injection control ([derived]): w_h ~ U(low, high) per head (default U(0.3, 0.9)), then
/// with_sink_weights. Deterministic for the state of `random`.
template <class Scalar>
SinkInjection inject_sink(const std::vector<RowMatrix<Scalar>>& heads, Random& random, double low = 0.3,
                          double high = 0.9, const Visibility& visibility = {}, const SinkSet& sinks = {},
                          double tolerance = detail::default_row_sum_tolerance) {
  const Vector<double> weights = draw_sink_weights(static_cast<Index>(heads.size()), random, low, high);
  return with_sink_weights(heads, weights, visibility, sinks, tolerance);
}

}  // namespace attnscope::composition
