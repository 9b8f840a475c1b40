// attnscope/analysis/head_report.hpp — the per-layer, per-head report of `attnscope report`: a list of named columns
// (each a function of one head's attention rows and, when available, its scaled scores and values), evaluated for
// every head and written as an aligned table, CSV, JSON or Markdown. Every analysed attention row is checked first
// (row_check.hpp; strict unless lenient). Other modules add columns by appending to the list. head_report_json needs
// <nlohmann/json.hpp> where it is called (link attnscope::io).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json_fwd.hpp>

#include "attnscope/analysis/head_input.hpp"
#include "attnscope/analysis/row_check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/spectral_norm.hpp"

namespace attnscope {
struct SinkSoftmaxMap;
struct SelfAdjustSoftmaxMap;
}  // namespace attnscope

namespace attnscope::analysis {

/// A column's glossary entry (the HTML page's glossary, attnscope.analysis.columns()): what it measures, what high
/// and low values mean, typical values on real models (naming the models).
struct ColumnGlossary {
  std::string measures, high, low, typical;

  /// True when every part is written.
  bool complete() const { return !measures.empty() && !high.empty() && !low.empty() && !typical.empty(); }
};

/// A report column: a name (CSV/JSON key), a one-line description, and the function computing it for one head.
/// The function returns NaN when its inputs are not available (printed "-", JSON null); `missing_reason` then says
/// why (listed under the text table). `short_name` heads the text table when the full names do not fit (with a
/// legend); `reads_attention` is false for columns computed from scores/values only (not marked by --lenient);
/// `glossary` explains the column on the HTML page.
struct ReportColumn {
  std::string name;
  std::string description;
  std::function<double(const HeadInput&)> compute;
  std::function<std::string(const HeadInput&)> missing_reason = {};
  std::string short_name = {};
  bool reads_attention = true;
  ColumnGlossary glossary = {};
};

/// The evaluated report: column names and one row of values per head. `missing_reasons[c]` is the reason of a NaN
/// value (empty otherwise); `bad_rows` counts the head's attention rows that are not distributions (--lenient).
struct HeadReport {
  struct Row {
    int layer = 0, head = 0;
    std::vector<double> values;                // one per column
    std::vector<std::string> missing_reasons;  // one per column ("" when the value is present)
    Index bad_rows = 0;
  };
  std::vector<std::string> columns;
  std::vector<std::string> short_names;   // one per column ("" = use the name)
  std::vector<std::string> descriptions;  // one per column
  std::vector<bool> reads_attention;      // one per column
  std::vector<ColumnGlossary> glossaries;  // one per column (empty parts = no entry)
  std::vector<Row> rows;
};

// ---------------------------------------------------------------------------------------------------------------
// Column functions

/// Sink mass: mean over query rows of the weight on the sink keys, (1/L) Σ_i Σ_{j∈S} A(i, j), S = {0} by default
/// (docs/theory/composition.md target 8, "mean a_{i,0} per layer and head"; the attention sink of Xiao et al. 2023,
/// StreamingLLM). Keys outside the matrix are ignored. O(L·|S|).
template <class Derived>
double attention_sink_mass(const Eigen::MatrixBase<Derived>& attention, const std::vector<Index>& sink_keys = {0}) {
  if (attention.size() == 0) return std::numeric_limits<double>::quiet_NaN();
  double total = 0;
  for (const Index key : sink_keys)
    if (key >= 0 && key < attention.cols()) total += attention.col(key).template cast<double>().sum();
  return total / static_cast<double>(attention.rows());
}

/// The entropy H(a/c) of a row a of a learned-sink head renormalised over its real keys, c = 1 − σ (the row's sink share
/// σ < 1), from its raw entropy H_raw = −Σ_j a_j ln a_j: H_raw / c + ln c [derived: expand −Σ (a/c) ln(a/c)].
inline double real_key_entropy(double raw_entropy, double sink_share) {
  const double content = 1.0 - sink_share;
  return raw_entropy / content + std::log(content);
}

/// Per-row entropies of a head with learned-sink shares σ (gpt-oss), whose rows a_i sum to 1 − σ_i, from
/// H_raw = −Σ_j a_ij ln a_ij (0 ln 0 = 0):
/// - `real_keys`: H(a_i / c_i) = H_raw / c_i + ln c_i, c_i = 1 − σ_i, the entropy of the row renormalised over the real
///   keys (what `rowstats` calls entropy) [derived];
/// - `with_sink`: H(a_i, σ_i) = H_raw − σ_i ln σ_i, the entropy of the (n+1)-part composition with the sink
///   (rowstats' entropy_with_sink) [derived].
/// Both are empty when a weight is negative or not finite, or a share is outside [0, 1), or the sizes differ. O(L²).
struct LearnedSinkEntropies {
  Vector<double> real_keys, with_sink;
};

template <class Derived, class SinkDerived>
LearnedSinkEntropies learned_sink_row_entropies(const Eigen::MatrixBase<Derived>& attention,
                                                const Eigen::MatrixBase<SinkDerived>& sink_shares) {
  LearnedSinkEntropies result;
  const Index rows = attention.rows();
  if (rows == 0 || sink_shares.size() != rows) return result;
  Vector<double> real_keys(rows), with_sink(rows);
  for (Index i = 0; i < rows; ++i) {
    const double sigma = static_cast<double>(sink_shares(i));
    if (!(sigma >= 0 && sigma < 1)) return result;
    double raw = 0;
    for (Index j = 0; j < attention.cols(); ++j) {
      const double a = static_cast<double>(attention(i, j));
      if (!(a >= 0) || !std::isfinite(a)) return result;
      if (a > 0) raw -= a * std::log(a);
    }
    real_keys(i) = real_key_entropy(raw, sigma);
    with_sink(i) = raw - (sigma > 0 ? sigma * std::log(sigma) : 0.0);
  }
  result.real_keys = std::move(real_keys);
  result.with_sink = std::move(with_sink);
  return result;
}

/// The report columns of a model with learned sink logits (gpt-oss; HeadInput::learned_sink): the mean share σ of the
/// sink logit, the mean entropy with the sink as a part (learned_sink_row_entropies), and the mean content mass 1 − σ − Σ_{j∈S} A(i, j) left for the keys that are not sinks. NaN for a head
/// without learned-sink shares.
inline std::vector<ReportColumn> learned_sink_report_columns(const std::vector<Index>& sink_keys = {0}) {
  const auto reason = [](const HeadInput&) { return std::string("the model has no learned sink"); };
  return {
      {"learned_sink", "mean share of the learned sink logit over query rows",
       [](const HeadInput& h) {
         return h.learned_sink.size() ? h.learned_sink.mean() : std::numeric_limits<double>::quiet_NaN();
       },
       reason, "sigma", false,
       {"Mean share σ of the head's learned sink logit s (gpt-oss): p_ij = e^{z_ij}/(Σ_k e^{z_ik} + e^s), σ_i = 1 − Σ_j p_ij.",
        "The head parks its mass on the learned sink, outside every key.", "The learned sink takes little mass.",
        "tests/fixtures/hf/gpt_oss (random weights, L = 35): 0.017-0.42."}},
      {"entropy_with_sink", "mean entropy of the composition of the real keys' weights and the learned sink (nats)",
       [](const HeadInput& h) {
         if (!h.learned_sink.size()) return std::numeric_limits<double>::quiet_NaN();
         const LearnedSinkEntropies entropies = learned_sink_row_entropies(h.attention, h.learned_sink);
         return entropies.with_sink.size() ? entropies.with_sink.mean() : std::numeric_limits<double>::quiet_NaN();
       },
       reason, "H_sink", true,
       {"Mean entropy of the (n+1)-part composition (a_i0, ..., a_in, σ_i): H_raw − σ ln σ per row (nats). The "
        "entropy column is that of the real keys' row renormalised, a_ij / (1 − σ_i).",
        "Mass spread over the keys and the learned sink.", "The row concentrates on few keys or on the sink.",
        "tests/fixtures/hf/gpt_oss (random weights, L = 35): 1.24-1.92."}},
      {"content_mass", "mean mass left for content keys: 1 - learned sink - sink keys",
       [sink_keys](const HeadInput& h) {
         if (!h.learned_sink.size()) return std::numeric_limits<double>::quiet_NaN();
         return 1.0 - h.learned_sink.mean() - attention_sink_mass(h.attention, sink_keys);
       },
       reason, "content", true,
       {"Mean of 1 − σ_i − Σ_{j∈S} a_ij: the mass neither the learned sink nor the sink keys take.",
        "The head attends to content.", "The sinks (learned and first token) take the head's mass.",
        "tests/fixtures/hf/gpt_oss (random weights, L = 35): 0.54-0.93."}},
  };
}

/// Mean row entropy in nats, (1/L) Σ_i H_i with H_i = attnscope::row_entropy (−Σ_j A(i,j) ln A(i,j), 0 ln 0 = 0,
/// Shannon); NaN when the matrix is empty or has a negative or non-finite entry (rows that are not distributions,
/// e.g. SA-softmax rows: row_entropy checks every entry and refuses them). O(L²).
template <class Derived>
double mean_attention_entropy(const Eigen::MatrixBase<Derived>& attention) {
  const RowMatrixView<typename Derived::Scalar> a(attention.derived());
  if (a.size() == 0) return std::numeric_limits<double>::quiet_NaN();
  try {
    return static_cast<double>(row_entropy(a).template cast<double>().mean());
  } catch (const attnscope::invalid_argument&) {  // a negative or non-finite entry
    return std::numeric_limits<double>::quiet_NaN();
  }
}

/// The `entropy` column's value for one head: mean_attention_entropy, or for a head with learned-sink shares the mean
/// entropy of the real keys' renormalised rows (learned_sink_row_entropies). NaN when not defined.
inline double head_mean_entropy(const HeadInput& head) {
  if (!head.learned_sink.size()) return mean_attention_entropy(head.attention);
  const LearnedSinkEntropies entropies = learned_sink_row_entropies(head.attention, head.learned_sink);
  return entropies.real_keys.size() ? entropies.real_keys.mean() : std::numeric_limits<double>::quiet_NaN();
}

/// Largest finite entry (e.g. the max scaled logit of scores with −inf future entries); NaN when there is none.
template <class Derived>
double max_finite_entry(const Eigen::MatrixBase<Derived>& matrix) {
  double best = -std::numeric_limits<double>::infinity();
  for (Index i = 0; i < matrix.rows(); ++i)
    for (Index j = 0; j < matrix.cols(); ++j) {
      const double value = static_cast<double>(matrix(i, j));
      if (std::isfinite(value)) best = std::max(best, value);
    }
  return std::isfinite(best) ? best : std::numeric_limits<double>::quiet_NaN();
}

/// Largest attention weight over the query rows that see at least two keys (visible_key_counts: a causal row 0 sees
/// one key and always puts weight 1 on it, which says nothing about the head); NaN when no row qualifies. O(L²).
template <class Derived>
double max_attention_weight(const Eigen::MatrixBase<Derived>& attention, const RowMatrix<double>& scores = {}) {
  const auto visible = visible_key_counts(attention, scores);
  double best = -std::numeric_limits<double>::infinity();
  for (Index i = 0; i < attention.rows(); ++i)
    if (visible(i) >= 2) best = std::max(best, static_cast<double>(attention.row(i).maxCoeff()));
  return std::isfinite(best) ? best : std::numeric_limits<double>::quiet_NaN();
}

/// Exact ‖diag p − ppᵀ‖₂ of every attention row (the softmax Jacobian from the probabilities, scale 1; secular
/// equation, docs/theory/normalization-maps.md §5), or an empty vector when some row is not a distribution (entry < 0 or
/// |Σp − 1| > 1e-3, e.g. sink or SA-softmax rows) or the matrix is empty. O(L²).
template <class Derived>
Vector<double> attention_jacobian_norms(const Eigen::MatrixBase<Derived>& attention) {
  using Scalar = typename Derived::Scalar;
  const RowMatrixView<Scalar> a(attention.derived());
  if (a.size() == 0 || !a.allFinite() || a.minCoeff() < 0) return {};
  for (Index i = 0; i < a.rows(); ++i)
    if (std::abs(static_cast<double>(a.row(i).sum()) - 1.0) > 1e-3) return {};
  return softmax_jacobian_spectral_norm(a, Scalar(1)).template cast<double>();
}

/// Exact ‖diag p − ppᵀ‖₂ of every row p of a head with learned-sink shares σ (rows sum to 1 − σ_i): the Jacobian of
/// the content weights with respect to their logits when a learned sink logit joins the softmax denominator, with the
/// sink's mass r₀ = σ_i in the secular equation (docs/theory/normalization-maps.md §5.4). Empty when a weight is
/// negative or not finite, a share is outside [0, 1], |Σp + σ − 1| > 1e-3, or the sizes differ. O(L²).
template <class Derived, class SinkDerived>
Vector<double> attention_jacobian_norms(const Eigen::MatrixBase<Derived>& attention,
                                        const Eigen::MatrixBase<SinkDerived>& sink_shares) {
  using Scalar = typename Derived::Scalar;
  const RowMatrixView<Scalar> a(attention.derived());
  if (a.size() == 0 || sink_shares.size() != a.rows() || !a.allFinite() || a.minCoeff() < 0) return {};
  Vector<double> norms(a.rows());
  for (Index i = 0; i < a.rows(); ++i) {
    const double sigma = static_cast<double>(sink_shares(i));
    if (!(sigma >= 0 && sigma <= 1) || std::abs(static_cast<double>(a.row(i).sum()) + sigma - 1.0) > 1e-3) return {};
    const Vector<Scalar> row = a.row(i).transpose();
    norms(i) = static_cast<double>(
        attnscope::detail::sink_softmax_jacobian_norm_row(row.data(), row.size(), static_cast<Scalar>(sigma)));
  }
  return norms;
}

namespace detail {
inline std::string reason_not_distributions(const HeadInput&) {
  return "rows are not probability distributions (sink or SA-softmax map, or --lenient input)";
}

/// attention_jacobian_norms of one head (with its learned-sink shares when it has them), computed once for the two
/// Jacobian columns: the last head's attention and shares are kept and compared by value (same_entries; far cheaper than the norms), so a stale result is never returned. A
/// template, as the columns are, so that only programs building the columns compile the norms.
template <class Scalar>
class JacobianNormsCache {
 public:
  const Vector<double>& get(const HeadInput& head) {
    if (!(have_ && same_rows(attention_, learned_sink_, head))) {
      norms_ = head.learned_sink.size()
                   ? attention_jacobian_norms(head.attention.template cast<Scalar>(),
                                              head.learned_sink.template cast<Scalar>())
                   : attention_jacobian_norms(head.attention.template cast<Scalar>());
      attention_ = head.attention;
      learned_sink_ = head.learned_sink;
      have_ = true;
    }
    return norms_;
  }

 private:
  RowMatrix<double> attention_;
  Vector<double> learned_sink_;
  bool have_ = false;
  Vector<double> norms_;
};
}  // namespace detail

/// The report's standard columns: sink_mass (weight on `sink_keys`, default key 0), entropy, max_max_weight (the
/// largest row maximum max_weight over the rows seeing ≥ 2 keys), max_scaled_logit, mean_jacobian_norm, max_jacobian_norm (see docs/api/analysis.md). Typical
/// values in the glossaries (here and in report_columns.hpp): min-max over the heads of `attnscope report
/// stories260K.bin` (llama2.c, 5 layers × 8 heads, BOS then 255 greedy tokens) and `attnscope report --model
/// gpt2-wp-mini --text-file war_and_peace.txt --max-tokens 1024` (GPT-2 layout, 4 layers × 3 heads), measured
/// 2026-12-01. A template (Scalar is unused: the columns compute in double), so that only programs which build the
/// columns compile the Jacobian norms behind them.
template <class Scalar = double>
std::vector<ReportColumn> default_report_columns(const std::vector<Index>& sink_keys = {0}) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto jacobian = std::make_shared<detail::JacobianNormsCache<double>>();
  return {
      {"sink_mass", "mean attention weight on the sink keys over query rows",
       [sink_keys](const HeadInput& h) { return attention_sink_mass(h.attention, sink_keys); },
       [](const HeadInput& h) {
         return std::string(h.attention.size() ? "non-finite weights (--lenient input)" : "empty attention");
       },
       "sink", true,
       {"Mean attention weight on key 0 over the query rows (the attention sink of Xiao et al. 2023, StreamingLLM).",
        "The head parks its mass on the first token (a sink head) and carries content with the rest; large pretrained "
        "LMs typically have such heads.",
        "The head spreads its mass over content keys.",
        "stories260K: 0.006-0.10 (median 0.03); gpt2-wp-mini: 0.004-0.014. Neither small model has a strong sink."}},
      {"entropy", "mean row entropy of the attention (nats; over the real keys, renormalised, with learned sinks)",
       [](const HeadInput& h) { return head_mean_entropy(h); }, detail::reason_not_distributions, "H", true,
       {"Mean Shannon entropy of the attention rows, in nats (a uniform row over n keys has ln n).",
        "Diffuse attention: many keys share the weight (causal rows over L keys: at most about ln L - 1 on average).",
        "Sharp attention: few keys take the weight (0 = one key per row).",
        "stories260K (L = 256): 1.07-3.09 (median 1.7); gpt2-wp-mini (L = 1024): 4.0-5.7 (median 5.1)."}},
      {"max_max_weight", "largest max_weight (a row's largest weight) over query rows that see >= 2 keys",
       [](const HeadInput& h) { return max_attention_weight(h.attention, h.scores); },
       [](const HeadInput&) { return std::string("no query row sees two or more keys"); }, "max_max_w", true,
       {"Largest attention weight of the head: the largest max_weight (a row's largest weight) over its rows.",
        "Some query puts (almost) all its mass on one key.",
        "No query concentrates on a single key.",
        "Over rows that see at least two keys: stories260K (L = 256): 0.84-1.0 (median 1.0); gpt2-wp-mini "
        "(L = 1024): 0.56-0.98 (median 0.73)."}},
      {"max_scaled_logit", "largest scaled score q.k/sqrt(d) (needs scores)",
       [](const HeadInput& h) { return max_finite_entry(h.scores); },
       [](const HeadInput& h) {
         return std::string(h.scores.size() ? "no finite score" : "needs scores (no scores array in the input)");
       },
       "max_logit", false,
       {"Largest scaled score q.k/sqrt(d) over the visible entries (needs the scores).",
        "Large logits: the softmax is sharp and its gradient sensitive (towards logit explosion).",
        "Small logits: soft, near-uniform attention.",
        "stories260K: 11-49 (median 25); gpt2-wp-mini: 3.7-17 (median 11)."}},
      {"mean_jacobian_norm", "mean over rows of the exact ||diag p - pp^T||_2",
       [nan, jacobian](const HeadInput& h) {
         const Vector<double>& norms = jacobian->get(h);
         return norms.size() ? norms.mean() : nan;
       },
       detail::reason_not_distributions, "mean_J", true,
       {"Mean over rows of the exact spectral norm ||diag p - p p^T||_2 of the softmax Jacobian at the row (0 to 1/2).",
        "Towards 0.5: rows split between two keys, where the softmax output is most sensitive to its logits.",
        "Near 0: rows that are one-hot (saturated) or spread over many keys (1/n for n equal weights).",
        "stories260K: 0.18-0.26; gpt2-wp-mini: 0.022-0.080."}},
      {"max_jacobian_norm", "max over rows of the exact ||diag p - pp^T||_2",
       [nan, jacobian](const HeadInput& h) {
         const Vector<double>& norms = jacobian->get(h);
         return norms.size() ? norms.maxCoeff() : nan;
       },
       detail::reason_not_distributions, "max_J", true,
       {"Largest row value of ||diag p - p p^T||_2 (at most 1/2).",
        "Some row is split between two keys (0.5 at most).",
        "Every row is one-hot or diffuse.",
        "stories260K: 0.40-0.50; gpt2-wp-mini: 0.35-0.50 (early rows with two visible keys come close to 0.5)."}},
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs and evaluation

/// How compute_head_report treats attention rows that are not probability distributions.
struct HeadReportOptions {
  /// false (strict, the default): a row that is not finite, has a negative weight or does not sum to 1 within
  /// attention_row_sum_tolerance(L_k, storage_roundoff) throws invalid_argument naming the layer, head, row and
  /// value. true: such heads are analysed anyway and their bad rows counted (HeadReport::Row::bad_rows).
  bool lenient = false;
  /// Unit roundoff of the precision the weights were stored in (analysis::unit_roundoff; default float32).
  double storage_roundoff = unit_roundoff::float32;
  /// false for maps whose rows are not distributions (sink softmax, SA-softmax): only finiteness is checked.
  bool rows_are_distributions = true;
  /// Appended to the strict-mode error message (e.g. how to analyse anyway).
  std::string strict_hint;
};

/// True when the rows of a capture made with `map` (an attnscope::NormalizationMap) are probability distributions:
/// false for the sink softmax and SA-softmax maps, whose rows carry mass outside the keys or are rescaled (their
/// HeadReportOptions::rows_are_distributions is false).
template <class Map>
bool map_rows_are_distributions(const Map& map) {
  return !std::holds_alternative<SinkSoftmaxMap>(map) && !std::holds_alternative<SelfAdjustSoftmaxMap>(map);
}

/// Builds a HeadReport one head at a time, so that a caller streaming heads from a file holds one head in memory:
/// add(head) checks and evaluates it, then the head can be dropped. compute_head_report() is add() over a vector.
class HeadReportBuilder {
 public:
  /// Throws invalid_argument for duplicate or empty column names, or a column without a function.
  explicit HeadReportBuilder(std::vector<ReportColumn> columns, HeadReportOptions options = {})
      : columns_(std::move(columns)), options_(std::move(options)) {
    for (const auto& column : columns_) {
      if (column.name.empty() || !column.compute)
        attnscope::detail::throw_invalid_argument(fn_, "column '", column.name, "' needs a name and a function");
      if (std::find(report_.columns.begin(), report_.columns.end(), column.name) != report_.columns.end())
        attnscope::detail::throw_invalid_argument(fn_, "duplicate column '", column.name, "'");
      report_.columns.push_back(column.name);
      report_.short_names.push_back(column.short_name);
      report_.descriptions.push_back(column.description);
      report_.reads_attention.push_back(column.reads_attention);
      report_.glossaries.push_back(column.glossary);
    }
  }

  /// Checks the head (non-empty attention; scores of the same shape; values with L_k rows; the rows, see
  /// HeadReportOptions) and appends its row. Throws invalid_argument naming the layer and head.
  void add(const HeadInput& head) {
    const Index rows = head.attention.rows(), cols = head.attention.cols();
    if (rows == 0 || cols == 0)
      attnscope::detail::throw_invalid_argument(fn_, "layer ", head.layer, " head ", head.head, ": attention is ",
                                                rows, "x", cols, ", expected a non-empty matrix");
    if (head.scores.size() && (head.scores.rows() != rows || head.scores.cols() != cols))
      attnscope::detail::throw_invalid_argument(fn_, "layer ", head.layer, " head ", head.head, ": scores are ",
                                                head.scores.rows(), "x", head.scores.cols(), ", attention ", rows, "x",
                                                cols);
    if (head.values.size() && head.values.rows() != cols)
      attnscope::detail::throw_invalid_argument(fn_, "layer ", head.layer, " head ", head.head, ": values have ",
                                                head.values.rows(), " rows, attention ", cols, " keys");
    if (head.learned_sink.size() && head.learned_sink.size() != rows)
      attnscope::detail::throw_invalid_argument(fn_, "layer ", head.layer, " head ", head.head, ": learned_sink has ",
                                                head.learned_sink.size(), " rows, attention ", rows);
    // with a learned sink the row and its share σ form the distribution (the row sums to 1 − σ)
    const AttentionRowCheck check =
        head.learned_sink.size()
            ? check_attention_rows((RowMatrix<double>(rows, cols + 1) << head.attention, head.learned_sink).finished(),
                                   options_.storage_roundoff, options_.rows_are_distributions)
            : check_attention_rows(head.attention, options_.storage_roundoff, options_.rows_are_distributions);
    if (!check.ok() && !options_.lenient)
      attnscope::detail::throw_invalid_argument(
          fn_, "layer ", head.layer, " head ", head.head, " ", describe_row_violation(check.first), "; ",
          check.bad_rows, " of ", check.rows, " rows of this head are not probability distributions (finite, >= 0, "
          "summing to 1)", options_.strict_hint);
    HeadReport::Row row{head.layer, head.head, {}, {}, check.bad_rows};
    for (const auto& column : columns_) {
      const double value = column.compute(head);
      row.values.push_back(value);
      row.missing_reasons.push_back(
          std::isnan(value) ? (column.missing_reason ? column.missing_reason(head) : std::string("not available"))
                            : std::string());
    }
    report_.rows.push_back(std::move(row));
  }

  const HeadReport& report() const { return report_; }
  HeadReport take() { return std::move(report_); }

 private:
  static constexpr const char* fn_ = "compute_head_report";
  std::vector<ReportColumn> columns_;
  HeadReportOptions options_;
  HeadReport report_;
};

/// Evaluates every column for every head (HeadReportBuilder::add: strict row checks unless options.lenient).
/// Throws invalid_argument for a head without attention, scores of another shape, values with another number of
/// keys, rows that are not distributions (strict), duplicate or empty column names, or a column without a function.
/// Cost: the sum of the columns' costs (the standard ones are O(L_q·L_k) per head).
inline HeadReport compute_head_report(const std::vector<HeadInput>& heads, const std::vector<ReportColumn>& columns,
                                      const ProgressCallback& progress = {},
                                      const HeadReportOptions& options = {}) {
  HeadReportBuilder builder(columns, options);
  int done = 0;
  for (const HeadInput& head : heads) {
    builder.add(head);
    if (progress) progress(++done, static_cast<int>(heads.size()));
  }
  return builder.take();
}

/// The report column a name stands for: max_attention and its short name max_a, the names attnscope 0.1.0 gave the
/// column, stand for max_max_weight and max_max_w (docs/cli.md, "One vocabulary"); any other name for itself.
inline std::string report_column_name(const std::string& name) {
  if (name == "max_attention") return "max_max_weight";
  if (name == "max_a") return "max_max_w";
  return name;
}

/// The columns named in `names` (full or short names, or a name of report_column_name), in that order. Throws
/// invalid_argument naming an unknown name and listing the known ones.
inline std::vector<ReportColumn> select_report_columns(const std::vector<ReportColumn>& columns,
                                                       const std::vector<std::string>& names) {
  std::vector<ReportColumn> selected;
  for (const std::string& given : names) {
    const std::string name = report_column_name(given);
    const auto found = std::find_if(columns.begin(), columns.end(), [&](const ReportColumn& column) {
      return column.name == name || (!column.short_name.empty() && column.short_name == name);
    });
    if (found == columns.end()) {
      std::string known;
      for (const auto& column : columns) known += (known.empty() ? "" : ", ") + column.name;
      attnscope::detail::throw_invalid_argument("select_report_columns", "unknown column '", name, "' (known: ", known,
                                                ")");
    }
    selected.push_back(*found);
  }
  return selected;
}

/// Orders the report's heads by the column `given` (full or short name, or a name of report_column_name): descending
/// unless `ascending`; NaN last; ties keep layer/head order. Throws invalid_argument for an unknown column.
inline void sort_head_report(HeadReport& report, const std::string& given, bool ascending = false) {
  const std::string name = report_column_name(given);
  std::size_t c = 0;
  while (c < report.columns.size() && report.columns[c] != name &&
         !(c < report.short_names.size() && report.short_names[c] == name))
    ++c;
  if (c == report.columns.size() || name.empty())
    attnscope::detail::throw_invalid_argument("sort_head_report", "no column '", name, "' in the report");
  std::stable_sort(report.rows.begin(), report.rows.end(), [c, ascending](const HeadReport::Row& a,
                                                                          const HeadReport::Row& b) {
    const double x = a.values[c], y = b.values[c];
    if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
    return ascending ? x < y : x > y;
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Output

namespace detail {

inline std::string format_report_value(double value, int significant_digits) {
  if (std::isnan(value)) return "-";
  std::ostringstream stream;
  stream.precision(significant_digits);
  stream << value;
  return stream.str();
}

inline std::string aligned_rows(const std::vector<std::vector<std::string>>& cells, const std::vector<std::size_t>& keep) {
  std::vector<std::size_t> widths(keep.size(), 0);
  for (const auto& line : cells)
    for (std::size_t k = 0; k < keep.size(); ++k) widths[k] = std::max(widths[k], line[keep[k]].size());
  std::ostringstream out;
  for (const auto& line : cells) {
    for (std::size_t k = 0; k < keep.size(); ++k)
      out << (k ? "  " : "") << std::string(widths[k] - line[keep[k]].size(), ' ') << line[keep[k]];
    out << "\n";
  }
  return out.str();
}

/// `text` broken at spaces into lines of at most `width` characters (longer words stay whole), continuation lines
/// indented by `indent` spaces; every line ends in a newline.
inline std::string wrap_text(const std::string& text, std::size_t width, std::size_t indent) {
  const std::size_t lead = std::min(text.find_first_not_of(' '), text.size());
  std::string out, line(lead, ' ');
  bool fresh = true;  // nothing but indentation on the line yet
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!fresh && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent, ' ');
      fresh = true;
    }
    line += (fresh ? "" : " ") + word;
    fresh = false;
  }
  return out + line + "\n";
}

}  // namespace detail

/// Aligned text table (one line per head, 4 significant digits, NaN printed as "-"), at most `width` characters
/// per line: when the full column names do not fit, the short names head the columns and a legend follows; when
/// that is still too wide, the table is printed in blocks of columns, each repeating layer and head. Under the
/// table: why each "-" is empty (column, reason, number of heads), and with --lenient input ("*" after a value)
/// which heads had rows that are not distributions.
inline std::string head_report_table(const HeadReport& report, std::size_t width = 100) {
  const bool any_bad = std::any_of(report.rows.begin(), report.rows.end(), [](const auto& r) { return r.bad_rows > 0; });
  auto build = [&](bool short_names) {
    std::vector<std::vector<std::string>> cells;
    std::vector<std::string> header{"layer", "head"};
    for (std::size_t c = 0; c < report.columns.size(); ++c)
      header.push_back(short_names && c < report.short_names.size() && !report.short_names[c].empty()
                           ? report.short_names[c]
                           : report.columns[c]);
    if (any_bad) header.push_back("bad_rows");
    cells.push_back(header);
    for (const auto& row : report.rows) {
      std::vector<std::string> line{std::to_string(row.layer), std::to_string(row.head)};
      for (std::size_t c = 0; c < row.values.size(); ++c) {
        std::string cell = detail::format_report_value(row.values[c], 4);
        const bool marked = row.bad_rows > 0 && !std::isnan(row.values[c]) &&
                            (c >= report.reads_attention.size() || report.reads_attention[c]);
        line.push_back(marked ? cell + "*" : cell);
      }
      if (any_bad) line.push_back(std::to_string(row.bad_rows));
      cells.push_back(std::move(line));
    }
    return cells;
  };
  auto line_width = [](const std::vector<std::vector<std::string>>& cells, const std::vector<std::size_t>& keep) {
    std::size_t total = 0;
    for (std::size_t k = 0; k < keep.size(); ++k) {
      std::size_t w = 0;
      for (const auto& line : cells) w = std::max(w, line[keep[k]].size());
      total += w + (k ? 2 : 0);
    }
    return total;
  };
  std::vector<std::vector<std::string>> cells = build(false);
  std::vector<std::size_t> all(cells[0].size());
  for (std::size_t k = 0; k < all.size(); ++k) all[k] = k;
  std::ostringstream out;
  const bool abbreviated = line_width(cells, all) > width;
  if (abbreviated) cells = build(true);
  // Blocks of columns that fit, each starting with layer and head.
  std::vector<std::size_t> block{0, 1};
  bool first_block = true;
  for (std::size_t k = 2; k <= cells[0].size(); ++k) {
    std::vector<std::size_t> candidate = block;
    if (k < cells[0].size()) candidate.push_back(k);
    if (k == cells[0].size() || (line_width(cells, candidate) > width && block.size() > 2)) {
      out << (first_block ? "" : "\n") << detail::aligned_rows(cells, block);
      first_block = false;
      block = {0, 1};
      if (k < cells[0].size()) block.push_back(k);
    } else {
      block = candidate;
    }
  }
  if (abbreviated) {
    out << "\ncolumns:\n";
    for (std::size_t c = 0; c < report.columns.size(); ++c) {  // a hand-made report may lack names/descriptions
      const std::string short_name = c < report.short_names.size() ? report.short_names[c] : std::string();
      const std::string description = c < report.descriptions.size() ? report.descriptions[c] : std::string();
      out << detail::wrap_text("  " + (short_name.empty() ? report.columns[c] : short_name) + " = " +
                                   report.columns[c] + (description.empty() ? "" : ": " + description),
                               width, 6);
    }
  }
  // Why each "-" is empty: (column, reason) → heads.
  std::vector<std::pair<std::string, int>> reasons;
  for (std::size_t c = 0; c < report.columns.size(); ++c)
    for (const auto& row : report.rows) {
      if (c >= row.missing_reasons.size() || row.missing_reasons[c].empty()) continue;
      const std::string key = report.columns[c] + ": " + row.missing_reasons[c];
      auto found = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == key; });
      if (found == reasons.end()) reasons.emplace_back(key, 1);
      else ++found->second;
    }
  if (!reasons.empty()) {
    out << "\n\"-\" (not available):\n";
    for (const auto& [key, count] : reasons)
      out << detail::wrap_text("  " + key + " (" + std::to_string(count) + (count == 1 ? " head" : " heads") + ")",
                               width, 6);
  }
  if (any_bad) {
    Index heads = 0, rows = 0;
    for (const auto& row : report.rows) {
      heads += row.bad_rows > 0;
      rows += row.bad_rows;
    }
    out << "\n"
        << detail::wrap_text("* = from rows that are not distributions (--lenient): " +
                                 std::to_string(rows) + " bad rows in " + std::to_string(heads) +
                                 (heads == 1 ? " head" : " heads") + " (column bad_rows)",
                             width, 2);
  }
  return out.str();
}

/// CSV: header "layer,head,<columns>", one line per head, 10 significant digits, NaN written as "nan".
inline std::string head_report_csv(const HeadReport& report) {
  std::ostringstream out;
  out << "layer,head";
  for (const auto& name : report.columns) out << "," << name;
  out << "\n";
  out.precision(10);
  for (const auto& row : report.rows) {
    out << row.layer << "," << row.head;
    for (double value : row.values) {
      out << ",";
      if (std::isnan(value)) out << "nan";
      else out << value;
    }
    out << "\n";
  }
  return out.str();
}

/// JSON: {"columns": [names], "heads": [{"layer": l, "head": h, "<column>": value or null, ...}, ...]}. A template
/// (Json = nlohmann::json, declared by <nlohmann/json_fwd.hpp>): the caller includes <nlohmann/json.hpp>, and only
/// translation units that call it parse the JSON library.
template <class Json = nlohmann::json>
Json head_report_json(const HeadReport& report) {
  Json heads = Json::array();
  for (const auto& row : report.rows) {
    Json entry = {{"layer", row.layer}, {"head", row.head}};
    for (std::size_t c = 0; c < report.columns.size(); ++c)
      entry[report.columns[c]] = std::isfinite(row.values[c]) ? Json(row.values[c]) : Json();
    heads.push_back(std::move(entry));
  }
  return {{"columns", report.columns}, {"heads", heads}};
}

/// Markdown table (4 significant digits, NaN as "-").
inline std::string head_report_markdown(const HeadReport& report) {
  std::ostringstream out;
  out << "| layer | head |";
  for (const auto& name : report.columns) out << " " << name << " |";
  out << "\n|---|---|";
  for (std::size_t c = 0; c < report.columns.size(); ++c) out << "---|";
  out << "\n";
  for (const auto& row : report.rows) {
    out << "| " << row.layer << " | " << row.head << " |";
    for (double value : row.values) out << " " << detail::format_report_value(value, 4) << " |";
    out << "\n";
  }
  return out.str();
}

}  // namespace attnscope::analysis
