// Compiled, not run: tests/codegen/check_prefetch.cmake disassembles this object and requires a prefetch instruction
// in each function below. They call the Eigen packet bodies of the exp loops directly (not the run-time AVX2 dispatch,
// which has its own _mm_prefetch), with a prefetch pointer the compiler cannot see through.
#include "attnscope/kernels/exp_sum.hpp"
#include "attnscope/kernels/exp_summary.hpp"

using attnscope::Index;

extern "C" float attnscope_probe_exp_shifted_sum_packets(const float* x, Index n, float shift, float* out,
                                                         const float* next_row) {
  float sum = 0;
  attnscope::kernels::detail::exp_shifted_sum_packets<true, true>(x, n, shift, 1.0f, out, next_row, sum);
  return sum;
}

extern "C" float attnscope_probe_exp_shifted_with_summary_packets(const float* x, Index n, float shift,
                                                                  float* out, const float* next_row) {
  attnscope::kernels::ExponentialSummary<float> summary{0, 0, 0, 0};
  attnscope::kernels::detail::exp_shifted_with_summary_packets<true>(x, n, shift, 1.0f, out, next_row, summary);
  return summary.sum_below_one;
}
