// attnscope/kernels/widen.hpp — the formats weights are stored in (float32, IEEE binary16, bfloat16, and ggml's
// block-quantized Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) and their conversion to float32 on raw contiguous runs. Every binary16
// and bfloat16 value is a float32, so that conversion is exact: bfloat16 is the upper half of a float32 (its bits
// shifted left by 16), binary16 goes through Eigen::half's conversion (F16C's vcvtph2ps when the build has it). A
// block format stores `stored_block_elements` consecutive elements in `stored_block_bytes` bytes and is dequantized
// block by block (kernels/dequantize.hpp); runs of it start at a block and hold whole blocks. Used by the model to
// multiply weights kept in their stored format (model/detail/linear.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/dequantize.hpp"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define ATTNSCOPE_WIDEN_AVX2 1
#endif

namespace attnscope::kernels {

/// The format of stored floating-point weights.
enum class StoredFloat {
  float32,   // IEEE binary32
  float16,   // IEEE binary16 (safetensors F16)
  bfloat16,  // bfloat16: the upper 16 bits of a binary32 (safetensors BF16)
  q8_0,      // ggml Q8_0: blocks of 32 elements in 34 bytes (kernels/dequantize.hpp)
  q4_0,      // ggml Q4_0: blocks of 32 elements in 18 bytes
  q4_k,      // ggml Q4_K: blocks of 256 elements in 144 bytes
  q5_k,      // ggml Q5_K: blocks of 256 elements in 176 bytes
  q6_k,      // ggml Q6_K: blocks of 256 elements in 210 bytes
};

/// True for the block-quantized formats (Q8_0 … Q6_K), false for float32, float16 and bfloat16.
constexpr bool is_block_format(StoredFloat format) {
  return format != StoredFloat::float32 && format != StoredFloat::float16 && format != StoredFloat::bfloat16;
}

/// Elements per block of `format` (1 for float32, float16, bfloat16).
constexpr Index stored_block_elements(StoredFloat format) {
  return format == StoredFloat::q8_0 || format == StoredFloat::q4_0                              ? 32
         : format == StoredFloat::q4_k || format == StoredFloat::q5_k || format == StoredFloat::q6_k ? 256
                                                                                                      : 1;
}

/// Bytes per block of `format` (the element size for float32, float16, bfloat16).
constexpr std::size_t stored_block_bytes(StoredFloat format) {
  switch (format) {
    case StoredFloat::float32: return 4;
    case StoredFloat::float16: case StoredFloat::bfloat16: return 2;
    case StoredFloat::q8_0: return q8_0_block_bytes;
    case StoredFloat::q4_0: return q4_0_block_bytes;
    case StoredFloat::q4_k: return q4_k_block_bytes;
    case StoredFloat::q5_k: return q5_k_block_bytes;
    case StoredFloat::q6_k: return q6_k_block_bytes;
  }
  return 0;
}

/// Bytes per element of a float format (float32, float16, bfloat16); for a block format, the bytes of a block.
constexpr std::size_t stored_float_size(StoredFloat format) { return stored_block_bytes(format); }

/// Bytes of `count` consecutive elements of `format` (count a multiple of the block size for block formats).
constexpr std::size_t stored_bytes(StoredFloat format, Index count) {
  return static_cast<std::size_t>(count / stored_block_elements(format)) * stored_block_bytes(format);
}

/// "float32", "float16", "bfloat16", "Q8_0", "Q4_0", "Q4_K", "Q5_K" or "Q6_K".
constexpr const char* stored_float_name(StoredFloat format) {
  switch (format) {
    case StoredFloat::float32: return "float32";
    case StoredFloat::float16: return "float16";
    case StoredFloat::bfloat16: return "bfloat16";
    case StoredFloat::q8_0: return "Q8_0";
    case StoredFloat::q4_0: return "Q4_0";
    case StoredFloat::q4_k: return "Q4_K";
    case StoredFloat::q5_k: return "Q5_K";
    case StoredFloat::q6_k: return "Q6_K";
  }
  return "?";
}

/// Dequantizes `count` elements (a whole number of blocks) of the block format `format` at `data` into out.
inline void dequantize_blocks(const unsigned char* data, StoredFloat format, Index count, float* out) {
  const Index blocks = count / stored_block_elements(format);
  switch (format) {
    case StoredFloat::q8_0: dequantize_q8_0(data, blocks, out); return;
    case StoredFloat::q4_0: dequantize_q4_0(data, blocks, out); return;
    case StoredFloat::q4_k: dequantize_q4_k(data, blocks, out); return;
    case StoredFloat::q5_k: dequantize_q5_k(data, blocks, out); return;
    case StoredFloat::q6_k: dequantize_q6_k(data, blocks, out); return;
    default: return;
  }
}

/// Scalar reference: out[i] = the float32 value of element i of `count` elements of `format` at `data` (any
/// alignment; a block format: whole blocks from a block start). O(count).
inline void widen_reference(const unsigned char* data, StoredFloat format, Index count, float* out) {
  if (is_block_format(format)) {
    dequantize_blocks(data, format, count, out);
    return;
  }
  for (Index i = 0; i < count; ++i) {
    const unsigned char* element = data + static_cast<std::size_t>(i) * stored_float_size(format);
    if (format == StoredFloat::float32) {
      std::memcpy(out + i, element, 4);
    } else if (format == StoredFloat::bfloat16) {
      std::uint16_t bits;
      std::memcpy(&bits, element, 2);
      const std::uint32_t wide = std::uint32_t(bits) << 16;
      std::memcpy(out + i, &wide, 4);
    } else {
      Eigen::half value;
      std::memcpy(&value, element, 2);
      out[i] = static_cast<float>(value);
    }
  }
}

/// out[i] = the float32 value of element i of `count` elements of `format` at `data` (any alignment; a block format:
/// whole blocks from a block start): the same values as widen_reference, eight at a time with AVX2 and F16C when
/// the build has them. O(count).
inline void widen(const unsigned char* data, StoredFloat format, Index count, float* out) {
  if (is_block_format(format)) {
    dequantize_blocks(data, format, count, out);
    return;
  }
  Index done = 0;
#if defined(ATTNSCOPE_WIDEN_AVX2)
  if (format == StoredFloat::bfloat16) {
    for (; done + 8 <= count; done += 8) {
      const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 2 * done));
      const __m256i wide = _mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16);
      _mm256_storeu_ps(out + done, _mm256_castsi256_ps(wide));
    }
  } else if (format == StoredFloat::float16) {
    for (; done + 8 <= count; done += 8)
      _mm256_storeu_ps(out + done,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 2 * done))));
  }
#endif
  if (format == StoredFloat::float32) {
    std::memcpy(out, data, static_cast<std::size_t>(count) * 4);
    return;
  }
  widen_reference(data + static_cast<std::size_t>(done) * stored_float_size(format), format, count - done,
                  out + done);
}

}  // namespace attnscope::kernels
