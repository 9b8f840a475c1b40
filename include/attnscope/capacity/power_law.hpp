// attnscope/capacity/power_law.hpp — least-squares power-law fit y ≈ c·x^b on log–log axes, used to read growth
// exponents such as "the distance grows roughly linearly in L" (arXiv:2508.17821 Fig. 2a) from every point of a
// sweep instead of from its two endpoints.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "attnscope/core/error.hpp"

namespace attnscope::capacity {
/// Result of fit_power_law(): y ≈ prefactor · x^exponent.
struct PowerLawFit {
  double exponent = 0;   // b, the least-squares slope of log y on log x
  double prefactor = 0;  // c = exp(intercept)
  double r_squared = 0;  // coefficient of determination of the log–log regression (1 when the points are collinear)
};

/// Ordinary least squares of log y on log x over all points (simple linear regression: slope =
/// Σ(u − ū)(v − v̄) / Σ(u − ū)², u = log x, v = log y). O(n). Throws attnscope::invalid_argument when the sizes
/// differ, there are fewer than 2 points, a value is not finite and > 0, or all x are equal.
inline PowerLawFit fit_power_law(const std::vector<double>& x, const std::vector<double>& y) {
  const char* function = "fit_power_law";
  if (x.size() != y.size())
    attnscope::detail::throw_invalid_argument(function, "x has ", x.size(), " points, y ", y.size());
  if (x.size() < 2) attnscope::detail::throw_invalid_argument(function, "need at least 2 points, got ", x.size());
  const double count = static_cast<double>(x.size());
  double mean_u = 0, mean_v = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(std::isfinite(x[i]) && x[i] > 0) || !(std::isfinite(y[i]) && y[i] > 0))
      attnscope::detail::throw_invalid_argument(function, "point ", i, " = (", x[i], ", ", y[i],
                                                ") is not finite and positive");
    mean_u += std::log(x[i]) / count;
    mean_v += std::log(y[i]) / count;
  }
  double suu = 0, suv = 0, svv = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double du = std::log(x[i]) - mean_u, dv = std::log(y[i]) - mean_v;
    suu += du * du;
    suv += du * dv;
    svv += dv * dv;
  }
  if (!(suu > 0)) attnscope::detail::throw_invalid_argument(function, "all x are equal (", x.front(), "): no slope");
  PowerLawFit fit;
  fit.exponent = suv / suu;
  fit.prefactor = std::exp(mean_v - fit.exponent * mean_u);
  fit.r_squared = svv > 0 ? suv * suv / (suu * svv) : 1.0;
  return fit;
}

}  // namespace attnscope::capacity
