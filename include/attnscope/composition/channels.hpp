// attnscope/composition/channels.hpp — the sink channel and the content channel of attention rows, and the exact
// decompositions of entropy, Aitchison distance and Jensen–Shannon divergence into a sink part and a content part
// (docs/theory/composition.md §1, §2, §4, §5, §6; derived, verified). A row a is split into the sink mass
// s = Σ_{j∈S} a_j and the content composition c = C(a_j, j ∉ S) ("drop and renormalise" = the CoDA subcomposition).
// Rows are attention distributions: visible parts ≥ 0 summing to 1 within a tolerance; they are closed (divided
// by their sum) before use, so the identities are exact for the closed row. Masked keys are not parts.
#pragma once

#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/coda.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/entropy.hpp"

namespace attnscope::composition {

/// Sink mass and content composition of every row.
template <class Scalar>
struct ChannelSplit {
  Vector<Scalar> sink_mass;     // s = Σ_{j∈S} a_j (of the closed row)
  RowMatrix<Scalar> content;    // c = C(a_j, j ∉ S); 0 at sink columns and masked keys
};

/// Entropy decomposition per row, natural log: entropy = binary + sink_mass·within_sink + content_term (exact).
template <class Scalar>
struct EntropySplit {
  Vector<Scalar> entropy;          // H(a) of the closed row (row_entropy of a/Σa; the keep-convention entropy)
  Vector<Scalar> sink_mass;        // s
  Vector<Scalar> binary;           // H_b(s) = −s ln s − (1−s) ln(1−s)
  Vector<Scalar> within_sink;      // H(a_S / s); 0 for a single sink column
  Vector<Scalar> content_entropy;  // H(c): the drop-convention entropy
  Vector<Scalar> content_term;     // (1 − s)·H(c)
  /// Sink channel's part of H(a): H_b(s) + s·H(a_S/s).
  Vector<Scalar> sink_term() const { return binary + sink_mass.cwiseProduct(within_sink); }
};

/// Orthogonal split of the squared Aitchison distance per row: distance_squared = sink_term + within_sink_term +
/// content_term (exact).
template <class Scalar>
struct AitchisonSplit {
  Vector<Scalar> distance_squared;  // d_A(a, a′)²
  Vector<Scalar> sink_term;         // (b_S(a) − b_S(a′))², b_S the {sink} vs {content} balance
  Vector<Scalar> within_sink_term;  // d_A(a_S, a′_S)²; 0 for a single sink column
  Vector<Scalar> content_term;      // d_A(c, c′)²: the drop-convention squared distance
};

/// Jensen–Shannon chain rule per row (natural log): divergence = sink_term + within_sink_term + content_term.
template <class Scalar>
struct JensenShannonSplit {
  Vector<Scalar> divergence;          // JS(a, a′)
  Vector<Scalar> sink_term;           // JS_b(s, s′) of the two-part compositions (s, 1−s), (s′, 1−s′)
  Vector<Scalar> within_sink_term;    // s̄·JS_{w_S}(a_S/s, a′_S/s′), w_S = s/(s+s′); 0 for one sink column
  Vector<Scalar> content_term;        // (1 − s̄)·JS_w(c, c′), w = (1−s)/(2−s−s′)
  Vector<Scalar> content_divergence;  // JS(c, c′) with equal weights: the drop-convention divergence
};

/// Cosine similarity under both conventions (no exact split exists, §6).
template <class Scalar>
struct CosineConventions {
  Vector<Scalar> keep;  // cos(a, a′) on the full rows
  Vector<Scalar> drop;  // cos(c, c′) on the content compositions
};

namespace detail {

/// A split row after closure: sink mass s, 1 − s (computed as content mass / total), closed sink and content parts.
template <class Scalar>
struct ClosedChannels {
  Scalar sink_mass = 0, content_mass = 0;
  std::vector<Scalar> sink, content;  // each closed to sum 1 (sink left empty-valued zeros when s = 0)
};

template <class Scalar>
ClosedChannels<Scalar> close_channels(const SplitRow<Scalar>& parts) {
  ClosedChannels<Scalar> out;
  const Scalar sink_total = sum_of(parts.sink), content_total = sum_of(parts.content);
  const Scalar total = sink_total + content_total;
  out.sink_mass = sink_total / total;
  out.content_mass = content_total / total;
  out.sink = parts.sink;
  out.content = parts.content;
  for (Scalar& v : out.sink) v = sink_total > 0 ? v / sink_total : Scalar(0);
  for (Scalar& v : out.content) v /= content_total;
  return out;
}

/// H(p) = −Σ p ln p of a channel's closed parts, 0 ln 0 = 0 (the shared row kernel of normalize/entropy.hpp).
template <class Scalar>
Scalar shannon_entropy(const std::vector<Scalar>& p) {
  return attnscope::detail::entropy_of(p.data(), static_cast<Index>(p.size()));
}

/// H_b(s) from s and 1 − s given separately (1 − s computed without cancellation).
template <class Scalar>
Scalar binary_entropy(Scalar s, Scalar one_minus_s) {
  const Scalar parts[2] = {s, one_minus_s};
  return attnscope::detail::entropy_of(parts, Index{2});
}

/// H(a/t) = H(a)/t + ln t per row, t = Σ_visible a: the entropy of each closed row from the entropy of the row as
/// given (row_entropy), exact for t = 1 [derived: −Σ (a/t) ln(a/t) = (1/t)·(−Σ a ln a) + ln t since Σ a = t].
template <class Scalar>
Vector<Scalar> closed_row_entropy(const RowMatrixView<Scalar>& x, const Visibility& visibility) {
  Vector<Scalar> out = row_entropy(x, visibility);
  const Index cols = x.cols();
  for (Index i = 0; i < x.rows(); ++i) {
    Scalar total = 0;
    for (Index j = 0; j < cols; ++j)
      if (visibility.visible(i, j, cols)) total += x(i, j);
    if (total != Scalar(1)) out(i) = out(i) / total + std::log(total);
  }
  return out;
}

/// One part's term of the weighted Jensen–Shannon divergence (§5): w·x·ln(x/m) + (1 − w)·y·ln(y/m) with
/// m = w·x + (1 − w)·y and 0 ln 0 = 0. Summed over the parts of two compositions p, q it is
/// w·KL(p‖m) + (1 − w)·KL(q‖m); w = 1/2 gives the plain JS term ½x ln(2x/(x + y)) + ½y ln(2y/(x + y)). Every JS in
/// this module is a sum of these.
template <class Scalar>
Scalar jensen_shannon_term(Scalar x, Scalar y, Scalar w) {
  const Scalar m = w * x + (1 - w) * y;
  return (w > 0 && x > 0 ? w * x * std::log(x / m) : Scalar(0)) +
         (w < 1 && y > 0 ? (1 - w) * y * std::log(y / m) : Scalar(0));
}

/// Weighted JS: w·KL(p‖m) + (1−w)·KL(q‖m), m = w·p + (1−w)·q (§5), 0 ln 0 = 0.
template <class Scalar>
Scalar weighted_jensen_shannon(const std::vector<Scalar>& p, const std::vector<Scalar>& q, Scalar w) {
  Scalar total = 0;
  for (std::size_t k = 0; k < p.size(); ++k) total += jensen_shannon_term(p[k], q[k], w);
  return total;
}

/// Cosine of two vectors; 0 when either is zero.
template <class Scalar>
Scalar cosine_of(const std::vector<Scalar>& p, const std::vector<Scalar>& q) {
  Scalar dot = 0, pp = 0, qq = 0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    dot += p[k] * q[k];
    pp += p[k] * p[k];
    qq += q[k] * q[k];
  }
  return dot / std::sqrt(pp * qq);
}

/// Validates attention rows for channel functions: distributions over the visible keys, every sink column in range
/// and visible, at least one content key, and content mass > 0 (s = 1 leaves c undefined).
template <class Scalar>
void validate_channels(const char* function, const RowMatrixView<Scalar>& x, const Visibility& visibility,
                       const SinkSet& sinks, double tolerance) {
  validate_distributions<Scalar>(function, x, visibility, tolerance);
  const Index cols = x.cols();
  const std::vector<char> is_sink = sink_flags(function, sinks, cols);
  for (Index i = 0; i < x.rows(); ++i) {
    Scalar content = 0;
    for (Index j = 0; j < cols; ++j)
      if (!is_sink[static_cast<std::size_t>(j)] && visibility.visible(i, j, cols)) content += x(i, j);
    if (!(content > 0))
      attnscope::detail::throw_invalid_argument(function, "row ", i, " has sink mass 1 (content mass ", content,
                             "): the content composition is empty or undefined; skip such rows");
  }
}

/// Log-parts (take_log) or logits of a split row, centred within the sink group and within the content group,
/// plus the balance b_S = √(|S||C|/(|S|+|C|))·(mean l_S − mean l_C) (§4; pivot coordinate for one sink).
template <class Scalar>
struct LogChannels {
  Scalar balance = 0;
  std::vector<Scalar> sink, content;  // centred log-parts of each group
};

template <class Scalar>
LogChannels<Scalar> log_channels(const SplitRow<Scalar>& parts, bool take_log) {
  LogChannels<Scalar> out;
  out.sink = parts.sink;
  out.content = parts.content;
  if (take_log) {
    for (Scalar& v : out.sink) v = std::log(v);
    for (Scalar& v : out.content) v = std::log(v);
  }
  const Scalar k = static_cast<Scalar>(out.sink.size()), m = static_cast<Scalar>(out.content.size());
  const Scalar mean_sink = sum_of(out.sink) / k, mean_content = sum_of(out.content) / m;
  for (Scalar& v : out.sink) v -= mean_sink;
  for (Scalar& v : out.content) v -= mean_content;
  out.balance = std::sqrt(k * m / (k + m)) * (mean_sink - mean_content);
  return out;
}

template <class Scalar>
Scalar squared_difference(const std::vector<Scalar>& p, const std::vector<Scalar>& q) {
  Scalar total = 0;
  for (std::size_t k = 0; k < p.size(); ++k) total += (p[k] - q[k]) * (p[k] - q[k]);
  return total;
}

template <class Scalar>
AitchisonSplit<Scalar> aitchison_split_impl(const char* function, const RowMatrixView<Scalar>& a,
                                            const RowMatrixView<Scalar>& b, const Visibility& visibility,
                                            const SinkSet& sinks, bool from_logits) {
  attnscope::detail::require_same_shape(function, "rows", a, b);
  const PartRule rule = from_logits ? PartRule::finite : PartRule::positive;
  validate_parts<Scalar>(function, a, visibility, rule);
  validate_parts<Scalar>(function, b, visibility, rule);
  const Index rows = a.rows();
  AitchisonSplit<Scalar> out{Vector<Scalar>(rows), Vector<Scalar>(rows), Vector<Scalar>(rows), Vector<Scalar>(rows)};
  const RowMatrix<Scalar> centred_a = from_logits ? clr_from_logits(a, visibility) : clr(a, visibility);
  const RowMatrix<Scalar> centred_b = from_logits ? clr_from_logits(b, visibility) : clr(b, visibility);
  out.distance_squared = (centred_a - centred_b).rowwise().squaredNorm();  // masked entries are 0 in both
  for_each_split_row_pair<Scalar>(function, a, b, visibility, sinks,
                                  [&](Index i, const SplitRow<Scalar>& row_a, const SplitRow<Scalar>& row_b) {
                                    const auto la = log_channels(row_a, !from_logits);
                                    const auto lb = log_channels(row_b, !from_logits);
                                    out.sink_term(i) = (la.balance - lb.balance) * (la.balance - lb.balance);
                                    out.within_sink_term(i) = squared_difference(la.sink, lb.sink);
                                    out.content_term(i) = squared_difference(la.content, lb.content);
                                  });
  return out;
}

template <class Scalar>
Vector<Scalar> sink_balance_impl(const char* function, const RowMatrixView<Scalar>& x, const Visibility& visibility,
                                 const SinkSet& sinks, bool from_logits) {
  validate_parts<Scalar>(function, x, visibility, from_logits ? PartRule::finite : PartRule::positive);
  Vector<Scalar> out(x.rows());
  for_each_split_row<Scalar>(function, x, visibility, sinks, [&](Index i, const SplitRow<Scalar>& parts) {
    out(i) = log_channels(parts, !from_logits).balance;
  });
  return out;
}

}  // namespace detail

/// The column with the largest total attention mass over the rows (the "argmax-mass column" sink choice), among the
/// columns visible in every row (a sink must be a part of every row), as a SinkSet; ties go to the smallest column.
/// Use the same SinkSet for every head being compared. Throws when no column is visible in every row.
template <class Derived>
SinkSet argmax_mass_sink(const Eigen::MatrixBase<Derived>& attention, const Visibility& visibility = {},
                         double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<Derived>;
  const RowMatrixView<Scalar> view(attention.derived());
  detail::validate_distributions<Scalar>("argmax_mass_sink", view, visibility, tolerance);
  Index best = -1;
  double best_mass = -1;
  for (Index j = 0; j < view.cols(); ++j) {
    double mass = 0;
    bool everywhere = true;
    for (Index i = 0; i < view.rows() && everywhere; ++i) {
      everywhere = visibility.visible(i, j, view.cols());
      if (everywhere) mass += static_cast<double>(view(i, j));
    }
    if (everywhere && mass > best_mass) best_mass = mass, best = j;
  }
  if (best < 0) attnscope::detail::throw_invalid_argument("argmax_mass_sink", "no column is visible in every row");
  return SinkSet({best});
}

/// Sink mass s and content composition c of every row (§1): a = (s, (1 − s)·c) over the visible keys.
/// Throws on rows that are not distributions, masked or out-of-range sink columns, and s = 1 (empty content).
template <class Derived>
ChannelSplit<detail::ScalarOf<Derived>> split_sink(const Eigen::MatrixBase<Derived>& attention,
                                                   const Visibility& visibility = {}, const SinkSet& sinks = {},
                                                   double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<Derived>;
  const RowMatrixView<Scalar> view(attention.derived());
  detail::validate_channels<Scalar>("split_sink", view, visibility, sinks, tolerance);
  ChannelSplit<Scalar> out{Vector<Scalar>(view.rows()), RowMatrix<Scalar>::Zero(view.rows(), view.cols())};
  const std::vector<char> is_sink = detail::sink_flags("split_sink", sinks, view.cols());
  for (Index i = 0; i < view.rows(); ++i) {
    Scalar sink = 0, content = 0;
    for (Index j = 0; j < view.cols(); ++j)
      if (visibility.visible(i, j, view.cols())) (is_sink[static_cast<std::size_t>(j)] ? sink : content) += view(i, j);
    out.sink_mass(i) = sink / (sink + content);
    for (Index j = 0; j < view.cols(); ++j)
      if (!is_sink[static_cast<std::size_t>(j)] && visibility.visible(i, j, view.cols()))
        out.content(i, j) = view(i, j) / content;
  }
  return out;
}

/// Entropy split per row (§2, Shannon grouping): H(a) = H_b(s) + s·H(a_S/s) + (1 − s)·H(c), exact for 0 < s < 1
/// (s = 0 allowed; s = 1 throws: c undefined). With the default single sink the middle term is 0.
template <class Derived>
EntropySplit<detail::ScalarOf<Derived>> entropy_split(const Eigen::MatrixBase<Derived>& attention,
                                                      const Visibility& visibility = {}, const SinkSet& sinks = {},
                                                      double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<Derived>;
  const RowMatrixView<Scalar> view(attention.derived());
  detail::validate_channels<Scalar>("entropy_split", view, visibility, sinks, tolerance);
  const Index rows = view.rows();
  EntropySplit<Scalar> out{Vector<Scalar>(rows), Vector<Scalar>(rows), Vector<Scalar>(rows),
                           Vector<Scalar>(rows), Vector<Scalar>(rows), Vector<Scalar>(rows)};
  out.entropy = detail::closed_row_entropy(view, visibility);  // rows validated as distributions above
  detail::for_each_split_row<Scalar>("entropy_split", view, visibility, sinks,
                                     [&](Index i, const detail::SplitRow<Scalar>& parts) {
                                       const auto row = detail::close_channels(parts);
                                       out.sink_mass(i) = row.sink_mass;
                                       out.binary(i) = detail::binary_entropy(row.sink_mass, row.content_mass);
                                       out.within_sink(i) = detail::shannon_entropy(row.sink);
                                       out.content_entropy(i) = detail::shannon_entropy(row.content);
                                       out.content_term(i) = row.content_mass * out.content_entropy(i);
                                     });
  return out;
}

/// Sink balance b_S(a) = √(|S||C|/(|S|+|C|))·ln(g(a_S)/g(a_C)) per row (§4; robCompositions pivotCoord(x)[,1] for
/// S = {0}). Parts > 0.
template <class Derived>
Vector<detail::ScalarOf<Derived>> sink_balance(const Eigen::MatrixBase<Derived>& attention,
                                               const Visibility& visibility = {}, const SinkSet& sinks = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  return detail::sink_balance_impl<Scalar>("sink_balance", RowMatrixView<Scalar>(attention.derived()), visibility,
                                           sinks, false);
}

/// Sink balance of softmax(z) from logits: √(|S||C|/(|S|+|C|))·(mean z_S − mean z_C) (§4).
template <class Derived>
Vector<detail::ScalarOf<Derived>> sink_balance_from_logits(const Eigen::MatrixBase<Derived>& logits,
                                                           const Visibility& visibility = {},
                                                           const SinkSet& sinks = {}) {
  using Scalar = detail::ScalarOf<Derived>;
  return detail::sink_balance_impl<Scalar>("sink_balance_from_logits", RowMatrixView<Scalar>(logits.derived()),
                                           visibility, sinks, true);
}

/// Orthogonal split of the squared Aitchison distance between matched rows (§4): d_A² = (b_S − b′_S)² +
/// d_A(a_S, a′_S)² + d_A(c, c′)². Parts > 0 (rows need not be closed: every term is scale invariant).
template <class DerivedA, class DerivedB>
AitchisonSplit<detail::ScalarOf<DerivedA>> aitchison_split(const Eigen::MatrixBase<DerivedA>& a,
                                                           const Eigen::MatrixBase<DerivedB>& b,
                                                           const Visibility& visibility = {},
                                                           const SinkSet& sinks = {}) {
  using Scalar = detail::ScalarOf<DerivedA>;
  return detail::aitchison_split_impl<Scalar>("aitchison_split", RowMatrixView<Scalar>(a.derived()),
                                              RowMatrixView<Scalar>(b.derived()), visibility, sinks, false);
}

/// The same split of d_A(softmax z, softmax z′)² computed from logits (exact, no zero handling; §4).
template <class DerivedA, class DerivedB>
AitchisonSplit<detail::ScalarOf<DerivedA>> aitchison_split_from_logits(const Eigen::MatrixBase<DerivedA>& logits_a,
                                                                       const Eigen::MatrixBase<DerivedB>& logits_b,
                                                                       const Visibility& visibility = {},
                                                                       const SinkSet& sinks = {}) {
  using Scalar = detail::ScalarOf<DerivedA>;
  return detail::aitchison_split_impl<Scalar>("aitchison_split_from_logits", RowMatrixView<Scalar>(logits_a.derived()),
                                              RowMatrixView<Scalar>(logits_b.derived()), visibility, sinks, true);
}

/// Jensen–Shannon divergence JS(a, a′) = ½KL(a‖m) + ½KL(a′‖m), m = (a + a′)/2, natural log, per matched row.
template <class DerivedA, class DerivedB>
Vector<detail::ScalarOf<DerivedA>> jensen_shannon(const Eigen::MatrixBase<DerivedA>& a,
                                                  const Eigen::MatrixBase<DerivedB>& b,
                                                  const Visibility& visibility = {},
                                                  double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<DerivedA>;
  const RowMatrixView<Scalar> view_a(a.derived()), view_b(b.derived());
  attnscope::detail::require_same_shape("jensen_shannon", "rows", view_a, view_b);
  detail::validate_distributions<Scalar>("jensen_shannon", view_a, visibility, tolerance);
  detail::validate_distributions<Scalar>("jensen_shannon", view_b, visibility, tolerance);
  Vector<Scalar> out(view_a.rows());
  for (Index i = 0; i < view_a.rows(); ++i) {
    std::vector<Scalar> p, q;
    for (Index j = 0; j < view_a.cols(); ++j)
      if (visibility.visible(i, j, view_a.cols())) p.push_back(view_a(i, j)), q.push_back(view_b(i, j));
    const Scalar sum_p = detail::sum_of(p), sum_q = detail::sum_of(q);
    for (Scalar& v : p) v /= sum_p;
    for (Scalar& v : q) v /= sum_q;
    out(i) = detail::weighted_jensen_shannon(p, q, Scalar(0.5));
  }
  return out;
}

/// Jensen–Shannon chain rule per matched row (§5): JS(a, a′) = JS_b(s, s′) + s̄·JS_{w_S}(a_S/s, a′_S/s′)
/// + (1 − s̄)·JS_w(c, c′), w = (1−s)/(2−s−s′); exact for 0 ≤ s, s′ < 1, zeros in c allowed.
template <class DerivedA, class DerivedB>
JensenShannonSplit<detail::ScalarOf<DerivedA>> js_split(const Eigen::MatrixBase<DerivedA>& a,
                                                        const Eigen::MatrixBase<DerivedB>& b,
                                                        const Visibility& visibility = {}, const SinkSet& sinks = {},
                                                        double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<DerivedA>;
  const RowMatrixView<Scalar> view_a(a.derived()), view_b(b.derived());
  attnscope::detail::require_same_shape("js_split", "rows", view_a, view_b);
  detail::validate_channels<Scalar>("js_split", view_a, visibility, sinks, tolerance);
  detail::validate_channels<Scalar>("js_split", view_b, visibility, sinks, tolerance);
  const Index rows = view_a.rows();
  JensenShannonSplit<Scalar> out{jensen_shannon(view_a, view_b, visibility, tolerance), Vector<Scalar>(rows),
                                 Vector<Scalar>(rows), Vector<Scalar>(rows), Vector<Scalar>(rows)};
  detail::for_each_split_row_pair<Scalar>(
      "js_split", view_a, view_b, visibility, sinks,
      [&](Index i, const detail::SplitRow<Scalar>& row_a, const detail::SplitRow<Scalar>& row_b) {
        const auto p = detail::close_channels(row_a), q = detail::close_channels(row_b);
        const Scalar mean_sink = (p.sink_mass + q.sink_mass) / 2, mean_content = (p.content_mass + q.content_mass) / 2;
        out.sink_term(i) = detail::weighted_jensen_shannon(std::vector<Scalar>{p.sink_mass, p.content_mass},
                                                           std::vector<Scalar>{q.sink_mass, q.content_mass}, Scalar(0.5));
        out.within_sink_term(i) =
            mean_sink > 0 ? mean_sink * detail::weighted_jensen_shannon(p.sink, q.sink, p.sink_mass / (2 * mean_sink))
                          : Scalar(0);
        out.content_term(i) =
            mean_content * detail::weighted_jensen_shannon(p.content, q.content, p.content_mass / (2 * mean_content));
        out.content_divergence(i) = detail::weighted_jensen_shannon(p.content, q.content, Scalar(0.5));
      });
  return out;
}

/// Cosine similarity of matched rows over the visible keys.
template <class DerivedA, class DerivedB>
Vector<detail::ScalarOf<DerivedA>> cosine(const Eigen::MatrixBase<DerivedA>& a, const Eigen::MatrixBase<DerivedB>& b,
                                          const Visibility& visibility = {},
                                          double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<DerivedA>;
  const RowMatrixView<Scalar> view_a(a.derived()), view_b(b.derived());
  attnscope::detail::require_same_shape("cosine", "rows", view_a, view_b);
  detail::validate_distributions<Scalar>("cosine", view_a, visibility, tolerance);
  detail::validate_distributions<Scalar>("cosine", view_b, visibility, tolerance);
  Vector<Scalar> out(view_a.rows());
  for (Index i = 0; i < view_a.rows(); ++i) {
    std::vector<Scalar> p, q;
    for (Index j = 0; j < view_a.cols(); ++j)
      if (visibility.visible(i, j, view_a.cols())) p.push_back(view_a(i, j)), q.push_back(view_b(i, j));
    out(i) = detail::cosine_of(p, q);
  }
  return out;
}

/// Cosine similarity under keep (full rows) and drop (content compositions) conventions (§6): no split exists;
/// cos(a, a′) = [s s′ + (1−s)(1−s′)⟨c, c′⟩]/(‖a‖‖a′‖) tends to 1 as s, s′ → 1 whatever c, c′ are.
template <class DerivedA, class DerivedB>
CosineConventions<detail::ScalarOf<DerivedA>> cosine_conventions(const Eigen::MatrixBase<DerivedA>& a,
                                                                 const Eigen::MatrixBase<DerivedB>& b,
                                                                 const Visibility& visibility = {},
                                                                 const SinkSet& sinks = {},
                                                                 double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<DerivedA>;
  const RowMatrixView<Scalar> view_a(a.derived()), view_b(b.derived());
  attnscope::detail::require_same_shape("cosine_conventions", "rows", view_a, view_b);
  detail::validate_channels<Scalar>("cosine_conventions", view_a, visibility, sinks, tolerance);
  detail::validate_channels<Scalar>("cosine_conventions", view_b, visibility, sinks, tolerance);
  CosineConventions<Scalar> out{cosine(view_a, view_b, visibility, tolerance), Vector<Scalar>(view_a.rows())};
  detail::for_each_split_row_pair<Scalar>(
      "cosine_conventions", view_a, view_b, visibility, sinks,
      [&](Index i, const detail::SplitRow<Scalar>& row_a, const detail::SplitRow<Scalar>& row_b) {
        out.drop(i) = detail::cosine_of(row_a.content, row_b.content);
      });
  return out;
}

}  // namespace attnscope::composition
