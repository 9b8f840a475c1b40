// attnscope/kernels/stream_store.hpp — non-temporal ("streaming") packet stores for outputs larger than the caches.
//
// A normal store to a line that is not in cache first reads the line from memory (write-allocate, "read for
// ownership"), so writing an out-of-cache output costs a read and a write per byte; a streaming store (x86
// MOVNTPS/MOVNTPD, _mm*_stream_*) writes whole lines through write-combining buffers without reading them, and does
// not evict useful data from the caches. That is what a large memcpy does (glibc switches to streaming stores above
// a fraction of the last-level cache), and it is the difference between softmax at ≈ 0.6 and ≥ 0.7 of a copy's
// bandwidth (docs/performance.md, "Row kernels at the memory limit"). Only worth it when the output will not be read
// again soon from cache: callers enable it for outputs of at least streaming_store_threshold_bytes.
// Streaming stores need an address aligned to the packet size; on targets without them (no SSE2, NEON,
// EIGEN_DONT_VECTORIZE) the functions fall back to ordinary stores, so results never depend on the path.
#pragma once

#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"

// The streaming stores of the packet width this build targets: SSE2's (<emmintrin.h>) in a generic x86-64 build,
// AVX's and AVX-512's (<immintrin.h>) in a build for them. Eigen's packets already include the same header, so this
// adds no parsing; in particular a generic build does not pay for <immintrin.h>.
#if defined(__AVX__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// Output size (bytes) from which the whole-matrix row kernels (softmax_into) switch to streaming stores: above
/// about half the last-level cache of current server cores the output cannot stay cached for its next reader
/// anyway (glibc's memcpy uses a similar rule, 3/4 of the per-thread share of the last-level cache).
inline constexpr std::size_t streaming_store_threshold_bytes = std::size_t{16} << 20;

/// Whether packet_stream_store emits real non-temporal stores for Packet<Scalar> with these compile flags.
template <class Scalar>
inline constexpr bool has_streaming_stores =
#if defined(__SSE2__)
    is_vectorized<Scalar> && (sizeof(Packet<Scalar>) == 16
#if defined(__AVX__)
                              || sizeof(Packet<Scalar>) == 32
#endif
#if defined(__AVX512F__)
                              || sizeof(Packet<Scalar>) == 64
#endif
                              );
#else
    false;
#endif

namespace detail {

/// Whether `pointer` is aligned to `bytes` (a power of two).
template <class Scalar>
bool is_aligned_to(const Scalar* pointer, std::size_t bytes) {
  return (reinterpret_cast<std::uintptr_t>(pointer) & (bytes - 1)) == 0;
}

/// Non-temporal store of one packet to `to`, which must be aligned to sizeof(P); an ordinary aligned store where the
/// target has no streaming store for P.
template <class P>
void packet_stream_store(typename Eigen::internal::unpacket_traits<P>::type* to, const P& value) {
  using Scalar = typename Eigen::internal::unpacket_traits<P>::type;
  constexpr bool single = sizeof(Scalar) == 4;
#if defined(__AVX512F__)
  if constexpr (sizeof(P) == 64) {
    if constexpr (single) _mm512_stream_ps(to, value); else _mm512_stream_pd(to, value);
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (sizeof(P) == 32) {
    if constexpr (single) _mm256_stream_ps(to, value); else _mm256_stream_pd(to, value);
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (sizeof(P) == 16) {
    if constexpr (single) _mm_stream_ps(to, value); else _mm_stream_pd(to, value);
    return;
  }
#endif
  Eigen::internal::pstore(to, value);
}

}  // namespace detail

/// Orders the streaming stores issued so far before any later store (x86 SFENCE; a no-op elsewhere). The kernels that
/// take `streaming` do not fence: a caller fences once after its last streaming row (softmax_into: once per block
/// of rows), before another thread reads the output. A fence after every row drains the write-combining buffers row
/// by row and cost 15–40% of softmax_into (docs/performance.md); the writing thread itself
/// always reads its own stores.
inline void streaming_store_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}
}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
