// Tests of stream/detail/block_products.hpp, the two products of the attention kernel, on seeded random shapes: row
// counts that are not multiples of the 6-row tile, key runs that start and end off the 16-key panels, depths below,
// at and above one depth block of 256, strided operands. Float32 on an AVX2 + FMA CPU: BlockKeys::logits is bitwise
// the scale times the packed GEMM kernels::gemm_xwt of the same rows (the rounding contract of kernels/gemm.hpp), and
// PackedValues::product bitwise gemm_xwt of P with V. Every path (also double, which runs Eigen's GEMM) equals a
// double reference within rounding, with and without a logit softcap c·tanh(s/c).
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "attnscope/kernels/gemm.hpp"
#include "attnscope/stream/detail/block_products.hpp"
#include "support/catch.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

/// Stored float32 rows for kernels::gemm_xwt (rows × cols at data, row stride `stride`).
attnscope::kernels::StoredWeights block_products_operand(const float* data, Index rows, Index cols, Index stride,
                                                         bool transposed) {
  return attnscope::stream::detail::stored_rows(data, rows, cols, stride, transposed);
}

template <class Scalar>
void check_logits_and_values(std::uint64_t seed) {
  attnscope::Random random(seed);
  const Index depth = std::vector<Index>{1, 7, 64, 256, 300}[random.below(5)];
  const Index keys = 1 + static_cast<Index>(random.below(300));
  const Index rows = 1 + static_cast<Index>(random.below(40));
  const Index first = static_cast<Index>(random.below(static_cast<std::uint64_t>(keys)));
  const Index end = first + 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(keys - first)));
  const Index width = end - first, stride = width + static_cast<Index>(random.below(5));
  const Index value_cols = 1 + static_cast<Index>(random.below(70));
  // strided operands: the head's columns of wider matrices
  const RowMatrix<Scalar> q_wide = attnscope::testing::random_logits<Scalar>(random, rows, depth + 3);
  const RowMatrix<Scalar> k_wide = attnscope::testing::random_logits<Scalar>(random, keys, depth + 5);
  const Scalar* q = q_wide.data() + 2;
  const Scalar* k = k_wide.data() + 1;
  const Scalar scale = static_cast<Scalar>(1.0 / std::sqrt(static_cast<double>(depth)));
  const std::optional<double> softcap = random.uniform() < 0.5 ? std::optional<double>(3.0) : std::nullopt;
  attnscope::stream::detail::BlockKeys<Scalar> block_keys;
  block_keys.assign(k, keys, depth, k_wide.outerStride());
  attnscope::stream::detail::BlockProductScratch scratch;
  std::vector<Scalar> strip(static_cast<std::size_t>(rows * stride), Scalar(-7));
  block_keys.logits(q, q_wide.outerStride(), rows, first, end, scale, softcap, strip.data(), stride, scratch);
  const double tolerance = std::is_same<Scalar, float>::value ? 2e-5 : 1e-12;
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < width; ++c) {
      double dot = 0;
      for (Index p = 0; p < depth; ++p)
        dot += static_cast<double>(q[r * q_wide.outerStride() + p]) * static_cast<double>(k[(first + c) * k_wide.outerStride() + p]);
      double expected = dot * static_cast<double>(scale);
      if (softcap) expected = *softcap * std::tanh(expected / *softcap);
      REQUIRE(std::abs(static_cast<double>(strip[static_cast<std::size_t>(r * stride + c)]) - expected) <=
              tolerance * (1 + std::abs(expected)) * std::sqrt(static_cast<double>(depth)));
    }
    for (Index c = width; c < stride; ++c) REQUIRE(strip[static_cast<std::size_t>(r * stride + c)] == Scalar(-7));
  }
  if constexpr (std::is_same<Scalar, float>::value) {
    if (!attnscope::stream::detail::packed_block_products<float>()) return;
    // bitwise: the packed GEMM of the same rows, times the scale (then the same softcap expression)
    std::vector<float> reference(static_cast<std::size_t>(rows * width));
    attnscope::kernels::gemm_xwt<false>(rows, q, q_wide.outerStride(),
                                        block_products_operand(k + first * k_wide.outerStride(), width, depth,
                                                               k_wide.outerStride(), false),
                                        reference.data(), width);
    for (Index r = 0; r < rows; ++r) {
      Eigen::Map<Eigen::ArrayXf> row(reference.data() + r * width, width);
      row *= scale;
      if (softcap) row = static_cast<float>(*softcap) * (row / static_cast<float>(*softcap)).tanh();
      for (Index c = 0; c < width; ++c)
        REQUIRE(strip[static_cast<std::size_t>(r * stride + c)] == reference[static_cast<std::size_t>(r * width + c)]);
    }
    // P·V over keys [first, end): bitwise gemm_xwt of P with V (V read as the stored transpose of Vᵀ)
    const RowMatrix<float> v = attnscope::testing::random_logits<float>(random, keys, value_cols + 2);
    const RowMatrix<float> p = attnscope::testing::random_logits<float>(random, rows, stride);
    attnscope::stream::detail::PackedValues packed_values;
    packed_values.assign(v.data(), keys, value_cols, v.outerStride());
    RowMatrix<float> out = RowMatrix<float>::Constant(rows, value_cols + 1, -7.0f), expected(rows, value_cols);
    packed_values.product(p.data(), p.outerStride(), rows, first, width, out.data(), out.outerStride(), scratch);
    attnscope::kernels::gemm_xwt<false>(rows, p.data(), p.outerStride(),
                                        block_products_operand(v.data() + first * v.outerStride(), value_cols, width,
                                                               v.outerStride(), true),
                                        expected.data(), expected.outerStride());
    REQUIRE((out.leftCols(value_cols).array() == expected.array()).all());
    REQUIRE((out.rightCols(1).array() == -7.0f).all());
    const Eigen::MatrixXd exact = p.leftCols(width).cast<double>() * v.middleRows(first, width).leftCols(value_cols).cast<double>();
    REQUIRE((out.leftCols(value_cols).cast<double>() - exact).cwiseAbs().maxCoeff() <= 1e-4 * std::sqrt(static_cast<double>(width)));
  }
}

}  // namespace

TEST_CASE("stream block products: block logits and P·V equal the packed GEMM bitwise and a double reference") {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    check_logits_and_values<float>(seed);
    check_logits_and_values<double>(1000 + seed);
  }
}
