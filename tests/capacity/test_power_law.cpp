// Least-squares power-law fit on log–log axes (capacity/power_law.hpp).
#include <cmath>
#include <limits>
#include <vector>

#include "attnscope/capacity/power_law.hpp"
#include "attnscope/core/random.hpp"
#include "support/catch.hpp"

using namespace attnscope::capacity;

TEST_CASE("fit_power_law matches numpy.polyfit on log-log data", "[capacity][power_law]") {
  // Golden values: /usr/bin/python3, numpy 1.x: b, a = np.polyfit(np.log(x), np.log(y), 1); prefactor = exp(a);
  // r² = np.corrcoef(np.log(x), np.log(y))[0, 1]**2.
  const PowerLawFit fit = fit_power_law({32, 64, 128, 256, 512}, {3.1, 5.9, 13.0, 24.2, 51.0});
  CHECK(fit.exponent == Approx(1.0116534440856713).epsilon(1e-12));
  CHECK(fit.prefactor == Approx(0.09156769811576934).epsilon(1e-12));
  CHECK(fit.r_squared == Approx(0.998900045503609).epsilon(1e-12));
}

TEST_CASE("fit_power_law recovers exact power laws and differs from the two-endpoint slope", "[capacity][power_law]") {
  attnscope::Random random(77);
  for (int trial = 0; trial < 50; ++trial) {
    const double exponent = 3 * random.normal(), prefactor = std::exp(random.normal());
    std::vector<double> x, y;
    for (int i = 0; i < 6 + trial % 5; ++i) {
      x.push_back(std::exp(4 * random.uniform()) + 0.1 * i);
      y.push_back(prefactor * std::pow(x.back(), exponent));
    }
    const PowerLawFit fit = fit_power_law(x, y);
    CHECK(fit.exponent == Approx(exponent).margin(1e-9));
    CHECK(fit.prefactor == Approx(prefactor).epsilon(1e-9));
    CHECK(fit.r_squared == Approx(1).margin(1e-12));
  }
  // A curve flat except for its last point: endpoints give log(4)/log(16) = 0.5; all points give less.
  const PowerLawFit bent = fit_power_law({1, 2, 4, 8, 16}, {1, 1, 1, 1, 4});
  CHECK(bent.exponent < 0.5);
  CHECK(bent.exponent > 0);
  CHECK(bent.r_squared < 1);
}

TEST_CASE("fit_power_law rejects bad input", "[capacity][power_law]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(fit_power_law({1, 2}, {1}), attnscope::invalid_argument);
  CHECK_THROWS_AS(fit_power_law({1}, {1}), attnscope::invalid_argument);
  CHECK_THROWS_AS(fit_power_law({1, 2}, {1, 0}), attnscope::invalid_argument);
  CHECK_THROWS_AS(fit_power_law({-1, 2}, {1, 1}), attnscope::invalid_argument);
  CHECK_THROWS_AS(fit_power_law({1, nan}, {1, 1}), attnscope::invalid_argument);
  CHECK_THROWS_AS(fit_power_law({3, 3, 3}, {1, 2, 3}), attnscope::invalid_argument);
}
