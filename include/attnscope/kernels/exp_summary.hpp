// attnscope/kernels/exp_summary.hpp — the exponentials of a row whose maximum is the shift, with their
// ExponentialSummary instead of their sum (the one pass of the exact softmax Jacobian norm from logits): the blocks
// below one in three registers, the blocks holding the maximum through masks.
#pragma once

#include <algorithm>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/exp.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"
#include "attnscope/kernels/detail/exp_block.hpp"
#include "attnscope/kernels/detail/packet_reduction.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// What the exact softmax Jacobian norm needs of the exponentials e_i = exp(scale·(x_i − shift)) of a row whose
/// maximum is `shift` [derived]: the largest exponential is then exp(0) = 1 exactly, so the mass of every other key
/// is `sum_below_one`, without the cancellation of Σe − 1 when one key dominates; Σe = sum_below_one + count_of_ones
/// (count_of_ones ≥ 2 is a tie at the top, also when an exponential just below the maximum rounds to 1).
template <class Scalar>
struct ExponentialSummary {
  Scalar count_of_ones, sum_below_one, largest_below_one, sum_of_squares;
  /// Σe, the softmax denominator (≥ 1: the largest exponential is 1).
  Scalar sum() const { return sum_below_one + count_of_ones; }
};

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
/// row's maximum (exp(0) = 1) or a key that close to it [derived]. They need none of the masks of
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

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
