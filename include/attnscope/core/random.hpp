// attnscope/core/random.hpp — seeded, platform-independent random numbers.
// std::normal_distribution differs between standard libraries; these do not: results depend only on the seed.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"

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
  /// Shuffles `values` in place into a uniformly random order (Fisher–Yates, Knuth TAOCP vol. 2 §3.4.2
  /// Algorithm P, run backward): for i = size−1 down to 1, swap values[i] with values[below(i + 1)].
  /// size − 1 calls of below (none for size ≤ 1); the result depends only on the generator's state.
  template <class T>
  void shuffle(std::vector<T>& values) {
    using std::swap;
    for (std::size_t i = values.size(); i-- > 1;)
      swap(values[i], values[static_cast<std::size_t>(below(static_cast<std::uint64_t>(i) + 1))]);
  }
  /// Partial Fisher–Yates, run forward: for i = 0 .. count−1, swap values[i] with values[i + below(size − i)].
  /// Afterwards values[0, count) is a uniformly random count-subset of the entries, in uniformly random order
  /// (the rest of the vector holds the other entries). Exactly count calls of below. Throws
  /// attnscope::invalid_argument when count > size.
  template <class T>
  void shuffle_prefix(std::vector<T>& values, std::size_t count) {
    if (count > values.size())
      detail::throw_invalid_argument("Random::shuffle_prefix", "count ", count, " exceeds the vector's size ",
                                     values.size());
    using std::swap;
    for (std::size_t i = 0; i < count; ++i)
      swap(values[i], values[i + static_cast<std::size_t>(below(static_cast<std::uint64_t>(values.size() - i)))]);
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
