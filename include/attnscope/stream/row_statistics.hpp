// attnscope/stream/row_statistics.hpp — exact per-query-row statistics of softmax(scale·q·Kᵀ) computed from Q and K
// without the L×L matrix: rows are processed in blocks of `block_rows`; each block's logits against its visible keys
// are one Eigen GEMM into a per-thread strip (block_rows × visible keys), and every row of the strip is reduced at
// once (max, exp-and-sum, entropy, sink mass, max weight, exact ‖J‖₂, top-k mass). Memory is O(L·d) for the inputs
// plus O(threads · block_rows · L) for the strips, never O(L²). Rows are independent, so results are bitwise identical
// for any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/row_reductions.hpp"
#include "attnscope/normalize/spectral_norm.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnscope::stream {

/// A boolean per key (true = visible to every query); empty means every key is visible.
using KeyMask = Eigen::Array<bool, Eigen::Dynamic, 1>;

/// Which keys each query row sees and which statistics are computed.
struct RowStatisticsOptions {
  /// Causal: row i sees keys j ≤ i. Full: every key.
  bool causal = true;
  /// Sliding window W ≥ 1: causal rows see i − W < j ≤ i; full rows see |i − j| < W. Unset: no window.
  std::optional<Index> window;
  /// Logit scale; unset: 1/√d.
  std::optional<double> scale;
  /// Keys whose weights form the sink mass (each in [0, L)); masked or invisible sinks contribute nothing.
  std::vector<Index> sink_keys{0};
  /// Whether max_weight skips the sink keys (a row whose visible keys are all sinks then gets 0).
  bool max_weight_excludes_sinks = false;
  /// The k of each top-k mass column (each ≥ 1; k larger than a row's visible keys gives that row's total mass 1).
  std::vector<Index> top_k;
  /// Whether to solve for the exact ‖J‖₂ (the most expensive statistic: a few vectorized passes per row).
  bool jacobian_norm = true;
  /// Keys masked for every query (e.g. padding); empty: none.
  KeyMask key_mask;
  /// Query rows per GEMM block (memory per thread: block_rows · L scalars, plus one row of L).
  Index block_rows = 64;
  /// OpenMP threads; 0: the OpenMP default (ignored without OpenMP).
  int threads = 0;
};

/// Per query row (length L), in double whatever the input scalar.
struct RowStatistics {
  Vector<double> max_scaled_logit;  ///< max_j s·q·k_j over the visible keys
  Vector<double> log_partition;     ///< log Σ_j exp(s·q·k_j)
  Vector<double> entropy;           ///< −Σ p log p (nats)
  Vector<double> sink_mass;         ///< Σ_{j ∈ sinks} p_j
  Vector<double> max_weight;        ///< max_j p_j (sinks skipped if asked)
  Vector<double> jacobian_norm;     ///< ‖diag p − ppᵀ‖₂ (0 if not computed)
  Eigen::MatrixXd top_k_mass;       ///< L × top_k.size(): mass of the k largest weights
  std::vector<Index> top_k;         ///< the k of each column of top_k_mass
  Eigen::Matrix<Index, Eigen::Dynamic, 1> visible_keys;  ///< number of visible keys per row
};

namespace detail {

using attnscope::detail::throw_invalid_argument;

/// Rows per GEMM call (see row_statistics).
inline constexpr int gemm_rows = 32;

/// Throws naming `which`, the row and the column of the first non-finite entry of a row-major view.
template <class Scalar>
void require_finite_rows(const char* function, const char* which, const RowMatrixView<Scalar>& matrix) {
  for (Index i = 0; i < matrix.rows(); ++i) {
    const Scalar* row = matrix.data() + i * matrix.outerStride();
    if (kernels::row_max(row, matrix.cols()).finite) continue;
    for (Index j = 0; j < matrix.cols(); ++j)
      if (!std::isfinite(static_cast<double>(row[j])))
        throw_invalid_argument(function, "non-finite value ", row[j], " in ", which, " at row ", i, ", column ", j);
  }
}

/// Visible key range [first, end) of query `row` in original key indices (before the key mask).
inline void visible_key_range(const RowStatisticsOptions& options, Index row, Index length, Index& first,
                              Index& end) {
  first = 0;
  end = options.causal ? row + 1 : length;
  if (options.window) {
    first = std::max<Index>(0, row - *options.window + 1);
    if (!options.causal) end = std::min<Index>(length, row + *options.window);
  }
}

/// The `kept` largest of p[0..n) in descending order (1 ≤ kept ≤ n), in `candidates` (or in p, reordered).
/// Few of many (kept ≤ n/16): the minimum t of the maxima of `kept` disjoint chunks is a value with at least `kept`
/// entries ≥ t, so the top `kept` are among the entries ≥ t — typically a few times `kept` — which one branch-free
/// pass collects and nth_element orders [derived]. Otherwise nth_element on the whole row.
template <class Scalar>
const Scalar* largest_descending(Scalar* p, Index n, Index kept, std::vector<Scalar>& candidates) {
  Scalar* values = p;
  Index count = n;
  if (kept * 16 <= n) {
    const Index chunk = n / kept;
    Scalar threshold = kernels::row_max(p + (kept - 1) * chunk, n - (kept - 1) * chunk).max;
    for (Index c = 0; c + 1 < kept; ++c) threshold = std::min(threshold, kernels::row_max(p + c * chunk, chunk).max);
    candidates.resize(static_cast<std::size_t>(n));
    count = 0;
    for (Index j = 0; j < n; ++j) {
      candidates[static_cast<std::size_t>(count)] = p[j];
      count += p[j] >= threshold ? 1 : 0;
    }
    values = candidates.data();
  }
  std::nth_element(values, values + (kept - 1), values + count, std::greater<Scalar>());
  std::sort(values, values + kept, std::greater<Scalar>());
  return values;
}

/// The statistics of one row from its n contiguous raw logits z (scaled by `scale` inside the exp), with `p` a
/// scratch buffer of ≥ n entries, `top_buffer` scratch for the top-k; `sink_positions` are sorted positions in [0, n).
template <class Scalar>
void reduce_row(const char* function, const Scalar* z, Index n, Scalar scale, const std::vector<Index>& sink_positions,
                const RowStatisticsOptions& options, Index max_top_k, Scalar* p, std::vector<Scalar>& top_buffer,
                Index row, RowStatistics& out) {
  const auto maximum = kernels::row_max(z, n);
  if (!maximum.finite)
    throw_invalid_argument(function, "a logit of row ", row, " overflows (q·k not finite)");
  const Scalar sum = kernels::exp_shifted_sum(z, n, maximum.max, scale, p);  // Σ exp(s(z_j − m)) ≥ 1
  const double log_sum = std::log(static_cast<double>(sum));
  const double max_scaled = static_cast<double>(scale) * static_cast<double>(maximum.max);
  out.max_scaled_logit(row) = max_scaled;
  out.log_partition(row) = max_scaled + log_sum;  // log Σ exp(s z_j) = s m + log Σ exp(s(z_j − m))
  kernels::scale_row(p, n, Scalar(1) / sum);
  // −Σ p log p with log p_j = s(z_j − m) − log S: H = log S + s Σ p_j (m − z_j), two non-negative terms [derived]
  using Array = Eigen::Map<const Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
  const Scalar spread = (Array(p, n) * (maximum.max - Array(z, n))).sum();
  out.entropy(row) = log_sum + static_cast<double>(scale) * static_cast<double>(spread);
  double sink = 0;
  for (const Index position : sink_positions) sink += static_cast<double>(p[position]);
  out.sink_mass(row) = sink;
  if (options.max_weight_excludes_sinks && !sink_positions.empty()) {
    Scalar best = 0;
    Index start = 0;
    for (const Index position : sink_positions) {
      if (position > start) best = std::max(best, kernels::row_max(p + start, position - start).max);
      start = position + 1;
    }
    if (n > start) best = std::max(best, kernels::row_max(p + start, n - start).max);
    out.max_weight(row) = static_cast<double>(best);
  } else {
    out.max_weight(row) = static_cast<double>(kernels::row_max(p, n).max);
  }
  // exact ‖diag p − ppᵀ‖₂ by the secular method of normalize/spectral_norm.hpp (docs/theory/normalization-maps.md §5)
  out.jacobian_norm(row) =
      options.jacobian_norm ? static_cast<double>(attnscope::detail::softmax_jacobian_norm_row(p, n, Scalar(1))) : 0.0;
  if (max_top_k > 0) {  // last: may reorder p
    const Index kept = std::min(max_top_k, n);
    const Scalar* largest = largest_descending(p, n, kept, top_buffer);
    for (std::size_t c = 0; c < options.top_k.size(); ++c) {
      const Index k = std::min(options.top_k[c], n);
      double mass = 0;
      for (Index t = 0; t < k; ++t) mass += static_cast<double>(largest[t]);
      out.top_k_mass(row, static_cast<Index>(c)) = mass;
    }
  }
}

}  // namespace detail

/// Exact statistics of every query row of softmax(scale·Q Kᵀ) over the visible keys (causal or full, optional
/// sliding window, optional key mask), from Q [L, d] and K [L, d] (float or double, any dense expression; row-major
/// inputs, e.g. memory-mapped arrays, are read in place). Per row: max scaled logit, log-partition, entropy, sink
/// mass, max weight, top-k masses and the exact ‖diag p − ppᵀ‖₂ (docs/api/stream.md). Arithmetic is in the input
/// scalar (GEMM, exp, secular solver); results are returned in double.
/// Memory: O(L·d) (plus a compacted copy of K when a key mask is given) + threads · (block_rows + 2) · L scalars (strip,
/// row buffer, top-k candidates); never the L×L matrix. Identical results for any thread
/// count. Throws attnscope::invalid_argument for empty Q/K, a shape mismatch, NaN/Inf in Q or K, a logit overflow, a
/// window ≤ 0, a scale not finite and > 0, a sink key outside [0, L), a k ≤ 0, a key mask of length ≠ L, a row with no
/// visible key, block_rows ≤ 0 or threads < 0 — the message names the function and the value.
template <class DerivedQ, class DerivedK>
RowStatistics row_statistics(const Eigen::MatrixBase<DerivedQ>& queries, const Eigen::MatrixBase<DerivedK>& keys,
                             const RowStatisticsOptions& options = {}) {
  using Scalar = typename DerivedQ::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::stream::row_statistics: Q must be float or double");
  static_assert(std::is_same<Scalar, typename DerivedK::Scalar>::value,
                "attnscope::stream::row_statistics: Q and K must have the same scalar type");
  const char* function = "stream::row_statistics";
  using detail::throw_invalid_argument;
  const RowMatrixView<Scalar> q(queries.derived()), k(keys.derived());
  if (q.rows() == 0 || q.cols() == 0) throw_invalid_argument(function, "empty Q (", q.rows(), "x", q.cols(), ")");
  if (k.rows() == 0 || k.cols() == 0) throw_invalid_argument(function, "empty K (", k.rows(), "x", k.cols(), ")");
  if (q.rows() != k.rows() || q.cols() != k.cols())
    throw_invalid_argument(function, "Q/K shape mismatch: ", q.rows(), "x", q.cols(), " vs ", k.rows(), "x", k.cols());
  const Index length = q.rows(), dimension = q.cols();
  if (options.window && *options.window <= 0)
    throw_invalid_argument(function, "window must be >= 1, got ", *options.window);
  const double scale_value = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(dimension));
  if (!(scale_value > 0) || !std::isfinite(scale_value))
    throw_invalid_argument(function, "scale must be finite and > 0, got ", scale_value);
  for (const Index sink : options.sink_keys)
    if (sink < 0 || sink >= length)
      throw_invalid_argument(function, "sink key ", sink, " is outside [0, ", length, ")");
  Index max_top_k = 0;
  for (const Index top : options.top_k) {
    if (top <= 0) throw_invalid_argument(function, "top-k needs k >= 1, got ", top);
    max_top_k = std::max(max_top_k, top);
  }
  if (options.key_mask.size() != 0 && options.key_mask.size() != length)
    throw_invalid_argument(function, "key mask has ", options.key_mask.size(), " entries for ", length, " keys");
  if (options.block_rows <= 0) throw_invalid_argument(function, "block_rows must be >= 1, got ", options.block_rows);
  if (options.threads < 0) throw_invalid_argument(function, "threads must be >= 0, got ", options.threads);
  detail::require_finite_rows(function, "Q", q);
  detail::require_finite_rows(function, "K", k);

  // visible keys, compacted when a key mask is given: row i sees compacted keys [first(i), end(i))
  const bool masked = options.key_mask.size() != 0;
  std::vector<Index> keys_before(static_cast<std::size_t>(length) + 1, 0);  // visible keys among [0, j)
  for (Index j = 0; j < length; ++j)
    keys_before[static_cast<std::size_t>(j) + 1] =
        keys_before[static_cast<std::size_t>(j)] + ((!masked || options.key_mask(j)) ? 1 : 0);
  RowMatrix<Scalar> compacted;
  if (masked) {
    compacted.resize(keys_before.back(), dimension);
    for (Index j = 0; j < length; ++j)
      if (options.key_mask(j)) compacted.row(keys_before[static_cast<std::size_t>(j)]) = k.row(j);
  }
  const RowMatrixView<Scalar> visible = masked ? RowMatrixView<Scalar>(compacted) : k;
  const auto range = [&](Index row, Index& first, Index& end) {
    detail::visible_key_range(options, row, length, first, end);
    first = keys_before[static_cast<std::size_t>(first)];
    end = keys_before[static_cast<std::size_t>(end)];
  };
  for (Index i = 0; i < length; ++i) {
    Index first = 0, end = 0;
    range(i, first, end);
    if (end == first) throw_invalid_argument(function, "row ", i, " has no visible key (every key masked)");
  }
  std::vector<Index> sink_columns;  // compacted indices of the visible sink keys, sorted, unique
  for (const Index sink : options.sink_keys)
    if (!masked || options.key_mask(sink)) sink_columns.push_back(keys_before[static_cast<std::size_t>(sink)]);
  std::sort(sink_columns.begin(), sink_columns.end());
  sink_columns.erase(std::unique(sink_columns.begin(), sink_columns.end()), sink_columns.end());

  RowStatistics out;
  for (Vector<double>* column : {&out.max_scaled_logit, &out.log_partition, &out.entropy, &out.sink_mass,
                                 &out.max_weight, &out.jacobian_norm})
    column->resize(length);
  out.top_k = options.top_k;
  out.top_k_mass.resize(length, static_cast<Index>(options.top_k.size()));
  out.visible_keys.resize(length);

  const Index block_rows = std::min(options.block_rows, length);
  const Index blocks = (length + block_rows - 1) / block_rows;
  // the widest strip: keys visible to some row of a block (ranges are monotone in the row for every visibility)
  Index widest = 0;
  for (Index block = 0; block < blocks; ++block) {
    const Index row_begin = block * block_rows, row_end = std::min(length, row_begin + block_rows);
    Index first = 0, unused = 0, end = 0;
    range(row_begin, first, unused);
    range(row_end - 1, unused, end);
    widest = std::max(widest, end - first);
  }
  const Scalar scale = static_cast<Scalar>(scale_value);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(blocks));
  const auto run_block = [&](Index block, std::vector<Scalar>& strip_buffer, std::vector<Scalar>& row_buffer,
                             std::vector<Scalar>& top_buffer, std::vector<Index>& sink_positions) {
    const Index row_begin = block * block_rows, row_end = std::min(length, row_begin + block_rows);
    const Index rows = row_end - row_begin;
    Index strip_first = 0, unused = 0, strip_end = 0;
    range(row_begin, strip_first, unused);
    range(row_end - 1, unused, strip_end);
    const Index width = strip_end - strip_first;
    // raw q·k, in GEMMs of ≤ 32 rows: a destination of at most 32 rows at compile time keeps Eigen from opening its
    // own OpenMP team inside ours (its parallel GEMM spins badly when nested)
    using StripChunk = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor, detail::gemm_rows>;
    for (Index chunk = 0; chunk < rows; chunk += detail::gemm_rows) {
      const Index chunk_rows = std::min<Index>(detail::gemm_rows, rows - chunk);
      Eigen::Map<StripChunk> strip(strip_buffer.data() + chunk * width, chunk_rows, width);
      strip.noalias() =
          q.middleRows(row_begin + chunk, chunk_rows) * visible.middleRows(strip_first, width).transpose();
    }
    for (Index i = row_begin; i < row_end; ++i) {
      Index first = 0, end = 0;
      range(i, first, end);
      sink_positions.clear();
      for (const Index column : sink_columns)
        if (column >= first && column < end) sink_positions.push_back(column - first);
      out.visible_keys(i) = end - first;
      const Scalar* logits = strip_buffer.data() + (i - row_begin) * width + (first - strip_first);
      detail::reduce_row(function, logits, end - first, scale, sink_positions, options, max_top_k, row_buffer.data(),
                         top_buffer, i, out);
    }
  };
#if defined(_OPENMP)
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  // always inside a parallel region (of one thread if asked): Eigen's GEMM then stays on its calling thread
#pragma omp parallel num_threads(threads)
#endif
  {
    std::vector<Scalar> strip_buffer(static_cast<std::size_t>(block_rows * widest)),  // per thread, first-touched
        row_buffer(static_cast<std::size_t>(widest));                                  // by the thread that uses it
    std::vector<Scalar> top_buffer;
    std::vector<Index> sink_positions;
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
    for (Index b = 0; b < blocks; ++b) {
      const Index block = blocks - 1 - b;  // widest (causal) blocks first
      try {
        run_block(block, strip_buffer, row_buffer, top_buffer, sink_positions);
      } catch (...) {
        errors[static_cast<std::size_t>(block)] = std::current_exception();
      }
    }
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace attnscope::stream
