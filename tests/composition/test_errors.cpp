// Bad input gets attnscope::invalid_argument naming the function and the offending value — one check per failure mode.
#include <limits>
#include <string>

#include <Eigen/Core>

#include "attnscope/composition.hpp"
#include "random_rows.hpp"
#include "support/catch.hpp"

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::SinkSet;
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
  expect_invalid("clr", "nan", [] { attnscope::clr(row({.5, not_a_number, .5})); });
  expect_invalid("clr", "column 1", [] { attnscope::clr(row({.5, 0.0, .5})); });
  expect_invalid("ilr", "inf", [] { attnscope::ilr(row({.5, infinity, .5})); });
  expect_invalid("ilr", "-0.25", [] { attnscope::ilr(row({.5, -.25, .75})); });
  expect_invalid("alr", "not strictly positive", [] { attnscope::alr(row({0.0, .5, .5})); });
  expect_invalid("closure", "-1", [] { attnscope::closure(row({1, -1, 2})); });
  expect_invalid("closure", "summing to 0", [] { attnscope::closure(row({0, 0, 0})); });
  expect_invalid("closure", "empty input", [] { attnscope::closure(RowMatrix<double>(0, 3)); });
  expect_invalid("clr_from_logits", "nan", [] { attnscope::clr_from_logits(row({1, not_a_number})); });
  expect_invalid("clr_inv", "inf", [] { attnscope::clr_inv(row({1, infinity})); });
  expect_invalid("ilr_inv", "nan", [] { attnscope::ilr_inv(row({1, not_a_number})); });
  expect_invalid("power", "alpha", [] { attnscope::power(row({.5, .5}), not_a_number); });
  expect_invalid("inner", "shape mismatch", [] { attnscope::inner(row({.5, .5}), row({.2, .3, .5})); });
  expect_invalid("aitchison_distance", "shape mismatch", [] { attnscope::aitchison_distance(row({.5, .5}), row({.2, .3, .5})); });
  expect_invalid("perturb", "not strictly positive", [] { attnscope::perturb(row({.5, .5}), row({0.0, 1.0})); });
  expect_invalid("ilr_basis", "1", [] { attnscope::ilr_basis(1); });
  expect_invalid("ilr_by_basis", "columns", [] { attnscope::ilr_by_basis(row({.2, .3, .5}), attnscope::ilr_basis(4)); });
  expect_invalid("sbp_basis", "0.5", [] { attnscope::sbp_basis(row({1, 0.5, -1})); });
  expect_invalid("sbp_basis", "needs at least one", [] { attnscope::sbp_basis(row({1, 1, 0})); });
  expect_invalid("alr", "reference part 3", [] { attnscope::alr(row({.2, .3, .5}), 3); });
  expect_invalid("alr_inv", "reference part -1", [] { attnscope::alr_inv(row({.2, .3}), -1); });
  expect_invalid("multiplicative_replacement", "delta", [] { attnscope::multiplicative_replacement(row({1, 0, 0, 0}), 0.4); });
  expect_invalid("multiplicative_replacement", "delta must be finite", [] { attnscope::multiplicative_replacement(row({1, 0}), not_a_number); });
}

TEST_CASE("visibility errors: fully masked rows, mask shape, masked reference or sink", "[composition][errors]") {
  attnscope::Mask mask(1, 3);
  mask << false, false, false;
  expect_invalid("clr", "every key masked", [&] { attnscope::clr(row({.2, .3, .5}), Visibility{mask}); });
  attnscope::Mask wrong(2, 3);
  wrong.setConstant(true);
  expect_invalid("ilr", "shape mismatch", [&] { attnscope::ilr(row({.2, .3, .5}), Visibility{wrong}); });
  mask << false, true, true;
  expect_invalid("alr", "masked in row 0", [&] { attnscope::alr(row({.2, .3, .5}), 0, Visibility{mask}); });
  expect_invalid("entropy_split", "sink column 0 is masked", [&] {
    attnscope::entropy_split(row({0, .5, .5}), Visibility{mask});
  });
}

TEST_CASE("channel functions reject non-distributions, sink mass 1, bad sink sets", "[composition][errors]") {
  expect_invalid("entropy_split", "sums to 1.5", [] { attnscope::entropy_split(row({.5, .5, .5})); });
  expect_invalid("entropy", "negative part", [] { attnscope::entropy(row({1.5, -.5})); });
  expect_invalid("entropy_split", "sink mass 1", [] { attnscope::entropy_split(row({1, 0, 0})); });
  expect_invalid("split_sink", "sink mass 1", [] {
    RowMatrix<double> causal_rows(2, 2);
    causal_rows << 1, 0, .5, .5;
    attnscope::split_sink(causal_rows, attnscope::causal);  // causal row 0 has only the sink
  });
  expect_invalid("js_split", "shape mismatch", [] { attnscope::js_split(row({.5, .5}), row({.2, .3, .5})); });
  expect_invalid("js_split", "out of range", [] { attnscope::js_split(row({.5, .5}), row({.2, .8}), {}, SinkSet({4})); });
  expect_invalid("cosine_conventions", "sink mass 1", [] { attnscope::cosine_conventions(row({1, 0}), row({.2, .8})); });
  expect_invalid("aitchison_split", "not strictly positive", [] { attnscope::aitchison_split(row({.5, .5, 0}), row({.2, .3, .5})); });
  expect_invalid("SinkSet", "empty", [] { SinkSet(std::vector<Index>{}); });
  expect_invalid("SinkSet", "duplicate sink column 2", [] { SinkSet({2, 2}); });
  expect_invalid("SinkSet", "negative sink column -1", [] { SinkSet({-1}); });
  expect_invalid("argmax_mass_sink", "no column is visible in every row", [] {
    attnscope::Mask disjoint(2, 2);
    disjoint << true, false, false, true;
    attnscope::argmax_mass_sink(RowMatrix<double>::Identity(2, 2), Visibility{disjoint});
  });
  expect_invalid("entropy", "tolerance", [] { attnscope::entropy(row({.5, .5}), {}, -1.0); });
  expect_invalid("entropy_attribution", "matched rows", [] {
    attnscope::entropy_attribution(row({.5, .5}), {}, RowMatrix<double>::Constant(2, 2, .5), {});
  });
}

TEST_CASE("verdict, flip-rate, clustering and MDS reject bad parameters", "[composition][errors]") {
  using attnscope::Convention;
  using attnscope::Metric;
  expect_invalid("row_metric", "cosine", [] { attnscope::row_metric(Metric::cosine, row({.5, .5}), Convention::keep); });
  expect_invalid("pair_metric", "entropy", [] {
    attnscope::pair_metric(Metric::entropy, row({.5, .5}), row({.5, .5}), Convention::keep);
  });
  expect_invalid("verdict", "tie_tolerance", [] {
    attnscope::verdict(Metric::cosine, row({.5, .5}), row({.5, .5}), row({.5, .5}), Convention::keep, {}, {}, -1.0);
  });
  const std::vector<RowMatrix<double>> two{row({.5, .5}), row({.4, .6})};
  expect_invalid("flip_rate", "at least 3 heads", [&] { attnscope::flip_rate(two, Metric::cosine); });
  expect_invalid("flip_rate_from_matrices", "square", [] {
    attnscope::flip_rate_from_matrices(RowMatrix<double>::Zero(3, 4), RowMatrix<double>::Zero(3, 4));
  });
  expect_invalid("flip_rate_from_matrices", "nan", [] {
    RowMatrix<double> m = RowMatrix<double>::Zero(3, 3);
    m(0, 1) = not_a_number;
    attnscope::flip_rate_from_matrices(m, m);
  });
  expect_invalid("entropy_flip_rate", "equally long", [] {
    attnscope::entropy_flip_rate(Eigen::VectorXd::Zero(3), Eigen::VectorXd::Zero(4));
  });
  expect_invalid("classical_mds", "square", [] { attnscope::classical_mds(RowMatrix<double>::Zero(3, 2)); });
  expect_invalid("classical_mds", "dimensions", [] { attnscope::classical_mds(RowMatrix<double>::Zero(3, 3), 4); });
  expect_invalid("classical_mds", "not a distance matrix", [] {
    RowMatrix<double> d = RowMatrix<double>::Zero(3, 3);
    d(0, 1) = 1;
    attnscope::classical_mds(d);
  });
  expect_invalid("average_linkage", "not a symmetric", [] {
    RowMatrix<double> d = RowMatrix<double>::Zero(3, 3);
    d(0, 1) = -1, d(1, 0) = -1;
    attnscope::average_linkage(d);
  });
  expect_invalid("cut_dendrogram", "clusters", [] {
    attnscope::cut_dendrogram(attnscope::average_linkage(RowMatrix<double>::Zero(3, 3)), 4);
  });
  expect_invalid("pearson_correlation", "constant", [] {
    attnscope::pearson_correlation(Eigen::VectorXd::Ones(3), Eigen::VectorXd::LinSpaced(3, 0, 1));
  });
  expect_invalid("head_distance_matrix", "at least 2 heads", [] {
    attnscope::head_distance_matrix(std::vector<RowMatrix<double>>{row({.5, .5})}, attnscope::HeadDistance::clark_js);
  });
  expect_invalid("head_distance_matrix", "shape mismatch", [] {
    attnscope::head_distance_matrix(std::vector<RowMatrix<double>>{row({.5, .5}), row({.2, .3, .5})},
                                    attnscope::HeadDistance::clark_js);
  });
  expect_invalid("head_scores", "at least 2 heads", [] { attnscope::head_scores(std::vector<RowMatrix<double>>{row({.5, .5})}); });
}

TEST_CASE("float rows work and a float-rounded row sum passes the default tolerance", "[composition][float]") {
  Eigen::Matrix<float, 1, 4, Eigen::RowMajor> a;
  a << 0.85f, 0.06f, 0.05f, 0.04f;
  a(0, 0) += 3e-7f;  // float rounding in the sum
  const auto split = attnscope::entropy_split(a);
  CHECK(split.entropy(0) == Approx(split.binary(0) + split.content_term(0)).epsilon(1e-6));
  const auto x = attnscope::ilr(a);
  CHECK((attnscope::ilr_inv(x) - attnscope::closure(a)).cwiseAbs().maxCoeff() < 1e-6f);
}
