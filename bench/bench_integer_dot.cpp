// The llama.cpp matmul's product (kernels::quantize_activations + kernels::integer_dot_xwt, AVX2 micro-kernels) against
// the exact mode's packed float32 GEMM of the same stored weights (kernels::gemm_xwt, which widens the blocks while
// packing), per weight type, in one run: y = x·Wᵀ with x 128 × 2048 float32 activations and W 512 × 2048 of the type
// (random bytes: the timing of integer and float instructions does not depend on the values). Counter: GFLOP/s of the
// 2·m·n·k multiply-adds. Run with OMP_NUM_THREADS=1 for one thread.
#include <cstddef>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels/gemm.hpp"
#include "attnscope/kernels/integer_dot.hpp"
#include "attnscope/kernels/quantize_activations.hpp"

namespace {

using attnscope::Index;
using attnscope::kernels::StoredFloat;

constexpr Index rows_m = 128, depth_k = 2048, columns_n = 512;

struct Operands {
  std::vector<float> x, y;
  std::vector<unsigned char> bytes;
  attnscope::kernels::StoredWeights w;
};

Operands operands(StoredFloat format) {
  attnscope::Random random(11);
  Operands o;
  o.x.resize(std::size_t(rows_m * depth_k));
  for (auto& v : o.x) v = static_cast<float>(random.normal());
  o.y.resize(std::size_t(rows_m * columns_n));
  const std::size_t row_bytes = attnscope::kernels::stored_bytes(format, depth_k);
  o.bytes.resize(row_bytes * std::size_t(columns_n));
  for (auto& b : o.bytes) b = static_cast<unsigned char>(random.below(256));
  o.w = {o.bytes.data(), format, columns_n, depth_k, row_bytes, false};
  return o;
}

void report(benchmark::State& state, StoredFloat format) {
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * rows_m * columns_n * depth_k * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(attnscope::kernels::stored_float_name(format));
}

void BM_integer_dot(benchmark::State& state) {
  const auto format = static_cast<StoredFloat>(state.range(0));
  Operands o = operands(format);
  attnscope::kernels::QuantizedActivations q;
  for (auto _ : state) {
    attnscope::kernels::quantize_activations(o.x.data(), rows_m, depth_k, depth_k,
                                             attnscope::kernels::integer_dot_activation_format(format), q);
    attnscope::kernels::integer_dot_xwt<false>(q, o.w, o.y.data(), columns_n);
    benchmark::DoNotOptimize(o.y.data());
  }
  report(state, format);
}

void BM_exact_gemm(benchmark::State& state) {
  const auto format = static_cast<StoredFloat>(state.range(0));
  Operands o = operands(format);
  for (auto _ : state) {
    attnscope::kernels::gemm_xwt<false>(rows_m, o.x.data(), depth_k, o.w, o.y.data(), columns_n);
    benchmark::DoNotOptimize(o.y.data());
  }
  report(state, format);
}

void formats(benchmark::internal::Benchmark* b) {
  for (StoredFloat f : {StoredFloat::q8_0, StoredFloat::q4_0, StoredFloat::q5_0, StoredFloat::q4_1, StoredFloat::q5_1,
                        StoredFloat::iq4_nl, StoredFloat::mxfp4, StoredFloat::q2_k, StoredFloat::q3_k,
                        StoredFloat::q4_k, StoredFloat::q5_k, StoredFloat::q6_k, StoredFloat::iq4_xs})
    b->Arg(static_cast<int>(f));
}

BENCHMARK(BM_integer_dot)->Apply(formats)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_exact_gemm)->Apply(formats)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
