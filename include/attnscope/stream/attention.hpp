// attnscope/stream/attention.hpp — one blockwise attention kernel: for blocks of query rows against all their visible
// keys it forms scale·Q·Kᵀ once (a GEMM into a per-thread strip), then per row the softmax with its log-partition and
// any requested statistics (max scaled logit, entropy, sink mass, max weight, top-k masses, exact ‖J‖₂), and the
// output softmax(scale·Q Kᵀ)·V as a GEMM of the probability strip with V. Scores and probabilities are written into
// the caller's buffers when asked (dense captures). Memory besides the caller's buffers: O(threads · block_rows · L)
// for the strips, plus (float32 on AVX2 + FMA) one packed copy of K and of V, never the L×L matrix.
#pragma once

#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/stream/detail/attention_kernel.hpp"
#include "attnscope/stream/statistics_types.hpp"

namespace attnscope::stream {

/// Writable row-major view (a matrix, or a block of columns of a wider row-major matrix) for attention_into.
template <class Scalar>
using RowMatrixSpan = detail::RowMatrixSpan<Scalar>;

/// output = softmax(scale·Q Kᵀ)·V over the keys options.visibility lets each query row see (Vaswani et al. 2017,
/// eq. 1), for Q [rows, d], K [keys, d], V [keys, dv] of one scalar type (float or double), written into `output`
/// (rows × dv). Fills the optional targets of `capture` from the same exponentials. options: visibility, scale (unset:
/// 1/√d), the statistics to compute (when capture.statistics is set), block_rows, threads. Rows are independent, so
/// results are bitwise identical for any thread count. Throws attnscope::invalid_argument naming `stream::attention`
/// for empty Q or K, Q/K of other widths, V with other than `keys` rows, an output of the wrong shape, NaN/Inf in Q or
/// K, a logit overflow, a scale not finite and > 0, a visibility that does not fit rows × keys (mask shape, window < 1,
/// key mask length, sink keys), a row with no visible key, and, with statistics, a sink key outside [0, keys) or a
/// top-k k ≤ 0; block_rows ≤ 0 or threads < 0. Cost O(rows · visible keys · (d + dv)) plus the statistics.
template <class Scalar>
void attention_into(const RowMatrixView<Scalar>& queries, const RowMatrixView<Scalar>& keys,
                    const RowMatrixView<Scalar>& values, RowMatrixSpan<Scalar> output,
                    const RowStatisticsOptions& options = {}, const AttentionCapture<Scalar>& capture = {}) {
  detail::attention_kernel<Scalar>("stream::attention", queries, keys, &values, &output, true, options, capture);
}

/// softmax(scale·Q Kᵀ)·V as a new rows × dv matrix; see attention_into (any dense Eigen expressions of one scalar).
template <class DerivedQ, class DerivedK, class DerivedV>
RowMatrix<typename DerivedQ::Scalar> attention(const Eigen::MatrixBase<DerivedQ>& queries,
                                               const Eigen::MatrixBase<DerivedK>& keys,
                                               const Eigen::MatrixBase<DerivedV>& values,
                                               const RowStatisticsOptions& options = {},
                                               const AttentionCapture<typename DerivedQ::Scalar>& capture = {}) {
  using Scalar = typename DerivedQ::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::stream::attention: Q must be float or double");
  static_assert(std::is_same<Scalar, typename DerivedK::Scalar>::value &&
                    std::is_same<Scalar, typename DerivedV::Scalar>::value,
                "attnscope::stream::attention: Q, K and V must have the same scalar type");
  RowMatrix<Scalar> output(queries.rows(), values.cols());
  attention_into<Scalar>(RowMatrixView<Scalar>(queries.derived()), RowMatrixView<Scalar>(keys.derived()),
                         RowMatrixView<Scalar>(values.derived()), RowMatrixSpan<Scalar>(output), options, capture);
  return output;
}

/// The scaled scores scale·Q Kᵀ at visible entries, −inf elsewhere, written into `scores` (resized to rows × keys),
/// by the same blocks as attention_into (for normalization maps other than softmax). Same errors as attention_into.
template <class Scalar>
void attention_scores(const RowMatrixView<Scalar>& queries, const RowMatrixView<Scalar>& keys,
                      RowMatrix<Scalar>& scores, const RowStatisticsOptions& options = {}) {
  AttentionCapture<Scalar> capture;
  capture.scores = &scores;
  detail::attention_kernel<Scalar>("stream::attention_scores", queries, keys, nullptr, nullptr, false, options,
                                   capture);
}

}  // namespace attnscope::stream
