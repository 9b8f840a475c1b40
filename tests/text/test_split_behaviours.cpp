// The Split pre-tokenizer of tokenizer.json with every behaviour of Hugging Face tokenizers (Removed, Isolated,
// MergedWithPrevious, MergedWithNext, Contiguous), with and without invert. Two independent sources of expected
// pieces: a table derived by hand from the semantics of tokenizers' NormalizedString::split (the delimiters are the
// matches, or with invert the gaps; Removed drops them, Isolated keeps each, MergedWithPrevious joins a delimiter to
// the content before it, MergedWithNext to the content after it, Contiguous keeps each run as one piece; an empty
// match cuts the gap it falls in), and tests/fixtures/tokenizers/split_behaviours.json, written by
// make_reference_ids.mjs with the npm package tokenizers (Hugging Face's Rust library): its pieces for 12 patterns x
// 5 behaviours x 2 inverts x 13 texts, and the ids of a small character BPE whose merges cross the cuts. The hand
// table is also checked against the fixture, so the two sources agree with each other.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/text.hpp"
#include "support/catch.hpp"
#include "text_test_support.hpp"

using namespace attnscope;
using attnscope::testing::read_json_value;
using attnscope::testing::text_scratch_dir;
using text::ByteLevelBpeTokenizer;

namespace {

using Pieces = std::vector<std::string>;

std::string tokenizer_fixture(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / ".." / "fixtures" / "tokenizers" / name).string();
}

nlohmann::json split_step(const nlohmann::json& pattern, const std::string& behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

// The pieces of `text` under the pre-tokenizer of a tokenizer.json whose pre_tokenizer is `step`, read by the
// loader's own parser.
Pieces pre_tokenize(const nlohmann::json& step, const std::string& text) {
  const nlohmann::json root = {{"pre_tokenizer", step}};
  const std::string file = "<split test>";
  bool byte_level = false;
  const auto stages = text::detail::tokenizer_json_pre_tokenizer(root, text::detail::LoadContext{"test", file}, byte_level);
  if (text.empty()) return {};  // nothing to split (Hugging Face gives no piece either)
  text::detail::PreTokenizerScratch scratch(stages);
  text::detail::pre_tokenize(stages, text, scratch);
  return Pieces(scratch.pieces.begin(), scratch.pieces.end());
}

struct HandCase {
  nlohmann::json pattern;
  std::string behavior;
  bool invert;
  std::string text;
  Pieces pieces;
};

// Derived by hand from the semantics above (not from running any implementation).
std::vector<HandCase> hand_cases() {
  const nlohmann::json dash = {{"String", "-"}};
  const std::string countdown = "the-final--countdown-";
  const nlohmann::json before_b = {{"Regex", "(?=b)"}};  // empty matches before every "b"
  const nlohmann::json optional_x = {{"Regex", "x?"}};   // matches "x", and the empty string elsewhere
  return {
      // The matches "-" are the delimiters; with invert the words are.
      {dash, "Removed", false, countdown, {"the", "final", "countdown"}},
      {dash, "Removed", true, countdown, {"-", "-", "-", "-"}},
      {dash, "Isolated", false, countdown, {"the", "-", "final", "-", "-", "countdown", "-"}},
      {dash, "Isolated", true, countdown, {"the", "-", "final", "-", "-", "countdown", "-"}},
      {dash, "MergedWithPrevious", false, countdown, {"the-", "final-", "-", "countdown-"}},
      {dash, "MergedWithPrevious", true, countdown, {"the", "-final", "-", "-countdown", "-"}},
      {dash, "MergedWithNext", false, countdown, {"the", "-final", "-", "-countdown", "-"}},
      {dash, "MergedWithNext", true, countdown, {"the-", "final-", "-", "countdown-"}},
      {dash, "Contiguous", false, countdown, {"the", "-", "final", "--", "countdown", "-"}},
      {dash, "Contiguous", true, countdown, {"the", "-", "final", "--", "countdown", "-"}},
      {dash, "MergedWithPrevious", false, "--a-", {"-", "-", "a-"}},
      {dash, "MergedWithNext", false, "-a--", {"-a", "-", "-"}},
      // Empty matches at 1, 3 and 4 cut "abcbb"; as delimiters they are empty pieces, which vanish.
      {before_b, "Isolated", false, "abcbb", {"a", "bc", "b", "b"}},
      {before_b, "MergedWithPrevious", false, "abcbb", {"a", "bc", "b", "b"}},
      {before_b, "Removed", false, "abcbb", {"a", "bc", "b", "b"}},
      {before_b, "Removed", true, "abcbb", {}},
      // "axxb": the matches are [0,0), "x", "x", [4,4) (the empty match at 3 follows the match ending there).
      {optional_x, "Contiguous", false, "axxb", {"a", "xx", "b"}},
      {optional_x, "MergedWithPrevious", false, "axxb", {"ax", "x", "b"}},
      {optional_x, "MergedWithNext", false, "axxb", {"a", "x", "xb"}},
      {optional_x, "Removed", false, "axxb", {"a", "b"}},
      {optional_x, "Removed", true, "axxb", {"x", "x"}},
      // The empty literal matches the empty string everywhere: every character is cut apart.
      {{{"String", ""}}, "Isolated", false, "h\xC3\xA9!", {"h", "\xC3\xA9", "!"}},
      {{{"String", ""}}, "Removed", true, "abc", {}},
      // Regex metacharacters in a literal are literal.
      {{{"String", "a.b\\E"}}, "Isolated", false, "xa.b\\Eyaxb", {"x", "a.b\\E", "yaxb"}},
  };
}

}  // namespace

TEST_CASE("Split behaviours: hand-derived pieces", "[text][split]") {
  for (const HandCase& c : hand_cases()) {
    INFO(c.pattern.dump() << " " << c.behavior << (c.invert ? " invert" : "") << " on '" << c.text << "'");
    CHECK(pre_tokenize(split_step(c.pattern, c.behavior, c.invert), c.text) == c.pieces);
  }
}

TEST_CASE("Split behaviours: the hand-derived pieces are Hugging Face's", "[text][split][golden]") {
  const nlohmann::json fixture = read_json_value(tokenizer_fixture("split_behaviours.json"));
  std::size_t found = 0;
  for (const HandCase& c : hand_cases())
    for (const auto& entry : fixture["cases"]) {
      if (entry["pattern"] != c.pattern || entry["behavior"] != c.behavior || entry["invert"] != c.invert) continue;
      for (const auto& result : entry["results"])
        if (result["text"] == c.text) {
          INFO(c.pattern.dump() << " " << c.behavior << (c.invert ? " invert" : "") << " on '" << c.text << "'");
          CHECK(result["pieces"].get<Pieces>() == c.pieces);
          ++found;
        }
    }
  CHECK(found == 19);  // the hand cases whose pattern and text the fixture has too
}

TEST_CASE("Split behaviours: pieces and ids of Hugging Face tokenizers for every pattern, behaviour and invert",
          "[text][split][golden]") {
  const nlohmann::json fixture = read_json_value(tokenizer_fixture("split_behaviours.json"));
  const std::string dir = text_scratch_dir("split_behaviours");
  std::size_t pieces_compared = 0, ids_compared = 0, cut_differently = 0;
  for (const auto& entry : fixture["cases"]) {
    const nlohmann::json step = split_step(entry["pattern"], entry["behavior"], entry["invert"].get<bool>());
    INFO("pre_tokenizer " << step.dump());
    nlohmann::json json = fixture["tokenizer"];
    json["pre_tokenizer"] = step;
    const std::string path = dir + "/tokenizer.json";
    std::ofstream(path) << json.dump();
    const ByteLevelBpeTokenizer tokenizer = ByteLevelBpeTokenizer::from_tokenizer_json(path);
    for (const auto& result : entry["results"]) {
      const std::string text = result["text"].get<std::string>();
      INFO("text '" << text << "'");
      const Pieces pieces = pre_tokenize(step, text);
      CHECK(pieces == result["pieces"].get<Pieces>());
      CHECK(tokenizer.encode(text) == result["ids"].get<std::vector<int>>());
      pieces_compared += 1;
      ids_compared += 1;
      if (pieces.size() > 1) ++cut_differently;
    }
  }
  CHECK(fixture["cases"].size() == 120);
  CHECK(pieces_compared == 120 * 13);
  CHECK(cut_differently > 500);  // most cases cut the text: the comparison is not between unsplit texts
}

TEST_CASE("Split behaviours: an unknown behaviour is refused with its name", "[text][split][errors]") {
  const std::string dir = text_scratch_dir("split_unknown_behaviour");
  const nlohmann::json fixture = read_json_value(tokenizer_fixture("split_behaviours.json"));
  nlohmann::json json = fixture["tokenizer"];
  json["pre_tokenizer"] = split_step({{"String", "-"}}, "MergedWithBoth", false);
  const std::string path = dir + "/tokenizer.json";
  std::ofstream(path) << json.dump();
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_tokenizer_json(path),
                    Catch::Contains("MergedWithBoth") && Catch::Contains("expected Removed, Isolated"));
  json["pre_tokenizer"].erase("behavior");
  std::ofstream(path) << json.dump();
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_tokenizer_json(path), Catch::Contains("<no behavior>"));
}

TEST_CASE("literal_regex matches the literal and nothing else", "[text][split]") {
  const std::string literal = std::string("a.b*c\\E(?x)[^]$|\t\n") + std::string(1, '\0') + "\xE2\x96\x81";
  const text::Regex regex(text::literal_regex(literal));
  std::vector<std::string_view> pieces;
  const std::string text = "x" + literal + "yab-c" + literal;
  regex.split_isolated(text, pieces);
  CHECK(pieces == std::vector<std::string_view>{"x", literal, "yab-c", literal});
  CHECK(text::literal_regex("").empty());
}
