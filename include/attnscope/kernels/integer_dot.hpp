// attnscope/kernels/integer_dot.hpp — y (+)= x·Wᵀ the way ggml's CPU backend computes it for block-quantized
// weights: the activations x rounded to 8 bits per block (kernels/quantize_activations.hpp: q8_0 for Q8_0, Q4_0, Q5_0,
// IQ4_NL and MXFP4, q8_1 for Q4_1 and Q5_1, q8_K for Q2_K … Q6_K and IQ4_XS), then per weight block an exact integer
// dot product, scaled in float32.
//
// The product of one activation row a and one weight row w, per type, restating ggml-cpu's x86 AVX2 vec_dot
// functions (ggml/src/ggml-cpu/arch/x86/quants.c) as lanes: the elements of a 32-element group are dealt to eight
// lanes, element e to lane (e mod 32) / 4 (the four bytes vpmaddubsw + vpmaddwd sum into one 32-bit lane); per block
// each lane holds an exact integer L_l, and eight float32 accumulators acc_l take acc_l = fma(d, float(L_l), acc_l)
// block after block; the result is the lane sum ((acc₀ + acc₄) + (acc₂ + acc₆)) + ((acc₁ + acc₅) + (acc₃ + acc₇))
// (ggml's hsum_float_8), plus a type's min term. With q_w the weight's integer and q_a the activation's:
//   Q8_0, Q4_0, Q5_0 (blocks of 32; Q4_0's q_w = nibble − 8, Q5_0's the 5-bit value − 16): d = d_w · d_a,
//     L_l = Σ_lane q_w q_a (ggml_vec_dot_q8_0_q8_0, ggml_vec_dot_q4_0_q8_0, ggml_vec_dot_q5_0_q8_0).
//   Q4_K, Q5_K (blocks of 256, sub-blocks s of 32 with 6-bit scale sc_s and min m_s): d = d_a · d_w,
//     L_l = Σ_s sc_s Σ_lane q_w q_a; dmin = (−d_a) · dmin_w and S_s = the sum of sub-block s's q_a (two sums of 16).
//     Q4_K keeps four min accumulators: accm_t = fma(dmin, float(m_{2t} S_{2t} + m_{2t+1} S_{2t+1}), accm_t), result
//     lane sum + ((accm₀ + accm₂) + (accm₁ + accm₃)) (ggml_vec_dot_q4_K_q8_K). Q5_K one: summs = fma(dmin,
//     float(Σ_s m_s S_s), summs), result lane sum + summs (ggml_vec_dot_q5_K_q8_K, its `summs += dmin * …` contracted
//     to a fused multiply-add, as GCC compiles it for an FMA target).
//   Q6_K (blocks of 256, sixteen int8 scales sc_j of 16 elements, q_w = the 6-bit value u − 32): d = d_a · d_w,
//     L_l = Σ_lane sc u q_a − 32 (sc_{2l} B_{2l} + sc_{2l+1} B_{2l+1}), B_j the sum of the q_a of elements
//     16j … 16j + 15 (ggml_vec_dot_q6_K_q8_K, whose offset of 32 rides on the q8_K block sums).
//   Q4_1, Q5_1 (blocks of 32 { d_w, m_w, … }, q_w the unsigned 4- or 5-bit value; q8_1 activations with block sum s):
//     d = d_w · d_a, L_l = Σ_lane q_w q_a; one min accumulator summs = fma(m_w, s, summs) block after block; result
//     lane sum + summs (ggml_vec_dot_q4_1_q8_1, ggml_vec_dot_q5_1_q8_1, `summs += m·s` contracted).
//   IQ4_NL, MXFP4 (blocks of 32, q_w = the level v[nibble] of ggml's kvalues_iq4nl or kvalues_mxfp4, the E2M1
//     values doubled; d_w the block's fp16 d, or MXFP4's E8M0 scale halved, 2^(e − 128)): d = d_a · d_w,
//     L_l = Σ_lane q_w q_a; blocks are taken in pairs, the first of each pair into eight accumulators, the second
//     into another eight; the result is the lane sum of their lanewise sums, and with an odd count the last block is
//     added after it as fma(d, float(Σ_l L_l), result) (ggml_vec_dot_iq4_nl_q8_0, ggml_vec_dot_mxfp4_q8_0, their
//     scalar tail contracted).
//   Q2_K (blocks of 256, sixteen sub-blocks j of 16 with 4-bit scale sc_j and min m_j, q_w the 2-bit value):
//     per block two updates of each lane, first acc_l = fma(dmin, float(m_{2l} B_{2l} + m_{2l+1} B_{2l+1}), acc_l)
//     with dmin = (−d_a) · dmin_w, then acc_l = fma(d, float(L_l), acc_l), d = d_a · d_w, L_l = Σ_lane sc q_w q_a
//     (ggml_vec_dot_q2_K_q8_K).
//   Q3_K (blocks of 256, sixteen signed 6-bit scales, q_w ∈ [−4, 3]): d = d_a · d_w, L_l = Σ_lane sc q_w q_a
//     (ggml_vec_dot_q3_K_q8_K).
//   IQ4_XS (blocks of 256, eight groups of 32 with signed 6-bit scales ls_g − 32, q_w the IQ4_NL level):
//     d = d_w · d_a, L_l = Σ_lane (ls − 32) q_w q_a (ggml_vec_dot_iq4_xs_q8_K).
// The integers are exact (no 16-bit saturation is reachable from these ranges), so how a kernel forms them does not
// matter; the float32 operations above are the whole rounding contract, and the scalar reference and the AVX2 kernel
// (kernels/detail/integer_dot_avx2.hpp) give the same bits. It depends on the depth only: not on the threads, the
// tiling or the number of rows.
//
// Not modelled: llama.cpp repacks Q4_0, Q4_K, IQ4_NL and MXFP4 weights on AVX2 CPUs (Q2_K on AVX-512 ones), and Q8_0,
// Q4_0, Q5_0 and IQ4_NL products may go to its llamafile sgemm; those kernels form the same integers and scales but
// add the per-block float32 terms in another order, a difference of float32 rounding (≈ 1e-7 relative), against the
// ≈ 1e-3 relative change the 8-bit rounding of the activations itself makes.
//
// Layout of the product: the weight rows (output columns) are split among the OpenMP threads in tiles of
// integer_dot_tile_columns rows; per block of integer_dot_row_block activation rows a thread sweeps its tiles, and per
// tile the micro-kernel computes integer_dot_tile_rows × integer_dot_tile_columns outputs over the whole depth, each
// weight block decoded once for the tile's activation rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/block_scales.hpp"
#include "attnscope/kernels/detail/integer_dot_avx2.hpp"
#include "attnscope/kernels/gemm.hpp"
#include "attnscope/kernels/quantize_activations.hpp"
#include "attnscope/kernels/widen.hpp"

namespace attnscope::kernels {

/// Whether integer_dot_xwt multiplies weights of `format` (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K,
/// Q4_K, Q5_K, Q6_K, IQ4_XS).
constexpr bool integer_dot_supported(StoredFloat format) {
  switch (format) {
    case StoredFloat::q8_0: case StoredFloat::q4_0: case StoredFloat::q5_0: case StoredFloat::q4_1:
    case StoredFloat::q5_1: case StoredFloat::iq4_nl: case StoredFloat::mxfp4: case StoredFloat::q2_k:
    case StoredFloat::q3_k: case StoredFloat::q4_k: case StoredFloat::q5_k: case StoredFloat::q6_k:
    case StoredFloat::iq4_xs: return true;
    default: return false;
  }
}

/// The activation format ggml pairs with weights of `format` (ggml-cpu.c's vec_dot_type): q8_0 for Q8_0, Q4_0, Q5_0,
/// IQ4_NL and MXFP4, q8_1 for Q4_1 and Q5_1, q8_K for the k-quants and IQ4_XS.
constexpr ActivationFormat integer_dot_activation_format(StoredFloat format) {
  switch (format) {
    case StoredFloat::q8_0: case StoredFloat::q4_0: case StoredFloat::q5_0: case StoredFloat::iq4_nl:
    case StoredFloat::mxfp4: return ActivationFormat::q8_0;
    case StoredFloat::q4_1: case StoredFloat::q5_1: return ActivationFormat::q8_1;
    default: return ActivationFormat::q8_k;
  }
}

/// Which micro-kernel integer_dot_xwt runs: `automatic` (AVX2 when the CPU has it), `avx2` (only when
/// integer_dot_avx2_available()) or the scalar `reference`. They give the same bits.
enum class IntegerDotKernel { automatic, avx2, reference };

/// Whether the AVX2 micro-kernels can run here (x86-64 with GCC or Clang, a CPU with AVX2, FMA and F16C).
inline bool integer_dot_avx2_available() {
#if defined(ATTNSCOPE_INTEGER_DOT_AVX2)
  return detail::avx2_integer_dot::available();
#else
  return false;
#endif
}

/// Options of integer_dot_xwt: the micro-kernel and the number of column ranges (0: one per OpenMP thread; results
/// never depend on it).
struct IntegerDotOptions {
  IntegerDotKernel kernel = IntegerDotKernel::automatic;
  Index parts = 0;
};

/// Activation rows per block of the product (their quants stay in L2 while a thread sweeps its weight tiles).
inline constexpr Index integer_dot_row_block = 64;

namespace detail {

/// Eight float32 lane accumulators, summed as ggml's hsum_float_8.
struct LaneSums {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  void add(float d, const std::int32_t (&integers)[8]) {
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(d, static_cast<float>(integers[l]), lanes[l]);
  }
  float sum() const {
    const float h0 = lanes[0] + lanes[4], h1 = lanes[1] + lanes[5], h2 = lanes[2] + lanes[6],
                h3 = lanes[3] + lanes[7];
    return (h0 + h2) + (h1 + h3);
  }
};

/// The integer of element e of a Q8_0 / Q4_0 block.
inline int q8_0_weight(const unsigned char* block, int e) { return static_cast<std::int8_t>(block[2 + e]); }
inline int q4_0_weight(const unsigned char* block, int e) {
  return (e < 16 ? block[2 + e] & 15 : block[2 + e - 16] >> 4) - 8;
}
/// The integer of element e of a Q5_0 block { fp16 d; uint8 qh[4]; uint8 qs[16] }: the nibble of qs (low for
/// e < 16, high for e ≥ 16) with bit e of the little-endian qh as its fifth bit, minus 16.
inline int q5_0_weight(const unsigned char* block, int e) {
  const std::uint32_t qh = std::uint32_t(block[2]) | std::uint32_t(block[3]) << 8 | std::uint32_t(block[4]) << 16 |
                           std::uint32_t(block[5]) << 24;
  const int nibble = e < 16 ? block[6 + e] & 15 : block[6 + e - 16] >> 4;
  return (nibble | static_cast<int>((qh >> e) & 1) << 4) - 16;
}

/// The 32-element formats paired with q8_0 activations.
enum class Q8_0Weights { q8_0, q4_0, q5_0 };

/// A Q8_0, Q4_0 or Q5_0 row · q8_0 row, `blocks` blocks of 32 (see the header comment).
template <Q8_0Weights Kind>
float dot_q8_0_family_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales, Index blocks) {
  const std::size_t block_bytes = Kind == Q8_0Weights::q8_0   ? q8_0_block_bytes
                                  : Kind == Q8_0Weights::q4_0 ? q4_0_block_bytes
                                                              : q5_0_block_bytes;
  LaneSums acc;
  for (Index b = 0; b < blocks; ++b, w += block_bytes, a += 32) {
    std::int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 32; ++e)
      lanes[e / 4] += (Kind == Q8_0Weights::q8_0   ? q8_0_weight(w, e)
                       : Kind == Q8_0Weights::q4_0 ? q4_0_weight(w, e)
                                                   : q5_0_weight(w, e)) *
                      a[e];
    acc.add(half_to_float(w) * a_scales[b], lanes);
  }
  return acc.sum();
}

/// The 5-bit (FifthBit) or 4-bit integer of element e of a Q5_K / Q4_K block.
template <bool FifthBit>
int q4_q5_k_weight(const unsigned char* block, int e) {
  const int chunk = e / 64, position = e % 32, high = (e % 64) / 32;
  const unsigned char* qs = block + (FifthBit ? 48 : 16);
  int q = (qs[32 * chunk + position] >> (4 * high)) & 15;
  if (FifthBit) q |= ((block[16 + position] >> (2 * chunk + high)) & 1) << 4;
  return q;
}

/// Q4_K (FifthBit false) or Q5_K (true) row · q8_K row, `blocks` blocks of 256 (see the header comment).
template <bool FifthBit>
float dot_q4_q5_k_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales,
                            const std::int16_t* a_sums, Index blocks) {
  const std::size_t block_bytes = FifthBit ? q5_k_block_bytes : q4_k_block_bytes;
  LaneSums acc;
  float mins[4] = {0, 0, 0, 0}, summs = 0;
  for (Index b = 0; b < blocks; ++b, w += block_bytes, a += 256, a_sums += 16) {
    int sc[8], m[8], sub_sums[8];
    for (int s = 0; s < 8; ++s) {
      k_scale_min(w + 4, s, sc[s], m[s]);
      sub_sums[s] = a_sums[2 * s] + a_sums[2 * s + 1];
    }
    std::int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 256; ++e) lanes[(e % 32) / 4] += sc[e / 32] * q4_q5_k_weight<FifthBit>(w, e) * a[e];
    acc.add(a_scales[b] * half_to_float(w), lanes);
    const float dmin = -a_scales[b] * half_to_float(w + 2);
    if (FifthBit) {
      std::int32_t total = 0;
      for (int s = 0; s < 8; ++s) total += m[s] * sub_sums[s];
      summs = std::fma(dmin, static_cast<float>(total), summs);
    } else {
      for (int t = 0; t < 4; ++t)
        mins[t] = std::fma(dmin, static_cast<float>(m[2 * t] * sub_sums[2 * t] + m[2 * t + 1] * sub_sums[2 * t + 1]),
                           mins[t]);
    }
  }
  return FifthBit ? acc.sum() + summs : acc.sum() + ((mins[0] + mins[2]) + (mins[1] + mins[3]));
}

/// The unsigned 6-bit value (before the offset of 32) of element e of a Q6_K block (the layout of
/// dequantize_q6_k_reference).
inline int q6_k_unsigned(const unsigned char* block, int e) {
  const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const unsigned char* ql = block + 64 * half + (quarter % 2 == 1 ? 32 : 0);
  const int low = quarter < 2 ? ql[l] & 15 : ql[l] >> 4;
  return low | (((block[128 + 32 * half + l] >> (2 * quarter)) & 3) << 4);
}

/// Q6_K row · q8_K row, `blocks` blocks of 256 (see the header comment).
inline float dot_q6_k_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales,
                                const std::int16_t* a_sums, Index blocks) {
  LaneSums acc;
  for (Index b = 0; b < blocks; ++b, w += q6_k_block_bytes, a += 256, a_sums += 16) {
    const auto* scales = reinterpret_cast<const std::int8_t*>(w + 192);
    std::int32_t lanes[8];
    for (int l = 0; l < 8; ++l)
      lanes[l] = -32 * (scales[2 * l] * a_sums[2 * l] + scales[2 * l + 1] * a_sums[2 * l + 1]);
    for (int e = 0; e < 256; ++e) lanes[(e % 32) / 4] += scales[e / 16] * q6_k_unsigned(w, e) * a[e];
    acc.add(a_scales[b] * half_to_float(w + 208), lanes);
  }
  return acc.sum();
}

/// The 4-bit (FifthBit false) or 5-bit integer of element e of a Q4_1 block { fp16 d; fp16 m; uint8 qs[16] } or a Q5_1
/// block { fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16] }: the nibble of qs (low for e < 16, high for e ≥ 16), with bit e
/// of the little-endian qh as the fifth bit (no offset: the block's m carries it).
template <bool FifthBit>
int q4_q5_1_weight(const unsigned char* block, int e) {
  const unsigned char* qs = block + (FifthBit ? 8 : 4);
  const int nibble = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
  if (!FifthBit) return nibble;
  return nibble | static_cast<int>((little_endian_u32(block + 4) >> e) & 1) << 4;
}

/// Q4_1 (FifthBit false) or Q5_1 (true) row · q8_1 row, `blocks` blocks of 32 (see the header comment).
template <bool FifthBit>
float dot_q4_q5_1_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales,
                            const float* a_block_sums, Index blocks) {
  const std::size_t block_bytes = FifthBit ? q5_1_block_bytes : q4_1_block_bytes;
  LaneSums acc;
  float summs = 0;
  for (Index b = 0; b < blocks; ++b, w += block_bytes, a += 32) {
    std::int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 32; ++e) lanes[e / 4] += q4_q5_1_weight<FifthBit>(w, e) * a[e];
    summs = std::fma(half_to_float(w + 2), a_block_sums[b], summs);
    acc.add(half_to_float(w) * a_scales[b], lanes);
  }
  return acc.sum() + summs;
}

/// IQ4_NL (Mxfp4 false) or MXFP4 (true) row · q8_0 row, `blocks` blocks of 32 (see the header comment).
template <bool Mxfp4>
float dot_codebook_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales, Index blocks) {
  using Blocks = CodebookBlocks<Mxfp4>;
  LaneSums even, odd;  // blocks 0, 2, 4, … and 1, 3, 5, … of the pairs
  const auto block_lanes = [](const unsigned char* block, const std::int8_t* q, std::int32_t (&lanes)[8]) {
    const unsigned char* qs = block + Blocks::quants;
    for (int e = 0; e < 32; ++e) lanes[e / 4] += Blocks::levels()[e < 16 ? qs[e] & 15 : qs[e - 16] >> 4] * q[e];
  };
  Index b = 0;
  for (; b + 1 < blocks; b += 2) {
    std::int32_t lanes_even[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lanes_odd[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    block_lanes(w + b * Blocks::bytes, a + 32 * b, lanes_even);
    block_lanes(w + (b + 1) * Blocks::bytes, a + 32 * (b + 1), lanes_odd);
    even.add(a_scales[b] * Blocks::scale(w + b * Blocks::bytes), lanes_even);
    odd.add(a_scales[b + 1] * Blocks::scale(w + (b + 1) * Blocks::bytes), lanes_odd);
  }
  for (int l = 0; l < 8; ++l) even.lanes[l] += odd.lanes[l];
  float result = even.sum();
  if (b < blocks) {  // an odd number of blocks: the last one alone, in the scalar tail
    std::int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    block_lanes(w + b * Blocks::bytes, a + 32 * b, lanes);
    std::int32_t total = 0;
    for (int l = 0; l < 8; ++l) total += lanes[l];
    result = std::fma(a_scales[b] * Blocks::scale(w + b * Blocks::bytes), static_cast<float>(total), result);
  }
  return result;
}

/// The 2-bit value (0..3) of element e of a Q2_K block (the layout of dequantize_q2_k_reference).
inline int q2_k_weight(const unsigned char* block, int e) {
  return (block[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/// Q2_K row · q8_K row, `blocks` blocks of 256 (see the header comment).
inline float dot_q2_k_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales,
                                const std::int16_t* a_sums, Index blocks) {
  LaneSums acc;
  for (Index b = 0; b < blocks; ++b, w += q2_k_block_bytes, a += 256, a_sums += 16) {
    std::int32_t min_lanes[8], lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int l = 0; l < 8; ++l) min_lanes[l] = (w[2 * l] >> 4) * a_sums[2 * l] + (w[2 * l + 1] >> 4) * a_sums[2 * l + 1];
    for (int e = 0; e < 256; ++e) lanes[(e % 32) / 4] += (w[e / 16] & 15) * q2_k_weight(w, e) * a[e];
    acc.add(-a_scales[b] * half_to_float(w + 82), min_lanes);
    acc.add(a_scales[b] * half_to_float(w + 80), lanes);
  }
  return acc.sum();
}

/// The signed 3-bit value (−4..3) of element e of a Q3_K block (the layout of dequantize_q3_k_reference).
inline int q3_k_weight(const unsigned char* block, int e) {
  const int n = e / 128, k = (e % 128) / 32, l = e % 32;
  return ((block[32 + 32 * n + l] >> (2 * k)) & 3) - (((block[l] >> (4 * n + k)) & 1) ? 0 : 4);
}

/// Q3_K row · q8_K row, `blocks` blocks of 256 (see the header comment).
inline float dot_q3_k_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales, Index blocks) {
  LaneSums acc;
  for (Index b = 0; b < blocks; ++b, w += q3_k_block_bytes, a += 256) {
    int scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = q3_k_scale(w + 96, j);
    std::int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 256; ++e) lanes[(e % 32) / 4] += scales[e / 16] * q3_k_weight(w, e) * a[e];
    acc.add(a_scales[b] * half_to_float(w + 108), lanes);
  }
  return acc.sum();
}

/// IQ4_XS row · q8_K row, `blocks` blocks of 256 (see the header comment).
inline float dot_iq4_xs_reference(const unsigned char* w, const std::int8_t* a, const float* a_scales, Index blocks) {
  LaneSums acc;
  for (Index b = 0; b < blocks; ++b, w += iq4_xs_block_bytes, a += 256) {
    std::int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 256; ++e) {
      const unsigned char* qs = w + 8 + 16 * (e / 32);
      const int i = e % 32;
      lanes[i / 4] += iq4_xs_scale(w, e / 32) * iq4_nl_values[i < 16 ? qs[i] & 15 : qs[i - 16] >> 4] * a[e];
    }
    acc.add(half_to_float(w) * a_scales[b], lanes);
  }
  return acc.sum();
}

}  // namespace detail

/// One output of the integer-dot product, by the scalar reference: weight row `w` (cols elements of `format`, an
/// integer_dot_supported format) · activation row r of x (quantized to integer_dot_activation_format(format)).
inline float integer_dot_reference(StoredFloat format, const unsigned char* w, const QuantizedActivations& x, Index r) {
  const std::int8_t* a = x.row_quants(r);
  const float* scales = x.row_scales(r);
  const std::int16_t* sums = x.row_sums(r);
  const Index blocks = x.cols / stored_block_elements(format);
  switch (format) {
    case StoredFloat::q8_0: return detail::dot_q8_0_family_reference<detail::Q8_0Weights::q8_0>(w, a, scales, blocks);
    case StoredFloat::q4_0: return detail::dot_q8_0_family_reference<detail::Q8_0Weights::q4_0>(w, a, scales, blocks);
    case StoredFloat::q5_0: return detail::dot_q8_0_family_reference<detail::Q8_0Weights::q5_0>(w, a, scales, blocks);
    case StoredFloat::q4_k: return detail::dot_q4_q5_k_reference<false>(w, a, scales, sums, blocks);
    case StoredFloat::q5_k: return detail::dot_q4_q5_k_reference<true>(w, a, scales, sums, blocks);
    case StoredFloat::q6_k: return detail::dot_q6_k_reference(w, a, scales, sums, blocks);
    case StoredFloat::q4_1: return detail::dot_q4_q5_1_reference<false>(w, a, scales, x.row_block_sums(r), blocks);
    case StoredFloat::q5_1: return detail::dot_q4_q5_1_reference<true>(w, a, scales, x.row_block_sums(r), blocks);
    case StoredFloat::iq4_nl: return detail::dot_codebook_reference<false>(w, a, scales, blocks);
    case StoredFloat::mxfp4: return detail::dot_codebook_reference<true>(w, a, scales, blocks);
    case StoredFloat::q2_k: return detail::dot_q2_k_reference(w, a, scales, sums, blocks);
    case StoredFloat::q3_k: return detail::dot_q3_k_reference(w, a, scales, blocks);
    case StoredFloat::iq4_xs: return detail::dot_iq4_xs_reference(w, a, scales, blocks);
    default: break;
  }
  attnscope::detail::throw_invalid_argument("integer_dot_reference", "no integer dot product for ",
                                            stored_float_name(format), " weights");
  return 0;
}

/// y (+)= x·Wᵀ by integer dot products (see the header comment): x holds m = x.rows activation rows quantized to
/// integer_dot_activation_format(w.format), W is w.rows × w.cols, not transposed, of an integer_dot_supported format;
/// y is m × w.rows (row i at y + i·y_stride); with Add, y += x·Wᵀ (the product rounded first, then added), else
/// y = x·Wᵀ. Returns whether every element written is finite. Throws attnscope::invalid_argument for an unsupported
/// format, mismatched activations (format or width), or kernel = avx2 without integer_dot_avx2_available().
/// O(m · rows · cols) integer operations.
template <bool Add>
bool integer_dot_xwt(const QuantizedActivations& x, const StoredWeights& w, float* y, Index y_stride,
                     const IntegerDotOptions& options = {}) {
  const char* fn = "integer_dot_xwt";
  if (!integer_dot_supported(w.format) || w.transposed)
    attnscope::detail::throw_invalid_argument(fn, "no integer dot product for ", w.transposed ? "transposed " : "",
                                              stored_float_name(w.format), " weights");
  if (x.format != integer_dot_activation_format(w.format) || x.cols != w.cols)
    attnscope::detail::throw_invalid_argument(fn, stored_float_name(w.format), " weights of ", w.cols,
                                              " columns need ", activation_format_name(integer_dot_activation_format(w.format)),
                                              " activations of as many columns, got ", activation_format_name(x.format),
                                              " of ", x.cols);
  if (options.kernel == IntegerDotKernel::avx2 && !integer_dot_avx2_available())
    attnscope::detail::throw_invalid_argument(fn, "the AVX2 kernel cannot run on this CPU or build");
  const Index m = x.rows, n = w.rows;
  if (m <= 0 || n <= 0) return true;
  const bool avx2 = options.kernel == IntegerDotKernel::avx2 ||
                    (options.kernel == IntegerDotKernel::automatic && integer_dot_avx2_available());
  constexpr Index tile_rows = detail::integer_dot_tile_rows, tile_columns = detail::integer_dot_tile_columns;
  const Index tiles = (n + tile_columns - 1) / tile_columns;
  const Index parts = std::clamp<Index>(options.parts > 0 ? options.parts : detail::gemm_default_parts(), 1, tiles);
  std::vector<unsigned char> finite(static_cast<std::size_t>(parts), 1);
  attnscope::detail::for_each_row(parts, m * w.cols * (n / parts + 1), [&](Index part) {
    const Index first_tile = part * tiles / parts, last_tile = (part + 1) * tiles / parts;
    bool part_finite = true;
    for (Index row_block = 0; row_block < m; row_block += integer_dot_row_block) {
      const Index row_end = std::min(m, row_block + integer_dot_row_block);
      for (Index tile = first_tile; tile < last_tile; ++tile) {
        const Index column = tile * tile_columns, columns = std::min(tile_columns, n - column);
        detail::IntegerDotTile in;
        in.blocks = w.cols / stored_block_elements(w.format);
        for (Index j = 0; j < tile_columns; ++j)  // a tile past the last row repeats it (its outputs are dropped)
          in.w[j] = w.data + static_cast<std::size_t>(column + std::min(j, columns - 1)) * w.row_bytes;
        for (Index row = row_block; row < row_end; row += tile_rows) {
          const Index rows = std::min(tile_rows, row_end - row);
          for (Index i = 0; i < tile_rows; ++i) {
            const Index r = row + std::min(i, rows - 1);
            in.a[i] = x.row_quants(r);
            in.a_scales[i] = x.row_scales(r);
            in.a_sums[i] = x.row_sums(r);
            in.a_pair_sums[i] = x.row_pair_sums(r);
            in.a_block_sums[i] = x.row_block_sums(r);
          }
          float out[tile_rows][tile_columns];
#if defined(ATTNSCOPE_INTEGER_DOT_AVX2)
          if (avx2) detail::avx2_integer_dot::tile(w.format, in, out);
#endif
          if (!avx2) {
            for (Index i = 0; i < rows; ++i)
              for (Index j = 0; j < columns; ++j)
                out[i][j] = integer_dot_reference(w.format, in.w[j], x, row + i);
          }
          for (Index i = 0; i < rows; ++i) {
            float* target = y + (row + i) * y_stride + column;
            for (Index j = 0; j < columns; ++j) {
              const float value = Add ? target[j] + out[i][j] : out[i][j];
              target[j] = value;
              part_finite = part_finite && std::isfinite(value);
            }
          }
        }
      }
    }
    finite[std::size_t(part)] = part_finite ? 1 : 0;
  });
  return std::all_of(finite.begin(), finite.end(), [](unsigned char f) { return f != 0; });
}

}  // namespace attnscope::kernels
