// tools/cli_token_strings.hpp — the token strings the HTML pages show on their axes: each token's bytes from the
// model's tokenizer (analysis::detail::html_token_label shows the bytes that are not UTF-8 as \xHH), else the ids.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "cli_model.hpp"

namespace attnscope::cli {

/// The tokenizer's bytes of each id for a model with a tokenizer (a GGUF file, a Hugging Face folder), else the ids
/// themselves (llama2.c checkpoints carry no vocabulary; an empty `model` asks for the ids).
inline std::vector<std::string> token_strings(const std::vector<int>& tokens, const std::string& model) {
  std::vector<std::string> strings;
  strings.reserve(tokens.size());
  if (!model.empty()) {
    try {
      const text::ByteLevelBpeTokenizer tokenizer = folder_tokenizer(model);
      for (int id : tokens) strings.push_back(tokenizer.token_bytes(id));
      return strings;
    } catch (const std::exception&) {  // no (supported) tokenizer: show the ids
      strings.clear();
    }
  }
  for (int id : tokens) strings.push_back(std::to_string(id));
  return strings;
}

}  // namespace attnscope::cli
