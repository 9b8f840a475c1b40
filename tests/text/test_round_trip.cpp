// Properties: decode(encode(x)) == x on seeded random well-formed UTF-8 (every script range, whitespace kinds, emoji,
// combining marks); GPT-2's byte alphabet is a bijection onto printable characters; the UTF-8 check agrees with a
// code-point-by-code-point reference; the heap-based merge loop gives the tokens of a direct transcription of OpenAI's
// encoder.py bpe() on words of the book and on random byte strings.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/text.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "text_test_support.hpp"

using namespace attnscope;
using attnscope::testing::gpt2_tokenizer;
using attnscope::testing::text_fixture;
using text::ByteLevelBpeTokenizer;

namespace {

// A random code point from a mix of ranges: ASCII (half the time), whitespace kinds, Latin-1, Greek/Cyrillic, combining
// marks, CJK, Hangul, emoji and modifiers, private use, up to U+10FFFF; never a surrogate.
char32_t round_trip_random_code_point(Random& random) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E},     {0x00, 0x1F},     {0x80, 0xFF},     {0x370, 0x4FF},   {0x300, 0x36F},   {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0x1F300, 0x1FAFF}, {0x2000, 0x206F}, {0xE000, 0xF8FF}, {0xFE00, 0xFFFF}, {0x10000, 0x10FFFF}};
  static const std::vector<char32_t> spaces = {' ', '\t', '\n', '\r', 0xA0, 0x85, 0x2028, 0x3000, 0x200B, 0xFEFF};
  const std::uint64_t pick = random.below(24);
  if (pick < 12) return static_cast<char32_t>(0x20 + random.below(0x5F));
  if (pick < 15) return spaces[random.below(spaces.size())];
  const auto& range = ranges[random.below(ranges.size())];
  return range.first + static_cast<char32_t>(random.below(range.second - range.first + 1));
}

std::string round_trip_random_text(Random& random, std::size_t code_points) {
  std::string text;
  for (std::size_t i = 0; i < code_points; ++i) text::detail::append_utf8(text, round_trip_random_code_point(random));
  return text;
}

// OpenAI's encoder.py bpe(), transcribed: repeatedly take the lowest-ranked adjacent pair and merge every occurrence
// of it left to right. Works on byte-level token strings; O(n^2) per word.
std::vector<std::string> round_trip_reference_bpe(const std::vector<std::string>& symbols,
                                                  const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> word = symbols;
  while (word.size() > 1) {
    int best_rank = -1;
    std::pair<std::string, std::string> best;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto found = ranks.find({word[i], word[i + 1]});
      if (found != ranks.end() && (best_rank < 0 || found->second < best_rank)) {
        best_rank = found->second;
        best = found->first;
      }
    }
    if (best_rank < 0) break;
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == best.first && word[i + 1] == best.second) {
        merged.push_back(word[i] + word[i + 1]);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word = std::move(merged);
  }
  return word;
}

}  // namespace

TEST_CASE("round trip: decode(encode(x)) == x on random UTF-8 for GPT-2 and the Llama-3-style fixture",
          "[text][round_trip]") {
  const auto llama3_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_llama3_style.tokenizer.json"));
  const auto gpt2_style = ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_gpt2_style.tokenizer.json"));
  Random random(20261201);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text = round_trip_random_text(random, random.below(200));
    if (trial % 10 == 0) text += "<|endoftext|>" + round_trip_random_text(random, 5);
    INFO("trial " << trial);
    REQUIRE_FALSE(text::first_invalid_utf8_offset(text).has_value());
    for (const bool parse_special : {false, true}) {
      const std::vector<int> ids = gpt2_tokenizer().encode(text, {parse_special});
      CHECK(gpt2_tokenizer().decode(ids) == text);
      for (const int id : ids) CHECK((id >= 0 && id < gpt2_tokenizer().vocab_size()));
      CHECK(llama3_style.decode(llama3_style.encode(text, {parse_special})) == text);
    }
    // add_prefix_space: the only change is one leading space.
    CHECK(gpt2_style.decode(gpt2_style.encode(text)) == (text.empty() || text[0] == ' ' ? text : " " + text));
  }
}

TEST_CASE("round trip: GPT-2's byte alphabet is a bijection of the 256 bytes onto printable characters",
          "[text][round_trip]") {
  std::set<std::string> images;
  for (int byte = 0; byte < 256; ++byte) {
    const std::string one(1, static_cast<char>(byte));
    const std::string image = text::bytes_to_byte_level(one);
    images.insert(image);
    CHECK(text::byte_level_to_bytes(image) == one);
  }
  CHECK(images.size() == 256);
  // encoder.py: printable Latin-1 maps to itself, the rest to 256 + n in byte order.
  CHECK(text::bytes_to_byte_level(" ") == "Ġ");    // U+0120 = 256 + 32
  CHECK(text::bytes_to_byte_level("\n") == "Ċ");   // U+010A = 256 + 10
  CHECK(text::bytes_to_byte_level("\x7F") == "ġ");  // U+0121: the 34th unprintable byte
  CHECK(text::bytes_to_byte_level("\xAD") == "Ń");  // U+0143: the last one
  CHECK(text::bytes_to_byte_level("A~\xA1\xFF") == "A~¡ÿ");
  CHECK(text::byte_level_to_bytes("Ġthe") == std::string(" the"));
  CHECK_FALSE(text::byte_level_to_bytes(" ").has_value());   // a space is not in the alphabet
  CHECK_FALSE(text::byte_level_to_bytes("東").has_value());
  CHECK_FALSE(text::byte_level_to_bytes("\xC4").has_value());  // ill-formed UTF-8
}

TEST_CASE("round trip: the UTF-8 check agrees with a per-code-point reference on random bytes", "[text][round_trip]") {
  // Reference: decode greedily by the definition (lead byte ranges, continuation bytes, value ranges).
  const auto reference_offset = [](const std::string& bytes) -> std::optional<std::size_t> {
    std::size_t i = 0;
    while (i < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i]);
      std::size_t length = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
      if (length == 0 || i + length > bytes.size()) return i;
      std::uint32_t value = length == 1 ? b : (b & (0x7F >> length));
      for (std::size_t k = 1; k < length; ++k) {
        const auto c = static_cast<unsigned char>(bytes[i + k]);
        if ((c & 0xC0) != 0x80) return i;
        value = (value << 6) | (c & 0x3F);
      }
      const std::uint32_t minimum[] = {0, 0, 0x80, 0x800, 0x10000};
      if (value < minimum[length] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return i;
      i += length;
    }
    return std::nullopt;
  };
  Random random(7);
  int invalid = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string bytes;
    const std::size_t length = random.below(12);
    for (std::size_t i = 0; i < length; ++i) {
      // Bias towards lead and continuation bytes so that well-formed sequences occur too.
      const std::uint64_t kind = random.below(4);
      bytes.push_back(static_cast<char>(kind == 0 ? random.below(0x80) : kind == 1 ? 0x80 + random.below(0x40)
                                                                                   : 0xC0 + random.below(0x40)));
    }
    INFO("trial " << trial);
    CHECK(text::first_invalid_utf8_offset(bytes) == reference_offset(bytes));
    invalid += reference_offset(bytes).has_value() ? 1 : 0;
  }
  CHECK(invalid > 1000);
  CHECK(invalid < 19000);
}

TEST_CASE("round trip: the merge loop gives encoder.py's tokens on book words and random byte strings",
          "[text][round_trip]") {
  // Ranks read straight from vocab.bpe (first line "#version").
  std::map<std::pair<std::string, std::string>, int> ranks;
  const std::string merges = attnscope::testing::read_text_file(attnscope::testing::data_file("gpt2-bpe/vocab.bpe"));
  std::size_t start = merges.find('\n') + 1;
  int rank = 0;
  while (start < merges.size()) {
    std::size_t end = merges.find('\n', start);
    if (end == std::string::npos) end = merges.size();
    const std::string line = merges.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    ranks.emplace(std::make_pair(line.substr(0, space), line.substr(space + 1)), rank++);
  }
  REQUIRE(ranks.size() == 50000);
  const auto& tokenizer = gpt2_tokenizer();
  // The merge table of the tokenizer is private; encode one pre-tokenized piece through the public API instead: a
  // piece the regex keeps whole ("Ġ" + letters, or a run of one punctuation character) is exactly one merge_word call.
  const auto check_word = [&](const std::string& word) {
    std::vector<std::string> symbols;
    for (const char byte : word) symbols.push_back(text::bytes_to_byte_level(std::string(1, byte)));
    std::vector<int> expected;
    for (const std::string& token : round_trip_reference_bpe(symbols, ranks)) expected.push_back(*tokenizer.token_id(token));
    INFO("word '" << word << "'");
    CHECK(tokenizer.encode(word) == expected);
  };
  Random random(99);
  const std::string book = attnscope::testing::read_text_file(attnscope::testing::data_file("war_and_peace.txt"));
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {  // " word" pieces of the book
    std::size_t at = book.find(' ', random.below(book.size()));
    if (at == std::string::npos) continue;
    std::size_t end = at + 1;
    while (end < book.size() && ((book[end] >= 'a' && book[end] <= 'z') || (book[end] >= 'A' && book[end] <= 'Z'))) ++end;
    if (end == at + 1) continue;
    check_word(book.substr(at, end - at));
    ++checked;
  }
  CHECK(checked > 2000);
  for (int trial = 0; trial < 500; ++trial) {  // random letter strings, long enough for many merge rounds
    std::string word = " ";
    const std::size_t length = 1 + random.below(40);
    for (std::size_t i = 0; i < length; ++i) word.push_back(static_cast<char>('a' + random.below(random.below(2) ? 26 : 4)));
    check_word(word);
  }
  for (int trial = 0; trial < 200; ++trial) {  // runs of one punctuation character (one piece each)
    check_word(std::string(1 + random.below(30), "-=*.!_"[random.below(6)]));
  }
}
