// The learned sink logit of the attention kernel (gpt-oss `sinks`): p_j = e^{z_j}/(Σ_k e^{z_k} + e^s) over the visible
// keys. On seeded random Q, K, V (float and double; causal, sliding windows, every key) the kernel's probabilities
// equal the normalize module's softmax_with_sink of the dense scaled logits, the sink share σ equals 1 − Σ_j p_j, the
// output is P·V with those sub-stochastic rows, and every statistic equals its definition computed densely here:
// entropy of the renormalised row, entropy of the (n+1)-part composition, sink mass, max weight, top-k masses, and
// ‖diag p − ppᵀ‖₂ from a dense symmetric eigensolver.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <Eigen/Eigenvalues>

#include "attnscope/normalize/sink_softmax.hpp"
#include "attnscope/stream.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::Visibility;
using attnscope::stream::AttentionCapture;
using attnscope::stream::RowStatistics;
using attnscope::stream::RowStatisticsOptions;

// The largest eigenvalue of diag(p) − ppᵀ (positive semi-definite), densely.
double dense_jacobian_norm(const std::vector<double>& p) {
  const Index n = static_cast<Index>(p.size());
  Eigen::MatrixXd jacobian(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) jacobian(i, j) = (i == j ? p[std::size_t(i)] : 0.0) - p[std::size_t(i)] * p[std::size_t(j)];
  return Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(jacobian, Eigen::EigenvaluesOnly).eigenvalues().maxCoeff();
}

template <class Scalar>
void check_learned_sink(std::uint64_t seed, Index rows, Index d, const Visibility& visibility, double sink_logit,
                        double tolerance) {
  attnscope::Random random(seed);
  const RowMatrix<Scalar> q = attnscope::testing::random_logits<Scalar>(random, rows, d, 1.0);
  const RowMatrix<Scalar> k = attnscope::testing::random_logits<Scalar>(random, rows, d, 1.0);
  const RowMatrix<Scalar> v = attnscope::testing::random_logits<Scalar>(random, rows, d, 1.0);
  RowStatisticsOptions options;
  options.visibility = visibility;
  options.sink_logit = sink_logit;
  options.top_k = {1, 3};
  options.block_rows = 5;  // several blocks, one not full
  RowMatrix<Scalar> probabilities;
  RowStatistics statistics;
  attnscope::Vector<double> shares;
  AttentionCapture<Scalar> capture;
  capture.probabilities = &probabilities;
  capture.statistics = &statistics;
  capture.learned_sink = &shares;
  const RowMatrix<Scalar> output = attnscope::stream::attention(q, k, v, options, capture);

  // the reference: the dense scaled logits through the normalize module's sink softmax
  const double scale = 1.0 / std::sqrt(double(d));
  const RowMatrix<double> logits = scale * (q.template cast<double>() * k.template cast<double>().transpose());
  const RowMatrix<double> expected = attnscope::softmax_with_sink(logits, sink_logit, visibility);
  REQUIRE(statistics.learned_sink.size() == rows);
  REQUIRE(statistics.entropy_with_sink.size() == rows);
  for (Index i = 0; i < rows; ++i) {
    std::vector<double> p;
    double total = 0;
    for (Index j = 0; j < rows; ++j) {
      CHECK(std::abs(double(probabilities(i, j)) - expected(i, j)) <= tolerance);
      if (visibility.visible(i, j, rows)) p.push_back(expected(i, j));
      total += expected(i, j);
    }
    const double sigma = 1.0 - total;
    CHECK(std::abs(statistics.learned_sink(i) - sigma) <= tolerance);
    CHECK(shares(i) == statistics.learned_sink(i));
    // entropy of the row renormalised over its keys, and of the composition (p, σ)
    double renormalised = 0, composition = sigma > 0 ? -sigma * std::log(sigma) : 0.0;
    for (const double value : p) {
      renormalised -= value / total * std::log(value / total);
      composition -= value * std::log(value);
    }
    CHECK(std::abs(statistics.entropy(i) - renormalised) <= 20 * tolerance);
    CHECK(std::abs(statistics.entropy_with_sink(i) - composition) <= 20 * tolerance);
    CHECK(std::abs(statistics.sink_mass(i) - expected(i, 0)) <= tolerance);
    std::vector<double> sorted = p;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    CHECK(std::abs(statistics.max_weight(i) - sorted[0]) <= tolerance);
    double top3 = 0;
    for (std::size_t t = 0; t < std::min<std::size_t>(3, sorted.size()); ++t) top3 += sorted[t];
    CHECK(std::abs(statistics.top_k_mass(i, 0) - sorted[0]) <= tolerance);
    CHECK(std::abs(statistics.top_k_mass(i, 1) - top3) <= 3 * tolerance);
    CHECK(std::abs(statistics.jacobian_norm(i) - dense_jacobian_norm(p)) <= 10 * tolerance);
  }
  // the output is P·V with the sub-stochastic rows
  const RowMatrix<double> expected_output = expected * v.template cast<double>();
  CHECK((output.template cast<double>() - expected_output).cwiseAbs().maxCoeff() <= 10 * tolerance);
}

}  // namespace

TEST_CASE("stream::attention with a learned sink logit: probabilities, sink share, output and statistics") {
  const double sinks[] = {-3.0, 0.0, 0.7, 2.5};
  std::uint64_t seed = 4100;
  for (const double sink : sinks) {
    for (const Visibility& visibility : {Visibility(attnscope::causal), Visibility(attnscope::SlidingWindow{4, true, 0}),
                                         Visibility()}) {
      check_learned_sink<double>(++seed, 23, 8, visibility, sink, 1e-12);
      check_learned_sink<float>(++seed, 23, 8, visibility, sink, 2e-6);
    }
  }
}

TEST_CASE("stream::attention with a learned sink: a sink far below the logits is plain softmax; far above takes all") {
  attnscope::Random random(77);
  const RowMatrix<double> q = attnscope::testing::random_logits<double>(random, 9, 4);
  const RowMatrix<double> k = attnscope::testing::random_logits<double>(random, 9, 4);
  RowStatisticsOptions plain, low, high;
  low.sink_logit = -800.0;  // e^s underflows: σ = 0 exactly
  high.sink_logit = 800.0;  // the sink takes every row: σ = 1 and every weight 0
  const RowStatistics reference = attnscope::stream::row_statistics(q, k, plain);
  const RowStatistics below = attnscope::stream::row_statistics(q, k, low);
  const RowStatistics above = attnscope::stream::row_statistics(q, k, high);
  for (Index i = 0; i < 9; ++i) {
    CHECK(below.learned_sink(i) == 0.0);
    CHECK(below.entropy(i) == reference.entropy(i));
    CHECK(below.entropy_with_sink(i) == reference.entropy(i));
    CHECK(below.max_weight(i) == reference.max_weight(i));
    CHECK(below.jacobian_norm(i) == Approx(reference.jacobian_norm(i)).epsilon(1e-12));
    CHECK(above.learned_sink(i) == 1.0);
    CHECK(above.max_weight(i) == 0.0);
    CHECK(above.sink_mass(i) == 0.0);
    CHECK(above.entropy_with_sink(i) == 0.0);
    CHECK(std::isfinite(above.jacobian_norm(i)));
    CHECK(above.jacobian_norm(i) == 0.0);
  }
  CHECK(reference.learned_sink.size() == 0);
  CHECK(reference.entropy_with_sink.size() == 0);
}

TEST_CASE("stream::attention refuses a non-finite learned sink logit, naming it") {
  const RowMatrix<double> q = attnscope::testing::random_logits<double>(5, 3, 2);
  RowStatisticsOptions options;
  for (const double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    options.sink_logit = bad;
    const std::string message =
        attnscope::testing::error_message([&] { attnscope::stream::row_statistics(q, q, options); });
    CHECK(message.find("sink_logit must be finite") != std::string::npos);
  }
}
