// Bindings of attnscope::analysis: the per-head report (the table of `attnscope report`) of a capture file, of a
// capture dict (attnscope.model.Transformer.forward) or of attention arrays, returned as a dict of numpy columns, and
// the self-contained HTML page. Files are read by analysis::AttentionFile (memory-mapped, one head at a time). And
// two models compared head by head (analysis::compare_models, `attnscope compare`), as a dict of numpy columns too.
#include <attnscope/analysis.hpp>
#include <attnscope/analysis/capture.hpp>
#include <attnscope/analysis/compare.hpp>
#include <attnscope/analysis/html_report.hpp>

#include <iterator>

#include "arrays.hpp"
#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace analysis = attnscope::analysis;
namespace io = attnscope::io;

namespace {

/// The keyword arguments shared by head_report and write_html.
struct ReportArguments {
  std::vector<Index> sink_keys{0};
  std::vector<std::string> columns;  // empty = the defaults of `attnscope report` (basic: the six standard ones)
  bool basic = false;
  bool lenient = false;
  py::object map = py::none();
  std::optional<analysis::AttentionLayout> layout;  // how a 4-D array is read; none = refuse to guess
  std::optional<std::int64_t> batch_index;
  analysis::HeadSelection selection;
};

/// The `columns` argument: None, a comma-separated str ("all", "sink_mass,entropy") or a sequence of names.
std::vector<std::string> column_names(const py::object& columns) {
  if (columns.is_none()) return {};
  if (!py::isinstance<py::str>(columns)) return columns.cast<std::vector<std::string>>();
  std::vector<std::string> names;
  std::string text = columns.cast<std::string>(), name;
  for (const char c : text + ",") {
    if (c != ',') {
      name += c;
    } else if (!name.empty()) {
      names.push_back(name);
      name.clear();
    }
  }
  return names;
}

/// The columns of `attnscope report`: by default its fast columns (every column but the costly three), basic = the
/// six standard ones, "all" = every column, or the named ones in the given order.
std::vector<analysis::ReportColumn> report_columns(const ReportArguments& arguments, const char* function) {
  for (const Index key : arguments.sink_keys)
    if (key < 0) throw_value_error(function, "sink_keys must be >= 0, got " + std::to_string(key));
  if (arguments.basic && !arguments.columns.empty()) throw_value_error(function, "give either basic=True or columns");
  if (arguments.columns.empty())
    return arguments.basic ? analysis::default_report_columns(arguments.sink_keys)
                           : analysis::fast_report_columns(arguments.sink_keys);
  if (arguments.columns == std::vector<std::string>{"all"}) return analysis::all_report_columns(arguments.sink_keys);
  return analysis::select_report_columns(analysis::all_report_columns(arguments.sink_keys), arguments.columns);
}

const char* const layers_layout = "layers,heads,q,k";
const char* const batch_layout = "batch,heads,q,k";

std::optional<analysis::AttentionLayout> layout_of(const std::optional<std::string>& layout, const char* function) {
  if (!layout) return std::nullopt;
  if (*layout == layers_layout) return analysis::AttentionLayout::layers_heads;
  if (*layout == batch_layout) return analysis::AttentionLayout::batch_heads;
  throw_value_error(function, "layout must be None, '" + std::string(layers_layout) + "' or '" + batch_layout +
                                  "', got '" + *layout + "'");
}

/// The refusal of a 4-D attention array read without `layout`: both readings named.
[[noreturn]] void ambiguous_layout(const std::string& what, const char* function) {
  throw_value_error(function, what + " is 4-D: it is either (layers, heads, q, k), as a stacked capture, or (batch, "
                                     "heads, q, k), as one layer of Hugging Face's output.attentions; pass layout='" +
                                     layers_layout + "' or layout='" + batch_layout + "' (with batch_index)");
}

/// Unit roundoff of the storage dtype of an array or tensor (float32 for anything else, as the file reader does):
/// a bfloat16 tensor keeps bfloat16's though it is read widened to float32.
double roundoff_of(const py::handle& object) {
  if (py::hasattr(object, "dtype")) {
    const std::string name = py::str(object.attr("dtype")).cast<std::string>();
    if (name == "torch.bfloat16") return analysis::storage_roundoff(io::DType::bfloat16);
    if (name == "torch.float16" || name == "float16") return analysis::unit_roundoff::float16;
    if (name == "torch.float64" || name == "float64") return analysis::unit_roundoff::float64;
  }
  return analysis::unit_roundoff::float32;
}

/// True for a list or tuple of arrays or tensors (Hugging Face's output.attentions), as opposed to nested lists of
/// numbers.
bool is_layer_sequence(const py::handle& source) {
  if (!py::isinstance<py::tuple>(source) && !py::isinstance<py::list>(source)) return false;
  const py::sequence items = py::reinterpret_borrow<py::sequence>(source);
  if (items.size() == 0) return py::isinstance<py::tuple>(source);
  for (const auto& item : items)
    if (!py::hasattr(item, "shape") || !py::hasattr(item, "dtype")) return false;
  return true;
}

/// `array` as C-order float64 with the given number of trailing matrix axes and leading axes flattened.
CArray<double> float64_of(const py::handle& object, const char* function, const char* name) {
  const py::array array = as_array(object, function, name);
  if (array.dtype().kind() != 'f' && array.dtype().kind() != 'i' && array.dtype().kind() != 'u')
    throw_value_error(function, std::string(name) + " must hold numbers");
  return CArray<double>::ensure(array);
}

RowMatrix<double> matrix_at(const CArray<double>& array, std::int64_t index, Index rows, Index cols) {
  return Eigen::Map<const RowMatrix<double>>(array.data() + index * rows * cols, rows, cols);
}

/// How a 4-D array is read (none: refused as ambiguous) and the batch entry of a (batch, heads, q, k) array.
struct ArrayLayout {
  std::optional<analysis::AttentionLayout> layout;
  std::optional<std::int64_t> batch_index;
};

/// The heads of attention arrays: `attention` [q, k], [heads, q, k] or, by `reading.layout`, [layers, heads, q, k] or
/// [batch, heads, q, k] (one batch entry: reading.batch_index, needed when the batch has more than one), with
/// optional `scores` of the same shape and `values` [..., k, d] with the same leading axes; `layer` is the layer of
/// an array without a layer axis.
void add_array_heads(const py::handle& attention_object, const py::handle& scores_object,
                     const py::handle& values_object, int layer, const ArrayLayout& reading,
                     const analysis::HeadSelection& selection, std::vector<analysis::HeadInput>& heads,
                     const char* function, const std::string& what = "attention") {
  const CArray<double> attention = float64_of(attention_object, function, "attention");
  const int rank = static_cast<int>(attention.ndim());
  const Shape shape(attention.shape(), attention.shape() + rank);
  if (rank < 2 || rank > 4)
    throw_value_error(function, what + " has shape " + shape_text(shape) +
                                    ", expected (q, k), (heads, q, k), (layers, heads, q, k) or (batch, heads, q, k)");
  if (rank == 4 && !reading.layout) ambiguous_layout(what + " " + shape_text(shape), function);
  const bool batched = rank == 4 && reading.layout == analysis::AttentionLayout::batch_heads;
  std::int64_t batch_entry = 0;
  if (batched) {
    const std::int64_t batch = attention.shape(0);
    if (!reading.batch_index && batch > 1)
      throw_value_error(function, what + " " + shape_text(shape) + " has a batch of " + std::to_string(batch) +
                                      ": choose one with batch_index");
    batch_entry = reading.batch_index.value_or(0);
    if (batch_entry < 0 || batch_entry >= batch)
      throw_value_error(function, "batch_index " + std::to_string(batch_entry) + " is outside [0, " +
                                      std::to_string(batch) + ") for " + what + " " + shape_text(shape));
  } else if (reading.batch_index) {
    throw_value_error(function, "batch_index applies to a (batch, heads, q, k) array (layout='" +
                                    std::string(batch_layout) + "'); " + what + " has shape " + shape_text(shape));
  }
  const Index rows = attention.shape(rank - 2), cols = attention.shape(rank - 1);
  const std::int64_t layers = rank == 4 && !batched ? attention.shape(0) : 1;
  const std::int64_t per_layer = rank >= 3 ? attention.shape(rank - 3) : 1;
  const std::int64_t first = batch_entry * per_layer;  // the first matrix read
  std::optional<CArray<double>> scores, values;
  if (!scores_object.is_none()) {
    scores = float64_of(scores_object, function, "scores");
    if (scores->ndim() != rank || !std::equal(attention.shape(), attention.shape() + rank, scores->shape()))
      throw_value_error(function, "scores must have the attention's shape " +
                                      shape_text(Shape(attention.shape(), attention.shape() + rank)));
  }
  if (!values_object.is_none()) {
    values = float64_of(values_object, function, "values");
    if (values->ndim() != rank || !std::equal(attention.shape(), attention.shape() + rank - 2, values->shape()) ||
        values->shape(rank - 2) != cols)
      throw_value_error(function, "values must be (..., k, d) with the attention's leading axes and k = " +
                                      std::to_string(cols));
  }
  for (std::int64_t l = 0; l < layers; ++l)
    for (std::int64_t h = 0; h < per_layer; ++h) {
      const int layer_index = rank == 4 && !batched ? static_cast<int>(l) : layer;
      if (!selection.has_layer(layer_index) || !selection.has_head(h)) continue;
      analysis::HeadInput head;
      head.layer = layer_index;
      head.head = static_cast<int>(h);
      const std::int64_t position = first + l * per_layer + h;
      head.attention = matrix_at(attention, position, rows, cols);
      if (scores) head.scores = matrix_at(*scores, position, rows, cols);
      if (values) head.values = matrix_at(*values, position, cols, values->shape(rank - 1));
      heads.push_back(std::move(head));
    }
}

/// The heads of an in-memory source: a dict in the capture layout (per-layer attention, with scores and v when
/// present), a dict with "attention" (and "scores", "v"), or an attention array. Returns the unit roundoff of the
/// attention's dtype through `roundoff`.
std::vector<analysis::HeadInput> memory_heads(const py::handle& source, const py::handle& scores,
                                              const py::handle& values, const ArrayLayout& reading,
                                              const analysis::HeadSelection& selection, double& roundoff,
                                              const char* function) {
  namespace part = io::capture_part;
  std::vector<analysis::HeadInput> heads;
  if (is_layer_sequence(source)) {  // Hugging Face's output.attentions: one (batch, heads, q, k) tensor per layer
    if (!scores.is_none() || !values.is_none())
      throw_value_error(function, "scores and values go with an attention array, not with a sequence of layers");
    if (reading.layout == analysis::AttentionLayout::layers_heads)
      throw_value_error(function, "a sequence of layers holds (batch, heads, q, k) or (heads, q, k) arrays; layout='" +
                                      std::string(layers_layout) + "' does not apply");
    const ArrayLayout per_layer{analysis::AttentionLayout::batch_heads, reading.batch_index};
    const py::sequence layers = py::reinterpret_borrow<py::sequence>(source);
    if (layers.size() == 0) throw_value_error(function, "the sequence of layers is empty");
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const std::string what = "layer " + std::to_string(l);
      if (!selection.has_layer(static_cast<Index>(l))) continue;
      const py::array array = as_array(layers[l], function, "attention");
      if (array.ndim() != 3 && array.ndim() != 4)
        throw_value_error(function, what + " has shape " +
                                        shape_text(Shape(array.shape(), array.shape() + array.ndim())) +
                                        ", expected (batch, heads, q, k) or (heads, q, k)");
      roundoff = roundoff_of(layers[l]);
      const ArrayLayout layer_reading = array.ndim() == 4 ? per_layer : ArrayLayout{std::nullopt, reading.batch_index};
      add_array_heads(array, py::none(), py::none(), static_cast<int>(l), layer_reading,
                      selection, heads, function, what);
    }
    return heads;
  }
  if (py::isinstance<py::dict>(source)) {
    const py::dict dict = py::reinterpret_borrow<py::dict>(source);
    std::map<Index, py::handle> layers;
    for (const auto& item : dict) {
      const auto name = io::parse_layer_array_name(py::str(item.first).cast<std::string>());
      if (name && name->part == part::attention) layers[name->layer] = item.second;
    }
    auto entry = [&](const std::string& name) -> py::handle {
      return dict.contains(name) ? py::handle(dict[py::str(name)]) : py::handle(py::none());
    };
    if (layers.empty()) {
      if (!dict.contains(part::attention))
        throw_value_error(function, "the dict has neither per-layer attention (e.g. '" +
                                        io::layer_array_name(0, part::attention) + "', as Transformer.forward "
                                        "returns) nor an 'attention' entry");
      roundoff = roundoff_of(entry(part::attention));
      add_array_heads(entry(part::attention), entry(part::scores), entry(part::v), 0, reading, selection, heads,
                      function);
      return heads;
    }
    Index expected = 0;
    for (const auto& [layer, attention] : layers) {
      if (layer != expected)
        throw_value_error(function, "the dict has " + io::layer_array_name(layer, part::attention) + " but no " +
                                        io::layer_array_name(expected, part::attention));
      ++expected;
      if (!selection.has_layer(layer)) continue;
      const py::array array = as_array(attention, function, "attention");
      if (array.ndim() != 3) throw_value_error(function, "per-layer attention must be (heads, q, k)");
      roundoff = roundoff_of(attention);
      add_array_heads(array, entry(io::layer_array_name(layer, part::scores)),
                      entry(io::layer_array_name(layer, part::v)), static_cast<int>(layer), ArrayLayout{}, selection,
                      heads, function);
    }
    return heads;
  }
  roundoff = roundoff_of(source);
  add_array_heads(source, scores, values, 0, reading, selection, heads, function);
  return heads;
}

/// Runs the report (and, with `page`, feeds the HTML builder) over the heads of `source`: a path (str or
/// os.PathLike) read as an attention file, or an in-memory source (memory_heads).
analysis::HeadReport run_report(const py::object& source, const py::object& scores, const py::object& values,
                                const ReportArguments& arguments, analysis::HtmlReportBuilder* page,
                                const char* function) {
  analysis::HeadReportOptions options;
  options.lenient = arguments.lenient;
  options.strict_hint = "; pass lenient=True to analyse such rows anyway (or map=... for a map whose rows are not "
                        "distributions: sink, sa_softmax)";
  if (!arguments.map.is_none()) options.rows_are_distributions = analysis::map_rows_are_distributions(to_map(arguments.map));
  analysis::AttentionFileOptions file_options;
  file_options.layout = arguments.layout.value_or(analysis::AttentionLayout::layers_heads);
  file_options.batch_index = arguments.batch_index;
  const std::vector<analysis::ReportColumn> columns = report_columns(arguments, function);
  const bool is_path = py::isinstance<py::str>(source) ||
                       py::isinstance(source, py::module_::import("os").attr("PathLike"));
  if (is_path) {
    const std::string path = py::str(py::module_::import("os").attr("fspath")(source)).cast<std::string>();
    if (!scores.is_none() || !values.is_none())
      throw_value_error(function, "scores and values are read from the file; pass them only with arrays");
    py::gil_scoped_release release;
    const analysis::AttentionFile file(path, file_options);
    if (!arguments.layout && !file.layout_note().empty()) {  // a bare 4-D array read as layers: refuse to guess
      py::gil_scoped_acquire acquire;
      ambiguous_layout("the attention array of " + path, function);
    }
    options.storage_roundoff = analysis::storage_roundoff(file.attention_dtype());
    if (!arguments.map.is_none()) {
    } else if (file.metadata().count("map")) {
      py::gil_scoped_acquire acquire;
      options.rows_are_distributions =
          analysis::map_rows_are_distributions(to_map(py::str(file.metadata().at("map"))));
    }
    analysis::HeadReportBuilder builder(columns, options);
    analysis::for_each_head(file, arguments.selection, [&](const analysis::HeadInput& head) {
      builder.add(head);
      if (page) page->add_head(head.layer, head.head, head.attention);
    });
    return builder.take();
  }
  double roundoff = analysis::unit_roundoff::float32;
  const std::vector<analysis::HeadInput> heads = memory_heads(
      source, scores, values, ArrayLayout{arguments.layout, arguments.batch_index}, arguments.selection, roundoff,
      function);
  if (heads.empty()) throw_value_error(function, "no head selected");
  options.storage_roundoff = roundoff;
  py::gil_scoped_release release;
  analysis::HeadReportBuilder builder(columns, options);
  for (const analysis::HeadInput& head : heads) {
    builder.add(head);
    if (page) page->add_head(head.layer, head.head, head.attention);
  }
  return builder.take();
}

/// The report as an attnscope.results.HeadReport (a mapping of numpy columns): "layer", "head", "bad_rows" (int64),
/// then one float64 array per column
/// (NaN where the value is not available).
py::object report_object(const analysis::HeadReport& report) {
  const py::ssize_t n = static_cast<py::ssize_t>(report.rows.size());
  py::array_t<std::int64_t> layer(n), head(n), bad(n);
  for (py::ssize_t i = 0; i < n; ++i) {
    layer.mutable_at(i) = report.rows[static_cast<std::size_t>(i)].layer;
    head.mutable_at(i) = report.rows[static_cast<std::size_t>(i)].head;
    bad.mutable_at(i) = report.rows[static_cast<std::size_t>(i)].bad_rows;
  }
  py::dict out;
  out["layer"] = layer;
  out["head"] = head;
  out["bad_rows"] = bad;
  for (std::size_t c = 0; c < report.columns.size(); ++c) {
    py::array_t<double> column(n);
    for (py::ssize_t i = 0; i < n; ++i) column.mutable_at(i) = report.rows[static_cast<std::size_t>(i)].values[c];
    out[py::str(report.columns[c])] = column;
  }
  return py::module_::import("attnscope.results").attr("HeadReport")(out);
}

ReportArguments arguments_of(const std::vector<Index>& sink_keys, const py::object& columns, bool basic, bool lenient,
                             const py::object& map, const std::optional<std::string>& layout,
                             std::optional<std::int64_t> batch_index, const std::optional<std::vector<Index>>& layers,
                             const std::optional<std::vector<Index>>& heads, const char* function) {
  ReportArguments arguments;
  arguments.sink_keys = sink_keys;
  arguments.columns = column_names(columns);
  arguments.basic = basic;
  arguments.lenient = lenient;
  arguments.map = map;
  arguments.layout = layout_of(layout, function);
  arguments.batch_index = batch_index;
  if (layers) arguments.selection.layers = *layers;
  if (heads) arguments.selection.heads = *heads;
  return arguments;
}

const char* const source_doc = R"(
    source: a capture or attention file (str or os.PathLike: NPY, NPZ or safetensors, memory-mapped and read one
        head at a time), a dict as returned by attnscope.model.Transformer.forward (per-layer attention, with the
        scores and v when captured) or with 'attention' (and 'scores', 'v'), an attention array or torch tensor
        (q, k), (heads, q, k), (layers, heads, q, k) or (batch, heads, q, k) (4-D needs layout=), or Hugging Face's
        output.attentions: a tuple with one (batch, heads, q, k) tensor per layer (batch_index picks the entry).
        float16 is read as float64 and bfloat16 as float32 (exact widenings); the storage dtype's roundoff is kept.
    scores, values: with an attention array, its scaled scores (same shape) and values (..., k, d).
    columns: column names (full or short) to compute, in that order, as a list or a comma-separated str; "all":
        every column. Default: the columns of `attnscope report` (every column but the three costly ones:
        causal_stable_rank, separability_at_critical_n, gradient_sensitivity); basic=True: the six standard ones.
    sink_keys: keys counted as the sink. lenient: analyse rows that are not distributions (counted in bad_rows)
        instead of raising. map: the normalization map that produced the rows (sink or SA-softmax rows are only
        checked for finite values; a safetensors capture records it).
    layout: how a 4-D array (in memory or a file) is read, 'layers,heads,q,k' or 'batch,heads,q,k'; without it a
        4-D array is refused, never guessed. batch_index: the batch entry of an array with a batch axis (needed
        when the batch has more than one entry).
    layers, heads: only these layers and heads (default: all).)";

/// The comparison as an attnscope.results.ModelComparison (a mapping of numpy columns), one entry per head in the
/// comparison's order (most changed first),
/// named as the columns of `attnscope compare --csv` (write_comparison_csv).
py::object comparison_object(const analysis::ModelComparison& comparison) {
  const py::ssize_t n = static_cast<py::ssize_t>(comparison.heads.size());
  py::array_t<std::int64_t> rank(n), layer(n), head(n), drop_rows(n);
  py::array_t<double> js_keep(n), js_drop(n), overlap(n);
  const char* names[] = {"sink_mass", "entropy", "entropy_sink", "entropy_content", "max_weight", "jacobian_norm"};
  std::vector<py::array_t<double>> fields;  // per name: _a, _b, delta_
  for (std::size_t k = 0; k < 3 * std::size(names); ++k) fields.emplace_back(n);
  for (py::ssize_t i = 0; i < n; ++i) {
    const analysis::HeadComparison& h = comparison.heads[static_cast<std::size_t>(i)];
    rank.mutable_at(i) = i + 1;
    layer.mutable_at(i) = h.layer;
    head.mutable_at(i) = h.head;
    drop_rows.mutable_at(i) = h.drop_rows;
    js_keep.mutable_at(i) = h.js_keep;
    js_drop.mutable_at(i) = h.js_drop;
    overlap.mutable_at(i) = h.top_k_overlap;
    const analysis::HeadAttentionSummary delta = h.delta();
    const analysis::HeadAttentionSummary* parts[] = {&h.a, &h.b, &delta};
    for (std::size_t p = 0; p < 3; ++p) {
      const analysis::HeadAttentionSummary& s = *parts[p];
      const double values[] = {s.sink_mass, s.entropy, s.entropy_sink, s.entropy_content, s.max_weight,
                               s.jacobian_norm};
      for (std::size_t k = 0; k < std::size(names); ++k) fields[3 * k + p].mutable_at(i) = values[k];
    }
  }
  py::dict out;
  out["rank"] = rank;
  out["layer"] = layer;
  out["head"] = head;
  out["js_keep"] = js_keep;
  out["js_drop"] = js_drop;
  out["drop_rows"] = drop_rows;
  out["top_k_overlap"] = overlap;
  for (std::size_t k = 0; k < std::size(names); ++k) {
    out[py::str(std::string(names[k]) + "_a")] = fields[3 * k];
    out[py::str(std::string(names[k]) + "_b")] = fields[3 * k + 1];
    out[py::str("delta_" + std::string(names[k]))] = fields[3 * k + 2];
  }
  return py::module_::import("attnscope.results").attr("ModelComparison")(out);
}

}  // namespace

void bind_analysis(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "analysis", "attnscope::analysis: the per-head report of `attnscope report` (sink mass, entropy, Jacobian norms "
                  "and the analysis modules' columns) and its HTML page.");

  m.def(
      "head_report",
      [](const py::object& source, const py::object& scores, const py::object& values,
         const py::object& columns, bool basic, const std::vector<Index>& sink_keys, bool lenient,
         const py::object& map,
         const std::optional<std::string>& layout, std::optional<std::int64_t> batch_index,
         const std::optional<std::vector<Index>>& layers, const std::optional<std::vector<Index>>& heads) {
        const ReportArguments arguments =
            arguments_of(sink_keys, columns, basic, lenient, map, layout, batch_index, layers, heads,
                         "analysis.head_report");
        return report_object(run_report(source, scores, values, arguments, nullptr, "analysis.head_report"));
      },
      "source"_a, py::kw_only(), "scores"_a = py::none(), "values"_a = py::none(), "columns"_a = py::none(),
      "basic"_a = false, "sink_keys"_a = std::vector<Index>{0}, "lenient"_a = false, "map"_a = py::none(),
      "layout"_a = py::none(), "batch_index"_a = py::none(), "layers"_a = py::none(), "heads"_a = py::none(),
      (std::string("The per-head report as an attnscope.results.HeadReport: a mapping of numpy arrays, one entry per\n"
                   "head: 'layer', 'head', 'bad_rows' (int64), then one float64 array per column (NaN = not available\n"
                   "for that head); to_pandas() gives one row per (layer, head), Jupyter shows the HTML table.") +
       source_doc +
       "\nRaises ValueError for rows that are not distributions (unless lenient), unknown columns, bad shapes or\n"
       "selections; OSError for unreadable files or an unknown capture layout version.")
          .c_str());

  m.def(
      "write_html",
      [](const py::object& source, const PathArgument& path, const py::object& scores, const py::object& values,
         const std::optional<std::vector<std::string>>& tokens, const std::string& title,
         const py::object& columns, bool basic, const std::vector<Index>& sink_keys, bool lenient,
         const py::object& map,
         const std::optional<std::string>& layout, std::optional<std::int64_t> batch_index,
         const std::optional<std::vector<Index>>& layers, const std::optional<std::vector<Index>>& heads) {
        const ReportArguments arguments =
            arguments_of(sink_keys, columns, basic, lenient, map, layout, batch_index, layers, heads,
                         "analysis.write_html");
        analysis::HtmlReportOptions options;
        options.title = title;
        const py::module_ os = py::module_::import("os");
        options.source = py::isinstance<py::str>(source) || py::isinstance(source, os.attr("PathLike"))
                             ? py::str(os.attr("fspath")(source)).cast<std::string>()
                             : std::string();
        options.sink_keys = sink_keys;
        analysis::HtmlReportBuilder page(options);
        if (tokens) page.set_tokens(*tokens);
        const analysis::HeadReport report = run_report(source, scores, values, arguments, &page, "analysis.write_html");
        {
          py::gil_scoped_release release;
          page.write(path.string(), report);
        }
        return report_object(report);
      },
      "source"_a, "path"_a, py::kw_only(), "scores"_a = py::none(), "values"_a = py::none(), "tokens"_a = py::none(),
      "title"_a = "attnscope report", "columns"_a = py::none(), "basic"_a = false,
      "sink_keys"_a = std::vector<Index>{0}, "lenient"_a = false, "map"_a = py::none(),
      "layout"_a = py::none(), "batch_index"_a = py::none(), "layers"_a = py::none(), "heads"_a = py::none(),
      (std::string("Writes the self-contained HTML page of the report (heatmaps of every head, the sortable table, the\n"
                   "glossary, sink/content bars; `attnscope report --html`) to `path` (str or os.PathLike) and\n"
                   "returns the report (an attnscope.results.HeadReport).\n"
                   "    tokens: token strings for the axes of the large view. title: the page title.") +
       source_doc)
          .c_str());

  m.def(
      "compare",
      [](const attnscope::model::Transformer& model_a, const attnscope::model::Transformer& model_b,
         const std::vector<int>& tokens, const std::vector<Index>& sink_keys, Index top_k, Index query_block,
         bool beyond_trained_length, int threads) {
        analysis::CompareOptions options;
        options.sink_keys = sink_keys;
        options.top_k = top_k;
        options.query_block = query_block;
        options.allow_beyond_trained_positions = beyond_trained_length;
        options.threads = checked_threads(threads, "analysis.compare");
        analysis::ModelComparison comparison;
        {
          py::gil_scoped_release release;
          comparison = analysis::compare_models(model_a, model_b, tokens, options);
        }
        return comparison_object(comparison);
      },
      "model_a"_a, "model_b"_a, "tokens"_a, py::kw_only(), "sink_keys"_a = std::vector<Index>{0}, "top_k"_a = 5,
      "query_block"_a = 64, "beyond_trained_length"_a = false, "threads"_a = 1,
      "What changed between two models' attention, head by head (`attnscope compare`): the same tokens through both\n"
      "models (same vocabulary, layer and head counts; e.g. a model and its quantized copy, two checkpoints) by two\n"
      "streaming forwards in lock-step, never an L x L matrix. Returns a dict of numpy arrays, one entry per head,\n"
      "most changed first: 'rank', 'layer', 'head', 'drop_rows' (int64), 'js_keep' (mean Jensen-Shannon divergence\n"
      "of the two models' rows, nats), 'js_drop' (between the content compositions, sink keys dropped; NaN when no\n"
      "row has content), 'top_k_overlap', then for sink_mass, entropy, entropy_sink, entropy_content, max_weight and\n"
      "jacobian_norm the means '<name>_a', '<name>_b' and 'delta_<name>' (b - a): the columns of `compare --csv`.\n"
      "    sink_keys: keys forming the sink channel. top_k: k of the top-k overlap. query_block: query rows per block.\n"
      "    beyond_trained_length: let RoPE models run past their trained length. threads: OpenMP threads of the\n"
      "        forwards (0 = the OpenMP default).\n"
      "Raises ValueError for models of other shapes or vocabularies, no tokens, a token outside the vocabulary, too\n"
      "many tokens, a negative sink key, top_k or query_block < 1.");

  m.def(
      "columns",
      [](bool basic, bool every, const std::vector<Index>& sink_keys) {
        if (basic && every) throw_value_error("analysis.columns", "give either basic=True or all=True");
        ReportArguments arguments;
        arguments.sink_keys = sink_keys;
        arguments.basic = basic;
        if (every) arguments.columns = {"all"};
        py::list out;
        for (const analysis::ReportColumn& column : report_columns(arguments, "analysis.columns")) {
          py::dict entry;
          entry["name"] = column.name;
          entry["short_name"] = column.short_name;
          entry["description"] = column.description;
          py::dict glossary;
          glossary["measures"] = column.glossary.measures;
          glossary["high"] = column.glossary.high;
          glossary["low"] = column.glossary.low;
          glossary["typical"] = column.glossary.typical;
          entry["glossary"] = glossary;
          out.append(entry);
        }
        return out;
      },
      py::kw_only(), "basic"_a = false, "all"_a = false, "sink_keys"_a = std::vector<Index>{0},
      "The report's columns in order (default: those of `attnscope report` and of head_report; basic=True: the six\n"
      "standard ones; all=True: every column, the costly ones included), each a dict with 'name', 'short_name',\n"
      "'description' and 'glossary' (a dict:\n"
      "'measures', 'high', 'low', 'typical', the text of the HTML page's glossary).");
}

}  // namespace attnscope_python
