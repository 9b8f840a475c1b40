// attnscope/kernels/gemm.hpp — the packed single-precision product of activations with a stored weight matrix,
// y = x·Wᵀ or y += x·Wᵀ (x: m × k float32 rows; W: n × k in any kernels::StoredFloat format, stored as W or as Wᵀ),
// the weight products of the forward pass (model/detail/linear.hpp).
//
// Blocking (Goto and van de Geijn, "Anatomy of high-performance matrix multiplication", ACM TOMS 34(3), 2008; BLIS's
// loop order, Van Zee and van de Geijn, ACM TOMS 41(3), 2015): the n output columns (W's rows) are cut into blocks
// of at most gemm_column_block columns, the depth into blocks of gemm_depth_block = 256; for each (column block,
// depth block) the weights are packed into 16-column micro-panels (kc × 16 floats, converted from their stored format
// by kernels::widen while packing, so no float32 copy of W exists), then the activations, gemm_row_block rows at a
// time, into 6-row micro-panels (kc × 6), and a micro-kernel (kernels/detail/gemm_micro.hpp) updates each 6 × 16 tile
// of y, or with AVX-512 each 6 × 32 tile of two micro-panels (the tile loop kernels::detail::gemm_tiles, shared with
// the attention kernel's products). Tiles at the edges run the same micro-kernel on zero-padded panels through a
// buffer. With AVX2 (and so with AVX-512), full
// panels of float32 rows are packed by 8 × 8 transposes in registers (a copy: the same values as the scalar packing).
// The micro-kernel reports whether the tile it wrote is finite, so the caller learns whether y holds a non-finite
// value without a second pass over y.
//
// Rounding (the contract tests/kernels/test_gemm.cpp checks): element (i, j) of y is, in float32,
//   y₀ + s₀ + s₁ + … (left to right), with s_b = the fused multiply-add chain over depth block b (in depth order,
//   from 0) and y₀ = y(i, j) for y += x·Wᵀ, nothing for y = x·Wᵀ (then s₀ + s₁ + …).
// It depends on the depth k only: not on m, on which rows or columns a call covers, on the column blocks, nor on
// the number of threads; the AVX-512, AVX2 and scalar reference micro-kernels give the same bits.
//
// Threads: with OpenMP the columns are split into one contiguous range of 16-column panels per thread
// (attnscope::detail::for_each_row); each thread packs its own weights and activations.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <vector>

#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/gemm_micro.hpp"
#include "attnscope/kernels/widen.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnscope::kernels {

/// A weight matrix W (rows × cols, an nn.Linear weight: out × in) as stored in memory. Not transposed: row r starts
/// at data + r·row_bytes and holds cols elements of `format` (a block format: whole blocks). Transposed: the bytes
/// hold Wᵀ (cols × rows, float formats only), row c of Wᵀ at data + c·row_bytes, element (r, c) at
/// data + c·row_bytes + r·stored_float_size(format).
struct StoredWeights {
  const unsigned char* data = nullptr;
  StoredFloat format = StoredFloat::float32;
  Index rows = 0;
  Index cols = 0;
  std::size_t row_bytes = 0;
  bool transposed = false;
};

/// Which micro-kernel gemm_xwt runs: `automatic` (AVX-512F when the running CPU has it, else AVX2 + FMA when it has
/// them, else the reference), `avx512` (only when gemm_avx512_available()), `avx2` (only when gemm_avx2_available()),
/// or the scalar `reference`. They give the same bits.
enum class GemmKernel { automatic, avx2, reference, avx512 };

/// Whether the AVX2 + FMA micro-kernel can run here (x86-64 with GCC or Clang, and a CPU with AVX2 and FMA).
inline bool gemm_avx2_available() { return detail::gemm_avx2_available(); }

/// Whether the AVX-512F micro-kernel can run here (x86-64 with GCC or Clang, and a CPU with AVX-512F, AVX2 and FMA).
inline bool gemm_avx512_available() { return detail::gemm_avx512_available(); }

/// The micro-kernel `automatic` resolves to on this CPU: avx512, avx2 or reference.
inline GemmKernel gemm_best_kernel() {
  if (gemm_avx512_available()) return GemmKernel::avx512;
  return gemm_avx2_available() ? GemmKernel::avx2 : GemmKernel::reference;
}

/// The name of a micro-kernel ("automatic", "avx2", "avx512", "reference"), for reports and benchmark labels.
inline const char* gemm_kernel_name(GemmKernel kernel) {
  switch (kernel) {
    case GemmKernel::automatic: return "automatic";
    case GemmKernel::avx2: return "avx2";
    case GemmKernel::avx512: return "avx512";
    case GemmKernel::reference: break;
  }
  return "reference";
}

/// Depth (k) per block: a multiple of every block format's block (32 and 256 elements).
inline constexpr Index gemm_depth_block = 256;
/// Activation rows packed per block (28 micro-panels of 6 rows: 168 × 256 floats, 168 KiB, stay in L2).
inline constexpr Index gemm_row_block = 168;
/// Output columns (weight rows) per packed weight block at most (4096 × 256 floats, 4 MiB: in L3).
inline constexpr Index gemm_column_block = 4096;

/// Options of gemm_xwt: the micro-kernel, and the number of column ranges (0: one per OpenMP thread; results never
/// depend on it).
struct GemmOptions {
  GemmKernel kernel = GemmKernel::automatic;
  Index parts = 0;
};

namespace detail {

/// Per-thread packing buffers (64-byte aligned panels: a depth step of a B micro-panel is one cache line).
struct GemmBuffers {
  std::vector<float> a, b, row;
  static float* aligned(std::vector<float>& storage, Index count) {
    if (storage.size() < static_cast<std::size_t>(count + 16)) storage.resize(static_cast<std::size_t>(count + 16));
    const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    return storage.data() + ((64 - address % 64) % 64) / sizeof(float);
  }
};

inline GemmBuffers& gemm_buffers() {
  thread_local GemmBuffers buffers;
  return buffers;
}

/// Packs W's rows [first, first + count) and depths [depth, depth + kc) into ⌈count / 16⌉ micro-panels of kc × 16
/// floats (zero columns past count), converting from the stored format; with `avx2` (the CPU has it), full panels of
/// float32 rows are transposed eight by eight in registers. Every path copies the same values.
inline void gemm_pack_weights(const StoredWeights& w, Index first, Index count, Index depth, Index kc, float* packed,
                              GemmBuffers& buffers, bool avx2) {
  const Index panels = (count + gemm_nr - 1) / gemm_nr;
  const bool float32 = w.format == StoredFloat::float32;
  if (w.transposed) {
    const std::size_t element = stored_float_size(w.format);
    for (Index panel = 0; panel < panels; ++panel) {
      const Index column = first + panel * gemm_nr, width = std::min(gemm_nr, first + count - column);
      float* out = packed + panel * kc * gemm_nr;
      const unsigned char* source = w.data + static_cast<std::size_t>(depth) * w.row_bytes +
                                    static_cast<std::size_t>(column) * element;
      if (float32 && width == gemm_nr) {  // a full panel of float32: one 64-byte copy per depth step
        for (Index p = 0; p < kc; ++p, out += gemm_nr, source += w.row_bytes)
          std::memcpy(out, source, sizeof(float) * gemm_nr);
        continue;
      }
      for (Index p = 0; p < kc; ++p, out += gemm_nr, source += w.row_bytes) {
        widen(source, w.format, width, out);
        std::fill(out + width, out + gemm_nr, 0.0f);
      }
    }
    return;
  }
  float* row = GemmBuffers::aligned(buffers.row, kc);
  const std::size_t depth_bytes = stored_bytes(w.format, depth);
  for (Index panel = 0; panel < panels; ++panel) {
    float* out = packed + panel * kc * gemm_nr;
#if defined(ATTNSCOPE_GEMM_AVX2)
    // (float32 rows at float alignment only: a memory-mapped file may hold its tensors at any byte offset)
    if (avx2 && float32 && (panel + 1) * gemm_nr <= count && w.row_bytes % sizeof(float) == 0 &&
        reinterpret_cast<std::uintptr_t>(w.data) % alignof(float) == 0) {
      const auto* rows = reinterpret_cast<const float*>(w.data + static_cast<std::size_t>(first + panel * gemm_nr) *
                                                                     w.row_bytes) + depth;
      gemm_pack_b_rows_avx2(rows, static_cast<Index>(w.row_bytes / sizeof(float)), kc, out);
      continue;
    }
#endif
    (void)avx2;
    for (Index j = 0; j < gemm_nr; ++j) {
      const Index r = first + panel * gemm_nr + j;
      if (r >= first + count) {
        for (Index p = 0; p < kc; ++p) out[p * gemm_nr + j] = 0.0f;
        continue;
      }
      widen(w.data + static_cast<std::size_t>(r) * w.row_bytes + depth_bytes, w.format, kc, row);
      for (Index p = 0; p < kc; ++p) out[p * gemm_nr + j] = row[p];
    }
  }
}

/// Packs x's rows [first, first + count) and depths [depth, depth + kc) into ⌈count / 6⌉ micro-panels of kc × 6
/// floats (zero rows past count); with `avx2`, full panels are transposed in registers (the same values).
inline void gemm_pack_activations(const float* x, Index x_stride, Index first, Index count, Index depth, Index kc,
                                  float* packed, bool avx2) {
  for (Index panel = 0; panel * gemm_mr < count; ++panel) {
    float* out = packed + panel * kc * gemm_mr;
#if defined(ATTNSCOPE_GEMM_AVX2)
    if (avx2 && (panel + 1) * gemm_mr <= count) {
      gemm_pack_a_rows_avx2(x + (first + panel * gemm_mr) * x_stride + depth, x_stride, kc, out);
      continue;
    }
#endif
    (void)avx2;
    for (Index i = 0; i < gemm_mr; ++i) {
      const Index r = panel * gemm_mr + i;
      if (r >= count) {
        for (Index p = 0; p < kc; ++p) out[p * gemm_mr + i] = 0.0f;
        continue;
      }
      const float* source = x + (first + r) * x_stride + depth;
      for (Index p = 0; p < kc; ++p) out[p * gemm_mr + i] = source[p];
    }
  }
}

/// y (+)= x·Wᵀ for W's rows (y's columns) [first, last), every row of x, with micro-kernel `micro` on tiles of Panels
/// micro-panels (the Micro of gemm_tiles, taking the depth kc and the packed A micro-panel first); returns whether
/// every element of y it computed is finite (read from the tiles as the last depth block writes them).
template <bool Add, int Panels, class Micro>
bool gemm_columns(Index m, const float* x, Index x_stride, const StoredWeights& w, float* y, Index y_stride,
                  Index first, Index last, Micro micro, bool avx2) {
  GemmBuffers& buffers = gemm_buffers();
  const Index k = w.cols;
  bool finite = true;
  for (Index column = first; column < last; column += gemm_column_block) {
    const Index nc = std::min(gemm_column_block, last - column), panels = (nc + gemm_nr - 1) / gemm_nr;
    for (Index depth = 0; depth < k; depth += gemm_depth_block) {
      const Index kc = std::min(gemm_depth_block, k - depth);
      float* packed_w = GemmBuffers::aligned(buffers.b, panels * gemm_nr * kc);
      gemm_pack_weights(w, column, nc, depth, kc, packed_w, buffers, avx2);
      const GemmWrite write = !Add && depth == 0 ? GemmWrite::store : GemmWrite::add;
      const bool last_depth = depth + kc == k;
      for (Index row = 0; row < m; row += gemm_row_block) {
        const Index mc = std::min(gemm_row_block, m - row), row_panels = (mc + gemm_mr - 1) / gemm_mr;
        float* packed_x = GemmBuffers::aligned(buffers.a, row_panels * gemm_mr * kc);
        gemm_pack_activations(x, x_stride, row, mc, depth, kc, packed_x, avx2);
        // the tile's B panels, C, ldc and write as gemm_tiles<Panels> passes them, after the depth and A
        const bool tiles_finite = gemm_tiles<Panels>(
            mc, nc, 0, [&](Index t) { return packed_w + t * kc * gemm_nr; },
            [&](Index r, auto... tile) { return micro(kc, packed_x + r * kc, tile...); }, y + row * y_stride + column,
            y_stride, write);
        if (last_depth) finite = finite && tiles_finite;
      }
    }
  }
  return finite;
}

/// One column range per OpenMP thread; one inside a parallel region (also an inactive one of one thread).
inline Index gemm_default_parts() {
#if defined(_OPENMP)
  return omp_get_level() > 0 ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace detail

/// y (+)= x·Wᵀ: x is m × w.cols (row i at x + i·x_stride), y is m × w.rows (row i at y + i·y_stride); with Add, y += x·Wᵀ,
/// else y = x·Wᵀ. Rounding as in the header comment. Returns whether every element of y (its m × rows block) is
/// finite afterwards, checked on the tiles as they are written (no second pass over y). O(m · rows · cols) flops;
/// packing O((m + rows) · cols) per column range. The caller checks the shapes; kernel = avx2 requires
/// gemm_avx2_available(), kernel = avx512 gemm_avx512_available().
template <bool Add>
bool gemm_xwt(Index m, const float* x, Index x_stride, const StoredWeights& w, float* y, Index y_stride,
              const GemmOptions& options = {}) {
  const Index n = w.rows, k = w.cols;
  if (m <= 0 || n <= 0) return true;
  if (k <= 0) {
    bool finite = true;
    for (Index i = 0; i < m; ++i) {
      if (!Add) std::fill(y + i * y_stride, y + i * y_stride + n, 0.0f);
      for (Index j = 0; j < n; ++j) finite = finite && std::isfinite(y[i * y_stride + j]);
    }
    return finite;
  }
  const GemmKernel kernel = options.kernel == GemmKernel::automatic ? gemm_best_kernel() : options.kernel;
  const bool avx2 = kernel != GemmKernel::reference;  // (every AVX-512 CPU has AVX2: its packing transposes)
  const Index panels = (n + detail::gemm_nr - 1) / detail::gemm_nr;
  const Index parts = std::clamp<Index>(options.parts > 0 ? options.parts : detail::gemm_default_parts(), 1, panels);
  std::vector<unsigned char> finite(static_cast<std::size_t>(parts), 1);  // per column range
  attnscope::detail::for_each_row(parts, m * k * (n / parts + 1), [&](Index part) {
    const Index first = std::min(n, part * panels / parts * detail::gemm_nr);
    const Index last = std::min(n, (part + 1) * panels / parts * detail::gemm_nr);
#if defined(ATTNSCOPE_GEMM_AVX2)
    if (kernel == GemmKernel::avx512) {
      const auto micro = [](Index kc, const float* a, const float* b0, const float* b1, float* c, Index ldc,
                            detail::GemmWrite write) { return detail::gemm_micro_avx512(kc, a, b0, b1, c, ldc, write); };
      finite[std::size_t(part)] =
          detail::gemm_columns<Add, 2>(m, x, x_stride, w, y, y_stride, first, last, micro, true);
      return;
    }
    if (kernel == GemmKernel::avx2) {
      const auto micro = [](Index kc, const float* a, const float* b, float* c, Index ldc, detail::GemmWrite write) {
        return detail::gemm_micro_avx2(kc, a, b, c, ldc, write);
      };
      finite[std::size_t(part)] =
          detail::gemm_columns<Add, 1>(m, x, x_stride, w, y, y_stride, first, last, micro, true);
      return;
    }
#endif
    (void)avx2;
    const auto micro = [](Index kc, const float* a, const float* b, float* c, Index ldc, detail::GemmWrite write) {
      return detail::gemm_micro_reference(kc, a, b, c, ldc, write);
    };
    finite[std::size_t(part)] = detail::gemm_columns<Add, 1>(m, x, x_stride, w, y, y_stride, first, last, micro, false);
  });
  return std::all_of(finite.begin(), finite.end(), [](unsigned char f) { return f != 0; });
}

}  // namespace attnscope::kernels
