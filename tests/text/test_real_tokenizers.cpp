// Real tokenizers against Hugging Face's tokenizers library. The tokenizers are the real tokenizer.json files of
// tests/text/fixtures/real (Phi-3-mini: SentencePiece-style BPE with byte_fallback, Prepend/Replace normalizers,
// rstrip and non-special added tokens; RoBERTa-base: byte-level BPE, lstrip <mask>, RobertaProcessing) and the
// variants of tokenizer_variants.json (Llama-2's added tokens and BOS template; Metaspace with every prepend scheme
// and split; NFKC, NFC, NFD; ignore_merges; single_word/lstrip/rstrip/normalized added tokens; TemplateProcessing
// and ByteLevel post-processors). The reference ids in reference_ids.json were computed by the npm package
// tokenizers (the Rust library's Node binding) with make_reference_ids.mjs: edge-case texts in all four modes
// (parse_special_tokens x add_special_tokens), five War and Peace paragraphs (plain, and HF's default
// tokenizer(text)), and 1000 paragraphs of the book (count and FNV-1a of the ids). Comparisons are exact.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/text.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "text_test_support.hpp"

using namespace attnscope;
using attnscope::testing::book_paragraphs;
using attnscope::testing::fnv1a64_hex;
using attnscope::testing::read_json_value;
using attnscope::testing::read_text_file;
using attnscope::testing::text_fixture;
using attnscope::testing::text_scratch_dir;
using text::ByteLevelBpeTokenizer;

namespace {

ByteLevelBpeTokenizer real_variant(const nlohmann::json& variant) {
  const std::string dir = text_scratch_dir("real_" + variant["name"].get<std::string>());
  const std::string path = dir + "/tokenizer.json";
  std::ofstream(path) << attnscope::testing::tokenizer_variant_json(variant).dump();
  return ByteLevelBpeTokenizer::from_folder(dir);
}

// Hugging Face decodes byte-level tokens lossily: here each byte of an ill-formed sequence becomes U+FFFD (enough for
// the lone bytes of these texts).
std::string lossy_utf8(std::string bytes) {
  while (const auto bad = text::first_invalid_utf8_offset(bytes)) bytes.replace(*bad, 1, "\xEF\xBF\xBD");
  return bytes;
}

}  // namespace

TEST_CASE("real tokenizers give the ids of Hugging Face tokenizers on every reference text",
          "[text][real_tokenizers][golden]") {
  const nlohmann::json variants = read_json_value(text_fixture("tokenizer_variants.json"))["tokenizers"];
  const nlohmann::json reference = read_json_value(text_fixture("reference_ids.json"));
  const std::vector<std::string> paragraphs = book_paragraphs();
  REQUIRE(variants.size() == reference["results"].size());
  std::size_t texts = 0, ids_matched = 0;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const nlohmann::json& result = reference["results"][v];
    const std::string name = variants[v]["name"].get<std::string>();
    REQUIRE(result["tokenizer"] == name);
    INFO("tokenizer " << name);
    const ByteLevelBpeTokenizer tokenizer = real_variant(variants[v]);
    for (const auto& edge : result["edge_cases"]) {
      const std::string text = edge["text"].get<std::string>();
      INFO("edge case '" << edge["name"].get<std::string>() << "'");
      for (const auto& mode : edge["modes"]) {
        text::EncodeOptions options;
        options.parse_special_tokens = mode["parse_special_tokens"].get<bool>();
        options.add_special_tokens = mode["add_special_tokens"].get<bool>();
        INFO("parse_special_tokens " << options.parse_special_tokens << ", add_special_tokens "
                                     << options.add_special_tokens);
        const auto expected = mode["ids"].get<std::vector<int>>();
        const std::vector<int> ids = tokenizer.encode(text, options);
        CHECK(ids == expected);
        texts += 1;
        if (ids == expected) ids_matched += ids.size();
      }
      CHECK(lossy_utf8(tokenizer.decode(edge["modes"][0]["ids"].get<std::vector<int>>())) ==
            edge["decoded"].get<std::string>());
    }
    for (const auto& paragraph : result["paragraphs"]) {
      const std::string& text = paragraphs.at(paragraph["paragraph"].get<std::size_t>());
      INFO("War and Peace paragraph " << paragraph["paragraph"]);
      const std::vector<int> plain = tokenizer.encode(text);
      const std::vector<int> hf_default = tokenizer.encode(text, {true, true});
      CHECK(plain == paragraph["ids"].get<std::vector<int>>());
      CHECK(hf_default == paragraph["hf_default_ids"].get<std::vector<int>>());
      CHECK((tokenizer.decode(plain) == text) == paragraph["decodes_to_text"].get<bool>());
      texts += 2;
      ids_matched += (plain == paragraph["ids"].get<std::vector<int>>() ? plain.size() : 0) +
                     (hf_default == paragraph["hf_default_ids"].get<std::vector<int>>() ? hf_default.size() : 0);
    }
    const nlohmann::json& chunk = result["chunk"];
    const std::vector<int> chunk_ids = tokenizer.encode(attnscope::testing::reference_chunk_text(chunk, paragraphs));
    CHECK(chunk_ids.size() == chunk["count"].get<std::size_t>());
    CHECK(fnv1a64_hex(chunk_ids) == chunk["fnv1a64"].get<std::string>());
    texts += 1;
    if (fnv1a64_hex(chunk_ids) == chunk["fnv1a64"].get<std::string>()) ids_matched += chunk_ids.size();
  }
  std::cout << "real tokenizers: " << variants.size() << " tokenizers, " << texts << " encodings, " << ids_matched
            << " ids equal to Hugging Face tokenizers " << reference["tokenizers_version"].get<std::string>() << '\n';
}

TEST_CASE("SentencePiece tokenizer.model: Llama-2's model gives the ids of its tokenizer.json",
          "[text][real_tokenizers][sentencepiece]") {
  // Llama-2's tokenizer.model (llama2.c's copy) read directly, against the 'llama2' tokenizer.json variant (the same
  // 32000 pieces, merges, byte_fallback and BOS; checked against Hugging Face above) on every reference text.
  // Texts holding special-token strings differ by design: tokenizer.json's <s> is a normalized added token, the
  // converter's is not, so they are left out.
  const nlohmann::json variants = read_json_value(text_fixture("tokenizer_variants.json"))["tokenizers"];
  const nlohmann::json reference = read_json_value(text_fixture("reference_ids.json"));
  const auto model = ByteLevelBpeTokenizer::from_sentencepiece_model(text_fixture("real/llama2.tokenizer.model"));
  CHECK(model.vocab_size() == 32000);
  CHECK(model.is_character_vocabulary());
  CHECK(model.added_prefix_ids() == std::vector<int>{1});
  CHECK(model.normalizer_name() == "Prepend,Replace");
  const std::vector<std::string> paragraphs = book_paragraphs();
  std::size_t compared = 0;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    if (variants[v]["name"] != "llama2") continue;
    const nlohmann::json& result = reference["results"][v];
    for (const auto& edge : result["edge_cases"]) {
      const std::string text = edge["text"].get<std::string>();
      if (text.find("<s>") != std::string::npos || text.find("</s>") != std::string::npos ||
          text.find("<unk>") != std::string::npos)
        continue;
      INFO("edge case '" << edge["name"].get<std::string>() << "'");
      CHECK(model.encode(text) == edge["modes"][0]["ids"].get<std::vector<int>>());
      CHECK(model.encode(text, {true, true}) == edge["modes"][3]["ids"].get<std::vector<int>>());
      CHECK(model.decode(edge["modes"][0]["ids"].get<std::vector<int>>()) == edge["decoded"].get<std::string>());
      compared += 2;
    }
    for (const auto& paragraph : result["paragraphs"]) {
      const std::string& text = paragraphs.at(paragraph["paragraph"].get<std::size_t>());
      CHECK(model.encode(text) == paragraph["ids"].get<std::vector<int>>());
      CHECK(model.encode(text, {true, true}) == paragraph["hf_default_ids"].get<std::vector<int>>());
      compared += 2;
    }
  }
  CHECK(compared > 40);
  // In a folder without tokenizer.json, tokenizer.model is used.
  const std::string dir = text_scratch_dir("sentencepiece_folder");
  std::filesystem::copy_file(text_fixture("real/llama2.tokenizer.model"), dir + "/tokenizer.model");
  CHECK(ByteLevelBpeTokenizer::from_folder(dir).encode("Hello world", {false, true}) == model.encode("Hello world", {false, true}));
}
