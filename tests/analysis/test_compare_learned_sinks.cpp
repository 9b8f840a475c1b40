// analysis::compare_models on models with learned sink logits and Mixture-of-Experts layers (tests/fixtures/hf/gpt_oss
// in BF16 and gpt_oss_mxfp4, the same model with MXFP4 experts): every value equals a dense reference computed here
// from forward()'s captures of each model, with the rows read as the (n+1)-part compositions (a_i, σ_i):
// - the mean σ of each model and its drift B − A;
// - the entropy of the composition and its split with σ and key 0 as the sink channel;
// - JS of the compositions (keep) and of the content parts (drop: σ and key 0 removed, the rest renormalised);
// - the fraction of tokens whose expert set changed, per layer, from the captured routing.
// A model compared with itself changes nothing.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "attnscope/analysis/compare.hpp"
#include "attnscope/model/huggingface.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
namespace analysis = attnscope::analysis;
namespace model = attnscope::model;

double sink_compare_entropy(const std::vector<double>& parts) {
  double h = 0;
  for (const double p : parts)
    if (p > 0) h -= p * std::log(p);
  return h;
}

double sink_compare_js(const std::vector<double>& x, const std::vector<double>& y) {
  double js = 0;
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double m = 0.5 * (x[j] + y[j]);
    if (x[j] > 0) js += 0.5 * x[j] * std::log(x[j] / m);
    if (y[j] > 0) js += 0.5 * y[j] * std::log(y[j] / m);
  }
  return js;
}

// The (n+1)-part composition of row i: the weights of keys 0..i, then σ.
std::vector<double> sink_compare_row(const attnscope::RowMatrix<float>& attention, double sigma, Index i) {
  std::vector<double> row;
  for (Index j = 0; j <= i; ++j) row.push_back(static_cast<double>(attention(i, j)));
  row.push_back(sigma);
  return row;
}

}  // namespace

TEST_CASE("compare_models on learned sinks and experts: BF16 against MXFP4 gpt-oss equals the dense reference") {
  const model::Transformer bf16 = model::load_huggingface_model(attnscope::testing::hf_fixture_folder("gpt_oss"));
  const model::Transformer mxfp4 =
      model::load_huggingface_model(attnscope::testing::hf_fixture_folder("gpt_oss_mxfp4"));
  const auto& config = bf16.config();
  REQUIRE(config.learned_sinks);
  std::vector<int> tokens;
  for (int t = 0; t < 29; ++t) tokens.push_back((t * 37 + 11) % config.vocab_size);
  const Index length = static_cast<Index>(tokens.size());

  model::ForwardOptions capture;
  capture.capture.attention = true;
  capture.capture.routing = true;
  const model::ForwardResult dense[2] = {bf16.forward(tokens, capture), mxfp4.forward(tokens, capture)};

  const analysis::ModelComparison comparison = analysis::compare_models(bf16, mxfp4, tokens);
  REQUIRE(comparison.learned_sinks);
  REQUIRE(comparison.heads.size() == std::size_t(config.n_layers * config.n_heads));
  double largest_drift = 0;
  for (const analysis::HeadComparison& head : comparison.heads) {
    const std::size_t l = std::size_t(head.layer), h = std::size_t(head.head);
    double sigma[2] = {0, 0}, entropy[2] = {0, 0}, sink_part[2] = {0, 0}, js_keep = 0, js_drop = 0;
    Index drop_rows = 0;
    for (Index i = 0; i < length; ++i) {
      std::vector<double> rows[2];
      for (int m = 0; m < 2; ++m) {
        const auto& layer = dense[m].layers[l];
        const double s = layer.learned_sink[h](i);
        rows[m] = sink_compare_row(layer.attention[h], s, i);
        sigma[m] += s / double(length);
        entropy[m] += sink_compare_entropy(rows[m]) / double(length);
        // the sink channel {key 0, σ}: H_b(mass) + mass·H(parts/mass)
        const double mass = rows[m][0] + s;
        sink_part[m] += (sink_compare_entropy({mass, 1 - mass}) + mass * sink_compare_entropy({rows[m][0] / mass, s / mass})) /
                        double(length);
      }
      js_keep += sink_compare_js(rows[0], rows[1]) / double(length);
      if (i == 0) continue;  // row 0 has no content key besides the sinks
      std::vector<double> content[2];
      for (int m = 0; m < 2; ++m) {
        const double mass = 1 - rows[m][0] - rows[m].back();
        for (Index j = 1; j <= i; ++j) content[m].push_back(rows[m][std::size_t(j)] / mass);
      }
      js_drop += sink_compare_js(content[0], content[1]);
      ++drop_rows;
    }
    INFO("layer " << l << " head " << h);
    CHECK(std::abs(head.a.learned_sink - sigma[0]) <= 1e-6);
    CHECK(std::abs(head.b.learned_sink - sigma[1]) <= 1e-6);
    CHECK(std::abs(head.delta().learned_sink - (sigma[1] - sigma[0])) <= 1e-6);
    CHECK(std::abs(head.a.entropy - entropy[0]) <= 1e-5);
    CHECK(std::abs(head.b.entropy - entropy[1]) <= 1e-5);
    CHECK(std::abs(head.a.entropy_sink - sink_part[0]) <= 1e-5);
    CHECK(std::abs(head.b.entropy_content - (entropy[1] - sink_part[1])) <= 1e-5);
    CHECK(std::abs(head.js_keep - js_keep) <= 1e-6);
    CHECK(head.drop_rows == drop_rows);
    CHECK(std::abs(head.js_drop - js_drop / double(drop_rows)) <= 1e-6);
    largest_drift = std::max(largest_drift, std::abs(sigma[1] - sigma[0]));
  }
  CHECK(largest_drift > 1e-4);  // the MXFP4 experts move the sinks of the second layer's heads

  // the expert sets, token by token, from the captured routing
  std::size_t sparse_layers = 0;
  for (int l = 0; l < config.n_layers; ++l) {
    if (!config.moe.is_sparse(l)) continue;
    const auto& a = dense[0].layers[std::size_t(l)].routing.experts;
    const auto& b = dense[1].layers[std::size_t(l)].routing.experts;
    Index changed = 0;
    for (Index t = 0; t < length; ++t) {
      const std::set<int> set_a(a.row(t).data(), a.row(t).data() + a.cols());
      const std::set<int> set_b(b.row(t).data(), b.row(t).data() + b.cols());
      changed += set_a != set_b;
    }
    REQUIRE(sparse_layers < comparison.routing.size());
    CHECK(comparison.routing[sparse_layers].layer == l);
    CHECK(comparison.routing[sparse_layers].expert_set_change == double(changed) / double(length));
    ++sparse_layers;
  }
  CHECK(comparison.routing.size() == sparse_layers);
  CHECK(sparse_layers > 0);
}

TEST_CASE("compare_models: a gpt-oss model compared with itself changes nothing, sinks and experts included") {
  const model::Transformer bf16 = model::load_huggingface_model(attnscope::testing::hf_fixture_folder("gpt_oss"));
  std::vector<int> tokens;
  for (int t = 0; t < 21; ++t) tokens.push_back((t * 53 + 5) % bf16.config().vocab_size);
  const analysis::ModelComparison same = analysis::compare_models(bf16, bf16, tokens);
  REQUIRE(same.learned_sinks);
  for (const analysis::HeadComparison& head : same.heads) {
    CHECK(head.js_keep == 0);
    CHECK(head.delta().learned_sink == 0);
    CHECK(head.delta().entropy == 0);
    CHECK(head.a.learned_sink > 0);
  }
  for (const analysis::LayerRoutingChange& layer : same.routing) CHECK(layer.expert_set_change == 0);
  CHECK(!same.routing.empty());
}
