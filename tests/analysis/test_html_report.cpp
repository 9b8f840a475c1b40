// The HTML view of the report: downsampling (block maximum and mean) against hand-computed pixels and, for random
// shapes, against a direct recomputation; the sink/content split by hand; the page's elements, escaping and notes;
// base64 against RFC 4648's test vectors; every error. The page in a real browser: tests/browser/.
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/analysis/compare_html.hpp"
#include "attnscope/analysis/html_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/normalize/entropy.hpp"
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

// Independent check of a page's token label: undoes the escapes (\xHH, \n, \t, \r, \", \\) and returns the bytes.
std::string html_unescape_label(const std::string& label) {
  REQUIRE(label.size() >= 2);
  REQUIRE(label.front() == '"');
  REQUIRE(label.back() == '"');
  std::string bytes;
  for (std::size_t i = 1; i + 1 < label.size(); ++i) {
    if (label[i] != '\\') {
      bytes += label[i];
      continue;
    }
    const char kind = label[++i];
    if (kind == 'x') {
      bytes += static_cast<char>(std::stoi(label.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      bytes += kind == 'n' ? '\n' : kind == 't' ? '\t' : kind == 'r' ? '\r' : kind;
    }
  }
  return bytes;
}

// Means of runs of `block` values of a vector, NaN left out (the page's curve points), computed here apart.
std::vector<double> html_expected_points(const std::vector<double>& values, std::size_t block) {
  std::vector<double> points;
  for (std::size_t start = 0; start < values.size(); start += block) {
    double sum = 0;
    int count = 0;
    for (std::size_t i = start; i < values.size() && i < start + block; ++i)
      if (!std::isnan(values[i])) sum += values[i], ++count;
    points.push_back(count ? sum / count : std::nan(""));
  }
  return points;
}

void html_check_points(const nlohmann::json& shown, const std::vector<double>& expected, double tolerance) {
  REQUIRE(shown.size() == expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k) {
    if (std::isnan(expected[k])) {
      CHECK(shown[k].is_null());
      continue;
    }
    REQUIRE(shown[k].is_number());
    CHECK(std::abs(shown[k].get<double>() - expected[k]) <= tolerance);
  }
}

}  // namespace

TEST_CASE("HTML report: token labels keep valid UTF-8 and show every other byte as \\xHH", "[analysis][html]") {
  using attnscope::analysis::detail::html_token_label;
  CHECK(html_token_label("Once") == "\"Once\"");
  CHECK(html_token_label(" \xe2\x80") == "\" \\xe2\\x80\"");              // a byte-level token: 2 of 3 bytes of U+2019
  CHECK(html_token_label("\xe2\x80\x99s") == "\"\xe2\x80\x99s\"");          // U+2019 whole: kept
  CHECK(html_token_label("\xf0\x9f\x98\x80") == "\"\xf0\x9f\x98\x80\"");  // U+1F600: kept
  CHECK(html_token_label("\xf0\x9f\x98") == "\"\\xf0\\x9f\\x98\"");        // truncated 4-byte sequence
  CHECK(html_token_label("\xc0\xaf") == "\"\\xc0\\xaf\"");                  // overlong '/'
  CHECK(html_token_label("\xed\xa0\x80") == "\"\\xed\\xa0\\x80\"");        // a surrogate
  CHECK(html_token_label("\xf4\x90\x80\x80") == "\"\\xf4\\x90\\x80\\x80\"");  // above U+10FFFF
  CHECK(html_token_label("a\nb\t\"\\\x01\x7f") == "\"a\\nb\\t\\\"\\\\\\x01\\x7f\"");
  CHECK(html_token_label(std::string("\0", 1)) == "\"\\x00\"");
  // Random byte strings: the label is valid UTF-8 (nlohmann's strict dump accepts it) and unescapes to the bytes;
  // random valid UTF-8 (code points of every length) comes back unchanged between the quotes.
  attnscope::Random random(45);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const int length = static_cast<int>(random.uniform() * 12);
    for (int k = 0; k < length; ++k) bytes += static_cast<char>(static_cast<int>(random.uniform() * 256) & 255);
    const std::string label = html_token_label(bytes);
    CHECK_NOTHROW(nlohmann::json(label).dump());
    CHECK(html_unescape_label(label) == bytes);
    std::string text;
    for (int k = 0; k < 4; ++k) {
      const double kind = random.uniform();
      std::uint32_t cp = kind < 0.25   ? 0x20 + static_cast<std::uint32_t>(random.uniform() * 0x5f)
                         : kind < 0.5  ? 0x80 + static_cast<std::uint32_t>(random.uniform() * 0x780)
                         : kind < 0.75 ? 0x800 + static_cast<std::uint32_t>(random.uniform() * 0xf800)
                                       : 0x10000 + static_cast<std::uint32_t>(random.uniform() * 0x100000);
      if (cp == '"' || cp == '\\' || cp == 0x7f || (cp >= 0xd800 && cp < 0xe000)) cp = 'x';
      if (cp < 0x80) {
        text += static_cast<char>(cp);
      } else if (cp < 0x800) {
        text += static_cast<char>(0xc0 | (cp >> 6)), text += static_cast<char>(0x80 | (cp & 63));
      } else if (cp < 0x10000) {
        text += static_cast<char>(0xe0 | (cp >> 12)), text += static_cast<char>(0x80 | ((cp >> 6) & 63));
        text += static_cast<char>(0x80 | (cp & 63));
      } else {
        text += static_cast<char>(0xf0 | (cp >> 18)), text += static_cast<char>(0x80 | ((cp >> 12) & 63));
        text += static_cast<char>(0x80 | ((cp >> 6) & 63)), text += static_cast<char>(0x80 | (cp & 63));
      }
    }
    CHECK(html_token_label(text) == "\"" + text + "\"");
  }
}

TEST_CASE("HTML report: the curves along the sequence are run means of each row's sink mass and entropy",
          "[analysis][html]") {
  attnscope::Random random(31);
  HtmlReportOptions options;
  options.curve_max_points = 8;  // 37 rows: runs of 5, the last of 2
  options.sink_keys = {0, 1};
  HtmlReportBuilder builder(options);
  RowMatrix<double> plain = html_random_attention(random, 37, 37);
  plain(9, 3) = std::nan("");  // row 9 left out of its run (rows 5..9)
  builder.add_head(0, 0, plain);
  // a learned-sink head: rows over the real keys scaled to 1 − σ_i with σ_i drawn in [0, 0.9)
  RowMatrix<double> real = html_random_attention(random, 37, 37);
  attnscope::Vector<double> sigma(37);
  for (Index i = 0; i < 37; ++i) sigma(i) = 0.9 * random.uniform(), real.row(i) *= 1 - sigma(i);
  builder.add_head(0, 1, real, sigma);
  // one row: a decoding step (1 × 37) is one point at query position 36
  builder.add_head(0, 2, html_random_attention(random, 1, 37));
  const std::string page = builder.render(html_report_of({{0, 0}, {0, 1}, {0, 2}}));
  const nlohmann::json heads = html_page_data(page)["heads"];

  std::vector<double> sink(37), entropy(37), learned(37);
  for (Index i = 0; i < 37; ++i) {
    sink[i] = i == 9 ? std::nan("") : plain(i, 0) + plain(i, 1);
    entropy[i] = i == 9 ? std::nan("") : static_cast<double>(attnscope::row_entropy(plain.row(i)).coeff(0));
  }
  const nlohmann::json& first = heads[0]["curve"];
  CHECK(first["block"] == 5);
  CHECK(first["first"] == 0);
  CHECK(first["entropy_max"].get<double>() == Approx(std::log(37.0)));
  CHECK(!first.contains("learned"));
  html_check_points(first["sink"], html_expected_points(sink, 5), 5.1e-5);
  html_check_points(first["entropy"], html_expected_points(entropy, 5), 5.1e-4);

  // the learned-sink head: the entropy of the real keys' renormalised rows (learned_sink_row_entropies) and σ
  const auto entropies = attnscope::analysis::learned_sink_row_entropies(real, sigma);
  REQUIRE(entropies.real_keys.size() == 37);
  for (Index i = 0; i < 37; ++i)
    sink[i] = real(i, 0) + real(i, 1), entropy[i] = entropies.real_keys(i), learned[i] = sigma(i);
  const nlohmann::json& second = heads[1]["curve"];
  html_check_points(second["sink"], html_expected_points(sink, 5), 5.1e-5);
  html_check_points(second["entropy"], html_expected_points(entropy, 5), 5.1e-4);
  html_check_points(second["learned"], html_expected_points(learned, 5), 5.1e-5);

  const nlohmann::json& step = heads[2]["curve"];
  CHECK(step["first"] == 36);
  CHECK(step["sink"].size() == 1);

  // Causal rows: row 0 sees key 0 only, so at one row per point the first point is sink mass 1 and entropy 0.
  HtmlReportBuilder exact;
  exact.add_head(0, 0, html_random_attention(random, 300, 300));
  const nlohmann::json curve = html_page_data(exact.render(html_report_of({{0, 0}})))["heads"][0]["curve"];
  CHECK(curve["block"] == 2);  // 300 rows, at most 256 points by default
  CHECK(curve["sink"].size() == 150);
  // the grid shows each head's curves as a sparkline
  std::size_t sparklines = 0;
  for (std::size_t at = page.find("<svg class=\"spark\""); at != std::string::npos;
       at = page.find("<svg class=\"spark\"", at + 1))
    ++sparklines;
  CHECK(sparklines == 3);
  HtmlReportOptions one_row;
  one_row.curve_max_points = 300;
  HtmlReportBuilder rows(one_row);
  rows.add_head(0, 0, html_random_attention(random, 300, 300));
  const nlohmann::json row_curve = html_page_data(rows.render(html_report_of({{0, 0}})))["heads"][0]["curve"];
  CHECK(row_curve["sink"][0] == 1.0);
  CHECK(row_curve["entropy"][0] == 0.0);
}

TEST_CASE("HTML report: the header names the run, L and the options", "[analysis][html]") {
  attnscope::Random random(3);
  HtmlReportOptions options;
  options.run = {{"model", "gpt2-wp-mini"}, {"architecture", "gpt2"}, {"model_dtype", "float32"},
                 {"text_file", "war_and_peace.txt"}, {"max_tokens", "24"}, {"tokens", "24"},
                 {"token_ids", "1,2,3"}, {"attnscope_version", "0.1.0"}, {"command", "report"},
                 {"map", "softmax"}, {"sink_keys", "0"}};
  HtmlReportBuilder builder(options);
  builder.add_head(0, 0, html_random_attention(random, 24, 24));
  builder.add_head(0, 1, html_random_attention(random, 1, 24));
  const std::string page = builder.render(html_report_of({{0, 0}, {0, 1}}));
  CHECK(page.find("<summary id=\"run-what\">Run: model gpt2-wp-mini (gpt2, float32); text war_and_peace.txt; "
                  "max-tokens 24; L = 24; attnscope 0.1.0</summary>") != std::string::npos);
  CHECK(page.find("<p id=\"run-options\">Options: map softmax; sink_keys 0</p>") != std::string::npos);
  CHECK(page.find("<p id=\"summary\">2 heads: 1 of 1 queries &times; 24 keys, 1 of L = 24.") != std::string::npos);
}

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
  // No token can end the script element; the tokens come as the axes show them: quoted, bytes that are not UTF-8 as
  // \xHH escapes of those bytes (not a replacement character).
  CHECK(page.find("</script><b>x") == std::string::npos);
  const nlohmann::json data = html_page_data(page);
  REQUIRE(data["tokens"].size() == 5);
  CHECK(data["tokens"][1] == "\"</script><b>x\"");
  CHECK(data["tokens"][2] == "\"\\\"q\\\"\"");
  CHECK(data["tokens"][3] == "\"\\xff\\xfe\"");
  CHECK(page.find("\xef\xbf\xbd") == std::string::npos);
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

TEST_CASE("compare page: |B - A| on its own scale with a legend, tokens on the axes, a sortable table",
          "[analysis][html]") {
  using attnscope::analysis::HeadComparison;
  using attnscope::analysis::HeadComparisonImages;
  using attnscope::analysis::ModelComparison;
  attnscope::Random random(11);
  ModelComparison comparison;
  comparison.tokens = 12;
  comparison.top_k = 3;
  comparison.sink_keys = {0};
  for (int head = 0; head < 3; ++head) {
    HeadComparison h;
    h.head = head;
    h.js_keep = 0.1 * (3 - head);
    h.a.entropy = 1.0 + head, h.b.entropy = 1.5 + 0.25 * head;
    comparison.heads.push_back(h);
  }
  HeadComparisonImages images;
  images.head = 0;
  images.block = 2;  // 12 tokens in 6 × 6 pixels
  images.a = html_random_attention(random, 6, 6);
  images.b = html_random_attention(random, 6, 6);
  images.difference = (images.b - images.a).cwiseAbs();
  comparison.images.push_back(images);
  attnscope::analysis::CompareHtmlOptions options;
  options.tokens = {"<s>", " the", " \xe2\x80", "\x99", " end", "a", "b", "c", "d", "e", "f", "g"};
  options.image_scale = 4;  // a label every 3 pixels (12 CSS pixels)
  const std::string page = attnscope::analysis::render_comparison_html(comparison, options);
  const double largest = images.difference.maxCoeff();
  REQUIRE(largest > 0.05);

  // The three images: A and B on viridis of the weight, |B − A| on magma of difference / largest.
  std::vector<attnscope::testing::DecodedPng> panels;
  for (std::size_t at = page.find("<img class=\"big"); at != std::string::npos; at = page.find("<img class=\"big", at + 1)) {
    const std::size_t start = page.find("base64,", at) + 7;
    nlohmann::json fake = {{"heads", {{{"image", "data:image/png;base64," + page.substr(start, page.find('"', start) - start)}}}}};
    panels.push_back(html_head_image(fake, 0));
  }
  REQUIRE(panels.size() == 3);
  for (Index y = 0; y < 6; ++y)
    for (Index x = 0; x < 6; ++x) {
      CHECK(panels[0].pixels[y * 6 + x] == html_expected_index(images.a(y, x)));
      CHECK(panels[2].pixels[y * 6 + x] == html_expected_index(images.difference(y, x) / largest));
    }
  CHECK(panels[0].palette[63] == std::array<unsigned char, 3>{0xfd, 0xe7, 0x25});  // viridis's end
  CHECK(panels[2].palette[0] == std::array<unsigned char, 3>{0, 0, 4});            // magma's ends
  CHECK(panels[2].palette[63] == std::array<unsigned char, 3>{252, 253, 191});
  CHECK(page.find("<img class=\"big difference\"") != std::string::npos);
  // The legend of the difference: its maximum is the head's largest difference, the middle tick largest · (1/2)^2.
  const std::string legend = "<div class=\"legend\" id=\"legend-difference-0-0\" data-max=\"" +
                             attnscope::analysis::detail::html_format_value(largest) + "\"";
  REQUIRE(page.find(legend) != std::string::npos);
  const std::size_t legend_at = page.find(legend);
  CHECK(page.find("<span style=\"left:50%\">" + attnscope::analysis::detail::html_format_value(largest / 4) + "</span>",
                  legend_at) < page.find("</div>", legend_at));
  CHECK(page.find("<span style=\"left:100%\">" + attnscope::analysis::detail::html_format_value(largest) + "</span>",
                  legend_at) < page.find("</div>", legend_at));
  CHECK(page.find("id=\"legend-weights\" data-max=\"1\"") != std::string::npos);
  // Tokens on both axes, every 3rd pixel at scale 4: positions 0, 6 (pixels 0, 3, blocks of 2) with their tokens;
  // the byte token as \x escapes.
  CHECK(page.find("<div class=\"yaxis\"") != std::string::npos);
  CHECK(page.find("&quot; the&quot;") == std::string::npos);  // position 1 is inside pixel 0's block: not labelled
  CHECK(page.find(">0 &quot;&lt;s&gt;&quot;</span>") != std::string::npos);
  CHECK(page.find(">6 &quot;b&quot;</span>") != std::string::npos);
  options.image_scale = 12;  // one label per pixel
  const std::string large = attnscope::analysis::render_comparison_html(comparison, options);
  CHECK(large.find(">2 &quot; \\xe2\\x80&quot;</span>") != std::string::npos);
  // The table sorts (the report's script) by any column named in data-name.
  CHECK(page.find("<table id=\"stats\" class=\"sortable\">") != std::string::npos);
  CHECK(page.find("<th data-type=\"number\" data-name=\"entropy_b\">") != std::string::npos);
  CHECK(page.find(attnscope::analysis::detail::html_table_sort_script()) != std::string::npos);
  // Identical models: the difference is all zero, drawn at level 0, its legend 0 throughout.
  comparison.images[0].difference.setZero();
  const std::string same = attnscope::analysis::render_comparison_html(comparison, options);
  CHECK(same.find("id=\"legend-difference-0-0\" data-max=\"0\"") != std::string::npos);
}
