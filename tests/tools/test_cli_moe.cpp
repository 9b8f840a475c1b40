// The commands on Mixture-of-Experts models with learned sinks (tests/fixtures/hf/gpt_oss, mixtral): capture writes
// each layer's learned sink shares and routing, which equal the fixture's independent reference; rowstats --model
// writes the learned-sink columns, consistent with the capture row by row (σ, the first key's mass, content mass
// 1 − σ − a_i0, the entropy of the composition); report adds the learned-sink columns; compare refuses learned sinks.
#include <cmath>
#include <string>

#include "attnscope/io/npz.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;

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
  const auto refused = attnscope_command("compare --model " + oss + " --model " + oss + text);
  CHECK(refused.exit_code != 0);
  CHECK(contains(refused.err, "learned sink"));
}
