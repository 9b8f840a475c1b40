// tools/cli_selection.hpp — lists on the command line (--layers, --heads, --sink-keys, --top-k of `rowstats` and
// `report`, the thresholds of --sink-threshold) and the (layer, head) selection of a model's report checked against
// the model's shape.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "cli_arguments.hpp"

namespace attnscope::cli {

/// Comma-separated non-negative integers of an option.
inline std::vector<Index> parse_index_list(const std::string& text, const std::string& option) {
  std::vector<Index> values;
  for (const int value : parse_token_list(text, option)) {
    if (value < 0) throw usage_error(option + ": expected non-negative integers, got " + std::to_string(value));
    values.push_back(value);
  }
  return values;
}

/// Comma-separated numbers of an option (each finite).
inline std::vector<double> parse_number_list(const std::string& text, const std::string& option) {
  std::vector<double> values;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(value))
      throw usage_error(option + ": expected comma-separated numbers, got '" + text + "'");
    values.push_back(value);
    begin = comma + 1;
  }
  return values;
}

/// The k values of --top-k LIST, in every command the number of keys of largest weight in a row that its top-k
/// statistics take (rowstats: the top-k masses; compare: the top-k overlap); each k >= 1, else a usage error.
inline std::vector<Index> top_k_argument(const Arguments& arguments, const std::string& fallback) {
  const std::vector<Index> values = parse_index_list(arguments.get("top-k", fallback), "--top-k");
  for (const Index k : values)
    if (k < 1) throw usage_error("--top-k: expected k >= 1, got " + std::to_string(k));
  return values;
}

/// The indices of --<option> (empty when not given); a usage error when one is named twice.
inline std::vector<Index> index_selection_argument(const Arguments& arguments, const std::string& option) {
  if (!arguments.has(option)) return {};
  std::vector<Index> values = parse_index_list(arguments.get(option), "--" + option);
  std::vector<Index> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) throw usage_error("--" + option + " names " + std::to_string(*twice) + " twice");
  return values;
}

/// Throws invalid_argument naming `command`, the option and the value when a selected layer or head is not in a
/// model of n_layers layers and n_heads heads.
inline void check_layer_head_selection(const char* command, const std::vector<Index>& layers,
                                       const std::vector<Index>& heads, int n_layers, int n_heads) {
  for (const Index layer : layers)
    if (layer >= n_layers)
      attnscope::detail::throw_invalid_argument(command, "--layers names layer ", layer, " but the model has ",
                                                n_layers, " layers (0..", n_layers - 1, ")");
  for (const Index head : heads)
    if (head >= n_heads)
      attnscope::detail::throw_invalid_argument(command, "--heads names head ", head, " but the model has ", n_heads,
                                                " heads per layer (0..", n_heads - 1, ")");
}

}  // namespace attnscope::cli
