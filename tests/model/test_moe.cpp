// The Mixture-of-Experts families (gpt-oss with learned sinks, Mixtral, Qwen3-MoE, OLMoE): every fixture of
// tests/fixtures/hf/ agrees with the independent plain-PyTorch float64 reference of tests/fixtures/make_moe_fixtures.py
// (logits to 1e-4 of each row's largest value, attention and the learned sink's share to 1e-5, the chosen experts
// exactly and their weights to 1e-5); switching off any feature the fixtures exercise misses the reference (so the
// agreement is not vacuous); the streaming statistics of a model with learned sinks equal its dense captures; the
// configs map to the documented flags; bad MoE configs are refused by name.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <Eigen/Eigenvalues>

#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/hf_fixtures.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::model::ForwardOptions;
using attnscope::model::ForwardResult;
using attnscope::model::Transformer;
using attnscope::model::TransformerWeights;
using attnscope::testing::hf_fixture_folder;
using attnscope::testing::hf_fixture_model;

// The reference of one MoE fixture: the dense members plus the learned sink shares and the routing per layer.
struct MoeReference {
  attnscope::testing::HfReference dense;
  std::vector<RowMatrix<double>> learned_sink;            // [layer]: heads × L (gpt-oss only)
  std::vector<RowMatrix<double>> router_logits, expert_weights;  // [layer]: L × E, L × k (sparse layers)
  std::vector<RowMatrix<double>> experts;                  // [layer]: L × k expert indices
};

MoeReference read_moe_reference_file(const std::string& path) {
  MoeReference reference;
  const auto arrays = attnscope::io::read_npz(path);
  reference.dense.tokens = arrays.at("tokens").to_vector<std::int64_t>();
  reference.dense.logits = arrays.at("logits").to_matrix<double>();
  for (int layer = 0; arrays.count("layer" + std::to_string(layer) + ".attention") != 0; ++layer) {
    const std::string at = "layer" + std::to_string(layer) + ".";
    const attnscope::io::Array& heads = arrays.at(at + "attention");
    reference.dense.attention.emplace_back();
    for (std::int64_t head = 0; head < heads.shape()[0]; ++head)
      reference.dense.attention.back().push_back(heads.slice_matrix<double>({head}));
    const auto member = [&](const std::string& key) {
      return arrays.count(at + key) ? arrays.at(at + key).to_matrix<double>() : RowMatrix<double>();
    };
    reference.learned_sink.push_back(member("learned_sink"));
    reference.router_logits.push_back(member("router_logits"));
    reference.experts.push_back(member("experts"));
    reference.expert_weights.push_back(member("expert_weights"));
  }
  return reference;
}

MoeReference read_moe_reference(const std::string& name, const std::string& variant = "") {
  return read_moe_reference_file(hf_fixture_folder(name) + "/reference" + (variant.empty() ? "" : "." + variant) +
                                 ".npz");
}

// The worst gaps of a model to a reference; +inf when something the reference has is missing.
struct MoeGap {
  double logits = 0, attention = 0, learned_sink = 0, expert_weights = 0, router_logits = 0;
  Index expert_mismatches = 0;
};

MoeGap gap_to_reference(const Transformer& model, const MoeReference& reference) {
  const double infinity = std::numeric_limits<double>::infinity();
  const std::vector<int> tokens(reference.dense.tokens.begin(), reference.dense.tokens.end());
  ForwardOptions options;
  options.capture.attention = true;
  options.capture.routing = true;
  const ForwardResult result = model.forward(tokens, options);
  MoeGap gap;
  gap.logits = attnscope::testing::hf_logits_error(result.logits, reference.dense.logits);
  for (std::size_t layer = 0; layer < reference.dense.attention.size(); ++layer) {
    const auto& captured = result.layers[layer];
    for (std::size_t head = 0; head < reference.dense.attention[layer].size(); ++head)
      gap.attention = std::max(gap.attention, attnscope::testing::hf_attention_error(
                                                  captured.attention[head], reference.dense.attention[layer][head]));
    const RowMatrix<double>& sinks = reference.learned_sink[layer];
    if (sinks.size() > 0) {
      if (captured.learned_sink.size() != std::size_t(sinks.rows())) gap.learned_sink = infinity;
      for (Index head = 0; head < sinks.rows() && gap.learned_sink < infinity; ++head)
        gap.learned_sink = std::max(gap.learned_sink,
                                    (captured.learned_sink[std::size_t(head)].transpose() - sinks.row(head))
                                        .cwiseAbs()
                                        .maxCoeff());
    } else if (!captured.learned_sink.empty()) {
      gap.learned_sink = infinity;
    }
    const RowMatrix<double>& experts = reference.experts[layer];
    if (experts.size() == 0) {
      if (captured.routing.experts.size() != 0) gap.expert_mismatches += 1;
      continue;
    }
    if (captured.routing.experts.rows() != experts.rows() || captured.routing.experts.cols() != experts.cols()) {
      gap.expert_mismatches += experts.size();
      continue;
    }
    for (Index t = 0; t < experts.rows(); ++t)
      for (Index j = 0; j < experts.cols(); ++j)
        if (captured.routing.experts(t, j) != static_cast<int>(experts(t, j))) ++gap.expert_mismatches;
    gap.expert_weights =
        std::max(gap.expert_weights, (captured.routing.weights - reference.expert_weights[layer]).cwiseAbs().maxCoeff());
    gap.router_logits = std::max(gap.router_logits, attnscope::testing::hf_logits_error(
                                                        captured.routing.router_logits, reference.router_logits[layer]));
  }
  return gap;
}

// The reference's variants (variants.json: {"<variant>": {config field: value}}), as scratch folders.
std::vector<std::pair<std::string, std::string>> variants_of(const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string path = hf_fixture_folder(name) + "/variants.json";
  if (!std::filesystem::exists(path)) return out;
  const nlohmann::json variants = attnscope::testing::read_json_file(path);
  for (const auto& [variant, changes] : variants.items()) {
    out.emplace_back(variant, attnscope::testing::fixture_with_config(name, "moe_" + name + "_" + variant, changes));
  }
  return out;
}

const std::vector<std::string> moe_fixtures = {"gpt_oss", "gpt_oss_mxfp4", "mixtral", "qwen3_moe", "olmoe"};

void require_agreement(const MoeGap& gap, const std::string& what) {
  INFO(what << ": logits " << gap.logits << ", attention " << gap.attention << ", learned sink " << gap.learned_sink
            << ", expert weights " << gap.expert_weights << ", router logits " << gap.router_logits
            << ", expert mismatches " << gap.expert_mismatches);
  CHECK(gap.logits <= attnscope::testing::hf_logits_relative_tolerance);
  CHECK(gap.attention <= attnscope::testing::hf_attention_tolerance);
  CHECK(gap.learned_sink <= 1e-5);
  CHECK(gap.expert_mismatches == 0);
  CHECK(gap.expert_weights <= 1e-5);
  CHECK(gap.router_logits <= 1e-4);
}

// Whether a changed model misses the reference (the feature it switched off mattered).
bool misses(const MoeGap& gap) {
  return gap.logits > attnscope::testing::hf_logits_relative_tolerance ||
         gap.attention > attnscope::testing::hf_attention_tolerance || gap.learned_sink > 1e-5 ||
         gap.expert_mismatches > 0 || gap.expert_weights > 1e-5;
}

Transformer changed(const std::string& name, const std::function<void(TransformerWeights&)>& change) {
  TransformerWeights weights = hf_fixture_model(name).weights();
  change(weights);
  return Transformer(std::move(weights));
}

}  // namespace

TEST_CASE("MoE fixtures agree with an independent PyTorch forward: logits, attention, learned sinks, routing") {
  for (const std::string& name : moe_fixtures) {
    require_agreement(gap_to_reference(hf_fixture_model(name), read_moe_reference(name)), name);
    for (const auto& [variant, folder] : variants_of(name))
      require_agreement(gap_to_reference(attnscope::model::load_huggingface_model(folder),
                                         read_moe_reference(name, variant)),
                        name + " variant " + variant);
  }
}

TEST_CASE("MoE fixtures: switching off any feature they exercise misses the reference") {
  using namespace attnscope::model;
  const MoeReference gpt_oss = read_moe_reference("gpt_oss");
  const auto check = [](const std::string& what, const Transformer& model, const MoeReference& reference) {
    INFO(what);
    CHECK(misses(gap_to_reference(model, reference)));
  };
  check("gpt_oss without learned sinks", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.learned_sinks = false;
          for (auto& layer : w.layers) layer.sinks.resize(0);
        }), gpt_oss);
  check("gpt_oss without sliding windows", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.layer_sliding_window.clear();
        }), gpt_oss);
  check("gpt_oss with yarn truncated", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.rope_scaling.truncate = true;
        }), gpt_oss);
  check("gpt_oss without the router bias", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.moe.router_bias = false;
          for (auto& layer : w.layers) layer.moe.router_bias.resize(0);
        }), gpt_oss);
  check("gpt_oss without the clamp", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.moe.swiglu_limit = 1e30;
        }), gpt_oss);
  check("gpt_oss with gate|up halves instead of interleaved", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.moe.interleaved_gate_up = false;
        }), gpt_oss);
  check("gpt_oss with softmax over all experts first", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.moe.routing = RoutingKind::softmax_then_top_k;
          w.config.moe.renormalize = false;
        }), gpt_oss);
  check("gpt_oss without expert biases", changed("gpt_oss", [](TransformerWeights& w) {
          w.config.moe.expert_bias = false;
          for (auto& layer : w.layers)
            for (auto& expert : layer.moe.experts) expert.gate_up_bias.resize(0), expert.down_bias.resize(0);
        }), gpt_oss);
  const MoeReference mixtral = read_moe_reference("mixtral");
  check("mixtral without renormalisation", changed("mixtral", [](TransformerWeights& w) {
          w.config.moe.renormalize = false;
        }), mixtral);
  check("mixtral with top-1", changed("mixtral", [](TransformerWeights& w) { w.config.moe.experts_per_token = 1; }),
        mixtral);
  const MoeReference qwen3_moe = read_moe_reference("qwen3_moe");
  check("qwen3_moe without renormalisation", changed("qwen3_moe", [](TransformerWeights& w) {
          w.config.moe.renormalize = !w.config.moe.renormalize;
        }), qwen3_moe);
  check("qwen3_moe without q/k norms", changed("qwen3_moe", [](TransformerWeights& w) {
          w.config.query_key_norm = QueryKeyNorm::none;
          for (auto& layer : w.layers) layer.q_norm.resize(0), layer.k_norm.resize(0);
        }), qwen3_moe);
  const MoeReference olmoe = read_moe_reference("olmoe");
  check("olmoe without clip_qkv", changed("olmoe", [](TransformerWeights& w) { w.config.clip_qkv = 0; }), olmoe);
  check("olmoe with renormalisation", changed("olmoe", [](TransformerWeights& w) {
          w.config.moe.renormalize = true;
        }), olmoe);
  check("olmoe without q/k norms", changed("olmoe", [](TransformerWeights& w) {
          w.config.query_key_norm = QueryKeyNorm::none;
          for (auto& layer : w.layers) layer.q_norm.resize(0), layer.k_norm.resize(0);
        }), olmoe);
}

TEST_CASE("MoE MXFP4 from Hugging Face: the repacked experts hold the values of integrations/mxfp4.py's dequantization") {
  const Transformer& model = hf_fixture_model("gpt_oss_mxfp4");
  const auto arrays = attnscope::io::read_npz(hf_fixture_folder("gpt_oss_mxfp4") + "/dequantized_experts.npz");
  const attnscope::model::ExpertWeights& expert = model.weights().layers[0].moe.experts[0];
  CHECK(expert.gate_up.format() == attnscope::kernels::StoredFloat::mxfp4);
  // the file holds Hugging Face's [in, out] layout; the model's matrices are out × in
  const RowMatrix<double> gate_up = arrays.at("gate_up_proj").to_matrix<double>();
  const RowMatrix<double> down = arrays.at("down_proj").to_matrix<double>();
  CHECK(expert.gate_up.to_float32().cast<double>() == RowMatrix<double>(gate_up.transpose()));
  CHECK(expert.down.to_float32().cast<double>() == RowMatrix<double>(down.transpose()));
  // without quantization_config the folder is read as BF16: the missing gate_up_proj is named
  const std::string folder = attnscope::testing::scratch_copy_of_fixture("gpt_oss_mxfp4", "moe_mxfp4_missing");
  attnscope::testing::write_json_file(folder + "/config.json", [&] {
    auto config = attnscope::testing::read_json_file(folder + "/config.json");
    config.erase("quantization_config");
    return config;
  }());
  CHECK(attnscope::testing::error_message<attnscope::io_error>([&] {
          attnscope::model::load_huggingface_model(folder);
        }).find("gate_up_proj") != std::string::npos);
}

TEST_CASE("MoE GGUF: gpt-oss with MXFP4 experts agrees with its truncating-YaRN reference") {
  const std::string gguf = (std::filesystem::path(hf_fixture_folder("gpt_oss")).parent_path().parent_path() / "gguf").string();
  const Transformer model = attnscope::model::load_gguf_model(gguf + "/gpt_oss_mxfp4.gguf");
  const attnscope::model::TransformerConfig& c = model.config();
  CHECK(c.learned_sinks);
  CHECK(c.rope_scaling.kind == attnscope::model::RopeScalingKind::yarn);
  CHECK(c.rope_scaling.truncate);  // llama.cpp rounds the ramp's ends whatever the Hugging Face config said
  CHECK(c.window_of_layer(0) > 0);
  CHECK(c.window_of_layer(1) == 0);
  CHECK(model.weights().layers[0].moe.experts[0].gate.format() == attnscope::kernels::StoredFloat::mxfp4);
  const MoeReference reference = read_moe_reference_file(gguf + "/gpt_oss_mxfp4_reference.npz");
  require_agreement(gap_to_reference(model, reference), "gpt_oss_mxfp4.gguf");
  // the Hugging Face reading (truncate false) misses the file's reference
  TransformerWeights untruncated = model.weights();
  untruncated.config.rope_scaling.truncate = false;
  CHECK(misses(gap_to_reference(Transformer(std::move(untruncated)), reference)));
}

TEST_CASE("MoE configs map to the shared TransformerConfig") {
  using namespace attnscope::model;
  const TransformerConfig& oss = hf_fixture_model("gpt_oss").config();
  CHECK(oss.learned_sinks);
  CHECK(oss.attention_qkv_bias);
  CHECK(oss.attention_output_bias);
  CHECK(oss.query_dim() != oss.dim);
  CHECK(oss.rope_scaling.kind == RopeScalingKind::yarn);
  CHECK_FALSE(oss.rope_scaling.truncate);
  CHECK(oss.window_of_layer(0) > 0);
  CHECK(oss.window_of_layer(1) == 0);
  CHECK(oss.moe.routing == RoutingKind::top_k_then_softmax);
  CHECK(oss.moe.router_bias);
  CHECK(oss.moe.expert_bias);
  CHECK(oss.moe.interleaved_gate_up);
  CHECK(oss.moe.activation == ExpertActivation::clamped_swiglu);
  CHECK(oss.moe.swiglu_alpha == 1.702);
  const TransformerConfig& mixtral = hf_fixture_model("mixtral").config();
  CHECK(mixtral.moe.routing == RoutingKind::softmax_then_top_k);
  CHECK(mixtral.moe.renormalize);
  CHECK_FALSE(mixtral.learned_sinks);
  const TransformerConfig& qwen = hf_fixture_model("qwen3_moe").config();
  CHECK(qwen.query_key_norm == QueryKeyNorm::per_head);
  CHECK_FALSE(qwen.moe.is_sparse(0));  // mlp_only_layers [0]
  CHECK(qwen.moe.is_sparse(1));
  const TransformerConfig& olmoe = hf_fixture_model("olmoe").config();
  CHECK(olmoe.query_key_norm == QueryKeyNorm::full_width);
  CHECK(olmoe.clip_qkv > 0);
  CHECK_FALSE(olmoe.moe.renormalize);
}

TEST_CASE("gpt-oss streaming statistics equal the dense capture: sink share, first-token mass, entropies, exact norm") {
  const Transformer& model = hf_fixture_model("gpt_oss");
  const MoeReference reference = read_moe_reference("gpt_oss");
  const std::vector<int> tokens(reference.dense.tokens.begin(), reference.dense.tokens.end());
  ForwardOptions dense_options;
  dense_options.capture.attention = true;
  const ForwardResult dense = model.forward(tokens, dense_options);
  attnscope::model::StreamingOptions streaming;
  streaming.statistics.top_k = {1, 4};
  streaming.query_block = 7;
  const attnscope::model::StreamingForwardResult streamed = model.forward_row_statistics(tokens, {}, streaming);
  CHECK((streamed.logits - dense.logits).cwiseAbs().maxCoeff() <= 1e-5f);
  for (int layer = 0; layer < model.config().n_layers; ++layer)
    for (int head = 0; head < model.config().n_heads; ++head) {
      const auto& statistics = streamed.row_statistics[std::size_t(layer)][std::size_t(head)];
      const RowMatrix<float>& attention = dense.layers[std::size_t(layer)].attention[std::size_t(head)];
      const attnscope::Vector<double>& sigma = dense.layers[std::size_t(layer)].learned_sink[std::size_t(head)];
      REQUIRE(statistics.learned_sink.size() == Index(tokens.size()));
      for (Index i = 0; i < Index(tokens.size()); ++i) {
        CHECK(statistics.learned_sink(i) == sigma(i));  // the same kernel pass, bit for bit
        CHECK(std::abs(statistics.sink_mass(i) - attention(i, 0)) <= 1e-7);
        CHECK(std::abs(statistics.max_weight(i) - attention.row(i).maxCoeff()) <= 1e-7);
        CHECK(std::abs(1.0 - sigma(i) - attention.row(i).cast<double>().sum()) <= 1e-6);
        std::vector<double> p;
        for (Index j = 0; j <= i; ++j)
          if (attention(i, j) > 0) p.push_back(attention(i, j));
        double composition = sigma(i) > 0 ? -sigma(i) * std::log(sigma(i)) : 0.0;
        for (const double value : p) composition -= value * std::log(value);
        CHECK(std::abs(statistics.entropy_with_sink(i) - composition) <= 1e-5);
        Eigen::MatrixXd jacobian = -Eigen::Map<const Eigen::VectorXd>(p.data(), Index(p.size())) *
                                   Eigen::Map<const Eigen::VectorXd>(p.data(), Index(p.size())).transpose();
        for (std::size_t t = 0; t < p.size(); ++t) jacobian(Index(t), Index(t)) += p[t];
        const double norm =
            Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(jacobian, Eigen::EigenvaluesOnly).eigenvalues().maxCoeff();
        CHECK(std::abs(statistics.jacobian_norm(i) - norm) <= 1e-6);
      }
    }
}

TEST_CASE("MoE configs: bad fields are refused, naming config.json and the field") {
  const auto load_error = [](const std::string& name, const std::string& case_name, const nlohmann::json& changes) {
    const std::string folder = attnscope::testing::fixture_with_config(name, case_name, changes);
    return attnscope::testing::error_message<attnscope::io_error>(
        [&] { attnscope::model::load_huggingface_model(folder); });
  };
  CHECK(load_error("mixtral", "moe_topk", {{"num_experts_per_tok", 9}}).find("exceeds num_local_experts") !=
        std::string::npos);
  CHECK(load_error("mixtral", "moe_no_experts", {{"num_local_experts", nullptr}}).find("num_local_experts") !=
        std::string::npos);
  CHECK(load_error("qwen3_moe", "moe_dense_layers", {{"mlp_only_layers", {7}}}).find("mlp_only_layers") !=
        std::string::npos);
  CHECK(load_error("gpt_oss", "moe_quantized", {{"quantization_config", {{"quant_method", "gptq"}}}})
            .find("quant_method") != std::string::npos);
  CHECK(load_error("olmoe", "moe_clip", {{"clip_qkv", -1}}).find("clip_qkv") != std::string::npos);
}
