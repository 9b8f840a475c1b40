// attnscope/analysis/html_report.hpp — the HTML view of the per-head report: one self-contained page (inline CSS and
// JavaScript, images as PNG data URIs; no network) with a grid of per-layer × per-head heatmaps, a larger view of one
// head with token strings on its axes, the sortable per-head table with a glossary of its columns, and the
// sink/content split of every head as a small bar. Not included by attnscope/analysis.hpp: include it where the page
// is written. Needs zlib and nlohmann-json (link attnscope::io).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "attnscope/analysis/head_report.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/png.hpp"

namespace attnscope::analysis {

/// How a matrix larger than the image is reduced: every pixel stands for a k × k block of entries (k = ⌈max(rows,
/// cols) / max side⌉; edge blocks are partial) and shows the block's largest entry (block_max, the default: a single
/// sharp weight stays visible, as a sink or an induction head's one key) or the mean of its entries (block_mean:
/// the mass per area; diagonal blocks of causal attention average in the masked zeros).
enum class DownsampleMethod { block_max, block_mean };

/// One column's entry in the page's glossary: what it measures, what high and low values mean, typical values on
/// real models (naming the models).
struct ColumnGlossary {
  std::string measures, high, low, typical;
};

/// The glossary of the report's standard and analysis columns (default_report_columns(), analysis_report_columns()),
/// keyed by column name. Typical values: min-max over the heads of `attnscope report stories260K.bin` (llama2.c, 5 layers
/// × 8 heads, BOS then 255 greedy tokens) and `attnscope report --model gpt2-wp-mini --text-file war_and_peace.txt
/// --max-tokens 1024` (GPT-2 layout, 4 layers × 3 heads), measured 2026-12-01.
inline std::map<std::string, ColumnGlossary> default_column_glossary() {
  return {
      {"sink_mass",
       {"Mean attention weight on key 0 over the query rows (the attention sink of Xiao et al. 2023, StreamingLLM).",
        "The head parks its mass on the first token (a sink head) and carries content with the rest; large pretrained "
        "LMs typically have such heads.",
        "The head spreads its mass over content keys.",
        "stories260K: 0.006-0.10 (median 0.03); gpt2-wp-mini: 0.004-0.014. Neither small model has a strong sink."}},
      {"entropy",
       {"Mean Shannon entropy of the attention rows, in nats (a uniform row over n keys has ln n).",
        "Diffuse attention: many keys share the weight (causal rows over L keys: at most about ln L - 1 on average).",
        "Sharp attention: few keys take the weight (0 = one key per row).",
        "stories260K (L = 256): 1.07-3.09 (median 1.7); gpt2-wp-mini (L = 1024): 4.0-5.7 (median 5.1)."}},
      {"max_attention",
       {"Largest attention weight of the head.",
        "Some query puts (almost) all its mass on one key.",
        "No query concentrates on a single key.",
        "Over rows that see at least two keys: stories260K (L = 256): 0.84-1.0 (median 1.0); gpt2-wp-mini "
        "(L = 1024): 0.56-0.98 (median 0.73)."}},
      {"max_scaled_logit",
       {"Largest scaled score q.k/sqrt(d) over the visible entries (needs the scores).",
        "Large logits: the softmax is sharp and its gradient sensitive (towards logit explosion).",
        "Small logits: soft, near-uniform attention.",
        "stories260K: 11-49 (median 25); gpt2-wp-mini: 3.7-17 (median 11)."}},
      {"mean_jacobian_norm",
       {"Mean over rows of the exact spectral norm ||diag p - p p^T||_2 of the softmax Jacobian at the row (0 to 1/2).",
        "Towards 0.5: rows split between two keys, where the softmax output is most sensitive to its logits.",
        "Near 0: rows that are one-hot (saturated) or spread over many keys (1/n for n equal weights).",
        "stories260K: 0.18-0.26; gpt2-wp-mini: 0.022-0.080."}},
      {"max_jacobian_norm",
       {"Largest row value of ||diag p - p p^T||_2 (at most 1/2).",
        "Some row is split between two keys (0.5 at most).",
        "Every row is one-hot or diffuse.",
        "stories260K: 0.40-0.50; gpt2-wp-mini: 0.35-0.50 (early rows with two visible keys come close to 0.5)."}},
      {"content_entropy",
       {"Mean entropy of the content composition: each row without the sink key, renormalised (nats).",
        "The content part of the rows is diffuse.",
        "The content part picks few keys, even when a sink hides it in the plain entropy.",
        "stories260K: 1.08-3.08; gpt2-wp-mini: 4.0-5.7 (close to the entropy when the sink is weak)."}},
      {"sink_entropy_share",
       {"Share of the rows' entropy carried by the sink channel (the sink-versus-content split and its weighting), "
        "summed over rows.",
        "The entropy mostly says how much weight goes to the sink, not how content is spread.",
        "The entropy is about content.",
        "stories260K: 0.006-0.058; gpt2-wp-mini: 0.003-0.010."}},
      {"causal_stable_rank",
       {"Stable rank ||S||_F^2 / ||S||_2^2 of the causal part of the scaled-score matrix (needs the scores).",
        "The logits use many directions (varied, e.g. local, patterns).",
        "The logits are close to rank one (the same pattern for every query).",
        "stories260K: 2.1-5.5 (median 3.8); gpt2-wp-mini: 1.2-1.9."}},
      {"separability_at_critical_n",
       {"Mean fraction N_s/N of the top-N keys the head separates at its critical N (needs scores and values).",
        "The head keeps its selected keys apart in its output.",
        "The selected keys blur together.",
        "'-' for every head of both models as measured: the KS test over one head's rows tells true from expected "
        "distances at every N up to L/4, so no critical N exists (the reason is printed under the table)."}},
      {"gradient_sensitivity",
       {"g(T = 1, eps = 1e-3): mean finite-difference change of the softmax per unit change of the logits (needs scores "
        "and values).",
        "Small logit changes move the attention a lot.",
        "The attention is stable (saturated or diffuse).",
        "stories260K: 0.023-0.033; gpt2-wp-mini: 0.007-0.012."}},
  };
}

/// Options of the HTML page.
struct HtmlReportOptions {
  std::string title = "attnscope report";
  std::string source;                // what was analysed (file or model), shown under the title; may be empty
  int image_max_side = 256;          // the large view of one head: matrices with a longer side are downsampled
  int thumbnail_max_side = 48;       // the grid's thumbnails
  DownsampleMethod downsample = DownsampleMethod::block_max;
  double color_gamma = 0.5;          // colour level round(clamp(a, 0, 1)^gamma · 63) of 64: 0.5 lifts small weights
  std::vector<Index> sink_keys = {0};  // keys counted as sink in the sink/content bar
  std::map<std::string, ColumnGlossary> glossary = default_column_glossary();  // by column name
};

namespace detail {

/// Colour levels of the heatmaps: palette indices 0..63 for values, 64 for non-finite entries. 64 levels of viridis are
/// hard to tell from 256 and make the PNGs of real attention about a third smaller (stories260K: 0.47 MB against
/// 0.73 MB for 40 heads of 256 × 256).
inline constexpr int html_color_levels = 64;

/// The palette: viridis (matplotlib, van der Walt & Smith 2015) by linear interpolation between five of its colours,
/// then magenta for non-finite entries.
inline const std::vector<io::PngColor>& html_heatmap_palette() {
  static const std::vector<io::PngColor> palette = [] {
    const double stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    std::vector<io::PngColor> colors;
    for (int i = 0; i < html_color_levels; ++i) {
      const double t = 4.0 * i / (html_color_levels - 1);
      const int segment = std::min(3, static_cast<int>(t));
      const double f = t - segment;
      io::PngColor color{};
      for (int c = 0; c < 3; ++c)
        color[c] = static_cast<unsigned char>(std::lround(stops[segment][c] * (1 - f) + stops[segment + 1][c] * f));
      colors.push_back(color);
    }
    colors.push_back({255, 0, 255});
    return colors;
  }();
  return palette;
}

inline std::string html_base64(const std::string& bytes) {  // RFC 4648 §4, with padding
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    unsigned value = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) value |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) value |= static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[(value >> 18) & 63];
    out += alphabet[(value >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(value >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[value & 63] : '=';
  }
  return out;
}

inline std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// JSON for a <script> element: invalid UTF-8 replaced, "</" written as "<\/" so that no string ends the element.
inline std::string html_script_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += '\\';
  }
  return out;
}

inline std::string html_format_value(double value) {
  if (!std::isfinite(value)) return "-";
  std::ostringstream stream;
  stream.precision(4);
  stream << value;
  return stream.str();
}

/// A heatmap of a matrix reduced by blocks of `block` × `block` entries.
struct HtmlImage {
  int width = 0, height = 0;
  std::string png;  // the encoded image
};

template <class Derived>
HtmlImage html_heatmap(const Eigen::MatrixBase<Derived>& matrix, Index block, DownsampleMethod method, double gamma) {
  HtmlImage image;
  image.height = static_cast<int>((matrix.rows() + block - 1) / block);
  image.width = static_cast<int>((matrix.cols() + block - 1) / block);
  std::vector<unsigned char> pixels(static_cast<std::size_t>(image.width) * image.height);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) {
      double reduced = 0.0;
      bool finite = true;
      Index count = 0;
      for (Index i = y * block; i < std::min<Index>(matrix.rows(), (y + 1) * block); ++i)
        for (Index j = x * block; j < std::min<Index>(matrix.cols(), (x + 1) * block); ++j) {
          const double value = static_cast<double>(matrix(i, j));
          if (!std::isfinite(value)) finite = false;
          const double clamped = std::min(1.0, std::max(0.0, value));
          reduced = method == DownsampleMethod::block_max ? std::max(reduced, clamped) : reduced + clamped;
          ++count;
        }
      if (method == DownsampleMethod::block_mean) reduced /= static_cast<double>(count);
      pixels[static_cast<std::size_t>(y) * image.width + x] =
          finite ? static_cast<unsigned char>(std::lround(std::pow(reduced, gamma) * (html_color_levels - 1)))
                 : static_cast<unsigned char>(html_color_levels);
    }
  image.png = io::encode_png_indexed(image.width, image.height, pixels, html_heatmap_palette());
  return image;
}

/// One head as the page keeps it: the two images and the numbers shown beside them (no L × L data).
struct HtmlHead {
  int layer = 0, head = 0;
  Index rows = 0, cols = 0;
  Index block = 1, thumbnail_block = 1;  // downsampling factors of the large view and of the thumbnail
  HtmlImage image, thumbnail;
  double sink_mass = 0, content_mass = 0;  // mean over finite rows of Σ_{k ∈ sink} A(i,k) and of the rest
  Index nonfinite_entries = 0, out_of_range_entries = 0, finite_rows = 0;
};

inline Index html_block(Index rows, Index cols, int max_side) {
  const Index longest = std::max(rows, cols);
  return (longest + max_side - 1) / max_side;
}

}  // namespace detail

/// Builds the HTML page of a report. Feed it each head's attention with add_head (one at a time: each matrix is
/// reduced to two small PNG images and its sink/content split at once, so a streaming caller never holds more than one
/// L × L matrix), optionally the token strings, then render() or write() it with the HeadReport of the same heads.
class HtmlReportBuilder {
 public:
  /// Throws invalid_argument for an image side < 8 or > 4096, a thumbnail side < 4 or larger than the image side,
  /// gamma outside (0, 4], or a negative sink key.
  explicit HtmlReportBuilder(HtmlReportOptions options = {}) : options_(std::move(options)) {
    const char* fn = "HtmlReportBuilder";
    if (options_.image_max_side < 8 || options_.image_max_side > 4096)
      attnscope::detail::throw_invalid_argument(fn, "image_max_side = ", options_.image_max_side,
                                                " is outside [8, 4096]");
    if (options_.thumbnail_max_side < 4 || options_.thumbnail_max_side > options_.image_max_side)
      attnscope::detail::throw_invalid_argument(fn, "thumbnail_max_side = ", options_.thumbnail_max_side,
                                                " is outside [4, image_max_side = ", options_.image_max_side, "]");
    if (!(options_.color_gamma > 0 && options_.color_gamma <= 4))
      attnscope::detail::throw_invalid_argument(fn, "color_gamma = ", options_.color_gamma, " is outside (0, 4]");
    for (Index key : options_.sink_keys)
      if (key < 0) attnscope::detail::throw_invalid_argument(fn, "sink key ", key, " is negative");
  }

  /// Adds one head: its attention (rows = queries, columns = keys; any shape, e.g. L × L, 1 × L for a decoding step,
  /// Lq × Lk for cross-attention) is reduced to the large image, the thumbnail and the sink/content split. Entries are
  /// clamped to [0, 1] for the colours (counted and reported on the page when outside); non-finite entries are drawn
  /// magenta, counted, and their rows left out of the split. Throws invalid_argument for an empty matrix, a negative
  /// layer or head, a head already added, or a sink key ≥ the number of columns. O(rows · cols).
  template <class Derived>
  void add_head(int layer, int head, const Eigen::MatrixBase<Derived>& attention) {
    const char* fn = "HtmlReportBuilder::add_head";
    if (layer < 0 || head < 0)
      attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " head ", head, ": indices must be >= 0");
    if (attention.rows() == 0 || attention.cols() == 0)
      attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " head ", head, ": attention is ",
                                                attention.rows(), "x", attention.cols(), ", expected non-empty");
    for (const detail::HtmlHead& existing : heads_)
      if (existing.layer == layer && existing.head == head)
        attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " head ", head, " was already added");
    for (Index key : options_.sink_keys)
      if (key >= attention.cols())
        attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " head ", head, ": sink key ", key,
                                                  " is outside the ", attention.cols(), " keys");
    detail::HtmlHead entry;
    entry.layer = layer;
    entry.head = head;
    entry.rows = attention.rows();
    entry.cols = attention.cols();
    entry.block = detail::html_block(entry.rows, entry.cols, options_.image_max_side);
    entry.thumbnail_block = detail::html_block(entry.rows, entry.cols, options_.thumbnail_max_side);
    entry.image = detail::html_heatmap(attention, entry.block, options_.downsample, options_.color_gamma);
    entry.thumbnail = detail::html_heatmap(attention, entry.thumbnail_block, options_.downsample, options_.color_gamma);
    double sink_total = 0, content_total = 0;
    for (Index i = 0; i < attention.rows(); ++i) {
      double row_sum = 0, sink = 0;
      bool finite = true;
      for (Index j = 0; j < attention.cols(); ++j) {
        const double value = static_cast<double>(attention(i, j));
        if (!std::isfinite(value)) {
          finite = false;
          ++entry.nonfinite_entries;
          continue;
        }
        if (value < 0 || value > 1) ++entry.out_of_range_entries;
        row_sum += value;
      }
      if (!finite) continue;
      for (Index key : options_.sink_keys) sink += static_cast<double>(attention(i, key));
      sink_total += sink;
      content_total += row_sum - sink;
      ++entry.finite_rows;
    }
    if (entry.finite_rows > 0) {
      entry.sink_mass = sink_total / static_cast<double>(entry.finite_rows);
      entry.content_mass = content_total / static_cast<double>(entry.finite_rows);
    }
    heads_.push_back(std::move(entry));
  }

  /// Token strings of the sequence: key j is labelled tokens[j]; query row i of an Lq × Lk head (Lq ≤ Lk, e.g. a
  /// decoding step) is position Lk − Lq + i. Heads with more keys than tokens are labelled by position only.
  void set_tokens(std::vector<std::string> tokens) { tokens_ = std::move(tokens); }

  /// The number of heads added so far.
  std::size_t head_count() const { return heads_.size(); }

  /// The page. Rows of `report` are matched to heads by (layer, head); a head without a row shows no statistics, a
  /// row without a head shows no image. Throws invalid_argument when no head was added and the report is empty, or
  /// a report row has a different number of values than the report has columns.
  std::string render(const HeadReport& report) const {
    const char* fn = "HtmlReportBuilder::render";
    if (heads_.empty() && report.rows.empty())
      attnscope::detail::throw_invalid_argument(fn, "no heads were added and the report has no rows");
    for (const auto& row : report.rows)
      if (row.values.size() != report.columns.size())
        attnscope::detail::throw_invalid_argument(fn, "report row of layer ", row.layer, " head ", row.head, " has ",
                                                  row.values.size(), " values for ", report.columns.size(),
                                                  " columns");
    std::ostringstream page;
    page << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>"
         << detail::html_escape(options_.title) << "</title>\n<style>" << style() << "</style></head>\n<body>\n"
         << "<div id=\"script-errors\" hidden></div>\n<h1>" << detail::html_escape(options_.title) << "</h1>\n";
    if (!options_.source.empty()) page << "<p class=\"source\">" << detail::html_escape(options_.source) << "</p>\n";
    page << summary() << grid() << "<section id=\"detail\" hidden></section>\n"
         << table(report) << glossary(report) << "<script type=\"application/json\" id=\"attnscope-data\">"
         << detail::html_script_json(data()) << "</script>\n<script>" << script() << "</script>\n</body></html>\n";
    return page.str();
  }

  /// Writes render(report) to `path`. Throws io_error when the file cannot be written.
  void write(const std::string& path, const HeadReport& report) const { io::write_file(path, render(report)); }

 private:
  static std::string data_uri(const detail::HtmlImage& image) {
    return "data:image/png;base64," + detail::html_base64(image.png);
  }

  std::string summary() const {
    std::ostringstream out;
    Index largest_block = 1, downsampled = 0, nonfinite = 0, out_of_range = 0;
    for (const auto& h : heads_) {
      largest_block = std::max(largest_block, h.block);
      downsampled += h.block > 1;
      nonfinite += h.nonfinite_entries;
      out_of_range += h.out_of_range_entries;
    }
    const bool max = options_.downsample == DownsampleMethod::block_max;
    out << "<p id=\"summary\">" << heads_.size() << " heads. Colour: viridis of a<sup>" << options_.color_gamma
        << "</sup> for attention weight a in [0, 1] (dark = 0, yellow = 1); magenta = not finite. The bar under each "
           "head is its mean mass on the sink key"
        << (options_.sink_keys.size() == 1 ? "" : "s") << " (";
    for (std::size_t k = 0; k < options_.sink_keys.size(); ++k) out << (k ? ", " : "") << options_.sink_keys[k];
    out << ", orange) against the content keys (blue).</p>\n";
    if (downsampled)
      out << "<p id=\"downsample-note\" class=\"note\">" << downsampled << " of " << heads_.size()
          << " heads are larger than " << options_.image_max_side << " pixels and are shown downsampled (up to "
          << largest_block << "&times;" << largest_block << " entries per pixel, block "
          << (max ? "maximum: every pixel shows the largest weight of its block" : "mean: every pixel shows the mean "
                                                                                    "weight of its block")
          << "). Thumbnails are downsampled to at most " << options_.thumbnail_max_side << " pixels the same way.</p>\n";
    if (nonfinite || out_of_range)
      out << "<p id=\"range-note\" class=\"note warn\">" << nonfinite << " non-finite entries (magenta, rows left out "
          << "of the sink bar) and " << out_of_range << " entries outside [0, 1] (clamped for the colours).</p>\n";
    return out.str();
  }

  std::string grid() const {
    std::vector<int> layers;
    for (const auto& h : heads_)
      if (std::find(layers.begin(), layers.end(), h.layer) == layers.end()) layers.push_back(h.layer);
    std::sort(layers.begin(), layers.end());
    std::ostringstream out;
    out << "<section id=\"grid\"><h2>Heads</h2><p class=\"hint\">Click a head for its matrix.</p>\n";
    for (int layer : layers) {
      std::vector<std::size_t> members;
      for (std::size_t i = 0; i < heads_.size(); ++i)
        if (heads_[i].layer == layer) members.push_back(i);
      std::sort(members.begin(), members.end(),
                [this](std::size_t a, std::size_t b) { return heads_[a].head < heads_[b].head; });
      out << "<div class=\"layer\"><span class=\"layer-label\">layer " << layer << "</span>";
      for (std::size_t i : members) {
        const auto& h = heads_[i];
        out << "<button class=\"cell\" data-index=\"" << i << "\" title=\"layer " << h.layer << " head " << h.head
            << "\"><img class=\"thumb\" alt=\"layer " << h.layer << " head " << h.head << "\" src=\""
            << data_uri(h.thumbnail) << "\"><span class=\"cell-label\">h" << h.head << "</span>" << bar(h)
            << "</button>";
      }
      out << "</div>\n";
    }
    out << "</section>\n";
    return out.str();
  }

  static std::string bar(const detail::HtmlHead& h) {
    const double total = h.sink_mass + h.content_mass;
    if (h.finite_rows == 0 || !(total > 0)) return "<span class=\"bar empty\" title=\"no finite rows\"></span>";
    const double sink_percent = 100.0 * std::min(1.0, std::max(0.0, h.sink_mass / total));
    std::ostringstream out;
    out.precision(3);
    out << "<span class=\"bar\" title=\"sink " << detail::html_format_value(h.sink_mass) << ", content "
        << detail::html_format_value(h.content_mass) << "\"><span class=\"sink\" style=\"width:" << sink_percent
        << "%\"></span></span>";
    return out.str();
  }

  std::string table(const HeadReport& report) const {
    std::ostringstream out;
    out << "<section id=\"statistics\"><h2>Per-head statistics</h2><p class=\"hint\">Click a column heading to sort; "
           "click a row for the head's matrix. \"-\" = not available (see the glossary).</p>\n"
        << "<div class=\"scroll\"><table id=\"stats\"><thead><tr><th data-type=\"number\">layer</th><th data-type=\"number\">head</th>"
        << "<th data-type=\"number\" title=\"mean mass on the sink keys / on the content keys\">sink | content</th>";
    for (const auto& name : report.columns)
      out << "<th data-type=\"number\"><a href=\"#glossary-" << detail::html_escape(name) << "\">"
          << detail::html_escape(name) << "</a></th>";
    out << "</tr></thead><tbody>\n";
    for (const auto& row : report.rows) {
      const detail::HtmlHead* h = find(row.layer, row.head);
      out << "<tr data-index=\"" << (h ? static_cast<long>(h - heads_.data()) : -1L) << "\"><td>" << row.layer
          << "</td><td>" << row.head << "</td>";
      if (h && h->finite_rows > 0)
        out << "<td data-value=\"" << h->sink_mass << "\">" << bar(*h) << " " << detail::html_format_value(h->sink_mass)
            << "</td>";
      else
        out << "<td data-value=\"\">-</td>";
      for (double value : row.values)
        out << "<td data-value=\"" << (std::isfinite(value) ? detail::html_format_value(value) : std::string()) << "\">"
            << detail::html_format_value(value) << "</td>";
      out << "</tr>\n";
    }
    out << "</tbody></table></div></section>\n";
    return out.str();
  }

  std::string glossary(const HeadReport& report) const {
    std::ostringstream out;
    out << "<section id=\"glossary\"><h2>Glossary</h2><dl>\n";
    out << "<dt id=\"glossary-sink-content\">sink | content</dt><dd>Mean mass per query row on the sink keys (orange) "
           "and on every other key (blue), over rows without non-finite entries. A sink head (mass parked on the first "
           "token) shows a long orange bar. stories260K: sink 0.006-0.10; gpt2-wp-mini: below 0.014.</dd>\n";
    for (const auto& name : report.columns) {
      out << "<dt id=\"glossary-" << detail::html_escape(name) << "\">" << detail::html_escape(name) << "</dt><dd>";
      const auto entry = options_.glossary.find(name);
      if (entry == options_.glossary.end()) {
        out << "No glossary entry for this column.</dd>\n";
        continue;
      }
      const ColumnGlossary& g = entry->second;
      out << detail::html_escape(g.measures) << "<br><b>High:</b> " << detail::html_escape(g.high)
          << "<br><b>Low:</b> " << detail::html_escape(g.low) << "<br><b>Typical:</b> " << detail::html_escape(g.typical)
          << "</dd>\n";
    }
    out << "</dl></section>\n";
    return out.str();
  }

  const detail::HtmlHead* find(int layer, int head) const {
    for (const auto& h : heads_)
      if (h.layer == layer && h.head == head) return &h;
    return nullptr;
  }

  nlohmann::json data() const {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : heads_)
      heads.push_back({{"layer", h.layer},
                       {"head", h.head},
                       {"rows", h.rows},
                       {"cols", h.cols},
                       {"block", h.block},
                       {"width", h.image.width},
                       {"height", h.image.height},
                       {"image", data_uri(h.image)},
                       {"sink", h.finite_rows ? nlohmann::json(h.sink_mass) : nlohmann::json()},
                       {"content", h.finite_rows ? nlohmann::json(h.content_mass) : nlohmann::json()},
                       {"nonfinite", h.nonfinite_entries}});
    return {{"heads", heads},
            {"tokens", tokens_},
            {"method", options_.downsample == DownsampleMethod::block_max ? "maximum" : "mean"}};
  }

  static const char* style() {
    return R"(body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}h1{margin-bottom:0}
.source{color:#555;margin-top:0}.note{background:#f3f3f3;padding:.4em .6em}.warn{background:#fde8e8}
.hint{color:#666;font-size:12px}.layer{display:flex;align-items:center;gap:4px;margin:2px 0}
.layer-label{width:5em;font-size:12px;color:#444}.cell{border:1px solid #ccc;background:#fff;padding:2px;cursor:pointer;
display:flex;flex-direction:column;align-items:center}.cell:hover,.cell.selected{border-color:#d33}
.thumb{width:48px;height:48px;object-fit:contain;image-rendering:pixelated;background:#440154}
.cell-label{font-size:10px;color:#555}.bar{display:inline-block;width:48px;height:5px;background:#3b6fb6;
vertical-align:middle}.bar .sink{display:block;height:100%;background:#f28e2b}.bar.empty{background:#ccc}
#detail{border:1px solid #ccc;padding:.5em 1em;margin:1em 0}#detail .plot{display:inline-grid;
grid-template-columns:max-content max-content;align-items:start}.yaxis,.xaxis{position:relative;font:10px monospace;color:#333}
.yaxis span{position:absolute;right:4px;white-space:pre}.xaxis span{position:absolute;top:2px;white-space:pre;
transform:rotate(60deg);transform-origin:0 0}.big{image-rendering:pixelated;display:block;border:1px solid #999}
#readout{font:12px monospace;min-height:1.4em}table{border-collapse:collapse;margin:.5em 0}
.scroll{overflow-x:auto}th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;font-size:12px;white-space:nowrap}th{background:#eee;cursor:pointer}
tbody tr:hover{background:#fff6d5;cursor:pointer}dt{font-weight:bold;margin-top:.6em}dd{margin-left:1.5em}
#script-errors{background:#fdd;color:#900;padding:.5em})";
  }

  static const char* script() {
    return R"((function(){
var errors=document.getElementById('script-errors');
window.onerror=function(message){errors.hidden=false;errors.textContent+='script error: '+message+'\n';};
var data=JSON.parse(document.getElementById('attnscope-data').textContent);
var detail=document.getElementById('detail');
function esc(s){return String(s).replace(/[&<>"']/g,function(c){return '&#'+c.charCodeAt(0)+';';});}
function label(pos,keys){var t=data.tokens;var s=String(pos);if(t.length>=keys&&pos<t.length){s+=' '+JSON.stringify(t[pos]);}
return s;}
function show(index){
var h=data.heads[index];if(!h){return;}
document.querySelectorAll('.cell.selected').forEach(function(c){c.classList.remove('selected');});
var cell=document.querySelector('.cell[data-index="'+index+'"]');if(cell){cell.classList.add('selected');}
var scale=Math.max(1,Math.floor(512/Math.max(h.width,h.height)));
var w=h.width*scale,hh=h.height*scale,offset=h.rows<=h.cols?h.cols-h.rows:0;
var html='<h2>layer '+h.layer+' head '+h.head+'</h2><p class="note" id="detail-note">'+h.rows+' queries &times; '+h.cols+
' keys';
if(h.block>1){html+=', downsampled '+h.block+'&times;: each pixel is the block '+data.method+' of '+h.block+'&times;'+
h.block+' entries';}
html+='. Sink mass '+(h.sink===null?'-':h.sink.toPrecision(3))+', content mass '+
(h.content===null?'-':h.content.toPrecision(3))+(h.nonfinite?', '+h.nonfinite+' non-finite entries':'')+
'.</p><div id="readout">move over the matrix: query &rarr; key</div><div class="plot"><div class="yaxis" style="width:'+
'11em;height:'+hh+'px">';
var step=Math.max(1,Math.ceil(h.height/Math.max(1,Math.floor(hh/12))));
for(var y=0;y<h.height;y+=step){html+='<span style="top:'+(y*scale+scale/2-6)+'px">'+esc(label(offset+y*h.block,h.cols))+
'</span>';}
html+='</div><img class="big" id="big" alt="layer '+h.layer+' head '+h.head+'" src="'+h.image+'" width="'+w+
'" height="'+hh+'"><div></div><div class="xaxis" style="width:'+w+'px;height:8em">';
step=Math.max(1,Math.ceil(h.width/Math.max(1,Math.floor(w/12))));
for(var x=0;x<h.width;x+=step){html+='<span style="left:'+(x*scale+scale/2)+'px">'+esc(label(x*h.block,h.cols))+
'</span>';}
html+='</div></div>';
detail.innerHTML=html;detail.hidden=false;
var big=document.getElementById('big'),readout=document.getElementById('readout');
big.addEventListener('mousemove',function(e){var r=big.getBoundingClientRect();
var x=Math.min(h.width-1,Math.max(0,Math.floor((e.clientX-r.left)/scale)));
var y=Math.min(h.height-1,Math.max(0,Math.floor((e.clientY-r.top)/scale)));
var q0=offset+y*h.block,k0=x*h.block,b=h.block>1?'+'+(h.block-1):'';
readout.textContent='query '+label(q0,h.cols)+b+'  \u2192  key '+label(k0,h.cols)+b;});
if(location.hash!=='#head-'+h.layer+'-'+h.head){history.replaceState(null,'','#head-'+h.layer+'-'+h.head);}
}
document.querySelectorAll('.cell').forEach(function(c){c.addEventListener('click',function(){
show(+c.dataset.index);detail.scrollIntoView();});});
document.querySelectorAll('#stats tbody tr').forEach(function(r){r.addEventListener('click',function(){
if(+r.dataset.index>=0){show(+r.dataset.index);detail.scrollIntoView();}});});
var table=document.getElementById('stats');
table.querySelectorAll('th').forEach(function(th,col){th.addEventListener('click',function(e){
if(e.target.tagName==='A'){return;}
var asc=th.dataset.sort!=='asc';table.querySelectorAll('th').forEach(function(o){delete o.dataset.sort;});
th.dataset.sort=asc?'asc':'desc';var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
function key(r){var c=r.cells[col],v=c.dataset.value!==undefined?c.dataset.value:c.textContent;
return v===''?NaN:parseFloat(v);}
rows.sort(function(a,b){var x=key(a),y=key(b);if(isNaN(x)){return isNaN(y)?0:1;}if(isNaN(y)){return -1;}
return asc?x-y:y-x;});rows.forEach(function(r){body.appendChild(r);});});});
var m=/^#head-(\d+)-(\d+)$/.exec(location.hash);
if(m){data.heads.forEach(function(h,i){if(h.layer===+m[1]&&h.head===+m[2]){show(i);}});}
document.body.setAttribute('data-ready','1');
})();)";
  }

  HtmlReportOptions options_;
  std::vector<detail::HtmlHead> heads_;
  std::vector<std::string> tokens_;
};

}  // namespace attnscope::analysis
