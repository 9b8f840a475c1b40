// attnscope/io/llama2c.hpp — llama2.c checkpoints: legacy version 0 and the export.py versions 1 (fp32) and
// 2 (Q8_0), read (auto-detected), validated and written. Exact byte layouts: docs/api/io.md "llama2.c checkpoints".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/file.hpp"

namespace attnscope::io {

/// Hyper-parameters of a llama2.c model (the seven header integers plus the classifier flag).
struct LlamaConfig {
  int dim = 0;          ///< model width
  int hidden_dim = 0;   ///< SwiGLU hidden width
  int n_layers = 0;     ///< transformer blocks
  int n_heads = 0;      ///< query heads
  int n_kv_heads = 0;   ///< key/value heads (grouped-query attention: n_heads % n_kv_heads == 0)
  int vocab_size = 0;   ///< always positive here (version 0 stores the sign as the classifier flag)
  int seq_len = 0;      ///< maximum sequence length
  bool shared_classifier = true;  ///< classifier == token embedding

  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return dim / n_heads * n_kv_heads; }
};

/// One transformer block; matrices are nn.Linear weights (out_features × in_features), i.e. y = W x.
struct LlamaLayerWeights {
  Vector<float> rms_attention;  ///< dim
  Vector<float> rms_ffn;        ///< dim
  RowMatrix<float> wq;          ///< dim × dim
  RowMatrix<float> wk;          ///< kv_dim × dim
  RowMatrix<float> wv;          ///< kv_dim × dim
  RowMatrix<float> wo;          ///< dim × dim
  RowMatrix<float> w1;          ///< hidden_dim × dim (gate)
  RowMatrix<float> w2;          ///< dim × hidden_dim (down)
  RowMatrix<float> w3;          ///< hidden_dim × dim (up)
};

/// A whole checkpoint, dequantized to float32.
struct LlamaWeights {
  LlamaConfig config;
  RowMatrix<float> token_embedding;  ///< vocab × dim
  std::vector<LlamaLayerWeights> layers;
  Vector<float> rms_final;           ///< dim
  RowMatrix<float> classifier;       ///< vocab × dim, equal to token_embedding when shared
  int version = 0;                   ///< file format version read (0, 1 or 2)
  int group_size = 0;                ///< Q8_0 group size of a version-2 file, 0 otherwise
};

/// Sanity limits every reader and writer enforces (documented in docs/api/io.md).
inline constexpr int llama_max_dimension = 1 << 20;  ///< dim, hidden_dim, vocab_size, seq_len, heads
inline constexpr int llama_max_layers = 4096;
inline constexpr std::uint32_t llama_magic = 0x616b3432;  ///< "ak42" read as a little-endian uint32
inline constexpr std::size_t llama_versioned_header_bytes = 256;

namespace detail {

/// Empty when the configuration is usable, otherwise a description of the first problem found.
inline std::string llama_config_problem(const LlamaConfig& c) {
  const struct {
    const char* name;
    int value;
    int limit;
  } fields[] = {{"dim", c.dim, llama_max_dimension},          {"hidden_dim", c.hidden_dim, llama_max_dimension},
                {"n_layers", c.n_layers, llama_max_layers},     {"n_heads", c.n_heads, llama_max_dimension},
                {"n_kv_heads", c.n_kv_heads, llama_max_dimension}, {"vocab_size", c.vocab_size, llama_max_dimension},
                {"seq_len", c.seq_len, llama_max_dimension}};
  for (const auto& field : fields)
    if (field.value <= 0 || field.value > field.limit)
      return concat(field.name, " = ", field.value, " is outside [1, ", field.limit, "]");
  if (c.dim % c.n_heads != 0) return concat("dim = ", c.dim, " is not divisible by n_heads = ", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    return concat("n_kv_heads = ", c.n_kv_heads, " does not divide n_heads = ", c.n_heads);
  if (c.head_size() % 2 != 0) return concat("head_size = dim/n_heads = ", c.head_size(), " is odd (RoPE needs pairs)");
  return {};
}

/// The tensors of a checkpoint, identified independently of any allocation.
enum class LlamaTensor { token_embedding, rms_attention, rms_ffn, rms_final, wq, wk, wv, wo, w1, w2, w3, classifier,
                         rope_real, rope_imag };

/// One tensor in file order: which tensor, which layer (-1 for global ones), its shape and encoding.
struct LlamaTensorEntry {
  LlamaTensor tensor;
  int layer;
  std::uint64_t rows, cols;
  bool quantized;  ///< version 2: int8 values then one float32 scale per group
  std::uint64_t count() const { return rows * cols; }
};

inline const char* llama_tensor_name(LlamaTensor tensor) {
  switch (tensor) {
    case LlamaTensor::token_embedding: return "token_embedding";
    case LlamaTensor::rms_attention: return "rms_attention";
    case LlamaTensor::rms_ffn: return "rms_ffn";
    case LlamaTensor::rms_final: return "rms_final";
    case LlamaTensor::wq: return "wq";
    case LlamaTensor::wk: return "wk";
    case LlamaTensor::wv: return "wv";
    case LlamaTensor::wo: return "wo";
    case LlamaTensor::w1: return "w1";
    case LlamaTensor::w2: return "w2";
    case LlamaTensor::w3: return "w3";
    case LlamaTensor::classifier: return "classifier";
    case LlamaTensor::rope_real: return "freq_cis_real";
    case LlamaTensor::rope_imag: return "freq_cis_imag";
  }
  return "?";
}

inline std::string llama_entry_name(const LlamaTensorEntry& entry) {
  return entry.layer < 0 ? std::string(llama_tensor_name(entry.tensor))
                         : concat("layers[", entry.layer, "].", llama_tensor_name(entry.tensor));
}

/// File order of the tensors for a validated configuration (docs/api/io.md; llama2.c run.c / export.py).
inline std::vector<LlamaTensorEntry> llama_file_layout(const LlamaConfig& c, int version) {
  const std::uint64_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim(), vocab = c.vocab_size;
  const bool q = version == 2;
  std::vector<LlamaTensorEntry> entries;
  auto per_layer = [&](LlamaTensor tensor, std::uint64_t rows, std::uint64_t cols, bool quantized) {
    for (int l = 0; l < c.n_layers; ++l) entries.push_back({tensor, l, rows, cols, quantized});
  };
  auto global = [&](LlamaTensor tensor, std::uint64_t rows, std::uint64_t cols, bool quantized) {
    entries.push_back({tensor, -1, rows, cols, quantized});
  };
  if (version == 0) {
    global(LlamaTensor::token_embedding, vocab, dim, false);
    per_layer(LlamaTensor::rms_attention, 1, dim, false);
    per_layer(LlamaTensor::wq, dim, dim, false);
    per_layer(LlamaTensor::wk, kv, dim, false);
    per_layer(LlamaTensor::wv, kv, dim, false);
    per_layer(LlamaTensor::wo, dim, dim, false);
    per_layer(LlamaTensor::rms_ffn, 1, dim, false);
    per_layer(LlamaTensor::w1, hidden, dim, false);
    per_layer(LlamaTensor::w2, dim, hidden, false);
    per_layer(LlamaTensor::w3, hidden, dim, false);
    global(LlamaTensor::rms_final, 1, dim, false);
    global(LlamaTensor::rope_real, static_cast<std::uint64_t>(c.seq_len), c.head_size() / 2, false);
    global(LlamaTensor::rope_imag, static_cast<std::uint64_t>(c.seq_len), c.head_size() / 2, false);
  } else {
    per_layer(LlamaTensor::rms_attention, 1, dim, false);
    per_layer(LlamaTensor::rms_ffn, 1, dim, false);
    global(LlamaTensor::rms_final, 1, dim, false);
    global(LlamaTensor::token_embedding, vocab, dim, q);
    per_layer(LlamaTensor::wq, dim, dim, q);
    per_layer(LlamaTensor::wk, kv, dim, q);
    per_layer(LlamaTensor::wv, kv, dim, q);
    per_layer(LlamaTensor::wo, dim, dim, q);
    per_layer(LlamaTensor::w1, hidden, dim, q);
    per_layer(LlamaTensor::w2, dim, hidden, q);
    per_layer(LlamaTensor::w3, hidden, dim, q);
  }
  if (!c.shared_classifier) global(LlamaTensor::classifier, vocab, dim, q);
  return entries;
}

/// Bytes one entry occupies: 4 per float32, or 1 per int8 plus 4 per group scale when quantized.
inline std::uint64_t llama_entry_bytes(const LlamaTensorEntry& entry, int group_size) {
  return entry.quantized ? entry.count() + 4 * (entry.count() / static_cast<std::uint64_t>(group_size))
                         : 4 * entry.count();
}

/// Pointer to the float storage of an entry inside allocated weights (nullptr for the RoPE tables).
template <class Weights>
auto llama_entry_data(Weights& weights, const LlamaTensorEntry& entry) {
  auto& layer = weights.layers[static_cast<std::size_t>(entry.layer < 0 ? 0 : entry.layer)];
  switch (entry.tensor) {
    case LlamaTensor::token_embedding: return weights.token_embedding.data();
    case LlamaTensor::rms_attention: return layer.rms_attention.data();
    case LlamaTensor::rms_ffn: return layer.rms_ffn.data();
    case LlamaTensor::rms_final: return weights.rms_final.data();
    case LlamaTensor::wq: return layer.wq.data();
    case LlamaTensor::wk: return layer.wk.data();
    case LlamaTensor::wv: return layer.wv.data();
    case LlamaTensor::wo: return layer.wo.data();
    case LlamaTensor::w1: return layer.w1.data();
    case LlamaTensor::w2: return layer.w2.data();
    case LlamaTensor::w3: return layer.w3.data();
    case LlamaTensor::classifier: return weights.classifier.data();
    default: return decltype(weights.rms_final.data())(nullptr);
  }
}

/// Allocates every tensor of the configuration (uninitialised values).
inline void llama_allocate(LlamaWeights& w) {
  const LlamaConfig& c = w.config;
  w.token_embedding.resize(c.vocab_size, c.dim);
  w.layers.assign(static_cast<std::size_t>(c.n_layers), LlamaLayerWeights{});
  for (auto& layer : w.layers) {
    layer.rms_attention.resize(c.dim);
    layer.rms_ffn.resize(c.dim);
    layer.wq.resize(c.dim, c.dim);
    layer.wk.resize(c.kv_dim(), c.dim);
    layer.wv.resize(c.kv_dim(), c.dim);
    layer.wo.resize(c.dim, c.dim);
    layer.w1.resize(c.hidden_dim, c.dim);
    layer.w2.resize(c.dim, c.hidden_dim);
    layer.w3.resize(c.hidden_dim, c.dim);
  }
  w.rms_final.resize(c.dim);
  if (!c.shared_classifier) w.classifier.resize(c.vocab_size, c.dim);
}

/// Legacy RoPE table of a version-0 file, as export.py's precompute_freqs_cis (theta 10000, float32 angles):
/// angle(t, i) = t · 10000^(−2i/head_size); real part cos, imaginary part sin. [llama2.c export.py]
inline std::vector<float> llama_rope_table(const LlamaConfig& c, bool imaginary) {
  const int half = c.head_size() / 2;
  std::vector<float> table(static_cast<std::size_t>(c.seq_len) * static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(c.head_size());
    const float frequency = 1.0f / std::pow(10000.0f, exponent);
    for (int t = 0; t < c.seq_len; ++t) {
      const double angle = static_cast<double>(static_cast<float>(t) * frequency);
      table[static_cast<std::size_t>(t) * half + i] = static_cast<float>(imaginary ? std::sin(angle) : std::cos(angle));
    }
  }
  return table;
}

/// Throws io_error naming the tensor and index of the first non-finite value.
inline void llama_require_finite(const ByteReader& reader, const LlamaTensorEntry& entry, const float* values) {
  for (std::uint64_t i = 0; i < entry.count(); ++i)
    if (!std::isfinite(values[i]))
      reader.fail("non-finite weight ", values[i], " in ", llama_entry_name(entry), " at flat index ", i);
}

}  // namespace detail

namespace detail {

/// What a checkpoint's header says: configuration, version, Q8_0 group size, and the sizes they imply.
struct LlamaHeader {
  LlamaConfig config;
  int version = 0;
  int group_size = 0;
  std::uint64_t header_bytes = 0;   ///< 28 (version 0) or 256
  std::uint64_t expected_size = 0;  ///< the exact file size the header implies
};

/// Reads and validates the header at the reader's start (everything but the file's total size).
inline LlamaHeader llama_read_header(ByteReader& reader) {
  LlamaHeader header;
  LlamaConfig& c = header.config;
  header.header_bytes = 28;
  if (reader.size() >= 4 && reader.read<std::uint32_t>("magic") == llama_magic) {
    header.version = reader.read<std::int32_t>("version");
    if (header.version != 1 && header.version != 2)
      reader.fail("unsupported llama2c checkpoint version ", header.version, " (supported: 0, 1, 2)");
    header.header_bytes = llama_versioned_header_bytes;
  } else {
    reader.seek(0, "header");
  }
  c.dim = reader.read<std::int32_t>("dim");
  c.hidden_dim = reader.read<std::int32_t>("hidden_dim");
  c.n_layers = reader.read<std::int32_t>("n_layers");
  c.n_heads = reader.read<std::int32_t>("n_heads");
  c.n_kv_heads = reader.read<std::int32_t>("n_kv_heads");
  c.vocab_size = reader.read<std::int32_t>("vocab_size");
  c.seq_len = reader.read<std::int32_t>("seq_len");
  if (header.version == 0) {
    c.shared_classifier = c.vocab_size > 0;
    if (c.vocab_size < 0 && c.vocab_size != std::numeric_limits<int>::min()) c.vocab_size = -c.vocab_size;
  } else {
    const std::uint8_t flag = reader.read<std::uint8_t>("shared_classifier flag");
    if (flag > 1) reader.fail("shared_classifier flag must be 0 or 1, got ", int(flag));
    c.shared_classifier = flag == 1;
    if (header.version == 2) {
      header.group_size = reader.read<std::int32_t>("group_size");
      if (header.group_size <= 0 || header.group_size > llama_max_dimension)
        reader.fail("group_size = ", header.group_size, " is outside [1, ", llama_max_dimension, "]");
    }
    const std::size_t padding_start = reader.position();
    const unsigned char* padding = reader.take(header.header_bytes - padding_start, "header padding");
    for (std::size_t i = 0; i < header.header_bytes - padding_start; ++i)
      if (padding[i] != 0) reader.fail("nonzero header padding byte at offset ", padding_start + i);
  }
  if (const std::string problem = llama_config_problem(c); !problem.empty())
    reader.fail("invalid configuration: ", problem);
  header.expected_size = header.header_bytes;
  for (const auto& entry : llama_file_layout(c, header.version)) {
    if (entry.quantized && entry.count() % static_cast<std::uint64_t>(header.group_size) != 0)
      reader.fail(llama_entry_name(entry), " has ", entry.count(), " values, not a multiple of group_size ",
                  header.group_size);
    header.expected_size += llama_entry_bytes(entry, header.group_size);  // ≤ 2^58 by the limits: no overflow
  }
  return header;
}

}  // namespace detail

/// Parses a llama2.c checkpoint from memory, auto-detecting the version: a file starting with the magic
/// 0x616b3432 is version 1 or 2 (256-byte header), anything else is the header-less version 0.
/// Throws attnscope::io_error (naming `name_for_errors`) on a wrong version, an invalid or absurd
/// configuration, a size that differs from the one the configuration implies, or a non-finite weight.
inline LlamaWeights parse_llama2c(const unsigned char* data, std::size_t size, const std::string& name_for_errors) {
  detail::ByteReader reader(data, size, "parse_llama2c", name_for_errors);
  const detail::LlamaHeader header = detail::llama_read_header(reader);
  const LlamaConfig& c = header.config;
  if (header.expected_size != size)
    reader.fail("size ", size, " bytes does not match the ", header.expected_size, " bytes implied by version ",
                header.version, " configuration dim=", c.dim, " hidden_dim=", c.hidden_dim, " n_layers=", c.n_layers,
                " n_heads=", c.n_heads, " n_kv_heads=", c.n_kv_heads, " vocab_size=", c.vocab_size,
                " seq_len=", c.seq_len, " shared_classifier=", c.shared_classifier);

  LlamaWeights weights;
  weights.config = c;
  weights.version = header.version;
  weights.group_size = header.group_size;
  detail::llama_allocate(weights);
  for (const auto& entry : detail::llama_file_layout(c, weights.version)) {
    const std::string what = detail::llama_entry_name(entry);
    float* target = detail::llama_entry_data(weights, entry);
    if (target == nullptr) {  // version-0 legacy RoPE tables: skipped
      reader.take(detail::llama_entry_bytes(entry, 0), what.c_str());
      continue;
    }
    if (!entry.quantized) {
      std::memcpy(target, reader.take(4 * entry.count(), what.c_str()), 4 * entry.count());
    } else {
      // Q8_0 [llama2.c export.py quantize_q80 / runq.c dequantize]: x[i] = q[i] · scale[i / group_size].
      const std::uint64_t groups = entry.count() / static_cast<std::uint64_t>(weights.group_size);
      const unsigned char* values = reader.take(entry.count(), what.c_str());
      const unsigned char* scale_bytes = reader.take(4 * groups, what.c_str());
      for (std::uint64_t g = 0; g < groups; ++g) {
        float scale;
        std::memcpy(&scale, scale_bytes + 4 * g, 4);
        if (!std::isfinite(scale)) reader.fail("non-finite Q8_0 scale ", scale, " in ", what, " at group ", g);
        for (std::uint64_t i = g * weights.group_size; i < (g + 1) * weights.group_size; ++i) {
          std::int8_t q;
          std::memcpy(&q, values + i, 1);
          target[i] = static_cast<float>(q) * scale;
        }
      }
    }
    detail::llama_require_finite(reader, entry, target);
  }
  if (c.shared_classifier) weights.classifier = weights.token_embedding;
  return weights;
}

/// Reads a llama2.c checkpoint file (see parse_llama2c).
inline LlamaWeights read_llama2c(const std::string& path) {
  return detail::parse_file(path, parse_llama2c);
}

/// Serializes weights as a llama2.c checkpoint of version 0, 1 or 2 (Q8_0 with the given group size, which must
/// divide dim). Throws attnscope::invalid_argument for an invalid configuration, mismatched shapes, non-finite
/// weights, a shared classifier that differs from the embedding, or an unsupported version/group size.
inline std::string serialize_llama2c(const LlamaWeights& weights, int version, int group_size = 64) {
  const char* fn = "serialize_llama2c";
  const LlamaConfig& c = weights.config;
  if (version < 0 || version > 2) detail::throw_invalid_argument(fn, "version must be 0, 1 or 2, got ", version);
  if (const std::string problem = detail::llama_config_problem(c); !problem.empty())
    detail::throw_invalid_argument(fn, "invalid configuration: ", problem);
  if (version == 2 && (group_size <= 0 || c.dim % group_size != 0))
    detail::throw_invalid_argument(fn, "group_size = ", group_size, " must be positive and divide dim = ", c.dim);
  if (weights.layers.size() != static_cast<std::size_t>(c.n_layers))
    detail::throw_invalid_argument(fn, "config.n_layers = ", c.n_layers, " but ", weights.layers.size(),
                                   " layers are given");
  auto require_shape = [&](const char* what, Index rows, Index cols, Index expected_rows, Index expected_cols) {
    if (rows != expected_rows || cols != expected_cols)
      detail::throw_invalid_argument(fn, what, " has shape ", rows, "x", cols, ", expected ", expected_rows, "x",
                                     expected_cols);
  };
  require_shape("token_embedding", weights.token_embedding.rows(), weights.token_embedding.cols(), c.vocab_size, c.dim);
  require_shape("rms_final", weights.rms_final.size(), 1, c.dim, 1);
  for (const auto& layer : weights.layers) {
    require_shape("rms_attention", layer.rms_attention.size(), 1, c.dim, 1);
    require_shape("rms_ffn", layer.rms_ffn.size(), 1, c.dim, 1);
    require_shape("wq", layer.wq.rows(), layer.wq.cols(), c.dim, c.dim);
    require_shape("wk", layer.wk.rows(), layer.wk.cols(), c.kv_dim(), c.dim);
    require_shape("wv", layer.wv.rows(), layer.wv.cols(), c.kv_dim(), c.dim);
    require_shape("wo", layer.wo.rows(), layer.wo.cols(), c.dim, c.dim);
    require_shape("w1", layer.w1.rows(), layer.w1.cols(), c.hidden_dim, c.dim);
    require_shape("w2", layer.w2.rows(), layer.w2.cols(), c.dim, c.hidden_dim);
    require_shape("w3", layer.w3.rows(), layer.w3.cols(), c.hidden_dim, c.dim);
  }
  if (!c.shared_classifier)
    require_shape("classifier", weights.classifier.rows(), weights.classifier.cols(), c.vocab_size, c.dim);
  else if (weights.classifier.size() != 0 && weights.classifier != weights.token_embedding)
    detail::throw_invalid_argument(fn, "config.shared_classifier is true but classifier differs from token_embedding");

  std::string out;
  if (version == 0) {
    for (int value : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                      c.shared_classifier ? c.vocab_size : -c.vocab_size, c.seq_len})
      detail::append_little_endian<std::int32_t>(out, value);
  } else {
    detail::append_little_endian<std::uint32_t>(out, llama_magic);
    detail::append_little_endian<std::int32_t>(out, version);
    for (int value : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len})
      detail::append_little_endian<std::int32_t>(out, value);
    out.push_back(static_cast<char>(c.shared_classifier ? 1 : 0));
    if (version == 2) detail::append_little_endian<std::int32_t>(out, group_size);
    out.resize(llama_versioned_header_bytes, '\0');
  }
  for (const auto& entry : detail::llama_file_layout(c, version)) {
    const float* values = detail::llama_entry_data(weights, entry);
    std::vector<float> rope;
    if (values == nullptr) {
      rope = detail::llama_rope_table(c, entry.tensor == detail::LlamaTensor::rope_imag);
      values = rope.data();
    }
    for (std::uint64_t i = 0; i < entry.count(); ++i)
      if (!std::isfinite(values[i]))
        detail::throw_invalid_argument(fn, "non-finite weight ", values[i], " in ", detail::llama_entry_name(entry),
                                       " at flat index ", i);
    if (!entry.quantized) {
      out.append(reinterpret_cast<const char*>(values), 4 * entry.count());
      continue;
    }
    // Q8_0 [llama2.c export.py quantize_q80]: scale = max|w|/127 per group, q = round-half-even(w/scale).
    const std::uint64_t groups = entry.count() / static_cast<std::uint64_t>(group_size);
    std::vector<float> scales(groups);
    std::string quantized(entry.count(), '\0');
    for (std::uint64_t g = 0; g < groups; ++g) {
      float max_abs = 0;
      for (std::uint64_t i = g * group_size; i < (g + 1) * group_size; ++i) max_abs = std::max(max_abs, std::abs(values[i]));
      const float scale = max_abs / 127.0f;
      scales[g] = scale;
      for (std::uint64_t i = g * group_size; i < (g + 1) * group_size; ++i) {
        const float q = scale > 0 ? std::nearbyint(values[i] / scale) : 0.0f;
        quantized[i] = static_cast<char>(static_cast<std::int8_t>(std::max(-127.0f, std::min(127.0f, q))));
      }
    }
    out += quantized;
    out.append(reinterpret_cast<const char*>(scales.data()), 4 * groups);
  }
  return out;
}

/// Writes a llama2.c checkpoint file (see serialize_llama2c).
inline void write_llama2c(const std::string& path, const LlamaWeights& weights, int version, int group_size = 64) {
  write_file(path, serialize_llama2c(weights, version, group_size));
}

}  // namespace attnscope::io
