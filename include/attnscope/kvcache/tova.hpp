// attnscope/kvcache/tova.hpp — TOVA, token omission via attention (Oren et al. 2024, "Transformers are Multi-State
// RNNs", §4): a fixed budget of keys per layer; when it overflows, drop the key the current query attends to least,
// averaged over the layer's heads.
//
// Reference behaviour, incremental over queries i = 0, 1, … with one set per layer: C_i = E_{i−1} ∪ {i},
// E_{−1} = ∅. The score of key j at step i is the mean over the layer's query heads of a′_ij (each head's weights
// renormalised on C_i). If |C_i| > budget, E_i = C_i minus the key with the lowest score (on equal scores the
// earliest key; the new key i may be the one dropped); else E_i = C_i. An evicted key never returns.
#pragma once

#include <string>
#include <vector>

#include "attnscope/core/types.hpp"
#include "attnscope/kvcache/policy_spec.hpp"
#include "attnscope/kvcache/query_rows.hpp"

namespace attnscope::kvcache {

/// TOVA with `budget` keys per layer. Spec `tova:budget=B` (B ≥ 1).
struct Tova {
  Index budget = 64;

  static constexpr const char* name = "tova";
  static constexpr CacheScope scope = CacheScope::layer;

  static Tova from_spec(const PolicySpec& spec) {
    spec.require_fields({"budget"});
    return Tova{spec.integer("budget", 1)};
  }
  std::string spec() const { return std::string(name) + ":budget=" + std::to_string(budget); }
  void validate(const SequenceInfo&) const {}

  /// One cache of this policy (defined below).
  class State;
};

/// The cache of one layer: the kept keys, ascending.
class Tova::State {
 public:
  State(const Tova& policy, const SequenceInfo&) : policy_(policy) {}

  void cache(const QueryRows& rows, std::vector<Index>& keys) const {
    keys = cached_;
    keys.push_back(rows.query);
  }

  void attended(const QueryRows& rows, const std::vector<Index>& keys) {
    cached_ = keys;
    if (static_cast<Index>(cached_.size()) <= policy_.budget) return;
    // the mean over heads of a′_ij; keys ascending, strict < keeps the earliest of equal scores
    std::size_t evict = 0;
    double lowest = 0;
    for (std::size_t t = 0; t < cached_.size(); ++t) {
      double score = 0;
      for (Index h = 0; h < rows.heads(); ++h) score += rows.renormalised(h, cached_[t]);
      score /= static_cast<double>(rows.heads());
      if (t == 0 || score < lowest) {
        lowest = score;
        evict = t;
      }
    }
    cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(evict));
  }

 private:
  Tova policy_;
  std::vector<Index> cached_;
};

}  // namespace attnscope::kvcache
