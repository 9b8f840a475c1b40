// attnscope/analysis/detail/compare_rows.hpp — the per-row work of analysis::compare_models on two models' softmax
// rows laid over the same run of keys (float, contiguous, 0 where a model does not see a key): the Jensen–Shannon
// divergence of the two rows under the keep and the drop convention of the compositional paper, the split of a row's
// entropy into its sink and content parts, the overlap of the two rows' top-k keys, and the block-max images. Every
// pass is a sweep over the row with no allocation: the rows, the scratch and the sums belong to the caller.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/channels.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/stream/detail/reduce_row.hpp"

namespace attnscope::analysis::detail {

/// Checks that a layer's visibility is one the model produces for a whole sequence from position 0: causal, or a
/// causal sliding window, without key mask or sink keys (each row's keys are then the run key_range(row, L)).
inline void check_compare_visibility(const Visibility& layer) {
  const bool plain = layer.key_mask().size() == 0 && layer.sink_keys().empty();
  const bool causal = layer.kind() == Visibility::Kind::causal_prefix;
  const bool window = layer.kind() == Visibility::Kind::band && layer.is_causal();
  if (!plain || !(causal || window))
    attnscope::detail::throw_invalid_argument("analysis::compare_models",
                                              "the layer's visibility is neither causal nor a causal sliding window");
}

/// Σ_j of the Jensen–Shannon term ½x ln(2x/(x + y)) + ½y ln(2y/(x + y)) (0 ln 0 = 0) over n pairs, each x scaled
/// by scale_x and each y by scale_y first: JS(x, y) of two distributions, or of two content compositions (the masses
/// divided out, the sink entries set to 0 by the caller). The terms are composition::detail::jensen_shannon_term with
/// w = ½, evaluated on Eigen packets in double (the float rows widened exactly into `wide_x`, `wide_y`, scratch of ≥ n
/// doubles): both logarithms as ln(x/m), so equal rows give exactly 0. The two halves of a term cancel to first order
/// in t = (x − y)/(x + y) (a term is ≈ m·t²), so the logarithms must carry more digits than t: in double the sum
/// keeps ~2⁻⁵³/|t| relative accuracy, which float32 would lose for the small t of a quantized model [derived].
inline double jensen_shannon_sum(const float* x, const float* y, Index n, double scale_x, double scale_y,
                                 std::vector<double>& wide_x, std::vector<double>& wide_y) {
  for (Index j = 0; j < n; ++j) wide_x[std::size_t(j)] = scale_x * static_cast<double>(x[j]);
  for (Index j = 0; j < n; ++j) wide_y[std::size_t(j)] = scale_y * static_cast<double>(y[j]);
  using Array = Eigen::Map<const Eigen::ArrayXd>;
  const Array a(wide_x.data(), n), b(wide_y.data(), n);
  const auto m = 0.5 * (a + b);
  // the select discards the NaN of 0·ln(0/m) (and of 0/0 where both are 0)
  return 0.5 * ((a > 0.0).select(a * (a / m).log(), 0.0) + (b > 0.0).select(b * (b / m).log(), 0.0)).sum();
}

/// One row of each model, over the union of the keys either model sees (weight 0 where a model does not see the
/// key), with the positions of the visible sink keys in it.
struct ComparedRowView {
  const float* a = nullptr;
  const float* b = nullptr;
  Index n = 0;
  const std::vector<Index>* sinks = nullptr;  // sorted positions in [0, n)
};

/// Entropy of a row split into its sink part H_b(s) + s·H(p_S/s) and its content part (1 − s)·H(c), from the row's
/// entropy H and its sink weights: −Σ_S p ln p − (1 − s) ln(1 − s) = H_b(s) + s·H(p_S/s) [derived: expand both], and
/// the content part is H minus it (Shannon's grouping property; composition::entropy_split, docs/theory/
/// composition.md §2). A row without a visible sink is all content; a row of sinks only (content mass 0) all sink.
struct RowEntropySplit {
  double entropy = 0, sink = 0, content = 0;
};

inline RowEntropySplit compared_entropy_split(const float* p, const std::vector<Index>& sinks, double entropy,
                                              std::vector<double>& sink_parts) {
  RowEntropySplit out;
  out.entropy = entropy;
  if (sinks.empty()) {
    out.content = entropy;
    return out;
  }
  double mass = 0;
  sink_parts.clear();
  for (const Index s : sinks) {
    sink_parts.push_back(static_cast<double>(p[s]));
    mass += sink_parts.back();
  }
  const double content_mass = 1 - mass;
  if (!(content_mass > 0)) {
    out.sink = entropy;
    return out;
  }
  double within = 0;
  if (sink_parts.size() > 1 && mass > 0) {
    for (double& part : sink_parts) part /= mass;
    within = composition::detail::shannon_entropy(sink_parts);
  }
  out.sink = composition::detail::binary_entropy(mass, content_mass) + mass * within;
  out.content = entropy - out.sink;
  return out;
}

/// JS of the two rows: keep = JS(a, b) of the whole rows; drop = JS(c_a, c_b) of the content compositions (the sink
/// keys dropped and the rest renormalised: the compositional paper's drop convention; composition::js_split's
/// content_divergence). With no visible sink the two coincide; when either row has no content mass the drop
/// convention is undefined (drop_defined false). `zeroed_a`, `zeroed_b`: scratch of ≥ n floats, `wide_a`, `wide_b` of ≥ n
/// doubles.
struct RowDivergence {
  double keep = 0, drop = std::numeric_limits<double>::quiet_NaN();
  bool drop_defined = false;
};

inline RowDivergence compared_divergence(const ComparedRowView& row, std::vector<float>& zeroed_a,
                                         std::vector<float>& zeroed_b, std::vector<double>& wide_a,
                                         std::vector<double>& wide_b) {
  RowDivergence out;
  out.keep = jensen_shannon_sum(row.a, row.b, row.n, 1.0, 1.0, wide_a, wide_b);
  if (row.sinks->empty()) {
    out.drop = out.keep;
    out.drop_defined = true;
    return out;
  }
  double sink_a = 0, sink_b = 0;
  for (const Index s : *row.sinks) sink_a += static_cast<double>(row.a[s]), sink_b += static_cast<double>(row.b[s]);
  const double content_a = 1 - sink_a, content_b = 1 - sink_b;
  if (!(content_a > 0) || !(content_b > 0)) return out;
  std::copy(row.a, row.a + row.n, zeroed_a.data());
  std::copy(row.b, row.b + row.n, zeroed_b.data());
  for (const Index s : *row.sinks) zeroed_a[std::size_t(s)] = zeroed_b[std::size_t(s)] = 0.0f;
  out.drop = jensen_shannon_sum(zeroed_a.data(), zeroed_b.data(), row.n, 1 / content_a, 1 / content_b, wide_a, wide_b);
  out.drop_defined = true;
  return out;
}

/// |top_k(a) ∩ top_k(b)| / k′ with k′ = min(k, n): the k′ largest weights of each row, ties to the lower key; 1 for
/// identical rows. The k′-th largest value t of each row comes from the attention kernel's selection
/// (stream::detail::largest_descending on a copy); a key is in a row's top set when its weight is > t, or = t and it
/// is among the first keys of weight t that fill the set. `copy`, `candidates`: scratch.
inline double top_k_overlap(const float* a, const float* b, Index n, Index k, std::vector<float>& copy,
                            std::vector<float>& candidates) {
  const Index kept = std::min(k, n);
  const auto threshold = [&](const float* x) {
    std::copy(x, x + n, copy.data());
    return stream::detail::largest_descending(copy.data(), n, kept, candidates)[kept - 1];
  };
  const float ta = threshold(a), tb = threshold(b);
  Index above_a = 0, above_b = 0, common = 0;  // keys ≥ the thresholds: exactly k′ each unless there are ties
  for (Index j = 0; j < n; ++j) {
    const int in_a = a[j] >= ta, in_b = b[j] >= tb;
    above_a += in_a, above_b += in_b, common += in_a & in_b;
  }
  if (above_a != kept || above_b != kept) {  // ties at a threshold: take the lower keys of the tied weight
    Index strictly_a = 0, strictly_b = 0;
    for (Index j = 0; j < n; ++j) strictly_a += a[j] > ta, strictly_b += b[j] > tb;
    Index ties_a = kept - strictly_a, ties_b = kept - strictly_b;
    common = 0;
    for (Index j = 0; j < n; ++j) {
      bool in_a = a[j] > ta, in_b = b[j] > tb;
      if (!in_a && a[j] == ta && ties_a > 0) in_a = true, --ties_a;
      if (!in_b && b[j] == tb && ties_b > 0) in_b = true, --ties_b;
      common += in_a && in_b;
    }
  }
  return static_cast<double>(common) / static_cast<double>(kept);
}

/// Block-max downsampling of a head's two attention matrices and their absolute difference into images of
/// ⌈L/block⌉ × ⌈L/block⌉ pixels, filled row by row (the maximum does not depend on the order of the rows).
struct CompareImageAccumulator {
  Index block = 1;
  RowMatrix<double> a, b, difference;

  void start(Index length, Index block_size) {
    block = block_size;
    const Index side = (length + block - 1) / block;
    a = b = difference = RowMatrix<double>::Zero(side, side);
  }
  /// Row `row` of both matrices over the keys [first, first + n) (x, y as in ComparedRowView).
  void add_row(Index row, Index first, const float* x, const float* y, Index n) {
    const Index pixel_row = row / block;
    double* out_a = a.data() + pixel_row * a.cols();
    double* out_b = b.data() + pixel_row * b.cols();
    double* out_difference = difference.data() + pixel_row * difference.cols();
    for (Index j = 0; j < n;) {
      const Index pixel = (first + j) / block, end = std::min(n, (pixel + 1) * block - first);
      float max_a = 0, max_b = 0;
      double max_difference = 0;
      for (Index t = j; t < end; ++t) {
        max_a = std::max(max_a, x[t]), max_b = std::max(max_b, y[t]);
        max_difference = std::max(max_difference, std::abs(static_cast<double>(y[t]) - static_cast<double>(x[t])));
      }
      out_a[pixel] = std::max(out_a[pixel], static_cast<double>(max_a));
      out_b[pixel] = std::max(out_b[pixel], static_cast<double>(max_b));
      out_difference[pixel] = std::max(out_difference[pixel], max_difference);
      j = end;
    }
  }
};

}  // namespace attnscope::analysis::detail
