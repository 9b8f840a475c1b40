// GGUF models (model/gguf.hpp): the Hugging Face fixtures converted to GGUF F32, F16 and BF16 as llama.cpp's
// converter does (llama.cpp's tensor names and keys; Llama's Q/K rows permuted per head to interleaved pairs) give the
// safetensors model's attention and logits to float32 rounding; the numpy-written Q8_0 and Q4_K models stay within
// an attention error bound derived from their quantization steps; block-format weights are views of the file,
// dequantized per panel by the product; every loader error names the file and the key or tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/gguf.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/kernels/dequantize.hpp"
#include "attnscope/model/detail/linear.hpp"
#include "attnscope/model/gguf.hpp"
#include "attnscope/model/load.hpp"
#include "attnscope/model/rope.hpp"
#include "fixtures/gguf_bounds.hpp"
#include "fixtures/gguf_fixtures.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::io::GgmlType;
using attnscope::io::GgufType;
using attnscope::io::GgufValue;
using attnscope::model::Transformer;
using attnscope::model::TransformerWeights;
using attnscope::model::WeightMatrix;
using attnscope::testing::error_message;
using attnscope::testing::gguf_fixture;
using Catch::Matchers::Contains;

/// A GGUF file in the making: metadata and tensors, editable before it is written.
struct GgufDraft {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<attnscope::io::GgufTensorBytes> tensors;

  void set(const std::string& key, GgufType type, double number) {
    GgufValue v;
    v.type = type;
    v.real = number;
    v.integer = static_cast<std::int64_t>(number);
    v.unsigned_integer = static_cast<std::uint64_t>(v.integer);
    metadata.emplace_back(key, v);
  }
  void set_text(const std::string& key, const std::string& text) {
    GgufValue v;
    v.type = GgufType::string;
    v.text = text;
    metadata.emplace_back(key, v);
  }
  void remove_key(const std::string& key) {
    metadata.erase(std::remove_if(metadata.begin(), metadata.end(), [&](const auto& e) { return e.first == key; }),
                   metadata.end());
  }
  void remove_tensor(const std::string& name) {
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const auto& t) { return t.name == name; }),
                  tensors.end());
  }
  attnscope::io::GgufTensorBytes& tensor(const std::string& name) {
    for (auto& t : tensors)
      if (t.name == name) return t;
    FAIL("no tensor " << name);
    return tensors.front();
  }
  /// Writes the file under the build directory and returns its path.
  std::string write(const std::string& file_name) const {
    const std::filesystem::path folder = std::filesystem::path(ATTNSCOPE_BINARY_DIR) / "gguf_test_files";
    std::filesystem::create_directories(folder);
    const std::string path = (folder / file_name).string();
    attnscope::io::write_file(path, attnscope::io::serialize_gguf(metadata, tensors));
    return path;
  }
};

/// The bytes of a float32 row-major matrix in GGUF type f32, f16 or bf16 (round to nearest even).
std::string gguf_float_bytes(const RowMatrix<float>& m, GgmlType type) {
  std::string out;
  for (Index i = 0; i < m.size(); ++i) {
    const float value = m.data()[i];
    char bytes[4];
    if (type == GgmlType::f32) {
      std::memcpy(bytes, &value, 4);
      out.append(bytes, 4);
    } else if (type == GgmlType::f16) {
      const Eigen::half h(value);
      std::memcpy(bytes, &h, 2);
      out.append(bytes, 2);
    } else {
      const Eigen::bfloat16 b(value);
      std::memcpy(bytes, &b, 2);
      out.append(bytes, 2);
    }
  }
  return out;
}

/// convert_hf_to_gguf.py's Llama permutation of Q/K rows: within each head of d rows, row j·d/2 + i moves to 2i + j.
RowMatrix<float> permute_rope_rows(const RowMatrix<float>& w, int heads) {
  const Index d = w.rows() / heads;
  RowMatrix<float> out(w.rows(), w.cols());
  for (Index h = 0; h < heads; ++h)
    for (Index i = 0; i < d / 2; ++i)
      for (Index j = 0; j < 2; ++j) out.row(h * d + 2 * i + j) = w.row(h * d + j * d / 2 + i);
  return out;
}

/// Rows of several matrices stacked (the fused projections llama.cpp stores).
RowMatrix<float> gguf_stacked(std::initializer_list<RowMatrix<float>> parts) {
  Index rows = 0;
  for (const auto& p : parts) rows += p.rows();
  RowMatrix<float> out(rows, parts.begin()->cols());
  Index at = 0;
  for (const auto& p : parts) {
    out.middleRows(at, p.rows()) = p;
    at += p.rows();
  }
  return out;
}

attnscope::Vector<float> gguf_stacked(std::initializer_list<attnscope::Vector<float>> parts) {
  Index size = 0;
  for (const auto& p : parts) size += p.size();
  attnscope::Vector<float> out(size);
  Index at = 0;
  for (const auto& p : parts) {
    out.segment(at, p.size()) = p;
    at += p.size();
  }
  return out;
}

/// A model as llama.cpp's converter (convert_hf_to_gguf.py) writes it: `{arch}.*` keys, llama.cpp's tensor names,
/// weight matrices in `type`, norms and biases F32, output.weight absent when the head is tied, and the
/// architecture's conventions: llama's Q/K rows permuted per head; gemma2's norms stored as 1 + w; phi3's fused
/// attn_qkv and ffn_up (gate rows first); gpt_neox's fused attn_qkv regrouped as all q, all k, all v (TransformerWeights
/// already holds the separate q, k, v, so stacking them is that regrouping).
GgufDraft gguf_conversion(const TransformerWeights& w, const std::string& arch, GgmlType type) {
  const auto& c = w.config;
  GgufDraft draft;
  draft.set_text("general.architecture", arch);
  draft.set(arch + ".context_length", GgufType::uint32, c.seq_len);
  draft.set(arch + ".embedding_length", GgufType::uint32, c.dim);
  draft.set(arch + ".block_count", GgufType::uint32, c.n_layers);
  draft.set(arch + ".feed_forward_length", GgufType::uint32, c.hidden_dim);
  draft.set(arch + ".attention.head_count", GgufType::uint32, c.n_heads);
  draft.set(arch + ".attention.head_count_kv", GgufType::uint32, c.n_kv_heads);
  draft.set(arch + ".attention.key_length", GgufType::uint32, c.head_dim);
  draft.set(arch + (arch == "gpt_neox" ? ".attention.layer_norm_epsilon" : ".attention.layer_norm_rms_epsilon"),
            GgufType::float32, c.norm_epsilon);
  draft.set(arch + ".rope.freq_base", GgufType::float32, c.rope_theta);
  draft.set(arch + ".rope.dimension_count", GgufType::uint32, c.rotary_size());
  if (arch == "gpt_neox") draft.set(arch + ".use_parallel_residual", GgufType::boolean, c.parallel_residual);
  if (c.sliding_window > 0) draft.set(arch + ".attention.sliding_window", GgufType::uint32, c.sliding_window);
  if (arch == "gemma2") {
    draft.set(arch + ".attention.sliding_window", GgufType::uint32, c.layer_sliding_window.at(0));
    draft.set(arch + ".attn_logit_softcapping", GgufType::float32, c.attention_softcap);
    draft.set(arch + ".final_logit_softcapping", GgufType::float32, c.final_logit_softcap);
  }
  const auto matrix = [&](const std::string& name, const RowMatrix<float>& m) {
    draft.tensors.push_back({name, {std::uint64_t(m.cols()), std::uint64_t(m.rows())}, type, gguf_float_bytes(m, type)});
  };
  const auto vector = [&](const std::string& name, const attnscope::Vector<float>& v) {
    if (v.size() == 0) return;
    RowMatrix<float> row = v.transpose();
    if (arch == "gemma2" && name.find("norm.weight") != std::string::npos) row.array() += 1.0f;
    draft.tensors.push_back({name, {std::uint64_t(v.size())}, GgmlType::f32, gguf_float_bytes(row, GgmlType::f32)});
  };
  matrix("token_embd.weight", w.token_embedding.to_float32());
  if (!c.tied_embeddings) matrix("output.weight", w.classifier.to_float32());
  vector("output_norm.weight", w.final_norm);
  vector("output_norm.bias", w.final_norm_bias);
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& layer = w.layers[std::size_t(l)];
    const std::string at = "blk." + std::to_string(l) + ".";
    vector(at + "attn_norm.weight", layer.attention_norm);
    vector(at + "attn_norm.bias", layer.attention_norm_bias);
    vector(at + "post_attention_norm.weight", layer.post_attention_norm);
    if (arch == "phi3" || arch == "gpt_neox") {
      matrix(at + "attn_qkv.weight", gguf_stacked({layer.wq.to_float32(), layer.wk.to_float32(), layer.wv.to_float32()}));
      if (layer.wq_bias.size() > 0) vector(at + "attn_qkv.bias", gguf_stacked({layer.wq_bias, layer.wk_bias, layer.wv_bias}));
    } else {
      const bool llama = arch == "llama";
      matrix(at + "attn_q.weight", llama ? permute_rope_rows(layer.wq.to_float32(), c.n_heads) : layer.wq.to_float32());
      matrix(at + "attn_k.weight",
             llama ? permute_rope_rows(layer.wk.to_float32(), c.n_kv_heads) : layer.wk.to_float32());
      matrix(at + "attn_v.weight", layer.wv.to_float32());
      vector(at + "attn_q.bias", layer.wq_bias);
      vector(at + "attn_k.bias", layer.wk_bias);
      vector(at + "attn_v.bias", layer.wv_bias);
    }
    vector(at + "attn_q_norm.weight", layer.q_norm);
    vector(at + "attn_k_norm.weight", layer.k_norm);
    matrix(at + "attn_output.weight", layer.wo.to_float32());
    vector(at + "attn_output.bias", layer.wo_bias);
    vector(at + "ffn_norm.weight", layer.ffn_norm);
    vector(at + "ffn_norm.bias", layer.ffn_norm_bias);
    vector(at + "post_ffw_norm.weight", layer.post_ffn_norm);
    if (arch == "phi3") {
      matrix(at + "ffn_up.weight", gguf_stacked({layer.w1.to_float32(), layer.w3.to_float32()}));
    } else if (arch == "gpt_neox") {
      matrix(at + "ffn_up.weight", layer.w1.to_float32());
      vector(at + "ffn_up.bias", layer.w1_bias);
    } else {
      matrix(at + "ffn_gate.weight", layer.w1.to_float32());
      matrix(at + "ffn_up.weight", layer.w3.to_float32());
    }
    matrix(at + "ffn_down.weight", layer.w2.to_float32());
    vector(at + "ffn_down.bias", layer.w2_bias);
  }
  return draft;
}

const Transformer& gguf_safetensors_model(const std::string& name) {
  static std::map<std::string, Transformer> models;
  auto found = models.find(name);
  if (found == models.end())
    found = models.emplace(name, attnscope::model::load_huggingface_model(attnscope::testing::hf_fixture_folder(name)))
                .first;
  return found->second;
}

std::vector<int> gguf_reference_tokens(const std::string& name) {
  const auto reference = attnscope::testing::read_hf_reference(name);
  return std::vector<int>(reference.tokens.begin(), reference.tokens.end());
}

attnscope::model::ForwardOptions gguf_capture_options() {
  attnscope::model::ForwardOptions options;
  options.capture.attention = true;
  options.capture.q = options.capture.k = true;
  return options;
}

double gguf_max_attention_difference(const attnscope::model::ForwardResult& a,
                                     const attnscope::model::ForwardResult& b) {
  double worst = 0;
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    for (std::size_t h = 0; h < a.layers[l].attention.size(); ++h)
      worst = std::max(worst, double((a.layers[l].attention[h] - b.layers[l].attention[h]).cwiseAbs().maxCoeff()));
  return worst;
}

/// Per head, the largest ratio |Δp_ij| / (R_i + 1e-6) of layer 0's attention change between the quantized model and
/// the reference to the score bound R_i = max_j B_ij of attnscope::testing::gguf_layer0_score_bounds (1e-6: the float32
/// rounding of the two forward passes). Along s + tΔ, dp/dt = diag(p)Δ − p pᵀΔ has ‖·‖₁ = Σ_j p_j |Δ_j − pᵀΔ| ≤
/// max_j Δ_j − min_j Δ_j, so ‖Δp_i‖₁ ≤ 2 max_j B_ij; and since Σ_j Δp_ij = 0, every |Δp_ij| ≤ ½‖Δp_i‖₁ ≤ R_i
/// [derived]. `bounds`: R_i of every row and head; `largest_change`: the largest |Δp_ij| measured.
std::vector<double> gguf_layer0_bound_ratios(const std::string& quantized_path, const Transformer& quantized,
                                             const Transformer& reference, const std::vector<int>& tokens,
                                             std::vector<double>& bounds, double& largest_change) {
  const std::vector<std::vector<double>> row_bounds =
      attnscope::testing::gguf_layer0_score_bounds(quantized_path, quantized, reference, tokens);
  const auto result_q = quantized.forward(tokens, gguf_capture_options());
  const auto result_r = reference.forward(tokens, gguf_capture_options());
  std::vector<double> ratios;
  bounds.clear();
  largest_change = 0;
  for (std::size_t h = 0; h < row_bounds.size(); ++h) {
    const RowMatrix<double> difference =
        (result_q.layers[0].attention[h] - result_r.layers[0].attention[h]).cast<double>();
    double ratio = 0;
    for (Index i = 0; i < difference.rows(); ++i) {
      const double bound = row_bounds[h][std::size_t(i)];
      bounds.push_back(bound);
      largest_change = std::max(largest_change, difference.row(i).cwiseAbs().maxCoeff());
      ratio = std::max(ratio, difference.row(i).cwiseAbs().maxCoeff() / (bound + 1e-6));
    }
    ratios.push_back(ratio);
  }
  return ratios;
}

}  // namespace

TEST_CASE("GGUF: F32, F16 and BF16 conversions of the fixtures give the safetensors captures to float32 rounding",
          "[model][gguf]") {
  struct Case {
    const char* fixture;
    GgmlType type;
  };
  // llama is stored in BF16 and qwen2 in F16: those conversions hold exactly the stored values
  for (const Case& test : {Case{"llama", GgmlType::f32}, Case{"llama", GgmlType::bf16}, Case{"qwen2", GgmlType::f32},
                           Case{"qwen2", GgmlType::f16}}) {
    INFO(test.fixture << " as ggml type " << attnscope::io::ggml_type_info(std::uint32_t(test.type)).name);
    const Transformer& safetensors = gguf_safetensors_model(test.fixture);
    const std::string path = gguf_conversion(safetensors.weights(), test.fixture, test.type)
                                 .write(std::string(test.fixture) + "_" + std::to_string(int(test.type)) + ".gguf");
    const Transformer gguf = attnscope::model::load_gguf_model(path);
    const auto& c = gguf.config();
    CHECK(c.architecture == test.fixture);
    CHECK(c.position_encoding == (std::string(test.fixture) == "llama"
                                      ? attnscope::model::PositionEncoding::rope_interleaved
                                      : attnscope::model::PositionEncoding::rope_rotate_half));
    CHECK(c.tied_embeddings == safetensors.config().tied_embeddings);
    CHECK(c.attention_qkv_bias == safetensors.config().attention_qkv_bias);
    CHECK((c.dim == safetensors.config().dim && c.n_kv_heads == safetensors.config().n_kv_heads &&
           c.vocab_size == safetensors.config().vocab_size && c.rope_theta == safetensors.config().rope_theta &&
           c.norm_epsilon == safetensors.config().norm_epsilon && c.seq_len == safetensors.config().seq_len));
    // weights are views of the file in its stored type
    CHECK(gguf.weights().layers[1].w2.is_view());
    CHECK(gguf.weights().layers[1].w2.format() ==
          (test.type == GgmlType::f32 ? attnscope::kernels::StoredFloat::float32
           : test.type == GgmlType::f16 ? attnscope::kernels::StoredFloat::float16
                                        : attnscope::kernels::StoredFloat::bfloat16));
    const std::vector<int> tokens = gguf_reference_tokens(test.fixture);
    const auto expected = safetensors.forward(tokens, gguf_capture_options());
    const auto result = gguf.forward(tokens, gguf_capture_options());
    // The same weights and the same computation up to the order of float32 sums (panel vs one-call products,
    // interleaved vs rotate-half pairs): attention within 2e-6 absolute, logits within 1e-5 of each row's largest.
    const double attention = gguf_max_attention_difference(result, expected);
    CHECK(attention <= 2e-6);
    CHECK(attnscope::testing::hf_logits_error(result.logits, RowMatrix<double>(expected.logits.cast<double>())) <= 1e-5);
    // and the independent PyTorch reference of the fixture, to its tolerances
    const auto reference = attnscope::testing::read_hf_reference(test.fixture);
    CHECK(attnscope::testing::hf_logits_error(result.logits, reference.logits) <=
          attnscope::testing::hf_logits_relative_tolerance);
    // q and k norms per row are those of the safetensors model (llama's rows are a permutation within each head)
    for (std::size_t h = 0; h < expected.layers[0].q.size(); ++h)
      CHECK((result.layers[0].q[h].rowwise().norm() - expected.layers[0].q[h].rowwise().norm()).cwiseAbs().maxCoeff() <
            1e-4);
    // load_model recognises the file by its magic, whatever its name
    const std::string renamed = path + ".bin";
    std::filesystem::copy_file(path, renamed, std::filesystem::copy_options::overwrite_existing);
    CHECK(attnscope::model::load_model(renamed).forward(tokens).logits == result.logits);
  }
}

TEST_CASE("GGUF: Llama 3.1 rope scaling stored as rope_freqs.weight gives the safetensors capture", "[model][gguf]") {
  // llama_rope (rope_scaling llama3: factor 8, L₀ 64, frequencies in all three regimes) converted as
  // convert_hf_to_gguf.py does: no scaling keys, and the tensor rope_freqs.weight of per-frequency factors computed from
  // the config by the numpy script (tests/fixtures/make_gguf_fixtures.py, llama_rope_freqs.gguf).
  const Transformer& safetensors = gguf_safetensors_model("llama_rope");
  REQUIRE(safetensors.config().rope_scaling.kind == attnscope::model::RopeScalingKind::llama3);
  const attnscope::io::GgufFile freqs(gguf_fixture("llama_rope_freqs.gguf"));
  const attnscope::io::GgufTensor& t = freqs.tensor("rope_freqs.weight");
  const attnscope::io::GgufTensorBytes factors{"rope_freqs.weight", t.dims, GgmlType::f32,
                                               std::string(reinterpret_cast<const char*>(t.data), t.byte_count)};
  const auto conversion = [&] { return gguf_conversion(safetensors.weights(), "llama", GgmlType::bf16); };
  GgufDraft draft = conversion();
  draft.tensors.push_back(factors);
  const Transformer gguf = attnscope::model::load_gguf_model(draft.write("llama_rope.gguf"));
  const auto& c = gguf.config();
  CHECK(c.rope_scaling.kind == attnscope::model::RopeScalingKind::longrope);
  CHECK(c.rope_scaling.attention_factor == 1);
  // the frequencies are the llama3 formula's, to the float32 rounding of the stored factors
  const std::vector<int> tokens = gguf_reference_tokens("llama_rope");
  const Index L = Index(tokens.size());
  const auto expected_frequencies = attnscope::model::rope_frequencies(safetensors.config(), L);
  const auto frequencies = attnscope::model::rope_frequencies(c, L);
  REQUIRE(frequencies.inverse_frequency.size() == 8);
  for (std::size_t i = 0; i < 8; ++i)
    CHECK(std::abs(frequencies.inverse_frequency[i] - expected_frequencies.inverse_frequency[i]) <=
          2e-7 * expected_frequencies.inverse_frequency[i]);
  CHECK(frequencies.attention_factor == expected_frequencies.attention_factor);
  // the capture is the safetensors model's to float32 rounding
  const auto expected = safetensors.forward(tokens, gguf_capture_options());
  const auto result = gguf.forward(tokens, gguf_capture_options());
  CHECK(gguf_max_attention_difference(result, expected) <= 2e-6);
  CHECK(attnscope::testing::hf_logits_error(result.logits, RowMatrix<double>(expected.logits.cast<double>())) <= 1e-5);
  CHECK(attnscope::testing::hf_logits_error(result.logits, attnscope::testing::read_hf_reference("llama_rope").logits) <=
        attnscope::testing::hf_logits_relative_tolerance);
  // without the tensor the file is a model with plain RoPE, whose attention differs
  const Transformer plain = attnscope::model::load_gguf_model(conversion().write("llama_rope_plain.gguf"));
  CHECK(plain.config().rope_scaling.kind == attnscope::model::RopeScalingKind::none);
  CHECK(gguf_max_attention_difference(plain.forward(tokens, gguf_capture_options()), expected) > 1e-3);
  // bad factors are io_errors naming the file and the tensor
  const auto load_error = [&](attnscope::io::GgufTensorBytes bad, const std::string& file) {
    GgufDraft d = conversion();
    d.tensors.push_back(std::move(bad));
    const std::string path = d.write(file);
    const std::string message = error_message<attnscope::io_error>([&] { attnscope::model::load_gguf_model(path); });
    CHECK_THAT(message, Contains(path) && Contains("rope_freqs.weight"));
    return message;
  };
  attnscope::io::GgufTensorBytes negative = factors;
  const float minus_one = -1;
  std::memcpy(&negative.bytes[8], &minus_one, 4);
  CHECK_THAT(load_error(negative, "rope_negative.gguf"), Contains("factor -1 at index 2"));
  attnscope::io::GgufTensorBytes short_tensor = factors;
  short_tensor.dims = {4};
  short_tensor.bytes.resize(16);
  CHECK_THAT(load_error(short_tensor, "rope_short.gguf"), Contains("has dims {4}, expected {8}"));
}

TEST_CASE("GGUF: qwen3, gemma2, phi3 and gpt_neox conversions run as the safetensors model of the same configuration",
          "[model][gguf]") {
  // GGUF stores less configuration than config.json: the reference is the safetensors model with what llama.cpp's
  // keys cannot say reset (qwen3: no sliding layers; gemma2: the logit scale 1/√head_dim, Gemma 2's 2B/9B value,
  // where this fixture's query_pre_attn_scalar differs; phi3: no LongRoPE, whose factors llama.cpp stores as tensors
  // attnscope refuses).
  for (const std::string arch : {"qwen3", "gemma2", "phi3", "gpt_neox"}) {
    INFO(arch);
    TransformerWeights weights = attnscope::model::read_huggingface_weights(attnscope::testing::hf_fixture_folder(arch));
    auto& c = weights.config;
    if (arch == "qwen3") c.layer_sliding_window.clear();
    if (arch == "gemma2") c.attention_scale = 0;
    if (arch == "phi3") c.rope_scaling = attnscope::model::RopeScaling{};
    const std::string path = gguf_conversion(weights, arch, GgmlType::f32).write(arch + ".gguf");
    const Transformer reference(std::move(weights));
    const Transformer gguf = attnscope::model::load_gguf_model(path);
    CHECK(gguf.config().architecture == arch);
    CHECK(gguf.config().norm == (arch == "gpt_neox" ? attnscope::model::NormKind::layer_norm
                                                    : attnscope::model::NormKind::rms_norm));
    CHECK(gguf.config().rotary_size() == reference.config().rotary_size());
    CHECK(gguf.config().layer_sliding_window == reference.config().layer_sliding_window);
    CHECK(gguf.config().sliding_window == reference.config().sliding_window);
    const std::vector<int> tokens = gguf_reference_tokens(arch);
    const auto expected = reference.forward(tokens, gguf_capture_options());
    const auto result = gguf.forward(tokens, gguf_capture_options());
    CHECK(gguf_max_attention_difference(result, expected) <= 2e-6);
    CHECK(attnscope::testing::hf_logits_error(result.logits, RowMatrix<double>(expected.logits.cast<double>())) <= 1e-5);
  }
}

TEST_CASE("GGUF: models of every block type stay within the attention bound of their quantization steps",
          "[model][gguf]") {
  struct Case {
    std::string quantized, reference, name;
    float qk_scale = 1;  // the factor of the quantized file's attn_q and attn_k relative to the reference file's
  };
  // llama_q8_0.gguf: the llama fixture quantized by the numpy script (its own writer and Q8_0 quantizer, Q/K rows
  // permuted as convert_hf_to_gguf.py does); reference: the F32 conversion written here. llama_q4k.gguf: a one-layer
  // model with Q4_K q/k/gate, Q6_K v, Q5_K up, Q8_0 output and Q4_0 down; reference: the same weights in F16. The
  // other three: the same weights with q/k in Q2_K/Q3_K (q and k halved, so that the bound of these coarse grids
  // stays informative), Q4_1/Q5_0 and Q5_1/Q8_K (the name is q's type), and the remaining new types on v, output and
  // the feed-forward (tests/fixtures/make_gguf_fixtures.py).
  const Transformer& llama = gguf_safetensors_model("llama");
  const std::string llama_f32 = gguf_conversion(llama.weights(), "llama", GgmlType::f32).write("llama_reference.gguf");
  for (const Case& test : {Case{gguf_fixture("llama_q8_0.gguf"), llama_f32, "Q8_0"},
                           Case{gguf_fixture("llama_q4k.gguf"), gguf_fixture("llama_q4k_f16.gguf"), "Q4_K"},
                           Case{gguf_fixture("llama_q2k_q3k.gguf"), gguf_fixture("llama_q4k_f16.gguf"), "Q2_K", 0.5f},
                           Case{gguf_fixture("llama_q4_1_q5_0.gguf"), gguf_fixture("llama_q4k_f16.gguf"), "Q4_1"},
                           Case{gguf_fixture("llama_q5_1_q8_k.gguf"), gguf_fixture("llama_q4k_f16.gguf"), "Q5_1"}}) {
    INFO(test.name);
    const Transformer quantized = attnscope::model::load_gguf_model(test.quantized);
    attnscope::model::TransformerWeights reference_weights = attnscope::model::read_gguf_weights(test.reference);
    if (test.qk_scale != 1) {  // a power of two: the scaled F16 values are exact
      auto& layer = reference_weights.layers[0];
      layer.wq = WeightMatrix(RowMatrix<float>(layer.wq.to_float32() * test.qk_scale));
      layer.wk = WeightMatrix(RowMatrix<float>(layer.wk.to_float32() * test.qk_scale));
    }
    const Transformer reference(std::move(reference_weights));
    CHECK(quantized.weights().layers[0].wq.is_view());
    CHECK(std::string(attnscope::kernels::stored_float_name(quantized.weights().layers[0].wq.format())) == test.name);
    std::vector<int> tokens = test.name == "Q8_0" ? gguf_reference_tokens("llama") : std::vector<int>{};
    if (tokens.empty()) {
      attnscope::Random random(27);
      for (int i = 0; i < 40; ++i) tokens.push_back(int(random.uniform() * quantized.config().vocab_size));
    }
    std::vector<double> bounds;
    double largest_change = 0;
    const std::vector<double> ratios =
        gguf_layer0_bound_ratios(test.quantized, quantized, reference, tokens, bounds, largest_change);
    for (std::size_t h = 0; h < ratios.size(); ++h) {
      INFO("head " << h);
      CHECK(ratios[h] <= 1.0);
    }
    std::sort(bounds.begin(), bounds.end());
    const double median_bound = bounds[bounds.size() / 2];
    if (std::getenv("ATTNSCOPE_GGUF_BOUNDS") != nullptr)
      std::cerr << test.name << ": largest |dp| " << largest_change << ", bound median " << median_bound << ", max "
                << bounds.back() << ", largest ratio " << *std::max_element(ratios.begin(), ratios.end()) << "\n";
    // the bound says something on most rows (a probability moves by at most 1 anyway); it is a worst case over the
    // grid, about 100 times the change measured on these models (ATTNSCOPE_GGUF_BOUNDS=1 prints both)
    CHECK(median_bound < 1);
    // quantization does move the attention (the comparison is not of a model with itself) ...
    const auto a = quantized.forward(tokens, gguf_capture_options());
    const auto b = reference.forward(tokens, gguf_capture_options());
    CHECK(gguf_max_attention_difference(a, b) > 0);
    // ... and the model compared with itself moves nothing
    CHECK(gguf_max_attention_difference(a, quantized.forward(tokens, gguf_capture_options())) == 0);
  }
}

TEST_CASE("GGUF: block-format WeightMatrix views read, slice and multiply like their dequantized copies",
          "[model][gguf][weights]") {
  const auto file = std::make_shared<attnscope::io::GgufFile>(gguf_fixture("blocks.gguf"));
  const auto reference = attnscope::io::read_npz(gguf_fixture("blocks_reference.npz"));
  struct Case {
    const char* name;
    attnscope::kernels::StoredFloat format;
  };
  for (const Case& test : {Case{"Q8_0", attnscope::kernels::StoredFloat::q8_0},
                           Case{"Q4_0", attnscope::kernels::StoredFloat::q4_0},
                           Case{"Q4_K", attnscope::kernels::StoredFloat::q4_k},
                           Case{"Q5_K", attnscope::kernels::StoredFloat::q5_k},
                           Case{"Q6_K", attnscope::kernels::StoredFloat::q6_k},
                           Case{"Q4_1", attnscope::kernels::StoredFloat::q4_1},
                           Case{"Q5_0", attnscope::kernels::StoredFloat::q5_0},
                           Case{"Q5_1", attnscope::kernels::StoredFloat::q5_1},
                           Case{"Q2_K", attnscope::kernels::StoredFloat::q2_k},
                           Case{"Q3_K", attnscope::kernels::StoredFloat::q3_k},
                           Case{"Q8_K", attnscope::kernels::StoredFloat::q8_k}}) {
    INFO(test.name);
    const std::string name = std::string("quantized.") + test.name;
    const WeightMatrix w = WeightMatrix::view(test.format, file->tensor(name).data, 3, 512, file, name);
    const RowMatrix<float> expected = reference.at(name).to_matrix<float>();
    CHECK(w.to_float32() == expected);
    CHECK(w(2, 300) == expected(2, 300));
    CHECK(w(0, 511) == expected(0, 511));
    CHECK(w.middle_rows(1, 2).to_float32() == expected.bottomRows(2));
    CHECK(w.middle_cols(256, 256).to_float32() == expected.rightCols(256));
    CHECK_THAT(error_message([&] { (void)w.middle_cols(100, 32); }), Contains("do not start and end on blocks"));
    CHECK_THAT(error_message([&] { (void)w.transposed_view(); }), Contains("cannot be viewed transposed"));
    CHECK_THAT(error_message([&] { WeightMatrix::view(test.format, file->tensor(name).data, 3, 500, file, name); }),
               Contains("not whole"));
    // the panel product dequantizes per panel: equal to Eigen's product with the dequantized copy to float32 rounding
    RowMatrix<float> x(5, 512);
    attnscope::Random random(7);
    for (Index i = 0; i < x.size(); ++i) x.data()[i] = float(random.normal());
    const RowMatrix<float> y = attnscope::model::detail::linear<float>(x, w);
    const RowMatrix<double> exact = x.cast<double>() * expected.cast<double>().transpose();
    const double scale = (x.cast<double>().cwiseAbs() * expected.cast<double>().cwiseAbs().transpose()).maxCoeff();
    CHECK((y.cast<double>() - exact).cwiseAbs().maxCoeff() <= 1e-6 * scale);
  }
}

TEST_CASE("GGUF: loader errors name the file and the key or tensor", "[model][gguf]") {
  const Transformer& llama = gguf_safetensors_model("llama");
  const auto base = [&] { return gguf_conversion(llama.weights(), "llama", GgmlType::f32); };
  const auto load_error = [](const GgufDraft& draft, const std::string& file) {
    const std::string path = draft.write(file);
    const std::string message =
        error_message<attnscope::io_error>([&] { attnscope::model::load_gguf_model(path); });
    CHECK_THAT(message, Contains(path));
    return message;
  };
  {
    GgufDraft d = base();
    d.tensors.push_back({"blk.0.attn_extra.weight", {4}, GgmlType::f32, std::string(16, '\0')});
    CHECK_THAT(load_error(d, "unknown.gguf"), Contains("load_gguf_model") &&
                                                  Contains("unknown tensor 'blk.0.attn_extra.weight'"));
  }
  {
    GgufDraft d = base();
    d.remove_tensor("blk.1.ffn_down.weight");
    CHECK_THAT(load_error(d, "missing.gguf"), Contains("missing tensor 'blk.1.ffn_down.weight'"));
  }
  {
    GgufDraft d = base();
    std::swap(d.tensor("blk.0.attn_v.weight").dims[0], d.tensor("blk.0.attn_v.weight").dims[1]);
    CHECK_THAT(load_error(d, "shape.gguf"), Contains("tensor 'blk.0.attn_v.weight' has dims {32, 64}"));
  }
  {
    GgufDraft d = base();
    auto& t = d.tensor("blk.0.attn_v.weight");  // 32 × 64: two q8_1 blocks of 36 bytes per row
    t.type = GgmlType::q8_1;
    t.bytes = std::string(32 * 2 * 36, '\0');
    CHECK_THAT(load_error(d, "type.gguf"), Contains("ggml type q8_1, which attnscope cannot dequantize") &&
                                               Contains("iq4_nl") && Contains("mxfp4"));
  }
  {
    GgufDraft d = base();
    d.remove_key("general.architecture");
    d.set_text("general.architecture", "mamba");
    CHECK_THAT(load_error(d, "arch.gguf"), Contains("general.architecture 'mamba' is not supported") &&
                                               Contains("llama, qwen2, qwen3, gemma2, phi3, gpt_neox"));
  }
  {
    GgufDraft d = base();
    d.remove_key("llama.block_count");
    CHECK_THAT(load_error(d, "key.gguf"), Contains("missing metadata key 'llama.block_count'"));
  }
  {
    GgufDraft d = base();
    d.remove_key("llama.attention.head_count");
    d.set_text("llama.attention.head_count", "four");
    CHECK_THAT(load_error(d, "key_type.gguf"), Contains("llama.attention.head_count") &&
                                                   Contains("expected an integer, found a string") &&
                                                   Contains("byte offset"));
  }
  {
    GgufDraft d = base();
    d.tensors.push_back({"rope_freqs.weight", {8}, GgmlType::f32, std::string(32, '\0')});
    CHECK_THAT(load_error(d, "rope_freqs.gguf"), Contains("rope_freqs.weight"));
  }
  {
    GgufDraft d = base();
    d.set_text("llama.rope.scaling.type", "longrope");
    CHECK_THAT(load_error(d, "longrope.gguf"), Contains("llama.rope.scaling.type' = 'longrope' is not supported"));
  }
  {
    GgufDraft d = base();  // yarn needs its factor and trained length
    d.set_text("llama.rope.scaling.type", "yarn");
    CHECK_THAT(load_error(d, "yarn.gguf"), Contains("missing metadata key 'llama.rope.scaling.factor'"));
  }
  {
    GgufDraft d = base();
    auto& t = d.tensor("output_norm.weight");
    const float nan = std::nanf("");
    std::memcpy(&t.bytes[8], &nan, 4);
    CHECK_THAT(load_error(d, "nan.gguf"), Contains("output_norm.weight") && Contains("non-finite"));
  }
}
