// tools/cli_model.hpp — running a model for `capture` and `report`: the token options, the forward pass with
// capture and the stacking of per-head matrices into [heads, rows, cols] arrays.
#pragma once

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "attnscope/io/array.hpp"
#include "attnscope/model/llama.hpp"
#include "attnscope/normalize/maps.hpp"
#include "cli_common.hpp"
#include "cli_progress.hpp"

namespace attnscope::cli {

struct CaptureRequest {
  std::string checkpoint;
  std::vector<int> tokens{1};
  int generate = 0;
  model::ForwardOptions options;
};

inline void add_model_options(Arguments& arguments) {
  arguments.value_option("tokens").value_option("tokens-file").value_option("generate").value_option("map");
}

inline CaptureRequest model_request(const Arguments& arguments, const std::string& checkpoint, int default_generate) {
  CaptureRequest request;
  request.checkpoint = checkpoint;
  if (arguments.has("tokens") && arguments.has("tokens-file"))
    throw usage_error("give either --tokens or --tokens-file, not both");
  const bool explicit_tokens = arguments.has("tokens") || arguments.has("tokens-file");
  if (arguments.has("tokens")) request.tokens = parse_token_list(arguments.get("tokens"), "--tokens");
  if (arguments.has("tokens-file"))
    request.tokens = parse_token_list(read_text_file(arguments.get("tokens-file")), "--tokens-file");
  request.generate = arguments.has("generate")
                         ? static_cast<int>(parse_integer(arguments.get("generate"), "--generate", 0, 1 << 20))
                         : (explicit_tokens ? 0 : default_generate);
  if (arguments.has("map")) request.options.map = parse_normalization_map(arguments.get("map"));
  return request;
}

struct CaptureRun {
  model::ForwardResult result;
  std::vector<int> tokens;
  io::LlamaConfig config;
};

inline CaptureRun run_capture(const CaptureRequest& request, const model::CaptureOptions& capture) {
  const auto start = std::chrono::steady_clock::now();
  const model::LlamaModel llama = model::LlamaModel::load(request.checkpoint);
  const double load_ms = milliseconds_since(start);
  CaptureRun run;
  run.config = llama.config();
  run.tokens = request.tokens;
  double generate_ms = 0;
  if (request.generate > 0) {
    ProgressBar bar("generate");
    const auto generate_start = std::chrono::steady_clock::now();
    run.tokens = llama.generate_greedy(request.tokens, request.generate, request.options, bar.callback());
    generate_ms = milliseconds_since(generate_start);
  }
  model::ForwardOptions options = request.options;
  options.capture = capture;
  const auto forward_start = std::chrono::steady_clock::now();
  run.result = llama.forward(run.tokens, options);
  const double forward_ms = milliseconds_since(forward_start);
  std::cerr << "attnscope: " << run.tokens.size() << " tokens, " << run.config.n_layers << " layers x "
            << run.config.n_heads << " heads; load " << load_ms << " ms, generate " << request.generate
            << " tokens " << generate_ms << " ms, forward with capture " << forward_ms << " ms\n";
  return run;
}

/// Stacks per-head matrices (all the same shape) into one float32 array [heads, rows, cols].
inline io::Array stack_heads(const std::vector<RowMatrix<float>>& heads) {
  const Index rows = heads.at(0).rows(), cols = heads.at(0).cols();
  std::vector<float> values;
  values.reserve(static_cast<std::size_t>(heads.size() * rows * cols));
  for (const auto& head : heads) values.insert(values.end(), head.data(), head.data() + head.size());
  return io::Array::from_vector(values, {static_cast<std::int64_t>(heads.size()), rows, cols});
}

}  // namespace attnscope::cli
