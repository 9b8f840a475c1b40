// Tests of the core module: errors, visibility, deterministic random numbers.
#include <cmath>
#include <limits>
#include <string>

#include "attnscope/core.hpp"
#include "support/catch.hpp"

using attnscope::Index;
using attnscope::Mask;
using attnscope::Visibility;

TEST_CASE("invalid_argument derives from std::invalid_argument and names the function", "[core]") {
  try {
    attnscope::detail::throw_invalid_argument("softmax", "temperature must be > 0, got ", -1.5);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "attnscope::softmax: temperature must be > 0, got -1.5");
  }
}

TEST_CASE("require_finite names row and column of the first bad value", "[core]") {
  Eigen::MatrixXd m = Eigen::MatrixXd::Zero(3, 4);
  m(2, 1) = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(attnscope::detail::require_finite("f", m), Catch::Contains("row 2, column 1"));
  m(2, 1) = 0;
  CHECK_NOTHROW(attnscope::detail::require_finite("f", m));
  CHECK_THROWS_AS(attnscope::detail::require_nonempty("f", Eigen::MatrixXd(0, 3)), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::detail::require_positive("f", "s", 0.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::detail::require_positive("f", "s", std::numeric_limits<double>::infinity()),
                  attnscope::invalid_argument);
}

TEST_CASE("causal visibility is a prefix per row", "[core]") {
  const Visibility v = attnscope::causal;
  CHECK(v.is_prefix());
  CHECK(v.prefix_length(0, 5) == 1);
  CHECK(v.prefix_length(4, 5) == 5);
  CHECK(v.prefix_length(9, 5) == 5);
  CHECK(v.visible(2, 2, 5));
  CHECK_FALSE(v.visible(2, 3, 5));
  const Visibility shifted = attnscope::Causal{3};
  CHECK(shifted.prefix_length(0, 10) == 4);
  const Visibility negative = attnscope::Causal{-2};
  CHECK(negative.visible_count(0, 10) == 0);
  CHECK_THROWS_WITH(negative.validate("softmax", 3, 10), Catch::Contains("row 0 has every key masked"));
  const Mask m = v.to_mask(3, 3);
  CHECK(m.count() == 6);
}

TEST_CASE("mask visibility validates shape and empty rows", "[core]") {
  Mask m = Mask::Constant(2, 3, true);
  m(1, 0) = m(1, 1) = false;
  Visibility v = m;
  CHECK_FALSE(v.is_prefix());
  CHECK(v.visible_count(1, 3) == 1);
  CHECK_NOTHROW(v.validate("f", 2, 3));
  CHECK_THROWS_WITH(v.validate("f", 2, 4), Catch::Contains("shape mismatch"));
  m(1, 2) = false;
  CHECK_THROWS_WITH(Visibility(m).validate("f", 2, 3), Catch::Contains("row 1"));
}

TEST_CASE("Random is deterministic for a seed and has the right moments", "[core]") {
  attnscope::Random a(42), b(42), c(43);
  for (int i = 0; i < 10; ++i) CHECK(a.bits() == b.bits());
  CHECK(a.bits() != c.bits());
  attnscope::Random r(7);
  const int n = 200000;
  double sum = 0, sum_sq = 0, uniform_sum = 0;
  for (int i = 0; i < n; ++i) {
    const double x = r.normal();
    sum += x;
    sum_sq += x * x;
    uniform_sum += r.uniform();
  }
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(std::abs(sum_sq / n - 1.0) < 0.02);
  CHECK(std::abs(uniform_sum / n - 0.5) < 0.005);
  for (int i = 0; i < 1000; ++i) CHECK(r.below(7) < 7);
}
