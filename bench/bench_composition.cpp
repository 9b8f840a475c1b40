// Speed of the composition module on 4096×1024 attention rows, double precision, one thread so that
// the algorithms (not the thread count) are compared. Baselines in the same run:
//  - ilr: the O(D) cumulative-sum ilr against the O(D²) basis product clr(x)·Vᵀ, both as one blocked GEMM
//    (BM_ilr_basis_gemm: the best case for O(D²), what skbio does with numpy) and as a per-row matrix–vector product
//    (BM_ilr_basis_per_row: what a row-wise implementation of the basis product does). From logits the O(D) ilr
//    needs no logarithms (BM_ilr_from_logits) and is compared with the GEMM on already-centred logits
//    (BM_ilr_basis_gemm_from_clr): the coordinate transform alone.
//  - clr and the decompositions (entropy, Aitchison, JS splits) are reported against a plain copy of the matrix.
// Ratios are computed from one run (scripts/bench.sh; docs/performance.md).
#include <benchmark/benchmark.h>
#include <Eigen/Core>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/composition.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

constexpr Index kRows = 4096, kCols = 1024;

void single_thread() {
#if defined(_OPENMP)
  omp_set_num_threads(1);
#endif
  Eigen::setNbThreads(1);
}

/// Seeded attention logits: N(0, 2²) with a sink logit 6 units higher at key 0 (sink mass ~0.3–0.9).
const RowMatrix<double>& logits() {
  static const RowMatrix<double> z = [] {
    attnscope::Random random(4);
    RowMatrix<double> out(kRows, kCols);
    for (Index i = 0; i < kRows; ++i)
      for (Index j = 0; j < kCols; ++j) out(i, j) = 2 * random.normal() + (j == 0 ? 6.0 : 0.0);
    return out;
  }();
  return z;
}
const RowMatrix<double>& probabilities() {
  static const RowMatrix<double> p = attnscope::softmax(logits());
  return p;
}
const RowMatrix<double>& other_probabilities() {
  static const RowMatrix<double> p = attnscope::softmax(RowMatrix<double>(logits().rowwise().reverse()));
  return p;
}
const RowMatrix<double>& basis() {
  static const RowMatrix<double> v = attnscope::composition::ilr_basis(kCols);
  return v;
}

void set_rows(benchmark::State& state) {
  state.counters["rows_per_s"] = benchmark::Counter(static_cast<double>(kRows) * static_cast<double>(state.iterations()),
                                                    benchmark::Counter::kIsRate);
}

void BM_copy_baseline(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  for (auto _ : state) {
    RowMatrix<double> copy = p;
    benchmark::DoNotOptimize(copy.data());
  }
  set_rows(state);
}

void BM_clr(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::clr(p).data());
  set_rows(state);
}

void BM_clr_from_logits(benchmark::State& state) {
  single_thread();
  const auto& z = logits();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::clr_from_logits(z).data());
  set_rows(state);
}

void BM_ilr(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::ilr(p).data());
  set_rows(state);
}

void BM_ilr_from_logits(benchmark::State& state) {
  single_thread();
  const auto& z = logits();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::ilr_from_logits(z).data());
  set_rows(state);
}

void BM_ilr_into(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  RowMatrix<double> out(kRows, kCols - 1);
  for (auto _ : state) {
    attnscope::composition::ilr_into(p, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_rows(state);
}

void BM_ilr_from_logits_into(benchmark::State& state) {
  single_thread();
  const auto& z = logits();
  RowMatrix<double> out(kRows, kCols - 1);
  for (auto _ : state) {
    attnscope::composition::ilr_from_logits_into(z, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_rows(state);
}

void BM_ilr_basis_gemm(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  const auto& v = basis();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::ilr_by_basis(p, v).data());
  set_rows(state);
}

void BM_ilr_basis_gemm_from_clr(benchmark::State& state) {
  single_thread();
  const RowMatrix<double> centred = attnscope::composition::clr_from_logits(logits());
  const auto& v = basis();
  RowMatrix<double> out(kRows, kCols - 1);
  for (auto _ : state) {
    out.noalias() = centred * v.transpose();
    benchmark::DoNotOptimize(out.data());
  }
  set_rows(state);
}

void BM_ilr_basis_per_row(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  const auto& v = basis();
  RowMatrix<double> out(kRows, kCols - 1);
  for (auto _ : state) {
    const RowMatrix<double> centred = attnscope::composition::clr(p);
    for (Index i = 0; i < kRows; ++i) out.row(i).noalias() = (v * centred.row(i).transpose()).transpose();
    benchmark::DoNotOptimize(out.data());
  }
  set_rows(state);
}

void BM_entropy_split(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::entropy_split(p).content_term.data());
  set_rows(state);
}

void BM_aitchison_split(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  const auto& q = other_probabilities();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::aitchison_split(p, q).content_term.data());
  set_rows(state);
}

void BM_js_split(benchmark::State& state) {
  single_thread();
  const auto& p = probabilities();
  const auto& q = other_probabilities();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::composition::js_split(p, q).content_term.data());
  set_rows(state);
}

}  // namespace

BENCHMARK(BM_copy_baseline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_clr)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_clr_from_logits)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ilr)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ilr_from_logits)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ilr_into)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ilr_from_logits_into)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ilr_basis_gemm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ilr_basis_gemm_from_clr)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ilr_basis_per_row)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_entropy_split)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_aitchison_split)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_js_split)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
