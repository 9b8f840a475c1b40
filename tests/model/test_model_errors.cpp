// Failure modes of the model module: every bad input gives attnscope::invalid_argument naming the function
// and the value; the layer building blocks (RMSNorm, LayerNorm, RoPE in both pairings, SwiGLU, tanh-GELU) checked
// against their definitions; load_model on a llama2.c file.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "attnscope/normalize/maps.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/model_fixture.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::RowMatrix;
using attnscope::model::ForwardOptions;
using attnscope::testing::reference_model;
using attnscope::testing::error_message;
using attnscope::testing::random_logits;

}  // namespace

TEST_CASE("bad tokens are rejected with a message naming the value") {
  const auto& model = reference_model();
  using Catch::Matchers::Contains;
  CHECK_THAT(error_message([&] { model.forward({}); }), Contains("attnscope::forward") && Contains("empty"));
  CHECK_THAT(error_message([&] { model.forward({1, 512}); }), Contains("token 512 at position 1"));
  CHECK_THAT(error_message([&] { model.forward({1, -3}); }), Contains("token -3"));
  CHECK_THAT(error_message([&] { model.forward(std::vector<int>(513, 1)); }), Contains("513 exceeds seq_len 512"));
  CHECK_NOTHROW(model.forward(std::vector<int>(512, 1)));
  CHECK_THROWS_AS(model.mean_negative_log_likelihood({1}), attnscope::invalid_argument);
  CHECK_THROWS_AS(model.mean_negative_log_likelihood({1, 600}), attnscope::invalid_argument);
  CHECK_THROWS_AS(model.generate_greedy({}, 3), attnscope::invalid_argument);
  CHECK_THROWS_AS(model.generate_greedy({1, 999}, 3), attnscope::invalid_argument);
  CHECK_THAT(error_message([&] { model.generate_greedy({1}, -1); }), Contains("steps must be >= 0, got -1"));
  CHECK_THAT(error_message([&] { model.generate_greedy({1, 2}, 511); }), Contains("exceeds seq_len 512"));
  CHECK_NOTHROW(model.generate_greedy({1, 2}, 0));
  CHECK_THAT(error_message([&] { model.generate_sampled({1}, 3, -0.5, 1); }), Contains("temperature"));
  CHECK_THROWS_AS(model.generate_sampled({1}, 3, std::numeric_limits<double>::quiet_NaN(), 1),
                  attnscope::invalid_argument);
  CHECK_THROWS_AS(model.generate_sampled({1}, 3, std::numeric_limits<double>::infinity(), 1),
                  attnscope::invalid_argument);
}

TEST_CASE("bad forward options are rejected") {
  const auto& model = reference_model();
  using Catch::Matchers::Contains;
  ForwardOptions outside;
  outside.ablated_heads = {{5, 0}};
  CHECK_THAT(error_message([&] { model.forward({1, 2}, outside); }), Contains("ablated head (5, 0)"));
  outside.ablated_heads = {{0, 8}};
  CHECK_THROWS_AS(model.forward({1, 2}, outside), attnscope::invalid_argument);
  outside.ablated_heads = {{-1, 0}};
  CHECK_THROWS_AS(model.generate_greedy({1}, 2, outside), attnscope::invalid_argument);

  ForwardOptions both;
  both.map = attnscope::parse_normalization_map("softmax");
  both.normalizer = [](const RowMatrix<float>& s, const attnscope::Visibility&) { return s; };
  CHECK_THAT(error_message([&] { model.forward({1, 2}, both); }), Contains("not both"));

  ForwardOptions bad_map;
  bad_map.map = attnscope::SoftmaxMap{-1.0};
  CHECK_THAT(error_message([&] { model.forward({1, 2}, bad_map); }), Contains("temperature"));

  ForwardOptions wrong_shape;
  wrong_shape.normalizer = [](const RowMatrix<float>& s, const attnscope::Visibility&) {
    return RowMatrix<float>::Zero(s.rows(), s.cols() + 1).eval();
  };
  CHECK_THAT(error_message([&] { model.forward({1, 2}, wrong_shape); }), Contains("shape mismatch"));

  ForwardOptions not_finite;
  not_finite.normalizer = [](const RowMatrix<float>& s, const attnscope::Visibility&) {
    RowMatrix<float> weights = RowMatrix<float>::Constant(s.rows(), s.cols(), 0.5f);
    weights(s.rows() - 1, 0) = std::numeric_limits<float>::quiet_NaN();
    return weights;
  };
  CHECK_THAT(error_message([&] { model.forward({1, 2, 3}, not_finite); }), Contains("normalizer returned nan"));
}

TEST_CASE("inconsistent weights are rejected by the constructor") {
  const attnscope::io::LlamaWeights original = attnscope::io::read_llama2c(attnscope::testing::data_file("stories260K.bin"));
  auto weights = original;
  weights.layers[2].wk.resize(31, 64);
  CHECK_THAT(error_message([&] { attnscope::model::LlamaModel model(weights); }),
             Catch::Matchers::Contains("wk has shape 31x64"));
  weights = original;
  weights.config.n_kv_heads = 3;
  CHECK_THROWS_AS(attnscope::model::LlamaModel(weights), attnscope::invalid_argument);
  weights = original;
  weights.layers.pop_back();
  CHECK_THROWS_AS(attnscope::model::LlamaModel(weights), attnscope::invalid_argument);
  weights = original;
  weights.classifier.resize(0, 0);
  CHECK_THROWS_AS(attnscope::model::LlamaModel(weights), attnscope::invalid_argument);
}

TEST_CASE("rms_norm: unit root-mean-square output, weight scaling, errors") {
  const RowMatrix<float> x = random_logits<float>(7, 6, 16);
  const attnscope::Vector<float> ones = attnscope::Vector<float>::Ones(16);
  const RowMatrix<float> y = attnscope::model::rms_norm(x, ones, 1e-12f);
  for (long i = 0; i < y.rows(); ++i) CHECK(std::sqrt(y.row(i).squaredNorm() / 16.0) == Approx(1.0).epsilon(1e-5));
  const attnscope::Vector<float> w = random_logits<float>(8, 16, 1);
  const RowMatrix<float> scaled = attnscope::model::rms_norm(x, w);
  const RowMatrix<float> unit = attnscope::model::rms_norm(x, ones);
  CHECK((scaled - unit * w.asDiagonal()).cwiseAbs().maxCoeff() < 1e-6);
  // eps matters for tiny inputs: x = 1e-3 everywhere gives 1e-3/sqrt(1e-6 + 1e-5).
  const RowMatrix<float> small = RowMatrix<float>::Constant(1, 16, 1e-3f);
  CHECK(attnscope::model::rms_norm(small, ones)(0, 0) == Approx(1e-3 / std::sqrt(1.1e-5)).epsilon(1e-5));
  CHECK_THROWS_AS(attnscope::model::rms_norm(x, attnscope::Vector<float>::Ones(15)), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::rms_norm(x, ones, 0.0f), attnscope::invalid_argument);
}

TEST_CASE("apply_rope: rotations preserve norms and make dot products depend on relative position only") {
  const long head_size = 8;
  const RowMatrix<float> a = random_logits<float>(3, 1, 2 * head_size), b = random_logits<float>(4, 1, 2 * head_size);
  auto rotated = [&](const RowMatrix<float>& row, long position) {
    RowMatrix<float> copy = row;
    attnscope::model::apply_rope(copy, head_size, position);
    return copy;
  };
  for (long m : {0L, 3L, 17L, 200L}) {
    const RowMatrix<float> ra = rotated(a, m);
    for (long i = 0; i < 2 * head_size; i += 2)  // each pair keeps its length
      CHECK(std::hypot(ra(0, i), ra(0, i + 1)) == Approx(std::hypot(a(0, i), a(0, i + 1))).epsilon(1e-5));
    for (long shift : {1L, 5L, 60L}) {
      const double here = rotated(a, m).row(0).dot(rotated(b, m + 4).row(0));
      const double there = rotated(a, m + shift).row(0).dot(rotated(b, m + 4 + shift).row(0));
      CHECK(here == Approx(there).margin(1e-4));
    }
  }
  CHECK(rotated(a, 0) == a);  // position 0 is the identity
  // Pair (0, 1) of each head turns by exactly `position` radians (frequency 1); pair (2, 3) by position·10000^(-1/4).
  RowMatrix<float> unit = RowMatrix<float>::Zero(1, head_size);
  unit(0, 0) = 1.0f;
  unit(0, 2) = 1.0f;
  attnscope::model::apply_rope(unit, head_size, 2);
  CHECK(unit(0, 0) == Approx(std::cos(2.0)).epsilon(1e-6));
  CHECK(unit(0, 1) == Approx(std::sin(2.0)).epsilon(1e-6));
  CHECK(unit(0, 3) == Approx(std::sin(2.0 * std::pow(10000.0, -0.25))).epsilon(1e-6));
  RowMatrix<float> odd = RowMatrix<float>::Zero(1, 6);
  CHECK_THROWS_AS(attnscope::model::apply_rope(odd, 3, 0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::apply_rope(odd, 4, 0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::apply_rope(odd, 2, -1), attnscope::invalid_argument);
}

TEST_CASE("swiglu_gate equals silu(a)·b computed in double") {
  const RowMatrix<float> gate = random_logits<float>(9, 5, 7) * 4.0f, up = random_logits<float>(10, 5, 7);
  const RowMatrix<float> out = attnscope::model::swiglu_gate(gate, up);
  for (long i = 0; i < out.size(); ++i) {
    const double g = gate.data()[i];
    CHECK(out.data()[i] == Approx(g / (1 + std::exp(-g)) * up.data()[i]).margin(1e-6).epsilon(1e-5));
  }
  CHECK_THROWS_AS(attnscope::model::swiglu_gate(gate, random_logits<float>(1, 5, 6)), attnscope::invalid_argument);
}

TEST_CASE("layer_norm: zero mean and unit variance before the affine part, weight and bias, errors") {
  const RowMatrix<float> x = random_logits<float>(21, 5, 12) * 3.0f;
  const attnscope::Vector<float> weight = random_logits<float>(22, 12, 1), bias = random_logits<float>(23, 12, 1);
  const RowMatrix<float> y = attnscope::model::layer_norm(x, weight, bias, 1e-5f);
  for (long i = 0; i < x.rows(); ++i) {
    const Eigen::RowVectorXd row = x.row(i).cast<double>();
    const double mean = row.mean(), variance = (row.array() - mean).square().mean();
    for (long j = 0; j < x.cols(); ++j) {
      const double expected = (row(j) - mean) / std::sqrt(variance + 1e-5) * weight(j) + bias(j);
      CHECK(y(i, j) == Approx(expected).margin(1e-5));
    }
  }
  CHECK_THROWS_AS(attnscope::model::layer_norm(x, weight, attnscope::Vector<float>::Zero(11)), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::layer_norm(x, weight, bias, -1.0f), attnscope::invalid_argument);
}

TEST_CASE("gelu_tanh_in_place equals x/2·(1 + tanh(√(2/π)(x + 0.044715x³))) computed in double") {
  RowMatrix<float> values = random_logits<float>(31, 7, 9) * 5.0f;
  const RowMatrix<float> original = values;
  attnscope::model::gelu_tanh_in_place(values);
  for (long i = 0; i < values.size(); ++i) {
    const double x = original.data()[i];
    const double expected = 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (x + 0.044715 * x * x * x)));
    CHECK(values.data()[i] == Approx(expected).margin(1e-6).epsilon(1e-5));
  }
}

TEST_CASE("rotary_table and apply_rotary: both pairings rotate the documented coordinates") {
  const long head_size = 8, heads = 2;
  const RowMatrix<float> x = random_logits<float>(41, 5, heads * head_size);
  const double theta = 500000.0;
  const auto table = attnscope::model::rotary_table(3, 5, head_size, theta);
  for (const auto convention : {attnscope::model::RopeConvention::interleaved,
                                attnscope::model::RopeConvention::rotate_half}) {
    RowMatrix<float> rotated = x;
    attnscope::model::apply_rotary(rotated, head_size, table, convention);
    const bool interleaved = convention == attnscope::model::RopeConvention::interleaved;
    for (long r = 0; r < 5; ++r)
      for (long h = 0; h < heads; ++h)
        for (long i = 0; i < head_size / 2; ++i) {
          const long a = h * head_size + (interleaved ? 2 * i : i), b = a + (interleaved ? 1 : head_size / 2);
          const double angle = double(3 + r) * std::pow(theta, -2.0 * double(i) / double(head_size));
          CHECK(rotated(r, a) == Approx(x(r, a) * std::cos(angle) - x(r, b) * std::sin(angle)).margin(1e-4));
          CHECK(rotated(r, b) == Approx(x(r, a) * std::sin(angle) + x(r, b) * std::cos(angle)).margin(1e-4));
        }
  }
  // apply_rope is the interleaved pairing with θ = 10000, bit for bit.
  RowMatrix<float> by_rope = x, by_table = x;
  attnscope::model::apply_rope(by_rope, head_size, 7);
  attnscope::model::apply_rotary(by_table, head_size, attnscope::model::rotary_table(7, 5, head_size),
                                 attnscope::model::RopeConvention::interleaved);
  CHECK(by_rope == by_table);
  RowMatrix<float> wrong_rows = x.topRows(2);
  CHECK_THROWS_AS(attnscope::model::apply_rotary(wrong_rows, head_size, table,
                                                 attnscope::model::RopeConvention::rotate_half),
                  attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::rotary_table(0, 4, 6, -1.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::rotary_table(0, 4, 5, 10000.0), attnscope::invalid_argument);
}

TEST_CASE("load_model on a llama2.c file is the same computation as LlamaModel") {
  const auto transformer = attnscope::model::load_model(attnscope::testing::data_file("stories260K.bin"));
  CHECK(transformer.config().architecture == "llama2.c");
  CHECK(transformer.config().position_encoding == attnscope::model::PositionEncoding::rope_interleaved);
  CHECK(transformer.config().tied_embeddings == reference_model().config().shared_classifier);
  CHECK(reference_model().transformer_config().n_kv_heads == reference_model().config().n_kv_heads);
  const std::vector<int> tokens{1, 40, 73, 200, 5, 9};
  CHECK(transformer.forward(tokens).logits == reference_model().forward(tokens).logits);
}
