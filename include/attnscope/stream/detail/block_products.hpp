// attnscope/stream/detail/block_products.hpp — the two products of the blockwise attention kernel, S = scale·Q·Kᵀ and
// O = P·V for one block of query rows, and the block-logits function shared with analysis::compare_models.
//
// Float32 on a CPU with AVX2 + FMA: the micro-kernels and tile loop of kernels/gemm.hpp (6 × 16 tiles, 6 × 32 with
// AVX-512F; kernels/detail/gemm_micro.hpp) on keys and values packed once per head (BlockKeys, PackedValues: every block of
// queries reads the same panels), the block's queries packed once per block and depth block, and the probability
// rows of P·V read in place (kernels::detail::RowPointersA). Depth is cut into blocks of
// kernels::gemm_depth_block from the product's first depth index, the first block stored and the others added, so
// every element has the rounding contract of kernels::gemm_xwt (its value does not depend on the block of rows, on
// the tile nor on the thread). Other scalars and CPUs: Eigen's GEMM in chunks of gemm_rows rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/gemm.hpp"
#include "attnscope/stream/detail/reduce_row.hpp"

namespace attnscope::stream::detail {

/// 64-byte aligned float storage for packed panels (grown, never shrunk; the pointer changes when it grows).
struct PanelBuffer {
  std::vector<float> storage;
  float* reserve(Index count) { return kernels::detail::GemmBuffers::aligned(storage, count); }
};

/// Whether the products of Scalar run on the packed micro-kernel here.
template <class Scalar>
bool packed_block_products() {
  return std::is_same<Scalar, float>::value && kernels::gemm_avx2_available();
}

/// Row-major float32 operand as the packing routines of kernels/gemm.hpp read it: `rows` rows of `cols` floats.
inline kernels::StoredWeights stored_rows(const float* data, Index rows, Index cols, Index stride, bool transposed) {
  return kernels::StoredWeights{reinterpret_cast<const unsigned char*>(data), kernels::StoredFloat::float32, rows, cols,
                                static_cast<std::size_t>(stride) * sizeof(float), transposed};
}

/// The tile loop of kernels/gemm.hpp (kernels::detail::gemm_tiles) over one depth block of kc with the widest
/// micro-kernel here: AVX-512F on 6 × 32 tiles, else AVX2 + FMA on 6 × 16 tiles, else the scalar reference where
/// neither is compiled (all give the same bits). a_at(row) gives the A cursor (kernels::detail::PackedRowsA or
/// RowPointersA) of the tile's six rows; finish(tile, ldc, columns) runs on each finished tile while it is in L1.
template <class BPanel, class ACursorAt, class Finish>
bool block_tiles(Index kc, Index rows, Index cols, Index shift, BPanel b_panel, ACursorAt a_at, Finish finish, float* c,
                 Index ldc, kernels::detail::GemmWrite write) {
  using kernels::detail::GemmWrite;
  using kernels::detail::gemm_nr;
#if defined(ATTNSCOPE_GEMM_AVX2)
  if (kernels::gemm_avx512_available())
    return kernels::detail::gemm_tiles<2>(
        rows, cols, shift, b_panel,
        [&](Index row, const float* b0, const float* b1, float* tile, Index ld, GemmWrite w) {
          const bool finite = kernels::detail::gemm_micro_avx512(kc, a_at(row), b0, b1, tile, ld, w);
          finish(tile, ld, b1 ? 2 * gemm_nr : gemm_nr);
          return finite;
        },
        c, ldc, write);
#endif
  return kernels::detail::gemm_tiles<1>(
      rows, cols, shift, b_panel,
      [&](Index row, const float* b, float* tile, Index ld, GemmWrite w) {
#if defined(ATTNSCOPE_GEMM_AVX2)
        const bool finite = kernels::detail::gemm_micro_avx2(kc, a_at(row), b, tile, ld, w);
#else
        const bool finite = kernels::detail::gemm_micro_reference(kc, a_at(row), b, tile, ld, w);
#endif
        finish(tile, ld, gemm_nr);
        return finite;
      },
      c, ldc, write);
}

/// A finish for block_tiles that does nothing.
struct NoFinish {
  void operator()(float*, Index, Index) const {}
};

/// Per-thread scratch of the block products: the block's packed queries or probabilities.
struct BlockProductScratch {
  PanelBuffer rows;
};

/// The keys of one head for scale·Q·Kᵀ: float32 with AVX2 + FMA, packed once (per depth block, ⌈keys/16⌉ micro-panels
/// of kc × 16 floats, kernels::detail::gemm_pack_weights) for every block of queries; otherwise a view read by Eigen.
/// The key rows must outlive this object.
template <class Scalar>
class BlockKeys {
 public:
  /// keys: `count` rows of `depth` scalars, row r at keys + r·stride.
  void assign(const Scalar* keys, Index count, Index depth, Index stride) {
    keys_ = keys, count_ = count, depth_ = depth, stride_ = stride;
    packed_ = packed_block_products<Scalar>() && count > 0;
    if constexpr (std::is_same<Scalar, float>::value) {
      if (!packed_) return;
      const Index panels = (count + kernels::detail::gemm_nr - 1) / kernels::detail::gemm_nr;
      float* out = panels_.reserve(panels * kernels::detail::gemm_nr * depth);
      base_ = out;
      const kernels::StoredWeights w = stored_rows(keys, count, depth, stride, false);
      for (Index d0 = 0; d0 < depth; d0 += kernels::gemm_depth_block) {
        const Index kc = std::min(kernels::gemm_depth_block, depth - d0);
        kernels::detail::gemm_pack_weights(w, 0, count, d0, kc, out + panels * kernels::detail::gemm_nr * d0,
                                           kernels::detail::gemm_buffers(), kernels::gemm_avx2_available());
      }
    }
  }
  Index count() const { return count_; }
  Index depth() const { return depth_; }

  /// strip[r·stride + c] = scale·q_r·k_{first + c} for r < rows, c < end − first (queries: row r at
  /// queries + r·query_stride), then s ↦ c·tanh(s/c) with the softcap c when set (Gemma 2 report, §2).
  void logits(const Scalar* queries, Index query_stride, Index rows, Index first, Index end, Scalar scale,
              const std::optional<double>& softcap, Scalar* strip, Index stride, BlockProductScratch& scratch) const {
    const Index width = end - first;
    if (rows <= 0 || width <= 0) return;
    if constexpr (std::is_same<Scalar, float>::value) {
      if (packed_) {
        using kernels::detail::gemm_mr;
        using kernels::detail::gemm_nr;
        const Index panels = (count_ + gemm_nr - 1) / gemm_nr;
        const Index row_panels = (rows + gemm_mr - 1) / gemm_mr;
        // a power-of-two scale multiplies the packed queries: every rounding of the products commutes with it, so the
        // logits are bitwise those of the product times the scale (outside the subnormal range) without a pass over
        // the strip [derived]
        int exponent = 0;
        const bool exact_scale = std::frexp(scale, &exponent) == 0.5f;
        // any other scale, and the softcap c·tanh(s/c), on each finished tile: the float32 dot product rounded, times
        // the scale
        const float cap = softcap ? static_cast<float>(*softcap) : 1.0f;
        for (Index d0 = 0; d0 < depth_; d0 += kernels::gemm_depth_block) {
          const Index kc = std::min(kernels::gemm_depth_block, depth_ - d0);
          float* a = scratch.rows.reserve(row_panels * gemm_mr * kc);
          kernels::detail::gemm_pack_activations(queries, query_stride, 0, rows, d0, kc, a, kernels::gemm_avx2_available());
          if (exact_scale)
            Eigen::Map<Eigen::ArrayXf>(a, row_panels * gemm_mr * kc) *= scale;
          const float* block = base_ + panels * gemm_nr * d0;
          const bool last = d0 + kc == depth_;
          const Index first_panel = first / gemm_nr;
          block_tiles(
              kc, rows, width, first - first_panel * gemm_nr,
              [&](Index t) { return block + (first_panel + t) * kc * gemm_nr; },
              [&](Index row) { return kernels::detail::PackedRowsA{a + row * kc}; },
              [&](float* c, Index ldc, Index columns) {
                if (last && (softcap || !exact_scale))  // the finished tile while it is in L1
                  for (Index i = 0; i < gemm_mr; ++i) {
                    Eigen::Map<Eigen::ArrayXf> tile_row(c + i * ldc, columns);
                    if (!exact_scale) tile_row *= scale;
                    if (softcap) tile_row = cap * (tile_row / cap).tanh();
                  }
              },
              strip, stride, d0 == 0 ? kernels::detail::GemmWrite::store : kernels::detail::GemmWrite::add);
        }
        return;
      }
    }
    using StripChunk = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor, gemm_rows>;
    using ConstRows = Eigen::Map<const RowMatrix<Scalar>, 0, Eigen::OuterStride<>>;
    const ConstRows keys(keys_ + first * stride_, width, depth_, Eigen::OuterStride<>(stride_));
    for (Index chunk = 0; chunk < rows; chunk += gemm_rows) {
      const Index chunk_rows = std::min<Index>(gemm_rows, rows - chunk);
      Eigen::Map<StripChunk, 0, Eigen::OuterStride<>> block(strip + chunk * stride, chunk_rows, width,
                                                           Eigen::OuterStride<>(stride));
      const ConstRows q(queries + chunk * query_stride, chunk_rows, depth_, Eigen::OuterStride<>(query_stride));
      block.noalias() = scale * (q * keys.transpose());
      if (softcap) {  // s ↦ c·tanh(s/c)
        const Scalar cap = static_cast<Scalar>(*softcap);
        block.array() = cap * (block.array() / cap).tanh();
      }
    }
  }

 private:
  const Scalar* keys_ = nullptr;
  Index count_ = 0, depth_ = 0, stride_ = 0;
  bool packed_ = false;
  const float* base_ = nullptr;
  PanelBuffer panels_;
};

/// The values of one head for O = P·V (float32 with AVX2 + FMA): ⌈dv/16⌉ micro-panels of keys × 16 floats
/// ([panel][key][16], kernels::detail::gemm_pack_weights of Vᵀ), packed once for every block of queries.
class PackedValues {
 public:
  void assign(const float* values, Index keys, Index value_cols, Index stride) {
    keys_ = keys, cols_ = value_cols;
    const Index panels = (value_cols + kernels::detail::gemm_nr - 1) / kernels::detail::gemm_nr;
    base_ = panels_.reserve(panels * kernels::detail::gemm_nr * keys);
    kernels::detail::gemm_pack_weights(stored_rows(values, value_cols, keys, stride, true), 0, value_cols, 0, keys,
                                       base_, kernels::detail::gemm_buffers(), kernels::gemm_avx2_available());
  }

  /// out[r·out_stride + c] = Σ_{t < n} p[r·p_stride + t]·v_{first + t, c} for r < rows, c < dv, by depth blocks of
  /// kernels::gemm_depth_block from key `first` (the rounding of kernels::gemm_xwt on the same operands).
  void product(const float* p, Index p_stride, Index rows, Index first, Index n, float* out, Index out_stride,
               BlockProductScratch& scratch) const {
    using kernels::detail::gemm_mr;
    using kernels::detail::gemm_nr;
    for (Index d0 = 0; d0 < n; d0 += kernels::gemm_depth_block) {
      const Index kc = std::min(kernels::gemm_depth_block, n - d0);
      const float* block = base_ + (first + d0) * gemm_nr;
      const auto b_panel = [&](Index t) { return block + t * keys_ * gemm_nr; };
      const kernels::detail::GemmWrite write = d0 == 0 ? kernels::detail::GemmWrite::store
                                                       : kernels::detail::GemmWrite::add;
#if defined(ATTNSCOPE_GEMM_AVX2)
      (void)scratch;
      // the probability rows read in place (rows past the block repeat its last row; their tile rows are dropped)
      block_tiles(
          kc, rows, cols_, 0, b_panel,
          [&](Index row) {
            kernels::detail::RowPointersA a;
            for (Index i = 0; i < gemm_mr; ++i) a.rows[i] = p + std::min(row + i, rows - 1) * p_stride + d0;
            return a;
          },
          NoFinish{}, out, out_stride, write);
#else
      const Index row_panels = (rows + gemm_mr - 1) / gemm_mr;
      float* a = scratch.rows.reserve(row_panels * gemm_mr * kc);
      kernels::detail::gemm_pack_activations(p, p_stride, 0, rows, d0, kc, a, kernels::gemm_avx2_available());
      block_tiles(
          kc, rows, cols_, 0, b_panel, [&](Index row) { return kernels::detail::PackedRowsA{a + row * kc}; },
          NoFinish{}, out, out_stride, write);
#endif
    }
  }

 private:
  Index keys_ = 0, cols_ = 0;
  float* base_ = nullptr;
  PanelBuffer panels_;
};

}  // namespace attnscope::stream::detail
