// Helpers shared by the normalization-map tests: a central finite-difference Jacobian and a support-stability check
// (seeded random logits are in support/random_matrices.hpp).
#pragma once

#include <cmath>
#include <functional>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::testing {

/// Map of one row (1×n) to its output row.
using RowFunction = std::function<RowMatrix<double>(const RowMatrix<double>&)>;

/// Dense Jacobian of `f` at the 1×n row `z` by the fourth-order central difference
/// [8(f(z+h e_j) − f(z−h e_j)) − (f(z+2h e_j) − f(z−2h e_j))]/(12h): truncation O(h⁴), rounding O(ε/h).
inline RowMatrix<double> central_difference_jacobian(const RowFunction& f, const RowMatrix<double>& z, double h) {
  const Index n = z.cols();
  RowMatrix<double> jacobian(n, n);
  for (Index j = 0; j < n; ++j) {
    auto shifted = [&](double step) {
      RowMatrix<double> moved = z;
      moved(0, j) += step;
      return f(moved);
    };
    const RowMatrix<double> column =
        (8.0 * (shifted(h) - shifted(-h)) - (shifted(2 * h) - shifted(-2 * h))) / (12.0 * h);
    for (Index i = 0; i < n; ++i) jacobian(i, j) = column(0, i);
  }
  return jacobian;
}

/// True when f keeps the same zero pattern at z ± 2h e_j for every j (no support change inside the stencil).
inline bool support_stable(const RowFunction& f, const RowMatrix<double>& z, double h) {
  const RowMatrix<double> base = f(z);
  for (Index j = 0; j < z.cols(); ++j)
    for (double step : {-2 * h, 2 * h}) {
      RowMatrix<double> moved = z;
      moved(0, j) += step;
      const RowMatrix<double> value = f(moved);
      for (Index i = 0; i < z.cols(); ++i)
        if ((value(0, i) > 0) != (base(0, i) > 0) || (value(0, i) < 0) != (base(0, i) < 0)) return false;
    }
  return true;
}

}  // namespace attnscope::testing
