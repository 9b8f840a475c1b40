// kvcache::simulate_layer on real forward passes of several families (GPT-2, Llama, Qwen2 with GQA, Gemma 2 with
// logit softcap and a sliding window on alternate layers): its q, k, v come from the model's layer_attention_inputs
// callback and capture.v, and every policy's lost mass, output error, cache size and oracle gap must match the
// independent reference of dense_reference.hpp run on the DENSE capture.attention of the same pass, to 1e-9.
#include <string>
#include <vector>

#include "attnscope/kvcache.hpp"
#include "kvcache/dense_reference.hpp"
#include "model/support/hf_fixtures.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
namespace kvcache = attnscope::kvcache;
namespace reference = attnscope::testing::kvcache_reference;

// One layer's post-RoPE q, k and attention settings, copied from the forward pass's callback.
struct CallbackLayer {
  RowMatrix<float> queries, keys;
  attnscope::stream::RowStatisticsOptions attention;
};

struct FixturePass {
  std::vector<CallbackLayer> layers;
  attnscope::model::ForwardResult dense;
};

FixturePass fixture_pass(const attnscope::model::Transformer& model, const std::vector<int>& tokens) {
  FixturePass pass;
  pass.layers.resize(static_cast<std::size_t>(model.config().n_layers));
  attnscope::model::ForwardOptions options;
  options.capture.attention = true;
  options.capture.v = true;
  options.logits = false;
  options.layer_attention_inputs = [&](int layer, const attnscope::RowMatrixView<float>& queries,
                                       const attnscope::RowMatrixView<float>& keys,
                                       const attnscope::stream::RowStatisticsOptions& attention) {
    pass.layers[static_cast<std::size_t>(layer)] = {queries, keys, attention};
  };
  pass.dense = model.forward(tokens, options);
  return pass;
}

// Values in the KV layout [L, kv_heads·dv] from the per-query-head capture (the first head of each group).
RowMatrix<float> kv_values(const attnscope::model::LayerCapture& capture, int heads, int kv_heads) {
  const Index length = capture.v.front().rows(), size = capture.v.front().cols();
  RowMatrix<float> values(length, kv_heads * size);
  for (int g = 0; g < kv_heads; ++g)
    values.middleCols(g * size, size) = capture.v[static_cast<std::size_t>(g * (heads / kv_heads))];
  return values;
}

reference::Spec reference_spec(const std::string& text) {
  reference::Spec spec;
  const std::size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  std::size_t start = colon + 1;
  while (start < text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const std::size_t equals = item.find('=');
    spec.field[item.substr(0, equals)] = std::stol(item.substr(equals + 1));
    start = comma + 1;
  }
  return spec;
}

void check_family(const std::string& family, Index length, Index prefill, Index evaluate_from) {
  INFO("fixture " << family);
  const auto& model = attnscope::testing::hf_fixture_model(family);
  const auto& config = model.config();
  std::vector<int> tokens;
  attnscope::Random random(17);
  for (Index i = 0; i < length; ++i) tokens.push_back(static_cast<int>(random.below(config.vocab_size)));
  const FixturePass pass = fixture_pass(model, tokens);
  const std::vector<std::string> specs = {
      "streaming:sink=2,recent=6", "oracle:budget=8", "h2o:heavy=4,recent=4", "tova:budget=7",
      "snapkv:window=4,kernel=3,budget=9", "snapkv:window=3,kernel=5,budget=5",
      // budgets covering the whole input: nothing is lost
      "streaming:sink=" + std::to_string(length) + ",recent=0", "oracle:budget=" + std::to_string(length),
      "h2o:heavy=" + std::to_string(length) + ",recent=1", "tova:budget=" + std::to_string(length),
      "snapkv:window=2,kernel=1,budget=" + std::to_string(prefill)};
  std::vector<kvcache::Policy> policies;
  for (const std::string& spec : specs) policies.push_back(kvcache::parse_policy(spec));
  kvcache::SimulationOptions options;
  options.prefill = prefill;
  options.evaluate_from = evaluate_from;
  options.block_rows = 7;  // blocks that do not divide L
  const int heads = config.n_heads, kv_heads = config.n_kv_heads, group = heads / kv_heads;
  bool window_seen = false;
  for (int l = 0; l < config.n_layers; ++l) {
    INFO("layer " << l);
    const CallbackLayer& layer = pass.layers[static_cast<std::size_t>(l)];
    window_seen = window_seen || layer.attention.visibility.has_window();
    const auto& capture = pass.dense.layers[static_cast<std::size_t>(l)];
    const RowMatrix<float> values = kv_values(capture, heads, kv_heads);
    const std::vector<kvcache::PolicyLayerResult> results =
        kvcache::simulate_layer(layer.queries, layer.keys, values, heads, kv_heads, layer.attention, policies, options);
    const reference::Layer dense = reference::make_layer(capture.attention, capture.v, group);
    for (std::size_t p = 0; p < specs.size(); ++p) {
      INFO("policy " << specs[p]);
      const reference::Result expected = reference::simulate(dense, reference_spec(specs[p]), static_cast<int>(prefill));
      const bool covers_everything = p >= 6;
      double largest_lost = 0;
      for (int h = 0; h < heads; ++h)
        for (Index i = evaluate_from; i < length; ++i) {
          INFO("head " << h << " query " << i);
          const Index t = i - evaluate_from;
          CHECK(results[p].lost_mass(h, t) == Approx(expected.lost[h][i]).margin(1e-9));
          CHECK(results[p].output_error(h, t) == Approx(expected.error[h][i]).margin(1e-9));
          CHECK(results[p].oracle_lost_mass(h, t) == Approx(expected.oracle_lost[h][i]).margin(1e-9));
          CHECK(results[p].cache_size(h / group, t) == expected.size[h / group][i]);
          largest_lost = std::max(largest_lost, results[p].lost_mass(h, t));
          if (covers_everything) {  // exactly, not approximately
            CHECK(results[p].lost_mass(h, t) == 0.0);
            CHECK(results[p].output_error(h, t) == 0.0);
          }
        }
      if (!covers_everything && p != 5) CHECK(largest_lost > 1e-3);  // the comparison is not vacuous
    }
  }
  if (family == "gemma2") CHECK(window_seen);
}

}  // namespace

TEST_CASE("kvcache simulate_layer matches the dense reference on GPT-2", "[kvcache][models]") {
  check_family("gpt2", 40, 20, 0);
}

TEST_CASE("kvcache simulate_layer matches the dense reference on Llama", "[kvcache][models]") {
  check_family("llama", 40, 16, 5);
}

TEST_CASE("kvcache simulate_layer matches the dense reference on Qwen2 (GQA)", "[kvcache][models]") {
  check_family("qwen2", 45, 24, 3);
}

TEST_CASE("kvcache simulate_layer matches the dense reference on Gemma 2 (softcap, window)", "[kvcache][models]") {
  check_family("gemma2", 40, 20, 0);
}
