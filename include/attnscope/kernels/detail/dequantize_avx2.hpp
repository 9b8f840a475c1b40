// attnscope/kernels/detail/dequantize_avx2.hpp — the AVX2 + F16C paths of the float16 / bfloat16 widening and of
// the block dequantization (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) of kernels/dequantize.hpp
// and kernels/widen.hpp.
//
// Every function here gives, element for element, the bits of the scalar reference beside which it is declared
// (dequantize_*_reference, widen_reference): the same float32 operations in the same order, eight lanes at a time.
// Integers are converted exactly (a quant fits a float32); the products are single roundings; and where ggml's
// formula adds or subtracts after a product (Q4_1, Q5_1: q·d + m; Q2_K, Q4_K, Q5_K: (d·sc)·q − dmin·m) the product
// is pinned in a register (detail::avx2_dequantize::pin) so that no compiler fuses the two into a multiply-add,
// whatever -ffp-contract and -march say. NaN inputs give NaN outputs, possibly with another payload (F16C quiets a
// signalling NaN; the scalar fp16 conversion keeps it). tests/kernels/test_dequantize.cpp checks the equality on
// random blocks.
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
#include "attnscope/kernels/detail/cpu_features.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(EIGEN_DONT_VECTORIZE) && \
    !defined(ATTNSCOPE_NO_RUNTIME_DISPATCH)
#define ATTNSCOPE_DEQUANTIZE_AVX2 1
#include <immintrin.h>
#endif

#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
namespace attnscope::kernels::detail::avx2_dequantize {

/// Whether the running CPU has AVX2 and F16C (the condition for calling anything else in this namespace).
inline bool available() { return cpu_has_avx2_f16c(); }

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

/// out[0, 32) from the 32 quants in `q` (int8 when Signed, else uint8): q·scale, the first 16 with scale_first and
/// offset_first, the last 16 with scale_second and offset_second; with Offset −1 the offset is then subtracted, with
/// +1 added (the product pinned first: rounded on its own, never fused), with 0 not used.
template <bool Signed, int Offset>
ATTNSCOPE_DEQUANTIZE_TARGET inline void affine_32(__m256i q, float scale_first, float scale_second, float offset_first,
                                                  float offset_second, float* out) {
  __m256i wide[4];
  widen_bytes<Signed>(_mm256_castsi256_si128(q), wide[0], wide[1]);
  widen_bytes<Signed>(_mm256_extracti128_si256(q, 1), wide[2], wide[3]);
  const __m256 scales[2] = {_mm256_set1_ps(scale_first), _mm256_set1_ps(scale_second)};
  const __m256 offsets[2] = {pin(_mm256_set1_ps(offset_first)), pin(_mm256_set1_ps(offset_second))};
  for (int k = 0; k < 4; ++k) {
    const __m256 product = _mm256_mul_ps(_mm256_cvtepi32_ps(wide[k]), scales[k / 2]);
    if constexpr (Offset == 0) _mm256_storeu_ps(out + 8 * k, product);
    else if constexpr (Offset < 0) _mm256_storeu_ps(out + 8 * k, _mm256_sub_ps(pin(product), offsets[k / 2]));
    else _mm256_storeu_ps(out + 8 * k, _mm256_add_ps(pin(product), offsets[k / 2]));
  }
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
    affine_32<true, 0>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 2)), half_at(data), half_at(data),
                       0, 0, out);
}

/// dequantize_q4_0_reference on AVX2: y = (nibble − 8) · d, low nibbles first.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q4_0(const unsigned char* data, Index blocks, float* out) {
  const __m128i low_mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  for (Index b = 0; b < blocks; ++b, data += 18, out += 32) {
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 2));
    const __m128i low = _mm_sub_epi8(_mm_and_si128(qs, low_mask), eight);
    const __m128i high = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), low_mask), eight);
    affine_32<true, 0>(_mm256_set_m128i(high, low), half_at(data), half_at(data), 0, 0, out);
  }
}

/// The 16 bytes of nibbles at `qs` as 32 bytes: the low nibbles (elements 0–15), then the high ones (16–31).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline __m256i split_nibbles(const unsigned char* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), low_mask = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_mask), _mm_and_si128(bytes, low_mask));
}

/// 16 in byte i where bit i of the little-endian 32-bit word at `qh` is set, else 0 (Q5_0 / Q5_1's fifth bits).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline __m256i fifth_bits(const unsigned char* qh) {
  std::int32_t word;
  std::memcpy(&word, qh, 4);
  // byte i receives byte i / 8 of the word (each 128-bit lane holds the word in its bytes 0–3), then its bit i mod 8
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(word), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                                3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

/// dequantize_q4_1_reference on AVX2: y = pin(q·d) + m.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q4_1(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += 20, out += 32)
    affine_32<false, 1>(split_nibbles(data + 4), half_at(data), half_at(data), half_at(data + 2), half_at(data + 2),
                        out);
}

/// dequantize_q5_0_reference (Offset false: y = (q − 16)·d) or dequantize_q5_1_reference (true: y = pin(q·d) + m)
/// on AVX2.
template <bool Offset>
ATTNSCOPE_DEQUANTIZE_TARGET void q5_0_1(const unsigned char* data, Index blocks, float* out) {
  const unsigned char* first = data;
  for (Index b = 0; b < blocks; ++b, first += Offset ? 24 : 22, out += 32) {
    const unsigned char* qh = first + (Offset ? 4 : 2);
    const __m256i q = _mm256_or_si256(split_nibbles(qh + 4), fifth_bits(qh));
    const float d = half_at(first), m = Offset ? half_at(first + 2) : 0.0f;
    if constexpr (Offset) affine_32<false, 1>(q, d, d, m, m, out);
    else affine_32<true, 0>(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), d, d, 0, 0, out);
  }
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
      const float d0 = d * static_cast<float>(sc0), d1 = d * static_cast<float>(sc1);
      const float min0 = exact_product(dmin, m0), min1 = exact_product(dmin, m1);
      affine_32<false, -1>(low, d0, d0, min0, min0, out + 64 * c);
      affine_32<false, -1>(high, d1, d1, min1, min1, out + 64 * c + 32);
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
        const int sub = 8 * n + 2 * k;  // elements 128n + 32k + l, scale index (128n + 32k + l) / 16
        affine_32<true, 0>(q, d * static_cast<float>(scales[sub]), d * static_cast<float>(scales[sub + 1]), 0, 0,
                           out + 128 * n + 32 * k);
      }
    }
  }
}

/// dequantize_q2_k_reference on AVX2: per half n and pair k, the 2-bit quants (qs[32n + l] >> 2k) & 3 of sub-blocks
/// 8n + 2k (l < 16) and 8n + 2k + 1, pin((d·sc)·q) − dmin·m.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q2_k(const unsigned char* data, Index blocks, float* out) {
  const __m256i two_bits = _mm256_set1_epi8(3);
  for (Index b = 0; b < blocks; ++b, data += 84, out += 256) {
    const float d = half_at(data + 80), dmin = half_at(data + 82);
    // the sixteen scales and mins first: with the block's bytes indexed inside the unrolled loops below, GCC 12 at -O3
    // (or -O2 -funroll-loops) -march=native emitted code that stored nothing (caught by tests/kernels/
    // test_dequantize.cpp; -fno-ivopts avoided it)
    float scales[16], mins[16];
    for (int j = 0; j < 16; ++j) {
      scales[j] = d * static_cast<float>(data[j] & 15);
      mins[j] = exact_product(dmin, data[j] >> 4);
    }
    for (int n = 0; n < 2; ++n) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 16 + 32 * n));
      for (int k = 0; k < 4; ++k) {
        const int sub = 8 * n + 2 * k;
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), two_bits);
        affine_32<false, -1>(q, scales[sub], scales[sub + 1], mins[sub], mins[sub + 1], out + 128 * n + 32 * k);
      }
    }
  }
}

/// dequantize_q3_k_reference on AVX2: per half n and pair k, the two low bits (qs[32n + l] >> 2k) & 3 minus 4 where
/// bit 4n + k of hmask[l] is clear, times d·sc of sub-blocks 8n + 2k (l < 16) and 8n + 2k + 1.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q3_k(const unsigned char* data, Index blocks, float* out) {
  const __m256i two_bits = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  for (Index b = 0; b < blocks; ++b, data += 110, out += 256) {
    const float d = half_at(data + 108);
    float scales[16];  // first, as in q2_k
    for (int j = 0; j < 16; ++j) scales[j] = d * static_cast<float>(q3_k_scale(data + 96, j));
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data));
    for (int n = 0; n < 2; ++n) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 32 + 32 * n));
      for (int k = 0; k < 4; ++k) {
        const int sub = 8 * n + 2 * k;
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * n + k)));
        const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), _mm256_setzero_si256());
        const __m256i q = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), two_bits),
                                          _mm256_and_si256(clear, four));
        affine_32<true, 0>(q, scales[sub], scales[sub + 1], 0, 0, out + 128 * n + 32 * k);
      }
    }
  }
}

#undef ATTNSCOPE_DEQUANTIZE_TARGET

}  // namespace attnscope::kernels::detail::avx2_dequantize
#endif
