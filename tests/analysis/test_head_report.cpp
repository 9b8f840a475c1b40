// The per-head report: column functions against hand-computed values and a dense eigensolver, the column
// registry's checks, and the text/CSV/JSON/Markdown outputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/decompositions.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/model.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "analysis/random_heads.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::RowMatrix;
using namespace attnscope::analysis;
namespace model = attnscope::model;

HeadInput random_head(int layer, int head, long length, std::uint64_t seed) {
  return attnscope::testing::random_causal_head(layer, head, length, seed);
}

}  // namespace

TEST_CASE("column functions match their definitions") {
  RowMatrix<double> attention(3, 3);
  attention << 1, 0, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5;
  CHECK(attention_sink_mass(attention) == Approx((1 + 0.5 + 0.2) / 3).epsilon(1e-15));
  const double row_entropy = -(0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.5 * std::log(0.5));
  CHECK(mean_attention_entropy(attention) == Approx((0 + std::log(2.0) + row_entropy) / 3).epsilon(1e-14));
  RowMatrix<double> scores(2, 2);
  scores << 1.5, -std::numeric_limits<double>::infinity(), -3, 2.5;
  CHECK(max_finite_entry(scores) == 2.5);
  CHECK(std::isnan(max_finite_entry(RowMatrix<double>())));
  CHECK(std::isnan(attention_sink_mass(RowMatrix<double>())));
  CHECK(std::isnan(mean_attention_entropy(RowMatrix<double>())));
  // Views: float, column-major and block inputs give the same values without a RowMatrix<double> copy by the caller.
  const RowMatrix<float> attention_float = attention.cast<float>();
  CHECK(mean_attention_entropy(attention_float) == Approx(mean_attention_entropy(attention)).epsilon(1e-6));
  CHECK(attention_sink_mass(attention_float) == Approx(attention_sink_mass(attention)).epsilon(1e-6));
  const Eigen::MatrixXd column_major = attention;
  CHECK(mean_attention_entropy(column_major) == mean_attention_entropy(attention));
  CHECK(max_finite_entry(scores.bottomRows(1)) == 2.5);
  CHECK(max_finite_entry(scores.topRows(1)) == 1.5);
  CHECK(attention_sink_mass(attention.bottomRows(2)) == Approx(0.35).epsilon(1e-15));
  // Rows with a negative or non-finite weight (e.g. SA-softmax rows) have no entropy: NaN, not a partial sum.
  RowMatrix<double> signed_rows = attention;
  signed_rows(2, 0) = -0.2, signed_rows(2, 2) = 0.9;
  CHECK(std::isnan(mean_attention_entropy(signed_rows)));
  signed_rows(2, 0) = std::numeric_limits<double>::quiet_NaN();
  CHECK(std::isnan(mean_attention_entropy(signed_rows)));

  // ‖diag p − ppᵀ‖₂ against Eigen's dense symmetric eigensolver on 30 random causal heads.
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const HeadInput head = random_head(0, 0, 24, seed);
    const attnscope::Vector<double> norms = attention_jacobian_norms(head.attention);
    REQUIRE(norms.size() == 24);
    for (long i = 0; i < 24; ++i) {
      const Eigen::VectorXd p = head.attention.row(i).transpose();
      const Eigen::MatrixXd jacobian = Eigen::MatrixXd(p.asDiagonal()) - p * p.transpose();
      const double dense = attnscope::detail::symmetric_eigen(jacobian, false).values.cwiseAbs().maxCoeff();
      CHECK(norms(i) == Approx(dense).margin(1e-13));
    }
  }
  // Rows that are not distributions (a sink took 10% of the mass) give no Jacobian norm.
  attention.row(2) *= 0.9;
  CHECK(attention_jacobian_norms(attention).size() == 0);
}

TEST_CASE("compute_head_report evaluates every column for every head and validates its input") {
  std::vector<HeadInput> heads{random_head(0, 0, 10, 1), random_head(0, 1, 10, 2), random_head(1, 0, 10, 3)};
  heads[2].scores.resize(0, 0);  // no scores for this head
  auto columns = default_report_columns();
  columns.push_back({"rows", "number of query rows", [](const HeadInput& h) { return double(h.attention.rows()); }});
  int calls = 0;
  const HeadReport report = compute_head_report(heads, columns, [&](int done, int total) {
    ++calls;
    CHECK(total == 3);
    CHECK(done == calls);
  });
  CHECK(calls == 3);
  REQUIRE(report.columns.size() == 7);
  REQUIRE(report.rows.size() == 3);
  CHECK(report.rows[2].layer == 1);
  CHECK(report.rows[1].head == 1);
  CHECK(report.rows[0].values[0] == Approx(attention_sink_mass(heads[0].attention)));
  CHECK(report.rows[0].values[3] == Approx(max_finite_entry(heads[0].scores)));
  CHECK(std::isnan(report.rows[2].values[3]));
  CHECK(report.rows[0].values[6] == 10.0);
  CHECK(report.rows[0].values[5] <= 0.5 + 1e-12);  // ‖J‖₂ ≤ 1/2 for softmax
  CHECK(report.rows[0].values[4] <= report.rows[0].values[5]);

  const std::string table = head_report_table(report);
  CHECK(table.find("max_scaled_logit") != std::string::npos);
  const std::string table_body = table.substr(0, table.find("\n\n") + 1);  // reasons and legend follow a blank line
  CHECK(std::count(table_body.begin(), table_body.end(), '\n') == 4);
  CHECK(table.find("max_scaled_logit: needs scores (no scores array in the input) (1 head)") != std::string::npos);
  const std::string csv = head_report_csv(report);
  CHECK(csv.rfind("layer,head,sink_mass,entropy,max_max_weight,max_scaled_logit,mean_jacobian_norm,"
                  "max_jacobian_norm,rows\n", 0) == 0);
  CHECK(csv.find(",nan,") != std::string::npos);
  const nlohmann::json json = head_report_json(report);
  CHECK(json["heads"][2]["max_scaled_logit"].is_null());
  CHECK(json["heads"][0]["rows"] == 10.0);
  CHECK(head_report_markdown(report).find("| 1 | 0 |") != std::string::npos);

  auto duplicate = columns;
  duplicate.push_back(columns[0]);
  CHECK_THROWS_AS(compute_head_report(heads, duplicate), attnscope::invalid_argument);
  auto unnamed = columns;
  unnamed.push_back({"", "", columns[0].compute});
  CHECK_THROWS_AS(compute_head_report(heads, unnamed), attnscope::invalid_argument);
  auto bad = heads;
  bad[1].attention.resize(0, 0);
  CHECK_THROWS_AS(compute_head_report(bad, columns), attnscope::invalid_argument);
  bad = heads;
  bad[1].attention = RowMatrix<double>::Constant(10, 4, 0.25);  // non-square rows are reported, scores must match
  bad[1].scores.resize(0, 0);
  CHECK(compute_head_report(bad, columns).rows[1].values[1] == Approx(std::log(4.0)).epsilon(1e-14));
  bad[1].values = RowMatrix<double>::Zero(5, 2);  // values need one row per key
  CHECK_THROWS_AS(compute_head_report(bad, columns), attnscope::invalid_argument);
  bad = heads;
  bad[0].scores = RowMatrix<double>::Zero(9, 9);
  CHECK_THROWS_AS(compute_head_report(bad, columns), attnscope::invalid_argument);
  CHECK_THROWS_AS(head_inputs(model::ForwardResult{}), attnscope::invalid_argument);
}

TEST_CASE("analysis columns: composition, logits and capacity functions on a causal head") {
  const auto columns = all_report_columns();
  REQUIRE(columns.size() == 12);
  HeadInput head = random_head(0, 0, 32, 5);
  attnscope::Random random(6);
  head.values.resize(32, 8);
  for (long i = 0; i < head.values.size(); ++i) head.values.data()[i] = random.normal();
  const HeadReport report = compute_head_report({head}, columns);
  const auto value = [&](const std::string& name) {
    return report.rows[0].values[std::size_t(std::find(report.columns.begin(), report.columns.end(), name) -
                                             report.columns.begin())];
  };
  CHECK(value("causal_stable_rank") == Approx(attnscope::logits::causal_stable_rank(head.scores)).epsilon(1e-12));
  const auto split = attnscope::composition::entropy_split(RowMatrix<double>(head.attention.bottomRows(31)), attnscope::Causal{1});
  CHECK(value("content_entropy") == Approx(split.content_entropy.mean()).epsilon(1e-12));
  CHECK(value("sink_entropy_share") == Approx(split.sink_term().sum() / split.entropy.sum()).epsilon(1e-12));
  CHECK(value("sink_entropy_share") > 0);
  CHECK(value("sink_entropy_share") < 1);
  // sink_score (Gu et al. 2024): the mean weight on key 0 over the first 64 rows, here all 32
  CHECK(value("sink_score") == Approx(head.attention.col(0).mean()).epsilon(1e-12));
  CHECK(compute_head_report({head}, analysis_report_columns<double>({0}, SinkChannel::both, 4)).rows[0].values[2] ==
        Approx(head.attention.col(0).head(4).mean()).epsilon(1e-12));
  const auto capacity = attnscope::capacity::head_capacity(head.attention, head.scores, head.values, attnscope::causal);
  CHECK(value("gradient_sensitivity") == Approx(capacity.gradient_sensitivity).epsilon(1e-12));
  CHECK(value("gradient_sensitivity") > 0);
  // Without scores and values the logits and capacity columns are not available.
  head.scores.resize(0, 0);
  head.values.resize(0, 0);
  const HeadReport partial = compute_head_report({head}, columns);
  CHECK(std::isnan(partial.rows[0].values[9]));
  CHECK(std::isnan(partial.rows[0].values[11]));
  CHECK(std::isfinite(partial.rows[0].values[8]));  // sink_score needs the attention only
  CHECK(std::isfinite(partial.rows[0].values[6]));
}

TEST_CASE("analysis columns in float agree with double to float accuracy") {
  HeadInput head = random_head(0, 0, 32, 5);
  attnscope::Random random(7);
  head.values.resize(32, 8);
  for (long i = 0; i < head.values.size(); ++i) head.values.data()[i] = random.normal();
  const HeadReport in_double = compute_head_report({head}, analysis_report_columns<double>());
  const HeadReport in_float = compute_head_report({head}, analysis_report_columns<float>());
  REQUIRE(in_double.columns == in_float.columns);
  int finite_columns = 0;
  for (std::size_t k = 0; k < in_double.columns.size(); ++k) {
    CAPTURE(in_double.columns[k]);
    const double expected = in_double.rows[0].values[k], measured = in_float.rows[0].values[k];
    // A column that does not qualify (e.g. no critical top-N on this head) is NaN in both precisions.
    CHECK(std::isnan(measured) == std::isnan(expected));
    if (std::isnan(expected)) continue;
    ++finite_columns;
    // The critical top-N is an integer search over KS tests: float rounding may move it by one grid step, which
    // changes N_s/N at that N; every other column is a smooth function of the inputs.
    if (in_double.columns[k] == "separability_at_critical_n") CHECK(std::abs(measured - expected) <= 0.25);
    else CHECK(measured == Approx(expected).epsilon(1e-4));
  }
  CHECK(finite_columns >= 4);  // entropy channels, stable rank and g(T, ε) always qualify on this causal head
}
