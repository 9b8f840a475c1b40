// fuzz/fuzz_tokenizer_round_trip.hpp — the property both tokenizer fuzz targets check on a tokenizer that loaded:
// byte-level BPE is lossless, so decode(encode(text)) == text for any valid UTF-8 text the vocabulary can spell.
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

/// Encodes fixed texts and a UTF-8 prefix of the input, and checks that decoding gives each text back. An encode
/// that throws attnscope::invalid_argument (a byte the vocabulary lacks) is allowed; anything else escaping, or a
/// round trip that changes the text, aborts.
template <class Tokenizer>
void check_round_trips(const Tokenizer& tokenizer, const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> texts = {"Hello, world! 123", "  naïve café\n\nNatasha",
                                          "\xe6\x88\xb0\xe4\xba\x89 \xf0\x9f\x98\x80 <|endoftext|>",
                                          utf8_prefix(data, size)};
  for (const std::string& text : texts) {
    std::vector<int> ids;
    try {
      ids = tokenizer.encode(text);
    } catch (const attnscope::invalid_argument&) {
      continue;
    } catch (const attnscope::io_error&) {
      continue;
    }
    if (tokenizer.decode(ids) != text) std::abort();
  }
}

}  // namespace attnscope_fuzz
