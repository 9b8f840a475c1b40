// attnscope/io/npy.hpp — NumPy .npy files (format versions 1.0, 2.0, 3.0): little-endian float32, float64, int32,
// int64, bool (and float16), C or Fortran order, any rank. The writer reproduces numpy 1.24's bytes exactly.
// Format: numpy.lib.format (NEP 1): "\x93NUMPY", major, minor, header length (uint16 for 1.0, uint32 for 2.0/3.0),
// a Python dict literal {'descr', 'fortran_order', 'shape'} padded with spaces and '\n', then the raw data.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/file.hpp"

namespace attnscope::io {
namespace detail {

/// NPY type string of a dtype ('<f4', ...); bfloat16 has none.
inline const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
    case DType::boolean: return "|b1";
    case DType::float16: return "<f2";
    case DType::bfloat16: return nullptr;
    case DType::uint8: return "|u1";
  }
  return nullptr;
}

/// The NPY descr of `dtype`; throws invalid_argument naming serialize_npy for a dtype NPY has no equivalent of
/// (bfloat16), the check of every NPY and NPZ writer.
inline const char* required_npy_descr(DType dtype) {
  const char* descr = npy_descr(dtype);
  if (descr == nullptr)
    throw_invalid_argument("serialize_npy", "dtype ", dtype_name(dtype), " has no NPY equivalent");
  return descr;
}

/// Copies between C order and Fortran order (first axis fastest) of the same shape.
inline std::vector<unsigned char> reorder_axes(const unsigned char* source, const std::vector<std::int64_t>& shape,
                                               std::size_t item_size, bool c_to_fortran) {
  std::uint64_t count = 0;
  shape_element_count(shape, count);
  std::vector<unsigned char> out(count * item_size);
  if (count == 0) return out;
  const std::size_t rank = shape.size();
  std::vector<std::uint64_t> fortran_stride(rank), index(rank, 0);
  std::uint64_t stride = 1;
  for (std::size_t axis = 0; axis < rank; ++axis) {
    fortran_stride[axis] = stride;
    stride *= static_cast<std::uint64_t>(shape[axis]);
  }
  std::uint64_t fortran_offset = 0;
  for (std::uint64_t c_offset = 0; c_offset < count; ++c_offset) {
    if (c_to_fortran)
      std::memcpy(out.data() + fortran_offset * item_size, source + c_offset * item_size, item_size);
    else
      std::memcpy(out.data() + c_offset * item_size, source + fortran_offset * item_size, item_size);
    for (std::size_t axis = rank; axis-- > 0;) {  // C-order odometer: last axis fastest
      fortran_offset += fortran_stride[axis];
      if (++index[axis] < static_cast<std::uint64_t>(shape[axis])) break;
      fortran_offset -= fortran_stride[axis] * index[axis];
      index[axis] = 0;
    }
  }
  return out;
}

/// Parser of the NPY header dict (a Python literal); errors go through the file's ByteReader.
class NpyHeaderParser {
 public:
  NpyHeaderParser(const ByteReader& reader, const std::string& text) : reader_(reader), text_(text) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<std::int64_t>& shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string();
      expect(':');
      if (key == "descr" && !have_descr) {
        skip_space();
        if (peek() != '\'' && peek() != '"') fail("unsupported dtype: 'descr' is not a simple type string");
        descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order" && !have_order) {
        fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape" && !have_shape) {
        shape = parse_shape();
        have_shape = true;
      } else {
        fail("unexpected or repeated key '", key, "' in the header");
      }
      skip_space();
      if (peek() == ',') ++position_;
      else if (peek() != '}') fail("expected ',' or '}' in the header dict");
    }
    ++position_;
    if (!have_descr || !have_order || !have_shape)
      fail("header lacks one of the keys 'descr', 'fortran_order', 'shape'");
    for (; position_ < text_.size(); ++position_)
      if (text_[position_] != ' ' && text_[position_] != '\n' && text_[position_] != '\0')
        fail("unexpected character after the header dict");
  }

 private:
  template <class... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    reader_.fail("bad NPY header at character ", position_, ": ", std::forward<Parts>(parts)...);
  }
  char peek() const { return position_ < text_.size() ? text_[position_] : '\0'; }
  void skip_space() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\t' || text_[position_] == '\n'))
      ++position_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail("expected '", c, "'");
    ++position_;
  }
  std::string parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t end = text_.find(quote, position_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string value = text_.substr(position_ + 1, end - position_ - 1);
    position_ = end + 1;
    return value;
  }
  bool parse_bool() {
    skip_space();
    if (text_.compare(position_, 4, "True") == 0) return position_ += 4, true;
    if (text_.compare(position_, 5, "False") == 0) return position_ += 5, false;
    fail("fortran_order must be True or False");
  }
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("shape entries must be non-negative integers");
      std::int64_t value = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (value > (std::int64_t{1} << 58)) fail("shape entry too large");
        value = value * 10 + (text_[position_++] - '0');
      }
      if (peek() == 'L') ++position_;  // Python 2 long suffix
      shape.push_back(value);
      if (shape.size() > max_rank) fail("more than ", max_rank, " dimensions");
      skip_space();
      if (peek() == ',') ++position_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++position_;
    return shape;
  }

  const ByteReader& reader_;
  const std::string& text_;
  std::size_t position_ = 0;
};

}  // namespace detail

namespace detail {

/// The header of an .npy file: dtype, shape, storage order and where its data bytes start.
struct NpyHeader {
  DType dtype = DType::float32;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::uint64_t byte_count = 0;  ///< data bytes: elements × item size
};

/// Reads and validates an .npy header from `reader` (at the file's first byte), leaving it at the first data byte;
/// the data must fill the rest of the input exactly. The one NPY header parser, used by parse_npy and the
/// memory-mapped reader (io/mapped_arrays.hpp). Throws attnscope::io_error as parse_npy.
inline NpyHeader read_npy_header(ByteReader& reader) {
  const unsigned char* magic = reader.take(6, "magic");
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0) reader.fail("not an NPY file (bad magic)");
  const int major = reader.read<std::uint8_t>("version"), minor = reader.read<std::uint8_t>("version");
  if (major < 1 || major > 3 || minor != 0)
    reader.fail("unsupported NPY format version ", major, ".", minor, " (supported: 1.0, 2.0, 3.0)");
  const std::uint32_t header_length =
      major == 1 ? reader.read<std::uint16_t>("header length") : reader.read<std::uint32_t>("header length");
  const unsigned char* header_bytes = reader.take(header_length, "header");
  const std::string header(reinterpret_cast<const char*>(header_bytes), header_length);

  std::string descr;
  NpyHeader result;
  NpyHeaderParser(reader, header).parse(descr, result.fortran_order, result.shape);

  bool known = false;
  for (DType candidate :
       {DType::float32, DType::float64, DType::int32, DType::int64, DType::boolean, DType::float16, DType::uint8})
    if (descr == npy_descr(candidate) || (candidate == DType::boolean && (descr == "?" || descr == "<b1"))) {
      result.dtype = candidate;
      known = true;
    }
  if (!known && !descr.empty() && descr[0] == '>' && descr.size() > 1 && descr[1] != '\0')
    reader.fail("big-endian dtype '", descr, "' is not supported (save as little-endian)");
  if (!known)
    reader.fail("unsupported dtype '", descr, "' (supported: <f4, <f8, <i4, <i8, |b1, <f2)");

  std::uint64_t count = 0;
  if (!shape_element_count(result.shape, count) ||
      !multiply_checked(count, dtype_size(result.dtype), result.byte_count))
    reader.fail("absurd shape ", shape_string(result.shape), " (element count overflows)");
  if (result.byte_count != reader.remaining())
    reader.fail("shape ", shape_string(result.shape), " of ", dtype_name(result.dtype), " needs ", result.byte_count,
                " data bytes but ", reader.remaining(), " follow the header");
  return result;
}

}  // namespace detail

/// Parses an .npy file from memory. Throws attnscope::io_error (naming `name_for_errors`) for a bad magic or version,
/// a malformed header, big-endian or unsupported dtypes, an absurd shape, or data shorter or longer than the shape.
inline Array parse_npy(const unsigned char* data, std::size_t size, const std::string& name_for_errors) {
  detail::ByteReader reader(data, size, "parse_npy", name_for_errors);
  detail::NpyHeader header = detail::read_npy_header(reader);
  const unsigned char* payload = reader.take(header.byte_count, "data");
  std::vector<unsigned char> bytes =
      header.fortran_order && header.shape.size() > 1
          ? detail::reorder_axes(payload, header.shape, dtype_size(header.dtype), false)
          : std::vector<unsigned char>(payload, payload + header.byte_count);
  if (header.dtype == DType::boolean)
    for (auto& b : bytes) b = b != 0;
  return Array(header.dtype, std::move(header.shape), std::move(bytes));
}

/// Reads an .npy file (see parse_npy).
inline Array read_npy(const std::string& path) {
  return detail::parse_file(path, parse_npy);
}

/// The bytes of an .npy file exactly as numpy 1.24's np.save writes them: version 1.0, header padded with spaces
/// (21 − digits of the growth axis, then to a multiple of 64) and '\n'. Throws invalid_argument for bfloat16
/// (NPY has no such dtype).
inline std::string serialize_npy(const Array& array, bool fortran_order = false) {
  const char* descr = detail::required_npy_descr(array.dtype());
  const auto& shape = array.shape();
  std::string shape_text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) shape_text += (i ? ", " : "") + std::to_string(shape[i]);
  shape_text += shape.size() == 1 ? ",)" : ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                       ", 'shape': " + shape_text + ", }";
  if (!shape.empty())  // numpy ≥ 1.24 leaves room for the growth axis to reach 21 digits
    header.append(21 - std::to_string(shape[fortran_order ? shape.size() - 1 : 0]).size(), ' ');
  // numpy: padding = 64 − (10 + header + '\n') mod 64 (a full 64 when already aligned). With rank ≤ 64 the header
  // always fits version 1.0's uint16 length (numpy switches to 2.0 only for headers over 65535 bytes).
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';

  std::string out("\x93NUMPY\x01\x00", 8);
  detail::append_little_endian<std::uint16_t>(out, static_cast<std::uint16_t>(header.size()));
  out += header;
  if (fortran_order && shape.size() > 1) {
    const auto data = detail::reorder_axes(array.bytes().data(), shape, dtype_size(array.dtype()), true);
    out.append(reinterpret_cast<const char*>(data.data()), data.size());
  } else {
    out.append(reinterpret_cast<const char*>(array.bytes().data()), array.bytes().size());
  }
  return out;
}

/// Writes an .npy file (see serialize_npy), replacing `path` whole or not at all (io::write_file; `listener` hears
/// of the temporary file). Throws invalid_argument as serialize_npy before any file is created, io_error naming
/// write_npy and the path when the file cannot be written.
inline void write_npy(const std::string& path, const Array& array, bool fortran_order = false,
                      TemporaryFileListener* listener = nullptr) {
  const std::string bytes = serialize_npy(array, fortran_order);
  detail::write_file_streamed("write_npy", path, [&](const auto& write) { write(bytes.data(), bytes.size()); },
                              listener);
}

}  // namespace attnscope::io
