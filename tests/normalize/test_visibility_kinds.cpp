// The Visibility kinds beyond all / causal / explicit mask — sliding windows (causal and two-sided, with a row offset),
// key masks (padding) and visible sink keys — through the normalize module: every function gives the same result as
// with the equivalent explicit mask (which takes the generic masked path), and the Visibility itself agrees with a
// mask spelled out entry by entry (visible, visible_count, contiguous_run, validate).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/jacobian.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::KeyMask;
using attnscope::Mask;
using attnscope::RowMatrix;
using attnscope::Visibility;

struct Case {
  Visibility visibility;
  Mask mask;  // entry by entry
};

/// A random window / key mask / sink visibility of rows × cols, every row keeping a key, and its spelled-out mask.
Case random_case(attnscope::Random& random, Index rows, Index cols) {
  const bool causal = random.uniform() < 0.6;
  const Index offset = causal ? cols - rows : 0;
  const Index window = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols) + 1));
  KeyMask keys;
  if (random.uniform() < 0.5) {
    keys.resize(cols);
    for (Index j = 0; j < cols; ++j) keys(j) = random.uniform() < 0.75;
    for (Index i = 0; i < rows; ++i) keys(std::min(cols - 1, i + offset)) = true;  // each row keeps its own position
  }
  std::vector<Index> sinks;
  if (random.uniform() < 0.5) sinks = {0, static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)))};
  Case c;
  c.visibility = Visibility(attnscope::SlidingWindow{window, causal, offset}).with_key_mask(keys).with_sink_keys(sinks);
  c.mask.resize(rows, cols);
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      const Index t = i + offset;
      const bool band = causal ? (j <= t && j > t - window) : (j > t - window && j < t + window);
      const bool sink = std::find(sinks.begin(), sinks.end(), j) != sinks.end() && (!causal || j <= t);
      c.mask(i, j) = (keys.size() == 0 || keys(j)) && (band || sink);
    }
  return c;
}

}  // namespace

TEST_CASE("visibility kinds: windows, key masks and sinks agree with their masks entry by entry", "[normalize]") {
  attnscope::Random random(3301);
  for (int trial = 0; trial < 200; ++trial) {
    const Index cols = 1 + static_cast<Index>(random.below(40));
    const Index rows = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)));
    const Case c = random_case(random, rows, cols);
    INFO("trial " << trial);
    CHECK_FALSE(c.visibility.is_prefix());
    REQUIRE((c.visibility.to_mask(rows, cols) == c.mask).all());
    for (Index i = 0; i < rows; ++i) {
      CHECK(c.visibility.visible_count(i, cols) == c.mask.row(i).count());
      Index first = 0, count = 0;
      const bool run = c.visibility.contiguous_run(i, cols, first, count);
      const Visibility explicit_mask(c.mask);
      Index mask_first = 0, mask_count = 0;
      CHECK(run == explicit_mask.contiguous_run(i, cols, mask_first, mask_count));
      if (run) {
        CHECK(first == mask_first);
        CHECK(count == mask_count);
        CHECK(count == c.mask.row(i).count());
        if (count > 0) CHECK(c.mask.row(i).segment(first, count).all());
      }
    }
  }
}

TEST_CASE("visibility kinds: normalize functions equal the explicit-mask results", "[normalize]") {
  attnscope::Random random(3302);
  for (int trial = 0; trial < 80; ++trial) {
    const Index cols = 2 + static_cast<Index>(random.below(60));
    const Index rows = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)));
    const Case c = random_case(random, rows, cols);
    const Visibility explicit_mask(c.mask);
    const RowMatrix<double> z = attnscope::testing::random_logits(random, rows, cols, 2.0);
    INFO("trial " << trial << ", " << rows << "x" << cols);
    const RowMatrix<double> p = attnscope::softmax(z, 1.0, c.visibility);
    CHECK(p == attnscope::softmax(z, 1.0, explicit_mask));
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < cols; ++j)
        if (!c.mask(i, j)) CHECK(p(i, j) == 0);
    CHECK(attnscope::row_entropy(p, c.visibility) == attnscope::row_entropy(p, explicit_mask));
    CHECK(attnscope::softmax_jacobian_spectral_norm(p, 1.0, c.visibility) ==
          attnscope::softmax_jacobian_spectral_norm(p, 1.0, explicit_mask));
    for (const char* name : {"sparsemax", "entmax:1.5", "ssmax:0.5", "temperature:2"}) {
      INFO(name);
      const auto map = attnscope::parse_normalization_map(name);
      CHECK(attnscope::apply_map(map, z, c.visibility) == attnscope::apply_map(map, z, explicit_mask));
    }
  }
}

TEST_CASE("visibility kinds: structural errors name the function and the value", "[normalize]") {
  using attnscope::testing::error_message;
  const RowMatrix<double> z = attnscope::testing::random_logits(3303, 4, 5);
  CHECK(error_message([&] { attnscope::softmax(z, 1.0, Visibility(attnscope::SlidingWindow{0})); }) ==
        "attnscope::softmax: window must be >= 1, got 0");
  CHECK(error_message([&] { attnscope::softmax(z, 1.0, Visibility().with_key_mask(KeyMask::Constant(4, true))); }) ==
        "attnscope::softmax: key mask has 4 entries for 5 keys");
  CHECK(error_message([&] { attnscope::softmax(z, 1.0, Visibility(attnscope::causal).with_sink_keys({5})); }) ==
        "attnscope::softmax: visible sink key 5 is outside [0, 5)");
  CHECK(error_message([&] { attnscope::softmax(z, 1.0, Visibility().with_key_mask(KeyMask::Constant(5, false))); }) ==
        "attnscope::softmax: row 0 has every key masked");
  CHECK(error_message([&] { Visibility(Mask::Constant(4, 5, true)).with_sink_keys({0}); }) ==
        "attnscope::Visibility::with_sink_keys: an explicit mask already lists the visible keys");
  // a key mask on an explicit mask hides those columns
  KeyMask keys = KeyMask::Constant(5, true);
  keys(2) = false;
  const Visibility masked = Visibility(Mask::Constant(4, 5, true)).with_key_mask(keys);
  CHECK(masked.kind() == Visibility::Kind::mask);
  CHECK(masked.visible_count(1, 5) == 4);
  CHECK_FALSE(masked.visible(3, 2, 5));
}
