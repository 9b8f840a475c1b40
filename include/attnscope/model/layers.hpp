// attnscope/model/layers.hpp — the building blocks of a Llama layer in matrix form (one row per token),
// written to match llama2.c run.c operation by operation in float32.
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::model {

/// RMSNorm of every row: y = w ⊙ x / sqrt(mean(x²) + eps) (llama2.c run.c `rmsnorm`, eps = 1e-5).
/// The sum of squares is accumulated in float in index order, as run.c does. O(rows·cols).
template <class Derived, class WeightDerived>
RowMatrix<float> rms_norm(const Eigen::MatrixBase<Derived>& rows, const Eigen::MatrixBase<WeightDerived>& weight,
                          float epsilon = 1e-5f) {
  if (weight.size() != rows.cols())
    detail::throw_invalid_argument("rms_norm", "weight has ", weight.size(), " entries but rows have ", rows.cols(),
                                   " columns");
  if (rows.cols() == 0) detail::throw_invalid_argument("rms_norm", "rows have no columns");
  detail::require_positive("rms_norm", "epsilon", epsilon);
  RowMatrix<float> out(rows.rows(), rows.cols());
  const Index width = rows.cols();
  for (Index i = 0; i < rows.rows(); ++i) {
    float sum_of_squares = 0.0f;
    for (Index j = 0; j < width; ++j) sum_of_squares += float(rows(i, j)) * float(rows(i, j));
    sum_of_squares /= static_cast<float>(width);
    sum_of_squares += epsilon;
    const float inverse_rms = 1.0f / std::sqrt(sum_of_squares);
    for (Index j = 0; j < width; ++j) out(i, j) = float(weight(j)) * (inverse_rms * float(rows(i, j)));
  }
  return out;
}

/// Rotary position embedding in place (llama2.c run.c): row r holds the token at position first_position + r;
/// inside each head of `head_size` columns the pairs (2i, 2i+1) are rotated by the angle
/// position · 10000^(−(2i)/head_size) (RoFormer, Su et al. 2021, eq. 34, with run.c's pairing and float math).
/// O(rows·cols) cosines/sines.
inline void apply_rope(RowMatrix<float>& rows, Index head_size, Index first_position) {
  if (head_size <= 0 || head_size % 2 != 0 || rows.cols() % head_size != 0)
    detail::throw_invalid_argument("apply_rope", "head_size ", head_size, " must be even, > 0 and divide the width ",
                                   rows.cols());
  if (first_position < 0) detail::throw_invalid_argument("apply_rope", "first_position ", first_position, " < 0");
  for (Index r = 0; r < rows.rows(); ++r) {
    const float position = static_cast<float>(first_position + r);
    float* row = rows.data() + r * rows.cols();
    for (Index i = 0; i < rows.cols(); i += 2) {
      const Index index_in_head = i % head_size;
      const float frequency =
          1.0f / std::pow(10000.0f, static_cast<float>(index_in_head) / static_cast<float>(head_size));
      const float angle = position * frequency;
      const float cosine = std::cos(angle), sine = std::sin(angle);
      const float first = row[i], second = row[i + 1];
      row[i] = first * cosine - second * sine;
      row[i + 1] = first * sine + second * cosine;
    }
  }
}

/// SwiGLU gate (Shazeer 2020, "GLU Variants Improve Transformer", FFN_SwiGLU; run.c): silu(a) ⊙ b with
/// silu(a) = a · 1/(1 + exp(−a)), element-wise. O(rows·cols).
inline RowMatrix<float> swiglu_gate(const RowMatrix<float>& gate, const RowMatrix<float>& up) {
  detail::require_same_shape("swiglu_gate", "gate/up", gate.rows(), gate.cols(), up.rows(), up.cols());
  RowMatrix<float> out(gate.rows(), gate.cols());
  const Index size = gate.size();
  for (Index i = 0; i < size; ++i) {
    float value = gate.data()[i];
    value *= 1.0f / (1.0f + std::exp(-value));
    out.data()[i] = value * up.data()[i];
  }
  return out;
}

}  // namespace attnscope::model
