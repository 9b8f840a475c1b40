// Tests of analysis::compare_models and its page: a model compared with itself changes nothing (exact zeros, JS 0,
// top-k overlap 1); a fixture model against a copy with perturbed norm weights gives, head by head, the values of a
// dense reference computed here from forward()'s captured attention matrices with the composition module's dense
// functions (rows of a whole matrix at once, not the row-by-row streaming path); the images are block maxima of those
// matrices; bad input is refused by name.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/analysis/compare.hpp"
#include "attnscope/analysis/compare_html.hpp"
#include "attnscope/composition/channels.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/model/huggingface.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
namespace analysis = attnscope::analysis;
namespace model = attnscope::model;

model::Transformer compare_fixture(const std::string& name) {
  return model::load_huggingface_model(attnscope::testing::hf_fixture_folder(name));
}

// The fixture with every attention-norm weight multiplied by 1 + 0.3·N(0, 1) (seeded): each layer's queries and keys
// change, so does every head's attention.
model::Transformer compare_perturbed(const model::Transformer& original, std::uint64_t seed) {
  model::TransformerWeights weights = original.weights();
  attnscope::Random random(seed);
  for (auto& layer : weights.layers)
    for (Index i = 0; i < layer.attention_norm.size(); ++i)
      layer.attention_norm(i) *= static_cast<float>(1.0 + 0.3 * random.normal());
  return model::Transformer(std::move(weights));
}

std::vector<int> compare_tokens(int length, int vocab, std::uint64_t seed) {
  attnscope::Random random(seed);
  std::vector<int> tokens(std::size_t(length), 0);
  for (int& t : tokens) t = static_cast<int>(random.below(static_cast<std::uint64_t>(vocab)));
  return tokens;
}

// The visible keys of each query row of layer l, as the model defines them (causal, or its causal sliding window).
attnscope::Visibility compare_reference_visibility(const model::TransformerConfig& config, int layer, Index length) {
  const Index window = config.window_of_layer(layer);
  if (window <= 0 || length <= window) return attnscope::causal;
  return attnscope::SlidingWindow{window, true, 0};
}

// |top_k(a) ∩ top_k(b)| / min(k, n) of two rows by full sorts (ties to the lower key).
double compare_reference_overlap(const std::vector<double>& a, const std::vector<double>& b, Index k) {
  auto top = [&](const std::vector<double>& x) {
    std::vector<Index> order(x.size());
    std::iota(order.begin(), order.end(), Index(0));
    std::stable_sort(order.begin(), order.end(), [&](Index i, Index j) { return x[std::size_t(i)] > x[std::size_t(j)]; });
    order.resize(std::size_t(std::min<Index>(k, Index(x.size()))));
    return std::set<Index>(order.begin(), order.end());
  };
  const std::set<Index> ta = top(a), tb = top(b);
  Index common = 0;
  for (Index i : ta) common += tb.count(i);
  return double(common) / double(ta.size());
}

// The dense reference of one head: every quantity from the two L × L attention matrices of forward(), sink key 0.
analysis::HeadComparison compare_dense_reference(const RowMatrix<float>& attention_a, const RowMatrix<float>& attention_b,
                                                 const attnscope::Visibility& visibility, Index top_k) {
  const RowMatrix<double> a = attention_a.cast<double>(), b = attention_b.cast<double>();
  const Index length = a.rows();
  analysis::HeadComparison out;
  out.js_keep = attnscope::composition::jensen_shannon(a, b, visibility).mean();
  const auto jacobian_a = attnscope::softmax_jacobian_spectral_norm(a, 1.0, visibility);
  const auto jacobian_b = attnscope::softmax_jacobian_spectral_norm(b, 1.0, visibility);
  out.a.jacobian_norm = jacobian_a.mean(), out.b.jacobian_norm = jacobian_b.mean();
  out.a.sink_mass = a.col(0).mean(), out.b.sink_mass = b.col(0).mean();
  out.a.max_weight = a.rowwise().maxCoeff().mean(), out.b.max_weight = b.rowwise().maxCoeff().mean();
  // per row: a row that sees key 0 and more keys goes through the dense split functions; row 0 (key 0 alone) is all
  // sink with entropy 0 and no content; a windowed row that no longer sees key 0 is all content.
  double drop = 0;
  Index drop_rows = 0;
  double overlap = 0;
  for (Index i = 0; i < length; ++i) {
    std::vector<double> row_a, row_b;
    for (Index j = 0; j < length; ++j)
      if (visibility.visible(i, j, length)) row_a.push_back(a(i, j)), row_b.push_back(b(i, j));
    overlap += compare_reference_overlap(row_a, row_b, top_k);
    const bool sees_sink = visibility.visible(i, 0, length);
    if (sees_sink && row_a.size() == 1) continue;  // entropy 0, no content, drop undefined
    if (!sees_sink) {
      const double entropy_a = attnscope::row_entropy(a.row(i)).value(), entropy_b = attnscope::row_entropy(b.row(i)).value();
      out.a.entropy += entropy_a, out.a.entropy_content += entropy_a;
      out.b.entropy += entropy_b, out.b.entropy_content += entropy_b;
      drop += attnscope::composition::jensen_shannon(a.row(i), b.row(i))(0), ++drop_rows;
      continue;
    }
    const attnscope::Visibility row_visibility = attnscope::Causal{i};  // the first i + 1 keys of a 1-row block
    const auto split_a = attnscope::composition::entropy_split(a.row(i), row_visibility);
    const auto split_b = attnscope::composition::entropy_split(b.row(i), row_visibility);
    out.a.entropy += split_a.entropy(0), out.a.entropy_sink += split_a.sink_term()(0);
    out.a.entropy_content += split_a.content_term(0);
    out.b.entropy += split_b.entropy(0), out.b.entropy_sink += split_b.sink_term()(0);
    out.b.entropy_content += split_b.content_term(0);
    drop += attnscope::composition::js_split(a.row(i), b.row(i), row_visibility).content_divergence(0), ++drop_rows;
  }
  for (auto* s : {&out.a, &out.b}) s->entropy /= double(length), s->entropy_sink /= double(length), s->entropy_content /= double(length);
  out.js_drop = drop / double(drop_rows);
  out.drop_rows = drop_rows;
  out.top_k_overlap = overlap / double(length);
  return out;
}

// forward() captures of both models' attention on the same tokens; head() gives one head's two matrices in double.
struct CompareDenseCaptures {
  model::ForwardResult a, b;
  CompareDenseCaptures(const model::Transformer& model_a, const model::Transformer& model_b,
                       const std::vector<int>& tokens) {
    model::ForwardOptions capture;
    capture.capture.attention = true;
    a = model_a.forward(tokens, capture);
    b = model_b.forward(tokens, capture);
  }
  std::pair<RowMatrix<double>, RowMatrix<double>> head(int layer, int head_index) const {
    return {a.layers[std::size_t(layer)].attention[std::size_t(head_index)].cast<double>(),
            b.layers[std::size_t(layer)].attention[std::size_t(head_index)].cast<double>()};
  }
};

void compare_against_dense(const std::string& fixture, int length, Index query_block) {
  const model::Transformer a = compare_fixture(fixture);
  const model::Transformer b = compare_perturbed(a, 27);
  const std::vector<int> tokens = compare_tokens(length, a.config().vocab_size, 5);
  analysis::CompareOptions options;
  options.query_block = query_block;
  options.top_k = 3;
  const analysis::ModelComparison result = analysis::compare_models(a, b, tokens, options);
  REQUIRE(result.heads.size() == std::size_t(a.config().n_layers * a.config().n_heads));
  model::ForwardOptions capture;
  capture.capture.attention = true;
  const model::ForwardResult dense_a = a.forward(tokens, capture), dense_b = b.forward(tokens, capture);
  for (std::size_t r = 0; r < result.heads.size(); ++r) {
    const analysis::HeadComparison& got = result.heads[r];
    if (r > 0) CHECK(result.heads[r - 1].js_keep >= got.js_keep);  // most changed first
    INFO(fixture << " layer " << got.layer << " head " << got.head);
    const auto& attention_a = dense_a.layers[std::size_t(got.layer)].attention[std::size_t(got.head)];
    const auto& attention_b = dense_b.layers[std::size_t(got.layer)].attention[std::size_t(got.head)];
    const auto want = compare_dense_reference(attention_a, attention_b,
                                              compare_reference_visibility(a.config(), got.layer, length), 3);
    const double tolerance = 2e-5;  // float probabilities of two forwards, means in double
    CHECK(got.js_keep == Approx(want.js_keep).margin(tolerance));
    CHECK(got.js_drop == Approx(want.js_drop).margin(tolerance));
    CHECK(got.drop_rows == want.drop_rows);
    CHECK(got.top_k_overlap == Approx(want.top_k_overlap).margin(1e-12));
    CHECK(got.js_keep > 1e-6);  // the perturbation moved every head
    for (const auto& [side, reference] : {std::make_pair(&got.a, &want.a), std::make_pair(&got.b, &want.b)}) {
      CHECK(side->sink_mass == Approx(reference->sink_mass).margin(tolerance));
      CHECK(side->entropy == Approx(reference->entropy).margin(tolerance));
      CHECK(side->entropy_sink == Approx(reference->entropy_sink).margin(tolerance));
      CHECK(side->entropy_content == Approx(reference->entropy_content).margin(tolerance));
      CHECK(side->entropy_sink + side->entropy_content == Approx(side->entropy).margin(1e-12));
      CHECK(side->max_weight == Approx(reference->max_weight).margin(tolerance));
      CHECK(side->jacobian_norm == Approx(reference->jacobian_norm).margin(tolerance));
    }
  }
}

}  // namespace

TEST_CASE("compare_models: a model compared with itself changes nothing, exactly") {
  for (const std::string fixture : {"llama", "gemma2"}) {
    INFO(fixture);
    const model::Transformer a = compare_fixture(fixture);
    const std::vector<int> tokens = compare_tokens(33, a.config().vocab_size, 3);
    analysis::CompareOptions options;
    options.query_block = 8;
    const analysis::ModelComparison result = analysis::compare_models(a, a, tokens, options);
    REQUIRE(result.heads.size() == std::size_t(a.config().n_layers * a.config().n_heads));
    CHECK(result.tokens == 33);
    for (const auto& head : result.heads) {
      const analysis::HeadAttentionSummary delta = head.delta();
      for (const double change : {delta.sink_mass, delta.entropy, delta.entropy_sink, delta.entropy_content,
                                  delta.max_weight, delta.jacobian_norm})
        CHECK(change == 0);
      CHECK(head.js_keep == 0);
      CHECK(head.js_drop == 0);
      CHECK(head.top_k_overlap == 1);
      CHECK(head.drop_rows >= 32);  // every row but the first sees content (windowed rows without key 0 count too)
      CHECK(head.a.entropy > 0);
      CHECK(head.a.sink_mass > 0);
      CHECK(head.a.sink_mass < 1);
    }
    // equal divergences keep the (layer, head) order
    CHECK(result.heads.front().layer == 0);
    CHECK(result.heads.front().head == 0);
    CHECK(result.heads.back().layer == a.config().n_layers - 1);
  }
}

TEST_CASE("compare_models agrees head by head with a dense reference from forward() captures") {
  compare_against_dense("llama", 37, 8);    // GQA, causal; blocks of 8 rows with a partial last block
  compare_against_dense("gemma2", 40, 64);  // sliding window 12 on alternate layers, attention softcap, one block
  compare_against_dense("gpt2", 25, 1);     // learned positions, biases; one row per block
}

TEST_CASE("compare_models: a layer windowed in one model only is compared over the keys either model sees") {
  const model::Transformer llama = compare_fixture("llama");   // causal everywhere
  const model::Transformer gemma = compare_fixture("gemma2");  // window 12 on alternate layers, same shape and vocabulary
  const std::vector<int> tokens = compare_tokens(30, 300, 12);
  const auto result = analysis::compare_models(llama, gemma, tokens);
  const CompareDenseCaptures dense(llama, gemma, tokens);
  for (const auto& head : result.heads) {
    INFO("layer " << head.layer << " head " << head.head);
    // the dense matrices hold 0 where a model does not see a key: JS over every causal key is JS over the union
    const auto [pa, pb] = dense.head(head.layer, head.head);
    CHECK(head.js_keep == Approx(attnscope::composition::jensen_shannon(pa, pb, attnscope::causal).mean()).margin(2e-5));
    CHECK(head.b.sink_mass == Approx(pb.col(0).mean()).margin(2e-5));
    CHECK(head.js_keep <= std::log(2.0));
    CHECK(head.top_k_overlap >= 0);
    CHECK(head.top_k_overlap <= 1);
  }
}

TEST_CASE("compare_models: the drop convention removes the sink keys; several sink keys") {
  const model::Transformer a = compare_fixture("llama");
  const model::Transformer b = compare_perturbed(a, 11);
  const std::vector<int> tokens = compare_tokens(20, a.config().vocab_size, 8);
  analysis::CompareOptions options;
  options.sink_keys = {2, 0};
  const auto result = analysis::compare_models(a, b, tokens, options);
  REQUIRE(result.sink_keys == std::vector<Index>{0, 2});
  const CompareDenseCaptures dense(a, b, tokens);
  for (const auto& head : result.heads) {
    INFO("layer " << head.layer << " head " << head.head);
    const auto [pa, pb] = dense.head(head.layer, head.head);
    // rows 3.. see both sinks and content: the dense split over that block (rows 0..2: see the code's rules)
    const attnscope::composition::SinkSet sinks({0, 2});
    const attnscope::Visibility rows_from_3 = attnscope::Causal{3};
    const auto split = attnscope::composition::js_split(pa.bottomRows(17), pb.bottomRows(17), rows_from_3, sinks);
    const auto entropy_a = attnscope::composition::entropy_split(pa.bottomRows(17), rows_from_3, sinks);
    // rows 0 and 1 see only key 0 or keys {0, 1} (sink 2 not yet visible: row 1 splits on key 0); row 2 sees {0,1,2}
    double drop = split.content_divergence.sum(), sink_part = entropy_a.sink_term().sum();
    const auto row1 = attnscope::composition::js_split(pa.row(1).head(2), pb.row(1).head(2));
    const auto row2 = attnscope::composition::js_split(pa.row(2).head(3), pb.row(2).head(3), attnscope::Visibility{},
                                                       sinks);
    drop += row1.content_divergence(0) + row2.content_divergence(0);
    sink_part += attnscope::composition::entropy_split(pa.row(1).head(2)).sink_term()(0) +
                 attnscope::composition::entropy_split(pa.row(2).head(3), attnscope::Visibility{}, sinks).sink_term()(0);
    CHECK(head.drop_rows == 19);
    CHECK(head.js_drop == Approx(drop / 19).margin(2e-5));
    CHECK(head.a.entropy_sink == Approx(sink_part / 20).margin(2e-5));
    CHECK(head.a.entropy_sink + head.a.entropy_content == Approx(head.a.entropy).margin(1e-12));
  }
}

TEST_CASE("compare_models: images are the block maxima of both attention matrices and of their difference") {
  const model::Transformer a = compare_fixture("llama");
  const model::Transformer b = compare_perturbed(a, 4);
  const std::vector<int> tokens = compare_tokens(30, a.config().vocab_size, 9);
  analysis::CompareOptions options;
  options.image_heads = {{1, 3}, {0, 0}};
  options.image_max_side = 8;  // 30 rows: blocks of 4, 8 pixels a side
  options.statistics = false;
  const auto result = analysis::compare_models(a, b, tokens, options);
  CHECK(result.heads.empty());
  REQUIRE(result.images.size() == 2);
  model::ForwardOptions capture;
  capture.capture.attention = true;
  const auto dense_a = a.forward(tokens, capture), dense_b = b.forward(tokens, capture);
  for (const auto& images : result.images) {
    CHECK(images.block == 4);
    REQUIRE(images.a.rows() == 8);
    REQUIRE(images.a.cols() == 8);
    const RowMatrix<float>& pa = dense_a.layers[std::size_t(images.layer)].attention[std::size_t(images.head)];
    const RowMatrix<float>& pb = dense_b.layers[std::size_t(images.layer)].attention[std::size_t(images.head)];
    for (Index y = 0; y < 8; ++y)
      for (Index x = 0; x < 8; ++x) {
        double max_a = 0, max_b = 0, max_difference = 0;
        for (Index i = 4 * y; i < std::min<Index>(30, 4 * y + 4); ++i)
          for (Index j = 4 * x; j < std::min<Index>(30, 4 * x + 4); ++j) {
            max_a = std::max(max_a, double(pa(i, j))), max_b = std::max(max_b, double(pb(i, j)));
            max_difference = std::max(max_difference, std::abs(double(pb(i, j)) - double(pa(i, j))));
          }
        CHECK(images.a(y, x) == Approx(max_a).margin(2e-6));
        CHECK(images.b(y, x) == Approx(max_b).margin(2e-6));
        CHECK(images.difference(y, x) == Approx(max_difference).margin(4e-6));
      }
  }
  CHECK(result.images[0].layer == 1);
  CHECK(result.images[0].head == 3);
  const std::string page = analysis::render_comparison_html(result, {"cmp <page>", "a.gguf", "b & c"});
  CHECK(page.find("cmp &lt;page&gt;") != std::string::npos);
  CHECK(page.find("b &amp; c") != std::string::npos);
  CHECK(page.find("<section id=\"head-1-3\">") < page.find("<section id=\"head-0-0\">"));
  std::size_t images_on_page = 0;
  for (std::size_t at = page.find("data:image/png;base64,"); at != std::string::npos;
       at = page.find("data:image/png;base64,", at + 1))
    ++images_on_page;
  CHECK(images_on_page == 6);
}

TEST_CASE("compare_models: the images of the most changed heads, collected in the same pass, are those asked by name") {
  const model::Transformer a = compare_fixture("llama");
  const model::Transformer b = compare_perturbed(a, 8);
  const std::vector<int> tokens = compare_tokens(26, a.config().vocab_size, 4);
  analysis::CompareOptions leading;
  leading.image_most_changed = 3;
  leading.image_heads = {{1, 1}};  // listed: kept whatever its rank, once
  leading.image_max_side = 10;
  const auto result = analysis::compare_models(a, b, tokens, leading);
  REQUIRE(result.heads.size() == 8);
  std::vector<std::pair<int, int>> expected = {{1, 1}};
  for (std::size_t r = 0; r < 3; ++r)
    if (std::make_pair(result.heads[r].layer, result.heads[r].head) != std::make_pair(1, 1))
      expected.emplace_back(result.heads[r].layer, result.heads[r].head);
  REQUIRE(result.images.size() == expected.size());
  analysis::CompareOptions named;
  named.image_heads = expected;
  named.image_max_side = 10;
  named.statistics = false;
  const auto reference = analysis::compare_models(a, b, tokens, named);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("image " << i);
    CHECK(result.images[i].layer == expected[i].first);
    CHECK(result.images[i].head == expected[i].second);
    CHECK(result.images[i].block == 3);
    CHECK(result.images[i].a == reference.images[i].a);
    CHECK(result.images[i].b == reference.images[i].b);
    CHECK(result.images[i].difference == reference.images[i].difference);
    CHECK(result.images[i].difference.maxCoeff() > 0);
  }
  analysis::CompareOptions bad;
  bad.image_most_changed = -1;
  CHECK_THROWS_WITH(analysis::compare_models(a, b, tokens, bad), Catch::Matchers::Contains("image_most_changed must be >= 0, got -1"));
  bad.image_most_changed = 2;
  bad.statistics = false;
  CHECK_THROWS_WITH(analysis::compare_models(a, b, tokens, bad), Catch::Matchers::Contains("image_most_changed needs the statistics"));
}

TEST_CASE("compare_models and write_comparison_csv: one line per head in the result's order") {
  const model::Transformer a = compare_fixture("llama");
  const model::Transformer b = compare_perturbed(a, 6);
  const auto result = analysis::compare_models(a, b, compare_tokens(16, a.config().vocab_size, 2));
  std::ostringstream csv;
  analysis::write_comparison_csv(csv, result);
  std::istringstream lines(csv.str());
  std::string line;
  std::getline(lines, line);
  CHECK(line.rfind("rank,layer,head,js_keep,js_drop,drop_rows,top_k_overlap,sink_mass_a,sink_mass_b,delta_sink_mass,", 0) == 0);
  CHECK(std::count(line.begin(), line.end(), ',') == 6 + 18);
  std::size_t rows = 0;
  while (std::getline(lines, line)) {
    const auto& head = result.heads[rows++];
    CHECK(line.rfind(std::to_string(rows) + "," + std::to_string(head.layer) + "," + std::to_string(head.head) + ",", 0) == 0);
    CHECK(std::count(line.begin(), line.end(), ',') == 24);
  }
  CHECK(rows == result.heads.size());
}

TEST_CASE("compare_models refuses bad input by name") {
  const model::Transformer llama = compare_fixture("llama");
  const std::vector<int> tokens = compare_tokens(10, 300, 1);
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(analysis::compare_models(llama, llama, {}), Contains("analysis::compare_models") && Contains("no tokens"));
  model::TransformerWeights small = llama.weights();
  small.config.vocab_size = 200;
  small.token_embedding = small.token_embedding.middle_rows(0, 200);
  small.classifier = small.classifier.middle_rows(0, 200);
  const model::Transformer smaller(std::move(small));
  CHECK_THROWS_WITH(analysis::compare_models(llama, smaller, tokens), Contains("different vocabularies: 300 and 200"));
  model::TransformerWeights shallow = llama.weights();
  shallow.layers.pop_back();
  shallow.config.n_layers = 1;
  const model::Transformer one_layer(std::move(shallow));
  CHECK_THROWS_WITH(analysis::compare_models(llama, one_layer, tokens), Contains("different shapes"));
  analysis::CompareOptions options;
  options.top_k = 0;
  CHECK_THROWS_WITH(analysis::compare_models(llama, llama, tokens, options), Contains("top_k must be >= 1"));
  options = {};
  options.image_heads = {{2, 0}};
  CHECK_THROWS_WITH(analysis::compare_models(llama, llama, tokens, options), Contains("image head (layer 2, head 0)"));
  options = {};
  options.sink_keys = {-1};
  CHECK_THROWS_WITH(analysis::compare_models(llama, llama, tokens, options), Contains("negative sink key -1"));
  // an error inside either forward stops both and comes out (no thread left waiting)
  CHECK_THROWS_WITH(analysis::compare_models(llama, llama, {1, 2, 300}), Contains("300"));
  const std::vector<int> too_long = compare_tokens(200, 300, 1);  // max_position_embeddings 128
  CHECK_THROWS_WITH(analysis::compare_models(llama, llama, too_long), Contains("seq_len"));
}
