// attnscope/capacity/head_profile.hpp — one attention head's capacity statistics over its query rows, as in the
// experimental protocol of docs/theory/capacity.md §3 (Algs 1–4, arXiv:2508.17821): every query row t with its visible
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

namespace attnscope::capacity {

/// What to do with a query row that has n <= N visible keys (docs/theory/capacity.md §3.1, [derived]).
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
  bool with_other_reading = true;  // also compute d~ in the other reading (one more O(n d) pass per row)
};

/// Per-row Eq. 7 distance, Eq. 10 main sum and Eq. 9 bound of one head, with their means over the rows used.
struct DistanceRows {
  std::vector<Index> rows;                  // query rows used
  std::vector<double> true_distance;        // d~ for I_N = top-N of the row, in options.reading
  std::vector<double> other_reading;        // d~ in the other reading of Eq. 7 (empty unless with_other_reading)
  std::vector<double> expectation;          // main sum (Eq. 10 candidate)
  std::vector<double> bound;                // d_max (empty when with_bound is false)
  double mean_true = std::numeric_limits<double>::quiet_NaN();
  double mean_other_reading = std::numeric_limits<double>::quiet_NaN();
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

/// Validates one head's attention (L_q × L_k, read in place in its own scalar) and values (L_k × d).
template <class Attention, class DerivedValues>
void require_head(const char* function, const Attention& attention, const Eigen::MatrixBase<DerivedValues>& values,
                  const Visibility& visibility, Index count) {
  attnscope::detail::require_nonempty(function, attention);
  attnscope::detail::require_nonempty(function, values);
  visibility.validate(function, attention.rows(), attention.cols());
  if (values.rows() != attention.cols())
    attnscope::detail::throw_invalid_argument(function, "attention has ", attention.cols(), " keys but values have ",
                                              values.rows(), " rows");
  if (count < 1) attnscope::detail::throw_invalid_argument(function, "N must be >= 1, got ", count);
  attnscope::detail::require_finite(function, values);
  for (Index i = 0; i < attention.rows(); ++i)
    for (Index j = 0; j < attention.cols(); ++j) {
      const double weight = static_cast<double>(attention(i, j));
      if (visibility.visible(i, j, attention.cols()) && (!std::isfinite(weight) || weight < 0))
        attnscope::detail::throw_invalid_argument(function, "attention weight ", weight, " at row ", i, ", column ", j,
                               " is not finite and >= 0");
    }
}

/// One query row restricted to its visible keys, with its keys ranked once by weight.
struct RowInstance {
  std::vector<Index> keys;            // original key indices
  Vector<double> weights;             // α over the visible keys
  RowMatrix<double> embeddings;       // x_i of the visible keys
  std::vector<Index> order;           // the top-K local indices by descending weight, ties to the lower index
  std::vector<Index> selected, rest;  // local indices of I_N and of the other keys
};

/// Gathers row `row` (visible keys, weights, embeddings; converted to double, in which the row's sums over tokens
/// accumulate) and ranks its `ranked` heaviest keys.
template <class Attention>
void gather_row(const Attention& attention, const RowMatrix<double>& embeddings, const Visibility& visibility,
                Index row, Index ranked, RowInstance& instance) {
  const Index cols = attention.cols();
  instance.keys.clear();
  if (visibility.is_prefix()) {
    const Index visible = visibility.prefix_length(row, cols);
    for (Index j = 0; j < visible; ++j) instance.keys.push_back(j);
  } else {
    for (Index j = 0; j < cols; ++j)
      if (visibility.visible(row, j, cols)) instance.keys.push_back(j);
  }
  const Index n = static_cast<Index>(instance.keys.size());
  instance.weights.resize(n);
  instance.embeddings.resize(n, embeddings.cols());
  for (Index k = 0; k < n; ++k) {
    instance.weights(k) = static_cast<double>(attention(row, instance.keys[static_cast<std::size_t>(k)]));
    instance.embeddings.row(k) = embeddings.row(instance.keys[static_cast<std::size_t>(k)]);
  }
  instance.order = top_n_unchecked(instance.weights.data(), n, std::min(n, ranked));
}

/// Splits a gathered row into the top-N and the rest (N_eff = n − 1 under clamp_n); false when the row is skipped.
template <class Instance>
bool select_top(Instance& instance, Index count, ShortRows short_rows) {
  const Index n = instance.weights.size();
  if (n <= count) {
    if (short_rows == ShortRows::skip || n < 2) return false;
    count = n - 1;
  }
  instance.selected.assign(instance.order.begin(), instance.order.begin() + count);  // count <= ranked keys
  std::vector<char> flags(static_cast<std::size_t>(n), 0);
  for (const Index i : instance.selected) flags[static_cast<std::size_t>(i)] = 1;
  instance.rest = complement(flags);
  return true;
}

/// d_1² of Theorem 1 for a selected row from a table of squared distances between keys.
template <class Instance>
double largest_cross_squared_distance(const RowMatrix<double>& squared_distances, const Instance& instance) {
  std::vector<Index> rest_keys;
  for (const Index i : instance.rest) rest_keys.push_back(instance.keys[static_cast<std::size_t>(i)]);
  Vector<double> outside(static_cast<Index>(rest_keys.size()));
  double largest = 0;
  for (const Index j : instance.selected) {  // per selected j, its table row over the non-selected keys
    const auto table_row = squared_distances.row(instance.keys[static_cast<std::size_t>(j)]);
    for (std::size_t k = 0; k < rest_keys.size(); ++k) outside(static_cast<Index>(k)) = table_row(rest_keys[k]);
    if (outside.size() > 0) largest = std::max(largest, outside.maxCoeff());
  }
  return largest;
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

/// Algs 1–2 for one head and several N at once (each row is gathered and ranked once): for every query row,
/// I_N = top-N of the attention row over its visible keys, x_i = values rows; per N returns d~ (Eq. 7) in the chosen
/// reading and in the other one, the main sum (Eq. 10) and d_max (Eq. 9) per row and their means. Parallel over rows
/// (deterministic). O(L_q·(L_k log L_k + |counts|·(L_k·d + (L_k−N)·N))) plus O(L_k²·d) for the distance table when
/// with_bound. Throws on empty input, shape mismatch, mask mismatch/fully masked rows, non-finite or negative visible
/// weights, non-finite values, an N < 1.
template <class DerivedAttention, class DerivedValues>
std::vector<DistanceRows> distance_rows_for_counts(const Eigen::MatrixBase<DerivedAttention>& attention,
                                                   const Eigen::MatrixBase<DerivedValues>& values,
                                                   const std::vector<Index>& counts, const Visibility& visibility = {},
                                                   const DistanceOptions& options = {}) {
  const char* function = "distance_rows";
  if (counts.empty()) attnscope::detail::throw_invalid_argument(function, "no N given");
  const Index smallest = *std::min_element(counts.begin(), counts.end());
  const Index largest = *std::max_element(counts.begin(), counts.end());
  const RowMatrixView<typename DerivedAttention::Scalar> weights(attention.derived());  // in place when row-major
  detail::require_head(function, weights, values, visibility, smallest);
  // values in double: the distance table below cancels (‖x_i‖² + ‖x_j‖² − 2<x_i, x_j>) and the per-row sums over
  // tokens accumulate
  using Real = typename detail::dependent_double<DerivedValues>::type;
  const RowMatrix<Real> value_rows = values.template cast<Real>();
  RowMatrix<Real> squared_distances;
  if (options.with_bound) {  // ‖x_i − x_j‖² = ‖x_i‖² + ‖x_j‖² − 2<x_i, x_j>, clamped at 0
    const RowMatrix<Real> gram = value_rows * value_rows.transpose();
    const Vector<Real> norms = gram.diagonal();
    squared_distances = ((-2 * gram).colwise() + norms).rowwise() + norms.transpose();
    squared_distances = squared_distances.cwiseMax(0.0);
  }
  const DistanceReading other_reading = options.reading == DistanceReading::sum_of_norms
                                            ? DistanceReading::norm_of_sum
                                            : DistanceReading::sum_of_norms;
  const Index rows = weights.rows();
  const std::size_t grid = counts.size(), slots = grid * static_cast<std::size_t>(rows);
  std::vector<char> used(slots, 0);
  std::vector<double> true_distance(slots), other(slots), expectation(slots), bound(slots);
  attnscope::detail::for_each_row(rows, weights.cols() * value_rows.cols() * static_cast<Index>(grid), [&](Index row) {
    detail::RowInstance instance;
    detail::gather_row(weights, value_rows, visibility, row, largest, instance);
    for (std::size_t c = 0; c < grid; ++c) {
      if (!detail::select_top(instance, counts[c], options.short_rows)) continue;
      const std::size_t slot = c * static_cast<std::size_t>(rows) + static_cast<std::size_t>(row);
      used[slot] = 1;
      true_distance[slot] = detail::representation_distance_unchecked(
          instance.weights, instance.embeddings, instance.selected, instance.rest, options.reading);
      if (options.with_other_reading)
        other[slot] = detail::representation_distance_unchecked(instance.weights, instance.embeddings,
                                                                instance.selected, instance.rest, other_reading);
      expectation[slot] = detail::expected_distance_main_sum_unchecked(
          instance.weights, instance.embeddings, static_cast<Index>(instance.selected.size()), options.main_sum);
      if (options.with_bound)
        bound[slot] = detail::distance_upper_bound_from_diameter(
            instance.weights, instance.embeddings, instance.selected, instance.rest,
            std::sqrt(detail::largest_cross_squared_distance(squared_distances, instance)));
    }
  });
  std::vector<DistanceRows> results(grid);
  for (std::size_t c = 0; c < grid; ++c) {
    const auto first = static_cast<std::ptrdiff_t>(c * static_cast<std::size_t>(rows));
    const std::vector<char> used_here(used.begin() + first, used.begin() + first + rows);
    const auto part = [&](const std::vector<double>& all) {
      return detail::used_entries(used_here, std::vector<double>(all.begin() + first, all.begin() + first + rows));
    };
    DistanceRows& result = results[c];
    result.rows = detail::used_rows(used_here);
    result.true_distance = part(true_distance);
    if (options.with_other_reading) result.other_reading = part(other);
    result.expectation = part(expectation);
    if (options.with_bound) result.bound = part(bound);
    result.mean_true = detail::mean_of(result.true_distance);
    result.mean_other_reading = detail::mean_of(result.other_reading);
    result.mean_expectation = detail::mean_of(result.expectation);
    result.mean_bound = detail::mean_of(result.bound);
  }
  return results;
}

/// distance_rows_for_counts for a single N (Algs 1–2 for one head). Same cost per N and errors.
template <class DerivedAttention, class DerivedValues>
DistanceRows distance_rows(const Eigen::MatrixBase<DerivedAttention>& attention,
                           const Eigen::MatrixBase<DerivedValues>& values, Index count,
                           const Visibility& visibility = {}, const DistanceOptions& options = {}) {
  return distance_rows_for_counts(attention, values, std::vector<Index>{count}, visibility, options).front();
}

/// Alg. 4 for one head and several N at once: value vectors projected to the sphere of radius M, δ = their minimum
/// pairwise distance; per N and query row, N_s/N with r = min over non-selected tokens and Theorem 2's [derived]
/// lower/upper bounds (lower uses 0 when r = 0). O(L_k²·d + L_q·(L_k log L_k + |counts|·L_k·d)).
/// Throws as distance_rows_for_counts, and on M not finite and > 0 or a zero value vector.
template <class DerivedAttention, class DerivedValues>
std::vector<SeparabilityRows> separability_rows_for_counts(const Eigen::MatrixBase<DerivedAttention>& attention,
                                                           const Eigen::MatrixBase<DerivedValues>& values,
                                                           const std::vector<Index>& counts,
                                                           const Visibility& visibility = {},
                                                           const SeparabilityOptions& options = {}) {
  const char* function = "separability_rows";
  if (counts.empty()) attnscope::detail::throw_invalid_argument(function, "no N given");
  const Index smallest = *std::min_element(counts.begin(), counts.end());
  const Index largest = *std::max_element(counts.begin(), counts.end());
  const RowMatrixView<typename DerivedAttention::Scalar> weights(attention.derived());  // in place when row-major
  detail::require_head(function, weights, values, visibility, smallest);
  attnscope::detail::require_positive(function, "sphere radius M", options.sphere_radius);
  // projected in double: the per-row distances are sums over d compared by < against r
  const RowMatrix<double> sphere = project_to_sphere(values.template cast<double>(), options.sphere_radius);
  const double separation =
      sphere.rows() > 1 ? std::min(min_pairwise_distance(sphere), 2 * options.sphere_radius) : 0.0;
  const Index rows = weights.rows();
  const std::size_t grid = counts.size(), slots = grid * static_cast<std::size_t>(rows);
  std::vector<char> used(slots, 0);
  std::vector<double> fraction(slots), lower(slots), upper(slots);
  attnscope::detail::for_each_row(rows, weights.cols() * sphere.cols() * static_cast<Index>(grid), [&](Index row) {
    detail::RowInstance instance;
    detail::gather_row(weights, sphere, visibility, row, largest, instance);
    for (std::size_t c = 0; c < grid; ++c) {
      if (!detail::select_top(instance, counts[c], options.short_rows)) continue;
      const std::size_t slot = c * static_cast<std::size_t>(rows) + static_cast<std::size_t>(row);
      used[slot] = 1;
      const Separability counted = detail::separability_unchecked(instance.weights, instance.embeddings,
                                                                  instance.selected, instance.rest, options.boundary);
      fraction[slot] = counted.fraction;
      const Theorem2Bounds bounds = detail::theorem2_bounds_unchecked(instance.weights, instance.selected,
                                                                      options.sphere_radius, separation, counted.radius);
      lower[slot] = counted.radius > 0 ? bounds.lower : 0.0;
      upper[slot] = bounds.upper;
    }
  });
  std::vector<SeparabilityRows> results(grid);
  for (std::size_t c = 0; c < grid; ++c) {
    const auto first = static_cast<std::ptrdiff_t>(c * static_cast<std::size_t>(rows));
    const std::vector<char> used_here(used.begin() + first, used.begin() + first + rows);
    const auto part = [&](const std::vector<double>& all) {
      return detail::used_entries(used_here, std::vector<double>(all.begin() + first, all.begin() + first + rows));
    };
    SeparabilityRows& result = results[c];
    result.separation = separation;
    result.rows = detail::used_rows(used_here);
    result.fraction = part(fraction);
    result.lower = part(lower);
    result.upper = part(upper);
    result.mean_fraction = detail::mean_of(result.fraction);
    result.mean_lower = detail::mean_of(result.lower);
    result.mean_upper = detail::mean_of(result.upper);
  }
  return results;
}

/// separability_rows_for_counts for a single N (Alg. 4 for one head). Same cost per N and errors.
template <class DerivedAttention, class DerivedValues>
SeparabilityRows separability_rows(const Eigen::MatrixBase<DerivedAttention>& attention,
                                   const Eigen::MatrixBase<DerivedValues>& values, Index count,
                                   const Visibility& visibility = {}, const SeparabilityOptions& options = {}) {
  return separability_rows_for_counts(attention, values, std::vector<Index>{count}, visibility, options).front();
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
  options.with_other_reading = false;
  options.short_rows = ShortRows::skip;
  for (const Index count : n_grid)
    if (count < 1) attnscope::detail::throw_invalid_argument("critical_top_n_for_head", "N grid entry ", count, " < 1");
  std::vector<DistanceRows> per_count = distance_rows_for_counts(attention, values, n_grid, visibility, options);
  std::vector<Index> grid;
  std::vector<std::vector<double>> true_samples, expected_samples;
  for (std::size_t c = 0; c < n_grid.size(); ++c) {
    if (per_count[c].rows.empty()) break;
    grid.push_back(n_grid[c]);
    true_samples.push_back(std::move(per_count[c].true_distance));
    expected_samples.push_back(std::move(per_count[c].expectation));
  }
  if (grid.empty()) return CriticalTopN{};
  return critical_top_n(grid, true_samples, expected_samples, level);
}

}  // namespace attnscope::capacity
