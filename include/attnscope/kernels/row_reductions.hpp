// attnscope/kernels/row_reductions.hpp — the softmax hot loops on one contiguous row: max (with a fused finiteness
// check), exp-and-sum, scale; and the one-pass statistics the spectral-norm code needs. Each vectorized kernel uses
// four independent packet accumulators reduced once at the end (docs/theory/normalization-maps.md §6, design note [derived]) and
// has a plain scalar reference beside it.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/exp.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"
#include "attnscope/kernels/stream_store.hpp"

#include "attnscope/kernels/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// Maximum of a row and whether every entry is finite.
template <class Scalar>
struct MaxAndFiniteness {
  Scalar max;
  bool finite;
};

/// Minimum, maximum and sum of a row, and whether every entry is finite (min/max/sum are meaningless otherwise).
template <class Scalar>
struct RowStatistics {
  Scalar min, max, sum;
  bool finite;
};

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

/// What the exact softmax Jacobian norm needs of the exponentials e_i = exp(scale·(x_i − shift)) of a row whose
/// maximum is `shift` (issue 15): the largest exponential is then exp(0) = 1 exactly, so the mass of every other key
/// is `sum_below_one`, without the cancellation of Σe − 1 when one key dominates; Σe = sum_below_one + count_of_ones
/// (count_of_ones ≥ 2 is a tie at the top, also when an exponential just below the maximum rounds to 1).
template <class Scalar>
struct ExponentialSummary {
  Scalar count_of_ones, sum_below_one, largest_below_one, sum_of_squares;
  /// Σe, the softmax denominator (≥ 1: the largest exponential is 1).
  Scalar sum() const { return sum_below_one + count_of_ones; }
};

/// Sum and count of the shifted entries x_i − shift that are ≥ a threshold (the candidate filter of sparsemax).
template <class Scalar>
struct TailSum {
  Scalar sum;
  Index count;
};

/// Sum, maximum and maximum of p(1 − p) (Bernoulli variance) over a row — the bracket data of the secular solver.
template <class Scalar>
struct SumAndMaxima {
  Scalar sum, max, max_bernoulli_variance;
};

namespace detail {

using Eigen::internal::padd;
using Eigen::internal::pmax;
using Eigen::internal::pmin;
using Eigen::internal::pmul;
using Eigen::internal::predux;
using Eigen::internal::predux_max;
using Eigen::internal::predux_min;
using Eigen::internal::pset1;
using Eigen::internal::psub;

template <class P>
using ScalarOf = typename Eigen::internal::unpacket_traits<P>::type;

/// Horizontal reduction that is the identity on scalars.
template <class P>
ScalarOf<P> sum_lanes(const P& value) {
  if constexpr (std::is_arithmetic<P>::value) return value; else return predux(value);
}
template <class P>
ScalarOf<P> max_lanes(const P& value) {
  if constexpr (std::is_arithmetic<P>::value) return value; else return predux_max(value);
}
template <class P>
ScalarOf<P> min_lanes(const P& value) {
  if constexpr (std::is_arithmetic<P>::value) return value; else return predux_min(value);
}

/// x − x is 0 for finite x and NaN for ±inf and NaN: summing it detects any non-finite entry in one add.
template <class P>
P non_finite_poison(const P& poison, const P& value) {
  return padd(poison, psub(value, value));
}

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
struct StatisticsAccumulator {
  P min, max, sum, poison;
  explicit StatisticsAccumulator(NoParameters)
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
  void merge(const StatisticsAccumulator& other) {
    min = pmin(min, other.min);
    max = pmax(max, other.max);
    sum = padd(sum, other.sum);
    poison = padd(poison, other.poison);
  }
  StatisticsAccumulator<ScalarOf<P>> horizontal() const {
    StatisticsAccumulator<ScalarOf<P>> result(NoParameters{});
    result.min = min_lanes(min);
    result.max = max_lanes(max);
    result.sum = sum_lanes(sum);
    result.poison = sum_lanes(poison);
    return result;
  }
};

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
RowStatistics<Scalar> row_statistics(const Scalar* x, Index n) {
  const auto result = detail::reduce_row<detail::StatisticsAccumulator>(x, n, detail::NoParameters{});
  return {result.min, result.max, result.sum, result.poison == Scalar(0)};
}

/// Scalar reference of row_statistics.
template <class Scalar>
RowStatistics<Scalar> row_statistics_reference(const Scalar* x, Index n) {
  RowStatistics<Scalar> result{std::numeric_limits<Scalar>::infinity(), -std::numeric_limits<Scalar>::infinity(),
                               Scalar(0), true};
  for (Index i = 0; i < n; ++i) {
    result.finite = result.finite && std::isfinite(x[i]);
    result.min = x[i] < result.min ? x[i] : result.min;
    result.max = x[i] > result.max ? x[i] : result.max;
    result.sum += x[i];
  }
  return result;
}

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

namespace detail {

/// exp(scale·(x[k·width + j] − shift)) of the four packets from x into values[0..4) in lock-step
/// (packet_exp_nonpositive_lockstep); with `unit_scale` without the multiplication. With prefetch non-null, first
/// asks the cache for the same four packets' span of prefetch (the next row).
template <bool unit_scale, class P>
EIGEN_ALWAYS_INLINE void exp_shifted_block(const ScalarOf<P>* x, const P& shift_packet, const P& scale_packet,
                                           const ScalarOf<P>* prefetch, P (&values)[4]) {
  constexpr Index width = Eigen::internal::unpacket_traits<P>::size;
  constexpr Index line = 64 / static_cast<Index>(sizeof(ScalarOf<P>));  // entries per 64-byte cache line
  if (prefetch != nullptr)
    for (Index at = 0; at < 4 * width; at += line) prefetch_line(prefetch + at);
  for (Index k = 0; k < 4; ++k) values[k] = psub(load<P>(x + k * width), shift_packet);
  if constexpr (!unit_scale)
    for (P& value : values) value = pmul(value, scale_packet);
  packet_exp_nonpositive_lockstep(values);
}

/// The vector part of exp_shifted_sum_loop on Eigen packets: four accumulators over blocks of four packets (their
/// exponentials in lock-step, exp_shifted_block), then single packets; returns the index where the scalar tail
/// starts, the packets' sum in `sum`. With `unit_scale` the multiplication by scale = 1 is left out (x·1 = x exactly:
/// the same bits, one multiplication fewer per entry).
template <bool store_values, bool unit_scale, class Scalar>
Index exp_shifted_sum_packets(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out,
                              const Scalar* prefetch, Scalar& sum) {
  using P = Packet<Scalar>;
  constexpr Index width = packet_size<Scalar>;
  const P shift_packet = pset1<P>(shift), scale_packet = pset1<P>(scale);
  const auto exp_at = [&](Index at) {
    const P shifted = psub(load<P>(x + at), shift_packet);
    if constexpr (unit_scale) return packet_exp_nonpositive(shifted);
    else return packet_exp_nonpositive(pmul(shifted, scale_packet));
  };
  P first = pset1<P>(Scalar(0)), second = first, third = first, fourth = first;
  Index i = 0;
  for (; i + 4 * width <= n; i += 4 * width) {
    P values[4];
    exp_shifted_block<unit_scale>(x + i, shift_packet, scale_packet, prefetch == nullptr ? nullptr : prefetch + i,
                                  values);
    const P a = values[0], b = values[1], c = values[2], d = values[3];
    if constexpr (store_values) {
      store(out + i, a);
      store(out + i + width, b);
      store(out + i + 2 * width, c);
      store(out + i + 3 * width, d);
    }
    first = padd(first, a);
    second = padd(second, b);
    third = padd(third, c);
    fourth = padd(fourth, d);
  }
  for (; i + width <= n; i += width) {
    const P a = exp_at(i);
    if constexpr (store_values) store(out + i, a);
    first = padd(first, a);
  }
  sum = predux(padd(padd(first, second), padd(third, fourth)));
  return i;
}

/// The fused exp-and-sum loop of exp_shifted_sum; with `store` false only the sum is formed (same order, so the
/// same bits), for callers that recompute the exponentials in a later pass instead of storing them.
/// With `prefetch` non-null, also asks the cache to fetch prefetch[0, n) (the next row a caller will read) while
/// the exponentials keep the arithmetic units busy: the memory read of the next row overlaps this row's compute.
template <bool store_values, class Scalar>
Scalar exp_shifted_sum_loop(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out,
                            const Scalar* prefetch = nullptr) {
  Index i = 0;
  Scalar sum = 0;
  const bool unit_scale = scale == Scalar(1);  // softmax at T = 1: no multiplication (same bits)
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  // a build for an older x86-64 on an AVX2 + FMA CPU: the same loop on 8-float AVX2 packets (runtime_dispatch.hpp)
  if constexpr (std::is_same<Scalar, float>::value) {
    if (avx2::available()) {
      i = unit_scale ? avx2::exp_shifted_sum_body<store_values, true>(x, n, shift, scale, out, prefetch, sum)
                     : avx2::exp_shifted_sum_body<store_values, false>(x, n, shift, scale, out, prefetch, sum);
      for (; i < n; ++i) {
        const Scalar value = exp_reference(scale * (x[i] - shift));
        if constexpr (store_values) out[i] = value;
        sum += value;
      }
      return sum;
    }
  }
#endif
  if constexpr (is_vectorized<Scalar>) {
    i = unit_scale ? exp_shifted_sum_packets<store_values, true>(x, n, shift, scale, out, prefetch, sum)
                   : exp_shifted_sum_packets<store_values, false>(x, n, shift, scale, out, prefetch, sum);
  }
  for (; i < n; ++i) {
    const Scalar value = exp_reference(scale * (x[i] - shift));
    if constexpr (store_values) out[i] = value;
    sum += value;
  }
  return sum;
}

/// Writes out[i] = value(i) for i in [0, n): packet_value(i) gives the packet starting at i, scalar_value(i) one
/// entry. With `streaming`, the packet-aligned body of `out` uses non-temporal stores (kernels/stream_store.hpp; the
/// caller fences, streaming_store_fence) and the head before the first aligned address and the tail use scalar
/// stores; else unaligned packet stores.
template <class Scalar, class PacketValue, class ScalarValue>
void write_row(Index n, Scalar* out, bool streaming, PacketValue&& packet_value, ScalarValue&& scalar_value) {
  Index i = 0;
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    constexpr Index width = packet_size<Scalar>;
    if (streaming && has_streaming_stores<Scalar>) {
      for (; i < n && !is_aligned_to(out + i, sizeof(P)); ++i) out[i] = scalar_value(i);
      for (; i + width <= n; i += width) packet_stream_store(out + i, packet_value(i));
    } else {
      for (; i + width <= n; i += width) store(out + i, packet_value(i));
    }
  }
  for (; i < n; ++i) out[i] = scalar_value(i);
}

}  // namespace detail

/// out[i] = exp(scale·(x[i] − shift)) for shift ≥ max x and scale > 0 (arguments ≤ 0), returning Σ out[i].
/// Fused exp-and-sum with four accumulators; out may alias x.
template <class Scalar>
Scalar exp_shifted_sum(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out) {
  return detail::exp_shifted_sum_loop<true>(x, n, shift, scale, out);
}

/// exp_shifted_sum (same results, bitwise) that also prefetches next_row[0, n) into the cache while it computes, for
/// row loops whose rows come from memory (next_row may be null: no prefetch). out may alias x.
template <class Scalar>
Scalar exp_shifted_sum(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out, const Scalar* next_row) {
  return detail::exp_shifted_sum_loop<true>(x, n, shift, scale, out, next_row);
}

/// out[i] = value for i in [0, n); with `streaming`, non-temporal stores (kernels/stream_store.hpp; the caller fences
/// with streaming_store_fence before another thread reads `out`).
template <class Scalar>
void fill_row(Scalar* out, Index n, Scalar value, bool streaming) {
  if constexpr (is_vectorized<Scalar>) {
    const Packet<Scalar> value_packet = detail::pset1<Packet<Scalar>>(value);
    detail::write_row(n, out, streaming, [&](Index) { return value_packet; }, [&](Index) { return value; });
  } else {
    for (Index i = 0; i < n; ++i) out[i] = value;
  }
}

/// Σ exp(scale·(x[i] − shift)) without storing the terms (bitwise the sum exp_shifted_sum returns).
template <class Scalar>
Scalar exp_shifted_total(const Scalar* x, Index n, Scalar shift, Scalar scale) {
  return detail::exp_shifted_sum_loop<false>(x, n, shift, scale, static_cast<Scalar*>(nullptr));
}

namespace detail {

/// The ExponentialSummary fields over packets (or scalars): below = e where e < 1, else 0.
template <class P>
struct ExponentialSummaryAccumulator {
  P ones, below_sum, below_max, squares;
  ExponentialSummaryAccumulator()
      : ones(pset1<P>(ScalarOf<P>(0))), below_sum(ones), below_max(ones), squares(ones) {}
  void add(const P& value) {
    if constexpr (std::is_arithmetic<P>::value) {
      if (value < P(1)) {
        below_sum += value;
        below_max = std::max(below_max, value);
      } else {
        ones += P(1);
      }
    } else {
      const P one = pset1<P>(ScalarOf<P>(1));
      const P is_below = Eigen::internal::pcmp_lt(value, one);  // all-ones where e < 1
      const P below = Eigen::internal::pand(is_below, value);
      below_sum = padd(below_sum, below);
      below_max = pmax(below_max, below);
      ones = padd(ones, Eigen::internal::pandnot(one, is_below));  // 1 where e = 1
    }
    squares = Eigen::internal::pmadd(value, value, squares);
  }
  ExponentialSummary<ScalarOf<P>> horizontal() const {
    return {sum_lanes(ones), sum_lanes(below_sum), max_lanes(below_max), sum_lanes(squares)};
  }
};

/// The summary of the blocks of four packets whose exponentials are all below one: every block but those holding the
/// row's maximum (exp(0) = 1) or a key that close to it [issue 15]. They need none of the masks of
/// ExponentialSummaryAccumulator::add: one sum, one sum of squares and the block's max, 3.5 operations per packet
/// instead of 7, in three registers (the exponential pass over a 512-key row in L1: 229 ns against 270 ns with the
/// masks on every packet, AMD Zen 3; docs/performance.md).
template <class P>
struct BelowOneAccumulator {
  P sum, squares, max;
  BelowOneAccumulator() : sum(pset1<P>(ScalarOf<P>(0))), squares(sum), max(sum) {}
  EIGEN_ALWAYS_INLINE void add_block(const P (&values)[4], const P& block_max) {
    sum = padd(sum, padd(padd(values[0], values[1]), padd(values[2], values[3])));
    for (int k = 0; k < 4; ++k) squares = Eigen::internal::pmadd(values[k], values[k], squares);
    max = pmax(max, block_max);
  }
};

/// A block holding an exponential equal to 1, through the masks; out of line, so that the rare path keeps its
/// accumulator in memory and the block loop keeps BelowOneAccumulator in registers (inlined, GCC 12 spilled all the
/// accumulators and the loop ran no faster than with the masks on every packet).
/// The packets come by value (in registers): through a reference the block loop stored every block to the stack.
template <class P>
EIGEN_DONT_INLINE void add_block_with_ones(P first, P second, P third, P fourth,
                                           ExponentialSummaryAccumulator<P>& accumulator) {
  accumulator.add(first);
  accumulator.add(second);
  accumulator.add(third);
  accumulator.add(fourth);
}

/// The vector part of exp_shifted_with_summary on Eigen packets: blocks of four packets whose exponentials run in
/// lock-step (exp_shifted_block), then single packets. A block whose largest exponential is below one goes to
/// BelowOneAccumulator, the others (and the single packets) through the masks of ExponentialSummaryAccumulator.
/// Returns where the scalar tail starts.
template <bool unit_scale, class Scalar>
Index exp_shifted_with_summary_packets(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out,
                                       const Scalar* prefetch, ExponentialSummary<Scalar>& summary) {
  using P = Packet<Scalar>;
  constexpr Index width = packet_size<Scalar>;
  const P shift_packet = pset1<P>(shift), scale_packet = pset1<P>(scale), one = pset1<P>(Scalar(1));
  BelowOneAccumulator<P> below_one;
  ExponentialSummaryAccumulator<P> masked;
  Index i = 0;
  for (; i + 4 * width <= n; i += 4 * width) {
    P values[4];
    exp_shifted_block<unit_scale>(x + i, shift_packet, scale_packet, prefetch == nullptr ? nullptr : prefetch + i,
                                  values);
    for (Index k = 0; k < 4; ++k) store(out + i + k * width, values[k]);
    const P block_max = pmax(pmax(values[0], values[1]), pmax(values[2], values[3]));
    if (EIGEN_PREDICT_TRUE(!Eigen::internal::predux_any(Eigen::internal::pcmp_eq(block_max, one))))
      below_one.add_block(values, block_max);
    else
      add_block_with_ones(values[0], values[1], values[2], values[3], masked);
  }
  for (; i + width <= n; i += width) {
    P value = psub(load<P>(x + i), shift_packet);
    if constexpr (!unit_scale) value = pmul(value, scale_packet);
    value = packet_exp_nonpositive(value);
    store(out + i, value);
    masked.add(value);
  }
  summary = masked.horizontal();
  summary.sum_below_one += sum_lanes(below_one.sum);
  summary.largest_below_one = std::max(summary.largest_below_one, max_lanes(below_one.max));
  summary.sum_of_squares += sum_lanes(below_one.squares);
  return i;
}

}  // namespace detail

/// out[i] = exp(scale·(x[i] − shift)) for shift = max x and scale > 0, as exp_shifted_sum, with the ExponentialSummary
/// of the exponentials instead of their sum: the one pass over the exponentials of the exact softmax Jacobian norm
/// from logits (normalize/jacobian.hpp). Prefetches next_row[0, n) while it computes (next_row may be null).
template <class Scalar>
ExponentialSummary<Scalar> exp_shifted_with_summary(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out,
                                                    const Scalar* next_row) {
  ExponentialSummary<Scalar> summary{0, 0, 0, 0};
  Index i = 0;
  bool done = false;  // the vector part ran
  const bool unit_scale = scale == Scalar(1);  // no multiplication by 1 (the same bits)
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) {
      float fields[4];
      i = unit_scale ? detail::avx2::exp_shifted_with_summary_body<true>(x, n, shift, scale, out, next_row, fields)
                     : detail::avx2::exp_shifted_with_summary_body<false>(x, n, shift, scale, out, next_row, fields);
      summary = {fields[0], fields[1], fields[2], fields[3]};
      done = true;
    }
  }
#endif
  if constexpr (is_vectorized<Scalar>) {
    if (!done) {
      i = unit_scale ? detail::exp_shifted_with_summary_packets<true>(x, n, shift, scale, out, next_row, summary)
                     : detail::exp_shifted_with_summary_packets<false>(x, n, shift, scale, out, next_row, summary);
    }
  }
  detail::ExponentialSummaryAccumulator<Scalar> tail;
  for (; i < n; ++i) {
    out[i] = exp_reference(scale * (x[i] - shift));
    tail.add(out[i]);
  }
  return {summary.count_of_ones + tail.ones, summary.sum_below_one + tail.below_sum,
          std::max(summary.largest_below_one, tail.below_max), summary.sum_of_squares + tail.squares};
}

/// Scalar reference of exp_shifted_with_summary.
template <class Scalar>
ExponentialSummary<Scalar> exp_shifted_with_summary_reference(const Scalar* x, Index n, Scalar shift, Scalar scale,
                                                              Scalar* out) {
  detail::ExponentialSummaryAccumulator<Scalar> accumulator;
  for (Index i = 0; i < n; ++i) {
    out[i] = exp_reference(scale * (x[i] - shift));
    accumulator.add(out[i]);
  }
  return {accumulator.ones, accumulator.below_sum, accumulator.below_max, accumulator.squares};
}

/// out[i] = exp(scale·(x[i] − shift))·factor (arguments ≤ 0), every entry by the packet exp (also the tails), times
/// `factor` (one rounding more). With `streaming`, non-temporal stores (for outputs larger than the cache; the caller
/// fences with streaming_store_fence before another thread reads `out`); out may alias x. Bitwise equal for either
/// value of `streaming`.
template <class Scalar>
void exp_shifted_scaled_row(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar factor, Scalar* out,
                            bool streaming) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) return detail::avx2::exp_shifted_scaled_row(x, n, shift, scale, factor, out, streaming);
  }
#endif
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    const P shift_packet = detail::pset1<P>(shift), scale_packet = detail::pset1<P>(scale);
    const P factor_packet = detail::pset1<P>(factor);
    detail::write_row(
        n, out, streaming,
        [&](Index at) {
          return detail::pmul(
              packet_exp_nonpositive(detail::pmul(detail::psub(detail::load<P>(x + at), shift_packet), scale_packet)),
              factor_packet);
        },
        [&](Index at) {  // the packet exp on one lane: every entry is computed the same way for either store kind
          const P value = packet_exp_nonpositive(detail::pset1<P>(scale * (x[at] - shift)));
          return Eigen::internal::pfirst(value) * factor;
        });
  } else {
    for (Index i = 0; i < n; ++i) out[i] = exp_reference(scale * (x[i] - shift)) * factor;
  }
}

/// Scalar reference of exp_shifted_scaled_row.
template <class Scalar>
void exp_shifted_scaled_row_reference(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar factor,
                                      Scalar* out) {
  for (Index i = 0; i < n; ++i) out[i] = exp_reference(scale * (x[i] - shift)) * factor;
}

/// out[i] = x[i]·factor; with `streaming`, non-temporal stores (for outputs larger than the cache; the caller fences
/// with streaming_store_fence before another thread reads `out`). x and out must not overlap unless equal. Bitwise
/// equal to scale_row.
template <class Scalar>
void scale_row_into(const Scalar* x, Index n, Scalar factor, Scalar* out, bool streaming) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) return detail::avx2::scale_row_into(x, n, factor, out, streaming);
  }
#endif
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    const P factor_packet = detail::pset1<P>(factor);
    detail::write_row(
        n, out, streaming, [&](Index at) { return detail::pmul(detail::load<P>(x + at), factor_packet); },
        [&](Index at) { return x[at] * factor; });
  } else {
    for (Index i = 0; i < n; ++i) out[i] = x[i] * factor;
  }
}

/// scale_row_into(x, n, factor, out, streaming) and row_max(next, next_n) in one loop: the loads of the next row (for
/// example the softmax row after this one, already prefetched) ride along the store-bound scale pass instead of a pass
/// of their own. Bitwise both results (the maximum and the finiteness check do not depend on the order). For rows that
/// fit in L1 beside the buffer (softmax_into uses it up to 8 KiB rows; docs/performance.md, issue 15). next_n ≥ 1;
/// `next` must not overlap `out`. The store loop is written out rather than through write_row: with the max
/// accumulators updated inside write_row's callbacks, softmax_into at 16384×512 fell from ≈ 0.7 to 0.47–0.52 of a
/// copy.
template <class Scalar>
MaxAndFiniteness<Scalar> scale_row_into_and_row_max(const Scalar* x, Index n, Scalar factor, Scalar* out,
                                                    bool streaming, const Scalar* next, Index next_n) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // the dispatched passes one after the other
    if (detail::avx2::available()) {
      scale_row_into(x, n, factor, out, streaming);
      return row_max(next, next_n);
    }
  }
#endif
  const Index common = std::min(n, next_n);
  detail::MaxAccumulator<Scalar> scalar_max(detail::NoParameters{});
  Index i = 0, body_begin = 0, body_end = 0;  // next[body_begin, body_end) is reduced in packets, the rest in scalars
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    constexpr Index width = packet_size<Scalar>;
    const bool stream = streaming && has_streaming_stores<Scalar>;
    if (stream)  // the unaligned head of `out` with scalar stores
      for (; i < n && !detail::is_aligned_to(out + i, sizeof(P)); ++i) out[i] = x[i] * factor;
    body_begin = body_end = i;
    if (common > i) body_end = i + (common - i) / width * width;
    const P factor_packet = detail::pset1<P>(factor);
    P max = detail::pset1<P>(-std::numeric_limits<Scalar>::infinity()), poison = detail::pset1<P>(Scalar(0));
    for (; i < body_end; i += width) {
      const P scaled = detail::pmul(detail::load<P>(x + i), factor_packet);
      if (stream) detail::packet_stream_store(out + i, scaled); else detail::store(out + i, scaled);
      const P value = detail::load<P>(next + i);
      max = detail::pmax(max, value);
      poison = detail::non_finite_poison(poison, value);
    }
    scalar_max.max = detail::max_lanes(max);
    scalar_max.poison = detail::sum_lanes(poison);
    for (; i + width <= n; i += width) {
      const P scaled = detail::pmul(detail::load<P>(x + i), factor_packet);
      if (stream) detail::packet_stream_store(out + i, scaled); else detail::store(out + i, scaled);
    }
  }
  for (; i < n; ++i) out[i] = x[i] * factor;
  for (Index k = 0; k < std::min(body_begin, next_n); ++k) scalar_max.add(next[k]);
  for (Index k = body_end; k < next_n; ++k) scalar_max.add(next[k]);
  return {scalar_max.max, scalar_max.poison == Scalar(0)};
}

/// Scalar reference of scale_row_into.
template <class Scalar>
void scale_row_into_reference(const Scalar* x, Index n, Scalar factor, Scalar* out) {
  for (Index i = 0; i < n; ++i) out[i] = x[i] * factor;
}

/// Scalar reference of exp_shifted_sum.
template <class Scalar>
Scalar exp_shifted_sum_reference(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out) {
  Scalar sum = 0;
  for (Index i = 0; i < n; ++i) {
    out[i] = exp_reference(scale * (x[i] - shift));
    sum += out[i];
  }
  return sum;
}

/// x[i] *= factor for a contiguous row (vectorized).
template <class Scalar>
void scale_row(Scalar* x, Index n, Scalar factor) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) return detail::avx2::scale_row_into(x, n, factor, x, false);
  }
#endif
  Index i = 0;
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    constexpr Index width = packet_size<Scalar>;
    const P factor_packet = detail::pset1<P>(factor);
    for (; i + width <= n; i += width) detail::store(x + i, detail::pmul(detail::load<P>(x + i), factor_packet));
  }
  for (; i < n; ++i) x[i] *= factor;
}

/// Scalar reference of scale_row.
template <class Scalar>
void scale_row_reference(Scalar* x, Index n, Scalar factor) {
  for (Index i = 0; i < n; ++i) x[i] *= factor;
}

/// Index of the first entry equal to `value` (n if none).
template <class Scalar>
Index find_first(const Scalar* x, Index n, Scalar value) {
  for (Index i = 0; i < n; ++i)
    if (x[i] == value) return i;
  return n;
}

}  // namespace attnscope::kernels

#include "attnscope/kernels/diagnostics_pop.hpp"
