// tools/command_generate.cpp — `attnscope generate`: decoding with the key/value cache (greedy, or temperature
// sampling with a seed), the text printed to stdout as it is generated, and with --stats the exact row statistics of
// every generation step's query row per selected (layer, head) (Transformer::generate_with_statistics), the sink rate
// of the heads and, with --needle, their retrieval score. Documented in docs/cli.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/analysis/sink_rate.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/detect_format.hpp"
#include "attnscope/io/gguf.hpp"
#include "cli_model.hpp"
#include "cli_output.hpp"
#include "cli_provenance.hpp"
#include "cli_selection.hpp"
#include "commands.hpp"
#include "run_options.hpp"

namespace attnscope::cli {
namespace {

const char* generate_usage() {
  static const std::string usage =
      R"(usage: attnscope generate --model PATH
                         (--tokens LIST | --tokens-file FILE | --text STRING | --text-file FILE) --steps N
                         [--temperature T --seed S] [--stop-at-eos] [--eos-token LIST] [--stats OUT.npz]
                         [--layers LIST] [--heads LIST] [--sink-keys LIST] [--top-k LIST] [--exclude-sinks]
                         [--no-jacobian] [--needle START:END] [--sink-rate-queries T] [--sink-threshold LIST]
                         [--from TEXT] [--skip-tokens N] [--max-tokens N] [--special-tokens] [--add-special-tokens]
                         [--matmul exact|llama.cpp] [--threads N]

Generates N tokens after the prompt with the model's key/value cache (each step runs one row: O(layers·L·dim), the
prompt is never recomputed): greedy (argmax) by default, or sampling from softmax(logits / T) with the seed S. The
text goes to stdout as it is generated: the prompt, then each new token (decoded by the model's tokenizer; token ids
for a llama2.c checkpoint, which carries none). Timings go to stderr.

Step s is the step that picks token P + s (P = the prompt's length) from query row P - 1 + s. With --stats, per
selected layer and head the statistics `rowstats --model` computes, of each step's query row, with the same names
and options: layer{l}.entropy, sink_mass, max_weight, max_scaled_logit, log_partition, jacobian_norm, top{k}_mass
(and learned_sink, entropy_with_sink, content_mass for a model with learned sinks), each float64 [heads, steps],
layer{l}.heads (the head of each row), layer{l}.most_attended_key (int64 [heads, steps]: the key each step's row
attends most), layer{l}.sink_score (float64 [heads]: the head's sink score, the mean attention on key 0 of the first
T query rows of the sequence, Gu et al. 2024), with --needle layer{l}.retrieval_score (float64 [heads]: 1/(END -
START) per step whose most attended key lies in the needle and holds the generated token, Wu et al. 2024), and
tokens (int64, prompt then generated), prompt_length (int64 scalar), sink_rate_thresholds and sink_rate_fraction
(float64: per threshold, the fraction of the selected heads whose sink score exceeds it), run_options.

Options:
  --steps N              tokens to generate (>= 0; prompt + N must fit the model's seq_len)
  --temperature T        sample from softmax(logits / T) (default 0: greedy)
  --seed S               the sampler's seed (default 0; needs --temperature)
  --stop-at-eos          stop after the model's end-of-sequence token (config.json / generation_config.json
                         eos_token_id, the GGUF's tokenizer.ggml.eos_token_id, 1 for a llama2.c checkpoint as run.c)
  --eos-token LIST       the end-of-sequence tokens of --stop-at-eos instead of the model's
  --stats FILE           the per-step statistics (.npz)
  --layers LIST          layers to analyse (default: all)
  --heads LIST           heads to analyse (default: all)
  --sink-keys LIST       keys whose weight is the sink mass (default: 0)
  --top-k LIST           the k of the top-k statistics, the k keys of largest weight in a row: one top{k}_mass
                         array per k (default: 1,8,64)
  --exclude-sinks        max_weight is the largest weight over the keys that are not sink keys
  --no-jacobian          skip the exact Jacobian norm
  --needle START:END     a span of prompt positions [START, END): the heads' retrieval score
  --sink-rate-queries T  the first T query rows of the sink rate (default 64)
  --sink-threshold LIST  the thresholds of the sink rate (default 0.2,0.3,0.4,0.5)
  --threads N            OpenMP threads (default 1; 0 = OpenMP default)
)" + std::string(model_input_usage) + std::string(input_window_usage) + std::string(matmul_usage) + R"(  --help                 this text
)";
  return usage.c_str();
}

/// A number of an option, finite and >= 0.
double parse_non_negative(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < 0)
    throw usage_error(option + ": expected a finite number >= 0, got '" + text + "'");
  return value;
}

/// The needle START:END of --needle.
std::pair<Index, Index> needle_argument(const std::string& text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) throw usage_error("--needle: expected START:END, got '" + text + "'");
  const Index start = parse_integer(text.substr(0, colon), "--needle START", 0, 1L << 40);
  const Index end = parse_integer(text.substr(colon + 1), "--needle END", 0, 1L << 40);
  if (end <= start) throw usage_error("--needle: END must be greater than START, got '" + text + "'");
  return {start, end};
}

/// The eos_token_id (a number or a list) of a Hugging Face folder's generation_config.json, else config.json.
std::vector<int> folder_eos_tokens(const std::string& folder) {
  for (const char* name : {"generation_config.json", "config.json"}) {
    const std::filesystem::path path = std::filesystem::path(folder) / name;
    if (!std::filesystem::is_regular_file(path)) continue;
    std::ifstream in(path);
    const nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
    if (json.is_discarded() || !json.is_object() || !json.contains("eos_token_id")) continue;
    const nlohmann::json& eos = json.at("eos_token_id");
    std::vector<int> tokens;
    if (eos.is_number_integer()) tokens.push_back(eos.get<int>());
    if (eos.is_array())
      for (const auto& item : eos)
        if (item.is_number_integer()) tokens.push_back(item.get<int>());
    if (!tokens.empty()) return tokens;
  }
  return {};
}

/// The end-of-sequence tokens of --stop-at-eos: --eos-token, else the model's (a data error naming the model when it
/// states none).
std::vector<int> eos_tokens_argument(const Arguments& arguments, const std::string& model_path) {
  if (arguments.has("eos-token")) return parse_token_list(arguments.get("eos-token"), "--eos-token");
  std::vector<int> tokens;
  if (std::filesystem::is_directory(model_path)) {
    tokens = folder_eos_tokens(model_path);
  } else if (io::detect_file_format(model_path) == io::FileFormat::gguf) {
    const io::GgufFile file(model_path);
    if (file.has("tokenizer.ggml.eos_token_id"))
      tokens.push_back(static_cast<int>(file.integer("tokenizer.ggml.eos_token_id")));
  } else {
    tokens.push_back(1);  // llama2.c run.c: the BOS token 1 delimits sequences
  }
  if (tokens.empty())
    attnscope::detail::throw_invalid_argument("generate", model_path, " states no end-of-sequence token ",
                                              "(eos_token_id); give it with --eos-token");
  return tokens;
}

/// Prints the text as it grows: the decoding of every token so far, of which the part not yet printed (a model
/// without a tokenizer: the ids).
class TextPrinter {
 public:
  TextPrinter(const std::string& model_path, std::vector<int> prompt) : tokens_(std::move(prompt)) {
    const bool tokenizer = std::filesystem::is_directory(model_path) ||
                           io::detect_file_format(model_path) == io::FileFormat::gguf;
    if (tokenizer) tokenizer_.emplace(folder_tokenizer(model_path));
    if (tokenizer_) {
      printed_ = tokenizer_->decode(tokens_);
      std::fputs(printed_.c_str(), stdout);
    } else {
      for (std::size_t i = 0; i < tokens_.size(); ++i) std::printf(i ? " %d" : "%d", tokens_[i]);
    }
    std::fflush(stdout);
  }

  void add(int token) {
    tokens_.push_back(token);
    if (!tokenizer_) {
      std::printf(" %d", token);
    } else {
      // a token may end inside a UTF-8 character: print once the text so far extends what is printed
      const std::string text = tokenizer_->decode(tokens_);
      if (text.compare(0, printed_.size(), printed_) == 0) {
        std::fputs(text.c_str() + printed_.size(), stdout);
        printed_ = text;
      }
    }
    std::fflush(stdout);
  }

  void finish() {
    if (tokenizer_) {
      const std::string text = tokenizer_->decode(tokens_);
      if (text.compare(0, printed_.size(), printed_) == 0) std::fputs(text.c_str() + printed_.size(), stdout);
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
  }

 private:
  std::vector<int> tokens_;
  std::optional<text::ByteLevelBpeTokenizer> tokenizer_;
  std::string printed_;
};

/// The step statistics of one layer's selected heads as rowstats names them: [heads, steps] float64 columns.
void add_layer_statistics(io::NamedArrays& arrays, Index layer, const std::vector<Index>& heads,
                          const std::vector<stream::RowStatistics>& statistics, const stream::RowStatisticsOptions& options,
                          bool learned_sinks, Index steps) {
  std::vector<std::string> names = {"entropy", "sink_mass", "max_weight", "max_scaled_logit", "log_partition"};
  if (options.jacobian_norm) names.push_back("jacobian_norm");
  for (const Index k : options.top_k) names.push_back("top" + std::to_string(k) + "_mass");
  if (learned_sinks) names.insert(names.end(), {"learned_sink", "entropy_with_sink", "content_mass"});
  std::vector<std::vector<double>> columns(names.size());
  for (const Index head : heads) {
    const stream::RowStatistics& s = statistics[std::size_t(head)];
    std::vector<Vector<double>> per_row = {s.entropy, s.sink_mass, s.max_weight, s.max_scaled_logit, s.log_partition};
    if (options.jacobian_norm) per_row.push_back(s.jacobian_norm);
    for (Index c = 0; c < s.top_k_mass.cols(); ++c) per_row.push_back(s.top_k_mass.col(c));
    if (learned_sinks)
      per_row.insert(per_row.end(), {s.learned_sink, s.entropy_with_sink,
                                     (1.0 - s.learned_sink.array() - s.sink_mass.array()).matrix()});
    for (std::size_t c = 0; c < names.size(); ++c)
      for (Index i = 0; i < steps; ++i) columns[c].push_back(per_row[c](i));
  }
  const std::int64_t rows = static_cast<std::int64_t>(heads.size());
  for (std::size_t c = 0; c < names.size(); ++c)
    arrays.emplace_back(io::layer_array_name(layer, names[c]), io::Array::from_vector(columns[c], {rows, steps}));
}

int command_generate(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("model").value_option("checkpoint").value_option("tokens").value_option("tokens-file")
      .value_option("text").value_option("text-file").value_option("max-tokens").flag("special-tokens")
      .flag("add-special-tokens").value_option("matmul");
  add_input_window_options(arguments);
  arguments.value_option("steps").value_option("temperature").value_option("seed").flag("stop-at-eos")
      .value_option("eos-token").value_option("stats").value_option("layers").value_option("heads")
      .value_option("sink-keys").value_option("top-k").flag("exclude-sinks").flag("no-jacobian")
      .value_option("needle").value_option("sink-rate-queries").value_option("sink-threshold");
  if (parse_subcommand(arguments, argc, argv, generate_usage())) return 0;
  require_no_positional(arguments);
  if (!arguments.has("model") && !arguments.has("checkpoint")) throw usage_error("give the model with --model PATH");
  const int steps = static_cast<int>(parse_integer(arguments.require("steps"), "--steps", 0, 1 << 30));
  if (arguments.has("seed") && !arguments.has("temperature")) throw usage_error("--seed needs --temperature");
  if (arguments.has("eos-token") && !arguments.has("stop-at-eos")) throw usage_error("--eos-token needs --stop-at-eos");
  const bool statistics = arguments.has("stats");
  for (const char* name : {"layers", "heads", "sink-keys", "top-k", "exclude-sinks", "no-jacobian", "needle",
                           "sink-rate-queries", "sink-threshold"})
    if (arguments.has(name) && !statistics) throw usage_error(std::string("--") + name + " needs --stats");
  if (statistics && steps == 0) throw usage_error("--stats needs --steps >= 1 (the statistics are of the steps)");
  if (statistics && !ends_with(arguments.get("stats"), ".npz"))
    throw usage_error("--stats must end in .npz: " + arguments.get("stats"));
  check_output_options(arguments, {"stats"});
  model::GenerationOptions generation;
  if (arguments.has("temperature")) generation.temperature = parse_non_negative(arguments.get("temperature"), "--temperature");
  if (arguments.has("seed"))
    generation.seed = static_cast<std::uint64_t>(parse_integer(arguments.get("seed"), "--seed", 0, 1L << 62));
  generation.first_key_queries = arguments.has("sink-rate-queries")
                                     ? parse_integer(arguments.get("sink-rate-queries"), "--sink-rate-queries", 1, 1L << 40)
                                     : analysis::default_sink_rate_queries;
  const std::vector<double> thresholds = arguments.has("sink-threshold")
                                             ? parse_number_list(arguments.get("sink-threshold"), "--sink-threshold")
                                             : analysis::default_sink_rate_thresholds();
  std::optional<std::pair<Index, Index>> needle;
  if (arguments.has("needle")) needle = needle_argument(arguments.get("needle"));
  model::StreamingOptions streaming;
  streaming.statistics.top_k = top_k_argument(arguments, "1,8,64");
  streaming.statistics.sink_keys = parse_index_list(arguments.get("sink-keys", "0"), "--sink-keys");
  streaming.statistics.max_weight_excludes_sinks = arguments.has("exclude-sinks");
  streaming.statistics.jacobian_norm = !arguments.has("no-jacobian");
  const std::vector<Index> layer_selection = index_selection_argument(arguments, "layers");
  const std::vector<Index> head_selection = index_selection_argument(arguments, "heads");

  const std::string model_path = model_path_argument(arguments);
  const CaptureRequest request = model_request(arguments, model_path, 0);
  const std::vector<int>& prompt = request.tokens;
  const auto load_start = std::chrono::steady_clock::now();
  const model::Transformer transformer = model::load_model(model_path);
  const double load_ms = milliseconds_since(load_start);
  const auto& config = transformer.config();
  const Index prompt_length = static_cast<Index>(prompt.size());
  if (prompt_length + steps > config.seq_len)
    attnscope::detail::throw_invalid_argument("generate", "the prompt's ", prompt_length, " tokens + --steps ", steps,
                                              " exceed the model's seq_len ", config.seq_len,
                                              "; generate fewer steps or cut the prompt with --max-tokens");
  for (std::size_t p = 0; p < prompt.size(); ++p)  // before the prompt is printed
    if (prompt[p] < 0 || prompt[p] >= config.vocab_size)
      attnscope::detail::throw_invalid_argument("generate", "token ", prompt[p], " at position ", p,
                                                " outside [0, vocab_size = ", config.vocab_size, ")");
  if (needle && needle->second > prompt_length)
    attnscope::detail::throw_invalid_argument("generate", "--needle ", needle->first, ":", needle->second,
                                              " is not inside the prompt's ", prompt_length, " positions [0, ",
                                              prompt_length, ")");
  for (const Index key : streaming.statistics.sink_keys)
    if (key >= prompt_length)
      attnscope::detail::throw_invalid_argument("generate", "--sink-keys names key ", key, ", past the prompt's ",
                                                prompt_length, " positions");
  std::vector<Index> layers = layer_selection, heads = head_selection;
  check_layer_head_selection("generate", layers, heads, config.n_layers, config.n_heads);
  if (layers.empty())
    for (Index l = 0; l < config.n_layers; ++l) layers.push_back(l);
  if (heads.empty())
    for (Index h = 0; h < config.n_heads; ++h) heads.push_back(h);
  if (statistics)
    for (const Index l : layers)
      for (const Index h : heads) streaming.heads.emplace(static_cast<int>(l), static_cast<int>(h));
  else
    streaming.heads.emplace(0, 0);  // the text only: one head's statistics, never written
  if (arguments.has("stop-at-eos")) generation.stop_tokens = eos_tokens_argument(arguments, model_path);

  TextPrinter printer(model_path, prompt);
  generation.on_token = [&printer](int token) { printer.add(token); };
  model::ForwardOptions options;
  options.matmul = request.options.matmul;
  const auto start = std::chrono::steady_clock::now();
  model::GenerationResult result = transformer.generate_with_statistics(prompt, steps, generation, streaming, options);
  const double generate_ms = milliseconds_since(start);
  printer.finish();
  std::cerr << "attnscope: " << config.architecture << ", prompt " << prompt_length << " tokens, generated "
            << result.steps << " tokens; load " << load_ms << " ms, generate " << generate_ms << " ms ("
            << (generate_ms > 0 ? 1000.0 * double(result.steps) / generate_ms : 0.0) << " tokens/s)\n";
  if (!statistics) return 0;

  io::NamedArrays arrays;
  std::vector<double> head_scores;
  for (const Index l : layers) {
    const auto& layer_statistics = result.step_statistics[std::size_t(l)];
    add_layer_statistics(arrays, l, heads, layer_statistics, streaming.statistics, config.learned_sinks, result.steps);
    std::vector<std::int32_t> head_ids;
    std::vector<std::int64_t> attended;
    std::vector<double> sink_scores, retrieval;
    for (const Index h : heads) {
      head_ids.push_back(static_cast<std::int32_t>(h));
      const auto& keys = result.most_attended_key[std::size_t(l)][std::size_t(h)];
      for (Index s = 0; s < result.steps; ++s) attended.push_back(static_cast<std::int64_t>(keys(s)));
      const Vector<double>& first_key = result.first_key_attention[std::size_t(l)][std::size_t(h)];
      sink_scores.push_back(first_key.size() > 0 ? analysis::sink_score(first_key, generation.first_key_queries) : 0);
      if (needle)
        retrieval.push_back(analysis::retrieval_score(keys, result.tokens, prompt_length, needle->first, needle->second));
    }
    head_scores.insert(head_scores.end(), sink_scores.begin(), sink_scores.end());
    const std::int64_t rows = static_cast<std::int64_t>(heads.size());
    arrays.emplace_back(io::layer_array_name(l, "heads"), io::Array::from_vector(head_ids, {rows}));
    arrays.emplace_back(io::layer_array_name(l, "most_attended_key"),
                        io::Array::from_vector(attended, {rows, std::int64_t(result.steps)}));
    arrays.emplace_back(io::layer_array_name(l, "sink_score"), io::Array::from_vector(sink_scores, {rows}));
    if (needle) arrays.emplace_back(io::layer_array_name(l, "retrieval_score"), io::Array::from_vector(retrieval, {rows}));
  }
  const analysis::SinkRate rate = analysis::sink_rate(head_scores, thresholds);
  const std::int64_t threshold_count = static_cast<std::int64_t>(thresholds.size());
  arrays.emplace_back("sink_rate_thresholds", io::Array::from_vector(rate.thresholds, {threshold_count}));
  arrays.emplace_back("sink_rate_fraction", io::Array::from_vector(rate.fraction, {threshold_count}));
  const std::vector<std::int64_t> all_tokens(result.tokens.begin(), result.tokens.end());
  arrays.emplace_back("tokens", io::Array::from_vector(all_tokens, {std::int64_t(all_tokens.size())}));
  arrays.emplace_back("prompt_length", io::Array::from_vector(std::vector<std::int64_t>{prompt_length}, {}));
  std::cerr << "attnscope: sink rate of " << rate.heads << " heads (T = " << generation.first_key_queries << "):";
  for (std::size_t t = 0; t < thresholds.size(); ++t)
    std::cerr << " " << rate.fraction[t] << " above " << thresholds[t] << (t + 1 < thresholds.size() ? "," : "\n");
  // the record (io/run_options.hpp): the model, the prompt's source, the ids of the prompt and the generated tokens
  RunOptions run = command_record("generate");
  record_model(run, model_path, config.architecture);
  record_model_input(run, arguments, result.tokens);
  run["prompt_tokens"] = std::to_string(prompt_length);
  run["prompt_crc32"] = tokens_crc32(prompt);
  run["steps"] = std::to_string(result.steps);
  run["temperature"] = arguments.get("temperature", "0");
  run["seed"] = std::to_string(generation.seed);
  run["sink_keys"] = join_integers(streaming.statistics.sink_keys);
  run["top_k"] = join_integers(streaming.statistics.top_k);
  run["exclude_sinks"] = streaming.statistics.max_weight_excludes_sinks ? "true" : "false";
  run["jacobian_norm"] = streaming.statistics.jacobian_norm ? "true" : "false";
  run["sink_rate_queries"] = std::to_string(generation.first_key_queries);
  if (needle) run["needle"] = std::to_string(needle->first) + ":" + std::to_string(needle->second);
  if (request.options.matmul != model::MatmulMode::exact) run["matmul"] = "llama.cpp";
  const std::size_t count = arrays.size();
  write_arrays_with_run_options(arguments.get("stats"), std::move(arrays), run);
  std::cerr << "attnscope: wrote " << count << " arrays to " << arguments.get("stats") << "\n";
  return 0;
}

}  // namespace

const Command& generate_command() {
  static const Command command{"generate",
                               "generate with the KV cache; per-step attention statistics, sink rate, retrieval score",
                               generate_usage(), command_generate};
  return command;
}

}  // namespace attnscope::cli
