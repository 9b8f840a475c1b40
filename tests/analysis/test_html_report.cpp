// The HTML view of the report: downsampling (block maximum and mean) against hand-computed pixels and, for random
// shapes, against a direct recomputation; the sink/content split by hand; the page's elements, escaping and notes;
// base64 against RFC 4648's test vectors; every error. The page in a real browser: tests/browser/.
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/analysis/html_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/core/random.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/png_decode.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::analysis::DownsampleMethod;
using attnscope::analysis::HeadReport;
using attnscope::analysis::HtmlReportBuilder;
using attnscope::analysis::HtmlReportOptions;

// The JSON data block of a rendered page.
nlohmann::json html_page_data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"attnscope-data\">";
  const std::size_t start = page.find(open);
  REQUIRE(start != std::string::npos);
  const std::size_t stop = page.find("</script>", start);
  REQUIRE(stop != std::string::npos);
  return nlohmann::json::parse(page.substr(start + open.size(), stop - start - open.size()));
}

// The decoded large image of head `index` of a page.
attnscope::testing::DecodedPng html_head_image(const nlohmann::json& data, std::size_t index) {
  const std::string uri = data["heads"][index]["image"];
  const std::string prefix = "data:image/png;base64,";
  REQUIRE(uri.compare(0, prefix.size(), prefix) == 0);
  // Base64 decoding, written here independently of the encoder (RFC 4648 §4).
  std::string bytes;
  unsigned buffer = 0;
  int bits = 0;
  for (char c : uri.substr(prefix.size())) {
    if (c == '=') break;
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    buffer = (buffer << 6) | static_cast<unsigned>(alphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return attnscope::testing::decode_test_png(bytes);
}

// The colour index of an attention value with the default gamma 0.5 (the documented mapping round(a^0.5 · 63)).
int html_expected_index(double value) { return static_cast<int>(std::lround(std::sqrt(value) * 63)); }

// Causal softmax attention of seeded random scores.
RowMatrix<double> html_random_attention(attnscope::Random& random, Index rows, Index cols) {
  RowMatrix<double> a(rows, cols);
  for (Index i = 0; i < rows; ++i) {
    for (Index j = 0; j < cols; ++j) a(i, j) = j <= i + (cols - rows) ? std::exp(2 * random.normal()) : 0.0;
    a.row(i) /= a.row(i).sum();
  }
  return a;
}

HeadReport html_report_of(const std::vector<std::pair<int, int>>& heads) {
  HeadReport report;
  report.columns = {"sink_mass", "entropy", "my_column"};
  const auto standard = attnscope::analysis::default_report_columns();
  report.glossaries = {standard[0].glossary, standard[1].glossary, {}};
  double value = 0.125;
  for (const auto& [layer, head] : heads) {
    HeadReport::Row row;
    row.layer = layer;
    row.head = head;
    row.values = {value, 2 * value, std::nan("")};
    report.rows.push_back(row);
    value += 0.25;
  }
  return report;
}

}  // namespace

TEST_CASE("HTML report: base64 matches RFC 4648's test vectors", "[analysis][html]") {
  using attnscope::analysis::detail::html_base64;
  CHECK(html_base64("") == "");
  CHECK(html_base64("f") == "Zg==");
  CHECK(html_base64("fo") == "Zm8=");
  CHECK(html_base64("foo") == "Zm9v");
  CHECK(html_base64("foob") == "Zm9vYg==");
  CHECK(html_base64("fooba") == "Zm9vYmE=");
  CHECK(html_base64("foobar") == "Zm9vYmFy");
  CHECK(html_base64(std::string("\xff\xfe\x00", 3)) == "//4A");
}

TEST_CASE("HTML report: a small matrix is drawn pixel for pixel, one weight survives block maximum", "[analysis][html]") {
  // 3 × 3 causal attention, no downsampling: pixel = round(sqrt(a) · 63).
  RowMatrix<double> small(3, 3);
  small << 1, 0, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5;
  // 600 × 600 zeros with one 1: side 256 → blocks of 3 × 3 (⌈600/256⌉ = 3), a 200 × 200 image.
  RowMatrix<double> spike = RowMatrix<double>::Zero(600, 600);
  spike(301, 47) = 1;
  for (const DownsampleMethod method : {DownsampleMethod::block_max, DownsampleMethod::block_mean}) {
    HtmlReportOptions options;
    options.downsample = method;
    HtmlReportBuilder builder(options);
    builder.add_head(0, 0, small);
    builder.add_head(0, 1, spike);
    const std::string page = builder.render(html_report_of({{0, 0}, {0, 1}}));
    const nlohmann::json data = html_page_data(page);
    const auto image = html_head_image(data, 0);
    REQUIRE(image.width == 3);
    REQUIRE(image.height == 3);
    for (Index i = 0; i < 3; ++i)
      for (Index j = 0; j < 3; ++j) CHECK(image.pixels[i * 3 + j] == html_expected_index(small(i, j)));
    CHECK(data["heads"][0]["block"] == 1);

    const auto big = html_head_image(data, 1);
    REQUIRE(big.width == 200);
    REQUIRE(big.height == 200);
    CHECK(data["heads"][1]["block"] == 3);
    // Block (100, 15) holds entry (301, 47): the maximum keeps 1 (index 63), the mean is 1/9 → round(63/3) = 21.
    const int expected = method == DownsampleMethod::block_max ? 63 : 21;
    for (int y = 0; y < 200; ++y)
      for (int x = 0; x < 200; ++x)
        if (y == 100 && x == 15)
          CHECK(big.pixels[static_cast<std::size_t>(y) * 200 + x] == expected);
        else if (big.pixels[static_cast<std::size_t>(y) * 200 + x] != 0)
          FAIL("pixel " << y << "," << x << " is not 0");
    // The page says that one head of two is downsampled, by how much and how.
    CHECK(page.find("1 of 2 heads are larger than 256 pixels") != std::string::npos);
    CHECK(page.find("up to 3&times;3 entries per pixel") != std::string::npos);
    CHECK(page.find(method == DownsampleMethod::block_max ? "block maximum" : "block mean") != std::string::npos);
    CHECK(data["method"] == (method == DownsampleMethod::block_max ? "maximum" : "mean"));
  }
}

TEST_CASE("HTML report: random shapes give ceil-sized images whose pixels are the block maxima", "[analysis][html]") {
  attnscope::Random random(2026);
  for (int trial = 0; trial < 12; ++trial) {
    const Index cols = 1 + static_cast<Index>(random.below(300));
    const Index rows = trial % 3 == 0 ? 1 : 1 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols)));
    const int side = 8 + static_cast<int>(random.below(120));
    HtmlReportOptions options;
    options.image_max_side = side;
    options.thumbnail_max_side = 4;
    HtmlReportBuilder builder(options);
    const RowMatrix<double> a = html_random_attention(random, rows, cols);
    builder.add_head(1, 2, a);
    const nlohmann::json data = html_page_data(builder.render(html_report_of({{1, 2}})));
    const auto image = html_head_image(data, 0);
    const Index block = (std::max(rows, cols) + side - 1) / side;
    INFO(rows << "x" << cols << ", side " << side << ", block " << block);
    CHECK(data["heads"][0]["block"] == block);
    REQUIRE(image.width == (cols + block - 1) / block);
    REQUIRE(image.height == (rows + block - 1) / block);
    CHECK(std::max(image.width, image.height) <= side);
    for (int y = 0; y < image.height; ++y)
      for (int x = 0; x < image.width; ++x) {
        const double block_max =
            a.block(y * block, x * block, std::min(block, rows - y * block), std::min(block, cols - x * block))
                .maxCoeff();
        if (image.pixels[static_cast<std::size_t>(y) * image.width + x] != html_expected_index(block_max))
          FAIL("pixel " << y << "," << x);
      }
  }
}

TEST_CASE("HTML report: the sink/content split is the mean mass on the sink keys and on the rest", "[analysis][html]") {
  RowMatrix<double> a(3, 3);
  a << 1, 0, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5;
  {
    HtmlReportBuilder builder;  // sink keys {0}: (1 + 0.5 + 0.2)/3 and (0 + 0.5 + 0.8)/3
    builder.add_head(0, 0, a);
    const nlohmann::json head = html_page_data(builder.render(html_report_of({{0, 0}})))["heads"][0];
    CHECK(head["sink"].get<double>() == Approx(1.7 / 3));
    CHECK(head["content"].get<double>() == Approx(1.3 / 3));
  }
  {
    HtmlReportOptions options;
    options.sink_keys = {0, 1};  // (1 + 1 + 0.5)/3 and (0 + 0 + 0.5)/3
    HtmlReportBuilder builder(options);
    builder.add_head(0, 0, a);
    const nlohmann::json head = html_page_data(builder.render(html_report_of({{0, 0}})))["heads"][0];
    CHECK(head["sink"].get<double>() == Approx(2.5 / 3));
    CHECK(head["content"].get<double>() == Approx(0.5 / 3));
  }
  {
    // A non-finite entry: drawn with the reserved index 64, its row left out of the split, counted on the page.
    RowMatrix<double> bad = a;
    bad(2, 1) = std::nan("");
    HtmlReportBuilder builder;
    builder.add_head(0, 0, bad);
    const std::string page = builder.render(html_report_of({{0, 0}}));
    const nlohmann::json data = html_page_data(page);
    CHECK(data["heads"][0]["sink"].get<double>() == Approx(1.5 / 2));
    CHECK(data["heads"][0]["nonfinite"] == 1);
    CHECK(html_head_image(data, 0).pixels[7] == 64);
    CHECK(html_head_image(data, 0).palette.size() == 65);
    CHECK(html_head_image(data, 0).palette[64] == std::array<unsigned char, 3>{255, 0, 255});
    // The ends of the scale are viridis's ends (matplotlib: #440154 and #fde725).
    CHECK(html_head_image(data, 0).palette[0] == std::array<unsigned char, 3>{0x44, 0x01, 0x54});
    CHECK(html_head_image(data, 0).palette[63] == std::array<unsigned char, 3>{0xfd, 0xe7, 0x25});
    CHECK(page.find("1 non-finite entries") != std::string::npos);
  }
}

TEST_CASE("HTML report: the page has the grid, the table, the glossary and escaped tokens", "[analysis][html]") {
  attnscope::Random random(7);
  HtmlReportOptions options;
  options.title = "gpt <2> & co";
  HtmlReportBuilder builder(options);
  for (int layer = 0; layer < 2; ++layer)
    for (int head = 0; head < 3; ++head) builder.add_head(layer, head, html_random_attention(random, 5, 5));
  builder.set_tokens({"<s>", "</script><b>x", "\"q\"", "\xff\xfe", "end"});
  CHECK(builder.head_count() == 6);
  const std::string page = builder.render(html_report_of({{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}, {7, 7}}));
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("<title>gpt &lt;2&gt; &amp; co</title>") != std::string::npos);
  for (const char* id : {"id=\"grid\"", "id=\"detail\"", "id=\"stats\"", "id=\"glossary\"", "id=\"script-errors\""})
    CHECK(page.find(id) != std::string::npos);
  std::size_t cells = 0;
  for (std::size_t at = page.find("class=\"cell\""); at != std::string::npos; at = page.find("class=\"cell\"", at + 1))
    ++cells;
  CHECK(cells == 6);
  // 7 table rows; the row of head (7, 7) has no image (data-index -1).
  std::size_t rows = 0;
  for (std::size_t at = page.find("<tr data-index="); at != std::string::npos; at = page.find("<tr data-index=", at + 1))
    ++rows;
  CHECK(rows == 7);
  CHECK(page.find("<tr data-index=\"-1\"><td>7</td><td>7</td>") != std::string::npos);
  // Glossary entries: the known columns with their text, the unknown one said to have none.
  CHECK(page.find("<dt id=\"glossary-sink_mass\">") != std::string::npos);
  CHECK(page.find("<dt id=\"glossary-entropy\">") != std::string::npos);
  CHECK(page.find("<dt id=\"glossary-my_column\">my_column</dt><dd>No glossary entry") != std::string::npos);
  CHECK(page.find("<b>Typical:</b>") != std::string::npos);
  CHECK(page.find(attnscope::analysis::detail::html_escape(attnscope::analysis::default_report_columns()[1].glossary.measures)) !=
        std::string::npos);
  // No token can end the script element; invalid UTF-8 is replaced; the tokens come back intact otherwise.
  CHECK(page.find("</script><b>x") == std::string::npos);
  const nlohmann::json data = html_page_data(page);
  REQUIRE(data["tokens"].size() == 5);
  CHECK(data["tokens"][1] == "</script><b>x");
  CHECK(data["tokens"][2] == "\"q\"");
  CHECK(data["tokens"][3] == "\xef\xbf\xbd\xef\xbf\xbd");
  // Small matrices: no downsampling note, no range note.
  CHECK(page.find("downsample-note") == std::string::npos);
  CHECK(page.find("range-note") == std::string::npos);
  // NaN values are "-".
  CHECK(page.find("<td data-value=\"\">-</td>") != std::string::npos);
}

TEST_CASE("HTML report: write puts the page in a file", "[analysis][html]") {
  HtmlReportBuilder builder;
  builder.add_head(0, 0, RowMatrix<double>::Identity(4, 4));
  const std::string path = std::string(ATTNSCOPE_BINARY_DIR) + "/html_report_test_page.html";
  builder.write(path, html_report_of({{0, 0}}));
  const std::vector<unsigned char> bytes = attnscope::io::read_file(path);
  CHECK(std::string(bytes.begin(), bytes.end()) == builder.render(html_report_of({{0, 0}})));
  std::remove(path.c_str());
}

TEST_CASE("HTML report: bad options, heads and reports are invalid_argument, an unwritable file io_error",
          "[analysis][html][errors]") {
  using attnscope::testing::error_message;
  using Catch::Matchers::Contains;
  auto with = [](auto change) {
    HtmlReportOptions options;
    change(options);
    return error_message([&] { HtmlReportBuilder builder(options); });
  };
  CHECK_THAT(with([](HtmlReportOptions& o) { o.image_max_side = 7; }), Contains("HtmlReportBuilder: image_max_side = 7"));
  CHECK_THAT(with([](HtmlReportOptions& o) { o.thumbnail_max_side = 300; }), Contains("thumbnail_max_side = 300"));
  CHECK_THAT(with([](HtmlReportOptions& o) { o.color_gamma = 0; }), Contains("color_gamma = 0"));
  CHECK_THAT(with([](HtmlReportOptions& o) { o.color_gamma = std::nan(""); }), Contains("color_gamma = nan"));
  CHECK_THAT(with([](HtmlReportOptions& o) { o.sink_keys = {0, -1}; }), Contains("sink key -1 is negative"));

  HtmlReportBuilder builder;
  const RowMatrix<double> a = RowMatrix<double>::Identity(3, 3);
  CHECK_THAT(error_message([&] { builder.add_head(0, 0, RowMatrix<double>(0, 3)); }),
             Contains("add_head: layer 0 head 0: attention is 0x3"));
  CHECK_THAT(error_message([&] { builder.add_head(-1, 0, a); }), Contains("layer -1 head 0: indices must be >= 0"));
  CHECK_THAT(error_message([&] { builder.render(HeadReport{}); }), Contains("no heads were added"));
  builder.add_head(2, 1, a);
  CHECK_THAT(error_message([&] { builder.add_head(2, 1, a); }), Contains("layer 2 head 1 was already added"));
  HtmlReportOptions far_sink;
  far_sink.sink_keys = {3};
  CHECK_THAT(error_message([&] { HtmlReportBuilder(far_sink).add_head(0, 0, a); }),
             Contains("sink key 3 is outside the 3 keys"));
  HeadReport short_row = html_report_of({{2, 1}});
  short_row.rows[0].values.pop_back();
  CHECK_THAT(error_message([&] { builder.render(short_row); }),
             Contains("report row of layer 2 head 1 has 2 values for 3 columns"));
  CHECK_THAT(error_message<attnscope::io_error>([&] {
               builder.write("/nonexistent-folder/page.html", html_report_of({{2, 1}}));
             }),
             Contains("/nonexistent-folder/page.html"));
}

TEST_CASE("HTML report: every standard and analysis column carries a complete glossary entry, shown on the page",
          "[analysis][html]") {
  using namespace attnscope::analysis;
  const auto columns = all_report_columns({0, 1});
  REQUIRE(columns.size() == default_report_columns().size() + analysis_report_columns().size());
  for (const ReportColumn& column : columns) {
    INFO(column.name);
    CHECK(column.glossary.complete());
    CHECK(column.glossary.measures != column.glossary.high);
  }
  // The page takes each column's entry from the report built with the columns, in the report's column order.
  attnscope::Random random(2701);
  HeadInput head;
  head.attention = html_random_attention(random, 6, 6);
  const HeadReport report = compute_head_report({head}, columns);
  HtmlReportBuilder builder;
  builder.add_head(0, 0, head.attention);
  const std::string page = builder.render(report);
  std::size_t previous = 0;
  for (const ReportColumn& column : columns) {
    const std::size_t at = page.find("<dt id=\"glossary-" + column.name + "\">");
    REQUIRE(at != std::string::npos);
    CHECK(at > previous);
    previous = at;
    CHECK(page.find(detail::html_escape(column.glossary.typical), at) != std::string::npos);
  }
  // A column made without an entry says so, after its description.
  std::vector<ReportColumn> custom{{"my_ratio", "ratio of two things", [](const HeadInput&) { return 1.0; }}};
  const std::string custom_page = [&] {
    HtmlReportBuilder other;
    other.add_head(0, 0, head.attention);
    return other.render(compute_head_report({head}, custom));
  }();
  CHECK(custom_page.find("<dd>ratio of two things (no glossary entry for this column)</dd>") != std::string::npos);
}

TEST_CASE("HTML report: the readout's weights are IEEE binary16 of the pixel values", "[analysis][html]") {
  using attnscope::analysis::detail::html_half;
  // bit patterns of IEEE 754 binary16 (numpy.float16(x).view(numpy.uint16))
  CHECK(html_half(1.0) == 0x3c00);
  CHECK(html_half(0.5) == 0x3800);
  CHECK(html_half(0.1) == 0x2e66);
  CHECK(html_half(1.0 / 3.0) == 0x3555);
  CHECK(html_half(std::ldexp(1.0, -14)) == 0x0400);  // smallest normal
  CHECK(html_half(std::ldexp(1.0, -24)) == 0x0001);  // smallest subnormal
  CHECK(html_half(std::ldexp(1.0, -26)) == 0x0000);  // rounds to 0
  CHECK(html_half(1.0 - std::ldexp(1.0, -12)) == 0x3c00);  // ties to even: rounds up into the next binade
  CHECK(html_half(0.0) == 0);
  CHECK(html_half(std::nan("")) == 0x7e00);
  // decode as the page's script does and compare with the value: relative error <= 2^-11 for normal values
  attnscope::Random random(11);
  for (int i = 0; i < 2000; ++i) {
    const double value = std::exp(-12.0 * random.uniform());
    const unsigned half = html_half(value);
    const int exponent = (half >> 10) & 31, fraction = half & 1023;
    const double decoded = exponent == 0 ? fraction * std::ldexp(1.0, -24)
                                         : (1 + fraction / 1024.0) * std::ldexp(1.0, exponent - 15);
    // normal range: relative error <= 2^-11; subnormal range (below 2^-14): absolute error <= half a step, 2^-25
    CHECK(std::abs(decoded - value) <= (value >= std::ldexp(1.0, -14) ? std::ldexp(value, -11) : std::ldexp(1.0, -25)));
  }
  // the page carries one binary16 per pixel of each head's large image
  RowMatrix<double> attention = RowMatrix<double>::Constant(5, 5, 0.2);
  HtmlReportBuilder builder;
  builder.add_head(0, 0, attention);
  HeadReport report;
  const std::string page = builder.render(report);
  const std::size_t at = page.find("\"values\":\"");
  REQUIRE(at != std::string::npos);
  const std::string encoded = page.substr(at + 10, page.find('"', at + 10) - at - 10);
  CHECK(encoded.size() == (5 * 5 * 2 + 2) / 3 * 4);  // base64 of 50 bytes
  CHECK(encoded.substr(0, 4) == "ZjJm");  // 0.2 -> 0x3266, little-endian bytes 66 32, 66 ...
}
