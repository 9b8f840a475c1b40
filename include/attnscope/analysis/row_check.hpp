// attnscope/analysis/row_check.hpp — the input check of the per-head report: every attention row it analyses must be
// a probability distribution (finite, non-negative, summing to 1 within a tolerance that grows with the row length
// and the precision the weights were stored in), and the number of keys each query row sees.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"

namespace attnscope::analysis {

/// Unit roundoff u of the precision attention weights were stored in: float64 2^-53, float32 2^-24, float16 2^-11,
/// bfloat16 2^-8 (IEEE 754 binary64/32/16 and bfloat16 round to nearest: relative error ≤ u).
namespace unit_roundoff {
inline constexpr double float64 = 1.1102230246251565e-16;  // 2^-53
inline constexpr double float32 = 5.9604644775390625e-08;  // 2^-24
inline constexpr double float16 = 4.8828125e-04;           // 2^-11
inline constexpr double bfloat16 = 3.90625e-03;            // 2^-8
}  // namespace unit_roundoff

/// Tolerance on |Σ_j A(i, j) − 1| for a row of `keys` weights stored with unit roundoff `storage_roundoff`:
/// 2u + keys·2^-24 + 1e-12. [derived] Rounding each stored weight p_j to p_j(1 + δ_j), |δ_j| ≤ u, moves the sum by
/// |Σ_j δ_j p_j| ≤ u (the weights sum to 1), doubled for the framework's own rounding of the normalisation;
/// the sum of L terms accumulated in float32 (how PyTorch/NumPy compute softmax rows) adds at most L·2^-24
/// (Higham, Accuracy and Stability of Numerical Algorithms, eq. 4.4, first order); 1e-12 absorbs float64 sums.
/// float32 at L = 4096: 4.9e-4; float16: 1.2e-3; bfloat16: 8.1e-3. A row summing to 2 or to 0.9 always fails.
inline double attention_row_sum_tolerance(Index keys, double storage_roundoff) {
  return 2 * storage_roundoff + static_cast<double>(keys) * unit_roundoff::float32 + 1e-12;
}

/// What is wrong with a row (RowProblem::none: nothing).
enum class RowProblem { none, non_finite, negative, sum };

/// The first problem of a row: the row, the column and value of the offending entry (non_finite, negative), or
/// column −1 and the row sum (sum).
struct RowViolation {
  RowProblem problem = RowProblem::none;
  Index row = -1, column = -1;
  double value = 0;
  double tolerance = 0;  // the sum tolerance used (sum problems)
};

/// Result of check_attention_rows: how many rows fail and the first failure.
struct AttentionRowCheck {
  Index rows = 0, bad_rows = 0;
  RowViolation first;
  bool ok() const { return bad_rows == 0; }
};

/// "row 3: entry (3, 5) = nan is not finite", "row 0: weights sum to 2 (|sum - 1| > tolerance 1.2e-06)", …
inline std::string describe_row_violation(const RowViolation& violation) {
  std::ostringstream text;
  text.precision(6);
  text << "row " << violation.row << ": ";
  switch (violation.problem) {
    case RowProblem::none: text << "no problem"; break;
    case RowProblem::non_finite:
      text << "weight at key " << violation.column << " is " << violation.value << " (not finite)";
      break;
    case RowProblem::negative:
      text << "weight at key " << violation.column << " is " << violation.value << " (negative)";
      break;
    case RowProblem::sum:
      text << "weights sum to " << violation.value << " (|sum - 1| > tolerance " << violation.tolerance << ")";
      break;
  }
  return text.str();
}

/// Checks every row of `attention` (L_q × L_k, row = query): each entry finite and ≥ 0, and — when
/// `rows_are_distributions` — the row sum within attention_row_sum_tolerance(L_k, storage_roundoff) of 1. With
/// `rows_are_distributions` false (sink softmax, SA-softmax: rows legitimately sum to less than 1 or hold signed
/// weights) only finiteness is checked. Counts the failing rows and keeps the first failure. O(L_q·L_k).
template <class Derived>
AttentionRowCheck check_attention_rows(const Eigen::MatrixBase<Derived>& attention, double storage_roundoff,
                                       bool rows_are_distributions = true) {
  AttentionRowCheck check;
  check.rows = attention.rows();
  const double tolerance = attention_row_sum_tolerance(attention.cols(), storage_roundoff);
  for (Index i = 0; i < attention.rows(); ++i) {
    RowViolation violation;
    double sum = 0;
    for (Index j = 0; j < attention.cols() && violation.problem == RowProblem::none; ++j) {
      const double value = static_cast<double>(attention(i, j));
      if (!std::isfinite(value)) violation = {RowProblem::non_finite, i, j, value, 0};
      else if (rows_are_distributions && value < 0) violation = {RowProblem::negative, i, j, value, 0};
      sum += value;
    }
    if (violation.problem == RowProblem::none && rows_are_distributions && !(std::abs(sum - 1) <= tolerance))
      violation = {RowProblem::sum, i, -1, sum, tolerance};
    if (violation.problem == RowProblem::none) continue;
    if (check.bad_rows++ == 0) check.first = violation;
  }
  return check;
}

/// Keys each query row sees: the count of finite scores when `scores` is given (same shape, masked entries −inf);
/// otherwise, for square lower-triangular attention (a causal capture: entries above the diagonal exactly 0), i + 1
/// for row i; otherwise every key. O(L_q·L_k).
template <class DerivedAttention>
Eigen::Matrix<Index, Eigen::Dynamic, 1> visible_key_counts(const Eigen::MatrixBase<DerivedAttention>& attention,
                                                           const RowMatrix<double>& scores = {}) {
  const Index rows = attention.rows(), cols = attention.cols();
  Eigen::Matrix<Index, Eigen::Dynamic, 1> counts = Eigen::Matrix<Index, Eigen::Dynamic, 1>::Constant(rows, cols);
  if (scores.rows() == rows && scores.cols() == cols && rows > 0) {
    for (Index i = 0; i < rows; ++i) {
      Index visible = 0;
      for (Index j = 0; j < cols; ++j) visible += std::isfinite(scores(i, j)) ? 1 : 0;
      counts(i) = visible;
    }
    return counts;
  }
  if (rows != cols || rows < 2) return counts;
  for (Index i = 0; i < rows; ++i)
    for (Index j = i + 1; j < cols; ++j)
      if (attention(i, j) != 0) return counts;
  for (Index i = 0; i < rows; ++i) counts(i) = i + 1;
  return counts;
}

}  // namespace attnscope::analysis
