// attnscope/kernels/dequantize.hpp — scalar dequantization of ggml's block-quantized weight formats (GGUF files):
// Q8_0, Q4_0 and the k-quants Q4_K, Q5_K, Q6_K. Each function turns `blocks` consecutive blocks at `data` (any
// alignment, little-endian) into blocks × block_elements float32 values. The block layouts and formulas are ggml's
// (ggml/src/ggml-common.h for the block structs, ggml-quants.c dequantize_row_* for the formulas), restated here.
//
// Rounding: every product and difference is rounded to float32 separately, in the order ggml's C code writes it
// (y = d·sc then y·q, and (d·sc)·q − dmin·m): no fused multiply-add, so the values do not depend on the compiler's
// -ffp-contract or the target. The one expression a compiler could fuse, d1·q − m1, forms d1·q exactly in double
// (a 24-bit significand times an integer below 2⁵) and rounds it to float32 explicitly before the subtraction.
// The fp16 scales are widened exactly (Eigen::half). tests/kernels/test_dequantize.cpp checks every type bit for bit
// against an independent numpy implementation (tests/fixtures/make_gguf_fixtures.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"

namespace attnscope::kernels {

namespace detail {

/// The IEEE binary16 at `bytes` as float32 (exact).
inline float half_to_float(const unsigned char* bytes) {
  Eigen::half value;
  std::memcpy(&value, bytes, 2);
  return static_cast<float>(value);
}

/// The float32 product a·q rounded once (q a small integer), immune to contraction into a fused multiply-add.
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

}  // namespace detail

/// Q8_0 — 32 elements in 34 bytes: { fp16 d; int8 q[32] }. y[i] = d · q[i].
constexpr int q8_0_block_elements = 32, q8_0_block_bytes = 34;
inline void dequantize_q8_0(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q8_0_block_bytes, out += q8_0_block_elements) {
    const float d = detail::half_to_float(data);
    for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(static_cast<std::int8_t>(data[2 + i])) * d;
  }
}

/// Q4_0 — 32 elements in 18 bytes: { fp16 d; uint8 qs[16] }. Element i < 16 is the low nibble of qs[i], element
/// i + 16 its high nibble; y = (nibble − 8) · d.
constexpr int q4_0_block_elements = 32, q4_0_block_bytes = 18;
inline void dequantize_q4_0(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q4_0_block_bytes, out += q4_0_block_elements) {
    const float d = detail::half_to_float(data);
    const unsigned char* qs = data + 2;
    for (int i = 0; i < 16; ++i) {
      out[i] = static_cast<float>((qs[i] & 15) - 8) * d;
      out[i + 16] = static_cast<float>((qs[i] >> 4) - 8) * d;
    }
  }
}

/// Q4_K — 256 elements in 144 bytes: { fp16 d; fp16 dmin; uint8 scales[12]; uint8 qs[128] }, eight sub-blocks of
/// 32 with 6-bit scales sc_j and mins m_j packed in `scales` (detail::k_scale_min). Elements 64c .. 64c + 31 are the
/// low nibbles of qs[32c .. 32c + 31] (sub-block 2c), elements 64c + 32 .. 64c + 63 their high nibbles (sub-block
/// 2c + 1). y = (d·sc_j)·q − (dmin·m_j), q the 4-bit value.
constexpr int q4_k_block_elements = 256, q4_k_block_bytes = 144;
/// Q5_K — 256 elements in 176 bytes: { fp16 d; fp16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128] }: Q4_K's
/// scales and nibbles plus a fifth bit per element: for element 64c + l (l < 32) bit 2c of qh[l], for element
/// 64c + 32 + l bit 2c + 1 of qh[l], worth 16. y = (d·sc_j)·q − (dmin·m_j), q the 5-bit value.
constexpr int q5_k_block_elements = 256, q5_k_block_bytes = 176;

namespace detail {

/// Q4_K (FifthBit false) or Q5_K (true) blocks, as described above.
template <bool FifthBit>
void dequantize_q4_q5_k(const unsigned char* data, Index blocks, float* out) {
  const int block_bytes = FifthBit ? q5_k_block_bytes : q4_k_block_bytes;
  for (Index b = 0; b < blocks; ++b, data += block_bytes, out += 256) {
    const float d = half_to_float(data), dmin = half_to_float(data + 2);
    const unsigned char* scales = data + 4;
    const unsigned char* qh = data + 16;  // Q5_K only
    const unsigned char* qs = data + (FifthBit ? 48 : 16);
    for (int c = 0; c < 4; ++c) {
      int sc0, m0, sc1, m1;
      k_scale_min(scales, 2 * c, sc0, m0);
      k_scale_min(scales, 2 * c + 1, sc1, m1);
      const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
      for (int l = 0; l < 32; ++l) {
        int low = qs[32 * c + l] & 15, high = qs[32 * c + l] >> 4;
        if (FifthBit) {
          low |= ((qh[l] >> (2 * c)) & 1) << 4;
          high |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
        }
        out[64 * c + l] = exact_product(d0, low) - min0;
        out[64 * c + 32 + l] = exact_product(d1, high) - min1;
      }
    }
  }
}

}  // namespace detail

inline void dequantize_q4_k(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_q4_q5_k<false>(data, blocks, out);
}
inline void dequantize_q5_k(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_q4_q5_k<true>(data, blocks, out);
}

/// Q6_K — 256 elements in 210 bytes: { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d }, sixteen sub-blocks
/// of 16 (element e has scale scales[e / 16]). Each half n (elements 128n .. 128n + 127) uses ql[64n ..], qh[32n ..];
/// for l < 32 its elements l, l + 32, l + 64, l + 96 take the low nibble of ql[64n + l], the low nibble of
/// ql[64n + 32 + l], the high nibble of ql[64n + l], the high nibble of ql[64n + 32 + l], with bits 0–1, 2–3, 4–5,
/// 6–7 of qh[32n + l] as their two high bits. y = (d·sc)·(q − 32), q the 6-bit value.
constexpr int q6_k_block_elements = 256, q6_k_block_bytes = 210;
inline void dequantize_q6_k(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q6_k_block_bytes, out += q6_k_block_elements) {
    const unsigned char* ql = data;
    const unsigned char* qh = data + 128;
    const unsigned char* scales = data + 192;
    const float d = detail::half_to_float(data + 208);
    for (int n = 0; n < 2; ++n) {
      float* y = out + 128 * n;
      const unsigned char* l_bits = ql + 64 * n;
      const unsigned char* h_bits = qh + 32 * n;
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((l_bits[l] & 15) | (((h_bits[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((l_bits[l + 32] & 15) | (((h_bits[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((l_bits[l] >> 4) | (((h_bits[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((l_bits[l + 32] >> 4) | (((h_bits[l] >> 6) & 3) << 4)) - 32;
        const auto scale = [&](int e) { return d * static_cast<float>(static_cast<std::int8_t>(scales[e / 16])); };
        y[l] = scale(128 * n + l) * static_cast<float>(q1);
        y[l + 32] = scale(128 * n + l + 32) * static_cast<float>(q2);
        y[l + 64] = scale(128 * n + l + 64) * static_cast<float>(q3);
        y[l + 96] = scale(128 * n + l + 96) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace attnscope::kernels
