// attnscope/core/random.hpp — seeded, platform-independent random numbers.
// std::normal_distribution differs between standard libraries; these do not: results depend only on the seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace attnscope {

/// Deterministic generator: std::mt19937_64 (fully specified by the standard) plus our own transforms.
class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Uniform double in [low, high).
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  /// Uniform integer in [0, bound), bound > 0 (rejection sampling, unbiased).
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound);
    std::uint64_t x;
    do x = engine_(); while (x >= limit);
    return x % bound;
  }
  /// Standard normal by the Box–Muller transform (one value per call; the pair's second value is cached).
  double normal() {
    if (has_cached_) {
      has_cached_ = false;
      return cached_;
    }
    double u1;
    do u1 = uniform(); while (u1 <= 0.0);
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 6.283185307179586476925286766559 * u2;
    cached_ = radius * std::sin(angle);
    has_cached_ = true;
    return radius * std::cos(angle);
  }
  /// Raw 64 random bits.
  std::uint64_t bits() { return engine_(); }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
  double cached_ = 0.0;
  bool has_cached_ = false;
};

}  // namespace attnscope
