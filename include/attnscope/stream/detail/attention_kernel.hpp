// attnscope/stream/detail/attention_kernel.hpp — the blockwise attention kernel behind stream::attention and
// stream::row_statistics. Query rows are processed in blocks; a block's scaled logits against every key visible to
// one of its rows are one GEMM (scale·Q_block·K_visibleᵀ) into a per-thread strip; each row of the strip is reduced
// with the vectorized row kernels (softmax, log-partition, requested statistics), turned into probabilities in place,
// and the output of the block is one GEMM of the probability strip with the matching rows of V. For float32 on a CPU
// with AVX2 + FMA both products over the block's run of keys run the micro-kernel of kernels/gemm.hpp on keys and
// values packed once per call (stream/detail/block_products.hpp: the rounding of kernels::gemm_xwt, so a row's result
// does not depend on its block), else Eigen's GEMM in chunks of gemm_rows rows.
//
// Keys: with a key mask the visible keys are compacted (K and V copied without the hidden keys), so that every band
// row sees one contiguous run of compacted keys; sink keys outside a block's run are gathered in front of it (a few
// extra strip columns). Rows whose visible keys are not one run of the strip (sinks outside the row's window, explicit
// masks with holes) are gathered into a contiguous buffer and scattered back.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/stream/detail/block_products.hpp"
#include "attnscope/stream/detail/reduce_row.hpp"
#include "attnscope/stream/statistics_types.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnscope::stream {

/// Where stream::attention writes besides the output; every target is optional (null: not computed).
template <class Scalar>
struct AttentionCapture {
  /// rows × keys (resized): scale·q·kᵀ at visible entries, −inf elsewhere.
  RowMatrix<Scalar>* scores = nullptr;
  /// rows × keys (resized): the softmax weights, exactly 0 at invisible entries.
  RowMatrix<Scalar>* probabilities = nullptr;
  /// Per-row statistics chosen by the options (sink_keys, max_weight_excludes_sinks, top_k, jacobian_norm).
  RowStatistics* statistics = nullptr;
  /// rows (resized): the learned sink's share σ of every row (options.sink_logit; 0 without one).
  Vector<double>* learned_sink = nullptr;
};

namespace detail {

/// Writable row-major view with an outer stride (an output, or a block of columns of a wider matrix).
template <class Scalar>
using RowMatrixSpan = Eigen::Ref<RowMatrix<Scalar>, 0, Eigen::OuterStride<>>;

/// The kernel. `values` and `output` are both null (scores and/or statistics only) or both set; with `softmax` false
/// only capture.scores is filled (for other normalization maps). Validates every input, naming `function`.
template <class Scalar>
void attention_kernel(const char* function, const RowMatrixView<Scalar>& q, const RowMatrixView<Scalar>& k,
                      const RowMatrixView<Scalar>* values, RowMatrixSpan<Scalar>* output, bool softmax,
                      const RowStatisticsOptions& options, const AttentionCapture<Scalar>& capture) {
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::stream: inputs must be float or double");
  if (q.rows() == 0 || q.cols() == 0) throw_invalid_argument(function, "empty Q (", q.rows(), "x", q.cols(), ")");
  if (k.rows() == 0 || k.cols() == 0) throw_invalid_argument(function, "empty K (", k.rows(), "x", k.cols(), ")");
  if (q.cols() != k.cols())
    throw_invalid_argument(function, "Q/K shape mismatch: ", q.rows(), "x", q.cols(), " vs ", k.rows(), "x", k.cols());
  const Index rows = q.rows(), cols = k.rows(), dimension = q.cols();
  if (values != nullptr) {
    if (values->rows() != cols)
      throw_invalid_argument(function, "V has ", values->rows(), " rows for ", cols, " keys");
    if (output->rows() != rows || output->cols() != values->cols())
      throw_invalid_argument(function, "output is ", output->rows(), "x", output->cols(), ", expected ", rows, "x",
                             values->cols());
  }
  const Visibility& visibility = options.visibility;
  visibility.validate_shape(function, rows, cols);
  const double scale_value = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(dimension));
  if (!(scale_value > 0) || !std::isfinite(scale_value))
    throw_invalid_argument(function, "scale must be finite and > 0, got ", scale_value);
  if (options.logit_softcap && (!(*options.logit_softcap > 0) || !std::isfinite(*options.logit_softcap)))
    throw_invalid_argument(function, "logit_softcap must be finite and > 0, got ", *options.logit_softcap);
  if (options.sink_logit && !std::isfinite(*options.sink_logit))
    throw_invalid_argument(function, "sink_logit must be finite, got ", *options.sink_logit);
  RowStatistics* statistics = softmax ? capture.statistics : nullptr;
  Index max_top_k = 0;
  if (statistics != nullptr) {
    for (const Index sink : options.sink_keys)
      if (sink < 0 || sink >= cols) throw_invalid_argument(function, "sink key ", sink, " is outside [0, ", cols, ")");
    for (const Index top : options.top_k) {
      if (top <= 0) throw_invalid_argument(function, "top-k needs k >= 1, got ", top);
      max_top_k = std::max(max_top_k, top);
    }
  }
  if (options.block_rows <= 0) throw_invalid_argument(function, "block_rows must be >= 1, got ", options.block_rows);
  if (options.threads < 0) throw_invalid_argument(function, "threads must be >= 0, got ", options.threads);
  require_finite_rows(function, "Q", q);
  require_finite_rows(function, "K", k);

  // keys after the key mask: compacted index c ↔ original key original_of[c]; keys_before[j] = kept keys among [0, j)
  const bool explicit_mask = visibility.kind() == Visibility::Kind::mask;
  const KeyMask& key_mask = visibility.key_mask();
  const bool compact = !explicit_mask && key_mask.size() != 0;
  std::vector<Index> keys_before(static_cast<std::size_t>(cols) + 1, 0), original_of;
  original_of.reserve(static_cast<std::size_t>(cols));
  for (Index j = 0; j < cols; ++j) {
    const bool kept = !compact || key_mask(j);
    keys_before[static_cast<std::size_t>(j) + 1] = keys_before[static_cast<std::size_t>(j)] + (kept ? 1 : 0);
    if (kept) original_of.push_back(j);
  }
  RowMatrix<Scalar> compact_keys, compact_values;
  if (compact) {
    const Index kept = keys_before.back();
    compact_keys.resize(kept, dimension);
    if (values != nullptr) compact_values.resize(kept, values->cols());
    for (Index c = 0; c < kept; ++c) {
      compact_keys.row(c) = k.row(original_of[static_cast<std::size_t>(c)]);
      if (values != nullptr) compact_values.row(c) = values->row(original_of[static_cast<std::size_t>(c)]);
    }
  }
  const RowMatrixView<Scalar> keys = compact ? RowMatrixView<Scalar>(compact_keys) : k;
  const RowMatrixView<Scalar> empty_values(compact_values);
  const RowMatrixView<Scalar> vals = compact ? RowMatrixView<Scalar>(compact_values)
                                             : (values != nullptr ? *values : empty_values);
  // row i's run of compacted keys [first, end) (explicit masks: every key)
  const auto range = [&](Index row, Index& first, Index& end) {
    const auto keys_of_row = visibility.key_range(row, cols);
    first = keys_before[static_cast<std::size_t>(keys_of_row.first)];
    end = keys_before[static_cast<std::size_t>(keys_of_row.second)];
  };
  // compacted visible sink keys (sorted) and whether row i may see sink column c (never past the causal limit)
  std::vector<Index> visible_sinks;
  for (const Index sink : visibility.sink_keys())
    if (!compact || key_mask(sink)) visible_sinks.push_back(keys_before[static_cast<std::size_t>(sink)]);
  const auto sink_visible = [&](Index row, Index column) {
    return !visibility.is_causal() ||
           original_of[static_cast<std::size_t>(column)] <= row + visibility.causal_offset();
  };
  for (Index i = 0; i < rows; ++i) {
    Index count = 0;
    if (explicit_mask) {
      count = visibility.visible_count(i, cols);
    } else {
      Index first = 0, end = 0;
      range(i, first, end);
      count = end - first;
      for (const Index column : visible_sinks)
        if ((column < first || column >= end) && sink_visible(i, column)) ++count;
    }
    if (count == 0) throw_invalid_argument(function, "row ", i, " has no visible key (every key masked)");
  }
  // compacted sink columns of the statistics' sink mass (sorted, unique; hidden sinks dropped)
  std::vector<Index> statistic_sinks;
  if (statistics != nullptr) {
    for (const Index sink : options.sink_keys)
      if (!compact || key_mask(sink)) statistic_sinks.push_back(keys_before[static_cast<std::size_t>(sink)]);
    std::sort(statistic_sinks.begin(), statistic_sinks.end());
    statistic_sinks.erase(std::unique(statistic_sinks.begin(), statistic_sinks.end()), statistic_sinks.end());
    for (Vector<double>* column : {&statistics->max_scaled_logit, &statistics->log_partition, &statistics->entropy,
                                   &statistics->sink_mass, &statistics->max_weight, &statistics->jacobian_norm})
      column->resize(rows);
    statistics->top_k = options.top_k;
    statistics->top_k_mass.resize(rows, static_cast<Index>(options.top_k.size()));
    statistics->visible_keys.resize(rows);
    if (options.sink_logit) {
      statistics->learned_sink.resize(rows);
      statistics->entropy_with_sink.resize(rows);
    } else {
      statistics->learned_sink.resize(0);
      statistics->entropy_with_sink.resize(0);
    }
  }
  if (softmax && capture.learned_sink != nullptr) capture.learned_sink->resize(rows);
  if (capture.scores != nullptr) capture.scores->resize(rows, cols);
  if (softmax && capture.probabilities != nullptr) capture.probabilities->resize(rows, cols);

  const Index block_rows = std::min(options.block_rows, rows);
  const Index blocks = (rows + block_rows - 1) / block_rows;
  // a block's strip: the sinks outside its run [run_first, run_end) of keys (visible to its last row, which sees the
  // most under a causal limit), then the run (rows' runs are monotone in the row for every band visibility)
  const auto block_keys = [&](Index row_begin, Index row_end, Index& run_first, Index& run_end,
                              std::vector<Index>& extra) {
    extra.clear();
    if (explicit_mask) {
      run_first = 0;
      run_end = cols;
      return;
    }
    Index unused = 0;
    range(row_begin, run_first, unused);
    range(row_end - 1, unused, run_end);
    run_end = std::max(run_end, run_first);
    for (const Index column : visible_sinks)
      if ((column < run_first || column >= run_end) && sink_visible(row_end - 1, column)) extra.push_back(column);
  };
  Index widest = 0;
  {
    std::vector<Index> extra;
    for (Index block = 0; block < blocks; ++block) {
      const Index row_begin = block * block_rows, row_end = std::min(rows, row_begin + block_rows);
      Index run_first = 0, run_end = 0;
      block_keys(row_begin, row_end, run_first, run_end, extra);
      widest = std::max(widest, static_cast<Index>(extra.size()) + run_end - run_first);
    }
  }
  const Scalar scale = static_cast<Scalar>(scale_value);
  const bool want_probabilities = softmax && (values != nullptr || capture.probabilities != nullptr);
  const Index value_cols = values != nullptr ? values->cols() : 0;
  using StripChunk = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor, gemm_rows>;
  // the packed products for float32 on AVX2 + FMA when the output has unit inner stride (block_products.hpp): keys
  // and values packed once here, read by every block
  const bool packed_products = packed_block_products<Scalar>() && (output == nullptr || output->innerStride() == 1);
  BlockKeys<Scalar> key_panels;
  key_panels.assign(keys.data(), keys.rows(), dimension, keys.outerStride());
  PackedValues value_panels;
  if constexpr (std::is_same<Scalar, float>::value)
    if (packed_products && softmax && values != nullptr && vals.rows() > 0)
      value_panels.assign(vals.data(), vals.rows(), value_cols, vals.outerStride());
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(blocks));

  struct Scratch {
    std::vector<Scalar> strip, row, gathered, top;
    std::vector<Index> extra, positions, outside, sink_positions;
    RowMatrix<Scalar> extra_keys, extra_values;
    StripChunk output_chunk;
    BlockProductScratch products;
  };
  const auto run_block = [&](Index block, Scratch& scratch) {
    const Index row_begin = block * block_rows, row_end = std::min(rows, row_begin + block_rows);
    const Index block_size = row_end - row_begin;
    Index run_first = 0, run_end = 0;
    block_keys(row_begin, row_end, run_first, run_end, scratch.extra);
    const Index extras = static_cast<Index>(scratch.extra.size()), run = run_end - run_first, width = extras + run;
    if (extras > 0) {
      scratch.extra_keys.resize(extras, dimension);
      if (values != nullptr) scratch.extra_values.resize(extras, value_cols);
      for (Index t = 0; t < extras; ++t) {
        scratch.extra_keys.row(t) = keys.row(scratch.extra[static_cast<std::size_t>(t)]);
        if (values != nullptr) scratch.extra_values.row(t) = vals.row(scratch.extra[static_cast<std::size_t>(t)]);
      }
    }
    Scalar* strip = scratch.strip.data();
    // scaled logits s = scale·q·kᵀ (then the softcap): the run of keys by block_products.hpp (the packed product on
    // AVX2 + FMA: the float32 dot product rounded, times the scale), the few extra sink keys by Eigen
    key_panels.logits(q.data() + row_begin * q.outerStride(), q.outerStride(), block_size, run_first, run_end, scale,
                      options.logit_softcap, strip + extras, width, scratch.products);
    for (Index chunk = 0; extras > 0 && chunk < block_size; chunk += gemm_rows) {
      const Index chunk_rows = std::min<Index>(gemm_rows, block_size - chunk);
      Eigen::Map<StripChunk, 0, Eigen::OuterStride<>> logits(strip + chunk * width, chunk_rows, extras,
                                                            Eigen::OuterStride<>(width));
      logits.noalias() = scale * (q.middleRows(row_begin + chunk, chunk_rows) * scratch.extra_keys.transpose());
      if (options.logit_softcap) {  // s ↦ c·tanh(s/c)
        const Scalar cap = static_cast<Scalar>(*options.logit_softcap);
        logits.array() = cap * (logits.array() / cap).tanh();
      }
    }
    const bool packed = packed_products && run > 0;
    const auto original = [&](Index position) {  // original key index of a strip position
      const Index column = position < extras ? scratch.extra[static_cast<std::size_t>(position)]
                                             : run_first + position - extras;
      return original_of[static_cast<std::size_t>(column)];
    };
    const auto column_position = [&](Index column) -> Index {  // strip position of a compacted column, or −1
      if (column >= run_first && column < run_end) return extras + column - run_first;
      const auto at = std::find(scratch.extra.begin(), scratch.extra.end(), column);
      return at == scratch.extra.end() ? -1 : static_cast<Index>(at - scratch.extra.begin());
    };
    for (Index i = row_begin; i < row_end; ++i) {
      Scalar* row = strip + (i - row_begin) * width;
      // the row's visible strip positions: one run [start, start + n), or the list scratch.positions
      bool contiguous = true;
      Index start = 0, n = 0;
      if (explicit_mask) {
        contiguous = visibility.contiguous_run(i, cols, start, n);
        if (!contiguous) {
          scratch.positions.clear();
          for (Index j = 0; j < cols; ++j)
            if (visibility.mask()(i, j)) scratch.positions.push_back(j);
        }
      } else {
        Index first = 0, end = 0;
        range(i, first, end);
        scratch.outside.clear();
        for (const Index column : visible_sinks)
          if ((column < first || column >= end) && sink_visible(i, column)) scratch.outside.push_back(column_position(column));
        start = extras + first - run_first;
        n = end - first;
        if (!scratch.outside.empty()) {
          std::sort(scratch.outside.begin(), scratch.outside.end());
          const Index count = static_cast<Index>(scratch.outside.size());
          const bool consecutive = scratch.outside.back() - scratch.outside.front() + 1 == count;
          if (consecutive && scratch.outside.back() + 1 == start) {
            start = scratch.outside.front();
            n += count;
          } else if (consecutive && scratch.outside.front() == start + n) {
            n += count;
          } else {
            contiguous = false;
            scratch.positions.clear();
            for (Index p = 0; p < n; ++p) scratch.positions.push_back(start + p);
            scratch.positions.insert(scratch.positions.end(), scratch.outside.begin(), scratch.outside.end());
            std::sort(scratch.positions.begin(), scratch.positions.end());
          }
        }
      }
      Scalar* z = row + start;
      if (!contiguous) {
        n = static_cast<Index>(scratch.positions.size());
        for (Index t = 0; t < n; ++t) scratch.gathered[static_cast<std::size_t>(t)] = row[scratch.positions[static_cast<std::size_t>(t)]];
        z = scratch.gathered.data();
      }
      const auto position_of = [&](Index t) { return contiguous ? start + t : scratch.positions[static_cast<std::size_t>(t)]; };
      // the original key of the row's first entry when its keys are one run of original keys too (else −1)
      const Index run_key = contiguous && !compact && start >= extras ? run_first + start - extras : -1;
      const auto scatter = [&](Scalar* target, Scalar hidden) {  // one dense row of the caller's buffer
        if (run_key >= 0) {
          std::fill(target, target + run_key, hidden);
          std::copy(z, z + n, target + run_key);
          std::fill(target + run_key + n, target + cols, hidden);
          return;
        }
        std::fill(target, target + cols, hidden);
        for (Index t = 0; t < n; ++t) target[original(position_of(t))] = z[t];
      };
      if (capture.scores != nullptr)
        scatter(capture.scores->data() + i * cols, -std::numeric_limits<Scalar>::infinity());
      if (!softmax) continue;
      if (statistics != nullptr) {
        scratch.sink_positions.clear();
        for (const Index column : statistic_sinks) {
          const Index position = column_position(column);
          if (position < 0) continue;
          if (contiguous) {
            if (position >= start && position < start + n) scratch.sink_positions.push_back(position - start);
          } else {
            const auto at = std::lower_bound(scratch.positions.begin(), scratch.positions.end(), position);
            if (at != scratch.positions.end() && *at == position)
              scratch.sink_positions.push_back(static_cast<Index>(at - scratch.positions.begin()));
          }
        }
        std::sort(scratch.sink_positions.begin(), scratch.sink_positions.end());
        reduce_row(function, z, n, scratch.sink_positions, options, max_top_k, z, scratch.row.data(), scratch.top, i,
                   *statistics);
        if (capture.learned_sink != nullptr)
          (*capture.learned_sink)(i) = options.sink_logit ? statistics->learned_sink(i) : 0.0;
      } else {
        double sink_share = 0;
        softmax_row_checked(function, z, n, z, i, options, sink_share);
        if (capture.learned_sink != nullptr) (*capture.learned_sink)(i) = sink_share;
      }
      if (!want_probabilities) continue;
      if (capture.probabilities != nullptr) scatter(capture.probabilities->data() + i * cols, Scalar(0));
      if (values == nullptr) continue;
      if (contiguous) {
        std::fill(row, row + start, Scalar(0));
        std::fill(row + start + n, row + width, Scalar(0));
      } else {
        std::fill(row, row + width, Scalar(0));
        for (Index t = 0; t < n; ++t) row[scratch.positions[static_cast<std::size_t>(t)]] = z[t];
      }
    }
    if (values == nullptr || !softmax) return;
    // the block's output: P·V over the strip's keys
    if (packed) {  // the run's keys by the packed product (values packed once), then the extra keys by Eigen
      auto block_output = output->middleRows(row_begin, block_size);
      if constexpr (std::is_same<Scalar, float>::value)
        value_panels.product(strip + extras, width, block_size, run_first, run, block_output.data(),
                             output->outerStride(), scratch.products);
      if (extras > 0)
        block_output.noalias() +=
            Eigen::Map<const RowMatrix<Scalar>, 0, Eigen::OuterStride<>>(strip, block_size, extras,
                                                                         Eigen::OuterStride<>(width)) *
            scratch.extra_values;
      return;
    }
    for (Index chunk = 0; chunk < block_size; chunk += gemm_rows) {
      const Index chunk_rows = std::min<Index>(gemm_rows, block_size - chunk);
      const Eigen::Map<const StripChunk> probabilities(strip + chunk * width, chunk_rows, width);
      scratch.output_chunk.resize(chunk_rows, value_cols);
      if (run > 0) scratch.output_chunk.noalias() = probabilities.rightCols(run) * vals.middleRows(run_first, run);
      else scratch.output_chunk.setZero();
      if (extras > 0) scratch.output_chunk.noalias() += probabilities.leftCols(extras) * scratch.extra_values;
      output->middleRows(row_begin + chunk, chunk_rows) = scratch.output_chunk;
    }
  };
#if defined(_OPENMP)
  const int threads = options.threads > 0 ? options.threads : (blocks > 1 ? omp_get_max_threads() : 1);
  // always inside a parallel region (of one thread if asked): Eigen's GEMM then stays on its calling thread
#pragma omp parallel num_threads(threads)
#endif
  {
    Scratch scratch;  // per thread, first-touched by the thread that uses it
    scratch.strip.resize(static_cast<std::size_t>(block_rows * widest));
    scratch.row.resize(static_cast<std::size_t>(widest));
    scratch.gathered.resize(static_cast<std::size_t>(widest));
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
    for (Index b = 0; b < blocks; ++b) {
      const Index block = blocks - 1 - b;  // widest (causal) blocks first
      try {
        run_block(block, scratch);
      } catch (...) {
        errors[static_cast<std::size_t>(block)] = std::current_exception();
      }
    }
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
// Compiled once in the optional compiled part (src/extern_templates/attention.cpp).
extern template void attention_kernel<float>(const char*, const RowMatrixView<float>&, const RowMatrixView<float>&,
                                             const RowMatrixView<float>*, RowMatrixSpan<float>*, bool,
                                             const RowStatisticsOptions&, const AttentionCapture<float>&);
extern template void attention_kernel<double>(const char*, const RowMatrixView<double>&, const RowMatrixView<double>&,
                                              const RowMatrixView<double>*, RowMatrixSpan<double>*, bool,
                                              const RowStatisticsOptions&, const AttentionCapture<double>&);
#endif

}  // namespace detail
}  // namespace attnscope::stream
