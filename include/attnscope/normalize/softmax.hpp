// attnscope/normalize/softmax.hpp — softmax with temperature, row-wise, with visibility.
// p_i = exp(z_i/T) / Σ_j exp(z_j/T) over the visible keys (normalization-maps.md §4.1).
#pragma once

#include <cmath>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

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

/// Applies a row kernel `kernel(const Scalar* z, Index n, Scalar* p)` to the visible keys of every row;
/// masked entries are set to exactly 0. Gathers masked rows into a contiguous buffer.
template <class Scalar, class RowKernel>
RowMatrix<Scalar> apply_rowwise(const RowMatrix<Scalar>& logits, const Visibility& visibility, RowKernel&& kernel) {
  const Index rows = logits.rows(), cols = logits.cols();
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(rows, cols);
  if (visibility.is_prefix()) {
    for_each_row(rows, cols, [&](Index i) {
      const Index n = visibility.prefix_length(i, cols);
      kernel(logits.data() + i * cols, n, out.data() + i * cols);
    });
  } else {
    for_each_row(rows, cols, [&](Index i) {
      std::vector<Scalar> gathered, result;
      gathered.reserve(static_cast<std::size_t>(cols));
      for (Index j = 0; j < cols; ++j)
        if (visibility.visible(i, j, cols)) gathered.push_back(logits(i, j));
      result.resize(gathered.size());
      kernel(gathered.data(), static_cast<Index>(gathered.size()), result.data());
      std::size_t k = 0;
      for (Index j = 0; j < cols; ++j)
        if (visibility.visible(i, j, cols)) out(i, j) = result[k++];
    });
  }
  return out;
}

/// Validates logits for a normalization map: non-empty, finite at visible entries, mask shape, no empty row.
template <class Scalar>
void validate_logits(const char* function, const RowMatrix<Scalar>& logits, const Visibility& visibility) {
  require_nonempty(function, logits);
  visibility.validate(function, logits.rows(), logits.cols());
  for (Index i = 0; i < logits.rows(); ++i)
    for (Index j = 0; j < logits.cols(); ++j)
      if (visibility.visible(i, j, logits.cols()) && !std::isfinite(static_cast<double>(logits(i, j))))
        throw_invalid_argument(function, "non-finite logit ", logits(i, j), " at row ", i, ", column ", j);
}

}  // namespace detail

/// Softmax with temperature T > 0 applied to each row over its visible keys (normalization-maps.md §4.1).
/// Returns a row-major matrix of the same shape; masked entries are exactly 0.
template <class Derived>
RowMatrix<typename Derived::Scalar> softmax(const Eigen::MatrixBase<Derived>& logits,
                                            typename Derived::Scalar temperature = 1,
                                            const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::softmax: logits must be float or double");
  detail::require_positive("softmax", "temperature", temperature);
  const RowMatrix<Scalar> z = logits;
  detail::validate_logits("softmax", z, visibility);
  const Scalar scale = Scalar(1) / temperature;
  return detail::apply_rowwise(z, visibility, [scale](const Scalar* row, Index n, Scalar* out) {
    detail::softmax_row_reference(row, n, scale, out);
  });
}

}  // namespace attnscope
