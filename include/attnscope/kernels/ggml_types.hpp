// attnscope/kernels/ggml_types.hpp — the formats weights are stored in, in one table: for each StoredFloat its ggml
// tensor type number (the GGUF file's), its names, its block shape (block_elements consecutive elements of a row in
// block_bytes bytes; 1 element for the float formats) and, for the block formats, its scalar dequantizer and the
// dispatched one (kernels/dequantize.hpp, kernels/dequantize_iq.hpp). Every per-format question of kernels/widen.hpp
// and of the GGUF loader (model/gguf.hpp) is answered from this table.
//
// Adding a ggml type: its StoredFloat enumerator (at the end), its dequantizer, and one row of stored_formats
// (docs/adding-an-architecture.md, "Adding a quantization type").
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/dequantize.hpp"
#include "attnscope/kernels/dequantize_iq.hpp"

namespace attnscope::kernels {

/// The format of stored floating-point weights: float32, IEEE binary16, bfloat16, or one of ggml's block formats.
enum class StoredFloat {
  float32,   // IEEE binary32
  float16,   // IEEE binary16 (safetensors F16)
  bfloat16,  // bfloat16: the upper 16 bits of a binary32 (safetensors BF16)
  q8_0, q4_0, q4_k, q5_k, q6_k, q4_1, q5_0, q5_1, q2_k, q3_k, q8_k,  // kernels/dequantize.hpp
  iq4_nl, iq4_xs, mxfp4, tq1_0, tq2_0, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m,  // dequantize_iq.hpp
};

/// A dequantizer: `blocks` consecutive blocks at `data` (any alignment) → blocks × block_elements floats at out.
using DequantizeFunction = void (*)(const unsigned char* data, Index blocks, float* out);

/// One stored format: its ggml type number, names, block shape and dequantizers.
struct StoredFormatInfo {
  StoredFloat format;
  std::uint32_t ggml_type;       ///< ggml's enum ggml_type number, the GGUF tensor type (ggml/include/ggml.h)
  const char* name;              ///< attnscope's name: "float32", "float16", "bfloat16", "Q8_0", "IQ2_XXS", …
  const char* ggml_name;         ///< ggml's type name: "f32", "f16", "bf16", "q8_0", "q4_K", "iq2_xxs", …
  Index block_elements;          ///< elements per block (1 for the float formats)
  std::size_t block_bytes;       ///< bytes per block (the element size for the float formats)
  DequantizeFunction reference;  ///< the scalar definition (nullptr for the float formats)
  DequantizeFunction dispatched; ///< the same bits, through SIMD code where the CPU has it (nullptr for floats)
};

/// Every StoredFloat, in enumerator order. Block shapes from ggml-common.h's block structs.
inline constexpr StoredFormatInfo stored_formats[] = {
    {StoredFloat::float32, 0, "float32", "f32", 1, 4, nullptr, nullptr},
    {StoredFloat::float16, 1, "float16", "f16", 1, 2, nullptr, nullptr},
    {StoredFloat::bfloat16, 30, "bfloat16", "bf16", 1, 2, nullptr, nullptr},
    {StoredFloat::q8_0, 8, "Q8_0", "q8_0", 32, 34, dequantize_q8_0_reference, dequantize_q8_0},
    {StoredFloat::q4_0, 2, "Q4_0", "q4_0", 32, 18, dequantize_q4_0_reference, dequantize_q4_0},
    {StoredFloat::q4_k, 12, "Q4_K", "q4_K", 256, 144, dequantize_q4_k_reference, dequantize_q4_k},
    {StoredFloat::q5_k, 13, "Q5_K", "q5_K", 256, 176, dequantize_q5_k_reference, dequantize_q5_k},
    {StoredFloat::q6_k, 14, "Q6_K", "q6_K", 256, 210, dequantize_q6_k_reference, dequantize_q6_k},
    {StoredFloat::q4_1, 3, "Q4_1", "q4_1", 32, 20, dequantize_q4_1_reference, dequantize_q4_1},
    {StoredFloat::q5_0, 6, "Q5_0", "q5_0", 32, 22, dequantize_q5_0_reference, dequantize_q5_0},
    {StoredFloat::q5_1, 7, "Q5_1", "q5_1", 32, 24, dequantize_q5_1_reference, dequantize_q5_1},
    {StoredFloat::q2_k, 10, "Q2_K", "q2_K", 256, 84, dequantize_q2_k_reference, dequantize_q2_k},
    {StoredFloat::q3_k, 11, "Q3_K", "q3_K", 256, 110, dequantize_q3_k_reference, dequantize_q3_k},
    {StoredFloat::q8_k, 15, "Q8_K", "q8_K", 256, 292, dequantize_q8_k_reference, dequantize_q8_k},
    {StoredFloat::iq4_nl, 20, "IQ4_NL", "iq4_nl", 32, 18, dequantize_iq4_nl_reference, dequantize_iq4_nl},
    {StoredFloat::iq4_xs, 23, "IQ4_XS", "iq4_xs", 256, 136, dequantize_iq4_xs_reference, dequantize_iq4_xs},
    {StoredFloat::mxfp4, 39, "MXFP4", "mxfp4", 32, 17, dequantize_mxfp4_reference, dequantize_mxfp4},
    {StoredFloat::tq1_0, 34, "TQ1_0", "tq1_0", 256, 54, dequantize_tq1_0_reference, dequantize_tq1_0_reference},
    {StoredFloat::tq2_0, 35, "TQ2_0", "tq2_0", 256, 66, dequantize_tq2_0_reference, dequantize_tq2_0_reference},
    {StoredFloat::iq2_xxs, 16, "IQ2_XXS", "iq2_xxs", 256, 66, dequantize_iq2_xxs_reference,
     dequantize_iq2_xxs_reference},
    {StoredFloat::iq2_xs, 17, "IQ2_XS", "iq2_xs", 256, 74, dequantize_iq2_xs_reference, dequantize_iq2_xs_reference},
    {StoredFloat::iq2_s, 22, "IQ2_S", "iq2_s", 256, 82, dequantize_iq2_s_reference, dequantize_iq2_s_reference},
    {StoredFloat::iq3_xxs, 18, "IQ3_XXS", "iq3_xxs", 256, 98, dequantize_iq3_xxs_reference,
     dequantize_iq3_xxs_reference},
    {StoredFloat::iq3_s, 21, "IQ3_S", "iq3_s", 256, 110, dequantize_iq3_s_reference, dequantize_iq3_s_reference},
    {StoredFloat::iq1_s, 19, "IQ1_S", "iq1_s", 256, 50, dequantize_iq1_s_reference, dequantize_iq1_s_reference},
    {StoredFloat::iq1_m, 29, "IQ1_M", "iq1_m", 256, 56, dequantize_iq1_m_reference, dequantize_iq1_m_reference},
};

namespace detail {

/// True when row i of stored_formats describes enumerator i, every block format has both dequantizers and no two
/// rows share a ggml type number.
constexpr bool stored_formats_consistent() {
  const std::size_t count = std::size(stored_formats);
  for (std::size_t i = 0; i < count; ++i) {
    const StoredFormatInfo& row = stored_formats[i];
    if (static_cast<std::size_t>(row.format) != i || row.block_elements < 1 || row.block_bytes < 1) return false;
    if ((row.block_elements > 1) != (row.reference != nullptr && row.dispatched != nullptr)) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (stored_formats[j].ggml_type == row.ggml_type) return false;
  }
  return true;
}
static_assert(stored_formats_consistent(), "stored_formats: one row per StoredFloat, in enumerator order");
static_assert(std::size(stored_formats) == static_cast<std::size_t>(StoredFloat::iq1_m) + 1,
              "stored_formats: a row for every StoredFloat");

}  // namespace detail

/// The table row of `format`.
constexpr const StoredFormatInfo& stored_format_info(StoredFloat format) {
  return stored_formats[static_cast<std::size_t>(format)];
}

/// The row whose ggml type number is `ggml_type`, or nullptr when attnscope cannot read that type.
constexpr const StoredFormatInfo* stored_format_of_ggml_type(std::uint32_t ggml_type) {
  for (const StoredFormatInfo& row : stored_formats)
    if (row.ggml_type == ggml_type) return &row;
  return nullptr;
}

/// ggml's names of every format, comma-separated in table order ("f32, f16, bf16, q8_0, …").
inline std::string ggml_type_names() {
  std::string names;
  for (const StoredFormatInfo& row : stored_formats) names += (names.empty() ? "" : ", ") + std::string(row.ggml_name);
  return names;
}

}  // namespace attnscope::kernels
