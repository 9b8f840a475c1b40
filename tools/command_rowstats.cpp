// tools/command_rowstats.cpp — `attnscope rowstats`: exact per-row attention statistics of every (layer, head) of a
// Q/K file, streamed (attnscope::stream::row_statistics) so that no L×L matrix is ever formed; NPY/NPZ inputs are
// memory-mapped. Documented in docs/cli.md.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "attnscope/io/mapped_arrays.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/mapped_safetensors.hpp"
#include "attnscope/io/safetensors.hpp"
#include "attnscope/stream.hpp"
#include "cli_progress.hpp"
#include "commands.hpp"

namespace attnscope::cli {
namespace {

constexpr const char* rowstats_usage =
    R"(usage: attnscope rowstats INPUT --out ROWS.npz [--layers LIST] [--heads LIST] [--sink-keys LIST]
                         [--top-k LIST] [--window W] [--full] [--scale S] [--exclude-sinks] [--no-jacobian]
                         [--threads N]

Exact per-query-row statistics of softmax(q·Kᵀ/√d) for every selected (layer, head) of a Q/K file, computed in
row blocks from Q and K without the L×L matrix (memory O(L·d) per head plus a strip of 64 rows per thread).
INPUT is an .npz / .npy or .safetensors file (memory-mapped; stored NPZ members and safetensors tensors are read in
place), holding [H, L, d] arrays layer{i}.q and layer{i}.k (as written by `attnscope capture`) or q and k (reported
as layer 0), float32 or float64 (the statistics are computed and written in that precision).

Output arrays, [heads, L] each, per layer i: layer{i}.entropy, .sink_mass, .max_attention, .max_scaled_logit,
.log_partition, .jacobian_norm (exact spectral norm of the row's softmax Jacobian), .top{k}_mass for each k, and
layer{i}.heads (the head index of each output row). A per-head summary table (means, median ‖J‖) goes to stdout.

Options:
  -o, --out FILE     output .npz (stored) or .safetensors
  --layers LIST      layers to analyse, e.g. 0,2 (default: all)
  --heads LIST       heads to analyse (default: all)
  --sink-keys LIST   keys whose weight is the sink mass (default: 0)
  --top-k LIST       k of the top-k masses (default: 1,8,64)
  --window W         sliding window: row i sees keys i-W < j <= i (full: |i-j| < W)
  --full             full (bidirectional) attention instead of causal
  --scale S          logit scale (default 1/sqrt(d))
  --exclude-sinks    max_attention skips the sink keys
  --no-jacobian      skip the exact Jacobian norm (the most expensive statistic)
  --threads N        OpenMP threads (default 1; 0 = OpenMP default)
  --help             this text
)";

/// Comma-separated non-negative integers of an option.
std::vector<Index> parse_index_list(const std::string& text, const std::string& option) {
  std::vector<Index> values;
  for (const int value : parse_token_list(text, option)) {
    if (value < 0) throw usage_error(option + ": expected non-negative integers, got " + std::to_string(value));
    values.push_back(value);
  }
  return values;
}

/// The Q/K arrays of the input, memory-mapped: NPY/NPZ (io::MappedArrays) or safetensors (io::MappedSafetensors),
/// both seen as io::MappedArray views.
class QueryKeySource {
 public:
  explicit QueryKeySource(const std::string& path) {
    if (ends_with(path, ".safetensors")) {
      tensors_.emplace(path);
      for (const io::TensorView& view : tensors_->tensors()) arrays_.emplace_back(view.name, view.dtype, view.shape, view.data);
    } else {
      mapped_.emplace(path);
      arrays_ = mapped_->arrays();
    }
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const io::MappedArray& array : arrays_) out.push_back(array.name());
    return out;
  }
  const io::MappedArray& at(const std::string& name) const {
    for (const io::MappedArray& array : arrays_)
      if (array.name() == name) return array;
    throw usage_error("no array " + name);  // not reached: names come from names()
  }
  io::DType dtype(const std::string& name) const { return at(name).dtype(); }
  std::vector<std::int64_t> shape(const std::string& name) const { return at(name).shape(); }

  /// Calls use(matrix) with head `head` of array `name` ([H, L, d]): a view into the mapped file when aligned,
  /// else a copy of that one head.
  template <class Scalar, class Use>
  void with_head(const std::string& name, Index head, Use&& use) const {
    const io::MappedArray& array = at(name);
    if (array.is_aligned()) use(array.slice<Scalar>(head));
    else use(array.slice_copy<Scalar>(head));
  }

 private:
  std::optional<io::MappedArrays> mapped_;
  std::optional<io::MappedSafetensors> tensors_;
  std::vector<io::MappedArray> arrays_;
};

/// One layer of the input: its number, the Q and K array names.
struct LayerArrays {
  Index layer;
  std::string q, k;
};

std::vector<LayerArrays> find_layers(const QueryKeySource& source, const std::string& path) {
  std::vector<LayerArrays> layers;
  const std::regex pattern(R"(layer(\d+)\.q)");
  std::smatch match;
  for (const std::string& name : source.names())
    if (std::regex_match(name, match, pattern)) {
      const std::string key_name = "layer" + match[1].str() + ".k";
      bool has_keys = false;
      for (const std::string& other : source.names()) has_keys = has_keys || other == key_name;
      if (!has_keys) attnscope::detail::throw_io_error("rowstats", path, "has ", name, " but no ", key_name);
      layers.push_back({std::stol(match[1].str()), name, key_name});
    }
  if (layers.empty()) {
    bool q = false, k = false;
    for (const std::string& name : source.names()) {
      q = q || name == "q";
      k = k || name == "k";
    }
    if (q && k) layers.push_back({0, "q", "k"});
  }
  if (layers.empty())
    attnscope::detail::throw_io_error("rowstats", path, "holds neither layer{i}.q / layer{i}.k nor q / k arrays");
  std::sort(layers.begin(), layers.end(), [](const LayerArrays& a, const LayerArrays& b) { return a.layer < b.layer; });
  return layers;
}

/// Per-layer output columns ([heads, L], row-major), filled head by head.
template <class Scalar>
struct LayerOutput {
  std::vector<std::pair<std::string, std::vector<Scalar>>> columns;
  std::vector<std::int32_t> heads;
};

template <class Scalar>
int run_rowstats(const QueryKeySource& source, const std::vector<LayerArrays>& layers, const Arguments& arguments,
                 stream::RowStatisticsOptions options, const std::string& out, const std::string& input) {
  std::vector<Index> head_selection;
  if (arguments.has("heads")) head_selection = parse_index_list(arguments.get("heads"), "--heads");
  io::NamedArrays arrays;
  bool header_printed = false;  // printed with the first row, so that errors leave stdout empty
  const auto print_header = [&] {
    if (header_printed) return;
    header_printed = true;
    std::printf("%-6s %-5s %8s %9s %9s %9s %9s %9s", "layer", "head", "L", "entropy", "sink", "max_attn", "J_mean",
                "J_median");
    for (const Index k : options.top_k) std::printf(" %9s", ("top" + std::to_string(k)).c_str());
    std::printf(" %8s\n", "seconds");
  };
  std::size_t total_heads = 0;
  for (const LayerArrays& layer : layers) total_heads += head_selection.empty() ? source.shape(layer.q)[0] : head_selection.size();
  ProgressBar progress("rowstats");
  int done = 0;
  for (const LayerArrays& layer : layers) {
    const auto q_shape = source.shape(layer.q), k_shape = source.shape(layer.k);
    if (q_shape.size() != 3 || q_shape != k_shape)
      attnscope::detail::throw_io_error("rowstats", input, layer.q, " and ", layer.k, " must both be [H, L, d], got ",
                                        io::detail::shape_string(q_shape), " and ", io::detail::shape_string(k_shape));
    if (source.dtype(layer.k) != source.dtype(layer.q))
      attnscope::detail::throw_io_error("rowstats", input, layer.q, " and ", layer.k, " have different dtypes");
    const Index heads_in_file = q_shape[0], length = q_shape[1];
    std::vector<Index> heads = head_selection;
    if (heads.empty())
      for (Index h = 0; h < heads_in_file; ++h) heads.push_back(h);
    for (const Index h : heads)
      if (h >= heads_in_file)
        attnscope::detail::throw_invalid_argument("rowstats", "head ", h, " is outside [0, ", heads_in_file, ") of ",
                                                  layer.q);
    const std::string prefix = "layer" + std::to_string(layer.layer) + ".";
    std::vector<std::string> names = {"entropy", "sink_mass", "max_attention", "max_scaled_logit", "log_partition"};
    if (options.jacobian_norm) names.push_back("jacobian_norm");
    for (const Index k : options.top_k) names.push_back("top" + std::to_string(k) + "_mass");
    std::vector<std::vector<Scalar>> columns(names.size(),
                                             std::vector<Scalar>(static_cast<std::size_t>(length) * heads.size()));
    std::vector<std::int32_t> head_ids;
    for (std::size_t slot = 0; slot < heads.size(); ++slot) {
      const Index head = heads[slot];
      const auto start = std::chrono::steady_clock::now();
      stream::RowStatistics stats;
      source.with_head<Scalar>(layer.q, head, [&](const auto& queries) {
        source.with_head<Scalar>(layer.k, head, [&](const auto& keys) {
          stats = stream::row_statistics(queries, keys, options);
        });
      });
      std::vector<const Vector<double>*> per_row = {&stats.entropy, &stats.sink_mass, &stats.max_weight,
                                                    &stats.max_scaled_logit, &stats.log_partition};
      if (options.jacobian_norm) per_row.push_back(&stats.jacobian_norm);
      std::vector<Vector<double>> top_columns;
      for (Index c = 0; c < stats.top_k_mass.cols(); ++c) top_columns.push_back(stats.top_k_mass.col(c));
      for (const auto& column : top_columns) per_row.push_back(&column);
      for (std::size_t c = 0; c < per_row.size(); ++c)
        for (Index i = 0; i < length; ++i)
          columns[c][slot * static_cast<std::size_t>(length) + static_cast<std::size_t>(i)] =
              static_cast<Scalar>((*per_row[c])(i));
      head_ids.push_back(static_cast<std::int32_t>(head));
      const double seconds = milliseconds_since(start) / 1000;
      progress.finish();
      print_header();
      std::printf("%-6ld %-5ld %8ld %9.4f %9.4f %9.4f %9.5f %9.5f", static_cast<long>(layer.layer),
                  static_cast<long>(head), static_cast<long>(length), stats.entropy.mean(), stats.sink_mass.mean(),
                  stats.max_weight.mean(), options.jacobian_norm ? stats.jacobian_norm.mean() : 0.0,
                  options.jacobian_norm ? stream::summarize(stats.jacobian_norm, {0.5}).quantiles[0] : 0.0);
      for (const auto& column : top_columns) std::printf(" %9.4f", column.mean());
      std::printf(" %8.2f\n", seconds);
      std::fflush(stdout);
      progress.update(++done, static_cast<int>(total_heads));
    }
    const std::int64_t rows = static_cast<std::int64_t>(heads.size());
    for (std::size_t c = 0; c < names.size(); ++c)
      arrays.emplace_back(prefix + names[c], io::Array::from_vector(columns[c], {rows, length}));
    arrays.emplace_back(prefix + "heads", io::Array::from_vector(head_ids, {rows}));
  }
  progress.finish();
  if (ends_with(out, ".safetensors"))
    io::write_safetensors(out, arrays, {{"input", input}, {"command", "rowstats"}});
  else
    io::write_npz(out, arrays, io::Compression::stored);
  std::cerr << "attnscope: wrote " << arrays.size() << " arrays to " << out << "\n";
  return 0;
}

int command_rowstats(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("out", "-o").value_option("layers").value_option("heads").value_option("sink-keys")
      .value_option("top-k").value_option("window").value_option("scale")
      .flag("full").flag("exclude-sinks").flag("no-jacobian");
  if (parse_subcommand(arguments, argc, argv, rowstats_usage)) return 0;
  if (arguments.positional().size() != 1) throw usage_error("expected exactly one INPUT (a Q/K .npz, .npy or .safetensors)");
  const std::string out = arguments.require("out");
  if (!ends_with(out, ".npz") && !ends_with(out, ".safetensors"))
    throw usage_error("--out must end in .npz or .safetensors: " + out);
  stream::RowStatisticsOptions options;
  options.causal = !arguments.has("full");
  options.top_k = parse_index_list(arguments.get("top-k", "1,8,64"), "--top-k");
  options.sink_keys = parse_index_list(arguments.get("sink-keys", "0"), "--sink-keys");
  if (arguments.has("window")) options.window = parse_integer(arguments.get("window"), "--window", 1, 1L << 40);
  if (arguments.has("scale")) {
    const std::string text = arguments.get("scale");
    char* end = nullptr;
    options.scale = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) throw usage_error("--scale: expected a number, got '" + text + "'");
  }
  options.max_weight_excludes_sinks = arguments.has("exclude-sinks");
  options.jacobian_norm = !arguments.has("no-jacobian");
  const std::string input = arguments.positional()[0];
  const QueryKeySource source(input);
  std::vector<LayerArrays> layers = find_layers(source, input);
  if (arguments.has("layers")) {
    std::vector<LayerArrays> selected;
    for (const Index wanted : parse_index_list(arguments.get("layers"), "--layers")) {
      bool found = false;
      for (const LayerArrays& layer : layers)
        if (layer.layer == wanted) {
          selected.push_back(layer);
          found = true;
        }
      if (!found) attnscope::detail::throw_io_error("rowstats", input, "has no layer ", wanted);
    }
    layers = selected;
  }
  if (source.dtype(layers.front().q) == io::DType::float64)
    return run_rowstats<double>(source, layers, arguments, options, out, input);
  if (source.dtype(layers.front().q) != io::DType::float32)
    attnscope::detail::throw_io_error("rowstats", input, layers.front().q, " is ",
                                      io::dtype_name(source.dtype(layers.front().q)), "; need float32 or float64");
  return run_rowstats<float>(source, layers, arguments, options, out, input);
}

}  // namespace

const Command& rowstats_command() {
  static const Command command{"rowstats",
                               "exact per-row attention statistics of a Q/K file without the LxL matrix (long contexts)",
                               rowstats_usage, command_rowstats};
  return command;
}

}  // namespace attnscope::cli
