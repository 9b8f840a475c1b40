// attnscope/model/config.hpp — the hyper-parameters and architectural choices of a decoder-only transformer
// (norm kind and placement, q/k norms, position encoding and RoPE scaling, attention scale, softcaps and per-layer
// windows, feed-forward, residual form, embedding scale), and their validation.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"

namespace attnscope::model {

/// Normalization of the residual stream before each block and before the output head.
enum class NormKind {
  rms_norm,              // w ⊙ x / √(mean(x²) + ε) (Zhang & Sennrich 2019; llama2.c, Llama, Mistral, Qwen2)
  layer_norm,            // w ⊙ (x − mean) / √(var + ε) + b (Ba et al. 2016; GPT-2, GPT-NeoX)
  rms_norm_unit_offset,  // (1 + w) ⊙ x / √(mean(x²) + ε): the stored weight is an offset from 1 (Gemma 2/3)
};

/// Where the norms of a block sit relative to its residual branch.
enum class NormPlacement {
  pre,       // x += f(norm(x)) (GPT-2, Llama, ...)
  sandwich,  // x += post_norm(f(norm(x))) (Gemma 2/3: pre- and post-norms around attention and the MLP)
  post,      // x += post_norm(f(x)) (OLMo 2: the norm is on the branch's output, inside the residual branch)
};

/// Norms of the queries and keys after their projections, before RoPE (with the config's norm kind and ε).
enum class QueryKeyNorm {
  none,
  per_head,    // one weight of head_dim shared by every head, each head normalised on its own (Qwen3, Gemma 3)
  full_width,  // over the whole projection: q of query_dim, k of kv_dim (OLMo 2)
};

/// How positions enter the model.
enum class PositionEncoding {
  learned,           // a learned absolute embedding added to the token embedding (GPT-2 `wpe`)
  rope_interleaved,  // RoPE on pairs (2i, 2i+1) (llama2.c run.c)
  rope_rotate_half,  // RoPE on pairs (i, i + head_size/2) (Hugging Face Llama, Mistral, Qwen2)
};

/// The feed-forward block.
enum class FeedForwardKind {
  swiglu,      // w2(silu(w1 x) ⊙ w3 x) (Shazeer 2020)
  gelu_tanh,   // w2 gelu_tanh(w1 x + b1) + b2 (GPT-2 "gelu_new")
  geglu_tanh,  // w2(gelu_tanh(w1 x) ⊙ w3 x) (Shazeer 2020 GEGLU with the tanh GELU; Gemma "gelu_pytorch_tanh")
  gelu_erf,    // w2 gelu(w1 x + b1) + b2 with the exact GELU x·Φ(x) (GPT-NeoX "gelu")
};

/// Whether a feed-forward kind is gated (has the up projection w3).
inline bool is_gated(FeedForwardKind kind) {
  return kind == FeedForwardKind::swiglu || kind == FeedForwardKind::geglu_tanh;
}

/// How a Mixture-of-Experts router turns its logits r = W_r x (+ b_r) into the weights of the k experts a token uses.
enum class RoutingKind {
  softmax_then_top_k,  // w = softmax(r) over all experts, the k largest kept, optionally renormalised to sum 1
                       // (Mixtral: always; Qwen3-MoE and OLMoE: norm_topk_prob)
  top_k_then_softmax,  // the k largest logits, then w = softmax over those k only (gpt-oss)
};

/// The activation of an expert's (or a dense layer's) gated feed-forward.
enum class ExpertActivation {
  swiglu,          // silu(gate) ⊙ up (Mixtral, Qwen3-MoE, OLMoE)
  clamped_swiglu,  // gpt-oss: g = min(gate, limit), u = clamp(up, −limit, limit), (u + 1) ⊙ g ⊙ σ(α·g)
};

/// The Mixture-of-Experts feed-forward of the sparse layers (Shazeer et al. 2017; Fedus et al. 2022): per token, a
/// router picks k of the E experts, each a gated feed-forward of width expert_hidden_dim, and the layer's output is
/// the routing-weighted sum of their outputs. experts = 0: every layer is dense.
struct MixtureOfExperts {
  int experts = 0;            // E
  int experts_per_token = 0;  // k
  int expert_hidden_dim = 0;  // the width of one expert's hidden layer
  RoutingKind routing = RoutingKind::softmax_then_top_k;
  bool renormalize = true;    // softmax_then_top_k: the k kept weights divided by their sum
  bool router_bias = false;   // the router has a bias (gpt-oss)
  bool expert_bias = false;   // the experts' projections have biases; the down bias is weighted with its expert
  ExpertActivation activation = ExpertActivation::swiglu;
  double swiglu_limit = 0;    // clamped_swiglu: the clamp (gpt-oss swiglu_limit, 7)
  double swiglu_alpha = 1.702;  // clamped_swiglu: α of the sigmoid gate
  bool interleaved_gate_up = false;  // the fused gate|up projection alternates gate and up outputs (gpt-oss)
  // One entry per layer: true for a sparse (MoE) layer; empty with experts > 0 means every layer is sparse. Dense
  // layers use the config's feed_forward with hidden_dim (Qwen3-MoE mlp_only_layers, decoder_sparse_step).
  std::vector<bool> sparse_layers;

  bool is_sparse(int layer) const {
    return experts > 0 && (sparse_layers.empty() || sparse_layers[std::size_t(layer)]);
  }
};

/// How RoPE's inverse frequencies are rescaled for long contexts (Hugging Face `rope_scaling.rope_type`).
enum class RopeScalingKind {
  none,      // θ^(−2i/d)
  linear,    // divided by factor (Chen et al. 2023, position interpolation)
  dynamic,   // NTK-aware: θ' = θ·(factor·L/L₀ − (factor − 1))^(d/(d−2)) when the length L exceeds L₀
  yarn,      // YaRN (Peng et al. 2023, arXiv:2309.00071): per-frequency ramp between interpolation and extrapolation
  llama3,    // Llama 3.1: long wavelengths divided by factor, short ones kept, a smooth blend between
  longrope,  // LongRoPE (Ding et al. 2024): per-frequency factors, the long set beyond L₀ (Phi-3)
};

/// The parameters of a RoPE scaling (see model/rope.hpp for the formulas).
struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::none;
  double factor = 1;                      // linear, dynamic, yarn, llama3
  int original_max_positions = 0;         // L₀: dynamic, yarn, llama3, longrope
  double low_frequency_factor = 1;        // llama3
  double high_frequency_factor = 4;       // llama3
  double beta_fast = 32, beta_slow = 1;   // yarn
  bool truncate = true;                   // yarn: the correction range rounded outward to whole dimensions
  double attention_factor = 1;            // multiplies cos and sin (yarn, longrope)
  std::vector<double> short_factor, long_factor;  // longrope, one per rotated pair
};

/// Hyper-parameters and architectural choices of a decoder-only transformer.
struct TransformerConfig {
  std::string architecture;  // "llama2.c", "gpt2", "llama", "mistral", "qwen2" (informational)
  int dim = 0;               // model (residual) width
  int hidden_dim = 0;        // feed-forward hidden width
  int n_layers = 0;
  int n_heads = 0;           // query heads
  int n_kv_heads = 0;        // key/value heads; query head h uses kv head h / (n_heads / n_kv_heads)
  int head_dim = 0;          // width of one head (usually dim / n_heads); head_size() returns it
  int vocab_size = 0;
  int seq_len = 0;           // maximum number of positions
  NormKind norm = NormKind::rms_norm;
  float norm_epsilon = 1e-5f;
  PositionEncoding position_encoding = PositionEncoding::rope_interleaved;
  double rope_theta = 10000.0;       // RoPE base θ (RoPE encodings only)
  bool attention_qkv_bias = false;   // q/k/v projections have biases (GPT-2, Qwen2)
  bool attention_output_bias = false;  // the output projection wo has a bias (GPT-2)
  FeedForwardKind feed_forward = FeedForwardKind::swiglu;
  bool feed_forward_bias = false;    // w1 and w2 have biases (GPT-2)
  bool tied_embeddings = true;       // the output head is the token embedding
  int sliding_window = 0;            // > 0: query p sees keys p − window + 1 .. p only (Mistral); 0 = full causal
  // Per-layer windows: empty means every layer uses sliding_window; otherwise one entry per layer (0 = full causal),
  // e.g. Gemma's alternating local and global layers, Qwen2's layers from max_window_layers on.
  std::vector<int> layer_sliding_window;
  NormPlacement norm_placement = NormPlacement::pre;
  QueryKeyNorm query_key_norm = QueryKeyNorm::none;
  int rotary_dim = 0;                // RoPE rotates the first rotary_dim coordinates of each head; 0 = all (GPT-NeoX
                                     // rotary_pct, Phi partial_rotary_factor)
  RopeScaling rope_scaling;          // applies to the layers with rope_theta
  double rope_local_theta = 0;       // > 0: the RoPE base of sliding-window layers, unscaled (Gemma 3)
  double attention_scale = 0;        // > 0: the logit scale instead of 1/√head_dim (Gemma query_pre_attn_scalar^−½)
  double attention_softcap = 0;      // > 0: logits c·tanh(s/c) before the softmax (Gemma 2)
  double final_logit_softcap = 0;    // > 0: output logits c·tanh(z/c) (Gemma 2/3)
  float embedding_scale = 1;         // token embeddings are multiplied by it (Gemma: √dim, in float32)
  bool parallel_residual = false;    // x + attn(norm₁ x) + mlp(norm₂ x) from the same x (GPT-NeoX)
  double clip_qkv = 0;               // > 0: q, k and v clamped to [−clip, clip] after their projections (OLMoE)
  bool learned_sinks = false;        // one learned sink logit per head joins the softmax denominator (gpt-oss)
  MixtureOfExperts moe;              // the sparse feed-forward (experts = 0: dense model)

  int head_size() const { return head_dim; }
  int rotary_size() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  /// The window of layer `layer` (0 = full causal).
  int window_of_layer(int layer) const {
    return layer_sliding_window.empty() ? sliding_window : layer_sliding_window[std::size_t(layer)];
  }
  int query_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

namespace detail {

/// Empty when the configuration is usable, otherwise a description of the first problem found.
inline std::string transformer_config_problem(const TransformerConfig& c) {
  const struct {
    const char* name;
    int value;
  } sizes[] = {{"dim", c.dim},           {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers},
               {"n_heads", c.n_heads},   {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
               {"vocab_size", c.vocab_size}, {"seq_len", c.seq_len}};
  for (const auto& size : sizes)
    if (size.value <= 0) return attnscope::detail::concat(size.name, " = ", size.value, " must be > 0");
  if (c.n_heads % c.n_kv_heads != 0)
    return attnscope::detail::concat("n_kv_heads = ", c.n_kv_heads, " does not divide n_heads = ", c.n_heads);
  if (!(c.norm_epsilon > 0) || !std::isfinite(c.norm_epsilon))
    return attnscope::detail::concat("norm_epsilon = ", c.norm_epsilon, " must be finite and > 0");
  if (c.position_encoding != PositionEncoding::learned) {
    if (c.head_dim % 2 != 0) return attnscope::detail::concat("head_dim = ", c.head_dim, " is odd (RoPE needs pairs)");
    if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
      return attnscope::detail::concat("rope_theta = ", c.rope_theta, " must be finite and > 0");
  }
  if (c.sliding_window < 0) return attnscope::detail::concat("sliding_window = ", c.sliding_window, " must be >= 0");
  if (!c.layer_sliding_window.empty()) {
    if (c.layer_sliding_window.size() != std::size_t(c.n_layers))
      return attnscope::detail::concat("layer_sliding_window has ", c.layer_sliding_window.size(),
                                       " entries for n_layers = ", c.n_layers);
    for (std::size_t l = 0; l < c.layer_sliding_window.size(); ++l)
      if (c.layer_sliding_window[l] < 0)
        return attnscope::detail::concat("layer_sliding_window[", l, "] = ", c.layer_sliding_window[l], " must be >= 0");
  }
  if (c.position_encoding != PositionEncoding::learned) {
    if (c.rotary_dim < 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0)
      return attnscope::detail::concat("rotary_dim = ", c.rotary_dim, " must be even and in [0, head_dim = ",
                                       c.head_dim, "]");
    if (c.rope_local_theta < 0 || !std::isfinite(c.rope_local_theta))
      return attnscope::detail::concat("rope_local_theta = ", c.rope_local_theta, " must be finite and >= 0");
  }
  for (const auto& [name, value] : {std::pair<const char*, double>{"attention_scale", c.attention_scale},
                                    {"attention_softcap", c.attention_softcap},
                                    {"final_logit_softcap", c.final_logit_softcap}})
    if (value < 0 || !std::isfinite(value))
      return attnscope::detail::concat(name, " = ", value, " must be finite and >= 0 (0: not used)");
  if (!(c.embedding_scale > 0) || !std::isfinite(c.embedding_scale))
    return attnscope::detail::concat("embedding_scale = ", c.embedding_scale, " must be finite and > 0");
  if (c.position_encoding != PositionEncoding::learned && c.rope_scaling.kind != RopeScalingKind::none) {
    const RopeScaling& r = c.rope_scaling;
    if (!(r.factor > 0) || !std::isfinite(r.factor))
      return attnscope::detail::concat("rope_scaling.factor = ", r.factor, " must be finite and > 0");
    if (!(r.attention_factor > 0) || !std::isfinite(r.attention_factor))
      return attnscope::detail::concat("rope_scaling.attention_factor = ", r.attention_factor,
                                       " must be finite and > 0");
    if (r.kind != RopeScalingKind::linear && r.original_max_positions <= 0)
      return attnscope::detail::concat("rope_scaling.original_max_positions = ", r.original_max_positions,
                                       " must be > 0");
    if (r.kind == RopeScalingKind::llama3 && !(r.high_frequency_factor > r.low_frequency_factor))
      return attnscope::detail::concat("rope_scaling: high_frequency_factor = ", r.high_frequency_factor,
                                       " must exceed low_frequency_factor = ", r.low_frequency_factor);
    if (r.kind == RopeScalingKind::longrope) {
      const std::size_t pairs = std::size_t(c.rotary_size() / 2);
      if (r.short_factor.size() != pairs || r.long_factor.size() != pairs)
        return attnscope::detail::concat("rope_scaling: short_factor and long_factor have ", r.short_factor.size(),
                                         " and ", r.long_factor.size(), " entries, expected ", pairs,
                                         " (one per rotated pair)");
      for (const auto* factors : {&r.short_factor, &r.long_factor})
        for (const double value : *factors)
          if (!(value > 0) || !std::isfinite(value))
            return attnscope::detail::concat("rope_scaling: a longrope factor is ", value, ", must be finite and > 0");
    }
  }
  if (c.parallel_residual && c.norm_placement != NormPlacement::pre)
    return "parallel_residual needs norm_placement pre";
  if (c.clip_qkv < 0 || !std::isfinite(c.clip_qkv))
    return attnscope::detail::concat("clip_qkv = ", c.clip_qkv, " must be finite and >= 0 (0: not used)");
  const MixtureOfExperts& m = c.moe;
  if (m.experts < 0) return attnscope::detail::concat("moe.experts = ", m.experts, " must be >= 0");
  if (m.experts > 0) {
    if (m.experts_per_token < 1 || m.experts_per_token > m.experts)
      return attnscope::detail::concat("moe.experts_per_token = ", m.experts_per_token, " must be in [1, experts = ",
                                       m.experts, "]");
    if (m.expert_hidden_dim <= 0)
      return attnscope::detail::concat("moe.expert_hidden_dim = ", m.expert_hidden_dim, " must be > 0");
    if (!m.sparse_layers.empty() && m.sparse_layers.size() != std::size_t(c.n_layers))
      return attnscope::detail::concat("moe.sparse_layers has ", m.sparse_layers.size(), " entries for n_layers = ",
                                       c.n_layers);
    if (m.activation == ExpertActivation::clamped_swiglu &&
        (!(m.swiglu_limit > 0) || !std::isfinite(m.swiglu_limit) || !(m.swiglu_alpha > 0) ||
         !std::isfinite(m.swiglu_alpha)))
      return attnscope::detail::concat("moe: clamped_swiglu needs swiglu_limit = ", m.swiglu_limit,
                                       " and swiglu_alpha = ", m.swiglu_alpha, " finite and > 0");
    if (c.parallel_residual) return "moe: a parallel residual with experts is not implemented";
  }
  return {};
}

}  // namespace detail

}  // namespace attnscope::model
