// attnscope/capacity/head_profile.hpp — one attention head's capacity statistics over its query rows, as in the
// experimental protocol of normalization-limits §3 (Algs 1–4, arXiv:2508.17821): every query row t with its visible
// keys is one instance (weights α = attention row, embeddings x_i = value vectors of the visible keys); statistics are
// averaged over rows. Rows with no more visible keys than N are skipped (ShortRows::skip, [derived] default) or use
// N_eff = n − 1 (ShortRows::clamp_n).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/capacity/critical_top_n.hpp"
#include "attnscope/capacity/distance.hpp"
#include "attnscope/capacity/selection.hpp"
#include "attnscope/capacity/separability.hpp"
#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope {

/// What to do with a query row that has n <= N visible keys (normalization-limits §3.1, [derived]).
enum class ShortRows {
  skip,     // default: the row is left out (the non-selected set would be empty)
  clamp_n,  // use N_eff = n − 1 (rows with a single visible key are still skipped)
};

/// Options of distance_rows().
struct DistanceOptions {
  DistanceReading reading = DistanceReading::sum_of_norms;
  MainSum main_sum = MainSum::a;
  ShortRows short_rows = ShortRows::skip;
  bool with_bound = true;  // compute Theorem 1's d_max (O((n−N)·N) per row with a precomputed distance table)
};

/// Per-row Eq. 7 distance, Eq. 10 main sum and Eq. 9 bound of one head, with their means over the rows used.
struct DistanceRows {
  std::vector<Index> rows;                  // query rows used
  std::vector<double> true_distance;        // d~ for I_N = top-N of the row
  std::vector<double> expectation;          // main sum (Eq. 10 candidate)
  std::vector<double> bound;                // d_max (empty when with_bound is false)
  double mean_true = std::numeric_limits<double>::quiet_NaN();
  double mean_expectation = std::numeric_limits<double>::quiet_NaN();
  double mean_bound = std::numeric_limits<double>::quiet_NaN();
};

/// Options of separability_rows().
struct SeparabilityOptions {
  Boundary boundary = Boundary::strict;
  double sphere_radius = 1;  // M: value vectors are projected to the sphere of radius M (Alg. 4; [derived] M = 1)
  ShortRows short_rows = ShortRows::skip;
};

/// Per-row N_s/N and Theorem 2 bounds of one head on sphere-projected value vectors, with their means.
struct SeparabilityRows {
  std::vector<Index> rows;
  std::vector<double> fraction, lower, upper;
  double mean_fraction = std::numeric_limits<double>::quiet_NaN();
  double mean_lower = std::numeric_limits<double>::quiet_NaN();
  double mean_upper = std::numeric_limits<double>::quiet_NaN();
  double separation = 0;  // δ = min pairwise distance of the projected value vectors (all keys)
};

namespace detail {

/// Validated double copies of one head's attention (L_q × L_k) and values (L_k × d).
struct HeadData {
  RowMatrix<double> attention;
  RowMatrix<double> values;
};

template <class DerivedAttention, class DerivedValues>
HeadData head_data(const char* function, const Eigen::MatrixBase<DerivedAttention>& attention,
                   const Eigen::MatrixBase<DerivedValues>& values, const Visibility& visibility, Index count) {
  require_nonempty(function, attention);
  require_nonempty(function, values);
  visibility.validate(function, attention.rows(), attention.cols());
  if (values.rows() != attention.cols())
    throw_invalid_argument(function, "attention has ", attention.cols(), " keys but values have ", values.rows(),
                           " rows");
  if (count < 1) throw_invalid_argument(function, "N must be >= 1, got ", count);
  require_finite(function, values);
  HeadData data{attention.template cast<double>(), values.template cast<double>()};
  for (Index i = 0; i < data.attention.rows(); ++i)
    for (Index j = 0; j < data.attention.cols(); ++j)
      if (visibility.visible(i, j, data.attention.cols()) &&
          (!std::isfinite(data.attention(i, j)) || data.attention(i, j) < 0))
        throw_invalid_argument(function, "attention weight ", data.attention(i, j), " at row ", i, ", column ", j,
                               " is not finite and >= 0");
  return data;
}

/// One query row restricted to its visible keys.
struct RowInstance {
  std::vector<Index> keys;     // original key indices
  Vector<double> weights;      // α over the visible keys
  RowMatrix<double> embeddings;  // x_i of the visible keys
  std::vector<Index> selected, rest;  // local indices
};

/// Builds the instance of row `row` with N (or N_eff); returns false when the row is skipped.
inline bool row_instance(const HeadData& data, const RowMatrix<double>& embeddings, const Visibility& visibility,
                         Index row, Index count, ShortRows short_rows, RowInstance& instance) {
  const Index cols = data.attention.cols();
  instance.keys.clear();
  for (Index j = 0; j < cols; ++j)
    if (visibility.visible(row, j, cols)) instance.keys.push_back(j);
  const Index n = static_cast<Index>(instance.keys.size());
  if (n <= count) {
    if (short_rows == ShortRows::skip || n < 2) return false;
    count = n - 1;
  }
  instance.weights.resize(n);
  instance.embeddings.resize(n, embeddings.cols());
  for (Index k = 0; k < n; ++k) {
    instance.weights(k) = data.attention(row, instance.keys[static_cast<std::size_t>(k)]);
    instance.embeddings.row(k) = embeddings.row(instance.keys[static_cast<std::size_t>(k)]);
  }
  instance.selected = top_n_unchecked(instance.weights.data(), n, count);
  std::vector<char> flags(static_cast<std::size_t>(n), 0);
  for (const Index i : instance.selected) flags[static_cast<std::size_t>(i)] = 1;
  instance.rest = complement(flags);
  return true;
}

/// The entries of a per-row array for the rows flagged as used.
inline std::vector<double> used_entries(const std::vector<char>& used, const std::vector<double>& values) {
  std::vector<double> out;
  for (std::size_t row = 0; row < used.size(); ++row)
    if (used[row]) out.push_back(values[row]);
  return out;
}

/// The indices of the rows flagged as used.
inline std::vector<Index> used_rows(const std::vector<char>& used) {
  std::vector<Index> out;
  for (std::size_t row = 0; row < used.size(); ++row)
    if (used[row]) out.push_back(static_cast<Index>(row));
  return out;
}

/// Mean of a vector (NaN when empty).
inline double mean_of(const std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  double total = 0;
  for (const double value : values) total += value;
  return total / static_cast<double>(values.size());
}

}  // namespace detail

/// Algs 1–2 for one head: for every query row, I_N = top-N of the attention row over its visible keys, x_i = values
/// rows; returns d~ (Eq. 7), the main sum (Eq. 10) and d_max (Eq. 9) per row and their means. Parallel over rows
/// (deterministic). O(L_q·(L_k·d + (L_k−N)·N)) plus O(L_k²·d) for the distance table when with_bound.
/// Throws on empty input, shape mismatch, mask mismatch/fully masked rows, non-finite or negative visible weights,
/// non-finite values, N < 1.
template <class DerivedAttention, class DerivedValues>
DistanceRows distance_rows(const Eigen::MatrixBase<DerivedAttention>& attention,
                           const Eigen::MatrixBase<DerivedValues>& values, Index count,
                           const Visibility& visibility = {}, const DistanceOptions& options = {}) {
  const detail::HeadData data = detail::head_data("distance_rows", attention, values, visibility, count);
  RowMatrix<double> squared_distances;
  if (options.with_bound) {  // ‖x_i − x_j‖² = ‖x_i‖² + ‖x_j‖² − 2<x_i, x_j>, clamped at 0
    const RowMatrix<double> gram = data.values * data.values.transpose();
    const Vector<double> norms = gram.diagonal();
    squared_distances = ((-2 * gram).colwise() + norms).rowwise() + norms.transpose();
    squared_distances = squared_distances.cwiseMax(0.0);
  }
  const Index rows = data.attention.rows();
  std::vector<char> used(static_cast<std::size_t>(rows), 0);
  std::vector<double> true_distance(static_cast<std::size_t>(rows)), expectation(true_distance), bound(true_distance);
  detail::for_each_row(rows, data.attention.cols() * data.values.cols(), [&](Index row) {
    detail::RowInstance instance;
    if (!detail::row_instance(data, data.values, visibility, row, count, options.short_rows, instance)) return;
    const auto slot = static_cast<std::size_t>(row);
    used[slot] = 1;
    true_distance[slot] = detail::representation_distance_unchecked(instance.weights, instance.embeddings,
                                                                    instance.selected, instance.rest, options.reading);
    expectation[slot] = detail::expected_distance_main_sum_unchecked(
        instance.weights, instance.embeddings, static_cast<Index>(instance.selected.size()), options.main_sum);
    if (options.with_bound) {
      double largest = 0;  // d_1² from the table
      for (const Index i : instance.rest)
        for (const Index j : instance.selected)
          largest = std::max(largest, squared_distances(instance.keys[static_cast<std::size_t>(i)],
                                                        instance.keys[static_cast<std::size_t>(j)]));
      bound[slot] = detail::distance_upper_bound_from_diameter(instance.weights, instance.embeddings,
                                                               instance.selected, instance.rest, std::sqrt(largest));
    }
  });
  DistanceRows result;
  result.rows = detail::used_rows(used);
  result.true_distance = detail::used_entries(used, true_distance);
  result.expectation = detail::used_entries(used, expectation);
  if (options.with_bound) result.bound = detail::used_entries(used, bound);
  result.mean_true = detail::mean_of(result.true_distance);
  result.mean_expectation = detail::mean_of(result.expectation);
  result.mean_bound = detail::mean_of(result.bound);
  return result;
}

/// Alg. 4 for one head: values projected to the sphere of radius M, δ = their minimum pairwise distance; per query
/// row N_s/N with r = min over non-selected tokens and Theorem 2's [derived] lower/upper bounds (lower uses 0 when
/// r = 0). O(L_k²·d + L_q·L_k·d). Throws as distance_rows, and on M not finite and > 0 or a zero value vector.
template <class DerivedAttention, class DerivedValues>
SeparabilityRows separability_rows(const Eigen::MatrixBase<DerivedAttention>& attention,
                                   const Eigen::MatrixBase<DerivedValues>& values, Index count,
                                   const Visibility& visibility = {}, const SeparabilityOptions& options = {}) {
  const detail::HeadData data = detail::head_data("separability_rows", attention, values, visibility, count);
  detail::require_positive("separability_rows", "sphere radius M", options.sphere_radius);
  const RowMatrix<double> sphere = project_to_sphere(data.values, options.sphere_radius);
  SeparabilityRows result;
  result.separation =
      sphere.rows() > 1 ? std::min(min_pairwise_distance(sphere), 2 * options.sphere_radius) : 0.0;
  const Index rows = data.attention.rows();
  std::vector<char> used(static_cast<std::size_t>(rows), 0);
  std::vector<double> fraction(static_cast<std::size_t>(rows)), lower(fraction), upper(fraction);
  detail::for_each_row(rows, data.attention.cols() * data.values.cols(), [&](Index row) {
    detail::RowInstance instance;
    if (!detail::row_instance(data, sphere, visibility, row, count, options.short_rows, instance)) return;
    const auto slot = static_cast<std::size_t>(row);
    used[slot] = 1;
    const Separability counted = detail::separability_unchecked(instance.weights, instance.embeddings,
                                                                instance.selected, instance.rest, options.boundary);
    fraction[slot] = counted.fraction;
    const Theorem2Bounds bounds = detail::theorem2_bounds_unchecked(
        instance.weights, instance.selected, options.sphere_radius, result.separation, counted.radius);
    lower[slot] = counted.radius > 0 ? bounds.lower : 0.0;
    upper[slot] = bounds.upper;
  });
  result.rows = detail::used_rows(used);
  result.fraction = detail::used_entries(used, fraction);
  result.lower = detail::used_entries(used, lower);
  result.upper = detail::used_entries(used, upper);
  result.mean_fraction = detail::mean_of(result.fraction);
  result.mean_lower = detail::mean_of(result.lower);
  result.mean_upper = detail::mean_of(result.upper);
  return result;
}

/// Alg. 3 for a single head ([derived]: the paper's samples run over heads; here they run over the head's query rows):
/// for each N of the grid, KS-test the per-row true distances against the per-row main sums; first N with p > level.
/// Rows with n <= N visible keys are skipped at that N; an N where no row remains ends the search (critical N = −1
/// unless found before). O(|grid|·L_q·L_k·d). Throws as distance_rows and critical_top_n.
template <class DerivedAttention, class DerivedValues>
CriticalTopN critical_top_n_for_head(const Eigen::MatrixBase<DerivedAttention>& attention,
                                     const Eigen::MatrixBase<DerivedValues>& values,
                                     const std::vector<Index>& n_grid, double level,
                                     const Visibility& visibility = {}, DistanceOptions options = {}) {
  options.with_bound = false;
  options.short_rows = ShortRows::skip;
  std::vector<Index> grid;
  std::vector<std::vector<double>> true_samples, expected_samples;
  for (const Index count : n_grid) {
    if (count < 1) detail::throw_invalid_argument("critical_top_n_for_head", "N grid entry ", count, " < 1");
    DistanceRows rows = distance_rows(attention, values, count, visibility, options);
    if (rows.rows.empty()) break;
    grid.push_back(count);
    true_samples.push_back(std::move(rows.true_distance));
    expected_samples.push_back(std::move(rows.expectation));
  }
  if (grid.empty()) return CriticalTopN{};
  return critical_top_n(grid, true_samples, expected_samples, level);
}

}  // namespace attnscope
