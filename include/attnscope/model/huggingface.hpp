// attnscope/model/huggingface.hpp — Hugging Face model folders (config.json + safetensors) as a model::Transformer:
// GPT-2, Llama, Mistral and Qwen2 checkpoints mapped to the shared TransformerWeights. Supported architectures and
// exactly what each implements: docs/models.md. Needs nlohmann-json (link attnscope::io).
//
// The readers are templates on the JSON type config.json is parsed into (default nlohmann::json, never given by
// callers), so that including this header compiles no JSON accessor: the loader is compiled only where it is called.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/huggingface.hpp"
#include "attnscope/model/transformer.hpp"

namespace attnscope::model {

namespace detail {

/// Reads config.json fields and tensors of one folder, turning every problem into an attnscope::io_error that
/// names the folder (and config.json or the tensor).
template <class Json>
class HuggingFaceReader {
 public:
  explicit HuggingFaceReader(const std::string& folder)
      : folder_(folder), files_(std::make_shared<io::BasicHuggingFaceFolder<Json>>(folder)) {}

  const std::string& folder() const { return folder_; }
  const Json& config() const { return files_->config(); }

  [[noreturn]] void fail_config(const std::string& message) const {
    attnscope::detail::throw_io_error("load_huggingface_model", folder_ + "/config.json", message);
  }

  /// Whether config.json has `key` with a non-null value.
  bool has(const char* key) const { return config().contains(key) && !config().at(key).is_null(); }

  /// A positive integer field (or `fallback` when absent/null and fallback > 0).
  int positive_integer(const char* key, int fallback = 0) const {
    if (!has(key)) {
      if (fallback > 0) return fallback;
      fail_config(attnscope::detail::concat("missing integer field '", key, "'"));
    }
    const auto& value = config().at(key);
    if (!value.is_number_integer() || value.template get<long long>() <= 0 || value.template get<long long>() > (1LL << 30))
      fail_config(attnscope::detail::concat("field '", key, "' = ", value.dump(), " is not a positive integer"));
    return value.template get<int>();
  }

  /// A positive finite number field (or `fallback` when absent/null and fallback > 0).
  double positive_number(const char* key, double fallback = 0) const {
    if (!has(key)) {
      if (fallback > 0) return fallback;
      fail_config(attnscope::detail::concat("missing number field '", key, "'"));
    }
    const auto& value = config().at(key);
    if (!value.is_number() || !(value.template get<double>() > 0) || !std::isfinite(value.template get<double>()))
      fail_config(attnscope::detail::concat("field '", key, "' = ", value.dump(), " is not a positive number"));
    return value.template get<double>();
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto& value = config().at(key);
    if (!value.is_boolean())
      fail_config(attnscope::detail::concat("field '", key, "' = ", value.dump(), " is not a boolean"));
    return value.template get<bool>();
  }

  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const auto& value = config().at(key);
    if (!value.is_string())
      fail_config(attnscope::detail::concat("field '", key, "' = ", value.dump(), " is not a string"));
    return value.template get<std::string>();
  }

  /// Tensor `name` as a rows × cols WeightMatrix: a view of the mapped bytes in their stored format (F32, F16,
  /// BF16), which keeps the folder's maps alive; io_error naming the folder and the tensor when missing, mis-shaped
  /// or of another dtype.
  WeightMatrix matrix(const std::string& name, Index rows, Index cols) const {
    require(name);
    try {
      const io::HuggingFaceTensor& stored = files_->weight_tensor(name, {rows, cols});
      const kernels::StoredFloat format = stored.dtype == io::DType::float16    ? kernels::StoredFloat::float16
                                          : stored.dtype == io::DType::bfloat16 ? kernels::StoredFloat::bfloat16
                                                                                : kernels::StoredFloat::float32;
      return WeightMatrix::view(format, stored.data, rows, cols, files_, stored.name + " in " + stored.file);
    } catch (const std::exception& error) {
      rethrow(name, error);
    }
  }

  /// Tensor `name` as a vector of `size` float32.
  Vector<float> vector(const std::string& name, Index size) const {
    require(name);
    try {
      return files_->vector_float32(name, size);
    } catch (const std::exception& error) {
      rethrow(name, error);
    }
  }

  bool has_tensor(const std::string& name) const { return files_->has_tensor(name); }

 private:
  std::string folder_;
  std::shared_ptr<const io::BasicHuggingFaceFolder<Json>> files_;  // shared with the weight views

  void require(const std::string& name) const {
    if (!files_->has_tensor(name))
      attnscope::detail::throw_io_error("load_huggingface_model", folder_, "missing tensor '", name,
                                        "' (needed by config.json's model_type '", text("model_type", "?"), "')");
  }

  [[noreturn]] void rethrow(const std::string& name, const std::exception& error) const {
    attnscope::detail::throw_io_error("load_huggingface_model", folder_, "tensor '", name, "': ", error.what());
  }
};

/// Rejects config.json features this implementation does not compute (so a model never runs silently wrong).
template <class Reader>
void reject_unsupported(const Reader& reader) {
  if (reader.has("rope_scaling"))
    reader.fail_config("rope_scaling = " + reader.config().at("rope_scaling").dump() +
                       " is not supported (only plain RoPE, see docs/models.md)");
}

/// A Conv1D weight (stored in × out) as an nn.Linear weight (out × in): a transposed view of F16/BF16 bytes (widened
/// panel by panel by the product), or for F32 an owned row-major copy, the layout whose one-call Eigen product is
/// the float32 forward's (a transposed F32 view would change the GEMM's rounding order).
inline WeightMatrix linear_layout(const WeightMatrix& conv1d) {
  if (conv1d.format() == kernels::StoredFloat::float32) return WeightMatrix(conv1d.transposed_view().to_float32());
  return conv1d.transposed_view();
}

/// GPT-2 (transformers GPT2LMHeadModel): learned positions, LayerNorm, fused Conv1D q|k|v stored [in, out].
template <class Reader>
TransformerWeights read_gpt2(const Reader& reader) {
  reject_unsupported(reader);
  TransformerConfig c;
  c.architecture = "gpt2";
  c.dim = reader.positive_integer("n_embd");
  c.n_layers = reader.positive_integer("n_layer");
  c.n_heads = c.n_kv_heads = reader.positive_integer("n_head");
  if (c.dim % c.n_heads != 0)
    reader.fail_config(attnscope::detail::concat("n_embd = ", c.dim, " is not divisible by n_head = ", c.n_heads));
  c.head_dim = c.dim / c.n_heads;
  c.hidden_dim = reader.positive_integer("n_inner", 4 * c.dim);
  c.vocab_size = reader.positive_integer("vocab_size");
  c.seq_len = reader.positive_integer("n_positions");
  c.norm = NormKind::layer_norm;
  c.norm_epsilon = static_cast<float>(reader.positive_number("layer_norm_epsilon", 1e-5));
  c.position_encoding = PositionEncoding::learned;
  c.attention_qkv_bias = c.attention_output_bias = c.feed_forward_bias = true;
  c.feed_forward = FeedForwardKind::gelu_tanh;
  c.tied_embeddings = reader.boolean("tie_word_embeddings", true);
  const std::string activation = reader.text("activation_function", "gelu_new");
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh")
    reader.fail_config("activation_function '" + activation +
                       "' is not supported (only gelu_new / gelu_pytorch_tanh, the tanh approximation)");
  if (!reader.boolean("scale_attn_weights", true))
    reader.fail_config("scale_attn_weights = false is not supported (scores are divided by sqrt(head_size))");
  if (reader.boolean("scale_attn_by_inverse_layer_idx", false))
    reader.fail_config("scale_attn_by_inverse_layer_idx = true is not supported");
  if (reader.boolean("add_cross_attention", false)) reader.fail_config("add_cross_attention = true is not supported");

  const Index dim = c.dim, hidden = c.hidden_dim;
  TransformerWeights w;
  w.token_embedding = reader.matrix("wte.weight", c.vocab_size, dim);
  w.position_embedding = reader.matrix("wpe.weight", c.seq_len, dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string at = "h." + std::to_string(l) + ".";
    TransformerLayerWeights layer;
    layer.attention_norm = reader.vector(at + "ln_1.weight", dim);
    layer.attention_norm_bias = reader.vector(at + "ln_1.bias", dim);
    // Conv1D stores [in, out] (y = x W + b): each part in the nn.Linear [out, in] layout, see linear_layout.
    const WeightMatrix fused = reader.matrix(at + "attn.c_attn.weight", dim, 3 * dim);
    const Vector<float> fused_bias = reader.vector(at + "attn.c_attn.bias", 3 * dim);
    layer.wq = linear_layout(fused.middle_cols(0, dim));
    layer.wk = linear_layout(fused.middle_cols(dim, dim));
    layer.wv = linear_layout(fused.middle_cols(2 * dim, dim));
    layer.wq_bias = fused_bias.segment(0, dim);
    layer.wk_bias = fused_bias.segment(dim, dim);
    layer.wv_bias = fused_bias.segment(2 * dim, dim);
    layer.wo = linear_layout(reader.matrix(at + "attn.c_proj.weight", dim, dim));
    layer.wo_bias = reader.vector(at + "attn.c_proj.bias", dim);
    layer.ffn_norm = reader.vector(at + "ln_2.weight", dim);
    layer.ffn_norm_bias = reader.vector(at + "ln_2.bias", dim);
    layer.w1 = linear_layout(reader.matrix(at + "mlp.c_fc.weight", dim, hidden));
    layer.w1_bias = reader.vector(at + "mlp.c_fc.bias", hidden);
    layer.w2 = linear_layout(reader.matrix(at + "mlp.c_proj.weight", hidden, dim));
    layer.w2_bias = reader.vector(at + "mlp.c_proj.bias", dim);
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = reader.vector("ln_f.weight", dim);
  w.final_norm_bias = reader.vector("ln_f.bias", dim);
  if (!c.tied_embeddings) w.classifier = reader.matrix("lm_head.weight", c.vocab_size, dim);
  w.config = std::move(c);
  return w;
}

/// Llama, Mistral and Qwen2 (transformers LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM): RMSNorm,
/// rotate-half RoPE, grouped-query attention, SwiGLU; Qwen2 adds q/k/v biases, Mistral a sliding window.
template <class Reader>
TransformerWeights read_llama_family(const Reader& reader, const std::string& model_type) {
  reject_unsupported(reader);
  TransformerConfig c;
  c.architecture = model_type;
  c.dim = reader.positive_integer("hidden_size");
  c.hidden_dim = reader.positive_integer("intermediate_size");
  c.n_layers = reader.positive_integer("num_hidden_layers");
  c.n_heads = reader.positive_integer("num_attention_heads");
  c.n_kv_heads = reader.positive_integer("num_key_value_heads", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    reader.fail_config(attnscope::detail::concat("num_key_value_heads = ", c.n_kv_heads,
                                                 " does not divide num_attention_heads = ", c.n_heads));
  if (!reader.has("head_dim") && c.dim % c.n_heads != 0)
    reader.fail_config(
        attnscope::detail::concat("hidden_size = ", c.dim, " is not divisible by num_attention_heads = ", c.n_heads));
  c.head_dim = reader.positive_integer("head_dim", c.dim / std::max(c.n_heads, 1));
  if (c.head_dim % 2 != 0) reader.fail_config(attnscope::detail::concat("head_dim = ", c.head_dim, " is odd"));
  c.vocab_size = reader.positive_integer("vocab_size");
  c.seq_len = reader.positive_integer("max_position_embeddings");
  c.norm = NormKind::rms_norm;
  c.norm_epsilon = static_cast<float>(reader.positive_number("rms_norm_eps", 1e-6));
  c.position_encoding = PositionEncoding::rope_rotate_half;
  c.rope_theta = reader.positive_number("rope_theta", 10000.0);
  c.feed_forward = FeedForwardKind::swiglu;
  c.tied_embeddings = reader.boolean("tie_word_embeddings", false);
  const std::string activation = reader.text("hidden_act", "silu");
  if (activation != "silu") reader.fail_config("hidden_act '" + activation + "' is not supported (only silu)");
  if (model_type == "qwen2") {
    c.attention_qkv_bias = true;
    if (reader.boolean("use_sliding_window", false))
      reader.fail_config("use_sliding_window = true is not supported for qwen2");
  } else if (model_type == "llama") {
    if (reader.boolean("attention_bias", false)) reader.fail_config("attention_bias = true is not supported");
    if (reader.boolean("mlp_bias", false)) reader.fail_config("mlp_bias = true is not supported");
  } else if (model_type == "mistral" && reader.has("sliding_window")) {
    c.sliding_window = reader.positive_integer("sliding_window");
  }

  const Index dim = c.dim, hidden = c.hidden_dim, query_dim = c.query_dim(), kv_dim = c.kv_dim();
  TransformerWeights w;
  w.token_embedding = reader.matrix("embed_tokens.weight", c.vocab_size, dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string at = "layers." + std::to_string(l) + ".";
    TransformerLayerWeights layer;
    layer.attention_norm = reader.vector(at + "input_layernorm.weight", dim);
    layer.wq = reader.matrix(at + "self_attn.q_proj.weight", query_dim, dim);
    layer.wk = reader.matrix(at + "self_attn.k_proj.weight", kv_dim, dim);
    layer.wv = reader.matrix(at + "self_attn.v_proj.weight", kv_dim, dim);
    layer.wo = reader.matrix(at + "self_attn.o_proj.weight", dim, query_dim);
    if (c.attention_qkv_bias) {
      layer.wq_bias = reader.vector(at + "self_attn.q_proj.bias", query_dim);
      layer.wk_bias = reader.vector(at + "self_attn.k_proj.bias", kv_dim);
      layer.wv_bias = reader.vector(at + "self_attn.v_proj.bias", kv_dim);
    }
    layer.ffn_norm = reader.vector(at + "post_attention_layernorm.weight", dim);
    layer.w1 = reader.matrix(at + "mlp.gate_proj.weight", hidden, dim);
    layer.w3 = reader.matrix(at + "mlp.up_proj.weight", hidden, dim);
    layer.w2 = reader.matrix(at + "mlp.down_proj.weight", dim, hidden);
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = reader.vector("norm.weight", dim);
  if (!c.tied_embeddings) w.classifier = reader.matrix("lm_head.weight", c.vocab_size, dim);
  w.config = std::move(c);
  return w;
}

}  // namespace detail

/// Reads the TransformerWeights of a Hugging Face model folder (config.json plus model.safetensors, or
/// model.safetensors.index.json and its shards; F32, F16 or BF16 weight matrices stay memory-mapped in their stored
/// format as WeightMatrix views, norm weights and biases are converted to float32) for model_type
/// gpt2, llama, mistral or qwen2 (docs/models.md). Throws attnscope::io_error naming the folder and config.json or
/// the tensor for: an unreadable folder, a missing or unsupported model_type, a config feature not implemented
/// (rope_scaling, another activation, ...), a missing tensor, a tensor whose shape disagrees with config.json.
template <class Json = nlohmann::json>
TransformerWeights read_huggingface_weights(const std::string& folder) {
  const detail::HuggingFaceReader<Json> reader(folder);
  if (!reader.has("model_type")) reader.fail_config("missing field 'model_type'");
  const std::string model_type = reader.text("model_type", "");
  if (model_type == "gpt2") return detail::read_gpt2(reader);
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2")
    return detail::read_llama_family(reader, model_type);
  reader.fail_config("model_type '" + model_type + "' is not supported (supported: gpt2, llama, mistral, qwen2)");
}

/// A Hugging Face model folder as a Transformer (read_huggingface_weights, then the Transformer's own checks).
template <class Json = nlohmann::json>
Transformer load_huggingface_model(const std::string& folder) {
  return Transformer(read_huggingface_weights<Json>(folder));
}

}  // namespace attnscope::model
