// attnscope/kernels/detail/block_scales.hpp — the scalar pieces shared by the reference and the AVX2 dequantization of
// ggml's block formats (kernels/dequantize.hpp, kernels/detail/dequantize_avx2.hpp): fp16 fields, a product rounded
// once, and the unpacking of the packed 6-bit sub-block scales of Q3_K, Q4_K, Q5_K and IQ4_XS.
#pragma once

#include <cstdint>
#include <cstring>

#include <Eigen/Core>

namespace attnscope::kernels::detail {

/// The IEEE binary16 at `bytes` as float32 (exact).
inline float half_to_float(const unsigned char* bytes) {
  Eigen::half value;
  std::memcpy(&value, bytes, 2);
  return static_cast<float>(value);
}

/// The float32 product a·q rounded once (q an integer below 2²⁹ in magnitude, so the double product is exact),
/// immune to contraction into a fused multiply-add with a following addition.
inline float exact_product(float a, int q) { return static_cast<float>(static_cast<double>(a) * q); }

/// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block's 12 packed bytes `s`:
///   j < 4: scale = s[j] & 63,                            min = s[j + 4] & 63
///   j ≥ 4: scale = (s[j + 4] & 15) | (s[j − 4] >> 6) << 4,  min = (s[j + 4] >> 4) | (s[j] >> 6) << 4
/// (ggml's get_scale_min_k4).
inline void k_scale_min(const unsigned char* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/// The signed scale (6-bit value − 32) of sub-block j (0..15) of a Q3_K block's 12 packed bytes `s`: the low four
/// bits are the low (j < 8) or high (j ≥ 8) nibble of s[j mod 8], the high two bits are bits 2⌊j/4⌋ mod 8 … of
/// s[8 + j mod 4] (ggml's block_q3_K scale packing, as dequantize_row_q3_K unpacks it).
inline int q3_k_scale(const unsigned char* s, int j) {
  const int low = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

/// The signed scale (6-bit ls − 32) of group g (0..7) of an IQ4_XS block { fp16 d; uint16 scales_h; uint8
/// scales_l[4]; … }: the low four bits are nibble g mod 2 of scales_l[g / 2], the high two bits 2g, 2g + 1 of the
/// little-endian scales_h (ggml's block_iq4_xs, as dequantize_row_iq4_xs unpacks it).
inline int iq4_xs_scale(const unsigned char* block, int g) {
  const unsigned scales_h = unsigned(block[2]) | unsigned(block[3]) << 8;
  const int ls = ((block[4 + g / 2] >> (4 * (g % 2))) & 15) | static_cast<int>(((scales_h >> (2 * g)) & 3) << 4);
  return ls - 32;
}

}  // namespace attnscope::kernels::detail
