// attnscope/kvcache/query_rows.hpp — what a cache policy sees at one query: the attention rows of the query heads that
// share its cache, and the settings of the simulated sequence (length, end of prefill).
#pragma once

#include <vector>

#include "attnscope/core/types.hpp"

namespace attnscope::kvcache {

/// Which query heads share one cache (one keep-set).
enum class CacheScope {
  query_head,  ///< one set per query head (the oracle: a bound, not a cache a GQA model could store)
  kv_head,     ///< one set per key/value head, scores summed over the query heads of its group
  layer,       ///< one set for the whole layer (TOVA)
};

/// The simulated sequence: its length L and the end of the prefill P (0: none given).
struct SequenceInfo {
  Index length = 0;
  Index prefill = 0;
};

/// The attention of query `query` for the query heads of one cache. weights[h][j] for j < keys (= query + 1) are the
/// model's softmax weights of head h (float, as the attention kernel computed them; keys past the query and outside
/// the model's window are exactly 0); a_hj = weights[h][j] / total[h] is the row renormalised in double to sum to 1.
/// kept[h] = Σ_{j∈C} weights[h][j] over the cache C the policy chose for this query, so that the renormalised row on C
/// is a′_hj = weights[h][j] / kept[h] (0 when kept[h] = 0).
struct QueryRows {
  Index query = 0;
  Index keys = 0;
  std::vector<const float*> weights;
  std::vector<double> total;
  std::vector<double> kept;

  Index heads() const { return static_cast<Index>(weights.size()); }
  /// a_hj: the model's attention of head h (slot in this cache) on key j.
  double attention(Index h, Index j) const {
    return static_cast<double>(weights[static_cast<std::size_t>(h)][j]) / total[static_cast<std::size_t>(h)];
  }
  /// a′_hj = a_hj / m_h on the cache (0 when the cache holds no mass).
  double renormalised(Index h, Index j) const {
    const double mass = kept[static_cast<std::size_t>(h)];
    return mass > 0 ? static_cast<double>(weights[static_cast<std::size_t>(h)][j]) / mass : 0.0;
  }
};

}  // namespace attnscope::kvcache
