// attnscope/capacity/vector_source.hpp — which vectors play the "token embeddings" x_i of arXiv:2508.17821
// (docs/theory/capacity.md §3, "Which vectors are x_i"): the paper says "token embeddings" and "extract and normalize
// token embeddings" without naming a tensor ([not published]), so the reproductions offer every plausible reading.
#pragma once

#include <string>

#include "attnscope/core/error.hpp"

namespace attnscope::capacity {
/// The vectors x_i a head's capacity statistics use ([derived] readings of "token embeddings").
enum class VectorSource {
  value,               // the head's value vectors v_i = W_V·norm(h_i) (d = head_dim; shared by a GQA kv group)
  layer_input,         // the residual stream h_i entering the layer (d = model dim; shared by the layer's heads)
  normed_layer_input,  // norm(h_i): the layer's RMSNorm/LayerNorm output that W_Q, W_K, W_V read (d = model dim)
};

/// Short name of a source ("value", "layer_input", "normed_layer_input"), for reports and CSV columns.
inline std::string vector_source_name(VectorSource source) {
  switch (source) {
    case VectorSource::value: return "value";
    case VectorSource::layer_input: return "layer_input";
    case VectorSource::normed_layer_input: return "normed_layer_input";
  }
  attnscope::detail::throw_invalid_argument("vector_source_name", "unknown VectorSource ", static_cast<int>(source));
}

/// The source named by vector_source_name(). Throws attnscope::invalid_argument on any other name.
inline VectorSource vector_source_from_name(const std::string& name) {
  for (const VectorSource source : {VectorSource::value, VectorSource::layer_input, VectorSource::normed_layer_input})
    if (vector_source_name(source) == name) return source;
  attnscope::detail::throw_invalid_argument("vector_source_from_name", "unknown vector source '", name,
                                 "' (expected value, layer_input or normed_layer_input)");
}

}  // namespace attnscope::capacity
