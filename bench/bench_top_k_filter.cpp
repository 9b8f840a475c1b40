// The candidate filter of the streaming top-k search (kernels::select_at_least, stream/detail/reduce_row.hpp): the
// AVX2 compaction (vmovmskps, a 256-entry lane table, vpermps) against the scalar reference's branch-free pass, in one
// run. Rows are softmax probabilities of normal logits (σ = 3) of n keys, float32, 256 rows reused; the threshold is the
// one reduce_row uses for the top k: the smallest of the maxima of k disjoint chunks (k = 8 and 64, the default top-k
// masses' larger two), so a few times k entries pass. Counter: ns per key.
#include <algorithm>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/row_reductions.hpp"
#include "attnscope/kernels/select_at_least.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

struct FilterRows {
  RowMatrix<float> p;
  std::vector<float> thresholds;
};

FilterRows filter_rows(Index n, Index k) {
  attnscope::Random random(77);
  RowMatrix<float> z(256, n);
  for (Index i = 0; i < z.size(); ++i) z.data()[i] = static_cast<float>(3 * random.normal());
  FilterRows rows{RowMatrix<float>(z.rows(), n), {}};
  for (Index r = 0; r < z.rows(); ++r) {
    const Eigen::ArrayXf e = (z.row(r).array() - z.row(r).maxCoeff()).exp();
    rows.p.row(r) = (e / e.sum()).matrix().transpose();
  }
  const Index chunk = n / k;
  for (Index r = 0; r < rows.p.rows(); ++r) {
    const float* row = rows.p.data() + r * n;
    float threshold = attnscope::kernels::row_max(row + (k - 1) * chunk, n - (k - 1) * chunk).max;
    for (Index c = 0; c + 1 < k; ++c)
      threshold = std::min(threshold, attnscope::kernels::row_max(row + c * chunk, chunk).max);
    rows.thresholds.push_back(threshold);
  }
  return rows;
}

template <bool Dispatched>
void BM_top_k_filter(benchmark::State& state) {
  const Index n = state.range(0), k = state.range(1);
  const FilterRows rows = filter_rows(n, k);
  std::vector<float> candidates(static_cast<std::size_t>(n));
  Index kept = 0;
  for (auto _ : state) {
    for (Index r = 0; r < rows.p.rows(); ++r) {
      const float* row = rows.p.data() + r * n;
      const float t = rows.thresholds[std::size_t(r)];
      kept += Dispatched ? attnscope::kernels::select_at_least(row, n, t, candidates.data())
                         : attnscope::kernels::select_at_least_reference(row, n, t, candidates.data());
    }
    benchmark::DoNotOptimize(candidates.data());
    benchmark::ClobberMemory();
  }
  const double keys = double(state.iterations()) * double(rows.p.size());
  state.counters["ns_per_key"] = benchmark::Counter(keys, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["kept_per_row"] = double(kept) / (double(state.iterations()) * double(rows.p.rows()));
  state.SetLabel(Dispatched && attnscope::kernels::select_at_least_avx2_available() ? "avx2" : "scalar");
}

void filter_arguments(benchmark::internal::Benchmark* b) {
  for (Index n : {512, 4096})
    for (Index k : {8, 64}) b->Args({n, k});
}

BENCHMARK(BM_top_k_filter<false>)->Name("top_k_filter/reference")->Apply(filter_arguments);
BENCHMARK(BM_top_k_filter<true>)->Name("top_k_filter/dispatched")->Apply(filter_arguments);

}  // namespace

BENCHMARK_MAIN();
