// The AVX2 + F16C paths of the block dequantization and of the float16 / bfloat16 widening (kernels/dequantize.hpp,
// kernels/widen.hpp, kernels/detail/dequantize_avx2.hpp) give the bits of their scalar references: on thousands of
// blocks of random bytes (every field random, the fp16 scales included, so NaN, infinities and subnormals occur), at
// unaligned input and output addresses, for every block count from 0 to 9 and every 16-bit run length from 0 to 40
// (the tails), writing nothing past the end. The references themselves are checked bit for bit against the numpy
// implementation of ggml's definitions in tests/io/test_gguf.cpp. In builds without the AVX2 path (the portable
// test build) the dispatched functions are the references and the comparisons hold trivially.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnscope/kernels/widen.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
using attnscope::kernels::StoredFloat;

/// Equal bits, or both NaN (a NaN's payload may come from either operand of a product).
bool dequantize_same_value(float a, float b) {
  std::uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y || (std::isnan(a) && std::isnan(b));
}

/// Counts the elements where widen and widen_reference disagree on `count` elements of `format` at bytes + offset,
/// written to outputs at an offset of `out_offset` floats; also checks that the guard floats after them are intact.
int dequantize_mismatches(const std::vector<unsigned char>& bytes, std::size_t offset, StoredFloat format, Index count,
                          std::size_t out_offset, bool& guard_intact) {
  const float guard = -12345.0f;
  std::vector<float> fast(out_offset + count + 9, guard), reference(out_offset + count + 9, guard);
  attnscope::kernels::widen(bytes.data() + offset, format, count, fast.data() + out_offset);
  attnscope::kernels::widen_reference(bytes.data() + offset, format, count, reference.data() + out_offset);
  guard_intact = true;
  for (std::size_t i = 0; i < fast.size(); ++i)
    if ((i < out_offset || i >= out_offset + count) && (fast[i] != guard || reference[i] != guard))
      guard_intact = false;
  int mismatches = 0;
  for (Index i = 0; i < count; ++i)
    mismatches += !dequantize_same_value(fast[out_offset + i], reference[out_offset + i]);
  return mismatches;
}

/// Every stored format of the table (kernels/ggml_types.hpp).
std::vector<StoredFloat> dequantize_all_formats() {
  std::vector<StoredFloat> formats;
  for (const auto& row : attnscope::kernels::stored_formats) formats.push_back(row.format);
  return formats;
}

}  // namespace

TEST_CASE("dequantize_dispatch_target names the instruction set the dequantizers run", "[kernels][dequantize]") {
  const std::string target = attnscope::kernels::dequantize_dispatch_target();
#if defined(ATTNSCOPE_DEQUANTIZE_AVX2)
  CHECK(target == (attnscope::kernels::detail::avx2_dequantize::available() ? "avx2+f16c" : "none"));
#else
  CHECK(target == "none");
#endif
}

TEST_CASE("widen gives the bits of widen_reference on random blocks of every format, at any alignment",
          "[kernels][dequantize]") {
  std::mt19937_64 random(27);
  std::uniform_int_distribution<int> byte(0, 255);
  for (StoredFloat format : dequantize_all_formats()) {
    INFO(attnscope::kernels::stored_float_name(format) << " on " << attnscope::kernels::dequantize_dispatch_target());
    const Index block = attnscope::kernels::stored_block_elements(format);
    // Many blocks in one run: 4096 elements for the 32-element formats, 16 × 256 for the others.
    const Index count = 4096 / block * block;
    std::vector<unsigned char> bytes(attnscope::kernels::stored_bytes(format, count) + 8);
    for (int trial = 0; trial < 8; ++trial) {
      for (unsigned char& b : bytes) b = static_cast<unsigned char>(byte(random));
      bool guard_intact = false;
      CHECK(dequantize_mismatches(bytes, trial % 4, format, count, trial % 3, guard_intact) == 0);
      CHECK(guard_intact);
    }
  }
}

TEST_CASE("widen gives the bits of widen_reference for every short run: block counts 0 to 9, 16-bit runs 0 to 40",
          "[kernels][dequantize]") {
  std::mt19937_64 random(2701);
  std::uniform_int_distribution<int> byte(0, 255);
  for (StoredFloat format : dequantize_all_formats()) {
    INFO(attnscope::kernels::stored_float_name(format));
    const bool blocks = attnscope::kernels::is_block_format(format);
    const Index block = attnscope::kernels::stored_block_elements(format);
    for (Index n = 0; n <= (blocks ? 9 : 40); ++n) {
      INFO("run of " << n << (blocks ? " blocks" : " elements"));
      const Index count = n * block;
      std::vector<unsigned char> bytes(attnscope::kernels::stored_bytes(format, count) + 4);
      for (unsigned char& b : bytes) b = static_cast<unsigned char>(byte(random));
      bool guard_intact = false;
      CHECK(dequantize_mismatches(bytes, static_cast<std::size_t>(n % 4), format, count, n % 5, guard_intact) == 0);
      CHECK(guard_intact);
    }
  }
}

TEST_CASE("the dequantizers give the values of ggml's formulas on hand-made blocks", "[kernels][dequantize]") {
  namespace k = attnscope::kernels;
  const auto put_half = [](unsigned char* at, float value) {
    const Eigen::half h(value);
    std::memcpy(at, &h, 2);
  };
  SECTION("Q8_0: d = 0.5, q = i − 16") {
    unsigned char b[34];
    put_half(b, 0.5f);
    for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<unsigned char>(static_cast<std::int8_t>(i - 16));
    float y[32];
    k::dequantize_q8_0(b, 1, y);
    for (int i = 0; i < 32; ++i) CHECK(y[i] == 0.5f * static_cast<float>(i - 16));
  }
  SECTION("Q4_0: d = 2, qs[i] = i | (15 − i) << 4") {
    unsigned char b[18];
    put_half(b, 2.0f);
    for (int i = 0; i < 16; ++i) b[2 + i] = static_cast<unsigned char>(i | ((15 - i) << 4));
    float y[32];
    k::dequantize_q4_0(b, 1, y);
    for (int i = 0; i < 16; ++i) {
      CHECK(y[i] == 2.0f * static_cast<float>(i - 8));
      CHECK(y[i + 16] == 2.0f * static_cast<float>(7 - i));
    }
  }
  SECTION("Q4_K: sub-block j has scale j + 1 and min 2j (d = 1, dmin = 0.5), q = l mod 16") {
    unsigned char b[144] = {};
    put_half(b, 1.0f);
    put_half(b + 2, 0.5f);
    for (int j = 0; j < 8; ++j) {  // the packing of detail::k_scale_min, inverted
      const int sc = j + 1, m = 2 * j;
      if (j < 4) {
        b[4 + j] |= static_cast<unsigned char>(sc);
        b[4 + j + 4] |= static_cast<unsigned char>(m);
      } else {
        b[4 + j + 4] |= static_cast<unsigned char>((sc & 15) | ((m & 15) << 4));
        b[4 + j - 4] |= static_cast<unsigned char>((sc >> 4) << 6);
        b[4 + j] |= static_cast<unsigned char>((m >> 4) << 6);
      }
    }
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) b[16 + 32 * c + l] = static_cast<unsigned char>((l % 16) | ((15 - l % 16) << 4));
    float y[256];
    k::dequantize_q4_k(b, 1, y);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        CHECK(y[64 * c + l] == static_cast<float>((2 * c + 1) * (l % 16)) - 0.5f * static_cast<float>(4 * c));
        CHECK(y[64 * c + 32 + l] ==
              static_cast<float>((2 * c + 2) * (15 - l % 16)) - 0.5f * static_cast<float>(2 * (2 * c + 1)));
      }
  }
}
