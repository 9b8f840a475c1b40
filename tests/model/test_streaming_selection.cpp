// The streaming forward's head selection (StreamingOptions::heads) and its feed-forward passes
// (StreamingOptions::feed_forward_rows). A head that is not selected runs the same softmax as a selected one (the
// kernel's probabilities do not depend on whether statistics are taken), so the selected heads' statistics and the
// logits are bitwise those of a run of every head, and the unselected entries are empty. The feed-forward rows are
// independent, so passes of any number of rows give the logits and statistics of one pass over all rows, compared
// bit for bit on stories260K, the Hugging Face fixtures and gpt2-wp-mini at 700 tokens (passes of a multiple of 8
// rows; other sizes are refused, since Eigen's GEMM rounds a pass's last rows in its remainder kernels differently);
// with the optional BLAS backend, within float32 rounding. A pass without logits computes its last layer's statistics
// alone (no values, P·V or feed-forward), bitwise those of a whole layer.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/hf_fixtures.hpp"
#include "support/model_fixture.hpp"
#include "support/model_helpers.hpp"

namespace {

using attnscope::Index;
using attnscope::model::ForwardOptions;
using attnscope::model::StreamingForwardResult;
using attnscope::model::StreamingOptions;
using attnscope::model::Transformer;
using attnscope::stream::RowStatistics;

// Bitwise equality of two heads' statistics (every column, the top-k masses and the visible key counts).
bool selection_statistics_identical(const RowStatistics& a, const RowStatistics& b) {
  const auto same = [](const auto& x, const auto& y) {
    return x.rows() == y.rows() && x.cols() == y.cols() && (x.size() == 0 || (x.array() == y.array()).all());
  };
  return same(a.max_scaled_logit, b.max_scaled_logit) && same(a.log_partition, b.log_partition) &&
         same(a.entropy, b.entropy) && same(a.sink_mass, b.sink_mass) && same(a.max_weight, b.max_weight) &&
         same(a.jacobian_norm, b.jacobian_norm) && same(a.top_k_mass, b.top_k_mass) && a.top_k == b.top_k &&
         same(a.visible_keys, b.visible_keys);
}

bool selection_statistics_empty(const RowStatistics& s) {
  return s.max_scaled_logit.size() == 0 && s.log_partition.size() == 0 && s.entropy.size() == 0 &&
         s.sink_mass.size() == 0 && s.max_weight.size() == 0 && s.jacobian_norm.size() == 0 &&
         s.top_k_mass.size() == 0 && s.visible_keys.size() == 0;
}

StreamingOptions selection_streaming_options() {
  StreamingOptions options;
  options.statistics.top_k = {1, 4};
  options.query_block = 24;
  return options;
}

// Runs every head, then only `heads` (stopping after `last_layer` when ≥ 0), and checks the selected heads'
// statistics bitwise, the others empty, and (when every layer runs) the logits bitwise.
void check_selection_against_full_run(const Transformer& model, const std::vector<int>& tokens,
                                      const std::set<std::pair<int, int>>& heads, int last_layer = -1) {
  const StreamingOptions every_head = selection_streaming_options();
  const StreamingForwardResult full = model.forward_row_statistics(tokens, {}, every_head);
  StreamingOptions selected = every_head;
  selected.heads = heads;
  ForwardOptions options;
  options.last_layer = last_layer;
  const StreamingForwardResult part = model.forward_row_statistics(tokens, options, selected);
  const int layers_run = last_layer >= 0 ? last_layer + 1 : model.config().n_layers;
  REQUIRE(part.row_statistics.size() == std::size_t(model.config().n_layers));
  for (int l = layers_run; l < model.config().n_layers; ++l) CHECK(part.row_statistics[std::size_t(l)].empty());
  Index compared = 0;
  for (int l = 0; l < layers_run; ++l) {
    REQUIRE(part.row_statistics[std::size_t(l)].size() == std::size_t(model.config().n_heads));
    for (int h = 0; h < model.config().n_heads; ++h) {
      INFO("layer " << l << ", head " << h);
      const RowStatistics& got = part.row_statistics[std::size_t(l)][std::size_t(h)];
      if (heads.count({l, h}) > 0) {
        REQUIRE(got.entropy.size() == Index(tokens.size()));
        CHECK(selection_statistics_identical(got, full.row_statistics[std::size_t(l)][std::size_t(h)]));
        ++compared;
      } else {
        CHECK(selection_statistics_empty(got));
      }
    }
  }
  CHECK(compared == Index(heads.size()));
  if (last_layer < 0) {
    REQUIRE(part.logits.rows() == full.logits.rows());
    CHECK((part.logits.array() == full.logits.array()).all());
  } else {
    CHECK(part.logits.size() == 0);  // a pass that stops early forms no logits
  }
}

// Runs the streaming forward with the feed-forward in passes of `rows` rows and in one pass; checks the logits and
// every head's statistics bit for bit.
void check_feed_forward_passes(const Transformer& model, const std::vector<int>& tokens, Index rows) {
  StreamingOptions whole = selection_streaming_options();
  whole.feed_forward_rows = 0;
  StreamingOptions passes = whole;
  passes.feed_forward_rows = rows;
  const StreamingForwardResult a = model.forward_row_statistics(tokens, {}, whole);
  const StreamingForwardResult b = model.forward_row_statistics(tokens, {}, passes);
  INFO("feed_forward_rows = " << rows << ", L = " << tokens.size());
  REQUIRE(a.logits.rows() == b.logits.rows());
  if (attnscope::model::detail::blas_backend) {
    // a BLAS sgemm (ATTNSCOPE_BLAS) blocks the rows its own way: the passes agree within float32 rounding only
    // (relative 1e-5 of a row's largest |logit| is ≈ 100 ulps; entropies in nats to 1e-4)
    for (Index i = 0; i < a.logits.rows(); ++i)
      CHECK((a.logits.row(i) - b.logits.row(i)).cwiseAbs().maxCoeff() <=
            1e-5f * a.logits.row(i).cwiseAbs().maxCoeff());
    for (std::size_t l = 0; l < a.row_statistics.size(); ++l)
      for (std::size_t h = 0; h < a.row_statistics[l].size(); ++h)
        CHECK((a.row_statistics[l][h].entropy - b.row_statistics[l][h].entropy).cwiseAbs().maxCoeff() <= 1e-4);
    return;
  }
  CHECK((a.logits.array() == b.logits.array()).all());
  for (std::size_t l = 0; l < a.row_statistics.size(); ++l)
    for (std::size_t h = 0; h < a.row_statistics[l].size(); ++h) {
      INFO("layer " << l << ", head " << h);
      CHECK(selection_statistics_identical(a.row_statistics[l][h], b.row_statistics[l][h]));
    }
}

}  // namespace

TEST_CASE("streaming head selection: the selected heads' statistics are bitwise those of a run of every head") {
  SECTION("stories260K (GQA 8/4), heads in several layers") {
    const Transformer& model = attnscope::testing::reference_model();
    const auto tokens = attnscope::testing::random_token_sequence(200, model.config().vocab_size, 17, {1});
    check_selection_against_full_run(model, tokens, {{0, 1}, {2, 5}, {2, 6}, {4, 0}});
    check_selection_against_full_run(model, tokens, {{1, 7}});
    check_selection_against_full_run(model, tokens, {{0, 0}, {1, 3}}, 1);  // stops after layer 1
  }
  SECTION("gpt2-wp-mini, 300 tokens of War and Peace") {
    const Transformer& model = attnscope::testing::war_and_peace_model();
    const auto& book = attnscope::testing::war_and_peace_book_one_tokens();
    const std::vector<int> tokens(book.begin(), book.begin() + 300);
    check_selection_against_full_run(model, tokens, {{0, 2}, {3, 0}, {3, 1}});
  }
  SECTION("the HF fixtures (GQA, biases, sliding windows, softcaps, q/k norms)") {
    for (const std::string name : {"llama", "qwen2", "gemma2", "gemma3", "qwen3", "gpt_neox"}) {
      INFO("fixture " << name);
      const Transformer& model = attnscope::testing::hf_fixture_model(name);
      const auto tokens =
          attnscope::testing::random_token_sequence(std::size_t(std::min(60, model.config().seq_len)), 300, 23);
      const int last = model.config().n_layers - 1, head = model.config().n_heads - 1;
      check_selection_against_full_run(model, tokens, {{0, 0}, {last, head}});
    }
  }
}

TEST_CASE("streaming forward without logits: the last layer's statistics alone, bitwise those of a whole layer") {
  // Without logits, hidden states or per-head captures nothing reads the last layer's output, so that layer runs
  // q·kᵀ and the row passes of its analysed heads only; its statistics must be bitwise those of a pass that
  // computes the logits (every layer whole). Covers GQA (the key head of each query head), sliding windows and
  // softcaps (the layer's kernel options), a selection inside the last layer and a pass stopped early.
  const auto check = [](const Transformer& model, const std::vector<int>& tokens,
                        const std::set<std::pair<int, int>>& heads, int last_layer) {
    StreamingOptions streaming = selection_streaming_options();
    streaming.heads = heads;
    ForwardOptions whole;  // logits: every layer runs whole
    const StreamingForwardResult reference = model.forward_row_statistics(tokens, whole, streaming);
    ForwardOptions statistics_only;
    statistics_only.logits = false;
    statistics_only.last_layer = last_layer;
    const StreamingForwardResult got = model.forward_row_statistics(tokens, statistics_only, streaming);
    CHECK(got.logits.size() == 0);
    const int layers_run = last_layer >= 0 ? last_layer + 1 : model.config().n_layers;
    Index compared = 0;
    for (int l = 0; l < layers_run; ++l) {
      REQUIRE(got.row_statistics[std::size_t(l)].size() == std::size_t(model.config().n_heads));
      for (int h = 0; h < model.config().n_heads; ++h) {
        INFO("layer " << l << ", head " << h << ", last layer run " << layers_run - 1);
        const RowStatistics& a = got.row_statistics[std::size_t(l)][std::size_t(h)];
        if (!heads.empty() && heads.count({l, h}) == 0) {
          CHECK(selection_statistics_empty(a));
          continue;
        }
        REQUIRE(a.entropy.size() == Index(tokens.size()));
        CHECK(selection_statistics_identical(a, reference.row_statistics[std::size_t(l)][std::size_t(h)]));
        ++compared;
      }
    }
    CHECK(compared == (heads.empty() ? Index(layers_run) * model.config().n_heads : Index(heads.size())));
  };
  SECTION("stories260K (GQA 8/4): every head, a selection in the last layer, a pass stopped after layer 2") {
    const Transformer& model = attnscope::testing::reference_model();
    const auto tokens = attnscope::testing::random_token_sequence(150, model.config().vocab_size, 31, {1});
    const int last = model.config().n_layers - 1;
    check(model, tokens, {}, -1);
    check(model, tokens, {{0, 2}, {last, 1}, {last, 6}}, -1);
    check(model, tokens, {}, 2);
    check(model, tokens, {{2, 7}}, 2);
  }
  SECTION("the HF fixtures (GQA, biases, sliding windows, softcaps, q/k norms, parallel residual)") {
    for (const std::string name : {"llama", "qwen2", "gpt2", "gemma2", "gemma3", "qwen3", "phi3", "gpt_neox", "olmo2"}) {
      INFO("fixture " << name);
      const Transformer& model = attnscope::testing::hf_fixture_model(name);
      const auto tokens =
          attnscope::testing::random_token_sequence(std::size_t(std::min(60, model.config().seq_len)), 300, 37);
      check(model, tokens, {}, -1);
      check(model, tokens, {{model.config().n_layers - 1, model.config().n_heads - 1}}, -1);
    }
  }
}

TEST_CASE("streaming head selection: pairs outside the model or the layers run are errors naming the pair") {
  const Transformer& model = attnscope::testing::reference_model();
  const std::vector<int> tokens = {1, 20, 30, 40};
  const auto message = [&](std::set<std::pair<int, int>> heads, int last_layer) {
    StreamingOptions streaming;
    streaming.heads = std::move(heads);
    ForwardOptions options;
    options.last_layer = last_layer;
    return attnscope::testing::error_message([&] { model.forward_row_statistics(tokens, options, streaming); });
  };
  const auto names = [](const std::string& text, const std::string& part) {
    INFO(text);
    return text.find("Transformer::forward_row_statistics") != std::string::npos &&
           text.find(part) != std::string::npos;
  };
  const int layers = model.config().n_layers, heads = model.config().n_heads;
  CHECK(names(message({{layers, 0}}, -1), "(layer " + std::to_string(layers) + ", head 0)"));
  CHECK(names(message({{0, heads}}, -1), "(layer 0, head " + std::to_string(heads) + ")"));
  CHECK(names(message({{-1, 0}}, -1), "(layer -1, head 0)"));
  CHECK(names(message({{0, -2}}, -1), "(layer 0, head -2)"));
  CHECK(names(message({{0, 0}, {3, 1}}, 1), "(layer 3, head 1), outside the 2 layers run"));
  for (const Index rows : {-8, -1, 7, 100}) {
    StreamingOptions bad;
    bad.feed_forward_rows = rows;
    CHECK(names(attnscope::testing::error_message([&] { model.forward_row_statistics(tokens, {}, bad); }),
                "feed_forward_rows = " + std::to_string(rows) + " must be a multiple of 8"));
  }
}

TEST_CASE("streaming feed-forward in row passes: the logits and statistics of one pass, bit for bit") {
  SECTION("stories260K, 200 tokens") {
    const Transformer& model = attnscope::testing::reference_model();
    const auto tokens = attnscope::testing::random_token_sequence(200, model.config().vocab_size, 29, {1});
    for (const Index rows : {8, 24, 64, 192, 200, 512}) check_feed_forward_passes(model, tokens, rows);
    const std::vector<int> odd_length(tokens.begin(), tokens.begin() + 197);  // L not a multiple of 8
    for (const Index rows : {8, 40, 96}) check_feed_forward_passes(model, odd_length, rows);
  }
  SECTION("the HF fixtures (SwiGLU, GeGLU, GELU, parallel residual, sandwich norms)") {
    for (const std::string name : {"llama", "qwen2", "gpt2", "gemma2", "gemma3", "phi3", "gpt_neox", "olmo2"}) {
      INFO("fixture " << name);
      const Transformer& model = attnscope::testing::hf_fixture_model(name);
      const auto tokens =
          attnscope::testing::random_token_sequence(std::size_t(std::min(60, model.config().seq_len)), 300, 41);
      for (const Index rows : {8, 16, 24, 40}) check_feed_forward_passes(model, tokens, rows);
    }
  }
  SECTION("gpt2-wp-mini, 700 tokens of War and Peace") {
    const Transformer& model = attnscope::testing::war_and_peace_model();
    const auto& book = attnscope::testing::war_and_peace_book_one_tokens();
    REQUIRE(book.size() >= 700);
    const std::vector<int> tokens(book.begin(), book.begin() + 700);
    for (const Index rows : {256, 296, 512}) check_feed_forward_passes(model, tokens, rows);
  }
}

TEST_CASE("capture head selection: the recorded heads' arrays are bitwise those of a capture of every head") {
  // CaptureOptions::heads narrows what forward() records; the heads left out still run, so every recorded array and
  // the logits are those of the full capture, and the left-out entries are empty matrices at their indices
  const Transformer& model = attnscope::testing::reference_model();
  const auto tokens = attnscope::testing::random_token_sequence(120, model.config().vocab_size, 29, {1});
  ForwardOptions full = attnscope::testing::capture_everything();
  const attnscope::model::ForwardResult all = model.forward(tokens, full);
  for (const auto& [heads, last_layer] :
       std::vector<std::pair<std::set<std::pair<int, int>>, int>>{{{{0, 1}, {2, 5}, {4, 7}}, -1}, {{{1, 0}}, 1}}) {
    ForwardOptions narrow = full;
    narrow.capture.heads = heads;
    narrow.last_layer = last_layer;
    const attnscope::model::ForwardResult some = model.forward(tokens, narrow);
    const int layers_run = last_layer >= 0 ? last_layer + 1 : model.config().n_layers;
    REQUIRE(some.layers.size() == all.layers.size());
    if (last_layer < 0) CHECK((some.logits.array() == all.logits.array()).all());
    for (int l = 0; l < layers_run; ++l) {
      for (int h = 0; h < model.config().n_heads; ++h) {
        INFO("layer " << l << " head " << h);
        const bool recorded = heads.count({l, h}) > 0;
        const auto& a = all.layers[std::size_t(l)];
        const auto& b = some.layers[std::size_t(l)];
        const auto check = [&](const auto& list_all, const auto& list_some) {
          REQUIRE(list_some.size() == std::size_t(model.config().n_heads));
          const auto& x = list_all[std::size_t(h)];
          const auto& y = list_some[std::size_t(h)];
          if (!recorded) {
            CHECK(y.size() == 0);
            return;
          }
          REQUIRE(y.rows() == x.rows());
          REQUIRE(y.cols() == x.cols());
          CHECK((x.array() == y.array() || (x.array() != x.array() && y.array() != y.array())).all());
        };
        check(a.q, b.q);
        check(a.k, b.k);
        check(a.v, b.v);
        check(a.scores, b.scores);
        check(a.attention, b.attention);
        check(a.head_output, b.head_output);
      }
    }
    CHECK(some.hidden_states.size() == std::size_t(layers_run) + 1);
  }
  // a pair outside the layers run or the model is an error naming it
  ForwardOptions bad = full;
  bad.capture.heads = {{0, 0}, {3, 1}};
  bad.last_layer = 1;
  const std::string text = attnscope::testing::error_message([&] { model.forward(tokens, bad); });
  INFO(text);
  CHECK(text.find("capture.heads names (layer 3, head 1) outside the 2 layers run") != std::string::npos);
  bad.capture.heads = {{0, model.config().n_heads}};
  bad.last_layer = -1;
  CHECK(attnscope::testing::error_message([&] { model.forward(tokens, bad); }).find(
            "(layer 0, head " + std::to_string(model.config().n_heads) + ")") != std::string::npos);
}
