// attnscope/io/capture_layout.hpp — the capture layout: how the per-layer, per-head matrices of a forward pass are
// named and stacked in an NPZ or safetensors file, written by `attnscope capture` (and attnscope.model in Python),
// read by `attnscope report` / `rowstats` and attnscope.analysis. The names, the version and the stacking are
// defined here and nowhere else; turning a model's ForwardResult into these arrays is analysis/capture.hpp.
//
// Layout version 1, per layer i (0, 1, ...), each [heads, rows, cols] float32:
//   layer{i}.q, layer{i}.k, layer{i}.v   [heads, L, head_size] (grouped-query k, v repeated for every query head)
//   layer{i}.scores                      [heads, L, L] scaled scores q·k/√d, masked entries −inf
//   layer{i}.attention                   [heads, L, L] row = query, masked entries 0
//   layer{i}.head_output                 [heads, L, head_size]
// plus `tokens` [L] int32, `logits` [L, vocab] float32 and `hidden_states` [layers + 1, L, dim].
// Layout version 2 adds, for models that have them:
//   layer{i}.learned_sink                [heads, L] float32: each row's share σ of a learned sink logit (gpt-oss);
//                                        layer{i}.attention then holds the weights over real keys, rows summing to 1 − σ
//   layer{i}.router_logits               [L, experts] float32 (Mixture-of-Experts layers)
//   layer{i}.experts                     [L, k] int32: the k experts of each token, by descending router logit
//   layer{i}.expert_weights              [L, k] float32: their routing weights
// A version-1 file reads as before (it has none of these). The version is recorded under capture_layout_key: a
// safetensors __metadata__ entry, and in an NPZ (which has no metadata) an int32 array [1] of that name. A file
// without it is read as version 1.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/array_file.hpp"

namespace attnscope::io {

/// The capture layout version this library writes; it reads versions 1..capture_layout_version.
inline constexpr int capture_layout_version = 2;
/// The safetensors metadata key, and the NPZ array name, holding the layout version.
inline constexpr const char* capture_layout_key = "attnscope_capture_layout";

/// The per-layer parts of a capture (the name after "layer{i}."), and the arrays outside the layers.
namespace capture_part {
inline constexpr const char* q = "q";
inline constexpr const char* k = "k";
inline constexpr const char* v = "v";
inline constexpr const char* scores = "scores";
inline constexpr const char* attention = "attention";
inline constexpr const char* head_output = "head_output";
inline constexpr const char* learned_sink = "learned_sink";
inline constexpr const char* router_logits = "router_logits";
inline constexpr const char* experts = "experts";
inline constexpr const char* expert_weights = "expert_weights";
inline constexpr const char* tokens = "tokens";
inline constexpr const char* logits = "logits";
inline constexpr const char* hidden_states = "hidden_states";
}  // namespace capture_part

/// The name of part `part` of layer `layer`: "layer3.attention". Per-layer outputs of the other commands
/// (`attnscope rowstats`: "layer3.entropy", "layer3.heads") use the same naming.
inline std::string layer_array_name(Index layer, const std::string& part) {
  return "layer" + std::to_string(layer) + "." + part;
}

/// A name split into its layer and part.
struct LayerArrayName {
  Index layer = 0;
  std::string part;
};

/// The layer and part of a name "layer{i}.{part}" (i decimal digits without sign, part non-empty), or nullopt for any
/// other name.
inline std::optional<LayerArrayName> parse_layer_array_name(const std::string& name) {
  const std::string prefix = "layer";
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::size_t i = prefix.size();
  Index layer = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') {
    if (layer > (Index(1) << 40)) return std::nullopt;
    layer = layer * 10 + (name[i] - '0');
    ++i;
  }
  if (i == prefix.size() || i + 1 >= name.size() || name[i] != '.') return std::nullopt;
  return LayerArrayName{layer, name.substr(i + 1)};
}

/// Per-head matrices (all of one shape) as one array [heads, rows, cols] of Scalar's dtype (float32 or float64).
/// Throws attnscope::invalid_argument for no heads or heads of different shapes.
template <class Scalar>
Array stack_heads(const std::vector<RowMatrix<Scalar>>& heads) {
  if (heads.empty()) detail::throw_invalid_argument("stack_heads", "no heads to stack");
  const Index rows = heads[0].rows(), cols = heads[0].cols();
  std::vector<Scalar> values;
  values.reserve(static_cast<std::size_t>(heads.size()) * static_cast<std::size_t>(rows * cols));
  for (std::size_t h = 0; h < heads.size(); ++h) {
    if (heads[h].rows() != rows || heads[h].cols() != cols)
      detail::throw_invalid_argument("stack_heads", "head ", h, " is ", heads[h].rows(), "x", heads[h].cols(),
                                     ", head 0 is ", rows, "x", cols);
    values.insert(values.end(), heads[h].data(), heads[h].data() + heads[h].size());
  }
  return Array::from_vector(values, {static_cast<std::int64_t>(heads.size()), rows, cols});
}

/// The capture layout version of a file: its capture_layout_key entry (safetensors metadata or NPZ array), 1 when
/// it has none. Throws attnscope::io_error naming the file for an entry that is not a positive integer, or a version
/// newer than this library reads.
inline int capture_file_layout_version(const ArrayFile& file) {
  const char* fn = "capture_file_layout_version";
  long long version = 1;
  std::string where;
  if (const auto entry = file.metadata().find(capture_layout_key); entry != file.metadata().end()) {
    where = "metadata entry";
    const std::string& text = entry->second;
    std::size_t used = 0;
    try {
      version = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (text.empty() || used != text.size())
      detail::throw_io_error(fn, file.path(), "has ", capture_layout_key, " = '", text,
                             "' in its metadata; expected a layout version (an integer)");
  } else if (const MappedArray* array = file.find(capture_layout_key)) {
    where = "array";
    if ((array->dtype() != DType::int32 && array->dtype() != DType::int64) || array->element_count() != 1)
      detail::throw_io_error(fn, file.path(), "has an array ", capture_layout_key, " of dtype ",
                             dtype_name(array->dtype()), " and shape ", detail::shape_string(array->shape()),
                             "; expected one int32 (the capture layout version)");
    if (array->dtype() == DType::int32) {
      std::int32_t value;
      std::memcpy(&value, array->bytes(), sizeof value);
      version = value;
    } else {
      std::int64_t value;
      std::memcpy(&value, array->bytes(), sizeof value);
      version = value;
    }
  }
  if (version < 1 || version > capture_layout_version)
    detail::throw_io_error(fn, file.path(), "has capture layout version ", version, " (", capture_layout_key, " ",
                           where, "); this attnscope reads versions 1 to ", capture_layout_version,
                           (version > capture_layout_version ? " (written by a newer attnscope?)" : ""));
  return static_cast<int>(version);
}

/// The queries and keys of one layer of a Q/K file.
struct QueryKeyLayer {
  Index layer = 0;
  const MappedArray* q = nullptr;
  const MappedArray* k = nullptr;
};

/// The Q/K layers of a file, by layer: the capture's layer{i}.q and layer{i}.k, or else `q` and `k` (layer 0). The
/// capture layout version is checked first (capture_file_layout_version). Throws attnscope::io_error naming the file
/// for a layer with q but no k, or neither form.
inline std::vector<QueryKeyLayer> query_key_layers(const ArrayFile& file) {
  const char* fn = "query_key_layers";
  capture_file_layout_version(file);
  std::map<Index, QueryKeyLayer> layers;
  for (const MappedArray& array : file.arrays()) {
    const auto name = parse_layer_array_name(array.name());
    if (!name || name->part != capture_part::q) continue;
    const std::string key_name = layer_array_name(name->layer, capture_part::k);
    const MappedArray* keys = file.find(key_name);
    if (!keys) detail::throw_io_error(fn, file.path(), "has ", array.name(), " but no ", key_name);
    layers[name->layer] = QueryKeyLayer{name->layer, &array, keys};
  }
  std::vector<QueryKeyLayer> out;
  for (const auto& entry : layers) out.push_back(entry.second);
  if (out.empty() && file.contains(capture_part::q) && file.contains(capture_part::k))
    out.push_back({0, &file.at(capture_part::q), &file.at(capture_part::k)});
  if (out.empty())
    detail::throw_io_error(fn, file.path(), "holds neither ", layer_array_name(0, capture_part::q), " / ",
                           layer_array_name(0, capture_part::k), ", ... (one pair per layer) nor ", capture_part::q,
                           " / ", capture_part::k, " arrays");
  return out;
}

/// Writes capture arrays with the layout version: a .safetensors path gets it in the metadata (with `metadata`),
/// a .npz path as the array capture_layout_key (NPZ has no metadata, so `metadata` is not stored). `arrays` must
/// not already hold that name. Throws attnscope::invalid_argument for a clashing name or another extension
/// (write_array_file), io_error when the file cannot be written. The file is replaced whole or not at all
/// (`listener` hears of its temporary file, io/atomic_file.hpp).
inline void write_capture_file(const std::string& path, NamedArrays arrays,
                               std::map<std::string, std::string> metadata = {},
                               Compression compression = Compression::stored,
                               TemporaryFileListener* listener = nullptr) {
  for (const auto& entry : arrays)
    if (entry.first == capture_layout_key)
      detail::throw_invalid_argument("write_capture_file", "the array name ", capture_layout_key,
                                     " is reserved for the layout version");
  const bool safetensors = path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
  if (safetensors) metadata[capture_layout_key] = std::to_string(capture_layout_version);
  else arrays.emplace_back(capture_layout_key, Array::from_vector(std::vector<std::int32_t>{capture_layout_version}, {1}));
  write_array_file(path, arrays, metadata, compression, listener);
}

/// A paragraph describing the capture layout, for usage texts and messages.
inline std::string capture_layout_description() {
  const std::string l = layer_array_name(0, "").substr(0, 5) + "{i}.";
  return "per layer i: " + l + capture_part::q + ", " + l + capture_part::k + ", " + l + capture_part::v +
         " [heads, L, head_size] (k and v of grouped-query attention are copied to every query head of the group), " +
         l + capture_part::scores + " [heads, L, L] (q.k/sqrt(head_size), future entries -inf), " + l +
         capture_part::attention + " [heads, L, L] (row = query, future entries 0), plus " + capture_part::tokens +
         " [L] (int32) and " + capture_part::logits + " [L, vocab] (float32); the layout version (" +
         std::to_string(capture_layout_version) + ") is stored as " + capture_layout_key +
         " (safetensors metadata, or an int32 array in an NPZ)";
}

}  // namespace attnscope::io
