// Forward maps as the executable specification (docs/theory/normalization-maps.md §1-§4, targets 1, 3, 9): golden vectors, sums and
// signs, shift invariance where it holds (and where it does not), sparsemax supports, sort vs pivot sparsemax,
// exact vs bisection entmax, SSMax = softmax with T = 1/(s log n), SSMax Fig. 1, visibility.
#include <algorithm>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "attnscope/normalize.hpp"
#include "normalize/normalize_test_helpers.hpp"
#include "support/catch.hpp"
#include "support/random_matrices.hpp"

using attnscope::Index;
using attnscope::Random;
using attnscope::RowMatrix;
using attnscope::SelfAdjustVariant;
using attnscope::testing::log_uniform;
using attnscope::testing::random_logits;

namespace {

RowMatrix<double> golden_row() {
  RowMatrix<double> x(1, 3);
  x << -2, 0, 0.5;
  return x;
}

template <class Scalar>
Scalar tolerance_for() {
  return std::is_same<Scalar, float>::value ? Scalar(2e-6) : Scalar(1e-14);
}

}  // namespace

TEST_CASE("golden vectors of the deep-spin/entmax README (theory target 1)", "[normalize][golden]") {
  const RowMatrix<double> x = golden_row();
  const RowMatrix<double> sparse = attnscope::sparsemax(x);
  CHECK(sparse(0, 0) == 0.0);
  CHECK(sparse(0, 1) == Approx(0.25).margin(1e-15));
  CHECK(sparse(0, 2) == Approx(0.75).margin(1e-15));
  const RowMatrix<double> entmax = attnscope::entmax15(x);
  CHECK(entmax(0, 0) == 0.0);
  CHECK(entmax(0, 1) == Approx(0.3260).margin(5e-5));
  CHECK(entmax(0, 2) == Approx(0.6740).margin(5e-5));
  const RowMatrix<double> bisect = attnscope::entmax_bisect(x, 1.5);
  CHECK((bisect - entmax).cwiseAbs().maxCoeff() < 1e-15);
  // Closed form for support {1, 2} of 1.5-entmax: (0 − τ)² + (0.25 − τ)² = 1 on X = z/2.
  const double tau = (0.25 - std::sqrt(2.0 - 0.0625)) / 2;
  CHECK(entmax(0, 1) == Approx(tau * tau).epsilon(1e-14));
  // entmax_bisect(α = 2) is sparsemax.
  CHECK((attnscope::entmax_bisect(x, 2.0) - sparse).cwiseAbs().maxCoeff() < 1e-15);
}

TEMPLATE_TEST_CASE("every map's rows: sums, signs and support on many random rows", "[normalize]", float, double) {
  using Scalar = TestType;
  Random random(20260101);
  const Scalar tolerance = tolerance_for<Scalar>() * 20;
  for (int trial = 0; trial < 200; ++trial) {
    const Index n = 1 + static_cast<Index>(random.below(40));
    const RowMatrix<Scalar> z = random_logits<Scalar>(random, 3, n, log_uniform(random, 0.01, 30));
    const RowMatrix<Scalar> sparse = attnscope::sparsemax(z), entmax = attnscope::entmax15(z),
                            bisect = attnscope::entmax_bisect(z, Scalar(1.3)), scalable = attnscope::ssmax(z, Scalar(0.7)),
                            sink = attnscope::softmax_with_sink(z, Scalar(0)),
                            normalized = attnscope::sa_softmax(z, SelfAdjustVariant::normalized);
    for (Index i = 0; i < z.rows(); ++i) {
      CHECK(std::abs(sparse.row(i).sum() - 1) <= tolerance);
      CHECK(std::abs(entmax.row(i).sum() - 1) <= tolerance);
      CHECK(std::abs(bisect.row(i).sum() - 1) <= tolerance);
      CHECK(std::abs(scalable.row(i).sum() - 1) <= tolerance);
      CHECK(sink.row(i).sum() <= 1 + tolerance);
      if (z.row(i).maxCoeff() < 10) CHECK(sink.row(i).sum() < 1);  // the sink's weight e^{−max}/(…) is resolvable
      CHECK(normalized.row(i).sum() <= 1 + tolerance);
      CHECK(sparse.row(i).minCoeff() >= 0);
      CHECK(entmax.row(i).minCoeff() >= 0);
      CHECK(sink.row(i).minCoeff() >= 0);
      CHECK(normalized.row(i).minCoeff() >= 0);
      Index argmax;
      z.row(i).maxCoeff(&argmax);
      CHECK(sparse(i, argmax) > 0);  // the max logit is always in the support
      CHECK(entmax(i, argmax) > 0);
      // sparsemax: p_i = [z_i − τ]₊ with one common τ on the support.
      const Scalar tau = z(i, argmax) - sparse(i, argmax);
      for (Index j = 0; j < n; ++j) {
        if (sparse(i, j) > 0) CHECK(std::abs(z(i, j) - tau - sparse(i, j)) <= tolerance * (1 + std::abs(z(i, j))));
        else CHECK(z(i, j) <= tau + tolerance * (1 + std::abs(z(i, j))));
      }
    }
  }
}

TEST_CASE("sparsemax support sizes on constructed rows", "[normalize][sparsemax]") {
  RowMatrix<double> one_hot(1, 5);
  one_hot << 3, 0, 0, 0, 0;  // gap ≥ 1: support {0}
  CHECK((attnscope::sparsemax(one_hot).array() > 0).count() == 1);
  RowMatrix<double> flat = RowMatrix<double>::Constant(1, 7, 2.5);  // all equal: uniform, support 7
  CHECK((attnscope::sparsemax(flat).array() > 0).count() == 7);
  CHECK(attnscope::sparsemax(flat)(0, 3) == Approx(1.0 / 7).epsilon(1e-15));
  RowMatrix<double> three(1, 5);
  three << 1, 0.9, 0.8, -5, -6;  // τ = (2.7 − 1)/3 = 0.5667 → support 3
  const RowMatrix<double> p = attnscope::sparsemax(three);
  CHECK((p.array() > 0).count() == 3);
  CHECK(p(0, 0) == Approx(1 - 1.7 / 3).epsilon(1e-14));
  // Support size = k(z) of the closed form, on random rows (sorted-prefix condition 1 + k z_(k) > Σ_{j≤k} z_(j)).
  Random random(7);
  for (int trial = 0; trial < 300; ++trial) {
    const Index n = 2 + static_cast<Index>(random.below(60));
    const RowMatrix<double> z = random_logits<double>(random, 1, n, log_uniform(random, 0.05, 5));
    std::vector<double> sorted(z.data(), z.data() + n);
    std::sort(sorted.rbegin(), sorted.rend());
    Index expected = 0;
    double cumulative = 0;
    for (Index k = 1; k <= n; ++k) {
      cumulative += sorted[static_cast<std::size_t>(k - 1)];
      if (1 + double(k) * sorted[static_cast<std::size_t>(k - 1)] > cumulative) expected = k;
    }
    CHECK((attnscope::sparsemax(z).array() > 0).count() == expected);
  }
}

TEMPLATE_TEST_CASE("pivot sparsemax equals the sort-based reference (theory target 3 scales)", "[normalize][sparsemax]",
                   float, double) {
  using Scalar = TestType;
  Random random(99);
  for (double scale : {1e-5, 0.5, 1e4, 3.0}) {
    for (int trial = 0; trial < 150; ++trial) {
      const Index n = 1 + static_cast<Index>(random.below(trial < 140 ? 80 : 5000));
      RowMatrix<Scalar> z = random_logits<Scalar>(random, 1, n, scale);
      if (trial % 10 == 0 && n > 3) z(0, 1) = z(0, 2) = z(0, 0);  // ties
      std::vector<Scalar> fast(static_cast<std::size_t>(n)), reference(static_cast<std::size_t>(n));
      attnscope::detail::sparsemax_row(z.data(), n, fast.data());
      attnscope::detail::sparsemax_row_sort_reference(z.data(), n, reference.data());
      Index support_fast = 0, support_reference = 0;
      Scalar max_difference = 0;
      for (std::size_t j = 0; j < fast.size(); ++j) {
        support_fast += fast[j] > 0;
        support_reference += reference[j] > 0;
        max_difference = std::max(max_difference, std::abs(fast[j] - reference[j]));
      }
      CHECK(support_fast == support_reference);
      // Same support and τ up to the summation order: a few ulps of the largest shifted logit in the support.
      CHECK(max_difference <= 64 * std::numeric_limits<Scalar>::epsilon() * std::max(Scalar(1), Scalar(scale)));
    }
  }
}

TEMPLATE_TEST_CASE("entmax15 equals entmax_bisect(1.5) (theory target 3)", "[normalize][entmax]", float, double) {
  using Scalar = TestType;
  Random random(1234);
  // deep-spin's check: Σ(p1 − p2)² < 1e-7 on float32 4×6.
  {
    const RowMatrix<Scalar> z = random_logits<Scalar>(random, 4, 6, 1.0);
    CHECK((attnscope::entmax15(z) - attnscope::entmax_bisect(z, Scalar(1.5))).squaredNorm() < 1e-7);
  }
  for (double scale : {1e-5, 0.5, 1e4, 3.0}) {
    for (int trial = 0; trial < 60; ++trial) {
      const Index n = 1 + static_cast<Index>(random.below(200));
      const RowMatrix<Scalar> z = random_logits<Scalar>(random, 2, n, scale);
      const RowMatrix<Scalar> exact = attnscope::entmax15(z), bisect = attnscope::entmax_bisect(z, Scalar(1.5));
      CHECK(((exact.array() > 0) == (bisect.array() > 0)).all());
      CHECK((exact - bisect).cwiseAbs().maxCoeff() <= 200 * std::numeric_limits<Scalar>::epsilon());
    }
  }
}

TEST_CASE("entmax_bisect interpolates: α → 1 approaches softmax, α = 2 is sparsemax", "[normalize][entmax]") {
  Random random(5);
  for (int trial = 0; trial < 50; ++trial) {
    const RowMatrix<double> z = random_logits<double>(random, 2, 1 + static_cast<Index>(random.below(30)), 2.0);
    CHECK((attnscope::entmax_bisect(z, 2.0) - attnscope::sparsemax(z)).cwiseAbs().maxCoeff() < 1e-13);
    // α = 1 + ε: p_i ∝ [1 + ε(z_i − max) − ετ']^{1/ε} → exp(z_i); first-order error O(ε).
    CHECK((attnscope::entmax_bisect(z, 1.0 + 1e-4) - attnscope::softmax(z)).cwiseAbs().maxCoeff() < 2e-3);
  }
}

TEMPLATE_TEST_CASE("SSMax is softmax with T = 1/(s log n), n = visible keys", "[normalize][ssmax]", float, double) {
  using Scalar = TestType;
  Random random(31);
  for (int trial = 0; trial < 50; ++trial) {
    const Index n = 2 + static_cast<Index>(random.below(100));
    const Scalar s = static_cast<Scalar>(random.uniform(0.1, 2));
    const RowMatrix<Scalar> z = random_logits<Scalar>(random, 1, n, 2.0);
    const RowMatrix<Scalar> expected = attnscope::softmax(z, Scalar(1) / (s * std::log(Scalar(n))));
    CHECK((attnscope::ssmax(z, s) - expected).cwiseAbs().maxCoeff() <= 20 * tolerance_for<Scalar>());
  }
  // With causal visibility row i has n = i + 1 keys.
  const RowMatrix<Scalar> z = random_logits<Scalar>(random, 6, 6, 1.0);
  const RowMatrix<Scalar> causal = attnscope::ssmax(z, Scalar(0.5), attnscope::causal);
  CHECK(causal(0, 0) == Scalar(1));  // n = 1: log n = 0, one key
  for (Index i = 1; i < 6; ++i) {
    const RowMatrix<Scalar> prefix = z.block(i, 0, 1, i + 1);
    const RowMatrix<Scalar> expected = attnscope::softmax(prefix, Scalar(1) / (Scalar(0.5) * std::log(Scalar(i + 1))));
    CHECK((causal.block(i, 0, 1, i + 1) - expected).cwiseAbs().maxCoeff() <= 20 * tolerance_for<Scalar>());
    CHECK(causal.row(i).tail(5 - i).cwiseAbs().sum() == 0);
  }
}

TEST_CASE("SSMax keeps attention on the +3 key as n grows (Nakanishi Fig. 1, theory target 9)", "[normalize][ssmax]") {
  const double softmax_max[] = {0.942826, 0.599860, 0.129346, 0.014626};
  const double ssmax_max[] = {0.940101, 0.995063, 0.999646, 0.999975};
  const Index sizes[] = {10, 100, 1000, 10000};
  for (int k = 0; k < 4; ++k) {
    RowMatrix<double> z = RowMatrix<double>::Constant(1, sizes[k], -2.0);
    z(0, sizes[k] - 1) = 3.0;
    CHECK(attnscope::softmax(z).maxCoeff() == Approx(softmax_max[k]).margin(5e-7));
    CHECK(attnscope::ssmax(z, 0.43).maxCoeff() == Approx(ssmax_max[k]).margin(5e-7));
  }
}

TEMPLATE_TEST_CASE("shift invariance holds for softmax, SSMax, sparsemax and entmax", "[normalize]", float, double) {
  using Scalar = TestType;
  Random random(77);
  const Scalar tolerance = std::is_same<Scalar, float>::value ? Scalar(2e-5) : Scalar(1e-12);
  for (int trial = 0; trial < 60; ++trial) {
    const Index n = 1 + static_cast<Index>(random.below(50));
    const RowMatrix<Scalar> z = random_logits<Scalar>(random, 2, n, 2.0);
    const RowMatrix<Scalar> shifted = (z.array() + Scalar(random.uniform(-5, 5))).matrix();
    CHECK((attnscope::softmax(z, Scalar(0.7)) - attnscope::softmax(shifted, Scalar(0.7))).cwiseAbs().maxCoeff() <= tolerance);
    CHECK((attnscope::ssmax(z, Scalar(0.4)) - attnscope::ssmax(shifted, Scalar(0.4))).cwiseAbs().maxCoeff() <= tolerance);
    CHECK((attnscope::sparsemax(z) - attnscope::sparsemax(shifted)).cwiseAbs().maxCoeff() <= tolerance);
    CHECK((attnscope::entmax15(z) - attnscope::entmax15(shifted)).cwiseAbs().maxCoeff() <= tolerance);
    CHECK((attnscope::entmax_bisect(z, Scalar(1.75)) - attnscope::entmax_bisect(shifted, Scalar(1.75)))
              .cwiseAbs().maxCoeff() <= tolerance);
  }
}

TEST_CASE("shift invariance fails for SA-Softmax, sink softmax and a non-exponential F", "[normalize]") {
  RowMatrix<double> z(1, 4);
  z << -1.0, 0.3, 1.2, 2.0;
  const RowMatrix<double> shifted = (z.array() + 1.5).matrix();
  for (auto variant : {SelfAdjustVariant::basic, SelfAdjustVariant::normalized})
    CHECK((attnscope::sa_softmax(z, variant) - attnscope::sa_softmax(shifted, variant)).cwiseAbs().maxCoeff() > 1e-2);
  CHECK((attnscope::softmax_with_sink(z) - attnscope::softmax_with_sink(shifted)).cwiseAbs().maxCoeff() > 1e-2);
  const auto softplus = attnscope::make_generalized_map([](double x) { return std::log1p(std::exp(x)); },
                                                        [](double x) { return 1 / (1 + std::exp(-x)); });
  CHECK((attnscope::normalize(z, softplus) - attnscope::normalize(shifted, softplus)).cwiseAbs().maxCoeff() > 1e-2);
  // ... while F = exp is shift-invariant and equals softmax.
  const auto exponential = attnscope::make_generalized_map([](double x) { return std::exp(x / 0.6); },
                                                           [](double x) { return std::exp(x / 0.6) / 0.6; });
  CHECK((attnscope::normalize(z, exponential) - attnscope::softmax(z, 0.6)).cwiseAbs().maxCoeff() < 1e-15);
  CHECK((attnscope::normalize(shifted, exponential) - attnscope::softmax(z, 0.6)).cwiseAbs().maxCoeff() < 1e-14);
}

TEST_CASE("SA-Softmax matches its definitions and is not a distribution", "[normalize][sa_softmax]") {
  RowMatrix<double> z(1, 4);
  z << -3.0, -0.5, 0.25, 1.0;
  const RowMatrix<double> p = attnscope::softmax(z);
  const RowMatrix<double> basic = attnscope::sa_softmax(z, SelfAdjustVariant::basic);
  const RowMatrix<double> normalized = attnscope::sa_softmax(z, SelfAdjustVariant::normalized);
  for (Index j = 0; j < 4; ++j) {
    CHECK(basic(0, j) == Approx(z(0, j) * p(0, j)).epsilon(1e-15));
    CHECK(normalized(0, j) == Approx((z(0, j) + 3.0) / 4.0 * p(0, j)).epsilon(1e-15));
  }
  CHECK(basic.minCoeff() < 0);
  CHECK(std::abs(basic.sum() - 1) > 0.1);
  CHECK(normalized.sum() < 1);
  // All logits positive: a = 0, b = z_max. All negative: a = z_min, b = 0 (the max key gets factor < 1).
  RowMatrix<double> positive(1, 3);
  positive << 0.5, 1.0, 2.0;
  CHECK(attnscope::sa_softmax(positive, SelfAdjustVariant::normalized)(0, 0) ==
        Approx(0.25 * attnscope::softmax(positive)(0, 0)).epsilon(1e-15));
}

TEST_CASE("sink softmax: off-by-one values and mass below one", "[normalize][sink]") {
  RowMatrix<double> zeros = RowMatrix<double>::Zero(1, 2);
  const RowMatrix<double> p = attnscope::softmax_with_sink(zeros);  // softmax₁(0, 0) = (1/3, 1/3) (theory target 6)
  CHECK(p(0, 0) == Approx(1.0 / 3).epsilon(1e-15));
  CHECK(p(0, 1) == Approx(1.0 / 3).epsilon(1e-15));
  RowMatrix<double> z(1, 3);
  z << 1000.0, 999.0, -1000.0;  // stable evaluation with large logits
  const RowMatrix<double> large = attnscope::softmax_with_sink(z, 1000.5);
  const double denominator = std::exp(-0.5) + std::exp(-1.5) + 1.0;
  CHECK(large(0, 0) == Approx(std::exp(-0.5) / denominator).epsilon(1e-14));
  CHECK(large.allFinite());
  // Sink at −∞ in the limit: far below gives softmax.
  CHECK((attnscope::softmax_with_sink(z, -3000.0) - attnscope::softmax(z)).cwiseAbs().maxCoeff() < 1e-15);
}

TEMPLATE_TEST_CASE("masked keys get exactly 0 and do not count", "[normalize][visibility]", float, double) {
  using Scalar = TestType;
  Random random(4242);
  for (int trial = 0; trial < 30; ++trial) {
    const Index rows = 1 + static_cast<Index>(random.below(6)), cols = 1 + static_cast<Index>(random.below(20));
    const RowMatrix<Scalar> z = random_logits<Scalar>(random, rows, cols, 1.5);
    attnscope::Mask mask(rows, cols);
    for (Index i = 0; i < rows; ++i) {
      for (Index j = 0; j < cols; ++j) mask(i, j) = random.uniform() < 0.6;
      mask(i, static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)))) = true;
    }
    const attnscope::Visibility visibility(mask);
    const std::vector<attnscope::NormalizationMap> maps = {
        attnscope::SparsemaxMap{}, attnscope::Entmax15Map{}, attnscope::EntmaxBisectMap{1.6},
        attnscope::ScalableSoftmaxMap{0.8}, attnscope::SelfAdjustSoftmaxMap{}, attnscope::SinkSoftmaxMap{-0.5},
        attnscope::SoftmaxMap{0.9}};
    for (const auto& map : maps) {
      const RowMatrix<Scalar> masked = attnscope::apply_map(map, z, visibility);
      for (Index i = 0; i < rows; ++i) {
        // The same map on the visible keys alone.
        std::vector<Scalar> visible;
        for (Index j = 0; j < cols; ++j)
          if (mask(i, j)) visible.push_back(z(i, j));
        const RowMatrix<Scalar> compact = Eigen::Map<const RowMatrix<Scalar>>(visible.data(), 1, Index(visible.size()));
        const RowMatrix<Scalar> expected = attnscope::apply_map(map, compact);
        Index k = 0;
        for (Index j = 0; j < cols; ++j) {
          if (!mask(i, j)) CHECK(masked(i, j) == Scalar(0));
          else CHECK(masked(i, j) == expected(0, k++));
        }
      }
    }
  }
}

TEST_CASE("parse_normalization_map and to_string round-trip; apply_map runs the named function", "[normalize][maps]") {
  const std::vector<std::string> texts = {"softmax",   "temperature:0.25", "ssmax:0.43",  "sparsemax",
                                          "entmax15",  "entmax:1.75",      "sa_softmax", "sa_softmax_normalized",
                                          "sink:-1.5", "sink:0",           "temperature:1e-3"};
  Random random(11);
  const RowMatrix<double> z = random_logits<double>(random, 3, 7, 1.3);
  for (const std::string& text : texts) {
    const attnscope::NormalizationMap map = attnscope::parse_normalization_map(text);
    INFO(text);
    CHECK(attnscope::to_string(attnscope::parse_normalization_map(attnscope::to_string(map))) ==
          attnscope::to_string(map));
    CHECK(attnscope::apply_map(map, z).allFinite());
  }
  CHECK(attnscope::to_string(attnscope::parse_normalization_map("temperature:0.25")) == "temperature:0.25");
  CHECK(attnscope::to_string(attnscope::parse_normalization_map("temperature:1")) == "softmax");
  CHECK(attnscope::to_string(attnscope::parse_normalization_map("sink")) == "sink:0");
  CHECK(attnscope::to_string(attnscope::SoftmaxMap{0.1}) == "temperature:0.1");
  CHECK(std::get<attnscope::EntmaxBisectMap>(attnscope::parse_normalization_map("entmax:1.75")).alpha == 1.75);
  CHECK(attnscope::apply_map(attnscope::parse_normalization_map("temperature:0.25"), z) == attnscope::softmax(z, 0.25));
  CHECK(attnscope::apply_map(attnscope::parse_normalization_map("ssmax:0.43"), z) == attnscope::ssmax(z, 0.43));
  CHECK(attnscope::apply_map(attnscope::parse_normalization_map("sparsemax"), z) == attnscope::sparsemax(z));
  CHECK(attnscope::apply_map(attnscope::parse_normalization_map("entmax15"), z) == attnscope::entmax15(z));
  CHECK(attnscope::apply_map(attnscope::parse_normalization_map("entmax:1.75"), z) == attnscope::entmax_bisect(z, 1.75));
  CHECK(attnscope::apply_map(attnscope::parse_normalization_map("sa_softmax_normalized"), z) ==
        attnscope::sa_softmax(z, SelfAdjustVariant::normalized));
  CHECK(attnscope::apply_map(attnscope::parse_normalization_map("sink:-1.5"), z) == attnscope::softmax_with_sink(z, -1.5));
}
