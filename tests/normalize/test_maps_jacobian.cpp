// Jacobians of every map as the executable specification (docs/theory/normalization-maps.md §1-§5, targets 2, 4, 6, 8): dense Jacobian,
// JVP and VJP against central finite differences (< 5e-11 abs in double), adjointness, masks, float vs double,
// ‖J‖₂ from jacobian_spectral_norm against a dense SVD, golden norms, the 1/(4T) counterexample.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>


#include "attnscope/core/decompositions.hpp"
#include "attnscope/normalize.hpp"
#include "attnscope/normalize/dense_reference.hpp"
#include "normalize/normalize_test_helpers.hpp"
#include "support/catch.hpp"
#include "support/random_matrices.hpp"

using attnscope::Index;
using attnscope::NormalizationMap;
using attnscope::Random;
using attnscope::RowMatrix;
using attnscope::SelfAdjustVariant;
using attnscope::testing::log_uniform;
using attnscope::testing::random_logits;

namespace {

const auto softplus_map = attnscope::make_generalized_map([](double x) { return std::log1p(std::exp(x)); },
                                                          [](double x) { return 1 / (1 + std::exp(-x)); });
const auto exponential_map = attnscope::make_generalized_map([](double x) { return std::exp(x / 0.8); },
                                                             [](double x) { return std::exp(x / 0.8) / 0.8; });

/// Every built-in map with the parameters of docs/theory/normalization-maps.md (entmax α ∈ {1.2, 1.5, 1.75, 2.25}).
std::vector<NormalizationMap> all_maps() {
  return {attnscope::SoftmaxMap{}, attnscope::SoftmaxMap{0.35}, attnscope::SparsemaxMap{}, attnscope::Entmax15Map{},
          attnscope::EntmaxBisectMap{1.2}, attnscope::EntmaxBisectMap{1.5}, attnscope::EntmaxBisectMap{1.75},
          attnscope::EntmaxBisectMap{2.25}, attnscope::ScalableSoftmaxMap{0.6},
          attnscope::SelfAdjustSoftmaxMap{SelfAdjustVariant::basic},
          attnscope::SelfAdjustSoftmaxMap{SelfAdjustVariant::normalized}, attnscope::SinkSoftmaxMap{0.0},
          attnscope::SinkSoftmaxMap{1.3}};
}

/// Row logits whose two largest, two smallest entries are separated and away from 0 (SA-Softmax is smooth there).
RowMatrix<double> separated_row(Random& random, Index n, double scale) {
  for (;;) {
    RowMatrix<double> z = random_logits<double>(random, 1, n, scale);
    std::vector<double> sorted(z.data(), z.data() + n);
    std::sort(sorted.begin(), sorted.end());
    bool ok = std::abs(sorted.front()) > 0.02 && std::abs(sorted.back()) > 0.02;
    if (n >= 2) ok = ok && sorted[1] - sorted[0] > 0.02 && sorted[n - 1] - sorted[n - 2] > 0.02;
    if (ok) return z;
  }
}

/// Checks dense Jacobian, JVP and VJP of `map` against finite differences of `forward` on many rows.
template <class Map>
void check_against_finite_differences(const Map& map, const attnscope::testing::RowFunction& forward,
                                      const std::string& name, std::uint64_t seed) {
  Random random(seed);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const Index n = 2 + static_cast<Index>(random.below(9));
    const RowMatrix<double> z = separated_row(random, n, log_uniform(random, 0.2, 3));
    if (!attnscope::testing::support_stable(forward, z, 0.02)) continue;  // a kink within reach of the stencil
    ++checked;
    const RowMatrix<double> numeric = attnscope::testing::central_difference_jacobian(forward, z, 1e-4);
    const RowMatrix<double> dense = attnscope::jacobian(z, map);
    INFO(name << " row " << z);
    CHECK((dense - numeric).cwiseAbs().maxCoeff() < 5e-11);
    const RowMatrix<double> v = random_logits<double>(random, 1, n, 1.0), g = random_logits<double>(random, 1, n, 1.0);
    const RowMatrix<double> jvp = attnscope::jacobian_vector_product(z, map, v);
    const RowMatrix<double> vjp = attnscope::vector_jacobian_product(z, map, g);
    CHECK((jvp - (v * numeric.transpose()).eval()).cwiseAbs().maxCoeff() < 5e-11 * (1 + v.cwiseAbs().sum()));
    CHECK((vjp - g * numeric).cwiseAbs().maxCoeff() < 5e-11 * (1 + g.cwiseAbs().sum()));
  }
  CHECK(checked >= 20);
}

double dense_spectral_norm(const RowMatrix<double>& jacobian) {
  return attnscope::detail::singular_values_jacobi(Eigen::MatrixXd(jacobian))(0);
}

}  // namespace

TEST_CASE("dense Jacobian, JVP and VJP match central finite differences for every map", "[normalize][jacobian]") {
  std::uint64_t seed = 100;
  for (const NormalizationMap& map : all_maps()) {
    const attnscope::testing::RowFunction forward = [map](const RowMatrix<double>& z) {
      return attnscope::apply_map(map, z);
    };
    check_against_finite_differences(map, forward, attnscope::to_string(map), ++seed);
  }
  check_against_finite_differences(softplus_map, [](const RowMatrix<double>& z) {
    return attnscope::normalize(z, softplus_map);
  }, "softplus F", 7);
  check_against_finite_differences(exponential_map, [](const RowMatrix<double>& z) {
    return attnscope::normalize(z, exponential_map);
  }, "exp(z/0.8) F", 8);
}

TEMPLATE_TEST_CASE("JVP and VJP are adjoint, row by row, with masks", "[normalize][jacobian]", float, double) {
  using Scalar = TestType;
  Random random(555);
  const double tolerance = std::is_same<Scalar, float>::value ? 2e-5 : 1e-13;
  for (const NormalizationMap& map : all_maps()) {
    for (int trial = 0; trial < 10; ++trial) {
      const Index rows = 1 + static_cast<Index>(random.below(5)), cols = 1 + static_cast<Index>(random.below(30));
      const RowMatrix<Scalar> z = random_logits<Scalar>(random, rows, cols, log_uniform(random, 0.1, 5));
      const RowMatrix<Scalar> v = random_logits<Scalar>(random, rows, cols, 1.0);
      const RowMatrix<Scalar> g = random_logits<Scalar>(random, rows, cols, 1.0);
      const attnscope::Visibility visibility = trial % 2 ? attnscope::Visibility(attnscope::causal) : attnscope::Visibility();
      const RowMatrix<Scalar> jv = attnscope::jacobian_vector_product(z, map, v, visibility);
      const RowMatrix<Scalar> jtg = attnscope::vector_jacobian_product(z, map, g, visibility);
      for (Index i = 0; i < rows; ++i) {
        const double left = jv.row(i).template cast<double>().dot(g.row(i).template cast<double>());
        // ⟨v, Jᵀg⟩ over the visible keys only (masked entries of v are ignored by J).
        double right = 0;
        for (Index j = 0; j < cols; ++j)
          if (visibility.visible(i, j, cols)) right += double(v(i, j)) * double(jtg(i, j));
        INFO(attnscope::to_string(map));
        CHECK(std::abs(left - right) <= tolerance * (1 + std::abs(left)));
        for (Index j = 0; j < cols; ++j)
          if (!visibility.visible(i, j, cols)) {
            CHECK(jv(i, j) == Scalar(0));
            CHECK(jtg(i, j) == Scalar(0));
          }
      }
    }
  }
}

TEST_CASE("masked JVP/VJP equal the dense masked Jacobian times the vector; float agrees with double",
          "[normalize][jacobian]") {
  Random random(808);
  for (const NormalizationMap& map : all_maps()) {
    const Index rows = 4, cols = 9;
    const RowMatrix<double> z = random_logits<double>(random, rows, cols, 1.2);
    attnscope::Mask mask(rows, cols);
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < cols; ++j) mask(i, j) = (i + 2 * j) % 3 != 0;
    const attnscope::Visibility visibility(mask);
    const RowMatrix<double> v = random_logits<double>(random, rows, cols, 1.0);
    const RowMatrix<double> jv = attnscope::jacobian_vector_product(z, map, v, visibility);
    const RowMatrix<double> jtv = attnscope::vector_jacobian_product(z, map, v, visibility);
    const RowMatrix<float> jv_float =
        attnscope::jacobian_vector_product(RowMatrix<float>(z.cast<float>()), map, v.cast<float>(), visibility);
    INFO(attnscope::to_string(map));
    for (Index i = 0; i < rows; ++i) {
      const RowMatrix<double> dense = attnscope::jacobian(z, i, map, visibility);
      CHECK((jv.row(i) - (v.row(i) * dense.transpose()).eval()).cwiseAbs().maxCoeff() < 1e-14);
      CHECK((jtv.row(i) - v.row(i) * dense).cwiseAbs().maxCoeff() < 1e-14);
    }
    CHECK((jv_float.cast<double>() - jv).cwiseAbs().maxCoeff() < 1e-4 * (1 + jv.cwiseAbs().maxCoeff()));
  }
}

TEST_CASE("golden exact ‖J‖₂ at x = [−2, 0, 0.5] (theory target 2)", "[normalize][spectral]") {
  RowMatrix<double> x(1, 3);
  x << -2, 0, 0.5;
  CHECK(attnscope::jacobian_spectral_norm(x, attnscope::SoftmaxMap{})(0) == Approx(0.448800672).epsilon(2e-9));
  CHECK(attnscope::jacobian_spectral_norm(x, attnscope::SparsemaxMap{})(0) == 1.0);
  CHECK(attnscope::jacobian_spectral_norm(x, attnscope::Entmax15Map{})(0) == Approx(0.673519883).epsilon(2e-9));
  CHECK(attnscope::jacobian_spectral_norm(x, attnscope::EntmaxBisectMap{1.5})(0) == Approx(0.673519883).epsilon(2e-9));
  // ... and the dense Jacobians agree (independent path: SVD of the dense matrix).
  CHECK(dense_spectral_norm(attnscope::jacobian(x, attnscope::SoftmaxMap{})) == Approx(0.448800672).epsilon(2e-9));
  CHECK(dense_spectral_norm(attnscope::jacobian(x, attnscope::Entmax15Map{})) == Approx(0.673519883).epsilon(2e-9));
}

TEST_CASE("jacobian_spectral_norm equals a dense SVD of the dense Jacobian for every map", "[normalize][spectral]") {
  Random random(2718);
  std::vector<NormalizationMap> maps = all_maps();
  for (const NormalizationMap& map : maps) {
    for (int trial = 0; trial < 12; ++trial) {
      // Short rows (Lanczos on the whole space for non-symmetric maps) and long ones (restarted Lanczos), causal masks.
      const Index cols = trial < 6 ? 2 + static_cast<Index>(random.below(14)) : 17 + static_cast<Index>(random.below(60));
      const RowMatrix<double> z = random_logits<double>(random, 3, cols, log_uniform(random, 0.05, 8));
      const attnscope::Visibility visibility =
          trial % 3 == 0 ? attnscope::Visibility(attnscope::Causal{std::max<Index>(cols - 3, 0)}) : attnscope::Visibility();
      const attnscope::Vector<double> norms = attnscope::jacobian_spectral_norm(z, map, visibility);
      for (Index i = 0; i < z.rows(); ++i) {
        const double expected = dense_spectral_norm(attnscope::jacobian(z, i, map, visibility));
        INFO(attnscope::to_string(map) << " n = " << cols << " row " << i);
        CHECK(norms(i) == Approx(expected).epsilon(1e-10).margin(1e-14));
      }
    }
  }
  // A user F: the Lanczos/SVD path on F = exp(z/0.8) reproduces the exact secular value of softmax with T = 0.8.
  for (int trial = 0; trial < 20; ++trial) {
    const Index cols = 2 + static_cast<Index>(random.below(100));
    const RowMatrix<double> z = random_logits<double>(random, 2, cols, 1.5);
    const attnscope::Vector<double> general = attnscope::jacobian_spectral_norm(z, exponential_map);
    const attnscope::Vector<double> exact = attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{0.8});
    CHECK((general - exact).cwiseAbs().maxCoeff() <= 1e-11 * exact.maxCoeff());
    const attnscope::Vector<double> softplus = attnscope::jacobian_spectral_norm(z, softplus_map);
    for (Index i = 0; i < z.rows(); ++i)
      CHECK(softplus(i) == Approx(dense_spectral_norm(attnscope::jacobian(z, i, softplus_map, {}))).epsilon(1e-10));
  }
}

TEMPLATE_TEST_CASE("jacobian_spectral_norm in float agrees with double", "[normalize][spectral]", float, double) {
  using Scalar = TestType;
  Random random(314);
  for (const NormalizationMap& map : all_maps()) {
    const RowMatrix<double> z = random_logits<double>(random, 5, 40, 1.5);
    const attnscope::Vector<double> reference = attnscope::jacobian_spectral_norm(z, map);
    const attnscope::Vector<Scalar> norms = attnscope::jacobian_spectral_norm(RowMatrix<Scalar>(z.cast<Scalar>()), map);
    INFO(attnscope::to_string(map));
    CHECK((norms.template cast<double>() - reference).cwiseAbs().maxCoeff() <=
          (std::is_same<Scalar, float>::value ? 1e-4 : 1e-15) * (1 + reference.maxCoeff()));
  }
}

TEST_CASE("SSMax norm is the softmax norm at T = 1/(s log n); sink softmax norm is at most 1/2", "[normalize][spectral]") {
  Random random(99);
  for (int trial = 0; trial < 30; ++trial) {
    const Index n = 2 + static_cast<Index>(random.below(200));
    const double s = random.uniform(0.1, 1.5);
    const RowMatrix<double> z = random_logits<double>(random, 1, n, 2.0);
    CHECK(attnscope::jacobian_spectral_norm(z, attnscope::ScalableSoftmaxMap{s})(0) ==
          Approx(attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1 / (s * std::log(double(n)))})(0))
              .epsilon(1e-13));
    CHECK(attnscope::jacobian_spectral_norm(z, attnscope::SinkSoftmaxMap{random.uniform(-3, 3)})(0) <= 0.5);
  }
}

TEST_CASE("two tied top logits exceed Corollary 3's 1/(4T) and reach 1/(2T) (docs/theory/normalization-maps.md §5.5, target 8)",
          "[normalize][spectral]") {
  RowMatrix<double> tied(1, 2);
  tied << 0.3, 0.3;
  const Eigen::VectorXd eigenvalues =
      attnscope::detail::symmetric_eigen(Eigen::MatrixXd(attnscope::jacobian(tied, attnscope::SoftmaxMap{})), false).values;
  CHECK(eigenvalues(0) == Approx(0).margin(1e-16));
  CHECK(eigenvalues(1) == Approx(0.5).epsilon(1e-15));
  for (double temperature : {0.01, 0.3, 1.0, 7.0, 100.0}) {
    const double norm = attnscope::jacobian_spectral_norm(tied, attnscope::SoftmaxMap{temperature})(0);
    CHECK(norm == Approx(attnscope::softmax_jacobian_norm_supremum(temperature)).epsilon(1e-14));
    CHECK(norm > 1 / (4 * temperature));
    CHECK(norm > attnscope::corollary3_bound(temperature));
  }
  // Many keys, two tied at the top and the rest far below: still ≈ 1/(2T).
  RowMatrix<double> wide = RowMatrix<double>::Constant(1, 50, -40.0);
  wide(0, 7) = wide(0, 31) = 2.0;
  CHECK(attnscope::jacobian_spectral_norm(wide, attnscope::SoftmaxMap{1.0})(0) == Approx(0.5).epsilon(1e-12));
  // Sparsemax with |S| = 3 on n = 5: J is a projector with eigenvalues {0, 0, 0, 1, 1}.
  RowMatrix<double> sparse_row(1, 5);
  sparse_row << 1, 0.9, 0.8, -5, -6;
  const Eigen::VectorXd projector =
      attnscope::detail::symmetric_eigen(Eigen::MatrixXd(attnscope::jacobian(sparse_row, attnscope::SparsemaxMap{})), false)
          .values;
  for (Index k = 0; k < 5; ++k) CHECK(projector(k) == Approx(k < 3 ? 0.0 : 1.0).margin(1e-14));
}

TEST_CASE("restarted Lanczos equals a dense SVD on random diagonal-plus-low-rank matrices", "[normalize][spectral]") {
  Random random(4096);
  for (int trial = 0; trial < 60; ++trial) {
    const Index n = 2 + static_cast<Index>(random.below(trial < 30 ? 30 : 300));
    attnscope::detail::DiagonalPlusLowRank<double> jacobian;
    jacobian.diagonal.resize(static_cast<std::size_t>(n));
    for (auto& d : jacobian.diagonal) d = random.normal();
    if (trial % 5 == 0)  // clustered top singular values: slow for power iteration, fine for Lanczos
      for (Index k = 0; k < std::min<Index>(n, 4); ++k) jacobian.diagonal[static_cast<std::size_t>(k)] = 3.0 + 1e-9 * k;
    const int terms = static_cast<int>(random.below(4));
    for (int t = 0; t < terms; ++t) {
      attnscope::detail::DiagonalPlusLowRank<double>::Term term;
      for (Index i = 0; i < n; ++i) {
        term.left.push_back(random.normal() / std::sqrt(double(n)));
        term.right.push_back(random.normal());
      }
      jacobian.terms.push_back(term);
    }
    const double expected = dense_spectral_norm(jacobian.dense());
    CHECK(attnscope::detail::spectral_norm_lanczos(jacobian) == Approx(expected).epsilon(1e-11));
    CHECK(attnscope::detail::nonsymmetric_spectral_norm(jacobian) == Approx(expected).epsilon(1e-11));
  }
}

TEST_CASE("near-one-hot rows: exact ‖J‖₂ from the closed form, where 1 − p_max rounds away", "[normalize][spectral]") {
  // z = (c, 0, …, 0) with k zeros, T = 1: p_1 = 1/(1 + k e^{−c}), ε = e^{−c}/(1 + k e^{−c}); the secular equation
  // p_1/(p_1 − λ) + kε/(ε − λ) = 0 gives λ = (k + 1) p_1 ε/(p_1 + kε) [derived]. At c = 30, 1 − p_1 ≈ 1e-13.
  for (double c : {20.0, 30.0, 36.0}) {
    for (Index k : {1, 4, 50}) {
      RowMatrix<double> z = RowMatrix<double>::Zero(1, k + 1);
      z(0, 0) = c;
      const double tail = std::exp(-c), p1 = 1 / (1 + double(k) * tail), epsilon = tail / (1 + double(k) * tail);
      const double expected = double(k + 1) * p1 * epsilon / (p1 + double(k) * epsilon);
      INFO("c = " << c << ", k = " << k);
      CHECK(attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{})(0) == Approx(expected).epsilon(1e-13));
      // T = 1/2: the same closed form at logits z/T = (2c, 0, …, 0), times 1/T [derived]
      const double tail_t = std::exp(-2 * c), p1_t = 1 / (1 + double(k) * tail_t);
      const double epsilon_t = tail_t / (1 + double(k) * tail_t);
      const double expected_t = 2 * double(k + 1) * p1_t * epsilon_t / (p1_t + double(k) * epsilon_t);
      CHECK(attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{0.5})(0) == Approx(expected_t).epsilon(1e-13));
    }
  }
}

TEST_CASE("tridiagonal eigenpair (implicit QL) equals Eigen's dense eigensolver", "[normalize][spectral]") {
  Random random(2024);
  for (int trial = 0; trial < 300; ++trial) {
    const Index n = 1 + static_cast<Index>(random.below(24));
    std::vector<double> diagonal(static_cast<std::size_t>(n)), off(static_cast<std::size_t>(n > 1 ? n - 1 : 0));
    for (double& d : diagonal) d = trial % 4 == 0 ? std::round(3 * random.normal()) : random.normal();  // ties
    for (double& e : off) e = trial % 7 == 0 && random.uniform() < 0.3 ? 0.0 : random.normal();  // split blocks
    Eigen::MatrixXd t = Eigen::MatrixXd::Zero(n, n);
    for (Index j = 0; j < n; ++j) t(j, j) = diagonal[static_cast<std::size_t>(j)];
    for (Index j = 0; j + 1 < n; ++j) t(j, j + 1) = t(j + 1, j) = off[static_cast<std::size_t>(j)];
    const attnscope::detail::SymmetricEigen<Eigen::MatrixXd> solver = attnscope::detail::symmetric_eigen(t);
    std::vector<double> vector;
    const double top = attnscope::detail::tridiagonal_largest_eigenpair(diagonal, off, n, vector);
    INFO("trial " << trial << " n = " << n);
    const double scale = t.cwiseAbs().maxCoeff();
    CHECK(std::abs(top - solver.values(n - 1)) <= 1e-14 * n * scale);
    // eigenvector: unit length and residual ‖T y − λ y‖ at rounding level (it may differ from Eigen's in sign, or
    // within the eigenspace of a repeated top eigenvalue)
    const Eigen::Map<const Eigen::VectorXd> y(vector.data(), n);
    CHECK(std::abs(y.norm() - 1) <= 1e-14 * n);
    CHECK((t * y - top * y).norm() <= 1e-13 * n * scale);
  }
}

TEST_CASE("short rows (n ≤ 24): Lanczos spans the whole space and is exact to rounding", "[normalize][spectral]") {
  Random random(4097);
  for (int trial = 0; trial < 200; ++trial) {
    const Index n = 1 + static_cast<Index>(random.below(24));
    attnscope::detail::DiagonalPlusLowRank<double> jacobian;
    for (Index i = 0; i < n; ++i) jacobian.diagonal.push_back(trial % 3 == 0 ? 0.5 : random.normal());  // repeats
    for (int t = 0; t < 3; ++t) {
      attnscope::detail::DiagonalPlusLowRank<double>::Term term;
      for (Index i = 0; i < n; ++i) {
        term.left.push_back(random.normal());
        term.right.push_back(t == 2 ? 0.0 : random.normal());  // a zero term: rank deficiency
      }
      jacobian.terms.push_back(term);
    }
    const double expected = attnscope::detail::spectral_norm_dense_svd(jacobian);
    INFO("n = " << n);
    CHECK(attnscope::detail::spectral_norm_lanczos(jacobian) == Approx(expected).epsilon(1e-13));
  }
  attnscope::detail::DiagonalPlusLowRank<double> zero;  // J = 0 (one key of SA-Softmax at z = 0): norm 0
  zero.diagonal = {0.0};
  CHECK(attnscope::detail::spectral_norm_lanczos(zero) == 0.0);
}

TEST_CASE("jacobian_spectral_norm_dense is the dense-SVD oracle of every map; errors name it",
          "[normalize][spectral]") {
  Random random(31337);
  for (const NormalizationMap& map : all_maps()) {
    const RowMatrix<double> z = random_logits<double>(random, 4, 13, 1.5);
    const attnscope::Vector<double> dense = attnscope::jacobian_spectral_norm_dense(z, map, attnscope::causal);
    const attnscope::Vector<double> fast = attnscope::jacobian_spectral_norm(z, map, attnscope::causal);
    for (Index i = 0; i < z.rows(); ++i) {
      INFO(attnscope::to_string(map) << " row " << i);
      CHECK(dense(i) == Approx(dense_spectral_norm(attnscope::jacobian(z, i, map, attnscope::causal))).epsilon(1e-14));
      CHECK(fast(i) == Approx(dense(i)).epsilon(1e-12).margin(1e-15));
    }
  }
  RowMatrix<double> bad = RowMatrix<double>::Zero(2, 3);
  bad(1, 2) = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(attnscope::jacobian_spectral_norm_dense(bad, attnscope::SoftmaxMap{}), attnscope::invalid_argument);
  CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm_dense(bad, attnscope::SoftmaxMap{}),
                    Catch::Matchers::Contains("attnscope::jacobian_spectral_norm_dense") &&
                        Catch::Matchers::Contains("row 1, column 2"));
}

TEST_CASE("Jacobian functions read views in place: row-major blocks, column-major and float input", "[normalize][jacobian]") {
  Random random(4242);
  const RowMatrix<double> big = random_logits<double>(random, 9, 20, 1.3);
  const RowMatrix<double> v = random_logits<double>(random, 5, 12, 1.0);
  const auto block = big.block(2, 3, 5, 12);  // outer stride 20: viewed without a copy
  const RowMatrix<double> copy = block;
  const Eigen::MatrixXd column_major = copy;
  const NormalizationMap sa = attnscope::SelfAdjustSoftmaxMap{SelfAdjustVariant::normalized};
  for (const NormalizationMap& map : {NormalizationMap{attnscope::SoftmaxMap{0.7}}, sa}) {
    INFO(attnscope::to_string(map));
    const attnscope::Vector<double> norms = attnscope::jacobian_spectral_norm(copy, map, attnscope::causal);
    CHECK(attnscope::jacobian_spectral_norm(block, map, attnscope::causal) == norms);
    CHECK(attnscope::jacobian_spectral_norm(column_major, map, attnscope::causal) == norms);
    const RowMatrix<double> jv = attnscope::jacobian_vector_product(copy, map, v);
    CHECK(attnscope::jacobian_vector_product(block, map, v) == jv);
    CHECK(attnscope::jacobian_vector_product(column_major, map, Eigen::MatrixXd(v)) == jv);
    const RowMatrix<double> vj = attnscope::vector_jacobian_product(copy, map, v, attnscope::causal);
    CHECK(attnscope::vector_jacobian_product(block, map, v.block(0, 0, 5, 12), attnscope::causal) == vj);
    CHECK(attnscope::jacobian(block, 3, map, attnscope::causal) == attnscope::jacobian(copy, 3, map, attnscope::causal));
  }
  CHECK(attnscope::sa_softmax(block, SelfAdjustVariant::normalized, attnscope::causal) ==
        attnscope::sa_softmax(copy, SelfAdjustVariant::normalized, attnscope::causal));
  CHECK(attnscope::normalize(block, softplus_map) == attnscope::normalize(copy, softplus_map));
  // float logits: the non-symmetric norm is computed in double from the float values (rows converted while gathered)
  const RowMatrix<float> single = copy.cast<float>();
  const attnscope::Vector<float> norms_float = attnscope::jacobian_spectral_norm(single, sa);
  const attnscope::Vector<double> norms_double = attnscope::jacobian_spectral_norm(RowMatrix<double>(single.cast<double>()), sa);
  CHECK(norms_float == norms_double.cast<float>());
}
