// attnscope/kernels/runtime_dispatch.hpp — run-time dispatch of the float softmax and Jacobian-norm loops to AVX2 + FMA
// when the translation unit itself was compiled for an older x86-64 (no -mavx2: Eigen's packets are then SSE2, 4
// floats and no FMA, and the exponential costs ≈ 3× — docs/performance.md).
//
// How: the two loops that carry the exponential (exp_shifted_sum's exp-and-sum pass and exp_shifted_scaled_row's
// recompute-and-scale pass), the max and scale passes of the softmax (row_max, scale_row, scale_row_into) and the
// secular sums of the exact Jacobian norm (secular_sums, one division per entry) are written a second time on 8-float
// vectors (kernels/detail/simd_x86.hpp: the compilers' vector extensions, no <immintrin.h>) inside functions marked
// __attribute__((target("avx2,fma"))), which GCC and Clang compile to AVX2 code whatever the translation unit's flags.
// The row kernels call them when the running CPU reports AVX2 and FMA (__builtin_cpu_supports, a read of the compiler
// runtime's CPU model filled in at program start), and their Eigen packet code otherwise. Eigen's packet math itself cannot be dispatched: its packet types are fixed by the flags
// when Eigen is first included.
//
// The AVX2 exponential is exactly the packet_exp_nonpositive of kernels/exp.hpp (same reduction, same degree-6
// polynomial, same FMAs), so it meets the same accuracy contract (≤ 2 ULP against std::exp, tests/kernels/
// test_runtime_dispatch.cpp) and gives, lane for lane, the bits an -march=x86-64-v3 build gives.
//
// Active only on x86-64 with GCC or Clang, when __AVX2__ is not defined (a build for AVX2 or wider needs no
// dispatch) and Eigen vectorizes (no EIGEN_DONT_VECTORIZE); define ATTNSCOPE_NO_RUNTIME_DISPATCH to switch it off.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/detail/cpu_features.hpp"
#include "attnscope/kernels/packet.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__) && \
    !defined(EIGEN_DONT_VECTORIZE) && !defined(ATTNSCOPE_NO_RUNTIME_DISPATCH)
#define ATTNSCOPE_RUNTIME_DISPATCH_AVX2 1
#include "attnscope/kernels/detail/simd_x86.hpp"
#endif

namespace attnscope::kernels {

#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
namespace detail::avx2 {
/// Whether the running CPU has AVX2 and FMA (the condition for calling anything in this namespace).
inline bool available() { return cpu_has_avx2_fma(); }
}  // namespace detail::avx2
#endif

/// The instruction set the dispatched float loops (exponential, scale, secular sums) go to at run time on this CPU:
/// "avx2+fma" when the dispatch is compiled in and the CPU has AVX2 and FMA, else "none" (the compile-time packets
/// run).
inline const char* runtime_dispatch_target() {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  return detail::avx2::available() ? "avx2+fma" : "none";
#else
  return "none";
#endif
}

/// Lanes of the packets the exponential loops (exp_shifted_sum, exp_shifted_scaled_row) use for `Scalar` on this
/// CPU: 8 for float when dispatched to AVX2, else packet_size<Scalar>. The scalar tail of exp_shifted_sum starts at
/// the last multiple of it.
template <class Scalar>
Index exp_loop_packet_size() {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if (std::is_same<Scalar, float>::value && detail::avx2::available()) return 8;
#endif
  return packet_size<Scalar>;
}

#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
namespace detail::avx2 {

using x86::bits_as;
using x86::broadcast8;
using x86::f32x8;
using x86::fma;
using x86::i32x8;
using x86::lanewise_max;
using x86::load8;
using x86::max_lanes;
using x86::movemask;
using x86::prefetch_line;
using x86::store8;
using x86::stream8;
using x86::sum_lanes;

#define ATTNSCOPE_AVX2_TARGET __attribute__((target("avx2,fma")))

/// packet_exp_nonpositive_lockstep (kernels/exp.hpp) on K packets of 8 floats, in place: x ≤ 0 (or −inf), results
/// below FLT_MIN flush to 0; each step applied to all K packets before the next.
template <int K>
ATTNSCOPE_AVX2_TARGET inline void exp_nonpositive_lockstep(f32x8 (&x)[K]) {
  const f32x8 magic = broadcast8(12583039.0f);  // 1.5·2^23 + 127, rounds and biases n
  f32x8 biased[K], r[K];
  for (int k = 0; k < K; ++k) x[k] = lanewise_max(x[k], broadcast8(-88.0f));  // n ≥ −127: 2^n field 0 below FLT_MIN
  for (int k = 0; k < K; ++k) biased[k] = fma(x[k], broadcast8(1.44269504088896340736f), magic);
  for (int k = 0; k < K; ++k) r[k] = biased[k] - magic;  // n
  for (int k = 0; k < K; ++k) x[k] = fma(r[k], broadcast8(-0.693359375f), x[k]);  // Cody–Waite,
  for (int k = 0; k < K; ++k) r[k] = fma(r[k], broadcast8(2.12194440e-4f), x[k]);  // two-part ln 2
  // exp(r) by the degree-6 Horner form of packet_exp_nonpositive_lockstep (coefficients fitted on Chebyshev nodes)
  for (int k = 0; k < K; ++k) x[k] = fma(broadcast8(1.3859291e-3f), r[k], broadcast8(8.374764e-3f));
  for (int k = 0; k < K; ++k) x[k] = fma(x[k], r[k], broadcast8(4.1667726e-2f));
  for (int k = 0; k < K; ++k) x[k] = fma(x[k], r[k], broadcast8(1.6666421e-1f));
  for (int k = 0; k < K; ++k) x[k] = fma(x[k], r[k], broadcast8(4.9999994e-1f));
  for (int k = 0; k < K; ++k) x[k] = fma(x[k], r[k], broadcast8(1.0f));
  for (int k = 0; k < K; ++k) x[k] = fma(x[k], r[k], broadcast8(1.0f));
  for (int k = 0; k < K; ++k)  // times 2^n, built in the exponent field
    x[k] = x[k] * bits_as<f32x8>(bits_as<i32x8>(biased[k]) << 23);
}

/// packet_exp_nonpositive (kernels/exp.hpp) on 8 floats: exp_nonpositive_lockstep of one packet.
template <int = 0>
ATTNSCOPE_AVX2_TARGET inline f32x8 exp_nonpositive(f32x8 x) {
  f32x8 packets[1] = {x};
  exp_nonpositive_lockstep(packets);
  return packets[0];
}

/// exp(scale·(x − shift)) of one float by the 8-lane code (the tails of exp_shifted_scaled_row).
template <int = 0>
ATTNSCOPE_AVX2_TARGET inline float exp_nonpositive_one(float argument) {
  return exp_nonpositive(broadcast8(argument))[0];
}

/// exp(scale·(x[at] − shift)) on the 8 entries from `at`; with unit_scale (scale = 1) without the multiplication.
template <bool unit_scale = false>
ATTNSCOPE_AVX2_TARGET inline f32x8 exp_shifted_at(const float* x, Index at, f32x8 shift, f32x8 scale) {
  const f32x8 shifted = load8(x + at) - shift;
  if constexpr (unit_scale) return exp_nonpositive(shifted);
  else return exp_nonpositive(shifted * scale);
}

/// exp_shifted_at on the four packets from `at`, in lock-step (exp_nonpositive_lockstep; bitwise the same). With
/// prefetch non-null, first asks the cache for prefetch[at, at + 32) (the next row; exp_shifted_block of
/// kernels/detail/exp_block.hpp on AVX2).
template <bool unit_scale = false>
ATTNSCOPE_AVX2_TARGET inline void exp_shifted_four(const float* x, Index at, f32x8 shift, f32x8 scale,
                                                   const float* prefetch, f32x8 (&values)[4]) {
  if (prefetch != nullptr)
    for (Index line = at; line < at + 32; line += 16) prefetch_line(prefetch + line);
  for (int k = 0; k < 4; ++k) {
    values[k] = load8(x + at + 8 * k) - shift;
    if constexpr (!unit_scale) values[k] = values[k] * scale;
  }
  exp_nonpositive_lockstep(values);
}

/// The vector part of exp_shifted_sum_loop (kernels/exp_sum.hpp) on 8-float AVX2 packets: four accumulators
/// over blocks of 32, then single packets; returns the index where the scalar tail starts and the packets' sum.
/// With store_values, out[0, returned index) receives the exponentials; with prefetch, prefetch[0, n) is requested;
/// with unit_scale (scale = 1) the multiplication is left out (the same bits). With spread, also accumulates
/// Σ e_i·(shift − x_i) into `spread` (four more accumulators, multiply-adds); the exponentials and the sum are the
/// same bits either way.
template <bool store_values, bool unit_scale, bool with_spread = false>
ATTNSCOPE_AVX2_TARGET Index exp_shifted_sum_body(const float* x, Index n, float shift, float scale, float* out,
                                                 const float* prefetch, float& sum, float* spread = nullptr) {
  const f32x8 shift_packet = broadcast8(shift), scale_packet = broadcast8(scale);
  f32x8 first{}, second = first, third = first, fourth = first;
  f32x8 spreads[4] = {first, first, first, first};
  Index i = 0;
  for (; i + 32 <= n; i += 32) {
    f32x8 values[4];
    exp_shifted_four<unit_scale>(x, i, shift_packet, scale_packet, prefetch, values);
    const f32x8 a = values[0], b = values[1], c = values[2], d = values[3];
    if constexpr (with_spread)  // reads x before the stores: out may alias x
      for (int k = 0; k < 4; ++k) {
        const f32x8 gap = shift_packet - load8(x + i + 8 * k);
        spreads[k] = fma(values[k], gap, spreads[k]);
      }
    if constexpr (store_values) {
      store8(out + i, a);
      store8(out + i + 8, b);
      store8(out + i + 16, c);
      store8(out + i + 24, d);
    }
    first = first + a;
    second = second + b;
    third = third + c;
    fourth = fourth + d;
  }
  for (; i + 8 <= n; i += 8) {
    const f32x8 a = exp_shifted_at<unit_scale>(x, i, shift_packet, scale_packet);
    if constexpr (with_spread)
      spreads[0] = fma(a, shift_packet - load8(x + i), spreads[0]);
    if constexpr (store_values) store8(out + i, a);
    first = first + a;
  }
  sum = sum_lanes((first + second) + (third + fourth));
  if constexpr (with_spread)
    *spread = sum_lanes((spreads[0] + spreads[1]) + (spreads[2] + spreads[3]));
  return i;
}

/// The accumulators of exp_shifted_with_summary on AVX2 (below = e where e < 1, else 0).
struct ExponentialSummaryPackets {
  f32x8 ones, below_sum, below_max, squares;
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void clear() {
    ones = below_sum = below_max = squares = f32x8{};
  }
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void add(f32x8 value) {
    const f32x8 one = broadcast8(1.0f);
    const i32x8 is_below = value < one;  // all-ones where e < 1
    const f32x8 below = bits_as<f32x8>(is_below & bits_as<i32x8>(value));
    below_sum = below_sum + below;
    below_max = lanewise_max(below_max, below);
    ones = ones + bits_as<f32x8>(~is_below & bits_as<i32x8>(one));  // 1 where e = 1
    squares = fma(value, value, squares);
  }
};

/// detail::BelowOneAccumulator (kernels/exp_summary.hpp) on AVX2: the blocks whose exponentials are all below one.
struct BelowOnePackets {
  f32x8 sum, squares, max;
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void clear() {
    sum = squares = max = f32x8{};
  }
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void add_block(const f32x8 (&values)[4], f32x8 block_max) {
    sum = sum + ((values[0] + values[1]) + (values[2] + values[3]));
    for (int k = 0; k < 4; ++k) squares = fma(values[k], values[k], squares);
    max = lanewise_max(max, block_max);
  }
};

/// detail::add_block_with_ones on AVX2: a block holding a 1, through the masks, out of line.
template <int = 0>
ATTNSCOPE_AVX2_TARGET __attribute__((noinline)) void add_block_with_ones(f32x8 first, f32x8 second, f32x8 third,
                                                                         f32x8 fourth,
                                                                         ExponentialSummaryPackets& accumulator) {
  accumulator.add(first);
  accumulator.add(second);
  accumulator.add(third);
  accumulator.add(fourth);
}

/// exp_shifted_with_summary (kernels/exp_summary.hpp) on AVX2, the vector part: blocks of four packets in lock-step,
/// a block below one to BelowOnePackets and the others through the masks, then single packets through the masks, in
/// the order of the Eigen packet loop (so the bits agree); fields[0..4) receive the count of ones, the sum and the max
/// below 1 and the sum of squares. Returns where the scalar tail starts.
template <bool unit_scale>
ATTNSCOPE_AVX2_TARGET Index exp_shifted_with_summary_body(const float* x, Index n, float shift, float scale, float* out,
                                                          const float* prefetch, float* fields) {
  const f32x8 shift_packet = broadcast8(shift), scale_packet = broadcast8(scale);
  const f32x8 one = broadcast8(1.0f);
  BelowOnePackets below_one;
  below_one.clear();
  ExponentialSummaryPackets masked;
  masked.clear();
  Index i = 0;
  for (; i + 32 <= n; i += 32) {
    f32x8 values[4];
    exp_shifted_four<unit_scale>(x, i, shift_packet, scale_packet, prefetch, values);
    for (int k = 0; k < 4; ++k) store8(out + i + 8 * k, values[k]);
    const f32x8 block_max = lanewise_max(lanewise_max(values[0], values[1]), lanewise_max(values[2], values[3]));
    if (__builtin_expect(movemask(block_max == one) == 0, 1))
      below_one.add_block(values, block_max);
    else
      add_block_with_ones(values[0], values[1], values[2], values[3], masked);
  }
  for (; i + 8 <= n; i += 8) {
    const f32x8 value = exp_shifted_at<unit_scale>(x, i, shift_packet, scale_packet);
    store8(out + i, value);
    masked.add(value);
  }
  fields[0] = sum_lanes(masked.ones);
  fields[1] = sum_lanes(masked.below_sum) + sum_lanes(below_one.sum);
  fields[2] = std::max(max_lanes(masked.below_max), max_lanes(below_one.max));
  fields[3] = sum_lanes(masked.squares) + sum_lanes(below_one.squares);
  return i;
}

/// The whole of exp_shifted_scaled_row (kernels/exp_sum.hpp) on AVX2: out[i] = exp(scale·(x[i] − shift))·factor,
/// every entry by the 8-lane exponential; with `streaming`, non-temporal stores on the 32-byte aligned body (no fence:
/// the caller fences, kernels/stream_store.hpp).
template <int = 0>
ATTNSCOPE_AVX2_TARGET void exp_shifted_scaled_row(const float* x, Index n, float shift, float scale, float factor,
                                                  float* out, bool streaming) {
  const f32x8 shift_packet = broadcast8(shift), scale_packet = broadcast8(scale);
  const f32x8 factor_packet = broadcast8(factor);
  Index i = 0;
  if (streaming) {
    for (; i < n && reinterpret_cast<std::uintptr_t>(out + i) % 32 != 0; ++i)
      out[i] = exp_nonpositive_one(scale * (x[i] - shift)) * factor;
    for (; i + 8 <= n; i += 8)
      stream8(out + i, exp_shifted_at(x, i, shift_packet, scale_packet) * factor_packet);
  } else {
    for (; i + 8 <= n; i += 8)
      store8(out + i, exp_shifted_at(x, i, shift_packet, scale_packet) * factor_packet);
  }
  for (; i < n; ++i) out[i] = exp_nonpositive_one(scale * (x[i] - shift)) * factor;
}

/// row_max (kernels/row_extrema.hpp) on AVX2: the maximum of x[0, n) (n ≥ 1) and whether every entry is finite
/// (the sum of x − x, 0 for finite entries and NaN for ±inf or NaN, is 0).
template <int = 0>
ATTNSCOPE_AVX2_TARGET void row_max(const float* x, Index n, float& max, bool& finite) {
  f32x8 maxima[4], poisons[4];
  for (int k = 0; k < 4; ++k) {
    maxima[k] = broadcast8(-__builtin_inff());
    poisons[k] = f32x8{};
  }
  Index i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      const f32x8 value = load8(x + i + 8 * k);
      maxima[k] = lanewise_max(maxima[k], value);
      poisons[k] = poisons[k] + (value - value);
    }
  for (; i + 8 <= n; i += 8) {
    const f32x8 value = load8(x + i);
    maxima[0] = lanewise_max(maxima[0], value);
    poisons[0] = poisons[0] + (value - value);
  }
  max = max_lanes(lanewise_max(lanewise_max(maxima[0], maxima[1]), lanewise_max(maxima[2], maxima[3])));
  float poison = sum_lanes((poisons[0] + poisons[1]) + (poisons[2] + poisons[3]));
  for (; i < n; ++i) {
    max = x[i] > max ? x[i] : max;
    poison += x[i] - x[i];
  }
  finite = poison == 0.0f;
}

/// scale_row_into (kernels/scale_row.hpp) on AVX2: out[i] = x[i]·factor, with `streaming` non-temporal stores on
/// the 32-byte aligned body (no fence: the caller fences); x and out must not overlap unless equal (then it is
/// scale_row).
template <int = 0>
ATTNSCOPE_AVX2_TARGET void scale_row_into(const float* x, Index n, float factor, float* out, bool streaming) {
  const f32x8 factor_packet = broadcast8(factor);
  Index i = 0;
  if (streaming) {
    for (; i < n && reinterpret_cast<std::uintptr_t>(out + i) % 32 != 0; ++i) out[i] = x[i] * factor;
    for (; i + 8 <= n; i += 8) stream8(out + i, load8(x + i) * factor_packet);
  } else {
    for (; i + 8 <= n; i += 8) store8(out + i, load8(x + i) * factor_packet);
  }
  for (; i < n; ++i) out[i] = x[i] * factor;
}

/// secular_sums (kernels/secular.hpp) on AVX2: g(λ) = Σ p_i/(p_i − λ) and g'(λ) = Σ p_i/(p_i − λ)², four
/// accumulators over blocks of 32, the tail in scalar code; `value` and `derivative` receive the sums.
template <int = 0>
ATTNSCOPE_AVX2_TARGET void secular_sums(const float* p, Index n, float lambda, float& value, float& derivative) {
  const f32x8 lambda_packet = broadcast8(lambda), one = broadcast8(1.0f);
  f32x8 values[4], derivatives[4];
  for (int k = 0; k < 4; ++k) values[k] = derivatives[k] = f32x8{};
  Index i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      const f32x8 entry = load8(p + i + 8 * k);
      const f32x8 inverse = one / (entry - lambda_packet);  // 1/(p_i − λ)
      const f32x8 term = entry * inverse;                   // p_i/(p_i − λ)
      values[k] = values[k] + term;
      derivatives[k] = fma(term, inverse, derivatives[k]);  // p_i/(p_i − λ)²
    }
  for (; i + 8 <= n; i += 8) {
    const f32x8 entry = load8(p + i);
    const f32x8 inverse = one / (entry - lambda_packet);
    const f32x8 term = entry * inverse;
    values[0] = values[0] + term;
    derivatives[0] = fma(term, inverse, derivatives[0]);
  }
  value = sum_lanes((values[0] + values[1]) + (values[2] + values[3]));
  derivative = sum_lanes((derivatives[0] + derivatives[1]) + (derivatives[2] + derivatives[3]));
  for (; i < n; ++i) {
    const float inverse = 1.0f / (p[i] - lambda);
    value += p[i] * inverse;
    derivative += p[i] * inverse * inverse;
  }
}

/// The five packet accumulators of secular_power_sums: c_k += p/(p − λ)^k per packet (the fifth by an FMA, which
/// balances the multiplications and additions across the FMA and ADD ports). Named members, not an array: GCC clears
/// an array with `rep stos` and keeps it on the stack around the loop.
struct SecularPowerPackets {
  f32x8 first, second, third, fourth, fifth;
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void clear() {
    first = second = third = fourth = fifth = f32x8{};
  }
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void add(f32x8 entry, f32x8 lambda) {
    const f32x8 inverse = broadcast8(1.0f) / (entry - lambda);  // 1/(p_i − λ)
    f32x8 term = entry * inverse;                               // p_i/(p_i − λ)
    first = first + term;
    term = term * inverse;
    second = second + term;
    term = term * inverse;
    third = third + term;
    term = term * inverse;
    fourth = fourth + term;
    fifth = fma(term, inverse, fifth);
  }
};

/// secular_power_sums (kernels/secular.hpp) on AVX2: sums[k] = Σ p_i/(p_i − λ)^(k+1), k = 0..4, two accumulators
/// over blocks of 16, the tail in scalar code. With `with_next_max` (secular_power_sums_and_row_max) also the maximum
/// of next[0, next_n) and whether it is finite, in the same loop while both rows have blocks, then in scalar code.
template <bool with_next_max>
ATTNSCOPE_AVX2_TARGET void secular_power_sums(const float* p, Index n, float lambda, float* sums, const float* next,
                                              Index next_n, float* next_max, bool* next_finite) {
  const f32x8 lambda_packet = broadcast8(lambda);
  SecularPowerPackets even, odd;
  even.clear();
  odd.clear();
  [[maybe_unused]] f32x8 maxima = broadcast8(-__builtin_inff()), poisons = f32x8{};
  Index i = 0, max_end = 0;  // next[0, max_end) is reduced in packets
  for (; i + 16 <= n; i += 16) {
    even.add(load8(p + i), lambda_packet);
    odd.add(load8(p + i + 8), lambda_packet);
    if constexpr (with_next_max) {
      if (i + 16 <= next_n) {
        const f32x8 a = load8(next + i), b = load8(next + i + 8);
        maxima = lanewise_max(maxima, lanewise_max(a, b));
        poisons = poisons + ((a - a) + (b - b));
        max_end = i + 16;
      }
    }
  }
  for (; i + 8 <= n; i += 8) even.add(load8(p + i), lambda_packet);
  sums[0] = sum_lanes(even.first + odd.first);
  sums[1] = sum_lanes(even.second + odd.second);
  sums[2] = sum_lanes(even.third + odd.third);
  sums[3] = sum_lanes(even.fourth + odd.fourth);
  sums[4] = sum_lanes(even.fifth + odd.fifth);
  for (; i < n; ++i) {
    const float inverse = 1.0f / (p[i] - lambda);
    float term = p[i];
    for (int k = 0; k < 5; ++k) {
      term *= inverse;
      sums[k] += term;
    }
  }
  if constexpr (with_next_max) {
    float max = max_lanes(maxima), poison = sum_lanes(poisons);
    for (Index k = max_end; k < next_n; ++k) {
      max = next[k] > max ? next[k] : max;
      poison += next[k] - next[k];
    }
    *next_max = max;
    *next_finite = poison == 0.0f;
  }
}

#undef ATTNSCOPE_AVX2_TARGET

}  // namespace detail::avx2
#endif

}  // namespace attnscope::kernels
