// attnscope/capacity/selection.hpp — top-N selection and the context vector of the paper arXiv:2508.17821
// (Mudarisov et al., arXiv:2508.17821, §2: I_N = indices of the N largest weights, Eq. 6: s = Σ_{i∈I_N} α_i x_i).
// Inputs are read in place in their own scalar (no copies); the statistics (masses Σα, distances summed over tokens)
// are accumulated in double, whatever the input scalar.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::capacity {
namespace detail {

/// double, spelled as a type that depends on T: matrices of it inside a template are then instantiated only when the
/// template is, not in every translation unit that includes the header (compile time).
template <class T>
struct dependent_double {
  using type = double;
};

/// Copies a row or column vector of weights into a double vector (double: the masses Σα_i and the weighted sums of the
/// module accumulate over L tokens); throws unless it is a non-empty vector of finite, non-negative values.
template <class Derived>
Vector<double> weight_vector(const char* function, const Eigen::MatrixBase<Derived>& weights) {
  if (weights.rows() != 1 && weights.cols() != 1)
    attnscope::detail::throw_invalid_argument(function, "weights must be a row or column vector, got ", weights.rows(),
                                              "x", weights.cols());
  attnscope::detail::require_nonempty(function, weights);
  Vector<double> out(weights.size());
  Index k = 0;
  for (Index i = 0; i < weights.rows(); ++i)
    for (Index j = 0; j < weights.cols(); ++j) {
      const double value = static_cast<double>(weights(i, j));
      if (!std::isfinite(value) || value < 0)
        attnscope::detail::throw_invalid_argument(function, "weight ", k, " must be finite and >= 0, got ", value);
      out(k++) = value;
    }
  return out;
}

/// Checks embeddings (one row per token, read in place): throws unless finite, non-empty, and with `tokens` rows.
template <class Derived>
void require_embeddings(const char* function, const Eigen::MatrixBase<Derived>& embeddings, Index tokens) {
  attnscope::detail::require_nonempty(function, embeddings);
  if (embeddings.rows() != tokens)
    attnscope::detail::throw_invalid_argument(function, "embeddings have ", embeddings.rows(), " rows but there are ",
                                              tokens, " weights (one embedding row per token expected)");
  attnscope::detail::require_finite(function, embeddings);
}

/// Row i of an embedding matrix (any scalar) as a double column: the per-token terms α_i x_i are formed in double.
template <class Embeddings>
auto embedding_row(const Embeddings& embeddings, Index i) {
  return embeddings.row(i).transpose().template cast<double>();
}

/// Throws unless 1 <= count <= limit.
inline void require_selection_size(const char* function, Index count, Index limit) {
  if (count < 1 || count > limit)
    attnscope::detail::throw_invalid_argument(function, "N must be in [1, ", limit, "], got ", count);
}

/// Checks that `selected` holds distinct indices in [0, tokens), at least one; returns the membership flags.
inline std::vector<char> selection_flags(const char* function, const std::vector<Index>& selected, Index tokens) {
  if (selected.empty()) attnscope::detail::throw_invalid_argument(function, "the selected set is empty");
  std::vector<char> flags(static_cast<std::size_t>(tokens), 0);
  for (const Index i : selected) {
    if (i < 0 || i >= tokens)
      attnscope::detail::throw_invalid_argument(function, "selected index ", i, " outside [0, ", tokens, ")");
    if (flags[static_cast<std::size_t>(i)])
      attnscope::detail::throw_invalid_argument(function, "selected index ", i, " repeated");
    flags[static_cast<std::size_t>(i)] = 1;
  }
  return flags;
}

/// Indices in [0, tokens) not flagged.
inline std::vector<Index> complement(const std::vector<char>& flags) {
  std::vector<Index> rest;
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (!flags[i]) rest.push_back(static_cast<Index>(i));
  return rest;
}

/// Top-N indices of a weight array, by descending weight, ties broken by the lower index (no validation).
template <class Scalar>
std::vector<Index> top_n_unchecked(const Scalar* weights, Index size, Index count) {
  std::vector<Index> order(static_cast<std::size_t>(size));
  std::iota(order.begin(), order.end(), Index{0});
  const auto before = [weights](Index a, Index b) {
    return weights[a] > weights[b] || (weights[a] == weights[b] && a < b);
  };
  if (count < size) std::nth_element(order.begin(), order.begin() + (count - 1), order.end(), before);  // O(L)
  order.resize(static_cast<std::size_t>(count));
  std::sort(order.begin(), order.end(), before);  // O(N log N); `before` is a strict total order
  return order;
}

/// s = Σ_{i∈selected} α_i x_i in double (no validation); embeddings of any scalar, read in place.
template <class Embeddings>
Vector<double> context_vector_unchecked(const Vector<double>& weights, const Embeddings& embeddings,
                                        const std::vector<Index>& selected) {
  Vector<double> context = Vector<double>::Zero(embeddings.cols());
  for (const Index i : selected) context += weights(i) * embedding_row(embeddings, i);
  return context;
}

}  // namespace detail

/// Indices of the N largest weights (docs/theory/capacity.md §2, I_N), largest first; ties go to the lower index
/// ([derived] tie-break). O(L + N log N). Throws on non-finite/negative weights or N outside [1, L].
template <class Derived>
std::vector<Index> top_n(const Eigen::MatrixBase<Derived>& weights, Index count) {
  const Vector<double> w = detail::weight_vector("top_n", weights);
  detail::require_selection_size("top_n", count, w.size());
  return detail::top_n_unchecked(w.data(), w.size(), count);
}

/// Context vector s = Σ_{i∈I_N} α_i x_i (arXiv:2508.17821 Eq. 6); embeddings hold one token per row (L × d).
/// O(N d). Throws on bad weights/embeddings, row-count mismatch, empty, repeated or out-of-range indices.
template <class DerivedWeights, class DerivedEmbeddings>
Vector<double> context_vector(const Eigen::MatrixBase<DerivedWeights>& weights,
                              const Eigen::MatrixBase<DerivedEmbeddings>& embeddings,
                              const std::vector<Index>& selected) {
  const Vector<double> w = detail::weight_vector("context_vector", weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());  // in place when row-major
  detail::require_embeddings("context_vector", x, w.size());
  detail::selection_flags("context_vector", selected, w.size());
  return detail::context_vector_unchecked(w, x, selected);
}

}  // namespace attnscope::capacity
