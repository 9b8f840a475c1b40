// attnscope/kernels/dequantize.hpp — dequantization of ggml's block-quantized weight formats (GGUF files): Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_K and the k-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Each function turns `blocks`
// consecutive blocks at `data` (any alignment, little-endian) into blocks × block_elements float32 values.
// dequantize_T_reference is the scalar definition; dequantize_T gives the same values bit for bit (a NaN may carry
// another payload), with AVX2 + F16C for all but Q8_K when the CPU has them (kernels/detail/dequantize_avx2.hpp,
// dispatched at run time). The block layouts and formulas are ggml's (ggml/src/ggml-common.h for the block structs,
// ggml-quants.c dequantize_row_* for the formulas), restated here.
//
// Rounding: every product and difference is rounded to float32 separately, in the order ggml's C code writes it
// (y = d·sc then y·q, (d·sc)·q − dmin·m, q·d + m): no fused multiply-add, so the values do not depend on the
// compiler's -ffp-contract or the target. Where a product is followed by an addition, both products are formed
// exactly in double (a 24-bit significand times a small integer) and rounded to float32 explicitly before it
// (detail::exact_product). The fp16 scales are widened exactly. tests/io/test_gguf.cpp checks every type bit for bit
// against an independent numpy implementation (tests/fixtures/make_gguf_fixtures.py), tests/kernels/
// test_dequantize.cpp the AVX2 paths against the references on random blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/block_scales.hpp"
#include "attnscope/kernels/detail/dequantize_avx2.hpp"

namespace attnscope::kernels {

/// Q8_0 — 32 elements in 34 bytes: { fp16 d; int8 q[32] }. y[i] = d · q[i].
constexpr int q8_0_block_elements = 32, q8_0_block_bytes = 34;
inline void dequantize_q8_0_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q8_0_block_bytes, out += q8_0_block_elements) {
    const float d = detail::half_to_float(data);
    for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(static_cast<std::int8_t>(data[2 + i])) * d;
  }
}

/// Q4_0 — 32 elements in 18 bytes: { fp16 d; uint8 qs[16] }. Element i < 16 is the low nibble of qs[i], element
/// i + 16 its high nibble; y = (nibble − 8) · d.
constexpr int q4_0_block_elements = 32, q4_0_block_bytes = 18;
inline void dequantize_q4_0_reference(const unsigned char* data, Index blocks, float* out) {
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
      const float d0 = d * static_cast<float>(sc0), min0 = exact_product(dmin, m0);
      const float d1 = d * static_cast<float>(sc1), min1 = exact_product(dmin, m1);
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

inline void dequantize_q4_k_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_q4_q5_k<false>(data, blocks, out);
}
inline void dequantize_q5_k_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_q4_q5_k<true>(data, blocks, out);
}

/// Q6_K — 256 elements in 210 bytes: { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d }, sixteen sub-blocks
/// of 16 (element e has scale scales[e / 16]). Each half n (elements 128n .. 128n + 127) uses ql[64n ..], qh[32n ..];
/// for l < 32 its elements l, l + 32, l + 64, l + 96 take the low nibble of ql[64n + l], the low nibble of
/// ql[64n + 32 + l], the high nibble of ql[64n + l], the high nibble of ql[64n + 32 + l], with bits 0–1, 2–3, 4–5,
/// 6–7 of qh[32n + l] as their two high bits. y = (d·sc)·(q − 32), q the 6-bit value.
constexpr int q6_k_block_elements = 256, q6_k_block_bytes = 210;
inline void dequantize_q6_k_reference(const unsigned char* data, Index blocks, float* out) {
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


/// Q4_1 — 32 elements in 20 bytes: { fp16 d; fp16 m; uint8 qs[16] }. Element i < 16 is the low nibble of qs[i],
/// element i + 16 its high nibble; y = q·d + m.
constexpr int q4_1_block_elements = 32, q4_1_block_bytes = 20;
inline void dequantize_q4_1_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q4_1_block_bytes, out += q4_1_block_elements) {
    const float d = detail::half_to_float(data), m = detail::half_to_float(data + 2);
    const unsigned char* qs = data + 4;
    for (int i = 0; i < 16; ++i) {
      out[i] = detail::exact_product(d, qs[i] & 15) + m;
      out[i + 16] = detail::exact_product(d, qs[i] >> 4) + m;
    }
  }
}

namespace detail {

/// Q5_0 (Offset false: { fp16 d; uint8 qh[4]; uint8 qs[16] }, y = (q − 16)·d) or Q5_1 (true: { fp16 d; fp16 m;
/// uint8 qh[4]; uint8 qs[16] }, y = q·d + m): Q4_0 / Q4_1's nibbles plus a fifth bit, worth 16, from the 32-bit
/// little-endian word qh: bit i for element i (< 16), bit i + 16 for element i + 16.
template <bool Offset>
void dequantize_q5_0_1(const unsigned char* data, Index blocks, float* out) {
  const int block_bytes = Offset ? 24 : 22;
  for (Index b = 0; b < blocks; ++b, data += block_bytes, out += 32) {
    const float d = half_to_float(data);
    const float m = Offset ? half_to_float(data + 2) : 0.0f;
    const unsigned char* fifth = data + (Offset ? 4 : 2);
    const std::uint32_t qh = std::uint32_t(fifth[0]) | std::uint32_t(fifth[1]) << 8 | std::uint32_t(fifth[2]) << 16 |
                             std::uint32_t(fifth[3]) << 24;
    const unsigned char* qs = fifth + 4;
    for (int i = 0; i < 16; ++i) {
      const int low = (qs[i] & 15) | static_cast<int>(((qh >> i) & 1) << 4);
      const int high = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4);
      if (Offset) {
        out[i] = exact_product(d, low) + m;
        out[i + 16] = exact_product(d, high) + m;
      } else {
        out[i] = static_cast<float>(low - 16) * d;
        out[i + 16] = static_cast<float>(high - 16) * d;
      }
    }
  }
}

}  // namespace detail

/// Q5_0 — 32 elements in 22 bytes: { fp16 d; uint8 qh[4]; uint8 qs[16] }; y = (q − 16)·d, q the 5-bit value
/// (detail::dequantize_q5_0_1).
constexpr int q5_0_block_elements = 32, q5_0_block_bytes = 22;
inline void dequantize_q5_0_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_q5_0_1<false>(data, blocks, out);
}

/// Q5_1 — 32 elements in 24 bytes: { fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16] }; y = q·d + m.
constexpr int q5_1_block_elements = 32, q5_1_block_bytes = 24;
inline void dequantize_q5_1_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_q5_0_1<true>(data, blocks, out);
}

/// Q2_K — 256 elements in 84 bytes: { uint8 scales[16]; uint8 qs[64]; fp16 d; fp16 dmin }, sixteen sub-blocks of
/// 16, scales[j] holding the 4-bit scale sc_j (low nibble) and min m_j (high nibble) of sub-block j. Element
/// 128n + 32k + l (n < 2, k < 4, l < 32) is bits 2k, 2k + 1 of qs[32n + l], in sub-block 8n + 2k + ⌊l/16⌋.
/// y = (d·sc_j)·q − (dmin·m_j).
constexpr int q2_k_block_elements = 256, q2_k_block_bytes = 84;
inline void dequantize_q2_k_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q2_k_block_bytes, out += q2_k_block_elements) {
    const unsigned char* scales = data;
    const unsigned char* qs = data + 16;
    const float d = detail::half_to_float(data + 80), dmin = detail::half_to_float(data + 82);
    for (int j = 0; j < 16; ++j) {
      const int n = j / 8, k = (j % 8) / 2, first = 16 * (j % 2);  // sub-block j: l in [first, first + 16)
      const float scale = d * static_cast<float>(scales[j] & 15);
      const float min = detail::exact_product(dmin, scales[j] >> 4);
      for (int l = first; l < first + 16; ++l)
        out[128 * n + 32 * k + l] = detail::exact_product(scale, (qs[32 * n + l] >> (2 * k)) & 3) - min;
    }
  }
}

/// Q3_K — 256 elements in 110 bytes: { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; fp16 d }, sixteen
/// sub-blocks of 16 with signed 6-bit scales sc_j packed in `scales` (detail::q3_k_scale). Element 128n + 32k + l
/// (n < 2, k < 4, l < 32) has the two low bits 2k, 2k + 1 of qs[32n + l] and, as its third bit, bit 4n + k of
/// hmask[l], stored inverted: q = low bits − (4 when that bit is 0); it is in sub-block 8n + 2k + ⌊l/16⌋.
/// y = (d·sc_j)·q, q ∈ [−4, 3].
constexpr int q3_k_block_elements = 256, q3_k_block_bytes = 110;
inline void dequantize_q3_k_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q3_k_block_bytes, out += q3_k_block_elements) {
    const unsigned char* hmask = data;
    const unsigned char* qs = data + 32;
    const float d = detail::half_to_float(data + 108);
    for (int j = 0; j < 16; ++j) {
      const int n = j / 8, k = (j % 8) / 2, first = 16 * (j % 2);
      const float scale = d * static_cast<float>(detail::q3_k_scale(data + 96, j));
      for (int l = first; l < first + 16; ++l) {
        const int q = ((qs[32 * n + l] >> (2 * k)) & 3) - (((hmask[l] >> (4 * n + k)) & 1) ? 0 : 4);
        out[128 * n + 32 * k + l] = scale * static_cast<float>(q);
      }
    }
  }
}

/// Q8_K — 256 elements in 292 bytes: { float32 d; int8 qs[256]; int16 bsums[16] } (bsums, the sums of 16 quants
/// each, serve ggml's dot products and are not read here). y = d·q.
constexpr int q8_k_block_elements = 256, q8_k_block_bytes = 292;
inline void dequantize_q8_k_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += q8_k_block_bytes, out += q8_k_block_elements) {
    float d;
    std::memcpy(&d, data, 4);
    for (int i = 0; i < 256; ++i) out[i] = d * static_cast<float>(static_cast<std::int8_t>(data[4 + i]));
  }
}

/// The instruction set the dequantizers and kernels::widen run on this CPU: "avx2+f16c" when the AVX2 path is
/// compiled in (kernels/detail/dequantize_avx2.hpp) and the CPU has AVX2 and F16C, else "none" (the references run).
inline const char* dequantize_dispatch_target() {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  return detail::avx2_dequantize::available() ? "avx2+f16c" : "none";
#else
  return "none";
#endif
}

// The dequantizers: the bits of the references above, through the AVX2 + F16C code where the CPU has it.

inline void dequantize_q8_0(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q8_0(data, blocks, out);
#endif
  dequantize_q8_0_reference(data, blocks, out);
}
inline void dequantize_q4_0(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q4_0(data, blocks, out);
#endif
  dequantize_q4_0_reference(data, blocks, out);
}
inline void dequantize_q4_k(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q4_q5_k<false>(data, blocks, out);
#endif
  dequantize_q4_k_reference(data, blocks, out);
}
inline void dequantize_q5_k(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q4_q5_k<true>(data, blocks, out);
#endif
  dequantize_q5_k_reference(data, blocks, out);
}
inline void dequantize_q6_k(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q6_k(data, blocks, out);
#endif
  dequantize_q6_k_reference(data, blocks, out);
}
inline void dequantize_q4_1(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q4_1(data, blocks, out);
#endif
  dequantize_q4_1_reference(data, blocks, out);
}
inline void dequantize_q5_0(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q5_0_1<false>(data, blocks, out);
#endif
  dequantize_q5_0_reference(data, blocks, out);
}
inline void dequantize_q5_1(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q5_0_1<true>(data, blocks, out);
#endif
  dequantize_q5_1_reference(data, blocks, out);
}
inline void dequantize_q2_k(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q2_k(data, blocks, out);
#endif
  dequantize_q2_k_reference(data, blocks, out);
}
inline void dequantize_q3_k(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) return detail::avx2_dequantize::q3_k(data, blocks, out);
#endif
  dequantize_q3_k_reference(data, blocks, out);
}
inline void dequantize_q8_k(const unsigned char* data, Index blocks, float* out) {
  dequantize_q8_k_reference(data, blocks, out);
}

}  // namespace attnscope::kernels
