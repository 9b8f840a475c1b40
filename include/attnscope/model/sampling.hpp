// attnscope/model/sampling.hpp — choosing the next token from a row of logits (greedy argmax, temperature sampling)
// and the log-probability of a token, with the library's softmax row kernels.
#pragma once

#include <cmath>
#include <numeric>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/row_reductions.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::model {

namespace detail {

/// Numerically stable log-softmax entry in double: logits[target] − m − log Σ exp(logits − m) with m the maximum,
/// by the vectorized max and exp-and-sum kernels. Throws on a non-finite logit.
template <class Derived>
double log_probability(const Eigen::MatrixBase<Derived>& logits, Index target) {
  const Index n = logits.size();
  std::vector<double> row(static_cast<std::size_t>(n)), exponentials(row.size());
  for (Index j = 0; j < n; ++j) row[static_cast<std::size_t>(j)] = static_cast<double>(logits(j));
  const auto maximum = kernels::row_max(row.data(), n);
  if (!maximum.finite)
    attnscope::detail::throw_invalid_argument("log_probability", "a logit is not finite");
  const double sum = kernels::exp_shifted_sum(row.data(), n, maximum.max, 1.0, exponentials.data());  // ≥ 1
  return row[static_cast<std::size_t>(target)] - maximum.max - std::log(sum);
}

}  // namespace detail

/// Index of the largest logit, the first one on ties (run.c argmax). Throws on an empty row. O(n).
template <class Derived>
int argmax_token(const Eigen::MatrixBase<Derived>& logits) {
  if (logits.size() == 0) attnscope::detail::throw_invalid_argument("argmax_token", "empty logits");
  Index best = 0;
  for (Index j = 1; j < logits.size(); ++j)
    if (logits(j) > logits(best)) best = j;
  return static_cast<int>(best);
}

/// Draws a token from softmax(logits / temperature) by inverse-CDF sampling with one uniform from `random`
/// (run.c sample_mult, computed in double). Throws on empty or non-finite logits or a temperature that is not
/// finite and > 0. O(n).
template <class Derived>
int sample_token(const Eigen::MatrixBase<Derived>& logits, double temperature, Random& random) {
  const char* fn = "sample_token";
  if (logits.size() == 0) attnscope::detail::throw_invalid_argument(fn, "empty logits");
  attnscope::detail::require_positive(fn, "temperature", temperature);
  std::vector<double> row(static_cast<std::size_t>(logits.size())), weights(row.size());
  for (Index j = 0; j < logits.size(); ++j) {
    row[std::size_t(j)] = double(logits(j));
    if (!std::isfinite(row[std::size_t(j)]))
      attnscope::detail::throw_invalid_argument(fn, "non-finite logit ", logits(j), " at index ", j);
  }
  attnscope::detail::softmax_row(row.data(), logits.size(), 1.0 / temperature, weights.data());  // softmax(z / T)
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);  // 1 up to rounding
  const double coin = random.uniform() * sum;
  double cumulative = 0;
  for (Index j = 0; j < logits.size(); ++j) {
    cumulative += weights[std::size_t(j)];
    if (coin < cumulative) return static_cast<int>(j);
  }
  return static_cast<int>(logits.size() - 1);  // rounding: coin ≥ the final cumulative sum
}

}  // namespace attnscope::model
