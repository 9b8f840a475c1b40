// tools/column_aliases.hpp — other names of output columns and arrays that `merge` reads: the largest weight of a row
// is max_weight in every command and output, and files written by attnscope 0.1.0 call the report's column
// max_attention (analysis::report_column_name, which `report --columns` and `--sort` accept too) and rowstats's
// arrays layer{i}.max_attention. Documented in docs/cli.md ("One vocabulary").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "attnscope/analysis/head_report.hpp"
#include "attnscope/io/capture_layout.hpp"

namespace attnscope::cli {

/// The rowstats array a name stands for: layer{i}.max_attention is layer{i}.max_weight; any other name is itself.
inline std::string rowstats_array_name(const std::string& name) {
  const auto parsed = io::parse_layer_array_name(name);
  if (parsed && parsed->part == "max_attention") return io::layer_array_name(parsed->layer, "max_weight");
  return name;
}

/// A comma-separated list of report columns (a CSV header line, the "columns" of a run) with each column under the
/// name analysis::report_column_name gives it.
inline std::string report_column_list(const std::string& header) {
  std::string renamed;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = header.find(',', start);
    const std::size_t length = comma == std::string::npos ? std::string::npos : comma - start;
    renamed += analysis::report_column_name(header.substr(start, length));
    if (comma == std::string::npos) return renamed;
    renamed += ',';
    start = comma + 1;
  }
}

/// A report's JSON (`report --json`: "columns", the "heads" rows and the "columns" of each run) with each column
/// under the name analysis::report_column_name gives it; other JSON is returned unchanged.
inline nlohmann::json report_json_columns(nlohmann::json document) {
  if (!document.is_object()) return document;
  if (document.contains("columns") && document["columns"].is_array())
    for (auto& column : document["columns"])
      if (column.is_string()) column = analysis::report_column_name(column.get<std::string>());
  if (document.contains("heads") && document["heads"].is_array())
    for (auto& head : document["heads"]) {
      if (!head.is_object()) continue;
      nlohmann::json renamed = nlohmann::json::object();
      for (auto& [key, value] : head.items()) renamed[analysis::report_column_name(key)] = value;
      head = std::move(renamed);
    }
  if (document.contains("runs") && document["runs"].is_array())
    for (auto& run : document["runs"])
      if (run.is_object() && run.contains("columns") && run["columns"].is_string()) {
        const std::string columns = run["columns"].get<std::string>();
        run["columns"] = report_column_list(columns);
      }
  return document;
}

}  // namespace attnscope::cli
