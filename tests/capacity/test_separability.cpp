// Geometric separability N_s/N (docs/theory/capacity.md §2 Definition (10), §3.2), Theorem 2's [derived] bounds,
// sphere projection, δ and multi-head coverage.
#include <cmath>
#include <vector>

#include "attnscope/capacity/separability.hpp"
#include "random_instances.hpp"

using namespace attnscope;
using namespace attnscope::capacity;
using namespace attnscope::testing;

namespace {

/// Four points on the unit circle at right angles with weights 0.4, 0.3, 0.2, 0.1.
struct Circle {
  Eigen::VectorXd w{4};
  Eigen::MatrixXd x{4, 2};
  Circle() {
    w << 0.4, 0.3, 0.2, 0.1;
    x << 1, 0, 0, 1, -1, 0, 0, -1;
  }
};

}  // namespace

TEST_CASE("N_s on hand-built configurations", "[capacity][separability]") {
  const Circle c;
  // N = 2: s = (0.4, 0.3); D_0 = 0.3, D_1 = 0.4; outside: D_2 = √0.45, D_3 = √0.32 = r.
  Separability two = separability(c.w, c.x, {0, 1});
  CHECK(two.radius == Approx(std::sqrt(0.32)));
  CHECK(two.distinguishable == 2);
  CHECK(two.selected == 2);
  CHECK(two.fraction == 1.0);
  // N = 3: s = (0.2, 0.3); D_0 = √0.13, D_1 = 0.2, D_2 = 0.5; outside D_3 = √0.2 = r: token 2 is not separable.
  Separability three = separability(c.w, c.x, {0, 1, 2});
  CHECK(three.radius == Approx(std::sqrt(0.2)));
  CHECK(three.distinguishable == 2);
  CHECK(three.fraction == Approx(2.0 / 3));
  CHECK(geometric_recall(c.w, c.x, {0, 1, 2}) == Approx(2.0 / 3));
  // Definition (10) with a given closed ball.
  CHECK(separability_at_radius(c.w, c.x, {0, 1}, 0.35).distinguishable == 1);
  CHECK(separability_at_radius(c.w, c.x, {0, 1}, 0.5).distinguishable == 2);
  CHECK(separability_at_radius(c.w, c.x, {0, 1}, 0.6).distinguishable == 0);  // token 3 (D = 0.566) is inside
  CHECK(separability_at_radius(c.w, c.x, {0, 1}, 0.4).distinguishable == 2);  // closed ball: D_1 = 0.4 counts
}

TEST_CASE("strict and inclusive boundaries differ exactly at a tie with the nearest outside token",
          "[capacity][separability]") {
  Eigen::VectorXd w(3);
  w << 0.5, 0.25, 0.25;
  Eigen::MatrixXd x(3, 1);
  x << 1, 1, 1;
  // I_2 = {0, 1} (tie 0.25/0.25 goes to index 1); s = 0.75; D_0 = 0.25, D_1 = 0.5; outside D_2 = 0.5 = r.
  CHECK(top_n(w, 2) == std::vector<Index>{0, 1});
  CHECK(separability(w, x, {0, 1}).distinguishable == 1);
  CHECK(separability(w, x, {0, 1}, Boundary::inclusive).distinguishable == 2);
}

TEST_CASE("Theorem 2 quantities on the circle example", "[capacity][separability]") {
  const Circle c;
  const double delta = min_pairwise_distance(c.x);
  CHECK(delta == Approx(std::sqrt(2.0)));
  // N = 2: ξ_i is the other selected weight times M (= D_i exactly).
  const Theorem2Bounds two = theorem2_bounds(c.w, c.x, {0, 1}, 1.0, delta, std::sqrt(0.32));
  CHECK(two.spread(0) == Approx(0.3));
  CHECK(two.spread(1) == Approx(0.4));
  CHECK(two.lower == Approx(1 - 0.7 / (2 * std::sqrt(0.32))));
  CHECK(two.upper == 1.0);  // both ξ_i < r
  // N = 3, δ = √2: M² − δ²/2 = 0 so ξ_i² = Σ_{j≠i} α_j².
  const double r = std::sqrt(0.2);
  const Theorem2Bounds three = theorem2_bounds(c.w, c.x, {0, 1, 2}, 1.0, delta, r);
  const double xi0 = std::sqrt(0.13), xi1 = std::sqrt(0.2), xi2 = 0.5;
  CHECK(three.spread(0) == Approx(xi0));
  CHECK(three.spread(1) == Approx(xi1));
  CHECK(three.spread(2) == Approx(xi2));
  CHECK(three.lower == Approx(1 - (xi0 + xi1 + xi2) / (3 * r)));
  CHECK(three.upper == Approx((1 + 1 + std::exp(-2 * (xi2 - r) * (xi2 - r) / 4)) / 3));
}

TEST_CASE("ξ_i bounds ‖s − α_i x_i‖ and the lower bound holds on random spherical instances",
          "[capacity][separability]") {
  Random random(41);
  for (int instance = 0; instance < 1000; ++instance) {
    const Index length = 3 + static_cast<Index>(random.below(60)), dim = 2 + static_cast<Index>(random.below(12));
    const double radius = random.uniform(0.2, 4.0);
    const RowMatrix<double> x = sphere_points(random, length, dim, radius);
    const Vector<double> w = instance % 2 ? softmax_weights(random, x, random.uniform(0.5, 30.0))
                                          : loose_weights(random, length);
    const Index count = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(length - 1)));
    const auto selected = top_n(w, count);
    const double delta = std::min(min_pairwise_distance(x), 2 * radius);
    const Separability strict = separability(w, x, selected);
    const Separability inclusive = separability(w, x, selected, Boundary::inclusive);
    REQUIRE(inclusive.distinguishable >= strict.distinguishable);
    if (!(strict.radius > 0)) continue;
    const Theorem2Bounds bounds = theorem2_bounds(w, x, selected, radius, delta, strict.radius);
    const Vector<double> s = context_vector(w, x, selected);
    for (std::size_t k = 0; k < selected.size(); ++k) {
      const double distance = (s - w(selected[k]) * x.row(selected[k]).transpose()).norm();
      REQUIRE(distance <= bounds.spread(static_cast<Index>(k)) * (1 + 1e-9) + 1e-12);
    }
    REQUIRE(strict.fraction >= bounds.lower - 1e-12);  // Markov: #{D_i >= r} <= Σ D_i / r <= Σ ξ_i / r
    REQUIRE(bounds.upper > 0);
    REQUIRE(bounds.upper <= 1);
    if (bounds.spread.maxCoeff() <= strict.radius) REQUIRE(bounds.upper == 1);
  }
}

TEST_CASE("project_to_sphere, min_pairwise_distance and multihead_coverage", "[capacity][separability]") {
  Eigen::MatrixXf x(3, 2);
  x << 3, 4, 0, -2, 1, 1;
  const RowMatrix<float> on_sphere = project_to_sphere(x, 2.0f);
  for (Index i = 0; i < 3; ++i) CHECK(on_sphere.row(i).norm() == Approx(2.0f));
  CHECK(on_sphere(0, 0) == Approx(1.2f));
  CHECK(on_sphere(1, 1) == Approx(-2.0f));
  Eigen::MatrixXd points(3, 2);
  points << 0, 0, 3, 4, 0, 1;
  CHECK(min_pairwise_distance(points) == Approx(1.0));
  CHECK(multihead_coverage(0.8, 3) == Approx(0.992));  // the paper's Discussion example
  CHECK(multihead_coverage(0.8, 1) == Approx(0.8));
  CHECK(multihead_coverage(0.0, 5) == 0.0);
  CHECK(multihead_coverage(1.0, 2) == 1.0);
}

TEST_CASE("separability functions reject bad input", "[capacity][separability][errors]") {
  const Circle c;
  CAPACITY_CHECK_INVALID(separability(c.w, c.x, {0, 1, 2, 3}), "separability");
  CAPACITY_CHECK_INVALID(separability(c.w, c.x, {}), "separability");
  CAPACITY_CHECK_INVALID(separability(c.w, c.x, {4}), "separability");
  CAPACITY_CHECK_INVALID(separability(c.w, Eigen::MatrixXd::Ones(3, 2), {0}), "separability");
  CAPACITY_CHECK_INVALID(separability_at_radius(c.w, c.x, {0}, 0.0), "separability_at_radius");
  CAPACITY_CHECK_INVALID(separability_at_radius(c.w, c.x, {0}, NAN), "separability_at_radius");
  CAPACITY_CHECK_INVALID(project_to_sphere(Eigen::MatrixXd::Zero(2, 2)), "project_to_sphere");
  CAPACITY_CHECK_INVALID(project_to_sphere(c.x, -1.0), "project_to_sphere");
  CAPACITY_CHECK_INVALID(project_to_sphere(Eigen::MatrixXd(0, 2)), "project_to_sphere");
  CAPACITY_CHECK_INVALID(min_pairwise_distance(Eigen::MatrixXd::Ones(1, 2)), "min_pairwise_distance");
  Eigen::MatrixXd bad = c.x;
  bad(1, 1) = INFINITY;
  CAPACITY_CHECK_INVALID(min_pairwise_distance(bad), "min_pairwise_distance");
  CAPACITY_CHECK_INVALID(theorem2_bounds(c.w, c.x, {0, 1}, 0.0, 1.0, 0.5), "theorem2_bounds");
  CAPACITY_CHECK_INVALID(theorem2_bounds(c.w, c.x, {0, 1}, 1.0, 2.5, 0.5), "theorem2_bounds");
  CAPACITY_CHECK_INVALID(theorem2_bounds(c.w, c.x, {0, 1}, 1.0, -0.1, 0.5), "theorem2_bounds");
  CAPACITY_CHECK_INVALID(theorem2_bounds(c.w, c.x, {0, 1}, 1.0, 1.0, 0.0), "theorem2_bounds");
  CAPACITY_CHECK_INVALID(multihead_coverage(1.5, 2), "multihead_coverage");
  CAPACITY_CHECK_INVALID(multihead_coverage(NAN, 2), "multihead_coverage");
  CAPACITY_CHECK_INVALID(multihead_coverage(0.5, 0), "multihead_coverage");
}
