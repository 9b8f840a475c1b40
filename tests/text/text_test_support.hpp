// Shared helpers of the text tests: the GPT-2 tokenizers of the shared data, the committed fixtures, scratch files.
#pragma once

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

}  // namespace attnscope::testing
