// attnscope/model/config.hpp — the hyper-parameters and architectural choices of a decoder-only transformer
// (norm, position encoding, biases, feed-forward, sliding window), and their validation.
#pragma once

#include <cmath>
#include <string>

#include "attnscope/core/error.hpp"

namespace attnscope::model {

/// Normalization of the residual stream before each block and before the output head.
enum class NormKind {
  rms_norm,    // w ⊙ x / √(mean(x²) + ε) (Zhang & Sennrich 2019; llama2.c, Llama, Mistral, Qwen2)
  layer_norm,  // w ⊙ (x − mean) / √(var + ε) + b (Ba et al. 2016; GPT-2)
};

/// How positions enter the model.
enum class PositionEncoding {
  learned,           // a learned absolute embedding added to the token embedding (GPT-2 `wpe`)
  rope_interleaved,  // RoPE on pairs (2i, 2i+1) (llama2.c run.c)
  rope_rotate_half,  // RoPE on pairs (i, i + head_size/2) (Hugging Face Llama, Mistral, Qwen2)
};

/// The feed-forward block.
enum class FeedForwardKind {
  swiglu,     // w2(silu(w1 x) ⊙ w3 x) (Shazeer 2020)
  gelu_tanh,  // w2 gelu_tanh(w1 x + b1) + b2 (GPT-2 "gelu_new")
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

  int head_size() const { return head_dim; }
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
  return {};
}

}  // namespace detail

}  // namespace attnscope::model
