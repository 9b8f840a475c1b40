// attnscope/capacity/ks_test.hpp — two-sample Kolmogorov–Smirnov test (statistic D = sup|F_a − F_b|, two-sided
// p-value), used by the critical top-N search of arXiv:2508.17821 Alg. 3.
// Exact p-value: probability that a uniformly random interleaving of the two samples (a lattice path from (0,0) to
// (m,n)) reaches |i/m − j/n| >= D (Hodges 1957 path counting), computed as a sum of exit probabilities (no cancellation).
// Asymptotic p-value: Kolmogorov's limit Q(λ) = 2 Σ_{k>=1} (−1)^{k−1} e^{−2k²λ²}, λ = √(mn/(m+n))·D.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::capacity {

/// How the KS p-value is computed.
enum class KsMethod {
  automatic,   // exact when m·n <= 10^7, otherwise asymptotic
  exact,       // lattice-path probability, O(m·n)
  asymptotic,  // Kolmogorov distribution at √(mn/(m+n))·D
};

/// Result of ks_2samp.
struct KsResult {
  double statistic = 0;  // D
  double p_value = 1;    // two-sided
  bool exact = true;     // which method produced p_value
};

/// Kolmogorov survival function Q(λ) = P(K > λ) = 2 Σ_{k>=1} (−1)^{k−1} e^{−2k²λ²} (λ >= 1), and the equivalent
/// theta-function form 1 − (√(2π)/λ) Σ_{k>=1} e^{−(2k−1)²π²/(8λ²)} for λ < 1. Accurate to ~1e-15. Throws on λ NaN.
inline double kolmogorov_survival(double lambda) {
  if (std::isnan(lambda)) attnscope::detail::throw_invalid_argument("kolmogorov_survival", "lambda is NaN");
  if (lambda <= 0) return 1;
  if (lambda < 1) {
    const double pi = 3.141592653589793238462643383279502884;
    double sum = 0;
    for (int k = 1; k <= 20; ++k) {
      const double odd = 2.0 * k - 1;
      sum += std::exp(-odd * odd * pi * pi / (8 * lambda * lambda));
    }
    return 1 - std::sqrt(2 * pi) / lambda * sum;
  }
  double sum = 0;
  for (int k = 1; k <= 100; ++k) {
    const double term = std::exp(-2.0 * k * k * lambda * lambda);
    sum += (k % 2 == 1) ? term : -term;
    if (term < 1e-300) break;
  }
  return std::min(1.0, 2 * sum);
}

/// Critical value c(level) with Q(c) = level (asymptotic KS; c(0.05) ≈ 1.358, c(0.01) ≈ 1.628), by bisection.
/// The two-sample test rejects at D > c·√((m+n)/(mn)). Throws unless 0 < level < 1.
inline double kolmogorov_critical_value(double level) {
  if (!(level > 0 && level < 1))
    attnscope::detail::throw_invalid_argument("kolmogorov_critical_value", "level must be in (0, 1), got ", level);
  double low = 0, high = 10;  // Q(0) = 1 > level > Q(10) ≈ 0
  for (int step = 0; step < 200; ++step) {
    const double middle = 0.5 * (low + high);
    (kolmogorov_survival(middle) > level ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

namespace detail {

inline std::int64_t absolute(std::int64_t value) { return value < 0 ? -value : value; }

/// Validates a KS sample: non-empty, finite.
inline std::vector<double> ks_sample(const char* name, const std::vector<double>& sample) {
  if (sample.empty()) attnscope::detail::throw_invalid_argument("ks_2samp", "sample ", name, " is empty");
  for (std::size_t i = 0; i < sample.size(); ++i)
    if (!std::isfinite(sample[i]))
      attnscope::detail::throw_invalid_argument("ks_2samp", "sample ", name, " has non-finite value ", sample[i],
                                                " at index ", i);
  std::vector<double> sorted = sample;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

/// max over tie-block ends of |i·n − j·m| for sorted samples (D·m·n as an exact integer).
inline std::int64_t ks_scaled_statistic(const std::vector<double>& a, const std::vector<double>& b) {
  const auto m = static_cast<std::int64_t>(a.size()), n = static_cast<std::int64_t>(b.size());
  std::int64_t i = 0, j = 0, largest = 0;
  while (i < m || j < n) {
    const double value = (j >= n || (i < m && a[static_cast<std::size_t>(i)] <= b[static_cast<std::size_t>(j)]))
                             ? a[static_cast<std::size_t>(i)]
                             : b[static_cast<std::size_t>(j)];
    while (i < m && a[static_cast<std::size_t>(i)] == value) ++i;  // both ECDFs jump past every tied value
    while (j < n && b[static_cast<std::size_t>(j)] == value) ++j;
    largest = std::max(largest, absolute(i * n - j * m));
  }
  return largest;
}

/// P(max_path |i·n − j·m| >= threshold) for a uniformly random path from (0,0) to (m,n), threshold >= 1.
inline double ks_exact_tail(std::int64_t m, std::int64_t n, std::int64_t threshold) {
  std::vector<double> inside(static_cast<std::size_t>(n + 1), 0.0);  // P(at (i, j) and never outside so far)
  double exited = 0;
  for (std::int64_t i = 0; i <= m; ++i) {
    for (std::int64_t j = 0; j <= n; ++j) {
      double arriving;
      if (i == 0 && j == 0) arriving = 1;
      else {
        arriving = 0;
        const double remaining = static_cast<double>(m + n - i - j + 1);  // steps left before the last step
        if (i > 0) arriving += inside[static_cast<std::size_t>(j)] * static_cast<double>(m - i + 1) / remaining;
        if (j > 0) arriving += inside[static_cast<std::size_t>(j - 1)] * static_cast<double>(n - j + 1) / remaining;
      }
      if (absolute(i * n - j * m) >= threshold) {
        exited += arriving;
        inside[static_cast<std::size_t>(j)] = 0;
      } else {
        inside[static_cast<std::size_t>(j)] = arriving;
      }
    }
  }
  return std::min(1.0, exited);
}

}  // namespace detail

/// Two-sample two-sided Kolmogorov–Smirnov test: D = sup_x |F_a(x) − F_b(x)| (ties handled: both ECDFs jump together),
/// p-value exact (lattice paths, O(m·n)) or asymptotic (Kolmogorov, λ = √(mn/(m+n))·D). Throws on an empty sample or
/// a non-finite value (naming the sample and index).
inline KsResult ks_2samp(const std::vector<double>& a, const std::vector<double>& b,
                         KsMethod method = KsMethod::automatic) {
  const std::vector<double> sorted_a = detail::ks_sample("a", a), sorted_b = detail::ks_sample("b", b);
  const auto m = static_cast<std::int64_t>(a.size()), n = static_cast<std::int64_t>(b.size());
  const std::int64_t scaled = detail::ks_scaled_statistic(sorted_a, sorted_b);
  KsResult result;
  result.statistic = static_cast<double>(scaled) / (static_cast<double>(m) * static_cast<double>(n));
  result.exact = method == KsMethod::exact ||
                 (method == KsMethod::automatic && static_cast<double>(m) * static_cast<double>(n) <= 1e7);
  if (scaled == 0) result.p_value = 1;
  else if (result.exact) result.p_value = detail::ks_exact_tail(m, n, scaled);
  else {
    const double effective = static_cast<double>(m) * static_cast<double>(n) / static_cast<double>(m + n);
    result.p_value = kolmogorov_survival(std::sqrt(effective) * result.statistic);
  }
  return result;
}

}  // namespace attnscope::capacity
