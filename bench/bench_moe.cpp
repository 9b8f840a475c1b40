// bench_moe: the Mixture-of-Experts feed-forward of one sparse layer (model/detail/mixture_of_experts.hpp: the router,
// the tokens grouped by expert, one product per expert, the routing-weighted sum) against its baseline in the same run,
// the dense SwiGLU feed-forward that does the same multiplications in one product per projection: width k·h on every
// token, the work of k experts of width h per token without the grouping. Both single-threaded, random float32 weights
// (a Mixtral-like shape scaled down: dim 1024, E = 8 experts of h = 1024, k = 2), over 512 tokens; the argument is E.
// Counters: GFLOP/s of the expert products, 2 · tokens · k · 3 · dim · h (router excluded) [derived]; the MoE rate over
// the dense rate is the fraction of the dense (sgemm-rate) speed the grouping keeps.
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/core/random.hpp"
#include "attnscope/model/detail/mixture_of_experts.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

constexpr Index tokens = 512, dim = 1024, expert_width = 1024, chosen = 2;

RowMatrix<float> random_matrix(attnscope::Random& random, Index rows, Index cols, double scale) {
  RowMatrix<float> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(scale * random.normal());
  return m;
}

double expert_flops() { return 2.0 * tokens * chosen * 3 * dim * expert_width; }

void BM_moe_feed_forward(benchmark::State& state) {
  const int experts = static_cast<int>(state.range(0));
  attnscope::Random random(7);
  attnscope::model::MixtureOfExperts moe;
  moe.experts = experts;
  moe.experts_per_token = chosen;
  moe.expert_hidden_dim = expert_width;
  attnscope::model::MixtureWeights weights;
  weights.router = random_matrix(random, experts, dim, 1.0);
  for (int e = 0; e < experts; ++e) {
    attnscope::model::ExpertWeights expert;
    expert.gate = random_matrix(random, expert_width, dim, 0.03);
    expert.up = random_matrix(random, expert_width, dim, 0.03);
    expert.down = random_matrix(random, dim, expert_width, 0.03);
    weights.experts.push_back(std::move(expert));
  }
  const RowMatrix<float> input = random_matrix(random, tokens, dim, 1.0);
  for (auto _ : state) {
    RowMatrix<float> out = attnscope::model::detail::mixture_forward<float>(input, weights, moe);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(expert_flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_dense_equivalent(benchmark::State& state) {
  attnscope::Random random(8);
  attnscope::model::ExpertWeights dense;  // one "expert" of width k·h on every token
  dense.gate = random_matrix(random, chosen * expert_width, dim, 0.03);
  dense.up = random_matrix(random, chosen * expert_width, dim, 0.03);
  dense.down = random_matrix(random, dim, chosen * expert_width, 0.03);
  attnscope::model::MixtureOfExperts moe;
  moe.expert_hidden_dim = chosen * expert_width;
  const RowMatrix<float> input = random_matrix(random, tokens, dim, 1.0);
  for (auto _ : state) {
    RowMatrix<float> out = attnscope::model::detail::expert_forward(input, dense, moe);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(expert_flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_dense_equivalent)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_moe_feed_forward)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_MAIN();
