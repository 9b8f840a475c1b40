// tools/command_rowstats.cpp — `attnscope rowstats`: exact per-row attention statistics of every (layer, head) of a
// Q/K file, streamed (attnscope::stream::row_statistics) so that no L×L matrix is ever formed; NPY/NPZ inputs are
// memory-mapped. Documented in docs/cli.md.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnscope/io/array_file.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/rowstats_layout.hpp"
#include "attnscope/stream.hpp"
#include "cli_model.hpp"
#include "cli_provenance.hpp"
#include "cli_progress.hpp"
#include "cli_selection.hpp"
#include "commands.hpp"
#include "run_options.hpp"

namespace attnscope::cli {
namespace {

const char* rowstats_usage() {
  static const std::string usage =
      R"(usage: attnscope rowstats INPUT --out ROWS.npz [--layers LIST] [--heads LIST] [--sink-keys LIST]
                         [--top-k LIST] [--window W] [--full] [--scale S] [--exclude-sinks] [--no-jacobian]
                         [--threads N]
       attnscope rowstats --model PATH
                         (--tokens LIST | --tokens-file FILE | --text STRING | --text-file FILE)
                         --out ROWS.npz [--from TEXT] [--skip-tokens N] [--max-tokens N] [--special-tokens]
                         [--add-special-tokens]
                         [--beyond-trained-length]
                         [--layers LIST] [--heads LIST] [--sink-keys LIST] [--top-k LIST] [--exclude-sinks]
                         [--no-jacobian] [--matmul exact|llama.cpp] [--threads N]

Exact per-query-row statistics of softmax(q·Kᵀ/√d) for every selected (layer, head) of a Q/K file, computed in
row blocks from Q and K without the L×L matrix (memory O(L·d) per head plus a strip of 64 rows per thread).
INPUT is an .npz / .npy or .safetensors file (memory-mapped; stored NPZ members and safetensors tensors are read in
place), holding the [H, L, d] q and k of each layer in the capture layout (as written by `attnscope capture`) or
arrays q and k (reported as layer 0), float32 or float64 (the statistics are computed and written in that precision).

Output arrays, [heads, L] each, per layer, named as in a capture (layer 0's entropy is "layer0.entropy"):
entropy, sink_mass, max_weight, max_scaled_logit, log_partition, jacobian_norm (exact spectral norm of the row's
softmax Jacobian), top{k}_mass for each k, and heads (the head index of each output row). A per-head summary table (means, median ‖J‖) goes to stdout.
For a model with learned sink logits (gpt-oss) the weights are those over real keys (summing to 1 - sigma) and three
arrays more: learned_sink (sigma, the sink logit's share of the row), entropy_with_sink (entropy of the composition
of the real keys' weights and sigma; entropy stays that of the row renormalised over the real keys) and content_mass
(1 - sigma - sink_mass).

With --model PATH (a Hugging Face folder or a GGUF file, whose tokenizer encodes text, or a llama2.c checkpoint,
token ids only), the model's streaming forward (Transformer::forward_row_statistics) runs attention blockwise and computes
the statistics of the selected heads from their q and k (causal, the model's sliding window, scale 1/sqrt(head
size)); heads not selected by --layers/--heads run plain attention, and the forward stops after the last selected
layer. No L×L matrix is formed, and the output is float64. Inputs longer than the model's trained length run only for RoPE models
and only with --beyond-trained-length (stated on stderr); GPT-2's learned positions cannot.

Options:
  -o, --out FILE     output .npz (stored) or .safetensors
  --layers LIST      layers to analyse, e.g. 0,2 (default: all)
  --heads LIST       heads to analyse (default: all)
  --sink-keys LIST   keys whose weight is the sink mass (default: 0)
  --top-k LIST       the k of the top-k statistics, the k keys of largest weight in a row: one top{k}_mass
                     array per k (default: 1,8,64)
  --window W         sliding window: row i sees keys i-W < j <= i (full: |i-j| < W)
  --full             full (bidirectional) attention instead of causal
  --scale S          logit scale (default 1/sqrt(d))
  --exclude-sinks    max_weight is the largest weight over the keys that are not sink keys
  --no-jacobian      skip the exact Jacobian norm (the most expensive statistic)
  --threads N        OpenMP threads (default 1; 0 = OpenMP default)
  --beyond-trained-length  let a RoPE model run past its trained length (seq_len)
)" + std::string(model_input_usage) + std::string(input_window_usage) + std::string(matmul_usage) + R"(  --help             this text
)";
  return usage.c_str();
}

/// The output of rowstats: per layer, [heads, L] columns filled head by head in the library's rowstats layout
/// (io/rowstats_layout.hpp), a summary row per head on stdout (the header printed with the first row, so that errors
/// leave stdout empty), and the file written at the end.
template <class Scalar>
class RowstatsOutput {
 public:
  /// learned_sinks: the model has learned sink logits (gpt-oss); three columns more, see add_head.
  explicit RowstatsOutput(const stream::RowStatisticsOptions& options, bool learned_sinks = false)
      : options_(options), learned_sinks_(learned_sinks),
        arrays_(io::rowstats_statistic_names(options.jacobian_norm, options.top_k, learned_sinks)) {}

  /// Starts layer `layer` with `heads` heads of `length` rows.
  void begin_layer(Index layer, Index length, std::size_t heads) {
    layer_ = layer;
    length_ = length;
    arrays_.begin_layer(layer, length, heads);
  }

  /// Stores head `head` (the slot-th of the layer) and prints its summary row.
  void add_head(std::size_t slot, Index head, const stream::RowStatistics& stats, double seconds) {
    std::vector<const double*> per_row = {stats.entropy.data(), stats.sink_mass.data(), stats.max_weight.data(),
                                          stats.max_scaled_logit.data(), stats.log_partition.data()};
    if (options_.jacobian_norm) per_row.push_back(stats.jacobian_norm.data());
    std::vector<Vector<double>> top_columns;
    for (Index c = 0; c < stats.top_k_mass.cols(); ++c) top_columns.push_back(stats.top_k_mass.col(c));
    for (const auto& column : top_columns) per_row.push_back(column.data());
    // with a learned sink: its share σ, the entropy of the composition (p, σ), and the content mass 1 − σ − sink mass
    Vector<double> content;
    if (learned_sinks_) {
      content = (1.0 - stats.learned_sink.array() - stats.sink_mass.array()).matrix();
      per_row.insert(per_row.end(), {stats.learned_sink.data(), stats.entropy_with_sink.data(), content.data()});
    }
    arrays_.set_head(slot, head, per_row);
    print_header();
    std::printf("%-6ld %-5ld %8ld %9.4f %9.4f %9.4f %9.5f %9.5f", static_cast<long>(layer_), static_cast<long>(head),
                static_cast<long>(length_), stats.entropy.mean(), stats.sink_mass.mean(), stats.max_weight.mean(),
                options_.jacobian_norm ? stats.jacobian_norm.mean() : 0.0,
                options_.jacobian_norm ? stream::summarize(stats.jacobian_norm, {0.5}).quantiles[0] : 0.0);
    for (const auto& column : top_columns) std::printf(" %9.4f", column.mean());
    std::printf(" %8.2f\n", seconds);
    std::fflush(stdout);
  }

  /// Moves the layer's columns into the output arrays.
  void end_layer() { arrays_.end_layer(); }

  /// Writes the rowstats file `out` (.safetensors, else a stored .npz) with its run record (io::write_rowstats_file),
  /// handing the arrays over to the writer (no copy: the output is the largest allocation of a long run).
  void write(const std::string& out, const RunOptions& run) && {
    io::NamedArrays arrays = std::move(arrays_).take();
    const std::size_t count = arrays.size();
    io::write_rowstats_file(out, std::move(arrays), run, temporary_files());
    std::cerr << "attnscope: wrote " << count << " arrays to " << out << "\n";
  }

 private:
  void print_header() {
    if (header_printed_) return;
    header_printed_ = true;
    std::printf("%-6s %-5s %8s %9s %9s %9s %9s %9s", "layer", "head", "L", "entropy", "sink", "max_w", "J_mean",
                "J_median");
    for (const Index k : options_.top_k) std::printf(" %9s", ("top" + std::to_string(k)).c_str());
    std::printf(" %8s\n", "seconds");
  }

  stream::RowStatisticsOptions options_;
  bool learned_sinks_ = false;
  io::RowstatsArrays<Scalar> arrays_;
  bool header_printed_ = false;
  Index layer_ = 0, length_ = 0;
};

/// The run options every rowstats output records (tools/run_options.hpp): how the statistics were computed. The
/// layer and head selection is not among them (it is in the array names and the heads arrays), so shards of one run
/// by layer or head carry the same options.
RunOptions rowstats_run_options(const Arguments& arguments, const stream::RowStatisticsOptions& options,
                                const std::string& dtype) {
  RunOptions run = command_record("rowstats");
  run["map"] = "softmax";
  run["dtype"] = dtype;
  run["scale"] = arguments.has("scale") ? arguments.get("scale") : "1/sqrt(d)";
  run["window"] = arguments.has("window") ? arguments.get("window") : "none";
  run["causal"] = arguments.has("full") ? "false" : "true";
  run["sink_keys"] = join_integers(options.sink_keys);
  run["top_k"] = join_integers(options.top_k);
  run["exclude_sinks"] = options.max_weight_excludes_sinks ? "true" : "false";
  run["jacobian_norm"] = options.jacobian_norm ? "true" : "false";
  return run;
}

/// Refuses a Q/K pair whose shape cannot be analysed: not [H, L, d] each, different shapes or dtypes, or an empty
/// axis (no heads, no rows, or d = 0, for which q·kᵀ is identically 0 and the statistics would describe nothing).
void check_query_key_shapes(const io::QueryKeyLayer& layer, const std::string& input) {
  const auto& q_shape = layer.q->shape();
  const auto& k_shape = layer.k->shape();
  if (q_shape.size() != 3 || q_shape != k_shape)
    attnscope::detail::throw_io_error("rowstats", input, layer.q->name(), " and ", layer.k->name(),
                                      " must both be [H, L, d], got ", io::detail::shape_string(q_shape), " and ",
                                      io::detail::shape_string(k_shape));
  if (layer.k->dtype() != layer.q->dtype())
    attnscope::detail::throw_io_error("rowstats", input, layer.q->name(), " and ", layer.k->name(),
                                      " have different dtypes");
  static const char* const axis_names[3] = {"heads (H)", "rows (L)", "dimensions (d)"};
  for (std::size_t axis = 0; axis < 3; ++axis)
    if (q_shape[axis] == 0)
      attnscope::detail::throw_io_error("rowstats", input, layer.q->name(), " ", io::detail::shape_string(q_shape),
                                        " has no ", axis_names[axis], "; need H, L, d >= 1");
}

template <class Scalar>
int run_rowstats(const std::vector<io::QueryKeyLayer>& layers, const Arguments& arguments,
                 stream::RowStatisticsOptions options, const std::string& out, const std::string& input,
                 const RunOptions& run) {
  for (const io::QueryKeyLayer& layer : layers) check_query_key_shapes(layer, input);
  std::vector<Index> head_selection;
  if (arguments.has("heads")) head_selection = parse_index_list(arguments.get("heads"), "--heads");
  std::vector<Index> sorted_selection = head_selection;
  std::sort(sorted_selection.begin(), sorted_selection.end());
  if (std::adjacent_find(sorted_selection.begin(), sorted_selection.end()) != sorted_selection.end())
    throw usage_error("--heads names a head twice: " + arguments.get("heads"));
  RowstatsOutput<Scalar> output(options);
  std::size_t total_heads = 0;
  for (const io::QueryKeyLayer& layer : layers)
    total_heads += head_selection.empty() ? static_cast<std::size_t>(layer.q->shape()[0]) : head_selection.size();
  ProgressBar progress("rowstats");
  int done = 0;
  for (const io::QueryKeyLayer& layer : layers) {
    const auto& q_shape = layer.q->shape();
    const Index heads_in_file = q_shape[0], length = q_shape[1];
    std::vector<Index> heads = head_selection;
    if (heads.empty())
      for (Index h = 0; h < heads_in_file; ++h) heads.push_back(h);
    for (const Index h : heads)
      if (h >= heads_in_file)
        attnscope::detail::throw_invalid_argument("rowstats", "head ", h, " is outside [0, ", heads_in_file, ") of ",
                                                  layer.q->name());
    output.begin_layer(layer.layer, length, heads.size());
    for (std::size_t slot = 0; slot < heads.size(); ++slot) {
      const Index head = heads[slot];
      const auto start = std::chrono::steady_clock::now();
      stream::RowStatistics stats;
      try {
        layer.q->with_slice<Scalar>(head, [&](const auto& queries) {
          layer.k->with_slice<Scalar>(head, [&](const auto& keys) {
            stats = stream::row_statistics(queries, keys, options);
          });
        });
      } catch (const attnscope::invalid_argument& error) {  // a non-finite q or k, a sink key past L: name the head
        attnscope::detail::throw_invalid_argument("rowstats", input, " ", layer.q->name(), " / ", layer.k->name(),
                                                  " head ", head, ": ", error.what());
      }
      progress.finish();
      output.add_head(slot, head, stats, milliseconds_since(start) / 1000);
      progress.update(++done, static_cast<int>(total_heads));
    }
    output.end_layer();
  }
  progress.finish();
  std::move(output).write(out, run);
  return 0;
}

/// rowstats --model: the model's streaming forward (Transformer::forward_row_statistics) over the tokens, then the
/// statistics of the selected layers and heads, float64 columns (the model's statistics are in double).
int run_model_rowstats(const Arguments& arguments, const stream::RowStatisticsOptions& options,
                       const std::string& out) {
  const std::string model_path = model_path_argument(arguments);
  const CaptureRequest request = model_request(arguments, model_path, 0);
  const model::Transformer transformer = model::load_model(model_path);
  const auto& config = transformer.config();
  if (request.tokens.size() > static_cast<std::size_t>(config.seq_len) && !arguments.has("beyond-trained-length"))
    attnscope::detail::throw_invalid_argument(  // a data error: the options were right, the input is too long
        "rowstats", "the input has ", request.tokens.size(), " tokens but the model was trained on ", config.seq_len,
        " positions; --beyond-trained-length runs a RoPE model past them, or cut the input with --max-tokens ",
        config.seq_len);
  model::StreamingOptions streaming;
  streaming.statistics = options;
  streaming.allow_beyond_trained_positions = arguments.has("beyond-trained-length");
  std::vector<Index> layers, heads;
  if (arguments.has("layers")) layers = parse_index_list(arguments.get("layers"), "--layers");
  if (arguments.has("heads")) heads = parse_index_list(arguments.get("heads"), "--heads");
  if (layers.empty())
    for (Index l = 0; l < config.n_layers; ++l) layers.push_back(l);
  if (heads.empty())
    for (Index h = 0; h < config.n_heads; ++h) heads.push_back(h);
  for (const Index l : layers)
    if (l >= config.n_layers) attnscope::detail::throw_invalid_argument("rowstats", "the model has no layer ", l);
  for (const Index h : heads)
    if (h >= config.n_heads)
      attnscope::detail::throw_invalid_argument("rowstats", "head ", h, " is outside [0, ", config.n_heads,
                                                ") of the model");
  for (const std::vector<Index>* list : {&layers, &heads}) {
    std::vector<Index> sorted = *list;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw usage_error(std::string(list == &layers ? "--layers" : "--heads") + " names an index twice");
  }
  RunOptions run = rowstats_run_options(arguments, options, "float64");
  record_model(run, model_path, config.architecture);
  record_model_input(run, arguments, request.tokens);
  if (request.options.matmul != model::MatmulMode::exact) run["matmul"] = "llama.cpp";
  if (config.sliding_window > 0) run["window"] = std::to_string(config.sliding_window);
  // only the requested heads are analysed (the others run plain attention); the forward stops after the last
  // requested layer and forms no logits; the bar shows layers and tokens/s
  for (const Index l : layers)
    for (const Index h : heads) streaming.heads.emplace(static_cast<int>(l), static_cast<int>(h));
  model::ForwardOptions forward_options;
  forward_options.matmul = request.options.matmul;  // --matmul
  forward_options.last_layer = static_cast<int>(*std::max_element(layers.begin(), layers.end()));
  forward_options.logits = false;
  ProgressBar bar("forward");
  const auto start = std::chrono::steady_clock::now();
  forward_options.layer_progress = [&](int done, int total) {
    const double seconds = milliseconds_since(start) / 1000;
    bar.update(done, total, attnscope::detail::concat(" layers, ", static_cast<long>(static_cast<double>(done) *
                                                          static_cast<double>(request.tokens.size()) / seconds),
                                                      " tokens/s"));
  };
  model::StreamingForwardResult result = transformer.forward_row_statistics(request.tokens, forward_options, streaming);
  bar.finish();
  const double seconds_per_head = milliseconds_since(start) / 1000 / static_cast<double>(streaming.heads.size());
  if (result.beyond_trained_positions)
    std::cerr << "attnscope: " << request.tokens.size() << " tokens run beyond the model's trained length of "
              << result.trained_positions << " positions (RoPE extrapolation, --beyond-trained-length)\n";
  RowstatsOutput<double> output(options, config.learned_sinks);
  for (const Index l : layers) {
    output.begin_layer(l, static_cast<Index>(request.tokens.size()), heads.size());
    for (std::size_t slot = 0; slot < heads.size(); ++slot)
      output.add_head(slot, heads[slot],
                      result.row_statistics[static_cast<std::size_t>(l)][static_cast<std::size_t>(heads[slot])],
                      seconds_per_head);
    output.end_layer();
    // this layer's statistics are in the output arrays now: free them, so that the two copies never coexist whole
    std::vector<stream::RowStatistics>().swap(result.row_statistics[static_cast<std::size_t>(l)]);
  }
  std::move(output).write(out, run);
  return 0;
}

int command_rowstats(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("out", "-o").value_option("layers").value_option("heads").value_option("sink-keys")
      .value_option("top-k").value_option("window").value_option("scale")
      .flag("full").flag("exclude-sinks").flag("no-jacobian");
  arguments.value_option("model").value_option("checkpoint").value_option("tokens").value_option("tokens-file")
      .value_option("text").value_option("text-file").value_option("max-tokens").flag("special-tokens")
      .flag("add-special-tokens").flag("beyond-trained-length").value_option("matmul");
  add_input_window_options(arguments);
  if (parse_subcommand(arguments, argc, argv, rowstats_usage())) return 0;
  const bool from_model = arguments.has("model") || arguments.has("checkpoint");
  if (from_model && !arguments.positional().empty())
    throw usage_error("give either an INPUT Q/K file or --model PATH, not both");
  if (!from_model && arguments.positional().size() != 1)
    throw usage_error("expected exactly one INPUT (a Q/K .npz, .npy or .safetensors), or --model PATH");
  if (from_model && (arguments.has("full") || arguments.has("window") || arguments.has("scale")))
    throw usage_error("--full, --window and --scale come from the model with --model (causal, its "
                      "sliding window, 1/sqrt(head size))");
  if (!from_model)
    for (const char* name : {"tokens", "tokens-file", "text", "text-file", "max-tokens", "special-tokens",
                             "add-special-tokens", "beyond-trained-length", "from", "skip-tokens", "matmul"})
      if (arguments.has(name)) throw usage_error(std::string("--") + name + " needs --model PATH");
  const std::string out = arguments.require("out");
  if (!ends_with(out, ".npz") && !ends_with(out, ".safetensors"))
    throw usage_error("--out must end in .npz or .safetensors: " + out);
  check_output_options(arguments, {"out"});
  stream::RowStatisticsOptions options;
  const bool causal_rows = !arguments.has("full");
  options.visibility = causal_rows ? Visibility(causal) : Visibility();
  options.top_k = top_k_argument(arguments, "1,8,64");
  options.sink_keys = parse_index_list(arguments.get("sink-keys", "0"), "--sink-keys");
  if (arguments.has("window"))
    options.visibility = SlidingWindow{parse_integer(arguments.get("window"), "--window", 1, 1L << 40), causal_rows};
  if (arguments.has("scale")) {
    const std::string text = arguments.get("scale");
    char* end = nullptr;
    options.scale = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) throw usage_error("--scale: expected a number, got '" + text + "'");
  }
  options.max_weight_excludes_sinks = arguments.has("exclude-sinks");
  options.jacobian_norm = !arguments.has("no-jacobian");
  if (from_model) return run_model_rowstats(arguments, options, out);
  const std::string input = arguments.positional()[0];
  const io::ArrayFile source(input);
  std::vector<io::QueryKeyLayer> layers = io::query_key_layers(source);
  if (arguments.has("layers")) {
    std::vector<io::QueryKeyLayer> selected;
    for (const Index wanted : parse_index_list(arguments.get("layers"), "--layers")) {
      bool found = false;
      for (const io::QueryKeyLayer& layer : layers)
        if (layer.layer == wanted) {
          selected.push_back(layer);
          found = true;
        }
      if (!found) attnscope::detail::throw_io_error("rowstats", input, "has no layer ", wanted);
      for (const io::QueryKeyLayer& layer : selected)
        if (found && &layer != &selected.back() && layer.layer == wanted)
          throw usage_error("--layers names layer " + std::to_string(wanted) + " twice");
    }
    layers = selected;
  }
  const io::DType dtype = layers.front().q->dtype();
  if (dtype != io::DType::float32 && dtype != io::DType::float64)
    attnscope::detail::throw_io_error("rowstats", input, layers.front().q->name(), " is ", io::dtype_name(dtype),
                                      "; need float32 or float64");
  RunOptions run = rowstats_run_options(arguments, options, io::dtype_name(dtype));
  record_input_file(run, input, read_run_options(source));  // a capture's record names its model and tokens
  if (dtype == io::DType::float64) return run_rowstats<double>(layers, arguments, options, out, input, run);
  return run_rowstats<float>(layers, arguments, options, out, input, run);
}

}  // namespace

const Command& rowstats_command() {
  static const Command command{"rowstats",
                               "exact per-row attention statistics of a Q/K file without the LxL matrix (long contexts)",
                               rowstats_usage(), command_rowstats};
  return command;
}

}  // namespace attnscope::cli
