// attnscope/stream/aggregate.hpp — per-head aggregates of per-row statistics: mean, extremes and quantiles, and the
// curve of a statistic against the query position (binned linearly or logarithmically), e.g. the max weight or top-k
// mass against the number of visible keys — the vanishing-attention curve at long L.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::stream {

/// Mean, extremes and quantiles of one statistic over the rows of a head.
struct Summary {
  Index count = 0;
  double mean = 0, min = 0, max = 0;
  std::vector<double> probabilities;  ///< the levels asked for
  std::vector<double> quantiles;      ///< one per level
};

/// The default quantile levels: 5 %, 25 %, 50 %, 75 %, 95 %.
inline std::vector<double> default_quantile_levels() { return {0.05, 0.25, 0.5, 0.75, 0.95}; }

namespace detail {

/// Copies the values into a vector after checking they are non-empty and finite.
template <class Derived>
std::vector<double> finite_values(const char* function, const Eigen::MatrixBase<Derived>& values) {
  if (values.size() == 0) attnscope::detail::throw_invalid_argument(function, "no values");
  std::vector<double> copy(static_cast<std::size_t>(values.size()));
  for (Index i = 0; i < values.size(); ++i) {
    copy[static_cast<std::size_t>(i)] = static_cast<double>(values.derived()(i));
    if (!std::isfinite(copy[static_cast<std::size_t>(i)]))
      attnscope::detail::throw_invalid_argument(function, "non-finite value ", copy[static_cast<std::size_t>(i)],
                                                " at row ", i);
  }
  return copy;
}

/// Quantile of sorted values by linear interpolation between order statistics (Hyndman & Fan 1996, type 7:
/// h = (n − 1)·level, the default of R and numpy).
inline double sorted_quantile(const std::vector<double>& sorted, double level) {
  const double position = level * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

}  // namespace detail

/// Mean, min, max and type-7 quantiles (Hyndman & Fan 1996) of a vector of per-row values. Throws
/// attnscope::invalid_argument for no values, a NaN/Inf value (naming the row) or a level outside [0, 1].
template <class Derived>
Summary summarize(const Eigen::MatrixBase<Derived>& values,
                  const std::vector<double>& levels = default_quantile_levels()) {
  const char* function = "stream::summarize";
  for (const double level : levels)
    if (!(level >= 0 && level <= 1))
      attnscope::detail::throw_invalid_argument(function, "quantile level ", level, " is outside [0, 1]");
  std::vector<double> sorted = detail::finite_values(function, values);
  std::sort(sorted.begin(), sorted.end());
  Summary summary;
  summary.count = static_cast<Index>(sorted.size());
  double total = 0;
  for (const double value : sorted) total += value;
  summary.mean = total / static_cast<double>(sorted.size());
  summary.min = sorted.front();
  summary.max = sorted.back();
  summary.probabilities = levels;
  for (const double level : levels) summary.quantiles.push_back(detail::sorted_quantile(sorted, level));
  return summary;
}

/// How position_curve places its bin edges over the rows.
enum class BinSpacing { linear, logarithmic };

/// A statistic against the query position: bin b covers rows [first_row[b], end_row[b]); `position` is the mean of
/// (row + 1) over the bin (the number of visible keys of a causal row), `mean` the mean value in the bin.
struct PositionCurve {
  std::vector<Index> first_row, end_row;
  std::vector<double> position, mean;
};

/// Bins the rows 0..L−1 into at most `bins` bins — linear (equal numbers of rows) or logarithmic in row + 1 (edges
/// round((L)^(b/bins)) − 1, duplicates dropped, so every bin is non-empty) — and averages the values in each. Throws
/// attnscope::invalid_argument for no values, a NaN/Inf value or bins < 1.
template <class Derived>
PositionCurve position_curve(const Eigen::MatrixBase<Derived>& values, Index bins,
                             BinSpacing spacing = BinSpacing::logarithmic) {
  const char* function = "stream::position_curve";
  if (bins < 1) attnscope::detail::throw_invalid_argument(function, "bins must be >= 1, got ", bins);
  const std::vector<double> rows = detail::finite_values(function, values);
  const auto length = static_cast<Index>(rows.size());
  std::vector<Index> edges{0};
  for (Index b = 1; b <= bins; ++b) {
    const double fraction = static_cast<double>(b) / static_cast<double>(bins);
    Index edge = spacing == BinSpacing::linear
                     ? static_cast<Index>(std::llround(fraction * static_cast<double>(length)))
                     : static_cast<Index>(std::llround(std::pow(static_cast<double>(length), fraction))) - 1;
    edge = b == bins ? length : std::min(edge, length);
    if (edge > edges.back()) edges.push_back(edge);
  }
  PositionCurve curve;
  for (std::size_t b = 0; b + 1 < edges.size(); ++b) {
    double total = 0, positions = 0;
    for (Index i = edges[b]; i < edges[b + 1]; ++i) {
      total += rows[static_cast<std::size_t>(i)];
      positions += static_cast<double>(i + 1);
    }
    const auto count = static_cast<double>(edges[b + 1] - edges[b]);
    curve.first_row.push_back(edges[b]);
    curve.end_row.push_back(edges[b + 1]);
    curve.position.push_back(positions / count);
    curve.mean.push_back(total / count);
  }
  return curve;
}

}  // namespace attnscope::stream
