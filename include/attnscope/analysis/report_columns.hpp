// attnscope/analysis/report_columns.hpp — report columns contributed by the analysis modules: content entropy and the
// sink share of entropy (composition), the causal stable rank of the logit matrix (logits), N_s/N at the critical N
// and g(T = 1, ε = 1e−3) (capacity). `attnscope report` uses all_report_columns().
#pragma once

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attnscope/capacity.hpp"
#include "attnscope/composition.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/logits.hpp"
#include "attnscope/analysis/head_report.hpp"

namespace attnscope::analysis {
namespace detail {

template <class Derived>
bool is_lower_triangular(const Eigen::MatrixBase<Derived>& matrix) {
  for (Index i = 0; i < matrix.rows(); ++i)
    for (Index j = i + 1; j < matrix.cols(); ++j)
      if (matrix(i, j) != 0) return false;
  return true;
}

/// Mean content entropy and Σ sink term / Σ entropy over the query rows that have content keys (rows 1..L−1 of
/// causal attention, every row otherwise), sink = key 0 (docs/theory/composition.md §1-§5, entropy_split).
struct EntropyChannels {
  double content_entropy = std::numeric_limits<double>::quiet_NaN();
  double sink_share = std::numeric_limits<double>::quiet_NaN();
};

template <class Derived>
EntropyChannels entropy_channels(const Eigen::MatrixBase<Derived>& attention) {
  EntropyChannels result;
  const bool causal = is_lower_triangular(attention);
  if (attention.rows() < (causal ? 2 : 1) || attention.cols() < 2) return result;
  const Index first_row = causal ? 1 : 0;  // causal row 0 sees only the sink: no content channel
  const Visibility visibility = causal ? Visibility(Causal{1}) : Visibility();
  try {
    const auto split =
        composition::entropy_split(attention.bottomRows(attention.rows() - first_row), visibility);
    result.content_entropy = static_cast<double>(split.content_entropy.mean());
    const double total = static_cast<double>(split.entropy.sum());
    result.sink_share = total > 0 ? static_cast<double>(split.sink_term().sum()) / total
                                  : std::numeric_limits<double>::quiet_NaN();
  } catch (const attnscope::invalid_argument&) {  // a row with all mass on the sink, or not a distribution
  }
  return result;
}

/// head_capacity() of one head in Scalar precision, computed once for the two capacity columns: the last head's
/// matrices are kept and compared by value, so a stale result is never returned.
template <class Scalar>
class CapacityCache {
 public:
  const capacity::HeadCapacity* get(const HeadInput& head) {
    if (head.scores.size() == 0 || head.values.size() == 0) return nullptr;
    if (!(have_ && same(attention_, head.attention) && same(scores_, head.scores) && same(values_, head.values))) {
      attention_ = head.attention;
      scores_ = head.scores;
      values_ = head.values;
      have_ = true;
      valid_ = false;
      try {
        value_ = capacity::head_capacity(head.attention.template cast<Scalar>(), head.scores.template cast<Scalar>(),
                                         head.values.template cast<Scalar>(), causal);
        valid_ = true;
      } catch (const attnscope::invalid_argument&) {
      }
    }
    return valid_ ? &value_ : nullptr;
  }

 private:
  static bool same(const RowMatrix<double>& a, const RowMatrix<double>& b) {
    return a.rows() == b.rows() && a.cols() == b.cols() && a == b;
  }
  RowMatrix<double> attention_, scores_, values_;
  bool have_ = false, valid_ = false;
  capacity::HeadCapacity value_;
};

}  // namespace detail

/// Columns of the analysis modules (NaN when the inputs are missing or do not qualify):
/// - `content_entropy`: mean H(c) of the content composition (sink = key 0), rows with content keys;
/// - `sink_entropy_share`: Σ_i (H_b(s_i) + s_i·H_within) / Σ_i H(a_i), the sink channel's share of the entropy;
/// - `causal_stable_rank`: ‖S‖_F²/‖S‖₂² of the causal part of the scaled scores (needs scores; logits module);
/// - `separability_at_critical_n`: mean N_s/N at the head's critical top-N (needs scores and values; capacity);
/// - `gradient_sensitivity`: g(T = 1, ε = 1e−3), mean finite-difference ‖Δ softmax‖/ε (needs scores and values).
/// The capacity columns assume causal attention. Cost per head: O(L²) + one SVD of L × L + O(|grid|·L²·d).
/// Scalar is the precision the columns compute in (the head inputs are double; float roughly halves the time at
/// float accuracy). A template, so that only programs which build these columns compile the analyses behind them.
template <class Scalar = double>
std::vector<ReportColumn> analysis_report_columns() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto capacity = std::make_shared<detail::CapacityCache<Scalar>>();
  return {
      {"content_entropy", "mean entropy of the content composition (sink = key 0), nats",
       [](const HeadInput& h) { return detail::entropy_channels(h.attention.template cast<Scalar>()).content_entropy; }},
      {"sink_entropy_share", "share of the attention entropy carried by the sink channel",
       [](const HeadInput& h) { return detail::entropy_channels(h.attention.template cast<Scalar>()).sink_share; }},
      {"causal_stable_rank", "stable rank of the causal scaled-score matrix (needs scores)",
       [nan](const HeadInput& h) {
         if (h.scores.size() == 0) return nan;
         try {
           return logits::causal_stable_rank(h.scores.template cast<Scalar>());
         } catch (const attnscope::invalid_argument&) {
           return nan;
         }
       }},
      {"separability_at_critical_n", "mean N_s/N at the critical top-N (needs scores and values)",
       [capacity, nan](const HeadInput& h) {
         const capacity::HeadCapacity* c = capacity->get(h);
         return c ? c->separability_at_critical : nan;
       }},
      {"gradient_sensitivity", "g(T=1, eps=1e-3): mean finite-difference softmax sensitivity (needs scores, values)",
       [capacity, nan](const HeadInput& h) {
         const capacity::HeadCapacity* c = capacity->get(h);
         return c ? c->gradient_sensitivity : nan;
       }},
  };
}

/// default_report_columns() followed by analysis_report_columns<Scalar>().
template <class Scalar = double>
std::vector<ReportColumn> all_report_columns() {
  std::vector<ReportColumn> columns = default_report_columns();
  for (auto& column : analysis_report_columns<Scalar>()) columns.push_back(std::move(column));
  return columns;
}

}  // namespace attnscope::analysis
