// Properties of the Llama forward pass on stories260K: captures are consistent with each other (scores = q·kᵀ/√d,
// head output = attention·V, GQA sharing), the pass is causal (prefix forward = prefix of the full forward, and the
// cached decoder agrees with it), ablation acts only from its layer on, a swapped map changes what it should, and
// generation / likelihood follow their definitions.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/model.hpp"
#include "attnscope/normalize/maps.hpp"
#include "support/catch.hpp"
#include "support/model_fixture.hpp"
#include "support/model_helpers.hpp"

namespace {

using attnscope::RowMatrix;
using attnscope::model::AblationMode;
using attnscope::model::CaptureOptions;
using attnscope::model::ForwardOptions;
using attnscope::model::ForwardResult;
using attnscope::testing::capture_everything;
using attnscope::testing::max_abs_difference;
using attnscope::testing::mean_nll_from_logits;
using attnscope::testing::reference_model;

std::vector<int> random_tokens(std::size_t length, std::uint64_t seed) {  // BOS = 1, then uniform ids
  return attnscope::testing::random_token_sequence(length, 512, seed, {1});
}

// The greedy continuation of BOS: a natural (in-distribution) sequence.
const std::vector<int>& story() {
  static const std::vector<int> tokens = reference_model().generate_greedy({1}, 95);
  return tokens;
}

}  // namespace

TEST_CASE("captures have the documented shapes and are consistent with each other") {
  const auto& tokens = story();
  const long length = static_cast<long>(tokens.size()), head_size = 8;
  const ForwardResult result = reference_model().forward(tokens, capture_everything());
  REQUIRE(result.layers.size() == 5);
  REQUIRE(result.hidden_states.size() == 6);
  CHECK(result.logits.rows() == length);
  CHECK(result.logits.cols() == 512);
  for (const auto& hidden : result.hidden_states) CHECK((hidden.rows() == length && hidden.cols() == 64));
  for (int layer = 0; layer < 5; ++layer) {
    const auto& capture = result.layers[std::size_t(layer)];
    REQUIRE(capture.q.size() == 8);
    REQUIRE(capture.k.size() == 8);
    REQUIRE(capture.v.size() == 8);
    REQUIRE(capture.scores.size() == 8);
    REQUIRE(capture.attention.size() == 8);
    REQUIRE(capture.head_output.size() == 8);
    for (int head = 0; head < 8; ++head) {
      const auto& q = capture.q[std::size_t(head)];
      const auto& k = capture.k[std::size_t(head)];
      const auto& v = capture.v[std::size_t(head)];
      const auto& scores = capture.scores[std::size_t(head)];
      const auto& attention = capture.attention[std::size_t(head)];
      CHECK((q.rows() == length && q.cols() == head_size && k.rows() == length && k.cols() == head_size));
      CHECK((scores.rows() == length && scores.cols() == length && attention.rows() == length));
      // Grouped-query attention: query heads 2m and 2m+1 share kv head m (8 query heads, 4 kv heads).
      CHECK(k == capture.k[std::size_t(head ^ 1)]);
      CHECK(v == capture.v[std::size_t(head ^ 1)]);
      // scores = q·kᵀ/√head_size on and below the diagonal, −inf above; attention rows sum to 1, 0 above.
      const RowMatrix<float> expected_scores = (q * k.transpose()).eval() / std::sqrt(float(head_size));
      double worst_score = 0, worst_sum = 0;
      bool future_ok = true;
      for (long i = 0; i < length; ++i) {
        for (long j = 0; j <= i; ++j)
          worst_score = std::max(worst_score, double(std::abs(scores(i, j) - expected_scores(i, j))));
        for (long j = i + 1; j < length; ++j)
          future_ok = future_ok && scores(i, j) == -std::numeric_limits<float>::infinity() && attention(i, j) == 0.0f;
        worst_sum = std::max(worst_sum, std::abs(double(attention.row(i).sum()) - 1.0));
      }
      CHECK(worst_score < 1e-4);
      CHECK(future_ok);
      CHECK(worst_sum < 1e-5);
      CHECK(attention.minCoeff() >= 0.0f);
      CHECK(max_abs_difference(capture.head_output[std::size_t(head)], attention * v) < 1e-5);
    }
  }
  // The first hidden state is the token embedding.
  for (long p = 0; p < length; ++p)
    CHECK(result.hidden_states[0].row(p) == reference_model().weights().token_embedding.row(tokens[std::size_t(p)]));
}

TEST_CASE("capture flags: only what is requested is recorded") {
  ForwardOptions options;
  options.capture.attention = true;
  const ForwardResult result = reference_model().forward({1, 5, 9}, options);
  REQUIRE(result.layers.size() == 5);
  CHECK(result.layers[0].attention.size() == 8);
  CHECK(result.layers[0].scores.empty());
  CHECK(result.layers[0].q.empty());
  CHECK(result.hidden_states.empty());
  const ForwardResult plain = reference_model().forward({1, 5, 9});
  CHECK(plain.layers.empty());
  CHECK(plain.logits == result.logits);  // capturing does not change the computation
}

TEST_CASE("causal consistency: forward over a prefix equals the prefix of the forward over the whole sequence") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto tokens = seed == 1 ? story() : random_tokens(80, seed);
    const ForwardResult full = reference_model().forward(tokens, capture_everything());
    for (std::size_t prefix_length : {1u, 7u, 40u}) {
      const std::vector<int> prefix(tokens.begin(), tokens.begin() + long(prefix_length));
      const ForwardResult part = reference_model().forward(prefix, capture_everything());
      const long n = static_cast<long>(prefix_length);
      CHECK(max_abs_difference(part.logits, full.logits.topRows(n)) < 1e-4);
      for (int layer = 0; layer < 5; ++layer)
        for (int head = 0; head < 8; ++head) {
          const auto& a = part.layers[std::size_t(layer)];
          const auto& b = full.layers[std::size_t(layer)];
          CHECK(max_abs_difference(a.attention[std::size_t(head)], b.attention[std::size_t(head)].topLeftCorner(n, n)) < 1e-5);
          CHECK(max_abs_difference(a.q[std::size_t(head)], b.q[std::size_t(head)].topRows(n)) < 1e-4);
        }
    }
  }
}

TEST_CASE("generation with the key/value cache agrees with full forward passes") {
  // Greedy: every generated token is the argmax of the full forward's logits at the previous position.
  const auto& tokens = story();
  const auto logits = reference_model().forward(tokens).logits;
  for (std::size_t p = 0; p + 1 < tokens.size(); ++p) {
    long best = 0;
    logits.row(long(p)).maxCoeff(&best);
    CHECK(best == tokens[p + 1]);
  }
  // Greedy under a swapped map (SSMax) too: the cache path uses the same map with the right key count n = p + 1.
  ForwardOptions ssmax;
  ssmax.map = attnscope::parse_normalization_map("ssmax:0.4");
  const auto ssmax_tokens = reference_model().generate_greedy({1, 20, 30}, 40, ssmax);
  const auto ssmax_logits = reference_model().forward(ssmax_tokens, ssmax).logits;
  for (std::size_t p = 2; p + 1 < ssmax_tokens.size(); ++p) {
    long best = 0;
    ssmax_logits.row(long(p)).maxCoeff(&best);
    CHECK(best == ssmax_tokens[p + 1]);
  }
  // Progress callback: called once per step with (done, total).
  std::vector<std::pair<int, int>> calls;
  reference_model().generate_greedy({1}, 4, {}, [&](int done, int total) { calls.emplace_back(done, total); });
  CHECK(calls == std::vector<std::pair<int, int>>{{1, 4}, {2, 4}, {3, 4}, {4, 4}});
  CHECK(reference_model().generate_greedy({1, 2}, 0) == std::vector<int>{1, 2});
}

TEST_CASE("ablating a head changes the computation only from its layer on") {
  const auto tokens = random_tokens(60, 11);
  const ForwardResult base = reference_model().forward(tokens, capture_everything());
  for (const auto& [layer, head] : std::vector<std::pair<int, int>>{{0, 0}, {2, 3}, {4, 7}}) {
    ForwardOptions options = capture_everything();
    options.ablated_heads = {{layer, head}};
    const ForwardResult ablated = reference_model().forward(tokens, options);
    // Residual stream identical (bitwise: same operations) up to and including the ablated layer's input.
    for (int l = 0; l <= layer; ++l) CHECK(ablated.hidden_states[std::size_t(l)] == base.hidden_states[std::size_t(l)]);
    CHECK(max_abs_difference(ablated.hidden_states[std::size_t(layer) + 1], base.hidden_states[std::size_t(layer) + 1]) > 1e-3);
    CHECK(max_abs_difference(ablated.logits, base.logits) > 1e-3);
    // In the ablated layer: that head's output is 0, its attention and the other heads are untouched.
    const auto& a = ablated.layers[std::size_t(layer)];
    const auto& b = base.layers[std::size_t(layer)];
    CHECK(a.head_output[std::size_t(head)].isZero(0));
    CHECK(a.attention[std::size_t(head)] == b.attention[std::size_t(head)]);
    for (int other = 0; other < 8; ++other)
      if (other != head) CHECK(a.head_output[std::size_t(other)] == b.head_output[std::size_t(other)]);
  }
}

TEST_CASE("mean ablation replaces a head's output by its running mean over positions 0..p") {
  const auto tokens = random_tokens(30, 5);
  const ForwardResult base = reference_model().forward(tokens, capture_everything());
  ForwardOptions options = capture_everything();
  options.ablated_heads = {{1, 2}};
  options.ablation_mode = AblationMode::mean;
  const ForwardResult ablated = reference_model().forward(tokens, options);
  const auto& original = base.layers[1].head_output[2];
  const auto& replaced = ablated.layers[1].head_output[2];
  for (long p = 0; p < original.rows(); ++p) {
    const RowMatrix<double> mean = original.topRows(p + 1).cast<double>().colwise().mean();
    CHECK((replaced.row(p).cast<double>() - mean).cwiseAbs().maxCoeff() < 1e-6);
  }
  CHECK(ablated.hidden_states[1] == base.hidden_states[1]);
  // Still causal: greedy decoding with mean ablation agrees with the full forward pass.
  const auto generated = reference_model().generate_greedy({1}, 20, options);
  const auto logits = reference_model().forward(generated, options).logits;
  for (std::size_t p = 0; p + 1 < generated.size(); ++p) {
    long best = 0;
    logits.row(long(p)).maxCoeff(&best);
    CHECK(best == generated[p + 1]);
  }
}

TEST_CASE("swapping the normalization map: softmax equals the default, others change what they should") {
  const auto tokens = random_tokens(50, 21);
  ForwardOptions plain_options;
  plain_options.capture = CaptureOptions::attention_only();
  const ForwardResult plain = reference_model().forward(tokens, plain_options);

  ForwardOptions softmax_map = plain_options;
  softmax_map.map = attnscope::parse_normalization_map("softmax");
  const ForwardResult mapped = reference_model().forward(tokens, softmax_map);
  CHECK(mapped.logits == plain.logits);

  // A user callable computing SSMax independently: softmax with per-row scale s·log(n), n = keys of the row.
  const double s = 0.43;
  ForwardOptions ssmax_map = plain_options;
  ssmax_map.map = attnscope::parse_normalization_map("ssmax:0.43");
  ForwardOptions ssmax_callable = plain_options;
  ssmax_callable.normalizer = [s](const RowMatrix<float>& scores, const attnscope::Visibility& visibility) {
    RowMatrix<float> weights = RowMatrix<float>::Zero(scores.rows(), scores.cols());
    for (long i = 0; i < scores.rows(); ++i) {
      const long n = visibility.visible_count(i, scores.cols());
      const double scale = s * std::log(double(n));
      double max_value = -1e300, sum = 0;
      for (long j = 0; j < n; ++j) max_value = std::max(max_value, double(scores(i, j)));
      for (long j = 0; j < n; ++j) sum += std::exp(scale * (double(scores(i, j)) - max_value));
      for (long j = 0; j < n; ++j) weights(i, j) = float(std::exp(scale * (double(scores(i, j)) - max_value)) / sum);
    }
    return weights;
  };
  const ForwardResult by_map = reference_model().forward(tokens, ssmax_map);
  const ForwardResult by_callable = reference_model().forward(tokens, ssmax_callable);
  CHECK(max_abs_difference(by_map.logits, by_callable.logits) < 1e-3);
  CHECK(max_abs_difference(by_map.layers[0].attention[0], by_callable.layers[0].attention[0]) < 1e-5);
  CHECK(max_abs_difference(by_map.logits, plain.logits) > 1e-2);
  // Layer 0 scores do not depend on the map (they are computed before any attention); later ones do.
  CHECK(by_map.layers[0].scores[3] == plain.layers[0].scores[3]);
  CHECK(max_abs_difference(by_map.layers[0].attention[3], plain.layers[0].attention[3]) > 1e-3);

  // Temperature T = 2 flattens every row: the entropy of each row rises (or stays for single-key rows).
  ForwardOptions hot = plain_options;
  hot.map = attnscope::parse_normalization_map("temperature:2");
  const ForwardResult warm = reference_model().forward(tokens, hot);
  auto entropy = [](const auto& row) {
    double h = 0;
    for (long j = 0; j < row.size(); ++j)
      if (row(j) > 0) h -= double(row(j)) * std::log(double(row(j)));
    return h;
  };
  for (long i = 1; i < 50; ++i)
    CHECK(entropy(warm.layers[0].attention[1].row(i)) >= entropy(plain.layers[0].attention[1].row(i)) - 1e-6);

  // A callable's entries outside the causal mask are forced to 0, so the pass stays causal.
  ForwardOptions leaky = plain_options;
  leaky.normalizer = [](const RowMatrix<float>& scores, const attnscope::Visibility& visibility) {
    RowMatrix<float> weights = attnscope::softmax(scores, 1.0f, visibility);
    for (long i = 0; i < weights.rows(); ++i)
      for (long j = i + 1; j < weights.cols(); ++j) weights(i, j) = 0.5f;
    return weights;
  };
  CHECK(reference_model().forward(tokens, leaky).logits == plain.logits);
}

TEST_CASE("mean negative log-likelihood follows its definition") {
  const auto& tokens = story();
  const double nll = reference_model().mean_negative_log_likelihood(tokens);
  CHECK(nll == Approx(mean_nll_from_logits(reference_model().forward(tokens).logits, tokens)).epsilon(1e-12));
  // The model's own greedy story is far more likely than random tokens (log 512 = 6.24 nats for a uniform guess).
  CHECK(nll < 1.5);
  const double random_nll = reference_model().mean_negative_log_likelihood(random_tokens(96, 3));
  CHECK(random_nll > 6.0);
  // Zero-ablating head (l, h) removes its slice of wo's input: the same NLL comes from a copy of the model whose wo
  // columns [h·head_size, (h + 1)·head_size) are zeroed, run without ablation.
  ForwardOptions ablated;
  ablated.ablated_heads = {{0, 0}, {0, 1}, {1, 0}};
  const double ablated_nll = reference_model().mean_negative_log_likelihood(tokens, ablated);
  auto pruned_weights = reference_model().weights();
  const long head_size = pruned_weights.config.head_size();
  for (const auto& [layer, head] : ablated.ablated_heads)
    pruned_weights.layers[std::size_t(layer)].wo.owned_float32().middleCols(head * head_size, head_size).setZero();
  const attnscope::model::Transformer pruned(std::move(pruned_weights));
  CHECK(ablated_nll == Approx(mean_nll_from_logits(pruned.forward(tokens).logits, tokens)).epsilon(1e-6));
  CHECK(std::abs(ablated_nll - nll) > 1e-3);  // the ablation has an effect to check
}

TEST_CASE("per-position NLL agrees with llama2.c run.c's logits at its 5 reference positions") {
  // NLL at position p = (p + 1)·mean NLL of tokens[0..p+1] − p·mean NLL of tokens[0..p] (the pass is causal);
  // reference: −log softmax(run.c's logits at p)[next token], in double.
  const auto& reference = attnscope::testing::reference_outputs();
  const auto next_tokens = reference["next_tokens"].get<std::vector<int>>();
  std::vector<int> tokens = reference["input_tokens"].get<std::vector<int>>();
  tokens.push_back(next_tokens.back());
  int checked = 0;
  for (const auto& [position_text, values] : reference["logits"].items()) {
    const std::size_t p = std::stoul(position_text);
    const auto logits = values.get<std::vector<double>>();
    double max_value = -HUGE_VAL, sum = 0;
    for (double value : logits) max_value = std::max(max_value, value);
    for (double value : logits) sum += std::exp(value - max_value);
    const double expected = -(logits[std::size_t(next_tokens[p])] - max_value - std::log(sum));
    auto mean_nll = [&](std::size_t length) {
      return reference_model().mean_negative_log_likelihood(std::vector<int>(tokens.begin(), tokens.begin() + long(length)));
    };
    const double ours = double(p + 1) * mean_nll(p + 2) - double(p) * mean_nll(p + 1);
    INFO("position " << p);
    CHECK(ours == Approx(expected).margin(1e-3));
    ++checked;
  }
  CHECK(checked == 5);
}

TEST_CASE("sampling: deterministic per seed, different across seeds, temperature 0 is greedy") {
  const auto a = reference_model().generate_sampled({1}, 30, 1.0, 42);
  CHECK(a == reference_model().generate_sampled({1}, 30, 1.0, 42));
  CHECK(a.size() == 31);
  CHECK(reference_model().generate_sampled({1}, 30, 0.0, 42) == reference_model().generate_greedy({1}, 30));
  int differing_seeds = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) differing_seeds += reference_model().generate_sampled({1}, 30, 1.0, seed) != a;
  CHECK(differing_seeds >= 4);
}

TEST_CASE("sample_token follows softmax(logits / T): Kolmogorov-Smirnov on real logit rows") {
  // For the 5 positions of the greedy story whose next-token entropy is closest to 2 nats: KS distance between 4000 draws and softmax(logits / T),
  // cumulative over token ids; 1.95/√N is the 0.1% critical value (conservative for a discrete distribution).
  // Draws at T = 1 must be rejected against T = 2 (the test has power).
  const int draws = 4000;
  const Eigen::MatrixXd story_logits = reference_model().forward(story()).logits.cast<double>();
  std::vector<std::pair<double, long>> entropies;
  for (long p = 0; p < story_logits.rows(); ++p) {
    const Eigen::ArrayXd w = (story_logits.row(p).array() - story_logits.row(p).maxCoeff()).exp().transpose();
    const Eigen::ArrayXd q = w / w.sum();
    entropies.emplace_back(-(q * q.max(1e-300).log()).sum(), p);
  }
  std::sort(entropies.begin(), entropies.end(),
            [](const auto& a, const auto& b) { return std::abs(a.first - 2.0) < std::abs(b.first - 2.0); });
  CHECK(std::abs(entropies[4].first - 2.0) < 1.0);
  attnscope::Random random(99);
  for (int rank = 0; rank < 5; ++rank) {
    const Eigen::RowVectorXd logits = story_logits.row(entropies[std::size_t(rank)].second);
    auto ks_distance = [&](double sampling_temperature, double model_temperature) {
      const Eigen::ArrayXd weights = ((logits.array() - logits.maxCoeff()) / model_temperature).exp().transpose();
      const Eigen::ArrayXd probabilities = weights / weights.sum();
      std::vector<int> counts(512, 0);
      for (int draw = 0; draw < draws; ++draw)
        ++counts[std::size_t(attnscope::model::sample_token(logits, sampling_temperature, random))];
      double empirical = 0, expected = 0, distance = 0;
      for (long token = 0; token < 512; ++token) {
        empirical += counts[std::size_t(token)] / double(draws);
        expected += probabilities(token);
        distance = std::max(distance, std::abs(empirical - expected));
      }
      return distance;
    };
    INFO("position " << entropies[std::size_t(rank)].second << ", entropy " << entropies[std::size_t(rank)].first);
    CHECK(ks_distance(2.0, 2.0) < 1.95 / std::sqrt(double(draws)));
    CHECK(ks_distance(1.0, 2.0) > 1.95 / std::sqrt(double(draws)));
  }
  CHECK(attnscope::model::argmax_token(Eigen::RowVector3f(1.0f, 3.0f, 3.0f)) == 1);  // first index on ties
  Eigen::RowVector3f bad(0.0f, std::numeric_limits<float>::infinity(), 1.0f);
  CHECK_THROWS_AS(attnscope::model::sample_token(bad, 1.0, random), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::sample_token(Eigen::RowVector3f(0, 1, 2), 0.0, random), attnscope::invalid_argument);
  CHECK_THROWS_AS(attnscope::model::argmax_token(Eigen::RowVectorXf()), attnscope::invalid_argument);
}
