// tools/run_options.hpp — the run options an output of `rowstats` or `report` records beside its results (what was
// analysed and how: input file and its CRC-32 or the model, the tokens' CRC-32, map, scale, window, causal, sink
// keys, top-k, dtype), so that `merge` can refuse shards that were made differently. In a safetensors output they are
// the __metadata__ strings; an NPZ has no metadata, so they are the JSON object of a uint8 array named
// run_options_array, one int32 per UTF-8 byte (NPY dtypes read here have no uint8; in Python:
// json.loads(bytes(np.load(path)["run_options"].astype("u1")))).
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/array_file.hpp"
#include "cli_output.hpp"

namespace attnscope::cli {

using RunOptions = std::map<std::string, std::string>;

/// The NPZ array holding the run options (a safetensors output keeps them in its metadata instead).
inline constexpr const char* run_options_array = "run_options";

/// Keys that say where one shard's data came from but not how it was analysed: shards may differ in them only where
/// the merge allows different inputs (rows of a JSON report); array shards (rowstats by layer or head) must agree.
inline const std::set<std::string>& run_identity_keys() {
  static const std::set<std::string> keys = {"input"};
  return keys;
}

/// "%08x" of a CRC-32 (zlib's, the one of Python's zlib.crc32 and of ZIP).
inline std::string crc32_hex(std::uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(crc));
  return text;
}

/// CRC-32 of a file's bytes, read in 1 MiB chunks. Throws attnscope::io_error naming the file when it cannot be read.
inline std::string file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) attnscope::detail::throw_io_error("file_crc32", path, "cannot be opened");
  std::vector<char> buffer(1 << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    if (got > 0) crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(got));
  }
  return crc32_hex(static_cast<std::uint32_t>(crc));
}

/// CRC-32 of token ids as little-endian int32 (Python: zlib.crc32(np.asarray(ids, "<i4").tobytes())).
inline std::string tokens_crc32(const std::vector<int>& tokens) {
  std::vector<unsigned char> bytes;
  bytes.reserve(tokens.size() * 4);
  for (const int id : tokens) {
    const auto value = static_cast<std::uint32_t>(id);
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<unsigned char>(value >> shift));
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  if (!bytes.empty()) crc = crc32(crc, bytes.data(), static_cast<uInt>(bytes.size()));
  return crc32_hex(static_cast<std::uint32_t>(crc));
}

/// "0,1,8" of a list of integers.
template <class Integer>
std::string join_integers(const std::vector<Integer>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

/// The run options of an array file written by rowstats (or merge): the safetensors metadata, or the JSON object of
/// the NPZ array run_options_array; empty when the file has none. Throws attnscope::io_error naming the file when the
/// NPZ array is not a JSON object of strings.
inline RunOptions read_run_options(const io::ArrayFile& file) {
  RunOptions options;
  if (file.format() == io::ArrayFileFormat::safetensors) {
    options = file.metadata();
    return options;
  }
  const io::MappedArray* array = file.find(run_options_array);
  if (array == nullptr) return options;
  if (array->dtype() != io::DType::int32 || array->shape().size() != 1)
    attnscope::detail::throw_io_error("read_run_options", file.path(), run_options_array,
                                      " must be a 1-D int32 array of UTF-8 bytes (JSON)");
  std::string bytes;
  for (const std::int32_t value : array->to_array().to_vector<std::int32_t>()) {
    if (value < 0 || value > 255)
      attnscope::detail::throw_io_error("read_run_options", file.path(), run_options_array, " holds ", value,
                                        ", not a byte");
    bytes.push_back(static_cast<char>(value));
  }
  try {
    const nlohmann::json object = nlohmann::json::parse(bytes);
    if (!object.is_object()) throw std::runtime_error("not a JSON object");
    for (const auto& [key, value] : object.items()) options[key] = value.get<std::string>();
  } catch (const std::exception& error) {
    attnscope::detail::throw_io_error("read_run_options", file.path(), run_options_array,
                                      " is not a JSON object of strings: ", error.what());
  }
  return options;
}

/// The NPZ array carrying `options` (one int32 per byte of their JSON).
inline io::Array run_options_as_array(const RunOptions& options) {
  const std::string text = nlohmann::json(options).dump();
  std::vector<std::int32_t> bytes;
  for (const char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return io::Array::from_vector(bytes, {static_cast<std::int64_t>(text.size())});
}

/// Writes `arrays` with their run options: safetensors metadata, or the NPZ array run_options_array (replacing `path`
/// whole or not at all; the command's registry of temporary files hears of the temporary file).
inline void write_arrays_with_run_options(const std::string& path, io::NamedArrays arrays, const RunOptions& options) {
  const bool safetensors = path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
  if (!safetensors) arrays.emplace_back(run_options_array, run_options_as_array(options));
  io::write_array_file(path, arrays, safetensors ? options : RunOptions{}, io::Compression::stored, temporary_files());
}

/// The first option in which `a` and `b` differ, ignoring `ignored` keys ("" when they agree): "top_k is 1,8 in
/// FIRST but 1,8,64 in SECOND", a missing key shown as "(absent)".
inline std::string run_options_difference(const RunOptions& a, const std::string& a_name, const RunOptions& b,
                                          const std::string& b_name, const std::set<std::string>& ignored = {}) {
  std::set<std::string> keys;
  for (const auto& entry : a) keys.insert(entry.first);
  for (const auto& entry : b) keys.insert(entry.first);
  for (const std::string& key : keys) {
    if (ignored.count(key)) continue;
    const auto in_a = a.find(key), in_b = b.find(key);
    const std::string value_a = in_a == a.end() ? "(absent)" : in_a->second;
    const std::string value_b = in_b == b.end() ? "(absent)" : in_b->second;
    if (value_a != value_b)
      return "run option " + key + " is '" + value_a + "' in " + a_name + " but '" + value_b + "' in " + b_name;
  }
  return "";
}

}  // namespace attnscope::cli
