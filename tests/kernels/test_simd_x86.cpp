// kernels/detail/simd_x86.hpp: each helper against the x86 instruction it stands for, lane by lane (Intel's
// definitions of vunpcklps, vshufps, vperm2f128, vmaxps, vfmadd, vmovmskps, vpmovsxbd / vpmovzxbd, vpmovzxwd,
// vcvtph2ps, vcmpunordps), on the CPU's own instructions when it has them. The kernels built on these helpers are
// tested bit for bit against their scalar references elsewhere (test_runtime_dispatch.cpp, test_gemm.cpp,
// test_dequantize.cpp); this file pins the helpers themselves, so that a compiler that lowers a vector extension
// differently is caught here, by name.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <Eigen/Core>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels/detail/cpu_features.hpp"
#include "attnscope/kernels/detail/simd_x86.hpp"
#include "support/catch.hpp"

#if defined(ATTNSCOPE_SIMD_X86)
namespace simd_x86_test {

namespace x86 = attnscope::kernels::detail::x86;
using attnscope::kernels::detail::cpu_has_avx2_f16c;
using attnscope::kernels::detail::cpu_has_avx2_fma;
using attnscope::kernels::detail::cpu_has_avx512f;

struct Lanes8 {
  float v[8];
};

// The helpers run inside functions with (at least) their target; these are called only when the CPU has it.
__attribute__((target("avx2,fma"))) void permutations(const float* a, const float* b, Lanes8 (&out)[6]) {
  const x86::f32x8 x = x86::load8(a), y = x86::load8(b);
  x86::store8(out[0].v, x86::unpack_low(x, y));
  x86::store8(out[1].v, x86::unpack_high(x, y));
  x86::store8(out[2].v, x86::pairs_low(x, y));
  x86::store8(out[3].v, x86::pairs_high(x, y));
  x86::store8(out[4].v, x86::halves_low(x, y));
  x86::store8(out[5].v, x86::halves_high(x, y));
}

__attribute__((target("avx2,fma"))) void max_fma_lanes(const float* a, const float* b, const float* c, float* maximum,
                                                       float* fused, float& sum, float& largest) {
  const x86::f32x8 x = x86::load8(a), y = x86::load8(b), z = x86::load8(c);
  x86::store8(maximum, x86::lanewise_max(x, y));
  x86::store8(fused, x86::fma(x, y, z));
  sum = x86::sum_lanes(x);
  largest = x86::max_lanes(x);
}

__attribute__((target("avx2,fma"))) int movemask_of(const std::int32_t* lanes) {
  x86::i32x8 mask;
  std::memcpy(&mask, lanes, sizeof(mask));
  return x86::movemask(mask);
}

__attribute__((target("avx2,fma"))) void stores(const float* from, float* unaligned, float* aligned, float* streamed,
                                                float* six) {
  const x86::f32x8 value = x86::load8(from);
  x86::store8(unaligned, value);
  x86::store8_aligned(aligned, x86::load8_aligned(aligned) + value);
  x86::stream8(streamed, x86::broadcast8(from[3]));
  x86::store4(six, value);
  x86::store_lanes_4_5(six + 4, value);
  __builtin_ia32_sfence();
}

__attribute__((target("avx2"))) void bytes(const unsigned char* from, std::int32_t (&widened)[4][8],
                                           unsigned char (&joined)[32], unsigned char (&spread)[32],
                                           std::uint32_t (&halfwords)[8]) {
  const x86::u8x32 all = x86::load_bytes32(from);
  const x86::u8x16 low = x86::half_of<0>(all), high = x86::half_of<1>(all);
  const x86::i32x8 parts[4] = {x86::widen_bytes<true, 0>(low), x86::widen_bytes<true, 1>(low),
                               x86::widen_bytes<false, 0>(high), x86::widen_bytes<false, 1>(high)};
  std::memcpy(widened, parts, sizeof(parts));
  const x86::u8x32 swapped = x86::join(high, low);
  std::memcpy(joined, &swapped, 32);
  std::uint32_t word;
  std::memcpy(&word, from, 4);
  const x86::u8x32 words = x86::bits_as<x86::u8x32>(x86::u32x8{} + word);
  const x86::u8x32 permuted = x86::spread_word_bytes(words);
  std::memcpy(spread, &permuted, 32);
  x86::u16x8 sixteen;
  std::memcpy(&sixteen, from + 8, 16);
  const x86::u32x8 wide = x86::widen_u16(sixteen);
  std::memcpy(halfwords, &wide, 32);
}

__attribute__((target("avx2,f16c"))) void halves(const std::uint16_t* bits, float* eight, float& one) {
  unsigned char raw[16];
  std::memcpy(raw, bits, 16);
  x86::store8(eight, x86::widen_halves8(raw));
  one = x86::widen_half(bits[7]);
}

__attribute__((target("avx512f"))) unsigned avx512(const float* a, const float* b, const float* c, float* fused) {
  const x86::f32x16 x = x86::load16(a), y = x86::load16(b), z = x86::load16(c);
  x86::store16(fused, x86::fma(x, y, z) + x86::broadcast16(0.0f));
  return x86::nan_lanes(x);
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Leaves the test case with a warning when the CPU lacks the helpers' instructions.
#define SIMD_X86_REQUIRE(has, what)                                 \
  if (!(has)) {                                                     \
    WARN("this CPU has no " what ": the helpers cannot run here"); \
    return;                                                         \
  }

__attribute__((target("avx2,fma"))) void integer_products(const unsigned char* u, const unsigned char* s,
                                                          const std::int16_t* words, std::int16_t* bytes_out,
                                                          std::int32_t* pairs_out, unsigned char* signed_out,
                                                          float* floats_out) {
  const x86::u8x32 a = x86::load_bytes32(u), b = x86::load_bytes32(s);
  const x86::i16x16 products = x86::multiply_add_bytes(a, b);
  std::memcpy(bytes_out, &products, 32);
  x86::i16x16 w;
  std::memcpy(&w, words, 32);
  const x86::i32x8 pairs = x86::multiply_add_pairs(w, x86::broadcast16_i16(-3) + w);
  std::memcpy(pairs_out, &pairs, 32);
  const x86::u8x32 signs = x86::sign_bytes(a, b);
  std::memcpy(signed_out, &signs, 32);
  x86::store8(floats_out, x86::int_to_float8(pairs));
}

__attribute__((target("avx2,fma"))) void integer_products4(const std::int16_t* words, const unsigned char* bytes,
                                                           std::int32_t* pairs_out, float* floats_out,
                                                           float* fused_out, std::int16_t* widened_out) {
  x86::i16x8 a, b;
  std::memcpy(&a, words, 16);
  std::memcpy(&b, words + 8, 16);
  const x86::i32x4 pairs = x86::multiply_add_pairs(a, b);
  std::memcpy(pairs_out, &pairs, 16);
  const x86::f32x4 floats = x86::int_to_float4(pairs);
  std::memcpy(floats_out, &floats, 16);
  const x86::f32x4 third{1.0f / 3, 1.0f / 3, 1.0f / 3, 1.0f / 3};
  const x86::f32x4 fused = x86::fma(floats, third, third);
  std::memcpy(fused_out, &fused, 16);
  const x86::i16x16 widened = x86::widen_signed_bytes16(x86::load_bytes16(bytes));
  std::memcpy(widened_out, &widened, 32);
}

}  // namespace simd_x86_test

TEST_CASE("simd_x86 lane permutations are vunpcklps, vunpckhps, vshufps 0x44 / 0xEE and vperm2f128 0x20 / 0x31",
          "[kernels][simd]") {
  using namespace simd_x86_test;
  SIMD_X86_REQUIRE(cpu_has_avx2_fma(), "AVX2 + FMA");
  float a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = static_cast<float>(i), b[i] = static_cast<float>(8 + i);  // lane i of a is i
  Lanes8 out[6];
  permutations(a, b, out);
  // Intel: unpcklps interleaves the low two lanes of each 128-bit half; shufps imm picks two lanes of a, two of b per
  // half; vperm2f128 0x20 = (a.low, b.low), 0x31 = (a.high, b.high)
  const int expected[6][8] = {{0, 8, 1, 9, 4, 12, 5, 13},   {2, 10, 3, 11, 6, 14, 7, 15}, {0, 1, 8, 9, 4, 5, 12, 13},
                              {2, 3, 10, 11, 6, 7, 14, 15}, {0, 1, 2, 3, 8, 9, 10, 11},   {4, 5, 6, 7, 12, 13, 14, 15}};
  for (int k = 0; k < 6; ++k)
    for (int i = 0; i < 8; ++i) {
      INFO("permutation " << k << ", lane " << i);
      CHECK(out[k].v[i] == static_cast<float>(expected[k][i]));
    }
}

TEST_CASE("simd_x86 lanewise_max is maxps (the second operand for NaN and equal zeros), fma rounds once, the lane "
          "reductions keep their documented order",
          "[kernels][simd]") {
  using namespace simd_x86_test;
  SIMD_X86_REQUIRE(cpu_has_avx2_fma(), "AVX2 + FMA");
  const float nan = std::numeric_limits<float>::quiet_NaN(), eps = std::numeric_limits<float>::epsilon();
  const float a[8] = {nan, 1.0f, 0.0f, -0.0f, 1.0f + eps, 3.0f, -2.0f, 1e30f};
  const float b[8] = {1.0f, nan, -0.0f, 0.0f, 1.0f - eps, -3.0f, 5.0f, 1e30f};
  const float c[8] = {0, 0, 0, 0, -1.0f, 1.0f, 1.0f, 0};
  float maximum[8], fused[8], sum = 0, largest = 0;
  max_fma_lanes(a, b, c, maximum, fused, sum, largest);
  CHECK(maximum[0] == 1.0f);        // maxps(NaN, 1) = 1: the second operand
  CHECK(std::isnan(maximum[1]));    // maxps(1, NaN) = NaN
  CHECK(same_bits(maximum[2], -0.0f));  // maxps(+0, −0) = −0
  CHECK(same_bits(maximum[3], 0.0f));   // maxps(−0, +0) = +0
  for (int i = 4; i < 8; ++i) CHECK(maximum[i] == (a[i] > b[i] ? a[i] : b[i]));
  // (1 + ε)(1 − ε) − 1 = −ε² exactly with one rounding (0 with two)
  CHECK(fused[4] == -eps * eps);
  CHECK(fused[5] == std::fma(a[5], b[5], c[5]));
  CHECK(fused[6] == std::fma(a[6], b[6], c[6]));

  attnscope::Random random(61);
  for (int trial = 0; trial < 200; ++trial) {
    float x[8], zero[8] = {};
    for (float& value : x) value = static_cast<float>(random.normal() * std::pow(10.0, random.below(12)));
    max_fma_lanes(x, zero, zero, maximum, fused, sum, largest);
    const float half[4] = {x[0] + x[4], x[1] + x[5], x[2] + x[6], x[3] + x[7]};
    CHECK(same_bits(sum, (half[0] + half[2]) + (half[1] + half[3])));  // the order of Eigen's predux on 8 floats
    float expected = x[0];
    for (const float value : x) expected = std::max(expected, value);
    CHECK(largest == expected);
  }
}

TEST_CASE("simd_x86 movemask takes the sign bit of each lane, and the stores write exactly their lanes",
          "[kernels][simd]") {
  using namespace simd_x86_test;
  SIMD_X86_REQUIRE(cpu_has_avx2_fma(), "AVX2 + FMA");
  const std::int32_t lanes[8] = {0, -1, 5, std::numeric_limits<std::int32_t>::min(), 1, 0, -7, 0x7fffffff};
  CHECK(movemask_of(lanes) == 0b01001010);

  alignas(32) float aligned[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  alignas(32) float streamed[8] = {};
  float from[9], unaligned[10] = {}, six[8] = {};
  for (int i = 0; i < 9; ++i) from[i] = 0.5f * static_cast<float>(i + 1);
  stores(from + 1, unaligned + 1, aligned, streamed, six + 1);  // unaligned addresses for the unaligned helpers
  CHECK(unaligned[0] == 0.0f);
  CHECK(unaligned[9] == 0.0f);
  for (int i = 0; i < 8; ++i) {
    CHECK(unaligned[i + 1] == from[i + 1]);
    CHECK(aligned[i] == 1.0f + from[i + 1]);
    CHECK(streamed[i] == from[4]);
  }
  CHECK(six[0] == 0.0f);
  CHECK(six[7] == 0.0f);
  for (int i = 0; i < 6; ++i) CHECK(six[i + 1] == from[i + 1]);
}

TEST_CASE("simd_x86 byte helpers: halves, joins, sign and zero extension, the word spread and 16-bit widening",
          "[kernels][simd]") {
  using namespace simd_x86_test;
  SIMD_X86_REQUIRE(cpu_has_avx2_fma(), "AVX2");
  attnscope::Random random(62);
  for (int trial = 0; trial < 50; ++trial) {
    unsigned char from[32];
    for (unsigned char& value : from) value = static_cast<unsigned char>(random.below(256));
    from[0] = 0x80, from[1] = 0xff, from[2] = 0x7f;  // the sign-extension edges
    std::int32_t widened[4][8];
    unsigned char joined[32], spread[32];
    std::uint32_t halfwords[8];
    bytes(from, widened, joined, spread, halfwords);
    for (int i = 0; i < 8; ++i) {
      CHECK(widened[0][i] == static_cast<std::int32_t>(static_cast<signed char>(from[i])));  // vpmovsxbd
      CHECK(widened[1][i] == static_cast<std::int32_t>(static_cast<signed char>(from[8 + i])));
      CHECK(widened[2][i] == static_cast<std::int32_t>(from[16 + i]));  // vpmovzxbd
      CHECK(widened[3][i] == static_cast<std::int32_t>(from[24 + i]));
      std::uint16_t halfword;
      std::memcpy(&halfword, from + 8 + 2 * i, 2);
      CHECK(halfwords[i] == halfword);  // vpmovzxwd
    }
    for (int i = 0; i < 16; ++i) {
      CHECK(joined[i] == from[16 + i]);
      CHECK(joined[16 + i] == from[i]);
    }
    for (int i = 0; i < 32; ++i) CHECK(spread[i] == from[i / 8]);
  }
}

TEST_CASE("simd_x86 half-precision widening is exact, subnormals and infinities included", "[kernels][simd]") {
  using namespace simd_x86_test;
  SIMD_X86_REQUIRE(cpu_has_avx2_f16c(), "AVX2 + F16C");
  attnscope::Random random(63);
  for (int trial = 0; trial < 100; ++trial) {
    std::uint16_t bits[8] = {0x3c00, 0xc000, 0x7c00, 0x0001, 0x8000, 0x7bff, 0, 0};  // 1, −2, inf, 2⁻²⁴, −0, 65504
    bits[6] = static_cast<std::uint16_t>(random.below(0x7c00));  // finite, either sign
    bits[7] = static_cast<std::uint16_t>(random.below(0x7c00) | (trial % 2 ? 0x8000 : 0));
    float eight[8], one = 0;
    halves(bits, eight, one);
    for (int i = 0; i < 8; ++i) {
      INFO("binary16 bits " << bits[i]);
      CHECK(same_bits(eight[i], static_cast<float>(Eigen::half(Eigen::half_impl::raw_uint16_to_half(bits[i])))));
    }
    CHECK(same_bits(one, eight[7]));
  }
}

TEST_CASE("simd_x86 integer helpers: vpmaddubsw saturates, vpmaddwd, vpsignb, vcvtdq2ps, vpmovsxbw, 128-bit fma", "[kernels][simd]") {
  using namespace simd_x86_test;
  SIMD_X86_REQUIRE(cpu_has_avx2_fma(), "AVX2");
  attnscope::Random random(64);
  for (int trial = 0; trial < 100; ++trial) {
    unsigned char u[32], s[32];
    std::int16_t words[16];
    for (int i = 0; i < 32; ++i) {
      u[i] = static_cast<unsigned char>(random.below(256));
      s[i] = static_cast<unsigned char>(random.below(256));
    }
    for (auto& word : words) word = static_cast<std::int16_t>(static_cast<int>(random.below(65536)) - 32768);
    u[0] = u[1] = 255, s[0] = s[1] = 0x7f;  // 2 · 255 · 127 saturates to 32767
    u[2] = u[3] = 255, s[2] = s[3] = 0x80;  // 2 · 255 · (−128) saturates to −32768
    s[4] = 0x80, s[5] = 0, s[6] = 0x7f;     // vpsignb: −128, zero and positive signs
    std::int16_t products[16];
    std::int32_t pairs[8];
    unsigned char signs[32];
    float floats[8];
    integer_products(u, s, words, products, pairs, signs, floats);
    for (int m = 0; m < 16; ++m) {
      const int exact = u[2 * m] * static_cast<signed char>(s[2 * m]) + u[2 * m + 1] * static_cast<signed char>(s[2 * m + 1]);
      CHECK(products[m] == std::min(32767, std::max(-32768, exact)));
    }
    for (int l = 0; l < 8; ++l) {
      const std::int64_t exact = std::int64_t(words[2 * l]) * std::int16_t(words[2 * l] - 3) +
                                 std::int64_t(words[2 * l + 1]) * std::int16_t(words[2 * l + 1] - 3);
      CHECK(pairs[l] == static_cast<std::int32_t>(static_cast<std::uint32_t>(exact)));  // wraps only at (−2¹⁵)²·2
      CHECK(floats[l] == static_cast<float>(pairs[l]));
    }
    std::int32_t pairs4[4];
    float floats4[4], fused4[4];
    std::int16_t widened[16];
    integer_products4(words, s, pairs4, floats4, fused4, widened);
    for (int l = 0; l < 4; ++l) {
      const std::int64_t exact = std::int64_t(words[2 * l]) * words[8 + 2 * l] +
                                 std::int64_t(words[2 * l + 1]) * words[8 + 2 * l + 1];
      CHECK(pairs4[l] == static_cast<std::int32_t>(static_cast<std::uint32_t>(exact)));  // vpmaddwd, 128 bits
      CHECK(floats4[l] == static_cast<float>(pairs4[l]));
      CHECK(same_bits(fused4[l], std::fma(floats4[l], 1.0f / 3, 1.0f / 3)));
    }
    for (int i = 0; i < 16; ++i) CHECK(widened[i] == static_cast<signed char>(s[i]));  // vpmovsxbw
    for (int i = 0; i < 32; ++i) {
      const int sign = static_cast<signed char>(s[i]), value = static_cast<signed char>(u[i]);
      const int expected = sign < 0 ? -value : sign == 0 ? 0 : value;
      CHECK(signs[i] == static_cast<unsigned char>(expected));  // −(−128) wraps to −128
    }
  }
}

TEST_CASE("simd_x86 AVX-512 helpers: sixteen-lane fma and the NaN lane mask", "[kernels][simd]") {
  using namespace simd_x86_test;
  SIMD_X86_REQUIRE(cpu_has_avx512f(), "AVX-512F");
  const float nan = std::numeric_limits<float>::quiet_NaN(), eps = std::numeric_limits<float>::epsilon();
  float a[16], b[16], c[16], fused[16];
  for (int i = 0; i < 16; ++i) a[i] = 1.0f + eps, b[i] = 1.0f - eps, c[i] = -1.0f;
  a[3] = nan, a[12] = nan;
  const unsigned mask = avx512(a, b, c, fused);
  CHECK(mask == ((1u << 3) | (1u << 12)));
  for (int i = 0; i < 16; ++i) {
    INFO("lane " << i);
    if (i == 3 || i == 12) CHECK(std::isnan(fused[i]));
    else CHECK(fused[i] == -eps * eps);  // one rounding
  }
}
#undef SIMD_X86_REQUIRE
#endif
