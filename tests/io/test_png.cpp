// Tests of the PNG encoder: decoded by an independent strict decoder (tests/support/png_decode.hpp: bitwise CRC-32,
// chunk order, zlib inflate), the constant CRC of the IEND chunk, round trips of random images, and every error.
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/png.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/png_decode.hpp"

namespace {

std::vector<attnscope::io::PngColor> png_test_palette(int colors) {
  std::vector<attnscope::io::PngColor> palette;
  for (int i = 0; i < colors; ++i)
    palette.push_back({static_cast<unsigned char>(i), static_cast<unsigned char>(255 - i),
                       static_cast<unsigned char>((7 * i) % 256)});
  return palette;
}

}  // namespace

TEST_CASE("PNG: a small indexed image has the PNG layout and decodes to its pixels", "[io][png]") {
  const std::vector<unsigned char> pixels{0, 1, 2, 2, 1, 0};
  const std::string png = attnscope::io::encode_png_indexed(3, 2, pixels, png_test_palette(3));
  REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  // IHDR first: length 13, then width 3 and height 2 big-endian, bit depth 8, colour type 3.
  CHECK(png.substr(8, 8) == std::string("\0\0\0\x0dIHDR", 8));
  CHECK(png.substr(16, 13) == std::string("\0\0\0\x03\0\0\0\x02\x08\x03\0\0\0", 13));
  // The IEND chunk (empty) always ends with the CRC of "IEND": 0xAE426082 (PNG specification, every PNG file).
  CHECK(png.substr(png.size() - 12) == std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12));
  const attnscope::testing::DecodedPng decoded = attnscope::testing::decode_test_png(png);
  CHECK(decoded.width == 3);
  CHECK(decoded.height == 2);
  CHECK(decoded.palette == png_test_palette(3));
  CHECK(decoded.pixels == pixels);
}

TEST_CASE("PNG: random images of random sizes and palettes round-trip", "[io][png]") {
  attnscope::Random random(1301);
  for (int trial = 0; trial < 40; ++trial) {
    const int width = 1 + static_cast<int>(random.below(70)), height = 1 + static_cast<int>(random.below(70));
    const int colors = 1 + static_cast<int>(random.below(256));
    std::vector<unsigned char> pixels(static_cast<std::size_t>(width) * height);
    for (auto& p : pixels) p = static_cast<unsigned char>(random.below(static_cast<std::uint64_t>(colors)));
    INFO(width << "x" << height << ", " << colors << " colours");
    const attnscope::testing::DecodedPng decoded =
        attnscope::testing::decode_test_png(attnscope::io::encode_png_indexed(width, height, pixels, png_test_palette(colors)));
    CHECK(decoded.width == width);
    CHECK(decoded.height == height);
    CHECK(decoded.palette.size() == static_cast<std::size_t>(colors));
    CHECK(decoded.pixels == pixels);
  }
}

TEST_CASE("PNG: bad sizes, pixel counts, palettes and indices are invalid_argument", "[io][png][errors]") {
  using attnscope::io::encode_png_indexed;
  using attnscope::testing::error_message;
  const auto palette = png_test_palette(2);
  CHECK_THAT(error_message([&] { encode_png_indexed(0, 1, {}, palette); }),
             Catch::Matchers::Contains("encode_png_indexed: image size 0x1"));
  CHECK_THAT(error_message([&] { encode_png_indexed(1, -3, {}, palette); }), Catch::Matchers::Contains("1x-3"));
  CHECK_THAT(error_message([&] { encode_png_indexed(2, 2, {0, 1, 0}, palette); }),
             Catch::Matchers::Contains("3 pixels for a 2x2 image"));
  CHECK_THAT(error_message([&] { encode_png_indexed(1, 1, {0}, {}); }),
             Catch::Matchers::Contains("palette has 0 colours"));
  CHECK_THAT(error_message([&] { encode_png_indexed(1, 1, {0}, png_test_palette(257)); }),
             Catch::Matchers::Contains("palette has 257 colours"));
  CHECK_THAT(error_message([&] { encode_png_indexed(2, 1, {1, 2}, palette); }),
             Catch::Matchers::Contains("pixel 1 has index 2, the palette has 2 colours"));
}
