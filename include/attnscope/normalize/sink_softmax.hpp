// attnscope/normalize/sink_softmax.hpp — softmax with an extra sink logit k (Miller, "Attention Is Off By One",
// 2023; learned per-head sinks as in gpt-oss): p_i = e^{z_i}/(e^k + Σ_j e^{z_j}), so Σp < 1 (docs/theory/normalization-maps.md §4.9).
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/row_helpers.hpp"

namespace attnscope {
namespace detail {

/// One row of sink softmax, evaluated stably with m = max(k, max_i z_i) (ggml soft_max with sinks).
template <class Scalar>
void sink_softmax_row(const Scalar* logits, Index n, Scalar sink_logit, Scalar* out) {
  Scalar max_value = sink_logit;
  for (Index j = 0; j < n; ++j) max_value = logits[j] > max_value ? logits[j] : max_value;
  Scalar sum = std::exp(sink_logit - max_value);
  for (Index j = 0; j < n; ++j) {
    out[j] = std::exp(logits[j] - max_value);
    sum += out[j];
  }
  const Scalar inverse = Scalar(1) / sum;
  for (Index j = 0; j < n; ++j) out[j] *= inverse;
}

/// Linearization of sink softmax: J = diag(p) − ppᵀ with Σp < 1 [derived, docs/theory/normalization-maps.md §4.9].
template <class Scalar>
RowLinearization<Scalar> linearize_sink_softmax(const Scalar* logits, Index n, Scalar sink_logit) {
  return linearize_with<Scalar>(
      n, [&](Scalar* out) { sink_softmax_row(logits, n, sink_logit, out); },
      [](const std::vector<Scalar>& p) { return scaled_diagonal_minus_rank_one(p, Scalar(1), Scalar(1)); });
}

/// Throws unless the sink logit is finite.
inline void require_finite_sink(const char* function, double sink_logit) {
  if (!std::isfinite(sink_logit)) throw_invalid_argument(function, "sink_logit must be finite, got ", sink_logit);
}

}  // namespace detail

/// Softmax with a sink: p_i = e^{z_i}/(e^{sink_logit} + Σ_j e^{z_j}) over the visible keys; sink_logit = 0 is the
/// off-by-one softmax₁ (Miller 2023). Rows sum to 1 − e^{k}/(e^{k} + Σe^{z}) < 1 (the rest is the sink's weight,
/// which may round to 0 in floating point when the sink is far below the logits). O(n) per row.
/// Throws attnscope::invalid_argument for a non-finite sink_logit and on bad logits as the other maps.
template <class Derived>
RowMatrix<typename Derived::Scalar> softmax_with_sink(const Eigen::MatrixBase<Derived>& logits,
                                                      typename Derived::Scalar sink_logit = 0,
                                                      const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  detail::require_finite_sink("softmax_with_sink", static_cast<double>(sink_logit));
  return detail::map_rows("softmax_with_sink", logits, visibility, [sink_logit](const Scalar* z, Index n, Scalar* p) {
    detail::sink_softmax_row(z, n, sink_logit, p);
  });
}

}  // namespace attnscope
