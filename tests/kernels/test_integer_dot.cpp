// The integer-dot product of kernels/integer_dot.hpp and the activation rounding of kernels/quantize_activations.hpp:
// the AVX2 micro-kernels give the bits of the scalar reference on thousands of random weight blocks (every byte random,
// the fp16 scales finite) and random activations, for every tile edge (rows and columns not multiples of the tile),
// any thread split and y += x·Wᵀ; the reference equals, to float32 accumulation error, the float64 product of the
// dequantized weights (kernels/dequantize.hpp) with the dequantized activations d·q (an identity: the integer form of
// ggml's vec_dot functions is that product, regrouped); the rounding of the activations follows ggml's rules on
// hand-made ties; errors name the problem. The rounding of the activations and the products against an independent
// numpy implementation are in tests/model/test_matmul_modes.cpp.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels/integer_dot.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

using attnscope::Index;
using attnscope::kernels::ActivationFormat;
using attnscope::kernels::IntegerDotKernel;
using attnscope::kernels::QuantizedActivations;
using attnscope::kernels::StoredFloat;
using attnscope::kernels::StoredWeights;

const StoredFloat integer_dot_formats[] = {StoredFloat::q8_0, StoredFloat::q4_0, StoredFloat::q5_0,
                                           StoredFloat::q4_1, StoredFloat::q5_1, StoredFloat::iq4_nl,
                                           StoredFloat::mxfp4,
                                           StoredFloat::q2_k, StoredFloat::q3_k, StoredFloat::q4_k,
                                           StoredFloat::q5_k, StoredFloat::q6_k, StoredFloat::iq4_xs};

/// The byte offsets of a block's fp16 scale fields.
std::vector<int> integer_dot_scale_offsets(StoredFloat format) {
  switch (format) {
    case StoredFloat::q8_0: case StoredFloat::q4_0: case StoredFloat::q5_0: case StoredFloat::iq4_nl:
    case StoredFloat::iq4_xs: return {0};
    case StoredFloat::q4_k: case StoredFloat::q5_k: case StoredFloat::q4_1: case StoredFloat::q5_1: return {0, 2};
    case StoredFloat::q2_k: return {80, 82};
    case StoredFloat::q3_k: return {108};
    case StoredFloat::q6_k: return {208};
    default: return {};
  }
}

/// rows × cols weights of `format`: random bytes, the fp16 scales random finite values of about `scale` (MXFP4's E8M0
/// byte 2^-10 … 2^-3).
std::vector<unsigned char> integer_dot_random_weights(attnscope::Random& random, StoredFloat format, Index rows,
                                                      Index cols, double scale) {
  const Index blocks = rows * cols / attnscope::kernels::stored_block_elements(format);
  const std::size_t block_bytes = attnscope::kernels::stored_block_bytes(format);
  std::vector<unsigned char> bytes(std::size_t(blocks) * block_bytes);
  for (auto& b : bytes) b = static_cast<unsigned char>(random.below(256));
  for (Index b = 0; b < blocks; ++b) {
    for (int at : integer_dot_scale_offsets(format)) {
      const Eigen::half h(static_cast<float>(random.normal() * scale));
      std::memcpy(bytes.data() + std::size_t(b) * block_bytes + at, &h, 2);
    }
    if (format == StoredFloat::mxfp4)  // the E8M0 scale byte: 2^(e − 128) of about `scale`
      bytes[std::size_t(b) * block_bytes] = static_cast<unsigned char>(118 + random.below(8));
  }
  return bytes;
}

/// rows × cols activations: normal values of per-row scales, some zero blocks, some exact ties.
std::vector<float> integer_dot_random_activations(attnscope::Random& random, Index rows, Index cols) {
  std::vector<float> x(std::size_t(rows * cols));
  for (Index r = 0; r < rows; ++r) {
    const double scale = std::pow(10.0, random.uniform(-3, 2));
    for (Index c = 0; c < cols; ++c) x[std::size_t(r * cols + c)] = static_cast<float>(random.normal() * scale);
    if (r % 5 == 3) std::fill(x.begin() + r * cols, x.begin() + r * cols + std::min<Index>(cols, 256), 0.0f);
  }
  return x;
}

StoredWeights integer_dot_weights(const std::vector<unsigned char>& bytes, StoredFloat format, Index rows, Index cols) {
  return StoredWeights{bytes.data(), format, rows, cols, attnscope::kernels::stored_bytes(format, cols), false};
}

/// Bits of y (m × n) by the given kernel.
std::vector<float> integer_dot_product(const QuantizedActivations& x, const StoredWeights& w, IntegerDotKernel kernel,
                                       Index parts, bool& finite) {
  std::vector<float> y(std::size_t(x.rows * w.rows), -1.0f);
  finite = attnscope::kernels::integer_dot_xwt<false>(x, w, y.data(), w.rows, {kernel, parts});
  return y;
}

bool integer_dot_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("integer_dot: the AVX2 micro-kernels give the scalar reference's bits on random blocks",
          "[kernels][integer_dot]") {
  if (!attnscope::kernels::integer_dot_avx2_available()) {
    SUCCEED("no AVX2 kernel in this build or on this CPU: the reference runs");
    return;
  }
  attnscope::Random random(2024);
  for (StoredFloat format : integer_dot_formats) {
    INFO(attnscope::kernels::stored_float_name(format));
    const ActivationFormat activation_format = attnscope::kernels::integer_dot_activation_format(format);
    // formats of 32-element blocks get one block more: an odd count (IQ4_NL pairs its blocks, the last one alone)
    const Index extra = attnscope::kernels::stored_block_elements(format) == 32 ? 32 : 0;
    for (const auto& [m, n, depth] : {std::tuple<Index, Index, Index>{1, 1, 256}, {4, 2, 512}, {7, 5, 768},
                                      {13, 9, 1024}, {70, 11, 256}, {3, 33, 2048}}) {
      const Index k = depth + extra;
      INFO(m << " x " << n << " x " << k);
      const auto bytes = integer_dot_random_weights(random, format, n, k, 0.05);
      const auto activations = integer_dot_random_activations(random, m, k);
      QuantizedActivations x;
      attnscope::kernels::quantize_activations(activations.data(), m, k, k, activation_format, x);
      const StoredWeights w = integer_dot_weights(bytes, format, n, k);
      bool finite_reference = false, finite_avx2 = false, finite_split = false;
      const auto reference = integer_dot_product(x, w, IntegerDotKernel::reference, 1, finite_reference);
      const auto avx2 = integer_dot_product(x, w, IntegerDotKernel::avx2, 1, finite_avx2);
      const auto split = integer_dot_product(x, w, IntegerDotKernel::avx2, 3, finite_split);
      CHECK(integer_dot_same_bits(reference, avx2));
      CHECK(integer_dot_same_bits(reference, split));
      CHECK(finite_reference == finite_avx2);
      // y += x·Wᵀ adds the rounded product to y
      std::vector<float> y(reference.size(), 0.25f);
      attnscope::kernels::integer_dot_xwt<true>(x, w, y.data(), n, {IntegerDotKernel::avx2, 2});
      bool added = true;
      for (std::size_t i = 0; i < y.size(); ++i) added = added && y[i] == 0.25f + reference[i];
      CHECK(added);
    }
  }
}

TEST_CASE("integer_dot: the reference is the float64 product of the dequantized weights and activations",
          "[kernels][integer_dot]") {
  attnscope::Random random(77);
  for (StoredFloat format : integer_dot_formats) {
    INFO(attnscope::kernels::stored_float_name(format));
    const Index m = 5, n = 6, k = attnscope::kernels::stored_block_elements(format) == 32 ? 544 : 512;
    const auto bytes = integer_dot_random_weights(random, format, n, k, 0.05);
    const auto activations = integer_dot_random_activations(random, m, k);
    QuantizedActivations x;
    attnscope::kernels::quantize_activations(activations.data(), m, k, k,
                                             attnscope::kernels::integer_dot_activation_format(format), x);
    const Index block = attnscope::kernels::activation_block_elements(x.format);
    std::vector<float> weights(std::size_t(n * k));
    attnscope::kernels::widen_reference(bytes.data(), format, n * k, weights.data());
    bool finite = false;
    const auto y = integer_dot_product(x, integer_dot_weights(bytes, format, n, k), IntegerDotKernel::reference, 1,
                                       finite);
    CHECK(finite);
    double worst = 0;
    for (Index i = 0; i < m; ++i)
      for (Index j = 0; j < n; ++j) {
        // [derived] Σ_e w_e · (d_a q_e) in float64; the weights' dequantized float32 values are within a float32
        // rounding of their exact values, as the per-block products of the integer form are
        double exact = 0, magnitude = 0;
        for (Index e = 0; e < k; ++e) {
          const double a = double(x.row_scales(i)[e / block]) * x.row_quants(i)[e];
          exact += double(weights[std::size_t(j * k + e)]) * a;
          magnitude += std::fabs(double(weights[std::size_t(j * k + e)]) * a);
        }
        // q8_1 (Q4_1, Q5_1): the min term m·Σ(d_a q) uses the block's rounded sum s in place of d_a·Σq
        if (x.format == ActivationFormat::q8_1)
          for (Index b = 0; b < k / 32; ++b) {
            const unsigned char* weight_block =
                bytes.data() + std::size_t(j * (k / 32) + b) * attnscope::kernels::stored_block_bytes(format);
            double quant_sum = 0;
            for (Index e = 0; e < 32; ++e) quant_sum += x.row_quants(i)[32 * b + e];
            const double m_w = attnscope::kernels::detail::half_to_float(weight_block + 2);
            exact += m_w * (double(x.row_block_sums(i)[b]) - double(x.row_scales(i)[b]) * quant_sum);
          }
        worst = std::max(worst, std::fabs(double(y[std::size_t(i * n + j)]) - exact) / (magnitude + 1e-30));
      }
    CHECK(worst < 2e-6);
  }
}

TEST_CASE("quantize_activations rounds as ggml's CPU backend: ties to even, scales, sums and zero blocks",
          "[kernels][integer_dot]") {
  SECTION("q8_0: d = binary16(amax / 127), q = round-half-even(x · 127 / amax)") {
    std::vector<float> x(64, 0.0f);
    x[0] = 127.0f;  // id = 1: the halves below are exact ties
    x[1] = 2.5f;
    x[2] = 3.5f;
    x[3] = -2.5f;
    x[4] = -0.5f;
    x[5] = 0.49f;
    QuantizedActivations q;
    attnscope::kernels::quantize_activations(x.data(), 1, 64, 64, ActivationFormat::q8_0, q);
    CHECK(q.row_scales(0)[0] == 1.0f);
    CHECK(q.row_scales(0)[1] == 0.0f);  // the all-zero second block
    CHECK(std::vector<int>(q.quants.begin(), q.quants.begin() + 6) == std::vector<int>{127, 2, 4, -2, 0, 0});
    for (Index i = 32; i < 64; ++i) CHECK(q.quants[std::size_t(i)] == 0);
    // the scale is the binary16 of amax / 127: 0.1 / 127 is not a binary16
    std::vector<float> y(32, 0.0f);
    y[7] = -0.1f;
    attnscope::kernels::quantize_activations(y.data(), 1, 32, 32, ActivationFormat::q8_0, q);
    CHECK(q.row_scales(0)[0] == static_cast<float>(Eigen::half(0.1f / 127.0f)));
    CHECK(q.row_scales(0)[0] != 0.1f / 127.0f);
    CHECK(q.quants[7] == -127);
  }
  SECTION("q8_K: iscale = −127 / (the largest-magnitude element), d = 1 / iscale, sums of 16") {
    std::vector<float> x(256, 0.0f);
    x[10] = -127.0f;  // iscale = 1
    x[11] = 127.0f;   // the same magnitude later: the first one sets the sign
    x[12] = 2.5f;
    x[13] = -3.5f;
    x[20] = 1.5f;
    QuantizedActivations q;
    attnscope::kernels::quantize_activations(x.data(), 1, 256, 256, ActivationFormat::q8_k, q);
    CHECK(q.row_scales(0)[0] == 1.0f);
    CHECK(q.quants[10] == -127);
    CHECK(q.quants[11] == 127);
    CHECK(q.quants[12] == 2);
    CHECK(q.quants[13] == -4);
    CHECK(q.quants[20] == 2);
    CHECK(q.row_sums(0)[0] == -127 + 127 + 2 - 4);
    CHECK(q.row_sums(0)[1] == 2);
    x[10] = 127.0f;  // a positive largest element flips the signs: iscale = −1, d = −1
    attnscope::kernels::quantize_activations(x.data(), 1, 256, 256, ActivationFormat::q8_k, q);
    CHECK(q.row_scales(0)[0] == -1.0f);
    CHECK(q.quants[10] == -127);
    CHECK(q.quants[12] == -2);
    CHECK(q.quants[13] == 4);
  }
}

TEST_CASE("integer_dot and quantize_activations errors name the problem", "[kernels][integer_dot]") {
  using attnscope::testing::error_message;
  using Catch::Matchers::Contains;
  std::vector<float> x(256, 1.0f);
  QuantizedActivations q;
  CHECK_THAT(error_message([&] {
               attnscope::kernels::quantize_activations(x.data(), 1, 48, 48, ActivationFormat::q8_0, q);
             }),
             Contains("quantize_activations") && Contains("48") && Contains("q8_0"));
  x[77] = std::nanf("");
  CHECK_THAT(error_message([&] {
               attnscope::kernels::quantize_activations(x.data(), 1, 256, 256, ActivationFormat::q8_k, q);
             }),
             Contains("quantize_activations") && Contains("(0, 77)") && Contains("not finite"));
  x[77] = 1.0f;
  attnscope::kernels::quantize_activations(x.data(), 1, 256, 256, ActivationFormat::q8_0, q);
  attnscope::Random random(5);
  const auto bytes = integer_dot_random_weights(random, StoredFloat::q4_k, 2, 256, 0.1);
  std::vector<float> y(2);
  CHECK_THAT(error_message([&] {
               attnscope::kernels::integer_dot_xwt<false>(q, integer_dot_weights(bytes, StoredFloat::q4_k, 2, 256),
                                                          y.data(), 2);
             }),
             Contains("integer_dot_xwt") && Contains("Q4_K") && Contains("q8_K") && Contains("q8_0"));
  CHECK_THAT(error_message([&] {
               attnscope::kernels::integer_dot_xwt<false>(q, integer_dot_weights(bytes, StoredFloat::q3_k, 2, 256),
                                                          y.data(), 2);
             }),
             Contains("integer_dot_xwt") && Contains("Q3_K") && Contains("q8_K") && Contains("q8_0"));
  CHECK_THAT(error_message([&] {
               attnscope::kernels::integer_dot_xwt<false>(q, integer_dot_weights(bytes, StoredFloat::q8_k, 2, 256),
                                                          y.data(), 2);
             }),
             Contains("integer_dot_xwt") && Contains("no integer dot product") && Contains("Q8_K"));
}
