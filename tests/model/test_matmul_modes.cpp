// The two matmul modes of the forward pass (ForwardOptions::matmul, model/detail/linear.hpp) against the numpy
// reference of tests/fixtures/make_matmul_fixtures.py (written from ggml's definitions, not from attnscope's code):
// the activation rounding (q8_0, q8_K, q8_1) bit for bit; the llama.cpp mode's logits and attention on GGUF fixtures
// holding every weight type with an integer kernel (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, Q2_K … Q6_K,
// IQ4_XS) within 1e-3 (of each row's largest logit) and 1e-4 of the float64 forward pass that rounds activations as
// specified, much closer to it than the exact mode comes (the reference tells the modes apart); the exact mode
// unchanged by the option and matching the reference's exact pass; formats without an integer kernel (F16, Q8_K) the
// same in both modes; a non-finite activation named.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "attnscope/io/npz.hpp"
#include "attnscope/kernels/quantize_activations.hpp"
#include "attnscope/model/gguf.hpp"
#include "attnscope/model/load.hpp"
#include "fixtures/gguf_fixtures.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::model::MatmulMode;

const std::map<std::string, attnscope::io::Array>& matmul_reference() {
  static const auto arrays = attnscope::io::read_npz(attnscope::testing::gguf_fixture("matmul_reference.npz"));
  return arrays;
}

attnscope::model::ForwardResult matmul_forward(const attnscope::model::Transformer& model,
                                               const std::vector<int>& tokens, MatmulMode mode) {
  attnscope::model::ForwardOptions options;
  options.capture.attention = true;
  options.matmul = mode;
  return model.forward(tokens, options);
}

/// max over rows of max |a − b| / max(1, max |b| of the row).
double matmul_logits_error(const RowMatrix<float>& a, const RowMatrix<double>& b) {
  double worst = 0;
  for (Index r = 0; r < b.rows(); ++r) {
    const double scale = std::max(1.0, b.row(r).cwiseAbs().maxCoeff());
    worst = std::max(worst, (a.row(r).cast<double>() - b.row(r)).cwiseAbs().maxCoeff() / scale);
  }
  return worst;
}

}  // namespace

TEST_CASE("matmul modes: activations round to q8_0, q8_K and q8_1 as the numpy reference of ggml's rules, bit for bit",
          "[model][matmul]") {
  const auto& z = matmul_reference();
  const RowMatrix<float> x = z.at("activations").to_matrix<float>();
  for (const auto format : {attnscope::kernels::ActivationFormat::q8_0, attnscope::kernels::ActivationFormat::q8_k,
                            attnscope::kernels::ActivationFormat::q8_1}) {
    const std::string name = attnscope::kernels::activation_format_name(format);
    INFO(name);
    attnscope::kernels::QuantizedActivations q;
    attnscope::kernels::quantize_activations(x.data(), x.rows(), x.cols(), x.cols(), format, q);
    const auto quants = z.at(name + ".quants").to_vector<std::int64_t>();
    const auto scales = z.at(name + ".scales").to_vector<float>();
    REQUIRE(quants.size() == q.quants.size());
    REQUIRE(scales.size() == q.scales.size());
    int quant_mismatches = 0, scale_mismatches = 0;
    for (std::size_t i = 0; i < quants.size(); ++i) quant_mismatches += quants[i] != q.quants[i];
    for (std::size_t i = 0; i < scales.size(); ++i)
      scale_mismatches += std::memcmp(&scales[i], &q.scales[i], sizeof(float)) != 0;
    CHECK(quant_mismatches == 0);
    CHECK(scale_mismatches == 0);
    if (format == attnscope::kernels::ActivationFormat::q8_k) {
      const auto sums = z.at("q8_K.sums").to_vector<std::int64_t>();
      REQUIRE(sums.size() == q.sums.size());
      int sum_mismatches = 0;
      for (std::size_t i = 0; i < sums.size(); ++i) sum_mismatches += sums[i] != q.sums[i];
      CHECK(sum_mismatches == 0);
    }
    if (format == attnscope::kernels::ActivationFormat::q8_1) {
      const auto block_sums = z.at("q8_1.block_sums").to_vector<float>();
      REQUIRE(block_sums.size() == q.block_sums.size());
      int sum_mismatches = 0;
      for (std::size_t i = 0; i < block_sums.size(); ++i)
        sum_mismatches += std::memcmp(&block_sums[i], &q.block_sums[i], sizeof(float)) != 0;
      CHECK(sum_mismatches == 0);
    }
  }
}

TEST_CASE("matmul modes: the llama.cpp mode gives the float64 reference that rounds activations as ggml does",
          "[model][matmul][gguf]") {
  const auto& z = matmul_reference();
  for (const std::string stem :
       {"llama_q8_0", "llama_q4k", "llama_q4_1_q5_0", "llama_q2k_q3k", "llama_q5_1_q8_k", "llama_iq4_mxfp4"}) {
    INFO(stem);
    const auto model = attnscope::model::load_gguf_model(attnscope::testing::gguf_fixture(stem + ".gguf"));
    std::vector<int> tokens;
    for (std::int64_t t : z.at(stem + ".tokens").to_vector<std::int64_t>()) tokens.push_back(int(t));
    const RowMatrix<double> expected = z.at(stem + ".logits").to_matrix<double>();
    const RowMatrix<double> expected_exact = z.at(stem + ".logits_exact").to_matrix<double>();
    const attnscope::io::Array& attention = z.at(stem + ".attention");  // [layers, heads, L, L]
    const auto probabilities = attention.to_vector<double>();
    const auto llama = matmul_forward(model, tokens, MatmulMode::llama_cpp);
    const auto exact = matmul_forward(model, tokens, MatmulMode::exact);
    const double logits_error = matmul_logits_error(llama.logits, expected);
    double attention_error = 0;
    const Index layers = attention.shape()[0], heads = attention.shape()[1], length = attention.shape()[2];
    REQUIRE(Index(llama.layers.size()) == layers);
    for (Index l = 0; l < layers; ++l)
      for (Index h = 0; h < heads; ++h)
        for (Index i = 0; i < length; ++i)
          for (Index j = 0; j < length; ++j)
            attention_error = std::max(
                attention_error, std::fabs(double(llama.layers[std::size_t(l)].attention[std::size_t(h)](i, j)) -
                                           probabilities[std::size_t(((l * heads + h) * length + i) * length + j)]));
    const double exact_error = matmul_logits_error(exact.logits, expected_exact);
    const double gap = matmul_logits_error(exact.logits, expected);
    std::cerr << stem << ": llama.cpp mode vs reference: logits " << logits_error << ", attention " << attention_error
              << "; exact mode vs exact reference " << exact_error << "; exact mode vs llama.cpp reference " << gap
              << "\n";
    CHECK(logits_error < 1e-3);
    CHECK(attention_error < 1e-4);
    CHECK(exact_error < 1e-4);
    // the reference tells the modes apart: the exact mode is far from the llama.cpp reference
    CHECK(gap > 10 * logits_error);
  }
}

TEST_CASE("matmul modes: exact is the default, and formats without an integer kernel multiply exactly in both",
          "[model][matmul][gguf]") {
  const auto model = attnscope::model::load_gguf_model(attnscope::testing::gguf_fixture("llama_q4k_f16.gguf"));
  const std::vector<int> tokens = {1, 5, 9, 33, 2, 60, 7};
  attnscope::model::ForwardOptions defaults;
  defaults.capture.attention = true;
  const auto plain = model.forward(tokens, defaults);
  const auto exact = matmul_forward(model, tokens, MatmulMode::exact);
  const auto llama = matmul_forward(model, tokens, MatmulMode::llama_cpp);
  CHECK(plain.logits == exact.logits);
  CHECK(llama.logits == exact.logits);  // F16 weights: the exact product in both modes
  const auto quantized = attnscope::model::load_gguf_model(attnscope::testing::gguf_fixture("llama_q4k.gguf"));
  CHECK(quantized.forward(tokens, defaults).logits == matmul_forward(quantized, tokens, MatmulMode::exact).logits);
  CHECK(matmul_forward(quantized, tokens, MatmulMode::llama_cpp).logits !=
        matmul_forward(quantized, tokens, MatmulMode::exact).logits);
}
