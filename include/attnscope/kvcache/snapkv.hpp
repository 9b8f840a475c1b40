// attnscope/kvcache/snapkv.hpp — SnapKV (Li et al. 2024, "SnapKV: LLM Knows What You are Looking for Before
// Generation", §4.2, Listing 1): one compression at the end of the prefill. The last `window` prefill queries vote for
// the earlier keys with their attention, the votes are smoothed by an average pool of width `kernel`, and the
// `budget − window` best earlier keys are kept with the window itself; every later key is kept.
//
// Reference behaviour with the prefill length P (required): score_j = Σ_{i=P−w}^{P−1} Σ_{h in the KV group} a_hij
// for j < P − w (summed query by query, heads inside), pooled_j = (Σ_{t=j−⌊k/2⌋}^{j+⌊k/2⌋} score_t) / k with
// score_t = 0 outside [0, P − w) (avg_pool1d with padding k//2, the padded zeros counted); keep the budget − w keys of
// largest pooled score (on equal scores the later key) plus the window P − w … P − 1. Queries i < P see every key;
// queries i ≥ P see the kept keys and P … i.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kvcache/policy_spec.hpp"
#include "attnscope/kvcache/query_rows.hpp"

namespace attnscope::kvcache {

/// SnapKV with an observation window of `window` queries, a pool of width `kernel` (odd) and `budget` keys kept at
/// the end of the prefill. Spec `snapkv:window=W,kernel=K,budget=B` (W ≥ 1, K ≥ 1 odd, B ≥ W).
struct SnapKV {
  Index window = 32;
  Index kernel = 7;
  Index budget = 64;

  static constexpr const char* name = "snapkv";
  static constexpr CacheScope scope = CacheScope::kv_head;

  static SnapKV from_spec(const PolicySpec& spec) {
    spec.require_fields({"window", "kernel", "budget"});
    SnapKV policy{spec.integer("window", 1), spec.integer("kernel", 1), spec.integer("budget", 1)};
    if (policy.kernel % 2 == 0)
      spec.fail("field 'kernel' must be odd (a centred average pool), got ", policy.kernel);
    if (policy.budget < policy.window)
      spec.fail("field 'budget' (", policy.budget, ") must be >= field 'window' (", policy.window, ")");
    return policy;
  }
  std::string spec() const {
    return std::string(name) + ":window=" + std::to_string(window) + ",kernel=" + std::to_string(kernel) +
           ",budget=" + std::to_string(budget);
  }
  /// Needs the prefill length P, with window ≤ P ≤ L.
  void validate(const SequenceInfo& sequence) const {
    if (sequence.prefill <= 0)
      attnscope::detail::throw_invalid_argument("kvcache::SnapKV", spec(), " needs the prefill length (--prefill P)");
    if (sequence.prefill > sequence.length)
      attnscope::detail::throw_invalid_argument("kvcache::SnapKV", spec(), ": prefill ", sequence.prefill,
                                                " is longer than the sequence (", sequence.length, " tokens)");
    if (window > sequence.prefill)
      attnscope::detail::throw_invalid_argument("kvcache::SnapKV", spec(), ": window ", window,
                                                " is longer than the prefill (", sequence.prefill, ")");
  }

  /// One cache of this policy (defined below).
  class State;
};

/// The cache of one KV head: the votes of the window, then the kept keys of the prefill (ascending).
class SnapKV::State {
 public:
  State(const SnapKV& policy, const SequenceInfo& sequence)
      : policy_(policy),
        prefill_(sequence.prefill),
        score_(static_cast<std::size_t>(std::max<Index>(0, sequence.prefill - policy.window)), 0.0) {}

  void cache(const QueryRows& rows, std::vector<Index>& keys) const {
    const Index i = rows.query;
    keys.clear();
    if (i < prefill_) {
      for (Index j = 0; j <= i; ++j) keys.push_back(j);
      return;
    }
    keys = kept_;
    for (Index j = prefill_; j <= i; ++j) keys.push_back(j);
  }

  void attended(const QueryRows& rows, const std::vector<Index>&) {
    const Index i = rows.query, voters_from = prefill_ - policy_.window;
    if (i < voters_from || i >= prefill_) return;
    for (Index j = 0; j < voters_from; ++j) {
      double vote = 0;
      for (Index h = 0; h < rows.heads(); ++h) vote += rows.attention(h, j);
      score_[static_cast<std::size_t>(j)] += vote;
    }
    if (i == prefill_ - 1) compress();
  }

 private:
  void compress() {
    const Index prefix = prefill_ - policy_.window, radius = policy_.kernel / 2;
    const Index keep = std::min(prefix, policy_.budget - policy_.window);
    std::vector<std::pair<double, Index>> pooled(static_cast<std::size_t>(prefix));
    for (Index j = 0; j < prefix; ++j) {
      double sum = 0;
      for (Index t = std::max<Index>(0, j - radius); t <= std::min(prefix - 1, j + radius); ++t)
        sum += score_[static_cast<std::size_t>(t)];
      pooled[static_cast<std::size_t>(j)] = {sum / static_cast<double>(policy_.kernel), j};
    }
    // the keep largest (score, position) pairs: on equal scores the later key stays
    std::sort(pooled.begin(), pooled.end(), [](const auto& a, const auto& b) { return a > b; });
    for (Index t = 0; t < keep; ++t) kept_.push_back(pooled[static_cast<std::size_t>(t)].second);
    std::sort(kept_.begin(), kept_.end());
    for (Index j = prefix; j < prefill_; ++j) kept_.push_back(j);
    std::vector<double>().swap(score_);
  }

  SnapKV policy_;
  Index prefill_;
  std::vector<double> score_;
  std::vector<Index> kept_;
};

}  // namespace attnscope::kvcache
