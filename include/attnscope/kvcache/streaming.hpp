// attnscope/kvcache/streaming.hpp — StreamingLLM (Xiao et al. 2023, "Efficient Streaming Language Models with
// Attention Sinks", §3.2): the first `sink` keys and a window of the `recent` latest keys.
//
// Reference behaviour: query i sees C_i = ({j < sink} ∪ {i − recent < j ≤ i}) ∩ {j ≤ i}; nothing is scored, so the
// set is the same for every head (one set per KV head, as a real cache would store it).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "attnscope/core/types.hpp"
#include "attnscope/kvcache/policy_spec.hpp"
#include "attnscope/kvcache/query_rows.hpp"

namespace attnscope::kvcache {

/// StreamingLLM: `sink` attention-sink keys plus the `recent` latest keys. Spec `streaming:sink=S,recent=R`
/// (S ≥ 0, R ≥ 0, S + R ≥ 1).
struct Streaming {
  Index sink = 4;
  Index recent = 60;

  static constexpr const char* name = "streaming";
  static constexpr CacheScope scope = CacheScope::kv_head;

  static Streaming from_spec(const PolicySpec& spec) {
    spec.require_fields({"sink", "recent"});
    Streaming policy{spec.integer("sink", 0), spec.integer("recent", 0)};
    if (policy.sink + policy.recent < 1) spec.fail("sink + recent must be >= 1 (a cache of no key)");
    return policy;
  }
  std::string spec() const {
    return std::string(name) + ":sink=" + std::to_string(sink) + ",recent=" + std::to_string(recent);
  }
  /// Nothing to check against the sequence.
  void validate(const SequenceInfo&) const {}

  /// One cache of this policy (defined below).
  class State;
};

/// The keep-set of one KV head: a pure function of the query position.
class Streaming::State {
 public:
  State(const Streaming& policy, const SequenceInfo&) : policy_(policy) {}
  void cache(const QueryRows& rows, std::vector<Index>& keys) const {
    keys.clear();
    const Index i = rows.query;
    const Index sinks = std::min(policy_.sink, i + 1), first_recent = std::max(sinks, i - policy_.recent + 1);
    for (Index j = 0; j < sinks; ++j) keys.push_back(j);
    for (Index j = first_recent; j <= i; ++j) keys.push_back(j);
  }
  void attended(const QueryRows&, const std::vector<Index>&) {}

 private:
  Streaming policy_;
};

}  // namespace attnscope::kvcache
