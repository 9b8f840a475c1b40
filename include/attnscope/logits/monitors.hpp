// attnscope/logits/monitors.hpp — monitors for training code (docs/theory/logits.md §3, §6): per-head max-logit
// tracking (Wortsman et al. 2023 / MuonClip conventions), loss-spike detectors; the attention-entropy monitor (entropy
// collapse) is attnscope::row_entropy (normalize/entropy.hpp, included here).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/entropy.hpp"

namespace attnscope::logits {

/// Signed and absolute maximum of the visible entries of a scaled-score matrix S = QKᵀ/√d_h.
struct LogitExtremes {
  double max_logit = 0;      // max_{visible (i,j)} S_ij (MuonClip S_max, Kimi K2 §3)
  double max_abs_logit = 0;  // max_{visible (i,j)} |S_ij| (docs/theory/logits.md §2 "max logit")
};

/// Extremes of the visible scaled scores (masked entries may hold anything, e.g. −inf). O(rows·cols).
template <class Derived>
LogitExtremes visible_logit_extremes(const Eigen::MatrixBase<Derived>& scores, const Visibility& visibility = {}) {
  attnscope::detail::require_nonempty("visible_logit_extremes", scores);
  visibility.validate("visible_logit_extremes", scores.rows(), scores.cols());
  LogitExtremes extremes{-HUGE_VAL, 0};
  for (Index i = 0; i < scores.rows(); ++i)
    for (Index j = 0; j < scores.cols(); ++j) {
      if (!visibility.visible(i, j, scores.cols())) continue;
      const double s = static_cast<double>(scores(i, j));
      if (!std::isfinite(s))
        attnscope::detail::throw_invalid_argument("visible_logit_extremes", "non-finite score ", s, " at row ", i,
                                                  ", column ", j);
      extremes.max_logit = std::max(extremes.max_logit, s);
      extremes.max_abs_logit = std::max(extremes.max_abs_logit, std::abs(s));
    }
  return extremes;
}

/// Running per-head maximum of the scaled scores z_ij = ⟨q_i, k_j⟩/√d_h over everything observed since the last
/// reset (a batch, a step, or a whole run): the Wortsman et al. 2023 max attention logit and the MuonClip S_max^h
/// (docs/theory/logits.md §3).
class MaxLogitTracker {
 public:
  explicit MaxLogitTracker(Index heads) {
    if (heads < 1) attnscope::detail::throw_invalid_argument("MaxLogitTracker", "heads must be >= 1, got ", heads);
    max_logit_.assign(static_cast<std::size_t>(heads), -HUGE_VAL);
    max_abs_logit_.assign(static_cast<std::size_t>(heads), 0.0);
    observed_.assign(static_cast<std::size_t>(heads), false);
  }

  Index heads() const { return static_cast<Index>(max_logit_.size()); }

  /// Folds one score matrix of `head` into the running maxima; returns that matrix's extremes.
  template <class Derived>
  LogitExtremes observe(Index head, const Eigen::MatrixBase<Derived>& scores, const Visibility& visibility = {}) {
    check_head("MaxLogitTracker::observe", head);
    const LogitExtremes extremes = visible_logit_extremes(scores, visibility);
    const auto h = static_cast<std::size_t>(head);
    max_logit_[h] = std::max(max_logit_[h], extremes.max_logit);
    max_abs_logit_[h] = std::max(max_abs_logit_[h], extremes.max_abs_logit);
    observed_[h] = true;
    return extremes;
  }

  /// Signed maximum S_max^h (MuonClip convention). Throws if the head has not been observed since the last reset.
  double max_logit(Index head) const { return value("MaxLogitTracker::max_logit", head, max_logit_); }
  /// Maximum absolute scaled score.
  double max_abs_logit(Index head) const { return value("MaxLogitTracker::max_abs_logit", head, max_abs_logit_); }

  /// Heads whose S_max exceeds a threshold τ (MuonClip rescales W_q, W_k of these heads; τ = 100 in Kimi K2).
  std::vector<Index> heads_above(double threshold) const {
    std::vector<Index> heads;
    for (Index h = 0; h < this->heads(); ++h)
      if (observed_[static_cast<std::size_t>(h)] && max_logit_[static_cast<std::size_t>(h)] > threshold)
        heads.push_back(h);
    return heads;
  }

  /// Forgets everything observed (start of a new step or batch).
  void reset() {
    std::fill(max_logit_.begin(), max_logit_.end(), -HUGE_VAL);
    std::fill(max_abs_logit_.begin(), max_abs_logit_.end(), 0.0);
    std::fill(observed_.begin(), observed_.end(), false);
  }

 private:
  void check_head(const char* function, Index head) const {
    if (head < 0 || head >= heads())
      attnscope::detail::throw_invalid_argument(function, "head ", head, " out of range [0, ", heads(), ")");
  }
  double value(const char* function, Index head, const std::vector<double>& values) const {
    check_head(function, head);
    if (!observed_[static_cast<std::size_t>(head)])
      attnscope::detail::throw_invalid_argument(function, "head ", head, " has not been observed since the last reset");
    return values[static_cast<std::size_t>(head)];
  }

  std::vector<double> max_logit_, max_abs_logit_;
  std::vector<bool> observed_;
};

/// Loss-spike detector with a rolling median (docs/theory/logits.md §6 [derived]): a loss is a spike when it exceeds
/// the median of the previous `window` losses by more than `margin` (once `min_history` losses are known), or
/// when it is not finite. Spikes are not added to the history. O(window) per observation.
class RollingMedianSpikeDetector {
 public:
  explicit RollingMedianSpikeDetector(Index window = 201, double margin = 0.1, Index min_history = 10)
      : window_(window), min_history_(min_history), margin_(margin) {
    if (window < 1)
      attnscope::detail::throw_invalid_argument("RollingMedianSpikeDetector", "window must be >= 1, got ", window);
    if (!(margin >= 0) || !std::isfinite(margin))
      attnscope::detail::throw_invalid_argument("RollingMedianSpikeDetector", "margin must be finite and >= 0, got ",
                                                margin);
    if (min_history < 1 || min_history > window)
      attnscope::detail::throw_invalid_argument("RollingMedianSpikeDetector",
                                                "min_history must lie in [1, window], got ", min_history);
  }

  /// Returns true when `loss` is a spike.
  bool observe(double loss) {
    ++observations_;
    if (!std::isfinite(loss)) return record_spike();
    if (static_cast<Index>(history_.size()) >= min_history_) {
      std::vector<double> sorted(history_.begin(), history_.end());
      const std::size_t middle = sorted.size() / 2;
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(middle), sorted.end());
      double median = sorted[middle];
      if (sorted.size() % 2 == 0)
        median = 0.5 * (median + *std::max_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(middle)));
      if (loss > median + margin_) return record_spike();
    }
    history_.push_back(loss);
    if (static_cast<Index>(history_.size()) > window_) history_.pop_front();
    return false;
  }

  /// Observation indices (0-based) flagged as spikes.
  const std::vector<Index>& spikes() const { return spikes_; }

 private:
  bool record_spike() {
    spikes_.push_back(observations_ - 1);
    return true;
  }

  Index window_, min_history_;
  double margin_;
  Index observations_ = 0;
  std::deque<double> history_;
  std::vector<Index> spikes_;
};

/// Loss-spike detector with an exponential moving mean and variance (docs/theory/logits.md §6 [derived]):
/// m ← α·m + (1 − α)·x, v ← α·v + (1 − α)·(x − m_old)²; a loss is a spike when (x − m)/√v > z after `warmup`
/// observations, or when it is not finite (non-finite losses do not update m, v). O(1) per observation.
class EmaSpikeDetector {
 public:
  explicit EmaSpikeDetector(double alpha = 0.97, double z_threshold = 2.5, Index warmup = 10)
      : alpha_(alpha), z_threshold_(z_threshold), warmup_(warmup) {
    if (!(alpha > 0 && alpha < 1))
      attnscope::detail::throw_invalid_argument("EmaSpikeDetector", "alpha must lie in (0, 1), got ", alpha);
    if (!(z_threshold > 0) || !std::isfinite(z_threshold))
      attnscope::detail::throw_invalid_argument("EmaSpikeDetector", "z_threshold must be finite and > 0, got ",
                                                z_threshold);
    if (warmup < 1) attnscope::detail::throw_invalid_argument("EmaSpikeDetector", "warmup must be >= 1, got ", warmup);
  }

  /// Returns true when `loss` is a spike.
  bool observe(double loss) {
    ++observations_;
    if (!std::isfinite(loss)) {
      spikes_.push_back(observations_ - 1);
      return true;
    }
    bool spike = false;
    if (seen_ == 0) {
      mean_ = loss;
    } else {
      if (seen_ >= warmup_ && variance_ > 0 && (loss - mean_) / std::sqrt(variance_) > z_threshold_) spike = true;
      const double deviation = loss - mean_;
      mean_ = alpha_ * mean_ + (1 - alpha_) * loss;
      variance_ = alpha_ * variance_ + (1 - alpha_) * deviation * deviation;
    }
    ++seen_;
    if (spike) spikes_.push_back(observations_ - 1);
    return spike;
  }

  double mean() const { return mean_; }
  double variance() const { return variance_; }
  const std::vector<Index>& spikes() const { return spikes_; }

 private:
  double alpha_, z_threshold_;
  Index warmup_;
  Index observations_ = 0, seen_ = 0;
  double mean_ = 0, variance_ = 0;
  std::vector<Index> spikes_;
};

}  // namespace attnscope::logits
