// Streaming row statistics: every statistic of attnscope::stream::row_statistics (max logit,
// log-partition, entropy, sink mass, max weight, top-1/8/64 mass, exact ‖J‖₂) from float Q and K with d = 64.
// - stream_heads: 8 heads of one causal layer at L = 32768 on 2 threads (peak memory target < 1 GB: run it alone,
//   `--benchmark_filter=stream_heads`, and read the peak_rss_MB counter, getrusage's maxrss of the process).
// - stream_one_head: one causal head for L = 4k … 128k on 2 threads (time should grow as L²), and L = 16384 on one
//   thread (what `rowstats` pays per pair on a Q/K file, beside bench_hf_forward's one-head streaming forward).
// - stream_full_entropy_max: one full-attention head, L = 16384, only entropy and max (the PyTorch side-by-side,
//   bench/stream_peer_torch.py).
// - strip_gemms vs plain_gemm: the QKᵀ blocks as the library computes them (keys packed once, row blocks of 64 × the
//   visible keys into a reused strip, stream/detail/block_products.hpp) against one plain Eigen GEMM Q·Kᵀ of the same
//   total shape, one thread: the ratio of their FLOP rates is the kernel's fraction of GEMM speed.
// - attention_pairs: the whole attention kernel of one causal head (L = 8192, d = 64, with values and the streaming
//   forward's default statistics), one thread, in CPU ns per visible (query, key) pair.
// - vanishing_curve: max weight and top-8 mass against the position at L = 32768 (synthetic Q/K), with log-log slopes.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/stream.hpp"
#include "attnscope/stream/detail/block_products.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

constexpr Index head_dimension = 64;

/// Seeded N(0, 1) float matrix (Q or K of one head).
RowMatrix<float> gaussian(Index rows, Index cols, std::uint64_t seed) {
  attnscope::Random random(seed);
  RowMatrix<float> matrix(rows, cols);
  for (Index i = 0; i < matrix.size(); ++i) matrix.data()[i] = static_cast<float>(random.normal());
  return matrix;
}

/// Peak resident memory of the process so far (MB).
double peak_rss_megabytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

attnscope::stream::RowStatisticsOptions all_statistics(int threads) {
  attnscope::stream::RowStatisticsOptions options;
  options.top_k = {1, 8, 64};
  options.threads = threads;
  return options;
}

/// Causal QKᵀ multiply-adds: Σ_i (i + 1)·d, two FLOP each.
double causal_flops(Index length) {
  return 2.0 * static_cast<double>(head_dimension) * static_cast<double>(length) * static_cast<double>(length + 1) / 2;
}

void stream_heads(benchmark::State& state) {
  const Index length = state.range(0), heads = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  std::vector<RowMatrix<float>> queries, keys;
  for (Index h = 0; h < heads; ++h) {
    queries.push_back(gaussian(length, head_dimension, 100 + static_cast<std::uint64_t>(h)));
    keys.push_back(gaussian(length, head_dimension, 200 + static_cast<std::uint64_t>(h)));
  }
  const auto options = all_statistics(threads);
  double checksum = 0;
  for (auto _ : state)
    for (Index h = 0; h < heads; ++h) {
      const auto stats = attnscope::stream::row_statistics(queries[h], keys[h], options);
      checksum += stats.jacobian_norm.sum();
      benchmark::DoNotOptimize(checksum);
    }
  state.counters["peak_rss_MB"] = peak_rss_megabytes();
  state.counters["qk_GFLOP"] = causal_flops(length) * static_cast<double>(heads) * 1e-9;
}

void stream_one_head(benchmark::State& state) {
  const Index length = state.range(0);
  const RowMatrix<float> q = gaussian(length, head_dimension, 1), k = gaussian(length, head_dimension, 2);
  const auto options = all_statistics(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    const auto stats = attnscope::stream::row_statistics(q, k, options);
    benchmark::DoNotOptimize(stats.entropy.data());
  }
  state.counters["peak_rss_MB"] = peak_rss_megabytes();
  // seconds per visible (query, key) pair, L(L + 1)/2 of them
  state.counters["time_per_entry"] = benchmark::Counter(static_cast<double>(length) * static_cast<double>(length + 1) / 2,
                                                        benchmark::Counter::kIsIterationInvariantRate |
                                                            benchmark::Counter::kInvert);
}

void stream_full_entropy_max(benchmark::State& state) {
  const Index length = state.range(0);
  const RowMatrix<float> q = gaussian(length, head_dimension, 3), k = gaussian(length, head_dimension, 4);
  attnscope::stream::RowStatisticsOptions options;
  options.visibility = attnscope::Visibility();  // every key
  options.jacobian_norm = state.range(2) != 0;
  options.threads = static_cast<int>(state.range(1));
  for (auto _ : state) {
    const auto stats = attnscope::stream::row_statistics(q, k, options);
    benchmark::DoNotOptimize(stats.entropy.data());
  }
  state.counters["peak_rss_MB"] = peak_rss_megabytes();
}

/// The library's QKᵀ: K packed once (stream::detail::BlockKeys, as the attention kernel does per head), then for each
/// block of 64 rows strip = scale·Q_block·K_[0, end)ᵀ (causal key range) by BlockKeys::logits, one thread.
void strip_gemms(benchmark::State& state) {
  const Index length = state.range(0), block = 64;
  const RowMatrix<float> q = gaussian(length, head_dimension, 5), k = gaussian(length, head_dimension, 6);
  std::vector<float> buffer(static_cast<std::size_t>(block * length));
  const bool causal = state.range(1) != 0;
  attnscope::stream::detail::BlockKeys<float> keys;
  attnscope::stream::detail::BlockProductScratch scratch;
  double flops = 0;
  for (auto _ : state) {
    flops = 0;
    keys.assign(k.data(), length, head_dimension, k.outerStride());
    for (Index begin = 0; begin < length; begin += block) {
      const Index rows = std::min(block, length - begin), width = causal ? begin + rows : length;
      keys.logits(q.data() + begin * q.outerStride(), q.outerStride(), rows, 0, width, 0.125f, std::nullopt,
                  buffer.data(), width, scratch);
      benchmark::DoNotOptimize(buffer.data());
      flops += 2.0 * static_cast<double>(rows * width * head_dimension);
    }
  }
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// The attention kernel alone: stream::attention_into of one causal head (d = 64; Q, K, V of N(0, 1) entries) with the
/// statistics of the streaming forward's default (entropy, sink mass, max weight, exact ‖J‖₂), one thread; counter
/// ns_per_pair: CPU time per visible (query, key) pair.
void attention_pairs(benchmark::State& state) {
  const Index length = state.range(0);
  const RowMatrix<float> q = gaussian(length, head_dimension, 9), k = gaussian(length, head_dimension, 10);
  const RowMatrix<float> v = gaussian(length, head_dimension, 11);
  RowMatrix<float> output(length, head_dimension);
  attnscope::stream::RowStatisticsOptions options;
  options.threads = 1;
  for (auto _ : state) {
    attnscope::stream::RowStatistics statistics;
    attnscope::stream::AttentionCapture<float> capture;
    capture.statistics = &statistics;
    attnscope::stream::attention_into<float>(q, k, v, attnscope::stream::RowMatrixSpan<float>(output), options, capture);
    benchmark::DoNotOptimize(statistics.entropy.data());
  }
  state.counters["ns_per_pair"] = benchmark::Counter(
      static_cast<double>(length) * static_cast<double>(length + 1) / 2 * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// One plain Eigen GEMM Q·Kᵀ (L × L output), one thread.
void plain_gemm(benchmark::State& state) {
  const Index length = state.range(0);
  const RowMatrix<float> q = gaussian(length, head_dimension, 5), k = gaussian(length, head_dimension, 6);
  RowMatrix<float> logits(length, length);
  for (auto _ : state) {
    logits.noalias() = q * k.transpose();
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(length * length * head_dimension) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

/// Least-squares slope of log(mean) against log(position) over the bins with position ≥ 64.
double log_log_slope(const attnscope::stream::PositionCurve& curve) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t b = 0; b < curve.mean.size(); ++b) {
    if (curve.position[b] < 64) continue;
    const double x = std::log(curve.position[b]), y = std::log(curve.mean[b]);
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

/// The vanishing-attention curve at long L (arXiv:2508.17821 §3: with bounded logits the largest weight decays like
/// 1/L): one causal head of N(0, 1) Q/K (scaled logits ~ N(0, 1)), max weight and top-8 mass in 12 log bins of the
/// position; counters: the values at each bin (max_weight@n, top8@n) and the log-log slopes over n ≥ 64.
void vanishing_curve(benchmark::State& state) {
  const Index length = state.range(0);
  const RowMatrix<float> q = gaussian(length, head_dimension, 7), k = gaussian(length, head_dimension, 8);
  attnscope::stream::RowStatisticsOptions options;
  options.top_k = {8};
  options.jacobian_norm = false;
  options.threads = 2;
  attnscope::stream::RowStatistics stats;
  for (auto _ : state) stats = attnscope::stream::row_statistics(q, k, options);
  const Eigen::VectorXd top8 = stats.top_k_mass.col(0);
  const auto max_curve = attnscope::stream::position_curve(stats.max_weight, 12);
  const auto top_curve = attnscope::stream::position_curve(top8, 12);
  for (std::size_t b = 0; b < max_curve.mean.size(); ++b) {
    const std::string at = "@" + std::to_string(static_cast<long>(std::lround(max_curve.position[b])));
    state.counters["max_weight" + at] = max_curve.mean[b];
    state.counters["top8" + at] = top_curve.mean[b];
  }
  state.counters["slope_max_weight"] = log_log_slope(max_curve);
  state.counters["slope_top8"] = log_log_slope(top_curve);
}

void single_thread(const benchmark::State&) {
#if defined(_OPENMP)
  omp_set_num_threads(1);  // Eigen's GEMM would otherwise use every OpenMP thread
#endif
}

}  // namespace

// CPU time of the whole process (both threads), robust to the shared machine's load; wall time next to it
BENCHMARK(stream_heads)->Args({32768, 8, 2})->Unit(benchmark::kSecond)->MeasureProcessCPUTime()->UseRealTime()
    ->Iterations(1);
BENCHMARK(stream_one_head)
    ->ArgsProduct({{4096, 8192, 16384, 32768, 65536, 131072}, {2}})
    ->Args({16384, 1})
    ->Unit(benchmark::kSecond)->MeasureProcessCPUTime()->UseRealTime()->Iterations(1);
BENCHMARK(stream_full_entropy_max)->Args({16384, 2, 0})->Args({16384, 2, 1})->Args({16384, 1, 0})
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->Iterations(3);
BENCHMARK(vanishing_curve)->Arg(32768)->Unit(benchmark::kSecond)->MeasureProcessCPUTime()->UseRealTime()
    ->Iterations(1);
BENCHMARK(strip_gemms)->Setup(single_thread)->Args({4096, 0})->Args({4096, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(attention_pairs)->Setup(single_thread)->Arg(8192)->Unit(benchmark::kMillisecond);
BENCHMARK(plain_gemm)->Setup(single_thread)->Args({4096})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
