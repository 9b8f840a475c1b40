// attnscope/analysis/compare_html.hpp — the HTML page of `attnscope compare`: one self-contained page (inline CSS and
// script, images as PNG data URIs; no network) with the per-head table of analysis::ModelComparison in its order
// (most changed first; sortable by any column) and, for the heads whose images the comparison holds, model A's and
// model B's attention side by side (viridis, the report's scale of weights in [0, 1]) with their absolute difference
// on a scale of its own (magma, 0 to the head's largest difference, with a legend), token strings on the axes. Built
// from the HTML report's pieces (style sheet, escaping, number format, sorting script, the heatmap palettes and PNG
// encoding of detail/html_page.hpp and detail/html_heatmap.hpp). Not included by attnscope/analysis.hpp. Needs zlib
// (link attnscope::io).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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
  std::vector<std::string> tokens = {};  // each token's bytes, for the axes (detail::html_token_label); may be empty
};

namespace detail {

/// A colour legend: the bar of five stops and ticks at levels 0, 1/4, 1/2, 3/4, 1, each labelled with its value
/// largest · level^(1/gamma) (the inverse of the colour level v^gamma of v = value / largest).
inline std::string compare_legend(const std::string& id, const unsigned char (&stops)[5][3], double gamma,
                                  double largest, const std::string& caption) {
  std::ostringstream out;
  out << "<div class=\"legend\" id=\"" << id << "\" data-max=\"" << html_format_value(largest)
      << "\"><span class=\"legend-bar\" style=\"background:" << html_gradient_css(stops)
      << "\"></span><span class=\"legend-ticks\">";
  for (int k = 0; k <= 4; ++k)
    out << "<span style=\"left:" << 25 * k << "%\">" << html_format_value(largest * std::pow(k / 4.0, 1.0 / gamma))
        << "</span>";
  out << "</span><span class=\"legend-caption\">" << caption << "</span></div>";
  return out.str();
}

/// The labels of one axis of an image of `pixels` pixels shown at `scale` CSS pixels each: position p·block and its
/// token, every ⌈12 / scale⌉-th pixel (one label per 12 CSS pixels at least).
inline std::string compare_axis(const char* kind, Index pixels, Index block, int scale,
                                const std::vector<std::string>& tokens, Index length) {
  std::ostringstream out;
  const Index step = std::max<Index>(1, (12 + scale - 1) / scale);
  const bool vertical = kind[0] == 'y';
  out << "<div class=\"" << kind << "\" style=\"" << (vertical ? "width:11em;height:" : "height:8em;width:")
      << pixels * scale << "px\">";
  for (Index p = 0; p < pixels; p += step) {
    const Index position = p * block;
    std::string text = std::to_string(position);
    if (static_cast<Index>(tokens.size()) >= length && position < static_cast<Index>(tokens.size()))
      text += " " + html_token_label(tokens[static_cast<std::size_t>(position)]);
    out << "<span style=\"" << (vertical ? "top:" : "left:")
        << (vertical ? p * scale + scale / 2.0 - 6 : p * scale + scale / 2.0) << "px\">" << html_escape(text)
        << "</span>";
  }
  out << "</div>";
  return out.str();
}

}  // namespace detail

/// The page as a string.
inline std::string render_comparison_html(const ModelComparison& comparison, const CompareHtmlOptions& options = {}) {
  const auto value = [](double v) { return detail::html_format_value(v); };
  const auto uri = [&](const RowMatrix<double>& image, const std::vector<io::PngColor>& palette) {
    return "data:image/png;base64," +
           detail::html_base64(detail::html_heatmap(image, 1, true, options.color_gamma, false, palette).png);
  };
  std::ostringstream page;
  page << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" << detail::html_escape(options.title)
       << "</title>\n<style>" << detail::html_page_style()
       << "\n.pair{display:flex;gap:1em;align-items:flex-start;flex-wrap:wrap}figure{margin:0}.plot{display:inline-grid;"
          "grid-template-columns:max-content max-content;align-items:start}"
          "figcaption{font-size:12px;color:#444}.legend{position:relative;display:inline-block;width:240px;"
          "height:3.2em;margin:.2em 1em .2em 0;font-size:11px}.legend-bar{display:block;height:10px;"
          "border:1px solid #999}.legend-ticks span{position:absolute;top:13px;transform:translateX(-50%)}"
          ".legend-caption{position:absolute;top:27px;left:0;white-space:nowrap;color:#444}</style></head>\n<body>\n"
          "<div id=\"script-errors\" hidden></div>\n<h1>"
       << detail::html_escape(options.title) << "</h1>\n<p class=\"source\">A: " << detail::html_escape(options.model_a)
       << "<br>B: " << detail::html_escape(options.model_b) << "</p>\n" << detail::html_run_record(options.run)
       << "<p class=\"note\">L = " << comparison.tokens
       << " tokens. Heads ordered by js_keep, the mean Jensen&ndash;Shannon divergence (nats) between the two "
          "models' attention rows; js_drop compares the content compositions (sink keys dropped, rest renormalised); "
          "top-k overlap with k = "
       << comparison.top_k << "; &Delta; = B &minus; A of the per-row means; sink keys:";
  for (Index s : comparison.sink_keys) page << ' ' << s;
  page << ".</p>\n";
  if (!comparison.images.empty())
    page << "<p>" << detail::compare_legend("legend-weights", detail::html_viridis_stops, options.color_gamma, 1.0,
                                             "A and B: attention weight")
         << "</p>\n";
  for (const HeadComparisonImages& images : comparison.images) {
    const double largest = images.difference.size() > 0 ? images.difference.maxCoeff() : 0.0;
    // the difference on its own scale: 0 to the largest difference of the head (all zero: the scale 0 to 1)
    const RowMatrix<double> scaled = largest > 0 ? RowMatrix<double>(images.difference / largest) : images.difference;
    const int width = static_cast<int>(images.a.cols()) * options.image_scale;
    const std::string id = std::to_string(images.layer) + "-" + std::to_string(images.head);
    page << "<section id=\"head-" << id << "\"><h3>layer " << images.layer << " head " << images.head
         << "</h3>\n<div class=\"pair\">";
    const std::string x_axis = detail::compare_axis("xaxis", images.a.cols(), images.block, options.image_scale,
                                                    options.tokens, comparison.tokens);
    const struct {
      const RowMatrix<double>* matrix;
      const std::vector<io::PngColor>* palette;
      std::string caption;
    } panels[] = {{&images.a, &detail::html_heatmap_palette(), "A: " + detail::html_escape(options.model_a)},
                  {&images.b, &detail::html_heatmap_palette(), "B: " + detail::html_escape(options.model_b)},
                  {&scaled, &detail::html_difference_palette(), "|B &minus; A| (largest " + value(largest) + ")"}};
    for (const auto& panel : panels) {
      const bool first = panel.matrix == &images.a;
      page << "<figure><div class=\"plot\">"
           << (first ? detail::compare_axis("yaxis", images.a.rows(), images.block, options.image_scale,
                                            options.tokens, comparison.tokens)
                     : std::string("<div></div>"))
           << "<img class=\"big" << (panel.matrix == &scaled ? " difference" : "") << "\" style=\"width:" << width
           << "px\" alt=\"layer " << images.layer << " head " << images.head << "\" src=\""
           << uri(*panel.matrix, *panel.palette) << "\"><div></div>" << x_axis << "</div><figcaption>" << panel.caption
           << "</figcaption>";
      if (panel.matrix == &scaled)
        page << detail::compare_legend("legend-difference-" + id, detail::html_magma_stops, options.color_gamma,
                                       largest, "|B &minus; A|, this head's own scale");
      page << "</figure>";
    }
    page << "</div><p class=\"hint\">query rows down, keys across";
    if (images.block > 1) page << "; each pixel is the maximum of a " << images.block << "&times;" << images.block << " block";
    page << ".</p></section>\n";
  }
  page << "<p class=\"hint\">Click a column heading to sort.</p><div class=\"scroll\"><table id=\"stats\" "
          "class=\"sortable\"><thead><tr>";
  const char* const headings[][2] = {{"rank", "rank"},
                                     {"layer", "layer"},
                                     {"head", "head"},
                                     {"js_keep", "js_keep"},
                                     {"js_drop", "js_drop"},
                                     {"top_k_overlap", "top-k overlap"},
                                     {"delta_sink_mass", "&Delta; sink mass"},
                                     {"delta_entropy", "&Delta; entropy"},
                                     {"delta_entropy_sink", "&Delta; entropy (sink part)"},
                                     {"delta_entropy_content", "&Delta; entropy (content part)"},
                                     {"delta_max_weight", "&Delta; max weight"},
                                     {"delta_jacobian_norm", "&Delta; mean &#8214;J&#8214;&#8322;"},
                                     {"sink_mass_a", "sink mass A"},
                                     {"sink_mass_b", "sink mass B"},
                                     {"entropy_a", "entropy A"},
                                     {"entropy_b", "entropy B"}};
  for (const auto& heading : headings)
    page << "<th data-type=\"number\" data-name=\"" << heading[0] << "\">" << heading[1] << "</th>";
  page << "</tr></thead>\n<tbody>\n";
  for (std::size_t r = 0; r < comparison.heads.size(); ++r) {
    const HeadComparison& h = comparison.heads[r];
    const HeadAttentionSummary d = h.delta();
    page << "<tr><td>" << r + 1 << "</td><td>" << h.layer << "</td><td>" << h.head << "</td>";
    for (double v : {h.js_keep, h.js_drop, h.top_k_overlap, d.sink_mass, d.entropy, d.entropy_sink, d.entropy_content,
                     d.max_weight, d.jacobian_norm, h.a.sink_mass, h.b.sink_mass, h.a.entropy, h.b.entropy}) {
      std::ostringstream exact;  // the sort key: 9 significant digits, so that rows equal to 4 digits still order
      exact.precision(9);
      if (std::isfinite(v)) exact << v;
      page << "<td data-value=\"" << exact.str() << "\">" << value(v) << "</td>";
    }
    page << "</tr>\n";
  }
  page << "</tbody></table></div>\n<script>(function(){var errors=document.getElementById('script-errors');"
          "window.onerror=function(message){errors.hidden=false;errors.textContent+='script error: '+message+'\\n';};"
          "})();</script>\n<script>"
       << detail::html_table_sort_script()
       << "</script>\n<script>document.body.setAttribute('data-ready','1');</script>\n</body></html>\n";
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
