// attnscope/kernels/scale_row.hpp — the store passes on one row: x·factor in place or into another buffer (the last
// pass of the softmax, optionally fused with the max pass of the next row), and a constant fill; with or without
// non-temporal stores.
#pragma once

#include <algorithm>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"
#include "attnscope/kernels/stream_store.hpp"
#include "attnscope/kernels/detail/packet_reduction.hpp"
#include "attnscope/kernels/detail/write_row.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

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
/// fit in L1 beside the buffer (softmax_into uses it up to 8 KiB rows; docs/performance.md). next_n ≥ 1;
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

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
