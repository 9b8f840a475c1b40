// attnscope/kernels/detail/write_row.hpp — the store loop shared by the kernels that write a whole row (fill,
// scale, exponential-and-scale), with or without non-temporal stores.
#pragma once

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/stream_store.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

namespace detail {

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

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
