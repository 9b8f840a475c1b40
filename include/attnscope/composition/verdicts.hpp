// attnscope/composition/verdicts.hpp — metrics under the keep / drop conventions, verdicts ("which of two heads
// is more similar to a reference head") and the keep-vs-drop verdict flip rate (docs/theory/composition.md §1, §7).
// Definitions of the verdict, the sampling unit and tie handling are [derived] (the paper's are not published).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/channels.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::composition {

/// keep: the metric on the full row a; drop: on the content composition c (sink deleted, renormalised) (§1).
enum class Convention { keep, drop };

/// Metrics audited by the paper (cosine, Jensen–Shannon, entropy) plus the Aitchison distance (§3, §7).
enum class Metric { cosine, jensen_shannon, aitchison, entropy };

/// True for similarities (larger = more alike: cosine), false for distances/divergences.
inline bool is_similarity(Metric metric) { return metric == Metric::cosine; }

/// Name used in reports: "cosine", "js", "aitchison", "entropy".
inline const char* metric_name(Metric metric) {
  switch (metric) {
    case Metric::cosine: return "cosine";
    case Metric::jensen_shannon: return "js";
    case Metric::aitchison: return "aitchison";
    case Metric::entropy: return "entropy";
  }
  return "unknown";
}

/// Single-row metric under a convention: Metric::entropy only (keep: H(a); drop: H(c)).
template <class Derived>
Vector<detail::ScalarOf<Derived>> row_metric(Metric metric, const Eigen::MatrixBase<Derived>& attention,
                                             Convention convention, const Visibility& visibility = {},
                                             const SinkSet& sinks = {},
                                             double tolerance = detail::default_row_sum_tolerance) {
  if (metric != Metric::entropy)
    attnscope::detail::throw_invalid_argument("row_metric", "metric ", metric_name(metric),
                                              " compares two rows; use pair_metric");
  if (convention == Convention::keep) {
    detail::validate_channels<detail::ScalarOf<Derived>>("row_metric", RowMatrixView<detail::ScalarOf<Derived>>(attention.derived()),
                                                         visibility, sinks, tolerance);
    return entropy_split(attention, visibility, sinks, tolerance).entropy;
  }
  return entropy_split(attention, visibility, sinks, tolerance).content_entropy;
}

/// Two-row metric of matched rows under a convention: cosine, Jensen–Shannon (natural log) or Aitchison distance
/// (parts > 0) on a (keep) or on c (drop). Rows must have a content part (s < 1) under both conventions, so the
/// same rows are compared either way.
template <class DerivedA, class DerivedB>
Vector<detail::ScalarOf<DerivedA>> pair_metric(Metric metric, const Eigen::MatrixBase<DerivedA>& a,
                                               const Eigen::MatrixBase<DerivedB>& b, Convention convention,
                                               const Visibility& visibility = {}, const SinkSet& sinks = {},
                                               double tolerance = detail::default_row_sum_tolerance) {
  using Scalar = detail::ScalarOf<DerivedA>;
  const bool keep = convention == Convention::keep;
  switch (metric) {
    case Metric::cosine: {
      auto both = cosine_conventions(a, b, visibility, sinks, tolerance);
      return keep ? both.keep : both.drop;
    }
    case Metric::jensen_shannon: {
      auto split = js_split(a, b, visibility, sinks, tolerance);
      return keep ? split.divergence : split.content_divergence;
    }
    case Metric::aitchison: {
      const RowMatrixView<Scalar> view_a(a.derived()), view_b(b.derived());
      detail::validate_channels<Scalar>("pair_metric", view_a, visibility, sinks, tolerance);
      detail::validate_channels<Scalar>("pair_metric", view_b, visibility, sinks, tolerance);
      auto split = aitchison_split(view_a, view_b, visibility, sinks);
      return (keep ? split.distance_squared : split.content_term).cwiseSqrt();
    }
    case Metric::entropy: break;
  }
  attnscope::detail::throw_invalid_argument("pair_metric", "metric entropy is a single-row metric; use row_metric");
}

/// Which of two candidate heads is closer to a reference head, by the metric averaged over matched rows (§7):
/// +1 = first candidate closer (more similar), −1 = second closer, 0 = tie (|difference| ≤ tie_tolerance).
template <class Scalar>
int verdict(Metric metric, const RowMatrix<Scalar>& reference, const RowMatrix<Scalar>& first,
            const RowMatrix<Scalar>& second, Convention convention, const Visibility& visibility = {},
            const SinkSet& sinks = {}, double tie_tolerance = 1e-12,
            double tolerance = detail::default_row_sum_tolerance) {
  if (!(tie_tolerance >= 0))
    attnscope::detail::throw_invalid_argument("verdict", "tie_tolerance must be >= 0, got ", tie_tolerance);
  const double to_first =
      static_cast<double>(pair_metric(metric, reference, first, convention, visibility, sinks, tolerance).mean());
  const double to_second =
      static_cast<double>(pair_metric(metric, reference, second, convention, visibility, sinks, tolerance).mean());
  const double difference = is_similarity(metric) ? to_first - to_second : to_second - to_first;
  if (std::abs(difference) <= tie_tolerance) return 0;
  return difference > 0 ? 1 : -1;
}

/// Sampling unit of the flip rate (§7, [derived]).
enum class Sampler {
  triples,         // reference head h and an unordered candidate pair {h1, h2}, h ∉ {h1, h2}
  pairs_of_pairs,  // two distinct unordered head pairs: which pair is more alike
};

/// Options of flip_rate.
struct FlipOptions {
  Sampler sampler = Sampler::triples;
  double tie_tolerance = 1e-12;  // a unit whose two mean metric values differ by ≤ this under keep OR drop is a tie
  Index samples = 0;             // 0 = enumerate every unit; otherwise this many units drawn with replacement
  std::uint64_t seed = 0;        // for sampled units (attnscope::Random)
};

/// Result of a flip-rate computation.
struct FlipResult {
  Index units = 0;  // units examined (triples, pairs of pairs, or head pairs for entropy)
  Index ties = 0;   // units excluded as ties under either convention
  Index flips = 0;  // units whose keep and drop verdicts differ
  /// flips / (units − ties); 0 when every unit is a tie.
  double rate() const { return units > ties ? static_cast<double>(flips) / static_cast<double>(units - ties) : 0.0; }
};

namespace detail {

template <class Value>
int sign_with_tie(Value difference, double tie_tolerance) {
  if (std::abs(static_cast<double>(difference)) <= tie_tolerance) return 0;
  return difference > 0 ? 1 : -1;
}

/// Visits the units of a flip-rate computation: unit(first, second) compares the mean metric of pair `first` with
/// that of pair `second` (pairs as index pairs into the head set). Enumerates or samples per the options.
template <class Unit>
void for_each_flip_unit(Index heads, const FlipOptions& options, Unit&& unit) {
  using Pair = std::pair<Index, Index>;
  Random random(options.seed);
  auto draw = [&](Index bound) { return static_cast<Index>(random.below(static_cast<std::uint64_t>(bound))); };
  if (options.sampler == Sampler::triples) {
    if (heads < 3) attnscope::detail::throw_invalid_argument("flip_rate", "triples need at least 3 heads, got ", heads);
    if (options.samples == 0) {
      for (Index h = 0; h < heads; ++h)
        for (Index h1 = 0; h1 < heads; ++h1)
          for (Index h2 = h1 + 1; h2 < heads; ++h2)
            if (h1 != h && h2 != h) unit(Pair{h, h1}, Pair{h, h2});
      return;
    }
    for (Index k = 0; k < options.samples; ++k) {
      const Index h = draw(heads);
      Index h1 = draw(heads - 1), h2 = draw(heads - 2);
      h1 += h1 >= h;                                          // h1 uniform over heads ≠ h
      const Index low = h < h1 ? h : h1, high = h < h1 ? h1 : h;
      h2 += h2 >= low;                                        // h2 uniform over heads ∉ {h, h1}
      h2 += h2 >= high;
      unit(Pair{h, h1}, Pair{h, h2});
    }
    return;
  }
  if (heads < 3)
    attnscope::detail::throw_invalid_argument("flip_rate", "pairs of pairs need at least 3 heads, got ", heads);
  std::vector<Pair> pairs;
  for (Index a = 0; a < heads; ++a)
    for (Index b = a + 1; b < heads; ++b) pairs.emplace_back(a, b);
  const Index count = static_cast<Index>(pairs.size());
  if (options.samples == 0) {
    for (Index p = 0; p < count; ++p)
      for (Index q = p + 1; q < count; ++q) unit(pairs[static_cast<std::size_t>(p)], pairs[static_cast<std::size_t>(q)]);
    return;
  }
  for (Index k = 0; k < options.samples; ++k) {
    const Index p = draw(count);
    Index q = draw(count - 1);
    q += q >= p;
    unit(pairs[static_cast<std::size_t>(p)], pairs[static_cast<std::size_t>(q)]);
  }
}

}  // namespace detail

/// Flip rate from precomputed head-by-head mean metric matrices (keep and drop; see mean_pair_metric_matrix).
/// Verdict of a unit comparing pairs P and Q: sign(M[P] − M[Q]) (reversed for similarities, which does not change
/// whether keep and drop agree). A unit is a tie, and excluded, when |M[P] − M[Q]| ≤ tie_tolerance under keep or
/// under drop. Rate = flips / (units − ties).
template <class DerivedKeep, class DerivedDrop>
FlipResult flip_rate_from_matrices(const Eigen::MatrixBase<DerivedKeep>& keep, const Eigen::MatrixBase<DerivedDrop>& drop,
                                   const FlipOptions& options = {}) {
  attnscope::detail::require_same_shape("flip_rate_from_matrices", "keep/drop", keep, drop);
  if (keep.rows() != keep.cols())
    attnscope::detail::throw_invalid_argument("flip_rate_from_matrices", "matrices must be square, got ", keep.rows(),
                                              "x", keep.cols());
  attnscope::detail::require_finite("flip_rate_from_matrices", keep);
  attnscope::detail::require_finite("flip_rate_from_matrices", drop);
  if (!(options.tie_tolerance >= 0) || options.samples < 0)
    attnscope::detail::throw_invalid_argument("flip_rate_from_matrices",
                                              "tie_tolerance must be >= 0 and samples >= 0, got ",
                                              options.tie_tolerance, " and ", options.samples);
  FlipResult result;
  detail::for_each_flip_unit(keep.rows(), options, [&](std::pair<Index, Index> p, std::pair<Index, Index> q) {
    ++result.units;
    const int verdict_keep = detail::sign_with_tie(keep(p.first, p.second) - keep(q.first, q.second), options.tie_tolerance);
    const int verdict_drop = detail::sign_with_tie(drop(p.first, p.second) - drop(q.first, q.second), options.tie_tolerance);
    if (verdict_keep == 0 || verdict_drop == 0) ++result.ties;
    else if (verdict_keep != verdict_drop) ++result.flips;
  });
  return result;
}

/// Flip rate of the entropy verdict "which of two heads is more focused" (lower mean entropy; §7 [derived]) over
/// every unordered head pair: keep compares mean H(a), drop compares mean H(c); ties as in flip_rate_from_matrices.
template <class DerivedKeep, class DerivedDrop>
FlipResult entropy_flip_rate(const Eigen::MatrixBase<DerivedKeep>& keep_means,
                             const Eigen::MatrixBase<DerivedDrop>& drop_means, double tie_tolerance = 1e-12) {
  if (keep_means.size() != drop_means.size() || keep_means.size() < 2)
    attnscope::detail::throw_invalid_argument("entropy_flip_rate",
                                              "need two equally long vectors of >= 2 head means, got ",
                                              keep_means.size(), " and ", drop_means.size());
  attnscope::detail::require_finite("entropy_flip_rate", keep_means);
  attnscope::detail::require_finite("entropy_flip_rate", drop_means);
  FlipResult result;
  for (Index a = 0; a < keep_means.size(); ++a)
    for (Index b = a + 1; b < keep_means.size(); ++b) {
      ++result.units;
      const int verdict_keep = detail::sign_with_tie(keep_means(a) - keep_means(b), tie_tolerance);
      const int verdict_drop = detail::sign_with_tie(drop_means(a) - drop_means(b), tie_tolerance);
      if (verdict_keep == 0 || verdict_drop == 0) ++result.ties;
      else if (verdict_keep != verdict_drop) ++result.flips;
    }
  return result;
}

/// Head-by-head mean metric matrices under both conventions.
struct ConventionMatrices {
  RowMatrix<double> keep, drop;
};

namespace detail {

/// One head's rows in split form: per row the sink mass s and the closed sink parts a_S/s followed by the closed
/// content parts c (offsets shared by every head with the same visibility and sink set); optionally their logs.
struct HeadChannels {
  std::vector<double> sink_mass, values, logs;
};

/// Row layout shared by matched heads: offset of each row's values and its number of content parts.
struct ChannelLayout {
  Index sink_parts = 0;
  std::vector<Index> offset, content_parts;
};

inline ChannelLayout channel_layout(Index rows, Index cols, const Visibility& visibility, const SinkSet& sinks) {
  ChannelLayout layout;
  layout.sink_parts = sinks.size();
  Index next = 0;
  for (Index i = 0; i < rows; ++i) {
    const Index n = visibility.visible_count(i, cols);
    layout.offset.push_back(next);
    layout.content_parts.push_back(n - sinks.size());
    next += n;
  }
  layout.offset.push_back(next);
  return layout;
}

template <class Scalar>
HeadChannels head_channels(const RowMatrix<Scalar>& head, const ChannelLayout& layout, const Visibility& visibility,
                           const SinkSet& sinks, bool with_logs) {
  HeadChannels out;
  out.sink_mass.resize(static_cast<std::size_t>(head.rows()));
  out.values.resize(static_cast<std::size_t>(layout.offset.back()));
  for_each_split_row<Scalar>("pair_metric_matrices", head, visibility, sinks, [&](Index i, const SplitRow<Scalar>& parts) {
    const auto closed = close_channels(parts);
    out.sink_mass[static_cast<std::size_t>(i)] = static_cast<double>(closed.sink_mass);
    double* target = out.values.data() + layout.offset[static_cast<std::size_t>(i)];
    for (Scalar v : closed.sink) *target++ = static_cast<double>(v);
    for (Scalar v : closed.content) *target++ = static_cast<double>(v);
  });
  if (with_logs) {
    out.logs.resize(out.values.size());
    for (std::size_t k = 0; k < out.values.size(); ++k) out.logs[k] = std::log(out.values[k]);
  }
  return out;
}

/// Full-row part k of a split row: s·(a_S/s)_k for sink parts, (1 − s)·c_k for content parts.
inline double full_part(const double* values, Index k, Index sink_parts, double s) {
  return k < sink_parts ? s * values[k] : (1 - s) * values[k];
}

/// Keep and drop values of a metric for one matched row of two heads (parts from HeadChannels).
inline std::pair<double, double> row_pair_metric(Metric metric, const double* a, const double* b, const double* log_a,
                                                 const double* log_b, Index sink_parts, Index content_parts, double s_a,
                                                 double s_b) {
  const Index n = sink_parts + content_parts;
  const double* content_a = a + sink_parts;
  const double* content_b = b + sink_parts;
  switch (metric) {
    case Metric::cosine: {
      double dot = 0, norm_a = 0, norm_b = 0, content_dot = 0, content_a2 = 0, content_b2 = 0;
      for (Index k = 0; k < n; ++k) {
        const double x = full_part(a, k, sink_parts, s_a), y = full_part(b, k, sink_parts, s_b);
        dot += x * y, norm_a += x * x, norm_b += y * y;
      }
      for (Index k = 0; k < content_parts; ++k)
        content_dot += content_a[k] * content_b[k], content_a2 += content_a[k] * content_a[k],
            content_b2 += content_b[k] * content_b[k];
      return {dot / std::sqrt(norm_a * norm_b), content_dot / std::sqrt(content_a2 * content_b2)};
    }
    case Metric::jensen_shannon: {
      double keep = 0, drop = 0;
      for (Index k = 0; k < n; ++k)
        keep += jensen_shannon_term(full_part(a, k, sink_parts, s_a), full_part(b, k, sink_parts, s_b), 0.5);
      for (Index k = 0; k < content_parts; ++k) drop += jensen_shannon_term(content_a[k], content_b[k], 0.5);
      return {keep, drop};
    }
    case Metric::aitchison: {
      // keep: logs of the full row are ln s + ln(a_S/s) for sink parts, ln(1−s) + ln c for content parts
      auto full_log = [sink_parts](const double* logs, Index k, double s) {
        return k < sink_parts ? std::log(s) + logs[k] : std::log1p(-s) + logs[k];
      };
      double mean_a = 0, mean_b = 0, content_mean_a = 0, content_mean_b = 0;
      for (Index k = 0; k < n; ++k) mean_a += full_log(log_a, k, s_a), mean_b += full_log(log_b, k, s_b);
      for (Index k = 0; k < content_parts; ++k) content_mean_a += log_a[sink_parts + k], content_mean_b += log_b[sink_parts + k];
      mean_a /= static_cast<double>(n), mean_b /= static_cast<double>(n);
      content_mean_a /= static_cast<double>(content_parts), content_mean_b /= static_cast<double>(content_parts);
      double keep = 0, drop = 0;
      for (Index k = 0; k < n; ++k) {
        const double d = (full_log(log_a, k, s_a) - mean_a) - (full_log(log_b, k, s_b) - mean_b);
        keep += d * d;
      }
      for (Index k = 0; k < content_parts; ++k) {
        const double d = (log_a[sink_parts + k] - content_mean_a) - (log_b[sink_parts + k] - content_mean_b);
        drop += d * d;
      }
      return {std::sqrt(keep), std::sqrt(drop)};
    }
    case Metric::entropy: break;
  }
  return {0.0, 0.0};
}

}  // namespace detail

namespace detail {

/// Validates matched heads once, splits their rows once, then fills symmetric keep/drop matrices with the row
/// average of row_kernel(a, b, log_a, log_b, sink_parts, content_parts, s_a, s_b) → {keep, drop} for every head pair
/// (diagonal included). Pairs run in parallel; each pair sums its rows in order (identical for any thread count).
template <class Scalar, class RowKernel>
ConventionMatrices pair_matrices_by(const char* function, const std::vector<RowMatrix<Scalar>>& heads,
                                    const Visibility& visibility, const SinkSet& sinks, double tolerance,
                                    bool with_logs, RowKernel&& row_kernel) {
  if (heads.size() < 2)
    attnscope::detail::throw_invalid_argument(function, "need at least 2 heads, got ", heads.size());
  for (const auto& head : heads) {
    attnscope::detail::require_same_shape(function, "heads", head, heads.front());
    validate_channels<Scalar>(function, head, visibility, sinks, tolerance);
    if (with_logs) validate_parts<Scalar>(function, head, visibility, PartRule::positive);
  }
  const Index count = static_cast<Index>(heads.size()), rows = heads.front().rows();
  const ChannelLayout layout = channel_layout(rows, heads.front().cols(), visibility, sinks);
  std::vector<HeadChannels> channels;
  for (const auto& head : heads) channels.push_back(head_channels(head, layout, visibility, sinks, with_logs));
  ConventionMatrices out{RowMatrix<double>(count, count), RowMatrix<double>(count, count)};
  std::vector<std::pair<Index, Index>> pairs;
  for (Index h = 0; h < count; ++h)
    for (Index g = h; g < count; ++g) pairs.emplace_back(h, g);
  attnscope::detail::for_each_row(static_cast<Index>(pairs.size()), rows * heads.front().cols(), [&](Index p) {
    const auto [h, g] = pairs[static_cast<std::size_t>(p)];
    const auto& a = channels[static_cast<std::size_t>(h)];
    const auto& b = channels[static_cast<std::size_t>(g)];
    double keep = 0, drop = 0;
    for (Index i = 0; i < rows; ++i) {
      const std::size_t offset = static_cast<std::size_t>(layout.offset[static_cast<std::size_t>(i)]);
      const auto value = row_kernel(a.values.data() + offset, b.values.data() + offset,
                                    with_logs ? a.logs.data() + offset : nullptr,
                                    with_logs ? b.logs.data() + offset : nullptr, layout.sink_parts,
                                    layout.content_parts[static_cast<std::size_t>(i)],
                                    a.sink_mass[static_cast<std::size_t>(i)], b.sink_mass[static_cast<std::size_t>(i)]);
      keep += value.first, drop += value.second;
    }
    out.keep(h, g) = out.keep(g, h) = keep / static_cast<double>(rows);
    out.drop(h, g) = out.drop(g, h) = drop / static_cast<double>(rows);
  });
  return out;
}

}  // namespace detail

/// Head-by-head matrices of a two-row metric averaged over matched rows under both conventions,
/// M(h, h′) = mean_i metric(a_{h,i}, a_{h′,i}) on full rows (keep) and on content compositions (drop); the diagonal
/// is the metric of a row with itself. Every head has the same shape, visibility and sink set; rows are validated and
/// split once per head, then each pair costs one pass over the rows. Aitchison needs parts > 0. O(H²·rows·cols).
template <class Scalar>
ConventionMatrices pair_metric_matrices(const std::vector<RowMatrix<Scalar>>& heads, Metric metric,
                                        const Visibility& visibility = {}, const SinkSet& sinks = {},
                                        double tolerance = detail::default_row_sum_tolerance) {
  if (metric == Metric::entropy)
    attnscope::detail::throw_invalid_argument("pair_metric_matrices",
                                              "metric entropy is a single-row metric; use row_metric");
  return detail::pair_matrices_by("pair_metric_matrices", heads, visibility, sinks, tolerance,
                                  metric == Metric::aitchison,
                                  [metric](const double* a, const double* b, const double* log_a, const double* log_b,
                                           Index sink_parts, Index content_parts, double s_a, double s_b) {
                                    return detail::row_pair_metric(metric, a, b, log_a, log_b, sink_parts,
                                                                   content_parts, s_a, s_b);
                                  });
}

/// One convention of pair_metric_matrices.
template <class Scalar>
RowMatrix<double> mean_pair_metric_matrix(const std::vector<RowMatrix<Scalar>>& heads, Metric metric,
                                          Convention convention, const Visibility& visibility = {},
                                          const SinkSet& sinks = {},
                                          double tolerance = detail::default_row_sum_tolerance) {
  auto both = pair_metric_matrices(heads, metric, visibility, sinks, tolerance);
  return convention == Convention::keep ? both.keep : both.drop;
}

/// Keep-vs-drop flip rate over a set of heads (§7 [derived]): cosine / JS / Aitchison via mean metric matrices and
/// flip_rate_from_matrices (units per options.sampler); entropy via entropy_flip_rate over head pairs.
template <class Scalar>
FlipResult flip_rate(const std::vector<RowMatrix<Scalar>>& heads, Metric metric, const Visibility& visibility = {},
                     const FlipOptions& options = {}, const SinkSet& sinks = {},
                     double tolerance = detail::default_row_sum_tolerance) {
  if (heads.size() < 3)
    attnscope::detail::throw_invalid_argument("flip_rate", "need at least 3 heads, got ", heads.size());
  if (metric == Metric::entropy) {
    Vector<double> keep(static_cast<Index>(heads.size())), drop(static_cast<Index>(heads.size()));
    for (std::size_t h = 0; h < heads.size(); ++h) {
      keep(static_cast<Index>(h)) = static_cast<double>(
          row_metric(metric, heads[h], Convention::keep, visibility, sinks, tolerance).mean());
      drop(static_cast<Index>(h)) = static_cast<double>(
          row_metric(metric, heads[h], Convention::drop, visibility, sinks, tolerance).mean());
    }
    return entropy_flip_rate(keep, drop, options.tie_tolerance);
  }
  const auto both = pair_metric_matrices(heads, metric, visibility, sinks, tolerance);
  return flip_rate_from_matrices(both.keep, both.drop, options);
}

}  // namespace attnscope::composition
