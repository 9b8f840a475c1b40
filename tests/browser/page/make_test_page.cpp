// Writes the HTML report page that tests/browser/check_html_page.py loads in headless Chromium: 3 layers × 4 heads of
// seeded causal attention (layer 0: L = 24 with token strings; layer 1: a sink head and others; layer 2: L = 700, so
// downsampled), one head with a NaN entry, one with a learned sink, the routing of two Mixture-of-Experts layers,
// every report column, a run record, and a byte-level token (" girl" and two bytes of a three-byte character, which
// the axes show as \xe2\x80); OUT.html.expected holds the weight of layer 0 head 1 at query 5, key 3 (what the
// page's readout must show for #head-0-1:5,3).
// Usage: make_test_page OUT.html
#include <cmath>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/html_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/core/random.hpp"
#include "causal_attention.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_test_page OUT.html\n");
    return 2;
  }
  try {
    using namespace attnscope;
    using testing::causal_attention;
    Random random(13);
    analysis::HtmlReportOptions options;
    options.title = "attnscope browser test";
    options.source = "synthetic heads (tests/browser/page/make_test_page.cpp)";
    options.run = {{"model", "synthetic"}, {"tokens", "24"}, {"map", "softmax"}, {"sink_keys", "0"},
                   {"attnscope_version", "test"}};
    analysis::HtmlReportBuilder builder(options);
    std::vector<analysis::HeadInput> heads;
    for (int layer = 0; layer < 3; ++layer)
      for (int head = 0; head < 4; ++head) {
        const Index length = layer == 2 ? 700 : 24;
        analysis::HeadInput input;
        input.layer = layer;
        input.head = head;
        input.attention = causal_attention(random, length, layer == 1 ? 2.0 * head : 0.0);
        if (layer == 1 && head == 3) input.attention(5, 2) = std::nan("");
        if (layer == 0 && head == 2) {  // a learned-sink head: rows scaled to 1 − σ, σ = 0.3
          input.learned_sink = Vector<double>::Constant(length, 0.3);
          input.attention *= 0.7;
          builder.add_head(layer, head, input.attention, input.learned_sink);
        } else {
          builder.add_head(layer, head, input.attention);
        }
        heads.push_back(std::move(input));
      }
    std::vector<std::string> tokens;
    const char* words[] = {"<s>", "Once", " upon", " a", " time", ",", " there", " was", " a", " <little>", " girl\xe2\x80"};
    for (int i = 0; i < 24; ++i) tokens.push_back(words[i % 11]);
    builder.set_tokens(tokens);
    // two Mixture-of-Experts layers of 8 experts, 24 tokens top-2 (expert 3 the busiest, with 20 tokens)
    builder.add_routing(0, analysis::RoutingSummary{{2, 4, 6, 20, 5, 3, 4, 4}, 1.2, std::log(8.0)});
    builder.add_routing(1, analysis::RoutingSummary{{6, 6, 6, 6, 6, 6, 6, 6}, 2.0, std::log(8.0)});
    analysis::HeadReportOptions lenient;  // the NaN head is analysed anyway (as `report --lenient` does)
    lenient.lenient = true;
    // every column, so that the test sees the widest table the command writes (--columns all)
    builder.write(argv[1], analysis::compute_head_report(heads, analysis::all_report_columns(), {}, lenient));
    // the weight under the readout test's pointer (layer 0 head 1, query 5, key 3), for check_html_page.py
    std::FILE* expected = std::fopen((std::string(argv[1]) + ".expected").c_str(), "w");
    if (!expected) throw std::runtime_error("cannot write the .expected file");
    std::fprintf(expected, "%.17g\n", heads[1].attention(5, 3));
    std::fclose(expected);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "make_test_page: %s\n", error.what());
    return 1;
  }
}
