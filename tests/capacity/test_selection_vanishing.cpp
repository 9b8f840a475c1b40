// Top-N selection, context vector (docs/theory/capacity.md §2, Eq. 6) and vanishing attention (Lemma 1, Corollary 1).
#include <algorithm>
#include <cmath>
#include <vector>

#include "attnscope/capacity/selection.hpp"
#include "attnscope/capacity/vanishing.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "random_instances.hpp"

using namespace attnscope;
using namespace attnscope::capacity;
using namespace attnscope::testing;

TEST_CASE("top_n orders by weight and breaks ties by the lower index", "[capacity][selection]") {
  Eigen::RowVectorXd w(6);
  w << 0.1, 0.3, 0.2, 0.3, 0.0, 0.1;
  CHECK(top_n(w, 1) == std::vector<Index>{1});
  CHECK(top_n(w, 2) == std::vector<Index>{1, 3});
  CHECK(top_n(w, 4) == std::vector<Index>{1, 3, 2, 0});
  CHECK(top_n(w, 6) == std::vector<Index>{1, 3, 2, 0, 5, 4});
  CHECK(top_n(Eigen::VectorXf(w.transpose().cast<float>()), 3) == std::vector<Index>{1, 3, 2});
}

TEST_CASE("top_n agrees with a full stable sort on random rows with ties", "[capacity][selection]") {
  Random random(11);
  for (int instance = 0; instance < 1000; ++instance) {
    const Index size = 1 + static_cast<Index>(random.below(40));
    Vector<double> w(size);
    for (Index i = 0; i < size; ++i) w(i) = static_cast<double>(random.below(5));  // many ties
    const Index count = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(size)));
    std::vector<Index> order(static_cast<std::size_t>(size));
    for (Index i = 0; i < size; ++i) order[static_cast<std::size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return w(a) > w(b); });
    order.resize(static_cast<std::size_t>(count));
    REQUIRE(top_n(w, count) == order);
  }
}

TEST_CASE("context_vector is the weighted sum of the selected embeddings", "[capacity][selection]") {
  Eigen::VectorXd w(3);
  w << 0.5, 0.3, 0.2;
  Eigen::MatrixXd x(3, 2);
  x << 1, 0, 0, 2, -1, -1;
  const Vector<double> s = context_vector(w, x, {0, 2});
  CHECK(s(0) == Approx(0.5 - 0.2));
  CHECK(s(1) == Approx(-0.2));
}

TEST_CASE("selection rejects bad input", "[capacity][selection][errors]") {
  Eigen::VectorXd w(3);
  w << 0.5, 0.3, 0.2;
  Eigen::MatrixXd x = Eigen::MatrixXd::Ones(3, 2);
  CAPACITY_CHECK_INVALID(top_n(w, 0), "top_n");
  CAPACITY_CHECK_INVALID(top_n(w, 4), "top_n");
  CAPACITY_CHECK_INVALID(top_n(Eigen::VectorXd(0), 1), "top_n");
  CAPACITY_CHECK_INVALID(top_n(Eigen::MatrixXd::Ones(2, 2), 1), "top_n");
  Eigen::VectorXd bad = w;
  bad(1) = std::nan("");
  CAPACITY_CHECK_INVALID(top_n(bad, 1), "top_n");
  bad(1) = -0.1;
  CAPACITY_CHECK_INVALID(top_n(bad, 1), "top_n");
  CAPACITY_CHECK_INVALID(context_vector(w, x, {}), "context_vector");
  CAPACITY_CHECK_INVALID(context_vector(w, x, {0, 0}), "context_vector");
  CAPACITY_CHECK_INVALID(context_vector(w, x, {3}), "context_vector");
  CAPACITY_CHECK_INVALID(context_vector(w, Eigen::MatrixXd::Ones(2, 2), {0}), "context_vector");
  Eigen::MatrixXd x_bad = x;
  x_bad(2, 1) = INFINITY;
  CAPACITY_CHECK_INVALID(context_vector(w, x_bad, {0}), "context_vector");
}

TEST_CASE("Corollary 1 bounds hold for softmax rows with bounded logits", "[capacity][vanishing]") {
  Random random(21);
  for (int instance = 0; instance < 1000; ++instance) {
    const Index length = 1 + static_cast<Index>(random.below(300)), dim = 1 + static_cast<Index>(random.below(16));
    const double temperature = std::exp(random.uniform(std::log(0.2), std::log(20.0)));
    const RowMatrix<double> keys = gaussian_matrix(random, length, dim) * random.uniform(0.1, 2.0);
    Vector<double> query(dim);
    for (Index j = 0; j < dim; ++j) query(j) = random.normal();
    const RowMatrix<double> logits = (keys * query).transpose();
    const RowMatrix<double> weights = softmax(logits, temperature);
    double largest_key = 0;
    for (Index i = 0; i < length; ++i) largest_key = std::max(largest_key, keys.row(i).norm());
    const WeightBounds bounds = softmax_weight_bounds(query.norm(), largest_key, temperature, length);
    REQUIRE(weights.minCoeff() >= bounds.lower * (1 - 1e-12));
    REQUIRE(weights.maxCoeff() <= bounds.upper * (1 + 1e-12));
  }
}

TEST_CASE("Lemma 1 constants bound every weight of a general positive map", "[capacity][vanishing]") {
  Random random(22);
  // F(l) = 2 + sin(3l) (positive, non-monotone) and F(l) = log(1 + e^l) (softplus); logits in [−a, a].
  const auto wavy = [](double l) { return 2 + std::sin(3 * l); };
  const auto softplus = [](double l) { return std::log1p(std::exp(l)); };
  for (int instance = 0; instance < 1000; ++instance) {
    const Index length = 1 + static_cast<Index>(random.below(200));
    const double range = random.uniform(0.01, 5.0);
    const bool use_wavy = instance % 2 == 0;
    double f_min = INFINITY, f_max = 0;  // min/max of F on [−a, a] on a fine grid plus the endpoints
    for (int k = 0; k <= 20000; ++k) {
      const double l = -range + 2 * range * k / 20000.0;
      const double f = use_wavy ? wavy(l) : softplus(l);
      f_min = std::min(f_min, f);
      f_max = std::max(f_max, f);
    }
    std::vector<double> values(static_cast<std::size_t>(length));
    double total = 0;
    for (auto& v : values) {
      const double l = random.uniform(-range, range);
      v = use_wavy ? wavy(l) : softplus(l);
      total += v;
    }
    const WeightConstants constants = lemma1_constants(f_min, f_max);
    for (const double v : values) {
      REQUIRE(v / total >= constants.lower / double(length) * (1 - 1e-9));
      REQUIRE(v / total <= constants.upper / double(length) * (1 + 1e-9));
    }
  }
}

TEST_CASE("Lemma 1 constants for F = exp(l/T) on [−Δ, Δ] are Corollary 1's", "[capacity][vanishing]") {
  for (const double delta : {0.0, 0.5, 2.0}) {
    const WeightConstants constants = lemma1_constants(std::exp(-delta / 0.7), std::exp(delta / 0.7));
    const WeightBounds bounds = softmax_weight_bounds(delta, 1.0, 0.7, 10);
    CHECK(constants.lower / 10 == Approx(bounds.lower));
    CHECK(constants.upper / 10 == Approx(bounds.upper));
  }
  const WeightBounds uniform = softmax_weight_bounds(0.0, 3.0, 1.0, 8);
  CHECK(uniform.lower == 0.125);
  CHECK(uniform.upper == 0.125);
}

TEST_CASE("weight_summary: max weight of bounded-logit softmax rows vanishes like 1/L", "[capacity][vanishing]") {
  Random random(23);
  double previous = 1;
  for (const Index length : {32, 256, 2048}) {
    const RowMatrix<double> logits = gaussian_matrix(random, 16, length).cwiseMax(-2.0).cwiseMin(2.0);
    const WeightSummary summary = weight_summary(softmax(logits));
    CHECK(summary.mean_weight == Approx(1.0 / double(length)));
    CHECK(summary.max_weight <= std::exp(4.0) / double(length));  // Cor. 1 with Δ/T = 2
    CHECK(summary.mean_row_max < previous);
    CHECK(summary.mean_row_max_times_length >= 1.0);
    CHECK(summary.mean_row_max_times_length <= std::exp(4.0));
    previous = summary.mean_row_max;
  }
  Eigen::MatrixXd causal_weights(3, 3);
  causal_weights << 1, 0, 0, 0.25, 0.75, 0, 0.2, 0.3, 0.5;
  const WeightSummary summary = weight_summary(causal_weights, causal);
  CHECK(summary.max_weight == 1.0);
  CHECK(summary.mean_row_max == Approx((1 + 0.75 + 0.5) / 3));
  CHECK(summary.mean_weight == Approx(3.0 / 6.0));
  CHECK(summary.mean_row_max_times_length == Approx((1 + 1.5 + 1.5) / 3));
}

TEST_CASE("vanishing-attention functions reject bad input", "[capacity][vanishing][errors]") {
  CAPACITY_CHECK_INVALID(lemma1_constants(0.0, 1.0), "lemma1_constants");
  CAPACITY_CHECK_INVALID(lemma1_constants(2.0, 1.0), "lemma1_constants");
  CAPACITY_CHECK_INVALID(lemma1_constants(1.0, INFINITY), "lemma1_constants");
  CAPACITY_CHECK_INVALID(softmax_weight_bounds(-1.0, 1.0, 1.0, 4), "softmax_weight_bounds");
  CAPACITY_CHECK_INVALID(softmax_weight_bounds(1.0, NAN, 1.0, 4), "softmax_weight_bounds");
  CAPACITY_CHECK_INVALID(softmax_weight_bounds(1.0, 1.0, 0.0, 4), "softmax_weight_bounds");
  CAPACITY_CHECK_INVALID(softmax_weight_bounds(1.0, 1.0, 1.0, 0), "softmax_weight_bounds");
  CAPACITY_CHECK_INVALID(weight_summary(Eigen::MatrixXd(0, 3)), "weight_summary");
  Eigen::MatrixXd w = Eigen::MatrixXd::Constant(2, 2, 0.5);
  w(1, 0) = -0.5;
  CAPACITY_CHECK_INVALID(weight_summary(w), "weight_summary");
  w(1, 0) = NAN;
  CAPACITY_CHECK_INVALID(weight_summary(w), "weight_summary");
  CAPACITY_CHECK_INVALID(weight_summary(Eigen::MatrixXd::Ones(2, 2), Mask(Mask::Constant(2, 3, true))), "weight_summary");
  Mask empty_row = Mask::Constant(2, 2, true);
  empty_row.row(1).setConstant(false);
  CAPACITY_CHECK_INVALID(weight_summary(Eigen::MatrixXd::Ones(2, 2), empty_row), "weight_summary");
}
