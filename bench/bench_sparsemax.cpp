// bench_sparsemax: the expected-O(n) pivot sparsemax against the sort-based reference, and exact 1.5-entmax
// against bisection, on float32 logits of 4096×4096 and 16384×512, one thread (row kernels in a serial loop), plus
// the public sparsemax() on 1 and 2 threads. Logits N(0, σ²): σ = 1 ("normal") and σ = 0.05 ("flat": every key is
// within 1 of the max, so the candidate filter keeps the whole row — the pivot's worst realistic case).
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/normalize/entmax.hpp"
#include "attnscope/normalize/sparsemax.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

const RowMatrix<float>& logits(Index rows, Index cols, double scale) {
  static std::vector<std::pair<std::vector<double>, RowMatrix<float>>> cache;  // benchmark data only
  for (auto& entry : cache)
    if (entry.first == std::vector<double>{double(rows), double(cols), scale}) return entry.second;
  attnscope::Random random(2024);
  RowMatrix<float> z(rows, cols);
  for (Index i = 0; i < z.size(); ++i) z.data()[i] = static_cast<float>(scale * random.normal());
  cache.emplace_back(std::vector<double>{double(rows), double(cols), scale}, std::move(z));
  return cache.back().second;
}

template <class RowKernel>
void run_rows(benchmark::State& state, RowKernel kernel) {
  const Index rows = state.range(0), cols = state.range(1);
  const double scale = state.range(2) == 0 ? 1.0 : 0.05;
  const RowMatrix<float>& z = logits(rows, cols, scale);
  RowMatrix<float> out = RowMatrix<float>::Zero(rows, cols);  // touched before timing (no page faults inside)
  for (auto _ : state) {
    for (Index i = 0; i < rows; ++i) kernel(z.data() + i * cols, cols, out.data() + i * cols);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
  state.SetLabel(state.range(2) == 0 ? "normal" : "flat");
}

void sparsemax_pivot(benchmark::State& state) {
  run_rows(state, [](const float* z, Index n, float* p) { attnscope::detail::sparsemax_row(z, n, p); });
}
void sparsemax_sort_reference(benchmark::State& state) {
  run_rows(state, [](const float* z, Index n, float* p) { attnscope::detail::sparsemax_row_sort_reference(z, n, p); });
}
void entmax15_exact(benchmark::State& state) {
  run_rows(state, [](const float* z, Index n, float* p) { attnscope::detail::entmax15_row(z, n, p); });
}
void entmax15_bisect(benchmark::State& state) {
  run_rows(state, [](const float* z, Index n, float* p) { attnscope::detail::entmax_bisect_row(z, n, 1.5f, p); });
}

void sparsemax_public(benchmark::State& state) {
#if defined(_OPENMP)
  omp_set_num_threads(static_cast<int>(state.range(3)));
#endif
  const RowMatrix<float>& z = logits(state.range(0), state.range(1), state.range(2) == 0 ? 1.0 : 0.05);
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::sparsemax(z));
  state.SetItemsProcessed(state.iterations() * z.size());
  state.SetLabel(std::string(state.range(2) == 0 ? "normal" : "flat") + ", threads " + std::to_string(state.range(3)));
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int flat : {0, 1}) {
    b->Args({4096, 4096, flat});
    b->Args({16384, 512, flat});
  }
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(sparsemax_pivot)->Apply(shapes);
BENCHMARK(sparsemax_sort_reference)->Apply(shapes);
BENCHMARK(entmax15_exact)->Apply(shapes);
BENCHMARK(entmax15_bisect)->Apply(shapes);
BENCHMARK(sparsemax_public)
    ->Args({4096, 4096, 0, 1})
    ->Args({4096, 4096, 0, 2})
    ->Args({16384, 512, 0, 1})
    ->Args({16384, 512, 0, 2})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
