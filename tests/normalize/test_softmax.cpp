// Softmax: golden vector, masks and causal visibility, temperature, float/double, extreme logits, the vectorized row
// kernel against the scalar reference, thread-count independence, non-contiguous inputs and every error path.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::testing::error_message;
using attnscope::testing::random_logits;

/// Long-double softmax of the visible entries of one row (independent of the library code).
template <class Scalar>
std::vector<long double> exact_softmax(const Scalar* z, Index n, long double scale) {
  long double max = z[0];
  for (Index j = 1; j < n; ++j) max = std::max<long double>(max, z[j]);
  std::vector<long double> p(static_cast<std::size_t>(n));
  long double sum = 0;
  for (Index j = 0; j < n; ++j) sum += p[static_cast<std::size_t>(j)] = std::exp(scale * (z[j] - max));
  for (long double& value : p) value /= sum;
  return p;
}

}  // namespace

TEST_CASE("softmax golden vector from the deep-spin/entmax README", "[normalize][softmax]") {
  Eigen::MatrixXd x(1, 3);
  x << -2, 0, 0.5;
  const auto p = attnscope::softmax(x);
  CHECK(p(0, 0) == Approx(0.0486).margin(5e-5));
  CHECK(p(0, 1) == Approx(0.3592).margin(5e-5));
  CHECK(p(0, 2) == Approx(0.5922).margin(5e-5));
  const Eigen::MatrixXf xf = x.cast<float>();
  const auto pf = attnscope::softmax(xf);
  CHECK(pf(0, 2) == Approx(0.5922f).margin(5e-5));
}

TEMPLATE_TEST_CASE("softmax agrees with a long-double softmax within a few ULP for every row length",
                   "[normalize][softmax]", float, double) {
  const double tolerance = 8 * std::numeric_limits<TestType>::epsilon();
  for (Index cols : {1, 2, 3, 7, 15, 16, 17, 31, 64, 65, 100, 257, 1024}) {
    for (double logit_scale : {0.01, 1.0, 10.0, 100.0}) {
      const RowMatrix<TestType> z = random_logits<TestType>(100 + cols, 5, cols, logit_scale);
      for (TestType temperature : {TestType(1), TestType(0.3), TestType(4)}) {
        const RowMatrix<TestType> p = attnscope::softmax(z, temperature);
        for (Index i = 0; i < z.rows(); ++i) {
          const auto exact = exact_softmax(z.data() + i * cols, cols, 1.0L / temperature);
          const long double max = z.row(i).maxCoeff();
          long double sum = 0;
          for (Index j = 0; j < cols; ++j) {
            const long double reference = exact[static_cast<std::size_t>(j)];
            sum += p(i, j);
            // exp amplifies the rounding of its argument t = (z − max)/T: relative error ≤ (c + 2|t|)·eps; the
            // row sum adds ≈ 2 eps per term in each of the 4·lanes partial sums
            const long double argument = std::fabs((z(i, j) - max) / temperature);
            const double summation = 2.0 * static_cast<double>(cols) / (4 * attnscope::kernels::packet_size<TestType>);
            CHECK(std::fabs(p(i, j) - reference) <=
                  (tolerance + (2 * argument + summation) * std::numeric_limits<TestType>::epsilon()) * reference +
                      std::numeric_limits<TestType>::min());
            CHECK(p(i, j) >= 0);
          }
          CHECK(static_cast<double>(sum) == Approx(1.0).epsilon(4 * cols * std::numeric_limits<TestType>::epsilon()));
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("the vectorized softmax row matches softmax_row_reference", "[normalize][softmax]", float,
                   double) {
  attnscope::Random random(3);
  for (Index n = 1; n <= 300; n += 7) {
    std::vector<TestType> z(static_cast<std::size_t>(n)), fast(z.size()), reference(z.size());
    for (TestType& value : z) value = static_cast<TestType>(20 * random.normal());
    attnscope::detail::softmax_row(z.data(), n, TestType(0.7), fast.data());
    attnscope::detail::softmax_row_reference(z.data(), n, TestType(0.7), reference.data());
    for (std::size_t j = 0; j < z.size(); ++j)
      CHECK(std::fabs(fast[j] - reference[j]) <=
            8 * std::numeric_limits<TestType>::epsilon() * reference[j] + std::numeric_limits<TestType>::min());
  }
}

TEST_CASE("softmax with causal visibility leaves future keys at exactly zero", "[normalize][softmax]") {
  Eigen::MatrixXf x = Eigen::MatrixXf::Random(4, 4);
  const auto p = attnscope::softmax(x, 1.0f, attnscope::causal);
  for (int i = 0; i < 4; ++i) {
    CHECK(p.row(i).sum() == Approx(1.0f).epsilon(1e-6));
    for (int j = i + 1; j < 4; ++j) CHECK(p(i, j) == 0.0f);
  }
  // causal with offset: row i sees i + offset + 1 keys; equals softmax of that prefix alone
  const RowMatrix<double> z = random_logits<double>(4, 6, 9, 2.0);
  const RowMatrix<double> q = attnscope::softmax(z, 1.0, attnscope::Causal{2});
  for (Index i = 0; i < 6; ++i) {
    const Index visible = std::min<Index>(9, i + 3);
    const RowMatrix<double> prefix = attnscope::softmax(z.row(i).head(visible));
    for (Index j = 0; j < 9; ++j) CHECK(q(i, j) == (j < visible ? prefix(0, j) : 0.0));
  }
}

TEMPLATE_TEST_CASE("softmax with a mask equals softmax of the visible keys alone; masked entries are exactly 0",
                   "[normalize][softmax]", float, double) {
  attnscope::Random random(8);
  const RowMatrix<TestType> z = random_logits<TestType>(9, 20, 37, 3.0);
  attnscope::Mask mask(20, 37);
  for (Index i = 0; i < 20; ++i)
    for (Index j = 0; j < 37; ++j) mask(i, j) = random.uniform() < 0.6 || j == i;
  // masked logits may be anything, even NaN: they are never read
  RowMatrix<TestType> poisoned = z;
  for (Index i = 0; i < 20; ++i)
    for (Index j = 0; j < 37; ++j)
      if (!mask(i, j)) poisoned(i, j) = std::numeric_limits<TestType>::quiet_NaN();
  const RowMatrix<TestType> p = attnscope::softmax(poisoned, TestType(1.5), mask);
  for (Index i = 0; i < 20; ++i) {
    std::vector<TestType> visible;
    for (Index j = 0; j < 37; ++j)
      if (mask(i, j)) visible.push_back(z(i, j));
    std::vector<TestType> expected(visible.size());
    attnscope::detail::softmax_row(visible.data(), static_cast<Index>(visible.size()), TestType(1) / TestType(1.5),
                                   expected.data());
    std::size_t k = 0;
    for (Index j = 0; j < 37; ++j) CHECK(p(i, j) == (mask(i, j) ? expected[k++] : TestType(0)));
  }
}

TEST_CASE("softmax handles huge, tiny and widely spread logits without overflow or NaN", "[normalize][softmax]") {
  RowMatrix<float> z(5, 4);
  z << 1e30f, 1e30f, -1e30f, 0,                                                   // two tied huge maxima
      -3e38f, 3e38f, 0, 1,                                                        // x − max overflows to −inf
      1e-40f, -1e-40f, 0, 1e-45f,                                                 // subnormal logits: uniform
      100, 0, -100, 50,                                                           // exp(−100) etc. underflow
      -1e4f, -1e4f + 1, -1e4f + 2, -1e4f + 3;                                     // shift invariance far from 0
  const RowMatrix<float> p = attnscope::softmax(z);
  CHECK(p.allFinite());
  CHECK(p(0, 0) == 0.5f);
  CHECK(p(0, 1) == 0.5f);
  CHECK(p(0, 2) == 0.0f);
  CHECK(p(1, 1) == 1.0f);
  CHECK(p(1, 0) == 0.0f);
  for (Index j = 0; j < 4; ++j) CHECK(p(2, j) == Approx(0.25f));
  CHECK(p(3, 0) == Approx(1.0f));
  CHECK(p(3, 2) == 0.0f);  // exp(−200) flushes to 0
  const RowMatrix<float> shifted = attnscope::softmax(RowMatrix<float>((RowMatrix<float>(1, 4) << 0, 1, 2, 3).finished()));
  for (Index j = 0; j < 4; ++j) CHECK(p(4, j) == Approx(shifted(0, j)).epsilon(1e-6));
  // a tiny temperature turns softmax into argmax (with ties split evenly)
  const RowMatrix<double> sharp = attnscope::softmax(RowMatrix<double>((RowMatrix<double>(1, 3) << 1, 2, 2).finished()), 1e-300);
  CHECK(sharp(0, 0) == 0.0);
  CHECK(sharp(0, 1) == 0.5);
}

TEST_CASE("softmax accepts any dense expression: column-major, blocks, strided views", "[normalize][softmax]") {
  const RowMatrix<double> z = random_logits<double>(21, 7, 11, 1.0);
  const RowMatrix<double> reference = attnscope::softmax(z);
  const Eigen::MatrixXd column_major = z;
  CHECK(attnscope::softmax(column_major) == reference);
  const RowMatrix<double> big = random_logits<double>(22, 10, 20, 1.0);
  const RowMatrix<double> block_copy = big.block(2, 3, 5, 9);
  CHECK(attnscope::softmax(big.block(2, 3, 5, 9)) == attnscope::softmax(block_copy));  // outer stride 20, no copy
  CHECK(attnscope::softmax(column_major.transpose().transpose()) == reference);
  CHECK(attnscope::softmax(2.0 * z, 2.0).isApprox(reference, 1e-15));
}

TEST_CASE("softmax_into reuses, resizes or overwrites in place and equals softmax", "[normalize][softmax]") {
  const RowMatrix<double> z = random_logits<double>(51, 9, 33, 2.0);
  const RowMatrix<double> expected = attnscope::softmax(z, 0.5, attnscope::causal);
  RowMatrix<double> out(9, 33);
  const double* memory = out.data();
  attnscope::softmax_into(z, out, 0.5, attnscope::causal);
  CHECK(out == expected);
  CHECK(out.data() == memory);  // same shape: no reallocation
  RowMatrix<double> wrong_shape(2, 2);
  attnscope::softmax_into(z, wrong_shape, 0.5, attnscope::causal);
  CHECK(wrong_shape == expected);
  RowMatrix<double> in_place = z;
  attnscope::softmax_into(in_place, in_place, 0.5, attnscope::causal);
  CHECK(in_place == expected);
  attnscope::Mask mask = attnscope::Visibility(attnscope::causal).to_mask(9, 33);
  RowMatrix<double> masked_in_place = z;
  attnscope::softmax_into(masked_in_place, masked_in_place, 0.5, mask);
  CHECK(masked_in_place == expected);
  CHECK_THROWS_AS(attnscope::softmax_into(z, out, 0.0), attnscope::invalid_argument);
}

TEST_CASE("softmax results do not depend on the number of threads", "[normalize][softmax]") {
  const RowMatrix<float> z = random_logits<float>(31, 512, 300, 4.0);
#if defined(_OPENMP)
  const int previous = omp_get_max_threads();
  omp_set_num_threads(1);
  const RowMatrix<float> one = attnscope::softmax(z, 0.8f, attnscope::causal);
  omp_set_num_threads(2);
  const RowMatrix<float> two = attnscope::softmax(z, 0.8f, attnscope::causal);
  omp_set_num_threads(previous);
  CHECK(one == two);
#endif
  // row-by-row with the row kernel gives the same bits as the matrix call
  const RowMatrix<float> p = attnscope::softmax(z, 0.8f);
  std::vector<float> row(300);
  for (Index i = 0; i < z.rows(); i += 37) {
    attnscope::detail::softmax_row(z.data() + i * 300, 300, 1 / 0.8f, row.data());
    for (Index j = 0; j < 300; ++j) CHECK(row[static_cast<std::size_t>(j)] == p(i, j));
  }
}

TEST_CASE("softmax rejects bad input with a clear message naming function, row, column or value",
          "[normalize][softmax][errors]") {
  RowMatrix<double> z = random_logits<double>(41, 4, 6, 1.0);
  CHECK_THROWS_AS(attnscope::softmax(z, 0.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::softmax(z, -1.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::softmax(z, std::numeric_limits<double>::quiet_NaN()), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::softmax(z, std::numeric_limits<double>::infinity()), attnscope::invalid_argument);
  CHECK(error_message([&] { attnscope::softmax(z, 1e-320); }).find("too small") != std::string::npos);
  CHECK(error_message([&] { attnscope::softmax(RowMatrix<double>(0, 3)); }).find("empty") != std::string::npos);
  CHECK(error_message([&] { attnscope::softmax(RowMatrix<double>(3, 0)); }).find("empty") != std::string::npos);
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    RowMatrix<double> y = z;
    y(2, 5) = bad;
    const std::string message = error_message([&] { attnscope::softmax(y); });
    CHECK(message.find("attnscope::softmax") == 0);
    CHECK(message.find("row 2, column 5") != std::string::npos);
    // the lowest bad row is reported, also when rows run in parallel
    RowMatrix<double> many = random_logits<double>(42, 2000, 64, 1.0);
    many(1500, 3) = bad;
    many(700, 9) = bad;
    CHECK(error_message([&] { attnscope::softmax(many); }).find("row 700, column 9") != std::string::npos);
    // a bad logit under the causal mask is never read
    y(0, 5) = bad;
    y(2, 5) = 0;
    CHECK_NOTHROW(attnscope::softmax(y, 1.0, attnscope::causal));
  }
  attnscope::Mask wrong(3, 6);
  wrong.setConstant(true);
  CHECK(error_message([&] { attnscope::softmax(z, 1.0, wrong); }).find("shape mismatch") != std::string::npos);
  attnscope::Mask empty_row(4, 6);
  empty_row.setConstant(true);
  empty_row.row(1).setConstant(false);
  CHECK(error_message([&] { attnscope::softmax(z, 1.0, empty_row); }).find("row 1 has every key masked") !=
        std::string::npos);
  CHECK_THROWS_AS(attnscope::softmax(z, 1.0, attnscope::Causal{-1}), attnscope::invalid_argument);  // row 0 empty
  std::vector<float> row = {1, std::numeric_limits<float>::quiet_NaN(), 2}, out(3);
  CHECK(error_message([&] { attnscope::detail::softmax_row(row.data(), 3, 1.0f, out.data()); })
            .find("position 1") != std::string::npos);
  // validate_logits (used by the other maps) reports the same way
  RowMatrix<float> y = random_logits<float>(43, 3, 40, 1.0);
  y(1, 33) = std::numeric_limits<float>::infinity();
  CHECK(error_message([&] { attnscope::detail::validate_logits<float>("map", y, attnscope::Visibility{}); })
            .find("attnscope::map: non-finite logit inf at row 1, column 33") == 0);
}
