// The report's input checks and presentation: the row-sum tolerance against its formula, check_attention_rows on
// valid rows (also rounded to float16/bfloat16, many seeds) and on each kind of violation, visible keys and
// max_max_weight without one-key rows, strict and lenient compute_head_report, sink keys, reasons for NaN, column
// selection and sorting, and the 100-character table.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "attnscope/analysis.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "analysis/random_heads.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::RowMatrix;
namespace analysis = attnscope::analysis;

// Softmax rows of random logits (scale 3, seeded), all keys visible.
RowMatrix<double> row_check_softmax_rows(long rows, long keys, std::uint64_t seed) {
  attnscope::Random random(seed);
  RowMatrix<double> logits(rows, keys);
  for (long i = 0; i < logits.size(); ++i) logits.data()[i] = 3 * random.normal();
  return attnscope::softmax(logits, 1.0);
}

std::size_t row_check_longest_line(const std::string& text) {
  std::size_t longest = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
  return longest;
}

}  // namespace

TEST_CASE("attention_row_sum_tolerance is 2u + k 2^-24 + 1e-12 with the IEEE unit roundoffs") {
  CHECK(analysis::unit_roundoff::float64 == std::ldexp(1.0, -53));
  CHECK(analysis::unit_roundoff::float32 == std::ldexp(1.0, -24));
  CHECK(analysis::unit_roundoff::float16 == std::ldexp(1.0, -11));
  CHECK(analysis::unit_roundoff::bfloat16 == std::ldexp(1.0, -8));
  CHECK(analysis::unit_roundoff::float32 == std::numeric_limits<float>::epsilon() / 2);
  CHECK(analysis::attention_row_sum_tolerance(4096, analysis::unit_roundoff::float32) ==
        Approx(2 * std::ldexp(1.0, -24) + 4096 * std::ldexp(1.0, -24) + 1e-12).epsilon(1e-15));
  CHECK(analysis::attention_row_sum_tolerance(4096, analysis::unit_roundoff::float16) == Approx(1.2207e-3).epsilon(1e-3));
  CHECK(analysis::attention_row_sum_tolerance(4096, analysis::unit_roundoff::bfloat16) == Approx(8.057e-3).epsilon(1e-3));
  CHECK(analysis::attention_row_sum_tolerance(1, analysis::unit_roundoff::float64) < 1e-7);
}

TEST_CASE("check_attention_rows accepts softmax rows rounded to the stored precision, for many seeds") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const long keys = 16 + long(seed) * 50;
    const RowMatrix<double> rows = row_check_softmax_rows(6, keys, seed);
    CHECK(analysis::check_attention_rows(rows, analysis::unit_roundoff::float64).ok());
    const RowMatrix<double> in_float = rows.cast<float>().cast<double>();
    CHECK(analysis::check_attention_rows(in_float, analysis::unit_roundoff::float32).ok());
    RowMatrix<double> in_half(rows.rows(), rows.cols()), in_bfloat(rows.rows(), rows.cols());
    for (long i = 0; i < rows.size(); ++i) {
      in_half.data()[i] = static_cast<float>(Eigen::half(static_cast<float>(rows.data()[i])));
      in_bfloat.data()[i] = static_cast<float>(Eigen::bfloat16(static_cast<float>(rows.data()[i])));
    }
    CHECK(analysis::check_attention_rows(in_half, analysis::unit_roundoff::float16).ok());
    CHECK(analysis::check_attention_rows(in_bfloat, analysis::unit_roundoff::bfloat16).ok());
    // The same rows scaled by 1.05 (a sink of 5% added, or a wrong normalisation) fail in every precision.
    CHECK(analysis::check_attention_rows(RowMatrix<double>(in_bfloat * 1.05), analysis::unit_roundoff::bfloat16).bad_rows == 6);
  }
}

TEST_CASE("check_attention_rows reports the first violation of each kind and counts bad rows") {
  const double u = analysis::unit_roundoff::float32;
  RowMatrix<double> rows = row_check_softmax_rows(5, 8, 3);
  const double tolerance = analysis::attention_row_sum_tolerance(8, u);
  RowMatrix<double> inside = rows;
  inside.row(2) *= 1 + 0.5 * tolerance;
  CHECK(analysis::check_attention_rows(inside, u).ok());
  RowMatrix<double> outside = rows;
  outside.row(2) *= 1 + 2 * tolerance;
  auto check = analysis::check_attention_rows(outside, u);
  CHECK(check.bad_rows == 1);
  CHECK(check.first.problem == analysis::RowProblem::sum);
  CHECK(check.first.row == 2);
  CHECK(check.first.column == -1);
  CHECK(check.first.value == Approx(1 + 2 * tolerance).epsilon(1e-12));

  RowMatrix<double> broken = rows;
  broken(3, 4) = std::numeric_limits<double>::quiet_NaN();
  broken(1, 6) = -0.01;
  broken(4, 0) = std::numeric_limits<double>::infinity();
  check = analysis::check_attention_rows(broken, u);
  CHECK(check.rows == 5);
  CHECK(check.bad_rows == 3);
  CHECK(check.first.problem == analysis::RowProblem::negative);
  CHECK(check.first.row == 1);
  CHECK(check.first.column == 6);
  CHECK(check.first.value == -0.01);
  CHECK(analysis::describe_row_violation(check.first) == "row 1: weight at key 6 is -0.01 (negative)");
  broken.row(1) = rows.row(1);
  check = analysis::check_attention_rows(broken, u);
  CHECK(check.first.problem == analysis::RowProblem::non_finite);
  CHECK(analysis::describe_row_violation(check.first) == "row 3: weight at key 4 is nan (not finite)");
  RowMatrix<double> doubled = rows * 2;
  check = analysis::check_attention_rows(doubled, u);
  CHECK(check.bad_rows == 5);
  CHECK(analysis::describe_row_violation(check.first).rfind("row 0: weights sum to 2 (|sum - 1| > tolerance", 0) == 0);
  // Rows that are not distributions by design (sink softmax: sum < 1; SA-softmax: signed): only finiteness counts.
  RowMatrix<double> sunk = rows * 0.8;
  sunk(0, 0) = -0.1;
  CHECK(analysis::check_attention_rows(sunk, u, false).ok());
  sunk(2, 2) = std::numeric_limits<double>::quiet_NaN();
  CHECK(analysis::check_attention_rows(sunk, u, false).bad_rows == 1);
}

TEST_CASE("visible keys and max_max_weight: one-key rows are left out") {
  const analysis::HeadInput head = attnscope::testing::random_causal_head(0, 0, 9, 4);
  const auto from_zeros = analysis::visible_key_counts(head.attention);
  const auto from_scores = analysis::visible_key_counts(head.attention, head.scores);
  for (long i = 0; i < 9; ++i) {
    CHECK(from_zeros(i) == i + 1);
    CHECK(from_scores(i) == i + 1);
  }
  double expected = 0;
  for (long i = 1; i < 9; ++i) expected = std::max(expected, head.attention.row(i).maxCoeff());
  CHECK(head.attention(0, 0) == 1.0);
  CHECK(analysis::max_attention_weight(head.attention) == expected);
  CHECK(analysis::max_attention_weight(head.attention) < 1);
  // Full attention: every row sees every key; a 1 × L decoding step qualifies; one key never does.
  const RowMatrix<double> full = row_check_softmax_rows(3, 5, 5);
  CHECK(analysis::visible_key_counts(full)(0) == 5);
  CHECK(analysis::max_attention_weight(full) == full.maxCoeff());
  CHECK(analysis::max_attention_weight(RowMatrix<double>(full.topRows(1))) == full.row(0).maxCoeff());
  CHECK(std::isnan(analysis::max_attention_weight(RowMatrix<double>::Ones(4, 1))));
  // Sink keys {0, 2}: (1/L) Σ_i (A(i,0) + A(i,2)).
  CHECK(analysis::attention_sink_mass(full, {0, 2}) == Approx((full.col(0).sum() + full.col(2).sum()) / 3).epsilon(1e-15));
  CHECK(analysis::attention_sink_mass(full, {0, 99}) == Approx(full.col(0).mean()).epsilon(1e-15));
}

TEST_CASE("compute_head_report: strict rows name layer, head, row and value; lenient marks the affected values") {
  std::vector<analysis::HeadInput> heads{attnscope::testing::random_causal_head(2, 0, 12, 6), attnscope::testing::random_causal_head(2, 3, 12, 7)};
  heads[1].attention(5, 1) = std::numeric_limits<double>::quiet_NaN();
  analysis::HeadReportOptions options;
  options.strict_hint = " [hint]";
  try {
    analysis::compute_head_report(heads, analysis::default_report_columns(), {}, options);
    FAIL("no exception");
  } catch (const attnscope::invalid_argument& error) {
    const std::string message = error.what();
    CHECK(message.find("layer 2 head 3 row 5: weight at key 1 is nan (not finite); 1 of 12 rows") != std::string::npos);
    CHECK(message.find("[hint]") != std::string::npos);
  }
  options.lenient = true;
  const analysis::HeadReport report = analysis::compute_head_report(heads, analysis::default_report_columns(), {}, options);
  CHECK(report.rows[0].bad_rows == 0);
  CHECK(report.rows[1].bad_rows == 1);
  CHECK(std::isnan(report.rows[1].values[1]));  // entropy of a row with NaN: not available
  CHECK(report.rows[1].missing_reasons[1].find("not probability distributions") != std::string::npos);
  CHECK(report.rows[0].missing_reasons[1].empty());
  const std::string table = analysis::head_report_table(report);
  CHECK(table.find("bad_rows") != std::string::npos);
  CHECK(table.find("*") != std::string::npos);
  CHECK(table.find("1 bad rows in 1 head") != std::string::npos);
  CHECK(table.find("entropy: rows are not probability distributions") != std::string::npos);
  CHECK(table.find("max_scaled_logit") != std::string::npos);
}

TEST_CASE("head_report_table fits the width with short names, a legend and column blocks; select and sort") {
  std::vector<analysis::HeadInput> heads;
  for (int h = 0; h < 5; ++h) heads.push_back(attnscope::testing::random_causal_head(0, h, 10, 20 + std::uint64_t(h)));
  const auto columns = analysis::all_report_columns();
  const analysis::HeadReport report = analysis::compute_head_report(heads, columns);
  for (const std::size_t width : {100u, 60u, 40u}) {
    const std::string table = analysis::head_report_table(report, width);
    const std::string body = table.substr(0, table.find("\ncolumns:"));
    CAPTURE(width);
    CHECK(row_check_longest_line(body) <= width);
    CHECK(table.find("stable_rank = causal_stable_rank:") != std::string::npos);
    if (width >= 60) CHECK(row_check_longest_line(table) <= width);  // the legend and the reasons are wrapped too
    // Each block repeats the header and the 5 heads: 6 lines per block, every column in some block.
    for (const std::string& name : report.short_names) CHECK(body.find(name) != std::string::npos);
  }
  // Wide enough for the full names: no legend.
  CHECK(analysis::head_report_table(report, 1000).find("\ncolumns:") == std::string::npos);
  // Every NaN has a reason line: values are missing (no v) for the capacity columns.
  CHECK(analysis::head_report_table(report).find("separability_at_critical_n: needs scores and values") != std::string::npos);

  const auto selected = analysis::select_report_columns(columns, {"H", "sink_mass"});
  REQUIRE(selected.size() == 2);
  CHECK(selected[0].name == "entropy");
  CHECK_THROWS_WITH(analysis::select_report_columns(columns, {"nope"}), Catch::Matchers::Contains("unknown column 'nope'"));
  // max_attention and max_a, the column's names in attnscope 0.1.0, stand for max_max_weight
  CHECK(analysis::select_report_columns(columns, {"max_attention"})[0].name == "max_max_weight");
  CHECK(analysis::select_report_columns(columns, {"max_a"})[0].name == "max_max_weight");
  analysis::HeadReport sorted = analysis::compute_head_report(heads, selected);
  analysis::sort_head_report(sorted, "entropy");
  for (std::size_t i = 1; i < sorted.rows.size(); ++i) CHECK(sorted.rows[i - 1].values[0] >= sorted.rows[i].values[0]);
  analysis::sort_head_report(sorted, "sink", true);
  for (std::size_t i = 1; i < sorted.rows.size(); ++i) CHECK(sorted.rows[i - 1].values[1] <= sorted.rows[i].values[1]);
  CHECK_THROWS_AS(analysis::sort_head_report(sorted, "max_max_weight"), attnscope::invalid_argument);
}

TEST_CASE("head_report_table and sort_head_report accept a hand-made report without short names or reasons") {
  analysis::HeadReport report;
  report.columns = {"a_rather_long_column_name", "another_rather_long_column_name", "third_long_column_name_here"};
  for (int h = 0; h < 3; ++h) report.rows.push_back({0, h, {double(h), 1.0 / (h + 1), -double(h)}, {}, 0});
  const std::string table = analysis::head_report_table(report, 60);
  CHECK(table.find("a_rather_long_column_name = a_rather_long_column_name") != std::string::npos);
  CHECK(row_check_longest_line(table) <= 60);
  analysis::sort_head_report(report, "third_long_column_name_here");
  CHECK(report.rows[0].head == 0);
  CHECK(report.rows[2].head == 2);
}
