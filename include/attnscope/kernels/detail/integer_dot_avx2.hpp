// attnscope/kernels/detail/integer_dot_avx2.hpp — the AVX2 micro-kernels of the integer-dot product
// (kernels/integer_dot.hpp): per tile, integer_dot_tile_rows activation rows × integer_dot_tile_columns weight rows
// over the whole depth, each weight block decoded once (nibbles, fifth and sixth bits, sub-block scales) for all the
// tile's activation rows.
//
// Every output has the bits of the scalar reference beside it (detail::dot_*_reference in kernels/integer_dot.hpp):
// the lane integers are formed with vpmaddubsw (unsigned weight bytes × signed activation bytes, pairs summed to 16
// bits; Q8_0 and Q4_0 make the weight unsigned with vpsignb as ggml does) and vpmaddwd (by the sub-block scales, or by
// ones, pairs summed to 32 bits), which put element e of a 32-element group into lane (e mod 32) / 4 exactly as the
// reference does; no saturation is reachable (|weight| ≤ 128 after the sign trick, |activation| ≤ 127); and the
// float32 steps (vcvtdq2ps, vfmadd per block, the lane sum of x86::sum_lanes, the min terms by std::fma) are the
// reference's, in its order. tests/kernels/test_integer_dot.cpp checks the bits on random blocks.
//
// Dispatch: target("avx2,fma,f16c") functions, called when the CPU has AVX2, FMA and F16C (kernels/detail/
// cpu_features.hpp); written on the vector types of kernels/detail/simd_x86.hpp (no <immintrin.h>). Active on x86-64
// with GCC or Clang unless EIGEN_DONT_VECTORIZE or ATTNSCOPE_NO_RUNTIME_DISPATCH is defined.
#pragma once

#include <cmath>
#include <cstdint>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/block_scales.hpp"
#include "attnscope/kernels/detail/cpu_features.hpp"
#include "attnscope/kernels/detail/dequantize_avx2.hpp"
#include "attnscope/kernels/widen.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(EIGEN_DONT_VECTORIZE) && \
    !defined(ATTNSCOPE_NO_RUNTIME_DISPATCH)
#define ATTNSCOPE_INTEGER_DOT_AVX2 1
#include "attnscope/kernels/detail/simd_x86.hpp"
#endif

namespace attnscope::kernels::detail {

/// Activation rows and weight rows of one micro-kernel tile.
inline constexpr Index integer_dot_tile_rows = 8;
inline constexpr Index integer_dot_tile_columns = 1;

/// The operands of one tile: per activation row its quants, block scales and (q8_K) sums of 16, all from the row's
/// start; per weight row its first block; the depth in weight blocks.
struct IntegerDotTile {
  const std::int8_t* a[integer_dot_tile_rows] = {};
  const float* a_scales[integer_dot_tile_rows] = {};
  const std::int16_t* a_sums[integer_dot_tile_rows] = {};
  const std::int16_t* a_pair_sums[integer_dot_tile_rows] = {};
  const float* a_block_sums[integer_dot_tile_rows] = {};
  const unsigned char* w[integer_dot_tile_columns] = {};
  Index blocks = 0;
};

/// The 32-element 4-bit codebook formats paired with q8_0 activations: IQ4_NL { fp16 d; uint8 qs[16] } (Mxfp4 false)
/// and MXFP4 { uint8 e, an E8M0 scale; uint8 qs[16] } (true). Element i < 16 is levels[low nibble of qs[i]], element
/// i + 16 levels[its high nibble]; the block's scale is d, or 2^(e − 128) for MXFP4, whose levels are the E2M1 values
/// doubled (ggml's kvalues_iq4nl, kvalues_mxfp4 and GGML_E8M0_TO_FP32_HALF).
template <bool Mxfp4>
struct CodebookBlocks {
  static constexpr std::size_t bytes = Mxfp4 ? mxfp4_block_bytes : iq4_nl_block_bytes;
  static constexpr int quants = Mxfp4 ? 1 : 2;  // the offset of qs
  static const std::int8_t* levels() { return Mxfp4 ? fp4_doubled_values : iq4_nl_values; }
  static float scale(const unsigned char* block) { return Mxfp4 ? e8m0_half(block[0]) : half_to_float(block); }
};

}  // namespace attnscope::kernels::detail

#if defined(ATTNSCOPE_INTEGER_DOT_AVX2)
namespace attnscope::kernels::detail::avx2_integer_dot {

/// Whether the running CPU has AVX2, FMA and F16C (the condition for calling tile()).
inline bool available() { return cpu_has_avx2_fma() && cpu_has_avx2_f16c(); }

using x86::f32x8;
using x86::i16x16;
using x86::i32x8;
using x86::u8x16;
using x86::u8x32;

constexpr int MR = static_cast<int>(integer_dot_tile_rows);
constexpr int NR = static_cast<int>(integer_dot_tile_columns);
using Out = float[integer_dot_tile_rows][integer_dot_tile_columns];

#define ATTNSCOPE_INTEGER_DOT_TARGET __attribute__((target("avx2,fma,f16c")))

/// The 32 activation quants at `from`.
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET inline u8x32 activations32(const std::int8_t* from) {
  return x86::load_bytes32(reinterpret_cast<const unsigned char*>(from));
}

/// `value` in all 32 byte lanes.
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET inline u8x32 bytes_of(unsigned char value) {
  u8x32 out;
  for (int i = 0; i < 32; ++i) out[i] = value;
  return out;
}

/// The i16x16 of sixteen 16-bit lanes: `first` in lanes 0–7, `second` in lanes 8–15.
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET inline i16x16 two_scales(int first, int second) {
  const auto a = static_cast<std::int16_t>(first), b = static_cast<std::int16_t>(second);
  return i16x16{a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b};
}

/// Q8_0, Q4_0 or Q5_0 weights (Kind 0, 1, 2) · q8_0 activations.
template <int Kind>
ATTNSCOPE_INTEGER_DOT_TARGET void tile_q8_0_family(const IntegerDotTile& in, Out& out) {
  const std::size_t block_bytes = Kind == 0 ? q8_0_block_bytes : Kind == 1 ? q4_0_block_bytes : q5_0_block_bytes;
  const i16x16 ones = x86::broadcast16_i16(1);
  const u8x32 low_nibbles = bytes_of(15), eight = bytes_of(8), sixteen = bytes_of(16);
  f32x8 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = x86::broadcast8(0.0f);
  for (Index b = 0; b < in.blocks; ++b) {
    u8x32 weights[NR], magnitudes[NR];
    f32x8 weight_scales[NR];
    for (int j = 0; j < NR; ++j) {
      const unsigned char* block = in.w[j] + static_cast<std::size_t>(b) * block_bytes;
      weight_scales[j] = x86::broadcast8(half_to_float(block));
      if (Kind == 1) {
        const u8x16 packed = x86::load_bytes16(block + 2);
        const u8x16 low = packed & x86::half_of<0>(low_nibbles), high = (packed >> 4) & x86::half_of<0>(low_nibbles);
        weights[j] = x86::join(low, high) - eight;  // nibble − 8 as a signed byte
      } else if (Kind == 2) {  // nibble | fifth bit · 16, − 16 as a signed byte
        weights[j] = (avx2_dequantize::split_nibbles(block + 6) | avx2_dequantize::fifth_bits(block + 2)) - sixteen;
      } else {
        weights[j] = x86::load_bytes32(block + 2);
      }
      magnitudes[j] = x86::sign_bytes(weights[j], weights[j]);
    }
    for (int i = 0; i < MR; ++i) {
      const u8x32 a = activations32(in.a[i] + 32 * b);
      const f32x8 a_scale = x86::broadcast8(in.a_scales[i][b]);
      for (int j = 0; j < NR; ++j) {
        const i32x8 lanes =
            x86::multiply_add_pairs(x86::multiply_add_bytes(magnitudes[j], x86::sign_bytes(a, weights[j])), ones);
        acc[i][j] = x86::fma(weight_scales[j] * a_scale, x86::int_to_float8(lanes), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i][j] = x86::sum_lanes(acc[i][j]);
}

/// Q4_K (FifthBit false) or Q5_K (true) weights · q8_K activations.
template <bool FifthBit>
ATTNSCOPE_INTEGER_DOT_TARGET void tile_q4_q5_k(const IntegerDotTile& in, Out& out) {
  const std::size_t block_bytes = FifthBit ? q5_k_block_bytes : q4_k_block_bytes;
  const u8x32 low_nibbles = bytes_of(15), one = bytes_of(1);
  f32x8 acc[MR][NR];
  x86::f32x4 mins[MR][NR];
  float summs[MR][NR] = {};
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      acc[i][j] = x86::broadcast8(0.0f);
      mins[i][j] = x86::f32x4{0, 0, 0, 0};
    }
  for (Index b = 0; b < in.blocks; ++b) {
    const unsigned char* block[NR];
    i16x16 scales[NR][8];
    x86::i16x8 block_mins[NR];
    f32x8 d[NR];
    float dmin[NR];
    for (int j = 0; j < NR; ++j) {
      block[j] = in.w[j] + static_cast<std::size_t>(b) * block_bytes;
      d[j] = x86::broadcast8(half_to_float(block[j]));
      dmin[j] = half_to_float(block[j] + 2);
      for (int s = 0; s < 8; ++s) {
        int sc, m;
        k_scale_min(block[j] + 4, s, sc, m);
        scales[j][s] = x86::broadcast16_i16(static_cast<std::int16_t>(sc));
        block_mins[j][s] = static_cast<std::int16_t>(m);
      }
    }
    i32x8 sums[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) sums[i][j] = i32x8{0, 0, 0, 0, 0, 0, 0, 0};
    for (int c = 0; c < 4; ++c) {
      u8x32 low[NR], high[NR];
      for (int j = 0; j < NR; ++j) {
        const u8x32 packed = x86::load_bytes32(block[j] + (FifthBit ? 48 : 16) + 32 * c);
        low[j] = packed & low_nibbles;
        high[j] = (packed >> 4) & low_nibbles;
        if (FifthBit) {
          const u8x32 bits = x86::load_bytes32(block[j] + 16);
          low[j] |= ((bits >> (2 * c)) & one) << 4;
          high[j] |= ((bits >> (2 * c + 1)) & one) << 4;
        }
      }
      for (int i = 0; i < MR; ++i) {
        const std::int8_t* a = in.a[i] + 256 * b + 64 * c;
        const u8x32 a_low = activations32(a), a_high = activations32(a + 32);
        for (int j = 0; j < NR; ++j)
          sums[i][j] += x86::multiply_add_pairs(scales[j][2 * c], x86::multiply_add_bytes(low[j], a_low)) +
                        x86::multiply_add_pairs(scales[j][2 * c + 1], x86::multiply_add_bytes(high[j], a_high));
      }
    }
    for (int i = 0; i < MR; ++i) {
      const float a_scale = in.a_scales[i][b];
      const f32x8 a_scales = x86::broadcast8(a_scale);
      x86::i16x8 sub_sums;  // the activation sums of the eight sub-blocks
      __builtin_memcpy(&sub_sums, in.a_pair_sums[i] + 8 * b, sizeof(sub_sums));
      for (int j = 0; j < NR; ++j) {
        acc[i][j] = x86::fma(a_scales * d[j], x86::int_to_float8(sums[i][j]), acc[i][j]);
        const float minimum_scale = -a_scale * dmin[j];
        const x86::i32x4 pairs = x86::multiply_add_pairs(block_mins[j], sub_sums);  // m_2t S_2t + m_2t+1 S_2t+1
        if (FifthBit) {
          const std::int32_t total = (pairs[0] + pairs[1]) + (pairs[2] + pairs[3]);
          summs[i][j] = std::fma(minimum_scale, static_cast<float>(total), summs[i][j]);
        } else {
          const x86::f32x4 scale{minimum_scale, minimum_scale, minimum_scale, minimum_scale};
          mins[i][j] = x86::fma(scale, x86::int_to_float4(pairs), mins[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      const float lanes = x86::sum_lanes(acc[i][j]);
      const x86::f32x4 m = mins[i][j];
      out[i][j] = FifthBit ? lanes + summs[i][j] : lanes + ((m[0] + m[2]) + (m[1] + m[3]));
    }
}

/// Q6_K weights · q8_K activations.
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET void tile_q6_k(const IntegerDotTile& in, Out& out) {
  const u8x32 low_nibbles = bytes_of(15), three = bytes_of(3);
  f32x8 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = x86::broadcast8(0.0f);
  for (Index b = 0; b < in.blocks; ++b) {
    const unsigned char* block[NR];
    i16x16 scale_pairs[NR][8], scales16[NR];
    float d[NR];
    for (int j = 0; j < NR; ++j) {
      block[j] = in.w[j] + static_cast<std::size_t>(b) * q6_k_block_bytes;
      d[j] = half_to_float(block[j] + 208);
      const auto* sc = reinterpret_cast<const std::int8_t*>(block[j] + 192);
      for (int k = 0; k < 8; ++k) scale_pairs[j][k] = two_scales(sc[2 * k], sc[2 * k + 1]);
      scales16[j] = x86::widen_signed_bytes16(x86::load_bytes16(block[j] + 192));
    }
    i32x8 sums[MR][NR];
    for (int i = 0; i < MR; ++i) {
      i16x16 block_sums;
      __builtin_memcpy(&block_sums, in.a_sums[i] + 16 * b, sizeof(block_sums));
      for (int j = 0; j < NR; ++j) sums[i][j] = -(x86::multiply_add_pairs(block_sums, scales16[j]) << 5);
    }
    for (int half = 0; half < 2; ++half) {
      u8x32 q[NR][4];
      for (int j = 0; j < NR; ++j) {
        const u8x32 low_bits_0 = x86::load_bytes32(block[j] + 64 * half);
        const u8x32 low_bits_1 = x86::load_bytes32(block[j] + 64 * half + 32);
        const u8x32 high_bits = x86::load_bytes32(block[j] + 128 + 32 * half);
        q[j][0] = (low_bits_0 & low_nibbles) | ((high_bits & three) << 4);
        q[j][1] = (low_bits_1 & low_nibbles) | (((high_bits >> 2) & three) << 4);
        q[j][2] = ((low_bits_0 >> 4) & low_nibbles) | (((high_bits >> 4) & three) << 4);
        q[j][3] = ((low_bits_1 >> 4) & low_nibbles) | (((high_bits >> 6) & three) << 4);
      }
      for (int i = 0; i < MR; ++i) {
        const std::int8_t* a = in.a[i] + 256 * b + 128 * half;
        for (int quarter = 0; quarter < 4; ++quarter) {
          const u8x32 activations = activations32(a + 32 * quarter);
          for (int j = 0; j < NR; ++j)
            sums[i][j] += x86::multiply_add_pairs(scale_pairs[j][4 * half + quarter],
                                                  x86::multiply_add_bytes(q[j][quarter], activations));
        }
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j)
        acc[i][j] = x86::fma(x86::broadcast8(in.a_scales[i][b] * d[j]), x86::int_to_float8(sums[i][j]), acc[i][j]);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i][j] = x86::sum_lanes(acc[i][j]);
}

/// Q4_1 (FifthBit false) or Q5_1 (true) weights · q8_1 activations.
template <bool FifthBit>
ATTNSCOPE_INTEGER_DOT_TARGET void tile_q4_q5_1(const IntegerDotTile& in, Out& out) {
  const std::size_t block_bytes = FifthBit ? q5_1_block_bytes : q4_1_block_bytes;
  const i16x16 ones = x86::broadcast16_i16(1);
  f32x8 acc[MR][NR] = {};  // zero
  float summs[MR][NR] = {};
  for (Index b = 0; b < in.blocks; ++b) {
    u8x32 weights[NR];
    float d[NR], m[NR];
    for (int j = 0; j < NR; ++j) {
      const unsigned char* block = in.w[j] + static_cast<std::size_t>(b) * block_bytes;
      d[j] = half_to_float(block);
      m[j] = half_to_float(block + 2);
      weights[j] = FifthBit ? avx2_dequantize::split_nibbles(block + 8) | avx2_dequantize::fifth_bits(block + 4)
                            : avx2_dequantize::split_nibbles(block + 4);
    }
    for (int i = 0; i < MR; ++i) {
      const u8x32 a = activations32(in.a[i] + 32 * b);
      const float a_scale = in.a_scales[i][b], a_sum = in.a_block_sums[i][b];
      for (int j = 0; j < NR; ++j) {
        const i32x8 lanes = x86::multiply_add_pairs(x86::multiply_add_bytes(weights[j], a), ones);
        summs[i][j] = std::fma(m[j], a_sum, summs[i][j]);
        acc[i][j] = x86::fma(x86::broadcast8(d[j] * a_scale), x86::int_to_float8(lanes), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i][j] = x86::sum_lanes(acc[i][j]) + summs[i][j];
}

/// The 32 signed levels of the nibbles at `qs` (low nibbles first) in the table `levels` (IQ4_NL's or MXFP4's).
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET inline u8x32 iq4_levels32(const unsigned char* qs, u8x16 levels) {
  const u8x16 bytes = x86::load_bytes16(qs);
  return x86::join(avx2_dequantize::lookup16(levels, bytes & 15), avx2_dequantize::lookup16(levels, bytes >> 4));
}

/// The eight lane integers Σ w·a of 32 signed weight bytes and 32 activation bytes, each pair product scaled by
/// `scale` (vpsignb moves the weight's sign onto the activation, as ggml's mul_add_epi8).
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET inline i32x8 signed_lanes(u8x32 weights, u8x32 activations, i16x16 scale) {
  return x86::multiply_add_pairs(
      x86::multiply_add_bytes(x86::sign_bytes(weights, weights), x86::sign_bytes(activations, weights)), scale);
}

/// IQ4_NL (Mxfp4 false) or MXFP4 (true) weights · q8_0 activations.
template <bool Mxfp4>
ATTNSCOPE_INTEGER_DOT_TARGET void tile_codebook(const IntegerDotTile& in, Out& out) {
  using Blocks = CodebookBlocks<Mxfp4>;
  const u8x16 levels = x86::load_bytes16(reinterpret_cast<const unsigned char*>(Blocks::levels()));
  const i16x16 ones = x86::broadcast16_i16(1);
  f32x8 acc[2][MR][NR] = {};  // zero; blocks 0, 2, 4, … and 1, 3, 5, … of the pairs
  const Index paired = in.blocks - in.blocks % 2;
  for (Index b = 0; b < paired; ++b) {
    u8x32 weights[NR];
    float d[NR];
    for (int j = 0; j < NR; ++j) {
      const unsigned char* block = in.w[j] + static_cast<std::size_t>(b) * Blocks::bytes;
      d[j] = Blocks::scale(block);
      weights[j] = iq4_levels32(block + Blocks::quants, levels);
    }
    for (int i = 0; i < MR; ++i) {
      const u8x32 a = activations32(in.a[i] + 32 * b);
      const float a_scale = in.a_scales[i][b];
      for (int j = 0; j < NR; ++j)
        acc[b % 2][i][j] = x86::fma(x86::broadcast8(a_scale * d[j]),
                                    x86::int_to_float8(signed_lanes(weights[j], a, ones)), acc[b % 2][i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      out[i][j] = x86::sum_lanes(acc[0][i][j] + acc[1][i][j]);
      if (paired < in.blocks) {  // the last of an odd number of blocks, in the scalar tail
        const unsigned char* block = in.w[j] + static_cast<std::size_t>(paired) * Blocks::bytes;
        const i32x8 lanes =
            signed_lanes(iq4_levels32(block + Blocks::quants, levels), activations32(in.a[i] + 32 * paired), ones);
        const std::int32_t total = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
        out[i][j] = std::fma(in.a_scales[i][paired] * Blocks::scale(block), static_cast<float>(total), out[i][j]);
      }
    }
}

/// Q2_K (Q3 false) or Q3_K (Q3 true) weights · q8_K activations.
template <bool Q3>
ATTNSCOPE_INTEGER_DOT_TARGET void tile_q2_q3_k(const IntegerDotTile& in, Out& out) {
  const std::size_t block_bytes = Q3 ? q3_k_block_bytes : q2_k_block_bytes;
  const u8x32 three = bytes_of(3), one = bytes_of(1);
  f32x8 acc[MR][NR] = {};  // zero
  for (Index b = 0; b < in.blocks; ++b) {
    const unsigned char* block[NR];
    i16x16 scale_pairs[NR][8], mins[NR];
    float d[NR], dmin[NR];
    for (int j = 0; j < NR; ++j) {
      block[j] = in.w[j] + static_cast<std::size_t>(b) * block_bytes;
      d[j] = half_to_float(block[j] + (Q3 ? 108 : 80));
      dmin[j] = Q3 ? 0.0f : half_to_float(block[j] + 82);
      for (int k = 0; k < 8; ++k)
        scale_pairs[j][k] = Q3 ? two_scales(q3_k_scale(block[j] + 96, 2 * k), q3_k_scale(block[j] + 96, 2 * k + 1))
                               : two_scales(block[j][2 * k] & 15, block[j][2 * k + 1] & 15);
      for (int k = 0; k < 16; ++k) mins[j][k] = Q3 ? 0 : static_cast<std::int16_t>(block[j][k] >> 4);
    }
    i32x8 sums[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) sums[i][j] = i32x8{0, 0, 0, 0, 0, 0, 0, 0};
    for (int n = 0; n < 2; ++n) {
      u8x32 q[NR][4];
      for (int j = 0; j < NR; ++j) {
        const u8x32 low_bits = x86::load_bytes32(block[j] + (Q3 ? 32 : 16) + 32 * n);
        const u8x32 high_bits = Q3 ? x86::load_bytes32(block[j]) : u8x32{};
        for (int k = 0; k < 4; ++k) {
          q[j][k] = (low_bits >> (2 * k)) & three;
          if (Q3) q[j][k] -= (((high_bits >> (4 * n + k)) & one) ^ one) << 2;  // − 4 where the inverted bit is 0
        }
      }
      for (int i = 0; i < MR; ++i) {
        const std::int8_t* a = in.a[i] + 256 * b + 128 * n;
        for (int k = 0; k < 4; ++k) {
          const u8x32 activations = activations32(a + 32 * k);
          for (int j = 0; j < NR; ++j)
            sums[i][j] += Q3 ? signed_lanes(q[j][k], activations, scale_pairs[j][4 * n + k])
                             : x86::multiply_add_pairs(scale_pairs[j][4 * n + k],
                                                       x86::multiply_add_bytes(q[j][k], activations));
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      const float a_scale = in.a_scales[i][b];
      i16x16 block_sums = {};
      if (!Q3) __builtin_memcpy(&block_sums, in.a_sums[i] + 16 * b, sizeof(block_sums));
      for (int j = 0; j < NR; ++j) {
        if (!Q3)
          acc[i][j] = x86::fma(x86::broadcast8(-a_scale * dmin[j]),
                               x86::int_to_float8(x86::multiply_add_pairs(mins[j], block_sums)), acc[i][j]);
        acc[i][j] = x86::fma(x86::broadcast8(a_scale * d[j]), x86::int_to_float8(sums[i][j]), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i][j] = x86::sum_lanes(acc[i][j]);
}

/// IQ4_XS weights · q8_K activations.
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET void tile_iq4_xs(const IntegerDotTile& in, Out& out) {
  const u8x16 levels = x86::load_bytes16(reinterpret_cast<const unsigned char*>(iq4_nl_values));
  f32x8 acc[MR][NR] = {};  // zero
  for (Index b = 0; b < in.blocks; ++b) {
    const unsigned char* block[NR];
    float d[NR];
    for (int j = 0; j < NR; ++j) {
      block[j] = in.w[j] + static_cast<std::size_t>(b) * iq4_xs_block_bytes;
      d[j] = half_to_float(block[j]);
    }
    i32x8 sums[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) sums[i][j] = i32x8{0, 0, 0, 0, 0, 0, 0, 0};
    for (int g = 0; g < 8; ++g) {
      u8x32 weights[NR];
      i16x16 scale[NR];
      for (int j = 0; j < NR; ++j) {
        weights[j] = iq4_levels32(block[j] + 8 + 16 * g, levels);
        scale[j] = x86::broadcast16_i16(static_cast<std::int16_t>(iq4_xs_scale(block[j], g)));
      }
      for (int i = 0; i < MR; ++i) {
        const u8x32 a = activations32(in.a[i] + 256 * b + 32 * g);
        for (int j = 0; j < NR; ++j) sums[i][j] += signed_lanes(weights[j], a, scale[j]);
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j)
        acc[i][j] = x86::fma(x86::broadcast8(d[j] * in.a_scales[i][b]), x86::int_to_float8(sums[i][j]), acc[i][j]);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i][j] = x86::sum_lanes(acc[i][j]);
}

/// The tile's outputs for weights of `format` (an integer_dot_supported format).
template <int = 0>
ATTNSCOPE_INTEGER_DOT_TARGET void tile(StoredFloat format, const IntegerDotTile& in, Out& out) {
  switch (format) {
    case StoredFloat::q8_0: tile_q8_0_family<0>(in, out); return;
    case StoredFloat::q4_0: tile_q8_0_family<1>(in, out); return;
    case StoredFloat::q5_0: tile_q8_0_family<2>(in, out); return;
    case StoredFloat::q4_k: tile_q4_q5_k<false>(in, out); return;
    case StoredFloat::q5_k: tile_q4_q5_k<true>(in, out); return;
    case StoredFloat::q6_k: tile_q6_k(in, out); return;
    case StoredFloat::q4_1: tile_q4_q5_1<false>(in, out); return;
    case StoredFloat::q5_1: tile_q4_q5_1<true>(in, out); return;
    case StoredFloat::iq4_nl: tile_codebook<false>(in, out); return;
    case StoredFloat::mxfp4: tile_codebook<true>(in, out); return;
    case StoredFloat::q2_k: tile_q2_q3_k<false>(in, out); return;
    case StoredFloat::q3_k: tile_q2_q3_k<true>(in, out); return;
    case StoredFloat::iq4_xs: tile_iq4_xs(in, out); return;
    default: return;
  }
}

#undef ATTNSCOPE_INTEGER_DOT_TARGET

}  // namespace attnscope::kernels::detail::avx2_integer_dot
#endif
