// attnscope/analysis/detail/compare_kernel.hpp — one head of one layer of analysis::compare_models: both models'
// softmax rows formed block of query rows by block from their post-RoPE queries and keys with the attention kernel's
// own pieces (stream/detail/block_products.hpp: the block logits scale·Q_block·K_runᵀ and the softcap, on keys packed
// once per head; then per row stream::detail::reduce_row: the softmax and its statistics, ‖J‖₂ included), so the rows
// are the streaming forward's (the same products, in the same order), and at once the per-row work that needs both rows (compare_rows.hpp). The
// model's visibilities are causal or causal sliding windows, so each row's keys are one run of the strip: no scatter
// into an L-wide row, no gathering, and every buffer is scratch owned by the calling thread, sized once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <Eigen/Core>

#include "attnscope/analysis/detail/compare_rows.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/stream/detail/block_products.hpp"
#include "attnscope/stream/detail/reduce_row.hpp"
#include "attnscope/stream/statistics_types.hpp"

namespace attnscope::analysis::detail {

/// One model's inputs of one layer (the views handed to model::ForwardOptions::layer_attention_inputs).
struct CompareModelLayer {
  const RowMatrixView<float>* queries = nullptr;  // L × n_heads·head_dim
  const RowMatrixView<float>* keys = nullptr;     // L × n_kv_heads·head_dim
  stream::RowStatisticsOptions attention;         // the layer's visibility, scale and softcap
  Index head_dim = 0;
  int heads_per_kv = 1;
  const Vector<float>* sink_logits = nullptr;  // the layer's learned sink logit per head (gpt-oss), or none
};

/// Running sums of one head over its rows (means once every row is in), and what the rows need of the options.
struct CompareHeadSums {
  double sink_mass[2] = {0, 0}, entropy[2] = {0, 0}, entropy_sink[2] = {0, 0}, entropy_content[2] = {0, 0};
  double max_weight[2] = {0, 0}, jacobian_norm[2] = {0, 0}, learned_sink[2] = {0, 0};
  double js_keep = 0, js_drop = 0, top_k_overlap = 0;
  Index drop_rows = 0;
};

/// Scratch of one thread, reused for every head and block (grown, never shrunk).
struct CompareScratch {
  std::vector<float> strip[2], probabilities[2], joined[2], zeroed[2], copy, candidates, top;
  stream::RowStatistics statistics[2];
  std::vector<Index> sinks[2], joined_sinks, part_sinks;
  std::vector<double> sink_parts, wide[2];
  stream::detail::BlockKeys<float> keys[2];
  stream::detail::BlockProductScratch products;

  void reserve(Index query_block, Index length) {
    // a row of keys plus one part: a learned sink's share σ joins the row as its last part
    const std::size_t row = static_cast<std::size_t>(length) + 1;
    const std::size_t strip_size = static_cast<std::size_t>(query_block) * static_cast<std::size_t>(length);
    for (int m = 0; m < 2; ++m) {
      if (strip[m].size() < strip_size) strip[m].resize(strip_size);
      for (std::vector<float>* buffer : {&probabilities[m], &joined[m], &zeroed[m]})
        if (buffer->size() < row) buffer->resize(row);
      stream::RowStatistics& s = statistics[m];
      if (s.entropy.size() < query_block)
        for (Vector<double>* column : {&s.max_scaled_logit, &s.log_partition, &s.entropy, &s.sink_mass,
                                       &s.max_weight, &s.jacobian_norm, &s.learned_sink, &s.entropy_with_sink})
          column->resize(query_block);
      if (s.visible_keys.size() < query_block) s.visible_keys.resize(query_block);
    }
    for (std::vector<float>* buffer : {&copy, &candidates})
      if (buffer->size() < row) buffer->resize(row);
    for (std::vector<double>& buffer : wide)
      if (buffer.size() < row) buffer.resize(row);
  }
};

/// The keys of `head` of one model for stream::detail::BlockKeys (packed once per head on AVX2 + FMA).
inline void compare_head_keys(const CompareModelLayer& model, int head, stream::detail::BlockKeys<float>& keys) {
  const Index d = model.head_dim, kv_head = head / model.heads_per_kv;
  keys.assign(model.keys->data() + kv_head * d, model.keys->rows(), d, model.keys->outerStride());
}

/// scale·q·kᵀ (then the softcap) of query rows [first, first + rows) of `head` against keys [run_first, run_end),
/// into strip (rows × (run_end − run_first), row-major): stream::detail::BlockKeys::logits, the attention kernel's
/// block logits.
inline void compare_block_logits(const CompareModelLayer& model, const stream::detail::BlockKeys<float>& keys, int head,
                                 Index first, Index rows, Index run_first, Index run_end, float* strip,
                                 stream::detail::BlockProductScratch& scratch) {
  const Index d = model.head_dim;
  const double scale_value = model.attention.scale ? *model.attention.scale : 1.0 / std::sqrt(static_cast<double>(d));
  const Index query_stride = model.queries->outerStride();
  keys.logits(model.queries->data() + first * query_stride + head * d, query_stride, rows, run_first, run_end,
              static_cast<float>(scale_value), model.attention.logit_softcap, strip, run_end - run_first, scratch);
}

/// Compares head `head` of one layer of models a and b over all L query rows (blocks of query_block rows), adding
/// each row's values to `sums` and, when `image` is set, the rows to its block-max images. `sinks`: sorted, unique
/// sink keys. When either model has learned sink logits, each row is compared as the (n+1)-part composition of its
/// real keys' weights and its sink share σ (σ = 0 for a model without): σ is the row's last part and joins the sink
/// channel, so the entropy is that of the composition, its sink part holds σ, and the drop convention removes σ with
/// the sink keys [derived]; the max weight, top-k overlap and images stay over the real keys, ‖J‖₂ is the sink form
/// (stream::detail::reduce_row with the sink logit). Throws (naming analysis::compare_models) when a logit is not
/// finite.
inline void compare_head(const CompareModelLayer& a, const CompareModelLayer& b, int head,
                         const std::vector<Index>& sinks, Index top_k, Index query_block, bool statistics,
                         CompareImageAccumulator* image, CompareHeadSums& sums, CompareScratch& scratch) {
  const char* function = "analysis::compare_models";
  const Index length = a.queries->rows();
  scratch.reserve(query_block, length);
  const CompareModelLayer* models[2] = {&a, &b};
  for (int m = 0; m < 2; ++m) compare_head_keys(*models[m], head, scratch.keys[m]);
  stream::RowStatisticsOptions row_options[2];  // what reduce_row computes: every statistic but the top-k masses
  const bool learned_sinks = a.sink_logits != nullptr || b.sink_logits != nullptr;
  for (int m = 0; m < 2; ++m) {
    row_options[m].jacobian_norm = true;
    row_options[m].top_k.clear();
    if (models[m]->sink_logits != nullptr) row_options[m].sink_logit = static_cast<double>((*models[m]->sink_logits)(head));
  }
  const auto sinks_in = [&](Index first, Index end, std::vector<Index>& positions) {
    positions.clear();
    for (const Index s : sinks)
      if (s >= first && s < end) positions.push_back(s - first);
  };
  for (Index first = 0; first < length; first += query_block) {
    const Index rows = std::min(query_block, length - first);
    Index run_first[2], widths[2];
    for (int m = 0; m < 2; ++m) {
      const Visibility& visibility = models[m]->attention.visibility;
      run_first[m] = visibility.key_range(first, length).first;
      widths[m] = visibility.key_range(first + rows - 1, length).second - run_first[m];
      compare_block_logits(*models[m], scratch.keys[m], head, first, rows, run_first[m], run_first[m] + widths[m],
                           scratch.strip[m].data(), scratch.products);
    }
    for (Index r = 0; r < rows; ++r) {
      const Index i = first + r;
      Index begin[2], count[2];
      for (int m = 0; m < 2; ++m) {
        const auto range = models[m]->attention.visibility.key_range(i, length);
        begin[m] = range.first, count[m] = range.second - range.first;
        sinks_in(range.first, range.second, scratch.sinks[m]);
        const float* logits = scratch.strip[m].data() + r * widths[m] + (range.first - run_first[m]);
        stream::detail::reduce_row<float>(function, logits, count[m], scratch.sinks[m], row_options[m], Index(0),
                                          scratch.probabilities[m].data(), nullptr, scratch.top, r,
                                          scratch.statistics[m]);
      }
      // both rows over the union of their keys (they differ only when one model has a sliding window here)
      const float* row[2] = {scratch.probabilities[0].data(), scratch.probabilities[1].data()};
      const Index joined_first = std::min(begin[0], begin[1]);
      const Index joined_end = std::max(begin[0] + count[0], begin[1] + count[1]);
      const Index n = joined_end - joined_first;
      if (begin[0] != begin[1] || count[0] != count[1])
        for (int m = 0; m < 2; ++m) {
          float* joined = scratch.joined[m].data();
          std::fill(joined, joined + n, 0.0f);
          std::copy(row[m], row[m] + count[m], joined + (begin[m] - joined_first));
          row[m] = joined;
        }
      if (image != nullptr) image->add_row(i, joined_first, row[0], row[1], n);
      if (!statistics) continue;
      const auto sink_share = [&](int m) {
        return models[m]->sink_logits != nullptr ? scratch.statistics[m].learned_sink(r) : 0.0;
      };
      for (int m = 0; m < 2; ++m) {
        const stream::RowStatistics& s = scratch.statistics[m];
        // with learned sinks: the composition (p, σ), σ its last part and a sink
        float* own = scratch.probabilities[m].data();
        const std::vector<Index>* own_sinks = &scratch.sinks[m];
        double entropy = s.entropy(r);
        if (learned_sinks) {
          own[count[m]] = static_cast<float>(sink_share(m));
          scratch.part_sinks = scratch.sinks[m];
          scratch.part_sinks.push_back(count[m]);
          own_sinks = &scratch.part_sinks;
          if (models[m]->sink_logits != nullptr) entropy = s.entropy_with_sink(r);
        }
        const RowEntropySplit split = compared_entropy_split(own, *own_sinks, entropy, scratch.sink_parts);
        sums.sink_mass[m] += s.sink_mass(r);
        sums.entropy[m] += split.entropy;
        sums.entropy_sink[m] += split.sink;
        sums.entropy_content[m] += split.content;
        sums.max_weight[m] += s.max_weight(r);
        sums.jacobian_norm[m] += s.jacobian_norm(r);
        sums.learned_sink[m] += sink_share(m);
      }
      sinks_in(joined_first, joined_end, scratch.joined_sinks);
      Index parts = n;
      if (learned_sinks) {  // both rows gain their σ as part n (the joined copies, or the rows themselves)
        for (int m = 0; m < 2; ++m) {
          float* own = row[m] == scratch.probabilities[m].data() ? scratch.probabilities[m].data() : scratch.joined[m].data();
          own[n] = static_cast<float>(sink_share(m));
        }
        scratch.joined_sinks.push_back(n);
        parts = n + 1;
      }
      ComparedRowView pair;
      pair.a = row[0], pair.b = row[1], pair.n = parts, pair.sinks = &scratch.joined_sinks;
      const RowDivergence divergence = compared_divergence(pair, scratch.zeroed[0], scratch.zeroed[1], scratch.wide[0],
                                                                 scratch.wide[1]);
      sums.js_keep += divergence.keep;
      if (divergence.drop_defined) sums.js_drop += divergence.drop, ++sums.drop_rows;
      sums.top_k_overlap += top_k_overlap(row[0], row[1], n, top_k, scratch.copy, scratch.candidates);
    }
  }
}

}  // namespace attnscope::analysis::detail
