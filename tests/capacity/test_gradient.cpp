// Gradient sensitivity: Lemma 2's [derived] bound, the finite-difference estimator of Alg. 5 and its limit ‖J v‖₂.
// Oracles: dense Jacobians by central finite differences (general F) or the closed form (1/T)(diag α − ααᵀ)
// (docs/theory/normalization-maps.md §4.1), spectral norms by Eigen's SVD / symmetric eigensolver.
#include <cmath>
#include <functional>
#include <vector>


#include "attnscope/core/decompositions.hpp"
#include "attnscope/capacity/gradient.hpp"
#include "random_instances.hpp"

using namespace attnscope;
using namespace attnscope::capacity;
using namespace attnscope::testing;

namespace {

using Function = std::function<double(double)>;

Eigen::VectorXd normalized_map(const Function& f, const Eigen::VectorXd& logits) {
  Eigen::VectorXd out = logits.unaryExpr(f);
  return out / out.sum();
}

/// Dense Jacobian of α(l) = F(l)/ΣF by central differences (error O(h²)).
Eigen::MatrixXd central_difference_jacobian(const Function& f, const Eigen::VectorXd& logits) {
  const double h = 1e-5;
  Eigen::MatrixXd out(logits.size(), logits.size());
  for (Index k = 0; k < logits.size(); ++k) {
    Eigen::VectorXd plus = logits, minus = logits;
    plus(k) += h;
    minus(k) -= h;
    out.col(k) = (normalized_map(f, plus) - normalized_map(f, minus)) / (2 * h);
  }
  return out;
}

/// (1/T)(diag α − ααᵀ), α = softmax(l/T).
Eigen::MatrixXd softmax_jacobian(const Eigen::VectorXd& logits, double temperature) {
  const Eigen::VectorXd alpha = softmax(logits.transpose(), temperature).row(0).transpose();
  return (Eigen::MatrixXd(alpha.asDiagonal()) - alpha * alpha.transpose()) / temperature;
}

double largest_eigenvalue(const Eigen::MatrixXd& symmetric) {
  return attnscope::detail::symmetric_eigen(symmetric, false).values.maxCoeff();
}

Eigen::VectorXd random_unit(Random& random, Index size) {
  Eigen::VectorXd v(size);
  for (Index i = 0; i < size; ++i) v(i) = random.normal();
  return v / v.norm();
}

}  // namespace

TEST_CASE("Lemma 2 bound exceeds the exact Jacobian norm for general positive maps", "[capacity][gradient]") {
  Random random(61);
  const std::vector<std::pair<Function, Function>> maps{
      {[](double l) { return std::exp(l / 0.3); }, [](double l) { return std::exp(l / 0.3) / 0.3; }},
      {[](double l) { return std::log1p(std::exp(l)); }, [](double l) { return 1 / (1 + std::exp(-l)); }},
      {[](double l) { return 1 + l * l; }, [](double l) { return 2 * l; }},
      {[](double l) { return 2 + std::sin(3 * l); }, [](double l) { return 3 * std::cos(3 * l); }},
  };
  for (int instance = 0; instance < 1000; ++instance) {
    const auto& [f, derivative] = maps[static_cast<std::size_t>(instance % 4)];
    const Index length = 1 + static_cast<Index>(random.below(12));
    Eigen::VectorXd logits(length);
    for (Index i = 0; i < length; ++i) logits(i) = random.uniform(-2.0, 2.0);
    const Eigen::VectorXd values = logits.unaryExpr(f), derivatives = logits.unaryExpr(derivative);
    const Lemma2Bound bound = lemma2_jacobian_bound(values, derivatives);
    const double exact = attnscope::detail::singular_values_jacobi(Eigen::MatrixXd(central_difference_jacobian(f, logits)))(0);
    REQUIRE(exact <= bound.tight * (1 + 1e-6) + 1e-9);
    REQUIRE(bound.tight <= bound.loose * (1 + 1e-12));
  }
  // Softmax at T: F' = F/T, so the tight bound is (max α + ‖α‖₂)/T ≤ 2/T.
  Eigen::VectorXd logits(3);
  logits << 0.0, 0.0, 0.0;
  const Eigen::VectorXd f = logits.array().exp(), derivative = f / 0.5;
  CHECK(lemma2_jacobian_bound(f, derivative).tight == Approx((1.0 / 3 + std::sqrt(3.0) / 3) / 0.5));
  CHECK(lemma2_jacobian_bound(f, derivative).loose == Approx((1.0 / 3 + std::sqrt(3.0) / 3) / 0.5));
}

TEST_CASE("finite-difference ratio converges to ‖J v‖ as ε → 0", "[capacity][gradient]") {
  Random random(62);
  for (int instance = 0; instance < 200; ++instance) {
    const Index length = 2 + static_cast<Index>(random.below(30));
    const double temperature = std::exp(random.uniform(std::log(0.05), std::log(5.0)));
    Eigen::VectorXd logits(length);
    for (Index i = 0; i < length; ++i) logits(i) = random.normal();
    const Eigen::VectorXd v = random_unit(random, length);
    const Eigen::MatrixXd jacobian = softmax_jacobian(logits, temperature);
    const double exact = (jacobian * v).norm();
    double previous_error = INFINITY;
    for (const double step : {1e-2, 1e-3, 1e-4, 1e-5}) {
      const double ratio = finite_difference_jacobian_norm(logits, v, temperature, step);
      const double error = std::abs(ratio - exact);
      // second-order remainder: |ratio − ‖Jv‖| <= ε·‖∇²α‖/2 with ‖∇²α‖ = O(1/T²)
      REQUIRE(error <= step / (temperature * temperature) + 1e-9);
      REQUIRE(error <= previous_error + 1e-9);
      previous_error = error;
    }
    // ‖J v‖ <= ‖J‖₂ = λ_max (J is symmetric PSD), and ‖J‖₂ <= 1/(2T).
    REQUIRE(finite_difference_jacobian_norm(logits, v, temperature, 1e-6) <=
            largest_eigenvalue(jacobian) * (1 + 1e-4) + 1e-9);
    REQUIRE(largest_eigenvalue(jacobian) <= 1 / (2 * temperature) * (1 + 1e-12));
  }
}

TEST_CASE("two tied top logits: the ratio reaches 1/(2T), above Corollary 3's 1/(4T)", "[capacity][gradient]") {
  Eigen::VectorXd logits(5);
  logits << 1, 1, 0, 0, 0;
  Eigen::VectorXd v(5);
  v << 1, -1, 0, 0, 0;
  v /= std::sqrt(2.0);
  const double temperature = 0.01;
  const double along_eigenvector = finite_difference_jacobian_norm(logits, v, temperature, 1e-4);
  CHECK(along_eigenvector == Approx(1 / (2 * temperature)).epsilon(1e-4));
  CHECK(along_eigenvector > 1 / (4 * temperature));
  // Some random unit directions exceed 1/(4T) as well (the reference check found 26.0 > 25 for one).
  Random random(63);
  double largest = 0;
  for (int trial = 0; trial < 1000; ++trial)
    largest = std::max(largest, finite_difference_jacobian_norm(logits, random_unit(random, 5), temperature, 1e-4));
  CHECK(largest > 1 / (4 * temperature));
  CHECK(largest <= 1 / (2 * temperature));
}

TEST_CASE("Alg. 5 per-head mean and g(T, ε) = max over heads", "[capacity][gradient]") {
  Random random(64);
  std::vector<RowMatrix<double>> heads;
  for (int h = 0; h < 3; ++h) heads.push_back(gaussian_matrix(random, 16, 16) * (1.0 + 2 * h));
  const double temperature = 0.5, step = 1e-3;
  const GradientSensitivity g = gradient_sensitivity(heads, temperature, step, 7, causal);
  REQUIRE(g.per_head.size() == 3);
  for (std::size_t h = 0; h < 3; ++h)
    CHECK(g.per_head[h] == finite_difference_jacobian_norm_mean(heads[h], temperature, step, 7 + h, causal));
  CHECK(g.value == *std::max_element(g.per_head.begin(), g.per_head.end()));
  CHECK(g.per_head[static_cast<std::size_t>(g.head)] == g.value);
  // The mean reproduces a manual loop with the same random stream (fresh Gaussian direction per row).
  Random directions(7);
  double manual = 0;
  for (Index row = 0; row < 16; ++row) {
    const Eigen::VectorXd logits = heads[0].row(row).head(row + 1).transpose();
    const Eigen::VectorXd v = random_unit(directions, row + 1);
    manual += finite_difference_jacobian_norm(logits, v, temperature, step);
  }
  CHECK(g.per_head[0] == Approx(manual / 16).epsilon(1e-12));
  // Every row's ratio is at most its exact norm (+O(ε)), so the mean is at most the mean exact norm.
  double exact_mean = 0;
  for (Index row = 0; row < 16; ++row)
    exact_mean += largest_eigenvalue(softmax_jacobian(heads[0].row(row).head(row + 1).transpose(), temperature));
  CHECK(g.per_head[0] <= exact_mean / 16 + step / (temperature * temperature));
  // A single visible key has a constant weight: zero sensitivity.
  CHECK(finite_difference_jacobian_norm_mean(Eigen::MatrixXd::Ones(1, 1), 1.0, 1e-3, 1) == 0.0);
}

TEST_CASE("gradient functions reject bad input", "[capacity][gradient][errors]") {
  Eigen::VectorXd f(2), d(2);
  f << 1, 2;
  d << 0.5, 0.5;
  CAPACITY_CHECK_INVALID(lemma2_jacobian_bound(Eigen::VectorXd(0), Eigen::VectorXd(0)), "lemma2_jacobian_bound");
  CAPACITY_CHECK_INVALID(lemma2_jacobian_bound(f, Eigen::VectorXd::Ones(3)), "lemma2_jacobian_bound");
  Eigen::VectorXd bad = f;
  bad(0) = 0;
  CAPACITY_CHECK_INVALID(lemma2_jacobian_bound(bad, d), "lemma2_jacobian_bound");
  bad(0) = NAN;
  CAPACITY_CHECK_INVALID(lemma2_jacobian_bound(bad, d), "lemma2_jacobian_bound");
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm(f, d, 0.0, 1e-3), "finite_difference_jacobian_norm");
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm(f, d, 1.0, -1e-3), "finite_difference_jacobian_norm");
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm(f, Eigen::VectorXd::Zero(2), 1.0, 1e-3),
                         "finite_difference_jacobian_norm");
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm(f, Eigen::VectorXd::Ones(3), 1.0, 1e-3),
                         "finite_difference_jacobian_norm");
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm(bad, d, 1.0, 1e-3), "finite_difference_jacobian_norm");
  Eigen::MatrixXd logits = Eigen::MatrixXd::Ones(2, 2);
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm_mean(logits, INFINITY, 1e-3, 1),
                         "finite_difference_jacobian_norm_mean");
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm_mean(Eigen::MatrixXd(0, 0), 1.0, 1e-3, 1),
                         "finite_difference_jacobian_norm_mean");
  logits(1, 0) = NAN;
  CAPACITY_CHECK_INVALID(finite_difference_jacobian_norm_mean(logits, 1.0, 1e-3, 1),
                         "finite_difference_jacobian_norm_mean");
  CHECK_NOTHROW(finite_difference_jacobian_norm_mean(logits.transpose(), 1.0, 1e-3, 1, causal));  // NaN is masked
  CAPACITY_CHECK_INVALID(gradient_sensitivity(std::vector<Eigen::MatrixXd>{}, 1.0, 1e-3, 1), "gradient_sensitivity");
  CAPACITY_CHECK_INVALID(gradient_sensitivity(std::vector<Eigen::MatrixXd>{Eigen::MatrixXd::Ones(2, 2), logits}, 1.0,
                                              1e-3, 1),
                         "gradient_sensitivity");
}

TEST_CASE("exact Jacobian norms of heads agree with a dense eigensolver and stay below 1/(2T)", "[capacity][gradient]") {
  Random random(65);
  std::vector<RowMatrix<double>> heads;
  for (int h = 0; h < 3; ++h) heads.push_back(gaussian_matrix(random, 12, 12) * (0.5 + 3 * h));
  for (const double temperature : {0.05, 1.0, 4.0}) {
    const ExactJacobianNorm exact = exact_jacobian_norm(heads, temperature, causal);
    double max_mean = 0, max_row = 0;
    for (std::size_t h = 0; h < heads.size(); ++h) {
      double total = 0;
      for (Index row = 0; row < 12; ++row) {
        const double norm = largest_eigenvalue(softmax_jacobian(heads[h].row(row).head(row + 1).transpose(), temperature));
        total += norm;
        max_row = std::max(max_row, norm);
      }
      CHECK(exact.per_head_mean[h] == Approx(total / 12).epsilon(1e-9).margin(1e-15));
      max_mean = std::max(max_mean, total / 12);
    }
    CHECK(exact.max_of_head_means == Approx(max_mean).epsilon(1e-9));
    CHECK(exact.max_over_rows == Approx(max_row).epsilon(1e-9));
    CHECK(exact.max_over_rows <= softmax_jacobian_norm_supremum(temperature) * (1 + 1e-12));
    // g(T, ε) with small ε never exceeds the exact aggregate (each row: ‖Jv‖ <= ‖J‖₂).
    CHECK(gradient_sensitivity(heads, temperature, 1e-6, 3, causal).value <= exact.max_of_head_means * (1 + 1e-4));
  }
  CAPACITY_CHECK_INVALID(exact_jacobian_norm(std::vector<RowMatrix<double>>{}, 1.0), "exact_jacobian_norm");
  CAPACITY_CHECK_INVALID(exact_jacobian_norm(heads, 0.0), "exact_jacobian_norm");
  RowMatrix<double> bad = heads[0];
  bad(3, 1) = NAN;
  CAPACITY_CHECK_INVALID(exact_jacobian_norm(std::vector<RowMatrix<double>>{bad}, 1.0, causal), "exact_jacobian_norm");
}
