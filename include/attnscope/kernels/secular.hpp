// attnscope/kernels/secular.hpp — the secular function of a rank-one downdate of a diagonal matrix,
// g(λ) = Σ_i p_i/(p_i − λ) and g'(λ) = Σ_i p_i/(p_i − λ)² (docs/theory/normalization-maps.md §5.1), evaluated in one vectorized
// pass (one division per entry), with the scalar reference beside it; and the power sums c_k = Σ_i p_i/(p_i − λ)^k,
// k = 1..5, the Taylor coefficients of g at λ, from which the solver evaluates g near λ without another pass.
#pragma once

#include <array>
#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"

#include "attnscope/kernels/detail/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

namespace attnscope::kernels {

/// g(λ) and g'(λ) over one row.
template <class Scalar>
struct SecularSums {
  Scalar value, derivative;
};

namespace detail {

template <class Scalar>
struct SecularParameters {
  Scalar lambda;
};

template <class P>
struct SecularAccumulator {
  using Scalar = typename Eigen::internal::unpacket_traits<P>::type;
  SecularParameters<Scalar> parameters;
  P lambda, value, derivative;
  explicit SecularAccumulator(const SecularParameters<Scalar>& parameters_)
      : parameters(parameters_),
        lambda(Eigen::internal::pset1<P>(parameters_.lambda)),
        value(Eigen::internal::pset1<P>(Scalar(0))),
        derivative(Eigen::internal::pset1<P>(Scalar(0))) {}
  void add(const P& p) {
    using namespace Eigen::internal;
    const P inverse = pdiv(pset1<P>(Scalar(1)), psub(p, lambda));  // 1/(p_i − λ)
    const P term = pmul(p, inverse);                                // p_i/(p_i − λ), 0 for p_i = 0
    value = padd(value, term);
    derivative = pmadd(term, inverse, derivative);                  // p_i/(p_i − λ)²
  }
  void merge(const SecularAccumulator& other) {
    value = Eigen::internal::padd(value, other.value);
    derivative = Eigen::internal::padd(derivative, other.derivative);
  }
  SecularAccumulator<Scalar> horizontal() const {
    SecularAccumulator<Scalar> result(parameters);
    result.value = Eigen::internal::predux(value);
    result.derivative = Eigen::internal::predux(derivative);
    return result;
  }
};

/// The power sums c_k = Σ p_i/(p_i − λ)^k, k = 1..5, by repeated multiplication with 1/(p_i − λ): one division,
/// four multiplications, four additions and an FMA per packet. Five named members, not an array: GCC keeps an array
/// of packets on the stack, and the store-to-load round trip per packet made the pass 2× slower.
template <class P>
struct SecularPowerAccumulator {
  P lambda, first, second, third, fourth, fifth;
  explicit SecularPowerAccumulator(const P& lambda_)
      : lambda(lambda_), first(zero()), second(zero()), third(zero()), fourth(zero()), fifth(zero()) {}
  static P zero() { return Eigen::internal::pset1<P>(typename Eigen::internal::unpacket_traits<P>::type(0)); }
  void add(const P& p) {
    using namespace Eigen::internal;
    using Scalar = typename unpacket_traits<P>::type;
    const P inverse = pdiv(pset1<P>(Scalar(1)), psub(p, lambda));  // 1/(p_i − λ)
    P term = pmul(p, inverse);                                      // p_i/(p_i − λ), 0 for p_i = 0
    first = padd(first, term);
    term = pmul(term, inverse);                                     // p_i/(p_i − λ)²
    second = padd(second, term);
    term = pmul(term, inverse);
    third = padd(third, term);
    term = pmul(term, inverse);
    fourth = padd(fourth, term);
    fifth = pmadd(term, inverse, fifth);                            // p_i/(p_i − λ)⁵ by an FMA (balances the ports)
  }
  void merge(const SecularPowerAccumulator& other) {
    using Eigen::internal::padd;
    first = padd(first, other.first);
    second = padd(second, other.second);
    third = padd(third, other.third);
    fourth = padd(fourth, other.fourth);
    fifth = padd(fifth, other.fifth);
  }
};

}  // namespace detail

/// c[k] = Σ_i p_i/(p_i − λ)^(k+1), k = 0..4: c[0] = g(λ), c[1] = g'(λ), and c[k] = g^(k)(λ)/k! in general, so that
/// g(λ + δ) = Σ_k c[k]·δ^k wherever the series converges (|δ| < min |p_i − λ|).
template <class Scalar>
struct SecularPowerSums {
  std::array<Scalar, 5> c;
};

namespace detail {

/// The body of secular_power_sums and secular_power_sums_and_row_max on Eigen packets (two accumulators, since five
/// sums each fill the vector registers); with `with_next_max`, next[0, next_n) is reduced to its maximum and
/// finiteness in the same loop (packets while both rows have them, the rest in scalars).
template <bool with_next_max, class Scalar>
SecularPowerSums<Scalar> secular_power_sums_packets(const Scalar* p, Index n, Scalar lambda, const Scalar* next,
                                                    Index next_n, MaxAndFiniteness<Scalar>* next_max) {
  SecularPowerSums<Scalar> result;
  result.c.fill(Scalar(0));
  Index i = 0, max_end = 0;  // next[0, max_end) is reduced in packets
  MaxAccumulator<Scalar> scalar_max(NoParameters{});
  if constexpr (is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    constexpr Index width = packet_size<Scalar>;
    if (n >= width) {
      const P lambda_packet = Eigen::internal::pset1<P>(lambda);
      SecularPowerAccumulator<P> first(lambda_packet), second(lambda_packet);
      [[maybe_unused]] MaxAccumulator<P> max(NoParameters{});
      for (; i + 2 * width <= n; i += 2 * width) {
        first.add(load<P>(p + i));
        second.add(load<P>(p + i + width));
        if constexpr (with_next_max) {
          if (i + 2 * width <= next_n) {
            max.add(load<P>(next + i));
            max.add(load<P>(next + i + width));
            max_end = i + 2 * width;
          }
        }
      }
      for (; i + width <= n; i += width) first.add(load<P>(p + i));
      first.merge(second);
      using Eigen::internal::predux;
      result.c = {predux(first.first), predux(first.second), predux(first.third), predux(first.fourth),
                  predux(first.fifth)};
      if constexpr (with_next_max) scalar_max = max.horizontal();
    }
  }
  SecularPowerAccumulator<Scalar> tail(lambda);
  for (; i < n; ++i) tail.add(p[i]);
  result.c[0] += tail.first;
  result.c[1] += tail.second;
  result.c[2] += tail.third;
  result.c[3] += tail.fourth;
  result.c[4] += tail.fifth;
  if constexpr (with_next_max) {
    for (Index k = max_end; k < next_n; ++k) scalar_max.add(next[k]);
    *next_max = {scalar_max.max, scalar_max.poison == Scalar(0)};
  }
  return result;
}

}  // namespace detail

/// The power sums of SecularPowerSums over p[0..n) for λ different from every p_i, in one vectorized pass (one
/// division per entry; two packet accumulators, since five sums each fill the vector registers).
template <class Scalar>
SecularPowerSums<Scalar> secular_power_sums(const Scalar* p, Index n, Scalar lambda) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) {
      SecularPowerSums<Scalar> sums;
      detail::avx2::secular_power_sums<false>(p, n, lambda, sums.c.data(), nullptr, 0, nullptr, nullptr);
      return sums;
    }
  }
#endif
  return detail::secular_power_sums_packets<false>(p, n, lambda, static_cast<const Scalar*>(nullptr), 0,
                                                   static_cast<MaxAndFiniteness<Scalar>*>(nullptr));
}

/// secular_power_sums(p, n, λ) and row_max(next, next_n) in one loop [derived]: the loads, maxima and finiteness
/// checks of the next row (the next softmax row of the norm from logits) ride along the division-bound pass instead
/// of a pass of their own, and that row's memory latency hides behind the divisions (the norm from logits: 1.00–1.04×
/// with the next row prefetched, 1.08–1.17× where it is not; docs/performance.md). Bitwise both results. `next` must
/// hold next_n ≥ 0 entries.
template <class Scalar>
SecularPowerSums<Scalar> secular_power_sums_and_row_max(const Scalar* p, Index n, Scalar lambda, const Scalar* next,
                                                        Index next_n, MaxAndFiniteness<Scalar>& next_max) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) {
      SecularPowerSums<Scalar> sums;
      detail::avx2::secular_power_sums<true>(p, n, lambda, sums.c.data(), next, next_n, &next_max.max,
                                             &next_max.finite);
      return sums;
    }
  }
#endif
  return detail::secular_power_sums_packets<true>(p, n, lambda, next, next_n, &next_max);
}

/// Scalar reference of secular_power_sums.
template <class Scalar>
SecularPowerSums<Scalar> secular_power_sums_reference(const Scalar* p, Index n, Scalar lambda) {
  SecularPowerSums<Scalar> sums;
  sums.c.fill(Scalar(0));
  for (Index i = 0; i < n; ++i) {
    const Scalar inverse = Scalar(1) / (p[i] - lambda);
    Scalar term = p[i];
    for (Scalar& sum : sums.c) {
      term *= inverse;
      sum += term;
    }
  }
  return sums;
}

/// g(λ) = Σ p_i/(p_i − λ) and g'(λ) = Σ p_i/(p_i − λ)² over p[0..n) for λ different from every p_i (vectorized).
template <class Scalar>
SecularSums<Scalar> secular_sums(const Scalar* p, Index n, Scalar lambda) {
#if defined(ATTNSCOPE_RUNTIME_DISPATCH_AVX2)
  if constexpr (std::is_same<Scalar, float>::value) {  // runtime_dispatch.hpp
    if (detail::avx2::available()) {
      SecularSums<Scalar> sums{0, 0};
      detail::avx2::secular_sums(p, n, lambda, sums.value, sums.derivative);
      return sums;
    }
  }
#endif
  const auto result =
      detail::reduce_row<detail::SecularAccumulator>(p, n, detail::SecularParameters<Scalar>{lambda});
  return {result.value, result.derivative};
}

/// Scalar reference of secular_sums.
template <class Scalar>
SecularSums<Scalar> secular_sums_reference(const Scalar* p, Index n, Scalar lambda) {
  SecularSums<Scalar> sums{0, 0};
  for (Index i = 0; i < n; ++i) {
    const Scalar inverse = Scalar(1) / (p[i] - lambda);
    sums.value += p[i] * inverse;
    sums.derivative += p[i] * inverse * inverse;
  }
  return sums;
}

}  // namespace attnscope::kernels

#include "attnscope/kernels/detail/diagnostics_pop.hpp"
