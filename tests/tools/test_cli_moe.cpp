// The commands on Mixture-of-Experts models with learned sinks (tests/fixtures/hf/gpt_oss, mixtral): capture writes
// each layer's learned sink shares and routing, which equal the fixture's independent reference; rowstats --model
// writes the learned-sink columns, consistent with the capture row by row (σ, the first key's mass, content mass
// 1 − σ − a_i0, the entropy of the composition); report adds the learned-sink columns, and its entropy and ‖J‖₂
// columns equal the means of rowstats' rows; compare reads the sinks and the experts of BF16 against MXFP4.
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "attnscope/io/npz.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;
using attnscope::testing::cli::slurp;

}  // namespace

TEST_CASE("attnscope capture and rowstats --model on gpt-oss: learned sinks and routing, consistent with the reference") {
  const std::string folder = attnscope::testing::hf_fixture_folder("gpt_oss");
  const std::string text = " --text-file " + attnscope::testing::hf_fixture_sample_text();
  const std::string captured = path_in_work_dir("moe_capture_gpt_oss.npz");
  const std::string statistics = path_in_work_dir("moe_rowstats_gpt_oss.npz");
  REQUIRE(attnscope_command("capture --model " + folder + text + " --out " + captured).exit_code == 0);
  REQUIRE(attnscope_command("rowstats --model " + folder + text + " --out " + statistics).exit_code == 0);
  const auto dense = attnscope::io::read_npz(captured);
  const auto rows = attnscope::io::read_npz(statistics);
  const auto reference = attnscope::io::read_npz(folder + "/reference.npz");
  for (int layer = 0; layer < 2; ++layer) {
    const std::string at = "layer" + std::to_string(layer) + ".";
    const auto sigma = dense.at(at + "learned_sink").to_matrix<double>();
    CHECK((sigma - reference.at(at + "learned_sink").to_matrix<double>()).cwiseAbs().maxCoeff() <= 1e-5);
    CHECK(dense.at(at + "experts").to_matrix<double>() == reference.at(at + "experts").to_matrix<double>());
    CHECK((dense.at(at + "expert_weights").to_matrix<double>() - reference.at(at + "expert_weights").to_matrix<double>())
              .cwiseAbs()
              .maxCoeff() <= 1e-5);
    const auto learned = rows.at(at + "learned_sink").to_matrix<double>();
    const auto content = rows.at(at + "content_mass").to_matrix<double>();
    const auto with_sink = rows.at(at + "entropy_with_sink").to_matrix<double>();
    const attnscope::io::Array& attention = dense.at(at + "attention");
    for (std::int64_t head = 0; head < 4; ++head) {
      const auto p = attention.slice_matrix<double>({head});
      for (Eigen::Index i = 0; i < p.rows(); ++i) {
        CHECK(std::abs(learned(head, i) - sigma(head, i)) <= 1e-7);
        CHECK(std::abs(content(head, i) - (1.0 - sigma(head, i) - p(i, 0))) <= 1e-6);
        double h = sigma(head, i) > 0 ? -sigma(head, i) * std::log(sigma(head, i)) : 0.0;
        for (Eigen::Index j = 0; j <= i; ++j)
          if (p(i, j) > 0) h -= p(i, j) * std::log(p(i, j));
        CHECK(std::abs(with_sink(head, i) - h) <= 1e-5);
      }
    }
  }
}

TEST_CASE("attnscope report, capture and compare on MoE models") {
  const std::string text = " --text-file " + attnscope::testing::hf_fixture_sample_text();
  const std::string oss = attnscope::testing::hf_fixture_folder("gpt_oss");
  const auto report = attnscope_command("report --model " + oss + text);
  REQUIRE(report.exit_code == 0);
  CHECK(contains(report.out, "sigma"));
  CHECK(contains(report.out, "content"));
  CHECK(contains(report.out, "# layer 0 experts: tokens per expert"));
  CHECK(contains(report.out, "mean routing entropy"));
  // a model without learned sinks has no such columns, and its capture has routing but no learned_sink
  const std::string mixtral = attnscope::testing::hf_fixture_folder("mixtral");
  const auto plain = attnscope_command("report --model " + mixtral + text);
  REQUIRE(plain.exit_code == 0);
  CHECK_FALSE(contains(plain.out, "sigma"));
  const std::string captured = path_in_work_dir("moe_capture_mixtral.npz");
  REQUIRE(attnscope_command("capture --model " + mixtral + text + " --out " + captured).exit_code == 0);
  const auto arrays = attnscope::io::read_npz(captured);
  CHECK(arrays.count("layer0.router_logits") == 1);
  CHECK(arrays.count("layer1.experts") == 1);
  CHECK(arrays.count("layer0.learned_sink") == 0);
  const auto compared = attnscope_command("compare --model " + oss + " --model " +
                                          attnscope::testing::hf_fixture_folder("gpt_oss_mxfp4") + text);
  REQUIRE(compared.exit_code == 0);
  CHECK(contains(compared.out, "d_sigma"));
  CHECK(contains(compared.out, "# layer 0 experts:"));
  CHECK(contains(compared.out, "chose a different set of experts"));
}

TEST_CASE("attnscope report on gpt-oss: the entropies and the exact ||J|| of learned-sink rows equal rowstats' rows") {
  const std::string folder = attnscope::testing::hf_fixture_folder("gpt_oss");
  const std::string text = " --text-file " + attnscope::testing::hf_fixture_sample_text();
  const std::string json = path_in_work_dir("moe_report_gpt_oss.json");
  const std::string statistics = path_in_work_dir("moe_report_rowstats_gpt_oss.npz");
  const auto report = attnscope_command("report --model " + folder + text + " --json " + json);
  REQUIRE(report.exit_code == 0);
  CHECK(contains(report.out, "sink channel: both"));
  REQUIRE(attnscope_command("rowstats --model " + folder + text + " --out " + statistics).exit_code == 0);
  const auto rows = attnscope::io::read_npz(statistics);
  const auto written = nlohmann::json::parse(slurp(json));
  int checked = 0;
  for (const auto& head : written.at("heads")) {
    const int layer = head.at("layer").get<int>(), h = head.at("head").get<int>();
    const std::string at = "layer" + std::to_string(layer) + ".";
    INFO("layer " << layer << " head " << h);
    for (const auto& [column, statistic] : {std::pair<std::string, std::string>{"mean_jacobian_norm", "jacobian_norm"},
                                            {"entropy", "entropy"},
                                            {"entropy_with_sink", "entropy_with_sink"},
                                            {"learned_sink", "learned_sink"}}) {
      REQUIRE(head.at(column).is_number());  // a learned-sink head has every one of them
      const double mean = rows.at(at + statistic).to_matrix<double>().row(h).mean();
      CHECK(std::abs(head.at(column).get<double>() - mean) <= 1e-5);
    }
    CHECK(head.at("max_jacobian_norm").get<double>() <= 0.5 + 1e-12);
    ++checked;
  }
  CHECK(checked == 8);
  // the sink channel is a choice: keys leaves σ out of the sink channel, so its sink share of the entropy is smaller
  const std::string keys_json = path_in_work_dir("moe_report_gpt_oss_keys.json");
  REQUIRE(attnscope_command("report --model " + folder + text + " --sink-channel keys --json " + keys_json).exit_code == 0);
  const auto keys = nlohmann::json::parse(slurp(keys_json));
  for (std::size_t i = 0; i < keys.at("heads").size(); ++i)
    CHECK(keys.at("heads")[i].at("sink_entropy_share").get<double>() <
          written.at("heads")[i].at("sink_entropy_share").get<double>());
  const auto bad = attnscope_command("report --model " + folder + text + " --sink-channel first");
  CHECK(bad.exit_code != 0);
  CHECK(contains(bad.err, "--sink-channel"));
}
