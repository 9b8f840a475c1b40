// attnscope/model/llama.hpp — llama2.c checkpoints as a model::Transformer: the llama2.c tensors mapped to the
// shared TransformerWeights (RMSNorm ε 1e-5, interleaved RoPE θ 10000, SwiGLU, no biases), and LlamaModel, the
// Transformer that keeps the llama2.c header as its config().
#pragma once

#include <string>
#include <utility>

#include "attnscope/core/error.hpp"
#include "attnscope/io/llama2c.hpp"
#include "attnscope/model/transformer.hpp"

namespace attnscope::model {

namespace detail {

/// Throws attnscope::invalid_argument (function "LlamaModel") for an invalid llama2.c configuration or a tensor
/// whose shape disagrees with it, naming the tensor ("wk has shape 31x64, expected 32x64").
inline void validate_llama_weights(const io::LlamaWeights& weights) {
  const auto& c = weights.config;
  const char* fn = "LlamaModel";
  if (const std::string problem = io::detail::llama_config_problem(c); !problem.empty())
    attnscope::detail::throw_invalid_argument(fn, "invalid configuration: ", problem);
  const Index dim = c.dim, hidden = c.hidden_dim, kv_dim = c.kv_dim();
  auto shape = [&](const char* name, Index rows, Index cols, Index want_rows, Index want_cols) {
    if (rows != want_rows || cols != want_cols)
      attnscope::detail::throw_invalid_argument(fn, name, " has shape ", rows, "x", cols, ", expected ", want_rows,
                                                "x", want_cols);
  };
  shape("token_embedding", weights.token_embedding.rows(), weights.token_embedding.cols(), c.vocab_size, dim);
  shape("classifier", weights.classifier.rows(), weights.classifier.cols(), c.vocab_size, dim);
  shape("rms_final", weights.rms_final.size(), 1, dim, 1);
  if (weights.layers.size() != static_cast<std::size_t>(c.n_layers))
    attnscope::detail::throw_invalid_argument(fn, "have ", weights.layers.size(), " layers, config says ",
                                              c.n_layers);
  for (const auto& layer : weights.layers) {
    shape("rms_attention", layer.rms_attention.size(), 1, dim, 1);
    shape("rms_ffn", layer.rms_ffn.size(), 1, dim, 1);
    shape("wq", layer.wq.rows(), layer.wq.cols(), dim, dim);
    shape("wk", layer.wk.rows(), layer.wk.cols(), kv_dim, dim);
    shape("wv", layer.wv.rows(), layer.wv.cols(), kv_dim, dim);
    shape("wo", layer.wo.rows(), layer.wo.cols(), dim, dim);
    shape("w1", layer.w1.rows(), layer.w1.cols(), hidden, dim);
    shape("w2", layer.w2.rows(), layer.w2.cols(), dim, hidden);
    shape("w3", layer.w3.rows(), layer.w3.cols(), hidden, dim);
  }
}

}  // namespace detail

/// The llama2.c architecture (run.c) as a TransformerConfig: RMSNorm ε 1e-5, RoPE on interleaved pairs with
/// θ = 10000, SwiGLU, no biases, head tied unless `tied` is false.
inline TransformerConfig llama2c_transformer_config(const io::LlamaConfig& c, bool tied) {
  TransformerConfig config;
  config.architecture = "llama2.c";
  config.dim = c.dim;
  config.hidden_dim = c.hidden_dim;
  config.n_layers = c.n_layers;
  config.n_heads = c.n_heads;
  config.n_kv_heads = c.n_kv_heads;
  config.head_dim = c.head_size();
  config.vocab_size = c.vocab_size;
  config.seq_len = c.seq_len;
  config.norm = NormKind::rms_norm;
  config.norm_epsilon = 1e-5f;
  config.position_encoding = PositionEncoding::rope_interleaved;
  config.rope_theta = 10000.0;
  config.feed_forward = FeedForwardKind::swiglu;
  config.tied_embeddings = tied;
  return config;
}

/// Moves llama2.c weights into the shared TransformerWeights (validated first, see detail::validate_llama_weights).
/// The head is tied when the classifier equals the token embedding (then only one copy is kept).
inline TransformerWeights transformer_weights_from_llama2c(io::LlamaWeights llama) {
  detail::validate_llama_weights(llama);
  const bool tied = llama.classifier == llama.token_embedding;
  TransformerWeights weights;
  weights.config = llama2c_transformer_config(llama.config, tied);
  weights.token_embedding = std::move(llama.token_embedding);
  if (!tied) weights.classifier = std::move(llama.classifier);
  weights.final_norm = std::move(llama.rms_final);
  weights.layers.reserve(llama.layers.size());
  for (auto& source : llama.layers) {
    TransformerLayerWeights layer;
    layer.attention_norm = std::move(source.rms_attention);
    layer.ffn_norm = std::move(source.rms_ffn);
    layer.wq = std::move(source.wq);
    layer.wk = std::move(source.wk);
    layer.wv = std::move(source.wv);
    layer.wo = std::move(source.wo);
    layer.w1 = std::move(source.w1);
    layer.w2 = std::move(source.w2);
    layer.w3 = std::move(source.w3);
    weights.layers.push_back(std::move(layer));
  }
  return weights;
}

/// A llama2.c model (run.c: RMSNorm, interleaved RoPE, grouped-query attention, SwiGLU, tied or untied classifier,
/// float32): a Transformer whose config() is the llama2.c header. Everything else — forward with capture, maps,
/// ablation, generation, likelihood — is Transformer's; `transformer_config()` gives the shared config.
class LlamaModel : public Transformer {
 public:
  /// Takes the weights (e.g. from io::read_llama2c); throws attnscope::invalid_argument on inconsistent shapes.
  explicit LlamaModel(io::LlamaWeights weights)
      : Transformer(transformer_weights_from_llama2c(std::move(weights))),
        llama_config_(llama2c_header(Transformer::config())) {}

  /// Reads a llama2.c checkpoint (io::read_llama2c; throws attnscope::io_error on a bad file).
  static LlamaModel load(const std::string& path) { return LlamaModel(io::read_llama2c(path)); }

  /// The llama2.c header (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, head_size()).
  const io::LlamaConfig& config() const { return llama_config_; }
  /// The shared architecture description (Transformer::config()).
  const TransformerConfig& transformer_config() const { return Transformer::config(); }

 private:
  io::LlamaConfig llama_config_;

  static io::LlamaConfig llama2c_header(const TransformerConfig& c) {
    io::LlamaConfig header;
    header.dim = c.dim;
    header.hidden_dim = c.hidden_dim;
    header.n_layers = c.n_layers;
    header.n_heads = c.n_heads;
    header.n_kv_heads = c.n_kv_heads;
    header.vocab_size = c.vocab_size;
    header.seq_len = c.seq_len;
    header.shared_classifier = c.tied_embeddings;
    return header;
  }
};

}  // namespace attnscope::model
