// attnscope/kvcache/detail/largest_keys.hpp — the keys of an attention row with the largest weights, ties broken
// towards the later position (the earliest is evicted first). A weight w ≥ 0 and its key j become one 64-bit rank
// (bits of w << 32 | j): for non-negative floats the bit pattern orders as the value [IEEE 754 §3.4], so ranks order
// by weight, then by position, and a selection on ranks is a selection on (weight, position) pairs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "attnscope/core/types.hpp"

namespace attnscope::kvcache::detail {

/// rank(w, j) = bits(w) << 32 | j for a weight w ≥ 0 (float) and a key j < 2³².
inline std::uint64_t weight_rank(float weight, Index key) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &weight, sizeof bits);
  return (static_cast<std::uint64_t>(bits) << 32) | static_cast<std::uint64_t>(key);
}

/// The weight of a rank.
inline float rank_weight(std::uint64_t rank) {
  const auto bits = static_cast<std::uint32_t>(rank >> 32);
  float weight = 0;
  std::memcpy(&weight, &bits, sizeof weight);
  return weight;
}

/// The key of a rank.
inline Index rank_key(std::uint64_t rank) { return static_cast<Index>(rank & 0xffffffffu); }

/// Fills `ranks` with the ranks of weights[0..keys).
inline void row_ranks(const float* weights, Index keys, std::vector<std::uint64_t>& ranks) {
  ranks.resize(static_cast<std::size_t>(keys));
  for (Index j = 0; j < keys; ++j) ranks[static_cast<std::size_t>(j)] = weight_rank(weights[j], j);
}

/// Moves the `count` largest ranks of ranks[0..end) to ranks[0..count) (in no particular order); count ≥ end: nothing
/// to do. O(end).
inline void select_largest(std::vector<std::uint64_t>& ranks, Index count, Index end) {
  if (count <= 0 || count >= end) return;
  std::nth_element(ranks.begin(), ranks.begin() + (count - 1), ranks.begin() + end, std::greater<std::uint64_t>());
  // nth_element leaves the count − 1 larger ones before position count − 1
}

/// Fills ranks[0..returned) with candidates that include the `count` largest ranks of weights[0..keys), and moves
/// those to ranks[0..count) (in no particular order). Long rows are filtered first [derived]: the threshold t is the
/// ⌈count/4⌉-th largest of every 8th weight, so that about 2·count weights are ≥ t; when at least `count` are, every
/// one of the count largest is among them (the count-th largest is ≥ t), else the whole row is taken. O(keys).
inline Index largest_ranks(const float* weights, Index keys, Index count, std::vector<std::uint64_t>& ranks,
                           std::vector<float>& sample) {
  constexpr Index stride = 8;
  if (count * 4 < keys && keys >= 256) {
    sample.clear();
    for (Index j = 0; j < keys; j += stride) sample.push_back(weights[j]);
    const Index position = std::min<Index>(static_cast<Index>(sample.size()), (count + 3) / 4) - 1;
    std::nth_element(sample.begin(), sample.begin() + position, sample.end(), std::greater<float>());
    const float threshold = sample[static_cast<std::size_t>(position)];
    if (threshold > 0) {
      ranks.clear();
      for (Index j = 0; j < keys; ++j)
        if (weights[j] >= threshold) ranks.push_back(weight_rank(weights[j], j));
      const Index candidates = static_cast<Index>(ranks.size());
      if (candidates >= count) {
        select_largest(ranks, count, candidates);
        return candidates;
      }
    }
  }
  row_ranks(weights, keys, ranks);
  select_largest(ranks, count, keys);
  return keys;
}

/// For each size c of `sizes` (any order), the sum of the c largest of weights[0..keys) (all of them when c ≥ keys),
/// into `largest` in the order of sizes. Only the values matter here (ties do not change a sum), so the selections run
/// on the weights themselves: the row filtered as in largest_ranks for the largest size, then nested selections (the
/// largest size first, each next one inside the previous front), so the row is scanned once.
inline void sums_of_largest(const float* weights, Index keys, const std::vector<Index>& sizes,
                            std::vector<float>& values, std::vector<float>& sample, std::vector<double>& largest) {
  std::vector<std::size_t> order(sizes.size());
  for (std::size_t s = 0; s < sizes.size(); ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });
  largest.assign(sizes.size(), 0.0);
  if (sizes.empty()) return;
  const Index widest = std::min(sizes[order.front()], keys);
  constexpr Index stride = 8;
  bool filtered = false;
  if (widest * 4 < keys && keys >= 256) {
    sample.clear();
    for (Index j = 0; j < keys; j += stride) sample.push_back(weights[j]);
    const Index position = std::min<Index>(static_cast<Index>(sample.size()), (widest + 3) / 4) - 1;
    std::nth_element(sample.begin(), sample.begin() + position, sample.end(), std::greater<float>());
    const float threshold = sample[static_cast<std::size_t>(position)];
    if (threshold > 0) {
      values.clear();
      for (Index j = 0; j < keys; ++j)
        if (weights[j] >= threshold) values.push_back(weights[j]);
      filtered = static_cast<Index>(values.size()) >= widest;
    }
  }
  if (!filtered) values.assign(weights, weights + keys);
  Index front = static_cast<Index>(values.size());
  std::vector<Index> counts;
  for (const std::size_t s : order) {
    const Index count = std::min(sizes[s], keys);
    if (count > 0 && count < front)
      std::nth_element(values.begin(), values.begin() + (count - 1), values.begin() + front, std::greater<float>());
    front = count;
    counts.push_back(count);
  }
  // the fronts are nested: sum from the smallest outwards
  double sum = 0;
  Index summed = 0;
  for (std::size_t t = order.size(); t-- > 0;) {
    for (; summed < counts[t]; ++summed) sum += static_cast<double>(values[static_cast<std::size_t>(summed)]);
    largest[order[t]] = sum;
  }
}

}  // namespace attnscope::kvcache::detail
