// attnscope/model/weights.hpp — the float32 tensors of a decoder-only transformer, per layer and global.
#pragma once

#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/model/config.hpp"

namespace attnscope::model {

/// The type of every weight matrix (nn.Linear layout, out_features × in_features; embeddings vocab × dim). The
/// forward pass multiplies by it only through model/detail/linear.hpp.
using WeightMatrix = RowMatrix<float>;

/// One transformer block. Matrices are nn.Linear weights (out_features × in_features), i.e. y = W x; bias vectors
/// are empty when the configuration has none; norm biases exist for LayerNorm only. Which norms exist follows the
/// config's norm_placement (pre: attention_norm, ffn_norm; sandwich: all four; post: the two post norms) and
/// query_key_norm.
struct TransformerLayerWeights {
  Vector<float> attention_norm, attention_norm_bias;  // dim
  WeightMatrix wq;  // query_dim × dim
  WeightMatrix wk;  // kv_dim × dim
  WeightMatrix wv;  // kv_dim × dim
  WeightMatrix wo;  // dim × query_dim
  Vector<float> wq_bias, wk_bias, wv_bias, wo_bias;
  Vector<float> ffn_norm, ffn_norm_bias;  // dim
  WeightMatrix w1;  // hidden_dim × dim (SwiGLU gate / GELU MLP input)
  WeightMatrix w2;  // dim × hidden_dim (output)
  WeightMatrix w3;  // hidden_dim × dim (SwiGLU/GeGLU up; empty for the ungated GELU MLPs)
  Vector<float> w1_bias, w2_bias;
  Vector<float> post_attention_norm, post_ffn_norm;  // dim (sandwich and post placements)
  Vector<float> q_norm, k_norm;  // head_dim each (per head) or query_dim / kv_dim (full width)
};

/// All tensors of a model, float32.
struct TransformerWeights {
  TransformerConfig config;
  WeightMatrix token_embedding;     // vocab × dim
  WeightMatrix position_embedding;  // seq_len × dim for learned positions, else empty
  std::vector<TransformerLayerWeights> layers;
  Vector<float> final_norm, final_norm_bias;  // dim (bias: LayerNorm only)
  WeightMatrix classifier;          // vocab × dim, empty when the head is tied to token_embedding

  /// The output head: classifier, or token_embedding when tied.
  const WeightMatrix& output_head() const { return config.tied_embeddings ? token_embedding : classifier; }
};

}  // namespace attnscope::model
