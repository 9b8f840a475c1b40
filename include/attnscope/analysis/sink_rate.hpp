// attnscope/analysis/sink_rate.hpp — two per-head scores of attention during a text or a generation: the sink score
// α_h and the sink rate of a model (Gu et al., "When Attention Sink Emerges in Language Models: An Empirical View",
// arXiv 2410.10781), and the retrieval score of a head (Wu et al., "Retrieval Head Mechanistically Explains
// Long-Context Factuality", arXiv 2404.15574). Both take plain per-row values (the weight on key 0 of each query row;
// the most attended key of each generation step), so any pass that has them (a capture, the streaming forward's sink
// mass with sink key 0, model::GenerationResult) can use them.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::analysis {

/// The default T of sink_score: the first 64 query rows (Gu et al. 2024, §3.1).
inline constexpr Index default_sink_rate_queries = 64;

/// The sink score α_h of one head (Gu et al. 2024, §3.1: α = (1/T) Σ_{t<T} A_{t,0}, the first key's importance): the
/// mean of first_key_attention(i), the weight query row i puts on key 0, over the first min(queries, rows) rows.
/// Throws attnscope::invalid_argument for no rows, queries < 1, or a weight that is not finite or outside [0, 1]
/// (naming the row). O(min(queries, rows)).
template <class Derived>
double sink_score(const Eigen::MatrixBase<Derived>& first_key_attention, Index queries = default_sink_rate_queries) {
  const char* fn = "analysis::sink_score";
  const Index rows = first_key_attention.size();
  if (rows == 0) attnscope::detail::throw_invalid_argument(fn, "no query rows");
  if (queries < 1) attnscope::detail::throw_invalid_argument(fn, "queries must be >= 1, got ", queries);
  const Index used = std::min(queries, rows);
  double total = 0;
  for (Index i = 0; i < used; ++i) {
    const double weight = static_cast<double>(first_key_attention(i));
    if (!std::isfinite(weight) || weight < 0 || weight > 1)
      attnscope::detail::throw_invalid_argument(fn, "the weight on key 0 of row ", i, " is ", weight,
                                                ", expected a weight in [0, 1]");
    total += weight;
  }
  return total / static_cast<double>(used);
}

/// The default thresholds ε of the sink rate (Gu et al. 2024 use ε = 0.3; the others bracket it).
inline std::vector<double> default_sink_rate_thresholds() { return {0.2, 0.3, 0.4, 0.5}; }

/// The sink rate of a set of heads: for each threshold ε, the fraction of heads whose sink score α_h exceeds ε
/// (Gu et al. 2024, §3.1: Sink^ε = (1/(L·H)) Σ_{l,h} 𝟙(α_{l,h} > ε), strictly greater).
struct SinkRate {
  std::vector<double> thresholds;  ///< ε, as given
  std::vector<double> fraction;    ///< per threshold, heads with α_h > ε divided by the number of heads
  Index heads = 0;                 ///< the number of heads
};

/// The sink rate of the heads' sink scores (sink_score) for each threshold. Throws attnscope::invalid_argument for no
/// heads, no thresholds, a threshold that is not finite, or a score that is not finite or outside [0, 1] (naming the
/// head). O(heads · thresholds).
inline SinkRate sink_rate(const std::vector<double>& head_scores,
                          const std::vector<double>& thresholds = default_sink_rate_thresholds()) {
  const char* fn = "analysis::sink_rate";
  if (head_scores.empty()) attnscope::detail::throw_invalid_argument(fn, "no heads");
  if (thresholds.empty()) attnscope::detail::throw_invalid_argument(fn, "no thresholds");
  for (const double threshold : thresholds)
    if (!std::isfinite(threshold)) attnscope::detail::throw_invalid_argument(fn, "threshold ", threshold, " is not finite");
  for (std::size_t h = 0; h < head_scores.size(); ++h)
    if (!std::isfinite(head_scores[h]) || head_scores[h] < 0 || head_scores[h] > 1)
      attnscope::detail::throw_invalid_argument(fn, "sink score of head ", h, " is ", head_scores[h],
                                                ", expected a value in [0, 1]");
  SinkRate rate;
  rate.thresholds = thresholds;
  rate.heads = static_cast<Index>(head_scores.size());
  for (const double threshold : thresholds) {
    const auto above = std::count_if(head_scores.begin(), head_scores.end(),
                                     [threshold](double score) { return score > threshold; });
    rate.fraction.push_back(static_cast<double>(above) / static_cast<double>(head_scores.size()));
  }
  return rate;
}

/// The retrieval score of one head over a generation (Wu et al. 2024, §2: a head copies and pastes when the token it
/// attends most lies in the needle and equals the generated token; here each such step adds 1/(end − start)):
/// Σ_s 𝟙(start ≤ k_s < end ∧ tokens[k_s] = tokens[P + s]) / (end − start), with k_s = most_attended_key(s) the key
/// that step s's query row attends most and tokens[P + s] the token step s generates (P = prompt_length, as in
/// model::GenerationResult). The needle [start, end) is a span of prompt positions.
/// Throws attnscope::invalid_argument for a needle that is empty or not inside [0, prompt_length), tokens with fewer
/// than prompt_length + steps entries, or a key outside the positions step s's row sees ([0, P + s)), naming the step.
/// O(steps).
template <class Derived>
double retrieval_score(const Eigen::MatrixBase<Derived>& most_attended_key, const std::vector<int>& tokens,
                       Index prompt_length, Index start, Index end) {
  const char* fn = "analysis::retrieval_score";
  const Index steps = most_attended_key.size();
  if (prompt_length < 1)
    attnscope::detail::throw_invalid_argument(fn, "prompt_length must be >= 1, got ", prompt_length);
  if (start < 0 || end <= start || end > prompt_length)
    attnscope::detail::throw_invalid_argument(fn, "the needle [", start, ", ", end, ") must be a non-empty span of ",
                                              "the prompt's positions [0, ", prompt_length, ")");
  if (static_cast<Index>(tokens.size()) < prompt_length + steps)
    attnscope::detail::throw_invalid_argument(fn, "tokens has ", tokens.size(), " entries, fewer than prompt_length ",
                                              prompt_length, " + ", steps, " steps");
  double score = 0;
  const double share = 1.0 / static_cast<double>(end - start);
  for (Index s = 0; s < steps; ++s) {
    const Index key = static_cast<Index>(most_attended_key(s));
    if (key < 0 || key >= prompt_length + s)
      attnscope::detail::throw_invalid_argument(fn, "step ", s, " names key ", key, ", outside the positions [0, ",
                                                prompt_length + s, ") its query row sees");
    if (key >= start && key < end && tokens[std::size_t(key)] == tokens[std::size_t(prompt_length + s)]) score += share;
  }
  return score;
}

}  // namespace attnscope::analysis
