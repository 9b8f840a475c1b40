// attnscope/capacity/distance.hpp — representation distance between the top-N context vector and the non-selected
// tokens (arXiv:2508.17821 Eq. 7), its expectation under a uniformly random N-subset (Eq. 8, Theorem 1.2 main sum)
// and Theorem 1's fixed-set upper bound (Eq. 9, [derived] coefficients). arXiv:2508.17821.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "attnscope/capacity/selection.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::capacity {

/// The two readings of Eq. 7 (the paper's display formula was lost; docs/theory/capacity.md §1).
enum class DistanceReading {
  sum_of_norms,  // [derived, default] d~ = Σ_{i∉I_N} ‖α_i x_i − s‖₂ ("cumulative"; grows linearly in L)
  norm_of_sum,   // [secondary] d~ = ‖Σ_{i∉I_N} α_i x_i − s‖₂
};

/// Candidate main sums of Theorem 1.2 (Eq. 10), both [derived].
enum class MainSum {
  a,  // ((L−N)/L)·Σ_i ‖α_i x_i − s̄‖₂ with s̄ = (N/L)·Σ_i α_i x_i (indicators replaced by their expectation)
  b,  // ((L−N)/L)·Σ_i ‖α_i x_i‖₂
};

namespace detail {

/// Eq. 7 for one row: distance between s = Σ_{selected} α_i x_i and the tokens in `rest` (no validation); embeddings
/// of any scalar read in place, sums over tokens in double.
template <class Embeddings>
double representation_distance_unchecked(const Vector<double>& weights, const Embeddings& embeddings,
                                         const std::vector<Index>& selected, const std::vector<Index>& rest,
                                         DistanceReading reading) {
  const Vector<double> context = context_vector_unchecked(weights, embeddings, selected);
  if (reading == DistanceReading::norm_of_sum) {
    Vector<double> outside = -context;
    for (const Index i : rest) outside += weights(i) * embedding_row(embeddings, i);
    return outside.norm();  // [secondary] ‖Σ_{i∉I_N} α_i x_i − s‖
  }
  double total = 0;
  for (const Index i : rest) total += (weights(i) * embedding_row(embeddings, i) - context).norm();  // [derived]
  return total;
}

/// Theorem 1.1 bound for one row given d_1 (no validation):
/// (1−ᾱ_N)·d_1 + [(1−ᾱ_N) + (L−N)·ᾱ_N]·max_{j∈I_N}‖x_j‖, with 1−ᾱ_N computed as Σ_{i∉I_N} α_i ([derived]).
template <class Embeddings>
double distance_upper_bound_from_diameter(const Vector<double>& weights, const Embeddings& embeddings,
                                          const std::vector<Index>& selected, const std::vector<Index>& rest,
                                          double largest_cross_distance) {
  double selected_mass = 0, rest_mass = 0, largest_selected_norm = 0;
  for (const Index j : selected) {
    selected_mass += weights(j);
    largest_selected_norm = std::max(largest_selected_norm, embedding_row(embeddings, j).norm());
  }
  for (const Index i : rest) rest_mass += weights(i);
  return rest_mass * largest_cross_distance +
         (rest_mass + static_cast<double>(rest.size()) * selected_mass) * largest_selected_norm;
}

/// d_1 = max_{i∈rest, j∈selected} ‖x_i − x_j‖ (Theorem 1 proof), O(|rest|·N·d); 0 when rest is empty.
template <class Embeddings>
double largest_cross_distance(const Embeddings& embeddings, const std::vector<Index>& selected,
                              const std::vector<Index>& rest) {
  double largest = 0;
  for (const Index i : rest)
    for (const Index j : selected)
      largest = std::max(largest, (embedding_row(embeddings, i) - embedding_row(embeddings, j)).squaredNorm());
  return std::sqrt(largest);
}

/// Eq. 10 candidate main sums for one row of L tokens and N selected (no validation).
template <class Embeddings>
double expected_distance_main_sum_unchecked(const Vector<double>& weights, const Embeddings& embeddings, Index count,
                                            MainSum variant) {
  const double length = static_cast<double>(weights.size());
  const double excluded_fraction = (length - static_cast<double>(count)) / length;  // P(i ∉ I_N) = (L−N)/L
  double total = 0;
  if (variant == MainSum::b) {
    for (Index i = 0; i < weights.size(); ++i) total += weights(i) * embedding_row(embeddings, i).norm();
    return excluded_fraction * total;
  }
  const Vector<double> mean_context = (static_cast<double>(count) / length) *
                                      (embeddings.transpose().template cast<double>() * weights);  // s̄ = (N/L)Σ α_i x_i
  for (Index i = 0; i < weights.size(); ++i) total += (weights(i) * embedding_row(embeddings, i) - mean_context).norm();
  return excluded_fraction * total;
}

/// C(n, k) as a double (exact below 2^53 for the sizes used here).
template <class Integer>
double binomial(Integer n, Integer k) {
  double result = 1;
  for (Index i = 1; i <= k; ++i) result = result * static_cast<double>(n - k + i) / static_cast<double>(i);
  return std::round(result);
}

}  // namespace detail

/// Representation distance of Eq. 7 between s = Σ_{i∈selected} α_i x_i and the non-selected tokens, in the chosen
/// reading (default sum_of_norms). Embeddings: one token per row (L × d). O(L d). Empty rest gives 0 (Cor. 2(ii)).
/// Throws on bad weights/embeddings, mismatched rows, empty/repeated/out-of-range selection.
template <class DerivedWeights, class DerivedEmbeddings>
double representation_distance(const Eigen::MatrixBase<DerivedWeights>& weights,
                               const Eigen::MatrixBase<DerivedEmbeddings>& embeddings,
                               const std::vector<Index>& selected,
                               DistanceReading reading = DistanceReading::sum_of_norms) {
  const Vector<double> w = detail::weight_vector("representation_distance", weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());  // in place when row-major
  detail::require_embeddings("representation_distance", x, w.size());
  const auto flags = detail::selection_flags("representation_distance", selected, w.size());
  return detail::representation_distance_unchecked(w, x, selected, detail::complement(flags), reading);
}

/// Eq. 7 with I_N = top_n(weights, N) (ties to the lower index). O(L log N + L d). Throws as above, and on N ∉ [1, L].
template <class DerivedWeights, class DerivedEmbeddings>
double top_n_distance(const Eigen::MatrixBase<DerivedWeights>& weights,
                      const Eigen::MatrixBase<DerivedEmbeddings>& embeddings, Index count,
                      DistanceReading reading = DistanceReading::sum_of_norms) {
  const Vector<double> w = detail::weight_vector("top_n_distance", weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());
  detail::require_embeddings("top_n_distance", x, w.size());
  detail::require_selection_size("top_n_distance", count, w.size());
  const auto selected = detail::top_n_unchecked(w.data(), w.size(), count);
  return detail::representation_distance_unchecked(
      w, x, selected, detail::complement(detail::selection_flags("top_n_distance", selected, w.size())), reading);
}

/// E[d~] under I_N ~ Uniform(N-subsets of the L tokens) (Eq. 8) by Monte Carlo with `samples` draws (partial
/// Fisher–Yates, Random::shuffle_prefix, with attnscope::Random(seed)); deterministic for a seed. O(samples·L d).
/// Standard error ~ sd/√samples. Throws as representation_distance, on N ∉ [1, L] or samples < 1.
template <class DerivedWeights, class DerivedEmbeddings>
double expected_distance_monte_carlo(const Eigen::MatrixBase<DerivedWeights>& weights,
                                     const Eigen::MatrixBase<DerivedEmbeddings>& embeddings, Index count,
                                     Index samples, std::uint64_t seed,
                                     DistanceReading reading = DistanceReading::sum_of_norms) {
  const char* function = "expected_distance_monte_carlo";
  const Vector<double> w = detail::weight_vector(function, weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());
  detail::require_embeddings(function, x, w.size());
  const Index length = w.size();
  detail::require_selection_size(function, count, length);
  if (samples < 1) attnscope::detail::throw_invalid_argument(function, "samples must be >= 1, got ", samples);
  Random random(seed);
  std::vector<Index> order(static_cast<std::size_t>(length));
  double total = 0;
  for (Index sample = 0; sample < samples; ++sample) {
    for (Index i = 0; i < length; ++i) order[static_cast<std::size_t>(i)] = i;
    random.shuffle_prefix(order, static_cast<std::size_t>(count));  // order[0..count) is a uniform N-subset
    const std::vector<Index> selected(order.begin(), order.begin() + count);
    const std::vector<Index> rest(order.begin() + count, order.end());
    total += detail::representation_distance_unchecked(w, x, selected, rest, reading);
  }
  return total / static_cast<double>(samples);
}

/// E[d~] under a uniform N-subset by enumerating all C(L, N) subsets (test oracle). O(C(L,N)·L d).
/// Throws as above and when C(L, N) > max_subsets.
template <class DerivedWeights, class DerivedEmbeddings>
double expected_distance_exhaustive(const Eigen::MatrixBase<DerivedWeights>& weights,
                                    const Eigen::MatrixBase<DerivedEmbeddings>& embeddings, Index count,
                                    DistanceReading reading = DistanceReading::sum_of_norms,
                                    double max_subsets = 1e6) {
  const char* function = "expected_distance_exhaustive";
  const Vector<double> w = detail::weight_vector(function, weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());
  detail::require_embeddings(function, x, w.size());
  const Index length = w.size();
  detail::require_selection_size(function, count, length);
  const double subsets = detail::binomial(length, count);
  if (subsets > max_subsets)
    attnscope::detail::throw_invalid_argument(function, "C(", length, ", ", count, ") = ", subsets,
                                              " subsets exceed max_subsets = ", max_subsets);
  std::vector<Index> selected(static_cast<std::size_t>(count));
  for (Index i = 0; i < count; ++i) selected[static_cast<std::size_t>(i)] = i;
  double total = 0;
  double visited = 0;
  while (true) {
    std::vector<char> flags(static_cast<std::size_t>(length), 0);
    for (const Index i : selected) flags[static_cast<std::size_t>(i)] = 1;
    total += detail::representation_distance_unchecked(w, x, selected, detail::complement(flags), reading);
    visited += 1;
    Index position = count - 1;  // next combination in lexicographic order
    while (position >= 0 && selected[static_cast<std::size_t>(position)] == length - count + position) --position;
    if (position < 0) break;
    ++selected[static_cast<std::size_t>(position)];
    for (Index k = position + 1; k < count; ++k)
      selected[static_cast<std::size_t>(k)] = selected[static_cast<std::size_t>(k - 1)] + 1;
  }
  return total / visited;
}

/// Main sum of Theorem 1.2 (Eq. 10 candidates, [derived]): MainSum::a = ((L−N)/L)·Σ_i ‖α_i x_i − s̄‖, s̄ = (N/L)Σ α_i x_i;
/// MainSum::b = ((L−N)/L)·Σ_i ‖α_i x_i‖. Approximates E[d~] for the sum_of_norms reading. O(L d).
template <class DerivedWeights, class DerivedEmbeddings>
double expected_distance_main_sum(const Eigen::MatrixBase<DerivedWeights>& weights,
                                  const Eigen::MatrixBase<DerivedEmbeddings>& embeddings, Index count,
                                  MainSum variant = MainSum::a) {
  const Vector<double> w = detail::weight_vector("expected_distance_main_sum", weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());
  detail::require_embeddings("expected_distance_main_sum", x, w.size());
  detail::require_selection_size("expected_distance_main_sum", count, w.size());
  return detail::expected_distance_main_sum_unchecked(w, x, count, variant);
}

/// Theorem 1.1 fixed-set upper bound "d_max" (Eq. 9, [derived] coefficients):
/// d~ <= (1−ᾱ_N)·d_1 + [(1−ᾱ_N) + (L−N)·ᾱ_N]·max_{j∈I_N}‖x_j‖₂, d_1 = max_{i∉I_N, j∈I_N}‖x_i − x_j‖,
/// ᾱ_N = Σ_{j∈I_N} α_j, 1−ᾱ_N taken as Σ_{i∉I_N} α_i. Holds for any non-negative weights, for sum_of_norms always and
/// for norm_of_sum when N < L (with N = L that reading is ‖s‖ while the bound is 0).
/// O((L−N)·N·d). Throws as representation_distance.
template <class DerivedWeights, class DerivedEmbeddings>
double distance_upper_bound(const Eigen::MatrixBase<DerivedWeights>& weights,
                            const Eigen::MatrixBase<DerivedEmbeddings>& embeddings,
                            const std::vector<Index>& selected) {
  const Vector<double> w = detail::weight_vector("distance_upper_bound", weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());
  detail::require_embeddings("distance_upper_bound", x, w.size());
  const auto rest = detail::complement(detail::selection_flags("distance_upper_bound", selected, w.size()));
  return detail::distance_upper_bound_from_diameter(w, x, selected, rest,
                                                    detail::largest_cross_distance(x, selected, rest));
}

}  // namespace attnscope::capacity
