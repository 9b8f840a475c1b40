// attnscope/kernels/detail/cpu_features.hpp — the run-time CPU checks behind every instruction-set dispatch of the
// kernels (the float loops of kernels/runtime_dispatch.hpp, the GEMM micro-kernel of kernels/detail/gemm_micro.hpp,
// the dequantizers of kernels/detail/dequantize_avx2.hpp): one definition of each feature set they need.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define ATTNSCOPE_CPU_FEATURES_X86 1
#endif

namespace attnscope::kernels::detail {

/// Whether the running CPU has AVX2 and FMA: known at compile time in a build for them, else asked of the compiler
/// runtime's CPU model (which includes the operating system's AVX state); false off x86-64.
inline bool cpu_has_avx2_fma() {
#if defined(__AVX2__) && defined(__FMA__)
  return true;
#elif defined(ATTNSCOPE_CPU_FEATURES_X86)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

/// Whether the running CPU has AVX-512F (with the operating system's AVX-512 state): known at compile time in a build
/// for it, else asked of the compiler runtime's CPU model; false off x86-64.
inline bool cpu_has_avx512f() {
#if defined(__AVX512F__)
  return true;
#elif defined(ATTNSCOPE_CPU_FEATURES_X86)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

/// Whether the running CPU has AVX2 and F16C: AVX2 as above, F16C from CPUID leaf 1, ECX bit 29 (clang's
/// __builtin_cpu_supports does not know "f16c"); false off x86-64.
inline bool cpu_has_avx2_f16c() {
#if defined(__AVX2__) && defined(__F16C__)
  return true;
#elif defined(ATTNSCOPE_CPU_FEATURES_X86)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace attnscope::kernels::detail
