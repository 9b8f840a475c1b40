// bench_gemm_backends: the float32 products of the forward pass, y = x·Wᵀ for activations x (L × in) and an nn.Linear
// weight W (out × in, row-major), by Eigen's GEMM (what model/detail/linear.hpp runs by default) and, in a build with
// -DATTNSCOPE_BLAS=OpenBLAS, by cblas_sgemm (the optional backend of model/detail/blas.hpp), and by attnscope's own
// packed GEMM (kernels/gemm.hpp, float32 and bfloat16 weights), in one run on 1 and 2 threads. Shapes (L, out, in): GPT-2-small at 1024 tokens (q/k/v/o 768 × 768, c_fc 3072 × 768, c_proj 768 × 3072)
// and an 8B-class layer at 512 tokens (a 128-row panel of depth 4096, the 1024 × 4096 key/value projection).
// Time OpenBLAS with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (they can pin slower kernels):
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build-blas/bench/bench_gemm_backends
// Times are process CPU times (the machine is shared); GFLOP_per_s = 2 · L · out · in per CPU second of all threads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <Eigen/Core>

#if defined(_OPENMP)
#include <omp.h>
#endif
#ifdef ATTNSCOPE_BLAS
#include <cblas.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/gemm.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

struct GemmOperands {
  RowMatrix<float> x, w, y;
};

GemmOperands gemm_operands(Index length, Index out, Index in) {
  attnscope::Random random(7);
  GemmOperands operands{RowMatrix<float>(length, in), RowMatrix<float>(out, in), RowMatrix<float>(length, out)};
  for (Index i = 0; i < operands.x.size(); ++i) operands.x.data()[i] = static_cast<float>(random.normal());
  for (Index i = 0; i < operands.w.size(); ++i) operands.w.data()[i] = 0.02f * static_cast<float>(random.normal());
  return operands;
}

void set_gemm_threads(benchmark::State& state, int threads) {
#if defined(_OPENMP)
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
#else
  if (threads != 1) state.SkipWithError("built without OpenMP");
#endif
#if defined(ATTNSCOPE_BLAS) && defined(OPENBLAS_VERSION)
  openblas_set_num_threads(threads);
#endif
  (void)state;
}

void report_gemm_rate(benchmark::State& state, Index length, Index out, Index in) {
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      2.0 * double(length) * double(out) * double(in) * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

// Arguments: L, out, in, threads.
void BM_eigen_gemm(benchmark::State& state) {
  const Index length = state.range(0), out = state.range(1), in = state.range(2);
  set_gemm_threads(state, static_cast<int>(state.range(3)));
  GemmOperands o = gemm_operands(length, out, in);
  for (auto _ : state) {
    o.y.noalias() = o.x * o.w.transpose();
    benchmark::DoNotOptimize(o.y.data());
  }
  report_gemm_rate(state, length, out, in);
}

// attnscope's packed GEMM (kernels/gemm.hpp) on the same float32 operands, and on the weights stored as bfloat16
// (converted to float32 while packing, as the forward does for a BF16 model); with the micro-kernel the CPU selects
// (automatic) or a named one (avx2 on an AVX-512 CPU: the ratio of the two kernels in one run).
template <attnscope::kernels::StoredFloat Format, attnscope::kernels::GemmKernel Kernel>
void BM_attnscope_gemm(benchmark::State& state) {
  const Index length = state.range(0), out = state.range(1), in = state.range(2);
  set_gemm_threads(state, static_cast<int>(state.range(3)));
  if ((Kernel == attnscope::kernels::GemmKernel::avx2 && !attnscope::kernels::gemm_avx2_available()) ||
      (Kernel == attnscope::kernels::GemmKernel::avx512 && !attnscope::kernels::gemm_avx512_available())) {
    state.SkipWithError("this micro-kernel cannot run on this CPU");
    return;
  }
  state.SetLabel(attnscope::kernels::gemm_kernel_name(Kernel == attnscope::kernels::GemmKernel::automatic
                                                          ? attnscope::kernels::gemm_best_kernel()
                                                          : Kernel));
  GemmOperands o = gemm_operands(length, out, in);
  std::vector<std::uint16_t> bf16;
  attnscope::kernels::StoredWeights w{reinterpret_cast<const unsigned char*>(o.w.data()), Format, out, in,
                                      std::size_t(in) * 4, false};
  if (Format == attnscope::kernels::StoredFloat::bfloat16) {
    bf16.resize(std::size_t(o.w.size()));
    for (std::size_t i = 0; i < bf16.size(); ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, o.w.data() + i, 4);
      bf16[i] = static_cast<std::uint16_t>(bits >> 16);
    }
    w.data = reinterpret_cast<const unsigned char*>(bf16.data());
    w.row_bytes = std::size_t(in) * 2;
  }
  for (auto _ : state) {
    attnscope::kernels::gemm_xwt<false>(length, o.x.data(), in, w, o.y.data(), out, {Kernel, 0});
    benchmark::DoNotOptimize(o.y.data());
  }
  report_gemm_rate(state, length, out, in);
}

#ifdef ATTNSCOPE_BLAS
void BM_blas_sgemm(benchmark::State& state) {
  const Index length = state.range(0), out = state.range(1), in = state.range(2);
  set_gemm_threads(state, static_cast<int>(state.range(3)));
  GemmOperands o = gemm_operands(length, out, in);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(length), int(out), int(in), 1.0f, o.x.data(), int(in),
                o.w.data(), int(in), 0.0f, o.y.data(), int(out));
    benchmark::DoNotOptimize(o.y.data());
  }
  report_gemm_rate(state, length, out, in);
}
#endif

void gemm_shapes(benchmark::internal::Benchmark* b) {
  for (const int threads : {1, 2}) {
    b->Args({1024, 768, 768, threads});
    b->Args({1024, 3072, 768, threads});
    b->Args({1024, 768, 3072, threads});
    b->Args({512, 128, 4096, threads});
    b->Args({512, 1024, 4096, threads});
  }
  b->ArgNames({"L", "out", "in", "threads"})->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
}

}  // namespace

BENCHMARK(BM_eigen_gemm)->Apply(gemm_shapes);
BENCHMARK_TEMPLATE(BM_attnscope_gemm, attnscope::kernels::StoredFloat::float32, attnscope::kernels::GemmKernel::automatic)
    ->Apply(gemm_shapes);
BENCHMARK_TEMPLATE(BM_attnscope_gemm, attnscope::kernels::StoredFloat::float32, attnscope::kernels::GemmKernel::avx2)
    ->Apply(gemm_shapes);
BENCHMARK_TEMPLATE(BM_attnscope_gemm, attnscope::kernels::StoredFloat::bfloat16, attnscope::kernels::GemmKernel::automatic)
    ->Apply(gemm_shapes);
#ifdef ATTNSCOPE_BLAS
BENCHMARK(BM_blas_sgemm)->Apply(gemm_shapes);
#endif
BENCHMARK_MAIN();
