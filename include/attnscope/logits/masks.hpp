// attnscope/logits/masks.hpp — attention masks of the logit-explosion lab (docs/theory/logits.md §2, §5.2):
// causal, sliding window (flash-attention semantics), column drop (sparse dependencies) and mixed head layouts.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::logits {
namespace detail {

/// Throws unless a sequence length is ≥ 1.
inline void require_sequence_length(const char* function, Index n) {
  if (n < 1) attnscope::detail::throw_invalid_argument(function, "sequence length n must be >= 1, got ", n);
}

/// Throws unless 0 ≤ value ≤ 1 (and finite).
inline void require_fraction(const char* function, const char* name, double value) {
  if (!(value >= 0.0 && value <= 1.0))
    attnscope::detail::throw_invalid_argument(function, name, " must lie in [0, 1], got ", value);
}

}  // namespace detail

/// Key columns kept by column dropping ([derived] from the author's train_sparseDep.py, docs/theory/logits.md §5.2):
/// exactly max(1, round(n·keep)) columns, column 0 always among them (so no causal row is ever empty), the
/// others a seeded uniformly random subset of 1..n−1. Returns one flag per column (true = kept). O(n).
inline std::vector<bool> kept_key_columns(Index n, double keep_fraction, std::uint64_t seed) {
  detail::require_sequence_length("kept_key_columns", n);
  detail::require_fraction("kept_key_columns", "keep_fraction", keep_fraction);
  Index kept = static_cast<Index>(std::llround(static_cast<double>(n) * keep_fraction));
  if (kept < 1) kept = 1;
  std::vector<Index> others;  // columns 1..n−1 in a seeded uniformly random order (Fisher–Yates, Random::shuffle)
  for (Index j = 1; j < n; ++j) others.push_back(j);
  Random(seed).shuffle(others);
  std::vector<bool> keep(static_cast<std::size_t>(n), false);
  keep[0] = true;
  for (Index k = 0; k + 1 < kept; ++k) keep[static_cast<std::size_t>(others[static_cast<std::size_t>(k)])] = true;
  return keep;
}

/// Causal mask: query i sees keys 0..i (docs/theory/logits.md §2). O(n²).
inline Mask causal_mask(Index n) {
  detail::require_sequence_length("causal_mask", n);
  Mask mask(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) mask(i, j) = j <= i;
  return mask;
}

/// Sliding-window mask with flash-attention semantics, window_size = (span, 0): query i sees keys
/// max(0, i−span) … i, i.e. span + 1 keys (docs/theory/logits.md §5.2). span ≥ 0. O(n²).
inline Mask sliding_window_mask(Index n, Index span) {
  detail::require_sequence_length("sliding_window_mask", n);
  if (span < 0) attnscope::detail::throw_invalid_argument("sliding_window_mask", "span must be >= 0, got ", span);
  Mask mask(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) mask(i, j) = j <= i && i - j <= span;
  return mask;
}

/// Causal column-drop mask ("sparse dependencies", docs/theory/logits.md §5.2): key j is visible to query i iff
/// j ≤ i and column j is kept by kept_key_columns(n, 1 − sparsity, seed); column 0 is always kept, so no row is
/// ever empty. sparsity ∈ [0, 1). O(n²).
inline Mask column_drop_mask(Index n, double sparsity, std::uint64_t seed) {
  detail::require_sequence_length("column_drop_mask", n);
  if (!(sparsity >= 0.0 && sparsity < 1.0))
    attnscope::detail::throw_invalid_argument("column_drop_mask", "sparsity must lie in [0, 1), got ", sparsity);
  const std::vector<bool> keep = kept_key_columns(n, 1.0 - sparsity, seed);
  Mask mask(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) mask(i, j) = j <= i && keep[static_cast<std::size_t>(j)];
  return mask;
}

/// LS-attention head layout (docs/theory/logits.md §1, §5.2): heads 0..full_heads−1 are full causal heads, the
/// remaining heads − full_heads are sliding-window heads with the given span (keys i−span … i). O(heads·n²).
inline std::vector<Mask> head_layout(Index heads, Index full_heads, Index n, Index span) {
  if (heads < 1) attnscope::detail::throw_invalid_argument("head_layout", "heads must be >= 1, got ", heads);
  if (full_heads < 0 || full_heads > heads)
    attnscope::detail::throw_invalid_argument("head_layout", "full_heads must lie in [0, ", heads, "], got ",
                                              full_heads);
  detail::require_sequence_length("head_layout", n);
  if (span < 0) attnscope::detail::throw_invalid_argument("head_layout", "span must be >= 0, got ", span);
  std::vector<Mask> layout;
  for (Index h = 0; h < heads; ++h) layout.push_back(h < full_heads ? causal_mask(n) : sliding_window_mask(n, span));
  return layout;
}

}  // namespace attnscope::logits
