// kernels::select_at_least (the candidate filter of the streaming top-k search) against its scalar reference, bit for
// bit: the count and the kept entries in order, on many random rows of every length 0–70 and longer ones, with
// thresholds that keep none, some or all entries, ties at the threshold, signed zeros and NaN (never kept); and both
// against the definition (the entries ≥ t, in order) computed apart.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels/select_at_least.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;

/// The entries of x ≥ t in order (the definition, by push_back).
std::vector<float> select_at_least_definition(const std::vector<float>& x, float t) {
  std::vector<float> kept;
  for (float v : x)
    if (v >= t) kept.push_back(v);
  return kept;
}

bool select_at_least_same_bits(const float* a, const float* b, Index n) {
  return std::memcmp(a, b, std::size_t(n) * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("select_at_least gives the reference's count and entries bit for bit on random rows",
          "[kernels][select_at_least]") {
  INFO("AVX2 path: " << attnscope::kernels::select_at_least_avx2_available());
  attnscope::Random random(4242);
  int rows = 0, mismatches = 0, definition_mismatches = 0;
  std::vector<Index> lengths;
  for (Index n = 0; n <= 70; ++n) lengths.push_back(n);
  for (Index n : {255, 256, 257, 1000, 4096, 4099}) lengths.push_back(n);
  for (Index n : lengths)
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(n));
      for (auto& v : x) v = static_cast<float>(random.normal());
      if (trial % 4 == 1)  // few distinct values: ties at the threshold
        for (auto& v : x) v = std::round(v * 2.0f) / 2.0f;
      if (trial % 8 == 3 && n > 2) {
        x[std::size_t(n / 2)] = std::numeric_limits<float>::quiet_NaN();
        x[0] = -0.0f;
        x[std::size_t(n - 1)] = 0.0f;
      }
      float threshold = 0.0f;  // none, all, an existing value (ties), a quantile
      switch (trial % 5) {
        case 0: threshold = std::numeric_limits<float>::infinity(); break;
        case 1: threshold = -std::numeric_limits<float>::infinity(); break;
        case 2: threshold = n > 0 ? x[std::size_t(random.below(std::uint64_t(n)))] : 0.0f; break;
        case 3: threshold = 1.5f; break;
        default: threshold = -0.0f; break;
      }
      if (std::isnan(threshold)) threshold = 0.0f;
      std::vector<float> fast(static_cast<std::size_t>(n), -7.0f), reference(static_cast<std::size_t>(n), -7.0f);
      const Index fast_count = attnscope::kernels::select_at_least(x.data(), n, threshold, fast.data());
      const Index reference_count =
          attnscope::kernels::select_at_least_reference(x.data(), n, threshold, reference.data());
      const std::vector<float> definition = select_at_least_definition(x, threshold);
      ++rows;
      mismatches += fast_count != reference_count ||
                    !select_at_least_same_bits(fast.data(), reference.data(), reference_count);
      definition_mismatches += reference_count != Index(definition.size()) ||
                               !select_at_least_same_bits(reference.data(), definition.data(), reference_count);
    }
  INFO(rows << " rows");
  CHECK(mismatches == 0);
  CHECK(definition_mismatches == 0);
}

TEST_CASE("select_at_least on double rows is the reference", "[kernels][select_at_least]") {
  const std::vector<double> x = {0.5, -1.0, 2.0, 2.0, 0.25, 3.0, -0.0, 1.0, 0.0, 2.5};
  std::vector<double> out(x.size());
  const Index count = attnscope::kernels::select_at_least(x.data(), Index(x.size()), 1.0, out.data());
  CHECK(count == 5);
  CHECK(std::vector<double>(out.begin(), out.begin() + count) == std::vector<double>{2.0, 2.0, 3.0, 1.0, 2.5});
}
