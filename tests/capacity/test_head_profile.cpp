// Per-head profiles over query rows (arXiv:2508.17821 Algs 1–4): agreement with the row-level functions on
// causal and masked heads, short-row handling, and errors.
#include <cmath>
#include <vector>

#include "attnscope/capacity/head_profile.hpp"
#include "attnscope/capacity/head_summary.hpp"
#include "random_instances.hpp"

using namespace attnscope;
using namespace attnscope::capacity;
using namespace attnscope::testing;

namespace {

struct Head {
  RowMatrix<double> attention, values;
};

Head random_head(Random& random, Index length, Index dim, const Visibility& visibility) {
  Head head;
  head.values = gaussian_matrix(random, length, dim);
  const RowMatrix<double> scores = gaussian_matrix(random, length, length) * 3.0;
  head.attention = softmax(scores, 1.0, visibility);
  return head;
}

/// Visible keys' weights and values of one row.
std::pair<Vector<double>, RowMatrix<double>> gather(const Head& head, const Visibility& visibility, Index row,
                                                    const RowMatrix<double>& values) {
  std::vector<Index> keys;
  for (Index j = 0; j < head.attention.cols(); ++j)
    if (visibility.visible(row, j, head.attention.cols())) keys.push_back(j);
  Vector<double> w(static_cast<Index>(keys.size()));
  RowMatrix<double> x(static_cast<Index>(keys.size()), values.cols());
  for (std::size_t k = 0; k < keys.size(); ++k) {
    w(static_cast<Index>(k)) = head.attention(row, keys[k]);
    x.row(static_cast<Index>(k)) = values.row(keys[k]);
  }
  return {w, x};
}

Mask random_mask(Random& random, Index length) {
  Mask mask(length, length);
  for (Index i = 0; i < length; ++i) {
    for (Index j = 0; j < length; ++j) mask(i, j) = random.uniform() < 0.6;
    mask(i, static_cast<Index>(random.below(static_cast<std::uint64_t>(length)))) = true;
  }
  return mask;
}

}  // namespace

TEST_CASE("distance_rows agrees with the row-level functions", "[capacity][profile]") {
  Random random(71);
  for (int variant = 0; variant < 2; ++variant) {
    const Visibility visibility = variant == 0 ? Visibility(causal) : Visibility(random_mask(random, 24));
    const Head head = random_head(random, 24, 5, visibility);
    for (const Index count : {Index{1}, Index{3}, Index{7}}) {
      const DistanceRows rows = distance_rows(head.attention, head.values, count, visibility);
      std::vector<Index> expected_rows;
      double true_total = 0, expectation_total = 0, bound_total = 0;
      for (Index row = 0; row < 24; ++row) {
        const auto [w, x] = gather(head, visibility, row, head.values);
        if (w.size() <= count) continue;
        const std::size_t k = expected_rows.size();
        expected_rows.push_back(row);
        const double distance = top_n_distance(w, x, count);
        REQUIRE(rows.true_distance[k] == Approx(distance).epsilon(1e-12));
        REQUIRE(rows.expectation[k] == Approx(expected_distance_main_sum(w, x, count)).epsilon(1e-12));
        REQUIRE(rows.bound[k] == Approx(distance_upper_bound(w, x, top_n(w, count))).epsilon(1e-9));
        REQUIRE(rows.bound[k] >= distance);
        true_total += distance;
        expectation_total += rows.expectation[k];
        bound_total += rows.bound[k];
      }
      CHECK(rows.rows == expected_rows);
      CHECK(rows.mean_true == Approx(true_total / double(expected_rows.size())));
      CHECK(rows.mean_expectation == Approx(expectation_total / double(expected_rows.size())));
      CHECK(rows.mean_bound == Approx(bound_total / double(expected_rows.size())));
    }
  }
}

TEST_CASE("short causal rows are skipped or use N_eff = n − 1", "[capacity][profile]") {
  Random random(72);
  const Head head = random_head(random, 10, 3, causal);
  const DistanceRows skipped = distance_rows(head.attention, head.values, 4, causal);
  CHECK(skipped.rows == std::vector<Index>{4, 5, 6, 7, 8, 9});  // row t has t + 1 keys
  DistanceOptions clamp;
  clamp.short_rows = ShortRows::clamp_n;
  clamp.with_bound = false;
  clamp.reading = DistanceReading::norm_of_sum;
  clamp.main_sum = MainSum::b;
  const DistanceRows clamped = distance_rows(head.attention, head.values, 4, causal, clamp);
  CHECK(clamped.rows == std::vector<Index>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(clamped.bound.empty());
  CHECK(std::isnan(clamped.mean_bound));
  const Vector<double> row2 = head.attention.row(2).head(3).transpose();
  const RowMatrix<double> x2 = head.values.topRows(3);
  CHECK(clamped.true_distance[1] == Approx(top_n_distance(row2, x2, 2, DistanceReading::norm_of_sum)));
  CHECK(clamped.expectation[1] == Approx(expected_distance_main_sum(row2, x2, 2, MainSum::b)));
  CHECK(distance_rows(head.attention, head.values, 10, causal).rows.empty());
  CHECK(std::isnan(distance_rows(head.attention, head.values, 10, causal).mean_true));
}

TEST_CASE("separability_rows agrees with separability on sphere-projected values", "[capacity][profile]") {
  Random random(73);
  for (int variant = 0; variant < 2; ++variant) {
    const Visibility visibility = variant == 0 ? Visibility(causal) : Visibility(random_mask(random, 30));
    const Head head = random_head(random, 30, 4, visibility);
    SeparabilityOptions options;
    options.sphere_radius = 2.0;
    const RowMatrix<double> sphere = project_to_sphere(head.values, 2.0);
    const SeparabilityRows rows = separability_rows(head.attention, head.values, 3, visibility, options);
    CHECK(rows.separation == Approx(min_pairwise_distance(sphere)));
    REQUIRE(!rows.rows.empty());
    for (std::size_t k = 0; k < rows.rows.size(); ++k) {
      const auto [w, x] = gather(head, visibility, rows.rows[k], sphere);
      const auto selected = top_n(w, 3);
      const Separability counted = separability(w, x, selected);
      REQUIRE(rows.fraction[k] == counted.fraction);
      const Theorem2Bounds bounds = theorem2_bounds(w, x, selected, 2.0, rows.separation, counted.radius);
      REQUIRE(rows.lower[k] == Approx(bounds.lower));
      REQUIRE(rows.upper[k] == Approx(bounds.upper));
      REQUIRE(rows.fraction[k] >= rows.lower[k] - 1e-12);
    }
  }
}

TEST_CASE("critical_top_n_for_head runs Alg. 3 on per-row samples", "[capacity][profile]") {
  Random random(74);
  const Head head = random_head(random, 64, 4, causal);
  const std::vector<Index> grid{1, 2, 4, 8, 16};
  const CriticalTopN result = critical_top_n_for_head(head.attention, head.values, grid, 0.05, causal);
  std::vector<std::vector<double>> true_samples, expected_samples;
  for (const Index n : grid) {
    DistanceOptions options;
    options.with_bound = false;
    const DistanceRows rows = distance_rows(head.attention, head.values, n, causal, options);
    true_samples.push_back(rows.true_distance);
    expected_samples.push_back(rows.expectation);
  }
  const CriticalTopN direct = critical_top_n(grid, true_samples, expected_samples, 0.05);
  CHECK(result.critical_n == direct.critical_n);
  CHECK(result.p_values == direct.p_values);
  // A grid whose every N leaves no row ends the search with −1.
  CHECK(critical_top_n_for_head(head.attention, head.values, {64, 65}, 0.05, causal).critical_n == -1);
}

TEST_CASE("head profiles reject bad input", "[capacity][profile][errors]") {
  Random random(75);
  Head head = random_head(random, 8, 3, causal);
  CAPACITY_CHECK_INVALID(distance_rows(head.attention, head.values.topRows(7), 2, causal), "distance_rows");
  CAPACITY_CHECK_INVALID(distance_rows(head.attention, head.values, 0, causal), "distance_rows");
  CAPACITY_CHECK_INVALID(distance_rows(RowMatrix<double>(0, 0), head.values, 1), "distance_rows");
  CAPACITY_CHECK_INVALID(distance_rows(head.attention, head.values, 1, Mask(Mask::Constant(8, 7, true))),
                         "distance_rows");
  RowMatrix<double> bad = head.attention;
  bad(0, 5) = NAN;  // masked: ignored
  CHECK_NOTHROW(distance_rows(bad, head.values, 1, causal));
  bad(5, 0) = -0.1;
  CAPACITY_CHECK_INVALID(distance_rows(bad, head.values, 1, causal), "distance_rows");
  RowMatrix<double> bad_values = head.values;
  bad_values(3, 1) = INFINITY;
  CAPACITY_CHECK_INVALID(separability_rows(head.attention, bad_values, 1, causal), "separability_rows");
  SeparabilityOptions options;
  options.sphere_radius = 0;
  CAPACITY_CHECK_INVALID(separability_rows(head.attention, head.values, 1, causal, options), "separability_rows");
  RowMatrix<double> zero_values = head.values;
  zero_values.row(2).setZero();
  CAPACITY_CHECK_INVALID(separability_rows(head.attention, zero_values, 1, causal), "project_to_sphere");
  CAPACITY_CHECK_INVALID(critical_top_n_for_head(head.attention, head.values, {0}, 0.05, causal),
                         "critical_top_n_for_head");
  CAPACITY_CHECK_INVALID(critical_top_n_for_head(head.attention, head.values, {2, 1}, 0.05, causal), "critical_top_n");
}

TEST_CASE("head_capacity combines the critical N, N_s/N there and g(T, ε)", "[capacity][profile]") {
  Random random(76);
  const RowMatrix<double> values = gaussian_matrix(random, 48, 4);
  RowMatrix<double> scores = gaussian_matrix(random, 48, 48) * 2.0;
  for (Index i = 0; i < 48; ++i)
    for (Index j = i + 1; j < 48; ++j) scores(i, j) = -INFINITY;  // as the model captures them
  const RowMatrix<double> attention = softmax(scores, 1.0, causal);
  HeadCapacityOptions options;
  options.level = 0.05;
  options.seed = 9;
  const HeadCapacity summary = head_capacity(attention, scores, values, causal, options);
  const CriticalTopN critical = critical_top_n_for_head(attention, values, default_critical_n_grid(48), 0.05, causal);
  CHECK(summary.critical_n == critical.critical_n);
  if (summary.critical_n >= 1)
    CHECK(summary.separability_at_critical ==
          separability_rows(attention, values, summary.critical_n, causal).mean_fraction);
  else
    CHECK(std::isnan(summary.separability_at_critical));
  CHECK(summary.gradient_sensitivity == finite_difference_jacobian_norm_mean(scores, 1.0, 1e-3, 9, causal));
  CHECK(summary.exact_jacobian_norm ==
        exact_jacobian_norm(std::vector<RowMatrix<double>>{scores}, 1.0, causal).max_of_head_means);
  CHECK(summary.gradient_sensitivity <= summary.exact_jacobian_norm + 1e-3);
}

TEST_CASE("the multi-N profiles equal the single-N ones and report the other reading", "[capacity][profile]") {
  Random random(77);
  const Head head = random_head(random, 40, 3, causal);
  const std::vector<Index> counts{2, 9, 1, 39};
  const auto distances = distance_rows_for_counts(head.attention, head.values, counts, causal);
  const auto separabilities = separability_rows_for_counts(head.attention, head.values, counts, causal);
  REQUIRE(distances.size() == 4);
  for (std::size_t c = 0; c < counts.size(); ++c) {
    const DistanceRows single = distance_rows(head.attention, head.values, counts[c], causal);
    CHECK(distances[c].rows == single.rows);
    CHECK(distances[c].true_distance == single.true_distance);
    CHECK(distances[c].bound == single.bound);
    DistanceOptions other;
    other.reading = DistanceReading::norm_of_sum;
    const DistanceRows flipped = distance_rows(head.attention, head.values, counts[c], causal, other);
    CHECK(distances[c].other_reading == flipped.true_distance);
    CHECK(flipped.other_reading == single.true_distance);
    CHECK(separabilities[c].fraction == separability_rows(head.attention, head.values, counts[c], causal).fraction);
  }
  CHECK(distances[3].rows == std::vector<Index>{39});
  CAPACITY_CHECK_INVALID(distance_rows_for_counts(head.attention, head.values, {}, causal), "distance_rows");
  CAPACITY_CHECK_INVALID(separability_rows_for_counts(head.attention, head.values, {3, 0}, causal), "separability_rows");
}

TEST_CASE("float heads are read in place: the same statistics as their double copy; exact ‖J‖₂ in float",
          "[capacity][profile]") {
  Random random(77);
  const Head head = random_head(random, 32, 6, causal);
  const RowMatrix<float> attention = head.attention.cast<float>(), values = head.values.cast<float>();
  const RowMatrix<double> attention_d = attention.cast<double>(), values_d = values.cast<double>();
  // weights and values are converted entry by entry to double, as the copies were: identical results
  const DistanceRows rows = distance_rows(attention, values, 4, causal);
  const DistanceRows rows_d = distance_rows(attention_d, values_d, 4, causal);
  CHECK(rows.true_distance == rows_d.true_distance);
  CHECK(rows.other_reading == rows_d.other_reading);
  CHECK(rows.bound == rows_d.bound);
  for (std::size_t k = 0; k < rows.expectation.size(); ++k)
    CHECK(rows.expectation[k] == Approx(rows_d.expectation[k]).epsilon(1e-14));
  CHECK(separability_rows(attention, values, 4, causal).fraction ==
        separability_rows(attention_d, values_d, 4, causal).fraction);
  const Vector<float> w = attention.row(20).transpose();
  const std::vector<Index> top = top_n(w, 5);
  CHECK(representation_distance(w, values, top) == representation_distance(Vector<double>(w.cast<double>()), values_d, top));
  CHECK(min_pairwise_distance(values) == min_pairwise_distance(values_d));
  // scores: g(T, ε) converts each row to double (identical); the exact norm runs in float, to float precision
  RowMatrix<double> scores_d = gaussian_matrix(random, 32, 32) * 2.0;
  const RowMatrix<float> scores = scores_d.cast<float>();
  scores_d = scores.cast<double>();
  CHECK(finite_difference_jacobian_norm_mean(scores, 0.5, 1e-3, 3, causal) ==
        finite_difference_jacobian_norm_mean(scores_d, 0.5, 1e-3, 3, causal));
  const ExactJacobianNorm exact = exact_jacobian_norm(std::vector<RowMatrix<float>>{scores}, 0.5, causal);
  const ExactJacobianNorm exact_d = exact_jacobian_norm(std::vector<RowMatrix<double>>{scores_d}, 0.5, causal);
  CHECK(exact.max_over_rows == Approx(exact_d.max_over_rows).epsilon(2e-6));
  CHECK(exact.max_of_head_means == Approx(exact_d.max_of_head_means).epsilon(2e-6));
}
