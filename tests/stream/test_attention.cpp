// Tests of attnscope::stream::attention, the one blockwise attention kernel: on many seeded random Q, K, V (float and
// double; causal, every key, causal and two-sided sliding windows, key masks, visible sink keys, explicit masks, query
// rows at an offset; block sizes that do not divide L) its output equals the dense softmax(scale·Q Kᵀ)·V, the scores
// and probabilities it writes into the caller's buffers equal the dense ones (−inf and exactly 0 where invisible), and
// every statistic equals the dense normalize functions (row_entropy, softmax_jacobian_spectral_norm) or a direct sum;
// with a logit softcap c, all of it on the capped logits c·tanh(s/c).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "attnscope/stream.hpp"
#include "stream/dense_top_k.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::Mask;
using attnscope::RowMatrix;
using attnscope::Visibility;
using attnscope::stream::AttentionCapture;
using attnscope::stream::KeyMask;
using attnscope::stream::RowStatistics;
using attnscope::stream::RowStatisticsOptions;

/// A visibility described by its parts, and the same spelled out entry by entry (the reference).
struct VisibilityCase {
  bool causal = true;
  Index window = 0;  // 0: none
  Index offset = 0;
  KeyMask key_mask;
  std::vector<Index> sinks;
  bool explicit_mask = false;
  Mask mask;  // when explicit_mask

  bool visible(Index i, Index j) const {
    if (explicit_mask) return mask(i, j);
    if (key_mask.size() != 0 && !key_mask(j)) return false;
    const Index t = i + offset;
    bool in_band = !causal || j <= t;
    if (window > 0) in_band = in_band && j > t - window && (causal || j < t + window);
    const bool sink = std::find(sinks.begin(), sinks.end(), j) != sinks.end() && (!causal || j <= t);
    return in_band || sink;
  }
  Mask dense(Index rows, Index cols) const {
    Mask out(rows, cols);
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < cols; ++j) out(i, j) = visible(i, j);
    return out;
  }
  Visibility visibility() const {
    if (explicit_mask) return mask;
    Visibility v = causal ? Visibility(attnscope::Causal{offset}) : Visibility();
    if (window > 0) v = attnscope::SlidingWindow{window, causal, offset};
    return v.with_key_mask(key_mask).with_sink_keys(sinks);
  }
};

/// A random visibility of rows × cols in which every row sees at least one key.
VisibilityCase random_case(attnscope::Random& random, Index rows, Index cols) {
  VisibilityCase c;
  const auto kind = random.below(6);
  c.causal = kind != 1 && random.uniform() < 0.75;
  if (c.causal) c.offset = cols - rows;  // the last query row sees every key (decoding a new block)
  if (kind == 2 || kind == 3) c.window = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols) + 2));
  if (kind == 3 || kind == 4 || random.uniform() < 0.2) {
    c.key_mask.resize(cols);
    for (Index j = 0; j < cols; ++j) c.key_mask(j) = random.uniform() < 0.7;
  }
  if (kind == 2 || kind == 3 || kind == 4 || random.uniform() < 0.3) {
    const auto count = 1 + random.below(3);
    for (std::uint64_t s = 0; s < count; ++s) c.sinks.push_back(static_cast<Index>(random.below(std::min<Index>(cols, 6))));
  }
  if (kind == 5) {
    c.explicit_mask = true;
    c.mask.resize(rows, cols);
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < cols; ++j) c.mask(i, j) = random.uniform() < 0.5;
  }
  // every row keeps a key: the key at its position (or the last key) is made visible
  const Mask dense = c.dense(rows, cols);
  for (Index i = 0; i < rows; ++i) {
    if (dense.row(i).any()) continue;
    const Index j = std::min(cols - 1, std::max<Index>(0, i + c.offset));
    if (c.explicit_mask) c.mask(i, j) = true;
    else if (c.key_mask.size() != 0) c.key_mask(j) = true;
  }
  return c;
}

/// What the kernel computes, from the dense double path (materialized logits, the normalize module's softmax).
struct Dense {
  RowMatrix<double> scores, probabilities, output;
  std::vector<double> log_partition, max_scaled, entropy, jacobian_norm, sink_mass, max_weight;
  std::vector<std::vector<double>> top_k_mass;
  std::vector<Index> visible;
};

template <class Scalar>
Dense dense_attention(const RowMatrix<Scalar>& q_in, const RowMatrix<Scalar>& k_in, const RowMatrix<Scalar>& v_in,
                      const Mask& mask, double scale, const RowStatisticsOptions& options) {
  const RowMatrix<double> q = q_in.template cast<double>(), k = k_in.template cast<double>(),
                          v = v_in.template cast<double>();
  Dense d;
  d.scores = (q * k.transpose()) * scale;
  if (options.logit_softcap) {  // s ↦ c·tanh(s/c), entry by entry
    const double cap = *options.logit_softcap;
    for (Index i = 0; i < d.scores.rows(); ++i)
      for (Index j = 0; j < d.scores.cols(); ++j) d.scores(i, j) = cap * std::tanh(d.scores(i, j) / cap);
  }
  const Visibility visibility(mask);
  d.probabilities = attnscope::softmax(d.scores, 1.0, visibility);
  d.output = d.probabilities * v;
  const auto entropy = attnscope::row_entropy(d.probabilities, visibility);
  const auto norms = attnscope::softmax_jacobian_spectral_norm(d.probabilities, 1.0, visibility);
  for (Index i = 0; i < q.rows(); ++i) {
    double maximum = -std::numeric_limits<double>::infinity();
    long double partition = 0;
    std::vector<double> weights;
    for (Index j = 0; j < k.rows(); ++j)
      if (mask(i, j)) maximum = std::max(maximum, d.scores(i, j));
    double sink = 0, best = 0;
    for (Index j = 0; j < k.rows(); ++j) {
      if (!mask(i, j)) continue;
      partition += std::exp(static_cast<long double>(d.scores(i, j) - maximum));
      weights.push_back(d.probabilities(i, j));
      const bool is_sink = std::find(options.sink_keys.begin(), options.sink_keys.end(), j) != options.sink_keys.end();
      if (is_sink) sink += d.probabilities(i, j);
      if (!(options.max_weight_excludes_sinks && is_sink)) best = std::max(best, d.probabilities(i, j));
    }
    d.max_scaled.push_back(maximum);
    d.log_partition.push_back(maximum + static_cast<double>(std::log(partition)));
    d.entropy.push_back(entropy(i));
    d.jacobian_norm.push_back(norms(i));
    d.sink_mass.push_back(sink);
    d.max_weight.push_back(best);
    d.visible.push_back(static_cast<Index>(weights.size()));
    d.top_k_mass.push_back(attnscope::testing::dense_top_k_masses(weights, options.top_k));
  }
  return d;
}

template <class Scalar>
void check_against_dense(attnscope::Random& random, int trial, double relative, double absolute) {
  const Index cols = 1 + static_cast<Index>(random.below(trial % 5 == 0 ? 260 : 70));
  const Index rows = random.uniform() < 0.7 ? cols : 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)));
  const Index dimension = 1 + static_cast<Index>(random.below(20)), value_dimension = 1 + static_cast<Index>(random.below(9));
  const RowMatrix<Scalar> q = attnscope::testing::random_logits<Scalar>(random, rows, dimension, 1.5);
  const RowMatrix<Scalar> k = attnscope::testing::random_logits<Scalar>(random, cols, dimension, 1.5);
  const RowMatrix<Scalar> v = attnscope::testing::random_logits<Scalar>(random, cols, value_dimension);
  const VisibilityCase visibility = random_case(random, rows, cols);
  RowStatisticsOptions options;
  options.visibility = visibility.visibility();
  const Index blocks[] = {1, 3, 7, 16, 64};
  options.block_rows = blocks[random.below(5)];
  options.sink_keys = {static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)))};
  if (random.uniform() < 0.5) options.sink_keys.push_back(0);
  options.max_weight_excludes_sinks = random.uniform() < 0.5;
  options.top_k = {1, 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols) + 3))};
  if (random.uniform() < 0.3) options.scale = attnscope::testing::log_uniform(random, 0.1, 2.0);
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(dimension));
  if (trial % 3 == 1) options.logit_softcap = attnscope::testing::log_uniform(random, 0.3, 5.0);
  const Mask mask = visibility.dense(rows, cols);
  INFO("trial " << trial << ": " << rows << "x" << cols << ", d " << dimension << ", causal " << visibility.causal
                << ", window " << visibility.window << ", offset " << visibility.offset << ", key mask "
                << (visibility.key_mask.size() != 0) << ", sinks " << visibility.sinks.size() << ", explicit "
                << visibility.explicit_mask << ", block " << options.block_rows << ", softcap "
                << options.logit_softcap.value_or(0));
  // the Visibility says what the entry-by-entry reference says
  REQUIRE((options.visibility.to_mask(rows, cols) == mask).all());
  for (Index i = 0; i < rows; ++i) REQUIRE(options.visibility.visible_count(i, cols) == mask.row(i).count());

  RowMatrix<Scalar> scores, probabilities;
  RowStatistics statistics;
  AttentionCapture<Scalar> capture;
  capture.scores = &scores;
  capture.probabilities = &probabilities;
  capture.statistics = &statistics;
  const RowMatrix<Scalar> output = attnscope::stream::attention(q, k, v, options, capture);
  const Dense dense = dense_attention(q, k, v, mask, scale, options);
  const auto close = [&](double got, double want) {
    return std::abs(got - want) <= absolute + relative * std::abs(want);
  };
  for (Index i = 0; i < rows; ++i) {
    INFO("row " << i);
    for (Index j = 0; j < cols; ++j) {
      if (mask(i, j)) {
        CHECK(close(double(scores(i, j)), dense.scores(i, j)));
        CHECK(close(double(probabilities(i, j)), dense.probabilities(i, j)));
      } else {
        CHECK(scores(i, j) == -std::numeric_limits<Scalar>::infinity());
        CHECK(probabilities(i, j) == 0);
      }
    }
    for (Index c = 0; c < value_dimension; ++c) CHECK(close(double(output(i, c)), dense.output(i, c)));
    CHECK(statistics.visible_keys(i) == dense.visible[std::size_t(i)]);
    CHECK(close(statistics.log_partition(i), dense.log_partition[std::size_t(i)]));
    CHECK(close(statistics.max_scaled_logit(i), dense.max_scaled[std::size_t(i)]));
    CHECK(close(statistics.entropy(i), dense.entropy[std::size_t(i)]));
    CHECK(close(statistics.jacobian_norm(i), dense.jacobian_norm[std::size_t(i)]));
    CHECK(close(statistics.sink_mass(i), dense.sink_mass[std::size_t(i)]));
    CHECK(close(statistics.max_weight(i), dense.max_weight[std::size_t(i)]));
    if (!options.max_weight_excludes_sinks) {  // 1/S: exactly the largest of the row's probabilities, bit for bit
      Scalar largest = 0;
      for (Index j = 0; j < cols; ++j) largest = std::max(largest, probabilities(i, j));
      CHECK(statistics.max_weight(i) == static_cast<double>(largest));
    }
    for (std::size_t c = 0; c < options.top_k.size(); ++c)
      CHECK(close(statistics.top_k_mass(i, Index(c)), dense.top_k_mass[std::size_t(i)][c]));
  }
  // without captures: the same output bits; scores alone: the same scores bits; statistics alone: row_statistics
  CHECK(attnscope::stream::attention(q, k, v, options) == output);
  RowMatrix<Scalar> scores_only;
  attnscope::stream::attention_scores<Scalar>(q, k, scores_only, options);
  CHECK(scores_only == scores);
  if (rows == cols) {
    const RowStatistics alone = attnscope::stream::row_statistics(q, k, options);
    CHECK(alone.entropy == statistics.entropy);
    CHECK(alone.log_partition == statistics.log_partition);
    CHECK(alone.jacobian_norm == statistics.jacobian_norm);
    CHECK(alone.top_k_mass == statistics.top_k_mass);
  }
}

}  // namespace

TEST_CASE("stream attention equals the dense softmax path on random shapes and visibilities (double)") {
  attnscope::Random random(2201);
  for (int trial = 0; trial < 150; ++trial) check_against_dense<double>(random, trial, 1e-9, 1e-12);
}

TEST_CASE("stream attention of float inputs is within float rounding of the dense double path") {
  // q·k over d ≤ 20 terms with |s·q·k| ≲ 15 carries an absolute error ≲ 1e-5; exp (≤ 2 ULP) and sums over ≤ 260 keys
  // add ≲ n·ε ≈ 3e-5 relative: 2e-4 relative with a 2e-5 absolute floor (weights, masses, outputs of O(1)).
  attnscope::Random random(2202);
  for (int trial = 0; trial < 60; ++trial) check_against_dense<float>(random, trial, 2e-4, 2e-5);
}

TEST_CASE("stream attention: sinks outside a sliding window stay visible, hidden keys never count") {
  // L = 30, window 4, sink key 0: row 20 sees keys 17..20 and 0; with key 18 hidden, 17, 19, 20 and 0.
  const Index length = 30;
  const RowMatrix<double> q = attnscope::testing::random_logits(2203, length, 4);
  const RowMatrix<double> k = attnscope::testing::random_logits(2204, length, 4);
  RowMatrix<double> v = RowMatrix<double>::Zero(length, 1);
  v(0, 0) = 1;  // the output is the weight of key 0
  KeyMask keys = KeyMask::Constant(length, true);
  keys(18) = false;
  RowStatisticsOptions options;
  options.visibility = Visibility(attnscope::SlidingWindow{4}).with_sink_keys({0}).with_key_mask(keys);
  RowMatrix<double> probabilities;
  RowStatistics statistics;
  AttentionCapture<double> capture;
  capture.probabilities = &probabilities;
  capture.statistics = &statistics;
  const RowMatrix<double> output = attnscope::stream::attention(q, k, v, options, capture);
  for (Index i = 0; i < length; ++i) {
    INFO("row " << i);
    CHECK(output(i, 0) == Approx(probabilities(i, 0)).epsilon(1e-12));
    CHECK(statistics.sink_mass(i) == Approx(probabilities(i, 0)).epsilon(1e-12));
    CHECK(probabilities(i, 0) > 0);
    CHECK(probabilities(i, 18) == 0);
    CHECK(probabilities.row(i).sum() == Approx(1.0).epsilon(1e-12));
    Index expected = std::min<Index>(i + 1, 4) + (i >= 4 ? 1 : 0) - ((i >= 18 && i < 22) ? 1 : 0);
    CHECK(statistics.visible_keys(i) == expected);
  }
}

TEST_CASE("stream attention: bad input throws naming the function and the value") {
  using attnscope::testing::error_message;
  const RowMatrix<double> q = attnscope::testing::random_logits(2205, 6, 4);
  const RowMatrix<double> k = attnscope::testing::random_logits(2206, 6, 4);
  const RowMatrix<double> v = attnscope::testing::random_logits(2207, 6, 3);
  CHECK(error_message([&] { attnscope::stream::attention(q, k, RowMatrix<double>(5, 3)); }) ==
        "attnscope::stream::attention: V has 5 rows for 6 keys");
  CHECK(error_message([&] { attnscope::stream::attention(q, RowMatrix<double>(6, 3), v); }) ==
        "attnscope::stream::attention: Q/K shape mismatch: 6x4 vs 6x3");
  RowMatrix<double> wrong(5, 3);
  CHECK(error_message([&] {
          attnscope::stream::attention_into<double>(q, k, v, attnscope::stream::RowMatrixSpan<double>(wrong));
        }) == "attnscope::stream::attention: output is 5x3, expected 6x3");
  RowStatisticsOptions options;
  options.visibility = attnscope::SlidingWindow{0};
  CHECK(error_message([&] { attnscope::stream::attention(q, k, v, options); }) ==
        "attnscope::stream::attention: window must be >= 1, got 0");
  options.visibility = Visibility(attnscope::causal).with_sink_keys({7});
  CHECK(error_message([&] { attnscope::stream::attention(q, k, v, options); }) ==
        "attnscope::stream::attention: visible sink key 7 is outside [0, 6)");
  options.visibility = attnscope::Causal{-1};
  CHECK(error_message([&] { attnscope::stream::attention(q, k, v, options); }) ==
        "attnscope::stream::attention: row 0 has no visible key (every key masked)");
  options.visibility = attnscope::causal;
  options.logit_softcap = 0.0;
  CHECK(error_message([&] { attnscope::stream::attention(q, k, v, options); }) ==
        "attnscope::stream::attention: logit_softcap must be finite and > 0, got 0");
  options.logit_softcap.reset();
  RowMatrix<double> scores;
  options.visibility = Mask(Mask::Constant(5, 6, true));
  CHECK(error_message([&] { attnscope::stream::attention_scores<double>(q, k, scores, options); }) ==
        "attnscope::stream::attention_scores: mask/logits shape mismatch: 5x6 vs 6x6");
}
