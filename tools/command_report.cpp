// tools/command_report.cpp — `attnscope report`: the per-layer, per-head table of a capture, an attention file or
// a model run (Hugging Face folder, GGUF file or llama2.c checkpoint), with the analysis modules' columns. Array files are
// memory-mapped and streamed one head at a time; every analysed attention row is checked (strict by default).
// Documented in docs/cli.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "attnscope/analysis.hpp"
#include "attnscope/analysis/capture.hpp"
#include "attnscope/analysis/html_report.hpp"
#include "attnscope/io/file.hpp"
#include "cli_model.hpp"
#include "cli_provenance.hpp"
#include "cli_token_strings.hpp"
#include "cli_selection.hpp"
#include "commands.hpp"
#include "input_format.hpp"
#include "run_options.hpp"

namespace attnscope::cli {
namespace {

const char* report_usage() {
  static const std::string usage =
      R"(usage: attnscope report (INPUT | --model PATH) [--csv FILE] [--json FILE] [--html FILE] [--basic] [--columns LIST]
                        [--sort COLUMN[:asc]] [--sink-keys LIST] [--sink-channel C] [--lenient] [--map NAME]
                        [--sink-rate-queries T] [--sink-threshold LIST]
                        [--layout layers,heads,q,k | --layout batch,heads,q,k] [--batch-index N] [--width N]
                        [--tokens LIST | --tokens-file FILE | --text STRING | --text-file FILE]
                        [--from TEXT] [--skip-tokens N] [--max-tokens N] [--special-tokens]
                        [--add-special-tokens] [--generate N] [--matmul exact|llama.cpp] [--layers LIST]
                        [--heads LIST] [--threads N]

INPUT (its format is read from its content, not its extension) is one of
  - a capture written by `attnscope capture` (.npz or .safetensors in the capture layout: per layer the
    attention [heads, q, k], and optionally the scores and v),
  - an attention file: NPY, or NPZ/safetensors holding one array or one named "attention" (with optional "scores"
    of the same shape and "v" [..., k, d] beside it), of shape [q, k], [heads, q, k], [layers, heads, q, k]
    (default 4-D layout), [batch, heads, q, k] (--layout batch,heads,q,k) or [layers, batch, heads, q, k]
    (row = query; q may differ from k: a decoding step [heads, 1, k] or cross-attention),
  - a model (also given as --model PATH instead of INPUT): a Hugging Face model folder or a GGUF file run over
    --text-file / --text (encoded by its tokenizer) or --tokens / --tokens-file, or a llama2.c checkpoint (default:
    BOS = 1 then 255 greedy tokens; --tokens, --tokens-file, --generate and --map as for capture): capture and report
    in one command.
Prints one line per layer and head: sink_mass (mean weight on the sink keys), entropy (mean row entropy, nats),
max_max_weight (the largest max_weight, a row's largest weight, over rows that see >= 2 keys),
max_scaled_logit (needs scores), mean_jacobian_norm and
max_jacobian_norm (exact ||diag p - pp^T||_2 over rows), then the analysis modules' content_entropy and
sink_entropy_share, and sink_score (the mean weight on key 0 over the first --sink-rate-queries rows; a line under
the table gives the sink rate, the fraction of heads above each --sink-threshold).
Three costly columns are computed only when asked for (--columns all, or by name; together
about 8x the time of the rest at L = 1024): causal_stable_rank (an SVD of the scores, needs scores),
separability_at_critical_n and gradient_sensitivity = g(T=1, eps=1e-3) (need scores and values). Every "-" gets
its reason under the table.

Every analysed attention row must be finite, >= 0 and sum to 1 within 2u + k*2^-24 (u = unit roundoff of the
stored dtype: float32 2^-24, float16 2^-11, bfloat16 2^-8, float64 2^-53); otherwise the report stops (exit 1)
naming the layer, head, row and value. Captures made with a map whose rows are not distributions (sink,
sa_softmax, sa_softmax_normalized; recorded in a safetensors capture, or given with --map) are only checked for
finite values.

Options:
  --csv FILE        also write the table as CSV
  --json FILE       also write the table as JSON
  --html FILE       also write one self-contained HTML page: heatmaps of every head (larger on click, with the
                    tokens on the axes for a model INPUT), the sortable table with a glossary, sink/content bars
  --basic           only the six standard columns (skips the analysis modules' columns)
  --columns LIST    only these columns, in this order (names or the table's short names), e.g. sink_mass,entropy;
                    "all" for every column, including the costly causal_stable_rank, separability_at_critical_n
                    and gradient_sensitivity (off by default)
  --sort COLUMN     order the heads by a column, largest first (COLUMN:asc for smallest first; "-" last)
  --sink-keys LIST  keys counted as the sink (default: 0), e.g. 0,1 or a register token
  --sink-rate-queries T  the first T query rows of sink_score (default 64)
  --sink-threshold LIST  the thresholds of the sink-rate line (default 0.2,0.3,0.4,0.5)
  --sink-channel C  for a model with learned sink logits (gpt-oss): the sink channel of content_entropy and
                    sink_entropy_share: both (default: the learned sink and the sink keys), learned, or keys (the
                    real keys' rows renormalised, split at the sink keys)
  --lenient         analyse rows that are not distributions anyway: a warning counts them, values computed from
                    them are marked "*"
  --map NAME        for an array INPUT: the map that produced it (sink, sa_softmax, ... relax the row check);
                    for a model INPUT: the map to run, as for capture
  --layout L        how a 4-D attention array is read: layers,heads,q,k (default) or batch,heads,q,k
  --batch-index N   the batch entry to report for arrays with a batch axis (needed when the batch is > 1)
  --width N         table width in characters (default 100): longer tables use short names and wrap
  --layers LIST     only these layers, e.g. 0,2 (default: all); a model INPUT runs its forward up to the last one
  --heads LIST      only these heads of each selected layer (default: all); the others are neither recorded nor analysed
  --generate N      for a model: first append N greedy tokens (default for a llama2.c checkpoint without tokens: 255)
)" + std::string(model_input_usage) + std::string(input_window_usage) + std::string(matmul_usage) + R"(  --threads N       OpenMP threads (default 1; 0 = OpenMP default)
  --help            this text
)";
  return usage.c_str();
}

/// 0.0123, 1.23, 123, 1230: three significant digits, never in exponent notation.
std::string three_significant_digits(double value) {
  if (!(value > 0)) return "0";
  const int exponent = static_cast<int>(std::floor(std::log10(value)));
  const double unit = std::pow(10.0, exponent - 2);
  std::ostringstream text;
  text << std::fixed << std::setprecision(std::max(0, 2 - exponent)) << std::round(value / unit) * unit;
  return text.str();
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::string current;
  for (const char c : text + ",") {
    if (c == ',' || c == ' ') {
      if (!current.empty()) items.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  return items;
}

int command_report(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("csv").value_option("json").value_option("html").value_option("model").value_option("checkpoint");
  arguments.flag("basic").flag("lenient");
  arguments.value_option("columns").value_option("sort").value_option("sink-keys").value_option("layout");
  arguments.value_option("sink-channel").value_option("sink-rate-queries").value_option("sink-threshold");
  arguments.value_option("batch-index").value_option("width").value_option("layers").value_option("heads");
  add_model_options(arguments);
  if (parse_subcommand(arguments, argc, argv, report_usage())) return 0;
  const bool model_option = arguments.has("model") || arguments.has("checkpoint");
  if (model_option != arguments.positional().empty())
    throw usage_error("expected exactly one INPUT, or --model PATH without INPUT");
  if (arguments.positional().size() > 1) throw usage_error("expected exactly one INPUT");
  check_output_options(arguments, {"csv", "json", "html"});

  // Options that do not depend on the input.
  std::vector<Index> sink_keys{0};
  if (arguments.has("sink-keys")) {
    sink_keys.clear();
    for (const int key : parse_token_list(arguments.get("sink-keys"), "--sink-keys")) {
      if (key < 0) throw usage_error("--sink-keys: expected non-negative key indices, got " + std::to_string(key));
      sink_keys.push_back(key);
    }
  }
  analysis::SinkChannel sink_channel = analysis::SinkChannel::both;
  if (arguments.has("sink-channel")) {
    const std::string text = arguments.get("sink-channel");
    if (text == "keys") sink_channel = analysis::SinkChannel::keys;
    else if (text == "learned") sink_channel = analysis::SinkChannel::learned;
    else if (text != "both") throw usage_error("--sink-channel: expected both, learned or keys, got '" + text + "'");
  }
  const Index sink_rate_queries = parse_integer(arguments.get("sink-rate-queries", "64"), "--sink-rate-queries", 1,
                                                1L << 40);
  const std::vector<double> sink_thresholds =
      arguments.has("sink-threshold") ? parse_number_list(arguments.get("sink-threshold"), "--sink-threshold")
                                      : analysis::default_sink_rate_thresholds();
  analysis::AttentionFileOptions file_options;
  if (arguments.has("layout")) {
    const std::string text = arguments.get("layout");
    if (text == "batch,heads,q,k") file_options.layout = analysis::AttentionLayout::batch_heads;
    else if (text != "layers,heads,q,k")
      throw usage_error("--layout: expected layers,heads,q,k or batch,heads,q,k, got '" + text + "'");
  }
  if (arguments.has("batch-index")) file_options.batch_index = parse_integer(arguments.get("batch-index"), "--batch-index", 0, 1L << 40);
  const std::size_t width =
      static_cast<std::size_t>(parse_integer(arguments.get("width", "100"), "--width", 20, 100000));
  std::vector<analysis::ReportColumn> columns =
      arguments.has("basic") ? analysis::default_report_columns(sink_keys)
                             : analysis::fast_report_columns(sink_keys, sink_channel, sink_rate_queries);
  if (arguments.has("basic") && arguments.has("columns")) throw usage_error("give either --basic or --columns");
  if (arguments.get("columns") == "all") {
    columns = analysis::all_report_columns(sink_keys, sink_channel, sink_rate_queries);
  } else if (arguments.has("columns")) {
    try {
      columns = analysis::select_report_columns(analysis::all_report_columns(sink_keys, sink_channel, sink_rate_queries),
                                                split_list(arguments.get("columns")));
    } catch (const attnscope::invalid_argument& error) {
      throw usage_error(std::string("--columns: ") + error.what());
    }
    if (columns.empty()) throw usage_error("--columns: no column named");
  }
  analysis::HeadSelection selection;
  selection.layers = index_selection_argument(arguments, "layers");
  selection.heads = index_selection_argument(arguments, "heads");
  std::string sort_column = arguments.get("sort");
  bool ascending = false;
  if (ends_with(sort_column, ":asc")) {
    sort_column.resize(sort_column.size() - 4);
    ascending = true;
  } else if (ends_with(sort_column, ":desc")) {
    sort_column.resize(sort_column.size() - 5);
  }

  // The input, by content.
  const std::string input = model_option ? model_path_argument(arguments) : arguments.positional()[0];
  const io::FileFormat format =
      model_option
          ? io::detect_file_format(input)
          : require_input_format("report", input,
                                 {io::FileFormat::npy, io::FileFormat::npz, io::FileFormat::safetensors,
                                  io::FileFormat::llama2c, io::FileFormat::huggingface_folder, io::FileFormat::gguf},
                                 "an attention file, capture or model");
  const bool array_file = format == io::FileFormat::npy || format == io::FileFormat::npz ||
                          format == io::FileFormat::safetensors;
  if (array_file) {
    for (const char* name : {"tokens", "tokens-file", "text", "text-file", "generate", "max-tokens", "special-tokens",
                             "from", "skip-tokens", "add-special-tokens"})
      if (arguments.has(name))
        throw usage_error("--tokens, --tokens-file, --text, --text-file, --from, --skip-tokens, --max-tokens, "
                          "--special-tokens, --add-special-tokens and --generate apply to a model INPUT only (a "
                          "model folder, GGUF file or checkpoint, or --model PATH)");
  } else if (arguments.has("layout") || arguments.has("batch-index")) {
    throw usage_error("--layout and --batch-index apply to an attention array INPUT only");
  }

  analysis::HeadReportOptions options;
  options.lenient = arguments.has("lenient");
  options.strict_hint =
      "; pass --lenient to analyse such rows anyway (or --map NAME when the rows come from a map whose rows are not "
      "distributions: sink, sa_softmax)";
  std::optional<analysis::AttentionFile> arrays;
  std::optional<CaptureRun> run;
  std::string map_name = arguments.get("map");
  if (array_file) {
    try {
      arrays.emplace(input, file_options);
    } catch (const attnscope::invalid_argument& error) {  // the batch options do not fit the file
      throw usage_error(error.what());
    }
    if (map_name.empty() && arrays->metadata().count("map")) map_name = arrays->metadata().at("map");
    options.storage_roundoff = analysis::storage_roundoff(arrays->attention_dtype());
    if (!arrays->layout_note().empty()) std::cerr << "attnscope report: note: " << arrays->layout_note() << "\n";
    if (!arrays->ignored().empty()) {
      std::cerr << "attnscope report: warning: ignored arrays (not attention, scores or v):";
      for (const std::string& name : arrays->ignored()) std::cerr << " " << name;
      std::cerr << "\n";
    }
  } else {
    model::CaptureOptions capture;
    capture.scores = capture.attention = capture.v = capture.routing = true;
    CaptureRequest request = model_request(arguments, input, 255);
    // with --layers the forward stops after the last selected layer
    if (!selection.layers.empty())
      request.options.last_layer = static_cast<int>(*std::max_element(selection.layers.begin(), selection.layers.end()));
    // checks the selection against the model, then records only the selected heads' L × L arrays
    const auto prepare = [&](const model::TransformerConfig& config, model::CaptureOptions& narrowed) {
      check_layer_head_selection("report", selection.layers, selection.heads, config.n_layers, config.n_heads);
      if (selection.layers.empty() && selection.heads.empty()) return;
      const int layers_run = request.options.last_layer >= 0 ? request.options.last_layer + 1 : config.n_layers;
      for (int l = 0; l < layers_run; ++l)
        for (int h = 0; h < config.n_heads; ++h)
          if (selection.has_layer(l) && selection.has_head(h)) narrowed.heads.insert({l, h});
    };
    run.emplace(run_capture(request, capture, false, prepare));  // the report needs no logits
  }
  if (arguments.has("map")) map_argument(arguments);  // a bad --map is a usage error; a bad recorded map a data error
  if (!map_name.empty()) options.rows_are_distributions = analysis::map_rows_are_distributions(parse_normalization_map(map_name));

  // a model with learned sink logits (gpt-oss): its rows sum to 1 − σ; two columns more unless --columns chose
  bool learned_sinks = false;
  if (run)
    for (const auto& layer : run->result.layers) learned_sinks = learned_sinks || !layer.learned_sink.empty();
  if (learned_sinks && !arguments.has("columns"))
    for (analysis::ReportColumn& column : analysis::learned_sink_report_columns(sink_keys)) columns.push_back(column);
  // the composition columns state their sink channel (a learned-sink head's choice of --sink-channel)
  const std::string channel_note = learned_sinks ? std::string("sink channel: ") +
                                                       analysis::sink_channel_name(sink_channel) +
                                                       (sink_channel == analysis::SinkChannel::keys
                                                            ? " (the sink keys of the real keys' renormalised rows)"
                                                        : sink_channel == analysis::SinkChannel::learned
                                                            ? " (the learned sink)"
                                                            : " (the learned sink and the sink keys)")
                                                 : std::string();
  if (learned_sinks)
    for (analysis::ReportColumn& column : columns)
      if (column.name == "content_entropy" || column.name == "sink_entropy_share")
        column.description += "; " + channel_note;
  const auto start = std::chrono::steady_clock::now();
  // what every output records (io/run_options.hpp): the input (a file and its CRC-32, or the model and its tokens),
  // the model, the options and the version
  RunOptions recorded = command_record("report");
  if (array_file) {
    record_input_file(recorded, input, read_run_options(io::ArrayFile(input)));  // a capture names its model
    recorded["dtype"] = io::dtype_name(arrays->attention_dtype());
  } else {
    record_model(recorded, input, run->architecture);
    record_model_input(recorded, arguments, run->tokens);
    recorded["dtype"] = "float32";
    if (arguments.has("matmul")) recorded["matmul"] = arguments.get("matmul");
  }
  recorded["map"] = map_name.empty() ? "softmax" : map_name;
  recorded["sink_keys"] = join_integers(sink_keys);
  recorded["lenient"] = options.lenient ? "true" : "false";
  std::string column_names;
  for (const auto& column : columns) column_names += (column_names.empty() ? "" : ",") + column.name;
  recorded["columns"] = column_names;
  for (const char* name : {"layout", "batch-index", "sort", "sink-channel", "sink-rate-queries", "sink-threshold"})
    if (arguments.has(name)) {
      std::string key = name;
      std::replace(key.begin(), key.end(), '-', '_');
      recorded[key] = arguments.get(name);
    }
  if (!selection.layers.empty()) recorded["layers"] = join_integers(selection.layers);
  if (!selection.heads.empty()) recorded["heads"] = join_integers(selection.heads);
  analysis::HeadReportBuilder builder(columns, options);
  std::optional<analysis::HtmlReportBuilder> page;
  if (arguments.has("html")) {
    analysis::HtmlReportOptions html;
    html.source = input;
    html.run = recorded;
    html.sink_keys = sink_keys;
    page.emplace(html);
    if (run) page->set_tokens(token_strings(run->tokens, format == io::FileFormat::llama2c ? std::string() : input));
  }
  // every head goes to the table and, with --html, to the page (which keeps only its downsampled images)
  const analysis::HeadVisitor visit = [&](const analysis::HeadInput& head) {
    builder.add(head);
    if (page && head.learned_sink.size()) page->add_head(head.layer, head.head, head.attention, head.learned_sink);
    else if (page) page->add_head(head.layer, head.head, head.attention);
  };
  try {
    ProgressBar bar("report");
    if (arrays) analysis::for_each_head(*arrays, selection, visit, bar.callback());
    else analysis::for_each_head(run->result, selection, visit, bar.callback());
  } catch (const attnscope::invalid_argument& error) {  // a row that is not a distribution, ...: name the input
    attnscope::detail::throw_invalid_argument("report", input, ": ", error.what());
  }
  analysis::HeadReport report = builder.take();
  if (!sort_column.empty()) {
    try {
      analysis::sort_head_report(report, sort_column, ascending);
    } catch (const attnscope::invalid_argument& error) {
      throw usage_error(std::string("--sort: ") + error.what());
    }
  }
  Index bad_rows = 0, bad_heads = 0;
  for (const auto& row : report.rows) {
    bad_rows += row.bad_rows;
    bad_heads += row.bad_rows > 0;
  }
  if (bad_rows > 0)
    std::cerr << "attnscope report: warning: " << bad_rows << " attention rows in " << bad_heads
              << " heads are not probability distributions; analysed anyway (--lenient), values marked *\n";
  // a model run's rows are its tokens, every head L × L (its unselected heads were not recorded)
  const std::int64_t query_rows = arrays ? arrays->query_rows() : static_cast<std::int64_t>(run->tokens.size());
  const std::int64_t keys = arrays ? arrays->key_count() : query_rows;
  std::cout << "# " << input << ": " << report.rows.size() << " heads, "
            << (query_rows == keys ? "L = " + std::to_string(keys)
                                   : "q = " + std::to_string(query_rows) + ", k = " + std::to_string(keys))
            << " (report " << three_significant_digits(milliseconds_since(start)) << " ms)\n";
  if (learned_sinks) std::cout << "# learned sink logits; content_entropy and sink_entropy_share: " << channel_note << "\n";
  std::cout << analysis::head_report_table(report, width);
  // the sink rate (Gu et al. 2024): of the heads with a sink score, the fraction above each threshold
  const auto score_column = std::find(report.columns.begin(), report.columns.end(), "sink_score");
  if (score_column != report.columns.end()) {
    const std::size_t c = static_cast<std::size_t>(score_column - report.columns.begin());
    std::vector<double> scores;
    for (const auto& row : report.rows)
      if (!std::isnan(row.values[c])) scores.push_back(row.values[c]);
    if (!scores.empty()) {
      const analysis::SinkRate rate = analysis::sink_rate(scores, sink_thresholds);
      std::ostringstream line;  // e.g. "# sink rate (Gu et al. 2024; 40 heads, T = 64): above 0.2: 0.125, 0.3: 0, ..."
      line << std::setprecision(3) << "# sink rate (Gu et al. 2024; " << rate.heads << " heads, T = "
           << sink_rate_queries << "): above";
      for (std::size_t t = 0; t < rate.thresholds.size(); ++t)
        line << (t ? ", " : " ") << rate.thresholds[t] << ": " << rate.fraction[t];
      std::cout << line.str() << "\n";
    }
  }
  // Mixture-of-Experts layers: what the router did (tokens per expert, mean entropy of its distribution)
  if (run)
    for (std::size_t l = 0; l < run->result.layers.size(); ++l) {
      const model::Routing& routing = run->result.layers[l].routing;
      if (routing.experts.size() == 0) continue;
      const analysis::RoutingSummary summary = analysis::summarize_routing(routing.router_logits, routing.experts);
      std::cout << "# layer " << l << " experts: tokens per expert";
      for (const Index load : summary.load) std::cout << " " << load;
      std::cout << "; mean routing entropy " << three_significant_digits(summary.mean_entropy) << " nats (ln E = "
                << three_significant_digits(summary.max_entropy) << ")\n";
      if (page) page->add_routing(static_cast<int>(l), summary);
    }
  if (arguments.has("csv"))  // the record as a comment line first: pandas.read_csv(path, comment="#")
    io::write_file(arguments.get("csv"), io::csv_with_run(recorded, analysis::head_report_csv(report)),
                   temporary_files());
  if (arguments.has("json")) {
    // the record as a one-element "runs" array: `merge` joins the runs of reports of several documents and refuses
    // reports whose options (map, columns, sink keys, dtype, ...) differ
    nlohmann::json document = analysis::head_report_json(report);
    document[io::run_records_key] = nlohmann::json::array({nlohmann::json(recorded)});
    io::write_file(arguments.get("json"), document.dump(2) + "\n", temporary_files());
  }
  if (page) page->write(arguments.get("html"), report, temporary_files());
  return 0;
}

}  // namespace

const Command& report_command() {
  static const Command command{
      "report", "per-layer, per-head table (sink mass, entropy, max weight, max scaled logit, Jacobian norms)",
      report_usage(), command_report};
  return command;
}

}  // namespace attnscope::cli
