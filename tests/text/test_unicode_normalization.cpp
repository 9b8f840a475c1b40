// Unicode normalization (text/detail/unicode_normalization.hpp) against Python's unicodedata: 600 generated strings
// (characters with canonical or compatibility decompositions, combining marks in shuffled order, Hangul syllables and
// conjoining jamo, ASCII between them) and their NFC, NFD, NFKC and NFKD forms, written by
// tests/text/make_unicode_tables.py --test-vectors from the same Unicode version as the tables. Plus the identities
// of UAX #15 on every vector, and the character classes.
#include <string>

#include <nlohmann/json.hpp>

#include "attnscope/text.hpp"
#include "attnscope/text/detail/unicode_normalization.hpp"
#include "support/catch.hpp"
#include "text_test_support.hpp"

using attnscope::text::detail::NormalizationForm;
using attnscope::text::detail::normalize_utf8;

TEST_CASE("unicode normalization: NFC, NFD, NFKC, NFKD equal Python's unicodedata", "[text][unicode]") {
  const nlohmann::json vectors =
      attnscope::testing::read_json_value(attnscope::testing::text_fixture("unicode_normalization.json"));
  REQUIRE(vectors["unicode_version"] == attnscope::text::detail::unicode_data::unicode_version);
  REQUIRE(vectors["vectors"].size() == 600);
  for (const auto& vector : vectors["vectors"]) {
    const std::string text = vector["text"].get<std::string>();
    INFO("text '" << text << "'");
    const std::string nfc = normalize_utf8(text, NormalizationForm::nfc);
    const std::string nfd = normalize_utf8(text, NormalizationForm::nfd);
    const std::string nfkc = normalize_utf8(text, NormalizationForm::nfkc);
    const std::string nfkd = normalize_utf8(text, NormalizationForm::nfkd);
    CHECK(nfc == vector["NFC"].get<std::string>());
    CHECK(nfd == vector["NFD"].get<std::string>());
    CHECK(nfkc == vector["NFKC"].get<std::string>());
    CHECK(nfkd == vector["NFKD"].get<std::string>());
    // UAX #15 identities: NFC(x) = NFC(NFD(x)), NFD(x) = NFD(NFC(x)), NFKC(x) = NFC(NFKD(x)), idempotence.
    CHECK(normalize_utf8(nfd, NormalizationForm::nfc) == nfc);
    CHECK(normalize_utf8(nfc, NormalizationForm::nfd) == nfd);
    CHECK(normalize_utf8(nfkd, NormalizationForm::nfc) == nfkc);
    CHECK(normalize_utf8(nfc, NormalizationForm::nfc) == nfc);
    CHECK(normalize_utf8(nfkd, NormalizationForm::nfkd) == nfkd);
  }
}

TEST_CASE("unicode normalization: ASCII is untouched, and the character classes", "[text][unicode]") {
  const std::string ascii = "The quick brown fox\r\n\tjumps over 13 lazy dogs. ~!@#$%^&*()_+";
  for (const auto form : {NormalizationForm::nfc, NormalizationForm::nfd, NormalizationForm::nfkc, NormalizationForm::nfkd})
    CHECK(normalize_utf8(ascii, form) == ascii);
  CHECK(normalize_utf8("", NormalizationForm::nfkc).empty());
  CHECK(normalize_utf8("e\xCC\x81", NormalizationForm::nfc) == "\xC3\xA9");               // e + U+0301 -> é
  CHECK(normalize_utf8("\xEF\xAC\x81", NormalizationForm::nfkc) == "fi");                  // U+FB01 ligature
  CHECK(normalize_utf8("\xEA\xB0\x80", NormalizationForm::nfd) == "\xE1\x84\x80\xE1\x85\xA1");  // 가 -> jamo
  using attnscope::text::detail::is_white_space;
  using attnscope::text::detail::is_word_character;
  for (const char32_t space : {U' ', U'\t', U'\n', U'\r', U'\u00A0', U'\u2003', U'\u3000', U'\u0085'})
    CHECK(is_white_space(space));
  for (const char32_t other : {U'a', U'\u200B', U'\uFEFF', U'_'}) CHECK_FALSE(is_white_space(other));
  for (const char32_t word : {U'a', U'Z', U'0', U'_', U'\u00E9', U'\u0301', U'\u6771', U'\u0663', U'\u200D'})
    CHECK(is_word_character(word));
  for (const char32_t other : {U' ', U'.', U'-', U'\u2014', U'\U0001F600', U'['}) CHECK_FALSE(is_word_character(other));
}
