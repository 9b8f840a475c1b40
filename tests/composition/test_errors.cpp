// Bad input gets attnscope::invalid_argument naming the function and the offending value — one check per failure mode.
#include <limits>
#include <string>

#include <Eigen/Core>

#include "attnscope/composition.hpp"
#include "random_rows.hpp"
#include "support/catch.hpp"

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::composition::SinkSet;
using attnscope::Visibility;

using attnscope::testing::row;

namespace {
// Runs `call`, requires attnscope::invalid_argument whose message starts with "attnscope::<function>:" and contains `value`.
template <class Call>
void expect_invalid(const std::string& function, const std::string& value, Call&& call) {
  try {
    call();
    FAIL("no exception from " << function);
  } catch (const attnscope::invalid_argument& error) {
    const std::string message = error.what();
    INFO(message);
    CHECK(message.rfind("attnscope::" + function + ":", 0) == 0);
    CHECK(message.find(value) != std::string::npos);
  }
}
const double not_a_number = std::numeric_limits<double>::quiet_NaN();
const double infinity = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("CoDA functions reject NaN, Inf, negative, zero and empty input", "[composition][errors]") {
  expect_invalid("clr", "nan", [] { attnscope::composition::clr(row({.5, not_a_number, .5})); });
  expect_invalid("clr", "column 1", [] { attnscope::composition::clr(row({.5, 0.0, .5})); });
  expect_invalid("ilr", "inf", [] { attnscope::composition::ilr(row({.5, infinity, .5})); });
  expect_invalid("ilr", "-0.25", [] { attnscope::composition::ilr(row({.5, -.25, .75})); });
  expect_invalid("alr", "not strictly positive", [] { attnscope::composition::alr(row({0.0, .5, .5})); });
  expect_invalid("closure", "-1", [] { attnscope::composition::closure(row({1, -1, 2})); });
  expect_invalid("closure", "summing to 0", [] { attnscope::composition::closure(row({0, 0, 0})); });
  expect_invalid("closure", "empty input", [] { attnscope::composition::closure(RowMatrix<double>(0, 3)); });
  expect_invalid("clr_from_logits", "nan", [] { attnscope::composition::clr_from_logits(row({1, not_a_number})); });
  expect_invalid("clr_inv", "inf", [] { attnscope::composition::clr_inv(row({1, infinity})); });
  expect_invalid("ilr_inv", "nan", [] { attnscope::composition::ilr_inv(row({1, not_a_number})); });
  expect_invalid("power", "alpha", [] { attnscope::composition::power(row({.5, .5}), not_a_number); });
  expect_invalid("inner", "shape mismatch", [] { attnscope::composition::inner(row({.5, .5}), row({.2, .3, .5})); });
  expect_invalid("aitchison_distance", "shape mismatch", [] { attnscope::composition::aitchison_distance(row({.5, .5}), row({.2, .3, .5})); });
  expect_invalid("perturb", "not strictly positive", [] { attnscope::composition::perturb(row({.5, .5}), row({0.0, 1.0})); });
  expect_invalid("ilr_basis", "1", [] { attnscope::composition::ilr_basis(1); });
  expect_invalid("ilr_by_basis", "columns", [] { attnscope::composition::ilr_by_basis(row({.2, .3, .5}), attnscope::composition::ilr_basis(4)); });
  expect_invalid("sbp_basis", "0.5", [] { attnscope::composition::sbp_basis(row({1, 0.5, -1})); });
  expect_invalid("sbp_basis", "needs at least one", [] { attnscope::composition::sbp_basis(row({1, 1, 0})); });
  expect_invalid("alr", "reference part 3", [] { attnscope::composition::alr(row({.2, .3, .5}), 3); });
  expect_invalid("alr_inv", "reference part -1", [] { attnscope::composition::alr_inv(row({.2, .3}), -1); });
  expect_invalid("multiplicative_replacement", "delta", [] { attnscope::composition::multiplicative_replacement(row({1, 0, 0, 0}), 0.4); });
  expect_invalid("multiplicative_replacement", "delta must be finite", [] { attnscope::composition::multiplicative_replacement(row({1, 0}), not_a_number); });
}

TEST_CASE("visibility errors: fully masked rows, mask shape, masked reference or sink", "[composition][errors]") {
  attnscope::Mask mask(1, 3);
  mask << false, false, false;
  expect_invalid("clr", "every key masked", [&] { attnscope::composition::clr(row({.2, .3, .5}), Visibility{mask}); });
  attnscope::Mask wrong(2, 3);
  wrong.setConstant(true);
  expect_invalid("ilr", "shape mismatch", [&] { attnscope::composition::ilr(row({.2, .3, .5}), Visibility{wrong}); });
  mask << false, true, true;
  expect_invalid("alr", "masked in row 0", [&] { attnscope::composition::alr(row({.2, .3, .5}), 0, Visibility{mask}); });
  expect_invalid("entropy_split", "sink column 0 is masked", [&] {
    attnscope::composition::entropy_split(row({0, .5, .5}), Visibility{mask});
  });
}

TEST_CASE("channel functions reject non-distributions, sink mass 1, bad sink sets", "[composition][errors]") {
  expect_invalid("entropy_split", "sums to 1.5", [] { attnscope::composition::entropy_split(row({.5, .5, .5})); });
  expect_invalid("entropy_split", "negative part", [] { attnscope::composition::entropy_split(row({1.5, -.5})); });
  expect_invalid("entropy_split", "sink mass 1", [] { attnscope::composition::entropy_split(row({1, 0, 0})); });
  expect_invalid("split_sink", "sink mass 1", [] {
    RowMatrix<double> causal_rows(2, 2);
    causal_rows << 1, 0, .5, .5;
    attnscope::composition::split_sink(causal_rows, attnscope::causal);  // causal row 0 has only the sink
  });
  expect_invalid("js_split", "shape mismatch", [] { attnscope::composition::js_split(row({.5, .5}), row({.2, .3, .5})); });
  expect_invalid("js_split", "out of range", [] { attnscope::composition::js_split(row({.5, .5}), row({.2, .8}), {}, SinkSet({4})); });
  expect_invalid("cosine_conventions", "sink mass 1", [] { attnscope::composition::cosine_conventions(row({1, 0}), row({.2, .8})); });
  expect_invalid("aitchison_split", "not strictly positive", [] { attnscope::composition::aitchison_split(row({.5, .5, 0}), row({.2, .3, .5})); });
  expect_invalid("SinkSet", "empty", [] { SinkSet(std::vector<Index>{}); });
  expect_invalid("SinkSet", "duplicate sink column 2", [] { SinkSet({2, 2}); });
  expect_invalid("SinkSet", "negative sink column -1", [] { SinkSet({-1}); });
  expect_invalid("argmax_mass_sink", "no column is visible in every row", [] {
    attnscope::Mask disjoint(2, 2);
    disjoint << true, false, false, true;
    attnscope::composition::argmax_mass_sink(RowMatrix<double>::Identity(2, 2), Visibility{disjoint});
  });
  expect_invalid("entropy_split", "tolerance", [] { attnscope::composition::entropy_split(row({.5, .5}), {}, {}, -1.0); });
  expect_invalid("entropy_attribution", "matched rows", [] {
    attnscope::composition::entropy_attribution(row({.5, .5}), {}, RowMatrix<double>::Constant(2, 2, .5), {});
  });
}

TEST_CASE("verdict, flip-rate, clustering and MDS reject bad parameters", "[composition][errors]") {
  using attnscope::composition::Convention;
  using attnscope::composition::Metric;
  expect_invalid("row_metric", "cosine", [] { attnscope::composition::row_metric(Metric::cosine, row({.5, .5}), Convention::keep); });
  expect_invalid("pair_metric", "entropy", [] {
    attnscope::composition::pair_metric(Metric::entropy, row({.5, .5}), row({.5, .5}), Convention::keep);
  });
  expect_invalid("verdict", "tie_tolerance", [] {
    attnscope::composition::verdict(Metric::cosine, row({.5, .5}), row({.5, .5}), row({.5, .5}), Convention::keep, {}, {}, -1.0);
  });
  const std::vector<RowMatrix<double>> two{row({.5, .5}), row({.4, .6})};
  expect_invalid("flip_rate", "at least 3 heads", [&] { attnscope::composition::flip_rate(two, Metric::cosine); });
  expect_invalid("flip_rate_from_matrices", "square", [] {
    attnscope::composition::flip_rate_from_matrices(RowMatrix<double>::Zero(3, 4), RowMatrix<double>::Zero(3, 4));
  });
  expect_invalid("flip_rate_from_matrices", "nan", [] {
    RowMatrix<double> m = RowMatrix<double>::Zero(3, 3);
    m(0, 1) = not_a_number;
    attnscope::composition::flip_rate_from_matrices(m, m);
  });
  expect_invalid("entropy_flip_rate", "equally long", [] {
    attnscope::composition::entropy_flip_rate(Eigen::VectorXd::Zero(3), Eigen::VectorXd::Zero(4));
  });
  expect_invalid("classical_mds", "square", [] { attnscope::composition::classical_mds(RowMatrix<double>::Zero(3, 2)); });
  expect_invalid("classical_mds", "dimensions", [] { attnscope::composition::classical_mds(RowMatrix<double>::Zero(3, 3), 4); });
  expect_invalid("classical_mds", "not a distance matrix", [] {
    RowMatrix<double> d = RowMatrix<double>::Zero(3, 3);
    d(0, 1) = 1;
    attnscope::composition::classical_mds(d);
  });
  expect_invalid("average_linkage", "not a symmetric", [] {
    RowMatrix<double> d = RowMatrix<double>::Zero(3, 3);
    d(0, 1) = -1, d(1, 0) = -1;
    attnscope::composition::average_linkage(d);
  });
  expect_invalid("cut_dendrogram", "clusters", [] {
    attnscope::composition::cut_dendrogram(attnscope::composition::average_linkage(RowMatrix<double>::Zero(3, 3)), 4);
  });
  expect_invalid("pearson_correlation", "constant", [] {
    attnscope::composition::pearson_correlation(Eigen::VectorXd::Ones(3), Eigen::VectorXd::LinSpaced(3, 0, 1));
  });
  expect_invalid("head_distance_matrix", "at least 2 heads", [] {
    attnscope::composition::head_distance_matrix(std::vector<RowMatrix<double>>{row({.5, .5})}, attnscope::composition::HeadDistance::clark_js);
  });
  expect_invalid("head_distance_matrix", "shape mismatch", [] {
    attnscope::composition::head_distance_matrix(std::vector<RowMatrix<double>>{row({.5, .5}), row({.2, .3, .5})},
                                    attnscope::composition::HeadDistance::clark_js);
  });
  expect_invalid("head_scores", "at least 2 heads", [] { attnscope::composition::head_scores(std::vector<RowMatrix<double>>{row({.5, .5})}); });
}

TEST_CASE("float rows work and a float-rounded row sum passes the default tolerance", "[composition][float]") {
  Eigen::Matrix<float, 1, 4, Eigen::RowMajor> a;
  a << 0.85f, 0.06f, 0.05f, 0.04f;
  a(0, 0) += 3e-7f;  // float rounding in the sum
  const auto split = attnscope::composition::entropy_split(a);
  CHECK(split.entropy(0) == Approx(split.binary(0) + split.content_term(0)).epsilon(1e-6));
  const auto x = attnscope::composition::ilr(a);
  CHECK((attnscope::composition::ilr_inv(x) - attnscope::composition::closure(a)).cwiseAbs().maxCoeff() < 1e-6f);
}
