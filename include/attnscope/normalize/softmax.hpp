// attnscope/normalize/softmax.hpp — softmax with temperature, row-wise, with visibility.
// p_i = exp(z_i/T) / Σ_j exp(z_j/T) over the visible keys (docs/theory/normalization-maps.md §4.1).
// Rows run through the vectorized kernels of attnscope/kernels (max with fused finiteness check, fused exp-and-sum,
// scale: three passes over a row that stays in L1/L2, docs/theory/normalization-maps.md §6); softmax_row_reference is the plain
// scalar version kept beside it (tests compare the two).
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/kernels/exp_sum.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/scale_row.hpp"
#include "attnscope/kernels/stream_store.hpp"
#include "attnscope/normalize/detail/gather_visible.hpp"

namespace attnscope {
namespace detail {

/// Scalar reference: p = softmax(scale · z) for one contiguous row of n > 0 finite logits.
template <class Scalar>
void softmax_row_reference(const Scalar* logits, Index n, Scalar scale, Scalar* out) {
  Scalar max_value = logits[0];
  for (Index j = 1; j < n; ++j) max_value = logits[j] > max_value ? logits[j] : max_value;
  Scalar sum = 0;
  for (Index j = 0; j < n; ++j) {
    out[j] = std::exp(scale * (logits[j] - max_value));
    sum += out[j];
  }
  const Scalar inverse = Scalar(1) / sum;
  for (Index j = 0; j < n; ++j) out[j] *= inverse;
}

/// Fast softmax(scale · z) of one contiguous row (n > 0, scale finite and > 0): vectorized max with a fused
/// finiteness check, fused exp-and-sum, scale. Returns false, leaving `out` unspecified, if a logit is NaN or ±inf.
/// out may alias logits. Accuracy: within a few ULP of softmax_row_reference (exp ≤ 2 ULP, see kernels/exp.hpp).
template <class Scalar>
[[nodiscard]] bool try_softmax_row(const Scalar* logits, Index n, Scalar scale, Scalar* out) {
  const auto max = kernels::row_max(logits, n);
  if (!max.finite) return false;
  const Scalar sum = kernels::exp_shifted_sum(logits, n, max.max, scale, out);  // ≥ 1: the max contributes exp(0)
  kernels::scale_row(out, n, Scalar(1) / sum);
  return true;
}

/// Throws the error for the first non-finite visible logit of `row` (pointer to its first column).
template <class Scalar>
[[noreturn]] void throw_non_finite_logit(const char* function, const Scalar* values, Index row, Index cols,
                                         const Visibility& visibility) {
  for (Index j = 0; j < cols; ++j)
    if (visibility.visible(row, j, cols) && !std::isfinite(static_cast<double>(values[j])))
      throw_invalid_argument(function, "non-finite logit ", values[j], " at row ", row, ", column ", j);
  throw_invalid_argument(function, "non-finite logit at row ", row);
}

/// Fast softmax(scale · z) of one contiguous row; throws attnscope::invalid_argument naming the column of the first
/// NaN/±inf logit. For callers that already have a contiguous row (n > 0, scale finite and > 0).
template <class Scalar>
void softmax_row(const Scalar* logits, Index n, Scalar scale, Scalar* out) {
  if (try_softmax_row(logits, n, scale, out)) return;
  for (Index j = 0; j < n; ++j)
    if (!std::isfinite(static_cast<double>(logits[j])))
      throw_invalid_argument("softmax", "non-finite logit ", logits[j], " at position ", j, " of the row");
}

/// Softmax vector-Jacobian product of one contiguous row: out = scale · p∘(g − ⟨g, p⟩), i.e. Jᵀg for
/// J = scale·(diag p − ppᵀ), the Jacobian of p = softmax(scale·z) (docs/theory/normalization-maps.md §4.1). p are the softmax
/// outputs of the row (n > 0). out may alias g. O(n).
template <class Scalar>
void softmax_vjp_row(const Scalar* p, const Scalar* g, Index n, Scalar scale, Scalar* out) {
  using ConstSegment = Eigen::Map<const Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
  const ConstSegment probabilities(p, n), cotangent(g, n);
  const Scalar inner = (probabilities * cotangent).sum();
  Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>>(out, n) = scale * probabilities * (cotangent - inner);
}

/// True when the visible keys of `row` form one contiguous run [first, first + count) (always for prefix kinds;
/// for the other kinds, e.g. a sliding window, after one scan of the row), so row kernels can run in place.
inline bool visible_run(const Visibility& visibility, Index row, Index cols, Index& first, Index& count) {
  return visibility.contiguous_run(row, cols, first, count);
}

/// Applies kernel(row, const Scalar* z, Index n, Scalar* p) to the visible keys of every row of a row-major block
/// (data, rows × cols, outer stride) writing into `out` (rows × cols, resized if needed; it may be the very matrix
/// `data` points into); masked entries are set to exactly 0. Rows whose visible keys are one contiguous run (prefix
/// visibilities, banded masks) run in place, other mask rows gather into contiguous buffers. Rows run in parallel
/// unless `parallel` is false (for loops whose per-call work is too small to share); an exception from a row is
/// rethrown after the loop.
template <class Scalar, class RowKernel>
void apply_rowwise_indexed(const Scalar* data, Index rows, Index cols, Index stride, const Visibility& visibility,
                           RowKernel&& kernel, RowMatrix<Scalar>& out, bool parallel = true) {
  if (out.rows() != rows || out.cols() != cols) out.resize(rows, cols);
  const Index work_per_row = parallel ? cols : 0;
  for_each_row_rethrowing(rows, work_per_row, [&](Index i) {
    Scalar* row_out = out.data() + i * cols;
    Index first = 0, n = 0;
    if (visible_run(visibility, i, cols, first, n)) {
      kernel(i, data + i * stride + first, n, row_out + first);
      std::fill(row_out, row_out + first, Scalar(0));
      std::fill(row_out + first + n, row_out + cols, Scalar(0));
    } else {
      std::vector<Scalar> gathered, result;
      gather_visible(data + i * stride, i, cols, visibility, gathered);
      result.resize(gathered.size());
      kernel(i, gathered.data(), static_cast<Index>(gathered.size()), result.data());
      std::size_t k = 0;
      for (Index j = 0; j < cols; ++j) row_out[j] = visibility.visible(i, j, cols) ? result[k++] : Scalar(0);
    }
  });
}

/// Applies a row kernel `kernel(const Scalar* z, Index n, Scalar* p)` to the visible keys of every row;
/// masked entries are set to exactly 0. Gathers masked rows into a contiguous buffer.
template <class Scalar, class RowKernel>
RowMatrix<Scalar> apply_rowwise(const RowMatrix<Scalar>& logits, const Visibility& visibility, RowKernel&& kernel) {
  RowMatrix<Scalar> out;
  apply_rowwise_indexed(logits.data(), logits.rows(), logits.cols(), logits.cols(), visibility,
                        [&kernel](Index, const Scalar* z, Index n, Scalar* p) { kernel(z, n, p); }, out);
  return out;
}

/// The shape part of validate_logit_rows: non-empty, mask shape, no fully masked row (for row loops that check the
/// logits' finiteness themselves).
inline void validate_logit_shape(const char* function, Index rows, Index cols, const Visibility& visibility) {
  if (rows == 0 || cols == 0) throw_invalid_argument(function, "empty input (", rows, "x", cols, ")");
  visibility.validate(function, rows, cols);
}

/// Validates a row-major block of logits: non-empty, mask shape, no fully masked row, finite at visible entries
/// (vectorized check on prefix rows). Throws attnscope::invalid_argument naming the row and column.
template <class Scalar>
void validate_logit_rows(const char* function, const Scalar* data, Index rows, Index cols, Index stride,
                         const Visibility& visibility) {
  validate_logit_shape(function, rows, cols, visibility);
  for_each_row_rethrowing(rows, cols, [&](Index i) {
    const Scalar* row = data + i * stride;
    bool finite = true;
    if (visibility.is_prefix()) {
      finite = kernels::row_max(row, visibility.prefix_length(i, cols)).finite;
    } else {
      for (Index j = 0; j < cols; ++j)
        finite = finite && (!visibility.visible(i, j, cols) || std::isfinite(static_cast<double>(row[j])));
    }
    if (!finite) throw_non_finite_logit(function, row, i, cols, visibility);
  });
}

/// Validates logits for a normalization map, seen through a view (any outer stride): non-empty, finite at visible
/// entries, mask shape, no empty row.
template <class Scalar>
void validate_logits(const char* function, const RowMatrixView<Scalar>& logits, const Visibility& visibility) {
  validate_logit_rows(function, logits.data(), logits.rows(), logits.cols(), logits.outerStride(), visibility);
}

}  // namespace detail

/// Softmax with temperature T > 0 of each row over its visible keys written into `out` (resized to the shape of the
/// logits when it differs, otherwise its memory is reused; `out` may be the logits matrix itself for an in-place
/// softmax, but must not overlap it otherwise). Same formula, cost and errors as softmax(); after an exception the
/// contents of `out` are unspecified. Reusing `out` avoids allocating and first-touching a fresh result each call.
template <class Derived>
void softmax_into(const Eigen::MatrixBase<Derived>& logits, RowMatrix<typename Derived::Scalar>& out,
                  typename Derived::Scalar temperature = 1, const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::softmax: logits must be float or double");
  const char* function = "softmax";
  detail::require_positive(function, "temperature", temperature);
  const Scalar scale = Scalar(1) / temperature;
  if (!std::isfinite(static_cast<double>(scale)))
    detail::throw_invalid_argument(function, "temperature ", temperature, " is too small: 1/T overflows");
  const RowMatrixView<Scalar> z(logits.derived());
  detail::require_nonempty(function, z);
  visibility.validate(function, z.rows(), z.cols());
  const Index rows = z.rows(), cols = z.cols(), stride = z.outerStride();
  if (visibility.is_prefix()) {
    // Rows are prefixes: blocks of 64 rows through one L1-resident buffer, prefetching the next row (also across
    // blocks) during the exponentials, streaming stores for outputs larger than the cache with one fence per block
    // (docs/performance.md).
    if (out.rows() != rows || out.cols() != cols) out.resize(rows, cols);
    const bool streaming =
        static_cast<std::size_t>(out.size()) * sizeof(Scalar) >= kernels::streaming_store_threshold_bytes;
    constexpr Index block = 64;
    const Index blocks = (rows + block - 1) / block;
    // rows of at most 8 KiB: the max of the next row is taken in this row's scale pass (its loads ride along the
    // stores; 8% faster at 512 keys, 2% slower at 4096, docs/performance.md) — the same bits either way
    const bool max_in_scale_pass = static_cast<std::size_t>(cols) * sizeof(Scalar) <= 8192;
    detail::for_each_row_rethrowing(blocks, block * cols, [&](Index block_index) {
      Eigen::Matrix<Scalar, Eigen::Dynamic, 1> buffer(cols);  // packet-aligned: unaligned loads cost ≈ 7% here
      const Index begin = block_index * block, end = std::min(rows, begin + block);
      auto max = kernels::row_max(z.data() + begin * stride, visibility.prefix_length(begin, cols));
      for (Index row = begin; row < end; ++row) {
        const Index n = visibility.prefix_length(row, cols);
        const Scalar* values = z.data() + row * stride;
        const Scalar* next_row = row + 1 < rows ? values + stride : nullptr;
        Scalar* result = out.data() + row * cols;
        if (!max.finite) detail::throw_non_finite_logit(function, values, row, cols, visibility);
        const Scalar sum = kernels::exp_shifted_sum(values, n, max.max, scale, buffer.data(), next_row);  // ≥ 1
        if (max_in_scale_pass && row + 1 < end) {
          max = kernels::scale_row_into_and_row_max(buffer.data(), n, Scalar(1) / sum, result, streaming, next_row,
                                                    visibility.prefix_length(row + 1, cols));
        } else {
          kernels::scale_row_into(buffer.data(), n, Scalar(1) / sum, result, streaming);
          if (row + 1 < end) max = kernels::row_max(next_row, visibility.prefix_length(row + 1, cols));
        }
        if (n < cols) kernels::fill_row(result + n, cols - n, Scalar(0), streaming);
      }
      if (streaming) kernels::streaming_store_fence();  // before another thread reads the block
    });
    return;
  }
  detail::apply_rowwise_indexed(z.data(), z.rows(), cols, stride, visibility,
                                [&](Index row, const Scalar* values, Index n, Scalar* result) {
    if (!detail::try_softmax_row(values, n, scale, result))
      detail::throw_non_finite_logit(function, z.data() + row * stride, row, cols, visibility);
  }, out);
}

/// Softmax with temperature T > 0 applied to each row over its visible keys (docs/theory/normalization-maps.md §4.1).
/// Returns a row-major matrix of the same shape; masked entries are exactly 0. O(n) per row, vectorized.
/// Throws attnscope::invalid_argument for empty input, T not finite and > 0 (or so small that 1/T overflows),
/// a NaN/±inf visible logit (naming row and column), a mask of another shape, a row with every key masked.
template <class Derived>
RowMatrix<typename Derived::Scalar> softmax(const Eigen::MatrixBase<Derived>& logits,
                                            typename Derived::Scalar temperature = 1,
                                            const Visibility& visibility = {}) {
  RowMatrix<typename Derived::Scalar> out;
  softmax_into(logits, out, temperature, visibility);
  return out;
}

}  // namespace attnscope
