// attnscope/composition/correlation.hpp — the Pearson correlation arithmetic shared by pearson_correlation
// (clustering.hpp) and spearman_rho (rankings.hpp); each caller validates its input and names itself in errors.
#pragma once

#include <cmath>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"

namespace attnscope::composition::detail {

/// Pearson correlation Σ(a − ā)(b − b̄) / √(Σ(a − ā)² · Σ(b − b̄)²) (Pearson 1896) of two equally long arrays,
/// already checked by the caller (same length ≥ 2, finite). Throws
/// invalid_argument("attnscope::<function>: <constant_message>") when either array is constant.
template <class DerivedA, class DerivedB>
double pearson_correlation_unchecked(const char* function, const char* constant_message,
                                     const Eigen::ArrayBase<DerivedA>& a, const Eigen::ArrayBase<DerivedB>& b) {
  // ArrayXd spelled as a type dependent on DerivedA (instantiated only where used; compile time)
  using Array = Eigen::Array<std::conditional_t<sizeof(DerivedA) != 0, double, void>, Eigen::Dynamic, 1>;
  const Array da = a - a.mean(), db = b - b.mean();
  const double norm = std::sqrt((da * da).sum() * (db * db).sum());
  if (!(norm > 0)) attnscope::detail::throw_invalid_argument(function, constant_message);
  return (da * db).sum() / norm;
}

}  // namespace attnscope::composition::detail
