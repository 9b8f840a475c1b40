// tools/command_tokenize.cpp — `attnscope tokenize`: encode text with a model's tokenizer (a Hugging Face folder's
// or a GGUF file's) and print the token ids on one line. Documented in docs/cli.md.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli_model.hpp"
#include "commands.hpp"

namespace attnscope::cli {
namespace {

const char* tokenize_usage() {
  static const std::string usage =
      R"(usage: attnscope tokenize --model PATH (--text STRING | --text-file FILE) [--special-tokens]
                         [--add-special-tokens] [--from TEXT] [--skip-tokens N] [--max-tokens N] [--threads N]

Encodes the text with the model's tokenizer (a Hugging Face folder's tokenizer.json, else tokenizer.model, else
vocab.json + merges.txt; or the tokenizer stored in a GGUF file) and prints the token ids on one line, separated by
single spaces. The empty text prints an empty line.

Options:
  --model PATH        a Hugging Face model folder holding the tokenizer files, or a GGUF file (a llama2.c
                      checkpoint carries no tokenizer)
  --text STRING       the text (UTF-8)
  --text-file FILE    a UTF-8 text file, read as is (a final newline is part of the text); - reads stdin
  --special-tokens    special tokens written in the text (e.g. <|endoftext|>) become their ids; by default they
                      are encoded as ordinary text
  --add-special-tokens  add what the tokenizer's post-processor adds (e.g. Llama-2's and Mistral's BOS <s>);
                      by default nothing is added. With --special-tokens: Hugging Face's default tokenizer(text)
)" + std::string(input_window_usage) + R"(  --max-tokens N      print only the first N tokens (after --skip-tokens), as the commands that run a model
                      keep them
  --threads N         accepted as by every command (unused)
  --help              this text
)";
  return usage.c_str();
}

int command_tokenize(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("model").value_option("text").value_option("text-file").flag("special-tokens")
      .flag("add-special-tokens").value_option("max-tokens");
  add_input_window_options(arguments);
  if (parse_subcommand(arguments, argc, argv, tokenize_usage())) return 0;
  require_no_positional(arguments);
  const std::string folder = arguments.require("model");
  // a folder needs only its tokenizer files (their reader names what is missing); a file must be a GGUF file
  if (!std::filesystem::is_directory(folder) && require_model_format(folder) == io::FileFormat::llama2c)
    attnscope::detail::throw_io_error("tokenize", folder, "is a llama2.c checkpoint, which carries no tokenizer; "
                                      "--model expects a Hugging Face model folder or a GGUF file");
  const long max_tokens =
      arguments.has("max-tokens") ? parse_integer(arguments.get("max-tokens"), "--max-tokens", 1, 1L << 30) : 0;
  std::vector<int> ids = encode_text_argument(arguments, folder);
  if (!ids.empty()) skip_tokens_argument(arguments, ids);
  if (max_tokens > 0 && ids.size() > static_cast<std::size_t>(max_tokens))
    ids.resize(static_cast<std::size_t>(max_tokens));
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::cout << line << "\n";
  return 0;
}

}  // namespace

const Command& tokenize_command() {
  static const Command command{"tokenize", "encode text with a model's tokenizer (HF folder or GGUF), print the ids",
                               tokenize_usage(), command_tokenize};
  return command;
}

}  // namespace attnscope::cli
