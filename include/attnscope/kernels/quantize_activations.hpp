// attnscope/kernels/quantize_activations.hpp — rows of float32 activations rounded to 8-bit integers per block, as
// ggml's CPU backend does before it multiplies them with a block-quantized weight matrix (the integer-dot products of
// kernels/integer_dot.hpp). Two formats, following the weight type's vec_dot_type in ggml-cpu.c:
//
//   q8_0 (for Q8_0, Q4_0, Q5_0, IQ4_NL weights) — blocks of 32: amax = max |x|, d = amax / 127 stored as IEEE binary16
//     (rounded to nearest even), q = round(x · (127 / amax)) with round-half-to-even, every step in float32; an
//     all-zero block has d = 0, q = 0. This is ggml-cpu's x86 quantize_row_q8_0 (AVX/AVX2: _mm256_round_ps with
//     _MM_ROUND_NEAREST on x · id, id = 127 / amax), which differs from the portable quantize_row_q8_0_ref (roundf,
//     ties away from zero, and id = 1 / d) on ties and in the last bit of id.
//   q8_1 (for Q4_1, Q5_1 weights) — q8_0's blocks, scales and quants, and per block s = binary16(d′ · Σ q) with
//     d′ = amax / 127 the float32 scale before its rounding to binary16 (the product in float32, then rounded to
//     binary16). This is ggml-cpu's x86 quantize_row_q8_1 (AVX2: the sum of the quants by hsum_i32_8, exact).
//   q8_K (for Q2_K … Q6_K and IQ4_XS weights) — blocks of 256: m = the element of largest magnitude (the first one, scanning
//     upward, on ties), iscale = −127 / m, q = min(127, round(iscale · x)) with round-half-to-even (ggml's
//     nearest_int), d = 1 / iscale (float32, not rounded to binary16); and per 16 elements the sum of their q (the
//     block's bsums). An all-zero block has d = 0, q = 0. This is quantize_row_q8_K_ref, which x86's
//     quantize_row_q8_K calls; the interleaved four-row variant of the repacked Q4_K path
//     (ggml_quantize_mat_q8_K_4x8) gives the same d·q (its sign convention may flip both d and q).
//
// The value an activation stands for is d · q. Storage here is per row: cols quants (int8), cols / block scales
// (float32: the binary16 d of q8_0 and q8_1 widened, the float32 d of q8_K), for q8_1 cols / 32 block sums s (float32:
// the binary16 widened) and, for q8_K, cols / 16 sums (int16).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::kernels {

/// How activation rows are rounded to 8 bits before an integer-dot product (see the header comment).
enum class ActivationFormat {
  q8_0,  // blocks of 32, binary16 scale (Q8_0, Q4_0, Q5_0, IQ4_NL weights)
  q8_k,  // blocks of 256, float32 scale, sums of 16 (k-quant and IQ4_XS weights)
  q8_1,  // blocks of 32, binary16 scale and binary16 block sum (Q4_1, Q5_1 weights)
};

/// Elements per block of an activation format (32 or 256).
constexpr Index activation_block_elements(ActivationFormat format) {
  return format == ActivationFormat::q8_k ? 256 : 32;
}

/// ggml's name of an activation format ("q8_0", "q8_K", "q8_1").
constexpr const char* activation_format_name(ActivationFormat format) {
  return format == ActivationFormat::q8_0 ? "q8_0" : format == ActivationFormat::q8_k ? "q8_K" : "q8_1";
}

/// Rows of activations rounded to 8 bits: row r's quants at quants + r·cols, its block scales at
/// scales + r·(cols / block), its sums of 16 quants (q8_K only) at sums + r·(cols / 16), its block sums s (q8_1 only)
/// at block_sums + r·(cols / 32).
struct QuantizedActivations {
  ActivationFormat format = ActivationFormat::q8_0;
  Index rows = 0, cols = 0;
  std::vector<std::int8_t> quants;
  std::vector<float> scales;
  std::vector<std::int16_t> sums;
  std::vector<std::int16_t> pair_sums;  // q8_K: per 32 elements the sum of their q (two sums of 16)
  std::vector<float> block_sums;        // q8_1: per block s = binary16(d′ · Σ q)

  Index blocks_per_row() const { return cols / activation_block_elements(format); }
  const std::int8_t* row_quants(Index r) const { return quants.data() + r * cols; }
  const float* row_scales(Index r) const { return scales.data() + r * blocks_per_row(); }
  const std::int16_t* row_sums(Index r) const {
    return format == ActivationFormat::q8_k ? sums.data() + r * (cols / 16) : nullptr;
  }
  const std::int16_t* row_pair_sums(Index r) const {
    return format == ActivationFormat::q8_k ? pair_sums.data() + r * (cols / 32) : nullptr;
  }
  const float* row_block_sums(Index r) const {
    return format == ActivationFormat::q8_1 ? block_sums.data() + r * (cols / 32) : nullptr;
  }
};

namespace detail {

/// x rounded to the nearest integer, ties to even (ggml's nearest_int and _MM_ROUND_NEAREST), |x| < 2²².
inline int round_half_even(float x) { return static_cast<int>(std::nearbyint(x)); }

/// x rounded to IEEE binary16 (nearest, ties to even) and widened back to float32 (ggml's FP32_TO_FP16 then
/// FP16_TO_FP32).
inline float round_to_half(float x) { return static_cast<float>(Eigen::half(x)); }

/// One q8_0 block (32 elements) of x into q[0, 32) and its scale (see the header comment); returns the scale before
/// its rounding to binary16, amax / 127.
inline float quantize_block_q8_0(const float* x, std::int8_t* q, float& scale) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float unrounded = amax / 127.0f;
  scale = round_to_half(unrounded);
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<std::int8_t>(round_half_even(x[j] * id));
  return unrounded;
}

/// One q8_1 block (32 elements) of x into q[0, 32), its scale and its block sum s (see the header comment).
inline void quantize_block_q8_1(const float* x, std::int8_t* q, float& scale, float& block_sum) {
  const float unrounded = quantize_block_q8_0(x, q, scale);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += q[j];
  block_sum = round_to_half(unrounded * static_cast<float>(sum));
}

/// One q8_K block (256 elements) of x into q[0, 256), its scale and its 16 sums (see the header comment).
inline void quantize_block_q8_k(const float* x, std::int8_t* q, float& scale, std::int16_t* sums) {
  float amax = 0.0f, largest = 0.0f;
  for (int j = 0; j < 256; ++j) {
    const float magnitude = std::fabs(x[j]);
    if (magnitude > amax) {
      amax = magnitude;
      largest = x[j];
    }
  }
  if (amax == 0.0f) {
    scale = 0.0f;
    for (int j = 0; j < 256; ++j) q[j] = 0;
    for (int j = 0; j < 16; ++j) sums[j] = 0;
    return;
  }
  const float iscale = -127.0f / largest;
  for (int j = 0; j < 256; ++j) q[j] = static_cast<std::int8_t>(std::min(127, round_half_even(iscale * x[j])));
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += q[16 * j + i];
    sums[j] = static_cast<std::int16_t>(sum);
  }
  scale = 1.0f / iscale;
}

}  // namespace detail

/// Rounds rows × cols activations (row r at x + r·stride) to `format` into `out` (resized; its buffers reused).
/// Throws attnscope::invalid_argument when cols is not a whole number of blocks, or naming the row and column of
/// the first non-finite activation (an 8-bit integer cannot carry it). O(rows · cols).
inline void quantize_activations(const float* x, Index rows, Index cols, Index stride, ActivationFormat format,
                                 QuantizedActivations& out) {
  const Index block = activation_block_elements(format);
  if (rows < 0 || cols < 0 || cols % block != 0)
    attnscope::detail::throw_invalid_argument("quantize_activations", "rows of ", cols, " activations are not whole ",
                                              activation_format_name(format), " blocks of ", block);
  out.format = format;
  out.rows = rows;
  out.cols = cols;
  out.quants.resize(static_cast<std::size_t>(rows * cols));
  out.scales.resize(static_cast<std::size_t>(rows * (cols / block)));
  out.sums.resize(format == ActivationFormat::q8_k ? static_cast<std::size_t>(rows * (cols / 16)) : 0);
  out.pair_sums.resize(format == ActivationFormat::q8_k ? static_cast<std::size_t>(rows * (cols / 32)) : 0);
  out.block_sums.resize(format == ActivationFormat::q8_1 ? static_cast<std::size_t>(rows * (cols / 32)) : 0);
  for (Index r = 0; r < rows; ++r) {
    const float* row = x + r * stride;
    for (Index c = 0; c < cols; ++c)
      if (!std::isfinite(row[c]))
        attnscope::detail::throw_invalid_argument("quantize_activations", "activation (", r, ", ", c,
                                                  ") is not finite: ", row[c]);
    std::int8_t* q = out.quants.data() + r * cols;
    float* scales = out.scales.data() + r * (cols / block);
    for (Index b = 0; b < cols / block; ++b) {
      if (format == ActivationFormat::q8_0)
        detail::quantize_block_q8_0(row + b * block, q + b * block, scales[b]);
      else if (format == ActivationFormat::q8_1)
        detail::quantize_block_q8_1(row + b * block, q + b * block, scales[b], out.block_sums[std::size_t(r * (cols / 32) + b)]);
      else
        detail::quantize_block_q8_k(row + b * block, q + b * block, scales[b], out.sums.data() + r * (cols / 16) + 16 * b);
    }
    for (Index p = 0; p < static_cast<Index>(out.pair_sums.size()) / std::max<Index>(rows, 1); ++p)
      out.pair_sums[std::size_t(r * (cols / 32) + p)] = static_cast<std::int16_t>(
          out.sums[std::size_t(r * (cols / 16) + 2 * p)] + out.sums[std::size_t(r * (cols / 16) + 2 * p + 1)]);
  }
}

}  // namespace attnscope::kernels
