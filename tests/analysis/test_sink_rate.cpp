// analysis::sink_score, sink_rate and retrieval_score: hand-computed cases, properties on random inputs (the sink
// score is the mean of the first min(T, L) weights and lies between their minimum and maximum; the sink rate is a
// non-increasing step function of ε counting heads strictly above it; the retrieval score counts the copying steps
// and is invariant to what happens outside the needle), and every refusal.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnscope/analysis/sink_rate.hpp"
#include "attnscope/core/random.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {
using attnscope::Index;
using attnscope::Vector;
using attnscope::analysis::retrieval_score;
using attnscope::analysis::sink_rate;
using attnscope::analysis::sink_score;
using attnscope::testing::error_message;
using Keys = Eigen::Matrix<Index, Eigen::Dynamic, 1>;

Vector<double> column(std::initializer_list<double> values) {
  Vector<double> out(Index(values.size()));
  Index i = 0;
  for (const double v : values) out(i++) = v;
  return out;
}

Keys keys(std::initializer_list<Index> values) {
  Keys out(Index(values.size()));
  Index i = 0;
  for (const Index v : values) out(i++) = v;
  return out;
}
}  // namespace

TEST_CASE("sink_score: hand-computed means over the first T rows") {
  const Vector<double> weights = column({1.0, 0.5, 0.25, 0.25, 0.0});
  CHECK(sink_score(weights, 1) == 1.0);
  CHECK(sink_score(weights, 2) == 0.75);
  CHECK(sink_score(weights, 4) == 0.5);                  // (1 + 0.5 + 0.25 + 0.25) / 4
  CHECK(sink_score(weights, 64) == Approx(2.0 / 5.0));   // fewer rows than T: all 5
  CHECK(sink_score(weights) == Approx(2.0 / 5.0));       // default T = 64
  // a float column (a capture's attention) gives the same
  const Vector<float> single = weights.cast<float>();
  CHECK(sink_score(single, 4) == 0.5);
}

TEST_CASE("sink_score: properties on random columns") {
  attnscope::Random random(5);
  for (int trial = 0; trial < 200; ++trial) {
    const Index rows = 1 + Index(random.below(100)), queries = 1 + Index(random.below(120));
    Vector<double> weights(rows);
    for (Index i = 0; i < rows; ++i) weights(i) = random.uniform();
    const double score = sink_score(weights, queries);
    const Index used = std::min(rows, queries);
    CHECK(score == Approx(weights.head(used).mean()).epsilon(1e-12));
    CHECK(score >= weights.head(used).minCoeff() - 1e-15);
    CHECK(score <= weights.head(used).maxCoeff() + 1e-15);
    // rows past T do not matter
    Vector<double> changed = weights;
    for (Index i = used; i < rows; ++i) changed(i) = random.uniform();
    CHECK(sink_score(changed, queries) == score);
  }
}

TEST_CASE("sink_rate: hand-computed fractions, strict threshold") {
  const std::vector<double> scores = {0.1, 0.3, 0.35, 0.9};
  const auto rate = sink_rate(scores);
  REQUIRE(rate.thresholds == std::vector<double>{0.2, 0.3, 0.4, 0.5});
  REQUIRE(rate.heads == 4);
  CHECK(rate.fraction == std::vector<double>{0.75, 0.5, 0.25, 0.25});  // 0.3 is not above 0.3
  const auto one = sink_rate(scores, {0.0, 1.0});
  CHECK(one.fraction == std::vector<double>{1.0, 0.0});
}

TEST_CASE("sink_rate: properties on random heads") {
  attnscope::Random random(8);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> scores(1 + random.below(50));
    for (double& s : scores) s = random.uniform();
    std::vector<double> thresholds(1 + random.below(10));
    for (double& t : thresholds) t = random.uniform();
    std::sort(thresholds.begin(), thresholds.end());
    const auto rate = sink_rate(scores, thresholds);
    REQUIRE(rate.fraction.size() == thresholds.size());
    for (std::size_t t = 0; t < thresholds.size(); ++t) {
      const double count = double(std::count_if(scores.begin(), scores.end(), [&](double s) { return s > thresholds[t]; }));
      CHECK(rate.fraction[t] == count / double(scores.size()));
      if (t > 0) CHECK(rate.fraction[t] <= rate.fraction[t - 1]);  // non-increasing in ε
    }
    // the heads' order does not matter
    std::vector<double> shuffled = scores;
    std::reverse(shuffled.begin(), shuffled.end());
    CHECK(sink_rate(shuffled, thresholds).fraction == rate.fraction);
  }
}

TEST_CASE("retrieval_score: hand-computed copying steps") {
  // prompt 0..5 = [7 8 9 7 4 5], needle [1, 4) = [8 9 7]; steps generate 9, 7, 8, 7
  const std::vector<int> tokens = {7, 8, 9, 7, 4, 5, 9, 7, 8, 7};
  const Index prompt = 6;
  // step 0 attends key 2 (9 = generated 9: counts), step 1 key 0 (7, equal token but outside the needle: no),
  // step 2 key 1 (8 = 8: counts), step 3 key 2 (9 ≠ 7: no)
  CHECK(retrieval_score(keys({2, 0, 1, 2}), tokens, prompt, 1, 4) == Approx(2.0 / 3.0));
  CHECK(retrieval_score(keys({3, 3, 3, 3}), tokens, prompt, 1, 4) == Approx(2.0 / 3.0));  // 7 at steps 1 and 3
  CHECK(retrieval_score(keys({5, 5, 5, 5}), tokens, prompt, 1, 4) == 0.0);
  CHECK(retrieval_score(keys({}), tokens, prompt, 1, 4) == 0.0);
  // a key among the generated tokens (position 6 seen by step 1 onwards) never counts: the needle is in the prompt
  CHECK(retrieval_score(keys({2, 6, 6, 7}), tokens, prompt, 0, 6) == Approx(1.0 / 6.0));
}

TEST_CASE("retrieval_score: properties on random generations") {
  attnscope::Random random(21);
  for (int trial = 0; trial < 200; ++trial) {
    const Index prompt = 2 + Index(random.below(30)), steps = Index(random.below(20));
    std::vector<int> tokens;
    for (Index i = 0; i < prompt + steps; ++i) tokens.push_back(int(random.below(4)));
    const Index start = Index(random.below(std::uint64_t(prompt)));
    const Index end = start + 1 + Index(random.below(std::uint64_t(prompt - start)));
    Keys attended(steps);
    Index copies = 0;
    for (Index s = 0; s < steps; ++s) {
      attended(s) = Index(random.below(std::uint64_t(prompt + s)));
      if (attended(s) >= start && attended(s) < end && tokens[std::size_t(attended(s))] == tokens[std::size_t(prompt + s)])
        ++copies;
    }
    const double score = retrieval_score(attended, tokens, prompt, start, end);
    CHECK(score == Approx(double(copies) / double(end - start)));
    CHECK(score >= 0);
    CHECK(score <= double(steps) / double(end - start) + 1e-12);
    // prompt tokens outside the needle do not matter
    std::vector<int> changed = tokens;
    for (Index i = 0; i < prompt; ++i)
      if (i < start || i >= end) changed[std::size_t(i)] = 99;
    CHECK(retrieval_score(attended, changed, prompt, start, end) == score);
  }
}

TEST_CASE("sink_score, sink_rate, retrieval_score: refusals name the function and the value") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THAT(error_message([] { sink_score(Vector<double>()); }), Catch::Contains("analysis::sink_score") &&
                                                                     Catch::Contains("no query rows"));
  CHECK_THAT(error_message([] { sink_score(column({0.5}), 0); }), Catch::Contains("queries must be >= 1, got 0"));
  CHECK_THAT(error_message([&] { sink_score(column({0.5, nan})); }), Catch::Contains("row 1 is nan"));
  CHECK_THAT(error_message([] { sink_score(column({1.5})); }), Catch::Contains("row 0 is 1.5"));
  CHECK_THAT(error_message([] { sink_score(column({-0.1})); }), Catch::Contains("row 0 is -0.1"));
  CHECK_THAT(error_message([] { sink_rate({}); }), Catch::Contains("analysis::sink_rate") && Catch::Contains("no heads"));
  CHECK_THAT(error_message([] { sink_rate({0.5}, {}); }), Catch::Contains("no thresholds"));
  CHECK_THAT(error_message([&] { sink_rate({0.5}, {nan}); }), Catch::Contains("threshold nan is not finite"));
  CHECK_THAT(error_message([] { sink_rate({0.5, 2.0}); }), Catch::Contains("head 1 is 2"));
  const std::vector<int> tokens = {1, 2, 3, 4, 5};
  CHECK_THAT(error_message([&] { retrieval_score(keys({0}), tokens, 4, 2, 2); }),
             Catch::Contains("analysis::retrieval_score") && Catch::Contains("the needle [2, 2)"));
  CHECK_THAT(error_message([&] { retrieval_score(keys({0}), tokens, 4, 2, 5); }), Catch::Contains("the needle [2, 5)"));
  CHECK_THAT(error_message([&] { retrieval_score(keys({0}), tokens, 4, -1, 2); }), Catch::Contains("the needle [-1, 2)"));
  CHECK_THAT(error_message([&] { retrieval_score(keys({0, 0}), tokens, 4, 0, 2); }),
             Catch::Contains("tokens has 5 entries, fewer than prompt_length 4 + 2 steps"));
  CHECK_THAT(error_message([&] { retrieval_score(keys({4}), tokens, 4, 0, 2); }), Catch::Contains("step 0 names key 4"));
  CHECK_THAT(error_message([&] { retrieval_score(keys({-1}), tokens, 4, 0, 2); }), Catch::Contains("step 0 names key -1"));
  CHECK_THAT(error_message([&] { retrieval_score(keys({0}), tokens, 0, 0, 1); }), Catch::Contains("prompt_length must be >= 1"));
}
