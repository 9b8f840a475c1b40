// attnscope/kernels/detail/gemm_micro.hpp — the micro-kernels of kernels/gemm.hpp: a 6 × 16 tile of C from a packed
// A micro-panel (kc × 6, the six rows interleaved) and a packed B micro-panel (kc × 16), C (+)= A·B.
//
// Both kernels compute every element the same way: an accumulator starting at 0 takes one fused multiply-add per
// depth step, in depth order (acc = fma(a[p], b[p], acc), p = 0 … kc − 1); the tile is then stored (C = acc) or added
// (C = C + acc). The AVX2 kernel does it on 12 registers of 8 lanes (6 rows × 2 halves of 16 columns, the BLIS
// Haswell/Zen shape: 12 independent FMA chains hide the FMA latency of two FMA pipes; the tile's rows of C are
// prefetched before the depth loop, as BLIS's kernels do, since they are read or written only after it); the scalar
// reference does it with std::fma on one element at a time. Lane arithmetic is IEEE, so both give the same bits (tests/kernels/
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

/// Scalar reference micro-kernel: tile (row stride ldc) (+)= A·B over kc depth steps; a, b packed as above. Returns
/// whether every element it wrote is finite.
inline bool gemm_micro_reference(Index kc, const float* a, const float* b, float* c, Index ldc, GemmWrite write) {
  float acc[gemm_mr][gemm_nr] = {};
  for (Index p = 0; p < kc; ++p, a += gemm_mr, b += gemm_nr)
    for (Index i = 0; i < gemm_mr; ++i)
      for (Index j = 0; j < gemm_nr; ++j) acc[i][j] = std::fma(a[i], b[j], acc[i][j]);
  bool finite = true;
  for (Index i = 0; i < gemm_mr; ++i)
    for (Index j = 0; j < gemm_nr; ++j) {
      c[i * ldc + j] = write == GemmWrite::add ? c[i * ldc + j] + acc[i][j] : acc[i][j];
      finite = finite && std::isfinite(c[i * ldc + j]);
    }
  return finite;
}

#if defined(ATTNSCOPE_GEMM_AVX2)
/// Whether the running CPU has AVX2 and FMA (known at compile time in a build for them).
inline bool gemm_avx2_available() { return cpu_has_avx2_fma(); }

/// The AVX2 + FMA micro-kernel (compiled for AVX2 whatever the translation unit's flags; call it only when
/// gemm_avx2_available()). b must be 32-byte aligned. Returns whether every element it wrote is finite.
__attribute__((target("avx2,fma"))) inline bool gemm_micro_avx2(Index kc, const float* a, const float* b, float* c,
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
  // v − v is +0 for a finite v and NaN for ±inf or NaN; the OR of these bit patterns is NaN iff one of them is
  __m256 nonfinite = _mm256_setzero_ps();
  for (Index i = 0; i < gemm_mr; ++i) {
    float* row = c + i * ldc;
    __m256 left = rows[i][0], right = rows[i][1];
    if (write == GemmWrite::add) {
      left = _mm256_add_ps(_mm256_loadu_ps(row), left);
      right = _mm256_add_ps(_mm256_loadu_ps(row + 8), right);
    }
    _mm256_storeu_ps(row, left);
    _mm256_storeu_ps(row + 8, right);
    nonfinite = _mm256_or_ps(nonfinite, _mm256_or_ps(_mm256_sub_ps(left, left), _mm256_sub_ps(right, right)));
  }
  return _mm256_movemask_ps(_mm256_cmp_ps(nonfinite, nonfinite, _CMP_UNORD_Q)) == 0;
}

/// The 8 × 8 transpose of r0 … r7 in place (r_i's lane j becomes r_j's lane i).
__attribute__((target("avx2"))) inline void gemm_transpose8(__m256& r0, __m256& r1, __m256& r2, __m256& r3,
                                                             __m256& r4, __m256& r5, __m256& r6, __m256& r7) {
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(u0, u4, 0x20);
  r1 = _mm256_permute2f128_ps(u1, u5, 0x20);
  r2 = _mm256_permute2f128_ps(u2, u6, 0x20);
  r3 = _mm256_permute2f128_ps(u3, u7, 0x20);
  r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
  r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
  r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
  r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/// Packs 16 float32 rows (row j at rows + j·stride) over kc depths into one B micro-panel: out[p·16 + j] =
/// row j's element p. out must be 32-byte aligned. A copy: the packed values are the rows' bits.
__attribute__((target("avx2"))) inline void gemm_pack_b_rows_avx2(const float* rows, Index stride, Index kc,
                                                                   float* out) {
  Index p = 0;
  for (; p + 8 <= kc; p += 8)
    for (Index half = 0; half < 2; ++half) {
      const float* r = rows + half * 8 * stride + p;
      __m256 v0 = _mm256_loadu_ps(r), v1 = _mm256_loadu_ps(r + stride), v2 = _mm256_loadu_ps(r + 2 * stride),
             v3 = _mm256_loadu_ps(r + 3 * stride), v4 = _mm256_loadu_ps(r + 4 * stride),
             v5 = _mm256_loadu_ps(r + 5 * stride), v6 = _mm256_loadu_ps(r + 6 * stride),
             v7 = _mm256_loadu_ps(r + 7 * stride);
      gemm_transpose8(v0, v1, v2, v3, v4, v5, v6, v7);
      float* o = out + p * gemm_nr + half * 8;
      _mm256_store_ps(o, v0);
      _mm256_store_ps(o + gemm_nr, v1);
      _mm256_store_ps(o + 2 * gemm_nr, v2);
      _mm256_store_ps(o + 3 * gemm_nr, v3);
      _mm256_store_ps(o + 4 * gemm_nr, v4);
      _mm256_store_ps(o + 5 * gemm_nr, v5);
      _mm256_store_ps(o + 6 * gemm_nr, v6);
      _mm256_store_ps(o + 7 * gemm_nr, v7);
    }
  for (; p < kc; ++p)
    for (Index j = 0; j < gemm_nr; ++j) out[p * gemm_nr + j] = rows[j * stride + p];
}

/// Packs 6 float32 rows (row i at rows + i·stride) over kc depths into one A micro-panel: out[p·6 + i] = row i's
/// element p. A copy: the packed values are the rows' bits.
__attribute__((target("avx2"))) inline void gemm_pack_a_rows_avx2(const float* rows, Index stride, Index kc,
                                                                   float* out) {
  Index p = 0;
  for (; p + 8 <= kc; p += 8) {
    const float* r = rows + p;
    __m256 v0 = _mm256_loadu_ps(r), v1 = _mm256_loadu_ps(r + stride), v2 = _mm256_loadu_ps(r + 2 * stride),
           v3 = _mm256_loadu_ps(r + 3 * stride), v4 = _mm256_loadu_ps(r + 4 * stride),
           v5 = _mm256_loadu_ps(r + 5 * stride), v6 = _mm256_setzero_ps(), v7 = v6;
    gemm_transpose8(v0, v1, v2, v3, v4, v5, v6, v7);
    const __m256 columns[8] = {v0, v1, v2, v3, v4, v5, v6, v7};
    float* o = out + p * gemm_mr;
    for (Index q = 0; q < 8; ++q, o += gemm_mr) {  // lanes 0-5 of each: the six rows at depth p + q
      _mm_storeu_ps(o, _mm256_castps256_ps128(columns[q]));
      _mm_storel_pi(reinterpret_cast<__m64*>(o + 4), _mm256_extractf128_ps(columns[q], 1));
    }
  }
  for (; p < kc; ++p)
    for (Index i = 0; i < gemm_mr; ++i) out[p * gemm_mr + i] = rows[i * stride + p];
}
#else
inline bool gemm_avx2_available() { return false; }
#endif

}  // namespace attnscope::kernels::detail
