// attnscope/normalize/sparsemax.hpp — sparsemax, the Euclidean projection of each logit row onto the simplex
// (Martins & Astudillo, ICML 2016): p_i = [z_i − τ(z)]₊ with Σp = 1 (docs/theory/normalization-maps.md §1.1).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/tail_sum.hpp"
#include "attnscope/normalize/row_helpers.hpp"

namespace attnscope {
namespace detail {

/// Sort-based reference: sort descending, k(z) = max{k : 1 + k·z_(k) > Σ_{j≤k} z_(j)}, τ = (Σ_{j≤k} z_(j) − 1)/k
/// (Martins & Astudillo 2016 eq. for τ; deep-spin `_sparsemax_threshold_and_support`). O(n log n). Logits are
/// shifted by the row max first, as deep-spin does.
template <class Scalar>
void sparsemax_row_sort_reference(const Scalar* logits, Index n, Scalar* out) {
  const Scalar max_value = *std::max_element(logits, logits + n);
  std::vector<Scalar> sorted(static_cast<std::size_t>(n));
  for (Index j = 0; j < n; ++j) sorted[static_cast<std::size_t>(j)] = logits[j] - max_value;
  std::sort(sorted.begin(), sorted.end(), std::greater<Scalar>());
  Scalar cumulative = 0, support_sum = 0;
  Index support = 0;
  for (Index k = 1; k <= n; ++k) {
    const Scalar value = sorted[static_cast<std::size_t>(k - 1)];
    cumulative += value;
    if (1 + Scalar(k) * value > cumulative) {
      support = k;
      support_sum = cumulative;
    }
  }
  const Scalar threshold = (support_sum - 1) / Scalar(support);
  for (Index j = 0; j < n; ++j) out[j] = std::max(logits[j] - max_value - threshold, Scalar(0));
}

/// Threshold τ of the candidates values[0, count) (already shifted by the row max), by the randomized pivot
/// method of Duchi, Shalev-Shwartz, Singer & Chandra (ICML 2008), expected O(count): keep the running sum and
/// count of keys known to be in the support; a pivot v is in the support iff Σ_{z ≥ v}(z − v) < 1.
/// Partitions branch-free between `values` and `scratch` (both of size ≥ count; both are overwritten).
/// The pivot sequence comes from a fixed-seed xorshift, so results are deterministic.
template <class Scalar>
Scalar sparsemax_threshold_pivot(Scalar* values, Scalar* scratch, Index count) {
  Scalar support_sum = 0;
  Index support_count = 0;
  Scalar* range = values;
  Scalar* other = scratch;
  Index length = count;
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  while (length > 0) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const Scalar pivot = range[state % static_cast<std::uint64_t>(length)];
    // Greater values fill `other` from the front, smaller ones from the back; equal values are only counted.
    Index greater_end = 0, less_begin = length;
    Scalar greater_sum = 0;
    for (Index j = 0; j < length; ++j) {
      const Scalar value = range[j];
      other[greater_end] = value;
      other[less_begin - 1] = value;
      const bool greater = value > pivot;
      greater_sum += greater ? value : Scalar(0);
      greater_end += greater;
      less_begin -= value < pivot;
    }
    const Index equal_count = less_begin - greater_end;
    if (support_sum + greater_sum - Scalar(support_count + greater_end) * pivot < 1) {
      // The pivot is in the support, hence so is everything ≥ it; continue with the smaller values.
      support_sum += greater_sum + Scalar(equal_count) * pivot;
      support_count += greater_end + equal_count;
      range = other + less_begin;
      length = length - less_begin;
    } else {
      // The pivot (and its equals) are outside the support; continue with the greater values.
      range = other;
      length = greater_end;
    }
    other = (other == scratch) ? values : scratch;
  }
  return (support_sum - 1) / Scalar(support_count);
}

/// Sparsemax of one row, expected O(n) [derived combination of two published methods]:
/// 1. the row max (vectorized); x = z − max ≤ 0 (as deep-spin does);
/// 2. Michelot's iteration (Math. Program. 1986; Condat 2016 §2) as a candidate filter, one vectorized pass each
///    (kernels::tail_sum): for any set S, (Σ_S x − 1)/|S| ≤ τ (since Σ_S (x − τ) ≤ Σ (x − τ)₊ = 1), so starting from
///    the bound τ ≥ −1 (p_max ≤ 1), each pass over {x ≥ bound − margin} gives a larger lower bound; the margin covers
///    the rounding of the float sum, so no support key is ever dropped. Stops when the set stops shrinking or after
///    8 passes (Michelot's worst case is quadratic);
/// 3. the randomized pivot threshold (Duchi et al. 2008) on the surviving candidates (a superset of the support, in
///    practice a few times its size): exact, expected O(m);
/// 4. p = max(x − τ, 0), vectorized (kernels::shifted_positive_part).
template <class Scalar>
void sparsemax_row(const Scalar* logits, Index n, Scalar* out) {
  const Scalar max_value = kernels::row_max(logits, n).max;
  const Scalar epsilon = std::numeric_limits<Scalar>::epsilon();
  Scalar bound = -1;  // a lower bound of τ
  Index count = n + 1;
  for (int pass = 0; pass < 8; ++pass) {
    const auto tail = kernels::tail_sum(logits, n, max_value, bound);  // count ≥ 1: the max itself (x = 0)
    if (tail.count >= count) break;
    count = tail.count;
    const Scalar next = (tail.sum - 1) / Scalar(count);  // Michelot's step: a lower bound of τ
    // rounding of the sum (≤ count·eps·Σ|x| for any summation order) and of the step itself
    const Scalar margin = 4 * epsilon * ((std::abs(tail.sum) + 1) + std::abs(next));
    if (!(next - margin > bound)) break;
    bound = next - margin;
  }
  // #{x ≥ bound} ≤ count (the bound only grew since count was taken), so writing every value at the current end of
  // the candidates stays inside the first count + 1 ≤ 2·count slots; the second half is the pivot's scratch
  std::vector<Scalar> buffer(static_cast<std::size_t>(2 * std::min(count, n)));
  Scalar* candidates = buffer.data();
  Index candidate_count = 0;
  for (Index j = 0; j < n; ++j) {  // branch-free compaction of the candidates x ≥ bound
    const Scalar value = logits[j] - max_value;
    candidates[candidate_count] = value;
    candidate_count += value >= bound;
  }
  const Scalar threshold = sparsemax_threshold_pivot(candidates, candidates + candidate_count, candidate_count);
  kernels::shifted_positive_part(logits, n, max_value, threshold, out);
}

/// Sparsemax Jacobian on one row: J = diag(s) − s sᵀ/|S|, s = indicator of the support (Martins & Astudillo 2016;
/// deep-spin SparsemaxFunction.backward).
template <class Scalar>
RowLinearization<Scalar> linearize_sparsemax(const Scalar* logits, Index n) {
  return linearize_with<Scalar>(
      n, [&](Scalar* out) { sparsemax_row(logits, n, out); },
      [](const std::vector<Scalar>& p) {
        std::vector<Scalar> support(p.size());
        Scalar support_size = 0;
        for (std::size_t i = 0; i < support.size(); ++i) {
          support[i] = p[i] > 0 ? Scalar(1) : Scalar(0);
          support_size += support[i];
        }
        return scaled_diagonal_minus_rank_one(support, Scalar(1) / support_size, Scalar(1));
      });
}

}  // namespace detail

/// Sparsemax of each row over its visible keys: the exact Euclidean projection onto the probability simplex,
/// p_i = [z_i − τ]₊ (Martins & Astudillo, ICML 2016). Expected O(n) per row (candidate filter + randomized pivot),
/// masked entries exactly 0. Throws attnscope::invalid_argument on empty/non-finite input, mask shape mismatch or
/// fully masked rows.
template <class Derived>
RowMatrix<typename Derived::Scalar> sparsemax(const Eigen::MatrixBase<Derived>& logits,
                                              const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  return detail::map_rows("sparsemax", logits, visibility,
                          [](const Scalar* z, Index n, Scalar* p) { detail::sparsemax_row(z, n, p); });
}

}  // namespace attnscope
