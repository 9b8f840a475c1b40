// attnscope/logits/attention.hpp — the attention kernels of the fitting lab (docs/theory/logits.md and arXiv:2505.15548 "What the library
// must provide"): scaled logits S = s·QKᵀ, masked softmax and the softmax backward dS = A∘(dA − rowsum(dA∘A)), both
// through the normalize module's row kernels (softmax_row, softmax_vjp_row) over a Visibility.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/detail/gather_visible.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::logits {
namespace detail {

/// A = softmax over the visible keys of each row of the row-major logits S (the normalize module's vectorized row
/// kernel), masked entries exactly 0; `attention` may be the logits matrix itself. A row with a NaN/±inf logit
/// becomes NaN instead of throwing (a diverging fit is reported, not aborted). `parallel`: OpenMP over rows (for
/// one-off calls; the fitting loop runs serially since its per-step row work is too small to share).
template <class Scalar>
void softmax_rows(const RowMatrixView<Scalar>& logits, const Visibility& visibility, RowMatrix<Scalar>& attention,
                  bool parallel = true) {
  attnscope::detail::apply_rowwise_indexed(
      logits.data(), logits.rows(), logits.cols(), logits.outerStride(), visibility,
      [](Index, const Scalar* z, Index n, Scalar* p) {
        if (!attnscope::detail::try_softmax_row(z, n, Scalar(1), p))
          std::fill(p, p + n, std::numeric_limits<Scalar>::quiet_NaN());
      },
      attention, parallel);
}

/// dS = scale · A∘(dA − Σ_visible dA∘A) per row over the visible keys (the softmax VJP row kernel of the normalize
/// module), masked entries exactly 0. `parallel` as in softmax_rows.
template <class Scalar>
void softmax_backward_rows(const RowMatrixView<Scalar>& attention, const RowMatrixView<Scalar>& attention_gradient,
                           const Visibility& visibility, Scalar scale, RowMatrix<Scalar>& logit_gradient,
                           bool parallel = true) {
  const Index cols = attention.cols();
  attnscope::detail::apply_rowwise_indexed(
      attention.data(), attention.rows(), cols, attention.outerStride(), visibility,
      [&](Index i, const Scalar* p, Index n, Scalar* result) {
        const Scalar* g = attention_gradient.data() + i * attention_gradient.outerStride();
        Index first = 0, count = 0;
        if (attnscope::detail::visible_run(visibility, i, cols, first, count))
          return attnscope::detail::softmax_vjp_row(p, g + first, n, scale, result);
        std::vector<Scalar> gathered;  // p was gathered the same way
        attnscope::detail::gather_visible(g, i, cols, visibility, gathered);
        attnscope::detail::softmax_vjp_row(p, gathered.data(), n, scale, result);
      },
      logit_gradient, parallel);
}

}  // namespace detail

/// Scaled logits S = scale · Q Kᵀ (Eigen blocked GEMM); scale = 1/√d_h in attention. Q: n×d, K: m×d. O(n·m·d).
template <class QueryDerived, class KeyDerived>
RowMatrix<typename QueryDerived::Scalar> scaled_logits(const Eigen::MatrixBase<QueryDerived>& queries,
                                                       const Eigen::MatrixBase<KeyDerived>& keys,
                                                       typename QueryDerived::Scalar scale) {
  attnscope::detail::require_nonempty("scaled_logits", queries);
  attnscope::detail::require_nonempty("scaled_logits", keys);
  if (queries.cols() != keys.cols())
    attnscope::detail::throw_invalid_argument("scaled_logits", "queries have ", queries.cols(),
                                              " columns but keys have ", keys.cols());
  if (!std::isfinite(static_cast<double>(scale)))
    attnscope::detail::throw_invalid_argument("scaled_logits", "scale must be finite, got ", scale);
  attnscope::detail::require_finite("scaled_logits", queries);
  attnscope::detail::require_finite("scaled_logits", keys);
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
  // Views: row-major input of the attention's scalar type is read in place (cast<Scalar>() is then the matrix itself);
  // other layouts and expressions are evaluated once.
  const RowMatrixView<Scalar> a(attention.derived());
  const RowMatrixView<Scalar> da(attention_gradient.derived().template cast<Scalar>());
  attnscope::detail::require_nonempty("attention_backward", a);
  attnscope::detail::require_same_shape("attention_backward", "attention/gradient", a, da);
  attnscope::detail::require_finite("attention_backward", a);
  attnscope::detail::require_finite("attention_backward", da);
  visibility.validate("attention_backward", a.rows(), a.cols());
  RowMatrix<Scalar> logit_gradient;
  detail::softmax_backward_rows(a, da, visibility, Scalar(1), logit_gradient);
  return logit_gradient;
}

}  // namespace attnscope::logits
