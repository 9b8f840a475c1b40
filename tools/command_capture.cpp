// tools/command_capture.cpp — `attnscope capture`: run a model (Hugging Face folder, GGUF file or llama2.c
// checkpoint) over tokens or text and write q, k, v, scores, attention and logits per layer and head in the library's
// capture layout (io/capture_layout.hpp; NPZ or safetensors). Documented in docs/cli.md.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "attnscope/analysis/capture.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "cli_model.hpp"
#include "cli_provenance.hpp"
#include "commands.hpp"

namespace attnscope::cli {
namespace {

const char* capture_usage() {
  static const std::string usage =
      R"(usage: attnscope capture --model PATH
                         [--tokens 1,2,3 | --tokens-file FILE | --text STRING | --text-file FILE]
                         [--from TEXT] [--skip-tokens N] [--max-tokens N] [--special-tokens] [--add-special-tokens]
                         [--generate N] [--matmul exact|llama.cpp]
                         [--map NAME[:PARAM]] [--layers LIST] [--no-logits] [--compress] [--threads N]
                         --out FILE.npz|FILE.safetensors

Runs the model over the tokens (default for a llama2.c checkpoint: BOS = 1), after first decoding N greedy tokens
when --generate N is given, and writes the capture layout: )" +
      io::capture_layout_description() + R"(.

Options:
)" + std::string(model_input_usage) + std::string(input_window_usage) + std::string(matmul_usage) + R"(  --generate N        first append N greedy tokens (uses the --map too)
  --map NAME          attention normalization: softmax (default), temperature:T, ssmax:S, sparsemax, entmax15,
                      entmax:ALPHA, sa_softmax, sa_softmax_normalized, sink, sink:LOGIT
  --layers LIST       write only these layers, e.g. 0,3 (their arrays keep their layer numbers; default: all)
  --no-logits         do not write the logits [L, vocab] (at L = 1024 and GPT-2's vocabulary, 196 MB)
  --compress          deflate NPZ members (smaller, slower); default: stored
  --out FILE          output; .npz or .safetensors decides the format
  --threads N         OpenMP threads (default 1; 0 = OpenMP default)
  --help              this text
)";
  return usage.c_str();
}

/// "0,3" of the --layers list.
std::string join_layer_list(const std::vector<int>& layers) {
  std::string text;
  for (std::size_t i = 0; i < layers.size(); ++i) text += (i ? "," : "") + std::to_string(layers[i]);
  return text;
}

int command_capture(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("model").value_option("checkpoint").value_option("out", "-o").flag("compress");
  arguments.value_option("layers").flag("no-logits");
  add_model_options(arguments);
  if (parse_subcommand(arguments, argc, argv, capture_usage())) return 0;
  require_no_positional(arguments);
  const std::string out = arguments.require("out");
  if (!ends_with(out, ".safetensors") && !ends_with(out, ".npz")) throw usage_error("--out must end in .npz or .safetensors: " + out);
  check_output_options(arguments, {"out"});
  const std::string model_path = model_path_argument(arguments);
  const CaptureRequest request = model_request(arguments, model_path, 0);

  std::vector<int> layers;
  if (arguments.has("layers"))
    for (const int layer : parse_token_list(arguments.get("layers"), "--layers")) {
      if (layer < 0) throw usage_error("--layers: expected non-negative layer indices, got " + std::to_string(layer));
      if (std::find(layers.begin(), layers.end(), layer) != layers.end())
        throw usage_error("--layers names layer " + std::to_string(layer) + " twice");
      layers.push_back(layer);
    }

  model::CaptureOptions capture;
  capture.q = capture.k = capture.v = capture.scores = capture.attention = capture.routing = true;
  CaptureRun run = run_capture(request, capture, !arguments.has("no-logits"));
  for (const int layer : layers)
    if (layer >= run.n_layers)
      attnscope::detail::throw_invalid_argument("capture", "--layers names layer ", layer, " but the model has ",
                                                run.n_layers, " layers");
  // the layers not asked for are dropped before the arrays are stacked (they never reach the file)
  if (!layers.empty())
    for (std::size_t l = 0; l < run.result.layers.size(); ++l)
      if (std::find(layers.begin(), layers.end(), static_cast<int>(l)) == layers.end()) run.result.layers[l] = {};

  const auto write_start = std::chrono::steady_clock::now();
  io::NamedArrays arrays = analysis::capture_arrays(run.result, run.tokens);
  // the run record: safetensors metadata, or (NPZ has no metadata) the array run_options
  RunOptions record = command_record("capture");
  record_model(record, request.model_path, run.architecture);
  record_model_input(record, arguments, run.tokens);
  record["map"] = request.options.map ? attnscope::to_string(*request.options.map) : "softmax";
  record["generated"] = std::to_string(request.generate);
  record["input_tokens"] = std::to_string(request.input_length);
  record["cut"] = run.cut_note;
  record["layers"] = layers.empty() ? std::string("all") : join_layer_list(layers);
  record["logits"] = arguments.has("no-logits") ? "no" : "yes";
  if (request.options.matmul != model::MatmulMode::exact) record["matmul"] = "llama.cpp";
  if (ends_with(out, ".npz")) arrays.emplace_back(run_options_array, io::run_options_as_array(record));
  io::write_capture_file(out, arrays, record,
                         arguments.has("compress") ? io::Compression::deflated : io::Compression::stored,
                         temporary_files());
  std::cerr << "attnscope: wrote " << arrays.size() << " arrays to " << out << " in " << milliseconds_since(write_start)
            << " ms\n";
  return 0;
}

}  // namespace

const Command& capture_command() {
  static const Command command{
      "capture", "run a model (HF folder, GGUF or llama2.c) and write q, k, v, scores, attention, logits (NPZ/safetensors)",
      capture_usage(), command_capture};
  return command;
}

}  // namespace attnscope::cli
