// tools/command_merge.cpp — `attnscope merge`: combine the outputs of sharded runs (rowstats or report over
// different layers, heads or documents) into one file by the library's merge rules (analysis/merge.hpp): NPZ/
// safetensors arrays by name, CSV tables by rows, JSON reports by rows; shards of different documents become a study
// with a run column. Documented in docs/cli.md (the scale-out recipe).
#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/analysis/merge.hpp"
#include "attnscope/io/array_file.hpp"
#include "column_aliases.hpp"
#include "commands.hpp"
#include "run_options.hpp"

namespace attnscope::cli {
namespace {

constexpr const char* merge_usage =
    R"(usage: attnscope merge --out OUT [--concatenate] INPUT...

Combines the outputs of sharded runs into one file of the same kind (chosen by the extension of OUT). What merges is
decided from each input's run record (the model, the options, the version, the input document; docs/cli.md):
  - every input must have been made the same way: the merge refuses inputs whose record differs in anything but the
    document (input file and its CRC-32, token ids, text source, from, skip_tokens, max_tokens) and the
    selection (layers, heads), naming the first field that differs;
  - inputs of one document split by layer or head join (a head present twice is refused);
  - inputs of different documents concatenate as a study: each must cover the same layers and heads (a layer/head
    split must have the same tokens), each row gets the index of its document in a `run` column, and the record
    keeps one entry per document ("runs").
  .npz / .safetensors  arrays by name. An array name present in several inputs of one document is an error unless
                       the copies are identical (kept once) or --concatenate is given: then the copies are joined
                       along their first axis (shards by head: a layer's entropy [2, L] + [2, L] -> [4, L]). NPZ and
                       safetensors inputs may be mixed. Each layer's rows are sorted by its heads array (layer{i}.heads,
                       which must list no head twice and match the rows of the layer's arrays) and the arrays by layer
                       index, so the order of the inputs does not matter. Rowstats files of several documents join
                       along their columns: layer{i}.{statistic} [H, L1 + L2 + ...], with run and position [L1 + L2 +
                       ...] int32 (each column's document and position in it).
  .csv                 one table (the "# attnscope run" comment lines first, then the header, the same in every
                       input); rows ordered by document, then layer and head (unless the runs were sorted: report
                       sort, compare), a first column run for a study. CSV without run lines: appended in order.
  .json                reports (the JSON of `attnscope report`): the "heads" rows joined as for CSV, a "run" per row for a
                       study; every other key equal in all inputs. Other JSON objects merge key by key (arrays of
                       objects joined, equal values kept once); top-level arrays are concatenated.

Options:
  -o, --out FILE    the merged output
  --concatenate     join arrays of the same name along axis 0 (NPZ/safetensors shards by head)
  --threads N       accepted for uniformity (unused)
  --help            this text
)";

/// Reads every array input (its arrays under their current names, column_aliases.hpp) and merges them.
void merge_arrays(const std::vector<std::string>& inputs, const std::string& out, bool concatenate) {
  std::vector<analysis::ArrayShard> shards;
  for (const std::string& input : inputs) {
    const io::ArrayFile file(input);
    analysis::ArrayShard shard;
    shard.name = input;
    shard.run = read_run_options(file);
    for (const io::MappedArray& mapped : file.arrays()) {
      const std::string name = rowstats_array_name(mapped.name());  // layer{i}.max_attention is layer{i}.max_weight
      if (name == run_options_array) continue;
      shard.arrays.emplace_back(name, mapped.to_array());
      mapped.release_pages();
    }
    shards.push_back(std::move(shard));
  }
  analysis::MergedArrays merged = analysis::merge_array_shards(std::move(shards), concatenate);
  const std::size_t count = merged.arrays.size();
  if (merged.run.empty()) io::write_array_file(out, merged.arrays, {}, io::Compression::stored, temporary_files());
  else write_arrays_with_run_options(out, std::move(merged.arrays), merged.run);
  std::cerr << "attnscope: merged " << count << " arrays from " << inputs.size() << " files into " << out << "\n";
}

/// A CSV's text with its header line (the first line that is not a "#" comment) under the current column names.
std::string csv_with_current_header(const std::string& text) {
  std::size_t start = 0;
  while (start < text.size() && text[start] == '#') {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) return text;
    start = end + 1;
  }
  const std::size_t end = std::min(text.find('\n', start), text.size());
  return text.substr(0, start) + report_column_list(text.substr(start, end - start)) + text.substr(end);
}

void merge_csv(const std::vector<std::string>& inputs, const std::string& out) {
  std::vector<std::pair<std::string, std::string>> tables;
  for (const std::string& input : inputs) {
    const std::string text = read_text_file(input);
    if (text.empty()) attnscope::detail::throw_io_error("merge", input, "is empty (no CSV header)");
    tables.emplace_back(input, csv_with_current_header(text));  // a report's max_attention column is max_max_weight
  }
  io::write_file(out, analysis::merge_csv_tables(tables), temporary_files());
}

void merge_json(const std::vector<std::string>& inputs, const std::string& out) {
  std::vector<std::pair<std::string, nlohmann::json>> documents;
  for (const std::string& input : inputs) {
    try {
      documents.emplace_back(input, report_json_columns(nlohmann::json::parse(read_text_file(input))));
    } catch (const nlohmann::json::exception& error) {
      attnscope::detail::throw_io_error("merge", input, "is not valid JSON: ", error.what());
    }
  }
  io::write_file(out, analysis::merge_json_documents(std::move(documents)).dump(2) + "\n", temporary_files());
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
