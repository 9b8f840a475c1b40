// attnscope/kernels/probability_summary.hpp — one-pass summaries of a row of probabilities: the top two entries and
// the sums the secular solver starts from, with the validation of the row (minimum, finiteness), and the bracket data
// (sum, maximum, largest Bernoulli variance).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/detail/packet_reduction.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// What the secular solver needs of a row of probabilities (docs/theory/normalization-maps.md §5.2 step 1): the two
/// largest entries (equal when the maximum is tied), the sum, and the sum over entries ≤ 1/2 — at most one entry of a
/// distribution exceeds 1/2, so that sum is Σ_{i≠argmax} p_i without the cancellation of 1 − p_(1) whenever
/// p_(1) > 1/2 ≥ p_(2). (The largest p(1 − p) over entries ≤ 1/2 follows from the top two: p(1 − p) increases on
/// [0, 1/2].)
template <class Scalar>
struct TopTwoAndSums {
  Scalar max, second, sum, sum_at_most_half, sum_of_squares;
};

/// One-pass summary of a row of probabilities: TopTwoAndSums, the minimum, and whether every entry is finite (the
/// validation of probability rows).
template <class Scalar>
struct ProbabilityRowSummary {
  Scalar min, max, second, sum, sum_at_most_half, sum_of_squares;
  bool finite;
  TopTwoAndSums<Scalar> top_two_and_sums() const { return {max, second, sum, sum_at_most_half, sum_of_squares}; }
};

/// Sum, maximum and maximum of p(1 − p) (Bernoulli variance) over a row — the bracket data of the secular solver.
template <class Scalar>
struct SumAndMaxima {
  Scalar sum, max, max_bernoulli_variance;
};

namespace detail {

template <class P>
struct SumAndMaximaAccumulator {
  P sum, max, max_bernoulli_variance;
  explicit SumAndMaximaAccumulator(NoParameters)
      : sum(pset1<P>(ScalarOf<P>(0))), max(pset1<P>(ScalarOf<P>(0))), max_bernoulli_variance(pset1<P>(ScalarOf<P>(0))) {}
  void add(const P& value) {
    sum = padd(sum, value);
    max = pmax(max, value);
    // p(1 − p) (docs/theory/normalization-maps.md §4.1, d_i)
    max_bernoulli_variance = pmax(max_bernoulli_variance, pmul(value, psub(pset1<P>(ScalarOf<P>(1)), value)));
  }
  void merge(const SumAndMaximaAccumulator& other) {
    sum = padd(sum, other.sum);
    max = pmax(max, other.max);
    max_bernoulli_variance = pmax(max_bernoulli_variance, other.max_bernoulli_variance);
  }
  SumAndMaximaAccumulator<ScalarOf<P>> horizontal() const {
    SumAndMaximaAccumulator<ScalarOf<P>> result(NoParameters{});
    result.sum = sum_lanes(sum);
    result.max = max_lanes(max);
    result.max_bernoulli_variance = max_lanes(max_bernoulli_variance);
    return result;
  }
};

/// The TopTwoAndSums fields; ProbabilitySummaryAccumulator adds min and finiteness with the same operations for these,
/// so both give the same bits for them.
template <class P>
struct TopTwoAndSumsAccumulator {
  P max, second, sum, small_sum, squares;
  explicit TopTwoAndSumsAccumulator(NoParameters)
      : max(pset1<P>(-std::numeric_limits<ScalarOf<P>>::infinity())),
        second(max),
        sum(pset1<P>(ScalarOf<P>(0))),
        small_sum(sum),
        squares(sum) {}
  void add(const P& value) {
    second = pmax(second, pmin(max, value));  // per-lane top two, ties kept
    max = pmax(max, value);
    sum = padd(sum, value);
    squares = Eigen::internal::pmadd(value, value, squares);
    if constexpr (std::is_arithmetic<P>::value) {
      if (value <= P(0.5)) small_sum += value;
    } else {
      const P small = Eigen::internal::pcmp_le(value, pset1<P>(ScalarOf<P>(0.5)));  // all-ones where p ≤ 1/2
      small_sum = padd(small_sum, Eigen::internal::pand(small, value));
    }
  }
  void merge(const TopTwoAndSumsAccumulator& other) {
    second = pmax(pmax(second, other.second), pmin(max, other.max));
    max = pmax(max, other.max);
    sum = padd(sum, other.sum);
    small_sum = padd(small_sum, other.small_sum);
    squares = padd(squares, other.squares);
  }
  TopTwoAndSumsAccumulator<ScalarOf<P>> horizontal() const {
    TopTwoAndSumsAccumulator<ScalarOf<P>> result(NoParameters{});
    if constexpr (std::is_arithmetic<P>::value) {
      result = *this;
    } else {
      constexpr int lanes = Eigen::internal::unpacket_traits<P>::size;
      ScalarOf<P> maxima[lanes], seconds[lanes];
      Eigen::internal::pstoreu(maxima, max);
      Eigen::internal::pstoreu(seconds, second);
      for (int lane = 0; lane < lanes; ++lane) {  // merge the per-lane top twos
        result.second = std::max({result.second, seconds[lane], std::min(result.max, maxima[lane])});
        result.max = std::max(result.max, maxima[lane]);
      }
      result.sum = sum_lanes(sum);
      result.small_sum = sum_lanes(small_sum);
      result.squares = sum_lanes(squares);
    }
    return result;
  }
};

template <class P>
struct ProbabilitySummaryAccumulator {
  TopTwoAndSumsAccumulator<P> top;
  P min, poison;
  explicit ProbabilitySummaryAccumulator(NoParameters none)
      : top(none), min(pset1<P>(std::numeric_limits<ScalarOf<P>>::infinity())), poison(pset1<P>(ScalarOf<P>(0))) {}
  void add(const P& value) {
    top.add(value);
    min = pmin(min, value);
    poison = non_finite_poison(poison, value);
  }
  void merge(const ProbabilitySummaryAccumulator& other) {
    top.merge(other.top);
    min = pmin(min, other.min);
    poison = padd(poison, other.poison);
  }
  ProbabilitySummaryAccumulator<ScalarOf<P>> horizontal() const {
    ProbabilitySummaryAccumulator<ScalarOf<P>> result(NoParameters{});
    result.top = top.horizontal();
    result.min = min_lanes(min);
    result.poison = sum_lanes(poison);
    return result;
  }
};

}  // namespace detail

/// ProbabilityRowSummary of p[0..n) (n ≥ 1) in one vectorized pass.
template <class Scalar>
ProbabilityRowSummary<Scalar> probability_row_summary(const Scalar* p, Index n) {
  const auto result = detail::reduce_row<detail::ProbabilitySummaryAccumulator>(p, n, detail::NoParameters{});
  return {result.min,           result.top.max,     result.top.second,         result.top.sum,
          result.top.small_sum, result.top.squares, result.poison == Scalar(0)};
}

/// Scalar reference of probability_row_summary.
template <class Scalar>
ProbabilityRowSummary<Scalar> probability_row_summary_reference(const Scalar* p, Index n) {
  using limits = std::numeric_limits<Scalar>;
  ProbabilityRowSummary<Scalar> summary{limits::infinity(), -limits::infinity(), -limits::infinity(), 0, 0, 0, true};
  for (Index i = 0; i < n; ++i) {
    summary.finite = summary.finite && std::isfinite(p[i]);
    summary.min = std::min(summary.min, p[i]);
    if (p[i] > summary.max) {
      summary.second = summary.max;
      summary.max = p[i];
    } else if (p[i] > summary.second) {
      summary.second = p[i];
    }
    summary.sum += p[i];
    summary.sum_of_squares += p[i] * p[i];
    if (p[i] <= Scalar(0.5)) summary.sum_at_most_half += p[i];
  }
  return summary;
}

/// Sum, max and max p(1 − p) of non-negative entries x[0..n) (0 for n = 0; one pass, vectorized).
template <class Scalar>
SumAndMaxima<Scalar> sum_and_maxima(const Scalar* x, Index n) {
  const auto result = detail::reduce_row<detail::SumAndMaximaAccumulator>(x, n, detail::NoParameters{});
  return {result.sum, result.max, result.max_bernoulli_variance};
}

/// Scalar reference of sum_and_maxima.
template <class Scalar>
SumAndMaxima<Scalar> sum_and_maxima_reference(const Scalar* x, Index n) {
  SumAndMaxima<Scalar> result{0, 0, 0};
  for (Index i = 0; i < n; ++i) {
    result.sum += x[i];
    result.max = x[i] > result.max ? x[i] : result.max;
    const Scalar variance = x[i] * (1 - x[i]);
    result.max_bernoulli_variance = variance > result.max_bernoulli_variance ? variance : result.max_bernoulli_variance;
  }
  return result;
}

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
