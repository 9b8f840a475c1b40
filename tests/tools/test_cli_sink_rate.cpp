// `attnscope report`'s sink score and sink rate (Gu et al. 2024, arXiv 2410.10781) on gpt2-wp-mini over War and
// Peace: each head's sink_score equals the mean weight on key 0 over the first T rows of the captured attention, and
// the sink-rate line gives, for each threshold, the fraction of heads whose score exceeds it, both computed here from
// the capture; --sink-rate-queries and --sink-threshold change them; bad values are usage errors.
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/npz.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;
using attnscope::testing::cli::slurp;

// The fraction of `scores` above each threshold, as the report prints it (3 significant digits).
std::string sink_rate_line(const std::vector<double>& scores, const std::vector<double>& thresholds) {
  std::ostringstream line;
  line << std::setprecision(3) << " above";
  for (std::size_t t = 0; t < thresholds.size(); ++t) {
    int above = 0;
    for (const double score : scores) above += score > thresholds[t];
    line << (t ? ", " : " ") << thresholds[t] << ": " << static_cast<double>(above) / static_cast<double>(scores.size());
  }
  return line.str();
}

}  // namespace

TEST_CASE("attnscope report: sink_score and the sink-rate line equal the capture's first-key attention") {
  const std::string model = attnscope::testing::data_file("gpt2-wp-mini");
  const std::string input = " --text-file " + attnscope::testing::data_file("war_and_peace.txt") + " --max-tokens 160";
  const std::string captured = path_in_work_dir("sink_rate_capture.npz");
  REQUIRE(attnscope_command("capture --model " + model + input + " --out " + captured).exit_code == 0);
  const auto arrays = attnscope::io::read_npz(captured);
  for (const int queries : {64, 8}) {
    INFO("T = " << queries);
    const std::string json = path_in_work_dir("sink_rate_report_" + std::to_string(queries) + ".json");
    const auto report = attnscope_command("report --model " + model + input + " --json " + json +
                                          " --sink-rate-queries " + std::to_string(queries) +
                                          " --sink-threshold 0.01,0.02,0.05");
    REQUIRE(report.exit_code == 0);
    const auto written = nlohmann::json::parse(slurp(json));
    std::vector<double> scores;
    for (const auto& head : written.at("heads")) {
      const int layer = head.at("layer").get<int>(), h = head.at("head").get<int>();
      const auto attention = arrays.at("layer" + std::to_string(layer) + ".attention").slice_matrix<double>({h});
      const double expected = attention.col(0).head(queries).mean();
      CHECK(std::abs(head.at("sink_score").get<double>() - expected) <= 1e-7);
      scores.push_back(head.at("sink_score").get<double>());
    }
    REQUIRE(scores.size() == 12);
    const std::string line = "# sink rate (Gu et al. 2024; 12 heads, T = " + std::to_string(queries) + "):" +
                             sink_rate_line(scores, {0.01, 0.02, 0.05});
    CHECK(contains(report.out, line));
  }
  for (const std::string bad : {" --sink-rate-queries 0", " --sink-threshold 0.2,x", " --sink-threshold nan"}) {
    const auto refused = attnscope_command("report --model " + model + input + bad);
    CHECK(refused.exit_code == 2);
    CHECK(contains(refused.err, bad.substr(1, bad.find(' ', 1) - 1)));
  }
}
