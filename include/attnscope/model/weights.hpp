// attnscope/model/weights.hpp — the tensors of a decoder-only transformer, per layer and global: weight matrices in
// their stored format (WeightMatrix: float32, float16, bfloat16 or a ggml block format, owned or a view into a
// memory-mapped file), norm weights and biases as float32 vectors.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/widen.hpp"
#include "attnscope/model/config.hpp"

namespace attnscope::model {

/// The type of every weight matrix (nn.Linear layout, out_features × in_features; embeddings vocab × dim): a
/// rows × cols matrix in its stored format, either owned (float32, e.g. llama2.c checkpoints or weights built in
/// memory) or a view into memory owned elsewhere (a memory-mapped safetensors shard, kept alive by a shared owner),
/// possibly transposed (GPT-2's Conv1D weights are stored in × out) or a block of a larger tensor (GPT-2's fused
/// q|k|v). The forward pass multiplies by it only through model/detail/linear.hpp, which widens float16 and
/// bfloat16 panels to float32 and dequantizes block-quantized panels (the GGUF block formats of kernels::StoredFloat) on
/// the fly: no float32 copy of a stored model is made.
///
/// Storage layout: for the float formats element (r, c) is at data() + offset(r, c) · stored_float_size(format()),
/// with offset(r, c) = r·stride() + c, or c·stride() + r when transposed() (the bytes then hold the cols × rows
/// matrix row by row). A block format stores each row as cols / block consecutive blocks (stride() a multiple of
/// the block size): the block holding (r, c) starts at data() + byte_offset(r, c − c mod block); such a matrix is
/// never transposed and its column ranges start and end on block boundaries. Copies of a view share the viewed
/// memory; copies of an owned matrix are deep.
class WeightMatrix {
 public:
  using Format = kernels::StoredFloat;

  /// An empty (0 × 0) float32 matrix.
  WeightMatrix() = default;
  /// Owns `matrix` (float32). Implicit, so float32 matrices assign to weights as before.
  WeightMatrix(RowMatrix<float> matrix)  // NOLINT(google-explicit-constructor)
      : owned_(std::move(matrix)), rows_(owned_.rows()), cols_(owned_.cols()), stride_(owned_.cols()) {}

  /// A view of the rows × cols row-major matrix of `format` at `data` (no copy); `keep_alive` owns that memory (the
  /// view and its copies hold it); `name` names the tensor in error messages. Throws attnscope::invalid_argument
  /// for negative sizes, a null `data` with elements, or rows that are not a whole number of blocks of a block
  /// format.
  static WeightMatrix view(Format format, const void* data, Index rows, Index cols,
                           std::shared_ptr<const void> keep_alive, std::string name = {}) {
    if (rows < 0 || cols < 0 || (data == nullptr && rows * cols > 0))
      attnscope::detail::throw_invalid_argument("WeightMatrix::view", "invalid view of ", rows, "x", cols,
                                                " elements at ", data, " (tensor '", name, "')");
    if (cols % kernels::stored_block_elements(format) != 0)
      attnscope::detail::throw_invalid_argument("WeightMatrix::view", "rows of ", cols, " elements are not whole ",
                                                kernels::stored_float_name(format), " blocks of ",
                                                kernels::stored_block_elements(format), " (tensor '", name, "')");
    WeightMatrix matrix;
    matrix.view_ = static_cast<const unsigned char*>(data);
    matrix.keep_alive_ = std::move(keep_alive);
    matrix.format_ = format;
    matrix.rows_ = rows;
    matrix.cols_ = cols;
    matrix.stride_ = cols;
    matrix.name_ = std::move(name);
    return matrix;
  }

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index size() const { return rows_ * cols_; }
  Format format() const { return format_; }
  /// True for a view into memory owned elsewhere, false for an owned float32 matrix.
  bool is_view() const { return view_ != nullptr; }
  /// The tensor's name for error messages ("" for owned matrices).
  const std::string& name() const { return name_; }

  /// The stored bytes (see the class comment for the layout).
  const unsigned char* data() const {
    return is_view() ? view_ : reinterpret_cast<const unsigned char*>(owned_.data());
  }
  Index stride() const { return stride_; }
  bool transposed() const { return transposed_; }
  /// Element offset of (r, c) from data() (float formats).
  std::size_t offset(Index r, Index c) const {
    return static_cast<std::size_t>(transposed_ ? c * stride_ + r : r * stride_ + c);
  }
  /// Byte offset of (r, c) from data(), every format (c a block boundary for a block format).
  std::size_t byte_offset(Index r, Index c) const {
    if (transposed_) return offset(r, c) * kernels::stored_block_bytes(format_);
    return kernels::stored_bytes(format_, r * stride_) + kernels::stored_bytes(format_, c);
  }

  /// The transpose (cols × rows), sharing the storage (an owned matrix gives an owned transposed copy). Throws
  /// attnscope::invalid_argument for a block format (its blocks run along rows).
  WeightMatrix transposed_view() const {
    if (kernels::is_block_format(format_))
      attnscope::detail::throw_invalid_argument("WeightMatrix::transposed_view", "a ", kernels::stored_float_name(format_),
                                                " matrix cannot be viewed transposed (tensor '", name_, "')");
    if (!is_view()) return WeightMatrix(RowMatrix<float>(owned_.transpose()));
    WeightMatrix t = *this;
    std::swap(t.rows_, t.cols_);
    t.transposed_ = !transposed_;
    return t;
  }

  /// Rows [first, first + count), sharing the storage (an owned matrix gives an owned copy of the block). Throws
  /// attnscope::invalid_argument for a range outside the matrix.
  WeightMatrix middle_rows(Index first, Index count) const { return block("middle_rows", first, count, 0, cols_); }
  /// Columns [first, first + count), as middle_rows.
  WeightMatrix middle_cols(Index first, Index count) const { return block("middle_cols", 0, rows_, first, count); }

  /// Element (r, c) as float32 (unchecked indices; a block format dequantizes the block holding it).
  float operator()(Index r, Index c) const {
    const Index block = kernels::stored_block_elements(format_);
    float values[256];
    kernels::widen_reference(data() + byte_offset(r, c - c % block), format_, block, values);
    return values[c % block];
  }

  /// Row r as float32 into out[0..cols) (unchecked index).
  void widen_row(Index r, float* out) const {
    if (!transposed_) {
      kernels::widen(data() + byte_offset(r, 0), format_, cols_, out);
      return;
    }
    for (Index c = 0; c < cols_; ++c) out[c] = (*this)(r, c);
  }

  /// Row r as a float32 row vector.
  Eigen::Matrix<float, 1, Eigen::Dynamic> row(Index r) const {
    Eigen::Matrix<float, 1, Eigen::Dynamic> out(cols_);
    widen_row(r, out.data());
    return out;
  }

  /// The whole matrix as a float32 copy (for inspection and tests; the forward pass never makes one).
  RowMatrix<float> to_float32() const {
    RowMatrix<float> out(rows_, cols_);
    for (Index r = 0; r < rows_; ++r) widen_row(r, out.data() + r * cols_);
    return out;
  }

  /// The owned float32 matrix, for editing weights in place; a view is first replaced by an owned float32 copy.
  RowMatrix<float>& owned_float32() {
    if (is_view()) *this = WeightMatrix(to_float32());
    return owned_;
  }

  /// Makes this an owned float32 matrix of rows × cols (uninitialized), as Eigen's resize.
  void resize(Index rows, Index cols) {
    *this = WeightMatrix();
    owned_.resize(rows, cols);
    rows_ = rows;
    cols_ = cols;
    stride_ = cols;
  }

 private:
  WeightMatrix block(const char* function, Index first_row, Index row_count, Index first_col, Index col_count) const {
    if (first_row < 0 || row_count < 0 || first_row + row_count > rows_ || first_col < 0 || col_count < 0 ||
        first_col + col_count > cols_)
      attnscope::detail::throw_invalid_argument(function, "block [", first_row, ", +", row_count, ") x [", first_col,
                                                ", +", col_count, ") outside the ", rows_, "x", cols_,
                                                " matrix '", name_, "'");
    const Index block = kernels::stored_block_elements(format_);
    if (first_col % block != 0 || col_count % block != 0)
      attnscope::detail::throw_invalid_argument(function, "columns [", first_col, ", +", col_count, ") of the ",
                                                kernels::stored_float_name(format_), " matrix '", name_,
                                                "' do not start and end on blocks of ", block);
    if (!is_view()) return WeightMatrix(RowMatrix<float>(owned_.block(first_row, first_col, row_count, col_count)));
    WeightMatrix b = *this;
    b.view_ = view_ + byte_offset(first_row, first_col);
    b.rows_ = row_count;
    b.cols_ = col_count;
    return b;
  }

  RowMatrix<float> owned_;
  std::shared_ptr<const void> keep_alive_;
  const unsigned char* view_ = nullptr;
  Format format_ = Format::float32;
  Index rows_ = 0, cols_ = 0, stride_ = 0;
  bool transposed_ = false;
  std::string name_;
};

/// One expert of a Mixture-of-Experts layer: a gated feed-forward of width h = expert_hidden_dim, y = down·act(gate·x,
/// up·x) (+ biases). gate and up are two h × dim matrices, or one fused 2h × dim gate_up whose outputs alternate
/// gate, up (interleaved_gate_up, gpt-oss) or run gate rows then up rows.
struct ExpertWeights {
  WeightMatrix gate, up;        // h × dim each (empty when fused)
  WeightMatrix gate_up;         // 2h × dim (empty when separate)
  WeightMatrix down;            // dim × h
  Vector<float> gate_bias, up_bias, gate_up_bias, down_bias;  // h, h, 2h, dim (expert_bias only)
};

/// The sparse feed-forward of one layer: the router (experts × dim, with its bias when router_bias) and the experts.
/// Empty for a dense layer.
struct MixtureWeights {
  WeightMatrix router;
  Vector<float> router_bias;
  std::vector<ExpertWeights> experts;
};

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
  Vector<float> sinks;           // n_heads learned sink logits (learned_sinks; empty otherwise)
  MixtureWeights moe;            // a sparse layer's experts (w1, w2, w3 then empty); empty for a dense layer
};

/// All tensors of a model: weight matrices in their stored format, vectors float32.
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
