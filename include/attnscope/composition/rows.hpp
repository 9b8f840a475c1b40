// attnscope/composition/rows.hpp — internals of the composition module: visiting the visible parts of each row,
// validating rows as compositions, and splitting a row into sink parts and content parts.
// Masked keys are excluded (they are not parts of the composition), never replaced.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::composition {

/// Set of key columns treated as the sink (docs/theory/composition.md §1: default {0}, any fixed index set S).
class SinkSet {
 public:
  /// The first key (column 0): the usual sink of causal language models.
  SinkSet() : columns_{0} {}
  /// A fixed set of columns (non-empty, distinct, non-negative); checked against the matrix when used.
  explicit SinkSet(std::vector<Index> columns) : columns_(std::move(columns)) {
    if (columns_.empty()) attnscope::detail::throw_invalid_argument("SinkSet", "the sink index set is empty");
    std::vector<Index> sorted = columns_;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      if (sorted[k] < 0) attnscope::detail::throw_invalid_argument("SinkSet", "negative sink column ", sorted[k]);
      if (k > 0 && sorted[k] == sorted[k - 1])
        attnscope::detail::throw_invalid_argument("SinkSet", "duplicate sink column ", sorted[k]);
    }
    columns_ = std::move(sorted);
  }
  /// Columns of the sink, ascending.
  const std::vector<Index>& columns() const { return columns_; }
  Index size() const { return static_cast<Index>(columns_.size()); }

 private:
  std::vector<Index> columns_;
};

namespace detail {

/// Default tolerance on |Σ_j a_ij − 1| for rows that must be probability distributions (float attention rows of
/// length 512 sum to 1 within ~1e−5; exact identities are exact for whatever closed row is given).
inline constexpr double default_row_sum_tolerance = 1e-4;

/// Calls kernel(row, values, n, columns) for every row with its visible entries: for prefix visibility `values`
/// points into the matrix and `columns` is nullptr (columns 0..n−1); for masks the visible entries are gathered.
template <class Scalar, class Kernel>
void for_each_visible_row(const RowMatrixView<Scalar>& x, const Visibility& visibility, Kernel&& kernel) {
  const Index rows = x.rows(), cols = x.cols();
  if (visibility.is_prefix()) {
    attnscope::detail::for_each_row(rows, cols, [&](Index i) {
      kernel(i, x.data() + i * x.outerStride(), visibility.prefix_length(i, cols), static_cast<const Index*>(nullptr));
    });
  } else {
    attnscope::detail::for_each_row(rows, cols, [&](Index i) {
      std::vector<Scalar> values;
      std::vector<Index> columns;
      values.reserve(static_cast<std::size_t>(cols));
      columns.reserve(static_cast<std::size_t>(cols));
      for (Index j = 0; j < cols; ++j)
        if (visibility.visible(i, j, cols)) {
          values.push_back(x(i, j));
          columns.push_back(j);
        }
      kernel(i, values.data(), static_cast<Index>(values.size()), columns.data());
    });
  }
}

/// Column of the k-th visible part (columns == nullptr means the prefix 0..n−1).
inline Index column_of(const Index* columns, Index k) { return columns ? columns[k] : k; }

/// Writes n values to the given columns of an output row (prefix when columns == nullptr).
template <class Scalar>
void scatter(const Scalar* values, Index n, const Index* columns, Scalar* out_row) {
  for (Index k = 0; k < n; ++k) out_row[column_of(columns, k)] = values[k];
}

/// What a row-validating function requires of the visible parts.
enum class PartRule { finite, non_negative, positive };

/// Non-empty input, valid visibility (mask shape, no empty row), and every visible part obeys the rule.
template <class Scalar>
void validate_parts(const char* function, const RowMatrixView<Scalar>& x, const Visibility& visibility,
                    PartRule rule) {
  attnscope::detail::require_nonempty(function, x);
  visibility.validate(function, x.rows(), x.cols());
  const Index cols = x.cols();
  for (Index i = 0; i < x.rows(); ++i) {
    const Index n = visibility.is_prefix() ? visibility.prefix_length(i, cols) : cols;
    if (visibility.is_prefix()) {  // fast vectorised pass; the element loop below only runs to name a bad value
      const auto visible = x.row(i).head(n).array();
      const bool fine = rule == PartRule::finite        ? visible.allFinite()
                        : rule == PartRule::non_negative ? visible.allFinite() && (visible >= 0).all()
                                                         : visible.allFinite() && (visible > 0).all();
      if (fine) continue;
    }
    for (Index j = 0; j < n; ++j) {
      if (!visibility.is_prefix() && !visibility.visible(i, j, cols)) continue;
      const Scalar value = x(i, j);
      if (!std::isfinite(static_cast<double>(value)))
        attnscope::detail::throw_invalid_argument(function, "non-finite value ", value, " at row ", i, ", column ", j);
      if (rule == PartRule::non_negative && value < 0)
        attnscope::detail::throw_invalid_argument(function, "negative part ", value, " at row ", i, ", column ", j);
      if (rule == PartRule::positive && !(value > 0))
        attnscope::detail::throw_invalid_argument(function, "part ", value, " at row ", i, ", column ", j,
                               " is not strictly positive (logs need positive parts: use the *_from_logits variant "
                               "or multiplicative_replacement)");
    }
  }
}

/// As validate_parts(non_negative) and every row sums to 1 within `tolerance` over its visible keys.
template <class Scalar>
void validate_distributions(const char* function, const RowMatrixView<Scalar>& x, const Visibility& visibility,
                            double tolerance) {
  if (!(tolerance >= 0) || !std::isfinite(tolerance))
    attnscope::detail::throw_invalid_argument(function, "row-sum tolerance must be finite and >= 0, got ", tolerance);
  validate_parts(function, x, visibility, PartRule::non_negative);
  for (Index i = 0; i < x.rows(); ++i) {
    double sum = 0;
    for (Index j = 0; j < x.cols(); ++j)
      if (visibility.visible(i, j, x.cols())) sum += static_cast<double>(x(i, j));
    if (std::abs(sum - 1.0) > tolerance)
      attnscope::detail::throw_invalid_argument(function, "row ", i, " sums to ", sum, ", not 1 within tolerance ",
                                                tolerance);
  }
}

/// One row split into its sink parts and content parts (visible keys only, column order).
template <class Scalar>
struct SplitRow {
  std::vector<Scalar> sink, content;
};

/// Per-column flags of the sink set for a matrix with `cols` columns; throws when a sink column is out of range.
inline std::vector<char> sink_flags(const char* function, const SinkSet& sinks, Index cols) {
  if (sinks.columns().back() >= cols)
    attnscope::detail::throw_invalid_argument(function, "sink column ", sinks.columns().back(), " out of range for ",
                                              cols, " columns");
  std::vector<char> is_sink(static_cast<std::size_t>(cols), 0);
  for (Index c : sinks.columns()) is_sink[static_cast<std::size_t>(c)] = 1;
  return is_sink;
}

/// Splits every row into sink parts and content parts and calls kernel(row, const SplitRow&). Throws when a sink
/// column is out of range or masked in some row, or when a row has no content key.
template <class Scalar, class Kernel>
void for_each_split_row(const char* function, const RowMatrixView<Scalar>& x, const Visibility& visibility,
                        const SinkSet& sinks, Kernel&& kernel) {
  const Index cols = x.cols();
  const std::vector<char> is_sink = sink_flags(function, sinks, cols);
  for (Index i = 0; i < x.rows(); ++i) {
    for (Index c : sinks.columns())
      if (!visibility.visible(i, c, cols))
        attnscope::detail::throw_invalid_argument(function, "sink column ", c, " is masked in row ", i);
    if (visibility.visible_count(i, cols) <= sinks.size())
      attnscope::detail::throw_invalid_argument(function, "row ", i,
                                                " has no visible content key (only the sink); skip such rows");
  }
  for_each_visible_row<Scalar>(x, visibility, [&](Index i, const Scalar* values, Index n, const Index* columns) {
    SplitRow<Scalar> parts;
    parts.sink.reserve(static_cast<std::size_t>(sinks.size()));
    parts.content.reserve(static_cast<std::size_t>(n));
    for (Index k = 0; k < n; ++k)
      (is_sink[static_cast<std::size_t>(column_of(columns, k))] ? parts.sink : parts.content).push_back(values[k]);
    kernel(i, parts);
  });
}

/// Same as for_each_split_row for two matrices with the same shape and visibility: kernel(row, split_a, split_b).
template <class Scalar, class Kernel>
void for_each_split_row_pair(const char* function, const RowMatrixView<Scalar>& a, const RowMatrixView<Scalar>& b,
                             const Visibility& visibility, const SinkSet& sinks, Kernel&& kernel) {
  std::vector<SplitRow<Scalar>> split_b(static_cast<std::size_t>(b.rows()));
  for_each_split_row<Scalar>(function, b, visibility, sinks,
                             [&](Index i, const SplitRow<Scalar>& parts) { split_b[static_cast<std::size_t>(i)] = parts; });
  for_each_split_row<Scalar>(function, a, visibility, sinks, [&](Index i, const SplitRow<Scalar>& parts) {
    kernel(i, parts, split_b[static_cast<std::size_t>(i)]);
  });
}

/// Σ of a vector of parts (long double free; plain summation in the row's scalar type).
template <class Scalar>
Scalar sum_of(const std::vector<Scalar>& parts) {
  Scalar total = 0;
  for (Scalar p : parts) total += p;
  return total;
}

}  // namespace detail
}  // namespace attnscope::composition
