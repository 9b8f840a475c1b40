// attnscope/kernels/exp.hpp — vectorized exp on Eigen packets, with the scalar reference beside it.
//
// Method (Cody–Waite range reduction, the scheme of Cephes/Eigen pexp_float and ggml_v_expf, docs/theory/normalization-maps.md §6):
// n = round(x·log2 e) by the 1.5·2^(mantissa bits) rounding constant, r = x − n·ln2 with ln2 split into a short
// high part and a correction (|r| ≤ ln2/2), exp(r) by a polynomial, times 2^n built in the exponent bits.
//  - float: Cephes degree-5 polynomial exp(r) ≈ 1 + r + r²·P(r) (the coefficients of Eigen 3.4 pexp_float);
//    measured max error 2 ULP against correctly rounded exp over [−87, 88] (tests/kernels/test_exp.cpp).
//  - double: degree-13 Taylor polynomial (truncation error r^14/14! < 5e-18 for |r| ≤ ln2/2), 2^n by Eigen's pldexp;
//    measured max error 2 ULP.
// Results that would be subnormal flush to 0 in exp_nonpositive (the softmax path, absolute error < FLT_MIN);
// packet_exp keeps subnormals, overflows to +inf and propagates NaN.
#pragma once

#include <cmath>
#include <cstddef>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// Scalar reference: std::exp (correctly rounded or within 1 ULP in glibc).
template <class Scalar>
Scalar exp_reference(Scalar x) {
  return std::exp(x);
}

namespace detail {

/// exp(r) for |r| ≤ ln2/2 (float: Cephes degree 5 as in Eigen pexp_float; double: Taylor to degree 13).
template <class P>
P exp_polynomial(const P& r) {
  using Eigen::internal::padd;
  using Eigen::internal::pmadd;
  using Eigen::internal::pmul;
  using Eigen::internal::pset1;
  using Scalar = typename Eigen::internal::unpacket_traits<P>::type;
  if constexpr (sizeof(Scalar) == 4) {
    P y = pmadd(pset1<P>(1.9875691500e-4f), r, pset1<P>(1.3981999507e-3f));  // Cephes expf coefficients p0..p5
    y = pmadd(y, r, pset1<P>(8.3334519073e-3f));
    y = pmadd(y, r, pset1<P>(4.1665795894e-2f));
    y = pmadd(y, r, pset1<P>(1.6666665459e-1f));
    y = pmadd(y, r, pset1<P>(5.0000001201e-1f));
    return pmadd(y, pmul(r, r), padd(r, pset1<P>(1.0f)));  // 1 + r + r²·P(r)
  } else {
    // Σ_{k=0}^{13} r^k/k! by Horner, coefficients 1/k! [derived]
    P y = pset1<P>(1.0 / 6227020800.0);
    y = pmadd(y, r, pset1<P>(1.0 / 479001600.0));
    y = pmadd(y, r, pset1<P>(1.0 / 39916800.0));
    y = pmadd(y, r, pset1<P>(1.0 / 3628800.0));
    y = pmadd(y, r, pset1<P>(1.0 / 362880.0));
    y = pmadd(y, r, pset1<P>(1.0 / 40320.0));
    y = pmadd(y, r, pset1<P>(1.0 / 5040.0));
    y = pmadd(y, r, pset1<P>(1.0 / 720.0));
    y = pmadd(y, r, pset1<P>(1.0 / 120.0));
    y = pmadd(y, r, pset1<P>(1.0 / 24.0));
    y = pmadd(y, r, pset1<P>(1.0 / 6.0));
    y = pmadd(y, r, pset1<P>(0.5));
    y = pmadd(y, r, pset1<P>(1.0));
    return pmadd(y, r, pset1<P>(1.0));
  }
}

/// Splits x into n = round(x·log2 e) (returned as a floating value) and r = x − n·ln2 (Cody–Waite, two-part ln2).
template <class P>
P exp_reduce(const P& x, P& r) {
  using Eigen::internal::pmadd;
  using Eigen::internal::pset1;
  using Eigen::internal::psub;
  using Scalar = typename Eigen::internal::unpacket_traits<P>::type;
  constexpr bool single = sizeof(Scalar) == 4;
  // 1.5·2^23 (float) / 1.5·2^52 (double): adding it rounds to an integer in round-to-nearest mode
  const P rounding = pset1<P>(single ? Scalar(12582912.0f) : Scalar(6755399441055744.0));
  const P n = psub(pmadd(x, pset1<P>(Scalar(1.44269504088896340736)), rounding), rounding);
  // ln2 = high + low, high with few mantissa bits so n·high is exact (Cephes C1, C2)
  const P minus_ln2_high = pset1<P>(single ? Scalar(-0.693359375f) : Scalar(-0.693145751953125));
  const P minus_ln2_low = pset1<P>(single ? Scalar(2.12194440e-4f) : Scalar(-1.42860682030941723212e-6));
  r = pmadd(n, minus_ln2_low, pmadd(n, minus_ln2_high, x));
  return n;
}

/// 2^n for integer packets n ∈ [−127, 127] (−127 gives 0), built in the float exponent field.
template <class P, class PacketI>
P exp2_from_integer(const PacketI& n) {
  using Eigen::internal::padd;
  using Eigen::internal::plogical_shift_left;
  using Eigen::internal::preinterpret;
  using Eigen::internal::pset1;
  return preinterpret<P>(plogical_shift_left<23>(padd(n, pset1<PacketI>(127))));
}

}  // namespace detail

/// exp of every lane over the full range: subnormal results kept, +inf above the overflow threshold, 0 far below,
/// NaN propagated. Requires a real packet type (at least two lanes).
template <class P>
P packet_exp(const P& x) {
  using Eigen::internal::pcmp_eq;
  using Eigen::internal::pmax;
  using Eigen::internal::pmin;
  using Eigen::internal::pmul;
  using Eigen::internal::pselect;
  using Eigen::internal::pset1;
  using Eigen::internal::psub;
  using Scalar = typename Eigen::internal::unpacket_traits<P>::type;
  if constexpr (sizeof(Scalar) == 4) {
    // clamp so that n ∈ [−150, 129]; the result is 2^(n−⌊n/2⌋)·2^⌊n/2⌋·exp(r), both factors normal
    const P clamped = pmin(pmax(x, pset1<P>(-104.0f)), pset1<P>(89.0f));
    P r;
    const P n = detail::exp_reduce(clamped, r);
    using PacketI = typename Eigen::internal::unpacket_traits<P>::integer_packet;
    const PacketI whole = Eigen::internal::pcast<P, PacketI>(n);
    const PacketI half = Eigen::internal::parithmetic_shift_right<1>(whole);
    const P result = pmul(pmul(detail::exp_polynomial(r), detail::exp2_from_integer<P>(half)),
                          detail::exp2_from_integer<P>(psub(whole, half)));
    return pselect(pcmp_eq(x, x), result, x);
  } else {
    const P clamped = pmin(pmax(x, pset1<P>(-746.0)), pset1<P>(710.0));
    P r;
    const P n = detail::exp_reduce(clamped, r);
    const P result = Eigen::internal::pldexp(detail::exp_polynomial(r), n);
    return pselect(pcmp_eq(x, x), result, x);
  }
}

/// packet_exp_nonpositive (below) of K independent packets, in place, each step applied to all K packets before the
/// next [derived]: one exponential is a chain of about 12 dependent operations (~45 cycles), longer than the
/// out-of-order window reaches across packets written one after another, so the packets interleaved in program order
/// keep both FMA units busy (the exp loops of the row kernels, blocks of four, measured 1.04–1.26× faster on AMD Zen 3,
/// docs/performance.md). Lane for lane the bits of packet_exp_nonpositive, which is this function for K = 1.
template <std::size_t K, class P>
EIGEN_ALWAYS_INLINE void packet_exp_nonpositive_lockstep(P (&x)[K]) {
  using Scalar = typename Eigen::internal::unpacket_traits<P>::type;
  if constexpr (sizeof(Scalar) == 4) {
    using Eigen::internal::pmadd;
    using Eigen::internal::pset1;
    using PacketI = typename Eigen::internal::unpacket_traits<P>::integer_packet;
    P biased[K], r[K];
    // x ≥ −88 keeps n ≥ −127, whose 2^n field is 0: exp(x) < 2^−126 flushes to 0
    for (std::size_t k = 0; k < K; ++k) x[k] = Eigen::internal::pmax(x[k], pset1<P>(-88.0f));
    // v = x·log2 e + (1.5·2^23 + 127) rounds to the integer 1.5·2^23 + 127 + n (the rounding of exp_reduce), so the
    // low mantissa bits of v hold n + 127 ∈ [0, 127]: shifted left by 23 they are the float 2^n (no conversion)
    const P magic = pset1<P>(12583039.0f);  // 1.5·2^23 + 127
    for (std::size_t k = 0; k < K; ++k) biased[k] = pmadd(x[k], pset1<P>(1.44269504088896340736f), magic);
    for (std::size_t k = 0; k < K; ++k) r[k] = Eigen::internal::psub(biased[k], magic);  // n
    // Cody–Waite: r = x − n·ln2 with ln2 in two parts (exp_reduce)
    for (std::size_t k = 0; k < K; ++k) x[k] = pmadd(r[k], pset1<P>(-0.693359375f), x[k]);
    for (std::size_t k = 0; k < K; ++k) r[k] = pmadd(r[k], pset1<P>(2.12194440e-4f), x[k]);
    // exp(r) for |r| ≤ ln2/2 by a degree-6 polynomial in Horner form, 1 + r(1 + r(c2 + … + r c6)): coefficients
    // fitted to exp in relative error on Chebyshev nodes of [−ln2/2, ln2/2] [derived]; fit error 1.7e-8 relative with
    // the float coefficients (0.15 ULP), one FMA fewer than the Cephes form of exp_polynomial
    for (std::size_t k = 0; k < K; ++k) x[k] = pmadd(pset1<P>(1.3859291e-3f), r[k], pset1<P>(8.374764e-3f));
    for (std::size_t k = 0; k < K; ++k) x[k] = pmadd(x[k], r[k], pset1<P>(4.1667726e-2f));
    for (std::size_t k = 0; k < K; ++k) x[k] = pmadd(x[k], r[k], pset1<P>(1.6666421e-1f));
    for (std::size_t k = 0; k < K; ++k) x[k] = pmadd(x[k], r[k], pset1<P>(4.9999994e-1f));
    for (std::size_t k = 0; k < K; ++k) x[k] = pmadd(x[k], r[k], pset1<P>(1.0f));
    for (std::size_t k = 0; k < K; ++k) x[k] = pmadd(x[k], r[k], pset1<P>(1.0f));
    for (std::size_t k = 0; k < K; ++k)  // times 2^n
      x[k] = Eigen::internal::pmul(x[k], Eigen::internal::preinterpret<P>(Eigen::internal::plogical_shift_left<23>(
                                             Eigen::internal::preinterpret<PacketI>(biased[k]))));
  } else {
    for (std::size_t k = 0; k < K; ++k) x[k] = packet_exp(x[k]);
  }
}

/// exp for arguments x ≤ 0 (or −inf), the softmax hot path: results below the smallest normal number flush to 0.
/// NaN is not allowed (callers validate first). Float: packet_exp_nonpositive_lockstep of one packet; double:
/// packet_exp.
template <class P>
P packet_exp_nonpositive(const P& x) {
  P packets[1] = {x};
  packet_exp_nonpositive_lockstep(packets);
  return packets[0];
}

/// out[i] = exp(x[i]) for a contiguous row (vectorized; tail by the scalar reference). out may alias x.
template <class Scalar>
void exp_row(const Scalar* x, Index n, Scalar* out) {
  Index i = 0;
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    for (; i + packet_size<Scalar> <= n; i += packet_size<Scalar>)
      detail::store(out + i, packet_exp(detail::load<P>(x + i)));
  }
  for (; i < n; ++i) out[i] = exp_reference(x[i]);
}

/// Scalar reference of exp_row.
template <class Scalar>
void exp_row_reference(const Scalar* x, Index n, Scalar* out) {
  for (Index i = 0; i < n; ++i) out[i] = exp_reference(x[i]);
}

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
