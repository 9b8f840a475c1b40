// A strict decoder for the PNG files attnscope writes (8-bit indexed colour, filter type 0, no interlace), written for
// the tests from the PNG specification (W3C 2003): checks the signature, each chunk's CRC-32 (computed here bitwise
// from the ISO 3309 polynomial, not with zlib's table) and the chunk order, and inflates IDAT with zlib.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <zlib.h>

namespace attnscope::testing {

struct DecodedPng {
  int width = 0, height = 0, bit_depth = 0, color_type = 0;
  std::vector<std::array<unsigned char, 3>> palette;
  std::vector<unsigned char> pixels;  // palette indices, row-major
};

/// CRC-32 of ISO 3309 / PNG Annex D, bit by bit (reflected polynomial 0xEDB88320).
inline std::uint32_t png_test_crc32(const std::string& bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}

/// Decodes `png`; throws std::runtime_error naming what is wrong.
inline DecodedPng decode_test_png(const std::string& png) {
  auto fail = [](const std::string& what) { throw std::runtime_error("decode_test_png: " + what); };
  auto u32 = [&](std::size_t at) {
    if (at + 4 > png.size()) fail("truncated");
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(png[at + i]);
    return value;
  };
  if (png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) != 0) fail("bad signature");
  DecodedPng result;
  std::string compressed;
  std::vector<std::string> order;
  std::size_t at = 8;
  while (at < png.size()) {
    const std::uint32_t length = u32(at);
    if (at + 12 + length > png.size()) fail("truncated chunk");
    const std::string typed = png.substr(at + 4, 4 + length);
    const std::string type = typed.substr(0, 4), data = typed.substr(4);
    if (u32(at + 8 + length) != png_test_crc32(typed)) fail("bad CRC in " + type);
    order.push_back(type);
    if (type == "IHDR") {
      if (length != 13) fail("IHDR length");
      result.width = static_cast<int>(u32(at + 8));
      result.height = static_cast<int>(u32(at + 12));
      result.bit_depth = static_cast<unsigned char>(data[8]);
      result.color_type = static_cast<unsigned char>(data[9]);
      if (data[10] != 0 || data[11] != 0 || data[12] != 0) fail("compression, filter or interlace method");
    } else if (type == "PLTE") {
      if (length % 3 != 0) fail("PLTE length");
      for (std::size_t i = 0; i < length; i += 3)
        result.palette.push_back({static_cast<unsigned char>(data[i]), static_cast<unsigned char>(data[i + 1]),
                                  static_cast<unsigned char>(data[i + 2])});
    } else if (type == "IDAT") {
      compressed += data;
    }
    at += 12 + length;
  }
  if (order.empty() || order.front() != "IHDR" || order.back() != "IEND") fail("chunk order");
  if (result.bit_depth != 8 || result.color_type != 3) fail("not 8-bit indexed colour");
  const std::size_t stride = static_cast<std::size_t>(result.width) + 1;
  std::vector<unsigned char> raw(stride * static_cast<std::size_t>(result.height));
  uLongf raw_size = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(compressed.data()),
                 static_cast<uLong>(compressed.size())) != Z_OK ||
      raw_size != raw.size())
    fail("IDAT does not inflate to height x (width + 1) bytes");
  for (int y = 0; y < result.height; ++y) {
    if (raw[y * stride] != 0) fail("filter type other than None");
    result.pixels.insert(result.pixels.end(), raw.begin() + static_cast<long>(y * stride + 1),
                         raw.begin() + static_cast<long>((y + 1) * stride));
  }
  return result;
}

}  // namespace attnscope::testing
