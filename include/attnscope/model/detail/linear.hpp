// attnscope/model/detail/linear.hpp — the one product of activations with a weight matrix: y = x·Wᵀ for an
// nn.Linear weight W (out_features × in_features). Every projection of the forward pass goes through these three
// functions, so how weights are stored (model::WeightMatrix) is a concern of this header only.
#pragma once

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/model/weights.hpp"

namespace attnscope::model::detail {

/// x·Wᵀ (rows of x are tokens; W is out × in): a new rows × out matrix.
template <class Scalar, class Derived>
RowMatrix<Scalar> linear(const Eigen::MatrixBase<Derived>& x, const WeightMatrix& w) {
  RowMatrix<Scalar> y(x.rows(), w.rows());
  y.noalias() = x * w.transpose();
  return y;
}

/// out = x·Wᵀ into an existing block of the right shape.
template <class Out, class Derived>
void linear_into(Out&& out, const Eigen::MatrixBase<Derived>& x, const WeightMatrix& w) {
  out.noalias() = x * w.transpose();
}

/// out += x·Wᵀ (the residual update of a block's output projection).
template <class Out, class Derived>
void linear_add(Out&& out, const Eigen::MatrixBase<Derived>& x, const WeightMatrix& w) {
  out.noalias() += x * w.transpose();
}

}  // namespace attnscope::model::detail
