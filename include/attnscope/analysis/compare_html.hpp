// attnscope/analysis/compare_html.hpp — the HTML page of `attnscope compare`: one self-contained page (inline CSS,
// images as PNG data URIs; no script, no network) with the per-head table of analysis::ModelComparison in its order
// (most changed first) and, for the heads whose images the comparison holds, model A's and model B's attention side
// by side with their absolute difference. Built from the HTML report's pieces (style sheet, escaping, number format,
// the heatmap palette and PNG encoding of detail/html_page.hpp and detail/html_heatmap.hpp). Not included by
// attnscope/analysis.hpp. Needs zlib (link attnscope::io).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>

#include "attnscope/analysis/compare.hpp"
#include "attnscope/analysis/detail/html_heatmap.hpp"
#include "attnscope/analysis/detail/html_page.hpp"
#include "attnscope/io/file.hpp"

namespace attnscope::analysis {

/// Options of the comparison page.
struct CompareHtmlOptions {
  std::string title = "attnscope compare";
  std::string model_a = "A", model_b = "B";  // what the two models are (paths or names), shown in the captions
  std::map<std::string, std::string> run = {};  // the run record (io/run_options.hpp), shown in the header; may be empty
  double color_gamma = 0.5;  // colour level round(clamp(v, 0, 1)^gamma · 63) of 64, as the report's heatmaps
  int image_scale = 2;       // CSS pixels per image pixel
};

/// The page as a string.
inline std::string render_comparison_html(const ModelComparison& comparison, const CompareHtmlOptions& options = {}) {
  const auto value = [](double v) { return detail::html_format_value(v); };
  const auto uri = [&](const RowMatrix<double>& image) {
    return "data:image/png;base64," + detail::html_base64(detail::html_heatmap(image, 1, true, options.color_gamma).png);
  };
  std::ostringstream page;
  page << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" << detail::html_escape(options.title)
       << "</title>\n<style>" << detail::html_page_style()
       << "\n.pair{display:flex;gap:1em;align-items:flex-start;flex-wrap:wrap}figure{margin:0}"
          "figcaption{font-size:12px;color:#444}</style></head>\n<body>\n<h1>"
       << detail::html_escape(options.title) << "</h1>\n<p class=\"source\">A: " << detail::html_escape(options.model_a)
       << "<br>B: " << detail::html_escape(options.model_b) << "</p>\n" << detail::html_run_record(options.run)
       << "<p class=\"note\">" << comparison.tokens
       << " tokens. Heads ordered by js_keep, the mean Jensen&ndash;Shannon divergence (nats) between the two "
          "models' attention rows; js_drop compares the content compositions (sink keys dropped, rest renormalised); "
          "top-k overlap with k = "
       << comparison.top_k << "; &Delta; = B &minus; A of the per-row means; sink keys:";
  for (Index s : comparison.sink_keys) page << ' ' << s;
  page << ".</p>\n";
  for (const HeadComparisonImages& images : comparison.images) {
    const double largest = images.difference.size() > 0 ? images.difference.maxCoeff() : 0.0;
    const int width = static_cast<int>(images.a.cols()) * options.image_scale;
    page << "<section id=\"head-" << images.layer << '-' << images.head << "\"><h3>layer " << images.layer << " head "
         << images.head << "</h3>\n<div class=\"pair\">";
    const std::pair<const RowMatrix<double>*, std::string> panels[] = {
        {&images.a, "A: " + options.model_a},
        {&images.b, "B: " + options.model_b},
        {&images.difference, "|B &minus; A| (largest " + value(largest) + ")"}};
    for (const auto& [matrix, caption] : panels)
      page << "<figure><img class=\"big\" style=\"width:" << width << "px\" alt=\"layer " << images.layer << " head "
           << images.head << "\" src=\"" << uri(*matrix) << "\"><figcaption>"
           << (matrix == &images.difference ? caption : detail::html_escape(caption)) << "</figcaption></figure>";
    page << "</div><p class=\"hint\">query rows down, keys across";
    if (images.block > 1) page << "; each pixel is the maximum of a " << images.block << "&times;" << images.block << " block";
    page << ".</p></section>\n";
  }
  page << "<div class=\"scroll\"><table id=\"stats\"><thead><tr><th>rank</th><th>layer</th><th>head</th><th>js_keep</th>"
          "<th>js_drop</th><th>top-k overlap</th><th>&Delta; sink mass</th><th>&Delta; entropy</th>"
          "<th>&Delta; entropy (sink part)</th><th>&Delta; entropy (content part)</th><th>&Delta; max weight</th>"
          "<th>&Delta; mean &#8214;J&#8214;&#8322;</th><th>sink mass A</th><th>sink mass B</th><th>entropy A</th>"
          "<th>entropy B</th></tr></thead>\n<tbody>\n";
  for (std::size_t r = 0; r < comparison.heads.size(); ++r) {
    const HeadComparison& h = comparison.heads[r];
    const HeadAttentionSummary d = h.delta();
    page << "<tr><td>" << r + 1 << "</td><td>" << h.layer << "</td><td>" << h.head << "</td>";
    for (double v : {h.js_keep, h.js_drop, h.top_k_overlap, d.sink_mass, d.entropy, d.entropy_sink, d.entropy_content,
                     d.max_weight, d.jacobian_norm, h.a.sink_mass, h.b.sink_mass, h.a.entropy, h.b.entropy})
      page << "<td>" << value(v) << "</td>";
    page << "</tr>\n";
  }
  page << "</tbody></table></div>\n</body></html>\n";
  return page.str();
}

/// Writes render_comparison_html to `path`, replacing it whole or not at all (io::write_file; `listener` hears of the
/// temporary file). Throws io_error when the file cannot be written.
inline void write_comparison_html(const std::string& path, const ModelComparison& comparison,
                                  const CompareHtmlOptions& options = {},
                                  io::TemporaryFileListener* listener = nullptr) {
  io::write_file(path, render_comparison_html(comparison, options), listener);
}

}  // namespace attnscope::analysis
