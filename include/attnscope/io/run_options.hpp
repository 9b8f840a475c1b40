// attnscope/io/run_options.hpp — the run record every output of attnscope carries beside its results: what was
// analysed (the model: path, architecture, weight dtype; the input: a file and its CRC-32, or the token ids, their
// CRC-32 and the text source with its window options), how (the command's options) and by which attnscope version.
// One flat map of strings for every command and format:
//   - safetensors: the __metadata__ strings;
//   - NPZ (no metadata): the JSON object of the int32 array run_options_array, one element per UTF-8 byte (in
//     Python: json.loads(bytes(np.load(path)["run_options"].astype("u1"))));
//   - CSV: comment lines before the header, "# attnscope run: {JSON}" (one per run of a merged study,
//     "# attnscope run N: {JSON}"), read by pandas.read_csv(path, comment="#");
//   - JSON: the array "runs" of the document, one object per run.
// The keys fall into three kinds (run_document_keys, run_selection_keys, the rest: how the results were computed);
// analysis/merge.hpp decides from them what merges. Opt-in (needs zlib and nlohmann-json, target attnscope::io).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "attnscope/core/error.hpp"
#include "attnscope/io/array_file.hpp"

namespace attnscope::io {

/// The run record: key → value, both UTF-8 strings.
using RunOptions = std::map<std::string, std::string>;

/// The version of attnscope recorded as "attnscope_version" (the project version of CMakeLists.txt).
inline constexpr const char* attnscope_version = "0.1.0";

/// The NPZ array holding the run record (a safetensors file keeps it in its metadata instead).
inline constexpr const char* run_options_array = "run_options";

/// The key of a merged study's per-document records (a JSON array of run records, one per `run` index).
inline constexpr const char* run_records_key = "runs";

/// Keys that say which document was analysed (its file, its tokens, the text source and the window cut from it):
/// outputs that differ only in them are shards of different documents, which a merge concatenates with a run
/// index. Every other key (the model, the options, the version) must agree for a merge.
inline const std::set<std::string>& run_document_keys() {
  static const std::set<std::string> keys = {
      "input",       "input_crc32", "tokens",      "tokens_crc32", "token_ids",          "tokens_file",
      "text",        "text_file",   "text_crc32",  "from",         "skip_tokens",        "max_tokens",
      "input_tokens", "cut",        "generate",    "special_tokens", "add_special_tokens"};
  return keys;
}

/// Keys that say which part of a model or file an output covers (its layers and heads): shards split by them merge.
inline const std::set<std::string>& run_selection_keys() {
  static const std::set<std::string> keys = {"layers", "heads"};
  return keys;
}

/// "%08x" of a CRC-32 (zlib's, the one of Python's zlib.crc32 and of ZIP).
inline std::string crc32_hex(std::uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(crc));
  return text;
}

/// CRC-32 of a byte string (Python: "%08x" % zlib.crc32(data)).
inline std::string bytes_crc32(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::size_t at = 0; at < bytes.size(); at += 1u << 30) {
    const std::size_t n = std::min<std::size_t>(bytes.size() - at, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
  }
  return crc32_hex(static_cast<std::uint32_t>(crc));
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
  std::string bytes;
  bytes.reserve(tokens.size() * 4);
  for (const int id : tokens) {
    const auto value = static_cast<std::uint32_t>(id);
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<char>(value >> shift));
  }
  return bytes_crc32(bytes);
}

/// "0,1,8" of a list of integers.
template <class Integer>
std::string join_integers(const std::vector<Integer>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

/// Records the tokens a run analysed: their count, their CRC-32 and the ids themselves ("1,2,3").
inline void record_tokens(RunOptions& run, const std::vector<int>& tokens) {
  run["tokens"] = std::to_string(tokens.size());
  run["tokens_crc32"] = tokens_crc32(tokens);
  run["token_ids"] = join_integers(tokens);
}

/// A JSON object of strings as RunOptions (values that are not strings are kept as their JSON text). Throws
/// attnscope::io_error naming `where` when `object` is not a JSON object.
inline RunOptions run_options_from_json(const nlohmann::json& object, const std::string& where) {
  if (!object.is_object())
    attnscope::detail::throw_io_error("run_options", where, "holds a run record that is not a JSON object");
  RunOptions options;
  for (const auto& [key, value] : object.items()) options[key] = value.is_string() ? value.get<std::string>() : value.dump();
  return options;
}

/// The run record of an array file: the safetensors metadata, or the JSON object of the NPZ array run_options_array;
/// empty when the file has none. Throws attnscope::io_error naming the file when the NPZ array is not the UTF-8
/// bytes of a JSON object.
inline RunOptions read_run_options(const ArrayFile& file) {
  if (file.format() == ArrayFileFormat::safetensors) return RunOptions(file.metadata().begin(), file.metadata().end());
  const MappedArray* array = file.find(run_options_array);
  if (array == nullptr) return {};
  if (array->dtype() != DType::int32 || array->shape().size() != 1)
    attnscope::detail::throw_io_error("read_run_options", file.path(), run_options_array,
                                      " must be a 1-D int32 array of UTF-8 bytes (JSON)");
  std::string bytes;
  for (const std::int32_t value : array->to_array().to_vector<std::int32_t>()) {
    if (value < 0 || value > 255)
      attnscope::detail::throw_io_error("read_run_options", file.path(), run_options_array, " holds ", value,
                                        ", not a byte");
    bytes.push_back(static_cast<char>(value));
  }
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(bytes);
  } catch (const std::exception& error) {
    attnscope::detail::throw_io_error("read_run_options", file.path(), run_options_array, " is not JSON: ", error.what());
  }
  return run_options_from_json(object, file.path() + " " + run_options_array);
}

/// The NPZ array carrying `options` (one int32 per byte of their JSON).
inline Array run_options_as_array(const RunOptions& options) {
  const std::string text = nlohmann::json(options).dump();
  std::vector<std::int32_t> bytes;
  bytes.reserve(text.size());
  for (const char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return Array::from_vector(bytes, {static_cast<std::int64_t>(text.size())});
}

/// Writes `arrays` with their run record: safetensors metadata, or the NPZ array run_options_array. The file is
/// replaced whole or not at all (`listener` hears of its temporary file, io/atomic_file.hpp).
inline void write_array_file_with_run_options(const std::string& path, NamedArrays arrays, const RunOptions& options,
                                              Compression compression = Compression::stored,
                                              TemporaryFileListener* listener = nullptr) {
  const bool safetensors = path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
  if (!safetensors) arrays.emplace_back(run_options_array, run_options_as_array(options));
  write_array_file(path, arrays, safetensors ? options : RunOptions{}, compression, listener);
}

/// The first key, outside `ignored`, in which `a` and `b` differ ("" when they agree): "run option top_k is '1,8' in
/// FIRST but '1,8,64' in SECOND", a missing key shown as "(absent)".
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
    if (value_a != value_b) {
      const auto shown = [](const std::string& value) {
        return value.size() > 80 ? value.substr(0, 60) + "... (" + std::to_string(value.size()) + " bytes)" : value;
      };
      return "run option " + key + " is '" + shown(value_a) + "' in " + a_name + " but '" + shown(value_b) + "' in " +
             b_name;
    }
  }
  return "";
}

/// The keys of `run` that identify its document (run_document_keys), the rest dropped.
inline RunOptions run_document(const RunOptions& run) {
  RunOptions document;
  for (const auto& [key, value] : run)
    if (run_document_keys().count(key)) document.emplace(key, value);
  return document;
}

/// The comment line "# attnscope run: {JSON}" of a CSV written by one run; with `index` >= 0, "# attnscope run N:".
inline std::string csv_run_line(const RunOptions& run, long index = -1) {
  return std::string("# attnscope run") + (index >= 0 ? " " + std::to_string(index) : std::string()) + ": " +
         nlohmann::json(run).dump() + "\n";
}

/// A CSV split into the run records of its comment lines, its header line and its data lines.
struct CsvWithRuns {
  std::vector<RunOptions> runs;    // from the "# attnscope run[ N]: {JSON}" lines, in order
  std::string header;              // the first line that is not a comment
  std::vector<std::string> rows;   // the non-empty lines after it
};

/// Splits CSV text written by attnscope (csv_run_line comments, then the table). Other lines starting with "#" are
/// skipped, as pandas.read_csv(comment="#") does. Throws attnscope::io_error naming `where` when a run line's JSON is
/// not an object of strings, or when the text has no header line.
inline CsvWithRuns split_csv_runs(const std::string& text, const std::string& where) {
  CsvWithRuns csv;
  static const std::string prefix = "# attnscope run";
  bool in_header = true;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (in_header && line.compare(0, prefix.size(), prefix) == 0) {
      const std::size_t colon = line.find(": ");
      if (colon == std::string::npos) attnscope::detail::throw_io_error("split_csv_runs", where, "has a run line without ': '");
      try {
        csv.runs.push_back(run_options_from_json(nlohmann::json::parse(line.substr(colon + 2)), where));
      } catch (const nlohmann::json::exception& error) {
        attnscope::detail::throw_io_error("split_csv_runs", where, "has a run line that is not JSON: ", error.what());
      }
      continue;
    }
    if (!line.empty() && line[0] == '#') continue;
    if (in_header) {
      if (line.empty()) continue;
      csv.header = line;
      in_header = false;
    } else if (!line.empty()) {
      csv.rows.push_back(std::move(line));
    }
  }
  if (in_header) attnscope::detail::throw_io_error("split_csv_runs", where, "has no CSV header line");
  return csv;
}

/// `table` (a CSV with its header line) preceded by the comment line of `run`.
inline std::string csv_with_run(const RunOptions& run, const std::string& table) { return csv_run_line(run) + table; }

}  // namespace attnscope::io
