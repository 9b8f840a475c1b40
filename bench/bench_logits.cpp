// Speed of the rank-d attention fit (docs/theory/logits.md §5.3: n = 512, d = 16, 1000 steps should take well under
// 10 s). Baseline in the same run: the three n×n×d GEMMs a step needs (S = QKᵀ, dQ = dS·K, dK = dSᵀ·Q), done
// with Eigen alone — the ratio fit / baseline is the overhead of softmax, loss, logging and Adam.
#include <benchmark/benchmark.h>

#include "attnscope/core/random.hpp"
#include "attnscope/logits/fit.hpp"
#include "attnscope/logits/targets.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

template <class Scalar>
void BM_fit_qk(benchmark::State& state) {
  const Index n = state.range(0), d = state.range(1), steps = state.range(2);
  const RowMatrix<Scalar> target = attnscope::logits::causal_band_target(n, 4).cast<Scalar>();
  attnscope::logits::FitOptions options;
  options.head_dim = d;
  options.steps = steps;
  for (auto _ : state) {
    auto fit = attnscope::logits::fit_qk(target, attnscope::causal, options);
    benchmark::DoNotOptimize(fit.log.back().loss);
  }
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(steps + 1) * state.iterations(),
                                                     benchmark::Counter::kIsRate);
}

template <class Scalar>
void BM_three_gemms_baseline(benchmark::State& state) {
  const Index n = state.range(0), d = state.range(1), steps = state.range(2);
  attnscope::Random random(0);
  RowMatrix<Scalar> q(n, d), k(n, d), s(n, n), dq(n, d), dk(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < d; ++j) q(i, j) = Scalar(random.normal()), k(i, j) = Scalar(random.normal());
  for (auto _ : state) {
    for (Index t = 0; t <= steps; ++t) {
      s.noalias() = q * k.transpose();
      dq.noalias() = s * k;
      dk.noalias() = s.transpose() * q;
      q.array() += Scalar(1e-9) * dq.array();  // keep the loop honest
      benchmark::DoNotOptimize(dk.data());
    }
  }
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(steps + 1) * state.iterations(),
                                                     benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_three_gemms_baseline, float)->Args({512, 16, 1000})->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_TEMPLATE(BM_fit_qk, float)->Args({512, 16, 1000})->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_TEMPLATE(BM_three_gemms_baseline, double)->Args({512, 16, 1000})->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_TEMPLATE(BM_fit_qk, double)->Args({512, 16, 1000})->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_TEMPLATE(BM_fit_qk, double)->Args({128, 8, 400})->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_TEMPLATE(BM_fit_qk, double)->Args({256, 8, 400})->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
