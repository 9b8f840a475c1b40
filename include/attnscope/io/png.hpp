// attnscope/io/png.hpp — a minimal PNG encoder for 8-bit indexed-colour images (PNG specification, W3C 2003 / ISO
// 15948: signature, IHDR, PLTE, IDAT, IEND; colour type 3, bit depth 8, filter type 0 "None" on every scanline, no
// interlace). The pixel data is zlib-compressed (RFC 1950) and each chunk carries the CRC-32 of ISO 3309, which is
// the CRC of ZIP (detail::zip_crc32). Used for the heatmaps of the HTML report. Needs zlib (link attnscope::io).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <zlib.h>

#include "attnscope/core/error.hpp"
#include "attnscope/io/npz.hpp"

namespace attnscope::io {

/// One palette entry: red, green, blue (0–255).
using PngColor = std::array<unsigned char, 3>;

namespace detail {

inline void png_append_u32(std::string& out, std::uint32_t value) {  // PNG integers are big-endian
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xFF));
}

/// Appends one chunk: length, type, data, CRC-32 over type and data (PNG specification §5.3).
inline void png_append_chunk(std::string& out, const char type[4], const std::string& data) {
  png_append_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::string typed = std::string(type, 4) + data;
  out += typed;
  png_append_u32(out, zip_crc32(reinterpret_cast<const unsigned char*>(typed.data()), typed.size()));
}

}  // namespace detail

/// The bytes of a PNG file holding a `width` × `height` indexed-colour image: `pixels` are palette indices in row-major
/// order (top row first), `palette` has 1–256 colours. Throws invalid_argument for a non-positive size, a pixel count
/// other than width·height, an empty or oversized palette, or an index outside the palette. O(width·height).
inline std::string encode_png_indexed(int width, int height, const std::vector<unsigned char>& pixels,
                                      const std::vector<PngColor>& palette) {
  const char* fn = "encode_png_indexed";
  if (width <= 0 || height <= 0 || width > (1 << 20) || height > (1 << 20))
    attnscope::detail::throw_invalid_argument(fn, "image size ", width, "x", height, " is outside [1, 2^20]");
  if (pixels.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height))
    attnscope::detail::throw_invalid_argument(fn, pixels.size(), " pixels for a ", width, "x", height, " image");
  if (palette.empty() || palette.size() > 256)
    attnscope::detail::throw_invalid_argument(fn, "palette has ", palette.size(), " colours, expected 1 to 256");
  for (std::size_t i = 0; i < pixels.size(); ++i)
    if (pixels[i] >= palette.size())
      attnscope::detail::throw_invalid_argument(fn, "pixel ", i, " has index ", static_cast<int>(pixels[i]),
                                                ", the palette has ", palette.size(), " colours");
  // Scanlines: one filter-type byte (0 = None) then the row's indices.
  std::string raw;
  raw.reserve(pixels.size() + static_cast<std::size_t>(height));
  for (int y = 0; y < height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(pixels.data()) + static_cast<std::size_t>(y) * width, width);
  }
  uLongf compressed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string compressed(compressed_size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(&compressed[0]), &compressed_size,
                reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 9) != Z_OK)
    attnscope::detail::throw_invalid_argument(fn, "zlib compress2 failed for a ", width, "x", height, " image");
  compressed.resize(compressed_size);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string header;
  detail::png_append_u32(header, static_cast<std::uint32_t>(width));
  detail::png_append_u32(header, static_cast<std::uint32_t>(height));
  header += std::string("\x08\x03\x00\x00\x00", 5);  // bit depth 8, colour type 3, deflate, filter 0, no interlace
  detail::png_append_chunk(png, "IHDR", header);
  std::string colors;
  for (const PngColor& color : palette) colors.append(reinterpret_cast<const char*>(color.data()), 3);
  detail::png_append_chunk(png, "PLTE", colors);
  detail::png_append_chunk(png, "IDAT", compressed);
  detail::png_append_chunk(png, "IEND", "");
  return png;
}

}  // namespace attnscope::io
