// softmax_into on prefix visibilities runs rows through an L1-resident buffer with a prefetch of the next row, and
// writes outputs of at least kernels::streaming_store_threshold_bytes with non-temporal stores. Either
// way the result must be bitwise the row kernel try_softmax_row (whose accuracy tests/normalize/test_softmax.cpp
// states), masked entries exactly 0, in place too, and within the softmax contract of a long-double reference.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels/stream_store.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "support/catch.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

/// Row-kernel softmax of every row over its prefix (the reference layout: zeros after the prefix).
template <class Scalar>
RowMatrix<Scalar> softmax_by_row_kernel(const RowMatrix<Scalar>& z, Scalar temperature,
                                        const attnscope::Visibility& visibility) {
  RowMatrix<Scalar> p = RowMatrix<Scalar>::Zero(z.rows(), z.cols());
  for (Index i = 0; i < z.rows(); ++i) {
    const Index n = visibility.prefix_length(i, z.cols());
    REQUIRE(attnscope::detail::try_softmax_row(z.data() + i * z.cols(), n, Scalar(1) / temperature,
                                               p.data() + i * z.cols()));
  }
  return p;
}

template <class Scalar>
bool bitwise_equal_matrices(const RowMatrix<Scalar>& a, const RowMatrix<Scalar>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(Scalar) * static_cast<std::size_t>(a.size())) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("softmax_into with streaming stores (outputs above the threshold) is bitwise the row kernel",
                   "[normalize][softmax][streaming]", float, double) {
  // rows × cols with rows·cols·sizeof ≥ the threshold; odd column count so rows start at every alignment
  const Index cols = 1027;
  const Index rows =
      static_cast<Index>(attnscope::kernels::streaming_store_threshold_bytes / sizeof(TestType)) / cols + 3;
  const RowMatrix<TestType> z = attnscope::testing::random_logits<double>(1501, rows, cols, 4.0).template cast<TestType>();
  for (const attnscope::Visibility& visibility :
       {attnscope::Visibility{}, attnscope::Visibility{attnscope::Causal{0}}, attnscope::Visibility{attnscope::Causal{3}}}) {
    const TestType temperature = TestType(0.7);
    const RowMatrix<TestType> expected = softmax_by_row_kernel(z, temperature, visibility);
    RowMatrix<TestType> out = RowMatrix<TestType>::Constant(rows, cols, TestType(-1));  // reused, garbage inside
    attnscope::softmax_into(z, out, temperature, visibility);
    CHECK(bitwise_equal_matrices(out, expected));
    RowMatrix<TestType> in_place = z;  // softmax_into(z, z)
    attnscope::softmax_into(in_place, in_place, temperature, visibility);
    CHECK(bitwise_equal_matrices(in_place, expected));
  }
}

TEMPLATE_TEST_CASE("softmax_into below the streaming threshold is bitwise the row kernel, within the contract of a "
                   "long-double softmax",
                   "[normalize][softmax][streaming]", float, double) {
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(1502);
  // up to 8 KiB rows the next row's max is taken in the scale pass: 513 (double) and 1500 (float) are on that side,
  // 1500 (double) and 2500 on the other
  for (Index cols : {1, 2, 7, 8, 9, 31, 33, 64, 100, 513, 1500, 2500}) {
    const Index rows = 150;  // more than two blocks of 64 rows, the last one partial
    const RowMatrix<TestType> z =
        attnscope::testing::random_logits<double>(random, rows, cols, 5.0).template cast<TestType>();
    for (const attnscope::Visibility& visibility :
         {attnscope::Visibility{}, attnscope::Visibility{attnscope::Causal{0}}}) {
      const RowMatrix<TestType> expected = softmax_by_row_kernel(z, TestType(1), visibility);
      RowMatrix<TestType> out;
      attnscope::softmax_into(z, out, TestType(1), visibility);
      CHECK(bitwise_equal_matrices(out, expected));
      for (Index i = 0; i < rows; ++i) {
        const Index n = visibility.prefix_length(i, cols);
        long double max = z(i, 0), sum = 0;
        for (Index j = 0; j < n; ++j) max = std::max(max, static_cast<long double>(z(i, j)));
        for (Index j = 0; j < n; ++j) sum += std::exp(static_cast<long double>(z(i, j)) - max);
        for (Index j = 0; j < cols; ++j) {
          if (j >= n) {
            CHECK(out(i, j) == 0);
            continue;
          }
          const long double t = static_cast<long double>(z(i, j)) - max;
          const long double exact = std::exp(t) / sum;
          // (8 + 2|t|)·eps relative, or below the smallest normal number (docs/api/kernels.md, softmax)
          CHECK(std::fabs(out(i, j) - exact) <=
                (8 + 2 * std::fabs(t)) * limits::epsilon() * exact + limits::min());
        }
      }
    }
  }
}
