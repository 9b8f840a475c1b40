// attnscope/analysis/html_report.hpp — the HTML view of the per-head report: one self-contained page (inline CSS and
// JavaScript, images as PNG data URIs; no network) with a grid of per-layer × per-head heatmaps, a larger view of one
// head with token strings on its axes (bytes that are not UTF-8 as \xHH) and its curves of sink mass and entropy along
// the sequence, the sortable per-head table with a glossary of its columns (each column's ReportColumn::glossary,
// carried by the HeadReport), the sink/content split of every head as a small bar, and a header with the run record
// (the model, the text, L, the options). This
// header holds the options, what the page keeps of each head and the page's sections; the page template (style
// sheet, script, escaping) is detail/html_page.hpp and the heatmap figures detail/html_heatmap.hpp. Not included by
// attnscope/analysis.hpp: include it where the page is written. Needs zlib and nlohmann-json (link attnscope::io).
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

#include "attnscope/analysis/detail/html_heatmap.hpp"
#include "attnscope/analysis/detail/html_page.hpp"
#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/routing.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/file.hpp"

namespace attnscope::analysis {

/// How a matrix larger than the image is reduced: every pixel stands for a k × k block of entries (k = ⌈max(rows,
/// cols) / max side⌉; edge blocks are partial) and shows the block's largest entry (block_max, the default: a single
/// sharp weight stays visible, as a sink or an induction head's one key) or the mean of its entries (block_mean:
/// the mass per area; diagonal blocks of causal attention average in the masked zeros).
enum class DownsampleMethod { block_max, block_mean };

/// Options of the HTML page.
struct HtmlReportOptions {
  std::string title = "attnscope report";
  std::string source;                // what was analysed (file or model), shown under the title; may be empty
  std::map<std::string, std::string> run = {};  // the run record (io/run_options.hpp), shown in the header; may be empty
  int image_max_side = 256;          // the large view of one head: matrices with a longer side are downsampled
  int thumbnail_max_side = 96;       // the grid's thumbnails (shown at 96 CSS pixels)
  DownsampleMethod downsample = DownsampleMethod::block_max;
  double color_gamma = 0.5;          // colour level round(clamp(a, 0, 1)^gamma · 63) of 64: 0.5 lifts small weights
  std::vector<Index> sink_keys = {0};  // keys counted as sink in the sink/content bar and the curves
  int curve_max_points = 256;        // the curves along the sequence: rows are averaged in runs to at most this many points
};

namespace detail {

/// One head as the page keeps it: the two images and the numbers shown beside them (no L × L data).
struct HtmlHead {
  int layer = 0, head = 0;
  Index rows = 0, cols = 0;
  Index block = 1, thumbnail_block = 1;  // downsampling factors of the large view and of the thumbnail
  HtmlImage image, thumbnail;
  double sink_mass = 0, content_mass = 0;  // mean over finite rows of Σ_{k ∈ sink} A(i,k) and of the rest
  double learned_sink = -1;                // mean share σ of a learned sink logit (gpt-oss); < 0: the head has none
  Index nonfinite_entries = 0, out_of_range_entries = 0, finite_rows = 0;
  // The curves along the sequence: point k is the mean over the rows k·curve_block .. (k+1)·curve_block − 1 of each
  // row's sink mass, its entropy and (heads with learned-sink shares) its share σ; NaN where no row of the run has it.
  Index curve_block = 1;
  std::vector<double> curve_sink, curve_entropy, curve_learned;
};

/// Means of consecutive runs of `block` values, NaN values left out; NaN for a run without a value.
inline std::vector<double> html_run_means(const std::vector<double>& values, Index block) {
  std::vector<double> means;
  for (std::size_t start = 0; start < values.size(); start += static_cast<std::size_t>(block)) {
    double sum = 0;
    Index count = 0;
    for (std::size_t i = start; i < std::min(values.size(), start + static_cast<std::size_t>(block)); ++i)
      if (!std::isnan(values[i])) sum += values[i], ++count;
    means.push_back(count ? sum / static_cast<double>(count) : std::nan(""));
  }
  return means;
}

/// A value for the page's data: rounded to `decimals` places (shorter JSON), null when not finite.
inline nlohmann::json html_rounded(double value, int decimals) {
  if (!std::isfinite(value)) return nullptr;
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
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
    if (options_.curve_max_points < 2 || options_.curve_max_points > 65536)
      attnscope::detail::throw_invalid_argument(fn, "curve_max_points = ", options_.curve_max_points,
                                                " is outside [2, 65536]");
  }

  /// Adds one head: its attention (rows = queries, columns = keys; any shape, e.g. L × L, 1 × L for a decoding step,
  /// Lq × Lk for cross-attention) is reduced to the large image, the thumbnail, the sink/content split and the curves
  /// along the sequence (each row's sink mass Σ_{k ∈ sink} A(i,k) and entropy −Σ_j A(i,j) ln A(i,j), averaged over runs
  /// of rows to at most curve_max_points points). Entries are clamped to [0, 1] for the colours (counted and reported
  /// on the page when outside); non-finite entries are drawn magenta, counted, and their rows left out of the split
  /// and the curves (as is the entropy of a row with a negative entry). Throws invalid_argument for an empty matrix,
  /// a negative layer or head, a head already added, or a sink key ≥ the number of columns. O(rows · cols).
  template <class Derived>
  void add_head(int layer, int head, const Eigen::MatrixBase<Derived>& attention) {
    add_head_rows(layer, head, attention, std::vector<double>());
  }

  /// Adds one head of a model with learned sink logits (gpt-oss): `attention` holds the weights over the real keys
  /// (rows sum to 1 − σ_i) and `sink_shares` the L_q shares σ_i. As add_head, and the head's bar shows the mean σ
  /// (purple) beside the sink keys' mass (orange) and the content mass (blue); the curves add σ_i, and the entropy
  /// curve is that of the real keys' renormalised rows, H_raw / (1 − σ_i) + ln(1 − σ_i) (learned_sink_row_entropies;
  /// left out where σ_i = 1). Throws invalid_argument as add_head, and for shares of another length or outside [0, 1].
  template <class Derived, class SinkDerived>
  void add_head(int layer, int head, const Eigen::MatrixBase<Derived>& attention,
                const Eigen::MatrixBase<SinkDerived>& sink_shares) {
    const char* fn = "HtmlReportBuilder::add_head";
    if (sink_shares.size() != attention.rows())
      attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " head ", head, ": ", sink_shares.size(),
                                                " learned-sink shares for ", attention.rows(), " rows");
    std::vector<double> shares(static_cast<std::size_t>(sink_shares.size()));
    double total = 0;
    for (Index i = 0; i < sink_shares.size(); ++i) {
      const double sigma = static_cast<double>(sink_shares(i));
      if (!(sigma >= 0 && sigma <= 1))
        attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " head ", head, ": learned-sink share ", sigma,
                                                  " at row ", i, " is outside [0, 1]");
      shares[static_cast<std::size_t>(i)] = sigma;
      total += sigma;
    }
    add_head_rows(layer, head, attention, shares);
    heads_.back().learned_sink = sink_shares.size() ? total / static_cast<double>(sink_shares.size()) : 0.0;
  }

 private:
  template <class Derived>
  void add_head_rows(int layer, int head, const Eigen::MatrixBase<Derived>& attention,
                     const std::vector<double>& shares) {
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
    entry.image = detail::html_heatmap(attention, entry.block, options_.downsample == DownsampleMethod::block_max,
                                       options_.color_gamma, true);
    entry.thumbnail = detail::html_heatmap(attention, entry.thumbnail_block, options_.downsample == DownsampleMethod::block_max, options_.color_gamma);
    double sink_total = 0, content_total = 0;
    const double not_a_number = std::nan("");
    std::vector<double> row_sink(static_cast<std::size_t>(attention.rows()), not_a_number);
    std::vector<double> row_entropies(static_cast<std::size_t>(attention.rows()), not_a_number);
    for (Index i = 0; i < attention.rows(); ++i) {
      double row_sum = 0, sink = 0, plogp = 0;
      bool finite = true, negative = false;
      for (Index j = 0; j < attention.cols(); ++j) {
        const double value = static_cast<double>(attention(i, j));
        if (!std::isfinite(value)) {
          finite = false;
          ++entry.nonfinite_entries;
          continue;
        }
        if (value < 0 || value > 1) ++entry.out_of_range_entries;
        negative = negative || value < 0;
        if (value > 0) plogp += value * std::log(value);  // Shannon entropy −Σ p ln p, 0 ln 0 = 0
        row_sum += value;
      }
      if (!finite) continue;
      for (Index key : options_.sink_keys) sink += static_cast<double>(attention(i, key));
      sink_total += sink;
      content_total += row_sum - sink;
      ++entry.finite_rows;
      row_sink[static_cast<std::size_t>(i)] = sink;
      if (negative) continue;
      if (shares.empty()) {
        row_entropies[static_cast<std::size_t>(i)] = -plogp;
      } else if (shares[static_cast<std::size_t>(i)] < 1) {  // the renormalised row a/(1−σ)
        row_entropies[static_cast<std::size_t>(i)] = real_key_entropy(-plogp, shares[static_cast<std::size_t>(i)]);
      }
    }
    entry.curve_block = (attention.rows() + options_.curve_max_points - 1) / options_.curve_max_points;
    entry.curve_sink = detail::html_run_means(row_sink, entry.curve_block);
    entry.curve_entropy = detail::html_run_means(row_entropies, entry.curve_block);
    if (!shares.empty()) entry.curve_learned = detail::html_run_means(shares, entry.curve_block);
    if (entry.finite_rows > 0) {
      entry.sink_mass = sink_total / static_cast<double>(entry.finite_rows);
      entry.content_mass = content_total / static_cast<double>(entry.finite_rows);
    }
    heads_.push_back(std::move(entry));
  }

 public:
  /// Adds the routing of one Mixture-of-Experts layer (summarize_routing): the page's "Experts" section shows the
  /// layer's load as one bar per expert (height ∝ tokens) with its mean routing entropy against ln E. Throws
  /// invalid_argument for a negative layer, a layer already added, or a summary without experts.
  void add_routing(int layer, RoutingSummary summary) {
    const char* fn = "HtmlReportBuilder::add_routing";
    if (layer < 0) attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " is negative");
    if (summary.load.empty()) attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " has no experts");
    for (const auto& existing : routing_)
      if (existing.first == layer) attnscope::detail::throw_invalid_argument(fn, "layer ", layer, " was already added");
    routing_.emplace_back(layer, std::move(summary));
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
         << detail::html_escape(options_.title) << "</title>\n<style>" << detail::html_page_style() << "</style></head>\n<body>\n"
         << "<div id=\"script-errors\" hidden></div>\n<h1>" << detail::html_escape(options_.title) << "</h1>\n";
    if (!options_.source.empty()) page << "<p class=\"source\">" << detail::html_escape(options_.source) << "</p>\n";
    page << detail::html_run_record(options_.run);
    page << summary() << grid() << experts() << "<section id=\"detail\" hidden></section>\n"
         << table(report) << glossary(report) << "<script type=\"application/json\" id=\"attnscope-data\">"
         << detail::html_script_json(data()) << "</script>\n<script>" << detail::html_page_script() << "</script>\n<script>"
         << detail::html_table_sort_script() << "</script>\n</body></html>\n";
    return page.str();
  }

  /// Writes render(report) to `path`, replacing it whole or not at all (io::write_file; `listener` hears of the
  /// temporary file). Throws io_error when the file cannot be written.
  void write(const std::string& path, const HeadReport& report, io::TemporaryFileListener* listener = nullptr) const {
    io::write_file(path, render(report), listener);
  }

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
    // the shapes of the heads: L × L for a sequence of L tokens, Lq × Lk for decoding steps or cross-attention
    std::map<std::pair<Index, Index>, std::size_t> shapes;
    for (const auto& h : heads_) ++shapes[{h.rows, h.cols}];
    out << "<p id=\"summary\">" << heads_.size() << " heads" << (shapes.size() > 1 ? ":" : "");
    bool first_shape = true;
    for (const auto& [shape, count] : shapes) {
      out << (first_shape ? " " : ", ");
      first_shape = false;
      if (shapes.size() > 1) out << count << ' ';
      out << "of ";
      if (shape.first == shape.second) out << "L = " << shape.first;
      else out << shape.first << " queries &times; " << shape.second << " keys";
    }
    out << ". Colour: viridis of a<sup>" << options_.color_gamma
        << "</sup> for attention weight a in [0, 1] (dark = 0, yellow = 1); magenta = not finite. The bar under each "
           "head is its mean mass on the sink key"
        << (options_.sink_keys.size() == 1 ? "" : "s") << " (";
    for (std::size_t k = 0; k < options_.sink_keys.size(); ++k) out << (k ? ", " : "") << options_.sink_keys[k];
    out << ", orange) against the content keys (blue)";
    if (std::any_of(heads_.begin(), heads_.end(), [](const detail::HtmlHead& h) { return h.learned_sink >= 0; }))
      out << "; purple: the learned sink logit's mean share of the row";
    out << ".</p>\n";
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
            << data_uri(h.thumbnail) << "\"><span class=\"cell-label\">h" << h.head << "</span>" << bar(h) << sparkline(h)
            << "</button>";
      }
      out << "</div>\n";
    }
    out << "</section>\n";
    return out.str();
  }

  // The routing of the Mixture-of-Experts layers: per layer one bar per expert, height ∝ its tokens.
  std::string experts() const {
    if (routing_.empty()) return {};
    std::vector<std::pair<int, RoutingSummary>> layers = routing_;
    std::sort(layers.begin(), layers.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::ostringstream out;
    out.precision(3);
    out << "<section id=\"experts\"><h2>Experts</h2><p class=\"hint\">Tokens per expert in each Mixture-of-Experts "
           "layer (hover a bar for its count); the mean entropy of the router's softmax over all experts against ln E "
           "(a router that cannot tell the experts apart).</p>\n";
    for (const auto& [layer, summary] : layers) {
      Index largest = 1;
      for (const Index load : summary.load) largest = std::max(largest, load);
      out << "<div class=\"experts-layer\" data-layer=\"" << layer << "\"><span class=\"layer-label\">layer " << layer
          << "</span><span class=\"loads\" style=\"display:inline-flex;align-items:flex-end;height:40px;gap:1px\">";
      for (std::size_t e = 0; e < summary.load.size(); ++e) {
        const double percent = 100.0 * static_cast<double>(summary.load[e]) / static_cast<double>(largest);
        out << "<span class=\"load\" title=\"expert " << e << ": " << summary.load[e] << " tokens\" style=\"display:"
            << "inline-block;width:6px;height:" << percent << "%;min-height:1px;background:#3b6fb6\"></span>";
      }
      out << "</span> <span class=\"note\">mean routing entropy " << detail::html_format_value(summary.mean_entropy)
          << " of ln E = " << detail::html_format_value(summary.max_entropy) << " nats</span></div>\n";
    }
    out << "</section>\n";
    return out.str();
  }

  // The grid's small curves along the sequence: sink mass (orange, 0..1) and entropy (blue, 0..ln keys) of at most 48
  // points (the head's curve points averaged in runs), in a 96 × 16 box.
  static std::string sparkline(const detail::HtmlHead& h) {
    const Index run = (static_cast<Index>(h.curve_sink.size()) + 47) / 48;
    const std::vector<double> sink = detail::html_run_means(h.curve_sink, run);
    const std::vector<double> entropy = detail::html_run_means(h.curve_entropy, run);
    const double top = h.cols > 1 ? std::log(static_cast<double>(h.cols)) : 1.0;
    const auto path = [&](const std::vector<double>& values, double scale) {
      std::ostringstream d;
      d.precision(3);
      bool pen = false;
      for (std::size_t k = 0; k < values.size(); ++k) {
        if (std::isnan(values[k])) {
          pen = false;
          continue;
        }
        const double x = values.size() > 1 ? 96.0 * static_cast<double>(k) / static_cast<double>(values.size() - 1) : 48;
        const double y = 15.5 - 15.0 * std::min(1.0, std::max(0.0, values[k] / scale));
        d << (pen ? "L" : "M") << std::round(x * 10) / 10 << ' ' << std::round(y * 10) / 10;
        pen = true;
      }
      return d.str();
    };
    return "<svg class=\"spark\" viewBox=\"0 0 96 16\" preserveAspectRatio=\"none\" aria-label=\"sink mass and "
           "entropy along the sequence\"><path class=\"spark-sink\" fill=\"none\" stroke=\"#f28e2b\" d=\"" +
           path(sink, 1.0) + "\"></path><path class=\"spark-entropy\" fill=\"none\" stroke=\"#3b6fb6\" d=\"" +
           path(entropy, top) + "\"></path></svg>";
  }

  static std::string bar(const detail::HtmlHead& h) {
    if (h.learned_sink >= 0 && h.finite_rows > 0) {  // three parts: σ, the sink keys, the content keys (sum 1)
      const double learned = 100.0 * std::min(1.0, h.learned_sink);
      const double keys = std::min(100.0, learned + 100.0 * std::max(0.0, h.sink_mass));
      std::ostringstream out;
      out.precision(4);
      out << "<span class=\"bar\" title=\"learned sink " << detail::html_format_value(h.learned_sink) << ", sink "
          << detail::html_format_value(h.sink_mass) << ", content " << detail::html_format_value(h.content_mass)
          << "\" style=\"background:linear-gradient(to right,#8c6bb1 0% " << learned << "%,#f28e2b " << learned << "% "
          << keys << "%,#3b6fb6 " << keys << "% 100%)\"></span>";
      return out.str();
    }
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
        << "<div class=\"scroll\"><table id=\"stats\" class=\"sortable\"><thead><tr><th data-type=\"number\" data-name=\"layer\">"
           "layer</th><th data-type=\"number\" data-name=\"head\">head</th><th data-type=\"number\" "
           "data-name=\"sink_content\" title=\"mean mass on the sink keys / on the content keys\">sink | content</th>";
    for (std::size_t c = 0; c < report.columns.size(); ++c) {
      const std::string& name = report.columns[c];
      const std::string shown =
          c < report.short_names.size() && !report.short_names[c].empty() ? report.short_names[c] : name;
      out << "<th data-type=\"number\" data-name=\"" << detail::html_escape(name) << "\" title=\""
          << detail::html_escape(name) << "\"><a href=\"#glossary-"
          << detail::html_escape(name) << "\">" << detail::html_escape(shown) << "</a></th>";
    }
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
    for (std::size_t c = 0; c < report.columns.size(); ++c) {
      const std::string& name = report.columns[c];
      out << "<dt id=\"glossary-" << detail::html_escape(name) << "\">" << detail::html_escape(name) << "</dt><dd>";
      const ColumnGlossary g = c < report.glossaries.size() ? report.glossaries[c] : ColumnGlossary{};
      if (g.measures.empty()) {  // a column made without an entry
        const std::string description = c < report.descriptions.size() ? report.descriptions[c] : std::string();
        out << (description.empty() ? std::string("No glossary entry for this column.")
                                    : detail::html_escape(description) + " (no glossary entry for this column)")
            << "</dd>\n";
        continue;
      }
      out << detail::html_escape(g.measures);
      if (!g.high.empty()) out << "<br><b>High:</b> " << detail::html_escape(g.high);
      if (!g.low.empty()) out << "<br><b>Low:</b> " << detail::html_escape(g.low);
      if (!g.typical.empty()) out << "<br><b>Typical:</b> " << detail::html_escape(g.typical);
      out << "</dd>\n";
    }
    out << "</dl></section>\n";
    return out.str();
  }

  const detail::HtmlHead* find(int layer, int head) const {
    for (const auto& h : heads_)
      if (h.layer == layer && h.head == head) return &h;
    return nullptr;
  }

  // The curves of one head for the page's script: sink mass and σ to 4 decimals, entropy to 3 (nats).
  nlohmann::json curve(const detail::HtmlHead& h) const {
    const auto rounded = [](const std::vector<double>& values, int decimals) {
      nlohmann::json out = nlohmann::json::array();
      for (double v : values) out.push_back(detail::html_rounded(v, decimals));
      return out;
    };
    nlohmann::json out = {{"block", h.curve_block},
                          {"first", h.rows <= h.cols ? h.cols - h.rows : 0},
                          {"entropy_max", h.cols > 1 ? std::log(static_cast<double>(h.cols)) : 0.0},
                          {"sink", rounded(h.curve_sink, 4)},
                          {"entropy", rounded(h.curve_entropy, 3)}};
    if (!h.curve_learned.empty()) out["learned"] = rounded(h.curve_learned, 4);
    return out;
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
                       {"values", detail::html_base64(h.image.values)},
                       {"sink", h.finite_rows ? nlohmann::json(h.sink_mass) : nlohmann::json()},
                       {"content", h.finite_rows ? nlohmann::json(h.content_mass) : nlohmann::json()},
                       {"nonfinite", h.nonfinite_entries},
                       {"curve", curve(h)}});
    // the tokens as the axes show them: quoted, bytes that are not UTF-8 as \xHH (detail::html_token_label)
    std::vector<std::string> labels;
    labels.reserve(tokens_.size());
    for (const std::string& token : tokens_) labels.push_back(detail::html_token_label(token));
    return {{"heads", heads},
            {"tokens", labels},
            {"method", options_.downsample == DownsampleMethod::block_max ? "maximum" : "mean"}};
  }

  HtmlReportOptions options_;
  std::vector<detail::HtmlHead> heads_;
  std::vector<std::pair<int, RoutingSummary>> routing_;
  std::vector<std::string> tokens_;
};

}  // namespace attnscope::analysis
