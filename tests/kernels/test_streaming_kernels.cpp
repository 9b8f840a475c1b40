// The kernels added for rows streamed from and to memory: scale_row_into, exp_shifted_scaled_row,
// fill_row, the prefetching exp_shifted_sum and exp_shifted_total, with and without streaming stores, at every
// alignment of the output and every length around the packet and unroll boundaries, against their scalar
// references and against the existing kernels (bitwise where the arithmetic is the same).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels.hpp"
#include "attnscope/kernels/stream_store.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;

/// Lengths covering short rows, the 4-packet unroll and tails (packets up to 16 lanes).
std::vector<Index> streaming_lengths() {
  std::vector<Index> n;
  for (Index i = 0; i <= 70; ++i) n.push_back(i);
  for (Index i : {127, 128, 129, 255, 256, 1000, 4096, 4099}) n.push_back(i);
  return n;
}

template <class Scalar>
std::vector<Scalar> uniform_row(attnscope::Random& random, Index n, double low, double high) {
  std::vector<Scalar> x(static_cast<std::size_t>(n));
  for (Scalar& value : x) value = static_cast<Scalar>(random.uniform(low, high));
  return x;
}

/// Bitwise equality of two float arrays (NaN-free here).
template <class Scalar>
bool same_bits(const Scalar* a, const Scalar* b, Index n) {
  return n == 0 || std::memcmp(a, b, sizeof(Scalar) * static_cast<std::size_t>(n)) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("scale_row_into and fill_row equal their references for every length, alignment and store kind",
                   "[kernels][streaming]", float, double) {
  attnscope::Random random(151);
  for (Index n : streaming_lengths()) {
    const std::vector<TestType> x = uniform_row<TestType>(random, n, -10, 10);
    const TestType factor = static_cast<TestType>(random.uniform(0.1, 3));
    std::vector<TestType> reference(x.size());
    attnscope::kernels::scale_row_into_reference(x.data(), n, factor, reference.data());
    std::vector<TestType> in_place = x;
    attnscope::kernels::scale_row(in_place.data(), n, factor);
    CHECK(same_bits(in_place.data(), reference.data(), n));  // one rounding per entry: bitwise equal
    for (Index offset = 0; offset < 4; ++offset) {  // output misaligned by 0..3 entries
      for (bool streaming : {false, true}) {
        std::vector<TestType> storage(x.size() + 8, TestType(-7));
        TestType* out = storage.data() + offset;
        attnscope::kernels::scale_row_into(x.data(), n, factor, out, streaming);
        CHECK(same_bits(out, reference.data(), n));
        CHECK(out[n] == TestType(-7));  // nothing written past the end
        if (offset > 0) CHECK(storage[static_cast<std::size_t>(offset - 1)] == TestType(-7));
        attnscope::kernels::fill_row(out, n, TestType(0.25), streaming);
        for (Index i = 0; i < n; ++i) CHECK(out[i] == TestType(0.25));
        CHECK(out[n] == TestType(-7));
      }
    }
  }
}

TEMPLATE_TEST_CASE("scale_row_into_and_row_max is bitwise scale_row_into and row_max of the next row",
                   "[kernels][streaming]", float, double) {
  attnscope::Random random(152);
  for (Index n : streaming_lengths()) {
    if (n == 0) continue;
    const std::vector<TestType> x = uniform_row<TestType>(random, n, 0, 1);
    const TestType factor = static_cast<TestType>(random.uniform(0.1, 3));
    std::vector<TestType> reference(x.size());
    attnscope::kernels::scale_row_into_reference(x.data(), n, factor, reference.data());
    for (Index next_n : {n - 1, n, n + 1, n + 9}) {  // causal rows grow by one key; other lengths too
      if (next_n < 1) continue;
      std::vector<TestType> next = uniform_row<TestType>(random, next_n, -40, 40);
      const auto expected = attnscope::kernels::row_max_reference(next.data(), next_n);
      for (Index offset = 0; offset < 3; ++offset) {
        for (bool streaming : {false, true}) {
          std::vector<TestType> storage(x.size() + 8, TestType(-7));
          TestType* out = storage.data() + offset;
          const auto max =
              attnscope::kernels::scale_row_into_and_row_max(x.data(), n, factor, out, streaming, next.data(), next_n);
          CHECK(same_bits(out, reference.data(), n));
          CHECK(out[n] == TestType(-7));
          CHECK(max.finite);
          CHECK(max.max == expected.max);
        }
      }
      // a non-finite entry anywhere in the next row, inside or beyond the common length, clears `finite`
      for (Index bad_at : {Index{0}, next_n / 2, next_n - 1}) {
        std::vector<TestType> bad = next;
        bad[static_cast<std::size_t>(bad_at)] = std::numeric_limits<TestType>::quiet_NaN();
        std::vector<TestType> out(x.size());
        CHECK_FALSE(attnscope::kernels::scale_row_into_and_row_max(x.data(), n, factor, out.data(), true, bad.data(),
                                                                   next_n)
                        .finite);
        bad[static_cast<std::size_t>(bad_at)] = -std::numeric_limits<TestType>::infinity();
        CHECK_FALSE(attnscope::kernels::scale_row_into_and_row_max(x.data(), n, factor, out.data(), false, bad.data(),
                                                                   next_n)
                        .finite);
      }
    }
  }
}

TEMPLATE_TEST_CASE("exp_shifted_total and the prefetching exp_shifted_sum give the bits of exp_shifted_sum",
                   "[kernels][streaming]", float, double) {
  attnscope::Random random(152);
  for (Index n : streaming_lengths()) {
    if (n == 0) continue;
    const std::vector<TestType> x = uniform_row<TestType>(random, n, -30, 30);
    const std::vector<TestType> next = uniform_row<TestType>(random, n, -30, 30);
    const TestType shift = attnscope::kernels::row_max_reference(x.data(), n).max;
    for (TestType scale : {TestType(1), TestType(0.25), TestType(7)}) {
      std::vector<TestType> plain(x.size()), prefetching(x.size());
      const TestType sum = attnscope::kernels::exp_shifted_sum(x.data(), n, shift, scale, plain.data());
      const TestType sum_prefetching =
          attnscope::kernels::exp_shifted_sum(x.data(), n, shift, scale, prefetching.data(), next.data());
      CHECK(sum_prefetching == sum);
      CHECK(same_bits(prefetching.data(), plain.data(), n));
      CHECK(attnscope::kernels::exp_shifted_total(x.data(), n, shift, scale) == sum);
      const TestType no_prefetch =
          attnscope::kernels::exp_shifted_sum(x.data(), n, shift, scale, prefetching.data(), static_cast<const TestType*>(nullptr));
      CHECK(no_prefetch == sum);
    }
  }
}

TEMPLATE_TEST_CASE("exp_shifted_scaled_row: the exponentials of exp_shifted_sum times the factor, the same bits "
                   "with streaming stores, within the contract of its scalar reference",
                   "[kernels][streaming]", float, double) {
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(153);
  for (Index n : streaming_lengths()) {
    if (n == 0) continue;
    const std::vector<TestType> x = uniform_row<TestType>(random, n, -40, 40);
    const TestType shift = attnscope::kernels::row_max_reference(x.data(), n).max;
    const TestType scale = TestType(0.5), factor = TestType(0.125);
    std::vector<TestType> exponentials(x.size()), reference(x.size());
    attnscope::kernels::exp_shifted_sum(x.data(), n, shift, scale, exponentials.data());
    attnscope::kernels::scale_row(exponentials.data(), n, factor);  // factor a power of two: exact
    attnscope::kernels::exp_shifted_scaled_row_reference(x.data(), n, shift, scale, factor, reference.data());
    const Index body = n - n % attnscope::kernels::exp_loop_packet_size<TestType>();  // both use the packet exp
    std::vector<TestType> ordinary(x.size());
    attnscope::kernels::exp_shifted_scaled_row(x.data(), n, shift, scale, factor, ordinary.data(), false);
    CHECK(same_bits(ordinary.data(), exponentials.data(), body));
    for (Index offset : {0, 1, 3}) {
      std::vector<TestType> storage(x.size() + 8, TestType(-1));
      TestType* out = storage.data() + offset;
      attnscope::kernels::exp_shifted_scaled_row(x.data(), n, shift, scale, factor, out, true);
      CHECK(same_bits(out, ordinary.data(), n));  // streaming or not: the same bits
      CHECK(out[n] == TestType(-1));
      for (Index i = 0; i < n; ++i)  // ≤ 2 ULP (vector exp) + 1 ULP (std::exp), or below the smallest normal
        CHECK(std::fabs(out[i] - reference[i]) <= 3 * limits::epsilon() * reference[i] + limits::min());
    }
  }
}

TEST_CASE("streaming stores are real non-temporal stores on x86 with SSE2 or wider", "[kernels][streaming]") {
#if defined(__SSE2__) && !defined(EIGEN_DONT_VECTORIZE)
  CHECK(attnscope::kernels::has_streaming_stores<float>);
  CHECK(attnscope::kernels::has_streaming_stores<double>);
#else
  CHECK_FALSE(attnscope::kernels::has_streaming_stores<float>);  // ordinary stores: the same results
#endif
}

TEMPLATE_TEST_CASE("tail_sum and shifted_positive_part (the sparsemax filter and output) equal their references",
                   "[kernels][sparsemax]", float, double) {
  attnscope::Random random(154);
  for (Index n : streaming_lengths()) {
    const std::vector<TestType> x = uniform_row<TestType>(random, n, -3, 3);
    const TestType shift = n > 0 ? attnscope::kernels::row_max_reference(x.data(), n).max : TestType(0);
    for (TestType threshold : {TestType(-10), TestType(-1), TestType(-0.25), TestType(0), TestType(0.5)}) {
      const auto fast = attnscope::kernels::tail_sum(x.data(), n, shift, threshold);
      const auto reference = attnscope::kernels::tail_sum_reference(x.data(), n, shift, threshold);
      CHECK(fast.count == reference.count);  // the same comparisons on the same shifted values
      double absolute = 0;
      for (TestType value : x) absolute += std::fabs(static_cast<double>(value - shift));
      CHECK(std::fabs(static_cast<double>(fast.sum - reference.sum)) <=
            4.0 * static_cast<double>(n) * std::numeric_limits<TestType>::epsilon() * absolute);
      std::vector<TestType> out(x.size()), expected(x.size());
      attnscope::kernels::shifted_positive_part(x.data(), n, shift, threshold, out.data());
      attnscope::kernels::shifted_positive_part_reference(x.data(), n, shift, threshold, expected.data());
      CHECK(out == expected);
    }
  }
  const TestType row[] = {TestType(1), TestType(1), TestType(0.5)};
  const auto ties = attnscope::kernels::tail_sum(row, 3, TestType(1), TestType(0));  // x − shift ≥ 0 keeps ties
  CHECK(ties.count == 2);
  CHECK(ties.sum == 0);
}
