// attnscope/core/visibility.hpp — which keys each query row may attend to: every key, causal, a sliding window
// (causal or two-sided), each optionally with a per-key mask (padding) and sink keys that stay visible outside the
// window, or a full explicit mask.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

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

/// Tag for a sliding window of `size` keys around the query position t = i + offset: causal, row i sees the keys
/// t − size < j ≤ t (flash-attention window_size = (size − 1, 0); Mistral's sliding_window); two-sided
/// (causal = false), the keys |t − j| < size.
struct SlidingWindow {
  Index size = 0;
  bool causal = true;
  Index offset = 0;
};

/// A boolean per key (true = visible to every query row); empty means every key is visible.
using KeyMask = Eigen::Array<bool, Eigen::Dynamic, 1>;

/// Visibility of keys per query row. Masked keys get weight exactly 0 and do not count in n (the number of keys of the
/// row). Kinds:
/// - all: every key; causal_prefix: row i sees [0, i + offset + 1) — both are prefixes per row (is_prefix());
/// - band: a contiguous range per row (causal, all keys, or a sliding window), minus the keys of a key mask, plus
///   sink keys that stay visible outside the window (never past the causal limit);
/// - mask: a full explicit rows × cols mask.
class Visibility {
 public:
  /// (`causal_prefix`, not `causal`: an enumerator named causal would shadow the tag constant attnscope::causal.)
  enum class Kind { all, causal_prefix, mask, band };

  /// Every key visible.
  Visibility() = default;
  /// Causal: row i sees keys [0, min(cols, i + offset + 1)).
  Visibility(Causal c) : kind_(Kind::causal_prefix), causal_(true), offset_(c.offset) {}  // NOLINT(google-explicit-constructor)
  /// Sliding window (validate() rejects a size < 1).
  Visibility(SlidingWindow w)  // NOLINT(google-explicit-constructor)
      : kind_(Kind::band), causal_(w.causal), windowed_(true), offset_(w.offset), window_(w.size) {}
  /// Explicit mask (true = visible); copied.
  Visibility(Mask mask) : kind_(Kind::mask), mask_(std::move(mask)) {}  // NOLINT(google-explicit-constructor)

  /// This visibility with the keys where `key_mask` is false hidden from every row (e.g. padding). An empty key mask
  /// changes nothing. On an explicit mask the key mask is applied to its columns (throws on a length other than its
  /// column count).
  Visibility with_key_mask(KeyMask key_mask) const {
    Visibility out = *this;
    if (key_mask.size() == 0) return out;
    if (kind_ == Kind::mask) {
      if (key_mask.size() != mask_.cols())
        detail::throw_invalid_argument("Visibility::with_key_mask", "key mask has ", key_mask.size(),
                                       " entries for a mask of ", mask_.cols(), " columns");
      for (Index i = 0; i < out.mask_.rows(); ++i) out.mask_.row(i) = out.mask_.row(i) && key_mask.transpose();
      return out;
    }
    out.kind_ = Kind::band;
    out.key_mask_ = std::move(key_mask);
    return out;
  }

  /// This visibility with `sinks` (key indices) visible to every row that may see them causally, also outside a
  /// sliding window (StreamingLLM's attention sinks, Xiao et al. 2023, §3.2); a key mask still hides them. Throws on an
  /// explicit mask (which already says which keys are visible).
  Visibility with_sink_keys(std::vector<Index> sinks) const {
    if (kind_ == Kind::mask)
      detail::throw_invalid_argument("Visibility::with_sink_keys", "an explicit mask already lists the visible keys");
    Visibility out = *this;
    if (sinks.empty()) return out;
    std::sort(sinks.begin(), sinks.end());
    sinks.erase(std::unique(sinks.begin(), sinks.end()), sinks.end());
    out.kind_ = Kind::band;
    out.sinks_ = std::move(sinks);
    return out;
  }

  Kind kind() const { return kind_; }
  const Mask& mask() const { return mask_; }
  Index causal_offset() const { return offset_; }
  /// Whether rows see no key past their position (causal and causal sliding windows).
  bool is_causal() const { return causal_; }
  /// Whether a sliding window limits the rows, and its size.
  bool has_window() const { return windowed_; }
  Index window() const { return window_; }
  /// The per-key mask of a band visibility (empty: none).
  const KeyMask& key_mask() const { return key_mask_; }
  /// The sink keys of a band visibility, sorted and unique.
  const std::vector<Index>& sink_keys() const { return sinks_; }

  /// True when every row's visible keys are a prefix [0, prefix_length(row)) (kinds all and causal).
  bool is_prefix() const { return kind_ == Kind::all || kind_ == Kind::causal_prefix; }

  /// Number of leading visible keys of a row for prefix kinds (clamped to [0, cols]).
  Index prefix_length(Index row, Index cols) const {
    if (!causal_) return cols;
    return clamp(row + offset_ + 1, cols);
  }

  /// The contiguous range [first, end) of keys of a row before the key mask and without the sinks: for prefix kinds
  /// the prefix, for a band the causal prefix, all keys or the window, for an explicit mask every column. first and
  /// end never decrease with the row.
  std::pair<Index, Index> key_range(Index row, Index cols) const {
    if (kind_ == Kind::mask) return {0, cols};
    const Index position = row + offset_;
    const Index end = causal_ ? clamp(position + 1, cols) : (windowed_ ? clamp(position + window_, cols) : cols);
    const Index first = windowed_ ? clamp(position - window_ + 1, cols) : 0;
    return {std::min(first, end), end};
  }

  /// Whether key `col` is visible to query `row`.
  bool visible(Index row, Index col, Index cols) const {
    switch (kind_) {
      case Kind::mask: return mask_(row, col);
      case Kind::band: {
        if (key_mask_.size() != 0 && !key_mask_(col)) return false;
        const auto range = key_range(row, cols);
        if (col >= range.first && col < range.second) return true;
        return is_sink(col) && (!causal_ || col <= row + offset_);
      }
      default: return col < prefix_length(row, cols);
    }
  }

  /// Number of visible keys in a row.
  Index visible_count(Index row, Index cols) const {
    if (is_prefix()) return prefix_length(row, cols);
    if (kind_ == Kind::mask) return static_cast<Index>(mask_.row(row).count());
    Index count = 0;
    const auto range = key_range(row, cols);
    if (key_mask_.size() == 0) count = range.second - range.first;
    else
      for (Index j = range.first; j < range.second; ++j) count += key_mask_(j) ? 1 : 0;
    for (const Index sink : sinks_)
      if (sink < cols && (sink < range.first || sink >= range.second) && visible(row, sink, cols)) ++count;
    return count;
  }

  /// When the visible keys of `row` form one contiguous run, sets [first, first + count) and returns true (always for
  /// prefix kinds; for the others after a scan of the row's candidate keys).
  bool contiguous_run(Index row, Index cols, Index& first, Index& count) const {
    first = 0;
    if (is_prefix()) {
      count = prefix_length(row, cols);
      return true;
    }
    const auto range = key_range(row, cols);
    if (kind_ == Kind::band && key_mask_.size() == 0 && sinks_.empty()) {
      first = range.first;
      count = range.second - range.first;
      return true;
    }
    // scan the candidates: the range, plus for a band the sinks on either side of it
    Index j = range.first, end = range.second;
    if (kind_ == Kind::band && !sinks_.empty()) {
      j = std::min(j, sinks_.front());
      end = std::min(cols, std::max(end, sinks_.back() + 1));
    }
    while (j < end && !visible(row, j, cols)) ++j;
    first = j;
    while (j < end && visible(row, j, cols)) ++j;
    count = j - first;
    for (; j < end; ++j)
      if (visible(row, j, cols)) return false;
    return true;
  }

  /// Throws on a structure that does not fit rows × cols: a mask of another shape, a window < 1, a key mask of a length
  /// other than cols, a sink key outside [0, cols). Empty rows are not checked.
  void validate_shape(const char* function, Index rows, Index cols) const {
    if (kind_ == Kind::mask)
      detail::require_same_shape(function, "mask/logits", mask_.rows(), mask_.cols(), rows, cols);
    if (kind_ != Kind::band) return;
    if (windowed_ && window_ < 1)
      detail::throw_invalid_argument(function, "window must be >= 1, got ", window_);
    if (key_mask_.size() != 0 && key_mask_.size() != cols)
      detail::throw_invalid_argument(function, "key mask has ", key_mask_.size(), " entries for ", cols, " keys");
    for (const Index sink : sinks_)
      if (sink < 0 || sink >= cols)
        detail::throw_invalid_argument(function, "visible sink key ", sink, " is outside [0, ", cols, ")");
  }

  /// Throws if the structure does not fit rows × cols (validate_shape), or if any row has no visible key.
  void validate(const char* function, Index rows, Index cols) const {
    validate_shape(function, rows, cols);
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
  static Index clamp(Index value, Index cols) { return value < 0 ? 0 : (value > cols ? cols : value); }
  bool is_sink(Index col) const { return std::binary_search(sinks_.begin(), sinks_.end(), col); }

  Kind kind_ = Kind::all;
  bool causal_ = false;
  bool windowed_ = false;
  Index offset_ = 0;
  Index window_ = 0;
  Mask mask_;
  KeyMask key_mask_;
  std::vector<Index> sinks_;
};

}  // namespace attnscope
