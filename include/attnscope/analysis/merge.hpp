// attnscope/analysis/merge.hpp — the merge rules of `attnscope merge` (and of anyone combining outputs of sharded
// runs): what may be merged is decided from each input's run record (io/run_options.hpp).
//   - Every input must agree in how it was made (the model, the options, the version: every key that is neither a
//     document key nor a selection key); otherwise the merge refuses, naming the first key that differs.
//   - Inputs of one document (same document keys) split by layer or head (--layers, --heads, or rowstats shards)
//     join: arrays by name (identical copies kept once, or joined along axis 0 by head), table rows appended; a head
//     present twice in one document is refused.
//   - Inputs of different documents concatenate as a study: every document must cover the same layers and heads
//     (a layer/head split must have the same tokens), each row says its document (a `run` column, a run/position
//     array pair for rowstats arrays) and the record keeps one entry per document ("runs").
// Opt-in (needs nlohmann-json and zlib: target attnscope::io).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/rowstats_layout.hpp"
#include "attnscope/io/run_options.hpp"

namespace attnscope::analysis {

/// One array input of a merge: its name (in messages), its arrays (without the run_options array) and its record.
struct ArrayShard {
  std::string name;
  io::NamedArrays arrays;
  io::RunOptions run;
};

/// The merged arrays and their run record.
struct MergedArrays {
  io::NamedArrays arrays;
  io::RunOptions run;
};

namespace detail {

/// Joins two arrays of the same dtype and trailing shape along axis 0.
inline io::Array concatenate_first_axis(const io::Array& first, const io::Array& second, const std::string& name) {
  const auto trailing = [](const io::Array& array) {
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

/// Joins [H, L_n] arrays of one dtype along axis 1: [H, ΣL_n], row h the rows h of the parts one after another.
inline io::Array concatenate_columns(const std::vector<const io::Array*>& parts) {
  const io::Array& first = *parts.front();
  const std::int64_t rows = first.shape()[0];
  const std::size_t element = io::dtype_size(first.dtype());
  std::int64_t columns = 0;
  for (const io::Array* part : parts) columns += part->shape()[1];
  std::vector<unsigned char> bytes;
  bytes.reserve(static_cast<std::size_t>(rows * columns) * element);
  for (std::int64_t h = 0; h < rows; ++h)
    for (const io::Array* part : parts) {
      const std::size_t row_bytes = static_cast<std::size_t>(part->shape()[1]) * element;
      const auto begin = part->bytes().begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(h) * row_bytes);
      bytes.insert(bytes.end(), begin, begin + static_cast<std::ptrdiff_t>(row_bytes));
    }
  return io::Array(first.dtype(), {rows, columns}, std::move(bytes));
}

/// The rows of `array` (axis 0) in the order `order`.
inline io::Array permute_first_axis(const io::Array& array, const std::vector<std::size_t>& order) {
  const std::size_t row_bytes = array.bytes().size() / static_cast<std::size_t>(array.shape()[0]);
  std::vector<unsigned char> bytes;
  bytes.reserve(array.bytes().size());
  for (const std::size_t row : order)
    bytes.insert(bytes.end(), array.bytes().begin() + static_cast<std::ptrdiff_t>(row * row_bytes),
                 array.bytes().begin() + static_cast<std::ptrdiff_t>((row + 1) * row_bytes));
  return io::Array(array.dtype(), array.shape(), std::move(bytes));
}

/// The layer of an array name "layer{i}.{part}", or -1.
inline Index merged_layer_of(const std::string& name) {
  const auto parsed = io::parse_layer_array_name(name);
  return parsed ? parsed->layer : -1;
}

/// Checks the per-layer head bookkeeping of merged arrays and sorts each layer's rows by head index:
///  - a layer's heads array ("layer{i}.heads") lists no head twice (overlapping shards, or one shard given twice);
///  - every other array of that layer has one row (axis 0) per listed head (shards made with different --top-k
///    have different arrays);
///  - an array joined along axis 0 belongs to a layer with a heads array (without one the head order cannot be told).
/// Rows are then permuted so that the heads ascend, whatever order the shards came in.
inline void check_and_sort_heads(io::NamedArrays& merged, const std::set<std::string>& concatenated) {
  std::map<Index, std::size_t> heads_array;
  for (std::size_t i = 0; i < merged.size(); ++i) {
    const auto parsed = io::parse_layer_array_name(merged[i].first);
    if (parsed && parsed->part == io::rowstats_heads_part) heads_array[parsed->layer] = i;
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
    if (std::is_sorted(order.begin(), order.end())) continue;
    for (auto& [name, array] : merged)
      if (merged_layer_of(name) == layer) array = permute_first_axis(array, order);
  }
}

/// Keys that may differ between inputs of a merge: the document, the selection and a study's per-document records.
inline std::set<std::string> merge_ignored_keys() {
  std::set<std::string> keys = io::run_document_keys();
  keys.insert(io::run_selection_keys().begin(), io::run_selection_keys().end());
  keys.insert(io::run_records_key);
  return keys;
}

/// Refuses `run` (of input `name`) when it was made differently from `reference` (of `reference_name`).
inline void check_same_making(const io::RunOptions& reference, const std::string& reference_name,
                              const io::RunOptions& run, const std::string& name) {
  const std::string difference = io::run_options_difference(reference, reference_name, run, name, merge_ignored_keys());
  if (!difference.empty())
    attnscope::detail::throw_io_error("merge", name, "was made differently from ", reference_name,
                                      " and cannot be merged with it: ", difference);
}

/// The selection keys of the runs of one document joined: kept when all runs agree, else the union of their layer
/// (head) lists, or no key when any run covered all of them.
inline void join_selection(io::RunOptions& merged, const std::vector<const io::RunOptions*>& runs) {
  for (const std::string& key : io::run_selection_keys()) {
    const auto value_of = [&](const io::RunOptions* run) {
      const auto found = run->find(key);
      return found == run->end() ? std::string("(absent)") : found->second;
    };
    const auto same = [&](const io::RunOptions* run) { return value_of(run) == value_of(runs.front()); };
    if (std::all_of(runs.begin(), runs.end(), same))
      continue;  // one selection: kept as it is
    std::set<long long> values;
    bool all = false;
    for (const io::RunOptions* run : runs) {
      const auto found = run->find(key);
      if (found == run->end() || found->second == "all") {
        all = true;
        break;
      }
      std::stringstream items(found->second);
      std::string item;
      while (std::getline(items, item, ','))
        if (!item.empty()) {
          std::size_t used = 0;
          try {
            values.insert(std::stoll(item, &used));
          } catch (const std::exception&) {
            used = 0;
          }
          if (used != item.size())
            attnscope::detail::throw_invalid_argument("merge", "run option ", key, " is '", found->second,
                                                      "', not a list of integers");
        }
    }
    if (all) {
      merged.erase(key);
    } else {
      merged[key] = io::join_integers(std::vector<long long>(values.begin(), values.end()));
    }
  }
}

/// The documents of a list of runs: the index of each run's document (in order of first appearance), and each
/// document's record (its first run's, with the selection of all its runs joined).
struct Documents {
  std::vector<std::size_t> of_run;
  std::vector<io::RunOptions> records;
  std::vector<std::string> first_input;  // the input that brought each document first (in messages)
};

inline Documents group_documents(const std::vector<const io::RunOptions*>& runs, const std::vector<std::string>& inputs) {
  Documents documents;
  std::map<io::RunOptions, std::size_t> index;
  std::vector<std::vector<const io::RunOptions*>> members;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const auto [found, added] = index.emplace(io::run_document(*runs[r]), documents.records.size());
    if (added) {
      documents.records.push_back(*runs[r]);
      documents.first_input.push_back(inputs[r]);
      members.emplace_back();
    }
    documents.of_run.push_back(found->second);
    members[found->second].push_back(runs[r]);
  }
  for (std::size_t d = 0; d < members.size(); ++d) join_selection(documents.records[d], members[d]);
  return documents;
}

/// The record of a study of several documents: the keys they share (how they were made) and "runs", the JSON array
/// of every document's full record (index = the run column).
inline io::RunOptions study_record(const std::vector<io::RunOptions>& documents) {
  io::RunOptions study;
  for (const auto& [key, value] : documents.front())
    if (!io::run_document_keys().count(key) && !io::run_selection_keys().count(key)) study.emplace(key, value);
  study[io::run_records_key] = nlohmann::json(documents).dump();
  return study;
}

/// "run option X is 'a' in FIRST but 'b' in SECOND": how two documents differ (their document keys).
inline std::string document_difference(const Documents& documents, std::size_t a, std::size_t b) {
  return io::run_options_difference(io::run_document(documents.records[a]), documents.first_input[a],
                                    io::run_document(documents.records[b]), documents.first_input[b]);
}

/// Refuses documents that cover different heads: "covers ... but ...; shards split by layer or head must have the
/// same tokens".
[[noreturn]] inline void throw_different_coverage(const Documents& documents, std::size_t a, std::size_t b,
                                                  const std::string& what) {
  attnscope::detail::throw_io_error(
      "merge", documents.first_input[b], "analysed another document than ", documents.first_input[a], " (",
      document_difference(documents, a, b), ") and covers other heads (", what,
      "): shards split by layer or head must have the same tokens, shards of different documents the same layers "
      "and heads");
}

/// Arrays of one document's shards merged by name (the rules of merge_array_shards for one document).
inline io::NamedArrays merge_document_arrays(std::vector<ArrayShard*> shards, bool concatenate) {
  io::NamedArrays merged;
  std::map<std::string, std::size_t> position;
  std::set<std::string> concatenated;
  std::optional<io::Array> layout_version;  // a capture's layout array: kept once, never joined
  for (ArrayShard* shard : shards) {
    for (auto& [name, array] : shard->arrays) {
      if (name == io::capture_layout_key) {
        if (layout_version && layout_version->bytes() != array.bytes())
          attnscope::detail::throw_io_error("merge", shard->name, "has another capture layout version than ",
                                            shards.front()->name);
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
        attnscope::detail::throw_invalid_argument("merge", "array '", name, "' of ", shard->name,
                                                  " differs from an earlier input's (use --concatenate for shards "
                                                  "by head)");
      }
    }
    io::NamedArrays().swap(shard->arrays);
  }
  check_and_sort_heads(merged, concatenated);
  // shards by layer in any order give the arrays in layer order (names without a layer first, in input order)
  std::stable_sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) {
    return merged_layer_of(a.first) < merged_layer_of(b.first);
  });
  if (layout_version) merged.emplace_back(io::capture_layout_key, std::move(*layout_version));
  return merged;
}

}  // namespace detail

/// Merges array shards (rowstats, capture or kvsim outputs; the rules at the top of this file):
///  - shards of one document: arrays by name; an array in several shards must be identical (kept once) unless
///    `concatenate_heads` joins the copies along axis 0 (shards by head); each layer's rows are then sorted by its
///    heads array (layer{i}.heads), which must list no head twice, and the arrays by layer;
///  - shards of several documents (rowstats files only): each document's shards merged so, then every statistic
///    [H, L_d] joined along its columns into [H, ΣL_d], with run [ΣL_d] (the document of each column: an index into
///    the record's "runs") and position [ΣL_d] (the column's position in its document).
/// Throws attnscope::io_error naming the input and the first key of the run record that differs, or the array.
inline MergedArrays merge_array_shards(std::vector<ArrayShard> shards, bool concatenate_heads = false) {
  if (shards.empty()) attnscope::detail::throw_invalid_argument("merge_array_shards", "no inputs");
  std::vector<const io::RunOptions*> runs;
  std::vector<std::string> names;
  for (const ArrayShard& shard : shards) {
    if (shard.run.count(io::run_records_key))
      attnscope::detail::throw_io_error("merge", shard.name, "is already a study of several documents; merge all "
                                        "its shards in one call instead");
    detail::check_same_making(shards.front().run, shards.front().name, shard.run, shard.name);
    runs.push_back(&shard.run);
    names.push_back(shard.name);
  }
  const detail::Documents documents = detail::group_documents(runs, names);
  std::vector<io::NamedArrays> per_document;
  for (std::size_t d = 0; d < documents.records.size(); ++d) {
    std::vector<ArrayShard*> members;
    for (std::size_t s = 0; s < shards.size(); ++s)
      if (documents.of_run[s] == d) members.push_back(&shards[s]);
    per_document.push_back(detail::merge_document_arrays(members, concatenate_heads));
  }
  if (per_document.size() == 1) return {std::move(per_document.front()), documents.records.front()};

  // a study: every document has the rowstats layout with the same arrays and heads; columns concatenate
  for (std::size_t d = 0; d < per_document.size(); ++d) {
    try {
      io::check_rowstats_arrays(per_document[d], documents.first_input[d]);
    } catch (const attnscope::invalid_argument& error) {
      const std::size_t other = d == 0 ? 1 : 0;
      attnscope::detail::throw_io_error("merge", documents.first_input[d], "analysed another document than ",
                                        documents.first_input[other], " (",
                                        detail::document_difference(documents, other, d),
                                        "); documents join only as rowstats files: ", error.what());
    }
    for (const auto& [name, array] : per_document[d])
      if (name == io::rowstats_run_array || name == io::rowstats_position_array)
        attnscope::detail::throw_io_error("merge", documents.first_input[d], "holds a study's '", name, "' array");
    if (d == 0) continue;
    if (per_document[d].size() != per_document[0].size())
      detail::throw_different_coverage(documents, 0, d, std::to_string(per_document[d].size()) + " arrays against " +
                                                            std::to_string(per_document[0].size()));
    // the same arrays in the first document's order, and the same heads
    io::NamedArrays ordered;
    for (const auto& [first_name, first_array] : per_document[0]) {
      const auto found = std::find_if(per_document[d].begin(), per_document[d].end(),
                                      [&](const auto& entry) { return entry.first == first_name; });
      if (found == per_document[d].end())
        detail::throw_different_coverage(documents, 0, d, "'" + first_name + "' is in one only");
      const auto parsed = io::parse_layer_array_name(first_name);
      if (parsed && parsed->part == io::rowstats_heads_part &&
          found->second.to_vector<std::int64_t>() != first_array.to_vector<std::int64_t>())
        detail::throw_different_coverage(documents, 0, d, first_name + " differs");
      ordered.emplace_back(first_name, std::move(found->second));
    }
    per_document[d] = std::move(ordered);
  }
  MergedArrays study;
  std::vector<std::int32_t> run_of_column, position_of_column;
  for (std::size_t d = 0; d < per_document.size(); ++d) {
    std::int64_t length = 0;
    for (const auto& [name, array] : per_document[d])
      if (array.rank() == 2) length = array.shape()[1];
    for (std::int64_t i = 0; i < length; ++i) {
      run_of_column.push_back(static_cast<std::int32_t>(d));
      position_of_column.push_back(static_cast<std::int32_t>(i));
    }
  }
  const auto columns = static_cast<std::int64_t>(run_of_column.size());
  study.arrays.emplace_back(io::rowstats_run_array, io::Array::from_vector(run_of_column, {columns}));
  study.arrays.emplace_back(io::rowstats_position_array, io::Array::from_vector(position_of_column, {columns}));
  for (std::size_t a = 0; a < per_document[0].size(); ++a) {
    const std::string& name = per_document[0][a].first;
    if (per_document[0][a].second.rank() != 2) {
      study.arrays.emplace_back(name, per_document[0][a].second);
      continue;
    }
    std::vector<const io::Array*> parts;
    for (const io::NamedArrays& arrays : per_document) parts.push_back(&arrays[a].second);
    study.arrays.emplace_back(name, detail::concatenate_columns(parts));
    for (io::NamedArrays& arrays : per_document) arrays[a].second = io::Array();
  }
  study.run = detail::study_record(documents.records);
  return study;
}

/// One table input of a merge (a report's JSON heads or a CSV's rows): its name, its run records and, per row, the
/// index of its run in `runs` and its key (the values of its layer, head and policy fields, which identify the row
/// within a document).
struct RunTable {
  std::string name;
  std::vector<io::RunOptions> runs;
  std::vector<std::size_t> row_run;
  std::vector<std::vector<long long>> row_key;
};

/// The order of the merged rows and their documents.
struct MergedRows {
  std::vector<io::RunOptions> documents;                  // one record per document (the run column's index)
  std::vector<std::pair<std::size_t, std::size_t>> rows;  // (table, row) in output order
  std::vector<std::size_t> document_of_row;               // per output row
};

/// Merges the rows of tables (the rules at the top of this file): every run made as the first table's first; rows
/// grouped by document (in order of first appearance); a key twice in one document is refused; every document must
/// cover the same keys. Within a document the rows are sorted by key unless the runs were sorted by a column (their
/// record has "sort"), when they keep the inputs' order. Throws attnscope::io_error naming the inputs and the field.
inline MergedRows merge_run_tables(const std::vector<RunTable>& tables) {
  if (tables.empty()) attnscope::detail::throw_invalid_argument("merge_run_tables", "no inputs");
  std::vector<const io::RunOptions*> runs;
  std::vector<std::string> names;
  std::vector<std::vector<std::size_t>> run_index(tables.size());
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const RunTable& table = tables[t];
    if (table.runs.empty()) attnscope::detail::throw_io_error("merge", table.name, "records no run");
    for (const io::RunOptions& run : table.runs) {
      detail::check_same_making(tables.front().runs.front(), tables.front().name, run, table.name);
      run_index[t].push_back(runs.size());
      runs.push_back(&run);
      names.push_back(table.name);
    }
    for (std::size_t r = 0; r < table.row_run.size(); ++r)
      if (table.row_run[r] >= table.runs.size())
        attnscope::detail::throw_io_error("merge", table.name, "row ", r, " names run ", table.row_run[r], " but ",
                                          table.runs.size(), " runs are recorded");
  }
  const detail::Documents documents = detail::group_documents(runs, names);
  MergedRows merged;
  merged.documents = documents.records;
  std::vector<std::map<std::vector<long long>, std::string>> keys(documents.records.size());  // key -> input
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> rows_of(documents.records.size());
  for (std::size_t t = 0; t < tables.size(); ++t)
    for (std::size_t r = 0; r < tables[t].row_run.size(); ++r) {
      const std::size_t d = documents.of_run[run_index[t][tables[t].row_run[r]]];
      const auto [found, added] = keys[d].emplace(tables[t].row_key[r], tables[t].name);
      if (!added && !tables[t].row_key[r].empty()) {
        std::string key;
        for (const long long value : tables[t].row_key[r]) key += (key.empty() ? "" : " ") + std::to_string(value);
        attnscope::detail::throw_io_error("merge", tables[t].name, "has the row (", key, ") that ", found->second,
                                          " has for the same document (overlapping shards, or one given twice)");
      }
      rows_of[d].emplace_back(t, r);
    }
  for (std::size_t d = 1; d < keys.size(); ++d) {
    if (keys[d].size() == keys[0].size() &&
        std::equal(keys[d].begin(), keys[d].end(), keys[0].begin(),
                   [](const auto& a, const auto& b) { return a.first == b.first; }))
      continue;
    detail::throw_different_coverage(documents, 0, d, std::to_string(keys[d].size()) + " rows against " +
                                                          std::to_string(keys[0].size()) + ", or other ones");
  }
  const bool sorted_by_column = tables.front().runs.front().count("sort") != 0;
  for (std::size_t d = 0; d < rows_of.size(); ++d) {
    if (!sorted_by_column)
      std::stable_sort(rows_of[d].begin(), rows_of[d].end(), [&](const auto& a, const auto& b) {
        return tables[a.first].row_key[a.second] < tables[b.first].row_key[b.second];
      });
    for (const auto& row : rows_of[d]) {
      merged.rows.push_back(row);
      merged.document_of_row.push_back(d);
    }
  }
  return merged;
}

namespace detail {

/// The run records of a report's JSON: its "runs" array of objects.
inline std::vector<io::RunOptions> json_runs(const nlohmann::json& document, const std::string& name) {
  const nlohmann::json& runs = document.at(io::run_records_key);
  if (!runs.is_array() || runs.empty())
    attnscope::detail::throw_io_error("merge", name, "has \"runs\" that is not a non-empty array");
  std::vector<io::RunOptions> records;
  for (const nlohmann::json& run : runs) records.push_back(io::run_options_from_json(run, name));
  return records;
}

/// The merge of JSON documents without run records: objects key by key (a key in both joins its values when both are
/// arrays of objects, keeps one copy when equal, and is an error otherwise); top-level arrays concatenated.
inline nlohmann::json merge_plain_json(std::vector<std::pair<std::string, nlohmann::json>>& inputs) {
  const auto is_array_of_objects = [](const nlohmann::json& value) {
    if (!value.is_array()) return false;
    for (const auto& element : value)
      if (!element.is_object()) return false;
    return true;
  };
  nlohmann::json merged;
  for (auto& [name, document] : inputs) {
    if (merged.is_null()) {
      merged = std::move(document);
    } else if (merged.is_array() && document.is_array()) {
      for (auto& element : document) merged.push_back(std::move(element));
    } else if (merged.is_object() && document.is_object()) {
      for (auto& [key, value] : document.items()) {
        if (!merged.contains(key)) merged[key] = value;
        else if (is_array_of_objects(merged[key]) && is_array_of_objects(value))
          for (const auto& element : value) merged[key].push_back(element);
        else if (merged[key] != value)
          attnscope::detail::throw_io_error("merge", name, "key '", key, "' differs from an earlier input's");
      }
    } else {
      attnscope::detail::throw_io_error("merge", name, "is a JSON ", document.type_name(), ", the first input a ",
                                        merged.type_name());
    }
  }
  return merged;
}

}  // namespace detail

/// Merges JSON outputs. Reports (objects with "runs", `attnscope report --json`) merge by the rules at the top of
/// this file: their "heads" rows joined, every other key equal in all inputs; a study of several documents gives each
/// row "run" (an index into "runs", one record per document). JSON without "runs" merges key by key
/// (detail::merge_plain_json); the two kinds do not mix.
inline nlohmann::json merge_json_documents(std::vector<std::pair<std::string, nlohmann::json>> inputs) {
  if (inputs.empty()) attnscope::detail::throw_invalid_argument("merge_json_documents", "no inputs");
  const auto has_runs = [](const nlohmann::json& document) {
    return document.is_object() && document.contains(io::run_records_key);
  };
  for (const auto& [name, document] : inputs)
    if (has_runs(document) != has_runs(inputs.front().second))
      attnscope::detail::throw_io_error("merge", name, has_runs(document) ? "records" : "does not record",
                                        " its run options (\"runs\") but ", inputs.front().first,
                                        has_runs(document) ? " does not" : " does", "; they cannot be merged");
  if (!has_runs(inputs.front().second)) return detail::merge_plain_json(inputs);

  std::vector<RunTable> tables;
  for (const auto& [name, document] : inputs) {
    RunTable table;
    table.name = name;
    table.runs = detail::json_runs(document, name);
    const nlohmann::json empty = nlohmann::json::array();
    const nlohmann::json& heads = document.contains("heads") ? document["heads"] : empty;
    if (!heads.is_array()) attnscope::detail::throw_io_error("merge", name, "has \"heads\" that is not an array");
    for (const nlohmann::json& row : heads) {
      if (!row.is_object() || !row.contains("layer") || !row.contains("head") || !row["layer"].is_number_integer() ||
          !row["head"].is_number_integer())
        attnscope::detail::throw_io_error("merge", name, "has a \"heads\" row without integer layer and head");
      const long long run = row.contains("run") ? row["run"].get<long long>() : 0;
      if (run < 0) attnscope::detail::throw_io_error("merge", name, "has a row of run ", run);
      table.row_run.push_back(static_cast<std::size_t>(run));
      table.row_key.push_back({row["layer"].get<long long>(), row["head"].get<long long>()});
    }
    for (const auto& [key, value] : document.items())  // the rest (e.g. "columns") must agree
      if (key != "heads" && key != io::run_records_key && inputs.front().second.value(key, nlohmann::json()) != value)
        attnscope::detail::throw_io_error("merge", name, "key '", key, "' differs from ", inputs.front().first, "'s");
    tables.push_back(std::move(table));
  }
  const MergedRows merged = merge_run_tables(tables);
  nlohmann::json result = inputs.front().second;
  const bool study = merged.documents.size() > 1;
  nlohmann::json heads = nlohmann::json::array();
  for (std::size_t i = 0; i < merged.rows.size(); ++i) {
    nlohmann::json row = inputs[merged.rows[i].first].second["heads"][merged.rows[i].second];
    if (study) row["run"] = merged.document_of_row[i];
    else row.erase("run");
    heads.push_back(std::move(row));
  }
  result["heads"] = std::move(heads);
  result[io::run_records_key] = merged.documents;
  return result;
}

namespace detail {

/// The fields of one CSV line (RFC 4180: a field in double quotes may hold commas and "" for a quote).
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else fields.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

/// The integer value of a CSV key field; throws attnscope::io_error naming the input otherwise.
inline long long csv_integer(const std::string& field, const std::string& column, const std::string& name) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(field, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != field.size())
    attnscope::detail::throw_io_error("merge", name, "has ", column, " '", field, "', not an integer");
  return value;
}

}  // namespace detail

/// Merges CSV outputs. Tables with run records (csv_run_line comments, every CSV of attnscope) merge by the rules at
/// the top of this file, rows identified by their layer, head and policy columns: a study of several documents gets
/// a first column `run` and one "# attnscope run N: {JSON}" line per document. Tables without run records must have
/// the same header and are appended in order; the two kinds do not mix. Throws attnscope::io_error naming the input.
inline std::string merge_csv_tables(const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (inputs.empty()) attnscope::detail::throw_invalid_argument("merge_csv_tables", "no inputs");
  std::vector<io::CsvWithRuns> csvs;
  for (const auto& [name, text] : inputs) csvs.push_back(io::split_csv_runs(text, name));
  std::string header;  // without a study's run column
  for (std::size_t i = 0; i < csvs.size(); ++i) {
    if (csvs[i].runs.empty() != csvs.front().runs.empty())
      attnscope::detail::throw_io_error("merge", inputs[i].first, csvs[i].runs.empty() ? "does not record" : "records",
                                        " its run (\"# attnscope run\" lines) but ", inputs.front().first,
                                        csvs[i].runs.empty() ? " does" : " does not", "; they cannot be merged");
    std::string own = csvs[i].header;
    if (csvs[i].runs.size() > 1) {
      if (own.compare(0, 4, "run,") != 0)
        attnscope::detail::throw_io_error("merge", inputs[i].first, "records ", csvs[i].runs.size(),
                                          " runs but has no first column run");
      own.erase(0, 4);
    }
    if (i == 0) header = own;
    else if (own != header)
      attnscope::detail::throw_io_error("merge", inputs[i].first, "has CSV header '", own, "', ", inputs.front().first,
                                        " has '", header, "'");
  }
  if (csvs.front().runs.empty()) {
    std::string out = header + "\n";
    for (const io::CsvWithRuns& csv : csvs)
      for (const std::string& row : csv.rows) out += row + "\n";
    return out;
  }
  const std::vector<std::string> columns = detail::csv_fields(header);
  std::vector<std::size_t> key_columns;
  for (const char* key : {"layer", "head", "policy"})
    for (std::size_t c = 0; c < columns.size(); ++c)
      if (columns[c] == key) key_columns.push_back(c);
  std::vector<RunTable> tables;
  std::vector<std::vector<std::string>> bodies;  // each row without a study's run field
  for (std::size_t i = 0; i < csvs.size(); ++i) {
    RunTable table;
    table.name = inputs[i].first;
    table.runs = csvs[i].runs;
    bodies.emplace_back();
    for (const std::string& line : csvs[i].rows) {
      std::string row = line;
      std::size_t run = 0;
      if (csvs[i].runs.size() > 1) {
        const std::size_t comma = row.find(',');
        run = static_cast<std::size_t>(std::max(0LL, detail::csv_integer(row.substr(0, comma), "run", table.name)));
        row.erase(0, comma == std::string::npos ? row.size() : comma + 1);
      }
      const std::vector<std::string> fields = detail::csv_fields(row);
      if (fields.size() != columns.size())
        attnscope::detail::throw_io_error("merge", table.name, "has a row of ", fields.size(), " fields under a header of ",
                                          columns.size());
      std::vector<long long> key;
      for (const std::size_t c : key_columns) key.push_back(detail::csv_integer(fields[c], columns[c], table.name));
      table.row_run.push_back(run);
      table.row_key.push_back(std::move(key));
      bodies.back().push_back(std::move(row));
    }
    tables.push_back(std::move(table));
  }
  const MergedRows merged = merge_run_tables(tables);
  const bool study = merged.documents.size() > 1;
  std::string out;
  for (std::size_t d = 0; d < merged.documents.size(); ++d)
    out += io::csv_run_line(merged.documents[d], study ? static_cast<long>(d) : -1);
  out += (study ? "run," : "") + header + "\n";
  for (std::size_t i = 0; i < merged.rows.size(); ++i)
    out += (study ? std::to_string(merged.document_of_row[i]) + "," : std::string()) +
           bodies[merged.rows[i].first][merged.rows[i].second] + "\n";
  return out;
}

}  // namespace attnscope::analysis
