// attnscope/text/byte_level.hpp — GPT-2's byte-level alphabet and UTF-8 helpers.
//
// Byte-level BPE vocabularies (GPT-2, RoBERTa, Llama-3, Qwen2, ...) store every token as a string over a 256-character
// alphabet: each byte b is shown as one printable Unicode character. Printable Latin-1 bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are given the code points
// 256, 257, ... in increasing byte order, so a space is 'Ġ' (U+0120) and a newline 'Ċ' (U+010A). This is the
// bytes_to_unicode() table of OpenAI's GPT-2 encoder.py; the table is a bijection, so token strings map back to bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attnscope::text {
namespace detail {

/// The 256-entry table byte -> code point of GPT-2's bytes_to_unicode() (see the header comment).
inline const std::array<char32_t, 256>& byte_to_code_point_table() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> result{};
    char32_t next_unprintable = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
      result[static_cast<std::size_t>(byte)] = printable ? static_cast<char32_t>(byte) : next_unprintable++;
    }
    return result;
  }();
  return table;
}

/// Inverse of byte_to_code_point_table over code points 0..511: the byte, or -1 for code points outside the image.
inline const std::array<std::int16_t, 512>& code_point_to_byte_table() {
  static const std::array<std::int16_t, 512> table = [] {
    std::array<std::int16_t, 512> result{};
    result.fill(-1);
    const auto& forward = byte_to_code_point_table();
    for (int byte = 0; byte < 256; ++byte) result[forward[static_cast<std::size_t>(byte)]] = static_cast<std::int16_t>(byte);
    return result;
  }();
  return table;
}

/// Appends the UTF-8 encoding of a code point (< 0x110000) to `out`.
inline void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

/// Length in bytes of the well-formed UTF-8 sequence starting at text[position], or 0 when it is ill-formed
/// (Unicode 15, table 3-7: no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF, no truncation).
inline std::size_t utf8_sequence_length(std::string_view text, std::size_t position) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(position);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char second_low = 0x80, second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_low = 0xA0;   // overlong below U+0800
    if (lead == 0xED) second_high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_low = 0x90;   // overlong below U+10000
    if (lead == 0xF4) second_high = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (text.size() - position < length) return 0;
  if (byte(position + 1) < second_low || byte(position + 1) > second_high) return 0;
  for (std::size_t i = 2; i < length; ++i)
    if ((byte(position + i) & 0xC0) != 0x80) return 0;
  return length;
}

/// Decodes the code point of a well-formed UTF-8 sequence of `length` bytes at text[position].
inline char32_t decode_utf8(std::string_view text, std::size_t position, std::size_t length) {
  const auto byte = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[position + i])); };
  switch (length) {
    case 1: return byte(0);
    case 2: return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3: return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    default: return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  }
}

}  // namespace detail

/// Byte offset of the first ill-formed UTF-8 sequence in `text`, or std::nullopt when all of it is well-formed UTF-8.
inline std::optional<std::size_t> first_invalid_utf8_offset(std::string_view text) {
  std::size_t position = 0;
  while (position < text.size()) {
    if (static_cast<unsigned char>(text[position]) < 0x80) {
      ++position;
      continue;
    }
    const std::size_t length = detail::utf8_sequence_length(text, position);
    if (length == 0) return position;
    position += length;
  }
  return std::nullopt;
}

/// Raw bytes -> their byte-level token string (UTF-8 of GPT-2's alphabet), e.g. " the" -> "Ġthe".
inline std::string bytes_to_byte_level(std::string_view bytes) {
  std::string result;
  result.reserve(bytes.size() * 2);
  const auto& table = detail::byte_to_code_point_table();
  for (const char byte : bytes) detail::append_utf8(result, table[static_cast<unsigned char>(byte)]);
  return result;
}

/// Byte-level token string -> raw bytes, e.g. "Ġthe" -> " the"; std::nullopt when the string is not well-formed
/// UTF-8 or holds a character outside GPT-2's 256-character alphabet.
inline std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  std::string result;
  result.reserve(token.size());
  const auto& table = detail::code_point_to_byte_table();
  std::size_t position = 0;
  while (position < token.size()) {
    const std::size_t length = detail::utf8_sequence_length(token, position);
    if (length == 0) return std::nullopt;
    const char32_t code_point = detail::decode_utf8(token, position, length);
    if (code_point >= table.size() || table[code_point] < 0) return std::nullopt;
    result.push_back(static_cast<char>(table[code_point]));
    position += length;
  }
  return result;
}

}  // namespace attnscope::text
