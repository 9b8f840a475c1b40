// attnscope/logits/attention.hpp — the attention kernels of the fitting lab (docs/theory/logits.md and arXiv:2505.15548 "What the library
// must provide"): scaled logits S = s·QKᵀ, row-stable masked softmax over per-row visible-key lists, and the softmax
// backward dS = A∘(dA − rowsum(dA∘A)).
#pragma once

#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::logits {
namespace detail {
using namespace attnscope::detail;  // the core checks and row loops, as detail:: inside this module
}  // namespace detail

namespace detail {

/// Visible keys of every row in compressed-row form: columns[row_start[i] .. row_start[i+1]) ascending.
struct VisibleKeys {
  Index rows = 0, cols = 0;
  std::vector<Index> row_start, columns;
  bool causal_prefix = false;  // row i sees exactly keys 0..i (square, causal with offset 0)

  Index count(Index row) const { return row_start[static_cast<std::size_t>(row + 1)] - row_start[static_cast<std::size_t>(row)]; }
  const Index* begin(Index row) const { return columns.data() + row_start[static_cast<std::size_t>(row)]; }
  Index total() const { return static_cast<Index>(columns.size()); }
};

/// Builds the visible-key lists of a validated visibility.
inline VisibleKeys visible_keys(const Visibility& visibility, Index rows, Index cols) {
  VisibleKeys keys;
  keys.rows = rows;
  keys.cols = cols;
  keys.row_start.reserve(static_cast<std::size_t>(rows + 1));
  keys.row_start.push_back(0);
  bool prefix = rows == cols;
  for (Index i = 0; i < rows; ++i) {
    for (Index j = 0; j < cols; ++j) {
      const bool visible = visibility.visible(i, j, cols);
      if (visible) keys.columns.push_back(j);
      if (visible != (j <= i)) prefix = false;
    }
    keys.row_start.push_back(static_cast<Index>(keys.columns.size()));
  }
  keys.causal_prefix = prefix;
  return keys;
}

/// attention(i, ·) = softmax over the visible keys of logits(i, ·) (max-subtracted); other entries are left as they
/// are (callers keep them 0). Causal-prefix rows run as contiguous vectorised segments. `parallel`: OpenMP over rows
/// (for one-off calls; the fitting loop runs serially since its per-step row work is too small to share).
template <class Scalar>
void masked_softmax_rows(const RowMatrix<Scalar>& logits, const VisibleKeys& keys, RowMatrix<Scalar>& attention,
                         bool parallel = true) {
  using Segment = Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
  using ConstSegment = Eigen::Map<const Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
  for_each_row(keys.rows, parallel ? keys.cols : 0, [&](Index i) {
    const Index count = keys.count(i);
    const Scalar* s = logits.data() + i * keys.cols;
    Scalar* a = attention.data() + i * keys.cols;
    if (keys.causal_prefix) {
      const ConstSegment z(s, count);
      Segment p(a, count);
      p = (z - z.maxCoeff()).exp();
      p *= Scalar(1) / p.sum();
      return;
    }
    const Index* column = keys.begin(i);
    Scalar row_max = s[column[0]];
    for (Index k = 1; k < count; ++k) row_max = s[column[k]] > row_max ? s[column[k]] : row_max;
    Scalar sum = 0;
    for (Index k = 0; k < count; ++k) sum += (a[column[k]] = std::exp(s[column[k]] - row_max));
    const Scalar inverse = Scalar(1) / sum;
    for (Index k = 0; k < count; ++k) a[column[k]] *= inverse;
  });
}

/// dS(i, ·) = scale · A∘(dA − Σ_visible dA∘A) on visible keys (softmax VJP); other entries are left as they are.
template <class Scalar>
void attention_backward_rows(const RowMatrix<Scalar>& attention, const RowMatrix<Scalar>& attention_gradient,
                             const VisibleKeys& keys, Scalar scale, RowMatrix<Scalar>& logit_gradient,
                             bool parallel = true) {
  using Segment = Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
  using ConstSegment = Eigen::Map<const Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
  for_each_row(keys.rows, parallel ? keys.cols : 0, [&](Index i) {
    const Index count = keys.count(i);
    const Scalar* a = attention.data() + i * keys.cols;
    const Scalar* da = attention_gradient.data() + i * keys.cols;
    Scalar* ds = logit_gradient.data() + i * keys.cols;
    if (keys.causal_prefix) {
      const ConstSegment p(a, count), dp(da, count);
      Segment(ds, count) = scale * p * (dp - (dp * p).sum());
      return;
    }
    const Index* column = keys.begin(i);
    Scalar inner = 0;
    for (Index k = 0; k < count; ++k) inner += da[column[k]] * a[column[k]];
    for (Index k = 0; k < count; ++k) ds[column[k]] = scale * a[column[k]] * (da[column[k]] - inner);
  });
}

}  // namespace detail

/// Scaled logits S = scale · Q Kᵀ (Eigen blocked GEMM); scale = 1/√d_h in attention. Q: n×d, K: m×d. O(n·m·d).
template <class QueryDerived, class KeyDerived>
RowMatrix<typename QueryDerived::Scalar> scaled_logits(const Eigen::MatrixBase<QueryDerived>& queries,
                                                       const Eigen::MatrixBase<KeyDerived>& keys,
                                                       typename QueryDerived::Scalar scale) {
  detail::require_nonempty("scaled_logits", queries);
  detail::require_nonempty("scaled_logits", keys);
  if (queries.cols() != keys.cols())
    detail::throw_invalid_argument("scaled_logits", "queries have ", queries.cols(), " columns but keys have ",
                                   keys.cols());
  if (!std::isfinite(static_cast<double>(scale)))
    detail::throw_invalid_argument("scaled_logits", "scale must be finite, got ", scale);
  detail::require_finite("scaled_logits", queries);
  detail::require_finite("scaled_logits", keys);
  RowMatrix<typename QueryDerived::Scalar> logits;
  logits.noalias() = queries * keys.transpose();
  logits *= scale;
  return logits;
}

/// Softmax backward (vector–Jacobian product) per row over the visible keys: dS = A∘(dA − rowsum(dA∘A)), masked
/// entries 0. For cross-entropy L = −(1/n)Σ P log A (rows of P summing to 1) this equals (A − P)/n.
/// O(rows·cols).
template <class AttentionDerived, class GradientDerived>
RowMatrix<typename AttentionDerived::Scalar> attention_backward(const Eigen::MatrixBase<AttentionDerived>& attention,
                                                                const Eigen::MatrixBase<GradientDerived>& attention_gradient,
                                                                const Visibility& visibility = {}) {
  using Scalar = typename AttentionDerived::Scalar;
  detail::require_nonempty("attention_backward", attention);
  detail::require_same_shape("attention_backward", "attention/gradient", attention.rows(), attention.cols(),
                             attention_gradient.rows(), attention_gradient.cols());
  detail::require_finite("attention_backward", attention);
  detail::require_finite("attention_backward", attention_gradient);
  visibility.validate("attention_backward", attention.rows(), attention.cols());
  const RowMatrix<Scalar> a = attention, da = attention_gradient.template cast<Scalar>();
  RowMatrix<Scalar> logit_gradient = RowMatrix<Scalar>::Zero(a.rows(), a.cols());
  detail::attention_backward_rows(a, da, detail::visible_keys(visibility, a.rows(), a.cols()), Scalar(1),
                                  logit_gradient);
  return logit_gradient;
}

}  // namespace attnscope::logits
