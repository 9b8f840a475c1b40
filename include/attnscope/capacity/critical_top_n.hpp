// attnscope/capacity/critical_top_n.hpp — the critical top-N search of arXiv:2508.17821 Alg. 3 (Fig. 2c,
// arXiv:2508.17821): the first N of an increasing grid at which the two-sample KS test no longer distinguishes the
// sample of true distances from the sample of expected distances (samples over heads in the paper).
#pragma once

#include <cmath>
#include <vector>

#include "attnscope/capacity/ks_test.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::capacity {

/// Result of critical_top_n.
struct CriticalTopN {
  Index critical_n = -1;            // first N with p-value > level; −1 when no N of the grid passes (Alg. 3)
  std::vector<double> statistics;   // KS D per grid entry (evaluated up to and including the critical N)
  std::vector<double> p_values;     // KS p-value per evaluated grid entry
};

/// Alg. 3: for N in `n_grid` (strictly increasing, each >= 1), KS-test true_distances[k] against
/// expected_distances[k] (e.g. per-head means over tokens at N = n_grid[k]); return the first N whose p-value exceeds
/// `level` (the test does not reject "same distribution"). The paper uses level 0.01 in the text, 0.05 in Alg. 3.
/// O(Σ_k m_k n_k) with exact p-values. Throws on size mismatch, a grid that is not strictly increasing or < 1,
/// level ∉ (0, 1), or an empty/non-finite sample (naming the grid entry).
inline CriticalTopN critical_top_n(const std::vector<Index>& n_grid,
                                   const std::vector<std::vector<double>>& true_distances,
                                   const std::vector<std::vector<double>>& expected_distances, double level,
                                   KsMethod method = KsMethod::automatic) {
  const char* function = "critical_top_n";
  if (!(level > 0 && level < 1))
    attnscope::detail::throw_invalid_argument(function, "level must be in (0, 1), got ", level);
  if (n_grid.empty()) attnscope::detail::throw_invalid_argument(function, "the N grid is empty");
  if (true_distances.size() != n_grid.size() || expected_distances.size() != n_grid.size())
    attnscope::detail::throw_invalid_argument(function, "grid has ", n_grid.size(), " entries but ",
                                              true_distances.size(), " true and ", expected_distances.size(),
                                              " expected samples were given");
  for (std::size_t k = 0; k < n_grid.size(); ++k)
    if (n_grid[k] < 1 || (k > 0 && n_grid[k] <= n_grid[k - 1]))
      attnscope::detail::throw_invalid_argument(function, "N grid must be strictly increasing and >= 1; entry ", k,
                                                " is ", n_grid[k]);
  CriticalTopN result;
  for (std::size_t k = 0; k < n_grid.size(); ++k) {
    KsResult test;
    try {
      test = ks_2samp(true_distances[k], expected_distances[k], method);
    } catch (const invalid_argument& error) {
      attnscope::detail::throw_invalid_argument(function, "N = ", n_grid[k], ": ", error.what());
    }
    result.statistics.push_back(test.statistic);
    result.p_values.push_back(test.p_value);
    if (test.p_value > level) {
      result.critical_n = n_grid[k];
      break;
    }
  }
  return result;
}

/// The [derived] default N grid of docs/theory/capacity.md §3.1 for a sequence of L tokens: 1 .. ⌈L/4⌉ in steps of
/// max(1, L/128). Throws on L < 1.
inline std::vector<Index> default_critical_n_grid(Index length) {
  if (length < 1) attnscope::detail::throw_invalid_argument("default_critical_n_grid", "L must be >= 1, got ", length);
  const Index last = (length + 3) / 4, step = length / 128 > 1 ? length / 128 : 1;
  std::vector<Index> grid;
  for (Index n = 1; n <= last; n += step) grid.push_back(n);
  return grid;
}

/// Least-squares slope through the origin of critical N against L (the paper reports ≈ 0.06·L), over pairs with
/// critical N >= 0. Throws on size mismatch or when no pair is usable.
inline double critical_n_slope(const std::vector<double>& lengths, const std::vector<double>& critical_n) {
  if (lengths.size() != critical_n.size())
    attnscope::detail::throw_invalid_argument("critical_n_slope", "size mismatch: ", lengths.size(), " vs ",
                                              critical_n.size());
  double numerator = 0, denominator = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    if (critical_n[i] >= 0 && std::isfinite(lengths[i])) {
      numerator += lengths[i] * critical_n[i];
      denominator += lengths[i] * lengths[i];
    }
  if (!(denominator > 0))
    attnscope::detail::throw_invalid_argument("critical_n_slope", "no usable (L, critical N) pair");
  return numerator / denominator;
}

}  // namespace attnscope::capacity
