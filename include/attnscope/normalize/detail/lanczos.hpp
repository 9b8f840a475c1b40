// attnscope/normalize/detail/lanczos.hpp — ‖J‖₂ of a non-symmetric row Jacobian J = diagonal plus low rank, applied
// matrix-free: restarted Lanczos on JᵀJ and the largest eigenpair of the small projected tridiagonal matrix. The maps
// whose Jacobian is not symmetric (self-adjusting softmax, generalized maps) take their exact norm from here
// (normalize/jacobian.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/normalize/row_helpers.hpp"

namespace attnscope::detail {

/// Largest eigenvalue of the symmetric tridiagonal matrix with diagonal `diagonal` and off-diagonal `off` (off[j] =
/// T(j, j+1); size steps − 1 or more), and its unit eigenvector in `eigenvector`: implicit QL with Wilkinson-type
/// shifts and accumulated Givens rotations (EISPACK tql2; Bowdler, Martin, Reinsch & Wilkinson, Numer. Math. 11
/// (1968)), O(steps³). Small matrices only (the Lanczos projection, steps ≤ 24); no Eigen/Eigenvalues needed.
template <class Scalar>
Scalar tridiagonal_largest_eigenpair(std::vector<Scalar> diagonal, std::vector<Scalar> off, Index steps,
                                     std::vector<Scalar>& eigenvector) {
  const auto n = static_cast<std::size_t>(steps);
  off.resize(n);
  if (n > 0) off[n - 1] = 0;
  std::vector<Scalar> vectors(n * n, Scalar(0));  // column-major, starts as the identity
  for (std::size_t i = 0; i < n; ++i) vectors[i * n + i] = 1;
  const Scalar epsilon = std::numeric_limits<Scalar>::epsilon();
  Scalar shift_total = 0, scale = 0;
  for (std::size_t l = 0; l < n; ++l) {
    scale = std::max(scale, std::abs(diagonal[l]) + std::abs(off[l]));
    std::size_t m = l;
    while (m + 1 < n && !(std::abs(off[m]) <= epsilon * scale)) ++m;  // first negligible off-diagonal entry
    if (m > l) {
      for (int iteration = 0; iteration < 64 && std::abs(off[l]) > epsilon * scale; ++iteration) {
        Scalar g = diagonal[l];  // implicit shift from the leading 2×2 block
        Scalar p = (diagonal[l + 1] - g) / (2 * off[l]);
        Scalar r = std::hypot(p, Scalar(1));
        if (p < 0) r = -r;
        diagonal[l] = off[l] / (p + r);
        diagonal[l + 1] = off[l] * (p + r);
        const Scalar next_diagonal = diagonal[l + 1];
        Scalar h = g - diagonal[l];
        for (std::size_t i = l + 2; i < n; ++i) diagonal[i] -= h;
        shift_total += h;
        p = diagonal[m];  // implicit QL sweep from m up to l
        Scalar c = 1, c2 = 1, c3 = 1, s = 0, s2 = 0;
        const Scalar next_off = off[l + 1];
        for (std::size_t i = m; i-- > l;) {
          c3 = c2;
          c2 = c;
          s2 = s;
          g = c * off[i];
          h = c * p;
          r = std::hypot(p, off[i]);
          off[i + 1] = s * r;
          s = off[i] / r;
          c = p / r;
          p = c * diagonal[i] - s * g;
          diagonal[i + 1] = h + s * (c * g + s * diagonal[i]);
          Scalar* left = vectors.data() + i * n;
          Scalar* right = left + n;
          for (std::size_t k = 0; k < n; ++k) {
            h = right[k];
            right[k] = s * left[k] + c * h;
            left[k] = c * left[k] - s * h;
          }
        }
        p = -s * s2 * c3 * next_off * off[l] / next_diagonal;
        off[l] = s * p;
        diagonal[l] = c * p;
      }
    }
    diagonal[l] += shift_total;
    off[l] = 0;
  }
  std::size_t top = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (diagonal[i] > diagonal[top]) top = i;
  eigenvector.assign(vectors.begin() + static_cast<std::ptrdiff_t>(top * n),
                     vectors.begin() + static_cast<std::ptrdiff_t>((top + 1) * n));
  return n > 0 ? diagonal[top] : Scalar(0);
}

/// ‖J‖₂ = √λ_max(JᵀJ) by explicitly restarted Lanczos on JᵀJ applied matrix-free (one JVP and one VJP per step),
/// Krylov dimension min(n, 24) with full reorthogonalization, restarted from the top Ritz vector; stops when the
/// Ritz residual ‖JᵀJ y − θ y‖ ≤ tolerance·θ (default 1e-12; by the Bauer–Fike/Kato bound σ² then has relative
/// error ≤ 1e-12, in practice far less) or after 200 restarts. For n ≤ 24 the Krylov space is the whole space, so
/// one pass is exact to rounding (the projected tridiagonal matrix is similar to JᵀJ). Deterministic start vector
/// (seeded attnscope::Random). Scalar double in the library (the 1e-12 tolerance needs it).
template <class Scalar>
Scalar spectral_norm_lanczos(const DiagonalPlusLowRank<Scalar>& jacobian, Scalar tolerance = Scalar(1e-12),
                             int max_restarts = 200) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Column = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;
  const Index n = jacobian.size();
  const Index krylov = std::min<Index>(n, 24);
  Matrix basis(n, krylov + 1);
  Column start(n), image(n), product(n);
  Random random(0x6c616e637a6f73ull);
  for (Index i = 0; i < n; ++i) start(i) = Scalar(1.0 + 0.5 * random.normal());
  start.normalize();
  Scalar theta = 0;
  std::vector<Scalar> ritz;
  for (int restart = 0; restart < max_restarts; ++restart) {
    std::vector<Scalar> alphas, betas;
    basis.col(0) = start;
    bool invariant = false;
    Index steps = 0;
    for (Index j = 0; j < krylov; ++j) {
      jacobian.apply(basis.col(j).data(), image.data());
      jacobian.apply_transpose(image.data(), product.data());
      const Scalar product_norm = product.norm();
      const Scalar alpha = basis.col(j).dot(product);
      alphas.push_back(alpha);
      for (int pass = 0; pass < 2; ++pass)  // full reorthogonalization, twice is enough
        for (Index i = 0; i <= j; ++i) product -= basis.col(i).dot(product) * basis.col(i);
      const Scalar beta = product.norm();
      betas.push_back(beta);
      steps = j + 1;
      if (beta <= Scalar(1e-13) * product_norm || beta == 0) {
        invariant = true;
        break;
      }
      basis.col(j + 1) = product / beta;
    }
    theta = tridiagonal_largest_eigenpair(alphas, betas, steps, ritz);
    const Scalar residual = std::abs(betas[static_cast<std::size_t>(steps - 1)] * ritz.back());
    start = basis.leftCols(steps) * Eigen::Map<const Column>(ritz.data(), steps);
    start.normalize();
    if (invariant || residual <= tolerance * theta) break;
  }
  return std::sqrt(std::max(theta, Scalar(0)));
}

/// ‖J‖₂ of a non-symmetric row Jacobian (restarted Lanczos, exact to rounding for n ≤ 24). The dense-SVD oracle is
/// in normalize/dense_reference.hpp.
template <class Scalar>
Scalar nonsymmetric_spectral_norm(const DiagonalPlusLowRank<Scalar>& jacobian) {
  return spectral_norm_lanczos(jacobian);
}

}  // namespace attnscope::detail
