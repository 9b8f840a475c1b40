// attnscope/kernels/detail/dequantize_avx2.hpp — the AVX2 + F16C paths of the float16 / bfloat16 widening and of
// the block dequantization (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) of kernels/dequantize.hpp and kernels/widen.hpp.
//
// Every function here gives, element for element, the bits of the scalar reference beside which it is declared
// (dequantize_*_reference, widen_reference): the same float32 operations in the same order, eight lanes at a time.
// Integers are converted exactly (a quant fits a float32); the products are single roundings; and where ggml's
// formula subtracts after a product (Q4_K, Q5_K: (d·sc)·q − dmin·m) the product is pinned in a register
// (detail::avx2_dequantize::pin) so that no compiler fuses the two into a multiply-add, whatever -ffp-contract and
// -march say. tests/kernels/test_dequantize.cpp checks the equality on random blocks.
//
// Dispatch (as kernels/runtime_dispatch.hpp): the functions carry __attribute__((target("avx2,f16c"))), so GCC and
// Clang compile them whatever the translation unit's flags; they are called when the running CPU has AVX2 and F16C
// (always when the build itself targets them). Active on x86-64 with GCC or Clang unless EIGEN_DONT_VECTORIZE or
// ATTNSCOPE_NO_RUNTIME_DISPATCH is defined (then the scalar references run).
#pragma once

#include <cstdint>
#include <cstring>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/block_scales.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(EIGEN_DONT_VECTORIZE) && \
    !defined(ATTNSCOPE_NO_RUNTIME_DISPATCH)
#define ATTNSCOPE_DEQUANTIZE_AVX2 1
#include <immintrin.h>
#endif

#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
namespace attnscope::kernels::detail::avx2_dequantize {

/// Whether the running CPU has AVX2 and F16C (the condition for calling anything else in this namespace).
inline bool available() {
#if defined(__AVX2__) && defined(__F16C__)
  return true;
#else
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
#endif
}

#define ATTNSCOPE_DEQUANTIZE_TARGET __attribute__((target("avx2,f16c")))

/// `value` unchanged, but opaque to the optimizer: a product passed through here is rounded to float32 before
/// whatever follows (no fused multiply-add).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline __m256 pin(__m256 value) {
  __asm__("" : "+x"(value));
  return value;
}

/// The IEEE binary16 at `bytes` as float32 (exact).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline float half_at(const unsigned char* bytes) {
  std::uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  return _cvtsh_ss(bits);
}

/// The 16 bytes of `bytes` as two packets of 8 signed 32-bit integers (bytes 0–7, bytes 8–15); Signed: as int8,
/// else as uint8.
template <bool Signed>
ATTNSCOPE_DEQUANTIZE_TARGET inline void widen_bytes(__m128i bytes, __m256i& first, __m256i& second) {
  const __m128i upper = _mm_srli_si128(bytes, 8);
  if constexpr (Signed) {
    first = _mm256_cvtepi8_epi32(bytes);
    second = _mm256_cvtepi8_epi32(upper);
  } else {
    first = _mm256_cvtepu8_epi32(bytes);
    second = _mm256_cvtepu8_epi32(upper);
  }
}

/// out[0, 32) = float(byte k of `bytes`) · scale (Signed: bytes as int8, else uint8).
template <bool Signed>
ATTNSCOPE_DEQUANTIZE_TARGET inline void scale_32_bytes(__m256i bytes, __m256 scale, float* out) {
  __m256i q[4];
  widen_bytes<Signed>(_mm256_castsi256_si128(bytes), q[0], q[1]);
  widen_bytes<Signed>(_mm256_extracti128_si256(bytes, 1), q[2], q[3]);
  for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(q[k]), scale));
}

/// bfloat16 (Bfloat true) or IEEE binary16 (false) → float32 on `count` elements, the tail in scalar code.
template <bool Bfloat>
ATTNSCOPE_DEQUANTIZE_TARGET void widen_16bit(const unsigned char* data, Index count, float* out) {
  Index i = 0;
  for (; i + 16 <= count; i += 16)
    for (int k = 0; k < 2; ++k) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 2 * (i + 8 * k)));
      if constexpr (Bfloat)
        _mm256_storeu_ps(out + i + 8 * k, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16)));
      else
        _mm256_storeu_ps(out + i + 8 * k, _mm256_cvtph_ps(raw));
    }
  for (; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    if constexpr (Bfloat) {
      const std::uint32_t wide = std::uint32_t(bits) << 16;
      std::memcpy(out + i, &wide, 4);
    } else {
      out[i] = _cvtsh_ss(bits);
    }
  }
}

/// dequantize_q8_0_reference on AVX2: y = q · d.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q8_0(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += 34, out += 32)
    scale_32_bytes<true>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 2)),
                         _mm256_set1_ps(half_at(data)), out);
}

/// dequantize_q4_0_reference on AVX2: y = (nibble − 8) · d, low nibbles first.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q4_0(const unsigned char* data, Index blocks, float* out) {
  const __m128i low_mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  for (Index b = 0; b < blocks; ++b, data += 18, out += 32) {
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 2));
    const __m128i low = _mm_sub_epi8(_mm_and_si128(qs, low_mask), eight);
    const __m128i high = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), low_mask), eight);
    scale_32_bytes<true>(_mm256_set_m128i(high, low), _mm256_set1_ps(half_at(data)), out);
  }
}

/// out[0, 32) = pin((d_sub · q_k)) − min_sub, q the 32 unsigned bytes of `q` (Q4_K / Q5_K's sub-block formula).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline void scale_min_32(__m256i q, float d_sub, float min_sub, float* out) {
  __m256i wide[4];
  widen_bytes<false>(_mm256_castsi256_si128(q), wide[0], wide[1]);
  widen_bytes<false>(_mm256_extracti128_si256(q, 1), wide[2], wide[3]);
  const __m256 scale = _mm256_set1_ps(d_sub), min = pin(_mm256_set1_ps(min_sub));
  for (int k = 0; k < 4; ++k)
    _mm256_storeu_ps(out + 8 * k, _mm256_sub_ps(pin(_mm256_mul_ps(_mm256_cvtepi32_ps(wide[k]), scale)), min));
}

/// dequantize_q4_k_reference (FifthBit false) / dequantize_q5_k_reference (true) on AVX2.
template <bool FifthBit>
ATTNSCOPE_DEQUANTIZE_TARGET void q4_q5_k(const unsigned char* data, Index blocks, float* out) {
  const __m256i low_mask = _mm256_set1_epi8(15), sixteen = _mm256_set1_epi8(16);
  for (Index b = 0; b < blocks; ++b, data += FifthBit ? 176 : 144, out += 256) {
    const float d = half_at(data), dmin = half_at(data + 2);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 16));  // Q5_K only
    const unsigned char* qs = data + (FifthBit ? 48 : 16);
    for (int c = 0; c < 4; ++c) {
      int sc0, m0, sc1, m1;
      k_scale_min(data + 4, 2 * c, sc0, m0);
      k_scale_min(data + 4, 2 * c + 1, sc1, m1);
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      __m256i low = _mm256_and_si256(bytes, low_mask);
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
      if constexpr (FifthBit) {
        const __m256i bit_low = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
        const __m256i bit_high = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
        low = _mm256_or_si256(low, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_low), bit_low), sixteen));
        high = _mm256_or_si256(high,
                               _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_high), bit_high), sixteen));
      }
      scale_min_32(low, d * static_cast<float>(sc0), exact_product(dmin, m0), out + 64 * c);
      scale_min_32(high, d * static_cast<float>(sc1), exact_product(dmin, m1), out + 64 * c + 32);
    }
  }
}

/// dequantize_q6_k_reference on AVX2: per half, the four 32-element groups assembled from ql and qh, minus 32, each
/// times the scales of its two sub-blocks of 16.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q6_k(const unsigned char* data, Index blocks, float* out) {
  const __m256i low_mask = _mm256_set1_epi8(15), two_bits = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
  for (Index b = 0; b < blocks; ++b, data += 210, out += 256) {
    const float d = half_at(data + 208);
    const auto* scales = reinterpret_cast<const std::int8_t*>(data + 192);
    for (int n = 0; n < 2; ++n) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 64 * n));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 64 * n + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 128 + 32 * n));
      const __m256i nibbles[4] = {_mm256_and_si256(a, low_mask), _mm256_and_si256(c, low_mask),
                                  _mm256_and_si256(_mm256_srli_epi16(a, 4), low_mask),
                                  _mm256_and_si256(_mm256_srli_epi16(c, 4), low_mask)};
      for (int k = 0; k < 4; ++k) {
        const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * k), two_bits), 4);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles[k], high), bias);
        __m256i wide[4];
        widen_bytes<true>(_mm256_castsi256_si128(q), wide[0], wide[1]);
        widen_bytes<true>(_mm256_extracti128_si256(q, 1), wide[2], wide[3]);
        const int sub = 8 * n + 2 * k;  // elements 128n + 32k + l, scale index (128n + 32k + l) / 16
        const __m256 first = _mm256_set1_ps(d * static_cast<float>(scales[sub]));
        const __m256 second = _mm256_set1_ps(d * static_cast<float>(scales[sub + 1]));
        float* y = out + 128 * n + 32 * k;
        for (int g = 0; g < 4; ++g)
          _mm256_storeu_ps(y + 8 * g, _mm256_mul_ps(g < 2 ? first : second, _mm256_cvtepi32_ps(wide[g])));
      }
    }
  }
}

#undef ATTNSCOPE_DEQUANTIZE_TARGET

}  // namespace attnscope::kernels::detail::avx2_dequantize
#endif
