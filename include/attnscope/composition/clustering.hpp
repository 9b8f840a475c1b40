// attnscope/composition/clustering.hpp — head-by-head distance matrices under the keep / drop conventions
// (Clark et al. 2019's smoothed Jensen–Shannon, cosine, Aitchison content term, sink term), classical MDS,
// average-linkage hierarchical clustering, and the correlation used to ask whether an embedding follows the sink
// (compositional-attention.md §7, §12 "Standard BERT pipeline").
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>
#include <Eigen/Eigenvalues>

#include "attnscope/composition/channels.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/composition/verdicts.hpp"
#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope {

/// Head-to-head distance used for clustering.
enum class HeadDistance {
  clark_js,           // JS of smoothed rows 0.999·a + 0.001/T (Clark et al. 2019 head_distances.py), keep or drop
  cosine,             // 1 − cosine similarity, keep or drop
  aitchison_content,  // d_A(c, c′): the content term of §4 (the same under both conventions)
  sink_term,          // |b_S(a) − b_S(a′)|: the sink term of §4 (the same under both conventions)
};

namespace detail {

/// Clark et al.'s smoothing of a closed row of T parts: 0.999·p + 0.001/T (T = parts in the row).
template <class Scalar>
void clark_smooth(std::vector<Scalar>& parts) {
  const Scalar total = sum_of(parts), uniform = Scalar(0.001) / static_cast<Scalar>(parts.size());
  for (Scalar& v : parts) v = Scalar(0.999) * v / total + uniform;
}

/// Mean over matched rows of the Clark-smoothed JS of two heads, on full rows (keep) or content parts (drop).
template <class Scalar>
double mean_clark_js(const RowMatrix<Scalar>& a, const RowMatrix<Scalar>& b, Convention convention,
                     const Visibility& visibility, const SinkSet& sinks) {
  std::vector<double> per_row(static_cast<std::size_t>(a.rows()));
  for_each_split_row_pair<Scalar>("head_distance_matrix", a, b, visibility, sinks,
                                  [&](Index i, const SplitRow<Scalar>& row_a, const SplitRow<Scalar>& row_b) {
                                    std::vector<Scalar> p = row_a.content, q = row_b.content;
                                    if (convention == Convention::keep) {
                                      p.insert(p.begin(), row_a.sink.begin(), row_a.sink.end());
                                      q.insert(q.begin(), row_b.sink.begin(), row_b.sink.end());
                                    }
                                    clark_smooth(p);
                                    clark_smooth(q);
                                    per_row[static_cast<std::size_t>(i)] =
                                        static_cast<double>(weighted_jensen_shannon(p, q, Scalar(0.5)));
                                  });
  double total = 0;  // summed in row order: identical for any thread count
  for (double v : per_row) total += v;
  return total / static_cast<double>(a.rows());
}

}  // namespace detail

/// Symmetric head-by-head distance matrix, each entry the mean over matched rows (Clark et al. sum over documents
/// and queries: the same up to a constant factor). Every head has the same shape and visibility; rows need a content
/// key (s < 1) so both conventions see the same rows. aitchison_content and sink_term need parts > 0.
template <class Scalar>
RowMatrix<double> head_distance_matrix(const std::vector<RowMatrix<Scalar>>& heads, HeadDistance distance,
                                       Convention convention = Convention::keep, const Visibility& visibility = {},
                                       const SinkSet& sinks = {},
                                       double tolerance = detail::default_row_sum_tolerance) {
  if (heads.size() < 2) detail::throw_invalid_argument("head_distance_matrix", "need at least 2 heads, got ", heads.size());
  for (const auto& head : heads) {
    detail::require_same_shape("head_distance_matrix", "heads", head, heads.front());
    detail::validate_channels<Scalar>("head_distance_matrix", head, visibility, sinks, tolerance);
  }
  const Index count = static_cast<Index>(heads.size());
  RowMatrix<double> out = RowMatrix<double>::Zero(count, count);
  for (Index h = 0; h < count; ++h)
    for (Index g = h + 1; g < count; ++g) {
      const auto& a = heads[static_cast<std::size_t>(h)];
      const auto& b = heads[static_cast<std::size_t>(g)];
      double value = 0;
      switch (distance) {
        case HeadDistance::clark_js: value = detail::mean_clark_js(a, b, convention, visibility, sinks); break;
        case HeadDistance::cosine:
          value = 1.0 - static_cast<double>(pair_metric(Metric::cosine, a, b, convention, visibility, sinks, tolerance).mean());
          break;
        case HeadDistance::aitchison_content:
          value = static_cast<double>(aitchison_split(a, b, visibility, sinks).content_term.cwiseSqrt().mean());
          break;
        case HeadDistance::sink_term:
          value = static_cast<double>(aitchison_split(a, b, visibility, sinks).sink_term.cwiseSqrt().mean());
          break;
      }
      out(h, g) = out(g, h) = value;
    }
  return out;
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
    detail::throw_invalid_argument("classical_mds", "need a square distance matrix with >= 2 points, got ", n, "x",
                                   distances.cols());
  if (dimensions < 1 || dimensions > n)
    detail::throw_invalid_argument("classical_mds", "dimensions must be in [1, ", n, "], got ", dimensions);
  detail::require_finite("classical_mds", distances);
  const Eigen::MatrixXd d = distances.template cast<double>();
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      if (d(i, j) < 0 || std::abs(d(i, j) - d(j, i)) > 1e-9 * (1 + std::abs(d(i, j))) || (i == j && d(i, j) != 0))
        detail::throw_invalid_argument("classical_mds", "not a distance matrix at (", i, ", ", j, "): ", d(i, j),
                                       " vs ", d(j, i));
  const Eigen::MatrixXd centring = Eigen::MatrixXd::Identity(n, n) - Eigen::MatrixXd::Constant(n, n, 1.0 / n);
  const Eigen::MatrixXd b = -0.5 * centring * d.cwiseProduct(d) * centring;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(b);
  MdsEmbedding out;
  out.eigenvalues = solver.eigenvalues().reverse();
  out.coordinates = RowMatrix<double>::Zero(n, dimensions);
  for (Index axis = 0; axis < dimensions; ++axis) {
    const double lambda = out.eigenvalues(axis);
    if (!(lambda > 0)) continue;
    Eigen::VectorXd vector = solver.eigenvectors().col(n - 1 - axis);
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
    detail::throw_invalid_argument("average_linkage", "need a square distance matrix with >= 2 points, got ", n, "x",
                                   distances.cols());
  detail::require_finite("average_linkage", distances);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      if (distances(i, j) < 0 || distances(i, j) != distances(j, i))
        detail::throw_invalid_argument("average_linkage", "not a symmetric non-negative matrix at (", i, ", ", j,
                                       "): ", distances(i, j));
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
    detail::throw_invalid_argument("cut_dendrogram", "clusters must be in [1, ", n, "], got ", clusters);
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
    detail::throw_invalid_argument("pearson_correlation", "need two equally long vectors of >= 2 values, got ",
                                   x.size(), " and ", y.size());
  detail::require_finite("pearson_correlation", x);
  detail::require_finite("pearson_correlation", y);
  const Eigen::ArrayXd a = x.template cast<double>().reshaped().array(), b = y.template cast<double>().reshaped().array();
  const Eigen::ArrayXd da = a - a.mean(), db = b - b.mean();
  const double norm = std::sqrt((da * da).sum() * (db * db).sum());
  if (!(norm > 0)) detail::throw_invalid_argument("pearson_correlation", "a vector is constant");
  return (da * db).sum() / norm;
}

}  // namespace attnscope
