// tools/report_input.hpp — the attention arrays of `attnscope report`, read one head at a time from a memory-mapped
// NPY / NPZ / safetensors file: which arrays hold attention, scores and values (a capture's layer{i}.*, or one
// `attention` array with `scores` and `v` beside it), how a 4-D or 5-D array is laid out (--layout, --batch-index),
// and the per-head conversion to double. After a head is converted its pages are released (madvise), so the peak
// memory is one head plus what the columns compute, not the file.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define ATTNSCOPE_REPORT_RELEASE_PAGES 1
#else
#define ATTNSCOPE_REPORT_RELEASE_PAGES 0
#endif

#include <Eigen/Core>

#include "attnscope/analysis/row_check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/detect_format.hpp"
#include "attnscope/io/mapped_arrays.hpp"
#include "attnscope/io/mapped_safetensors.hpp"
#include "cli_arguments.hpp"

namespace attnscope::cli {

/// One array of the input: name, dtype, shape and its raw little-endian C-order bytes (into the map).
struct RawArray {
  std::string name;
  io::DType dtype = io::DType::float32;
  std::vector<std::int64_t> shape;
  const unsigned char* data = nullptr;
  bool mapped = true;  // the bytes are in the file map (false: a decoded copy, e.g. a deflated NPZ member)
};

/// How the axes before [q, k] of a 4-D attention array are read (--layout).
enum class AttentionLayout { layers_heads, batch_heads };

/// Where one head's matrices are: `position` indexes the leading axes (the same for attention, scores and values).
struct HeadLocation {
  int layer = 0, head = 0;
  const RawArray* attention = nullptr;
  const RawArray* scores = nullptr;
  const RawArray* values = nullptr;
  std::int64_t position = 0;
};

/// Unit roundoff of a stored floating-point dtype (analysis::unit_roundoff); integer dtypes are refused earlier.
inline double storage_roundoff(io::DType dtype) {
  switch (dtype) {
    case io::DType::float64: return analysis::unit_roundoff::float64;
    case io::DType::float16: return analysis::unit_roundoff::float16;
    case io::DType::bfloat16: return analysis::unit_roundoff::bfloat16;
    default: return analysis::unit_roundoff::float32;
  }
}

/// The arrays of a memory-mapped NPY, NPZ or safetensors file, and the heads to report.
class ReportInput {
 public:
  ReportInput(const std::string& path, io::FileFormat format) : path_(path) {
    if (format == io::FileFormat::safetensors) {
      tensors_.emplace(path);
      for (const io::TensorView& view : tensors_->tensors())
        arrays_.push_back({view.name, view.dtype, view.shape, view.data, true});
      metadata_ = tensors_->metadata();
    } else {
      mapped_.emplace(path);
      for (const io::MappedArray& array : mapped_->arrays())
        arrays_.push_back({array.name(), array.dtype(), array.shape(), array.bytes(), array.is_view()});
      if (format == io::FileFormat::npy && arrays_.size() == 1) arrays_[0].name = "attention";
    }
    // The CRC pass over stored NPZ members touched every page: drop them from this process's memory.
    for (const RawArray& array : arrays_)
      if (array.mapped) release(array.data, byte_count(array));
  }

  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<HeadLocation>& heads() const { return heads_; }
  std::int64_t query_rows() const { return query_rows_; }
  std::int64_t key_count() const { return key_count_; }
  io::DType attention_dtype() const { return heads_.empty() ? io::DType::float32 : heads_[0].attention->dtype; }
  /// Arrays the report does not read and that a capture does not write either (warned about).
  const std::vector<std::string>& ignored() const { return ignored_; }
  /// How a 4-D array was read, when it was (printed as a note).
  const std::string& layout_note() const { return layout_note_; }

  /// Finds attention (and scores, values) and lists the heads. Throws io_error naming the file for missing or
  /// misshapen arrays, usage_error for a layout that needs --batch-index.
  void locate(AttentionLayout layout, std::optional<std::int64_t> batch_index) {
    std::set<std::string> used;
    const std::regex per_layer(R"(layer(\d+)\.attention)");
    std::map<int, const RawArray*> layers;
    for (const RawArray& array : arrays_) {
      std::smatch match;
      if (std::regex_match(array.name, match, per_layer)) layers[std::stoi(match[1].str())] = &array;
    }
    if (!layers.empty()) {
      int expected = 0;
      for (const auto& [layer, attention] : layers) {
        if (layer != expected)
          attnscope::detail::throw_io_error("report", path_, "has layer", layer, ".attention but no layer", expected,
                                            ".attention (layers must be numbered 0, 1, ...)");
        ++expected;
        const std::string prefix = "layer" + std::to_string(layer) + ".";
        add_layer(layer, *attention, find(prefix + "scores"), find(prefix + "v"), AttentionLayout::layers_heads,
                  batch_index, true, used);
      }
    } else {
      const RawArray* attention = find("attention");
      if (!attention && arrays_.size() == 1) attention = &arrays_[0];
      if (!attention) {
        std::string names;
        for (std::size_t i = 0; i < arrays_.size() && i < 8; ++i) names += (i ? ", " : "") + arrays_[i].name;
        if (arrays_.size() > 8) names += ", ...";
        attnscope::detail::throw_io_error("report", path_, "holds ", arrays_.size(), " arrays (", names,
                                          ") but neither layer{i}.attention nor one named 'attention'");
      }
      add_layer(0, *attention, find("scores"), find("v"), layout, batch_index, false, used);
    }
    const std::regex captured(R"((layer\d+\.)?(q|k)|tokens|logits)");
    for (const RawArray& array : arrays_)
      if (!used.count(array.name) && !std::regex_match(array.name, captured)) ignored_.push_back(array.name);
  }

  /// Converts the matrix at element `offset` (rows × cols) of `array` to double and releases its pages.
  RowMatrix<double> matrix(const RawArray& array, std::int64_t position, std::int64_t rows, std::int64_t cols) const {
    RowMatrix<double> out(rows, cols);
    const std::size_t item = io::dtype_size(array.dtype);
    const unsigned char* start = array.data + static_cast<std::size_t>(position * rows * cols) * item;
    const std::int64_t count = rows * cols;
    auto widen = [&](auto tag) {
      using Stored = decltype(tag);
      for (std::int64_t i = 0; i < count; ++i) {
        Stored value;
        std::memcpy(&value, start + static_cast<std::size_t>(i) * sizeof(Stored), sizeof(Stored));
        out.data()[i] = static_cast<double>(static_cast<float>(value));
      }
    };
    switch (array.dtype) {
      case io::DType::float32: widen(float{}); break;
      case io::DType::float16: widen(Eigen::half{}); break;
      case io::DType::bfloat16: widen(Eigen::bfloat16{}); break;
      case io::DType::float64:
        for (std::int64_t i = 0; i < count; ++i) std::memcpy(out.data() + i, start + static_cast<std::size_t>(i) * 8, 8);
        break;
      default: break;  // refused by locate()
    }
    if (array.mapped) release(start, static_cast<std::size_t>(count) * item);
    return out;
  }

 private:
  const RawArray* find(const std::string& name) const {
    for (const RawArray& array : arrays_)
      if (array.name == name) return &array;
    return nullptr;
  }
  static std::size_t byte_count(const RawArray& array) {
    std::size_t count = io::dtype_size(array.dtype);
    for (const std::int64_t extent : array.shape) count *= static_cast<std::size_t>(extent);
    return count;
  }
  /// Drops the whole pages inside [data, data + bytes) of the read-only file map from the process (they stay in the
  /// page cache and are read again on access). Never for decoded copies: on anonymous memory this would zero them.
  static void release(const unsigned char* data, std::size_t bytes) {
#if ATTNSCOPE_REPORT_RELEASE_PAGES
    const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
    const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
    (void)data;
    (void)bytes;
#endif
  }

  [[noreturn]] void shape_error(const RawArray& array, const std::string& expected) const {
    attnscope::detail::throw_io_error("report", path_, "array '", array.name, "' has shape ",
                                      io::detail::shape_string(array.shape), ", expected ", expected);
  }

  void require_float(const RawArray& array) const {
    if (array.dtype != io::DType::float32 && array.dtype != io::DType::float64 && array.dtype != io::DType::float16 &&
        array.dtype != io::DType::bfloat16)
      attnscope::detail::throw_io_error("report", path_, "array '", array.name, "' has dtype ",
                                        io::dtype_name(array.dtype), "; attention, scores and v must be float32, "
                                        "float64, float16 or bfloat16");
  }

  /// Adds the heads of one attention array (a capture layer when `per_layer`, else the whole input).
  void add_layer(int layer, const RawArray& attention, const RawArray* scores, const RawArray* values,
                 AttentionLayout layout, std::optional<std::int64_t> batch_index, bool per_layer,
                 std::set<std::string>& used) {
    require_float(attention);
    const auto& shape = attention.shape;
    const std::size_t rank = shape.size();
    // Leading axes: (layers?, batch?, heads?) before [q, k].
    std::int64_t layers = 1, batch = 1, heads = 1;
    bool has_batch = false;
    if (rank == 2) {
    } else if (rank == 3) {
      heads = shape[0];
    } else if (rank == 4 && !per_layer && layout == AttentionLayout::layers_heads) {
      layers = shape[0];
      heads = shape[1];
      layout_note_ = "read the 4-D array " + io::detail::shape_string(shape) +
                     " as [layers, heads, q, k]; for a batch [batch, heads, q, k] give --layout batch,heads,q,k "
                     "--batch-index N";
    } else if (rank == 4) {  // [batch, heads, q, k]
      batch = shape[0];
      heads = shape[1];
      has_batch = true;
    } else if (rank == 5 && !per_layer) {  // [layers, batch, heads, q, k]
      layers = shape[0];
      batch = shape[1];
      heads = shape[2];
      has_batch = true;
    } else {
      shape_error(attention, per_layer ? "[heads, q, k] (or [batch, heads, q, k] with --batch-index)"
                                       : "[q, k], [heads, q, k], [layers, heads, q, k], [batch, heads, q, k] "
                                         "(--layout batch,heads,q,k) or [layers, batch, heads, q, k]");
    }
    std::int64_t b = 0;
    if (has_batch) {
      if (!batch_index && batch > 1)
        throw usage_error("the attention array '" + attention.name + "' " + io::detail::shape_string(shape) +
                          " has a batch axis of size " + std::to_string(batch) + ": choose one with --batch-index N");
      b = batch_index.value_or(0);
      if (b < 0 || b >= batch)
        throw usage_error("--batch-index " + std::to_string(b) + " is outside [0, " + std::to_string(batch) + ")");
    } else if (batch_index) {
      throw usage_error("--batch-index applies to arrays with a batch axis ([batch, heads, q, k] with --layout "
                        "batch,heads,q,k, or [layers, batch, heads, q, k])");
    }
    const std::int64_t rows = shape[rank - 2], cols = shape[rank - 1];
    if (rows < 1 || cols < 1) shape_error(attention, "non-empty [q, k] matrices");
    if (query_rows_ && (rows != query_rows_ || cols != key_count_))
      shape_error(attention, "[..., " + std::to_string(query_rows_) + ", " + std::to_string(key_count_) +
                                 "] like the other layers");
    query_rows_ = rows;
    key_count_ = cols;
    used.insert(attention.name);
    if (scores) {
      require_float(*scores);
      if (scores->shape != shape) shape_error(*scores, io::detail::shape_string(shape) + " (the attention's shape)");
      used.insert(scores->name);
    }
    if (values) {
      require_float(*values);
      std::vector<std::int64_t> leading(shape.begin(), shape.end() - 2), value_leading(values->shape.begin(),
                                                                                        values->shape.end() - (values->shape.size() >= 2 ? 2 : 0));
      if (values->shape.size() != rank || value_leading != leading || values->shape[rank - 2] != cols)
        shape_error(*values, "[..., " + std::to_string(cols) + ", d] with the attention's leading axes " +
                                 io::detail::shape_string(leading));
      used.insert(values->name);
    }
    for (std::int64_t l = 0; l < layers; ++l)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t position = ((l * batch) + b) * heads + h;
        heads_.push_back({static_cast<int>(per_layer ? layer : l), static_cast<int>(h), &attention, scores, values,
                          position});
      }
  }

  std::string path_;
  std::optional<io::MappedArrays> mapped_;
  std::optional<io::MappedSafetensors> tensors_;
  std::vector<RawArray> arrays_;
  std::map<std::string, std::string> metadata_;
  std::vector<HeadLocation> heads_;
  std::int64_t query_rows_ = 0, key_count_ = 0;
  std::vector<std::string> ignored_;
  std::string layout_note_;
};

}  // namespace attnscope::cli
