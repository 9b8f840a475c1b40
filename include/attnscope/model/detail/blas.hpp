// attnscope/model/detail/blas.hpp — the optional BLAS backend of the float32 weight products: with ATTNSCOPE_BLAS
// defined (and a CBLAS such as OpenBLAS or BLIS linked; the CMake option ATTNSCOPE_BLAS=OpenBLAS does both for our
// programs), model/detail/linear.hpp hands each product y (+)= x·Wᵀ of a float32 weight to cblas_sgemm instead of
// Eigen's GEMM. Without the macro this header declares nothing that computes, includes no BLAS header, and every
// product stays Eigen's (header-only use is unchanged).
//
// Threads: the BLAS library's own (OPENBLAS_NUM_THREADS, or openblas_set_num_threads), not OpenMP's. Rounding: the
// BLAS kernel sums each output element over the depth in its own blocking, so results agree with Eigen's within
// float32 rounding, not bit for bit (docs/performance.md has the measured comparison and speed).
#pragma once

#include <climits>
#include <type_traits>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/widen.hpp"
#include "attnscope/model/weights.hpp"

#ifdef ATTNSCOPE_BLAS
#include <cblas.h>
#endif

namespace attnscope::model::detail {

/// Whether this build hands the float32 weight products to a CBLAS sgemm (ATTNSCOPE_BLAS defined).
#ifdef ATTNSCOPE_BLAS
inline constexpr bool blas_backend = true;
#else
inline constexpr bool blas_backend = false;
#endif

/// With ATTNSCOPE_BLAS: out (+)= x·Wᵀ by one cblas_sgemm for a float32 W (stored as W, or as Wᵀ when transposed),
/// x row-major (rows × in, unit inner stride), out a row-major block (rows × out features, unit inner stride);
/// returns true when it computed the product. Returns false (the caller runs Eigen's GEMM) without ATTNSCOPE_BLAS,
/// for another storage format, a column-major or strided output, or dimensions beyond the BLAS integer range.
template <bool Add, class Out>
bool blas_linear(Out& out, const RowMatrixView<float>& x, const WeightMatrix& w) {
#ifdef ATTNSCOPE_BLAS
  using Target = std::decay_t<Out>;
  if constexpr (!Target::IsRowMajor) {
    return false;
  } else {
    if (w.format() != kernels::StoredFloat::float32 || out.innerStride() != 1 || x.innerStride() != 1) return false;
    for (const Index size : {x.rows(), x.cols(), w.rows(), x.outerStride(), w.stride(), out.outerStride()})
      if (size > Index(INT_MAX)) return false;
    // leading dimensions as BLAS requires them (a single row may report any outer stride)
    const Index x_leading = x.rows() > 1 ? x.outerStride() : x.cols();
    const Index out_leading = x.rows() > 1 ? out.outerStride() : w.rows();
    if (x_leading < x.cols() || out_leading < w.rows()) return false;
    const float* weights = reinterpret_cast<const float*>(w.data());
    // row-major C = A·op(B): A = x (rows × in); B = W (out × in, op = transpose) or Wᵀ (in × out, op = none)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, w.transposed() ? CblasNoTrans : CblasTrans, int(x.rows()), int(w.rows()),
                int(x.cols()), 1.0f, x.data(), int(x_leading), weights, int(w.stride()), Add ? 1.0f : 0.0f,
                out.data(), int(out_leading));
    return true;
  }
#else
  (void)out;
  (void)x;
  (void)w;
  return false;
#endif
}

}  // namespace attnscope::model::detail
