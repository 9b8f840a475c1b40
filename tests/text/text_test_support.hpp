// Shared helpers of the text tests: the GPT-2 tokenizers of the shared data, the committed fixtures, scratch files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/file.hpp"
#include "attnscope/text.hpp"
#include "support/data.hpp"

namespace attnscope::testing {

/// GPT-2's tokenizer from /work/shared/data/gpt2-bpe (encoder.json + vocab.bpe), loaded once per test program.
inline const text::ByteLevelBpeTokenizer& gpt2_tokenizer() {
  static const text::ByteLevelBpeTokenizer tokenizer = text::ByteLevelBpeTokenizer::from_folder(data_file("gpt2-bpe"));
  return tokenizer;
}

/// tests/text/fixtures/<name>.
inline std::string text_fixture(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / "fixtures" / name).string();
}

/// A fresh scratch directory for files a test writes: <build>/text_test_scratch/<name>.
inline std::string text_scratch_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(ATTNSCOPE_BINARY_DIR) / "text_test_scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

/// Whole text file as a string.
inline std::string read_text_file(const std::string& path) {
  const std::vector<unsigned char> bytes = io::read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

/// A JSON file as a json value.
inline nlohmann::json read_json_value(const std::string& path) { return nlohmann::json::parse(read_text_file(path)); }

/// A tokenizer of fixtures/tokenizer_variants.json as JSON: its base file with the variant's rules applied ("set"
/// replaces keys, a dotted key a nested one; "append_added_tokens" appends added tokens), as make_reference_ids.mjs
/// applies them.
inline nlohmann::json tokenizer_variant_json(const nlohmann::json& variant) {
  nlohmann::json json = read_json_value(text_fixture(variant["base"].get<std::string>()));
  if (variant.contains("set"))
    for (const auto& [key, value] : variant["set"].items()) {
      nlohmann::json* object = &json;
      std::string rest = key;
      for (std::size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1))
        object = &(*object)[rest.substr(0, dot)];
      (*object)[rest] = value;
    }
  if (variant.contains("append_added_tokens"))
    for (const auto& token : variant["append_added_tokens"]) json["added_tokens"].push_back(token);
  return json;
}

/// War and Peace split into paragraphs at "\n\n" (the indices reference_ids.json uses).
inline std::vector<std::string> book_paragraphs() {
  const std::string book = read_text_file(data_file("war_and_peace.txt"));
  std::vector<std::string> paragraphs;
  std::size_t start = 0;
  for (std::size_t found; (found = book.find("\n\n", start)) != std::string::npos; start = found + 2)
    paragraphs.push_back(book.substr(start, found - start));
  paragraphs.push_back(book.substr(start));
  return paragraphs;
}

/// The text of reference_ids.json's "chunk" entry: its paragraphs [first_paragraph, end_paragraph) joined by "\n\n".
inline std::string reference_chunk_text(const nlohmann::json& chunk, const std::vector<std::string>& paragraphs) {
  std::string text;
  for (std::size_t p = chunk["first_paragraph"].get<std::size_t>(); p < chunk["end_paragraph"].get<std::size_t>(); ++p)
    text += (text.empty() ? "" : "\n\n") + paragraphs.at(p);
  return text;
}

/// FNV-1a (64-bit) of ids, as 16 hex digits (reference_ids.json's check of long encodings).
inline std::string fnv1a64_hex(const std::vector<int>& ids) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const int id : ids) {
    hash ^= static_cast<std::uint64_t>(id);
    hash *= 0x100000001b3ULL;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

}  // namespace attnscope::testing
