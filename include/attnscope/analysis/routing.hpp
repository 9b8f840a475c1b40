// attnscope/analysis/routing.hpp — what a Mixture-of-Experts layer's router did over a text: the load (tokens sent to
// each expert) and the mean entropy of the router's distribution over all experts, from the router logits and choices
// that model::CaptureOptions::routing records (model::Routing).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::analysis {

/// The routing of one sparse layer over L tokens.
struct RoutingSummary {
  std::vector<Index> load;      ///< tokens per expert: how many tokens chose expert e among their k
  double mean_entropy = 0;      ///< mean over tokens of −Σ_e w_e ln w_e, w = softmax(router logits) over all E experts
  double max_entropy = 0;       ///< ln E, the entropy of a router that cannot tell the experts apart
};

/// The load and the mean routing entropy of a layer from its router logits (L × E) and choices (L × k expert indices).
/// The entropy is of the softmax over all experts (in double), whatever routing kind chose the k: it measures how
/// decided the router is [derived]. Throws attnscope::invalid_argument for no tokens or experts, row counts that
/// differ, a non-finite logit, or a choice outside [0, E), naming the token.
template <class Logits, class Choices>
RoutingSummary summarize_routing(const Eigen::MatrixBase<Logits>& router_logits,
                                 const Eigen::MatrixBase<Choices>& experts) {
  const char* fn = "analysis::summarize_routing";
  const Index tokens = router_logits.rows(), count = router_logits.cols();
  if (tokens == 0 || count == 0)
    attnscope::detail::throw_invalid_argument(fn, "router logits are ", tokens, "x", count, ", expected non-empty");
  if (experts.rows() != tokens)
    attnscope::detail::throw_invalid_argument(fn, "choices have ", experts.rows(), " rows for ", tokens, " tokens");
  RoutingSummary summary;
  summary.load.assign(static_cast<std::size_t>(count), 0);
  summary.max_entropy = std::log(static_cast<double>(count));
  double total = 0;
  for (Index t = 0; t < tokens; ++t) {
    double top = -HUGE_VAL;
    for (Index e = 0; e < count; ++e) {
      const double r = static_cast<double>(router_logits(t, e));
      if (!std::isfinite(r))
        attnscope::detail::throw_invalid_argument(fn, "router logit ", r, " at token ", t, ", expert ", e);
      top = std::max(top, r);
    }
    double sum = 0, spread = 0;  // Σ e^{r−m} and Σ e^{r−m}(m − r): H = ln S + spread / S [derived]
    for (Index e = 0; e < count; ++e) {
      const double shifted = static_cast<double>(router_logits(t, e)) - top;
      sum += std::exp(shifted);
      spread -= std::exp(shifted) * shifted;
    }
    total += std::log(sum) + spread / sum;
    for (Index j = 0; j < experts.cols(); ++j) {
      const auto e = static_cast<Index>(experts(t, j));
      if (e < 0 || e >= count)
        attnscope::detail::throw_invalid_argument(fn, "token ", t, " chose expert ", e, ", outside [0, ", count, ")");
      ++summary.load[static_cast<std::size_t>(e)];
    }
  }
  summary.mean_entropy = total / static_cast<double>(tokens);
  return summary;
}

}  // namespace attnscope::analysis
