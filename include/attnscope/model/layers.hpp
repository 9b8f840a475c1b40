// attnscope/model/layers.hpp — the building blocks of a Llama layer in matrix form (one row per token),
// written to match llama2.c run.c operation by operation in float32. Every function is a template (on the scalar, or
// with a defaulted parameter) so that including the header generates no code.
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/model/rope.hpp"

namespace attnscope::model {

/// RMSNorm of every row: y = w ⊙ x / sqrt(mean(x²) + eps) (llama2.c run.c `rmsnorm`, eps = 1e-5).
/// The sum of squares is accumulated in float in index order, as run.c does. O(rows·cols).
template <class Derived, class WeightDerived>
RowMatrix<float> rms_norm(const Eigen::MatrixBase<Derived>& rows, const Eigen::MatrixBase<WeightDerived>& weight,
                          float epsilon = 1e-5f) {
  if (weight.size() != rows.cols())
    attnscope::detail::throw_invalid_argument("rms_norm", "weight has ", weight.size(), " entries but rows have ", rows.cols(),
                                   " columns");
  if (rows.cols() == 0) attnscope::detail::throw_invalid_argument("rms_norm", "rows have no columns");
  attnscope::detail::require_positive("rms_norm", "epsilon", epsilon);
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

/// Which coordinates RoPE rotates together inside a head of size d.
enum class RopeConvention {
  interleaved,  // pairs (2i, 2i+1): llama2.c run.c and Meta's original Llama code
  rotate_half,  // pairs (i, i + d/2): Hugging Face `rotate_half` (Llama, Mistral, Qwen2 checkpoints)
};

/// cos/sin of the RoPE angles for `count` consecutive positions from first_position: entry (r, i) belongs to
/// position first_position + r and pair i, angle = position · θ^(−2i/d) (RoFormer, Su et al. 2021, eq. 34),
/// computed in float as run.c and Hugging Face do (frequency 1/powf(θ, 2i/d), then position · frequency).
struct RotaryTable {
  RowMatrix<float> cosine, sine;  // count × head_size/2
};

/// The RotaryTable of positions [first_position, first_position + count) for the pairs of `frequencies`:
/// cos and sin of position · inverse_frequency_i (in float, as Hugging Face), both multiplied by the attention
/// factor (1 unless a YaRN or LongRoPE scaling sets it). Throws attnscope::invalid_argument for a negative position or
/// count, or a non-finite or non-positive frequency or factor. O(count·pairs) cosines and sines.
template <class Table = RotaryTable>
Table rotary_table(Index first_position, Index count, const RopeFrequencies& frequencies) {
  const char* fn = "rotary_table";
  if (first_position < 0 || count < 0)
    attnscope::detail::throw_invalid_argument(fn, "first_position ", first_position, " and count ", count, " must be >= 0");
  if (!(frequencies.attention_factor > 0) || !std::isfinite(frequencies.attention_factor))
    attnscope::detail::throw_invalid_argument(fn, "attention_factor ", frequencies.attention_factor,
                                              " must be finite and > 0");
  const Index pairs = static_cast<Index>(frequencies.inverse_frequency.size());
  Table table{RowMatrix<float>(count, pairs), RowMatrix<float>(count, pairs)};
  const float factor = frequencies.attention_factor;
  for (Index i = 0; i < pairs; ++i) {
    const float frequency = frequencies.inverse_frequency[std::size_t(i)];
    if (!(frequency > 0) || !std::isfinite(frequency))
      attnscope::detail::throw_invalid_argument(fn, "inverse frequency ", i, " is ", frequency,
                                                ", must be finite and > 0");
    for (Index r = 0; r < count; ++r) {
      const float angle = static_cast<float>(first_position + r) * frequency;
      table.cosine(r, i) = std::cos(angle);
      table.sine(r, i) = std::sin(angle);
      if (factor != 1.0f) {
        table.cosine(r, i) *= factor;
        table.sine(r, i) *= factor;
      }
    }
  }
  return table;
}

/// The RotaryTable of positions [first_position, first_position + count) for heads of size head_size and base θ
/// (plain RoPE over the whole head). Throws attnscope::invalid_argument for an odd or non-positive head_size, a
/// negative position or count, or θ not finite and > 0. O(count·head_size) cosines and sines.
template <class Table = RotaryTable>
Table rotary_table(Index first_position, Index count, Index head_size, double theta = 10000.0) {
  const char* fn = "rotary_table";
  if (head_size <= 0 || head_size % 2 != 0)
    attnscope::detail::throw_invalid_argument(fn, "head_size ", head_size, " must be even and > 0");
  attnscope::detail::require_positive(fn, "theta", theta);
  RopeFrequencies frequencies;
  frequencies.inverse_frequency = plain_rope_frequencies(head_size, theta);
  return rotary_table<Table>(first_position, count, frequencies);
}

/// Applies RoPE in place: row r of `rows` (several heads of head_size columns side by side) is rotated with row r of
/// `table`; with P = the table's pairs (≤ head_size/2), pair i of each head is (2i, 2i+1) or (i, i + P) by
/// `convention`, and the coordinates from 2P on are left as they are (partial rotary, GPT-NeoX `rotary_pct`);
/// (a, b) becomes (a·cos − b·sin, a·sin + b·cos). Throws on a table with other row count or more pairs than
/// head_size/2, or a width that head_size does not divide. O(rows·cols).
template <class Scalar>
void apply_rotary(RowMatrix<Scalar>& rows, Index head_size, const RotaryTable& table, RopeConvention convention) {
  if (head_size <= 0 || head_size % 2 != 0 || rows.cols() % head_size != 0)
    attnscope::detail::throw_invalid_argument("apply_rotary", "head_size ", head_size, " must be even, > 0 and divide the width ",
                                   rows.cols());
  const Index pairs = table.cosine.cols();
  if (table.cosine.rows() != rows.rows() || pairs > head_size / 2 || pairs < 1 || table.sine.rows() != rows.rows() ||
      table.sine.cols() != pairs)
    attnscope::detail::throw_invalid_argument("apply_rotary", "table of ", table.cosine.rows(), "x", table.cosine.cols(),
                                   " does not fit ", rows.rows(), " rows with ", pairs, " pairs per head");
  const Index first_step = convention == RopeConvention::interleaved ? 2 : 1;       // from pair i to pair i+1
  const Index partner = convention == RopeConvention::interleaved ? 1 : pairs;      // from a to b inside a pair
  for (Index r = 0; r < rows.rows(); ++r) {
    const float* cosine = table.cosine.data() + r * pairs;
    const float* sine = table.sine.data() + r * pairs;
    for (Index head = 0; head < rows.cols(); head += head_size) {
      Scalar* row = rows.data() + r * rows.cols() + head;
      for (Index i = 0; i < pairs; ++i) {
        Scalar* a = row + i * first_step;
        Scalar* b = a + partner;
        const Scalar first = *a, second = *b;
        *a = first * cosine[i] - second * sine[i];
        *b = first * sine[i] + second * cosine[i];
      }
    }
  }
}

/// Rotary position embedding in place (llama2.c run.c): row r holds the token at position first_position + r;
/// inside each head of `head_size` columns the pairs (2i, 2i+1) are rotated by the angle
/// position · 10000^(−(2i)/head_size) (RoFormer, Su et al. 2021, eq. 34, with run.c's pairing and float math).
/// O(rows·cols) cosines/sines.
template <class Scalar>
void apply_rope(RowMatrix<Scalar>& rows, Index head_size, Index first_position) {
  if (head_size <= 0 || head_size % 2 != 0 || rows.cols() % head_size != 0)
    attnscope::detail::throw_invalid_argument("apply_rope", "head_size ", head_size, " must be even, > 0 and divide the width ",
                                   rows.cols());
  if (first_position < 0) attnscope::detail::throw_invalid_argument("apply_rope", "first_position ", first_position, " < 0");
  apply_rotary(rows, head_size, rotary_table(first_position, rows.rows(), head_size), RopeConvention::interleaved);
}

/// LayerNorm of every row: y = w ⊙ (x − mean(x)) / sqrt(var(x) + eps) + b with the biased variance (Ba et al. 2016,
/// "Layer Normalization", eq. 4; torch.nn.LayerNorm). Mean and variance are accumulated in double. O(rows·cols).
template <class Derived, class WeightDerived, class BiasDerived>
RowMatrix<float> layer_norm(const Eigen::MatrixBase<Derived>& rows, const Eigen::MatrixBase<WeightDerived>& weight,
                            const Eigen::MatrixBase<BiasDerived>& bias, float epsilon = 1e-5f) {
  if (weight.size() != rows.cols() || bias.size() != rows.cols())
    attnscope::detail::throw_invalid_argument("layer_norm", "weight has ", weight.size(), " and bias ", bias.size(),
                                   " entries but rows have ", rows.cols(), " columns");
  if (rows.cols() == 0) attnscope::detail::throw_invalid_argument("layer_norm", "rows have no columns");
  attnscope::detail::require_positive("layer_norm", "epsilon", epsilon);
  RowMatrix<float> out(rows.rows(), rows.cols());
  const double width = static_cast<double>(rows.cols());
  for (Index i = 0; i < rows.rows(); ++i) {
    const double mean = rows.row(i).template cast<double>().sum() / width;
    const double variance = (rows.row(i).template cast<double>().array() - mean).square().sum() / width;
    const float inverse_deviation = static_cast<float>(1.0 / std::sqrt(variance + double(epsilon)));
    out.row(i) = ((rows.row(i).array() - static_cast<float>(mean)) * inverse_deviation) *
                     weight.transpose().array() + bias.transpose().array();
  }
  return out;
}

/// GELU with the tanh approximation in place ("gelu_new" of GPT-2; Hendrycks & Gimpel 2016, §2):
/// x ↦ x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))), in float with Eigen's vectorized tanh. O(size).
template <class Scalar>
void gelu_tanh_in_place(RowMatrix<Scalar>& values) {
  const Scalar scale = Scalar(0.7978845608028654);  // √(2/π)
  auto x = values.array();
  x = Scalar(0.5) * x * (Scalar(1) + (scale * (x + Scalar(0.044715) * x.cube())).tanh());
}

/// The exact GELU in place, x ↦ x·Φ(x) = x/2 · (1 + erf(x/√2)) (Hendrycks & Gimpel 2016, eq. 1; torch's default
/// `gelu`, GPT-NeoX "gelu"), element by element with std::erf. O(size).
template <class Scalar>
void gelu_erf_in_place(RowMatrix<Scalar>& values) {
  const Scalar inverse_sqrt2 = Scalar(0.7071067811865476);
  for (Index i = 0; i < values.size(); ++i) {
    const Scalar x = values.data()[i];
    values.data()[i] = Scalar(0.5) * x * (Scalar(1) + std::erf(x * inverse_sqrt2));
  }
}

/// Tanh softcapping in place, z ↦ c·tanh(z/c) (Gemma 2 report, §2: attention and final logits), c > 0. O(size).
template <class Scalar>
void softcap_in_place(RowMatrix<Scalar>& values, double cap) {
  attnscope::detail::require_positive("softcap_in_place", "cap", cap);
  const Scalar c = static_cast<Scalar>(cap);
  values.array() = c * (values.array() / c).tanh();
}

/// SwiGLU gate (Shazeer 2020, "GLU Variants Improve Transformer", FFN_SwiGLU; run.c): silu(a) ⊙ b with
/// silu(a) = a · 1/(1 + exp(−a)), element-wise. O(rows·cols).
template <class Scalar>
RowMatrix<Scalar> swiglu_gate(const RowMatrix<Scalar>& gate, const RowMatrix<Scalar>& up) {
  attnscope::detail::require_same_shape("swiglu_gate", "gate/up", gate.rows(), gate.cols(), up.rows(), up.cols());
  RowMatrix<Scalar> out(gate.rows(), gate.cols());
  const Index size = gate.size();
  for (Index i = 0; i < size; ++i) {
    Scalar value = gate.data()[i];
    value *= Scalar(1) / (Scalar(1) + std::exp(-value));
    out.data()[i] = value * up.data()[i];
  }
  return out;
}

}  // namespace attnscope::model
