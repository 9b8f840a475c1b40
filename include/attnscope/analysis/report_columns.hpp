// attnscope/analysis/report_columns.hpp — report columns contributed by the analysis modules: content entropy and the
// sink share of entropy (composition), the causal stable rank of the logit matrix (logits), N_s/N at the critical N
// and g(T = 1, ε = 1e−3) (capacity). `attnscope report` uses fast_report_columns() by default (the costly three only
// with --columns all).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attnscope/capacity/head_summary.hpp"
#include "attnscope/composition/channels.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/logits/rank.hpp"
#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/sink_rate.hpp"

namespace attnscope::analysis {

/// The sink channel of the composition columns for a head with a learned sink logit (gpt-oss), whose row is the
/// (n+1)-part composition (a_i0, ..., a_in, σ_i): `learned` = the learned sink's share σ; `keys` = the sink keys of the
/// real keys' renormalised row (σ left out, as if the model had no learned sink); `both` = σ and the sink keys (the
/// default). Heads without a learned sink always use the sink keys (and are NaN with `learned`).
enum class SinkChannel { keys, learned, both };

/// The channel's name as the CLI spells it (keys, learned, both).
inline const char* sink_channel_name(SinkChannel channel) {
  return channel == SinkChannel::keys ? "keys" : channel == SinkChannel::learned ? "learned" : "both";
}

namespace detail {

template <class Derived>
bool is_lower_triangular(const Eigen::MatrixBase<Derived>& matrix) {
  for (Index i = 0; i < matrix.rows(); ++i)
    for (Index j = i + 1; j < matrix.cols(); ++j)
      if (matrix(i, j) != 0) return false;
  return true;
}

/// Mean content entropy and Σ sink term / Σ entropy over the query rows that have content keys (rows 1..L−1 of
/// causal attention, every row otherwise), sink = `sink_keys` (docs/theory/composition.md §1-§5, entropy_split);
/// `problem` says why the values are NaN.
struct EntropyChannels {
  double content_entropy = std::numeric_limits<double>::quiet_NaN();
  double sink_share = std::numeric_limits<double>::quiet_NaN();
  std::string problem;
};

// entropy_split of rows[first_row..) (each row's visible keys given by `visibility`, relative to that block) with the
// sink parts `sinks`, reduced to the two report values.
template <class Derived>
EntropyChannels entropy_channels_of(const Eigen::MatrixBase<Derived>& rows, Index first_row,
                                    const Visibility& visibility, const std::vector<Index>& sinks) {
  EntropyChannels result;
  try {
    const auto split = composition::entropy_split(rows.bottomRows(rows.rows() - first_row), visibility,
                                                  composition::SinkSet(sinks));
    result.content_entropy = static_cast<double>(split.content_entropy.mean());
    const double total = static_cast<double>(split.entropy.sum());
    if (total > 0) result.sink_share = static_cast<double>(split.sink_term().sum()) / total;
    else result.problem = "every row has zero entropy";
  } catch (const attnscope::invalid_argument& error) {  // a row with all mass on the sink, or not a distribution
    result.problem = error.what();
  }
  return result;
}

template <class Derived>
EntropyChannels entropy_channels(const Eigen::MatrixBase<Derived>& attention, const std::vector<Index>& sink_keys = {0}) {
  EntropyChannels result;
  const bool causal = attention.rows() == attention.cols() && is_lower_triangular(attention);
  Index last_sink = 0;
  for (const Index key : sink_keys) last_sink = std::max(last_sink, key);
  if (attention.cols() <= last_sink + 1 || attention.rows() < (causal ? last_sink + 2 : 1)) {
    result.problem = "needs more keys than the sink keys";
    return result;
  }
  const Index first_row = causal ? last_sink + 1 : 0;  // causal rows up to the last sink see no content key
  return entropy_channels_of(attention, first_row, causal ? Visibility(Causal{first_row}) : Visibility(), sink_keys);
}

/// entropy_channels of a head with learned-sink shares σ (rows a_i summing to 1 − σ_i), with the sink channel chosen
/// by `channel` (SinkChannel): `keys` splits the real keys' renormalised rows a_i / (1 − σ_i) at `sink_keys`;
/// `learned` and `both` split the (n+1)-part composition [σ_i, a_i] (σ as part 0, so causal row i sees parts
/// 0..i+1) with the sink = σ, or σ and the sink keys [derived].
template <class Derived, class SinkDerived>
EntropyChannels entropy_channels(const Eigen::MatrixBase<Derived>& attention,
                                 const Eigen::MatrixBase<SinkDerived>& sink_shares, const std::vector<Index>& sink_keys,
                                 SinkChannel channel) {
  using Scalar = typename Derived::Scalar;
  EntropyChannels result;
  if (sink_shares.size() != attention.rows()) {
    result.problem = "learned_sink has " + std::to_string(sink_shares.size()) + " rows, attention " +
                     std::to_string(attention.rows());
    return result;
  }
  if (channel == SinkChannel::keys) {
    RowMatrix<Scalar> renormalised = attention;
    for (Index i = 0; i < renormalised.rows(); ++i) {
      const Scalar content = Scalar(1) - static_cast<Scalar>(sink_shares(i));
      if (!(content > 0)) {
        result.problem = "row " + std::to_string(i) + " has all its mass on the learned sink";
        return result;
      }
      renormalised.row(i) /= content;
    }
    return entropy_channels(renormalised, sink_keys);
  }
  const bool causal = attention.rows() == attention.cols() && is_lower_triangular(attention);
  RowMatrix<Scalar> parts(attention.rows(), attention.cols() + 1);  // [σ | a]
  parts.col(0) = sink_shares.template cast<Scalar>();
  parts.rightCols(attention.cols()) = attention;
  std::vector<Index> sinks{0};
  Index first_row = 0;
  if (channel == SinkChannel::both) {
    Index last_sink = -1;
    for (const Index key : sink_keys) {
      sinks.push_back(key + 1);
      last_sink = std::max(last_sink, key);
    }
    if (attention.cols() <= last_sink + 1 || (causal && attention.rows() < last_sink + 2)) {
      result.problem = "needs more keys than the sink keys";
      return result;
    }
    if (causal) first_row = last_sink + 1;  // causal rows up to the last sink key see no content key
  }
  return entropy_channels_of(parts, first_row, causal ? Visibility(Causal{first_row + 1}) : Visibility(), sinks);
}

/// entropy_channels of one head (with its learned-sink shares and the chosen channel when it has them), computed once
/// for the two composition columns: the last head's attention and shares are kept and compared by value (a copy and a
/// comparison cost far less than the split), so a stale result is never returned.
template <class Scalar>
class EntropyChannelsCache {
 public:
  EntropyChannelsCache(std::vector<Index> sink_keys, SinkChannel channel)
      : sink_keys_(std::move(sink_keys)), channel_(channel) {}
  const EntropyChannels& get(const HeadInput& head) {
    if (!(have_ && same_rows(attention_, learned_sink_, head))) {
      if (head.learned_sink.size()) {
        value_ = entropy_channels(head.attention.template cast<Scalar>(), head.learned_sink.template cast<Scalar>(),
                                  sink_keys_, channel_);
      } else if (channel_ == SinkChannel::learned) {
        value_ = EntropyChannels{};
        value_.problem = "the sink channel is the learned sink and the model has none";
      } else {
        value_ = entropy_channels(head.attention.template cast<Scalar>(), sink_keys_);
      }
      attention_ = head.attention;
      learned_sink_ = head.learned_sink;
      have_ = true;
    }
    return value_;
  }

 private:
  std::vector<Index> sink_keys_;
  SinkChannel channel_;
  RowMatrix<double> attention_;
  Vector<double> learned_sink_;
  bool have_ = false;
  EntropyChannels value_;
};

inline std::string causal_only_reason(const HeadInput& head) {
  return "causal-only column: attention is " + std::to_string(head.attention.rows()) + "x" +
         std::to_string(head.attention.cols()) + ", not square (decoding step or cross-attention)";
}

/// head_capacity() of one head in Scalar precision, computed once for the two capacity columns: the last head's
/// matrices are kept and compared by value, so a stale result is never returned. `problem()` says why get() gave
/// nullptr or why separability_at_critical is NaN.
template <class Scalar>
class CapacityCache {
 public:
  const capacity::HeadCapacity* get(const HeadInput& head) {
    if (head.scores.size() == 0 || head.values.size() == 0) {
      problem_ = "needs scores and values (no scores or v array in the input)";
      return nullptr;
    }
    if (head.attention.rows() != head.attention.cols()) {
      problem_ = causal_only_reason(head);
      return nullptr;
    }
    if (!(have_ && same_entries(attention_, head.attention) && same_entries(scores_, head.scores) &&
          same_entries(values_, head.values))) {
      attention_ = head.attention;
      scores_ = head.scores;
      values_ = head.values;
      have_ = true;
      valid_ = false;
      problem_.clear();
      try {
        value_ = capacity::head_capacity(head.attention.template cast<Scalar>(), head.scores.template cast<Scalar>(),
                                         head.values.template cast<Scalar>(), causal);
        valid_ = true;
        if (value_.critical_n < 0)
          problem_ = "no critical N: the KS test tells true from expected distances at every N of the grid 1..L/4 "
                     "(level 0.01)";
      } catch (const attnscope::invalid_argument& error) {
        problem_ = error.what();
      }
    }
    return valid_ ? &value_ : nullptr;
  }
  const std::string& problem() const { return problem_; }

 private:
  RowMatrix<double> attention_, scores_, values_;
  bool have_ = false, valid_ = false;
  capacity::HeadCapacity value_;
  std::string problem_;
};

}  // namespace detail

/// Columns of the analysis modules (NaN when the inputs are missing or do not qualify; the column's missing_reason
/// says why):
/// - `content_entropy`: mean H(c) of the content composition (sink = `sink_keys`; for a head with a learned sink, the
///   sink channel `channel`, see SinkChannel), rows with content keys;
/// - `sink_entropy_share`: Σ_i (H_b(s_i) + s_i·H_within) / Σ_i H(a_i), the sink channel's share of the entropy;
/// - `sink_score`: α = mean of A(i, 0) over the first `sink_rate_queries` rows (Gu et al. 2024; analysis::sink_score);
/// - `causal_stable_rank`: ‖S‖_F²/‖S‖₂² of the causal part of the scaled scores (needs square scores; logits module);
/// - `separability_at_critical_n`: mean N_s/N at the head's critical top-N (needs scores and values; capacity);
/// - `gradient_sensitivity`: g(T = 1, ε = 1e−3), mean finite-difference ‖Δ softmax‖/ε (needs scores and values).
/// The capacity columns assume causal attention (square). Cost per head: O(L²) + one SVD of L × L + O(|grid|·L²·d).
/// Scalar is the precision the columns compute in (the head inputs are double; float roughly halves the time at
/// float accuracy). A template, so that only programs which build these columns compile the analyses behind them.
template <class Scalar = double>
std::vector<ReportColumn> analysis_report_columns(const std::vector<Index>& sink_keys = {0},
                                                  SinkChannel channel = SinkChannel::both,
                                                  Index sink_rate_queries = default_sink_rate_queries) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // why sink_score of key 0 over the first sink_rate_queries rows is not defined ("" when it is)
  const auto sink_score_problem = [sink_rate_queries](const HeadInput& h) -> std::string {
    try {
      sink_score(h.attention.col(0), sink_rate_queries);
      return {};
    } catch (const attnscope::invalid_argument& error) {
      return error.what();
    }
  };
  auto capacity = std::make_shared<detail::CapacityCache<Scalar>>();
  auto cache = std::make_shared<detail::EntropyChannelsCache<Scalar>>(sink_keys, channel);
  auto channels = [cache](const HeadInput& h) { return cache->get(h); };
  return {
      {"content_entropy", "mean entropy of the content composition (keys other than the sink keys), nats",
       [channels](const HeadInput& h) { return channels(h).content_entropy; },
       [channels](const HeadInput& h) { return channels(h).problem; }, "content_H", true,
       {"Mean entropy of the content composition: each row without the sink key, renormalised (nats).",
        "The content part of the rows is diffuse.",
        "The content part picks few keys, even when a sink hides it in the plain entropy.",
        "stories260K: 1.08-3.08; gpt2-wp-mini: 4.0-5.7 (close to the entropy when the sink is weak)."}},
      {"sink_entropy_share", "share of the attention entropy carried by the sink channel",
       [channels](const HeadInput& h) { return channels(h).sink_share; },
       [channels](const HeadInput& h) { return channels(h).problem; }, "sink_H_share", true,
       {"Share of the rows' entropy carried by the sink channel (the sink-versus-content split and its weighting), "
        "summed over rows.",
        "The entropy mostly says how much weight goes to the sink, not how content is spread.",
        "The entropy is about content.",
        "stories260K: 0.006-0.058; gpt2-wp-mini: 0.003-0.010."}},
      {"sink_score", "mean weight on key 0 over the first " + std::to_string(sink_rate_queries) + " query rows",
       [sink_rate_queries, nan](const HeadInput& h) {
         try {
           return sink_score(h.attention.col(0), sink_rate_queries);
         } catch (const attnscope::invalid_argument&) {  // no rows, or a weight outside [0, 1] (--lenient input)
           return nan;
         }
       },
       sink_score_problem, "alpha", true,
       {"The sink score alpha of Gu et al. 2024 (arXiv 2410.10781, §3.1): the mean attention on the first token over "
        "the first T query rows (T = 64 by default); the report's sink-rate line counts the heads with alpha above "
        "each threshold.",
        "The head parks its mass on the first token from the start of the text (a sink head when above 0.3).",
        "The first token is not this head's sink.",
        "stories260K: 0.021-0.19 (median 0.097); gpt2-wp-mini: 0.049-0.15 (median 0.090); neither has a head above 0.2."}},
      {"causal_stable_rank", "stable rank of the causal scaled-score matrix (needs scores)",
       [nan](const HeadInput& h) {
         if (h.scores.size() == 0 || h.scores.rows() != h.scores.cols()) return nan;
         try {
           return logits::causal_stable_rank(h.scores.template cast<Scalar>());
         } catch (const attnscope::invalid_argument&) {
           return nan;
         }
       },
       [](const HeadInput& h) {
         if (h.scores.size() == 0) return std::string("needs scores (no scores array in the input)");
         if (h.scores.rows() != h.scores.cols()) return detail::causal_only_reason(h);
         try {
           logits::causal_stable_rank(h.scores.template cast<Scalar>());
         } catch (const attnscope::invalid_argument& error) {
           return std::string(error.what());
         }
         return std::string("not available");
       },
       "stable_rank", false,
       {"Stable rank ||S||_F^2 / ||S||_2^2 of the causal part of the scaled-score matrix (needs the scores).",
        "The logits use many directions (varied, e.g. local, patterns).",
        "The logits are close to rank one (the same pattern for every query).",
        "stories260K: 2.1-5.5 (median 3.8); gpt2-wp-mini: 1.2-1.9."}},
      {"separability_at_critical_n", "mean N_s/N at the critical top-N (needs scores and values)",
       [capacity, nan](const HeadInput& h) {
         const capacity::HeadCapacity* c = capacity->get(h);
         return c ? c->separability_at_critical : nan;
       },
       [capacity](const HeadInput& h) {
         capacity->get(h);
         return capacity->problem();
       },
       "sep_at_N", true,
       {"Mean fraction N_s/N of the top-N keys the head separates at its critical N (needs scores and values).",
        "The head keeps its selected keys apart in its output.",
        "The selected keys blur together.",
        "'-' for every head of both models as measured: the KS test over one head's rows tells true from expected "
        "distances at every N up to L/4, so no critical N exists (the reason is printed under the table)."}},
      {"gradient_sensitivity", "g(T=1, eps=1e-3): mean finite-difference softmax sensitivity (needs scores, values)",
       [capacity, nan](const HeadInput& h) {
         const capacity::HeadCapacity* c = capacity->get(h);
         return c ? c->gradient_sensitivity : nan;
       },
       [capacity](const HeadInput& h) {
         capacity->get(h);
         return capacity->problem();
       },
       "grad_sens", false,
       {"g(T = 1, eps = 1e-3): mean finite-difference change of the softmax per unit change of the logits (needs scores "
        "and values).",
        "Small logit changes move the attention a lot.",
        "The attention is stable (saturated or diffuse).",
        "stories260K: 0.023-0.033; gpt2-wp-mini: 0.007-0.012."}},
  };
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
// Compiled once in the optional compiled part (src/extern_templates/report_columns.cpp).
extern template std::vector<ReportColumn> analysis_report_columns<double>(const std::vector<Index>&, SinkChannel, Index);
extern template std::vector<ReportColumn> analysis_report_columns<float>(const std::vector<Index>&, SinkChannel, Index);
#endif

/// default_report_columns(sink_keys) followed by analysis_report_columns<Scalar>(sink_keys, channel,
/// sink_rate_queries).
template <class Scalar = double>
std::vector<ReportColumn> all_report_columns(const std::vector<Index>& sink_keys = {0},
                                             SinkChannel channel = SinkChannel::both,
                                             Index sink_rate_queries = default_sink_rate_queries) {
  std::vector<ReportColumn> columns = default_report_columns(sink_keys);
  for (auto& column : analysis_report_columns<Scalar>(sink_keys, channel, sink_rate_queries))
    columns.push_back(std::move(column));
  return columns;
}

/// The columns that cost far more than the rest, computed by `attnscope report` only when asked for (`--columns
/// all`, or by name): causal_stable_rank (an SVD of the L × L scores, O(L³)), separability_at_critical_n and
/// gradient_sensitivity (the capacity analysis: O(|grid|·L²·d) plus a finite-difference softmax per row). At
/// L = 1024 they take about 95% of a full report's time.
inline const std::vector<std::string>& costly_report_column_names() {
  static const std::vector<std::string> names = {"causal_stable_rank", "separability_at_critical_n",
                                                 "gradient_sensitivity"};
  return names;
}

/// all_report_columns<Scalar>(sink_keys, channel, sink_rate_queries) without costly_report_column_names(): the
/// default of `attnscope report`.
template <class Scalar = double>
std::vector<ReportColumn> fast_report_columns(const std::vector<Index>& sink_keys = {0},
                                              SinkChannel channel = SinkChannel::both,
                                              Index sink_rate_queries = default_sink_rate_queries) {
  std::vector<ReportColumn> columns;
  const auto& costly = costly_report_column_names();
  for (auto& column : all_report_columns<Scalar>(sink_keys, channel, sink_rate_queries))
    if (std::find(costly.begin(), costly.end(), column.name) == costly.end()) columns.push_back(std::move(column));
  return columns;
}

}  // namespace attnscope::analysis
