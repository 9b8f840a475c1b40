// attnscope/kvcache/oracle.hpp — the oracle with B keys: each query head keeps, for each query, the B keys it attends
// to most. No cache that decides before the query arrives can lose less mass with B keys, so its lost mass is the
// lower bound for every B-key policy [derived].
//
// Reference behaviour: query i of head h sees C_i = the B keys j ≤ i with the largest a_ij (all keys when i < B); on
// equal weights the later key is kept (the earliest is evicted first). One set per query head, not per KV group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnscope/core/types.hpp"
#include "attnscope/kvcache/detail/largest_keys.hpp"
#include "attnscope/kvcache/policy_spec.hpp"
#include "attnscope/kvcache/query_rows.hpp"

namespace attnscope::kvcache {

/// The oracle: per query and query head, the `budget` keys of largest attention. Spec `oracle:budget=B` (B ≥ 1).
struct Oracle {
  Index budget = 64;

  static constexpr const char* name = "oracle";
  static constexpr CacheScope scope = CacheScope::query_head;

  static Oracle from_spec(const PolicySpec& spec) {
    spec.require_fields({"budget"});
    return Oracle{spec.integer("budget", 1)};
  }
  std::string spec() const { return std::string(name) + ":budget=" + std::to_string(budget); }
  void validate(const SequenceInfo&) const {}

  /// One cache of this policy (defined below).
  class State;
};

/// The selection of one query head (its rows hold that one head).
class Oracle::State {
 public:
  State(const Oracle& policy, const SequenceInfo&) : policy_(policy) {}
  void cache(const QueryRows& rows, std::vector<Index>& keys) {
    keys.clear();
    if (policy_.budget >= rows.keys) {
      for (Index j = 0; j < rows.keys; ++j) keys.push_back(j);
      return;
    }
    detail::largest_ranks(rows.weights[0], rows.keys, policy_.budget, ranks_, sample_);
    for (Index t = 0; t < policy_.budget; ++t) keys.push_back(detail::rank_key(ranks_[static_cast<std::size_t>(t)]));
  }
  void attended(const QueryRows&, const std::vector<Index>&) {}

 private:
  Oracle policy_;
  std::vector<std::uint64_t> ranks_;
  std::vector<float> sample_;
};

}  // namespace attnscope::kvcache
