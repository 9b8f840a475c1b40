// attnscope/io/rowstats_layout.hpp — the layout of a rowstats file (written by `attnscope rowstats`, by Python's
// attnscope.write_rowstats and by `merge`): per analysed layer i, arrays named as in a capture
// (io/capture_layout.hpp):
//   layer{i}.heads        [H'] int32, the head index of each row of the layer's other arrays;
//   layer{i}.{statistic}  [H', L] float32 or float64, the statistic of every query row (position) of each head;
// the statistics in rowstats_statistic_names order, every layer with the same statistics and the same L, and the run
// record (io/run_options.hpp) in the safetensors metadata or the NPZ array run_options. A merged study of several
// documents adds run [ΣL] int32 (the document of each column, an index into the record's "runs") and position [ΣL]
// int32 (the column's position in its document). Opt-in (target attnscope::io).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/array_file.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/run_options.hpp"

namespace attnscope::io {

/// The part name of a layer's head indices.
inline constexpr const char* rowstats_heads_part = "heads";
/// The arrays of a merged study of several documents: each column's document and position in it.
inline constexpr const char* rowstats_run_array = "run";
inline constexpr const char* rowstats_position_array = "position";

/// The statistics of a rowstats file, in order: entropy, sink_mass, max_weight (the row's largest weight),
/// max_scaled_logit, log_partition, jacobian_norm (unless skipped), top{k}_mass for each k, and for a model with
/// learned sink logits learned_sink, entropy_with_sink and content_mass.
inline std::vector<std::string> rowstats_statistic_names(bool jacobian_norm, const std::vector<Index>& top_k,
                                                         bool learned_sinks = false) {
  std::vector<std::string> names = {"entropy", "sink_mass", "max_weight", "max_scaled_logit", "log_partition"};
  if (jacobian_norm) names.push_back("jacobian_norm");
  for (const Index k : top_k) names.push_back("top" + std::to_string(k) + "_mass");
  if (learned_sinks) names.insert(names.end(), {"learned_sink", "entropy_with_sink", "content_mass"});
  return names;
}

/// Builds the arrays of a rowstats file layer by layer: begin_layer, then set_head for every head (any order of
/// slots), end_layer; take() hands the arrays over. Scalar: float or double, the dtype of the statistics.
template <class Scalar>
class RowstatsArrays {
 public:
  explicit RowstatsArrays(std::vector<std::string> statistics) : statistics_(std::move(statistics)) {
    if (statistics_.empty()) attnscope::detail::throw_invalid_argument("RowstatsArrays", "no statistics named");
  }

  const std::vector<std::string>& statistics() const { return statistics_; }

  /// Starts layer `layer` with `heads` heads of `length` rows each.
  void begin_layer(Index layer, Index length, std::size_t heads) {
    if (layer < 0 || length < 1)
      attnscope::detail::throw_invalid_argument("RowstatsArrays::begin_layer", "layer ", layer, " with L = ", length,
                                                "; need layer >= 0 and L >= 1");
    layer_ = layer;
    length_ = length;
    columns_.assign(statistics_.size(), std::vector<Scalar>(static_cast<std::size_t>(length) * heads));
    head_ids_.assign(heads, -1);
  }

  /// Stores head `head` in row `slot` of the layer: `values[s]` points to statistic s (statistics() order) of its L
  /// rows.
  void set_head(std::size_t slot, Index head, const std::vector<const double*>& values) {
    if (slot >= head_ids_.size() || values.size() != statistics_.size())
      attnscope::detail::throw_invalid_argument("RowstatsArrays::set_head", "slot ", slot, " of ", head_ids_.size(),
                                                " with ", values.size(), " statistics; expected ", statistics_.size());
    for (std::size_t s = 0; s < values.size(); ++s)
      for (Index i = 0; i < length_; ++i)
        columns_[s][slot * static_cast<std::size_t>(length_) + static_cast<std::size_t>(i)] =
            static_cast<Scalar>(values[s][i]);
    head_ids_[slot] = static_cast<std::int32_t>(head);
  }

  /// Moves the layer's columns into the arrays.
  void end_layer() {
    const auto rows = static_cast<std::int64_t>(head_ids_.size());
    for (std::size_t s = 0; s < statistics_.size(); ++s) {
      arrays_.emplace_back(layer_array_name(layer_, statistics_[s]), Array::from_vector(columns_[s], {rows, length_}));
      std::vector<Scalar>().swap(columns_[s]);
    }
    arrays_.emplace_back(layer_array_name(layer_, rowstats_heads_part), Array::from_vector(head_ids_, {rows}));
  }

  NamedArrays take() && { return std::move(arrays_); }

 private:
  std::vector<std::string> statistics_;
  NamedArrays arrays_;
  Index layer_ = 0, length_ = 0;
  std::vector<std::vector<Scalar>> columns_;
  std::vector<std::int32_t> head_ids_;
};

/// Checks that `arrays` are a rowstats file's (the layout above): every layer has an integer heads array listing no
/// head twice, and the same statistics, each [heads, L] of one float dtype and one L; a study's run and position
/// arrays are [L] int32. Throws attnscope::invalid_argument naming `where` and the array otherwise.
inline void check_rowstats_arrays(const NamedArrays& arrays, const std::string& where) {
  const auto fail = [&](const std::string& name, const auto&... message) {
    attnscope::detail::throw_invalid_argument("check_rowstats_arrays", where, ": '", name, "' ", message...);
  };
  std::map<Index, std::set<std::string>> statistics;
  std::map<Index, std::int64_t> head_count;
  std::int64_t length = -1;
  DType dtype = DType::float64;
  bool have_dtype = false;
  for (const auto& [name, array] : arrays) {
    if (name == run_options_array) continue;
    if (name == rowstats_run_array || name == rowstats_position_array) continue;  // checked below
    const auto parsed = parse_layer_array_name(name);
    if (!parsed) fail(name, "is not a rowstats array (layer{i}.{statistic}, layer{i}.heads, run, position)");
    if (parsed->part == rowstats_heads_part) {
      if (array.rank() != 1 || (array.dtype() != DType::int32 && array.dtype() != DType::int64))
        fail(name, "must be a 1-D int32 array, got ", dtype_name(array.dtype()), detail::shape_string(array.shape()));
      std::vector<std::int64_t> heads = array.to_vector<std::int64_t>();
      std::sort(heads.begin(), heads.end());
      if (std::adjacent_find(heads.begin(), heads.end()) != heads.end()) fail(name, "lists a head twice");
      if (!heads.empty() && heads.front() < 0) fail(name, "lists a negative head ", heads.front());
      head_count[parsed->layer] = static_cast<std::int64_t>(heads.size());
      continue;
    }
    if (array.rank() != 2 || (array.dtype() != DType::float32 && array.dtype() != DType::float64))
      fail(name, "must be a [heads, L] float32 or float64 array, got ", dtype_name(array.dtype()),
           detail::shape_string(array.shape()));
    if (have_dtype && array.dtype() != dtype)
      fail(name, "is ", dtype_name(array.dtype()), ", other statistics are ", dtype_name(dtype));
    dtype = array.dtype();
    have_dtype = true;
    if (length >= 0 && array.shape()[1] != length) fail(name, "has L = ", array.shape()[1], ", other statistics ", length);
    length = array.shape()[1];
    statistics[parsed->layer].insert(parsed->part);
  }
  if (statistics.empty()) attnscope::detail::throw_invalid_argument("check_rowstats_arrays", where, ": no statistics");
  const std::set<std::string>& first = statistics.begin()->second;
  for (const auto& [layer, parts] : statistics) {
    const std::string heads_name = layer_array_name(layer, rowstats_heads_part);
    if (!head_count.count(layer)) fail(heads_name, "is missing (the head index of each row)");
    if (parts != first)
      fail(layer_array_name(layer, *parts.begin()), "belongs to a layer whose statistics differ from layer ",
           statistics.begin()->first, "'s");
    for (const auto& [name, array] : arrays) {
      const auto parsed = parse_layer_array_name(name);
      if (parsed && parsed->layer == layer && parsed->part != rowstats_heads_part && array.shape()[0] != head_count[layer])
        fail(name, "has ", array.shape()[0], " rows but ", heads_name, " lists ", head_count[layer], " heads");
    }
  }
  for (const char* name : {rowstats_run_array, rowstats_position_array})
    for (const auto& [array_name, array] : arrays)
      if (array_name == name && (array.rank() != 1 || array.dtype() != DType::int32 || array.shape()[0] != length))
        fail(array_name, "must be [", length, "] int32 (one entry per column), got ", dtype_name(array.dtype()),
             detail::shape_string(array.shape()));
}

/// Writes a rowstats file (.safetensors, else a stored .npz) after check_rowstats_arrays, with its run record. The
/// file is replaced whole or not at all (`listener` hears of its temporary file, io/atomic_file.hpp).
inline void write_rowstats_file(const std::string& path, NamedArrays arrays, const RunOptions& run,
                                TemporaryFileListener* listener = nullptr) {
  check_rowstats_arrays(arrays, path);
  write_array_file_with_run_options(path, std::move(arrays), run, Compression::stored, listener);
}

}  // namespace attnscope::io
