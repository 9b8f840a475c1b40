// The streaming forward (Transformer::forward_row_statistics): blockwise flash-attention-style softmax gives the
// dense forward's logits; every head's stream::RowStatistics equal the statistics computed from the dense forward's
// captured scores and attention with the normalize functions (independent of stream::row_statistics); GQA
// (stories260K, llama fixture), biases (qwen2), LayerNorm + learned positions (gpt2), Mistral's sliding window,
// ablation, positions beyond the trained length (RoPE opt-in; GPT-2 refused) and every error class.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/hf_fixtures.hpp"
#include "support/model_fixture.hpp"
#include "support/model_helpers.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::model::ForwardOptions;
using attnscope::model::ForwardResult;
using attnscope::model::StreamingForwardResult;
using attnscope::model::StreamingOptions;
using attnscope::model::Transformer;
using attnscope::testing::hf_fixture_model;
using attnscope::testing::random_token_sequence;
using attnscope::testing::error_message;

// Largest |streaming − dense| logit of each row divided by that row's largest |dense logit| (the worst row).
double streaming_logits_relative_error(const RowMatrix<float>& streaming, const RowMatrix<float>& dense) {
  REQUIRE(streaming.rows() == dense.rows());
  REQUIRE(streaming.cols() == dense.cols());
  double worst = 0;
  for (Index i = 0; i < dense.rows(); ++i) {
    const double scale = std::max(1e-30, double(dense.row(i).cwiseAbs().maxCoeff()));
    worst = std::max(worst, double((streaming.row(i) - dense.row(i)).cwiseAbs().maxCoeff()) / scale);
  }
  return worst;
}

// Statistics options used throughout: sink key 0, top-1 and top-3 mass, exact ‖J‖₂.
StreamingOptions streaming_test_options(Index query_block, Index key_block) {
  StreamingOptions options;
  options.statistics.top_k = {1, 3};
  options.query_block = query_block;
  options.key_block = key_block;
  return options;
}

// Worst absolute differences between one head's streaming statistics and those computed from the dense forward's
// captured scores (−inf outside the visible band) and attention (0 outside): max logit and log-partition in double
// from the scores; entropy, ‖J‖₂ by normalize::row_entropy / softmax_jacobian_spectral_norm on the attention; sink
// mass = attention(:, 0); max weight = row max; top-k = sum of the k largest weights.
struct DenseStatisticsGap {
  double max_scaled_logit = 0, log_partition = 0, entropy = 0, sink_mass = 0, max_weight = 0, jacobian_norm = 0,
         top_k_mass = 0;
  Index visible_key_mismatches = 0;
};

DenseStatisticsGap compare_with_dense_head(const attnscope::stream::RowStatistics& statistics,
                                           const RowMatrix<float>& scores, const RowMatrix<float>& attention,
                                           Index window) {
  DenseStatisticsGap gap;
  const Index length = attention.rows();
  REQUIRE(statistics.entropy.size() == length);
  attnscope::Mask band(length, length);
  for (Index i = 0; i < length; ++i)
    for (Index j = 0; j < length; ++j) band(i, j) = j <= i && (window <= 0 || j > i - window);
  const attnscope::Visibility visibility(band);
  const auto entropy = attnscope::row_entropy(attention, visibility);
  const auto jacobian = attnscope::softmax_jacobian_spectral_norm(attention, 1.0f, visibility);
  for (Index i = 0; i < length; ++i) {
    double max_logit = -std::numeric_limits<double>::infinity(), partition = 0;
    std::vector<double> weights;
    for (Index j = 0; j < length; ++j)
      if (band(i, j)) {
        max_logit = std::max(max_logit, double(scores(i, j)));
        weights.push_back(attention(i, j));
      }
    for (Index j = 0; j < length; ++j)
      if (band(i, j)) partition += std::exp(double(scores(i, j)) - max_logit);
    std::sort(weights.rbegin(), weights.rend());
    gap.visible_key_mismatches += statistics.visible_keys(i) != Index(weights.size());
    gap.max_scaled_logit = std::max(gap.max_scaled_logit, std::abs(statistics.max_scaled_logit(i) - max_logit));
    gap.log_partition =
        std::max(gap.log_partition, std::abs(statistics.log_partition(i) - (max_logit + std::log(partition))));
    gap.entropy = std::max(gap.entropy, std::abs(statistics.entropy(i) - double(entropy(i))));
    gap.sink_mass = std::max(gap.sink_mass, std::abs(statistics.sink_mass(i) - double(attention(i, 0))));
    gap.max_weight = std::max(gap.max_weight, std::abs(statistics.max_weight(i) - weights.front()));
    gap.jacobian_norm = std::max(gap.jacobian_norm, std::abs(statistics.jacobian_norm(i) - double(jacobian(i))));
    for (std::size_t c = 0; c < statistics.top_k.size(); ++c) {
      double mass = 0;
      for (std::size_t t = 0; t < std::min<std::size_t>(weights.size(), std::size_t(statistics.top_k[c])); ++t)
        mass += weights[t];
      gap.top_k_mass = std::max(gap.top_k_mass, std::abs(statistics.top_k_mass(i, Index(c)) - mass));
    }
  }
  return gap;
}

// Runs the dense forward with capture and the streaming forward; checks logits and every head's statistics.
// Tolerances (float32 model): the two paths compute the same scores in the same float GEMM; they differ in the order
// of the softmax sums and of attention·V (blocks, rescaling by exp(m − m')), a few float ulps per head output
// (relative ≈ 1e-7·√L), which pass through the layers: 2e-5 of a row's largest |logit| is ≈ 100 ulps. Statistics:
// the dense attention is float softmax of float scores, stream::row_statistics works in float on the (slightly
// different, from layer 1 on) q and k: probabilities to 2e-5 absolute, logits and log-partitions to 2e-4 absolute
// (|logit| ≲ 30), entropy and ‖J‖₂ to 2e-4 (sums of L float terms). Observed on stories260K at L = 200 (the largest
// case): logits 6e-6, probabilities 7e-6, logits/log-partitions 4.5e-5, entropy 2.7e-5, ‖J‖₂ 4.5e-6 — the
// tolerances are 3–5× that; the fixtures (L ≤ 60, small weights) are 10× below.
void check_streaming_matches_dense(const Transformer& model, const std::vector<int>& tokens,
                                   const StreamingOptions& streaming, const ForwardOptions& base = {}) {
  ForwardOptions dense_options = base;
  dense_options.capture.scores = dense_options.capture.attention = dense_options.capture.q =
      dense_options.capture.k = true;
  const ForwardResult dense = model.forward(tokens, dense_options);
  ForwardOptions streaming_forward_options = base;
  streaming_forward_options.capture.q = streaming_forward_options.capture.k = true;
  const StreamingForwardResult result = model.forward_row_statistics(tokens, streaming_forward_options, streaming);
  CHECK_FALSE(result.beyond_trained_positions);
  CHECK(result.trained_positions == model.config().seq_len);
  CHECK(streaming_logits_relative_error(result.logits, dense.logits) <= 2e-5);
  const auto& c = model.config();
  REQUIRE(result.row_statistics.size() == std::size_t(c.n_layers));
  REQUIRE(result.layers.size() == std::size_t(c.n_layers));
  DenseStatisticsGap worst;
  double worst_q = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    REQUIRE(result.row_statistics[std::size_t(l)].size() == std::size_t(c.n_heads));
    REQUIRE(result.layers[std::size_t(l)].q.size() == std::size_t(c.n_heads));
    CHECK(result.layers[std::size_t(l)].scores.empty());
    CHECK(result.layers[std::size_t(l)].attention.empty());
    for (int h = 0; h < c.n_heads; ++h) {
      const auto& dense_layer = dense.layers[std::size_t(l)];
      worst_q = std::max(worst_q, double((result.layers[std::size_t(l)].q[std::size_t(h)] -
                                          dense_layer.q[std::size_t(h)]).cwiseAbs().maxCoeff()));
      const DenseStatisticsGap gap =
          compare_with_dense_head(result.row_statistics[std::size_t(l)][std::size_t(h)],
                                  dense_layer.scores[std::size_t(h)], dense_layer.attention[std::size_t(h)],
                                  c.window_of_layer(l));
      worst.visible_key_mismatches += gap.visible_key_mismatches;
      worst.max_scaled_logit = std::max(worst.max_scaled_logit, gap.max_scaled_logit);
      worst.log_partition = std::max(worst.log_partition, gap.log_partition);
      worst.entropy = std::max(worst.entropy, gap.entropy);
      worst.sink_mass = std::max(worst.sink_mass, gap.sink_mass);
      worst.max_weight = std::max(worst.max_weight, gap.max_weight);
      worst.jacobian_norm = std::max(worst.jacobian_norm, gap.jacobian_norm);
      worst.top_k_mass = std::max(worst.top_k_mass, gap.top_k_mass);
    }
  }
  CHECK(worst_q <= 1e-4);
  CHECK(worst.visible_key_mismatches == 0);
  CHECK(worst.max_scaled_logit <= 2e-4);
  CHECK(worst.log_partition <= 2e-4);
  CHECK(worst.entropy <= 2e-4);
  CHECK(worst.sink_mass <= 2e-5);
  CHECK(worst.max_weight <= 2e-5);
  CHECK(worst.top_k_mass <= 2e-5);
  CHECK(worst.jacobian_norm <= 2e-4);
}

}  // namespace

TEST_CASE("streaming forward on stories260K (GQA 8/4) equals the dense forward: logits and every head's statistics") {
  const Transformer& model = attnscope::testing::reference_model();
  const auto tokens = random_token_sequence(200, model.config().vocab_size, 31, {1});
  SECTION("ragged blocks") { check_streaming_matches_dense(model, tokens, streaming_test_options(16, 24)); }
  SECTION("one block of everything") { check_streaming_matches_dense(model, tokens, streaming_test_options(512, 512)); }
  SECTION("one query row and one key per block") {
    check_streaming_matches_dense(model, std::vector<int>(tokens.begin(), tokens.begin() + 40),
                                  streaming_test_options(1, 1));
  }
  SECTION("zero and mean ablation") {
    ForwardOptions ablated;
    ablated.ablated_heads = {{0, 3}, {2, 7}, {4, 0}};
    check_streaming_matches_dense(model, tokens, streaming_test_options(32, 64), ablated);
    ablated.ablation_mode = attnscope::model::AblationMode::mean;
    check_streaming_matches_dense(model, tokens, streaming_test_options(32, 64), ablated);
  }
}

TEST_CASE("streaming forward on the HF fixtures (llama GQA, qwen2 biases, gpt2 LayerNorm) equals the dense forward") {
  for (const std::string name : {"llama", "qwen2", "gpt2", "llama_rope", "smollm", "qwen3", "gemma2", "gemma3", "phi3",
                                 "gpt_neox", "olmo2"}) {
    INFO("fixture " << name);
    const Transformer& model = hf_fixture_model(name);
    const auto tokens = random_token_sequence(std::size_t(std::min(60, model.config().seq_len)), 300, 47);
    check_streaming_matches_dense(model, tokens, streaming_test_options(8, 12));
  }
}

TEST_CASE("streaming forward under Mistral's sliding window: the band, with key blocks starting inside it") {
  const std::string folder = attnscope::testing::scratch_copy_of_fixture("llama", "mistral_streaming_window");
  auto config = attnscope::testing::read_json_file(folder + "/config.json");
  config["model_type"] = "mistral";
  config["sliding_window"] = 5;
  attnscope::testing::write_json_file(folder + "/config.json", config);
  const Transformer windowed = attnscope::model::load_model(folder);
  REQUIRE(windowed.config().sliding_window == 5);
  const auto tokens = random_token_sequence(50, 300, 53);
  check_streaming_matches_dense(windowed, tokens, streaming_test_options(7, 3));
  check_streaming_matches_dense(windowed, tokens, streaming_test_options(64, 64));
  const StreamingForwardResult result = windowed.forward_row_statistics(tokens);
  for (Index i = 0; i < 50; ++i) CHECK(result.row_statistics[0][0].visible_keys(i) == std::min<Index>(i + 1, 5));
}

TEST_CASE("streaming forward beyond the trained length: RoPE with the opt-in only, and flagged; GPT-2 refused") {
  const Transformer& llama = hf_fixture_model("llama");
  const int trained = llama.config().seq_len;  // 128 (max_position_embeddings)
  REQUIRE(trained == 128);
  const auto tokens = random_token_sequence(std::size_t(trained) + 40, 300, 59);
  const std::string refused = error_message([&] { llama.forward_row_statistics(tokens); });
  CHECK(refused.find("Transformer::forward_row_statistics") != std::string::npos);
  CHECK(refused.find("168") != std::string::npos);
  CHECK(refused.find("128") != std::string::npos);
  CHECK(refused.find("allow_beyond_trained_positions") != std::string::npos);
  StreamingOptions beyond;
  beyond.allow_beyond_trained_positions = true;
  const StreamingForwardResult result = llama.forward_row_statistics(tokens, {}, beyond);
  CHECK(result.beyond_trained_positions);
  CHECK(result.trained_positions == 128);
  REQUIRE(result.logits.rows() == 168);
  CHECK(result.logits.allFinite());
  // Causality: the rows within the trained length are the dense forward of that prefix.
  const std::vector<int> prefix(tokens.begin(), tokens.begin() + trained);
  CHECK(streaming_logits_relative_error(result.logits.topRows(trained), llama.forward(prefix).logits) <= 2e-5);
  // Each later row still has its statistics over all its keys.
  for (Index i = trained; i < 168; ++i) CHECK(result.row_statistics[1][2].visible_keys(i) == i + 1);
  CHECK(result.row_statistics[1][2].entropy.allFinite());
  // Within the trained length the flag is off even with the opt-in.
  CHECK_FALSE(llama.forward_row_statistics(prefix, {}, beyond).beyond_trained_positions);
  // The dense forward keeps its limit.
  CHECK(error_message([&] { llama.forward(tokens); }).find("exceeds seq_len") != std::string::npos);

  const Transformer& gpt2 = hf_fixture_model("gpt2");
  const int positions = gpt2.config().seq_len;  // 64 (n_positions)
  const auto long_tokens = random_token_sequence(std::size_t(positions) + 1, 300, 61);
  for (const bool opt_in : {false, true}) {
    StreamingOptions options;
    options.allow_beyond_trained_positions = opt_in;
    const std::string message = error_message([&] { gpt2.forward_row_statistics(long_tokens, {}, options); });
    CHECK(message.find("65") != std::string::npos);
    CHECK(message.find("64") != std::string::npos);
    CHECK(message.find("learned position embedding") != std::string::npos);
  }
}

TEST_CASE("streaming forward rejects what it cannot stream and bad input, naming the problem") {
  const Transformer& model = attnscope::testing::reference_model();
  const std::vector<int> tokens = {1, 20, 30, 40};
  const auto message = [&](const ForwardOptions& options, const StreamingOptions& streaming) {
    return error_message([&] { model.forward_row_statistics(tokens, options, streaming); });
  };
  const auto mentions = [](const std::string& text, const std::string& part) {
    INFO(text);
    return text.find("Transformer::forward_row_statistics") != std::string::npos &&
           text.find(part) != std::string::npos;
  };
  ForwardOptions mapped;
  mapped.map = attnscope::parse_normalization_map("ssmax:0.43");
  CHECK(mentions(message(mapped, {}), "options.map"));
  ForwardOptions custom;
  custom.normalizer = [](const RowMatrix<float>& scores, const attnscope::Visibility&) { return scores; };
  CHECK(mentions(message(custom, {}), "options.normalizer"));
  ForwardOptions scores;
  scores.capture.scores = true;
  CHECK(mentions(message(scores, {}), "capture.scores"));
  ForwardOptions attention;
  attention.capture.attention = true;
  CHECK(mentions(message(attention, {}), "capture.attention"));
  StreamingOptions full;
  full.statistics.visibility = attnscope::Visibility();
  CHECK(mentions(message({}, full), "visibility"));
  StreamingOptions windowed;
  windowed.statistics.visibility = attnscope::SlidingWindow{3};
  CHECK(mentions(message({}, windowed), "visibility"));
  StreamingOptions scaled;
  scaled.statistics.scale = 0.5;
  CHECK(mentions(message({}, scaled), "scale"));
  StreamingOptions masked;
  masked.statistics.visibility =
      attnscope::Visibility(attnscope::causal).with_key_mask(attnscope::stream::KeyMask::Constant(4, true));
  CHECK(mentions(message({}, masked), "visibility"));
  StreamingOptions no_queries;
  no_queries.query_block = 0;
  CHECK(mentions(message({}, no_queries), "query_block = 0"));
  StreamingOptions no_keys;
  no_keys.key_block = -1;
  CHECK(mentions(message({}, no_keys), "key_block = -1"));
  ForwardOptions outside;
  outside.ablated_heads = {{5, 0}};
  CHECK(mentions(message(outside, {}), "ablated head (5, 0)"));
  CHECK(mentions(error_message([&] { model.forward_row_statistics({}); }), "empty token sequence"));
  CHECK(mentions(error_message([&] { model.forward_row_statistics({1, 512}); }), "token 512 at position 1"));
  // Errors of the statistics pass through with their own names.
  StreamingOptions bad_sink;
  bad_sink.statistics.sink_keys = {7};
  CHECK(message({}, bad_sink).find("sink key 7") != std::string::npos);
}
