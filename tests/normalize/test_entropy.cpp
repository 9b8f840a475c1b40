// attnscope::row_entropy: closed-form values (log n, fractions of ln 2), visibility (all, causal, masks) with
// garbage at hidden entries, 0 ln 0 = 0, Shannon's additivity on product distributions, layouts, and bad input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
using attnscope::Mask;
using attnscope::RowMatrix;
using attnscope::Vector;
using attnscope::Visibility;

RowMatrix<double> row(std::vector<double> values) {
  RowMatrix<double> out(1, static_cast<Index>(values.size()));
  for (Index j = 0; j < out.cols(); ++j) out(0, j) = values[static_cast<std::size_t>(j)];
  return out;
}

// A random distribution over n keys (normalised uniforms, some entries exactly 0 when `zeros`).
std::vector<double> random_distribution(attnscope::Random& random, Index n, bool zeros = false) {
  std::vector<double> p(static_cast<std::size_t>(n));
  double total = 0;
  for (double& v : p) total += (v = zeros && random.uniform() < 0.3 ? 0.0 : random.uniform(0.01, 1.0));
  if (total == 0) p[0] = total = 1;
  for (double& v : p) v /= total;
  return p;
}

}  // namespace

TEST_CASE("row_entropy: closed-form values", "[normalize][entropy]") {
  const double ln2 = std::log(2.0);
  for (Index n : {1, 2, 7, 512}) {  // uniform over n keys: ln n
    const RowMatrix<double> uniform = RowMatrix<double>::Constant(1, n, 1.0 / static_cast<double>(n));
    CHECK(attnscope::row_entropy(uniform)(0) == Approx(std::log(static_cast<double>(n))).epsilon(1e-13).margin(1e-15));
  }
  CHECK(attnscope::row_entropy(row({0.5, 0.25, 0.25}))(0) == Approx(1.5 * ln2).epsilon(1e-15));         // 1.5 bits
  CHECK(attnscope::row_entropy(row({0.5, 0.25, 0.125, 0.125}))(0) == Approx(1.75 * ln2).epsilon(1e-15));  // 1.75 bits
  CHECK(attnscope::row_entropy(row({0.2, 0.3, 0.5}))(0) == Approx(1.0296530140645737).epsilon(1e-15));  // Python math
  CHECK(attnscope::row_entropy(row({0, 0, 1, 0}))(0) == 0.0);  // one-hot
  // 0 ln 0 = 0: zeros change nothing; an all-zero row has entropy 0; rows are not closed (−Σ p ln p as given).
  CHECK(attnscope::row_entropy(row({0.5, 0, 0, 0.5}))(0) == Approx(ln2).epsilon(1e-15));
  CHECK(attnscope::row_entropy(row({0, 0, 0}))(0) == 0.0);
  CHECK(attnscope::row_entropy(row({0.5, 0.5, 0.5}))(0) == Approx(1.5 * ln2).epsilon(1e-15));
  // Several rows at once, float input (accumulated in double, returned as float).
  RowMatrix<float> rows(2, 4);
  rows << 0.25f, 0.25f, 0.25f, 0.25f, 0.5f, 0.25f, 0.125f, 0.125f;
  const Vector<float> h = attnscope::row_entropy(rows);
  CHECK(h(0) == Approx(2 * ln2).epsilon(1e-7));
  CHECK(h(1) == Approx(1.75 * ln2).epsilon(1e-7));
}

TEST_CASE("row_entropy: causal and masked rows ignore hidden entries", "[normalize][entropy]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Index n = 6;
  // Causal: row i is uniform over its i + 1 visible keys; the hidden entries hold NaN and negatives.
  RowMatrix<double> causal_rows(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) causal_rows(i, j) = j <= i ? 1.0 / static_cast<double>(i + 1) : (j % 2 ? nan : -3.0);
  const Vector<double> h = attnscope::row_entropy(causal_rows, attnscope::causal);
  for (Index i = 0; i < n; ++i) CHECK(h(i) == Approx(std::log(static_cast<double>(i + 1))).margin(1e-15));
  // Causal with offset 1: row i sees i + 2 keys (clamped to n).
  RowMatrix<double> shifted = RowMatrix<double>::Constant(n, n, 0.5);
  const Vector<double> hs = attnscope::row_entropy(shifted, attnscope::Causal{1});
  for (Index i = 0; i < n; ++i)
    CHECK(hs(i) == Approx(static_cast<double>(std::min<Index>(i + 2, n)) * 0.5 * std::log(2.0)).epsilon(1e-15));

  // Explicit mask: the entropy of each row equals that of its visible entries gathered into a compact row.
  attnscope::Random random(11);
  const Index rows = 40, cols = 17;
  Mask mask(rows, cols);
  RowMatrix<double> a(rows, cols);
  for (Index i = 0; i < rows; ++i) {
    for (Index j = 0; j < cols; ++j) mask(i, j) = random.uniform() < 0.6;
    mask(i, static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)))) = true;
    const std::vector<double> p = random_distribution(random, mask.row(i).count(), true);
    std::size_t k = 0;
    for (Index j = 0; j < cols; ++j) a(i, j) = mask(i, j) ? p[k++] : -1.0;  // hidden entries: invalid values
  }
  const Vector<double> masked = attnscope::row_entropy(a, Visibility{mask});
  for (Index i = 0; i < rows; ++i) {
    std::vector<double> visible;
    for (Index j = 0; j < cols; ++j)
      if (mask(i, j)) visible.push_back(a(i, j));
    CHECK(masked(i) == Approx(attnscope::row_entropy(row(visible))(0)).epsilon(1e-15).margin(1e-16));
  }
}

TEST_CASE("row_entropy: additivity, bounds and permutation invariance on random distributions", "[normalize][entropy]") {
  attnscope::Random random(5);
  for (int trial = 0; trial < 200; ++trial) {
    const Index n = 1 + static_cast<Index>(random.below(12)), m = 1 + static_cast<Index>(random.below(12));
    const std::vector<double> p = random_distribution(random, n, trial % 2 == 0);
    const std::vector<double> q = random_distribution(random, m, trial % 3 == 0);
    std::vector<double> joint;  // the product distribution p ⊗ q: H(p ⊗ q) = H(p) + H(q) (Shannon 1948, additivity)
    for (double x : p)
      for (double y : q) joint.push_back(x * y);
    const double hp = attnscope::row_entropy(row(p))(0), hq = attnscope::row_entropy(row(q))(0);
    CHECK(attnscope::row_entropy(row(joint))(0) == Approx(hp + hq).epsilon(1e-13).margin(1e-14));
    CHECK(hp >= 0.0);  // 0 ≤ H(p) ≤ ln n
    CHECK(hp <= std::log(static_cast<double>(n)) + 1e-14);
    std::vector<double> reversed(p.rbegin(), p.rend());
    CHECK(attnscope::row_entropy(row(reversed))(0) == Approx(hp).epsilon(1e-14).margin(1e-15));
  }
}

TEST_CASE("row_entropy: column-major input and expressions give the same values as row-major", "[normalize][entropy]") {
  attnscope::Random random(3);
  RowMatrix<double> a(9, 7);
  for (Index i = 0; i < a.rows(); ++i) {
    const std::vector<double> p = random_distribution(random, a.cols(), true);
    for (Index j = 0; j < a.cols(); ++j) a(i, j) = p[static_cast<std::size_t>(j)];
  }
  const Vector<double> expected = attnscope::row_entropy(a, attnscope::causal);
  const Eigen::MatrixXd column_major = a;
  CHECK(attnscope::row_entropy(column_major, attnscope::causal) == expected);
  CHECK(attnscope::row_entropy(a.block(2, 0, 4, 7), attnscope::causal).size() == 4);
  CHECK(attnscope::row_entropy(a.block(2, 0, 4, 7))(1) == attnscope::row_entropy(a)(3));  // strided rows, in place
  CHECK(attnscope::row_entropy(0.5 * a + 0.5 * a) == attnscope::row_entropy(a));          // an expression
}

TEST_CASE("row_entropy: bad input throws invalid_argument naming the function, row, column and value",
          "[normalize][entropy][errors]") {
  using Catch::Contains;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  RowMatrix<double> a(2, 3);
  a << 0.2, 0.3, 0.5, 0.1, nan, 0.9;
  CHECK_THROWS_AS(attnscope::row_entropy(a), attnscope::invalid_argument);
  CHECK_THROWS_WITH(attnscope::row_entropy(a),
                    Contains("attnscope::row_entropy:") && Contains("non-finite attention weight nan at row 1, column 1"));
  a(1, 1) = inf;
  CHECK_THROWS_WITH(attnscope::row_entropy(a), Contains("non-finite attention weight inf at row 1, column 1"));
  a(1, 1) = -0.25;
  CHECK_THROWS_WITH(attnscope::row_entropy(a),
                    Contains("attnscope::row_entropy:") && Contains("negative attention weight -0.25 at row 1, column 1"));
  CHECK_THROWS_WITH(attnscope::row_entropy(RowMatrix<double>()),
                    Contains("attnscope::row_entropy:") && Contains("empty input (0x0)"));
  Mask wrong(3, 3);
  wrong.setConstant(true);
  CHECK_THROWS_WITH(attnscope::row_entropy(RowMatrix<double>::Constant(2, 3, 0.25), Visibility{wrong}),
                    Contains("attnscope::row_entropy:") && Contains("shape mismatch") && Contains("3x3"));
  Mask empty_row(2, 3);
  empty_row << true, true, true, false, false, false;
  CHECK_THROWS_WITH(attnscope::row_entropy(RowMatrix<double>::Constant(2, 3, 0.25), Visibility{empty_row}),
                    Contains("attnscope::row_entropy:") && Contains("row 1 has every key masked"));
  // A negative entry hidden by the visibility is not an error; a visible one is.
  a << 0.5, 0.5, -1, 0.5, 0.5, 0.0;
  CHECK(attnscope::row_entropy(a, attnscope::Causal{1})(0) == Approx(std::log(2.0)).epsilon(1e-15));
  CHECK_THROWS_WITH(attnscope::row_entropy(a), Contains("negative attention weight -1 at row 0, column 2"));
}
