// attnscope/analysis/compare.hpp — what changed between two models, head by head (`attnscope compare`): the same
// tokens through two models of one shape and vocabulary (a model and its quantized copy, two checkpoints, a base
// model and its fine-tune), and per layer and head the change of the sink mass, of the entropy with its exact sink and
// content parts, of the max weight and of the mean ‖J‖₂, the Jensen–Shannon divergence between the two models'
// attention rows under the keep and the drop convention of the compositional paper, and the overlap of their top-k
// keys. Both forwards are the streaming forward: each model's attention rows are formed again by the blockwise kernel
// of stream/attention.hpp, block of query rows by block, from that layer's queries and keys, so no L×L matrix is
// ever held. Not included by attnscope/analysis.hpp (it starts a thread): include it where models are compared.
#pragma once

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <limits>
#include <mutex>
#include <ostream>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <Eigen/Core>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/analysis/detail/compare_rows.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/model/forward_options.hpp"
#include "attnscope/model/transformer.hpp"
#include "attnscope/stream/attention.hpp"
#include "attnscope/stream/statistics_types.hpp"

namespace attnscope::analysis {

/// Settings of compare_models.
struct CompareOptions {
  /// Keys whose weights form the sink channel (the sink mass and the sink part of the entropy; the drop convention
  /// removes them). Each ≥ 0; a key the row does not see is not part of it.
  std::vector<Index> sink_keys{0};
  /// The k of the top-k overlap (≥ 1); rows with fewer visible keys use all of them.
  Index top_k = 5;
  /// Query rows per block (memory per model: query_block × L probabilities).
  Index query_block = 64;
  /// RoPE models: allow more tokens than the trained length (see model::StreamingOptions).
  bool allow_beyond_trained_positions = false;
  /// Heads (layer, head) whose downsampled attention images (model A, model B, |B − A|) are returned.
  std::vector<std::pair<int, int>> image_heads;
  /// Longest side of those images in pixels: each pixel is the maximum over a block × block square of entries.
  int image_max_side = 256;
  /// false: compute the images of image_heads only (the table is then empty).
  bool statistics = true;
  /// OpenMP threads of the attention kernel; 0: the default.
  int threads = 0;
  /// Called after each layer compared with (layers done, layers).
  model::ProgressCallback layer_progress{};
};

/// One head's attention in one model, each a mean over the L query rows.
struct HeadAttentionSummary {
  double sink_mass = 0;        // Σ_{j ∈ sinks} p_j
  double entropy = 0;          // H(p) in nats (= entropy_sink + entropy_content)
  double entropy_sink = 0;     // H_b(s) + s·H(p_S/s): the sink channel's part (composition::entropy_split)
  double entropy_content = 0;  // (1 − s)·H(c): the content channel's part
  double max_weight = 0;       // max_j p_j
  double jacobian_norm = 0;    // exact ‖diag p − ppᵀ‖₂ of the softmax row (stream::RowStatistics::jacobian_norm)
};

/// One head of the comparison: A's and B's summaries and what needs both rows at once.
struct HeadComparison {
  int layer = 0, head = 0;
  HeadAttentionSummary a, b;
  /// Mean over the rows of JS(p_A, p_B) (natural log, in [0, ln 2]) over the visible keys: the keep convention.
  double js_keep = 0;
  /// Mean of JS(c_A, c_B) between the content compositions (sinks dropped, the rest renormalised): the drop
  /// convention, over the drop_rows rows where both rows have content mass > 0 (rows seeing only sink keys have
  /// none; a row that sees no sink key counts with c = p). NaN when no row qualifies.
  double js_drop = 0;
  Index drop_rows = 0;
  /// Mean over the rows of |top_k(p_A) ∩ top_k(p_B)| / min(k, visible keys).
  double top_k_overlap = 1;
  /// b − a of every summary field.
  HeadAttentionSummary delta() const {
    return {b.sink_mass - a.sink_mass,   b.entropy - a.entropy,       b.entropy_sink - a.entropy_sink,
            b.entropy_content - a.entropy_content, b.max_weight - a.max_weight, b.jacobian_norm - a.jacobian_norm};
  }
};

/// Downsampled images of one head: block-max of A's and B's attention and of |B − A|, ⌈L/block⌉ pixels a side.
struct HeadComparisonImages {
  int layer = 0, head = 0;
  Index block = 1;
  RowMatrix<double> a, b, difference;
};

/// The result: heads ordered by js_keep, largest first (ties: lower layer, then lower head), and the images asked for
/// (in the order of CompareOptions::image_heads).
struct ModelComparison {
  Index tokens = 0;
  Index top_k = 0;
  std::vector<Index> sink_keys;
  std::vector<HeadComparison> heads;
  std::vector<HeadComparisonImages> images;
};

namespace detail {

/// The state two forwards share while they wait for each other at every layer (lock-step, see compare_models).
struct CompareRendezvous {
  std::mutex mutex;
  std::condition_variable changed;
  int published = -1, consumed = -1;  // last layer whose A inputs are available / that B has compared
  bool a_done = false, b_done = false;
  const RowMatrixView<float>* queries = nullptr;
  const RowMatrixView<float>* keys = nullptr;
  stream::RowStatisticsOptions attention;
};

/// Thrown into a forward to stop it when the other one failed (never leaves compare_models).
struct CompareStopped {};

/// Per head: running sums over the rows, and the image accumulator when the head's images were asked for.
struct HeadSums {
  HeadComparison sums;
  bool image = false;
  CompareImageAccumulator accumulator;
};

/// One model's attention probabilities and statistics for the query rows [first, first + rows) of one head.
template <class Scalar>
void compare_block_attention(const RowMatrixView<Scalar>& queries, const RowMatrixView<Scalar>& keys,
                             const RowMatrix<Scalar>& zero_values, const stream::RowStatisticsOptions& options,
                             RowMatrix<Scalar>& probabilities, stream::RowStatistics& statistics,
                             RowMatrix<Scalar>& output) {
  output.resize(queries.rows(), 1);
  stream::AttentionCapture<Scalar> capture;
  capture.probabilities = &probabilities;
  capture.statistics = &statistics;
  const RowMatrixView<Scalar> values(zero_values.topRows(keys.rows()));
  stream::attention_into<Scalar>(queries, keys, values, output, options, capture);
}

/// Compares every head of one layer from both models' queries and keys, block of query rows by block.
template <class Scalar>
void compare_layer(int layer, const RowMatrixView<Scalar>& queries_a, const RowMatrixView<Scalar>& keys_a,
                   const stream::RowStatisticsOptions& attention_a, const model::TransformerConfig& config_a,
                   const RowMatrixView<Scalar>& queries_b, const RowMatrixView<Scalar>& keys_b,
                   const stream::RowStatisticsOptions& attention_b, const model::TransformerConfig& config_b,
                   const CompareOptions& options, std::vector<HeadSums>& heads) {
  const Index length = queries_a.rows(), keys_total = keys_a.rows();
  const Index size_a = config_a.head_dim, size_b = config_b.head_dim;
  const RowMatrix<Scalar> zero_values = RowMatrix<Scalar>::Zero(keys_total, 1);
  RowMatrix<Scalar> probabilities_a, probabilities_b, output;
  stream::RowStatistics statistics_a, statistics_b;
  ComparedRow row;
  std::vector<Index> order_a, order_b;
  for (int h = 0; h < config_a.n_heads; ++h) {
    HeadSums& sums = heads[std::size_t(layer) * std::size_t(config_a.n_heads) + std::size_t(h)];
    if (!options.statistics && !sums.image) continue;
    HeadComparison& head = sums.sums;
    const Index kv_a = h / (config_a.n_heads / config_a.n_kv_heads), kv_b = h / (config_b.n_heads / config_b.n_kv_heads);
    for (Index first = 0; first < length; first += options.query_block) {
      const Index rows = std::min(options.query_block, length - first);
      // the streaming forward runs the whole sequence from position 0: rows first.. see keys < first + rows
      const Index key_count = std::min(keys_total, first + rows);
      stream::RowStatisticsOptions block_a = attention_a, block_b = attention_b;
      block_a.visibility = compare_block_visibility(attention_a.visibility, first);
      block_a.sink_keys.clear();
      for (Index s : options.sink_keys)
        if (s < key_count) block_a.sink_keys.push_back(s);
      block_a.max_weight_excludes_sinks = false;
      block_a.top_k.clear();
      block_a.jacobian_norm = true;
      block_a.block_rows = options.query_block;
      block_a.threads = options.threads;
      const std::optional<double> scale_b = block_b.scale, softcap_b = block_b.logit_softcap;
      block_b = block_a;
      block_b.visibility = compare_block_visibility(attention_b.visibility, first);
      block_b.scale = scale_b;
      block_b.logit_softcap = softcap_b;
      compare_block_attention<Scalar>(queries_a.middleRows(first, rows).middleCols(h * size_a, size_a),
                                      keys_a.topRows(key_count).middleCols(kv_a * size_a, size_a), zero_values,
                                      block_a, probabilities_a, statistics_a, output);
      compare_block_attention<Scalar>(queries_b.middleRows(first, rows).middleCols(h * size_b, size_b),
                                      keys_b.topRows(key_count).middleCols(kv_b * size_b, size_b), zero_values,
                                      block_b, probabilities_b, statistics_b, output);
      for (Index i = 0; i < rows; ++i) {
        gather_compared_row(probabilities_a, probabilities_b, i, block_a.visibility, block_b.visibility,
                            block_a.sink_keys, row);
        if (sums.image)
          for (std::size_t j = 0; j < row.columns.size(); ++j)
            sums.accumulator.add(first + i, row.columns[j], row.a[j], row.b[j]);
        if (!options.statistics) continue;
        const RowEntropySplit entropy_a = compared_entropy_split(row.a, row.sinks);
        const RowEntropySplit entropy_b = compared_entropy_split(row.b, row.sinks);
        head.a.sink_mass += statistics_a.sink_mass(i), head.b.sink_mass += statistics_b.sink_mass(i);
        head.a.entropy += entropy_a.entropy, head.b.entropy += entropy_b.entropy;
        head.a.entropy_sink += entropy_a.sink, head.b.entropy_sink += entropy_b.sink;
        head.a.entropy_content += entropy_a.content, head.b.entropy_content += entropy_b.content;
        head.a.max_weight += statistics_a.max_weight(i), head.b.max_weight += statistics_b.max_weight(i);
        head.a.jacobian_norm += statistics_a.jacobian_norm(i), head.b.jacobian_norm += statistics_b.jacobian_norm(i);
        const RowDivergence divergence = compared_divergence(row);
        head.js_keep += divergence.keep;
        if (divergence.drop_defined) head.js_drop += divergence.drop, ++head.drop_rows;
        head.top_k_overlap += top_k_overlap(row.a, row.b, options.top_k, order_a, order_b);
      }
    }
  }
}

/// Turns the running sums into means and orders the heads.
inline std::vector<HeadComparison> finish_comparison(std::vector<HeadSums>& heads, Index length) {
  std::vector<HeadComparison> out;
  const double n = static_cast<double>(length);
  for (HeadSums& sums : heads) {
    HeadComparison head = sums.sums;
    for (HeadAttentionSummary* s : {&head.a, &head.b}) {
      s->sink_mass /= n, s->entropy /= n, s->entropy_sink /= n, s->entropy_content /= n;
      s->max_weight /= n, s->jacobian_norm /= n;
    }
    head.js_keep /= n;
    head.js_drop = head.drop_rows > 0 ? head.js_drop / static_cast<double>(head.drop_rows)
                                      : std::numeric_limits<double>::quiet_NaN();
    head.top_k_overlap /= n;
    out.push_back(head);
  }
  std::stable_sort(out.begin(), out.end(), [](const HeadComparison& x, const HeadComparison& y) {
    return x.js_keep > y.js_keep;  // stable: equal divergences keep the (layer, head) order
  });
  return out;
}

}  // namespace detail

/// Runs `tokens` through models a and b and compares their attention head by head (see the file comment and
/// CompareOptions). Both forwards are streaming forwards (model::Transformer::forward_row_statistics, without logits)
/// run in lock-step: model A runs on a second thread and waits at every layer, after its queries and keys are formed,
/// until B has reached the same layer and compared every head of it from both models' post-RoPE queries and keys;
/// then both go on. Per head and block of query_block rows, each model's softmax rows are recomputed by the attention
/// kernel with the layer's scale, softcap and visibility, and reduced at once.
/// Memory: both models' weights, both forwards' activations (each holds one layer's keys and values at a time), and
/// per block 2 · query_block × L probabilities plus the per-head sums; the images asked for (3 · ⌈L/block⌉² doubles
/// per head). Never an L×L matrix. Cost: both forwards, plus per head twice the attention of the layer (the kernel
/// with ‖J‖₂) and O(L · visible keys) row work (gathering, entropy split, JS, top-k) — the same order as the forwards'
/// attention.
/// A layer with a sliding window in one model only is compared over the keys either model sees (weight 0 where a
/// model does not see the key).
/// Throws attnscope::invalid_argument naming `analysis::compare_models` for: no tokens; models of other vocabulary
/// sizes, layer counts or head counts; sink keys < 0; top_k,
/// query_block or image_max_side < 1; an image head outside the model; plus every error of the forwards (a token
/// outside the vocabulary, too many tokens), rethrown from whichever model failed.
template <class Scalar>
ModelComparison compare_models(const model::BasicTransformer<Scalar>& a, const model::BasicTransformer<Scalar>& b,
                               const std::vector<int>& tokens, const CompareOptions& options = {}) {
  const char* function = "analysis::compare_models";
  const model::TransformerConfig &config_a = a.config(), &config_b = b.config();
  if (tokens.empty()) attnscope::detail::throw_invalid_argument(function, "no tokens");
  if (config_a.vocab_size != config_b.vocab_size)
    attnscope::detail::throw_invalid_argument(function, "the models have different vocabularies: ",
                                              config_a.vocab_size, " and ", config_b.vocab_size,
                                              " tokens (they must read the same token ids)");
  if (config_a.n_layers != config_b.n_layers || config_a.n_heads != config_b.n_heads)
    attnscope::detail::throw_invalid_argument(function, "the models have different shapes: ", config_a.n_layers,
                                              " layers × ", config_a.n_heads, " heads and ", config_b.n_layers,
                                              " layers × ", config_b.n_heads, " heads");
  if (options.top_k < 1) attnscope::detail::throw_invalid_argument(function, "top_k must be >= 1, got ", options.top_k);
  if (options.query_block < 1)
    attnscope::detail::throw_invalid_argument(function, "query_block must be >= 1, got ", options.query_block);
  if (options.image_max_side < 1)
    attnscope::detail::throw_invalid_argument(function, "image_max_side must be >= 1, got ", options.image_max_side);
  std::vector<Index> sinks = options.sink_keys;
  std::sort(sinks.begin(), sinks.end());
  sinks.erase(std::unique(sinks.begin(), sinks.end()), sinks.end());
  if (!sinks.empty() && sinks.front() < 0)
    attnscope::detail::throw_invalid_argument(function, "negative sink key ", sinks.front());
  CompareOptions settings = options;
  settings.sink_keys = sinks;

  const Index length = static_cast<Index>(tokens.size());
  const std::size_t head_count = std::size_t(config_a.n_layers) * std::size_t(config_a.n_heads);
  std::vector<detail::HeadSums> heads(head_count);
  for (int l = 0; l < config_a.n_layers; ++l)
    for (int h = 0; h < config_a.n_heads; ++h) {
      heads[std::size_t(l) * std::size_t(config_a.n_heads) + std::size_t(h)].sums.layer = l;
      heads[std::size_t(l) * std::size_t(config_a.n_heads) + std::size_t(h)].sums.head = h;
      heads[std::size_t(l) * std::size_t(config_a.n_heads) + std::size_t(h)].sums.top_k_overlap = 0;
    }
  const Index image_block = std::max<Index>(1, (length + options.image_max_side - 1) / options.image_max_side);
  for (const auto& [layer, head] : options.image_heads) {
    if (layer < 0 || layer >= config_a.n_layers || head < 0 || head >= config_a.n_heads)
      attnscope::detail::throw_invalid_argument(function, "image head (layer ", layer, ", head ", head,
                                                ") is outside the model's ", config_a.n_layers, " layers × ",
                                                config_a.n_heads, " heads");
    detail::HeadSums& sums = heads[std::size_t(layer) * std::size_t(config_a.n_heads) + std::size_t(head)];
    sums.image = true;
    sums.accumulator.start(length, image_block);
  }

  model::StreamingOptions streaming;
  streaming.allow_beyond_trained_positions = options.allow_beyond_trained_positions;
  streaming.statistics.jacobian_norm = false;  // the forwards' own statistics are not used
  streaming.query_block = options.query_block;
  streaming.statistics.threads = options.threads;

  detail::CompareRendezvous meeting;
  std::exception_ptr error_a, error_b;
  model::ForwardOptions forward_a, forward_b;
  forward_a.logits = forward_b.logits = false;
  forward_a.layer_attention_inputs = [&](int layer, const RowMatrixView<float>& queries,
                                         const RowMatrixView<float>& keys,
                                         const stream::RowStatisticsOptions& attention) {
    std::unique_lock<std::mutex> lock(meeting.mutex);
    meeting.queries = &queries, meeting.keys = &keys, meeting.attention = attention;
    meeting.published = layer;
    meeting.changed.notify_all();
    meeting.changed.wait(lock, [&] { return meeting.consumed >= layer || meeting.b_done; });
    if (meeting.consumed < layer) throw detail::CompareStopped{};
  };
  forward_b.layer_attention_inputs = [&](int layer, const RowMatrixView<float>& queries,
                                         const RowMatrixView<float>& keys,
                                         const stream::RowStatisticsOptions& attention) {
    {
      std::unique_lock<std::mutex> lock(meeting.mutex);
      meeting.changed.wait(lock, [&] { return meeting.published >= layer || meeting.a_done; });
      if (meeting.published < layer) throw detail::CompareStopped{};
    }
    // A waits inside its callback until `consumed` moves, so its views stay valid here
    detail::compare_layer<float>(layer, *meeting.queries, *meeting.keys, meeting.attention, config_a, queries, keys,
                                 attention, config_b, settings, heads);
    {
      std::lock_guard<std::mutex> lock(meeting.mutex);
      meeting.consumed = layer;
    }
    meeting.changed.notify_all();
    if (options.layer_progress) options.layer_progress(layer + 1, config_a.n_layers);
  };
  auto run = [&](const model::BasicTransformer<Scalar>& transformer, const model::ForwardOptions& forward,
                 std::exception_ptr& error, bool& done) {
    try {
      (void)transformer.forward_row_statistics(tokens, forward, streaming);
    } catch (const detail::CompareStopped&) {
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(meeting.mutex);
      done = true;
    }
    meeting.changed.notify_all();
  };
  // OpenMP's thread count is a per-thread setting: model A's thread takes the caller's, so that both forwards split
  // their products alike and a model compared with itself gives bitwise equal rows
#if defined(_OPENMP)
  const int openmp_threads = omp_get_max_threads();
#endif
  std::thread thread_a([&] {
#if defined(_OPENMP)
    omp_set_num_threads(openmp_threads);
#endif
    run(a, forward_a, error_a, meeting.a_done);
  });
  run(b, forward_b, error_b, meeting.b_done);
  thread_a.join();
  if (error_a) std::rethrow_exception(error_a);
  if (error_b) std::rethrow_exception(error_b);

  ModelComparison result;
  result.tokens = length;
  result.top_k = options.top_k;
  result.sink_keys = sinks;
  if (options.statistics) result.heads = detail::finish_comparison(heads, length);
  for (const auto& [layer, head] : options.image_heads) {
    detail::HeadSums& sums = heads[std::size_t(layer) * std::size_t(config_a.n_heads) + std::size_t(head)];
    result.images.push_back({layer, head, sums.accumulator.block, sums.accumulator.a, sums.accumulator.b,
                             sums.accumulator.difference});
  }
  return result;
}

/// The comparison as CSV, one line per head in the result's order: rank, layer, head, js_keep, js_drop, drop_rows,
/// top_k_overlap, then for sink_mass, entropy, entropy_sink, entropy_content, max_weight and jacobian_norm the
/// columns <name>_a, <name>_b and delta_<name> (= b − a). NaN is written as "nan".
inline void write_comparison_csv(std::ostream& out, const ModelComparison& comparison) {
  out << "rank,layer,head,js_keep,js_drop,drop_rows,top_k_overlap";
  const char* names[] = {"sink_mass", "entropy", "entropy_sink", "entropy_content", "max_weight", "jacobian_norm"};
  for (const char* name : names) out << ',' << name << "_a," << name << "_b,delta_" << name;
  out << '\n';
  auto number = [&](double value) -> std::ostream& {
    if (std::isnan(value)) return out << "nan";
    return out << value;
  };
  const auto precision = out.precision(9);
  for (std::size_t r = 0; r < comparison.heads.size(); ++r) {
    const HeadComparison& head = comparison.heads[r];
    out << r + 1 << ',' << head.layer << ',' << head.head << ',';
    number(head.js_keep) << ',';
    number(head.js_drop) << ',' << head.drop_rows << ',';
    number(head.top_k_overlap);
    const HeadAttentionSummary delta = head.delta();
    const HeadAttentionSummary* parts[] = {&head.a, &head.b, &delta};
    auto field = [](const HeadAttentionSummary& s, int k) {
      const double values[] = {s.sink_mass, s.entropy, s.entropy_sink, s.entropy_content, s.max_weight,
                               s.jacobian_norm};
      return values[k];
    };
    for (int k = 0; k < 6; ++k)
      for (const HeadAttentionSummary* part : parts) {
        out << ',';
        number(field(*part, k));
      }
    out << '\n';
  }
  out.precision(precision);
}

}  // namespace attnscope::analysis
