// Seeded random inputs shared by the test suites: Gaussian logit (or any test) matrices and log-uniform scales.
// Every helper draws from the caller's attnscope::Random in a fixed order, so a seed gives the same inputs everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::testing {

/// rows×cols matrix with entries N(0, 1)·scale, drawn row by row (logits, or any Gaussian test matrix).
template <class Scalar = double>
attnscope::RowMatrix<Scalar> random_logits(attnscope::Random& random, attnscope::Index rows, attnscope::Index cols,
                                           double scale = 1.0) {
  attnscope::RowMatrix<Scalar> logits(rows, cols);
  for (attnscope::Index i = 0; i < rows; ++i)
    for (attnscope::Index j = 0; j < cols; ++j) logits(i, j) = static_cast<Scalar>(scale * random.normal());
  return logits;
}

/// The same from a fresh attnscope::Random(seed).
template <class Scalar = double>
attnscope::RowMatrix<Scalar> random_logits(std::uint64_t seed, attnscope::Index rows, attnscope::Index cols,
                                           double scale = 1.0) {
  attnscope::Random random(seed);
  return random_logits<Scalar>(random, rows, cols, scale);
}

/// A value log-uniform in [low, high].
inline double log_uniform(attnscope::Random& random, double low, double high) {
  return std::exp(random.uniform(std::log(low), std::log(high)));
}

/// n logits N(0, 1)·s with one scale s drawn first, log-uniform in [low_scale, high_scale].
inline std::vector<double> random_logit_vector(attnscope::Random& random, attnscope::Index n, double low_scale = 0.01,
                                               double high_scale = 30) {
  const double scale = log_uniform(random, low_scale, high_scale);
  std::vector<double> z(static_cast<std::size_t>(n));
  for (double& value : z) value = scale * random.normal();
  return z;
}

}  // namespace attnscope::testing
