// attnscope/kvcache/simulate.hpp — open-loop simulation of KV-cache policies on one layer: the attention each query
// head loses when it may see only the keys a policy keeps. q, k and v come from the unmodified forward pass; each
// policy's cache is replayed on them, and per query the lost attention mass and the relative error of the head's
// output are measured.
//
// Definitions (docs/guide.md, "attention under KV-cache policies"). Per query head, a_ij is the model's attention over
// real keys for query i, as the model computes it (causal, its window, softcap and scale): the attention kernel's
// float weights renormalised in double to sum to 1. The cache C_i is the set of keys query i may see. Kept mass
// m_i = Σ_{j∈C_i} a_ij, lost mass 1 − m_i; the renormalised row a′_ij = a_ij / m_i on C_i; output error
// ‖o_i − o′_i‖₂ / ‖o_i‖₂ with o_i = Σ_j a_ij v_j and o′_i = Σ_j a′_ij v_j [derived]. When m_i = 0, o′_i = 0; when
// ‖o_i‖₂ = 0 the error is ‖o_i − o′_i‖₂ [derived].
//
// Cost per layer: per block of block_rows queries and per head one strip of weights from the attention kernel of
// stream/attention.hpp (scale·q·kᵀ, softcap, softmax over the visible keys), the head outputs o as one double GEMM of
// the strip with V, and per query and policy O(|C_i|·dv) (or O(i) + O(|evicted|·dv) when the cache holds most keys);
// the oracle comparison selects the largest weights of each row, O(i). Memory: O(L·d) for the inputs and V in double,
// heads · block_rows · L floats for the strips, O(L) per cache; never the L×L matrix.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/kvcache/detail/largest_keys.hpp"
#include "attnscope/kvcache/policy.hpp"
#include "attnscope/kvcache/query_rows.hpp"
#include "attnscope/stream/attention.hpp"
#include "attnscope/stream/statistics_types.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnscope::kvcache {

/// Settings of simulate_layer besides the attention's.
struct SimulationOptions {
  /// First evaluated query E: results cover the queries E … L − 1 (the caches still run from query 0).
  Index evaluate_from = 0;
  /// End of the prefill P (SnapKV compresses after query P − 1); 0: none given.
  Index prefill = 0;
  /// Queries per block of the attention strips (memory: heads · block_rows · L floats).
  Index block_rows = 32;
};

/// One policy on one layer; column t is query E + t.
struct PolicyLayerResult {
  RowMatrix<double> lost_mass;         ///< heads × Q: 1 − m_i
  RowMatrix<double> output_error;      ///< heads × Q: ‖o_i − o′_i‖₂ / ‖o_i‖₂
  RowMatrix<std::int64_t> cache_size;  ///< kv_heads × Q: |C_i| (per layer scope: the same for every KV head)
  RowMatrix<double> oracle_lost_mass;  ///< heads × Q: the oracle's lost mass with |C_i| keys (its lower bound)
};

namespace detail {

/// A policy with its caches (one per query head, per KV head or per layer).
template <class P>
struct PolicyRun {
  P policy;
  std::vector<typename P::State> states;
};

template <class Variant>
struct policy_runs;
template <class... Policies>
struct policy_runs<std::variant<Policies...>> {
  using type = std::variant<PolicyRun<Policies>...>;
};
using AnyPolicyRun = typename policy_runs<Policy>::type;

/// The model's visibility for a block of rows starting at `first_row`; only causal prefixes and causal sliding
/// windows (what a decoder uses) are simulated.
inline Visibility block_visibility(const char* function, const Visibility& visibility, Index first_row) {
  const bool plain = visibility.key_mask().size() == 0 && visibility.sink_keys().empty();
  if (visibility.kind() == Visibility::Kind::causal_prefix && visibility.causal_offset() == 0)
    return Causal{first_row};
  if (visibility.kind() == Visibility::Kind::band && visibility.is_causal() && visibility.has_window() && plain &&
      visibility.causal_offset() == 0)
    return SlidingWindow{visibility.window(), true, first_row};
  attnscope::detail::throw_invalid_argument(function,
                                            "the attention must be causal (offset 0), optionally with a sliding "
                                            "window and no key mask or sink keys: a KV cache serves a decoder");
}

/// Kept mass, lost mass and output error of one head at one query for the cache `keys`.
struct HeadMeasure {
  double kept = 0, lost = 0, error = 0;
};

}  // namespace detail

/// Simulates `policies` on one layer. queries [L, heads·d] (head h in columns h·d …), keys [L, kv_heads·d] and values
/// [L, kv_heads·dv] (KV head g in columns g·d … and g·dv …; query head h reads KV head h / (heads / kv_heads)), float,
/// as the model's forward computes them (post-RoPE). `attention`: the model's attention settings for this layer
/// (visibility: causal, optionally with a sliding window; scale; softcap), e.g. the kernel options that
/// model::ForwardOptions::layer_attention_inputs receives. Returns one result per policy, in order.
/// Throws attnscope::invalid_argument naming kvcache::simulate_layer for: heads or kv_heads < 1, heads not a multiple
/// of kv_heads, widths that are not heads·d / kv_heads·d / kv_heads·dv, row counts that differ, L = 0, NaN/Inf in q,
/// k or v, a visibility other than causal (with an optional window), no policy, evaluate_from outside [0, L),
/// prefill outside [0, L], block_rows < 1; each policy's own checks (SnapKV: prefill given, window ≤ prefill).
template <class DerivedQ, class DerivedK, class DerivedV>
std::vector<PolicyLayerResult> simulate_layer(const Eigen::MatrixBase<DerivedQ>& queries,
                                              const Eigen::MatrixBase<DerivedK>& keys,
                                              const Eigen::MatrixBase<DerivedV>& values, Index heads, Index kv_heads,
                                              const stream::RowStatisticsOptions& attention,
                                              const std::vector<Policy>& policies,
                                              const SimulationOptions& options = {}) {
  static_assert(std::is_same<typename DerivedQ::Scalar, float>::value &&
                    std::is_same<typename DerivedK::Scalar, float>::value &&
                    std::is_same<typename DerivedV::Scalar, float>::value,
                "attnscope::kvcache::simulate_layer: q, k and v are float (the model's activations)");
  using attnscope::detail::throw_invalid_argument;
  const char* function = "kvcache::simulate_layer";
  const RowMatrixView<float> q(queries.derived()), k(keys.derived()), v(values.derived());
  if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0)
    throw_invalid_argument(function, "heads (", heads, ") must be a positive multiple of kv_heads (", kv_heads, ")");
  const Index length = q.rows();
  if (length == 0) throw_invalid_argument(function, "no queries (L = 0)");
  if (k.rows() != length || v.rows() != length)
    throw_invalid_argument(function, "q, k and v must have the same rows, got ", length, ", ", k.rows(), ", ",
                           v.rows());
  if (q.cols() == 0 || q.cols() % heads != 0)
    throw_invalid_argument(function, "q has ", q.cols(), " columns, not heads (", heads, ") x head size");
  const Index dimension = q.cols() / heads;
  if (k.cols() != kv_heads * dimension)
    throw_invalid_argument(function, "k has ", k.cols(), " columns, expected kv_heads x head size = ", kv_heads, " x ",
                           dimension);
  if (v.cols() == 0 || v.cols() % kv_heads != 0)
    throw_invalid_argument(function, "v has ", v.cols(), " columns, not kv_heads (", kv_heads, ") x value size");
  for (Index i = 0; i < length; ++i)
    if (!v.row(i).allFinite()) throw_invalid_argument(function, "v row ", i, " has a NaN or Inf");
  if (policies.empty()) throw_invalid_argument(function, "no policy to simulate");
  if (options.evaluate_from < 0 || options.evaluate_from >= length)
    throw_invalid_argument(function, "evaluate_from ", options.evaluate_from, " is outside [0, ", length, ")");
  if (options.prefill < 0 || options.prefill > length)
    throw_invalid_argument(function, "prefill ", options.prefill, " is outside [0, ", length, "]");
  if (options.block_rows < 1) throw_invalid_argument(function, "block_rows must be >= 1, got ", options.block_rows);
  detail::block_visibility(function, attention.visibility, 0);  // refuses what is not a decoder's visibility

  const Index value_size = v.cols() / kv_heads, group = heads / kv_heads, first = options.evaluate_from;
  const Index evaluated = length - first;
  const SequenceInfo sequence{length, options.prefill};

  std::vector<detail::AnyPolicyRun> runs;
  std::vector<PolicyLayerResult> results(policies.size());
  for (std::size_t p = 0; p < policies.size(); ++p) {
    std::visit(
        [&](const auto& policy) {
          using P = std::decay_t<decltype(policy)>;
          policy.validate(sequence);
          const Index units = P::scope == CacheScope::query_head ? heads
                              : P::scope == CacheScope::kv_head  ? kv_heads
                                                                 : 1;
          detail::PolicyRun<P> run{policy, {}};
          for (Index u = 0; u < units; ++u) run.states.emplace_back(policy, sequence);
          runs.emplace_back(std::move(run));
        },
        policies[p]);
    results[p].lost_mass.setZero(heads, evaluated);
    results[p].output_error.setZero(heads, evaluated);
    results[p].cache_size.setZero(kv_heads, evaluated);
    results[p].oracle_lost_mass.setZero(heads, evaluated);
  }

  const RowMatrix<double> values_double = v.template cast<double>();
  const RowMatrix<float> no_values = RowMatrix<float>::Zero(length, 1);
  std::vector<RowMatrix<float>> strips(static_cast<std::size_t>(heads));  // per head: rows × keys weights
  std::vector<RowMatrix<double>> outputs(static_cast<std::size_t>(heads));  // per head: rows × dv, Σ_j w_ij v_j
  std::vector<Vector<double>> totals(static_cast<std::size_t>(heads));     // per head: Σ_j w_ij per row

  // per query: the caches' keys, membership stamps for the complement, the rows handed to a policy, the oracle sizes
  std::vector<Index> cache_keys;
  std::vector<std::uint64_t> stamp(static_cast<std::size_t>(length), 0);
  std::uint64_t current_stamp = 0;
  QueryRows rows;
  std::vector<std::vector<Index>> sizes_of_head(static_cast<std::size_t>(heads));
  std::vector<double> largest;
  std::vector<float> sample, selected;
  Vector<double> value_sum(value_size);

  // kept/lost mass and output error of head h (strip row t, KV head g) for the cache `cached`; the complement is
  // summed instead when the cache holds most keys, so that a cache of every key loses exactly 0
  const auto measure = [&](Index h, Index t, Index g, const std::vector<Index>& cached, Index n, bool evaluate) {
    detail::HeadMeasure out;
    const float* weight = strips[static_cast<std::size_t>(h)].row(t).data();
    const double total = totals[static_cast<std::size_t>(h)](t);
    const auto value_row = [&](Index j) { return values_double.row(j).segment(g * value_size, value_size); };
    const bool complement = static_cast<Index>(cached.size()) * 2 > n;
    double outside = 0, inside = 0;
    if (evaluate) value_sum.setZero();
    if (complement) {
      ++current_stamp;
      for (const Index j : cached) stamp[static_cast<std::size_t>(j)] = current_stamp;
      for (Index j = 0; j < n; ++j) {
        if (stamp[static_cast<std::size_t>(j)] == current_stamp || weight[j] == 0) continue;
        outside += static_cast<double>(weight[j]);
        if (evaluate) value_sum.noalias() += static_cast<double>(weight[j]) * value_row(j).transpose();
      }
      out.kept = total - outside;
      out.lost = outside / total;
    } else {
      for (const Index j : cached) {
        if (weight[j] == 0) continue;
        inside += static_cast<double>(weight[j]);
        if (evaluate) value_sum.noalias() += static_cast<double>(weight[j]) * value_row(j).transpose();
      }
      out.kept = inside;
      out.lost = std::max(0.0, (total - inside) / total);
    }
    if (!evaluate) return out;
    // o = Σ w v / total; o′ = kept part / kept mass; in the complement form o − o′ = (Σ_out w v − outside·o) / kept
    const Vector<double> output = outputs[static_cast<std::size_t>(h)].row(t).transpose() / total;
    Vector<double> difference;
    if (out.kept <= 0)
      difference = output;
    else if (complement)
      difference = (value_sum - outside * output) / out.kept;
    else
      difference = output - value_sum / out.kept;
    const double norm = output.norm();
    out.error = norm > 0 ? difference.norm() / norm : difference.norm();
    return out;
  };

  const Index block_rows = options.block_rows;
  // one buffer of double weights per thread (the heads of a block run in parallel)
#if defined(_OPENMP)
  std::vector<std::vector<double>> weight_buffers(static_cast<std::size_t>(std::max(1, omp_get_max_threads())));
  const auto thread_index = [] { return omp_get_thread_num(); };
#else
  std::vector<std::vector<double>> weight_buffers(1);
  const auto thread_index = [] { return 0; };
#endif
  for (Index block_start = 0; block_start < length; block_start += block_rows) {
    const Index block = std::min(block_rows, length - block_start), key_count = block_start + block;
    const bool block_evaluated = key_count > first;
    stream::RowStatisticsOptions strip_options = attention;
    strip_options.visibility = detail::block_visibility(function, attention.visibility, block_start);
    strip_options.block_rows = block;
    strip_options.threads = 1;
    const Index first_key = strip_options.visibility.key_range(0, key_count).first;
    attnscope::detail::for_each_row_rethrowing(heads, block * key_count * dimension, [&](Index h) {
      const std::size_t slot = static_cast<std::size_t>(h);
      const Index g = h / group;
      stream::AttentionCapture<float> capture;
      capture.probabilities = &strips[slot];
      RowMatrix<float> unused_output(block, 1);
      stream::attention_into<float>(q.block(block_start, h * dimension, block, dimension),
                                    k.block(0, g * dimension, key_count, dimension), no_values.topRows(key_count),
                                    stream::RowMatrixSpan<float>(unused_output), strip_options, capture);
      // the weights in double, laid out block × keys row-major = keys × block column-major (Wᵀ), and the outputs as
      // Oᵀ = Vᵀ Wᵀ: both operands column-major, so that the GEMM packs contiguous panels
      const Index run = key_count - first_key;
      std::vector<double>& buffer = weight_buffers[static_cast<std::size_t>(thread_index())];
      buffer.resize(static_cast<std::size_t>(block * run));
      Eigen::Map<RowMatrix<double>> weights(buffer.data(), block, run);
      weights = strips[slot].middleCols(first_key, run).cast<double>();
      totals[slot] = weights.rowwise().sum();
      if (!block_evaluated) return;
      outputs[slot].resize(block, value_size);
      const Eigen::Map<const Eigen::MatrixXd, 0, Eigen::OuterStride<>> values_transposed(
          values_double.data() + first_key * values_double.cols() + g * value_size, value_size, run,
          Eigen::OuterStride<>(values_double.cols()));
      Eigen::Map<Eigen::MatrixXd> outputs_transposed(outputs[slot].data(), value_size, block);
      outputs_transposed.noalias() = values_transposed * Eigen::Map<const Eigen::MatrixXd>(buffer.data(), run, block);
    });

    for (Index t = 0; t < block; ++t) {
      const Index i = block_start + t, n = i + 1, column = i - first;
      const bool evaluate = i >= first;
      for (auto& sizes : sizes_of_head) sizes.clear();
      for (std::size_t p = 0; p < runs.size(); ++p) {
        std::visit(
            [&](auto& run) {
              using P = std::decay_t<decltype(run.policy)>;
              PolicyLayerResult& result = results[p];
              for (std::size_t u = 0; u < run.states.size(); ++u) {
                const Index unit = static_cast<Index>(u);
                const Index head_begin = P::scope == CacheScope::query_head ? unit
                                         : P::scope == CacheScope::kv_head  ? unit * group
                                                                            : 0;
                const Index head_end = P::scope == CacheScope::query_head ? unit + 1
                                       : P::scope == CacheScope::kv_head  ? (unit + 1) * group
                                                                          : heads;
                rows.query = i;
                rows.keys = n;
                rows.weights.clear();
                rows.total.clear();
                for (Index h = head_begin; h < head_end; ++h) {
                  rows.weights.push_back(strips[static_cast<std::size_t>(h)].row(t).data());
                  rows.total.push_back(totals[static_cast<std::size_t>(h)](t));
                }
                rows.kept.assign(rows.weights.size(), 0.0);
                run.states[u].cache(rows, cache_keys);
                const Index size = static_cast<Index>(cache_keys.size());
                for (Index h = head_begin; h < head_end; ++h) {
                  const detail::HeadMeasure measured = measure(h, t, h / group, cache_keys, n, evaluate);
                  rows.kept[static_cast<std::size_t>(h - head_begin)] = measured.kept;
                  if (!evaluate) continue;
                  result.lost_mass(h, column) = measured.lost;
                  result.output_error(h, column) = measured.error;
                  result.cache_size(h / group, column) = size;
                  sizes_of_head[static_cast<std::size_t>(h)].push_back(size);
                }
                if (evaluate && P::scope == CacheScope::layer) result.cache_size.col(column).setConstant(size);
                run.states[u].attended(rows, cache_keys);
              }
            },
            runs[p]);
      }
      if (!evaluate) continue;
      // the oracle with each policy's cache size: the mass outside the |C_i| largest weights of the row
      for (Index h = 0; h < heads; ++h) {
        const std::vector<Index>& sizes = sizes_of_head[static_cast<std::size_t>(h)];
        const bool all_kept = std::all_of(sizes.begin(), sizes.end(), [&](Index size) { return size >= n; });
        if (all_kept) continue;  // oracle_lost_mass stays 0
        detail::sums_of_largest(strips[static_cast<std::size_t>(h)].row(t).data(), n, sizes, selected, sample, largest);
        const double total = totals[static_cast<std::size_t>(h)](t);
        for (std::size_t p = 0; p < sizes.size(); ++p)
          results[p].oracle_lost_mass(h, column) = sizes[p] >= n ? 0.0 : std::max(0.0, (total - largest[p]) / total);
      }
    }
  }
  return results;
}

}  // namespace attnscope::kvcache
