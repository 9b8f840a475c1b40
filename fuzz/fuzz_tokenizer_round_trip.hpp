// fuzz/fuzz_tokenizer_round_trip.hpp — the properties both tokenizer fuzz targets check on a tokenizer that loaded:
// every id is in the vocabulary and decodes, --add-special-tokens only puts the post-processor's ids around the text,
// and byte-level BPE without a normalizer or stripping added tokens is lossless, so decode(encode(text)) == text for
// any valid UTF-8 text the vocabulary can spell.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "attnscope/text.hpp"

namespace attnscope_fuzz {

/// The longest prefix of bytes that is valid UTF-8 (at most 256 bytes): text for the round trip.
inline std::string utf8_prefix(const std::uint8_t* data, std::size_t size) {
  std::string text;
  std::size_t i = 0;
  while (i < size && text.size() < 256) {
    const std::uint8_t lead = data[i];
    const std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > size) break;
    bool ok = true;
    for (std::size_t k = 1; k < length; ++k) ok = ok && (data[i + k] >> 6) == 2;
    std::uint32_t code = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; ok && k < length; ++k) code = (code << 6) | (data[i + k] & 0x3F);
    const std::uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (!ok || code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) break;
    text.append(reinterpret_cast<const char*>(data + i), length);
    i += length;
  }
  return text;
}

/// True when decode(encode(text)) must give the text back: a byte-level vocabulary (every byte has a token), no
/// normalizer (NFC, NFKC, Prepend, ... change the text) and no added token that absorbs white space around it
/// (lstrip/rstrip; only non-special added tokens are matched by default). Character vocabularies are lossy by design,
/// as Hugging Face's BPE is: a character without a token becomes the unk_token or, without one, is dropped, and the
/// Metaspace decoder removes the first space.
template <class Tokenizer>
bool round_trip_is_lossless(const Tokenizer& tokenizer) {
  if (tokenizer.is_character_vocabulary() || !tokenizer.normalizer_name().empty()) return false;
  for (const attnscope::text::AddedToken& token : tokenizer.added_tokens())
    if (!token.special && (token.left_strip || token.right_strip)) return false;
  return true;
}

/// Encodes fixed texts and a UTF-8 prefix of the input. An encode that throws attnscope::invalid_argument (a byte the
/// vocabulary lacks) or io_error is allowed; anything else escaping aborts, and so does an id outside the vocabulary,
/// an encoding with add_special_tokens that is not prefix + ids + suffix, a decode that throws, or (for a lossless
/// tokenizer, round_trip_is_lossless) a round trip that changes the text.
template <class Tokenizer>
void check_round_trips(const Tokenizer& tokenizer, const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> texts = {"Hello, world! 123", "  naïve café\n\nNatasha",
                                          "\xe6\x88\xb0\xe4\xba\x89 \xf0\x9f\x98\x80 <|endoftext|>",
                                          utf8_prefix(data, size)};
  const bool lossless = round_trip_is_lossless(tokenizer);
  for (const std::string& text : texts) {
    std::vector<int> ids;
    try {
      ids = tokenizer.encode(text);
    } catch (const attnscope::invalid_argument&) {
      continue;
    } catch (const attnscope::io_error&) {
      continue;
    }
    for (const int id : ids)
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
    std::vector<int> framed = tokenizer.added_prefix_ids();
    framed.insert(framed.end(), ids.begin(), ids.end());
    framed.insert(framed.end(), tokenizer.added_suffix_ids().begin(), tokenizer.added_suffix_ids().end());
    attnscope::text::EncodeOptions add;
    add.add_special_tokens = true;
    if (tokenizer.encode(text, add) != framed) std::abort();
    const std::string decoded = tokenizer.decode(ids);  // ids from encode always decode (no exception escapes)
    if (lossless && decoded != text) std::abort();
  }
}

}  // namespace attnscope_fuzz
