// jacobian_spectral_norm from logits is fused per row: the map's output goes into a row buffer and the
// exact norm is taken from it, with no rows×cols probability matrix. The fused result must be bitwise the unfused
// composition of the public functions (map, then the *_jacobian_spectral_norm of spectral_norm.hpp) — for softmax,
// whose root is found on the exponentials without dividing them by their sum, within twice the accuracy contract — for every
// symmetric map, float and double, every visibility kind (all, causal with offsets, banded and scattered masks),
// on seeded random logits of several scales and shapes, and for any number of threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/normalize.hpp"
#include "support/catch.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::Vector;
using attnscope::Visibility;

/// The visibilities the fused loop must handle: every key, causal (two offsets), a band (contiguous runs) and a
/// scattered mask (gathered rows), none with a fully masked row.
std::vector<Visibility> fused_norm_visibilities(Index rows, Index cols, attnscope::Random& random) {
  attnscope::Mask band(rows, cols), scattered(rows, cols);
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      band(i, j) = std::abs(i % cols - j) <= 2;
      scattered(i, j) = j == i % cols || random.uniform(0, 1) < 0.6;
    }
  return {Visibility{}, Visibility{attnscope::Causal{0}}, Visibility{attnscope::Causal{cols / 3}}, Visibility{band},
          Visibility{scattered}};
}

/// The norms the unfused path computes: materialize the map's output, then the probability-based exact norm.
template <class Scalar>
Vector<Scalar> unfused_norms(const RowMatrix<Scalar>& z, const attnscope::NormalizationMap& map,
                             const Visibility& visibility) {
  using namespace attnscope;
  if (const auto* softmax_map = std::get_if<SoftmaxMap>(&map)) {
    const Scalar temperature = static_cast<Scalar>(softmax_map->temperature);
    return softmax_jacobian_spectral_norm(softmax(z, temperature, visibility), Scalar(1) / temperature, visibility);
  }
  if (const auto* ssmax_map = std::get_if<ScalableSoftmaxMap>(&map)) {
    const Scalar s = static_cast<Scalar>(ssmax_map->s);
    Vector<Scalar> norms = softmax_jacobian_spectral_norm(ssmax(z, s, visibility), Scalar(1), visibility);
    for (Index i = 0; i < z.rows(); ++i) norms(i) *= detail::ssmax_scale(s, visibility.visible_count(i, z.cols()));
    return norms;
  }
  if (const auto* sink_map = std::get_if<SinkSoftmaxMap>(&map))
    return sink_softmax_jacobian_spectral_norm(
        softmax_with_sink(z, static_cast<Scalar>(sink_map->sink_logit), visibility), visibility);
  if (std::holds_alternative<SparsemaxMap>(map))
    return sparsemax_jacobian_spectral_norm(sparsemax(z, visibility), visibility);
  if (std::holds_alternative<Entmax15Map>(map))
    return entmax_jacobian_spectral_norm(entmax15(z, visibility), Scalar(1.5), visibility);
  const Scalar alpha = static_cast<Scalar>(std::get<EntmaxBisectMap>(map).alpha);
  return entmax_jacobian_spectral_norm(entmax_bisect(z, alpha, visibility), alpha, visibility);
}

std::vector<attnscope::NormalizationMap> fused_norm_maps() {
  using namespace attnscope;
  return {SoftmaxMap{1}, SoftmaxMap{0.3}, SoftmaxMap{4}, ScalableSoftmaxMap{0.7}, SinkSoftmaxMap{0},
          SinkSoftmaxMap{2.5}, SparsemaxMap{}, Entmax15Map{}, EntmaxBisectMap{1.25}, EntmaxBisectMap{2.5}};
}

/// The fused softmax norm solves the secular equation on the exponentials e (the largest is 1) and divides the root by
/// Σe; the unfused one on p = e/Σe rounded. Both are within the solver's contract (2e-6 float, 3e-14 double) of the
/// exact norm of their input, and e/Σe differs from p by half an ulp per entry: twice the contract bounds the gap.
template <class Scalar>
inline constexpr double softmax_fused_tolerance = sizeof(Scalar) == 4 ? 4e-6 : 6e-14;
template <class Scalar>
double largest_softmax_difference = 0;

}  // namespace

TEMPLATE_TEST_CASE("jacobian_spectral_norm from logits, fused per row, is the unfused composition (bitwise but softmax)",
                   "[normalize][spectral_norm][fused]", float, double) {
  attnscope::Random random(1515);
  struct Shape {
    Index rows, cols;
  };
  for (const Shape shape : {Shape{1, 1}, Shape{3, 2}, Shape{40, 17}, Shape{37, 64}, Shape{20, 300}}) {
    for (double scale : {0.05, 1.0, 6.0}) {
      const RowMatrix<TestType> z =
          attnscope::testing::random_logits<double>(random, shape.rows, shape.cols, scale).template cast<TestType>();
      for (const Visibility& visibility : fused_norm_visibilities(shape.rows, shape.cols, random)) {
        for (const attnscope::NormalizationMap& map : fused_norm_maps()) {
          const Vector<TestType> fused = attnscope::jacobian_spectral_norm(z, map, visibility);
          const Vector<TestType> unfused = unfused_norms(z, map, visibility);
          INFO("map " << attnscope::to_string(map) << ", shape " << shape.rows << "x" << shape.cols << ", scale "
                      << scale << ", visibility kind " << static_cast<int>(visibility.kind()));
          REQUIRE(fused.size() == unfused.size());
          if (std::holds_alternative<attnscope::SoftmaxMap>(map)) {
            // solved on the exponentials, without rounding them to probabilities: within the accuracy contract
            for (Index i = 0; i < fused.size(); ++i) {
              CHECK(std::fabs(static_cast<double>(fused(i)) - static_cast<double>(unfused(i))) <=
                    softmax_fused_tolerance<TestType> * static_cast<double>(unfused(i)));
              largest_softmax_difference<TestType> = std::max(
                  largest_softmax_difference<TestType>,
                  std::fabs(static_cast<double>(fused(i)) / static_cast<double>(unfused(i)) - 1));
            }
          } else {
            for (Index i = 0; i < fused.size(); ++i) CHECK(fused(i) == unfused(i));
          }
        }
      }
    }
  }
  WARN("largest relative gap fused/unfused softmax norm: " << largest_softmax_difference<TestType>);
}

TEST_CASE("fused softmax Jacobian norms from logits on a 512x4096 float block: the unfused norms, any thread count",
          "[normalize][spectral_norm][fused]") {
  const RowMatrix<float> z = attnscope::testing::random_logits<double>(20261201, 512, 4096, 3.0).cast<float>();
  const Vector<float> unfused = attnscope::softmax_jacobian_spectral_norm(attnscope::softmax(z), 1.0f);
  const Vector<float> fused = attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1});
  for (Index i = 0; i < fused.size(); ++i)
    CHECK(std::fabs(fused(i) - unfused(i)) <= softmax_fused_tolerance<float> * unfused(i));
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Vector<float> one_thread = attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1});
  omp_set_num_threads(threads);
  CHECK(one_thread == fused);
#endif
  for (Index i = 0; i < fused.size(); ++i) {  // 0 < ‖J‖₂ ≤ 1/2 (docs/theory/normalization-maps.md §4.1)
    CHECK(fused(i) > 0);
    CHECK(fused(i) <= 0.5f);
  }
}

TEST_CASE("fused softmax Jacobian norms check the logits row by row: a non-finite visible logit is named, a masked one "
          "is never read",
          "[normalize][spectral_norm][fused]") {
  // the softmax path leaves out the separate validation pass over the logits: its row loop checks them
  RowMatrix<float> z = attnscope::testing::random_logits<double>(77, 6, 9, 1.0).cast<float>();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    RowMatrix<float> with_bad = z;
    with_bad(4, 2) = bad;
    CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm(with_bad, attnscope::SoftmaxMap{1}),
                      Catch::Contains("attnscope::jacobian_spectral_norm") && Catch::Contains("row 4, column 2"));
    // causal: row 1 sees columns 0 and 1 only, so a bad logit at column 5 is masked and the norms are those without it
    RowMatrix<float> masked_bad = z;
    masked_bad(1, 5) = bad;
    const Visibility causal{attnscope::Causal{0}};
    CHECK(attnscope::jacobian_spectral_norm(masked_bad, attnscope::SoftmaxMap{1}, causal) ==
          attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1}, causal));
  }
  // wider rows, so the next row's max taken inside the secular pass runs on packets and a scalar tail: a bad logit
  // in the first row of a block of 16 (its max taken on its own), inside a block, in the packet part and in the tail
  const RowMatrix<double> wide = attnscope::testing::random_logits<double>(78, 40, 100, 1.0);
  struct Position {
    Index row, column;
  };
  for (const Position at : {Position{0, 0}, Position{4, 2}, Position{16, 3}, Position{17, 50}, Position{20, 99},
                            Position{39, 97}}) {
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
      RowMatrix<double> with_bad = wide;
      with_bad(at.row, at.column) = bad;
      const std::string where = "row " + std::to_string(at.row) + ", column " + std::to_string(at.column);
      CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm(with_bad, attnscope::SoftmaxMap{1}),
                        Catch::Contains("attnscope::jacobian_spectral_norm") && Catch::Contains(where));
      CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm(with_bad.cast<float>().eval(), attnscope::SoftmaxMap{1}),
                        Catch::Contains("attnscope::jacobian_spectral_norm") && Catch::Contains(where));
    }
  }
  CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm(RowMatrix<float>(0, 3), attnscope::SoftmaxMap{1}),
                    Catch::Contains("empty input"));
  attnscope::Mask empty_row = attnscope::Mask::Constant(6, 9, true);
  empty_row.row(2).setConstant(false);
  CHECK_THROWS_WITH(attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1}, Visibility{empty_row}),
                    Catch::Contains("row 2 has every key masked"));
}
