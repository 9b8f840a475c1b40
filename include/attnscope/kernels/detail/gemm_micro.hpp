// attnscope/kernels/detail/gemm_micro.hpp — the micro-kernels of kernels/gemm.hpp: a 6 × 16 tile of C from six rows
// of A and a packed B micro-panel (kc × 16), or with AVX-512 a 6 × 32 tile from two micro-panels side by side,
// C (+)= A·B, and the tile loop that runs them over a block of C.
//
// A is read through a cursor: a packed A micro-panel (kc × 6, the six rows interleaved: PackedRowsA, what gemm_xwt
// packs) or six rows read where they are (RowPointersA: the attention kernel's probability rows, used once each, so
// not worth packing). The cursor only changes where the six values of a depth step come from, not the arithmetic.
//
// Every kernel computes every element the same way: an accumulator starting at 0 takes one fused multiply-add per
// depth step, in depth order (acc = fma(a[p], b[p], acc), p = 0 … kc − 1); the tile is then stored (C = acc) or added
// (C = C + acc). The AVX2 kernel does it on 12 registers of 8 lanes (6 rows × 2 halves of 16 columns, the BLIS
// Haswell/Zen shape: 12 independent FMA chains hide the FMA latency of two FMA pipes); the AVX-512 kernel on 12
// registers of 16 lanes (6 rows × 2 micro-panels: the same 8 loads per 12 FMAs, twice the columns per FMA); both
// prefetch the tile's rows of C before the depth loop, as BLIS's kernels do, since they are read or written only after
// it. The scalar reference does it with std::fma on one element at a time. Lane arithmetic is IEEE, so all give the
// same bits (tests/kernels/test_gemm.cpp checks it), and an element's value does not depend on where in the tile it
// sits nor on the tile's width.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/cpu_features.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(ATTNSCOPE_NO_GEMM_AVX2)
#include "attnscope/kernels/detail/simd_x86.hpp"
#define ATTNSCOPE_GEMM_AVX2 1
#endif

namespace attnscope::kernels::detail {

/// Rows (MR) and columns (NR) of the micro-kernels' tile.
inline constexpr Index gemm_mr = 6;
inline constexpr Index gemm_nr = 16;

/// How a micro-kernel writes its tile: store (C = acc), add (C = C + acc).
enum class GemmWrite { store, add };

/// A cursor over a packed A micro-panel: depth step p's six values at a + 6p.
struct PackedRowsA {
  const float* a;
  const float* at(Index i) const { return a + i; }
  void next() { a += gemm_mr; }
};

/// A cursor over six rows of A read in place, contiguous in depth: row i's depth step p at rows[i] + p.
struct RowPointersA {
  const float* rows[gemm_mr];
  const float* at(Index i) const { return rows[i]; }
  void next() {
    for (const float*& row : rows) ++row;
  }
};

/// Scalar reference micro-kernel: tile (row stride ldc) (+)= A·B over kc depth steps; A through its cursor, b packed
/// as above. Returns whether every element it wrote is finite.
template <class ACursor, class = std::enable_if_t<!std::is_pointer<ACursor>::value>>
bool gemm_micro_reference(Index kc, ACursor a, const float* b, float* c, Index ldc, GemmWrite write) {
  float acc[gemm_mr][gemm_nr] = {};
  for (Index p = 0; p < kc; ++p, a.next(), b += gemm_nr)
    for (Index i = 0; i < gemm_mr; ++i)
      for (Index j = 0; j < gemm_nr; ++j) acc[i][j] = std::fma(*a.at(i), b[j], acc[i][j]);
  bool finite = true;
  for (Index i = 0; i < gemm_mr; ++i)
    for (Index j = 0; j < gemm_nr; ++j) {
      c[i * ldc + j] = write == GemmWrite::add ? c[i * ldc + j] + acc[i][j] : acc[i][j];
      finite = finite && std::isfinite(c[i * ldc + j]);
    }
  return finite;
}

/// The reference on a packed A micro-panel.
inline bool gemm_micro_reference(Index kc, const float* a, const float* b, float* c, Index ldc, GemmWrite write) {
  return gemm_micro_reference(kc, PackedRowsA{a}, b, c, ldc, write);
}

#if defined(ATTNSCOPE_GEMM_AVX2)
/// Whether the running CPU has AVX2 and FMA (known at compile time in a build for them).
inline bool gemm_avx2_available() { return cpu_has_avx2_fma(); }

/// The AVX2 + FMA micro-kernel (compiled for AVX2 whatever the translation unit's flags; call it only when
/// gemm_avx2_available()), A through its cursor. b must be 32-byte aligned. Returns whether every element it wrote is
/// finite.
template <class ACursor, class = std::enable_if_t<!std::is_pointer<ACursor>::value>>
__attribute__((target("avx2,fma"))) inline bool gemm_micro_avx2(Index kc, ACursor a, const float* b, float* c,
                                                                Index ldc, GemmWrite write) {
  // The tile's rows are read (add) or written (store) after the depth loop; fetching their cache lines now overlaps
  // the misses with the loop (a 6 × 16 tile spans at most two 64-byte lines per row).
  for (Index i = 0; i < gemm_mr; ++i) {
    x86::prefetch_line(c + i * ldc);
    x86::prefetch_line(c + i * ldc + gemm_nr - 1);
  }
  // twelve named accumulators, not an array: GCC keeps an array of them on the stack around the loop here
  x86::f32x8 c00{}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
             c50 = c00, c51 = c00;
  // unrolled four depth steps deep: fewer loop-counter and pointer updates between the FMAs
#if defined(__clang__)
#pragma unroll 4
#else
#pragma GCC unroll 4
#endif
  for (Index p = 0; p < kc; ++p, a.next(), b += gemm_nr) {
    const x86::f32x8 b0 = x86::load8_aligned(b), b1 = x86::load8_aligned(b + 8);
    x86::f32x8 x = x86::broadcast8(*a.at(0));
    c00 = x86::fma(x, b0, c00);
    c01 = x86::fma(x, b1, c01);
    x = x86::broadcast8(*a.at(1));
    c10 = x86::fma(x, b0, c10);
    c11 = x86::fma(x, b1, c11);
    x = x86::broadcast8(*a.at(2));
    c20 = x86::fma(x, b0, c20);
    c21 = x86::fma(x, b1, c21);
    x = x86::broadcast8(*a.at(3));
    c30 = x86::fma(x, b0, c30);
    c31 = x86::fma(x, b1, c31);
    x = x86::broadcast8(*a.at(4));
    c40 = x86::fma(x, b0, c40);
    c41 = x86::fma(x, b1, c41);
    x = x86::broadcast8(*a.at(5));
    c50 = x86::fma(x, b0, c50);
    c51 = x86::fma(x, b1, c51);
  }
  const x86::f32x8 rows[gemm_mr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  // v − v is +0 for a finite v and NaN for ±inf or NaN; the OR of these bit patterns is NaN iff one of them is
  x86::i32x8 nonfinite{};
  for (Index i = 0; i < gemm_mr; ++i) {
    float* row = c + i * ldc;
    x86::f32x8 left = rows[i][0], right = rows[i][1];
    if (write == GemmWrite::add) {
      left = x86::load8(row) + left;
      right = x86::load8(row + 8) + right;
    }
    x86::store8(row, left);
    x86::store8(row + 8, right);
    nonfinite |= x86::bits_as<x86::i32x8>(left - left) | x86::bits_as<x86::i32x8>(right - right);
  }
  const x86::f32x8 poison = x86::bits_as<x86::f32x8>(nonfinite);
  return x86::movemask(poison != poison) == 0;
}

/// The AVX2 micro-kernel on a packed A micro-panel.
__attribute__((target("avx2,fma"))) inline bool gemm_micro_avx2(Index kc, const float* a, const float* b, float* c,
                                                                Index ldc, GemmWrite write) {
  return gemm_micro_avx2(kc, PackedRowsA{a}, b, c, ldc, write);
}

/// Whether the running CPU has AVX-512F, and AVX2 + FMA for the packing transposes the AVX-512 path shares with the
/// AVX2 one (known at compile time in a build for them).
inline bool gemm_avx512_available() { return cpu_has_avx512f() && cpu_has_avx2_fma(); }

/// The AVX-512F micro-kernel body on Panels (1 or 2) B micro-panels: the 6 × 16·Panels tile, b0 for columns 0–15 and
/// b1 for 16–31.
template <int Panels, class ACursor>
__attribute__((target("avx512f"))) inline bool gemm_micro_avx512_body(Index kc, ACursor a, const float* b0,
                                                                      const float* b1, float* c, Index ldc,
                                                                      GemmWrite write) {
  for (Index i = 0; i < gemm_mr; ++i)  // the tile's rows of C, read or written after the depth loop
    for (Index j = 0; j < Panels; ++j) {
      x86::prefetch_line(c + i * ldc + j * gemm_nr);
      x86::prefetch_line(c + i * ldc + j * gemm_nr + gemm_nr - 1);
    }
  x86::f32x16 acc[gemm_mr][Panels];
  for (Index i = 0; i < gemm_mr; ++i)
    for (Index j = 0; j < Panels; ++j) acc[i][j] = x86::f32x16{};
#if defined(__clang__)
#pragma unroll 4
#else
#pragma GCC unroll 4
#endif
  for (Index p = 0; p < kc; ++p, a.next()) {
    x86::f32x16 b[Panels];
    b[0] = x86::load16(b0 + p * gemm_nr);
    if constexpr (Panels == 2) b[1] = x86::load16(b1 + p * gemm_nr);
    for (Index i = 0; i < gemm_mr; ++i) {
      const x86::f32x16 x = x86::broadcast16(*a.at(i));
      for (Index j = 0; j < Panels; ++j) acc[i][j] = x86::fma(x, b[j], acc[i][j]);
    }
  }
  // v − v is +0 for a finite v and NaN for ±inf or NaN
  unsigned nonfinite = 0;
  for (Index i = 0; i < gemm_mr; ++i)
    for (Index j = 0; j < Panels; ++j) {
      float* out = c + i * ldc + j * gemm_nr;
      x86::f32x16 v = acc[i][j];
      if (write == GemmWrite::add) v = x86::load16(out) + v;
      x86::store16(out, v);
      nonfinite |= x86::nan_lanes(v - v);
    }
  return nonfinite == 0;
}

/// The AVX-512F micro-kernel (compiled for AVX-512F whatever the translation unit's flags; call it only when
/// gemm_avx512_available()), A through its cursor: the 6 × 32 tile of the B micro-panels b0 (columns 0–15) and b1
/// (columns 16–31), or with b1 null the 6 × 16 tile of b0. Returns whether every element it wrote is finite.
template <class ACursor, class = std::enable_if_t<!std::is_pointer<ACursor>::value>>
__attribute__((target("avx512f"))) inline bool gemm_micro_avx512(Index kc, ACursor a, const float* b0,
                                                                 const float* b1, float* c, Index ldc,
                                                                 GemmWrite write) {
  return b1 != nullptr ? gemm_micro_avx512_body<2>(kc, a, b0, b1, c, ldc, write)
                       : gemm_micro_avx512_body<1>(kc, a, b0, nullptr, c, ldc, write);
}

/// The AVX-512F micro-kernel on a packed A micro-panel.
__attribute__((target("avx512f"))) inline bool gemm_micro_avx512(Index kc, const float* a, const float* b0,
                                                                 const float* b1, float* c, Index ldc,
                                                                 GemmWrite write) {
  return gemm_micro_avx512(kc, PackedRowsA{a}, b0, b1, c, ldc, write);
}

/// The 8 × 8 transpose of r0 … r7 in place (r_i's lane j becomes r_j's lane i).
__attribute__((target("avx2"))) inline void gemm_transpose8(x86::f32x8& r0, x86::f32x8& r1, x86::f32x8& r2,
                                                             x86::f32x8& r3, x86::f32x8& r4, x86::f32x8& r5,
                                                             x86::f32x8& r6, x86::f32x8& r7) {
  using x86::f32x8;
  const f32x8 t0 = x86::unpack_low(r0, r1), t1 = x86::unpack_high(r0, r1), t2 = x86::unpack_low(r2, r3),
              t3 = x86::unpack_high(r2, r3), t4 = x86::unpack_low(r4, r5), t5 = x86::unpack_high(r4, r5),
              t6 = x86::unpack_low(r6, r7), t7 = x86::unpack_high(r6, r7);
  const f32x8 u0 = x86::pairs_low(t0, t2), u1 = x86::pairs_high(t0, t2), u2 = x86::pairs_low(t1, t3),
              u3 = x86::pairs_high(t1, t3), u4 = x86::pairs_low(t4, t6), u5 = x86::pairs_high(t4, t6),
              u6 = x86::pairs_low(t5, t7), u7 = x86::pairs_high(t5, t7);
  r0 = x86::halves_low(u0, u4);
  r1 = x86::halves_low(u1, u5);
  r2 = x86::halves_low(u2, u6);
  r3 = x86::halves_low(u3, u7);
  r4 = x86::halves_high(u0, u4);
  r5 = x86::halves_high(u1, u5);
  r6 = x86::halves_high(u2, u6);
  r7 = x86::halves_high(u3, u7);
}

/// Packs 16 float32 rows (row j at rows + j·stride) over kc depths into one B micro-panel: out[p·16 + j] =
/// row j's element p. out must be 32-byte aligned. A copy: the packed values are the rows' bits.
__attribute__((target("avx2"))) inline void gemm_pack_b_rows_avx2(const float* rows, Index stride, Index kc,
                                                                   float* out) {
  Index p = 0;
  for (; p + 8 <= kc; p += 8)
    for (Index half = 0; half < 2; ++half) {
      const float* r = rows + half * 8 * stride + p;
      x86::f32x8 v0 = x86::load8(r), v1 = x86::load8(r + stride), v2 = x86::load8(r + 2 * stride),
                 v3 = x86::load8(r + 3 * stride), v4 = x86::load8(r + 4 * stride), v5 = x86::load8(r + 5 * stride),
                 v6 = x86::load8(r + 6 * stride), v7 = x86::load8(r + 7 * stride);
      gemm_transpose8(v0, v1, v2, v3, v4, v5, v6, v7);
      float* o = out + p * gemm_nr + half * 8;
      x86::store8_aligned(o, v0);
      x86::store8_aligned(o + gemm_nr, v1);
      x86::store8_aligned(o + 2 * gemm_nr, v2);
      x86::store8_aligned(o + 3 * gemm_nr, v3);
      x86::store8_aligned(o + 4 * gemm_nr, v4);
      x86::store8_aligned(o + 5 * gemm_nr, v5);
      x86::store8_aligned(o + 6 * gemm_nr, v6);
      x86::store8_aligned(o + 7 * gemm_nr, v7);
    }
  const Index tail = kc - p;  // fewer than 8 depths
  for (Index t = 0; t < tail; ++t)
    for (Index j = 0; j < gemm_nr; ++j) out[(p + t) * gemm_nr + j] = rows[j * stride + p + t];
}

/// Packs 6 float32 rows (row i at rows + i·stride) over kc depths into one A micro-panel: out[p·6 + i] = row i's
/// element p. A copy: the packed values are the rows' bits.
__attribute__((target("avx2"))) inline void gemm_pack_a_rows_avx2(const float* rows, Index stride, Index kc,
                                                                   float* out) {
  Index p = 0;
  for (; p + 8 <= kc; p += 8) {
    const float* r = rows + p;
    x86::f32x8 v0 = x86::load8(r), v1 = x86::load8(r + stride), v2 = x86::load8(r + 2 * stride),
               v3 = x86::load8(r + 3 * stride), v4 = x86::load8(r + 4 * stride), v5 = x86::load8(r + 5 * stride),
               v6{}, v7{};
    gemm_transpose8(v0, v1, v2, v3, v4, v5, v6, v7);
    const x86::f32x8 columns[8] = {v0, v1, v2, v3, v4, v5, v6, v7};
    float* o = out + p * gemm_mr;
    for (Index q = 0; q < 8; ++q, o += gemm_mr) {  // lanes 0-5 of each: the six rows at depth p + q
      x86::store4(o, columns[q]);
      x86::store_lanes_4_5(o + 4, columns[q]);
    }
  }
  for (; p < kc; ++p)
    for (Index i = 0; i < gemm_mr; ++i) out[p * gemm_mr + i] = rows[i * stride + p];
}
#else
inline bool gemm_avx2_available() { return false; }
inline bool gemm_avx512_available() { return false; }
#endif

/// The tile loop of a packed product for one depth block, on tiles of Panels (1 or 2) B micro-panels side by side: runs
/// the micro-kernel on the 6 × 16·Panels tile whose A rows start at `row` — micro(row, b, c, ldc, write) with Panels 1,
/// micro(row, b0, b1, c, ldc, write) with Panels 2 (b1 null for a last, odd panel) — over a block of rows × cols of c
/// (row stride ldc), B's 16-column micro-panel t given by b_panel(t) and covering columns [16t − shift, 16t − shift + 16)
/// of c (0 ≤ shift < 16; columns outside [0, cols) are computed and dropped). Full tiles go straight to c; the others
/// through a 6 × 16·Panels buffer (with add, loaded from c first), of which only the part inside the block is copied
/// back. Returns whether every element it wrote is finite (micro returns that for its tile; for buffered tiles only
/// the copied part counts: the padding's zero rows times a non-finite value may be NaN).
template <int Panels = 1, class BPanel, class Micro>
bool gemm_tiles(Index rows, Index cols, Index shift, BPanel b_panel, Micro micro, float* c, Index ldc,
                GemmWrite write) {
  static_assert(Panels == 1 || Panels == 2, "gemm_tiles: tiles of one or two micro-panels");
  constexpr Index width = Panels * gemm_nr;
  const Index panels = (cols + shift + gemm_nr - 1) / gemm_nr;
  bool finite = true;
  for (Index t = 0; t < panels; t += Panels) {
    const float* b0 = b_panel(t);
    const float* b1 = Panels == 2 && t + 1 < panels ? b_panel(t + 1) : nullptr;
    const auto run = [&](Index row, float* target, Index ld, GemmWrite w) {
      if constexpr (Panels == 1)
        return micro(row, b0, target, ld, w);
      else
        return micro(row, b0, b1, target, ld, w);
    };
    const Index column = t * gemm_nr - shift;
    const Index lo = std::max<Index>(0, -column), hi = std::min<Index>(b1 ? width : gemm_nr, cols - column);
    for (Index row = 0; row < rows; row += gemm_mr) {
      const Index mr = std::min(gemm_mr, rows - row);
      float* target = c + row * ldc + column;
      if (mr == gemm_mr && lo == 0 && hi == width) {
        finite = run(row, target, ldc, write) && finite;
        continue;
      }
      float tile[gemm_mr * width] = {};
      if (write == GemmWrite::add)
        for (Index i = 0; i < mr; ++i) std::copy(target + i * ldc + lo, target + i * ldc + hi, tile + i * width + lo);
      run(row, tile, width, write);
      for (Index i = 0; i < mr; ++i) {
        std::copy(tile + i * width + lo, tile + i * width + hi, target + i * ldc + lo);
        for (Index j = lo; j < hi; ++j) finite = finite && std::isfinite(tile[i * width + j]);
      }
    }
  }
  return finite;
}

}  // namespace attnscope::kernels::detail
