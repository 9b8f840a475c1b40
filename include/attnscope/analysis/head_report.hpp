// attnscope/analysis/head_report.hpp — the per-layer, per-head report of `attnscope report`: a list of named columns
// (each a function of one head's attention rows and, when available, its scaled scores and values), evaluated for
// every head and written as an aligned table, CSV, JSON or Markdown. Other modules add columns by appending to the
// list. Needs nlohmann-json (link attnscope::io).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/model/llama.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/spectral_norm.hpp"

namespace attnscope::analysis {

/// One head's data as the report columns see it (double precision; an empty matrix = not available).
struct HeadInput {
  int layer = 0, head = 0;
  RowMatrix<double> attention;  // L × L, row = query (causal captures: entries above the diagonal are 0)
  RowMatrix<double> scores;     // L × L scaled scores q·k/√d, future entries −inf; empty when unknown
  RowMatrix<double> values;     // L × d values of the head; empty when unknown
};

/// A report column: a name (CSV/JSON key), a one-line description, and the function computing it for one head.
/// The function returns NaN when its inputs are not available (printed "-", JSON null).
struct ReportColumn {
  std::string name;
  std::string description;
  std::function<double(const HeadInput&)> compute;
};

/// The evaluated report: column names and one row of values per head.
struct HeadReport {
  struct Row {
    int layer = 0, head = 0;
    std::vector<double> values;  // one per column
  };
  std::vector<std::string> columns;
  std::vector<Row> rows;
};

// ---------------------------------------------------------------------------------------------------------------
// Column functions

/// Sink mass: mean over query rows of the weight on key 0, (1/L) Σ_i A(i, 0) (docs/theory/composition.md target 8, "mean
/// a_{i,0} per layer and head"; the attention sink of Xiao et al. 2023, StreamingLLM). O(L).
template <class Derived>
double attention_sink_mass(const Eigen::MatrixBase<Derived>& attention) {
  if (attention.size() == 0) return std::numeric_limits<double>::quiet_NaN();
  return attention.col(0).template cast<double>().mean();
}

/// Mean row entropy in nats, (1/L) Σ_i H_i with H_i = attnscope::row_entropy (−Σ_j A(i,j) ln A(i,j), 0 ln 0 = 0,
/// Shannon); NaN when the matrix is empty or has a negative or non-finite entry (rows that are not distributions,
/// e.g. SA-softmax rows). O(L²).
template <class Derived>
double mean_attention_entropy(const Eigen::MatrixBase<Derived>& attention) {
  const RowMatrixView<typename Derived::Scalar> a(attention.derived());
  if (a.size() == 0 || !a.allFinite() || a.minCoeff() < 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(row_entropy(a).template cast<double>().mean());
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

/// The report's standard columns: sink_mass, entropy, max_attention, max_scaled_logit, mean_jacobian_norm,
/// max_jacobian_norm (see docs/api/model.md).
inline std::vector<ReportColumn> default_report_columns() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {
      {"sink_mass", "mean attention weight on key 0 over query rows",
       [](const HeadInput& h) { return attention_sink_mass(h.attention); }},
      {"entropy", "mean row entropy of the attention (nats)",
       [](const HeadInput& h) { return mean_attention_entropy(h.attention); }},
      {"max_attention", "largest attention weight",
       [nan](const HeadInput& h) { return h.attention.size() ? h.attention.maxCoeff() : nan; }},
      {"max_scaled_logit", "largest scaled score q.k/sqrt(d) (needs scores)",
       [](const HeadInput& h) { return max_finite_entry(h.scores); }},
      {"mean_jacobian_norm", "mean over rows of the exact ||diag p - pp^T||_2",
       [nan](const HeadInput& h) {
         const Vector<double> norms = attention_jacobian_norms(h.attention);
         return norms.size() ? norms.mean() : nan;
       }},
      {"max_jacobian_norm", "max over rows of the exact ||diag p - pp^T||_2",
       [nan](const HeadInput& h) {
         const Vector<double> norms = attention_jacobian_norms(h.attention);
         return norms.size() ? norms.maxCoeff() : nan;
       }},
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs and evaluation

/// The report inputs of a forward pass: every layer and head with its attention (required: capture.attention) and,
/// when captured, scores and values. Throws invalid_argument when attention was not captured.
inline std::vector<HeadInput> head_inputs(const model::ForwardResult& result) {
  std::vector<HeadInput> heads;
  for (std::size_t l = 0; l < result.layers.size(); ++l) {
    const model::LayerCapture& layer = result.layers[l];
    if (layer.attention.empty())
      attnscope::detail::throw_invalid_argument("head_inputs", "layer ", l, " has no attention capture");
    for (std::size_t h = 0; h < layer.attention.size(); ++h) {
      HeadInput input;
      input.layer = static_cast<int>(l);
      input.head = static_cast<int>(h);
      input.attention = layer.attention[h].cast<double>();
      if (h < layer.scores.size()) input.scores = layer.scores[h].cast<double>();
      if (h < layer.v.size()) input.values = layer.v[h].cast<double>();
      heads.push_back(std::move(input));
    }
  }
  if (heads.empty()) attnscope::detail::throw_invalid_argument("head_inputs", "the result has no captured layers");
  return heads;
}

/// Evaluates every column for every head. Throws invalid_argument for a head without attention, non-square or
/// empty attention, scores of another shape, duplicate or empty column names, or a column without a function.
/// Cost: the sum of the columns' costs (the standard ones are O(L²) per head).
inline HeadReport compute_head_report(const std::vector<HeadInput>& heads, const std::vector<ReportColumn>& columns,
                                      const model::ProgressCallback& progress = {}) {
  const char* fn = "compute_head_report";
  HeadReport report;
  for (const auto& column : columns) {
    if (column.name.empty() || !column.compute)
      attnscope::detail::throw_invalid_argument(fn, "column '", column.name, "' needs a name and a function");
    if (std::find(report.columns.begin(), report.columns.end(), column.name) != report.columns.end())
      attnscope::detail::throw_invalid_argument(fn, "duplicate column '", column.name, "'");
    report.columns.push_back(column.name);
  }
  int done = 0;
  for (const HeadInput& head : heads) {
    const Index length = head.attention.rows();
    if (length == 0 || head.attention.cols() != length)
      attnscope::detail::throw_invalid_argument(fn, "layer ", head.layer, " head ", head.head, ": attention is ",
                                                head.attention.rows(), "x", head.attention.cols(),
                                                ", expected a non-empty square matrix");
    if (head.scores.size() && (head.scores.rows() != length || head.scores.cols() != length))
      attnscope::detail::throw_invalid_argument(fn, "layer ", head.layer, " head ", head.head, ": scores are ",
                                                head.scores.rows(), "x", head.scores.cols(), ", attention ", length,
                                                "x", length);
    HeadReport::Row row{head.layer, head.head, {}};
    for (const auto& column : columns) row.values.push_back(column.compute(head));
    report.rows.push_back(std::move(row));
    if (progress) progress(++done, static_cast<int>(heads.size()));
  }
  return report;
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

}  // namespace detail

/// Aligned text table (one line per head; NaN printed as "-"), 4 significant digits.
inline std::string head_report_table(const HeadReport& report) {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header{"layer", "head"};
  header.insert(header.end(), report.columns.begin(), report.columns.end());
  cells.push_back(header);
  for (const auto& row : report.rows) {
    std::vector<std::string> line{std::to_string(row.layer), std::to_string(row.head)};
    for (double value : row.values) line.push_back(detail::format_report_value(value, 4));
    cells.push_back(std::move(line));
  }
  std::vector<std::size_t> widths(header.size(), 0);
  for (const auto& line : cells)
    for (std::size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
  std::ostringstream out;
  for (const auto& line : cells) {
    for (std::size_t c = 0; c < line.size(); ++c)
      out << (c ? "  " : "") << std::string(widths[c] - line[c].size(), ' ') << line[c];
    out << "\n";
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

/// JSON: {"columns": [names], "heads": [{"layer": l, "head": h, "<column>": value or null, ...}, ...]}.
inline nlohmann::json head_report_json(const HeadReport& report) {
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& row : report.rows) {
    nlohmann::json entry = {{"layer", row.layer}, {"head", row.head}};
    for (std::size_t c = 0; c < report.columns.size(); ++c)
      entry[report.columns[c]] = std::isfinite(row.values[c]) ? nlohmann::json(row.values[c]) : nlohmann::json();
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
