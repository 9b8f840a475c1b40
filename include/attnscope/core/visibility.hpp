// attnscope/core/visibility.hpp — which keys each query row may attend to.
#pragma once

#include <utility>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope {

/// Tag for causal visibility: query row i sees keys 0..i+offset (offset lets a row block start mid-sequence).
struct Causal {
  Index offset = 0;
};

/// Causal visibility with offset 0: row i sees keys 0..i.
inline constexpr Causal causal{};

/// Visibility of keys per query row: everything, causal (a prefix per row), or an explicit mask.
/// Masked keys get weight exactly 0 and do not count in n (the number of keys of the row).
class Visibility {
 public:
  /// (`causal_prefix`, not `causal`: an enumerator named causal would shadow the tag constant attnscope::causal.)
  enum class Kind { all, causal_prefix, mask };

  /// Every key visible.
  Visibility() = default;
  /// Causal: row i sees keys [0, min(cols, i + offset + 1)).
  Visibility(Causal c) : kind_(Kind::causal_prefix), offset_(c.offset) {}  // NOLINT(google-explicit-constructor)
  /// Explicit mask (true = visible); copied.
  Visibility(Mask mask) : kind_(Kind::mask), mask_(std::move(mask)) {}  // NOLINT(google-explicit-constructor)

  Kind kind() const { return kind_; }
  const Mask& mask() const { return mask_; }
  Index causal_offset() const { return offset_; }

  /// True when every row's visible keys are a prefix [0, prefix_length(row)) (kinds all and causal).
  bool is_prefix() const { return kind_ != Kind::mask; }

  /// Number of leading visible keys of a row for prefix kinds (clamped to [0, cols]).
  Index prefix_length(Index row, Index cols) const {
    if (kind_ == Kind::all) return cols;
    const Index end = row + offset_ + 1;
    return end < 0 ? 0 : (end > cols ? cols : end);
  }

  /// Whether key `col` is visible to query `row`.
  bool visible(Index row, Index col, Index cols) const {
    if (kind_ == Kind::mask) return mask_(row, col);
    return col < prefix_length(row, cols);
  }

  /// Number of visible keys in a row.
  Index visible_count(Index row, Index cols) const {
    if (kind_ != Kind::mask) return prefix_length(row, cols);
    return static_cast<Index>(mask_.row(row).count());
  }

  /// Throws if a mask's shape differs from rows x cols, or if any row has no visible key.
  void validate(const char* function, Index rows, Index cols) const {
    if (kind_ == Kind::mask)
      detail::require_same_shape(function, "mask/logits", mask_.rows(), mask_.cols(), rows, cols);
    for (Index i = 0; i < rows; ++i)
      if (visible_count(i, cols) == 0) detail::throw_invalid_argument(function, "row ", i, " has every key masked");
  }

  /// Dense mask of the given shape (for callers that need one).
  Mask to_mask(Index rows, Index cols) const {
    if (kind_ == Kind::mask) return mask_;
    Mask m(rows, cols);
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < cols; ++j) m(i, j) = visible(i, j, cols);
    return m;
  }

 private:
  Kind kind_ = Kind::all;
  Index offset_ = 0;
  Mask mask_;
};

}  // namespace attnscope
