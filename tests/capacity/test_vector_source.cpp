// The readings of the paper's "token embeddings" (capacity::VectorSource, docs/theory/capacity.md §3): names, the
// layer-input vectors of the capacity examples (examples/capacity/layer_inputs.hpp) checked against what the model's
// attention block reads (normed rows · W_Qᵀ (+ b_Q) = the captured queries), and the invariance of separability
// under per-row rescaling (why RMSNorm's scale does not matter after the sphere projection, only its gain).
#include <cmath>
#include <vector>

#include "../../examples/capacity/layer_inputs.hpp"
#include "attnscope/capacity/head_profile.hpp"
#include "attnscope/capacity/vector_source.hpp"
#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "random_instances.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"

using namespace attnscope;
using namespace attnscope::capacity;

namespace {

/// Forward pass capturing queries and hidden states.
model::ForwardResult forward_with_layer_inputs(const model::Transformer& transformer, const std::vector<int>& tokens) {
  model::ForwardOptions options;
  options.capture.q = true;
  options.capture.hidden_states = true;
  return transformer.forward(tokens, options);
}

/// Largest |a − b| over the entries.
double largest_gap(const RowMatrix<float>& a, const RowMatrix<float>& b) {
  return (a.cast<double>() - b.cast<double>()).cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("VectorSource names round-trip; unknown names throw", "[capacity][vector_source]") {
  for (const VectorSource source : {VectorSource::value, VectorSource::layer_input, VectorSource::normed_layer_input})
    CHECK(vector_source_from_name(vector_source_name(source)) == source);
  CHECK(vector_source_name(VectorSource::layer_input) == "layer_input");
  CHECK_THROWS_AS(vector_source_from_name("hidden"), attnscope::invalid_argument);
  CHECK_THROWS_AS(vector_source_name(static_cast<VectorSource>(7)), attnscope::invalid_argument);
}

TEST_CASE("layer inputs of stories260K: the residual stream and the RMSNorm rows W_Q reads", "[capacity][vector_source]") {
  const model::LlamaModel llama = model::LlamaModel::load(attnscope::testing::data_file("stories260K.bin"));
  const model::Transformer& transformer = llama;
  const std::vector<int> tokens{1, 403, 407, 261, 378, 285, 264, 302};
  const model::ForwardResult result = forward_with_layer_inputs(transformer, tokens);
  const auto raw = examples::layer_input_vectors(transformer, result, VectorSource::layer_input);
  const auto normed = examples::layer_input_vectors(transformer, result, VectorSource::normed_layer_input);
  const auto& config = transformer.config();
  REQUIRE(raw.size() == std::size_t(config.n_layers));
  REQUIRE(normed.size() == raw.size());
  const Index head_size = config.head_size();
  for (std::size_t l = 0; l < raw.size(); ++l) {
    CHECK(largest_gap(raw[l], result.hidden_states[l]) == 0.0);
    REQUIRE(normed[l].rows() == Index(tokens.size()));
    REQUIRE(normed[l].cols() == config.dim);
    // RMSNorm by its definition, in double: w ⊙ x / √(mean(x²) + 1e-5) (llama2.c run.c rmsnorm).
    const auto& gain = transformer.weights().layers[l].attention_norm;
    for (Index i = 0; i < raw[l].rows(); ++i) {
      const Eigen::RowVectorXd x = raw[l].row(i).cast<double>();
      const double scale = 1 / std::sqrt(x.squaredNorm() / double(x.size()) + 1e-5);
      const Eigen::RowVectorXd expected = x.cwiseProduct(gain.transpose().cast<double>()) * scale;
      CHECK((normed[l].row(i).cast<double>() - expected).cwiseAbs().maxCoeff() <= 1e-5 * (1 + expected.cwiseAbs().maxCoeff()));
    }
    // Position 0 has a RoPE angle of 0, so its query is exactly normed row 0 · W_Qᵀ.
    const Eigen::RowVectorXf query0 = normed[l].row(0) * transformer.weights().layers[l].wq.to_float32().transpose();
    for (int h = 0; h < config.n_heads; ++h) {
      const auto& captured = result.layers[l].q[std::size_t(h)];
      CHECK((captured.row(0) - query0.segment(h * head_size, head_size)).cwiseAbs().maxCoeff() <= 1e-4f);
    }
  }
}

TEST_CASE("layer inputs of a GPT-2 folder: the LayerNorm rows W_Q reads at every position", "[capacity][vector_source]") {
  const model::Transformer gpt2 = model::load_model(attnscope::testing::data_file("gpt2-wp-mini"));
  const auto& config = gpt2.config();
  REQUIRE(config.norm == model::NormKind::layer_norm);
  const std::vector<int> tokens{464, 3290, 318, 257, 1310, 11, 290, 262, 3797, 13};
  const model::ForwardResult result = forward_with_layer_inputs(gpt2, tokens);
  const auto normed = examples::layer_input_vectors(gpt2, result, VectorSource::normed_layer_input);
  const Index head_size = config.head_size();
  for (std::size_t l = 0; l < normed.size(); ++l) {
    const auto& layer = gpt2.weights().layers[l];
    RowMatrix<float> queries = normed[l] * layer.wq.to_float32().transpose();
    if (layer.wq_bias.size() > 0) queries.rowwise() += layer.wq_bias.transpose();
    for (int h = 0; h < config.n_heads; ++h) {
      const RowMatrix<float> expected = queries.middleCols(h * head_size, head_size);
      CHECK(largest_gap(result.layers[l].q[std::size_t(h)], expected) <= 1e-4 * (1 + expected.cwiseAbs().maxCoeff()));
    }
    // LayerNorm output with unit gain and zero bias would have mean 0: undo the affine part and check it.
    const Eigen::ArrayXd gain = layer.attention_norm.cast<double>().array();
    const Eigen::ArrayXd bias = layer.attention_norm_bias.cast<double>().array();
    for (Index i = 0; i < normed[l].rows(); ++i) {
      const Eigen::ArrayXd standardized = (normed[l].row(i).transpose().cast<double>().array() - bias) / gain;
      CHECK(std::abs(standardized.mean()) <= 1e-4);
      CHECK(std::sqrt(standardized.square().mean()) == Approx(1).epsilon(1e-3));
    }
  }
}

TEST_CASE("layer_input_vectors rejects the per-head source and a forward pass without hidden states",
          "[capacity][vector_source]") {
  const model::LlamaModel llama = model::LlamaModel::load(attnscope::testing::data_file("stories260K.bin"));
  model::ForwardOptions options;
  options.capture.q = true;
  const model::ForwardResult without = llama.forward({1, 403}, options);
  CHECK_THROWS_AS(examples::layer_input_vectors(llama, without, VectorSource::layer_input), attnscope::invalid_argument);
  const model::ForwardResult with = forward_with_layer_inputs(llama, {1, 403});
  CHECK_THROWS_AS(examples::layer_input_vectors(llama, with, VectorSource::value), attnscope::invalid_argument);
}

TEST_CASE("separability of a head is unchanged by rescaling each embedding row (RMSNorm's scale cancels)",
          "[capacity][vector_source]") {
  attnscope::Random random(1212);
  for (int trial = 0; trial < 20; ++trial) {
    const Index length = 24 + trial, dim = 6;
    const RowMatrix<double> x = attnscope::testing::gaussian_matrix(random, length, dim);
    RowMatrix<double> scaled = x;
    for (Index i = 0; i < length; ++i) scaled.row(i) *= std::exp(2 * random.normal());
    RowMatrix<double> logits = attnscope::testing::gaussian_matrix(random, length, length) * 2.0;
    RowMatrix<double> attention = RowMatrix<double>::Zero(length, length);
    for (Index t = 0; t < length; ++t) {
      const double top = logits.row(t).head(t + 1).maxCoeff();
      for (Index j = 0; j <= t; ++j) attention(t, j) = std::exp(logits(t, j) - top);
      attention.row(t) /= attention.row(t).sum();
    }
    const std::vector<Index> counts{1, 2, 4, 8};
    const auto plain = separability_rows_for_counts(attention, x, counts, causal);
    const auto rescaled = separability_rows_for_counts(attention, scaled, counts, causal);
    for (std::size_t c = 0; c < counts.size(); ++c) {
      REQUIRE(plain[c].fraction.size() == rescaled[c].fraction.size());
      for (std::size_t r = 0; r < plain[c].fraction.size(); ++r)
        CHECK(plain[c].fraction[r] == Approx(rescaled[c].fraction[r]).margin(1e-12));
    }
  }
}
