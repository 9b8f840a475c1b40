// Vectorized exp against a long-double reference: accuracy in ULP over the whole range, special values, tails.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/kernels/exp.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
using attnscope::kernels::Packet;
using attnscope::kernels::packet_size;

/// |got − exact| in units of the last place of the correctly rounded result (subnormal ulp below the normal range).
template <class Scalar>
double ulp_error(Scalar got, long double exact) {
  const Scalar rounded = static_cast<Scalar>(exact);
  if (got == rounded) return 0;
  long double ulp = static_cast<long double>(std::nextafter(rounded, std::numeric_limits<Scalar>::infinity())) -
                    static_cast<long double>(rounded);
  if (std::fpclassify(rounded) != FP_NORMAL) ulp = std::numeric_limits<Scalar>::denorm_min();
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

/// Applies packet_exp (or packet_exp_nonpositive) lane-wise to a vector of arguments.
template <class Scalar>
std::vector<Scalar> vector_exp(const std::vector<Scalar>& x, bool nonpositive) {
  std::vector<Scalar> y(x.size());
  if constexpr (attnscope::kernels::is_vectorized<Scalar>) {
    using P = Packet<Scalar>;
    for (std::size_t i = 0; i + packet_size<Scalar> <= x.size(); i += packet_size<Scalar>) {
      const P v = Eigen::internal::ploadu<P>(x.data() + i);
      Eigen::internal::pstoreu(y.data() + i, nonpositive ? attnscope::kernels::packet_exp_nonpositive(v)
                                                         : attnscope::kernels::packet_exp(v));
    }
  } else {
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = attnscope::kernels::exp_reference(x[i]);
  }
  return y;
}

template <class Scalar>
double max_ulp_error(double low, double high, bool nonpositive, std::uint64_t seed) {
  attnscope::Random random(seed);
  std::vector<Scalar> x(64 * 1024);
  for (Scalar& value : x) value = static_cast<Scalar>(random.uniform(low, high));
  const std::vector<Scalar> y = vector_exp(x, nonpositive);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, ulp_error(y[i], std::exp(static_cast<long double>(x[i]))));
  return worst;
}

}  // namespace

TEMPLATE_TEST_CASE("packet_exp is within 2 ULP of the correctly rounded exp over the normal range", "[kernels][exp]",
                   float, double) {
  const double high = sizeof(TestType) == 4 ? 88.7 : 709.7;
  const double low = sizeof(TestType) == 4 ? -87.3 : -708.3;
  CHECK(max_ulp_error<TestType>(low, high, false, 1) <= 2.0);
  CHECK(max_ulp_error<TestType>(-1, 1, false, 2) <= 2.0);
  CHECK(max_ulp_error<TestType>(low, 0, true, 3) <= 2.0);  // the softmax path
}

TEMPLATE_TEST_CASE("packet_exp keeps subnormal results, overflows to inf and propagates NaN", "[kernels][exp]",
                   float, double) {
  using limits = std::numeric_limits<TestType>;
  const bool single = sizeof(TestType) == 4;
  // subnormal range: within 2 ULP of the subnormal spacing
  CHECK(max_ulp_error<TestType>(single ? -103.0 : -744.0, single ? -87.4 : -708.5, false, 4) <= 2.0);
  std::vector<TestType> x = {0, -0.0, limits::infinity(), -limits::infinity(), limits::quiet_NaN(),
                             single ? TestType(89) : TestType(710), single ? TestType(-104) : TestType(-746),
                             TestType(1), TestType(-1), limits::max(), limits::lowest(), TestType(1e-30)};
  while (x.size() % static_cast<std::size_t>(packet_size<TestType>) != 0) x.push_back(0);
  const std::vector<TestType> y = vector_exp(x, false);
  CHECK(y[0] == 1);
  CHECK(y[1] == 1);
  CHECK(y[2] == limits::infinity());
  CHECK(y[3] == 0);
  CHECK(std::isnan(y[4]));
  CHECK(y[5] == limits::infinity());
  CHECK(y[6] == 0);
  CHECK(ulp_error(y[7], std::exp(1.0L)) <= 2.0);
  CHECK(ulp_error(y[8], std::exp(-1.0L)) <= 2.0);
  CHECK(y[9] == limits::infinity());
  CHECK(y[10] == 0);
  CHECK(y[11] == 1);
}

TEMPLATE_TEST_CASE("packet_exp_nonpositive flushes results below the smallest normal number to zero",
                   "[kernels][exp]", float, double) {
  using limits = std::numeric_limits<TestType>;
  attnscope::Random random(5);
  std::vector<TestType> x(4096);
  for (TestType& value : x) value = static_cast<TestType>(random.uniform(-2000, 0));
  x[0] = -limits::infinity();
  x[1] = limits::lowest();
  x[2] = 0;
  const std::vector<TestType> y = vector_exp(x, true);
  CHECK(y[0] == 0);
  CHECK(y[1] == 0);
  CHECK(y[2] == 1);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double exact = std::exp(static_cast<long double>(x[i]));
    if (exact >= limits::min())
      CHECK(ulp_error(y[i], exact) <= 2.0);
    else
      CHECK(std::fabs(static_cast<long double>(y[i]) - exact) < limits::min());  // absolute error < smallest normal
  }
}

TEMPLATE_TEST_CASE("packet_exp_nonpositive_lockstep gives the bits of packet_exp_nonpositive packet by packet",
                   "[kernels][exp]", float, double) {
  if constexpr (attnscope::kernels::is_vectorized<TestType>) {
    using P = Packet<TestType>;
    constexpr Index width = packet_size<TestType>;
    attnscope::Random random(15);
    std::vector<TestType> x(4 * width * 512);
    for (TestType& value : x) value = static_cast<TestType>(random.uniform(-95, 0));  // below the −88 clamp, too
    x[0] = -std::numeric_limits<TestType>::infinity();
    x[1] = 0;
    x[2] = std::numeric_limits<TestType>::lowest();
    x[3] = -std::numeric_limits<TestType>::denorm_min();
    const std::vector<TestType> one_by_one = vector_exp(x, true);
    std::vector<TestType> four(x.size()), three(x.size());
    for (std::size_t i = 0; i < x.size(); i += 4 * width) {
      P block[4];
      for (Index k = 0; k < 4; ++k) block[k] = Eigen::internal::ploadu<P>(x.data() + i + k * width);
      attnscope::kernels::packet_exp_nonpositive_lockstep(block);
      for (Index k = 0; k < 4; ++k) Eigen::internal::pstoreu(four.data() + i + k * width, block[k]);
      P odd_block[3];  // any count of packets
      for (Index k = 0; k < 3; ++k) odd_block[k] = Eigen::internal::ploadu<P>(x.data() + i + k * width);
      attnscope::kernels::packet_exp_nonpositive_lockstep(odd_block);
      for (Index k = 0; k < 3; ++k) Eigen::internal::pstoreu(three.data() + i + k * width, odd_block[k]);
      std::copy(one_by_one.begin() + i + 3 * width, one_by_one.begin() + i + 4 * width, three.begin() + i + 3 * width);
    }
    CHECK(std::memcmp(four.data(), one_by_one.data(), sizeof(TestType) * x.size()) == 0);
    CHECK(std::memcmp(three.data(), one_by_one.data(), sizeof(TestType) * x.size()) == 0);
    CHECK(four[0] == 0);
    CHECK(four[1] == 1);
  } else {
    SUCCEED("no packets in this build (EIGEN_DONT_VECTORIZE): the lock-step is never called");
  }
}

TEMPLATE_TEST_CASE("exp_row matches the scalar reference for every length, including the scalar tail",
                   "[kernels][exp]", float, double) {
  attnscope::Random random(6);
  for (Index n = 0; n <= 67; ++n) {
    std::vector<TestType> x(static_cast<std::size_t>(n)), fast(x.size()), reference(x.size());
    for (TestType& value : x) value = static_cast<TestType>(random.uniform(-50, 50));
    attnscope::kernels::exp_row(x.data(), n, fast.data());
    attnscope::kernels::exp_row_reference(x.data(), n, reference.data());
    for (std::size_t i = 0; i < x.size(); ++i)
      CHECK(ulp_error(fast[i], static_cast<long double>(reference[i])) <= 3.0);  // ≤ 2 ULP each, ≤ 1 ULP reference
  }
  // in place (out aliases x)
  std::vector<TestType> x = {TestType(0), TestType(1), TestType(2)};
  attnscope::kernels::exp_row(x.data(), 3, x.data());
  CHECK(x[0] == 1);
  CHECK(ulp_error(x[2], std::exp(2.0L)) <= 2.0);
}
