// attnscope/model/detail/architectures.hpp — one table per Hugging Face architecture: a config reader that turns
// config.json into a TransformerConfig (sizes, feature flags) and refuses every field value it does not implement,
// and the names of the architecture's tensors (TensorNames). The generic tensor reader (model/huggingface.hpp) loads
// what the names and flags ask for. To add an architecture: docs/adding-an-architecture.md.
//
// The readers are templates on the folder reader (model/huggingface.hpp's HuggingFaceReader), so including this
// header compiles no JSON accessor.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/model/config.hpp"

namespace attnscope::model::detail {

/// How a fused q|k|v projection orders its output rows.
enum class FusedQkvLayout {
  blocks,    // all q rows, then all k rows, then all v rows (GPT-2 c_attn, Phi-3 qkv_proj)
  per_head,  // per head h: its q, k and v rows side by side, [q_h k_h v_h] (GPT-NeoX query_key_value)
};

/// Where an architecture stores its tensors. Layer tensors are named `layer_prefix + <layer> + "." + name`; an empty
/// name means the architecture has no such tensor. The config decides which are read: norm biases with LayerNorm,
/// pre/post norms by norm_placement, projection biases by the bias flags, q/k norms by query_key_norm, the head when
/// not tied. The reader also accepts names without the body prefix ("model.", "transformer.").
struct TensorNames {
  std::string embedding, position_embedding, final_norm, final_norm_bias, output_head;
  std::string layer_prefix;
  std::string attention_norm, attention_norm_bias, post_attention_norm;
  std::string ffn_norm, ffn_norm_bias, post_ffn_norm;
  std::string q, k, v, q_bias, k_bias, v_bias;  // separate projections
  std::string qkv, qkv_bias;                    // or one fused projection
  FusedQkvLayout qkv_layout = FusedQkvLayout::blocks;
  std::string o, o_bias;
  std::string q_norm, k_norm;
  std::string gate, gate_bias, up, down, down_bias;  // gate: w1 (the MLP input of ungated MLPs), up: w3, down: w2
  std::string gate_up;                               // or gate and up fused, gate rows first (Phi-3 gate_up_proj)
  bool conv1d = false;                // matrices stored in × out (GPT-2 Conv1D) rather than nn.Linear's out × in
  std::string sinks;                  // learned sink logits, one per head (gpt-oss)
  // Mixture-of-Experts layers: the router, then the experts either one tensor set per expert, named
  // `expert_prefix + <e> + "." + name` (Mixtral w1/w3/w2, Qwen3-MoE and OLMoE gate_proj/up_proj/down_proj), or all
  // experts stacked in one tensor per projection, laid out as the reader's format stores them (Hugging Face gpt-oss
  // gate_up_proj [E, dim, 2h] and down_proj [E, h, dim] with biases [E, 2h] and [E, dim]; GGUF ffn_gate_exps,
  // ffn_up_exps and ffn_down_exps with their biases).
  std::string router, router_bias;
  std::string expert_prefix, expert_gate, expert_up, expert_down;
  std::string stacked_gate_up, stacked_gate_up_bias, stacked_down, stacked_down_bias;
  std::string stacked_gate, stacked_gate_bias, stacked_up, stacked_up_bias;  // or gate and up apart (GGUF *_exps)
  bool mxfp4_experts = false;  // the stacked experts as MXFP4: `<name>_blocks` and `<name>_scales` (U8)
  std::vector<std::string> buffers;   // name suffixes of stored non-weights to tolerate (causal masks, inv_freq)
};

/// One architecture: its configuration and its tensor names.
struct Architecture {
  TransformerConfig config;
  TensorNames names;
};

/// The tensor names of the Llama layout (Hugging Face LlamaForCausalLM), shared by Mistral, Qwen2/3, Gemma 2/3,
/// Phi-3 and OLMo 2 with their additions.
inline TensorNames llama_tensor_names() {
  TensorNames n;
  n.embedding = "embed_tokens.weight";
  n.final_norm = "norm.weight";
  n.output_head = "lm_head.weight";
  n.layer_prefix = "layers.";
  n.attention_norm = "input_layernorm.weight";
  n.ffn_norm = "post_attention_layernorm.weight";
  n.q = "self_attn.q_proj.weight";
  n.k = "self_attn.k_proj.weight";
  n.v = "self_attn.v_proj.weight";
  n.q_bias = "self_attn.q_proj.bias";
  n.k_bias = "self_attn.k_proj.bias";
  n.v_bias = "self_attn.v_proj.bias";
  n.o = "self_attn.o_proj.weight";
  n.q_norm = "self_attn.q_norm.weight";
  n.k_norm = "self_attn.k_norm.weight";
  n.gate = "mlp.gate_proj.weight";
  n.up = "mlp.up_proj.weight";
  n.down = "mlp.down_proj.weight";
  n.buffers = {".rotary_emb.inv_freq"};  // stored by some older checkpoints, recomputed from the config
  return n;
}

// ---------------------------------------------------------------------------------------------------------------
// config.json readers shared by several tables

/// The sizes of a Llama-style config: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
/// num_key_value_heads (default: the heads), head_dim (default hidden_size / heads), vocab_size,
/// max_position_embeddings.
template <class Reader>
void read_llama_sizes(const Reader& reader, TransformerConfig& c) {
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
}

/// Refuses a boolean field set to true (a feature not implemented), naming it.
template <class Reader>
void refuse_true(const Reader& reader, const char* key, const char* what) {
  if (reader.boolean(key, false))
    reader.fail_config(attnscope::detail::concat(key, " = true is not supported (", what, ")"));
}

/// The activation named by `key` must be one of `accepted` (the first is the default when absent).
template <class Reader>
std::string read_activation(const Reader& reader, const char* key, std::vector<std::string> accepted) {
  const std::string activation = reader.text(key, accepted.front());
  for (const std::string& name : accepted)
    if (activation == name) return activation;
  std::string list;
  for (const std::string& name : accepted) list += (list.empty() ? "" : ", ") + name;
  reader.fail_config(attnscope::detail::concat(key, " '", activation, "' is not supported (only ", list, ")"));
}

/// A number inside a JSON object field of config.json (`object_key`.`key`), or fallback when absent/null.
template <class Reader, class Object>
double object_number(const Reader& reader, const Object& object, const char* object_key, const char* key,
                     double fallback, bool required = false) {
  if (!object.contains(key) || object.at(key).is_null()) {
    if (required)
      reader.fail_config(attnscope::detail::concat("field '", object_key, "' = ", object.dump(), " has no '", key,
                                                   "' (required for its rope_type)"));
    return fallback;
  }
  const auto& value = object.at(key);
  if (!value.is_number() || !std::isfinite(value.template get<double>()))
    reader.fail_config(attnscope::detail::concat("field '", object_key, ".", key, "' = ", value.dump(),
                                                 " is not a finite number"));
  return value.template get<double>();
}

/// RoPE: rope_theta (default `default_theta`), and rope_scaling (or transformers 5's flat rope_parameters) with
/// rope_type (or the older key type) default, linear, dynamic, yarn, llama3 or longrope — any other is an io_error
/// naming config.json and the field. Formulas and their sources: model/rope.hpp. Reads partial_rotary_factor (or
/// `rotary_fraction_key`) into rotary_dim.
template <class Reader>
void read_rope(const Reader& reader, TransformerConfig& c, double default_theta = 10000.0,
               const char* rotary_fraction_key = "partial_rotary_factor") {
  c.position_encoding = PositionEncoding::rope_rotate_half;
  c.rope_theta = reader.positive_number("rope_theta", default_theta);
  if (reader.has(rotary_fraction_key)) {
    const double fraction = reader.positive_number(rotary_fraction_key);
    if (fraction > 1)
      reader.fail_config(attnscope::detail::concat(rotary_fraction_key, " = ", fraction, " is above 1"));
    c.rotary_dim = static_cast<int>(c.head_dim * fraction);  // int(head_dim · fraction), as Hugging Face
    if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
      reader.fail_config(attnscope::detail::concat(rotary_fraction_key, " = ", fraction, " gives ", c.rotary_dim,
                                                   " rotated coordinates per head, which is not a positive even number"));
    if (c.rotary_dim == c.head_dim) c.rotary_dim = 0;
  }
  const char* key = reader.has("rope_scaling") ? "rope_scaling" : reader.has("rope_parameters") ? "rope_parameters"
                                                                                                 : nullptr;
  if (key == nullptr) return;
  const auto& scaling = reader.config().at(key);
  if (!scaling.is_object()) reader.fail_config(attnscope::detail::concat("field '", key, "' = ", scaling.dump(), " is not an object"));
  if (std::string(key) == "rope_parameters" && scaling.contains("rope_theta"))
    c.rope_theta = object_number(reader, scaling, key, "rope_theta", c.rope_theta);
  const char* type_key = scaling.contains("rope_type") ? "rope_type" : "type";
  if (!scaling.contains(type_key) || !scaling.at(type_key).is_string())
    reader.fail_config(attnscope::detail::concat("field '", key, "' = ", scaling.dump(),
                                                 " has no rope_type (one rope_parameters object per layer type is not "
                                                 "supported)"));
  const std::string type = scaling.at(type_key).template get<std::string>();
  RopeScaling& r = c.rope_scaling;
  const int max_positions = c.seq_len;
  const auto number = [&](const char* name, double fallback, bool required = false) {
    return object_number(reader, scaling, key, name, fallback, required);
  };
  const auto positive = [&](const char* name, double value) {
    if (!(value > 0))
      reader.fail_config(attnscope::detail::concat("field '", key, ".", name, "' = ", value, " must be > 0"));
    return value;
  };
  if (type == "default") return;
  if (type == "linear") {
    r.kind = RopeScalingKind::linear;
    r.factor = positive("factor", number("factor", 0, true));
  } else if (type == "dynamic") {
    r.kind = RopeScalingKind::dynamic;
    r.factor = positive("factor", number("factor", 0, true));
    r.original_max_positions = static_cast<int>(number("original_max_position_embeddings", max_positions));
    // NTK-aware scaling exists to run past the trained length: accept factor × that length.
    c.seq_len = static_cast<int>(std::floor(r.factor * r.original_max_positions));
  } else if (type == "llama3") {
    r.kind = RopeScalingKind::llama3;
    r.factor = positive("factor", number("factor", 0, true));
    r.low_frequency_factor = positive("low_freq_factor", number("low_freq_factor", 0, true));
    r.high_frequency_factor = positive("high_freq_factor", number("high_freq_factor", 0, true));
    r.original_max_positions = static_cast<int>(number("original_max_position_embeddings", 0, true));
  } else if (type == "yarn") {
    r.kind = RopeScalingKind::yarn;
    r.factor = positive("factor", number("factor", 0, true));
    r.original_max_positions = static_cast<int>(number("original_max_position_embeddings", max_positions));
    // transformers ≥ 4.51: with original_max_position_embeddings given, the factor is the ratio of the lengths
    if (scaling.contains("original_max_position_embeddings") && !scaling.at("original_max_position_embeddings").is_null())
      r.factor = double(max_positions) / positive("original_max_position_embeddings", r.original_max_positions);
    r.beta_fast = number("beta_fast", 32);
    r.beta_slow = number("beta_slow", 1);
    if (scaling.contains("truncate") && !scaling.at("truncate").is_null()) {
      if (!scaling.at("truncate").is_boolean())
        reader.fail_config(attnscope::detail::concat("field '", key, ".truncate' is not a boolean"));
      r.truncate = scaling.at("truncate").template get<bool>();
    }
    const auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    const double m = number("mscale", 0), m_all = number("mscale_all_dim", 0);
    const double fallback = m != 0 && m_all != 0 ? mscale(r.factor, m) / mscale(r.factor, m_all) : mscale(r.factor, 1);
    r.attention_factor = positive("attention_factor", number("attention_factor", fallback));
  } else if (type == "longrope") {
    r.kind = RopeScalingKind::longrope;
    for (const char* name : {"short_factor", "long_factor"}) {
      if (!scaling.contains(name) || !scaling.at(name).is_array())
        reader.fail_config(attnscope::detail::concat("field '", key, ".", name, "' is missing or not a list"));
      std::vector<double>& target = std::string(name) == "short_factor" ? r.short_factor : r.long_factor;
      for (const auto& value : scaling.at(name)) {
        if (!value.is_number())
          reader.fail_config(attnscope::detail::concat("field '", key, ".", name, "' holds ", value.dump(),
                                                       ", not a number"));
        target.push_back(value.template get<double>());
      }
      if (target.size() != std::size_t(c.rotary_size() / 2))
        reader.fail_config(attnscope::detail::concat("field '", key, ".", name, "' has ", target.size(),
                                                     " entries, expected ", c.rotary_size() / 2,
                                                     " (one per rotated pair)"));
    }
    // Phi-3: the trained length is original_max_position_embeddings and the factor the ratio of the two lengths
    double factor = number("factor", 1);
    if (reader.has("original_max_position_embeddings")) {
      r.original_max_positions = reader.positive_integer("original_max_position_embeddings");
      factor = double(max_positions) / r.original_max_positions;
    } else {
      r.original_max_positions = static_cast<int>(number("original_max_position_embeddings", max_positions));
    }
    const double fallback =
        factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(double(r.original_max_positions)));
    r.attention_factor = positive("attention_factor", number("attention_factor", fallback));
  } else {
    reader.fail_config(attnscope::detail::concat("field '", key, "' has rope_type '", type,
                                                 "', which is not supported (supported: default, linear, dynamic, "
                                                 "yarn, llama3, longrope)"));
  }
}

/// Per-layer windows from `layer_types` ("sliding_attention" / "full_attention", transformers ≥ 4.53) when
/// config.json has it; otherwise from `is_sliding(layer)`. Layers that slide see `window` keys, the query included
/// (Hugging Face's sliding-window mask keeps key j for query i when i − window < j ≤ i).
template <class Reader, class IsSliding>
void read_layer_windows(const Reader& reader, TransformerConfig& c, int window, IsSliding&& is_sliding) {
  c.layer_sliding_window.assign(std::size_t(c.n_layers), 0);
  if (reader.has("layer_types")) {
    const auto& types = reader.config().at("layer_types");
    if (!types.is_array() || types.size() != std::size_t(c.n_layers))
      reader.fail_config(attnscope::detail::concat("field 'layer_types' = ", types.dump(), " is not a list of ",
                                                   c.n_layers, " layer types"));
    for (int l = 0; l < c.n_layers; ++l) {
      const auto& type = types.at(std::size_t(l));
      const std::string name = type.is_string() ? type.template get<std::string>() : type.dump();
      if (name == "sliding_attention") c.layer_sliding_window[std::size_t(l)] = window;
      else if (name != "full_attention")
        reader.fail_config(attnscope::detail::concat("field 'layer_types' has '", name, "' at layer ", l,
                                                     " (only sliding_attention and full_attention are supported)"));
    }
  } else {
    for (int l = 0; l < c.n_layers; ++l)
      if (is_sliding(l)) c.layer_sliding_window[std::size_t(l)] = window;
  }
  bool any = false;
  for (const int w : c.layer_sliding_window) any = any || w > 0;
  if (!any) c.layer_sliding_window.clear();
}

/// Qwen2 / Qwen3: with use_sliding_window, layers from max_window_layers on see sliding_window keys.
template <class Reader>
void read_qwen_windows(const Reader& reader, TransformerConfig& c) {
  if (!reader.boolean("use_sliding_window", false)) return;
  const int window = reader.positive_integer("sliding_window");
  const int first = reader.has("max_window_layers") ? reader.positive_integer("max_window_layers") : c.n_layers;
  read_layer_windows(reader, c, window, [&](int layer) { return layer >= first; });
}

// ---------------------------------------------------------------------------------------------------------------
// the tables

/// The Llama body every Llama-derived table starts from: sizes, RMSNorm (rms_norm_eps, default `epsilon`), RoPE
/// with rope_scaling, SwiGLU with hidden_act silu, untied head unless tie_word_embeddings.
template <class Reader>
void read_llama_body(const Reader& reader, TransformerConfig& c, const std::string& model_type,
                     double epsilon = 1e-6) {
  c.architecture = model_type;
  read_llama_sizes(reader, c);
  c.norm = NormKind::rms_norm;
  c.norm_epsilon = static_cast<float>(reader.positive_number("rms_norm_eps", epsilon));
  read_rope(reader, c);
  c.feed_forward = FeedForwardKind::swiglu;
  c.tied_embeddings = reader.boolean("tie_word_embeddings", false);
  read_activation(reader, "hidden_act", {"silu"});
}


/// GPT-2 (GPT2LMHeadModel): learned positions, LayerNorm, fused Conv1D q|k|v stored [in, out], gelu_new, tied head.
template <class Reader>
Architecture gpt2_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
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
  if (reader.has("rope_scaling"))
    reader.fail_config("rope_scaling = " + reader.config().at("rope_scaling").dump() + " is not supported for gpt2");
  read_activation(reader, "activation_function", {"gelu_new", "gelu_pytorch_tanh"});
  if (!reader.boolean("scale_attn_weights", true))
    reader.fail_config("scale_attn_weights = false is not supported (scores are divided by sqrt(head_size))");
  refuse_true(reader, "scale_attn_by_inverse_layer_idx", "scores are divided by sqrt(head_size) only");
  refuse_true(reader, "add_cross_attention", "decoder-only");

  TensorNames& n = a.names;
  n.embedding = "wte.weight";
  n.position_embedding = "wpe.weight";
  n.layer_prefix = "h.";
  n.attention_norm = "ln_1.weight";
  n.attention_norm_bias = "ln_1.bias";
  n.qkv = "attn.c_attn.weight";
  n.qkv_bias = "attn.c_attn.bias";
  n.o = "attn.c_proj.weight";
  n.o_bias = "attn.c_proj.bias";
  n.ffn_norm = "ln_2.weight";
  n.ffn_norm_bias = "ln_2.bias";
  n.gate = "mlp.c_fc.weight";
  n.gate_bias = "mlp.c_fc.bias";
  n.down = "mlp.c_proj.weight";
  n.down_bias = "mlp.c_proj.bias";
  n.final_norm = "ln_f.weight";
  n.final_norm_bias = "ln_f.bias";
  n.output_head = "lm_head.weight";
  n.conv1d = true;
  n.buffers = {".attn.bias", ".attn.masked_bias"};  // the causal mask buffers of older checkpoints
  return a;
}

/// Llama (LlamaForCausalLM; SmolLM/SmolLM2 are Llama with a tied head), Mistral and Qwen2: RMSNorm, rotate-half RoPE
/// with rope_scaling, grouped-query attention, SwiGLU. Mistral adds a sliding window on every layer, Qwen2 q/k/v
/// biases and a window on the layers from max_window_layers on.
template <class Reader>
Architecture llama_architecture(const Reader& reader, const std::string& model_type) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_llama_body(reader, c, model_type);
  if (model_type == "qwen2") {
    c.attention_qkv_bias = true;
    read_qwen_windows(reader, c);
  } else if (model_type == "llama") {
    refuse_true(reader, "attention_bias", "Llama projections without biases only");
    refuse_true(reader, "mlp_bias", "Llama MLP without biases only");
  } else if (model_type == "mistral" && reader.has("sliding_window")) {
    c.sliding_window = reader.positive_integer("sliding_window");
  }
  a.names = llama_tensor_names();
  return a;
}

/// Qwen3 (Qwen3ForCausalLM): Qwen2 without q/k/v biases, with a per-head RMSNorm on q and k before RoPE and an
/// explicit head_dim.
template <class Reader>
Architecture qwen3_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_llama_body(reader, c, "qwen3");
  c.query_key_norm = QueryKeyNorm::per_head;
  refuse_true(reader, "attention_bias", "Qwen3 projections without biases only");
  read_qwen_windows(reader, c);
  a.names = llama_tensor_names();
  return a;
}

/// Gemma 2 (Gemma2ForCausalLM) and Gemma 3's text decoder (Gemma3ForCausalLM, model_type gemma3_text): RMSNorm with
/// (1 + w), embeddings × √hidden, pre- and post-norms around attention and the MLP, GeGLU (gelu_pytorch_tanh),
/// logit scale query_pre_attn_scalar^−½, attention and final-logit softcaps, sliding-window layers alternating with
/// global ones (Gemma 2: even layers slide; Gemma 3: every layer but each sliding_window_pattern-th), tied head.
/// Gemma 3 adds per-head (1 + w) q/k norms and the unscaled base rope_local_base_freq on its sliding layers.
template <class Reader>
Architecture gemma_architecture(const Reader& reader, const std::string& model_type) {
  const bool gemma3 = model_type == "gemma3_text";
  Architecture a;
  TransformerConfig& c = a.config;
  c.architecture = model_type;
  read_llama_sizes(reader, c);
  c.norm = NormKind::rms_norm_unit_offset;
  c.norm_placement = NormPlacement::sandwich;
  c.norm_epsilon = static_cast<float>(reader.positive_number("rms_norm_eps", 1e-6));
  read_rope(reader, c);
  c.feed_forward = FeedForwardKind::geglu_tanh;
  c.tied_embeddings = reader.boolean("tie_word_embeddings", true);
  c.embedding_scale = static_cast<float>(std::sqrt(double(c.dim)));  // in float32, as the model run in float32
  read_activation(reader, reader.has("hidden_activation") ? "hidden_activation" : "hidden_act",
                  {"gelu_pytorch_tanh"});
  refuse_true(reader, "attention_bias", "Gemma projections without biases only");
  c.attention_scale = 1.0 / std::sqrt(reader.positive_number("query_pre_attn_scalar", c.head_dim));
  if (reader.has("attn_logit_softcapping")) c.attention_softcap = reader.positive_number("attn_logit_softcapping");
  if (reader.has("final_logit_softcapping")) c.final_logit_softcap = reader.positive_number("final_logit_softcapping");
  if (reader.has("sliding_window")) {
    const int window = reader.positive_integer("sliding_window");
    if (gemma3) {
      const int pattern = reader.positive_integer("sliding_window_pattern", 6);
      read_layer_windows(reader, c, window, [&](int layer) { return (layer + 1) % pattern != 0; });
      c.rope_local_theta = reader.positive_number("rope_local_base_freq", 10000.0);
      c.query_key_norm = QueryKeyNorm::per_head;
    } else {
      read_layer_windows(reader, c, window, [](int layer) { return layer % 2 == 0; });
    }
  } else if (gemma3) {
    c.query_key_norm = QueryKeyNorm::per_head;
    c.rope_local_theta = reader.positive_number("rope_local_base_freq", 10000.0);
  }
  TensorNames n = llama_tensor_names();
  n.post_attention_norm = "post_attention_layernorm.weight";
  n.ffn_norm = "pre_feedforward_layernorm.weight";
  n.post_ffn_norm = "post_feedforward_layernorm.weight";
  a.names = n;
  return a;
}

/// Phi-3 (Phi3ForCausalLM): Llama with fused qkv_proj (q, k, v row blocks) and gate_up_proj (gate rows, then up),
/// partial_rotary_factor, longrope scaling (original_max_position_embeddings), a sliding window on every layer.
template <class Reader>
Architecture phi3_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_llama_body(reader, c, "phi3", 1e-5);
  refuse_true(reader, "attention_bias", "Phi-3 projections without biases only");
  if (reader.has("sliding_window")) c.sliding_window = reader.positive_integer("sliding_window");
  TensorNames n = llama_tensor_names();
  n.q = n.k = n.v = n.q_bias = n.k_bias = n.v_bias = "";
  n.qkv = "self_attn.qkv_proj.weight";
  n.gate = n.up = "";
  n.gate_up = "mlp.gate_up_proj.weight";
  a.names = n;
  return a;
}

/// GPT-NeoX / Pythia (GPTNeoXForCausalLM): LayerNorm with biases, fused per-head query_key_value with biases, partial
/// rotate-half RoPE (rotary_pct, rotary_emb_base), parallel residual (use_parallel_residual), exact-erf GELU MLP with
/// biases, untied embed_out; the buffers attention.bias, attention.masked_bias and rotary_emb.inv_freq are tolerated.
template <class Reader>
Architecture gpt_neox_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  c.architecture = "gpt_neox";
  c.dim = reader.positive_integer("hidden_size");
  c.hidden_dim = reader.positive_integer("intermediate_size");
  c.n_layers = reader.positive_integer("num_hidden_layers");
  c.n_heads = c.n_kv_heads = reader.positive_integer("num_attention_heads");
  if (c.dim % c.n_heads != 0)
    reader.fail_config(
        attnscope::detail::concat("hidden_size = ", c.dim, " is not divisible by num_attention_heads = ", c.n_heads));
  c.head_dim = c.dim / c.n_heads;
  c.vocab_size = reader.positive_integer("vocab_size");
  c.seq_len = reader.positive_integer("max_position_embeddings");
  c.norm = NormKind::layer_norm;
  c.norm_epsilon = static_cast<float>(reader.positive_number("layer_norm_eps", 1e-5));
  c.rope_theta = reader.positive_number("rotary_emb_base", 10000.0);
  read_rope(reader, c, c.rope_theta, "rotary_pct");
  c.attention_qkv_bias = c.attention_output_bias = reader.boolean("attention_bias", true);
  c.feed_forward = FeedForwardKind::gelu_erf;
  c.feed_forward_bias = true;
  c.parallel_residual = reader.boolean("use_parallel_residual", true);
  c.tied_embeddings = reader.boolean("tie_word_embeddings", false);
  read_activation(reader, "hidden_act", {"gelu"});
  TensorNames& n = a.names;
  n.embedding = "gpt_neox.embed_in.weight";
  n.layer_prefix = "gpt_neox.layers.";
  n.attention_norm = "input_layernorm.weight";
  n.attention_norm_bias = "input_layernorm.bias";
  n.ffn_norm = "post_attention_layernorm.weight";
  n.ffn_norm_bias = "post_attention_layernorm.bias";
  n.qkv = "attention.query_key_value.weight";
  n.qkv_bias = "attention.query_key_value.bias";
  n.qkv_layout = FusedQkvLayout::per_head;
  n.o = "attention.dense.weight";
  n.o_bias = "attention.dense.bias";
  n.gate = "mlp.dense_h_to_4h.weight";
  n.gate_bias = "mlp.dense_h_to_4h.bias";
  n.down = "mlp.dense_4h_to_h.weight";
  n.down_bias = "mlp.dense_4h_to_h.bias";
  n.final_norm = "gpt_neox.final_layer_norm.weight";
  n.final_norm_bias = "gpt_neox.final_layer_norm.bias";
  n.output_head = "embed_out.weight";
  n.buffers = {".attention.bias", ".attention.masked_bias", ".attention.rotary_emb.inv_freq"};
  return a;
}

/// OLMo 2 (Olmo2ForCausalLM): RMSNorm on the attention and MLP outputs inside the residual branch (no input norms),
/// RMSNorm q/k norms over the full projection width before RoPE, SwiGLU, untied head.
template <class Reader>
Architecture olmo2_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_llama_body(reader, c, "olmo2");
  c.norm_placement = NormPlacement::post;
  c.query_key_norm = QueryKeyNorm::full_width;
  refuse_true(reader, "attention_bias", "OLMo 2 projections without biases only");
  if (reader.has("clip_qkv")) reader.fail_config("clip_qkv = " + reader.config().at("clip_qkv").dump() +
                                                 " is not supported");
  TensorNames n = llama_tensor_names();
  n.attention_norm = n.ffn_norm = "";
  n.post_attention_norm = "post_attention_layernorm.weight";
  n.post_ffn_norm = "post_feedforward_layernorm.weight";
  a.names = n;
  return a;
}

// ---------------------------------------------------------------------------------------------------------------
// Mixture-of-Experts families

/// An integer field that may be 0 (`fallback` when absent/null).
template <class Reader>
int non_negative_integer(const Reader& reader, const char* key, int fallback) {
  if (!reader.has(key)) return fallback;
  const auto& value = reader.config().at(key);
  if (!value.is_number_integer() || value.template get<long long>() < 0 || value.template get<long long>() > (1LL << 30))
    reader.fail_config(attnscope::detail::concat("field '", key, "' = ", value.dump(), " is not an integer >= 0"));
  return value.template get<int>();
}

/// The experts of a sparse layer: E from `experts_key`, k from num_experts_per_tok (≤ E), the expert width from
/// `width_key`.
template <class Reader>
void read_experts(const Reader& reader, TransformerConfig& c, const char* experts_key, const char* width_key) {
  MixtureOfExperts& m = c.moe;
  m.experts = reader.positive_integer(experts_key);
  m.experts_per_token = reader.positive_integer("num_experts_per_tok",
                                                reader.has("experts_per_token") ? reader.positive_integer("experts_per_token") : 0);
  if (m.experts_per_token > m.experts)
    reader.fail_config(attnscope::detail::concat("num_experts_per_tok = ", m.experts_per_token, " exceeds ",
                                                 experts_key, " = ", m.experts));
  m.expert_hidden_dim = reader.positive_integer(width_key);
}

/// Refuses a quantization_config other than none (the weights are then stored as config.json's dtype says).
template <class Reader>
void refuse_quantization(const Reader& reader) {
  if (reader.has("quantization_config"))
    reader.fail_config("quantization_config = " + reader.config().at("quantization_config").dump() +
                       " is not supported for model_type '" + reader.text("model_type", "?") + "'");
}

/// The per-expert tensor names of the Qwen3-MoE / OLMoE layout (mlp.gate router, mlp.experts.<e>.{gate,up,down}_proj).
inline void qwen_moe_expert_names(TensorNames& n) {
  n.router = "mlp.gate.weight";
  n.expert_prefix = "mlp.experts.";
  n.expert_gate = "gate_proj.weight";
  n.expert_up = "up_proj.weight";
  n.expert_down = "down_proj.weight";
}

/// gpt-oss (GptOssForCausalLM): RMSNorm, q/k/v/o biases with a query width heads·head_dim that may differ from the
/// hidden size, one learned sink logit per head joining the softmax denominator, layer_types alternating sliding
/// windows (keys i − W < j ≤ i) and full attention (without layer_types, even layers slide), RoPE with yarn (its
/// `truncate` honoured), every layer sparse: a biased router, top-k of the router logits then the softmax over those
/// k, experts with biases and the clamped SwiGLU (u + 1)·g·σ(α·g) on interleaved gate|up outputs, swiglu_limit
/// (default 7) and α = 1.702. Experts in BF16/F16/F32 or, with quantization_config.quant_method "mxfp4", in MXFP4
/// blocks and scales.
template <class Reader>
Architecture gpt_oss_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  c.architecture = "gpt_oss";
  read_llama_sizes(reader, c);
  c.norm = NormKind::rms_norm;
  c.norm_epsilon = static_cast<float>(reader.positive_number("rms_norm_eps", 1e-5));
  read_rope(reader, c, 150000.0);
  c.tied_embeddings = reader.boolean("tie_word_embeddings", false);
  read_activation(reader, "hidden_act", {"silu"});
  c.attention_qkv_bias = c.attention_output_bias = reader.boolean("attention_bias", true);
  c.learned_sinks = true;
  if (reader.has("sliding_window"))
    read_layer_windows(reader, c, reader.positive_integer("sliding_window"), [](int layer) { return layer % 2 == 0; });
  else if (reader.has("layer_types"))
    reader.fail_config("layer_types without sliding_window: the sliding layers' window is unknown");
  read_experts(reader, c, "num_local_experts", "intermediate_size");
  c.hidden_dim = c.moe.expert_hidden_dim;  // no dense layer
  MixtureOfExperts& m = c.moe;
  m.routing = RoutingKind::top_k_then_softmax;
  m.router_bias = m.expert_bias = m.interleaved_gate_up = true;
  m.activation = ExpertActivation::clamped_swiglu;
  m.swiglu_limit = reader.positive_number("swiglu_limit", 7.0);
  TensorNames n = llama_tensor_names();
  n.o_bias = "self_attn.o_proj.bias";
  n.gate = n.up = n.down = "";
  n.sinks = "self_attn.sinks";
  n.router = "mlp.router.weight";
  n.router_bias = "mlp.router.bias";
  n.stacked_gate_up = "mlp.experts.gate_up_proj";
  n.stacked_gate_up_bias = "mlp.experts.gate_up_proj_bias";
  n.stacked_down = "mlp.experts.down_proj";
  n.stacked_down_bias = "mlp.experts.down_proj_bias";
  if (reader.has("quantization_config")) {
    const auto& quantization = reader.config().at("quantization_config");
    if (!quantization.is_object() || !quantization.contains("quant_method") ||
        quantization.at("quant_method") != "mxfp4")
      reader.fail_config("quantization_config = " + quantization.dump() +
                         " is not supported (gpt_oss: quant_method \"mxfp4\" only)");
    n.mxfp4_experts = true;
  }
  a.names = n;
  return a;
}

/// Mixtral (MixtralForCausalLM): Mistral attention (GQA, optional sliding_window) with every layer sparse: router
/// block_sparse_moe.gate, softmax over all experts then the top num_experts_per_tok renormalised to sum 1, SwiGLU
/// experts block_sparse_moe.experts.<e>.w1 (gate), w3 (up), w2 (down) of width intermediate_size.
template <class Reader>
Architecture mixtral_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_llama_body(reader, c, "mixtral", 1e-5);
  refuse_quantization(reader);
  if (reader.has("sliding_window")) c.sliding_window = reader.positive_integer("sliding_window");
  read_experts(reader, c, "num_local_experts", "intermediate_size");
  c.moe.routing = RoutingKind::softmax_then_top_k;
  c.moe.renormalize = true;
  TensorNames n = llama_tensor_names();
  n.gate = n.up = n.down = "";
  n.router = "block_sparse_moe.gate.weight";
  n.expert_prefix = "block_sparse_moe.experts.";
  n.expert_gate = "w1.weight";
  n.expert_up = "w3.weight";
  n.expert_down = "w2.weight";
  a.names = n;
  return a;
}

/// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3 attention (per-head q/k RMSNorm, explicit head_dim, optional windows);
/// layer l is sparse unless listed in mlp_only_layers, when (l + 1) is a multiple of decoder_sparse_step (default 1)
/// and num_experts > 0; router mlp.gate, softmax over all experts, top num_experts_per_tok, renormalised when
/// norm_topk_prob; SwiGLU experts of width moe_intermediate_size; dense layers a SwiGLU MLP of intermediate_size.
template <class Reader>
Architecture qwen3_moe_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_llama_body(reader, c, "qwen3_moe");
  refuse_quantization(reader);
  c.query_key_norm = QueryKeyNorm::per_head;
  refuse_true(reader, "attention_bias", "Qwen3-MoE projections without biases only");
  read_qwen_windows(reader, c);
  const int experts = non_negative_integer(reader, "num_experts", 0);
  if (experts > 0) {
    read_experts(reader, c, "num_experts", "moe_intermediate_size");
    c.moe.routing = RoutingKind::softmax_then_top_k;
    c.moe.renormalize = reader.boolean("norm_topk_prob", false);
    const int step = reader.positive_integer("decoder_sparse_step", 1);
    std::vector<bool> sparse(std::size_t(c.n_layers), true);
    for (int l = 0; l < c.n_layers; ++l) sparse[std::size_t(l)] = (l + 1) % step == 0;
    if (reader.has("mlp_only_layers")) {
      const auto& dense = reader.config().at("mlp_only_layers");
      if (!dense.is_array()) reader.fail_config("field 'mlp_only_layers' = " + dense.dump() + " is not a list");
      for (const auto& entry : dense) {
        if (!entry.is_number_integer() || entry.template get<long long>() < 0 ||
            entry.template get<long long>() >= c.n_layers)
          reader.fail_config(attnscope::detail::concat("field 'mlp_only_layers' holds ", entry.dump(),
                                                       ", not a layer index in [0, ", c.n_layers, ")"));
        sparse[std::size_t(entry.template get<int>())] = false;
      }
    }
    c.moe.sparse_layers = sparse;
  }
  TensorNames n = llama_tensor_names();
  qwen_moe_expert_names(n);
  a.names = n;
  return a;
}

/// OLMoE (OlmoeForCausalLM): Llama pre-norm blocks with RMSNorm q/k norms over the full projection widths (q: heads·
/// head_dim, k: kv heads·head_dim) before the split into heads, then q, k and v clamped to ±clip_qkv when set; every
/// layer sparse: router mlp.gate, softmax over all experts, top num_experts_per_tok, renormalised only when
/// norm_topk_prob (default false); SwiGLU experts of width intermediate_size.
template <class Reader>
Architecture olmoe_architecture(const Reader& reader) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_llama_body(reader, c, "olmoe", 1e-5);
  refuse_quantization(reader);
  c.query_key_norm = QueryKeyNorm::full_width;
  refuse_true(reader, "attention_bias", "OLMoE projections without biases only");
  if (reader.has("clip_qkv")) c.clip_qkv = reader.positive_number("clip_qkv");
  read_experts(reader, c, "num_experts", "intermediate_size");
  c.moe.routing = RoutingKind::softmax_then_top_k;
  c.moe.renormalize = reader.boolean("norm_topk_prob", false);
  TensorNames n = llama_tensor_names();
  qwen_moe_expert_names(n);
  a.names = n;
  return a;
}

}  // namespace attnscope::model::detail
