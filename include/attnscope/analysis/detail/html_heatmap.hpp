// attnscope/analysis/detail/html_heatmap.hpp — the figures of the HTML report: an attention matrix reduced by blocks
// to a paletted PNG heatmap (viridis, magenta for non-finite entries) and base64 for data URIs. Internal to
// analysis/html_report.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/io/png.hpp"

namespace attnscope::analysis::detail {

/// Colour levels of the heatmaps: palette indices 0..63 for values, 64 for non-finite entries. 64 levels of viridis are
/// hard to tell from 256 and make the PNGs of real attention about a third smaller (stories260K: 0.47 MB against
/// 0.73 MB for 40 heads of 256 × 256).
inline constexpr int html_color_levels = 64;

/// Five colours of viridis (matplotlib, van der Walt & Smith 2015) at 0, 1/4, 1/2, 3/4 and 1: the attention weights.
inline constexpr unsigned char html_viridis_stops[5][3] = {
    {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
/// Five colours of magma (matplotlib) at 0, 1/4, 1/2, 3/4 and 1: differences, on a scale of their own.
inline constexpr unsigned char html_magma_stops[5][3] = {
    {0, 0, 4}, {81, 18, 124}, {183, 55, 121}, {252, 137, 97}, {252, 253, 191}};

/// A palette of html_color_levels colours by linear interpolation between five stops, then `invalid` for non-finite
/// entries.
inline std::vector<io::PngColor> html_palette(const unsigned char (&stops)[5][3], io::PngColor invalid) {
  std::vector<io::PngColor> colors;
  for (int i = 0; i < html_color_levels; ++i) {
    const double t = 4.0 * i / (html_color_levels - 1);
    const int segment = std::min(3, static_cast<int>(t));
    const double f = t - segment;
    io::PngColor color{};
    for (int c = 0; c < 3; ++c)
      color[c] = static_cast<unsigned char>(std::lround(stops[segment][c] * (1 - f) + stops[segment + 1][c] * f));
    colors.push_back(color);
  }
  colors.push_back(invalid);
  return colors;
}

/// The palette of the attention heatmaps: viridis, magenta for non-finite entries.
inline const std::vector<io::PngColor>& html_heatmap_palette() {
  static const std::vector<io::PngColor> palette = html_palette(html_viridis_stops, {255, 0, 255});
  return palette;
}

/// The palette of difference heatmaps: magma, cyan for non-finite entries.
inline const std::vector<io::PngColor>& html_difference_palette() {
  static const std::vector<io::PngColor> palette = html_palette(html_magma_stops, {0, 255, 255});
  return palette;
}

/// The CSS gradient of five stops (a legend's bar: at x of its width the colour of the value level x).
inline std::string html_gradient_css(const unsigned char (&stops)[5][3]) {
  std::string css = "linear-gradient(to right";
  for (const auto& stop : stops)
    css += ",rgb(" + std::to_string(stop[0]) + "," + std::to_string(stop[1]) + "," + std::to_string(stop[2]) + ")";
  return css + ")";
}

inline std::string html_base64(const std::string& bytes) {  // RFC 4648 §4, with padding
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    unsigned value = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) value |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) value |= static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[(value >> 18) & 63];
    out += alphabet[(value >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(value >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[value & 63] : '=';
  }
  return out;
}

/// A heatmap of a matrix reduced by blocks of `block` × `block` entries, each pixel the block's largest entry
/// (block_max) or the mean of its entries, clamped to [0, 1]; colour level round(v^gamma · 63), non-finite blocks 64.
struct HtmlImage {
  int width = 0, height = 0;
  std::string png;     // the encoded image
  std::string values;  // with keep_values: each pixel's value (row by row) as a little-endian IEEE binary16
};

/// IEEE 754 binary16 of a value in [0, 1] or NaN, rounded to nearest (ties to even) [derived]: 11 significant bits,
/// subnormals below 2^-14 (down to 2^-24), so weights keep 3 significant digits on the page's readout.
inline std::uint16_t html_half(double value) {
  if (std::isnan(value)) return 0x7e00;
  if (value <= 0) return 0;
  if (value >= 65504) return 0x7bff;
  int exponent = 0;
  const double mantissa = std::frexp(value, &exponent);  // value = mantissa · 2^exponent, mantissa in [0.5, 1)
  if (exponent - 1 < -14) {  // subnormal: value = m · 2^-24 with m < 1024
    return static_cast<std::uint16_t>(std::nearbyint(std::ldexp(value, 24)));
  }
  // normal: value = (1 + f/1024) · 2^(exponent-1); rounding may carry into the exponent, which the addition handles
  const auto fraction = static_cast<std::uint32_t>(std::nearbyint((mantissa * 2 - 1) * 1024));
  return static_cast<std::uint16_t>(((static_cast<std::uint32_t>(exponent - 1 + 15)) << 10) + fraction);
}

template <class Derived>
HtmlImage html_heatmap(const Eigen::MatrixBase<Derived>& matrix, Index block, bool block_max, double gamma,
                       bool keep_values = false,
                       const std::vector<io::PngColor>& palette = html_heatmap_palette()) {
  HtmlImage image;
  image.height = static_cast<int>((matrix.rows() + block - 1) / block);
  image.width = static_cast<int>((matrix.cols() + block - 1) / block);
  std::vector<unsigned char> pixels(static_cast<std::size_t>(image.width) * image.height);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) {
      double reduced = 0.0;
      bool finite = true;
      Index count = 0;
      for (Index i = y * block; i < std::min<Index>(matrix.rows(), (y + 1) * block); ++i)
        for (Index j = x * block; j < std::min<Index>(matrix.cols(), (x + 1) * block); ++j) {
          const double value = static_cast<double>(matrix(i, j));
          if (!std::isfinite(value)) finite = false;
          const double clamped = std::min(1.0, std::max(0.0, value));
          reduced = block_max ? std::max(reduced, clamped) : reduced + clamped;
          ++count;
        }
      if (!block_max) reduced /= static_cast<double>(count);
      if (keep_values) {
        const std::uint16_t half = html_half(finite ? reduced : std::nan(""));
        image.values += static_cast<char>(half & 0xff);
        image.values += static_cast<char>(half >> 8);
      }
      pixels[static_cast<std::size_t>(y) * image.width + x] =
          finite ? static_cast<unsigned char>(std::lround(std::pow(reduced, gamma) * (html_color_levels - 1)))
                 : static_cast<unsigned char>(html_color_levels);
    }
  image.png = io::encode_png_indexed(image.width, image.height, pixels, palette);
  return image;
}

/// The downsampling factor that fits max(rows, cols) into `max_side` pixels.
inline Index html_block(Index rows, Index cols, int max_side) {
  const Index longest = std::max(rows, cols);
  return (longest + max_side - 1) / max_side;
}

}  // namespace attnscope::analysis::detail
