// Targets and masks of the logit-explosion lab (docs/theory/logits.md §2, §5.2).
#include <cmath>
#include <cstdint>

#include "attnscope/logits/masks.hpp"
#include "attnscope/logits/targets.hpp"
#include "support/catch.hpp"

using attnscope::Index;
using attnscope::Mask;

TEST_CASE("causal band target: uniform over the w keys i-w < j <= i, rows sum to 1", "[logits][targets]") {
  for (Index n : {1, 5, 33})
    for (Index w : {1, 2, 4, 40}) {
      const auto p = attnscope::logits::causal_band_target(n, w);
      for (Index i = 0; i < n; ++i) {
        const Index width = std::min(w, i + 1);
        CHECK(p.row(i).sum() == Approx(1.0).epsilon(1e-14));
        for (Index j = 0; j < n; ++j) {
          const bool in_band = j <= i && i - j < w;
          CHECK(p(i, j) == (in_band ? 1.0 / static_cast<double>(width) : 0.0));
        }
      }
    }
}

TEST_CASE("floored causal band target: (1-eps) P + eps/(i+1) on j <= i, zero in the future", "[logits][targets]") {
  const double eps = 1e-3;
  const auto p = attnscope::logits::causal_band_target(20, 3, eps);
  const auto hard = attnscope::logits::causal_band_target(20, 3);
  for (Index i = 0; i < 20; ++i) {
    CHECK(p.row(i).sum() == Approx(1.0).epsilon(1e-14));
    for (Index j = 0; j < 20; ++j) {
      if (j > i) CHECK(p(i, j) == 0.0);
      else CHECK(p(i, j) == Approx((1 - eps) * hard(i, j) + eps / static_cast<double>(i + 1)).epsilon(1e-14));
    }
  }
  // floored_target with a mask: the floor is spread over the visible keys only
  const Mask window = attnscope::logits::sliding_window_mask(20, 5);
  const auto floored = attnscope::logits::floored_target(hard, 0.1, window);
  for (Index i = 0; i < 20; ++i) {
    CHECK(floored.row(i).sum() == Approx(1.0).epsilon(1e-14));
    for (Index j = 0; j < 20; ++j)
      if (!window(i, j)) CHECK(floored(i, j) == 0.0);
  }
}

TEST_CASE("bidirectional band target: uniform over |i-j| <= k", "[logits][targets]") {
  const auto p = attnscope::logits::bidirectional_band_target(15, 2);
  for (Index i = 0; i < 15; ++i) {
    CHECK(p.row(i).sum() == Approx(1.0).epsilon(1e-14));
    const double count = static_cast<double>(std::min<Index>(i + 2, 14) - std::max<Index>(i - 2, 0) + 1);
    for (Index j = 0; j < 15; ++j) CHECK(p(i, j) == (std::abs(i - j) <= 2 ? 1.0 / count : 0.0));
  }
}

TEST_CASE("kept key columns: round(n keep) columns, column 0 always, deterministic per seed", "[logits][masks]") {
  for (std::uint64_t seed : {0u, 1u, 7u}) {
    const auto keep = attnscope::logits::kept_key_columns(100, 0.1, seed);
    CHECK(std::count(keep.begin(), keep.end(), true) == 10);
    CHECK(keep[0]);
    CHECK(keep == attnscope::logits::kept_key_columns(100, 0.1, seed));
  }
  CHECK(attnscope::logits::kept_key_columns(100, 0.1, 1) != attnscope::logits::kept_key_columns(100, 0.1, 2));
  const auto one = attnscope::logits::kept_key_columns(10, 0.0, 3);
  CHECK(std::count(one.begin(), one.end(), true) == 1);
  CHECK(one[0]);
}

TEST_CASE("column drop mask is causal, drops whole columns and never leaves a row empty", "[logits][masks]") {
  const Index n = 64;
  const Mask mask = attnscope::logits::column_drop_mask(n, 0.9, 5);
  const auto keep = attnscope::logits::kept_key_columns(n, 0.1, 5);
  for (Index i = 0; i < n; ++i) {
    CHECK(mask.row(i).count() >= 1);
    for (Index j = 0; j < n; ++j) CHECK(mask(i, j) == (j <= i && keep[static_cast<std::size_t>(j)]));
  }
}

TEST_CASE("column-sparse target: uniform over the w nearest kept keys, inside the column drop mask",
          "[logits][targets]") {
  const Index n = 80, w = 4;
  const auto p = attnscope::logits::column_sparse_target(n, w, 0.1, 11);
  const Mask mask = attnscope::logits::column_drop_mask(n, 0.9, 11);
  for (Index i = 0; i < n; ++i) {
    CHECK(p.row(i).sum() == Approx(1.0).epsilon(1e-14));
    Index visible = 0, support = 0;
    for (Index j = i; j >= 0; --j)
      if (mask(i, j)) {
        ++visible;
        CHECK((p(i, j) > 0) == (visible <= w));  // nearest w visible keys carry the mass
      }
    for (Index j = 0; j < n; ++j) {
      if (p(i, j) > 0) ++support;
      if (!mask(i, j)) CHECK(p(i, j) == 0.0);
    }
    CHECK(support == std::min(w, visible));
  }
  // keep = 1 gives back the dense causal band
  CHECK(attnscope::logits::column_sparse_target(30, 3, 1.0, 0) == attnscope::logits::causal_band_target(30, 3));
}

TEST_CASE("sliding window mask has flash-attention semantics: keys i-span .. i", "[logits][masks]") {
  const Mask mask = attnscope::logits::sliding_window_mask(12, 3);
  for (Index i = 0; i < 12; ++i) {
    CHECK(mask.row(i).count() == std::min<Index>(i + 1, 4));
    for (Index j = 0; j < 12; ++j) CHECK(mask(i, j) == (j <= i && j >= i - 3));
  }
  const Mask self_only = attnscope::logits::sliding_window_mask(9, 0);
  for (Index i = 0; i < 9; ++i)
    for (Index j = 0; j < 9; ++j) CHECK(self_only(i, j) == (i == j));
  CHECK((attnscope::logits::sliding_window_mask(9, 8) == attnscope::logits::causal_mask(9)).all());
}

TEST_CASE("head layout: full causal heads first, then window heads", "[logits][masks]") {
  const auto layout = attnscope::logits::head_layout(4, 1, 10, 2);
  REQUIRE(layout.size() == 4);
  CHECK((layout[0] == attnscope::logits::causal_mask(10)).all());
  for (int h = 1; h < 4; ++h) CHECK((layout[static_cast<std::size_t>(h)] == attnscope::logits::sliding_window_mask(10, 2)).all());
}

TEST_CASE("targets and masks reject bad parameters", "[logits][targets][errors]") {
  using attnscope::invalid_argument;
  CHECK_THROWS_AS(attnscope::logits::causal_band_target(0, 2), invalid_argument);
  CHECK_THROWS_WITH(attnscope::logits::causal_band_target(8, 0), Catch::Contains("causal_band_target") && Catch::Contains("0"));
  CHECK_THROWS_AS(attnscope::logits::causal_band_target(8, 2, 1.5), invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::causal_band_target(8, 2, std::nan("")), invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::bidirectional_band_target(8, -1), invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::column_sparse_target(8, 2, 0.0, 0), invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::column_sparse_target(8, 2, 1.1, 0), invalid_argument);
  CHECK_THROWS_WITH(attnscope::logits::column_drop_mask(8, 1.0, 0), Catch::Contains("column_drop_mask") && Catch::Contains("sparsity"));
  CHECK_THROWS_AS(attnscope::logits::sliding_window_mask(8, -1), invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::head_layout(4, 5, 8, 2), invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::head_layout(0, 0, 8, 2), invalid_argument);
  CHECK_THROWS_AS(attnscope::logits::band_indicator(8, 0), invalid_argument);
  Eigen::MatrixXd p = Eigen::MatrixXd::Constant(3, 3, 1.0 / 3);
  p(1, 1) = std::nan("");
  CHECK_THROWS_WITH(attnscope::logits::floored_target(p, 0.1), Catch::Contains("floored_target") && Catch::Contains("row 1"));
}
