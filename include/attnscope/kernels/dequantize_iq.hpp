// attnscope/kernels/dequantize_iq.hpp — dequantization of ggml's codebook and ternary block formats (GGUF files):
// the non-linear 4-bit IQ4_NL and IQ4_XS, MXFP4 (OCP microscaling E2M1 with an E8M0 block scale), the ternary TQ1_0
// and TQ2_0, and the lattice i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M. Each function turns
// `blocks` consecutive blocks at `data` (any alignment, little-endian) into blocks × block_elements float32 values:
// dequantize_T_reference is the scalar definition; IQ4_NL, IQ4_XS and MXFP4 also have dequantize_T, the same bits
// through AVX2 where the CPU has it (kernels/detail/dequantize_avx2.hpp, dispatched at run time; the others run the
// reference). Every format is dequantized panel by panel like the others (kernels/widen.hpp). The block layouts and formulas are ggml's (ggml/src/ggml-common.h for the block structs,
// ggml-quants.c dequantize_row_* for the formulas), restated here; the codebooks are ggml's tables
// (kernels/detail/iq_grids.hpp, generated from ggml-common.h).
//
// Rounding: every product is rounded to float32 separately, in the order ggml's C code writes it (e.g. IQ2_XXS's
// db = (d·(½ + s))·¼, then (db·g)·(±1)); no formula here has a product followed by an addition, so contraction into
// fused multiply-adds cannot change the values. tests/io/test_gguf.cpp checks every type bit for bit against
// llama.cpp's gguf-py numpy dequantizers (tests/fixtures/make_gguf_quant_fixtures.py).
#pragma once

#include <cstdint>
#include <cstring>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/block_scales.hpp"
#include "attnscope/kernels/detail/dequantize_avx2.hpp"
#include "attnscope/kernels/detail/iq_grids.hpp"

namespace attnscope::kernels {

namespace detail {

/// The little-endian 16-bit and 32-bit words at `bytes`.
inline std::uint32_t little_endian_u16(const unsigned char* bytes) {
  return std::uint32_t(bytes[0]) | std::uint32_t(bytes[1]) << 8;
}
inline std::uint32_t little_endian_u32(const unsigned char* bytes) {
  return little_endian_u16(bytes) | little_endian_u16(bytes + 2) << 16;
}

/// Byte j of a codebook entry (ggml stores element j of a grid point in byte j, little-endian).
template <class Word>
inline int grid_byte(Word entry, int j) {
  return static_cast<int>((entry >> (8 * j)) & 0xff);
}

/// ±1 for bit j of a sign byte (set: negative), as ggml multiplies by it; computed without a branch (random sign
/// bits would mispredict every other element).
inline float sign_of_bit(int signs, int j) { return 1.0f - 2.0f * static_cast<float>((signs >> j) & 1); }

/// One run of 8 elements of a lattice format: y_j = (scale·g_j)·(±1), g_j byte j of `point`, negative where bit j
/// of `signs` is set.
struct LatticeRun {
  float scale;
  std::uint64_t point;
  int signs;
};

/// The loop shared by IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S: blocks of BlockBytes bytes starting with the fp16 d,
/// each eight groups of four runs of 8 elements; run_of(block, d, group, l) decodes run l of a group.
template <int BlockBytes, class RunOf>
void dequantize_lattice(const unsigned char* data, Index blocks, float* out, RunOf run_of) {
  for (Index b = 0; b < blocks; ++b, data += BlockBytes) {
    const float d = half_to_float(data);
    for (int group = 0; group < 8; ++group)
      for (int l = 0; l < 4; ++l, out += 8) {
        const LatticeRun run = run_of(data, d, group, l);
        for (int j = 0; j < 8; ++j)
          out[j] = run.scale * static_cast<float>(grid_byte(run.point, j)) * sign_of_bit(run.signs, j);
      }
  }
}

/// Two 4-element grid points as one 8-element point (the first in bytes 0–3).
inline std::uint64_t point_pair(std::uint32_t first, std::uint32_t second) {
  return std::uint64_t(first) | std::uint64_t(second) << 32;
}

/// Sixteen bytes of nibbles → 32 elements y = scale·v[nibble]: element i < 16 the low nibble of qs[i], element
/// i + 16 its high nibble (IQ4_NL, IQ4_XS, MXFP4).
inline void nibble_levels(const unsigned char* qs, float scale, const std::int8_t* levels, float* out) {
  for (int i = 0; i < 16; ++i) {
    out[i] = scale * static_cast<float>(levels[qs[i] & 15]);
    out[i + 16] = scale * static_cast<float>(levels[qs[i] >> 4]);
  }
}

/// The scale of a 32-element group of IQ2_XS / IQ2_S from its 4-bit field s: (d·(½ + s))·¼.
inline float iq2_group_scale(float d, int s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }

}  // namespace detail

/// IQ4_NL — 32 elements in 18 bytes: { fp16 d; uint8 qs[16] }. Element i < 16 is the low nibble of qs[i], element
/// i + 16 its high nibble; y = d · v[nibble], v the 16 levels detail::iq4_nl_values.
constexpr int iq4_nl_block_elements = 32, iq4_nl_block_bytes = 18;
inline void dequantize_iq4_nl_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += iq4_nl_block_bytes, out += iq4_nl_block_elements)
    detail::nibble_levels(data + 2, detail::half_to_float(data), detail::iq4_nl_values, out);
}

/// IQ4_XS — 256 elements in 136 bytes: { fp16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128] }, eight groups
/// of 32. Group g has the 6-bit scale ls_g = (nibble g mod 2 of scales_l[g/2]) | (bits 2g, 2g + 1 of scales_h) << 4;
/// its elements 32g + i (i < 16) are the low nibbles of qs[16g + i], 32g + 16 + i their high nibbles.
/// y = (d·(ls_g − 32)) · v[nibble], v the IQ4_NL levels.
constexpr int iq4_xs_block_elements = 256, iq4_xs_block_bytes = 136;
inline void dequantize_iq4_xs_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += iq4_xs_block_bytes, out += iq4_xs_block_elements) {
    const float d = detail::half_to_float(data);
    const std::uint32_t scales_h = detail::little_endian_u16(data + 2);
    const unsigned char* scales_l = data + 4;
    const unsigned char* qs = data + 8;
    for (int g = 0; g < 8; ++g) {
      const int ls = ((scales_l[g / 2] >> (4 * (g % 2))) & 15) | static_cast<int>(((scales_h >> (2 * g)) & 3) << 4);
      detail::nibble_levels(qs + 16 * g, d * static_cast<float>(ls - 32), detail::iq4_nl_values, out + 32 * g);
    }
  }
}

namespace detail {

/// Half the E8M0 scale e, 2^(e − 128), as ggml's ggml_e8m0_to_fp32_half builds it: the float32 with exponent field
/// e − 1 for e ≥ 2, the subnormals 2⁻¹²⁸ and 2⁻¹²⁷ for e = 0 and 1. Exact for every byte: e = 255 is 2¹²⁷, not the
/// NaN of the OCP specification (ggml does not treat it apart).
inline float e8m0_half(unsigned e) {
  const std::uint32_t bits = e < 2 ? std::uint32_t(0x00200000) << e : std::uint32_t(e - 1) << 23;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

}  // namespace detail

/// MXFP4 — 32 elements in 17 bytes: { uint8 e (E8M0 scale); uint8 qs[16] }. Element i < 16 is the low nibble of
/// qs[i], element i + 16 its high nibble, each an E2M1 value (bit 3 the sign, magnitudes 0, ½, 1, 1½, 2, 3, 4, 6).
/// y = t[nibble] · 2^(e − 128) with t the doubled E2M1 values (detail::fp4_doubled_values), i.e. the E2M1 value
/// times the OCP scale 2^(e − 127) (OCP Microscaling Formats v1.0, §5.3.3; ggml's dequantize_row_mxfp4). Every
/// product is exact; the negative zero (nibble 8) gives +0, as in ggml.
constexpr int mxfp4_block_elements = 32, mxfp4_block_bytes = 17;
inline void dequantize_mxfp4_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += mxfp4_block_bytes, out += mxfp4_block_elements)
    detail::nibble_levels(data + 1, detail::e8m0_half(data[0]), detail::fp4_doubled_values, out);
}

// The dequantizers with an AVX2 path: the bits of the references above, through it where the CPU has it.

inline void dequantize_iq4_nl(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available())
    return detail::avx2_dequantize::nibble_blocks<iq4_nl_block_bytes>(
        data, blocks, detail::iq4_nl_values, [](const unsigned char* block) { return detail::half_to_float(block); },
        out);
#endif
  dequantize_iq4_nl_reference(data, blocks, out);
}
inline void dequantize_iq4_xs(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available())
    return detail::avx2_dequantize::iq4_xs(data, blocks, detail::iq4_nl_values, out);
#endif
  dequantize_iq4_xs_reference(data, blocks, out);
}
inline void dequantize_mxfp4(const unsigned char* data, Index blocks, float* out) {
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available())
    return detail::avx2_dequantize::nibble_blocks<mxfp4_block_bytes>(
        data, blocks, detail::fp4_doubled_values, [](const unsigned char* block) { return detail::e8m0_half(block[0]); },
        out);
#endif
  dequantize_mxfp4_reference(data, blocks, out);
}

namespace detail {

/// Ternary digit n (0 … 4) of a TQ1_0 byte q, which holds five base-3 digits as the fixed-point fraction q/256:
/// multiplying by 3ⁿ modulo 256 shifts digit n to the front, and (that · 3) >> 8 reads it (0, 1 or 2).
inline int tq1_digit(unsigned q, int n) {
  static constexpr unsigned powers_of_3[5] = {1, 3, 9, 27, 81};
  return static_cast<int>(((q * powers_of_3[n]) & 0xff) * 3 >> 8);
}

}  // namespace detail

/// TQ1_0 — 256 elements in 54 bytes: { uint8 qs[48]; uint8 qh[4]; fp16 d }, ternary digits t ∈ {0, 1, 2}
/// (detail::tq1_digit), y = (t − 1)·d. Element 32n + m (n < 5, m < 32) is digit n of qs[m]; element 160 + 16n + m
/// (n < 5, m < 16) digit n of qs[32 + m]; element 240 + 4n + j (n < 4, j < 4) digit n of qh[j].
constexpr int tq1_0_block_elements = 256, tq1_0_block_bytes = 54;
inline void dequantize_tq1_0_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += tq1_0_block_bytes, out += tq1_0_block_elements) {
    const unsigned char* qs = data;
    const unsigned char* qh = data + 48;
    const float d = detail::half_to_float(data + 52);
    const auto value = [d](unsigned q, int n) { return static_cast<float>(detail::tq1_digit(q, n) - 1) * d; };
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) out[32 * n + m] = value(qs[m], n);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) out[160 + 16 * n + m] = value(qs[32 + m], n);
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 4; ++j) out[240 + 4 * n + j] = value(qh[j], n);
  }
}

/// TQ2_0 — 256 elements in 66 bytes: { uint8 qs[64]; fp16 d }. Element 128h + 32l + m (h < 2, l < 4, m < 32) is
/// bits 2l, 2l + 1 of qs[32h + m], a value t ∈ {0 … 3}; y = (t − 1)·d.
constexpr int tq2_0_block_elements = 256, tq2_0_block_bytes = 66;
inline void dequantize_tq2_0_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += tq2_0_block_bytes, out += tq2_0_block_elements) {
    const float d = detail::half_to_float(data + 64);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m)
          out[128 * h + 32 * l + m] = static_cast<float>(((data[32 * h + m] >> (2 * l)) & 3) - 1) * d;
  }
}

/// IQ2_XXS — 256 elements in 66 bytes: { fp16 d; eight 32-element groups of two little-endian uint32 words a, b }.
/// Run l (< 4) of 8 elements of a group is the lattice point detail::iq2_xxs_grid[byte l of a] with the signs
/// detail::iq2_signs[bits 7l … 7l + 6 of b]; bits 28–31 of b are the group's scale s. y = ((d·(½ + s))·¼)·g·(±1).
constexpr int iq2_xxs_block_elements = 256, iq2_xxs_block_bytes = 66;
inline void dequantize_iq2_xxs_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_lattice<iq2_xxs_block_bytes>(data, blocks, out, [](const unsigned char* block, float d, int group,
                                                                        int l) {
    const unsigned char* words = block + 2 + 8 * group;
    const std::uint32_t high = detail::little_endian_u32(words + 4);
    return detail::LatticeRun{detail::iq2_group_scale(d, static_cast<int>(high >> 28)),
                              detail::iq2_xxs_grid[words[l]], detail::iq2_signs[(high >> (7 * l)) & 127]};
  });
}

/// IQ2_XS — 256 elements in 74 bytes: { fp16 d; uint16 qs[32]; uint8 scales[8] }. Run l (< 4) of 8 elements of group
/// g is the point detail::iq2_xs_grid[q & 511] with the signs detail::iq2_signs[q >> 9], q = qs[4g + l]; runs 0–1 use
/// the low nibble s of scales[g], runs 2–3 the high one. y = ((d·(½ + s))·¼)·g·(±1).
constexpr int iq2_xs_block_elements = 256, iq2_xs_block_bytes = 74;
inline void dequantize_iq2_xs_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_lattice<iq2_xs_block_bytes>(data, blocks, out, [](const unsigned char* block, float d, int group,
                                                                       int l) {
    const std::uint32_t q = detail::little_endian_u16(block + 2 + 2 * (4 * group + l));
    const int scale = (block[66 + group] >> (4 * (l / 2))) & 15;
    return detail::LatticeRun{detail::iq2_group_scale(d, scale), detail::iq2_xs_grid[q & 511],
                              detail::iq2_signs[q >> 9]};
  });
}

/// IQ2_S — 256 elements in 82 bytes: { fp16 d; uint8 qs[32]; uint8 signs[32]; uint8 qh[8]; uint8 scales[8] }. Run l
/// (< 4) of 8 elements of group g is the point detail::iq2_s_grid[qs[4g + l] | (bits 2l, 2l + 1 of qh[g]) << 8] with
/// the sign bits signs[4g + l]; runs 0–1 use the low nibble s of scales[g], runs 2–3 the high one.
/// y = ((d·(½ + s))·¼)·g·(±1).
constexpr int iq2_s_block_elements = 256, iq2_s_block_bytes = 82;
inline void dequantize_iq2_s_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_lattice<iq2_s_block_bytes>(data, blocks, out, [](const unsigned char* block, float d, int group,
                                                                      int l) {
    const unsigned char* qs = block + 2;
    const unsigned char* signs = block + 34;
    const unsigned char* qh = block + 66;
    const int scale = (block[74 + group] >> (4 * (l / 2))) & 15;
    const int index = qs[4 * group + l] | (((qh[group] >> (2 * l)) & 3) << 8);
    return detail::LatticeRun{detail::iq2_group_scale(d, scale), detail::iq2_s_grid[index], signs[4 * group + l]};
  });
}

/// IQ3_XXS — 256 elements in 98 bytes: { fp16 d; uint8 qs[64]; eight little-endian uint32 words w }. Run l (< 4) of
/// 8 elements of group g is two points of 4, detail::iq3_xxs_grid[qs[8g + 2l]] and [qs[8g + 2l + 1]], with the signs
/// detail::iq2_signs[bits 7l … 7l + 6 of w_g]; bits 28–31 of w_g are the scale s. y = ((d·(½ + s))·½)·g·(±1).
constexpr int iq3_xxs_block_elements = 256, iq3_xxs_block_bytes = 98;
inline void dequantize_iq3_xxs_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_lattice<iq3_xxs_block_bytes>(data, blocks, out, [](const unsigned char* block, float d, int group,
                                                                        int l) {
    const unsigned char* qs = block + 2 + 8 * group + 2 * l;
    const std::uint32_t word = detail::little_endian_u32(block + 66 + 4 * group);
    return detail::LatticeRun{d * (0.5f + static_cast<float>(word >> 28)) * 0.5f,
                              detail::point_pair(detail::iq3_xxs_grid[qs[0]], detail::iq3_xxs_grid[qs[1]]),
                              detail::iq2_signs[(word >> (7 * l)) & 127]};
  });
}

/// IQ3_S — 256 elements in 110 bytes: { fp16 d; uint8 qs[64]; uint8 qh[8]; uint8 signs[32]; uint8 scales[4] }. Run
/// l (< 4) of 8 elements of group g is two points of 4, detail::iq3_s_grid[qs[8g + 2l] | (bit 2l of qh[g]) << 8] and
/// [qs[8g + 2l + 1] | (bit 2l + 1 of qh[g]) << 8], with the sign bits signs[4g + l]; group g's scale is nibble g mod 2
/// of scales[g/2]. y = (d·(1 + 2s))·g·(±1).
constexpr int iq3_s_block_elements = 256, iq3_s_block_bytes = 110;
inline void dequantize_iq3_s_reference(const unsigned char* data, Index blocks, float* out) {
  detail::dequantize_lattice<iq3_s_block_bytes>(data, blocks, out, [](const unsigned char* block, float d, int group,
                                                                      int l) {
    const unsigned char* qs = block + 2 + 8 * group + 2 * l;
    const int qh = block[66 + group];
    const int first = qs[0] | (((qh >> (2 * l)) & 1) << 8), second = qs[1] | (((qh >> (2 * l + 1)) & 1) << 8);
    const int scale = (block[106 + group / 2] >> (4 * (group % 2))) & 15;
    return detail::LatticeRun{d * static_cast<float>(1 + 2 * scale),
                              detail::point_pair(detail::iq3_s_grid[first], detail::iq3_s_grid[second]),
                              block[74 + 4 * group + l]};
  });
}

namespace detail {

/// The shift of IQ1_S and IQ1_M values: ±1/8 (ggml's IQ1S_DELTA, IQ1M_DELTA).
constexpr float iq1_delta = 0.125f;

/// Eight elements y_j = dl·(g_j + delta) of an IQ1 run: g_j the int8 byte j of detail::iq1_s_grid[index].
inline void iq1_run(float dl, float delta, int index, float* y) {
  const std::uint64_t entry = iq1_s_grid[index];
  for (int j = 0; j < 8; ++j)
    y[j] = dl * (static_cast<float>(static_cast<std::int8_t>(grid_byte(entry, j))) + delta);
}

}  // namespace detail

/// IQ1_S — 256 elements in 50 bytes: { fp16 d; uint8 qs[32]; uint16 qh[8] }. With h = qh[g] of group g: run l (< 4)
/// of 8 elements is the point detail::iq1_s_grid[qs[4g + l] | (bits 3l … 3l + 2 of h) << 8] (values −1, 0, 1),
/// shifted by delta = −⅛ when bit 15 of h is set, else +⅛; the scale is s = bits 12–14 of h.
/// y = (d·(2s + 1))·(g + delta).
constexpr int iq1_s_block_elements = 256, iq1_s_block_bytes = 50;
inline void dequantize_iq1_s_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += iq1_s_block_bytes) {
    const float d = detail::half_to_float(data);
    const unsigned char* qs = data + 2;
    for (int group = 0; group < 8; ++group) {
      const std::uint32_t h = detail::little_endian_u16(data + 34 + 2 * group);
      const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
      const float delta = h & 0x8000 ? -detail::iq1_delta : detail::iq1_delta;
      for (int l = 0; l < 4; ++l, out += 8)
        detail::iq1_run(dl, delta, qs[4 * group + l] | static_cast<int>(((h >> (3 * l)) & 7) << 8), out);
    }
  }
}

/// IQ1_M — 256 elements in 56 bytes: { uint8 qs[32]; uint8 qh[16]; uint8 scales[8] }, with no scale field of its own:
/// the fp16 d is the top nibbles of the four little-endian uint16 words s_k of `scales` (bits 0–3 from s_0, … 12–15
/// from s_3). Group g uses qs[4g .. 4g + 3] and qh[2g], qh[2g + 1]: run l (< 4) is the point
/// detail::iq1_s_grid[qs[4g + l] | (bits 0–2 (l even) or 4–6 (l odd) of qh[2g + l/2]) << 8], shifted by −⅛ when bit
/// 3 (l even) or 7 (l odd) of that byte is set, else +⅛; runs 0–1 have the 3-bit scale s at bit 6(g mod 2) of
/// s_{g/2}, runs 2–3 the one at bit 6(g mod 2) + 3. y = (d·(2s + 1))·(g + delta).
constexpr int iq1_m_block_elements = 256, iq1_m_block_bytes = 56;
inline void dequantize_iq1_m_reference(const unsigned char* data, Index blocks, float* out) {
  for (Index b = 0; b < blocks; ++b, data += iq1_m_block_bytes) {
    const unsigned char* qs = data;
    const unsigned char* qh = data + 32;
    std::uint32_t s[4];
    for (int k = 0; k < 4; ++k) s[k] = detail::little_endian_u16(data + 48 + 2 * k);
    const std::uint32_t d_bits = (s[0] >> 12) | ((s[1] >> 8) & 0x00f0) | ((s[2] >> 4) & 0x0f00) | (s[3] & 0xf000);
    const unsigned char d_bytes[2] = {static_cast<unsigned char>(d_bits & 0xff),
                                      static_cast<unsigned char>(d_bits >> 8)};
    const float d = detail::half_to_float(d_bytes);
    for (int group = 0; group < 8; ++group) {
      const int shift = 6 * (group % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((s[group / 2] >> shift) & 7) + 1),
                           d * static_cast<float>(2 * ((s[group / 2] >> (shift + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l, out += 8) {
        const int high = qh[2 * group + l / 2] >> (4 * (l % 2));
        const float delta = high & 8 ? -detail::iq1_delta : detail::iq1_delta;
        detail::iq1_run(dl[l / 2], delta, qs[4 * group + l] | ((high & 7) << 8), out);
      }
    }
  }
}

}  // namespace attnscope::kernels
