// tools/command_merge.cpp — `attnscope merge`: combine the outputs of sharded runs (rowstats or report over
// different layers, heads or documents) into one file: NPZ/safetensors arrays by name, CSV tables by rows, JSON
// documents by key or element. Documented in docs/cli.md (the scale-out recipe).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/array_file.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "commands.hpp"
#include "run_options.hpp"

namespace attnscope::cli {
namespace {

constexpr const char* merge_usage =
    R"(usage: attnscope merge --out OUT [--concatenate] INPUT...

Combines the outputs of sharded runs into one file of the same kind (chosen by the extension of OUT):
  .npz / .safetensors  arrays by name. An array name present in several inputs is an error unless the copies are
                       identical (kept once) or --concatenate is given: then the copies are joined along their
                       first axis (shards by head: a layer's entropy [2, L] + [2, L] -> [4, L]). NPZ and
                       safetensors inputs may be mixed. The merge refuses
                         - inputs whose run options differ (recorded by rowstats: input CRC-32 or model and
                           tokens, map, dtype, scale, window, causal, sink keys, top-k; the input's path may differ),
                         - a head listed twice in a layer's heads array (overlapping shards, a shard given twice),
                         - an array of a layer whose row count is not the number of heads in its heads array,
                         - an array joined by --concatenate whose layer has no heads array (its order is unknown).
                       Each layer's rows are sorted by head index and the arrays by layer index, so the order of
                       the inputs (e.g. a shell glob head*.npz: head10 before head2) does not matter.
  .csv                 one table: the header line must be the same in every input; rows are appended in order.
  .json                objects are merged key by key: a key present twice joins its values when both are arrays of
                       objects (rows, e.g. the "heads" of `attnscope report --json`), keeps one copy when they are
                       equal (e.g. "columns"), and is an error otherwise; top-level arrays are concatenated.

Options:
  -o, --out FILE    the merged output
  --concatenate     join arrays of the same name along axis 0 (NPZ/safetensors)
  --threads N       accepted for uniformity (unused)
  --help            this text
)";

/// Joins two arrays of the same dtype and trailing shape along axis 0.
io::Array concatenate_first_axis(const io::Array& first, const io::Array& second, const std::string& name) {
  auto trailing = [](const io::Array& array) {
    return std::vector<std::int64_t>(array.shape().begin() + 1, array.shape().end());
  };
  if (first.dtype() != second.dtype() || first.rank() == 0 || second.rank() == 0 || trailing(first) != trailing(second))
    attnscope::detail::throw_invalid_argument("merge", "cannot concatenate '", name, "': ",
                                              io::dtype_name(first.dtype()), io::detail::shape_string(first.shape()),
                                              " and ", io::dtype_name(second.dtype()),
                                              io::detail::shape_string(second.shape()));
  std::vector<std::int64_t> shape = first.shape();
  shape[0] += second.shape()[0];
  std::vector<unsigned char> bytes = first.bytes();
  bytes.insert(bytes.end(), second.bytes().begin(), second.bytes().end());
  return io::Array(first.dtype(), std::move(shape), std::move(bytes));
}

/// The rows of `array` (axis 0) in the order `order`.
io::Array permute_first_axis(const io::Array& array, const std::vector<std::size_t>& order) {
  const std::size_t row_bytes = array.bytes().size() / static_cast<std::size_t>(array.shape()[0]);
  std::vector<unsigned char> bytes;
  bytes.reserve(array.bytes().size());
  for (const std::size_t row : order)
    bytes.insert(bytes.end(), array.bytes().begin() + static_cast<std::ptrdiff_t>(row * row_bytes),
                 array.bytes().begin() + static_cast<std::ptrdiff_t>((row + 1) * row_bytes));
  return io::Array(array.dtype(), array.shape(), std::move(bytes));
}

/// The layer of an array name "layer{i}.{part}", or -1.
Index merged_layer_of(const std::string& name) {
  const auto parsed = io::parse_layer_array_name(name);
  return parsed ? parsed->layer : -1;
}

/// Checks the per-layer head bookkeeping of merged arrays and sorts each layer's rows by head index:
///  - a layer's heads array ("layer{i}.heads", written by rowstats) lists no head twice (overlapping shards, or one
///    shard given twice);
///  - every other array of that layer has one row (axis 0) per listed head (shards made with different --top-k
///    have different arrays);
///  - an array joined by --concatenate belongs to a layer with a heads array (without one the head order cannot be
///    told, so the merge refuses instead of trusting the order of the inputs).
/// Rows are then permuted so that the heads ascend, whatever order the shards came in (shell globs sort head10
/// before head2).
void check_and_sort_heads(io::NamedArrays& merged, const std::set<std::string>& concatenated) {
  std::map<Index, std::size_t> heads_array;
  for (std::size_t i = 0; i < merged.size(); ++i) {
    const auto parsed = io::parse_layer_array_name(merged[i].first);
    if (parsed && parsed->part == "heads") heads_array[parsed->layer] = i;
  }
  for (const std::string& name : concatenated)
    if (!heads_array.count(merged_layer_of(name)))
      attnscope::detail::throw_invalid_argument(
          "merge", "cannot tell the head order of '", name, "' joined by --concatenate: its layer has no heads "
          "array (layer{i}.heads, written by rowstats); merge such shards in head order yourself");
  for (const auto& [layer, index] : heads_array) {
    const io::Array& heads_values = merged[index].second;
    if (heads_values.rank() != 1)
      attnscope::detail::throw_invalid_argument("merge", merged[index].first, " must be 1-D, got ",
                                                io::detail::shape_string(heads_values.shape()));
    const std::vector<std::int64_t> heads = heads_values.to_vector<std::int64_t>();
    std::vector<std::size_t> order(heads.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return heads[a] < heads[b]; });
    for (std::size_t i = 1; i < order.size(); ++i)
      if (heads[order[i]] == heads[order[i - 1]])
        attnscope::detail::throw_invalid_argument("merge", "head ", heads[order[i]], " of layer ", layer,
                                                  " appears twice (overlapping shards, or one shard given twice)");
    for (auto& [name, array] : merged) {
      if (merged_layer_of(name) != layer) continue;
      if (array.rank() == 0 || array.shape()[0] != static_cast<std::int64_t>(heads.size()))
        attnscope::detail::throw_invalid_argument(
            "merge", "'", name, "' has shape ", io::detail::shape_string(array.shape()), " but ", merged[index].first,
            " lists ", heads.size(), " heads (shards with different arrays, e.g. made with different --top-k)");
    }
    const bool sorted = std::is_sorted(order.begin(), order.end());
    if (sorted) continue;
    for (auto& [name, array] : merged)
      if (merged_layer_of(name) == layer) array = permute_first_axis(array, order);
  }
}

void merge_arrays(const std::vector<std::string>& inputs, const std::string& out, bool concatenate) {
  io::NamedArrays merged;
  std::map<std::string, std::size_t> position;
  std::set<std::string> concatenated;
  RunOptions run;
  std::optional<io::Array> layout_version;  // an NPZ capture's layout array: kept once, never joined
  for (std::size_t n = 0; n < inputs.size(); ++n) {
    const std::string& input = inputs[n];
    const io::ArrayFile file(input);
    const RunOptions options = read_run_options(file);
    if (n == 0) {
      run = options;
    } else if (const std::string difference =
                   run_options_difference(run, inputs[0], options, input, run_identity_keys());
               !difference.empty()) {
      attnscope::detail::throw_io_error("merge", input, "was made differently from ", inputs[0],
                                        " and cannot be merged with it: ", difference);
    }
    for (const io::MappedArray& mapped : file.arrays()) {
      const std::string& name = mapped.name();
      if (name == run_options_array) continue;
      io::Array array = mapped.to_array();
      mapped.release_pages();
      if (name == io::capture_layout_key) {
        if (layout_version && layout_version->bytes() != array.bytes())
          attnscope::detail::throw_io_error("merge", input, "has another capture layout version than ", inputs[0]);
        layout_version = std::move(array);
        continue;
      }
      const auto found = position.find(name);
      if (found == position.end()) {
        position.emplace(name, merged.size());
        merged.emplace_back(name, std::move(array));
        continue;
      }
      io::Array& existing = merged[found->second].second;
      if (concatenate) {
        existing = concatenate_first_axis(existing, array, name);
        concatenated.insert(name);
      } else if (existing.dtype() != array.dtype() || existing.shape() != array.shape() ||
                 existing.bytes() != array.bytes()) {
        attnscope::detail::throw_invalid_argument("merge", "array '", name, "' of ", input,
                                                  " differs from an earlier input's (use --concatenate for shards "
                                                  "by head)");
      }
    }
  }
  check_and_sort_heads(merged, concatenated);
  // shards by layer in any order give the arrays in layer order (names without a layer first, in input order)
  std::stable_sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) {
    return merged_layer_of(a.first) < merged_layer_of(b.first);
  });
  if (layout_version) merged.emplace_back(io::capture_layout_key, std::move(*layout_version));
  if (run.empty()) io::write_array_file(out, merged, {}, io::Compression::stored, temporary_files());
  else write_arrays_with_run_options(out, merged, run);
  std::cerr << "attnscope: merged " << merged.size() << " arrays from " << inputs.size() << " files into " << out << "\n";
}

void merge_csv(const std::vector<std::string>& inputs, const std::string& out) {
  std::string header, body;
  for (const std::string& input : inputs) {
    std::istringstream lines(read_text_file(input));
    std::string line;
    if (!std::getline(lines, line)) attnscope::detail::throw_io_error("merge", input, "is empty (no CSV header)");
    if (header.empty()) header = line;
    else if (line != header)
      attnscope::detail::throw_io_error("merge", input, "has CSV header '", line, "', the first input has '", header,
                                        "'");
    while (std::getline(lines, line))
      if (!line.empty()) body += line + "\n";
  }
  io::write_file(out, header + "\n" + body, temporary_files());
}

/// True for a JSON array whose elements are all objects (table rows).
bool is_array_of_objects(const nlohmann::json& value) {
  if (!value.is_array()) return false;
  for (const auto& element : value)
    if (!element.is_object()) return false;
  return true;
}

/// The run options of a report's JSON ("runs": one object per run, tools/run_options.hpp) as RunOptions.
RunOptions report_run_options(const nlohmann::json& run, const std::string& input) {
  RunOptions options;
  if (!run.is_object()) attnscope::detail::throw_io_error("merge", input, "has a \"runs\" entry that is not an object");
  for (const auto& [key, value] : run.items())
    options[key] = value.is_string() ? value.get<std::string>() : value.dump();
  return options;
}

/// Reports of several documents merge; reports made with different options (map, columns, sink keys, dtype, ...)
/// do not: every run of `document` must agree with the first run of `merged` except in what identifies its input
/// (the input, its CRC-32, its tokens). A report with "runs" cannot be merged with JSON that has none.
void check_report_runs(const nlohmann::json& document, const std::string& input, const nlohmann::json& merged,
                       const std::string& first_input) {
  static const std::set<std::string> identity = {"input", "input_crc32", "model", "tokens", "tokens_crc32"};
  const bool has_runs = document.is_object() && document.contains("runs");
  if (has_runs && (!document["runs"].is_array() || document["runs"].empty()))
    attnscope::detail::throw_io_error("merge", input, "has \"runs\" that is not a non-empty array");
  if (merged.is_null()) return;
  const bool merged_runs = merged.is_object() && merged.contains("runs");
  if (has_runs != merged_runs)
    attnscope::detail::throw_io_error("merge", input, has_runs ? "records" : "does not record", " its run options (\"runs\") but ",
                                      first_input, has_runs ? " does not" : " does", "; they cannot be merged");
  if (!has_runs) return;
  const RunOptions reference = report_run_options(merged["runs"].front(), first_input);
  for (const auto& run : document["runs"]) {
    const std::string difference =
        run_options_difference(reference, first_input, report_run_options(run, input), input, identity);
    if (!difference.empty())
      attnscope::detail::throw_io_error("merge", input, "was made differently from ", first_input,
                                        " and cannot be merged with it: ", difference);
  }
}

void merge_json(const std::vector<std::string>& inputs, const std::string& out) {
  nlohmann::json merged;
  for (const std::string& input : inputs) {
    nlohmann::json document;
    try {
      document = nlohmann::json::parse(read_text_file(input));
    } catch (const nlohmann::json::exception& error) {
      attnscope::detail::throw_io_error("merge", input, "is not valid JSON: ", error.what());
    }
    check_report_runs(document, input, merged, inputs.front());
    if (merged.is_null()) {
      merged = std::move(document);
    } else if (merged.is_array() && document.is_array()) {
      for (auto& element : document) merged.push_back(std::move(element));
    } else if (merged.is_object() && document.is_object()) {
      for (auto& [key, value] : document.items()) {
        if (!merged.contains(key)) {
          merged[key] = value;
        } else if (is_array_of_objects(merged[key]) && is_array_of_objects(value)) {
          for (const auto& element : value) merged[key].push_back(element);  // rows, e.g. report's "heads"
        } else if (merged[key] != value) {
          attnscope::detail::throw_io_error("merge", input, "key '", key, "' differs from an earlier input's");
        }
      }
    } else {
      attnscope::detail::throw_io_error("merge", input, "is a JSON ", document.type_name(), ", the first input a ",
                                        merged.type_name());
    }
  }
  io::write_file(out, merged.dump(2) + "\n", temporary_files());
}

int command_merge(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("out", "-o").flag("concatenate");
  if (parse_subcommand(arguments, argc, argv, merge_usage)) return 0;
  const std::string out = arguments.require("out");
  const std::vector<std::string>& inputs = arguments.positional();
  if (inputs.empty()) throw usage_error("expected at least one INPUT");
  const bool arrays = ends_with(out, ".npz") || ends_with(out, ".safetensors");
  for (const std::string& input : inputs) {
    const bool input_arrays = ends_with(input, ".npz") || ends_with(input, ".safetensors") || ends_with(input, ".npy");
    const bool same_kind = arrays ? input_arrays : (ends_with(out, ".csv") ? ends_with(input, ".csv")
                                                                           : ends_with(input, ".json"));
    if (!same_kind) throw usage_error("input " + input + " is not of the kind of --out " + out);
  }
  check_output_options(arguments, {"out"});
  if (arrays) merge_arrays(inputs, out, arguments.has("concatenate"));
  else if (ends_with(out, ".csv")) merge_csv(inputs, out);
  else if (ends_with(out, ".json")) merge_json(inputs, out);
  else throw usage_error("--out must end in .npz, .safetensors, .csv or .json: " + out);
  return 0;
}

}  // namespace

const Command& merge_command() {
  static const Command command{"merge", "combine sharded outputs (NPZ/safetensors arrays, CSV, JSON) into one file",
                               merge_usage, command_merge};
  return command;
}

}  // namespace attnscope::cli
