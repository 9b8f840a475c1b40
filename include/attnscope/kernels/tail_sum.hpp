// attnscope/kernels/tail_sum.hpp — the sparsemax passes on one row: the sum and count of the shifted entries above
// a threshold (the candidate filter), and the positive part of the shifted row (the output).
#pragma once

#include <algorithm>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/detail/packet_reduction.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// Sum and count of the shifted entries x_i − shift that are ≥ a threshold (the candidate filter of sparsemax).
template <class Scalar>
struct TailSum {
  Scalar sum;
  Index count;
};

namespace detail {

template <class Scalar>
struct TailParameters {
  Scalar shift, threshold;
};

template <class P>
struct TailAccumulator {
  using Scalar = ScalarOf<P>;
  TailParameters<Scalar> parameters;
  P shift, threshold, sum, count;
  explicit TailAccumulator(const TailParameters<Scalar>& parameters_)
      : parameters(parameters_),
        shift(pset1<P>(parameters_.shift)),
        threshold(pset1<P>(parameters_.threshold)),
        sum(pset1<P>(Scalar(0))),
        count(sum) {}
  void add(const P& value) {
    const P shifted = psub(value, shift);
    if constexpr (std::is_arithmetic<P>::value) {
      if (shifted >= threshold) {
        sum += shifted;
        count += 1;
      }
    } else {
      const P selected = Eigen::internal::pcmp_le(threshold, shifted);  // all-ones where x − shift ≥ threshold
      sum = padd(sum, Eigen::internal::pand(selected, shifted));
      count = padd(count, Eigen::internal::pand(selected, pset1<P>(Scalar(1))));
    }
  }
  void merge(const TailAccumulator& other) {
    sum = padd(sum, other.sum);
    count = padd(count, other.count);
  }
  TailAccumulator<Scalar> horizontal() const {
    TailAccumulator<Scalar> result(parameters);
    result.sum = sum_lanes(sum);
    result.count = sum_lanes(count);
    return result;
  }
};

}  // namespace detail

/// Σ (x_i − shift) and #{i} over the entries with x_i − shift ≥ threshold (one pass, vectorized; counts exact for
/// n < 2^24 in float).
template <class Scalar>
TailSum<Scalar> tail_sum(const Scalar* x, Index n, Scalar shift, Scalar threshold) {
  const auto result =
      detail::reduce_row<detail::TailAccumulator>(x, n, detail::TailParameters<Scalar>{shift, threshold});
  return {result.sum, static_cast<Index>(result.count)};
}

/// Scalar reference of tail_sum.
template <class Scalar>
TailSum<Scalar> tail_sum_reference(const Scalar* x, Index n, Scalar shift, Scalar threshold) {
  TailSum<Scalar> result{0, 0};
  for (Index i = 0; i < n; ++i)
    if (x[i] - shift >= threshold) {
      result.sum += x[i] - shift;
      ++result.count;
    }
  return result;
}

/// out[i] = max(x[i] − shift − threshold, 0) (the sparsemax output, two roundings as written; vectorized).
template <class Scalar>
void shifted_positive_part(const Scalar* x, Index n, Scalar shift, Scalar threshold, Scalar* out) {
  Index i = 0;
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    constexpr Index width = packet_size<Scalar>;
    const P shift_packet = detail::pset1<P>(shift), threshold_packet = detail::pset1<P>(threshold);
    const P zero = detail::pset1<P>(Scalar(0));
    for (; i + width <= n; i += width)
      detail::store(out + i, detail::pmax(detail::psub(detail::psub(detail::load<P>(x + i), shift_packet),
                                                       threshold_packet), zero));
  }
  for (; i < n; ++i) out[i] = std::max(x[i] - shift - threshold, Scalar(0));
}

/// Scalar reference of shifted_positive_part.
template <class Scalar>
void shifted_positive_part_reference(const Scalar* x, Index n, Scalar shift, Scalar threshold, Scalar* out) {
  for (Index i = 0; i < n; ++i) out[i] = std::max(x[i] - shift - threshold, Scalar(0));
}

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
