// attnscope/composition/coda.hpp — compositional data analysis (CoDA) of attention rows, row-wise on Eigen
// matrices: closure, clr / clr_inv, ilr / ilr_inv (O(D) per row), alr / alr_inv, perturbation, powering,
// Aitchison inner product and distance, sequential-binary-partition bases, multiplicative zero replacement.
// Sources: Aitchison (1986); Egozcue et al. (2003); scikit-bio skbio.stats.composition (docs/theory/composition.md §3,
// §9, §13). Each row's parts are its visible keys; masked keys are excluded (not parts), and outputs hold 0 there.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/rows.hpp"
#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::composition {

/// Sign convention of the default (Helmert / Gram–Schmidt) ilr basis.
/// scikit_bio: ilr_j = √(i/(i+1))·ln(g(x_1..x_i)/x_{i+1}), i = j+1 (skbio `_gram_schmidt_basis`; coda.base `ilr_basis`).
/// r_compositions: ilr_j = √(i/(i+1))·ln(x_{i+1}/g(x_1..x_i)) (R compositions `ilrBase`): exactly minus scikit_bio.
enum class IlrSign { scikit_bio, r_compositions };

namespace detail {

template <class Derived>
using ScalarOf = typename Derived::Scalar;

template <class Scalar>
void require_floating(const char*) {
  static_assert(std::is_floating_point<Scalar>::value, "attnscope composition: matrices must be float or double");
}

/// Coefficients of the Helmert / Gram–Schmidt balances, j = 0..parts−2, i = j + 1 (skbio _gram_schmidt_basis row j):
/// on_prefix[j] = sign·√(i/(i+1))/i multiplies Σ_{k<i} l_k and on_next[j] = sign·√(i/(i+1)) multiplies l_i.
template <class Scalar>
struct IlrCoefficients {
  Eigen::Array<Scalar, Eigen::Dynamic, 1> on_prefix, on_next;
  IlrCoefficients(Index parts, Scalar sign) : on_prefix(parts > 1 ? parts - 1 : 0), on_next(parts > 1 ? parts - 1 : 0) {
    for (Index j = 0; j + 1 < parts; ++j) {
      const Scalar i = static_cast<Scalar>(j + 1);
      on_next(j) = sign * std::sqrt(i / (i + 1));
      on_prefix(j) = on_next(j) / i;
    }
  }
};

/// Row kernel: ilr coordinates from n log-parts (or logits) in O(n):
/// y_j = sign·√(i/(i+1))·(mean(l_0..l_{i−1}) − l_i): one prefix-sum pass, then one vectorised multiply-add pass.
template <class Scalar>
void ilr_row_from_logs(const Scalar* logs, Index n, const IlrCoefficients<Scalar>& coefficients, Scalar* out) {
  if (n < 2) return;
  // Prefix sums out[j] = l_0 + … + l_j (j < n − 1) as four independent running sums over four equal chunks
  // (instruction-level parallelism instead of one serial chain), then each chunk shifted by the totals before it;
  // the last m mod 4 sums continue serially.
  const Index m = n - 1, chunk = m / 4;
  Scalar r0 = 0, r1 = 0, r2 = 0, r3 = 0;
  Scalar *o0 = out, *o1 = out + chunk, *o2 = out + 2 * chunk, *o3 = out + 3 * chunk;
  const Scalar *l0 = logs, *l1 = logs + chunk, *l2 = logs + 2 * chunk, *l3 = logs + 3 * chunk;
  for (Index t = 0; t < chunk; ++t) {
    o0[t] = (r0 += l0[t]);
    o1[t] = (r1 += l1[t]);
    o2[t] = (r2 += l2[t]);
    o3[t] = (r3 += l3[t]);
  }
  using Array = Eigen::Array<Scalar, Eigen::Dynamic, 1>;
  if (chunk > 0) {
    Eigen::Map<Array>(o1, chunk) += r0;
    Eigen::Map<Array>(o2, chunk) += r0 + r1;
    Eigen::Map<Array>(o3, chunk) += r0 + r1 + r2;
  }
  Scalar prefix = r0 + r1 + r2 + r3;
  for (Index j = 4 * chunk; j < m; ++j) out[j] = (prefix += logs[j]);
  Eigen::Map<Array> result(out, n - 1);
  result = coefficients.on_prefix.head(n - 1) * result -
           coefficients.on_next.head(n - 1) * Eigen::Map<const Array>(logs + 1, n - 1);
}

/// Row kernel: clr values of n parts from n−1 ilr coordinates in O(n) (clr = y·V, suffix sums over the basis rows).
template <class Scalar>
void clr_row_from_ilr(const Scalar* coordinates, Index n, Scalar sign, Scalar* clr_out) {
  // V_jk = √(i/(i+1))/i for k < i, −√(i/(i+1)) for k = i (i = j+1), 0 otherwise.
  Scalar suffix = 0;  // Σ_{j ≥ k} y_j·√(i/(i+1))/i
  for (Index k = n - 1; k >= 0; --k) {
    Scalar value = suffix;
    if (k >= 1) {
      const Scalar i = static_cast<Scalar>(k);
      value -= std::sqrt(i / (i + 1)) * coordinates[k - 1];
    }
    clr_out[k] = sign * value;
    if (k >= 1) {
      const Scalar i = static_cast<Scalar>(k);
      suffix += coordinates[k - 1] * std::sqrt(i / (i + 1)) / i;
    }
  }
}

/// Row kernel: closed exp of clr-like values, C(exp z) = softmax(z) (skbio clr_inv), by the normalize module's
/// softmax row kernel. z must be finite (callers validate their inputs first).
template <class Scalar>
void closed_exp_row(const Scalar* z, Index n, Scalar* out) {
  attnscope::detail::softmax_row(z, n, Scalar(1), out);
}

/// Row kernel: centred values v − mean(v).
template <class Scalar>
void centre_row(const Scalar* values, Index n, Scalar* out) {
  Scalar mean = 0;
  for (Index k = 0; k < n; ++k) mean += values[k];
  mean /= static_cast<Scalar>(n);
  for (Index k = 0; k < n; ++k) out[k] = values[k] - mean;
}

/// Row kernel: clr of n positive parts, ln x − mean(ln x).
template <class Scalar>
void clr_row(const Scalar* parts, Index n, Scalar* out) {
  for (Index k = 0; k < n; ++k) out[k] = std::log(parts[k]);
  centre_row(out, n, out);
}

/// Applies kernel(values, n, out) to each row's visible parts; output has the input's shape, masked entries 0.
template <class Scalar, class Kernel>
RowMatrix<Scalar> map_parts(const RowMatrixView<Scalar>& x, const Visibility& visibility, Kernel&& kernel) {
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(x.rows(), x.cols());
  for_each_visible_row<Scalar>(x, visibility, [&](Index i, const Scalar* values, Index n, const Index* columns) {
    if (!columns) return kernel(values, n, out.data() + i * out.cols());
    std::vector<Scalar> result(static_cast<std::size_t>(n));
    kernel(values, n, result.data());
    scatter(result.data(), n, columns, out.data() + i * out.cols());
  });
  return out;
}

/// Validates a pair of matrices of positive parts with the same shape.
template <class Scalar>
void validate_positive_pair(const char* function, const RowMatrixView<Scalar>& x, const RowMatrixView<Scalar>& y,
                            const Visibility& visibility) {
  attnscope::detail::require_same_shape(function, "x/y", x, y);
  validate_parts<Scalar>(function, x, visibility, PartRule::positive);
  validate_parts<Scalar>(function, y, visibility, PartRule::positive);
}

/// Row-wise Σ_k f(clr_x[k], clr_y[k]) of two matrices' clr (or centred-logit) values over the visible keys.
template <class Scalar, class Pairwise>
Vector<Scalar> reduce_clr_pair(const RowMatrix<Scalar>& clr_x, const RowMatrix<Scalar>& clr_y,
                               const Visibility& visibility, Pairwise&& pairwise) {
  Vector<Scalar> result(clr_x.rows());
  for (Index i = 0; i < clr_x.rows(); ++i) {
    Scalar total = 0;
    for (Index j = 0; j < clr_x.cols(); ++j)  // masked entries hold 0 in both and contribute f(0, 0) = 0
      if (visibility.visible(i, j, clr_x.cols())) total += pairwise(clr_x(i, j), clr_y(i, j));
    result(i) = total;
  }
  return result;
}

}  // namespace detail

/// Closure C(x) = x / Σx over each row's visible parts (Aitchison 1986; skbio `closure`). Throws on negative or
/// non-finite parts and on rows whose visible parts sum to 0.
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> closure(const Eigen::MatrixBase<Derived>& x, const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("closure");
  const RowMatrixView<Scalar> view(x.derived());
  detail::validate_parts<Scalar>("closure", view, visibility, detail::PartRule::non_negative);
  for (Index i = 0; i < view.rows(); ++i) {  // checked before the (possibly parallel) row loop, which must not throw
    Scalar sum = 0;
    for (Index j = 0; j < view.cols(); ++j)
      if (visibility.visible(i, j, view.cols())) sum += view(i, j);
    if (!(sum > 0))
      attnscope::detail::throw_invalid_argument("closure", "row ", i, " has visible parts summing to ", sum);
  }
  return detail::map_parts<Scalar>(view, visibility, [](const Scalar* values, Index n, Scalar* out) {
    Scalar sum = 0;
    for (Index k = 0; k < n; ++k) sum += values[k];
    for (Index k = 0; k < n; ++k) out[k] = values[k] / sum;
  });
}

/// Centred log-ratio clr(x) = ln x − mean(ln x) over each row's visible parts (Aitchison 1986; skbio `clr`).
/// Parts must be > 0 (no silent zero handling). Masked entries of the result are 0. O(D) per row.
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> clr(const Eigen::MatrixBase<Derived>& x, const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("clr");
  const RowMatrixView<Scalar> view(x.derived());
  detail::validate_parts<Scalar>("clr", view, visibility, detail::PartRule::positive);
  return detail::map_parts<Scalar>(view, visibility, detail::clr_row<Scalar>);
}

/// clr straight from logits: clr(softmax(z)) = z − mean(z) over the visible keys (docs/theory/composition.md §3,
/// verified). Exact even where softmax underflows to 0, so no zero replacement is needed when logits are available.
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> clr_from_logits(const Eigen::MatrixBase<Derived>& logits,
                                                     const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("clr_from_logits");
  const RowMatrixView<Scalar> view(logits.derived());
  detail::validate_parts<Scalar>("clr_from_logits", view, visibility, detail::PartRule::finite);
  return detail::map_parts<Scalar>(view, visibility, detail::centre_row<Scalar>);
}

/// Inverse clr: C(exp(z − max z)) over the visible keys (skbio `clr_inv`); masked entries are 0.
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> clr_inv(const Eigen::MatrixBase<Derived>& z, const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("clr_inv");
  const RowMatrixView<Scalar> view(z.derived());
  detail::validate_parts<Scalar>("clr_inv", view, visibility, detail::PartRule::finite);
  return detail::map_parts<Scalar>(view, visibility, detail::closed_exp_row<Scalar>);
}

namespace detail {

/// ilr of log-parts (or logits) row-wise into `out` (rows × (cols − 1), resized if needed); a row with n visible
/// parts fills its first n − 1 entries and zeroes the rest.
template <class Scalar>
void ilr_of_logs(const RowMatrixView<Scalar>& x, const Visibility& visibility, IlrSign sign, bool take_log,
                 RowMatrix<Scalar>& out) {
  out.resize(x.rows(), x.cols() - 1);
  const IlrCoefficients<Scalar> coefficients(x.cols(), sign == IlrSign::scikit_bio ? Scalar(1) : Scalar(-1));
  for_each_visible_row<Scalar>(x, visibility, [&](Index i, const Scalar* values, Index n, const Index*) {
    Scalar* out_row = out.data() + i * out.cols();
    std::fill(out_row + std::max<Index>(n - 1, 0), out_row + out.cols(), Scalar(0));  // unused coordinates
    if (!take_log) return ilr_row_from_logs(values, n, coefficients, out_row);
    std::vector<Scalar> logs(static_cast<std::size_t>(n));
    Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>>(logs.data(), n) =
        Eigen::Map<const Eigen::Array<Scalar, Eigen::Dynamic, 1>>(values, n).log();  // vectorised logs
    ilr_row_from_logs(logs.data(), n, coefficients, out_row);
  });
}

}  // namespace detail

/// Isometric log-ratio with the default Helmert / Gram–Schmidt basis (Egozcue et al. 2003; skbio `ilr`), computed
/// in O(D) per row by cumulative sums: ilr_j = √(i/(i+1))·(mean(ln x_0..ln x_{i−1}) − ln x_i), i = j + 1
/// (sign per IlrSign). Returns rows × (cols − 1); a row with n visible parts fills its first n − 1 entries (others 0).
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> ilr(const Eigen::MatrixBase<Derived>& x, const Visibility& visibility = {},
                                         IlrSign sign = IlrSign::scikit_bio) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("ilr");
  const RowMatrixView<Scalar> view(x.derived());
  detail::validate_parts<Scalar>("ilr", view, visibility, detail::PartRule::positive);
  RowMatrix<Scalar> out;
  detail::ilr_of_logs<Scalar>(view, visibility, sign, true, out);
  return out;
}

/// ilr() into a caller-owned matrix (resized to rows × (cols − 1) if needed; no allocation when it already fits).
template <class Derived>
void ilr_into(const Eigen::MatrixBase<Derived>& x, RowMatrix<detail::ScalarOf<Derived>>& out,
              const Visibility& visibility = {}, IlrSign sign = IlrSign::scikit_bio) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("ilr_into");
  const RowMatrixView<Scalar> view(x.derived());
  detail::validate_parts<Scalar>("ilr_into", view, visibility, detail::PartRule::positive);
  detail::ilr_of_logs<Scalar>(view, visibility, sign, true, out);
}

/// ilr(softmax(z)) computed from logits in O(D) per row (the log-normaliser cancels in every balance; §3).
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> ilr_from_logits(const Eigen::MatrixBase<Derived>& logits,
                                                     const Visibility& visibility = {},
                                                     IlrSign sign = IlrSign::scikit_bio) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("ilr_from_logits");
  const RowMatrixView<Scalar> view(logits.derived());
  detail::validate_parts<Scalar>("ilr_from_logits", view, visibility, detail::PartRule::finite);
  RowMatrix<Scalar> out;
  detail::ilr_of_logs<Scalar>(view, visibility, sign, false, out);
  return out;
}

/// ilr_from_logits() into a caller-owned matrix (resized to rows × (cols − 1) if needed).
template <class Derived>
void ilr_from_logits_into(const Eigen::MatrixBase<Derived>& logits, RowMatrix<detail::ScalarOf<Derived>>& out,
                          const Visibility& visibility = {}, IlrSign sign = IlrSign::scikit_bio) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("ilr_from_logits_into");
  const RowMatrixView<Scalar> view(logits.derived());
  detail::validate_parts<Scalar>("ilr_from_logits_into", view, visibility, detail::PartRule::finite);
  detail::ilr_of_logs<Scalar>(view, visibility, sign, false, out);
}

/// Inverse ilr in O(D) per row: C(exp(y·V)) (skbio `ilr_inv`). `coordinates` is rows × (D − 1); the result is
/// rows × D with visibility over the result (a row with n visible parts reads its first n − 1 coordinates).
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> ilr_inv(const Eigen::MatrixBase<Derived>& coordinates,
                                             const Visibility& visibility = {}, IlrSign sign = IlrSign::scikit_bio) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("ilr_inv");
  const RowMatrixView<Scalar> view(coordinates.derived());
  attnscope::detail::require_nonempty("ilr_inv", view);
  attnscope::detail::require_finite("ilr_inv", view);
  const Index rows = view.rows(), cols = view.cols() + 1;
  visibility.validate("ilr_inv", rows, cols);
  const Scalar sign_value = sign == IlrSign::scikit_bio ? Scalar(1) : Scalar(-1);
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(rows, cols);
  attnscope::detail::for_each_row(rows, cols, [&](Index i) {
    const Index n = visibility.visible_count(i, cols);
    std::vector<Scalar> clr_values(static_cast<std::size_t>(n)), parts(static_cast<std::size_t>(n));
    detail::clr_row_from_ilr(view.data() + i * view.outerStride(), n, sign_value, clr_values.data());
    detail::closed_exp_row(clr_values.data(), n, parts.data());
    Index k = 0;
    for (Index j = 0; j < cols; ++j)
      if (visibility.visible(i, j, cols)) out(i, j) = parts[static_cast<std::size_t>(k++)];
  });
  return out;
}

/// The explicit (D − 1) × D Helmert / Gram–Schmidt ilr basis, row j = √(i/(i+1))·(1/i, …, 1/i, −1, 0, …), i = j + 1
/// (skbio `_gram_schmidt_basis`; negated for IlrSign::r_compositions, R `ilrBase`). For tests and baselines: ilr()
/// never forms it. D ≥ 2.
template <class Scalar = double>
RowMatrix<Scalar> ilr_basis(Index parts, IlrSign sign = IlrSign::scikit_bio) {
  if (parts < 2) attnscope::detail::throw_invalid_argument("ilr_basis", "needs at least 2 parts, got ", parts);
  RowMatrix<Scalar> basis = RowMatrix<Scalar>::Zero(parts - 1, parts);
  const Scalar sign_value = sign == IlrSign::scikit_bio ? Scalar(1) : Scalar(-1);
  for (Index j = 0; j + 1 < parts; ++j) {
    const Scalar i = static_cast<Scalar>(j + 1);
    const Scalar norm = std::sqrt(i / (i + 1));
    for (Index k = 0; k <= j; ++k) basis(j, k) = sign_value * norm / i;
    basis(j, j + 1) = -sign_value * norm;
  }
  return basis;
}

/// Orthonormal basis from a sequential binary partition (Egozcue & Pawlowsky-Glahn 2005; skbio `sbp_basis`): sbp is
/// (D − 1) × D with entries in {+1, −1, 0}; ψ_i = +√(n₋/(n₊(n₊+n₋))) on +1, −√(n₊/(n₋(n₊+n₋))) on −1, 0 elsewhere.
template <class Derived>
RowMatrix<double> sbp_basis(const Eigen::MatrixBase<Derived>& sbp) {
  attnscope::detail::require_nonempty("sbp_basis", sbp);
  RowMatrix<double> basis = RowMatrix<double>::Zero(sbp.rows(), sbp.cols());
  for (Index r = 0; r < sbp.rows(); ++r) {
    double positive = 0, negative = 0;
    for (Index c = 0; c < sbp.cols(); ++c) {
      const double v = static_cast<double>(sbp(r, c));
      if (v == 1) ++positive;
      else if (v == -1) ++negative;
      else if (v != 0)
        attnscope::detail::throw_invalid_argument("sbp_basis", "entry ", v, " at row ", r, ", column ", c,
                                                  " is not +1, -1 or 0");
    }
    if (positive == 0 || negative == 0)
      attnscope::detail::throw_invalid_argument("sbp_basis", "row ", r, " needs at least one +1 and one -1 part");
    for (Index c = 0; c < sbp.cols(); ++c) {
      const double v = static_cast<double>(sbp(r, c));
      if (v == 1) basis(r, c) = std::sqrt(negative / (positive * (positive + negative)));
      if (v == -1) basis(r, c) = -std::sqrt(positive / (negative * (positive + negative)));
    }
  }
  return basis;
}

/// ilr with an explicit basis, clr(x)·basisᵀ, as one matrix product: O(D²) per row (skbio `ilr(mat, basis)`).
/// The baseline the O(D) ilr() is measured against; also the way to use an sbp_basis. All parts visible.
template <class Derived, class BasisDerived>
RowMatrix<detail::ScalarOf<Derived>> ilr_by_basis(const Eigen::MatrixBase<Derived>& x,
                                                  const Eigen::MatrixBase<BasisDerived>& basis) {
  using Scalar = detail::ScalarOf<Derived>;
  if (basis.cols() != x.cols())
    attnscope::detail::throw_invalid_argument("ilr_by_basis", "basis has ", basis.cols(), " columns but x has ",
                                              x.cols(), " parts");
  attnscope::detail::require_finite("ilr_by_basis", basis);
  const RowMatrix<Scalar> clr_values = clr(x);
  return clr_values * basis.template cast<Scalar>().transpose();
}

/// Additive log-ratio alr(x)_j = ln(x_j / x_ref) for the visible parts j ≠ ref (skbio `alr`, ref_idx default 0).
/// Returns rows × (cols − 1), each row's values left-aligned in column order (a row with n parts fills n − 1).
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> alr(const Eigen::MatrixBase<Derived>& x, Index reference = 0,
                                         const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("alr");
  const RowMatrixView<Scalar> view(x.derived());
  detail::validate_parts<Scalar>("alr", view, visibility, detail::PartRule::positive);
  if (reference < 0 || reference >= view.cols())
    attnscope::detail::throw_invalid_argument("alr", "reference part ", reference, " out of range for ", view.cols(),
                                              " parts");
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(view.rows(), view.cols() - 1);
  for (Index i = 0; i < view.rows(); ++i)
    if (!visibility.visible(i, reference, view.cols()))
      attnscope::detail::throw_invalid_argument("alr", "reference part ", reference, " is masked in row ", i);
  detail::for_each_visible_row<Scalar>(view, visibility, [&](Index i, const Scalar* values, Index n, const Index* columns) {
    Scalar log_reference = 0;
    for (Index k = 0; k < n; ++k)
      if (detail::column_of(columns, k) == reference) log_reference = std::log(values[k]);
    Index out_column = 0;
    for (Index k = 0; k < n; ++k)
      if (detail::column_of(columns, k) != reference) out(i, out_column++) = std::log(values[k]) - log_reference;
  });
  return out;
}

/// Inverse alr: parts C(exp(y_1), …, 1 at the reference, …) (skbio `alr_inv`). `values` is rows × (D − 1); result
/// rows × D with visibility over the result; the reference column must be visible.
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> alr_inv(const Eigen::MatrixBase<Derived>& values, Index reference = 0,
                                             const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  detail::require_floating<Scalar>("alr_inv");
  const RowMatrixView<Scalar> view(values.derived());
  attnscope::detail::require_nonempty("alr_inv", view);
  attnscope::detail::require_finite("alr_inv", view);
  const Index rows = view.rows(), cols = view.cols() + 1;
  if (reference < 0 || reference >= cols)
    attnscope::detail::throw_invalid_argument("alr_inv", "reference part ", reference, " out of range for ", cols,
                                              " parts");
  visibility.validate("alr_inv", rows, cols);
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(rows, cols);
  for (Index i = 0; i < rows; ++i) {
    if (!visibility.visible(i, reference, cols))
      attnscope::detail::throw_invalid_argument("alr_inv", "reference part ", reference, " is masked in row ", i);
    std::vector<Scalar> logs;
    std::vector<Index> columns;
    Index in_column = 0;
    for (Index j = 0; j < cols; ++j) {
      if (!visibility.visible(i, j, cols)) continue;
      logs.push_back(j == reference ? Scalar(0) : view(i, in_column++));
      columns.push_back(j);
    }
    std::vector<Scalar> parts(logs.size());
    detail::closed_exp_row(logs.data(), static_cast<Index>(logs.size()), parts.data());
    detail::scatter(parts.data(), static_cast<Index>(parts.size()), columns.data(), out.data() + i * cols);
  }
  return out;
}

/// Perturbation x ⊕ y = C(x ∘ y) row-wise (Aitchison 1986; skbio `perturb`). Parts > 0.
template <class DerivedX, class DerivedY>
RowMatrix<detail::ScalarOf<DerivedX>> perturb(const Eigen::MatrixBase<DerivedX>& x,
                                              const Eigen::MatrixBase<DerivedY>& y, const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<DerivedX>;
  const RowMatrixView<Scalar> vx(x.derived()), vy(y.derived());
  detail::validate_positive_pair<Scalar>("perturb", vx, vy, visibility);
  const RowMatrix<Scalar> product = vx.cwiseProduct(vy);
  return closure(product, visibility);
}

/// Inverse perturbation x ⊖ y = C(x / y) row-wise (skbio `perturb_inv`). Parts > 0.
template <class DerivedX, class DerivedY>
RowMatrix<detail::ScalarOf<DerivedX>> perturb_inv(const Eigen::MatrixBase<DerivedX>& x,
                                                  const Eigen::MatrixBase<DerivedY>& y,
                                                  const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<DerivedX>;
  const RowMatrixView<Scalar> vx(x.derived()), vy(y.derived());
  detail::validate_positive_pair<Scalar>("perturb_inv", vx, vy, visibility);
  RowMatrix<Scalar> quotient = RowMatrix<Scalar>::Ones(vx.rows(), vx.cols());
  for (Index i = 0; i < vx.rows(); ++i)
    for (Index j = 0; j < vx.cols(); ++j)
      if (visibility.visible(i, j, vx.cols())) quotient(i, j) = vx(i, j) / vy(i, j);
  return closure(quotient, visibility);
}

/// Powering α ⊙ x = C(x^α) row-wise (skbio `power`); softmax(z/τ) = (1/τ) ⊙ softmax(z) (§3). Parts > 0, α finite.
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> power(const Eigen::MatrixBase<Derived>& x, detail::ScalarOf<Derived> alpha,
                                           const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  if (!std::isfinite(static_cast<double>(alpha)))
    attnscope::detail::throw_invalid_argument("power", "alpha must be finite, got ", alpha);
  const RowMatrixView<Scalar> view(x.derived());
  detail::validate_parts<Scalar>("power", view, visibility, detail::PartRule::positive);
  return detail::map_parts<Scalar>(view, visibility, [alpha](const Scalar* values, Index n, Scalar* out) {
    std::vector<Scalar> logs(static_cast<std::size_t>(n));
    for (Index k = 0; k < n; ++k) logs[static_cast<std::size_t>(k)] = alpha * std::log(values[k]);
    detail::closed_exp_row(logs.data(), n, out);  // computed in logs: no overflow for large α
  });
}

/// Aitchison inner product per row ⟨x, y⟩_a = ⟨clr x, clr y⟩ (skbio `inner`, row-wise pairs). Parts > 0.
template <class DerivedX, class DerivedY>
Vector<detail::ScalarOf<DerivedX>> inner(const Eigen::MatrixBase<DerivedX>& x, const Eigen::MatrixBase<DerivedY>& y,
                                         const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<DerivedX>;
  const RowMatrixView<Scalar> vx(x.derived()), vy(y.derived());
  detail::validate_positive_pair<Scalar>("inner", vx, vy, visibility);
  return detail::reduce_clr_pair<Scalar>(clr(vx, visibility), clr(vy, visibility), visibility,
                                         [](Scalar a, Scalar b) { return a * b; });
}

/// Aitchison distance per row d_A(x, y) = ‖clr x − clr y‖ (§3; robCompositions `aDist`). Parts > 0.
template <class DerivedX, class DerivedY>
Vector<detail::ScalarOf<DerivedX>> aitchison_distance(const Eigen::MatrixBase<DerivedX>& x,
                                                      const Eigen::MatrixBase<DerivedY>& y,
                                                      const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<DerivedX>;
  const RowMatrixView<Scalar> vx(x.derived()), vy(y.derived());
  detail::validate_positive_pair<Scalar>("aitchison_distance", vx, vy, visibility);
  return detail::reduce_clr_pair<Scalar>(clr(vx, visibility), clr(vy, visibility), visibility,
                                         [](Scalar a, Scalar b) { return (a - b) * (a - b); })
      .cwiseSqrt();
}

/// Aitchison distance of softmax(z) and softmax(z′) from logits: ‖centre(z) − centre(z′)‖ (§3), exact without
/// zero handling.
template <class DerivedX, class DerivedY>
Vector<detail::ScalarOf<DerivedX>> aitchison_distance_from_logits(const Eigen::MatrixBase<DerivedX>& logits_x,
                                                                  const Eigen::MatrixBase<DerivedY>& logits_y,
                                                                  const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<DerivedX>;
  attnscope::detail::require_same_shape("aitchison_distance_from_logits", "logits", logits_x, logits_y);
  return detail::reduce_clr_pair<Scalar>(clr_from_logits(logits_x, visibility), clr_from_logits(logits_y, visibility),
                                         visibility, [](Scalar a, Scalar b) { return (a - b) * (a - b); })
      .cwiseSqrt();
}

/// Multiplicative zero replacement (skbio `multi_replace`; Martín-Fernández et al. 2003): close the row, set zeros
/// to δ and non-zero parts to (1 − z·δ)·x_j (z = number of zeros). δ ≤ 0 selects the default δ = 1/D² with D the
/// row's visible part count. Throws when 1 − z·δ ≤ 0 (skbio raises for < 0; = 0 would zero every non-zero part).
template <class Derived>
RowMatrix<detail::ScalarOf<Derived>> multiplicative_replacement(const Eigen::MatrixBase<Derived>& x,
                                                                detail::ScalarOf<Derived> delta = 0,
                                                                const Visibility& visibility = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  if (!std::isfinite(static_cast<double>(delta)) || delta >= 1)
    attnscope::detail::throw_invalid_argument("multiplicative_replacement", "delta must be finite and < 1, got ",
                                              delta);
  const RowMatrix<Scalar> closed = closure(x, visibility);
  const RowMatrixView<Scalar> view(closed);
  auto row_delta = [delta](Index n) {
    return delta > 0 ? delta : Scalar(1) / (static_cast<Scalar>(n) * static_cast<Scalar>(n));
  };
  for (Index i = 0; i < view.rows(); ++i) {  // checked before the (possibly parallel) row loop, which must not throw
    Index zeros = 0;
    for (Index j = 0; j < view.cols(); ++j) zeros += visibility.visible(i, j, view.cols()) && view(i, j) == 0;
    const Scalar used = row_delta(visibility.visible_count(i, view.cols()));
    if (!(Scalar(1) - static_cast<Scalar>(zeros) * used > 0))
      attnscope::detail::throw_invalid_argument("multiplicative_replacement", "delta ", used, " times ", zeros,
                                                " zeros in row ", i,
                                                " leaves no mass for the non-zero parts; use a smaller delta");
  }
  return detail::map_parts<Scalar>(view, visibility, [row_delta](const Scalar* values, Index n, Scalar* out) {
    const Scalar used = row_delta(n);
    Index zeros = 0;
    for (Index k = 0; k < n; ++k) zeros += values[k] == 0;
    const Scalar keep = Scalar(1) - static_cast<Scalar>(zeros) * used;
    for (Index k = 0; k < n; ++k) out[k] = values[k] == 0 ? used : keep * values[k];
  });
}

}  // namespace attnscope::composition
