// attnscope/io/array_file.hpp — the arrays of one NPY, NPZ or safetensors file, memory-mapped, behind one type: the
// format is read from the first bytes (never the extension), every array is an io::MappedArray (name, dtype, shape,
// raw little-endian C-order bytes; a view into the map where possible, a decoded copy otherwise), and safetensors'
// __metadata__ strings are kept. Matrices are converted one at a time (MappedArray::matrix / with_slice) and their
// pages released, so a pass over a file larger than memory holds one matrix. Used by the capture reader
// (analysis/capture.hpp), `attnscope rowstats` and `attnscope merge`; write_array_file writes either format by the
// path's extension.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/mapped_arrays.hpp"
#include "attnscope/io/mapped_file.hpp"
#include "attnscope/io/mapped_safetensors.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"

namespace attnscope::io {

/// The container format of an ArrayFile.
enum class ArrayFileFormat { npy, npz, safetensors };

inline const char* array_file_format_name(ArrayFileFormat format) {
  switch (format) {
    case ArrayFileFormat::npy: return "NPY";
    case ArrayFileFormat::npz: return "NPZ";
    default: return "safetensors";
  }
}

/// The arrays of an NPY file (one array, named after the file's stem), an NPZ archive (named by member, without
/// ".npy") or a safetensors file (named by tensor), memory-mapped. Move-only; the arrays' views live as long as the
/// object. Stored NPZ members are CRC-checked when opened unless `verify_checksums` is false; the pages that check
/// touched are released afterwards. Throws attnscope::io_error naming the file for a missing file, a file that is none
/// of the three formats, or a corrupt one (the messages of read_npy / read_npz / read_safetensors).
class ArrayFile {
 public:
  explicit ArrayFile(const std::string& path, bool verify_checksums = true) : path_(path) {
    format_ = sniff(path);
    if (format_ == ArrayFileFormat::safetensors) {
      tensors_.emplace(path);
      for (const TensorView& view : tensors_->tensors()) arrays_.emplace_back(view.name, view.dtype, view.shape, view.data);
      metadata_ = tensors_->metadata();
    } else {
      mapped_.emplace(path, verify_checksums);
      arrays_ = mapped_->arrays();
    }
    for (const MappedArray& array : arrays_) array.release_pages();
  }

  const std::string& path() const { return path_; }
  ArrayFileFormat format() const { return format_; }
  /// The arrays in file order.
  const std::vector<MappedArray>& arrays() const { return arrays_; }
  /// Names in file order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const MappedArray& array : arrays_) out.push_back(array.name());
    return out;
  }
  /// The array called `name`, or nullptr.
  const MappedArray* find(const std::string& name) const {
    for (const MappedArray& array : arrays_)
      if (array.name() == name) return &array;
    return nullptr;
  }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  /// The array called `name`; throws attnscope::io_error naming the file and the name when absent.
  const MappedArray& at(const std::string& name) const {
    if (const MappedArray* array = find(name)) return *array;
    detail::throw_io_error("ArrayFile::at", path_, "has no array '", name, "'");
  }
  /// The safetensors __metadata__ strings (empty for NPY and NPZ, which have none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  /// NPY starts with "\x93NUMPY", NPZ (ZIP) with "PK", safetensors with an 8-byte little-endian header length
  /// followed by '{'.
  static ArrayFileFormat sniff(const std::string& path) {
    const MappedFile probe(path);
    const unsigned char* data = probe.data();
    const std::size_t size = probe.size();
    if (size >= 6 && std::memcmp(data, "\x93NUMPY", 6) == 0) return ArrayFileFormat::npy;
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') return ArrayFileFormat::npz;
    if (size >= 9 && data[8] == '{') return ArrayFileFormat::safetensors;
    detail::throw_io_error("ArrayFile", path, "is not an NPY, NPZ or safetensors file (", size,
                           " bytes; the format is read from the content, not the extension)");
  }

  std::string path_;
  ArrayFileFormat format_ = ArrayFileFormat::npz;
  std::optional<MappedArrays> mapped_;
  std::optional<MappedSafetensors> tensors_;
  std::vector<MappedArray> arrays_;
  std::map<std::string, std::string> metadata_;
};

/// Writes `arrays` to `path` in the format its extension names: .safetensors (with `metadata` in the header) or .npz
/// (`compression`; NPZ has no metadata, so `metadata` is not stored). Throws attnscope::invalid_argument for another
/// extension, io_error when the file cannot be written. The file is replaced whole or not at all (`listener` hears of
/// its temporary file, io/atomic_file.hpp).
inline void write_array_file(const std::string& path, const NamedArrays& arrays,
                             const std::map<std::string, std::string>& metadata = {},
                             Compression compression = Compression::stored,
                             TemporaryFileListener* listener = nullptr) {
  auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".safetensors")) write_safetensors(path, arrays, metadata, listener);
  else if (ends_with(".npz")) write_npz(path, arrays, compression, listener);
  else detail::throw_invalid_argument("write_array_file", "the path must end in .npz or .safetensors: ", path);
}

}  // namespace attnscope::io
