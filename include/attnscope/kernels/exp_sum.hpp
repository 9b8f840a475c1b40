// attnscope/kernels/exp_sum.hpp — the exponentials exp(scale·(x_i − shift)) of a row (arguments ≤ 0): the fused
// exp-and-sum pass of the softmax (four accumulators over blocks of four packets in lock-step, prefetching the next
// row), the sum alone, and the recompute-and-scale pass that writes the normalized row.
#pragma once

#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/exp.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"
#include "attnscope/kernels/detail/exp_block.hpp"
#include "attnscope/kernels/detail/packet_reduction.hpp"
#include "attnscope/kernels/detail/write_row.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

namespace detail {

/// The vector part of exp_shifted_sum_loop on Eigen packets: four accumulators over blocks of four packets (their
/// exponentials in lock-step, exp_shifted_block), then single packets; returns the index where the scalar tail
/// starts, the packets' sum in `sum`. With `unit_scale` the multiplication by scale = 1 is left out (x·1 = x exactly:
/// the same bits, one multiplication fewer per entry). With `with_spread`, also Σ e_i·(shift − x_i) in `*spread`
/// (four more accumulators); the exponentials and the sum are the same bits either way.
template <bool store_values, bool unit_scale, bool with_spread = false, class Scalar>
Index exp_shifted_sum_packets(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out,
                              const Scalar* prefetch, Scalar& sum, Scalar* spread = nullptr) {
  using P = Packet<Scalar>;
  constexpr Index width = packet_size<Scalar>;
  const P shift_packet = pset1<P>(shift), scale_packet = pset1<P>(scale);
  const auto exp_at = [&](Index at) {
    const P shifted = psub(load<P>(x + at), shift_packet);
    if constexpr (unit_scale) return packet_exp_nonpositive(shifted);
    else return packet_exp_nonpositive(pmul(shifted, scale_packet));
  };
  P first = pset1<P>(Scalar(0)), second = first, third = first, fourth = first;
  P spreads[4] = {first, first, first, first};
  Index i = 0;
  for (; i + 4 * width <= n; i += 4 * width) {
    P values[4];
    exp_shifted_block<unit_scale>(x + i, shift_packet, scale_packet, prefetch == nullptr ? nullptr : prefetch + i,
                                  values);
    const P a = values[0], b = values[1], c = values[2], d = values[3];
    if constexpr (with_spread)  // reads x before the stores: out may alias x
      for (Index k = 0; k < 4; ++k)
        spreads[k] = Eigen::internal::pmadd(values[k], psub(shift_packet, load<P>(x + i + k * width)), spreads[k]);
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
    if constexpr (with_spread) spreads[0] = Eigen::internal::pmadd(a, psub(shift_packet, load<P>(x + i)), spreads[0]);
    if constexpr (store_values) store(out + i, a);
    first = padd(first, a);
  }
  sum = predux(padd(padd(first, second), padd(third, fourth)));
  if constexpr (with_spread) *spread = predux(padd(padd(spreads[0], spreads[1]), padd(spreads[2], spreads[3])));
  return i;
}

/// The fused exp-and-sum loop of exp_shifted_sum; with `store` false only the sum is formed (same order, so the
/// same bits), for callers that recompute the exponentials in a later pass instead of storing them. With
/// `with_spread`, also Σ out[i]·(shift − x[i]) into `*spread`, from the same exponentials (exp_shifted_sum_and_spread).
/// With `prefetch` non-null, also asks the cache to fetch prefetch[0, n) (the next row a caller will read) while
/// the exponentials keep the arithmetic units busy: the memory read of the next row overlaps this row's compute.
template <bool store_values, bool with_spread = false, class Scalar>
Scalar exp_shifted_sum_loop(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out,
                            const Scalar* prefetch = nullptr, Scalar* spread = nullptr) {
  Index i = 0;
  Scalar sum = 0, vector_spread = 0;
  const bool unit_scale = scale == Scalar(1);  // softmax at T = 1: no multiplication (same bits)
  const auto tail = [&](Index from) {
    Scalar tail_spread = 0;
    for (Index j = from; j < n; ++j) {
      const Scalar value = exp_reference(scale * (x[j] - shift));
      if constexpr (with_spread) tail_spread += value * (shift - x[j]);
      if constexpr (store_values) out[j] = value;
      sum += value;
    }
    if constexpr (with_spread) *spread = vector_spread + tail_spread;
    return sum;
  };
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  // a build for an older x86-64 on an AVX2 + FMA CPU: the same loop on 8-float AVX2 packets (runtime_dispatch.hpp)
  if constexpr (std::is_same<Scalar, float>::value) {
    if (avx2::available()) {
      i = unit_scale
              ? avx2::exp_shifted_sum_body<store_values, true, with_spread>(x, n, shift, scale, out, prefetch, sum,
                                                                            &vector_spread)
              : avx2::exp_shifted_sum_body<store_values, false, with_spread>(x, n, shift, scale, out, prefetch, sum,
                                                                             &vector_spread);
      return tail(i);
    }
  }
#endif
  if constexpr (is_vectorized<Scalar>) {
    i = unit_scale ? exp_shifted_sum_packets<store_values, true, with_spread>(x, n, shift, scale, out, prefetch, sum,
                                                                              &vector_spread)
                   : exp_shifted_sum_packets<store_values, false, with_spread>(x, n, shift, scale, out, prefetch,
                                                                               sum, &vector_spread);
  }
  return tail(i);
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

/// Σ exp(scale·(x[i] − shift)) without storing the terms (bitwise the sum exp_shifted_sum returns).
template <class Scalar>
Scalar exp_shifted_total(const Scalar* x, Index n, Scalar shift, Scalar scale) {
  return detail::exp_shifted_sum_loop<false>(x, n, shift, scale, static_cast<Scalar*>(nullptr));
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

/// exp_shifted_sum (the same exponentials and sum, bitwise) that also returns the spread Σ out[i]·(shift − x[i]) ≥ 0
/// from the same pass. With shift = max x it gives a softmax row's entropy without a second pass:
/// H = log S + scale·spread / S for S the returned sum, since −log p_i = log S + scale·(shift − x_i) [derived].
/// out may alias x (each entry's gap is read before its exponential is stored).
template <class Scalar>
Scalar exp_shifted_sum_and_spread(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out, Scalar& spread) {
  return detail::exp_shifted_sum_loop<true, true>(x, n, shift, scale, out, static_cast<const Scalar*>(nullptr),
                                                  &spread);
}

/// Scalar reference of exp_shifted_sum_and_spread.
template <class Scalar>
Scalar exp_shifted_sum_and_spread_reference(const Scalar* x, Index n, Scalar shift, Scalar scale, Scalar* out,
                                            Scalar& spread) {
  Scalar sum = 0;
  spread = 0;
  for (Index i = 0; i < n; ++i) {
    const Scalar value = exp_reference(scale * (x[i] - shift));
    spread += value * (shift - x[i]);
    out[i] = value;
    sum += value;
  }
  return sum;
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

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
