// attnscope/kernels/select_at_least.hpp — the entries of a row that are ≥ a threshold, copied in their order to the
// front of an output buffer (stream compaction): the candidate filter of the streaming top-k search
// (stream/detail/reduce_row.hpp).
//
// select_at_least_reference is the definition, one branch-free pass: out[count] = x[j]; count += (x[j] ≥ t).
// On an AVX2 CPU (chosen at run time, whatever the build's -march; float rows only) select_at_least compares eight
// entries at once, turns the comparison into an 8-bit mask (vmovmskps), and moves the selected lanes to the front with
// one vpermps whose indices come from a 256-entry table (the lane numbers of the mask's set bits, in order, packed
// three bits each) [derived]; the eight lanes are stored at out + count and count grows by the mask's population
// count. The entries kept, their order and the count are those of the reference, bit for bit
// (tests/kernels/test_select_at_least.cpp); what lies in out past the count differs.
//
// The comparison is IEEE ≥ (false when either side is NaN) in both paths. out must hold n entries: every store,
// scalar or vector, lands in out[0, n).
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/cpu_features.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(EIGEN_DONT_VECTORIZE) && \
    !defined(ATTNSCOPE_NO_RUNTIME_DISPATCH)
#define ATTNSCOPE_SELECT_AVX2 1
#include "attnscope/kernels/detail/simd_x86.hpp"
#endif

namespace attnscope::kernels {

/// Copies the entries of x[0, n) that are ≥ threshold, in order, to out[0, count) and returns count (see the header
/// comment). out holds n entries (its entries past the count are written too). O(n).
template <class Scalar>
Index select_at_least_reference(const Scalar* x, Index n, Scalar threshold, Scalar* out) {
  Index count = 0;
  for (Index j = 0; j < n; ++j) {
    out[count] = x[j];
    count += x[j] >= threshold ? 1 : 0;
  }
  return count;
}

namespace detail {

/// For each 8-bit mask m, the lane numbers of m's set bits in increasing order, three bits each (the first in bits
/// 0–2); the lanes past the population count are 0.
constexpr std::array<std::uint32_t, 256> compaction_table() {
  std::array<std::uint32_t, 256> table{};
  for (unsigned mask = 0; mask < 256; ++mask) {
    std::uint32_t packed = 0;
    unsigned position = 0;
    for (unsigned lane = 0; lane < 8; ++lane)
      if (mask >> lane & 1u) packed |= lane << (3 * position++);
    table[mask] = packed;
  }
  return table;
}
inline constexpr std::array<std::uint32_t, 256> compaction_lanes = compaction_table();

#if defined(ATTNSCOPE_SELECT_AVX2)
/// select_at_least_reference on AVX2 for float rows (see the header comment).
__attribute__((target("avx2"))) inline Index select_at_least_avx2(const float* x, Index n, float threshold,
                                                                  float* out) {
  const x86::f32x8 bound = x86::broadcast8(threshold);
  const x86::u32x8 shifts = {0, 3, 6, 9, 12, 15, 18, 21};
  Index count = 0, j = 0;
  for (; j + 8 <= n; j += 8) {
    const x86::f32x8 values = x86::load8(x + j);
    const int mask = x86::movemask(values >= bound);
    const x86::u32x8 lanes = ((x86::u32x8{} + compaction_lanes[static_cast<unsigned>(mask)]) >> shifts) & 7u;
    x86::store8(out + count, __builtin_ia32_permvarsf256(values, x86::bits_as<x86::i32x8>(lanes)));
    count += __builtin_popcount(static_cast<unsigned>(mask));
  }
  return count + select_at_least_reference(x + j, n - j, threshold, out + count);
}
#endif

}  // namespace detail

/// Whether select_at_least runs the AVX2 path for float rows here (x86-64 with GCC or Clang, a CPU with AVX2).
inline bool select_at_least_avx2_available() {
#if defined(ATTNSCOPE_SELECT_AVX2)
  return detail::cpu_has_avx2_fma();
#else
  return false;
#endif
}

/// select_at_least_reference's result (count and out[0, count), bit for bit), through AVX2 for float rows where the CPU
/// has it. O(n).
template <class Scalar>
Index select_at_least(const Scalar* x, Index n, Scalar threshold, Scalar* out) {
#if defined(ATTNSCOPE_SELECT_AVX2)
  if constexpr (std::is_same<Scalar, float>::value)
    if (select_at_least_avx2_available()) return detail::select_at_least_avx2(x, n, threshold, out);
#endif
  return select_at_least_reference(x, n, threshold, out);
}

}  // namespace attnscope::kernels
