// The architecture tables: every family fixture (Llama with each rope_scaling, SmolLM, Qwen3, Qwen2 with sliding
// windows, Gemma 2, Gemma 3, Phi-3 with longrope, GPT-NeoX, OLMo 2) agrees with the independent plain-PyTorch
// reference of tests/fixtures/make_hf_fixtures.py (logits to 1e-4 of each row's largest value, every layer's attention
// to 1e-5); the features the fixtures exercise change the outputs (so the agreement is not vacuous); the configs map
// to the documented flags; unknown tensors, rope types and fields are refused by name.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnscope/io/safetensors.hpp"
#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/hf_fixtures.hpp"

namespace {

using attnscope::model::ForwardOptions;
using attnscope::model::ForwardResult;
using attnscope::model::Transformer;
using attnscope::testing::hf_fixture_folder;
using attnscope::testing::hf_fixture_model;
using attnscope::testing::fixture_with_config;

const std::vector<std::string> family_fixtures = {"llama_rope", "smollm", "qwen3", "gemma2",
                                                  "gemma3",     "phi3",   "gpt_neox", "olmo2"};

// The worst logits and attention errors of `model` on a reference.
struct ReferenceGap {
  double logits = std::numeric_limits<double>::infinity(), attention = std::numeric_limits<double>::infinity();
};

ReferenceGap gap_to_reference(const Transformer& model, const attnscope::testing::HfReference& reference) {
  const std::vector<int> tokens(reference.tokens.begin(), reference.tokens.end());
  ForwardOptions options;
  options.capture.attention = true;
  const ForwardResult result = model.forward(tokens, options);
  ReferenceGap gap;
  gap.logits = attnscope::testing::hf_logits_error(result.logits, reference.logits);
  if (reference.attention.size() != std::size_t(model.config().n_layers)) return gap;
  gap.attention = 0;
  for (std::size_t layer = 0; layer < reference.attention.size(); ++layer) {
    if (reference.attention[layer].size() != std::size_t(model.config().n_heads))
      return {gap.logits, std::numeric_limits<double>::infinity()};
    for (std::size_t head = 0; head < reference.attention[layer].size(); ++head)
      gap.attention = std::max(gap.attention, attnscope::testing::hf_attention_error(result.layers[layer].attention[head],
                                                                                      reference.attention[layer][head]));
  }
  return gap;
}

// A scratch copy of a fixture with one more tensor stored in model.safetensors.
std::string fixture_with_extra_tensor(const std::string& name, const std::string& case_name,
                                      const std::string& tensor) {
  const std::string folder = attnscope::testing::scratch_copy_of_fixture(name, case_name);
  auto contents = attnscope::io::read_safetensors_contents(folder + "/model.safetensors");
  attnscope::io::NamedArrays arrays;
  for (auto& [stored, array] : contents.tensors) arrays.emplace_back(stored, std::move(array));
  arrays.emplace_back(tensor, attnscope::io::Array::from_vector(std::vector<float>(64, 0.5f), {64}));
  attnscope::io::write_safetensors(folder + "/model.safetensors", arrays);
  return folder;
}

double max_difference(const attnscope::RowMatrix<double>& a, const attnscope::RowMatrix<double>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return std::numeric_limits<double>::infinity();
  return (a - b).cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("family fixtures agree with the independent PyTorch reference: logits and every layer's attention") {
  for (const std::string& name : family_fixtures) {
    INFO("fixture " << name);
    const Transformer& model = hf_fixture_model(name);
    CHECK(model.config().architecture == attnscope::testing::read_json_file(hf_fixture_folder(name) + "/config.json")
                                             .at("model_type")
                                             .get<std::string>());
    const auto reference = attnscope::testing::read_hf_reference(name);
    const ReferenceGap gap = gap_to_reference(model, reference);
    CHECK(gap.logits <= attnscope::testing::hf_logits_relative_tolerance);
    CHECK(gap.attention <= attnscope::testing::hf_attention_tolerance);
    // load_model dispatches the folder to the same reader
    const std::vector<int> tokens(reference.tokens.begin(), reference.tokens.end());
    CHECK(attnscope::model::load_model(hf_fixture_folder(name)).forward(tokens).logits == model.forward(tokens).logits);
  }
}

TEST_CASE("config variants (rope_scaling linear/dynamic/yarn, Qwen2 windows, Phi-3 short factors, NeoX sequential "
          "residual) agree with their references, and each changes the outputs") {
  for (const std::string name : {"llama_rope", "qwen2", "phi3", "gpt_neox"}) {
    const auto variants = attnscope::testing::read_json_file(hf_fixture_folder(name) + "/variants.json");
    const auto base = attnscope::testing::read_hf_reference(name);
    for (const auto& [variant, changes] : variants.items()) {
      INFO("fixture " << name << ", variant " << variant << ": " << changes.dump());
      const auto reference = attnscope::testing::read_hf_reference(name, variant);
      const Transformer model =
          attnscope::model::load_huggingface_model(fixture_with_config(name, name + "_" + variant, changes));
      const ReferenceGap gap = gap_to_reference(model, reference);
      CHECK(gap.logits <= attnscope::testing::hf_logits_relative_tolerance);
      CHECK(gap.attention <= attnscope::testing::hf_attention_tolerance);
      // the variant is a different model: its logits differ from the base reference's (on the shared tokens) far
      // beyond the tolerance
      const auto rows = reference.logits.rows();
      CHECK(max_difference(reference.logits, base.logits.topRows(rows)) > 1e-2);
    }
  }
}

TEST_CASE("each feature of the family fixtures changes the outputs (turning it off breaks the agreement)") {
  // The fixture with one config field changed or removed; the model must then miss its reference by far.
  struct Ablation {
    const char* fixture;
    const char* field;
    nlohmann::json value;  // null: removed
  };
  const Ablation ablations[] = {
      {"llama_rope", "rope_scaling", nullptr},          // llama3 frequencies
      {"qwen3", "use_sliding_window", false},           // the window of layer 1
      {"gemma2", "attn_logit_softcapping", nullptr},    // the attention softcap bites
      {"gemma2", "final_logit_softcapping", nullptr},   // the final softcap bites
      {"gemma2", "query_pre_attn_scalar", 16},          // the logit scale
      {"gemma2", "sliding_window", 64},                 // the window of layer 0
      {"gemma3", "rope_local_base_freq", 10000.0},      // the local layers' own base
      {"gemma3", "rope_scaling", nullptr},              // the global layers' scaling
      {"phi3", "original_max_position_embeddings", 64}, // longrope: short factors, attention factor 1
      {"phi3", "sliding_window", nullptr},              // the window
      {"gpt_neox", "rotary_pct", 1.0},                  // partial rotary
  };
  for (const Ablation& ablation : ablations) {
    INFO("fixture " << ablation.fixture << " with " << ablation.field << " = " << ablation.value.dump());
    const std::string folder =
        fixture_with_config(ablation.fixture, std::string("ablate_") + ablation.fixture + "_" + ablation.field,
                            {{ablation.field, ablation.value}});
    const Transformer model = attnscope::model::load_huggingface_model(folder);
    const ReferenceGap gap = gap_to_reference(model, attnscope::testing::read_hf_reference(ablation.fixture));
    CHECK(std::max(gap.logits / attnscope::testing::hf_logits_relative_tolerance,
                   gap.attention / attnscope::testing::hf_attention_tolerance) > 100);
  }
}

TEST_CASE("config.json of each family maps to the documented feature flags") {
  using attnscope::model::FeedForwardKind;
  using attnscope::model::NormKind;
  using attnscope::model::NormPlacement;
  using attnscope::model::QueryKeyNorm;
  using attnscope::model::RopeScalingKind;
  const auto& llama = hf_fixture_model("llama_rope").config();
  CHECK(llama.rope_scaling.kind == RopeScalingKind::llama3);
  CHECK(llama.rope_scaling.factor == 8.0);
  CHECK(llama.rope_scaling.original_max_positions == 64);
  CHECK(hf_fixture_model("smollm").config().tied_embeddings);
  CHECK(hf_fixture_model("smollm").weights().classifier.size() == 0);
  const auto& qwen3 = hf_fixture_model("qwen3").config();
  CHECK(qwen3.query_key_norm == QueryKeyNorm::per_head);
  CHECK(qwen3.head_dim == 24);
  CHECK(qwen3.query_dim() == 96);
  CHECK(qwen3.layer_sliding_window == std::vector<int>{0, 12});
  const auto& gemma2 = hf_fixture_model("gemma2").config();
  CHECK(gemma2.norm == NormKind::rms_norm_unit_offset);
  CHECK(gemma2.norm_placement == NormPlacement::sandwich);
  CHECK(gemma2.feed_forward == FeedForwardKind::geglu_tanh);
  CHECK(gemma2.embedding_scale == 8.0f);
  CHECK(gemma2.attention_scale == Approx(1 / std::sqrt(24.0)).epsilon(1e-15));
  CHECK(gemma2.attention_softcap == 3.0);
  CHECK(gemma2.final_logit_softcap == 4.0);
  CHECK(gemma2.layer_sliding_window == std::vector<int>{12, 0});  // even layers slide
  const auto& gemma3 = hf_fixture_model("gemma3").config();
  CHECK(gemma3.query_key_norm == QueryKeyNorm::per_head);
  CHECK(gemma3.rope_local_theta == 100.0);
  CHECK(gemma3.rope_scaling.kind == RopeScalingKind::linear);
  CHECK(gemma3.attention_softcap == 0);
  CHECK(gemma3.layer_sliding_window == std::vector<int>{12, 0});  // sliding_window_pattern 2
  const auto& phi3 = hf_fixture_model("phi3").config();
  CHECK(phi3.rope_scaling.kind == RopeScalingKind::longrope);
  CHECK(phi3.rotary_size() == 12);
  CHECK(phi3.rope_scaling.attention_factor == Approx(std::sqrt(1 + std::log(4.0) / std::log(16.0))).epsilon(1e-15));
  CHECK(phi3.sliding_window == 20);
  const auto& neox = hf_fixture_model("gpt_neox").config();
  CHECK(neox.parallel_residual);
  CHECK(neox.rotary_size() == 4);
  CHECK(neox.norm == NormKind::layer_norm);
  CHECK(neox.feed_forward == FeedForwardKind::gelu_erf);
  CHECK(!neox.tied_embeddings);
  const auto& olmo2 = hf_fixture_model("olmo2").config();
  CHECK(olmo2.norm_placement == NormPlacement::post);
  CHECK(olmo2.query_key_norm == QueryKeyNorm::full_width);
  CHECK(hf_fixture_model("olmo2").weights().layers[0].k_norm.size() == olmo2.kv_dim());
  CHECK(hf_fixture_model("olmo2").weights().layers[0].attention_norm.size() == 0);
  // GPT-NeoX's fused per-head q|k|v: query head h is rows [48h, 48h + 16) of query_key_value.
  const auto fused = attnscope::io::read_safetensors_contents(hf_fixture_folder("gpt_neox") + "/model.safetensors");
  for (const auto& [stored, array] : fused.tensors)
    if (stored == "gpt_neox.layers.1.attention.query_key_value.weight") {
      const auto matrix = array.to_matrix<float>();
      const auto& wq = hf_fixture_model("gpt_neox").weights().layers[1].wq;
      const auto& wv = hf_fixture_model("gpt_neox").weights().layers[1].wv;
      CHECK(wq.to_float32().middleRows(16, 16) == matrix.middleRows(48, 16));
      CHECK(wv.to_float32().middleRows(32, 16) == matrix.middleRows(2 * 48 + 32, 16));
    }
}

TEST_CASE("a stored tensor that is neither used nor a known buffer is an error naming it; known buffers load") {
  using Catch::Matchers::Contains;
  using attnscope::testing::error_message;
  const std::string extra =
      fixture_with_extra_tensor("smollm", "extra_tensor", "model.layers.1.self_attn.q_proj.bias");
  CHECK_THAT(error_message<attnscope::io_error>([&] { attnscope::model::load_huggingface_model(extra); }),
             Contains("tensor 'model.layers.1.self_attn.q_proj.bias' is not used") && Contains("'llama'") &&
                 Contains(extra));
  // A Gemma folder declared as Llama: the post norms are unknown to the Llama table.
  const std::string mislabeled = fixture_with_config("gemma2", "gemma_as_llama", {{"model_type", "llama"},
                                                                                  {"hidden_act", "silu"}});
  CHECK_THAT(error_message<attnscope::io_error>([&] { attnscope::model::load_huggingface_model(mislabeled); }),
             Contains("is not used by config.json's model_type 'llama'"));
  // The buffers real checkpoints carry load: rotary_emb.inv_freq (llama_rope), GPT-NeoX's attention.bias,
  // masked_bias and rotary_emb.inv_freq, GPT-2's attn.bias and masked_bias.
  CHECK_NOTHROW(attnscope::model::load_huggingface_model(hf_fixture_folder("llama_rope")));
  CHECK_NOTHROW(attnscope::model::load_huggingface_model(hf_fixture_folder("gpt_neox")));
  CHECK_NOTHROW(attnscope::model::load_huggingface_model(hf_fixture_folder("gpt2")));
}

TEST_CASE("unsupported config values of the new families are refused, naming config.json and the field") {
  using Catch::Matchers::Contains;
  using attnscope::testing::error_message;
  const auto message = [](const std::string& fixture, const std::string& case_name, const nlohmann::json& changes) {
    const std::string folder = fixture_with_config(fixture, case_name, changes);
    return error_message<attnscope::io_error>([&] { attnscope::model::load_huggingface_model(folder); });
  };
  CHECK_THAT(message("llama_rope", "rope_su", {{"rope_scaling", {{"rope_type", "su"}, {"factor", 2.0}}}}),
             Contains("config.json") && Contains("rope_type 'su'") && Contains("not supported"));
  CHECK_THAT(message("llama_rope", "llama3_incomplete", {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}}}),
             Contains("config.json") && Contains("low_freq_factor"));
  CHECK_THAT(message("phi3", "longrope_short", {{"rope_scaling", {{"type", "longrope"}, {"short_factor", {1.0}},
                                                                   {"long_factor", {1.0}}}}}),
             Contains("short_factor") && Contains("expected 6"));
  CHECK_THAT(message("gemma2", "gemma_gelu", {{"hidden_activation", "gelu"}}), Contains("hidden_activation 'gelu'"));
  CHECK_THAT(message("gemma3", "gemma3_multimodal", {{"model_type", "gemma3"}}), Contains("gemma3_text"));
  CHECK_THAT(message("gemma2", "layer_types", {{"layer_types", {"sliding_attention", "chunked_attention"}}}),
             Contains("chunked_attention"));
  CHECK_THAT(message("gpt_neox", "neox_act", {{"hidden_act", "gelu_fast"}}), Contains("hidden_act 'gelu_fast'"));
  CHECK_THAT(message("olmo2", "olmo_clip", {{"clip_qkv", 8.0}}), Contains("clip_qkv"));
  CHECK_THAT(message("qwen3", "qwen3_bias", {{"attention_bias", true}}), Contains("attention_bias = true"));
  CHECK_THAT(message("phi3", "phi3_rotary", {{"partial_rotary_factor", 0.1}}), Contains("partial_rotary_factor"));
}

TEST_CASE("families: generation with the cache equals the argmax of full forwards; a prefix is the prefix") {
  for (const std::string& name : family_fixtures) {
    INFO("fixture " << name);
    const Transformer& model = hf_fixture_model(name);
    // within the lengths where the RoPE frequencies do not depend on the length (longrope switches at 16)
    const std::vector<int> prefix = {5, 77, 200};
    const int steps = name == "phi3" ? 10 : 30;
    const auto generated = model.generate_greedy(prefix, steps);
    const auto logits = model.forward(generated).logits;
    int mismatches = 0;
    for (std::size_t p = prefix.size() - 1; p + 1 < generated.size(); ++p)
      mismatches += attnscope::model::argmax_token(logits.row(long(p))) != generated[p + 1];
    CHECK(mismatches == 0);
    const std::vector<int> head(generated.begin(), generated.begin() + 9);
    CHECK((model.forward(head).logits - logits.topRows(9)).cwiseAbs().maxCoeff() < 1e-4);
  }
}
