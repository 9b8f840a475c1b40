// Golden values: scikit-bio skbio.stats.composition doctest/docstring vectors and the verified test vectors of
// docs/theory/composition.md §2–§7 (independent sources: scikit-bio, and the double-precision checks of docs/theory/composition.md).
#include <Eigen/Core>

#include "attnscope/composition.hpp"
#include "random_rows.hpp"
#include "support/catch.hpp"

using attnscope::RowMatrix;
using attnscope::testing::row;

namespace {
RowMatrix<double> rows_of(std::initializer_list<std::initializer_list<double>> values) {
  RowMatrix<double> m(static_cast<Eigen::Index>(values.size()), static_cast<Eigen::Index>(values.begin()->size()));
  Eigen::Index i = 0;
  for (const auto& row : values) {
    Eigen::Index j = 0;
    for (double v : row) m(i, j++) = v;
    ++i;
  }
  return m;
}
template <class Derived>
void check_values(const Eigen::MatrixBase<Derived>& actual, std::initializer_list<double> expected, double margin) {
  REQUIRE(actual.size() == static_cast<Eigen::Index>(expected.size()));
  Eigen::Index k = 0;
  for (double v : expected) {
    CHECK(actual.reshaped()(k) == Approx(v).margin(margin));
    ++k;
  }
}
const RowMatrix<double> spec_a = row({0.85, 0.06, 0.05, 0.03, 0.01});   // §2 test vector a
const RowMatrix<double> spec_a2 = row({0.60, 0.10, 0.12, 0.08, 0.10});  // §2 test vector a′
}  // namespace

TEST_CASE("clr, ilr, alr and inner match the scikit-bio doctest vectors", "[composition][golden]") {
  const auto x = row({.1, .3, .4, .2});
  check_values(attnscope::composition::clr(x), {-0.79451346, 0.30409883, 0.5917809, -0.10136628}, 1e-8);
  check_values(attnscope::composition::ilr(x), {-0.7768362, -0.68339802, 0.11704769}, 1e-8);
  check_values(attnscope::composition::alr(x), {1.09861229, 1.38629436, 0.69314718}, 1e-8);
  CHECK(attnscope::composition::inner(x, row({.2, .4, .2, .2}))(0) == Approx(0.2107852474).margin(1e-10));
}

TEST_CASE("closure, perturb, power, clr_inv, ilr_inv, sbp_basis match the scikit-bio docstrings", "[composition][golden]") {
  check_values(attnscope::composition::closure(row({2, 2, 6})), {.2, .2, .6}, 1e-15);
  check_values(attnscope::composition::perturb(row({1. / 3, 1. / 3, 1. / 3}), row({.5, .5, 1})), {.25, .25, .5}, 1e-15);
  const auto x = row({.1, .3, .4, .2});
  check_values(attnscope::composition::power(x, 0.1), {0.23059566, 0.25737316, 0.26488486, 0.24714631}, 1e-8);
  check_values(attnscope::composition::clr_inv(x), {0.21383822, 0.26118259, 0.28865141, 0.23632778}, 1e-8);
  check_values(attnscope::composition::ilr_inv(row({.1, .3, .6})), {0.34180297, 0.29672718, 0.22054469, 0.14092516}, 1e-8);
  Eigen::Matrix<double, 1, 5> sbp;
  sbp << 1, 1, -1, -1, -1;
  check_values(attnscope::composition::sbp_basis(sbp), {0.54772256, 0.54772256, -0.36514837, -0.36514837, -0.36514837}, 1e-8);
}

TEST_CASE("multiplicative_replacement matches skbio multi_replace with the default delta 1/D^2", "[composition][golden]") {
  const auto replaced = attnscope::composition::multiplicative_replacement(rows_of({{.2, .4, .4, 0}, {0, .5, .5, 0}}));
  check_values(replaced.row(0), {0.1875, 0.375, 0.375, 0.0625}, 1e-15);
  check_values(replaced.row(1), {0.0625, 0.4375, 0.4375, 0.0625}, 1e-15);
  // an explicit delta, and ratios among the non-zero parts are preserved
  const auto explicit_delta = attnscope::composition::multiplicative_replacement(row({.2, .4, .4, 0}), 0.01);
  check_values(explicit_delta, {0.198, 0.396, 0.396, 0.01}, 1e-15);
}

TEST_CASE("R compositions' ilrBase is minus the scikit-bio basis", "[composition][golden]") {
  const auto x = row({.1, .3, .4, .2});
  const auto skbio = attnscope::composition::ilr(x);
  const auto r = attnscope::composition::ilr(x, {}, attnscope::composition::IlrSign::r_compositions);
  CHECK((skbio + r).cwiseAbs().maxCoeff() < 1e-15);
  // R gsi.ilrBase(4), column j = (−1, …, −1 [j], j, 0, …)/√(j(j+1)), as basis rows
  RowMatrix<double> r_basis(3, 4);
  r_basis << -1 / std::sqrt(2.), 1 / std::sqrt(2.), 0, 0,  //
      -1 / std::sqrt(6.), -1 / std::sqrt(6.), 2 / std::sqrt(6.), 0,  //
      -1 / std::sqrt(12.), -1 / std::sqrt(12.), -1 / std::sqrt(12.), 3 / std::sqrt(12.);
  CHECK((attnscope::composition::ilr_basis(4, attnscope::composition::IlrSign::r_compositions) - r_basis).cwiseAbs().maxCoeff() < 1e-15);
  CHECK((attnscope::composition::ilr_inv(r, {}, attnscope::composition::IlrSign::r_compositions) - x).cwiseAbs().maxCoeff() < 1e-15);
}

TEST_CASE("entropy split reproduces the test vectors of docs/theory/composition.md", "[composition][golden]") {
  const auto split = attnscope::composition::entropy_split(spec_a);
  CHECK(split.entropy(0) == Approx(0.6079808).margin(5e-8));
  CHECK(split.sink_mass(0) == Approx(0.85).margin(1e-15));
  const auto content = attnscope::composition::split_sink(spec_a).content;
  check_values(content.row(0), {0, 0.4, 1. / 3, 0.2, 1. / 15}, 1e-15);
  CHECK(split.binary(0) + split.content_term(0) == Approx(split.entropy(0)).margin(1e-15));
  CHECK(attnscope::composition::entropy_split(spec_a2).entropy(0) == Approx(1.2235023).margin(5e-8));
}

TEST_CASE("Aitchison split reproduces the test vectors of docs/theory/composition.md", "[composition][golden]") {
  const auto split = attnscope::composition::aitchison_split(spec_a, spec_a2);
  CHECK(split.distance_squared(0) == Approx(3.677727).margin(5e-7));
  CHECK(split.sink_term(0) == Approx(1.837959).margin(5e-7));
  CHECK(split.content_term(0) == Approx(1.839768).margin(5e-7));
  CHECK(split.within_sink_term(0) == 0.0);
  // b_S = √((n−1)/n)·ln(s/g(content)) (robCompositions pivotCoord(x)[,1])
  const double g = std::pow(0.06 * 0.05 * 0.03 * 0.01, 0.25);
  CHECK(attnscope::composition::sink_balance(spec_a)(0) == Approx(std::sqrt(0.8) * std::log(0.85 / g)).margin(1e-14));
}

TEST_CASE("Jensen-Shannon chain rule and cosine conventions reproduce the test vectors of docs/theory/composition.md", "[composition][golden]") {
  const auto js = attnscope::composition::js_split(spec_a, spec_a2);
  CHECK(js.divergence(0) == Approx(0.0480451).margin(5e-8));
  CHECK(js.sink_term(0) + js.content_term(0) == Approx(0.0480451).margin(5e-8));
  CHECK(js.content_divergence(0) == Approx(0.0374327).margin(5e-8));
  const auto cos = attnscope::composition::cosine_conventions(spec_a, spec_a2);
  CHECK(cos.keep(0) == Approx(0.97159).margin(5e-6));
  CHECK(cos.drop(0) == Approx(0.90482).margin(5e-6));
}

TEST_CASE("entropy-collapse attribution reproduces the a' -> a example of docs/theory/composition.md", "[composition][golden]") {
  const auto result = attnscope::composition::entropy_attribution(spec_a2, {}, spec_a, {});
  CHECK(result.delta_entropy == Approx(-0.61552).margin(5e-6));
  CHECK(result.sink_part == Approx(-0.57672).margin(5e-6));
  CHECK(result.content_part == Approx(-0.03880).margin(5e-6));
  CHECK(result.sink_share == Approx(0.937).margin(5e-4));
  CHECK(std::abs(result.residual) < 1e-15);
}

TEST_CASE("the toy A/B/C verdicts flip between keep and drop for cosine, JS and Aitchison", "[composition][golden]") {
  const auto a = row({.90, .05, .03, .02}), b = row({.88, .02, .03, .07}), c = row({.50, .25, .15, .10});
  using attnscope::composition::Convention;
  using attnscope::composition::Metric;
  // table of §7: values for (A,B) and (A,C)
  CHECK(attnscope::composition::pair_metric(Metric::cosine, a, b, Convention::keep)(0) == Approx(0.9978).margin(5e-5));
  CHECK(attnscope::composition::pair_metric(Metric::cosine, a, c, Convention::keep)(0) == Approx(0.8851).margin(5e-5));
  CHECK(attnscope::composition::pair_metric(Metric::cosine, a, c, Convention::drop)(0) == Approx(1.0).margin(1e-15));
  CHECK(attnscope::composition::pair_metric(Metric::cosine, a, b, Convention::drop)(0) == Approx(0.6799).margin(5e-5));
  CHECK(attnscope::composition::pair_metric(Metric::jensen_shannon, a, b, Convention::keep)(0) == Approx(0.01073).margin(5e-6));
  CHECK(attnscope::composition::pair_metric(Metric::jensen_shannon, a, c, Convention::keep)(0) == Approx(0.10175).margin(5e-6));
  CHECK(attnscope::composition::pair_metric(Metric::jensen_shannon, a, c, Convention::drop)(0) == Approx(0.0).margin(1e-15));
  CHECK(attnscope::composition::pair_metric(Metric::jensen_shannon, a, b, Convention::drop)(0) == Approx(0.09372).margin(5e-6));
  CHECK(attnscope::composition::pair_metric(Metric::aitchison, a, b, Convention::keep)(0) == Approx(1.544).margin(5e-4));
  CHECK(attnscope::composition::pair_metric(Metric::aitchison, a, c, Convention::keep)(0) == Approx(1.903).margin(5e-4));
  CHECK(attnscope::composition::pair_metric(Metric::aitchison, a, c, Convention::drop)(0) == Approx(0.0).margin(1e-14));
  CHECK(attnscope::composition::pair_metric(Metric::aitchison, a, b, Convention::drop)(0) == Approx(1.540).margin(5e-4));
  for (Metric metric : {Metric::cosine, Metric::jensen_shannon, Metric::aitchison}) {
    CHECK(attnscope::composition::verdict(metric, a, b, c, Convention::keep) == 1);   // keep: B closer to A
    CHECK(attnscope::composition::verdict(metric, a, b, c, Convention::drop) == -1);  // drop: C closer to A
  }
  // d_A(A, C) is a pure sink term
  const auto split = attnscope::composition::aitchison_split(a, c);
  CHECK(split.content_term(0) == Approx(0).margin(1e-28));
  CHECK(split.sink_term(0) == Approx(split.distance_squared(0)).epsilon(1e-14));
}
