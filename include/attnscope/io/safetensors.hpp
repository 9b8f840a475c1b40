// attnscope/io/safetensors.hpp — the safetensors format (huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data buffer. Offsets are relative to the buffer, which the tensors must cover without gaps or overlaps.
//
// The functions that read or write the JSON header are templates on the JSON type (default nlohmann::json, never
// given by callers) so that including this header instantiates no JSON parser or serializer: that code is compiled
// only in the translation units that call it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/file.hpp"

namespace attnscope::io {

/// Everything a safetensors file holds: tensors in data-buffer order and the optional string metadata.
struct SafetensorsContents {
  NamedArrays tensors;
  std::map<std::string, std::string> metadata;
};

/// Largest JSON header accepted (the reference implementation's limit).
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

namespace detail {

/// safetensors dtype string of a DType: F32, F64, I32, I64, BOOL, F16, BF16, U8.
inline const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "F32";
    case DType::float64: return "F64";
    case DType::int32: return "I32";
    case DType::int64: return "I64";
    case DType::boolean: return "BOOL";
    case DType::float16: return "F16";
    case DType::bfloat16: return "BF16";
    case DType::uint8: return "U8";
  }
  return "?";
}

}  // namespace detail

/// One tensor of a safetensors header: dtype, shape and its bytes [begin, end) relative to the data buffer.
struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

/// A parsed and validated safetensors header: the tensors in data-buffer order, the metadata, and where the data
/// buffer lies in the file (buffer_offset = 8 + header length; buffer_size = file size − buffer_offset).
struct SafetensorsHeader {
  std::vector<SafetensorsTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  std::uint64_t buffer_offset = 0, buffer_size = 0;
};

/// Parses and validates the header of a safetensors file held in memory (the whole file: the tensors' placement in
/// the buffer is checked too, and BOOL bytes are read). The one validation shared by the copying reader
/// (parse_safetensors_contents) and the mapped one (MappedSafetensors). Throws attnscope::io_error (naming
/// `name_for_errors` and the tensor) for a header length past the end, malformed JSON, unsupported dtypes, bad
/// shapes, offsets whose span differs from the shape or that lie past the end of the file (a truncated file),
/// overlapping tensors, gaps, or a buffer not fully covered.
template <class Json = nlohmann::json>
SafetensorsHeader parse_safetensors_header(const unsigned char* data, std::size_t size,
                                           const std::string& name_for_errors) {
  detail::ByteReader reader(data, size, "parse_safetensors", name_for_errors);
  const std::uint64_t header_length = reader.read<std::uint64_t>("header length");
  if (header_length > safetensors_max_header_bytes)
    reader.fail("header length ", header_length, " exceeds the limit of ", safetensors_max_header_bytes, " bytes");
  const unsigned char* header_bytes = reader.take(header_length, "JSON header");
  if (header_length == 0 || header_bytes[0] != '{') reader.fail("the JSON header does not start with '{'");
  Json json;
  try {
    json = Json::parse(header_bytes, header_bytes + header_length);
  } catch (const typename Json::exception& e) {
    reader.fail("malformed JSON header: ", e.what());
  }
  if (!json.is_object()) reader.fail("the JSON header is not an object");
  SafetensorsHeader header;
  header.buffer_offset = reader.position();
  header.buffer_size = reader.remaining();
  const unsigned char* buffer = reader.take(header.buffer_size, "data buffer");

  for (const auto& item : json.items()) {
    const std::string& name = item.key();  // (a structured binding cannot be captured by the lambda below in C++17)
    const Json& info = item.value();
    if (name == "__metadata__") {
      if (!info.is_object()) reader.fail("__metadata__ is not an object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) reader.fail("__metadata__ value of '", key, "' is not a string");
        header.metadata[key] = value.template get<std::string>();
      }
      continue;
    }
    if (name.empty()) reader.fail("empty tensor name");
    auto bad = [&](auto&&... parts) { reader.fail("tensor '", name, "': ", parts...); };
    if (!info.is_object() || info.size() != 3 || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
      bad("expected exactly the keys dtype, shape, data_offsets");
    SafetensorsTensorInfo entry{name, DType::float32, {}, 0, 0};
    const auto& dtype = info["dtype"];
    bool known = false;
    for (DType candidate : {DType::float32, DType::float64, DType::int32, DType::int64, DType::boolean, DType::float16,
                            DType::bfloat16, DType::uint8})
      if (dtype.is_string() && dtype.template get<std::string>() == detail::safetensors_dtype_name(candidate)) {
        entry.dtype = candidate;
        known = true;
      }
    if (!known) bad("unsupported dtype ", dtype.dump(), " (supported: F32, F64, I32, I64, BOOL, F16, BF16, U8)");
    const auto& shape = info["shape"];
    if (!shape.is_array() || shape.size() > detail::max_rank)
      bad("shape must be an array of at most ", detail::max_rank, " integers");
    for (const auto& dim : shape) {
      if (!dim.is_number_unsigned() || dim.template get<std::uint64_t>() > (std::uint64_t{1} << 62))
        bad("shape entry ", dim.dump(), " is not a non-negative integer ≤ 2^62");
      entry.shape.push_back(dim.template get<std::int64_t>());
    }
    const auto& offsets = info["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      bad("data_offsets must be two non-negative integers, got ", offsets.dump());
    entry.begin = offsets[0].template get<std::uint64_t>();
    entry.end = offsets[1].template get<std::uint64_t>();
    std::uint64_t count = 0, byte_count = 0;
    if (!detail::shape_element_count(entry.shape, count) ||
        !detail::multiply_checked(count, dtype_size(entry.dtype), byte_count))
      bad("absurd shape ", detail::shape_string(entry.shape), " (element count overflows)");
    if (entry.begin > entry.end || entry.end > header.buffer_size)
      bad("data_offsets [", entry.begin, ", ", entry.end, "] are outside the ", header.buffer_size,
          "-byte data buffer (truncated file?)");
    if (entry.end - entry.begin != byte_count)
      bad("data_offsets [", entry.begin, ", ", entry.end, "] span ", entry.end - entry.begin, " bytes but shape ",
          detail::shape_string(entry.shape), " of ", dtype_name(entry.dtype), " needs ", byte_count);
    header.tensors.push_back(std::move(entry));
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (const auto& entry : header.tensors) {
    if (entry.begin < covered)
      reader.fail("tensor '", entry.name, "' at [", entry.begin, ", ", entry.end, ") overlaps the previous tensor (ending at ",
                  covered, ")");
    if (entry.begin > covered)
      reader.fail("gap in the data buffer: bytes [", covered, ", ", entry.begin, ") belong to no tensor");
    covered = entry.end;
    if (entry.dtype == DType::boolean)
      for (std::uint64_t i = entry.begin; i < entry.end; ++i)
        if (buffer[i] > 1) reader.fail("tensor '", entry.name, "': BOOL byte ", int(buffer[i]), " is neither 0 nor 1");
  }
  if (covered != header.buffer_size)
    reader.fail("data buffer has ", header.buffer_size, " bytes but the tensors cover only ", covered);
  return header;
}

/// Parses a safetensors file from memory, copying each tensor into an Array (validation: parse_safetensors_header).
template <class Json = nlohmann::json>
SafetensorsContents parse_safetensors_contents(const unsigned char* data, std::size_t size,
                                               const std::string& name_for_errors) {
  SafetensorsHeader header = parse_safetensors_header<Json>(data, size, name_for_errors);
  const unsigned char* buffer = data + header.buffer_offset;
  SafetensorsContents contents;
  contents.metadata = std::move(header.metadata);
  for (auto& entry : header.tensors)
    contents.tensors.emplace_back(
        entry.name, Array(entry.dtype, std::move(entry.shape),
                          std::vector<unsigned char>(buffer + entry.begin, buffer + entry.end)));
  return contents;
}

/// Parses a safetensors file from memory into a map from tensor name to array (see parse_safetensors_contents).
template <class Json = nlohmann::json>
std::map<std::string, Array> parse_safetensors(const unsigned char* data, std::size_t size,
                                               const std::string& name_for_errors) {
  return detail::to_map(parse_safetensors_contents<Json>(data, size, name_for_errors).tensors);
}

/// Reads a safetensors file: tensors in buffer order and metadata.
template <class Json = nlohmann::json>
SafetensorsContents read_safetensors_contents(const std::string& path) {
  return detail::parse_file(path, parse_safetensors_contents<Json>);
}

/// Reads a safetensors file into a map from tensor name to array.
template <class Json = nlohmann::json>
std::map<std::string, Array> read_safetensors(const std::string& path) {
  return detail::parse_file(path, parse_safetensors<Json>);
}

namespace detail {

/// The JSON header of a safetensors file for `tensors` laid out contiguously in the given order, padded with spaces
/// to a multiple of 8 bytes (without the 8-byte length before it). Throws invalid_argument naming
/// serialize_safetensors for empty, duplicate or "__metadata__" names and for names or metadata that are not valid
/// UTF-8.
template <class Json = nlohmann::json>
std::string safetensors_header_text(const NamedArrays& tensors, const std::map<std::string, std::string>& metadata) {
  const char* fn = "serialize_safetensors";
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, array] : tensors) {
    if (name.empty() || name == "__metadata__" || header.contains(name))
      throw_invalid_argument(fn, "tensor names must be non-empty, unique and not __metadata__, got '", name, "'");
    const std::uint64_t end = offset + array.bytes().size();
    header[name] = {{"dtype", safetensors_dtype_name(array.dtype())},
                    {"shape", array.shape()},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const typename Json::exception& e) {
    throw_invalid_argument(fn, "a tensor name or metadata string is not valid UTF-8 (", e.what(), ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

/// Writes a safetensors file through write(const char* data, std::size_t size): the header length, the header
/// text (safetensors_header_text of the same tensors) and each tensor's bytes straight from its storage. The one
/// layout behind serialize_safetensors and write_safetensors.
template <class Write>
void write_safetensors_file(const std::string& header_text, const NamedArrays& tensors, Write&& write) {
  std::string length;
  append_little_endian<std::uint64_t>(length, header_text.size());
  write(length.data(), length.size());
  write(header_text.data(), header_text.size());
  for (const auto& named : tensors)
    write(reinterpret_cast<const char*>(named.second.bytes().data()), named.second.bytes().size());
}

}  // namespace detail

/// The bytes of a safetensors file: tensors laid out contiguously in the given order, JSON header padded with
/// spaces to a multiple of 8 bytes. Throws invalid_argument for empty, duplicate or "__metadata__" names and
/// for names or metadata that are not valid UTF-8.
template <class Json = nlohmann::json>
std::string serialize_safetensors(const NamedArrays& tensors, const std::map<std::string, std::string>& metadata = {}) {
  const std::string text = detail::safetensors_header_text<Json>(tensors, metadata);
  std::size_t size = 8 + text.size();
  for (const auto& named : tensors) size += named.second.bytes().size();
  std::string out;
  out.reserve(size);
  detail::write_safetensors_file(text, tensors, [&](const char* data, std::size_t count) { out.append(data, count); });
  return out;
}

/// Writes a safetensors file, byte for byte what serialize_safetensors returns, streamed: the header, then each
/// tensor's bytes straight from its storage (no copy of the data buffer in memory). The file is replaced whole or not
/// at all (io/atomic_file.hpp: a temporary file beside `path`, renamed over it once flushed; `listener` hears of it).
/// Throws invalid_argument as serialize_safetensors, before any file is created, and attnscope::io_error naming
/// write_safetensors and the path when the file cannot be created or written (the temporary file is then removed and
/// an existing file at `path` left as it was).
template <class Json = nlohmann::json>
void write_safetensors(const std::string& path, const NamedArrays& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       TemporaryFileListener* listener = nullptr) {
  const std::string text = detail::safetensors_header_text<Json>(tensors, metadata);
  detail::write_file_streamed("write_safetensors", path, [&](const auto& write) {
    detail::write_safetensors_file(text, tensors, write);
  }, listener);
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES  // compiled part (src/extern_templates/io.cpp)
namespace detail {
extern template std::string safetensors_header_text<nlohmann::json>(const NamedArrays&,
                                                                    const std::map<std::string, std::string>&);
}  // namespace detail
extern template SafetensorsHeader parse_safetensors_header<nlohmann::json>(const unsigned char*, std::size_t,
                                                                            const std::string&);
extern template SafetensorsContents parse_safetensors_contents<nlohmann::json>(const unsigned char*, std::size_t,
                                                                                const std::string&);
extern template std::map<std::string, Array> parse_safetensors<nlohmann::json>(const unsigned char*, std::size_t,
                                                                                const std::string&);
extern template std::string serialize_safetensors<nlohmann::json>(const NamedArrays&,
                                                                  const std::map<std::string, std::string>&);
#endif

}  // namespace attnscope::io
