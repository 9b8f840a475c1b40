// The open-loop KV-cache simulation against what `attnscope rowstats --model` computes on the same layer, in one
// run, one thread: per layer of 4 query heads over 2 KV heads (d = 64), causal, float q/k/v with the spread of a
// trained model's logits (N(0, 1) · 1.5):
// - rowstats_layer: stream::row_statistics of every head with rowstats' defaults (entropy, sink mass, max weight,
//   top-1/8/64 mass, the exact ‖J‖₂): the per-head work of `rowstats --model`;
// - kvsim_layer: kvcache::simulate_layer with the five policies of docs/guide.md (streaming 4 + 60, oracle 64,
//   h2o 32 + 32, tova 64, snapkv 32/7/64 with the prefill at L/2), outputs, output errors and the oracle gaps;
// - kvsim_layer/policy:i: one policy at a time (where the time goes).
// Read the ratio kvsim_layer / rowstats_layer at the same L (the target is ≤ 2); both exclude the forward pass, which
// the two commands share.
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/core/random.hpp"
#include "attnscope/kvcache.hpp"
#include "attnscope/stream.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

constexpr Index kvsim_head_size = 64;
constexpr int kvsim_heads = 4, kvsim_kv_heads = 2;

RowMatrix<float> kvsim_gaussian(Index rows, Index cols, std::uint64_t seed, double scale) {
  attnscope::Random random(seed);
  RowMatrix<float> matrix(rows, cols);
  for (Index i = 0; i < matrix.size(); ++i) matrix.data()[i] = static_cast<float>(scale * random.normal());
  return matrix;
}

struct KvsimLayer {
  RowMatrix<float> queries, keys, values;
  explicit KvsimLayer(Index length)
      : queries(kvsim_gaussian(length, kvsim_heads * kvsim_head_size, 1, 1.5)),
        keys(kvsim_gaussian(length, kvsim_kv_heads * kvsim_head_size, 2, 1.5)),
        values(kvsim_gaussian(length, kvsim_kv_heads * kvsim_head_size, 3, 1.0)) {}
};

const std::vector<std::string>& kvsim_specs() {
  static const std::vector<std::string> specs = {"streaming:sink=4,recent=60", "oracle:budget=64",
                                                 "h2o:heavy=32,recent=32", "tova:budget=64",
                                                 "snapkv:window=32,kernel=7,budget=64"};
  return specs;
}

void rowstats_layer(benchmark::State& state) {
  const Index length = state.range(0);
  const KvsimLayer layer(length);
  attnscope::stream::RowStatisticsOptions options;
  options.top_k = {1, 8, 64};
  options.threads = 1;
  for (auto _ : state)
    for (int h = 0; h < kvsim_heads; ++h) {
      const int g = h / (kvsim_heads / kvsim_kv_heads);
      benchmark::DoNotOptimize(attnscope::stream::row_statistics(
          layer.queries.middleCols(h * kvsim_head_size, kvsim_head_size),
          layer.keys.middleCols(g * kvsim_head_size, kvsim_head_size), options));
    }
  state.SetLabel("L=" + std::to_string(length));
}

void kvsim_layer(benchmark::State& state) {
  const Index length = state.range(0);
  const long only = state.range(1);  // −1: every policy
  const KvsimLayer layer(length);
  std::vector<attnscope::kvcache::Policy> policies;
  for (std::size_t p = 0; p < kvsim_specs().size(); ++p)
    if (only < 0 || static_cast<long>(p) == only) policies.push_back(attnscope::kvcache::parse_policy(kvsim_specs()[p]));
  attnscope::stream::RowStatisticsOptions attention;
  attention.threads = 1;
  attnscope::kvcache::SimulationOptions options;
  options.prefill = length / 2;
  for (auto _ : state)
    benchmark::DoNotOptimize(attnscope::kvcache::simulate_layer(layer.queries, layer.keys, layer.values, kvsim_heads,
                                                                kvsim_kv_heads, attention, policies, options));
  state.SetLabel("L=" + std::to_string(length) + (only < 0 ? " all policies" : " " + kvsim_specs()[only]));
}

}  // namespace

BENCHMARK(rowstats_layer)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(kvsim_layer)->Args({1024, -1})->Args({4096, -1})->Unit(benchmark::kMillisecond);
BENCHMARK(kvsim_layer)->Args({4096, 0})->Args({4096, 1})->Args({4096, 2})->Args({4096, 3})->Args({4096, 4})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
