// attnscope/model/gguf.hpp — GGUF model files (llama.cpp's format) as a model::Transformer. The file is memory-mapped
// (io::GgufFile); weight matrices stay in their stored type (F32, F16, BF16, and the block formats of
// gguf_supported_types) as WeightMatrix views, dequantized panel by panel inside the products (model/detail/linear.hpp); norm weights and
// biases are converted to float32. Needs nlohmann-json (link attnscope::io) because it shares the generic tensor
// reader of model/huggingface.hpp.
//
// general.architecture and the `{arch}.*` keys fill a TransformerConfig; llama.cpp's tensor names (token_embd.weight,
// blk.{i}.attn_q.weight, output_norm.weight, …) form one TensorNames table per architecture; every tensor of the
// file must be used (an unknown tensor is an error naming it) and every needed tensor present.
//
// Conventions of llama.cpp's converter (convert_hf_to_gguf.py) that the loader undoes:
//   - llama: the rows of attn_q and attn_k are permuted within each head from Hugging Face's rotate-half order
//     (pairs (i, i + d/2)) to the interleaved order (pairs (2i, 2i + 1)): row 2i + j of a head holds Hugging Face row
//     j·d/2 + i. The loader runs interleaved RoPE on those rows, which gives the same attention (each query-key dot
//     product sums the same pairs, rotated by the same angles) without copying a weight;
//   - gpt_neox: the per-head [q_h k_h v_h] rows of query_key_value are regrouped into all q, all k, all v rows;
//   - gemma2: 1 is added to every RMSNorm weight, so the file's norms are plain RMSNorm weights;
//   - phi3: qkv_proj and gate_up_proj stay fused (attn_qkv, ffn_up with the gate rows first);
//   - a head tied to the embedding is stored once: output.weight is absent;
//   - Llama 3.1's rope_scaling (rope_type llama3) becomes the tensor rope_freqs.weight of per-frequency factors, read
//     as such (read_gguf_sizes).
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/gguf.hpp"
#include "attnscope/kernels/widen.hpp"
#include "attnscope/model/detail/architectures.hpp"
#include "attnscope/model/huggingface.hpp"
#include "attnscope/model/transformer.hpp"

namespace attnscope::model {

/// The ggml tensor types a GGUF weight may have: every row of kernels::stored_formats ("f32, f16, bf16, q8_0, …").
inline std::string gguf_supported_types() { return kernels::ggml_type_names(); }
/// The GGUF architectures (general.architecture) load_gguf_model reads.
inline const char* gguf_supported_architectures() { return "llama, qwen2, qwen3, gemma2, phi3, gpt_neox, gpt-oss"; }

namespace detail {

/// The stored format of ggml type `type`, or false when attnscope cannot dequantize it (kernels::stored_formats).
inline bool stored_format_of(io::GgmlType type, kernels::StoredFloat& format) {
  const kernels::StoredFormatInfo* row = kernels::stored_format_of_ggml_type(static_cast<std::uint32_t>(type));
  if (row != nullptr) format = row->format;
  return row != nullptr;
}

/// Reads the configuration keys and the tensors of one GGUF file for an architecture table, turning every problem
/// into an attnscope::io_error naming the file and the key or tensor. The same interface as HuggingFaceReader for
/// the generic tensor reader (matrix, vector, require_all_used).
class GgufReader {
 public:
  explicit GgufReader(const std::string& path) : file_(std::make_shared<io::GgufFile>(path)) {}

  const io::GgufFile& file() const { return *file_; }
  const std::string& path() const { return file_->path(); }
  /// general.architecture (io_error when missing or not a string).
  std::string architecture() const {
    if (!file_->has("general.architecture")) fail("missing metadata key 'general.architecture'");
    return file_->string("general.architecture");
  }

  [[noreturn]] void fail(const std::string& message) const {
    attnscope::detail::throw_io_error("load_gguf_model", path(), message);
  }

  bool has(const std::string& key) const { return file_->has(key); }

  /// A positive integer key (or `fallback` when absent and fallback > 0).
  int positive_integer(const std::string& key, int fallback = 0) const {
    if (!has(key)) {
      if (fallback > 0) return fallback;
      fail("missing metadata key '" + key + "'");
    }
    const std::int64_t value = file_->integer(key);
    if (value <= 0 || value > (std::int64_t(1) << 30))
      fail(attnscope::detail::concat("key '", key, "' = ", value, " is not a positive integer (byte offset ",
                                     file_->value(key).offset, ")"));
    return static_cast<int>(value);
  }

  /// A positive finite number key (or `fallback` when absent and fallback > 0).
  double positive_number(const std::string& key, double fallback = 0) const {
    if (!has(key)) {
      if (fallback > 0) return fallback;
      fail("missing metadata key '" + key + "'");
    }
    const double value = file_->number(key);
    if (!(value > 0) || !std::isfinite(value))
      fail(attnscope::detail::concat("key '", key, "' = ", value, " is not a positive number (byte offset ",
                                     file_->value(key).offset, ")"));
    return value;
  }

  bool boolean(const std::string& key, bool fallback) const { return has(key) ? file_->boolean(key) : fallback; }
  std::string text(const std::string& key, const std::string& fallback) const {
    return has(key) ? file_->string(key) : fallback;
  }

  bool has_tensor(const std::string& name) const { return file_->has_tensor(name); }

  /// Tensor `name` as a rows × cols WeightMatrix view in its stored type (GGUF dims {cols, rows}); io_error naming
  /// the file, the tensor and its info offset when missing, mis-shaped or of a type attnscope cannot dequantize.
  WeightMatrix matrix(const std::string& name, Index rows, Index cols) const {
    const io::GgufTensor& t = checked(name, {std::uint64_t(cols), std::uint64_t(rows)});
    kernels::StoredFloat format;
    stored_format_of(t.type, format);
    return WeightMatrix::view(format, t.data, rows, cols, file_, name + " in " + path());
  }

  /// Tensor `name` (dims {size}) as float32; io_error for a non-finite element, naming it.
  Vector<float> vector(const std::string& name, Index size) const {
    const io::GgufTensor& t = checked(name, {std::uint64_t(size)});
    kernels::StoredFloat format;
    stored_format_of(t.type, format);
    Vector<float> out(size);
    kernels::widen(t.data, format, size, out.data());
    for (Index i = 0; i < size; ++i)
      if (!std::isfinite(out[i]))
        fail(attnscope::detail::concat("tensor '", name, "' holds the non-finite value ", out[i], " at index ", i,
                                       " (data at byte offset ", t.file_offset, ")"));
    return out;
  }

  /// The `count` expert matrices (each out × in) of a stacked 3-D tensor `name` (GGUF dims {in, out, count}, llama.cpp's
  /// ffn_*_exps), each a view of its slice in the stored type; `mxfp4` is Hugging Face's storage flag, which GGUF's
  /// tensor types make unnecessary. Errors as matrix().
  std::vector<WeightMatrix> expert_matrices(const std::string& name, Index count, Index out, Index in,
                                            bool /*mxfp4*/) const {
    const io::GgufTensor& t = checked(name, {std::uint64_t(in), std::uint64_t(out), std::uint64_t(count)});
    kernels::StoredFloat format;
    stored_format_of(t.type, format);
    const std::size_t slice = kernels::stored_bytes(format, out * in);
    std::vector<WeightMatrix> matrices;
    for (Index e = 0; e < count; ++e)
      matrices.push_back(WeightMatrix::view(format, static_cast<const unsigned char*>(t.data) + std::size_t(e) * slice,
                                            out, in, file_, attnscope::detail::concat(name, "[", e, "] in ", path())));
    return matrices;
  }

  /// The `count` rows of a stacked bias `name` (GGUF dims {size, count}) as float32; errors as vector().
  RowMatrix<float> expert_vectors(const std::string& name, Index count, Index size) const {
    const io::GgufTensor& t = checked(name, {std::uint64_t(size), std::uint64_t(count)});
    kernels::StoredFloat format;
    stored_format_of(t.type, format);
    RowMatrix<float> out(count, size);
    kernels::widen(t.data, format, count * size, out.data());
    if (!out.allFinite()) fail(attnscope::detail::concat("tensor '", name, "' holds a non-finite value"));
    return out;
  }

  /// The rows (dims[1]) of a 2-D tensor, or 0 when absent.
  Index rows_of(const std::string& name) const {
    if (!has_tensor(name)) return 0;
    const io::GgufTensor& t = file_->tensor(name);
    return t.dims.size() >= 2 ? Index(t.dims[1]) : 0;
  }

  /// Throws an io_error naming the first tensor of the file that was not read and whose name does not end in one
  /// of `tolerated` (an unknown tensor: the file is not what its metadata says, or uses a feature not implemented).
  void require_all_used(const std::vector<std::string>& tolerated) const {
    for (const io::GgufTensor& t : file_->tensors()) {
      if (used_.count(t.name) != 0) continue;
      const bool ok = std::any_of(tolerated.begin(), tolerated.end(), [&](const std::string& suffix) {
        return t.name.size() >= suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
      });
      if (!ok)
        fail(attnscope::detail::concat("unknown tensor '", t.name, "' (", t.type_name(), ", info at byte offset ",
                                       t.info_offset, ") is not used by architecture '", architecture(),
                                       "' (the file does not hold the model its metadata describes, or uses a feature "
                                       "that is not implemented)"));
    }
  }

 private:
  std::shared_ptr<const io::GgufFile> file_;  // shared with the weight views
  mutable std::set<std::string> used_;

  const io::GgufTensor& checked(const std::string& name, const std::vector<std::uint64_t>& dims) const {
    if (!has_tensor(name))
      fail(attnscope::detail::concat("missing tensor '", name, "' (needed by architecture '", architecture(), "')"));
    const io::GgufTensor& t = file_->tensor(name);
    used_.insert(name);
    std::vector<std::uint64_t> stored = t.dims;
    while (stored.size() > dims.size() && stored.back() == 1) stored.pop_back();  // trailing unit dimensions
    if (stored != dims) {
      std::string want, have;
      for (const auto d : dims) want += (want.empty() ? "" : ", ") + std::to_string(d);
      for (const auto d : t.dims) have += (have.empty() ? "" : ", ") + std::to_string(d);
      fail(attnscope::detail::concat("tensor '", name, "' has dims {", have, "}, expected {", want,
                                     "} from the metadata (info at byte offset ", t.info_offset, ")"));
    }
    kernels::StoredFloat format;
    if (!stored_format_of(t.type, format))
      fail(attnscope::detail::concat("tensor '", name, "' has ggml type ", t.type_name(),
                                     ", which attnscope cannot dequantize (supported: ", gguf_supported_types(),
                                     "; info at byte offset ", t.info_offset, ")"));
    return t;
  }
};

/// llama.cpp's tensor names for the Llama layout (LLM_TENSOR_* of llama-arch.cpp); layer tensors under "blk.{i}.".
inline TensorNames gguf_llama_tensor_names() {
  TensorNames n;
  n.embedding = "token_embd.weight";
  n.final_norm = "output_norm.weight";
  n.output_head = "output.weight";
  n.layer_prefix = "blk.";
  n.attention_norm = "attn_norm.weight";
  n.ffn_norm = "ffn_norm.weight";
  n.q = "attn_q.weight";
  n.k = "attn_k.weight";
  n.v = "attn_v.weight";
  n.q_bias = "attn_q.bias";
  n.k_bias = "attn_k.bias";
  n.v_bias = "attn_v.bias";
  n.o = "attn_output.weight";
  n.q_norm = "attn_q_norm.weight";
  n.k_norm = "attn_k_norm.weight";
  n.gate = "ffn_gate.weight";
  n.up = "ffn_up.weight";
  n.down = "ffn_down.weight";
  return n;
}

/// The `{arch}.*` keys every architecture shares: sizes, RoPE base and rotated width, the context length; the vocab
/// from token_embd.weight (checked against {arch}.vocab_size when present).
inline void read_gguf_sizes(const GgufReader& r, const std::string& arch, TransformerConfig& c) {
  c.architecture = arch;
  c.dim = r.positive_integer(arch + ".embedding_length");
  c.hidden_dim = r.positive_integer(arch + ".feed_forward_length");
  c.n_layers = r.positive_integer(arch + ".block_count");
  c.n_heads = r.positive_integer(arch + ".attention.head_count");
  c.n_kv_heads = r.positive_integer(arch + ".attention.head_count_kv", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    r.fail(attnscope::detail::concat("key '", arch, ".attention.head_count_kv' = ", c.n_kv_heads,
                                     " does not divide the head count ", c.n_heads));
  if (!r.has(arch + ".attention.key_length") && c.dim % c.n_heads != 0)
    r.fail(attnscope::detail::concat("key '", arch, ".embedding_length' = ", c.dim,
                                     " is not divisible by the head count ", c.n_heads));
  c.head_dim = r.positive_integer(arch + ".attention.key_length", c.dim / c.n_heads);
  if (r.positive_integer(arch + ".attention.value_length", c.head_dim) != c.head_dim)
    r.fail("key '" + arch + ".attention.value_length' differs from the key length (not supported)");
  if (c.head_dim % 2 != 0) r.fail(attnscope::detail::concat("the head width ", c.head_dim, " is odd"));
  c.seq_len = r.positive_integer(arch + ".context_length");
  c.vocab_size = static_cast<int>(r.rows_of("token_embd.weight"));
  if (c.vocab_size <= 0) r.fail("missing 2-D tensor 'token_embd.weight' (needed for the vocabulary size)");
  if (r.has(arch + ".vocab_size") && r.positive_integer(arch + ".vocab_size") != c.vocab_size)
    r.fail(attnscope::detail::concat("key '", arch, ".vocab_size' disagrees with the ", c.vocab_size,
                                     " rows of token_embd.weight"));
  c.rope_theta = r.positive_number(arch + ".rope.freq_base", 10000.0);
  const int rotated = r.positive_integer(arch + ".rope.dimension_count", c.head_dim);
  if (rotated > c.head_dim || rotated % 2 != 0)
    r.fail(attnscope::detail::concat("key '", arch, ".rope.dimension_count' = ", rotated,
                                     " is not an even number ≤ the head width ", c.head_dim));
  c.rotary_dim = rotated == c.head_dim ? 0 : rotated;
  // RoPE scaling: none, or linear ({arch}.rope.scaling.factor, or the older {arch}.rope.scale_linear)
  const std::string scaling = r.text(arch + ".rope.scaling.type", "none");
  if (scaling == "linear" || (scaling == "none" && r.has(arch + ".rope.scale_linear"))) {
    const std::string key = r.has(arch + ".rope.scaling.factor") ? arch + ".rope.scaling.factor"
                                                                 : arch + ".rope.scale_linear";
    const double factor = r.positive_number(key);
    if (factor != 1) {
      c.rope_scaling.kind = RopeScalingKind::linear;
      c.rope_scaling.factor = factor;
    }
  } else if (scaling == "yarn") {
    // YaRN as llama.cpp runs it: the ramp's ends always rounded outward (truncate), the attention factor
    // 0.1·ln(factor) + 1 (model/rope.hpp)
    RopeScaling& y = c.rope_scaling;
    y.kind = RopeScalingKind::yarn;
    y.factor = r.positive_number(arch + ".rope.scaling.factor");
    y.original_max_positions = r.positive_integer(arch + ".rope.scaling.original_context_length");
    y.beta_fast = r.positive_number(arch + ".rope.scaling.yarn_beta_fast", 32.0);
    y.beta_slow = r.positive_number(arch + ".rope.scaling.yarn_beta_slow", 1.0);
    y.truncate = true;
    y.attention_factor = y.factor <= 1 ? 1.0 : 0.1 * std::log(y.factor) + 1.0;
  } else if (scaling != "none") {
    r.fail("key '" + arch + ".rope.scaling.type' = '" + scaling + "' is not supported (only none, linear and yarn)");
  }
  // Per-frequency RoPE factors: llama.cpp's converter stores Llama 3.1's rope scaling (rope_type llama3) as the tensor
  // rope_freqs.weight, e_i = 1 / ((1 − a_i)/s + a_i) in the notation of model/rope.hpp (1 for short wavelengths, s for
  // long ones), and llama.cpp rotates pair i by the angle p·f_i/e_i at every position. That is LongRoPE's machinery
  // (f_i/e_i, rope_frequencies) with the same factors below and beyond L₀ and attention factor 1.
  if (r.has_tensor("rope_freqs.weight")) {
    if (c.rope_scaling.kind != RopeScalingKind::none)
      r.fail("tensor 'rope_freqs.weight' and key '" + arch + ".rope.scaling.type' both scale RoPE (not supported "
             "together)");
    const Vector<float> factors = r.vector("rope_freqs.weight", rotated / 2);
    for (Index i = 0; i < factors.size(); ++i)
      if (!(factors[i] > 0))
        r.fail(attnscope::detail::concat("tensor 'rope_freqs.weight' holds the factor ", factors[i], " at index ", i,
                                         " (RoPE frequency factors must be > 0)"));
    c.rope_scaling.kind = RopeScalingKind::longrope;
    c.rope_scaling.short_factor.assign(factors.data(), factors.data() + factors.size());
    c.rope_scaling.long_factor = c.rope_scaling.short_factor;
    c.rope_scaling.original_max_positions = c.seq_len;
    c.rope_scaling.attention_factor = 1;
  }
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"})
    if (r.has_tensor(name)) r.fail(std::string("tensor '") + name + "' (LongRoPE factors) is not supported");
  c.tied_embeddings = !r.has_tensor("output.weight");
}

/// RMSNorm with {arch}.attention.layer_norm_rms_epsilon.
inline void read_gguf_rms_norm(const GgufReader& r, const std::string& arch, TransformerConfig& c) {
  c.norm = NormKind::rms_norm;
  c.norm_epsilon = static_cast<float>(r.positive_number(arch + ".attention.layer_norm_rms_epsilon"));
}

/// llama, qwen2, qwen3: RMSNorm, SwiGLU; llama's Q/K rows permuted to interleaved pairs by the converter (see the header
/// comment), qwen2's q/k/v biases, qwen3's per-head q/k norms.
inline Architecture gguf_llama_architecture(const GgufReader& r, const std::string& arch) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_gguf_sizes(r, arch, c);
  read_gguf_rms_norm(r, arch, c);
  c.feed_forward = FeedForwardKind::swiglu;
  c.position_encoding = arch == "llama" ? PositionEncoding::rope_interleaved : PositionEncoding::rope_rotate_half;
  c.attention_qkv_bias = arch == "qwen2";
  if (arch == "llama")
    for (const auto& [tensor, what] : {std::pair<const char*, const char*>{"blk.0.attn_q.bias", "attention biases"},
                                       {"blk.0.ffn_gate.bias", "MLP biases"}})
      if (r.has_tensor(tensor))
        r.fail(std::string("tensor '") + tensor + "' (" + what + ") is not supported for architecture 'llama'");
  if (arch == "qwen3") c.query_key_norm = QueryKeyNorm::per_head;
  a.names = gguf_llama_tensor_names();
  return a;
}

/// gemma2: sandwich norms (the converter stored 1 + w: plain RMSNorm here), GeGLU, embeddings × √dim, softcaps, even
/// layers sliding.
inline Architecture gguf_gemma2_architecture(const GgufReader& r, const std::string& arch) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_gguf_sizes(r, arch, c);
  read_gguf_rms_norm(r, arch, c);
  c.position_encoding = PositionEncoding::rope_rotate_half;
  c.norm_placement = NormPlacement::sandwich;
  c.feed_forward = FeedForwardKind::geglu_tanh;
  c.embedding_scale = static_cast<float>(std::sqrt(double(c.dim)));
  // llama.cpp scales Gemma 2's logits by 1/√head_dim except for the 27B shape, whose Hugging Face
  // query_pre_attn_scalar (embedding_length / head_count) GGUF does not store: refuse the shapes where they differ
  if (c.dim / c.n_heads != c.head_dim)
    r.fail(attnscope::detail::concat("gemma2 with embedding_length / head_count = ", c.dim / c.n_heads,
                                     " ≠ key_length = ", c.head_dim,
                                     ": the logit scale (query_pre_attn_scalar) is not stored in GGUF"));
  if (r.has(arch + ".attn_logit_softcapping")) c.attention_softcap = r.positive_number(arch + ".attn_logit_softcapping");
  if (r.has(arch + ".final_logit_softcapping"))
    c.final_logit_softcap = r.positive_number(arch + ".final_logit_softcapping");
  if (r.has(arch + ".attention.sliding_window")) {
    const int window = r.positive_integer(arch + ".attention.sliding_window");
    c.layer_sliding_window.assign(std::size_t(c.n_layers), 0);
    for (int l = 0; l < c.n_layers; l += 2) c.layer_sliding_window[std::size_t(l)] = window;  // even layers slide
  }
  TensorNames n = gguf_llama_tensor_names();
  n.post_attention_norm = "post_attention_norm.weight";
  n.post_ffn_norm = "post_ffw_norm.weight";
  a.names = n;
  return a;
}

/// phi3: fused attn_qkv and ffn_up (gate rows, then up rows), optional sliding window.
inline Architecture gguf_phi3_architecture(const GgufReader& r, const std::string& arch) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_gguf_sizes(r, arch, c);
  read_gguf_rms_norm(r, arch, c);
  c.position_encoding = PositionEncoding::rope_rotate_half;
  c.feed_forward = FeedForwardKind::swiglu;
  if (r.has(arch + ".attention.sliding_window")) c.sliding_window = r.positive_integer(arch + ".attention.sliding_window");
  TensorNames n = gguf_llama_tensor_names();
  n.q = n.k = n.v = n.q_bias = n.k_bias = n.v_bias = "";
  n.qkv = "attn_qkv.weight";
  n.gate = n.up = "";
  n.gate_up = "ffn_up.weight";
  a.names = n;
  return a;
}

/// gpt_neox: LayerNorm with biases, fused q|k|v regrouped by the converter, exact GELU MLP, parallel residual.
inline Architecture gguf_gpt_neox_architecture(const GgufReader& r, const std::string& arch) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_gguf_sizes(r, arch, c);
  if (c.n_kv_heads != c.n_heads) r.fail("gpt_neox with head_count_kv ≠ head_count is not supported");
  c.norm = NormKind::layer_norm;
  c.norm_epsilon = static_cast<float>(r.positive_number(arch + ".attention.layer_norm_epsilon"));
  c.position_encoding = PositionEncoding::rope_rotate_half;
  c.attention_qkv_bias = r.has_tensor("blk.0.attn_qkv.bias");
  c.attention_output_bias = r.has_tensor("blk.0.attn_output.bias");
  c.feed_forward = FeedForwardKind::gelu_erf;
  c.feed_forward_bias = true;
  c.parallel_residual = r.boolean(arch + ".use_parallel_residual", true);
  TensorNames n = gguf_llama_tensor_names();
  n.q = n.k = n.v = n.q_bias = n.k_bias = n.v_bias = "";
  n.qkv = "attn_qkv.weight";  // regrouped by the converter into all q, all k, all v
  n.qkv_bias = "attn_qkv.bias";
  n.o_bias = "attn_output.bias";
  n.attention_norm_bias = "attn_norm.bias";
  n.ffn_norm_bias = "ffn_norm.bias";
  n.final_norm_bias = "output_norm.bias";
  n.gate = "ffn_up.weight";  // the GELU MLP's input projection (dense_h_to_4h)
  n.gate_bias = "ffn_up.bias";
  n.up = "";
  n.down_bias = "ffn_down.bias";
  a.names = n;
  return a;
}

/// gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE): RMSNorm (the feed-forward's norm named post_attention_norm), q/k/v/o
/// biases, one learned sink per head (attn_sinks), NeoX (rotate-half) RoPE with yarn — truncated: llama.cpp always
/// rounds the ramp's ends outward, whatever Hugging Face's `truncate` said —, sliding-window layers every
/// {arch}.attention.sliding_window_pattern-th (default 2: even layers slide), every layer sparse: router ffn_gate_inp
/// with bias, top-k then softmax over those k, experts ffn_gate_exps / ffn_up_exps / ffn_down_exps with biases and the
/// clamped SwiGLU (limit 7, α 1.702, llama.cpp's constants).
inline Architecture gguf_gpt_oss_architecture(const GgufReader& r, const std::string& arch) {
  Architecture a;
  TransformerConfig& c = a.config;
  read_gguf_sizes(r, arch, c);
  read_gguf_rms_norm(r, arch, c);
  c.position_encoding = PositionEncoding::rope_rotate_half;
  c.attention_qkv_bias = c.attention_output_bias = true;
  c.learned_sinks = true;
  c.tied_embeddings = false;
  if (r.has(arch + ".attention.sliding_window")) {
    const int window = r.positive_integer(arch + ".attention.sliding_window");
    const int period = r.positive_integer(arch + ".attention.sliding_window_pattern", 2);
    c.layer_sliding_window.assign(std::size_t(c.n_layers), 0);
    for (int l = 0; l < c.n_layers; ++l)
      if (l % period < period - 1) c.layer_sliding_window[std::size_t(l)] = window;  // llama.cpp set_swa_pattern
  }
  MixtureOfExperts& m = c.moe;
  m.experts = r.positive_integer(arch + ".expert_count");
  m.experts_per_token = r.positive_integer(arch + ".expert_used_count");
  if (m.experts_per_token > m.experts)
    r.fail(attnscope::detail::concat("key '", arch, ".expert_used_count' = ", m.experts_per_token,
                                     " exceeds the expert count ", m.experts));
  m.expert_hidden_dim = r.positive_integer(arch + ".expert_feed_forward_length");
  c.hidden_dim = m.expert_hidden_dim;
  m.routing = RoutingKind::top_k_then_softmax;
  m.router_bias = m.expert_bias = true;
  m.activation = ExpertActivation::clamped_swiglu;
  m.swiglu_limit = 7.0;
  TensorNames n = gguf_llama_tensor_names();
  n.o_bias = "attn_output.bias";
  n.ffn_norm = "post_attention_norm.weight";
  n.gate = n.up = n.down = "";
  n.sinks = "attn_sinks.weight";
  n.router = "ffn_gate_inp.weight";
  n.router_bias = "ffn_gate_inp.bias";
  n.stacked_gate = "ffn_gate_exps.weight";
  n.stacked_gate_bias = "ffn_gate_exps.bias";
  n.stacked_up = "ffn_up_exps.weight";
  n.stacked_up_bias = "ffn_up_exps.bias";
  n.stacked_down = "ffn_down_exps.weight";
  n.stacked_down_bias = "ffn_down_exps.bias";
  a.names = n;
  return a;
}

/// One GGUF architecture: its general.architecture name and its table.
struct GgufArchitecture {
  const char* name;
  Architecture (*read)(const GgufReader&, const std::string&);
};

/// The GGUF architectures load_gguf_model reads, one table each.
inline constexpr GgufArchitecture gguf_architectures[] = {
    {"llama", gguf_llama_architecture},     {"qwen2", gguf_llama_architecture},
    {"qwen3", gguf_llama_architecture},     {"gemma2", gguf_gemma2_architecture},
    {"phi3", gguf_phi3_architecture},       {"gpt_neox", gguf_gpt_neox_architecture},
    {"gpt-oss", gguf_gpt_oss_architecture},
};

/// The architecture table of a GGUF file: config from its keys, llama.cpp's tensor names.
inline Architecture gguf_architecture(const GgufReader& r) {
  const std::string arch = r.architecture();
  for (const GgufArchitecture& entry : gguf_architectures)
    if (arch == entry.name) return entry.read(r, arch);
  r.fail("general.architecture '" + arch + "' is not supported (supported: " + gguf_supported_architectures() + ")");
}

}  // namespace detail

/// Reads the TransformerWeights of a GGUF model file (general.architecture llama, qwen2, qwen3, gemma2, phi3,
/// gpt_neox or gpt-oss; weights of the types of gguf_supported_types(), kept memory-mapped in their stored type). Throws
/// attnscope::io_error naming the file and the key or tensor (and the byte offset) for: a file that is not valid
/// GGUF (io::parse_gguf_header), an unsupported architecture or feature, a missing key, a missing tensor, a tensor
/// whose shape disagrees with the metadata or whose type cannot be dequantized, a tensor the architecture does not
/// use.
template <class Json = nlohmann::json>
TransformerWeights read_gguf_weights(const std::string& path) {
  const detail::GgufReader reader(path);
  return detail::read_architecture(reader, detail::gguf_architecture(reader));
}

/// A GGUF model file as a Transformer (read_gguf_weights, then the Transformer's own checks).
template <class Json = nlohmann::json>
Transformer load_gguf_model(const std::string& path) {
  return Transformer(read_gguf_weights<Json>(path));
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
extern template TransformerWeights read_gguf_weights<nlohmann::json>(const std::string&);  // compiled part
#endif

}  // namespace attnscope::model
