// attnscope/io/mapped_arrays.hpp — NPY files and NPZ archives memory-mapped (io::MappedFile) and read in place: a
// C-order array of a stored (uncompressed) member is a view into the page cache, so a [H, L, d] float32 Q/K file of
// several GB is read on demand, one head at a time, never copied. Headers and the ZIP directory are parsed by the same
// code as read_npy/read_npz (detail::read_npy_header, detail::walk_npz_members). Members that cannot be viewed in
// place — deflated, Fortran order — are decoded into an owned copy instead (is_view() tells which). ZIP stores members
// at arbitrary byte offsets, so a stored member's data may be unaligned: slice_copy then copies one slice (one head).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define ATTNSCOPE_IO_RELEASE_PAGES 1
#else
#define ATTNSCOPE_IO_RELEASE_PAGES 0
#endif

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/mapped_file.hpp"
#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"

namespace attnscope::io {

/// One C-order array of a MappedArrays source: a view into the mapped file, or an owned decoded copy.
class MappedArray {
 public:
  MappedArray(std::string name, DType dtype, std::vector<std::int64_t> shape, const unsigned char* data)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)), data_(data) {}
  /// An owned copy (decoded member).
  MappedArray(std::string name, Array array)
      : name_(std::move(name)), dtype_(array.dtype()), shape_(array.shape()),
        owned_(std::make_shared<Array>(std::move(array))), data_(owned_->bytes().data()) {}

  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  /// The raw C-order bytes (little-endian, any alignment): into the map for a view, into the owned copy otherwise.
  const unsigned char* bytes() const { return data_; }
  /// True when the values are read in place from the mapped file (no copy).
  bool is_view() const { return owned_ == nullptr; }
  /// Number of elements (the product of the shape; 1 for a scalar).
  std::int64_t element_count() const {
    std::int64_t count = 1;
    for (const std::int64_t extent : shape_) count *= extent;
    return count;
  }
  /// Number of bytes of the values.
  std::size_t byte_count() const { return static_cast<std::size_t>(element_count()) * dtype_size(dtype_); }
  /// A copy of the values as an owning Array.
  Array to_array() const { return Array(dtype_, shape_, std::vector<unsigned char>(data_, data_ + byte_count())); }

  /// Number of slices: shape[0] for rank 3, 1 for rank 2, 0 otherwise.
  Index slice_count() const { return shape_.size() == 3 ? shape_[0] : (shape_.size() == 2 ? 1 : 0); }

  /// True when the values start at an address aligned to their item size, so values() and slice() can view them
  /// (ZIP places stored members at arbitrary offsets; slice_copy works either way).
  bool is_aligned() const { return reinterpret_cast<std::uintptr_t>(data_) % dtype_size(dtype_) == 0; }

  /// The values as Scalar (float for float32, double for float64; no conversion), viewed in place. Throws
  /// attnscope::io_error naming the array when its dtype differs or its data are not aligned (see slice_copy).
  template <class Scalar>
  const Scalar* values() const {
    require_dtype<Scalar>("MappedArray::values");
    if (!is_aligned())
      detail::throw_io_error("MappedArray::values", name_, "data are not aligned to ", sizeof(Scalar),
                             " bytes inside the file: use slice_copy");
    return reinterpret_cast<const Scalar*>(data_);
  }

  /// Slice `index` of a rank-3 array [N, rows, cols] (e.g. one head of [H, L, d]; a rank-2 array is the one slice 0)
  /// as a read-only row-major view into the file. Throws attnscope::io_error naming the array for another rank, a dtype mismatch, an index outside
  /// [0, N) or unaligned data.
  template <class Scalar>
  Eigen::Map<const RowMatrix<Scalar>> slice(Index index) const {
    const auto [rows, cols] = slice_shape("MappedArray::slice", index);
    return Eigen::Map<const RowMatrix<Scalar>>(values<Scalar>() + index * rows * cols, rows, cols);
  }

  /// Matrix `index` of the array read as [count, rows, cols] (the array's elements in C order; any leading axes
  /// flattened into `count`), converted to Scalar (float or double) from float32, float64, float16 or bfloat16, any
  /// alignment. With `release`, the whole pages of that matrix are then dropped from the process (see
  /// release_pages), so reading a large file matrix by matrix holds one matrix in memory. Throws attnscope::io_error
  /// naming the array for another dtype or a matrix outside the array.
  template <class Scalar>
  RowMatrix<Scalar> matrix(std::int64_t index, Index rows, Index cols, bool release = false) const {
    const char* fn = "MappedArray::matrix";
    const std::int64_t count = static_cast<std::int64_t>(rows) * cols;
    if (rows < 0 || cols < 0 || index < 0 || (index + 1) * count > element_count())
      detail::throw_io_error(fn, name_, "matrix ", index, " of ", rows, "x", cols, " is outside the array of shape ",
                             detail::shape_string(shape_));
    const std::size_t item = dtype_size(dtype_);
    const unsigned char* start = data_ + static_cast<std::size_t>(index * count) * item;
    RowMatrix<Scalar> out(rows, cols);
    auto widen = [&](auto stored_tag) {
      using Stored = decltype(stored_tag);
      for (std::int64_t i = 0; i < count; ++i) {
        Stored value;
        std::memcpy(&value, start + static_cast<std::size_t>(i) * sizeof(Stored), sizeof(Stored));
        out.data()[i] = static_cast<Scalar>(static_cast<float>(value));
      }
    };
    switch (dtype_) {
      case DType::float32: widen(float{}); break;
      case DType::float16: widen(Eigen::half{}); break;
      case DType::bfloat16: widen(Eigen::bfloat16{}); break;
      case DType::float64:
        for (std::int64_t i = 0; i < count; ++i) {
          double value;
          std::memcpy(&value, start + static_cast<std::size_t>(i) * sizeof(double), sizeof(double));
          out.data()[i] = static_cast<Scalar>(value);
        }
        break;
      default:
        detail::throw_io_error(fn, name_, "has dtype ", dtype_name(dtype_),
                               "; only float32, float64, float16 and bfloat16 convert to a matrix");
    }
    if (release) release_pages(static_cast<std::size_t>(index * count) * item, static_cast<std::size_t>(count) * item);
    return out;
  }

  /// Calls use(matrix) with slice `index` of a rank-2 or rank-3 array (as slice): a view into the file when the
  /// dtype is Scalar's and the data are aligned, else a converted copy of that one slice (matrix<Scalar>).
  template <class Scalar, class Use>
  void with_slice(Index index, Use&& use) const {
    if (dtype_ == dtype_of<Scalar>::value && is_aligned()) {
      use(slice<Scalar>(index));
      return;
    }
    const auto [rows, cols] = slice_shape("MappedArray::with_slice", index);
    use(matrix<Scalar>(index, rows, cols));
  }

  /// Drops the whole pages inside bytes [offset, offset + bytes) of a view from this process (madvise
  /// MADV_DONTNEED on the read-only file map: they stay in the page cache and are read again on access), so that
  /// a pass over a file larger than memory keeps only what it is using. Does nothing for an owned copy (on
  /// anonymous memory it would zero the values) or where madvise is unavailable.
  void release_pages(std::size_t offset = 0, std::size_t bytes = static_cast<std::size_t>(-1)) const {
#if ATTNSCOPE_IO_RELEASE_PAGES
    if (!is_view()) return;
    const std::size_t total = byte_count();
    if (offset >= total) return;
    bytes = std::min(bytes, total - offset);
    const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(data_) + offset;
    const std::uintptr_t begin = (address + page - 1) / page * page;
    const std::uintptr_t end = (address + bytes) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
    (void)offset;
    (void)bytes;
#endif
  }

  /// The same slice copied into a matrix (any alignment; memory of one slice). Throws as slice.
  template <class Scalar>
  RowMatrix<Scalar> slice_copy(Index index) const {
    require_dtype<Scalar>("MappedArray::slice_copy");
    const auto [rows, cols] = slice_shape("MappedArray::slice_copy", index);
    RowMatrix<Scalar> matrix(rows, cols);
    std::memcpy(matrix.data(), data_ + static_cast<std::size_t>(index * rows * cols) * sizeof(Scalar),
                static_cast<std::size_t>(rows * cols) * sizeof(Scalar));
    return matrix;
  }

 private:
  template <class Scalar>
  void require_dtype(const char* function) const {
    if (dtype_ != dtype_of<Scalar>::value)
      detail::throw_io_error(function, name_, "holds ", dtype_name(dtype_), ", not ", dtype_name(dtype_of<Scalar>::value));
  }

  std::pair<Index, Index> slice_shape(const char* function, Index index) const {
    if (shape_.size() != 2 && shape_.size() != 3)
      detail::throw_io_error(function, name_, "has shape ", detail::shape_string(shape_),
                             ", expected [N, rows, cols] or [rows, cols]");
    const std::int64_t slices = shape_.size() == 3 ? shape_[0] : 1;
    if (index < 0 || index >= slices)
      detail::throw_io_error(function, name_, "slice ", index, " is outside [0, ", slices, ")");
    return {static_cast<Index>(shape_[shape_.size() - 2]), static_cast<Index>(shape_[shape_.size() - 1])};
  }

  std::string name_;
  DType dtype_;
  std::vector<std::int64_t> shape_;
  std::shared_ptr<const Array> owned_;
  const unsigned char* data_ = nullptr;
};

/// The arrays of an .npy file (one array, named after the file without its directory and extension, e.g. "q" for
/// q.npy) or an .npz archive (named by member, without ".npy"), memory-mapped. Move-only; views live as long as the
/// object. Stored NPZ members are CRC-checked once when opened (one sequential read, unless verify_checksums is
/// false). Throws attnscope::io_error for a missing or corrupt file exactly as read_npy / read_npz do.
class MappedArrays {
 public:
  explicit MappedArrays(const std::string& path, bool verify_checksums = true) : file_(path) {
    const unsigned char* data = file_.data();
    const std::size_t size = file_.size();
    if (size >= 6 && std::memcmp(data, "\x93NUMPY", 6) == 0) {
      std::string stem = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
      if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".npy") == 0) stem.resize(stem.size() - 4);
      add_npy(stem, data, size, path);
      return;
    }
    detail::walk_npz_members(data, size, path, [&](const detail::ByteReader& reader, const detail::NpzMember& member) {
      if (member.method == 0) {
        if (verify_checksums) {
          std::vector<unsigned char> unused;
          detail::npz_member_content(reader, member, unused);
        }
        add_npy(member.key, member.stored, member.uncompressed_size, path + ":" + member.name);
      } else {  // deflated: decoded into memory by the ordinary reader
        std::vector<unsigned char> inflated;
        const unsigned char* content = detail::npz_member_content(reader, member, inflated);
        arrays_.emplace_back(member.key, parse_npy(content, member.uncompressed_size, path + ":" + member.name));
      }
    });
  }

  /// Names in file order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const MappedArray& array : arrays_) out.push_back(array.name());
    return out;
  }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  /// The array called `name`; throws attnscope::io_error naming the file and the name when absent.
  const MappedArray& at(const std::string& name) const {
    if (const MappedArray* array = find(name)) return *array;
    detail::throw_io_error("MappedArrays::at", file_.path(), "has no array '", name, "'");
  }
  const std::vector<MappedArray>& arrays() const { return arrays_; }
  const std::string& path() const { return file_.path(); }

 private:
  const MappedArray* find(const std::string& name) const {
    for (const MappedArray& array : arrays_)
      if (array.name() == name) return &array;
    return nullptr;
  }

  void add_npy(const std::string& name, const unsigned char* data, std::size_t size, const std::string& where) {
    detail::ByteReader reader(data, size, "MappedArrays", where);
    detail::NpyHeader header = detail::read_npy_header(reader);
    const unsigned char* payload = reader.take(header.byte_count, "data");
    if (header.dtype == DType::boolean || (header.fortran_order && header.shape.size() > 1))
      arrays_.emplace_back(name, parse_npy(data, size, where));  // decoded copy
    else
      arrays_.emplace_back(name, header.dtype, std::move(header.shape), payload);
  }

  MappedFile file_;
  std::vector<MappedArray> arrays_;
};

}  // namespace attnscope::io
