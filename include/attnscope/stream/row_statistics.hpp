// attnscope/stream/row_statistics.hpp — exact per-query-row statistics of softmax(scale·q·Kᵀ) computed from Q and K
// without the L×L matrix, by the blockwise attention kernel of stream/attention.hpp without values: per block of
// query rows one GEMM into a per-thread strip, every row of the strip reduced at once (max, exp-and-sum, entropy, sink
// mass, max weight, exact ‖J‖₂, top-k mass). Memory is O(L·d) for the inputs plus O(threads · block_rows · L) for the
// strips, never O(L²). Rows are independent, so results are bitwise identical for any thread count.
#pragma once

#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/stream/attention.hpp"
#include "attnscope/stream/statistics_types.hpp"

namespace attnscope::stream {

/// Exact statistics of every query row of softmax(scale·Q Kᵀ) over the keys options.visibility lets it see (causal by
/// default; every key, a sliding window, a key mask, visible sink keys or an explicit mask), from Q [L, d] and K [L, d]
/// (float or double, any dense expression; row-major inputs, e.g. memory-mapped arrays, are read in place). Per row:
/// max scaled logit, log-partition, entropy, sink mass, max weight, top-k masses and the exact ‖diag p − ppᵀ‖₂
/// (docs/api/stream.md). Arithmetic is in the input scalar (GEMM, exp, secular solver); results are returned in double.
/// Memory: O(L·d) (plus a compacted copy of K when a key mask is given, and a packed copy for the products on
/// AVX2 + FMA) + threads · (block_rows + 2) · L scalars (strip,
/// row buffer, top-k candidates); never the L×L matrix. Identical results for any thread count. Throws
/// attnscope::invalid_argument for empty Q/K, a shape mismatch, NaN/Inf in Q or K, a logit overflow, a window ≤ 0, a
/// scale not finite and > 0, a sink key outside [0, L), a k ≤ 0, a key mask of length ≠ L, a row with no visible key,
/// block_rows ≤ 0 or threads < 0 — the message names the function and the value.
template <class DerivedQ, class DerivedK>
RowStatistics row_statistics(const Eigen::MatrixBase<DerivedQ>& queries, const Eigen::MatrixBase<DerivedK>& keys,
                             const RowStatisticsOptions& options = {}) {
  using Scalar = typename DerivedQ::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::stream::row_statistics: Q must be float or double");
  static_assert(std::is_same<Scalar, typename DerivedK::Scalar>::value,
                "attnscope::stream::row_statistics: Q and K must have the same scalar type");
  const char* function = "stream::row_statistics";
  const RowMatrixView<Scalar> q(queries.derived()), k(keys.derived());
  if (q.rows() == 0 || q.cols() == 0) detail::throw_invalid_argument(function, "empty Q (", q.rows(), "x", q.cols(), ")");
  if (k.rows() == 0 || k.cols() == 0) detail::throw_invalid_argument(function, "empty K (", k.rows(), "x", k.cols(), ")");
  if (q.rows() != k.rows() || q.cols() != k.cols())
    detail::throw_invalid_argument(function, "Q/K shape mismatch: ", q.rows(), "x", q.cols(), " vs ", k.rows(), "x",
                                   k.cols());
  RowStatistics out;
  AttentionCapture<Scalar> capture;
  capture.statistics = &out;
  detail::attention_kernel<Scalar>(function, q, k, nullptr, nullptr, true, options, capture);
  return out;
}

}  // namespace attnscope::stream
