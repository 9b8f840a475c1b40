// attnscope/core/types.hpp — matrix aliases used throughout attnscope.
#pragma once

#include <Eigen/Core>

namespace attnscope {

using Index = Eigen::Index;

/// Row-major dynamic matrix: one row = one query's weights (or logits) over the keys.
template <class Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Dynamic column vector (one value per row of a RowMatrix, e.g. a per-row spectral norm).
template <class Scalar>
using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

/// Read-only row-major view of any dense expression: no copy when the input is already row-major with unit inner
/// stride (any outer stride); other layouts and expressions are evaluated once into a temporary.
template <class Scalar>
using RowMatrixView = Eigen::Ref<const RowMatrix<Scalar>, 0, Eigen::OuterStride<>>;

/// Visibility mask: true = key visible to the query of that row.
using Mask = Eigen::Array<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace attnscope
