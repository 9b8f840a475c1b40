// Tests of Random::shuffle and Random::shuffle_prefix (core/random.hpp): the exact draw order of the Fisher–Yates
// loops they replaced (so seeded results elsewhere stay bitwise identical), permutations, uniformity, errors.
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/random.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

// The backward Fisher–Yates loop formerly written out in logits::kept_key_columns and
// composition::random_ranking (reference for the draw order).
void reference_backward_shuffle(std::vector<int>& values, attnscope::Random& random) {
  for (long long i = static_cast<long long>(values.size()) - 1; i > 0; --i)
    std::swap(values[static_cast<std::size_t>(i)],
              values[static_cast<std::size_t>(random.below(static_cast<std::uint64_t>(i + 1)))]);
}

// The forward partial Fisher–Yates loop formerly written out in capacity::expected_distance_monte_carlo.
void reference_forward_partial_shuffle(std::vector<int>& values, std::size_t count, attnscope::Random& random) {
  const auto length = static_cast<long long>(values.size());
  for (long long i = 0; i < static_cast<long long>(count); ++i)
    std::swap(values[static_cast<std::size_t>(i)],
              values[static_cast<std::size_t>(
                  i + static_cast<long long>(random.below(static_cast<std::uint64_t>(length - i))))]);
}

std::vector<int> iota_vector(std::size_t size) {
  std::vector<int> values(size);
  std::iota(values.begin(), values.end(), 0);
  return values;
}

bool is_permutation_of_iota(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  return values == iota_vector(values.size());
}

const std::uint64_t shuffle_test_seeds[] = {0, 1, 7, 42, 2026, 0x9E3779B97F4A7C15ull, ~std::uint64_t{0}};
const std::size_t shuffle_test_sizes[] = {0, 1, 2, 3, 5, 8, 17, 64, 257};

}  // namespace

TEST_CASE("Random::shuffle makes exactly the draws of the backward Fisher-Yates loop", "[core][random]") {
  for (const std::uint64_t seed : shuffle_test_seeds)
    for (const std::size_t size : shuffle_test_sizes) {
      CAPTURE(seed, size);
      attnscope::Random reference_random(seed), random(seed);
      std::vector<int> expected = iota_vector(size), values = iota_vector(size);
      reference_backward_shuffle(expected, reference_random);
      random.shuffle(values);
      CHECK(values == expected);
      CHECK(random.bits() == reference_random.bits());  // same number of draws
      // a second shuffle continues from the same state (no hidden state in the generator)
      reference_backward_shuffle(expected, reference_random);
      random.shuffle(values);
      CHECK(values == expected);
      CHECK(random.bits() == reference_random.bits());
    }
}

TEST_CASE("Random::shuffle_prefix makes exactly the draws of the forward partial Fisher-Yates loop",
          "[core][random]") {
  for (const std::uint64_t seed : shuffle_test_seeds)
    for (const std::size_t size : shuffle_test_sizes)
      for (const std::size_t count : {std::size_t{0}, std::size_t{1}, size / 2, size > 0 ? size - 1 : 0, size}) {
        if (count > size) continue;
        CAPTURE(seed, size, count);
        attnscope::Random reference_random(seed), random(seed);
        std::vector<int> expected = iota_vector(size), values = iota_vector(size);
        reference_forward_partial_shuffle(expected, count, reference_random);
        random.shuffle_prefix(values, count);
        CHECK(values == expected);                        // the whole vector, not only the prefix
        CHECK(random.bits() == reference_random.bits());  // same number of draws
      }
}

TEST_CASE("Random::shuffle and shuffle_prefix return permutations of their input", "[core][random]") {
  attnscope::Random sizes(11);
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const auto size = static_cast<std::size_t>(sizes.below(40));
    const auto count = static_cast<std::size_t>(sizes.below(size + 1));
    CAPTURE(seed, size, count);
    attnscope::Random random(seed);
    std::vector<int> values = iota_vector(size);
    random.shuffle(values);
    CHECK(is_permutation_of_iota(values));
    random.shuffle_prefix(values, count);
    CHECK(is_permutation_of_iota(values));
  }
  // any element type, not only integers
  std::vector<std::string> words = {"a", "b", "c", "d", "e"};
  attnscope::Random random(3);
  random.shuffle(words);
  random.shuffle_prefix(words, 2);
  std::sort(words.begin(), words.end());
  CHECK(words == std::vector<std::string>{"a", "b", "c", "d", "e"});
}

TEST_CASE("Random::shuffle draws each permutation of 3 items equally often", "[core][random]") {
  // 60000 shuffles, expected 10000 per permutation; sd = sqrt(60000 · 1/6 · 5/6) ≈ 91, so ±500 is ≈ 5.5 sd.
  attnscope::Random random(20261201);
  std::map<std::vector<int>, int> seen;
  for (int trial = 0; trial < 60000; ++trial) {
    std::vector<int> values = iota_vector(3);
    random.shuffle(values);
    ++seen[values];
  }
  CHECK(seen.size() == 6);
  for (const auto& [permutation, times] : seen) {
    CAPTURE(permutation, times);
    CHECK(times >= 9500);
    CHECK(times <= 10500);
  }
}

TEST_CASE("Random::shuffle puts each item at each position equally often", "[core][random]") {
  // 100000 shuffles of 10 items: expected 10000 per (item, position); sd ≈ 95, so ±500 is ≈ 5.3 sd.
  attnscope::Random random(99);
  std::vector<std::vector<int>> times(10, std::vector<int>(10, 0));
  for (int trial = 0; trial < 100000; ++trial) {
    std::vector<int> values = iota_vector(10);
    random.shuffle(values);
    for (std::size_t position = 0; position < 10; ++position)
      ++times[static_cast<std::size_t>(values[position])][position];
  }
  for (std::size_t item = 0; item < 10; ++item)
    for (std::size_t position = 0; position < 10; ++position) {
      CAPTURE(item, position);
      CHECK(times[item][position] >= 9500);
      CHECK(times[item][position] <= 10500);
    }
}

TEST_CASE("Random::shuffle_prefix draws each ordered 2-subset of 4 items equally often", "[core][random]") {
  // 12 ordered pairs, 120000 draws: expected 10000 each; sd = sqrt(120000 · 1/12 · 11/12) ≈ 96, ±500 ≈ 5.2 sd.
  attnscope::Random random(5);
  std::map<std::pair<int, int>, int> seen;
  for (int trial = 0; trial < 120000; ++trial) {
    std::vector<int> values = iota_vector(4);
    random.shuffle_prefix(values, 2);
    ++seen[{values[0], values[1]}];
  }
  CHECK(seen.size() == 12);
  for (const auto& [pair, times] : seen) {
    CAPTURE(pair.first, pair.second, times);
    CHECK(pair.first != pair.second);
    CHECK(times >= 9500);
    CHECK(times <= 10500);
  }
}

TEST_CASE("Random::shuffle_prefix rejects count > size; count 0 and count == size work", "[core][random]") {
  attnscope::Random random(1);
  std::vector<int> values = iota_vector(3);
  const std::string message = attnscope::testing::error_message([&] { random.shuffle_prefix(values, 4); });
  CHECK(message == "attnscope::Random::shuffle_prefix: count 4 exceeds the vector's size 3");
  CHECK_THROWS_AS(random.shuffle_prefix(values, 4), std::invalid_argument);
  std::vector<int> empty;
  CHECK_THROWS_AS(random.shuffle_prefix(empty, 1), attnscope::invalid_argument);
  CHECK(values == iota_vector(3));  // untouched by the rejected calls

  attnscope::Random fresh(1), untouched(1);
  fresh.shuffle_prefix(values, 0);
  CHECK(values == iota_vector(3));
  CHECK(fresh.bits() == untouched.bits());  // no draw for count 0
  fresh.shuffle_prefix(empty, 0);
  CHECK(empty.empty());

  attnscope::Random full(8), reference(8);
  std::vector<int> expected = iota_vector(6);
  values = iota_vector(6);
  full.shuffle_prefix(values, 6);
  reference_forward_partial_shuffle(expected, 6, reference);
  CHECK(values == expected);
  CHECK(is_permutation_of_iota(values));

  attnscope::Random single(4), single_untouched(4);
  std::vector<int> one = {7};
  single.shuffle(one);
  single.shuffle(empty);
  CHECK(one == std::vector<int>{7});
  CHECK(single.bits() == single_untouched.bits());  // no draw for size <= 1
}
