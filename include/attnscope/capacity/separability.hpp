// attnscope/capacity/separability.hpp — geometric separability N_s and N_s/N of the top-N tokens (docs/theory/capacity.md
// §2 "Definition (10)", §3.2), Theorem 2's bounds in the spec's [derived] form with ξ_i, the sphere projection and δ of
// Assumptions 1–2, and the multi-head coverage 1 − (1 − p)^H (Discussion). arXiv:2508.17821.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/capacity/selection.hpp"
#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::capacity {

/// Boundary of the ball B_r(s) when r is the distance of the nearest non-selected token ([not published]).
enum class Boundary {
  strict,     // default: selected i counts when ‖s − α_i x_i‖ < r (the minimizing non-selected token sits on the sphere)
  inclusive,  // selected i counts when ‖s − α_i x_i‖ <= r
};

/// N_s, N and N_s/N for one query row.
struct Separability {
  Index distinguishable = 0;  // N_s
  Index selected = 0;         // N
  double fraction = 0;        // N_s / N
  double radius = 0;          // r used
};

/// Theorem 2 quantities for one row, all [derived] (the paper's displays are not published).
struct Theorem2Bounds {
  Vector<double> spread;  // ξ_i for i in the selected order
  double lower = 0;       // 1 − (1/(rN)) Σ ξ_i (may be negative: then vacuous)
  double upper = 0;       // (1/N) Σ exp(−2 (ξ_i − r)_+² / (2M)²)
};

namespace detail {

/// Per-token distances D_i = ‖s − α_i x_i‖₂ for the listed tokens, in double (no validation; double: D_i are
/// compared with each other by < against r).
template <class Embeddings>
std::vector<double> distances_to_context(const Vector<double>& weights, const Embeddings& embeddings,
                                         const Vector<double>& context, const std::vector<Index>& tokens) {
  std::vector<double> out;
  out.reserve(tokens.size());
  for (const Index i : tokens) out.push_back((context - weights(i) * embedding_row(embeddings, i)).norm());
  return out;
}

/// N_s with r = min over `rest` of D_j ([paper] experimental choice), rest non-empty (no validation).
template <class Embeddings>
Separability separability_unchecked(const Vector<double>& weights, const Embeddings& embeddings,
                                    const std::vector<Index>& selected, const std::vector<Index>& rest,
                                    Boundary boundary) {
  const Vector<double> context = context_vector_unchecked(weights, embeddings, selected);
  const auto outside = distances_to_context(weights, embeddings, context, rest);
  Separability result;
  result.radius = *std::min_element(outside.begin(), outside.end());
  for (const double distance : distances_to_context(weights, embeddings, context, selected))
    if (boundary == Boundary::strict ? distance < result.radius : distance <= result.radius) ++result.distinguishable;
  result.selected = static_cast<Index>(selected.size());
  result.fraction = static_cast<double>(result.distinguishable) / static_cast<double>(result.selected);
  return result;
}

/// Validates the sphere parameters of Theorem 2.
inline void require_sphere_parameters(const char* function, double radius_of_sphere, double separation) {
  attnscope::detail::require_positive(function, "sphere radius M", radius_of_sphere);
  if (!std::isfinite(separation) || separation < 0 || separation > 2 * radius_of_sphere)
    attnscope::detail::throw_invalid_argument(function, "delta must be in [0, 2M] = [0, ", 2 * radius_of_sphere,
                                              "], got ", separation);
}

/// Theorem 2 [derived] quantities for one row (no validation); see theorem2_bounds().
template <class Weights>
Theorem2Bounds theorem2_bounds_unchecked(const Weights& weights, const std::vector<Index>& selected,
                                         double radius_of_sphere, double separation, double radius) {
  // Sums over I_N∖{i} from prefix and suffix sums of positive terms (no cancellation when α_i dominates):
  // mass, squares and half the cross sum Σ_{j<k} α_j α_k of the other selected weights.
  const std::size_t size = selected.size();
  std::vector<double> prefix_mass(size + 1, 0.0), prefix_squares(prefix_mass), prefix_cross(prefix_mass);
  std::vector<double> suffix_mass(size + 1, 0.0), suffix_squares(suffix_mass), suffix_cross(suffix_mass);
  for (std::size_t k = 0; k < size; ++k) {
    const double a = weights(selected[k]);
    prefix_cross[k + 1] = prefix_cross[k] + a * prefix_mass[k];
    prefix_mass[k + 1] = prefix_mass[k] + a;
    prefix_squares[k + 1] = prefix_squares[k] + a * a;
  }
  for (std::size_t k = size; k-- > 0;) {
    const double a = weights(selected[k]);
    suffix_cross[k] = suffix_cross[k + 1] + a * suffix_mass[k + 1];
    suffix_mass[k] = suffix_mass[k + 1] + a;
    suffix_squares[k] = suffix_squares[k + 1] + a * a;
  }
  const double m2 = radius_of_sphere * radius_of_sphere;
  const double inner_product_cap = m2 - separation * separation / 2;  // <x_j, x_k> = M² − ‖x_j − x_k‖²/2 <= M² − δ²/2
  Theorem2Bounds result;
  result.spread.resize(static_cast<Index>(size));
  double spread_total = 0, upper_total = 0;
  for (std::size_t position = 0; position < size; ++position) {
    const double others_squares = prefix_squares[position] + suffix_squares[position + 1];
    const double cross = 2 * (prefix_cross[position] + suffix_cross[position + 1] +
                              prefix_mass[position] * suffix_mass[position + 1]);  // Σ_{j≠k} α_j α_k over I_N∖i
    const double xi = std::sqrt(std::max(0.0, m2 * others_squares + inner_product_cap * cross));
    result.spread(static_cast<Index>(position)) = xi;
    spread_total += xi;
    const double excess = std::max(0.0, xi - radius);
    upper_total += std::exp(-2 * excess * excess / (4 * m2));  // one-sided Hoeffding on [0, 2M]
  }
  const double count = static_cast<double>(selected.size());
  result.lower = 1 - spread_total / (radius * count);  // Markov: P(X_i >= r) <= ξ_i / r
  result.upper = upper_total / count;
  return result;
}

}  // namespace detail

/// Separability of the selected tokens with r = min_{i∉I_N} ‖s − α_i x_i‖₂ (docs/theory/capacity.md §3.2): N_s counts the
/// selected i with ‖s − α_i x_i‖ < r (Boundary::strict, default) or <= r (inclusive). O(L d). Throws on bad
/// weights/embeddings, invalid selection, or when every token is selected (r undefined).
template <class DerivedWeights, class DerivedEmbeddings>
Separability separability(const Eigen::MatrixBase<DerivedWeights>& weights,
                          const Eigen::MatrixBase<DerivedEmbeddings>& embeddings, const std::vector<Index>& selected,
                          Boundary boundary = Boundary::strict) {
  const Vector<double> w = detail::weight_vector("separability", weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());  // in place when row-major
  detail::require_embeddings("separability", x, w.size());
  const auto rest = detail::complement(detail::selection_flags("separability", selected, w.size()));
  if (rest.empty())
    attnscope::detail::throw_invalid_argument("separability", "all ", w.size(), " tokens are selected: r is undefined");
  return detail::separability_unchecked(w, x, selected, rest, boundary);
}

/// Geometric recall R_N = N_s/N (arXiv:2602.01893's name for the same quantity); see separability().
template <class DerivedWeights, class DerivedEmbeddings>
double geometric_recall(const Eigen::MatrixBase<DerivedWeights>& weights,
                        const Eigen::MatrixBase<DerivedEmbeddings>& embeddings, const std::vector<Index>& selected,
                        Boundary boundary = Boundary::strict) {
  return separability(weights, embeddings, selected, boundary).fraction;
}

/// Definition (10) for a given radius [derived]: N_s = Σ_{i∈I_N} 1{‖α_i x_i − s‖ <= r} · Π_{j∉I_N} 1{‖α_j x_j − s‖ > r}
/// (closed ball). O(L d). Throws on bad inputs or r not finite and > 0.
template <class DerivedWeights, class DerivedEmbeddings>
Separability separability_at_radius(const Eigen::MatrixBase<DerivedWeights>& weights,
                                    const Eigen::MatrixBase<DerivedEmbeddings>& embeddings,
                                    const std::vector<Index>& selected, double radius) {
  const Vector<double> w = detail::weight_vector("separability_at_radius", weights);
  const RowMatrixView<typename DerivedEmbeddings::Scalar> x(embeddings.derived());
  detail::require_embeddings("separability_at_radius", x, w.size());
  const auto rest = detail::complement(detail::selection_flags("separability_at_radius", selected, w.size()));
  attnscope::detail::require_positive("separability_at_radius", "radius r", radius);
  const Vector<double> context = detail::context_vector_unchecked(w, x, selected);
  Separability result;
  result.radius = radius;
  result.selected = static_cast<Index>(selected.size());
  bool rest_outside = true;
  for (const double distance : detail::distances_to_context(w, x, context, rest)) rest_outside &= distance > radius;
  if (rest_outside)
    for (const double distance : detail::distances_to_context(w, x, context, selected))
      result.distinguishable += distance <= radius ? 1 : 0;
  result.fraction = static_cast<double>(result.distinguishable) / static_cast<double>(result.selected);
  return result;
}

/// Projects every row onto the sphere of radius M: x_i ← M·x_i/‖x_i‖₂ (Assumption 1, "we normalize embeddings").
/// O(L d). Throws on empty/non-finite input, M not finite and > 0, or a zero row.
template <class Derived>
RowMatrix<typename Derived::Scalar> project_to_sphere(const Eigen::MatrixBase<Derived>& embeddings,
                                                      typename Derived::Scalar radius = 1) {
  using Scalar = typename Derived::Scalar;
  attnscope::detail::require_nonempty("project_to_sphere", embeddings);
  attnscope::detail::require_finite("project_to_sphere", embeddings);
  attnscope::detail::require_positive("project_to_sphere", "radius M", radius);
  RowMatrix<Scalar> out = embeddings;
  for (Index i = 0; i < out.rows(); ++i) {
    const Scalar norm = out.row(i).norm();
    if (!(norm > 0)) attnscope::detail::throw_invalid_argument("project_to_sphere", "row ", i, " has zero norm");
    out.row(i) *= radius / norm;
  }
  return out;
}

/// δ = min_{i≠j} ‖x_i − x_j‖₂ over the rows (Assumption 2, "empirical minimum pairwise distance"). O(L² d).
/// Throws on non-finite input or fewer than two rows.
template <class Derived>
double min_pairwise_distance(const Eigen::MatrixBase<Derived>& embeddings) {
  attnscope::detail::require_nonempty("min_pairwise_distance", embeddings);
  attnscope::detail::require_finite("min_pairwise_distance", embeddings);
  if (embeddings.rows() < 2)
    attnscope::detail::throw_invalid_argument("min_pairwise_distance", "need at least 2 rows, got ", embeddings.rows());
  const RowMatrixView<typename Derived::Scalar> x(embeddings.derived());  // in place when row-major
  double smallest = std::numeric_limits<double>::infinity();
  for (Index i = 0; i < x.rows(); ++i)  // differences and squared norms in double (sums over d)
    for (Index j = i + 1; j < x.rows(); ++j)
      smallest = std::min(smallest, (detail::embedding_row(x, i) - detail::embedding_row(x, j)).squaredNorm());
  return std::sqrt(smallest);
}

/// Theorem 2 bounds on N_s/N ([derived] reconstruction, docs/theory/capacity.md §2):
/// ξ_i² = M² Σ_{j∈I_N∖i} α_j² + (M² − δ²/2) Σ_{j≠k ∈ I_N∖i} α_j α_k (clamped at 0), an upper estimate of
/// ‖s − α_i x_i‖² for embeddings on the sphere of radius M with pairwise distances >= δ;
/// lower = 1 − Σ ξ_i/(rN) (Markov); upper = (1/N) Σ exp(−2(ξ_i − r)_+²/(2M)²) (Hoeffding-type; not a proven bound).
/// O(N). Throws on bad weights/embeddings/selection, M <= 0, δ ∉ [0, 2M], r not finite and > 0.
template <class DerivedWeights, class DerivedEmbeddings>
Theorem2Bounds theorem2_bounds(const Eigen::MatrixBase<DerivedWeights>& weights,
                               const Eigen::MatrixBase<DerivedEmbeddings>& embeddings,
                               const std::vector<Index>& selected, double radius_of_sphere, double separation,
                               double radius) {
  const Vector<double> w = detail::weight_vector("theorem2_bounds", weights);
  detail::require_embeddings("theorem2_bounds", embeddings, w.size());
  detail::selection_flags("theorem2_bounds", selected, w.size());
  detail::require_sphere_parameters("theorem2_bounds", radius_of_sphere, separation);
  attnscope::detail::require_positive("theorem2_bounds", "radius r", radius);
  return detail::theorem2_bounds_unchecked(w, selected, radius_of_sphere, separation, radius);
}

/// Multi-head coverage 1 − (1 − p)^H of independent heads with separability p (Discussion). O(1).
/// Throws unless p ∈ [0, 1] and H >= 1.
inline double multihead_coverage(double separability_fraction, Index heads) {
  if (!(separability_fraction >= 0 && separability_fraction <= 1))
    attnscope::detail::throw_invalid_argument("multihead_coverage", "p must be in [0, 1], got ", separability_fraction);
  if (heads < 1) attnscope::detail::throw_invalid_argument("multihead_coverage", "H must be >= 1, got ", heads);
  return 1 - std::pow(1 - separability_fraction, static_cast<double>(heads));
}

}  // namespace attnscope::capacity
