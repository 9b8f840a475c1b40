// Widening and dequantization of stored weights (kernels/widen.hpp, kernels/dequantize.hpp): the scalar references
// (widen_reference) against the dispatched kernels (widen: AVX2 + F16C where the CPU has it), per format, in one run.
// The work is that of the model's panel packing: a weight of 2²² elements (rows of 4096) read row by row from memory
// and widened into one float32 row buffer that stays in L1. Random bytes with finite scales (the speed of the integer
// and float work does not depend on the values). Items are elements; bytes are the stored bytes read.
// docs/performance.md records a run.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/kernels/widen.hpp"

namespace {

using attnscope::Index;
using attnscope::kernels::StoredFloat;

constexpr Index dequantize_bench_row = 4096, dequantize_bench_rows = 1024;

/// Random stored bytes of `format` for rows × 4096 elements, with every fp16 / float32 scale set to a finite value.
std::vector<unsigned char> dequantize_bench_bytes(StoredFloat format) {
  std::vector<unsigned char> bytes(attnscope::kernels::stored_bytes(format, dequantize_bench_row * dequantize_bench_rows));
  std::mt19937_64 random(4096);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(random());
  if (format == StoredFloat::float16 || format == StoredFloat::bfloat16) {  // clear the top exponent bit: finite
    for (std::size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0x3f;
  }
  if (format == StoredFloat::float32) {
    for (std::size_t i = 3; i < bytes.size(); i += 4) bytes[i] &= 0x3f;
  }
  return bytes;
}

template <bool Reference>
void widen_rows(benchmark::State& state, StoredFloat format) {
  const std::vector<unsigned char> bytes = dequantize_bench_bytes(format);
  const std::size_t row_bytes = attnscope::kernels::stored_bytes(format, dequantize_bench_row);
  std::vector<float> row(dequantize_bench_row);
  for (auto _ : state) {
    for (Index r = 0; r < dequantize_bench_rows; ++r) {
      const unsigned char* at = bytes.data() + static_cast<std::size_t>(r) * row_bytes;
      if (Reference) attnscope::kernels::widen_reference(at, format, dequantize_bench_row, row.data());
      else attnscope::kernels::widen(at, format, dequantize_bench_row, row.data());
      benchmark::DoNotOptimize(row.data());
      benchmark::ClobberMemory();
    }
  }
  state.SetItemsProcessed(state.iterations() * dequantize_bench_row * dequantize_bench_rows);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
  state.SetLabel(std::string(attnscope::kernels::stored_float_name(format)) + " " +
                 (Reference ? "scalar reference" : attnscope::kernels::dequantize_dispatch_target()));
}

void register_dequantize_benchmarks() {
  for (StoredFloat format : {StoredFloat::float16, StoredFloat::bfloat16, StoredFloat::q8_0, StoredFloat::q4_0,
                             StoredFloat::q4_k, StoredFloat::q5_k, StoredFloat::q6_k, StoredFloat::q4_1,
                             StoredFloat::q5_0, StoredFloat::q5_1, StoredFloat::q2_k, StoredFloat::q3_k}) {
    const std::string name = attnscope::kernels::stored_float_name(format);
    benchmark::RegisterBenchmark(("widen_reference/" + name).c_str(), widen_rows<true>, format)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("widen/" + name).c_str(), widen_rows<false>, format)->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_dequantize_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
