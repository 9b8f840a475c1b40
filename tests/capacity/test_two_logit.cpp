// Top-2 gaps and the two-logit closed form of the softmax Jacobian norm (capacity/gradient.hpp): against the exact
// spectral norm of J = (1/T)(diag α − ααᵀ) from an independent symmetric eigensolver, its supremum 1/(2T), and the
// fact that 1/(4T) (Corollary 3) is exceeded by near-tied rows.
#include <cmath>
#include <limits>
#include <vector>


#include "attnscope/core/decompositions.hpp"
#include "attnscope/capacity/gradient.hpp"
#include "attnscope/core/random.hpp"
#include "support/catch.hpp"

using namespace attnscope;
using namespace attnscope::capacity;

namespace {

/// ‖(1/T)(diag α − ααᵀ)‖₂, α = softmax(l/T), by Eigen's symmetric eigensolver (largest |eigenvalue|). The diagonal
/// α_i − α_i² is formed as α_i·Σ_{j≠i} α_j (equal since Σ α = 1) so that 1 − α_i does not cancel when α_i ≈ 1.
double jacobian_norm_by_eigensolver(const Eigen::VectorXd& logits, double temperature) {
  Eigen::VectorXd alpha = ((logits.array() - logits.maxCoeff()) / temperature).exp().matrix();
  alpha /= alpha.sum();
  Eigen::MatrixXd jacobian = -alpha * alpha.transpose();
  for (Index i = 0; i < alpha.size(); ++i) {
    double others = 0;
    for (Index j = 0; j < alpha.size(); ++j) others += j == i ? 0.0 : alpha(j);
    jacobian(i, i) = alpha(i) * others;
  }
  jacobian /= temperature;
  return attnscope::detail::symmetric_eigen(jacobian, false).values.cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("two-logit closed form equals the exact norm of two-logit rows", "[capacity][gradient][two_logit]") {
  Random random(4242);
  for (int trial = 0; trial < 200; ++trial) {
    const double temperature = std::pow(10.0, random.uniform(-3, 1));
    const double gap = temperature * std::pow(10.0, random.uniform(-3, 1.3));
    Eigen::VectorXd logits(2);
    logits << random.normal(), 0;
    logits(1) = logits(0) - gap;
    const double expected = jacobian_norm_by_eigensolver(logits, temperature);
    CHECK(two_logit_jacobian_norm(gap, temperature) == Approx(expected).epsilon(1e-9).margin(1e-300));
    // The module's exact per-head norm on the same row agrees too.
    const std::vector<Eigen::MatrixXd> head{logits.transpose()};
    CHECK(exact_jacobian_norm(head, temperature).max_over_rows == Approx(expected).epsilon(1e-9));
  }
}

TEST_CASE("the supremum is 1/(2T) at a tie, twice Corollary 3's 1/(4T)", "[capacity][gradient][two_logit]") {
  for (const double temperature : {1e-3, 1e-2, 0.1, 1.0, 10.0}) {
    CHECK(two_logit_jacobian_norm(0, temperature) == Approx(1 / (2 * temperature)));
    CHECK(two_logit_jacobian_norm(0, temperature) * 4 * temperature == Approx(2));
    CHECK(two_logit_jacobian_norm(std::numeric_limits<double>::infinity(), temperature) == 0);
    CHECK(two_logit_jacobian_norm(1e6, temperature) == 0);  // no overflow: e^{−g/T} underflows to 0
    // Strictly decreasing in the gap.
    CHECK(two_logit_jacobian_norm(0.5 * temperature, temperature) < two_logit_jacobian_norm(0.25 * temperature, temperature));
  }
  // Many-logit rows: exact ‖J‖₂ <= 1/(2T); with the rest far below, the two-logit form is exact to rounding.
  Random random(99);
  for (int trial = 0; trial < 100; ++trial) {
    const Index size = 3 + trial % 20;
    const double temperature = std::pow(10.0, random.uniform(-2, 1));
    Eigen::VectorXd logits(size);
    for (Index i = 0; i < size; ++i) logits(i) = random.normal();
    CHECK(jacobian_norm_by_eigensolver(logits, temperature) <= 1 / (2 * temperature) * (1 + 1e-12));
    const double gap = 0.3 * temperature * random.uniform();
    logits(0) = 0;
    logits(1) = -gap;
    for (Index i = 2; i < size; ++i) logits(i) = -60 * temperature - random.uniform();
    CHECK(two_logit_jacobian_norm(gap, temperature) ==
          Approx(jacobian_norm_by_eigensolver(logits, temperature)).epsilon(1e-9));
  }
}

TEST_CASE("top_two_gaps per row, causal rows, ties and errors", "[capacity][gradient][two_logit]") {
  Eigen::MatrixXd scores(3, 4);
  scores << 0.5, 9, 9, 9,  //
      2.0, -1.0, 9, 9,     //
      1.0, 3.0, 3.0, -2.0;
  const std::vector<double> all = top_two_gaps(scores);
  REQUIRE(all.size() == 3);
  CHECK(all[0] == 0);  // 9, 9 tie
  CHECK(all[1] == 0);
  CHECK(all[2] == 0);
  const std::vector<double> causal_gaps = top_two_gaps(scores, causal);
  CHECK(std::isinf(causal_gaps[0]));  // one visible key
  CHECK(causal_gaps[1] == Approx(3.0));
  CHECK(causal_gaps[2] == 0);  // 3.0 and 3.0 tie
  Eigen::MatrixXd bad = scores;
  bad(2, 0) = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(top_two_gaps(bad, causal), attnscope::invalid_argument);
  bad(2, 0) = 0;
  bad(0, 3) = std::numeric_limits<double>::infinity();  // future entry: masked, so allowed
  CHECK_NOTHROW(top_two_gaps(bad, causal));
  CHECK_THROWS_AS(top_two_gaps(Eigen::MatrixXd(0, 0)), attnscope::invalid_argument);
  CHECK_THROWS_AS(two_logit_jacobian_norm(-1e-9, 1.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(two_logit_jacobian_norm(std::numeric_limits<double>::quiet_NaN(), 1.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(two_logit_jacobian_norm(1.0, 0.0), attnscope::invalid_argument);
}
