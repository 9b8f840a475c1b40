// attnscope/stream/statistics_types.hpp — the options and the per-row result of the streaming statistics
// (stream::row_statistics and stream::attention share them).
#pragma once

#include <optional>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::stream {

/// A boolean per key (true = visible to every query); empty means every key is visible.
using KeyMask = attnscope::KeyMask;

/// Which keys each query row sees and which statistics are computed.
struct RowStatisticsOptions {
  /// Which keys each query row sees: causal (default), every key, a sliding window (SlidingWindow: causal rows see
  /// i − W < j ≤ i, two-sided rows |i − j| < W), optionally with a key mask (padding) and sink keys that stay visible
  /// outside the window (Visibility::with_key_mask, with_sink_keys), or an explicit mask.
  Visibility visibility = causal;
  /// Logit scale; unset: 1/√d.
  std::optional<double> scale;
  /// Logit softcap c > 0: every scaled logit s becomes c·tanh(s/c) before the softmax (Gemma 2 report, §2); the
  /// scores, max_scaled_logit and log_partition are then of the capped logits. Unset: no cap.
  std::optional<double> logit_softcap;
  /// A learned sink logit s (gpt-oss `sinks`, one per head): an extra logit that joins only the softmax denominator,
  /// p_j = e^{z_j} / (Σ_k e^{z_k} + e^s) over the visible keys (Miller 2023, "Attention Is Off By One"; gpt-oss), so a
  /// row sums to 1 − σ with σ = e^s / (Σ_k e^{z_k} + e^s) the sink's share. s is used as given: not scaled, not capped.
  /// Unset: plain softmax.
  std::optional<double> sink_logit;
  /// Keys whose weights form the sink mass (each in [0, L)); masked or invisible sinks contribute nothing.
  std::vector<Index> sink_keys{0};
  /// Whether max_weight skips the sink keys (a row whose visible keys are all sinks then gets 0).
  bool max_weight_excludes_sinks = false;
  /// The k of each top-k mass column (each ≥ 1; k larger than a row's visible keys gives that row's total mass 1).
  std::vector<Index> top_k;
  /// Whether to solve for the exact ‖J‖₂ (the most expensive statistic: a few vectorized passes per row).
  bool jacobian_norm = true;
  /// Query rows per GEMM block (memory per thread: block_rows · L scalars, plus one row of L).
  Index block_rows = 64;
  /// OpenMP threads; 0: the OpenMP default (ignored without OpenMP).
  int threads = 0;
};

/// Per query row (length L), in double whatever the input scalar.
struct RowStatistics {
  Vector<double> max_scaled_logit;  ///< max_j s·q·k_j over the visible keys
  Vector<double> log_partition;     ///< log Σ_j exp(s·q·k_j)
  Vector<double> entropy;           ///< −Σ p log p (nats); with a learned sink, of the row renormalised over its keys
  Vector<double> sink_mass;         ///< Σ_{j ∈ sinks} p_j
  Vector<double> max_weight;        ///< max_j p_j (sinks skipped if asked)
  Vector<double> jacobian_norm;     ///< ‖diag p − ppᵀ‖₂ (0 if not computed)
  Eigen::MatrixXd top_k_mass;       ///< L × top_k.size(): mass of the k largest weights
  std::vector<Index> top_k;         ///< the k of each column of top_k_mass
  Eigen::Matrix<Index, Eigen::Dynamic, 1> visible_keys;  ///< number of visible keys per row
  // With a learned sink logit only (empty otherwise); the columns above are then of the model's weights p_j, which
  // sum to 1 − σ (sink_mass, max_weight, top_k_mass, and jacobian_norm = ‖diag p − ppᵀ‖₂ with Σp = 1 − σ, §5.4 of
  // docs/theory/normalization-maps.md), except entropy, which is of the renormalised row p/(1 − σ).
  Vector<double> learned_sink;       ///< σ = e^s / (Σ_k e^{z_k} + e^s), the learned sink's share of the row
  Vector<double> entropy_with_sink;  ///< entropy of the (n+1)-part composition (p, σ): h(σ) + (1 − σ)·entropy [derived]
};

}  // namespace attnscope::stream
