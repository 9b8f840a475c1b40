// tokenizer.json: two tiny committed fixtures (tests/text/fixtures, written by make_fixtures.py) — a Llama-3-style one
// (Sequence of a Split with Llama-3's regex, behaviour Isolated, and ByteLevel with use_regex false; ignore_merges;
// merges as [left, right] pairs; added tokens with lstrip/rstrip and a non-special one) and a GPT-2-style one
// (ByteLevel with use_regex and add_prefix_space; merges as "left right" strings). Golden ids from an independent
// implementation: the npm package @huggingface/tokenizers 0.2.0 (pure JavaScript) with node 20, encode(text,
// {add_special_tokens: false}) (tests/text/fixtures/goldens.mjs, run in a scratch directory; ids pasted below).
// That implementation always splits added tokens out of the text, so its ids are compared with
// parse_special_tokens = true.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/text.hpp"
#include "support/catch.hpp"
#include "text_test_support.hpp"

using namespace attnscope;
using attnscope::testing::text_fixture;
using text::ByteLevelBpeTokenizer;

namespace {

struct FixtureCase {
  const char* name;
  std::string text;
  std::vector<int> llama3_style_ids;
  std::vector<int> gpt2_style_ids;
};

// The texts of goldens.mjs and the ids @huggingface/tokenizers 0.2.0 gave for each fixture.
std::vector<FixtureCase> fixture_cases() {
  return {
      {"contractions", "I'M sure THEY'RE the best, it's the cat's",
       {73, 39, 77, 287, 117, 263, 32, 84, 72, 69, 89, 39, 82, 69, 258, 278, 44, 297, 116, 39, 115, 258, 274, 39, 115},
       {32, 73, 39, 77, 287, 117, 263, 32, 84, 72, 69, 89, 39, 82, 69, 258, 278, 44, 297, 116, 39, 115, 258, 274, 39, 115}},
      {"digits", "1234567 and 1999 or 12",
       {305, 52, 53, 54, 55, 32, 97, 110, 100, 32, 304, 57, 262, 114, 32, 49, 50},
       {32, 305, 52, 53, 54, 55, 32, 97, 110, 100, 32, 304, 57, 262, 114, 32, 49, 50}},
      {"newlines", "hello\n\n  world\r\n\tthere!!!\n\nthe end  ",
       {256, 108, 108, 111, 299, 32, 272, 13, 10, 9, 257, 263, 33, 33, 33, 299, 257, 32, 101, 110, 100, 32, 32},
       {267, 299, 32, 272, 13, 10, 9, 257, 263, 33, 33, 33, 10, 10, 257, 32, 101, 110, 100, 32, 32}},
      {"ignore_merges", "zzz zzz zzzz", {307, 32, 122, 122, 122, 32, 122, 122, 122, 122},
       {32, 122, 122, 122, 32, 122, 122, 122, 32, 122, 122, 122, 122}},
      {"words", "the other people helpful hello world", {257, 281, 294, 286, 267, 272}, {258, 281, 294, 286, 267, 272}},
      {"unicode", "café 東京 👋🏽",
       {99, 97, 102, 195, 169, 32, 230, 157, 177, 228, 186, 172, 32, 240, 159, 145, 139, 240, 159, 143, 189},
       {273, 97, 102, 195, 169, 32, 230, 157, 177, 228, 186, 172, 32, 240, 159, 145, 139, 240, 159, 143, 189}},
      {"added tokens", "<|begin_of_text|>the cat  <mask>  sat[custom] on<|end_of_text|>",
       {308, 257, 274, 310, 115, 261, 311, 282, 309},
       {32, 60, 124, 98, 101, 103, 105, 110, 95, 111, 102, 95, 116, 101, 120, 116, 124, 62, 257, 274, 32, 32, 60, 109, 97,
        115, 107, 62, 32, 288, 91, 99, 117, 115, 116, 111, 109, 93, 282, 60, 124, 101, 110, 100, 95, 111, 102, 95, 116,
        101, 120, 116, 124, 62}},
      {"<|endoftext|>", "hello<|endoftext|>world",
       {256, 108, 108, 111, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62, 119, 111, 114, 108, 100},
       {267, 308, 272}},
      {"leading space", " the cat", {258, 274}, {258, 274}},
      {"empty", "", {}, {}},
  };
}

}  // namespace

TEST_CASE("tokenizer.json: both fixtures match @huggingface/tokenizers", "[text][tokenizer_json][golden]") {
  const auto llama3_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_llama3_style.tokenizer.json"));
  const auto gpt2_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_gpt2_style.tokenizer.json"));
  for (const FixtureCase& c : fixture_cases()) {
    INFO(c.name);
    CHECK(llama3_style.encode(c.text, {true}) == c.llama3_style_ids);
    CHECK(gpt2_style.encode(c.text, {true}) == c.gpt2_style_ids);
    if (c.text.find("<mask>") == std::string::npos)  // "<mask>" strips the spaces around it
      CHECK(llama3_style.decode(c.llama3_style_ids) == c.text);
  }
}

TEST_CASE("tokenizer.json: a Sequence of two Splits and ByteLevel applies each step to every piece",
          "[text][tokenizer_json][golden]") {
  // The Llama-3-style fixture with the pre-tokenizer of goldens.mjs's "multi_step" variant: Split on the literal " ",
  // Split on \p{N}{1,3}, then ByteLevel with GPT-2's regex and add_prefix_space (a space before every piece).
  nlohmann::json json = attnscope::testing::read_json_value(text_fixture("tiny_llama3_style.tokenizer.json"));
  json["pre_tokenizer"] = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": false},
      {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}]})");
  const std::string path = attnscope::testing::text_scratch_dir("tokenizer_json_multi_step") + "/tokenizer.json";
  io::write_file(path, json.dump());
  const auto multi_step = ByteLevelBpeTokenizer::from_tokenizer_json(path);
  CHECK(multi_step.pre_tokenizer_patterns() ==
        std::vector<std::string>{"\\ ", "\\p{N}{1,3}", text::gpt2_pre_tokenizer_pattern});
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {  // @huggingface/tokenizers 0.2.0
      {"I'M sure THEY'RE the best, it's the cat's",
       {32, 73, 39, 77, 32, 287, 117, 263, 32, 32, 84, 72, 69, 89, 39, 82, 69, 32, 258, 32, 278, 44, 32, 297, 116, 39, 115,
        32, 258, 32, 274, 39, 115}},
      {"1234567 and 1999 or 12", {32, 305, 32, 52, 53, 54, 32, 55, 32, 32, 97, 110, 100, 32, 32, 304, 32, 57, 32, 262, 114, 32, 32, 49, 50}},
      {"hello\n\n  world\r\n\tthere!!!\n\nthe end  ",
       {267, 299, 32, 32, 272, 13, 10, 9, 257, 263, 33, 33, 33, 10, 10, 257, 32, 32, 101, 110, 100, 32, 32}},
      {"zzz zzz zzzz", {32, 122, 122, 122, 32, 32, 122, 122, 122, 32, 32, 122, 122, 122, 122}},
      {"the other people helpful hello world", {258, 32, 281, 32, 294, 32, 286, 32, 267, 32, 272}},
      {"café 東京 👋🏽", {273, 97, 102, 195, 169, 32, 32, 230, 157, 177, 228, 186, 172, 32, 32, 240, 159, 145, 139, 240, 159, 143, 189}},
      {"<|begin_of_text|>the cat  <mask>  sat[custom] on<|end_of_text|>", {308, 258, 32, 274, 310, 288, 311, 32, 282, 309}},
      {" the cat", {32, 258, 32, 274}},
  };
  for (const auto& [input, ids] : cases) {
    INFO(input);
    CHECK(multi_step.encode(input, {true}) == ids);
  }
}

TEST_CASE("tokenizer.json: the pre-tokenizer, vocabulary size and added tokens are read", "[text][tokenizer_json]") {
  const auto llama3_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_llama3_style.tokenizer.json"));
  CHECK(llama3_style.pre_tokenizer_pattern() ==
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  CHECK(llama3_style.pre_tokenizer_patterns().size() == 1);  // ByteLevel has use_regex false
  CHECK(llama3_style.vocab_size() == 312);                   // 256 bytes + 51 merges + "zzz" + 4 added tokens
  CHECK(llama3_style.token_id("<|begin_of_text|>") == 308);
  CHECK(llama3_style.token_id("[custom]") == 311);
  CHECK(llama3_style.token_id("zzz") == 307);
  CHECK(llama3_style.token_id("Ġthe") == 258);
  REQUIRE(llama3_style.added_tokens().size() == 4);
  CHECK(llama3_style.added_tokens()[2].content == "<mask>");
  CHECK(llama3_style.added_tokens()[2].left_strip);
  CHECK(llama3_style.added_tokens()[2].right_strip);
  CHECK_FALSE(llama3_style.added_tokens()[3].special);
  const auto gpt2_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_gpt2_style.tokenizer.json"));
  CHECK(gpt2_style.pre_tokenizer_pattern() == text::gpt2_pre_tokenizer_pattern);
  CHECK(gpt2_style.vocab_size() == 309);
  // A folder with a tokenizer.json uses it.
  const std::string dir = attnscope::testing::text_scratch_dir("tokenizer_json_folder");
  io::write_file(dir + "/tokenizer.json", attnscope::testing::read_text_file(text_fixture("tiny_llama3_style.tokenizer.json")));
  CHECK(ByteLevelBpeTokenizer::from_folder(dir).vocab_size() == 312);
}

TEST_CASE("tokenizer.json: without parse_special_tokens added tokens are ordinary text", "[text][tokenizer_json]") {
  const auto llama3_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_llama3_style.tokenizer.json"));
  // Independent of the added tokens: the same text with the specials replaced by their bytes-as-text encoding.
  const std::vector<int> plain = llama3_style.encode("<|begin_of_text|>the cat");
  CHECK(std::find(plain.begin(), plain.end(), 308) == plain.end());
  CHECK(llama3_style.decode(plain) == "<|begin_of_text|>the cat");
  // "<mask>" strips the ASCII spaces around it only when it is parsed as a token.
  CHECK(llama3_style.decode(llama3_style.encode("a  <mask>  b", {true})) == "a<mask>b");
  CHECK(llama3_style.decode(llama3_style.encode("a  <mask>  b", {false})) == "a  <mask>  b");
}

TEST_CASE("tokenizer.json: add_prefix_space adds one space to each text segment that lacks one", "[text][tokenizer_json]") {
  const auto gpt2_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_gpt2_style.tokenizer.json"));
  CHECK(gpt2_style.decode(gpt2_style.encode("the cat")) == " the cat");
  CHECK(gpt2_style.decode(gpt2_style.encode(" the cat")) == " the cat");
  CHECK(gpt2_style.decode(gpt2_style.encode("a<|endoftext|>b", {true})) == " a<|endoftext|> b");
  CHECK(gpt2_style.encode("").empty());
}
