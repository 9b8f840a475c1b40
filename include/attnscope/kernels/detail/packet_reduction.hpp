// attnscope/kernels/detail/packet_reduction.hpp — the packet operations the row kernels spell without
// Eigen::internal::, the horizontal reductions that are the identity on scalars (so one accumulator serves packets
// and the scalar tail), and the one-add finiteness check.
#pragma once

#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

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

}  // namespace detail

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
