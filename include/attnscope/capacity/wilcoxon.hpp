// attnscope/capacity/wilcoxon.hpp — the Wilcoxon signed-rank test for paired samples (Wilcoxon 1945), used next to
// the two-sample KS test of arXiv:2508.17821 Alg. 3: its two samples (per-head true and expected distances) come from
// the same heads, so a paired test uses the pairing the unpaired KS test ignores.
// Conventions of scipy.stats.wilcoxon(x, y) with zero_method="wilcox", correction=False, two-sided: zero differences
// are dropped; |d| ranked with average ranks for ties; statistic = min(W+, W−); exact p-value from the null
// distribution of W+ (every sign pattern equally likely), or the normal approximation with the tie-corrected variance.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::capacity {
/// How the Wilcoxon p-value is computed.
enum class WilcoxonMethod {
  automatic,  // exact when at most 50 non-zero differences and no tied |d|, otherwise normal (scipy's "auto")
  exact,      // null distribution of W+ by counting sign patterns, O(n³); needs untied |d| and n <= 1000
  normal,     // z = (T − n(n+1)/4)/σ, σ² = n(n+1)(2n+1)/24 − Σ(t³ − t)/48 over tie groups, no continuity correction
};

/// Result of wilcoxon_signed_rank().
struct WilcoxonResult {
  double statistic = 0;   // T = min(W+, W−)
  double positive_rank_sum = 0;  // W+: sum of the ranks of the positive differences a − b
  Index nonzero = 0;      // number of non-zero differences (the test's n)
  double p_value = 1;     // two-sided
  bool exact = true;      // which method produced p_value
};

namespace detail {

/// P(W+ <= value) under the null for n untied ranks 1..n: number of subsets of {1..n} with sum <= value over 2^n
/// (counts in double: exact integers while 2^n <= 2^53, and relative error ~1e-16 beyond). O(n³).
inline double signed_rank_cdf(Index n, double value) {
  const Index top = n * (n + 1) / 2;
  std::vector<double> counts(static_cast<std::size_t>(top + 1), 0.0);
  counts[0] = 1;
  for (Index rank = 1; rank <= n; ++rank)
    for (Index sum = rank * (rank + 1) / 2; sum >= rank; --sum)
      counts[static_cast<std::size_t>(sum)] += counts[static_cast<std::size_t>(sum - rank)];
  double below = 0;
  for (Index sum = 0; sum <= top && static_cast<double>(sum) <= value + 1e-9; ++sum)
    below += counts[static_cast<std::size_t>(sum)];
  return below / std::ldexp(1.0, static_cast<int>(n));
}

}  // namespace detail

/// Two-sided Wilcoxon signed-rank test of the paired samples a and b (differences d_i = a_i − b_i; zeros dropped).
/// With no non-zero difference the result is statistic 0, n 0, p-value 1. O(n log n) (+ O(n³) for the exact p-value).
/// Throws attnscope::invalid_argument on different sizes, an empty sample, non-finite values, or WilcoxonMethod::exact
/// with tied |d| or more than 1000 differences.
inline WilcoxonResult wilcoxon_signed_rank(const std::vector<double>& a, const std::vector<double>& b,
                                           WilcoxonMethod method = WilcoxonMethod::automatic) {
  const char* function = "wilcoxon_signed_rank";
  if (a.size() != b.size())
    attnscope::detail::throw_invalid_argument(function, "paired samples differ in size: ", a.size(), " and ", b.size());
  if (a.empty()) attnscope::detail::throw_invalid_argument(function, "empty samples");
  std::vector<double> differences;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
      attnscope::detail::throw_invalid_argument(function, "pair ", i, " = (", a[i], ", ", b[i], ") is not finite");
    if (a[i] != b[i]) differences.push_back(a[i] - b[i]);
  }
  WilcoxonResult result;
  const Index n = static_cast<Index>(differences.size());
  result.nonzero = n;
  if (n == 0) return result;
  // Average ranks of |d| (1-based), and the tie groups' Σ(t³ − t).
  std::vector<std::size_t> order(differences.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t i, std::size_t j) { return std::abs(differences[i]) < std::abs(differences[j]); });
  std::vector<double> ranks(differences.size());
  double tie_term = 0;
  for (std::size_t start = 0; start < order.size();) {
    std::size_t end = start + 1;
    while (end < order.size() && std::abs(differences[order[end]]) == std::abs(differences[order[start]])) ++end;
    const double average = 0.5 * static_cast<double>(start + 1 + end);  // mean of ranks start+1 .. end
    for (std::size_t k = start; k < end; ++k) ranks[order[k]] = average;
    const double tied = static_cast<double>(end - start);
    tie_term += tied * tied * tied - tied;
    start = end;
  }
  for (std::size_t i = 0; i < differences.size(); ++i)
    if (differences[i] > 0) result.positive_rank_sum += ranks[i];
  const double total = static_cast<double>(n) * static_cast<double>(n + 1) / 2;
  result.statistic = std::min(result.positive_rank_sum, total - result.positive_rank_sum);
  const bool tied = tie_term > 0;
  if (method == WilcoxonMethod::exact && (tied || n > 1000))
    attnscope::detail::throw_invalid_argument(
        function, "the exact p-value needs untied |d| and at most 1000 differences (n = ", n,
        tied ? ", with ties)" : ")");
  result.exact = method == WilcoxonMethod::exact || (method == WilcoxonMethod::automatic && n <= 50 && !tied);
  if (result.exact) {
    result.p_value = std::min(1.0, 2 * detail::signed_rank_cdf(n, result.statistic));  // symmetric null
  } else {
    const double count = static_cast<double>(n);
    const double mean = count * (count + 1) / 4;
    const double variance = count * (count + 1) * (2 * count + 1) / 24 - tie_term / 48;
    const double z = variance > 0 ? (result.statistic - mean) / std::sqrt(variance) : 0.0;
    result.p_value = std::min(1.0, std::erfc(std::abs(z) / std::sqrt(2.0)));  // 2·Φ(−|z|)
  }
  return result;
}

}  // namespace attnscope::capacity
