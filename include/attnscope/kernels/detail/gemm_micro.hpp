// attnscope/kernels/detail/gemm_micro.hpp — the micro-kernels of kernels/gemm.hpp: a 6 × 16 tile of C from a packed
// A micro-panel (kc × 6, the six rows interleaved) and a packed B micro-panel (kc × 16), C (+)= A·B.
//
// Both kernels compute every element the same way: an accumulator starting at 0 takes one fused multiply-add per
// depth step, in depth order (acc = fma(a[p], b[p], acc), p = 0 … kc − 1); the tile is then stored (C = acc) or added
// (C = C + acc). The AVX2 kernel does it on 12 registers of 8 lanes (6 rows × 2 halves of 16 columns, the BLIS
// Haswell/Zen shape: 12 independent FMA chains hide the FMA latency of two FMA pipes); the scalar reference does it
// with std::fma on one element at a time. Lane arithmetic is IEEE, so both give the same bits (tests/kernels/
// test_gemm.cpp checks it), and an element's value does not depend on where in the tile it sits.
#pragma once

#include <cmath>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/cpu_features.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(ATTNSCOPE_NO_GEMM_AVX2)
#include <immintrin.h>
#define ATTNSCOPE_GEMM_AVX2 1
#endif

namespace attnscope::kernels::detail {

/// Rows (MR) and columns (NR) of the micro-kernels' tile.
inline constexpr Index gemm_mr = 6;
inline constexpr Index gemm_nr = 16;

/// How a micro-kernel writes its tile: store (C = acc), add (C = C + acc).
enum class GemmWrite { store, add };

/// Scalar reference micro-kernel: tile (row stride ldc) (+)= A·B over kc depth steps; a, b packed as above.
inline void gemm_micro_reference(Index kc, const float* a, const float* b, float* c, Index ldc, GemmWrite write) {
  float acc[gemm_mr][gemm_nr] = {};
  for (Index p = 0; p < kc; ++p, a += gemm_mr, b += gemm_nr)
    for (Index i = 0; i < gemm_mr; ++i)
      for (Index j = 0; j < gemm_nr; ++j) acc[i][j] = std::fma(a[i], b[j], acc[i][j]);
  for (Index i = 0; i < gemm_mr; ++i)
    for (Index j = 0; j < gemm_nr; ++j) c[i * ldc + j] = write == GemmWrite::add ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

#if defined(ATTNSCOPE_GEMM_AVX2)
/// Whether the running CPU has AVX2 and FMA (known at compile time in a build for them).
inline bool gemm_avx2_available() { return cpu_has_avx2_fma(); }

/// The AVX2 + FMA micro-kernel (compiled for AVX2 whatever the translation unit's flags; call it only when
/// gemm_avx2_available()). b must be 32-byte aligned.
__attribute__((target("avx2,fma"))) inline void gemm_micro_avx2(Index kc, const float* a, const float* b, float* c,
                                                                Index ldc, GemmWrite write) {
  // The tile's rows are read (add) or written (store) after the depth loop; fetching their cache lines now overlaps
  // the misses with the loop (a 6 × 16 tile spans at most two 64-byte lines per row).
  for (Index i = 0; i < gemm_mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + gemm_nr - 1), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  // unrolled four depth steps deep: fewer loop-counter and pointer updates between the FMAs
#if defined(__clang__)
#pragma unroll 4
#else
#pragma GCC unroll 4
#endif
  for (Index p = 0; p < kc; ++p, a += gemm_mr, b += gemm_nr) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(x, b0, c40);
    c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(x, b0, c50);
    c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  const __m256 rows[gemm_mr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (Index i = 0; i < gemm_mr; ++i) {
    float* row = c + i * ldc;
    if (write == GemmWrite::add) {
      _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), rows[i][0]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), rows[i][1]));
    } else {
      _mm256_storeu_ps(row, rows[i][0]);
      _mm256_storeu_ps(row + 8, rows[i][1]);
    }
  }
}
#else
inline bool gemm_avx2_available() { return false; }
#endif

}  // namespace attnscope::kernels::detail
