// attnscope/io/array.hpp — an n-dimensional array of one dtype as the file formats store it: a shape and
// contiguous C-order (row-major) little-endian bytes, converted to Eigen matrices or std::vector on request.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/file.hpp"

namespace attnscope::io {

/// Element types the NPY, NPZ and safetensors readers and writers support.
enum class DType { float32, float64, int32, int64, boolean, float16, bfloat16, uint8 };

/// Bytes per element.
inline std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::float32: case DType::int32: return 4;
    case DType::float64: case DType::int64: return 8;
    case DType::boolean: case DType::uint8: return 1;
    case DType::float16: case DType::bfloat16: return 2;
  }
  return 0;
}

/// Lower-case name ("float32", "bfloat16", ...).
inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::boolean: return "bool";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::uint8: return "uint8";
  }
  return "?";
}

/// The DType of a C++ scalar type (float, double, std::int32_t, std::int64_t, bool, Eigen::half, Eigen::bfloat16).
template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::float64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct dtype_of<Eigen::half> { static constexpr DType value = DType::float16; };
template <> struct dtype_of<Eigen::bfloat16> { static constexpr DType value = DType::bfloat16; };

namespace detail {

/// Largest rank an Array (and every format here) accepts; numpy's own limit is 32 (numpy 1.x) or 64 (numpy 2).
inline constexpr std::size_t max_rank = 64;

/// Product of the dims, or false when the rank exceeds max_rank, a dim is negative or the product exceeds 2^62.
inline bool shape_element_count(const std::vector<std::int64_t>& shape, std::uint64_t& count) {
  count = 1;
  if (shape.size() > max_rank) return false;
  for (std::int64_t dim : shape) {
    if (dim < 0) return false;
    const auto d = static_cast<std::uint64_t>(dim);
    if (d != 0 && count > (std::uint64_t{1} << 62) / d) return false;
    count *= d;
  }
  return true;
}

inline std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Converts one stored element to T. Integer targets require an integral, in-range value (no silent truncation).
template <class T, class Source>
T convert_element(Source value, std::uint64_t index) {
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<double>(value) != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_integral_v<Source>) {
      if (static_cast<std::int64_t>(value) < std::numeric_limits<T>::min() ||
          static_cast<std::int64_t>(value) > std::numeric_limits<T>::max())
        throw_invalid_argument("Array::to_vector", "element ", index, " = ", static_cast<std::int64_t>(value),
                               " is out of range of the requested integer type");
      return static_cast<T>(value);
    } else {
      const double x = static_cast<double>(value);
      if (!(x == std::floor(x)) || x < static_cast<double>(std::numeric_limits<T>::min()) ||
          x >= -2.0 * static_cast<double>(std::numeric_limits<T>::min()))
        throw_invalid_argument("Array::to_vector", "element ", index, " = ", x,
                               " is not an integer in range of the requested integer type");
      return static_cast<T>(x);
    }
  } else if constexpr (std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

}  // namespace detail

/// An n-dimensional array: dtype, shape (any rank; rank 0 = scalar) and C-order little-endian bytes.
class Array {
 public:
  Array() = default;

  /// Takes ownership of bytes; throws invalid_argument unless bytes.size() == product(shape) · dtype_size.
  Array(DType dtype, std::vector<std::int64_t> shape, std::vector<unsigned char> bytes)
      : dtype_(dtype), shape_(std::move(shape)), bytes_(std::move(bytes)) {
    std::uint64_t count = 0;
    if (!detail::shape_element_count(shape_, count))
      detail::throw_invalid_argument("Array", "invalid shape ", detail::shape_string(shape_));
    if (count * dtype_size(dtype_) != bytes_.size())
      detail::throw_invalid_argument("Array", "shape ", detail::shape_string(shape_), " of ", dtype_name(dtype_),
                                     " needs ", count * dtype_size(dtype_), " bytes, got ", bytes_.size());
  }

  /// A 2-D array (rows × cols, C order) from any Eigen matrix expression of a supported scalar type.
  template <class Derived>
  static Array from(const Eigen::MatrixBase<Derived>& matrix) {
    using Scalar = typename Derived::Scalar;
    const RowMatrix<Scalar> row_major = matrix;
    std::vector<unsigned char> bytes(static_cast<std::size_t>(row_major.size()) * sizeof(Scalar));
    if (!bytes.empty()) std::memcpy(bytes.data(), row_major.data(), bytes.size());
    return Array(dtype_of<Scalar>::value, {row_major.rows(), row_major.cols()}, std::move(bytes));
  }

  /// An array of the given shape from C-order values; throws invalid_argument when the sizes differ.
  template <class T>
  static Array from_vector(const std::vector<T>& values, std::vector<std::int64_t> shape) {
    std::uint64_t count = 0;
    if (!detail::shape_element_count(shape, count) || count != values.size())
      detail::throw_invalid_argument("Array::from_vector", values.size(), " values do not fill shape ",
                                     detail::shape_string(shape));
    std::vector<unsigned char> bytes(values.size() * sizeof(T));
    for (std::size_t i = 0; i < values.size(); ++i) {
      const T value = values[i];  // std::vector<bool> has no data()
      std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
    }
    return Array(dtype_of<T>::value, std::move(shape), std::move(bytes));
  }

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t rank() const { return shape_.size(); }
  const std::vector<unsigned char>& bytes() const { return bytes_; }
  std::int64_t element_count() const { return static_cast<std::int64_t>(bytes_.size() / dtype_size(dtype_)); }

  /// All elements in C order converted to T (float16/bfloat16 through float; integer targets must be exact).
  template <class T>
  std::vector<T> to_vector() const {
    return convert_range<T>(0, static_cast<std::uint64_t>(element_count()));
  }

  /// The array as a matrix; rank 2 only (use slice_matrix for higher ranks).
  template <class T>
  RowMatrix<T> to_matrix() const {
    if (rank() != 2)
      detail::throw_invalid_argument("Array::to_matrix", "needs a 2-D array, got shape ", detail::shape_string(shape_));
    return slice_matrix<T>({});
  }

  /// The matrix over the last two axes at a fixed index of the leading axes, e.g. head h of [heads, L, L]
  /// with index_prefix {h}. Throws invalid_argument for rank < 2, a prefix of the wrong length or out of range.
  template <class T>
  RowMatrix<T> slice_matrix(const std::vector<std::int64_t>& index_prefix) const {
    const char* fn = "Array::slice_matrix";
    if (rank() < 2 || index_prefix.size() != rank() - 2)
      detail::throw_invalid_argument(fn, "index prefix of length ", index_prefix.size(), " does not select a matrix of shape ",
                                     detail::shape_string(shape_));
    std::uint64_t offset = 0;
    for (std::size_t axis = 0; axis < index_prefix.size(); ++axis) {
      if (index_prefix[axis] < 0 || index_prefix[axis] >= shape_[axis])
        detail::throw_invalid_argument(fn, "index ", index_prefix[axis], " out of range for axis ", axis, " of shape ",
                                       detail::shape_string(shape_));
      offset = offset * static_cast<std::uint64_t>(shape_[axis]) + static_cast<std::uint64_t>(index_prefix[axis]);
    }
    const Index rows = shape_[rank() - 2], cols = shape_[rank() - 1];
    const std::uint64_t matrix_size = static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols);
    const std::vector<T> values = convert_range<T>(offset * matrix_size, matrix_size);
    RowMatrix<T> matrix(rows, cols);
    for (std::uint64_t i = 0; i < matrix_size; ++i) matrix.data()[i] = values[i];
    return matrix;
  }

 private:
  template <class T>
  std::vector<T> convert_range(std::uint64_t first, std::uint64_t count) const {
    std::vector<T> out(count);
    auto convert = [&](auto stored_type_tag) {
      using Stored = decltype(stored_type_tag);
      for (std::uint64_t i = 0; i < count; ++i) {
        Stored value;
        std::memcpy(&value, bytes_.data() + (first + i) * sizeof(Stored), sizeof(Stored));
        if constexpr (std::is_same_v<Stored, Eigen::half> || std::is_same_v<Stored, Eigen::bfloat16>)
          out[i] = detail::convert_element<T>(static_cast<float>(value), first + i);
        else
          out[i] = detail::convert_element<T>(value, first + i);
      }
    };
    switch (dtype_) {
      case DType::float32: convert(float{}); break;
      case DType::float64: convert(double{}); break;
      case DType::int32: convert(std::int32_t{}); break;
      case DType::int64: convert(std::int64_t{}); break;
      case DType::boolean: convert(std::uint8_t{}); break;
      case DType::float16: convert(Eigen::half{}); break;
      case DType::bfloat16: convert(Eigen::bfloat16{}); break;
      case DType::uint8: convert(std::uint8_t{}); break;
    }
    return out;
  }

  DType dtype_ = DType::float32;
  std::vector<std::int64_t> shape_{0};
  std::vector<unsigned char> bytes_;
};

/// Named arrays in a chosen order (NPZ members, safetensors tensors).
using NamedArrays = std::vector<std::pair<std::string, Array>>;

namespace detail {
/// The same arrays keyed by name.
inline std::map<std::string, Array> to_map(NamedArrays&& arrays) {
  std::map<std::string, Array> map;
  for (auto& [name, array] : arrays) map.emplace(name, std::move(array));
  return map;
}
}  // namespace detail

}  // namespace attnscope::io
