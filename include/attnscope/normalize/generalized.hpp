// attnscope/normalize/generalized.hpp — the generalized normalization α_i = F(z_i)/Σ_j F(z_j) for any smooth
// positive F supplied with its derivative F' (the family of arXiv:2508.17821 Eq. 3; softmax with temperature T is
// F(z) = exp(z/T)). Jacobian J = diag(d) − α dᵀ with d = F'(z)/ΣF [derived].
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/row_helpers.hpp"

namespace attnscope {

/// A user-supplied positive function F and its derivative F' (both callable as Scalar(Scalar)).
/// Not part of NormalizationMap (it is a template); usable with normalize() and every Jacobian function.
template <class Function, class Derivative>
struct GeneralizedMap {
  Function function;
  Derivative derivative;
};

/// Builds a GeneralizedMap from F and F'.
template <class Function, class Derivative>
GeneralizedMap<Function, Derivative> make_generalized_map(Function function, Derivative derivative) {
  return {std::move(function), std::move(derivative)};
}

namespace detail {

template <class T>
struct is_generalized_map : std::false_type {};
template <class Function, class Derivative>
struct is_generalized_map<GeneralizedMap<Function, Derivative>> : std::true_type {};

/// Evaluates F (and F' when `with_derivative`) at every visible logit, serially (F may not be thread-safe),
/// throwing when F is not finite and > 0, F' not finite, or a row sum overflows.
template <class Scalar, class Function, class Derivative>
void require_generalized_defined(const char* function_name, const RowMatrixView<Scalar>& logits,
                                 const Visibility& visibility, const GeneralizedMap<Function, Derivative>& map,
                                 bool with_derivative) {
  const Index cols = logits.cols();
  for (Index i = 0; i < logits.rows(); ++i) {
    double sum = 0;
    for (Index j = 0; j < cols; ++j) {
      if (!visibility.visible(i, j, cols)) continue;
      const Scalar value = map.function(logits(i, j));
      if (!(value > 0) || !std::isfinite(static_cast<double>(value)))
        throw_invalid_argument(function_name, "F(", logits(i, j), ") = ", value,
                               " must be finite and > 0 (row ", i, ", column ", j, ")");
      if (with_derivative) {
        const Scalar slope = map.derivative(logits(i, j));
        if (!std::isfinite(static_cast<double>(slope)))
          throw_invalid_argument(function_name, "F'(", logits(i, j), ") = ", slope, " is not finite (row ", i,
                                 ", column ", j, ")");
      }
      sum += static_cast<double>(value);
    }
    if (!std::isfinite(static_cast<Scalar>(sum)))
      throw_invalid_argument(function_name, "sum of F over row ", i, " overflows");
  }
}

/// One row: α_i = F(z_i)/Σ_j F(z_j) (no max subtraction: F need not be shift-invariant).
template <class Scalar, class Function, class Derivative>
void generalized_row(const Scalar* logits, Index n, const GeneralizedMap<Function, Derivative>& map, Scalar* out) {
  Scalar sum = 0;
  for (Index j = 0; j < n; ++j) {
    out[j] = map.function(logits[j]);
    sum += out[j];
  }
  for (Index j = 0; j < n; ++j) out[j] /= sum;
}

/// Linearization: J = diag(d) − α dᵀ, d_j = F'(z_j)/Σ_k F(z_k) [derived; quotient rule].
template <class Scalar, class Function, class Derivative>
RowLinearization<Scalar> linearize_generalized(const Scalar* logits, Index n,
                                               const GeneralizedMap<Function, Derivative>& map) {
  const auto size = static_cast<std::size_t>(n);
  RowLinearization<Scalar> result;
  result.output.resize(size);
  Scalar sum = 0;
  for (std::size_t j = 0; j < size; ++j) {
    result.output[j] = map.function(logits[j]);
    sum += result.output[j];
  }
  result.jacobian.diagonal.resize(size);
  for (std::size_t j = 0; j < size; ++j) {
    result.output[j] /= sum;
    result.jacobian.diagonal[j] = map.derivative(logits[j]) / sum;
  }
  result.jacobian.terms.push_back({result.output, result.jacobian.diagonal});
  return result;
}

}  // namespace detail

/// Generalized normalization of each row over its visible keys: α_i = F(z_i)/Σ_j F(z_j) with F = map.function.
/// F is evaluated serially (it may hold state). Masked entries exactly 0. Shift-invariant only when F is an
/// exponential. O(n) evaluations of F per row. Throws attnscope::invalid_argument on bad logits (as the other maps),
/// when F(z) is not finite and > 0 at a visible logit, or when a row's sum of F overflows.
template <class Derived, class Function, class Derivative>
RowMatrix<typename Derived::Scalar> normalize(const Eigen::MatrixBase<Derived>& logits,
                                              const GeneralizedMap<Function, Derivative>& map,
                                              const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::normalize: logits must be float or double");
  const RowMatrixView<Scalar> z(logits.derived());
  detail::validate_logits("normalize", z, visibility);
  detail::require_generalized_defined("normalize", z, visibility, map, false);
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(z.rows(), z.cols());
  for (Index i = 0; i < z.rows(); ++i) {  // serial: F may hold state
    const std::vector<Index> columns = detail::visible_columns(visibility, i, z.cols());
    std::vector<Scalar> row(columns.size()), result(columns.size());
    for (std::size_t k = 0; k < columns.size(); ++k) row[k] = z(i, columns[k]);
    detail::generalized_row(row.data(), static_cast<Index>(row.size()), map, result.data());
    detail::scatter_row(result, columns, i, out);
  }
  return out;
}

}  // namespace attnscope
