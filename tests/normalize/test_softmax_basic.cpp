// Basic softmax tests (golden vector, masks); the normalize module's full suite lives beside this file.
#include "attnscope/normalize/softmax.hpp"
#include "support/catch.hpp"

TEST_CASE("softmax golden vector from the deep-spin/entmax README", "[normalize][softmax]") {
  Eigen::MatrixXd x(1, 3);
  x << -2, 0, 0.5;
  const auto p = attnscope::softmax(x);
  CHECK(p(0, 0) == Approx(0.0486).margin(5e-5));
  CHECK(p(0, 1) == Approx(0.3592).margin(5e-5));
  CHECK(p(0, 2) == Approx(0.5922).margin(5e-5));
}

TEST_CASE("softmax with causal visibility leaves future keys at exactly zero", "[normalize][softmax]") {
  Eigen::MatrixXf x = Eigen::MatrixXf::Random(4, 4);
  const auto p = attnscope::softmax(x, 1.0f, attnscope::causal);
  for (int i = 0; i < 4; ++i) {
    CHECK(p.row(i).sum() == Approx(1.0f).epsilon(1e-6));
    for (int j = i + 1; j < 4; ++j) CHECK(p(i, j) == 0.0f);
  }
  CHECK_THROWS_AS(attnscope::softmax(x, 0.0f), attnscope::invalid_argument);
}
