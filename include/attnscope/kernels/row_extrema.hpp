// attnscope/kernels/row_extrema.hpp — the maximum of a row with a fused finiteness check (the first pass of every
// softmax row), the one-pass minimum, maximum and sum, and the search for an entry.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"
#include "attnscope/kernels/detail/packet_reduction.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// Maximum of a row and whether every entry is finite.
template <class Scalar>
struct MaxAndFiniteness {
  Scalar max;
  bool finite;
};

/// Minimum, maximum and sum of a row, and whether every entry is finite (min/max/sum are meaningless otherwise).
template <class Scalar>
struct MinMaxSumAndFiniteness {
  Scalar min, max, sum;
  bool finite;
};

namespace detail {

template <class P>
struct MaxAccumulator {
  P max, poison;
  explicit MaxAccumulator(NoParameters)
      : max(pset1<P>(-std::numeric_limits<ScalarOf<P>>::infinity())), poison(pset1<P>(ScalarOf<P>(0))) {}
  void add(const P& value) {
    max = pmax(max, value);
    poison = non_finite_poison(poison, value);
  }
  void merge(const MaxAccumulator& other) {
    max = pmax(max, other.max);
    poison = padd(poison, other.poison);
  }
  MaxAccumulator<ScalarOf<P>> horizontal() const {
    MaxAccumulator<ScalarOf<P>> result(NoParameters{});
    result.max = max_lanes(max);
    result.poison = sum_lanes(poison);
    return result;
  }
};

template <class P>
struct MinMaxSumAccumulator {
  P min, max, sum, poison;
  explicit MinMaxSumAccumulator(NoParameters)
      : min(pset1<P>(std::numeric_limits<ScalarOf<P>>::infinity())),
        max(pset1<P>(-std::numeric_limits<ScalarOf<P>>::infinity())),
        sum(pset1<P>(ScalarOf<P>(0))),
        poison(pset1<P>(ScalarOf<P>(0))) {}
  void add(const P& value) {
    min = pmin(min, value);
    max = pmax(max, value);
    sum = padd(sum, value);
    poison = non_finite_poison(poison, value);
  }
  void merge(const MinMaxSumAccumulator& other) {
    min = pmin(min, other.min);
    max = pmax(max, other.max);
    sum = padd(sum, other.sum);
    poison = padd(poison, other.poison);
  }
  MinMaxSumAccumulator<ScalarOf<P>> horizontal() const {
    MinMaxSumAccumulator<ScalarOf<P>> result(NoParameters{});
    result.min = min_lanes(min);
    result.max = max_lanes(max);
    result.sum = sum_lanes(sum);
    result.poison = sum_lanes(poison);
    return result;
  }
};

}  // namespace detail

/// Maximum of x[0..n) (n ≥ 1) with a fused finiteness check (one pass, vectorized).
template <class Scalar>
MaxAndFiniteness<Scalar> row_max(const Scalar* x, Index n) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) {
      MaxAndFiniteness<Scalar> result{0, true};
      detail::avx2::row_max(x, n, result.max, result.finite);
      return result;
    }
  }
#endif
  const auto result = detail::reduce_row<detail::MaxAccumulator>(x, n, detail::NoParameters{});
  return {result.max, result.poison == Scalar(0)};
}

/// Scalar reference of row_max.
template <class Scalar>
MaxAndFiniteness<Scalar> row_max_reference(const Scalar* x, Index n) {
  Scalar max = -std::numeric_limits<Scalar>::infinity();
  bool finite = true;
  for (Index i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    max = x[i] > max ? x[i] : max;
  }
  return {max, finite};
}

/// Minimum, maximum, sum and finiteness of x[0..n) (one pass, vectorized).
template <class Scalar>
MinMaxSumAndFiniteness<Scalar> row_min_max_sum(const Scalar* x, Index n) {
  const auto result = detail::reduce_row<detail::MinMaxSumAccumulator>(x, n, detail::NoParameters{});
  return {result.min, result.max, result.sum, result.poison == Scalar(0)};
}

/// Scalar reference of row_min_max_sum.
template <class Scalar>
MinMaxSumAndFiniteness<Scalar> row_min_max_sum_reference(const Scalar* x, Index n) {
  using limits = std::numeric_limits<Scalar>;
  MinMaxSumAndFiniteness<Scalar> result{limits::infinity(), -limits::infinity(), Scalar(0), true};
  for (Index i = 0; i < n; ++i) {
    result.finite = result.finite && std::isfinite(x[i]);
    result.min = x[i] < result.min ? x[i] : result.min;
    result.max = x[i] > result.max ? x[i] : result.max;
    result.sum += x[i];
  }
  return result;
}

/// Index of the first entry equal to `value` (n if none).
template <class Scalar>
Index find_first(const Scalar* x, Index n, Scalar value) {
  for (Index i = 0; i < n; ++i)
    if (x[i] == value) return i;
  return n;
}

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
