// attnscope/io/mapped_safetensors.hpp — a safetensors file read in place: the file is memory-mapped (io::MappedFile),
// the header is parsed and validated by the same parse_safetensors_header as the copying reader, and each tensor is
// a view (name, dtype, shape, bytes) into the map. Nothing of the data buffer is copied until a tensor is converted.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/mapped_file.hpp"
#include "attnscope/io/safetensors.hpp"

namespace attnscope::io {

/// One tensor of a mapped safetensors file: its bytes (C order, little-endian) point into the map and stay valid as
/// long as the MappedSafetensors (or the HuggingFaceFolder holding it) lives.
struct TensorView {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  const unsigned char* data = nullptr;
  std::size_t byte_count = 0;

  std::int64_t element_count() const { return static_cast<std::int64_t>(byte_count / dtype_size(dtype)); }
  /// A copy of the bytes as an owning Array.
  Array to_array() const { return Array(dtype, shape, std::vector<unsigned char>(data, data + byte_count)); }
};

namespace detail {

/// Converts `count` elements of F32, F16 or BF16 bytes to float32 into `out`: F32 is copied, F16 and BF16 are
/// widened by Eigen::half / Eigen::bfloat16 (exact: every binary16 and bfloat16 value is a float32). Throws
/// io_error naming `file` and `tensor_name` for any other dtype or a non-finite element.
inline void convert_to_float32(const unsigned char* data, DType dtype, std::int64_t count, const std::string& file,
                               const std::string& tensor_name, float* out) {
  const char* fn = "convert_to_float32";
  auto widen = [&](auto stored_type_tag) {
    using Stored = decltype(stored_type_tag);
    for (std::int64_t i = 0; i < count; ++i) {
      Stored value;
      std::memcpy(&value, data + static_cast<std::size_t>(i) * sizeof(Stored), sizeof(Stored));
      out[i] = static_cast<float>(value);
    }
  };
  switch (dtype) {
    case DType::float32: widen(float{}); break;
    case DType::float16: widen(Eigen::half{}); break;
    case DType::bfloat16: widen(Eigen::bfloat16{}); break;
    default:
      throw_io_error(fn, file, "tensor '", tensor_name, "' has dtype ", dtype_name(dtype),
                     "; only float32, float16 and bfloat16 weights can be converted to float32");
  }
  for (std::int64_t i = 0; i < count; ++i)
    if (!std::isfinite(out[i]))
      throw_io_error(fn, file, "tensor '", tensor_name, "' holds the non-finite value ", out[i], " at flat index ", i);
}

}  // namespace detail

/// A memory-mapped safetensors file. Move-only (it owns the map); the views stay valid across moves.
class MappedSafetensors {
 public:
  MappedSafetensors() = default;

  /// Maps `path` and validates its header (parse_safetensors_header). Throws attnscope::io_error naming the file
  /// (and the tensor) for a missing file, a malformed header, or a truncated file / offsets past its end.
  /// (A template on the JSON type, default nlohmann::json, so that the header parser is compiled only where a file
  /// is opened.)
  template <class Json = nlohmann::json>
  explicit MappedSafetensors(const std::string& path);

  const std::string& path() const { return file_.path(); }
  std::size_t file_size() const { return file_.size(); }
  /// The tensors in data-buffer order.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }

  /// The view of tensor `name`; io_error naming the file and the tensor when absent.
  const TensorView& tensor(const std::string& name) const {
    const auto found = index_.find(name);
    if (found == index_.end())
      detail::throw_io_error("MappedSafetensors::tensor", path(), "no tensor named '", name, "' (the file holds ",
                             tensors_.size(), " tensors)");
    return tensors_[found->second];
  }

  /// All elements of tensor `name` converted to float32 in C order (F32, F16, BF16 only; io_error otherwise).
  std::vector<float> float32_values(const std::string& name) const {
    const TensorView& view = tensor(name);
    std::vector<float> values(static_cast<std::size_t>(view.element_count()));
    detail::convert_to_float32(view.data, view.dtype, view.element_count(), path(), view.name, values.data());
    return values;
  }

 private:
  MappedFile file_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Defined outside the class, so that it is not inline: with the compiled part, the extern declaration below keeps
// every other translation unit from compiling it (and the JSON parser it instantiates).
template <class Json>
MappedSafetensors::MappedSafetensors(const std::string& path) : file_(path) {
  SafetensorsHeader header = parse_safetensors_header<Json>(file_.data(), file_.size(), path);
  metadata_ = std::move(header.metadata);
  const unsigned char* buffer = file_.data() + header.buffer_offset;
  tensors_.reserve(header.tensors.size());
  for (auto& entry : header.tensors) {
    index_.emplace(entry.name, tensors_.size());
    tensors_.push_back(TensorView{std::move(entry.name), entry.dtype, std::move(entry.shape), buffer + entry.begin,
                                  static_cast<std::size_t>(entry.end - entry.begin)});
  }
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
extern template MappedSafetensors::MappedSafetensors(const std::string&);  // compiled part (src/extern_templates/io.cpp)
#endif

}  // namespace attnscope::io
