// Transformer::generate_with_statistics: decoding with the key/value cache and the exact row statistics of every
// step's query row. The spec: the statistics of step s equal those the streaming forward (forward_row_statistics)
// computes for row P − 1 + s of the prompt plus the generated tokens, on every family fixture (llama2.c stories260K,
// gpt2-wp-mini, every Hugging Face fixture including the MoE and gpt-oss ones with learned sinks and sliding
// windows, two GGUF files); the tokens equal generate_greedy's and generate_sampled's; the most attended key carries
// the row's largest weight; the key-0 attention equals the streaming forward's sink mass of key 0; stop tokens and
// every error.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "fixtures/gguf_fixtures.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "support/errors.hpp"
#include "support/hf_fixtures.hpp"
#include "support/model_helpers.hpp"

namespace {

using attnscope::Index;
using attnscope::Vector;
using attnscope::model::ForwardOptions;
using attnscope::model::GenerationOptions;
using attnscope::model::GenerationResult;
using attnscope::model::StreamingOptions;
using attnscope::model::Transformer;
using attnscope::stream::RowStatistics;
using attnscope::testing::error_message;

// The tolerance of step statistics against the streaming forward's rows, relative to max(1, |value|). The one-row
// pass and the whole-sequence pass compute the same quantities from float activations; with the packed GEMM of
// kernels/gemm.hpp (AVX2 + FMA), which sums every element in an order fixed by the depth whatever the rows, and the
// attention kernel's rows being independent, they are bitwise equal (observed on every fixture below: gap 0).
// Eigen's GEMM (no AVX2) sums a row alone in another order than a row of a block: float rounding amplified by the
// layers, 2e-4 (logits |z| ≲ 30, entropies ≲ log L).
#if defined(__AVX2__) && defined(__FMA__)
constexpr double step_statistics_tolerance = 0;
#else
constexpr double step_statistics_tolerance = 2e-4;
#endif

// Largest |a − b| / max(1, |b|) over the entries of two columns (0 when both are empty; a size mismatch fails).
template <class A, class B>
double relative_gap(const A& a, const B& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (Index i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a(i)) - double(b(i))) / std::max(1.0, std::abs(double(b(i)))));
  return worst;
}

// Row `row` of every column of `full` as a one-row RowStatistics.
RowStatistics statistics_row(const RowStatistics& full, Index row) {
  RowStatistics one;
  const auto take = [row](const auto& column, auto& target) {
    if (column.rows() > 0) target = column.middleRows(row, 1);
  };
  take(full.max_scaled_logit, one.max_scaled_logit);
  take(full.log_partition, one.log_partition);
  take(full.entropy, one.entropy);
  take(full.sink_mass, one.sink_mass);
  take(full.max_weight, one.max_weight);
  take(full.jacobian_norm, one.jacobian_norm);
  take(full.top_k_mass, one.top_k_mass);
  take(full.visible_keys, one.visible_keys);
  take(full.learned_sink, one.learned_sink);
  take(full.entropy_with_sink, one.entropy_with_sink);
  return one;
}

// The worst relative gap between step `step` of `steps` and row `row` of `full`, over every column.
double step_gap(const RowStatistics& steps, Index step, const RowStatistics& full, Index row) {
  const RowStatistics a = statistics_row(steps, step), b = statistics_row(full, row);
  double worst = 0;
  worst = std::max(worst, relative_gap(a.max_scaled_logit, b.max_scaled_logit));
  worst = std::max(worst, relative_gap(a.log_partition, b.log_partition));
  worst = std::max(worst, relative_gap(a.entropy, b.entropy));
  worst = std::max(worst, relative_gap(a.sink_mass, b.sink_mass));
  worst = std::max(worst, relative_gap(a.max_weight, b.max_weight));
  worst = std::max(worst, relative_gap(a.jacobian_norm, b.jacobian_norm));
  REQUIRE(a.top_k_mass.cols() == b.top_k_mass.cols());
  for (Index c = 0; c < a.top_k_mass.cols(); ++c)
    worst = std::max(worst, relative_gap(a.top_k_mass.col(c), b.top_k_mass.col(c)));
  REQUIRE(a.visible_keys.size() == b.visible_keys.size());
  if (a.visible_keys.size() > 0) CHECK(a.visible_keys(0) == b.visible_keys(0));
  worst = std::max(worst, relative_gap(a.learned_sink, b.learned_sink));
  worst = std::max(worst, relative_gap(a.entropy_with_sink, b.entropy_with_sink));
  return worst;
}

// The statistics options of the checks: sink keys 0 and 2, top-1 and top-3 masses, the exact ‖J‖₂.
StreamingOptions generation_test_options() {
  StreamingOptions streaming;
  streaming.statistics.sink_keys = {0, 2};
  streaming.statistics.top_k = {1, 3};
  return streaming;
}

// Generates `steps` tokens after a random prompt of `prompt_length` and checks the spec against the streaming forward
// of the returned tokens; returns the worst relative gap. The key-0 attention of the first 16 rows is checked.
double check_generation_against_streaming(const Transformer& transformer, Index prompt_length, int steps,
                                          std::uint64_t seed, GenerationOptions generation = {}) {
  const auto& config = transformer.config();
  const std::vector<int> prompt =
      attnscope::testing::random_token_sequence(std::size_t(prompt_length), config.vocab_size, seed);
  StreamingOptions streaming = generation_test_options();
  generation.first_key_queries = 16;
  const GenerationResult result = transformer.generate_with_statistics(prompt, steps, generation, streaming);
  if (generation.temperature == 0) REQUIRE(result.tokens == transformer.generate_greedy(prompt, steps));
  else REQUIRE(result.tokens == transformer.generate_sampled(prompt, steps, generation.temperature, generation.seed));
  REQUIRE(result.prompt_length == prompt_length);
  REQUIRE(result.steps == steps);
  // the streaming forward of the whole sequence with key 0 alone as the sink for the key-0 attention
  const auto full = transformer.forward_row_statistics(result.tokens, {}, streaming);
  StreamingOptions first_key = streaming;
  first_key.statistics.sink_keys = {0};
  first_key.statistics.jacobian_norm = false;
  const auto key0 = transformer.forward_row_statistics(result.tokens, {}, first_key);
  ForwardOptions dense;
  dense.capture.attention = true;
  const auto attention = transformer.forward(result.tokens, dense);
  double worst = 0;
  for (int l = 0; l < config.n_layers; ++l)
    for (int h = 0; h < config.n_heads; ++h) {
      const RowStatistics& steps_of_head = result.step_statistics[std::size_t(l)][std::size_t(h)];
      const RowStatistics& rows = full.row_statistics[std::size_t(l)][std::size_t(h)];
      REQUIRE(steps_of_head.entropy.size() == steps);
      REQUIRE(steps_of_head.learned_sink.size() == (config.learned_sinks ? steps : 0));
      for (Index s = 0; s < steps; ++s) {
        const Index row = prompt_length - 1 + s;
        worst = std::max(worst, step_gap(steps_of_head, s, rows, row));
        // the most attended key holds the row's largest weight (to the float rounding of the two passes)
        const auto weights = attention.layers[std::size_t(l)].attention[std::size_t(h)].row(row);
        const Index key = result.most_attended_key[std::size_t(l)][std::size_t(h)](s);
        REQUIRE(key <= row);
        CHECK(double(weights(key)) >= double(weights.maxCoeff()) - 1e-5);
      }
      const Vector<double>& first = result.first_key_attention[std::size_t(l)][std::size_t(h)];
      const Index first_rows = std::min<Index>(16, prompt_length + steps - 1);
      REQUIRE(first.size() == first_rows);
      worst = std::max(worst, relative_gap(first, key0.row_statistics[std::size_t(l)][std::size_t(h)]
                                                      .sink_mass.head(first_rows)));
    }
  return worst;
}

}  // namespace

TEST_CASE("generate_with_statistics: each step's statistics are the streaming forward's row, on every family") {
  struct Family {
    std::string name;
    const Transformer* model;
  };
  static const Transformer stories = attnscope::model::load_model(attnscope::testing::data_file("stories260K.bin"));
  static const Transformer gguf_llama =
      attnscope::model::load_model(attnscope::testing::gguf_fixture("llama_q8_0.gguf"));
  static const Transformer gguf_gpt_oss =
      attnscope::model::load_model(attnscope::testing::gguf_fixture("gpt_oss_mxfp4.gguf"));
  std::vector<Family> families = {{"stories260K", &stories},
                                  {"gpt2-wp-mini", &attnscope::testing::war_and_peace_model()},
                                  {"gguf llama_q8_0", &gguf_llama},
                                  {"gguf gpt_oss_mxfp4", &gguf_gpt_oss}};
  for (const char* name : {"gemma2", "gemma3", "gpt2", "gpt_neox", "gpt_oss", "gpt_oss_mxfp4", "llama", "llama_rope",
                           "mixtral", "olmo2", "olmoe", "phi3", "qwen2", "qwen3", "qwen3_moe", "smollm"})
    families.push_back({name, &attnscope::testing::hf_fixture_model(name)});
  std::uint64_t seed = 11;
  for (const Family& family : families) {
    INFO(family.name);
    // 17 prompt tokens and 24 steps: past every fixture's sliding window (at most 20), and phi3's longrope, whose
    // factors depend on the length of each run (HF: longrope_frequency_update), in its long regime from the prompt on
    // (original_max_position_embeddings = 16)
    const double gap = check_generation_against_streaming(*family.model, 17, 24, seed++);
    INFO("worst relative gap " << gap);
    CHECK(gap <= step_statistics_tolerance);
  }
}

TEST_CASE("generate_with_statistics: sampling draws the tokens of generate_sampled, with the same statistics") {
  for (const char* name : {"gpt2", "gpt_oss", "gemma2"}) {
    INFO(name);
    GenerationOptions generation;
    generation.temperature = 0.9;
    generation.seed = 5;
    CHECK(check_generation_against_streaming(attnscope::testing::hf_fixture_model(name), 6, 30, 3, generation) <=
          step_statistics_tolerance);
  }
}

TEST_CASE("generate_with_statistics: stop tokens, zero steps, a selection of heads, no key-0 rows") {
  const Transformer& transformer = attnscope::testing::hf_fixture_model("llama");
  const std::vector<int> prompt = attnscope::testing::random_token_sequence(8, transformer.config().vocab_size, 9);
  GenerationOptions generation;
  const GenerationResult all = transformer.generate_with_statistics(prompt, 20, generation);
  REQUIRE(all.steps == 20);
  // stop at the first occurrence of the token generated at step 6
  const int stop = all.tokens[8 + 6];
  const Index first = Index(std::find(all.tokens.begin() + 8, all.tokens.end(), stop) - (all.tokens.begin() + 8));
  generation.stop_tokens = {stop};
  const GenerationResult stopped = transformer.generate_with_statistics(prompt, 20, generation);
  CHECK(stopped.steps == first + 1);
  CHECK(std::vector<int>(all.tokens.begin(), all.tokens.begin() + 8 + first + 1) == stopped.tokens);
  const auto& head_all = all.step_statistics[1][2];
  const auto& head_stopped = stopped.step_statistics[1][2];
  CHECK(head_stopped.entropy == head_all.entropy.head(first + 1));
  CHECK(head_stopped.top_k_mass == head_all.top_k_mass.topRows(first + 1));
  CHECK(stopped.most_attended_key[1][2] == all.most_attended_key[1][2].head(first + 1));
  // zero steps: the prompt, empty statistics
  const GenerationResult none = transformer.generate_with_statistics(prompt, 0);
  CHECK(none.tokens == prompt);
  CHECK(none.steps == 0);
  CHECK(none.step_statistics[0][0].entropy.size() == 0);
  // one head selected: only its entries, equal to the run of every head
  StreamingOptions one_head;
  one_head.heads = {{1, 2}};
  GenerationOptions no_key0;
  no_key0.first_key_queries = 0;
  const GenerationResult selected = transformer.generate_with_statistics(prompt, 20, no_key0, one_head);
  CHECK(selected.tokens == all.tokens);
  CHECK(selected.step_statistics[1][2].entropy == head_all.entropy);
  CHECK(selected.step_statistics[1][2].jacobian_norm == head_all.jacobian_norm);
  CHECK(selected.step_statistics[0][2].entropy.size() == 0);
  CHECK(selected.step_statistics[1][1].entropy.size() == 0);
  CHECK(selected.most_attended_key[1][2] == all.most_attended_key[1][2]);
  CHECK(selected.first_key_attention[1][2].size() == 0);
  CHECK(all.first_key_attention[1][2].size() == 8 + 20 - 1);  // fewer rows run than the default T = 64
}

TEST_CASE("generate_with_statistics: errors name the function and the value") {
  const Transformer& transformer = attnscope::testing::hf_fixture_model("gpt2");
  const std::vector<int> prompt = {1, 2, 3};
  const auto generate = [&](int steps, GenerationOptions generation = {}, StreamingOptions streaming = {},
                            ForwardOptions options = {}) {
    return error_message([&] { transformer.generate_with_statistics(prompt, steps, generation, streaming, options); });
  };
  const std::string fn = "Transformer::generate_with_statistics";
  CHECK_THAT(generate(-1), Catch::Contains(fn) && Catch::Contains("steps must be >= 0, got -1"));
  CHECK_THAT(generate(62), Catch::Contains("prefix length 3 + steps 62 exceeds seq_len 64"));
  CHECK_THAT(error_message([&] { transformer.generate_with_statistics({}, 1); }),
             Catch::Contains(fn) && Catch::Contains("empty token sequence"));
  CHECK_THAT(error_message([&] { transformer.generate_with_statistics({1, 100000}, 1); }),
             Catch::Contains("token 100000 at position 1"));
  GenerationOptions generation;
  generation.temperature = -1;
  CHECK_THAT(generate(1, generation), Catch::Contains("temperature must be finite and >= 0, got -1"));
  generation.temperature = std::nan("");
  CHECK_THAT(generate(1, generation), Catch::Contains("temperature must be finite and >= 0, got nan"));
  generation = {};
  generation.first_key_queries = -1;
  CHECK_THAT(generate(1, generation), Catch::Contains("first_key_queries must be >= 0, got -1"));
  generation = {};
  generation.stop_tokens = {transformer.config().vocab_size};
  CHECK_THAT(generate(1, generation), Catch::Contains("stop token " + std::to_string(transformer.config().vocab_size)));
  ForwardOptions mapped;
  mapped.map = attnscope::parse_normalization_map("sparsemax");
  CHECK_THAT(generate(1, {}, {}, mapped), Catch::Contains("only softmax attention streams"));
  StreamingOptions streaming;
  streaming.heads = {{0, 99}};
  CHECK_THAT(generate(1, {}, streaming), Catch::Contains("streaming.heads names (layer 0, head 99)"));
  streaming = {};
  streaming.query_block = 0;
  CHECK_THAT(generate(1, {}, streaming), Catch::Contains("query_block = 0"));
  streaming = {};
  streaming.statistics.scale = 0.5;
  CHECK_THAT(generate(1, {}, streaming), Catch::Contains("are set by the model"));
  streaming = {};
  streaming.statistics.sink_keys = {5};  // the prompt has 3 positions
  CHECK_THAT(generate(1, {}, streaming), Catch::Contains("sink key"));
}
