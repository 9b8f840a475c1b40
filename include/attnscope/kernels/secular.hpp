// attnscope/kernels/secular.hpp — the secular function of a rank-one downdate of a diagonal matrix,
// g(λ) = Σ_i p_i/(p_i − λ) and g'(λ) = Σ_i p_i/(p_i − λ)² (docs/theory/normalization-maps.md §5.1), evaluated in one vectorized
// pass (one division per entry), with the scalar reference beside it.
#pragma once

#include <type_traits>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"

#include "attnscope/kernels/diagnostics_push.hpp"  // ATTNSCOPE_KERNELS_DIAGNOSTICS

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

}  // namespace detail

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

#include "attnscope/kernels/diagnostics_pop.hpp"
