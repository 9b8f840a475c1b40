// tools/command_kvsim.cpp — `attnscope kvsim`: the attention each head loses under KV-cache eviction policies,
// simulated open-loop (attnscope::kvcache::simulate_layer) on the q, k and v of the model's unmodified forward pass.
// Documented in docs/cli.md and docs/guide.md ("attention under KV-cache policies").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/analysis/detail/html_page.hpp"
#include "attnscope/io/array_file.hpp"
#include "attnscope/kvcache.hpp"
#include "attnscope/stream/aggregate.hpp"
#include "cli_model.hpp"
#include "cli_progress.hpp"
#include "cli_provenance.hpp"
#include "commands.hpp"
#include "run_options.hpp"

namespace attnscope::cli {
namespace {

const char* kvsim_usage() {
  static const std::string usage =
      R"(usage: attnscope kvsim --model PATH
                      (--tokens LIST | --tokens-file FILE | --text STRING | --text-file FILE)
                      --policy SPEC [--policy SPEC ...] --out KV.npz [--csv HEADS.csv] [--html KV.html]
                      [--evaluate-from E] [--prefill P] [--from TEXT] [--skip-tokens N] [--max-tokens N]
                      [--special-tokens] [--add-special-tokens] [--threads N]

The attention each head loses under KV-cache eviction policies, simulated open-loop: every layer's q, k and v come
from the unmodified forward pass, and each policy's cache is replayed on them. Per layer, query head and query i ≥ E:
the lost mass 1 − Σ_{j in C_i} a_ij (a: the model's attention, C_i: the keys the cache holds for query i), the output
error ‖o − o′‖/‖o‖ of the head output renormalised on C_i, and the cache size |C_i| per KV head. No L×L matrix is
formed: the attention is computed in strips of query rows from q and k.

Policies (SPEC), each given with --policy, in the order given:
  streaming:sink=S,recent=R          StreamingLLM: the first S keys and the R latest
  oracle:budget=B                    the B keys of largest attention, per query and head (the lower bound)
  h2o:heavy=H,recent=R               H2O: R recent keys plus H heavy hitters by accumulated attention (per KV head)
  tova:budget=B                      TOVA: B keys per layer, dropping the key the current query attends to least
  snapkv:window=W,kernel=K,budget=B  SnapKV: at the end of the prefill (--prefill P) keep B − W prefix keys voted by
                                     the last W prefill queries (average pool of odd width K) and the window

Output arrays (KV.npz): queries int64 [Q] (the evaluated queries E … L−1); per policy n (0, 1, … in the order
given) policy{n}.lost_mass, policy{n}.output_error and policy{n}.oracle_lost_mass (the oracle's lost mass with the
same number of keys) float64 [layers, heads, Q], policy{n}.cache_size int64 [layers, kv_heads, Q]; run_options (JSON
as int32 bytes) with policy{n} = the canonical spec, the model and the tokens.

Options:
  -o, --out FILE       output .npz
  --policy SPEC        a policy (repeatable; at least one)
  --csv FILE           one row per (layer, head, policy): mean, 95th percentile and max lost mass, mean output
                       error, and the gap to the oracle with the same cache size
  --html FILE          a head x policy heatmap of the mean lost mass (one self-contained page)
  --evaluate-from E    first evaluated query (default 0; the caches still run from query 0)
  --prefill P          end of the prefill (needed by snapkv): queries < P see every key
)" + std::string(model_input_usage) + std::string(input_window_usage) + R"(  --threads N          OpenMP threads over the heads (default 1; 0 = OpenMP default)
  --help               this text
)";
  return usage.c_str();
}

/// One layer's post-RoPE queries and keys and the attention settings, as the forward pass's callback saw them.
struct KvsimLayerInputs {
  RowMatrix<float> queries, keys;
  stream::RowStatisticsOptions attention;
};

/// The per (layer, head, policy) summary of the CSV and the page.
struct KvsimHeadSummary {
  Index layer = 0, head = 0;
  std::size_t policy = 0;
  double mean_lost = 0, p95_lost = 0, max_lost = 0, mean_error = 0, oracle_gap = 0;
};

std::string kvsim_csv(const std::vector<KvsimHeadSummary>& rows, const std::vector<std::string>& specs) {
  std::ostringstream out;
  out.precision(9);
  out << "layer,head,policy,spec,mean_lost_mass,p95_lost_mass,max_lost_mass,mean_output_error,oracle_gap\n";
  for (const KvsimHeadSummary& row : rows)
    out << row.layer << "," << row.head << "," << row.policy << ",\"" << specs[row.policy] << "\"," << row.mean_lost
        << "," << row.p95_lost << "," << row.max_lost << "," << row.mean_error << "," << row.oracle_gap << "\n";
  return out.str();
}

/// A colour from white (0) to dark red (1) for a lost mass in [0, 1].
std::string kvsim_cell_colour(double value) {
  const double t = std::min(1.0, std::max(0.0, value));
  const int red = static_cast<int>(255 - 75 * t), green = static_cast<int>(255 - 225 * t),
            blue = static_cast<int>(255 - 215 * t);
  char text[16];
  std::snprintf(text, sizeof text, "#%02x%02x%02x", red, green, blue);
  return text;
}

std::string kvsim_html(const std::vector<KvsimHeadSummary>& rows, const std::vector<std::string>& specs,
                       const std::string& source, Index queries, const RunOptions& run) {
  using analysis::detail::html_escape;
  using analysis::detail::html_format_value;
  std::ostringstream page;
  page << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attnscope kvsim: "
       << html_escape(source) << "</title>\n<style>" << analysis::detail::html_page_style()
       << "\ntd.heat{text-align:center;min-width:6em;color:#111}#heatmap th{max-width:none;white-space:nowrap}</style></head><body>\n<h1>Attention lost under KV-cache "
          "policies</h1>\n<p class=\"source\">"
       << html_escape(source) << ", " << queries
       << " evaluated queries (open-loop)</p>\n" << analysis::detail::html_run_record(run)
       << "<p class=\"note\">Each cell: the head's mean lost attention mass "
          "1 − Σ<sub>j∈C<sub>i</sub></sub> a<sub>ij</sub> over the evaluated queries (white 0, dark red 1). Hover for the "
          "95th percentile, the maximum, the mean output error and the gap to the oracle with as many keys.</p>\n"
          "<div class=\"scroll\"><table id=\"heatmap\"><thead><tr><th>layer</th><th>head</th>";
  for (const std::string& spec : specs) page << "<th>" << html_escape(spec) << "</th>";
  page << "</tr></thead><tbody>\n";
  const std::size_t policies = specs.size();
  for (std::size_t start = 0; start + policies <= rows.size(); start += policies) {
    page << "<tr><td>" << rows[start].layer << "</td><td>" << rows[start].head << "</td>";
    for (std::size_t p = 0; p < policies; ++p) {
      const KvsimHeadSummary& row = rows[start + p];
      page << "<td class=\"heat\" style=\"background:" << kvsim_cell_colour(row.mean_lost) << "\" title=\"p95 "
           << html_format_value(row.p95_lost) << ", max " << html_format_value(row.max_lost) << ", output error "
           << html_format_value(row.mean_error) << ", oracle gap " << html_format_value(row.oracle_gap) << "\">"
           << html_format_value(row.mean_lost) << "</td>";
    }
    page << "</tr>\n";
  }
  page << "</tbody></table></div>\n</body></html>\n";
  return page.str();
}

int command_kvsim(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("out", "-o").repeated_option("policy").value_option("csv").value_option("html")
      .value_option("evaluate-from").value_option("prefill");
  arguments.value_option("model").value_option("checkpoint").value_option("tokens").value_option("tokens-file")
      .value_option("text").value_option("text-file").value_option("max-tokens").flag("special-tokens")
      .flag("add-special-tokens");
  add_input_window_options(arguments);
  if (parse_subcommand(arguments, argc, argv, kvsim_usage())) return 0;
  require_no_positional(arguments);
  if (!arguments.has("model") && !arguments.has("checkpoint"))
    throw usage_error("give the model with --model PATH");
  const std::string out = arguments.require("out");
  if (!ends_with(out, ".npz")) throw usage_error("--out must end in .npz: " + out);
  check_output_options(arguments, {"out", "csv", "html"});
  const std::vector<std::string> texts = arguments.get_all("policy");
  if (texts.empty()) throw usage_error("give at least one --policy SPEC (e.g. streaming:sink=4,recent=60)");
  std::vector<kvcache::Policy> policies;
  std::vector<std::string> specs;
  for (const std::string& text : texts) {
    try {
      policies.push_back(kvcache::parse_policy(text));
    } catch (const attnscope::invalid_argument& error) {
      throw usage_error(std::string("--policy: ") + error.what());
    }
    specs.push_back(kvcache::policy_spec(policies.back()));
  }
  kvcache::SimulationOptions simulation;
  if (arguments.has("evaluate-from"))
    simulation.evaluate_from = parse_integer(arguments.get("evaluate-from"), "--evaluate-from", 0, 1L << 40);
  if (arguments.has("prefill"))
    simulation.prefill = parse_integer(arguments.get("prefill"), "--prefill", 1, 1L << 40);
  for (const kvcache::Policy& policy : policies)
    if (std::holds_alternative<kvcache::SnapKV>(policy) && !arguments.has("prefill"))
      throw usage_error("--policy " + kvcache::policy_spec(policy) + " needs --prefill P (the end of the prefill)");

  const std::string model_path = model_path_argument(arguments);
  const CaptureRequest request = model_request(arguments, model_path, 0);
  const auto start = std::chrono::steady_clock::now();
  const model::Transformer transformer = model::load_model(model_path);
  const auto& config = transformer.config();
  if (config.learned_sinks)  // the simulation's rows are plain softmax rows of q and k
    attnscope::detail::throw_invalid_argument("kvsim", model_path, " (", config.architecture,
                                              ") has learned sink logits, which the cache simulation does not ",
                                              "implement");
  const Index length = static_cast<Index>(request.tokens.size());
  if (request.tokens.size() > static_cast<std::size_t>(config.seq_len))
    attnscope::detail::throw_invalid_argument(  // a data error: the options were right, the input is too long
        "kvsim", "the input has ", request.tokens.size(), " tokens but the model takes at most ", config.seq_len,
        " positions; cut it with --max-tokens ", config.seq_len);
  if (simulation.evaluate_from >= length)
    attnscope::detail::throw_invalid_argument("kvsim", "--evaluate-from ", simulation.evaluate_from,
                                              " leaves no query of the ", length, " input tokens");
  if (simulation.prefill > length)
    attnscope::detail::throw_invalid_argument("kvsim", "--prefill ", simulation.prefill, " is longer than the ",
                                              length, " input tokens");
  const int heads = config.n_heads, kv_heads = config.n_kv_heads, group = heads / kv_heads;
  for (const kvcache::Policy& policy : policies)  // e.g. a SnapKV window longer than the prefill, before the forward
    std::visit([&](const auto& typed) { typed.validate({length, simulation.prefill}); }, policy);

  // The forward pass: q and k of each layer from the attention callback, v from the capture of the first query head
  // of each KV group (the others are copies of it); no logits, no L×L matrix.
  std::vector<KvsimLayerInputs> inputs(static_cast<std::size_t>(config.n_layers));
  model::ForwardOptions forward_options;
  forward_options.logits = false;
  forward_options.capture.v = true;
  for (int l = 0; l < config.n_layers; ++l)
    for (int g = 0; g < kv_heads; ++g) forward_options.capture.heads.emplace(l, g * group);
  forward_options.layer_attention_inputs = [&](int layer, const RowMatrixView<float>& queries,
                                               const RowMatrixView<float>& keys,
                                               const stream::RowStatisticsOptions& attention) {
    inputs[static_cast<std::size_t>(layer)] = {queries, keys, attention};
  };
  ProgressBar bar("forward");
  forward_options.layer_progress = [&](int done, int total) { bar.update(done, total); };
  model::ForwardResult forward = transformer.forward(request.tokens, forward_options);
  bar.finish();
  const double forward_ms = milliseconds_since(start);

  // Per layer: the simulation, its arrays copied into [layers, heads, Q] blocks, the layer's inputs freed.
  const Index evaluated = length - simulation.evaluate_from;
  const std::size_t per_layer_heads = static_cast<std::size_t>(heads * evaluated);
  const std::size_t per_layer_kv = static_cast<std::size_t>(kv_heads * evaluated);
  std::vector<std::vector<double>> lost(policies.size()), error(policies.size()), oracle(policies.size());
  std::vector<std::vector<std::int64_t>> sizes(policies.size());
  std::vector<KvsimHeadSummary> summary;
  ProgressBar simulate_bar("kvsim");
  const auto simulate_start = std::chrono::steady_clock::now();
  for (int l = 0; l < config.n_layers; ++l) {
    KvsimLayerInputs& layer = inputs[static_cast<std::size_t>(l)];
    const auto& captured = forward.layers[static_cast<std::size_t>(l)].v;
    const Index value_size = captured[0].cols();
    RowMatrix<float> values(length, kv_heads * value_size);
    for (int g = 0; g < kv_heads; ++g)
      values.middleCols(g * value_size, value_size) = captured[static_cast<std::size_t>(g * group)];
    forward.layers[static_cast<std::size_t>(l)] = model::LayerCapture();
    const std::vector<kvcache::PolicyLayerResult> results = kvcache::simulate_layer(
        layer.queries, layer.keys, values, heads, kv_heads, layer.attention, policies, simulation);
    layer = KvsimLayerInputs();
    for (std::size_t p = 0; p < policies.size(); ++p) {
      const kvcache::PolicyLayerResult& result = results[p];
      lost[p].insert(lost[p].end(), result.lost_mass.data(), result.lost_mass.data() + per_layer_heads);
      error[p].insert(error[p].end(), result.output_error.data(), result.output_error.data() + per_layer_heads);
      oracle[p].insert(oracle[p].end(), result.oracle_lost_mass.data(),
                       result.oracle_lost_mass.data() + per_layer_heads);
      sizes[p].insert(sizes[p].end(), result.cache_size.data(), result.cache_size.data() + per_layer_kv);
    }
    for (int h = 0; h < heads; ++h)
      for (std::size_t p = 0; p < policies.size(); ++p) {
        const kvcache::PolicyLayerResult& result = results[p];
        KvsimHeadSummary row;
        row.layer = l;
        row.head = h;
        row.policy = p;
        const Vector<double> head_lost = result.lost_mass.row(h).transpose();
        row.mean_lost = head_lost.mean();
        row.p95_lost = stream::summarize(head_lost, {0.95}).quantiles[0];
        row.max_lost = head_lost.maxCoeff();
        row.mean_error = result.output_error.row(h).mean();
        row.oracle_gap = row.mean_lost - result.oracle_lost_mass.row(h).mean();
        summary.push_back(row);
      }
    simulate_bar.update(l + 1, config.n_layers);
  }
  simulate_bar.finish();
  const double simulate_ms = milliseconds_since(simulate_start);

  io::NamedArrays arrays;
  std::vector<std::int64_t> queries;
  for (Index i = simulation.evaluate_from; i < length; ++i) queries.push_back(i);
  arrays.emplace_back("queries", io::Array::from_vector(queries, {evaluated}));
  const std::vector<std::int64_t> head_shape = {config.n_layers, heads, evaluated};
  const std::vector<std::int64_t> kv_shape = {config.n_layers, kv_heads, evaluated};
  RunOptions run = command_record("kvsim");
  record_model(run, model_path, config.architecture);
  record_model_input(run, arguments, request.tokens);
  run["evaluate_from"] = std::to_string(simulation.evaluate_from);
  run["prefill"] = std::to_string(simulation.prefill);
  run["policies"] = std::to_string(policies.size());
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const std::string prefix = "policy" + std::to_string(p);
    run[prefix] = specs[p];
    arrays.emplace_back(prefix + ".lost_mass", io::Array::from_vector(lost[p], head_shape));
    arrays.emplace_back(prefix + ".output_error", io::Array::from_vector(error[p], head_shape));
    arrays.emplace_back(prefix + ".oracle_lost_mass", io::Array::from_vector(oracle[p], head_shape));
    arrays.emplace_back(prefix + ".cache_size", io::Array::from_vector(sizes[p], kv_shape));
  }
  write_arrays_with_run_options(out, std::move(arrays), run);
  if (arguments.has("csv"))  // the record as a comment line first: pandas.read_csv(path, comment="#")
    io::write_file(arguments.get("csv"), io::csv_with_run(run, kvsim_csv(summary, specs)), temporary_files());
  if (arguments.has("html"))
    io::write_file(arguments.get("html"),
                   kvsim_html(summary, specs, model_path + ", " + std::to_string(length) + " tokens", evaluated, run),
                   temporary_files());

  // stdout: per policy the mean over heads and the head that loses most
  std::printf("%-40s %10s %10s %10s %12s\n", "policy", "mean_lost", "oracle_gap", "out_error", "worst_head");
  for (std::size_t p = 0; p < policies.size(); ++p) {
    double lost_sum = 0, gap_sum = 0, error_sum = 0;
    const KvsimHeadSummary* worst = nullptr;
    int count = 0;
    for (const KvsimHeadSummary& row : summary) {
      if (row.policy != p) continue;
      lost_sum += row.mean_lost;
      gap_sum += row.oracle_gap;
      error_sum += row.mean_error;
      ++count;
      if (worst == nullptr || row.mean_lost > worst->mean_lost) worst = &row;
    }
    const std::string worst_name = "L" + std::to_string(worst->layer) + "H" + std::to_string(worst->head);
    std::printf("%-40s %10.5f %10.5f %10.5f %12s\n", specs[p].c_str(), lost_sum / count, gap_sum / count,
                error_sum / count, worst_name.c_str());
  }
  std::cerr << "attnscope: " << config.architecture << ", " << length << " tokens, " << config.n_layers
            << " layers x " << heads << " heads (" << kv_heads << " KV heads), " << policies.size()
            << " policies; forward " << forward_ms << " ms, simulation " << simulate_ms << " ms; wrote " << out
            << "\n";
  return 0;
}

}  // namespace

const Command& kvsim_command() {
  static const Command command{"kvsim", "attention each head loses under KV-cache eviction policies (open-loop)",
                               kvsim_usage(), command_kvsim};
  return command;
}

}  // namespace attnscope::cli
