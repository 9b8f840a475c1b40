// attnscope/model/huggingface.hpp — Hugging Face model folders (config.json + safetensors) as a model::Transformer.
// Each supported model_type is one table (model/detail/architectures.hpp): a config reader that fills a
// TransformerConfig (refusing every field value it does not implement) and the names of its tensors; one generic
// reader loads the tensors those name, splits fused projections, and refuses a folder holding any tensor that is
// neither used nor a known buffer. Supported architectures and exactly what each implements: docs/models.md.
// Needs nlohmann-json (link attnscope::io).
//
// The readers are templates on the JSON type config.json is parsed into (default nlohmann::json, never given by
// callers), so that including this header compiles no JSON accessor: the loader is compiled only where it is called.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/huggingface.hpp"
#include "attnscope/model/detail/architectures.hpp"
#include "attnscope/model/transformer.hpp"

namespace attnscope::model {

namespace detail {

/// A Conv1D weight (stored in × out) as an nn.Linear weight (out × in): a transposed view of F16/BF16 bytes (widened
/// panel by panel by the product), or for F32 an owned row-major copy, the layout whose one-call Eigen product is
/// the float32 forward's (a transposed F32 view would change the GEMM's rounding order).
inline WeightMatrix linear_layout(const WeightMatrix& conv1d) {
  if (conv1d.format() == kernels::StoredFloat::float32) return WeightMatrix(conv1d.transposed_view().to_float32());
  return conv1d.transposed_view();
}

/// Reads config.json fields and tensors of one folder, turning every problem into an attnscope::io_error that
/// names the folder (and config.json or the tensor).
template <class Json>
class HuggingFaceReader {
 public:
  explicit HuggingFaceReader(const std::string& folder) : folder_(folder), files_(std::make_shared<io::BasicHuggingFaceFolder<Json>>(folder)) {}

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

  /// A number field (integer or not) or `fallback` when absent/null.
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const auto& value = config().at(key);
    if (!value.is_number() || !std::isfinite(value.template get<double>()))
      fail_config(attnscope::detail::concat("field '", key, "' = ", value.dump(), " is not a finite number"));
    return value.template get<double>();
  }

  /// Tensor `name` as a rows × cols WeightMatrix: a view of the mapped bytes in their stored format (F32, F16,
  /// BF16), which keeps the folder's maps alive; io_error naming the folder and the tensor when missing, mis-shaped
  /// or of another dtype.
  WeightMatrix matrix(const std::string& name, Index rows, Index cols) const {
    require(name);
    try {
      used_.insert(files_->resolve_name(name));
      const io::HuggingFaceTensor& stored = files_->weight_tensor(name, {rows, cols});
      const kernels::StoredFloat format = stored_format(stored);
      return WeightMatrix::view(format, stored.data, rows, cols, files_, stored.name + " in " + stored.file);
    } catch (const std::exception& error) {
      rethrow(name, error);
    }
  }

  /// Tensor `name` as a vector of `size` float32.
  Vector<float> vector(const std::string& name, Index size) const {
    require(name);
    try {
      used_.insert(files_->resolve_name(name));
      return files_->vector_float32(name, size);
    } catch (const std::exception& error) {
      rethrow(name, error);
    }
  }

  bool has_tensor(const std::string& name) const { return files_->has_tensor(name); }

  /// The `count` expert matrices (each out × in, nn.Linear's layout) of a stacked tensor `name`, which Hugging Face
  /// stores [count, in, out] (gpt-oss gate_up_proj and down_proj): each a transposed view of its slice in the
  /// stored format. `mxfp4`: the tensor is stored as MXFP4 `name_blocks` and `name_scales` (mxfp4_experts). Errors
  /// as matrix().
  std::vector<WeightMatrix> expert_matrices(const std::string& name, Index count, Index out, Index in,
                                            bool mxfp4) const {
    if (mxfp4) return mxfp4_expert_matrices(name, count, out, in);
    require(name);
    try {
      used_.insert(files_->resolve_name(name));
      const io::HuggingFaceTensor& stored = files_->weight_tensor(name, {count, in, out});
      const kernels::StoredFloat format = stored_format(stored);
      const std::size_t slice = static_cast<std::size_t>(in * out) * io::dtype_size(stored.dtype);
      std::vector<WeightMatrix> matrices;
      for (Index e = 0; e < count; ++e)
        matrices.push_back(linear_layout(
            WeightMatrix::view(format, static_cast<const unsigned char*>(stored.data) + std::size_t(e) * slice, in,
                               out, files_, attnscope::detail::concat(stored.name, "[", e, "] in ", stored.file))));
      return matrices;
    } catch (const std::exception& error) {
      rethrow(name, error);
    }
  }

  /// The experts of an MXFP4 tensor `name` (Hugging Face's integrations/mxfp4.py layout, already out × in): U8
  /// `name_blocks` [count, out, in/32, 16], each byte two E2M1 codes (element 2t in its low nibble, 2t + 1 in its high
  /// one), and U8 `name_scales` [count, out, in/32], the e8m0 exponents (value = E2M1 · 2^(byte − 127)). They are
  /// repacked once into ggml's MXFP4 blocks (kernels::StoredFloat::mxfp4: the scale byte, then 16 bytes holding
  /// elements j (low nibble) and j + 16 (high), the same codes and exponent), 17 bytes per 32 weights held in memory;
  /// the products dequantize them block by block as for a GGUF file.
  std::vector<WeightMatrix> mxfp4_expert_matrices(const std::string& name, Index count, Index out, Index in) const {
    const std::string blocks_name = name + "_blocks", scales_name = name + "_scales";
    require(blocks_name);
    require(scales_name);
    try {
      if (in % 32 != 0)
        attnscope::detail::throw_io_error("load_huggingface_model", folder_, "tensor '", blocks_name, "': ", in,
                                          " inputs are not whole MXFP4 blocks of 32");
      used_.insert(files_->resolve_name(blocks_name));
      used_.insert(files_->resolve_name(scales_name));
      const Index per_row = in / 32;
      const io::HuggingFaceTensor& blocks = files_->raw_tensor(blocks_name, {count, out, per_row, 16}, io::DType::uint8);
      const io::HuggingFaceTensor& scales = files_->raw_tensor(scales_name, {count, out, per_row}, io::DType::uint8);
      const auto* codes = static_cast<const unsigned char*>(blocks.data);
      const auto* exponents = static_cast<const unsigned char*>(scales.data);
      const std::size_t block_count = static_cast<std::size_t>(count * out * per_row);
      auto packed = std::make_shared<std::vector<unsigned char>>(block_count * 17);
      for (std::size_t b = 0; b < block_count; ++b) {
        unsigned char* target = packed->data() + b * 17;
        const unsigned char* source = codes + b * 16;
        unsigned char element[32];
        for (int t = 0; t < 16; ++t) {
          element[2 * t] = source[t] & 0x0F;
          element[2 * t + 1] = source[t] >> 4;
        }
        target[0] = exponents[b];
        for (int j = 0; j < 16; ++j) target[1 + j] = static_cast<unsigned char>(element[j] | (element[j + 16] << 4));
      }
      const std::size_t slice = static_cast<std::size_t>(out * per_row) * 17;
      std::vector<WeightMatrix> matrices;
      for (Index e = 0; e < count; ++e)
        matrices.push_back(WeightMatrix::view(kernels::StoredFloat::mxfp4, packed->data() + std::size_t(e) * slice, out,
                                              in, packed,
                                              attnscope::detail::concat(blocks.name, "[", e, "] in ", blocks.file)));
      return matrices;
    } catch (const std::exception& error) {
      rethrow(name, error);
    }
  }

  /// The `count` rows of a stacked bias `name` [count, size] as float32; errors as vector().
  RowMatrix<float> expert_vectors(const std::string& name, Index count, Index size) const {
    require(name);
    try {
      used_.insert(files_->resolve_name(name));
      return files_->matrix_float32(name, count, size);
    } catch (const std::exception& error) {
      rethrow(name, error);
    }
  }

  /// Throws an io_error naming the first stored tensor that no matrix()/vector() call read and whose name does not end
  /// in one of `buffers` (known non-weight buffers such as GPT-2's `.attn.bias`): an unexpected tensor means the
  /// folder is not what config.json says, and ignoring it could run a mis-mapped model silently wrong.
  void require_all_used(const std::vector<std::string>& buffers) const {
    for (const std::string& name : files_->tensor_names()) {
      if (used_.count(name) != 0) continue;
      const bool buffer = std::any_of(buffers.begin(), buffers.end(), [&](const std::string& suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      });
      if (!buffer)
        attnscope::detail::throw_io_error("load_huggingface_model", folder_, "tensor '", name,
                                          "' is not used by config.json's model_type '", text("model_type", "?"),
                                          "' (an unexpected tensor: the folder does not hold the model config.json ",
                                          "describes, or a feature it uses is not implemented)");
    }
  }

 private:
  std::string folder_;
  std::shared_ptr<const io::BasicHuggingFaceFolder<Json>> files_;  // shared with the weight views
  mutable std::set<std::string> used_;  // stored names read so far

  void require(const std::string& name) const {
    if (!files_->has_tensor(name))
      attnscope::detail::throw_io_error("load_huggingface_model", folder_, "missing tensor '", name,
                                        "' (needed by config.json's model_type '", text("model_type", "?"), "')");
  }

  // The weight format of a tensor weight_tensor() accepted (F32, F16 or BF16).
  static kernels::StoredFloat stored_format(const io::HuggingFaceTensor& stored) {
    return stored.dtype == io::DType::float16    ? kernels::StoredFloat::float16
           : stored.dtype == io::DType::bfloat16 ? kernels::StoredFloat::bfloat16
                                                 : kernels::StoredFloat::float32;
  }

  [[noreturn]] void rethrow(const std::string& name, const std::exception& error) const {
    attnscope::detail::throw_io_error("load_huggingface_model", folder_, "tensor '", name, "': ", error.what());
  }
};

/// The rows of a fused out × in weight (or the entries of a fused bias) that belong to one of its parts: `blocks` runs
/// of `count` rows starting at first, first + stride, first + 2·stride, … (blocks = 1: one contiguous row range, as
/// Phi-3's qkv_proj and gate_up_proj; GPT-NeoX's per-head q|k|v: one run per head).
template <class Fused>
Fused fused_rows(const Fused& fused, Index first, Index count, Index stride = 0, Index blocks = 1) {
  Fused part(count * blocks, fused.cols());
  for (Index b = 0; b < blocks; ++b) part.middleRows(b * count, count) = fused.middleRows(first + b * stride, count);
  return part;
}

/// The part rows of a fused weight matrix: a view for one contiguous range (Phi-3's qkv_proj and gate_up_proj, GPT-2's
/// c_attn), an owned float32 gather for several runs (GPT-NeoX's per-head q|k|v).
inline WeightMatrix fused_rows(const WeightMatrix& fused, Index first, Index count, Index stride = 0, Index blocks = 1) {
  if (blocks == 1) return fused.middle_rows(first, count);
  RowMatrix<float> part(count * blocks, fused.cols());
  for (Index b = 0; b < blocks; ++b)
    part.middleRows(b * count, count) = fused.middle_rows(first + b * stride, count).to_float32();
  return WeightMatrix(std::move(part));
}

/// The router and experts of one sparse layer (tensor names `at` + the table's names).
template <class Reader>
MixtureWeights read_mixture(const Reader& reader, const TransformerConfig& c, const TensorNames& n,
                            const std::string& at) {
  const MixtureOfExperts& m = c.moe;
  const Index dim = c.dim, experts = m.experts, h = m.expert_hidden_dim;
  MixtureWeights moe;
  moe.router = reader.matrix(at + n.router, experts, dim);
  if (m.router_bias) moe.router_bias = reader.vector(at + n.router_bias, experts);
  moe.experts.resize(std::size_t(experts));
  if (!n.expert_prefix.empty()) {  // one tensor set per expert, nn.Linear layout
    for (Index e = 0; e < experts; ++e) {
      const std::string expert = at + n.expert_prefix + std::to_string(e) + ".";
      ExpertWeights& weights = moe.experts[std::size_t(e)];
      weights.gate = reader.matrix(expert + n.expert_gate, h, dim);
      weights.up = reader.matrix(expert + n.expert_up, h, dim);
      weights.down = reader.matrix(expert + n.expert_down, dim, h);
    }
    return moe;
  }
  // stacked in one tensor per projection (the reader knows its storage layout): gate|up fused (Hugging Face gpt-oss)
  // or apart (GGUF)
  const bool fused = !n.stacked_gate_up.empty();
  std::vector<WeightMatrix> gate_up, gate, up;
  if (fused) {
    gate_up = reader.expert_matrices(at + n.stacked_gate_up, experts, 2 * h, dim, n.mxfp4_experts);
  } else {
    gate = reader.expert_matrices(at + n.stacked_gate, experts, h, dim, n.mxfp4_experts);
    up = reader.expert_matrices(at + n.stacked_up, experts, h, dim, n.mxfp4_experts);
  }
  const std::vector<WeightMatrix> down = reader.expert_matrices(at + n.stacked_down, experts, dim, h, n.mxfp4_experts);
  RowMatrix<float> gate_up_bias, gate_bias, up_bias, down_bias;
  if (m.expert_bias) {
    if (fused) {
      gate_up_bias = reader.expert_vectors(at + n.stacked_gate_up_bias, experts, 2 * h);
    } else {
      gate_bias = reader.expert_vectors(at + n.stacked_gate_bias, experts, h);
      up_bias = reader.expert_vectors(at + n.stacked_up_bias, experts, h);
    }
    down_bias = reader.expert_vectors(at + n.stacked_down_bias, experts, dim);
  }
  for (Index e = 0; e < experts; ++e) {
    ExpertWeights& weights = moe.experts[std::size_t(e)];
    const std::size_t i = std::size_t(e);
    if (fused) {
      weights.gate_up = gate_up[i];
    } else {
      weights.gate = gate[i];
      weights.up = up[i];
    }
    weights.down = down[i];
    if (!m.expert_bias) continue;
    if (fused) {
      weights.gate_up_bias = gate_up_bias.row(e).transpose();
    } else {
      weights.gate_bias = gate_bias.row(e).transpose();
      weights.up_bias = up_bias.row(e).transpose();
    }
    weights.down_bias = down_bias.row(e).transpose();
  }
  return moe;
}

/// Reads the weights an architecture table names (model/detail/architectures.hpp) in the layout its config asks for,
/// then refuses any stored tensor left unread that is not one of the table's known buffers.
template <class Reader>
TransformerWeights read_architecture(const Reader& reader, Architecture architecture) {
  const TransformerConfig& c = architecture.config;
  const TensorNames& n = architecture.names;
  const Index dim = c.dim, hidden = c.hidden_dim, query_dim = c.query_dim(), kv_dim = c.kv_dim();
  const bool pre_norms = c.norm_placement != NormPlacement::post, post_norms = c.norm_placement != NormPlacement::pre;
  const bool layer_norm = c.norm == NormKind::layer_norm, gated = is_gated(c.feed_forward);
  const Index q_norm_size = c.query_key_norm == QueryKeyNorm::per_head ? c.head_dim : query_dim;
  const Index k_norm_size = c.query_key_norm == QueryKeyNorm::per_head ? c.head_dim : kv_dim;
  // an nn.Linear weight (out × in), or a Conv1D one stored in × out (GPT-2) turned into out × in
  const auto linear_weight = [&](const std::string& name, Index out, Index in) -> WeightMatrix {
    if (n.conv1d) return linear_layout(reader.matrix(name, in, out));
    return reader.matrix(name, out, in);
  };
  TransformerWeights w;
  w.token_embedding = reader.matrix(n.embedding, c.vocab_size, dim);
  if (c.position_encoding == PositionEncoding::learned)
    w.position_embedding = reader.matrix(n.position_embedding, c.seq_len, dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string at = n.layer_prefix + std::to_string(l) + ".";
    TransformerLayerWeights layer;
    if (pre_norms) {
      layer.attention_norm = reader.vector(at + n.attention_norm, dim);
      if (layer_norm) layer.attention_norm_bias = reader.vector(at + n.attention_norm_bias, dim);
    }
    if (post_norms) layer.post_attention_norm = reader.vector(at + n.post_attention_norm, dim);
    if (!n.qkv.empty()) {
      const WeightMatrix fused = linear_weight(at + n.qkv, query_dim + 2 * kv_dim, dim);
      Vector<float> fused_bias;
      if (c.attention_qkv_bias) fused_bias = reader.vector(at + n.qkv_bias, query_dim + 2 * kv_dim);
      if (n.qkv_layout == FusedQkvLayout::per_head) {  // rows of head h: [q_h k_h v_h], each head_dim
        const Index d = c.head_dim, heads = c.n_heads;
        layer.wq = fused_rows(fused, 0, d, 3 * d, heads);
        layer.wk = fused_rows(fused, d, d, 3 * d, heads);
        layer.wv = fused_rows(fused, 2 * d, d, 3 * d, heads);
        if (c.attention_qkv_bias) {
          layer.wq_bias = fused_rows(fused_bias, 0, d, 3 * d, heads);
          layer.wk_bias = fused_rows(fused_bias, d, d, 3 * d, heads);
          layer.wv_bias = fused_rows(fused_bias, 2 * d, d, 3 * d, heads);
        }
      } else {  // rows: all q, all k, all v
        layer.wq = fused_rows(fused, 0, query_dim);
        layer.wk = fused_rows(fused, query_dim, kv_dim);
        layer.wv = fused_rows(fused, query_dim + kv_dim, kv_dim);
        if (c.attention_qkv_bias) {
          layer.wq_bias = fused_rows(fused_bias, 0, query_dim);
          layer.wk_bias = fused_rows(fused_bias, query_dim, kv_dim);
          layer.wv_bias = fused_rows(fused_bias, query_dim + kv_dim, kv_dim);
        }
      }
    } else {
      layer.wq = linear_weight(at + n.q, query_dim, dim);
      layer.wk = linear_weight(at + n.k, kv_dim, dim);
      layer.wv = linear_weight(at + n.v, kv_dim, dim);
      if (c.attention_qkv_bias) {
        layer.wq_bias = reader.vector(at + n.q_bias, query_dim);
        layer.wk_bias = reader.vector(at + n.k_bias, kv_dim);
        layer.wv_bias = reader.vector(at + n.v_bias, kv_dim);
      }
    }
    layer.wo = linear_weight(at + n.o, dim, query_dim);
    if (c.attention_output_bias) layer.wo_bias = reader.vector(at + n.o_bias, dim);
    if (c.query_key_norm != QueryKeyNorm::none) {
      layer.q_norm = reader.vector(at + n.q_norm, q_norm_size);
      layer.k_norm = reader.vector(at + n.k_norm, k_norm_size);
    }
    if (pre_norms) {
      layer.ffn_norm = reader.vector(at + n.ffn_norm, dim);
      if (layer_norm) layer.ffn_norm_bias = reader.vector(at + n.ffn_norm_bias, dim);
    }
    if (post_norms) layer.post_ffn_norm = reader.vector(at + n.post_ffn_norm, dim);
    if (c.learned_sinks) layer.sinks = reader.vector(at + n.sinks, c.n_heads);
    if (c.moe.is_sparse(l)) {
      layer.moe = read_mixture(reader, c, n, at);
    } else if (!n.gate_up.empty()) {  // rows: gate, then up
      const WeightMatrix fused = linear_weight(at + n.gate_up, 2 * hidden, dim);
      layer.w1 = fused_rows(fused, 0, hidden);
      layer.w3 = fused_rows(fused, hidden, hidden);
    } else {
      layer.w1 = linear_weight(at + n.gate, hidden, dim);
      if (gated) layer.w3 = linear_weight(at + n.up, hidden, dim);
    }
    if (!c.moe.is_sparse(l)) {
      layer.w2 = linear_weight(at + n.down, dim, hidden);
      if (c.feed_forward_bias) {
        layer.w1_bias = reader.vector(at + n.gate_bias, hidden);
        layer.w2_bias = reader.vector(at + n.down_bias, dim);
      }
    }
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = reader.vector(n.final_norm, dim);
  if (layer_norm) w.final_norm_bias = reader.vector(n.final_norm_bias, dim);
  std::vector<std::string> tolerated = n.buffers;
  if (!c.tied_embeddings) w.classifier = reader.matrix(n.output_head, c.vocab_size, dim);
  else tolerated.push_back(n.output_head);  // a tied checkpoint may store its head too; the tie decides
  reader.require_all_used(tolerated);
  w.config = std::move(architecture.config);
  return w;
}

}  // namespace detail

/// Reads the TransformerWeights of a Hugging Face model folder (config.json plus model.safetensors, or
/// model.safetensors.index.json and its shards; F32, F16 or BF16 weight matrices stay memory-mapped in their stored
/// format as WeightMatrix views, norm weights and biases are converted to float32) for model_type
/// gpt2, llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, gpt_neox, olmo2, gpt_oss, mixtral, qwen3_moe or
/// olmoe (docs/models.md). Throws
/// attnscope::io_error naming the folder and config.json or the tensor for: an unreadable folder, a missing or
/// unsupported model_type, a config feature not implemented (an unknown rope_type, another activation, ...), a
/// missing tensor, a tensor whose shape disagrees with config.json, a stored tensor the architecture does not use.
template <class Json = nlohmann::json>
TransformerWeights read_huggingface_weights(const std::string& folder) {
  const detail::HuggingFaceReader<Json> reader(folder);
  if (!reader.has("model_type")) reader.fail_config("missing field 'model_type'");
  const std::string model_type = reader.text("model_type", "");
  if (model_type == "gpt2") return detail::read_architecture(reader, detail::gpt2_architecture(reader));
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2")
    return detail::read_architecture(reader, detail::llama_architecture(reader, model_type));
  if (model_type == "qwen3") return detail::read_architecture(reader, detail::qwen3_architecture(reader));
  if (model_type == "gemma2" || model_type == "gemma3_text")
    return detail::read_architecture(reader, detail::gemma_architecture(reader, model_type));
  if (model_type == "phi3") return detail::read_architecture(reader, detail::phi3_architecture(reader));
  if (model_type == "gpt_neox") return detail::read_architecture(reader, detail::gpt_neox_architecture(reader));
  if (model_type == "olmo2") return detail::read_architecture(reader, detail::olmo2_architecture(reader));
  if (model_type == "gpt_oss") return detail::read_architecture(reader, detail::gpt_oss_architecture(reader));
  if (model_type == "mixtral") return detail::read_architecture(reader, detail::mixtral_architecture(reader));
  if (model_type == "qwen3_moe") return detail::read_architecture(reader, detail::qwen3_moe_architecture(reader));
  if (model_type == "olmoe") return detail::read_architecture(reader, detail::olmoe_architecture(reader));
  if (model_type == "gemma3")
    reader.fail_config("model_type 'gemma3' (the image-text model) is not supported: only the text decoder "
                       "(model_type 'gemma3_text') is");
  reader.fail_config("model_type '" + model_type +
                     "' is not supported (supported: gpt2, llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, "
                     "gpt_neox, olmo2, gpt_oss, mixtral, qwen3_moe, olmoe)");
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
extern template TransformerWeights read_huggingface_weights<nlohmann::json>(const std::string&);  // compiled part
#endif

/// A Hugging Face model folder as a Transformer (read_huggingface_weights, then the Transformer's own checks).
template <class Json = nlohmann::json>
Transformer load_huggingface_model(const std::string& folder) {
  return Transformer(read_huggingface_weights<Json>(folder));
}

}  // namespace attnscope::model
