// tools/command_merge.cpp — `attnscope merge`: combine the outputs of sharded runs (rowstats or report over
// different layers, heads or documents) into one file: NPZ/safetensors arrays by name, CSV tables by rows, JSON
// documents by key or element. Documented in docs/cli.md (the scale-out recipe).
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/array_file.hpp"
#include "commands.hpp"

namespace attnscope::cli {
namespace {

constexpr const char* merge_usage =
    R"(usage: attnscope merge --out OUT [--concatenate] INPUT...

Combines the outputs of sharded runs into one file of the same kind (chosen by the extension of OUT):
  .npz / .safetensors  arrays by name. An array name present in several inputs is an error unless the copies are
                       identical (kept once) or --concatenate is given: then the copies are joined along their
                       first axis in input order (shards by head: a layer's entropy [2, L] + [2, L] -> [4, L], and
                       the layer's heads array lists the heads in the joined order). NPZ and safetensors inputs may be mixed.
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

/// The arrays of an NPZ, NPY or safetensors file (read through the memory map, copied one array at a time).
io::NamedArrays read_arrays(const std::string& path) {
  const io::ArrayFile file(path);
  io::NamedArrays arrays;
  for (const io::MappedArray& array : file.arrays()) {
    arrays.emplace_back(array.name(), array.to_array());
    array.release_pages();
  }
  return arrays;
}

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

void merge_arrays(const std::vector<std::string>& inputs, const std::string& out, bool concatenate) {
  io::NamedArrays merged;
  std::map<std::string, std::size_t> position;
  for (const std::string& input : inputs)
    for (auto& [name, array] : read_arrays(input)) {
      const auto found = position.find(name);
      if (found == position.end()) {
        position.emplace(name, merged.size());
        merged.emplace_back(name, std::move(array));
        continue;
      }
      io::Array& existing = merged[found->second].second;
      if (concatenate) {
        existing = concatenate_first_axis(existing, array, name);
      } else if (existing.dtype() != array.dtype() || existing.shape() != array.shape() ||
                 existing.bytes() != array.bytes()) {
        attnscope::detail::throw_invalid_argument("merge", "array '", name, "' of ", input,
                                                  " differs from an earlier input's (use --concatenate for shards "
                                                  "by head)");
      }
    }
  io::write_array_file(out, merged, {{"command", "merge"}});
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
  io::write_file(out, header + "\n" + body);
}

/// True for a JSON array whose elements are all objects (table rows).
bool is_array_of_objects(const nlohmann::json& value) {
  if (!value.is_array()) return false;
  for (const auto& element : value)
    if (!element.is_object()) return false;
  return true;
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
  io::write_file(out, merged.dump(2) + "\n");
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
    const bool input_arrays = ends_with(input, ".npz") || ends_with(input, ".safetensors");
    const bool same_kind = arrays ? input_arrays : (ends_with(out, ".csv") ? ends_with(input, ".csv")
                                                                           : ends_with(input, ".json"));
    if (!same_kind) throw usage_error("input " + input + " is not of the kind of --out " + out);
  }
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
