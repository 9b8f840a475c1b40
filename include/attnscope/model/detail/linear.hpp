// attnscope/model/detail/linear.hpp — the one product of activations with a weight matrix: y = x·Wᵀ for an
// nn.Linear weight W (out_features × in_features), and the embedding lookups. Every projection of the forward pass
// goes through these functions, so how weights are stored (model::WeightMatrix) is a concern of this header only.
//
// How the product runs: on a CPU with AVX2 and FMA (checked at run time, so a generic x86-64 build uses it too), every
// product, in every storage format, is attnscope's packed GEMM (kernels/gemm.hpp): it converts W's float16,
// bfloat16 or block-quantized (the GGUF block formats of kernels::StoredFloat) elements to float32 while packing cache-sized panels
// (kernels::widen), so no float32 copy of a weight matrix exists, and splits the output columns among the OpenMP
// threads. With the optional BLAS backend (ATTNSCOPE_BLAS, model/detail/blas.hpp) a float32 W goes to cblas_sgemm
// instead. Elsewhere (no AVX2, a column-major or strided output) Eigen's GEMM runs: a float32 W in place in one call
// threaded by Eigen, other formats widened into per-thread panels of panel_width(in) rows of W, one Eigen product
// each, the panels shared among the OpenMP threads.
//
// Rounding: activations and accumulation are float32. The packed GEMM sums each output element in an order fixed by
// the depth alone (fused multiply-add chains over blocks of 256, added in order; kernels/gemm.hpp), so a product
// has the same bits for any number of threads, any split of the rows into calls (the feed-forward passes), and any
// storage format holding the same values (a bfloat16 W gives the bits of its widened float32 copy).
// tests/model/test_weight_storage.cpp checks these bits and the float32 error bound against Eigen's product. Eigen's
// fallback and cblas_sgemm block the depth their own way: they agree with it within float32 rounding.
//
// MatmulMode::llama_cpp (model/forward_options.hpp) changes the product for the weight formats llama.cpp's CPU
// backend multiplies by integer dot products and attnscope implements (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS; kernels::integer_dot_supported): x is rounded
// to 8 bits per block as ggml rounds it (kernels/quantize_activations.hpp) and multiplied by kernels::integer_dot_xwt,
// ggml's integer dot products and float32 scaling; y += x·Wᵀ adds the rounded product. Every other format (float32,
// float16, bfloat16, the block formats without an integer kernel here) keeps the exact product in both modes: for
// float16 llama.cpp rounds the activations to float16 instead, but attnscope's float32 product of float16 weights is
// already faster than llama.cpp's, so the exact path serves both.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/kernels/gemm.hpp"
#include "attnscope/kernels/integer_dot.hpp"
#include "attnscope/kernels/quantize_activations.hpp"
#include "attnscope/kernels/widen.hpp"
#include "attnscope/model/detail/blas.hpp"
#include "attnscope/model/forward_options.hpp"
#include "attnscope/model/weights.hpp"

namespace attnscope::model::detail {

/// Rows of W per panel of the product for a depth (in_features) of `depth`: 128, or 256 for depths ≥ 8192 (fewer
/// repacks of the activations per product); a function of the depth only, so results never depend on the threads.
inline Index panel_width(Index depth) { return depth >= 8192 ? 256 : 128; }

/// Throws attnscope::invalid_argument naming the weight and the first non-finite element of W, if it has one.
inline void require_finite_weight(const char* function, const WeightMatrix& w) {
  std::vector<float> row(static_cast<std::size_t>(w.cols()));
  for (Index r = 0; r < w.rows(); ++r) {
    w.widen_row(r, row.data());
    for (Index c = 0; c < w.cols(); ++c)
      if (!std::isfinite(row[std::size_t(c)]))
        attnscope::detail::throw_invalid_argument(function, "weight '", w.name(), "' (", w.rows(), "x", w.cols(), ", ",
                                                  kernels::stored_float_name(w.format()),
                                                  ") holds the non-finite value ", row[std::size_t(c)], " at (", r,
                                                  ", ", c, ")");
  }
}

/// out (+)= x·W_panelᵀ for W's rows [first, first + count) into out's columns [first, first + count). A float32 W
/// is read in place; other formats are widened or dequantized into `buffer`.
template <bool Add, class Out>
void linear_panel(Out& out, const RowMatrixView<float>& x, const WeightMatrix& w, Index first, Index count,
                  RowMatrix<float>& buffer) {
  using Stride = Eigen::OuterStride<>;
  auto target = out.middleCols(first, count);
  auto apply = [&](const auto& weight_transpose) {
    if (Add) target.noalias() += x * weight_transpose;
    else target.noalias() = x * weight_transpose;
  };
  const Index depth = w.cols();
  if (w.format() == kernels::StoredFloat::float32) {
    const float* base = reinterpret_cast<const float*>(w.data());
    if (w.transposed())  // the bytes hold Wᵀ (in × out) row by row: its columns [first, first + count)
      apply(Eigen::Map<const RowMatrix<float>, 0, Stride>(base + first, depth, count, Stride(w.stride())));
    else
      apply(Eigen::Map<const RowMatrix<float>, 0, Stride>(base + first * w.stride(), count, depth, Stride(w.stride()))
                .transpose());
    return;
  }
  if (w.transposed()) {
    buffer.resize(depth, count);
    for (Index i = 0; i < depth; ++i)
      kernels::widen(w.data() + w.byte_offset(first, i), w.format(), count, buffer.data() + i * count);
    apply(buffer);
  } else {
    buffer.resize(count, depth);
    for (Index r = 0; r < count; ++r)
      kernels::widen(w.data() + w.byte_offset(first + r, 0), w.format(), depth, buffer.data() + r * depth);
    apply(buffer.transpose());
  }
}

/// W as kernels::gemm_xwt reads it (its stored bytes, format and layout).
inline kernels::StoredWeights stored_weights(const WeightMatrix& w) {
  const std::size_t row_bytes = w.transposed() ? std::size_t(w.stride()) * kernels::stored_float_size(w.format())
                                               : kernels::stored_bytes(w.format(), w.stride());
  return kernels::StoredWeights{w.data(), w.format(), w.rows(), w.cols(), row_bytes, w.transposed()};
}

/// out (+)= x·Wᵀ by attnscope's packed GEMM (kernels/gemm.hpp) when the CPU has AVX2 and FMA and both x and out are
/// row-major with unit inner stride, setting out_finite to whether every element of out is finite; returns false
/// (nothing computed) otherwise.
template <bool Add, class Out>
bool packed_linear(Out& out, const RowMatrixView<float>& x, const WeightMatrix& w, bool& out_finite) {
  using Target = std::decay_t<Out>;
  if constexpr (!Target::IsRowMajor) {
    return false;
  } else {
    if (!kernels::gemm_avx2_available() || out.innerStride() != 1 || x.innerStride() != 1) return false;
    out_finite =
        kernels::gemm_xwt<Add>(x.rows(), x.data(), x.outerStride(), stored_weights(w), out.data(), out.outerStride());
    return true;
  }
}

/// out = a·b (a: rows × depth, b: depth × cols, both row-major float32 with unit inner stride) by the packed GEMM,
/// b read as the transposed storage of bᵀ, when the CPU has AVX2 and FMA and out is row-major with unit inner stride;
/// returns false (nothing computed) otherwise. The attention map path's P·V: with the summation order of the
/// streaming kernel's P·V (kernels/gemm.hpp), so zero weights past a row's keys leave its bits unchanged.
template <class Out, class Scalar>
bool packed_product(Out&& out, const RowMatrixView<Scalar>& a, const RowMatrixView<Scalar>& b) {
  using Target = std::decay_t<Out>;
  if constexpr (!Target::IsRowMajor || !std::is_same<Scalar, float>::value) {
    return false;
  } else {
    if (!kernels::gemm_avx2_available() || out.innerStride() != 1 || a.innerStride() != 1 || b.innerStride() != 1)
      return false;
    const kernels::StoredWeights w{reinterpret_cast<const unsigned char*>(b.data()), kernels::StoredFloat::float32,
                                   b.cols(), b.rows(), std::size_t(b.outerStride()) * sizeof(float), true};
    kernels::gemm_xwt<false>(a.rows(), a.data(), a.outerStride(), w, out.data(), out.outerStride());
    return true;
  }
}

/// out (+)= x·Wᵀ by llama.cpp's integer dot products (MatmulMode::llama_cpp, see the header comment), setting
/// out_finite to whether every element of out is finite; returns false (nothing computed) when W's format has no
/// integer kernel. Throws attnscope::invalid_argument naming the weight for a non-finite activation (8-bit integers
/// cannot carry it).
template <bool Add, class Out>
bool integer_dot_linear(Out& out, const RowMatrixView<float>& x, const WeightMatrix& w, bool& out_finite) {
  if (!kernels::integer_dot_supported(w.format()) || w.transposed()) return false;
  if (!x.allFinite())
    attnscope::detail::throw_invalid_argument("linear", "the activations multiplied by weight '", w.name(),
                                              "' (llama.cpp matmul) hold a non-finite value");
  thread_local kernels::QuantizedActivations quantized;  // (a RowMatrixView's rows are contiguous)
  kernels::quantize_activations(x.data(), x.rows(), x.cols(), x.outerStride(),
                                kernels::integer_dot_activation_format(w.format()), quantized);
  using Target = std::decay_t<Out>;
  if constexpr (Target::IsRowMajor) {
    if (out.innerStride() == 1) {
      out_finite = kernels::integer_dot_xwt<Add>(quantized, stored_weights(w), out.data(), out.outerStride());
      return true;
    }
  }
  RowMatrix<float> product(x.rows(), w.rows());
  kernels::integer_dot_xwt<false>(quantized, stored_weights(w), product.data(), product.cols());
  if (Add) out += product;
  else out = product;
  out_finite = out.allFinite();
  return true;
}

/// out (+)= x·Wᵀ (see the header comment). out is rows(x) × rows(W); x is rows × cols(W).
template <bool Add, class Out, class Derived>
void linear_product(Out&& out, const Eigen::MatrixBase<Derived>& x_expression, const WeightMatrix& w,
                    MatmulMode mode = MatmulMode::exact) {
  const char* fn = "linear";
  if (x_expression.cols() != w.cols() || out.rows() != x_expression.rows() || out.cols() != w.rows())
    attnscope::detail::throw_invalid_argument(fn, "x is ", x_expression.rows(), "x", x_expression.cols(), ", weight '",
                                              w.name(), "' ", w.rows(), "x", w.cols(), ", output ", out.rows(), "x",
                                              out.cols());
  const RowMatrixView<float> x(x_expression);
  const Index out_features = w.rows(), width = panel_width(w.cols());
  const Index panels = std::max<Index>(1, out_features / width);  // the last panel takes the remainder (< 2·width)
  bool packed = false, out_finite = true;
  if (mode == MatmulMode::llama_cpp && integer_dot_linear<Add>(out, x, w, out_finite)) {
    packed = true;  // llama.cpp's integer dot products computed it, and checked out's elements as they were written
  } else if (w.format() == kernels::StoredFloat::float32 && blas_linear<Add>(out, x, w)) {
    // the optional BLAS backend (model/detail/blas.hpp, ATTNSCOPE_BLAS) computed it
  } else if (packed_linear<Add>(out, x, w, out_finite)) {
    packed = true;  // attnscope's packed GEMM computed it, and checked out's elements as it wrote them
  } else if (w.format() == kernels::StoredFloat::float32) {
    RowMatrix<float> unused;
    linear_panel<Add>(out, x, w, 0, out_features, unused);  // one call: the product as Eigen computes (threads) it
  } else {
    attnscope::detail::for_each_row(panels, x.rows() * w.cols() * width, [&](Index p) {
      thread_local RowMatrix<float> buffer;
      const Index first = p * width, count = p + 1 == panels ? out_features - first : width;
      linear_panel<Add>(out, x, w, first, count, buffer);
    });
  }
  // A weight read in place from a file was never checked element by element: a non-finite output from finite
  // inputs is traced back to the weight and named (the check costs O(rows·out), the product O(rows·out·in); the
  // packed GEMM reports it from its tiles).
  if (w.is_view() && !(packed ? out_finite : out.allFinite()) && x.allFinite()) require_finite_weight(fn, w);
}

/// x·Wᵀ (rows of x are tokens; W is out × in): a new rows × out matrix.
template <class Scalar, class Derived>
RowMatrix<Scalar> linear(const Eigen::MatrixBase<Derived>& x, const WeightMatrix& w,
                         MatmulMode mode = MatmulMode::exact) {
  RowMatrix<Scalar> y(x.rows(), w.rows());
  linear_product<false>(y, x, w, mode);
  return y;
}

/// out = x·Wᵀ into an existing block of the right shape.
template <class Out, class Derived>
void linear_into(Out&& out, const Eigen::MatrixBase<Derived>& x, const WeightMatrix& w,
                 MatmulMode mode = MatmulMode::exact) {
  linear_product<false>(out, x, w, mode);
}

/// out += x·Wᵀ (the residual update of a block's output projection).
template <class Out, class Derived>
void linear_add(Out&& out, const Eigen::MatrixBase<Derived>& x, const WeightMatrix& w,
                MatmulMode mode = MatmulMode::exact) {
  linear_product<true>(out, x, w, mode);
}

/// rows += bias on every row (a linear layer's bias); an empty bias adds nothing.
template <class Rows, class Bias>
void add_bias(Rows&& rows, const Bias& bias) {
  if (bias.size() > 0) rows.rowwise() += bias.transpose();
}

/// Row r of out = row tokens[r] of the embedding table W (vocab × dim), widened to float32. Throws
/// attnscope::invalid_argument naming the table for a non-finite value in a row read from a file.
template <class Scalar>
void embedding_rows(RowMatrix<Scalar>& out, const WeightMatrix& table, const std::vector<int>& tokens) {
  out.resize(static_cast<Index>(tokens.size()), table.cols());
  for (Index r = 0; r < out.rows(); ++r) {
    table.widen_row(tokens[std::size_t(r)], out.data() + r * out.cols());
    if (table.is_view() && !out.row(r).allFinite())
      attnscope::detail::throw_invalid_argument("embedding_rows", "embedding '", table.name(), "' row ",
                                                tokens[std::size_t(r)], " holds a non-finite value");
  }
}

/// out.row(r) += row first + r of W (the learned position embedding of positions first..), widened to float32.
template <class Scalar>
void add_embedding_rows(RowMatrix<Scalar>& out, const WeightMatrix& table, Index first) {
  Eigen::Matrix<float, 1, Eigen::Dynamic> row(table.cols());
  for (Index r = 0; r < out.rows(); ++r) {
    table.widen_row(first + r, row.data());
    if (table.is_view() && !row.allFinite())
      attnscope::detail::throw_invalid_argument("add_embedding_rows", "embedding '", table.name(), "' row ",
                                                first + r, " holds a non-finite value");
    out.row(r) += row;
  }
}

}  // namespace attnscope::model::detail
