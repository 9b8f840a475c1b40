// The report's columns for heads with a learned sink logit (gpt-oss): rows a_i sum to 1 − σ_i.
// - ‖diag p − ppᵀ‖₂ with Σp < 1 equals a dense eigensolver's largest |eigenvalue|;
// - the two entropies equal the definitions computed directly: of the real keys' renormalised row, and of the
//   (n+1)-part composition with the sink;
// - the composition columns follow the chosen sink channel: each channel's content entropy and sink share equal
//   the definitions written out here (content = the parts outside the channel, renormalised; sink share =
//   Σ (H_b(s) + s·H_within) / Σ H over the rows).
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Eigenvalues>

#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/core/random.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::Vector;
using attnscope::analysis::HeadInput;
using attnscope::analysis::SinkChannel;

// A causal head of L rows with random logits and a learned sink logit per head: a_ij = e^{z_ij}/(Σ_k e^{z_ik} + e^s)
// on j ≤ i, σ_i = e^s/(Σ_k e^{z_ik} + e^s).
HeadInput sink_report_head(Index length, double sink_logit, double spread, std::uint64_t seed) {
  attnscope::Random random(seed);
  HeadInput head;
  head.attention = RowMatrix<double>::Zero(length, length);
  head.learned_sink.resize(length);
  for (Index i = 0; i < length; ++i) {
    std::vector<double> z(static_cast<std::size_t>(i + 1));
    double largest = sink_logit;
    for (auto& value : z) {
      value = spread * random.normal();
      largest = std::max(largest, value);
    }
    double total = std::exp(sink_logit - largest);
    for (const double value : z) total += std::exp(value - largest);
    for (Index j = 0; j <= i; ++j) head.attention(i, j) = std::exp(z[static_cast<std::size_t>(j)] - largest) / total;
    head.learned_sink(i) = std::exp(sink_logit - largest) / total;
  }
  return head;
}

double sink_report_entropy(const std::vector<double>& parts) {
  double h = 0;
  for (const double p : parts)
    if (p > 0) h -= p * std::log(p);
  return h;
}

double sink_report_column(const std::vector<attnscope::analysis::ReportColumn>& columns, const std::string& name,
                    const HeadInput& head) {
  for (const auto& column : columns)
    if (column.name == name) return column.compute(head);
  FAIL("no column " << name);
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

TEST_CASE("attention_jacobian_norms with learned-sink shares equals a dense eigensolver of diag p - pp^T") {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const double sink_logit = -2.0 + 0.3 * static_cast<double>(seed % 13);
    const HeadInput head = sink_report_head(24, sink_logit, 0.5 + 0.2 * static_cast<double>(seed % 7), seed);
    const Vector<double> norms = attnscope::analysis::attention_jacobian_norms(head.attention, head.learned_sink);
    REQUIRE(norms.size() == 24);
    for (Index i = 0; i < 24; ++i) {
      const Vector<double> p = head.attention.row(i).head(i + 1).transpose();
      const RowMatrix<double> jacobian = RowMatrix<double>(p.asDiagonal()) - p * p.transpose();
      const Eigen::SelfAdjointEigenSolver<RowMatrix<double>> solver(jacobian);
      const double dense = solver.eigenvalues().cwiseAbs().maxCoeff();
      CHECK(std::abs(norms(i) - dense) <= 1e-12 + 1e-10 * dense);
    }
  }
  // a row whose weights and share do not sum to 1 is not a learned-sink row: no norms
  HeadInput bad = sink_report_head(6, 0.0, 1.0, 99);
  bad.learned_sink(3) += 0.01;
  CHECK(attnscope::analysis::attention_jacobian_norms(bad.attention, bad.learned_sink).size() == 0);
  // without the shares the rows (summing to 1 − σ) are not distributions
  CHECK(attnscope::analysis::attention_jacobian_norms(bad.attention).size() == 0);
}

TEST_CASE("the entropy columns of a learned-sink head: renormalised real keys, and the composition with the sink") {
  const auto columns = attnscope::analysis::default_report_columns();
  const auto sink_columns = attnscope::analysis::learned_sink_report_columns();
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const HeadInput head = sink_report_head(17, -1.0 + 0.25 * static_cast<double>(seed), 1.3, 100 + seed);
    double real_keys = 0, with_sink = 0, jacobian = 0;
    for (Index i = 0; i < 17; ++i) {
      std::vector<double> renormalised, composition;
      const double sigma = head.learned_sink(i);
      for (Index j = 0; j <= i; ++j) {
        renormalised.push_back(head.attention(i, j) / (1 - sigma));
        composition.push_back(head.attention(i, j));
      }
      composition.push_back(sigma);
      real_keys += sink_report_entropy(renormalised) / 17;
      with_sink += sink_report_entropy(composition) / 17;
    }
    CHECK(std::abs(sink_report_column(columns, "entropy", head) - real_keys) <= 1e-12);
    CHECK(std::abs(sink_report_column(sink_columns, "entropy_with_sink", head) - with_sink) <= 1e-12);
    const Vector<double> norms = attnscope::analysis::attention_jacobian_norms(head.attention, head.learned_sink);
    jacobian = norms.mean();
    CHECK(sink_report_column(columns, "mean_jacobian_norm", head) == jacobian);
    CHECK(sink_report_column(columns, "max_jacobian_norm", head) == norms.maxCoeff());
  }
  // a head without shares keeps the plain entropy and has no entropy_with_sink
  HeadInput plain = sink_report_head(9, -50.0, 1.0, 7);  // σ ≈ e^-50: rows are distributions
  plain.learned_sink.resize(0);
  CHECK(std::isfinite(sink_report_column(columns, "entropy", plain)));
  CHECK(std::isnan(sink_report_column(sink_columns, "entropy_with_sink", plain)));
}

TEST_CASE("the composition columns of a learned-sink head follow the sink channel") {
  const Index length = 15;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const HeadInput head = sink_report_head(length, -0.5 + 0.2 * static_cast<double>(seed), 1.1, 300 + seed);
    // definitions, written out: sink key 0; rows without a content part are skipped
    double learned_content = 0, learned_sink_term = 0, total_with_sink = 0;
    double keys_content = 0, keys_sink_term = 0, keys_total = 0;
    double both_sink_term = 0, both_total = 0;
    Index learned_rows = 0, keyed_rows = 0;
    for (Index i = 0; i < length; ++i) {
      const double sigma = head.learned_sink(i), c = 1 - sigma;
      std::vector<double> composition{sigma}, renormalised, content;
      for (Index j = 0; j <= i; ++j) {
        composition.push_back(head.attention(i, j));
        renormalised.push_back(head.attention(i, j) / c);
      }
      // learned: sink = σ, content = the real keys renormalised (every row has one)
      learned_content += sink_report_entropy(renormalised);
      learned_sink_term += sink_report_entropy({sigma, c});
      total_with_sink += sink_report_entropy(composition);
      ++learned_rows;
      if (i == 0) continue;  // rows 1.. have content keys besides key 0
      const double content_mass = 1 - head.attention(i, 0) / c;  // of the renormalised row
      for (Index j = 1; j <= i; ++j) content.push_back(head.attention(i, j) / c / content_mass);
      const double h_content = sink_report_entropy(content);
      keys_content += h_content;
      const double s_keys = head.attention(i, 0) / c;
      keys_sink_term += sink_report_entropy({s_keys, 1 - s_keys});  // one sink key: no within-sink entropy
      keys_total += sink_report_entropy(renormalised);
      ++keyed_rows;
      // both: sink = {σ, key 0}, mass s = σ + a_i0, within-sink entropy of (σ, a_i0)/s
      const double s_both = sigma + head.attention(i, 0);
      both_sink_term += sink_report_entropy({s_both, 1 - s_both}) + s_both * sink_report_entropy({sigma / s_both, head.attention(i, 0) / s_both});
      both_total += sink_report_entropy(composition);
    }
    const auto channel = [&](SinkChannel which) {
      return attnscope::analysis::detail::entropy_channels(head.attention, head.learned_sink, {0}, which);
    };
    const auto learned = channel(SinkChannel::learned);
    CHECK(std::abs(learned.content_entropy - learned_content / static_cast<double>(learned_rows)) <= 1e-10);
    CHECK(std::abs(learned.sink_share - learned_sink_term / total_with_sink) <= 1e-10);
    const auto keys = channel(SinkChannel::keys);
    CHECK(std::abs(keys.content_entropy - keys_content / static_cast<double>(keyed_rows)) <= 1e-10);
    CHECK(std::abs(keys.sink_share - keys_sink_term / keys_total) <= 1e-10);
    const auto both = channel(SinkChannel::both);
    CHECK(std::abs(both.content_entropy - keys_content / static_cast<double>(keyed_rows)) <= 1e-10);  // same content
    CHECK(std::abs(both.sink_share - both_sink_term / both_total) <= 1e-10);
    CHECK(both.sink_share > keys.sink_share);  // σ joins the sink channel
    // the report's columns use the channel they were built with
    const auto both_columns = attnscope::analysis::analysis_report_columns<double>({0}, SinkChannel::both);
    CHECK(sink_report_column(both_columns, "sink_entropy_share", head) == both.sink_share);
    const auto learned_columns = attnscope::analysis::analysis_report_columns<double>({0}, SinkChannel::learned);
    CHECK(sink_report_column(learned_columns, "content_entropy", head) == learned.content_entropy);
  }
  // the learned channel on a head without a learned sink has no value, and says why
  HeadInput plain = sink_report_head(8, -60.0, 1.0, 5);
  plain.learned_sink.resize(0);
  const auto columns = attnscope::analysis::analysis_report_columns<double>({0}, SinkChannel::learned);
  CHECK(std::isnan(sink_report_column(columns, "content_entropy", plain)));
  CHECK(columns[0].missing_reason(plain).find("learned sink") != std::string::npos);
  // and with the default channel it is the plain split at key 0
  const auto defaults = attnscope::analysis::analysis_report_columns<double>();
  CHECK(sink_report_column(defaults, "content_entropy", plain) ==
        attnscope::analysis::detail::entropy_channels(plain.attention, {0}).content_entropy);
}
