// attnscope/core/decompositions.hpp — the dense matrix decompositions attnscope uses (Eigen's divide-and-conquer SVD,
// one-sided Jacobi SVD, self-adjoint eigensolver, complete orthogonal decomposition), each behind one function
// template.
//
// Instantiating one of these Eigen decompositions costs a translation unit 15–50 s of compile time. Behind a
// function template it is instantiated only where it is called; and a program that links the optional compiled part
// (CMake target attnscope::extern_templates, which defines ATTNSCOPE_EXTERN_TEMPLATES) gets the double and float
// versions from that one object file instead of compiling them in every translation unit. Without it the library is
// header-only as always.
#pragma once

#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/SVD>

#include "attnscope/core/types.hpp"

namespace attnscope::detail {

/// Singular values σ_1 ≥ σ_2 ≥ … of a dense column-major matrix by Eigen::BDCSVD (divide and conquer; Jacobi sweeps
/// below 16 columns). O(rows·cols·min(rows, cols)).
template <class Matrix>
Vector<typename Matrix::Scalar> singular_values_divide_and_conquer(const Matrix& matrix) {
  const Eigen::BDCSVD<Matrix> svd(matrix);
  return svd.singularValues();
}

/// Singular values σ_1 ≥ σ_2 ≥ … of a dense column-major matrix by Eigen::JacobiSVD (one-sided Jacobi with QR
/// preconditioning: exact to rounding, O(n³); for small matrices and reference values).
template <class Matrix>
Vector<typename Matrix::Scalar> singular_values_jacobi(const Matrix& matrix) {
  const Eigen::JacobiSVD<Matrix> svd(matrix);
  return svd.singularValues();
}

/// Eigenvalues (ascending) and, when requested, orthonormal eigenvectors (columns, in the same order) of a symmetric
/// matrix.
template <class Matrix>
struct SymmetricEigen {
  Vector<typename Matrix::Scalar> values;
  Matrix vectors;  // empty unless requested
};

/// The eigen-decomposition of a symmetric dense matrix by Eigen::SelfAdjointEigenSolver (tridiagonalization and
/// implicit symmetric QR; only the lower triangle is read). O(n³).
template <class Matrix>
SymmetricEigen<Matrix> symmetric_eigen(const Matrix& matrix, bool with_vectors = true) {
  const Eigen::SelfAdjointEigenSolver<Matrix> solver(matrix, with_vectors ? Eigen::ComputeEigenvectors
                                                                           : Eigen::EigenvaluesOnly);
  SymmetricEigen<Matrix> out;
  out.values = solver.eigenvalues();
  if (with_vectors) out.vectors = solver.eigenvectors();
  return out;
}

/// The minimum-norm least-squares solution x of min ‖a·x − b‖₂ by Eigen::CompleteOrthogonalDecomposition (rank-revealing
/// QR with column pivoting, then a complete orthogonal factorization), treating pivots below `threshold` (relative to
/// the largest) as zero. O(rows·cols·min(rows, cols)).
template <class Matrix>
Vector<typename Matrix::Scalar> minimum_norm_least_squares(const Matrix& a, const Vector<typename Matrix::Scalar>& b,
                                                           double threshold) {
  Eigen::CompleteOrthogonalDecomposition<Matrix> solver(a);
  solver.setThreshold(threshold);
  return solver.solve(b);
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
// Compiled once in src/extern_templates/decompositions.cpp (CMake target attnscope::extern_templates).
extern template Vector<double> singular_values_divide_and_conquer<Eigen::MatrixXd>(const Eigen::MatrixXd&);
extern template Vector<double> singular_values_jacobi<Eigen::MatrixXd>(const Eigen::MatrixXd&);
extern template Vector<float> singular_values_jacobi<Eigen::MatrixXf>(const Eigen::MatrixXf&);
extern template SymmetricEigen<Eigen::MatrixXd> symmetric_eigen<Eigen::MatrixXd>(const Eigen::MatrixXd&, bool);
extern template Vector<double> minimum_norm_least_squares<Eigen::MatrixXd>(const Eigen::MatrixXd&, const Vector<double>&,
                                                                           double);
#endif

}  // namespace attnscope::detail
