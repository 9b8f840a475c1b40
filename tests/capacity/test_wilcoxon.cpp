// Wilcoxon signed-rank test (capacity/wilcoxon.hpp) against scipy golden values, symmetry and error classes.
#include <cmath>
#include <limits>
#include <vector>

#include "attnscope/capacity/wilcoxon.hpp"
#include "support/catch.hpp"

using namespace attnscope::capacity;

namespace {

/// Deterministic paired samples a_i = sin(1.7 i + 0.3), b_i = 0.8 cos(0.9 i) + shift (i = 0..n−1), the same formula
/// the golden values were generated from.
void paired_series(int n, double shift, std::vector<double>& a, std::vector<double>& b) {
  a.clear();
  b.clear();
  for (int i = 0; i < n; ++i) {
    a.push_back(std::sin(1.7 * i + 0.3));
    b.push_back(0.8 * std::cos(0.9 * i) + shift);
  }
}

}  // namespace

TEST_CASE("wilcoxon_signed_rank matches scipy.stats.wilcoxon", "[capacity][wilcoxon]") {
  // Golden values: scipy 1.10.1 (Debian python3-scipy, run with /usr/bin/python3):
  //   scipy.stats.wilcoxon(a, b, zero_method="wilcox", correction=False, alternative="two-sided", method=M)
  // with a, b from paired_series(n, shift) computed by Python's math.sin / math.cos; (statistic, pvalue) printed
  // with repr().
  struct Golden {
    int n;
    double shift;
    WilcoxonMethod method;
    double statistic, p_value;
  };
  const Golden goldens[] = {
      {10, 0.1, WilcoxonMethod::exact, 25.0, 0.845703125},
      {25, 0.2, WilcoxonMethod::exact, 139.0, 0.5424043536186218},
      {50, 0.15, WilcoxonMethod::exact, 532.0, 0.31366564109611517},
      {20, 0.6, WilcoxonMethod::exact, 44.0, 0.021484375},
      {40, 0.5, WilcoxonMethod::exact, 205.0, 0.005096850996778812},
      {12, -0.7, WilcoxonMethod::exact, 10.0, 0.02099609375},
      {60, 0.1, WilcoxonMethod::normal, 807.0, 0.4265826005770048},
      {200, 0.05, WilcoxonMethod::normal, 9441.0, 0.45743104297523596},
      {80, 0.4, WilcoxonMethod::normal, 910.0, 0.0006607593871152472},
  };
  std::vector<double> a, b;
  for (const Golden& golden : goldens) {
    paired_series(golden.n, golden.shift, a, b);
    const WilcoxonResult result = wilcoxon_signed_rank(a, b, golden.method);
    INFO("n = " << golden.n << ", shift = " << golden.shift);
    CHECK(result.statistic == golden.statistic);
    CHECK(result.p_value == Approx(golden.p_value).epsilon(1e-10));
    CHECK(result.nonzero == golden.n);
    CHECK(result.exact == (golden.method == WilcoxonMethod::exact));
    // scipy's "auto": exact for n <= 50 without ties, normal otherwise.
    const WilcoxonResult automatic = wilcoxon_signed_rank(a, b);
    CHECK(automatic.exact == (golden.n <= 50));
    if (automatic.exact == result.exact) CHECK(automatic.p_value == result.p_value);
  }
  // Ties and zero differences (dropped): d = a − b has 3 zeros and tied |d|; scipy method="approx" gives
  // statistic 32.5, pvalue 0.9640041927925764.
  const std::vector<double> tied_a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const std::vector<double> tied_b{2, 2, 1, 6, 3, 6, 9, 5, 13, 10, 8, 15, 10, 16};
  const WilcoxonResult tied = wilcoxon_signed_rank(tied_a, tied_b);
  CHECK(tied.statistic == 32.5);
  CHECK(tied.nonzero == 11);
  CHECK_FALSE(tied.exact);  // ties force the normal approximation
  CHECK(tied.p_value == Approx(0.9640041927925764).epsilon(1e-10));
  CHECK_THROWS_AS(wilcoxon_signed_rank(tied_a, tied_b, WilcoxonMethod::exact), attnscope::invalid_argument);
}

TEST_CASE("wilcoxon_signed_rank: hand cases, symmetry and shift invariance", "[capacity][wilcoxon]") {
  // d = (1, 2, 3, 4, 5) all positive: W+ = 15, T = 0; exact P = 2 · 1/32.
  const WilcoxonResult all_positive = wilcoxon_signed_rank({2, 4, 6, 8, 10}, {1, 2, 3, 4, 5});
  CHECK(all_positive.positive_rank_sum == 15);
  CHECK(all_positive.statistic == 0);
  CHECK(all_positive.p_value == Approx(2.0 / 32));
  // Swapping the samples swaps W+ and W− but keeps T and p; adding a constant to both changes nothing.
  std::vector<double> a, b;
  paired_series(33, 0.3, a, b);
  const WilcoxonResult forward = wilcoxon_signed_rank(a, b), backward = wilcoxon_signed_rank(b, a);
  CHECK(forward.statistic == backward.statistic);
  CHECK(forward.p_value == Approx(backward.p_value));
  CHECK(forward.positive_rank_sum + backward.positive_rank_sum == Approx(33.0 * 34 / 2));
  std::vector<double> a_shift = a, b_shift = b;
  for (std::size_t i = 0; i < a.size(); ++i) a_shift[i] += 0.25, b_shift[i] += 0.25;
  CHECK(wilcoxon_signed_rank(a_shift, b_shift).statistic == forward.statistic);
  // The exact null sums to 1: with T at its maximum n(n+1)/4 the two-sided p-value is capped at 1.
  const WilcoxonResult balanced = wilcoxon_signed_rank({1, -2, -3, 4}, {0, 0, 0, 0});  // W+ = 5 = W−
  CHECK(balanced.statistic == 5);
  CHECK(balanced.p_value == 1.0);
  // Exact and normal agree roughly at n = 50.
  paired_series(50, 0.4, a, b);
  CHECK(wilcoxon_signed_rank(a, b, WilcoxonMethod::exact).p_value ==
        Approx(wilcoxon_signed_rank(a, b, WilcoxonMethod::normal).p_value).epsilon(0.1));
  // Identical samples: no non-zero difference, p = 1.
  const WilcoxonResult same = wilcoxon_signed_rank({1, 2, 3}, {1, 2, 3});
  CHECK(same.nonzero == 0);
  CHECK(same.p_value == 1.0);
}

TEST_CASE("wilcoxon_signed_rank rejects bad input", "[capacity][wilcoxon]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(wilcoxon_signed_rank({1, 2}, {1}), attnscope::invalid_argument);
  CHECK_THROWS_AS(wilcoxon_signed_rank({}, {}), attnscope::invalid_argument);
  CHECK_THROWS_AS(wilcoxon_signed_rank({1, nan}, {1, 2}), attnscope::invalid_argument);
  CHECK_THROWS_AS(wilcoxon_signed_rank({1, 2}, {1, std::numeric_limits<double>::infinity()}),
                  attnscope::invalid_argument);
  std::vector<double> many(1001), zeros(1001, 0.0);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = 1.0 + double(i);
  CHECK_THROWS_AS(wilcoxon_signed_rank(many, zeros, WilcoxonMethod::exact), attnscope::invalid_argument);
}
