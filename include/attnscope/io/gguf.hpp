// attnscope/io/gguf.hpp — GGUF files (llama.cpp's model format, versions 2 and 3), read in place: the file is
// memory-mapped (io::MappedFile), the header is parsed and validated, every metadata value is decoded (scalars,
// strings, arrays of any type including nested arrays) and every tensor is a view (name, ggml type, dimensions,
// bytes) into the map. Nothing of the tensor data is copied; dequantizing blocks is the model's business
// (kernels/dequantize.hpp, model/gguf.hpp).
//
// Layout (ggml's docs/gguf.md; all integers little-endian):
//   u32 magic "GGUF" · u32 version (2 or 3) · u64 tensor_count · u64 metadata_kv_count
//   metadata_kv_count × { string key · u32 value_type · value }
//   tensor_count × { string name · u32 n_dims (≤ 4) · u64 dims[n_dims] (dims[0] varies fastest) · u32 ggml_type
//                    · u64 offset (from the start of the data section, a multiple of the alignment) }
//   padding to the alignment · the data section
// A string is u64 length + bytes (UTF-8, no terminator). value_type: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32,
// 7 bool (one byte, 0 or 1), 8 string, 9 array (u32 element type · u64 count · elements), 10 u64, 11 i64, 12 f64.
// The alignment is the metadata key general.alignment (u32, a power of two), 32 when absent.
//
// Every length, count and offset is checked against the file size before it is used; a problem is an
// attnscope::io_error naming the file, the key or tensor, and the byte offset.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/mapped_file.hpp"

namespace attnscope::io {

/// The type of a GGUF metadata value (the numbers are the file's).
enum class GgufType : std::uint32_t {
  uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6, boolean = 7, string = 8,
  array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

/// "uint8", "int32", "string", "array", … ("unknown" for a number outside the table).
inline const char* gguf_type_name(GgufType type) {
  static const char* const names[] = {"uint8",   "int8",   "uint16", "int16", "uint32", "int32",  "float32",
                                      "bool",    "string", "array",  "uint64", "int64", "float64"};
  const auto index = static_cast<std::uint32_t>(type);
  return index < 13 ? names[index] : "unknown";
}

/// One decoded metadata value. Integers keep their exact value (`integer` for the signed types and for unsigned
/// values up to 2⁶³ − 1; `unsigned_integer` for every unsigned type), floats are widened to double (exact), booleans
/// are 0/1 in `integer`. An array holds its element type and its elements in `items` (strings and numbers alike,
/// nested arrays too); `strings`, `integers` and `reals` hold the same elements flattened by kind for quick typed
/// access (filled for arrays of strings, of integers or booleans, and of floats).
struct GgufValue {
  GgufType type = GgufType::uint8;
  GgufType element_type = GgufType::uint8;  ///< arrays only
  std::uint64_t offset = 0;                 ///< byte offset of the value (after its type tag) in the file
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double real = 0;
  std::string text;
  std::vector<GgufValue> items;       ///< arrays of arrays only (other arrays use the flat vectors below)
  std::vector<std::string> strings;   ///< array of strings
  std::vector<std::int64_t> integers; ///< array of integers or booleans
  std::vector<double> reals;          ///< array of float32 / float64
  std::uint64_t array_size = 0;       ///< number of elements of an array

  bool is_integer() const {
    return type == GgufType::uint8 || type == GgufType::int8 || type == GgufType::uint16 || type == GgufType::int16 ||
           type == GgufType::uint32 || type == GgufType::int32 || type == GgufType::uint64 || type == GgufType::int64;
  }
  bool is_real() const { return type == GgufType::float32 || type == GgufType::float64; }
  bool is_array() const { return type == GgufType::array; }
};

/// The ggml tensor types a GGUF file may hold (the numbers are ggml's `enum ggml_type`). Which of them attnscope can
/// dequantize is the kernels' table (kernels/ggml_types.hpp; model/gguf.hpp names them); here every type is a block
/// shape, read as opaque blocks.
enum class GgmlType : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9, q2_k = 10, q3_k = 11, q4_k = 12,
  q5_k = 13, q6_k = 14, q8_k = 15, iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21,
  iq2_s = 22, iq4_xs = 23, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30, tq1_0 = 34,
  tq2_0 = 35, mxfp4 = 39, nvfp4 = 40, q1_0 = 41, q2_0 = 42,
};

/// The block shape of a ggml type: `block_elements` consecutive elements of a row are stored in `block_bytes` bytes
/// (1 and the element size for the plain types).
struct GgmlTypeInfo {
  const char* name = nullptr;  ///< ggml's name ("f32", "q4_K", …); nullptr for a number ggml does not define
  std::uint32_t block_elements = 0;
  std::uint32_t block_bytes = 0;
};

namespace detail {

/// Every ggml type number (index) up to 42: ggml's type_name and block shape (ggml.c's type_traits, from
/// ggml-common.h's block structs); {nullptr, 0, 0} for the numbers ggml removed (4, 5, 31–33, 36–38).
inline constexpr GgmlTypeInfo ggml_types[] = {
    {"f32", 1, 4},       {"f16", 1, 2},        {"q4_0", 32, 18},     {"q4_1", 32, 20},    {},
    {},                  {"q5_0", 32, 22},     {"q5_1", 32, 24},     {"q8_0", 32, 34},    {"q8_1", 32, 36},
    {"q2_K", 256, 84},   {"q3_K", 256, 110},   {"q4_K", 256, 144},   {"q5_K", 256, 176},  {"q6_K", 256, 210},
    {"q8_K", 256, 292},  {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74},  {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},  {"iq3_s", 256, 110},  {"iq2_s", 256, 82},   {"iq4_xs", 256, 136}, {"i8", 1, 1},
    {"i16", 1, 2},       {"i32", 1, 4},        {"i64", 1, 8},        {"f64", 1, 8},       {"iq1_m", 256, 56},
    {"bf16", 1, 2},      {},                   {},                   {},                  {"tq1_0", 256, 54},
    {"tq2_0", 256, 66},  {},                   {},                   {},                  {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},   {"q1_0", 128, 18},    {"q2_0", 64, 18},
};

}  // namespace detail

/// The block shape of ggml type number `type`; name == nullptr when unknown.
inline GgmlTypeInfo ggml_type_info(std::uint32_t type) {
  return type < std::size(detail::ggml_types) ? detail::ggml_types[type] : GgmlTypeInfo{};
}

/// One tensor of a GGUF file. dims are ggml's order: dims[0] is the contiguous (fastest) dimension, so a
/// PyTorch out × in weight has dims {in, out}. `data` points into the map and stays valid as long as the GgufFile
/// (or a shared owner of it) lives.
struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> dims;
  GgmlType type = GgmlType::f32;
  std::uint64_t offset = 0;       ///< from the start of the data section
  std::uint64_t file_offset = 0;  ///< absolute byte offset of the data in the file
  std::uint64_t info_offset = 0;  ///< absolute byte offset of the tensor's info record
  std::uint64_t byte_count = 0;
  const unsigned char* data = nullptr;

  std::uint64_t element_count() const {
    std::uint64_t n = 1;
    for (const std::uint64_t d : dims) n *= d;  // validated not to overflow
    return n;
  }
  /// dims[0]: the elements of one row.
  std::uint64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  /// The product of dims[1..]: the number of rows.
  std::uint64_t row_count() const { return dims.empty() ? 1 : element_count() / std::max<std::uint64_t>(dims[0], 1); }
  const char* type_name() const { return ggml_type_info(static_cast<std::uint32_t>(type)).name; }
};

/// A parsed GGUF header: version, metadata in file order, tensors in file order, alignment and data section offset.
struct GgufHeader {
  std::uint32_t version = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<GgufTensor> tensors;
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0;
};

namespace detail {

/// Bounds on what a header may declare, checked before anything is allocated: nested arrays at most this deep.
constexpr int gguf_max_array_depth = 8;
/// ggml's GGML_MAX_DIMS.
constexpr std::uint32_t gguf_max_dims = 4;

inline std::string gguf_read_string(ByteReader& reader, const char* what) {
  const std::uint64_t length = reader.read<std::uint64_t>(what);
  if (length > reader.remaining())
    reader.fail("truncated: ", what, " declares ", length, " bytes but only ", reader.remaining(), " remain");
  const unsigned char* bytes = reader.take(length, what);
  return std::string(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(length));
}

/// The smallest encoded size of one element of `type` (used to refuse counts the file cannot hold before
/// allocating); 0 for an unknown type.
inline std::uint64_t gguf_min_size(GgufType type) {
  switch (type) {
    case GgufType::uint8: case GgufType::int8: case GgufType::boolean: return 1;
    case GgufType::uint16: case GgufType::int16: return 2;
    case GgufType::uint32: case GgufType::int32: case GgufType::float32: return 4;
    case GgufType::uint64: case GgufType::int64: case GgufType::float64: case GgufType::string: return 8;
    case GgufType::array: return 12;
  }
  return 0;
}

/// Reads one scalar (non-array) value of `type` into `value`; `what` names it in errors.
inline void gguf_read_scalar(ByteReader& reader, GgufType type, const std::string& key, const char* what,
                             GgufValue& value) {
  value.type = type;
  value.offset = reader.position();
  const auto set_signed = [&](std::int64_t v) {
    value.integer = v;
    value.unsigned_integer = static_cast<std::uint64_t>(v);
  };
  const auto set_unsigned = [&](std::uint64_t v) {
    value.unsigned_integer = v;
    value.integer = v > std::uint64_t(std::numeric_limits<std::int64_t>::max()) ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(v);
  };
  switch (type) {
    case GgufType::uint8: set_unsigned(reader.read<std::uint8_t>(what)); return;
    case GgufType::int8: set_signed(reader.read<std::int8_t>(what)); return;
    case GgufType::uint16: set_unsigned(reader.read<std::uint16_t>(what)); return;
    case GgufType::int16: set_signed(reader.read<std::int16_t>(what)); return;
    case GgufType::uint32: set_unsigned(reader.read<std::uint32_t>(what)); return;
    case GgufType::int32: set_signed(reader.read<std::int32_t>(what)); return;
    case GgufType::uint64: set_unsigned(reader.read<std::uint64_t>(what)); return;
    case GgufType::int64: set_signed(reader.read<std::int64_t>(what)); return;
    case GgufType::float32: value.real = reader.read<float>(what); return;
    case GgufType::float64: value.real = reader.read<double>(what); return;
    case GgufType::boolean: {
      const std::uint8_t byte = reader.read<std::uint8_t>(what);
      if (byte > 1) {
        reader.seek(value.offset, what);
        reader.fail("key '", key, "': a bool must be 0 or 1, not ", int(byte));
      }
      set_signed(byte);
      return;
    }
    case GgufType::string: value.text = gguf_read_string(reader, what); return;
    case GgufType::array: break;
  }
  reader.fail("key '", key, "': unknown value type ", static_cast<std::uint32_t>(type));
}

/// Reads one value of `type` (after its tag) into `value`, arrays included; `key` names it in errors.
inline void gguf_read_value(ByteReader& reader, GgufType type, const std::string& key, GgufValue& value, int depth) {
  const std::string what = "value of key '" + key + "'";
  if (type != GgufType::array) {
    gguf_read_scalar(reader, type, key, what.c_str(), value);
    return;
  }
  value.type = type;
  value.offset = reader.position();
  if (depth >= gguf_max_array_depth) reader.fail("key '", key, "': arrays nested deeper than ", gguf_max_array_depth);
  const std::uint32_t element = reader.read<std::uint32_t>(what.c_str());
  const GgufType element_type = static_cast<GgufType>(element);
  if (element > 12) {
    reader.seek(value.offset, what.c_str());
    reader.fail("key '", key, "': unknown array element type ", element);
  }
  const std::uint64_t count = reader.read<std::uint64_t>(what.c_str());
  if (count > reader.remaining() / gguf_min_size(element_type))
    reader.fail("truncated: key '", key, "' declares an array of ", count, " ", gguf_type_name(element_type),
                " elements but only ", reader.remaining(), " bytes remain");
  value.element_type = element_type;
  value.array_size = count;
  const std::size_t n = static_cast<std::size_t>(count);
  GgufValue item;
  if (element_type == GgufType::string) {
    value.strings.reserve(n);
    for (std::size_t i = 0; i < n; ++i) value.strings.push_back(gguf_read_string(reader, what.c_str()));
  } else if (element_type == GgufType::array) {
    value.items.resize(n);
    for (std::size_t i = 0; i < n; ++i) gguf_read_value(reader, element_type, key, value.items[i], depth + 1);
  } else if (element_type == GgufType::float32 || element_type == GgufType::float64) {
    value.reals.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      gguf_read_scalar(reader, element_type, key, what.c_str(), item);
      value.reals.push_back(item.real);
    }
  } else {
    value.integers.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      gguf_read_scalar(reader, element_type, key, what.c_str(), item);
      if (element_type == GgufType::uint64 && item.unsigned_integer > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        reader.fail("key '", key, "': uint64 array element ", i, " = ", item.unsigned_integer,
                    " does not fit a signed 64-bit integer");
      value.integers.push_back(item.integer);
    }
  }
}

}  // namespace detail

/// Parses and validates the header of the GGUF bytes [data, data + size) (`name` names the file in errors): the
/// magic, the version (2 or 3), every metadata value, general.alignment, every tensor info (at most 4 dimensions,
/// no zero dimension, no element-count overflow, a known ggml type, a row length that is a whole number of blocks,
/// an offset that is a multiple of the alignment, data inside the file, no two tensors overlapping, no duplicate
/// key or tensor name). Throws attnscope::io_error naming `name`, the key or tensor, and the byte offset.
inline GgufHeader parse_gguf_header(const unsigned char* data, std::size_t size, const std::string& name) {
  const char* fn = "parse_gguf_header";
  detail::ByteReader reader(data, size, fn, name);
  GgufHeader header;
  const std::uint32_t magic = reader.read<std::uint32_t>("magic");
  if (magic != 0x46554747u) {  // "GGUF" little-endian
    reader.seek(0, "magic");
    reader.fail("bad magic 0x", std::hex, magic, std::dec, ": not a GGUF file (expected the bytes 'GGUF')");
  }
  header.version = reader.read<std::uint32_t>("version");
  if (header.version != 2 && header.version != 3) {
    reader.seek(4, "version");
    reader.fail("GGUF version ", header.version, " is not supported (only versions 2 and 3)");
  }
  const std::uint64_t tensor_count = reader.read<std::uint64_t>("tensor count");
  const std::uint64_t kv_count = reader.read<std::uint64_t>("metadata count");
  // each metadata pair takes at least 8 + 4 + 1 bytes, each tensor info 8 + 4 + 4 + 8
  if (kv_count > reader.remaining() / 13)
    reader.fail("truncated: ", kv_count, " metadata pairs declared but only ", reader.remaining(), " bytes remain");
  if (tensor_count > reader.remaining() / 24)
    reader.fail("truncated: ", tensor_count, " tensors declared but only ", reader.remaining(), " bytes remain");
  std::map<std::string, std::size_t> keys;
  header.metadata.reserve(static_cast<std::size_t>(kv_count));
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    const std::size_t at = reader.position();
    std::string key = detail::gguf_read_string(reader, "metadata key");
    if (!keys.emplace(key, header.metadata.size()).second) {
      reader.seek(at, "metadata key");
      reader.fail("duplicate metadata key '", key, "'");
    }
    const std::uint32_t type = reader.read<std::uint32_t>("metadata value type");
    if (type > 12) {
      reader.seek(reader.position() - 4, "metadata value type");
      reader.fail("key '", key, "' has unknown value type ", type);
    }
    GgufValue value;
    detail::gguf_read_value(reader, static_cast<GgufType>(type), key, value, 0);
    header.metadata.emplace_back(std::move(key), std::move(value));
  }
  const auto alignment_key = keys.find("general.alignment");
  if (alignment_key != keys.end()) {
    const GgufValue& value = header.metadata[alignment_key->second].second;
    if (value.type != GgufType::uint32 || value.unsigned_integer == 0 ||
        (value.unsigned_integer & (value.unsigned_integer - 1)) != 0) {
      reader.seek(value.offset, "general.alignment");
      reader.fail("key 'general.alignment' must be a uint32 power of two, not the ", gguf_type_name(value.type), " ",
                  value.is_integer() ? std::to_string(value.unsigned_integer) : std::string("value"));
    }
    header.alignment = value.unsigned_integer;
  }
  std::map<std::string, std::size_t> names;
  header.tensors.reserve(static_cast<std::size_t>(tensor_count));
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor tensor;
    tensor.info_offset = reader.position();
    tensor.name = detail::gguf_read_string(reader, "tensor name");
    const auto fail_at = [&](auto&&... parts) {
      reader.seek(tensor.info_offset, "tensor info");
      reader.fail("tensor '", tensor.name, "': ", parts...);
    };
    if (!names.emplace(tensor.name, header.tensors.size()).second) fail_at("duplicate tensor name");
    const std::uint32_t n_dims = reader.read<std::uint32_t>("tensor dimension count");
    if (n_dims > detail::gguf_max_dims) fail_at(n_dims, " dimensions (at most ", detail::gguf_max_dims, ")");
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t extent = reader.read<std::uint64_t>("tensor dimension");
      if (extent == 0) fail_at("dimension ", d, " is 0");
      if (!detail::multiply_checked(elements, extent, elements)) fail_at("the element count overflows 64 bits");
      tensor.dims.push_back(extent);
    }
    const std::uint32_t type = reader.read<std::uint32_t>("tensor type");
    const GgmlTypeInfo info = ggml_type_info(type);
    if (info.name == nullptr) fail_at("unknown ggml type ", type);
    tensor.type = static_cast<GgmlType>(type);
    tensor.offset = reader.read<std::uint64_t>("tensor offset");
    if (tensor.row_length() % info.block_elements != 0)
      fail_at("a row of ", tensor.row_length(), " elements is not a whole number of ", info.name, " blocks of ",
              info.block_elements);
    if (!detail::multiply_checked(elements / info.block_elements, info.block_bytes, tensor.byte_count))
      fail_at("the byte count overflows 64 bits");
    if (tensor.offset % header.alignment != 0)
      fail_at("misaligned data: offset ", tensor.offset, " is not a multiple of the alignment ", header.alignment);
    header.tensors.push_back(std::move(tensor));
  }
  const std::uint64_t end_of_infos = reader.position();
  header.data_offset = (end_of_infos + header.alignment - 1) / header.alignment * header.alignment;
  if (header.data_offset < end_of_infos || (header.data_offset > size && !header.tensors.empty()))
    reader.fail("truncated: the data section would start at offset ", header.data_offset, " past the end of the ",
                size, "-byte file");
  std::vector<std::size_t> order(header.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return header.tensors[a].offset < header.tensors[b].offset; });
  std::uint64_t previous_end = 0;
  const GgufTensor* previous = nullptr;
  for (const std::size_t index : order) {
    GgufTensor& tensor = header.tensors[index];
    std::uint64_t begin = 0, end = 0;
    if (!detail::add_checked(header.data_offset, tensor.offset, begin) ||
        !detail::add_checked(begin, tensor.byte_count, end) || end > size) {
      reader.seek(tensor.info_offset, "tensor info");
      reader.fail("tensor '", tensor.name, "' (", tensor.type_name(), ", ", tensor.byte_count, " bytes at data offset ",
                  tensor.offset, ") lies past the end of the ", size, "-byte file (truncated file?)");
    }
    if (previous != nullptr && tensor.offset < previous_end) {
      reader.seek(tensor.info_offset, "tensor info");
      reader.fail("tensor '", tensor.name, "' at data offset ", tensor.offset, " overlaps tensor '", previous->name,
                  "' (which ends at ", previous_end, ")");
    }
    tensor.file_offset = begin;
    tensor.data = data + begin;
    previous_end = tensor.offset + tensor.byte_count;
    previous = &tensor;
  }
  return header;
}

/// One tensor to write with serialize_gguf: its dims in ggml order (dims[0] contiguous), ggml type and bytes.
struct GgufTensorBytes {
  std::string name;
  std::vector<std::uint64_t> dims;
  GgmlType type = GgmlType::f32;
  std::string bytes;
};

namespace detail {

inline void gguf_append_string(std::string& out, const std::string& text) {
  append_little_endian<std::uint64_t>(out, text.size());
  out += text;
}

inline void gguf_append_value(std::string& out, const GgufValue& value) {
  switch (value.type) {
    case GgufType::uint8: append_little_endian<std::uint8_t>(out, std::uint8_t(value.unsigned_integer)); return;
    case GgufType::int8: append_little_endian<std::int8_t>(out, std::int8_t(value.integer)); return;
    case GgufType::uint16: append_little_endian<std::uint16_t>(out, std::uint16_t(value.unsigned_integer)); return;
    case GgufType::int16: append_little_endian<std::int16_t>(out, std::int16_t(value.integer)); return;
    case GgufType::uint32: append_little_endian<std::uint32_t>(out, std::uint32_t(value.unsigned_integer)); return;
    case GgufType::int32: append_little_endian<std::int32_t>(out, std::int32_t(value.integer)); return;
    case GgufType::uint64: append_little_endian<std::uint64_t>(out, value.unsigned_integer); return;
    case GgufType::int64: append_little_endian<std::int64_t>(out, value.integer); return;
    case GgufType::float32: append_little_endian<float>(out, float(value.real)); return;
    case GgufType::float64: append_little_endian<double>(out, value.real); return;
    case GgufType::boolean: append_little_endian<std::uint8_t>(out, value.integer != 0 ? 1 : 0); return;
    case GgufType::string: gguf_append_string(out, value.text); return;
    case GgufType::array: {
      append_little_endian<std::uint32_t>(out, static_cast<std::uint32_t>(value.element_type));
      GgufValue element;
      element.type = value.element_type;
      if (value.element_type == GgufType::string) {
        append_little_endian<std::uint64_t>(out, value.strings.size());
        for (const std::string& text : value.strings) gguf_append_string(out, text);
      } else if (value.element_type == GgufType::array) {
        append_little_endian<std::uint64_t>(out, value.items.size());
        for (const GgufValue& item : value.items) gguf_append_value(out, item);
      } else if (value.element_type == GgufType::float32 || value.element_type == GgufType::float64) {
        append_little_endian<std::uint64_t>(out, value.reals.size());
        for (const double real : value.reals) {
          element.real = real;
          gguf_append_value(out, element);
        }
      } else {
        append_little_endian<std::uint64_t>(out, value.integers.size());
        for (const std::int64_t integer : value.integers) {
          element.integer = integer;
          element.unsigned_integer = static_cast<std::uint64_t>(integer);
          gguf_append_value(out, element);
        }
      }
      return;
    }
  }
}

}  // namespace detail

/// The bytes of a GGUF file (version 3) holding `metadata` (in order; general.alignment, when present, must be a
/// uint32 power of two and sets the alignment) and `tensors` (in order, each at the next multiple of the alignment).
/// Throws attnscope::invalid_argument for a tensor whose byte count disagrees with its dims and type.
inline std::string serialize_gguf(const std::vector<std::pair<std::string, GgufValue>>& metadata,
                                  const std::vector<GgufTensorBytes>& tensors) {
  std::uint64_t alignment = 32;
  for (const auto& entry : metadata)
    if (entry.first == "general.alignment") alignment = entry.second.unsigned_integer;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    detail::throw_invalid_argument("serialize_gguf", "general.alignment = ", alignment, " is not a power of two");
  std::string out = "GGUF";
  detail::append_little_endian<std::uint32_t>(out, 3);
  detail::append_little_endian<std::uint64_t>(out, tensors.size());
  detail::append_little_endian<std::uint64_t>(out, metadata.size());
  for (const auto& entry : metadata) {
    detail::gguf_append_string(out, entry.first);
    detail::append_little_endian<std::uint32_t>(out, static_cast<std::uint32_t>(entry.second.type));
    detail::gguf_append_value(out, entry.second);
  }
  std::uint64_t offset = 0;
  for (const GgufTensorBytes& tensor : tensors) {
    const GgmlTypeInfo info = ggml_type_info(static_cast<std::uint32_t>(tensor.type));
    std::uint64_t elements = 1;
    for (const std::uint64_t d : tensor.dims) elements *= d;
    const std::uint64_t row_length = tensor.dims.empty() ? 1 : tensor.dims[0];  // no dimension: one element
    if (info.name == nullptr || row_length % info.block_elements != 0 ||
        elements / info.block_elements * info.block_bytes != tensor.bytes.size())
      detail::throw_invalid_argument("serialize_gguf", "tensor '", tensor.name, "' holds ", tensor.bytes.size(),
                                     " bytes, which do not match its dims and ggml type ",
                                     static_cast<std::uint32_t>(tensor.type));
    detail::gguf_append_string(out, tensor.name);
    detail::append_little_endian<std::uint32_t>(out, static_cast<std::uint32_t>(tensor.dims.size()));
    for (const std::uint64_t d : tensor.dims) detail::append_little_endian<std::uint64_t>(out, d);
    detail::append_little_endian<std::uint32_t>(out, static_cast<std::uint32_t>(tensor.type));
    detail::append_little_endian<std::uint64_t>(out, offset);
    offset += (tensor.bytes.size() + alignment - 1) / alignment * alignment;
  }
  for (const GgufTensorBytes& tensor : tensors) {
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    out += tensor.bytes;
  }
  return out;
}

/// A memory-mapped GGUF file: typed access to its metadata and views of its tensors. Move-only (it owns the map);
/// values and views stay valid across moves. Every accessor that fails throws attnscope::io_error naming the file,
/// the key or tensor and, for a value of the wrong type, its byte offset.
class GgufFile {
 public:
  GgufFile() = default;

  /// Maps `path` and parses its header (parse_gguf_header).
  explicit GgufFile(const std::string& path) : file_(path) {
    header_ = parse_gguf_header(file_.data(), file_.size(), path);
    for (std::size_t i = 0; i < header_.metadata.size(); ++i) key_index_.emplace(header_.metadata[i].first, i);
    for (std::size_t i = 0; i < header_.tensors.size(); ++i) tensor_index_.emplace(header_.tensors[i].name, i);
  }

  const std::string& path() const { return file_.path(); }
  std::size_t file_size() const { return file_.size(); }
  std::uint32_t version() const { return header_.version; }
  std::uint64_t alignment() const { return header_.alignment; }
  /// Absolute byte offset of the data section.
  std::uint64_t data_offset() const { return header_.data_offset; }

  // ---- metadata

  /// The metadata keys in file order.
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(header_.metadata.size());
    for (const auto& entry : header_.metadata) out.push_back(entry.first);
    return out;
  }
  /// The metadata pairs in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return header_.metadata; }
  bool has(const std::string& key) const { return key_index_.count(key) != 0; }
  /// The value of `key`, or nullptr when absent.
  const GgufValue* find(const std::string& key) const {
    const auto found = key_index_.find(key);
    return found == key_index_.end() ? nullptr : &header_.metadata[found->second].second;
  }
  /// The value of `key`; io_error naming the file and the key when absent.
  const GgufValue& value(const std::string& key) const {
    const GgufValue* found = find(key);
    if (found == nullptr) fail("value", "missing metadata key '", key, "'");
    return *found;
  }

  /// A string value.
  const std::string& string(const std::string& key) const {
    const GgufValue& v = typed(key, "string", "string", [](const GgufValue& x) { return x.type == GgufType::string; });
    return v.text;
  }
  /// An integer value of any integer type (uint64 values above 2⁶³ − 1 are refused).
  std::int64_t integer(const std::string& key) const {
    const GgufValue& v = typed(key, "integer", "integer", [](const GgufValue& x) { return x.is_integer(); });
    if (v.type == GgufType::uint64 && v.unsigned_integer > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      fail_value("integer", key, v, "uint64 value ", v.unsigned_integer, " does not fit a signed 64-bit integer");
    return v.integer;
  }
  /// A number: a float value, or an integer value converted to double.
  double number(const std::string& key) const {
    const GgufValue& v = typed(key, "number", "number", [](const GgufValue& x) { return x.is_real() || x.is_integer(); });
    return v.is_real() ? v.real : v.type == GgufType::uint64 ? double(v.unsigned_integer) : double(v.integer);
  }
  bool boolean(const std::string& key) const {
    return typed(key, "boolean", "bool", [](const GgufValue& x) { return x.type == GgufType::boolean; }).integer != 0;
  }
  /// An array of strings.
  const std::vector<std::string>& strings(const std::string& key) const {
    return typed(key, "strings", "array of strings", [](const GgufValue& x) {
             return x.is_array() && x.element_type == GgufType::string;
           }).strings;
  }
  /// An array of integers (any integer type, or bool).
  const std::vector<std::int64_t>& integers(const std::string& key) const {
    return typed(key, "integers", "array of integers", [](const GgufValue& x) {
             GgufValue element;
             element.type = x.element_type;
             return x.is_array() && (element.is_integer() || x.element_type == GgufType::boolean);
           }).integers;
  }
  /// An array of numbers: float32/float64 elements as stored, integer elements converted to double.
  std::vector<double> numbers(const std::string& key) const {
    const GgufValue& v = typed(key, "numbers", "array of numbers", [](const GgufValue& x) {
      GgufValue element;
      element.type = x.element_type;
      return x.is_array() && (element.is_real() || element.is_integer());
    });
    if (!v.reals.empty() || v.integers.empty()) return v.reals;
    return std::vector<double>(v.integers.begin(), v.integers.end());
  }

  // ---- tensors

  /// The tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return header_.tensors; }
  bool has_tensor(const std::string& name) const { return tensor_index_.count(name) != 0; }
  /// The tensor `name`; io_error naming the file and the tensor when absent.
  const GgufTensor& tensor(const std::string& name) const {
    const auto found = tensor_index_.find(name);
    if (found == tensor_index_.end())
      fail("tensor", "no tensor named '", name, "' (the file holds ", header_.tensors.size(), " tensors)");
    return header_.tensors[found->second];
  }

 private:
  MappedFile file_;
  GgufHeader header_;
  std::map<std::string, std::size_t> key_index_, tensor_index_;

  template <class... Parts>
  [[noreturn]] void fail(const char* function, Parts&&... parts) const {
    attnscope::detail::throw_io_error((std::string("GgufFile::") + function).c_str(), path(),
                                      std::forward<Parts>(parts)...);
  }
  template <class... Parts>
  [[noreturn]] void fail_value(const char* function, const std::string& key, const GgufValue& v,
                               Parts&&... parts) const {
    fail(function, "key '", key, "': ", std::forward<Parts>(parts)..., " (byte offset ", v.offset, ")");
  }
  template <class Accept>
  const GgufValue& typed(const std::string& key, const char* function, const char* wanted, Accept&& accept) const {
    const GgufValue* found = find(key);
    if (found == nullptr) fail(function, "missing metadata key '", key, "'");
    const GgufValue& v = *found;
    const auto article = [](const char* word) { return std::strchr("aeio", word[0]) != nullptr ? "an " : "a "; };
    if (!accept(v))
      fail_value(function, key, v, "expected ", article(wanted), wanted, ", found ", article(gguf_type_name(v.type)),
                 gguf_type_name(v.type),
                 v.is_array() ? std::string(" of ") + gguf_type_name(v.element_type) : std::string());
    return v;
  }
};

}  // namespace attnscope::io
