// Tests of the per-head aggregates: type-7 quantiles against values computed by hand (numpy.quantile's default),
// position curves on a known sequence, and errors.
#include <cmath>
#include <limits>
#include <vector>

#include "attnscope/stream.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

TEST_CASE("stream summarize: mean, extremes and type-7 quantiles") {
  Eigen::VectorXd values(5);
  values << 4, 1, 3, 2, 10;  // sorted 1 2 3 4 10
  const auto summary = attnscope::stream::summarize(values, {0.0, 0.25, 0.5, 0.9, 1.0});
  CHECK(summary.count == 5);
  CHECK(summary.mean == Approx(4.0));
  CHECK(summary.min == 1);
  CHECK(summary.max == 10);
  // h = (n − 1)·level: 0 → 1; 1 → 2; 2 → 3; 3.6 → 4 + 0.6·6 = 7.6; 4 → 10
  CHECK(summary.quantiles[0] == 1);
  CHECK(summary.quantiles[1] == Approx(2.0));
  CHECK(summary.quantiles[2] == Approx(3.0));
  CHECK(summary.quantiles[3] == Approx(7.6));
  CHECK(summary.quantiles[4] == 10);
}

TEST_CASE("stream position curve: linear and logarithmic bins average the rows they cover") {
  Eigen::VectorXd values(100);
  for (int i = 0; i < 100; ++i) values(i) = 1.0 / (i + 1);  // the uniform causal row's max weight 1/n
  const auto linear = attnscope::stream::position_curve(values, 4, attnscope::stream::BinSpacing::linear);
  REQUIRE(linear.mean.size() == 4);
  CHECK(linear.first_row[1] == 25);
  CHECK(linear.end_row[3] == 100);
  CHECK(linear.position[0] == Approx(13.0));  // mean of 1..25
  double expected = 0;
  for (int i = 25; i < 50; ++i) expected += 1.0 / (i + 1);
  CHECK(linear.mean[1] == Approx(expected / 25));
  const auto logarithmic = attnscope::stream::position_curve(values, 4);
  // edges round(100^(b/4)) − 1: 0, 2, 9, 31, 100
  REQUIRE(logarithmic.first_row == std::vector<attnscope::Index>{0, 2, 9, 31});
  CHECK(logarithmic.end_row.back() == 100);
  CHECK(logarithmic.mean[0] == Approx((1.0 + 0.5) / 2));
  const auto many = attnscope::stream::position_curve(values, 1000);  // duplicate edges dropped: every bin non-empty
  for (std::size_t b = 0; b < many.first_row.size(); ++b) CHECK(many.end_row[b] > many.first_row[b]);
  CHECK(many.end_row.back() == 100);
}

TEST_CASE("stream aggregates: bad input throws naming the function and the value") {
  using attnscope::testing::error_message;
  Eigen::VectorXd values(3);
  values << 1, std::numeric_limits<double>::quiet_NaN(), 2;
  CHECK(error_message([&] { attnscope::stream::summarize(values); }) ==
        "attnscope::stream::summarize: non-finite value nan at row 1");
  CHECK(error_message([&] { attnscope::stream::summarize(Eigen::VectorXd(0)); }) ==
        "attnscope::stream::summarize: no values");
  CHECK(error_message([&] { attnscope::stream::summarize(Eigen::VectorXd::Ones(3), {1.5}); }) ==
        "attnscope::stream::summarize: quantile level 1.5 is outside [0, 1]");
  CHECK(error_message([&] { attnscope::stream::position_curve(Eigen::VectorXd::Ones(3), 0); }) ==
        "attnscope::stream::position_curve: bins must be >= 1, got 0");
}
