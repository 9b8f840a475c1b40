// attnscope/analysis/capture.hpp — captures as files: a forward pass turned into the arrays of the capture layout
// (io/capture_layout.hpp) for writing, and an attention file (a capture, or a bare attention array with optional
// scores and values beside it) read head by head: AttentionFile finds the heads of a memory-mapped NPY / NPZ /
// safetensors file and for_each_head hands them, one in memory at a time, to a visitor (the report, the HTML page,
// Python's attnscope.analysis). Each head's pages are released after its conversion to double, so the peak memory is
// one head plus what the visitor keeps, not the file.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/analysis/head_input.hpp"
#include "attnscope/analysis/row_check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/array_file.hpp"
#include "attnscope/io/capture_layout.hpp"

namespace attnscope::analysis {

/// The arrays of the capture layout for a forward pass (a model::ForwardResult): every part that was captured
/// (q, k, v, scores, attention, head_output per layer, stacked [heads, rows, cols] float32; a model's learned sink
/// shares [heads, rows] and a sparse layer's routing), `tokens` (int32, when given), `logits` and `hidden_states` (when
/// present). Write them with io::write_capture_file.
template <class Result, class = detail::forward_result_layers<Result>>
io::NamedArrays capture_arrays(const Result& result, const std::vector<int>& tokens = {}) {
  namespace part = io::capture_part;
  io::NamedArrays arrays;
  for (std::size_t l = 0; l < result.layers.size(); ++l) {
    const auto& layer = result.layers[l];
    const std::pair<const char*, decltype(&layer.q)> parts[] = {
        {part::q, &layer.q},           {part::k, &layer.k},
        {part::v, &layer.v},           {part::scores, &layer.scores},
        {part::attention, &layer.attention}, {part::head_output, &layer.head_output}};
    for (const auto& [name, heads] : parts)
      if (!heads->empty()) arrays.emplace_back(io::layer_array_name(static_cast<Index>(l), name), io::stack_heads(*heads));
    if (!layer.learned_sink.empty()) {  // [heads, L], as stack_heads: every head of one length
      const Index length = layer.learned_sink.front().size();
      RowMatrix<float> shares(static_cast<Index>(layer.learned_sink.size()), length);
      for (std::size_t h = 0; h < layer.learned_sink.size(); ++h) {
        if (layer.learned_sink[h].size() != length)
          attnscope::detail::throw_invalid_argument("capture_arrays", "learned_sink of head ", h, " has ",
                                                    layer.learned_sink[h].size(), " rows, head 0 has ", length);
        shares.row(static_cast<Index>(h)) = layer.learned_sink[h].transpose().template cast<float>();
      }
      arrays.emplace_back(io::layer_array_name(static_cast<Index>(l), part::learned_sink), io::Array::from(shares));
    }
    if (layer.routing.experts.size() > 0) {
      const auto& routing = layer.routing;
      arrays.emplace_back(io::layer_array_name(static_cast<Index>(l), part::router_logits),
                          io::Array::from(routing.router_logits));
      std::vector<std::int32_t> chosen(routing.experts.data(), routing.experts.data() + routing.experts.size());
      arrays.emplace_back(io::layer_array_name(static_cast<Index>(l), part::experts),
                          io::Array::from_vector(chosen, {routing.experts.rows(), routing.experts.cols()}));
      arrays.emplace_back(io::layer_array_name(static_cast<Index>(l), part::expert_weights),
                          io::Array::from(RowMatrix<float>(routing.weights.template cast<float>())));
    }
  }
  if (!tokens.empty())
    arrays.emplace_back(part::tokens, io::Array::from_vector(std::vector<std::int32_t>(tokens.begin(), tokens.end()),
                                                             {static_cast<std::int64_t>(tokens.size())}));
  if (result.logits.size()) arrays.emplace_back(part::logits, io::Array::from(result.logits));
  if (!result.hidden_states.empty()) arrays.emplace_back(part::hidden_states, io::stack_heads(result.hidden_states));
  return arrays;
}

/// How the axes before [q, k] of a 4-D bare attention array are read: [layers, heads, q, k] or [batch, heads, q, k].
enum class AttentionLayout { layers_heads, batch_heads };

struct AttentionFileOptions {
  AttentionLayout layout = AttentionLayout::layers_heads;
  /// The batch entry to read from arrays with a batch axis (required when the batch is > 1).
  std::optional<std::int64_t> batch_index;
};

/// Where one head's matrices are: `position` indexes the matrices of the arrays seen as [count, rows, cols] (the
/// same for attention, scores and values).
struct HeadLocation {
  int layer = 0, head = 0;
  const io::MappedArray* attention = nullptr;
  const io::MappedArray* scores = nullptr;
  const io::MappedArray* values = nullptr;
  std::int64_t position = 0;
};

/// Unit roundoff of a stored floating-point dtype (analysis::unit_roundoff).
inline double storage_roundoff(io::DType dtype) {
  switch (dtype) {
    case io::DType::float64: return unit_roundoff::float64;
    case io::DType::float16: return unit_roundoff::float16;
    case io::DType::bfloat16: return unit_roundoff::bfloat16;
    default: return unit_roundoff::float32;
  }
}

/// The heads of an attention file, memory-mapped: a capture (layer{i}.attention with optional layer{i}.scores and
/// layer{i}.v, [heads, q, k]; its layout version is checked), or a file holding one array or one named "attention"
/// (optional "scores" of the same shape and "v" [..., k, d] beside it) of shape [q, k], [heads, q, k],
/// [layers, heads, q, k] (or [batch, heads, q, k] by options.layout) or [layers, batch, heads, q, k].
/// Throws attnscope::io_error naming the file for an unreadable file, an unknown capture layout version, missing,
/// misshapen or non-float arrays (the layers of a capture may be any subset, e.g. of capture --layers); invalid_argument for a batch axis without a
/// batch index (batch > 1), a batch index outside the batch or given for an array without a batch axis.
class AttentionFile {
 public:
  explicit AttentionFile(const std::string& path, const AttentionFileOptions& options = {})
      : file_(path), version_(io::capture_file_layout_version(file_)) {
    locate(options);
  }

  const io::ArrayFile& file() const { return file_; }
  const std::string& path() const { return file_.path(); }
  /// The capture layout version (1 for files without one).
  int layout_version() const { return version_; }
  const std::map<std::string, std::string>& metadata() const { return file_.metadata(); }
  const std::vector<HeadLocation>& heads() const { return heads_; }
  std::int64_t query_rows() const { return query_rows_; }
  std::int64_t key_count() const { return key_count_; }
  io::DType attention_dtype() const { return heads_.front().attention->dtype(); }
  /// Arrays that are neither read nor part of a capture (q, k, tokens, logits, ...): worth a warning.
  const std::vector<std::string>& ignored() const { return ignored_; }
  /// How a 4-D array was read when that was a guess (empty otherwise).
  const std::string& layout_note() const { return layout_note_; }

  /// The head at `location` converted to double; the pages it read are released.
  HeadInput head(const HeadLocation& location) const {
    HeadInput head;
    head.layer = location.layer;
    head.head = location.head;
    head.attention = location.attention->matrix<double>(location.position, query_rows_, key_count_, true);
    if (location.scores) head.scores = location.scores->matrix<double>(location.position, query_rows_, key_count_, true);
    if (location.values)
      head.values = location.values->matrix<double>(location.position, key_count_, location.values->shape().back(), true);
    return head;
  }

 private:
  void locate(const AttentionFileOptions& options) {
    namespace part = io::capture_part;
    const std::string& path = file_.path();
    std::set<std::string> used;
    std::map<Index, const io::MappedArray*> layers;
    for (const io::MappedArray& array : file_.arrays()) {
      const auto name = io::parse_layer_array_name(array.name());
      if (name && name->part == part::attention) layers[name->layer] = &array;
    }
    if (!layers.empty()) {
      // any set of layers, in ascending order: `attnscope capture --layers 1,3` writes only those
      for (const auto& [layer, attention] : layers) {
        if (layer > std::numeric_limits<int>::max())
          attnscope::detail::throw_io_error(fn_, path, "has ", io::layer_array_name(layer, part::attention),
                                            ": layer index too large");
        add_layer(static_cast<int>(layer), *attention, file_.find(io::layer_array_name(layer, part::scores)),
                  file_.find(io::layer_array_name(layer, part::v)), options, true, used);
      }
    } else {
      const io::MappedArray* attention = file_.find(part::attention);
      if (!attention && file_.arrays().size() == 1) attention = &file_.arrays()[0];
      if (!attention) {
        std::string names;
        const auto& arrays = file_.arrays();
        for (std::size_t i = 0; i < arrays.size() && i < 8; ++i) names += (i ? ", " : "") + arrays[i].name();
        if (arrays.size() > 8) names += ", ...";
        attnscope::detail::throw_io_error(fn_, path, "holds ", arrays.size(), " arrays (", names, ") but neither ",
                                          io::layer_array_name(0, part::attention), ", ",
                                          io::layer_array_name(1, part::attention), ", ... nor one named '",
                                          part::attention, "'");
      }
      add_layer(0, *attention, file_.find(part::scores), file_.find(part::v), options, false, used);
    }
    for (const io::MappedArray& array : file_.arrays()) {
      // the layout version and the run record ("run_options", io/run_options.hpp) are no data
      if (used.count(array.name()) || array.name() == io::capture_layout_key || array.name() == "run_options") continue;
      const auto name = io::parse_layer_array_name(array.name());
      const std::string& bare = name ? name->part : array.name();
      const bool captured = bare == part::q || bare == part::k || bare == part::head_output ||
                            (!name && (bare == part::tokens || bare == part::logits || bare == part::hidden_states));
      if (!captured) ignored_.push_back(array.name());
    }
  }

  [[noreturn]] void shape_error(const io::MappedArray& array, const std::string& expected) const {
    attnscope::detail::throw_io_error(fn_, file_.path(), "array '", array.name(), "' has shape ",
                                      io::detail::shape_string(array.shape()), ", expected ", expected);
  }

  void require_float(const io::MappedArray& array) const {
    const io::DType dtype = array.dtype();
    if (dtype != io::DType::float32 && dtype != io::DType::float64 && dtype != io::DType::float16 &&
        dtype != io::DType::bfloat16)
      attnscope::detail::throw_io_error(fn_, file_.path(), "array '", array.name(), "' has dtype ",
                                        io::dtype_name(dtype), "; attention, scores and v must be float32, "
                                        "float64, float16 or bfloat16");
  }

  /// Adds the heads of one attention array (a capture layer when `per_layer`, else the whole input).
  void add_layer(int layer, const io::MappedArray& attention, const io::MappedArray* scores,
                 const io::MappedArray* values, const AttentionFileOptions& options, bool per_layer,
                 std::set<std::string>& used) {
    require_float(attention);
    const auto& shape = attention.shape();
    const std::size_t rank = shape.size();
    // Leading axes: (layers?, batch?, heads?) before [q, k].
    std::int64_t layers = 1, batch = 1, heads = 1;
    bool has_batch = false;
    if (rank == 2) {
    } else if (rank == 3) {
      heads = shape[0];
    } else if (rank == 4 && !per_layer && options.layout == AttentionLayout::layers_heads) {
      layers = shape[0];
      heads = shape[1];
      layout_note_ = "read the 4-D array " + io::detail::shape_string(shape) +
                     " as [layers, heads, q, k]; for a batch [batch, heads, q, k] give --layout batch,heads,q,k "
                     "--batch-index N";
    } else if (rank == 4) {  // [batch, heads, q, k]
      batch = shape[0];
      heads = shape[1];
      has_batch = true;
    } else if (rank == 5 && !per_layer) {  // [layers, batch, heads, q, k]
      layers = shape[0];
      batch = shape[1];
      heads = shape[2];
      has_batch = true;
    } else {
      shape_error(attention, per_layer ? "[heads, q, k] (or [batch, heads, q, k] with --batch-index)"
                                       : "[q, k], [heads, q, k], [layers, heads, q, k], [batch, heads, q, k] "
                                         "(--layout batch,heads,q,k) or [layers, batch, heads, q, k]");
    }
    std::int64_t b = 0;
    if (has_batch) {
      if (!options.batch_index && batch > 1)
        attnscope::detail::throw_invalid_argument(fn_, "the attention array '", attention.name(), "' ",
                                                  io::detail::shape_string(shape), " has a batch axis of size ", batch,
                                                  ": choose one with --batch-index N");
      b = options.batch_index.value_or(0);
      if (b < 0 || b >= batch)
        attnscope::detail::throw_invalid_argument(fn_, "--batch-index ", b, " is outside [0, ", batch, ")");
    } else if (options.batch_index) {
      attnscope::detail::throw_invalid_argument(
          fn_, "--batch-index applies to arrays with a batch axis ([batch, heads, q, k] with --layout "
               "batch,heads,q,k, or [layers, batch, heads, q, k])");
    }
    const std::int64_t rows = shape[rank - 2], cols = shape[rank - 1];
    if (rows < 1 || cols < 1) shape_error(attention, "non-empty [q, k] matrices");
    if (query_rows_ && (rows != query_rows_ || cols != key_count_))
      shape_error(attention, "[..., " + std::to_string(query_rows_) + ", " + std::to_string(key_count_) +
                                 "] like the other layers");
    query_rows_ = rows;
    key_count_ = cols;
    used.insert(attention.name());
    if (scores) {
      require_float(*scores);
      if (scores->shape() != shape) shape_error(*scores, io::detail::shape_string(shape) + " (the attention's shape)");
      used.insert(scores->name());
    }
    if (values) {
      require_float(*values);
      const auto& value_shape = values->shape();
      const std::vector<std::int64_t> leading(shape.begin(), shape.end() - 2);
      if (value_shape.size() != rank ||
          std::vector<std::int64_t>(value_shape.begin(), value_shape.end() - 2) != leading ||
          value_shape[rank - 2] != cols)
        shape_error(*values, "[..., " + std::to_string(cols) + ", d] with the attention's leading axes " +
                                 io::detail::shape_string(leading));
      used.insert(values->name());
    }
    for (std::int64_t l = 0; l < layers; ++l)
      for (std::int64_t h = 0; h < heads; ++h)
        heads_.push_back({static_cast<int>(per_layer ? layer : l), static_cast<int>(h), &attention, scores, values,
                          ((l * batch) + b) * heads + h});
  }

  static constexpr const char* fn_ = "AttentionFile";
  io::ArrayFile file_;
  int version_ = 1;
  std::vector<HeadLocation> heads_;
  std::int64_t query_rows_ = 0, key_count_ = 0;
  std::vector<std::string> ignored_;
  std::string layout_note_;
};

/// Calls visit(head) for every selected head of an attention file in file order (layer, then head), converted to
/// double one at a time. Throws invalid_argument for a selected layer or head that the file does not have.
inline void for_each_head(const AttentionFile& source, const HeadSelection& selection, const HeadVisitor& visit,
                          const ProgressCallback& progress = {}) {
  Index layer_count = 0, head_count = 0;
  for (const HeadLocation& location : source.heads()) {
    layer_count = std::max<Index>(layer_count, location.layer + 1);
    head_count = std::max<Index>(head_count, location.head + 1);
  }
  selection.check("for_each_head", layer_count, head_count);
  int total = 0, done = 0;
  for (const HeadLocation& location : source.heads())
    total += selection.has_layer(location.layer) && selection.has_head(location.head);
  for (const HeadLocation& location : source.heads()) {
    if (!selection.has_layer(location.layer) || !selection.has_head(location.head)) continue;
    visit(source.head(location));
    if (progress) progress(++done, total);
  }
}

}  // namespace attnscope::analysis
