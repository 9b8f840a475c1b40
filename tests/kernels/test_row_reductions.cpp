// Row kernels (max with finiteness, statistics, sum and maxima, exp-and-sum, scale, secular sums) against their
// scalar references, for every length around the packet and unroll boundaries.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;

template <class Scalar>
std::vector<Scalar> random_row(attnscope::Random& random, Index n, double low, double high) {
  std::vector<Scalar> x(static_cast<std::size_t>(n));
  for (Scalar& value : x) value = static_cast<Scalar>(random.uniform(low, high));
  return x;
}

/// Lengths covering empty, shorter than a packet, the 4-packet unroll and tails (packets up to 16 lanes).
std::vector<Index> lengths() {
  std::vector<Index> n;
  for (Index i = 1; i <= 70; ++i) n.push_back(i);
  for (Index i : {127, 128, 129, 255, 256, 1000, 4096, 4099}) n.push_back(i);
  return n;
}

}  // namespace

TEMPLATE_TEST_CASE("row_max and row_min_max_sum equal their references and detect any non-finite entry",
                   "[kernels][reductions]", float, double) {
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(11);
  for (Index n : lengths()) {
    std::vector<TestType> x = random_row<TestType>(random, n, -100, 100);
    const auto max = attnscope::kernels::row_max(x.data(), n);
    const auto max_reference = attnscope::kernels::row_max_reference(x.data(), n);
    CHECK(max.max == max_reference.max);
    CHECK(max.finite);
    const auto statistics = attnscope::kernels::row_min_max_sum(x.data(), n);
    const auto statistics_reference = attnscope::kernels::row_min_max_sum_reference(x.data(), n);
    CHECK(statistics.min == statistics_reference.min);
    CHECK(statistics.max == statistics_reference.max);
    double absolute_sum = 0;
    for (TestType value : x) absolute_sum += std::fabs(value);
    CHECK(std::fabs(statistics.sum - statistics_reference.sum) <= 4 * n * limits::epsilon() * absolute_sum);
    // a bad value at each position (first, middle, last) is detected by both kernels
    for (Index position : {Index{0}, n / 2, n - 1})
      for (TestType bad : {limits::quiet_NaN(), limits::infinity(), -limits::infinity()}) {
        std::vector<TestType> y = x;
        y[static_cast<std::size_t>(position)] = bad;
        CHECK_FALSE(attnscope::kernels::row_max(y.data(), n).finite);
        CHECK_FALSE(attnscope::kernels::row_min_max_sum(y.data(), n).finite);
        CHECK_FALSE(attnscope::kernels::row_max_reference(y.data(), n).finite);
      }
  }
}

TEMPLATE_TEST_CASE("sum_and_maxima equals its reference, also on empty ranges", "[kernels][reductions]", float,
                   double) {
  attnscope::Random random(12);
  const auto empty = attnscope::kernels::sum_and_maxima(static_cast<const TestType*>(nullptr), 0);
  CHECK(empty.sum == 0);
  CHECK(empty.max == 0);
  CHECK(empty.max_bernoulli_variance == 0);
  for (Index n : lengths()) {
    const std::vector<TestType> p = random_row<TestType>(random, n, 0, 1);
    const auto fast = attnscope::kernels::sum_and_maxima(p.data(), n);
    const auto reference = attnscope::kernels::sum_and_maxima_reference(p.data(), n);
    CHECK(fast.max == reference.max);
    CHECK(fast.max_bernoulli_variance == reference.max_bernoulli_variance);
    CHECK(fast.sum == Approx(reference.sum).epsilon(n * std::numeric_limits<TestType>::epsilon()));
  }
}

TEMPLATE_TEST_CASE("probability_row_summary equals its reference: top two with ties, sums, sum over p <= 1/2",
                   "[kernels][reductions]", float, double) {
  attnscope::Random random(15);
  for (Index n : lengths()) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<TestType> p = random_row<TestType>(random, n, 0, 1.0 / static_cast<double>(n));
      if (variant == 1) p[random.below(p.size())] = TestType(0.75);         // one entry above 1/2
      if (variant == 2 && n > 1) p[0] = p[static_cast<std::size_t>(n - 1)] = TestType(0.3);  // tied maximum
      if (variant == 3) p[static_cast<std::size_t>(n / 2)] = TestType(0.5);  // exactly 1/2 counts as small
      const auto fast = attnscope::kernels::probability_row_summary(p.data(), n);
      const auto reference = attnscope::kernels::probability_row_summary_reference(p.data(), n);
      CHECK(fast.finite);
      CHECK(fast.min == reference.min);
      CHECK(fast.max == reference.max);
      CHECK(fast.second == reference.second);
      const double tolerance = 4 * n * std::numeric_limits<TestType>::epsilon();
      CHECK(fast.sum == Approx(reference.sum).epsilon(tolerance));
      CHECK(fast.sum_at_most_half == Approx(reference.sum_at_most_half).epsilon(tolerance).margin(1e-30));
      CHECK(fast.sum_of_squares == Approx(reference.sum_of_squares).epsilon(tolerance).margin(1e-30));
      if (variant == 2 && n > 1) CHECK(fast.second == fast.max);
      if (variant == 1) CHECK(fast.sum_at_most_half == Approx(fast.sum - TestType(0.75)).epsilon(1e-5));
    }
    std::vector<TestType> bad = random_row<TestType>(random, n, 0, 1);
    bad[static_cast<std::size_t>(n - 1)] = std::numeric_limits<TestType>::quiet_NaN();
    CHECK_FALSE(attnscope::kernels::probability_row_summary(bad.data(), n).finite);
  }
}

TEMPLATE_TEST_CASE("exp_shifted_with_summary: exact ones and largest below one wherever the maximum and its ties sit",
                   "[kernels][reductions]", float, double) {
  // The vector loop sums a block of four packets without masks when none of its exponentials is 1 and through the
  // masks otherwise: the maximum, a tie and a key rounding to 1 are put in every block, packet and tail
  // position, and the second largest key beside them or in another block.
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(1517);
  for (Index n : {Index(1), Index(7), Index(33), Index(64), Index(100), Index(131), Index(512)}) {
    const std::vector<TestType> base = random_row<TestType>(random, n, -12, -1);  // every key below the maximum 0
    const Index step = n > 100 ? 5 : 1;
    for (Index at = 0; at < n; at += step) {
      for (int variant = 0; variant < 4; ++variant) {
        std::vector<TestType> row = base;
        row[static_cast<std::size_t>(at)] = 0;  // the maximum
        const std::size_t other = static_cast<std::size_t>((at + 1 + (variant * 37) % std::max<Index>(n - 1, 1)) % n);
        if (n > 1 && static_cast<Index>(other) != at) {
          if (variant == 1) row[other] = 0;                         // a tie at the top
          if (variant == 2) row[other] = -limits::min();            // exp rounds to 1: counted as a one
          if (variant == 3) row[other] = TestType(-0.25);           // the second largest, alone
        }
        std::vector<TestType> out(base.size());
        const auto summary = attnscope::kernels::exp_shifted_with_summary(row.data(), n, TestType(0), TestType(1),
                                                                          out.data(), static_cast<const TestType*>(nullptr));
        long double ones = 0, below = 0, squares = 0;
        TestType largest_below = 0;
        for (const TestType value : out) {
          if (value == 1) {
            ones += 1;
          } else {
            below += value;
            largest_below = std::max(largest_below, value);
          }
          squares += static_cast<long double>(value) * value;
        }
        CAPTURE(n, at, variant, other);
        CHECK(summary.count_of_ones == static_cast<TestType>(ones));
        CHECK(summary.largest_below_one == largest_below);
        CHECK(std::fabs(summary.sum_below_one - below) <= 4 * (n + 1) * limits::epsilon() * below);
        CHECK(std::fabs(summary.sum_of_squares - squares) <= 4 * (n + 1) * limits::epsilon() * squares);
      }
    }
  }
}

TEMPLATE_TEST_CASE("exp_shifted_with_summary: the exponentials of exp_shifted_sum and an exact summary of them",
                   "[kernels][reductions]", float, double) {
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(16);
  for (Index n : lengths()) {
    std::vector<TestType> x = random_row<TestType>(random, n, -30, 30);
    const Index argmax = attnscope::kernels::find_first(x.data(), n, attnscope::kernels::row_max_reference(x.data(), n).max);
    // three rows: a unique maximum, a tie at the top, and a key so close below the maximum that its exponential
    // rounds to 1 (both ties count as ones)
    for (int variant = 0; variant < (n >= 2 ? 3 : 1); ++variant) {
      std::vector<TestType> row = x;
      const std::size_t other = static_cast<std::size_t>((argmax + 1) % n);
      if (variant == 1) row[other] = row[static_cast<std::size_t>(argmax)];
      if (variant == 2) {  // maximum 0 and a key at −FLT_MIN: exp(−FLT_MIN·scale) rounds to 1
        const TestType top = row[static_cast<std::size_t>(argmax)];
        for (TestType& value : row) value -= top;
        row[static_cast<std::size_t>(argmax)] = 0;
        row[other] = -limits::min();
      }
      const TestType shift = attnscope::kernels::row_max_reference(row.data(), n).max;
      for (TestType scale : {TestType(1), TestType(0.25), TestType(7)}) {
        std::vector<TestType> fast(row.size()), plain(row.size()), reference(row.size());
        const auto summary = attnscope::kernels::exp_shifted_with_summary(row.data(), n, shift, scale, fast.data(),
                                                                          row.data());  // prefetch: any row
        attnscope::kernels::exp_shifted_sum(row.data(), n, shift, scale, plain.data());
        CHECK(fast == plain);  // the same exponentials, bitwise
        const auto expected =
            attnscope::kernels::exp_shifted_with_summary_reference(row.data(), n, shift, scale, reference.data());
        long double ones = 0, below = 0, squares = 0;
        TestType largest_below = 0;
        for (std::size_t i = 0; i < row.size(); ++i) {
          CHECK(std::fabs(fast[i] - reference[i]) <= 3 * limits::epsilon() * reference[i] + limits::min());
          CHECK(fast[i] <= 1);
          if (fast[i] == 1) {
            ones += 1;
          } else {
            below += fast[i];
            largest_below = std::max(largest_below, fast[i]);
          }
          squares += static_cast<long double>(fast[i]) * fast[i];
        }
        CAPTURE(n, variant, scale);
        CHECK(summary.count_of_ones == static_cast<TestType>(ones));  // exact
        CHECK(summary.count_of_ones == (variant == 0 ? 1 : 2));
        CHECK(summary.largest_below_one == largest_below);  // exact
        CHECK(std::fabs(summary.sum_below_one - below) <= 4 * (n + 1) * limits::epsilon() * below);
        CHECK(std::fabs(summary.sum_of_squares - squares) <= 4 * (n + 1) * limits::epsilon() * squares);
        CHECK(expected.count_of_ones == summary.count_of_ones);
        CHECK(std::fabs(expected.sum_below_one - below) <= 8 * (n + 1) * limits::epsilon() * below);
      }
    }
  }
}

TEMPLATE_TEST_CASE("exp_shifted_sum and scale_row match their references", "[kernels][reductions]", float, double) {
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(13);
  for (Index n : lengths()) {
    const std::vector<TestType> x = random_row<TestType>(random, n, -30, 30);
    const TestType shift = attnscope::kernels::row_max_reference(x.data(), n).max;
    for (TestType scale : {TestType(1), TestType(0.25), TestType(7)}) {
      std::vector<TestType> fast(x.size()), reference(x.size());
      const TestType sum = attnscope::kernels::exp_shifted_sum(x.data(), n, shift, scale, fast.data());
      const TestType sum_reference =
          attnscope::kernels::exp_shifted_sum_reference(x.data(), n, shift, scale, reference.data());
      for (std::size_t i = 0; i < x.size(); ++i) {
        // ≤ 2 ULP (vector exp) + 1 ULP (std::exp), or both below the smallest normal number
        CHECK(std::fabs(fast[i] - reference[i]) <= 3 * limits::epsilon() * reference[i] + limits::min());
      }
      CHECK(sum == Approx(sum_reference).epsilon(4 * n * limits::epsilon()));
      CHECK(sum >= 1);  // the max contributes exp(0) = 1 exactly
      std::vector<TestType> scaled = fast, scaled_reference = fast;
      attnscope::kernels::scale_row(scaled.data(), n, TestType(1) / sum);
      attnscope::kernels::scale_row_reference(scaled_reference.data(), n, TestType(1) / sum);
      CHECK(scaled == scaled_reference);  // one rounding per entry either way: bitwise equal
    }
  }
}

TEMPLATE_TEST_CASE("exp_shifted_sum_and_spread: exp_shifted_sum's exponentials and sum bit for bit, and the spread "
                   "sum e_i (shift - x_i) of a long-double evaluation; with it, a softmax row's entropy",
                   "[kernels][reductions]", float, double) {
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(17);
  for (Index n : lengths()) {
    const std::vector<TestType> x = random_row<TestType>(random, n, -30, 30);
    const TestType shift = attnscope::kernels::row_max_reference(x.data(), n).max;
    for (TestType scale : {TestType(1), TestType(0.25), TestType(7)}) {
      std::vector<TestType> plain(x.size()), got(x.size()), reference(x.size());
      const TestType plain_sum = attnscope::kernels::exp_shifted_sum(x.data(), n, shift, scale, plain.data());
      TestType spread = -1;
      const TestType sum = attnscope::kernels::exp_shifted_sum_and_spread(x.data(), n, shift, scale, got.data(), spread);
      CHECK(sum == plain_sum);
      CHECK(got == plain);
      std::vector<TestType> aliased = x;  // out = x: the gaps are read before the exponentials replace them
      TestType aliased_spread = -1;
      const TestType aliased_sum = attnscope::kernels::exp_shifted_sum_and_spread(
          aliased.data(), n, shift, scale, aliased.data(), aliased_spread);
      CHECK(aliased_sum == sum);
      CHECK(aliased == plain);
      CHECK(aliased_spread == spread);
      TestType reference_spread = -1;
      const TestType reference_sum = attnscope::kernels::exp_shifted_sum_and_spread_reference(
          x.data(), n, shift, scale, reference.data(), reference_spread);
      CHECK(reference_sum == Approx(sum).epsilon(4 * n * limits::epsilon()));
      // every term e_i (shift − x_i) is ≥ 0, so the errors add up term by term: e_i has ≤ 3 ULP from the exp plus the
      // rounding of its argument scale·(x_i − shift) (2 ULP of |argument|, relative error of e_i ≤ 2|a|·ε), the gap
      // 1 ULP, the product 1, and the sum n − 1 roundings
      long double exact = 0, exact_sum = 0, exact_entropy = 0, bound_terms = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const long double gap = static_cast<long double>(shift) - static_cast<long double>(x[i]);
        const long double argument = static_cast<long double>(scale) * gap;
        const long double e = std::exp(-argument);
        exact += e * gap;
        exact_sum += e;
        bound_terms += e * gap * (2 * argument + static_cast<long double>(n + 8));
      }
      for (std::size_t i = 0; i < x.size(); ++i) {
        const long double gap = static_cast<long double>(shift) - static_cast<long double>(x[i]);
        const long double p = std::exp(-static_cast<long double>(scale) * gap) / exact_sum;
        if (p > 0) exact_entropy -= p * std::log(p);
      }
      const double bound = 2.0 * limits::epsilon() * static_cast<double>(bound_terms) +
                           static_cast<double>(n) * limits::min();
      INFO("n = " << n << ", scale = " << scale << ", spread = " << spread << ", reference " << reference_spread
                  << ", exact " << static_cast<double>(exact) << ", bound " << bound);
      CHECK(std::fabs(static_cast<double>(spread) - static_cast<double>(exact)) <= bound);
      CHECK(std::fabs(static_cast<double>(reference_spread) - static_cast<double>(exact)) <= bound);
      CHECK(spread >= 0);
      // H = log S + scale·spread / S [derived]: −log p_i = log S + scale·(shift − x_i)
      const double entropy = std::log(static_cast<double>(sum)) +
                             static_cast<double>(scale) * static_cast<double>(spread) / static_cast<double>(sum);
      CHECK(entropy == Approx(static_cast<double>(exact_entropy))
                           .epsilon(4 * static_cast<double>(n + 8) * limits::epsilon())
                           .margin(4 * static_cast<double>(n + 8) * limits::epsilon()));
    }
  }
}

TEMPLATE_TEST_CASE("secular_power_sums matches a long-double evaluation of c_k = sum p_i/(p_i - lambda)^k, k = 1..5",
                   "[kernels][secular]", float, double) {
  attnscope::Random random(15);
  using limits = std::numeric_limits<TestType>;
  for (Index n : lengths()) {
    std::vector<TestType> p = random_row<TestType>(random, n, 0, 1);
    p[static_cast<std::size_t>(n / 3)] = 0;  // zero entries contribute exactly 0
    std::vector<TestType> sorted = p;
    std::sort(sorted.begin(), sorted.end(), std::greater<TestType>());
    // λ above every entry (every term of one sign) and, for n ≥ 2, strictly between the two largest (mixed signs)
    std::vector<TestType> lambdas = {sorted[0] * TestType(1.5) + TestType(0.01)};
    if (n >= 2 && sorted[1] < sorted[0]) lambdas.push_back(sorted[1] + (sorted[0] - sorted[1]) / 3);
    for (TestType lambda : lambdas) {
      const auto fast = attnscope::kernels::secular_power_sums(p.data(), n, lambda);
      const auto reference = attnscope::kernels::secular_power_sums_reference(p.data(), n, lambda);
      for (std::size_t k = 0; k < 5; ++k) {
        long double exact = 0, magnitude = 0;  // Σ p_i/(p_i − λ)^(k+1) and Σ of its terms' magnitudes
        for (TestType pi : p) {
          const long double term = pi / std::pow(static_cast<long double>(pi) - lambda, static_cast<int>(k + 1));
          exact += term;
          magnitude += std::fabs(term);
        }
        // each term carries ≤ k + 2 roundings, the sum ≤ n more: an error bound relative to Σ|terms|
        const long double bound = (4 * (n + 2) + 8 * (k + 2)) * limits::epsilon() * magnitude;
        CAPTURE(n, k, lambda);
        CHECK(std::fabs(fast.c[k] - exact) <= bound);
        CHECK(std::fabs(reference.c[k] - exact) <= bound);
      }
    }
  }
}

TEMPLATE_TEST_CASE("secular_power_sums_and_row_max is bitwise secular_power_sums and row_max of the next row",
                   "[kernels][secular]", float, double) {
  attnscope::Random random(16);
  using limits = std::numeric_limits<TestType>;
  for (Index n : lengths()) {
    const std::vector<TestType> p = random_row<TestType>(random, n, 0, 1);
    const TestType lambda = TestType(1.25);  // above every p_i
    const auto expected_sums = attnscope::kernels::secular_power_sums(p.data(), n, lambda);
    // the next row shorter, as long, one longer (causal rows) and much longer; also empty
    for (Index next_n : {Index{0}, n - 1, n, n + 1, n + 17, 2 * n + 40}) {
      if (next_n < 0) continue;
      std::vector<TestType> next = random_row<TestType>(random, next_n, -50, 50);
      if (next_n > 0) next[static_cast<std::size_t>(random.below(static_cast<std::uint64_t>(next_n)))] = 60;  // the max
      attnscope::kernels::MaxAndFiniteness<TestType> max{0, false};
      const auto sums =
          attnscope::kernels::secular_power_sums_and_row_max(p.data(), n, lambda, next.data(), next_n, max);
      CAPTURE(n, next_n);
      for (std::size_t k = 0; k < 5; ++k) CHECK(sums.c[k] == expected_sums.c[k]);
      CHECK(max.finite);
      CHECK(max.max == (next_n > 0 ? TestType(60) : -limits::infinity()));
      if (next_n > 0) CHECK(max.max == attnscope::kernels::row_max_reference(next.data(), next_n).max);
      // a NaN or ±inf anywhere in the next row, inside or beyond the common length, clears `finite`
      for (Index bad_at : {Index{0}, next_n / 2, next_n - 1}) {
        if (next_n == 0) break;
        for (TestType bad_value : {limits::quiet_NaN(), limits::infinity(), -limits::infinity()}) {
          std::vector<TestType> bad = next;
          bad[static_cast<std::size_t>(bad_at)] = bad_value;
          attnscope::kernels::MaxAndFiniteness<TestType> bad_max{0, true};
          const auto bad_sums =
              attnscope::kernels::secular_power_sums_and_row_max(p.data(), n, lambda, bad.data(), next_n, bad_max);
          CAPTURE(bad_at, bad_value);
          CHECK_FALSE(bad_max.finite);
          CHECK(bad_sums.c[0] == expected_sums.c[0]);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("secular_sums matches a long-double evaluation of g and g'", "[kernels][secular]", float,
                   double) {
  attnscope::Random random(14);
  for (Index n : lengths()) {
    std::vector<TestType> p = random_row<TestType>(random, n, 0, 1);
    p[static_cast<std::size_t>(n / 3)] = 0;  // zero entries contribute exactly 0
    TestType largest = 0;
    for (TestType value : p) largest = std::max(largest, value);
    const TestType lambda = largest * TestType(1.5) + TestType(0.01);  // above every p_i: all terms negative
    const auto fast = attnscope::kernels::secular_sums(p.data(), n, lambda);
    const auto reference = attnscope::kernels::secular_sums_reference(p.data(), n, lambda);
    long double value = 0, derivative = 0;
    for (TestType pi : p) {
      const long double inverse = 1.0L / (static_cast<long double>(pi) - lambda);
      value += pi * inverse;
      derivative += pi * inverse * inverse;
    }
    const double tolerance = 4 * (n + 2) * std::numeric_limits<TestType>::epsilon();
    CHECK(static_cast<double>(fast.value) == Approx(static_cast<double>(value)).epsilon(tolerance));
    CHECK(static_cast<double>(fast.derivative) == Approx(static_cast<double>(derivative)).epsilon(tolerance));
    CHECK(static_cast<double>(reference.value) == Approx(static_cast<double>(value)).epsilon(tolerance));
  }
}
