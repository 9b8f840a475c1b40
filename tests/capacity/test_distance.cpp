// Representation distance (arXiv:2508.17821 Eq. 7, both readings), its random-subset expectation (Eq. 8, Monte
// Carlo vs exhaustive enumeration, Eq. 10 main sums) and Theorem 1's fixed-set bound (Eq. 9, [derived]).
#include <cmath>
#include <vector>

#include "attnscope/capacity/distance.hpp"
#include "random_instances.hpp"

using namespace attnscope;
using namespace attnscope::capacity;
using namespace attnscope::testing;

namespace {

struct Example {
  Eigen::VectorXd w{3};
  Eigen::MatrixXd x{3, 2};
  Example() {
    w << 0.5, 0.3, 0.2;
    x << 1, 0, 0, 2, -1, -1;
  }
};

double norm2(double a, double b) { return std::sqrt(a * a + b * b); }

/// Random subset of size count of [0, size).
std::vector<Index> random_subset(Random& random, Index size, Index count) {
  std::vector<Index> all(static_cast<std::size_t>(size));
  for (Index i = 0; i < size; ++i) all[static_cast<std::size_t>(i)] = i;
  for (Index i = 0; i < count; ++i)
    std::swap(all[static_cast<std::size_t>(i)],
              all[static_cast<std::size_t>(i + static_cast<Index>(random.below(static_cast<std::uint64_t>(size - i))))]);
  all.resize(static_cast<std::size_t>(count));
  return all;
}

}  // namespace

TEST_CASE("representation distance in both readings on a hand-computed example", "[capacity][distance]") {
  const Example e;
  // I_N = {0}: s = (0.5, 0); α_1 x_1 = (0, 0.6), α_2 x_2 = (−0.2, −0.2).
  CHECK(representation_distance(e.w, e.x, {0}) == Approx(norm2(-0.5, 0.6) + norm2(-0.7, -0.2)));
  CHECK(representation_distance(e.w, e.x, {0}, DistanceReading::norm_of_sum) == Approx(norm2(-0.7, 0.4)));
  CHECK(top_n_distance(e.w, e.x, 1) == Approx(norm2(-0.5, 0.6) + norm2(-0.7, -0.2)));
  // I_N = {0, 1}: s = (0.5, 0.6); only token 2 is left.
  CHECK(representation_distance(e.w, e.x, {1, 0}) == Approx(norm2(-0.7, -0.8)));
  // Theorem 1 [derived]: (1−ᾱ)·d_1 + [(1−ᾱ) + (L−N)ᾱ]·max‖x_j‖ with ᾱ = 0.5, d_1 = √5, max‖x_j‖ = 1.
  CHECK(distance_upper_bound(e.w, e.x, {0}) == Approx(0.5 * std::sqrt(5.0) + 1.5));
}

TEST_CASE("Corollary 2(ii): with every token selected the sum_of_norms distance and main sums vanish",
          "[capacity][distance]") {
  const Example e;
  CHECK(top_n_distance(e.w, e.x, 3) == 0.0);
  CHECK(expected_distance_main_sum(e.w, e.x, 3, MainSum::a) == 0.0);
  CHECK(expected_distance_main_sum(e.w, e.x, 3, MainSum::b) == 0.0);
  CHECK(expected_distance_exhaustive(e.w, e.x, 3) == 0.0);
  // norm_of_sum tends to ‖s‖ instead (one of the reasons to prefer sum_of_norms).
  CHECK(top_n_distance(e.w, e.x, 3, DistanceReading::norm_of_sum) == Approx(norm2(0.3, 0.4)));
}

TEST_CASE("exhaustive expectation equals the hand enumeration of all subsets", "[capacity][distance]") {
  const Example e;
  const double subset0 = norm2(-0.5, 0.6) + norm2(-0.7, -0.2);
  const double subset1 = norm2(0.5, -0.6) + norm2(-0.2, -0.8);
  const double subset2 = norm2(0.7, 0.2) + norm2(0.2, 0.8);
  CHECK(expected_distance_exhaustive(e.w, e.x, 1) == Approx((subset0 + subset1 + subset2) / 3));
  // Main sums, [derived] Eq. 10 candidates: s̄ = (1/3)·Σ α_i x_i = (0.1, 0.4/3).
  const double a = (2.0 / 3) * (norm2(0.4, -0.4 / 3) + norm2(-0.1, 0.6 - 0.4 / 3) + norm2(-0.3, -0.2 - 0.4 / 3));
  CHECK(expected_distance_main_sum(e.w, e.x, 1, MainSum::a) == Approx(a));
  CHECK(expected_distance_main_sum(e.w, e.x, 1, MainSum::b) == Approx((2.0 / 3) * (0.5 + 0.6 + 0.2 * std::sqrt(2.0))));
}

TEST_CASE("Monte Carlo expectation converges to the exhaustive enumeration", "[capacity][distance]") {
  Random random(31);
  for (int instance = 0; instance < 4; ++instance) {
    const RowMatrix<double> x = sphere_points(random, 12, 5);
    const Vector<double> w = softmax_weights(random, x, 4.0);
    for (const auto reading : {DistanceReading::sum_of_norms, DistanceReading::norm_of_sum}) {
      const double exact = expected_distance_exhaustive(w, x, 4, reading);  // C(12, 4) = 495 subsets
      const double estimate = expected_distance_monte_carlo(w, x, 4, 40000, 7 + instance, reading);
      CHECK(estimate == Approx(exact).epsilon(0.01));
      // deterministic for a seed, and the seed matters (control: another seed draws other subsets)
      const double seeded = expected_distance_monte_carlo(w, x, 4, 100, 99, reading);
      CHECK(expected_distance_monte_carlo(w, x, 4, 100, 99, reading) == seeded);
      CHECK(expected_distance_monte_carlo(w, x, 4, 100, 100, reading) != seeded);
    }
  }
}

TEST_CASE("Theorem 1 bound holds for both readings on random instances", "[capacity][distance]") {
  Random random(32);
  for (int instance = 0; instance < 1000; ++instance) {
    const Index length = 2 + static_cast<Index>(random.below(60)), dim = 1 + static_cast<Index>(random.below(10));
    const RowMatrix<double> x = gaussian_matrix(random, length, dim) * std::exp(random.uniform(-3.0, 3.0));
    const Vector<double> w = instance % 2 ? loose_weights(random, length) : softmax_weights(random, x, 5.0);
    const Index count = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(length)));
    const auto selected = instance % 3 ? top_n(w, count) : random_subset(random, length, count);
    const double bound = distance_upper_bound(w, x, selected);
    REQUIRE(representation_distance(w, x, selected) <= bound * (1 + 1e-12) + 1e-300);
    if (count < length)  // with every token selected norm_of_sum is ‖s‖ while the bound is 0
      REQUIRE(representation_distance(w, x, selected, DistanceReading::norm_of_sum) <= bound * (1 + 1e-12));
  }
}

TEST_CASE("sum_of_norms is (L−N)‖s‖ up to Σ α_i‖x_i‖; norm_of_sum stays below Σ α_i‖x_i‖", "[capacity][distance]") {
  Random random(33);
  // Triangle inequality: |sum_of_norms − (L−N)‖s‖| <= Σ_{i∉I}α_i‖x_i‖, and norm_of_sum <= Σ_i α_i‖x_i‖.
  for (int instance = 0; instance < 1000; ++instance) {
    const Index length = 2 + static_cast<Index>(random.below(200));
    const RowMatrix<double> x = sphere_points(random, length, 8, random.uniform(0.5, 3.0));
    const Vector<double> w = softmax_weights(random, x, random.uniform(0.5, 16.0));
    const Index count = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(length - 1)));
    const auto selected = top_n(w, count);
    const double linear_part = double(length - count) * context_vector(w, x, selected).norm();
    double weighted_norms = 0, rest_weighted_norms = 0;
    std::vector<char> in(static_cast<std::size_t>(length), 0);
    for (const Index i : selected) in[static_cast<std::size_t>(i)] = 1;
    for (Index i = 0; i < length; ++i) {
      weighted_norms += w(i) * x.row(i).norm();
      if (!in[static_cast<std::size_t>(i)]) rest_weighted_norms += w(i) * x.row(i).norm();
    }
    const double distance = representation_distance(w, x, selected);
    REQUIRE(distance >= linear_part - rest_weighted_norms - 1e-12);
    REQUIRE(distance <= linear_part + rest_weighted_norms + 1e-12);
    REQUIRE(representation_distance(w, x, selected, DistanceReading::norm_of_sum) <= weighted_norms + 1e-12);
  }
}

TEST_CASE("sum_of_norms grows linearly in L only when the top-N mass does not vanish", "[capacity][distance]") {
  Random random(35);
  // Synthetic protocol (docs/theory/capacity.md): N = 5, sphere data in R^64, ‖q‖ = 4, α = softmax(qᵀx/8). Bounded logits give
  // weights Θ(1/L) (Lemma 1), so ‖s‖ = O(N/L) and d~ stays O(N): no growth from L = 256 to 2048.
  // With a sink token whose logit is log L (weight ≈ 1/2 at every L), ‖s‖ stays ≈ 1/2 and d~ ≈ (L−N)/2: ×8.
  double bounded_short = 0, bounded_long = 0, sink_short = 0, sink_long = 0, norm_of_sum_long = 0;
  for (int query = 0; query < 8; ++query) {
    for (const Index length : {Index{256}, Index{2048}}) {
      const RowMatrix<double> x = sphere_points(random, length, 64);
      Vector<double> w = softmax_weights(random, x, 4.0);
      const double bounded = top_n_distance(w, x, 5);
      w(0) *= double(length);  // logit + log L for token 0
      w /= w.sum();
      const double sink = top_n_distance(w, x, 5);
      (length == 256 ? bounded_short : bounded_long) += bounded;
      (length == 256 ? sink_short : sink_long) += sink;
      if (length == 2048) norm_of_sum_long = std::max(norm_of_sum_long, top_n_distance(w, x, 5, DistanceReading::norm_of_sum));
    }
  }
  CHECK(bounded_long / bounded_short < 1.5);
  CHECK(sink_long / sink_short > 7.0);
  CHECK(sink_long / sink_short < 9.0);
  CHECK(norm_of_sum_long <= 1.0);
}

TEST_CASE("distance functions reject bad input", "[capacity][distance][errors]") {
  const Example e;
  CAPACITY_CHECK_INVALID(representation_distance(e.w, e.x, {}), "representation_distance");
  CAPACITY_CHECK_INVALID(representation_distance(e.w, e.x, {5}), "representation_distance");
  CAPACITY_CHECK_INVALID(representation_distance(e.w, Eigen::MatrixXd::Ones(4, 2), {0}), "representation_distance");
  Eigen::MatrixXd bad = e.x;
  bad(0, 0) = NAN;
  CAPACITY_CHECK_INVALID(representation_distance(e.w, bad, {0}), "representation_distance");
  CAPACITY_CHECK_INVALID(top_n_distance(e.w, e.x, 0), "top_n_distance");
  CAPACITY_CHECK_INVALID(top_n_distance(e.w, e.x, 4), "top_n_distance");
  CAPACITY_CHECK_INVALID(expected_distance_monte_carlo(e.w, e.x, 1, 0, 1), "expected_distance_monte_carlo");
  CAPACITY_CHECK_INVALID(expected_distance_monte_carlo(e.w, e.x, 4, 10, 1), "expected_distance_monte_carlo");
  CAPACITY_CHECK_INVALID(expected_distance_exhaustive(e.w, e.x, 0), "expected_distance_exhaustive");
  Random random(34);
  const RowMatrix<double> big = gaussian_matrix(random, 60, 2);
  CAPACITY_CHECK_INVALID(expected_distance_exhaustive(Vector<double>::Constant(60, 1.0 / 60), big, 30),
                         "expected_distance_exhaustive");
  CAPACITY_CHECK_INVALID(expected_distance_main_sum(e.w, e.x, 0), "expected_distance_main_sum");
  Eigen::VectorXd negative = e.w;
  negative(2) = -1;
  CAPACITY_CHECK_INVALID(expected_distance_main_sum(negative, e.x, 1), "expected_distance_main_sum");
  CAPACITY_CHECK_INVALID(distance_upper_bound(e.w, e.x, {0, 0}), "distance_upper_bound");
}
