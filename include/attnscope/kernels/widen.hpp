// attnscope/kernels/widen.hpp — the formats weights are stored in (float32, IEEE binary16, bfloat16, and ggml's
// block-quantized Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_K, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and their conversion to float32
// on raw contiguous runs. Every binary16 and bfloat16 value is a float32, so that conversion is exact: bfloat16 is the
// upper half of a float32 (its bits shifted left by 16), binary16 goes through Eigen::half's conversion in the
// reference and F16C's vcvtph2ps in the AVX2 path (dispatched at run time, kernels/detail/dequantize_avx2.hpp). A
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
  q4_1,      // ggml Q4_1: blocks of 32 elements in 20 bytes
  q5_0,      // ggml Q5_0: blocks of 32 elements in 22 bytes
  q5_1,      // ggml Q5_1: blocks of 32 elements in 24 bytes
  q2_k,      // ggml Q2_K: blocks of 256 elements in 84 bytes
  q3_k,      // ggml Q3_K: blocks of 256 elements in 110 bytes
  q8_k,      // ggml Q8_K: blocks of 256 elements in 292 bytes
};

/// True for the block-quantized formats (Q8_0 … Q8_K), false for float32, float16 and bfloat16.
constexpr bool is_block_format(StoredFloat format) {
  return format != StoredFloat::float32 && format != StoredFloat::float16 && format != StoredFloat::bfloat16;
}

/// Elements per block of `format` (1 for float32, float16, bfloat16).
constexpr Index stored_block_elements(StoredFloat format) {
  switch (format) {
    case StoredFloat::float32: case StoredFloat::float16: case StoredFloat::bfloat16: return 1;
    case StoredFloat::q8_0: case StoredFloat::q4_0: case StoredFloat::q4_1: case StoredFloat::q5_0:
    case StoredFloat::q5_1: return 32;
    case StoredFloat::q2_k: case StoredFloat::q3_k: case StoredFloat::q4_k: case StoredFloat::q5_k:
    case StoredFloat::q6_k: case StoredFloat::q8_k: return 256;
  }
  return 1;
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
    case StoredFloat::q4_1: return q4_1_block_bytes;
    case StoredFloat::q5_0: return q5_0_block_bytes;
    case StoredFloat::q5_1: return q5_1_block_bytes;
    case StoredFloat::q2_k: return q2_k_block_bytes;
    case StoredFloat::q3_k: return q3_k_block_bytes;
    case StoredFloat::q8_k: return q8_k_block_bytes;
  }
  return 0;
}

/// Bytes per element of a float format (float32, float16, bfloat16); for a block format, the bytes of a block.
constexpr std::size_t stored_float_size(StoredFloat format) { return stored_block_bytes(format); }

/// Bytes of `count` consecutive elements of `format` (count a multiple of the block size for block formats).
constexpr std::size_t stored_bytes(StoredFloat format, Index count) {
  return static_cast<std::size_t>(count / stored_block_elements(format)) * stored_block_bytes(format);
}

/// "float32", "float16", "bfloat16", or ggml's name of the block format ("Q8_0", "Q4_K", ...).
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
    case StoredFloat::q4_1: return "Q4_1";
    case StoredFloat::q5_0: return "Q5_0";
    case StoredFloat::q5_1: return "Q5_1";
    case StoredFloat::q2_k: return "Q2_K";
    case StoredFloat::q3_k: return "Q3_K";
    case StoredFloat::q8_k: return "Q8_K";
  }
  return "?";
}

namespace detail {

/// Dequantizes `count` elements (a whole number of blocks) of the block format `format` at `data` into out, through
/// the dispatched dequantizers (Reference false) or the scalar references (true).
template <bool Reference>
void dequantize_format(const unsigned char* data, StoredFloat format, Index count, float* out) {
  const Index blocks = count / stored_block_elements(format);
  using Function = void (*)(const unsigned char*, Index, float*);
  const auto pick = [](Function reference, Function dispatched) { return Reference ? reference : dispatched; };
  Function function = nullptr;
  switch (format) {
    case StoredFloat::q8_0: function = pick(dequantize_q8_0_reference, dequantize_q8_0); break;
    case StoredFloat::q4_0: function = pick(dequantize_q4_0_reference, dequantize_q4_0); break;
    case StoredFloat::q4_1: function = pick(dequantize_q4_1_reference, dequantize_q4_1); break;
    case StoredFloat::q5_0: function = pick(dequantize_q5_0_reference, dequantize_q5_0); break;
    case StoredFloat::q5_1: function = pick(dequantize_q5_1_reference, dequantize_q5_1); break;
    case StoredFloat::q2_k: function = pick(dequantize_q2_k_reference, dequantize_q2_k); break;
    case StoredFloat::q3_k: function = pick(dequantize_q3_k_reference, dequantize_q3_k); break;
    case StoredFloat::q4_k: function = pick(dequantize_q4_k_reference, dequantize_q4_k); break;
    case StoredFloat::q5_k: function = pick(dequantize_q5_k_reference, dequantize_q5_k); break;
    case StoredFloat::q6_k: function = pick(dequantize_q6_k_reference, dequantize_q6_k); break;
    case StoredFloat::q8_k: function = pick(dequantize_q8_k_reference, dequantize_q8_k); break;
    default: return;
  }
  function(data, blocks, out);
}

}  // namespace detail

/// Dequantizes `count` elements (a whole number of blocks) of the block format `format` at `data` into out.
inline void dequantize_blocks(const unsigned char* data, StoredFloat format, Index count, float* out) {
  detail::dequantize_format<false>(data, format, count, out);
}

/// Scalar reference: out[i] = the float32 value of element i of `count` elements of `format` at `data` (any
/// alignment; a block format: whole blocks from a block start), by the scalar definitions. O(count).
inline void widen_reference(const unsigned char* data, StoredFloat format, Index count, float* out) {
  if (is_block_format(format)) {
    detail::dequantize_format<true>(data, format, count, out);
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
      out[i] = detail::half_to_float(element);
    }
  }
}

/// out[i] = the float32 value of element i of `count` elements of `format` at `data` (any alignment; a block format:
/// whole blocks from a block start): the same bits as widen_reference (a NaN may carry another payload), with AVX2
/// and F16C where the CPU has them (float16, bfloat16 and the block formats of kernels/dequantize.hpp that have an
/// AVX2 path). O(count).
inline void widen(const unsigned char* data, StoredFloat format, Index count, float* out) {
  if (is_block_format(format)) {
    dequantize_blocks(data, format, count, out);
    return;
  }
  if (format == StoredFloat::float32) {
    std::memcpy(out, data, static_cast<std::size_t>(count) * 4);
    return;
  }
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  if (detail::avx2_dequantize::available()) {
    if (format == StoredFloat::bfloat16) detail::avx2_dequantize::widen_16bit<true>(data, count, out);
    else detail::avx2_dequantize::widen_16bit<false>(data, count, out);
    return;
  }
#endif
  widen_reference(data, format, count, out);
}

}  // namespace attnscope::kernels
