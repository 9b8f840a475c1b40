// bf16/fp16 rounding emulation and the training monitors (docs/theory/logits.md §3, §6).
#include <cmath>
#include <limits>

#include "attnscope/core/random.hpp"
#include "attnscope/logits/fit.hpp"
#include "attnscope/logits/monitors.hpp"
#include "attnscope/logits/precision.hpp"
#include "attnscope/logits/targets.hpp"
#include "support/catch.hpp"

using attnscope::Index;
using attnscope::logits::RoundingFormat;
using attnscope::RowMatrix;

TEST_CASE("bf16 rounding is round-to-nearest-even on the top 16 bits of float32", "[logits][precision]") {
  using attnscope::logits::round_to_format;
  const auto bf16 = RoundingFormat::bfloat16;
  CHECK(round_to_format(1.0f, bf16) == 1.0f);
  CHECK(round_to_format(3.0f, bf16) == 3.0f);
  CHECK(round_to_format(1.0f + 0x1p-8f, bf16) == 1.0f);                      // tie -> even (1.0)
  CHECK(round_to_format(1.0f + 3 * 0x1p-8f, bf16) == 1.0f + 0x1p-6f);        // tie -> even (1 + 2^-6)
  CHECK(round_to_format(1.0f + 0x1p-8f + 0x1p-20f, bf16) == 1.0f + 0x1p-7f); // above the tie -> up
  CHECK(round_to_format(-1.0f - 0x1p-8f, bf16) == -1.0f);
  CHECK(std::isnan(round_to_format(std::numeric_limits<float>::quiet_NaN(), bf16)));
  CHECK(round_to_format(std::numeric_limits<float>::infinity(), bf16) == std::numeric_limits<float>::infinity());
  CHECK(round_to_format(1.2345, RoundingFormat::none) == 1.2345);
  // fp16: 65504 is the largest finite value, 2049 rounds to 2048 (tie to even), 70000 overflows
  CHECK(round_to_format(65504.0f, RoundingFormat::float16) == 65504.0f);
  CHECK(round_to_format(2049.0f, RoundingFormat::float16) == 2048.0f);
  CHECK(std::isinf(round_to_format(70000.0f, RoundingFormat::float16)));
}

TEST_CASE("bf16 rounding error grows with |S| and stays below half an ulp", "[logits][precision]") {
  attnscope::Random random(1);
  double previous = 0;
  for (int exponent = -2; exponent <= 8; ++exponent) {
    RowMatrix<float> s(50, 50);
    for (Index i = 0; i < 50; ++i)
      for (Index j = 0; j < 50; ++j) s(i, j) = static_cast<float>(std::ldexp(1.0 + random.uniform(), exponent));
    const auto error = attnscope::logits::rounding_error(s, RoundingFormat::bfloat16);
    const double half_ulp = std::ldexp(1.0, exponent - 8);
    CHECK(error.max_absolute <= half_ulp);
    CHECK(error.max_absolute > 0.9 * half_ulp);
    CHECK(error.max_absolute > previous);
    CHECK(error.max_relative <= 0x1p-8);
    CHECK(error.overflow_count == 0);
    CHECK((attnscope::logits::round_to_bf16(s) - s).cwiseAbs().maxCoeff() == static_cast<float>(error.max_absolute));
    previous = error.max_absolute;
  }
}

TEST_CASE("fp16 overflow counters", "[logits][precision]") {
  RowMatrix<double> s(2, 3);
  s << 1, -70000, 65504, 1e6, 3, std::numeric_limits<double>::infinity();
  CHECK(attnscope::logits::fp16_overflow_count(s) == 2);
  s(1, 2) = 0;
  const auto error = attnscope::logits::rounding_error(s, RoundingFormat::float16);
  CHECK(error.overflow_count == 2);
  CHECK(std::isinf(attnscope::logits::round_to_fp16(s)(0, 1)));
  s(1, 2) = std::nan("");
  CHECK_THROWS_WITH(attnscope::logits::rounding_error(s, RoundingFormat::float16), Catch::Contains("rounding_error"));
}

TEST_CASE("a bf16-emulated fit rounds the logits and logs the rounding error", "[logits][precision][fit]") {
  const RowMatrix<float> target = attnscope::logits::causal_band_target(48, 4).cast<float>();
  attnscope::logits::FitOptions options;
  options.steps = 150;
  const auto exact = attnscope::logits::fit_qk(target, attnscope::causal, options);
  options.precision.format = RoundingFormat::bfloat16;
  options.precision.applies_to = attnscope::logits::RoundingTarget::both;
  const auto rounded = attnscope::logits::fit_qk(target, attnscope::causal, options);
  CHECK(exact.final_step().logit_rounding_error == 0);
  for (const auto& step : rounded.log) {
    CHECK(step.logit_rounding_error > 0);
    CHECK(step.logit_rounding_error <= std::ldexp(step.max_visible_logit, -8));
  }
  for (Index i = 0; i < 48; ++i)
    for (Index j = 0; j <= i; ++j) {
      const float s = rounded.logits[0](i, j), a = rounded.attention[0](i, j);
      CHECK(attnscope::logits::round_to_format(s, RoundingFormat::bfloat16) == s);
      CHECK(attnscope::logits::round_to_format(a, RoundingFormat::bfloat16) == a);
    }
  CHECK(rounded.final_step().loss != exact.final_step().loss);
  CHECK(rounded.final_step().fp16_overflow_count == 0);
}

TEST_CASE("max-logit tracker keeps per-head maxima over observations", "[logits][monitors]") {
  attnscope::logits::MaxLogitTracker tracker(2);
  RowMatrix<double> s(3, 3);
  s << 1, -std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),  //
      -4, 2, -std::numeric_limits<double>::infinity(),                                          //
      0.5, 3, -1;
  const auto extremes = tracker.observe(0, s, attnscope::causal);
  CHECK(extremes.max_logit == 3);
  CHECK(extremes.max_abs_logit == 4);
  s(2, 1) = 150;
  tracker.observe(0, s, attnscope::causal);
  tracker.observe(1, RowMatrix<double>::Constant(2, 2, -7.0));
  CHECK(tracker.max_logit(0) == 150);
  CHECK(tracker.max_abs_logit(0) == 150);
  CHECK(tracker.max_logit(1) == -7);
  CHECK(tracker.max_abs_logit(1) == 7);
  CHECK(tracker.heads_above(100.0) == std::vector<Index>{0});
  tracker.reset();
  CHECK_THROWS_WITH(tracker.max_logit(0), Catch::Contains("not been observed"));
  CHECK_THROWS_WITH(tracker.observe(2, s), Catch::Contains("head 2"));
  CHECK_THROWS_AS(attnscope::logits::MaxLogitTracker(0), attnscope::invalid_argument);
  CHECK_THROWS_AS(tracker.observe(0, s), attnscope::invalid_argument);  // -inf visible without a mask
}

TEST_CASE("loss-spike detectors flag jumps and non-finite losses, not smooth noisy decay", "[logits][monitors]") {
  attnscope::Random random(2);
  attnscope::logits::RollingMedianSpikeDetector median;
  attnscope::logits::EmaSpikeDetector ema;
  for (Index t = 0; t < 400; ++t) {
    double loss = 3.0 * std::exp(-static_cast<double>(t) / 200) + 0.01 * random.normal();
    if (t == 300) loss += 1.0;
    if (t == 350) loss = std::nan("");
    median.observe(loss);
    ema.observe(loss);
  }
  CHECK(median.spikes() == std::vector<Index>{300, 350});
  CHECK(ema.spikes() == std::vector<Index>{300, 350});
  CHECK_THROWS_AS(attnscope::logits::RollingMedianSpikeDetector(0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::RollingMedianSpikeDetector(10, -1.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::EmaSpikeDetector(1.0), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::EmaSpikeDetector(0.9, 0.0), attnscope::invalid_argument);
}
