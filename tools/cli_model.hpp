// tools/cli_model.hpp — running a model for the commands that name one (`capture`, `report`, `rowstats`, `compare`,
// `kvsim`, `generate`, `tokenize`): the model of --model PATH (a Hugging Face folder, a GGUF file or a llama2.c
// checkpoint, told apart by content), where the tokens come from (ids, or text through the model's tokenizer; a file
// or stdin), the --max-tokens cut and the forward pass with capture.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/text.hpp"
#include "attnscope/text/gguf_tokenizer.hpp"
#include "cli_common.hpp"
#include "cli_progress.hpp"
#include "input_format.hpp"

namespace attnscope::cli {

/// --from TEXT (the text starts at the first occurrence of TEXT) and --skip-tokens N (the first N input tokens are
/// dropped): where the analysed part of a text begins, e.g. after a licence header. Every command with a text input.
inline void add_input_window_options(Arguments& arguments) { arguments.value_option("from").value_option("skip-tokens"); }

/// The usage lines of add_input_window_options.
inline constexpr const char* input_window_usage =
    "  --from TEXT         start the text at the first occurrence of TEXT (an error when it does not occur)\n"
    "  --skip-tokens N     drop the first N input tokens (after --from; before --max-tokens)\n";

/// The usage lines of the model and its input, shared by the commands that run a model.
inline constexpr const char* model_input_usage =
    "  --model PATH        the model, told apart by its content: a Hugging Face model folder (config.json,\n"
    "                      *.safetensors, the tokenizer; model_type as in docs/models.md), a GGUF file (llama.cpp's\n"
    "                      format, quantized or not; its stored tokenizer encodes --text) or a llama2.c checkpoint\n"
    "                      (token ids only)\n"
    "  --checkpoint FILE   alias of --model\n"
    "  --tokens LIST       token ids separated by commas or spaces\n"
    "  --tokens-file FILE  token ids separated by commas, spaces or newlines (- reads stdin)\n"
    "  --text STRING       text, encoded by the model's tokenizer\n"
    "  --text-file FILE    UTF-8 text, encoded by the model's tokenizer (- reads stdin)\n"
    "  --special-tokens    special tokens written in the text (e.g. <|endoftext|>) become their ids (default: text)\n"
    "  --add-special-tokens  add the tokenizer's post-processor tokens (e.g. BOS <s>; default: none)\n"
    "  --max-tokens N      keep the first N input tokens; without it, input longer than the model's positions is an\n"
    "                      error\n";

/// The contents of an input file, or of stdin for "-". Stdin can be read once per process, so its contents are kept
/// for a second read (compare encodes one text with two tokenizers).
inline std::string read_input_file(const std::string& path) {
  if (path != "-") return read_text_file(path);
  static const std::string stdin_contents(std::istreambuf_iterator<char>(std::cin), {});
  return stdin_contents;
}

/// How messages name an input file: its path, or "stdin" for "-".
inline std::string input_file_name(const std::string& path) { return path == "-" ? std::string("stdin") : path; }

/// The token and map options shared by capture and report (the model itself is --model or --checkpoint).
inline void add_model_options(Arguments& arguments) {
  arguments.value_option("tokens").value_option("tokens-file").value_option("text").value_option("text-file");
  arguments.value_option("generate").value_option("map").value_option("max-tokens").flag("special-tokens");
  arguments.flag("add-special-tokens").value_option("matmul");
  add_input_window_options(arguments);
}

/// The usage line of --matmul (capture, report, rowstats --model).
inline constexpr const char* matmul_usage =
    "  --matmul MODE       how GGUF block-quantized weights are multiplied: exact (default: float32 activations times\n"
    "                      the dequantized weights) or llama.cpp (activations rounded to 8 bits per block and integer\n"
    "                      dot products, as llama.cpp's CPU backend; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K to Q6_K,\n"
    "                      IQ4_NL, IQ4_XS, MXFP4; other types exact)\n";

/// The mode of --matmul exact|llama.cpp, or of the option `name` (exact when absent).
inline model::MatmulMode matmul_argument(const Arguments& arguments, const std::string& name = "matmul") {
  const std::string mode = arguments.get(name, "exact");
  if (mode == "exact") return model::MatmulMode::exact;
  if (mode == "llama.cpp") return model::MatmulMode::llama_cpp;
  throw usage_error("--" + name + ": expected exact or llama.cpp, got '" + mode + "'");
}

/// True when any option of add_model_options was given.
inline bool has_model_options(const Arguments& arguments) {
  for (const char* name : {"tokens", "tokens-file", "text", "text-file", "generate", "map", "max-tokens",
                           "special-tokens", "add-special-tokens", "from", "skip-tokens", "matmul"})
    if (arguments.has(name)) return true;
  return false;
}

/// The text of --text or --text-file (exactly one must be given), from the first occurrence of --from TEXT when
/// given (a data error naming the file when it does not occur).
inline std::string text_argument(const Arguments& arguments) {
  if (arguments.has("text") == arguments.has("text-file")) throw usage_error("give exactly one of --text, --text-file");
  std::string text = arguments.has("text") ? arguments.get("text") : read_input_file(arguments.get("text-file"));
  if (arguments.has("from")) {
    const std::string marker = arguments.get("from");
    if (marker.empty()) throw usage_error("--from: expected a non-empty text");
    const std::size_t at = text.find(marker);
    if (at == std::string::npos)
      attnscope::detail::throw_io_error("from",
                                        arguments.has("text-file") ? input_file_name(arguments.get("text-file"))
                                                                   : std::string("--text"),
                                        "does not contain the --from text '", marker, "'");
    text.erase(0, at);
  }
  return text;
}

/// Drops the first --skip-tokens N tokens (a data error when none would be left).
inline void skip_tokens_argument(const Arguments& arguments, std::vector<int>& tokens) {
  if (!arguments.has("skip-tokens")) return;
  const long skip = parse_integer(arguments.get("skip-tokens"), "--skip-tokens", 0, 1L << 40);
  if (static_cast<std::size_t>(skip) >= tokens.size())
    attnscope::detail::throw_invalid_argument("skip-tokens", "the input has ", tokens.size(), " tokens; --skip-tokens ",
                                              skip, " leaves none");
  tokens.erase(tokens.begin(), tokens.begin() + skip);
}

/// The tokenizer of a model: a GGUF file's (its tokenizer.ggml.* metadata), else a Hugging Face model folder's
/// (tokenizer.json, tokenizer.model, or vocab.json + merges.txt).
inline text::ByteLevelBpeTokenizer folder_tokenizer(const std::string& folder) {
  if (std::filesystem::is_regular_file(folder) && io::detect_file_format(folder) == io::FileFormat::gguf)
    return text::gguf_tokenizer(folder);
  return text::ByteLevelBpeTokenizer::from_folder(folder);
}

/// Encodes text with the folder's tokenizer; --special-tokens lets special tokens such as <|endoftext|> in the
/// text become their ids (by default they are ordinary text); --add-special-tokens adds what the tokenizer's
/// post-processor adds (Llama-2's and Mistral's BOS <s>). Both: Hugging Face's default tokenizer(text).
inline std::vector<int> encode_text(const std::string& folder, const std::string& utf8_text, const Arguments& arguments) {
  text::EncodeOptions options;
  options.parse_special_tokens = arguments.has("special-tokens");
  options.add_special_tokens = arguments.has("add-special-tokens");
  return folder_tokenizer(folder).encode(utf8_text, options);
}

/// encode_text of the --text / --text-file input; an encoding error (invalid UTF-8 at a byte offset) names where
/// the text came from: the file of --text-file, or "--text".
inline std::vector<int> encode_text_argument(const Arguments& arguments, const std::string& folder) {
  const std::string utf8_text = text_argument(arguments);
  const text::ByteLevelBpeTokenizer tokenizer = folder_tokenizer(folder);  // tokenizer file errors name their file
  text::EncodeOptions options;
  options.parse_special_tokens = arguments.has("special-tokens");
  options.add_special_tokens = arguments.has("add-special-tokens");
  try {
    return tokenizer.encode(utf8_text, options);
  } catch (const attnscope::invalid_argument& error) {
    const std::string source = arguments.has("text-file") ? input_file_name(arguments.get("text-file")) : "--text";
    attnscope::detail::throw_io_error("encode", source, "cannot be encoded: ", error.what());
  }
}

/// Token ids of --tokens (a usage error when malformed) or of the file of --tokens-file (a data error naming it).
inline std::vector<int> token_ids_argument(const Arguments& arguments) {
  if (arguments.has("tokens")) return parse_token_list(arguments.get("tokens"), "--tokens");
  const std::string path = arguments.get("tokens-file");
  try {
    return parse_token_list(read_input_file(path), "--tokens-file");
  } catch (const usage_error& error) {
    attnscope::detail::throw_io_error("tokens-file", input_file_name(path), "is not a list of token ids: ",
                                      error.what());
  }
}

/// The normalization map of --map; a name that is not a map is a usage error.
inline NormalizationMap map_argument(const Arguments& arguments) {
  try {
    return parse_normalization_map(arguments.get("map"));
  } catch (const attnscope::invalid_argument& error) {
    throw usage_error(std::string("--map: ") + error.what());
  }
}

struct CaptureRequest {
  std::string model_path;         // a llama2.c checkpoint file or a Hugging Face model folder
  std::vector<int> tokens{1};     // input tokens (default: llama2.c BOS)
  std::size_t input_length = 1;   // tokens before the --max-tokens cut
  std::optional<long> max_tokens;  // --max-tokens
  int generate = 0;
  model::ForwardOptions options;
};

/// Reads the token options. `default_generate` applies when no tokens or text are given (llama2.c checkpoints
/// start from BOS = 1 then); a model folder needs tokens or text.
inline CaptureRequest model_request(const Arguments& arguments, const std::string& model_path, int default_generate) {
  CaptureRequest request;
  request.model_path = model_path;
  const bool folder = std::filesystem::is_directory(model_path);
  const bool gguf = !folder && std::filesystem::is_regular_file(model_path) &&
                    io::detect_file_format(model_path) == io::FileFormat::gguf;
  const int sources = int(arguments.has("tokens")) + int(arguments.has("tokens-file")) + int(arguments.has("text")) +
                      int(arguments.has("text-file"));
  if (sources > 1) throw usage_error("give only one of --tokens, --tokens-file, --text, --text-file");
  if ((arguments.has("text") || arguments.has("text-file")) && !folder && !gguf)
    throw usage_error("--text and --text-file need a model with a tokenizer (--model DIR or --model FILE.gguf); a "
                      "llama2.c checkpoint carries none: give token ids with --tokens or --tokens-file");
  for (const char* name : {"special-tokens", "add-special-tokens"})
    if (arguments.has(name) && !(arguments.has("text") || arguments.has("text-file")))
      throw usage_error(std::string("--") + name + " applies to --text or --text-file only");
  if (arguments.has("from") && !(arguments.has("text") || arguments.has("text-file")))
    throw usage_error("--from applies to --text or --text-file only");
  if (arguments.has("skip-tokens") && sources == 0)
    throw usage_error("--skip-tokens needs --text, --text-file, --tokens or --tokens-file");
  if (sources == 0 && folder)
    throw usage_error("a model folder needs input: give --text, --text-file, --tokens or --tokens-file");
  if (sources == 0 && gguf)
    throw usage_error("a GGUF model needs input: give --text, --text-file, --tokens or --tokens-file");
  if (arguments.has("tokens") || arguments.has("tokens-file")) request.tokens = token_ids_argument(arguments);
  if (arguments.has("text") || arguments.has("text-file")) request.tokens = encode_text_argument(arguments, model_path);
  if (request.tokens.empty())  // a data error (exit 1): the options were right, the text was empty
    attnscope::detail::throw_invalid_argument(
        "encode", "the input has no tokens: ",
        arguments.has("text-file") ? input_file_name(arguments.get("text-file")) + " is empty"
                                   : std::string("the --text is empty"));
  skip_tokens_argument(arguments, request.tokens);
  request.input_length = request.tokens.size();
  if (arguments.has("max-tokens")) {
    request.max_tokens = parse_integer(arguments.get("max-tokens"), "--max-tokens", 1, 1L << 30);
    if (request.tokens.size() > static_cast<std::size_t>(*request.max_tokens))
      request.tokens.resize(static_cast<std::size_t>(*request.max_tokens));
  }
  request.generate = arguments.has("generate")
                         ? static_cast<int>(parse_integer(arguments.get("generate"), "--generate", 0, 1 << 20))
                         : (sources > 0 ? 0 : default_generate);
  if (arguments.has("map")) request.options.map = map_argument(arguments);
  request.options.matmul = matmul_argument(arguments);
  return request;
}

/// What --model names, for messages.
inline constexpr const char* model_kinds =
    "a Hugging Face model folder (config.json, *.safetensors), a GGUF file or a llama2.c checkpoint";

/// Checks that `path` is a model (a Hugging Face folder, a GGUF file or a llama2.c checkpoint, by content) and
/// returns its format; a data error naming the path and what it is otherwise.
inline io::FileFormat require_model_format(const std::string& path) {
  if (!std::filesystem::exists(path))
    attnscope::detail::throw_io_error("model", path, "does not exist; --model expects ", model_kinds);
  return require_input_format("model", path,
                              {io::FileFormat::huggingface_folder, io::FileFormat::gguf, io::FileFormat::llama2c},
                              std::string("a model (") + model_kinds + ")");
}

/// The model of a command: --model PATH or its alias --checkpoint FILE (one of them), checked by
/// require_model_format.
inline std::string model_path_argument(const Arguments& arguments) {
  if (arguments.has("model") && arguments.has("checkpoint"))
    throw usage_error("give either --model or --checkpoint (an alias of --model)");
  const std::string path = arguments.has("checkpoint") ? arguments.get("checkpoint") : arguments.require("model");
  require_model_format(path);
  return path;
}

struct CaptureRun {
  model::ForwardResult result;
  std::vector<int> tokens;
  int n_layers = 0, n_heads = 0, max_positions = 0;
  std::string architecture;
  std::string cut_note;  // says whether and how the input was cut by --max-tokens ("" when it was not)
};

/// Loads the model, checks the length against its positions (a clear error, or the --max-tokens cut), generates
/// when asked, then runs the forward pass with `capture` (and the logits unless `logits` is false). `prepare`, when
/// set, sees the model's configuration before anything runs: it refuses options that do not fit the model and may
/// narrow the capture (e.g. to the selected heads). Timings go to stderr.
inline CaptureRun run_capture(
    const CaptureRequest& request, model::CaptureOptions capture, bool logits = true,
    const std::function<void(const model::TransformerConfig&, model::CaptureOptions&)>& prepare = {}) {
  const auto start = std::chrono::steady_clock::now();
  const model::Transformer transformer = model::load_model(request.model_path);
  const double load_ms = milliseconds_since(start);
  if (prepare) prepare(transformer.config(), capture);
  CaptureRun run;
  run.n_layers = transformer.config().n_layers;
  run.n_heads = transformer.config().n_heads;
  run.max_positions = transformer.config().seq_len;
  run.architecture = transformer.config().architecture;
  run.tokens = request.tokens;
  const std::size_t positions = static_cast<std::size_t>(run.max_positions);
  if (request.input_length > positions && !request.max_tokens)
    attnscope::detail::throw_invalid_argument(
        "capture", "the input has ", request.input_length, " tokens but the model (", request.model_path,
        ") takes at most ", positions, " positions (seq_len); cut it with --max-tokens ", positions);
  if (request.tokens.size() < request.input_length)
    run.cut_note = "input cut from " + std::to_string(request.input_length) + " to " +
                   std::to_string(request.tokens.size()) + " tokens by --max-tokens";
  if (!run.cut_note.empty()) std::cerr << "attnscope: " << run.cut_note << "\n";
  double generate_ms = 0;
  if (request.generate > 0) {
    ProgressBar bar("generate");
    const auto generate_start = std::chrono::steady_clock::now();
    run.tokens = transformer.generate_greedy(request.tokens, request.generate, request.options, bar.callback());
    generate_ms = milliseconds_since(generate_start);
  }
  model::ForwardOptions options = request.options;
  options.capture = capture;
  options.logits = logits;  // false: no output head (report, capture --no-logits)
  const auto forward_start = std::chrono::steady_clock::now();
  run.result = transformer.forward(run.tokens, options);
  const double forward_ms = milliseconds_since(forward_start);
  std::cerr << "attnscope: " << run.architecture << ", " << run.tokens.size() << " tokens, " << run.n_layers
            << " layers x " << run.n_heads << " heads; load " << load_ms << " ms, generate " << request.generate
            << " tokens " << generate_ms << " ms, forward with capture " << forward_ms << " ms\n";
  return run;
}

}  // namespace attnscope::cli
