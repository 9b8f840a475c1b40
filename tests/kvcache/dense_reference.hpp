// An independent reference for the KV-cache simulation, written from the definitions of docs/guide.md ("attention under
// KV-cache policies") on DENSE attention: per query head the full L×L weights (e.g. a forward pass's capture.attention)
// and the head's values. Plain loops in double, no code shared with include/attnscope/kvcache/ (its own tie rules,
// sets and sums), so that an agreement to 1e-9 checks the simulator's streaming strips, its caches and its
// complement sums.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"

namespace attnscope::testing::kvcache_reference {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A policy as the reference reads it: its name and integer fields.
struct Spec {
  std::string name;
  std::map<std::string, long> field;
};

/// Per policy: [head][query] lost mass and output error, [kv head][query] cache size, [head][query] oracle lost mass
/// with the policy's cache size; every query 0 … L − 1.
struct Result {
  std::vector<std::vector<double>> lost, error, oracle_lost;
  std::vector<std::vector<long>> size;
};

/// One layer: weights[h] (L × L, the model's float weights), values[h] (L × dv, the head's values), kv groups of
/// `group` consecutive query heads.
struct Layer {
  std::vector<Matrix> attention;  // a_ij, each row renormalised to sum 1
  std::vector<Matrix> values;
  int heads = 0, group = 1;
  int length() const { return static_cast<int>(attention.front().rows()); }
};

template <class Float>
Layer make_layer(const std::vector<Eigen::Matrix<Float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>& weights,
                 const std::vector<Eigen::Matrix<Float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>& values,
                 int group) {
  Layer layer;
  layer.heads = static_cast<int>(weights.size());
  layer.group = group;
  for (std::size_t h = 0; h < weights.size(); ++h) {
    Matrix a = weights[h].template cast<double>();
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      double total = 0;
      for (Eigen::Index j = 0; j < a.cols(); ++j) total += a(i, j);
      for (Eigen::Index j = 0; j < a.cols(); ++j) a(i, j) /= total;
    }
    layer.attention.push_back(a);
    layer.values.push_back(values[h].template cast<double>());
  }
  return layer;
}

/// The keys of row i of `a` sorted by weight, largest first, the later key first on equal weights.
inline std::vector<int> keys_by_weight(const Matrix& a, int i) {
  std::vector<int> keys;
  for (int j = 0; j <= i; ++j) keys.push_back(j);
  std::stable_sort(keys.begin(), keys.end(), [&](int x, int y) {
    if (a(i, x) != a(i, y)) return a(i, x) > a(i, y);
    return x > y;
  });
  return keys;
}

/// m, lost = 1 − m, and ‖o − o′‖/‖o‖ of head h at query i for cache `cache`.
inline void measure(const Layer& layer, int h, int i, const std::set<int>& cache, double& lost, double& error,
                    double& kept) {
  const Matrix& a = layer.attention[static_cast<std::size_t>(h)];
  const Matrix& v = layer.values[static_cast<std::size_t>(h)];
  Eigen::VectorXd o = Eigen::VectorXd::Zero(v.cols()), kept_sum = Eigen::VectorXd::Zero(v.cols());
  kept = 0;
  for (int j = 0; j <= i; ++j) {
    o += a(i, j) * v.row(j).transpose();
    if (cache.count(j)) {
      kept += a(i, j);
      kept_sum += a(i, j) * v.row(j).transpose();
    }
  }
  lost = 1 - kept;
  const Eigen::VectorXd renormalised = kept > 0 ? Eigen::VectorXd(kept_sum / kept) : Eigen::VectorXd::Zero(v.cols());
  error = o.norm() > 0 ? (o - renormalised).norm() / o.norm() : (o - renormalised).norm();
}

/// Runs one policy on the layer (prefill: SnapKV's P).
inline Result simulate(const Layer& layer, const Spec& spec, int prefill) {
  const int L = layer.length(), H = layer.heads, G = H / layer.group;
  Result result;
  result.lost.assign(H, std::vector<double>(L));
  result.error = result.lost;
  result.oracle_lost = result.lost;
  result.size.assign(G, std::vector<long>(L));
  // the caches: per head for the oracle, per KV group for h2o/snapkv/streaming, one for tova
  std::vector<std::set<int>> evictable(H);  // E_{i−1} per cache unit
  std::vector<std::map<int, double>> accumulated(H);
  std::vector<std::set<int>> snap_kept(G);
  std::vector<std::map<int, double>> snap_score(G);
  for (int i = 0; i < L; ++i) {
    std::vector<std::set<int>> cache_of_head(H);
    if (spec.name == "streaming") {
      std::set<int> cache;
      for (int j = 0; j <= i; ++j)
        if (j < spec.field.at("sink") || j > i - spec.field.at("recent")) cache.insert(j);
      for (int h = 0; h < H; ++h) cache_of_head[h] = cache;
    } else if (spec.name == "oracle") {
      for (int h = 0; h < H; ++h) {
        const std::vector<int> order = keys_by_weight(layer.attention[h], i);
        for (int t = 0; t < std::min<int>(static_cast<int>(spec.field.at("budget")), i + 1); ++t)
          cache_of_head[h].insert(order[t]);
      }
    } else if (spec.name == "h2o" || spec.name == "tova") {
      const bool tova = spec.name == "tova";
      const int units = tova ? 1 : G;
      for (int u = 0; u < units; ++u) {
        std::set<int> cache = evictable[u];
        cache.insert(i);
        const int first_head = tova ? 0 : u * layer.group, last_head = tova ? H : (u + 1) * layer.group;
        std::map<int, double> step_score;  // Σ over the unit's heads of a′_ij
        for (int h = first_head; h < last_head; ++h) {
          double kept = 0;
          for (const int j : cache) kept += layer.attention[h](i, j);
          for (const int j : cache) step_score[j] += kept > 0 ? layer.attention[h](i, j) / kept : 0.0;
          cache_of_head[h] = cache;
        }
        long capacity = tova ? spec.field.at("budget") : spec.field.at("heavy") + spec.field.at("recent");
        if (!tova)
          for (const int j : cache) accumulated[u][j] += step_score[j];
        if (static_cast<long>(cache.size()) > capacity) {
          int victim = -1;
          double lowest = 0;
          for (const int j : cache) {  // ascending: the first of equal scores is the earliest
            if (!tova && j > i - spec.field.at("recent")) continue;
            const double score = tova ? step_score[j] / (last_head - first_head) : accumulated[u][j];
            if (victim < 0 || score < lowest) {
              victim = j;
              lowest = score;
            }
          }
          cache.erase(victim);
        }
        evictable[u] = cache;
      }
    } else if (spec.name == "snapkv") {
      const int window = static_cast<int>(spec.field.at("window")), kernel = static_cast<int>(spec.field.at("kernel"));
      const int budget = static_cast<int>(spec.field.at("budget")), prefix = prefill - window;
      for (int g = 0; g < G; ++g) {
        std::set<int> cache;
        if (i < prefill) {
          for (int j = 0; j <= i; ++j) cache.insert(j);
        } else {
          cache = snap_kept[g];
          for (int j = prefill; j <= i; ++j) cache.insert(j);
        }
        for (int h = g * layer.group; h < (g + 1) * layer.group; ++h) cache_of_head[h] = cache;
        if (i >= prefix && i < prefill)  // the window's votes, query by query, heads inside
          for (int j = 0; j < prefix; ++j) {
            double vote = 0;
            for (int h = g * layer.group; h < (g + 1) * layer.group; ++h) vote += layer.attention[h](i, j);
            snap_score[g][j] += vote;
          }
        if (i == prefill - 1) {
          std::vector<std::pair<double, int>> pooled;
          for (int j = 0; j < prefix; ++j) {
            double sum = 0;  // avg_pool1d, padding kernel/2 with zeros counted
            for (int t = j - kernel / 2; t <= j + kernel / 2; ++t)
              if (t >= 0 && t < prefix) sum += snap_score[g][t];
            pooled.emplace_back(sum / kernel, j);
          }
          std::sort(pooled.begin(), pooled.end(), [](const auto& x, const auto& y) {
            return x.first != y.first ? x.first > y.first : x.second > y.second;
          });
          for (int t = 0; t < std::min(prefix, budget - window); ++t) snap_kept[g].insert(pooled[t].second);
          for (int j = prefix; j < prefill; ++j) snap_kept[g].insert(j);
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      double kept = 0;
      measure(layer, h, i, cache_of_head[h], result.lost[h][i], result.error[h][i], kept);
      result.size[h / layer.group][i] = static_cast<long>(cache_of_head[h].size());
      const std::vector<int> order = keys_by_weight(layer.attention[h], i);
      double best = 0;
      for (std::size_t t = 0; t < std::min(order.size(), cache_of_head[h].size()); ++t)
        best += layer.attention[h](i, order[t]);
      result.oracle_lost[h][i] = cache_of_head[h].size() >= order.size() ? 0.0 : 1 - best;
    }
  }
  return result;
}

}  // namespace attnscope::testing::kvcache_reference
