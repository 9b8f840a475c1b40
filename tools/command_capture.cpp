// tools/command_capture.cpp — `attnscope capture`: run a model (llama2.c checkpoint or Hugging Face folder) over
// tokens or text and write q, k, v, scores, attention and logits per layer and head in the library's capture layout
// (io/capture_layout.hpp; NPZ or safetensors).
// Documented in docs/cli.md.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "attnscope/analysis/capture.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "cli_model.hpp"
#include "commands.hpp"
#include "input_format.hpp"

namespace attnscope::cli {
namespace {

const char* capture_usage() {
  static const std::string usage =
      R"(usage: attnscope capture (--model DIR | --checkpoint FILE)
                         [--tokens 1,2,3 | --tokens-file FILE | --text STRING | --text-file FILE]
                         [--max-tokens N] [--special-tokens] [--add-special-tokens] [--generate N] [--map NAME[:PARAM]] [--compress]
                         --out FILE.npz|FILE.safetensors

Runs the model over the tokens (default for a llama2.c checkpoint: BOS = 1), after first decoding N greedy tokens
when --generate N is given, and writes the capture layout: )" +
      io::capture_layout_description() + R"(.

Options:
  --model DIR         Hugging Face model folder: config.json, model.safetensors (or index + shards) and the
                      tokenizer (tokenizer.json, tokenizer.model, or vocab.json + merges.txt); model_type as in
                      docs/models.md
  --checkpoint FILE   llama2.c checkpoint (version 0, 1 or 2; recognised by its header, not its extension)
  --tokens LIST       token ids separated by commas or spaces
  --tokens-file FILE  token ids separated by commas, spaces or newlines
  --text STRING       text, encoded by the model folder's tokenizer
  --text-file FILE    text file (UTF-8), encoded by the model folder's tokenizer
  --special-tokens    special tokens written in the text (e.g. <|endoftext|>) become their ids (default: text)
  --add-special-tokens  add the tokenizer's post-processor tokens (e.g. BOS <s>; default: none)
  --max-tokens N      keep the first N input tokens; without it, input longer than the model's positions is an error
  --generate N        first append N greedy tokens (uses the --map too)
  --map NAME          attention normalization: softmax (default), temperature:T, ssmax:S, sparsemax, entmax15,
                      entmax:ALPHA, sa_softmax, sa_softmax_normalized, sink, sink:LOGIT
  --compress          deflate NPZ members (smaller, slower); default: stored
  --out FILE          output; .npz or .safetensors decides the format
  --threads N         OpenMP threads (default 1; 0 = OpenMP default)
  --help              this text
)";
  return usage.c_str();
}

int command_capture(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("model").value_option("checkpoint").value_option("out", "-o").flag("compress");
  add_model_options(arguments);
  if (parse_subcommand(arguments, argc, argv, capture_usage())) return 0;
  require_no_positional(arguments);
  const std::string out = arguments.require("out");
  if (!ends_with(out, ".safetensors") && !ends_with(out, ".npz")) throw usage_error("--out must end in .npz or .safetensors: " + out);
  const std::string model_path = model_path_argument(arguments);
  require_input_format("capture", model_path, {io::FileFormat::llama2c, io::FileFormat::huggingface_folder},
                       "a model (a llama2.c checkpoint or a Hugging Face model folder with config.json)");
  const CaptureRequest request = model_request(arguments, model_path, 0);

  model::CaptureOptions capture;
  capture.q = capture.k = capture.v = capture.scores = capture.attention = true;
  const CaptureRun run = run_capture(request, capture);

  const auto write_start = std::chrono::steady_clock::now();
  const io::NamedArrays arrays = analysis::capture_arrays(run.result, run.tokens);
  io::write_capture_file(out, arrays,
                         {{"model", request.model_path},
                          {"architecture", run.architecture},
                          {"map", request.options.map ? attnscope::to_string(*request.options.map) : "softmax"},
                          {"generated", std::to_string(request.generate)},
                          {"input_tokens", std::to_string(request.input_length)},
                          {"cut", run.cut_note}},
                         arguments.has("compress") ? io::Compression::deflated : io::Compression::stored);
  std::cerr << "attnscope: wrote " << arrays.size() << " arrays to " << out << " in " << milliseconds_since(write_start)
            << " ms\n";
  return 0;
}

}  // namespace

const Command& capture_command() {
  static const Command command{
      "capture", "run a model (HF folder or llama2.c) and write q, k, v, scores, attention and logits (NPZ/safetensors)",
      capture_usage(), command_capture};
  return command;
}

}  // namespace attnscope::cli
