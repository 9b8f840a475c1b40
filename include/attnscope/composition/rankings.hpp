// attnscope/composition/rankings.hpp — pruning orders and how much two of them agree (docs/theory/composition.md
// §10, [derived]): head rankings by a score (highest or lowest first), seeded random rankings (the chance baseline of a pruning
// experiment), the Jaccard index of the first-k sets of two rankings with its exact expectation for two random
// rankings, and the rank correlations Kendall's τ_b and Spearman's ρ of two score vectors.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/correlation.hpp"
#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::composition {
/// Which end of a score a ranking starts from.
enum class RankOrder { highest_first, lowest_first };

/// Indices 0..n−1 ordered by `score` (highest or lowest first; equal scores keep index order). The first k
/// entries are the heads a top-k pruning by this score removes. Throws on an empty or non-finite score.
template <class Derived>
std::vector<Index> ranking_by_score(const Eigen::MatrixBase<Derived>& score,
                                    RankOrder order = RankOrder::highest_first) {
  attnscope::detail::require_nonempty("ranking_by_score", score);
  attnscope::detail::require_finite("ranking_by_score", score);
  std::vector<Index> ranking(static_cast<std::size_t>(score.size()));
  std::iota(ranking.begin(), ranking.end(), Index{0});
  const bool highest = order == RankOrder::highest_first;
  std::stable_sort(ranking.begin(), ranking.end(), [&](Index a, Index b) {
    return highest ? score(a) > score(b) : score(a) < score(b);
  });
  return ranking;
}

/// A uniformly random ranking of 0..count−1 (Fisher–Yates, Random::shuffle; deterministic for the state of
/// `random`). count ≥ 1.
inline std::vector<Index> random_ranking(Index count, Random& random) {
  if (count < 1) attnscope::detail::throw_invalid_argument("random_ranking", "need at least one item, got ", count);
  std::vector<Index> ranking(static_cast<std::size_t>(count));
  std::iota(ranking.begin(), ranking.end(), Index{0});
  random.shuffle(ranking);
  return ranking;
}

namespace detail {
/// Throws unless `ranking` is a permutation of 0..n−1.
inline void require_permutation(const char* function, const char* name, const std::vector<Index>& ranking) {
  std::vector<char> seen(ranking.size(), 0);
  for (Index item : ranking) {
    if (item < 0 || item >= static_cast<Index>(ranking.size()) || seen[static_cast<std::size_t>(item)])
      attnscope::detail::throw_invalid_argument(function, name, " is not a permutation of 0..", ranking.size() - 1,
                                                " (entry ", item, ")");
    seen[static_cast<std::size_t>(item)] = 1;
  }
}
}  // namespace detail

/// Jaccard index |A ∩ B| / |A ∪ B| of the first k entries of two rankings of the same items, 1 ≤ k ≤ n: the share
/// of heads that a top-k pruning by either ranking removes in common.
inline double top_k_jaccard(const std::vector<Index>& first, const std::vector<Index>& second, Index k) {
  constexpr const char* function = "top_k_jaccard";
  if (first.size() != second.size())
    attnscope::detail::throw_invalid_argument(function, "rankings of different lengths ", first.size(), " and ",
                                              second.size());
  detail::require_permutation(function, "first ranking", first);
  detail::require_permutation(function, "second ranking", second);
  if (k < 1 || k > static_cast<Index>(first.size()))
    attnscope::detail::throw_invalid_argument(function, "k = ", k, " outside 1..", first.size());
  std::vector<char> in_first(first.size(), 0);
  for (Index r = 0; r < k; ++r) in_first[static_cast<std::size_t>(first[static_cast<std::size_t>(r)])] = 1;
  Index common = 0;
  for (Index r = 0; r < k; ++r) common += in_first[static_cast<std::size_t>(second[static_cast<std::size_t>(r)])];
  return static_cast<double>(common) / static_cast<double>(2 * k - common);
}

/// Expected top_k_jaccard of two independent uniformly random rankings of n items [derived]: the overlap
/// I = |A ∩ B| of two random k-subsets is hypergeometric, P(I = i) = C(k, i)·C(n − k, k − i) / C(n, k), and
/// E[J] = Σ_i P(I = i)·i / (2k − i). 1 ≤ k ≤ n.
inline double expected_random_jaccard(Index n, Index k) {
  if (n < 1 || k < 1 || k > n)
    attnscope::detail::throw_invalid_argument("expected_random_jaccard", "need 1 <= k <= n, got n = ", n, ", k = ", k);
  const auto log_choose = [](double a, double b) {
    return std::lgamma(a + 1) - std::lgamma(b + 1) - std::lgamma(a - b + 1);
  };
  const double dn = static_cast<double>(n), dk = static_cast<double>(k);
  double expected = 0;
  for (Index i = std::max<Index>(0, 2 * k - n); i <= k; ++i) {
    const double di = static_cast<double>(i);
    const double probability = std::exp(log_choose(dk, di) + log_choose(dn - dk, dk - di) - log_choose(dn, dk));
    expected += probability * di / (2 * dk - di);
  }
  return expected;
}

namespace detail {
/// Checks two score vectors for a rank correlation: same length ≥ 2, finite.
template <class DerivedA, class DerivedB>
void require_paired_scores(const char* function, const Eigen::MatrixBase<DerivedA>& a,
                           const Eigen::MatrixBase<DerivedB>& b) {
  if (a.size() != b.size())
    attnscope::detail::throw_invalid_argument(function, "score vectors of different lengths ", a.size(), " and ",
                                              b.size());
  if (a.size() < 2)
    attnscope::detail::throw_invalid_argument(function, "need at least 2 paired scores, got ", a.size());
  attnscope::detail::require_finite(function, a);
  attnscope::detail::require_finite(function, b);
}

/// Ranks 1..n with ties given their average rank (the "average" method of scipy.stats.rankdata).
template <class Derived>
std::vector<double> average_ranks(const Eigen::MatrixBase<Derived>& x) {
  const auto n = static_cast<std::size_t>(x.size());
  std::vector<Index> order(n);
  std::iota(order.begin(), order.end(), Index{0});
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return x(a) < x(b); });
  std::vector<double> ranks(n);
  for (std::size_t start = 0; start < n;) {
    std::size_t end = start + 1;
    while (end < n && x(order[end]) == x(order[start])) ++end;
    const double rank = 0.5 * static_cast<double>(start + 1 + end);  // mean of start+1 .. end
    for (std::size_t r = start; r < end; ++r) ranks[static_cast<std::size_t>(order[r])] = rank;
    start = end;
  }
  return ranks;
}
}  // namespace detail

/// Kendall's τ_b of two paired score vectors (Kendall 1945; ties in either vector corrected as in
/// scipy.stats.kendalltau's default): (P − Q) / √((P + Q + T_x)(P + Q + T_y)) over the n(n−1)/2 pairs, P concordant,
/// Q discordant, T_x (T_y) tied in x only (y only). O(n²). Throws when either vector is constant (τ_b undefined).
template <class DerivedA, class DerivedB>
double kendall_tau(const Eigen::MatrixBase<DerivedA>& x, const Eigen::MatrixBase<DerivedB>& y) {
  detail::require_paired_scores("kendall_tau", x, y);
  double concordant = 0, discordant = 0, tied_x_only = 0, tied_y_only = 0;
  for (Index i = 0; i < x.size(); ++i)
    for (Index j = i + 1; j < x.size(); ++j) {
      const double dx = static_cast<double>(x(i)) - static_cast<double>(x(j));
      const double dy = static_cast<double>(y(i)) - static_cast<double>(y(j));
      if (dx == 0 && dy == 0) continue;
      if (dx == 0) tied_x_only += 1;
      else if (dy == 0) tied_y_only += 1;
      else if ((dx > 0) == (dy > 0)) concordant += 1;
      else discordant += 1;
    }
  const double denominator =
      std::sqrt((concordant + discordant + tied_x_only) * (concordant + discordant + tied_y_only));
  if (!(denominator > 0))
    attnscope::detail::throw_invalid_argument("kendall_tau", "a score vector is constant: tau undefined");
  return (concordant - discordant) / denominator;
}

/// Spearman's ρ: the Pearson correlation (detail::pearson_correlation_unchecked) of the average ranks
/// (detail::average_ranks) of two paired score vectors. Throws when either vector is constant (ρ undefined).
template <class DerivedA, class DerivedB>
double spearman_rho(const Eigen::MatrixBase<DerivedA>& x, const Eigen::MatrixBase<DerivedB>& y) {
  detail::require_paired_scores("spearman_rho", x, y);
  const std::vector<double> rx = detail::average_ranks(x), ry = detail::average_ranks(y);
  // ArrayXd spelled as a type dependent on DerivedA (instantiated only where used; compile time)
  using ArrayMap = Eigen::Map<const Eigen::Array<std::conditional_t<sizeof(DerivedA) != 0, double, void>,
                                                 Eigen::Dynamic, 1>>;
  return detail::pearson_correlation_unchecked("spearman_rho", "a score vector is constant: rho undefined",
                                               ArrayMap(rx.data(), x.size()), ArrayMap(ry.data(), y.size()));
}

}  // namespace attnscope::composition
