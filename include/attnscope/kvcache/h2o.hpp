// attnscope/kvcache/h2o.hpp — H2O, the heavy-hitter oracle (Zhang et al. 2023, "H2O: Heavy-Hitter Oracle for Efficient
// Generative Inference of Large Language Models", §4, Algorithm 1): keep the `recent` latest keys and the `heavy`
// keys with the largest accumulated attention, evicting one key per step once the cache is full.
//
// Reference behaviour, incremental over queries i = 0, 1, …: C_i = E_{i−1} ∪ {i}, E_{−1} = ∅. After query i attends,
// each cached key j ∈ C_i adds a′_ij (the head's weights renormalised on C_i), summed over the query heads of the KV
// group, to its accumulated score. If |C_i| > heavy + recent, E_i = C_i minus the key with the smallest accumulated
// score among the keys outside the recent window {i − recent < j ≤ i} (on equal scores the earliest key); else
// E_i = C_i. An evicted key never returns.
#pragma once

#include <string>
#include <vector>

#include "attnscope/core/types.hpp"
#include "attnscope/kvcache/policy_spec.hpp"
#include "attnscope/kvcache/query_rows.hpp"

namespace attnscope::kvcache {

/// H2O with `heavy` heavy hitters and `recent` recent keys. Spec `h2o:heavy=H,recent=R` (H, R ≥ 0, H + R ≥ 1).
struct H2O {
  Index heavy = 32;
  Index recent = 32;

  static constexpr const char* name = "h2o";
  static constexpr CacheScope scope = CacheScope::kv_head;

  static H2O from_spec(const PolicySpec& spec) {
    spec.require_fields({"heavy", "recent"});
    H2O policy{spec.integer("heavy", 0), spec.integer("recent", 0)};
    if (policy.heavy + policy.recent < 1) spec.fail("heavy + recent must be >= 1 (a cache of no key)");
    return policy;
  }
  std::string spec() const {
    return std::string(name) + ":heavy=" + std::to_string(heavy) + ",recent=" + std::to_string(recent);
  }
  void validate(const SequenceInfo&) const {}

  /// One cache of this policy (defined below).
  class State;
};

/// The cache of one KV head: the kept keys (ascending) and every key's accumulated score.
class H2O::State {
 public:
  State(const H2O& policy, const SequenceInfo& sequence)
      : policy_(policy), score_(static_cast<std::size_t>(sequence.length), 0.0) {}

  void cache(const QueryRows& rows, std::vector<Index>& keys) const {
    keys = cached_;
    keys.push_back(rows.query);
  }

  void attended(const QueryRows& rows, const std::vector<Index>& keys) {
    for (const Index j : keys) {
      double added = 0;
      for (Index h = 0; h < rows.heads(); ++h) added += rows.renormalised(h, j);
      score_[static_cast<std::size_t>(j)] += added;
    }
    cached_ = keys;
    if (static_cast<Index>(cached_.size()) <= policy_.heavy + policy_.recent) return;
    // the smallest score outside the recent window (keys ascending: strict < keeps the earliest of equal scores)
    const Index last_old = rows.query - policy_.recent;  // keys j ≤ last_old are outside {i − r < j ≤ i}
    std::size_t evict = cached_.size();
    for (std::size_t t = 0; t < cached_.size() && cached_[t] <= last_old; ++t)
      if (evict == cached_.size() ||
          score_[static_cast<std::size_t>(cached_[t])] < score_[static_cast<std::size_t>(cached_[evict])])
        evict = t;
    cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(evict));
  }

 private:
  H2O policy_;
  std::vector<Index> cached_;
  std::vector<double> score_;
};

}  // namespace attnscope::kvcache
