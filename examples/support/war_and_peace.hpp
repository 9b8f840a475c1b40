// War and Peace passages for the real-model reproductions on Hugging Face model folders (`--model DIR`): the text
// the normalization-limits paper used with GPT-2 (<data>/war_and_peace.txt, Project Gutenberg #2600), cut into
// passages of a fixed number of tokens of the folder's tokenizer. Shared by the capacity, stream and composition
// examples.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/text.hpp"
#include "support/example.hpp"

namespace attnscope::examples {

/// `count` passages of War and Peace (`<data>/war_and_peace.txt`), each starting at a paragraph at an evenly
/// spaced place in the book (10%, 30%, ... of the text) and cut to `length` tokens of `tokenizer`.
inline std::vector<std::vector<int>> war_and_peace_passages(const Options& options,
                                                            const text::ByteLevelBpeTokenizer& tokenizer, int count,
                                                            Index length) {
  const std::vector<unsigned char> bytes = io::read_file((options.data_dir / "war_and_peace.txt").string());
  const std::string book(bytes.begin(), bytes.end());
  std::vector<std::vector<int>> passages;
  for (int i = 0; i < count; ++i) {
    const std::size_t place = book.size() * static_cast<std::size_t>(2 * i + 1) / static_cast<std::size_t>(2 * count);
    const std::size_t begin = book.find("\n\n", place);
    if (begin == std::string::npos) break;
    // About 4 characters per token in English prose; take 8 per token, then back off to a space (whole UTF-8).
    std::size_t end = std::min(book.size(), begin + 2 + static_cast<std::size_t>(length) * 8);
    while (end < book.size() && end > begin + 2 && book[end] != ' ') --end;
    std::vector<int> tokens = tokenizer.encode(std::string_view(book).substr(begin + 2, end - begin - 2));
    if (static_cast<Index>(tokens.size()) < length)
      detail::throw_invalid_argument("war_and_peace_passages", "passage ", i, " has only ", tokens.size(),
                                     " tokens, fewer than ", length);
    tokens.resize(static_cast<std::size_t>(length));
    passages.push_back(std::move(tokens));
  }
  return passages;
}

}  // namespace attnscope::examples
