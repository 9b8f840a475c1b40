// The packed weight product y (+)= x·Wᵀ (kernels/gemm.hpp): against a double-precision reference within the float32
// error bound, bitwise against an independent float32 evaluation of its rounding contract (per element: fused
// multiply-add chains over depth blocks of 256, added left to right), the AVX-512, AVX2 and scalar reference
// micro-kernels bitwise equal (6 × 32 tiles of two micro-panels against two 6 × 16 tiles), and the result bitwise independent of the column split, the row chunking and the OpenMP threads.
// Shapes cover edge tiles (m, n, k not multiples of 6, 16, 256; k = 1), strided x and y, every stored format and the
// transposed storage.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/kernels/gemm.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
using attnscope::kernels::GemmKernel;
using attnscope::kernels::GemmOptions;
using attnscope::kernels::StoredFloat;
using attnscope::kernels::StoredWeights;

/// A random weight matrix (rows × cols) stored in `format` (transposed: the bytes hold Wᵀ), and its float32 values.
struct GemmTestWeights {
  std::vector<unsigned char> bytes;
  std::vector<float> values;  // rows × cols, row-major
  StoredWeights stored;
};

GemmTestWeights gemm_test_weights(attnscope::Random& random, StoredFloat format, Index rows, Index cols,
                                  bool transposed) {
  using attnscope::kernels::stored_bytes;
  GemmTestWeights w;
  const Index stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  const Index padded = stored_cols + (attnscope::kernels::is_block_format(format) ? 0 : 3);  // a stride > cols
  const std::size_t row_bytes = stored_bytes(format, padded);
  w.bytes.resize(row_bytes * std::size_t(stored_rows));
  for (Index r = 0; r < stored_rows; ++r) {
    unsigned char* row = w.bytes.data() + row_bytes * std::size_t(r);
    for (Index c = 0; c < padded; ++c) {
      const float value = static_cast<float>(random.normal());
      if (format == StoredFloat::float32) {
        std::memcpy(row + 4 * c, &value, 4);
      } else if (format == StoredFloat::bfloat16) {
        std::uint32_t bits;
        std::memcpy(&bits, &value, 4);
        const auto half = static_cast<std::uint16_t>(bits >> 16);
        std::memcpy(row + 2 * c, &half, 2);
      } else if (format == StoredFloat::float16) {
        const Eigen::half half(value);
        std::memcpy(row + 2 * c, &half, 2);
      }
    }
    if (format == StoredFloat::q8_0)  // blocks of a binary16 scale and 32 signed bytes
      for (Index block = 0; block < padded / 32; ++block) {
        unsigned char* start = row + 34 * block;
        const Eigen::half scale(static_cast<float>(random.uniform(0.001, 0.02)));
        std::memcpy(start, &scale, 2);
        for (int i = 0; i < 32; ++i) start[2 + i] = static_cast<unsigned char>(random.uniform() * 256.0);
      }
  }
  w.stored = StoredWeights{w.bytes.data(), format, rows, cols, row_bytes, transposed};
  w.values.resize(std::size_t(rows * cols));
  std::vector<float> stored_row(static_cast<std::size_t>(padded));
  for (Index r = 0; r < stored_rows; ++r) {
    attnscope::kernels::widen_reference(w.bytes.data() + row_bytes * std::size_t(r), format, padded,
                                        stored_row.data());
    for (Index c = 0; c < stored_cols; ++c) {
      const float value = stored_row[std::size_t(c)];
      if (transposed) w.values[std::size_t(c * cols + r)] = value;
      else w.values[std::size_t(r * cols + c)] = value;
    }
  }
  return w;
}

std::vector<float> gemm_test_normals(attnscope::Random& random, Index count) {
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& value : values) value = static_cast<float>(random.normal());
  return values;
}

/// The contract evaluated element by element: y₀ + s₀ + s₁ + … with s_b the fma chain over depth block b.
float gemm_contract(const float* x, const float* w, Index k, bool add, float y0) {
  float sum = add ? y0 : 0.0f;
  bool started = add;
  for (Index depth = 0; depth < k; depth += 256) {
    float s = 0.0f;
    for (Index p = depth; p < std::min(k, depth + 256); ++p) s = std::fma(x[p], w[p], s);
    sum = started ? sum + s : s;
    started = true;
  }
  return sum;
}

bool gemm_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Runs gemm_xwt on x (m × k, stride x_stride) into a copy of y (stride y_stride).
std::vector<float> gemm_test_run(bool add, Index m, const std::vector<float>& x, Index x_stride,
                                 const StoredWeights& w, std::vector<float> y, Index y_stride,
                                 const GemmOptions& options) {
  if (add) attnscope::kernels::gemm_xwt<true>(m, x.data(), x_stride, w, y.data(), y_stride, options);
  else attnscope::kernels::gemm_xwt<false>(m, x.data(), x_stride, w, y.data(), y_stride, options);
  return y;
}

}  // namespace

TEST_CASE("gemm_xwt meets its rounding contract and the float32 error bound on edge shapes and every format",
          "[kernels][gemm]") {
  attnscope::Random random(2029);
  const StoredFloat formats[] = {StoredFloat::float32, StoredFloat::float16, StoredFloat::bfloat16, StoredFloat::q8_0};
  const Index ms[] = {1, 5, 6, 7, 13, 175};
  const Index ns[] = {1, 15, 16, 17, 50};
  const Index ks[] = {1, 7, 255, 256, 257, 640};
  int cases = 0;
  for (const StoredFloat format : formats)
    for (const bool transposed : {false, true}) {
      if (transposed && format == StoredFloat::q8_0) continue;
      for (const Index m : ms)
        for (const Index n : ns)
          for (const Index k : ks) {
            if (format == StoredFloat::q8_0 && k % 32 != 0) continue;
            if ((m * n * k) > 200000 && (m + n + k) % 3 != 0) continue;  // keep the sweep quick
            const bool add = (m + n + k) % 2 == 1;
            const GemmTestWeights w = gemm_test_weights(random, format, n, k, transposed);
            const Index x_stride = k + 5, y_stride = n + 3;
            const std::vector<float> x = gemm_test_normals(random, m * x_stride);
            const std::vector<float> y0 = gemm_test_normals(random, m * y_stride);
            const std::vector<float> reference =
                gemm_test_run(add, m, x, x_stride, w.stored, y0, y_stride, {GemmKernel::reference, 1});
            ++cases;
            INFO("format " << attnscope::kernels::stored_float_name(format) << (transposed ? " transposed" : "")
                           << ", m " << m << ", n " << n << ", k " << k << (add ? ", y +=" : ", y ="));
            bool contract = true, bound = true, untouched = true;
            for (Index i = 0; i < m; ++i) {
              for (Index j = 0; j < n; ++j) {
                const float* xi = x.data() + i * x_stride;
                const float* wj = w.values.data() + j * k;
                const float y_start = y0[std::size_t(i * y_stride + j)];
                const float got = reference[std::size_t(i * y_stride + j)];
                contract = contract && got == gemm_contract(xi, wj, k, add, y_start);
                double exact = add ? double(y_start) : 0.0, magnitude = add ? std::abs(double(y_start)) : 0.0;
                for (Index p = 0; p < k; ++p) {
                  exact += double(xi[p]) * double(wj[p]);
                  magnitude += std::abs(double(xi[p]) * double(wj[p]));
                }
                // |error| ≤ γ_(k+1) · Σ|terms| (Higham, Accuracy and Stability, eq. 3.5), u = 2^-24
                const double u = std::ldexp(1.0, -24), gamma = double(k + 2) * u / (1.0 - double(k + 2) * u);
                bound = bound && std::abs(double(got) - exact) <= gamma * magnitude + 1e-30;
              }
              for (Index j = n; j < y_stride; ++j)  // the padding between rows of y is not written
                untouched = untouched && reference[std::size_t(i * y_stride + j)] == y0[std::size_t(i * y_stride + j)];
            }
            CHECK(contract);
            CHECK(bound);
            CHECK(untouched);
            if (attnscope::kernels::gemm_avx2_available())
              CHECK(gemm_same_bits(gemm_test_run(add, m, x, x_stride, w.stored, y0, y_stride, {GemmKernel::avx2, 1}),
                                   reference));
            if (attnscope::kernels::gemm_avx512_available())
              for (const Index parts : {Index(1), Index(3)})
                CHECK(gemm_same_bits(
                    gemm_test_run(add, m, x, x_stride, w.stored, y0, y_stride, {GemmKernel::avx512, parts}),
                    reference));
            for (const Index parts : {Index(2), Index(3), Index(7)})
              CHECK(gemm_same_bits(gemm_test_run(add, m, x, x_stride, w.stored, y0, y_stride, {GemmKernel::automatic,
                                                                                                  parts}),
                                   reference));
          }
    }
  CHECK(cases > 300);
}

TEST_CASE("gemm_xwt gives the same bits for any row chunking, column block and number of threads",
          "[kernels][gemm]") {
  attnscope::Random random(77);
  for (const StoredFloat format : {StoredFloat::float32, StoredFloat::bfloat16}) {
    const Index m = 203, n = 4096 + 40, k = 300;  // more columns than one packed column block
    const GemmTestWeights w = gemm_test_weights(random, format, n, k, false);
    const std::vector<float> x = gemm_test_normals(random, m * k);
    const std::vector<float> zeros(std::size_t(m * n), 0.0f);
    const std::vector<float> whole = gemm_test_run(false, m, x, k, w.stored, zeros, n, {});
    // rows in chunks of 1, 37 and 100: each chunk its own call
    for (const Index chunk : {Index(1), Index(37), Index(100)}) {
      std::vector<float> chunked(zeros);
      for (Index first = 0; first < m; first += chunk)
        attnscope::kernels::gemm_xwt<false>(std::min(chunk, m - first), x.data() + first * k, k, w.stored,
                                            chunked.data() + first * n, n, {});
      CHECK(gemm_same_bits(chunked, whole));
    }
    // y += x·Wᵀ from zero: the same as y = x·Wᵀ except for the sign of zero sums (none with random data)
    CHECK(gemm_same_bits(gemm_test_run(true, m, x, k, w.stored, zeros, n, {}), whole));
#if defined(_OPENMP)
    for (const int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      CHECK(gemm_same_bits(gemm_test_run(false, m, x, k, w.stored, zeros, n, {}), whole));
    }
    omp_set_num_threads(omp_get_num_procs());
#endif
  }
}

TEST_CASE("gemm_best_kernel is the widest micro-kernel the CPU runs, and every kernel has its name", "[kernels][gemm]") {
  using attnscope::kernels::gemm_best_kernel;
  using attnscope::kernels::gemm_kernel_name;
  const GemmKernel expected = attnscope::kernels::gemm_avx512_available() ? GemmKernel::avx512
                              : attnscope::kernels::gemm_avx2_available() ? GemmKernel::avx2
                                                                          : GemmKernel::reference;
  CHECK(gemm_best_kernel() == expected);
  CHECK_FALSE((attnscope::kernels::gemm_avx512_available() && !attnscope::kernels::gemm_avx2_available()));
  CHECK(std::string(gemm_kernel_name(GemmKernel::automatic)) == "automatic");
  CHECK(std::string(gemm_kernel_name(GemmKernel::avx512)) == "avx512");
  CHECK(std::string(gemm_kernel_name(GemmKernel::avx2)) == "avx2");
  CHECK(std::string(gemm_kernel_name(GemmKernel::reference)) == "reference");
}

TEST_CASE("gemm_xwt with depth 0 writes zeros (y =) or leaves y (y +=), and empty shapes do nothing",
          "[kernels][gemm]") {
  const StoredWeights w{nullptr, StoredFloat::float32, 3, 0, 0, false};
  std::vector<float> y(6, 5.0f);
  attnscope::kernels::gemm_xwt<true>(2, nullptr, 0, w, y.data(), 3);
  CHECK(y == std::vector<float>(6, 5.0f));
  attnscope::kernels::gemm_xwt<false>(2, nullptr, 0, w, y.data(), 3);
  CHECK(y == std::vector<float>(6, 0.0f));
  attnscope::kernels::gemm_xwt<false>(0, nullptr, 0, StoredWeights{nullptr, StoredFloat::float32, 3, 4, 16, false},
                                      nullptr, 3);
}

TEST_CASE("gemm_xwt returns whether every element of y is finite, for both kernels and any split of the columns",
          "[kernels][gemm]") {
  attnscope::Random random(4099);
  const float infinity = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  int cases = 0, nonfinite_cases = 0;
  for (const Index m : {Index(5), Index(13)})
    for (const Index n : {Index(17), Index(50)})
      for (const Index k : {Index(7), Index(300)})
        for (const bool transposed : {false, true})
          for (int poison = 0; poison < 5; ++poison) {
            // 0: nothing; 1: one weight ±inf; 2: one weight NaN; 3: y₀ NaN inside the block (y +=);
            // 4: y₀ NaN and x inf in the padding between rows (never read nor written)
            GemmTestWeights w = gemm_test_weights(random, StoredFloat::float32, n, k, transposed);
            const Index x_stride = k + 5, y_stride = n + 3;
            std::vector<float> x = gemm_test_normals(random, m * x_stride);
            std::vector<float> y0 = gemm_test_normals(random, m * y_stride);
            const Index r = Index(random.uniform() * double(n)) % n, c = Index(random.uniform() * double(k)) % k;
            const std::size_t weight_byte = transposed ? w.stored.row_bytes * std::size_t(c) + 4 * std::size_t(r)
                                                       : w.stored.row_bytes * std::size_t(r) + 4 * std::size_t(c);
            const float weight_value = poison == 1 ? (r % 2 ? infinity : -infinity) : nan;
            if (poison == 1 || poison == 2) std::memcpy(w.bytes.data() + weight_byte, &weight_value, 4);
            if (poison == 3) y0[std::size_t((m - 1) * y_stride + r)] = nan;
            if (poison == 4) {
              y0[std::size_t(y_stride - 1)] = nan;
              x[std::size_t(x_stride - 1)] = infinity;
            }
            const bool add = poison == 3 || poison == 4 || (m + n + k) % 2 == 1;
            for (const GemmKernel kernel : {GemmKernel::reference, GemmKernel::avx2, GemmKernel::avx512})
              for (const Index parts : {Index(1), Index(3)}) {
                if (kernel == GemmKernel::avx2 && !attnscope::kernels::gemm_avx2_available()) continue;
                if (kernel == GemmKernel::avx512 && !attnscope::kernels::gemm_avx512_available()) continue;
                std::vector<float> y = y0;
                const bool reported =
                    add ? attnscope::kernels::gemm_xwt<true>(m, x.data(), x_stride, w.stored, y.data(), y_stride,
                                                             {kernel, parts})
                        : attnscope::kernels::gemm_xwt<false>(m, x.data(), x_stride, w.stored, y.data(), y_stride,
                                                              {kernel, parts});
                bool finite = true;  // the m × n block of y, scanned
                for (Index i = 0; i < m; ++i)
                  for (Index j = 0; j < n; ++j) finite = finite && std::isfinite(y[std::size_t(i * y_stride + j)]);
                INFO("m " << m << ", n " << n << ", k " << k << (transposed ? " transposed" : "") << ", poison "
                          << poison << ", parts " << parts << ", " << attnscope::kernels::gemm_kernel_name(kernel));
                CHECK(reported == finite);
                CHECK(finite == (poison == 0 || poison == 4));
                ++cases;
                nonfinite_cases += finite ? 0 : 1;
              }
          }
  CHECK(cases >= 80);  // 160 with the AVX2 kernel, 240 with AVX-512
  CHECK(nonfinite_cases >= 48);
}

TEST_CASE("the micro-kernels give the same bits with A read through row pointers as from a packed A micro-panel, "
          "and the AVX2 kernel the bits of the scalar reference",
          "[kernels][gemm]") {
  namespace detail = attnscope::kernels::detail;
  using detail::gemm_mr;
  using detail::gemm_nr;
  attnscope::Random random(6016);
  for (const Index kc : {Index(1), Index(3), Index(8), Index(17), Index(64), Index(256)})
    for (const detail::GemmWrite write : {detail::GemmWrite::store, detail::GemmWrite::add}) {
      const Index a_stride = kc + 3;  // six rows, not contiguous with each other
      const std::vector<float> rows = gemm_test_normals(random, gemm_mr * a_stride);
      std::vector<float> packed(static_cast<std::size_t>(gemm_mr * kc));
      for (Index p = 0; p < kc; ++p)
        for (Index i = 0; i < gemm_mr; ++i) packed[std::size_t(p * gemm_mr + i)] = rows[std::size_t(i * a_stride + p)];
      std::vector<float> b_storage(static_cast<std::size_t>(kc * gemm_nr + 8));
      float* b = detail::GemmBuffers::aligned(b_storage, kc * gemm_nr);
      const std::vector<float> b_values = gemm_test_normals(random, kc * gemm_nr);
      std::copy(b_values.begin(), b_values.end(), b);
      const Index ldc = gemm_nr + 5;
      const std::vector<float> c0 = gemm_test_normals(random, gemm_mr * ldc);
      detail::RowPointersA pointers;
      for (Index i = 0; i < gemm_mr; ++i) pointers.rows[i] = rows.data() + i * a_stride;
      std::vector<float> from_packed = c0, from_rows = c0;
      CHECK(detail::gemm_micro_reference(kc, packed.data(), b, from_packed.data(), ldc, write));
      CHECK(detail::gemm_micro_reference(kc, pointers, b, from_rows.data(), ldc, write));
      CHECK(gemm_same_bits(from_packed, from_rows));
      if (detail::gemm_avx2_available()) {
#if defined(ATTNSCOPE_GEMM_AVX2)
        std::vector<float> avx2_packed = c0, avx2_rows = c0;
        CHECK(detail::gemm_micro_avx2(kc, packed.data(), b, avx2_packed.data(), ldc, write));
        CHECK(detail::gemm_micro_avx2(kc, pointers, b, avx2_rows.data(), ldc, write));
        CHECK(gemm_same_bits(avx2_packed, from_packed));
        CHECK(gemm_same_bits(avx2_rows, from_packed));
#endif
      }
    }
}

TEST_CASE("the AVX-512 micro-kernel's 6 x 32 tile of two micro-panels is bitwise the reference's two 6 x 16 tiles, "
          "and its 6 x 16 tile of one panel the reference's, through either A cursor",
          "[kernels][gemm]") {
  namespace detail = attnscope::kernels::detail;
  using detail::gemm_mr;
  using detail::gemm_nr;
  if (!detail::gemm_avx512_available()) {
    SUCCEED("no AVX-512F on this CPU: the kernel is not run here");
    return;
  }
#if defined(ATTNSCOPE_GEMM_AVX2)
  attnscope::Random random(6032);
  int nonfinite_reported = 0;
  for (const Index kc : {Index(1), Index(3), Index(8), Index(17), Index(64), Index(256)})
    for (const detail::GemmWrite write : {detail::GemmWrite::store, detail::GemmWrite::add})
      for (int poison = 0; poison < 3; ++poison) {  // 0: none; 1: an inf in panel 0; 2: a NaN in panel 1
        const Index a_stride = kc + 3;
        const std::vector<float> rows = gemm_test_normals(random, gemm_mr * a_stride);
        std::vector<float> packed(static_cast<std::size_t>(gemm_mr * kc));
        for (Index p = 0; p < kc; ++p)
          for (Index i = 0; i < gemm_mr; ++i) packed[std::size_t(p * gemm_mr + i)] = rows[std::size_t(i * a_stride + p)];
        std::vector<float> b_storage;
        float* b0 = detail::GemmBuffers::aligned(b_storage, 2 * kc * gemm_nr);
        float* b1 = b0 + kc * gemm_nr;
        const std::vector<float> b_values = gemm_test_normals(random, 2 * kc * gemm_nr);
        std::copy(b_values.begin(), b_values.end(), b0);
        if (poison == 1) b0[(kc - 1) * gemm_nr + 3] = std::numeric_limits<float>::infinity();
        if (poison == 2) b1[gemm_nr - 1] = std::numeric_limits<float>::quiet_NaN();
        const Index ldc = 2 * gemm_nr + 5;
        const std::vector<float> c0 = gemm_test_normals(random, gemm_mr * ldc);
        detail::RowPointersA pointers;
        for (Index i = 0; i < gemm_mr; ++i) pointers.rows[i] = rows.data() + i * a_stride;
        // the reference: columns 0-15 from b0, 16-31 from b1, as two tiles
        std::vector<float> expected = c0;
        const bool left = detail::gemm_micro_reference(kc, packed.data(), b0, expected.data(), ldc, write);
        const bool right = detail::gemm_micro_reference(kc, packed.data(), b1, expected.data() + gemm_nr, ldc, write);
        std::vector<float> wide_packed = c0, wide_rows = c0, narrow = c0;
        const bool wide_finite = detail::gemm_micro_avx512(kc, packed.data(), b0, b1, wide_packed.data(), ldc, write);
        CHECK(wide_finite == (left && right));
        CHECK(detail::gemm_micro_avx512(kc, pointers, b0, b1, wide_rows.data(), ldc, write) == wide_finite);
        CHECK(gemm_same_bits(wide_packed, expected));
        CHECK(gemm_same_bits(wide_rows, expected));
        // one panel: only columns 0-15 written
        CHECK(detail::gemm_micro_avx512(kc, packed.data(), b0, nullptr, narrow.data(), ldc, write) == left);
        std::vector<float> narrow_expected = c0;
        detail::gemm_micro_reference(kc, packed.data(), b0, narrow_expected.data(), ldc, write);
        CHECK(gemm_same_bits(narrow, narrow_expected));
        CHECK(left == (poison != 1));
        CHECK(right == (poison != 2));
        nonfinite_reported += wide_finite ? 0 : 1;
      }
  CHECK(nonfinite_reported == 24);
#endif
}
