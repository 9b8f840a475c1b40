// Writes the `compare --html` page that tests/browser/check_compare_page.py loads in headless Chromium: a comparison
// of 2 layers × 3 heads on 20 tokens (one a byte-level token, two bytes of a three-byte character), with the images
// of the two most changed heads (seeded causal attention of "model A" and a perturbed "model B", block 1). OUT.html.expected
// holds a JSON object: the largest |B − A| of each image head ("layer-head": value, what the legend's maximum must
// show) and the js_keep of every row in the table's order.
// Usage: make_compare_page OUT.html
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/analysis/compare_html.hpp"
#include "attnscope/core/random.hpp"
#include "causal_attention.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_compare_page OUT.html\n");
    return 2;
  }
  try {
    using namespace attnscope;
    using testing::causal_attention;
    const Index length = 20;
    Random random(29);
    analysis::ModelComparison comparison;
    comparison.tokens = length;
    comparison.top_k = 5;
    comparison.sink_keys = {0};
    nlohmann::json expected = {{"largest", nlohmann::json::object()}, {"js_keep", nlohmann::json::array()}};
    for (int layer = 0; layer < 2; ++layer)
      for (int head = 0; head < 3; ++head) {
        analysis::HeadComparison h;
        h.layer = layer;
        h.head = head;
        h.js_keep = 0.02 + 0.1 * random.uniform();
        h.js_drop = h.js_keep * 1.1;
        h.top_k_overlap = 1 - h.js_keep;
        h.a.entropy = 1 + random.uniform(), h.b.entropy = 1 + random.uniform();
        h.a.sink_mass = random.uniform(), h.b.sink_mass = random.uniform();
        comparison.heads.push_back(h);
      }
    std::sort(comparison.heads.begin(), comparison.heads.end(),
              [](const analysis::HeadComparison& x, const analysis::HeadComparison& y) { return x.js_keep > y.js_keep; });
    for (const auto& h : comparison.heads) expected["js_keep"].push_back(h.js_keep);
    for (int rank = 0; rank < 2; ++rank) {
      analysis::HeadComparisonImages images;
      images.layer = comparison.heads[static_cast<std::size_t>(rank)].layer;
      images.head = comparison.heads[static_cast<std::size_t>(rank)].head;
      images.a = causal_attention(random, length, 0.0);
      images.b = images.a;
      for (Index i = 1; i < length; ++i) {  // B: A's rows moved towards the previous token by 0.4 (rank 1: 0.1)
        const double shift = rank == 0 ? 0.4 : 0.1;
        images.b.row(i) *= 1 - shift;
        images.b(i, i - 1) += shift;
      }
      images.difference = (images.b - images.a).cwiseAbs();
      expected["largest"][std::to_string(images.layer) + "-" + std::to_string(images.head)] =
          images.difference.maxCoeff();
      comparison.images.push_back(images);
    }
    analysis::CompareHtmlOptions options;
    options.title = "attnscope compare browser test";
    options.model_a = "model A (synthetic)";
    options.model_b = "model B (A shifted towards the previous token)";
    options.image_scale = 12;  // a label for every token
    options.run = {{"a_model", "a.gguf"}, {"b_model", "b.gguf"}, {"tokens", std::to_string(length)}, {"top_k", "5"}};
    const char* words[] = {"<s>", "It", " was", " \xe2\x80", "\x9c", "Well", ",", " Prince", " so", " Genoa"};
    for (Index i = 0; i < length; ++i) options.tokens.push_back(words[i % 10]);
    analysis::write_comparison_html(argv[1], comparison, options);
    std::FILE* out = std::fopen((std::string(argv[1]) + ".expected").c_str(), "w");
    if (!out) throw std::runtime_error("cannot write the .expected file");
    std::fprintf(out, "%s\n", expected.dump().c_str());
    std::fclose(out);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "make_compare_page: %s\n", error.what());
    return 1;
  }
}
