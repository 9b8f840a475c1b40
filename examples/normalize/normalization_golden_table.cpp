// normalization_golden_table: every normalization map on the deep-spin/entmax README vector x = [−2, 0, 0.5]
// (values, sum, support size, exact ‖J‖₂) against docs/theory/normalization-maps.md §1.3 (targets 1-2), and the SSMax Fig. 1
// values (Nakanishi 2025; target 9). Writes golden_table.csv, golden_table.json and ssmax_fig1.csv.
#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "attnscope/normalize.hpp"
#include "support/example.hpp"

namespace {

using attnscope::RowMatrix;
using attnscope::examples::format;

struct Expected {
  std::vector<double> values;  // empty: the spec gives none
  double norm;                 // NaN: the spec gives none
};

std::string vector_text(const std::vector<double>& values, int digits) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << format(values[i], digits);
  return out.str() + "]";
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = attnscope::examples::parse_options(argc, argv);
  attnscope::examples::Report report(options, "normalize", "normalization_golden_table",
                                     "Normalization maps on the golden vector x = [-2, 0, 0.5]");
  RowMatrix<double> x(1, 3);
  x << -2, 0, 0.5;
  const double nan = std::nan("");
  const std::vector<std::pair<std::string, Expected>> maps = {
      {"softmax", {{0.0486, 0.3592, 0.5922}, 0.448800672}},
      {"sparsemax", {{0, 0.25, 0.75}, 1.0}},
      {"entmax15", {{0, 0.3260, 0.6740}, 0.673519883}},
      {"entmax:1.5", {{0, 0.3260, 0.6740}, 0.673519883}},
      {"entmax:2", {{0, 0.25, 0.75}, 1.0}},
      {"entmax:1.25", {{}, nan}},
      {"temperature:0.5", {{}, nan}},
      {"ssmax:0.43", {{}, nan}},
      {"sink:0", {{}, nan}},
      {"sa_softmax", {{}, nan}},
      {"sa_softmax_normalized", {{}, nan}},
  };
  attnscope::examples::Csv csv(report.path("golden_table.csv"),
                               {"map", "p0", "p1", "p2", "sum", "support", "spectral_norm"});
  nlohmann::json json = nlohmann::json::array();
  std::ostringstream table;
  table << "| map | values | sum | support | exact ‖J‖₂ | spec values | spec ‖J‖₂ |\n|---|---|---|---|---|---|---|\n";
  for (const auto& [text, expected] : maps) {
    const attnscope::NormalizationMap map = attnscope::parse_normalization_map(text);
    const RowMatrix<double> p = attnscope::apply_map(map, x);
    const double norm = attnscope::jacobian_spectral_norm(x, map)(0);
    const std::vector<double> values(p.data(), p.data() + p.size());
    const long support = static_cast<long>((p.array() != 0).count());
    csv.row(text, values[0], values[1], values[2], p.sum(), support, norm);
    json.push_back({{"map", text}, {"values", values}, {"sum", p.sum()}, {"support", support},
                    {"spectral_norm", norm}, {"spec_values", expected.values},
                    {"spec_spectral_norm", std::isnan(expected.norm) ? nlohmann::json() : nlohmann::json(expected.norm)}});
    table << "| " << text << " | " << vector_text(values, 6) << " | " << format(p.sum(), 10) << " | " << support << " | "
          << format(norm, 10) << " | " << (expected.values.empty() ? "—" : vector_text(expected.values, 4)) << " | "
          << (std::isnan(expected.norm) ? "—" : format(expected.norm, 10)) << " |\n";
    if (!expected.values.empty()) {
      double worst = 0;
      for (std::size_t i = 0; i < values.size(); ++i) worst = std::max(worst, std::abs(values[i] - expected.values[i]));
      report.claim({text + " on x (docs/theory/normalization-maps.md §1.3, 4 decimals)", vector_text(expected.values, 4), vector_text(values, 6),
                    worst <= 5e-5 ? "agrees (max abs. diff " + format(worst, 2) + ")" : "disagrees (max abs. diff " + format(worst, 3) + ")"});
    }
    if (!std::isnan(expected.norm)) {
      const double relative = std::abs(norm - expected.norm) / expected.norm;
      report.claim({"exact ‖J‖₂ of " + text + " (docs/theory/normalization-maps.md §1.3 [derived])", format(expected.norm, 10), format(norm, 12),
                    relative <= 1e-9 ? "agrees (rel. diff " + format(relative, 2) + ")"
                                     : "disagrees (rel. diff " + format(relative, 3) + ")"});
    }
  }
  report.text(table.str());
  report.text("SA-Softmax rows are not distributions (basic: x ⊙ softmax(x) is negative where x < 0 and does not sum to 1; "
              "normalized: sum ≤ 1). Sink softmax (off-by-one) rows sum to < 1. ‖J‖₂ of SA-Softmax is the largest "
              "singular value of its non-symmetric Jacobian (dense SVD at n = 3); the others use the exact O(n) secular "
              "method.");
  report.json("golden_table.json", json);

  // SSMax Fig. 1: all logits −2 except the last (+3), s = 0.43.
  const std::vector<long> sizes = {10, 100, 1000, 10000};
  const std::vector<double> spec_softmax = {0.942826, 0.599860, 0.129346, 0.014626};
  const std::vector<double> spec_ssmax = {0.940101, 0.995063, 0.999646, 0.999975};
  attnscope::examples::Csv fig1(report.path("ssmax_fig1.csv"), {"n", "softmax_max", "ssmax_max"});
  nlohmann::json fig1_json = nlohmann::json::array();
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    RowMatrix<double> z = RowMatrix<double>::Constant(1, sizes[k], -2.0);
    z(0, sizes[k] - 1) = 3.0;
    const double softmax_max = attnscope::softmax(z).maxCoeff(), ssmax_max = attnscope::ssmax(z, 0.43).maxCoeff();
    fig1.row(sizes[k], softmax_max, ssmax_max);
    fig1_json.push_back({{"n", sizes[k]}, {"softmax_max", softmax_max}, {"ssmax_max", ssmax_max}});
    const double worst = std::max(std::abs(softmax_max - spec_softmax[k]), std::abs(ssmax_max - spec_ssmax[k]));
    report.claim({"SSMax Fig. 1, n = " + std::to_string(sizes[k]) + ": max weight softmax / SSMax (s = 0.43)",
                  format(spec_softmax[k], 6) + " / " + format(spec_ssmax[k], 6) + " (spec target 9, [derived] values)",
                  format(softmax_max, 6) + " / " + format(ssmax_max, 6),
                  worst <= 5e-7 ? "agrees" : "disagrees (max abs. diff " + format(worst, 3) + ")"});
  }
  report.json("ssmax_fig1.json", fig1_json);
  report.text("SSMax keeps the +3 key's weight near 1 as n grows while softmax's fades (Nakanishi 2025, Fig. 1); "
              "values in `ssmax_fig1.csv`.");
  report.finish();
  return 0;
}
