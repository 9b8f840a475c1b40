// The table of stored formats (kernels/ggml_types.hpp) and the codebook and ternary dequantizers
// (kernels/dequantize_iq.hpp) on hand-made blocks whose values follow from the format's definition: ggml's type
// numbers and block sizes (ggml.h, ggml-common.h's static_asserts restated as arithmetic), MXFP4's E8M0 scale at
// every exponent, the E2M1 values, the IQ4_NL levels, IQ4_XS's split 6-bit scales, TQ1_0's base-3 packing as
// gguf-py's quantizer writes it, TQ2_0's 2-bit fields, IQ1_M's scattered fp16 scale, and the first points of the
// IQ2/IQ3 grids. Every dequantizer is checked bit for bit against llama.cpp's gguf-py on random blocks in
// tests/io/test_gguf.cpp.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnscope/kernels/widen.hpp"
#include "support/catch.hpp"

namespace {

namespace k = attnscope::kernels;
using attnscope::Index;
using k::StoredFloat;

void put_half(unsigned char* at, float value) {
  const Eigen::half h(value);
  std::memcpy(at, &h, 2);
}

/// The E2M1 value of a 4-bit code (OCP Microscaling Formats v1.0, §5.3.3): sign bit 3, exponent bits 1–2 (bias 1),
/// mantissa bit 0; exponent 0 is subnormal (0 or ½).
float e2m1_value(int code) {
  const int exponent = (code >> 1) & 3, mantissa = code & 1;
  const float magnitude = exponent == 0 ? 0.5f * mantissa : std::ldexp(1.0f + 0.5f * mantissa, exponent - 1);
  return code & 8 ? -magnitude : magnitude;
}

std::vector<float> dequantized(StoredFloat format, const std::vector<unsigned char>& block) {
  std::vector<float> y(static_cast<std::size_t>(k::stored_block_elements(format)));
  k::widen_reference(block.data(), format, k::stored_block_elements(format), y.data());
  std::vector<float> fast(y.size());
  k::widen(block.data(), format, k::stored_block_elements(format), fast.data());
  CHECK(std::memcmp(y.data(), fast.data(), y.size() * 4) == 0);
  return y;
}

}  // namespace

TEST_CASE("the stored-format table: ggml's type numbers, names and block sizes", "[kernels][dequantize]") {
  struct Expected {
    StoredFloat format;
    std::uint32_t ggml_type;
    const char* ggml_name;
    Index elements;
    std::size_t bytes;
  };
  const int qk = 256;  // QK_K
  // ggml.h's enum ggml_type and ggml-common.h's block structs (sizeof as their static_asserts state it)
  const Expected expected[] = {
      {StoredFloat::float32, 0, "f32", 1, 4},
      {StoredFloat::float16, 1, "f16", 1, 2},
      {StoredFloat::bfloat16, 30, "bf16", 1, 2},
      {StoredFloat::q8_0, 8, "q8_0", 32, 2 + 32},
      {StoredFloat::q4_0, 2, "q4_0", 32, 2 + 16},
      {StoredFloat::q4_k, 12, "q4_K", qk, 2 * 2 + 12 + qk / 2},
      {StoredFloat::q5_k, 13, "q5_K", qk, 2 * 2 + 12 + qk / 2 + qk / 8},
      {StoredFloat::q6_k, 14, "q6_K", qk, 2 + qk / 16 + 3 * qk / 4},
      {StoredFloat::q4_1, 3, "q4_1", 32, 2 * 2 + 16},
      {StoredFloat::q5_0, 6, "q5_0", 32, 2 + 4 + 16},
      {StoredFloat::q5_1, 7, "q5_1", 32, 2 * 2 + 4 + 16},
      {StoredFloat::q2_k, 10, "q2_K", qk, 2 * 2 + qk / 16 + qk / 4},
      {StoredFloat::q3_k, 11, "q3_K", qk, 2 + qk / 4 + qk / 8 + 12},
      {StoredFloat::q8_k, 15, "q8_K", qk, 4 + qk + qk / 16 * 2},
      {StoredFloat::iq4_nl, 20, "iq4_nl", 32, 2 + 16},
      {StoredFloat::iq4_xs, 23, "iq4_xs", qk, 2 + 2 + qk / 64 + qk / 2},
      {StoredFloat::mxfp4, 39, "mxfp4", 32, 1 + 16},
      {StoredFloat::tq1_0, 34, "tq1_0", qk, 2 + qk / 64 + (qk - 4 * qk / 64) / 5},
      {StoredFloat::tq2_0, 35, "tq2_0", qk, 2 + qk / 4},
      {StoredFloat::iq2_xxs, 16, "iq2_xxs", qk, 2 + qk / 8 * 2},
      {StoredFloat::iq2_xs, 17, "iq2_xs", qk, 2 + qk / 8 * 2 + qk / 32},
      {StoredFloat::iq2_s, 22, "iq2_s", qk, 2 + qk / 4 + qk / 16},
      {StoredFloat::iq3_xxs, 18, "iq3_xxs", qk, 2 + 3 * (qk / 8)},
      {StoredFloat::iq3_s, 21, "iq3_s", qk, 2 + 13 * (qk / 32) + qk / 64},
      {StoredFloat::iq1_s, 19, "iq1_s", qk, 2 + qk / 8 + qk / 16},
      {StoredFloat::iq1_m, 29, "iq1_m", qk, qk / 8 + qk / 16 + qk / 32},
  };
  REQUIRE(std::size(expected) == std::size(k::stored_formats));
  for (const Expected& e : expected) {
    const k::StoredFormatInfo& row = k::stored_format_info(e.format);
    INFO(row.name);
    CHECK(row.format == e.format);
    CHECK(row.ggml_type == e.ggml_type);
    CHECK(std::string(row.ggml_name) == e.ggml_name);
    CHECK(k::stored_block_elements(e.format) == e.elements);
    CHECK(k::stored_block_bytes(e.format) == e.bytes);
    CHECK(k::is_block_format(e.format) == (e.elements > 1));
    CHECK(k::stored_format_of_ggml_type(e.ggml_type) == &row);
    // the capital name is ggml's name in capitals, except for the float formats
    std::string upper = e.ggml_name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (e.elements > 1) CHECK(std::string(k::stored_float_name(e.format)) == upper);
  }
  // types attnscope cannot read: q8_1, the integer types, f64, nvfp4, q1_0, q2_0, and numbers ggml never defined
  for (const std::uint32_t unknown : {9u, 4u, 24u, 25u, 26u, 27u, 28u, 31u, 40u, 41u, 42u, 43u, 1000u})
    CHECK(k::stored_format_of_ggml_type(unknown) == nullptr);
  CHECK(k::ggml_type_names().find("f32, f16, bf16, q8_0") == 0);
  CHECK(k::ggml_type_names().find("mxfp4") != std::string::npos);
}

TEST_CASE("MXFP4: E2M1 values times the E8M0 scale 2^(e - 127), at every exponent", "[kernels][dequantize]") {
  std::vector<unsigned char> block(17);
  for (int i = 0; i < 16; ++i) block[1 + i] = static_cast<unsigned char>(i | ((15 - i) << 4));
  for (int e = 0; e < 256; ++e) {
    INFO("e = " << e);
    block[0] = static_cast<unsigned char>(e);
    const std::vector<float> y = dequantized(StoredFloat::mxfp4, block);
    for (int i = 0; i < 16; ++i) {
      // the exact value, rounded once (it overflows to ±inf for e ≥ 254 with the larger codes, as in ggml)
      const double low = std::ldexp(double(e2m1_value(i)), e - 127);
      const double high = std::ldexp(double(e2m1_value(15 - i)), e - 127);
      CHECK(y[i] == static_cast<float>(low));
      CHECK(y[16 + i] == static_cast<float>(high));
      CHECK(!std::signbit(y[i] == 0 ? y[i] : 1.0f));  // the code of −0 gives +0, as ggml's table
    }
  }
}

TEST_CASE("IQ4_NL and IQ4_XS: the non-linear levels and IQ4_XS's split 6-bit scales", "[kernels][dequantize]") {
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};  // ggml's
  {
    std::vector<unsigned char> block(18);
    put_half(block.data(), 0.5f);
    for (int i = 0; i < 16; ++i) block[2 + i] = static_cast<unsigned char>(i | ((15 - i) << 4));
    const std::vector<float> y = dequantized(StoredFloat::iq4_nl, block);
    for (int i = 0; i < 16; ++i) {
      CHECK(y[i] == 0.5f * levels[i]);
      CHECK(y[16 + i] == 0.5f * levels[15 - i]);
    }
  }
  {
    std::vector<unsigned char> block(136);
    put_half(block.data(), 0.25f);
    const int scales[8] = {0, 63, 32, 33, 1, 17, 48, 40};  // ls_g; the scale is ls_g − 32
    std::uint16_t high = 0;
    for (int g = 0; g < 8; ++g) {
      block[4 + g / 2] |= static_cast<unsigned char>((scales[g] & 15) << (4 * (g % 2)));
      high |= static_cast<std::uint16_t>((scales[g] >> 4) << (2 * g));
    }
    block[2] = static_cast<unsigned char>(high & 0xff);
    block[3] = static_cast<unsigned char>(high >> 8);
    for (int i = 0; i < 128; ++i) block[8 + i] = static_cast<unsigned char>((i % 16) | ((i * 7 % 16) << 4));
    const std::vector<float> y = dequantized(StoredFloat::iq4_xs, block);
    for (int g = 0; g < 8; ++g)
      for (int i = 0; i < 16; ++i) {
        const float dl = 0.25f * static_cast<float>(scales[g] - 32);
        CHECK(y[32 * g + i] == dl * levels[(16 * g + i) % 16]);
        CHECK(y[32 * g + 16 + i] == dl * levels[(16 * g + i) * 7 % 16]);
      }
  }
}

TEST_CASE("TQ1_0 and TQ2_0: ternary digits in their packing order", "[kernels][dequantize]") {
  // digit t_e ∈ {0, 1, 2} of element e, y = (t − 1)·d
  const auto digit = [](int e) { return (e * 5 + e / 7) % 3; };
  {
    // TQ1_0 as gguf-py's quantizer packs it: five digits (the first most significant) as a base-3 number x < 243,
    // stored as the byte ⌈256·x / 243⌉
    std::vector<unsigned char> block(54);
    const auto pack = [&](const std::vector<int>& elements) {  // element −1: a digit 0
      int x = 0;
      for (const int e : elements) x = 3 * x + (e < 0 ? 0 : digit(e));
      return static_cast<unsigned char>((x * 256 + 242) / 243);
    };
    for (int m = 0; m < 32; ++m) block[m] = pack({m, 32 + m, 64 + m, 96 + m, 128 + m});
    for (int m = 0; m < 16; ++m) block[32 + m] = pack({160 + m, 176 + m, 192 + m, 208 + m, 224 + m});
    // the qh bytes hold four digits in the top places, a digit 0 in the last
    for (int j = 0; j < 4; ++j) block[48 + j] = pack({240 + j, 244 + j, 248 + j, 252 + j, -1});
    put_half(block.data() + 52, -1.5f);
    const std::vector<float> y = dequantized(StoredFloat::tq1_0, block);
    for (int e = 0; e < 256; ++e) {
      INFO("element " << e);
      CHECK(y[e] == static_cast<float>(digit(e) - 1) * -1.5f);
    }
  }
  {
    std::vector<unsigned char> block(66);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, l = (e % 128) / 32, m = e % 32;
      block[32 * h + m] |= static_cast<unsigned char>((digit(e) + (e % 11 == 0)) << (2 * l));  // t = 3 occurs too
    }
    put_half(block.data() + 64, 0.75f);
    const std::vector<float> y = dequantized(StoredFloat::tq2_0, block);
    for (int e = 0; e < 256; ++e) CHECK(y[e] == static_cast<float>(digit(e) + (e % 11 == 0) - 1) * 0.75f);
  }
}

TEST_CASE("IQ1_M: the fp16 scale assembled from the top nibbles of the four scale words", "[kernels][dequantize]") {
  std::vector<unsigned char> block(56);
  const Eigen::half d(0.375f);
  std::uint16_t d_bits;
  std::memcpy(&d_bits, &d, 2);
  std::uint16_t words[4];
  for (int w = 0; w < 4; ++w) words[w] = static_cast<std::uint16_t>(((d_bits >> (4 * w)) & 15) << 12);
  // group 0: runs 0–1 scale field 2 (bits 0–2 of word 0), runs 2–3 field 5 (bits 3–5): dl = d·5 and d·11
  words[0] |= 2 | (5 << 3);
  for (int w = 0; w < 4; ++w) {
    block[48 + 2 * w] = static_cast<unsigned char>(words[w] & 0xff);
    block[48 + 2 * w + 1] = static_cast<unsigned char>(words[w] >> 8);
  }
  // group 0's runs: grid index 0 (the point (−1, …, −1)); run 1 with delta −⅛ (bit 7 of qh[0])
  block[32] = 0x80;
  const std::vector<float> y = dequantized(StoredFloat::iq1_m, block);
  for (int j = 0; j < 8; ++j) {
    CHECK(y[j] == 0.375f * 5 * (-1 + 0.125f));
    CHECK(y[8 + j] == 0.375f * 5 * (-1 - 0.125f));
    CHECK(y[16 + j] == 0.375f * 11 * (-1 + 0.125f));
  }
}

TEST_CASE("IQ2_XXS and IQ3_S: grid points, sign bits and group scales", "[kernels][dequantize]") {
  {
    // group 0: grid index 0 in all four runs (ggml's first IQ2_XXS point, all eight magnitudes 8), sign index 1 for
    // run 0 (ggml's ksigns_iq2xs[1] = 129: elements 0 and 7 negative), scale field 3: db = (d·3.5)·0.25
    std::vector<unsigned char> block(66);
    put_half(block.data(), 2.0f);
    const std::uint32_t high = 1u | (3u << 28);
    for (int b = 0; b < 4; ++b) block[2 + 4 + b] = static_cast<unsigned char>(high >> (8 * b));
    const std::vector<float> y = dequantized(StoredFloat::iq2_xxs, block);
    const float db = 2.0f * 3.5f * 0.25f;
    for (int j = 0; j < 32; ++j) CHECK(y[j] == ((j == 0 || j == 7) ? -8 * db : 8 * db));
  }
  {
    // group 0 with scale nibble 2 (db = 5d), grid index 0 (ggml's first IQ3_S point: four magnitudes 1), sign byte
    // 0b10100101 for run 0
    std::vector<unsigned char> block(110);
    put_half(block.data(), 0.5f);
    block[106] = 2;
    block[74] = 0xa5;
    const std::vector<float> y = dequantized(StoredFloat::iq3_s, block);
    for (int j = 0; j < 8; ++j) CHECK(y[j] == ((0xa5 >> j) & 1 ? -2.5f : 2.5f));
  }
}
