// The run-time dispatched AVX2 + FMA exponential loops (kernels/runtime_dispatch.hpp): compiled in only
// when the test is built without AVX2 (the target test_kernels_generic), and run only on a CPU with AVX2 and FMA.
// They must meet the same contract as the packet kernels: ≤ 2 ULP against a long-double exp, flush to 0 below the
// smallest normal, the streaming and plain stores giving the same bits, and the dispatched row kernels equal to
// their scalar references within the same tolerances as every other build.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels.hpp"
#include "support/catch.hpp"


TEST_CASE("runtime_dispatch_target names the dispatched instruction set or none", "[kernels][dispatch]") {
  const std::string target = attnscope::kernels::runtime_dispatch_target();
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  CHECK(target == (attnscope::kernels::detail::avx2::available() ? "avx2+fma" : "none"));
#else
  CHECK(target == "none");  // built for AVX2 or wider, or not x86-64 / GCC / Clang: nothing to dispatch
#endif
}

#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)

namespace {

using attnscope::Index;

/// |got − exact| in ULP of the correctly rounded float (got and the rounding both 0 count as exact).
double dispatch_ulp_error(float got, long double exact) {
  const float rounded = static_cast<float>(exact);
  if (got == rounded) return 0;
  const long double ulp = static_cast<long double>(std::nextafter(rounded, std::numeric_limits<float>::infinity())) -
                          static_cast<long double>(rounded);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

std::vector<float> dispatch_uniform_row(attnscope::Random& random, Index n, double low, double high) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& value : x) value = static_cast<float>(random.uniform(low, high));
  return x;
}

}  // namespace

TEST_CASE("the dispatched AVX2 exponential is within 2 ULP of exp on [-87, 0] and flushes below FLT_MIN",
          "[kernels][dispatch]") {
  namespace avx2 = attnscope::kernels::detail::avx2;
  if (!avx2::available()) {
    WARN("this CPU has no AVX2 + FMA: the dispatched path cannot run here");
    return;
  }
  attnscope::Random random(1501);
  std::vector<float> x = dispatch_uniform_row(random, 1 << 16, -87.0, 0.0);
  for (float edge : {0.0f, -0.0f, -1e-30f, -0.34657359f, -0.34657360f, -87.3f, -88.0f, -103.0f, -1e30f,
                     -std::numeric_limits<float>::infinity()})
    x.push_back(edge);
  double worst = 0;
  for (float value : x) {
    const float got = avx2::exp_nonpositive_one(value);
    const long double exact = std::exp(static_cast<long double>(value));
    if (exact < std::numeric_limits<float>::min()) {
      CHECK(got == 0.0f);  // flushed, as packet_exp_nonpositive does
      continue;
    }
    worst = std::max(worst, dispatch_ulp_error(got, exact));
  }
  CHECK(worst <= 2.0);
}

/// The dispatched exponentials of x − shift (times scale) in blocks of 32: by the four-packet lock-step, by the same
/// with unit_scale, and by exp_shifted_at one packet at a time (n a multiple of 32).
template <int = 0>
__attribute__((target("avx2,fma"))) void dispatched_exponentials(const float* x, Index n, float shift, float scale,
                                                                 float* four, float* unit, float* one_by_one) {
  namespace avx2 = attnscope::kernels::detail::avx2;
  namespace x86 = attnscope::kernels::detail::x86;
  const x86::f32x8 shift_packet = x86::broadcast8(shift), scale_packet = x86::broadcast8(scale);
  for (Index i = 0; i < n; i += 32) {
    x86::f32x8 values[4], unit_values[4];
    avx2::exp_shifted_four<false>(x, i, shift_packet, scale_packet, nullptr, values);
    avx2::exp_shifted_four<true>(x, i, shift_packet, scale_packet, nullptr, unit_values);
    for (Index k = 0; k < 4; ++k) {
      x86::store8(one_by_one + i + 8 * k, avx2::exp_shifted_at<false>(x, i + 8 * k, shift_packet, scale_packet));
      x86::store8(four + i + 8 * k, values[k]);
      x86::store8(unit + i + 8 * k, unit_values[k]);
    }
  }
}

TEST_CASE("the dispatched four-packet lock-step exponential gives the bits of exp_shifted_at packet by packet",
          "[kernels][dispatch]") {
  if (!attnscope::kernels::detail::avx2::available()) {
    WARN("this CPU has no AVX2 + FMA: the dispatched path cannot run here");
    return;
  }
  attnscope::Random random(1503);
  std::vector<float> x = dispatch_uniform_row(random, 32 * 256, -100.0, 3.0);
  x[0] = -std::numeric_limits<float>::infinity();
  x[1] = 3.0f;  // the shift: exp(0) = 1
  for (const float scale : {1.0f, 0.37f}) {
    std::vector<float> one_by_one(x.size()), four(x.size()), unit(x.size());
    dispatched_exponentials(x.data(), static_cast<Index>(x.size()), 3.0f, scale, four.data(), unit.data(),
                            one_by_one.data());
    CHECK(std::memcmp(four.data(), one_by_one.data(), sizeof(float) * x.size()) == 0);
    if (scale == 1.0f) CHECK(std::memcmp(unit.data(), one_by_one.data(), sizeof(float) * x.size()) == 0);
    CHECK(four[0] == 0.0f);
    CHECK(four[1] == 1.0f);
  }
}

TEST_CASE("the dispatched exp_shifted_sum body and exp_shifted_scaled_row agree with the scalar references",
          "[kernels][dispatch]") {
  namespace avx2 = attnscope::kernels::detail::avx2;
  if (!avx2::available()) {
    WARN("this CPU has no AVX2 + FMA: the dispatched path cannot run here");
    return;
  }
  attnscope::Random random(1502);
  for (Index n : {0, 1, 7, 8, 9, 31, 32, 33, 40, 63, 64, 65, 257, 1000, 4099}) {
    const std::vector<float> x = dispatch_uniform_row(random, n, -30.0, 5.0);
    float shift = 5.0f;
    const float scale = 0.7f;
    std::vector<float> got(static_cast<std::size_t>(n) + 16), reference(static_cast<std::size_t>(n));
    float vector_sum = 0;
    const Index body =
        avx2::exp_shifted_sum_body<true, false>(x.data(), n, shift, scale, got.data(), x.data(), vector_sum);
    REQUIRE(body == n / 8 * 8);
    {  // scale 1 leaves out the multiplication: the same bits as the general body with scale 1
      std::vector<float> unit(got.size()), general(got.size());
      float unit_sum = 0, general_sum = 0;
      avx2::exp_shifted_sum_body<true, true>(x.data(), n, shift, 1.0f, unit.data(), nullptr, unit_sum);
      avx2::exp_shifted_sum_body<true, false>(x.data(), n, shift, 1.0f, general.data(), nullptr, general_sum);
      CHECK(unit_sum == general_sum);
      CHECK(std::equal(unit.begin(), unit.begin() + body, general.begin()));
    }
    {  // with the spread: the same exponentials and sum bit for bit, and Σ e_i (shift − x_i) of a long-double sum
      std::vector<float> spread_out(got.size());
      float spread_sum = 0, spread = -1;
      REQUIRE(avx2::exp_shifted_sum_body<true, false, true>(x.data(), n, shift, scale, spread_out.data(), nullptr,
                                                            spread_sum, &spread) == body);
      CHECK(spread_sum == vector_sum);
      CHECK(std::equal(spread_out.begin(), spread_out.begin() + body, got.begin()));
      // term by term (all ≥ 0): the exp's 2 ULP, its argument's rounding (2|a| ULP relative), gap, product and sum
      long double exact = 0, bound_terms = 0;
      for (Index i = 0; i < body; ++i) {
        const long double gap = static_cast<long double>(shift) - static_cast<long double>(x[i]);
        const long double argument = static_cast<long double>(scale) * gap;
        exact += std::exp(-argument) * gap;
        bound_terms += std::exp(-argument) * gap * (2 * argument + static_cast<long double>(n + 8));
      }
      CHECK(std::fabs(static_cast<double>(spread) - static_cast<double>(exact)) <=
            2.0 * std::numeric_limits<float>::epsilon() * static_cast<double>(bound_terms) + 1e-30);
    }
    const float reference_sum =
        attnscope::kernels::exp_shifted_sum_reference(x.data(), n, shift, scale, reference.data());
    double worst = 0, body_sum = 0;
    for (Index i = 0; i < body; ++i) {
      worst = std::max(worst, dispatch_ulp_error(got[i], std::exp(static_cast<long double>(scale * (x[i] - shift)))));
      body_sum += got[i];
    }
    CHECK(worst <= 2.0);
    CHECK(vector_sum == Approx(body_sum).epsilon(1e-5).margin(1e-30));
    // the whole dispatched kernel (body + scalar tail) against the reference sum
    const float kernel_sum = attnscope::kernels::exp_shifted_sum(x.data(), n, shift, scale, got.data());
    CHECK(kernel_sum == Approx(reference_sum).epsilon(1e-5).margin(1e-30));
    // exp_shifted_scaled_row: streaming and plain stores give the same bits at every alignment of the output
    for (std::size_t offset : {0u, 1u, 3u}) {
      std::vector<float> plain(static_cast<std::size_t>(n) + 8), streamed(static_cast<std::size_t>(n) + 8);
      const float factor = reference_sum > 0 ? 1.0f / reference_sum : 1.0f;
      avx2::exp_shifted_scaled_row(x.data(), n, shift, scale, factor, plain.data() + offset, false);
      avx2::exp_shifted_scaled_row(x.data(), n, shift, scale, factor, streamed.data() + offset, true);
      CHECK(std::memcmp(plain.data() + offset, streamed.data() + offset, sizeof(float) * static_cast<std::size_t>(n)) ==
            0);
      double scaled_worst = 0;
      for (Index i = 0; i < n; ++i)
        scaled_worst = std::max(scaled_worst, dispatch_ulp_error(plain[offset + static_cast<std::size_t>(i)],
                                                                 std::exp(static_cast<long double>(scale * (x[i] - shift))) *
                                                                     static_cast<long double>(factor)));
      CHECK(scaled_worst <= 3.0);  // 2 ULP of the exponential and one rounding of the product
    }
  }
}

#endif
