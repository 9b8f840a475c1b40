// Tests of attnscope::stream::row_statistics: every statistic equals the dense computation (materialized logits,
// the normalize module's softmax, row_entropy and softmax_jacobian_spectral_norm) on many seeded random shapes —
// causal and full, sliding windows, key masks, ties, L not a multiple of the block — closed forms on tied rows, thread
// independence, and every error class.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
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
using attnscope::RowMatrix;
using attnscope::stream::RowStatistics;
using attnscope::stream::RowStatisticsOptions;

/// The dense reference: every statistic from the materialized L×L softmax (double).
struct DenseStatistics {
  std::vector<double> max_scaled_logit, log_partition, entropy, sink_mass, max_weight, jacobian_norm;
  std::vector<std::vector<double>> top_k_mass;
  std::vector<Index> visible_keys;
};

/// The visibility of causal/full rows, an optional window (0: none) and an optional key mask, spelled out entry by
/// entry (causal rows see i − W < j ≤ i, full rows |i − j| < W).
attnscope::Mask dense_visibility_mask(bool causal, Index window, const attnscope::stream::KeyMask& key_mask,
                                      Index length) {
  attnscope::Mask mask(length, length);
  for (Index i = 0; i < length; ++i)
    for (Index j = 0; j < length; ++j) {
      bool visible = !causal || j <= i;
      if (window > 0) visible = visible && j > i - window && (causal || j < i + window);
      if (key_mask.size() != 0) visible = visible && key_mask(j);
      mask(i, j) = visible;
    }
  return mask;
}

attnscope::Mask dense_visibility_mask(const RowStatisticsOptions& options, Index length) {
  return options.visibility.to_mask(length, length);
}

/// The Visibility of causal/full rows, an optional window (0: none) and an optional key mask.
attnscope::Visibility make_visibility(bool causal, Index window, const attnscope::stream::KeyMask& key_mask) {
  attnscope::Visibility visibility = causal ? attnscope::Visibility(attnscope::causal) : attnscope::Visibility();
  if (window > 0) visibility = attnscope::SlidingWindow{window, causal};
  return visibility.with_key_mask(key_mask);
}

template <class Scalar>
DenseStatistics dense_statistics(const RowMatrix<Scalar>& q_in, const RowMatrix<Scalar>& k_in,
                                 const RowStatisticsOptions& options) {
  const RowMatrix<double> q = q_in.template cast<double>(), k = k_in.template cast<double>();
  const Index length = q.rows();
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(q.cols()));
  const RowMatrix<double> logits = (q * k.transpose()) * scale;
  const attnscope::Mask mask = dense_visibility_mask(options, length);
  const attnscope::Visibility visibility(mask);
  const RowMatrix<double> p = attnscope::softmax(logits, 1.0, visibility);
  const auto entropy = attnscope::row_entropy(p, visibility);
  const auto norms = attnscope::softmax_jacobian_spectral_norm(p, 1.0, visibility);
  DenseStatistics dense;
  for (Index i = 0; i < length; ++i) {
    double maximum = -std::numeric_limits<double>::infinity();
    std::vector<double> weights;
    for (Index j = 0; j < length; ++j)
      if (mask(i, j)) {
        maximum = std::max(maximum, logits(i, j));
        weights.push_back(p(i, j));
      }
    long double partition = 0;
    for (Index j = 0; j < length; ++j)
      if (mask(i, j)) partition += std::exp(static_cast<long double>(logits(i, j) - maximum));
    dense.max_scaled_logit.push_back(maximum);
    dense.log_partition.push_back(maximum + static_cast<double>(std::log(partition)));
    dense.entropy.push_back(entropy(i));
    dense.jacobian_norm.push_back(norms(i));
    dense.visible_keys.push_back(static_cast<Index>(weights.size()));
    double sink = 0, best = 0;
    std::vector<Index> sinks = options.sink_keys;
    std::sort(sinks.begin(), sinks.end());
    sinks.erase(std::unique(sinks.begin(), sinks.end()), sinks.end());
    for (const Index s : sinks)
      if (mask(i, s)) sink += p(i, s);
    for (Index j = 0; j < length; ++j) {
      const bool is_sink = std::find(sinks.begin(), sinks.end(), j) != sinks.end();
      if (mask(i, j) && !(options.max_weight_excludes_sinks && is_sink)) best = std::max(best, p(i, j));
    }
    dense.sink_mass.push_back(sink);
    dense.max_weight.push_back(best);
    dense.top_k_mass.push_back(attnscope::testing::dense_top_k_masses(weights, options.top_k));
  }
  return dense;
}

/// Compares every statistic with relative tolerance `relative` and absolute floor `absolute`.
void require_matches_dense(const RowStatistics& streamed, const DenseStatistics& dense, double relative,
                           double absolute) {
  const auto length = static_cast<Index>(dense.entropy.size());
  REQUIRE(streamed.entropy.size() == length);
  for (Index i = 0; i < length; ++i) {
    INFO("row " << i);
    CHECK(streamed.visible_keys(i) == dense.visible_keys[i]);
    CHECK(streamed.max_scaled_logit(i) == Approx(dense.max_scaled_logit[i]).epsilon(relative).margin(absolute));
    CHECK(streamed.log_partition(i) == Approx(dense.log_partition[i]).epsilon(relative).margin(absolute));
    CHECK(streamed.entropy(i) == Approx(dense.entropy[i]).epsilon(relative).margin(absolute));
    CHECK(streamed.sink_mass(i) == Approx(dense.sink_mass[i]).epsilon(relative).margin(absolute));
    CHECK(streamed.max_weight(i) == Approx(dense.max_weight[i]).epsilon(relative).margin(absolute));
    CHECK(streamed.jacobian_norm(i) == Approx(dense.jacobian_norm[i]).epsilon(relative).margin(absolute));
    for (std::size_t c = 0; c < dense.top_k_mass[i].size(); ++c)
      CHECK(streamed.top_k_mass(i, static_cast<Index>(c)) ==
            Approx(dense.top_k_mass[i][c]).epsilon(relative).margin(absolute));
  }
}

/// Random options: causal or full, maybe a window, maybe a key mask (every row keeps a key), random sinks/top-k/block.
RowStatisticsOptions random_stream_options(attnscope::Random& random, Index length) {
  RowStatisticsOptions options;
  const bool causal = random.uniform() < 0.5;
  Index window = 0;
  attnscope::stream::KeyMask key_mask;
  if (random.uniform() < 0.4) window = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(length) + 3));
  if (random.uniform() < 0.4) {
    key_mask.resize(length);
    for (Index j = 0; j < length; ++j) key_mask(j) = random.uniform() < 0.6;
    const attnscope::Mask mask = dense_visibility_mask(causal, window, key_mask, length);
    for (Index i = 0; i < length; ++i)
      if (!mask.row(i).any()) key_mask(i) = true;  // key i is in row i's range for every visibility
  }
  options.visibility = make_visibility(causal, window, key_mask);
  // the dense reference reads the Visibility's mask: it must equal the one spelled out entry by entry
  CHECK((options.visibility.to_mask(length, length) == dense_visibility_mask(causal, window, key_mask, length)).all());
  options.sink_keys.clear();
  const auto sinks = random.below(4);
  for (std::uint64_t s = 0; s < sinks; ++s) options.sink_keys.push_back(static_cast<Index>(random.below(length)));
  options.max_weight_excludes_sinks = random.uniform() < 0.5;
  const auto tops = random.below(4);
  for (std::uint64_t t = 0; t < tops; ++t) options.top_k.push_back(1 + static_cast<Index>(random.below(length + 4)));
  const Index blocks[] = {1, 3, 16, 64};
  options.block_rows = blocks[random.below(4)];
  if (random.uniform() < 0.3) options.scale = attnscope::testing::log_uniform(random, 0.05, 3.0);
  return options;
}

}  // namespace

TEST_CASE("stream row statistics equal the dense computation on random shapes (double)") {
  attnscope::Random random(1101);
  for (int trial = 0; trial < 120; ++trial) {
    const Index length = 1 + static_cast<Index>(random.below(trial < 100 ? 90 : 300));
    const Index dimension = 1 + static_cast<Index>(random.below(24));
    const double spread = attnscope::testing::log_uniform(random, 0.1, 4.0);
    const RowMatrix<double> q = attnscope::testing::random_logits(random, length, dimension, spread);
    RowMatrix<double> k = attnscope::testing::random_logits(random, length, dimension, spread);
    if (random.uniform() < 0.2 && length > 3) k.row(2) = k.row(1);  // exactly tied logits in every row
    const RowStatisticsOptions options = random_stream_options(random, length);
    INFO("trial " << trial << ", L " << length << ", d " << dimension << ", causal "
                  << options.visibility.is_causal() << ", block " << options.block_rows << ", window "
                  << options.visibility.window() << ", masked " << (options.visibility.key_mask().size() != 0));
    require_matches_dense(attnscope::stream::row_statistics(q, k, options), dense_statistics(q, k, options), 1e-6,
                          1e-12);
  }
}

TEST_CASE("stream row statistics of float inputs are within float rounding of the dense double values") {
  // The float path computes q·k (d terms), the exp (≤ 2 ULP) and the row sums in float: with |s·q·k| ≲ 10 the logits
  // carry an absolute error ≲ d·ε·10 ≈ 2e-5 for d ≤ 32, which moves every weight by that relative amount; the sums over
  // n ≤ 200 keys add ≲ n·ε ≈ 1e-5. Hence 2e-4 relative with an absolute floor of 1e-6 (weights near 1/n, ‖J‖ ≲ 1/2).
  attnscope::Random random(1102);
  for (int trial = 0; trial < 40; ++trial) {
    const Index length = 1 + static_cast<Index>(random.below(200));
    const Index dimension = 1 + static_cast<Index>(random.below(32));
    const RowMatrix<float> q = attnscope::testing::random_logits<float>(random, length, dimension, 1.0);
    const RowMatrix<float> k = attnscope::testing::random_logits<float>(random, length, dimension, 1.0);
    const RowStatisticsOptions options = random_stream_options(random, length);
    INFO("trial " << trial << ", L " << length << ", d " << dimension);
    require_matches_dense(attnscope::stream::row_statistics(q, k, options), dense_statistics(q, k, options), 2e-4,
                          1e-6);
  }
}

TEST_CASE("stream row statistics of tied rows have the closed forms of the uniform distribution") {
  // Q = 0: every visible logit is 0, p = 1/n; H = log n, log Z = log n, max p = 1/n, ‖diag p − ppᵀ‖₂ = 1/n for n ≥ 2
  // (eigenvalues of (I − 11ᵀ/n)/n), 0 for n = 1; top-k mass min(k, n)/n; sink mass 1/n per visible sink.
  const Index length = 77;
  const RowMatrix<double> q = RowMatrix<double>::Zero(length, 5);
  const RowMatrix<double> k = attnscope::testing::random_logits(1103, length, 5);
  RowStatisticsOptions options;
  options.top_k = {1, 4, 100};
  options.sink_keys = {0, 3};
  options.block_rows = 8;
  const RowStatistics stats = attnscope::stream::row_statistics(q, k, options);
  for (Index i = 0; i < length; ++i) {
    const double n = static_cast<double>(i + 1);
    CHECK(stats.max_scaled_logit(i) == 0);
    CHECK(stats.log_partition(i) == Approx(std::log(n)).epsilon(1e-12).margin(1e-15));
    CHECK(stats.entropy(i) == Approx(std::log(n)).epsilon(1e-12).margin(1e-15));
    CHECK(stats.max_weight(i) == Approx(1 / n).epsilon(1e-12));
    CHECK(stats.jacobian_norm(i) == Approx(i == 0 ? 0.0 : 1 / n).epsilon(1e-12).margin(1e-15));
    CHECK(stats.sink_mass(i) == Approx((i >= 3 ? 2 : 1) / n).epsilon(1e-12));
    CHECK(stats.top_k_mass(i, 0) == Approx(1 / n).epsilon(1e-12));
    CHECK(stats.top_k_mass(i, 1) == Approx(std::min(4.0, n) / n).epsilon(1e-12));
    CHECK(stats.top_k_mass(i, 2) == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("stream row statistics: a masked sink is excluded and a window drops the sink from late rows") {
  const Index length = 40;
  const RowMatrix<double> q = attnscope::testing::random_logits(1104, length, 6);
  const RowMatrix<double> k = attnscope::testing::random_logits(1105, length, 6);
  RowStatisticsOptions options;
  options.visibility = attnscope::SlidingWindow{10};
  const RowStatistics windowed = attnscope::stream::row_statistics(q, k, options);
  for (Index i = 0; i < length; ++i) {
    CHECK(windowed.visible_keys(i) == std::min<Index>(i + 1, 10));
    if (i >= 10) CHECK(windowed.sink_mass(i) == 0);
    else CHECK(windowed.sink_mass(i) > 0);
  }
  attnscope::stream::KeyMask key_mask = attnscope::stream::KeyMask::Constant(length, true);
  key_mask(0) = false;
  key_mask(1) = false;
  options.visibility = attnscope::Visibility().with_key_mask(key_mask);
  const RowStatistics masked = attnscope::stream::row_statistics(q, k, options);
  for (Index i = 0; i < length; ++i) {
    CHECK(masked.sink_mass(i) == 0);
    CHECK(masked.visible_keys(i) == length - 2);
  }
}

TEST_CASE("stream row statistics are identical for any thread count and block size") {
  const Index length = 300;
  const RowMatrix<double> q = attnscope::testing::random_logits(1106, length, 16, 2.0);
  const RowMatrix<double> k = attnscope::testing::random_logits(1107, length, 16, 2.0);
  RowStatisticsOptions options;
  options.top_k = {2, 10};
  options.threads = 1;
  const RowStatistics one = attnscope::stream::row_statistics(q, k, options);
  options.threads = 2;
  const RowStatistics two = attnscope::stream::row_statistics(q, k, options);
  CHECK(one.entropy == two.entropy);
  CHECK(one.jacobian_norm == two.jacobian_norm);
  CHECK(one.log_partition == two.log_partition);
  CHECK(one.top_k_mass == two.top_k_mass);
  CHECK(one.sink_mass == two.sink_mass);
  CHECK(one.max_weight == two.max_weight);
}

TEST_CASE("stream row statistics: bad input throws naming the function and the value") {
  using attnscope::testing::error_message;
  const RowMatrix<double> q = attnscope::testing::random_logits(1108, 6, 4);
  const RowMatrix<double> k = attnscope::testing::random_logits(1109, 6, 4);
  const auto run = [&](const RowMatrix<double>& queries, const RowMatrix<double>& keys,
                       const RowStatisticsOptions& options) {
    return error_message([&] { attnscope::stream::row_statistics(queries, keys, options); });
  };
  RowMatrix<double> bad = q;
  bad(2, 3) = std::numeric_limits<double>::quiet_NaN();
  CHECK(run(bad, k, {}) == "attnscope::stream::row_statistics: non-finite value nan in Q at row 2, column 3");
  bad(2, 3) = std::numeric_limits<double>::infinity();
  CHECK(run(q, bad, {}) == "attnscope::stream::row_statistics: non-finite value inf in K at row 2, column 3");
  CHECK(run(q, RowMatrix<double>(6, 5), {}) ==
        "attnscope::stream::row_statistics: Q/K shape mismatch: 6x4 vs 6x5");
  CHECK(run(RowMatrix<double>(0, 4), RowMatrix<double>(0, 4), {}) ==
        "attnscope::stream::row_statistics: empty Q (0x4)");
  RowStatisticsOptions options;
  options.visibility = attnscope::SlidingWindow{0};
  CHECK(run(q, k, options) == "attnscope::stream::row_statistics: window must be >= 1, got 0");
  options = {};
  options.sink_keys = {6};
  CHECK(run(q, k, options) == "attnscope::stream::row_statistics: sink key 6 is outside [0, 6)");
  options = {};
  options.top_k = {3, 0};
  CHECK(run(q, k, options) == "attnscope::stream::row_statistics: top-k needs k >= 1, got 0");
  options = {};
  options.scale = -1.0;
  CHECK(run(q, k, options) == "attnscope::stream::row_statistics: scale must be finite and > 0, got -1");
  options = {};
  options.visibility = attnscope::Visibility(attnscope::causal).with_key_mask(attnscope::stream::KeyMask::Constant(5, true));
  CHECK(run(q, k, options) == "attnscope::stream::row_statistics: key mask has 5 entries for 6 keys");
  attnscope::stream::KeyMask first_hidden = attnscope::stream::KeyMask::Constant(6, true);
  first_hidden(0) = false;
  options.visibility = attnscope::Visibility(attnscope::causal).with_key_mask(first_hidden);
  CHECK(run(q, k, options) == "attnscope::stream::row_statistics: row 0 has no visible key (every key masked)");
  options = {};
  options.block_rows = 0;
  CHECK(run(q, k, options) == "attnscope::stream::row_statistics: block_rows must be >= 1, got 0");
  RowMatrix<double> huge = q;
  huge.setConstant(1e200);
  CHECK(run(huge, huge, {}) == "attnscope::stream::row_statistics: a logit of row 0 overflows (q·k not finite)");
}
