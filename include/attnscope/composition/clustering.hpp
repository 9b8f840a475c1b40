// attnscope/composition/clustering.hpp — head-by-head distance matrices under the keep / drop conventions
// (Clark et al. 2019's smoothed Jensen–Shannon, cosine, Aitchison content term, sink term), classical MDS,
// average-linkage hierarchical clustering, and the correlation used to ask whether an embedding follows the sink
// (docs/theory/composition.md §7, Clark et al. 2019).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition/channels.hpp"
#include "attnscope/composition/correlation.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/composition/verdicts.hpp"
#include "attnscope/core/check.hpp"
#include "attnscope/core/decompositions.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::composition {

/// Head-to-head distance used for clustering.
enum class HeadDistance {
  clark_js,           // JS of smoothed rows 0.999·a + 0.001/T (Clark et al. 2019 head_distances.py), keep or drop
  cosine,             // 1 − cosine similarity, keep or drop
  aitchison_content,  // d_A(c, c′): the content term of §4 (the same under both conventions)
  sink_term,          // |b_S(a) − b_S(a′)|: the sink term of §4 (the same under both conventions)
};

namespace detail {

/// Clark et al.'s smoothed JS of one matched row pair, keep (full rows) and drop (content): each distribution of T
/// parts is smoothed as 0.999·p + 0.001/T before the JS.
inline std::pair<double, double> clark_js_row(const double* a, const double* b, Index sink_parts, Index content_parts,
                                              double s_a, double s_b) {
  const Index n = sink_parts + content_parts;
  const double full_uniform = 0.001 / static_cast<double>(n), content_uniform = 0.001 / static_cast<double>(content_parts);
  double keep = 0, drop = 0;
  for (Index k = 0; k < n; ++k)
    keep += jensen_shannon_term(0.999 * full_part(a, k, sink_parts, s_a) + full_uniform,
                                0.999 * full_part(b, k, sink_parts, s_b) + full_uniform, 0.5);
  for (Index k = sink_parts; k < n; ++k)
    drop += jensen_shannon_term(0.999 * a[k] + content_uniform, 0.999 * b[k] + content_uniform, 0.5);
  return {keep, drop};
}

/// |b_S(a) − b_S(a′)| (sink term, §4) and d_A(c, c′) (content term) of one matched row pair from log-parts.
inline std::pair<double, double> aitchison_terms_row(const double* log_a, const double* log_b, Index sink_parts,
                                                     Index content_parts, double s_a, double s_b) {
  const double k = static_cast<double>(sink_parts), m = static_cast<double>(content_parts);
  double sink_a = 0, sink_b = 0, content_a = 0, content_b = 0;
  for (Index j = 0; j < sink_parts; ++j) sink_a += log_a[j], sink_b += log_b[j];
  for (Index j = sink_parts; j < sink_parts + content_parts; ++j) content_a += log_a[j], content_b += log_b[j];
  sink_a /= k, sink_b /= k, content_a /= m, content_b /= m;
  const double scale = std::sqrt(k * m / (k + m));
  // b_S = scale·(mean ln a_S − mean ln a_C) with ln a_S = ln s + ln(a_S/s) and ln a_C = ln(1 − s) + ln c
  const double balance_a = scale * (std::log(s_a) + sink_a - std::log1p(-s_a) - content_a);
  const double balance_b = scale * (std::log(s_b) + sink_b - std::log1p(-s_b) - content_b);
  double content = 0;
  for (Index j = sink_parts; j < sink_parts + content_parts; ++j) {
    const double d = (log_a[j] - content_a) - (log_b[j] - content_b);
    content += d * d;
  }
  return {std::abs(balance_a - balance_b), std::sqrt(content)};
}

}  // namespace detail

/// Symmetric head-by-head distance matrix, each entry the mean over matched rows (Clark et al. sum over documents
/// and queries: the same up to a constant factor). Every head has the same shape and visibility; rows need a content
/// key (s < 1) so both conventions see the same rows. aitchison_content and sink_term need parts > 0 and ignore the
/// convention. Rows are validated and split once per head (see pair_metric_matrices). O(H²·rows·cols).
template <class Scalar>
RowMatrix<double> head_distance_matrix(const std::vector<RowMatrix<Scalar>>& heads, HeadDistance distance,
                                       Convention convention = Convention::keep, const Visibility& visibility = {},
                                       const SinkSet& sinks = {},
                                       double tolerance = detail::default_row_sum_tolerance) {
  const char* function = "head_distance_matrix";
  const bool keep = convention == Convention::keep;
  switch (distance) {
    case HeadDistance::clark_js: {
      const auto both = detail::pair_matrices_by(
          function, heads, visibility, sinks, tolerance, false,
          [](const double* a, const double* b, const double*, const double*, Index sink_parts, Index content_parts,
             double s_a, double s_b) { return detail::clark_js_row(a, b, sink_parts, content_parts, s_a, s_b); });
      return keep ? both.keep : both.drop;
    }
    case HeadDistance::cosine: {
      const auto both = pair_metric_matrices(heads, Metric::cosine, visibility, sinks, tolerance);
      return ((keep ? both.keep : both.drop).array() * -1.0 + 1.0).matrix();
    }
    case HeadDistance::aitchison_content:
    case HeadDistance::sink_term: {
      const auto both = detail::pair_matrices_by(
          function, heads, visibility, sinks, tolerance, true,
          [](const double*, const double*, const double* log_a, const double* log_b, Index sink_parts,
             Index content_parts, double s_a, double s_b) {
            return detail::aitchison_terms_row(log_a, log_b, sink_parts, content_parts, s_a, s_b);
          });
      return distance == HeadDistance::sink_term ? both.keep : both.drop;
    }
  }
  attnscope::detail::throw_invalid_argument(function, "unknown distance");
}

/// Classical (Torgerson) multidimensional scaling of a distance matrix.
struct MdsEmbedding {
  RowMatrix<double> coordinates;  // points × dimensions
  Vector<double> eigenvalues;     // of B = −½ J D⁽²⁾ J, descending (all of them; negatives mean non-Euclidean D)
};

/// Classical MDS (Torgerson 1952): B = −½·J·D∘D·J, J = I − 11ᵀ/n; coordinates = top eigenvectors·√λ (λ > 0; axes
/// with λ ≤ 0 are 0). Each axis's sign is fixed so that its largest-magnitude coordinate is positive. O(n³).
template <class Derived>
MdsEmbedding classical_mds(const Eigen::MatrixBase<Derived>& distances, Index dimensions = 2) {
  const Index n = distances.rows();
  if (n < 2 || distances.cols() != n)
    attnscope::detail::throw_invalid_argument("classical_mds", "need a square distance matrix with >= 2 points, got ",
                                              n, "x", distances.cols());
  if (dimensions < 1 || dimensions > n)
    attnscope::detail::throw_invalid_argument("classical_mds", "dimensions must be in [1, ", n, "], got ", dimensions);
  attnscope::detail::require_finite("classical_mds", distances);
  // MatrixXd spelled as a type dependent on Derived: the eigensolver is then instantiated only where classical_mds is
  // used, not in every translation unit (compile time)
  using Matrix = Eigen::Matrix<std::conditional_t<sizeof(Derived) != 0, double, void>, Eigen::Dynamic, Eigen::Dynamic>;
  const Matrix d = distances.template cast<double>();
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      if (d(i, j) < 0 || std::abs(d(i, j) - d(j, i)) > 1e-9 * (1 + std::abs(d(i, j))) || (i == j && d(i, j) != 0))
        attnscope::detail::throw_invalid_argument("classical_mds", "not a distance matrix at (", i, ", ", j,
                                                  "): ", d(i, j), " vs ", d(j, i));
  const Matrix centring = Matrix::Identity(n, n) - Matrix::Constant(n, n, 1.0 / n);
  const Matrix b = -0.5 * centring * d.cwiseProduct(d) * centring;
  const attnscope::detail::SymmetricEigen<Matrix> solver = attnscope::detail::symmetric_eigen(b);
  MdsEmbedding out;
  out.eigenvalues = solver.values.reverse();
  out.coordinates = RowMatrix<double>::Zero(n, dimensions);
  for (Index axis = 0; axis < dimensions; ++axis) {
    const double lambda = out.eigenvalues(axis);
    if (!(lambda > 0)) continue;
    Eigen::Matrix<typename Matrix::Scalar, Eigen::Dynamic, 1> vector = solver.vectors.col(n - 1 - axis);
    Index largest = 0;
    vector.cwiseAbs().maxCoeff(&largest);
    if (vector(largest) < 0) vector = -vector;
    out.coordinates.col(axis) = vector * std::sqrt(lambda);
  }
  return out;
}

/// Agglomerative clustering result in scipy `linkage` form: merge k joins clusters `first` < `second` (leaves are
/// 0..n−1, the cluster made by merge k is n + k) at `height`, giving a cluster of `size` leaves.
struct Dendrogram {
  struct Merge {
    Index first = 0, second = 0;
    double height = 0;
    Index size = 0;
  };
  Index leaves = 0;
  std::vector<Merge> merges;
};

/// Average-linkage (UPGMA) hierarchical clustering: repeatedly merge the two clusters with the smallest mean
/// pairwise distance (Sokal & Michener 1958); ties go to the first pair in slot order (a merged cluster
/// takes the lower slot of its two parts), so results are deterministic. O(n³).
template <class Derived>
Dendrogram average_linkage(const Eigen::MatrixBase<Derived>& distances) {
  const Index n = distances.rows();
  if (n < 2 || distances.cols() != n)
    attnscope::detail::throw_invalid_argument("average_linkage", "need a square distance matrix with >= 2 points, got ",
                                              n, "x", distances.cols());
  attnscope::detail::require_finite("average_linkage", distances);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      if (distances(i, j) < 0 || distances(i, j) != distances(j, i))
        attnscope::detail::throw_invalid_argument("average_linkage", "not a symmetric non-negative matrix at (", i,
                                                  ", ", j, "): ", distances(i, j));
  Eigen::MatrixXd between = distances.template cast<double>();  // mean distance between active clusters
  std::vector<Index> id(static_cast<std::size_t>(n)), size(static_cast<std::size_t>(n), 1);
  std::vector<char> active(static_cast<std::size_t>(n), 1);
  for (Index i = 0; i < n; ++i) id[static_cast<std::size_t>(i)] = i;
  Dendrogram out;
  out.leaves = n;
  for (Index step = 0; step + 1 < n; ++step) {
    Index best_a = -1, best_b = -1;
    double best = std::numeric_limits<double>::infinity();
    for (Index a = 0; a < n; ++a) {
      if (!active[static_cast<std::size_t>(a)]) continue;
      for (Index b = a + 1; b < n; ++b) {
        if (!active[static_cast<std::size_t>(b)]) continue;
        const double value = between(a, b);
        if (value < best) best = value, best_a = a, best_b = b;
      }
    }
    const Index size_a = size[static_cast<std::size_t>(best_a)], size_b = size[static_cast<std::size_t>(best_b)];
    Dendrogram::Merge merge;
    merge.first = std::min(id[static_cast<std::size_t>(best_a)], id[static_cast<std::size_t>(best_b)]);
    merge.second = std::max(id[static_cast<std::size_t>(best_a)], id[static_cast<std::size_t>(best_b)]);
    merge.height = best;
    merge.size = size_a + size_b;
    out.merges.push_back(merge);
    for (Index c = 0; c < n; ++c)  // UPGMA update: size-weighted mean of the two merged clusters' distances
      if (active[static_cast<std::size_t>(c)] && c != best_a && c != best_b)
        between(best_a, c) = between(c, best_a) =
            (static_cast<double>(size_a) * between(best_a, c) + static_cast<double>(size_b) * between(best_b, c)) /
            static_cast<double>(size_a + size_b);
    active[static_cast<std::size_t>(best_b)] = 0;
    size[static_cast<std::size_t>(best_a)] = size_a + size_b;
    id[static_cast<std::size_t>(best_a)] = n + step;
  }
  return out;
}

/// Flat labels from a dendrogram cut into `clusters` groups (undo the last clusters − 1 merges). Labels are
/// 0..clusters−1, numbered in order of each cluster's smallest leaf.
inline std::vector<int> cut_dendrogram(const Dendrogram& dendrogram, Index clusters) {
  const Index n = dendrogram.leaves;
  if (clusters < 1 || clusters > n)
    attnscope::detail::throw_invalid_argument("cut_dendrogram", "clusters must be in [1, ", n, "], got ", clusters);
  std::vector<Index> parent(static_cast<std::size_t>(2 * n - 1));
  for (Index k = 0; k < 2 * n - 1; ++k) parent[static_cast<std::size_t>(k)] = k;
  const Index applied = n - clusters;  // apply the first n − clusters merges
  for (Index k = 0; k < applied; ++k) {
    parent[static_cast<std::size_t>(dendrogram.merges[static_cast<std::size_t>(k)].first)] = n + k;
    parent[static_cast<std::size_t>(dendrogram.merges[static_cast<std::size_t>(k)].second)] = n + k;
  }
  auto root = [&](Index node) {
    while (parent[static_cast<std::size_t>(node)] != node) node = parent[static_cast<std::size_t>(node)];
    return node;
  };
  std::vector<int> labels(static_cast<std::size_t>(n), -1);
  std::vector<Index> roots;
  for (Index leaf = 0; leaf < n; ++leaf) {
    const Index r = root(leaf);
    auto it = std::find(roots.begin(), roots.end(), r);
    if (it == roots.end()) {
      roots.push_back(r);
      it = roots.end() - 1;
    }
    labels[static_cast<std::size_t>(leaf)] = static_cast<int>(it - roots.begin());
  }
  return labels;
}

/// Pearson correlation of two equally long vectors (n ≥ 2, neither constant).
template <class DerivedX, class DerivedY>
double pearson_correlation(const Eigen::MatrixBase<DerivedX>& x, const Eigen::MatrixBase<DerivedY>& y) {
  if (x.size() != y.size() || x.size() < 2)
    attnscope::detail::throw_invalid_argument(
        "pearson_correlation", "need two equally long vectors of >= 2 values, got ", x.size(), " and ", y.size());
  attnscope::detail::require_finite("pearson_correlation", x);
  attnscope::detail::require_finite("pearson_correlation", y);
  // ArrayXd spelled as a type dependent on DerivedX (instantiated only where used; compile time)
  using Array = Eigen::Array<std::conditional_t<sizeof(DerivedX) != 0, double, void>, Eigen::Dynamic, 1>;
  const Array a = x.template cast<double>().reshaped().array(), b = y.template cast<double>().reshaped().array();
  return detail::pearson_correlation_unchecked("pearson_correlation", "a vector is constant", a, b);
}

}  // namespace attnscope::composition
