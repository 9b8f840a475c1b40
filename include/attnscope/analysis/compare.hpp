// attnscope/analysis/compare.hpp — what changed between two models, head by head (`attnscope compare`): the same
// tokens through two models of one shape and vocabulary (a model and its quantized copy, two checkpoints, a base
// model and its fine-tune), and per layer and head the change of the sink mass, of the entropy with its exact sink and
// content parts, of the max weight and of the mean ‖J‖₂, the Jensen–Shannon divergence between the two models'
// attention rows under the keep and the drop convention of the compositional paper, and the overlap of their top-k
// keys. Both forwards are the streaming forward: each model's attention rows are formed again as the blockwise kernel
// of stream/attention.hpp forms them (analysis/detail/compare_kernel.hpp), block of query rows by block, from that
// layer's queries and keys, so no L×L matrix is ever held. Not included by attnscope/analysis.hpp (it starts a thread): include it where models are compared.
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

#include "attnscope/analysis/detail/compare_kernel.hpp"
#include "attnscope/analysis/detail/compare_rows.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/model/forward_options.hpp"
#include "attnscope/model/transformer.hpp"
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
  /// Also the images of the this many heads that changed most (the first heads of the result), collected in the same
  /// pass: each layer's heads are imaged while they are compared and the images of the heads that fall out of the
  /// leading ones are dropped after the layer (memory: that many plus one layer's heads of images).
  int image_most_changed = 0;
  /// Longest side of those images in pixels: each pixel is the maximum over a block × block square of entries.
  int image_max_side = 256;
  /// false: compute the images of image_heads only (the table is then empty; image_most_changed needs true).
  bool statistics = true;
  /// OpenMP threads of the two forwards; 0: the default. The comparison of a layer's heads runs on the two forwards'
  /// threads (a head each in turn) while both wait at that layer.
  int threads = 0;
  /// Called after each layer compared with (layers done, layers).
  model::ProgressCallback layer_progress{};
  /// How each model multiplies its block-quantized weights (model::MatmulMode; [0] model A, [1] model B): comparing
  /// one GGUF file with itself in the two modes measures what llama.cpp's 8-bit activations change.
  model::MatmulMode matmul[2] = {model::MatmulMode::exact, model::MatmulMode::exact};
};

/// One head's attention in one model, each a mean over the L query rows.
struct HeadAttentionSummary {
  double sink_mass = 0;        // Σ_{j ∈ sinks} p_j
  double entropy = 0;          // H(p) in nats (= entropy_sink + entropy_content)
  double entropy_sink = 0;     // H_b(s) + s·H(p_S/s): the sink channel's part (composition::entropy_split)
  double entropy_content = 0;  // (1 − s)·H(c): the content channel's part
  double max_weight = 0;       // max_j p_j
  double jacobian_norm = 0;    // exact ‖diag p − ppᵀ‖₂ of the softmax row (stream::RowStatistics::jacobian_norm)
  double learned_sink = 0;     // σ, a learned sink logit's share of the row (0 for a model without learned sinks)
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
            b.entropy_content - a.entropy_content, b.max_weight - a.max_weight, b.jacobian_norm - a.jacobian_norm,
            b.learned_sink - a.learned_sink};
  }
};

/// Downsampled images of one head: block-max of A's and B's attention and of |B − A|, ⌈L/block⌉ pixels a side.
struct HeadComparisonImages {
  int layer = 0, head = 0;
  Index block = 1;
  RowMatrix<double> a, b, difference;
};

/// The result: heads ordered by js_keep, largest first (ties: lower layer, then lower head), and the images asked for
/// (those of CompareOptions::image_heads in their order, then those of the image_most_changed heads in the result's
/// order, a head listed in both once).
/// One Mixture-of-Experts layer routed in both models: the fraction of tokens whose set of chosen experts differs.
struct LayerRoutingChange {
  int layer = 0;
  double expert_set_change = 0;  // (1/L) #{t : experts_A(t) ≠ experts_B(t) as sets}
};

/// The expert-set change of every layer that is sparse in both models (model::Routing::experts of each, [L, k]), in
/// layer order; a layer routed in one model only is left out. Sets are compared whatever their sizes (a different k
/// changes every token's set).
inline std::vector<LayerRoutingChange> expert_set_changes(const std::vector<model::LayerCapture>& a,
                                                          const std::vector<model::LayerCapture>& b) {
  std::vector<LayerRoutingChange> changes;
  for (std::size_t l = 0; l < std::min(a.size(), b.size()); ++l) {
    const auto& experts_a = a[l].routing.experts;
    const auto& experts_b = b[l].routing.experts;
    if (experts_a.size() == 0 || experts_b.size() == 0) continue;
    if (experts_a.rows() != experts_b.rows())
      attnscope::detail::throw_invalid_argument("analysis::expert_set_changes", "layer ", l, " routes ",
                                                experts_a.rows(), " tokens in A and ", experts_b.rows(), " in B");
    Index changed = 0;
    std::vector<int> set_a, set_b;
    for (Index t = 0; t < experts_a.rows(); ++t) {
      set_a.assign(experts_a.row(t).data(), experts_a.row(t).data() + experts_a.cols());
      set_b.assign(experts_b.row(t).data(), experts_b.row(t).data() + experts_b.cols());
      std::sort(set_a.begin(), set_a.end());
      std::sort(set_b.begin(), set_b.end());
      if (set_a != set_b) ++changed;
    }
    changes.push_back({static_cast<int>(l), static_cast<double>(changed) / static_cast<double>(experts_a.rows())});
  }
  return changes;
}

struct ModelComparison {
  Index tokens = 0;
  Index top_k = 0;
  std::vector<Index> sink_keys;
  std::vector<HeadComparison> heads;
  std::vector<HeadComparisonImages> images;
  /// Either model has learned sink logits (gpt-oss): the rows were compared with their sink shares σ
  /// (detail::compare_head), and HeadAttentionSummary::learned_sink holds the mean σ.
  bool learned_sinks = false;
  /// The Mixture-of-Experts layers routed in both models (expert_set_changes).
  std::vector<LayerRoutingChange> routing;
};

namespace detail {

/// The state two forwards share while they wait for each other at every layer (lock-step, see compare_models).
struct CompareRendezvous {
  std::mutex mutex;
  std::condition_variable changed;
  int ready[2] = {-1, -1};  // last layer whose inputs model A / model B has published
  int consumed = -1;        // last layer compared (every head done, the views may go)
  bool done[2] = {false, false};
  CompareModelLayer inputs[2];
  int next_head = 0, workers_done = 0;  // the current layer: next head to claim, threads that stopped claiming
  std::exception_ptr error;           // the first error of a head's work
};

/// Thrown into a forward to stop it when the other one failed (never leaves compare_models).
struct CompareStopped {};

/// Per head: the running sums, and the image accumulator when the head's images are collected.
struct HeadSums {
  int layer = 0, head = 0;
  CompareHeadSums sums;
  bool image = false;
  CompareImageAccumulator accumulator;
};

/// The head's means over the rows.
inline HeadComparison finish_head(const HeadSums& head, Index length) {
  const double n = static_cast<double>(length);
  const CompareHeadSums& s = head.sums;
  HeadComparison out;
  out.layer = head.layer, out.head = head.head;
  HeadAttentionSummary* sides[2] = {&out.a, &out.b};
  for (int m = 0; m < 2; ++m)
    *sides[m] = {s.sink_mass[m] / n,       s.entropy[m] / n,    s.entropy_sink[m] / n,
                 s.entropy_content[m] / n, s.max_weight[m] / n, s.jacobian_norm[m] / n, s.learned_sink[m] / n};
  out.js_keep = s.js_keep / n;
  out.drop_rows = s.drop_rows;
  out.js_drop = s.drop_rows > 0 ? s.js_drop / static_cast<double>(s.drop_rows)
                                : std::numeric_limits<double>::quiet_NaN();
  out.top_k_overlap = s.top_k_overlap / n;
  return out;
}

/// The comparison's order: js_keep, largest first; equal divergences in (layer, head) order.
inline bool compared_before(const HeadComparison& x, const HeadComparison& y) {
  if (x.js_keep != y.js_keep) return x.js_keep > y.js_keep;
  return x.layer != y.layer ? x.layer < y.layer : x.head < y.head;
}

}  // namespace detail

/// Runs `tokens` through models a and b and compares their attention head by head (see the file comment and
/// CompareOptions). Both forwards are streaming forwards (model::Transformer::forward_row_statistics, without logits)
/// run in lock-step: model A runs on a second thread; at every layer, after its queries and keys are formed, each model
/// waits until the other has reached the layer, then both threads take the layer's heads in turn and compare them
/// from both models' post-RoPE queries and keys; when every head is done both go on. Per head and block of query_block
/// rows, each model's softmax rows are formed again as the attention kernel forms them (detail::compare_head: the
/// layer's scale, softcap and visibility, stream::detail::reduce_row per row) and reduced at once.
/// Memory: both models' weights, both forwards' activations (each holds one layer's keys and values at a time), per
/// thread 2 · query_block × L scores and a few rows of scratch, the per-head sums, and the images (3 · ⌈L/block⌉²
/// doubles per head: those asked for, plus one layer's heads while image_most_changed collects). Never an L×L matrix.
/// Cost: both forwards, plus per head both models' scores and softmax rows with ‖J‖₂ and O(L · visible keys) row work
/// (entropy split, JS, top-k) — about 2.3 times one forward with row statistics (docs/performance.md).
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

  if (options.image_most_changed < 0)
    attnscope::detail::throw_invalid_argument(function, "image_most_changed must be >= 0, got ",
                                              options.image_most_changed);
  if (options.image_most_changed > 0 && !options.statistics)
    attnscope::detail::throw_invalid_argument(function, "image_most_changed needs the statistics (statistics = true)");

  const Index length = static_cast<Index>(tokens.size());
  const int n_heads = config_a.n_heads;
  const std::size_t head_count = std::size_t(config_a.n_layers) * std::size_t(n_heads);
  std::vector<detail::HeadSums> heads(head_count);
  const auto at = [&](int layer, int head) -> detail::HeadSums& {
    return heads[std::size_t(layer) * std::size_t(n_heads) + std::size_t(head)];
  };
  for (int l = 0; l < config_a.n_layers; ++l)
    for (int h = 0; h < n_heads; ++h) at(l, h).layer = l, at(l, h).head = h;
  const Index image_block = std::max<Index>(1, (length + options.image_max_side - 1) / options.image_max_side);
  for (const auto& [layer, head] : options.image_heads) {
    if (layer < 0 || layer >= config_a.n_layers || head < 0 || head >= n_heads)
      attnscope::detail::throw_invalid_argument(function, "image head (layer ", layer, ", head ", head,
                                                ") is outside the model's ", config_a.n_layers, " layers × ",
                                                n_heads, " heads");
    at(layer, head).image = true;
  }
  const std::vector<std::pair<int, int>> listed(options.image_heads.begin(), options.image_heads.end());
  const auto listed_image = [&](int layer, int head) {
    return std::find(listed.begin(), listed.end(), std::make_pair(layer, head)) != listed.end();
  };
  std::vector<HeadComparison> leading;  // the image_most_changed leading heads of the layers compared so far

  model::StreamingOptions streaming;
  streaming.allow_beyond_trained_positions = options.allow_beyond_trained_positions;
  // the forwards' own statistics are not used: one head with the cheapest ones (the others run plain attention)
  streaming.statistics.jacobian_norm = false;
  streaming.statistics.top_k.clear();
  streaming.heads = {{0, 0}};
  streaming.query_block = options.query_block;
  streaming.statistics.threads = options.threads;

  detail::CompareRendezvous meeting;
  std::exception_ptr errors[2];
  detail::CompareScratch scratch[2];
  // the heads of a layer, claimed one at a time by both threads; each thread says when it has no more to claim
  const auto work = [&](int layer, detail::CompareScratch& mine) {
    for (;;) {
      int head = 0;
      {
        std::lock_guard<std::mutex> lock(meeting.mutex);
        head = meeting.next_head++;
        if (head >= n_heads) {
          ++meeting.workers_done;
          meeting.changed.notify_all();
          return;
        }
      }
      detail::HeadSums& sums = at(layer, head);
      try {
        if (options.statistics || sums.image)
          detail::compare_head(meeting.inputs[0], meeting.inputs[1], head, sinks, options.top_k, options.query_block,
                               options.statistics, sums.image ? &sums.accumulator : nullptr, sums.sums, mine);
      } catch (...) {
        std::lock_guard<std::mutex> lock(meeting.mutex);
        if (!meeting.error) meeting.error = std::current_exception();
      }
    }
  };
  // after every head of a layer: keep the images of the leading heads only (the heads of this layer are final)
  const auto keep_leading_images = [&](int layer) {
    if (options.image_most_changed <= 0) return;
    for (int h = 0; h < n_heads; ++h) leading.push_back(detail::finish_head(at(layer, h), length));
    std::stable_sort(leading.begin(), leading.end(), detail::compared_before);
    for (std::size_t r = std::size_t(options.image_most_changed); r < leading.size(); ++r) {
      detail::HeadSums& dropped = at(leading[r].layer, leading[r].head);
      if (!listed_image(dropped.layer, dropped.head)) dropped.image = false, dropped.accumulator = {};
    }
    if (leading.size() > std::size_t(options.image_most_changed)) leading.resize(std::size_t(options.image_most_changed));
  };
  const auto start_layer_images = [&](int layer) {
    for (int h = 0; h < n_heads; ++h) {
      detail::HeadSums& sums = at(layer, h);
      if (options.image_most_changed > 0) sums.image = true;
      if (sums.image) sums.accumulator.start(length, image_block);
    }
  };
  // model m's callback at every layer: publish its inputs, wait for the other model, compare the layer's heads with
  // it (both threads claim heads in turn), then wait until the layer is closed. Model B closes it once both threads
  // have stopped claiming: it keeps the leading heads' images, resets the claims and lets both forwards go on.
  const auto meet = [&](int m, int layer, const RowMatrixView<float>& queries, const RowMatrixView<float>& keys,
                        const stream::RowStatisticsOptions& attention) {
    detail::check_compare_visibility(attention.visibility);
    const model::TransformerConfig& config = m == 0 ? config_a : config_b;
    if (m == 1) start_layer_images(layer);  // A starts work only once B has published, below
    {
      std::unique_lock<std::mutex> lock(meeting.mutex);
      detail::CompareModelLayer& inputs = meeting.inputs[m];
      inputs.queries = &queries, inputs.keys = &keys, inputs.attention = attention;
      inputs.head_dim = config.head_dim, inputs.heads_per_kv = config.n_heads / config.n_kv_heads;
      inputs.sink_logits = config.learned_sinks ? &(m == 0 ? a : b).weights().layers[std::size_t(layer)].sinks : nullptr;
      meeting.ready[m] = layer;
      meeting.changed.notify_all();
      meeting.changed.wait(lock, [&] { return meeting.ready[1 - m] >= layer || meeting.done[1 - m]; });
      if (meeting.ready[1 - m] < layer) throw detail::CompareStopped{};
    }
    work(layer, scratch[m]);
    std::unique_lock<std::mutex> lock(meeting.mutex);
    if (m == 0) {  // the views must outlive B's work on them: wait until B closes the layer
      meeting.changed.wait(lock, [&] { return meeting.consumed >= layer || meeting.done[1]; });
      if (meeting.consumed < layer) throw detail::CompareStopped{};
      return;
    }
    meeting.changed.wait(lock, [&] { return meeting.workers_done == 2; });
    if (meeting.error) std::rethrow_exception(meeting.error);  // through B's forward; A stops when B is done
    lock.unlock();
    keep_leading_images(layer);
    lock.lock();
    meeting.next_head = 0, meeting.workers_done = 0;
    meeting.consumed = layer;
    meeting.changed.notify_all();
    lock.unlock();
    if (options.layer_progress) options.layer_progress(layer + 1, config_a.n_layers);
  };
  model::ForwardOptions forward[2];
  model::StreamingForwardResult results[2];
  for (int m = 0; m < 2; ++m) {
    forward[m].logits = false;
    forward[m].capture.routing = (m == 0 ? config_a : config_b).moe.experts > 0;  // which experts each token chose
    forward[m].matmul = options.matmul[m];
    forward[m].layer_attention_inputs = [&, m](int layer, const RowMatrixView<float>& queries,
                                               const RowMatrixView<float>& keys,
                                               const stream::RowStatisticsOptions& attention) {
      meet(m, layer, queries, keys, attention);
    };
  }
  auto run = [&](int m) {
    try {
      results[m] = (m == 0 ? a : b).forward_row_statistics(tokens, forward[m], streaming);
    } catch (const detail::CompareStopped&) {
    } catch (...) {
      errors[m] = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(meeting.mutex);
      meeting.done[m] = true;
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
    run(0);
  });
  run(1);
  thread_a.join();
  if (errors[0]) std::rethrow_exception(errors[0]);
  if (errors[1]) std::rethrow_exception(errors[1]);

  ModelComparison result;
  result.tokens = length;
  result.top_k = options.top_k;
  result.sink_keys = sinks;
  result.learned_sinks = config_a.learned_sinks || config_b.learned_sinks;
  result.routing = expert_set_changes(results[0].layers, results[1].layers);
  if (options.statistics) {
    for (const detail::HeadSums& sums : heads) result.heads.push_back(detail::finish_head(sums, length));
    std::stable_sort(result.heads.begin(), result.heads.end(), detail::compared_before);
  }
  std::vector<std::pair<int, int>> imaged = listed;
  for (const HeadComparison& head : leading)
    if (!listed_image(head.layer, head.head)) imaged.emplace_back(head.layer, head.head);
  for (const auto& [layer, head] : imaged) {
    detail::HeadSums& sums = at(layer, head);
    result.images.push_back({layer, head, sums.accumulator.block, sums.accumulator.a, sums.accumulator.b,
                             sums.accumulator.difference});
  }
  return result;
}

/// The comparison as CSV, one line per head in the result's order: rank, layer, head, js_keep, js_drop, drop_rows,
/// top_k_overlap, then for sink_mass, entropy, entropy_sink, entropy_content, max_weight and jacobian_norm (and
/// learned_sink when ModelComparison::learned_sinks) the columns <name>_a, <name>_b and delta_<name> (= b − a). NaN is
/// written as "nan".
inline void write_comparison_csv(std::ostream& out, const ModelComparison& comparison) {
  out << "rank,layer,head,js_keep,js_drop,drop_rows,top_k_overlap";
  const char* names[] = {"sink_mass",  "entropy",       "entropy_sink", "entropy_content",
                         "max_weight", "jacobian_norm", "learned_sink"};
  const int fields = comparison.learned_sinks ? 7 : 6;
  for (int k = 0; k < fields; ++k) out << ',' << names[k] << "_a," << names[k] << "_b,delta_" << names[k];
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
      const double values[] = {s.sink_mass,  s.entropy,       s.entropy_sink, s.entropy_content,
                               s.max_weight, s.jacobian_norm, s.learned_sink};
      return values[k];
    };
    for (int k = 0; k < fields; ++k)
      for (const HeadAttentionSummary* part : parts) {
        out << ',';
        number(field(*part, k));
      }
    out << '\n';
  }
  out.precision(precision);
}

}  // namespace attnscope::analysis
