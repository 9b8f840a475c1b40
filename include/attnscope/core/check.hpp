// attnscope/core/check.hpp — argument validation shared by every module.
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::detail {

/// Throws unless the matrix has at least one row and one column.
template <class Derived>
void require_nonempty(const char* function, const Eigen::DenseBase<Derived>& matrix) {
  if (matrix.rows() == 0 || matrix.cols() == 0)
    throw_invalid_argument(function, "empty input (", matrix.rows(), "x", matrix.cols(), ")");
}

/// Throws on the first NaN or ±Inf entry, naming its row and column.
template <class Derived>
void require_finite(const char* function, const Eigen::DenseBase<Derived>& matrix) {
  for (Index i = 0; i < matrix.rows(); ++i)
    for (Index j = 0; j < matrix.cols(); ++j) {
      const auto value = matrix(i, j);
      if (!std::isfinite(static_cast<double>(value)))
        throw_invalid_argument(function, "non-finite value ", value, " at row ", i, ", column ", j);
    }
}

/// Throws unless the value is finite and strictly positive.
template <class Scalar>
void require_positive(const char* function, const char* name, Scalar value) {
  if (!(value > 0) || !std::isfinite(static_cast<double>(value)))
    throw_invalid_argument(function, name, " must be finite and > 0, got ", value);
}

/// Throws unless rows/cols agree.
inline void require_same_shape(const char* function, const char* what, Index rows_a, Index cols_a,
                               Index rows_b, Index cols_b) {
  if (rows_a != rows_b || cols_a != cols_b)
    throw_invalid_argument(function, what, " shape mismatch: ", rows_a, "x", cols_a, " vs ", rows_b, "x",
                           cols_b);
}

/// Throws unless both matrices have the same shape (the overload above, on two matrices).
template <class A, class B>
void require_same_shape(const char* function, const char* what, const Eigen::DenseBase<A>& a,
                        const Eigen::DenseBase<B>& b) {
  require_same_shape(function, what, a.rows(), a.cols(), b.rows(), b.cols());
}

}  // namespace attnscope::detail
