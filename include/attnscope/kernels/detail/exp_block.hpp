// attnscope/kernels/detail/exp_block.hpp — the exponentials of four packets in lock-step with the prefetch of the
// next row: the block both exponential loops (exp_sum.hpp, exp_summary.hpp) are made of.
#pragma once

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/exp.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/detail/packet_reduction.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

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

}  // namespace detail

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
