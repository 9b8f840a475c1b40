// attnscope/kernels/detail/dequantize_avx2.hpp — the AVX2 + F16C paths of the float16 / bfloat16 widening and of
// the block dequantization (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) of kernels/dequantize.hpp
// and kernels/widen.hpp, and of the 4-bit codebook formats (IQ4_NL, IQ4_XS, MXFP4) of kernels/dequantize_iq.hpp.
//
// Every function here gives, element for element, the bits of the scalar reference beside which it is declared
// (dequantize_*_reference, widen_reference): the same float32 operations in the same order, eight lanes at a time.
// Integers are converted exactly (a quant fits a float32); the products are single roundings; and where ggml's
// formula adds or subtracts after a product (Q4_1, Q5_1: q·d + m; Q2_K, Q4_K, Q5_K: (d·sc)·q − dmin·m) the product
// is pinned in a register (detail::avx2_dequantize::pin) so that no compiler fuses the two into a multiply-add,
// whatever -ffp-contract and -march say. NaN inputs give NaN outputs, possibly with another payload (F16C quiets a
// signalling NaN; the scalar fp16 conversion keeps it). tests/kernels/test_dequantize.cpp checks the equality on
// random blocks. Written on the vector types of kernels/detail/simd_x86.hpp (no <immintrin.h>): byte-wise masks,
// shifts and comparisons, exact integer → float conversions (__builtin_convertvector), F16C's vcvtph2ps.
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
#include "attnscope/kernels/detail/simd_x86.hpp"
#endif

#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
namespace attnscope::kernels::detail::avx2_dequantize {

/// Whether the running CPU has AVX2 and F16C (the condition for calling anything else in this namespace).
inline bool available() { return cpu_has_avx2_f16c(); }

using x86::bits_as;
using x86::broadcast8;
using x86::f32x8;
using x86::i32x8;
using x86::load_bytes16;
using x86::load_bytes32;
using x86::store8;
using x86::u16x16;
using x86::u8x16;
using x86::u8x32;

#define ATTNSCOPE_DEQUANTIZE_TARGET __attribute__((target("avx2,f16c")))

/// `value` unchanged, but opaque to the optimizer: a product passed through here is rounded to float32 before
/// whatever follows (no fused multiply-add).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline f32x8 pin(f32x8 value) {
  __asm__("" : "+x"(value));
  return value;
}

/// The IEEE binary16 at `bytes` as float32 (exact).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline float half_at(const unsigned char* bytes) {
  std::uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  return x86::widen_half(bits);
}

/// out[0, 32) from 32 quants, the first 16 in `low` and the last 16 in `high` (int8 when Signed, else uint8):
/// q·scale, the first 16 with scale_first and offset_first, the last 16 with scale_second and offset_second; with
/// Offset −1 the offset is then subtracted, with +1 added (the product pinned first: rounded on its own, never fused),
/// with 0 not used.
template <bool Signed, int Offset>
ATTNSCOPE_DEQUANTIZE_TARGET inline void affine_32(u8x16 low, u8x16 high, float scale_first, float scale_second,
                                                  float offset_first, float offset_second, float* out) {
  const i32x8 wide[4] = {x86::widen_bytes<Signed, 0>(low), x86::widen_bytes<Signed, 1>(low),
                         x86::widen_bytes<Signed, 0>(high), x86::widen_bytes<Signed, 1>(high)};
  const f32x8 scales[2] = {broadcast8(scale_first), broadcast8(scale_second)};
  const f32x8 offsets[2] = {pin(broadcast8(offset_first)), pin(broadcast8(offset_second))};
  for (int k = 0; k < 4; ++k) {
    const f32x8 product = __builtin_convertvector(wide[k], f32x8) * scales[k / 2];  // exact conversion, one rounding
    if constexpr (Offset == 0) store8(out + 8 * k, product);
    else if constexpr (Offset < 0) store8(out + 8 * k, pin(product) - offsets[k / 2]);
    else store8(out + 8 * k, pin(product) + offsets[k / 2]);
  }
}

/// affine_32 of the 32 quants in `q`.
template <bool Signed, int Offset>
ATTNSCOPE_DEQUANTIZE_TARGET inline void affine_32(u8x32 q, float scale_first, float scale_second, float offset_first,
                                                  float offset_second, float* out) {
  affine_32<Signed, Offset>(x86::half_of<0>(q), x86::half_of<1>(q), scale_first, scale_second, offset_first,
                            offset_second, out);
}

/// bfloat16 (Bfloat true) or IEEE binary16 (false) → float32 on `count` elements, the tail in scalar code.
template <bool Bfloat>
ATTNSCOPE_DEQUANTIZE_TARGET void widen_16bit(const unsigned char* data, Index count, float* out) {
  Index i = 0;
  for (; i + 16 <= count; i += 16)
    for (int k = 0; k < 2; ++k) {
      const unsigned char* raw = data + 2 * (i + 8 * k);
      if constexpr (Bfloat) {  // the 16 bits become the high half of the float32's bits
        const x86::u16x8 halves = bits_as<x86::u16x8>(load_bytes16(raw));
        store8(out + i + 8 * k, bits_as<f32x8>(x86::widen_u16(halves) << 16));
      } else {
        store8(out + i + 8 * k, x86::widen_halves8(raw));
      }
    }
  for (; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    if constexpr (Bfloat) {
      const std::uint32_t wide = std::uint32_t(bits) << 16;
      std::memcpy(out + i, &wide, 4);
    } else {
      out[i] = x86::widen_half(bits);
    }
  }
}

/// dequantize_q8_0_reference on AVX2: y = q · d.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q8_0(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += 34, out += 32)
    affine_32<true, 0>(load_bytes32(data + 2), half_at(data), half_at(data), 0, 0, out);
}

/// dequantize_q4_0_reference on AVX2: y = (nibble − 8) · d, low nibbles first.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q4_0(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += 18, out += 32) {
    const u8x16 qs = load_bytes16(data + 2);
    const u8x16 low = (qs & 15) - 8, high = (qs >> 4) - 8;  // as int8: nibble − 8
    affine_32<true, 0>(low, high, half_at(data), half_at(data), 0, 0, out);
  }
}

/// The 16 bytes of nibbles at `qs` as 32 bytes: the low nibbles (elements 0–15), then the high ones (16–31).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline u8x32 split_nibbles(const unsigned char* qs) {
  const u8x16 bytes = load_bytes16(qs);
  return x86::join(bytes & 15, bytes >> 4);
}

/// 16 in byte i where bit i of the little-endian 32-bit word at `qh` is set, else 0 (Q5_0 / Q5_1's fifth bits).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline u8x32 fifth_bits(const unsigned char* qh) {
  std::uint32_t word;
  std::memcpy(&word, qh, 4);
  // byte i receives byte i / 8 of the word (each 128-bit half holds the word in its bytes 0–3, so the permutation
  // stays within halves: vpshufb), then keeps its bit i mod 8
  const u8x32 words = bits_as<u8x32>(x86::u32x8{} + word);
  const u8x32 spread = x86::spread_word_bytes(words);
  const u8x32 bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                     1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  return bits_as<u8x32>((spread & bit) == bit) & 16;
}

/// dequantize_q4_1_reference on AVX2: y = pin(q·d) + m.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q4_1(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += 20, out += 32) {
    const u8x16 qs = load_bytes16(data + 4);  // low nibbles first
    affine_32<false, 1>(qs & 15, qs >> 4, half_at(data), half_at(data), half_at(data + 2), half_at(data + 2), out);
  }
}

/// dequantize_q5_0_reference (Offset false: y = (q − 16)·d) or dequantize_q5_1_reference (true: y = pin(q·d) + m)
/// on AVX2.
template <bool Offset>
ATTNSCOPE_DEQUANTIZE_TARGET void q5_0_1(const unsigned char* data, Index blocks, float* out) {
  const unsigned char* first = data;
  for (Index b = 0; b < blocks; ++b, first += Offset ? 24 : 22, out += 32) {
    const unsigned char* qh = first + (Offset ? 4 : 2);
    const u8x32 q = split_nibbles(qh + 4) | fifth_bits(qh);
    const float d = half_at(first), m = Offset ? half_at(first + 2) : 0.0f;
    if constexpr (Offset) affine_32<false, 1>(q, d, d, m, m, out);
    else affine_32<true, 0>(q - 16, d, d, 0, 0, out);
  }
}

/// dequantize_q4_k_reference (FifthBit false) / dequantize_q5_k_reference (true) on AVX2.
template <bool FifthBit>
ATTNSCOPE_DEQUANTIZE_TARGET void q4_q5_k(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += FifthBit ? 176 : 144, out += 256) {
    const float d = half_at(data), dmin = half_at(data + 2);
    const u8x32 qh = load_bytes32(data + 16);  // Q5_K only
    const unsigned char* qs = data + (FifthBit ? 48 : 16);
    for (int c = 0; c < 4; ++c) {
      int sc0, m0, sc1, m1;
      k_scale_min(data + 4, 2 * c, sc0, m0);
      k_scale_min(data + 4, 2 * c + 1, sc1, m1);
      const u8x32 bytes = load_bytes32(qs + 32 * c);
      u8x32 low = bytes & 15, high = bytes >> 4;
      if constexpr (FifthBit) {  // 16 where the block's bit of qh is set
        const auto bit_low = static_cast<unsigned char>(1u << (2 * c)), bit_high = static_cast<unsigned char>(2u << (2 * c));
        low |= bits_as<u8x32>((qh & bit_low) == bit_low) & 16;
        high |= bits_as<u8x32>((qh & bit_high) == bit_high) & 16;
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
  for (Index b = 0; b < blocks; ++b, data += 210, out += 256) {
    const float d = half_at(data + 208);
    const auto* scales = reinterpret_cast<const std::int8_t*>(data + 192);
    for (int n = 0; n < 2; ++n) {
      const u8x32 a = load_bytes32(data + 64 * n), c = load_bytes32(data + 64 * n + 32);
      const u8x32 h = load_bytes32(data + 128 + 32 * n);
      const u8x32 nibbles[4] = {a & 15, c & 15, a >> 4, c >> 4};
      for (int k = 0; k < 4; ++k) {
        // the two bits times 16, shifted in 16-bit lanes (x86 has no byte shift; the bits cannot cross a byte)
        const u8x32 high = bits_as<u8x32>(bits_as<u16x16>((h >> (2 * k)) & 3) << 4);
        const u8x32 q = (nibbles[k] | high) - 32;  // as int8: the 6-bit quant − 32
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
      const u8x32 qs = load_bytes32(data + 16 + 32 * n);
      for (int k = 0; k < 4; ++k) {
        const int sub = 8 * n + 2 * k;
        const u8x32 q = (qs >> (2 * k)) & 3;
        affine_32<false, -1>(q, scales[sub], scales[sub + 1], mins[sub], mins[sub + 1], out + 128 * n + 32 * k);
      }
    }
  }
}

/// dequantize_q3_k_reference on AVX2: per half n and pair k, the two low bits (qs[32n + l] >> 2k) & 3 minus 4 where
/// bit 4n + k of hmask[l] is clear, times d·sc of sub-blocks 8n + 2k (l < 16) and 8n + 2k + 1.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void q3_k(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += 110, out += 256) {
    const float d = half_at(data + 108);
    float scales[16];  // first, as in q2_k
    for (int j = 0; j < 16; ++j) scales[j] = d * static_cast<float>(q3_k_scale(data + 96, j));
    const u8x32 hmask = load_bytes32(data);
    for (int n = 0; n < 2; ++n) {
      const u8x32 qs = load_bytes32(data + 32 + 32 * n);
      for (int k = 0; k < 4; ++k) {
        const int sub = 8 * n + 2 * k;
        const auto bit = static_cast<unsigned char>(1u << (4 * n + k));
        const u8x32 clear = bits_as<u8x32>((hmask & bit) == 0);  // all-ones where the bit is clear
        const u8x32 q = ((qs >> (2 * k)) & 3) - (clear & 4);  // as int8
        affine_32<true, 0>(q, scales[sub], scales[sub + 1], 0, 0, out + 128 * n + 32 * k);
      }
    }
  }
}

/// The bytes levels[n] for each nibble n of `nibbles` (values 0–15): SSSE3's byte shuffle (vpshufb) with the 16
/// levels as its table.
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline u8x16 lookup16(u8x16 levels, u8x16 nibbles) {
  return bits_as<u8x16>(__builtin_ia32_pshufb128(bits_as<x86::c8x16>(levels), bits_as<x86::c8x16>(nibbles)));
}

/// 32 elements y = scale·v[nibble] from the 16 bytes at `qs` (low nibbles first), v the 16 int8 `levels`: the
/// reference's detail::nibble_levels (the product of the exactly converted level and the scale, one rounding).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET inline void nibble_levels(const unsigned char* qs, float scale, u8x16 levels, float* out) {
  const u8x16 bytes = load_bytes16(qs);
  affine_32<true, 0>(lookup16(levels, bytes & 15), lookup16(levels, bytes >> 4), scale, scale, 0, 0, out);
}

/// dequantize_iq4_nl_reference (BlockBytes 18, the fp16 d first) or dequantize_mxfp4_reference (17, the E8M0 byte
/// first, scale e8m0_half) on AVX2, with the 16 int8 levels `table`; scale_of(block) is the block's scale.
template <int BlockBytes, class ScaleOf>
ATTNSCOPE_DEQUANTIZE_TARGET void nibble_blocks(const unsigned char* data, Index blocks, const std::int8_t* table,
                                               ScaleOf scale_of, float* out) {
  const u8x16 levels = load_bytes16(reinterpret_cast<const unsigned char*>(table));
  for (Index b = 0; b < blocks; ++b, data += BlockBytes, out += 32)
    nibble_levels(data + BlockBytes - 16, scale_of(data), levels, out);
}

/// dequantize_iq4_xs_reference on AVX2: eight groups of 32, each nibble_levels with d·(ls − 32).
template <int = 0>
ATTNSCOPE_DEQUANTIZE_TARGET void iq4_xs(const unsigned char* data, Index blocks, const std::int8_t* table, float* out) {
  const u8x16 levels = load_bytes16(reinterpret_cast<const unsigned char*>(table));
  for (Index b = 0; b < blocks; ++b, data += 136, out += 256) {
    const float d = half_at(data);
    const std::uint32_t scales_h = std::uint32_t(data[2]) | std::uint32_t(data[3]) << 8;
    for (int g = 0; g < 8; ++g) {
      const int ls = ((data[4 + g / 2] >> (4 * (g % 2))) & 15) | static_cast<int>(((scales_h >> (2 * g)) & 3) << 4);
      nibble_levels(data + 8 + 16 * g, d * static_cast<float>(ls - 32), levels, out + 32 * g);
    }
  }
}

#undef ATTNSCOPE_DEQUANTIZE_TARGET

}  // namespace attnscope::kernels::detail::avx2_dequantize
#endif
