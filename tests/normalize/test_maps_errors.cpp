// Bad input for every map and Jacobian function: NaN/±Inf logits, empty input, fully masked rows,
// out-of-range parameters, mask/logits shape mismatch, bad map strings → attnscope::invalid_argument naming the
// function and the offending row or value.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/normalize.hpp"
#include "support/catch.hpp"

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::SelfAdjustVariant;

namespace {

using MapCall = std::function<void(const RowMatrix<double>&, const attnscope::Visibility&)>;

struct NamedCall {
  std::string function;
  MapCall call;
};

std::vector<NamedCall> every_map_call() {
  const auto exponential = attnscope::make_generalized_map([](double x) { return std::exp(x); },
                                                           [](double x) { return std::exp(x); });
  using V = attnscope::Visibility;
  return {
      {"softmax", [](const RowMatrix<double>& z, const V& v) { attnscope::softmax(z, 1.0, v); }},
      {"sparsemax", [](const RowMatrix<double>& z, const V& v) { attnscope::sparsemax(z, v); }},
      {"entmax15", [](const RowMatrix<double>& z, const V& v) { attnscope::entmax15(z, v); }},
      {"entmax_bisect", [](const RowMatrix<double>& z, const V& v) { attnscope::entmax_bisect(z, 1.5, v); }},
      {"ssmax", [](const RowMatrix<double>& z, const V& v) { attnscope::ssmax(z, 0.5, v); }},
      {"sa_softmax", [](const RowMatrix<double>& z, const V& v) { attnscope::sa_softmax(z, SelfAdjustVariant::basic, v); }},
      {"softmax_with_sink", [](const RowMatrix<double>& z, const V& v) { attnscope::softmax_with_sink(z, 0.0, v); }},
      {"normalize", [exponential](const RowMatrix<double>& z, const V& v) { attnscope::normalize(z, exponential, v); }},
      {"jacobian_vector_product",
       [](const RowMatrix<double>& z, const V& v) {
         attnscope::jacobian_vector_product(z, attnscope::SparsemaxMap{}, RowMatrix<double>::Ones(z.rows(), z.cols()), v);
       }},
      {"vector_jacobian_product",
       [exponential](const RowMatrix<double>& z, const V& v) {
         attnscope::vector_jacobian_product(z, exponential, RowMatrix<double>::Ones(z.rows(), z.cols()), v);
       }},
      {"jacobian", [](const RowMatrix<double>& z, const V& v) { attnscope::jacobian(z, 0, attnscope::Entmax15Map{}, v); }},
  };
}

}  // namespace

TEST_CASE("NaN and ±Inf logits are rejected with row and column", "[normalize][errors]") {
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()}) {
    RowMatrix<double> z = RowMatrix<double>::Zero(3, 4);
    z(1, 0) = 0.5;
    z(2, 3) = bad;
    for (const auto& named : every_map_call()) {
      INFO(named.function << " with " << bad);
      CHECK_THROWS_AS(named.call(z, {}), attnscope::invalid_argument);
      CHECK_THROWS_WITH(named.call(z, {}), Catch::Contains("attnscope::" + named.function + ":") &&
                                               Catch::Contains("row 2, column 3"));
      // A non-finite logit under the mask is never read.
      attnscope::Mask mask = attnscope::Mask::Constant(3, 4, true);
      mask(2, 3) = false;
      CHECK_NOTHROW(named.call(z, attnscope::Visibility(mask)));
    }
  }
}

TEST_CASE("empty input, shape mismatch and fully masked rows are rejected", "[normalize][errors]") {
  for (const auto& named : every_map_call()) {
    INFO(named.function);
    CHECK_THROWS_WITH(named.call(RowMatrix<double>(0, 4), {}), Catch::Contains("empty input"));
    CHECK_THROWS_WITH(named.call(RowMatrix<double>(2, 0), {}), Catch::Contains("empty input"));
    const RowMatrix<double> z = RowMatrix<double>::Constant(3, 4, 0.25);
    CHECK_THROWS_WITH(named.call(z, attnscope::Visibility(attnscope::Mask::Constant(3, 5, true))),
                      Catch::Contains("shape mismatch") && Catch::Contains("3x5"));
    attnscope::Mask mask = attnscope::Mask::Constant(3, 4, true);
    mask.row(1).setConstant(false);
    CHECK_THROWS_WITH(named.call(z, attnscope::Visibility(mask)), Catch::Contains("row 1 has every key masked"));
    // Causal with a negative offset leaves the first rows empty.
    CHECK_THROWS_WITH(named.call(z, attnscope::Causal{-1}), Catch::Contains("row 0 has every key masked"));
  }
}

TEST_CASE("out-of-range parameters are rejected and named", "[normalize][errors]") {
  const RowMatrix<double> z = RowMatrix<double>::Constant(2, 3, 0.5);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (double temperature : {0.0, -1.0, inf, nan})
    CHECK_THROWS_WITH(attnscope::softmax(z, temperature), Catch::Contains("attnscope::softmax: temperature"));
  for (double s : {0.0, -0.3, inf, nan}) CHECK_THROWS_WITH(attnscope::ssmax(z, s), Catch::Contains("attnscope::ssmax: s must"));
  for (double alpha : {1.0, 0.5, -2.0, inf, nan})
    CHECK_THROWS_WITH(attnscope::entmax_bisect(z, alpha), Catch::Contains("attnscope::entmax_bisect: alpha must"));
  for (double sink : {inf, -inf, nan})
    CHECK_THROWS_WITH(attnscope::softmax_with_sink(z, sink), Catch::Contains("attnscope::softmax_with_sink: sink_logit"));
  // The same checks through the map structs, with the caller's name.
  const RowMatrix<double> v = RowMatrix<double>::Ones(2, 3);
  CHECK_THROWS_WITH(attnscope::jacobian_vector_product(z, attnscope::SoftmaxMap{-1}, v),
                    Catch::Contains("attnscope::jacobian_vector_product: temperature"));
  CHECK_THROWS_WITH(attnscope::vector_jacobian_product(z, attnscope::EntmaxBisectMap{1.0}, v),
                    Catch::Contains("attnscope::vector_jacobian_product: alpha"));
  CHECK_THROWS_WITH(attnscope::jacobian(z, 0, attnscope::ScalableSoftmaxMap{0}, {}), Catch::Contains("s must"));
  CHECK_THROWS_WITH(attnscope::jacobian(z, 0, attnscope::SinkSoftmaxMap{nan}, {}), Catch::Contains("sink_logit"));
  CHECK_THROWS_WITH(attnscope::apply_map(attnscope::EntmaxBisectMap{0.9}, z), Catch::Contains("alpha must"));
  CHECK_THROWS_WITH(attnscope::apply_map(attnscope::SoftmaxMap{0}, z), Catch::Contains("temperature"));
  CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm(z, attnscope::ScalableSoftmaxMap{-1}),
                    Catch::Contains("attnscope::jacobian_spectral_norm: s must"));
}

TEST_CASE("map-specific undefined inputs", "[normalize][errors]") {
  // Normalized SA-Softmax is 0/0 on an all-zero row.
  RowMatrix<double> z = RowMatrix<double>::Ones(3, 4);
  z.row(2).setZero();
  CHECK_THROWS_WITH(attnscope::sa_softmax(z, SelfAdjustVariant::normalized),
                    Catch::Contains("attnscope::sa_softmax") && Catch::Contains("row 2"));
  CHECK_NOTHROW(attnscope::sa_softmax(z, SelfAdjustVariant::basic));
  CHECK_THROWS_WITH(attnscope::jacobian_vector_product(z, attnscope::SelfAdjustSoftmaxMap{SelfAdjustVariant::normalized},
                                                       z),
                    Catch::Contains("row 2"));
  CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm(z, attnscope::parse_normalization_map("sa_softmax_normalized")),
                    Catch::Contains("row 2"));
  // A user F that is not positive, not finite, or whose derivative is not finite.
  const RowMatrix<double> w = RowMatrix<double>::Constant(2, 3, -1.0);
  const auto identity = attnscope::make_generalized_map([](double x) { return x; }, [](double) { return 1.0; });
  CHECK_THROWS_WITH(attnscope::normalize(w, identity), Catch::Contains("must be finite and > 0") && Catch::Contains("row 0"));
  const auto bad_slope = attnscope::make_generalized_map([](double x) { return std::exp(x); },
                                                         [](double) { return std::numeric_limits<double>::quiet_NaN(); });
  CHECK_NOTHROW(attnscope::normalize(w, bad_slope));
  CHECK_THROWS_WITH(attnscope::jacobian(w, 1, bad_slope, {}), Catch::Contains("F'(") && Catch::Contains("not finite"));
  const auto overflowing = attnscope::make_generalized_map([](double x) { return std::exp(x); },
                                                           [](double x) { return std::exp(x); });
  CHECK_THROWS_WITH(attnscope::normalize(RowMatrix<double>::Constant(1, 2, 800.0), overflowing),
                    Catch::Contains("must be finite"));
  CHECK_THROWS_WITH(attnscope::normalize(RowMatrix<double>::Constant(1, 2, 709.5), overflowing),
                    Catch::Contains("overflows"));
}

TEST_CASE("Jacobian function arguments are checked", "[normalize][errors]") {
  const RowMatrix<double> z = RowMatrix<double>::Constant(2, 3, 0.5);
  CHECK_THROWS_WITH(attnscope::jacobian_vector_product(z, attnscope::SoftmaxMap{}, RowMatrix<double>::Ones(2, 4)),
                    Catch::Contains("shape mismatch"));
  RowMatrix<double> tangent = RowMatrix<double>::Ones(2, 3);
  tangent(1, 2) = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(attnscope::vector_jacobian_product(z, attnscope::SoftmaxMap{}, tangent),
                    Catch::Contains("row 1, column 2"));
  CHECK_THROWS_WITH(attnscope::jacobian(z, 2, attnscope::SoftmaxMap{}, {}), Catch::Contains("row 2 out of range"));
  CHECK_THROWS_WITH(attnscope::jacobian(z, attnscope::SoftmaxMap{}), Catch::Contains("expected one row"));
}

TEST_CASE("parse_normalization_map rejects bad strings", "[normalize][errors][maps]") {
  for (const char* bad : {"", "soft", "softmax:2", "temperature", "temperature:", "temperature:abc", "temperature:1x",
                          "temperature:0", "temperature:-1", "temperature:inf", "ssmax:0", "ssmax:nan", "entmax:1",
                          "entmax:0.5", "sink:inf", "entmax15:3", "SPARSEMAX"}) {
    INFO(bad);
    CHECK_THROWS_AS(attnscope::parse_normalization_map(bad), attnscope::invalid_argument);
    CHECK_THROWS_WITH(attnscope::parse_normalization_map(bad), Catch::Contains("attnscope::parse_normalization_map"));
  }
}
