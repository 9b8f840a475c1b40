// The sink-injection control (composition/controls.hpp) and the pruning-order tools (composition/rankings.hpp):
// what injection keeps and what it sets, its consequences for the flip rate (an equal sink in every head makes the
// JS and entropy verdicts agree, docs/theory/composition.md §5 and §11), rank correlations against scipy, the
// expected random Jaccard against an exact enumeration, and every error.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition.hpp"
#include "random_rows.hpp"
#include "support/catch.hpp"

using attnscope::Causal;
using attnscope::Index;
using attnscope::Random;
using attnscope::RowMatrix;
using attnscope::Vector;
using attnscope::Visibility;
namespace composition = attnscope::composition;

namespace {

/// Shannon entropy (nats) of the visible parts of row i, computed here independently of the library.
double plain_row_entropy(const RowMatrix<double>& a, Index i, const Visibility& visibility) {
  double h = 0;
  for (Index j = 0; j < a.cols(); ++j)
    if (visibility.visible(i, j, a.cols()) && a(i, j) > 0) h -= a(i, j) * std::log(a(i, j));
  return h;
}

/// Sorted set of the first k entries of a ranking.
std::set<Index> first_k_set(const std::vector<Index>& ranking, Index k) {
  return {ranking.begin(), ranking.begin() + k};
}

/// Exact E[Jaccard] of two random k-subsets of n items by enumerating every k-subset B against A = {0..k−1}
/// (by symmetry A can be fixed), via bit masks.
double enumerated_random_jaccard(int n, int k) {
  const unsigned a = (1u << k) - 1;
  double total = 0;
  long count = 0;
  for (unsigned b = 0; b < (1u << n); ++b) {
    if (__builtin_popcount(b) != k) continue;
    const int common = __builtin_popcount(a & b);
    total += static_cast<double>(common) / (2 * k - common);
    ++count;
  }
  return total / static_cast<double>(count);
}

}  // namespace

TEST_CASE("with_sink_weight keeps every content composition and sets the sink mass", "[composition][controls]") {
  Random random(1201);
  for (int trial = 0; trial < 50; ++trial) {
    const Index rows = 3 + static_cast<Index>(random.below(6));
    const Index cols = rows + 2;
    const Visibility visibility = trial % 2 ? Visibility{Causal{2}} : Visibility{};
    const RowMatrix<double> a = attnscope::testing::random_attention(random, rows, cols, visibility, 0, 0.3 + trial % 5);
    const double w = random.uniform(0.0, 0.99);
    const RowMatrix<double> b = composition::with_sink_weight(a, w, visibility);
    REQUIRE(b.rows() == rows);
    REQUIRE(b.cols() == cols);
    for (Index i = 0; i < rows; ++i) {
      CHECK(b(i, 0) == Approx(w).margin(1e-15));
      const double a_content = 1 - a(i, 0);
      double total = 0;
      for (Index j = 0; j < cols; ++j) {
        if (!visibility.visible(i, j, cols)) {
          CHECK(b(i, j) == 0.0);
          continue;
        }
        total += b(i, j);
        if (j > 0) CHECK(b(i, j) / (1 - w) == Approx(a(i, j) / a_content).epsilon(1e-12));  // same c
      }
      CHECK(total == Approx(1.0).margin(1e-12));
      // entropy grouping (§2): H(b) = H_b(w) + (1 − w)·H(c), with H(c) read from the original row
      double content_entropy = 0;
      for (Index j = 1; j < cols; ++j)
        if (visibility.visible(i, j, cols)) content_entropy -= a(i, j) / a_content * std::log(a(i, j) / a_content);
      const double binary = -w * std::log(w) - (1 - w) * std::log(1 - w);
      CHECK(plain_row_entropy(b, i, visibility) == Approx(binary + (1 - w) * content_entropy).margin(1e-12));
    }
  }
}

TEST_CASE("with_sink_weight: a sink set keeps the sink's own composition; a zero sink is split evenly",
          "[composition][controls]") {
  RowMatrix<double> a(2, 5);
  a << 0.2, 0.1, 0.3, 0.3, 0.1,  //
      0.0, 0.0, 0.5, 0.25, 0.25;
  const composition::SinkSet sinks({0, 1});
  const RowMatrix<double> b = composition::with_sink_weight(a, 0.6, Visibility{}, sinks);
  RowMatrix<double> expected(2, 5);
  expected << 0.4, 0.2, 0.4 * 3 / 7, 0.4 * 3 / 7, 0.4 / 7,  //
      0.3, 0.3, 0.2, 0.1, 0.1;
  for (Index i = 0; i < 2; ++i)
    for (Index j = 0; j < 5; ++j) CHECK(b(i, j) == Approx(expected(i, j)).margin(1e-15));
  // w = 0: the content composition alone, the sink emptied
  const RowMatrix<double> c = composition::with_sink_weight(a, 0.0);
  CHECK(c(0, 0) == 0.0);
  CHECK(c(0, 2) == Approx(0.375).margin(1e-15));
}

TEST_CASE("inject_sink: one weight per head from U(low, high), deterministic for a seed", "[composition][controls]") {
  Random random(7);
  std::vector<RowMatrix<double>> heads;
  for (int h = 0; h < 6; ++h) heads.push_back(attnscope::testing::random_attention(random, 5, 7, Causal{2}));
  Random first(99), second(99), other(100);
  const auto a = composition::inject_sink(heads, first, 0.3, 0.9, Causal{2});
  const auto b = composition::inject_sink(heads, second, 0.3, 0.9, Causal{2});
  const auto c = composition::inject_sink(heads, other, 0.3, 0.9, Causal{2});
  REQUIRE(a.heads.size() == heads.size());
  REQUIRE(a.sink_weights.size() == 6);
  CHECK(a.sink_weights == b.sink_weights);
  CHECK(a.sink_weights != c.sink_weights);
  for (std::size_t h = 0; h < heads.size(); ++h) {
    CHECK(a.heads[h] == b.heads[h]);
    const double w = a.sink_weights(static_cast<Index>(h));
    CHECK(w >= 0.3);
    CHECK(w < 0.9);
    for (Index i = 0; i < 5; ++i) CHECK(a.heads[h](i, 0) == Approx(w).margin(1e-15));
  }
  // the weights are U(0.3, 0.9): mean 0.6, variance 0.6²/12 = 0.03 (4000 draws: standard error 0.0027)
  Random many(5);
  const Vector<double> weights = composition::draw_sink_weights(4000, many);
  CHECK(weights.minCoeff() >= 0.3);
  CHECK(weights.maxCoeff() < 0.9);
  CHECK(weights.mean() == Approx(0.6).margin(0.012));
  CHECK((weights.array() - weights.mean()).square().mean() == Approx(0.03).margin(0.003));
}

TEST_CASE("sink injection with one weight for every head: JS and entropy verdicts never flip (§5, §11)",
          "[composition][controls]") {
  // JS chain rule with s = s′ = w: JS(a, a′) = (1 − w)·JS(c, c′), and H(a) = H_b(w) + (1 − w)·H(c): both keep
  // verdicts are monotone in the drop ones. Unequal weights (the control) do flip some verdicts.
  Random random(31);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<RowMatrix<double>> heads;
    for (int h = 0; h < 6; ++h) heads.push_back(attnscope::testing::random_attention(random, 6, 8, Causal{2}));
    const Vector<double> equal = Vector<double>::Constant(6, random.uniform(0.3, 0.9));
    const auto injected = composition::with_sink_weights(heads, equal, Causal{2});
    CHECK(composition::flip_rate(injected.heads, composition::Metric::jensen_shannon, Causal{2}).flips == 0);
    CHECK(composition::flip_rate(injected.heads, composition::Metric::entropy, Causal{2}).flips == 0);
  }
  long flips = 0;
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<RowMatrix<double>> heads;
    for (int h = 0; h < 6; ++h) heads.push_back(attnscope::testing::random_attention(random, 6, 8, Causal{2}));
    const auto injected = composition::inject_sink(heads, random, 0.3, 0.9, Causal{2});
    flips += composition::flip_rate(injected.heads, composition::Metric::entropy, Causal{2}).flips;
  }
  CHECK(flips > 0);
}

TEST_CASE("sink-injection errors name the function and the value", "[composition][controls][errors]") {
  const RowMatrix<double> a = attnscope::testing::row({0.5, 0.3, 0.2});
  CHECK_THROWS_WITH(composition::with_sink_weight(a, 1.0), Catch::Contains("with_sink_weight") && Catch::Contains("1"));
  CHECK_THROWS_AS(composition::with_sink_weight(a, -0.1), attnscope::invalid_argument);
  CHECK_THROWS_AS(composition::with_sink_weight(a, std::nan("")), attnscope::invalid_argument);
  CHECK_THROWS_WITH(composition::with_sink_weight(attnscope::testing::row({1.0, 0.0, 0.0}), 0.5),
                    Catch::Contains("with_sink_weight") && Catch::Contains("no content mass"));
  CHECK_THROWS_WITH(composition::with_sink_weight(attnscope::testing::row({0.5, 0.3, 0.3}), 0.5),
                    Catch::Contains("sums to"));
  CHECK_THROWS_AS(composition::with_sink_weight(attnscope::testing::row({0.5, std::nan(""), 0.5}), 0.5),
                  attnscope::invalid_argument);
  CHECK_THROWS_AS(composition::with_sink_weight(RowMatrix<double>(0, 0), 0.5), attnscope::invalid_argument);
  CHECK_THROWS_WITH(composition::with_sink_weight(a, 0.5, Visibility{}, composition::SinkSet({3})),
                    Catch::Contains("out of range"));
  const std::vector<RowMatrix<double>> heads{a, a};
  CHECK_THROWS_WITH(composition::with_sink_weights(heads, Vector<double>::Constant(3, 0.5)),
                    Catch::Contains("with_sink_weights") && Catch::Contains("3 sink weights"));
  Random random(1);
  CHECK_THROWS_WITH(composition::draw_sink_weights(2, random, 0.5, 1.0), Catch::Contains("draw_sink_weights"));
  CHECK_THROWS_AS(composition::draw_sink_weights(2, random, 0.6, 0.5), attnscope::invalid_argument);
  CHECK_THROWS_AS(composition::draw_sink_weights(-1, random), attnscope::invalid_argument);
}

TEST_CASE("ranking_by_score orders by score from either end, ties in index order", "[composition][rankings]") {
  Vector<double> score(5);
  score << 0.2, 0.9, 0.2, -1.0, 0.5;
  CHECK(composition::ranking_by_score(score) == std::vector<Index>{1, 4, 0, 2, 3});
  CHECK(composition::ranking_by_score(score, composition::RankOrder::lowest_first) ==
        std::vector<Index>{3, 0, 2, 4, 1});
  score(2) = std::nan("");
  CHECK_THROWS_WITH(composition::ranking_by_score(score), Catch::Contains("ranking_by_score"));
  CHECK_THROWS_AS(composition::ranking_by_score(Vector<double>(0)), attnscope::invalid_argument);
}

TEST_CASE("random_ranking is a uniform permutation, deterministic for a seed", "[composition][rankings]") {
  Random a(3), b(3);
  CHECK(composition::random_ranking(12, a) == composition::random_ranking(12, b));
  Random random(11);
  std::vector<std::vector<int>> position_counts(4, std::vector<int>(4, 0));
  const int draws = 8000;
  for (int d = 0; d < draws; ++d) {
    const auto ranking = composition::random_ranking(4, random);
    std::vector<Index> sorted = ranking;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(sorted == std::vector<Index>{0, 1, 2, 3});
    for (std::size_t p = 0; p < 4; ++p) ++position_counts[p][static_cast<std::size_t>(ranking[p])];
  }
  // each item at each position with probability 1/4: 2000 expected, standard deviation 39
  for (const auto& counts : position_counts)
    for (int c : counts) CHECK(std::abs(c - draws / 4) < 200);
  CHECK(composition::random_ranking(1, random) == std::vector<Index>{0});
  CHECK_THROWS_WITH(composition::random_ranking(0, random), Catch::Contains("random_ranking"));
}

TEST_CASE("top_k_jaccard counts the shared first-k items", "[composition][rankings]") {
  const std::vector<Index> first{0, 1, 2, 3, 4, 5}, second{1, 0, 5, 2, 4, 3}, reversed{5, 4, 3, 2, 1, 0};
  CHECK(composition::top_k_jaccard(first, second, 1) == 0.0);
  CHECK(composition::top_k_jaccard(first, second, 2) == 1.0);
  CHECK(composition::top_k_jaccard(first, second, 3) == Approx(2.0 / 4.0));  // {0,1,2} vs {1,0,5}
  CHECK(composition::top_k_jaccard(first, reversed, 3) == 0.0);
  CHECK(composition::top_k_jaccard(first, reversed, 6) == 1.0);
  // property: agrees with set arithmetic on random rankings
  Random random(21);
  for (int trial = 0; trial < 200; ++trial) {
    const Index n = 2 + static_cast<Index>(random.below(30));
    const auto a = composition::random_ranking(n, random), b = composition::random_ranking(n, random);
    const Index k = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(n)));
    const auto sa = first_k_set(a, k), sb = first_k_set(b, k);
    std::vector<Index> common, either;
    std::set_intersection(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(common));
    std::set_union(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(either));
    CHECK(composition::top_k_jaccard(a, b, k) ==
          Approx(static_cast<double>(common.size()) / static_cast<double>(either.size())).margin(1e-15));
  }
  CHECK_THROWS_WITH(composition::top_k_jaccard(first, {0, 1, 2}, 2), Catch::Contains("different lengths"));
  CHECK_THROWS_WITH(composition::top_k_jaccard(first, {0, 1, 2, 3, 4, 4}, 2), Catch::Contains("not a permutation"));
  CHECK_THROWS_WITH(composition::top_k_jaccard(first, second, 0), Catch::Contains("k = 0"));
  CHECK_THROWS_AS(composition::top_k_jaccard(first, second, 7), attnscope::invalid_argument);
}

TEST_CASE("expected_random_jaccard: exact enumeration, fractions and a Monte Carlo mean", "[composition][rankings]") {
  // Golden values by exact rational enumeration of every k-subset in Python (fractions; A fixed by symmetry):
  //   /usr/bin/python3 -c "import itertools as t; from fractions import Fraction as F; ej=lambda n,k:
  //     sum(F(len(set(range(k))&set(B)),2*k-len(set(range(k))&set(B))) for B in t.combinations(range(n),k))
  //     /len(list(t.combinations(range(n),k))); [print(n,k,float(ej(n,k))) for n,k in [(6,2),(8,3),(10,4),(40,4)]]"
  CHECK(composition::expected_random_jaccard(6, 2) == Approx(0.24444444444444444).epsilon(1e-12));
  CHECK(composition::expected_random_jaccard(8, 3) == Approx(0.25892857142857145).epsilon(1e-12));
  CHECK(composition::expected_random_jaccard(10, 4) == Approx(0.2706122448979592).epsilon(1e-12));
  CHECK(composition::expected_random_jaccard(40, 4) == Approx(0.05938724149250465).epsilon(1e-12));
  for (int n = 1; n <= 14; ++n)
    for (int k = 1; k <= n; ++k)
      CHECK(composition::expected_random_jaccard(n, k) == Approx(enumerated_random_jaccard(n, k)).epsilon(1e-12));
  CHECK(composition::expected_random_jaccard(9, 9) == 1.0);
  Random random(40);
  double total = 0;
  const int draws = 20000;
  for (int d = 0; d < draws; ++d)
    total += composition::top_k_jaccard(composition::random_ranking(40, random), composition::random_ranking(40, random), 8);
  CHECK(total / draws == Approx(composition::expected_random_jaccard(40, 8)).margin(0.004));  // se ≈ 0.0008
  CHECK_THROWS_WITH(composition::expected_random_jaccard(4, 5), Catch::Contains("expected_random_jaccard"));
  CHECK_THROWS_AS(composition::expected_random_jaccard(4, 0), attnscope::invalid_argument);
}

TEST_CASE("kendall_tau and spearman_rho against scipy 1.10.1, with ties", "[composition][rankings]") {
  // /usr/bin/python3 -c "import scipy.stats as s; x=[0.3,1.2,-0.5,2.0,2.0,0.7,1.1,-1.3];
  //   y=[1.0,0.4,0.4,3.0,2.5,-0.2,1.9,0.0]; print(s.kendalltau(x,y).statistic, s.spearmanr(x,y).statistic);
  //   a=[5,3,8,1,9,2]; b=[4,2,9,3,7,1]; print(s.kendalltau(a,b).statistic, s.spearmanr(a,b).statistic)"
  //   -> 0.5925925925925926 0.7108433734939759 / 0.6 0.7714285714285715
  Vector<double> x(8), y(8), a(6), b(6);
  x << 0.3, 1.2, -0.5, 2.0, 2.0, 0.7, 1.1, -1.3;
  y << 1.0, 0.4, 0.4, 3.0, 2.5, -0.2, 1.9, 0.0;
  a << 5, 3, 8, 1, 9, 2;
  b << 4, 2, 9, 3, 7, 1;
  CHECK(composition::kendall_tau(x, y) == Approx(0.5925925925925926).epsilon(1e-12));
  CHECK(composition::spearman_rho(x, y) == Approx(0.7108433734939759).epsilon(1e-12));
  CHECK(composition::kendall_tau(a, b) == Approx(0.6).epsilon(1e-12));
  CHECK(composition::spearman_rho(a, b) == Approx(0.7714285714285715).epsilon(1e-12));
}

TEST_CASE("rank correlations: identities and the no-tie Spearman formula on random scores", "[composition][rankings]") {
  Random random(77);
  for (int trial = 0; trial < 100; ++trial) {
    const Index n = 2 + static_cast<Index>(random.below(25));
    Vector<double> x(n), y(n);
    for (Index i = 0; i < n; ++i) x(i) = random.normal(), y(i) = random.normal();
    CHECK(composition::kendall_tau(x, x) == Approx(1.0).margin(1e-15));
    CHECK(composition::kendall_tau(x, Vector<double>(-x)) == Approx(-1.0).margin(1e-15));
    CHECK(composition::spearman_rho(x, Vector<double>(x.array().exp())) == Approx(1.0).margin(1e-12));  // monotone
    const double tau = composition::kendall_tau(x, y), rho = composition::spearman_rho(x, y);
    CHECK(tau == Approx(composition::kendall_tau(y, x)).margin(1e-15));
    CHECK(std::abs(tau) <= 1.0);
    // no ties: ρ = 1 − 6 Σ d_i² / (n (n² − 1)), d_i = rank difference (ranks by counting)
    double squared = 0;
    for (Index i = 0; i < n; ++i) {
      Index rank_x = 1, rank_y = 1;
      for (Index j = 0; j < n; ++j) rank_x += x(j) < x(i), rank_y += y(j) < y(i);
      squared += static_cast<double>((rank_x - rank_y) * (rank_x - rank_y));
    }
    const double dn = static_cast<double>(n);
    CHECK(rho == Approx(1 - 6 * squared / (dn * (dn * dn - 1))).margin(1e-12));
  }
  Vector<double> constant = Vector<double>::Constant(4, 1.0), other(4), three(3);
  other << 1, 2, 3, 4;
  three << 1, 2, 3;
  CHECK_THROWS_WITH(composition::kendall_tau(constant, other), Catch::Contains("kendall_tau") && Catch::Contains("constant"));
  CHECK_THROWS_WITH(composition::spearman_rho(other, constant), Catch::Contains("spearman_rho"));
  CHECK_THROWS_WITH(composition::kendall_tau(other, three), Catch::Contains("different lengths"));
  CHECK_THROWS_AS(composition::spearman_rho(Vector<double>::Constant(1, 1.0), Vector<double>::Constant(1, 2.0)),
                  attnscope::invalid_argument);
  other(1) = std::nan("");
  CHECK_THROWS_AS(composition::spearman_rho(other, Vector<double>(Vector<double>::LinSpaced(4, 0, 1))),
                  attnscope::invalid_argument);
}
