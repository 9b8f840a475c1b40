// attnscope/logits/precision.hpp — bf16 / fp16 rounding emulation on CPU (docs/theory/logits.md §6 [derived]):
// round-to-nearest-even of the float32 value (Eigen::bfloat16 / Eigen::half conversions), NaN preserved, fp16
// overflow (|x| > 65504) becomes ±inf, plus overflow counters and rounding-error summaries.
#pragma once

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::logits {

/// Reduced floating-point format to emulate.
enum class RoundingFormat { none, bfloat16, float16 };

/// Largest finite fp16 value.
inline constexpr double float16_max = 65504.0;

/// Rounds one value as a float32 → format cast would (RNE; double inputs are first rounded to float32).
template <class Scalar>
Scalar round_to_format(Scalar value, RoundingFormat format) {
  const float single = static_cast<float>(value);
  switch (format) {
    case RoundingFormat::bfloat16: return static_cast<Scalar>(static_cast<float>(Eigen::bfloat16(single)));
    case RoundingFormat::float16: return static_cast<Scalar>(static_cast<float>(Eigen::half(single)));
    case RoundingFormat::none: break;
  }
  return value;
}

/// Every entry rounded to bfloat16 and back (8 significant bits: relative spacing 2⁻⁷, half-ulp error ≤ 2⁻⁹·|x|).
template <class Derived>
RowMatrix<typename Derived::Scalar> round_to_bf16(const Eigen::MatrixBase<Derived>& matrix) {
  return matrix.unaryExpr([](typename Derived::Scalar x) { return round_to_format(x, RoundingFormat::bfloat16); });
}

/// Every entry rounded to IEEE half and back (11 significant bits; |x| ≥ 65520 overflows to ±inf).
template <class Derived>
RowMatrix<typename Derived::Scalar> round_to_fp16(const Eigen::MatrixBase<Derived>& matrix) {
  return matrix.unaryExpr([](typename Derived::Scalar x) { return round_to_format(x, RoundingFormat::float16); });
}

/// Number of finite entries with |x| > 65504 (values an fp16 buffer cannot hold).
template <class Derived>
Index fp16_overflow_count(const Eigen::MatrixBase<Derived>& matrix) {
  Index count = 0;
  for (Index i = 0; i < matrix.rows(); ++i)
    for (Index j = 0; j < matrix.cols(); ++j) {
      const double value = std::abs(static_cast<double>(matrix(i, j)));
      if (std::isfinite(value) && value > float16_max) ++count;
    }
  return count;
}

/// Summary of what rounding to a format does to a matrix.
struct RoundingError {
  double max_absolute = 0;   // max |round(x) − x| over entries that stay finite
  double max_relative = 0;   // max |round(x) − x| / |x| over nonzero entries that stay finite
  Index overflow_count = 0;  // entries that became ±inf
};

/// Rounding error of every entry of a finite matrix under the given format. O(rows·cols).
template <class Derived>
RoundingError rounding_error(const Eigen::MatrixBase<Derived>& matrix, RoundingFormat format) {
  attnscope::detail::require_nonempty("rounding_error", matrix);
  attnscope::detail::require_finite("rounding_error", matrix);
  RoundingError error;
  for (Index i = 0; i < matrix.rows(); ++i)
    for (Index j = 0; j < matrix.cols(); ++j) {
      const double value = static_cast<double>(matrix(i, j));
      const double rounded = static_cast<double>(round_to_format(matrix(i, j), format));
      if (!std::isfinite(rounded)) {
        ++error.overflow_count;
        continue;
      }
      const double difference = std::abs(rounded - value);
      error.max_absolute = std::max(error.max_absolute, difference);
      if (value != 0) error.max_relative = std::max(error.max_relative, difference / std::abs(value));
    }
  return error;
}

}  // namespace attnscope::logits
