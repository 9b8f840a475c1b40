// The KV-cache policies on random q, k, v: the dense reference (dense_reference.hpp) on the full attention matrix of
// stream::attention, the oracle's lower bound, the cache sizes each policy's definition implies, results that do not
// depend on the block size, and the refused specs and inputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/kvcache.hpp"
#include "attnscope/stream/attention.hpp"
#include "kvcache/dense_reference.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/random_matrices.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
namespace kvcache = attnscope::kvcache;
namespace kv_reference = attnscope::testing::kvcache_reference;

struct RandomLayer {
  RowMatrix<float> queries, keys, values;
  int heads = 4, kv_heads = 2;
  Index dimension = 8, value_size = 6;
  attnscope::stream::RowStatisticsOptions attention;
};

RandomLayer random_layer(std::uint64_t seed, Index length, int heads, int kv_heads, double scale) {
  RandomLayer layer;
  layer.heads = heads;
  layer.kv_heads = kv_heads;
  attnscope::Random random(seed);
  layer.queries = attnscope::testing::random_logits<float>(random, length, heads * layer.dimension, scale);
  layer.keys = attnscope::testing::random_logits<float>(random, length, kv_heads * layer.dimension, scale);
  layer.values = attnscope::testing::random_logits<float>(random, length, kv_heads * layer.value_size);
  return layer;
}

// The dense weights of every query head (whole L×L matrices from the attention kernel) and the head's values.
kv_reference::Layer dense_layer(const RandomLayer& layer) {
  std::vector<RowMatrix<float>> weights, values;
  const int group = layer.heads / layer.kv_heads;
  for (int h = 0; h < layer.heads; ++h) {
    const int g = h / group;
    RowMatrix<float> probabilities;
    attnscope::stream::AttentionCapture<float> capture;
    capture.probabilities = &probabilities;
    const RowMatrix<float> head_values = layer.values.middleCols(g * layer.value_size, layer.value_size);
    attnscope::stream::attention(RowMatrix<float>(layer.queries.middleCols(h * layer.dimension, layer.dimension)),
                                 RowMatrix<float>(layer.keys.middleCols(g * layer.dimension, layer.dimension)),
                                 head_values, layer.attention, capture);
    weights.push_back(probabilities);
    values.push_back(head_values);
  }
  return kv_reference::make_layer(weights, values, group);
}

std::vector<kvcache::Policy> parse_all(const std::vector<std::string>& specs) {
  std::vector<kvcache::Policy> policies;
  for (const std::string& spec : specs) policies.push_back(kvcache::parse_policy(spec));
  return policies;
}

}  // namespace

TEST_CASE("kvcache policy specs parse, print back, and bad specs are refused naming the field", "[kvcache][spec]") {
  for (const std::string spec : {"streaming:sink=4,recent=60", "oracle:budget=64", "h2o:heavy=32,recent=32",
                                 "tova:budget=64", "snapkv:window=32,kernel=7,budget=96"})
    CHECK(kvcache::policy_spec(kvcache::parse_policy(spec)) == spec);
  CHECK(kvcache::policy_spec(kvcache::parse_policy("streaming:recent=2,sink=1")) == "streaming:sink=1,recent=2");
  CHECK(kvcache::policy_scope(kvcache::parse_policy("oracle:budget=3")) == kvcache::CacheScope::query_head);
  CHECK(kvcache::policy_scope(kvcache::parse_policy("tova:budget=3")) == kvcache::CacheScope::layer);
  CHECK(kvcache::policy_scope(kvcache::parse_policy("h2o:heavy=1,recent=1")) == kvcache::CacheScope::kv_head);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"streaming:sink=4", "missing field 'recent'"},
      {"streaming:sink=4,recent=x", "field 'recent' must be an integer, got 'x'"},
      {"streaming:sink=-1,recent=2", "field 'sink' must be in [0"},
      {"streaming:sink=4,recent=60,window=3", "unknown field 'window' (streaming takes sink, recent)"},
      {"streaming:sink=0,recent=0", "sink + recent must be >= 1"},
      {"lru:budget=4", "unknown policy 'lru' (known: streaming, oracle, h2o, tova, snapkv)"},
      {"oracle", "missing field 'budget'"},
      {"oracle:budget=0", "field 'budget' must be in [1"},
      {"oracle:budget", "field 'budget' has no '=value'"},
      {"oracle:budget=", "field 'budget' has no value"},
      {"oracle:=3", "a field has no name"},
      {"tova:budget=4,budget=5", "field 'budget' is given twice"},
      {"tova:budget=99999999999999999999", "field 'budget' must be an integer"},
      {":budget=3", "no policy name"},
      {"h2o:heavy=0,recent=0", "heavy + recent must be >= 1"},
      {"snapkv:window=8,kernel=4,budget=16", "field 'kernel' must be odd"},
      {"snapkv:window=8,kernel=3,budget=4", "field 'budget' (4) must be >= field 'window' (8)"},
  };
  for (const auto& [spec, message] : bad) {
    INFO(spec);
    CHECK_THROWS_WITH(kvcache::parse_policy(spec),
                      Catch::Contains("attnscope::kvcache::parse_policy: '" + spec + "'") && Catch::Contains(message));
  }
}

TEST_CASE("kvcache policies match the dense reference on random q, k, v", "[kvcache][property]") {
  struct Setting {
    std::uint64_t seed;
    Index length;
    int heads, kv_heads;
    double scale;
    Index window;
    double softcap;
  };
  for (const Setting setting : {Setting{1, 50, 4, 2, 1.0, 0, 0}, Setting{2, 61, 6, 3, 2.5, 9, 0},
                                Setting{3, 37, 4, 4, 0.3, 0, 5.0}, Setting{4, 70, 8, 1, 1.7, 13, 2.0},
                                Setting{5, 44, 2, 1, 3.0, 0, 0}, Setting{6, 700, 2, 1, 2.0, 0, 0},
                                Setting{7, 520, 4, 2, 1.0, 300, 0}}) {
    INFO("seed " << setting.seed);
    RandomLayer layer = random_layer(setting.seed, setting.length, setting.heads, setting.kv_heads, setting.scale);
    if (setting.window > 0) layer.attention.visibility = attnscope::SlidingWindow{setting.window, true, 0};
    if (setting.softcap > 0) layer.attention.logit_softcap = setting.softcap;
    const Index prefill = setting.length / 2 + 1;
    const std::vector<std::string> specs = {"streaming:sink=3,recent=5", "oracle:budget=6", "h2o:heavy=3,recent=2",
                                            "h2o:heavy=5,recent=0", "tova:budget=6", "tova:budget=1",
                                            "snapkv:window=5,kernel=5,budget=12", "snapkv:window=1,kernel=1,budget=1"};
    kvcache::SimulationOptions options;
    options.prefill = prefill;
    options.block_rows = 5;
    const auto results = kvcache::simulate_layer(layer.queries, layer.keys, layer.values, layer.heads,
                                                 layer.kv_heads, layer.attention, parse_all(specs), options);
    const kv_reference::Layer dense = dense_layer(layer);
    const int group = layer.heads / layer.kv_heads;
    for (std::size_t p = 0; p < specs.size(); ++p) {
      INFO(specs[p]);
      kv_reference::Spec spec;
      const kvcache::Policy policy = kvcache::parse_policy(specs[p]);
      spec.name = specs[p].substr(0, specs[p].find(':'));
      std::visit(
          [&](const auto& typed) {
            using P = std::decay_t<decltype(typed)>;
            if constexpr (std::is_same<P, kvcache::Streaming>::value) spec.field = {{"sink", typed.sink}, {"recent", typed.recent}};
            if constexpr (std::is_same<P, kvcache::Oracle>::value) spec.field = {{"budget", typed.budget}};
            if constexpr (std::is_same<P, kvcache::H2O>::value) spec.field = {{"heavy", typed.heavy}, {"recent", typed.recent}};
            if constexpr (std::is_same<P, kvcache::Tova>::value) spec.field = {{"budget", typed.budget}};
            if constexpr (std::is_same<P, kvcache::SnapKV>::value)
              spec.field = {{"window", typed.window}, {"kernel", typed.kernel}, {"budget", typed.budget}};
          },
          policy);
      const auto expected = kv_reference::simulate(dense, spec, static_cast<int>(prefill));
      for (int h = 0; h < layer.heads; ++h)
        for (Index i = 0; i < setting.length; ++i) {
          INFO("head " << h << " query " << i);
          CHECK(results[p].lost_mass(h, i) == Approx(expected.lost[h][i]).margin(1e-9));
          CHECK(results[p].output_error(h, i) == Approx(expected.error[h][i]).margin(1e-9));
          CHECK(results[p].oracle_lost_mass(h, i) == Approx(expected.oracle_lost[h][i]).margin(1e-9));
          CHECK(results[p].cache_size(h / group, i) == expected.size[h / group][i]);
        }
    }
  }
}

TEST_CASE("kvcache largest_ranks and sums_of_largest agree with a full sort, ties to the later key",
          "[kvcache][property]") {
  attnscope::Random random(99);
  std::vector<std::uint64_t> ranks;
  std::vector<float> sample;
  std::vector<double> sums;
  for (int trial = 0; trial < 200; ++trial) {
    const Index keys = 1 + static_cast<Index>(random.below(trial < 100 ? 64 : 3000));
    std::vector<float> weights(static_cast<std::size_t>(keys));
    const int kind = trial % 4;  // smooth, few distinct values (ties), mostly zeros, one spike
    for (auto& w : weights) {
      const double u = random.uniform();
      w = kind == 0 ? static_cast<float>(std::exp(4 * random.normal()))
          : kind == 1 ? static_cast<float>(random.below(4)) * 0.25f
          : kind == 2 ? (u < 0.9 ? 0.0f : static_cast<float>(u))
                      : static_cast<float>(1e-6 * u);
    }
    if (kind == 3) weights[static_cast<std::size_t>(random.below(static_cast<std::uint64_t>(keys)))] = 1.0f;
    // the reference order: weight descending, then the later key first
    std::vector<Index> order(static_cast<std::size_t>(keys));
    for (Index j = 0; j < keys; ++j) order[static_cast<std::size_t>(j)] = j;
    std::sort(order.begin(), order.end(), [&](Index a, Index b) {
      return weights[a] != weights[b] ? weights[a] > weights[b] : a > b;
    });
    const Index count = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(keys)));
    const Index small = 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(std::max<Index>(1, keys / 10))));
    INFO("trial " << trial << " keys " << keys << " count " << count << " small " << small);
    for (const Index wanted : {count, small}) {
      kvcache::detail::largest_ranks(weights.data(), keys, wanted, ranks, sample);
      std::vector<Index> chosen;
      for (Index t = 0; t < wanted; ++t) chosen.push_back(kvcache::detail::rank_key(ranks[static_cast<std::size_t>(t)]));
      std::sort(chosen.begin(), chosen.end());
      std::vector<Index> expected(order.begin(), order.begin() + wanted);
      std::sort(expected.begin(), expected.end());
      CHECK(chosen == expected);
    }
    const std::vector<Index> sizes = {count, small, keys + 5, small};
    std::vector<float> selected;
    kvcache::detail::sums_of_largest(weights.data(), keys, sizes, selected, sample, sums);
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      double expected = 0;
      for (Index t = 0; t < std::min(sizes[s], keys); ++t) expected += weights[static_cast<std::size_t>(order[static_cast<std::size_t>(t)])];
      CHECK(sums[s] == Approx(expected).epsilon(1e-12));
    }
  }
}

TEST_CASE("kvcache bounds: the oracle is a lower bound, sizes follow the definitions, blocks do not matter",
          "[kvcache][property]") {
  for (std::uint64_t seed = 10; seed < 16; ++seed) {
    INFO("seed " << seed);
    const Index length = 30 + static_cast<Index>(seed) * 3;
    RandomLayer layer = random_layer(seed, length, 4, 2, 0.5 + 0.4 * static_cast<double>(seed - 10));
    const Index prefill = length - 10, first = 4;
    const std::vector<std::string> specs = {"streaming:sink=4,recent=8", "oracle:budget=12", "h2o:heavy=6,recent=6",
                                            "tova:budget=12", "snapkv:window=4,kernel=3,budget=12"};
    kvcache::SimulationOptions options;
    options.prefill = prefill;
    options.evaluate_from = first;
    const auto results = kvcache::simulate_layer(layer.queries, layer.keys, layer.values, 4, 2, layer.attention,
                                                 parse_all(specs), options);
    for (std::size_t p = 0; p < specs.size(); ++p) {
      INFO(specs[p]);
      const auto& result = results[p];
      REQUIRE(result.lost_mass.rows() == 4);
      REQUIRE(result.lost_mass.cols() == length - first);
      REQUIRE(result.cache_size.rows() == 2);
      for (Index t = 0; t < length - first; ++t) {
        const Index i = first + t;
        for (int h = 0; h < 4; ++h) {
          CHECK(result.lost_mass(h, t) >= 0.0);
          CHECK(result.lost_mass(h, t) <= 1.0);
          CHECK(result.output_error(h, t) >= 0.0);
          CHECK(result.oracle_lost_mass(h, t) <= result.lost_mass(h, t) + 1e-12);
          if (p == 1) CHECK(result.oracle_lost_mass(h, t) == Approx(result.lost_mass(h, t)).margin(1e-15));
        }
        for (int g = 0; g < 2; ++g) {
          const std::int64_t size = result.cache_size(g, t);
          if (p == 0) CHECK(size == std::min<Index>(12, i + 1));
          if (p == 1) CHECK(size == std::min<Index>(12, i + 1));
          if (p == 2 || p == 3) CHECK(size == std::min<Index>(13, i + 1));  // E_{i−1} ∪ {i}, E full at 12
          if (p == 4) CHECK(size == (i < prefill ? i + 1 : 12 + (i - prefill + 1)));
        }
      }
      // the first evaluated rows lose nothing while the cache holds every key
      CHECK(result.lost_mass(0, 0) == 0.0);
    }
    // the block size changes only the order of the double sums (rows of other lengths), not the caches
    for (const Index block : {1, 3, 64}) {
      options.block_rows = block;
      const auto again = kvcache::simulate_layer(layer.queries, layer.keys, layer.values, 4, 2, layer.attention,
                                                 parse_all(specs), options);
      for (std::size_t p = 0; p < specs.size(); ++p) {
        CHECK((again[p].lost_mass - results[p].lost_mass).cwiseAbs().maxCoeff() <= 1e-13);
        CHECK((again[p].output_error - results[p].output_error).cwiseAbs().maxCoeff() <= 1e-12);
        CHECK(again[p].cache_size == results[p].cache_size);
      }
    }
  }
}

TEST_CASE("kvcache simulate_layer refuses bad inputs naming the function and the value", "[kvcache][errors]") {
  const RandomLayer layer = random_layer(3, 20, 4, 2, 1.0);
  const auto policies = parse_all({"streaming:sink=1,recent=3"});
  const auto run = [&](const RowMatrix<float>& q, const RowMatrix<float>& k, const RowMatrix<float>& v, Index heads,
                       Index kv_heads, const attnscope::stream::RowStatisticsOptions& attention,
                       const std::vector<kvcache::Policy>& list, const kvcache::SimulationOptions& options) {
    return kvcache::simulate_layer(q, k, v, heads, kv_heads, attention, list, options);
  };
  const auto& q = layer.queries;
  const auto& k = layer.keys;
  const auto& v = layer.values;
  const auto& a = layer.attention;
  const std::string prefix = "attnscope::kvcache::simulate_layer: ";
  CHECK_THROWS_WITH(run(q, k, v, 4, 3, a, policies, {}), Catch::Contains(prefix + "heads (4) must be a positive multiple of kv_heads (3)"));
  CHECK_THROWS_WITH(run(q, k, v, 3, 3, a, policies, {}), Catch::Contains("q has 32 columns, not heads (3)"));
  CHECK_THROWS_WITH(run(q, k.leftCols(8), v, 4, 2, a, policies, {}), Catch::Contains("k has 8 columns"));
  CHECK_THROWS_WITH(run(q, k, v.topRows(19), 4, 2, a, policies, {}), Catch::Contains("same rows, got 20, 20, 19"));
  CHECK_THROWS_WITH(run(q.topRows(0), k.topRows(0), v.topRows(0), 4, 2, a, policies, {}), Catch::Contains("L = 0"));
  RowMatrix<float> bad_values = v;
  bad_values(7, 3) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(run(q, k, bad_values, 4, 2, a, policies, {}), Catch::Contains(prefix + "v row 7 has a NaN"));
  RowMatrix<float> bad_queries = q;
  bad_queries(2, 0) = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(run(bad_queries, k, v, 4, 2, a, policies, {}), attnscope::invalid_argument);
  CHECK_THROWS_WITH(run(q, k, v, 4, 2, a, {}, {}), Catch::Contains("no policy"));
  kvcache::SimulationOptions options;
  options.evaluate_from = 20;
  CHECK_THROWS_WITH(run(q, k, v, 4, 2, a, policies, options), Catch::Contains("evaluate_from 20 is outside [0, 20)"));
  options = {};
  options.prefill = 21;
  CHECK_THROWS_WITH(run(q, k, v, 4, 2, a, policies, options), Catch::Contains("prefill 21 is outside [0, 20]"));
  options = {};
  options.block_rows = 0;
  CHECK_THROWS_WITH(run(q, k, v, 4, 2, a, policies, options), Catch::Contains("block_rows must be >= 1, got 0"));
  attnscope::stream::RowStatisticsOptions bidirectional;
  bidirectional.visibility = attnscope::Visibility();
  CHECK_THROWS_WITH(run(q, k, v, 4, 2, bidirectional, policies, {}), Catch::Contains("the attention must be causal"));
  const auto snap = parse_all({"snapkv:window=4,kernel=3,budget=8"});
  CHECK_THROWS_WITH(run(q, k, v, 4, 2, a, snap, {}),
                    Catch::Contains("snapkv:window=4,kernel=3,budget=8 needs the prefill length"));
  options = {};
  options.prefill = 3;
  CHECK_THROWS_WITH(run(q, k, v, 4, 2, a, snap, options), Catch::Contains("window 4 is longer than the prefill (3)"));
}
