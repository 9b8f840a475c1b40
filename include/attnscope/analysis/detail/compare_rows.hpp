// attnscope/analysis/detail/compare_rows.hpp — the per-row work of analysis::compare_models: one query row of two
// models' attention gathered over its visible keys, its entropy split into the sink and content channels, the
// Jensen–Shannon divergence of the two rows under the keep and the drop convention (both from the composition
// module) and the overlap of their top-k keys; plus the per-head running sums and the block-max images.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/channels.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/entropy.hpp"

namespace attnscope::analysis::detail {

/// The visibility of query rows first_row.. of a layer whose rows 0.. see `layer` (the model's causal prefix or
/// causal sliding window, shifted by first_row rows). Other visibilities are not produced by the model and throw.
inline Visibility compare_block_visibility(const Visibility& layer, Index first_row) {
  const bool plain = layer.key_mask().size() == 0 && layer.sink_keys().empty();
  if (layer.kind() == Visibility::Kind::causal_prefix && plain) return Causal{layer.causal_offset() + first_row};
  if (layer.kind() == Visibility::Kind::band && layer.is_causal() && plain)
    return SlidingWindow{layer.window(), true, layer.causal_offset() + first_row};
  attnscope::detail::throw_invalid_argument("analysis::compare_models",
                                            "the layer's visibility is neither causal nor a causal sliding window");
}

/// One query row of both models over its visible keys, in double: the parts and where the sink keys sit among them.
struct ComparedRow {
  std::vector<double> a, b;
  std::vector<Index> sinks;     // positions in a/b of the visible sink keys
  std::vector<Index> columns;   // the key of each position
};

/// Gathers row `row` of the two probability blocks over the keys either model's visibility lets it see (the
/// union: a layer may have a sliding window in one model only; a key the other model does not see has weight 0 there).
template <class Scalar>
void gather_compared_row(const RowMatrix<Scalar>& a, const RowMatrix<Scalar>& b, Index row,
                         const Visibility& visibility_a, const Visibility& visibility_b,
                         const std::vector<Index>& sink_keys, ComparedRow& out) {
  out.a.clear(), out.b.clear(), out.sinks.clear(), out.columns.clear();
  const Index cols = a.cols();
  for (Index j = 0; j < cols; ++j) {
    if (!visibility_a.visible(row, j, cols) && !visibility_b.visible(row, j, cols)) continue;
    if (std::binary_search(sink_keys.begin(), sink_keys.end(), j)) out.sinks.push_back(Index(out.a.size()));
    out.columns.push_back(j);
    out.a.push_back(static_cast<double>(a(row, j)));
    out.b.push_back(static_cast<double>(b(row, j)));
  }
}

/// Entropy of one gathered row split into its sink part H_b(s) + s·H(a_S/s) and its content part (1 − s)·H(c)
/// (composition::entropy_split, Shannon's grouping property; docs/theory/composition.md §2). A row without a visible
/// sink is all content; a row whose content mass is 0 is all sink.
struct RowEntropySplit {
  double entropy = 0, sink = 0, content = 0;
};

inline RowEntropySplit compared_entropy_split(const std::vector<double>& parts, const std::vector<Index>& sinks) {
  using RowMap = Eigen::Map<const Eigen::Matrix<double, 1, Eigen::Dynamic, Eigen::RowMajor>>;
  const RowMap row(parts.data(), 1, Index(parts.size()));
  double content_mass = 0;
  std::vector<char> is_sink(parts.size(), 0);
  for (Index s : sinks) is_sink[std::size_t(s)] = 1;
  for (std::size_t j = 0; j < parts.size(); ++j)
    if (!is_sink[j]) content_mass += parts[j];
  RowEntropySplit out;
  if (sinks.empty() || !(content_mass > 0)) {
    // H(a/t) = H(a)/t + ln t for the closed row, t = Σa [derived], as composition's closed_row_entropy
    const double total = std::accumulate(parts.begin(), parts.end(), 0.0);
    out.entropy = attnscope::detail::entropy_of(parts.data(), Index(parts.size())) / total + std::log(total);
    (sinks.empty() ? out.content : out.sink) = out.entropy;
    return out;
  }
  const auto split = composition::entropy_split(row, Visibility{}, composition::SinkSet(sinks));
  out.entropy = split.entropy(0);
  out.sink = split.sink_term()(0);
  out.content = split.content_term(0);
  return out;
}

/// JS divergence of the two gathered rows: keep = JS(a, a′) of the whole rows, drop = JS(c, c′) of the content
/// compositions (the compositional paper's drop-and-renormalise convention; composition::js_split's
/// content_divergence). With no visible sink key the two conventions coincide; when either row has no content mass
/// the drop convention is undefined and `drop_defined` is false.
struct RowDivergence {
  double keep = 0, drop = std::numeric_limits<double>::quiet_NaN();
  bool drop_defined = false;
};

inline RowDivergence compared_divergence(const ComparedRow& row) {
  using RowMap = Eigen::Map<const Eigen::Matrix<double, 1, Eigen::Dynamic, Eigen::RowMajor>>;
  const RowMap a(row.a.data(), 1, Index(row.a.size())), b(row.b.data(), 1, Index(row.b.size()));
  RowDivergence out;
  if (row.sinks.empty()) {
    out.keep = out.drop = composition::jensen_shannon(a, b)(0);
    out.drop_defined = true;
    return out;
  }
  double content_a = 0, content_b = 0;
  std::vector<char> is_sink(row.a.size(), 0);
  for (Index s : row.sinks) is_sink[std::size_t(s)] = 1;
  for (std::size_t j = 0; j < row.a.size(); ++j)
    if (!is_sink[j]) content_a += row.a[j], content_b += row.b[j];
  if (!(content_a > 0) || !(content_b > 0)) {
    out.keep = composition::jensen_shannon(a, b)(0);
    return out;
  }
  const auto split = composition::js_split(a, b, Visibility{}, composition::SinkSet(row.sinks));
  out.keep = split.divergence(0);
  out.drop = split.content_divergence(0);
  out.drop_defined = true;
  return out;
}

/// |top_k(a) ∩ top_k(b)| / k′ with k′ = min(k, gathered keys); the k′ largest weights of each row, ties to the lower
/// key. 1 for identical rows.
inline double top_k_overlap(const std::vector<double>& a, const std::vector<double>& b, Index k,
                            std::vector<Index>& order_a, std::vector<Index>& order_b) {
  const Index n = Index(a.size()), kept = std::min(k, n);
  auto top = [&](const std::vector<double>& x, std::vector<Index>& order) {
    order.resize(std::size_t(n));
    std::iota(order.begin(), order.end(), Index(0));
    std::partial_sort(order.begin(), order.begin() + kept, order.end(), [&](Index i, Index j) {
      return x[std::size_t(i)] > x[std::size_t(j)] || (x[std::size_t(i)] == x[std::size_t(j)] && i < j);
    });
    order.resize(std::size_t(kept));
    std::sort(order.begin(), order.end());
  };
  top(a, order_a);
  top(b, order_b);
  std::vector<Index> common;
  std::set_intersection(order_a.begin(), order_a.end(), order_b.begin(), order_b.end(), std::back_inserter(common));
  return static_cast<double>(common.size()) / static_cast<double>(kept);
}

/// Block-max downsampling of a head's two attention matrices and their absolute difference into images of
/// ⌈L/block⌉ × ⌈L/block⌉ pixels, filled row block by row block (the maximum does not depend on how rows are blocked).
struct CompareImageAccumulator {
  Index block = 1;
  RowMatrix<double> a, b, difference;

  void start(Index length, Index block_size) {
    block = block_size;
    const Index side = (length + block - 1) / block;
    a = b = difference = RowMatrix<double>::Zero(side, side);
  }
  void add(Index row, Index key, double weight_a, double weight_b) {
    const Index y = row / block, x = key / block;
    a(y, x) = std::max(a(y, x), weight_a);
    b(y, x) = std::max(b(y, x), weight_b);
    difference(y, x) = std::max(difference(y, x), std::abs(weight_b - weight_a));
  }
};

}  // namespace attnscope::analysis::detail
