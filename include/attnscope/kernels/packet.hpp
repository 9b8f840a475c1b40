// attnscope/kernels/packet.hpp — the SIMD vocabulary of the row kernels: Eigen's packet math (Eigen 3.4,
// Eigen/src/Core/GenericPacketMath.h). Packet<float> is the widest packet the compiler flags allow (Packet16f with
// AVX-512, Packet8f with AVX, Packet4f with SSE2, NEON, ...) and plain `float` when Eigen does not vectorize, so the
// kernels compile and stay correct without any -march flag.
#pragma once

#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// The widest Eigen packet of `Scalar` enabled by the compile flags (the scalar itself without vectorization).
template <class Scalar>
using Packet = typename Eigen::internal::packet_traits<Scalar>::type;

/// Number of lanes of Packet<Scalar> (1 without vectorization).
template <class Scalar>
inline constexpr Index packet_size = Eigen::internal::unpacket_traits<Packet<Scalar>>::size;

/// Whether the kernels take a vector path for `Scalar` (else the scalar reference code runs).
template <class Scalar>
inline constexpr bool is_vectorized = (packet_size<Scalar> > 1);

namespace detail {

/// Asks the cache for the line holding `address` (read, keep in all levels: prefetcht0 on x86). Calls the compiler's
/// builtin directly: through Eigen::internal::prefetch (an ordinary inline function), GCC 12 dropped the prefetch
/// of the exp loops once they were inlined into an always-inline block (native builds then issued no prefetch at all,
/// and softmax_into at 4096×4096 ran 1.25–1.3× slower; docs/performance.md). tests/codegen checks the prefetch.
EIGEN_ALWAYS_INLINE void prefetch_line(const void* address) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(address, 0, 3);
#else
  static_cast<void>(address);
#endif
}

/// Unaligned packet load / store (rows of a RowMatrix start at arbitrary offsets).
template <class P>
P load(const typename Eigen::internal::unpacket_traits<P>::type* from) {
  return Eigen::internal::ploadu<P>(from);
}
template <class P>
void store(typename Eigen::internal::unpacket_traits<P>::type* to, const P& value) {
  Eigen::internal::pstoreu(to, value);
}

/// Runs a reduction over one contiguous row with four independent packet accumulators (instruction-level
/// parallelism), merges them, reduces horizontally and finishes the tail with the scalar accumulator.
/// `Accumulator<T>` must be constructible from `parameters`, provide `add(const T& values)`, `merge(const
/// Accumulator&)` and, for packets, `Accumulator<Scalar> horizontal() const`.
template <template <class> class Accumulator, class Scalar, class Parameters>
Accumulator<Scalar> reduce_row(const Scalar* values, Index n, const Parameters& parameters) {
  Index i = 0;
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    constexpr Index width = packet_size<Scalar>;
    if (n >= width) {
      Accumulator<P> first(parameters), second(parameters), third(parameters), fourth(parameters);
      for (; i + 4 * width <= n; i += 4 * width) {
        first.add(load<P>(values + i));
        second.add(load<P>(values + i + width));
        third.add(load<P>(values + i + 2 * width));
        fourth.add(load<P>(values + i + 3 * width));
      }
      for (; i + width <= n; i += width) first.add(load<P>(values + i));
      first.merge(second);
      third.merge(fourth);
      first.merge(third);
      Accumulator<Scalar> result = first.horizontal();
      for (; i < n; ++i) result.add(values[i]);
      return result;
    }
  }
  Accumulator<Scalar> result(parameters);
  for (; i < n; ++i) result.add(values[i]);
  return result;
}

/// Empty parameter pack for accumulators that need none.
struct NoParameters {};

}  // namespace detail
}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
