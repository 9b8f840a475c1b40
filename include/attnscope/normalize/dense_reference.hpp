// attnscope/normalize/dense_reference.hpp — dense O(n³) reference for the Jacobian spectral norms: ‖J‖₂ as the
// largest singular value of the dense row Jacobian by Eigen::JacobiSVD. For tests and cross-checks of the fast
// methods (exact O(n) secular method, restarted Lanczos) only: it pulls in <Eigen/SVD>, which is slow to compile, so
// no other attnscope header (and no umbrella header) includes it.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/decompositions.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/jacobian.hpp"

namespace attnscope {
namespace detail {

/// Largest singular value of a dense matrix by Eigen::JacobiSVD (exact to rounding, O(n³)); 0 for an empty matrix.
template <class Derived>
typename Derived::Scalar dense_spectral_norm(const Eigen::MatrixBase<Derived>& matrix) {
  using Scalar = typename Derived::Scalar;
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  const Vector<Scalar> sigma = singular_values_jacobi(Matrix(matrix));
  return sigma.size() ? sigma(0) : Scalar(0);
}

/// ‖J‖₂ of one row Jacobian by a dense SVD of J (the oracle for spectral_norm_lanczos).
template <class Scalar>
Scalar spectral_norm_dense_svd(const DiagonalPlusLowRank<Scalar>& jacobian) {
  return dense_spectral_norm(jacobian.dense());
}

}  // namespace detail

/// ‖J_i‖₂ of every row i by a dense SVD of the row's Jacobian over its visible keys, in the logits' scalar: the O(n³)
/// reference for jacobian_spectral_norm (same maps, same validation and errors). Use it in tests and for small rows.
template <class Derived, class Map>
Vector<typename Derived::Scalar> jacobian_spectral_norm_dense(const Eigen::MatrixBase<Derived>& logits, const Map& map,
                                                              const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::jacobian_spectral_norm_dense: float or double");
  const char* function = "jacobian_spectral_norm_dense";
  const RowMatrixView<Scalar> z(logits.derived());
  detail::validate_logits(function, z, visibility);
  detail::validate_map_at(function, map, z, visibility);
  Vector<Scalar> norms(z.rows());
  for (Index i = 0; i < z.rows(); ++i) {
    const std::vector<Index> columns = detail::visible_columns(visibility, i, z.cols());
    const std::vector<Scalar> row = detail::gather_columns<Scalar>(z, i, columns);
    norms(i) = detail::spectral_norm_dense_svd(
        detail::linearize_row(map, row.data(), static_cast<Index>(row.size())).jacobian);
  }
  return norms;
}

}  // namespace attnscope
