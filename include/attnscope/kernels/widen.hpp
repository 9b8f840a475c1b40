// attnscope/kernels/widen.hpp — the conversion to float32 of the formats weights are stored in (float32, IEEE
// binary16, bfloat16, and ggml's block formats: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_K, the k-quants, the i-quants,
// TQ1_0, TQ2_0, MXFP4; one row each in the table of kernels/ggml_types.hpp) on raw contiguous runs. Every binary16
// and bfloat16 value is a float32, so that conversion is exact: bfloat16 is the upper half of a float32 (its bits
// shifted left by 16), binary16 goes through Eigen::half's conversion in the reference and F16C's vcvtph2ps in the
// AVX2 path (dispatched at run time, kernels/detail/dequantize_avx2.hpp). A block format stores
// `stored_block_elements` consecutive elements in `stored_block_bytes` bytes and is dequantized block by block by the
// table's dequantizers (kernels/dequantize.hpp, kernels/dequantize_iq.hpp); runs of it start at a block and hold
// whole blocks. Used by the model to multiply weights kept in their stored format (model/detail/linear.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/ggml_types.hpp"

namespace attnscope::kernels {

/// True for the block-quantized formats (Q8_0 … IQ1_M), false for float32, float16 and bfloat16.
constexpr bool is_block_format(StoredFloat format) { return stored_format_info(format).block_elements > 1; }

/// Elements per block of `format` (1 for float32, float16, bfloat16).
constexpr Index stored_block_elements(StoredFloat format) { return stored_format_info(format).block_elements; }

/// Bytes per block of `format` (the element size for float32, float16, bfloat16).
constexpr std::size_t stored_block_bytes(StoredFloat format) { return stored_format_info(format).block_bytes; }

/// Bytes per element of a float format (float32, float16, bfloat16); for a block format, the bytes of a block.
constexpr std::size_t stored_float_size(StoredFloat format) { return stored_block_bytes(format); }

/// Bytes of `count` consecutive elements of `format` (count a multiple of the block size for block formats).
constexpr std::size_t stored_bytes(StoredFloat format, Index count) {
  return static_cast<std::size_t>(count / stored_block_elements(format)) * stored_block_bytes(format);
}

/// "float32", "float16", "bfloat16", or ggml's name of the block format in capitals ("Q8_0", "Q4_K", "IQ2_XXS", ...).
constexpr const char* stored_float_name(StoredFloat format) { return stored_format_info(format).name; }

/// Dequantizes `count` elements (a whole number of blocks) of the block format `format` at `data` into out.
inline void dequantize_blocks(const unsigned char* data, StoredFloat format, Index count, float* out) {
  const StoredFormatInfo& info = stored_format_info(format);
  if (info.dispatched != nullptr) info.dispatched(data, count / info.block_elements, out);
}

/// Scalar reference: out[i] = the float32 value of element i of `count` elements of `format` at `data` (any
/// alignment; a block format: whole blocks from a block start), by the scalar definitions. O(count).
inline void widen_reference(const unsigned char* data, StoredFloat format, Index count, float* out) {
  const StoredFormatInfo& info = stored_format_info(format);
  if (info.reference != nullptr) {
    info.reference(data, count / info.block_elements, out);
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
