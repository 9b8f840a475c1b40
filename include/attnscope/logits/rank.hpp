// attnscope/logits/rank.hpp — rank and spectrum tools for logit matrices (docs/theory/logits.md and arXiv:2505.15548 "What the library must
// provide": numerical rank, stable rank, entropy effective rank (Roy & Vetterli 2007), Eckart–Young residual).
#pragma once

#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/decompositions.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/normalize/entropy.hpp"

namespace attnscope::logits {

/// Singular values σ_1 ≥ σ_2 ≥ … of M (min(rows, cols) of them), computed in double with Eigen's divide-and-conquer
/// SVD (Jacobi sweeps below 16 columns). O(rows·cols·min(rows, cols)).
template <class Derived>
Vector<double> singular_values(const Eigen::MatrixBase<Derived>& matrix) {
  attnscope::detail::require_nonempty("singular_values", matrix);
  attnscope::detail::require_finite("singular_values", matrix);
  return attnscope::detail::singular_values_divide_and_conquer(Eigen::MatrixXd(matrix.template cast<double>()));
}

/// Spectral norm ‖M‖₂ = σ_1 (exact, from the SVD).
template <class Derived>
double spectral_norm(const Eigen::MatrixBase<Derived>& matrix) {
  return singular_values(matrix)(0);
}

/// Numerical rank: #{k : σ_k > tolerance}. A negative tolerance (default) means the LAPACK/NumPy convention
/// σ_1·max(rows, cols)·2⁻⁵² (double machine epsilon).
template <class Derived>
Index numerical_rank(const Eigen::MatrixBase<Derived>& matrix, double tolerance = -1.0) {
  if (std::isnan(tolerance)) attnscope::detail::throw_invalid_argument("numerical_rank", "tolerance is NaN");
  const Vector<double> sigma = singular_values(matrix);
  const double tol = tolerance >= 0 ? tolerance
                                    : sigma(0) * static_cast<double>(std::max(matrix.rows(), matrix.cols())) *
                                          std::numeric_limits<double>::epsilon();
  return static_cast<Index>((sigma.array() > tol).count());
}

namespace detail {

/// Throws when all singular values are zero (stable and effective rank are undefined for M = 0).
inline void require_nonzero_spectrum(const char* function, const Vector<double>& sigma) {
  if (!(sigma(0) > 0))
    attnscope::detail::throw_invalid_argument(function, "undefined for the zero matrix (largest singular value 0)");
}

}  // namespace detail

/// Stable rank from singular values already computed (e.g. by `singular_values`, so one SVD serves several
/// measures): srank = Σ_k σ_k² / σ_1² = ‖M‖_F²/‖M‖₂² ∈ [1, rank M] (docs/theory/logits.md §4.3 F4). σ must be
/// sorted descending and non-negative, as `singular_values` returns it (not checked: σ_1 is taken as the largest).
/// Throws attnscope::invalid_argument if σ is empty or σ_1 = 0 (the zero matrix). O(len σ).
inline double stable_rank_from_singular_values(const Vector<double>& sigma) {
  if (sigma.size() == 0)
    attnscope::detail::throw_invalid_argument("stable_rank_from_singular_values", "no singular values");
  detail::require_nonzero_spectrum("stable_rank", sigma);
  return sigma.squaredNorm() / (sigma(0) * sigma(0));
}

/// Entropy effective rank from singular values already computed: erank = exp(H(p)), H(p) = −Σ_k p_k ln p_k with
/// p_k = σ_k/Σσ and 0·ln 0 = 0 (Roy & Vetterli, EUSIPCO 2007); 1 ≤ erank ≤ number of nonzero σ_k. σ must be
/// non-negative and sorted descending as `singular_values` returns it (not checked). Throws
/// attnscope::invalid_argument if σ is empty or σ_1 = 0 (the zero matrix). O(len σ).
inline double entropy_effective_rank_from_singular_values(const Vector<double>& sigma) {
  if (sigma.size() == 0)
    attnscope::detail::throw_invalid_argument("entropy_effective_rank_from_singular_values", "no singular values");
  detail::require_nonzero_spectrum("entropy_effective_rank", sigma);
  const Vector<double> p = sigma / sigma.sum();
  return std::exp(attnscope::detail::entropy_of(p.data(), p.size()));  // the one −Σ p ln p (normalize/entropy.hpp)
}

/// Stable rank srank(M) = ‖M‖_F² / ‖M‖₂² ∈ [1, rank M] (docs/theory/logits.md §4.3 F4). Throws for M = 0.
template <class Derived>
double stable_rank(const Eigen::MatrixBase<Derived>& matrix) {
  return stable_rank_from_singular_values(singular_values(matrix));
}

/// Entropy effective rank exp(H(p)), p_k = σ_k / Σσ (Roy & Vetterli 2007). Throws for M = 0.
template <class Derived>
double entropy_effective_rank(const Eigen::MatrixBase<Derived>& matrix) {
  return entropy_effective_rank_from_singular_values(singular_values(matrix));
}

/// Eckart–Young residual min_{rank X ≤ r} ‖M − X‖_F² = Σ_{k > r} σ_k² (docs/theory/logits.md §4.3 F4). r ≥ 0.
template <class Derived>
double eckart_young_residual(const Eigen::MatrixBase<Derived>& matrix, Index rank) {
  if (rank < 0) attnscope::detail::throw_invalid_argument("eckart_young_residual", "rank must be >= 0, got ", rank);
  const Vector<double> sigma = singular_values(matrix);
  double residual = 0;
  for (Index k = rank; k < sigma.size(); ++k) residual += sigma(k) * sigma(k);
  return residual;
}

/// The causal part of a square score matrix: entries j ≤ i kept, future entries j > i set to 0 whatever they hold
/// (−inf, NaN or a number, as captured by a model). Visible entries must be finite. O(n²).
template <class Derived>
RowMatrix<double> causal_part(const Eigen::MatrixBase<Derived>& scores) {
  attnscope::detail::require_nonempty("causal_part", scores);
  if (scores.rows() != scores.cols())
    attnscope::detail::throw_invalid_argument("causal_part", "scores must be square, got ", scores.rows(), "x",
                                              scores.cols());
  const Index n = scores.rows();
  RowMatrix<double> lower = RowMatrix<double>::Zero(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j <= i; ++j) {
      const double value = static_cast<double>(scores(i, j));
      if (!std::isfinite(value))
        attnscope::detail::throw_invalid_argument("causal_part", "non-finite causal score ", value, " at row ", i,
                                                  ", column ", j);
      lower(i, j) = value;
    }
  return lower;
}

/// Stable rank of a head's causal logit (scaled score) matrix: stable_rank(causal_part(scores)), i.e. the future
/// entries j > i are treated as 0 (they are not part of the attention pattern). Throws if the causal part is 0.
template <class Derived>
double causal_stable_rank(const Eigen::MatrixBase<Derived>& scores) {
  const Vector<double> sigma = singular_values(causal_part(scores));
  detail::require_nonzero_spectrum("causal_stable_rank", sigma);
  return stable_rank_from_singular_values(sigma);
}

}  // namespace attnscope::logits
