// attnscope/normalize/row_helpers.hpp — shared plumbing of the normalization maps: visible-key gathering for
// row loops that need several inputs, the "diagonal plus low rank" Jacobian of one row (JVP, VJP, dense), and
// the softmax row kernel the maps build on.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::detail {

/// p = softmax(scale · z) for one contiguous row of n > 0 finite (already validated) logits, scale ≥ 0: the fast
/// vectorized row kernel of softmax.hpp; a single key, or scale 0 (SSMax with n = 1), gives the uniform row.
template <class Scalar>
void scaled_softmax_row(const Scalar* logits, Index n, Scalar scale, Scalar* out) {
  if (n == 1 || scale == 0) {
    for (Index j = 0; j < n; ++j) out[j] = Scalar(1) / Scalar(n);
    return;
  }
  softmax_row(logits, n, scale, out);
}

/// Column indices of the keys of `row` that are visible.
inline std::vector<Index> visible_columns(const Visibility& visibility, Index row, Index cols) {
  std::vector<Index> columns;
  columns.reserve(static_cast<std::size_t>(visibility.visible_count(row, cols)));
  for (Index j = 0; j < cols; ++j)
    if (visibility.visible(row, j, cols)) columns.push_back(j);
  return columns;
}

/// The entries of one row of a view at `columns` (e.g. its visible keys), converted to Out, as a contiguous vector.
template <class Out, class Scalar>
std::vector<Out> gather_columns(const RowMatrixView<Scalar>& matrix, Index row, const std::vector<Index>& columns) {
  std::vector<Out> values(columns.size());
  for (std::size_t k = 0; k < columns.size(); ++k) values[k] = static_cast<Out>(matrix(row, columns[k]));
  return values;
}

/// Writes a contiguous vector back to the visible entries of one row of `matrix`.
template <class Scalar>
void scatter_row(const std::vector<Scalar>& values, const std::vector<Index>& columns, Index row,
                 RowMatrix<Scalar>& matrix) {
  for (std::size_t k = 0; k < columns.size(); ++k) matrix(row, columns[k]) = values[k];
}

/// The Jacobian of one row of a normalization map in the form J = diag(diagonal) − Σ_k left_k right_kᵀ
/// (every map of the module has this form with at most three terms, docs/theory/normalization-maps.md §1-§4).
/// Applying J or Jᵀ costs O(n · (1 + terms)).
template <class Scalar>
struct DiagonalPlusLowRank {
  struct Term {
    std::vector<Scalar> left, right;
  };
  std::vector<Scalar> diagonal;
  std::vector<Term> terms;

  Index size() const { return static_cast<Index>(diagonal.size()); }

  /// out = J v (Jacobian-vector product).
  void apply(const Scalar* v, Scalar* out) const { apply_impl(v, out, false); }
  /// out = Jᵀ g (vector-Jacobian product).
  void apply_transpose(const Scalar* g, Scalar* out) const { apply_impl(g, out, true); }

  /// The dense n×n matrix.
  RowMatrix<Scalar> dense() const {
    const Index n = size();
    RowMatrix<Scalar> jacobian = RowMatrix<Scalar>::Zero(n, n);
    for (Index i = 0; i < n; ++i) jacobian(i, i) = diagonal[static_cast<std::size_t>(i)];
    for (const Term& term : terms)
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j)
          jacobian(i, j) -= term.left[static_cast<std::size_t>(i)] * term.right[static_cast<std::size_t>(j)];
    return jacobian;
  }

 private:
  void apply_impl(const Scalar* v, Scalar* out, bool transpose) const {
    const std::size_t n = diagonal.size();
    for (std::size_t i = 0; i < n; ++i) out[i] = diagonal[i] * v[i];
    for (const Term& term : terms) {
      const std::vector<Scalar>& contract = transpose ? term.left : term.right;
      const std::vector<Scalar>& expand = transpose ? term.right : term.left;
      Scalar dot = 0;
      for (std::size_t i = 0; i < n; ++i) dot += contract[i] * v[i];
      for (std::size_t i = 0; i < n; ++i) out[i] -= expand[i] * dot;
    }
  }
};

/// Output and Jacobian of a normalization map at one row of visible logits.
template <class Scalar>
struct RowLinearization {
  std::vector<Scalar> output;
  DiagonalPlusLowRank<Scalar> jacobian;
};

/// J = scale · (diag(w) − coupling · w wᵀ): the symmetric Jacobian shared by softmax (w = p, coupling = 1),
/// sink softmax (w = p, Σp < 1) and entmax/sparsemax (w = g, coupling = 1/Σg) (docs/theory/normalization-maps.md §1.2, §4.1, §4.9).
template <class Scalar>
DiagonalPlusLowRank<Scalar> scaled_diagonal_minus_rank_one(const std::vector<Scalar>& weights, Scalar coupling,
                                                           Scalar scale) {
  DiagonalPlusLowRank<Scalar> jacobian;
  jacobian.diagonal.resize(weights.size());
  typename DiagonalPlusLowRank<Scalar>::Term term{std::vector<Scalar>(weights.size()), weights};
  for (std::size_t i = 0; i < weights.size(); ++i) {
    jacobian.diagonal[i] = scale * weights[i];
    term.left[i] = scale * coupling * weights[i];
  }
  jacobian.terms.push_back(std::move(term));
  return jacobian;
}

/// Linearization from a row kernel `forward(Scalar* out)` writing the n outputs and `jacobian_of(output)`.
template <class Scalar, class Forward, class JacobianOf>
RowLinearization<Scalar> linearize_with(Index n, Forward&& forward, JacobianOf&& jacobian_of) {
  RowLinearization<Scalar> result;
  result.output.resize(static_cast<std::size_t>(n));
  forward(result.output.data());
  result.jacobian = jacobian_of(result.output);
  return result;
}

/// Linearization of p = softmax(scale · z): J = scale · (diag p − ppᵀ) (docs/theory/normalization-maps.md §4.1).
template <class Scalar>
RowLinearization<Scalar> linearize_scaled_softmax(const Scalar* logits, Index n, Scalar scale) {
  return linearize_with<Scalar>(
      n, [&](Scalar* out) { scaled_softmax_row(logits, n, scale, out); },
      [&](const std::vector<Scalar>& p) { return scaled_diagonal_minus_rank_one(p, Scalar(1), scale); });
}

/// Applies a row kernel `kernel(const Scalar* z, Index n, Scalar* out)` over visible keys, after validating the
/// logits; the common body of every forward map (masked entries exactly 0). Row-major input is read in place
/// (no copy); other expressions are evaluated once.
template <class Derived, class RowKernel>
RowMatrix<typename Derived::Scalar> map_rows(const char* function, const Eigen::MatrixBase<Derived>& logits,
                                             const Visibility& visibility, RowKernel&& kernel) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope: logits must be float or double");
  const RowMatrixView<Scalar> z(logits);
  validate_logit_rows(function, z.data(), z.rows(), z.cols(), z.outerStride(), visibility);
  RowMatrix<Scalar> out;
  apply_rowwise_indexed(
      z.data(), z.rows(), z.cols(), z.outerStride(), visibility,
      [&kernel](Index, const Scalar* row, Index n, Scalar* result) { kernel(row, n, result); }, out);
  return out;
}

}  // namespace attnscope::detail
