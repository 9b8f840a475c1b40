// attnscope/kernels/runtime_dispatch.hpp — run-time dispatch of the float softmax and Jacobian-norm loops to AVX2 + FMA
// when the translation unit itself was compiled for an older x86-64 (no -mavx2: Eigen's packets are then SSE2, 4
// floats and no FMA, and the exponential costs ≈ 3× — docs/performance.md).
//
// How: the two loops that carry the exponential (exp_shifted_sum's exp-and-sum pass and exp_shifted_scaled_row's
// recompute-and-scale pass), the max and scale passes of the softmax (row_max, scale_row, scale_row_into) and the
// secular sums of the exact Jacobian norm (secular_sums, one division per entry) are written a second time with AVX2
// intrinsics inside functions marked __attribute__((target("avx2,fma"))), which GCC and Clang compile to AVX2 code
// whatever the translation unit's flags. The row kernels call them when the running CPU reports AVX2 and FMA
// (__builtin_cpu_supports, a read of the compiler runtime's CPU model filled in at program start), and their Eigen
// packet code otherwise. Eigen's packet math itself cannot be dispatched: its packet types are fixed by the flags
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
#include <immintrin.h>
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

#define ATTNSCOPE_AVX2_TARGET __attribute__((target("avx2,fma")))

/// packet_exp_nonpositive_lockstep (kernels/exp.hpp) on K packets of 8 floats, in place: x ≤ 0 (or −inf), results
/// below FLT_MIN flush to 0; each step applied to all K packets before the next.
template <int K>
ATTNSCOPE_AVX2_TARGET inline void exp_nonpositive_lockstep(__m256 (&x)[K]) {
  const __m256 magic = _mm256_set1_ps(12583039.0f);  // 1.5·2^23 + 127, rounds and biases n
  __m256 biased[K], r[K];
  for (int k = 0; k < K; ++k) x[k] = _mm256_max_ps(x[k], _mm256_set1_ps(-88.0f));  // n ≥ −127: 2^n field 0 below FLT_MIN
  for (int k = 0; k < K; ++k) biased[k] = _mm256_fmadd_ps(x[k], _mm256_set1_ps(1.44269504088896340736f), magic);
  for (int k = 0; k < K; ++k) r[k] = _mm256_sub_ps(biased[k], magic);  // n
  for (int k = 0; k < K; ++k) x[k] = _mm256_fmadd_ps(r[k], _mm256_set1_ps(-0.693359375f), x[k]);  // Cody–Waite,
  for (int k = 0; k < K; ++k) r[k] = _mm256_fmadd_ps(r[k], _mm256_set1_ps(2.12194440e-4f), x[k]);  // two-part ln 2
  // exp(r) by the degree-6 Horner form of packet_exp_nonpositive_lockstep (coefficients fitted on Chebyshev nodes)
  for (int k = 0; k < K; ++k) x[k] = _mm256_fmadd_ps(_mm256_set1_ps(1.3859291e-3f), r[k], _mm256_set1_ps(8.374764e-3f));
  for (int k = 0; k < K; ++k) x[k] = _mm256_fmadd_ps(x[k], r[k], _mm256_set1_ps(4.1667726e-2f));
  for (int k = 0; k < K; ++k) x[k] = _mm256_fmadd_ps(x[k], r[k], _mm256_set1_ps(1.6666421e-1f));
  for (int k = 0; k < K; ++k) x[k] = _mm256_fmadd_ps(x[k], r[k], _mm256_set1_ps(4.9999994e-1f));
  for (int k = 0; k < K; ++k) x[k] = _mm256_fmadd_ps(x[k], r[k], _mm256_set1_ps(1.0f));
  for (int k = 0; k < K; ++k) x[k] = _mm256_fmadd_ps(x[k], r[k], _mm256_set1_ps(1.0f));
  for (int k = 0; k < K; ++k)  // times 2^n, built in the exponent field
    x[k] = _mm256_mul_ps(x[k], _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(biased[k]), 23)));
}

/// packet_exp_nonpositive (kernels/exp.hpp) on 8 floats: exp_nonpositive_lockstep of one packet.
template <int = 0>
ATTNSCOPE_AVX2_TARGET inline __m256 exp_nonpositive(__m256 x) {
  __m256 packets[1] = {x};
  exp_nonpositive_lockstep(packets);
  return packets[0];
}

/// exp(scale·(x − shift)) of one float by the 8-lane code (the tails of exp_shifted_scaled_row).
template <int = 0>
ATTNSCOPE_AVX2_TARGET inline float exp_nonpositive_one(float argument) {
  return _mm256_cvtss_f32(exp_nonpositive(_mm256_set1_ps(argument)));
}

/// exp(scale·(x[at] − shift)) on the 8 entries from `at`; with unit_scale (scale = 1) without the multiplication.
template <bool unit_scale = false>
ATTNSCOPE_AVX2_TARGET inline __m256 exp_shifted_at(const float* x, Index at, __m256 shift, __m256 scale) {
  const __m256 shifted = _mm256_sub_ps(_mm256_loadu_ps(x + at), shift);
  if constexpr (unit_scale) return exp_nonpositive(shifted);
  else return exp_nonpositive(_mm256_mul_ps(shifted, scale));
}

/// exp_shifted_at on the four packets from `at`, in lock-step (exp_nonpositive_lockstep; bitwise the same). With
/// prefetch non-null, first asks the cache for prefetch[at, at + 32) (the next row; exp_shifted_block of
/// kernels/detail/exp_block.hpp on AVX2).
template <bool unit_scale = false>
ATTNSCOPE_AVX2_TARGET inline void exp_shifted_four(const float* x, Index at, __m256 shift, __m256 scale,
                                                   const float* prefetch, __m256 (&values)[4]) {
  if (prefetch != nullptr)
    for (Index line = at; line < at + 32; line += 16)
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + line), _MM_HINT_T0);
  for (int k = 0; k < 4; ++k) {
    values[k] = _mm256_sub_ps(_mm256_loadu_ps(x + at + 8 * k), shift);
    if constexpr (!unit_scale) values[k] = _mm256_mul_ps(values[k], scale);
  }
  exp_nonpositive_lockstep(values);
}

template <int = 0>
ATTNSCOPE_AVX2_TARGET inline float sum_lanes(__m256 value) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(value), _mm256_extractf128_ps(value, 1));
  const __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1)));
}

/// The largest of the 8 lanes (finite lanes; row_max reports non-finite input separately).
template <int = 0>
ATTNSCOPE_AVX2_TARGET inline float max_lanes(__m256 value) {
  const __m128 half = _mm_max_ps(_mm256_castps256_ps128(value), _mm256_extractf128_ps(value, 1));
  const __m128 quarter = _mm_max_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_max_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1)));
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
  const __m256 shift_packet = _mm256_set1_ps(shift), scale_packet = _mm256_set1_ps(scale);
  __m256 first = _mm256_setzero_ps(), second = first, third = first, fourth = first;
  __m256 spreads[4] = {first, first, first, first};
  Index i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 values[4];
    exp_shifted_four<unit_scale>(x, i, shift_packet, scale_packet, prefetch, values);
    const __m256 a = values[0], b = values[1], c = values[2], d = values[3];
    if constexpr (with_spread)  // reads x before the stores: out may alias x
      for (int k = 0; k < 4; ++k) {
        const __m256 gap = _mm256_sub_ps(shift_packet, _mm256_loadu_ps(x + i + 8 * k));
        spreads[k] = _mm256_fmadd_ps(values[k], gap, spreads[k]);
      }
    if constexpr (store_values) {
      _mm256_storeu_ps(out + i, a);
      _mm256_storeu_ps(out + i + 8, b);
      _mm256_storeu_ps(out + i + 16, c);
      _mm256_storeu_ps(out + i + 24, d);
    }
    first = _mm256_add_ps(first, a);
    second = _mm256_add_ps(second, b);
    third = _mm256_add_ps(third, c);
    fourth = _mm256_add_ps(fourth, d);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 a = exp_shifted_at<unit_scale>(x, i, shift_packet, scale_packet);
    if constexpr (with_spread)
      spreads[0] = _mm256_fmadd_ps(a, _mm256_sub_ps(shift_packet, _mm256_loadu_ps(x + i)), spreads[0]);
    if constexpr (store_values) _mm256_storeu_ps(out + i, a);
    first = _mm256_add_ps(first, a);
  }
  sum = sum_lanes(_mm256_add_ps(_mm256_add_ps(first, second), _mm256_add_ps(third, fourth)));
  if constexpr (with_spread)
    *spread = sum_lanes(_mm256_add_ps(_mm256_add_ps(spreads[0], spreads[1]), _mm256_add_ps(spreads[2], spreads[3])));
  return i;
}

/// The accumulators of exp_shifted_with_summary on AVX2 (below = e where e < 1, else 0).
struct ExponentialSummaryPackets {
  __m256 ones, below_sum, below_max, squares;
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void clear() {
    ones = below_sum = below_max = squares = _mm256_setzero_ps();
  }
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void add(__m256 value) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 is_below = _mm256_cmp_ps(value, one, _CMP_LT_OQ);  // all-ones where e < 1
    const __m256 below = _mm256_and_ps(is_below, value);
    below_sum = _mm256_add_ps(below_sum, below);
    below_max = _mm256_max_ps(below_max, below);
    ones = _mm256_add_ps(ones, _mm256_andnot_ps(is_below, one));  // 1 where e = 1
    squares = _mm256_fmadd_ps(value, value, squares);
  }
};

/// detail::BelowOneAccumulator (kernels/exp_summary.hpp) on AVX2: the blocks whose exponentials are all below one.
struct BelowOnePackets {
  __m256 sum, squares, max;
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void clear() {
    sum = squares = max = _mm256_setzero_ps();
  }
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void add_block(const __m256 (&values)[4], __m256 block_max) {
    sum = _mm256_add_ps(sum, _mm256_add_ps(_mm256_add_ps(values[0], values[1]), _mm256_add_ps(values[2], values[3])));
    for (int k = 0; k < 4; ++k) squares = _mm256_fmadd_ps(values[k], values[k], squares);
    max = _mm256_max_ps(max, block_max);
  }
};

/// detail::add_block_with_ones on AVX2: a block holding a 1, through the masks, out of line.
template <int = 0>
ATTNSCOPE_AVX2_TARGET __attribute__((noinline)) void add_block_with_ones(__m256 first, __m256 second, __m256 third,
                                                                         __m256 fourth,
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
  const __m256 shift_packet = _mm256_set1_ps(shift), scale_packet = _mm256_set1_ps(scale);
  const __m256 one = _mm256_set1_ps(1.0f);
  BelowOnePackets below_one;
  below_one.clear();
  ExponentialSummaryPackets masked;
  masked.clear();
  Index i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 values[4];
    exp_shifted_four<unit_scale>(x, i, shift_packet, scale_packet, prefetch, values);
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + i + 8 * k, values[k]);
    const __m256 block_max = _mm256_max_ps(_mm256_max_ps(values[0], values[1]), _mm256_max_ps(values[2], values[3]));
    if (__builtin_expect(_mm256_movemask_ps(_mm256_cmp_ps(block_max, one, _CMP_EQ_OQ)) == 0, 1))
      below_one.add_block(values, block_max);
    else
      add_block_with_ones(values[0], values[1], values[2], values[3], masked);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 value = exp_shifted_at<unit_scale>(x, i, shift_packet, scale_packet);
    _mm256_storeu_ps(out + i, value);
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
  const __m256 shift_packet = _mm256_set1_ps(shift), scale_packet = _mm256_set1_ps(scale);
  const __m256 factor_packet = _mm256_set1_ps(factor);
  Index i = 0;
  if (streaming) {
    for (; i < n && reinterpret_cast<std::uintptr_t>(out + i) % 32 != 0; ++i)
      out[i] = exp_nonpositive_one(scale * (x[i] - shift)) * factor;
    for (; i + 8 <= n; i += 8)
      _mm256_stream_ps(out + i, _mm256_mul_ps(exp_shifted_at(x, i, shift_packet, scale_packet), factor_packet));
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_mul_ps(exp_shifted_at(x, i, shift_packet, scale_packet), factor_packet));
  }
  for (; i < n; ++i) out[i] = exp_nonpositive_one(scale * (x[i] - shift)) * factor;
}

/// row_max (kernels/row_extrema.hpp) on AVX2: the maximum of x[0, n) (n ≥ 1) and whether every entry is finite
/// (the sum of x − x, 0 for finite entries and NaN for ±inf or NaN, is 0).
template <int = 0>
ATTNSCOPE_AVX2_TARGET void row_max(const float* x, Index n, float& max, bool& finite) {
  __m256 maxima[4], poisons[4];
  for (int k = 0; k < 4; ++k) {
    maxima[k] = _mm256_set1_ps(-__builtin_inff());
    poisons[k] = _mm256_setzero_ps();
  }
  Index i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      const __m256 value = _mm256_loadu_ps(x + i + 8 * k);
      maxima[k] = _mm256_max_ps(maxima[k], value);
      poisons[k] = _mm256_add_ps(poisons[k], _mm256_sub_ps(value, value));
    }
  for (; i + 8 <= n; i += 8) {
    const __m256 value = _mm256_loadu_ps(x + i);
    maxima[0] = _mm256_max_ps(maxima[0], value);
    poisons[0] = _mm256_add_ps(poisons[0], _mm256_sub_ps(value, value));
  }
  max = max_lanes(_mm256_max_ps(_mm256_max_ps(maxima[0], maxima[1]), _mm256_max_ps(maxima[2], maxima[3])));
  float poison = sum_lanes(_mm256_add_ps(_mm256_add_ps(poisons[0], poisons[1]), _mm256_add_ps(poisons[2], poisons[3])));
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
  const __m256 factor_packet = _mm256_set1_ps(factor);
  Index i = 0;
  if (streaming) {
    for (; i < n && reinterpret_cast<std::uintptr_t>(out + i) % 32 != 0; ++i) out[i] = x[i] * factor;
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), factor_packet));
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), factor_packet));
  }
  for (; i < n; ++i) out[i] = x[i] * factor;
}

/// secular_sums (kernels/secular.hpp) on AVX2: g(λ) = Σ p_i/(p_i − λ) and g'(λ) = Σ p_i/(p_i − λ)², four
/// accumulators over blocks of 32, the tail in scalar code; `value` and `derivative` receive the sums.
template <int = 0>
ATTNSCOPE_AVX2_TARGET void secular_sums(const float* p, Index n, float lambda, float& value, float& derivative) {
  const __m256 lambda_packet = _mm256_set1_ps(lambda), one = _mm256_set1_ps(1.0f);
  __m256 values[4], derivatives[4];
  for (int k = 0; k < 4; ++k) values[k] = derivatives[k] = _mm256_setzero_ps();
  Index i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      const __m256 entry = _mm256_loadu_ps(p + i + 8 * k);
      const __m256 inverse = _mm256_div_ps(one, _mm256_sub_ps(entry, lambda_packet));  // 1/(p_i − λ)
      const __m256 term = _mm256_mul_ps(entry, inverse);                               // p_i/(p_i − λ)
      values[k] = _mm256_add_ps(values[k], term);
      derivatives[k] = _mm256_fmadd_ps(term, inverse, derivatives[k]);  // p_i/(p_i − λ)²
    }
  for (; i + 8 <= n; i += 8) {
    const __m256 entry = _mm256_loadu_ps(p + i);
    const __m256 inverse = _mm256_div_ps(one, _mm256_sub_ps(entry, lambda_packet));
    const __m256 term = _mm256_mul_ps(entry, inverse);
    values[0] = _mm256_add_ps(values[0], term);
    derivatives[0] = _mm256_fmadd_ps(term, inverse, derivatives[0]);
  }
  value = sum_lanes(_mm256_add_ps(_mm256_add_ps(values[0], values[1]), _mm256_add_ps(values[2], values[3])));
  derivative = sum_lanes(
      _mm256_add_ps(_mm256_add_ps(derivatives[0], derivatives[1]), _mm256_add_ps(derivatives[2], derivatives[3])));
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
  __m256 first, second, third, fourth, fifth;
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void clear() {
    first = second = third = fourth = fifth = _mm256_setzero_ps();
  }
  template <int = 0>
  ATTNSCOPE_AVX2_TARGET void add(__m256 entry, __m256 lambda) {
    const __m256 inverse = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sub_ps(entry, lambda));  // 1/(p_i − λ)
    __m256 term = _mm256_mul_ps(entry, inverse);                                                // p_i/(p_i − λ)
    first = _mm256_add_ps(first, term);
    term = _mm256_mul_ps(term, inverse);
    second = _mm256_add_ps(second, term);
    term = _mm256_mul_ps(term, inverse);
    third = _mm256_add_ps(third, term);
    term = _mm256_mul_ps(term, inverse);
    fourth = _mm256_add_ps(fourth, term);
    fifth = _mm256_fmadd_ps(term, inverse, fifth);
  }
};

/// secular_power_sums (kernels/secular.hpp) on AVX2: sums[k] = Σ p_i/(p_i − λ)^(k+1), k = 0..4, two accumulators
/// over blocks of 16, the tail in scalar code. With `with_next_max` (secular_power_sums_and_row_max) also the maximum
/// of next[0, next_n) and whether it is finite, in the same loop while both rows have blocks, then in scalar code.
template <bool with_next_max>
ATTNSCOPE_AVX2_TARGET void secular_power_sums(const float* p, Index n, float lambda, float* sums, const float* next,
                                              Index next_n, float* next_max, bool* next_finite) {
  const __m256 lambda_packet = _mm256_set1_ps(lambda);
  SecularPowerPackets even, odd;
  even.clear();
  odd.clear();
  [[maybe_unused]] __m256 maxima = _mm256_set1_ps(-__builtin_inff()), poisons = _mm256_setzero_ps();
  Index i = 0, max_end = 0;  // next[0, max_end) is reduced in packets
  for (; i + 16 <= n; i += 16) {
    even.add(_mm256_loadu_ps(p + i), lambda_packet);
    odd.add(_mm256_loadu_ps(p + i + 8), lambda_packet);
    if constexpr (with_next_max) {
      if (i + 16 <= next_n) {
        const __m256 a = _mm256_loadu_ps(next + i), b = _mm256_loadu_ps(next + i + 8);
        maxima = _mm256_max_ps(maxima, _mm256_max_ps(a, b));
        poisons = _mm256_add_ps(poisons, _mm256_add_ps(_mm256_sub_ps(a, a), _mm256_sub_ps(b, b)));
        max_end = i + 16;
      }
    }
  }
  for (; i + 8 <= n; i += 8) even.add(_mm256_loadu_ps(p + i), lambda_packet);
  sums[0] = sum_lanes(_mm256_add_ps(even.first, odd.first));
  sums[1] = sum_lanes(_mm256_add_ps(even.second, odd.second));
  sums[2] = sum_lanes(_mm256_add_ps(even.third, odd.third));
  sums[3] = sum_lanes(_mm256_add_ps(even.fourth, odd.fourth));
  sums[4] = sum_lanes(_mm256_add_ps(even.fifth, odd.fifth));
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
