// attnscope/capacity/head_summary.hpp — the per-head capacity numbers reported by `attnscope report`: the critical
// top-N of Alg. 3 (per-row samples), N_s/N at that N (Alg. 4) and g(T, ε) of Alg. 5 for one head, beside its exact
// mean ‖J‖₂ (arXiv:2508.17821, docs/theory/capacity.md).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/capacity/critical_top_n.hpp"
#include "attnscope/capacity/gradient.hpp"
#include "attnscope/capacity/head_profile.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::capacity {

/// Options of head_capacity().
struct HeadCapacityOptions {
  double level = 0.01;          // KS significance level of the critical-N search (the paper's text; Alg. 3 uses 0.05)
  std::vector<Index> n_grid;    // empty: default_critical_n_grid(L_k)
  double temperature = 1;       // T of g(T, ε); 1 = the model's own softmax on scaled scores
  double step = 1e-3;           // ε of g(T, ε)
  std::uint64_t seed = 0;       // random directions of g
  double sphere_radius = 1;     // M of the separability projection
};

/// One head's capacity numbers.
struct HeadCapacity {
  Index critical_n = -1;  // first N where KS(true, expected distances over rows) does not reject; −1 if none
  double separability_at_critical = std::numeric_limits<double>::quiet_NaN();  // mean N_s/N at critical_n (NaN if −1)
  double gradient_sensitivity = 0;  // mean over rows of ‖softmax((l+εv)/T) − softmax(l/T)‖₂/ε
  double exact_jacobian_norm = 0;   // mean over rows of the exact ‖J‖₂ at T
};

/// Capacity numbers of one head from its attention rows (L_q × L_k), pre-softmax scaled scores (L_q × L_k) and value
/// vectors (L_k × d): critical_top_n_for_head, separability_rows(...).mean_fraction at that N,
/// finite_difference_jacobian_norm_mean(scores, T, ε, seed) and the exact mean ‖J‖₂. Pass attnscope::causal for a
/// decoder. O(|grid|·L_q·L_k·d + L_k²·d). Throws as the functions it calls.
template <class DerivedAttention, class DerivedScores, class DerivedValues>
HeadCapacity head_capacity(const Eigen::MatrixBase<DerivedAttention>& attention,
                           const Eigen::MatrixBase<DerivedScores>& scores,
                           const Eigen::MatrixBase<DerivedValues>& values, const Visibility& visibility = {},
                           const HeadCapacityOptions& options = {}) {
  HeadCapacity result;
  const std::vector<Index> grid =
      options.n_grid.empty() ? default_critical_n_grid(attention.cols()) : options.n_grid;
  result.critical_n = critical_top_n_for_head(attention, values, grid, options.level, visibility).critical_n;
  if (result.critical_n >= 1) {
    SeparabilityOptions separability_options;
    separability_options.sphere_radius = options.sphere_radius;
    result.separability_at_critical =
        separability_rows(attention, values, result.critical_n, visibility, separability_options).mean_fraction;
  }
  result.gradient_sensitivity =
      finite_difference_jacobian_norm_mean(scores, options.temperature, options.step, options.seed, visibility);
  attnscope::detail::require_positive("exact_jacobian_norm", "temperature T", options.temperature);
  result.exact_jacobian_norm =
      detail::exact_jacobian_norms_of_head(scores, options.temperature, visibility).mean();  // one head: its mean
  return result;
}

}  // namespace attnscope::capacity
