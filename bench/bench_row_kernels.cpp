// Row kernels at the memory limit (docs/performance.md): where the time of a softmax row goes, against copies of the
// same bytes. One thread, float32, 4096×4096 and 16384×512, reused (pre-touched) outputs. Variants:
//  - copies: memcpy (glibc: streaming stores above a cache-size threshold), a packet loop with ordinary stores
//    (write-allocate: every output line is read first), the same loop with streaming stores;
//  - single passes: row_max alone (read only), exp_shifted_total alone (read + exp, no store);
//  - softmax rows: the three-pass kernel into the output (exp stored into out, then scaled in place: the output lines
//    are read for ownership), three passes through an L1-resident row buffer with the final scale streamed out, and
//    the recompute form (max, exp-sum without store, exp·(1/sum) streamed out), each with ordinary and streaming stores;
//  - the other row kernels, for the comparison of builds (scripts/bench_isa.sh: generic x86-64, x86-64-v3, native):
//    the probability summary and one secular pass over softmax rows, the exact ‖J‖₂ of a softmax row from its logits
//    (softmax into a buffer, then the secular root), sparsemax, exact 1.5-entmax;
//  - the passes of the norm from logits on 64 rows of 512 keys that stay in the cache (their compute cost).
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels.hpp"
#include "attnscope/normalize/entmax.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/sparsemax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
namespace kernels = attnscope::kernels;

RowMatrix<float> normal_logits(Index rows, Index cols) {
  attnscope::Random random(2024);
  RowMatrix<float> z(rows, cols);
  for (Index i = 0; i < z.size(); ++i) z.data()[i] = static_cast<float>(3 * random.normal());
  return z;
}

template <class RowBody>
void run_rows(benchmark::State& state, RowBody&& body) {
  const RowMatrix<float> z = normal_logits(state.range(0), state.range(1));
  RowMatrix<float> out = RowMatrix<float>::Zero(z.rows(), z.cols());  // touched before timing
  Eigen::VectorXf buffer(z.cols());  // packet-aligned, as the library's row buffers
  for (auto _ : state) {
    for (Index i = 0; i < z.rows(); ++i) body(z.data() + i * z.cols(), z.cols(), out.data() + i * z.cols(), buffer.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * z.size());
  state.SetBytesProcessed(state.iterations() * z.size() * 8);
}

void copy_memcpy(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) { std::memcpy(out, x, sizeof(float) * n); });
}
void copy_packet_stores(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) { kernels::scale_row_into(x, n, 1.0f, out, false); });
}
void copy_streaming_stores(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) { kernels::scale_row_into(x, n, 1.0f, out, true); });
}
void pass_row_max(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) { out[0] = kernels::row_max(x, n).max; });
}
void pass_exp_total(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) { out[0] = kernels::exp_shifted_total(x, n, 30.f, 1.f); });
}
void pass_exp_scaled_streaming(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) {
    kernels::exp_shifted_scaled_row(x, n, 30.f, 1.f, 0.5f, out, true);
  });
}
void softmax_three_pass_in_output(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) {
    benchmark::DoNotOptimize(attnscope::detail::try_softmax_row(x, n, 1.0f, out));
  });
}
template <bool streaming>
void softmax_three_pass_buffer(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float* buffer) {
    const float max = kernels::row_max(x, n).max;
    const float sum = kernels::exp_shifted_sum(x, n, max, 1.0f, buffer);
    kernels::scale_row_into(buffer, n, 1.0f / sum, out, streaming);
  });
}
template <bool streaming>
void softmax_buffered_prefetching(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float* buffer) {
    // prefetches the next row (the last row's "next row" is never read: a prefetch does not fault)
    const float max = kernels::row_max(x, n).max;
    const float sum = kernels::exp_shifted_sum(x, n, max, 1.0f, buffer, x + n);
    kernels::scale_row_into(buffer, n, 1.0f / sum, out, streaming);
  });
}
template <bool streaming>
void softmax_recompute(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) {
    const float max = kernels::row_max(x, n).max;
    const float sum = kernels::exp_shifted_total(x, n, max, 1.0f);
    kernels::exp_shifted_scaled_row(x, n, max, 1.0f, 1.0f / sum, out, streaming);
  });
}

/// Softmax rows of the benchmark logits (inputs of the probability kernels).
const RowMatrix<float>& softmax_rows(Index rows, Index cols) {
  static RowMatrix<float> p;  // benchmark data only
  if (p.rows() != rows || p.cols() != cols) p = attnscope::softmax(normal_logits(rows, cols));
  return p;
}

template <class RowBody>
void run_probability_rows(benchmark::State& state, RowBody&& body) {
  const RowMatrix<float>& p = softmax_rows(state.range(0), state.range(1));
  float total = 0;
  for (auto _ : state) {
    for (Index i = 0; i < p.rows(); ++i) total += body(p.data() + i * p.cols(), p.cols());
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * p.size());
  state.SetBytesProcessed(state.iterations() * p.size() * 4);
}

void pass_probability_summary(benchmark::State& state) {
  run_probability_rows(state, [](const float* p, Index n) { return kernels::probability_row_summary(p, n).sum; });
}
void pass_secular_sums(benchmark::State& state) {
  run_probability_rows(state, [](const float* p, Index n) { return kernels::secular_sums(p, n, 0.75f).value; });
}
void pass_secular_power_sums(benchmark::State& state) {
  run_probability_rows(state, [](const float* p, Index n) { return kernels::secular_power_sums(p, n, 0.75f).c[4]; });
}
void pass_exp_with_summary(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float* buffer) {  // max pass included (the shift)
    out[0] = kernels::exp_shifted_with_summary(x, n, kernels::row_max(x, n).max, 1.0f, buffer,
                                               static_cast<const float*>(nullptr))
                 .sum_below_one;
  });
}
/// The exact norm of one softmax row from its logits as jacobian_spectral_norm(z, SoftmaxMap{1}) composes it: max,
/// exponentials with their summary, the secular root on the exponentials.
void softmax_norm_row_from_logits(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float* buffer) {
    const auto summary = kernels::exp_shifted_with_summary(x, n, kernels::row_max(x, n).max, 1.0f, buffer, static_cast<const float*>(nullptr));
    out[0] = attnscope::detail::softmax_norm_from_exponentials(buffer, n, summary);
  });
}
void sparsemax_row(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) { attnscope::detail::sparsemax_row(x, n, out); });
}
void entmax15_row(benchmark::State& state) {
  run_rows(state, [](const float* x, Index n, float* out, float*) { attnscope::detail::entmax15_row(x, n, out); });
}

void shapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->Args({4096, 4096})->Args({16384, 512})->Unit(benchmark::kMillisecond);
}

/// 64 rows of 512 keys (128 KiB, in the cache): the compute cost of each pass of the norm from logits without the
/// memory; divided by 64, the time of one row (docs/performance.md).
void cached_rows(benchmark::internal::Benchmark* benchmark) {
  benchmark->Args({64, 512})->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(copy_memcpy)->Apply(shapes);
BENCHMARK(copy_packet_stores)->Apply(shapes);
BENCHMARK(copy_streaming_stores)->Apply(shapes);
BENCHMARK(pass_row_max)->Apply(shapes);
BENCHMARK(pass_exp_total)->Apply(shapes);
BENCHMARK(pass_exp_scaled_streaming)->Apply(shapes);
BENCHMARK(softmax_three_pass_in_output)->Apply(shapes);
BENCHMARK_TEMPLATE(softmax_three_pass_buffer, false)->Apply(shapes);
BENCHMARK_TEMPLATE(softmax_three_pass_buffer, true)->Apply(shapes);
BENCHMARK_TEMPLATE(softmax_buffered_prefetching, false)->Apply(shapes);
BENCHMARK_TEMPLATE(softmax_buffered_prefetching, true)->Apply(shapes);
BENCHMARK_TEMPLATE(softmax_recompute, false)->Apply(shapes);
BENCHMARK_TEMPLATE(softmax_recompute, true)->Apply(shapes);

BENCHMARK(pass_probability_summary)->Apply(shapes);
BENCHMARK(pass_secular_sums)->Apply(shapes);
BENCHMARK(pass_secular_power_sums)->Apply(shapes);
BENCHMARK(pass_exp_with_summary)->Apply(shapes);
BENCHMARK(softmax_norm_row_from_logits)->Apply(shapes);
BENCHMARK(pass_row_max)->Apply(cached_rows);
BENCHMARK(pass_exp_total)->Apply(cached_rows);
BENCHMARK(pass_exp_with_summary)->Apply(cached_rows);
BENCHMARK(pass_secular_sums)->Apply(cached_rows);
BENCHMARK(pass_secular_power_sums)->Apply(cached_rows);
BENCHMARK(softmax_norm_row_from_logits)->Apply(cached_rows);
BENCHMARK(softmax_three_pass_in_output)->Apply(cached_rows);
BENCHMARK(sparsemax_row)->Apply(shapes);
BENCHMARK(entmax15_row)->Apply(shapes);

BENCHMARK_MAIN();
