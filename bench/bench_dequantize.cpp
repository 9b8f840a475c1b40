// Widening and dequantization of stored weights (kernels/widen.hpp, kernels/dequantize.hpp,
// kernels/dequantize_iq.hpp): the scalar references (widen_reference) against the dispatched kernels (widen: AVX2 +
// F16C where the CPU has it), per format, in one run; the codebook and ternary formats (IQ4_NL … IQ1_M; the scalar
// reference too for those with an AVX2 path), to be read as ratios to Q4_K's widen and widen_reference of the run.
// The work is that of the model's panel packing: a weight of 2²² elements (rows of 4096) read row by row from memory
// and widened into one float32 row buffer that stays in L1. Random bytes with finite scales (the speed of the integer
// and float work does not depend on the values). Items are elements; bytes are the stored bytes read.
// docs/performance.md records a run.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/kernels/widen.hpp"

namespace {

using attnscope::Index;
using attnscope::kernels::StoredFloat;

constexpr Index dequantize_bench_row = 4096, dequantize_bench_rows = 1024;

/// The codebook and ternary formats: every block's scale set to a normal value (random scales would make
/// subnormal and infinite results, which some CPUs process slowly): the fp16 d = 0.01, IQ1_M's four nibbles of it,
/// MXFP4's E8M0 byte 120.
void set_codebook_scales(StoredFloat format, std::vector<unsigned char>& bytes) {
  if (static_cast<int>(format) < static_cast<int>(StoredFloat::iq4_nl)) return;
  const std::size_t block = attnscope::kernels::stored_block_bytes(format);
  const Eigen::half d(0.01f);
  std::uint16_t bits;
  std::memcpy(&bits, &d, 2);
  for (std::size_t at = 0; at + block <= bytes.size(); at += block) {
    unsigned char* b = bytes.data() + at;
    if (format == StoredFloat::mxfp4) {
      b[0] = 120;
    } else if (format == StoredFloat::iq1_m) {
      for (int k = 0; k < 4; ++k)
        b[49 + 2 * k] = static_cast<unsigned char>((b[49 + 2 * k] & 0x0f) | (((bits >> (4 * k)) & 15) << 4));
    } else {
      std::memcpy(b + (format == StoredFloat::tq1_0 ? 52 : format == StoredFloat::tq2_0 ? 64 : 0), &bits, 2);
    }
  }
}

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
  set_codebook_scales(format, bytes);
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
  const auto& info = attnscope::kernels::stored_format_info(format);
  const bool scalar_only = info.reference != nullptr && info.reference == info.dispatched;
  state.SetLabel(std::string(info.name) + " " +
                 (Reference ? "scalar reference"
                  : scalar_only ? "scalar (no SIMD path)" : attnscope::kernels::dequantize_dispatch_target()));
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
  for (StoredFloat format : {StoredFloat::iq4_nl, StoredFloat::iq4_xs, StoredFloat::mxfp4, StoredFloat::tq1_0,
                             StoredFloat::tq2_0, StoredFloat::iq2_xxs, StoredFloat::iq2_xs, StoredFloat::iq2_s,
                             StoredFloat::iq3_xxs, StoredFloat::iq3_s, StoredFloat::iq1_s, StoredFloat::iq1_m}) {
    const auto& info = attnscope::kernels::stored_format_info(format);
    const std::string name = info.name;
    if (info.dispatched != info.reference)  // a SIMD path: its scalar reference too
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
