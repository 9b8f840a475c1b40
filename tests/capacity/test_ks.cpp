// Two-sample Kolmogorov–Smirnov test and the critical top-N search (arXiv:2508.17821 Alg. 3).
// Golden values: scipy 1.10.1, scipy.stats.ks_2samp(a, b, method='exact') and scipy.stats.kstwobign (Kolmogorov
// distribution), computed once on the literal samples below.
#include <cmath>
#include <vector>

#include "attnscope/capacity/critical_top_n.hpp"
#include "attnscope/capacity/ks_test.hpp"
#include "random_instances.hpp"

using namespace attnscope;
using namespace attnscope::capacity;
using namespace attnscope::testing;

namespace {

std::vector<double> golden_sequence(int count, double step, double power) {
  std::vector<double> out;
  for (int i = 1; i <= count; ++i) out.push_back(std::pow(std::fmod(i * step, 1.0), power));
  return out;
}

}  // namespace

TEST_CASE("KS exact p-values match scipy.stats.ks_2samp", "[capacity][ks]") {
  {
    const std::vector<double> a{0.1, 0.5, 0.9, 1.3, 2.2, 3.1, 0.05}, b{0.7, 1.8, 2.5, 2.6, 3.3, 4.0, 5.1, 0.2, 0.3};
    const KsResult r = ks_2samp(a, b);
    CHECK(r.exact);
    CHECK(r.statistic == Approx(0.4126984126984127).epsilon(1e-14));
    CHECK(r.p_value == Approx(0.4302447552447553).epsilon(1e-12));
  }
  {  // 40 vs 40 (the stories260K head count) with many ties
    const std::vector<double> a{1.3,  1.8,  -0.8, 0.4,  -0.1, -0.1, 0.4,  -0.2, -1.2, -0.4, -0.7, 0.4, -0.3, -1.0,
                                -0.3, 0.9,  0.9,  0.8,  0.6,  -0.3, 2.3,  0.3,  1.3,  -0.6, -0.2, -1.0, 0.2, 0.8,
                                2.8,  -1.4, -1.8, 0.2,  1.6,  0.1,  -0.2, 0.9,  -2.5, 0.2,  -0.2, -1.8};
    const std::vector<double> b{0.8, 2.5, 0.3,  0.3,  0.8,  0.5,  0.1, -1.2, 0.1, -0.1, 1.1, 0.6, 1.1, 1.5,
                                -0.6, -0.6, 0.7, 1.4, 0.8,  -0.3, -0.8, 1.0, -0.0, -0.8, 1.5, 0.8, 0.3, 1.3,
                                1.0, 0.1,  0.2,  1.5,  0.4,  0.0, -0.2, 1.3, 0.8,  0.6, 0.3, 1.0};
    const KsResult r = ks_2samp(a, b);
    CHECK(r.statistic == Approx(0.3).epsilon(1e-14));
    CHECK(r.p_value == Approx(0.054141077480362725).epsilon(1e-10));
  }
  {  // 25 vs 60
    const std::vector<double> a{0.72,  0.133, 3.564, 0.689, 0.023, 0.06,  1.086, 1.051, 1.343, 0.496, 0.723, 1.301, 0.287,
                                0.21,  0.964, 0.916, 0.152, 0.289, 0.256, 0.531, 0.874, 0.478, 1.466, 0.225, 2.439};
    const std::vector<double> b{
        2.216, 2.293, 0.695, 0.425, 2.317, 9.911, 0.354, 2.844, 0.669, 1.013, 0.695, 1.435, 4.348, 0.931, 6.672,
        1.879, 0.36,  1.456, 1.922, 4.433, 0.888, 0.915, 1.262, 2.069, 0.329, 5.663, 0.132, 0.141, 1.49,  1.833,
        0.045, 0.306, 3.906, 0.001, 1.354, 1.202, 0.432, 2.854, 2.053, 0.89,  5.33,  5.928, 0.699, 0.761, 0.04,
        0.085, 0.589, 2.201, 3.267, 3.083, 2.916, 1.424, 0.338, 0.432, 0.884, 2.383, 2.732, 1.335, 6.209, 0.037};
    const KsResult r = ks_2samp(a, b);
    CHECK(r.statistic == Approx(0.38).epsilon(1e-14));
    CHECK(r.p_value == Approx(0.00869430315679121).epsilon(1e-10));
    CHECK(ks_2samp(b, a).p_value == Approx(r.p_value).epsilon(1e-12));  // symmetric
  }
  {  // 144 vs 144 (GPT-2's head count): a_i = frac(0.618..·i), b_j = frac(0.414..·j)^1.3
    const KsResult r = ks_2samp(golden_sequence(144, 0.6180339887498949, 1.0),
                                golden_sequence(144, 0.41421356237309515, 1.3));
    CHECK(r.statistic == Approx(0.10416666666666667).epsilon(1e-14));
    CHECK(r.p_value == Approx(0.4165474607267425).epsilon(1e-10));
  }
  {  // 3000 vs 4000, exact (12e6 > automatic threshold) and asymptotic
    const auto a = golden_sequence(3000, 0.6180339887498949, 1.0), b = golden_sequence(4000, 0.41421356237309515, 1.1);
    const KsResult exact = ks_2samp(a, b, KsMethod::exact);
    CHECK(exact.statistic == Approx(0.035583333333333335).epsilon(1e-12));
    CHECK(exact.p_value == Approx(0.02549893769490869).epsilon(1e-8));
    const KsResult automatic = ks_2samp(a, b);
    CHECK_FALSE(automatic.exact);
    CHECK(automatic.p_value == Approx(0.026042598080551607).epsilon(1e-10));  // kstwobign.sf(√(mn/(m+n))·D)
  }
}

TEST_CASE("KS exact p-values on hand-derived cases", "[capacity][ks]") {
  // Complete separation: P(D = 1) = 2 / C(m+n, m).
  CHECK(ks_2samp({1, 2, 3}, {4, 5, 6}).p_value == Approx(2.0 / 20));
  CHECK(ks_2samp({1, 2}, {3, 4}).p_value == Approx(2.0 / 6));
  CHECK(ks_2samp({1}, {2}).p_value == Approx(1.0));
  CHECK(ks_2samp({5}, {1, 2, 3, 4}).p_value == Approx(2.0 / 5));
  // Identical samples: D = 0, p = 1.
  const KsResult same = ks_2samp({1, 2, 2, 3}, {3, 2, 1, 2});
  CHECK(same.statistic == 0.0);
  CHECK(same.p_value == 1.0);
  // m = n = 2, D = 1/2 (interleaved): every path reaches |i/2 − j/2| >= 1/2, p = 1.
  CHECK(ks_2samp({1, 3}, {2, 4}).statistic == 0.5);
  CHECK(ks_2samp({1, 3}, {2, 4}).p_value == Approx(1.0));
}

TEST_CASE("Kolmogorov distribution: survival function and critical values", "[capacity][ks]") {
  // scipy.stats.kstwobign.sf
  CHECK(kolmogorov_survival(0.3) == Approx(0.9999906941986655).epsilon(1e-13));
  CHECK(kolmogorov_survival(0.5) == Approx(0.9639452436648751).epsilon(1e-13));
  CHECK(kolmogorov_survival(0.8) == Approx(0.5441424115741981).epsilon(1e-13));
  CHECK(kolmogorov_survival(1.0) == Approx(0.26999967167735456).epsilon(1e-13));
  CHECK(kolmogorov_survival(1.2) == Approx(0.11224966667072497).epsilon(1e-13));
  CHECK(kolmogorov_survival(2.0) == Approx(0.0006709252557796953).epsilon(1e-12));
  CHECK(kolmogorov_survival(0.0) == 1.0);
  // Published table values c(α): 1.358 at 0.05, 1.628 at 0.01 (scipy: 1.3580986393225507, 1.6276236115189504).
  CHECK(kolmogorov_critical_value(0.05) == Approx(1.3580986393225507).epsilon(1e-10));
  CHECK(kolmogorov_critical_value(0.01) == Approx(1.6276236115189504).epsilon(1e-10));
  // The exact and asymptotic p-values agree for large samples from the same distribution.
  Random random(51);
  std::vector<double> a(2000), b(2500);
  for (auto& v : a) v = random.normal();
  for (auto& v : b) v = random.normal();
  const double exact = ks_2samp(a, b, KsMethod::exact).p_value, asymptotic = ks_2samp(a, b, KsMethod::asymptotic).p_value;
  CHECK(std::abs(exact - asymptotic) < 0.02);
}

TEST_CASE("KS p-values are uniform under the null and small under a shift", "[capacity][ks]") {
  Random random(52);
  int rejected_null = 0, rejected_shift = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<double> a(40), b(40), c(40);
    for (auto& v : a) v = random.normal();
    for (auto& v : b) v = random.normal();
    for (auto& v : c) v = random.normal() + 1.0;
    rejected_null += ks_2samp(a, b).p_value <= 0.05;
    rejected_shift += ks_2samp(a, c).p_value <= 0.05;
  }
  // Level 0.05 with discrete D: the rejection rate is at most 0.05 (plus sampling noise: sd ≈ 0.011).
  CHECK(rejected_null <= 0.05 * 400 + 3 * 0.011 * 400);
  CHECK(rejected_shift > 0.9 * 400);  // power at a one-sd shift with m = n = 40 is ≈ 0.97
}

TEST_CASE("critical_top_n returns the first N where KS does not reject", "[capacity][ks]") {
  const std::vector<double> low{1, 2, 3, 4, 5}, high{11, 12, 13, 14, 15}, mixed{1.5, 2.5, 3.5, 4.5, 5.5};
  // p(low, high) = 2/252 < 0.01 < p(low, mixed) = 1.
  const CriticalTopN found = critical_top_n({1, 5, 9}, {low, low, low}, {high, mixed, high}, 0.01);
  CHECK(found.critical_n == 5);
  CHECK(found.p_values.size() == 2);
  CHECK(found.p_values[0] == Approx(2.0 / 252));
  CHECK(found.statistics[0] == 1.0);
  const CriticalTopN none = critical_top_n({1, 2}, {low, low}, {high, high}, 0.05);
  CHECK(none.critical_n == -1);
  CHECK(none.p_values.size() == 2);
  // The level matters: p = 2/252 ≈ 0.0079 passes at level 0.005 but not at 0.01.
  CHECK(critical_top_n({3}, {low}, {high}, 0.005).critical_n == 3);
  CHECK(default_critical_n_grid(512) == [] {
    std::vector<Index> grid;
    for (Index n = 1; n <= 128; n += 4) grid.push_back(n);
    return grid;
  }());
  CHECK(default_critical_n_grid(3) == std::vector<Index>{1});
  CHECK(critical_n_slope({128, 256, 512}, {8, 16, 32}) == Approx(1.0 / 16));
  CHECK(critical_n_slope({128, 256}, {8, -1}) == Approx(1.0 / 16));
}

TEST_CASE("KS and critical top-N reject bad input", "[capacity][ks][errors]") {
  CAPACITY_CHECK_INVALID(ks_2samp({}, {1.0}), "ks_2samp");
  CAPACITY_CHECK_INVALID(ks_2samp({1.0, NAN}, {1.0}), "ks_2samp");
  CAPACITY_CHECK_INVALID(ks_2samp({1.0}, {INFINITY}), "ks_2samp");
  CAPACITY_CHECK_INVALID(kolmogorov_survival(NAN), "kolmogorov_survival");
  CAPACITY_CHECK_INVALID(kolmogorov_critical_value(0.0), "kolmogorov_critical_value");
  CAPACITY_CHECK_INVALID(kolmogorov_critical_value(1.0), "kolmogorov_critical_value");
  const std::vector<double> s{1, 2};
  CAPACITY_CHECK_INVALID(critical_top_n({1}, {s}, {s}, 0.0), "critical_top_n");
  CAPACITY_CHECK_INVALID(critical_top_n({1}, {s}, {s}, 1.5), "critical_top_n");
  CAPACITY_CHECK_INVALID(critical_top_n({}, {}, {}, 0.05), "critical_top_n");
  CAPACITY_CHECK_INVALID(critical_top_n({1, 2}, {s}, {s, s}, 0.05), "critical_top_n");
  CAPACITY_CHECK_INVALID(critical_top_n({2, 2}, {s, s}, {s, s}, 0.05), "critical_top_n");
  CAPACITY_CHECK_INVALID(critical_top_n({0}, {s}, {s}, 0.05), "critical_top_n");
  CAPACITY_CHECK_INVALID(critical_top_n({1}, {{}}, {s}, 0.05), "critical_top_n");
  CAPACITY_CHECK_INVALID(default_critical_n_grid(0), "default_critical_n_grid");
  CAPACITY_CHECK_INVALID(critical_n_slope({1, 2}, {1}), "critical_n_slope");
  CAPACITY_CHECK_INVALID(critical_n_slope({1}, {-1}), "critical_n_slope");
}
