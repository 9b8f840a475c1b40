// attnscope/model/detail/decoder_state.hpp — the key/value cache of one decoding run and head ablation (zero or
// running-mean replacement of a head's output), used by model::BasicTransformer.
#pragma once

#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/model/forward_options.hpp"

namespace attnscope::model::detail {

/// Cache of one decoding run: keys after RoPE and values of every layer for the positions processed so far,
/// and the running sums of each head's output (for mean ablation).
template <class Scalar>
struct BasicDecoderState {
  std::vector<RowMatrix<Scalar>> keys, values;       // per layer: capacity × kv_dim
  std::vector<RowMatrix<double>> head_output_sums;  // per layer: n_heads × head_size
  Index length = 0;                                 // positions processed
};

using DecoderState = BasicDecoderState<float>;

/// A state with room for `capacity` positions of n_layers layers.
template <class Scalar>
BasicDecoderState<Scalar> start_decoder_state(Index capacity, int n_layers, Index kv_dim, Index n_heads,
                                              Index head_size) {
  BasicDecoderState<Scalar> state;
  // Each matrix is allocated on its own, never copied from a prototype: a copy would write every page of every
  // layer's cache at the start. Allocated but unwritten, a layer's cache occupies no memory until the layer runs,
  // and a streaming pass (which frees each layer's cache after its attention) holds about one layer's at a time.
  state.keys.resize(std::size_t(n_layers));
  state.values.resize(std::size_t(n_layers));
  for (int l = 0; l < n_layers; ++l) {
    state.keys[std::size_t(l)].resize(capacity, kv_dim);
    state.values[std::size_t(l)].resize(capacity, kv_dim);
  }
  state.head_output_sums.assign(std::size_t(n_layers), RowMatrix<double>::Zero(n_heads, head_size));
  return state;
}

/// Applies the ablation of head (layer, head) to its output rows (positions state.length..) if requested; mean
/// ablation [derived] adds each row to the running sum first, then replaces the row by the mean over positions 0..p,
/// which keeps the pass causal.
template <class Scalar, class Block>
void ablate(BasicDecoderState<Scalar>& state, const ForwardOptions& options, int layer, int head, Block&& output) {
  if (options.ablated_heads.count({layer, head}) == 0) return;
  if (options.ablation_mode == AblationMode::zero) {
    output.setZero();
    return;
  }
  auto sum = state.head_output_sums[std::size_t(layer)].row(head);
  for (Index i = 0; i < output.rows(); ++i) {
    sum += output.row(i).template cast<double>();
    const double count = static_cast<double>(state.length + i + 1);
    output.row(i) = (sum / count).template cast<Scalar>();
  }
}

}  // namespace attnscope::model::detail
