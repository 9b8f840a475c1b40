// attnscope/normalize/jacobian.hpp — Jacobians of every normalization map, row by row: matrix-free JVP and VJP,
// the dense Jacobian of one row, and the spectral norm ‖J‖₂ of every row.
// The map is any struct of maps.hpp, a NormalizationMap variant, or a GeneralizedMap.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <variant>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/kernels/exp_summary.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/secular.hpp"
#include "attnscope/normalize/detail/gather_visible.hpp"
#include "attnscope/normalize/detail/lanczos.hpp"
#include "attnscope/normalize/entmax.hpp"
#include "attnscope/normalize/generalized.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/normalize/row_helpers.hpp"
#include "attnscope/normalize/sa_softmax.hpp"
#include "attnscope/normalize/sink_softmax.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/sparsemax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "attnscope/normalize/ssmax.hpp"

namespace attnscope {
namespace detail {

// ---- Linearization of one row of visible logits, per map ----------------------------------------------------

template <class Scalar>
RowLinearization<Scalar> linearize_row(const SoftmaxMap& map, const Scalar* z, Index n) {
  return linearize_scaled_softmax(z, n, Scalar(1) / static_cast<Scalar>(map.temperature));
}
template <class Scalar>
RowLinearization<Scalar> linearize_row(const SparsemaxMap&, const Scalar* z, Index n) {
  return linearize_sparsemax(z, n);
}
template <class Scalar>
RowLinearization<Scalar> linearize_row(const Entmax15Map&, const Scalar* z, Index n) {
  return linearize_entmax15(z, n);
}
template <class Scalar>
RowLinearization<Scalar> linearize_row(const EntmaxBisectMap& map, const Scalar* z, Index n) {
  return linearize_entmax_bisect(z, n, static_cast<Scalar>(map.alpha));
}
template <class Scalar>
RowLinearization<Scalar> linearize_row(const ScalableSoftmaxMap& map, const Scalar* z, Index n) {
  return linearize_ssmax(z, n, static_cast<Scalar>(map.s));
}
template <class Scalar>
RowLinearization<Scalar> linearize_row(const SelfAdjustSoftmaxMap& map, const Scalar* z, Index n) {
  return linearize_sa_softmax(z, n, map.variant);
}
template <class Scalar>
RowLinearization<Scalar> linearize_row(const SinkSoftmaxMap& map, const Scalar* z, Index n) {
  return linearize_sink_softmax(z, n, static_cast<Scalar>(map.sink_logit));
}
template <class Scalar, class Function, class Derivative>
RowLinearization<Scalar> linearize_row(const GeneralizedMap<Function, Derivative>& map, const Scalar* z, Index n) {
  return linearize_generalized(z, n, map);
}
template <class Scalar>
RowLinearization<Scalar> linearize_row(const NormalizationMap& map, const Scalar* z, Index n) {
  return std::visit([&](const auto& alternative) { return linearize_row(alternative, z, n); }, map);
}

// ---- Validation of a map against the logits it is applied to ------------------------------------------------

template <class Scalar, class Map>
void validate_map_at(const char* function, const Map& map, const RowMatrixView<Scalar>& logits,
                     const Visibility& visibility) {
  if constexpr (is_generalized_map<Map>::value) {
    require_generalized_defined(function, logits, visibility, map, true);
  } else {
    validate_map(function, map);
    if constexpr (std::is_same<Map, SelfAdjustSoftmaxMap>::value) {
      require_sa_softmax_defined(function, logits, visibility, map.variant);
    } else if constexpr (std::is_same<Map, NormalizationMap>::value) {
      if (const auto* sa = std::get_if<SelfAdjustSoftmaxMap>(&map))
        require_sa_softmax_defined(function, logits, visibility, sa->variant);
    }
  }
}

/// Runs body(row, columns) over all rows: in parallel for built-in maps, serially for a user F.
template <class Map, class Body>
void for_each_map_row(Index rows, Index cols, Body&& body) {
  if constexpr (is_generalized_map<Map>::value) {
    for (Index i = 0; i < rows; ++i) body(i);
  } else {
    for_each_row(rows, 8 * cols, body);
  }
}

/// Shared body of JVP and VJP: validates, then applies J (or Jᵀ) of each row to the matching row of `vectors`.
template <class Scalar, class Map>
RowMatrix<Scalar> linearized_product(const char* function, const RowMatrixView<Scalar>& logits, const Map& map,
                                     const RowMatrixView<Scalar>& vectors, const Visibility& visibility,
                                     bool transpose) {
  validate_logits(function, logits, visibility);
  require_same_shape(function, "vectors/logits", vectors.rows(), vectors.cols(), logits.rows(), logits.cols());
  const Index cols = logits.cols();
  for (Index i = 0; i < vectors.rows(); ++i)
    for (Index j = 0; j < cols; ++j)
      if (visibility.visible(i, j, cols) && !std::isfinite(static_cast<double>(vectors(i, j))))
        throw_invalid_argument(function, "non-finite vector entry ", vectors(i, j), " at row ", i, ", column ", j);
  validate_map_at(function, map, logits, visibility);
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(logits.rows(), cols);
  for_each_map_row<Map>(logits.rows(), cols, [&](Index i) {
    const std::vector<Index> columns = visible_columns(visibility, i, cols);
    const std::vector<Scalar> z = gather_columns<Scalar>(logits, i, columns);
    const std::vector<Scalar> v = gather_columns<Scalar>(vectors, i, columns);
    const RowLinearization<Scalar> linearization = linearize_row(map, z.data(), static_cast<Index>(z.size()));
    std::vector<Scalar> result(z.size());
    if (transpose) linearization.jacobian.apply_transpose(v.data(), result.data());
    else linearization.jacobian.apply(v.data(), result.data());
    scatter_row(result, columns, i, out);
  });
  return out;
}

// ---- Spectral norm of a non-symmetric row Jacobian (the Lanczos method of normalize/detail/lanczos.hpp) ------

/// ‖J‖₂ per row for a non-symmetric map, computed in double whatever the logits' scalar (the Lanczos stopping test
/// at 1e-12 needs double); each row's visible logits are converted while gathered (no copy of the matrix).
template <class Scalar, class Map>
Vector<Scalar> nonsymmetric_spectral_norms(const RowMatrixView<Scalar>& logits, const Map& map,
                                           const Visibility& visibility) {
  Vector<Scalar> norms(logits.rows());
  for_each_map_row<Map>(logits.rows(), 64 * logits.cols(), [&](Index i) {
    const std::vector<Index> columns = visible_columns(visibility, i, logits.cols());
    const std::vector<double> z = gather_columns<double>(logits, i, columns);
    const RowLinearization<double> linearization = linearize_row(map, z.data(), static_cast<Index>(z.size()));
    norms(i) = static_cast<Scalar>(nonsymmetric_spectral_norm(linearization.jacobian));
  });
  return norms;
}

// ---- Spectral norm per map: exact O(n) secular method for the symmetric maps (spectral_norm.hpp) -------------

// Fused from logits: each row's map output goes into a row buffer reused by a block of rows and the exact
// norm is taken from the buffer at once, so no rows×cols probability matrix is built (it cost 6× the softmax for
// 4096×4096 logits). Bitwise the norms of the unfused composition (map, then the *_jacobian_spectral_norm function
// of spectral_norm.hpp), which tests/normalize/test_fused_spectral_norm.cpp checks.

/// norms(i) = row_function(i, visible logits of row i (contiguous), n, buffer of n entries, next row or null) for every
/// row of logits whose structure is validated; prefix rows are read in place (the next row's pointer lets the row
/// function prefetch it), mask rows gathered (next row null). Rows run in blocks of 16 (in parallel), each block with
/// one packet-aligned buffer; an exception from a row is rethrown after the loop.
template <class Scalar, class RowFunction>
Vector<Scalar> map_logit_rows_into_buffer(const RowMatrixView<Scalar>& z, const Visibility& visibility,
                                          Index work_per_entry, RowFunction&& row_function) {
  const Index rows = z.rows(), cols = z.cols();
  Vector<Scalar> norms(rows);
  constexpr Index block = 16;
  for_each_row_rethrowing((rows + block - 1) / block, block * work_per_entry * cols, [&](Index block_index) {
    Eigen::Matrix<Scalar, Eigen::Dynamic, 1> buffer(cols);
    std::vector<Scalar> gathered;
    const Index end = std::min(rows, (block_index + 1) * block);
    for (Index i = block_index * block; i < end; ++i) {
      const Scalar* row = z.data() + i * z.outerStride();
      if (visibility.is_prefix()) {
        const Scalar* next_row = i + 1 < rows ? row + z.outerStride() : nullptr;
        norms(i) = row_function(i, row, visibility.prefix_length(i, cols), buffer.data(), next_row);
      } else {
        gather_visible(row, i, cols, visibility, gathered);
        norms(i) = row_function(i, gathered.data(), static_cast<Index>(gathered.size()), buffer.data(),
                                static_cast<const Scalar*>(nullptr));
      }
    }
  });
  return norms;
}

/// Whether spectral_norms(z, map, visibility) checks the logits' finiteness itself, row by row, so that
/// jacobian_spectral_norm leaves out its separate validation pass over the logits (a whole read of the matrix).
template <class Map>
inline constexpr bool checks_finiteness_per_row = std::is_same<Map, SoftmaxMap>::value;

/// The softmax norms of prefix rows (causal, full and the other prefix visibilities): per row the exponentials and
/// their summary into a row buffer while the next row is prefetched, then the secular iteration on the exponentials
/// (no pass that divides by their sum). The first secular pass of a row also takes the next row's max and finiteness
/// check (kernels::secular_power_sums_and_row_max): those loads ride along the division-bound pass instead of a pass
/// of their own (1.00–1.04× faster with the prefetch, 1.08–1.17× without it; docs/performance.md). Rows run in blocks
/// of 16 (in parallel), one buffer per block; the first row of a block takes its max on its own.
template <class Scalar>
Vector<Scalar> softmax_norms_of_prefix_rows(const RowMatrixView<Scalar>& z, Scalar scale, const Visibility& visibility) {
  constexpr Index block = 16;
  const Index rows = z.rows(), cols = z.cols(), stride = z.outerStride();
  Vector<Scalar> norms(rows);
  for_each_row_rethrowing((rows + block - 1) / block, block * 8 * cols, [&](Index block_index) {
    Eigen::Matrix<Scalar, Eigen::Dynamic, 1> buffer(cols);
    Scalar* e = buffer.data();
    const Index begin = block_index * block, end = std::min(rows, begin + block);
    auto max = kernels::row_max(z.data() + begin * stride, visibility.prefix_length(begin, cols));
    for (Index i = begin; i < end; ++i) {
      const Scalar* logits = z.data() + i * stride;
      const Index n = visibility.prefix_length(i, cols);
      if (!max.finite) throw_non_finite_logit("jacobian_spectral_norm", logits, i, cols, visibility);
      const Scalar* next_row = i + 1 < rows ? logits + stride : nullptr;
      const auto summary = kernels::exp_shifted_with_summary(logits, n, max.max, scale, e, next_row);
      const Scalar total = summary.sum();  // S ≥ 1
      SecularIteration<Scalar> iteration(softmax_setup_from_exponentials(summary), n, summary.sum_of_squares,
                                         Scalar(0));
      const bool next_in_block = i + 1 < end;
      const Index next_n = next_in_block ? visibility.prefix_length(i + 1, cols) : 0;
      if (!iteration.finished()) {
        iteration.advance(next_in_block
                              ? kernels::secular_power_sums_and_row_max(e, n, iteration.point(), next_row, next_n, max)
                              : kernels::secular_power_sums(e, n, iteration.point()));
      } else if (next_in_block) {
        max = kernels::row_max(next_row, next_n);
      }
      while (!iteration.finished()) iteration.advance(kernels::secular_power_sums(e, n, iteration.point()));
      norms(i) = scale * (iteration.root() / total);
    }
  });
  return norms;
}

template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const SoftmaxMap& map, const Visibility& visibility) {
  const Scalar scale = Scalar(1) / static_cast<Scalar>(map.temperature);
  if (visibility.is_prefix()) return softmax_norms_of_prefix_rows(z, scale, visibility);
  // mask rows, gathered: per row the max (with the finiteness check), the exponentials and their summary into the
  // buffer, the secular root on the exponentials
  return map_logit_rows_into_buffer(z, visibility, 8, [&](Index i, const Scalar* logits, Index n, Scalar* e,
                                                          const Scalar* next_row) {
    const auto max = kernels::row_max(logits, n);
    if (!max.finite)
      throw_non_finite_logit("jacobian_spectral_norm", z.data() + i * z.outerStride(), i, z.cols(), visibility);
    const auto summary = kernels::exp_shifted_with_summary(logits, n, max.max, scale, e, next_row);
    return scale * softmax_norm_from_exponentials(e, n, summary);
  });
}

template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const ScalableSoftmaxMap& map, const Visibility& visibility) {
  const Scalar s = static_cast<Scalar>(map.s);
  return map_logit_rows_into_buffer(z, visibility, 8, [&](Index, const Scalar* logits, Index n, Scalar* p, const Scalar*) {
    const Scalar scale = ssmax_scale(s, n);  // J = (s·log n)(diag p − ppᵀ), docs/theory/normalization-maps.md §2
    scaled_softmax_row(logits, n, scale, p);
    return softmax_jacobian_norm_row(p, n, Scalar(1)) * scale;
  });
}
template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const SinkSoftmaxMap& map, const Visibility& visibility) {
  const Scalar sink_logit = static_cast<Scalar>(map.sink_logit);
  return map_logit_rows_into_buffer(z, visibility, 8, [&](Index, const Scalar* logits, Index n, Scalar* p, const Scalar*) {
    sink_softmax_row(logits, n, sink_logit, p);
    return sink_softmax_jacobian_norm_row(p, n);
  });
}
template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const SparsemaxMap&, const Visibility& visibility) {
  return map_logit_rows_into_buffer(z, visibility, 8, [&](Index, const Scalar* logits, Index n, Scalar* p, const Scalar*) {
    sparsemax_row(logits, n, p);
    return sparsemax_jacobian_norm_row(p, n);
  });
}
template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const Entmax15Map&, const Visibility& visibility) {
  return map_logit_rows_into_buffer(z, visibility, 16, [&](Index, const Scalar* logits, Index n, Scalar* p, const Scalar*) {
    entmax15_row(logits, n, p);
    std::vector<Scalar> weights;
    return entmax_jacobian_norm_row(p, n, Scalar(1.5), weights);
  });
}
template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const EntmaxBisectMap& map, const Visibility& visibility) {
  const Scalar alpha = static_cast<Scalar>(map.alpha);
  return map_logit_rows_into_buffer(z, visibility, 64, [&](Index, const Scalar* logits, Index n, Scalar* p, const Scalar*) {
    entmax_bisect_row(logits, n, alpha, p);
    std::vector<Scalar> weights;
    return entmax_jacobian_norm_row(p, n, alpha, weights);
  });
}
template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const SelfAdjustSoftmaxMap& map,
                              const Visibility& visibility) {
  return nonsymmetric_spectral_norms(z, map, visibility);
}
template <class Scalar, class Function, class Derivative>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const GeneralizedMap<Function, Derivative>& map,
                              const Visibility& visibility) {
  return nonsymmetric_spectral_norms(z, map, visibility);
}
template <class Scalar>
Vector<Scalar> spectral_norms(const RowMatrixView<Scalar>& z, const NormalizationMap& map, const Visibility& visibility) {
  return std::visit([&](const auto& alternative) { return spectral_norms(z, alternative, visibility); }, map);
}

}  // namespace detail

/// Spectral norm ‖J_i‖₂ of the Jacobian of every row i (over its visible keys). Symmetric maps (softmax with
/// temperature, SSMax, sink softmax, sparsemax, 1.5-entmax, α-entmax) use the exact O(n) secular-equation method
/// of docs/theory/normalization-maps.md §5 (spectral_norm.hpp), from the map's output. Non-symmetric maps (SA-Softmax, a user F)
/// are computed in double by restarted Lanczos on JᵀJ with JVP/VJP, Ritz residual ≤ 1e-12·σ² (exact to rounding
/// for rows of ≤ 24 visible keys; detail::spectral_norm_lanczos). A dense-SVD oracle for every map is
/// jacobian_spectral_norm_dense in normalize/dense_reference.hpp. Throws as
/// jacobian_vector_product on bad logits or parameters.
template <class Derived, class Map>
Vector<typename Derived::Scalar> jacobian_spectral_norm(const Eigen::MatrixBase<Derived>& logits, const Map& map,
                                                        const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::jacobian_spectral_norm: float or double");
  const char* function = "jacobian_spectral_norm";
  const RowMatrixView<Scalar> z(logits.derived());
  if constexpr (detail::checks_finiteness_per_row<Map>) {  // non-finite logits are caught by the row loop
    detail::validate_logit_shape(function, z.rows(), z.cols(), visibility);
  } else {
    detail::validate_logits(function, z, visibility);
  }
  detail::validate_map_at(function, map, z, visibility);
  return detail::spectral_norms(z, map, visibility);
}

/// Jacobian-vector products, row by row: row i of the result is J_i v_i, J_i = ∂map(z_i)/∂z_i over the visible
/// keys of row i (masked entries of `tangent` are ignored, of the result exactly 0). Matrix-free, O(n) per row.
/// Throws attnscope::invalid_argument on bad logits/parameters (as the maps), a non-finite visible tangent entry,
/// or a tangent/logits shape mismatch.
template <class LogitsDerived, class Map, class TangentDerived>
RowMatrix<typename LogitsDerived::Scalar> jacobian_vector_product(const Eigen::MatrixBase<LogitsDerived>& logits,
                                                                  const Map& map,
                                                                  const Eigen::MatrixBase<TangentDerived>& tangent,
                                                                  const Visibility& visibility = {}) {
  using Scalar = typename LogitsDerived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::jacobian_vector_product: float or double");
  return detail::linearized_product("jacobian_vector_product", RowMatrixView<Scalar>(logits.derived()), map,
                                    RowMatrixView<Scalar>(tangent.template cast<Scalar>()), visibility, false);
}

/// Vector-Jacobian products, row by row: row i of the result is J_iᵀ g_i (the backward pass). Same conventions,
/// cost and errors as jacobian_vector_product.
template <class LogitsDerived, class Map, class CotangentDerived>
RowMatrix<typename LogitsDerived::Scalar> vector_jacobian_product(
    const Eigen::MatrixBase<LogitsDerived>& logits, const Map& map, const Eigen::MatrixBase<CotangentDerived>& cotangent,
    const Visibility& visibility = {}) {
  using Scalar = typename LogitsDerived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::vector_jacobian_product: float or double");
  return detail::linearized_product("vector_jacobian_product", RowMatrixView<Scalar>(logits.derived()), map,
                                    RowMatrixView<Scalar>(cotangent.template cast<Scalar>()), visibility, true);
}

/// Dense n×n Jacobian of row `row` of `logits`, with zero rows and columns at masked keys. O(n²) memory.
/// Throws attnscope::invalid_argument when `row` is out of range, and as jacobian_vector_product otherwise.
template <class Derived, class Map>
RowMatrix<typename Derived::Scalar> jacobian(const Eigen::MatrixBase<Derived>& logits, Index row, const Map& map,
                                             const Visibility& visibility) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::jacobian: logits must be float or double");
  const RowMatrixView<Scalar> z(logits.derived());
  detail::validate_logits("jacobian", z, visibility);
  if (row < 0 || row >= z.rows())
    detail::throw_invalid_argument("jacobian", "row ", row, " out of range [0, ", z.rows(), ")");
  detail::validate_map_at("jacobian", map, z, visibility);
  const std::vector<Index> columns = detail::visible_columns(visibility, row, z.cols());
  const std::vector<Scalar> visible = detail::gather_columns<Scalar>(z, row, columns);
  const RowMatrix<Scalar> compact =
      detail::linearize_row(map, visible.data(), static_cast<Index>(visible.size())).jacobian.dense();
  RowMatrix<Scalar> full = RowMatrix<Scalar>::Zero(z.cols(), z.cols());
  for (std::size_t a = 0; a < columns.size(); ++a)
    for (std::size_t b = 0; b < columns.size(); ++b)
      full(columns[a], columns[b]) = compact(static_cast<Index>(a), static_cast<Index>(b));
  return full;
}

/// Dense n×n Jacobian of one row of logits (a 1×n or n×1 expression, every key visible). O(n²).
template <class Derived, class Map>
RowMatrix<typename Derived::Scalar> jacobian(const Eigen::MatrixBase<Derived>& logits_row, const Map& map) {
  using Scalar = typename Derived::Scalar;
  if (logits_row.rows() != 1 && logits_row.cols() != 1)
    detail::throw_invalid_argument("jacobian", "expected one row of logits, got ", logits_row.rows(), "x",
                                   logits_row.cols(), " (use jacobian(logits, row, map, visibility))");
  RowMatrix<Scalar> row(1, logits_row.size());
  for (Index k = 0; k < logits_row.size(); ++k)
    row(0, k) = logits_row.rows() == 1 ? logits_row(0, k) : logits_row(k, 0);
  return jacobian(row, 0, map, Visibility{});
}

}  // namespace attnscope
