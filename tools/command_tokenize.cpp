// tools/command_tokenize.cpp — `attnscope tokenize`: encode text with a model folder's byte-level BPE tokenizer
// and print the token ids on one line. Documented in docs/cli.md.
#include <iostream>
#include <string>
#include <vector>

#include "cli_model.hpp"
#include "commands.hpp"

namespace attnscope::cli {
namespace {

const char* tokenize_usage() {
  static const std::string usage =
      R"(usage: attnscope tokenize --model DIR (--text STRING | --text-file FILE) [--special-tokens]
                         [--add-special-tokens] [--from TEXT] [--skip-tokens N]

Encodes the text with the model folder's tokenizer (tokenizer.json, else tokenizer.model, else vocab.json +
merges.txt) and prints the token ids on one line, separated by single spaces. The empty text prints an empty line.

Options:
  --model DIR         Hugging Face model folder holding the tokenizer files
  --text STRING       the text (UTF-8)
  --text-file FILE    a UTF-8 text file, read as is (a final newline is part of the text)
  --special-tokens    special tokens written in the text (e.g. <|endoftext|>) become their ids; by default they
                      are encoded as ordinary text
  --add-special-tokens  add what the tokenizer's post-processor adds (e.g. Llama-2's and Mistral's BOS <s>);
                      by default nothing is added. With --special-tokens: Hugging Face's default tokenizer(text)
)" + std::string(input_window_usage) + R"(  --help              this text
)";
  return usage.c_str();
}

int command_tokenize(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("model").value_option("text").value_option("text-file").flag("special-tokens")
      .flag("add-special-tokens");
  add_input_window_options(arguments);
  if (parse_subcommand(arguments, argc, argv, tokenize_usage())) return 0;
  require_no_positional(arguments);
  const std::string folder = arguments.require("model");
  model_path_argument(arguments);  // the folder exists (else a data error naming it)
  std::vector<int> ids = encode_text_argument(arguments, folder);
  if (!ids.empty()) skip_tokens_argument(arguments, ids);
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
  static const Command command{"tokenize", "encode text with a model folder's tokenizer and print the token ids",
                               tokenize_usage(), command_tokenize};
  return command;
}

}  // namespace attnscope::cli
