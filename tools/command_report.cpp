// tools/command_report.cpp — `attnscope report`: the per-layer, per-head table of a capture, an attention file or
// a model run (llama2.c checkpoint or Hugging Face folder), with the analysis modules' columns. Documented in
// docs/cli.md.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "attnscope/analysis.hpp"
#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
#include "cli_model.hpp"
#include "commands.hpp"

namespace attnscope::cli {
namespace {

constexpr const char* report_usage =
    R"(usage: attnscope report (INPUT | --model DIR) [--csv FILE] [--json FILE] [--basic]
                        [--tokens LIST | --tokens-file FILE | --text STRING | --text-file FILE]
                        [--max-tokens N] [--special-tokens] [--generate N] [--map NAME]

INPUT is one of
  - a capture written by `attnscope capture` (.npz or .safetensors with layer{i}.attention, and optionally
    layer{i}.scores and layer{i}.v),
  - an attention file: .npy, or .npz/.safetensors holding one array (or one named "attention"), of shape
    [heads, L, L], [layers, heads, L, L] or [L, L] (row = query),
  - a llama2.c checkpoint: captured first (default: BOS = 1 then 255 greedy tokens; --tokens, --tokens-file,
    --generate and --map as for capture),
  - or, with --model DIR instead of INPUT, a Hugging Face model folder run over --text-file / --text (encoded by
    the folder's tokenizer) or --tokens / --tokens-file: capture and report in one command (options as for
    capture; input longer than the model's positions is an error unless --max-tokens cuts it).
Prints one line per layer and head: sink_mass (mean weight on key 0), entropy (mean row entropy, nats),
max_attention, max_scaled_logit (needs scores), mean_jacobian_norm and max_jacobian_norm (exact ||diag p - pp^T||_2
over rows; "-" when rows are not distributions), then the analysis modules' columns: content_entropy and
sink_entropy_share (sink = key 0), causal_stable_rank (needs scores), separability_at_critical_n and
gradient_sensitivity = g(T=1, eps=1e-3) (need scores and values). "-" = not available.

Options:
  --csv FILE    also write the table as CSV
  --json FILE   also write the table as JSON
  --basic       only the six standard columns (skips the slower analysis columns)
  --threads N   OpenMP threads (default 1; 0 = OpenMP default)
  --help        this text
)";

std::map<std::string, io::Array> read_arrays(const std::string& path) {
  if (ends_with(path, ".npz")) return io::read_npz(path);
  if (ends_with(path, ".safetensors")) return io::read_safetensors(path);
  return {{"attention", io::read_npy(path)}};
}

// Head inputs from named arrays: a capture (layer{i}.attention ...) or a single attention array.
std::vector<analysis::HeadInput> heads_from_arrays(const std::map<std::string, io::Array>& arrays,
                                                   const std::string& path) {
  std::vector<analysis::HeadInput> heads;
  auto require_rank3 = [&](const std::string& name, const io::Array& array) {
    if (array.rank() != 3)
      attnscope::detail::throw_io_error("report", path, name, " has shape ", io::detail::shape_string(array.shape()),
                                        ", expected [heads, L, L]");
  };
  if (arrays.count("layer0.attention")) {
    for (int l = 0; arrays.count("layer" + std::to_string(l) + ".attention"); ++l) {
      const std::string prefix = "layer" + std::to_string(l) + ".";
      const io::Array& attention = arrays.at(prefix + "attention");
      require_rank3(prefix + "attention", attention);
      const auto scores = arrays.find(prefix + "scores");
      const auto values = arrays.find(prefix + "v");
      for (std::int64_t h = 0; h < attention.shape()[0]; ++h) {
        analysis::HeadInput head;
        head.layer = l;
        head.head = static_cast<int>(h);
        head.attention = attention.slice_matrix<double>({h});
        if (scores != arrays.end()) {
          require_rank3(prefix + "scores", scores->second);
          head.scores = scores->second.slice_matrix<double>({h});
        }
        if (values != arrays.end()) {
          require_rank3(prefix + "v", values->second);
          head.values = values->second.slice_matrix<double>({h});
        }
        heads.push_back(std::move(head));
      }
    }
    return heads;
  }
  const io::Array* attention = nullptr;
  if (arrays.count("attention"))
    attention = &arrays.at("attention");
  else if (arrays.size() == 1)
    attention = &arrays.begin()->second;
  else
    attnscope::detail::throw_io_error("report", path, "holds ", arrays.size(),
                                      " arrays but neither layer0.attention nor one named 'attention'");
  const auto& shape = attention->shape();
  if (attention->rank() < 2 || attention->rank() > 4)
    attnscope::detail::throw_io_error("report", path, "attention has shape ", io::detail::shape_string(shape),
                                      ", expected [L, L], [heads, L, L] or [layers, heads, L, L]");
  const std::int64_t layers = attention->rank() == 4 ? shape[0] : 1;
  const std::int64_t heads_per_layer = attention->rank() >= 3 ? shape[attention->rank() - 3] : 1;
  for (std::int64_t l = 0; l < layers; ++l)
    for (std::int64_t h = 0; h < heads_per_layer; ++h) {
      analysis::HeadInput head;
      head.layer = static_cast<int>(l);
      head.head = static_cast<int>(h);
      std::vector<std::int64_t> prefix;
      if (attention->rank() == 4)
        prefix = {l, h};
      else if (attention->rank() == 3)
        prefix = {h};
      head.attention = attention->slice_matrix<double>(prefix);
      heads.push_back(std::move(head));
    }
  return heads;
}

int command_report(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("csv").value_option("json").value_option("model").flag("basic");
  add_model_options(arguments);
  if (parse_subcommand(arguments, argc, argv, report_usage)) return 0;
  if (arguments.has("model") != arguments.positional().empty())
    throw usage_error("expected exactly one INPUT, or --model DIR without INPUT");
  const std::string input = arguments.has("model") ? model_path_argument(arguments) : arguments.positional()[0];
  const bool array_file = ends_with(input, ".npz") || ends_with(input, ".npy") || ends_with(input, ".safetensors");
  if (array_file && has_model_options(arguments))
    throw usage_error("--tokens, --tokens-file, --text, --text-file, --max-tokens, --special-tokens, --generate and "
                      "--map apply to a model INPUT only (a checkpoint or --model DIR)");

  std::vector<analysis::HeadInput> heads;
  if (array_file) {
    heads = heads_from_arrays(read_arrays(input), input);
  } else {
    model::CaptureOptions capture;
    capture.scores = capture.attention = capture.v = true;
    const CaptureRun run = run_capture(model_request(arguments, input, 255), capture);
    heads = analysis::head_inputs(run.result);
  }
  const auto start = std::chrono::steady_clock::now();
  analysis::HeadReport report;
  {
    ProgressBar bar("report");
    report = analysis::compute_head_report(
        heads, arguments.has("basic") ? analysis::default_report_columns() : analysis::all_report_columns(),
        bar.callback());
  }
  const Index length = heads.front().attention.rows();
  std::cout << "# " << input << ": " << heads.size() << " heads, L = " << length << " (report "
            << milliseconds_since(start) << " ms)\n"
            << analysis::head_report_table(report);
  if (arguments.has("csv")) io::write_file(arguments.get("csv"), analysis::head_report_csv(report));
  if (arguments.has("json")) io::write_file(arguments.get("json"), analysis::head_report_json(report).dump(2) + "\n");
  return 0;
}

}  // namespace

const Command& report_command() {
  static const Command command{
      "report", "per-layer, per-head table (sink mass, entropy, max weight, max scaled logit, Jacobian norms)",
      report_usage, command_report};
  return command;
}

}  // namespace attnscope::cli
