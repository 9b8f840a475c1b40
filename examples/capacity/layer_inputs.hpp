// The layer-input readings of the capacity reproductions' "token embeddings" (capacity::VectorSource): from a forward
// pass with CaptureOptions::hidden_states, the residual stream entering each layer and the same rows after the
// layer's attention norm (RMSNorm for Llama-family models, LayerNorm for GPT-2), i.e. exactly what W_Q, W_K and W_V
// read. Depends only on the model and capacity modules so that tests/capacity can check it.
#pragma once

#include <cstddef>
#include <vector>

#include "attnscope/capacity/vector_source.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/model.hpp"

namespace attnscope::examples {

/// Per layer l (n_layers entries), the L × dim rows of `source` for layer l: the captured residual stream at the
/// layer input (layer_input) or its attention-norm output (normed_layer_input). Throws attnscope::invalid_argument
/// for VectorSource::value (per head, not per layer) or when `result` lacks the hidden states.
inline std::vector<RowMatrix<float>> layer_input_vectors(const model::Transformer& transformer,
                                                         const model::ForwardResult& result,
                                                         capacity::VectorSource source) {
  const model::TransformerConfig& config = transformer.config();
  const auto layers = static_cast<std::size_t>(config.n_layers);
  if (source == capacity::VectorSource::value)
    detail::throw_invalid_argument("layer_input_vectors", "value vectors are per head: read ForwardResult::layers");
  if (result.hidden_states.size() < layers)
    detail::throw_invalid_argument("layer_input_vectors", "forward result has ", result.hidden_states.size(),
                                   " hidden states, need ", layers, " (set CaptureOptions::hidden_states)");
  std::vector<RowMatrix<float>> out;
  out.reserve(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    const RowMatrix<float>& residual = result.hidden_states[l];
    if (source == capacity::VectorSource::layer_input) {
      out.push_back(residual);
      continue;
    }
    const auto& weights = transformer.weights().layers[l];
    out.push_back(config.norm == model::NormKind::layer_norm
                      ? model::layer_norm(residual, weights.attention_norm, weights.attention_norm_bias,
                                          config.norm_epsilon)
                      : model::rms_norm(residual, weights.attention_norm, config.norm_epsilon));
  }
  return out;
}

}  // namespace attnscope::examples
