// attnscope/io/huggingface.hpp — a Hugging Face model folder as `save_pretrained` writes it: config.json, and the
// weights either in one model.safetensors or in shards listed by model.safetensors.index.json ("weight_map": tensor
// name → shard file). The shards are memory-mapped (MappedSafetensors); tensors are views, read in place
// (weight_tensor) or converted to float32 (from F32, F16 or BF16) when asked for, with their shape checked against
// what the caller expects.
// This layer knows nothing about architectures: it lists every tensor, including buffers such as GPT-2's
// h.{i}.attn.bias that a model ignores. Tokenizer files (tokenizer.json, vocab.json, merges.txt) are read elsewhere.
//
// The folder is a class template on the JSON type (HuggingFaceFolder = BasicHuggingFaceFolder<nlohmann::json>) so
// that including this header instantiates no JSON parser: its members are compiled only where they are used.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/mapped_safetensors.hpp"

namespace attnscope::io {

/// One tensor of a model folder: the view into its shard (name as stored, dtype, shape, bytes) and the shard's path.
struct HuggingFaceTensor : TensorView {
  std::string file;
};

namespace detail {

/// Reads and parses a JSON file; io_error naming the file when it is missing, unreadable or malformed.
template <class Json = nlohmann::json>
Json read_json_file(const std::string& path, const char* function) {
  if (!path_is_regular_file(path)) throw_io_error(function, path, "missing (no such file)");
  const std::vector<unsigned char> bytes = read_file(path);
  try {
    return Json::parse(bytes.begin(), bytes.end());
  } catch (const typename Json::exception& e) {
    throw_io_error(function, path, "malformed JSON: ", e.what());
  }
}

/// The prefixes under which Hugging Face checkpoints store a model's body (GPT2Model, LlamaModel, Qwen2Model).
inline const char* const huggingface_name_prefixes[] = {"transformer.", "model."};

}  // namespace detail

/// A Hugging Face model folder with safetensors weights. Move-only (it owns the maps); tensor views stay valid as
/// long as the folder object lives. Json is the type config() is parsed into; use the alias HuggingFaceFolder.
template <class Json>
class BasicHuggingFaceFolder {
 public:
  static constexpr const char* config_file_name = "config.json";
  static constexpr const char* single_file_name = "model.safetensors";
  static constexpr const char* index_file_name = "model.safetensors.index.json";

  /// Reads config.json and maps the weights: model.safetensors.index.json when present (every shard it names is
  /// mapped, every tensor it lists must be in its shard), else model.safetensors. Throws attnscope::io_error naming
  /// the file (and tensor) for: a folder that is not a directory, missing or malformed config.json or index, an index
  /// without a weight_map of strings, a shard name that is not a plain file name, a missing or truncated shard, a
  /// tensor listed in the index but absent from its shard, or a folder with neither weights file.
  explicit BasicHuggingFaceFolder(const std::string& folder) : folder_(folder) {
    const char* fn = "HuggingFaceFolder";
    if (!detail::path_is_directory(folder))
      detail::throw_io_error(fn, folder, "is not a directory (expected a Hugging Face model folder)");
    config_ = detail::read_json_file<Json>(path_of(config_file_name), fn);
    if (!config_.is_object()) detail::throw_io_error(fn, path_of(config_file_name), "is not a JSON object");

    const std::string index_path = path_of(index_file_name);
    if (detail::path_exists(index_path)) {
      load_sharded(index_path);
    } else if (detail::path_exists(path_of(single_file_name))) {
      shards_.emplace_back(path_of(single_file_name));
      for (const TensorView& view : shards_.back().tensors())
        tensors_.emplace(view.name, HuggingFaceTensor{view, shards_.back().path()});
    } else {
      detail::throw_io_error(fn, folder, "holds neither ", single_file_name, " nor ", index_file_name,
                             " (only safetensors weights are read; pytorch_model.bin is not supported)");
    }
  }

  const std::string& folder() const { return folder_; }
  /// The parsed config.json (a JSON object).
  const Json& config() const { return config_; }
  /// `folder/file_name`.
  std::string path_of(const std::string& file_name) const {
    return detail::join_path(folder_, file_name);
  }

  /// The stored names of all tensors, sorted.
  std::vector<std::string> tensor_names() const {
    std::vector<std::string> names;
    names.reserve(tensors_.size());
    for (const auto& entry : tensors_) names.push_back(entry.first);
    return names;
  }

  /// Whether `name` resolves to a stored tensor (see resolve_name).
  bool has_tensor(const std::string& name) const { return find(name) != nullptr; }

  /// The stored name `name` refers to: `name` itself, else — with a leading "transformer." or "model." of `name`
  /// removed — the bare name, "transformer." + bare name, "model." + bare name, in this order. So
  /// `h.0.attn.c_attn.weight` finds `transformer.h.0.attn.c_attn.weight` and `layers.0.self_attn.q_proj.weight`
  /// finds `model.layers.0.self_attn.q_proj.weight`. io_error naming the folder and the tensor when nothing matches.
  std::string resolve_name(const std::string& name) const { return tensor(name).name; }

  /// The tensor `name` refers to (see resolve_name); io_error naming the folder and the tensor when missing.
  const HuggingFaceTensor& tensor(const std::string& name) const {
    const HuggingFaceTensor* found = find(name);
    if (found == nullptr)
      detail::throw_io_error("HuggingFaceFolder::tensor", folder_, "no tensor '", name,
                             "' (also tried the prefixes 'transformer.' and 'model.'; the folder holds ", tensors_.size(),
                             " tensors)");
    return *found;
  }

  /// The tensor `name` refers to, read in place: its shape must equal `shape` and its dtype be F32, F16 or BF16
  /// (a weight). io_error naming the file and tensor otherwise. The view's bytes stay valid as long as the folder.
  const HuggingFaceTensor& weight_tensor(const std::string& name, const std::vector<std::int64_t>& shape) const {
    const char* fn = "HuggingFaceFolder::weight_tensor";
    const HuggingFaceTensor& stored = checked_tensor(fn, name, shape);
    if (stored.dtype != DType::float32 && stored.dtype != DType::float16 && stored.dtype != DType::bfloat16)
      detail::throw_io_error(fn, stored.file, "tensor '", stored.name, "' has dtype ", dtype_name(stored.dtype),
                             "; weights must be float32, float16 or bfloat16");
    return stored;
  }

  /// The tensor `name` refers to, read in place, with its shape and dtype checked (e.g. the U8 blocks and scales of
  /// MXFP4 weights); io_error naming the file and tensor otherwise.
  const HuggingFaceTensor& raw_tensor(const std::string& name, const std::vector<std::int64_t>& shape,
                                      DType dtype) const {
    const char* fn = "HuggingFaceFolder::raw_tensor";
    const HuggingFaceTensor& stored = checked_tensor(fn, name, shape);
    if (stored.dtype != dtype)
      detail::throw_io_error(fn, stored.file, "tensor '", stored.name, "' has dtype ", dtype_name(stored.dtype),
                             ", expected ", dtype_name(dtype));
    return stored;
  }

  /// Tensor `name` as a float32 matrix; its shape must be exactly [rows, cols] (no transposition: PyTorch Linear
  /// weights are [out, in], GPT-2 Conv1D weights [in, out]). io_error naming the file and tensor for a wrong shape,
  /// a dtype other than F32/F16/BF16, or a non-finite value.
  RowMatrix<float> matrix_float32(const std::string& name, Index rows, Index cols) const {
    const HuggingFaceTensor& stored = checked_tensor("HuggingFaceFolder::matrix_float32", name, {rows, cols});
    RowMatrix<float> matrix(rows, cols);
    detail::convert_to_float32(stored.data, stored.dtype, stored.element_count(), stored.file, stored.name,
                               matrix.data());
    return matrix;
  }

  /// Tensor `name` as a float32 vector; its shape must be exactly [size] (errors as matrix_float32).
  Vector<float> vector_float32(const std::string& name, Index size) const {
    const HuggingFaceTensor& stored = checked_tensor("HuggingFaceFolder::vector_float32", name, {size});
    Vector<float> vector(size);
    detail::convert_to_float32(stored.data, stored.dtype, stored.element_count(), stored.file, stored.name,
                               vector.data());
    return vector;
  }

  /// Tensor `name` converted to float32 in C order; its shape must equal `shape` (errors as matrix_float32).
  std::vector<float> values_float32(const std::string& name, const std::vector<std::int64_t>& shape) const {
    const HuggingFaceTensor& stored = checked_tensor("HuggingFaceFolder::values_float32", name, shape);
    std::vector<float> values(static_cast<std::size_t>(stored.element_count()));
    detail::convert_to_float32(stored.data, stored.dtype, stored.element_count(), stored.file, stored.name,
                               values.data());
    return values;
  }

 private:
  const HuggingFaceTensor* find(const std::string& name) const {
    if (const auto exact = tensors_.find(name); exact != tensors_.end()) return &exact->second;
    std::string bare = name;
    for (const std::string prefix : detail::huggingface_name_prefixes)
      if (name.compare(0, prefix.size(), prefix) == 0) bare = name.substr(prefix.size());
    if (const auto found = tensors_.find(bare); found != tensors_.end()) return &found->second;
    for (const char* prefix : detail::huggingface_name_prefixes)
      if (const auto prefixed = tensors_.find(prefix + bare); prefixed != tensors_.end()) return &prefixed->second;
    return nullptr;
  }

  const HuggingFaceTensor& checked_tensor(const char* function, const std::string& name,
                                          const std::vector<std::int64_t>& expected_shape) const {
    const HuggingFaceTensor& stored = tensor(name);
    if (stored.shape != expected_shape)
      detail::throw_io_error(function, stored.file, "tensor '", stored.name, "' has shape ",
                             detail::shape_string(stored.shape), " but ", detail::shape_string(expected_shape),
                             " was expected (from config.json)");
    return stored;
  }

  void load_sharded(const std::string& index_path) {
    const char* fn = "HuggingFaceFolder";
    const Json index = detail::read_json_file<Json>(index_path, fn);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      detail::throw_io_error(fn, index_path, "has no \"weight_map\" object");
    const Json& weight_map = index["weight_map"];
    std::map<std::string, std::string> first_tensor_of_shard;
    for (const auto& item : weight_map.items()) {
      if (!item.value().is_string() || item.key().empty())
        detail::throw_io_error(fn, index_path, "weight_map entry '", item.key(), "' is not a non-empty name mapped to a file name");
      const std::string shard = item.value().template get<std::string>();
      if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
          shard.find('\\') != std::string::npos)
        detail::throw_io_error(fn, index_path, "tensor '", item.key(), "' is mapped to '", shard,
                               "', which is not a plain file name inside the folder");
      first_tensor_of_shard.emplace(shard, item.key());
    }
    shards_.reserve(first_tensor_of_shard.size());  // the views point into the maps; no reallocation below
    std::map<std::string, const MappedSafetensors*> shard_by_name;
    for (const auto& [shard, first_tensor] : first_tensor_of_shard) {
      const std::string shard_path = path_of(shard);
      if (!detail::path_is_regular_file(shard_path))
        detail::throw_io_error(fn, shard_path, "shard named in ", index_file_name, " (for tensor '", first_tensor,
                               "' and others) is missing");
      shards_.emplace_back(shard_path);
      shard_by_name.emplace(shard, &shards_.back());
    }
    for (const auto& item : weight_map.items()) {
      const MappedSafetensors& shard = *shard_by_name.at(item.value().template get<std::string>());
      if (!shard.contains(item.key()))
        detail::throw_io_error(fn, shard.path(), "tensor '", item.key(), "' is listed in ", index_file_name,
                               " but absent from this shard");
      tensors_.emplace(item.key(), HuggingFaceTensor{shard.tensor(item.key()), shard.path()});
    }
  }

  std::string folder_;
  Json config_;
  std::vector<MappedSafetensors> shards_;
  std::map<std::string, HuggingFaceTensor> tensors_;
};

/// A Hugging Face model folder whose config.json is a nlohmann::json.
using HuggingFaceFolder = BasicHuggingFaceFolder<nlohmann::json>;

#ifdef ATTNSCOPE_EXTERN_TEMPLATES  // compiled part (src/extern_templates/io.cpp)
namespace detail {
extern template nlohmann::json read_json_file<nlohmann::json>(const std::string&, const char*);
}  // namespace detail
extern template class BasicHuggingFaceFolder<nlohmann::json>;
#endif

}  // namespace attnscope::io
