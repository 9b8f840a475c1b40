// attnscope/kernels/widen.hpp — the floating-point formats weights are stored in (float32, IEEE binary16, bfloat16)
// and their exact widening to float32 on raw contiguous runs. Every binary16 and bfloat16 value is a float32, so the
// conversion is exact: bfloat16 is the upper half of a float32 (its bits shifted left by 16), binary16 goes through
// Eigen::half's conversion (F16C's vcvtph2ps when the build has it). Used by the model to multiply weights kept in
// their stored format (model/detail/linear.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"

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
};

/// Bytes per element of `format`.
constexpr std::size_t stored_float_size(StoredFloat format) { return format == StoredFloat::float32 ? 4 : 2; }

/// "float32", "float16" or "bfloat16".
constexpr const char* stored_float_name(StoredFloat format) {
  return format == StoredFloat::float32 ? "float32" : format == StoredFloat::float16 ? "float16" : "bfloat16";
}

/// Scalar reference: out[i] = the float32 value of element i of `count` elements of `format` at `data` (any
/// alignment). O(count).
inline void widen_reference(const unsigned char* data, StoredFloat format, Index count, float* out) {
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

/// out[i] = the float32 value of element i of `count` elements of `format` at `data` (any alignment): the same
/// values as widen_reference, eight at a time with AVX2 and F16C when the build has them. O(count).
inline void widen(const unsigned char* data, StoredFloat format, Index count, float* out) {
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
